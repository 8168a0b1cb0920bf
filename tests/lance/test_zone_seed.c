/*
 * test_zone_seed.c — zone write seeds v1 (zone_seed.h) and the Arrow IPC file
 * format they are stored in (ipc_file.h).
 *
 * Golden seeds are computed independently of the builder, two ways:
 *   - by hand, for small columns of the core types and float16, covering NaN of
 *     both signs, -0.0 and +0.0, ±infinity, all-null and all-NaN zones, a
 *     short final zone, strings (empty string included), bools, integer
 *     extremes, decimal128 (signed 128-bit order: ties in the high half,
 *     ±(10^38 - 1)), fixed_size_binary (unsigned bytes) and a
 *     fixed_size_list (null bounds, outer counts);
 *   - by a second implementation in this file (ref_zone, and gref_* for
 *     the other types of the type table: int8/16, uint8/16, float16 by
 *     half-float arithmetic, the temporal types, large_utf8/binary,
 *     decimal128 as (signed high, unsigned low) 64-bit halves, and
 *     fixed_size_binary) that sorts each zone's ordinary values with a
 *     comparator written on C's own types (doubles with signbit() for ±0,
 *     memcmp for bytes), run over
 *     random columns fed to the builder in random batch sizes.
 * Every seed is decoded back and compared field by field, and
 * mw_seed_check_column must accept it against the data and refuse it when
 * the data changes. The decoder's validation is shown rule by rule on seeds
 * built by hand with one rule broken each.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cases.h"

#include "lance/deletion.h"
#include "lance/ipc_file.h"
#include "lance/zone_seed.h"
#include "testutil.h"

/* ------------------------------------------------------------- helpers */

/* A one-column schema + batch, appended to row by row. */
typedef struct col1 {
  mw_schema_t s;
  mw_batch_t b;
} col1_t;

static void col1_init(col1_t *c, mw_type_t t, int32_t dim) {
  mw_schema_init(&c->s);
  assert_int_equal(mw_schema_add(&c->s, "v", t, true), 0);
  c->s.fields[0].fsl_dim = dim;
  c->s.fields[0].item_nullable = true;
  assert_int_equal(mw_batch_init(&c->b, &c->s), 0);
}

static void col1_free(col1_t *c) {
  mw_batch_free(&c->b);
  mw_schema_free(&c->s);
}

static mw_column_t *col(col1_t *c) { return &c->b.cols[0]; }
static const mw_field_t *fld(col1_t *c) { return &c->s.fields[0]; }

static void add_null(col1_t *c) {
  assert_int_equal(mw_column_append_null(col(c), fld(c)), 0);
  c->b.n_rows++;
}
static void add_fixed(col1_t *c, const void *v, size_t w) {
  assert_int_equal(mw_column_append_fixed(col(c), v, w), 0);
  c->b.n_rows++;
}
static void add_f64(col1_t *c, double v) { add_fixed(c, &v, 8); }
static void add_f32(col1_t *c, float v) { add_fixed(c, &v, 4); }
static void add_bits64(col1_t *c, uint64_t v) { add_fixed(c, &v, 8); }
static void add_bits32(col1_t *c, uint32_t v) { add_fixed(c, &v, 4); }
static void add_str(col1_t *c, const char *v) {
  assert_int_equal(mw_column_append_bytes(col(c), v, strlen(v)), 0);
  c->b.n_rows++;
}
static void add_bool(col1_t *c, bool v) {
  assert_int_equal(mw_column_append_bool(col(c), v), 0);
  c->b.n_rows++;
}

#define POS_NAN64 UINT64_C(0x7ff8000000000001)
#define NEG_NAN64 UINT64_C(0xfff8000000000000)
#define POS_NAN32 UINT32_C(0x7fc00000)
#define NEG_NAN32 UINT32_C(0xffc00001)

/* Build a seed over the whole column, fed in batches of `step` rows. */
static void build(col1_t *c, uint64_t rpz, int64_t step, mw_buf_t *out) {
  mw_seed_builder_t b;
  mw_ipc_writer_t w;
  mw_err_t err = {0};
  mw_ipc_writer_init(&w);
  assert_int_equal(mw_seed_builder_init(&b, fld(c), rpz, &err), 0);
  for (int64_t r = 0; r < col(c)->length; r += step) {
    int64_t n = col(c)->length - r < step ? col(c)->length - r : step;
    assert_int_equal(mw_seed_builder_add(&b, col(c), r, n, &err), 0);
  }
  int rc = mw_seed_builder_finish(&b, &w, out, &err);
  if (rc < 0) fail_msg("finish: %s", err.msg);
  mw_seed_builder_free(&b);
  mw_ipc_writer_free(&w);
}

static void decode_ok(const mw_buf_t *buf, col1_t *c, uint64_t rpz, mw_seed_t *s) {
  mw_err_t err = {0};
  int rc = mw_seed_decode(buf->data, buf->len, fld(c), rpz, (uint64_t)col(c)->length, s, &err);
  if (rc < 0) fail_msg("decode: %s", err.msg);
  rc = mw_seed_check_column(s, fld(c), col(c), &err);
  if (rc < 0) fail_msg("check: %s", err.msg);
}

/* Expected zone, written by hand. NULL bound = null. */
typedef struct zexp {
  const void *min, *max;
  uint32_t nulls, nans, neg;
  uint64_t len;
} zexp_t;

static void expect_zones(const mw_seed_t *s, const zexp_t *z, size_t n, size_t width) {
  assert_int_equal(s->version, 1);
  assert_int_equal(s->n_zones, n);
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(s->null_count[i], z[i].nulls);
    assert_int_equal(s->nan_count[i], z[i].nans);
    assert_int_equal(s->negative_nan_count[i], z[i].neg);
    assert_int_equal(s->zone_length[i], z[i].len);
    const mw_column_t *b[2] = {s->min, s->max};
    const void *e[2] = {z[i].min, z[i].max};
    for (int k = 0; k < 2; k++) {
      if (e[k] == NULL) {
        assert_false(mw_column_valid(b[k], (int64_t)i));
        continue;
      }
      assert_true(mw_column_valid(b[k], (int64_t)i));
      if (width == 0) { /* string */
        size_t len;
        const uint8_t *p = mw_column_bytes(b[k], (int64_t)i, &len);
        assert_int_equal(len, strlen(e[k]));
        assert_memory_equal(p, e[k], len);
      } else if (width == 1) { /* bool */
        assert_int_equal(mw_bit_get(b[k]->values.data, (int64_t)i), *(const uint8_t *)e[k]);
      } else {
        assert_memory_equal(b[k]->values.data + i * width, e[k], width);
      }
    }
  }
}

/* --------------------------------------------------- hand-computed goldens */

