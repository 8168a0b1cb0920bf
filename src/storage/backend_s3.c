/*
 * backend_s3.c — the S3 backend: libcurl's multi interface on the libuv
 * loop, SigV4 by CURLOPT_AWS_SIGV4, every operation a short sequence of
 * HTTP exchanges with retries.
 *
 * Loop glue: one CURLM per storage. curl's socket callback keeps one
 * uv_poll_t per socket it wants watched, its timer callback one uv_timer_t;
 * both drive curl_multi_socket_action(), after which finished transfers are
 * collected (curl_multi_info_read) and each request's state machine moves
 * on. Nothing blocks the loop: name resolution runs on curl's resolver
 * thread, connects and TLS are non-blocking. Connections are reused through
 * the multi handle's cache (CURLMOPT_MAXCONNECTS = max_inflight); finished
 * easy handles are kept in a small pool. The front bounds requests in
 * flight (max_inflight), and each request runs one exchange at a time, so
 * at most max_inflight transfers run. All handles are unreferenced; one
 * uv_async_t is referenced while requests run, so an idle storage does not
 * keep uv_run() alive.
 *
 * Keys: "s3://BUCKET/PREFIX" + "/" + key is the object name; the path is
 * percent-encoded per segment, query parameters are passed sorted and
 * percent-encoded as k=v, since curl 7.88's SigV4 does not canonicalise
 * them (../shared/s3/README.md). Every request carries
 * x-amz-content-sha256: UNSIGNED-PAYLOAD (curl does not add it),
 * Content-Length (never chunked) and x-amz-security-token with a session
 * token. No empty "Expect:" header: curl signs it but does not send it.
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
 * Retries: a transport error (connect, send, receive, timeout, a connection
 * dropped mid-body), HTTP 5xx (501 excepted), 429 and 408 are retried with
 * exponential backoff (MW_S3_BACKOFF_MS doubling to MW_S3_BACKOFF_MAX_MS, jittered)
 * until the operation's retry deadline; then the operation fails with the
 * last reason. Other answers are final. Errors name the bucket, key,
 * method, HTTP status, S3 error code and request id.
 *
 * Test steps (fault.h): "request" before each attempt is sent, "body" when
 * half of a request body has been handed to curl, "response" when an
 * attempt's answer is in, before it is acted on, "retry" before a backoff
 * wait. An injected ECONNRESET, ETIMEDOUT or EAGAIN behaves like that
 * transport failure at that point (and is retried); any other injected
 * errno fails the operation at once.
 */
#include <assert.h>
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/log.h"
#include "common/metrics.h"
#include "storage/md5.h"
#include "storage/storage_int.h"

#define MW_S3_BACKOFF_MS 25
#define MW_S3_BACKOFF_MAX_MS 1000
#define MW_S3_DEFAULT_TIMEOUT_MS 30000
#define MW_S3_DEFAULT_DEADLINE_MS 15000
#define MW_S3_CONNECT_TIMEOUT_MS 5000
#define MW_S3_EASY_POOL 64
#define MW_S3_RESP_MAX_BYTES ((size_t)4 << 20) /* list pages, error documents */
#define MW_S3_URL_BYTES 8192
#define MW_S3_MIN_PART_BYTES ((size_t)5 << 20)  /* S3's smallest part but the last */
#define MW_S3_DEFAULT_PART_BYTES ((size_t)16 << 20)
#define MW_S3_MAX_PARTS 10000
#define MW_S3_PIA_RECHECKS 3
#define MW_S3_DELETE_BATCH 1000 /* S3's most keys per DeleteObjects */

enum step { S3_REQUEST = 0, S3_BODY, S3_RESPONSE, S3_RETRY, S3_STEPS_ };
const char *const mw_s3_step_names[MW_S3_STEP_COUNT] = {"request", "body", "response", "retry"};
_Static_assert(S3_STEPS_ == MW_S3_STEP_COUNT, "step names");

/* The exchange a request runs now. */
enum phase {
  P_PUT = 1, P_PIA_CHECK, P_MP_INIT, P_MP_PART, P_MP_DONE, P_MP_ABORT,
  P_GET, P_GET_SIZE, P_HEAD, P_DELETE, P_LIST, P_DEL_EACH, P_DEL_BATCH, P_UPLOADS, P_ABORT_EACH,
  P_PROBE,
  P_FAIL, /* report a_fail (set at submission) from the loop, never inline */
};

typedef struct s3 {
  mw_storage_t *st;
  CURLM *multi;
  uv_timer_t timer;      /* curl's timeout */
  uv_timer_t backoff;    /* the earliest retry of the wait list */
  uv_async_t keep;       /* referenced while requests run */
  uint32_t active;
  int open_handles;      /* handles not yet closed (close waits for 0) */
  void (*close_done)(mw_storage_t *st);
  mw_storage_req_t *waits; /* requests waiting to start or retry, unsorted */
  struct sock *socks;      /* curl's sockets we watch */
  CURL *pool[MW_S3_EASY_POOL];
  unsigned npool;
  /* resolved configuration */
  char *bucket, *prefix;    /* prefix "" or "a/b" (no slashes at the ends) */
  char *base;               /* "http://host:port/bucket" or "https://bucket.host" */
  char *region, *ak, *sk, *token;
  char sigv4[96];
  uint32_t timeout_ms, deadline_ms;
  size_t part_bytes;        /* multipart part size; puts of 2 parts or more use it */
  uint64_t seed;            /* backoff jitter */
  bool no_batch_delete;     /* the store refused DeleteObjects: DELETE each key */
} s3_t;

typedef struct sock {
  uv_poll_t poll;
  s3_t *s;
  curl_socket_t fd;
  struct sock *next;
} sock_t;

/* State of operations with several exchanges. */
typedef struct task {
  char token[1024];      /* continuation token / key-marker */
  char marker[512];      /* upload-id-marker */
  size_t nkeys;          /* keys gathered in req->buf */
  size_t i;              /* next key / upload to delete or abort */
  size_t off;            /* its byte offset in req->buf / uploads */
  size_t removed;
  /* DeleteObjects: the keys of the batch in flight ("k\0k\0", relative),
   * its request body, its Content-MD5, and where in req->buf it began */
  mw_buf_t batch;
  size_t nbatch;
  mw_buf_t batch_xml;
  char batch_md5[MW_MD5_B64_BYTES];
  size_t batch_i, batch_off;
  mw_buf_t uploads;      /* "key\0uploadid\0" pairs to abort */
  size_t nuploads;
  bool root_check;       /* delete_root: list one key after the aborts */
  /* multipart */
  char upload_id[512];
  uint32_t part, nparts;
  mw_buf_t parts_xml;
  int saved;             /* the error an abort reports afterwards */
} task_t;

static void attempt_start(s3_t *s, mw_storage_req_t *req);
static void next_exchange(s3_t *s, mw_storage_req_t *req, int phase);
static void finish(s3_t *s, mw_storage_req_t *req, int status);

/* ------------------------------------------------------------ metrics */

/* memwald_storage_s3_deleted_objects_total{via="batch"|"single"}: objects
 * a delete_prefix removed (DeleteObjects or DELETE);
 * memwald_storage_s3_delete_batches_total: DeleteObjects requests answered;
 * memwald_storage_s3_delete_key_errors_total{kind="retried"|"final"}: keys
 * an answer reported failed (retried alone, or failing the operation). */
static struct {
  bool ok;
  mw_metric_t *by_batch, *by_single, *batches, *key_retried, *key_final;
} dm;

static void delete_metrics_register(void) {
  mw_metrics_t *reg = mw_metrics_default();
  static const char *const via[] = {"via"}, *const kind[] = {"kind"};
  mw_metric_family_t *del = mw_metrics_register(
      reg, MW_METRIC_COUNTER, "memwald_storage_s3_deleted_objects_total",
      "Objects removed by S3 prefix deletions, by request kind.", via, 1, NULL, 0);
  mw_metric_family_t *bat = mw_metrics_register(
      reg, MW_METRIC_COUNTER, "memwald_storage_s3_delete_batches_total",
      "S3 DeleteObjects requests answered.", NULL, 0, NULL, 0);
  mw_metric_family_t *ke = mw_metrics_register(
      reg, MW_METRIC_COUNTER, "memwald_storage_s3_delete_key_errors_total",
      "Keys a DeleteObjects answer reported failed: retried alone, or final.", kind, 1, NULL, 0);
  if (del == NULL || bat == NULL || ke == NULL) return; /* logged by metrics */
  const char *b[] = {"batch"}, *o[] = {"single"}, *r[] = {"retried"}, *f[] = {"final"};
  dm.by_batch = mw_metric_series(del, b);
  dm.by_single = mw_metric_series(del, o);
  dm.batches = mw_metric_series(bat, NULL);
  dm.key_retried = mw_metric_series(ke, r);
  dm.key_final = mw_metric_series(ke, f);
  dm.ok = dm.by_batch && dm.by_single && dm.batches && dm.key_retried && dm.key_final;
}

static void dm_add(mw_metric_t *m, uint64_t n) {
  if (dm.ok && n > 0) mw_counter_add(m, n);
}

