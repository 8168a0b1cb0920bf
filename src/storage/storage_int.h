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
  /* hashes of directories known durable (their whole ancestry fsynced) */
  uint64_t dircache[MW_STORAGE_DIRCACHE_SLOTS];
};

extern const mw_storage_backend_ops_t mw_storage__uring_ops;
extern const mw_storage_backend_ops_t mw_storage__threads_ops;

/* Front */
void mw_storage__done(mw_storage_req_t *req, int status);
const char *mw_storage__step_name(int step);

/* Fault layer (backend_fault.c) */
int mw_storage__fault_open(mw_storage_t *st, mw_err_t *err);
void mw_storage__fault_close(mw_storage_t *st);
void mw_storage__fault_arm(mw_storage_t *st, mw_storage_req_t *req);
/* Start the request now or after the configured delay. */
void mw_storage__fault_start(mw_storage_t *st, mw_storage_req_t *req);
int mw_storage__step(mw_storage_req_t *req, mw_storage_step_t step);

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
