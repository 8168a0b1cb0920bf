/*
 * sio.c — blocking calls over the asynchronous storage layer (see sio.h).
 *
 * Each call submits one request and runs the private loop until its
 * callback has set `done`; the storage layer promises the callback runs
 * exactly once, so the loop always stops.
 */
#include "inspect/sio.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct wait {
  bool done;
  int status;
} wait_t;

static void on_done(mw_storage_req_t *req, int status) {
  wait_t *w = req->data;
  w->done = true;
  w->status = status;
}

static int run(mw_sio_t *s, wait_t *w) {
  while (!w->done) uv_run(&s->loop, UV_RUN_ONCE);
  return w->status;
}

int mw_sio_open(mw_sio_t *s, const char *root, mw_err_t *err) {
  assert(s != NULL && root != NULL);
  memset(s, 0, sizeof *s);
  struct stat sb;
  /* the storage layer creates a missing root: a typo must not make a table */
  if (stat(root, &sb) != 0 || !S_ISDIR(sb.st_mode))
    return mw_err_set(err, -ENOENT, "%s: no such table directory", root);
  if (strlen(root) >= sizeof s->root) return mw_err_set(err, -ENAMETOOLONG, "%s: path too long", root);
  strcpy(s->root, root);
  int rc = uv_loop_init(&s->loop);
  if (rc < 0) return mw_err_set(err, rc, "uv_loop_init: %s", uv_strerror(rc));
  mw_storage_config_t cfg;
  mw_storage_config_init(&cfg, root);
  cfg.backend = MW_STORAGE_THREADS;
  cfg.fsync = false;
  cfg.max_object_bytes = MW_SIO_MAX_OBJECT_BYTES;
  if ((rc = mw_storage_open(&s->loop, &cfg, &s->st, err)) < 0) {
    uv_loop_close(&s->loop);
    return mw_err_set(err, rc, "%s: cannot open storage", root);
  }
  return 0;
}

static void on_closed(void *arg) { *(bool *)arg = true; }

void mw_sio_close(mw_sio_t *s) {
  if (s == NULL || s->st == NULL) return;
  bool closed = false;
  mw_storage_close(s->st, on_closed, &closed);
  while (!closed) uv_run(&s->loop, UV_RUN_ONCE);
  uv_run(&s->loop, UV_RUN_DEFAULT); /* let closing handles finish */
  uv_loop_close(&s->loop);
  s->st = NULL;
}

int mw_sio_get(mw_sio_t *s, const char *key, mw_buf_t *out, mw_err_t *err) {
  assert(s != NULL && s->st != NULL && key != NULL && out != NULL);
  mw_storage_req_t req;
  wait_t w = {0};
  mw_storage_req_init(&req);
  req.data = &w;
  int rc = mw_storage_get(s->st, &req, key, 0, UINT64_MAX, on_done);
  if (rc == 0) rc = run(s, &w);
  if (rc == 0) {
    mw_buf_free(out);
    *out = req.buf; /* take the bytes */
    mw_buf_init(&req.buf);
  }
  mw_storage_req_cleanup(&req);
  if (rc < 0) return mw_err_set(err, rc, "%s: %s", key, rc == -ENOENT ? "no such object" : mw_strerror(rc));
  return 0;
}

int mw_sio_head(mw_sio_t *s, const char *key, uint64_t *size, mw_err_t *err) {
  assert(s != NULL && s->st != NULL && key != NULL && size != NULL);
  mw_storage_req_t req;
  wait_t w = {0};
  mw_storage_req_init(&req);
  req.data = &w;
  int rc = mw_storage_head(s->st, &req, key, on_done);
  if (rc == 0) rc = run(s, &w);
  if (rc == 0) *size = req.size;
  mw_storage_req_cleanup(&req);
  if (rc < 0 && rc != -ENOENT) return mw_err_set(err, rc, "%s: %s", key, mw_strerror(rc));
  return rc;
}

void mw_sio_free_keys(char **keys, size_t n) {
  for (size_t i = 0; keys != NULL && i < n; i++) free(keys[i]);
  free(keys);
}

int mw_sio_list(mw_sio_t *s, const char *prefix, char ***keys, size_t *n, mw_err_t *err) {
  assert(s != NULL && s->st != NULL && prefix != NULL && keys != NULL && n != NULL);
  *keys = NULL;
  *n = 0;
  mw_storage_req_t req;
  wait_t w = {0};
  mw_storage_req_init(&req);
  req.data = &w;
  int rc = mw_storage_list(s->st, &req, prefix, on_done);
  if (rc == 0) rc = run(s, &w);
  if (rc == 0 && req.nkeys > 0) {
    char **v = calloc(req.nkeys, sizeof *v);
    if (v == NULL) rc = -ENOMEM;
    for (size_t i = 0; rc == 0 && i < req.nkeys; i++) {
      if ((v[i] = strdup(req.keys[i])) == NULL) rc = -ENOMEM;
    }
    if (rc == 0) {
      *keys = v;
      *n = req.nkeys;
    } else {
      mw_sio_free_keys(v, req.nkeys);
    }
  }
  mw_storage_req_cleanup(&req);
  if (rc < 0) return mw_err_set(err, rc, "list %s: %s", prefix[0] ? prefix : "(root)", mw_strerror(rc));
  return 0;
}