/* ------------------------------------------------------------ helpers */

static s3_t *s3_of(const mw_storage_t *st) { return st->be_state; }
static mw_storage_req_s3_t *area(mw_storage_req_t *req) { return &req->be.s3; }

static bool unreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.' || c == '~';
}

/* Percent-encode s (keeping '/' when path) onto b. */
static int enc(mw_buf_t *b, const char *s, bool path) {
  static const char hx[] = "0123456789ABCDEF";
  int rc = 0;
  for (; rc == 0 && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (unreserved(c) || (path && c == '/')) {
      rc = mw_buf_append(b, s, 1);
    } else {
      char e[3] = {'%', hx[c >> 4], hx[c & 15]};
      rc = mw_buf_append(b, e, 3);
    }
  }
  return rc;
}

static int append_str(mw_buf_t *b, const char *s) { return mw_buf_append(b, s, strlen(s)); }

/* The object name of key k (prefix/k, or k without a prefix). */
static int object_name(const s3_t *s, const char *k, mw_buf_t *out) {
  int rc = 0;
  if (s->prefix[0]) {
    rc = append_str(out, s->prefix);
    if (rc == 0) rc = mw_buf_append(out, "/", 1);
  }
  if (rc == 0) rc = append_str(out, k);
  return rc;
}

static uint64_t jitter(s3_t *s, uint64_t max) {
  s->seed = s->seed * 6364136223846793005ull + 1442695040888963407ull;
  return max == 0 ? 0 : (s->seed >> 33) % (max + 1);
}

/* Next <tag>value</tag> in [*p, end): value bounds; *p moves past it. */
static bool xml_next(const char **p, const char *end, const char *tag, const char **v,
                     size_t *n) {
  char open[64], close[66];
  int lo = snprintf(open, sizeof open, "<%s>", tag);
  int lc = snprintf(close, sizeof close, "</%s>", tag);
  assert(lo > 0 && lc > 0 && (size_t)lc < sizeof close);
  const char *a = memmem(*p, (size_t)(end - *p), open, (size_t)lo);
  if (a == NULL) return false;
  a += lo;
  const char *z = memmem(a, (size_t)(end - a), close, (size_t)lc);
  if (z == NULL) return false;
  *v = a;
  *n = (size_t)(z - a);
  *p = z + lc;
  return true;
}

/* XML text -> out (entities decoded, NUL-terminated); -1 when it does not
 * fit or an entity is unknown. */
