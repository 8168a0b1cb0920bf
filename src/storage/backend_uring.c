/*
 * backend_uring.c — the io_uring backend.
 *
 * One ring per storage instance. The ring's eventfd is registered with
 * io_uring_register_eventfd() and watched by a uv_poll_t on the loop; when it
 * becomes readable we drain the eventfd, reap every CQE, advance each
 * request's state machine (which may prepare its next SQE), and submit once.
 * io_uring_submit() never waits: openat(O_CREAT), linkat, renameat,
 * unlinkat, mkdirat, statx and fsync are always punted by the kernel to its
 * io-wq workers, and writes go there whenever they would block, so the loop
 * thread never blocks on the disk.
 *
 * Step by step, a request has at most one SQE in flight and the state
 * machine below decides between steps (short writes, ENOENT-then-mkdir and
 * EEXIST need decisions). The ring has room for every request in flight to
 * hold a whole chain (below), so an SQE is always available.
 *
 * Linked chains: when no fault, hook or power-loss journal watches the
 * request, the steps that need no decision go to the kernel as one
 * IOSQE_IO_LINK chain. A put of at most MAX_IO_BYTES goes as one chain from
 * its temp's open to its directory's close (one submission, one loop round
 * trip per acknowledged put):
 *
 *   openat(tmp, fixed slot) -> write(slot) -> fsync(slot) -> close(slot)
 *     -> linkat|renameat(tmp, key) [-> unlinkat(tmp)]
 *     -> openat(dir, same slot) -> fsync(slot) -> close(slot)
 *
 * A larger put opens and writes step by step, then sends the tail from its
 * fsync on. The kernel starts each step only when the one before succeeded,
 * in that order, so the durability order is the step-by-step one; what
 * changes is that the loop is not woken to submit each next step (a put was
 * 9 loop round trips, then 3 with the linked tail, now 1). The temp and then
 * the directory are opened into a registered fixed-file slot (one per
 * request in flight) so their fsyncs can be linked. A failing step cancels
 * the rest (-ECANCELED), and so does a short write (checked on this kernel:
 * a write cut short by RLIMIT_FSIZE in a chain completes with its byte count
 * and the linked fsync and close get -ECANCELED, inline and from io-wq
 * alike). After the chain's last CQE the state machine takes over from the
 * failed step exactly as if it had run alone: a temp name taken or a
 * missing directory goes to the open's retry or mkdir, a short write writes
 * the rest through the slot and sends the tail, a failed unlink falls back
 * to the step-by-step directory fsync. Steps are announced to
 * mw_local__step() when the chain is prepared, which is why chains are used
 * only when nothing watches them.
 *
 * A whole-object get goes as a statx by path, then one chain (open, reads,
 * close), checked against that size ("linked get" below).
 *
 * Fault injection: before each step mw_local__step() is asked; when it
 * returns an error we submit a NOP instead and substitute the error when the
 * NOP completes, so the injected failure takes the same path as a real one.
 *
 * list, delete_prefix, sweep_tmp and delete_root (no getdents in io_uring)
 * run on the thread pool, as the threads engine runs them (local.c).
 *
 * The uv_poll handle is referenced only while requests are in flight, so an
 * idle storage does not keep uv_run() alive.
 *
 * Submission failures: io_uring_submit() can fail (EAGAIN/EBUSY/ENOMEM when
 * the kernel is short of resources or the CQ overflowed) or submit only
 * part of the queue, and the SQEs left in the ring would then wait for a
 * completion that never comes when nothing else is in flight. So whenever
 * SQEs remain unsubmitted after a flush, a timer retries (reaping first,
 * which is what EBUSY asks for) with a backoff of 1, 2, 4 … 100 ms; the
 * first failure and every 100th are logged. An error that never clears
 * (the ring is broken) keeps the requests pending, logged, rather than
 * failing them: their SQEs are in the kernel's ring and cannot be taken
 * back without risking a second completion.
 *
 * delete: unlinkat, then (fsync on) the key's directory is fsynced, so the
 * removal is durable; a missing directory means there is nothing to sync.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/metrics.h"
#include "storage/local_int.h"

_Static_assert(sizeof(struct statx) <= sizeof(((mw_storage_req_local_t *)0)->stx),
               "statx buffer too small");

#define MAX_IO_BYTES ((size_t)1 << 20) /* larger single writes measured 3x slower on ext4 */
#define ASYNC_WRITE_BYTES ((size_t)256 << 10)

/* Elements of a linked chain (see above): a whole put from C_OPEN, the
 * tail from C_FSYNC. */
enum {
  C_OPEN = 0, C_WRITE, C_FSYNC, C_CLOSE, C_LINK, C_UNLINK, C_DIROPEN, C_DIRSYNC, C_DIRCLOSE,
  C_COUNT
};
#define CHAIN_NONE 0xff
#define SQES_PER_REQUEST C_COUNT
/* A chain CQE's user data is the request's address with the element in the
 * top 4 bits (user-space addresses stay below 2^57 on x86-64 and arm64). */
#define UD_ELEM_SHIFT 60

typedef struct uring {
  mw_storage_t *st;
  struct io_uring ring;
  bool chain_ok;         /* fixed-file slots registered: linked tails allowed */
  int16_t *free_slots;   /* stack of unused fixed-file slots */
  uint32_t n_free, n_slots;
  int efd;
  uv_poll_t poll;
  uv_timer_t retry;      /* resubmits SQEs a failed or partial submit left */
  uint32_t backoff_ms;
  uint64_t submit_failures;
  int closing_handles;
  uint32_t active; /* requests with an SQE or CQE outstanding */
  bool reaping;    /* inside the CQE loop: submit once at the end */
  void (*close_done)(mw_storage_t *st);
} uring_t;

enum state {
  S_OPEN = 1, S_MKDIR, S_WRITE, S_FSYNC, S_CLOSE, S_LINK, S_DIROPEN, S_DIRSYNC, S_DIRCLOSE,
  S_UNLINK, S_ERR_CLOSE, S_ERR_DIRCLOSE, S_ERR_UNLINK,
  S_GOPEN, S_GSTAT, S_GREAD, S_GCLOSE, S_HSTAT, S_DUNLINK,
  S_CHAIN, S_ERR_SLOTCLOSE, S_GPSTAT, S_GCHAIN,
};

static const uint8_t required_ops[] = {
    IORING_OP_NOP, IORING_OP_OPENAT, IORING_OP_WRITE, IORING_OP_READ, IORING_OP_FSYNC,
    IORING_OP_CLOSE, IORING_OP_LINKAT, IORING_OP_RENAMEAT, IORING_OP_UNLINKAT,
    IORING_OP_MKDIRAT, IORING_OP_STATX,
};

static void reap(uring_t *u);

