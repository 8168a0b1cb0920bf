/*
 * storage.h — object-store-shaped storage on the libuv loop.
 *
 * Owns: one root (a local directory or an S3 bucket prefix, named by a URI)
 * and every object below it. Objects are whole byte strings named by keys
 * relative to the root ("_mem_wal/<uuid>/wal/0100…0.arrow"). There is no
 * append and no partial write: put_if_absent() and put() make a whole object
 * visible at once or not at all. Backends: a local disk (io_uring, or the
 * libuv thread pool) and S3. docs/storage.md has each backend's exact
 * sequence of steps per operation and its durability argument.
 *
 * Model (libuv style): a request is a caller-embedded mw_storage_req_t. A
 * submit function either returns a negative errno at once (bad key, object
 * too large, storage closing: the callback will NOT run) or returns 0, and
 * then the callback runs exactly once, later, on the loop thread — never
 * inside the submitting call. The request must stay alive and untouched
 * until then; the bytes given to put/put_if_absent are borrowed until the
 * callback.
 *
 * Status passed to the callback:
 *   0         success: for a put, the object is durable (it survives a crash
 *             of this machine and, on S3, the service acknowledged it)
 *   -EEXIST   put_if_absent lost: another writer created the key first
 *   -ENOENT   get/head: no such object
 *   -EFBIG    object larger than max_object_bytes (or the backend's limit)
 *   other     -errno of the failure; mw_storage_req_error() says where and
 *             why (the path and step, or the bucket, key, HTTP status and S3
 *             error code); the same line is logged
 * A failed put/put_if_absent never leaves a visible partial object. It may
 * leave a whole one: when the failure came after the object may have become
 * visible to others (mw_storage_req_maybe_written), its outcome is unknown.
 *
 * Limits: keys are at most MW_STORAGE_KEY_MAX_BYTES; at most max_inflight
 * operations run at once, later submissions queue in FIFO order; objects are
 * at most max_object_bytes.
 *
 * Threading: every function must be called on the loop thread, except the
 * blocking mw_storage_sync_* calls at the end, which run a private loop.
 *
 * Tests and benchmarks: storage/fault.h (fault injection, named steps, the
 * power-loss model of the local disk).
 */
#ifndef MW_STORAGE_STORAGE_H
#define MW_STORAGE_STORAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/buf.h"
#include "common/err.h"

#define MW_STORAGE_KEY_MAX_BYTES 1024
#define MW_STORAGE_KEY_MAX_SEGMENTS 64
#define MW_STORAGE_URI_MAX_BYTES 1024
#define MW_STORAGE_LIST_MAX_KEYS 1000000
#define MW_STORAGE_DELETE_MANY_MAX 1000 /* keys per delete_many (S3's DeleteObjects limit) */
#define MW_STORAGE_MAX_INFLIGHT 4096
#define MW_STORAGE_DEFAULT_MAX_INFLIGHT 64
#define MW_STORAGE_DEFAULT_MAX_OBJECT_BYTES ((size_t)256 << 20)
/* A key segment may not start with this: names beginning with it are the
 * backends' own (a local backend's temp files, memwal.md §1.5). */
#define MW_STORAGE_RESERVED_PREFIX ".tmp-"
/* The reason a failed request gives (mw_storage_req_error). */
#define MW_STORAGE_ERROR_BYTES 512

typedef struct mw_storage mw_storage_t;
typedef struct mw_storage_req mw_storage_req_t;
typedef struct mw_storage_fault mw_storage_fault_t; /* storage/fault.h */
typedef void (*mw_storage_cb)(mw_storage_req_t *req, int status);
typedef void (*mw_storage_close_cb)(void *arg);

/* One enum for every place that names a backend (the config key
 * `[storage] io_backend`, table options, tests). The URI decides local disk
 * or S3; for a local URI the backend picks the engine. */
typedef enum mw_storage_backend {
  MW_STORAGE_AUTO = 0, /* s3:// -> S3; a path -> io_uring, else (logged once) the thread pool */
  MW_STORAGE_URING,    /* local: io_uring, or fail with the kernel's refusal */
  MW_STORAGE_THREADS,  /* local: the libuv thread pool */
  MW_STORAGE_S3,       /* S3 (the URI must be s3://) */
} mw_storage_backend_t;

