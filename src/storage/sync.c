/*
 * sync.c — blocking storage calls for start-up and tools (storage.h,
 * "blocking calls").
 *
 * Design: an mw_storage_sync_t owns a private uv_loop_t and one storage
 * opened on it with the caller's configuration. Each call submits a single
 * request and runs the private loop (UV_RUN_ONCE) until its callback has
 * run; the loop then has nothing in flight, so the next call starts clean.
 * Because the loop is private, a call is legal from anywhere — including a
 * callback of the caller's own loop, which must never be run re-entrantly —
 * at the price of blocking that thread for the request's duration. The
 * storage is the same code as the asynchronous one, so start-up reads and
 * writes take exactly the documented step sequences (and see the same fault
 * injection, when the configuration carries it).
 *
 * Bounds: the private loop holds only this storage's handles; a request
 * completes or fails by the backend's own limits (S3 deadlines, disk
 * errors), so no extra timeout is imposed here.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "storage/storage.h"

struct mw_storage_sync {
  uv_loop_t loop;
  mw_storage_t *st;
};

typedef struct waiter {
  int status;
  bool done;
} waiter_t;

static void on_done(mw_storage_req_t *req, int status) {
  waiter_t *w = req->data;
  assert(!w->done);
  w->status = status;
  w->done = true;
}

/* Run the private loop until req (submitted with rc = submit's result)
 * completes; copy its reason into *err on failure. */
static int wait_req(mw_storage_sync_t *ss, mw_storage_req_t *req, const char *key, int rc,
                    mw_err_t *err) {
  waiter_t *w = req->data;
  if (rc < 0)
    return mw_err_set(err, rc, "%s/%s: refused: %s", mw_storage_uri(ss->st), key, strerror(-rc));
  while (!w->done) uv_run(&ss->loop, UV_RUN_ONCE);
  assert(mw_storage_inflight(ss->st) == 0);
  if (w->status < 0 && w->status != -ENOENT && w->status != -EEXIST)
    mw_err_set(err, w->status, "%s", mw_storage_req_error(req));
  return w->status;
}

static void req_start(mw_storage_req_t *req, waiter_t *w) {
  mw_storage_req_init(req);
  *w = (waiter_t){0, false};
  req->data = w;
}

int mw_storage_sync_open(const mw_storage_config_t *cfg, mw_storage_sync_t **out, mw_err_t *err) {
  assert(cfg != NULL);
  assert(out != NULL);
  *out = NULL;
  mw_storage_sync_t *ss = calloc(1, sizeof *ss);
  if (ss == NULL) return mw_err_set(err, -ENOMEM, "storage: out of memory");
  int rc = uv_loop_init(&ss->loop);
  if (rc < 0) {
    free(ss);
    return mw_err_set(err, rc, "storage: uv_loop_init: %s", uv_strerror(rc));
  }
  if ((rc = mw_storage_open(&ss->loop, cfg, &ss->st, err)) < 0) {
    uv_loop_close(&ss->loop);
    free(ss);
    return rc;
  }
  *out = ss;
  return 0;
}

static void on_closed(void *arg) { *(bool *)arg = true; }

void mw_storage_sync_close(mw_storage_sync_t *ss) {
  if (ss == NULL) return;
  bool closed = false;
  mw_storage_close(ss->st, on_closed, &closed);
  while (!closed) uv_run(&ss->loop, UV_RUN_ONCE);
  uv_run(&ss->loop, UV_RUN_DEFAULT); /* close callbacks of its handles */
  int rc = uv_loop_close(&ss->loop);
  if (rc != 0) mw_log_warn("storage: private loop closed with handles open: %s", uv_strerror(rc));
  free(ss);
}

mw_storage_t *mw_storage_sync_storage(mw_storage_sync_t *ss) {
  assert(ss != NULL);
  return ss->st;
}

