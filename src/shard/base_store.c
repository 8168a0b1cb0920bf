/*
 * base_store.c — see base_store.h.
 *
 * read_latest:  HINT (GET hint) -> HEAD hint -> PROBE (HEAD v+1, v+2, repeat)
 *               -> GET newest -> decode;   any miss before a version is
 *               known -> LIST -> GET -> decode
 * commit:       PUTS (all at once) -> LINK (put_if_absent manifest) -> HINT
 *
 * A sample `_versions/` of a table LanceDB made, then compacted twice:
 *   18446744073709551608.manifest  version 7  (u64::MAX - 7)
 *   18446744073709551609.manifest  version 6
 *   ...
 *   latest_version_hint.json       {"version":7}
 */
#include "shard/base_store.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "lance/shard_manifest.h" /* mw_version_hint_* */

enum { K_READ = 1, K_COMMIT };
enum { P_IDLE = 0, P_HINT, P_HEAD, P_PROBE, P_LIST, P_GET, P_PUTS, P_LINK, P_HINT_PUT };

int mw_bstore_manifest_key(uint64_t version, char *out, size_t n) {
  assert(out != NULL);
  char name[MW_DMANIFEST_NAME_BYTES];
  int rc = mw_dmanifest_name(version, name, sizeof name);
  if (rc < 0) return rc;
  int k = snprintf(out, n, "%s%s", MW_BSTORE_VERSIONS_DIR, name);
  return k < 0 || (size_t)k >= n ? -ENAMETOOLONG : k;
}

void mw_bstore_op_init(mw_bstore_op_t *op) {
  assert(op != NULL);
  memset(op, 0, sizeof *op);
  mw_storage_req_init(&op->req);
  op->req.data = op;
  for (int i = 0; i < 2; i++) {
    mw_storage_req_init(&op->probes[i]);
    op->probes[i].data = op;
  }
}

static void puts_free(mw_bstore_op_t *op) {
  for (size_t i = 0; i < op->n_puts; i++) mw_storage_req_cleanup(&op->puts[i]);
  free(op->puts);
  op->puts = NULL;
  op->n_puts = 0;
}

void mw_bstore_op_free(mw_bstore_op_t *op) {
  if (op == NULL) return;
  assert(!op->busy);
  if (op->has_meta) mw_table_meta_free(&op->meta);
  op->has_meta = false;
  mw_storage_req_cleanup(&op->req);
  for (int i = 0; i < 2; i++) mw_storage_req_cleanup(&op->probes[i]);
  puts_free(op);
}

static void finish(mw_bstore_op_t *op, int status) {
  assert(op->busy);
  op->busy = false;
  op->phase = P_IDLE;
  if (status < 0 && op->err.code == 0) mw_err_set(&op->err, status, "base table: %s", mw_strerror(status));
  op->cb(op, status);
}

/* ------------------------------------------------------------------ read */

static void on_read(mw_storage_req_t *req, int status);

static void get_version(mw_bstore_op_t *op, uint64_t v) {
  char key[MW_BSTORE_KEY_BYTES];
  int rc = mw_bstore_manifest_key(v, key, sizeof key);
  op->phase = P_GET;
  op->version = v;
  if (rc >= 0) rc = mw_storage_get(op->st, &op->req, key, 0, UINT64_MAX, on_read);
  if (rc < 0) finish(op, rc);
}

static void list_versions(mw_bstore_op_t *op) {
  op->phase = P_LIST;
  int rc = mw_storage_list(op->st, &op->req, MW_BSTORE_VERSIONS_DIR, on_read);
  if (rc < 0) finish(op, rc);
}

static void probe(mw_bstore_op_t *op) {
  op->phase = P_PROBE;
  op->found = 0;
  op->first_err = 0;
  op->outstanding = 2;
  if (++op->steps > MW_BSTORE_MAX_PROBE_STEPS) {
    list_versions(op);
    return;
  }
  for (int i = 0; i < 2; i++) {
    char key[MW_BSTORE_KEY_BYTES];
    int rc = mw_bstore_manifest_key(op->probe_base + 1 + (uint64_t)i, key, sizeof key);
    if (rc >= 0) rc = mw_storage_head(op->st, &op->probes[i], key, on_read);
    if (rc < 0) {
      if (op->first_err == 0) op->first_err = rc;
      op->outstanding--;
    }
  }
  if (op->outstanding == 0) finish(op, op->first_err);
}

