/*
 * lsm_merge.c — see lsm_merge.h.
 *
 * Every live row is gathered oldest first (runs from the oldest generation
 * up, rows inside a run in order), so after a stable sort by key the LAST
 * row of each key is the one the LSM read returns. Gathered in that order,
 * runs whose keys ascend and follow each other (ids from a counter, flushed
 * in turn: the usual case) are already sorted, and mw_pk_sort_rows says so
 * instead of sorting; the winners then come in stretches of consecutive
 * rows of one run, and each stretch is copied with one append per column.
 * Sample, int64 keys, generations 1 and 2 (t = tombstone):
 *
 *   gen 1: (5, a) (6, b) (7, c)      gen 2: (6, t) (7, d) (8, e)
 *   gathered: 5a 6b 7c | 6t 7d 8e    sorted: 5a 6b 6t 7c 7d 8e
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
  for (size_t i = 0; i < m->n_parts; i++)
    if (m->parts[i].cols) mw_batch_free(&m->parts[i]);
  free(m->parts);
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
    if (x->movable != NULL && x->movable != x->batch)
      return mw_err_set(err, -EINVAL, "merge: generation %" PRIu64 ": movable is not the run's batch",
                        x->generation);
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

/* Oldest first: runs from the first, rows in order, skipping deleted ones,
 * a stretch between two deletions at a time. A null key (a malformed
 * SSTable) is -EBADMSG naming its generation. */
static int gather(const mw_field_t *pkf, int pk, const mw_merge_run_t *runs, size_t n, mw_column_t *all,
                  src_t *srcs, mw_err_t *err) {
  int64_t k = 0;
  for (size_t r = 0; r < n; r++) {
    const mw_merge_run_t *x = &runs[r];
    const mw_column_t *col = &x->batch->cols[pk];
    int64_t row = 0, end = x->batch->n_rows;
    for (size_t d = 0; d <= x->n_deleted; d++) {
      int64_t stop = d < x->n_deleted ? (int64_t)x->deleted[d] : end; /* ascending (check_runs) */
      for (int64_t i = row; col->null_count > 0 && i < stop; i++)
        if (!mw_column_valid(col, i))
          return mw_err_set(err, -EBADMSG, "merge: generation %" PRIu64 " row %" PRId64
                            " has a null primary key", x->generation, i);
      int rc = mw_column_append_range(all, col, pkf, row, stop - row);
      if (rc < 0) return rc;
      for (int64_t i = row; i < stop; i++) srcs[k++] = (src_t){(uint32_t)r, (uint32_t)i};
      row = stop + 1;
    }
  }
  assert(k == all->length);
  return 0;
}

/* A stretch of winners to copy: `count` rows from `start` of one source. */
typedef struct span {
  int64_t start, count;
  uint32_t run;
} span_t;

/* A run every row of which wins, in one stretch, and that may be moved:
 * its base columns become a part of their own (no copy). */
static bool whole_run(const mw_merge_run_t *x, const span_t *sp) {
  return x->movable == x->batch && x->movable != NULL && sp->start == 0 && sp->count == x->batch->n_rows;
}

static int move_run(const mw_schema_t *base, mw_batch_t *from, mw_batch_t *part) {
  int rc = mw_batch_init(part, base);
  if (rc < 0) return rc;
  for (size_t c = 0; c < base->n_fields; c++) {
    mw_column_free(&part->cols[c]); /* mw_batch_init's empty column */
    part->cols[c] = from->cols[c];
    memset(&from->cols[c], 0, sizeof from->cols[c]);
  }
  part->n_rows = from->n_rows;
  return 0;
}

/* The stretch sp of winners into the parts: moved (whole_run) or copied
 * onto the last part, which a moved part closes. */
