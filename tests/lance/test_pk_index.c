/*
 * test_pk_index.c — `_pk_index/` files (src/lance/pk_index.c).
 *
 * Built indexes: page_data is sorted by (value, id), holds every row exactly
 * once with values[i] == keys[ids[i]], and page_lookup has one row per 8192
 * entries with the right min/max/null_count/page_idx and schema metadata;
 * int64 (with duplicates, three pages), int32 (negative keys), uint64, utf8.
 * Golden: Lance's own page_data.lance / page_lookup.lance (2.0 files) read
 * correctly, and rebuilding the index from the SSTable's id column gives
 * exactly Lance's (values, ids) sequence and lookup row.
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cases.h"

#include "lance/datafile.h"
#include "lance/pk_index.h"
#include "testutil.h"

static uint32_t rng_state = 777;
static uint32_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 17;
  rng_state ^= rng_state << 5;
  return rng_state;
}

typedef struct opened {
  mw_datafile_t f;
  mw_batch_t b;
} opened_t;

static void open_buf(const uint8_t *p, size_t n, opened_t *o) {
  mw_err_t err = {0};
  if (mw_datafile_open(&o->f, p, n, NULL, &err) != 0) fail_msg("open: %s", err.msg);
  if (mw_datafile_read_batch(&o->f, &o->b, &err) != 0) fail_msg("read: %s", err.msg);
}

static void close_opened(opened_t *o) {
  mw_batch_free(&o->b);
  mw_datafile_close(&o->f);
}

/* Compare key i of column a with key j of column b: <0, 0, >0. */
static int key_cmp(const mw_field_t *f, const mw_column_t *a, int64_t i, const mw_column_t *b,
                   int64_t j) {
  bool va = mw_column_valid(a, i), vb = mw_column_valid(b, j);
  if (!va || !vb) return va == vb ? 0 : va ? 1 : -1;
  switch (f->type) {
    case MW_T_INT32: {
      int32_t x, y;
      memcpy(&x, a->values.data + 4 * i, 4), memcpy(&y, b->values.data + 4 * j, 4);
      return (x > y) - (x < y);
    }
    case MW_T_INT64: {
      int64_t x, y;
      memcpy(&x, a->values.data + 8 * i, 8), memcpy(&y, b->values.data + 8 * j, 8);
      return (x > y) - (x < y);
    }
    case MW_T_UINT32: {
      uint32_t x, y;
      memcpy(&x, a->values.data + 4 * i, 4), memcpy(&y, b->values.data + 4 * j, 4);
      return (x > y) - (x < y);
    }
    case MW_T_UINT64: {
      uint64_t x, y;
      memcpy(&x, a->values.data + 8 * i, 8), memcpy(&y, b->values.data + 8 * j, 8);
      return (x > y) - (x < y);
    }
    default: {
      size_t na, nb;
      const uint8_t *pa = mw_column_bytes(a, i, &na), *pb = mw_column_bytes(b, j, &nb);
      int c = memcmp(pa, pb, na < nb ? na : nb);
      if (c) return c;
      return (na > nb) - (na < nb);
    }
  }
}

static uint64_t u64_at(const mw_column_t *c, int64_t r) {
  uint64_t v;
  memcpy(&v, c->values.data + 8 * r, 8);
  return v;
}

static uint32_t u32_at(const mw_column_t *c, int64_t r) {
  uint32_t v;
  memcpy(&v, c->values.data + 4 * r, 4);
  return v;
}