/* S3 settings; every NULL / -1 field falls back to the standard AWS
 * environment (AWS_ENDPOINT_URL, AWS_REGION / AWS_DEFAULT_REGION,
 * AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), then to the
 * AWS defaults. Strings are copied at open; secrets are never logged. */
typedef struct mw_storage_s3_config {
  const char *endpoint;          /* "http://127.0.0.1:7480"; NULL: env, else AWS */
  const char *region;            /* NULL: env, else "us-east-1" */
  const char *access_key_id;     /* NULL: env */
  const char *secret_access_key; /* NULL: env */
  const char *session_token;     /* NULL: env (none when unset) */
  int path_style;                /* -1: path-style when an endpoint is set; 0/1 */
  int allow_http;                /* -1: no; 1: http:// endpoints are accepted */
  uint32_t request_timeout_ms;   /* one HTTP attempt; 0 = 30 s */
  uint32_t retry_deadline_ms;    /* no retry of an exchange starts later; 0 = 15 s */
  size_t part_bytes;             /* multipart part size (plain puts of two parts or
                                    more); 0 = 16 MiB, at least 5 MiB */
} mw_storage_s3_config_t;

typedef struct mw_storage_config {
  /* "/var/lib/t.lance", "./t.lance", "file:///var/lib/t.lance" (local; the
   * directory is created at open) or "s3://BUCKET/PREFIX/t.lance". */
  const char *uri;
  mw_storage_backend_t backend;
  uint32_t max_inflight;         /* 0 = default; at most MW_STORAGE_MAX_INFLIGHT */
  size_t max_object_bytes;       /* 0 = default */
  /* true (default): a put is acknowledged only once it survives a crash of
   * the machine. false, for tests and benchmarks only: a local backend skips
   * its durability point (objects stay atomic, not durable). */
  bool durable;
  mw_storage_s3_config_t s3;
  const mw_storage_fault_t *fault; /* tests: storage/fault.h; NULL = none */
} mw_storage_config_t;

typedef enum mw_storage_op {
  MW_OP_PUT_IF_ABSENT = 1,
  MW_OP_PUT,
  MW_OP_GET,
  MW_OP_HEAD,
  MW_OP_LIST,
  MW_OP_DELETE,
  MW_OP_DELETE_PREFIX,
  MW_OP_SWEEP_TMP,
  MW_OP_DELETE_ROOT,
  MW_OP_DELETE_MANY,
  MW_OP_COUNT_
} mw_storage_op_t;

/* The request's private fields, one area per backend (libuv's
 * UV_*_PRIVATE_FIELDS pattern): callers must not touch them. */
#include "storage/storage_req.h"

struct mw_storage_req {
  void *data;             /* the caller's */
  /* Set by the caller before submitting (mw_storage_req_init clears it):
   * maintenance work (GC, compaction) that must not hold up the data path.
   * Background requests run in at most max_inflight - max_inflight / 4
   * slots and start only when no foreground request waits, so a WAL put
   * never queues behind a GC batch. */
  bool background;
  mw_buf_t buf;           /* get: the bytes; list: the key text */
  uint64_t size;          /* head/get: the object's total size */
  const char **keys;      /* list: nkeys sorted keys pointing into buf */
  size_t nkeys;
  MW_STORAGE_REQ_PRIVATE_FIELDS
};

/* Fill *cfg with defaults (backend AUTO, durable, default limits, S3 from
 * the environment). */
void mw_storage_config_init(mw_storage_config_t *cfg, const char *uri);
/* "auto" | "uring" | "threads" | "s3" -> backend, or -EINVAL. */
int mw_storage_backend_parse(const char *name, mw_storage_backend_t *out);
/* The name mw_storage_backend_parse accepts for b. */
const char *mw_storage_backend_label(mw_storage_backend_t b);
/* True for an s3:// URI. */
bool mw_storage_uri_is_s3(const char *uri);

/* Synchronous (start-up only): checks the URI and the configuration, makes
 * the local root directory, sets up the backend. Does no request to S3. */
int mw_storage_open(uv_loop_t *loop, const mw_storage_config_t *cfg, mw_storage_t **out,
                    mw_err_t *err);
/* Stop accepting requests, let every accepted one finish (callbacks run),
 * release everything, then call cb(arg). The storage is freed after cb. */
