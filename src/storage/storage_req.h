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
  /* fault hook copied at submission, so pool threads never read st's */
  void (*on_step)(void *ctx, const mw_storage_req_t *req, unsigned step);
  void *on_step_ctx;
  char key[MW_STORAGE_KEY_MAX_BYTES + 1];
  char error[MW_STORAGE_ERROR_BYTES]; /* mw_storage_req_error */
} mw_storage_req_front_t;

/* Local disk (backend_uring.c, backend_threads.c, local.c, powerloss.c). */
typedef struct mw_storage_req_local {
  uint8_t state;                /* io_uring state machine */
  uint8_t sync_parents;         /* make every ancestor directory durable too */
  uint8_t mkdir_tries;
  uint8_t tmp_made;             /* the temp file exists */
  uint16_t walk;                /* component index for mkdir / dir fsync */
  int32_t injected;             /* io_uring: error to report for a NOP */
  uint8_t chain_i, chain_n;     /* io_uring: linked tail, next element / count */
  uint8_t chain_fail_at;        /* element that failed (chain_err), 0xff = none */
  int16_t slot;                 /* io_uring: fixed-file slot of the directory, -1 */
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

/* S3 (backend_s3.c): one transfer at a time per request. */
typedef struct mw_storage_req_s3 {
  void *easy;                   /* CURL * while an attempt runs */
  void *headers;                /* struct curl_slist * */
  void *task;                   /* multi-request state (list pages, multipart) */
  uint32_t attempt;             /* 1-based attempt of the current HTTP request */
  uint32_t http_status;
  uint64_t deadline_ms;         /* loop time after which no retry starts */
  size_t sent;                  /* request body bytes handed to curl */
  uv_timer_t *backoff;          /* owned by the backend's pool, NULL when idle */
} mw_storage_req_s3_t;

#define MW_STORAGE_REQ_PRIVATE_FIELDS      \
  mw_storage_req_front_t priv;             \
  union {                                  \
    mw_storage_req_local_t local;          \
    mw_storage_req_s3_t s3;                \
  } be;

#endif