static void test_golden_float64(void **state) {
  (void)state;
  col1_t c;
  col1_init(&c, MW_T_FLOAT64, 0);
  /* zone 0 (rows 0-3): +0.0, -0.0, +NaN, 2.5   -> min -0.0, max 2.5
   * zone 1 (4-7):      -NaN, +inf, -inf, null  -> min -inf, max +inf
   * zone 2 (8-11):     null, null, null, null  -> all null: null bounds
   * zone 3 (12-15):    -NaN, +NaN, null, -NaN  -> no ordinary value: null bounds
   * zone 4 (16-17):    7.0, -1e300             -> short final zone */
  add_f64(&c, 0.0), add_f64(&c, -0.0), add_bits64(&c, POS_NAN64), add_f64(&c, 2.5);
  add_bits64(&c, NEG_NAN64), add_f64(&c, INFINITY), add_f64(&c, -INFINITY), add_null(&c);
  for (int i = 0; i < 4; i++) add_null(&c);
  add_bits64(&c, NEG_NAN64), add_bits64(&c, POS_NAN64), add_null(&c), add_bits64(&c, NEG_NAN64);
  add_f64(&c, 7.0), add_f64(&c, -1e300);
  double nz = -0.0, a = 2.5, ni = -INFINITY, pi = INFINITY, s7 = 7.0, big = -1e300;
  zexp_t z[] = {{&nz, &a, 0, 1, 0, 4}, {&ni, &pi, 1, 1, 1, 4}, {NULL, NULL, 4, 0, 0, 4},
                {NULL, NULL, 1, 3, 2, 4}, {&big, &s7, 0, 0, 0, 2}};
  for (int64_t step = 1; step <= 18; step += 5) {
    mw_buf_t buf = MW_BUF_INIT;
    mw_seed_t s;
    build(&c, 4, step, &buf);
    decode_ok(&buf, &c, 4, &s);
    expect_zones(&s, z, 5, 8);
    /* nulls at 7, 8, 9, 10, 11, 14 */
    assert_true(s.has_null_bitmap);
    uint32_t want[] = {7, 8, 9, 10, 11, 14};
    assert_int_equal(s.n_null_offsets, 6);
    assert_memory_equal(s.null_offsets, want, sizeof want);
    mw_seed_free(&s);
    mw_buf_free(&buf);
  }
  col1_free(&c);
}

static void test_golden_float32(void **state) {
  (void)state;
  col1_t c;
  col1_init(&c, MW_T_FLOAT32, 0);
  /* rpz 3: [-0.0, +0.0, -NaN] [+NaN, 1.5, -2.25] [+inf] */
  add_f32(&c, -0.0f), add_f32(&c, 0.0f), add_bits32(&c, NEG_NAN32);
  add_bits32(&c, POS_NAN32), add_f32(&c, 1.5f), add_f32(&c, -2.25f);
  add_f32(&c, INFINITY);
  float nz = -0.0f, pz = 0.0f, a = 1.5f, b = -2.25f, inf = INFINITY;
  zexp_t z[] = {{&nz, &pz, 0, 1, 1, 3}, {&b, &a, 0, 1, 0, 3}, {&inf, &inf, 0, 0, 0, 1}};
  mw_buf_t buf = MW_BUF_INIT;
  mw_seed_t s;
  build(&c, 3, 2, &buf);
  decode_ok(&buf, &c, 3, &s);
  expect_zones(&s, z, 3, 4);
  assert_true(s.has_null_bitmap);
  assert_int_equal(s.n_null_offsets, 0); /* no nulls: an empty bitmap, not an absent one */
  mw_seed_free(&s);
  mw_buf_free(&buf);
  col1_free(&c);
}

static void test_golden_float16(void **state) {
  (void)state;
  col1_t c;
  col1_init(&c, MW_T_FLOAT16, 0);
  /* rpz 4: [+0, -0, +NaN, 1.0] [-NaN, +inf, -inf] */
  uint16_t v[] = {0x0000, 0x8000, 0x7e00, 0x3c00, 0xfe01, 0x7c00, 0xfc00};
  for (int i = 0; i < 7; i++) add_fixed(&c, &v[i], 2);
  uint16_t nz = 0x8000, one = 0x3c00, ninf = 0xfc00, pinf = 0x7c00;
  zexp_t z[] = {{&nz, &one, 0, 1, 0, 4}, {&ninf, &pinf, 0, 1, 1, 3}};
  mw_buf_t buf = MW_BUF_INIT;
  mw_seed_t s;
  build(&c, 4, 3, &buf);
  decode_ok(&buf, &c, 4, &s);
  expect_zones(&s, z, 2, 2);
  mw_seed_free(&s);
  mw_buf_free(&buf);
  col1_free(&c);
}

static void test_golden_ints(void **state) {
  (void)state;
  /* int64 extremes, int32 negatives, unsigned tops: rpz 2, final zone short */
  col1_t c;
  col1_init(&c, MW_T_INT64, 0);
  int64_t v64[] = {INT64_MAX, INT64_MIN, -1, 0, 5};
  for (int i = 0; i < 5; i++) add_fixed(&c, &v64[i], 8);
  zexp_t z64[] = {{&v64[1], &v64[0], 0, 0, 0, 2}, {&v64[2], &v64[3], 0, 0, 0, 2}, {&v64[4], &v64[4], 0, 0, 0, 1}};
  mw_buf_t buf = MW_BUF_INIT;
  mw_seed_t s;
  build(&c, 2, 3, &buf);
  decode_ok(&buf, &c, 2, &s);
  expect_zones(&s, z64, 3, 8);
  mw_seed_free(&s);
  mw_buf_free(&buf);
  col1_free(&c);

  col1_init(&c, MW_T_INT32, 0);
  int32_t v32[] = {-7, 3, INT32_MIN, 0};
  add_fixed(&c, &v32[0], 4), add_null(&c), add_fixed(&c, &v32[1], 4);
  add_fixed(&c, &v32[2], 4), add_fixed(&c, &v32[3], 4);
  zexp_t z32[] = {{&v32[0], &v32[1], 1, 0, 0, 3}, {&v32[2], &v32[3], 0, 0, 0, 2}};
  build(&c, 3, 1, &buf);
  decode_ok(&buf, &c, 3, &s);
  expect_zones(&s, z32, 2, 4);
  mw_seed_free(&s);
  mw_buf_free(&buf);
  col1_free(&c);

  col1_init(&c, MW_T_UINT64, 0);
  uint64_t u64[] = {UINT64_MAX, 1, UINT64_C(0x8000000000000000)};
  for (int i = 0; i < 3; i++) add_fixed(&c, &u64[i], 8);
  zexp_t zu64[] = {{&u64[1], &u64[0], 0, 0, 0, 3}}; /* unsigned: 2^63 is not negative */
  build(&c, 8192, 2, &buf);
  decode_ok(&buf, &c, 8192, &s);
  expect_zones(&s, zu64, 1, 8);
  mw_seed_free(&s);
  mw_buf_free(&buf);
  col1_free(&c);

  col1_init(&c, MW_T_UINT32, 0);
  uint32_t u32[] = {UINT32_MAX, 0x80000000u, 2};
  for (int i = 0; i < 3; i++) add_fixed(&c, &u32[i], 4);
  zexp_t zu32[] = {{&u32[2], &u32[0], 0, 0, 0, 3}};
  build(&c, 4, 3, &buf);
  decode_ok(&buf, &c, 4, &s);
  expect_zones(&s, zu32, 1, 4);
  mw_seed_free(&s);
  mw_buf_free(&buf);
  col1_free(&c);
}

static void test_golden_strings(void **state) {
  (void)state;
  for (int t = 0; t < 2; t++) {
    col1_t c;
    col1_init(&c, t ? MW_T_BINARY : MW_T_UTF8, 0);
    /* rpz 4: ["b", "ab", null, "abc"] ["", "zz", "z", null] [null, null] */
    add_str(&c, "b"), add_str(&c, "ab"), add_null(&c), add_str(&c, "abc");
    add_str(&c, ""), add_str(&c, "zz"), add_str(&c, "z"), add_null(&c);
    add_null(&c), add_null(&c);
    zexp_t z[] = {{"ab", "b", 1, 0, 0, 4}, {"", "zz", 1, 0, 0, 4}, {NULL, NULL, 2, 0, 0, 2}};
    for (int64_t step = 1; step <= 10; step += 3) {
      mw_buf_t buf = MW_BUF_INIT;
      mw_seed_t s;
      build(&c, 4, step, &buf);
      decode_ok(&buf, &c, 4, &s);
      expect_zones(&s, z, 3, 0);
      mw_seed_free(&s);
      mw_buf_free(&buf);
    }
    col1_free(&c);
  }
}

