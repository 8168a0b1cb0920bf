/*
 * lsm_merge.c — see lsm_merge.h.
 *
 * Every live row is gathered newest first (runs from the newest generation
 * down, rows inside a run from the last to the first), so after a stable
 * sort by key the first row of each key is the one the LSM read returns.
 * Sample, int64 keys, generations 1 and 2 (t = tombstone):
 *
 *   gen 1: (5, a) (6, b) (7, c)      gen 2: (6, t) (7, d) (8, e)
 *   gathered: 8e 7d 6t | 7c 6b 5a    sorted: 5a 6t 6b 7d 7c 8e
 *   winners:  5a 6t 7d 8e   ->  rows 5a 7d 8e, keys 5 6 7 8, tombstones 1
 */
#include "lance/lsm_merge.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "lance/bloom.h"
#include "lance/pk_index.h"

void mw_merge_free(mw_merge_t *m) {
  if (m == NULL) return;
  if (m->rows.cols) mw_batch_free(&m->rows);
  mw_column_free(&m->keys);
  memset(m, 0, sizeof *m);
}

static int check_schemas(const mw_schema_t *table, const mw_schema_t *base, int *pk, mw_err_t *err) {
  if (table->n_fields != base->n_fields + 1 || base->n_fields == 0)
    return mw_err_set(err, -EINVAL, "merge: table schema has %zu fields, base %zu (want base + _tombstone)",
                      table->n_fields, base->n_fields);
  const mw_field_t *t = &table->fields[table->n_fields - 1];
  if (strcmp(t->name, "_tombstone") != 0 || t->type != MW_T_BOOL)
    return mw_err_set(err, -EINVAL, "merge: the table schema's last field is not _tombstone");
  *pk = -1;
  for (size_t i = 0; i < base->n_fields; i++) {
    const mw_field_t *a = &table->fields[i], *b = &base->fields[i];
    if (strcmp(a->name, b->name) != 0 || !mw_field_type_equal(a, b) || a->id != b->id ||
        a->pk_position != b->pk_position)
      return mw_err_set(err, -EINVAL, "merge: field %zu is '%s' in the table, '%s' in the base", i,
                        a->name, b->name);
    if (a->pk_position == 0) continue;
    if (*pk >= 0) return mw_err_set(err, -ENOTSUP, "merge: composite primary keys are not supported");
    *pk = (int)i;
  }
  if (*pk < 0) return mw_err_set(err, -ENOTSUP, "merge: the table has no primary key");
  return 0;
}

static int check_runs(const mw_schema_t *table, const mw_merge_run_t *runs, size_t n, int64_t *live,
                      mw_err_t *err) {
  *live = 0;
  if (n > MW_MERGE_MAX_RUNS) return mw_err_set(err, -EFBIG, "merge: %zu runs", n);
  for (size_t r = 0; r < n; r++) {
    const mw_merge_run_t *x = &runs[r];
    if (r > 0 && x->generation <= runs[r - 1].generation)
      return mw_err_set(err, -EINVAL, "merge: generation %" PRIu64 " after %" PRIu64, x->generation,
                        runs[r - 1].generation);
    if (x->batch == NULL || x->batch->schema->n_fields != table->n_fields)
      return mw_err_set(err, -EINVAL, "merge: generation %" PRIu64 " is not in the table schema",
                        x->generation);
    for (size_t i = 0; i < x->n_deleted; i++)
      if (x->deleted[i] >= x->batch->n_rows || (i > 0 && x->deleted[i] <= x->deleted[i - 1]))
        return mw_err_set(err, -EINVAL, "merge: generation %" PRIu64 ": deletion offset %u out of order or range",
                          x->generation, x->deleted[i]);
    *live += x->batch->n_rows - (int64_t)x->n_deleted;
    if (*live > MW_MERGE_MAX_ROWS) return mw_err_set(err, -EFBIG, "merge: more than %" PRId64 " rows", MW_MERGE_MAX_ROWS);
  }
  return 0;
}

typedef struct src {
  uint32_t run;
  uint32_t row;
} src_t;

/* Newest first: runs from the last, rows from the last, skipping deleted.
 * A null key (a malformed SSTable) is -EBADMSG naming its generation. */
