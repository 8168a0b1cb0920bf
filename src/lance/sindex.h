/*
 * sindex.h — the per-SSTable BTree index of a maintained scalar index
 * (issue 27; docs/indexes.md).
 *
 * A LanceDB table whose MemWAL write spec maintains a BTree index gets, in
 * every SSTable LanceDB 0.39.0's own writer flushes, that column's BTree:
 *
 *   <dir>/_indices/<uuid v4>/page_data.lance    values (the column's type,
 *       nullable, field id 0) sorted nulls first, then by value, ties by row;
 *       ids uint64 (field id 1) = the row's offset in the data file
 *   <dir>/_indices/<uuid v4>/page_lookup.lance  one row per 4096 entries:
 *       min (null when the page holds nulls), max, null_count uint32,
 *       page_idx uint32; schema metadata batch_size = "4096",
 *       range_partitioned = "false"
 *
 * and an IndexMetadata in the SSTable manifest's index section naming the
 * uuid, the base index's name, the column's field id, dataset_version 1,
 * fragment bitmap {0}, index_details `/lance.table.BTreeIndexDetails`
 * (empty), index_version 0, created_at and both files with their sizes.
 * LanceDB's filtered search then reads the SSTable through it
 * (ScalarIndexQuery); without it LanceDB scans the SSTable's data.
 *
 * Owns: building both files (pk_index.c's BTree writer in LanceDB's shape),
 * the manifest entry, and reading both files back with every invariant
 * checked (mw_sindex_check: the read-back of a build and the decoder that
 * memwal-inspect and the fuzz target use). Pure: no I/O.
 *
 * Column types: those mw_btree_type_ok accepts (int32, int64, uint32,
 * uint64, utf8, large_utf8, binary, large_binary). A maintained BTree on
 * another type gets no per-SSTable index (LanceDB then scans; the table
 * logs it at open).
 *
 * Errors: negative errno with a reason in *err; -EBADMSG for files that
 * break an invariant, naming it.
 */
#ifndef MW_LANCE_SINDEX_H
#define MW_LANCE_SINDEX_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"
#include "lance/batch.h"

#define MW_SINDEX_PAGE_ROWS 4096
#define MW_SINDEX_DATA_FILE "page_data.lance"
#define MW_SINDEX_LOOKUP_FILE "page_lookup.lance"
#define MW_SINDEX_DETAILS_URL "/lance.table.BTreeIndexDetails"
/* the most rows a checked index may name (an SSTable's data file) */
#define MW_SINDEX_MAX_ROWS ((uint64_t)1 << 32)

/* Both files of the BTree of `col` (every physical row of the SSTable, in
 * data-file order; type mw_btree_type_ok) appended to data and lookup. */
int mw_sindex_build(const mw_field_t *field, const mw_column_t *col, mw_buf_t *data, mw_buf_t *lookup,
                    mw_err_t *err);

/* The IndexMetadata message for the manifest's index section (appended). */
int mw_sindex_entry_encode(const uint8_t uuid[16], const char *name, int32_t field_id, uint64_t created_at_ms,
                           uint64_t data_bytes, uint64_t lookup_bytes, mw_buf_t *out, mw_err_t *err);

typedef struct mw_sindex_info {
  uint64_t entries;   /* rows of page_data (= the SSTable's rows) */
  uint64_t nulls;     /* null values */
  uint64_t pages;     /* rows of page_lookup */
  uint32_t page_rows; /* its batch_size */
  mw_type_t type;     /* the values' type */
} mw_sindex_info_t;

/* Decode both files and check them: the schemas above; page_data's values
 * in order (nulls first) and its ids a permutation of 0..entries-1; each
 * page_lookup row the min (or null), max, null count and index of its page
 * of batch_size entries (1..8192). field and col (both or neither): the
 * indexed column; the values must be of its type and every entry must hold
 * the value of its row in col, and entries must equal col's rows. */
int mw_sindex_check(const uint8_t *data, size_t data_len, const uint8_t *lookup, size_t lookup_len,
                    const mw_field_t *field, const mw_column_t *col, mw_sindex_info_t *info, mw_err_t *err);

#endif