static void test_golden_bool_and_fsl(void **state) {
  (void)state;
  col1_t c;
  col1_init(&c, MW_T_BOOL, 0);
  /* rpz 2: [true, true] [false, null] [null, null] [false, true] */
  add_bool(&c, true), add_bool(&c, true), add_bool(&c, false), add_null(&c);
  add_null(&c), add_null(&c), add_bool(&c, false), add_bool(&c, true);
  uint8_t f = 0, t = 1;
  zexp_t z[] = {{&t, &t, 0, 0, 0, 2}, {&f, &f, 1, 0, 0, 2}, {NULL, NULL, 2, 0, 0, 2}, {&f, &t, 0, 0, 0, 2}};
  mw_buf_t buf = MW_BUF_INIT;
  mw_seed_t s;
  build(&c, 2, 3, &buf);
  decode_ok(&buf, &c, 2, &s);
  expect_zones(&s, z, 4, 1);
  mw_seed_free(&s);
  mw_buf_free(&buf);
  col1_free(&c);

  /* no nulls (the byte-at-a-time path): rpz 5 crosses byte edges;
   * rows 0-4 all true, 5-9 mixed, 10-14 all false, 15-19 one true at 19 */
  col1_init(&c, MW_T_BOOL, 0);
  for (int i = 0; i < 20; i++) add_bool(&c, i < 5 || i == 7 || i == 19);
  zexp_t zn[] = {{&t, &t, 0, 0, 0, 5}, {&f, &t, 0, 0, 0, 5}, {&f, &f, 0, 0, 0, 5}, {&f, &t, 0, 0, 0, 5}};
  for (int64_t step = 1; step <= 20; step += 6) {
    build(&c, 5, step, &buf);
    decode_ok(&buf, &c, 5, &s);
    expect_zones(&s, zn, 4, 1);
    mw_seed_free(&s);
    mw_buf_free(&buf);
  }
  col1_free(&c);
  /* 64 rows, zones of 32: whole bytes only; the second all true */
  col1_init(&c, MW_T_BOOL, 0);
  for (int i = 0; i < 64; i++) add_bool(&c, i >= 32 || i == 9);
  zexp_t zb[] = {{&f, &t, 0, 0, 0, 32}, {&t, &t, 0, 0, 0, 32}};
  build(&c, 32, 64, &buf);
  decode_ok(&buf, &c, 32, &s);
  expect_zones(&s, zb, 2, 1);
  mw_seed_free(&s);
  mw_buf_free(&buf);
  col1_free(&c);

  /* fixed_size_list<float32, 2>: no bounds; null_count counts null vectors,
   * not null items, and NaN items are not counted (outer column) */
  col1_init(&c, MW_T_FSL, 2);
  float v[2] = {NAN, 1.0f};
  add_fixed(&c, v, 8), add_null(&c), add_fixed(&c, v, 8);
  zexp_t zf[] = {{NULL, NULL, 1, 0, 0, 2}, {NULL, NULL, 0, 0, 0, 1}};
  build(&c, 2, 1, &buf);
  decode_ok(&buf, &c, 2, &s);
  expect_zones(&s, zf, 2, 8);
  assert_int_equal(s.value_field->type, MW_T_FSL);
  assert_int_equal(s.value_field->fsl_dim, 2);
  mw_seed_free(&s);
  mw_buf_free(&buf);
  col1_free(&c);
}

/* The seed's schema and metadata, and the documented example of zone_seed.c. */
/* decimal128 and fixed_size_binary, by hand. A decimal is the signed
 * 128-bit integer of its 16 little-endian bytes (the low half first), so
 * Arrow Rust's order is the high half signed, then the low half unsigned:
 * neither a byte-wise nor a low-half-first comparison gets these zones
 * right. */
static void dec128(uint8_t out[16], uint64_t hi, uint64_t lo) {
  for (int k = 0; k < 8; k++) {
    out[k] = (uint8_t)(lo >> (8 * k));
    out[8 + k] = (uint8_t)(hi >> (8 * k));
  }
}

static void col1_init_param(col1_t *c, mw_type_t t, int32_t precision, int32_t scale, int32_t byte_width) {
  mw_schema_init(&c->s);
  assert_int_equal(mw_schema_add(&c->s, "v", t, true), 0);
  mw_field_t *f = &c->s.fields[0];
  f->precision = precision;
  f->scale = scale;
  f->byte_width = byte_width;
  char why[128];
  if (mw_field_check(f, why, sizeof why) < 0) fail_msg("%s: %s", mw_type_name(t), why);
  assert_int_equal(mw_batch_init(&c->b, &c->s), 0);
}

static void test_golden_decimal_and_fixed_binary(void **state) {
  (void)state;
  col1_t c;
  col1_init_param(&c, MW_T_DECIMAL128, 38, 2, 0);
  enum { N = 13 };
  uint8_t v[N][16];
  dec128(v[0], 1, 0);                                      /* 2^64 */
  dec128(v[1], 0, UINT64_MAX);                             /* 2^64 - 1 */
  dec128(v[2], UINT64_MAX, UINT64_MAX);                    /* -1 */
  dec128(v[3], UINT64_MAX, 0);                             /* -2^64 */
  dec128(v[4], 0, 0);                                      /* 0 */
  dec128(v[5], 0x4b3b4ca85a86c47aull, 0x098a223fffffffffull); /* 10^38 - 1 */
  dec128(v[6], 0xb4c4b357a5793b85ull, 0xf675ddc000000001ull); /* -(10^38 - 1) */
  dec128(v[7], 0, 5);                                      /* 5 */
  /* rpz 3: [2^64, 2^64-1, null] [-1, -2^64, 0] [10^38-1, -(10^38-1), null]
   *        [null, null, null] [5] */
  add_fixed(&c, v[0], 16), add_fixed(&c, v[1], 16), add_null(&c);
  add_fixed(&c, v[2], 16), add_fixed(&c, v[3], 16), add_fixed(&c, v[4], 16);
  add_fixed(&c, v[5], 16), add_fixed(&c, v[6], 16), add_null(&c);
  add_null(&c), add_null(&c), add_null(&c);
  add_fixed(&c, v[7], 16);
  zexp_t z[] = {{v[1], v[0], 1, 0, 0, 3}, {v[3], v[4], 0, 0, 0, 3}, {v[6], v[5], 1, 0, 0, 3},
                {NULL, NULL, 3, 0, 0, 3}, {v[7], v[7], 0, 0, 0, 1}};
  for (int64_t step = 1; step <= 13; step += 4) {
    mw_buf_t buf = MW_BUF_INIT;
    mw_seed_t s;
    build(&c, 3, step, &buf);
    decode_ok(&buf, &c, 3, &s);
    expect_zones(&s, z, 5, 16);
    assert_int_equal(s.value_field->type, MW_T_DECIMAL128);
    assert_int_equal(s.value_field->precision, 38);
    assert_int_equal(s.value_field->scale, 2);
    mw_seed_free(&s);
    mw_buf_free(&buf);
  }
  col1_free(&c);

  /* fixed_size_binary<3>, rpz 2: bytes compare unsigned (0x80 > 0x7f)
   * [80 00 00, 7f ff ff] [00 00 01, 00 00 00] [null, null] [ff ff ff, null] [10 20 30] */
  col1_init_param(&c, MW_T_FIXED_BINARY, 0, 0, 3);
  static const uint8_t b[][3] = {{0x80, 0, 0}, {0x7f, 0xff, 0xff}, {0, 0, 1}, {0, 0, 0}, {0xff, 0xff, 0xff},
                                 {0x10, 0x20, 0x30}};
  add_fixed(&c, b[0], 3), add_fixed(&c, b[1], 3), add_fixed(&c, b[2], 3), add_fixed(&c, b[3], 3);
  add_null(&c), add_null(&c), add_fixed(&c, b[4], 3), add_null(&c), add_fixed(&c, b[5], 3);
  zexp_t zb[] = {{b[1], b[0], 0, 0, 0, 2}, {b[3], b[2], 0, 0, 0, 2}, {NULL, NULL, 2, 0, 0, 2},
                 {b[4], b[4], 1, 0, 0, 2}, {b[5], b[5], 0, 0, 0, 1}};
  for (int64_t step = 1; step <= 9; step += 3) {
    mw_buf_t buf = MW_BUF_INIT;
    mw_seed_t s;
    build(&c, 2, step, &buf);
    decode_ok(&buf, &c, 2, &s);
    expect_zones(&s, zb, 5, 3);
    assert_int_equal(s.value_field->type, MW_T_FIXED_BINARY);
    assert_int_equal(s.value_field->byte_width, 3);
    mw_seed_free(&s);
    mw_buf_free(&buf);
  }
  /* a value outside [min, max] is caught against the data */
  mw_buf_t buf = MW_BUF_INIT;
  mw_seed_t s;
  build(&c, 2, 9, &buf);
  mw_err_t err = {0};
  assert_int_equal(mw_seed_decode(buf.data, buf.len, fld(&c), 2, 9, &s, &err), 0);
  col(&c)->values.data[0] = 0x81; /* row 0 above zone 0's max 80 00 00 */
  assert_int_equal(mw_seed_check_column(&s, fld(&c), col(&c), &err), -EBADMSG);
  assert_non_null(strstr(err.msg, "outside [min, max]"));
  mw_seed_free(&s);
  mw_buf_free(&buf);
  col1_free(&c);
}

