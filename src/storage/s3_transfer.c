/*
 * s3_transfer.c — one attempt of one exchange on curl.
 *
 * The phase machine (backend_s3.c, mw_s3__build) says what the exchange
 * sends (mw_s3_spec_t); an attempt resets the request's per-attempt fields,
 * runs the "request" test step, makes the URL (base + "/" + the encoded
 * object name + "?" + the sorted, encoded query) and the headers, sets up
 * an easy handle from the pool and adds it to the multi handle. curl signs
 * it (SigV4 by CURLOPT_AWS_SIGV4). Every request carries
 * x-amz-content-sha256: UNSIGNED-PAYLOAD (curl does not add it),
 * Content-Length (never chunked) and x-amz-security-token with a session
 * token. No empty "Expect:" header: curl signs it but does not send it.
 *
 * curl's callbacks here feed the body (with the "body" test step at its
 * half: an injected error there cuts the body short, as a dropped
 * connection would), take the answer under a cap (max_object_bytes for a
 * GET's data, MW_S3_RESP_MAX_BYTES for XML) and read the headers. The
 * transfer's end comes back through s3_loop.c to s3_retry.c.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "storage/s3_int.h"

/* ------------------------------------------------------------ curl callbacks */

/* The request body to curl; the "body" step fires once half is handed over. */
static size_t on_read(char *out, size_t size, size_t n, void *ud) {
  mw_storage_req_t *req = ud;
  mw_storage_req_s3_t *a = mw_s3_req(req);
  size_t want = size * n, left = a->body_len - a->body_sent, half = a->body_len / 2;
  assert(a->body_sent <= a->body_len);
  if (!a->body_step && a->body_len > 0 && a->body_sent >= half) {
    a->body_step = 1; /* half the body is with curl (and maybe the server) */
    int inj = mw_storage__step(req, S3_BODY);
    if (inj < 0) {
      a->injected = inj;
      return CURL_READFUNC_ABORT; /* as if the connection dropped mid-body */
    }
  }
  if (want > left) want = left;
  if (!a->body_step && a->body_sent + want > half) want = half - a->body_sent;
  memcpy(out, a->body + a->body_sent, want);
  a->body_sent += want;
  return want;
}

/* curl rewinds the body to send it again (a redirect, an auth retry). */
static int on_seek(void *ud, curl_off_t off, int origin) {
  mw_storage_req_t *req = ud;
  mw_storage_req_s3_t *a = mw_s3_req(req);
  assert(a->easy != NULL); /* during a transfer */
  if (origin != SEEK_SET || off < 0 || (size_t)off > a->body_len) return CURL_SEEKFUNC_CANTSEEK;
  a->body_sent = (size_t)off;
  return CURL_SEEKFUNC_OK;
}

/* The answer body: a GET's data into req->buf, anything else (XML) into
 * the attempt's resp, each under its cap (too_big stops the transfer). */
static size_t on_write(char *p, size_t size, size_t n, void *ud) {
  mw_storage_req_t *req = ud;
  mw_storage_req_s3_t *a = mw_s3_req(req);
  assert(a->easy != NULL); /* during a transfer */
  size_t len = size * n;
  long code = 0;
  curl_easy_getinfo(a->easy, CURLINFO_RESPONSE_CODE, &code);
  bool data = (a->phase == P_GET) && code >= 200 && code < 300;
  mw_buf_t *b = data ? &req->buf : &a->resp;
  size_t cap = data ? req->priv.st->cfg.max_object_bytes : MW_S3_RESP_MAX_BYTES;
  if (a->phase == P_PIA_CHECK) cap = req->priv.len; /* more than ours: not ours */
  if (b->len + len > cap) {
    a->too_big = 1;
    return 0; /* CURLE_WRITE_ERROR: stop the transfer */
  }
  return mw_buf_append(b, p, len) == 0 ? len : 0;
}

