/*
 * metrics.c — see metrics.h.
 *
 * Series live in one calloc'd array per family, allocated at registration,
 * so recording never allocates and a series pointer stays valid for the
 * process lifetime. Gauges and histogram sums store doubles as their bit
 * patterns in 64-bit atomics; updates use compare-and-swap.
 */
#include "common/metrics.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

static const double default_bounds[] = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                        0.005,   0.01,   0.025,   0.05,   0.1,   0.25,
                                        0.5,     1,      2.5,     5,      10};

static mw_metrics_t default_registry;
static int default_ready;

mw_metrics_t *mw_metrics_default(void) {
  if (!default_ready) {
    mw_metrics_init(&default_registry);
    default_ready = 1;
  }
  return &default_registry;
}

void mw_metrics_init(mw_metrics_t *m) { memset(m, 0, sizeof *m); }

void mw_metrics_free(mw_metrics_t *m) {
  for (size_t i = 0; i < m->n_families; i++) free(m->families[i].series);
  memset(m, 0, sizeof *m);
}

static int valid_name(const char *s) {
  if (s == NULL || !(isalpha((unsigned char)*s) || *s == '_' || *s == ':')) return 0;
  for (; *s; s++)
    if (!(isalnum((unsigned char)*s) || *s == '_' || *s == ':')) return 0;
  return 1;
}

static double bits_to_double(uint64_t b) {
  double d;
  memcpy(&d, &b, sizeof d);
  return d;
}

static uint64_t double_to_bits(double d) {
  uint64_t b;
  memcpy(&b, &d, sizeof b);
  return b;
}

mw_metric_family_t *mw_metrics_register(mw_metrics_t *m, mw_metric_kind_t kind, const char *name,
                                        const char *help, const char *const *label_names,
                                        size_t n_labels, const double *bounds, size_t n_bounds) {
  assert(m != NULL);
  if (!valid_name(name) || n_labels > MW_METRIC_MAX_LABELS || strlen(name) >= 96) goto bad;
  for (size_t i = 0; i < n_labels; i++)
    if (!valid_name(label_names[i])) goto bad;
  for (size_t i = 0; i < m->n_families; i++) {
    mw_metric_family_t *f = &m->families[i];
    if (strcmp(f->name, name) != 0) continue;
    if (f->kind != kind || f->n_labels != n_labels) goto bad;
    return f;
  }
  if (m->n_families >= MW_METRICS_MAX_FAMILIES) goto bad;
  if (kind == MW_METRIC_HISTOGRAM && bounds == NULL) {
    bounds = default_bounds;
    n_bounds = sizeof default_bounds / sizeof default_bounds[0];
  }
  if (n_bounds > MW_METRIC_MAX_BUCKETS) goto bad;
  for (size_t i = 1; i < n_bounds; i++)
    if (!(bounds[i] > bounds[i - 1])) goto bad;
  mw_metric_family_t *f = &m->families[m->n_families];
  memset(f, 0, sizeof *f);
  f->series = calloc(MW_METRIC_MAX_SERIES + 1, sizeof *f->series);
  if (f->series == NULL) goto bad;
  f->kind = kind;
  snprintf(f->name, sizeof f->name, "%s", name);
  snprintf(f->help, sizeof f->help, "%s", help ? help : "");
  for (size_t i = 0; i < n_labels; i++) f->label_names[i] = label_names[i];
  f->n_labels = n_labels;
  if (kind == MW_METRIC_HISTOGRAM) {
    memcpy(f->bounds, bounds, n_bounds * sizeof *bounds);
    f->n_bounds = n_bounds;
  }
  /* the overflow series, used once MW_METRIC_MAX_SERIES are taken */
  for (size_t i = 0; i < n_labels; i++)
    snprintf(f->series[MW_METRIC_MAX_SERIES].labels[i], MW_METRIC_LABEL_VALUE_BYTES, "_other");
  m->n_families++;
  return f;
bad:
  mw_log_err("metrics: bad or duplicate definition of %s", name ? name : "(null)");
  return NULL;
}