/* Build an index over `keys` and check every property of both files. */
static void check_index(const mw_field_t *f, const mw_column_t *keys, uint32_t frag) {
  mw_buf_t data = MW_BUF_INIT, lookup = MW_BUF_INIT;
  mw_err_t err = {0};
  int rc = mw_pk_index_write(f, keys, frag, &data, &lookup, &err);
  if (rc != 0) fail_msg("pk index: %d %s", rc, err.msg);
  opened_t d, l;
  open_buf(data.data, data.len, &d);
  open_buf(lookup.data, lookup.len, &l);
  int64_t n = keys->length;
  /* page_data schema */
  assert_int_equal(d.f.schema.n_fields, 2);
  assert_string_equal(d.f.schema.fields[0].name, "values");
  assert_int_equal(d.f.schema.fields[0].type, f->type);
  assert_true(d.f.schema.fields[0].nullable);
  assert_string_equal(d.f.schema.fields[1].name, "ids");
  assert_int_equal(d.f.schema.fields[1].type, MW_T_UINT64);
  assert_false(d.f.schema.fields[1].nullable);
  assert_int_equal(d.b.n_rows, n);
  /* sorted by (value, id); a permutation of the rows; values match keys */
  uint8_t *seen = calloc((size_t)n + 1, 1);
  const mw_column_t *vals = &d.b.cols[0], *ids = &d.b.cols[1];
  for (int64_t i = 0; i < n; i++) {
    uint64_t id = u64_at(ids, i);
    assert_int_equal(id >> 32, frag);
    int64_t row = (int64_t)(id & 0xffffffffu);
    assert_true(row < n);
    assert_false(seen[row]);
    seen[row] = 1;
    assert_int_equal(key_cmp(f, vals, i, keys, row), 0);
    if (i > 0) {
      int c = key_cmp(f, vals, i - 1, vals, i);
      assert_true(c <= 0);
      if (c == 0) assert_true(u64_at(ids, i - 1) < id);
    }
  }
  free(seen);
  /* page_lookup */
  int64_t pages = (n + MW_PK_INDEX_PAGE_ROWS - 1) / MW_PK_INDEX_PAGE_ROWS;
  assert_int_equal(l.b.n_rows, pages);
  assert_int_equal(l.f.schema.n_fields, 4);
  assert_string_equal(l.f.schema.fields[0].name, "min");
  assert_string_equal(l.f.schema.fields[1].name, "max");
  assert_string_equal(l.f.schema.fields[2].name, "null_count");
  assert_string_equal(l.f.schema.fields[3].name, "page_idx");
  assert_int_equal(l.f.schema.fields[2].type, MW_T_UINT32);
  assert_int_equal(l.f.schema.meta.n, 2);
  assert_string_equal(l.f.schema.meta.items[0].key, "batch_size");
  assert_string_equal((const char *)l.f.schema.meta.items[0].value, "8192");
  assert_string_equal(l.f.schema.meta.items[1].key, "range_partitioned");
  assert_string_equal((const char *)l.f.schema.meta.items[1].value, "false");
  for (int64_t p = 0; p < pages; p++) {
    int64_t a = p * MW_PK_INDEX_PAGE_ROWS, e = a + MW_PK_INDEX_PAGE_ROWS < n ? a + MW_PK_INDEX_PAGE_ROWS : n;
    uint32_t nulls = 0;
    for (int64_t i = a; i < e; i++) nulls += !mw_column_valid(vals, i);
    assert_int_equal(u32_at(&l.b.cols[2], p), nulls);
    assert_int_equal(u32_at(&l.b.cols[3], p), p);
    if (nulls < e - a) {
      assert_int_equal(key_cmp(f, &l.b.cols[0], p, vals, a + nulls), 0);
      assert_int_equal(key_cmp(f, &l.b.cols[1], p, vals, e - 1), 0);
    }
  }
  close_opened(&d);
  close_opened(&l);
  mw_buf_free(&data);
  mw_buf_free(&lookup);
}

static void int_keys(mw_type_t t, int64_t n, int64_t range, bool negative, uint32_t frag) {
  mw_schema_t s;
  mw_schema_init(&s);
  assert_int_equal(mw_schema_add(&s, "id", t, false), 0);
  mw_batch_t b;
  assert_int_equal(mw_batch_init(&b, &s), 0);
  size_t w = mw_type_width(&s.fields[0]);
  for (int64_t i = 0; i < n; i++) {
    int64_t v = (int64_t)(rnd() % (uint64_t)range) - (negative ? range / 2 : 0);
    if (t == MW_T_UINT64 && i % 5 == 0) v = (int64_t)(0x8000000000000000ull + (uint64_t)v);
    assert_int_equal(mw_column_append_fixed(&b.cols[0], &v, w), 0); /* little-endian low bytes */
  }
  check_index(&s.fields[0], &b.cols[0], frag);
  mw_batch_free(&b);
  mw_schema_free(&s);
}

static void test_int64_duplicates_pages(void **state) {
  (void)state;
  int_keys(MW_T_INT64, 20000, 5000, false, 0); /* ~4 copies of each key, 3 pages */
  int_keys(MW_T_INT64, 8192, 1 << 30, true, 0);  /* exactly one page */
  int_keys(MW_T_INT64, 1, 10, false, 0);
}

static void test_other_int_types(void **state) {
  (void)state;
  int_keys(MW_T_INT32, 9000, 100000, true, 0);
  int_keys(MW_T_UINT32, 3000, 1000, false, 0);
  int_keys(MW_T_UINT64, 10000, 1 << 20, false, 3);
}

/* int64 keys from a sequence: kind 0 ascending (the no-sort path), 1
 * ascending with repeats, 2 ascending but one dip at the end, 3 descending,
 * 4 interleaved counters 10^9 apart (16 connections: 34-bit range, packed
 * words), 5 two far ends of the int64 range (no packing: the wide sort). */