/* One header line: the sizes, ETag and request id an exchange needs. */
static size_t on_header(char *p, size_t size, size_t n, void *ud) {
  mw_storage_req_t *req = ud;
  mw_storage_req_s3_t *a = mw_s3_req(req);
  assert(a->easy != NULL); /* during a transfer */
  size_t len = size * n;
  char line[512];
  size_t m = len < sizeof line - 1 ? len : sizeof line - 1;
  memcpy(line, p, m);
  line[m] = '\0';
  while (m > 0 && (line[m - 1] == '\r' || line[m - 1] == '\n')) line[--m] = '\0';
  unsigned long long x, y, z;
  if (strncasecmp(line, "Content-Length:", 15) == 0 && sscanf(line + 15, "%llu", &x) == 1) {
    a->content_length = x;
    long code = 0;
    curl_easy_getinfo(a->easy, CURLINFO_RESPONSE_CODE, &code);
    if (a->phase == P_GET && code >= 200 && code < 300 && x > req->priv.st->cfg.max_object_bytes) {
      a->too_big = 1;
      return 0; /* stop before the body */
    }
  } else if (strncasecmp(line, "Content-Range:", 14) == 0 &&
             sscanf(line + 14, " bytes %llu-%llu/%llu", &x, &y, &z) == 3) {
    a->range_total = z;
  } else if (strncasecmp(line, "Content-Range:", 14) == 0 &&
             sscanf(line + 14, " bytes */%llu", &z) == 1) {
    a->range_total = z;
  } else if (strncasecmp(line, "ETag:", 5) == 0) {
    const char *v = line + 5;
    while (*v == ' ') v++;
    snprintf(a->etag, sizeof a->etag, "%.*s", (int)sizeof a->etag - 1, v);
  } else if (strncasecmp(line, "x-amz-request-id:", 17) == 0) {
    const char *v = line + 17;
    while (*v == ' ') v++;
    snprintf(a->request_id, sizeof a->request_id, "%.*s", (int)sizeof a->request_id - 1, v);
  } else if (strncmp(line, "HTTP/", 5) == 0) { /* a new response (after 100): start over */
    a->content_length = UINT64_MAX;
    a->range_total = UINT64_MAX;
    a->etag[0] = '\0';
  }
  return len;
}

/* ------------------------------------------------------------ attempt */

/* A new attempt of the exchange: its counts up, what the last one left
 * cleared. */
static void attempt_reset(mw_storage_req_t *req) {
  mw_storage_req_s3_t *a = mw_s3_req(req);
  assert(a->easy == NULL); /* one attempt at a time */
  assert(a->headers == NULL);
  a->attempt++;
  a->attempts++;
  assert(a->attempt <= a->attempts);
  a->http_status = 0;
  a->curl_code = 0;
  a->injected = 0;
  a->body_step = 0;
  a->body_sent = 0;
  a->too_big = 0;
  a->content_length = UINT64_MAX;
  a->range_total = UINT64_MAX;
  a->etag[0] = a->request_id[0] = '\0';
  mw_buf_reset(&a->resp);
  if (a->phase == P_GET) mw_buf_reset(&req->buf);
}

/* base + "/" + encoded object name + "?" + query, NUL-terminated. */
static int url_of(const mw_s3_t *s, const mw_storage_req_t *req, const mw_s3_spec_t *sp,
                  mw_buf_t *url) {
  int rc = mw_s3__append(url, s->base);
  if (rc == 0) rc = mw_buf_append(url, "/", 1);
  if (rc == 0 && sp->key != NULL) {
    bool raw = req->be.s3.phase == P_ABORT_EACH; /* already a full object name */
    rc = mw_s3__encode_name(s, sp->key, raw, true, url);
  }
  if (rc == 0 && sp->query[0]) {
    rc = mw_buf_append(url, "?", 1);
    if (rc == 0) rc = mw_s3__append(url, sp->query);
  }
  if (rc == 0) rc = mw_buf_append(url, "", 1);
  if (rc == 0 && url->len > MW_S3_URL_BYTES) rc = -ENAMETOOLONG;
  assert(rc < 0 || url->data[url->len - 1] == '\0');
  return rc;
}

