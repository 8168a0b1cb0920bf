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
int mw_s3__uploads_page(mw_storage_req_t *req, bool *more) {
  mw_storage_req_s3_t *a = mw_s3_req(req);
  mw_s3_task_t *t = mw_s3__task(req);
  if (t == NULL) return -ENOMEM;
  const char *p = (const char *)a->resp.data, *end = p + a->resp.len, *v;
  size_t n;
  int64_t now = (int64_t)time(NULL);
  uint64_t min_age = req->priv.op == MW_OP_DELETE_ROOT ? 0 : req->priv.min_age_s;
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

