/*
 * base_update.h — one compaction commit of the base table, as bytes: the
 * Lance `Update` transaction and the next base manifest (lance-files.md
 * §4-§6; memwal.md §8.1, §11).
 *
 * Owns: turning a plan (new deletion files on existing fragments, fragments
 * removed, new fragments appended, the MemWAL `compacted_sstables` to
 * advance) and the latest base manifest into
 *
 *   _transactions/<read_version>-<uuid>.txn   Transaction { 1: read_version,
 *       2: uuid, 108: Update { 1: removed_fragment_ids, 2: updated_fragments,
 *       3: new_fragments (ids unassigned, 0), 5: compacted_sstables,
 *       6: fields_for_preserving_frag_bitmap } }
 *   _versions/<version>.manifest              version = read_version + 1:
 *       the previous manifest with the fragments changed, new fragment ids
 *       from max_fragment_id + 1, the deletion feature flag (bit 0, reader
 *       and writer) set when any fragment has a deletion file, writer
 *       lance 12.0.0, the index section (the MemWAL entry rewritten with a
 *       fresh uuid, dataset_version = version and the new compacted_sstables
 *       when they advance; every other entry byte for byte), then the same
 *       transaction inline, and `transaction_file` naming the .txn.
 *
 * That is what Lance 12's own commit of an Update writes (its
 * `update_mem_wal_index_compacted_sstables` mints the fresh index uuid so
 * that caches keyed on it see the change). The golden test rebuilds the
 * manifest LanceDB 0.39.0 wrote for `Table.update` byte for byte
 * (tests/lance/test_base_update.c).
 *
 * I/O free. The caller writes the data and deletion files first, the .txn
 * (plain put), then the manifest with put-if-absent: losing that race means
 * another writer committed `version` first (reload and plan again).
 *
 * Errors: negative errno with a reason in *err: -EINVAL for a plan that does
 * not fit the manifest (unknown or repeated fragment ids, a deletion that
 * covers every row: remove the fragment instead), -ESTALE when a
 * compacted_sstables generation does not advance (another compactor got
 * there first), -ENOTSUP for a table without the MemWAL index when the plan
 * advances it, -ENOMEM, -EFBIG.
 */
#ifndef MW_LANCE_BASE_UPDATE_H
#define MW_LANCE_BASE_UPDATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"
#include "lance/dataset_manifest.h"

#define MW_BASE_UPDATE_MAX_FRAGMENTS 65536 /* per plan, each list */
/* "<u64>-<36-char uuid>.txn" + NUL */
#define MW_TXN_NAME_BYTES 64
#define MW_TXN_DIR "_transactions"

/* Lance's DeletionFile.file_type. memwald writes BITMAP; LanceDB's own
 * deletes write ARROW_ARRAY. */
typedef enum mw_deletion_kind {
  MW_DELETION_ARROW = 0,
  MW_DELETION_BITMAP = 1,
} mw_deletion_kind_t;

/* A new deletion file for an existing fragment (it replaces the old one, so
 * it must hold the old offsets too). read_version = the plan's read version,
 * so its name is `<fragment_id>-<read_version>-<id>.bin`. */
typedef struct mw_bu_deletion {
  uint64_t fragment_id;
  mw_deletion_kind_t kind;
  uint64_t id;
  uint64_t num_deleted_rows; /* 1 .. physical_rows - 1 */
} mw_bu_deletion_t;

/* A new fragment: one data file under data/ (Lance 2.2) holding the fields
 * field_ids[i] as column column_indices[i]. */
typedef struct mw_bu_fragment {
  const char *data_file;
  uint64_t file_size_bytes;
  uint64_t physical_rows;
  const int32_t *field_ids;
  const int32_t *column_indices;
  size_t n_columns;
} mw_bu_fragment_t;

typedef struct mw_base_update {
  const mw_bu_deletion_t *deletions;
  size_t n_deletions;
  const uint64_t *removed;          /* fragment ids dropped whole */
  size_t n_removed;
  const mw_bu_fragment_t *fragments;
  size_t n_fragments;
  const mw_compacted_sstable_t *compacted; /* each must advance its shard */
  size_t n_compacted;
  const uint32_t *preserve_fields;  /* Update.fields_for_preserving_frag_bitmap */
  size_t n_preserve_fields;
  uint8_t txn_uuid[16];             /* all zero: random v4 */
  uint8_t index_uuid[16];           /* the rewritten MemWAL entry; zero: random */
  int64_t timestamp_ns;             /* manifest timestamp; 0: now */
  /* Set in both reader and writer feature flags: MW_FLAG_ZONE_WRITE_SEEDS
   * when the new fragments carry zone write seeds v1 (this is then the
   * commit that first references them, or a later one; flags the previous
   * version has are kept either way). */
  uint64_t add_feature_flags;
  uint64_t created_at_ms;           /* MemWAL entry created_at; 0: now */
} mw_base_update_t;

typedef struct mw_base_commit {
  uint64_t read_version;
  uint64_t version;                 /* read_version + 1 */
  uint64_t first_fragment_id;       /* the new fragments got first.. +n-1 */
  uint64_t live_rows;               /* rows visible in `version` */
  char txn_name[MW_TXN_NAME_BYTES]; /* under _transactions/ */
  mw_buf_t txn;                     /* the .txn file (= the inline section) */
  mw_buf_t manifest;                /* the whole _versions/ file */
} mw_base_commit_t;

void mw_base_commit_init(mw_base_commit_t *c);
void mw_base_commit_free(mw_base_commit_t *c);

/* Build the commit of `u` on top of `prev` (the latest base manifest, as
 * read by mw_table_meta_read). `out` is (re)initialised; on failure it is
 * left empty. */
int mw_base_update_build(const mw_table_meta_t *prev, const mw_base_update_t *u,
                         mw_base_commit_t *out, mw_err_t *err);

/* The generation recorded for `shard_id` in the MemWAL index (0: none). */
uint64_t mw_memwal_compacted(const mw_memwal_index_t *x, const uint8_t shard_id[16]);

#endif
