/*
 * test_jsonrow.c — the NDJSON row parser (src/net/jsonrow.c): every JSON to
 * Arrow mapping rule, every error class with its message, rollback (a bad row
 * leaves the batch byte-identical), escapes and unicode, numbers at the range
 * edges, deletes, whitespace and limits.
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

#include "net/jsonrow.h"

enum { ID, I32, U32, U64, F32, F64, B, S, BIN, VEC, TOMB, NCOLS };

typedef struct fx {
  mw_schema_t s;
  mw_jsonrow_parser_t p;
  mw_batch_t b;
  mw_jsonrow_error_t e;
} fx_t;

static void schema_all(mw_schema_t *s) {
  mw_schema_init(s);
  assert_int_equal(mw_schema_add(s, "id", MW_T_INT64, false), ID);
  mw_schema_add(s, "i32", MW_T_INT32, true);
  mw_schema_add(s, "u32", MW_T_UINT32, true);
  mw_schema_add(s, "u64", MW_T_UINT64, true);
  mw_schema_add(s, "f32", MW_T_FLOAT32, true);
  mw_schema_add(s, "f64", MW_T_FLOAT64, true);
  mw_schema_add(s, "b", MW_T_BOOL, true);
  mw_schema_add(s, "s", MW_T_UTF8, true);
  mw_schema_add(s, "bin", MW_T_BINARY, true);
  mw_schema_add(s, "vec", MW_T_FSL, true);
  assert_int_equal(mw_schema_add(s, "_tombstone", MW_T_BOOL, false), TOMB);
  s->fields[VEC].fsl_dim = 3;
  s->fields[ID].pk_position = 1;
}

static fx_t *fx_new(const mw_jsonrow_opts_t *opts) {
  fx_t *f = calloc(1, sizeof *f);
  assert_non_null(f);
  schema_all(&f->s);
  assert_int_equal(mw_jsonrow_init(&f->p, &f->s, opts), 0);
  assert_int_equal(mw_batch_init(&f->b, &f->s), 0);
  return f;
}

static void fx_free(fx_t *f) {
  mw_batch_free(&f->b);
  mw_jsonrow_free(&f->p);
  mw_schema_free(&f->s);
  free(f);
}

static int parse(fx_t *f, const char *line, bool del) {
  return mw_jsonrow_parse(&f->p, line, strlen(line), del, &f->b, &f->e);
}

static void ok(fx_t *f, const char *line) {
  int rc = parse(f, line, false);
  if (rc != 0) fail_msg("%s -> %s: %s", line, mw_jsonrow_class_name(f->e.cls), f->e.msg);
  assert_int_equal(f->e.cls, MW_JSONROW_OK);
  assert_int_equal(mw_batch_validate(&f->b), 0);
}

static bool buf_eq(const mw_buf_t *a, const mw_buf_t *b) {
  return a->len == b->len && (a->len == 0 || memcmp(a->data, b->data, a->len) == 0);
}

/* Deep copy of a batch's columns, to prove a failed row changed nothing. */
typedef struct snap {
  int64_t n_rows;
  mw_column_t cols[NCOLS];
} snap_t;

static void snap_take(const fx_t *f, snap_t *sn) {
  sn->n_rows = f->b.n_rows;
  for (int i = 0; i < NCOLS; i++) {
    const mw_column_t *c = &f->b.cols[i];
    mw_column_t *d = &sn->cols[i];
    memset(d, 0, sizeof *d);
    d->length = c->length;
    d->null_count = c->null_count;
    d->item_null_count = c->item_null_count;
    mw_buf_append(&d->validity, c->validity.data, c->validity.len);
    mw_buf_append(&d->values, c->values.data, c->values.len);
    mw_buf_append(&d->offsets, c->offsets.data, c->offsets.len);
    mw_buf_append(&d->item_validity, c->item_validity.data, c->item_validity.len);
  }
}

static void snap_check_free(const fx_t *f, snap_t *sn) {
  assert_int_equal(f->b.n_rows, sn->n_rows);
  for (int i = 0; i < NCOLS; i++) {
    const mw_column_t *c = &f->b.cols[i];
    mw_column_t *d = &sn->cols[i];
    assert_int_equal(c->length, d->length);
    assert_int_equal(c->null_count, d->null_count);
    assert_int_equal(c->item_null_count, d->item_null_count);
    assert_true(buf_eq(&c->validity, &d->validity));
    assert_true(buf_eq(&c->values, &d->values));
    assert_true(buf_eq(&c->offsets, &d->offsets));
    assert_true(buf_eq(&c->item_validity, &d->item_validity));
    mw_buf_free(&d->validity);
    mw_buf_free(&d->values);
    mw_buf_free(&d->offsets);
    mw_buf_free(&d->item_validity);
  }
  assert_int_equal(mw_batch_validate(&f->b), 0);
}

/* The line must fail with class `cls`, a message containing `want`, and leave
 * the batch exactly as it was. */
static void bad_n(fx_t *f, const char *line, size_t len, bool del, mw_jsonrow_class_t cls,
                  const char *want) {
  snap_t sn;
  snap_take(f, &sn);
  int rc = mw_jsonrow_parse(&f->p, line, len, del, &f->b, &f->e);
  if (rc != -EBADMSG || f->e.cls != cls || strstr(f->e.msg, want) == NULL)
    fail_msg("%.*s: rc %d class %s msg '%s', wanted %s '%s'", (int)len, line, rc,
             mw_jsonrow_class_name(f->e.cls), f->e.msg, mw_jsonrow_class_name(cls), want);
  snap_check_free(f, &sn);
}

static void bad(fx_t *f, const char *line, mw_jsonrow_class_t cls, const char *want) {
  bad_n(f, line, strlen(line), false, cls, want);
}