/* memwald_storage_uring_chains_total{chain}: whole puts, tails and gets
 * sent as one linked chain, and chains a failed or short step broke (the
 * request then went on step by step). Tells an operator whether requests
 * take the fast path. */
enum { CHAIN_WHOLE = 0, CHAIN_TAIL, CHAIN_GET, CHAIN_BROKEN, CHAIN_KINDS };
static mw_metric_t *chain_series[CHAIN_KINDS];

static void chain_metrics_register(void) {
  static const char *const label[] = {"chain"};
  mw_metric_family_t *f = mw_metrics_register(
      mw_metrics_default(), MW_METRIC_COUNTER, "memwald_storage_uring_chains_total",
      "io_uring linked chains: whole puts, tails after the write, gets, and chains broken by a step.",
      label, 1, NULL, 0);
  if (f == NULL) return;
  static const char *const names[CHAIN_KINDS] = {"whole", "tail", "get", "broken"};
  for (int i = 0; i < CHAIN_KINDS; i++) chain_series[i] = mw_metric_series(f, &names[i]);
}

static void chain_count(int kind) {
  if (chain_series[kind] != NULL) mw_counter_add(chain_series[kind], 1);
}

static void retry_cb(uv_timer_t *t) {
  uring_t *u = t->data;
  reap(u); /* frees CQ space (EBUSY), then flushes */
}

static void flush(uring_t *u) {
  assert(u->backoff_ms <= 100); /* the retry backoff's cap */
  if (u->reaping) return;
  int rc;
  mw_storage_t *st = u->st;
  mw_local_t *lo = mw_local(st);
  if (lo->submit_failures > 0) { /* test hook: as if the kernel refused */
    lo->submit_failures--;
    rc = st->fault.uring_submit_errno < 0 ? st->fault.uring_submit_errno : -EAGAIN;
  } else {
    do rc = io_uring_submit(&u->ring);
    while (rc == -EINTR);
  }
  if (rc >= 0 && io_uring_sq_ready(&u->ring) == 0) {
    u->backoff_ms = 0;
    return;
  }
  /* SQEs are still waiting in the ring: never count on a completion. */
  if (rc < 0 && u->submit_failures++ % 100 == 0)
    mw_log_err("storage: io_uring_submit: %s (%llu failures so far); retrying", strerror(-rc),
               (unsigned long long)u->submit_failures);
  u->backoff_ms = u->backoff_ms == 0 ? 1 : u->backoff_ms >= 50 ? 100 : u->backoff_ms * 2;
  if (!uv_is_active((uv_handle_t *)&u->retry))
    uv_timer_start(&u->retry, retry_cb, u->backoff_ms, 0);
}

static struct io_uring_sqe *sqe_get(uring_t *u) {
  struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
  if (sqe == NULL) { /* cannot happen with ring >= max_inflight; be safe */
    io_uring_submit(&u->ring);
    sqe = io_uring_get_sqe(&u->ring);
  }
  assert(sqe != NULL);
  return sqe;
}

/* The put's temp: an fd, or the request's fixed slot after a linked open. */
static void prep_fd_fsync(struct io_uring_sqe *sqe, const mw_storage_req_local_t *l) {
  io_uring_prep_fsync(sqe, l->fd, 0);
  if (l->fd_fixed) sqe->flags |= IOSQE_FIXED_FILE;
}

static void prep_fd_close(struct io_uring_sqe *sqe, const mw_storage_req_local_t *l) {
  if (l->fd_fixed) io_uring_prep_close_direct(sqe, (unsigned)l->fd);
  else io_uring_prep_close(sqe, l->fd);
}

static void prep_fd_write(struct io_uring_sqe *sqe, const mw_storage_req_t *req) {
  const mw_storage_req_front_t *p = &req->priv;
  const mw_storage_req_local_t *l = &req->be.local;
  size_t n = p->len - l->done;
  if (n > MAX_IO_BYTES) n = MAX_IO_BYTES;
  io_uring_prep_write(sqe, l->fd, p->src + l->done, (unsigned)n, l->done);
  if (l->fd_fixed) sqe->flags |= IOSQE_FIXED_FILE;
  if (n >= ASYNC_WRITE_BYTES) sqe->flags |= IOSQE_ASYNC;
}

/* Prepare the SQE for `state` (whose fault step is `step`). */
static void issue(uring_t *u, mw_storage_req_t *req, int state, mw_local_step_t step) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_local_t *l = &req->be.local;
  int rootfd = mw_local(u->st)->rootfd;
  l->state = (uint8_t)state;
  struct io_uring_sqe *sqe = sqe_get(u);
  int inj = mw_local__step(req, step);
  l->injected = inj;
  if (inj < 0) {
    io_uring_prep_nop(sqe);
  } else {
    switch (state) {
      case S_OPEN:
        io_uring_prep_openat(sqe, rootfd, l->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        break;
      case S_MKDIR: io_uring_prep_mkdirat(sqe, rootfd, l->scratch, 0755); break;
      case S_WRITE: prep_fd_write(sqe, req); break;
      case S_FSYNC: prep_fd_fsync(sqe, l); break;
      case S_CLOSE: case S_ERR_CLOSE: case S_GCLOSE: prep_fd_close(sqe, l); break;
      case S_LINK:
        if (p->op == MW_OP_PUT_IF_ABSENT)
          io_uring_prep_linkat(sqe, rootfd, l->tmp, rootfd, p->key, 0);
        else
          io_uring_prep_renameat(sqe, rootfd, l->tmp, rootfd, p->key, 0);
        break;
      case S_DIROPEN:
        io_uring_prep_openat(sqe, rootfd, l->scratch, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
        break;
      case S_DIRSYNC: io_uring_prep_fsync(sqe, l->dirfd, 0); break;
      case S_DIRCLOSE: case S_ERR_DIRCLOSE: io_uring_prep_close(sqe, l->dirfd); break;
      case S_UNLINK: case S_ERR_UNLINK: io_uring_prep_unlinkat(sqe, rootfd, l->tmp, 0); break;
      case S_GOPEN: io_uring_prep_openat(sqe, rootfd, p->key, O_RDONLY | O_CLOEXEC, 0); break;
      case S_GSTAT:
        io_uring_prep_statx(sqe, l->fd, "", AT_EMPTY_PATH, STATX_TYPE | STATX_SIZE,
                            (struct statx *)l->stx);
        break;
      case S_GREAD: {
        uint64_t want = req->size; /* bytes to read, set after stat */
        size_t n = (size_t)(want - req->buf.len);
        if (n > MAX_IO_BYTES) n = MAX_IO_BYTES;
        io_uring_prep_read(sqe, l->fd, req->buf.data + req->buf.len, (unsigned)n,
                           p->off + req->buf.len);
        break;
      }
      case S_HSTAT:
        io_uring_prep_statx(sqe, rootfd, p->key, AT_SYMLINK_NOFOLLOW, STATX_TYPE | STATX_SIZE,
                            (struct statx *)l->stx);
        break;
      case S_GPSTAT: /* a linked get's size, by path (follows links, as the open does) */
        io_uring_prep_statx(sqe, rootfd, p->key, 0, STATX_TYPE | STATX_SIZE, (struct statx *)l->stx);
        break;
      case S_DUNLINK: io_uring_prep_unlinkat(sqe, rootfd, p->key, 0); break;
      default: assert(!"bad state");
    }
  }
  io_uring_sqe_set_data(sqe, req);
}

static void finish(uring_t *u, mw_storage_req_t *req, int status) {
  assert(u->active > 0);
  if (--u->active == 0) uv_unref((uv_handle_t *)&u->poll);
  mw_local__done(req, status);
}

/* Failure of a put: close, unlink the temp, then report `err`. */
static void put_fail(uring_t *u, mw_storage_req_t *req, int err) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_local_t *l = &req->be.local;
  assert(err < 0);
  if (p->result == 0) p->result = err;
  if (l->fd >= 0) issue(u, req, S_ERR_CLOSE, MW_STEP_CLOSE);
  else if (l->dirfd >= 0) issue(u, req, S_ERR_DIRCLOSE, MW_STEP_DIRCLOSE);
  else if (l->tmp_made) issue(u, req, S_ERR_UNLINK, MW_STEP_UNLINK);
  else finish(u, req, p->result);
}

