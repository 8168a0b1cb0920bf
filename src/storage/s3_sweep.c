/*
 * s3_sweep.c — the multipart uploads that crashed writers left behind:
 * ListMultipartUploads pages into the uploads to abort (sweep_tmp: those
 * initiated at least min_age_s ago; delete_root: all of them).
 *
 * The uploads gather in the task as "key\0uploadid\0" pairs (the key an
 * object name, the prefix already in it); a truncated page's NextKeyMarker
 * and NextUploadIdMarker are where the next page starts. An upload whose
 * Initiated time cannot be read is left alone.
 */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "storage/s3_int.h"

/* One ListMultipartUploads page: uploads old enough into t->uploads. */
static int uploads_page(mw_storage_req_t *req, bool *more) {
  mw_storage_req_s3_t *a = mw_s3_req(req);
  mw_s3_task_t *t = mw_s3__task(req);
  if (t == NULL) return -ENOMEM;
  const char *p = (const char *)a->resp.data, *end = p + a->resp.len, *v;
  size_t n;
  int64_t now = (int64_t)time(NULL);
  uint64_t min_age = req->priv.op == MW_OP_DELETE_ROOT ? 0 : req->priv.min_age_s;
  assert(req->priv.op == MW_OP_SWEEP_TMP || req->priv.op == MW_OP_DELETE_ROOT);
  const char *q = p;
  while (mw_s3__xml_next(&q, end, "Upload", &v, &n)) {
    const char *u = v, *uend = v + n, *f;
    size_t fn;
    char key[MW_STORAGE_KEY_MAX_BYTES * 2 + 8], id[512], when[64];
    const char *c = u;
    if (!mw_s3__xml_next(&c, uend, "Key", &f, &fn) || mw_s3__xml_text(f, fn, key, sizeof key) <= 0)
      continue;
    c = u;
    if (!mw_s3__xml_next(&c, uend, "UploadId", &f, &fn) ||
        mw_s3__xml_text(f, fn, id, sizeof id) <= 0)
      continue;
    c = u;
    int64_t init = -1;
    if (mw_s3__xml_next(&c, uend, "Initiated", &f, &fn) &&
        mw_s3__xml_text(f, fn, when, sizeof when) > 0)
      init = mw_s3__iso8601(when);
    if (init < 0 || (uint64_t)(now - init) < min_age) continue;
    int rc = mw_buf_append(&t->uploads, key, strlen(key) + 1);
    if (rc == 0) rc = mw_buf_append(&t->uploads, id, strlen(id) + 1);
    if (rc < 0) return rc;
    t->nuploads++;
  }
  q = p;
  *more = mw_s3__xml_next(&q, end, "IsTruncated", &v, &n) && n == 4 && memcmp(v, "true", 4) == 0;
  t->token[0] = t->marker[0] = '\0';
  if (*more) {
    q = p;
    if (!mw_s3__xml_next(&q, end, "NextKeyMarker", &v, &n) ||
        mw_s3__xml_text(v, n, t->token, sizeof t->token) < 0)
      return -EBADMSG;
    q = p;
    if (mw_s3__xml_next(&q, end, "NextUploadIdMarker", &v, &n) &&
        mw_s3__xml_text(v, n, t->marker, sizeof t->marker) < 0)
      return -EBADMSG;
  }
  return 0;
}

/* ListMultipartUploads of the request's prefix (delete_root: the whole
 * root) from the markers on, or the abort of the next upload. */
int mw_s3__sweep_build(mw_s3_t *s, mw_storage_req_t *req, mw_s3_spec_t *sp, mw_buf_t *q) {
  mw_storage_req_s3_t *a = mw_s3_req(req);
  mw_s3_task_t *t = a->task;
  assert(t != NULL);
  if (a->phase == P_ABORT_EACH) {
    sp->method = "DELETE";
    assert(t->off < t->uploads.len);
    const char *k = (const char *)t->uploads.data + t->off;
    const char *id = k + strlen(k) + 1;
    sp->key = k; /* an object name: the prefix is already in it */
    return mw_s3__query_add(q, "uploadId=", id);
  }
  assert(a->phase == P_UPLOADS);
  sp->method = "GET";
  sp->key = NULL;
  int rc = 0;
  if (t->token[0]) rc = mw_s3__query_add(q, "key-marker=", t->token);
  if (rc == 0 && t->token[0]) rc = mw_s3__append(q, "&");
  if (rc == 0) rc = mw_s3__append(q, "prefix=");
  const char *pre = req->priv.op == MW_OP_DELETE_ROOT ? "" : req->priv.key;
  if (rc == 0) rc = mw_s3__encode_name(s, pre, false, false, q);
  if (rc == 0 && t->marker[0]) rc = mw_s3__query_add(q, "&upload-id-marker=", t->marker);
  if (rc == 0) rc = mw_s3__append(q, "&uploads=");
  return rc;
}

/* After the listing, or an abort: the next upload to abort, delete_root's
 * probe, or the end. */
static int sweep_next(mw_s3_t *s, mw_storage_req_t *req) {
  mw_s3_task_t *t = mw_s3_req(req)->task;
  assert(t->i <= t->nuploads);
  if (t->i < t->nuploads) return mw_s3__go(s, req, P_ABORT_EACH);
  if (req->priv.op == MW_OP_DELETE_ROOT) return mw_s3__go(s, req, P_PROBE);
  return mw_s3__end(s, req, 0);
}

/* A ListMultipartUploads page answered. */
static int uploads_answer(mw_s3_t *s, mw_storage_req_t *req, const mw_s3_answer_t *an) {
  mw_s3_task_t *t = mw_s3_req(req)->task;
  if (an->http == 501 || (an->http == 400 && strcmp(an->code, "NotImplemented") == 0))
    return mw_s3__end(s, req, 0); /* no multipart listings: nothing to sweep */
  if (!an->ok) return 0;
  bool more = false;
  int rc = uploads_page(req, &more);
  if (rc < 0) return rc;
  if (more) return mw_s3__go(s, req, P_UPLOADS);
  t->i = t->off = 0;
  return sweep_next(s, req);
}

/* An upload aborted (or gone already: 404). */
static int abort_answer(mw_s3_t *s, mw_storage_req_t *req, const mw_s3_answer_t *an) {
  mw_s3_task_t *t = mw_s3_req(req)->task;
  assert(t->i < t->nuploads);
  assert(t->off < t->uploads.len);
  if (!an->ok && an->http != 404) return 0;
  if (an->ok) t->removed++;
  const char *k = (const char *)t->uploads.data + t->off;
  t->off += strlen(k) + 1;                                        /* its key */
  t->off += strlen((const char *)t->uploads.data + t->off) + 1;  /* its upload id */
  t->i++;
  assert(t->i < t->nuploads || t->off == t->uploads.len);
  return sweep_next(s, req);
}

int mw_s3__sweep_answer(mw_s3_t *s, mw_storage_req_t *req, const mw_s3_answer_t *an) {
  mw_storage_req_s3_t *a = mw_s3_req(req);
  assert(a->task != NULL); /* submit made it */
  assert(req->priv.op == MW_OP_SWEEP_TMP || req->priv.op == MW_OP_DELETE_ROOT);
  if (a->phase == P_UPLOADS) return uploads_answer(s, req, an);
  assert(a->phase == P_ABORT_EACH);
  return abort_answer(s, req, an);
}
