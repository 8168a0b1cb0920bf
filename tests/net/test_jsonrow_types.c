/*
 * test_jsonrow_types.c — the JSON mapping of the column types beyond the
 * basic ones (src/net/jsonrow.c): narrow ints and 64-bit ints from strings,
 * float16 rounding, timestamps from RFC 3339 and from integers in the unit,
 * dates, times, decimals, large and fixed binaries, fixed_size_lists of
 * other items, lists, large_lists, structs (nested, nulls at every level),
 * objects as JSON text. Each value is checked by the exact JSON of the
 * parsed cell (tests/common/exact_json.h, the format LanceDB's read-back is
 * compared in), each refusal by class and message, and every refusal leaves
 * the batch as it was (its rows printed before and after).
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

#include "exact_json.h"
#include "lance/schema_text.h"
#include "net/jsonrow.h"

#define SCHEMA                                                                                    \
  "id:int64 not null, i8:int8, u16:uint16, i64:int64, f16:float16, ts:timestamp<ms>, "          \
  "tsn:timestamp<ns, UTC>, d:date32, d64:date64, t:time64<us>, t32:time32<s>, "                 \
  "dec:decimal128<10,2>, ls:large_string, lb:large_binary, fsb:fixed_size_binary<3>, "          \
  "v16:fixed_size_list<float16,2>, vi8:fixed_size_list<int8,3>, l:list<int32>, "                \
  "ll:large_list<string not null>, st:struct<a:int32, b:struct<c:string, d:list<int64>>, "      \
  "e:bool not null>, j:string"

typedef struct fx {
  mw_schema_t s;
  mw_jsonrow_parser_t p;
  mw_batch_t b;
  mw_jsonrow_error_t e;
} fx_t;

static fx_t *fx_new(bool as_text) {
  fx_t *f = calloc(1, sizeof *f);
  mw_err_t err = {0};
  assert_non_null(f);
  if (mw_schema_text_parse(SCHEMA, &f->s, &err) != 0) fail_msg("%s", err.msg);
  assert_true(mw_schema_pk_text_apply(&f->s, "id", &err) >= 0);
  assert_true(mw_schema_tombstone_append(&f->s) > 0);
  mw_jsonrow_opts_t o = {.objects_as_text = as_text};
  assert_int_equal(mw_jsonrow_init(&f->p, &f->s, &o), 0);
  assert_int_equal(mw_batch_init(&f->b, &f->s), 0);
  return f;
}

static void fx_free(fx_t *f) {
  mw_batch_free(&f->b);
  mw_jsonrow_free(&f->p);
  mw_schema_free(&f->s);
  free(f);
}

/* Every row, as exact JSON lines. */
static char *dump(const fx_t *f) {
  mw_buf_t out = MW_BUF_INIT;
  for (int64_t r = 0; r < f->b.n_rows; r++) {
    assert_int_equal(tu_exact_row(&f->b, f->s.n_fields, r, &out), 0);
    mw_buf_put_u8(&out, '\n');
  }
  mw_buf_put_u8(&out, 0);
  return (char *)out.data;
}

/* {"id":N, <member>} parses, and field `name` of the new row prints `want`. */
static void cell_is(fx_t *f, const char *member, const char *name, const char *want) {
  char line[1024];
  snprintf(line, sizeof line, "{\"id\":%lld, %s}", (long long)f->b.n_rows, member);
  int rc = mw_jsonrow_parse(&f->p, line, strlen(line), false, &f->b, &f->e);
  if (rc != 0) fail_msg("%s -> %s: %s", line, mw_jsonrow_class_name(f->e.cls), f->e.msg);
  assert_int_equal(mw_batch_validate(&f->b), 0);
  int fi = mw_schema_find(&f->s, name);
  assert_true(fi >= 0);
  mw_buf_t out = MW_BUF_INIT;
  if (tu_exact_cell(&f->s.fields[fi], &f->b.cols[fi], f->b.n_rows - 1, &out) != 0)
    fail_msg("%s: cannot print field %s", line, name);
  if (out.len != strlen(want) || memcmp(out.data, want, out.len) != 0)
    fail_msg("%s: %s = %.*s, want %s", line, name, (int)out.len, (const char *)out.data, want);
  mw_buf_free(&out);
}