static int xml_text(const char *v, size_t n, char *out, size_t cap) {
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    char c = v[i];
    if (c == '&') {
      static const struct { const char *e; char c; } ents[] = {
          {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
      bool hit = false;
      for (size_t k = 0; k < 5 && !hit; k++) {
        size_t el = strlen(ents[k].e);
        if (n - i >= el && memcmp(v + i, ents[k].e, el) == 0) {
          c = ents[k].c;
          i += el - 1;
          hit = true;
        }
      }
      if (!hit && n - i > 3 && v[i + 1] == '#') { /* &#NN; or &#xNN; (ASCII only) */
        char *endp = NULL;
        bool hex = v[i + 2] == 'x';
        long x = strtol(v + i + (hex ? 3 : 2), &endp, hex ? 16 : 10);
        if (endp == NULL || endp >= v + n || *endp != ';' || x <= 0 || x > 127) return -1;
        c = (char)x;
        i = (size_t)(endp - v);
        hit = true;
      }
      if (!hit) return -1;
    }
    if (o + 1 >= cap) return -1;
    out[o++] = c;
  }
  out[o] = '\0';
  return (int)o;
}

/* "2026-12-01T22:40:53.608Z" -> Unix seconds, or -1. */
static int64_t iso8601(const char *v) {
  struct tm tm;
  memset(&tm, 0, sizeof tm);
  if (sscanf(v, "%d-%d-%dT%d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
             &tm.tm_min, &tm.tm_sec) != 6)
    return -1;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return (int64_t)timegm(&tm);
}

/* ------------------------------------------------------------ reasons */

static const char *method_of(const mw_storage_req_t *req) {
  switch (req->be.s3.phase) {
    case P_PUT: case P_MP_PART: return "PUT";
    case P_MP_INIT: case P_MP_DONE: case P_DEL_BATCH: return "POST";
    case P_GET: case P_PIA_CHECK: case P_LIST: case P_UPLOADS: case P_PROBE: return "GET";
    case P_GET_SIZE: case P_HEAD: return "HEAD";
    default: return "DELETE";
  }
}

/* The S3 error code and message of an error document, or "". */
static void error_code(const mw_storage_req_s3_t *a, char *code, size_t ccap, char *msg,
                       size_t mcap) {
  code[0] = msg[0] = '\0';
  const char *p = (const char *)a->resp.data, *end = p + a->resp.len, *v;
  size_t n;
  if (p == NULL) return;
  const char *q = p;
  if (xml_next(&q, end, "Code", &v, &n) && xml_text(v, n, code, ccap) < 0) code[0] = '\0';
  q = p;
  if (xml_next(&q, end, "Message", &v, &n) && xml_text(v, n, msg, mcap) < 0) msg[0] = '\0';
}

/* The key an exchange is about (a key of a prefix operation, or the
 * request's). */
static const char *exchange_key(const mw_storage_req_t *req) {
  const task_t *t = req->be.s3.task;
  if (t != NULL && req->be.s3.phase == P_DEL_EACH) return (const char *)req->buf.data + t->off;
  if (t != NULL && req->be.s3.phase == P_DEL_BATCH && t->nbatch > 0)
    return (const char *)t->batch.data; /* the batch's first key */
  if (t != NULL && req->be.s3.phase == P_ABORT_EACH) return (const char *)t->uploads.data + t->off;
  return req->priv.key;
}

/* The reason of a failed exchange: "s3://BUCKET/PREFIX/KEY: METHOD HTTP
 * 503 SlowDown: message; what (N attempts, request id R)". */
static void set_reason(s3_t *s, mw_storage_req_t *req, const char *what) {
  mw_storage_req_s3_t *a = area(req);
  char code[64], msg[160], head[96] = "";
  error_code(a, code, sizeof code, msg, sizeof msg);
  int n = 0;
  if (a->http_status >= 300) n = snprintf(head, sizeof head, " HTTP %d", a->http_status);
  if (code[0] && n >= 0 && (size_t)n < sizeof head)
    snprintf(head + n, sizeof head - (size_t)n, " %s", code);
  const char *key = exchange_key(req);
  bool raw = a->phase == P_ABORT_EACH; /* an object name already */
  mw_storage__set_error(req, "s3://%s/%s%s%s: %s%s%s%s%s%s (%u attempt%s%s%s)", s->bucket,
                        raw ? "" : s->prefix, !raw && s->prefix[0] ? "/" : "", key, method_of(req),
                        head, msg[0] ? ": " : "", msg, what ? "; " : "", what ? what : "",
                        a->attempts, a->attempts == 1 ? "" : "s",
                        a->request_id[0] ? ", request id " : "", a->request_id);
}

/* HTTP status (non-retryable) -> -errno. */
static int status_errno(int http, const char *code) {
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

static int curl_errno(int cc) {
  switch (cc) {
    case CURLE_COULDNT_RESOLVE_HOST: case CURLE_COULDNT_RESOLVE_PROXY: return -EHOSTUNREACH;
    case CURLE_COULDNT_CONNECT: return -ECONNREFUSED;
    case CURLE_OPERATION_TIMEDOUT: return -ETIMEDOUT;
    case CURLE_SSL_CONNECT_ERROR: case CURLE_PEER_FAILED_VERIFICATION: return -EPROTO;
    case CURLE_OUT_OF_MEMORY: return -ENOMEM;
    default: return -ECONNRESET;
  }
}

static bool transient_curl(int cc) {
  switch (cc) {
    case CURLE_COULDNT_RESOLVE_HOST: case CURLE_COULDNT_CONNECT: case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR: case CURLE_RECV_ERROR: case CURLE_GOT_NOTHING: case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR: case CURLE_HTTP2: case CURLE_HTTP2_STREAM:
      return true;
    default: return false;
  }
}

static bool transient_errno(int e) { return e == -ECONNRESET || e == -ETIMEDOUT || e == -EAGAIN; }

/* ------------------------------------------------------------ loop glue */

static void check_done(s3_t *s);

/* Every handle of the backend ends here; the last one finishes a close. */
static void handle_gone(s3_t *s) {
  assert(s->open_handles > 0);
  if (--s->open_handles > 0 || s->close_done == NULL) return;
  void (*done)(mw_storage_t *) = s->close_done;
  mw_storage_t *st = s->st;
  free(s);
  st->be_state = NULL;
  done(st);
}

static void sock_closed(uv_handle_t *h) {
  sock_t *k = h->data;
  s3_t *s = k->s;
  free(k);
  handle_gone(s);
}

static void sock_forget(s3_t *s, sock_t *k) {
  for (sock_t **pp = &s->socks; *pp != NULL; pp = &(*pp)->next)
    if (*pp == k) {
      *pp = k->next;
      break;
    }
  uv_poll_stop(&k->poll);
  uv_close((uv_handle_t *)&k->poll, sock_closed);
}

static void on_poll(uv_poll_t *h, int status, int events) {
  sock_t *k = h->data;
  int flags = 0;
  if (status < 0) flags |= CURL_CSELECT_ERR;
  if (events & UV_READABLE) flags |= CURL_CSELECT_IN;
  if (events & UV_WRITABLE) flags |= CURL_CSELECT_OUT;
  int running = 0;
  s3_t *s = k->s;
  curl_multi_socket_action(s->multi, k->fd, flags, &running);
  check_done(s);
}

static int on_socket(CURL *e, curl_socket_t fd, int what, void *userp, void *socketp) {
  (void)e;
  s3_t *s = userp;
  sock_t *k = socketp;
  if (what == CURL_POLL_REMOVE) {
    if (k != NULL) {
      curl_multi_assign(s->multi, fd, NULL);
      sock_forget(s, k);
    }
    return 0;
  }
  if (k == NULL) {
    k = calloc(1, sizeof *k);
    if (k == NULL) return -1;
    k->s = s;
    k->fd = fd;
    if (uv_poll_init_socket(s->st->loop, &k->poll, fd) < 0) {
      free(k);
      return -1;
    }
    k->poll.data = k;
    uv_unref((uv_handle_t *)&k->poll);
    k->next = s->socks;
    s->socks = k;
    s->open_handles++;
    curl_multi_assign(s->multi, fd, k);
  }
  int ev = ((what & CURL_POLL_IN) ? UV_READABLE : 0) | ((what & CURL_POLL_OUT) ? UV_WRITABLE : 0);
  uv_poll_start(&k->poll, ev, on_poll);
  return 0;
}

static void on_curl_timer(uv_timer_t *t) {
  s3_t *s = t->data;
  int running = 0;
  curl_multi_socket_action(s->multi, CURL_SOCKET_TIMEOUT, 0, &running);
  check_done(s);
}

static int on_timer(CURLM *m, long timeout_ms, void *userp) {
  (void)m;
  s3_t *s = userp;
  if (timeout_ms < 0) uv_timer_stop(&s->timer);
  else uv_timer_start(&s->timer, on_curl_timer, (uint64_t)timeout_ms, 0);
  return 0;
}

static void keep_on(s3_t *s) {
  if (s->active++ == 0) uv_ref((uv_handle_t *)&s->keep);
}

static void keep_off(s3_t *s) {
  assert(s->active > 0);
  if (--s->active == 0) uv_unref((uv_handle_t *)&s->keep);
}

/* ------------------------------------------------------------ backoff */

static void on_backoff(uv_timer_t *t);

static void rearm(s3_t *s) {
  uint64_t now = uv_now(s->st->loop), due = UINT64_MAX;
  for (mw_storage_req_t *r = s->waits; r != NULL; r = r->be.s3.wait_next)
    if (r->be.s3.wait_due_ms < due) due = r->be.s3.wait_due_ms;
  if (due == UINT64_MAX) uv_timer_stop(&s->backoff);
  else uv_timer_start(&s->backoff, on_backoff, due > now ? due - now : 0, 0);
}

static void on_backoff(uv_timer_t *t) {
  s3_t *s = t->data;
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
    if (r->be.s3.phase == P_FAIL) finish(s, r, r->be.s3.curl_code);
    else if (r->be.s3.attempts == 0) next_exchange(s, r, r->be.s3.phase); /* just submitted */
    else attempt_start(s, r);
  }
  rearm(s);
}

/* ------------------------------------------------------------ exchanges */

typedef struct spec {
  const char *method;       /* "GET", "PUT", "POST", "HEAD", "DELETE" */
  const char *key;          /* relative key; NULL = the bucket itself */
  char query[1600];         /* sorted, encoded k=v&..., "" = none */
  const uint8_t *body;
  size_t body_len;
  bool if_none_match;
  char range[64];           /* "bytes=a-b" or "" */
  bool xml_body;
  const char *content_md5;  /* base64, or NULL */
  bool into_buf;            /* response body into req->buf (get) */
} spec_t;

static size_t on_read(char *out, size_t size, size_t n, void *ud) {
  mw_storage_req_t *req = ud;
  mw_storage_req_s3_t *a = area(req);
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

static int on_seek(void *ud, curl_off_t off, int origin) {
  mw_storage_req_t *req = ud;
  mw_storage_req_s3_t *a = area(req);
  if (origin != SEEK_SET || off < 0 || (size_t)off > a->body_len) return CURL_SEEKFUNC_CANTSEEK;
  a->body_sent = (size_t)off;
  return CURL_SEEKFUNC_OK;
}

static size_t on_write(char *p, size_t size, size_t n, void *ud) {
  mw_storage_req_t *req = ud;
  mw_storage_req_s3_t *a = area(req);
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

static size_t on_header(char *p, size_t size, size_t n, void *ud) {
  mw_storage_req_t *req = ud;
  mw_storage_req_s3_t *a = area(req);
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

/* What the current phase sends. */
static int build(s3_t *s, mw_storage_req_t *req, spec_t *sp) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_s3_t *a = area(req);
  task_t *t = a->task;
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
      rc = append_str(&q, "partNumber=");
      char num[16];
      snprintf(num, sizeof num, "%u", t->part);
      if (rc == 0) rc = append_str(&q, num);
      if (rc == 0) rc = append_str(&q, "&uploadId=");
      if (rc == 0) rc = enc(&q, t->upload_id, false);
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
      rc = append_str(&q, "uploadId=");
      if (rc == 0) rc = enc(&q, t->upload_id, false);
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
        rc = append_str(&q, "continuation-token=");
        if (rc == 0) rc = enc(&q, t->token, false);
        if (rc == 0) rc = append_str(&q, "&");
      }
      if (rc == 0) rc = append_str(&q, "list-type=2&");
      if (rc == 0 && a->phase == P_PROBE) rc = append_str(&q, "max-keys=1&");
      if (rc == 0) rc = append_str(&q, "prefix=");
      mw_buf_t name = MW_BUF_INIT;
      if (rc == 0) rc = object_name(s, a->phase == P_PROBE ? "" : p->key, &name);
      if (rc == 0) rc = mw_buf_append(&name, "", 1);
      if (rc == 0) rc = enc(&q, (const char *)name.data, false);
      mw_buf_free(&name);
      break;
    }
    case P_UPLOADS: {
      sp->method = "GET";
      sp->key = NULL;
      if (t->token[0]) {
        rc = append_str(&q, "key-marker=");
        if (rc == 0) rc = enc(&q, t->token, false);
        if (rc == 0) rc = append_str(&q, "&");
      }
      if (rc == 0) rc = append_str(&q, "prefix=");
      mw_buf_t name = MW_BUF_INIT;
      if (rc == 0) rc = object_name(s, p->op == MW_OP_DELETE_ROOT ? "" : p->key, &name);
      if (rc == 0) rc = mw_buf_append(&name, "", 1);
      if (rc == 0) rc = enc(&q, (const char *)name.data, false);
      mw_buf_free(&name);
      if (rc == 0 && t->marker[0]) {
        rc = append_str(&q, "&upload-id-marker=");
        if (rc == 0) rc = enc(&q, t->marker, false);
      }
      if (rc == 0) rc = append_str(&q, "&uploads=");
      break;
    }
    case P_ABORT_EACH: {
      sp->method = "DELETE";
      assert(t->off < t->uploads.len);
      const char *k = (const char *)t->uploads.data + t->off;
      const char *id = k + strlen(k) + 1;
      sp->key = k; /* an object name: the prefix is already in it */
      rc = append_str(&q, "uploadId=");
      if (rc == 0) rc = enc(&q, id, false);
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

static CURL *easy_get(s3_t *s) {
  if (s->npool > 0) {
    CURL *e = s->pool[--s->npool];
    curl_easy_reset(e);
    return e;
  }
  return curl_easy_init();
}

static void easy_put(s3_t *s, CURL *e) {
  if (s->npool < MW_S3_EASY_POOL) s->pool[s->npool++] = e;
  else curl_easy_cleanup(e);
}

/* An attempt that could not be handed to curl (or was failed by a test
 * fault before sending): treat as that transport failure. */
static void attempt_failed_early(s3_t *s, mw_storage_req_t *req, int err);
static void attempt_done(s3_t *s, mw_storage_req_t *req, int cc);

static void attempt_start(s3_t *s, mw_storage_req_t *req) {
  mw_storage_req_s3_t *a = area(req);
  a->attempt++;
  a->attempts++;
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
  int inj = mw_storage__step(req, S3_REQUEST);
  if (inj < 0) return attempt_failed_early(s, req, inj);
  spec_t sp;
  int rc = build(s, req, &sp);
  if (rc < 0) return attempt_failed_early(s, req, rc);
  a->body = sp.body;
  a->body_len = sp.body_len;
  /* URL: base + "/" + encoded object name + "?" + query */
  mw_buf_t url = MW_BUF_INIT;
  rc = append_str(&url, s->base);
  if (rc == 0) rc = mw_buf_append(&url, "/", 1);
  if (rc == 0 && sp.key != NULL) {
    mw_buf_t name = MW_BUF_INIT;
    bool raw = a->phase == P_ABORT_EACH; /* already a full object name */
    rc = raw ? append_str(&name, sp.key) : object_name(s, sp.key, &name);
    if (rc == 0) rc = mw_buf_append(&name, "", 1);
    if (rc == 0) rc = enc(&url, (const char *)name.data, true);
    mw_buf_free(&name);
  }
  if (rc == 0 && sp.query[0]) {
    rc = mw_buf_append(&url, "?", 1);
    if (rc == 0) rc = append_str(&url, sp.query);
  }
  if (rc == 0) rc = mw_buf_append(&url, "", 1);
  if (rc == 0 && url.len > MW_S3_URL_BYTES) rc = -ENAMETOOLONG;
  CURL *e = rc == 0 ? easy_get(s) : NULL;
  if (rc == 0 && e == NULL) rc = -ENOMEM;
  if (rc < 0) {
    mw_buf_free(&url);
    return attempt_failed_early(s, req, rc);
  }
  struct curl_slist *h = NULL;
  h = curl_slist_append(h, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
  if (s->token != NULL) {
    char th[4200];
    snprintf(th, sizeof th, "x-amz-security-token: %s", s->token);
    h = curl_slist_append(h, th);
  }
  if (sp.if_none_match) h = curl_slist_append(h, "If-None-Match: *");
  if (sp.range[0]) {
    char rh[96];
    snprintf(rh, sizeof rh, "Range: %s", sp.range);
    h = curl_slist_append(h, rh);
  }
  if (sp.xml_body) h = curl_slist_append(h, "Content-Type: application/xml");
  if (sp.content_md5 != NULL) {
    char mh[64];
    snprintf(mh, sizeof mh, "Content-MD5: %s", sp.content_md5);
    h = curl_slist_append(h, mh);
  }
  if (strcmp(sp.method, "PUT") == 0) h = curl_slist_append(h, "Content-Type: application/octet-stream");
  a->easy = e;
  a->headers = h;
  curl_easy_setopt(e, CURLOPT_URL, (const char *)url.data);
  mw_buf_free(&url);
  curl_easy_setopt(e, CURLOPT_PRIVATE, req);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_AWS_SIGV4, s->sigv4);
  curl_easy_setopt(e, CURLOPT_USERNAME, s->ak);
  curl_easy_setopt(e, CURLOPT_PASSWORD, s->sk);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                   (long)(s->timeout_ms < MW_S3_CONNECT_TIMEOUT_MS ? s->timeout_ms : MW_S3_CONNECT_TIMEOUT_MS));
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
  if (strcmp(sp.method, "PUT") == 0 || strcmp(sp.method, "POST") == 0) {
    if (strcmp(sp.method, "PUT") == 0) curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
    else curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(e, CURLOPT_READDATA, req);
    curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, on_seek);
    curl_easy_setopt(e, CURLOPT_SEEKDATA, req);
    if (strcmp(sp.method, "PUT") == 0)
      curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)sp.body_len);
    else
      curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)sp.body_len);
  } else if (strcmp(sp.method, "HEAD") == 0) {
    curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
  } else if (strcmp(sp.method, "DELETE") == 0) {
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "DELETE");
  }
  CURLMcode mc = curl_multi_add_handle(s->multi, e);
  if (mc != CURLM_OK) {
    curl_slist_free_all(h);
    a->headers = NULL;
    a->easy = NULL;
    easy_put(s, e);
    return attempt_failed_early(s, req, -ENOMEM);
  }
}

