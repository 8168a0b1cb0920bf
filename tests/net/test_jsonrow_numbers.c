/*
 * test_jsonrow_numbers.c — the NDJSON number scanner and its conversions
 * (src/net/jsonrow.c scan_number, num_to_double/num_to_float/num_to_int),
 * differentially: every generated number goes through a row into float32,
 * float64, fixed_size_list<float32>, fixed_size_list<float64> (and, for
 * integers, int64/uint64) cells, and each cell must be bit for bit what
 * strtof/strtod (strtoll/strtoull) give for the same text, or the row is
 * refused with the same class and reason when they overflow. The numbers:
 * random mantissas of 1-25 digits with fractions and exponents, the fast
 * paths' edges (2^24, 2^53 +-1, 10^22, 10^23, float midpoints), denormals,
 * -0, 0e5, huge exponents, 20+ digit mantissas; the grammar's refusals
 * (leading zeros, "1.", ".5", "1e", "+1"). Numbers are placed mid-line and at
 * the end of an exactly sized line (the 8-byte digit loads must never read
 * past it: ASan checks). 128-item float32 vectors, which take a fast path of
 * their own, against strtof and against the general path's refusals.
 */
#include <errno.h>
#include <inttypes.h>
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

#include "lance/schema_text.h"
#include "net/jsonrow.h"

#define SCHEMA                                                                                    \
  "id:int64 not null, f:float32, d:float64, v:fixed_size_list<float32,3>, "                     \
  "w:fixed_size_list<float64,3>, i:int64, u:uint64"

typedef struct fx {
  mw_schema_t s;
  mw_jsonrow_parser_t p;
  mw_batch_t b;
  mw_jsonrow_error_t e;
  int fi_f, fi_d, fi_v, fi_w, fi_i, fi_u;
  uint64_t rng;
  long checked;
} fx_t;

static fx_t *fx_new(void) {
  fx_t *f = calloc(1, sizeof *f);
  mw_err_t err = {0};
  assert_non_null(f);
  if (mw_schema_text_parse(SCHEMA, &f->s, &err) != 0) fail_msg("%s", err.msg);
  assert_true(mw_schema_pk_text_apply(&f->s, "id", &err) >= 0);
  assert_true(mw_schema_tombstone_append(&f->s) > 0);
  assert_int_equal(mw_jsonrow_init(&f->p, &f->s, NULL), 0);
  assert_int_equal(mw_batch_init(&f->b, &f->s), 0);
  f->fi_f = mw_schema_find(&f->s, "f");
  f->fi_d = mw_schema_find(&f->s, "d");
  f->fi_v = mw_schema_find(&f->s, "v");
  f->fi_w = mw_schema_find(&f->s, "w");
  f->fi_i = mw_schema_find(&f->s, "i");
  f->fi_u = mw_schema_find(&f->s, "u");
  f->rng = 0x9E3779B97F4A7C15u;
  return f;
}

static void fx_free(fx_t *f) {
  mw_batch_free(&f->b);
  mw_jsonrow_free(&f->p);
  mw_schema_free(&f->s);
  free(f);
}

static uint64_t rnd(fx_t *f) { /* splitmix64 */
  uint64_t z = (f->rng += 0x9E3779B97F4A7C15u);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
  return z ^ (z >> 31);
}

/* Parse `line` from an exactly sized copy (no NUL after it). */
static int parse(fx_t *f, const char *line) {
  size_t n = strlen(line);
  char *copy = malloc(n ? n : 1);
  assert_non_null(copy);
  memcpy(copy, line, n);
  if (f->b.n_rows >= 4096) mw_batch_reset(&f->b);
  int rc = mw_jsonrow_parse(&f->p, copy, n, false, &f->b, &f->e);
  free(copy);
  return rc;
}

static uint32_t bits_f(float x) {
  uint32_t b;
  memcpy(&b, &x, 4);
  return b;
}
static uint64_t bits_d(double x) {
  uint64_t b;
  memcpy(&b, &x, 8);
  return b;
}

