/*
 * storage.c — the storage front: the URI and the backend choice, key
 * validation, limits, the in-flight queue, dispatch, failure reasons and
 * metrics. Everything here is the same for every backend.
 *
 * Design: a submission is validated and copied into the caller's request
 * (key, borrowed bytes, range) on the loop thread. If fewer than
 * max_inflight operations run and nobody waits, it starts at once;
 * otherwise it joins a FIFO queue and starts when a running one completes.
 * Starting goes through the fault layer (which may delay it) to the
 * backend's submit(). The backend calls mw_storage__done() once, on the loop
 * thread; the front logs a failure (with the reason the backend recorded),
 * starts queued work, then runs the caller's callback. Because a callback
 * can never run inside a submit call, callers see completions in an order
 * they can reason about.
 *
 * URIs: "s3://BUCKET/PREFIX" selects the S3 backend; a path (or
 * "file://PATH") the local disk, whose engine (io_uring or the thread pool)
 * cfg.backend chooses (local.c).
 *
 * Metrics: the front registers the storage families in the process-wide
 * registry once (pthread_once; every series is created then, so recording
 * from pool threads never creates one) and counts every completed operation
 * by op and result, and the bytes of acknowledged puts; the fault layer
 * counts injected faults by step name.
 *
 * Keys: 1..1024 bytes, '/'-separated, no leading or trailing '/', no empty,
 * "." or ".." segment, no segment starting with ".tmp-" (reserved for the
 * backends), no control characters, at most 64 segments (a local directory
 * walk holds one fd per level). The same rules on every backend keep keys
 * portable between them.
 */
#include "storage/storage_int.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "storage/local.h"

static const char *const op_names[MW_OP_COUNT_] = {
    "?",      "put_if_absent", "put",       "get",         "head",
    "list",   "delete",        "delete_prefix", "sweep_tmp", "delete_root",
    "delete_many",
};
_Static_assert(sizeof op_names / sizeof *op_names == MW_OP_COUNT_, "an operation without a name");

/* Every backend family's step names, for metric labels and name checks. */
static const struct {
  const char *const *names;
  unsigned n;
} families[MW_STORAGE_FAMILIES_] = {
    [MW_STORAGE_FAMILY_LOCAL] = {mw_local_step_names, MW_STEP_COUNT_},
    [MW_STORAGE_FAMILY_S3] = {mw_s3_step_names, MW_S3_STEP_COUNT},
};

/* ---- metrics ---- */

mw_storage_metrics_t mw_storage__metrics;
static const char *const result_names[4] = {"ok", "exists", "absent", "error"};

/* memwald_storage_errors_total{op,errno}: failed completions (-EEXIST and
 * -ENOENT are answers, not errors). Series are made on first use (loop
 * thread: completions run there); the registry bounds their number. */
static mw_metric_family_t *errors_family;

static bool fault_metrics_on;

void mw_storage_fault_metrics_enable(void) { fault_metrics_on = true; }

static void metrics_register(void) {
  mw_storage_metrics_t *m = &mw_storage__metrics;
  mw_metrics_t *reg = mw_metrics_default();
  static const char *const op_errno[] = {"op", "errno"};
  static const char *const op_result[] = {"op", "result"};
  static const char *const step[] = {"step"};
  errors_family = mw_metrics_register(
      reg, MW_METRIC_COUNTER, "memwald_storage_errors_total",
      "Storage operations that failed, by operation and errno.", op_errno, 2, NULL, 0);
  mw_metric_family_t *ops = mw_metrics_register(
      reg, MW_METRIC_COUNTER, "memwald_storage_operations_total",
      "Storage operations completed, by operation and result.", op_result, 2, NULL, 0);
  mw_metric_family_t *wr = mw_metrics_register(
      reg, MW_METRIC_COUNTER, "memwald_storage_written_bytes_total",
      "Bytes of objects written by acknowledged puts.", NULL, 0, NULL, 0);
  mw_metric_family_t *fi = !fault_metrics_on ? NULL : mw_metrics_register(
      reg, MW_METRIC_COUNTER, "memwald_storage_faults_injected_total",
      "Test faults injected into storage steps (fault injection, simulated power cuts).",
      step, 1, NULL, 0);
  if (ops == NULL || wr == NULL) return; /* logged by metrics */
  for (int op = MW_OP_PUT_IF_ABSENT; op < MW_OP_COUNT_; op++)
    for (int r = 0; r < 4; r++) {
      const char *lv[] = {op_names[op], result_names[r]};
      m->ops[op][r] = mw_metric_series(ops, lv);
    }
  m->written = mw_metric_series(wr, NULL);
  for (unsigned f = 0; f < MW_STORAGE_FAMILIES_ && fi != NULL; f++)
    for (unsigned i = 0; i < families[f].n; i++) {
      const char *lv[] = {families[f].names[i]};
      m->faults[f][i] = mw_metric_series(fi, lv);
    }
  m->ok = true;
}