static size_t def_register(mw_metrics_t *m, const mw_metric_def_t *d) {
  assert(d->name != NULL);
  assert(d->label != NULL || d->values[0] == NULL);
  mw_metric_family_t *f = mw_metrics_register(m, d->kind, d->name, d->help, &d->label, d->label ? 1 : 0,
                                              d->bounds, d->n_bounds);
  if (d->family != NULL) *d->family = f;
  if (d->label == NULL) {
    if (d->series[0] != NULL) *d->series[0] = f ? mw_metric_series(f, NULL) : NULL;
    return f == NULL;
  }
  for (size_t i = 0; i < MW_METRIC_DEF_MAX_VALUES && d->values[i] != NULL; i++) {
    assert(d->series[i] != NULL); /* a value without a slot is a slip in the table */
    *d->series[i] = f ? mw_metric_series(f, &d->values[i]) : NULL;
  }
  return f == NULL;
}

size_t mw_metrics_register_defs(mw_metrics_t *m, const mw_metric_def_t *defs, size_t n) {
  assert(m != NULL);
  assert(defs != NULL || n == 0);
  size_t refused = 0;
  for (size_t i = 0; i < n; i++) refused += def_register(m, &defs[i]);
  return refused;
}

mw_metric_t *mw_metric_series(mw_metric_family_t *f, const char *const *label_values) {
  assert(f != NULL);
  for (size_t s = 0; s < f->n_series; s++) {
    size_t i = 0;
    while (i < f->n_labels && strncmp(f->series[s].labels[i], label_values[i],
                                      MW_METRIC_LABEL_VALUE_BYTES - 1) == 0)
      i++;
    if (i == f->n_labels) return &f->series[s];
  }
  if (f->n_series >= MW_METRIC_MAX_SERIES) return &f->series[MW_METRIC_MAX_SERIES];
  mw_metric_t *s = &f->series[f->n_series++];
  for (size_t i = 0; i < f->n_labels; i++)
    snprintf(s->labels[i], MW_METRIC_LABEL_VALUE_BYTES, "%s", label_values[i]);
  return s;
}

void mw_counter_add(mw_metric_t *s, uint64_t n) {
  assert(s != NULL);
  atomic_fetch_add_explicit(&s->value, n, memory_order_relaxed);
}

void mw_gauge_set(mw_metric_t *s, double v) {
  assert(s != NULL);
  atomic_store_explicit(&s->value, double_to_bits(v), memory_order_relaxed);
}

static void atomic_add_double(_Atomic uint64_t *p, double v) {
  uint64_t old = atomic_load_explicit(p, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(p, &old, double_to_bits(bits_to_double(old) + v),
                                                memory_order_relaxed, memory_order_relaxed)) {
  }
}

void mw_gauge_add(mw_metric_t *s, double v) {
  assert(s != NULL);
  atomic_add_double(&s->value, v);
}

double mw_gauge_get(const mw_metric_t *s) {
  return bits_to_double(atomic_load_explicit(&s->value, memory_order_relaxed));
}

void mw_histogram_observe(mw_metric_t *s, const mw_metric_family_t *f, double v) {
  assert(f->kind == MW_METRIC_HISTOGRAM);
  size_t b = 0;
  while (b < f->n_bounds && v > f->bounds[b]) b++;
  if (b < f->n_bounds) atomic_fetch_add_explicit(&s->buckets[b], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&s->count, 1, memory_order_relaxed);
  atomic_add_double(&s->sum_bits, v);
}

/* Label values are escaped as the format requires: \\ \" \n. */
static int put_labels(mw_buf_t *out, const mw_metric_family_t *f, const mw_metric_t *s,
                      const char *le) {
  assert(f->n_labels <= MW_METRIC_MAX_LABELS);
  if (f->n_labels == 0 && le == NULL) return 0;
  int rc = mw_buf_put_u8(out, '{');
  for (size_t i = 0; i < f->n_labels && rc == 0; i++) {
    if (i) rc |= mw_buf_put_u8(out, ',');
    rc |= mw_buf_append(out, f->label_names[i], strlen(f->label_names[i]));
    rc |= mw_buf_append(out, "=\"", 2);
    for (const char *c = s->labels[i]; *c && rc == 0; c++) {
      if (*c == '\\' || *c == '"') rc |= mw_buf_put_u8(out, '\\') | mw_buf_put_u8(out, (uint8_t)*c);
      else if (*c == '\n') rc |= mw_buf_append(out, "\\n", 2);
      else rc |= mw_buf_put_u8(out, (uint8_t)*c);
    }
    rc |= mw_buf_put_u8(out, '"');
  }
  if (le != NULL) {
    if (f->n_labels) rc |= mw_buf_put_u8(out, ',');
    rc |= mw_buf_append(out, "le=\"", 4);
    rc |= mw_buf_append(out, le, strlen(le));
    rc |= mw_buf_put_u8(out, '"');
  }
  rc |= mw_buf_put_u8(out, '}');
  return rc ? -ENOMEM : 0;
}