static bool whole_chain_allowed(const uring_t *u, const mw_storage_req_t *req);
static void issue_chain(uring_t *u, mw_storage_req_t *req, int first);

static void open_tmp(uring_t *u, mw_storage_req_t *req) {
  mw_local__tmp_name(req);
  if (whole_chain_allowed(u, req)) issue_chain(u, req, C_OPEN);
  else issue(u, req, S_OPEN, MW_STEP_OPEN);
}

static void dir_next(uring_t *u, mw_storage_req_t *req) {
  assert(req->be.local.walk <= mw_local__depth(req->priv.key)); /* a directory of the key */
  assert(req->be.local.dirfd < 0); /* the last one is closed */
  mw_local__parent_prefix(req->priv.key, req->be.local.walk, req->be.local.scratch,
                            sizeof req->be.local.scratch);
  issue(u, req, S_DIROPEN, MW_STEP_DIROPEN);
}

/* The object is visible: fsync its directory (and ancestors), or finish. */
static void sync_dirs(uring_t *u, mw_storage_req_t *req) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_local_t *l = &req->be.local;
  assert(l->fd < 0); /* the object's file is closed before its directory syncs */
  if (!mw_local(u->st)->durable) return finish(u, req, 0);
  l->walk = (uint16_t)mw_local__depth(p->key);
  dir_next(u, req);
}

/* ---------------------------------------------------------- linked tail */

/* The tail may be linked (the request holds a slot already when its
 * whole-put chain broke at the write). */
static bool chain_allowed(const uring_t *u, const mw_storage_req_t *req) {
  const mw_storage_req_front_t *p = &req->priv;
  const mw_storage_req_local_t *l = &req->be.local;
  return u->chain_ok && (l->slot >= 0 || u->n_free > 0) && mw_local(u->st)->durable &&
         !p->armed && p->on_step == NULL && l->pl == NULL && !l->sync_parents &&
         !atomic_load(&u->st->sync_fail_pending) &&
         io_uring_sq_space_left(&u->ring) >= SQES_PER_REQUEST;
}

/* The whole put may be one chain: one write of the bytes, put or
 * put_if_absent (delete and get have no tail). */
static bool whole_chain_allowed(const uring_t *u, const mw_storage_req_t *req) {
  const mw_storage_req_front_t *p = &req->priv;
  return (p->op == MW_OP_PUT || p->op == MW_OP_PUT_IF_ABSENT) && p->len > 0 &&
         p->len <= MAX_IO_BYTES && req->be.local.fd < 0 && chain_allowed(u, req);
}

static void slot_release(uring_t *u, mw_storage_req_local_t *l) {
  if (l->slot < 0) return;
  assert(u->n_free < u->n_slots);
  assert(!l->fd_fixed || l->fd < 0);
  u->free_slots[u->n_free++] = l->slot;
  l->slot = -1;
}

/* The temp's fd is gone (closed, or released by a close that failed);
 * a fixed slot goes back to the pool with it. */
static void fd_released(uring_t *u, mw_storage_req_local_t *l) {
  assert(!l->fd_fixed || l->fd == l->slot);
  bool fixed = l->fd_fixed;
  l->fd = -1;
  l->fd_fixed = 0;
  if (fixed) slot_release(u, l);
}

static mw_local_step_t chain_step(const mw_storage_req_t *req, int c) {
  static const mw_local_step_t steps[C_COUNT] = {
      MW_STEP_OPEN,  MW_STEP_WRITE,   MW_STEP_FSYNC,   MW_STEP_CLOSE,   MW_STEP_LINK,
      MW_STEP_UNLINK, MW_STEP_DIROPEN, MW_STEP_DIRSYNC, MW_STEP_DIRCLOSE};
  assert(c >= 0);
  assert(c < C_COUNT);
  return c == C_LINK && req->priv.op != MW_OP_PUT_IF_ABSENT ? MW_STEP_RENAME : steps[c];
}

