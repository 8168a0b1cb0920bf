/*
 * s3_int.h — private to the S3 backend's files (backend_s3.c and s3_*.c).
 * Not included anywhere else.
 *
 * The backend is one state machine per request: a request runs one HTTP
 * *exchange* (its `phase`) at a time, each exchange one or more *attempts*
 * (retries). The files split that along its concepts:
 *
 *   backend_s3.c    the backend: the ops table, submit, the phase machine
 *                   (which exchange sends what, what an answer moves the
 *                   request to), finish, open and close
 *   s3_config.c     s3://BUCKET/PREFIX and the settings -> endpoint, base
 *                   URL, credentials, limits
 *   s3_loop.c       curl's multi interface on the libuv loop: sockets,
 *                   timer, the easy-handle pool, the "keep" reference
 *   s3_transfer.c   one attempt on curl: URL, headers, options, and curl's
 *                   read, seek, write and header callbacks
 *   s3_retry.c      an attempt's outcome: retried (backoff, jitter, the wait
 *                   list, the deadline), failed, or handed to the phase
 *   s3_errors.c     error classes: HTTP status and curl code -> -errno,
 *                   what is transient, the reason text of a failure
 *   s3_xml.c        the XML of answers and bodies: scanner, text, escaping
 *   s3_name.c       key encoding: percent-encoding, object names
 *   s3_list.c       ListObjectsV2 pages -> the keys of a listing
 *   s3_sweep.c      ListMultipartUploads pages -> the uploads to abort
 *   s3_delete.c     DeleteObjects batches, per-key results, delete_many
 *   s3_multipart.c  multipart puts: initiate, parts, complete, abort
 *
 * Names: types mw_s3_*_t, functions shared between the files mw_s3__*.
 */
#ifndef MW_STORAGE_S3_INT_H
#define MW_STORAGE_S3_INT_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stdint.h>

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

/* Test steps (fault.h), in mw_s3_step_names' order. */
enum mw_s3_step { S3_REQUEST = 0, S3_BODY, S3_RESPONSE, S3_RETRY, S3_STEPS_ };

/* The exchange a request runs now. */
enum mw_s3_phase {
  P_PUT = 1, P_PIA_CHECK, P_MP_INIT, P_MP_PART, P_MP_DONE, P_MP_ABORT,
  P_GET, P_GET_SIZE, P_HEAD, P_DELETE, P_LIST, P_DEL_EACH, P_DEL_BATCH, P_UPLOADS, P_ABORT_EACH,
  P_PROBE,
  P_FAIL, /* report a_fail (set at submission) from the loop, never inline */
};

typedef struct mw_s3 {
  mw_storage_t *st;
  CURLM *multi;
  uv_timer_t timer;      /* curl's timeout */
  uv_timer_t backoff;    /* the earliest retry of the wait list */
  uv_async_t keep;       /* referenced while requests run */
  uint32_t active;
  int open_handles;      /* handles not yet closed (close waits for 0) */
  void (*close_done)(mw_storage_t *st);
  mw_storage_req_t *waits; /* requests waiting to start or retry, unsorted */
  struct mw_s3_sock *socks; /* curl's sockets we watch (s3_loop.c) */
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
} mw_s3_t;

/* State of operations with several exchanges. */
typedef struct mw_s3_task {
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
} mw_s3_task_t;

/* What one exchange sends (backend_s3.c builds it, s3_transfer.c sends it). */
typedef struct mw_s3_spec {
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
} mw_s3_spec_t;

/* An answer as the phases read it (final: retries are over). */
typedef struct mw_s3_answer {
  int http;                 /* the HTTP status, 0 = none */
  bool ok;                  /* 2xx */
  char code[64];            /* the S3 error code of an error document, or "" */
} mw_s3_answer_t;

/* A phase's answer handler (mw_s3__*_answer) returns MW_S3_MOVED when it
 * moved the request on (the next exchange, a retry, or finish), 0 when it
 * does not accept the answer (a final HTTP error: mw_s3__answer fails the
 * request with it), or a -errno for a malformed answer or a failure. */
#define MW_S3_MOVED 1

/* Relations between the limits (and the fields that hold their counts). */
_Static_assert(MW_S3_MIN_PART_BYTES <= MW_S3_DEFAULT_PART_BYTES, "the default part is a valid part");
_Static_assert(MW_S3_CONNECT_TIMEOUT_MS <= MW_S3_DEFAULT_TIMEOUT_MS,
               "a connect fits in the default attempt");
_Static_assert(MW_S3_DEFAULT_DEADLINE_MS >= MW_S3_BACKOFF_MAX_MS,
               "the default retry deadline allows the longest backoff");
