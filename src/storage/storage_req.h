/*
 * storage_req.h — the private fields of a storage request (included by
 * storage.h only, for sizeof; nothing outside src/storage reads them).
 *
 * A request is embedded in its owner, so its size must be known where it is
 * declared. As libuv does with UV_*_PRIVATE_FIELDS, the fields live here:
 *   front  what the front (storage.c) and the fault layer keep for any
 *          backend: the operation, its key and arguments, queue link, hook
 *          copies, the failing step and the reason of a failure;
 *   be     one area per backend, a union: the local disk backends' fds,
 *          paths and thread-pool work item, or the S3 backend's transfer.
 * A backend touches only its own area and the front fields it is given.
 */
#ifndef MW_STORAGE_STORAGE_REQ_H
#define MW_STORAGE_STORAGE_REQ_H

#include <stdint.h>
#include <uv.h>

/* The local backends' path buffers: "<dir>/.tmp-" + 32 hex + NUL. */
#define MW_STORAGE_LOCAL_PATH_BYTES (MW_STORAGE_KEY_MAX_BYTES + 48)

typedef struct mw_storage_req_front {
  mw_storage_t *st;
  mw_storage_req_t *next;       /* queue link (front, fault delay list) */
  mw_storage_cb cb;
  uint8_t op;                   /* mw_storage_op_t */
  uint8_t armed;                /* fault injection armed for this request */
  uint8_t bg;                   /* req->background at submission */
  uint8_t step;                 /* last step started (the backend's numbering) */
  uint8_t maybe_written;        /* see mw_storage_req_maybe_written */
  int32_t result;               /* error saved while a backend cleans up */
  uint32_t fault_steps;         /* step bit mask the armed fault fails at */
  int32_t fault_errno;
  const uint8_t *src;           /* put: borrowed bytes */
  size_t len;
  uint64_t off;                 /* get: range */
  uint64_t rlen;                /* UINT64_MAX = to the end */
  uint64_t min_age_s;           /* sweep_tmp */
  uint64_t t_start_ms;          /* fault delay: loop time at start */
  const char *const *many;      /* delete_many: borrowed keys, their statuses */
  int *statuses;
  uint32_t nmany;
  uint8_t *many_armed;          /* delete_many: per-key fault arming (NULL: none) */
  /* fault hook copied at submission, so pool threads never read st's */
  void (*on_step)(void *ctx, const mw_storage_req_t *req, unsigned step);
  void *on_step_ctx;
  char key[MW_STORAGE_KEY_MAX_BYTES + 1];
  char error[MW_STORAGE_ERROR_BYTES]; /* mw_storage_req_error */
} mw_storage_req_front_t;

/* Local disk (backend_uring.c, backend_threads.c, local.c, powerloss.c). */
typedef struct mw_storage_req_local {
  uint8_t state;                /* io_uring state machine */
  uint8_t sync_parents;         /* make ancestor directories durable too ... */
  uint16_t sync_low;            /* ... up to this component index (0 = the root) */
  uint8_t mkdir_tries;
  uint8_t tmp_made;             /* the temp file exists */
  uint16_t walk;                /* component index for mkdir / dir fsync */
  int32_t injected;             /* io_uring: error to report for a NOP */
  uint8_t chain_i, chain_n;     /* io_uring: linked tail, next element / count */
  uint8_t chain_fail_at;        /* element that failed (chain_err), 0xff = none */
  int16_t slot;                 /* io_uring: the request's fixed-file slot, -1 */
  uint8_t fd_fixed;             /* io_uring: fd is that slot (a linked open), not an fd */
  int32_t chain_err;
  int fd;
  int dirfd;
  size_t done;                  /* bytes written */
  uint64_t t_sync_ns;           /* metrics: start of the current fsync */
  struct mw_powerloss *pl;      /* power-loss journal copied at submission */
  uv_work_t work;               /* thread-pool backend */
  uint64_t stx[32];             /* struct statx for the io_uring backend */
  char tmp[MW_STORAGE_LOCAL_PATH_BYTES];
  char dir[MW_STORAGE_KEY_MAX_BYTES + 1];
  char scratch[MW_STORAGE_LOCAL_PATH_BYTES]; /* mkdir / dir fsync path */
} mw_storage_req_local_t;

/* S3 (backend_s3.c): one HTTP exchange at a time per request; operations
 * of several exchanges (list pages, multipart, deletes) keep their state in
 * `task`. */
typedef struct mw_storage_req_s3 {
  void *easy;                   /* CURL * while an attempt runs */
  void *headers;                /* struct curl_slist * of that attempt */
  void *task;                   /* heap state of a multi-exchange operation */
  mw_storage_req_t *wait_next;  /* backoff list */
  uint64_t wait_due_ms;
  uint64_t deadline_ms;         /* loop time after which no retry starts */
  uint32_t attempt;             /* of the current exchange, 1-based */
  uint32_t attempts;            /* of the whole operation */
  int32_t http_status;          /* of the last response, 0 = none */
  int32_t curl_code;            /* CURLcode of the last attempt */
  int32_t injected;             /* a test fault injected into this attempt */
  uint8_t phase;                /* which exchange of the operation runs */
  uint8_t body_step;            /* the "body" step fired in this attempt */
  uint8_t ambiguous;            /* a create may have landed unseen */
  uint8_t too_big;              /* the answer exceeds what this exchange takes */
  uint8_t rechecks;             /* put_if_absent: PUTs again after a vanished 412 */
  const uint8_t *body;          /* request body of this exchange */
  size_t body_len;
  size_t body_sent;
  uint64_t content_length;      /* response header; UINT64_MAX = none */
  uint64_t range_total;         /* Content-Range's total; UINT64_MAX = none */
  mw_buf_t resp;                /* response body: XML, error documents */
  char etag[80];                /* response ETag (multipart parts) */
  char request_id[48];          /* x-amz-request-id, for error reasons */
} mw_storage_req_s3_t;

#define MW_STORAGE_REQ_PRIVATE_FIELDS      \
  mw_storage_req_front_t priv;             \
  union {                                  \
    mw_storage_req_local_t local;          \
    mw_storage_req_s3_t s3;                \
  } be;

#endif
