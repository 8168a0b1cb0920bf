/*
 * storage_int.h — private interface between the storage front (storage.c),
 * the fault layer (backend_fault.c) and the backends (local.c with
 * backend_uring.c and backend_threads.c; backend_s3.c). Not installed, not
 * included outside src/storage.
 *
 * A family's open function (mw_storage__local_open, ...) sets st->be and
 * st->be_state. A backend receives one accepted, validated request at a time through
 * submit(); it runs the request's steps and calls mw_storage__done() exactly
 * once, on the loop thread. Before every step it calls mw_storage__step(),
 * which records the step, runs the test hook, and returns a negative errno
 * when fault injection wants that step to fail.
 */
#ifndef MW_STORAGE_STORAGE_INT_H
#define MW_STORAGE_STORAGE_INT_H

#include <stdatomic.h>

#include "common/metrics.h"
#include "storage/fault.h"
#include "storage/storage.h"

typedef struct mw_storage_backend_ops {
  const char *name;                 /* "uring", "threads", "s3" */
  const char *const *step_names;    /* n_steps names, indexed by step */
  unsigned n_steps;
  int sync_step;                    /* the step fail_sync_once fails; -1: none */
  unsigned family;                  /* MW_STORAGE_FAMILY_*: shares step names */
  void (*submit)(mw_storage_t *st, mw_storage_req_t *req);
  /* Release everything (no request is in flight); call done(st) later, on
   * the loop. */
  void (*close)(mw_storage_t *st, void (*done)(mw_storage_t *st));
} mw_storage_backend_ops_t;

enum { MW_STORAGE_FAMILY_LOCAL = 0, MW_STORAGE_FAMILY_S3, MW_STORAGE_FAMILIES_ };

struct mw_storage {
  uv_loop_t *loop;
  mw_storage_config_t cfg;      /* cfg.uri points at uri */
  char *uri;
  const mw_storage_backend_ops_t *be;
  void *be_state;
  uint32_t inflight;
  uint32_t queued;              /* both queues */
  mw_storage_req_t *qhead, *qtail;   /* foreground requests waiting */
  uint32_t bg_inflight;         /* of inflight, background requests */
  uint32_t bg_queued;           /* of queued, background requests */
  uint32_t bg_max;              /* max_inflight - max_inflight / 4 */
  mw_storage_req_t *bghead, *bgtail; /* background requests waiting */
  bool closing;
  bool closed_timer;
  mw_storage_close_cb close_cb;
  void *close_arg;
  /* fault injection */
  mw_storage_fault_t fault;
  char *fault_prefix;
  uint64_t nsubmitted;
  atomic_bool sync_fail_pending;
  uv_timer_t delay_timer;
  mw_storage_req_t *dhead, *dtail;
  mw_storage_health_t health;
};

/* Backends */
extern const mw_storage_backend_ops_t mw_storage__uring_ops;
extern const mw_storage_backend_ops_t mw_storage__threads_ops;
/* Local disk: the root, then io_uring or the thread pool (local.c). Sets
 * st->be to the engine that runs. */
int mw_storage__local_open(mw_storage_t *st, mw_err_t *err);
/* S3 (backend_s3.c): bucket, prefix, endpoint, credentials; no request. */
extern const mw_storage_backend_ops_t mw_storage__s3_ops;
int mw_storage__s3_open(mw_storage_t *st, mw_err_t *err);
#define MW_S3_STEP_COUNT 4
extern const char *const mw_s3_step_names[MW_S3_STEP_COUNT];

/* Front */
void mw_storage__done(mw_storage_req_t *req, int status);
/* Record the reason of a failure for mw_storage_req_error (first one wins). */
void mw_storage__set_error(mw_storage_req_t *req, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Fault layer (backend_fault.c) */
int mw_storage__fault_open(mw_storage_t *st, mw_err_t *err);
void mw_storage__fault_close(mw_storage_t *st);
/* -ENOMEM when delete_many's per-key arming cannot be kept. */
int mw_storage__fault_arm(mw_storage_t *st, mw_storage_req_t *req);
/* Start the request now or after the configured delay. */
void mw_storage__fault_start(mw_storage_t *st, mw_storage_req_t *req);
/* Before every step: hook, injected failure (negative errno) or 0. */
int mw_storage__step(mw_storage_req_t *req, unsigned step);
/* delete_many: the fault armed for key i, once, at `step` (-errno or 0).
 * No hook runs: the request's own steps call mw_storage__step. */
int mw_storage__key_fault(mw_storage_req_t *req, size_t i, unsigned step);
/* A fault the test hooks injected (metrics). */
void mw_storage__count_fault(const mw_storage_t *st, unsigned step);

/* Metrics (storage.c), registered once per process in the default registry:
 *   memwald_storage_operations_total{op,result}  result = ok|exists|absent|error
 *   memwald_storage_errors_total{op,errno}
 *   memwald_storage_written_bytes_total           bytes of acknowledged puts
 *   memwald_storage_faults_injected_total{step}   test faults and power cuts
 * and by the local backends (local.c):
 *   memwald_storage_fsync_seconds{kind}          kind = file|dir */
typedef struct mw_storage_metrics {
  mw_metric_t *ops[MW_OP_COUNT_][4];
  mw_metric_t *written;
  mw_metric_t *faults[MW_STORAGE_FAMILIES_][MW_STORAGE_MAX_STEPS];
  bool ok;
} mw_storage_metrics_t;
extern mw_storage_metrics_t mw_storage__metrics;
void mw_storage__metrics_init(void);

#endif
