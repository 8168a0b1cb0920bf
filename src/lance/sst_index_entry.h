/*
 * sst_index_entry.h — one IndexMetadata (table.proto) of an SSTable's index
 * section, as LanceDB 0.39.0's shard writer writes it for each maintained
 * index (docs/indexes.md "The manifest entry"): uuid, fields, name,
 * dataset_version, the fragment bitmap {0}, index_details (an Any with an
 * empty value), index_version, created_at, and the files when the index
 * lists them (a BTree does; a vector index does not).
 *
 * Owns nothing. Used by vindex_file.c (vector) and sindex.c (BTree), which
 * sit below the manifest codec: dataset_manifest.h's mw_index_entry_encode
 * re-encodes an IndexMetadata already decoded by protobuf-c.
 * Errors: 0, or -ENOMEM (out is left as it was).
 */
#ifndef MW_LANCE_SST_INDEX_ENTRY_H
#define MW_LANCE_SST_INDEX_ENTRY_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

#define MW_SST_INDEX_ENTRY_MAX_FILES 8

typedef struct mw_sst_index_entry {
  const uint8_t *uuid;  /* 16 bytes: the _indices/<uuid>/ directory */
  const char *name;     /* the base index's name */
  int32_t field_id;     /* >= 0 */
  uint64_t dataset_version, index_version;
  uint64_t created_at_ms; /* 0: not written */
  const char *details_url; /* the Any's type URL */
  size_t n_files;          /* <= MW_SST_INDEX_ENTRY_MAX_FILES */
  const char *file_paths[MW_SST_INDEX_ENTRY_MAX_FILES];
  uint64_t file_bytes[MW_SST_INDEX_ENTRY_MAX_FILES];
} mw_sst_index_entry_t;

int mw_sst_index_entry_encode(const mw_sst_index_entry_t *e, mw_buf_t *out);

#endif
