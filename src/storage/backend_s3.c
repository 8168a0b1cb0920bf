/*
 * backend_s3.c — the S3 backend: libcurl's multi interface on the libuv
 * loop, SigV4 by CURLOPT_AWS_SIGV4, every operation a short sequence of
 * HTTP exchanges with retries.
 *
 * This file is the phase machine: submit picks an operation's first
 * exchange (its phase), mw_s3__build says what a phase sends, mw_s3__answer
 * what its answer moves the request to (the next exchange, or finish). The
 * rest lives beside it, one concept a file (s3_int.h has the map): the loop
 * glue, one attempt on curl, retries, error classes, XML, key encoding,
 * listings, sweeps, batch deletes.
 *
 * Exchanges per operation (docs/storage.md, "S3"):
 *   put_if_absent  PUT If-None-Match: * (412 or 409 = -EEXIST). A create
 *                  whose earlier attempt may have landed (its answer was
 *                  lost, or a 5xx came back) and that now meets 412 is
 *                  checked with a GET: our own bytes = success, anything
 *                  else = -EEXIST. Always a single PUT: rgw's
 *                  CompleteMultipartUpload ignores If-None-Match.
 *   put            one PUT; from two parts' size on (s3.part_bytes, default
 *                  16 MiB), multipart: initiate, the parts, complete
 *                  (abort on failure)
 *   get            GET (Range: bytes=a-b for a range; 416 -> HEAD for the
 *                  size); a whole object over max_object_bytes is -EFBIG,
 *                  cut off at the headers
 *   head           HEAD            delete   DELETE (404 = success)
 *   list           ListObjectsV2 pages (continuation-token)
 *   delete_prefix  list, then DeleteObjects (POST ?delete, up to 1 000
 *                  keys a request, Content-MD5 as S3 requires, <Quiet>):
 *                  per-key errors in the answer are read — NoSuchKey is a
 *                  deletion, InternalError/SlowDown/ServiceUnavailable/
 *                  RequestTimeout keys go out again alone after a backoff,
 *                  any other code fails the operation naming the key. A
 *                  store that does not implement it (501, 405, 400
 *                  NotImplemented) gets one DELETE per key from then on.
 *   delete_many    the same DeleteObjects exchange for the given keys (at
 *                  most 1 000: one request), with a result per key: NoSuchKey
 *                  is a deletion, a transient code goes out again alone
 *                  after a backoff (until the retry deadline), any other
 *                  code is that key's failure, the others still count.
 *                  Where DeleteObjects is refused: one DELETE per key, a
 *                  final answer failing only its key.
 *   sweep_tmp      ListMultipartUploads pages, abort each upload initiated
 *                  at least min_age_s ago (the crashed writers' leftovers)
 *   delete_root    abort every upload, then list one key: -ENOTEMPTY if any
 *
 * Test steps (fault.h): "request" before each attempt is sent, "body" when
 * half of a request body has been handed to curl, "response" when an
 * attempt's answer is in, before it is acted on, "retry" before a backoff
 * wait. An injected ECONNRESET, ETIMEDOUT or EAGAIN behaves like that
 * transport failure at that point (and is retried); any other injected
 * errno fails the operation at once.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "storage/s3_int.h"

const char *const mw_s3_step_names[MW_S3_STEP_COUNT] = {"request", "body", "response", "retry"};
_Static_assert(S3_STEPS_ == MW_S3_STEP_COUNT, "step names");

/* What the current phase sends. */
int mw_s3__build(mw_s3_t *s, mw_storage_req_t *req, mw_s3_spec_t *sp) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_s3_t *a = mw_s3_req(req);
  mw_s3_task_t *t = a->task;
  memset(sp, 0, sizeof *sp);
  sp->key = p->key;
  mw_buf_t q = MW_BUF_INIT;
  int rc = 0;
  switch (a->phase) {
    case P_PUT:
      sp->method = "PUT";
      sp->body = p->src;
      sp->body_len = p->len;
      sp->if_none_match = p->op == MW_OP_PUT_IF_ABSENT;
      break;
    case P_PIA_CHECK: sp->method = "GET"; break;
    case P_MP_INIT:
      sp->method = "POST";
      snprintf(sp->query, sizeof sp->query, "uploads=");
      break;
    case P_MP_PART: {
      sp->method = "PUT";
      size_t off = (size_t)(t->part - 1) * s->part_bytes;
      assert(off < p->len);
      sp->body = p->src + off;
      sp->body_len = p->len - off < s->part_bytes ? p->len - off : s->part_bytes;
      rc = mw_s3__append(&q, "partNumber=");
      char num[16];
      snprintf(num, sizeof num, "%u", t->part);
      if (rc == 0) rc = mw_s3__append(&q, num);
      if (rc == 0) rc = mw_s3__append(&q, "&uploadId=");
      if (rc == 0) rc = mw_s3__encode(&q, t->upload_id, false);
      break;
    }
    case P_MP_DONE:
      sp->method = "POST";
      sp->body = t->parts_xml.data;
      sp->body_len = t->parts_xml.len;
      sp->xml_body = true;
      /* fall through */
    case P_MP_ABORT:
      if (a->phase == P_MP_ABORT) sp->method = "DELETE";
      rc = mw_s3__append(&q, "uploadId=");
      if (rc == 0) rc = mw_s3__encode(&q, t->upload_id, false);
      break;
    case P_GET:
      sp->method = "GET";
      sp->into_buf = true;
      if (p->off != 0 || p->rlen != UINT64_MAX) {
        uint64_t last = p->rlen == UINT64_MAX || p->off + p->rlen < p->off ? UINT64_MAX
                                                                           : p->off + p->rlen - 1;
        if (last == UINT64_MAX) snprintf(sp->range, sizeof sp->range, "bytes=%llu-",
                                         (unsigned long long)p->off);
        else snprintf(sp->range, sizeof sp->range, "bytes=%llu-%llu", (unsigned long long)p->off,
                      (unsigned long long)last);
      }
      break;
    case P_GET_SIZE: case P_HEAD: sp->method = "HEAD"; break;
    case P_DELETE: sp->method = "DELETE"; break;
    case P_DEL_EACH:
      sp->method = "DELETE";
      assert(t->off < req->buf.len);
      sp->key = (const char *)req->buf.data + t->off;
      break;
    case P_DEL_BATCH:
      sp->method = "POST";
      sp->key = NULL;
      assert(t->nbatch > 0 && t->nbatch <= MW_S3_DELETE_BATCH);
      sp->body = t->batch_xml.data;
      sp->body_len = t->batch_xml.len;
      sp->xml_body = true;
      sp->content_md5 = t->batch_md5;
      snprintf(sp->query, sizeof sp->query, "delete=");
      break;
    case P_LIST: case P_PROBE: {
      sp->method = "GET";
      sp->key = NULL;
      if (t->token[0]) {
        rc = mw_s3__append(&q, "continuation-token=");
        if (rc == 0) rc = mw_s3__encode(&q, t->token, false);
        if (rc == 0) rc = mw_s3__append(&q, "&");
      }
      if (rc == 0) rc = mw_s3__append(&q, "list-type=2&");
      if (rc == 0 && a->phase == P_PROBE) rc = mw_s3__append(&q, "max-keys=1&");
      if (rc == 0) rc = mw_s3__append(&q, "prefix=");
      mw_buf_t name = MW_BUF_INIT;
      if (rc == 0) rc = mw_s3__object_name(s, a->phase == P_PROBE ? "" : p->key, &name);
      if (rc == 0) rc = mw_buf_append(&name, "", 1);
      if (rc == 0) rc = mw_s3__encode(&q, (const char *)name.data, false);
      mw_buf_free(&name);
      break;
    }
    case P_UPLOADS: {
      sp->method = "GET";
      sp->key = NULL;
      if (t->token[0]) {
        rc = mw_s3__append(&q, "key-marker=");
        if (rc == 0) rc = mw_s3__encode(&q, t->token, false);
        if (rc == 0) rc = mw_s3__append(&q, "&");
      }
      if (rc == 0) rc = mw_s3__append(&q, "prefix=");
      mw_buf_t name = MW_BUF_INIT;
      if (rc == 0) rc = mw_s3__object_name(s, p->op == MW_OP_DELETE_ROOT ? "" : p->key, &name);
      if (rc == 0) rc = mw_buf_append(&name, "", 1);
      if (rc == 0) rc = mw_s3__encode(&q, (const char *)name.data, false);
      mw_buf_free(&name);
      if (rc == 0 && t->marker[0]) {
        rc = mw_s3__append(&q, "&upload-id-marker=");
        if (rc == 0) rc = mw_s3__encode(&q, t->marker, false);
      }
      if (rc == 0) rc = mw_s3__append(&q, "&uploads=");
      break;
    }
    case P_ABORT_EACH: {
      sp->method = "DELETE";
      assert(t->off < t->uploads.len);
      const char *k = (const char *)t->uploads.data + t->off;
      const char *id = k + strlen(k) + 1;
      sp->key = k; /* an object name: the prefix is already in it */
      rc = mw_s3__append(&q, "uploadId=");
      if (rc == 0) rc = mw_s3__encode(&q, id, false);
      break;
    }
    default: assert(!"bad phase");
  }
  if (rc == 0 && q.len > 0) {
    if (q.len >= sizeof sp->query) rc = -ENAMETOOLONG;
    else memcpy(sp->query, q.data, q.len), sp->query[q.len] = '\0';
  }
  mw_buf_free(&q);
  return rc;
}


