/*
 * test_batch.c — the columnar model (src/lance/batch.c): types, metadata
 * lists, schemas, column builders (validity back-fill, fsl item validity),
 * append_range and mw_batch_validate; buffer views, blobs and batches
 * backed by one (common/buf.h).
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

#include "lance/batch.h"

/* Every bit at or past `bits` in a bitmap buffer is zero. */
static void assert_tail_zero(const mw_buf_t *bm, int64_t bits) {
  if (bm->len == 0) return;
  assert_int_equal(bm->len, (size_t)(bits + 7) / 8);
  for (int64_t i = bits; i < (int64_t)bm->len * 8; i++) assert_false(mw_bit_get(bm->data, i));
}

static int64_t zeros(const mw_buf_t *bm, int64_t bits) {
  int64_t z = 0;
  for (int64_t i = 0; i < bits && bm->len; i++) z += !mw_bit_get(bm->data, i);
  return z;
}

static void test_types(void **state) {
  (void)state;
  mw_field_t f = {.type = MW_T_FSL, .fsl_dim = 8, .item_type = MW_T_FLOAT32};
  char buf[MW_FIELD_TEXT_BYTES], why[160];
  assert_int_equal(mw_type_width(&f), 32);
  assert_string_equal(mw_field_type_text(&f, buf, sizeof buf), "fixed_size_list<float32, 8>");
  f.item_type = MW_T_FLOAT16;
  assert_int_equal(mw_type_width(&f), 16);
  assert_int_equal(mw_fsl_item_width(&f), 2);
  assert_string_equal(mw_field_type_text(&f, buf, sizeof buf), "fixed_size_list<float16, 8>");
  f.item_type = MW_T_UTF8; /* not an item type */
  assert_int_equal(mw_field_check(&f, why, sizeof why), -EINVAL);
  f.type = MW_T_UTF8;
  assert_int_equal(mw_type_width(&f), 0);
  f.type = MW_T_UINT64;
  assert_int_equal(mw_type_width(&f), 8);
  assert_string_equal(mw_type_name(MW_T_BOOL), "bool");
  /* the property table: one row per type, widths of the fixed layouts */
  for (int t = MW_T_FIRST; t <= MW_T_LAST; t++) {
    const mw_type_info_t *ti = mw_type_info((mw_type_t)t);
    assert_non_null(ti->name);
    assert_true(ti->layout >= MW_LAYOUT_FIXED && ti->layout <= MW_LAYOUT_STRUCT);
    if (ti->layout == MW_LAYOUT_FIXED && t != MW_T_FIXED_BINARY) assert_true(ti->width > 0);
    if (ti->fsl_item) assert_int_equal(ti->layout, MW_LAYOUT_FIXED);
  }
  assert_int_equal(mw_type_info((mw_type_t)0)->layout, 0);
  assert_int_equal(mw_type_info((mw_type_t)(MW_T_LAST + 1))->layout, 0);
  assert_int_equal(mw_type_info(MW_T_DECIMAL128)->width, 16);
  assert_true(mw_type_info(MW_T_LARGE_UTF8)->large && mw_type_info(MW_T_LARGE_UTF8)->pk);
  assert_false(mw_type_info(MW_T_UINT32)->pk);
  assert_int_equal(mw_unit_parse("ns", 2), MW_UNIT_NS);
  assert_int_equal(mw_unit_parse("m", 1), -EINVAL);
  /* parameters, texts and checks */
  mw_field_t ts = {.name = (char *)"t", .type = MW_T_TIMESTAMP, .unit = MW_UNIT_MS, .tz = (char *)"UTC"};
  assert_string_equal(mw_field_type_text(&ts, buf, sizeof buf), "timestamp<ms, UTC>");
  assert_int_equal(mw_field_check(&ts, why, sizeof why), 0);
  ts.unit = 9;
  assert_int_equal(mw_field_check(&ts, why, sizeof why), -EINVAL);
  mw_field_t t64 = {.name = (char *)"t", .type = MW_T_TIME64, .unit = MW_UNIT_MS};
  assert_int_equal(mw_field_check(&t64, why, sizeof why), -EINVAL);
  assert_non_null(strstr(why, "us or ns"));
  mw_field_t dec = {.name = (char *)"d", .type = MW_T_DECIMAL128, .precision = 10, .scale = 2};
  assert_string_equal(mw_field_type_text(&dec, buf, sizeof buf), "decimal128<10, 2>");
  assert_int_equal(mw_field_check(&dec, why, sizeof why), 0);
  dec.scale = 11;
  assert_int_equal(mw_field_check(&dec, why, sizeof why), -EINVAL);
  mw_field_t fsb = {.name = (char *)"h", .type = MW_T_FIXED_BINARY, .byte_width = 16};
  assert_int_equal(mw_type_width(&fsb), 16);
  assert_string_equal(mw_field_type_text(&fsb, buf, sizeof buf), "fixed_size_binary<16>");
}

