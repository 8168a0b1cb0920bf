/*
 * test_memtable.c — MemTable: append, last-write-wins index, tombstone and
 * Lance accounting (memwal.md §6.3 checks), freeze limits.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "lance/bloom.h"
#include "shard/memtable.h"

/* id int64 PK, name utf8, v double, _tombstone bool */
static void make_schema(mw_schema_t *s) {
  mw_schema_init(s);
  int id = mw_schema_add(s, "id", MW_T_INT64, false);
  s->fields[id].pk_position = 1;
  mw_schema_add(s, "name", MW_T_UTF8, true);
  mw_schema_add(s, "v", MW_T_FLOAT64, true);
  mw_schema_add(s, "_tombstone", MW_T_BOOL, false);
}

static void add_row(mw_batch_t *b, int64_t id, const char *name, double v, int tomb) {
  const mw_schema_t *s = b->schema;
  assert_int_equal(mw_column_append_fixed(&b->cols[0], &id, 8), 0);
  if (name) assert_int_equal(mw_column_append_bytes(&b->cols[1], name, strlen(name)), 0);
  else assert_int_equal(mw_column_append_null(&b->cols[1], &s->fields[1]), 0);
  assert_int_equal(mw_column_append_fixed(&b->cols[2], &v, 8), 0);
  assert_int_equal(mw_column_append_bool(&b->cols[3], tomb), 0);
  b->n_rows++;
}

static uint64_t hash_i64(int64_t id) {
  uint8_t buf[9] = {0};
  memcpy(buf + 1, &id, 8);
  return mw_siphash13(0, 0, buf, 9);
}

static void test_last_write_wins(void **state) {
  (void)state;
  mw_schema_t s;
  make_schema(&s);
  mw_memtable_t m;
  assert_int_equal(mw_memtable_init(&m, &s, 1), 0);
  mw_batch_t b;
  assert_int_equal(mw_batch_init(&b, &s), 0);
  add_row(&b, 1, "a", 1.0, 0);
  add_row(&b, 2, "b", 2.0, 0);
  add_row(&b, 1, "a2", 3.0, 0);
  assert_int_equal(mw_batch_validate(&b), 0);
  assert_int_equal(mw_memtable_append(&m, &b, 1, NULL), 0);
  assert_null(b.cols); /* moved in */
  assert_int_equal(m.n_rows, 3);
  assert_int_equal(m.n_keys, 2);
  assert_int_equal(mw_memtable_lookup(&m, hash_i64(1)), 2);
  assert_int_equal(mw_memtable_lookup(&m, hash_i64(2)), 1);
  assert_int_equal(mw_memtable_lookup(&m, hash_i64(3)), -1);

  assert_int_equal(mw_batch_init(&b, &s), 0);
  add_row(&b, 2, NULL, 0.0, 1); /* delete id 2 */
  assert_int_equal(mw_memtable_append(&m, &b, 2, NULL), 0);
  assert_int_equal(mw_memtable_lookup(&m, hash_i64(2)), 3);
  assert_int_equal(m.n_tombstones, 1);
  assert_int_equal(m.first_wal_position, 1);
  assert_int_equal(m.last_wal_position, 2);
  assert_int_equal(m.primary_key_bytes, 32);
  mw_memtable_free(&m);
  mw_schema_free(&s);
}

/* memwal.md §6.3: a 5-row batch of (i64, utf8 6 chars, f64, bool) counts
 * 131 + 40 = 171 bytes. */
static void test_lance_accounting(void **state) {
  (void)state;
  mw_schema_t s;
  make_schema(&s);
  mw_batch_t b;
  assert_int_equal(mw_batch_init(&b, &s), 0);
  for (int i = 0; i < 5; i++) add_row(&b, i, "abcdef", i, 0);
  assert_int_equal(mw_batch_lance_bytes(&b), 171);
  mw_batch_free(&b);
  mw_schema_free(&s);
}