/* The SQE of chain element c (a chain from element `first`). */
static void prep_element(uring_t *u, mw_storage_req_t *req, struct io_uring_sqe *sqe, int c,
                         int first) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_local_t *l = &req->be.local;
  int rootfd = mw_local(u->st)->rootfd;
  bool pia = p->op == MW_OP_PUT_IF_ABSENT;
  assert(l->slot >= 0);
  switch (c) {
    case C_OPEN: /* a fixed slot is no fd of the process: O_CLOEXEC is refused (EINVAL) */
      io_uring_prep_openat_direct(sqe, rootfd, l->tmp, O_WRONLY | O_CREAT | O_EXCL, 0644,
                                  (unsigned)l->slot);
      break;
    case C_WRITE: /* all of it, through the slot the open fills */
      io_uring_prep_write(sqe, l->slot, p->src, (unsigned)p->len, 0);
      sqe->flags |= IOSQE_FIXED_FILE;
      if (p->len >= ASYNC_WRITE_BYTES) sqe->flags |= IOSQE_ASYNC;
      break;
    case C_FSYNC:
      io_uring_prep_fsync(sqe, first == C_OPEN ? l->slot : l->fd, 0);
      if (first == C_OPEN || l->fd_fixed) sqe->flags |= IOSQE_FIXED_FILE;
      break;
    case C_CLOSE:
      if (first == C_OPEN || l->fd_fixed) io_uring_prep_close_direct(sqe, (unsigned)l->slot);
      else io_uring_prep_close(sqe, l->fd);
      break;
    case C_LINK:
      if (pia) io_uring_prep_linkat(sqe, rootfd, l->tmp, rootfd, p->key, 0);
      else io_uring_prep_renameat(sqe, rootfd, l->tmp, rootfd, p->key, 0);
      break;
    case C_UNLINK: io_uring_prep_unlinkat(sqe, rootfd, l->tmp, 0); break;
    case C_DIROPEN:
      /* a fixed slot is no fd of the process: O_CLOEXEC is refused (EINVAL) */
      io_uring_prep_openat_direct(sqe, rootfd, l->scratch, O_RDONLY | O_DIRECTORY, 0,
                                  (unsigned)l->slot);
      break;
    case C_DIRSYNC:
      io_uring_prep_fsync(sqe, l->slot, 0);
      sqe->flags |= IOSQE_FIXED_FILE;
      break;
    case C_DIRCLOSE: io_uring_prep_close_direct(sqe, (unsigned)l->slot); break;
    default: assert(!"bad chain element");
  }
  if (c != C_DIRCLOSE) sqe->flags |= IOSQE_IO_LINK;
  io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)req | (uint64_t)c << UD_ELEM_SHIFT);
}

/* Prepare a chain from element `first`: C_OPEN for a whole put
 * (whole_chain_allowed: the temp is named, nothing is open), C_FSYNC for
 * the tail after a complete write (chain_allowed). */
static void issue_chain(uring_t *u, mw_storage_req_t *req, int first) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_local_t *l = &req->be.local;
  bool pia = p->op == MW_OP_PUT_IF_ABSENT;
  assert(first == C_OPEN || first == C_FSYNC);
  if (first == C_OPEN) { /* a whole put: nothing open, nothing written, one write */
    assert(l->fd < 0);
    assert(l->done == 0);
    assert(p->len <= MAX_IO_BYTES);
  } else { /* the tail: the temp open and written whole */
    assert(l->fd >= 0);
    assert(l->done == p->len);
  }
  assert(l->slot >= 0 || u->n_free > 0);
  if (l->slot < 0) l->slot = u->free_slots[--u->n_free];
  assert(!l->fd_fixed || l->fd == l->slot);
  l->state = S_CHAIN;
  l->chain_i = 0;
  l->chain_fail_at = CHAIN_NONE;
  l->chain_err = 0;
  l->injected = 0;
  l->walk = (uint16_t)mw_local__depth(p->key);
  mw_local__parent_prefix(p->key, l->walk, l->scratch, sizeof l->scratch);
  uint8_t n = 0;
  for (int c = first; c < C_COUNT; c++) {
    if (c == C_UNLINK && !pia) continue;
    int inj = mw_local__step(req, chain_step(req, c)); /* nothing watches: records it only */
    assert(inj == 0);
    (void)inj;
    struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
    assert(sqe != NULL); /* chain_allowed saw the room */
    prep_element(u, req, sqe, c, first);
    n++;
  }
  assert(n <= SQES_PER_REQUEST);
  l->chain_n = n;
  chain_count(first == C_OPEN ? CHAIN_WHOLE : CHAIN_TAIL);
  if (first == C_FSYNC) mw_local__sync_began(req); /* a whole put's starts after its write */
}

static void advance_put(uring_t *u, mw_storage_req_t *req, int res);

/* One CQE of the tail, for element c. A failing step cancels the ones
 * after it, and the cancelled ones may be reported before it, so each CQE
 * names its element (user data low bits), effects are applied per element,
 * and the decision waits for the last CQE: the failure is the first
 * element whose error is not -ECANCELED. */
/* What a tail element that succeeded did: fds and slots taken or given
 * back, the temp made or gone, the metrics' fsyncs. */
static void chain_effect(uring_t *u, mw_storage_req_t *req, int c, int res) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_local_t *l = &req->be.local;
  assert(res >= 0);
  switch (c) {
    case C_OPEN: /* the temp exists, open in the slot */
      (void)mw_local__step_end(req, MW_STEP_OPEN, res);
      l->fd = l->slot;
      l->fd_fixed = 1;
      l->tmp_made = 1;
      break;
    case C_WRITE:
      l->done += (size_t)res;
      mw_local__sync_began(req); /* the file fsync starts */
      break;
    case C_FSYNC: (void)mw_local__step_end(req, MW_STEP_FSYNC, res); break;
    case C_CLOSE: /* the slot stays the request's: the directory opens into it */
      l->fd = -1;
      l->fd_fixed = 0;
      break;
    case C_LINK:
      p->maybe_written = 1;
      if (p->op == MW_OP_PUT) l->tmp_made = 0;
      break;
    case C_UNLINK: l->tmp_made = 0; break;
    case C_DIROPEN: mw_local__sync_began(req); break; /* the directory fsync starts */
    case C_DIRSYNC: (void)mw_local__step_end(req, MW_STEP_DIRSYNC, res); break;
    case C_DIRCLOSE: slot_release(u, l); break;
  }
}

/* The chain broke at element `at` with err: the state machine takes over
 * from there as if that step had run alone. A close that ran released its
 * fd or slot even if it was not the failure; one that was cancelled left
 * it open. */
static void chain_broken(uring_t *u, mw_storage_req_t *req, int at, int err) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_local_t *l = &req->be.local;
  assert(at >= 0);
  assert(at < C_COUNT);
  chain_count(CHAIN_BROKEN);
  p->step = (uint8_t)chain_step(req, at); /* the failure names its step */
  switch (at) {
    case C_OPEN: /* nothing is open: the step-by-step open decides (mkdir, a new name) */
      slot_release(u, l);
      l->state = S_OPEN;
      l->injected = 0;
      return advance_put(u, req, err);
    case C_WRITE: /* the temp is open in the slot; what is written stays */
      l->state = S_WRITE;
      l->injected = 0;
      if (err == -EINTR || err == -EAGAIN) return issue(u, req, S_WRITE, MW_STEP_WRITE);
      if (err < 0) return put_fail(u, req, err);
      if (err == 0) return put_fail(u, req, -EIO);
      return issue(u, req, S_WRITE, MW_STEP_WRITE); /* short: the rest, then the tail */
    case C_FSYNC: return put_fail(u, req, err);           /* fd still open */
    case C_CLOSE: fd_released(u, l); return put_fail(u, req, err); /* released anyway */
    case C_LINK: slot_release(u, l); return put_fail(u, req, err);
    case C_UNLINK: /* as a lone unlink: warn, then the directory fsync step by step */
      slot_release(u, l);
      l->state = S_UNLINK;
      l->injected = 0;
      return advance_put(u, req, err);
    case C_DIROPEN: slot_release(u, l); return put_fail(u, req, err);
    case C_DIRSYNC: /* the slot is still open: close it, then fail */
      if (p->result == 0) p->result = err;
      l->state = S_ERR_SLOTCLOSE;
      l->injected = 0;
      {
        struct io_uring_sqe *sqe = sqe_get(u);
        io_uring_prep_close_direct(sqe, (unsigned)l->slot);
        io_uring_sqe_set_data(sqe, req);
      }
      return;
    case C_DIRCLOSE: slot_release(u, l); return put_fail(u, req, err);
  }
  assert(!"bad chain element");
}