void mw_storage_close(mw_storage_t *st, mw_storage_close_cb cb, void *arg);
/* The URI it was opened with; "uring", "threads" or "s3": the backend in use. */
const char *mw_storage_uri(const mw_storage_t *st);
const char *mw_storage_backend_name(const mw_storage_t *st);
/* The limits in force (after defaults and caps were applied). */
uint32_t mw_storage_max_inflight(const mw_storage_t *st);
size_t mw_storage_max_object_bytes(const mw_storage_t *st);
/* Operations currently running / waiting for a slot. */
uint32_t mw_storage_inflight(const mw_storage_t *st);
uint32_t mw_storage_queued(const mw_storage_t *st);
/* Of those, the background requests (mw_storage_req_t.background). */
uint32_t mw_storage_background_inflight(const mw_storage_t *st);
uint32_t mw_storage_background_queued(const mw_storage_t *st);
/* True when key is acceptable (see storage.c for the rules). */
bool mw_storage_key_valid(const char *key);

/* Health, for the daemon's status (loop thread). -EEXIST and -ENOENT are
 * answers, not failures. A fault has cleared when consecutive_failures is
 * back to 0. */
typedef struct mw_storage_health {
  uint64_t ops_ok;                /* completed operations that succeeded */
  uint64_t ops_failed;            /* completed with another error */
  uint32_t consecutive_failures;  /* failures since the last success */
  int last_error;                 /* -errno of the last failure, 0 = none yet */
  uint64_t last_error_ms;         /* uv_now() of the last failure, 0 = never */
  uint64_t last_ok_ms;            /* uv_now() of the last success, 0 = never */
  uint64_t retries;               /* attempts repeated after a transient error (S3) */
} mw_storage_health_t;
void mw_storage_health(const mw_storage_t *st, mw_storage_health_t *out);

/* Requests. mw_storage_req_init once per request struct (it may be reused
 * after its callback); mw_storage_req_cleanup frees buf and keys. */
void mw_storage_req_init(mw_storage_req_t *req);
void mw_storage_req_cleanup(mw_storage_req_t *req);
/* The key (or prefix) of the request's current or last operation. */
const char *mw_storage_req_key(const mw_storage_req_t *req);
/* After a failure: where and why, e.g. "s3://b/t.lance/_versions/1.manifest:
 * HTTP 503 SlowDown after 7 attempts"; "" after a success. Valid until the
 * request is reused. */
const char *mw_storage_req_error(const mw_storage_req_t *req);
/* After a failed put or put_if_absent: true when the failure came after the
 * object may have become visible to others (local: after its link or rename;
 * S3: after the PUT was sent whole and before its answer arrived). The
 * object may exist now, whole, and — locally — may or may not survive a
 * power loss; a retry cannot tell. */
bool mw_storage_req_maybe_written(const mw_storage_req_t *req);

int mw_storage_put_if_absent(mw_storage_t *st, mw_storage_req_t *req, const char *key,
                             const void *bytes, size_t len, mw_storage_cb cb);
int mw_storage_put(mw_storage_t *st, mw_storage_req_t *req, const char *key, const void *bytes,
                   size_t len, mw_storage_cb cb);
/* Whole object: offset 0, len UINT64_MAX. A range is clipped at the end of
 * the object; offset past the end is -EINVAL. req->buf receives the bytes
 * (reset first), req->size the object's total size. */
int mw_storage_get(mw_storage_t *st, mw_storage_req_t *req, const char *key, uint64_t offset,
                   uint64_t len, mw_storage_cb cb);
/* req->size = object size, or status -ENOENT. */
int mw_storage_head(mw_storage_t *st, mw_storage_req_t *req, const char *key, mw_storage_cb cb);
/* Every key that starts with prefix (a plain string prefix, as in S3; ""
 * lists all), sorted bytewise. */
int mw_storage_list(mw_storage_t *st, mw_storage_req_t *req, const char *prefix,
                    mw_storage_cb cb);
/* Idempotent like an object store: deleting an absent key is success. A
 * reported deletion is durable. */
