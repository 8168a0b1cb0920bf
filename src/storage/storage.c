/*
 * storage.c — the storage front: key validation, limits, the in-flight queue
 * and dispatch to a backend (io_uring or the libuv thread pool).
 *
 * Design: a submission is validated and copied into the caller's request
 * (key, borrowed bytes, range) on the loop thread. If fewer than
 * max_inflight operations run and nobody waits, it starts at once;
 * otherwise it joins a FIFO queue and starts when a running one completes.
 * Starting goes through the fault layer (which may delay it) to the
 * backend's submit(). The backend calls mw_storage__done() once, on the loop
 * thread; the front logs failures (with the path and the failing step),
 * starts queued work, then runs the caller's callback. Because a callback
 * can never run inside a submit call, callers see completions in an order
 * they can reason about.
 *
 * Durability of directories: an object is durable once its file is fsynced,
 * linked, and its directory fsynced — *and* that directory's own entry is
 * durable all the way up to the root. The front keeps a small direct-mapped
 * cache of directory hashes whose ancestry this instance has fsynced; the
 * first write into a directory (or any write that had to mkdir) asks the
 * backend to fsync every ancestor too (priv.sync_parents).
 *
 * Metrics: the front registers the storage families in the process-wide
 * registry once (pthread_once; every series is created then, so recording
 * from pool threads never creates one) and counts every completed operation
 * by op and result, and the bytes of acknowledged puts; the fault layer
 * records fsync latency and injected faults.
 *
 * Keys: 1..1024 bytes, '/'-separated, no leading or trailing '/', no empty,
 * "." or ".." segment, no segment starting with ".tmp-" (reserved for temp
 * files), no control characters, at most 64 segments (a directory walk
 * holds one fd per level).
 */
#include "storage/storage_int.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

static const char *const step_names[MW_STEP_COUNT_] = {
    "open", "mkdir", "write", "fsync", "close", "link", "rename",
    "diropen", "dirsync", "dirclose", "unlink", "stat", "read", "scan",
};

static const char *const op_names[] = {
    "?", "put_if_absent", "put", "get", "head", "list", "delete", "delete_prefix", "sweep_tmp",
};

/* ---- metrics ---- */

mw_storage_metrics_t mw_storage__metrics;
static const char *const result_names[4] = {"ok", "exists", "absent", "error"};

/* memwald_storage_errors_total{op,errno}: failed completions (-EEXIST and
 * -ENOENT are answers, not errors). Series are made on first use (loop
 * thread: completions run there); the registry bounds their number. */
static mw_metric_family_t *errors_family;

static void metrics_register(void) {
  mw_storage_metrics_t *m = &mw_storage__metrics;
  static const char *const op_errno[] = {"op", "errno"};
  errors_family = mw_metrics_register(
      mw_metrics_default(), MW_METRIC_COUNTER, "memwald_storage_errors_total",
      "Storage operations that failed, by operation and errno.", op_errno, 2, NULL, 0);
  mw_metrics_t *reg = mw_metrics_default();
  static const char *const op_result[] = {"op", "result"};
  static const char *const kind[] = {"kind"};
  static const char *const step[] = {"step"};
  static const double fsync_bounds[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                        0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10};
  mw_metric_family_t *ops = mw_metrics_register(
      reg, MW_METRIC_COUNTER, "memwald_storage_operations_total",
      "Storage operations completed, by operation and result.", op_result, 2, NULL, 0);
  mw_metric_family_t *fs = mw_metrics_register(
      reg, MW_METRIC_HISTOGRAM, "memwald_storage_fsync_seconds",
      "Latency of successful file and directory fsyncs.", kind, 1, fsync_bounds,
      sizeof fsync_bounds / sizeof *fsync_bounds);
  mw_metric_family_t *wr = mw_metrics_register(
      reg, MW_METRIC_COUNTER, "memwald_storage_written_bytes_total",
      "Bytes of objects written by acknowledged puts.", NULL, 0, NULL, 0);
  mw_metric_family_t *fi = mw_metrics_register(
      reg, MW_METRIC_COUNTER, "memwald_storage_faults_injected_total",
      "Test faults injected into storage steps (fault injection, simulated power cuts).",
      step, 1, NULL, 0);
  if (ops == NULL || fs == NULL || wr == NULL || fi == NULL) return; /* logged by metrics */
  for (int op = MW_OP_PUT_IF_ABSENT; op <= MW_OP_SWEEP_TMP; op++)
    for (int r = 0; r < 4; r++) {
      const char *lv[] = {op_names[op], result_names[r]};
      m->ops[op][r] = mw_metric_series(ops, lv);
    }
  const char *file[] = {"file"}, *dir[] = {"dir"};
  m->fsync_family = fs;
  m->fsync[0] = mw_metric_series(fs, file);
  m->fsync[1] = mw_metric_series(fs, dir);
  m->written = mw_metric_series(wr, NULL);
  for (int i = 0; i < MW_STEP_COUNT_; i++) {
    const char *lv[] = {step_names[i]};
    m->faults[i] = mw_metric_series(fi, lv);
  }
  m->ok = true;
}