static int gather(const mw_field_t *pkf, int pk, const mw_merge_run_t *runs, size_t n, mw_column_t *all,
                  src_t *srcs, mw_err_t *err) {
  int64_t k = 0;
  for (size_t r = n; r-- > 0;) {
    const mw_merge_run_t *x = &runs[r];
    size_t d = x->n_deleted;
    for (int64_t row = x->batch->n_rows; row-- > 0;) {
      if (d > 0 && x->deleted[d - 1] == (uint32_t)row) {
        d--;
        continue;
      }
      if (!mw_column_valid(&x->batch->cols[pk], row))
        return mw_err_set(err, -EBADMSG, "merge: generation %" PRIu64 " row %" PRId64
                          " has a null primary key", x->generation, row);
      int rc = mw_column_append_range(all, &x->batch->cols[pk], pkf, row, 1);
      if (rc < 0) return rc;
      srcs[k].run = (uint32_t)r;
      srcs[k++].row = (uint32_t)row;
    }
  }
  assert(k == all->length);
  return 0;
}

static int emit(const mw_schema_t *table, const mw_schema_t *base, const mw_merge_run_t *runs,
                const mw_column_t *all, const src_t *srcs, const uint32_t *order, mw_merge_t *out) {
  const mw_field_t *pkf = &base->fields[out->pk];
  size_t tomb = table->n_fields - 1;
  for (int64_t i = 0; i < all->length; i++) {
    uint32_t at = order[i];
    if (i > 0 && mw_pk_key_cmp(pkf, all, order[i - 1], all, at) == 0) continue; /* older copy */
    const mw_batch_t *b = runs[srcs[at].run].batch;
    int64_t row = srcs[at].row;
    int rc = mw_column_append_range(&out->keys, all, pkf, at, 1);
    if (rc < 0) return rc;
    if (mw_bit_get(b->cols[tomb].values.data, row)) {
      out->tombstones++;
      continue;
    }
    for (size_t c = 0; c < base->n_fields; c++)
      if ((rc = mw_column_append_range(&out->rows.cols[c], &b->cols[c], &base->fields[c], row, 1)) < 0)
        return rc;
    out->rows.n_rows++;
  }
  return 0;
}

int mw_merge_runs(const mw_schema_t *table, const mw_schema_t *base, const mw_merge_run_t *runs,
                  size_t n, mw_merge_t *out, mw_err_t *err) {
  assert(table != NULL && base != NULL && out != NULL);
  assert(runs != NULL || n == 0);
  memset(out, 0, sizeof *out);
  int64_t live = 0;
  int rc = check_schemas(table, base, &out->pk, err);
  if (rc == 0) rc = check_runs(table, runs, n, &live, err);
  if (rc < 0) return rc;
  if ((rc = mw_batch_init(&out->rows, base)) < 0) return rc;
  const mw_field_t *pkf = &base->fields[out->pk];
  mw_column_t all;
  if ((rc = mw_column_init(&all, pkf)) < 0 || (rc = mw_column_init(&out->keys, pkf)) < 0) {
    mw_column_free(&all);
    return rc;
  }
  src_t *srcs = malloc((size_t)(live + 1) * sizeof *srcs);
  uint32_t *order = malloc((size_t)(live + 1) * sizeof *order);
  int64_t nulls = 0;
  if (srcs == NULL || order == NULL) rc = -ENOMEM;
  if (rc == 0) rc = gather(pkf, out->pk, runs, n, &all, srcs, err);
  if (rc == 0) rc = mw_pk_sort_rows(pkf, &all, order, &nulls);
  if (rc == 1) rc = 0; /* the runs' keys already in order: order is 0..n-1 */
  assert(rc < 0 || nulls == 0);
  if (rc == 0) rc = emit(table, base, runs, &all, srcs, order, out);
  out->rows_in = live;
  out->n_keys = out->keys.length;
  if (rc < 0) mw_err_set(err, rc, "merge: %s", mw_strerror(rc));
  assert(rc < 0 || out->rows.n_rows + out->tombstones == out->n_keys);
  mw_column_free(&all);
  free(srcs);
  free(order);
  return rc;
}