/* {"id":N, <member>} is refused with class cls and a message containing
 * want, and the batch's rows are unchanged. */
static void refused(fx_t *f, const char *member, mw_jsonrow_class_t cls, const char *want) {
  char line[1024];
  snprintf(line, sizeof line, "{\"id\":%lld, %s}", (long long)f->b.n_rows, member);
  char *before = dump(f);
  int rc = mw_jsonrow_parse(&f->p, line, strlen(line), false, &f->b, &f->e);
  if (rc != -EBADMSG || f->e.cls != cls || strstr(f->e.msg, want) == NULL)
    fail_msg("%s: rc %d class %s msg '%s', wanted %s '%s'", line, rc, mw_jsonrow_class_name(f->e.cls),
             f->e.msg, mw_jsonrow_class_name(cls), want);
  if (mw_batch_validate(&f->b) != 0) fail_msg("%s: the batch is left invalid", line);
  char *after = dump(f);
  assert_string_equal(before, after);
  free(before);
  free(after);
}

#define T MW_JSONROW_E_TYPE

static void test_integers(void **state) {
  (void)state;
  fx_t *f = fx_new(false);
  cell_is(f, "\"i8\":127", "i8", "127");
  cell_is(f, "\"i8\":-128", "i8", "-128");
  cell_is(f, "\"i8\":\"-12\"", "i8", "-12");
  refused(f, "\"i8\":128", T, "field \"i8\": 128 is out of range for int8");
  refused(f, "\"i8\":-129", T, "out of range for int8");
  cell_is(f, "\"u16\":65535", "u16", "65535");
  refused(f, "\"u16\":-1", T, "out of range for uint16");
  refused(f, "\"u16\":65536", T, "out of range for uint16");
  /* 64-bit integers from decimal strings (JavaScript's BigInt) */
  cell_is(f, "\"i64\":\"-9223372036854775808\"", "i64", "\"-9223372036854775808\"");
  cell_is(f, "\"i64\":9223372036854775807", "i64", "\"9223372036854775807\"");
  refused(f, "\"i64\":\"9223372036854775808\"", T, "out of range for int64");
  refused(f, "\"i64\":\"1.5\"", T, "expected an integer (int64), got the string \"1.5\"");
  refused(f, "\"i64\":\" 1\"", T, "got the string \" 1\"");
  fx_free(f);
}

static void test_float16(void **state) {
  (void)state;
  fx_t *f = fx_new(false);
  cell_is(f, "\"f16\":1.5", "f16", "1.5");
  cell_is(f, "\"f16\":-65504", "f16", "-65504");
  cell_is(f, "\"f16\":0.1", "f16", "0.0999755859375");           /* nearest binary16 */
  cell_is(f, "\"f16\":2049", "f16", "2048");                      /* tie -> even */
  cell_is(f, "\"f16\":2051", "f16", "2052");                      /* tie -> even */
  cell_is(f, "\"f16\":65519", "f16", "65504");                    /* below the rounding edge */
  cell_is(f, "\"f16\":1e-9", "f16", "0");                         /* underflow */
  cell_is(f, "\"v16\":[0.5, -3]", "v16", "[0.5,-3]");
  refused(f, "\"f16\":65520", T, "field \"f16\": 65520 is out of range for float16");
  refused(f, "\"v16\":[1, 1e6]", T, "field \"v16\": 1e6 is out of range");
  refused(f, "\"v16\":[1]", T, "field \"v16\": expected 2 numbers (fixed_size_list<float16, 2>), got 1");
  cell_is(f, "\"vi8\":[1,-128,127]", "vi8", "[1,-128,127]");
  refused(f, "\"vi8\":[1,2,128]", T, "128 is out of range");
  refused(f, "\"vi8\":[1,2,3.5]", T, "expected an integer");
  fx_free(f);
}