/* The headers curl signs and sends besides its own. */
static struct curl_slist *headers_of(const mw_s3_t *s, const mw_s3_spec_t *sp) {
  assert(sp->method != NULL);
  assert(sp->body_len == 0 || sp->body != NULL);
  struct curl_slist *h = NULL;
  h = curl_slist_append(h, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
  if (s->token != NULL) {
    char th[4200];
    snprintf(th, sizeof th, "x-amz-security-token: %s", s->token);
    h = curl_slist_append(h, th);
  }
  if (sp->if_none_match) h = curl_slist_append(h, "If-None-Match: *");
  if (sp->range[0]) {
    char rh[96];
    snprintf(rh, sizeof rh, "Range: %s", sp->range);
    h = curl_slist_append(h, rh);
  }
  if (sp->xml_body) h = curl_slist_append(h, "Content-Type: application/xml");
  if (sp->content_md5 != NULL) {
    char mh[64];
    snprintf(mh, sizeof mh, "Content-MD5: %s", sp->content_md5);
    h = curl_slist_append(h, mh);
  }
  if (strcmp(sp->method, "PUT") == 0)
    h = curl_slist_append(h, "Content-Type: application/octet-stream");
  return h;
}

/* The method's options: a body to upload or post, none to read (HEAD). */
static void method_options(CURL *e, mw_storage_req_t *req, const mw_s3_spec_t *sp) {
  bool put = strcmp(sp->method, "PUT") == 0;
  if (put || strcmp(sp->method, "POST") == 0) {
    if (put) curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
    else curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(e, CURLOPT_READDATA, req);
    curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, on_seek);
    curl_easy_setopt(e, CURLOPT_SEEKDATA, req);
    if (put)
      curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)sp->body_len);
    else
      curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)sp->body_len);
  } else if (strcmp(sp->method, "HEAD") == 0) {
    curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
  } else if (strcmp(sp->method, "DELETE") == 0) {
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "DELETE");
  }
}

/* The easy handle's options for this attempt (curl copies the URL). */
static void easy_options(const mw_s3_t *s, CURL *e, mw_storage_req_t *req, const mw_s3_spec_t *sp,
                         const char *url, struct curl_slist *h) {
  curl_easy_setopt(e, CURLOPT_URL, url);
  curl_easy_setopt(e, CURLOPT_PRIVATE, req);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_AWS_SIGV4, s->sigv4);
  curl_easy_setopt(e, CURLOPT_USERNAME, s->ak);
  curl_easy_setopt(e, CURLOPT_PASSWORD, s->sk);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                   (long)(s->timeout_ms < MW_S3_CONNECT_TIMEOUT_MS ? s->timeout_ms
                                                                   : MW_S3_CONNECT_TIMEOUT_MS));
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)s->timeout_ms);
  curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
  /* curl sends "Expect: 100-continue" before bodies over 1 MiB; an empty
   * "Expect:" header to suppress it would be signed but not sent (403), so
   * bound the wait for the 100 instead */
  curl_easy_setopt(e, CURLOPT_EXPECT_100_TIMEOUT_MS, 200L);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, req);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, req);
  method_options(e, req, sp);
}

void mw_s3__attempt_start(mw_s3_t *s, mw_storage_req_t *req) {
  mw_storage_req_s3_t *a = mw_s3_req(req);
  attempt_reset(req);
  int inj = mw_storage__step(req, S3_REQUEST);
  if (inj < 0) return mw_s3__attempt_failed_early(s, req, inj);
  mw_s3_spec_t sp;
  int rc = mw_s3__build(s, req, &sp);
  if (rc < 0) return mw_s3__attempt_failed_early(s, req, rc);
  a->body = sp.body;
  a->body_len = sp.body_len;
  mw_buf_t url = MW_BUF_INIT;
  rc = url_of(s, req, &sp, &url);
  CURL *e = rc == 0 ? mw_s3__easy_get(s) : NULL;
  if (rc == 0 && e == NULL) rc = -ENOMEM;
  if (rc < 0) {
    mw_buf_free(&url);
    return mw_s3__attempt_failed_early(s, req, rc);
  }
  struct curl_slist *h = headers_of(s, &sp);
  a->easy = e;
  a->headers = h;
  easy_options(s, e, req, &sp, (const char *)url.data, h);
  mw_buf_free(&url);
  CURLMcode mc = curl_multi_add_handle(s->multi, e);
  if (mc != CURLM_OK) {
    curl_slist_free_all(h);
    a->headers = NULL;
    a->easy = NULL;
    mw_s3__easy_put(s, e);
    return mw_s3__attempt_failed_early(s, req, -ENOMEM);
  }
}