static void on_list(mw_bstore_op_t *op) {
  size_t n = op->req.nkeys, k = 0;
  char **names = calloc(n + 1, sizeof *names);
  if (names == NULL) {
    finish(op, -ENOMEM);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    const char *key = op->req.keys[i] + strlen(MW_BSTORE_VERSIONS_DIR);
    if (strchr(key, '/') == NULL) names[k++] = (char *)key;
  }
  uint64_t v = 0;
  bool v2 = true;
  int rc = mw_dmanifest_latest(names, k, &v, NULL, &op->err);
  for (size_t i = 0; rc == 0 && i < k; i++) {
    uint64_t x;
    if (mw_dmanifest_name_parse(names[i], &x, &v2) == 0 && !v2)
      rc = mw_err_set(&op->err, -ENOTSUP, "base table: _versions/ uses V1 manifest names (%s); "
                      "memwald commits only V2 names", names[i]);
  }
  free(names);
  if (rc < 0) finish(op, rc);
  else get_version(op, v);
}

static void on_read(mw_storage_req_t *req, int status) {
  mw_bstore_op_t *op = req->data;
  switch (op->phase) {
    case P_HINT: {
      uint64_t hint = 0;
      if (status == 0 && mw_version_hint_parse(req->buf.data, req->buf.len, &hint, NULL) == 0 &&
          hint > 0) {
        op->probe_base = hint;
        op->phase = P_HEAD;
        char key[MW_BSTORE_KEY_BYTES];
        int rc = mw_bstore_manifest_key(hint, key, sizeof key);
        if (rc >= 0) rc = mw_storage_head(op->st, &op->req, key, on_read);
        if (rc < 0) finish(op, rc);
      } else if (status == 0 || status == -ENOENT) {
        list_versions(op);
      } else {
        mw_err_set(&op->err, status, "base table: GET %s: %s", MW_BSTORE_HINT_KEY, mw_strerror(status));
        finish(op, status);
      }
      return;
    }
    case P_HEAD:
      if (status == 0) probe(op);
      else if (status == -ENOENT) list_versions(op); /* a stale or foreign hint */
      else finish(op, status);
      return;
    case P_PROBE: {
      uint64_t v = op->probe_base + 1 + (uint64_t)(req - op->probes);
      if (status == 0 && v > op->found) op->found = v;
      else if (status < 0 && status != -ENOENT && op->first_err == 0) op->first_err = status;
      if (--op->outstanding > 0) return;
      if (op->first_err < 0) finish(op, op->first_err);
      else if (op->found > 0) {
        op->probe_base = op->found;
        probe(op);
      } else {
        get_version(op, op->probe_base);
      }
      return;
    }
    case P_LIST:
      if (status < 0) finish(op, status == -ENOENT ? -ENOENT : status);
      else on_list(op);
      return;
    case P_GET: {
      if (status < 0) {
        mw_err_set(&op->err, status, "base table: GET version %" PRIu64 ": %s", op->version,
                   mw_strerror(status));
        finish(op, status);
        return;
      }
      if (op->has_meta) mw_table_meta_free(&op->meta);
      op->has_meta = true;
      int rc = mw_table_meta_read_ex(req->buf.data, req->buf.len, op->accept_flags, &op->meta, &op->err);
      op->meta.version = op->version;
      finish(op, rc);
      return;
    }
    default:
      assert(!"base_store: read callback in a commit phase");
  }
}

int mw_bstore_read_latest(mw_storage_t *st, mw_bstore_op_t *op, mw_bstore_cb cb) {
  assert(st != NULL);
  assert(op != NULL);
  assert(cb != NULL);
  if (op->busy) return -EBUSY;
  op->st = st;
  op->cb = cb;
  op->kind = K_READ;
  op->steps = 0;
  op->version = 0;
  mw_err_clear(&op->err);
  op->phase = P_HINT;
  int rc = mw_storage_get(st, &op->req, MW_BSTORE_HINT_KEY, 0, MW_VERSION_HINT_MAX_BYTES, on_read);
  if (rc == 0) op->busy = true;
  return rc;
}

/* ---------------------------------------------------------------- commit */

static void on_commit_io(mw_storage_req_t *req, int status);

