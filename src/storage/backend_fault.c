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
 * The fault configuration can change at run time (mw_storage_fault_set, on
 * the loop thread): a request copies what it needs (armed, step mask,
 * errno, the on_step hook, the power-loss journal) at submission, so pool
 * threads never read st->fault and a change affects later submissions only.
 *
 * Power loss: with a journal attached (fault.power_loss, powerloss.c),
 * mw_storage__step() lets it snapshot the file or directory before an
 * fsync, mw_storage__step_end() lets it commit after, and once the journal
 * has tripped every step but a close fails with -EIO (the device is gone;
 * closes still run so no fd leaks).
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "storage/storage_int.h"

static int fault_check(const mw_storage_fault_t *f, mw_err_t *err) {
  if ((f->fail_nth != 0 || f->fail_prefix != NULL) && (f->fail_errno <= 0 || f->fail_errno > 4095))
    return mw_err_set(err, -EINVAL, "storage: fault fail_errno must be a positive errno");
  return 0;
}

/* Replace the fault settings (power_loss excepted) with *f (NULL = none). */
static int fault_apply(mw_storage_t *st, const mw_storage_fault_t *f) {
  char *prefix = NULL;
  if (f != NULL && f->fail_prefix != NULL && (prefix = strdup(f->fail_prefix)) == NULL)
    return -ENOMEM;
  mw_powerloss_t *pl = st->fault.power_loss;
  free(st->fault_prefix);
  st->fault_prefix = prefix;
  if (f != NULL) st->fault = *f;
  else memset(&st->fault, 0, sizeof st->fault);
  st->fault.fail_prefix = prefix;
  st->fault.power_loss = pl;
  atomic_store(&st->fsync_fail_pending, f != NULL && f->fail_fsync_once);
  return 0;
}

int mw_storage__fault_open(mw_storage_t *st, mw_err_t *err) {
  assert(st != NULL && st->loop != NULL);
  memset(&st->fault, 0, sizeof st->fault);
  const mw_storage_fault_t *f = st->cfg.fault;
  st->cfg.fault = NULL;
  st->submit_failures = st->cfg.test_uring_submit_failures;
  if (f == NULL) return 0;
  int rc = fault_check(f, err);
  if (rc < 0) return rc;
  if (f->power_loss != NULL && (rc = mw_powerloss__attach(f->power_loss, st->rootfd)) < 0)
    return mw_err_set(err, rc, "storage: power_loss journal is for another root than %s",
                      st->root);
  st->fault.power_loss = f->power_loss;
  if (fault_apply(st, f) < 0) return mw_err_set(err, -ENOMEM, "storage: out of memory");
  return 0;
}

int mw_storage_fault_set(mw_storage_t *st, const mw_storage_fault_t *f) {
  assert(st != NULL);
  if (f != NULL && fault_check(f, NULL) < 0) return -EINVAL;
  mw_powerloss_t *want = f != NULL ? f->power_loss : NULL;
  if (want != NULL && want != st->fault.power_loss) return -EINVAL;
  return fault_apply(st, f);
}

void mw_storage_fault_get(const mw_storage_t *st, mw_storage_fault_t *out) {
  assert(st != NULL && out != NULL);
  *out = st->fault;
  out->fail_fsync_once = atomic_load(&((mw_storage_t *)st)->fsync_fail_pending);
}

void mw_storage__fault_close(mw_storage_t *st) {
  assert(st != NULL);
  if (st->fault.power_loss != NULL) mw_powerloss__detach(st->fault.power_loss);
  st->fault.power_loss = NULL;
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
  req->priv.on_step = f->on_step;
  req->priv.on_step_ctx = f->on_step_ctx;
  req->priv.pl = f->power_loss;
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

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int injected(mw_storage_step_t step, int rc) {
  mw_storage__count_fault(step);
  return rc;
}

int mw_storage__step(mw_storage_req_t *req, mw_storage_step_t step) {
  mw_storage_req_priv_t *p = &req->priv;
  assert(p->st != NULL && step < MW_STEP_COUNT_);
  if (p->result == 0) p->step = (uint8_t)step; /* keep the failing step */
  if (p->on_step != NULL) p->on_step(p->on_step_ctx, req, step);
  if (p->armed && (p->fault_steps & MW_STEP_BIT(step))) {
    p->armed = 0;
    return injected(step, -p->fault_errno);
  }
  if (step == MW_STEP_FSYNC && atomic_load(&p->st->fsync_fail_pending) &&
      atomic_exchange(&p->st->fsync_fail_pending, false))
    return injected(step, -EIO);
  if (p->pl != NULL && mw_powerloss_tripped(p->pl) && step != MW_STEP_CLOSE &&
      step != MW_STEP_DIRCLOSE)
    return injected(step, -EIO);
  if (step == MW_STEP_FSYNC || step == MW_STEP_DIRSYNC) {
    if (p->pl != NULL) mw_powerloss__before(p->pl, req, step);
    p->t_sync_ns = mono_ns();
  }
  return 0;
}

int mw_storage__step_end(mw_storage_req_t *req, mw_storage_step_t step, int rc) {
  mw_storage_req_priv_t *p = &req->priv;
  assert(step == MW_STEP_OPEN || step == MW_STEP_MKDIR || step == MW_STEP_FSYNC ||
         step == MW_STEP_DIRSYNC);
  bool sync = step == MW_STEP_FSYNC || step == MW_STEP_DIRSYNC;
  if (sync && p->t_sync_ns != 0 && rc == 0 && mw_storage__metrics.ok) {
    double s = (double)(mono_ns() - p->t_sync_ns) * 1e-9;
    mw_histogram_observe(mw_storage__metrics.fsync[step == MW_STEP_DIRSYNC],
                         mw_storage__metrics.fsync_family, s);
  }
  if (sync) p->t_sync_ns = 0;
  if (p->pl != NULL) rc = mw_powerloss__after(p->pl, req, step, rc);
  return rc;
}
