/*
 * s3_multipart.c — a put of two parts' size or more (s3.part_bytes, at
 * least S3's 5 MiB, default 16 MiB) as a multipart upload:
 *
 *   P_MP_INIT   POST ?uploads               -> the upload id
 *   P_MP_PART   PUT ?partNumber=N&uploadId  -> the part's ETag, N = 1..nparts
 *   P_MP_DONE   POST ?uploadId, the parts' numbers and ETags
 *   P_MP_ABORT  DELETE ?uploadId, after a part or the completion failed
 *
 * The completion's body (<CompleteMultipartUpload>) grows by one <Part> a
 * part answered. A part or completion that fails saves its error in the
 * task, the upload is aborted, and the put reports the saved error whatever
 * the abort's outcome (an upload the abort misses is swept later:
 * s3_sweep.c). A completion that may have landed unseen (ambiguous) and
 * then meets NoSuchUpload went through: success. At most MW_S3_MAX_PARTS
 * parts; a larger put goes as one PUT (submit).
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "storage/s3_int.h"

/* What a multipart phase sends. */
int mw_s3__multipart_build(mw_s3_t *s, mw_storage_req_t *req, mw_s3_spec_t *sp, mw_buf_t *q) {
  mw_storage_req_front_t *p = &req->priv;
  mw_s3_task_t *t = mw_s3_req(req)->task;
  assert(t != NULL);
  switch (mw_s3_req(req)->phase) {
    case P_MP_INIT:
      sp->method = "POST";
      snprintf(sp->query, sizeof sp->query, "uploads=");
      return 0;
    case P_MP_PART: {
      assert(t->part >= 1);
      assert(t->part <= t->nparts);
      sp->method = "PUT";
      size_t off = (size_t)(t->part - 1) * s->part_bytes;
      assert(off < p->len);
      sp->body = p->src + off;
      sp->body_len = p->len - off < s->part_bytes ? p->len - off : s->part_bytes;
      char num[16];
      snprintf(num, sizeof num, "%u", t->part);
      int rc = mw_s3__query_add(q, "partNumber=", num);
      if (rc == 0) rc = mw_s3__query_add(q, "&uploadId=", t->upload_id);
      return rc;
    }
    case P_MP_DONE:
      sp->method = "POST";
      sp->body = t->parts_xml.data;
      sp->body_len = t->parts_xml.len;
      sp->xml_body = true;
      return mw_s3__query_add(q, "uploadId=", t->upload_id);
    case P_MP_ABORT:
      sp->method = "DELETE";
      return mw_s3__query_add(q, "uploadId=", t->upload_id);
    default: assert(!"not a multipart phase"); return -EINVAL;
  }
}

/* The next part, or (all sent) the completion. */
static int multipart_next(mw_s3_t *s, mw_storage_req_t *req) {
  mw_s3_task_t *t = mw_s3_req(req)->task;
  assert(t->part <= t->nparts);
  if (t->part < t->nparts) {
    t->part++;
    return mw_s3__go(s, req, P_MP_PART);
  }
  int rc = mw_buf_append(&t->parts_xml, "</CompleteMultipartUpload>", 26);
  if (rc < 0) {
    t->saved = rc;
    return mw_s3__go(s, req, P_MP_ABORT);
  }
  return mw_s3__go(s, req, P_MP_DONE);
}

/* InitiateMultipartUpload answered: the upload id, then the first part. */
static int init_answer(mw_s3_t *s, mw_storage_req_t *req) {
  mw_storage_req_s3_t *a = mw_s3_req(req);
  mw_s3_task_t *t = a->task;
  const char *q = (const char *)a->resp.data, *v;
  size_t n;
  if (q == NULL || !mw_s3__xml_next(&q, q + a->resp.len, "UploadId", &v, &n) ||
      mw_s3__xml_text(v, n, t->upload_id, sizeof t->upload_id) <= 0) {
    mw_s3__set_reason(s, req, "InitiateMultipartUpload answered without an UploadId");
    return mw_s3__end(s, req, -EBADMSG);
  }
  t->nparts = (uint32_t)((req->priv.len + s->part_bytes - 1) / s->part_bytes);
  assert(t->nparts >= 2);
  assert(t->nparts <= MW_S3_MAX_PARTS);
  t->part = 0;
  int rc = mw_s3__append(&t->parts_xml, "<CompleteMultipartUpload>");
  if (rc < 0) return mw_s3__end(s, req, rc);
  return multipart_next(s, req);
}

/* A part answered 2xx: its ETag joins the completion's body. */
static int part_answer(mw_s3_t *s, mw_storage_req_t *req) {
  mw_storage_req_s3_t *a = mw_s3_req(req);
  mw_s3_task_t *t = a->task;
  assert(t->part >= 1);
  if (!a->etag[0]) return -EBADMSG;
  char part[160];
  snprintf(part, sizeof part, "<Part><PartNumber>%u</PartNumber><ETag>%s</ETag></Part>", t->part,
           a->etag);
  int rc = mw_s3__append(&t->parts_xml, part);
  if (rc < 0) {
    t->saved = rc;
    return mw_s3__go(s, req, P_MP_ABORT);
  }
  return multipart_next(s, req);
}

int mw_s3__multipart_answer(mw_s3_t *s, mw_storage_req_t *req, const mw_s3_answer_t *an) {
  mw_storage_req_s3_t *a = mw_s3_req(req);
  mw_s3_task_t *t = a->task;
  assert(t != NULL); /* submit made it */
  assert(req->priv.op == MW_OP_PUT);
  assert(t->part <= t->nparts);
  switch (a->phase) {
    case P_MP_INIT: return an->ok ? init_answer(s, req) : 0;
    case P_MP_PART: return an->ok ? part_answer(s, req) : 0;
    case P_MP_DONE:
      assert(t->part == t->nparts);
      /* a 200 may still carry an <Error> document (AWS) */
      if (an->ok &&
          (a->resp.data == NULL || memmem(a->resp.data, a->resp.len, "<Error>", 7) == NULL))
        return mw_s3__end(s, req, 0);
      if (an->http == 404 && strcmp(an->code, "NoSuchUpload") == 0 && a->ambiguous)
        return mw_s3__end(s, req, 0); /* our earlier complete went through, its answer was lost */
      return 0;
    case P_MP_ABORT: /* the abort's own outcome does not change what the put reports */
      return mw_s3__end(s, req, t->saved < 0 ? t->saved : -EIO);
    default: assert(!"not a multipart phase"); return 0;
  }
}

void mw_s3__multipart_refused(mw_s3_t *s, mw_storage_req_t *req, int err) {
  mw_s3_task_t *t = mw_s3_req(req)->task;
  assert(err < 0);
  assert(t != NULL);
  t->saved = err;
  mw_s3__next_exchange(s, req, P_MP_ABORT);
}
