/*
 * test_lsm_merge.c — the merge-insert of a shard's SSTables (lsm_merge.h).
 *
 * The sample of lsm_merge.c, a utf8-keyed table, duplicates inside one run
 * (the later row wins), deletion vectors, and a randomised model: runs of
 * random upserts and tombstones over a small key space, merged, must equal
 * the model's final state key by key (value and absence), also with keys
 * that ascend through the runs (nothing to sort: winners copied in
 * stretches) and runs that each ascend but overlap. Refusals: runs out
 * of order, a foreign schema, a null key, an offset out of range.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cases.h"

#include "lance/lsm_merge.h"
#include "lance/pk_index.h"

/* table {id: T pk, v: int64 nullable, _tombstone}; base without the last */
static void schemas(mw_type_t key, mw_schema_t *table, mw_schema_t *base) {
  mw_schema_init(base);
  assert_int_equal(mw_schema_add(base, "id", key, false), 0);
  assert_int_equal(mw_schema_add(base, "v", MW_T_INT64, true), 1);
  base->fields[0].pk_position = 1;
  base->fields[0].id = 0;
  base->fields[1].id = 1;
  assert_int_equal(mw_schema_copy(table, base), 0);
  assert_int_equal(mw_schema_add(table, "_tombstone", MW_T_BOOL, false), 2);
  table->fields[2].id = 2;
}

static void put(mw_batch_t *b, int64_t key, int64_t v, bool tomb) {
  const mw_field_t *f = &b->schema->fields[0];
  if (f->type == MW_T_UTF8) {
    char s[32];
    int n = snprintf(s, sizeof s, "k%lld", (long long)key);
    assert_int_equal(mw_column_append_bytes(&b->cols[0], s, (size_t)n), 0);
  } else {
    assert_int_equal(mw_column_append_fixed(&b->cols[0], &key, 8), 0);
  }
  if (tomb) assert_int_equal(mw_column_append_null(&b->cols[1], &b->schema->fields[1]), 0);
  else assert_int_equal(mw_column_append_fixed(&b->cols[1], &v, 8), 0);
  assert_int_equal(mw_column_append_bool(&b->cols[2], tomb), 0);
  b->n_rows++;
}

static int64_t key_at(const mw_field_t *f, const mw_column_t *c, int64_t i) {
  if (f->type == MW_T_UTF8) {
    size_t n;
    const uint8_t *p = mw_column_bytes(c, i, &n);
    char s[32];
    memcpy(s, p, n);
    s[n] = 0;
    return strtoll(s + 1, NULL, 10);
  }
  int64_t k;
  memcpy(&k, c->values.data + 8 * i, 8);
  return k;
}

static int64_t v_at(const mw_batch_t *b, int64_t i) {
  int64_t v;
  memcpy(&v, b->cols[1].values.data + 8 * i, 8);
  return v;
}

/* The merge's parts as one batch (each part valid, in the base schema). */
static void flat(const mw_merge_t *m, const mw_schema_t *base, mw_batch_t *out) {
  assert_int_equal(mw_batch_init(out, base), 0);
  int64_t n = 0;
  for (size_t i = 0; i < m->n_parts; i++) {
    assert_ptr_equal(m->parts[i].schema, base);
    assert_int_equal(mw_batch_validate(&m->parts[i]), 0);
    assert_int_equal(mw_batch_append(out, &m->parts[i]), 0);
    n += m->parts[i].n_rows;
  }
  assert_int_equal(n, m->n_rows);
  assert_int_equal(out->n_rows, m->n_rows);
}