/* Nested fields: children, checks, equality and texts. */
static void test_nested_fields(void **state) {
  (void)state;
  mw_schema_t s, c;
  char buf[MW_FIELD_TEXT_BYTES], why[160];
  mw_schema_init(&s);
  assert_int_equal(mw_schema_add(&s, "st", MW_T_STRUCT, true), 0);
  mw_field_t *st = &s.fields[0];
  assert_int_equal(mw_field_add_child(st, "a", MW_T_INT32, false), 0);
  assert_int_equal(mw_field_add_child(st, "tags", MW_T_LIST, true), 1);
  assert_int_equal(mw_field_add_child(&st->children[1], "item", MW_T_UTF8, true), 0);
  assert_int_equal(mw_field_add_child(&st->children[1], "x", MW_T_UTF8, true), -EFBIG); /* one item */
  assert_int_equal(mw_field_add_child(&st->children[0], "x", MW_T_UTF8, true), -EINVAL); /* not nested */
  assert_int_equal(mw_field_check(st, why, sizeof why), 0);
  assert_int_equal(mw_field_count(st), 4);
  assert_string_equal(mw_field_type_text(st, buf, sizeof buf), "struct<a: int32 not null, tags: list<utf8>>");
  assert_int_equal(mw_schema_copy(&c, &s), 0);
  assert_true(mw_schema_equal(&s, &c));
  assert_true(mw_field_type_equal(&s.fields[0], &c.fields[0]));
  c.fields[0].children[1].children[0].nullable = false; /* items: equal type, unequal schema */
  assert_true(mw_field_type_equal(&s.fields[0], &c.fields[0]));
  assert_false(mw_schema_equal(&s, &c));
  c.fields[0].children[1].children[0].type = MW_T_BINARY;
  assert_false(mw_field_type_equal(&s.fields[0], &c.fields[0]));
  mw_schema_free(&c);
  assert_int_equal(mw_schema_copy(&c, &s), 0);
  free(c.fields[0].children[0].name);
  c.fields[0].children[0].name = strdup("b"); /* struct member names matter */
  assert_false(mw_field_type_equal(&s.fields[0], &c.fields[0]));
  free(c.fields[0].children[1].name);
  c.fields[0].children[1].name = strdup("b");
  assert_int_equal(mw_field_check(&c.fields[0], why, sizeof why), -EINVAL);
  assert_non_null(strstr(why, "duplicate"));
  mw_schema_free(&c);
  /* a struct without fields, a list without its item */
  assert_int_equal(mw_schema_add(&s, "e", MW_T_STRUCT, true), 1);
  assert_int_equal(mw_field_check(&s.fields[1], why, sizeof why), -EINVAL);
  assert_int_equal(mw_schema_add(&s, "l", MW_T_LARGE_LIST, true), 2);
  assert_int_equal(mw_field_check(&s.fields[2], why, sizeof why), -EINVAL);
  mw_schema_free(&s);
}

static void test_kvs(void **state) {
  (void)state;
  mw_kvs_t k = {0}, c = {0};
  assert_int_equal(mw_kvs_set(&k, "b", "1", 1), 0);
  assert_int_equal(mw_kvs_set(&k, "a", "22", 2), 0);
  assert_int_equal(mw_kvs_set(&k, "b", "333", 3), 0); /* overwrite keeps the place */
  assert_int_equal(k.n, 2);
  assert_string_equal(k.items[0].key, "b");
  assert_string_equal((char *)k.items[0].value, "333");
  assert_int_equal(k.items[0].value_len, 3);
  assert_int_equal(mw_kvs_copy(&c, &k), 0);
  assert_true(mw_kvs_remove(&k, "b"));
  assert_false(mw_kvs_remove(&k, "b"));
  assert_null(mw_kvs_get(&k, "b"));
  assert_string_equal((char *)mw_kvs_get(&k, "a")->value, "22");
  assert_int_equal(c.n, 2);
  assert_string_equal(c.items[1].key, "a");
  mw_kvs_free(&k);
  mw_kvs_free(&c);
  assert_int_equal(k.n, 0);
}

static void test_schema(void **state) {
  (void)state;
  mw_schema_t s, c;
  mw_schema_init(&s);
  assert_int_equal(mw_schema_add(&s, "id", MW_T_INT64, false), 0);
  assert_int_equal(mw_schema_add(&s, "vec", MW_T_FSL, true), 1);
  s.fields[1].fsl_dim = 4;
  s.fields[0].pk_position = 1;
  assert_int_equal(mw_kvs_set(&s.fields[0].meta, "k", "v", 1), 0);
  assert_int_equal(mw_kvs_set(&s.meta, "writer_epoch", "3", 1), 0);
  assert_int_equal(s.fields[0].id, -1);
  assert_true(s.fields[1].item_nullable);
  assert_int_equal(mw_schema_find(&s, "vec"), 1);
  assert_int_equal(mw_schema_find(&s, "nope"), -ENOENT);
  assert_int_equal(mw_schema_copy(&c, &s), 0);
  assert_true(mw_schema_equal(&s, &c));
  assert_int_equal(c.fields[0].pk_position, 1);
  assert_int_equal(c.fields[1].fsl_dim, 4);
  assert_string_equal((char *)mw_kvs_get(&c.fields[0].meta, "k")->value, "v");
  assert_string_equal((char *)mw_kvs_get(&c.meta, "writer_epoch")->value, "3");
  c.fields[1].fsl_dim = 5;
  assert_false(mw_schema_equal(&s, &c));
  c.fields[1].fsl_dim = 4;
  c.fields[0].nullable = true;
  assert_false(mw_schema_equal(&s, &c));
  mw_schema_free(&c);
  /* the field limit */
  mw_schema_t big;
  mw_schema_init(&big);
  for (int i = 0; i < MW_MAX_FIELDS; i++) assert_true(mw_schema_add(&big, "x", MW_T_INT32, true) >= 0);
  assert_int_equal(mw_schema_add(&big, "x", MW_T_INT32, true), -EFBIG);
  mw_schema_free(&big);
  mw_schema_free(&s);
}

