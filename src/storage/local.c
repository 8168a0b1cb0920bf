/*
 * local.c — what the two local-disk engines share: opening the root
 * directory, choosing io_uring or the thread pool, the step names and the
 * step wrapper (fsync metrics, the power-loss journal), the directory
 * durability cache, temp names and path helpers.
 *
 * Root: the URI is a path ("/var/lib/t.lance", "./t.lance") or
 * "file://PATH". It is created (mkdir -p) at open, opened as a directory fd
 * every other path is relative to, and — durable storage — fsynced, so the
 * root itself is on disk before anything is written into it.
 *
 * Engine: backend URING insists on io_uring (open fails with the kernel's
 * refusal); AUTO falls back to the libuv thread pool with one warning per
 * process; THREADS uses the pool.
 *
 * Durability of directories: an object is durable once its file is fsynced,
 * linked, and its directory fsynced — *and* that directory's own entry is
 * durable all the way up to the root. A small direct-mapped cache holds
 * hashes of directories whose ancestry this instance has fsynced; the first
 * write into a directory asks the engine to fsync its ancestors too
 * (local.sync_parents), up to the deepest one the cache knows durable
 * (local.sync_low: that one is fsynced again, since the entry of the child
 * below it may be new), and every directory so fsynced joins the cache. A
 * write that had to mkdir a directory at or above sync_low found the cache
 * wrong (someone removed it) and walks to the root. delete_prefix and
 * delete_root remove directories, so they clear the cache.
 */
#include "storage/local_int.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/fs.h"
#include "common/log.h"

const char *const mw_local_step_names[MW_STEP_COUNT_] = {
    "open",    "mkdir",   "write",    "fsync",  "close", "link", "rename", "diropen",
    "dirsync", "dirclose", "unlink", "stat",   "read",  "scan", "rmdir",
};

/* ---- fsync metrics ---- */

static mw_metric_family_t *fsync_family;
static mw_metric_t *fsync_series[2]; /* file, dir */

static void fsync_metrics_register(void) {
  static const char *const kind[] = {"kind"};
  static const double bounds[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                  0.025,  0.05,    0.1,    0.25,  0.5,    1,     2.5, 10};
  mw_metric_family_t *fs = mw_metrics_register(
      mw_metrics_default(), MW_METRIC_HISTOGRAM, "memwald_storage_fsync_seconds",
      "Latency of successful file and directory fsyncs.", kind, 1, bounds,
      sizeof bounds / sizeof *bounds);
  if (fs == NULL) return;
  const char *file[] = {"file"}, *dir[] = {"dir"};
  fsync_series[0] = mw_metric_series(fs, file);
  fsync_series[1] = mw_metric_series(fs, dir);
  fsync_family = fs;
}

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- steps ---- */

int mw_local__step(mw_storage_req_t *req, mw_local_step_t step) {
  mw_storage_req_local_t *l = &req->be.local;
  assert(step < MW_STEP_COUNT_);
  int rc = mw_storage__step(req, step);
  if (rc < 0) return rc;
  if (l->pl != NULL && mw_powerloss_tripped(l->pl) && step != MW_STEP_CLOSE &&
      step != MW_STEP_DIRCLOSE) {
    mw_storage__count_fault(req->priv.st, step);
    return -EIO; /* the device is gone; closes still run so no fd leaks */
  }
  if (step == MW_STEP_FSYNC || step == MW_STEP_DIRSYNC) {
    if (l->pl != NULL) mw_powerloss__before(l->pl, req, step);
    l->t_sync_ns = mono_ns();
  }
  return 0;
}

void mw_local__sync_began(mw_storage_req_t *req) { req->be.local.t_sync_ns = mono_ns(); }

