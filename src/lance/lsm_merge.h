/*
 * lsm_merge.h — merge-insert of a shard's SSTables: the rows compaction
 * writes into the base table and the keys whose base rows it masks
 * (memwal.md §10, §11).
 *
 * Owns the LSM read rule for a run of generations, exactly as LanceDB's
 * scanner applies it: per primary key the newest generation wins; inside an
 * SSTable its deletion vector has already dropped older duplicates (and if
 * two live rows share a key anyway, the later row wins); a winning row with
 * `_tombstone = true` deletes the key. Out come
 *   - rows: every winner that is not a tombstone, in the base schema (the
 *     table schema without `_tombstone`), sorted by key, as a list of
 *     batches (parts) read in order: a run whose every row wins in one
 *     stretch (ids ascending through the runs, the usual case) and that
 *     the caller marked movable has its columns moved into a part of its
 *     own; the other winners are copied into parts between those;
 *   - keys: every winning key, tombstones included, sorted (ascending, the
 *     PK order of pk_index.h): the base rows holding them are superseded.
 * Generic over columns: rows are copied with mw_column_append_range, a
 * stretch of consecutive rows of one run at a time.
 *
 * I/O free; the input batches are only read. Memory: the output plus about
 * 16 bytes per input row.
 *
 * Errors: negative errno with a reason in *err: -EINVAL (runs not in
 * ascending generation order, a schema that is not the base schema plus a
 * trailing `_tombstone`, a deletion offset out of range), -EBADMSG (a null
 * primary key in an SSTable), -ENOTSUP (not exactly one PK column), -ENOMEM,
 * -EFBIG (more than MW_MERGE_MAX_ROWS live rows).
 */
#ifndef MW_LANCE_LSM_MERGE_H
#define MW_LANCE_LSM_MERGE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "lance/batch.h"

#define MW_MERGE_MAX_ROWS ((int64_t)MW_MAX_BATCH_ROWS)
#define MW_MERGE_MAX_RUNS 65536
/* a moved run between two copied parts at most: 2 n + 1 parts */
#define MW_MERGE_MAX_PARTS(n) (2 * (n) + 1)

typedef struct mw_merge_run {
  const mw_batch_t *batch;  /* the SSTable's rows: table schema, `_tombstone` last */
  mw_batch_t *movable;      /* NULL, or batch itself: the caller frees it after the merge and
                               lets the merge take its columns (then they are empty) */
  const uint32_t *deleted;  /* ascending row offsets its deletion file masks */
  size_t n_deleted;
  uint64_t generation;
} mw_merge_run_t;

typedef struct mw_merge {
  mw_batch_t *parts;        /* the rows in key order, n_parts batches borrowing the base schema */
  size_t n_parts;
  int64_t n_rows;           /* rows in all parts */
  mw_column_t keys;         /* the PK field's type */
  int64_t n_keys;
  int64_t rows_in;          /* live rows read from the runs */
  int64_t tombstones;       /* winning tombstones */
  int pk;                   /* index of the PK field in both schemas */
} mw_merge_t;

/* runs[0..n) oldest generation first (strictly ascending). `base` is the
 * table schema without its last field `_tombstone`. *out is initialised
 * here; free with mw_merge_free, also after a failure. */
int mw_merge_runs(const mw_schema_t *table, const mw_schema_t *base, const mw_merge_run_t *runs,
                  size_t n, mw_merge_t *out, mw_err_t *err);
void mw_merge_free(mw_merge_t *m);

#endif