/* mw_batch_append: rows after rows, nulls and strings kept, the batch's
 * WAL encoding dropped (its rows changed), the result valid. */
static void test_batch_append(void **state) {
  (void)state;
  mw_schema_t s;
  mw_schema_init(&s);
  assert_int_equal(mw_schema_add(&s, "id", MW_T_INT64, false), 0);
  assert_int_equal(mw_schema_add(&s, "name", MW_T_UTF8, true), 1);
  mw_batch_t a, b;
  assert_int_equal(mw_batch_init(&a, &s), 0);
  assert_int_equal(mw_batch_init(&b, &s), 0);
  for (int64_t i = 0; i < 5; i++) {
    mw_batch_t *x = i < 2 ? &a : &b;
    assert_int_equal(mw_column_append_fixed(&x->cols[0], &i, 8), 0);
    char name[8];
    snprintf(name, sizeof name, "n%d", (int)i);
    if (i == 1 || i == 3) assert_int_equal(mw_column_append_null(&x->cols[1], &s.fields[1]), 0);
    else assert_int_equal(mw_column_append_bytes(&x->cols[1], name, strlen(name)), 0);
    x->n_rows++;
  }
  assert_int_equal(mw_buf_append(&a.wal_ipc, "ipc", 3), 0);
  assert_int_equal(mw_batch_append(&a, &b), 0);
  assert_int_equal(a.n_rows, 5);
  assert_int_equal(a.wal_ipc.len, 0);
  assert_int_equal(mw_batch_validate(&a), 0);
  assert_int_equal(a.cols[1].null_count, 2);
  for (int64_t i = 0; i < 5; i++) {
    int64_t id;
    memcpy(&id, a.cols[0].values.data + i * 8, 8);
    assert_int_equal(id, i);
    assert_int_equal(mw_column_valid(&a.cols[1], i), i != 1 && i != 3);
  }
  size_t n;
  const uint8_t *p = mw_column_bytes(&a.cols[1], 4, &n);
  assert_int_equal(n, 2);
  assert_memory_equal(p, "n4", 2);
  /* an empty source changes nothing */
  mw_batch_reset(&b);
  assert_int_equal(mw_batch_append(&a, &b), 0);
  assert_int_equal(a.n_rows, 5);
  /* three sources at once: every row in order, each buffer grown once to
   * the total (int64 values: exactly; offsets: a leading offset per source) */
  mw_batch_t src[3];
  for (int k = 0; k < 3; k++) {
    assert_int_equal(mw_batch_init(&src[k], &s), 0);
    for (int64_t r = 0; r < 100; r++) {
      int64_t id = 5 + k * 100 + r;
      assert_int_equal(mw_column_append_fixed(&src[k].cols[0], &id, 8), 0);
      assert_int_equal(mw_column_append_bytes(&src[k].cols[1], "abc", r % 4), 0);
      src[k].n_rows++;
    }
  }
  assert_int_equal(mw_batch_concat(&a, src, 3), 0);
  assert_int_equal(a.n_rows, 305);
  assert_int_equal(mw_batch_validate(&a), 0);
  assert_int_equal(a.cols[0].values.len, 305 * 8);
  assert_int_equal(a.cols[0].values.cap, a.cols[0].values.len);
  assert_true(a.cols[1].offsets.cap - a.cols[1].offsets.len <= 3 * 4);
  /* (a bitmap starts at 64 bytes: 305 rows fit in its first allocation) */
  assert_true(a.cols[1].validity.cap <= 64 || a.cols[1].validity.cap - a.cols[1].validity.len <= 1);
  for (int64_t i = 5; i < 305; i++) {
    int64_t id;
    memcpy(&id, a.cols[0].values.data + i * 8, 8);
    assert_int_equal(id, i);
    assert_true(mw_column_valid(&a.cols[1], i));
    mw_column_bytes(&a.cols[1], i, &n);
    assert_int_equal(n, (size_t)((i - 5) % 100 % 4));
  }
  for (int k = 0; k < 3; k++) mw_batch_free(&src[k]);
  mw_batch_free(&a);
  mw_batch_free(&b);
  mw_schema_free(&s);
}