int mw_local__step_end(mw_storage_req_t *req, mw_local_step_t step, int rc) {
  mw_storage_req_local_t *l = &req->be.local;
  assert(step == MW_STEP_OPEN || step == MW_STEP_MKDIR || step == MW_STEP_FSYNC ||
         step == MW_STEP_DIRSYNC);
  bool sync = step == MW_STEP_FSYNC || step == MW_STEP_DIRSYNC;
  if (sync && l->t_sync_ns != 0 && rc == 0 && fsync_family != NULL) {
    double s = (double)(mono_ns() - l->t_sync_ns) * 1e-9;
    mw_histogram_observe(fsync_series[step == MW_STEP_DIRSYNC], fsync_family, s);
  }
  if (sync) l->t_sync_ns = 0;
  if (l->pl != NULL) rc = mw_powerloss__after(l->pl, req, step, rc);
  return rc;
}

/* ---- paths ---- */

int mw_local__opendir(int dirfd, DIR **d) {
  assert(dirfd >= 0);
  *d = fdopendir(dirfd);
  if (*d != NULL) return 0;
  int rc = -errno;
  close(dirfd);
  return rc;
}

int mw_local__each_entry(int dirfd, mw_local_entry_fn fn, void *ctx) {
  assert(fn != NULL);
  DIR *d;
  int rc = mw_local__opendir(dirfd, &d);
  if (rc < 0) return rc;
  struct dirent *e;
  while (rc == 0 && (e = readdir(d)) != NULL) {
    const char *name = e->d_name;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) continue;
    struct stat sb;
    if (fstatat(dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0) continue; /* vanished */
    rc = fn(ctx, dirfd, name, &sb);
  }
  closedir(d); /* closes dirfd */
  return rc;
}

unsigned mw_local__depth(const char *path) {
  assert(path != NULL);
  unsigned d = 0;
  for (const char *p = path; *p; p++) d += *p == '/';
  return d;
}

bool mw_local__parent_prefix(const char *path, unsigned n, char *out, size_t cap) {
  assert(path != NULL);
  assert(out != NULL);
  assert(cap > 1);
  if (n == 0) {
    out[0] = '.';
    out[1] = '\0';
    return true;
  }
  const char *p = path;
  for (unsigned i = 0; i < n; i++) {
    p = strchr(p, '/');
    if (p == NULL) return false;
    if (i + 1 < n) p++;
  }
  size_t len = (size_t)(p - path);
  if (len + 1 > cap) return false;
  memcpy(out, path, len);
  out[len] = '\0';
  return true;
}