_Static_assert(MW_STORAGE_DELETE_MANY_MAX <= MW_S3_DELETE_BATCH, "delete_many is one DeleteObjects");
_Static_assert(MW_S3_PIA_RECHECKS < UINT8_MAX, "rechecks (uint8_t) counts one past the limit");
_Static_assert(P_FAIL <= UINT8_MAX, "a phase fits the request's uint8_t");
_Static_assert(sizeof(((mw_s3_spec_t *)0)->query) < MW_S3_URL_BYTES, "a query fits in a URL");
_Static_assert(MW_S3_MAX_PARTS <= UINT32_MAX / 2, "part numbers fit the task's uint32_t");

static inline mw_s3_t *mw_s3(const mw_storage_t *st) { return st->be_state; }
static inline mw_storage_req_s3_t *mw_s3_req(mw_storage_req_t *req) { return &req->be.s3; }

/* backend_s3.c: the phase machine */
/* What the current phase sends. */
int mw_s3__build(mw_s3_t *s, mw_storage_req_t *req, mw_s3_spec_t *sp);
/* A successful answer (2xx), or a final 4xx the phase may accept. */
void mw_s3__answer(mw_s3_t *s, mw_storage_req_t *req);
/* Start exchange `phase` of req (its retries get a fresh deadline). */
void mw_s3__next_exchange(mw_s3_t *s, mw_storage_req_t *req, int phase);
/* Report req done with status (once; no attempt may be running). */
void mw_s3__finish(mw_s3_t *s, mw_storage_req_t *req, int status);
/* For answer handlers: finish, or start the next exchange; MW_S3_MOVED. */
static inline int mw_s3__end(mw_s3_t *s, mw_storage_req_t *req, int status) {
  mw_s3__finish(s, req, status);
  return MW_S3_MOVED;
}
static inline int mw_s3__go(mw_s3_t *s, mw_storage_req_t *req, int phase) {
  mw_s3__next_exchange(s, req, phase);
  return MW_S3_MOVED;
}
/* req's task, allocated on first use (NULL: out of memory). */
mw_s3_task_t *mw_s3__task(mw_storage_req_t *req);

/* s3_config.c */
/* s3://BUCKET[/PREFIX] and the settings -> s; reasons never show secrets. */
int mw_s3__config_resolve(mw_s3_t *s, const mw_storage_config_t *cfg, const char *uri,
                          mw_err_t *err);
/* Free (and wipe the secrets of) what config_resolve set. */
void mw_s3__config_free(mw_s3_t *s);

/* s3_loop.c */
/* The multi handle and the loop handles of s (which are unreferenced). */
int mw_s3__loop_open(mw_s3_t *s, mw_err_t *err);
/* Close them all; done(st) when the last is closed, after s is freed. */
void mw_s3__loop_close(mw_s3_t *s, void (*done)(mw_storage_t *st));
/* A request starts / ends: the loop is kept alive while any runs. */
void mw_s3__keep_on(mw_s3_t *s);
void mw_s3__keep_off(mw_s3_t *s);
/* An easy handle from the pool (reset) or a new one (NULL: no memory); back. */
CURL *mw_s3__easy_get(mw_s3_t *s);
void mw_s3__easy_put(mw_s3_t *s, CURL *e);

/* s3_transfer.c */
/* Run the next attempt of req's exchange (or fail it early). */
void mw_s3__attempt_start(mw_s3_t *s, mw_storage_req_t *req);

/* s3_retry.c */
/* The attempt is over (cc = its CURLcode, the HTTP status is in req). */
void mw_s3__attempt_done(mw_s3_t *s, mw_storage_req_t *req, int cc);
/* An attempt that could not be handed to curl (or was failed by a test
 * fault before sending): treat as that transport failure. */
void mw_s3__attempt_failed_early(mw_s3_t *s, mw_storage_req_t *req, int err);
/* Retry the exchange after a backoff, or fail with err once past its deadline. */
void mw_s3__retry_or_fail(mw_s3_t *s, mw_storage_req_t *req, int err, const char *what);
/* Start (or fail) a request from the loop, never inside its submit call. */
void mw_s3__enqueue(mw_s3_t *s, mw_storage_req_t *req);

/* s3_errors.c */
const char *mw_s3__method(const mw_storage_req_t *req);
/* The S3 error code and message of an error document, or "". */
void mw_s3__error_code(const mw_storage_req_s3_t *a, char *code, size_t ccap, char *msg,
                       size_t mcap);
/* The key an exchange is about (a key of a prefix operation, or the request's). */
const char *mw_s3__exchange_key(const mw_storage_req_t *req);
/* The reason of a failed exchange: "s3://BUCKET/PREFIX/KEY: METHOD HTTP
 * 503 SlowDown: message; what (N attempts, request id R)". */