static int64_t i64_at(const fx_t *f, int col, int64_t row) {
  int64_t v;
  memcpy(&v, f->b.cols[col].values.data + row * 8, 8);
  return v;
}
static uint64_t u64_at(const fx_t *f, int col, int64_t row) { return (uint64_t)i64_at(f, col, row); }
static int32_t i32_at(const fx_t *f, int col, int64_t row) {
  int32_t v;
  memcpy(&v, f->b.cols[col].values.data + row * 4, 4);
  return v;
}
static double f64_at(const fx_t *f, int64_t row) {
  double v;
  memcpy(&v, f->b.cols[F64].values.data + row * 8, 8);
  return v;
}
static float f32_at(const fx_t *f, int col, int64_t idx) {
  float v;
  memcpy(&v, f->b.cols[col].values.data + idx * 4, 4);
  return v;
}
static bool valid(const fx_t *f, int col, int64_t row) {
  return mw_column_valid(&f->b.cols[col], row);
}
static bool bool_at(const fx_t *f, int col, int64_t row) {
  return mw_bit_get(f->b.cols[col].values.data, row);
}
static void assert_bytes(const fx_t *f, int col, int64_t row, const void *want, size_t n) {
  size_t got;
  const uint8_t *p = mw_column_bytes(&f->b.cols[col], row, &got);
  assert_int_equal(got, n);
  if (n) assert_memory_equal(p, want, n);
}

/* ------------------------------------------------------------------ tests */

static void test_all_types(void **state) {
  (void)state;
  fx_t *f = fx_new(NULL);
  ok(f, "{\"id\":7,\"i32\":-5,\"u32\":4000000000,\"u64\":18446744073709551615,\"f32\":1.5,"
        "\"f64\":-2.25e2,\"b\":true,\"s\":\"h\\u00e9llo\",\"bin\":\"AAEC\",\"vec\":[1,2.5,-3e0]}");
  assert_int_equal(f->b.n_rows, 1);
  assert_int_equal(i64_at(f, ID, 0), 7);
  assert_int_equal(i32_at(f, I32, 0), -5);
  assert_int_equal((uint32_t)i32_at(f, U32, 0), 4000000000u);
  assert_true(u64_at(f, U64, 0) == UINT64_MAX);
  assert_true(f32_at(f, F32, 0) == 1.5f);
  assert_true(f64_at(f, 0) == -225.0);
  assert_true(bool_at(f, B, 0));
  assert_bytes(f, S, 0, "h\xc3\xa9llo", 6);
  assert_bytes(f, BIN, 0, "\x00\x01\x02", 3);
  assert_true(f32_at(f, VEC, 0) == 1.0f && f32_at(f, VEC, 1) == 2.5f && f32_at(f, VEC, 2) == -3.0f);
  assert_false(bool_at(f, TOMB, 0));
  for (int i = 0; i < NCOLS; i++) assert_int_equal(f->b.cols[i].null_count, 0);
  /* members in any order, spaces and tabs around tokens, integers into floats */
  ok(f, " {\t\"vec\" : [ 0 , 0 , 0 ] , \"f64\":3, \"f32\" :-7,\"b\":false , \"id\":8 }\t");
  assert_true(f64_at(f, 1) == 3.0 && f32_at(f, F32, 1) == -7.0f);
  assert_false(bool_at(f, B, 1));
  assert_int_equal(i64_at(f, ID, 1), 8);
  fx_free(f);
}

static void test_nulls(void **state) {
  (void)state;
  fx_t *f = fx_new(NULL);
  ok(f, "{\"id\":1}");
  ok(f, "{\"id\":2,\"i32\":null,\"u32\":null,\"u64\":null,\"f32\":null,\"f64\":null,"
        "\"b\":null,\"s\":null,\"bin\":null,\"vec\":null}");
  ok(f, "{\"id\":3,\"s\":\"\",\"bin\":\"\"}");
  for (int i = I32; i <= VEC; i++) {
    assert_false(valid(f, i, 0));
    assert_false(valid(f, i, 1));
  }
  assert_true(valid(f, S, 2) && valid(f, BIN, 2));
  assert_bytes(f, S, 2, "", 0);
  assert_bytes(f, BIN, 2, "", 0);
  assert_int_equal(f->b.cols[VEC].null_count, 3);
  assert_int_equal(f->b.cols[VEC].values.len, 3 * 12); /* null rows keep a zeroed slot */
  assert_true(valid(f, ID, 0) && valid(f, TOMB, 2));
  fx_free(f);
}

static void test_integers(void **state) {
  (void)state;
  fx_t *f = fx_new(NULL);
  ok(f, "{\"id\":-9223372036854775808,\"i32\":-2147483648,\"u32\":0,\"u64\":0}");
  ok(f, "{\"id\":9223372036854775807,\"i32\":2147483647,\"u32\":4294967295,"
        "\"u64\":18446744073709551615}");
  ok(f, "{\"id\":-0,\"u32\":-0}");
  assert_true(i64_at(f, ID, 0) == INT64_MIN);
  assert_true(i64_at(f, ID, 1) == INT64_MAX);
  assert_int_equal(i32_at(f, I32, 0), INT32_MIN);
  assert_int_equal(i32_at(f, I32, 1), INT32_MAX);
  assert_int_equal((uint32_t)i32_at(f, U32, 1), UINT32_MAX);
  assert_true(u64_at(f, U64, 1) == UINT64_MAX);
  assert_int_equal(i64_at(f, ID, 2), 0);
  bad(f, "{\"id\":9223372036854775808}", MW_JSONROW_E_TYPE,
      "field \"id\": 9223372036854775808 is out of range for int64");
  bad(f, "{\"id\":-9223372036854775809}", MW_JSONROW_E_TYPE, "out of range for int64");
  bad(f, "{\"id\":1,\"i32\":2147483648}", MW_JSONROW_E_TYPE, "out of range for int32");
  bad(f, "{\"id\":1,\"i32\":-2147483649}", MW_JSONROW_E_TYPE, "out of range for int32");
  bad(f, "{\"id\":1,\"u32\":4294967296}", MW_JSONROW_E_TYPE, "out of range for uint32");
  bad(f, "{\"id\":1,\"u32\":-1}", MW_JSONROW_E_TYPE, "-1 is out of range for uint32");
  bad(f, "{\"id\":1,\"u64\":18446744073709551616}", MW_JSONROW_E_TYPE, "out of range for uint64");
  bad(f, "{\"id\":1,\"u64\":123456789012345678901234567890}", MW_JSONROW_E_TYPE,
      "out of range for uint64");
  bad(f, "{\"id\":1.5}", MW_JSONROW_E_TYPE,
      "field \"id\": expected an integer (int64), got 1.5 (a fraction or exponent)");
  bad(f, "{\"id\":1e2}", MW_JSONROW_E_TYPE, "expected an integer (int64), got 1e2");
  bad(f, "{\"id\":1,\"i32\":1.0}", MW_JSONROW_E_TYPE, "expected an integer (int32)");
  bad(f, "{\"id\":\"1x\"}", MW_JSONROW_E_TYPE,
      "field \"id\": expected an integer (int64), got the string \"1x\"");
  bad(f, "{\"id\":\"01\"}", MW_JSONROW_E_TYPE, "got the string \"01\""); /* JSON's grammar */
  bad(f, "{\"id\":1,\"u64\":\"-1\"}", MW_JSONROW_E_TYPE, "out of range for uint64");
  bad(f, "{\"id\":1,\"u32\":true}", MW_JSONROW_E_TYPE, "expected an integer (uint32), got a boolean");
  bad(f, "{\"id\":1,\"i32\":[1]}", MW_JSONROW_E_TYPE, "got an array");
  bad(f, "{\"id\":1,\"i32\":{}}", MW_JSONROW_E_TYPE, "got an object");
  assert_int_equal(f->b.n_rows, 3);
  fx_free(f);
}