void mw_local__tmp_name(mw_storage_req_t *req) {
  /* A random v4 UUID as 32 lowercase hex digits, from getentropy(3)
   * (getrandom: never blocks once the kernel's pool is initialised). The
   * name starts with ".tmp-", never with a binary digit (memwal.md §1.5). */
  uint8_t u[16];
  if (getentropy(u, sizeof u) != 0) {
    /* Extremely unlikely; fall back to time and address entropy. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t a = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)(uintptr_t)req;
    uint64_t b = a * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
    memcpy(u, &a, 8);
    memcpy(u + 8, &b, 8);
  }
  u[6] = (uint8_t)((u[6] & 0x0f) | 0x40);
  u[8] = (uint8_t)((u[8] & 0x3f) | 0x80);
  static const char hx[] = "0123456789abcdef";
  char hex[33];
  for (int i = 0; i < 16; i++) {
    hex[2 * i] = hx[u[i] >> 4];
    hex[2 * i + 1] = hx[u[i] & 15];
  }
  hex[32] = '\0';
  mw_storage_req_local_t *l = &req->be.local;
  if (strcmp(l->dir, ".") == 0)
    snprintf(l->tmp, sizeof l->tmp, MW_STORAGE_RESERVED_PREFIX "%s", hex);
  else
    snprintf(l->tmp, sizeof l->tmp, "%s/" MW_STORAGE_RESERVED_PREFIX "%s", l->dir, hex);
  assert(l->tmp[0] != '0');
  assert(l->tmp[0] != '1');
}

/* ---- directory durability cache ---- */

static uint64_t hash_str(const char *s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
  return h | 1; /* 0 marks an empty slot */
}

static bool dircache_has(const mw_local_t *lo, const char *dir) {
  uint64_t h = hash_str(dir);
  return lo->dircache[h % MW_LOCAL_DIRCACHE_SLOTS] == h;
}

static void dircache_add(mw_local_t *lo, const char *dir) {
  uint64_t h = hash_str(dir);
  lo->dircache[h % MW_LOCAL_DIRCACHE_SLOTS] = h;
}

/* The component index of the deepest proper ancestor of `key`'s directory
 * (at index `depth`) that the cache knows durable; 0 (the root) if none. */
static uint16_t dircache_low(const mw_local_t *lo, const char *key, unsigned depth) {
  char d[MW_STORAGE_LOCAL_PATH_BYTES];
  for (unsigned i = depth; i-- > 1;) {
    bool ok = mw_local__parent_prefix(key, i, d, sizeof d);
    assert(ok);
    if (ok && dircache_has(lo, d)) return (uint16_t)i;
  }
  return 0;
}

void mw_local__made_dir(mw_storage_req_local_t *l, unsigned level) {
  assert(level >= 1);
  l->sync_parents = 1;
  if (level <= l->sync_low) l->sync_low = 0; /* the cache was wrong above it */
}

/* ---- requests ---- */

static bool is_write(const mw_storage_req_t *req) {
  return req->priv.op == MW_OP_PUT || req->priv.op == MW_OP_PUT_IF_ABSENT;
}

void mw_local__prepare(mw_storage_t *st, mw_storage_req_t *req) {
  mw_local_t *lo = mw_local(st);
  mw_storage_req_local_t *l = &req->be.local;
  assert(lo != NULL);
  assert(req->priv.st == st);
  l->fd = -1;
  l->dirfd = -1;
  l->pl = lo->pl;
  /* dir: the key's parent for objects; for a prefix, the directory part. */
  const char *key = req->priv.key;
  const char *slash = strrchr(key, '/');
  if (slash == NULL) {
    strcpy(l->dir, ".");
  } else {
    memcpy(l->dir, key, (size_t)(slash - key));
    l->dir[slash - key] = '\0';
  }
  l->sync_parents = is_write(req) && lo->durable && !dircache_has(lo, l->dir);
  l->sync_low = l->sync_parents ? dircache_low(lo, key, mw_local__depth(key)) : 0;
  assert(l->sync_low <= mw_local__depth(key));
}

void mw_local__error(mw_storage_req_t *req, int status) {
  const mw_storage_req_local_t *l = &req->be.local;
  const mw_local_t *lo = mw_local(req->priv.st);
  assert(status < 0);
  const char *tmp = strrchr(l->tmp, '/');
  tmp = tmp != NULL ? tmp + 1 : l->tmp;
  mw_storage__set_error(req, "%s/%s: %s: %s%s%s%s", lo->root, req->priv.key,
                        mw_local_step_names[req->priv.step < MW_STEP_COUNT_ ? req->priv.step : 0],
                        strerror(-status), tmp[0] ? " (temp " : "", tmp, tmp[0] ? ")" : "");
}

void mw_local__done(mw_storage_req_t *req, int status) {
  mw_storage_req_local_t *l = &req->be.local;
  mw_local_t *lo = mw_local(req->priv.st);
  assert(l->fd < 0);
  assert(l->dirfd < 0);
  if (status == 0 && is_write(req) && lo->durable) {
    dircache_add(lo, l->dir);
    /* every directory the walk fsynced is durable with its ancestry now */
    unsigned depth = mw_local__depth(req->priv.key);
    char d[MW_STORAGE_LOCAL_PATH_BYTES];
    for (unsigned i = l->sync_parents ? l->sync_low : depth; i < depth; i++)
      if (mw_local__parent_prefix(req->priv.key, i, d, sizeof d)) dircache_add(lo, d);
  }
  if (req->priv.op == MW_OP_DELETE_PREFIX || req->priv.op == MW_OP_DELETE_ROOT)
    memset(lo->dircache, 0, sizeof lo->dircache);
  if (status < 0 && status != -EEXIST && status != -ENOENT) mw_local__error(req, status);
  mw_storage__done(req, status);
}

/* ---- open / close ---- */

static int pick_engine(mw_storage_t *st, mw_err_t *err) {
  static atomic_bool warned = false;
  if (st->cfg.backend == MW_STORAGE_THREADS) {
    st->be = &mw_storage__threads_ops;
    return 0;
  }
  int rc = st->fault.uring_refuse != 0 ? st->fault.uring_refuse : mw_local__uring_open(st);
  if (rc == 0) {
    st->be = &mw_storage__uring_ops;
    return 0;
  }
  if (st->cfg.backend == MW_STORAGE_URING)
    return mw_err_set(err, rc, "storage: io_uring refused: %s", strerror(-rc));
  if (!atomic_exchange(&warned, true))
    mw_log_warn("storage: io_uring unavailable (%s); using the libuv thread pool",
                strerror(-rc));
  st->be = &mw_storage__threads_ops;
  return 0;
}

static void local_free(mw_local_t *lo) {
  if (lo == NULL) return;
  if (lo->pl != NULL) mw_powerloss__detach(lo->pl);
  if (lo->rootfd >= 0) close(lo->rootfd);
  free(lo->root);
  free(lo);
}

int mw_storage__local_open(mw_storage_t *st, mw_err_t *err) {
  assert(st != NULL);
  assert(st->be_state == NULL);
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, fsync_metrics_register);
  const char *path = st->uri;
  if (strncmp(path, "file://", 7) == 0) path += 7;
  if (path[0] == '\0') return mw_err_set(err, -EINVAL, "storage: %s names no directory", st->uri);
  mw_local_t *lo = calloc(1, sizeof *lo);
  if (lo == NULL) return mw_err_set(err, -ENOMEM, "storage: out of memory");
  lo->rootfd = -1;
  lo->durable = st->cfg.durable;
  int rc = (lo->root = strdup(path)) != NULL ? 0 : -ENOMEM;
  if (rc < 0) {
    mw_err_set(err, rc, "storage: out of memory");
    goto fail;
  }
  if ((rc = mw_fs_mkdir_p(lo->root, 0755)) < 0) {
    mw_err_set(err, rc, "storage: mkdir %s: %s", lo->root, strerror(-rc));
    goto fail;
  }
  lo->rootfd = open(lo->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (lo->rootfd < 0) {
    rc = -errno;
    mw_err_set(err, rc, "storage: open %s: %s", lo->root, strerror(-rc));
    goto fail;
  }
  if (lo->durable && fsync(lo->rootfd) != 0) {
    rc = -errno;
    mw_err_set(err, rc, "storage: fsync %s: %s", lo->root, strerror(-rc));
    goto fail;
  }
  if (st->fault.power_loss != NULL) {
    if ((rc = mw_powerloss__attach(st->fault.power_loss, lo->rootfd)) < 0) {
      mw_err_set(err, rc, "storage: power_loss journal is for another root than %s", lo->root);
      goto fail;
    }
    lo->pl = st->fault.power_loss;
  }
  lo->submit_failures = st->fault.uring_submit_failures;
  st->be_state = lo;
  if ((rc = pick_engine(st, err)) < 0) {
    st->be_state = NULL;
    goto fail;
  }
  assert(st->be == &mw_storage__uring_ops || st->be == &mw_storage__threads_ops);
  return 0;
fail:
  local_free(lo);
  return rc;
}

/* Both engines end their close here (loop thread, nothing in flight). */
void mw_local__close_done(mw_storage_t *st, void (*done)(mw_storage_t *st)) {
  mw_local_t *lo = mw_local(st);
  assert(lo != NULL);
  assert(lo->uring == NULL);
  local_free(lo);
  st->be_state = NULL;
  done(st);
}