static void check_done(s3_t *s) {
  CURLMsg *msg;
  int left = 0;
  while ((msg = curl_multi_info_read(s->multi, &left)) != NULL) {
    if (msg->msg != CURLMSG_DONE) continue;
    CURL *e = msg->easy_handle;
    int cc = (int)msg->data.result;
    mw_storage_req_t *req = NULL;
    curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&req);
    assert(req != NULL && req->be.s3.easy == e);
    long code = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
    curl_multi_remove_handle(s->multi, e);
    curl_slist_free_all(req->be.s3.headers);
    req->be.s3.headers = NULL;
    req->be.s3.easy = NULL;
    easy_put(s, e);
    req->be.s3.http_status = (int32_t)code;
    req->be.s3.curl_code = cc;
    attempt_done(s, req, cc);
  }
}

/* ------------------------------------------------------------ outcomes */

static void retry_or_fail(s3_t *s, mw_storage_req_t *req, int err, const char *what) {
  mw_storage_req_s3_t *a = area(req);
  uint64_t now = uv_now(s->st->loop);
  uint32_t shift = a->attempt < 7 ? a->attempt - 1 : 6;
  uint64_t backoff = (uint64_t)MW_S3_BACKOFF_MS << shift;
  if (backoff > MW_S3_BACKOFF_MAX_MS) backoff = MW_S3_BACKOFF_MAX_MS;
  backoff = backoff / 2 + jitter(s, backoff / 2);
  if (now + backoff > a->deadline_ms) {
    set_reason(s, req, what);
    return finish(s, req, err);
  }
  int inj = mw_storage__step(req, S3_RETRY);
  if (inj < 0) {
    set_reason(s, req, "retry refused by a test fault");
    return finish(s, req, inj);
  }
  s->st->health.retries++;
  if (a->attempt == 1 || a->attempt % 10 == 0)
    mw_log_info("storage: s3://%s/%s%s%s: %s attempt %u: %s; retrying in %llu ms", s->bucket,
                s->prefix, s->prefix[0] ? "/" : "", exchange_key(req), method_of(req), a->attempt,
                what ? what : strerror(-err), (unsigned long long)backoff);
  a->wait_due_ms = now + backoff;
  a->wait_next = s->waits;
  s->waits = req;
  rearm(s);
}

static void attempt_failed_early(s3_t *s, mw_storage_req_t *req, int err) {
  assert(err < 0);
  if (transient_errno(err)) return retry_or_fail(s, req, err, strerror(-err));
  set_reason(s, req, strerror(-err));
  finish(s, req, err);
}

/* Phase outcomes (HTTP answered 2xx/3xx/4xx non-retryable). */
static void next_exchange(s3_t *s, mw_storage_req_t *req, int phase) {
  mw_storage_req_s3_t *a = area(req);
  a->phase = (uint8_t)phase;
  a->attempt = 0;
  a->deadline_ms = uv_now(s->st->loop) + s->deadline_ms; /* retries bound each exchange */
  attempt_start(s, req);
}

/* Start (or fail) a request from the loop, never inside its submit call. */
static void enqueue_now(s3_t *s, mw_storage_req_t *req) {
  mw_storage_req_s3_t *a = area(req);
  a->wait_due_ms = uv_now(s->st->loop);
  a->wait_next = s->waits;
  s->waits = req;
  rearm(s);
}

static task_t *task_of(mw_storage_req_t *req) {
  mw_storage_req_s3_t *a = area(req);
  if (a->task == NULL) a->task = calloc(1, sizeof(task_t));
  return a->task;
}

/* Keys of one ListObjectsV2 page into req->buf; true when more pages come. */
static int list_page(s3_t *s, mw_storage_req_t *req, bool *more) {
  mw_storage_req_s3_t *a = area(req);
  task_t *t = task_of(req);
  if (t == NULL) return -ENOMEM;
  const char *p = (const char *)a->resp.data, *end = p + a->resp.len, *v;
  size_t n, plen = s->prefix[0] ? strlen(s->prefix) + 1 : 0;
  char key[MW_STORAGE_KEY_MAX_BYTES * 2 + 8];
  const char *q = p;
  while (xml_next(&q, end, "Key", &v, &n)) {
    if (xml_text(v, n, key, sizeof key) < 0) continue;
    if (strlen(key) < plen) continue;
    if (plen > 0 && (memcmp(key, s->prefix, plen - 1) != 0 || key[plen - 1] != '/')) continue;
    const char *k = key + plen;
    if (!mw_storage_key_valid(k)) continue; /* not a key we could name */
    if (t->nkeys >= MW_STORAGE_LIST_MAX_KEYS) return -EOVERFLOW;
    int rc = mw_buf_append(&req->buf, k, strlen(k) + 1);
    if (rc < 0) return rc;
    t->nkeys++;
  }
  q = p;
  *more = xml_next(&q, end, "IsTruncated", &v, &n) && n == 4 && memcmp(v, "true", 4) == 0;
  t->token[0] = '\0';
  q = p;
  if (*more && (!xml_next(&q, end, "NextContinuationToken", &v, &n) ||
                xml_text(v, n, t->token, sizeof t->token) <= 0))
    return -EBADMSG;
  return 0;
}