static void link_manifest(mw_bstore_op_t *op) {
  op->phase = P_LINK;
  int rc = mw_storage_put_if_absent(op->st, &op->req, op->manifest_key, op->manifest->data,
                                    op->manifest->len, on_commit_io);
  if (rc < 0) {
    mw_err_set(&op->err, rc, "base table: put %s refused", op->manifest_key);
    finish(op, rc);
  }
}

static void on_commit_io(mw_storage_req_t *req, int status) {
  mw_bstore_op_t *op = req->data;
  if (op->phase == P_PUTS) {
    if (status < 0 && op->first_err == 0) {
      op->first_err = status;
      mw_err_set(&op->err, status, "base table: put %s: %s", op->files[req - op->puts].key,
                 mw_strerror(status));
    }
    if (--op->outstanding > 0) return;
    if (op->first_err < 0) finish(op, op->first_err);
    else link_manifest(op);
    return;
  }
  if (op->phase == P_LINK) {
    if (status == -EEXIST) {
      mw_err_set(&op->err, status, "base table: version %" PRIu64 " was committed by another writer",
                 op->commit_version);
      finish(op, status);
      return;
    }
    if (status < 0) {
      mw_err_set(&op->err, status, "base table: put %s: %s", op->manifest_key, mw_strerror(status));
      finish(op, status);
      return;
    }
    /* Committed. The hint is LanceDB's convention; a stale hint only costs
     * readers a probe, so its failure is logged, not returned. */
    op->phase = P_HINT_PUT;
    int k = snprintf(op->hint, sizeof op->hint, "{\"version\":%" PRIu64 "}", op->commit_version);
    assert(k > 0);
    assert((size_t)k < sizeof op->hint);
    int rc = mw_storage_put(op->st, &op->req, MW_BSTORE_HINT_KEY, op->hint, (size_t)k, on_commit_io);
    if (rc < 0) {
      mw_log_warn("base table: version %" PRIu64 " committed; hint not written: %s",
                  op->commit_version, mw_strerror(rc));
      finish(op, 0);
    }
    return;
  }
  assert(op->phase == P_HINT_PUT);
  if (status < 0)
    mw_log_warn("base table: version %" PRIu64 " committed; hint not written: %s",
                op->commit_version, mw_strerror(status));
  finish(op, 0);
}

int mw_bstore_commit(mw_storage_t *st, mw_bstore_op_t *op, const mw_bstore_file_t *files, size_t n,
                     uint64_t version, const mw_buf_t *manifest, mw_bstore_cb cb) {
  assert(st != NULL);
  assert(op != NULL);
  assert(cb != NULL);
  assert(manifest != NULL);
  assert(files != NULL || n == 0);
  if (op->busy) return -EBUSY;
  if (n > MW_BSTORE_MAX_FILES) return -E2BIG;
  int rc = mw_bstore_manifest_key(version, op->manifest_key, sizeof op->manifest_key);
  if (rc < 0) return rc;
  puts_free(op);
  op->puts = calloc(n + 1, sizeof *op->puts);
  if (op->puts == NULL) return -ENOMEM;
  op->n_puts = n;
  for (size_t i = 0; i < n; i++) {
    mw_storage_req_init(&op->puts[i]);
    op->puts[i].data = op;
  }
  op->st = st;
  op->cb = cb;
  op->kind = K_COMMIT;
  op->files = files;
  op->n_files = n;
  op->manifest = manifest;
  op->commit_version = version;
  op->first_err = 0;
  mw_err_clear(&op->err);
  if (n == 0) {
    op->phase = P_LINK;
    rc = mw_storage_put_if_absent(st, &op->req, op->manifest_key, manifest->data, manifest->len,
                                  on_commit_io);
    op->busy = rc == 0;
    return rc;
  }
  op->busy = true;
  op->phase = P_PUTS;
  op->outstanding = n;
  for (size_t i = 0; i < n; i++) {
    rc = mw_storage_put(st, &op->puts[i], files[i].key, files[i].data, files[i].len, on_commit_io);
    if (rc < 0) {
      if (op->first_err == 0) {
        op->first_err = rc;
        mw_err_set(&op->err, rc, "base table: put %s refused", files[i].key);
      }
      op->outstanding--;
    }
  }
  if (op->outstanding == 0) { /* every put was refused at once: nothing is in flight */
    op->busy = false;
    op->phase = P_IDLE;
    return op->first_err;
  }
  return 0;
}