static void advance_chain(uring_t *u, mw_storage_req_t *req, int c, int res) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_local_t *l = &req->be.local;
  assert(c >= 0);
  assert(c < C_COUNT);
  assert(l->chain_i < l->chain_n); /* one CQE per element */
  l->chain_i++;
  /* a short write breaks the chain like an error (chain_err = its count) */
  bool broke = (res < 0 && res != -ECANCELED) ||
               (c == C_WRITE && res >= 0 && l->done + (size_t)res < p->len);
  if (broke && (l->chain_fail_at == CHAIN_NONE || c < l->chain_fail_at)) {
    l->chain_fail_at = (uint8_t)c;
    l->chain_err = res;
  }
  if (res < 0 && (c == C_FSYNC || c == C_DIRSYNC))
    (void)mw_local__step_end(req, c == C_FSYNC ? MW_STEP_FSYNC : MW_STEP_DIRSYNC, res);
  if (res >= 0) chain_effect(u, req, c, res);
  if (l->chain_i < l->chain_n) return;
  /* the whole chain has answered */
  if (l->chain_fail_at != CHAIN_NONE) return chain_broken(u, req, l->chain_fail_at, l->chain_err);
  assert(l->slot < 0); /* the directory's close gave the slot back */
  assert(l->fd < 0);
  finish(u, req, 0);
}

/* The temp's open answered: write (or fsync, or close) it; a missing
 * directory is made (from the top), a taken name is named anew, each at
 * most MW_LOCAL_MKDIR_TRIES times. */
static void put_opened(uring_t *u, mw_storage_req_t *req, int res) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_local_t *l = &req->be.local;
  assert(l->state == S_OPEN);
  assert(l->mkdir_tries <= MW_LOCAL_MKDIR_TRIES);
  res = mw_local__step_end(req, MW_STEP_OPEN, res);
  if (res >= 0) {
    l->fd = res;
    l->tmp_made = 1;
    if (p->len > 0) issue(u, req, S_WRITE, MW_STEP_WRITE);
    else if (mw_local(u->st)->durable) issue(u, req, S_FSYNC, MW_STEP_FSYNC);
    else issue(u, req, S_CLOSE, MW_STEP_CLOSE);
  } else if ((res == -ENOENT || res == -EEXIST) && l->mkdir_tries < MW_LOCAL_MKDIR_TRIES) {
    l->mkdir_tries++;
    if (res == -EEXIST || mw_local__depth(p->key) == 0) {
      open_tmp(u, req);
    } else {
      if (!l->sync_parents) l->sync_low = 0; /* the cache had the directory: wrong */
      l->sync_parents = 1;
      l->walk = 1;
      mw_local__parent_prefix(p->key, 1, l->scratch, sizeof l->scratch);
      issue(u, req, S_MKDIR, MW_STEP_MKDIR);
    }
  } else {
    put_fail(u, req, res);
  }
}

/* The cleanup step of a failure answered (S_ERR_*): the saved failure is
 * reported once nothing is left open. */
static void put_cleaned(uring_t *u, mw_storage_req_t *req) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_local_t *l = &req->be.local;
  assert(p->result < 0); /* put_fail saved it */
  switch (l->state) {
    case S_ERR_CLOSE:
      if (l->injected < 0) return issue(u, req, S_ERR_CLOSE, MW_STEP_CLOSE); /* still open */
      fd_released(u, l); /* released even when the close reports an error */
      return put_fail(u, req, p->result);
    case S_ERR_DIRCLOSE:
      if (l->injected < 0) return issue(u, req, S_ERR_DIRCLOSE, MW_STEP_DIRCLOSE);
      l->dirfd = -1;
      return put_fail(u, req, p->result);
    case S_ERR_UNLINK:
      l->tmp_made = 0; /* best effort: a leftover temp is hidden and swept */
      return put_fail(u, req, p->result);
    case S_ERR_SLOTCLOSE:
      slot_release(u, l); /* released even when the close reports an error */
      return put_fail(u, req, p->result);
    default: assert(!"not a cleanup state");
  }
}

/* The put (and delete's directory fsync) one step at a time: each CQE
 * moves the request to its next step. One case per state, in the order a
 * put runs them; what the failures share is in put_fail and put_cleaned. */