void mw_storage__count_fault(mw_storage_step_t step) {
  assert(step < MW_STEP_COUNT_);
  if (mw_storage__metrics.ok) mw_counter_add(mw_storage__metrics.faults[step], 1);
}

static void count_op(const mw_storage_req_priv_t *p, int status) {
  if (!mw_storage__metrics.ok || p->op < MW_OP_PUT_IF_ABSENT || p->op > MW_OP_SWEEP_TMP) return;
  int r = status == 0 ? 0 : status == -EEXIST ? 1 : status == -ENOENT ? 2 : 3;
  mw_counter_add(mw_storage__metrics.ops[p->op][r], 1);
  if (r == 3 && errors_family != NULL) {
    const char *lv[] = {op_names[p->op], mw_errno_name(status)};
    mw_counter_add(mw_metric_series(errors_family, lv), 1);
  }
  if (status == 0 && (p->op == MW_OP_PUT || p->op == MW_OP_PUT_IF_ABSENT))
    mw_counter_add(mw_storage__metrics.written, p->len);
}

const char *mw_storage_step_name(int step) {
  return step >= 0 && step < MW_STEP_COUNT_ ? step_names[step] : "?";
}

int mw_storage_step_parse(const char *name) {
  assert(name != NULL);
  for (int i = 0; i < MW_STEP_COUNT_; i++)
    if (strcmp(name, step_names[i]) == 0) return i;
  return -EINVAL;
}

void mw_storage_config_init(mw_storage_config_t *cfg, const char *root_dir) {
  assert(cfg != NULL);
  memset(cfg, 0, sizeof *cfg);
  cfg->root_dir = root_dir;
  cfg->backend = MW_STORAGE_AUTO;
  cfg->max_inflight = MW_STORAGE_DEFAULT_MAX_INFLIGHT;
  cfg->max_object_bytes = MW_STORAGE_DEFAULT_MAX_OBJECT_BYTES;
  cfg->fsync = true;
}

int mw_storage_backend_parse(const char *name, mw_storage_backend_t *out) {
  assert(name != NULL && out != NULL);
  if (strcmp(name, "auto") == 0) *out = MW_STORAGE_AUTO;
  else if (strcmp(name, "uring") == 0 || strcmp(name, "io_uring") == 0) *out = MW_STORAGE_URING;
  else if (strcmp(name, "threads") == 0) *out = MW_STORAGE_THREADS;
  else return -EINVAL;
  return 0;
}

static bool segment_ok(const char *s, size_t n) {
  if (n == 0) return false;
  if (n == 1 && s[0] == '.') return false;
  if (n == 2 && s[0] == '.' && s[1] == '.') return false;
  if (n >= 5 && memcmp(s, MW_STORAGE_TMP_PREFIX, 5) == 0) return false;
  return true;
}

/* Check segments of `s`; when `partial_last` the last segment may be a
 * partial name (a list prefix) and may be empty. */