static float cell_f(const mw_column_t *c, int64_t i) {
  float x;
  memcpy(&x, c->values.data + 4 * i, 4);
  return x;
}
static double cell_d(const mw_column_t *c, int64_t i) {
  double x;
  memcpy(&x, c->values.data + 8 * i, 8);
  return x;
}

/* `t` (a JSON number) into every float cell, mid-line and last on the line:
 * bits equal strtof/strtod's, or refused as out of range where they give inf. */
static void check_float(fx_t *f, const char *t) {
  char line[1024];
  errno = 0;
  float wf = strtof(t, NULL);
  double wd = strtod(t, NULL);
  bool f_inf = isinf(wf), d_inf = isinf(wd);
  /* mid-line: the vectors and scalars with more text after them */
  snprintf(line, sizeof line, "{\"id\":1,\"v\":[%s,%s,%s],\"f\":%s,\"i\":null}", t, t, t, t);
  int rc = parse(f, line);
  if (f_inf) {
    if (rc == 0) fail_msg("%s: float32 inf, but the row was taken", t);
    if (f->e.cls != MW_JSONROW_E_TYPE || strstr(f->e.msg, "is out of range for") == NULL)
      fail_msg("%s: %s: %s", t, mw_jsonrow_class_name(f->e.cls), f->e.msg);
  } else {
    if (rc != 0) fail_msg("%s: %s: %s", t, mw_jsonrow_class_name(f->e.cls), f->e.msg);
    int64_t r = f->b.n_rows - 1;
    for (int k = 0; k < 3; k++) {
      float got = cell_f(&f->b.cols[f->fi_v], 3 * r + k);
      if (bits_f(got) != bits_f(wf))
        fail_msg("%s: float32 item %08" PRIx32 " (%.9g), strtof %08" PRIx32 " (%.9g)", t,
                 bits_f(got), got, bits_f(wf), wf);
    }
    float got = cell_f(&f->b.cols[f->fi_f], r);
    if (bits_f(got) != bits_f(wf))
      fail_msg("%s: float32 %08" PRIx32 ", strtof %08" PRIx32, t, bits_f(got), bits_f(wf));
  }
  snprintf(line, sizeof line, "{\"id\":2,\"w\":[%s,%s,%s],\"d\":%s}", t, t, t, t);
  rc = parse(f, line);
  if (d_inf) {
    if (rc == 0) fail_msg("%s: float64 inf, but the row was taken", t);
    if (f->e.cls != MW_JSONROW_E_TYPE || strstr(f->e.msg, "is out of range for") == NULL)
      fail_msg("%s: %s: %s", t, mw_jsonrow_class_name(f->e.cls), f->e.msg);
  } else {
    if (rc != 0) fail_msg("%s: %s: %s", t, mw_jsonrow_class_name(f->e.cls), f->e.msg);
    int64_t r = f->b.n_rows - 1;
    for (int k = 0; k < 3; k++) {
      double got = cell_d(&f->b.cols[f->fi_w], 3 * r + k);
      if (bits_d(got) != bits_d(wd))
        fail_msg("%s: float64 item %016" PRIx64 " (%.17g), strtod %016" PRIx64 " (%.17g)", t,
                 bits_d(got), got, bits_d(wd), wd);
    }
    double got = cell_d(&f->b.cols[f->fi_d], r);
    if (bits_d(got) != bits_d(wd))
      fail_msg("%s: float64 %016" PRIx64 ", strtod %016" PRIx64, t, bits_d(got), bits_d(wd));
  }
  f->checked++;
}

