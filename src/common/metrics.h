/*
 * metrics.h — counters, gauges and histograms, rendered in the Prometheus
 * text exposition format (version 0.0.4).
 *
 * Owns: the metric families registered at start-up and their series. Every
 * layer records into the same registry (storage: fsync latency; engine: WAL
 * entries, flushes, fences; front ends: rows, errors, connections) and the
 * admin socket's `metrics` command and the HTTP /metrics endpoint render it.
 *
 * Sample of the output:
 *   # HELP memwald_rows_ingested_total Rows acknowledged to producers.
 *   # TYPE memwald_rows_ingested_total counter
 *   memwald_rows_ingested_total{table="events"} 1200
 *   # TYPE memwald_ack_latency_seconds histogram
 *   memwald_ack_latency_seconds_bucket{le="0.001"} 17
 *   ...
 *   memwald_ack_latency_seconds_bucket{le="+Inf"} 20
 *   memwald_ack_latency_seconds_sum 0.0213
 *   memwald_ack_latency_seconds_count 20
 *
 * Limits: MW_METRICS_MAX_FAMILIES families, MW_METRIC_MAX_SERIES series per
 * family (label values beyond that land in one series whose labels are all
 * "_other", so a flood of table names cannot grow memory), at most
 * MW_METRIC_MAX_LABELS labels and MW_METRIC_MAX_BUCKETS buckets.
 *
 * Threading: recording (add/set/observe) is lock-free and may happen on any
 * thread. Registering families and creating series must happen on one thread
 * (the loop); rendering reads values with relaxed atomics.
 *
 * Errors: registration returns NULL on a bad definition or a full registry
 * (a programming error, also logged); recording never fails.
 */
#ifndef MW_COMMON_METRICS_H
#define MW_COMMON_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

#define MW_METRICS_MAX_FAMILIES 128
#define MW_METRIC_MAX_SERIES 256
#define MW_METRIC_MAX_LABELS 3
#define MW_METRIC_MAX_BUCKETS 24
#define MW_METRIC_LABEL_VALUE_BYTES 96

typedef enum { MW_METRIC_COUNTER = 1, MW_METRIC_GAUGE, MW_METRIC_HISTOGRAM } mw_metric_kind_t;

typedef struct mw_metric {
  char labels[MW_METRIC_MAX_LABELS][MW_METRIC_LABEL_VALUE_BYTES];
  _Atomic uint64_t value;                            /* counter; gauge: double bits */
  _Atomic uint64_t buckets[MW_METRIC_MAX_BUCKETS];   /* histogram, non-cumulative */
  _Atomic uint64_t count;                            /* histogram */
  _Atomic uint64_t sum_bits;                         /* histogram sum (double bits) */
} mw_metric_t;

typedef struct mw_metric_family {
  mw_metric_kind_t kind;
  char name[96];
  char help[160];
  const char *label_names[MW_METRIC_MAX_LABELS];
  size_t n_labels;
  double bounds[MW_METRIC_MAX_BUCKETS]; /* upper bounds, ascending; +Inf implied */
  size_t n_bounds;
  mw_metric_t *series;                  /* MW_METRIC_MAX_SERIES + 1 (overflow) */
  size_t n_series;
} mw_metric_family_t;

typedef struct mw_metrics {
  mw_metric_family_t families[MW_METRICS_MAX_FAMILIES];
  size_t n_families;
} mw_metrics_t;

/* The process-wide registry. */
mw_metrics_t *mw_metrics_default(void);
void mw_metrics_init(mw_metrics_t *m);
void mw_metrics_free(mw_metrics_t *m);

/* Register a family. `name` must match [a-zA-Z_:][a-zA-Z0-9_:]*; label names
 * are static strings; `bounds` only for histograms (NULL = latency defaults:
 * 50 µs … 10 s). Registering the same name again returns the existing family
 * when the definition matches. */
mw_metric_family_t *mw_metrics_register(mw_metrics_t *m, mw_metric_kind_t kind, const char *name,
                                        const char *help, const char *const *label_names,
                                        size_t n_labels, const double *bounds, size_t n_bounds);
/* The series for these label values (n_labels of them), created on first
 * use. Never NULL for a valid family: past the series limit it returns the
 * overflow series. */
mw_metric_t *mw_metric_series(mw_metric_family_t *f, const char *const *label_values);

/* One family in a table of definitions (mw_metrics_register_defs): no label
 * or one label with a fixed set of values, and where its series and the
 * family go. The layers that register several families at once write them
 * as such a table instead of a call each. */
#define MW_METRIC_DEF_MAX_VALUES 8
typedef struct mw_metric_def {
  mw_metric_kind_t kind;
  const char *name, *help;
  const char *label;                               /* static; NULL: no label */
  const char *values[MW_METRIC_DEF_MAX_VALUES];    /* with a label: its values */
  mw_metric_t **series[MW_METRIC_DEF_MAX_VALUES];  /* [0] for no label; NULL: not wanted */
  mw_metric_family_t **family;                     /* NULL: not wanted */
  const double *bounds;                            /* histograms: as mw_metrics_register */
  size_t n_bounds;
} mw_metric_def_t;

/* Registers each of defs[0..n) and stores its family and series where the
 * definition says; a definition the registry refuses (logged) leaves its
 * slots NULL. Returns how many were refused. */
size_t mw_metrics_register_defs(mw_metrics_t *m, const mw_metric_def_t *defs, size_t n);

void mw_counter_add(mw_metric_t *s, uint64_t n);
void mw_gauge_set(mw_metric_t *s, double v);
void mw_gauge_add(mw_metric_t *s, double v);
double mw_gauge_get(const mw_metric_t *s);
void mw_histogram_observe(mw_metric_t *s, const mw_metric_family_t *f, double v);

/* Append the text exposition of every family to out. */
int mw_metrics_render(const mw_metrics_t *m, mw_buf_t *out);

#endif
