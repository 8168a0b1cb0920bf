/*
 * cases.h — one test case by name, the same way in every cmocka binary.
 *
 *   MW_TEST=test_put_get meson test -C build storage-uring
 *   MW_TEST='test_fault_*' build/tests/storage/test_storage
 *
 * MW_TEST holds a case name, or a shell pattern (fnmatch: `*`, `?`, `[...]`)
 * over the names; only the cases whose names match run, and the TAP plan
 * counts only them (the others are left out, not reported as skipped).
 * Unset or empty: every case. A value that matches no case is an error: the
 * binary prints the value and the names it has (stdout "Bail out!" for
 * meson's TAP reader, and stderr) and exits 1. A typo never reads as
 * "0 tests, all passed".
 *
 * Each binary calls tu_run_group(tests, setup, teardown) or
 * tu_run_group_name(name, tests, setup, teardown) where it would call
 * cmocka_run_group_tests[_name]. The choice is made here, on the array,
 * rather than with cmocka_set_test_filter(): given a name no case has,
 * that filter (cmocka 1.1.5, Debian 12's) prints "1..0" and exits 0. The
 * Python scripts take the same variable (tests/e2e/e2e_util.py,
 * chosen()). Test-only code.
 */
#ifndef MW_TEST_CASES_H
#define MW_TEST_CASES_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

/* The environment variable that names the case(s) to run. */
#define TU_CASE_ENV "MW_TEST"
/* The most cases one group may hold (test_storage has under 50). */
#define TU_MAX_CASES 1024u

/* Runs the cases of tests[0..count) that MW_TEST selects (all when unset)
 * as one cmocka group; cmocka's exit status, or 1 when MW_TEST matches no
 * case (or the selection cannot be allocated). */
int tu_run_cases(const char *group, const struct CMUnitTest *tests, size_t count,
                 CMFixtureFunction setup, CMFixtureFunction teardown);

#define tu_run_group(tests, setup, teardown) \
  tu_run_cases(#tests, (tests), sizeof(tests) / sizeof((tests)[0]), (setup), (teardown))
#define tu_run_group_name(name, tests, setup, teardown) \
  tu_run_cases((name), (tests), sizeof(tests) / sizeof((tests)[0]), (setup), (teardown))

#endif
