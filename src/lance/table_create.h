/*
 * table_create.h — bootstrap a LanceDB table with the MemWAL index, I/O free.
 *
 * Owns: the bytes of a brand-new table as LanceDB 0.39.0 (Lance 12.0.0)
 * writes it for `createEmptyTable(name, schema_with_pk_metadata)` followed by
 * `setLsmWriteSpec(spec)` (memwal.md §8.1, §8.2; lance-files.md §4):
 *
 *   _transactions/0-<uuid1>.txn            Transaction{uuid1, overwrite{schema}}
 *   _versions/18446744073709551614.manifest version 1: fields (PK markers),
 *                                          no fragments, txn inline at 0
 *   _transactions/1-<uuid2>.txn            Transaction{read_version 1, uuid2,
 *                                          create_index{[IndexMetadata]}}
 *   _versions/18446744073709551613.manifest version 2: index section at 0,
 *                                          txn section after it
 *   _versions/latest_version_hint.json     {"version":2}
 *
 * The files come back in that order, which is the order to write them in:
 * each manifest after its transaction file, the hint last. The caller (the
 * daemon) writes the two manifests with put-if-absent, so a concurrent
 * creator loses cleanly.
 *
 * A sample (bucket(id,4) spec, decoded with protoc --decode_raw), version 2's
 * transaction:
 *   1: 1  2: "8084189f-…"  103 { 1 { 1 {1: <16 bytes>} 3: "__lance_mem_wal" 4: 1
 *     6 { 1: "/lance.table.MemWalIndexDetails" 2 { 2: 4 7 { 1: 1 2 { 1: "bucket"
 *     2: "\000" 3: "bucket" 5: "int32" 6 { 1: "num_buckets" 2: "4" } } } } }
 *     7: 0 8: <created_at ms> } }
 * Neither manifest carries max_fragment_id (no fragments ever existed), and
 * both say writer lance 12.0.0, data format lance 2.2.
 *
 * The golden test (tests/lance/test_table_create.c) rebuilds three tables that
 * LanceDB 0.39.0 itself wrote and compares every byte.
 *
 * Errors: negative errno with a reason in *err: -EINVAL for a schema without
 * a primary key or a spec that does not fit it, -ENOTSUP for an identity
 * spec on a type LanceDB refuses (binary, floats, vectors), -ENOMEM.
 */
#ifndef MW_LANCE_TABLE_CREATE_H
#define MW_LANCE_TABLE_CREATE_H

#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"
#include "lance/batch.h"
#include "lance/schema_text.h"

#define MW_TABLE_CREATE_FILES 5
#define MW_TABLE_CREATE_PATH_BYTES 96
#define MW_TABLE_CREATE_MAX_WRITER_DEFAULTS 64

typedef struct mw_table_file {
  char path[MW_TABLE_CREATE_PATH_BYTES]; /* relative to the table directory */
  mw_buf_t bytes;
} mw_table_file_t;

typedef struct mw_table_create_params {
  const mw_schema_t *schema;       /* user columns (no _tombstone), PK applied */
  const mw_shard_spec_t *spec;     /* column = index into schema */
  const mw_kvs_t *writer_config_defaults; /* NULL = none; stored in order */
  /* Identities and times; all-zero uuids / zero times = random v4 / now. */
  uint8_t txn1_uuid[16];
  uint8_t txn2_uuid[16];
  uint8_t index_uuid[16];
  int64_t v1_seconds;
  int32_t v1_nanos;
  int64_t v2_seconds;
  int32_t v2_nanos;
  uint64_t created_at_ms;
} mw_table_create_params_t;

typedef struct mw_table_files {
  mw_table_file_t files[MW_TABLE_CREATE_FILES];
  size_t n;
} mw_table_files_t;

/* Build the five files. *out is initialised here; free with
 * mw_table_files_free (also after a failure). */
int mw_table_create_encode(const mw_table_create_params_t *p, mw_table_files_t *out,
                           mw_err_t *err);
void mw_table_files_free(mw_table_files_t *f);
/* Arrow type name LanceDB stores as an identity spec's result_type ("int64",
 * "utf8", "boolean", ...), or NULL when identity is refused for the type. */
const char *mw_table_identity_result_type(mw_type_t t);

#endif
