/*
 * storage.h — object-store-shaped storage on the libuv loop.
 *
 * Owns: one root directory (or, later, one bucket prefix) and every object
 * below it. Objects are whole byte strings named by keys relative to the root
 * ("_mem_wal/<uuid>/wal/0100…0.arrow"). There is no append and no partial
 * write: put_if_absent() and put() make a whole object visible at once or not
 * at all. See docs/storage.md for the exact syscall sequence of each
 * operation and the durability argument.
 *
 * Model (libuv style): a request is a caller-embedded mw_storage_req_t. A
 * submit function either returns a negative errno at once (bad key, object
 * too large, storage closing: the callback will NOT run) or returns 0, and
 * then the callback runs exactly once, later, on the loop thread — never
 * inside the submitting call. The request, its key string copy aside, must
 * stay alive and untouched until then; the bytes given to put/put_if_absent
 * are borrowed until the callback.
 *
 * Status passed to the callback:
 *   0         success
 *   -EEXIST   put_if_absent lost: another writer created the key first
 *   -ENOENT   get/head: no such object
 *   -EFBIG    object larger than max_object_bytes (or RLIMIT_FSIZE)
 *   other     -errno of the failing syscall (the path is in the log)
 * A failed put/put_if_absent never leaves a visible partial object; the only
 * failure that leaves the object visible is an error from the directory fsync
 * after the link/rename (the object is whole, its durability unknown).
 *
 * Limits: keys are at most MW_STORAGE_KEY_MAX_BYTES; at most max_inflight
 * operations run at once, later submissions queue in FIFO order.
 *
 * Threading: every function must be called on the loop thread.
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
/* "<dir>/.tmp-" + 32 hex + NUL */
#define MW_STORAGE_PATH_MAX_BYTES (MW_STORAGE_KEY_MAX_BYTES + 48)
#define MW_STORAGE_LIST_MAX_KEYS 1000000
#define MW_STORAGE_DEFAULT_MAX_INFLIGHT 64
#define MW_STORAGE_DEFAULT_MAX_OBJECT_BYTES ((size_t)256 << 20)
/* Temp files are "<dir>/.tmp-<uuid v4 as 32 hex>" (memwal.md §1.5). */
#define MW_STORAGE_TMP_PREFIX ".tmp-"

typedef struct mw_storage mw_storage_t;
typedef struct mw_storage_req mw_storage_req_t;
typedef struct mw_powerloss mw_powerloss_t;
typedef void (*mw_storage_cb)(mw_storage_req_t *req, int status);
typedef void (*mw_storage_close_cb)(void *arg);

typedef enum mw_storage_backend {
  MW_STORAGE_AUTO = 0, /* io_uring, else (logged once) the thread pool */
  MW_STORAGE_URING,    /* io_uring or fail with the kernel's refusal */
  MW_STORAGE_THREADS,  /* libuv thread pool (uv_queue_work) */
} mw_storage_backend_t;

/* The individual syscall steps of an operation, as seen by fault injection
 * and by the step hook. */
typedef enum mw_storage_step {
  MW_STEP_OPEN = 0,   /* openat of the temp file or the object */
  MW_STEP_MKDIR,      /* mkdirat of a missing parent */
  MW_STEP_WRITE,      /* one write (short writes loop) */
  MW_STEP_FSYNC,      /* fsync of the temp file */
  MW_STEP_CLOSE,      /* close of a file */
  MW_STEP_LINK,       /* linkat temp -> key (put_if_absent) */
  MW_STEP_RENAME,     /* renameat temp -> key (put) */
  MW_STEP_DIROPEN,    /* openat of a directory to fsync it */
  MW_STEP_DIRSYNC,    /* fsync of a directory */
  MW_STEP_DIRCLOSE,   /* close of that directory */
  MW_STEP_UNLINK,     /* unlinkat (temp removal, delete) */
  MW_STEP_STAT,       /* statx (head, get) */
  MW_STEP_READ,       /* one read (get) */
  MW_STEP_SCAN,       /* directory walk (list, delete_prefix) */
  MW_STEP_COUNT_
} mw_storage_step_t;
#define MW_STEP_BIT(s) (1u << (s))
/* "open", "dirsync", ... ("?" out of range); the names logs, the test hooks
 * and the admin `fault` command use. */
