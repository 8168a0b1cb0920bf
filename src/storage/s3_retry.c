/*
 * s3_retry.c — what an attempt's outcome makes of the request: a retry
 * after a backoff, a failure, or an answer for the phase (backend_s3.c).
 *
 * A transport error (connect, send, receive, timeout, a connection dropped
 * mid-body), HTTP 5xx (501 excepted), 429 and 408 are retried with
 * exponential backoff (MW_S3_BACKOFF_MS doubling to MW_S3_BACKOFF_MAX_MS,
 * half of it jittered) until the exchange's retry deadline (s3.retry_
 * deadline_ms from the exchange's start); then the operation fails with the
 * last reason. Other answers are final and go to the phase.
 *
 * Waiting requests sit on one unsorted list (s->waits) with their due time;
 * one timer (s->backoff) is armed for the earliest. Submissions go through
 * the same list with a due time of now, so a request always starts from the
 * loop, never inside its submit call.
 *
 * A create (PUT, CompleteMultipartUpload) whose body went out whole, whose
 * answer was lost, or that met a 5xx may have landed unseen: it is marked
 * ambiguous, and a later 412 (or NoSuchUpload) is checked, not believed.
 *
 * Test steps: "retry" before a backoff wait; "response" when an attempt's
 * answer is in, before it is acted on. An injected ECONNRESET, ETIMEDOUT or
 * EAGAIN behaves like that transport failure at that point (and is
 * retried); any other injected errno fails the operation at once.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "storage/s3_int.h"

_Static_assert(MW_S3_BACKOFF_MS > 0, "a backoff");
_Static_assert(MW_S3_BACKOFF_MS <= MW_S3_BACKOFF_MAX_MS, "the backoff grows to its cap");
_Static_assert(((uint64_t)MW_S3_BACKOFF_MS << 6) >= MW_S3_BACKOFF_MAX_MS,
               "six doublings reach the cap (retry_or_fail shifts at most 6)");

/* A pseudo-random number in [0, max] (an LCG: spreading retries, not secrets). */
static uint64_t jitter(mw_s3_t *s, uint64_t max) {
  s->seed = s->seed * 6364136223846793005ull + 1442695040888963407ull;
  assert(max < UINT64_MAX); /* max + 1 below */
  return max == 0 ? 0 : (s->seed >> 33) % (max + 1);
}

/* ------------------------------------------------------------ backoff */

static void on_backoff(uv_timer_t *t);

static void rearm(mw_s3_t *s) {
  uint64_t now = uv_now(s->st->loop), due = UINT64_MAX;
  assert(s->waits == NULL || s->active > 0); /* a waiting request is a running one */
  for (mw_storage_req_t *r = s->waits; r != NULL; r = r->be.s3.wait_next)
    if (r->be.s3.wait_due_ms < due) due = r->be.s3.wait_due_ms;
  if (due == UINT64_MAX) uv_timer_stop(&s->backoff);
  else uv_timer_start(&s->backoff, on_backoff, due > now ? due - now : 0, 0);
}

static void on_backoff(uv_timer_t *t) {
  mw_s3_t *s = t->data;
  uint64_t now = uv_now(s->st->loop);
  mw_storage_req_t **pp = &s->waits, *ready = NULL;
  while (*pp != NULL) {
    mw_storage_req_t *r = *pp;
    if (r->be.s3.wait_due_ms <= now) {
      *pp = r->be.s3.wait_next;
      r->be.s3.wait_next = ready;
      ready = r;
    } else {
      pp = &r->be.s3.wait_next;
    }
  }
  while (ready != NULL) {
    mw_storage_req_t *r = ready;
    ready = r->be.s3.wait_next;
    r->be.s3.wait_next = NULL;
    assert(r->be.s3.wait_due_ms <= now);
    assert(r->be.s3.easy == NULL); /* waiting: no attempt runs */
    if (r->be.s3.phase == P_FAIL) mw_s3__finish(s, r, r->be.s3.curl_code);
    else if (r->be.s3.attempts == 0) /* just submitted */
      mw_s3__next_exchange(s, r, r->be.s3.phase);
    else mw_s3__attempt_start(s, r);
  }
  rearm(s);
}

/* ------------------------------------------------------------ outcomes */