/* An integer text into int64 and uint64 cells, against strtoll/strtoull. */
static void check_int(fx_t *f, const char *t) {
  char line[256];
  errno = 0;
  long long wi = strtoll(t, NULL, 10);
  bool i_bad = errno == ERANGE;
  errno = 0;
  unsigned long long wu = strtoull(t, NULL, 10);
  bool u_bad = errno == ERANGE || (t[0] == '-' && wu != 0); /* strtoull negates */
  snprintf(line, sizeof line, "{\"id\":3,\"i\":%s}", t);
  int rc = parse(f, line);
  if (i_bad) {
    if (rc == 0 || strstr(f->e.msg, "is out of range for") == NULL)
      fail_msg("%s: int64 should be out of range: rc %d %s", t, rc, f->e.msg);
  } else {
    if (rc != 0) fail_msg("%s: %s", t, f->e.msg);
    int64_t got;
    memcpy(&got, f->b.cols[f->fi_i].values.data + 8 * (f->b.n_rows - 1), 8);
    if (got != wi) fail_msg("%s: int64 %" PRId64 ", strtoll %lld", t, got, wi);
  }
  snprintf(line, sizeof line, "{\"id\":4,\"u\":%s,\"i\":null}", t);
  rc = parse(f, line);
  if (u_bad) {
    if (rc == 0 || strstr(f->e.msg, "is out of range for") == NULL)
      fail_msg("%s: uint64 should be out of range: rc %d %s", t, rc, f->e.msg);
  } else {
    if (rc != 0) fail_msg("%s: %s", t, f->e.msg);
    uint64_t got;
    memcpy(&got, f->b.cols[f->fi_u].values.data + 8 * (f->b.n_rows - 1), 8);
    if (got != wu) fail_msg("%s: uint64 %" PRIu64 ", strtoull %llu", t, got, wu);
  }
}

static void test_edges(void **state) {
  (void)state;
  fx_t *f = fx_new();
  static const char *edges[] = {
      "0", "-0", "0.0", "-0.0", "0e5", "-0e5", "0E-5", "0.000", "0e400", "-0e-400",
      "1", "-1", "0.5", "0.1", "0.2", "0.3", "0.1234", "0.9999", "123.4", "3.14159",
      "16777216", "16777217", "16777218", "16777219", "33554431", "33554433",
      "9007199254740991", "9007199254740992", "9007199254740993", "9007199254740994",
      "9007199254740995", "-9007199254740993", "9007199254740993e-5", "9007199254740993e5",
      "1e22", "1e23", "-1e22", "1e-22", "1e-23", "9007199254740992e22", "9007199254740993e22",
      "9007199254740992e-22", "4.35e22", "1e10", "1e11", "1e-10", "1e-11", "16777217e10",
      "8388609e-10", "1.00000005960464477539062", "1.0000000596046448",
      "1.00000017881393432617188", "3.4028235e38", "3.4028236e38", "3.40282356779733661637539e38",
      "3.4028235677973366e38", "3.40282357e38", "1e38", "1e39", "-1e39", "1.7976931348623157e308",
      "1.7976931348623158e308", "1.7976931348623159e308", "1e308", "1e309", "-1e309",
      "2.2250738585072014e-308", "2.2250738585072011e-308", "4.9406564584124654e-324",
      "5e-324", "2.4703282292062327e-324", "2.4703282292062328e-324", "1e-400",
      "1.17549435e-38", "1.17549421e-38", "1.4e-45", "1e-45", "7e-46", "7.006492321624085e-46",
      "1.401298464324817e-45", "1e-46", "1e-50", "1e1000000", "1e-1000000",
      "1e99999999999999999999", "1e-99999999999999999999", "123456789012345678901234567890",
      "0.123456789012345678901234567890", "12345678901234567890", "18446744073709551615",
      "18446744073709551616", "184467440737095516150", "99999999999999999999.5",
      "1.00000000000000000000000001", "0.00000000000000000000000001", "10000000000000000000000",
      "100000000000000000000000", "0.30000000000000004", "2.5e-1", "1E+2", "1e+0", "1e-0",
      "6.103515625e-05", "0.100000001490116119384765625", "0.10000000149011612",
      "0.1000000014901161193847656", "0.10000000149011613", "7.0064923216240854e-46",
      "8.589973e9", "8.589974e9", "33554435e-1", "1.5e-45", "2.1019476964872256e-45"};
  for (size_t i = 0; i < sizeof edges / sizeof *edges; i++) check_float(f, edges[i]);
  static const char *ints[] = {"0", "-0", "1", "-1", "9223372036854775807", "9223372036854775808",
                               "-9223372036854775808", "-9223372036854775809",
                               "18446744073709551615", "18446744073709551616",
                               "184467440737095516150", "1844674407370955161",
                               "99999999999999999999", "10000000000000000000", "9999999999999999999",
                               "-18446744073709551615", "12345678", "123456789",
                               "1234567812345678"};
  for (size_t i = 0; i < sizeof ints / sizeof *ints; i++) check_int(f, ints[i]);
  fx_free(f);
}