static void test_floats(void **state) {
  (void)state;
  fx_t *f = fx_new(NULL);
  ok(f, "{\"id\":0,\"f64\":9007199254740993}"); /* 2^53+1: ties to even -> 2^53 */
  assert_true(f64_at(f, 0) == 9007199254740992.0);
  ok(f, "{\"id\":1,\"f64\":-0.0,\"f32\":-0}");
  assert_true(f64_at(f, 1) == 0.0 && signbit(f64_at(f, 1)));
  assert_true(signbit(f32_at(f, F32, 1)));
  ok(f, "{\"id\":2,\"f64\":1e-400,\"f32\":1e-50}"); /* underflow rounds to zero */
  assert_true(f64_at(f, 2) == 0.0 && f32_at(f, F32, 2) == 0.0f);
  ok(f, "{\"id\":3,\"f64\":1.7976931348623157e308,\"f32\":3.4028234e38}");
  assert_true(f64_at(f, 3) == 1.7976931348623157e308);
  assert_true(f32_at(f, F32, 3) == 3.4028234e38f);
  ok(f, "{\"id\":4,\"f64\":4.9e-324,\"f32\":0.1}");
  assert_true(f64_at(f, 4) == 4.9e-324 && f32_at(f, F32, 4) == 0.1f);
  bad(f, "{\"id\":5,\"f64\":1e400}", MW_JSONROW_E_TYPE,
      "field \"f64\": 1e400 is out of range for float64");
  bad(f, "{\"id\":5,\"f64\":-1e400}", MW_JSONROW_E_TYPE, "out of range for float64");
  bad(f, "{\"id\":5,\"f32\":3.5e38}", MW_JSONROW_E_TYPE, "out of range for float32");
  bad(f, "{\"id\":5,\"f64\":\"1.5\"}", MW_JSONROW_E_TYPE,
      "field \"f64\": expected a number (float64), got a string");
  bad(f, "{\"id\":5,\"f32\":false}", MW_JSONROW_E_TYPE,
      "field \"f32\": expected a number (float32), got a boolean");
  /* every conversion is correctly rounded: compare with strtod/strtof */
  char line[192], num[64];
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < 4000; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    int form = (int)(x % 4);
    unsigned long long m = (x >> 8) % (form == 0 ? 10000000ull : 100000000000000000ull);
    int e = (int)((x >> 40) % 80) - 40;
    if (form == 3) snprintf(num, sizeof num, "%llu", m);
    else if (form == 2) snprintf(num, sizeof num, "0.%llu", m);
    else snprintf(num, sizeof num, "%llue%d", m, e);
    snprintf(line, sizeof line, "{\"id\":%d,\"f64\":%s,\"f32\":-%s}", i, num, num);
    if (strtod(num, NULL) > 3e38) continue;
    ok(f, line);
    int64_t r = f->b.n_rows - 1;
    double d = strtod(num, NULL);
    float fl = -strtof(num, NULL);
    if (memcmp(&d, f->b.cols[F64].values.data + r * 8, 8) != 0) fail_msg("f64 %s", num);
    if (memcmp(&fl, f->b.cols[F32].values.data + r * 4, 4) != 0) fail_msg("f32 %s", num);
  }
  fx_free(f);
}