/* The validity bitmap appears at the first null, back-filled with ones. */
static void test_validity_backfill(void **state) {
  (void)state;
  static const int first_null[] = {0, 1, 7, 8, 9, 15, 16, 17};
  mw_field_t f = {.name = (char *)"x", .type = MW_T_INT32, .nullable = true};
  for (size_t t = 0; t < sizeof first_null / sizeof first_null[0]; t++) {
    mw_column_t c;
    memset(&c, 0, sizeof c);
    int32_t v = 5;
    for (int r = 0; r < first_null[t]; r++) assert_int_equal(mw_column_append_fixed(&c, &v, 4), 0);
    assert_int_equal(c.validity.len, 0);
    assert_int_equal(mw_column_append_null(&c, &f), 0);
    assert_tail_zero(&c.validity, c.length);
    for (int r = 0; r < 5; r++) assert_int_equal(mw_column_append_fixed(&c, &v, 4), 0);
    assert_int_equal(c.length, first_null[t] + 6);
    assert_int_equal(c.null_count, 1);
    for (int64_t r = 0; r < c.length; r++) assert_int_equal(mw_column_valid(&c, r), r != first_null[t]);
    assert_tail_zero(&c.validity, c.length);
    assert_int_equal(c.values.len, (size_t)c.length * 4);
    mw_buf_free(&c.validity);
    mw_buf_free(&c.values);
  }
}

static void build_mixed(mw_schema_t *s, mw_batch_t *b, int64_t rows) {
  mw_schema_init(s);
  assert_int_equal(mw_schema_add(s, "i", MW_T_INT64, false), 0);
  assert_int_equal(mw_schema_add(s, "b", MW_T_BOOL, true), 1);
  assert_int_equal(mw_schema_add(s, "s", MW_T_UTF8, true), 2);
  assert_int_equal(mw_schema_add(s, "v", MW_T_FSL, true), 3);
  s->fields[3].fsl_dim = 3;
  assert_int_equal(mw_batch_init(b, s), 0);
  for (int64_t r = 0; r < rows; r++) {
    assert_int_equal(mw_column_append_fixed(&b->cols[0], &r, 8), 0);
    if (r % 4 == 3) assert_int_equal(mw_column_append_null(&b->cols[1], &s->fields[1]), 0);
    else assert_int_equal(mw_column_append_bool(&b->cols[1], r % 2), 0);
    char txt[16];
    int n = snprintf(txt, sizeof txt, "r%d", (int)r);
    if (r % 5 == 4) assert_int_equal(mw_column_append_null(&b->cols[2], &s->fields[2]), 0);
    else assert_int_equal(mw_column_append_bytes(&b->cols[2], txt, r % 3 ? (size_t)n : 0), 0);
    float vec[3] = {(float)r, 1, 2};
    if (r % 6 == 5) assert_int_equal(mw_column_append_null(&b->cols[3], &s->fields[3]), 0);
    else assert_int_equal(mw_column_append_fixed(&b->cols[3], vec, 12), 0);
  }
  b->n_rows = rows;
}

static void test_builders(void **state) {
  (void)state;
  mw_schema_t s;
  mw_batch_t b;
  build_mixed(&s, &b, 30);
  assert_int_equal(mw_batch_validate(&b), 0);
  assert_int_equal(b.cols[0].validity.len, 0);
  assert_int_equal(b.cols[1].null_count, 7);
  assert_int_equal(b.cols[2].null_count, 6);
  assert_int_equal(b.cols[3].null_count, 5);
  assert_int_equal(b.cols[3].values.len, 30 * 12);
  size_t n;
  const uint8_t *p = mw_column_bytes(&b.cols[2], 7, &n);
  assert_int_equal(n, 2);
  assert_memory_equal(p, "r7", 2);
  mw_column_bytes(&b.cols[2], 3, &n); /* r % 3 == 0: empty string */
  assert_int_equal(n, 0);
  assert_true(mw_bit_get(b.cols[1].values.data, 1));
  assert_false(mw_bit_get(b.cols[1].values.data, 2));
  for (int i = 0; i < 4; i++) assert_tail_zero(&b.cols[i].validity, 30);
  assert_tail_zero(&b.cols[1].values, 30);
  /* reset keeps memory and the leading offset */
  size_t cap = b.cols[0].values.cap;
  mw_batch_reset(&b);
  assert_int_equal(b.n_rows, 0);
  assert_int_equal(b.cols[0].values.cap, cap);
  assert_int_equal(b.cols[2].offsets.len, 4);
  assert_int_equal(mw_batch_validate(&b), 0);
  mw_batch_free(&b);
  mw_schema_free(&s);
}

