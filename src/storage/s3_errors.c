/*
 * s3_errors.c — error classes of the S3 backend: how an HTTP status, a
 * curl code or an injected errno maps to a negative errno, which of them
 * are transient (retried: s3_retry.c), and the reason text of a failure.
 *
 * Transient: a transport error (connect, send, receive, timeout, a
 * connection dropped mid-body), HTTP 5xx (501 excepted), 429 and 408, and
 * in a DeleteObjects answer the per-key codes InternalError, SlowDown,
 * ServiceUnavailable and RequestTimeout. Everything else is final.
 *
 * A reason names the bucket, key, method, HTTP status, S3 error code and
 * message, the attempts and the request id:
 *   s3://BUCKET/PREFIX/KEY: PUT HTTP 503 SlowDown: message; what (N
 *   attempts, request id R)
 * Secrets never appear in one.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "storage/s3_int.h"

const char *mw_s3__method(const mw_storage_req_t *req) {
  switch (req->be.s3.phase) {
    case P_PUT: case P_MP_PART: return "PUT";
    case P_MP_INIT: case P_MP_DONE: case P_DEL_BATCH: return "POST";
    case P_GET: case P_PIA_CHECK: case P_LIST: case P_UPLOADS: case P_PROBE: return "GET";
    case P_GET_SIZE: case P_HEAD: return "HEAD";
    default: return "DELETE";
  }
}

/* The S3 error code and message of an error document, or "". */
void mw_s3__error_code(const mw_storage_req_s3_t *a, char *code, size_t ccap, char *msg,
                       size_t mcap) {
  code[0] = msg[0] = '\0';
  const char *p = (const char *)a->resp.data, *end = p + a->resp.len, *v;
  size_t n;
  if (p == NULL) return;
  const char *q = p;
  if (mw_s3__xml_next(&q, end, "Code", &v, &n) && mw_s3__xml_text(v, n, code, ccap) < 0)
    code[0] = '\0';
  q = p;
  if (mw_s3__xml_next(&q, end, "Message", &v, &n) && mw_s3__xml_text(v, n, msg, mcap) < 0)
    msg[0] = '\0';
}

/* The key an exchange is about (a key of a prefix operation, or the
 * request's). */
const char *mw_s3__exchange_key(const mw_storage_req_t *req) {
  const mw_s3_task_t *t = req->be.s3.task;
  if (t != NULL && req->be.s3.phase == P_DEL_EACH) return (const char *)req->buf.data + t->off;
  if (t != NULL && req->be.s3.phase == P_DEL_BATCH && t->nbatch > 0)
    return (const char *)t->batch.data; /* the batch's first key */
  if (t != NULL && req->be.s3.phase == P_ABORT_EACH) return (const char *)t->uploads.data + t->off;
  return req->priv.key;
}

/* The reason of a failed exchange: "s3://BUCKET/PREFIX/KEY: METHOD HTTP
 * 503 SlowDown: message; what (N attempts, request id R)". */
void mw_s3__set_reason(mw_s3_t *s, mw_storage_req_t *req, const char *what) {
  mw_storage_req_s3_t *a = mw_s3_req(req);
  assert(a->attempts >= 1); /* reasons are of exchanges that ran */
  char code[64], msg[160], head[96] = "";
  mw_s3__error_code(a, code, sizeof code, msg, sizeof msg);
  int n = 0;
  if (a->http_status >= 300) n = snprintf(head, sizeof head, " HTTP %d", a->http_status);
  if (code[0] && n >= 0 && (size_t)n < sizeof head)
    snprintf(head + n, sizeof head - (size_t)n, " %s", code);
  const char *key = mw_s3__exchange_key(req);
  bool raw = a->phase == P_ABORT_EACH; /* an object name already */
  mw_storage__set_error(req, "s3://%s/%s%s%s: %s%s%s%s%s%s (%u attempt%s%s%s)", s->bucket,
                        raw ? "" : s->prefix, !raw && s->prefix[0] ? "/" : "", key,
                        mw_s3__method(req), head, msg[0] ? ": " : "", msg, what ? "; " : "",
                        what ? what : "", a->attempts, a->attempts == 1 ? "" : "s",
                        a->request_id[0] ? ", request id " : "", a->request_id);
}

/* HTTP status (non-retryable) -> -errno. */
int mw_s3__status_errno(int http, const char *code) {
  assert(http >= 0);
  if (http == 404) return strcmp(code, "NoSuchBucket") == 0 ? -ENXIO : -ENOENT;
  if (http == 401 || http == 403) return -EACCES;
  if (http == 412) return -EEXIST;
  if (http == 409) return -EBUSY;
  if (http == 413 || strcmp(code, "EntityTooLarge") == 0) return -EFBIG;
  if (http == 416) return -EINVAL;
  if (http >= 400 && http < 500) return -EINVAL;
  if (http == 503 || http == 429) return -EAGAIN;
  return -EIO;
}

int mw_s3__curl_errno(int cc) {
  assert(cc != CURLE_OK);
  switch (cc) {
    case CURLE_COULDNT_RESOLVE_HOST: case CURLE_COULDNT_RESOLVE_PROXY: return -EHOSTUNREACH;
    case CURLE_COULDNT_CONNECT: return -ECONNREFUSED;
    case CURLE_OPERATION_TIMEDOUT: return -ETIMEDOUT;
    case CURLE_SSL_CONNECT_ERROR: case CURLE_PEER_FAILED_VERIFICATION: return -EPROTO;
    case CURLE_OUT_OF_MEMORY: return -ENOMEM;
    default: return -ECONNRESET;
  }
}

bool mw_s3__transient_curl(int cc) {
  assert(cc != CURLE_OK);
  switch (cc) {
    case CURLE_COULDNT_RESOLVE_HOST: case CURLE_COULDNT_CONNECT: case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR: case CURLE_RECV_ERROR: case CURLE_GOT_NOTHING: case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR: case CURLE_HTTP2: case CURLE_HTTP2_STREAM:
      return true;
    default: return false;
  }
}

bool mw_s3__transient_errno(int e) { return e == -ECONNRESET || e == -ETIMEDOUT || e == -EAGAIN; }

bool mw_s3__transient_key_code(const char *code) {
  return strcmp(code, "InternalError") == 0 || strcmp(code, "SlowDown") == 0 ||
         strcmp(code, "ServiceUnavailable") == 0 || strcmp(code, "RequestTimeout") == 0;
}