/* Phase outcomes (HTTP answered 2xx/3xx/4xx non-retryable). */
void mw_s3__next_exchange(mw_s3_t *s, mw_storage_req_t *req, int phase) {
  mw_storage_req_s3_t *a = mw_s3_req(req);
  a->phase = (uint8_t)phase;
  a->attempt = 0;
  a->deadline_ms = uv_now(s->st->loop) + s->deadline_ms; /* retries bound each exchange */
  mw_s3__attempt_start(s, req);
}



mw_s3_task_t *mw_s3__task(mw_storage_req_t *req) {
  mw_storage_req_s3_t *a = mw_s3_req(req);
  if (a->task == NULL) a->task = calloc(1, sizeof(mw_s3_task_t));
  return a->task;
}



/* The next part, or (all sent) the completion. */
static void multipart_next(mw_s3_t *s, mw_storage_req_t *req) {
  mw_s3_task_t *t = mw_s3_req(req)->task;
  if (t->part < t->nparts) {
    t->part++;
    return mw_s3__next_exchange(s, req, P_MP_PART);
  }
  int rc = mw_buf_append(&t->parts_xml, "</CompleteMultipartUpload>", 26);
  if (rc < 0) {
    t->saved = rc;
    return mw_s3__next_exchange(s, req, P_MP_ABORT);
  }
  mw_s3__next_exchange(s, req, P_MP_DONE);
}

