/*
 * local_int.h — private to the local-disk backends (local.c,
 * backend_uring.c, backend_threads.c, powerloss.c).
 *
 * Both engines share one state (mw_local_t, the storage's be_state): the root
 * directory fd every path is relative to, the cache of directories whose
 * ancestry this instance has made durable, and, under io_uring, the ring.
 * They share the step names (local.h), the temp-name and path helpers, and
 * the step wrapper that feeds the fsync metrics and the power-loss journal.
 */
#ifndef MW_STORAGE_LOCAL_INT_H
#define MW_STORAGE_LOCAL_INT_H

#include <dirent.h>
#include <sys/stat.h>

#include "storage/local.h"
#include "storage/storage_int.h"

/* Direct-mapped: a table's hot directories (two per shard: wal/ and
 * manifest/, 2 048 for 1 024 buckets) must fit, or nearly every put
 * fsyncs its whole ancestry again (128 KiB per table storage). */
#define MW_LOCAL_DIRCACHE_SLOTS 16384
#define MW_LOCAL_MKDIR_TRIES 4
_Static_assert(MW_LOCAL_MKDIR_TRIES < UINT8_MAX, "the request's mkdir_tries is a uint8_t");
_Static_assert(MW_STORAGE_KEY_MAX_SEGMENTS < UINT16_MAX, "the request's walk is a uint16_t");

typedef struct mw_local {
  char *root;                   /* the directory (from the URI) */
  int rootfd;
  bool durable;                 /* cfg.durable: fsync files and directories */
  mw_powerloss_t *pl;           /* fault.power_loss, attached at open */
  uint32_t submit_failures;     /* test hook: io_uring_submit failures left */
  void *uring;                  /* backend_uring.c's state, NULL under threads */
  /* hashes of directories known durable (their whole ancestry fsynced) */
  uint64_t dircache[MW_LOCAL_DIRCACHE_SLOTS];
} mw_local_t;

static inline mw_local_t *mw_local(const mw_storage_t *st) { return st->be_state; }

/* Engines (io_uring, thread pool): set up on top of mw_local_t. */
int mw_local__uring_open(mw_storage_t *st);
/* Both engines end their close here: detach the journal, close the root,
 * free mw_local_t, then done(st). */
void mw_local__close_done(mw_storage_t *st, void (*done)(mw_storage_t *st));

/* Before every local step: the front's hook and injected faults, then the
 * power-loss trip and the snapshot before an fsync. */
int mw_local__step(mw_storage_req_t *req, mw_local_step_t step);
/* After the syscall of OPEN (rc = the fd), MKDIR (path in local.scratch),
 * FSYNC and DIRSYNC (local.fd / local.dirfd still open): metrics, and for
 * the fsyncs the power-loss journal (which learns of new inodes by itself,
 * not from OPEN/MKDIR). Returns rc, or -EIO for an fsync that completed
 * after a simulated power cut. */
int mw_local__step_end(mw_storage_req_t *req, mw_local_step_t step, int rc);
/* The fsync metric of the step about to run starts now (io_uring's linked
 * tail, whose steps are all prepared before the first runs). */
void mw_local__sync_began(mw_storage_req_t *req);
/* Prepare a request for a local engine (loop thread, at submission): its
 * directory, whether its ancestors need fsyncs. */
void mw_local__prepare(mw_storage_t *st, mw_storage_req_t *req);
/* Complete a request (loop thread): directory cache, then the front. */
void mw_local__done(mw_storage_req_t *req, int status);
/* An engine's mkdir created the directory at component index `level` (>= 1):
 * its entry in the parent must be made durable too (sync_parents); one at or
 * above sync_low means the cache was wrong, so the walk goes to the root. */
void mw_local__made_dir(mw_storage_req_local_t *l, unsigned level);
/* Record the failure reason ("<root>/<path>: <step>: <strerror>"). */
void mw_local__error(mw_storage_req_t *req, int status);

/* Thread-pool engine: run one request synchronously (a pool thread). */
int mw_local__sync_run(mw_storage_req_t *req);
/* Queue req on the libuv pool (both engines: walks have no io_uring op). */
void mw_local__queue_work(mw_storage_t *st, mw_storage_req_t *req);

/* Path helpers: the prefix of `path` made of its first n '/'-separated
 * components into out ("." for n = 0); false when path has fewer than n+1
 * components (so the prefix is not a parent). */
bool mw_local__parent_prefix(const char *path, unsigned n, char *out, size_t cap);
unsigned mw_local__depth(const char *path);
/* Fill req's local.tmp with "<dir>/.tmp-<32 hex>". */
void mw_local__tmp_name(mw_storage_req_t *req);

/* Directory walks (the thread-pool engine's list, sweep and delete_root,
 * the power-loss model's snapshot and cut). *d over the directory open as
 * dirfd, or -errno with dirfd closed (a failed fdopendir leaves it open). */
int mw_local__opendir(int dirfd, DIR **d);
/* Each entry of the directory open as dirfd but "." and "..", in readdir
 * order, with its fstatat (AT_SYMLINK_NOFOLLOW; an entry gone before it is
 * skipped): fn(ctx, dirfd, name, &sb) until fn returns non-zero, which is
 * returned (0 after the last entry). dirfd is closed, also on failure. */
typedef int (*mw_local_entry_fn)(void *ctx, int dirfd, const char *name, const struct stat *sb);
int mw_local__each_entry(int dirfd, mw_local_entry_fn fn, void *ctx);

/* Power-loss journal (powerloss.c) */
int mw_powerloss__attach(mw_powerloss_t *pl, int rootfd);
void mw_powerloss__detach(mw_powerloss_t *pl);
void mw_powerloss__before(mw_powerloss_t *pl, mw_storage_req_t *req, mw_local_step_t step);
int mw_powerloss__after(mw_powerloss_t *pl, mw_storage_req_t *req, mw_local_step_t step,
                        int rc);

#endif