static void test_layout(void **state) {
  (void)state;
  col1_t c;
  col1_init(&c, MW_T_FLOAT64, 0);
  for (int i = 0; i < 10000; i++) {
    if (i == 3) add_null(&c);
    else if (i == 5) add_bits64(&c, NEG_NAN64);
    else add_f64(&c, i + 0.5);
  }
  mw_buf_t buf = MW_BUF_INIT;
  build(&c, MW_SEED_DEFAULT_ROWS_PER_ZONE, 4096, &buf);
  assert_memory_equal(buf.data, "ARROW1\0\0", 8);
  assert_memory_equal(buf.data + buf.len - 6, "ARROW1", 6);
  mw_ipc_stream_t st;
  assert_int_equal(mw_ipc_file_decode(buf.data, buf.len, NULL, &st, NULL), 0);
  const char *names[] = {"min", "max", "null_count", "nan_count", "negative_nan_count", "zone_length"};
  mw_type_t types[] = {MW_T_FLOAT64, MW_T_FLOAT64, MW_T_UINT32, MW_T_UINT32, MW_T_UINT32, MW_T_UINT64};
  assert_int_equal(st.schema.n_fields, 6);
  for (int i = 0; i < 6; i++) {
    assert_string_equal(st.schema.fields[i].name, names[i]);
    assert_int_equal(st.schema.fields[i].type, types[i]);
    assert_int_equal(st.schema.fields[i].nullable, i < 2);
  }
  const mw_kv_t *ver = mw_kvs_get(&st.schema.meta, "version");
  assert_non_null(ver);
  assert_int_equal(ver->value_len, 1);
  assert_int_equal(ver->value[0], '1');
  const mw_kv_t *bm = mw_kvs_get(&st.schema.meta, "seed_null_bitmap");
  assert_non_null(bm);
  assert_string_equal((const char *)bm->value, "3a3000000100000000000000100000000300");
  assert_int_equal(st.n_batches, 1);
  const mw_batch_t *b = &st.batches[0];
  assert_int_equal(b->n_rows, 2);
  double mn0, mx0, mn1, mx1;
  memcpy(&mn0, b->cols[0].values.data, 8), memcpy(&mn1, b->cols[0].values.data + 8, 8);
  memcpy(&mx0, b->cols[1].values.data, 8), memcpy(&mx1, b->cols[1].values.data + 8, 8);
  assert_true(mn0 == 0.5 && mx0 == 8191.5 && mn1 == 8192.5 && mx1 == 9999.5);
  uint32_t *nc = (uint32_t *)(void *)b->cols[2].values.data;
  uint64_t *zl = (uint64_t *)(void *)b->cols[5].values.data;
  assert_true(nc[0] == 1 && nc[1] == 0 && zl[0] == 8192 && zl[1] == 1808);
  mw_ipc_stream_free(&st);
  mw_buf_free(&buf);
  col1_free(&c);
}

/* ------------------------------------------- second implementation (random) */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* Reference order, on C types: doubles by <, with -0.0 before +0.0. */
static int ref_cmp_double(double a, double b) {
  if (a < b) return -1;
  if (a > b) return 1;
  if (a == 0 && b == 0) return (signbit(b) != 0) - (signbit(a) != 0);
  return 0;
}

typedef struct refv {
  double d;
  int64_t i;
  uint64_t u;
  const uint8_t *p;
  size_t n;
} refv_t;

static mw_type_t ref_type;
static int ref_cmp(const void *x, const void *y) {
  const refv_t *a = x, *b = y;
  switch (ref_type) {
    case MW_T_FLOAT64: case MW_T_FLOAT32: return ref_cmp_double(a->d, b->d);
    case MW_T_INT32: case MW_T_INT64: case MW_T_BOOL: return (a->i > b->i) - (a->i < b->i);
    case MW_T_UINT32: case MW_T_UINT64: return (a->u > b->u) - (a->u < b->u);
    default: {
      for (size_t k = 0; k < a->n && k < b->n; k++)
        if (a->p[k] != b->p[k]) return a->p[k] < b->p[k] ? -1 : 1;
      return (a->n > b->n) - (a->n < b->n);
    }
  }
}

static refv_t ref_value(const mw_column_t *c, mw_type_t t, int64_t i, bool *nan, bool *neg) {
  refv_t v = {0};
  *nan = *neg = false;
  switch (t) {
    case MW_T_FLOAT64: memcpy(&v.d, c->values.data + 8 * i, 8); break;
    case MW_T_FLOAT32: {
      float f;
      memcpy(&f, c->values.data + 4 * i, 4);
      v.d = f;
      break;
    }
    case MW_T_INT32: {
      int32_t x;
      memcpy(&x, c->values.data + 4 * i, 4);
      v.i = x;
      break;
    }
    case MW_T_INT64: memcpy(&v.i, c->values.data + 8 * i, 8); break;
    case MW_T_UINT32: {
      uint32_t x;
      memcpy(&x, c->values.data + 4 * i, 4);
      v.u = x;
      break;
    }
    case MW_T_UINT64: memcpy(&v.u, c->values.data + 8 * i, 8); break;
    case MW_T_BOOL: v.i = mw_bit_get(c->values.data, i); break;
    default: v.p = mw_column_bytes(c, i, &v.n); break;
  }
  if ((t == MW_T_FLOAT64 || t == MW_T_FLOAT32) && isnan(v.d)) {
    *nan = true;
    *neg = signbit(v.d) != 0;
  }
  return v;
}