static int cmp_key(const void *x, const void *y) {
  return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* req->keys over the NUL-separated keys in req->buf, sorted. */
static int index_keys(mw_storage_req_t *req, size_t n) {
  free(req->keys);
  req->keys = NULL;
  req->nkeys = 0;
  if (n == 0) return 0;
  req->keys = malloc(n * sizeof *req->keys);
  if (req->keys == NULL) return -ENOMEM;
  const char *k = (const char *)req->buf.data;
  for (size_t i = 0; i < n; i++) {
    req->keys[i] = k;
    k += strlen(k) + 1;
  }
  assert(k == (const char *)req->buf.data + req->buf.len);
  qsort(req->keys, n, sizeof *req->keys, cmp_key);
  req->nkeys = n;
  return 0;
}

/* One ListMultipartUploads page: uploads old enough into t->uploads. */
static int uploads_page(mw_storage_req_t *req, bool *more) {
  mw_storage_req_s3_t *a = area(req);
  task_t *t = task_of(req);
  if (t == NULL) return -ENOMEM;
  const char *p = (const char *)a->resp.data, *end = p + a->resp.len, *v;
  size_t n;
  int64_t now = (int64_t)time(NULL);
  uint64_t min_age = req->priv.op == MW_OP_DELETE_ROOT ? 0 : req->priv.min_age_s;
  const char *q = p;
  while (xml_next(&q, end, "Upload", &v, &n)) {
    const char *u = v, *uend = v + n, *f;
    size_t fn;
    char key[MW_STORAGE_KEY_MAX_BYTES * 2 + 8], id[512], when[64];
    const char *c = u;
    if (!xml_next(&c, uend, "Key", &f, &fn) || xml_text(f, fn, key, sizeof key) <= 0) continue;
    c = u;
    if (!xml_next(&c, uend, "UploadId", &f, &fn) || xml_text(f, fn, id, sizeof id) <= 0) continue;
    c = u;
    int64_t init = -1;
    if (xml_next(&c, uend, "Initiated", &f, &fn) && xml_text(f, fn, when, sizeof when) > 0)
      init = iso8601(when);
    if (init < 0 || (uint64_t)(now - init) < min_age) continue;
    int rc = mw_buf_append(&t->uploads, key, strlen(key) + 1);
    if (rc == 0) rc = mw_buf_append(&t->uploads, id, strlen(id) + 1);
    if (rc < 0) return rc;
    t->nuploads++;
  }
  q = p;
  *more = xml_next(&q, end, "IsTruncated", &v, &n) && n == 4 && memcmp(v, "true", 4) == 0;
  t->token[0] = t->marker[0] = '\0';
  if (*more) {
    q = p;
    if (!xml_next(&q, end, "NextKeyMarker", &v, &n) || xml_text(v, n, t->token, sizeof t->token) < 0)
      return -EBADMSG;
    q = p;
    if (xml_next(&q, end, "NextUploadIdMarker", &v, &n) &&
        xml_text(v, n, t->marker, sizeof t->marker) < 0)
      return -EBADMSG;
  }
  return 0;
}

/* XML text of s onto b (&, <, >, " and ' as entities). */
static int xml_escape(mw_buf_t *b, const char *s) {
  int rc = 0;
  for (; rc == 0 && *s; s++) {
    const char *e = *s == '&' ? "&amp;" : *s == '<' ? "&lt;" : *s == '>' ? "&gt;"
                  : *s == '"' ? "&quot;" : *s == '\'' ? "&apos;" : NULL;
    rc = e != NULL ? append_str(b, e) : mw_buf_append(b, s, 1);
  }
  return rc;
}

/* The DeleteObjects body of t->batch, and its Content-MD5. */
static int batch_body(s3_t *s, task_t *t) {
  assert(t->nbatch > 0 && t->nbatch <= MW_S3_DELETE_BATCH);
  mw_buf_reset(&t->batch_xml);
  int rc = append_str(&t->batch_xml, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
                                     "<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
                                     "<Quiet>true</Quiet>");
  const char *k = (const char *)t->batch.data;
  for (size_t i = 0; rc == 0 && i < t->nbatch; i++) {
    mw_buf_t name = MW_BUF_INIT;
    rc = object_name(s, k, &name);
    if (rc == 0) rc = mw_buf_append(&name, "", 1);
    if (rc == 0) rc = append_str(&t->batch_xml, "<Object><Key>");
    if (rc == 0) rc = xml_escape(&t->batch_xml, (const char *)name.data);
    if (rc == 0) rc = append_str(&t->batch_xml, "</Key></Object>");
    mw_buf_free(&name);
    k += strlen(k) + 1;
  }
  if (rc == 0) rc = append_str(&t->batch_xml, "</Delete>");
  if (rc == 0) mw_md5_base64(t->batch_xml.data, t->batch_xml.len, t->batch_md5);
  return rc;
}

/* The next (up to) MW_S3_DELETE_BATCH listed keys into t->batch. */
static int batch_fill(s3_t *s, mw_storage_req_t *req) {
  task_t *t = area(req)->task;
  assert(t->i < t->nkeys);
  mw_buf_reset(&t->batch);
  t->nbatch = 0;
  t->batch_i = t->i;
  t->batch_off = t->off;
  int rc = 0;
  while (rc == 0 && t->i < t->nkeys && t->nbatch < MW_S3_DELETE_BATCH) {
    const char *k = (const char *)req->buf.data + t->off;
    size_t n = strlen(k) + 1;
    rc = mw_buf_append(&t->batch, k, n);
    t->off += n;
    t->i++;
    t->nbatch++;
  }
  return rc == 0 ? batch_body(s, t) : rc;
}

static bool transient_key_code(const char *code) {
  return strcmp(code, "InternalError") == 0 || strcmp(code, "SlowDown") == 0 ||
         strcmp(code, "ServiceUnavailable") == 0 || strcmp(code, "RequestTimeout") == 0;
}

/* ---- delete_many: a status per key (priv.statuses, by index) ---- */

#define MANY_PENDING (-EINPROGRESS) /* not known deleted yet */

static bool many(const mw_storage_req_t *req) { return req->priv.op == MW_OP_DELETE_MANY; }

/* The index of relative key k among the request's keys (n <= 1 000). */
static size_t many_index(const mw_storage_req_t *req, const char *k) {
  const mw_storage_req_front_t *p = &req->priv;
  for (size_t i = 0; i < p->nmany; i++)
    if (strcmp(p->many[i], k) == 0) return i;
  return SIZE_MAX;
}

static void many_mark(mw_storage_req_t *req, const char *k, int status) {
  size_t i = many_index(req, k);
  assert(i != SIZE_MAX); /* every batch key is one of ours */
  if (i != SIZE_MAX) req->priv.statuses[i] = status;
}

/* The batch's keys with a test fault armed (storage__key_fault): a transient
 * errno joins the next batch (*again, *retry), another is the key's status. */
static int many_faults(s3_t *s, mw_storage_req_t *req, mw_buf_t *again, size_t *retry) {
  task_t *t = area(req)->task;
  const char *k = (const char *)t->batch.data;
  int rc = 0;
  for (size_t n = 0; rc == 0 && n < t->nbatch; n++, k += strlen(k) + 1) {
    size_t i = many_index(req, k);
    if (i == SIZE_MAX || req->priv.statuses[i] != 0) continue;
    int inj = mw_storage__key_fault(req, i, S3_RESPONSE);
    if (inj == 0) continue;
    if (transient_errno(inj)) {
      req->priv.statuses[i] = MANY_PENDING;
      rc = mw_buf_append(again, k, strlen(k) + 1);
      (*retry)++;
      continue;
    }
    req->priv.statuses[i] = inj;
    mw_storage__set_error(req, "s3://%s/%s%s%s: DeleteObjects: %s (test fault)", s->bucket, s->prefix,
                          s->prefix[0] ? "/" : "", k, strerror(-inj));
  }
  return rc;
}

/* finish(): every key still pending gets `status`; the operation's status is
 * then the first key's failure (index order), req->nkeys the deleted ones. */
static int many_finish(mw_storage_req_t *req, int status) {
  mw_storage_req_front_t *p = &req->priv;
  int first = 0;
  req->nkeys = 0;
  for (size_t i = 0; i < p->nmany; i++) {
    if (p->statuses[i] == MANY_PENDING) p->statuses[i] = status < 0 ? status : -EIO;
    if (p->statuses[i] == 0) req->nkeys++;
    else if (first == 0) first = p->statuses[i];
  }
  assert(status >= 0 || first < 0);
  return first;
}

/* A DeleteObjects answer (2xx): every <Error> in it. Keys with a transient
 * code become the next batch (*retry = how many); the first other failure
 * is *final (-errno, reason set). NoSuchKey counts as deleted. */
static int batch_answer(s3_t *s, mw_storage_req_t *req, size_t *retry, int *final) {
  mw_storage_req_s3_t *a = area(req);
  task_t *t = a->task;
  const char *p = (const char *)a->resp.data, *end = p + a->resp.len, *v;
  size_t n, plen = s->prefix[0] ? strlen(s->prefix) + 1 : 0, failed = 0;
  *retry = 0;
  *final = 0;
  if (p == NULL || memmem(p, a->resp.len, "DeleteResult", 12) == NULL) return -EBADMSG;
  mw_buf_t again = MW_BUF_INIT;
  int rc = 0;
  if (many(req)) { /* each key of the batch is deleted unless the answer says otherwise */
    const char *k = (const char *)t->batch.data;
    for (size_t i = 0; i < t->nbatch; i++, k += strlen(k) + 1) many_mark(req, k, 0);
  }
  const char *q = p;
  while (rc == 0 && xml_next(&q, end, "Error", &v, &n)) {
    char key[MW_STORAGE_KEY_MAX_BYTES * 2 + 8], code[64] = "", msg[160] = "";
    const char *c = v, *f;
    size_t fn;
    if (!xml_next(&c, v + n, "Key", &f, &fn) || xml_text(f, fn, key, sizeof key) <= 0 ||
        strlen(key) < plen) {
      rc = -EBADMSG;
      break;
    }
    c = v;
    if (xml_next(&c, v + n, "Code", &f, &fn) && xml_text(f, fn, code, sizeof code) < 0) code[0] = 0;
    c = v;
    if (xml_next(&c, v + n, "Message", &f, &fn) && xml_text(f, fn, msg, sizeof msg) < 0) msg[0] = 0;
    if (strcmp(code, "NoSuchKey") == 0) continue; /* gone already: deleted */
    failed++;
    if (transient_key_code(code)) {
      rc = mw_buf_append(&again, key + plen, strlen(key + plen) + 1);
      if (many(req)) many_mark(req, key + plen, MANY_PENDING);
      (*retry)++;
      continue;
    }
    int kerr = strcmp(code, "AccessDenied") == 0 ? -EACCES : -EIO;
    if (many(req)) { /* that key fails; the request goes on */
      many_mark(req, key + plen, kerr);
      mw_storage__set_error(req, "s3://%s/%s: DeleteObjects: %s%s%s (%u attempt%s)", s->bucket, key,
                            code[0] ? code : "error", msg[0] ? ": " : "", msg, a->attempts,
                            a->attempts == 1 ? "" : "s");
      continue;
    }
    if (*final == 0) {
      *final = kerr;
      mw_storage__set_error(req, "s3://%s/%s: DeleteObjects: %s%s%s (key %zu of %zu in the "
                            "request; %u attempt%s)", s->bucket, key, code[0] ? code : "error",
                            msg[0] ? ": " : "", msg, failed, t->nbatch, a->attempts,
                            a->attempts == 1 ? "" : "s");
    }
  }
  if (rc == 0 && failed > t->nbatch) rc = -EBADMSG;
  size_t faulted = 0;
  if (rc == 0 && many(req)) rc = many_faults(s, req, &again, &faulted);
  *retry += faulted;
  if (rc == 0) {
    t->removed += t->nbatch - failed;
    dm_add(dm.by_batch, t->nbatch - failed);
    dm_add(dm.key_retried, *retry);
    dm_add(dm.key_final, failed - *retry);
  }
  if (rc == 0 && *retry > 0 && *final == 0) { /* the failed keys are the next batch */
    mw_buf_free(&t->batch);
    t->batch = again;
    t->nbatch = *retry;
    return batch_body(s, t);
  }
  mw_buf_free(&again);
  return rc;
}

/* After the listing, or a batch done: the next batch, or the end. */
static void delete_next(s3_t *s, mw_storage_req_t *req) {
  task_t *t = area(req)->task;
  if (t->i >= t->nkeys) return finish(s, req, 0);
  if (s->no_batch_delete) return next_exchange(s, req, P_DEL_EACH);
  int rc = batch_fill(s, req);
  if (rc < 0) {
    set_reason(s, req, strerror(-rc));
    return finish(s, req, rc);
  }
  next_exchange(s, req, P_DEL_BATCH);
}

static void multipart_next(s3_t *s, mw_storage_req_t *req) {
  task_t *t = area(req)->task;
  if (t->part < t->nparts) {
    t->part++;
    return next_exchange(s, req, P_MP_PART);
  }
  int rc = mw_buf_append(&t->parts_xml, "</CompleteMultipartUpload>", 26);
  if (rc < 0) {
    t->saved = rc;
    return next_exchange(s, req, P_MP_ABORT);
  }
  next_exchange(s, req, P_MP_DONE);
}

/* A successful answer (2xx), or a final 4xx the phase may accept. */
static void phase_answer(s3_t *s, mw_storage_req_t *req) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_s3_t *a = area(req);
  int http = a->http_status;
  char code[64], msg[8];
  error_code(a, code, sizeof code, msg, sizeof msg);
  bool ok = http >= 200 && http < 300;
  task_t *t = a->task;
  int rc = 0;
  bool more = false;
  switch (a->phase) {
    case P_PUT:
      if (ok) return finish(s, req, 0);
      if (p->op == MW_OP_PUT_IF_ABSENT && (http == 412 || http == 409)) {
        /* an earlier attempt of ours may be what is there now */
        if (a->ambiguous) return next_exchange(s, req, P_PIA_CHECK);
        return finish(s, req, -EEXIST);
      }
      break;
    case P_PIA_CHECK:
      if (ok || (a->too_big && http >= 200 && http < 300)) {
        bool ours = !a->too_big && a->resp.len == p->len &&
                    (p->len == 0 || memcmp(a->resp.data, p->src, p->len) == 0);
        if (ours) mw_log_notice("storage: s3://%s/%s%s%s: a retried create had landed (the same "
                                "bytes are there); reported as created", s->bucket, s->prefix,
                                s->prefix[0] ? "/" : "", p->key);
        return finish(s, req, ours ? 0 : -EEXIST);
      }
      if (http == 404 && a->rechecks++ < MW_S3_PIA_RECHECKS)
        return next_exchange(s, req, P_PUT); /* gone again: create anew */
      break;
    case P_MP_INIT:
      if (ok) {
        const char *q = (const char *)a->resp.data, *v;
        size_t n;
        if (q == NULL || !xml_next(&q, q + a->resp.len, "UploadId", &v, &n) ||
            xml_text(v, n, t->upload_id, sizeof t->upload_id) <= 0) {
          set_reason(s, req, "InitiateMultipartUpload answered without an UploadId");
          return finish(s, req, -EBADMSG);
        }
        t->nparts = (uint32_t)((p->len + s->part_bytes - 1) / s->part_bytes);
        assert(t->nparts >= 2 && t->nparts <= MW_S3_MAX_PARTS);
        t->part = 0;
        rc = append_str(&t->parts_xml, "<CompleteMultipartUpload>");
        if (rc < 0) return finish(s, req, rc);
        return multipart_next(s, req);
      }
      break;
    case P_MP_PART:
      if (ok && a->etag[0]) {
        char part[160];
        snprintf(part, sizeof part, "<Part><PartNumber>%u</PartNumber><ETag>%s</ETag></Part>",
                 t->part, a->etag);
        if ((rc = append_str(&t->parts_xml, part)) < 0) {
          t->saved = rc;
          return next_exchange(s, req, P_MP_ABORT);
        }
        return multipart_next(s, req);
      }
      if (ok) rc = -EBADMSG;
      break;
    case P_MP_DONE:
      /* a 200 may still carry an <Error> document (AWS) */
      if (ok && (a->resp.data == NULL || memmem(a->resp.data, a->resp.len, "<Error>", 7) == NULL))
        return finish(s, req, 0);
      if (http == 404 && strcmp(code, "NoSuchUpload") == 0 && a->ambiguous) {
        /* our earlier complete went through and only its answer was lost */
        return finish(s, req, 0);
      }
      break;
    case P_MP_ABORT: {
      /* the abort's own outcome does not change what the put reports */
      int saved = t->saved < 0 ? t->saved : -EIO;
      return finish(s, req, saved);
    }
    case P_GET:
      if (a->too_big) {
        set_reason(s, req, "object larger than max_object_bytes");
        return finish(s, req, -EFBIG);
      }
      if (ok) {
        req->size = a->range_total != UINT64_MAX ? a->range_total : req->buf.len;
        return finish(s, req, 0);
      }
      if (http == 416) return next_exchange(s, req, P_GET_SIZE);
      if (http == 404) return finish(s, req, -ENOENT);
      break;
    case P_GET_SIZE: /* a 416, or a range of 0 bytes: only the size is needed */
      if (ok && a->content_length != UINT64_MAX) {
        req->size = a->content_length;
        mw_buf_reset(&req->buf);
        if (p->off <= req->size) return finish(s, req, 0);
        char why[96];
        snprintf(why, sizeof why, "offset %llu is past the end (%llu bytes)",
                 (unsigned long long)p->off, (unsigned long long)req->size);
        set_reason(s, req, why);
        return finish(s, req, -EINVAL);
      }
      if (http == 404) return finish(s, req, -ENOENT);
      break;
    case P_HEAD:
      if (ok && a->content_length != UINT64_MAX) {
        req->size = a->content_length;
        return finish(s, req, 0);
      }
      if (http == 404) return finish(s, req, -ENOENT);
      break;
    case P_DELETE:
      if (ok || (http == 404 && strcmp(code, "NoSuchBucket") != 0)) return finish(s, req, 0);
      break;
    case P_LIST:
      if (ok) {
        if ((rc = list_page(s, req, &more)) < 0) break;
        if (more) return next_exchange(s, req, P_LIST);
        if (p->op == MW_OP_DELETE_PREFIX) {
          t->i = t->off = 0;
          return delete_next(s, req);
        }
        rc = index_keys(req, t->nkeys);
        return finish(s, req, rc);
      }
      break;
    case P_DEL_BATCH:
      if (ok) {
        dm_add(dm.batches, 1);
        size_t retry = 0;
        int final = 0;
        if ((rc = batch_answer(s, req, &retry, &final)) < 0) break;
        if (final < 0) return finish(s, req, final);
        if (retry > 0) {
          char what[96];
          snprintf(what, sizeof what, "%zu key%s answered with a transient error", retry,
                   retry == 1 ? "" : "s");
          return retry_or_fail(s, req, -EAGAIN, what);
        }
        return delete_next(s, req);
      }
      if (http == 501 || http == 405 || (http == 400 && strcmp(code, "NotImplemented") == 0)) {
        /* no DeleteObjects here: the rest one key at a time, from this batch on */
        mw_log_notice("storage: s3://%s: the store refused DeleteObjects (HTTP %d%s%s); deleting "
                      "one key per request", s->bucket, http, code[0] ? " " : "", code);
        s->no_batch_delete = true;
        t->i = t->batch_i;
        t->off = t->batch_off;
        return next_exchange(s, req, P_DEL_EACH);
      }
      break;
    case P_DEL_EACH:
      if (ok || (http == 404 && strcmp(code, "NoSuchBucket") != 0)) {
        if (many(req)) {
          int inj = mw_storage__key_fault(req, t->i, S3_RESPONSE);
          if (inj < 0 && transient_errno(inj)) return retry_or_fail(s, req, inj, "answer lost (test fault)");
          req->priv.statuses[t->i] = inj;
          if (inj < 0)
            mw_storage__set_error(req, "s3://%s/%s: DELETE: %s (test fault)", s->bucket,
                                  (const char *)req->buf.data + t->off, strerror(-inj));
        }
        dm_add(dm.by_single, 1);
        t->removed++;
        t->off += strlen((const char *)req->buf.data + t->off) + 1;
        if (++t->i < t->nkeys) return next_exchange(s, req, P_DEL_EACH);
        return finish(s, req, 0);
      }
      break;
    case P_UPLOADS:
      if (ok) {
        if ((rc = uploads_page(req, &more)) < 0) break;
        if (more) return next_exchange(s, req, P_UPLOADS);
        t->i = t->off = 0;
        if (t->nuploads > 0) return next_exchange(s, req, P_ABORT_EACH);
        if (p->op == MW_OP_DELETE_ROOT) return next_exchange(s, req, P_PROBE);
        return finish(s, req, 0);
      }
      if (http == 501 || (http == 400 && strcmp(code, "NotImplemented") == 0))
        return finish(s, req, 0); /* a store without multipart listings has nothing to sweep */
      break;
    case P_ABORT_EACH:
      if (ok || http == 404) {
        if (ok) t->removed++;
        const char *k = (const char *)t->uploads.data + t->off;
        t->off += strlen(k) + 1;
        t->off += strlen((const char *)t->uploads.data + t->off) + 1;
        if (++t->i < t->nuploads) return next_exchange(s, req, P_ABORT_EACH);
        if (p->op == MW_OP_DELETE_ROOT) return next_exchange(s, req, P_PROBE);
        return finish(s, req, 0);
      }
      break;
    case P_PROBE:
      if (ok) {
        if ((rc = list_page(s, req, &more)) < 0) break;
        if (t->nkeys > 0) {
          char why[MW_STORAGE_KEY_MAX_BYTES + 32];
          snprintf(why, sizeof why, "not empty: %s is an object", (const char *)req->buf.data);
          mw_buf_reset(&req->buf);
          set_reason(s, req, why);
          return finish(s, req, -ENOTEMPTY);
        }
        return finish(s, req, 0);
      }
      break;
    default: assert(!"bad phase");
  }
  if (rc < 0) {
    set_reason(s, req, rc == -EBADMSG ? "malformed answer" : strerror(-rc));
    return finish(s, req, rc);
  }
  /* a final HTTP error */
  int err = status_errno(http, code);
  set_reason(s, req, NULL);
  if (a->phase == P_DEL_EACH && many(req)) { /* that key fails; on to the next */
    req->priv.statuses[t->i] = err;
    t->off += strlen((const char *)req->buf.data + t->off) + 1;
    if (++t->i < t->nkeys) return next_exchange(s, req, P_DEL_EACH);
    return finish(s, req, 0);
  }
  if ((a->phase == P_MP_PART || a->phase == P_MP_DONE) && t != NULL) {
    t->saved = err;
    return next_exchange(s, req, P_MP_ABORT);
  }
  finish(s, req, err);
}

