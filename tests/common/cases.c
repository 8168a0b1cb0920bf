/*
 * cases.c — MW_TEST: run the cases of a cmocka group whose names match, or
 * fail naming the value when none does (see cases.h). The chosen cases are
 * copied, in their order, into an array of their own that cmocka runs as
 * the group; nothing of cmocka's own filtering is used.
 */
#include "cases.h"

#include <assert.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>

/* No case matched: say so where a person and meson's TAP reader look. */
static void report_unknown(const char *group, const char *want, const struct CMUnitTest *tests,
                           size_t count) {
  assert(want != NULL);
  assert(count <= TU_MAX_CASES);
  FILE *outs[2] = {stdout, stderr};
  for (size_t o = 0; o < 2; o++) {
    fprintf(outs[o], "%s%s=%s names no test case of %s; its %zu cases:", o == 0 ? "Bail out! " : "",
            TU_CASE_ENV, want, group, count);
    for (size_t i = 0; i < count; i++) fprintf(outs[o], " %s", tests[i].name);
    fprintf(outs[o], "\n");
    fflush(outs[o]);
  }
}

int tu_run_cases(const char *group, const struct CMUnitTest *tests, size_t count,
                 CMFixtureFunction setup, CMFixtureFunction teardown) {
  assert(group != NULL);
  assert(tests != NULL);
  assert(count > 0);
  assert(count <= TU_MAX_CASES);
  const char *want = getenv(TU_CASE_ENV);
  if (want == NULL || *want == '\0') return _cmocka_run_group_tests(group, tests, count, setup, teardown);
  struct CMUnitTest *chosen = calloc(count, sizeof *chosen);
  if (chosen == NULL) {
    fprintf(stderr, "%s: out of memory choosing the cases %s=%s names\n", group, TU_CASE_ENV, want);
    return 1;
  }
  size_t n = 0;
  for (size_t i = 0; i < count; i++) {
    if (fnmatch(want, tests[i].name, 0) == 0) chosen[n++] = tests[i];
  }
  assert(n <= count);
  int rc = 1;
  if (n == 0) {
    report_unknown(group, want, tests, count);
  } else {
    rc = _cmocka_run_group_tests(group, chosen, n, setup, teardown);
  }
  free(chosen);
  return rc;
}
