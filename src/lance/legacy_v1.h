/*
 * legacy_v1.h — Lance v1 ("legacy") data files: a reader.
 *
 * Owns: the layout defined by the legacy format.proto seed
 * (../shared/seeds/003_d2acac7685b87e3b.txt), which LanceDB 0.39.0 still
 * writes when a table is created with dataStorageVersion "legacy":
 *
 *   pages (column-major: every batch of field 0, then field 1, ...)
 *   [statistics pages]
 *   page table: N x M x {i64 position, i64 length}    N = max field id + 1
 *   [statistics page table]                           M = batches
 *   [u32 len || Manifest]           (optional; manifest_position, 0 = external)
 *   u32 len || Metadata             (at metadata_position, ends at the footer)
 *   i64 metadata_position | u16 major 0 | u16 minor 2 | "LANC"
 *
 * Messages (decoded with the wire walker of shard_manifest.h, no generated
 * code, so every field number below is the seed's):
 *   Metadata { 1 manifest_position, 2 batch_offsets (cumulative rows, M+1
 *              entries), 3 page_table_position, 5 statistics }
 *   Manifest { 1 fields, 2 fragments, 3 version, 4 version_aux_data,
 *              5 metadata, 6 index_section, 7 timestamp, 8 tag } plus
 *              writer_version (13) and data_format (15), which Lance writes
 *              there too (table.proto numbering)
 *   Field    { 1 type, 2 name, 3 id, 4 parent_id, 5 logical_type,
 *              6 nullable, 7 encoding, 8 dictionary {offset, length},
 *              9 extension_name }
 *   statistics (newer than the seed; lance.file.StatisticsMetadata):
 *              { 1 schema fields, 2 field ids, 3 page_table_position }: one
 *              page per statistics field holding one row per data batch.
 *
 * Pages: the page table's `length` counts items. PLAIN fixed-width values
 * lie back to back at `position` (bool: an LSB-first bitmap); VAR_BINARY
 * pages put the bytes first and `position` names (items + 1) i64 absolute
 * file offsets, the end of the bytes of item i being offset i+1. v1 files
 * store no validity: LanceDB 0.39.0 reads a null int/float/bool as 0/false
 * and an empty string or binary value of a nullable field as null (both
 * checked against its reads in the golden tests), and so do we.
 *
 * Errors: negative errno with a reason in *err naming the byte offset,
 * field and batch: -EBADMSG for malformed input, -ENOTSUP for valid
 * features we do not decode (dictionary/RLE pages, nested or other logical
 * types), -EFBIG over a limit, -ENOMEM.
 */
#ifndef MW_LANCE_LEGACY_V1_H
#define MW_LANCE_LEGACY_V1_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "lance/batch.h"

#define MW_V1_FOOTER_BYTES 16
#define MW_V1_MAX_FIELDS 4096
#define MW_V1_MAX_FIELD_ID 65535
#define MW_V1_MAX_BATCHES ((size_t)1 << 20)
#define MW_V1_MAX_PAGE_ENTRIES ((size_t)1 << 24)
#define MW_V1_MAX_ROWS ((uint64_t)1 << 27)
#define MW_V1_MAX_FRAGMENTS 100000
#define MW_V1_MAX_META_ENTRIES 4096

/* format.proto enums */
enum { MW_V1_FIELD_PARENT = 0, MW_V1_FIELD_REPEATED = 1, MW_V1_FIELD_LEAF = 2 };
enum { MW_V1_ENC_NONE = 0, MW_V1_ENC_PLAIN, MW_V1_ENC_VAR_BINARY, MW_V1_ENC_DICTIONARY, MW_V1_ENC_RLE };

typedef struct mw_v1_field {
  int32_t type;            /* PARENT / REPEATED / LEAF */
  char *name;
  int32_t id;
  int32_t parent_id;       /* -1: top level */
  char *logical_type;      /* "int32", "string", "fixed_size_list:float:3", ... */
  bool nullable;
  int32_t encoding;        /* MW_V1_ENC_* */
  int64_t dict_offset, dict_length;
  char *extension_name;
} mw_v1_field_t;

typedef struct mw_v1_fragment {
  uint64_t id;
  char **paths;            /* DataFile.path, one per file */
  size_t n_files;
} mw_v1_fragment_t;

typedef struct mw_v1_manifest {
  mw_v1_field_t *fields;
  size_t n_fields;
  mw_v1_fragment_t *fragments;
  size_t n_fragments;
  uint64_t version;
  uint64_t version_aux_data;
  mw_kvs_t metadata;
  bool has_index_section;
  uint64_t index_section;
  bool has_timestamp;
  int64_t ts_seconds;
  int32_t ts_nanos;
  char *tag;
  char *writer_library, *writer_version; /* table.proto 13, when present */
  char *data_format, *data_format_version; /* table.proto 15, when present */
  uint32_t n_unknown;      /* fields the seed does not define, skipped */
} mw_v1_manifest_t;

/* One page table (data or statistics). */
typedef struct mw_v1_pages {
  uint64_t position;       /* file offset of the table */
  size_t n_fields;         /* rows of the table: max field id + 1 */
  size_t n_batches;        /* entries per field */
} mw_v1_pages_t;

typedef struct mw_v1_file {
  const uint8_t *data;     /* borrowed */
  size_t len;
  uint16_t major, minor;
  uint64_t metadata_position;
  size_t metadata_len;     /* protobuf bytes after the u32 length */
  uint64_t manifest_position; /* 0 = stored outside the file */
  bool has_manifest;
  mw_v1_manifest_t manifest;
  uint64_t *batch_offsets; /* M + 1 cumulative row counts */
  size_t n_batch_offsets;
  mw_v1_pages_t pages;
  bool has_stats;
  mw_v1_field_t *stats_fields;
  size_t n_stats_fields;
  int32_t *stats_field_ids;
  size_t n_stats_field_ids;
  mw_v1_pages_t stats_pages;
  uint32_t n_unknown;      /* Metadata fields the seed does not define */
} mw_v1_file_t;

/* True when the last bytes are a v1 footer (LANC, major 0, minor 1 or 2). */
bool mw_v1_is_v1(const uint8_t *p, size_t n);
/* Parse footer, Metadata, the embedded Manifest and the page tables' shape.
 * The file must stay alive until mw_v1_close. Free with mw_v1_close, also
 * after a failure. */
int mw_v1_open(mw_v1_file_t *f, const uint8_t *p, size_t n, mw_err_t *err);
void mw_v1_close(mw_v1_file_t *f);
/* Rows in the file (last batch offset) and in batch b. */
uint64_t mw_v1_rows(const mw_v1_file_t *f);
/* Page table entry (checked against the file size). stats = the statistics
 * table. */
int mw_v1_page(const mw_v1_file_t *f, bool stats, int32_t field_id, size_t batch, uint64_t *pos,
               uint64_t *items, mw_err_t *err);
/* Map a v1 field to our model's type (name borrowed from fl). -ENOTSUP for
 * a logical type we do not decode. */
int mw_v1_field_type(const mw_v1_field_t *fl, mw_field_t *out, mw_err_t *err);
/* Decode field fl (one of f's manifest fields, or of its statistics
 * fields when stats) over every batch into an empty column of `mf` (from
 * mw_v1_field_type). */
int mw_v1_read_column(const mw_v1_file_t *f, bool stats, const mw_v1_field_t *fl,
                      const mw_field_t *mf, mw_column_t *out, mw_err_t *err);

#endif