void mw_storage__metrics_init(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, metrics_register);
}

void mw_storage__count_fault(const mw_storage_t *st, unsigned step) {
  assert(st != NULL);
  assert(step < st->be->n_steps);
  mw_metric_t *s = mw_storage__metrics.faults[st->be->family][step];
  if (mw_storage__metrics.ok && s != NULL) mw_counter_add(s, 1); /* NULL: test series off */
}

static void count_op(const mw_storage_req_front_t *p, int status) {
  assert(p->op >= MW_OP_PUT_IF_ABSENT);
  assert(p->op < MW_OP_COUNT_);
  if (!mw_storage__metrics.ok) return;
  int r = status == 0 ? 0 : status == -EEXIST ? 1 : status == -ENOENT ? 2 : 3;
  mw_counter_add(mw_storage__metrics.ops[p->op][r], 1);
  if (r == 3 && errors_family != NULL) {
    const char *lv[] = {op_names[p->op], mw_errno_name(status)};
    mw_counter_add(mw_metric_series(errors_family, lv), 1);
  }
  if (status == 0 && (p->op == MW_OP_PUT || p->op == MW_OP_PUT_IF_ABSENT))
    mw_counter_add(mw_storage__metrics.written, p->len);
}

/* ---- steps ---- */

const char *mw_storage_step_name(const mw_storage_t *st, unsigned step) {
  assert(st != NULL);
  return step < st->be->n_steps ? st->be->step_names[step] : "?";
}

int mw_storage_step_parse(const mw_storage_t *st, const char *name) {
  assert(st != NULL);
  assert(name != NULL);
  for (unsigned i = 0; i < st->be->n_steps; i++)
    if (strcmp(name, st->be->step_names[i]) == 0) return (int)i;
  return -EINVAL;
}

unsigned mw_storage_step_count(const mw_storage_t *st) {
  assert(st != NULL);
  assert(st->be->n_steps <= MW_STORAGE_MAX_STEPS);
  return st->be->n_steps;
}

bool mw_storage_step_known(const char *name) {
  assert(name != NULL);
  for (unsigned f = 0; f < MW_STORAGE_FAMILIES_; f++)
    for (unsigned i = 0; i < families[f].n; i++)
      if (strcmp(name, families[f].names[i]) == 0) return true;
  return false;
}

const char *mw_storage_req_step_name(const mw_storage_req_t *req, unsigned step) {
  assert(req != NULL);
  assert(req->priv.st != NULL);
  return mw_storage_step_name(req->priv.st, step);
}

/* ---- configuration ---- */

void mw_storage_config_init(mw_storage_config_t *cfg, const char *uri) {
  assert(cfg != NULL);
  memset(cfg, 0, sizeof *cfg);
  cfg->uri = uri;
  cfg->backend = MW_STORAGE_AUTO;
  cfg->max_inflight = MW_STORAGE_DEFAULT_MAX_INFLIGHT;
  cfg->max_object_bytes = MW_STORAGE_DEFAULT_MAX_OBJECT_BYTES;
  cfg->durable = true;
  cfg->s3.path_style = -1;
  cfg->s3.allow_http = -1;
}