static void test_timestamps(void **state) {
  (void)state;
  fx_t *f = fx_new(false);
  cell_is(f, "\"ts\":\"2024-05-01T12:00:00.5Z\"", "ts", "\"1714564800500\"");
  cell_is(f, "\"ts\":\"2024-05-01t12:00:00.500z\"", "ts", "\"1714564800500\"");
  cell_is(f, "\"ts\":\"2024-05-01 12:00:00.5\"", "ts", "\"1714564800500\""); /* no offset: UTC */
  cell_is(f, "\"ts\":\"2024-05-01T14:00:00.5+02:00\"", "ts", "\"1714564800500\"");
  cell_is(f, "\"ts\":\"2024-05-01T04:30:00.5-07:30\"", "ts", "\"1714564800500\"");
  cell_is(f, "\"ts\":\"1969-12-31T23:59:59.999Z\"", "ts", "\"-1\"");
  cell_is(f, "\"ts\":\"0001-01-01T00:00:00Z\"", "ts", "\"-62135596800000\"");
  cell_is(f, "\"ts\":1714564800500", "ts", "\"1714564800500\"");       /* integer: the unit */
  cell_is(f, "\"ts\":\"1714564800500\"", "ts", "\"1714564800500\"");   /* decimal string */
  cell_is(f, "\"tsn\":\"2024-05-01T12:00:00.123456789Z\"", "tsn", "\"1714564800123456789\"");
  cell_is(f, "\"tsn\":\"2262-04-11T23:47:16.854775807Z\"", "tsn", "\"9223372036854775807\"");
  refused(f, "\"tsn\":\"2262-04-11T23:47:16.854775808Z\"", T, "is out of range for the column's unit");
  refused(f, "\"ts\":\"2024-05-01T12:00:00.0005Z\"", T, "has a fraction finer than the column's unit");
  refused(f, "\"ts\":\"2024-02-30T00:00:00Z\"", T, "not an RFC 3339 timestamp");
  refused(f, "\"ts\":\"2024-05-01T24:00:00Z\"", T, "bad time of day");
  refused(f, "\"ts\":\"2024-05-01T12:00:60Z\"", T, "bad time of day");
  refused(f, "\"ts\":\"2024-05-01T12:00:00+2:00\"", T, "bad offset");
  refused(f, "\"ts\":\"2024-05-01T12:00:00Z \"", T, "trailing characters");
  refused(f, "\"ts\":\"2024-05-01\"", T, "not an RFC 3339 timestamp");
  refused(f, "\"ts\":1.5", T, "expected an integer");
  refused(f, "\"ts\":true", T, "field \"ts\": expected an RFC 3339 string or an integer (timestamp<ms>), got a boolean");
  fx_free(f);
}

static void test_dates_and_times(void **state) {
  (void)state;
  fx_t *f = fx_new(false);
  cell_is(f, "\"d\":\"2024-02-29\"", "d", "\"19782\"");
  cell_is(f, "\"d\":\"1970-01-01\"", "d", "\"0\"");
  cell_is(f, "\"d\":\"1900-03-01\"", "d", "\"-25508\"");
  cell_is(f, "\"d\":19782", "d", "\"19782\"");
  cell_is(f, "\"d64\":\"2024-02-29\"", "d64", "\"1709164800000\"");
  cell_is(f, "\"d64\":1709164800000", "d64", "\"1709164800000\"");
  refused(f, "\"d\":\"2023-02-29\"", T, "is not a date (YYYY-MM-DD)");
  refused(f, "\"d\":\"1900-02-29\"", T, "is not a date");
  refused(f, "\"d\":\"2024-1-01\"", T, "is not a date");
  refused(f, "\"d\":2147483648", T, "out of range for date32");
  cell_is(f, "\"t\":\"12:30:05.25\"", "t", "\"45005250000\"");
  cell_is(f, "\"t\":\"23:59:59.999999\"", "t", "\"86399999999\"");
  cell_is(f, "\"t\":45005250000", "t", "\"45005250000\"");
  refused(f, "\"t\":86400000000", T, "out of range for time64<us>");
  refused(f, "\"t\":-1", T, "out of range for time64<us>");
  refused(f, "\"t\":\"24:00:00\"", T, "is not a time of day");
  refused(f, "\"t\":\"12:30:05.1234567\"", T, "has a fraction finer than the column's unit");
  cell_is(f, "\"t32\":\"00:00:01\"", "t32", "\"1\"");
  refused(f, "\"t32\":\"00:00:01.5\"", T, "finer than the column's unit");
  fx_free(f);
}