int mw_storage_sync_get(mw_storage_sync_t *ss, const char *key, mw_buf_t *out, mw_err_t *err) {
  assert(ss != NULL);
  assert(key != NULL);
  assert(out != NULL);
  mw_storage_req_t req;
  waiter_t w;
  req_start(&req, &w);
  int rc = wait_req(ss, &req, key, mw_storage_get(ss->st, &req, key, 0, UINT64_MAX, on_done), err);
  if (rc == 0) {
    mw_buf_free(out);
    *out = req.buf; /* hand the bytes over */
    req.buf = (mw_buf_t)MW_BUF_INIT;
  }
  mw_storage_req_cleanup(&req);
  return rc;
}

int mw_storage_sync_head(mw_storage_sync_t *ss, const char *key, uint64_t *size, mw_err_t *err) {
  assert(ss != NULL);
  assert(key != NULL);
  mw_storage_req_t req;
  waiter_t w;
  req_start(&req, &w);
  int rc = wait_req(ss, &req, key, mw_storage_head(ss->st, &req, key, on_done), err);
  if (rc == 0 && size != NULL) *size = req.size;
  mw_storage_req_cleanup(&req);
  return rc;
}

int mw_storage_sync_list(mw_storage_sync_t *ss, const char *prefix, mw_storage_req_t *req,
                         mw_err_t *err) {
  assert(ss != NULL);
  assert(prefix != NULL);
  assert(req != NULL);
  waiter_t w = {0, false};
  void *data = req->data;
  req->data = &w;
  int rc = wait_req(ss, req, prefix, mw_storage_list(ss->st, req, prefix, on_done), err);
  req->data = data;
  assert(rc < 0 || req->nkeys == 0 || req->keys != NULL);
  return rc;
}

int mw_storage_sync_put(mw_storage_sync_t *ss, const char *key, const void *bytes, size_t len,
                        bool if_absent, mw_err_t *err) {
  assert(ss != NULL);
  assert(key != NULL);
  mw_storage_req_t req;
  waiter_t w;
  req_start(&req, &w);
  int rc = if_absent ? mw_storage_put_if_absent(ss->st, &req, key, bytes, len, on_done)
                     : mw_storage_put(ss->st, &req, key, bytes, len, on_done);
  rc = wait_req(ss, &req, key, rc, err);
  mw_storage_req_cleanup(&req);
  return rc;
}

int mw_storage_sync_delete(mw_storage_sync_t *ss, const char *key, mw_err_t *err) {
  assert(ss != NULL);
  assert(key != NULL);
  mw_storage_req_t req;
  waiter_t w;
  req_start(&req, &w);
  int rc = wait_req(ss, &req, key, mw_storage_delete(ss->st, &req, key, on_done), err);
  mw_storage_req_cleanup(&req);
  return rc;
}

int mw_storage_sync_delete_many(mw_storage_sync_t *ss, const char *const *keys, size_t n,
                                int *statuses, mw_err_t *err) {
  assert(ss != NULL);
  assert(keys != NULL);
  assert(statuses != NULL);
  mw_storage_req_t req;
  waiter_t w;
  req_start(&req, &w);
  int rc = mw_storage_delete_many(ss->st, &req, keys, n, statuses, on_done);
  rc = wait_req(ss, &req, n > 0 && keys[0] != NULL ? keys[0] : "", rc, err);
  mw_storage_req_cleanup(&req);
  return rc;
}

int mw_storage_sync_delete_prefix(mw_storage_sync_t *ss, const char *prefix, mw_err_t *err) {
  assert(ss != NULL);
  assert(prefix != NULL);
  mw_storage_req_t req;
  waiter_t w;
  req_start(&req, &w);
  int rc = wait_req(ss, &req, prefix, mw_storage_delete_prefix(ss->st, &req, prefix, on_done), err);
  if (rc == 0) rc = req.nkeys > INT32_MAX ? INT32_MAX : (int)req.nkeys;
  mw_storage_req_cleanup(&req);
  return rc;
}

int mw_storage_sync_delete_root(mw_storage_sync_t *ss, mw_err_t *err) {
  assert(ss != NULL);
  mw_storage_req_t req;
  waiter_t w;
  req_start(&req, &w);
  int rc = wait_req(ss, &req, "", mw_storage_delete_root(ss->st, &req, on_done), err);
  mw_storage_req_cleanup(&req);
  return rc;
}