const char *mw_storage_step_name(int step);
/* The step called name, or -EINVAL. */
int mw_storage_step_parse(const char *name);
#define MW_STEP_ALL ((1u << MW_STEP_COUNT_) - 1)

/* Fault injection (backend_fault.c). Tests only; all zero = no faults.
 * An operation is "armed" when it is the fail_nth-th operation submitted
 * (1-based, counting every accepted submission) or its key starts with
 * fail_prefix. An armed operation fails with -fail_errno at the first step
 * whose bit is in fail_steps (0 = any step, i.e. the first one). */
typedef struct mw_storage_fault {
  uint64_t fail_nth;
  const char *fail_prefix;   /* copied at open */
  int fail_errno;            /* positive errno, e.g. EIO or ENOSPC */
  uint32_t fail_steps;       /* MW_STEP_BIT() mask, 0 = any */
  bool fail_fsync_once;      /* the next file fsync of any op fails (EIO) */
  uint32_t delay_ms;         /* every operation starts this much later */
  /* Called before every step (on the loop or a pool thread). A test can
   * record the sequence, or _exit() to model a crash at an exact step. */
  void (*on_step)(void *ctx, const mw_storage_req_t *req, mw_storage_step_t step);
  void *on_step_ctx;
  /* Power-loss simulation (powerloss.c): a journal, made for the same root
   * with mw_powerloss_new(), that records what each completed fsync made
   * durable. Fixed for the life of the storage (mw_storage_fault_set cannot
   * change it). */
  mw_powerloss_t *power_loss;
} mw_storage_fault_t;

typedef struct mw_storage_config {
  const char *root_dir;          /* created (mkdir -p) at open if missing */
  mw_storage_backend_t backend;
  uint32_t max_inflight;         /* 0 = default */
  size_t max_object_bytes;       /* 0 = default */
  bool fsync;                    /* false only for tests and benchmarks */
  const mw_storage_fault_t *fault; /* NULL = none */
  /* Test hook: pretend io_uring setup failed with this -errno. */
  int test_uring_refuse;
  /* Test hook: the next test_uring_submit_failures calls of
   * io_uring_submit() fail with this -errno (without submitting). */
  int test_uring_submit_errno;
  uint32_t test_uring_submit_failures;
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
} mw_storage_op_t;

/* Private part of a request; callers must not touch it. */
typedef struct mw_storage_req_priv {
  mw_storage_t *st;
  mw_storage_req_t *next;       /* queue link */
  mw_storage_cb cb;
  uint8_t op;                   /* mw_storage_op_t */
  uint8_t state;                /* backend state machine */
  uint8_t armed;                /* fault armed */
  uint8_t sync_parents;         /* fsync every ancestor dir too */
  uint8_t mkdir_tries;
  uint8_t tmp_made;             /* the temp file exists */
  uint8_t step;                 /* last step started (mw_storage_step_t) */
  uint8_t linked;               /* the object became visible */
  uint8_t dir_touched;          /* delete: the unlink changed (or may have) the dir */
  uint16_t walk;                /* component index for mkdir / dir fsync */
  int32_t injected;             /* uring: error to report for a NOP */
  int32_t result;               /* error saved while cleaning up */
  int fd;
  int dirfd;
  uint32_t fault_steps;
  int32_t fault_errno;
  const uint8_t *src;
  size_t len;
  size_t done;
  uint64_t off;
  uint64_t rlen;                /* UINT64_MAX = to the end */
  uint64_t t_start_ns;          /* fault delay: loop time (ms) at start */
  uint64_t min_age_s;           /* sweep_tmp */
  uint64_t t_sync_ns;           /* metrics: start of the current fsync */
  /* fault hook copied at submission, so pool threads never read st->fault */
  void (*on_step)(void *ctx, const mw_storage_req_t *req, mw_storage_step_t step);
  void *on_step_ctx;
  mw_powerloss_t *pl;
  uv_work_t work;               /* thread-pool backend */
  uint64_t stx[32];             /* struct statx for the uring backend */
  char key[MW_STORAGE_KEY_MAX_BYTES + 1];
  char tmp[MW_STORAGE_PATH_MAX_BYTES];
  char dir[MW_STORAGE_KEY_MAX_BYTES + 1];
  char scratch[MW_STORAGE_PATH_MAX_BYTES]; /* uring: mkdir / dir fsync path */
} mw_storage_req_priv_t;