/* Refused by the JSON grammar, with the messages the parser always gave. */
static void test_grammar(void **state) {
  (void)state;
  fx_t *f = fx_new();
  static const struct {
    const char *t, *why;
  } bad[] = {{"01", "at byte 12: leading zero in a number"},
             {"-01", "at byte 12: leading zero in a number"},
             {"00.5", "at byte 12: leading zero in a number"},
             {"0123456789012", "at byte 12: leading zero in a number"},
             {"1.", "at byte 12: malformed number"},
             {"1.e5", "at byte 12: malformed number"},
             {"-", "at byte 12: malformed number"},
             {"-a", "at byte 12: malformed number"},
             {"1e", "at byte 12: malformed number"},
             {"1e+", "at byte 12: malformed number"},
             {"1E-x", "at byte 12: malformed number"},
             {"12345678901234567890.", "at byte 12: malformed number"},
             {".5", "at byte 12: expected a value, got '.'"},
             {"+1", "at byte 12: expected a value, got '+'"}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    for (int where = 0; where < 2; where++) {
      char line[256];
      if (where == 0) snprintf(line, sizeof line, "{\"id\":1,\"d\":%s}", bad[i].t);
      else snprintf(line, sizeof line, "{\"id\":1,\"d\":%s,\"f\":1.5,\"i\":null,\"u\":null}", bad[i].t);
      assert_int_not_equal(parse(f, line), 0);
      assert_int_equal(f->e.cls, MW_JSONROW_E_PARSE);
      if (strstr(f->e.msg, bad[i].why) == NULL)
        fail_msg("%s: got \"%s\", want \"%s\"", line, f->e.msg, bad[i].why);
    }
  }
  fx_free(f);
}

/* Random numbers: 1-25 digit mantissas, fractions of 0-25 digits, exponents
 * small (the fast paths) or large (the fallback), and integers. */
static void test_random(void **state) {
  (void)state;
  fx_t *f = fx_new();
  char t[128];
  for (int i = 0; i < 200000; i++) {
    uint64_t r = rnd(f);
    size_t n = 0;
    if (r & 1) t[n++] = '-';
    int idig = 1 + (int)(rnd(f) % ((r >> 1) & 1 ? 25 : 9));
    if ((r >> 2) % 4 == 0) idig = 1, t[n++] = '0';
    else
      for (int k = 0; k < idig; k++)
        t[n++] = (char)('0' + (k == 0 ? 1 + rnd(f) % 9 : rnd(f) % 10));
    bool integer = true;
    if ((r >> 4) % 4 != 0) {
      int fdig = 1 + (int)(rnd(f) % ((r >> 6) & 1 ? 25 : 8));
      t[n++] = '.';
      for (int k = 0; k < fdig; k++) t[n++] = (char)('0' + rnd(f) % 10);
      integer = false;
    }
    if ((r >> 8) % 3 == 0) {
      t[n++] = (r >> 10) & 1 ? 'e' : 'E';
      if ((r >> 11) & 1) t[n++] = (r >> 12) & 1 ? '-' : '+';
      int ex = (r >> 13) % 4 == 0 ? (int)(rnd(f) % 400) : (int)(rnd(f) % 30);
      n += (size_t)snprintf(t + n, sizeof t - n, "%d", ex);
      integer = false;
    }
    t[n] = 0;
    check_float(f, t);
    if (integer) check_int(f, t);
  }
  /* floats' own shortest texts and their neighbours: near float midpoints */
  for (int i = 0; i < 100000; i++) {
    uint32_t b = (uint32_t)rnd(f) & 0x7fffffff;
    if ((b >> 23) == 0xff) continue;
    float x;
    memcpy(&x, &b, 4);
    snprintf(t, sizeof t, "%.9g", (double)x);
    check_float(f, t);
    double mid = ((double)x + (double)nextafterf(x, INFINITY)) / 2;
    snprintf(t, sizeof t, "%.17g", mid);
    check_float(f, t);
    snprintf(t, sizeof t, "%.16g", mid);
    check_float(f, t);
  }
  print_message("# %ld numbers checked\n", f->checked);
  fx_free(f);
}

