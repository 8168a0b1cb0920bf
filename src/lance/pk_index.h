/*
 * pk_index.h — the `_pk_index/` BTree scalar index of a MemWAL SSTable
 * (lance-files.md §7.1).
 *
 * Owns: building the two Lance files of the index from the primary-key column
 * of an SSTable: page_data.lance (`values` = every key, sorted by (key, row),
 * and `ids` = the row address, which is the row offset in fragment 0) and
 * page_lookup.lance (one row per 8192-entry page: min, max, null_count,
 * page_idx; schema metadata batch_size="8192", range_partitioned="false").
 *
 * Keys: int32, int64, uint32, uint64, and the VAR types (utf8, large_utf8, binary,
 * large_binary; sorted by bytes). Null keys (undefined in
 * Lance for a primary key) sort first and are counted in null_count.
 *
 * Errors: negative errno; -EINVAL for an unsupported key type or a column that
 * does not match the field, -ENOMEM, -EFBIG; a reason in *err.
 */
#ifndef MW_LANCE_PK_INDEX_H
#define MW_LANCE_PK_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"
#include "lance/batch.h"

#define MW_PK_INDEX_PAGE_ROWS 8192
#define MW_PK_INDEX_DATA_FILE "page_data.lance"
#define MW_PK_INDEX_LOOKUP_FILE "page_lookup.lance"

/* Build both files for the key column `keys` (every physical row of the
 * SSTable, duplicates included; row i gets id fragment_id << 32 | i).
 * Appends a complete data file to each of page_data and page_lookup. */
int mw_pk_index_write(const mw_field_t *pk_field, const mw_column_t *keys, uint32_t fragment_id,
                      mw_buf_t *page_data, mw_buf_t *page_lookup, mw_err_t *err);

/* The shape of a BTree index's files: entries per page_lookup page (the
 * `batch_size` metadata; at most MW_PK_INDEX_PAGE_ROWS) and whether a page
 * holding nulls has a null min (a maintained BTree, sindex.h) or its first
 * non-null key (the _pk_index). */
typedef struct mw_btree_shape {
  uint32_t page_rows;
  bool null_min;
} mw_btree_shape_t;

/* Whether a column of type t can be BTree-indexed here: int32, int64,
 * uint32, uint64 and the VAR types. */
bool mw_btree_type_ok(mw_type_t t);

/* mw_pk_index_write with another shape, for any column of a type
 * mw_btree_type_ok accepts (null values sort first). */
int mw_btree_index_write(const mw_field_t *field, const mw_column_t *keys, uint32_t fragment_id,
                         const mw_btree_shape_t *shape, mw_buf_t *page_data, mw_buf_t *page_lookup,
                         mw_err_t *err);

/* The order both the index and compaction's own key index use: null keys
 * first, integers by value (signed types signed), strings and binary by
 * memcmp then length. Rows with equal keys keep their order (stable).
 * rows gets keys->length entries; *n_nulls = how many nulls lead.
 * Returns 1 when the keys already stood in that order with no nulls
 * (rows is 0..n-1 and nothing was sorted: callers may copy the keys in
 * place of gathering them), 0 when they were sorted, or -ENOMEM. */
int mw_pk_sort_rows(const mw_field_t *pk, const mw_column_t *keys, uint32_t *rows,
                    int64_t *n_nulls);
/* <0, 0, >0: key a[i] against key b[j] in that order (same field type). */
int mw_pk_key_cmp(const mw_field_t *pk, const mw_column_t *a, int64_t i, const mw_column_t *b,
                  int64_t j);

#endif