struct mw_storage_req {
  void *data;             /* the caller's */
  mw_buf_t buf;           /* get: the bytes; list: the key text */
  uint64_t size;          /* head/get: the object's total size */
  const char **keys;      /* list: nkeys sorted keys pointing into buf */
  size_t nkeys;
  mw_storage_req_priv_t priv;
};

/* Fill *cfg with defaults (backend AUTO, fsync on, default limits). */
void mw_storage_config_init(mw_storage_config_t *cfg, const char *root_dir);
/* "auto" | "uring" | "threads" -> backend, or -EINVAL. */
int mw_storage_backend_parse(const char *name, mw_storage_backend_t *out);

/* Synchronous (start-up only): creates root_dir, sets up io_uring or the
 * fallback. */
int mw_storage_open(uv_loop_t *loop, const mw_storage_config_t *cfg, mw_storage_t **out,
                    mw_err_t *err);
/* Stop accepting requests, let every accepted one finish (callbacks run),
 * release everything, then call cb(arg). The storage is freed after cb. */
void mw_storage_close(mw_storage_t *st, mw_storage_close_cb cb, void *arg);
/* Change fault injection on an open storage (loop thread): f = NULL disarms
 * everything. Requests already submitted keep the faults they were armed
 * with; later submissions see the new ones. f->power_loss must be NULL or
 * the journal given at open (which stays attached either way): -EINVAL
 * otherwise, and for a bad fail_errno. fail_prefix is copied. */
int mw_storage_fault_set(mw_storage_t *st, const mw_storage_fault_t *f);
/* The fault settings in force (loop thread): *out gets a copy whose
 * fail_prefix points into the storage (valid until the next set). A run-time
 * control edits this copy and sets it back, so the on_step hook and the
 * power-loss journal installed at open are kept. */
void mw_storage_fault_get(const mw_storage_t *st, mw_storage_fault_t *out);
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
} mw_storage_health_t;
void mw_storage_health(const mw_storage_t *st, mw_storage_health_t *out);
/* After a failed put or put_if_absent: true when the failure came after
 * the object became visible (the directory fsync or temp cleanup after the
 * link or rename). Its outcome is then unknown: the object exists now and
 * may or may not survive a power loss; a retried fsync cannot tell (Linux
 * reports a writeback error once). */
bool mw_storage_req_maybe_written(const mw_storage_req_t *req);
/* "uring" or "threads": the backend actually in use. */
const char *mw_storage_backend_name(const mw_storage_t *st);
/* Operations currently running / waiting for a slot. */
uint32_t mw_storage_inflight(const mw_storage_t *st);
uint32_t mw_storage_queued(const mw_storage_t *st);
/* True when key is acceptable (see storage.c for the rules). */
bool mw_storage_key_valid(const char *key);

/* Requests. mw_storage_req_init once per request struct (it may be reused
 * after its callback); mw_storage_req_cleanup frees buf and keys. */
void mw_storage_req_init(mw_storage_req_t *req);
void mw_storage_req_cleanup(mw_storage_req_t *req);

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
 * lists all), sorted bytewise, temp files hidden. */