/* Compare one decoded zone with the reference computation. */
static void ref_zone(const mw_seed_t *s, const mw_column_t *c, mw_type_t t, size_t z, refv_t *scratch) {
  int64_t lo = (int64_t)(z * s->rows_per_zone), hi = lo + (int64_t)s->zone_length[z];
  uint32_t nulls = 0, nans = 0, neg = 0;
  size_t k = 0;
  for (int64_t i = lo; i < hi; i++) {
    if (!mw_column_valid(c, i)) {
      nulls++;
      continue;
    }
    bool isn, isneg;
    refv_t v = ref_value(c, t, i, &isn, &isneg);
    if (isn) {
      nans++, neg += isneg;
      continue;
    }
    scratch[k++] = v;
  }
  assert_int_equal(s->null_count[z], nulls);
  assert_int_equal(s->nan_count[z], nans);
  assert_int_equal(s->negative_nan_count[z], neg);
  if (k == 0) {
    assert_false(mw_column_valid(s->min, (int64_t)z));
    assert_false(mw_column_valid(s->max, (int64_t)z));
    return;
  }
  ref_type = t;
  qsort(scratch, k, sizeof *scratch, ref_cmp);
  bool d1, d2;
  refv_t mn = ref_value(s->min, t, (int64_t)z, &d1, &d2), mx = ref_value(s->max, t, (int64_t)z, &d1, &d2);
  assert_int_equal(ref_cmp(&mn, &scratch[0]), 0);
  assert_int_equal(ref_cmp(&mx, &scratch[k - 1]), 0);
  if (t == MW_T_FLOAT64 || t == MW_T_FLOAT32) { /* the sign of a zero bound matters */
    assert_int_equal(signbit(mn.d) != 0, signbit(scratch[0].d) != 0);
    assert_int_equal(signbit(mx.d) != 0, signbit(scratch[k - 1].d) != 0);
  }
}

static void random_value(col1_t *c, mw_type_t t) {
  uint64_t r = rnd();
  if (r % 7 == 0) {
    add_null(c);
    return;
  }
  static const double specials[] = {0.0, -0.0, INFINITY, -INFINITY, 1.0, -1.0};
  switch (t) {
    case MW_T_FLOAT64: {
      uint64_t sel = (r >> 8) % 10;
      if (sel == 0) add_bits64(c, POS_NAN64 | (r >> 40));
      else if (sel == 1) add_bits64(c, NEG_NAN64 | (r >> 40));
      else if (sel < 4) add_f64(c, specials[(r >> 16) % 6]);
      else add_f64(c, (double)(int64_t)(r >> 20) / 1024.0 - 4e9);
      break;
    }
    case MW_T_FLOAT32: {
      uint64_t sel = (r >> 8) % 10;
      if (sel == 0) add_bits32(c, POS_NAN32 | (uint32_t)((r >> 40) & 0xff));
      else if (sel == 1) add_bits32(c, NEG_NAN32);
      else if (sel < 4) add_f32(c, (float)specials[(r >> 16) % 6]);
      else add_f32(c, (float)((int32_t)(r >> 33)) / 8.0f);
      break;
    }
    case MW_T_INT32: {
      int32_t v = (int32_t)(uint32_t)(r >> 17);
      add_fixed(c, &v, 4);
      break;
    }
    case MW_T_INT64: {
      int64_t v = (int64_t)(r * 0x2545F4914F6CDD1Dull);
      add_fixed(c, &v, 8);
      break;
    }
    case MW_T_UINT32: {
      uint32_t v = (uint32_t)(r >> 13);
      add_fixed(c, &v, 4);
      break;
    }
    case MW_T_UINT64: {
      uint64_t v = r * 0x9E3779B97F4A7C15ull;
      add_fixed(c, &v, 8);
      break;
    }
    case MW_T_BOOL: add_bool(c, (r >> 9) & 1); break;
    default: {
      char s[12];
      size_t n = (r >> 8) % 6;
      for (size_t k = 0; k < n; k++) s[k] = (char)('a' + (r >> (12 + 3 * k)) % 4);
      s[n] = 0;
      add_str(c, s);
      break;
    }
  }
}

static void test_second_implementation(void **state) {
  (void)state;
  mw_type_t types[] = {MW_T_FLOAT64, MW_T_FLOAT32, MW_T_INT32, MW_T_INT64, MW_T_UINT32,
                       MW_T_UINT64, MW_T_BOOL, MW_T_UTF8, MW_T_BINARY};
  for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
    for (int round = 0; round < 6; round++) {
      col1_t c;
      col1_init(&c, types[ti], 0);
      int64_t rows = 1 + (int64_t)(rnd() % 3000);
      for (int64_t i = 0; i < rows; i++) random_value(&c, types[ti]);
      uint64_t rpz = round == 0 ? MW_SEED_DEFAULT_ROWS_PER_ZONE : 1 + rnd() % 300;
      int64_t step = 1 + (int64_t)(rnd() % 700);
      mw_buf_t buf = MW_BUF_INIT;
      mw_seed_t s;
      build(&c, rpz, step, &buf);
      decode_ok(&buf, &c, rpz, &s);
      assert_int_equal(s.n_zones, (rows + (int64_t)rpz - 1) / (int64_t)rpz);
      refv_t *scratch = calloc((size_t)rows, sizeof *scratch);
      assert_non_null(scratch);
      for (size_t z = 0; z < s.n_zones; z++) ref_zone(&s, col(&c), types[ti], z, scratch);
      free(scratch);
      mw_seed_free(&s);
      mw_buf_free(&buf);
      col1_free(&c);
    }
  }
}

/* The types of the type table beyond the first nine: small and unsigned
 * integers, float16 (NaN of both signs, ±0 and ±inf come up in random
 * bits), the temporal types (signed integers of their width), large_utf8 /
 * large_binary (bytes), decimal128 (a signed high and an unsigned low 64-bit
 * half, compared in that order) and fixed_size_binary (memcmp over the
 * width). The reference decodes each value by itself (sign extension,
 * half-float arithmetic, two halves, memcmp). */
typedef struct gref {
  int kind;          /* 0 signed, 1 unsigned, 2 half float, 3 bytes, 5 decimal128, 6 fixed bytes */
  const uint8_t *p;
  size_t n;
  double d;
  int64_t i;
  uint64_t u;
} gref_t;

static int gref_kind;
static int gref_cmp(const void *x, const void *y) {
  const gref_t *a = x, *b = y;
  switch (gref_kind) {
    case 0: return (a->i > b->i) - (a->i < b->i);
    case 1: return (a->u > b->u) - (a->u < b->u);
    case 2: return ref_cmp_double(a->d, b->d);
    case 5:
      if (a->i != b->i) return (a->i > b->i) - (a->i < b->i);
      return (a->u > b->u) - (a->u < b->u);
    default: {
      size_t m = a->n < b->n ? a->n : b->n;
      int c = m ? memcmp(a->p, b->p, m) : 0;
      return c ? c : (a->n > b->n) - (a->n < b->n);
    }
  }
}

static double half_to_double(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
  return (h & 0x8000) ? -v : v;
}