static void advance_put(uring_t *u, mw_storage_req_t *req, int res) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_local_t *l = &req->be.local;
  unsigned depth = mw_local__depth(p->key);
  assert(l->walk <= depth + 1);
  switch (l->state) {
    case S_OPEN: return put_opened(u, req, res);
    case S_MKDIR:
      res = mw_local__step_end(req, MW_STEP_MKDIR, res);
      if (res < 0 && res != -EEXIST) return put_fail(u, req, res);
      if (res == 0) mw_local__made_dir(l, l->walk); /* its entry in the parent is new */
      if (++l->walk > depth) return open_tmp(u, req);
      mw_local__parent_prefix(p->key, l->walk, l->scratch, sizeof l->scratch);
      return issue(u, req, S_MKDIR, MW_STEP_MKDIR);
    case S_WRITE:
      if (res == -EINTR || res == -EAGAIN) return issue(u, req, S_WRITE, MW_STEP_WRITE);
      if (res <= 0) return put_fail(u, req, res < 0 ? res : -EIO);
      l->done += (size_t)res;
      if (l->done < p->len) return issue(u, req, S_WRITE, MW_STEP_WRITE);
      if (chain_allowed(u, req)) return issue_chain(u, req, C_FSYNC);
      if (mw_local(u->st)->durable) return issue(u, req, S_FSYNC, MW_STEP_FSYNC);
      return issue(u, req, S_CLOSE, MW_STEP_CLOSE);
    case S_FSYNC:
      res = mw_local__step_end(req, MW_STEP_FSYNC, res);
      if (res < 0) return put_fail(u, req, res);
      return issue(u, req, S_CLOSE, MW_STEP_CLOSE);
    case S_CLOSE:
      if (l->injected == 0) fd_released(u, l); /* a real close releases the fd */
      if (res < 0) return put_fail(u, req, res);
      return issue(u, req, S_LINK,
                   p->op == MW_OP_PUT_IF_ABSENT ? MW_STEP_LINK : MW_STEP_RENAME);
    case S_LINK:
      if (res < 0) return put_fail(u, req, res);
      p->maybe_written = 1;
      if (p->op == MW_OP_PUT) l->tmp_made = 0;
      /* put_if_absent: drop the temp name first, so the directory fsync
       * makes its removal durable too (no temp survives a power loss). */
      if (p->op == MW_OP_PUT_IF_ABSENT) return issue(u, req, S_UNLINK, MW_STEP_UNLINK);
      return sync_dirs(u, req);
    case S_DIROPEN:
      if (p->op == MW_OP_DELETE && (res == -ENOENT || res == -ENOTDIR))
        return finish(u, req, 0); /* no directory: nothing to make durable */
      if (res < 0) return put_fail(u, req, res);
      l->dirfd = res;
      return issue(u, req, S_DIRSYNC, MW_STEP_DIRSYNC);
    case S_DIRSYNC:
      res = mw_local__step_end(req, MW_STEP_DIRSYNC, res);
      if (res < 0) return put_fail(u, req, res);
      return issue(u, req, S_DIRCLOSE, MW_STEP_DIRCLOSE);
    case S_DIRCLOSE:
      if (l->injected == 0) l->dirfd = -1;
      if (res < 0) return put_fail(u, req, res);
      if (l->sync_parents && l->walk > l->sync_low) {
        l->walk--;
        return dir_next(u, req);
      }
      return finish(u, req, 0);
    case S_UNLINK:
      if (res < 0)
        mw_log_warn("storage: unlink %s/%s: %s", mw_local(u->st)->root, l->tmp, strerror(-res));
      else
        l->tmp_made = 0;
      return sync_dirs(u, req);
    case S_ERR_CLOSE: case S_ERR_DIRCLOSE: case S_ERR_UNLINK: case S_ERR_SLOTCLOSE:
      return put_cleaned(u, req);
    case S_CHAIN: assert(!"chain CQEs go to advance_chain"); return;
  }
  assert(!"bad put state");
}

/* ----------------------------------------------------------- linked get */

/* A whole-object get of at most GC_MAX_READS x MAX_IO_BYTES - 1 bytes is a
 * statx by path, then one chain:
 *
 *   openat(key, fixed slot) => read(slot) x k => close(slot)
 *
 * two loop round trips instead of three plus one per MiB. The size comes
 * from the path's statx, so the object may have been replaced before the
 * open: the reads ask for one byte past that size, and only reads that end
 * exactly where the statx said (the last one short by that byte: EOF) are
 * accepted; a published object never changes (puts write a temp and rename
 * it), so the bytes are one object's. The links are hard (IOSQE_IO_HARDLINK)
 * because that last read is short by design and must not cancel the close.
 * Anything else — a failed open, a read that failed or ended elsewhere —
 * and the get starts again step by step, which decides (at most once: the
 * step-by-step path never comes back here). */
#define GC_MAX_READS (C_COUNT - 2)
_Static_assert(GC_MAX_READS + 2 <= SQES_PER_REQUEST, "a get chain fits a request's SQEs");
/* l->done during a get chain (a get writes nothing): what has answered */
enum { GC_OPENED = 1, GC_CLOSED = 2, GC_MISMATCH = 4 };

static bool get_chain_allowed(const uring_t *u, const mw_storage_req_t *req) {
  const mw_storage_req_front_t *p = &req->priv;
  return u->chain_ok && p->op == MW_OP_GET && p->off == 0 && p->rlen == UINT64_MAX && !p->armed &&
         p->on_step == NULL && req->be.local.pl == NULL;
}

/* Bytes read c of a get chain asks for, and how many it must return. */
static size_t gc_read_len(const mw_storage_req_t *req, int c, size_t *expect) {
  uint64_t size = req->size, off = (uint64_t)(c - 1) * MAX_IO_BYTES;
  assert(c >= 1);
  assert(off <= size);
  size_t n = size + 1 - off < MAX_IO_BYTES ? (size_t)(size + 1 - off) : MAX_IO_BYTES;
  *expect = size - off < n ? (size_t)(size - off) : n;
  return n;
}

static void issue_get_chain(uring_t *u, mw_storage_req_t *req, size_t reads) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_local_t *l = &req->be.local;
  assert(reads >= 1);
  assert(reads <= GC_MAX_READS);
  assert(u->n_free > 0);
  assert(l->slot < 0);
  assert(l->fd < 0);
  l->slot = u->free_slots[--u->n_free];
  l->state = S_GCHAIN;
  l->chain_i = 0;
  l->chain_n = (uint8_t)(reads + 2);
  l->chain_fail_at = CHAIN_NONE;
  l->chain_err = 0;
  l->done = 0;
  int rootfd = mw_local(u->st)->rootfd;
  for (int c = 0; c < l->chain_n; c++) {
    bool open = c == 0, close = c == l->chain_n - 1;
    int inj = mw_local__step(req, open ? MW_STEP_OPEN : close ? MW_STEP_CLOSE : MW_STEP_READ);
    assert(inj == 0); /* nothing watches: records it only */
    (void)inj;
    struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
    assert(sqe != NULL); /* the caller saw the room */
    if (open) {
      io_uring_prep_openat_direct(sqe, rootfd, p->key, O_RDONLY, 0, (unsigned)l->slot);
    } else if (close) {
      io_uring_prep_close_direct(sqe, (unsigned)l->slot);
    } else {
      size_t expect, n = gc_read_len(req, c, &expect);
      uint64_t off = (uint64_t)(c - 1) * MAX_IO_BYTES;
      io_uring_prep_read(sqe, l->slot, req->buf.data + off, (unsigned)n, off);
      sqe->flags |= IOSQE_FIXED_FILE;
    }
    if (!close) sqe->flags |= IOSQE_IO_HARDLINK;
    io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)req | (uint64_t)c << UD_ELEM_SHIFT);
  }
  chain_count(CHAIN_GET);
}

/* The path's statx answered: the chain, or (no room, too large) the get
 * step by step from its open. */