/* fsl item validity stays the right length whatever the order of appends. */
static void test_fsl_items(void **state) {
  (void)state;
  mw_field_t f = {.name = (char *)"v", .type = MW_T_FSL, .fsl_dim = 3, .nullable = true,
                  .item_nullable = true, .item_type = MW_T_FLOAT32};
  float vec[3] = {1, 2, 3};
  mw_column_t src;
  memset(&src, 0, sizeof src);
  /* src: 5 rows, row 1 null with null items, row 3 with one null item */
  for (int r = 0; r < 5; r++) {
    if (r == 1) assert_int_equal(mw_column_append_null(&src, &f), 0);
    else assert_int_equal(mw_column_append_fsl(&src, &f, vec), 0);
  }
  assert_int_equal(mw_buf_fill(&src.item_validity, 0xFF, 2), 0);
  src.item_validity.data[1] &= 0x7F; /* 15 items: bit 15 past the end */
  for (int k = 3; k < 6; k++) mw_bit_set(src.item_validity.data, k, false);
  mw_bit_set(src.item_validity.data, 10, false);
  src.item_null_count = 4;
  mw_schema_t s;
  mw_schema_init(&s);
  assert_int_equal(mw_schema_add(&s, "v", MW_T_FSL, true), 0);
  s.fields[0].fsl_dim = 3;
  mw_batch_t b = {.schema = &s, .n_rows = 5, .cols = &src};
  assert_int_equal(mw_batch_validate(&b), 0);

  /* dst starts with one valid row so the bitmap is materialised mid-byte
   * (3 items back-filled): no stray ones may remain past the end */
  for (int64_t start = 0; start < 5; start++) {
    mw_column_t dst;
    memset(&dst, 0, sizeof dst);
    assert_int_equal(mw_column_append_fsl(&dst, &f, vec), 0);
    assert_int_equal(mw_column_append_range(&dst, &src, &f, start, 5 - start), 0);
    int64_t items = dst.length * 3;
    assert_int_equal(dst.length, 1 + 5 - start);
    if (dst.item_validity.len) {
      assert_tail_zero(&dst.item_validity, items);
      assert_int_equal(zeros(&dst.item_validity, items), dst.item_null_count);
    }
    for (int64_t r = start; r < 5; r++)
      for (int k = 0; k < 3; k++) {
        bool want = mw_bit_get(src.item_validity.data, r * 3 + k);
        bool got = dst.item_validity.len == 0 ||
                   mw_bit_get(dst.item_validity.data, (1 + r - start) * 3 + k);
        assert_int_equal(want, got);
      }
    /* appending after materialisation keeps the bitmap in step */
    assert_int_equal(mw_column_append_fsl(&dst, &f, vec), 0);
    assert_int_equal(mw_column_append_null(&dst, &f), 0);
    items = dst.length * 3;
    if (dst.item_validity.len) {
      assert_int_equal(dst.item_validity.len, (size_t)(items + 7) / 8);
      assert_int_equal(zeros(&dst.item_validity, items), dst.item_null_count);
      assert_tail_zero(&dst.item_validity, items);
    }
    /* a source without item bitmap appended after one with */
    mw_column_t plain;
    memset(&plain, 0, sizeof plain);
    assert_int_equal(mw_column_append_fsl(&plain, &f, vec), 0);
    assert_int_equal(mw_column_append_range(&dst, &plain, &f, 0, 1), 0);
    items = dst.length * 3;
    if (dst.item_validity.len) {
      assert_int_equal(dst.item_validity.len, (size_t)(items + 7) / 8);
      assert_int_equal(zeros(&dst.item_validity, items), dst.item_null_count);
    }
    mw_batch_t db = {.schema = &s, .n_rows = dst.length, .cols = &dst};
    assert_int_equal(mw_batch_validate(&db), 0);
    mw_buf_free(&plain.values);
    mw_buf_free(&dst.values);
    mw_buf_free(&dst.validity);
    mw_buf_free(&dst.item_validity);
  }
  mw_buf_free(&src.values);
  mw_buf_free(&src.validity);
  mw_buf_free(&src.item_validity);
  mw_schema_free(&s);
}

static void test_append_range(void **state) {
  (void)state;
  mw_schema_t s;
  mw_batch_t src, dst;
  build_mixed(&s, &src, 40);
  assert_int_equal(mw_batch_init(&dst, &s), 0);
  /* three slices, one empty, in order: dst == rows 3..39 of src */
  int64_t cuts[][2] = {{3, 10}, {13, 0}, {13, 27}};
  for (int c = 0; c < 3; c++)
    for (size_t i = 0; i < s.n_fields; i++)
      assert_int_equal(mw_column_append_range(&dst.cols[i], &src.cols[i], &s.fields[i], cuts[c][0], cuts[c][1]), 0);
  dst.n_rows = 37;
  assert_int_equal(mw_batch_validate(&dst), 0);
  for (int64_t r = 0; r < 37; r++) {
    int64_t sr = r + 3;
    for (size_t i = 0; i < s.n_fields; i++)
      assert_int_equal(mw_column_valid(&dst.cols[i], r), mw_column_valid(&src.cols[i], sr));
    assert_memory_equal(dst.cols[0].values.data + 8 * r, src.cols[0].values.data + 8 * sr, 8);
    if (mw_column_valid(&src.cols[1], sr))
      assert_int_equal(mw_bit_get(dst.cols[1].values.data, r), mw_bit_get(src.cols[1].values.data, sr));
    size_t na, nb;
    const uint8_t *a = mw_column_bytes(&dst.cols[2], r, &na), *b = mw_column_bytes(&src.cols[2], sr, &nb);
    assert_int_equal(na, nb);
    if (na) assert_memory_equal(a, b, na);
    assert_memory_equal(dst.cols[3].values.data + 12 * r, src.cols[3].values.data + 12 * sr, 12);
  }
  for (size_t i = 0; i < s.n_fields; i++) assert_tail_zero(&dst.cols[i].validity, 37);
  mw_batch_free(&dst);
  mw_batch_free(&src);
  mw_schema_free(&s);
}