/* ------------------------------------------------- 128-item vectors
 * fixed_size_list<float32, 128> items take a fast path of their own
 * (jsonrow.c f32_fast, parsed straight into the column); float64 items take
 * the general one. So the same item text in `v` (float32) and in `w`
 * (float64, a name of the same length) must be refused with the same class,
 * byte and message (but for the type's name), and taken as strtof's bits; a
 * refused row leaves the vector column as it was. */
#define DIM 128
#define SCHEMA128 "id:int64 not null, v:fixed_size_list<float32,128>, w:fixed_size_list<float64,128>"

typedef struct fx128 {
  mw_schema_t s;
  mw_jsonrow_parser_t p;
  mw_batch_t b;
  mw_jsonrow_error_t e;
  int fi_v, fi_w;
} fx128_t;

static fx128_t *fx128_new(void) {
  fx128_t *f = calloc(1, sizeof *f);
  mw_err_t err = {0};
  assert_non_null(f);
  if (mw_schema_text_parse(SCHEMA128, &f->s, &err) != 0) fail_msg("%s", err.msg);
  assert_true(mw_schema_pk_text_apply(&f->s, "id", &err) >= 0);
  assert_int_equal(mw_jsonrow_init(&f->p, &f->s, NULL), 0);
  assert_int_equal(mw_batch_init(&f->b, &f->s), 0);
  f->fi_v = mw_schema_find(&f->s, "v");
  f->fi_w = mw_schema_find(&f->s, "w");
  return f;
}

static void fx128_free(fx128_t *f) {
  mw_batch_free(&f->b);
  mw_jsonrow_free(&f->p);
  mw_schema_free(&f->s);
  free(f);
}

/* Parse from an exactly sized copy (no NUL after it: ASan sees overreads). */
static int parse128(fx128_t *f, const char *line) {
  size_t n = strlen(line);
  char *copy = malloc(n);
  assert_non_null(copy);
  memcpy(copy, line, n);
  int rc = mw_jsonrow_parse(&f->p, copy, n, false, &f->b, &f->e);
  free(copy);
  return rc;
}

/* {"id":1,"<col>":[<items>]} with items[k] = texts[k] joined by sep. */
static void line128(char *out, size_t cap, char col, const char *const *texts, int n,
                    const char *sep, const char *open, const char *close) {
  size_t at = (size_t)snprintf(out, cap, "{\"id\":1,\"%c\":%s", col, open);
  for (int k = 0; k < n; k++)
    at += (size_t)snprintf(out + at, cap - at, "%s%s", k ? sep : "", texts[k]);
  at += (size_t)snprintf(out + at, cap - at, "%s}", close);
  assert_true(at < cap);
}