static int put_rows(const mw_schema_t *base, const mw_merge_run_t *runs, const span_t *sp, bool *copying,
                    mw_merge_t *out) {
  if (sp->count == 0) return 0;
  const mw_merge_run_t *x = &runs[sp->run];
  int rc = 0;
  if (whole_run(x, sp)) {
    *copying = false;
    rc = move_run(base, x->movable, &out->parts[out->n_parts]);
    if (rc == 0) out->n_parts++;
  } else {
    if (!*copying) {
      if ((rc = mw_batch_init(&out->parts[out->n_parts], base)) < 0) return rc;
      out->n_parts++;
      *copying = true;
    }
    assert(out->n_parts > 0);
    mw_batch_t *p = &out->parts[out->n_parts - 1];
    for (size_t c = 0; c < base->n_fields && rc == 0; c++)
      rc = mw_column_append_range(&p->cols[c], &x->batch->cols[c], &base->fields[c], sp->start, sp->count);
    if (rc == 0) p->n_rows += sp->count;
  }
  if (rc == 0) out->n_rows += sp->count;
  return rc;
}

/* The last row of each key wins (the newest: see gather). Its key joins
 * the keys, and unless it is a tombstone its row joins the rows; runs of
 * consecutive winners are copied a stretch at a time. */
static int emit(const mw_schema_t *table, const mw_schema_t *base, const mw_merge_run_t *runs,
                mw_column_t *all, const src_t *srcs, const uint32_t *order, mw_merge_t *out) {
  const mw_field_t *pkf = &base->fields[out->pk];
  size_t tomb = table->n_fields - 1;
  span_t keys = {0}, rows = {0};
  bool copying = false; /* the last part takes copied rows */
  int rc = 0;
  for (int64_t i = 0; i < all->length && rc == 0; i++) {
    uint32_t at = order[i];
    if (i + 1 < all->length && mw_pk_key_cmp(pkf, all, at, all, order[i + 1]) == 0) continue; /* older */
    if (keys.count > 0 && at != keys.start + keys.count) {
      rc = mw_column_append_range(&out->keys, all, pkf, keys.start, keys.count);
      keys.count = 0;
    }
    if (keys.count++ == 0) keys.start = at;
    src_t s = srcs[at];
    if (mw_bit_get(runs[s.run].batch->cols[tomb].values.data, s.row)) {
      out->tombstones++;
      continue;
    }
    if (rows.count > 0 && (s.run != rows.run || s.row != rows.start + rows.count)) {
      if (rc == 0) rc = put_rows(base, runs, &rows, &copying, out);
      rows.count = 0;
    }
    if (rows.count++ == 0) rows = (span_t){s.row, 1, s.run};
  }
  if (rc == 0 && keys.count == all->length && out->keys.length == 0) { /* every key won, in order */
    mw_column_free(&out->keys);
    out->keys = *all; /* moved: the caller's free of `all` then frees nothing */
    memset(all, 0, sizeof *all);
  } else if (rc == 0 && keys.count > 0) {
    rc = mw_column_append_range(&out->keys, all, pkf, keys.start, keys.count);
  }
  if (rc == 0) rc = put_rows(base, runs, &rows, &copying, out);
  assert(rc < 0 || out->keys.length == out->n_rows + out->tombstones);
  return rc;
}

int mw_merge_runs(const mw_schema_t *table, const mw_schema_t *base, const mw_merge_run_t *runs,
                  size_t n, mw_merge_t *out, mw_err_t *err) {
  assert(table != NULL);
  assert(base != NULL);
  assert(out != NULL);
  assert(runs != NULL || n == 0);
  memset(out, 0, sizeof *out);
  int64_t live = 0;
  int rc = check_schemas(table, base, &out->pk, err);
  if (rc == 0) rc = check_runs(table, runs, n, &live, err);
  if (rc < 0) return rc;
  if ((out->parts = calloc(MW_MERGE_MAX_PARTS(n), sizeof *out->parts)) == NULL) return -ENOMEM;
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
  if (rc == 1) rc = 0; /* ascending runs in turn: nothing sorted, order is 0..n-1 */
  assert(rc < 0 || nulls == 0);
  if (rc == 0) rc = emit(table, base, runs, &all, srcs, order, out);
  out->rows_in = live;
  out->n_keys = out->keys.length;
  if (rc < 0) mw_err_set(err, rc, "merge: %s", mw_strerror(rc));
  assert(rc < 0 || out->n_rows + out->tombstones == out->n_keys);
  assert(rc < 0 || out->n_parts <= MW_MERGE_MAX_PARTS(n));
  mw_column_free(&all);
  free(srcs);
  free(order);
  return rc;
}