static gref_t gref_at(const mw_field_t *f, const mw_column_t *c, int64_t i, int kind) {
  gref_t v = {.kind = kind};
  if (kind == 3) {
    v.p = mw_column_bytes(c, i, &v.n);
    return v;
  }
  size_t w = mw_type_width(f);
  v.p = c->values.data + (size_t)i * w;
  v.n = w;
  if (kind == 5) { /* low half, then high half, each little-endian */
    for (int k = 7; k >= 0; k--) {
      v.u = v.u << 8 | v.p[k];
      v.i = (int64_t)((uint64_t)v.i << 8 | v.p[8 + k]);
    }
    return v;
  }
  if (kind == 6) return v;
  uint64_t raw = 0;
  memcpy(&raw, v.p, w < 8 ? w : 8);
  unsigned sh = 64 - 8 * (unsigned)(w < 8 ? w : 8);
  v.i = (int64_t)(raw << sh) >> sh;
  v.u = raw;
  if (kind == 2) v.d = half_to_double((uint16_t)raw);
  return v;
}

static void test_second_implementation_more_types(void **state) {
  (void)state;
  struct { mw_type_t t; int kind; } cases[] = {
      {MW_T_INT8, 0},      {MW_T_INT16, 0},      {MW_T_UINT8, 1},       {MW_T_UINT16, 1},
      {MW_T_FLOAT16, 2},   {MW_T_DATE32, 0},     {MW_T_DATE64, 0},      {MW_T_TIMESTAMP, 0},
      {MW_T_TIME32, 0},    {MW_T_TIME64, 0},     {MW_T_LARGE_UTF8, 3},  {MW_T_LARGE_BINARY, 3},
      {MW_T_DECIMAL128, 5}, {MW_T_FIXED_BINARY, 6}};
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    col1_t c;
    mw_schema_init(&c.s);
    assert_int_equal(mw_schema_add(&c.s, "v", cases[ci].t, true), 0);
    mw_field_t *f = &c.s.fields[0];
    if (f->type == MW_T_TIME64) f->unit = MW_UNIT_US;
    if (f->type == MW_T_TIMESTAMP) f->unit = MW_UNIT_MS;
    if (f->type == MW_T_DECIMAL128) f->precision = 20, f->scale = 2;
    if (f->type == MW_T_FIXED_BINARY) f->byte_width = 3;
    char why[128];
    if (mw_field_check(f, why, sizeof why) < 0) fail_msg("%s: %s", mw_type_name(f->type), why);
    assert_int_equal(mw_batch_init(&c.b, &c.s), 0);
    int kind = cases[ci].kind;
    int64_t rows = 200 + (int64_t)(rnd() % 2000);
    for (int64_t r = 0; r < rows; r++) {
      uint64_t x = rnd();
      if (x % 9 == 0) {
        add_null(&c);
      } else if (kind == 3) {
        char t[8];
        size_t n = (x >> 8) % 5;
        for (size_t k = 0; k < n; k++) t[k] = (char)('a' + (x >> (16 + 2 * k)) % 3);
        assert_int_equal(mw_column_append_bytes(col(&c), t, n), 0);
        c.b.n_rows++;
      } else {
        uint8_t b[16];
        for (int k = 0; k < 16; k++) b[k] = (uint8_t)(rnd() >> 20);
        if (kind == 5 && x % 3) /* ties in the high half: the low half decides, unsigned */
          memset(b + 8, x % 3 == 1 ? 0x00 : 0xff, 8);
        add_fixed(&c, b, mw_type_width(f));
      }
    }
    uint64_t rpz = 1 + rnd() % 150;
    mw_buf_t buf = MW_BUF_INIT;
    mw_seed_t sd;
    build(&c, rpz, 1 + (int64_t)(rnd() % 400), &buf);
    decode_ok(&buf, &c, rpz, &sd);
    assert_true(mw_field_type_equal(sd.value_field, f));
    gref_t *scratch = calloc((size_t)rows, sizeof *scratch);
    for (size_t z = 0; z < sd.n_zones; z++) {
      int64_t lo = (int64_t)(z * rpz), hi = lo + (int64_t)sd.zone_length[z];
      uint32_t nulls = 0, nans = 0, neg = 0;
      size_t k = 0;
      for (int64_t r = lo; r < hi; r++) {
        if (!mw_column_valid(col(&c), r)) {
          nulls++;
          continue;
        }
        gref_t v = gref_at(f, col(&c), r, kind);
        if (kind == 2 && isnan(v.d)) {
          nans++, neg += (v.u >> 15) & 1;
          continue;
        }
        scratch[k++] = v;
      }
      assert_int_equal(sd.null_count[z], nulls);
      assert_int_equal(sd.nan_count[z], nans);
      assert_int_equal(sd.negative_nan_count[z], neg);
      if (k == 0) {
        assert_false(mw_column_valid(sd.min, (int64_t)z));
        assert_false(mw_column_valid(sd.max, (int64_t)z));
        continue;
      }
      gref_kind = kind;
      qsort(scratch, k, sizeof *scratch, gref_cmp);
      gref_t mn = gref_at(f, sd.min, (int64_t)z, kind), mx = gref_at(f, sd.max, (int64_t)z, kind);
      if (mn.n != scratch[0].n || memcmp(mn.p, scratch[0].p, mn.n) != 0 || mx.n != scratch[k - 1].n ||
          memcmp(mx.p, scratch[k - 1].p, mx.n) != 0)
        fail_msg("%s zone %zu: bounds differ from the reference", mw_type_name(f->type), z);
    }
    free(scratch);
    mw_seed_free(&sd);
    mw_buf_free(&buf);
    col1_free(&c);
  }
}

/* The check against data notices a changed value, a new null and a new NaN. */
static void test_check_column_detects(void **state) {
  (void)state;
  col1_t c;
  col1_init(&c, MW_T_FLOAT64, 0);
  for (int i = 0; i < 20; i++) add_f64(&c, i);
  mw_buf_t buf = MW_BUF_INIT;
  mw_seed_t s;
  build(&c, 8, 20, &buf);
  decode_ok(&buf, &c, 8, &s);
  mw_err_t err = {0};
  double big = 100;
  memcpy(col(&c)->values.data + 8 * 3, &big, 8); /* outside zone 0's [0, 7] */
  assert_int_equal(mw_seed_check_column(&s, fld(&c), col(&c), &err), -EBADMSG);
  assert_non_null(strstr(err.msg, "row 3 lies outside"));
  double mid = 5;
  memcpy(col(&c)->values.data + 8 * 3, &mid, 8); /* inside the bounds: still fine */
  assert_int_equal(mw_seed_check_column(&s, fld(&c), col(&c), NULL), 0);
  uint64_t nan = POS_NAN64;
  memcpy(col(&c)->values.data + 8 * 12, &nan, 8);
  mw_err_clear(&err);
  assert_int_equal(mw_seed_check_column(&s, fld(&c), col(&c), &err), -EBADMSG);
  assert_non_null(strstr(err.msg, "zone 1: counts"));
  mw_seed_free(&s);
  mw_buf_free(&buf);
  col1_free(&c);
}

/* --------------------------------------------------- decoder validation */

/* Build a seed file by hand from zone rows (int64 bounds, or float64). */
typedef struct hand {
  int version;          /* 0, 1, or 2 (unknown) */
  mw_type_t vt;
  bool drop_field;      /* omit negative_nan_count from a v1 seed */
  const char *bitmap;   /* seed_null_bitmap or NULL */
  size_t n;
  struct {
    bool has_min, has_max;
    double min, max;
    uint32_t nulls, nans, neg;
    uint64_t len;
  } z[4];
} hand_t;

