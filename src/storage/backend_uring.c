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
 * A request has at most one SQE in flight; its steps are chained by the
 * state machine below rather than by IOSQE_IO_LINK, because short writes,
 * ENOENT-then-mkdir and EEXIST need decisions between steps. The ring has at
 * least max_inflight entries, so an SQE is always available.
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
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "storage/local_int.h"

_Static_assert(sizeof(struct statx) <= sizeof(((mw_storage_req_local_t *)0)->stx),
               "statx buffer too small");

#define MAX_IO_BYTES ((size_t)1 << 20) /* larger single writes measured 3x slower on ext4 */
#define ASYNC_WRITE_BYTES ((size_t)256 << 10)

typedef struct uring {
  mw_storage_t *st;
  struct io_uring ring;
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
};

static const uint8_t required_ops[] = {
    IORING_OP_NOP, IORING_OP_OPENAT, IORING_OP_WRITE, IORING_OP_READ, IORING_OP_FSYNC,
    IORING_OP_CLOSE, IORING_OP_LINKAT, IORING_OP_RENAMEAT, IORING_OP_UNLINKAT,
    IORING_OP_MKDIRAT, IORING_OP_STATX,
};

static void reap(uring_t *u);

static void retry_cb(uv_timer_t *t) {
  uring_t *u = t->data;
  reap(u); /* frees CQ space (EBUSY), then flushes */
}

static void flush(uring_t *u) {
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
      case S_WRITE: {
        size_t n = p->len - l->done;
        if (n > MAX_IO_BYTES) n = MAX_IO_BYTES;
        io_uring_prep_write(sqe, l->fd, p->src + l->done, (unsigned)n, l->done);
        if (n >= ASYNC_WRITE_BYTES) sqe->flags |= IOSQE_ASYNC;
        break;
      }
      case S_FSYNC: io_uring_prep_fsync(sqe, l->fd, 0); break;
      case S_CLOSE: case S_ERR_CLOSE: case S_GCLOSE: io_uring_prep_close(sqe, l->fd); break;
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

static void open_tmp(uring_t *u, mw_storage_req_t *req) {
  mw_local__tmp_name(req);
  issue(u, req, S_OPEN, MW_STEP_OPEN);
}

static void dir_next(uring_t *u, mw_storage_req_t *req) {
  mw_local__parent_prefix(req->priv.key, req->be.local.walk, req->be.local.scratch,
                            sizeof req->be.local.scratch);
  issue(u, req, S_DIROPEN, MW_STEP_DIROPEN);
}

/* The object is visible: fsync its directory (and ancestors), or finish. */
static void sync_dirs(uring_t *u, mw_storage_req_t *req) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_local_t *l = &req->be.local;
  if (!mw_local(u->st)->durable) return finish(u, req, 0);
  l->walk = (uint16_t)mw_local__depth(p->key);
  dir_next(u, req);
}

