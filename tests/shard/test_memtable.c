/*
 * test_memtable.c — MemTable: append (rows kept in insert order, so the
 * flush's dedup makes the last write win), tombstone and Lance accounting
 * (memwal.md §6.3 checks), freeze limits, memory close to the Arrow size.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "cases.h"

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

/* What the flush does with the MemTable's rows (sstable.c steps 2-3): hash
 * every key in insert order, then mark the rows a later row supersedes.
 * Returns how many died; dead[] gets their row numbers, ascending. */
static int64_t flush_dedup(const mw_memtable_t *m, uint32_t *dead) {
  uint64_t *h = malloc(sizeof *h * (size_t)(m->n_rows + 1));
  assert_non_null(h);
  int64_t at = 0;
  for (size_t i = 0; i < m->n_batches; i++) {
    assert_int_equal(mw_pk_hash_batch(&m->batches[i], h + at, NULL), 0);
    at += m->batches[i].n_rows;
  }
  assert_int_equal(at, m->n_rows);
  int64_t n = mw_dedup_deletions(h, m->n_rows, dead);
  free(h);
  return n;
}

static void test_last_write_wins_at_flush(void **state) {
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
  assert_int_equal(m.n_tombstones, 0);

  assert_int_equal(mw_batch_init(&b, &s), 0);
  add_row(&b, 2, NULL, 0.0, 1); /* delete id 2 */
  assert_int_equal(mw_memtable_append(&m, &b, 2, NULL), 0);
  assert_int_equal(m.n_rows, 4);
  assert_int_equal(m.n_batches, 2);
  assert_int_equal(m.n_tombstones, 1);
  assert_int_equal(m.first_wal_position, 1);
  assert_int_equal(m.last_wal_position, 2);
  assert_int_equal(m.primary_key_bytes, 32);
  /* rows stay in insert order: the flush keeps row 2 (id 1 = "a2") and
   * row 3 (the delete of id 2), and masks rows 0 and 1 */
  uint32_t dead[4];
  assert_int_equal(flush_dedup(&m, dead), 2);
  assert_int_equal(dead[0], 0);
  assert_int_equal(dead[1], 1);
  size_t n;
  const uint8_t *name = mw_column_bytes(&m.batches[0].cols[1], 2, &n);
  assert_memory_equal(name, "a2", 2);
  mw_memtable_free(&m);
  mw_schema_free(&s);
}

/* A schema the flush cannot hash is refused up front, not at the flush. */
static void test_schema_without_key_refused(void **state) {
  (void)state;
  mw_schema_t s;
  mw_schema_init(&s);
  mw_schema_add(&s, "v", MW_T_FLOAT64, true);
  mw_schema_add(&s, "_tombstone", MW_T_BOOL, false);
  mw_err_t err = {0};
  assert_int_equal(mw_memtable_schema_check(&s, &err), -EINVAL);
  assert_non_null(strstr(err.msg, "primary key"));
  mw_memtable_t m;
  assert_int_equal(mw_memtable_init(&m, &s, 1), -EINVAL);
  s.fields[0].pk_position = 1; /* a float key: Lance 12 cannot hash it */
  assert_int_equal(mw_memtable_schema_check(&s, NULL), -ENOTSUP);
  mw_schema_free(&s);
}

/* Tombstones are counted from the bitmap's bits inside the batch only. */
static void test_tombstones_counted(void **state) {
  (void)state;
  mw_schema_t s;
  make_schema(&s);
  mw_memtable_t m;
  assert_int_equal(mw_memtable_init(&m, &s, 1), 0);
  mw_batch_t b;
  assert_int_equal(mw_batch_init(&b, &s), 0);
  for (int i = 0; i < 19; i++) add_row(&b, i, NULL, 0, i % 3 == 0); /* 0,3,..,18: 7 */
  b.cols[3].values.data[2] |= 0xf8; /* bits past row 18 set, as IPC may leave them */
  assert_int_equal(mw_memtable_append(&m, &b, 1, NULL), 0);
  assert_int_equal(m.n_tombstones, 7);
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
  assert_int_equal(m.n_batches, 50);
  /* keys 0..59999, then 0..39999 again: the flush masks the first 40 000 */
  uint32_t *del = malloc(sizeof *del * (size_t)m.n_rows);
  assert_int_equal(flush_dedup(&m, del), 40000);
  assert_int_equal(del[0], 0);
  assert_int_equal(del[39999], 39999);
  free(del);
  mw_memtable_free(&m);
  mw_schema_free(&s);
}

/* A stored batch keeps no builder slack: the buffers of 50 batches of 2 000
 * rows grown by doubling hold their Arrow size (Lance's in_memory_bytes)
 * within 2% once stored, their values intact; beside them the MemTable
 * holds only the batch and column structs (no per-row index). */
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
  /* the column buffers: what is held beside the structs */
  int64_t structs = (int64_t)(m.cap_batches * sizeof *m.batches + m.n_batches * s.n_fields * sizeof(mw_column_t));
  int64_t buffers = mw_memtable_heap_bytes(&m) - structs;
  assert_true(buffers >= m.in_memory_bytes - 40 * 50);
  assert_true(buffers * 100 <= m.in_memory_bytes * 102); /* doubling left up to 2x before the shrink */
  assert_true(mw_memtable_heap_bytes(&m) * 100 <= m.in_memory_bytes * 103);
  const mw_batch_t *last = &m.batches[49];
  assert_int_equal(last->cols[1].values.cap, last->cols[1].values.len);
  int64_t v;
  memcpy(&v, last->cols[0].values.data + 8 * 1999, 8);
  assert_int_equal(v, 99999);
  size_t n;
  const uint8_t *name = mw_column_bytes(&last->cols[1], 1999, &n);
  assert_int_equal(n, 21);
  assert_memory_equal(name, "customer-000000000042", 21);
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
      cmocka_unit_test(test_last_write_wins_at_flush),
      cmocka_unit_test(test_schema_without_key_refused),
      cmocka_unit_test(test_tombstones_counted),
      cmocka_unit_test(test_lance_accounting),
      cmocka_unit_test(test_many_rows_and_limits),
      cmocka_unit_test(test_heap_close_to_arrow_size),
      cmocka_unit_test(test_schema_mismatch_refused),
  };
  return tu_run_group(tests, NULL, NULL);
}