static void hand_encode(const hand_t *h, mw_buf_t *out) {
  mw_schema_t s;
  mw_schema_init(&s);
  mw_schema_add(&s, "min", h->vt, true);
  mw_schema_add(&s, "max", h->vt, true);
  mw_schema_add(&s, "null_count", MW_T_UINT32, false);
  mw_schema_add(&s, "nan_count", MW_T_UINT32, false);
  bool neg = h->version != 0 && !h->drop_field;
  if (neg) mw_schema_add(&s, "negative_nan_count", MW_T_UINT32, false);
  mw_schema_add(&s, "zone_length", MW_T_UINT64, false);
  if (h->version == 1) mw_kvs_set(&s.meta, "version", "1", 1);
  if (h->version == 2) mw_kvs_set(&s.meta, "version", "2", 1);
  if (h->bitmap) mw_kvs_set(&s.meta, "seed_null_bitmap", h->bitmap, strlen(h->bitmap));
  mw_batch_t b;
  assert_int_equal(mw_batch_init(&b, &s), 0);
  for (size_t i = 0; i < h->n; i++) {
    for (int k = 0; k < 2; k++) {
      bool has = k ? h->z[i].has_max : h->z[i].has_min;
      double d = k ? h->z[i].max : h->z[i].min;
      int64_t iv = (int64_t)d;
      if (!has) assert_int_equal(mw_column_append_null(&b.cols[k], &s.fields[k]), 0);
      else if (h->vt == MW_T_FLOAT64) assert_int_equal(mw_column_append_fixed(&b.cols[k], &d, 8), 0);
      else assert_int_equal(mw_column_append_fixed(&b.cols[k], &iv, 8), 0);
    }
    size_t at = 2;
    mw_column_append_fixed(&b.cols[at++], &h->z[i].nulls, 4);
    mw_column_append_fixed(&b.cols[at++], &h->z[i].nans, 4);
    if (neg) mw_column_append_fixed(&b.cols[at++], &h->z[i].neg, 4);
    mw_column_append_fixed(&b.cols[at], &h->z[i].len, 8);
    b.n_rows++;
  }
  mw_ipc_writer_t w;
  mw_ipc_writer_init(&w);
  const mw_batch_t *bp = &b;
  assert_int_equal(mw_ipc_file_encode(&w, &s, &bp, 1, out, NULL), 0);
  mw_ipc_writer_free(&w);
  mw_batch_free(&b);
  mw_schema_free(&s);
}

static int hand_decode(const hand_t *h, uint64_t rpz, uint64_t rows, mw_err_t *err) {
  mw_buf_t buf = MW_BUF_INIT;
  hand_encode(h, &buf);
  mw_seed_t s;
  mw_field_t f = {.name = (char *)"v", .type = h->vt, .nullable = true};
  int rc = mw_seed_decode(buf.data, buf.len, &f, rpz, rows, &s, err);
  mw_seed_free(&s);
  mw_buf_free(&buf);
  return rc;
}

static void expect_refused(const hand_t *h, uint64_t rpz, uint64_t rows, int code, const char *why) {
  mw_err_t err = {0};
  int rc = hand_decode(h, rpz, rows, &err);
  if (rc != code || strstr(err.msg, why) == NULL)
    fail_msg("expected %d \"%s\", got %d \"%s\"", code, why, rc, err.msg);
}

static void test_decode_rules(void **state) {
  (void)state;
  hand_t ok = {.version = 1, .vt = MW_T_INT64, .n = 2,
               .z = {{true, true, 1, 5, 1, 0, 0, 4}, {true, true, 2, 2, 0, 0, 0, 3}}};
  assert_int_equal(hand_decode(&ok, 4, 7, NULL), 0);
  assert_int_equal(hand_decode(&ok, 4, UINT64_MAX, NULL), 0);
  hand_t h = ok;
  expect_refused(&h, 4, 8, -EBADMSG, "cover 7 rows, the file holds 8");
  expect_refused(&h, 3, 7, -EBADMSG, "zone_length 4 with rows_per_zone 3");
  h.z[0].len = 3; /* a short zone that is not the last */
  expect_refused(&h, 4, 6, -EBADMSG, "zone 0: zone_length 3");
  h = ok, h.z[1].nulls = 3, h.z[1].nans = 1, h.vt = MW_T_FLOAT64;
  expect_refused(&h, 4, 7, -EBADMSG, "exceed zone_length");
  h = ok, h.vt = MW_T_FLOAT64, h.z[1].nans = 1, h.z[1].neg = 2;
  expect_refused(&h, 4, 7, -EBADMSG, "negative_nan_count 2 exceeds nan_count 1");
  h = ok, h.z[0].nans = 1; /* int64 */
  expect_refused(&h, 4, 7, -EBADMSG, "NaN counts on a non-float column");
  /* counts near UINT32_MAX: their sum must not wrap */
  h = ok, h.vt = MW_T_FLOAT64, h.z[0].nulls = UINT32_MAX, h.z[0].nans = 2;
  expect_refused(&h, 4, 7, -EBADMSG, "exceed zone_length");
  h = ok, h.z[0].min = 9;
  expect_refused(&h, 4, 7, -EBADMSG, "zone 0: min > max");
  h = ok, h.vt = MW_T_FLOAT64, h.z[1].max = NAN;
  expect_refused(&h, 4, 7, -EBADMSG, "NaN max (version 1 bounds exclude NaN)");
  h = ok, h.version = 2;
  expect_refused(&h, 4, 7, -ENOTSUP, "seed version \"2\"");
  h = ok, h.drop_field = true;
  expect_refused(&h, 4, 7, -EBADMSG, "holds 5 fields, the version 1 schema has 6");
  h = ok, h.bitmap = "3a3000000100000000000000100000000"; /* 33 digits */
  expect_refused(&h, 4, 7, -EBADMSG, "odd hex length");
  h = ok, h.bitmap = "zz";
  expect_refused(&h, 4, 7, -EBADMSG, "not hex at character 0");
  h = ok, h.bitmap = "3a300000010000000000000010000000" "0500"; /* {5}: zone 1, but zone 0 has the null */
  expect_refused(&h, 4, 7, -EBADMSG, "zone 0: null_count 1 but seed_null_bitmap holds 0");
  h = ok, h.bitmap = "3a300000010000000000000010000000" "0900"; /* {9}: beyond 7 rows */
  expect_refused(&h, 4, 7, -EBADMSG, "seed_null_bitmap");
  h = ok, h.bitmap = "3a300000010000000000000010000000" "0200";
  assert_int_equal(hand_decode(&h, 4, 7, NULL), 0);
  h = ok, h.bitmap = "";
  expect_refused(&h, 4, 7, -EBADMSG, "zone 0: null_count 1 but seed_null_bitmap holds 0");
  /* null bounds are always allowed (unknown) */
  h = ok, h.z[0].has_min = false, h.z[1].has_max = false;
  assert_int_equal(hand_decode(&h, 4, 7, NULL), 0);
  /* the column's type must be the bounds' type */
  mw_buf_t buf = MW_BUF_INIT;
  hand_encode(&ok, &buf);
  mw_seed_t s;
  mw_field_t f = {.name = (char *)"v", .type = MW_T_INT32, .nullable = true};
  mw_err_t err = {0};
  assert_int_equal(mw_seed_decode(buf.data, buf.len, &f, 4, 7, &s, &err), -EBADMSG);
  assert_non_null(strstr(err.msg, "bounds are int64 but column v is int32"));
  mw_seed_free(&s);
  mw_buf_free(&buf);
}