static void get_stat_done(uring_t *u, mw_storage_req_t *req, int res) {
  mw_storage_req_front_t *p = &req->priv;
  assert(p->op == MW_OP_GET);
  assert(req->be.local.fd < 0); /* a statx by path opens nothing */
  const struct statx *sx = (const struct statx *)req->be.local.stx;
  if (res == -ENOENT || res == -ENOTDIR) return finish(u, req, -ENOENT);
  if (res < 0) return finish(u, req, res);
  if (!S_ISREG(sx->stx_mode)) return finish(u, req, -ENOENT);
  uint64_t size = sx->stx_size;
  if (size > u->st->cfg.max_object_bytes) return finish(u, req, -EFBIG);
  uint64_t reads = size / MAX_IO_BYTES + 1; /* size + 1 bytes */
  if (reads > GC_MAX_READS || u->n_free == 0 ||
      io_uring_sq_space_left(&u->ring) < (unsigned)reads + 2)
    return issue(u, req, S_GOPEN, MW_STEP_OPEN);
  int rc = mw_buf_reserve(&req->buf, (size_t)size + 1);
  if (rc < 0) return finish(u, req, rc);
  p->len = (size_t)size;
  req->size = size;
  issue_get_chain(u, req, (size_t)reads);
}

/* One CQE of a get chain (element c: 0 the open, then the reads, last the
 * close); the decision waits for the last. */
static void advance_get_chain(uring_t *u, mw_storage_req_t *req, int c, int res) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_local_t *l = &req->be.local;
  assert(c >= 0);
  assert(c < l->chain_n);
  assert(l->chain_i < l->chain_n);
  l->chain_i++;
  bool ok;
  if (c == 0) {
    ok = res >= 0;
    if (ok) l->done |= GC_OPENED;
  } else if (c == l->chain_n - 1) {
    ok = res >= 0;
    if (ok) l->done |= GC_CLOSED;
  } else {
    size_t expect;
    (void)gc_read_len(req, c, &expect);
    ok = res >= 0 && (size_t)res == expect;
    if (!ok) l->done |= GC_MISMATCH;
  }
  if (!ok && (l->chain_fail_at == CHAIN_NONE || c < l->chain_fail_at)) {
    l->chain_fail_at = (uint8_t)c;
    l->chain_err = res;
  }
  if (l->chain_i < l->chain_n) return;
  /* the whole chain has answered */
  if (l->done == (GC_OPENED | GC_CLOSED)) {
    slot_release(u, l);
    req->buf.len = (size_t)req->size;
    req->size = p->len;
    return finish(u, req, 0);
  }
  chain_count(CHAIN_BROKEN);
  req->buf.len = 0;
  if (!(l->done & GC_OPENED) || (l->done & GC_CLOSED)) { /* the slot is empty */
    slot_release(u, l);
    return issue(u, req, S_GOPEN, MW_STEP_OPEN);
  }
  /* opened, and its close failed: the file may still be in the slot */
  l->fd = l->slot;
  l->fd_fixed = 1;
  if (p->result == 0) p->result = l->chain_err < 0 ? l->chain_err : -EIO;
  issue(u, req, S_GCLOSE, MW_STEP_CLOSE);
}

static void get_fail(uring_t *u, mw_storage_req_t *req, int err) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_local_t *l = &req->be.local;
  assert(err < 0);
  if (p->result == 0) p->result = err;
  if (l->fd >= 0) issue(u, req, S_GCLOSE, MW_STEP_CLOSE);
  else finish(u, req, p->result);
}

static void advance_get(uring_t *u, mw_storage_req_t *req, int res) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_local_t *l = &req->be.local;
  const struct statx *sx = (const struct statx *)l->stx;
  switch (l->state) {
    case S_GOPEN:
      if (res < 0) return finish(u, req, res == -ENOTDIR ? -ENOENT : res);
      l->fd = res;
      return issue(u, req, S_GSTAT, MW_STEP_STAT);
    case S_GSTAT: {
      if (res < 0) return get_fail(u, req, res);
      if (!S_ISREG(sx->stx_mode)) return get_fail(u, req, -ENOENT);
      uint64_t size = sx->stx_size;
      if (p->off > size) return get_fail(u, req, -EINVAL);
      uint64_t n = size - p->off < p->rlen ? size - p->off : p->rlen;
      if (n > u->st->cfg.max_object_bytes) return get_fail(u, req, -EFBIG);
      int rc = mw_buf_reserve(&req->buf, (size_t)n);
      if (rc < 0) return get_fail(u, req, rc);
      p->len = (size_t)size;
      req->size = n; /* bytes to read; the object size is restored at close */
      if (n == 0) return issue(u, req, S_GCLOSE, MW_STEP_CLOSE);
      return issue(u, req, S_GREAD, MW_STEP_READ);
    }
    case S_GREAD:
      if (res == -EINTR || res == -EAGAIN) return issue(u, req, S_GREAD, MW_STEP_READ);
      if (res < 0) return get_fail(u, req, res);
      req->buf.len += (size_t)res;
      if (res > 0 && req->buf.len < req->size) return issue(u, req, S_GREAD, MW_STEP_READ);
      return issue(u, req, S_GCLOSE, MW_STEP_CLOSE);
    case S_GCLOSE:
      if (l->injected < 0) { /* the fd is still open: record, close for real */
        if (p->result == 0) p->result = res;
        return issue(u, req, S_GCLOSE, MW_STEP_CLOSE);
      }
      fd_released(u, l); /* a linked get's slot goes back with its file */
      req->size = p->len;
      if (p->result == 0 && res < 0) p->result = res;
      return finish(u, req, p->result);
  }
  assert(!"bad get state");
}

static void advance(uring_t *u, mw_storage_req_t *req, int res) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_local_t *l = &req->be.local;
  if (l->injected < 0) res = l->injected;
  switch (l->state) {
    case S_GOPEN: case S_GSTAT: case S_GREAD: case S_GCLOSE: return advance_get(u, req, res);
    case S_GPSTAT: return get_stat_done(u, req, res);
    case S_GCHAIN: assert(!"get chain CQEs go to advance_get_chain"); return;
    case S_HSTAT: {
      const struct statx *sx = (const struct statx *)l->stx;
      if (res == -ENOTDIR || (res == 0 && !S_ISREG(sx->stx_mode))) res = -ENOENT;
      if (res == 0) req->size = sx->stx_size;
      return finish(u, req, res);
    }
    case S_DUNLINK:
      if (res == -ENOTDIR || res == -EISDIR) return finish(u, req, 0); /* absent */
      if (res < 0 && res != -ENOENT) return finish(u, req, res);
      if (!mw_local(u->st)->durable) return finish(u, req, 0);
      /* Make the removal durable (also when already absent: a retry after
       * a failed directory fsync must not succeed early). */
      l->sync_parents = 0;
      l->walk = (uint16_t)mw_local__depth(p->key);
      return dir_next(u, req);
    default: return advance_put(u, req, res);
  }
}

_Static_assert(C_COUNT <= 16, "a chain element fits the user data's top 4 bits");
_Static_assert(sizeof(uintptr_t) == 8, "user data carries a pointer and an element");