static void test_sample(void **state) {
  (void)state;
  mw_schema_t table, base;
  schemas(MW_T_INT64, &table, &base);
  mw_batch_t g1, g2;
  assert_int_equal(mw_batch_init(&g1, &table), 0);
  assert_int_equal(mw_batch_init(&g2, &table), 0);
  put(&g1, 5, 'a', false), put(&g1, 6, 'b', false), put(&g1, 7, 'c', false);
  put(&g2, 6, 0, true), put(&g2, 7, 'd', false), put(&g2, 8, 'e', false);
  mw_merge_run_t runs[2] = {{.batch = &g1, .generation = 1}, {.batch = &g2, .generation = 2}};
  mw_merge_t m;
  mw_err_t err = {0};
  assert_int_equal(mw_merge_runs(&table, &base, runs, 2, &m, &err), 0);
  assert_int_equal(m.rows_in, 6);
  assert_int_equal(m.n_keys, 4);
  assert_int_equal(m.tombstones, 1);
  mw_batch_t rows;
  flat(&m, &base, &rows);
  assert_int_equal(rows.n_rows, 3);
  const int64_t keys[] = {5, 6, 7, 8}, rk[] = {5, 7, 8}, rv[] = {'a', 'd', 'e'};
  for (int i = 0; i < 4; i++) assert_int_equal(key_at(&base.fields[0], &m.keys, i), keys[i]);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(key_at(&base.fields[0], &rows.cols[0], i), rk[i]);
    assert_int_equal(v_at(&rows, i), rv[i]);
  }
  mw_batch_free(&rows);
  mw_merge_free(&m);
  /* the same with gen 1's row 7 masked and a duplicate of 8 inside gen 2 */
  put(&g2, 8, 'f', false);
  uint32_t del[] = {2};
  runs[0].deleted = del;
  runs[0].n_deleted = 1;
  assert_int_equal(mw_merge_runs(&table, &base, runs, 2, &m, &err), 0);
  assert_int_equal(m.rows_in, 6);
  flat(&m, &base, &rows);
  assert_int_equal(rows.n_rows, 3);
  assert_int_equal(v_at(&rows, 2), 'f'); /* the later row of a run wins */
  mw_batch_free(&rows);
  mw_merge_free(&m);
  mw_batch_free(&g1);
  mw_batch_free(&g2);
  mw_schema_free(&table);
  mw_schema_free(&base);
}

