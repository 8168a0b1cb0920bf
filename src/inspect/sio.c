/*
 * sio.c — the inspector's reads, over the storage layer's blocking calls
 * (see sio.h).
 */
#include "inspect/sio.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static bool is_local(const char *uri) { return strstr(uri, "://") == NULL || strncmp(uri, "file://", 7) == 0; }

int mw_sio_open(mw_sio_t *s, const char *root, mw_err_t *err) {
  assert(s != NULL);
  assert(root != NULL);
  memset(s, 0, sizeof *s);
  if (strlen(root) >= sizeof s->root) return mw_err_set(err, -ENAMETOOLONG, "%s: path too long", root);
  strcpy(s->root, root);
  if (is_local(root)) {
    const char *path = strncmp(root, "file://", 7) == 0 ? root + 7 : root;
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
      return mw_err_set(err, -ENOENT, "%s: no such table directory", root);
  }
  mw_storage_config_t cfg;
  mw_storage_config_init(&cfg, root);
  cfg.backend = is_local(root) ? MW_STORAGE_THREADS : MW_STORAGE_S3;
  cfg.durable = false; /* nothing is written */
  cfg.max_object_bytes = MW_SIO_MAX_OBJECT_BYTES;
  int rc = mw_storage_sync_open(&cfg, &s->ss, err);
  if (rc < 0) return mw_err_set(err, rc, "%s: cannot open storage", root);
  return 0;
}

void mw_sio_close(mw_sio_t *s) {
  if (s == NULL || s->ss == NULL) return;
  mw_storage_sync_close(s->ss);
  s->ss = NULL;
}

int mw_sio_get(mw_sio_t *s, const char *key, mw_buf_t *out, mw_err_t *err) {
  assert(s != NULL);
  assert(s->ss != NULL);
  assert(key != NULL);
  assert(out != NULL);
  mw_err_t inner = {0};
  int rc = mw_storage_sync_get(s->ss, key, out, &inner);
  if (rc < 0)
    return mw_err_set(err, rc, "%s: %s", key, rc == -ENOENT ? "no such object" : inner.msg[0] ? inner.msg : mw_strerror(rc));
  return 0;
}

int mw_sio_head(mw_sio_t *s, const char *key, uint64_t *size, mw_err_t *err) {
  assert(s != NULL);
  assert(s->ss != NULL);
  assert(key != NULL);
  assert(size != NULL);
  mw_err_t inner = {0};
  int rc = mw_storage_sync_head(s->ss, key, size, &inner);
  if (rc < 0 && rc != -ENOENT) return mw_err_set(err, rc, "%s: %s", key, inner.msg[0] ? inner.msg : mw_strerror(rc));
  return rc;
}

void mw_sio_free_keys(char **keys, size_t n) {
  assert(keys != NULL || n == 0);
  for (size_t i = 0; keys != NULL && i < n; i++) free(keys[i]);
  free(keys);
}

int mw_sio_list(mw_sio_t *s, const char *prefix, char ***keys, size_t *n, mw_err_t *err) {
  assert(s != NULL);
  assert(s->ss != NULL);
  assert(prefix != NULL);
  assert(keys != NULL);
  assert(n != NULL);
  *keys = NULL;
  *n = 0;
  mw_storage_req_t req;
  mw_storage_req_init(&req);
  mw_err_t inner = {0};
  int rc = mw_storage_sync_list(s->ss, prefix, &req, &inner);
  if (rc == 0 && req.nkeys > 0) {
    char **v = calloc(req.nkeys, sizeof *v);
    if (v == NULL) rc = -ENOMEM;
    for (size_t i = 0; rc == 0 && i < req.nkeys; i++)
      if ((v[i] = strdup(req.keys[i])) == NULL) rc = -ENOMEM;
    if (rc == 0) {
      *keys = v;
      *n = req.nkeys;
    } else {
      mw_sio_free_keys(v, req.nkeys);
    }
  }
  mw_storage_req_cleanup(&req);
  if (rc < 0)
    return mw_err_set(err, rc, "list %s: %s", prefix[0] ? prefix : "(root)", inner.msg[0] ? inner.msg : mw_strerror(rc));
  return 0;
}
