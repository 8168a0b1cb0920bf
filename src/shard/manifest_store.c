/*
 * manifest_store.c — see manifest_store.h.
 *
 * Every operation is one small state machine over the same "read latest"
 * sub-machine:
 *
 *   HINT  GET version_hint.json (missing or unparsable -> hint 1)
 *   PROBE HEAD the versions mw_latest_search_next() asks for, all at once,
 *         feed each answer; repeat until the search is done
 *   LIST  only when the hinted version was missing: LIST manifest/ and take
 *         the newest name (GC collects old versions, and Lance's fallback
 *         to version 1 would then find a stale latest, or none)
 *   GET   GET the latest version and decode it (latest 0: no manifest)
 *
 * and then the kind-specific step:
 *
 *   READ   done
 *   CHECK  stored.writer_epoch > local -> -ESTALE
 *   CLAIM  SEALED -> -EROFS; else put_if_absent(v+1, epoch+1)  --EEXIST--> re-read:
 *          stored epoch >= target -> -ESTALE, else retry (<= 16)
 *   COMMIT (cache or read) fenced? -> fn(cur) -> put_if_absent(cur.version+1)
 *          --EEXIST--> drop cache, retry (<= 10)
 *
 * and after a won put: PUT version_hint.json (best effort), callback.
 * A tailer's bump between our read and our put is just a lost put_if_absent:
 * we never skip a version, so no gap can appear (§3.2).
 */
#include "shard/manifest_store.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"

enum { K_READ = 1, K_CLAIM, K_CHECK, K_COMMIT };
enum { P_IDLE = 0, P_HINT, P_PROBE, P_LIST, P_GET, P_PUT, P_HINT_PUT };

void mw_mstore_init(mw_mstore_t *ms, mw_storage_t *st, const uint8_t shard_id[16],
                    uint32_t spec_id, uint32_t scan_batch) {
  assert(ms != NULL);
  assert(st != NULL);
  memset(ms, 0, sizeof *ms);
  ms->st = st;
  memcpy(ms->shard_id, shard_id, 16);
  mw_shard_uuid_format(shard_id, ms->shard_str);
  snprintf(ms->shard_dir, sizeof ms->shard_dir, "_mem_wal/%s/", ms->shard_str);
  ms->spec_id = spec_id;
  if (scan_batch == 0) scan_batch = MW_LATEST_DEFAULT_BATCH;
  ms->scan_batch = scan_batch > MW_MSTORE_MAX_PROBES ? MW_MSTORE_MAX_PROBES : scan_batch;
  mw_shard_manifest_init(&ms->cached);
}

void mw_mstore_free(mw_mstore_t *ms) {
  if (ms == NULL) return;
  mw_shard_manifest_free(&ms->cached);
  ms->has_cached = false;
}

void mw_mstore_invalidate(mw_mstore_t *ms) {
  assert(ms != NULL);
  ms->has_cached = false;
}

void mw_mstore_op_init(mw_mstore_op_t *op) {
  assert(op != NULL);
  memset(op, 0, sizeof *op);
  mw_shard_manifest_init(&op->m);
  mw_shard_manifest_init(&op->next);
  mw_storage_req_init(&op->req);
  for (size_t i = 0; i < MW_MSTORE_MAX_PROBES; i++) mw_storage_req_init(&op->probes[i]);
}

void mw_mstore_op_free(mw_mstore_op_t *op) {
  if (op == NULL) return;
  assert(!op->busy);
  mw_shard_manifest_free(&op->m);
  mw_shard_manifest_free(&op->next);
  mw_buf_free(&op->enc);
  mw_storage_req_cleanup(&op->req);
  for (size_t i = 0; i < MW_MSTORE_MAX_PROBES; i++) mw_storage_req_cleanup(&op->probes[i]);
}

int mw_mstore_manifest_key(const mw_mstore_t *ms, uint64_t version, char *out, size_t n) {
  char name[MW_BITREV_NAME_BYTES];
  int rc = mw_shard_manifest_name(version, name, sizeof name);
  if (rc < 0) return rc;
  int k = snprintf(out, n, "%smanifest/%s", ms->shard_dir, name);
  return (k < 0 || (size_t)k >= n) ? -ENAMETOOLONG : 0;
}