static void advance_put(uring_t *u, mw_storage_req_t *req, int res) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_local_t *l = &req->be.local;
  unsigned depth = mw_local__depth(p->key);
  switch (l->state) {
    case S_OPEN:
      res = mw_local__step_end(req, MW_STEP_OPEN, res);
      if (res >= 0) {
        l->fd = res;
        l->tmp_made = 1;
        if (p->len > 0) issue(u, req, S_WRITE, MW_STEP_WRITE);
        else if (mw_local(u->st)->durable) issue(u, req, S_FSYNC, MW_STEP_FSYNC);
        else issue(u, req, S_CLOSE, MW_STEP_CLOSE);
      } else if ((res == -ENOENT || res == -EEXIST) && l->mkdir_tries < MW_LOCAL_MKDIR_TRIES) {
        l->mkdir_tries++;
        if (res == -EEXIST || depth == 0) {
          open_tmp(u, req);
        } else {
          l->sync_parents = 1;
          l->walk = 1;
          mw_local__parent_prefix(p->key, 1, l->scratch, sizeof l->scratch);
          issue(u, req, S_MKDIR, MW_STEP_MKDIR);
        }
      } else {
        put_fail(u, req, res);
      }
      return;
    case S_MKDIR:
      res = mw_local__step_end(req, MW_STEP_MKDIR, res);
      if (res < 0 && res != -EEXIST) return put_fail(u, req, res);
      if (++l->walk > depth) return open_tmp(u, req);
      mw_local__parent_prefix(p->key, l->walk, l->scratch, sizeof l->scratch);
      return issue(u, req, S_MKDIR, MW_STEP_MKDIR);
    case S_WRITE:
      if (res == -EINTR || res == -EAGAIN) return issue(u, req, S_WRITE, MW_STEP_WRITE);
      if (res <= 0) return put_fail(u, req, res < 0 ? res : -EIO);
      l->done += (size_t)res;
      if (l->done < p->len) return issue(u, req, S_WRITE, MW_STEP_WRITE);
      if (mw_local(u->st)->durable) return issue(u, req, S_FSYNC, MW_STEP_FSYNC);
      return issue(u, req, S_CLOSE, MW_STEP_CLOSE);
    case S_FSYNC:
      res = mw_local__step_end(req, MW_STEP_FSYNC, res);
      if (res < 0) return put_fail(u, req, res);
      return issue(u, req, S_CLOSE, MW_STEP_CLOSE);
    case S_CLOSE:
      if (l->injected == 0) l->fd = -1; /* a real close releases the fd */
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
      if (l->sync_parents && l->walk > 0) {
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
    case S_ERR_CLOSE:
      if (l->injected < 0) return issue(u, req, S_ERR_CLOSE, MW_STEP_CLOSE); /* still open */
      l->fd = -1; /* released even when the close reports an error */
      return put_fail(u, req, p->result);
    case S_ERR_DIRCLOSE:
      if (l->injected < 0) return issue(u, req, S_ERR_DIRCLOSE, MW_STEP_DIRCLOSE);
      l->dirfd = -1;
      return put_fail(u, req, p->result);
    case S_ERR_UNLINK:
      l->tmp_made = 0; /* best effort: a leftover temp is hidden and swept */
      return put_fail(u, req, p->result);
  }
  assert(!"bad put state");
}

static void get_fail(uring_t *u, mw_storage_req_t *req, int err) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_local_t *l = &req->be.local;
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
      l->fd = -1;
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

static void reap(uring_t *u) {
  u->reaping = true;
  struct io_uring_cqe *cqe;
  while (io_uring_peek_cqe(&u->ring, &cqe) == 0) {
    mw_storage_req_t *req = io_uring_cqe_get_data(cqe);
    int res = cqe->res;
    io_uring_cqe_seen(&u->ring, cqe);
    assert(req != NULL);
    advance(u, req, res);
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
  assert(lo != NULL && lo->uring == NULL);
  uring_t *u = calloc(1, sizeof *u);
  if (u == NULL) return -ENOMEM;
  u->st = st;
  u->efd = -1;
  unsigned entries = 8;
  while (entries < st->cfg.max_inflight) entries <<= 1;
  int rc = io_uring_queue_init(entries, &u->ring, 0);
  if (rc < 0) {
    free(u);
    return rc;
  }
  if ((rc = probe_ops(&u->ring)) < 0) goto fail;
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
  free(u);
  return rc;
}

static void uring_submit(mw_storage_t *st, mw_storage_req_t *req) {
  mw_storage_req_front_t *p = &req->priv;
  uring_t *u = mw_local(st)->uring;
  assert(u != NULL && p->st == st);
  mw_local__prepare(st, req);
  if (p->op == MW_OP_LIST || p->op == MW_OP_DELETE_PREFIX || p->op == MW_OP_SWEEP_TMP ||
      p->op == MW_OP_DELETE_ROOT) {
    mw_local__queue_work(st, req); /* directory walks: io_uring has no getdents */
    return;
  }
  if (u->active++ == 0) uv_ref((uv_handle_t *)&u->poll);
  switch ((mw_storage_op_t)p->op) {
    case MW_OP_PUT_IF_ABSENT:
    case MW_OP_PUT: open_tmp(u, req); break;
    case MW_OP_GET: issue(u, req, S_GOPEN, MW_STEP_OPEN); break;
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
  free(u);
  mw_local(st)->uring = NULL;
  mw_local__close_done(st, done);
}

static void uring_close(mw_storage_t *st, void (*done)(mw_storage_t *st)) {
  uring_t *u = mw_local(st)->uring;
  assert(u != NULL && u->active == 0);
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