static void test_validate(void **state) {
  (void)state;
  mw_schema_t s;
  mw_batch_t b;
  build_mixed(&s, &b, 20);
  assert_int_equal(mw_batch_validate(&b), 0);
  b.cols[1].null_count++;
  assert_int_equal(mw_batch_validate(&b), -EINVAL);
  b.cols[1].null_count--;
  int32_t *off = (int32_t *)(void *)b.cols[2].offsets.data;
  int32_t keep = off[5];
  off[5] = off[6] + 1; /* not monotone */
  assert_int_equal(mw_batch_validate(&b), -EINVAL);
  off[5] = keep;
  b.cols[0].values.len -= 8;
  assert_int_equal(mw_batch_validate(&b), -EINVAL);
  b.cols[0].values.len += 8;
  b.cols[3].item_null_count = 1; /* no item bitmap, yet a count */
  assert_int_equal(mw_batch_validate(&b), -EINVAL);
  b.cols[3].item_null_count = 0;
  b.n_rows = 19;
  assert_int_equal(mw_batch_validate(&b), -EINVAL);
  b.n_rows = 20;
  s.fields[2].nullable = false; /* nulls in a non-nullable column */
  assert_int_equal(mw_batch_validate(&b), -EINVAL);
  s.fields[2].nullable = true;
  assert_int_equal(mw_batch_validate(&b), 0);
  mw_batch_free(&b);
  mw_schema_free(&s);
}

/* Views and blobs (common/buf.h): a view never frees or writes its bytes;
 * every write copies it first; the blob lives as long as a reference. */
static void test_buf_views(void **state) {
  (void)state;
  uint8_t *mem = malloc(16);
  assert_non_null(mem);
  for (int i = 0; i < 16; i++) mem[i] = (uint8_t)i;
  mw_blob_t *blob = mw_blob_new(mem, 16);
  assert_non_null(blob);
  assert_int_equal(mw_blob_refs(blob), 1);
  assert_ptr_equal(mw_blob_data(blob), mem);
  assert_int_equal(mw_blob_len(blob), 16);
  mw_buf_t v;
  mw_buf_view(&v, mem + 4, 8);
  assert_true(mw_buf_is_view(&v));
  assert_int_equal(v.len, 8);
  mw_buf_shrink(&v); /* not ours: unchanged */
  assert_true(mw_buf_is_view(&v) && v.data == mem + 4);
  /* append: copy-on-write, the blob's bytes untouched */
  assert_int_equal(mw_buf_put_u8(&v, 0xAA), 0);
  assert_false(mw_buf_is_view(&v));
  assert_true(v.data != mem + 4 && v.len == 9 && v.cap >= 9);
  assert_int_equal(v.data[0], 4);
  assert_int_equal(v.data[8], 0xAA);
  assert_int_equal(mem[12], 12);
  mw_buf_free(&v);
  /* free, reset of a view forget it */
  mw_buf_view(&v, mem, 16);
  mw_buf_reset(&v);
  assert_null(v.data);
  assert_int_equal(mw_buf_fill(&v, 7, 3), 0); /* a fresh buffer after a reset */
  assert_false(mw_buf_is_view(&v));
  mw_buf_free(&v);
  mw_buf_view(&v, mem, 16);
  mw_buf_free(&v);
  assert_null(v.data);
  /* own, steal */
  mw_buf_view(&v, mem + 2, 3);
  assert_int_equal(mw_buf_own(&v), 0);
  assert_false(mw_buf_is_view(&v));
  assert_int_equal(mw_buf_own(&v), 0); /* owned: no-op */
  mw_buf_free(&v);
  mw_buf_view(&v, mem + 8, 4);
  size_t n;
  uint8_t *stolen = mw_buf_steal(&v, &n);
  assert_true(stolen != NULL && stolen != mem + 8 && n == 4 && stolen[0] == 8);
  free(stolen);
  mw_buf_view(&v, mem, 0); /* an empty view is an empty buffer */
  assert_null(v.data);
  assert_false(mw_buf_is_view(&v));
  /* references */
  assert_ptr_equal(mw_blob_ref(blob), blob);
  assert_int_equal(mw_blob_refs(blob), 2);
  mw_blob_unref(blob);
  assert_int_equal(mw_blob_refs(blob), 1);
  assert_null(mw_blob_ref(NULL));
  mw_blob_unref(NULL);
  mw_blob_unref(blob); /* frees mem (ASan: no leak, no use after) */
}

