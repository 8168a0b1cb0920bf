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
 * past it: ASan checks).
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_edges),
      cmocka_unit_test(test_grammar),
      cmocka_unit_test(test_random),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