static void seq_keys(int kind, int64_t n) {
  mw_schema_t s;
  mw_schema_init(&s);
  assert_int_equal(mw_schema_add(&s, "id", MW_T_INT64, false), 0);
  mw_batch_t b;
  assert_int_equal(mw_batch_init(&b, &s), 0);
  for (int64_t i = 0; i < n; i++) {
    int64_t v = 0;
    switch (kind) {
      case 0: v = 10000000000000 + i; break;
      case 1: v = i / 3; break;
      case 2: v = i + 1 < n ? i : -1; break;
      case 3: v = n - i; break;
      case 4: v = 10000000000000 + (i % 16) * 1000000000 + i / 16; break;
      default: v = (i % 2) ? INT64_MAX - (int64_t)(rnd() % 100) : INT64_MIN + (int64_t)(rnd() % 100); break;
    }
    assert_int_equal(mw_column_append_fixed(&b.cols[0], &v, 8), 0);
  }
  check_index(&s.fields[0], &b.cols[0], 0);
  /* the order itself: identity exactly when the keys ascend */
  uint32_t *rows = malloc((size_t)n * sizeof *rows);
  int64_t nulls = -1;
  int in_order = mw_pk_sort_rows(&s.fields[0], &b.cols[0], rows, &nulls);
  assert_in_range(in_order, 0, 1);
  assert_int_equal(nulls, 0);
  bool identity = true, ascending = true;
  const int64_t *v = (const int64_t *)(const void *)b.cols[0].values.data;
  for (int64_t i = 0; i < n; i++) identity &= rows[i] == (uint32_t)i;
  for (int64_t i = 1; i < n; i++) ascending &= v[i - 1] <= v[i];
  if (n > 2) assert_int_equal(ascending, kind <= 1);
  assert_int_equal(identity, ascending);
  assert_int_equal(in_order, ascending); /* the caller is told, so it need not check again */
  free(rows);
  mw_batch_free(&b);
  mw_schema_free(&s);
}

static void test_int64_orders(void **state) {
  (void)state;
  for (int kind = 0; kind <= 5; kind++) {
    seq_keys(kind, 20000);
    seq_keys(kind, 2);
  }
  seq_keys(0, 1);
}

/* Strings in byte order, with ties and the empty string: not sorted, and
 * the caller told (1); one dip, or a null in front of ascending keys: 0
 * and the PK order (nulls first). */
static void str_orders(int kind) {
  static const char *const keys[] = {"", "a", "a", "ab", "b", "ba", "bb", "c"};
  const int64_t n = (int64_t)(sizeof keys / sizeof keys[0]);
  mw_schema_t s;
  mw_schema_init(&s);
  assert_int_equal(mw_schema_add(&s, "k", MW_T_UTF8, true), 0);
  mw_batch_t b;
  assert_int_equal(mw_batch_init(&b, &s), 0);
  for (int64_t i = 0; i < n; i++) {
    const char *k = keys[kind == 1 && i == n - 1 ? 1 : i]; /* kind 1: "a" last */
    if (kind == 2 && i == n - 1) assert_int_equal(mw_column_append_null(&b.cols[0], &s.fields[0]), 0);
    else assert_int_equal(mw_column_append_bytes(&b.cols[0], k, strlen(k)), 0);
  }
  check_index(&s.fields[0], &b.cols[0], 0);
  uint32_t rows[8];
  int64_t nulls = -1;
  assert_int_equal(mw_pk_sort_rows(&s.fields[0], &b.cols[0], rows, &nulls), kind == 0 ? 1 : 0);
  assert_int_equal(nulls, kind == 2 ? 1 : 0);
  static const uint32_t dip[] = {0, 1, 2, 7, 3, 4, 5, 6}, null_first[] = {7, 0, 1, 2, 3, 4, 5, 6};
  for (int64_t i = 0; i < n; i++)
    assert_int_equal(rows[i], kind == 0 ? (uint32_t)i : kind == 1 ? dip[i] : null_first[i]);
  mw_batch_free(&b);
  mw_schema_free(&s);
}

static void test_str_orders(void **state) {
  (void)state;
  for (int kind = 0; kind <= 2; kind++) str_orders(kind);
}