/* Version 0 seeds (no version metadata, no negative_nan_count): a +NaN max
 * marker is allowed and proves nothing. */
static void test_version0(void **state) {
  (void)state;
  hand_t h = {.version = 0, .vt = MW_T_FLOAT64, .n = 1, .z = {{true, true, -1, NAN, 0, 2, 0, 5}}};
  mw_buf_t buf = MW_BUF_INIT;
  hand_encode(&h, &buf);
  mw_seed_t s;
  mw_field_t f = {.name = (char *)"v", .type = MW_T_FLOAT64, .nullable = true};
  mw_err_t err = {0};
  int rc = mw_seed_decode(buf.data, buf.len, &f, 8192, 5, &s, &err);
  if (rc < 0) fail_msg("%s", err.msg);
  assert_int_equal(s.version, 0);
  assert_null(s.negative_nan_count);
  assert_false(s.has_null_bitmap);
  /* data: -1, 3, NaN, -NaN, 2: the NaN max is no upper bound, counts match */
  col1_t c;
  col1_init(&c, MW_T_FLOAT64, 0);
  add_f64(&c, -1), add_f64(&c, 3), add_bits64(&c, POS_NAN64), add_bits64(&c, NEG_NAN64), add_f64(&c, 2);
  assert_int_equal(mw_seed_check_column(&s, fld(&c), col(&c), NULL), 0);
  mw_seed_free(&s);
  mw_buf_free(&buf);
  col1_free(&c);
  /* a v1 layout without the version key is read as v0 and refused */
  hand_t v1 = {.version = 1, .vt = MW_T_INT64, .n = 1, .z = {{true, true, 1, 1, 0, 0, 0, 1}}};
  v1.version = 3; /* fields of v1, no version key */
  mw_buf_t b2 = MW_BUF_INIT;
  hand_encode(&v1, &b2);
  assert_int_equal(mw_seed_decode(b2.data, b2.len, NULL, 1, 1, &s, &err), -EBADMSG);
  mw_seed_free(&s);
  mw_buf_free(&b2);
}

static void test_locator(void **state) {
  (void)state;
  mw_seed_locator_t l;
  assert_int_equal(mw_seed_locator_parse((const uint8_t *)"1:8192", 6, &l, NULL), 0);
  assert_int_equal(l.buffer_index, 1);
  assert_int_equal(l.rows_per_zone, 8192);
  assert_false(l.has_field_id);
  assert_int_equal(mw_seed_locator_parse((const uint8_t *)"12:4:7", 6, &l, NULL), 0);
  assert_true(l.has_field_id);
  assert_int_equal(l.field_id, 7);
  const char *bad[] = {"", ":", "1:", ":5", "0:5", "1:0", "01:5", "1:05", "x:5", "1:5:", "1:5:x",
                       "4294967296:5", "1:1073741825", "1:2:3:4", "-1:5"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    mw_err_t err = {0};
    if (mw_seed_locator_parse((const uint8_t *)bad[i], strlen(bad[i]), &l, &err) != -EBADMSG)
      fail_msg("locator \"%s\" accepted", bad[i]);
  }
  char out[MW_SEED_LOCATOR_BYTES];
  assert_int_equal(mw_seed_locator_format(3, 8192, out, sizeof out), 6);
  assert_string_equal(out, "3:8192");
  assert_int_equal(mw_seed_locator_format(3, 8192, out, 6), -ENOSPC);
}

/* ------------------------------------------------------- IPC file format */

static void test_ipc_file(void **state) {
  (void)state;
  col1_t c;
  col1_init(&c, MW_T_UTF8, 0);
  add_str(&c, "hello"), add_null(&c), add_str(&c, "");
  mw_kvs_set(&c.s.meta, "k", "v", 1);
  mw_ipc_writer_t w;
  mw_ipc_writer_init(&w);
  mw_buf_t buf = MW_BUF_INIT;
  const mw_batch_t *bp[2] = {&c.b, &c.b};
  assert_int_equal(mw_ipc_file_encode(&w, &c.s, bp, 2, &buf, NULL), 0);
  mw_ipc_stream_t st;
  mw_err_t err = {0};
  assert_int_equal(mw_ipc_file_decode(buf.data, buf.len, NULL, &st, &err), 0);
  assert_int_equal(st.n_batches, 2);
  assert_true(mw_schema_equal(&st.schema, &c.s));
  assert_int_equal(st.batches[1].cols[0].null_count, 1);
  mw_ipc_stream_free(&st);
  /* the stream section is a valid IPC stream on its own */
  size_t flen = mw_load_u32le(buf.data + buf.len - 10);
  size_t stream_len = buf.len - 10 - flen - 8;
  assert_int_equal(mw_ipc_decode(buf.data + 8, stream_len, NULL, &st, NULL), 0);
  mw_ipc_stream_free(&st);
  /* every truncation and every byte flip is refused or decodes cleanly */
  for (size_t cut = 0; cut < buf.len; cut++) {
    uint8_t *q = malloc(cut + 1);
    memcpy(q, buf.data, cut);
    assert_true(mw_ipc_file_decode(q, cut, NULL, &st, NULL) < 0);
    assert_int_equal(st.n_batches, 0);
    free(q);
  }
  size_t refused = 0;
  for (size_t i = 0; i < buf.len; i++) {
    uint8_t *q = malloc(buf.len);
    memcpy(q, buf.data, buf.len);
    q[i] ^= 0x41;
    if (mw_ipc_file_decode(q, buf.len, NULL, &st, NULL) < 0) refused++;
    mw_ipc_stream_free(&st);
    free(q);
  }
  assert_true(refused > buf.len / 4);
  /* a footer block that names the wrong message: the first batch starts
   * right after the schema message */
  uint8_t *q = malloc(buf.len);
  memcpy(q, buf.data, buf.len);
  size_t f = buf.len - 10 - flen;
  uint64_t b0 = 8 + 8 + mw_load_u32le(buf.data + 12);
  assert_int_equal(mw_load_u32le(buf.data + b0), 0xFFFFFFFFu);
  bool patched = false;
  for (size_t i = f; i + 8 <= buf.len - 10 && !patched; i++) {
    if (mw_load_u64le(q + i) == b0) {
      mw_store_u64le(q + i, b0 + 8);
      patched = true;
    }
  }
  assert_true(patched);
  mw_err_clear(&err);
  assert_int_equal(mw_ipc_file_decode(q, buf.len, NULL, &st, &err), -EBADMSG);
  assert_non_null(strstr(err.msg, "footer block 0"));
  free(q);
  mw_buf_free(&buf);
  mw_ipc_writer_free(&w);
  col1_free(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_golden_float64),   cmocka_unit_test(test_golden_float32),
      cmocka_unit_test(test_golden_float16),   cmocka_unit_test(test_golden_ints),
      cmocka_unit_test(test_golden_strings),
      cmocka_unit_test(test_golden_bool_and_fsl), cmocka_unit_test(test_golden_decimal_and_fixed_binary),
      cmocka_unit_test(test_layout),
      cmocka_unit_test(test_second_implementation), cmocka_unit_test(test_second_implementation_more_types),
      cmocka_unit_test(test_check_column_detects),
      cmocka_unit_test(test_decode_rules),     cmocka_unit_test(test_version0),
      cmocka_unit_test(test_locator),          cmocka_unit_test(test_ipc_file),
  };
  return tu_run_group(tests, NULL, NULL);
}