static int put_sample(mw_buf_t *out, const char *name, const char *suffix,
                      const mw_metric_family_t *f, const mw_metric_t *s, const char *le,
                      const char *value) {
  int rc = mw_buf_append(out, name, strlen(name));
  rc |= mw_buf_append(out, suffix, strlen(suffix));
  rc |= put_labels(out, f, s, le);
  rc |= mw_buf_put_u8(out, ' ');
  rc |= mw_buf_append(out, value, strlen(value));
  rc |= mw_buf_put_u8(out, '\n');
  return rc ? -ENOMEM : 0;
}

static void fmt_double(char *buf, size_t n, double v) {
  assert(n >= 32); /* "%.17g" of any double, and "+Inf" */
  if (isinf(v)) snprintf(buf, n, v > 0 ? "+Inf" : "-Inf");
  else if (isnan(v)) snprintf(buf, n, "NaN");
  else {
    /* the shortest form that reads back exactly: 0.005, not 0.0050000000000000001 */
    for (int prec = 6; prec <= 17; prec++) {
      snprintf(buf, n, "%.*g", prec, v);
      if (strtod(buf, NULL) == v) break;
    }
  }
}

static int render_series(mw_buf_t *out, const mw_metric_family_t *f, const mw_metric_t *s) {
  char v[64], le[64];
  int rc = 0;
  assert(f->n_bounds <= MW_METRIC_MAX_BUCKETS);
  switch (f->kind) {
    case MW_METRIC_COUNTER:
      snprintf(v, sizeof v, "%llu", (unsigned long long)atomic_load(&s->value));
      return put_sample(out, f->name, "", f, s, NULL, v);
    case MW_METRIC_GAUGE:
      fmt_double(v, sizeof v, mw_gauge_get(s));
      return put_sample(out, f->name, "", f, s, NULL, v);
    case MW_METRIC_HISTOGRAM: {
      uint64_t cum = 0;
      for (size_t b = 0; b < f->n_bounds && rc == 0; b++) {
        cum += atomic_load(&s->buckets[b]);
        fmt_double(le, sizeof le, f->bounds[b]);
        snprintf(v, sizeof v, "%llu", (unsigned long long)cum);
        rc = put_sample(out, f->name, "_bucket", f, s, le, v);
      }
      uint64_t count = atomic_load(&s->count);
      snprintf(v, sizeof v, "%llu", (unsigned long long)count);
      rc |= put_sample(out, f->name, "_bucket", f, s, "+Inf", v);
      fmt_double(le, sizeof le, bits_to_double(atomic_load(&s->sum_bits)));
      rc |= put_sample(out, f->name, "_sum", f, s, NULL, le);
      rc |= put_sample(out, f->name, "_count", f, s, NULL, v);
      return rc;
    }
  }
  return -EINVAL;
}

int mw_metrics_render(const mw_metrics_t *m, mw_buf_t *out) {
  static const char *const kinds[] = {"", "counter", "gauge", "histogram"};
  assert(m != NULL);
  assert(m->n_families <= MW_METRICS_MAX_FAMILIES);
  for (size_t i = 0; i < m->n_families; i++) {
    const mw_metric_family_t *f = &m->families[i];
    char head[400];
    int n = snprintf(head, sizeof head, "# HELP %s %s\n# TYPE %s %s\n", f->name, f->help, f->name,
                     kinds[f->kind]);
    if (mw_buf_append(out, head, (size_t)n) < 0) return -ENOMEM;
    /* A family without labels always has its one series, even at zero. */
    size_t n_series = f->n_labels == 0 && f->n_series == 0 ? 1 : f->n_series;
    for (size_t s = 0; s < n_series; s++)
      if (render_series(out, f, &f->series[s]) < 0) return -ENOMEM;
    const mw_metric_t *over = &f->series[MW_METRIC_MAX_SERIES];
    if (f->n_series >= MW_METRIC_MAX_SERIES &&
        (atomic_load(&over->value) || atomic_load(&over->count)) && render_series(out, f, over) < 0)
      return -ENOMEM;
  }
  return 0;
}