static void test_many_rows_and_limits(void **state) {
  (void)state;
  mw_schema_t s;
  make_schema(&s);
  mw_memtable_t m;
  assert_int_equal(mw_memtable_init(&m, &s, 7), 0);
  mw_memtable_limits_t lim = {.max_rows = 100000, .max_bytes = 0, .max_batches = 0};
  int64_t id = 0;
  for (int batch = 0; batch < 50; batch++) {
    mw_batch_t b;
    assert_int_equal(mw_batch_init(&b, &s), 0);
    for (int r = 0; r < 2000; r++, id++) add_row(&b, id % 60000, "x", (double)id, 0);
    assert_false(mw_memtable_full(&m, &lim));
    assert_int_equal(mw_memtable_append(&m, &b, (uint64_t)batch + 1, NULL), 0);
  }
  assert_true(mw_memtable_full(&m, &lim));
  assert_int_equal(m.n_rows, 100000);
  assert_int_equal(m.n_keys, 60000);
  /* the newest row of key 5 is row 60005 */
  assert_int_equal(mw_memtable_lookup(&m, hash_i64(5)), 60005);
  assert_int_equal(mw_memtable_lookup(&m, hash_i64(59999)), 59999);
  /* the index agrees with flush-time dedup: superseded rows = rows - keys */
  uint32_t *del = malloc(sizeof *del * (size_t)m.n_rows);
  assert_int_equal(mw_dedup_deletions(m.hashes, m.n_rows, del), m.n_rows - m.n_keys);
  free(del);
  mw_memtable_free(&m);
  mw_schema_free(&s);
}

/* A stored batch keeps no builder slack: the buffers of 50 batches of 2 000
 * rows grown by doubling hold their Arrow size (Lance's in_memory_bytes)
 * within 2% once stored, their values intact; the PK hashes and index add
 * at most 24 B a row. */
static void test_heap_close_to_arrow_size(void **state) {
  (void)state;
  mw_schema_t s;
  make_schema(&s);
  mw_memtable_t m;
  assert_int_equal(mw_memtable_init(&m, &s, 1), 0);
  int64_t id = 0;
  for (int batch = 0; batch < 50; batch++) {
    mw_batch_t b;
    assert_int_equal(mw_batch_init(&b, &s), 0);
    for (int r = 0; r < 2000; r++, id++) add_row(&b, id, "customer-000000000042", (double)id, 0);
    assert_true(b.cols[1].values.cap > b.cols[1].values.len + b.cols[1].values.len / 8); /* slack */
    assert_int_equal(mw_memtable_append(&m, &b, (uint64_t)batch + 1, NULL), 0);
  }
  /* the column buffers: what is held beside the hashes, index and structs */
  int64_t index = (int64_t)(m.cap_rows * sizeof *m.hashes + m.index_cap * sizeof *m.index);
  int64_t structs = (int64_t)(m.cap_batches * sizeof *m.batches + m.n_batches * s.n_fields * sizeof(mw_column_t));
  int64_t buffers = mw_memtable_heap_bytes(&m) - index - structs;
  assert_true(buffers >= m.in_memory_bytes - 40 * 50);
  assert_true(buffers * 100 <= m.in_memory_bytes * 102); /* doubling left up to 2x before the shrink */
  assert_true(index <= 24 * m.n_rows); /* 8 B of hash, 4 B per index slot at <= 1/2 load, growth */
  const mw_batch_t *last = &m.batches[49];
  assert_int_equal(last->cols[1].values.cap, last->cols[1].values.len);
  int64_t v;
  memcpy(&v, last->cols[0].values.data + 8 * 1999, 8);
  assert_int_equal(v, 99999);
  size_t n;
  const uint8_t *name = mw_column_bytes(&last->cols[1], 1999, &n);
  assert_int_equal(n, 21);
  assert_memory_equal(name, "customer-000000000042", 21);
  assert_int_equal(mw_memtable_lookup(&m, hash_i64(99999)), 99999);
  mw_memtable_free(&m);
  mw_schema_free(&s);
}

static void test_schema_mismatch_refused(void **state) {
  (void)state;
  mw_schema_t s, other;
  make_schema(&s);
  mw_schema_init(&other);
  mw_schema_add(&other, "id", MW_T_INT32, false);
  mw_memtable_t m;
  assert_int_equal(mw_memtable_init(&m, &s, 1), 0);
  mw_batch_t b;
  assert_int_equal(mw_batch_init(&b, &other), 0);
  int32_t v = 1;
  mw_column_append_fixed(&b.cols[0], &v, 4);
  b.n_rows = 1;
  mw_err_t err = {0};
  assert_int_equal(mw_memtable_append(&m, &b, 1, &err), -EINVAL);
  assert_non_null(strstr(err.msg, "schema"));
  assert_int_equal(m.n_rows, 0);
  mw_batch_free(&b); /* still ours after a failed append */
  mw_memtable_free(&m);
  mw_schema_free(&s);
  mw_schema_free(&other);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_last_write_wins),
      cmocka_unit_test(test_lance_accounting),
      cmocka_unit_test(test_many_rows_and_limits),
      cmocka_unit_test(test_heap_close_to_arrow_size),
      cmocka_unit_test(test_schema_mismatch_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