static bool is_create(const mw_storage_req_t *req) {
  uint8_t ph = req->be.s3.phase;
  return ph == P_PUT || ph == P_MP_DONE;
}

static void attempt_done(s3_t *s, mw_storage_req_t *req, int cc) {
  mw_storage_req_s3_t *a = area(req);
  if (a->injected < 0 && cc != CURLE_OK) {
    /* the "body" step cut the body short: S3 applies a PUT only whole
     * (Content-Length), so nothing landed */
    int inj = a->injected;
    if (transient_errno(inj)) return retry_or_fail(s, req, inj, "connection dropped mid-body (test fault)");
    set_reason(s, req, strerror(-inj));
    return finish(s, req, inj);
  }
  if (cc == CURLE_OK) {
    int inj = mw_storage__step(req, S3_RESPONSE);
    if (inj < 0) {
      /* the answer is lost: whatever the exchange did, it did */
      if (is_create(req) && a->http_status >= 200 && a->http_status < 300) a->ambiguous = 1;
      if (transient_errno(inj)) return retry_or_fail(s, req, inj, "answer lost (test fault)");
      set_reason(s, req, strerror(-inj));
      return finish(s, req, inj);
    }
  }
  if (cc != CURLE_OK) {
    if (a->too_big) return phase_answer(s, req);
    /* a create whose body went out whole may have been applied */
    if (is_create(req) && (a->body_sent == a->body_len || a->http_status != 0)) a->ambiguous = 1;
    int err = curl_errno(cc);
    if (transient_curl(cc)) return retry_or_fail(s, req, err, curl_easy_strerror((CURLcode)cc));
    set_reason(s, req, curl_easy_strerror((CURLcode)cc));
    return finish(s, req, err);
  }
  int http = a->http_status;
  if ((http >= 500 && http != 501) || http == 429 || http == 408) { /* 501: never will */
    if (is_create(req)) a->ambiguous = 1; /* a 5xx does not say the write did not happen */
    char what[32];
    snprintf(what, sizeof what, "HTTP %d", http);
    return retry_or_fail(s, req, http == 503 || http == 429 ? -EAGAIN : -EIO, what);
  }
  phase_answer(s, req);
}