/* The float32 row refused, with nothing left behind; the message, kept. */
static const char *refusal32(fx128_t *f, const char *const *texts, int n, const char *sep,
                             const char *open, const char *close, mw_jsonrow_error_t *e32) {
  static char line[16384], msg32[MW_JSONROW_MSG_BYTES];
  int64_t rows = f->b.n_rows;
  size_t vlen = f->b.cols[f->fi_v].values.len;
  line128(line, sizeof line, 'v', texts, n, sep, open, close);
  if (parse128(f, line) == 0) fail_msg("float32 row taken: %s", line);
  *e32 = f->e;
  assert_int_equal(f->b.n_rows, rows);
  assert_int_equal(f->b.cols[f->fi_v].values.len, vlen);
  assert_int_equal(f->b.cols[f->fi_v].length, rows);
  snprintf(msg32, sizeof msg32, "%s", e32->msg);
  return msg32;
}

/* A refusal of the float32 row must be the float64 row's (the general path,
 * which the fast path leaves unchanged), type and field name aside; neither
 * row may leave anything behind. Returns the float32 message. Not for
 * numbers only float32's range refuses. */
static const char *same_refusal(fx128_t *f, const char *const *texts, int n, const char *sep,
                                const char *open, const char *close) {
  static char line[16384];
  mw_jsonrow_error_t e32;
  const char *m32 = refusal32(f, texts, n, sep, open, close, &e32);
  int64_t rows = f->b.n_rows;
  size_t wlen = f->b.cols[f->fi_w].values.len;
  line128(line, sizeof line, 'w', texts, n, sep, open, close);
  if (parse128(f, line) == 0) fail_msg("float64 row taken: %s", line);
  char want[MW_JSONROW_MSG_BYTES];
  snprintf(want, sizeof want, "%s", f->e.msg);
  for (char *t; (t = strstr(want, "float64")) != NULL;) memcpy(t, "float32", 7);
  for (char *t; (t = strstr(want, "field \"w\"")) != NULL;) t[7] = 'v'; /* the other column */
  if (e32.cls != f->e.cls || e32.offset != f->e.offset || strcmp(m32, want) != 0)
    fail_msg("float32: %s at %zu \"%s\"; float64: %s at %zu \"%s\"", mw_jsonrow_class_name(e32.cls),
             e32.offset, m32, mw_jsonrow_class_name(f->e.cls), f->e.offset, f->e.msg);
  assert_int_equal(f->b.n_rows, rows);
  assert_int_equal(f->b.cols[f->fi_w].values.len, wlen);
  return m32;
}

/* A taken float32 row: every item strtof's bits, at its index. */
static void taken_as_strtof(fx128_t *f, const char *const *texts, const char *sep) {
  static char line[16384];
  line128(line, sizeof line, 'v', texts, DIM, sep, "[", "]");
  if (parse128(f, line) != 0) fail_msg("%s: %s", mw_jsonrow_class_name(f->e.cls), f->e.msg);
  int64_t r = f->b.n_rows - 1;
  assert_int_equal(f->b.cols[f->fi_v].length, f->b.n_rows);
  assert_int_equal(f->b.cols[f->fi_v].values.len, (size_t)f->b.n_rows * DIM * 4);
  assert_int_equal(f->b.cols[f->fi_v].item_validity.len, 0);
  for (int k = 0; k < DIM; k++) {
    float want = strtof(texts[k], NULL), got = cell_f(&f->b.cols[f->fi_v], r * DIM + k);
    if (bits_f(got) != bits_f(want))
      fail_msg("item %d \"%s\": %08" PRIx32 " (%.9g), strtof %08" PRIx32 " (%.9g)", k, texts[k],
               bits_f(got), got, bits_f(want), want);
  }
}

/* Every form a number takes, in 128-item rows, separated tightly and with
 * spaces and tabs: exponents, -0, integers, integers written as floats,
 * 17-digit texts (doubles printed for float32 values), float midpoints and
 * their neighbours (the fast path leaves those to strtof), subnormals. */
