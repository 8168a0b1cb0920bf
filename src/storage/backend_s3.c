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

/* ------------------------------------------------------------ requests */

/* get's Range header value: "bytes=a-b", "bytes=a-" to the end, or "" for
 * the whole object. */
static void get_range(const mw_storage_req_front_t *p, char *range, size_t cap) {
  range[0] = '\0';
  if (p->off == 0 && p->rlen == UINT64_MAX) return;
  uint64_t last = p->rlen == UINT64_MAX || p->off + p->rlen < p->off ? UINT64_MAX
                                                                     : p->off + p->rlen - 1;
  if (last == UINT64_MAX)
    snprintf(range, cap, "bytes=%llu-", (unsigned long long)p->off);
  else
    snprintf(range, cap, "bytes=%llu-%llu", (unsigned long long)p->off, (unsigned long long)last);
}

/* What the single-object phases send: put, put_if_absent, get, head, delete. */
static void object_build(mw_storage_req_t *req, mw_s3_spec_t *sp) {
  mw_storage_req_front_t *p = &req->priv;
  switch (mw_s3_req(req)->phase) {
    case P_PUT:
      sp->method = "PUT";
      sp->body = p->src;
      sp->body_len = p->len;
      sp->if_none_match = p->op == MW_OP_PUT_IF_ABSENT;
      break;
    case P_PIA_CHECK: sp->method = "GET"; break;
    case P_GET:
      sp->method = "GET";
      sp->into_buf = true;
      get_range(p, sp->range, sizeof sp->range);
      break;
    case P_GET_SIZE: case P_HEAD: sp->method = "HEAD"; break;
    case P_DELETE: sp->method = "DELETE"; break;
    default: assert(!"not a single-object phase");
  }
}

int mw_s3__build(mw_s3_t *s, mw_storage_req_t *req, mw_s3_spec_t *sp) {
  memset(sp, 0, sizeof *sp);
  sp->key = req->priv.key;
  mw_buf_t q = MW_BUF_INIT;
  int rc = 0;
  switch ((enum mw_s3_phase)mw_s3_req(req)->phase) {
    case P_PUT: case P_PIA_CHECK: case P_GET: case P_GET_SIZE: case P_HEAD: case P_DELETE:
      object_build(req, sp);
      break;
    case P_MP_INIT: case P_MP_PART: case P_MP_DONE: case P_MP_ABORT:
      rc = mw_s3__multipart_build(s, req, sp, &q);
      break;
    case P_LIST: case P_PROBE: rc = mw_s3__list_build(s, req, sp, &q); break;
    case P_UPLOADS: case P_ABORT_EACH: rc = mw_s3__sweep_build(s, req, sp, &q); break;
    case P_DEL_EACH: case P_DEL_BATCH: rc = mw_s3__delete_build(req, sp); break;
    case P_FAIL: default: assert(!"not a phase that sends"); rc = -EINVAL; break;
  }
  assert(sp->method != NULL);
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
  assert(phase >= P_PUT);
  assert(phase < P_FAIL); /* P_FAIL sends nothing */
  assert(a->easy == NULL);
  assert(a->wait_next == NULL);
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

/* ------------------------------------------------------------ answers */

/* put / put_if_absent: the PUT, and the GET that checks a 412 met after an
 * attempt that may have landed unseen (ambiguous). */
static int put_answer(mw_s3_t *s, mw_storage_req_t *req, const mw_s3_answer_t *an) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_s3_t *a = mw_s3_req(req);
  assert(a->rechecks <= MW_S3_PIA_RECHECKS);
  if (a->phase == P_PUT) {
    if (an->ok) return mw_s3__end(s, req, 0);
    if (p->op != MW_OP_PUT_IF_ABSENT || (an->http != 412 && an->http != 409)) return 0;
    /* an earlier attempt of ours may be what is there now */
    if (a->ambiguous) return mw_s3__go(s, req, P_PIA_CHECK);
    return mw_s3__end(s, req, -EEXIST);
  }
  assert(a->phase == P_PIA_CHECK);
  assert(p->op == MW_OP_PUT_IF_ABSENT);
  if (an->ok) {
    bool ours = !a->too_big && a->resp.len == p->len &&
                (p->len == 0 || memcmp(a->resp.data, p->src, p->len) == 0);
    if (ours) mw_log_notice("storage: s3://%s/%s%s%s: a retried create had landed (the same "
                            "bytes are there); reported as created", s->bucket, s->prefix,
                            s->prefix[0] ? "/" : "", p->key);
    return mw_s3__end(s, req, ours ? 0 : -EEXIST);
  }
  if (an->http == 404 && a->rechecks++ < MW_S3_PIA_RECHECKS)
    return mw_s3__go(s, req, P_PUT); /* gone again: create anew */
  return 0;
}

/* get: the GET (whole or a range), and the HEAD for the size after a 416
 * or for a range of 0 bytes. */