int mw_storage_list(mw_storage_t *st, mw_storage_req_t *req, const char *prefix,
                    mw_storage_cb cb);
/* Idempotent like an object store: deleting an absent key is success. With
 * fsync on, the key's directory is fsynced before the callback, so a
 * reported deletion survives power loss. */
int mw_storage_delete(mw_storage_t *st, mw_storage_req_t *req, const char *key, mw_storage_cb cb);
/* Delete every key listed by list(prefix); empty directories go too.
 * req->nkeys = how many objects were removed. With fsync on, every directory
 * whose entries changed is fsynced (once) before the callback. */
int mw_storage_delete_prefix(mw_storage_t *st, mw_storage_req_t *req, const char *prefix,
                             mw_storage_cb cb);
/* Remove temp files (".tmp-*") left by crashed writers in the directory
 * that prefix names ("a/b/" or "a/b/x" -> a/b; "" -> the root) and below,
 * when they were last modified at least min_age_s ago — old enough that no
 * live writer, in this process or another, can still be using them (a
 * writer holds its temp for one put). req->nkeys = how many were removed. */
int mw_storage_sweep_tmp(mw_storage_t *st, mw_storage_req_t *req, const char *prefix,
                         uint64_t min_age_s, mw_storage_cb cb);

/* ---- power-loss simulation (powerloss.c; tests and benchmarks) ----
 *
 * A journal for one root directory models POSIX durability: a file's content
 * is durable as of its last completed fsync (never fsynced: empty), and a
 * directory's entries as of the start of its last completed fsync (a new
 * directory's own entry only once its parent is fsynced). Storages opened
 * with fault.power_loss = journal feed it from their syscall steps.
 *
 *   mw_powerloss_new(root)    snapshot the tree as it is now: all durable
 *   mw_powerloss_trip(pl)     the power fails now (any thread, e.g. on_step):
 *                             every later step of every attached storage
 *                             fails with -EIO (closes of fds excepted) and no
 *                             fsync counts any more
 *   mw_storage_power_cut(pl)  with every attached storage closed: rewrite
 *                             the tree under root to exactly the durable
 *                             state (what a reboot would find), then start
 *                             over from it (the journal is reusable)
 *
 * Limits (exceeding one makes mw_storage_power_cut fail with -E2BIG and
 * leave the tree alone): MW_POWERLOSS_MAX_NODES files and directories ever
 * seen, MW_POWERLOSS_MAX_BYTES of fsynced content kept in memory,
 * MW_POWERLOSS_MAX_ENTRIES entries per directory snapshot,
 * MW_POWERLOSS_MAX_PENDING fsyncs in flight. */
#define MW_POWERLOSS_MAX_NODES 65536
#define MW_POWERLOSS_MAX_BYTES ((size_t)512 << 20)
#define MW_POWERLOSS_MAX_ENTRIES 65536
#define MW_POWERLOSS_MAX_PENDING 8192

typedef struct mw_powerloss_stats {
  uint64_t file_fsyncs;   /* completed file fsyncs recorded */
  uint64_t dir_fsyncs;    /* completed directory fsyncs recorded */
  uint64_t files;         /* after a cut: files in the durable tree */
  uint64_t dirs;          /* after a cut: directories in it (root excluded) */
  uint64_t bytes;         /* after a cut: their content bytes */
} mw_powerloss_stats_t;

int mw_powerloss_new(const char *root_dir, mw_powerloss_t **out, mw_err_t *err);
void mw_powerloss_trip(mw_powerloss_t *pl);
bool mw_powerloss_tripped(const mw_powerloss_t *pl);
int mw_storage_power_cut(mw_powerloss_t *pl, mw_err_t *err);
void mw_powerloss_stats(const mw_powerloss_t *pl, mw_powerloss_stats_t *out);
void mw_powerloss_free(mw_powerloss_t *pl);

#endif