/* A successful answer (2xx), or a final 4xx the phase may accept. */
void mw_s3__answer(mw_s3_t *s, mw_storage_req_t *req) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_s3_t *a = mw_s3_req(req);
  int http = a->http_status;
  char code[64], msg[8];
  mw_s3__error_code(a, code, sizeof code, msg, sizeof msg);
  bool ok = http >= 200 && http < 300;
  mw_s3_task_t *t = a->task;
  int rc = 0;
  bool more = false;
  switch (a->phase) {
    case P_PUT:
      if (ok) return mw_s3__finish(s, req, 0);
      if (p->op == MW_OP_PUT_IF_ABSENT && (http == 412 || http == 409)) {
        /* an earlier attempt of ours may be what is there now */
        if (a->ambiguous) return mw_s3__next_exchange(s, req, P_PIA_CHECK);
        return mw_s3__finish(s, req, -EEXIST);
      }
      break;
    case P_PIA_CHECK:
      if (ok || (a->too_big && http >= 200 && http < 300)) {
        bool ours = !a->too_big && a->resp.len == p->len &&
                    (p->len == 0 || memcmp(a->resp.data, p->src, p->len) == 0);
        if (ours) mw_log_notice("storage: s3://%s/%s%s%s: a retried create had landed (the same "
                                "bytes are there); reported as created", s->bucket, s->prefix,
                                s->prefix[0] ? "/" : "", p->key);
        return mw_s3__finish(s, req, ours ? 0 : -EEXIST);
      }
      if (http == 404 && a->rechecks++ < MW_S3_PIA_RECHECKS)
        return mw_s3__next_exchange(s, req, P_PUT); /* gone again: create anew */
      break;
    case P_MP_INIT:
      if (ok) {
        const char *q = (const char *)a->resp.data, *v;
        size_t n;
        if (q == NULL || !mw_s3__xml_next(&q, q + a->resp.len, "UploadId", &v, &n) ||
            mw_s3__xml_text(v, n, t->upload_id, sizeof t->upload_id) <= 0) {
          mw_s3__set_reason(s, req, "InitiateMultipartUpload answered without an UploadId");
          return mw_s3__finish(s, req, -EBADMSG);
        }
        t->nparts = (uint32_t)((p->len + s->part_bytes - 1) / s->part_bytes);
        assert(t->nparts >= 2 && t->nparts <= MW_S3_MAX_PARTS);
        t->part = 0;
        rc = mw_s3__append(&t->parts_xml, "<CompleteMultipartUpload>");
        if (rc < 0) return mw_s3__finish(s, req, rc);
        return multipart_next(s, req);
      }
      break;
    case P_MP_PART:
      if (ok && a->etag[0]) {
        char part[160];
        snprintf(part, sizeof part, "<Part><PartNumber>%u</PartNumber><ETag>%s</ETag></Part>",
                 t->part, a->etag);
        if ((rc = mw_s3__append(&t->parts_xml, part)) < 0) {
          t->saved = rc;
          return mw_s3__next_exchange(s, req, P_MP_ABORT);
        }
        return multipart_next(s, req);
      }
      if (ok) rc = -EBADMSG;
      break;
    case P_MP_DONE:
      /* a 200 may still carry an <Error> document (AWS) */
      if (ok && (a->resp.data == NULL || memmem(a->resp.data, a->resp.len, "<Error>", 7) == NULL))
        return mw_s3__finish(s, req, 0);
      if (http == 404 && strcmp(code, "NoSuchUpload") == 0 && a->ambiguous) {
        /* our earlier complete went through and only its answer was lost */
        return mw_s3__finish(s, req, 0);
      }
      break;
    case P_MP_ABORT: {
      /* the abort's own outcome does not change what the put reports */
      int saved = t->saved < 0 ? t->saved : -EIO;
      return mw_s3__finish(s, req, saved);
    }
    case P_GET:
      if (a->too_big) {
        mw_s3__set_reason(s, req, "object larger than max_object_bytes");
        return mw_s3__finish(s, req, -EFBIG);
      }
      if (ok) {
        req->size = a->range_total != UINT64_MAX ? a->range_total : req->buf.len;
        return mw_s3__finish(s, req, 0);
      }
      if (http == 416) return mw_s3__next_exchange(s, req, P_GET_SIZE);
      if (http == 404) return mw_s3__finish(s, req, -ENOENT);
      break;
    case P_GET_SIZE: /* a 416, or a range of 0 bytes: only the size is needed */
      if (ok && a->content_length != UINT64_MAX) {
        req->size = a->content_length;
        mw_buf_reset(&req->buf);
        if (p->off <= req->size) return mw_s3__finish(s, req, 0);
        char why[96];
        snprintf(why, sizeof why, "offset %llu is past the end (%llu bytes)",
                 (unsigned long long)p->off, (unsigned long long)req->size);
        mw_s3__set_reason(s, req, why);
        return mw_s3__finish(s, req, -EINVAL);
      }
      if (http == 404) return mw_s3__finish(s, req, -ENOENT);
      break;
    case P_HEAD:
      if (ok && a->content_length != UINT64_MAX) {
        req->size = a->content_length;
        return mw_s3__finish(s, req, 0);
      }
      if (http == 404) return mw_s3__finish(s, req, -ENOENT);
      break;
    case P_DELETE:
      if (ok || (http == 404 && strcmp(code, "NoSuchBucket") != 0)) return mw_s3__finish(s, req, 0);
      break;
    case P_LIST:
      if (ok) {
        if ((rc = mw_s3__list_page(s, req, &more)) < 0) break;
        if (more) return mw_s3__next_exchange(s, req, P_LIST);
        if (p->op == MW_OP_DELETE_PREFIX) {
          t->i = t->off = 0;
          return mw_s3__delete_next(s, req);
        }
        rc = mw_s3__index_keys(req, t->nkeys);
        return mw_s3__finish(s, req, rc);
      }
      break;
    case P_DEL_BATCH:
      if (ok) {
        mw_s3__count_batch();
        size_t retry = 0;
        int final = 0;
        if ((rc = mw_s3__batch_answer(s, req, &retry, &final)) < 0) break;
        if (final < 0) return mw_s3__finish(s, req, final);
        if (retry > 0) {
          char what[96];
          snprintf(what, sizeof what, "%zu key%s answered with a transient error", retry,
                   retry == 1 ? "" : "s");
          return mw_s3__retry_or_fail(s, req, -EAGAIN, what);
        }
        return mw_s3__delete_next(s, req);
      }
      if (http == 501 || http == 405 || (http == 400 && strcmp(code, "NotImplemented") == 0)) {
        /* no DeleteObjects here: the rest one key at a time, from this batch on */
        mw_log_notice("storage: s3://%s: the store refused DeleteObjects (HTTP %d%s%s); deleting "
                      "one key per request", s->bucket, http, code[0] ? " " : "", code);
        s->no_batch_delete = true;
        t->i = t->batch_i;
        t->off = t->batch_off;
        return mw_s3__next_exchange(s, req, P_DEL_EACH);
      }
      break;
    case P_DEL_EACH:
      if (ok || (http == 404 && strcmp(code, "NoSuchBucket") != 0)) {
        if (mw_s3__many(req)) {
          int inj = mw_storage__key_fault(req, t->i, S3_RESPONSE);
          if (inj < 0 && mw_s3__transient_errno(inj))
            return mw_s3__retry_or_fail(s, req, inj, "answer lost (test fault)");
          req->priv.statuses[t->i] = inj;
          if (inj < 0)
            mw_storage__set_error(req, "s3://%s/%s: DELETE: %s (test fault)", s->bucket,
                                  (const char *)req->buf.data + t->off, strerror(-inj));
        }
        mw_s3__count_single();
        t->removed++;
        t->off += strlen((const char *)req->buf.data + t->off) + 1;
        if (++t->i < t->nkeys) return mw_s3__next_exchange(s, req, P_DEL_EACH);
        return mw_s3__finish(s, req, 0);
      }
      break;
    case P_UPLOADS:
      if (ok) {
        if ((rc = mw_s3__uploads_page(req, &more)) < 0) break;
        if (more) return mw_s3__next_exchange(s, req, P_UPLOADS);
        t->i = t->off = 0;
        if (t->nuploads > 0) return mw_s3__next_exchange(s, req, P_ABORT_EACH);
        if (p->op == MW_OP_DELETE_ROOT) return mw_s3__next_exchange(s, req, P_PROBE);
        return mw_s3__finish(s, req, 0);
      }
      if (http == 501 || (http == 400 && strcmp(code, "NotImplemented") == 0))
        return mw_s3__finish(s, req, 0); /* no multipart listings: nothing to sweep */
      break;
    case P_ABORT_EACH:
      if (ok || http == 404) {
        if (ok) t->removed++;
        const char *k = (const char *)t->uploads.data + t->off;
        t->off += strlen(k) + 1;
        t->off += strlen((const char *)t->uploads.data + t->off) + 1;
        if (++t->i < t->nuploads) return mw_s3__next_exchange(s, req, P_ABORT_EACH);
        if (p->op == MW_OP_DELETE_ROOT) return mw_s3__next_exchange(s, req, P_PROBE);
        return mw_s3__finish(s, req, 0);
      }
      break;
    case P_PROBE:
      if (ok) {
        if ((rc = mw_s3__list_page(s, req, &more)) < 0) break;
        if (t->nkeys > 0) {
          char why[MW_STORAGE_KEY_MAX_BYTES + 32];
          snprintf(why, sizeof why, "not empty: %s is an object", (const char *)req->buf.data);
          mw_buf_reset(&req->buf);
          mw_s3__set_reason(s, req, why);
          return mw_s3__finish(s, req, -ENOTEMPTY);
        }
        return mw_s3__finish(s, req, 0);
      }
      break;
    default: assert(!"bad phase");
  }
  if (rc < 0) {
    mw_s3__set_reason(s, req, rc == -EBADMSG ? "malformed answer" : strerror(-rc));
    return mw_s3__finish(s, req, rc);
  }
  /* a final HTTP error */
  int err = mw_s3__status_errno(http, code);
  mw_s3__set_reason(s, req, NULL);
  if (a->phase == P_DEL_EACH && mw_s3__many(req)) { /* that key fails; on to the next */
    req->priv.statuses[t->i] = err;
    t->off += strlen((const char *)req->buf.data + t->off) + 1;
    if (++t->i < t->nkeys) return mw_s3__next_exchange(s, req, P_DEL_EACH);
    return mw_s3__finish(s, req, 0);
  }
  if ((a->phase == P_MP_PART || a->phase == P_MP_DONE) && t != NULL) {
    t->saved = err;
    return mw_s3__next_exchange(s, req, P_MP_ABORT);
  }
  mw_s3__finish(s, req, err);
}