static void test_decimals(void **state) {
  (void)state;
  fx_t *f = fx_new(false);
  cell_is(f, "\"dec\":12.34", "dec", "\"1234\"");
  cell_is(f, "\"dec\":\"-0.5\"", "dec", "\"-50\"");
  cell_is(f, "\"dec\":1e2", "dec", "\"10000\"");
  cell_is(f, "\"dec\":1.20E-1", "dec", "\"12\"");
  cell_is(f, "\"dec\":\"12345678.90\"", "dec", "\"1234567890\"");
  cell_is(f, "\"dec\":\"-99999999.99\"", "dec", "\"-9999999999\"");
  cell_is(f, "\"dec\":0", "dec", "\"0\"");
  cell_is(f, "\"dec\":\"0012.100\"", "dec", "\"1210\"");
  refused(f, "\"dec\":12.345", T, "has more fraction digits than the column's scale");
  refused(f, "\"dec\":123456789.01", T, "does not fit the column's precision");
  refused(f, "\"dec\":\"1.2.3\"", T, "is not a decimal number");
  refused(f, "\"dec\":\"abc\"", T, "is not a decimal number");
  refused(f, "\"dec\":[1]", T, "expected a number or a decimal string (decimal128<10, 2>), got an array");
  fx_free(f);
}

static void test_binaries(void **state) {
  (void)state;
  fx_t *f = fx_new(false);
  cell_is(f, "\"ls\":\"h\\u00e9llo\"", "ls", "\"h\xc3\xa9llo\"");
  cell_is(f, "\"lb\":\"AAEC\"", "lb", "[0,1,2]");
  cell_is(f, "\"lb\":\"\"", "lb", "[]");
  cell_is(f, "\"fsb\":\"AQID\"", "fsb", "[1,2,3]");
  refused(f, "\"fsb\":\"AQ==\"", T, "field \"fsb\": 1 bytes, the column holds 3 (fixed_size_binary<3>)");
  refused(f, "\"lb\":\"AAE\"", T, "not a multiple of 4");
  refused(f, "\"fsb\":123", T, "expected a base64 string (fixed_size_binary<3>), got a number");
  fx_free(f);
}