static void hint_key(const mw_mstore_t *ms, char *out, size_t n) {
  snprintf(out, n, "%smanifest/version_hint.json", ms->shard_dir);
}

/* ------------------------------------------------------------------ finish */

/* The op ends: its callback, then the store's on_idle when it was the last
 * one in flight (the callback may have started another). */
static void finish(mw_mstore_op_t *op, int status) {
  mw_mstore_t *ms = op->ms;
  assert(op->busy);
  assert(ms->n_busy > 0);
  op->busy = false;
  op->phase = P_IDLE;
  ms->n_busy--;
  if (status < 0 && op->err.code == 0) mw_err_set(&op->err, status, "shard %s: %s", ms->shard_str, mw_strerror(status));
  op->cb(op, status);
  if (ms->n_busy == 0 && ms->on_idle != NULL) ms->on_idle(ms->idle_arg);
}

static void set_cache(mw_mstore_t *ms, const mw_shard_manifest_t *m) {
  if (mw_shard_manifest_copy(&ms->cached, m) == 0) ms->has_cached = true;
  else ms->has_cached = false;
}

/* ------------------------------------------------------------- read latest */

static int read_start(mw_mstore_op_t *op);
static void after_read(mw_mstore_op_t *op, uint64_t latest);
static void on_probe(mw_storage_req_t *req, int status);

static void on_list(mw_storage_req_t *req, int status) {
  mw_mstore_op_t *op = req->data;
  if (status < 0 && status != -ENOENT) {
    finish(op, status);
    return;
  }
  uint64_t latest = mw_latest_search_result(&op->search);
  size_t pl = strlen(op->ms->shard_dir) + strlen("manifest/");
  for (size_t i = 0; status == 0 && i < req->nkeys; i++) {
    uint64_t v;
    if (strlen(req->keys[i]) <= pl) continue;
    if (mw_shard_manifest_name_parse(req->keys[i] + pl, &v) == 0 && v > latest) latest = v;
  }
  if (latest != mw_latest_search_result(&op->search))
    mw_log_info("shard %s: version hint named a missing manifest; the listing's newest is v%" PRIu64,
                op->ms->shard_str, latest);
  mw_storage_req_cleanup(req);
  mw_storage_req_init(req);
  req->data = op;
  after_read(op, latest);
}

static void probe_step(mw_mstore_op_t *op) {
  if (mw_latest_search_done(&op->search)) {
    /* No hint at all is a new shard (GC never collects below a hint it has
     * not checked, and never deletes the hint): no LIST then. */
    if (!op->hint_read || !mw_latest_search_hint_missed(&op->search)) {
      after_read(op, mw_latest_search_result(&op->search));
      return;
    }
    char key[MW_MSTORE_KEY_BYTES];
    snprintf(key, sizeof key, "%smanifest/", op->ms->shard_dir);
    op->phase = P_LIST;
    op->req.data = op;
    int rc = mw_storage_list(op->ms->st, &op->req, key, on_list);
    if (rc < 0) finish(op, rc);
    return;
  }
  size_t k = mw_latest_search_next(&op->search, op->probe_v, op->ms->scan_batch);
  assert(k > 0);
  assert(k <= MW_MSTORE_MAX_PROBES);
  op->phase = P_PROBE;
  op->outstanding = (uint32_t)k;
  op->probe_err = 0;
  for (size_t i = 0; i < k; i++) {
    char key[MW_MSTORE_KEY_BYTES];
    int rc = mw_mstore_manifest_key(op->ms, op->probe_v[i], key, sizeof key);
    op->probes[i].data = op;
    if (rc == 0) rc = mw_storage_head(op->ms->st, &op->probes[i], key, on_probe);
    if (rc < 0) {
      /* Probes already submitted will still call back; count this one done. */
      op->probe_err = rc;
      op->probe_v[i] = 0;
      if (--op->outstanding == 0) finish(op, rc);
    }
  }
}