/* ------------------------------------------------------------ requests */

static void finish(s3_t *s, mw_storage_req_t *req, int status) {
  mw_storage_req_s3_t *a = area(req);
  task_t *t = a->task;
  assert(a->easy == NULL && a->headers == NULL && a->wait_next == NULL);
  if (status < 0 && (req->priv.op == MW_OP_PUT || req->priv.op == MW_OP_PUT_IF_ABSENT) &&
      status != -EEXIST && a->ambiguous)
    req->priv.maybe_written = 1;
  if (many(req)) status = many_finish(req, status);
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
  keep_off(s);
  mw_storage__done(req, status);
}

/* delete_many: the keys into req->buf ("k\0k\0", as a listing leaves
 * them), all pending, and the first batch (every key: n <= 1 000). */
static int many_start(s3_t *s, mw_storage_req_t *req) {
  mw_storage_req_front_t *p = &req->priv;
  task_t *t = area(req)->task;
  assert(t != NULL && p->nmany > 0 && p->nmany <= MW_S3_DELETE_BATCH);
  _Static_assert(MW_STORAGE_DELETE_MANY_MAX <= MW_S3_DELETE_BATCH, "one DeleteObjects a call");
  mw_buf_reset(&req->buf);
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < p->nmany; i++) {
    p->statuses[i] = MANY_PENDING;
    rc = mw_buf_append(&req->buf, p->many[i], strlen(p->many[i]) + 1);
  }
  t->nkeys = p->nmany;
  t->i = t->off = 0;
  if (rc == 0 && !s->no_batch_delete) rc = batch_fill(s, req);
  return rc;
}

static void s3_submit(mw_storage_t *st, mw_storage_req_t *req) {
  s3_t *s = s3_of(st);
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_s3_t *a = area(req);
  assert(s != NULL && p->st == st && a->easy == NULL);
  keep_on(s);
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
  if ((needs_task && task_of(req) == NULL) || (many(req) && many_start(s, req) < 0)) {
    mw_storage__set_error(req, "s3://%s/%s: out of memory", s->bucket, p->key);
    a->phase = P_FAIL;
    a->curl_code = -ENOMEM;
  } else {
    a->phase = (uint8_t)phase;
  }
  enqueue_now(s, req); /* the exchange starts from the loop (P_FAIL: fails there) */
}