static bool path_ok(const char *s, bool partial_last) {
  size_t n = strnlen(s, MW_STORAGE_KEY_MAX_BYTES + 1);
  if (n > MW_STORAGE_KEY_MAX_BYTES) return false;
  if (mw_storage__depth(s) + 1 > MW_STORAGE_KEY_MAX_SEGMENTS) return false;
  if (n == 0) return partial_last;
  if (s[0] == '/') return false;
  size_t start = 0;
  for (size_t i = 0; i <= n; i++) {
    if (i < n && (unsigned char)s[i] < 0x20) return false;
    if (i < n && s[i] != '/') continue;
    bool last = i == n;
    if (last && partial_last) {
      /* partial: "" ok, "." / ".." would escape, ".tmp-" hides nothing useful */
      if ((i - start == 1 && s[start] == '.') ||
          (i - start == 2 && s[start] == '.' && s[start + 1] == '.'))
        return false;
    } else if (!segment_ok(s + start, i - start)) {
      return false;
    }
    start = i + 1;
  }
  return true;
}

bool mw_storage_key_valid(const char *key) {
  assert(key != NULL);
  return path_ok(key, false);
}

unsigned mw_storage__depth(const char *path) {
  unsigned d = 0;
  for (const char *p = path; *p; p++) d += *p == '/';
  return d;
}

bool mw_storage__parent_prefix(const char *path, unsigned n, char *out, size_t cap) {
  assert(path != NULL && out != NULL && cap > 1);
  if (n == 0) {
    out[0] = '.';
    out[1] = '\0';
    return true;
  }
  const char *p = path;
  for (unsigned i = 0; i < n; i++) {
    p = strchr(p, '/');
    if (p == NULL) return false;
    if (i + 1 < n) p++;
  }
  size_t len = (size_t)(p - path);
  if (len + 1 > cap) return false;
  memcpy(out, path, len);
  out[len] = '\0';
  return true;
}