/* A batch whose columns view a blob: adopt takes one reference (a second
 * blob is refused), the builders write into copies, truncate and reset
 * keep the blob unwritten, own copies everything and drops the
 * reference, free drops it. */
static void test_batch_views(void **state) {
  (void)state;
  mw_schema_t s;
  mw_schema_init(&s);
  assert_true(mw_schema_add(&s, "id", MW_T_INT64, false) >= 0);
  assert_true(mw_schema_add(&s, "name", MW_T_UTF8, true) >= 0);
  /* the blob: 4 int64 ids, offsets {0,1,3,3,6}, "abcdef", validity 0b1011 */
  uint8_t *mem = calloc(1, 128);
  int64_t ids[4] = {10, 11, 12, 13};
  int32_t off[5] = {0, 1, 3, 3, 6};
  memcpy(mem, ids, 32);
  memcpy(mem + 32, off, 20);
  memcpy(mem + 56, "abcdef", 6);
  mem[64] = 0x0B;
  mw_blob_t *blob = mw_blob_new(mem, 128);
  mw_batch_t b;
  assert_int_equal(mw_batch_init(&b, &s), 0);
  mw_buf_view(&b.cols[0].values, mem, 32);
  b.cols[0].length = 4;
  mw_buf_free(&b.cols[1].offsets);
  mw_buf_view(&b.cols[1].offsets, mem + 32, 20);
  mw_buf_view(&b.cols[1].values, mem + 56, 6);
  mw_buf_view(&b.cols[1].validity, mem + 64, 1);
  b.cols[1].length = 4;
  b.cols[1].null_count = 1;
  b.n_rows = 4;
  assert_int_equal(mw_batch_validate(&b), 0);
  assert_int_equal(mw_batch_view_bytes(&b), 32 + 20 + 6 + 1);
  assert_int_equal(mw_batch_adopt(&b, blob), 0);
  assert_int_equal(mw_batch_adopt(&b, blob), 0); /* the same blob: no second reference */
  assert_int_equal(mw_blob_refs(blob), 2);
  mw_blob_t *other = mw_blob_new(malloc(1), 1);
  assert_int_equal(mw_batch_adopt(&b, other), -EINVAL);
  mw_blob_unref(other);
  /* a null appended: validity written in a copy; the blob unchanged */
  assert_int_equal(mw_column_append_null(&b.cols[1], &s.fields[1]), 0);
  int64_t id = 14;
  assert_int_equal(mw_column_append_fixed(&b.cols[0], &id, 8), 0);
  b.n_rows = 5;
  assert_int_equal(mw_batch_validate(&b), 0);
  assert_false(mw_buf_is_view(&b.cols[1].validity));
  assert_false(mw_buf_is_view(&b.cols[1].offsets));
  assert_false(mw_buf_is_view(&b.cols[0].values));
  assert_true(mw_buf_is_view(&b.cols[1].values)); /* an empty value appended nothing */
  assert_int_equal(mem[64], 0x0B);
  assert_int_equal(memcmp(mem + 32, off, 20), 0);
  /* truncate a view-only column: its bitmap tail cleared in a copy */
  mw_buf_free(&b.cols[1].validity);
  mw_buf_view(&b.cols[1].validity, mem + 64, 1);
  b.cols[1].null_count = 1;
  mw_column_truncate(&b.cols[1], &s.fields[1], 4);
  mw_column_truncate(&b.cols[0], &s.fields[0], 4);
  b.n_rows = 4;
  assert_int_equal(mw_batch_validate(&b), 0);
  mw_column_truncate(&b.cols[1], &s.fields[1], 1);
  assert_int_equal(b.cols[1].null_count, 0);
  assert_int_equal(mem[64], 0x0B);
  /* own: no view left, the reference dropped */
  assert_int_equal(mw_batch_own(&b), 0);
  assert_null(b.backing);
  assert_int_equal(mw_batch_view_bytes(&b), 0);
  assert_int_equal(mw_blob_refs(blob), 1);
  /* reset drops views and the reference; free too */
  mw_buf_free(&b.cols[1].values);
  mw_buf_view(&b.cols[1].values, mem + 56, 1);
  assert_int_equal(mw_batch_adopt(&b, blob), 0);
  mw_batch_reset(&b);
  assert_null(b.backing);
  assert_int_equal(mw_batch_view_bytes(&b), 0);
  assert_int_equal(mw_blob_refs(blob), 1);
  mw_buf_free(&b.cols[0].values); /* the reset kept its copy's memory */
  mw_buf_view(&b.cols[0].values, mem, 8);
  b.cols[0].length = 1;
  assert_int_equal(mw_batch_adopt(&b, blob), 0);
  mw_blob_unref(blob); /* the batch's reference keeps mem */
  assert_int_equal(mw_blob_refs(blob), 1);
  mw_batch_free(&b); /* frees mem */
  mw_schema_free(&s);
}

/* --- bulk append_range against the row-at-a-time reference --- */

static uint64_t prop_seed = 0x9E3779B97F4A7C15u;
static uint32_t prop_rand(void) {
  prop_seed ^= prop_seed << 13;
  prop_seed ^= prop_seed >> 7;
  prop_seed ^= prop_seed << 17;
  return (uint32_t)(prop_seed >> 11);
}