static void test_utf8_keys(void **state) {
  (void)state;
  mw_schema_t s;
  mw_schema_init(&s);
  assert_int_equal(mw_schema_add(&s, "k", MW_T_UTF8, true), 0);
  mw_batch_t b;
  assert_int_equal(mw_batch_init(&b, &s), 0);
  for (int i = 0; i < 17000; i++) {
    char k[32];
    int n = snprintf(k, sizeof k, "key%u", rnd() % 6000);
    if (i % 997 == 0) n = 0; /* empty string */
    if (i % 1999 == 0) assert_int_equal(mw_column_append_null(&b.cols[0], &s.fields[0]), 0);
    else assert_int_equal(mw_column_append_bytes(&b.cols[0], k, (size_t)n), 0);
  }
  check_index(&s.fields[0], &b.cols[0], 0);
  mw_batch_free(&b);
  mw_schema_free(&s);
}

static void test_rejects(void **state) {
  (void)state;
  mw_schema_t s;
  mw_schema_init(&s);
  assert_int_equal(mw_schema_add(&s, "d", MW_T_FLOAT64, false), 0);
  mw_batch_t b;
  assert_int_equal(mw_batch_init(&b, &s), 0);
  mw_buf_t d = MW_BUF_INIT, l = MW_BUF_INIT;
  mw_err_t err = {0};
  assert_int_equal(mw_pk_index_write(&s.fields[0], &b.cols[0], 0, &d, &l, &err), -EINVAL);
  assert_non_null(strstr(err.msg, "'d'"));
  assert_int_equal(d.len + l.len, 0);
  mw_batch_free(&b);
  mw_schema_free(&s);
}

/* Lance's own index files read, and our rebuild matches them exactly. */
static void test_golden_lance_index(void **state) {
  (void)state;
  char **paths;
  size_t np = tu_find_files(tu_vectors_dir(), "/_pk_index/page_data.lance", &paths);
  assert_true(np >= 10);
  for (size_t i = 0; i < np; i++) {
    char *dir = strdup(paths[i]);
    *strstr(dir, "/_pk_index/") = 0;
    char *lpath = tu_strf("%s/_pk_index/page_lookup.lance", dir);
    char *ddir = tu_strf("%s/data", dir);
    char **dn;
    size_t ndn = tu_list_dir(ddir, ".lance", &dn);
    assert_int_equal(ndn, 1);
    char *dpath = tu_strf("%s/%s", ddir, dn[0]);
    size_t n1, n2, n3;
    uint8_t *pd = tu_read_file(paths[i], &n1), *pl = tu_read_file(lpath, &n2), *df = tu_read_file(dpath, &n3);
    opened_t d, l, t;
    open_buf(pd, n1, &d);
    open_buf(pl, n2, &l);
    open_buf(df, n3, &t);
    assert_int_equal(d.f.major, 0);
    assert_int_equal(d.f.minor, 3);
    assert_int_equal(d.b.n_rows, t.b.n_rows);
    assert_int_equal(l.b.n_rows, 1);
    assert_string_equal((const char *)mw_kvs_get(&l.f.schema.meta, "batch_size")->value, "8192");
    /* rebuild from the SSTable's id column */
    int id = mw_schema_find(&t.f.schema, "id");
    assert_true(id >= 0);
    mw_buf_t od = MW_BUF_INIT, ol = MW_BUF_INIT;
    assert_int_equal(mw_pk_index_write(&t.f.schema.fields[id], &t.b.cols[id], 0, &od, &ol, NULL), 0);
    opened_t o, ok;
    open_buf(od.data, od.len, &o);
    open_buf(ol.data, ol.len, &ok);
    assert_int_equal(o.b.n_rows, d.b.n_rows);
    assert_memory_equal(o.b.cols[0].values.data, d.b.cols[0].values.data, 8 * (size_t)d.b.n_rows);
    assert_memory_equal(o.b.cols[1].values.data, d.b.cols[1].values.data, 8 * (size_t)d.b.n_rows);
    for (size_t c = 0; c < 4; c++)
      assert_memory_equal(ok.b.cols[c].values.data, l.b.cols[c].values.data, c < 2 ? 8 : 4);
    assert_true(mw_schema_equal(&ok.f.schema, &l.f.schema));
    assert_true(mw_schema_equal(&o.f.schema, &d.f.schema));
    close_opened(&o);
    close_opened(&ok);
    mw_buf_free(&od);
    mw_buf_free(&ol);
    close_opened(&d);
    close_opened(&l);
    close_opened(&t);
    free(pd), free(pl), free(df);
    free(dpath), free(ddir), free(lpath), free(dir);
    tu_free_names(dn, ndn);
  }
  tu_free_names(paths, np);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_int64_duplicates_pages),
      cmocka_unit_test(test_other_int_types),
      cmocka_unit_test(test_int64_orders),
      cmocka_unit_test(test_str_orders),
      cmocka_unit_test(test_utf8_keys),
      cmocka_unit_test(test_rejects),
      cmocka_unit_test(test_golden_lance_index),
  };
  return tu_run_group(tests, NULL, NULL);
}
