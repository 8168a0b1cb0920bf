/*
 * test_metrics.c — the Prometheus text exposition: every line parses under
 * the 0.0.4 grammar (a hand-written checker, promtool-style), histograms are
 * cumulative and end in +Inf == _count, label values are escaped, and the
 * series limit holds.
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

#include "common/metrics.h"

/* Returns the number of sample lines, or -1 with *why set. */
static int check_exposition(const char *text, const char **why) {
  int samples = 0;
  char family[128] = "";
  for (const char *line = text; *line;) {
    const char *nl = strchr(line, '\n');
    if (nl == NULL) return *why = "last line not terminated", -1;
    char buf[1024];
    size_t len = (size_t)(nl - line);
    if (len >= sizeof buf) return *why = "line too long", -1;
    memcpy(buf, line, len);
    buf[len] = 0;
    line = nl + 1;
    if (strncmp(buf, "# HELP ", 7) == 0) continue;
    if (strncmp(buf, "# TYPE ", 7) == 0) {
      char kind[32];
      if (sscanf(buf + 7, "%127s %31s", family, kind) != 2) return *why = "bad TYPE", -1;
      if (strcmp(kind, "counter") && strcmp(kind, "gauge") && strcmp(kind, "histogram"))
        return *why = "bad TYPE kind", -1;
      continue;
    }
    if (buf[0] == '#') return *why = "unknown comment", -1;
    /* name{labels} value */
    size_t i = 0;
    while (buf[i] && buf[i] != '{' && buf[i] != ' ') i++;
    if (strncmp(buf, family, strlen(family)) != 0) return *why = "sample outside its family", -1;
    if (buf[i] == '{') {
      i++;
      while (buf[i] != '}') {
        while (buf[i] && buf[i] != '=') i++;
        if (buf[i] != '=' || buf[i + 1] != '"') return *why = "bad label", -1;
        i += 2;
        while (buf[i] && buf[i] != '"') i += buf[i] == '\\' ? 2 : 1;
        if (buf[i] != '"') return *why = "unterminated label value", -1;
        i++;
        if (buf[i] == ',') i++;
        else if (buf[i] != '}') return *why = "bad label separator", -1;
      }
      i++;
    }
    if (buf[i] != ' ') return *why = "no space before value", -1;
    char *end;
    const char *v = buf + i + 1;
    if (strcmp(v, "+Inf") && strcmp(v, "-Inf") && strcmp(v, "NaN")) {
      strtod(v, &end);
      if (end == v || *end) return *why = "bad value", -1;
    }
    samples++;
  }
  return samples;
}

static void test_render_and_parse(void **state) {
  (void)state;
  mw_metrics_t m;
  mw_metrics_init(&m);
  const char *tl[] = {"table"};
  mw_metric_family_t *rows = mw_metrics_register(&m, MW_METRIC_COUNTER, "memwald_rows_ingested_total",
                                                 "Rows acknowledged.", tl, 1, NULL, 0);
  mw_metric_family_t *conns =
      mw_metrics_register(&m, MW_METRIC_GAUGE, "memwald_connections", "Open connections.", NULL, 0, NULL, 0);
  mw_metric_family_t *lat = mw_metrics_register(&m, MW_METRIC_HISTOGRAM, "memwald_ack_latency_seconds",
                                                "Ack latency.", NULL, 0, NULL, 0);
  assert_non_null(rows);
  assert_non_null(conns);
  assert_non_null(lat);
  const char *ev[] = {"events"}, *weird[] = {"we\"ird\\na\nme"};
  mw_counter_add(mw_metric_series(rows, ev), 1200);
  mw_counter_add(mw_metric_series(rows, ev), 5);
  mw_counter_add(mw_metric_series(rows, weird), 1);
  mw_gauge_set(mw_metric_series(conns, NULL), 3);
  mw_gauge_add(mw_metric_series(conns, NULL), -1);
  mw_metric_t *l = mw_metric_series(lat, NULL);
  for (int i = 0; i < 20; i++) mw_histogram_observe(l, lat, i < 17 ? 0.0008 : 3.0);
  mw_buf_t out = MW_BUF_INIT;
  assert_int_equal(mw_metrics_render(&m, &out), 0);
  mw_buf_put_u8(&out, 0);
  const char *text = (const char *)out.data;
  const char *why = NULL;
  int n = check_exposition(text, &why);
  if (n < 0) fail_msg("exposition rejected: %s\n%s", why, text);
  assert_non_null(strstr(text, "memwald_rows_ingested_total{table=\"events\"} 1205\n"));
  assert_non_null(strstr(text, "{table=\"we\\\"ird\\\\na\\nme\"} 1\n"));
  assert_non_null(strstr(text, "memwald_connections 2\n"));
  assert_non_null(strstr(text, "memwald_ack_latency_seconds_bucket{le=\"0.001\"} 17\n"));
  assert_non_null(strstr(text, "memwald_ack_latency_seconds_bucket{le=\"+Inf\"} 20\n"));
  assert_non_null(strstr(text, "memwald_ack_latency_seconds_count 20\n"));
  /* cumulative buckets never decrease */
  unsigned long long prev = 0;
  for (const char *p = text; (p = strstr(p, "_bucket{")) != NULL; p++) {
    const char *sp = strchr(p, ' ');
    unsigned long long v = strtoull(sp + 1, NULL, 10);
    assert_true(v >= prev);
    prev = v;
  }
  mw_buf_free(&out);
  mw_metrics_free(&m);
}

static void test_series_limit_and_bad_names(void **state) {
  (void)state;
  mw_metrics_t m;
  mw_metrics_init(&m);
  const char *tl[] = {"code"};
  mw_metric_family_t *f = mw_metrics_register(&m, MW_METRIC_COUNTER, "errs_total", "x", tl, 1, NULL, 0);
  char name[32];
  mw_metric_t *first_over = NULL;
  for (int i = 0; i < MW_METRIC_MAX_SERIES + 50; i++) {
    snprintf(name, sizeof name, "c%d", i);
    const char *v[] = {name};
    mw_metric_t *s = mw_metric_series(f, v);
    assert_non_null(s);
    if (i >= MW_METRIC_MAX_SERIES) {
      if (first_over == NULL) first_over = s;
      assert_ptr_equal(s, first_over); /* one overflow series */
    }
    mw_counter_add(s, 1);
  }
  assert_int_equal(f->n_series, MW_METRIC_MAX_SERIES);
  mw_buf_t out = MW_BUF_INIT;
  assert_int_equal(mw_metrics_render(&m, &out), 0);
  mw_buf_put_u8(&out, 0);
  assert_non_null(strstr((const char *)out.data, "errs_total{code=\"_other\"} 50\n"));
  mw_buf_free(&out);
  assert_null(mw_metrics_register(&m, MW_METRIC_COUNTER, "bad-name", "x", NULL, 0, NULL, 0));
  assert_null(mw_metrics_register(&m, MW_METRIC_GAUGE, "errs_total", "x", tl, 1, NULL, 0));
  assert_ptr_equal(mw_metrics_register(&m, MW_METRIC_COUNTER, "errs_total", "x", tl, 1, NULL, 0), f);
  mw_metrics_free(&m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_render_and_parse),
      cmocka_unit_test(test_series_limit_and_bad_names),
  };
  return tu_run_group(tests, NULL, NULL);
}