static void test_lists_and_structs(void **state) {
  (void)state;
  fx_t *f = fx_new(false);
  cell_is(f, "\"l\":[1,2,null]", "l", "[1,2,null]");
  cell_is(f, "\"l\":[]", "l", "[]");
  cell_is(f, "\"l\":null", "l", "null");
  cell_is(f, "\"i8\":1", "l", "null"); /* absent: null */
  cell_is(f, "\"ll\":[\"a\", \"\"]", "ll", "[\"a\",\"\"]");
  refused(f, "\"l\":[1.5]", T, "field \"l[0]\": expected an integer (int32), got 1.5");
  refused(f, "\"l\":[1, \"x\"]", T, "field \"l[1]\": expected an integer (int32), got the string \"x\"");
  refused(f, "\"ll\":[\"a\", null]", T, "field \"ll[1]\": expected a string (utf8 not null), got null");
  refused(f, "\"l\":[0,1,2,3,4,5,6,7,8,9,10,\"x\"]", T, "field \"l[11]\": expected an integer (int32)");
  refused(f, "\"l\":{}", T, "field \"l\": expected an array (list<int32>), got an object");
  refused(f, "\"l\":[1,2", MW_JSONROW_E_PARSE, "expected ',' or ']'");
  cell_is(f, "\"st\":{\"a\":1,\"b\":{\"c\":\"x\",\"d\":[1,\"2\"]},\"e\":true}", "st",
          "{\"a\":1,\"b\":{\"c\":\"x\",\"d\":[\"1\",\"2\"]},\"e\":true}");
  cell_is(f, "\"st\":{\"e\":false}", "st", "{\"a\":null,\"b\":null,\"e\":false}");
  cell_is(f, "\"st\":{\"e\":true,\"b\":{}}", "st", "{\"a\":null,\"b\":{\"c\":null,\"d\":null},\"e\":true}");
  cell_is(f, "\"st\":{\"b\":{\"d\":[]},\"e\":true}", "st", "{\"a\":null,\"b\":{\"c\":null,\"d\":[]},\"e\":true}");
  cell_is(f, "\"st\":null", "st", "null");
  refused(f, "\"st\":{\"a\":1}", MW_JSONROW_E_SCHEMA, "missing field \"st.e\" (bool not null)");
  refused(f, "\"st\":{\"e\":true,\"z\":1}", MW_JSONROW_E_SCHEMA, "field \"st\": unknown member \"z\"");
  refused(f, "\"st\":{\"e\":true,\"a\":1,\"a\":2}", MW_JSONROW_E_PARSE, "duplicate key \"a\"");
  refused(f, "\"st\":{\"e\":true,\"b\":{\"d\":[1,\"x\"]}}", T, "field \"st.b.d[1]\": expected an integer (int64)");
  refused(f, "\"st\":{\"e\":null}", T, "field \"st.e\": expected true or false (bool not null), got null");
  refused(f, "\"st\":[1]", T, "expected an object");
  /* a refusal deep inside leaves every child column as it was (dump above);
   * the rows before it are intact */
  cell_is(f, "\"st\":{\"a\":-7,\"e\":false}", "st", "{\"a\":-7,\"b\":null,\"e\":false}");
  /* objects and arrays into a string column: refused unless opted in */
  refused(f, "\"j\":{\"x\":1}", T, "field \"j\": expected a string (utf8), got an object");
  fx_free(f);
  f = fx_new(true);
  cell_is(f, "\"j\":{\"x\": [1, 2], \"y\": \"\\u00e9\"}", "j", "\"{\\\"x\\\": [1, 2], \\\"y\\\": \\\"\\\\u00e9\\\"}\"");
  cell_is(f, "\"j\":[true,null]", "j", "\"[true,null]\"");
  cell_is(f, "\"j\":\"plain\"", "j", "\"plain\"");
  refused(f, "\"j\":{\"x\":}", MW_JSONROW_E_PARSE, "expected a value");
  cell_is(f, "\"ls\":{\"x\":1}", "ls", "\"{\\\"x\\\":1}\"");
  /* invalid UTF-8 is refused wherever the string goes: large_string, list
   * items, struct members, an object kept as text */
  refused(f, "\"ls\":\"a\xed\xa0\x80\"", MW_JSONROW_E_PARSE, "invalid UTF-8");
  refused(f, "\"ll\":[\"a\", \"\xff\"]", MW_JSONROW_E_PARSE, "invalid UTF-8");
  refused(f, "\"st\":{\"e\":true,\"b\":{\"c\":\"\xc3(\"}}", MW_JSONROW_E_PARSE, "invalid UTF-8");
  refused(f, "\"j\":{\"x\":\"\xc0\x80\"}", MW_JSONROW_E_PARSE, "invalid UTF-8");
  fx_free(f);
}

/* Nesting depth counts list and struct levels. */
static void test_depth(void **state) {
  (void)state;
  mw_schema_t s;
  mw_err_t err = {0};
  assert_int_equal(mw_schema_text_parse("id:int64 not null, l:list<list<list<int32>>>", &s, &err), 0);
  mw_jsonrow_opts_t o = {.max_depth = 3};
  mw_jsonrow_parser_t p;
  mw_batch_t b;
  mw_jsonrow_error_t e;
  assert_int_equal(mw_jsonrow_init(&p, &s, &o), 0);
  assert_int_equal(mw_batch_init(&b, &s), 0);
  const char *deep = "{\"id\":1,\"l\":[[[1]]]}", *fine = "{\"id\":1,\"l\":[[]]}";
  assert_int_equal(mw_jsonrow_parse(&p, deep, strlen(deep), false, &b, &e), -EBADMSG);
  assert_non_null(strstr(e.msg, "nesting deeper than 3"));
  assert_int_equal(mw_jsonrow_parse(&p, fine, strlen(fine), false, &b, &e), 0);
  assert_int_equal(b.n_rows, 1);
  assert_int_equal(mw_batch_validate(&b), 0);
  mw_batch_free(&b);
  mw_jsonrow_free(&p);
  mw_schema_free(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_integers),   cmocka_unit_test(test_float16),
      cmocka_unit_test(test_timestamps), cmocka_unit_test(test_dates_and_times),
      cmocka_unit_test(test_decimals),   cmocka_unit_test(test_binaries),
      cmocka_unit_test(test_lists_and_structs), cmocka_unit_test(test_depth),
  };
  return tu_run_group(tests, NULL, NULL);
}