void mw_storage__tmp_name(mw_storage_req_t *req) {
  /* A random v4 UUID as 32 lowercase hex digits, from getentropy(3)
   * (getrandom: never blocks once the kernel's pool is initialised). The
   * name starts with ".tmp-", never with a binary digit (memwal.md §1.5). */
  uint8_t u[16];
  if (getentropy(u, sizeof u) != 0) {
    /* Extremely unlikely; fall back to time and address entropy. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t a = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)(uintptr_t)req;
    uint64_t b = a * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
    memcpy(u, &a, 8);
    memcpy(u + 8, &b, 8);
  }
  u[6] = (uint8_t)((u[6] & 0x0f) | 0x40);
  u[8] = (uint8_t)((u[8] & 0x3f) | 0x80);
  static const char hx[] = "0123456789abcdef";
  char hex[33];
  for (int i = 0; i < 16; i++) {
    hex[2 * i] = hx[u[i] >> 4];
    hex[2 * i + 1] = hx[u[i] & 15];
  }
  hex[32] = '\0';
  const char *dir = req->priv.dir;
  if (strcmp(dir, ".") == 0)
    snprintf(req->priv.tmp, sizeof req->priv.tmp, MW_STORAGE_TMP_PREFIX "%s", hex);
  else
    snprintf(req->priv.tmp, sizeof req->priv.tmp, "%s/" MW_STORAGE_TMP_PREFIX "%s", dir, hex);
  assert(req->priv.tmp[0] != '0' && req->priv.tmp[0] != '1');
}

/* ---- directory durability cache ---- */

static uint64_t hash_str(const char *s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
  return h | 1; /* 0 marks an empty slot */
}

static bool dircache_has(const mw_storage_t *st, const char *dir) {
  uint64_t h = hash_str(dir);
  return st->dircache[h % MW_STORAGE_DIRCACHE_SLOTS] == h;
}

static void dircache_add(mw_storage_t *st, const char *dir) {
  uint64_t h = hash_str(dir);
  st->dircache[h % MW_STORAGE_DIRCACHE_SLOTS] = h;
}

/* ---- open / close ---- */

static int mkdir_p(const char *path) {
  char buf[4096];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof buf) return -ENAMETOOLONG;
  memcpy(buf, path, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (buf[i] != '/' && buf[i] != '\0') continue;
    char c = buf[i];
    buf[i] = '\0';
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -errno;
    buf[i] = c;
  }
  return 0;
}

static const mw_storage_backend_ops_t *pick_backend(mw_storage_t *st, int *rc) {
  static atomic_bool warned = false;
  if (st->cfg.backend == MW_STORAGE_THREADS) {
    *rc = 0;
    return &mw_storage__threads_ops;
  }
  *rc = st->cfg.test_uring_refuse != 0 ? st->cfg.test_uring_refuse
                                       : mw_storage__uring_ops.open(st);
  if (*rc == 0) return &mw_storage__uring_ops;
  if (st->cfg.backend == MW_STORAGE_URING) return NULL;
  if (!atomic_exchange(&warned, true))
    mw_log_warn("storage: io_uring unavailable (%s); using the libuv thread pool",
                strerror(-*rc));
  *rc = 0;
  return &mw_storage__threads_ops;
}

int mw_storage_open(uv_loop_t *loop, const mw_storage_config_t *cfg, mw_storage_t **out,
                    mw_err_t *err) {
  assert(loop != NULL && cfg != NULL && out != NULL);
  *out = NULL;
  if (cfg->root_dir == NULL || cfg->root_dir[0] == '\0')
    return mw_err_set(err, -EINVAL, "storage: root_dir is empty");
  static pthread_once_t metrics_once = PTHREAD_ONCE_INIT;
  pthread_once(&metrics_once, metrics_register);
  mw_storage_t *st = calloc(1, sizeof *st);
  if (st == NULL) return mw_err_set(err, -ENOMEM, "storage: out of memory");
  int rc;
  st->loop = loop;
  st->cfg = *cfg;
  st->rootfd = -1;
  if (st->cfg.max_inflight == 0) st->cfg.max_inflight = MW_STORAGE_DEFAULT_MAX_INFLIGHT;
  if (st->cfg.max_inflight > 4096) st->cfg.max_inflight = 4096;
  if (st->cfg.max_object_bytes == 0 || st->cfg.max_object_bytes > MW_BUF_MAX_BYTES)
    st->cfg.max_object_bytes = st->cfg.max_object_bytes == 0 ? MW_STORAGE_DEFAULT_MAX_OBJECT_BYTES
                                                            : MW_BUF_MAX_BYTES;
  st->root = strdup(cfg->root_dir);
  if (st->root == NULL) {
    rc = mw_err_set(err, -ENOMEM, "storage: out of memory");
    goto fail;
  }
  st->cfg.root_dir = st->root;
  rc = mkdir_p(st->root);
  if (rc < 0) {
    mw_err_set(err, rc, "storage: mkdir %s: %s", st->root, strerror(-rc));
    goto fail;
  }
  st->rootfd = open(st->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (st->rootfd < 0) {
    rc = -errno;
    mw_err_set(err, rc, "storage: open %s: %s", st->root, strerror(-rc));
    goto fail;
  }
  if (st->cfg.fsync && fsync(st->rootfd) != 0) {
    rc = -errno;
    mw_err_set(err, rc, "storage: fsync %s: %s", st->root, strerror(-rc));
    goto fail;
  }
  rc = mw_storage__fault_open(st, err);
  if (rc < 0) goto fail;
  st->be = pick_backend(st, &rc);
  if (st->be == NULL) {
    mw_err_set(err, rc, "storage: io_uring refused: %s", strerror(-rc));
    goto fail;
  }
  if (st->be == &mw_storage__threads_ops && (rc = st->be->open(st)) < 0) {
    mw_err_set(err, rc, "storage: thread backend: %s", strerror(-rc));
    goto fail;
  }
  uv_timer_init(loop, &st->delay_timer); /* cannot fail */
  st->delay_timer.data = st;
  mw_log_debug("storage: %s opened with %s", st->root, st->be->name);
  *out = st;
  return 0;
fail:
  mw_storage__fault_close(st);
  if (st->rootfd >= 0) close(st->rootfd);
  free(st->root);
  free(st);
  return rc;
}

static void finish_close(mw_storage_t *st) {
  assert(st->inflight == 0 && st->qhead == NULL);
  mw_storage__fault_close(st);
  if (st->rootfd >= 0) close(st->rootfd);
  mw_storage_close_cb cb = st->close_cb;
  void *arg = st->close_arg;
  free(st->root);
  free(st);
  if (cb != NULL) cb(arg);
}

static void timer_closed(uv_handle_t *h) {
  mw_storage_t *st = h->data;
  st->be->close(st, finish_close);
}

static void maybe_finish_close(mw_storage_t *st) {
  if (!st->closing || st->inflight != 0 || st->qhead != NULL || st->closed_timer) return;
  st->closed_timer = true;
  uv_close((uv_handle_t *)&st->delay_timer, timer_closed);
}

void mw_storage_close(mw_storage_t *st, mw_storage_close_cb cb, void *arg) {
  assert(st != NULL && !st->closing);
  st->closing = true;
  st->close_cb = cb;
  st->close_arg = arg;
  maybe_finish_close(st);
}

const char *mw_storage_backend_name(const mw_storage_t *st) { return st->be->name; }

void mw_storage_health(const mw_storage_t *st, mw_storage_health_t *out) {
  assert(st != NULL && out != NULL);
  *out = st->health;
}
uint32_t mw_storage_inflight(const mw_storage_t *st) { return st->inflight; }
uint32_t mw_storage_queued(const mw_storage_t *st) { return st->queued; }

/* ---- requests ---- */

void mw_storage_req_init(mw_storage_req_t *req) {
  assert(req != NULL);
  memset(req, 0, sizeof *req);
  req->priv.fd = -1;
  req->priv.dirfd = -1;
}

bool mw_storage_req_maybe_written(const mw_storage_req_t *req) {
  assert(req != NULL);
  return req->priv.linked != 0;
}

void mw_storage_req_cleanup(mw_storage_req_t *req) {
  assert(req != NULL);
  mw_buf_free(&req->buf);
  free(req->keys);
  req->keys = NULL;
  req->nkeys = 0;
}

static void start(mw_storage_t *st, mw_storage_req_t *req) {
  mw_storage_req_priv_t *p = &req->priv;
  st->inflight++;
  assert(st->inflight <= st->cfg.max_inflight);
  bool writes = p->op == MW_OP_PUT || p->op == MW_OP_PUT_IF_ABSENT;
  p->sync_parents = writes && st->cfg.fsync && !dircache_has(st, p->dir);
  mw_storage__fault_start(st, req);
}

static void pump(mw_storage_t *st) {
  while (st->qhead != NULL && st->inflight < st->cfg.max_inflight) {
    mw_storage_req_t *req = st->qhead;
    st->qhead = req->priv.next;
    if (st->qhead == NULL) st->qtail = NULL;
    req->priv.next = NULL;
    st->queued--;
    start(st, req);
  }
}

void mw_storage__done(mw_storage_req_t *req, int status) {
  mw_storage_req_priv_t *p = &req->priv;
  mw_storage_t *st = p->st;
  assert(st != NULL && st->inflight > 0);
  assert(status <= 0 && p->fd < 0 && p->dirfd < 0);
  st->inflight--;
  bool writes = p->op == MW_OP_PUT || p->op == MW_OP_PUT_IF_ABSENT;
  if (status == 0 && writes && st->cfg.fsync) dircache_add(st, p->dir);
  if (p->op == MW_OP_DELETE_PREFIX) memset(st->dircache, 0, sizeof st->dircache);
  count_op(p, status);
  if (status == 0 || status == -EEXIST || status == -ENOENT) {
    st->health.ops_ok++;
    st->health.consecutive_failures = 0;
    st->health.last_ok_ms = uv_now(st->loop);
  } else {
    st->health.ops_failed++;
    st->health.consecutive_failures++;
    st->health.last_error = status;
    st->health.last_error_ms = uv_now(st->loop);
  }
  if (status < 0 && status != -EEXIST && status != -ENOENT)
    mw_log_warn("storage: %s %s/%s failed at %s%s%s: %s", op_names[p->op], st->root, p->key,
                mw_storage_step_name(p->step), p->tmp[0] ? " of temp " : "", p->tmp,
                strerror(-status));
  pump(st);
  p->cb(req, status);
  maybe_finish_close(st);
}

typedef struct args {
  const void *src;
  size_t len;
  uint64_t off, rlen;
  uint64_t min_age_s;
} args_t;

static int submit(mw_storage_t *st, mw_storage_req_t *req, mw_storage_op_t op, const char *key,
                  mw_storage_cb cb, args_t a) {
  assert(st != NULL && req != NULL && cb != NULL);
  if (st->closing) return -ESHUTDOWN;
  bool prefix = op == MW_OP_LIST || op == MW_OP_DELETE_PREFIX || op == MW_OP_SWEEP_TMP;
  if (key == NULL || !path_ok(key, prefix)) return -EINVAL;
  if (a.len > st->cfg.max_object_bytes) return -EFBIG;
  if (a.len > 0 && a.src == NULL) return -EINVAL;
  mw_storage_req_priv_t *p = &req->priv;
  memset(p, 0, sizeof *p);
  p->st = st;
  p->cb = cb;
  p->op = (uint8_t)op;
  p->fd = -1;
  p->dirfd = -1;
  p->src = a.src;
  p->len = a.len;
  p->off = a.off;
  p->rlen = a.rlen;
  p->min_age_s = a.min_age_s;
  strcpy(p->key, key);
  /* dir: the key's parent for objects; for a prefix, the directory part. */
  char *slash = strrchr(p->key, '/');
  if (slash == NULL) {
    strcpy(p->dir, ".");
  } else {
    memcpy(p->dir, p->key, (size_t)(slash - p->key));
    p->dir[slash - p->key] = '\0';
  }
  req->size = 0;
  /* every operation that fills buf starts it empty: list, delete_prefix and
   * sweep_tmp list into it, and stale bytes (a reused request's last get)
   * would corrupt their first key */
  if (op == MW_OP_GET || prefix) mw_buf_reset(&req->buf);
  if (prefix) {
    free(req->keys);
    req->keys = NULL;
    req->nkeys = 0;
  }
  st->nsubmitted++;
  mw_storage__fault_arm(st, req);
  if (st->qhead == NULL && st->inflight < st->cfg.max_inflight) {
    start(st, req);
  } else {
    if (st->qtail) st->qtail->priv.next = req;
    else st->qhead = req;
    st->qtail = req;
    st->queued++;
  }
  return 0;
}

static const args_t no_args = {NULL, 0, 0, UINT64_MAX, 0};

int mw_storage_put_if_absent(mw_storage_t *st, mw_storage_req_t *req, const char *key,
                             const void *bytes, size_t len, mw_storage_cb cb) {
  return submit(st, req, MW_OP_PUT_IF_ABSENT, key, cb, (args_t){bytes, len, 0, UINT64_MAX, 0});
}

int mw_storage_put(mw_storage_t *st, mw_storage_req_t *req, const char *key, const void *bytes,
                   size_t len, mw_storage_cb cb) {
  return submit(st, req, MW_OP_PUT, key, cb, (args_t){bytes, len, 0, UINT64_MAX, 0});
}

int mw_storage_get(mw_storage_t *st, mw_storage_req_t *req, const char *key, uint64_t offset,
                   uint64_t len, mw_storage_cb cb) {
  return submit(st, req, MW_OP_GET, key, cb, (args_t){NULL, 0, offset, len, 0});
}

int mw_storage_head(mw_storage_t *st, mw_storage_req_t *req, const char *key, mw_storage_cb cb) {
  return submit(st, req, MW_OP_HEAD, key, cb, no_args);
}

int mw_storage_list(mw_storage_t *st, mw_storage_req_t *req, const char *prefix,
                    mw_storage_cb cb) {
  return submit(st, req, MW_OP_LIST, prefix, cb, no_args);
}

int mw_storage_delete(mw_storage_t *st, mw_storage_req_t *req, const char *key, mw_storage_cb cb) {
  return submit(st, req, MW_OP_DELETE, key, cb, no_args);
}

int mw_storage_delete_prefix(mw_storage_t *st, mw_storage_req_t *req, const char *prefix,
                             mw_storage_cb cb) {
  return submit(st, req, MW_OP_DELETE_PREFIX, prefix, cb, no_args);
}

int mw_storage_sweep_tmp(mw_storage_t *st, mw_storage_req_t *req, const char *prefix,
                         uint64_t min_age_s, mw_storage_cb cb) {
  return submit(st, req, MW_OP_SWEEP_TMP, prefix, cb, (args_t){NULL, 0, 0, UINT64_MAX, min_age_s});
}
