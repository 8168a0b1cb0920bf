/*
 * storage_int.h — private interface between the storage front (storage.c)
 * and its backends (backend_uring.c, backend_threads.c) and the fault layer
 * (backend_fault.c). Not installed, not included outside src/storage.
 *
 * A backend receives one accepted, validated request at a time through
 * submit(); it runs the request's steps and calls mw_storage__done() exactly
 * once, on the loop thread. Before every syscall step it calls
 * mw_storage__step(), which records the step, runs the test hook, and
 * returns a negative errno when fault injection wants that step to fail.
 */
#ifndef MW_STORAGE_STORAGE_INT_H
#define MW_STORAGE_STORAGE_INT_H

#include <stdatomic.h>

#include "common/metrics.h"
#include "storage/storage.h"

#define MW_STORAGE_DIRCACHE_SLOTS 256
#define MW_STORAGE_MKDIR_TRIES 4

typedef struct mw_storage_backend_ops {
  const char *name;
  /* Set up; negative errno when the backend cannot run here. */
  int (*open)(mw_storage_t *st);
  void (*submit)(mw_storage_t *st, mw_storage_req_t *req);
  /* Release everything (no request is in flight); call done(st) later, on
   * the loop. */
  void (*close)(mw_storage_t *st, void (*done)(mw_storage_t *st));
} mw_storage_backend_ops_t;

struct mw_storage {
  uv_loop_t *loop;
  mw_storage_config_t cfg;
  char *root;
  int rootfd;
  const mw_storage_backend_ops_t *be;
  void *be_state;
  uint32_t inflight;
  uint32_t queued;
  mw_storage_req_t *qhead, *qtail;
  bool closing;
  bool closed_timer;
  mw_storage_close_cb close_cb;
  void *close_arg;
  void (*be_close_done)(mw_storage_t *st);
  /* fault injection */
  mw_storage_fault_t fault;
  char *fault_prefix;
  uint64_t nsubmitted;
  atomic_bool fsync_fail_pending;
  uv_timer_t delay_timer;
  mw_storage_req_t *dhead, *dtail;
  uint32_t submit_failures;   /* test hook: io_uring_submit failures left */
  mw_storage_health_t health;
  /* hashes of directories known durable (their whole ancestry fsynced) */
  uint64_t dircache[MW_STORAGE_DIRCACHE_SLOTS];
};

extern const mw_storage_backend_ops_t mw_storage__uring_ops;
extern const mw_storage_backend_ops_t mw_storage__threads_ops;

/* Front */
void mw_storage__done(mw_storage_req_t *req, int status);

/* Fault layer (backend_fault.c) */
int mw_storage__fault_open(mw_storage_t *st, mw_err_t *err);
void mw_storage__fault_close(mw_storage_t *st);
void mw_storage__fault_arm(mw_storage_t *st, mw_storage_req_t *req);
/* Start the request now or after the configured delay. */
void mw_storage__fault_start(mw_storage_t *st, mw_storage_req_t *req);
int mw_storage__step(mw_storage_req_t *req, mw_storage_step_t step);
/* After the syscall of OPEN (rc = the fd), MKDIR (path in priv.scratch),
 * FSYNC and DIRSYNC (priv.fd / priv.dirfd still open): metrics and the
 * power-loss journal. Returns rc, or -EIO for an fsync that completed after
 * a simulated power cut. */
int mw_storage__step_end(mw_storage_req_t *req, mw_storage_step_t step, int rc);
/* A fault the test hooks injected (metrics). */
void mw_storage__count_fault(mw_storage_step_t step);

/* Power-loss journal (powerloss.c) */
int mw_powerloss__attach(mw_powerloss_t *pl, int rootfd);
void mw_powerloss__detach(mw_powerloss_t *pl);
void mw_powerloss__before(mw_powerloss_t *pl, mw_storage_req_t *req, mw_storage_step_t step);
int mw_powerloss__after(mw_powerloss_t *pl, mw_storage_req_t *req, mw_storage_step_t step,
                        int rc);

/* Metrics (storage.c), registered once per process in the default registry:
 *   memwald_storage_operations_total{op,result}  result = ok|exists|absent|error
 *   memwald_storage_fsync_seconds{kind}          kind = file|dir
 *   memwald_storage_written_bytes_total           bytes of acknowledged puts
 *   memwald_storage_faults_injected_total{step}   test faults and power cuts */
typedef struct mw_storage_metrics {
  mw_metric_t *ops[MW_OP_SWEEP_TMP + 1][4];
  mw_metric_family_t *fsync_family;
  mw_metric_t *fsync[2];
  mw_metric_t *written;
  mw_metric_t *faults[MW_STEP_COUNT_];
  bool ok;
} mw_storage_metrics_t;
extern mw_storage_metrics_t mw_storage__metrics;

/* Threads backend: run one request synchronously (a pool thread). */
int mw_storage__sync_run(mw_storage_req_t *req);
/* Component helpers shared by the backends: the prefix of `path` made of
 * its first n '/'-separated components into out; returns false when path
 * has fewer than n+1 components (so the prefix is not a parent). */
bool mw_storage__parent_prefix(const char *path, unsigned n, char *out, size_t cap);
unsigned mw_storage__depth(const char *path);
/* Fill req->priv.tmp with "<dir>/.tmp-<32 hex>". */
void mw_storage__tmp_name(mw_storage_req_t *req);

#endif