static void on_probe(mw_storage_req_t *req, int status) {
  mw_mstore_op_t *op = req->data;
  size_t i = (size_t)(req - op->probes);
  assert(i < MW_MSTORE_MAX_PROBES);
  assert(op->phase == P_PROBE);
  if (status < 0 && status != -ENOENT) op->probe_err = status;
  else if (op->probe_err == 0) mw_latest_search_feed(&op->search, op->probe_v[i], status == 0);
  if (--op->outstanding > 0) return;
  if (op->probe_err < 0) {
    finish(op, op->probe_err);
    return;
  }
  probe_step(op);
}

static void on_hint(mw_storage_req_t *req, int status) {
  mw_mstore_op_t *op = req->data;
  uint64_t hint = 0;
  if (status == 0 && mw_version_hint_parse(req->buf.data, req->buf.len, &hint, NULL) < 0) hint = 0;
  op->hint_read = hint > 0;
  mw_latest_search_start(&op->search, hint, op->ms->scan_batch);
  probe_step(op);
}

static int read_start(mw_mstore_op_t *op) {
  char key[MW_MSTORE_KEY_BYTES];
  hint_key(op->ms, key, sizeof key);
  op->phase = P_HINT;
  op->req.data = op;
  return mw_storage_get(op->ms->st, &op->req, key, 0, UINT64_MAX, on_hint);
}

static void kind_step(mw_mstore_op_t *op, bool exists);

static void on_get(mw_storage_req_t *req, int status) {
  mw_mstore_op_t *op = req->data;
  if (status == -ENOENT) {
    /* Vanished between HEAD and GET: only a deleted shard does that. */
    finish(op, mw_err_set(&op->err, -ENOENT, "shard %s: manifest vanished during read",
                          op->ms->shard_str));
    return;
  }
  if (status < 0) {
    finish(op, status);
    return;
  }
  mw_shard_manifest_free(&op->m);
  int rc = mw_shard_manifest_decode(req->buf.data, req->buf.len, &op->m, &op->err);
  if (rc < 0) {
    finish(op, rc);
    return;
  }
  set_cache(op->ms, &op->m);
  kind_step(op, true);
}

static void after_read(mw_mstore_op_t *op, uint64_t latest) {
  if (latest == 0) {
    mw_shard_manifest_free(&op->m);
    mw_shard_manifest_init(&op->m);
    kind_step(op, false);
    return;
  }
  char key[MW_MSTORE_KEY_BYTES];
  int rc = mw_mstore_manifest_key(op->ms, latest, key, sizeof key);
  op->phase = P_GET;
  if (rc == 0) rc = mw_storage_get(op->ms->st, &op->req, key, 0, UINT64_MAX, on_get);
  if (rc < 0) finish(op, rc);
}

/* ------------------------------------------------------------------- puts */

static void on_hint_put(mw_storage_req_t *req, int status) {
  mw_mstore_op_t *op = req->data;
  if (status < 0)
    mw_log_warn("shard %s: version_hint.json put failed: %s (hint only)", op->ms->shard_str,
                mw_strerror(status));
  finish(op, 0);
}

static void on_put(mw_storage_req_t *req, int status);

static int put_next(mw_mstore_op_t *op) {
  mw_buf_reset(&op->enc);
  int rc = mw_shard_manifest_encode(&op->next, &op->enc);
  if (rc < 0) return mw_err_set(&op->err, rc, "shard %s: manifest v%" PRIu64 " does not encode",
                                op->ms->shard_str, op->next.version);
  rc = mw_mstore_manifest_key(op->ms, op->next.version, op->key, sizeof op->key);
  if (rc < 0) return rc;
  op->phase = P_PUT;
  return mw_storage_put_if_absent(op->ms->st, &op->req, op->key, op->enc.data, op->enc.len, on_put);
}