void mw_s3__finish(mw_s3_t *s, mw_storage_req_t *req, int status) {
  mw_storage_req_s3_t *a = mw_s3_req(req);
  mw_s3_task_t *t = a->task;
  assert(a->easy == NULL && a->headers == NULL && a->wait_next == NULL);
  if (status < 0 && (req->priv.op == MW_OP_PUT || req->priv.op == MW_OP_PUT_IF_ABSENT) &&
      status != -EEXIST && a->ambiguous)
    req->priv.maybe_written = 1;
  if (mw_s3__many(req)) status = mw_s3__many_finish(req, status);
  if (t != NULL) {
    if (req->priv.op == MW_OP_DELETE_MANY) {
      mw_buf_reset(&req->buf);
    } else if (req->priv.op == MW_OP_DELETE_PREFIX) {
      free(req->keys);
      req->keys = NULL;
      mw_buf_reset(&req->buf);
      req->nkeys = t->removed;
    } else if (req->priv.op == MW_OP_SWEEP_TMP || req->priv.op == MW_OP_DELETE_ROOT) {
      mw_buf_reset(&req->buf);
      req->nkeys = t->removed;
    }
    mw_buf_free(&t->uploads);
    mw_buf_free(&t->parts_xml);
    mw_buf_free(&t->batch);
    mw_buf_free(&t->batch_xml);
    free(t);
    a->task = NULL;
  }
  mw_buf_free(&a->resp);
  mw_s3__keep_off(s);
  mw_storage__done(req, status);
}



