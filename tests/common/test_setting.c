/*
 * test_setting.c — common/setting.h (one number parser for every setting)
 * and common/fs.h (mkdir -p): what is accepted, what is refused and the
 * reason's words, the limits at their edges, and a struct field set through
 * a key table.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cases.h"
#include "common/fs.h"
#include "common/setting.h"

static uint64_t ok(const char *text, uint64_t lo, uint64_t hi, unsigned flags) {
  uint64_t v = 12345;
  mw_err_t e = {0};
  assert_int_equal(mw_setting_parse_u64("k", text, lo, hi, flags, &v, &e), 0);
  return v;
}

static void refused(const char *text, uint64_t lo, uint64_t hi, unsigned flags, const char *words) {
  uint64_t v = 777;
  mw_err_t e = {0};
  assert_int_equal(mw_setting_parse_u64("k", text, lo, hi, flags, &v, &e), -EINVAL);
  assert_int_equal(v, 777); /* untouched on failure */
  if (strstr(e.msg, words) == NULL) fail_msg("reason '%s' lacks '%s'", e.msg, words);
  assert_non_null(strstr(e.msg, "config k: "));
}

static void test_numbers(void **state) {
  (void)state;
  assert_int_equal(ok("0", 0, 10, 0), 0);
  assert_int_equal(ok("10", 0, 10, 0), 10);
  assert_int_equal(ok("18446744073709551615", 0, UINT64_MAX, 0), UINT64_MAX);
  assert_int_equal(ok("2KiB", 0, 1 << 20, MW_SETTING_SIZES), 2048);
  assert_int_equal(ok("3 MiB", 0, 1 << 30, MW_SETTING_SIZES), 3u << 20);
  assert_int_equal(ok("1GiB", 0, UINT64_MAX, MW_SETTING_SIZES), 1u << 30);
}

static void test_refusals(void **state) {
  (void)state;
  refused("11", 0, 10, 0, "is outside 0..10");
  refused("4", 5, 10, 0, "is outside 5..10");
  refused("-1", 0, 10, 0, "expected a whole number in 0..10");
  refused("", 0, 10, 0, "expected a whole number");
  refused("1.5", 0, 10, 0, "expected a whole number");
  refused("0x10", 0, 100, 0, "expected a whole number");
  refused("2KiB", 0, UINT64_MAX, 0, "expected a whole number"); /* units only with SIZES */
  refused("2TiB", 0, UINT64_MAX, MW_SETTING_SIZES, "expected a whole number");
  refused("18446744073709551616", 0, UINT64_MAX, 0, "does not fit in 64 bits");
  refused("17179869184GiB", 0, UINT64_MAX, MW_SETTING_SIZES, "does not fit in 64 bits");
  uint64_t v = 5;
  mw_err_t e = {0};
  assert_int_equal(mw_setting_parse_u64("k", NULL, 0, 10, 0, &v, &e), -EINVAL);
  assert_non_null(strstr(e.msg, "no value"));
  /* key NULL: the caller names the place; the reason has no "config" prefix
   * (a fresh err: mw_err_set keeps the first reason) */
  mw_err_t e2 = {0};
  assert_int_equal(mw_setting_parse_u64(NULL, "99", 0, 10, 0, &v, &e2), -EINVAL);
  assert_null(strstr(e2.msg, "config"));
  assert_non_null(strstr(e2.msg, "outside 0..10"));
}

typedef struct conf {
  uint32_t small;
  uint64_t big;
} conf_t;

static void test_set_num(void **state) {
  (void)state;
  static const mw_setting_num_t table[] = {
      MW_SETTING_NUM(conf_t, small, "small_ms", 1, 1000),
      MW_SETTING_NUM(conf_t, big, "big_bytes", 0, UINT64_MAX),
  };
  conf_t c = {7, 7};
  mw_err_t e = {0};
  assert_int_equal(mw_setting_set_num(&c, table, 2, "small_ms", "250", &e), 0);
  assert_int_equal(mw_setting_set_num(&c, table, 2, "big_bytes", "4294967296", &e), 0);
  assert_int_equal(c.small, 250);
  assert_int_equal(c.big, 4294967296ull);
  mw_err_t e3 = {0};
  assert_int_equal(mw_setting_set_num(&c, table, 2, "small_ms", "0", &e3), -EINVAL);
  assert_non_null(strstr(e3.msg, "small_ms"));
  assert_int_equal(c.small, 250); /* a refusal sets nothing */
  mw_err_t untouched = {0};
  assert_int_equal(mw_setting_set_num(&c, table, 2, "nope", "1", &untouched), -ENOENT);
  assert_int_equal(untouched.msg[0], '\0');
}

static void test_mkdir_p(void **state) {
  (void)state;
  char base[] = "/tmp/mw-test-setting-XXXXXX";
  assert_non_null(mkdtemp(base));
  char path[256];
  snprintf(path, sizeof path, "%s/a/b/c", base);
  assert_int_equal(mw_fs_mkdir_p(path, 0755), 0);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_true(S_ISDIR(st.st_mode));
  assert_int_equal(mw_fs_mkdir_p(path, 0755), 0); /* again: it exists, success */
  char file[300];
  snprintf(file, sizeof file, "%s/f", base);
  FILE *f = fopen(file, "w");
  assert_non_null(f);
  fclose(f);
  char under[320];
  snprintf(under, sizeof under, "%s/f/x", base);
  assert_true(mw_fs_mkdir_p(under, 0755) < 0); /* a file in the way is an error */
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_numbers),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_set_num),
      cmocka_unit_test(test_mkdir_p),
  };
  return tu_run_group(tests, NULL, NULL);
}