void mw_s3__set_reason(mw_s3_t *s, mw_storage_req_t *req, const char *what);
/* HTTP status (non-retryable) -> -errno. */
int mw_s3__status_errno(int http, const char *code);
int mw_s3__curl_errno(int cc);
bool mw_s3__transient_curl(int cc);
bool mw_s3__transient_errno(int e);
/* A per-key error code of DeleteObjects worth sending that key again. */
bool mw_s3__transient_key_code(const char *code);

/* s3_xml.c */
/* Next <tag>value</tag> in [*p, end): value bounds; *p moves past it. */
bool mw_s3__xml_next(const char **p, const char *end, const char *tag, const char **v,
                     size_t *n);
/* XML text -> out (entities decoded, NUL-terminated); -1 when it does not
 * fit or an entity is unknown. */
int mw_s3__xml_text(const char *v, size_t n, char *out, size_t cap);
/* XML text of s onto b (&, <, >, " and ' as entities). */
int mw_s3__xml_escape(mw_buf_t *b, const char *s);
/* "2026-12-01T22:40:53.608Z" -> Unix seconds, or -1. */
int64_t mw_s3__iso8601(const char *v);

/* s3_name.c */
/* Percent-encode s (keeping '/' when path) onto b. */
int mw_s3__encode(mw_buf_t *b, const char *s, bool path);
int mw_s3__append(mw_buf_t *b, const char *s);
/* The object name of key k (prefix/k, or k without a prefix). */
int mw_s3__object_name(const mw_s3_t *s, const char *k, mw_buf_t *out);
/* The object name of k (k itself when raw: an object name already),
 * percent-encoded onto out (keeping '/' when path). */
int mw_s3__encode_name(const mw_s3_t *s, const char *k, bool raw, bool path, mw_buf_t *out);
/* Onto a query: k_eq ("k=", "&k=") and v percent-encoded. */
int mw_s3__query_add(mw_buf_t *q, const char *k_eq, const char *v);

/* Each concept's phases: what they send (mw_s3__*_build: the spec, and the
 * query onto q unless set in sp->query), and their answers. */

/* s3_list.c: P_LIST, P_PROBE */
int mw_s3__list_build(mw_s3_t *s, mw_storage_req_t *req, mw_s3_spec_t *sp, mw_buf_t *q);
int mw_s3__list_answer(mw_s3_t *s, mw_storage_req_t *req, const mw_s3_answer_t *an);

/* s3_sweep.c: P_UPLOADS, P_ABORT_EACH */
int mw_s3__sweep_build(mw_s3_t *s, mw_storage_req_t *req, mw_s3_spec_t *sp, mw_buf_t *q);
int mw_s3__sweep_answer(mw_s3_t *s, mw_storage_req_t *req, const mw_s3_answer_t *an);

/* s3_multipart.c: P_MP_INIT, P_MP_PART, P_MP_DONE, P_MP_ABORT */
int mw_s3__multipart_build(mw_s3_t *s, mw_storage_req_t *req, mw_s3_spec_t *sp, mw_buf_t *q);
int mw_s3__multipart_answer(mw_s3_t *s, mw_storage_req_t *req, const mw_s3_answer_t *an);
/* A part or the completion refused with err: abort the upload, report err. */
void mw_s3__multipart_refused(mw_s3_t *s, mw_storage_req_t *req, int err);

/* s3_delete.c: P_DEL_BATCH, P_DEL_EACH */
/* memwald_storage_s3_* deletion metrics (once per process). */
void mw_s3__delete_metrics_init(void);
int mw_s3__delete_build(mw_storage_req_t *req, mw_s3_spec_t *sp);
int mw_s3__delete_answer(mw_s3_t *s, mw_storage_req_t *req, const mw_s3_answer_t *an);
/* delete_many's DELETE of one key refused with err: that key fails, the
 * next goes out. */
void mw_s3__delete_each_refused(mw_s3_t *s, mw_storage_req_t *req, int err);
/* After the listing, or a batch done: the next batch, or the end. */
void mw_s3__delete_next(mw_s3_t *s, mw_storage_req_t *req);
/* delete_many: a status per key (priv.statuses, by index). */
bool mw_s3__many(const mw_storage_req_t *req);
/* finish(): every key still pending gets `status`; the operation's status is
 * then the first key's failure (index order), req->nkeys the deleted ones. */
int mw_s3__many_finish(mw_storage_req_t *req, int status);
/* delete_many: the keys into req->buf, all pending, and the first batch. */
int mw_s3__many_start(mw_s3_t *s, mw_storage_req_t *req);

#endif
