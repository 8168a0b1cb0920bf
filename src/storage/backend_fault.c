/*
 * backend_fault.c — fault injection wrapped around whichever backend runs.
 *
 * Design: faults are injected *inside* the real backends, at the syscall
 * step where a real failure would happen, so the backends' own cleanup paths
 * are what the tests exercise (a write that fails with ENOSPC after the temp
 * file exists must still unlink it). Three places cooperate:
 *   - mw_storage__fault_arm()   (loop thread, at submission) decides whether
 *     this request is armed: it is the fail_nth-th accepted submission, or
 *     its key starts with fail_prefix.
 *   - mw_storage__fault_start() (loop thread) starts the request now, or
 *     after delay_ms via one timer and a FIFO list (the delay is the same for
 *     every request, so FIFO order is deadline order).
 *   - mw_storage__step()        (loop or pool thread) is called by the
 *     backends before every syscall step. It records the step, calls the
 *     test's on_step hook (which may _exit() to model a crash at an exact
 *     step), and returns -fail_errno when the armed request reaches a step
 *     in fail_steps, or -EIO for the first file fsync while
 *     fail_fsync_once is pending (an atomic, since pool threads race for it).
 * An armed request fails once; its cleanup steps then run normally.
 *
 * Power loss (dropping everything that was not fsynced) needs a filesystem
 * we control (e.g. a dm-log-writes or a FUSE layer); it is not implemented.
 * Asking for it fails open() with -ENOTSUP; on_step is the hook to build it.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "storage/storage_int.h"

int mw_storage__fault_open(mw_storage_t *st, mw_err_t *err) {
  assert(st != NULL && st->loop != NULL);
  memset(&st->fault, 0, sizeof st->fault);
  const mw_storage_fault_t *f = st->cfg.fault;
  st->cfg.fault = NULL;
  if (f == NULL) return 0;
  if (f->power_loss)
    return mw_err_set(err, -ENOTSUP, "storage: fault power_loss is not implemented");
  if ((f->fail_nth != 0 || f->fail_prefix != NULL) && (f->fail_errno <= 0 || f->fail_errno > 4095))
    return mw_err_set(err, -EINVAL, "storage: fault fail_errno must be a positive errno");
  st->fault = *f;
  if (f->fail_prefix != NULL) {
    st->fault_prefix = strdup(f->fail_prefix);
    if (st->fault_prefix == NULL) return mw_err_set(err, -ENOMEM, "storage: out of memory");
  }
  st->fault.fail_prefix = st->fault_prefix;
  atomic_store(&st->fsync_fail_pending, f->fail_fsync_once);
  return 0;
}

void mw_storage__fault_close(mw_storage_t *st) {
  assert(st != NULL);
  free(st->fault_prefix);
  st->fault_prefix = NULL;
}

void mw_storage__fault_arm(mw_storage_t *st, mw_storage_req_t *req) {
  assert(st != NULL && req != NULL);
  const mw_storage_fault_t *f = &st->fault;
  bool armed = (f->fail_nth != 0 && st->nsubmitted == f->fail_nth) ||
               (f->fail_prefix != NULL &&
                strncmp(req->priv.key, f->fail_prefix, strlen(f->fail_prefix)) == 0);
  req->priv.armed = armed;
  req->priv.fault_steps = f->fail_steps == 0 ? MW_STEP_ALL : f->fail_steps;
  req->priv.fault_errno = f->fail_errno;
}

static void delay_fire(uv_timer_t *t) {
  mw_storage_t *st = t->data;
  uint64_t now = uv_now(st->loop);
  while (st->dhead != NULL) {
    mw_storage_req_t *req = st->dhead;
    uint64_t due = req->priv.t_start_ns + st->fault.delay_ms;
    if (due > now) {
      uv_timer_start(&st->delay_timer, delay_fire, due - now, 0);
      return;
    }
    st->dhead = req->priv.next;
    if (st->dhead == NULL) st->dtail = NULL;
    req->priv.next = NULL;
    st->be->submit(st, req);
  }
}

void mw_storage__fault_start(mw_storage_t *st, mw_storage_req_t *req) {
  assert(st != NULL && req != NULL && req->priv.next == NULL);
  if (st->fault.delay_ms == 0) {
    st->be->submit(st, req);
    return;
  }
  /* t_start_ns holds the loop time in ms for the delay list. */
  req->priv.t_start_ns = uv_now(st->loop);
  if (st->dtail) st->dtail->priv.next = req;
  else st->dhead = req;
  st->dtail = req;
  if (!uv_is_active((uv_handle_t *)&st->delay_timer))
    uv_timer_start(&st->delay_timer, delay_fire, st->fault.delay_ms, 0);
}

int mw_storage__step(mw_storage_req_t *req, mw_storage_step_t step) {
  mw_storage_req_priv_t *p = &req->priv;
  mw_storage_t *st = p->st;
  assert(st != NULL && step < MW_STEP_COUNT_);
  if (p->result == 0) p->step = (uint8_t)step; /* keep the failing step */
  if (st->fault.on_step != NULL) st->fault.on_step(st->fault.on_step_ctx, req, step);
  if (p->armed && (p->fault_steps & MW_STEP_BIT(step))) {
    p->armed = 0;
    return -p->fault_errno;
  }
  if (step == MW_STEP_FSYNC && atomic_load(&st->fsync_fail_pending) &&
      atomic_exchange(&st->fsync_fail_pending, false))
    return -EIO;
  return 0;
}