static void test_vector128_values(void **state) {
  (void)state;
  fx128_t *f = fx128_new();
  static const char *forms[] = {
      "0", "-0", "0.0", "-0.0", "0e5", "-0E-5", "1", "-1", "2.0", "-3.000", "42", "1e0",
      "1E+2", "2.5e-1", "-1.5e-3", "0.1234", "0.9999", "-0.0001", "3.14159", "65504",
      "16777216", "16777217", "16777218", "16777219", "33554431", "33554433", "8388609e-10",
      "1.00000005960464477539062", "1.0000000596046448", "0.12345679104328156",
      "-0.98765432109876543", "123456789012345678", "1234567890123456789", "9223372036854775807",
      "9223372036854775808", "12345678901234567890", "1e22", "1e-22", "1e23", "1e-23",
      "3.4028235e38", "3.40282356779733661637539e38", "1.17549435e-38", "1.17549421e-38",
      "1.4e-45", "1e-46", "7.006492321624085e-46", "1e-400", "0.100000001490116119384765625",
      "0.10000000149011612", "6.103515625e-05", "0.30000000000000004", "1e10", "16777217e10",
      "00000000000000000001e-5" + 19 /* "1e-5" */, "99999999999999999999.5",
      "0.000000000000000000000000000001234"};
  const size_t nf = sizeof forms / sizeof *forms;
  const char *texts[DIM];
  static const char *seps[] = {",", ", ", " ,", "\t,\t", " , "};
  for (size_t r = 0; r < nf; r++) {
    for (int k = 0; k < DIM; k++) texts[k] = forms[(r + (size_t)k) % nf];
    taken_as_strtof(f, texts, seps[r % (sizeof seps / sizeof *seps)]);
  }
  /* spaces and tabs inside the brackets too */
  for (int k = 0; k < DIM; k++) texts[k] = forms[(size_t)k % nf];
  static char line[16384];
  line128(line, sizeof line, 'v', texts, DIM, " ,\t", "[ \t", "\t ]");
  assert_int_equal(parse128(f, line), 0);
  for (int k = 0; k < DIM; k++)
    assert_true(bits_f(cell_f(&f->b.cols[f->fi_v], (f->b.n_rows - 1) * DIM + k)) ==
                bits_f(strtof(texts[k], NULL)));
  /* random floats' shortest texts, their %.17g texts, the midpoints next to them */
  uint64_t rng = 0x243F6A8885A308D3u;
  static char bank[3 * DIM][40];
  for (int round = 0; round < 400; round++) {
    for (int k = 0; k < DIM; k++) {
      rng = rng * 6364136223846793005u + 1442695040888963407u;
      uint32_t b = (uint32_t)(rng >> 32) & 0x7fffffff;
      if ((b >> 23) == 0xff) b &= 0x7f7fffff;
      float x;
      memcpy(&x, &b, 4);
      int how = (int)((rng >> 20) % 3);
      double mid = ((double)x + (double)nextafterf(x, INFINITY)) / 2;
      if (how == 0) snprintf(bank[k], sizeof bank[k], "%s%.9g", rng & 1 ? "-" : "", (double)x);
      else if (how == 1) snprintf(bank[k], sizeof bank[k], "%.17g", (double)x);
      else snprintf(bank[k], sizeof bank[k], "%.17g", mid);
      if (isinf(strtof(bank[k], NULL))) snprintf(bank[k], sizeof bank[k], "1.5");
      texts[k] = bank[k];
    }
    taken_as_strtof(f, texts, ",");
    if (f->b.n_rows >= 512) mw_batch_reset(&f->b);
  }
  fx128_free(f);
}

/* Refusals: wrong counts, non-numbers (NaN and Infinity are not JSON), the
 * grammar's refusals and out-of-range items, at the first, a middle and the
 * last element; \r and \n where whitespace may go; each the general path's
 * class, byte and message, and the column as it was. */