static void s3_submit(mw_storage_t *st, mw_storage_req_t *req) {
  mw_s3_t *s = mw_s3(st);
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_s3_t *a = mw_s3_req(req);
  assert(s != NULL && p->st == st && a->easy == NULL);
  mw_s3__keep_on(s);
  int phase = 0;
  switch ((mw_storage_op_t)p->op) {
    case MW_OP_PUT_IF_ABSENT: phase = P_PUT; break;
    case MW_OP_PUT: phase = p->len >= 2 * s->part_bytes ? P_MP_INIT : P_PUT; break;
    case MW_OP_GET: phase = p->rlen == 0 ? P_GET_SIZE : P_GET; break;
    case MW_OP_HEAD: phase = P_HEAD; break;
    case MW_OP_DELETE: phase = P_DELETE; break;
    case MW_OP_LIST: case MW_OP_DELETE_PREFIX: phase = P_LIST; break;
    case MW_OP_SWEEP_TMP: case MW_OP_DELETE_ROOT: phase = P_UPLOADS; break;
    case MW_OP_DELETE_MANY: phase = s->no_batch_delete ? P_DEL_EACH : P_DEL_BATCH; break;
    case MW_OP_COUNT_: assert(!"bad op");
  }
  if (phase == P_MP_INIT && (p->len + s->part_bytes - 1) / s->part_bytes > MW_S3_MAX_PARTS)
    phase = P_PUT; /* more parts than S3 allows: one PUT (S3 refuses past 5 GiB) */
  bool needs_task = phase != P_PUT && phase != P_GET && phase != P_GET_SIZE && phase != P_HEAD &&
                    phase != P_DELETE;
  if ((needs_task && mw_s3__task(req) == NULL) ||
      (mw_s3__many(req) && mw_s3__many_start(s, req) < 0)) {
    mw_storage__set_error(req, "s3://%s/%s: out of memory", s->bucket, p->key);
    a->phase = P_FAIL;
    a->curl_code = -ENOMEM;
  } else {
    a->phase = (uint8_t)phase;
  }
  mw_s3__enqueue(s, req); /* the exchange starts from the loop (P_FAIL: fails there) */
}