void mw_s3__retry_or_fail(mw_s3_t *s, mw_storage_req_t *req, int err, const char *what) {
  mw_storage_req_s3_t *a = mw_s3_req(req);
  assert(err < 0);
  assert(a->attempt >= 1); /* an attempt ran (the backoff's shift is attempt - 1) */
  assert(a->attempt <= a->attempts);
  assert(a->easy == NULL);
  uint64_t now = uv_now(s->st->loop);
  uint32_t shift = a->attempt < 7 ? a->attempt - 1 : 6;
  uint64_t backoff = (uint64_t)MW_S3_BACKOFF_MS << shift;
  if (backoff > MW_S3_BACKOFF_MAX_MS) backoff = MW_S3_BACKOFF_MAX_MS;
  backoff = backoff / 2 + jitter(s, backoff / 2);
  assert(backoff <= MW_S3_BACKOFF_MAX_MS);
  if (now + backoff > a->deadline_ms) {
    mw_s3__set_reason(s, req, what);
    return mw_s3__finish(s, req, err);
  }
  int inj = mw_storage__step(req, S3_RETRY);
  if (inj < 0) {
    mw_s3__set_reason(s, req, "retry refused by a test fault");
    return mw_s3__finish(s, req, inj);
  }
  s->st->health.retries++;
  if (a->attempt == 1 || a->attempt % 10 == 0)
    mw_log_info("storage: s3://%s/%s%s%s: %s attempt %u: %s; retrying in %llu ms", s->bucket,
                s->prefix, s->prefix[0] ? "/" : "", mw_s3__exchange_key(req), mw_s3__method(req),
                a->attempt, what ? what : strerror(-err), (unsigned long long)backoff);
  a->wait_due_ms = now + backoff;
  assert(a->wait_due_ms <= a->deadline_ms); /* no retry starts past the deadline */
  assert(a->wait_next == NULL);
  a->wait_next = s->waits;
  s->waits = req;
  rearm(s);
}

void mw_s3__attempt_failed_early(mw_s3_t *s, mw_storage_req_t *req, int err) {
  assert(err < 0);
  assert(req->be.s3.easy == NULL); /* never handed to curl */
  if (mw_s3__transient_errno(err)) return mw_s3__retry_or_fail(s, req, err, strerror(-err));
  mw_s3__set_reason(s, req, strerror(-err));
  mw_s3__finish(s, req, err);
}

/* Start (or fail) a request from the loop, never inside its submit call. */
void mw_s3__enqueue(mw_s3_t *s, mw_storage_req_t *req) {
  mw_storage_req_s3_t *a = mw_s3_req(req);
  assert(a->attempts == 0); /* only a submission starts this way */
  assert(a->wait_next == NULL);
  a->wait_due_ms = uv_now(s->st->loop);
  a->wait_next = s->waits;
  s->waits = req;
  rearm(s);
}

/* An exchange that creates an object: if it may have landed unseen, a
 * later 412 or NoSuchUpload is checked rather than believed. */
static bool is_create(const mw_storage_req_t *req) {
  uint8_t ph = req->be.s3.phase;
  return ph == P_PUT || ph == P_MP_DONE;
}

void mw_s3__attempt_done(mw_s3_t *s, mw_storage_req_t *req, int cc) {
  mw_storage_req_s3_t *a = mw_s3_req(req);
  assert(a->easy == NULL); /* check_done gave the handle back */
  assert(a->attempt >= 1);
  if (a->injected < 0 && cc != CURLE_OK) {
    /* the "body" step cut the body short: S3 applies a PUT only whole
     * (Content-Length), so nothing landed */
    int inj = a->injected;
    if (mw_s3__transient_errno(inj))
      return mw_s3__retry_or_fail(s, req, inj, "connection dropped mid-body (test fault)");
    mw_s3__set_reason(s, req, strerror(-inj));
    return mw_s3__finish(s, req, inj);
  }
  if (cc == CURLE_OK) {
    int inj = mw_storage__step(req, S3_RESPONSE);
    if (inj < 0) {
      /* the answer is lost: whatever the exchange did, it did */
      if (is_create(req) && a->http_status >= 200 && a->http_status < 300) a->ambiguous = 1;
      if (mw_s3__transient_errno(inj))
        return mw_s3__retry_or_fail(s, req, inj, "answer lost (test fault)");
      mw_s3__set_reason(s, req, strerror(-inj));
      return mw_s3__finish(s, req, inj);
    }
  }
  if (cc != CURLE_OK) {
    if (a->too_big) return mw_s3__answer(s, req);
    /* a create whose body went out whole may have been applied */
    if (is_create(req) && (a->body_sent == a->body_len || a->http_status != 0)) a->ambiguous = 1;
    int err = mw_s3__curl_errno(cc);
    if (mw_s3__transient_curl(cc))
      return mw_s3__retry_or_fail(s, req, err, curl_easy_strerror((CURLcode)cc));
    mw_s3__set_reason(s, req, curl_easy_strerror((CURLcode)cc));
    return mw_s3__finish(s, req, err);
  }
  int http = a->http_status;
  if ((http >= 500 && http != 501) || http == 429 || http == 408) { /* 501: never will */
    if (is_create(req)) a->ambiguous = 1; /* a 5xx does not say the write did not happen */
    char what[32];
    snprintf(what, sizeof what, "HTTP %d", http);
    return mw_s3__retry_or_fail(s, req, http == 503 || http == 429 ? -EAGAIN : -EIO, what);
  }
  mw_s3__answer(s, req);
}
