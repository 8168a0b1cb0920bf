/*
 * transaction.h — Lance transaction files (`_transactions/<read_version>-<uuid>.txn`,
 * lance-files.md §6), decoding.
 *
 * Owns: the `lance.table.Transaction` message, read by walking the wire:
 *   1 read_version, 2 uuid, 3 tag, 4 transaction_properties (map<string,string>),
 *   then one operation (oneof, field numbers 100..116):
 *     100 append {1 fragments}        101 delete {1 updated_fragments,
 *     102 overwrite {1 fragments,          2 deleted_fragment_ids, 3 predicate}
 *         2 schema, 3 schema_metadata} 103 create_index {1 new_indices,
 *     104 rewrite {1 old, 2 new,            2 removed_indices}
 *         3 groups{1 old, 2 new}}      105 merge {1 fragments, 2 schema}
 *     106 restore {1 version}          107 reserve_fragments {1 num_fragments}
 *     108 update {1 removed_fragment_ids, 2 updated_fragments,
 *         3 new_fragments, 5 compacted_sstables}
 *     109 project {1 schema}           110 update_config
 *     111 data_replacement             112 update_mem_wal_state {1 compacted_sstables}
 *     113 clone  114 update_bases  115 data_overlay  116 append_fri_transitions
 * Sub-messages shared with the manifest (DataFragment, Field, IndexMetadata,
 * CompactedSsTable) are unpacked with table.proto's generated code. An
 * operation without details below is named and its size kept.
 *
 * The same message is what a manifest's transaction_section holds, and what
 * compaction (base_update.h) writes for its Update commits.
 *
 * Errors: negative errno; -EBADMSG with a reason naming the byte offset for
 * malformed bytes, -EFBIG over MW_TXN_MAX_BYTES or a list limit, -ENOMEM.
 */
#ifndef MW_LANCE_TRANSACTION_H
#define MW_LANCE_TRANSACTION_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "lance/batch.h"
#include "lance/dataset_manifest.h"
#include "table.pb-c.h"

#define MW_TXN_MAX_BYTES ((size_t)64 << 20)
#define MW_TXN_MAX_LIST 1000000

typedef struct mw_txn {
  uint64_t read_version;
  char *uuid;
  char *tag;
  mw_kvs_t properties;
  uint32_t op_tag;                 /* 100..116; 0 = no operation */
  const char *op_name;             /* "append", "update", ...; "unknown" */
  size_t op_bytes;                 /* size of the operation message */
  /* fragments: append/overwrite/merge fragments, delete/update updated
   * fragments, rewrite old fragments */
  Lance__Table__DataFragment **fragments;
  size_t n_fragments;
  /* update/rewrite new fragments */
  Lance__Table__DataFragment **new_fragments;
  size_t n_new_fragments;
  uint64_t *removed_ids;           /* delete deleted / update removed fragment ids */
  size_t n_removed_ids;
  Lance__File__Field **schema;     /* overwrite/merge/project */
  size_t n_schema;
  Lance__Table__IndexMetadata **new_indices, **removed_indices; /* create_index */
  size_t n_new_indices, n_removed_indices;
  mw_compacted_sstable_t *compacted; /* update / update_mem_wal_state */
  size_t n_compacted;
  char *predicate;                 /* delete */
  uint64_t restore_version;        /* restore */
  uint32_t reserve_fragments;      /* reserve_fragments */
  uint32_t n_unknown;              /* fields skipped */
} mw_txn_t;

/* Decode a whole .txn file (raw Transaction bytes). Free with
 * mw_txn_free, also after a failure. */
int mw_txn_decode(const uint8_t *p, size_t n, mw_txn_t *t, mw_err_t *err);
void mw_txn_free(mw_txn_t *t);
/* "append" for 100, ...; NULL for a number that is not an operation. */
const char *mw_txn_op_name(uint32_t tag);

#endif