static void on_put(mw_storage_req_t *req, int status) {
  mw_mstore_op_t *op = req->data;
  if (status == -EEXIST) {
    mw_mstore_invalidate(op->ms);
    int limit = op->kind == K_CLAIM ? MW_MSTORE_CLAIM_ATTEMPTS : MW_MSTORE_COMMIT_ATTEMPTS;
    if (op->attempts >= limit) {
      finish(op, mw_err_set(&op->err, -EBUSY,
                            op->kind == K_CLAIM
                                ? "Failed to claim shard %s after %d retries due to manifest contention"
                                : "shard %s: manifest commit failed after %d attempts",
                            op->ms->shard_str, limit));
      return;
    }
    mw_log_debug("shard %s: manifest v%" PRIu64 " taken; re-reading", op->ms->shard_str,
                 op->next.version);
    int rc = read_start(op);
    if (rc < 0) finish(op, rc);
    return;
  }
  if (status < 0) {
    finish(op, status);
    return;
  }
  set_cache(op->ms, &op->next);
  mw_shard_manifest_free(&op->m);
  mw_shard_manifest_init(&op->m);
  if (mw_shard_manifest_copy(&op->m, &op->next) < 0) {
    finish(op, -ENOMEM);
    return;
  }
  if (op->kind == K_CLAIM)
    mw_log_info("Claimed shard %s with epoch %" PRIu64 " (manifest v%" PRIu64 ")",
                op->ms->shard_str, op->next.writer_epoch, op->next.version);
  char key[MW_MSTORE_KEY_BYTES];
  hint_key(op->ms, key, sizeof key);
  int n = mw_version_hint_encode(op->next.version, op->hint, sizeof op->hint);
  op->phase = P_HINT_PUT;
  int rc = n < 0 ? n : mw_storage_put(op->ms->st, &op->req, key, op->hint, (size_t)n, on_hint_put);
  if (rc < 0) {
    mw_log_warn("shard %s: version_hint.json put refused: %s", op->ms->shard_str, mw_strerror(rc));
    finish(op, 0);
  }
}

/* ----------------------------------------------------------- kind steps */

static int fenced(mw_mstore_op_t *op, uint64_t stored) {
  op->stored_epoch = stored;
  return mw_err_set(&op->err, -ESTALE,
                    "Writer fenced (peer claimed epoch): local epoch %" PRIu64
                    " < stored epoch %" PRIu64 " for shard %s",
                    op->epoch, stored, op->ms->shard_str);
}

static void claim_step(mw_mstore_op_t *op, bool exists) {
  mw_mstore_t *ms = op->ms;
  if (exists && op->m.status == MW_SHARD_SEALED) {
    finish(op, mw_err_set(&op->err, -EROFS, "shard %s is sealed; refusing claim (drop in flight)",
                          ms->shard_str));
    return;
  }
  if (op->attempts > 0 && exists && op->m.writer_epoch >= op->epoch) {
    op->stored_epoch = op->m.writer_epoch;
    finish(op, mw_err_set(&op->err, -ESTALE,
                          "Failed to claim shard %s: another writer claimed epoch %" PRIu64
                          " (>= our target %" PRIu64 ")",
                          ms->shard_str, op->m.writer_epoch, op->epoch));
    return;
  }
  mw_shard_manifest_free(&op->next);
  mw_shard_manifest_init(&op->next);
  if (!exists) {
    op->next.version = 1;
    op->next.writer_epoch = 1;
    op->next.current_generation = 1;
    op->next.shard_spec_id = ms->spec_id;
    op->next.has_shard_id = true;
    memcpy(op->next.shard_id, ms->shard_id, 16);
  } else {
    if (mw_shard_manifest_copy(&op->next, &op->m) < 0) {
      finish(op, -ENOMEM);
      return;
    }
    op->next.version = op->m.version + 1;
    op->next.writer_epoch = op->m.writer_epoch + 1;
  }
  op->epoch = op->next.writer_epoch;
  op->attempts++;
  int rc = put_next(op);
  if (rc < 0) finish(op, rc);
}