/* ------------------------------------------------------------ open / close */

static void once_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

static const char *env_first(const char *a, const char *b) {
  const char *v = a ? getenv(a) : NULL;
  if (v != NULL && v[0] != '\0') return v;
  v = b ? getenv(b) : NULL;
  return v != NULL && v[0] != '\0' ? v : NULL;
}

static bool env_true(const char *name) {
  const char *v = getenv(name);
  return v != NULL && (strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0 || strcasecmp(v, "yes") == 0);
}

static bool bucket_ok(const char *b, size_t n) {
  if (n < 3 || n > 63) return false;
  for (size_t i = 0; i < n; i++) {
    char c = b[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_'))
      return false;
  }
  return true;
}

static void s3_free(s3_t *s) {
  if (s == NULL) return;
  free(s->bucket);
  free(s->prefix);
  free(s->base);
  free(s->region);
  free(s->ak);
  if (s->sk != NULL) explicit_bzero(s->sk, strlen(s->sk));
  if (s->token != NULL) explicit_bzero(s->token, strlen(s->token));
  free(s->sk);
  free(s->token);
  s->bucket = s->prefix = s->base = s->region = s->ak = s->sk = s->token = NULL;
}

/* s3://BUCKET[/PREFIX] and the settings -> s; reasons never show secrets. */
static int resolve(s3_t *s, const mw_storage_config_t *cfg, const char *uri, mw_err_t *err) {
  const char *b = uri + 5, *slash = strchr(b, '/');
  size_t bn = slash ? (size_t)(slash - b) : strlen(b);
  if (!bucket_ok(b, bn))
    return mw_err_set(err, -EINVAL, "storage: %s: bad bucket name (3-63 of a-z 0-9 . - _)", uri);
  const char *pre = slash ? slash + 1 : "";
  size_t pn = strlen(pre);
  while (pn > 0 && pre[pn - 1] == '/') pn--;
  if ((s->bucket = strndup(b, bn)) == NULL || (s->prefix = strndup(pre, pn)) == NULL)
    return mw_err_set(err, -ENOMEM, "storage: out of memory");
  if (pn > 0 && !mw_storage_key_valid(s->prefix))
    return mw_err_set(err, -EINVAL, "storage: %s: the prefix is not a valid key path", uri);
  const mw_storage_s3_config_t *c = &cfg->s3;
  const char *region = c->region ? c->region : env_first("AWS_REGION", "AWS_DEFAULT_REGION");
  if (region == NULL) region = "us-east-1";
  const char *endpoint = c->endpoint ? c->endpoint : env_first("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL");
  const char *ak = c->access_key_id ? c->access_key_id : env_first("AWS_ACCESS_KEY_ID", NULL);
  const char *sk = c->secret_access_key ? c->secret_access_key : env_first("AWS_SECRET_ACCESS_KEY", NULL);
  const char *tok = c->session_token ? c->session_token : env_first("AWS_SESSION_TOKEN", NULL);
  if (ak == NULL || sk == NULL)
    return mw_err_set(err, -EACCES, "storage: %s: no S3 credentials (set AWS_ACCESS_KEY_ID and "
                      "AWS_SECRET_ACCESS_KEY)", uri);
  if (strlen(region) > 40 || strchr(region, ':') != NULL)
    return mw_err_set(err, -EINVAL, "storage: %s: bad region '%.40s'", uri, region);
  bool allow_http = c->allow_http > 0 || (c->allow_http < 0 && env_true("AWS_ALLOW_HTTP"));
  int path_style = c->path_style >= 0 ? c->path_style : endpoint != NULL;
  char aws[128];
  if (endpoint == NULL) {
    snprintf(aws, sizeof aws, "https://s3.%s.amazonaws.com", region);
    endpoint = aws;
  }
  bool http = strncmp(endpoint, "http://", 7) == 0;
  if (!http && strncmp(endpoint, "https://", 8) != 0)
    return mw_err_set(err, -EINVAL, "storage: %s: endpoint %s is neither http:// nor https://", uri,
                      endpoint);
  if (http && !allow_http)
    return mw_err_set(err, -EPERM, "storage: %s: endpoint %s is plain HTTP; allow it with "
                      "s3_allow_http = true (or AWS_ALLOW_HTTP=true)", uri, endpoint);
  const char *host = endpoint + (http ? 7 : 8);
  size_t hn = strlen(host);
  while (hn > 0 && host[hn - 1] == '/') hn--;
  if (hn == 0 || memchr(host, '/', hn) != NULL)
    return mw_err_set(err, -EINVAL, "storage: %s: endpoint %s must be scheme://host[:port]", uri,
                      endpoint);
  char base[1024];
  int n = path_style ? snprintf(base, sizeof base, "%s%.*s/%s", http ? "http://" : "https://", (int)hn,
                                host, s->bucket)
                     : snprintf(base, sizeof base, "%s%s.%.*s", http ? "http://" : "https://",
                                s->bucket, (int)hn, host);
  if (n < 0 || (size_t)n >= sizeof base) return mw_err_set(err, -ENAMETOOLONG, "storage: endpoint too long");
  snprintf(s->sigv4, sizeof s->sigv4, "aws:amz:%s:s3", region);
  if ((s->base = strdup(base)) == NULL || (s->region = strdup(region)) == NULL ||
      (s->ak = strdup(ak)) == NULL || (s->sk = strdup(sk)) == NULL ||
      (tok != NULL && (s->token = strdup(tok)) == NULL))
    return mw_err_set(err, -ENOMEM, "storage: out of memory");
  s->part_bytes = c->part_bytes ? c->part_bytes : MW_S3_DEFAULT_PART_BYTES;
  if (s->part_bytes < MW_S3_MIN_PART_BYTES) s->part_bytes = MW_S3_MIN_PART_BYTES;
  s->timeout_ms = c->request_timeout_ms ? c->request_timeout_ms : MW_S3_DEFAULT_TIMEOUT_MS;
  s->deadline_ms = c->retry_deadline_ms ? c->retry_deadline_ms : MW_S3_DEFAULT_DEADLINE_MS;
  mw_log_debug("storage: %s: S3 endpoint %.*s%.*s, bucket %s, prefix '%s', region %s, %s-style, "
              "credentials from %s%s", uri, http ? 7 : 8, endpoint, (int)hn, host, s->bucket,
              s->prefix, region, path_style ? "path" : "virtual-host",
              c->access_key_id ? "the configuration" : "the environment",
              tok ? " with a session token" : "");
  return 0;
}

int mw_storage__s3_open(mw_storage_t *st, mw_err_t *err) {
  static pthread_once_t once = PTHREAD_ONCE_INIT, monce = PTHREAD_ONCE_INIT;
  pthread_once(&once, once_init);
  pthread_once(&monce, delete_metrics_register);
  s3_t *s = calloc(1, sizeof *s);
  if (s == NULL) return mw_err_set(err, -ENOMEM, "storage: out of memory");
  s->st = st;
  s->seed = (uint64_t)(uintptr_t)s ^ uv_hrtime();
  int rc = resolve(s, &st->cfg, st->uri, err);
  if (rc == 0 && (s->multi = curl_multi_init()) == NULL)
    rc = mw_err_set(err, -ENOMEM, "storage: curl_multi_init failed");
  if (rc < 0) {
    s3_free(s);
    free(s);
    return rc;
  }
  curl_multi_setopt(s->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
  curl_multi_setopt(s->multi, CURLMOPT_SOCKETDATA, s);
  curl_multi_setopt(s->multi, CURLMOPT_TIMERFUNCTION, on_timer);
  curl_multi_setopt(s->multi, CURLMOPT_TIMERDATA, s);
  curl_multi_setopt(s->multi, CURLMOPT_MAXCONNECTS, (long)st->cfg.max_inflight);
  uv_timer_init(st->loop, &s->timer);
  uv_timer_init(st->loop, &s->backoff);
  uv_async_init(st->loop, &s->keep, NULL);
  s->timer.data = s->backoff.data = s->keep.data = s;
  uv_unref((uv_handle_t *)&s->timer);
  uv_unref((uv_handle_t *)&s->backoff);
  uv_unref((uv_handle_t *)&s->keep);
  s->open_handles = 3;
  st->be_state = s;
  st->be = &mw_storage__s3_ops;
  return 0;
}

static void base_closed(uv_handle_t *h) { handle_gone(h->data); }

static void s3_close(mw_storage_t *st, void (*done)(mw_storage_t *st)) {
  s3_t *s = s3_of(st);
  assert(s != NULL && s->active == 0 && s->waits == NULL);
  s->close_done = done;
  while (s->npool > 0) curl_easy_cleanup(s->pool[--s->npool]);
  curl_multi_cleanup(s->multi); /* closes the cached connections */
  s->multi = NULL;
  while (s->socks != NULL) sock_forget(s, s->socks); /* those curl did not report */
  s3_free(s);
  uv_close((uv_handle_t *)&s->timer, base_closed);
  uv_close((uv_handle_t *)&s->backoff, base_closed);
  uv_close((uv_handle_t *)&s->keep, base_closed);
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