/* n rows of field f: nulls none (0), all (1) or random (2). */
static void prop_fill(mw_column_t *c, const mw_field_t *f, int64_t n, int nulls) {
  for (int64_t r = 0; r < n; r++) {
    bool null = f->nullable && (nulls == 1 || (nulls == 2 && prop_rand() % 3 == 0));
    uint8_t v[8];
    for (int k = 0; k < 8; k++) v[k] = (uint8_t)prop_rand();
    int rc;
    if (null) rc = mw_column_append_null(c, f);
    else if (f->type == MW_T_BOOL) rc = mw_column_append_bool(c, v[0] & 1);
    else if (f->type == MW_T_UTF8 || f->type == MW_T_BINARY) rc = mw_column_append_bytes(c, v, v[1] % 8);
    else rc = mw_column_append_fixed(c, v, mw_type_width(f));
    assert_int_equal(rc, 0);
  }
}

/* a and b hold the same rows: lengths, nulls, bitmaps (tail zero) and the
 * values of valid rows. */
static void prop_same(const mw_column_t *a, const mw_column_t *b, const mw_field_t *f) {
  assert_int_equal(a->length, b->length);
  assert_int_equal(a->null_count, b->null_count);
  assert_int_equal(zeros(&a->validity, a->length), a->null_count);
  assert_tail_zero(&a->validity, a->length);
  for (int64_t r = 0; r < a->length; r++) {
    assert_int_equal(mw_column_valid(a, r), mw_column_valid(b, r));
    if (!mw_column_valid(a, r)) continue;
    if (f->type == MW_T_BOOL) {
      assert_int_equal(mw_bit_get(a->values.data, r), mw_bit_get(b->values.data, r));
    } else if (f->type == MW_T_UTF8 || f->type == MW_T_BINARY) {
      size_t na, nb;
      const uint8_t *pa = mw_column_bytes(a, r, &na), *pb = mw_column_bytes(b, r, &nb);
      assert_int_equal(na, nb);
      if (na) assert_memory_equal(pa, pb, na);
    } else {
      size_t w = mw_type_width(f);
      assert_memory_equal(a->values.data + r * w, b->values.data + r * w, w);
    }
  }
}

/* A view column over c's buffers (the bulk path reads views and must make
 * an appended-to view its own). */
static mw_column_t prop_view(const mw_column_t *c) {
  mw_column_t v = *c;
  mw_buf_view(&v.validity, c->validity.data, c->validity.len);
  mw_buf_view(&v.values, c->values.data, c->values.len);
  mw_buf_view(&v.offsets, c->offsets.data, c->offsets.len);
  return v;
}

static void test_append_range_bulk(void **state) {
  (void)state;
  const mw_type_t types[] = {MW_T_INT32, MW_T_INT64, MW_T_FLOAT64, MW_T_BOOL, MW_T_UTF8, MW_T_BINARY};
  for (int iter = 0; iter < 4000; iter++) {
    mw_field_t f = {.type = types[prop_rand() % 6], .nullable = prop_rand() % 4 != 0};
    int64_t n = prop_rand() % 40, have = prop_rand() % 20;
    mw_column_t src, a, b;
    assert_int_equal(mw_column_init(&src, &f), 0);
    assert_int_equal(mw_column_init(&a, &f), 0);
    assert_int_equal(mw_column_init(&b, &f), 0);
    prop_fill(&src, &f, n, (int)(prop_rand() % 3));
    uint64_t seed = prop_seed;
    int nulls = (int)(prop_rand() % 3);
    prop_fill(&a, &f, have, nulls);
    prop_seed = seed;
    (void)prop_rand();
    prop_fill(&b, &f, have, nulls);
    int64_t start = n ? prop_rand() % (n + 1) : 0;
    int64_t count = prop_rand() % (n - start + 1);
    bool view = prop_rand() % 2;
    mw_column_t sv = view ? prop_view(&src) : src;
    /* twice: the second append lands at an unaligned offset too */
    for (int k = 0; k < 2; k++) {
      assert_int_equal(mw_column_append_range(&a, &sv, &f, start, count), 0);
      assert_int_equal(mw_column_append_range_rows(&b, &src, &f, start, count), 0);
      prop_same(&a, &b, &f);
    }
    mw_column_free(&src);
    mw_column_free(&a);
    mw_column_free(&b);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_types),
      cmocka_unit_test(test_nested_fields),
      cmocka_unit_test(test_kvs),
      cmocka_unit_test(test_schema),
      cmocka_unit_test(test_validity_backfill),
      cmocka_unit_test(test_builders),
      cmocka_unit_test(test_fsl_items),
      cmocka_unit_test(test_append_range),
      cmocka_unit_test(test_append_range_bulk),
      cmocka_unit_test(test_batch_append),
      cmocka_unit_test(test_validate),
      cmocka_unit_test(test_buf_views),
      cmocka_unit_test(test_batch_views),
  };
  return tu_run_group(tests, NULL, NULL);
}