/* Returns 0 when the put is in flight, else the error (caller finishes). */
static int commit_step_rc(mw_mstore_op_t *op, bool exists) {
  mw_mstore_t *ms = op->ms;
  if (!exists) return mw_err_set(&op->err, -ENOENT, "shard %s: no manifest to update", ms->shard_str);
  if (op->m.writer_epoch > op->epoch) return fenced(op, op->m.writer_epoch);
  mw_shard_manifest_free(&op->next);
  mw_shard_manifest_init(&op->next);
  int rc = mw_shard_manifest_copy(&op->next, &op->m);
  if (rc == 0) rc = op->fn(op->fn_arg, &op->m, &op->next, &op->err);
  if (rc < 0) return rc;
  op->next.version = op->m.version + 1;
  if (op->next.writer_epoch != op->epoch)
    return mw_err_set(&op->err, -ESTALE,
                      "Manifest epoch %" PRIu64 " doesn't match local epoch %" PRIu64
                      " for shard %s",
                      op->next.writer_epoch, op->epoch, ms->shard_str);
  op->attempts++;
  return put_next(op);
}

static void commit_step(mw_mstore_op_t *op, bool exists) {
  int rc = commit_step_rc(op, exists);
  if (rc < 0) finish(op, rc);
}

static void kind_step(mw_mstore_op_t *op, bool exists) {
  switch (op->kind) {
    case K_READ:
      finish(op, exists ? 0 : -ENOENT);
      break;
    case K_CHECK:
      if (exists && op->m.writer_epoch > op->epoch) finish(op, fenced(op, op->m.writer_epoch));
      else finish(op, 0);
      break;
    case K_CLAIM:
      claim_step(op, exists);
      break;
    case K_COMMIT:
      commit_step(op, exists);
      break;
    default:
      assert(0);
  }
}

/* ------------------------------------------------------------------ starts */

static int start(mw_mstore_t *ms, mw_mstore_op_t *op, int kind, uint64_t epoch, mw_mstore_cb cb) {
  assert(ms != NULL);
  assert(op != NULL);
  assert(cb != NULL);
  if (op->busy) return -EBUSY;
  op->ms = ms;
  op->kind = kind;
  op->cb = cb;
  op->epoch = epoch;
  op->attempts = 0;
  op->stored_epoch = 0;
  mw_err_clear(&op->err);
  assert(ms->n_busy < MW_MSTORE_MAX_OPS);
  op->busy = true;
  ms->n_busy++;
  op->req.data = op;
  return 0;
}

/* First submission failed: the op is idle again and the callback will not
 * run (nor on_idle: the caller learns it from the return value). */
static int started(mw_mstore_op_t *op, int rc) {
  if (rc < 0) {
    assert(op->ms->n_busy > 0);
    op->busy = false;
    op->phase = P_IDLE;
    op->ms->n_busy--;
  }
  return rc;
}

int mw_mstore_read_latest(mw_mstore_t *ms, mw_mstore_op_t *op, mw_mstore_cb cb) {
  int rc = start(ms, op, K_READ, 0, cb);
  return rc < 0 ? rc : started(op, read_start(op));
}

int mw_mstore_claim(mw_mstore_t *ms, mw_mstore_op_t *op, mw_mstore_cb cb) {
  int rc = start(ms, op, K_CLAIM, 0, cb);
  return rc < 0 ? rc : started(op, read_start(op));
}

int mw_mstore_check_fenced(mw_mstore_t *ms, mw_mstore_op_t *op, uint64_t local_epoch,
                           mw_mstore_cb cb) {
  int rc = start(ms, op, K_CHECK, local_epoch, cb);
  return rc < 0 ? rc : started(op, read_start(op));
}

int mw_mstore_commit_update(mw_mstore_t *ms, mw_mstore_op_t *op, uint64_t local_epoch,
                            mw_mstore_update_fn fn, void *fn_arg, mw_mstore_cb cb) {
  assert(fn != NULL);
  int rc = start(ms, op, K_COMMIT, local_epoch, cb);
  if (rc < 0) return rc;
  op->fn = fn;
  op->fn_arg = fn_arg;
  if (!ms->has_cached) return started(op, read_start(op));
  /* §3.6 step 1: the cached manifest first; a lost put re-reads storage. */
  mw_shard_manifest_free(&op->m);
  mw_shard_manifest_init(&op->m);
  rc = mw_shard_manifest_copy(&op->m, &ms->cached);
  if (rc == 0) rc = commit_step_rc(op, true);
  return started(op, rc);
}