static uint64_t rnd(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

#define KEYS 1300
#define RANDOM_KEYS 300

/* Keys: mode 0 random over RANDOM_KEYS; 1 ascending through all the runs
 * in turn, sometimes repeated (the in-order path: no sort, winners copied
 * in stretches broken by deletions, tombstones and repeats); 2 ascending in
 * each run, each run starting anywhere (runs overlap: sorted, ties across
 * runs). */
static int64_t model_key(int mode, uint64_t *seed, int64_t *next) {
  if (mode == 0) return (int64_t)(rnd(seed) % RANDOM_KEYS);
  int64_t k = *next;
  if (rnd(seed) % 8 != 0) *next += 1 + (int64_t)(rnd(seed) % 2); /* else a repeat */
  return k < KEYS ? k : KEYS - 1;
}

static void model_round(mw_type_t type, int mode, uint64_t seed) {
  mw_schema_t table, base;
  schemas(type, &table, &base);
  size_t n_runs = 1 + rnd(&seed) % 6;
  mw_batch_t *b = calloc(n_runs, sizeof *b);
  mw_merge_run_t *runs = calloc(n_runs, sizeof *runs);
  uint32_t **dels = calloc(n_runs, sizeof *dels);
  int state[KEYS]; /* 0 absent (never written), 1 live, 2 deleted */
  int64_t value[KEYS];
  memset(state, 0, sizeof state);
  int64_t next = 0;
  for (size_t r = 0; r < n_runs; r++) {
    if (mode == 2) next = (int64_t)(rnd(&seed) % 400);
    assert_int_equal(mw_batch_init(&b[r], &table), 0);
    size_t rows = rnd(&seed) % 200;
    /* a deletion vector masks some rows; the model skips them */
    dels[r] = malloc((rows + 1) * sizeof *dels[r]);
    size_t nd = 0;
    for (size_t i = 0; i < rows; i++) {
      int64_t k = model_key(mode, &seed, &next);
      bool tomb = rnd(&seed) % (mode == 0 ? 4 : 16) == 0;
      int64_t v = (int64_t)(rnd(&seed) >> 8);
      put(&b[r], k, v, tomb);
      if (rnd(&seed) % (mode == 0 ? 10 : 40) == 0) {
        dels[r][nd++] = (uint32_t)i;
        continue;
      }
      state[k] = tomb ? 2 : 1;
      value[k] = v;
    }
    runs[r] = (mw_merge_run_t){.batch = &b[r], .deleted = dels[r], .n_deleted = nd,
                               .generation = 10 + 3 * r, .movable = rnd(&seed) % 2 ? &b[r] : NULL};
  }
  mw_merge_t m;
  mw_err_t err = {0};
  int rc = mw_merge_runs(&table, &base, runs, n_runs, &m, &err);
  if (rc < 0) fail_msg("%s", err.msg);
  int64_t want_keys = 0, want_rows = 0;
  for (int k = 0; k < KEYS; k++) want_keys += state[k] != 0, want_rows += state[k] == 1;
  assert_int_equal(m.n_keys, want_keys);
  mw_batch_t rows;
  flat(&m, &base, &rows);
  assert_int_equal(rows.n_rows, want_rows);
  int64_t prev = -1;
  for (int64_t i = 0; i < rows.n_rows; i++) {
    int64_t k = key_at(&base.fields[0], &rows.cols[0], i);
    assert_int_equal(state[k], 1);
    assert_int_equal(v_at(&rows, i), value[k]);
    if (type == MW_T_INT64) assert_true(k > prev); /* sorted (ints by value) */
    prev = k;
  }
  prev = -1;
  for (int64_t i = 0; i < m.n_keys; i++) {
    int64_t k = key_at(&base.fields[0], &m.keys, i);
    assert_int_not_equal(state[k], 0);
    if (type == MW_T_INT64) assert_true(k > prev); /* each winning key once, sorted */
    prev = k;
    /* strictly ascending in the PK order, strings too: compaction's lookups
     * rely on it without checking (compact_keys.c key_runs) */
    if (i > 0) assert_true(mw_pk_key_cmp(&base.fields[0], &m.keys, i - 1, &m.keys, i) < 0);
  }
  mw_batch_free(&rows);
  mw_merge_free(&m);
  for (size_t r = 0; r < n_runs; r++) {
    mw_batch_free(&b[r]);
    free(dels[r]);
  }
  free(b);
  free(runs);
  free(dels);
  mw_schema_free(&table);
  mw_schema_free(&base);
}

static void test_model(void **state) {
  (void)state;
  for (uint64_t seed = 1; seed <= 600; seed++)
    model_round(seed % 2 ? MW_T_INT64 : MW_T_UTF8, (int)(seed % 3), seed);
}

/* Three runs of ascending ids, all movable: the first and the last win
 * whole and are moved (their columns taken, no copy), the middle one has
 * a tombstone and a deleted row and is copied, in stretches, into a part
 * between them. */
static void test_moved(void **state) {
  (void)state;
  mw_schema_t table, base;
  schemas(MW_T_INT64, &table, &base);
  mw_batch_t b[3];
  mw_merge_run_t runs[3];
  uint32_t del[] = {7};
  for (int r = 0; r < 3; r++) {
    assert_int_equal(mw_batch_init(&b[r], &table), 0);
    for (int64_t i = 0; i < 100; i++) put(&b[r], 100 * r + i, 1000 * r + i, r == 1 && i == 5);
    runs[r] = (mw_merge_run_t){.batch = &b[r], .movable = &b[r], .generation = 1 + (uint64_t)r};
  }
  runs[1].deleted = del;
  runs[1].n_deleted = 1;
  mw_merge_t m;
  mw_err_t err = {0};
  assert_int_equal(mw_merge_runs(&table, &base, runs, 3, &m, &err), 0);
  assert_int_equal(m.n_parts, 3);
  assert_int_equal(m.parts[0].n_rows, 100);
  assert_int_equal(m.parts[1].n_rows, 98); /* row 5 a tombstone, row 7 deleted */
  assert_int_equal(m.parts[2].n_rows, 100);
  assert_int_equal(m.tombstones, 1);
  assert_int_equal(m.n_keys, 299);
  for (int64_t i = 0, at = 0; i < 300; i++) /* every key won: the keys are the gathered ones, moved */
    if (i != 107) assert_int_equal(key_at(&base.fields[0], &m.keys, at++), i);
  assert_int_equal(b[0].cols[0].length + b[0].cols[1].length, 0); /* moved */
  assert_int_equal(b[2].cols[1].length, 0);
  assert_int_equal(b[1].cols[0].length, 100); /* copied */
  assert_int_equal(b[2].cols[2].length, 100); /* _tombstone stays with its run */
  mw_batch_t rows;
  flat(&m, &base, &rows);
  for (int64_t i = 0, at = 0; i < 300; i++) {
    if (i == 105 || i == 107) continue;
    assert_int_equal(key_at(&base.fields[0], &rows.cols[0], at), i);
    assert_int_equal(v_at(&rows, at++), 1000 * (i / 100) + i % 100);
  }
  mw_batch_free(&rows);
  mw_merge_free(&m);
  /* movable must be the run's own batch */
  runs[0].movable = &b[1];
  assert_int_equal(mw_merge_runs(&table, &base, runs, 3, &m, &err), -EINVAL);
  assert_non_null(strstr(err.msg, "movable"));
  mw_merge_free(&m);
  for (int r = 0; r < 3; r++) mw_batch_free(&b[r]);
  mw_schema_free(&table);
  mw_schema_free(&base);
}

static void test_refusals(void **state) {
  (void)state;
  mw_schema_t table, base, other;
  schemas(MW_T_INT64, &table, &base);
  mw_batch_t g;
  assert_int_equal(mw_batch_init(&g, &table), 0);
  put(&g, 1, 1, false);
  mw_merge_run_t runs[2] = {{.batch = &g, .generation = 2}, {.batch = &g, .generation = 2}};
  mw_merge_t m;
  mw_err_t err = {0};
  assert_int_equal(mw_merge_runs(&table, &base, runs, 2, &m, &err), -EINVAL);
  assert_non_null(strstr(err.msg, "generation 2 after 2"));
  mw_merge_free(&m);
  assert_int_equal(mw_merge_runs(&table, &table, runs, 1, &m, NULL), -EINVAL); /* not base + 1 */
  mw_merge_free(&m);
  mw_schema_init(&other);
  assert_int_equal(mw_schema_copy(&other, &base), 0);
  other.fields[0].pk_position = 0;
  mw_err_clear(&err);
  assert_int_equal(mw_merge_runs(&table, &other, runs, 1, &m, &err), -EINVAL);
  mw_merge_free(&m);
  uint32_t bad[] = {1};
  runs[0].deleted = bad;
  runs[0].n_deleted = 1;
  mw_err_clear(&err);
  assert_int_equal(mw_merge_runs(&table, &base, runs, 1, &m, &err), -EINVAL);
  assert_non_null(strstr(err.msg, "deletion offset 1"));
  mw_merge_free(&m);
  runs[0].n_deleted = 0;
  mw_batch_t n;
  assert_int_equal(mw_batch_init(&n, &table), 0);
  mw_field_t nullable = table.fields[0];
  nullable.nullable = true; /* a malformed SSTable: the builder itself refuses nulls here */
  assert_int_equal(mw_column_append_null(&n.cols[0], &nullable), 0);
  assert_int_equal(mw_column_append_fixed(&n.cols[1], &(int64_t){1}, 8), 0);
  assert_int_equal(mw_column_append_bool(&n.cols[2], false), 0);
  n.n_rows = 1;
  runs[0].batch = &n;
  mw_err_clear(&err);
  assert_int_equal(mw_merge_runs(&table, &base, runs, 1, &m, &err), -EBADMSG);
  assert_non_null(strstr(err.msg, "null primary key"));
  mw_merge_free(&m);
  mw_batch_free(&n);
  mw_batch_free(&g);
  mw_schema_free(&other);
  mw_schema_free(&table);
  mw_schema_free(&base);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sample),
      cmocka_unit_test(test_model),
      cmocka_unit_test(test_moved),
      cmocka_unit_test(test_refusals),
  };
  return tu_run_group_name("lsm_merge", tests, NULL, NULL);
}