static void reap(uring_t *u) {
  u->reaping = true;
  struct io_uring_cqe *cqe;
  while (io_uring_peek_cqe(&u->ring, &cqe) == 0) {
    uint64_t ud = io_uring_cqe_get_data64(cqe);
    mw_storage_req_t *req = (mw_storage_req_t *)(uintptr_t)(ud & ((UINT64_C(1) << UD_ELEM_SHIFT) - 1));
    int res = cqe->res;
    io_uring_cqe_seen(&u->ring, cqe);
    assert(req != NULL);
    int elem = (int)(ud >> UD_ELEM_SHIFT);
    if (req->be.local.state == S_CHAIN) advance_chain(u, req, elem, res);
    else if (req->be.local.state == S_GCHAIN) advance_get_chain(u, req, elem, res);
    else advance(u, req, res);
  }
  u->reaping = false;
  flush(u);
}

static void poll_cb(uv_poll_t *h, int status, int events) {
  uring_t *u = h->data;
  (void)events;
  if (status < 0) mw_log_err("storage: io_uring poll: %s", uv_strerror(status));
  uint64_t v;
  while (read(u->efd, &v, sizeof v) < 0 && errno == EINTR) {
  }
  reap(u);
}

static int probe_ops(struct io_uring *ring) {
  struct io_uring_probe *pr = io_uring_get_probe_ring(ring);
  if (pr == NULL) return -ENOSYS;
  int rc = 0;
  for (size_t i = 0; i < sizeof required_ops; i++)
    if (!io_uring_opcode_supported(pr, required_ops[i])) rc = -ENOSYS;
  io_uring_free_probe(pr);
  return rc;
}

int mw_local__uring_open(mw_storage_t *st) {
  mw_local_t *lo = mw_local(st);
  assert(lo != NULL);
  assert(lo->uring == NULL);
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, chain_metrics_register);
  uring_t *u = calloc(1, sizeof *u);
  if (u == NULL) return -ENOMEM;
  u->st = st;
  u->efd = -1;
  /* room for every request in flight to hold a linked tail at once */
  unsigned entries = 8;
  while (entries < st->cfg.max_inflight * SQES_PER_REQUEST) entries <<= 1;
  int rc = io_uring_queue_init(entries, &u->ring, 0);
  if (rc < 0) {
    free(u);
    return rc;
  }
  if ((rc = probe_ops(&u->ring)) < 0) goto fail;
  /* one fixed-file slot per request in flight, for the linked tail's
   * directory; a kernel without sparse tables (< 5.19) runs every step alone */
  u->n_slots = st->cfg.max_inflight;
  u->free_slots = malloc(u->n_slots * sizeof *u->free_slots);
  if (u->free_slots == NULL) {
    rc = -ENOMEM;
    goto fail;
  }
  _Static_assert(MW_STORAGE_MAX_INFLIGHT <= INT16_MAX, "slot numbers fit an int16_t");
  u->chain_ok = io_uring_register_files_sparse(&u->ring, u->n_slots) == 0;
  for (uint32_t i = 0; i < u->n_slots; i++) u->free_slots[u->n_free++] = (int16_t)(u->n_slots - 1 - i);
  u->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (u->efd < 0) {
    rc = -errno;
    goto fail;
  }
  if ((rc = io_uring_register_eventfd(&u->ring, u->efd)) < 0) goto fail;
  if ((rc = uv_poll_init(st->loop, &u->poll, u->efd)) < 0) goto fail;
  u->poll.data = u;
  uv_poll_start(&u->poll, UV_READABLE, poll_cb);
  uv_unref((uv_handle_t *)&u->poll);
  uv_timer_init(st->loop, &u->retry); /* cannot fail */
  u->retry.data = u;
  lo->uring = u;
  return 0;
fail:
  if (u->efd >= 0) close(u->efd);
  io_uring_queue_exit(&u->ring);
  free(u->free_slots);
  free(u);
  return rc;
}

static void uring_submit(mw_storage_t *st, mw_storage_req_t *req) {
  mw_storage_req_front_t *p = &req->priv;
  uring_t *u = mw_local(st)->uring;
  assert(u != NULL);
  assert(p->st == st);
  mw_local__prepare(st, req);
  if (p->op == MW_OP_LIST || p->op == MW_OP_DELETE_PREFIX || p->op == MW_OP_SWEEP_TMP ||
      p->op == MW_OP_DELETE_ROOT || p->op == MW_OP_DELETE_MANY) {
    /* directory walks (io_uring has no getdents), and delete_many's one job */
    mw_local__queue_work(st, req);
    return;
  }
  if (u->active++ == 0) uv_ref((uv_handle_t *)&u->poll);
  assert(((uintptr_t)req >> UD_ELEM_SHIFT) == 0); /* the top bits carry a chain element */
  req->be.local.slot = -1;
  req->be.local.fd_fixed = 0;
  req->be.local.chain_n = 0;
  switch ((mw_storage_op_t)p->op) {
    case MW_OP_PUT_IF_ABSENT:
    case MW_OP_PUT: open_tmp(u, req); break;
    case MW_OP_GET:
      if (get_chain_allowed(u, req)) issue(u, req, S_GPSTAT, MW_STEP_STAT);
      else issue(u, req, S_GOPEN, MW_STEP_OPEN);
      break;
    case MW_OP_HEAD: issue(u, req, S_HSTAT, MW_STEP_STAT); break;
    case MW_OP_DELETE: issue(u, req, S_DUNLINK, MW_STEP_UNLINK); break;
    default: assert(!"bad op");
  }
  flush(u);
}

static void handle_closed(uv_handle_t *h) {
  uring_t *u = h->data;
  if (--u->closing_handles > 0) return;
  mw_storage_t *st = u->st;
  void (*done)(mw_storage_t *) = u->close_done;
  io_uring_queue_exit(&u->ring);
  close(u->efd);
  assert(u->n_free == u->n_slots); /* every slot came back */
  free(u->free_slots);
  free(u);
  mw_local(st)->uring = NULL;
  mw_local__close_done(st, done);
}

static void uring_close(mw_storage_t *st, void (*done)(mw_storage_t *st)) {
  uring_t *u = mw_local(st)->uring;
  assert(u != NULL);
  assert(u->active == 0);
  u->close_done = done;
  u->closing_handles = 2;
  uv_close((uv_handle_t *)&u->poll, handle_closed);
  uv_close((uv_handle_t *)&u->retry, handle_closed);
}

const mw_storage_backend_ops_t mw_storage__uring_ops = {
    .name = "uring",
    .step_names = mw_local_step_names,
    .n_steps = MW_STEP_COUNT_,
    .sync_step = MW_STEP_FSYNC,
    .family = MW_STORAGE_FAMILY_LOCAL,
    .submit = uring_submit,
    .close = uring_close,
};