static void test_strings(void **state) {
  (void)state;
  fx_t *f = fx_new(NULL);
  ok(f, "{\"id\":0,\"s\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"}");
  assert_bytes(f, S, 0, "\"\\/\b\f\n\r\t", 8);
  ok(f, "{\"id\":1,\"s\":\"\\u0041\\u00e9\\u20AC\\ud83d\\ude00\\u0000x\"}");
  assert_bytes(f, S, 1, "A\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\x00x", 12);
  ok(f, "{\"id\":2,\"s\":\"raw \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"}");
  assert_bytes(f, S, 2, "raw \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 15);
  /* keys with escapes match too */
  ok(f, "{\"\\u0069d\":3,\"\\u0073\":\"k\"}");
  assert_int_equal(i64_at(f, ID, 3), 3);
  assert_bytes(f, S, 3, "k", 1);
  bad(f, "{\"id\":4,\"s\":\"\\ud83d\"}", MW_JSONROW_E_PARSE, "not followed by a low surrogate");
  bad(f, "{\"id\":4,\"s\":\"\\ud83dx\\ude00\"}", MW_JSONROW_E_PARSE, "high surrogate");
  bad(f, "{\"id\":4,\"s\":\"\\ude00\"}", MW_JSONROW_E_PARSE, "lone low surrogate");
  bad(f, "{\"id\":4,\"s\":\"\\x41\"}", MW_JSONROW_E_PARSE, "invalid escape '\\x'");
  bad(f, "{\"id\":4,\"s\":\"\\u12\"}", MW_JSONROW_E_PARSE, "4 hex digits");
  bad(f, "{\"id\":4,\"s\":\"\\u12G4\"}", MW_JSONROW_E_PARSE, "4 hex digits");
  bad(f, "{\"id\":4,\"s\":\"a\tb\"}", MW_JSONROW_E_PARSE, "control character 0x09");
  bad(f, "{\"id\":4,\"s\":\"a\rb\"}", MW_JSONROW_E_PARSE, "control character 0x0d");
  bad(f, "{\"id\":4,\"s\":\"abc}", MW_JSONROW_E_PARSE, "unterminated string");
  bad(f, "{\"id\":4,\"s\":\"abc\\", MW_JSONROW_E_PARSE, "unterminated string");
  /* invalid UTF-8 anywhere in the line is a parse error */
  bad(f, "{\"id\":4,\"s\":\"\xc0\x80\"}", MW_JSONROW_E_PARSE, "invalid UTF-8");     /* overlong */
  bad(f, "{\"id\":4,\"s\":\"\xed\xa0\x80\"}", MW_JSONROW_E_PARSE, "invalid UTF-8"); /* surrogate */
  bad(f, "{\"id\":4,\"s\":\"\xf4\x90\x80\x80\"}", MW_JSONROW_E_PARSE, "invalid UTF-8"); /* >10FFFF */
  bad(f, "{\"id\":4,\"s\":\"\xe2\x82\"}", MW_JSONROW_E_PARSE, "invalid UTF-8"); /* truncated */
  bad(f, "{\"id\":4,\"s\":\"\xff\"}", MW_JSONROW_E_PARSE, "invalid UTF-8");
  bad(f, "{\"id\":4,\"bin\":\"\x80\"}", MW_JSONROW_E_PARSE, "invalid UTF-8");
  bad(f, "{\"id\":4,\"\xc3\"}", MW_JSONROW_E_PARSE, "invalid UTF-8");
  bad(f, "{\"id\":4,\"s\":1}", MW_JSONROW_E_TYPE,
      "field \"s\": expected a string (utf8), got a number");
  assert_int_equal(f->b.n_rows, 4);
  fx_free(f);
}

static void test_binary(void **state) {
  (void)state;
  fx_t *f = fx_new(NULL);
  ok(f, "{\"id\":0,\"bin\":\"AA==\"}");
  ok(f, "{\"id\":1,\"bin\":\"AAE=\"}");
  ok(f, "{\"id\":2,\"bin\":\"/+/+\"}");
  ok(f, "{\"id\":3,\"bin\":\"\\u0041\\u0041==\"}"); /* escapes are decoded first */
  ok(f, "{\"id\":4,\"bin\":\"aGVsbG8gd29ybGQ=\"}");
  assert_bytes(f, BIN, 0, "\x00", 1);
  assert_bytes(f, BIN, 1, "\x00\x01", 2);
  assert_bytes(f, BIN, 2, "\xff\xef\xfe", 3);
  assert_bytes(f, BIN, 3, "\x00", 1);
  assert_bytes(f, BIN, 4, "hello world", 11);
  bad(f, "{\"id\":5,\"bin\":\"AA=\"}", MW_JSONROW_E_TYPE,
      "field \"bin\": expected a base64 string (binary), got a length of 3");
  bad(f, "{\"id\":5,\"bin\":\"AA\"}", MW_JSONROW_E_TYPE, "not a multiple of 4");
  bad(f, "{\"id\":5,\"bin\":\"A===\"}", MW_JSONROW_E_TYPE, "bad character at 2");
  bad(f, "{\"id\":5,\"bin\":\"AB==\"}", MW_JSONROW_E_TYPE, "bad character"); /* pad bits */
  bad(f, "{\"id\":5,\"bin\":\"AA==AAAA\"}", MW_JSONROW_E_TYPE, "bad character at 3");
  bad(f, "{\"id\":5,\"bin\":\"A-_A\"}", MW_JSONROW_E_TYPE, "bad character at 2"); /* url alphabet */
  bad(f, "{\"id\":5,\"bin\":\"AA=A\"}", MW_JSONROW_E_TYPE, "bad character at 3");
  bad(f, "{\"id\":5,\"bin\":[1]}", MW_JSONROW_E_TYPE,
      "field \"bin\": expected a base64 string (binary), got an array");
  assert_int_equal(f->b.n_rows, 5);
  fx_free(f);
}

static void test_bool_and_vector(void **state) {
  (void)state;
  fx_t *f = fx_new(NULL);
  ok(f, "{\"id\":0,\"b\":false,\"vec\":[-0.5, 1e-3 ,65504]}");
  assert_false(bool_at(f, B, 0));
  assert_true(f32_at(f, VEC, 0) == -0.5f && f32_at(f, VEC, 1) == 1e-3f &&
              f32_at(f, VEC, 2) == 65504.0f);
  bad(f, "{\"id\":1,\"b\":1}", MW_JSONROW_E_TYPE,
      "field \"b\": expected true or false (bool), got a number");
  bad(f, "{\"id\":1,\"b\":\"true\"}", MW_JSONROW_E_TYPE, "got a string");
  bad(f, "{\"id\":1,\"b\":tru}", MW_JSONROW_E_PARSE, "invalid literal");
  bad(f, "{\"id\":1,\"b\":True}", MW_JSONROW_E_PARSE, "expected a value");
  bad(f, "{\"id\":1,\"vec\":[1,2]}", MW_JSONROW_E_TYPE,
      "field \"vec\": expected 3 numbers (fixed_size_list<float32, 3>), got 2");
  bad(f, "{\"id\":1,\"vec\":[1,2,3,4,5]}", MW_JSONROW_E_TYPE, "expected 3 numbers");
  bad(f, "{\"id\":1,\"vec\":[1,2,3,4,5]}", MW_JSONROW_E_TYPE, "got 5");
  bad(f, "{\"id\":1,\"vec\":[]}", MW_JSONROW_E_TYPE, "got 0");
  bad(f, "{\"id\":1,\"vec\":[1,\"2\",3]}", MW_JSONROW_E_TYPE,
      "field \"vec\": element 1: expected a number (float32), got a string");
  bad(f, "{\"id\":1,\"vec\":[1,null,3]}", MW_JSONROW_E_TYPE, "element 1");
  bad(f, "{\"id\":1,\"vec\":[[1],2,3]}", MW_JSONROW_E_TYPE, "element 0");
  bad(f, "{\"id\":1,\"vec\":[1,2,1e39]}", MW_JSONROW_E_TYPE, "out of range for");
  bad(f, "{\"id\":1,\"vec\":[1,2,3}", MW_JSONROW_E_PARSE, "expected ',' or ']'");
  bad(f, "{\"id\":1,\"vec\":[1,2,", MW_JSONROW_E_PARSE, "unterminated array");
  bad(f, "{\"id\":1,\"vec\":1}", MW_JSONROW_E_TYPE,
      "expected an array of 3 numbers (fixed_size_list<float32, 3>), got a number");
  assert_int_equal(f->b.n_rows, 1);
  fx_free(f);
}

static void test_parse_errors(void **state) {
  (void)state;
  fx_t *f = fx_new(NULL);
  bad(f, "", MW_JSONROW_E_PARSE, "expected '{', got end of line");
  bad(f, "   ", MW_JSONROW_E_PARSE, "expected '{'");
  bad(f, "[1]", MW_JSONROW_E_PARSE, "expected '{', got '['");
  bad(f, "{", MW_JSONROW_E_PARSE, "expected a field name, got end of line");
  bad(f, "{\"id\":1", MW_JSONROW_E_PARSE, "expected ',' or '}', got end of line");
  bad(f, "{\"id\":1,}", MW_JSONROW_E_PARSE, "expected a field name, got '}'");
  bad(f, "{\"id\" 1}", MW_JSONROW_E_PARSE, "expected ':'");
  bad(f, "{id:1}", MW_JSONROW_E_PARSE, "at byte 1: expected a field name, got 'i'");
  bad(f, "{\"id\":}", MW_JSONROW_E_PARSE, "expected a value, got '}'");
  bad(f, "{\"id\":1}}", MW_JSONROW_E_PARSE, "at byte 8: trailing garbage");
  bad(f, "{\"id\":1} x", MW_JSONROW_E_PARSE, "trailing garbage");
  bad(f, "{\"id\":1}{\"id\":2}", MW_JSONROW_E_PARSE, "trailing garbage");
  bad(f, "{\"id\":1,\"id\":2}", MW_JSONROW_E_PARSE, "duplicate key \"id\"");
  bad(f, "{\"id\":1,\"s\":\"a\",\"s\":\"b\"}", MW_JSONROW_E_PARSE, "duplicate key \"s\"");
  bad(f, "{\"id\":01}", MW_JSONROW_E_PARSE, "leading zero");
  bad(f, "{\"id\":-}", MW_JSONROW_E_PARSE, "malformed number");
  bad(f, "{\"id\":+1}", MW_JSONROW_E_PARSE, "expected a value, got '+'");
  bad(f, "{\"id\":1,\"f64\":1.}", MW_JSONROW_E_PARSE, "malformed number");
  bad(f, "{\"id\":1,\"f64\":.5}", MW_JSONROW_E_PARSE, "expected a value");
  bad(f, "{\"id\":1,\"f64\":1e}", MW_JSONROW_E_PARSE, "malformed number");
  bad(f, "{\"id\":1,\"f64\":1e+}", MW_JSONROW_E_PARSE, "malformed number");
  bad(f, "{\"id\":1,\"f64\":NaN}", MW_JSONROW_E_PARSE, "expected a value");
  bad(f, "{\"id\":1,\"f64\":1.5x}", MW_JSONROW_E_PARSE, "expected ',' or '}', got 'x'");
  bad(f, "{\"id\":1,\"s\":nul}", MW_JSONROW_E_PARSE, "invalid literal");
  /* the caller strips the CRLF; a stray \r or \n anywhere is malformed */
  bad(f, "{\"id\":1}\r", MW_JSONROW_E_PARSE, "trailing garbage");
  bad(f, "{\"id\":1,\r\"s\":null}", MW_JSONROW_E_PARSE, "got byte 0x0d");
  bad(f, "{\"id\":\n1}", MW_JSONROW_E_PARSE, "got byte 0x0a");
  bad_n(f, "{\"id\":1}\0", 9, false, MW_JSONROW_E_PARSE, "trailing garbage");
  bad_n(f, "{\"id\":1\0}", 9, false, MW_JSONROW_E_PARSE, "got byte 0x00");
  /* the error offset points at the offending byte */
  bad(f, "{\"id\":1,  \"s\" ; 1}", MW_JSONROW_E_PARSE, "expected ':', got ';'");
  assert_int_equal(f->e.offset, 14);
  assert_int_equal(f->b.n_rows, 0);
  fx_free(f);
}

static void test_schema_errors(void **state) {
  (void)state;
  fx_t *f = fx_new(NULL);
  bad(f, "{\"id\":1,\"zzz\":1}", MW_JSONROW_E_SCHEMA, "unknown field \"zzz\"");
  bad(f, "{\"id\":1,\"a\\\"\\u0001\":1}", MW_JSONROW_E_SCHEMA, "unknown field \"a\\x22\\x01\"");
  bad(f, "{\"id\":1,\"_tombstone\":true}", MW_JSONROW_E_SCHEMA, "\"_tombstone\" is reserved");
  bad(f, "{\"id\":1,\"ID\":1}", MW_JSONROW_E_SCHEMA, "unknown field \"ID\""); /* case matters */
  bad(f, "{\"id\":1,\"i\":1}", MW_JSONROW_E_SCHEMA, "unknown field \"i\"");
  char longkey[256];
  snprintf(longkey, sizeof longkey, "{\"id\":1,\"%0200d\":1}", 7);
  bad(f, longkey, MW_JSONROW_E_SCHEMA, "unknown field \"0000000000"); /* shown bounded */
  assert_non_null(strstr(f->e.msg, "...\""));
  assert_true(strlen(f->e.msg) < 120);
  fx_free(f);

  /* ignore_unknown_fields skips any JSON value, depth-limited */
  mw_jsonrow_opts_t o = {.ignore_unknown_fields = true, .max_depth = 4};
  f = fx_new(&o);
  ok(f, "{\"zzz\":{\"a\":[1,{\"b\":null}],\"c\":\"x\"},\"id\":1,\"q\":[],\"r\":{},\"t\":-1.5e3}");
  assert_int_equal(f->b.n_rows, 1);
  assert_int_equal(i64_at(f, ID, 0), 1);
  bad(f, "{\"id\":2,\"zzz\":[[[[1]]]]}", MW_JSONROW_E_PARSE, "nesting deeper than 4");
  bad(f, "{\"id\":2,\"zzz\":[1,]}", MW_JSONROW_E_PARSE, "expected a value, got ']'");
  bad(f, "{\"id\":2,\"zzz\":{\"a\" 1}}", MW_JSONROW_E_PARSE, "expected ':'");
  bad(f, "{\"id\":2,\"zzz\":{1:1}}", MW_JSONROW_E_PARSE, "expected a key");
  bad(f, "{\"id\":2,\"zzz\":\"\xff\"}", MW_JSONROW_E_PARSE, "invalid UTF-8");
  bad(f, "{\"id\":2,\"zzz\":[1 2]}", MW_JSONROW_E_PARSE, "expected ',' or ']'");
  bad(f, "{\"id\":2,\"zzz\":[1", MW_JSONROW_E_PARSE, "expected ',' or ']', got end of line");
  fx_free(f);

  /* a non-null column that is missing or null */
  mw_schema_t s;
  mw_schema_init(&s);
  mw_schema_add(&s, "id", MW_T_UTF8, false);
  mw_schema_add(&s, "req", MW_T_FSL, false);
  mw_schema_add(&s, "_tombstone", MW_T_BOOL, false);
  s.fields[0].pk_position = 1;
  s.fields[1].fsl_dim = 2;
  mw_jsonrow_parser_t p;
  mw_batch_t b;
  mw_jsonrow_error_t e;
  assert_int_equal(mw_jsonrow_init(&p, &s, NULL), 0);
  assert_int_equal(mw_batch_init(&b, &s), 0);
  const char *l1 = "{\"id\":\"k\"}";
  assert_int_equal(mw_jsonrow_parse(&p, l1, strlen(l1), false, &b, &e), -EBADMSG);
  assert_int_equal(e.cls, MW_JSONROW_E_SCHEMA);
  assert_string_equal(e.msg, "missing field \"req\" (fixed_size_list<float32, 2> not null)");
  const char *l2 = "{\"id\":\"k\",\"req\":null}";
  assert_int_equal(mw_jsonrow_parse(&p, l2, strlen(l2), false, &b, &e), -EBADMSG);
  assert_int_equal(e.cls, MW_JSONROW_E_TYPE);
  assert_string_equal(e.msg, "field \"req\": expected an array of 2 numbers "
                             "(fixed_size_list<float32, 2> not null), got null");
  /* deletes need every non-key column nullable */
  const char *l3 = "{\"id\":\"k\"}";
  assert_int_equal(mw_jsonrow_parse(&p, l3, strlen(l3), true, &b, &e), -EBADMSG);
  assert_int_equal(e.cls, MW_JSONROW_E_SCHEMA);
  assert_non_null(strstr(e.msg, "cannot take deletes"));
  const char *l4 = "{\"id\":\"k\",\"req\":[1,2]}";
  assert_int_equal(mw_jsonrow_parse(&p, l4, strlen(l4), false, &b, &e), 0);
  assert_int_equal(b.n_rows, 1);
  assert_int_equal(b.cols[0].length, 1);
  assert_int_equal(mw_batch_validate(&b), 0);
  mw_batch_free(&b);
  mw_jsonrow_free(&p);
  mw_schema_free(&s);
}

static void test_pk_errors(void **state) {
  (void)state;
  fx_t *f = fx_new(NULL);
  bad(f, "{}", MW_JSONROW_E_PK, "missing primary key field \"id\"");
  bad(f, "{\"s\":\"x\"}", MW_JSONROW_E_PK, "missing primary key field \"id\"");
  bad(f, "{\"id\":null}", MW_JSONROW_E_PK, "primary key field \"id\" is null");
  bad_n(f, "{\"s\":\"x\"}", 9, true, MW_JSONROW_E_PK, "missing primary key field \"id\"");
  bad_n(f, "{\"id\":null}", 11, true, MW_JSONROW_E_PK, "is null");
  bad_n(f, "{\"id\":\"x\"}", 10, true, MW_JSONROW_E_TYPE, "expected an integer (int64)");
  assert_int_equal(f->b.n_rows, 0);
  fx_free(f);
}

static void test_deletes(void **state) {
  (void)state;
  fx_t *f = fx_new(NULL);
  ok(f, "{\"id\":1,\"s\":\"a\",\"vec\":[1,2,3],\"b\":true}");
  const char *del = "{\"s\":\"ignored\",\"zzz\":[1,{\"a\":2}],\"id\":5,\"vec\":\"not a vector\"}";
  assert_int_equal(parse(f, del, true), 0);
  assert_int_equal(mw_batch_validate(&f->b), 0);
  assert_int_equal(f->b.n_rows, 2);
  assert_int_equal(i64_at(f, ID, 1), 5);
  for (int i = I32; i <= VEC; i++) assert_false(valid(f, i, 1));
  assert_false(bool_at(f, TOMB, 0));
  assert_true(bool_at(f, TOMB, 1));
  ok(f, "{\"id\":5}");
  assert_false(bool_at(f, TOMB, 2));
  /* delete members must still be well-formed and unique */
  bad_n(f, "{\"id\":6,\"s\":[1}", 15, true, MW_JSONROW_E_PARSE, "expected ',' or ']'");
  bad_n(f, "{\"id\":6,\"s\":1,\"s\":2}", 20, true, MW_JSONROW_E_PARSE, "duplicate key");
  assert_int_equal(f->b.n_rows, 3);
  fx_free(f);

  /* a schema without _tombstone or key cannot take deletes */
  mw_schema_t s;
  mw_schema_init(&s);
  mw_schema_add(&s, "id", MW_T_INT64, false);
  mw_jsonrow_parser_t p;
  mw_batch_t b;
  mw_jsonrow_error_t e;
  assert_int_equal(mw_jsonrow_init(&p, &s, NULL), 0);
  assert_int_equal(mw_batch_init(&b, &s), 0);
  assert_int_equal(mw_jsonrow_parse(&p, "{\"id\":1}", 8, true, &b, &e), -EBADMSG);
  assert_int_equal(e.cls, MW_JSONROW_E_SCHEMA);
  assert_int_equal(mw_jsonrow_parse(&p, "{\"id\":1}", 8, false, &b, &e), 0);
  assert_int_equal(b.n_rows, 1);
  mw_batch_free(&b);
  mw_jsonrow_free(&p);
  mw_schema_free(&s);
}

/* Identity sharding on a non-key column: a delete must carry that column
 * (it decides the shard), and only it is kept besides the key. */
static void test_delete_keep(void **state) {
  (void)state;
  mw_jsonrow_opts_t o = {.delete_keep = "s"};
  fx_t *f = fx_new(&o);
  assert_int_equal(parse(f, "{\"id\":5,\"s\":\"eu\",\"f64\":1.5}", true), 0);
  assert_int_equal(f->b.n_rows, 1);
  assert_true(valid(f, S, 0));
  assert_bytes(f, S, 0, "eu", 2);
  assert_false(valid(f, F64, 0));
  assert_true(bool_at(f, TOMB, 0));
  bad_n(f, "{\"id\":6}", 8, true, MW_JSONROW_E_SCHEMA, "must name field \"s\"");
  assert_int_equal(f->b.n_rows, 1);
  ok(f, "{\"id\":7}"); /* upserts are not affected */
  fx_free(f);
  mw_jsonrow_opts_t bad = {.delete_keep = "nope"};
  mw_jsonrow_parser_t p;
  mw_schema_t sch;
  schema_all(&sch);
  assert_int_equal(mw_jsonrow_init(&p, &sch, &bad), -EINVAL);
  mw_schema_free(&sch);
}

static void test_rollback(void **state) {
  (void)state;
  fx_t *f = fx_new(NULL);
  static const char *bad_lines[] = {
      /* fails after every column before it was appended */
      "{\"id\":1,\"i32\":1,\"u32\":2,\"u64\":3,\"f32\":1,\"f64\":2,\"b\":true,\"s\":\"x\","
      "\"bin\":\"AA==\",\"vec\":[1,2]}",
      "{\"id\":1,\"i32\":null,\"u32\":null,\"s\":null,\"vec\":null,\"b\":null,\"bin\":\"!\"}",
      "{\"id\":1,\"s\":\"\\u00e9\",\"vec\":[1,2,3],\"zzz\":1}",
      "{\"s\":\"long string that is appended then rolled back\",\"vec\":[1,2,3]}",
      "{\"id\":1,\"b\":false,\"s\":null,\"f64\":1e999}",
      "{\"id\":1,\"bin\":null,\"b\":true} trailing",
      "{\"i32\":null,\"id\":null}",
  };
  /* interleave good rows (some with nulls, materialising bitmaps) and bad rows */
  for (int round = 0; round < 40; round++) {
    char line[160];
    if (round % 3 == 0) snprintf(line, sizeof line, "{\"id\":%d}", round);
    else snprintf(line, sizeof line,
                  "{\"id\":%d,\"i32\":%d,\"u32\":1,\"u64\":2,\"f32\":0.5,\"f64\":0.25,\"b\":%s,"
                  "\"s\":\"r%d\",\"bin\":\"AAA=\",\"vec\":[%d,0,1]}",
                  round, -round, round & 1 ? "true" : "false", round, round);
    if (round >= 20) ok(f, line);
    for (size_t k = 0; k < sizeof bad_lines / sizeof *bad_lines; k++) {
      snap_t sn;
      snap_take(f, &sn);
      assert_int_equal(parse(f, bad_lines[k], false), -EBADMSG);
      snap_check_free(f, &sn);
    }
  }
  assert_int_equal(f->b.n_rows, 20);
  /* the first failing row before any null: no bitmap appears */
  mw_batch_reset(&f->b);
  ok(f, "{\"id\":1,\"i32\":1,\"u32\":2,\"u64\":3,\"f32\":1,\"f64\":2,\"b\":true,\"s\":\"x\","
        "\"bin\":\"AA==\",\"vec\":[1,2,3]}");
  assert_int_equal(parse(f, "{\"id\":2,\"vec\":[1]}", false), -EBADMSG);
  for (int i = 0; i < NCOLS; i++) assert_int_equal(f->b.cols[i].validity.len, 0);
  fx_free(f);
}

/* A batch whose vector column already has a child (item) bitmap, e.g. rows
 * carried over from a decoded WAL entry: appends and rollbacks keep it exact. */
static void test_fsl_item_bitmap(void **state) {
  (void)state;
  fx_t *f = fx_new(NULL);
  ok(f, "{\"id\":0,\"vec\":[0,1,2]}");
  mw_column_t *v = &f->b.cols[VEC];
  assert_int_equal(mw_buf_put_u8(&v->item_validity, 0x06), 0); /* item 0 null */
  v->item_null_count = 1;
  assert_int_equal(mw_batch_validate(&f->b), 0);
  ok(f, "{\"id\":1,\"vec\":[3,4,5]}");
  ok(f, "{\"id\":2,\"vec\":null}");
  ok(f, "{\"id\":3}");
  bad(f, "{\"id\":4,\"vec\":[1,2,3],\"zzz\":0}", MW_JSONROW_E_SCHEMA, "unknown field");
  bad(f, "{\"id\":4,\"vec\":null,\"zzz\":0}", MW_JSONROW_E_SCHEMA, "unknown field");
  ok(f, "{\"id\":5,\"vec\":[6,7,8]}");
  assert_int_equal(f->b.n_rows, 5);
  assert_int_equal(v->item_validity.len, 2); /* 15 items */
  for (int k = 3; k < 6; k++) assert_true(mw_bit_get(v->item_validity.data, k));
  for (int k = 12; k < 15; k++) assert_true(mw_bit_get(v->item_validity.data, k));
  assert_false(mw_bit_get(v->item_validity.data, 0));
  assert_true(f32_at(f, VEC, 13) == 7.0f);
  fx_free(f);
}

static void test_limits_and_api(void **state) {
  (void)state;
  mw_jsonrow_opts_t o = {.max_line_bytes = 16};
  fx_t *f = fx_new(&o);
  ok(f, "{\"id\":123456789}");
  bad(f, "{\"id\":1234567890}", MW_JSONROW_E_PARSE, "line of 17 bytes is longer than 16");
  /* the per-row stamp wraps without losing duplicate detection */
  f->p.stamp = UINT32_MAX - 1;
  ok(f, "{\"id\":1}");
  bad(f, "{\"id\":1,\"id\":1}", MW_JSONROW_E_PARSE, "duplicate key");
  ok(f, "{\"id\":2}");
  ok(f, "{\"id\":3}");
  assert_int_equal(f->b.n_rows, 4);
  /* err may be NULL */
  assert_int_equal(mw_jsonrow_parse(&f->p, "{", 1, false, &f->b, NULL), -EBADMSG);
  fx_free(f);

  assert_string_equal(mw_jsonrow_class_name(MW_JSONROW_E_PARSE), "parse");
  assert_string_equal(mw_jsonrow_class_name(MW_JSONROW_E_SCHEMA), "schema");
  assert_string_equal(mw_jsonrow_class_name(MW_JSONROW_E_TYPE), "type");
  assert_string_equal(mw_jsonrow_class_name(MW_JSONROW_E_PK), "pk");

  /* unusable schemas and options */
  mw_schema_t s;
  mw_jsonrow_parser_t p;
  mw_schema_init(&s);
  assert_int_equal(mw_jsonrow_init(&p, &s, NULL), -EINVAL); /* no fields */
  mw_schema_add(&s, "a", MW_T_INT64, false);
  mw_schema_add(&s, "b", MW_T_INT64, false);
  s.fields[0].pk_position = s.fields[1].pk_position = 1;
  assert_int_equal(mw_jsonrow_init(&p, &s, NULL), -EINVAL); /* two keys */
  s.fields[1].pk_position = 0;
  mw_jsonrow_opts_t big = {.max_depth = MW_JSONROW_MAX_DEPTH + 1};
  assert_int_equal(mw_jsonrow_init(&p, &s, &big), -EINVAL);
  mw_schema_add(&s, "v", MW_T_FSL, true); /* fsl_dim 0 */
  assert_int_equal(mw_jsonrow_init(&p, &s, NULL), -EINVAL);
  s.fields[2].fsl_dim = 2;
  assert_int_equal(mw_jsonrow_init(&p, &s, NULL), 0);
  mw_jsonrow_free(&p);
  mw_schema_free(&s);
}

/* A wide schema exercises the name hash (and its misses). */
static void test_wide_schema(void **state) {
  (void)state;
  mw_schema_t s;
  mw_schema_init(&s);
  char name[32], line[8192];
  for (int i = 0; i < 300; i++) {
    snprintf(name, sizeof name, "c%d", i);
    mw_schema_add(&s, name, MW_T_INT32, true);
  }
  mw_jsonrow_parser_t p;
  mw_batch_t b;
  mw_jsonrow_error_t e;
  assert_int_equal(mw_jsonrow_init(&p, &s, NULL), 0);
  assert_int_equal(mw_batch_init(&b, &s), 0);
  size_t n = (size_t)snprintf(line, sizeof line, "{");
  for (int i = 299; i >= 0; i -= 2) n += (size_t)snprintf(line + n, sizeof line - n, "\"c%d\":%d,", i, i);
  line[n - 1] = '}';
  assert_int_equal(mw_jsonrow_parse(&p, line, n, false, &b, &e), 0);
  for (int i = 0; i < 300; i++) {
    assert_int_equal(mw_column_valid(&b.cols[i], 0), i % 2 == 1);
    if (i % 2) assert_int_equal(*(int32_t *)(void *)b.cols[i].values.data, i);
  }
  assert_int_equal(mw_jsonrow_parse(&p, "{\"c300\":1}", 10, false, &b, &e), -EBADMSG);
  assert_int_equal(e.cls, MW_JSONROW_E_SCHEMA);
  assert_int_equal(b.n_rows, 1);
  mw_batch_free(&b);
  mw_jsonrow_free(&p);
  mw_schema_free(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_all_types),     cmocka_unit_test(test_nulls),
      cmocka_unit_test(test_integers),      cmocka_unit_test(test_floats),
      cmocka_unit_test(test_strings),       cmocka_unit_test(test_binary),
      cmocka_unit_test(test_bool_and_vector), cmocka_unit_test(test_parse_errors),
      cmocka_unit_test(test_schema_errors), cmocka_unit_test(test_pk_errors),
      cmocka_unit_test(test_deletes),       cmocka_unit_test(test_rollback),
      cmocka_unit_test(test_delete_keep),
      cmocka_unit_test(test_limits_and_api), cmocka_unit_test(test_wide_schema),
      cmocka_unit_test(test_fsl_item_bitmap),
  };
  return tu_run_group(tests, NULL, NULL);
}