static int get_answer(mw_s3_t *s, mw_storage_req_t *req, const mw_s3_answer_t *an) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_s3_t *a = mw_s3_req(req);
  assert(p->op == MW_OP_GET);
  if (a->phase == P_GET) {
    if (a->too_big) {
      mw_s3__set_reason(s, req, "object larger than max_object_bytes");
      return mw_s3__end(s, req, -EFBIG);
    }
    if (an->ok) {
      req->size = a->range_total != UINT64_MAX ? a->range_total : req->buf.len;
      return mw_s3__end(s, req, 0);
    }
    if (an->http == 416) return mw_s3__go(s, req, P_GET_SIZE);
    return an->http == 404 ? mw_s3__end(s, req, -ENOENT) : 0;
  }
  assert(a->phase == P_GET_SIZE);
  if (an->ok && a->content_length != UINT64_MAX) {
    req->size = a->content_length;
    mw_buf_reset(&req->buf);
    if (p->off <= req->size) return mw_s3__end(s, req, 0);
    char why[96];
    snprintf(why, sizeof why, "offset %llu is past the end (%llu bytes)",
             (unsigned long long)p->off, (unsigned long long)req->size);
    mw_s3__set_reason(s, req, why);
    return mw_s3__end(s, req, -EINVAL);
  }
  return an->http == 404 ? mw_s3__end(s, req, -ENOENT) : 0;
}

/* head: the size; delete: gone (404 too, unless the bucket is). */
static int head_delete_answer(mw_s3_t *s, mw_storage_req_t *req, const mw_s3_answer_t *an) {
  mw_storage_req_s3_t *a = mw_s3_req(req);
  if (a->phase == P_DELETE) {
    assert(req->priv.op == MW_OP_DELETE);
    bool gone = an->ok || (an->http == 404 && strcmp(an->code, "NoSuchBucket") != 0);
    return gone ? mw_s3__end(s, req, 0) : 0;
  }
  assert(a->phase == P_HEAD);
  if (an->ok && a->content_length != UINT64_MAX) {
    req->size = a->content_length;
    return mw_s3__end(s, req, 0);
  }
  return an->http == 404 ? mw_s3__end(s, req, -ENOENT) : 0;
}

/* A final HTTP error the phase did not accept: the operation fails with it,
 * but for one key of delete_many (the next goes on) and a multipart part
 * or completion (the upload is aborted first). */
static void refused(mw_s3_t *s, mw_storage_req_t *req, const mw_s3_answer_t *an) {
  mw_storage_req_s3_t *a = mw_s3_req(req);
  int err = mw_s3__status_errno(an->http, an->code);
  assert(err < 0);
  mw_s3__set_reason(s, req, NULL);
  if (a->phase == P_DEL_EACH && mw_s3__many(req)) return mw_s3__delete_each_refused(s, req, err);
  if ((a->phase == P_MP_PART || a->phase == P_MP_DONE) && a->task != NULL)
    return mw_s3__multipart_refused(s, req, err);
  mw_s3__finish(s, req, err);
}

/* Each phase's handler says what its answer moves the request to. */
void mw_s3__answer(mw_s3_t *s, mw_storage_req_t *req) {
  mw_storage_req_s3_t *a = mw_s3_req(req);
  assert(a->easy == NULL); /* the attempt is over */
  assert(a->attempt >= 1);
  mw_s3_answer_t an = {.http = a->http_status};
  an.ok = an.http >= 200 && an.http < 300;
  char msg[8];
  mw_s3__error_code(a, an.code, sizeof an.code, msg, sizeof msg);
  int rc = 0;
  switch ((enum mw_s3_phase)a->phase) {
    case P_PUT: case P_PIA_CHECK: rc = put_answer(s, req, &an); break;
    case P_GET: case P_GET_SIZE: rc = get_answer(s, req, &an); break;
    case P_HEAD: case P_DELETE: rc = head_delete_answer(s, req, &an); break;
    case P_MP_INIT: case P_MP_PART: case P_MP_DONE: case P_MP_ABORT:
      rc = mw_s3__multipart_answer(s, req, &an);
      break;
    case P_LIST: case P_PROBE: rc = mw_s3__list_answer(s, req, &an); break;
    case P_UPLOADS: case P_ABORT_EACH: rc = mw_s3__sweep_answer(s, req, &an); break;
    case P_DEL_BATCH: case P_DEL_EACH: rc = mw_s3__delete_answer(s, req, &an); break;
    case P_FAIL: default: assert(!"not a phase that is answered"); break;
  }
  assert(rc <= MW_S3_MOVED);
  if (rc == MW_S3_MOVED) return;
  if (rc < 0) {
    mw_s3__set_reason(s, req, rc == -EBADMSG ? "malformed answer" : strerror(-rc));
    return mw_s3__finish(s, req, rc);
  }
  refused(s, req, &an);
}

void mw_s3__finish(mw_s3_t *s, mw_storage_req_t *req, int status) {
  mw_storage_req_s3_t *a = mw_s3_req(req);
  mw_s3_task_t *t = a->task;
  assert(a->easy == NULL);
  assert(a->headers == NULL);
  assert(a->wait_next == NULL);
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
  assert(a->task == NULL);
  mw_storage__done(req, status);
}

static void s3_submit(mw_storage_t *st, mw_storage_req_t *req) {
  mw_s3_t *s = mw_s3(st);
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_s3_t *a = mw_s3_req(req);
  assert(s != NULL);
  assert(p->st == st);
  assert(a->easy == NULL);
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
  assert(phase >= P_PUT);
  assert(phase < P_FAIL);
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
  assert(s != NULL);
  assert(s->active == 0);
  assert(s->waits == NULL);
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