static void test_vector128_refusals(void **state) {
  (void)state;
  fx128_t *f = fx128_new();
  const char *texts[DIM + 2];
  for (int k = 0; k < DIM + 2; k++) texts[k] = k % 2 ? "0.5" : "-1.25e-2";
  /* a good row first, so a refusal has rows to leave alone */
  taken_as_strtof(f, texts, ",");
  const char *m = same_refusal(f, texts, DIM - 1, ",", "[", "]");
  assert_string_equal(m, "field \"v\": expected 128 numbers (fixed_size_list<float32, 128>), got 127");
  assert_int_equal(f->e.offset, 12); /* the '[' */
  m = same_refusal(f, texts, DIM + 1, ",", "[", "]");
  assert_non_null(strstr(m, "got 129"));
  m = same_refusal(f, texts, 0, ",", "[", "]");
  assert_non_null(strstr(m, "got 0"));
  static const struct {
    const char *item, *why;
  } bad[] = {{"\"1.5\"", "expected a number (float32), got a string"},
             {"null", "expected a number (float32), got null"},
             {"true", "expected a number (float32), got a boolean"},
             {"false", "expected a number (float32), got a boolean"},
             {"[1]", "expected a number (float32), got an array"},
             {"{}", "expected a number (float32), got an object"},
             {"NaN", "expected a value, got 'N'"},
             {"nan", "expected a number (float32), got null"}, /* judged by its first byte, as before */
             {"Infinity", "expected a value, got 'I'"},
             {"-Infinity", "malformed number"},
             {"inf", "expected a value, got 'i'"},
             {"1e39", "is out of range for"},
             {"-3.5e38", "is out of range for"},
             {"1e400", "is out of range for"},
             {"123456789012345678901234567890e20", "is out of range for"},
             {"01", "leading zero in a number"},
             {"-00.5", "leading zero in a number"},
             {"1.", "malformed number"},
             {"1.e5", "malformed number"},
             {"-", "malformed number"},
             {"1e", "malformed number"},
             {"1e+", "malformed number"},
             {".5", "expected a value, got '.'"},
             {"+1", "expected a value, got '+'"},
             {"0x10", "expected ',' or ']'"},
             {"1.5.5", "expected ',' or ']'"},
             {"1 2", "expected ',' or ']'"},
             {"", "expected a value"}};
  const char *row[DIM];
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    for (int where = 0; where < 3; where++) {
      int k = where == 0 ? 0 : where == 1 ? 64 : DIM - 1;
      for (int j = 0; j < DIM; j++) row[j] = j == k ? bad[i].item : texts[j];
      mw_jsonrow_error_t e32;
      m = strstr(bad[i].why, "out of range") ? refusal32(f, row, DIM, ",", "[", "]", &e32)
                                             : same_refusal(f, row, DIM, ",", "[", "]");
      if (strstr(m, bad[i].why) == NULL) fail_msg("item %d \"%s\": \"%s\"", k, bad[i].item, m);
      if (bad[i].why[0] == 'e' && strncmp(bad[i].why, "expected a number", 17) == 0) {
        char el[32];
        snprintf(el, sizeof el, "element %d: ", k);
        if (strstr(m, el) == NULL || strncmp(m, "field \"v\": ", 11) != 0)
          fail_msg("item %d \"%s\": \"%s\"", k, bad[i].item, m);
      }
    }
  }
  /* only space and tab are whitespace; an unterminated array */
  static const char *seps[] = {"\r,", ",\n", " ,\r\n"};
  for (size_t i = 0; i < sizeof seps / sizeof *seps; i++)
    assert_non_null(strstr(same_refusal(f, texts, DIM, seps[i], "[", "]"), "at byte"));
  assert_non_null(strstr(same_refusal(f, texts, DIM, ",", "[", ""), "expected ',' or ']'"));
  assert_non_null(strstr(same_refusal(f, texts, DIM, ",", "[\n", "]"), "at byte 13"));
  /* the column still takes rows where it left off */
  taken_as_strtof(f, texts, ",");
  assert_int_equal(f->b.n_rows, 2);
  fx128_free(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_edges),
      cmocka_unit_test(test_grammar),
      cmocka_unit_test(test_random),
      cmocka_unit_test(test_vector128_values),
      cmocka_unit_test(test_vector128_refusals),
  };
  return tu_run_group(tests, NULL, NULL);
}