static const char *const backend_labels[] = {"auto", "uring", "threads", "s3"};

int mw_storage_backend_parse(const char *name, mw_storage_backend_t *out) {
  assert(name != NULL);
  assert(out != NULL);
  for (int i = 0; i < 4; i++)
    if (strcmp(name, backend_labels[i]) == 0) {
      *out = (mw_storage_backend_t)i;
      return 0;
    }
  if (strcmp(name, "io_uring") == 0) {
    *out = MW_STORAGE_URING;
    return 0;
  }
  return -EINVAL;
}

const char *mw_storage_backend_label(mw_storage_backend_t b) {
  return (unsigned)b < 4 ? backend_labels[b] : "?";
}

bool mw_storage_uri_is_s3(const char *uri) {
  return uri != NULL && strncmp(uri, "s3://", 5) == 0;
}

/* ---- keys ---- */

static unsigned depth(const char *path) {
  unsigned d = 0;
  for (const char *p = path; *p; p++) d += *p == '/';
  return d;
}

static bool segment_ok(const char *s, size_t n) {
  if (n == 0) return false;
  if (n == 1 && s[0] == '.') return false;
  if (n == 2 && s[0] == '.' && s[1] == '.') return false;
  size_t r = sizeof MW_STORAGE_RESERVED_PREFIX - 1;
  if (n >= r && memcmp(s, MW_STORAGE_RESERVED_PREFIX, r) == 0) return false;
  return true;
}

/* Check segments of `s`; when `partial_last` the last segment may be a
 * partial name (a list prefix) and may be empty. */
