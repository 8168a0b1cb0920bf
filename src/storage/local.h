/*
 * local.h — what the local-disk backends (io_uring, thread pool) show to
 * tests and benchmarks: the names of their steps and the power-loss model.
 * Nothing in the daemon's data path includes this; it works through
 * storage.h and, for test hooks, fault.h.
 *
 * Steps: every operation is a fixed sequence of these syscalls
 * (docs/storage.md, "Local disk"); fault injection and the step hook see
 * them by these numbers on a local storage.
 *
 * Power loss (powerloss.c): a journal for one root directory models POSIX
 * durability: a file's content is durable as of its last completed fsync
 * (never fsynced: empty), and a directory's entries as of the start of its
 * last completed fsync (a new directory's own entry only once its parent is
 * fsynced). Storages opened with fault.power_loss = journal feed it from
 * their steps.
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
 * MW_POWERLOSS_MAX_PENDING fsyncs in flight.
 */
#ifndef MW_STORAGE_LOCAL_H
#define MW_STORAGE_LOCAL_H

#include "storage/fault.h"

typedef enum mw_local_step {
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
  MW_STEP_SCAN,       /* directory walk (list, delete_prefix, sweep, delete_root) */
  MW_STEP_RMDIR,      /* rmdir of an emptied directory (delete_root) */
  MW_STEP_COUNT_
} mw_local_step_t;
_Static_assert(MW_STEP_COUNT_ <= MW_STORAGE_MAX_STEPS, "step masks are 32 bits");
#define MW_STEP_ALL ((1u << MW_STEP_COUNT_) - 1)
/* The local steps' names ("open", "dirsync", ...), indexed by mw_local_step_t. */
extern const char *const mw_local_step_names[MW_STEP_COUNT_];

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
