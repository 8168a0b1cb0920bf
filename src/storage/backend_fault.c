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
 *     in fail_steps, or -EIO for the backend's first durability step while
 *     fail_sync_once is pending (an atomic, since pool threads race for it).
 * An armed request fails once; its cleanup steps then run normally.
 *
 * The fault configuration can change at run time (mw_storage_fault_set, on
 * the loop thread): a request copies what it needs (armed, step mask,
 * errno, the on_step hook, the power-loss journal) at submission, so pool
 * threads never read st->fault and a change affects later submissions only.
 *
 * Step numbers and names belong to the backend (its ops table); this layer
 * only compares numbers against the armed mask and the backend's sync_step.
 * The local backends wrap mw_storage__step() with the power-loss journal
 * (local.c).
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
  mw_storage_fault_t keep = st->fault; /* fixed at open */
  free(st->fault_prefix);
  st->fault_prefix = prefix;
  if (f != NULL) st->fault = *f;
  else memset(&st->fault, 0, sizeof st->fault);
  st->fault.fail_prefix = prefix;
  st->fault.power_loss = keep.power_loss;
  st->fault.uring_refuse = keep.uring_refuse;
  st->fault.uring_submit_errno = keep.uring_submit_errno;
  st->fault.uring_submit_failures = keep.uring_submit_failures;
  atomic_store(&st->sync_fail_pending, f != NULL && f->fail_sync_once);
  return 0;
}

int mw_storage__fault_open(mw_storage_t *st, mw_err_t *err) {
  assert(st != NULL);
  assert(st->loop != NULL);
  memset(&st->fault, 0, sizeof st->fault);
  const mw_storage_fault_t *f = st->cfg.fault;
  st->cfg.fault = NULL;
  if (f == NULL) return 0;
  int rc = fault_check(f, err);
  if (rc < 0) return rc;
  st->fault = *f; /* the fields fixed at open (power_loss, uring_*) */
  st->fault.fail_prefix = NULL;
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

void mw_storage_fault_get_hooks(const mw_storage_t *st, mw_storage_fault_t *out) {
  assert(st != NULL);
  assert(out != NULL);
  memset(out, 0, sizeof *out);
  out->on_step = st->fault.on_step;
  out->on_step_ctx = st->fault.on_step_ctx;
  out->power_loss = st->fault.power_loss;
  out->uring_refuse = st->fault.uring_refuse;
  out->uring_submit_errno = st->fault.uring_submit_errno;
  out->uring_submit_failures = st->fault.uring_submit_failures;
  assert(fault_check(out, NULL) == 0); /* settable as it is */
}

void mw_storage_fault_get(const mw_storage_t *st, mw_storage_fault_t *out) {
  assert(st != NULL);
  assert(out != NULL);
  *out = st->fault;
  out->fail_sync_once = atomic_load(&((mw_storage_t *)st)->sync_fail_pending);
}

void mw_storage__fault_close(mw_storage_t *st) {
  assert(st != NULL);
  free(st->fault_prefix);
  st->fault_prefix = NULL;
}

static int injected(const mw_storage_t *st, unsigned step, int rc);

static bool prefixed(const mw_storage_fault_t *f, const char *key) {
  return f->fail_prefix != NULL && strncmp(key, f->fail_prefix, strlen(f->fail_prefix)) == 0;
}

int mw_storage__fault_arm(mw_storage_t *st, mw_storage_req_t *req) {
  assert(st != NULL);
  assert(req != NULL);
  const mw_storage_fault_t *f = &st->fault;
  bool nth = f->fail_nth != 0 && st->nsubmitted == f->fail_nth;
  req->priv.armed = (nth || prefixed(f, req->priv.key)) && req->priv.op != MW_OP_DELETE_MANY;
  req->priv.fault_steps = f->fail_steps == 0 ? UINT32_MAX : f->fail_steps;
  req->priv.fault_errno = f->fail_errno;
  req->priv.on_step = f->on_step;
  req->priv.on_step_ctx = f->on_step_ctx;
  req->priv.many_armed = NULL;
  if (req->priv.op != MW_OP_DELETE_MANY || (!nth && f->fail_prefix == NULL)) return 0;
  assert(req->priv.nmany > 0);
  assert(req->priv.many != NULL);
  uint8_t *armed = calloc(req->priv.nmany, 1);
  if (armed == NULL) return -ENOMEM;
  armed[0] = nth;
  for (uint32_t i = 0; i < req->priv.nmany; i++) armed[i] |= prefixed(f, req->priv.many[i]);
  req->priv.many_armed = armed;
  return 0;
}

int mw_storage__key_fault(mw_storage_req_t *req, size_t i, unsigned step) {
  mw_storage_req_front_t *p = &req->priv;
  assert(p->op == MW_OP_DELETE_MANY);
  assert(i < p->nmany);
  assert(step < MW_STORAGE_MAX_STEPS);
  if (p->many_armed == NULL || !p->many_armed[i] || !(p->fault_steps & MW_STEP_BIT(step))) return 0;
  p->many_armed[i] = 0;
  return injected(p->st, step, -p->fault_errno);
}

static void delay_fire(uv_timer_t *t) {
  mw_storage_t *st = t->data;
  uint64_t now = uv_now(st->loop);
  while (st->dhead != NULL) {
    mw_storage_req_t *req = st->dhead;
    uint64_t due = req->priv.t_start_ms + st->fault.delay_ms;
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
  assert(st != NULL);
  assert(req != NULL);
  assert(req->priv.next == NULL);
  if (st->fault.delay_ms == 0) {
    st->be->submit(st, req);
    return;
  }
  req->priv.t_start_ms = uv_now(st->loop);
  if (st->dtail) st->dtail->priv.next = req;
  else st->dhead = req;
  st->dtail = req;
  if (!uv_is_active((uv_handle_t *)&st->delay_timer))
    uv_timer_start(&st->delay_timer, delay_fire, st->fault.delay_ms, 0);
}

static int injected(const mw_storage_t *st, unsigned step, int rc) {
  mw_storage__count_fault(st, step);
  return rc;
}

int mw_storage__step(mw_storage_req_t *req, unsigned step) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_t *st = p->st;
  assert(st != NULL);
  assert(step < st->be->n_steps);
  if (p->result == 0) p->step = (uint8_t)step; /* keep the failing step */
  if (p->on_step != NULL) p->on_step(p->on_step_ctx, req, step);
  if (p->armed && (p->fault_steps & MW_STEP_BIT(step))) {
    p->armed = 0;
    return injected(st, step, -p->fault_errno);
  }
  if ((int)step == st->be->sync_step && atomic_load(&st->sync_fail_pending) &&
      atomic_exchange(&st->sync_fail_pending, false))
    return injected(st, step, -EIO);
  return 0;
}