int mw_storage_delete(mw_storage_t *st, mw_storage_req_t *req, const char *key, mw_storage_cb cb);
/* Delete keys[0..n), 1..MW_STORAGE_DELETE_MANY_MAX valid keys (else
 * -EINVAL at once), each as delete() would: statuses[i] gets key i's own
 * result (0 = deleted or absent, a durable deletion; -errno). The status is
 * 0 when every key succeeded, else the first failing key's (in index
 * order); req->nkeys = keys that succeeded. keys (and their strings) and
 * statuses are borrowed until the callback. Local disk: unlinks and one
 * fsync per directory, on the thread pool; S3: DeleteObjects, transient
 * per-key errors retried alone, one DELETE per key where the store refuses
 * batches (docs/storage.md). Fault injection arms each key on its own
 * (fault.h). */
int mw_storage_delete_many(mw_storage_t *st, mw_storage_req_t *req, const char *const *keys,
                           size_t n, int *statuses, mw_storage_cb cb);
/* Delete every key listed by list(prefix). req->nkeys = how many objects
 * were removed. A reported deletion is durable. */
int mw_storage_delete_prefix(mw_storage_t *st, mw_storage_req_t *req, const char *prefix,
                             mw_storage_cb cb);
/* Remove what crashed writers left below prefix ("a/b/" or "a/b/x" -> the
 * folder a/b; "" -> everything) that is at least min_age_s old and that no
 * list shows (local: temp files; S3: incomplete multipart uploads). A
 * leftover removed under a live writer only makes that writer's put fail
 * (nothing is acknowledged before it is whole), so min_age_s only keeps
 * live writers from seeing needless failures. req->nkeys = how many were
 * removed. */
int mw_storage_sweep_tmp(mw_storage_t *st, mw_storage_req_t *req, const char *prefix,
                         uint64_t min_age_s, mw_storage_cb cb);
/* The root holds no object any more (drop-table's last step): remove what
 * is left of it (local: leftover temp files, empty folders and the root
 * directory itself; S3: nothing, a prefix exists only through its keys).
 * -ENOTEMPTY when an object is still there. Afterwards only close is
 * meaningful. */
int mw_storage_delete_root(mw_storage_t *st, mw_storage_req_t *req, mw_storage_cb cb);

/* ---- blocking calls (start-up, tools) ----
 *
 * A storage with its own private loop: each call submits one request and
 * runs that loop until the request completes. For start-up and command-line
 * tools only — it blocks the calling thread for the operation's duration —
 * but safe anywhere, since it never runs the caller's loop (a libuv loop
 * must not be run from inside its own callbacks). Status conventions as
 * above; *err (optional) gets mw_storage_req_error()'s reason. */
typedef struct mw_storage_sync mw_storage_sync_t;
int mw_storage_sync_open(const mw_storage_config_t *cfg, mw_storage_sync_t **out, mw_err_t *err);
void mw_storage_sync_close(mw_storage_sync_t *ss);
mw_storage_t *mw_storage_sync_storage(mw_storage_sync_t *ss);
/* *out gets the whole object (reset first). */
int mw_storage_sync_get(mw_storage_sync_t *ss, const char *key, mw_buf_t *out, mw_err_t *err);
/* 0 and *size, or -ENOENT. */
int mw_storage_sync_head(mw_storage_sync_t *ss, const char *key, uint64_t *size, mw_err_t *err);
/* req gets the keys as mw_storage_list gives them (req initialised by the
 * caller, mw_storage_req_cleanup after). */
int mw_storage_sync_list(mw_storage_sync_t *ss, const char *prefix, mw_storage_req_t *req,
                         mw_err_t *err);
/* if_absent: put_if_absent (-EEXIST when another writer won), else put. */
int mw_storage_sync_put(mw_storage_sync_t *ss, const char *key, const void *bytes, size_t len,
                        bool if_absent, mw_err_t *err);
int mw_storage_sync_delete(mw_storage_sync_t *ss, const char *key, mw_err_t *err);
/* delete_many: 0, or the first failing key's status (statuses[] has each). */
int mw_storage_sync_delete_many(mw_storage_sync_t *ss, const char *const *keys, size_t n,
                                int *statuses, mw_err_t *err);
/* Returns the number of objects removed, or -errno. */
int mw_storage_sync_delete_prefix(mw_storage_sync_t *ss, const char *prefix, mw_err_t *err);
int mw_storage_sync_delete_root(mw_storage_sync_t *ss, mw_err_t *err);

#endif