/* ------------------------------------------------------------ open / close */

static void once_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }



int mw_storage__s3_open(mw_storage_t *st, mw_err_t *err) {
  static pthread_once_t once = PTHREAD_ONCE_INIT, monce = PTHREAD_ONCE_INIT;
  pthread_once(&once, once_init);
  pthread_once(&monce, mw_s3__delete_metrics_init);
  mw_s3_t *s = calloc(1, sizeof *s);
  if (s == NULL) return mw_err_set(err, -ENOMEM, "storage: out of memory");
  s->st = st;
  s->seed = (uint64_t)(uintptr_t)s ^ uv_hrtime();
  int rc = mw_s3__config_resolve(s, &st->cfg, st->uri, err);
  if (rc == 0) rc = mw_s3__loop_open(s, err);
  if (rc < 0) {
    mw_s3__config_free(s);
    free(s);
    return rc;
  }
  st->be_state = s;
  st->be = &mw_storage__s3_ops;
  return 0;
}

static void s3_close(mw_storage_t *st, void (*done)(mw_storage_t *st)) {
  mw_s3_t *s = mw_s3(st);
  assert(s != NULL && s->active == 0 && s->waits == NULL);
  mw_s3__config_free(s);
  mw_s3__loop_close(s, done); /* frees s once every handle is closed */
}

const mw_storage_backend_ops_t mw_storage__s3_ops = {
    .name = "s3",
    .step_names = mw_s3_step_names,
    .n_steps = MW_S3_STEP_COUNT,
    .sync_step = -1,
    .family = MW_STORAGE_FAMILY_S3,
    .submit = s3_submit,
    .close = s3_close,
};