static bool path_ok(const char *s, bool partial_last) {
  size_t n = strnlen(s, MW_STORAGE_KEY_MAX_BYTES + 1);
  if (n > MW_STORAGE_KEY_MAX_BYTES) return false;
  if (depth(s) + 1 > MW_STORAGE_KEY_MAX_SEGMENTS) return false;
  if (n == 0) return partial_last;
  if (s[0] == '/') return false;
  size_t start = 0;
  for (size_t i = 0; i <= n; i++) {
    if (i < n && (unsigned char)s[i] < 0x20) return false;
    if (i < n && s[i] != '/') continue;
    bool last = i == n;
    if (last && partial_last) {
      /* partial: "" ok, "." / ".." would escape */
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

/* ---- open / close ---- */

int mw_storage_open(uv_loop_t *loop, const mw_storage_config_t *cfg, mw_storage_t **out,
                    mw_err_t *err) {
  assert(loop != NULL);
  assert(cfg != NULL);
  assert(out != NULL);
  *out = NULL;
  if (cfg->uri == NULL || cfg->uri[0] == '\0')
    return mw_err_set(err, -EINVAL, "storage: the URI is empty");
  if (strlen(cfg->uri) >= MW_STORAGE_URI_MAX_BYTES)
    return mw_err_set(err, -ENAMETOOLONG, "storage: URI longer than %d bytes",
                      MW_STORAGE_URI_MAX_BYTES - 1);
  bool s3 = mw_storage_uri_is_s3(cfg->uri);
  if (cfg->backend == MW_STORAGE_S3 && !s3)
    return mw_err_set(err, -EINVAL, "storage: backend s3 needs an s3:// URI, not %s", cfg->uri);
  mw_storage__metrics_init();
  mw_storage_t *st = calloc(1, sizeof *st);
  if (st == NULL) return mw_err_set(err, -ENOMEM, "storage: out of memory");
  st->loop = loop;
  st->cfg = *cfg;
  if (st->cfg.max_inflight == 0) st->cfg.max_inflight = MW_STORAGE_DEFAULT_MAX_INFLIGHT;
  if (st->cfg.max_inflight > MW_STORAGE_MAX_INFLIGHT) st->cfg.max_inflight = MW_STORAGE_MAX_INFLIGHT;
  st->bg_max = st->cfg.max_inflight - st->cfg.max_inflight / 4; /* a quarter kept for the data path */
  if (st->cfg.max_object_bytes == 0) st->cfg.max_object_bytes = MW_STORAGE_DEFAULT_MAX_OBJECT_BYTES;
  if (st->cfg.max_object_bytes > MW_BUF_MAX_BYTES) st->cfg.max_object_bytes = MW_BUF_MAX_BYTES;
  int rc = (st->uri = strdup(cfg->uri)) != NULL ? 0 : -ENOMEM;
  if (rc < 0) {
    mw_err_set(err, rc, "storage: out of memory");
    goto fail;
  }
  st->cfg.uri = st->uri;
  if ((rc = mw_storage__fault_open(st, err)) < 0) goto fail;
  rc = s3 ? mw_storage__s3_open(st, err) : mw_storage__local_open(st, err);
  if (rc < 0) goto fail;
  assert(st->be != NULL);
  assert(st->be->n_steps <= MW_STORAGE_MAX_STEPS);
  uv_timer_init(loop, &st->delay_timer); /* cannot fail */
  st->delay_timer.data = st;
  mw_log_debug("storage: %s opened with %s", st->uri, st->be->name);
  *out = st;
  return 0;
fail:
  mw_storage__fault_close(st);
  free(st->uri);
  free(st);
  return rc;
}

static void finish_close(mw_storage_t *st) {
  assert(st->inflight == 0);
  assert(st->qhead == NULL);
  assert(st->bghead == NULL);
  mw_storage__fault_close(st);
  mw_storage_close_cb cb = st->close_cb;
  void *arg = st->close_arg;
  free(st->uri);
  free(st);
  if (cb != NULL) cb(arg);
}

static void timer_closed(uv_handle_t *h) {
  mw_storage_t *st = h->data;
  st->be->close(st, finish_close);
}

static void maybe_finish_close(mw_storage_t *st) {
  assert(st->bg_inflight <= st->inflight);
  if (!st->closing || st->inflight != 0 || st->qhead != NULL || st->bghead != NULL ||
      st->closed_timer)
    return;
  st->closed_timer = true;
  uv_close((uv_handle_t *)&st->delay_timer, timer_closed);
}

void mw_storage_close(mw_storage_t *st, mw_storage_close_cb cb, void *arg) {
  assert(st != NULL);
  assert(!st->closing);
  st->closing = true;
  st->close_cb = cb;
  st->close_arg = arg;
  maybe_finish_close(st);
}

const char *mw_storage_uri(const mw_storage_t *st) { return st->uri; }
const char *mw_storage_backend_name(const mw_storage_t *st) { return st->be->name; }

void mw_storage_health(const mw_storage_t *st, mw_storage_health_t *out) {
  assert(st != NULL);
  assert(out != NULL);
  *out = st->health;
}
uint32_t mw_storage_inflight(const mw_storage_t *st) { return st->inflight; }
uint32_t mw_storage_max_inflight(const mw_storage_t *st) { return st->cfg.max_inflight; }
size_t mw_storage_max_object_bytes(const mw_storage_t *st) { return st->cfg.max_object_bytes; }
uint32_t mw_storage_queued(const mw_storage_t *st) { return st->queued; }
uint32_t mw_storage_background_inflight(const mw_storage_t *st) { return st->bg_inflight; }
uint32_t mw_storage_background_queued(const mw_storage_t *st) { return st->bg_queued; }

/* ---- requests ---- */

void mw_storage_req_init(mw_storage_req_t *req) {
  assert(req != NULL);
  memset(req, 0, sizeof *req);
}

bool mw_storage_req_maybe_written(const mw_storage_req_t *req) {
  assert(req != NULL);
  return req->priv.maybe_written != 0;
}

const char *mw_storage_req_key(const mw_storage_req_t *req) {
  assert(req != NULL);
  return req->priv.key;
}

const char *mw_storage_req_error(const mw_storage_req_t *req) {
  assert(req != NULL);
  return req->priv.error;
}

void mw_storage__set_error(mw_storage_req_t *req, const char *fmt, ...) {
  assert(req != NULL);
  assert(fmt != NULL);
  if (req->priv.error[0] != '\0') return; /* the first reason is the precise one */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(req->priv.error, sizeof req->priv.error, fmt, ap);
  va_end(ap);
}

void mw_storage_req_cleanup(mw_storage_req_t *req) {
  assert(req != NULL);
  mw_buf_free(&req->buf);
  free(req->keys);
  req->keys = NULL;
  req->nkeys = 0;
}

/* Two FIFO queues: foreground first; a background request starts only
 * when no foreground one waits and fewer than bg_max background ones run
 * (bg_max < max_inflight, so the data path always finds a free slot). */
static void start(mw_storage_t *st, mw_storage_req_t *req) {
  st->inflight++;
  st->bg_inflight += req->priv.bg;
  assert(st->inflight <= st->cfg.max_inflight);
  assert(st->bg_inflight <= st->bg_max);
  mw_storage__fault_start(st, req);
}

static bool can_start(const mw_storage_t *st, bool bg) {
  assert(st->inflight <= st->cfg.max_inflight);
  assert(st->bg_inflight <= st->inflight);
  if (st->inflight >= st->cfg.max_inflight) return false;
  if (!bg) return true;
  return st->qhead == NULL && st->bg_inflight < st->bg_max;
}

static mw_storage_req_t *dequeue(mw_storage_t *st, mw_storage_req_t **head, mw_storage_req_t **tail) {
  mw_storage_req_t *req = *head;
  assert(req != NULL);
  assert(st->queued > 0);
  *head = req->priv.next;
  if (*head == NULL) *tail = NULL;
  req->priv.next = NULL;
  st->queued--;
  assert(st->bg_queued >= req->priv.bg);
  st->bg_queued -= req->priv.bg;
  return req;
}

static void pump(mw_storage_t *st) {
  assert(st->bg_queued <= st->queued);
  for (;;) {
    if (st->qhead != NULL && can_start(st, false)) start(st, dequeue(st, &st->qhead, &st->qtail));
    else if (st->bghead != NULL && can_start(st, true)) start(st, dequeue(st, &st->bghead, &st->bgtail));
    else break;
  }
}

void mw_storage__done(mw_storage_req_t *req, int status) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_t *st = p->st;
  assert(st != NULL);
  assert(st->inflight > 0);
  assert(status <= 0);
  st->inflight--;
  assert(st->bg_inflight >= p->bg);
  st->bg_inflight -= p->bg;
  count_op(p, status);
  free(p->many_armed);
  p->many_armed = NULL;
  if (status == 0 || status == -EEXIST || status == -ENOENT) {
    st->health.ops_ok++;
    st->health.consecutive_failures = 0;
    st->health.last_ok_ms = uv_now(st->loop);
  } else {
    st->health.ops_failed++;
    st->health.consecutive_failures++;
    st->health.last_error = status;
    st->health.last_error_ms = uv_now(st->loop);
    mw_storage__set_error(req, "%s/%s: %s: %s", st->uri, p->key, mw_storage_step_name(st, p->step),
                          strerror(-status));
    mw_log_warn("storage: %s failed: %s", op_names[p->op], p->error);
  }
  pump(st);
  p->cb(req, status);
  maybe_finish_close(st);
}

typedef struct args {
  const void *src;
  size_t len;
  uint64_t off, rlen;
  uint64_t min_age_s;
  const char *const *many;
  int *statuses;
  size_t nmany;
} args_t;

static int submit(mw_storage_t *st, mw_storage_req_t *req, mw_storage_op_t op, const char *key,
                  mw_storage_cb cb, args_t a) {
  assert(st != NULL);
  assert(req != NULL);
  assert(cb != NULL);
  if (st->closing) return -ESHUTDOWN;
  bool prefix = op == MW_OP_LIST || op == MW_OP_DELETE_PREFIX || op == MW_OP_SWEEP_TMP ||
                op == MW_OP_DELETE_ROOT;
  if (key == NULL || !path_ok(key, prefix)) return -EINVAL;
  if (a.len > st->cfg.max_object_bytes) return -EFBIG;
  if (a.len > 0 && a.src == NULL) return -EINVAL;
  mw_storage_req_front_t *p = &req->priv;
  memset(p, 0, sizeof *p);
  memset(&req->be, 0, sizeof req->be);
  p->st = st;
  p->cb = cb;
  p->op = (uint8_t)op;
  p->src = a.src;
  p->len = a.len;
  p->off = a.off;
  p->rlen = a.rlen;
  p->min_age_s = a.min_age_s;
  p->many = a.many;
  p->statuses = a.statuses;
  p->nmany = (uint32_t)a.nmany;
  strcpy(p->key, key);
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
  p->bg = req->background ? 1 : 0;
  st->nsubmitted++;
  if (mw_storage__fault_arm(st, req) < 0) return -ENOMEM;
  mw_storage_req_t **head = p->bg ? &st->bghead : &st->qhead, **tail = p->bg ? &st->bgtail : &st->qtail;
  if (*head == NULL && can_start(st, p->bg)) {
    start(st, req);
  } else {
    if (*tail) (*tail)->priv.next = req;
    else *head = req;
    *tail = req;
    st->queued++;
    st->bg_queued += p->bg;
  }
  return 0;
}

static const args_t no_args = {NULL, 0, 0, UINT64_MAX, 0, NULL, NULL, 0};

int mw_storage_put_if_absent(mw_storage_t *st, mw_storage_req_t *req, const char *key,
                             const void *bytes, size_t len, mw_storage_cb cb) {
  return submit(st, req, MW_OP_PUT_IF_ABSENT, key, cb, (args_t){bytes, len, 0, UINT64_MAX, 0, NULL, NULL, 0});
}

int mw_storage_put(mw_storage_t *st, mw_storage_req_t *req, const char *key, const void *bytes,
                   size_t len, mw_storage_cb cb) {
  return submit(st, req, MW_OP_PUT, key, cb, (args_t){bytes, len, 0, UINT64_MAX, 0, NULL, NULL, 0});
}

int mw_storage_get(mw_storage_t *st, mw_storage_req_t *req, const char *key, uint64_t offset,
                   uint64_t len, mw_storage_cb cb) {
  return submit(st, req, MW_OP_GET, key, cb, (args_t){NULL, 0, offset, len, 0, NULL, NULL, 0});
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
  return submit(st, req, MW_OP_SWEEP_TMP, prefix, cb,
                (args_t){NULL, 0, 0, UINT64_MAX, min_age_s, NULL, NULL, 0});
}

int mw_storage_delete_root(mw_storage_t *st, mw_storage_req_t *req, mw_storage_cb cb) {
  return submit(st, req, MW_OP_DELETE_ROOT, "", cb, no_args);
}

int mw_storage_delete_many(mw_storage_t *st, mw_storage_req_t *req, const char *const *keys,
                           size_t n, int *statuses, mw_storage_cb cb) {
  assert(st != NULL);
  assert(req != NULL);
  _Static_assert(MW_STORAGE_DELETE_MANY_MAX <= UINT32_MAX, "nmany is 32 bits");
  if (keys == NULL || statuses == NULL || n == 0 || n > MW_STORAGE_DELETE_MANY_MAX) return -EINVAL;
  for (size_t i = 0; i < n; i++)
    if (keys[i] == NULL || !path_ok(keys[i], false)) return -EINVAL;
  for (size_t i = 0; i < n; i++) statuses[i] = 0;
  /* the first key names the request (errors, the local directory) */
  return submit(st, req, MW_OP_DELETE_MANY, keys[0], cb,
                (args_t){NULL, 0, 0, UINT64_MAX, 0, keys, statuses, n});
}
