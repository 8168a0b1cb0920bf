/*
 * gc_base.h — garbage collection of the base table's history: old versions
 * under `_versions/` and the data, deletion, transaction and key-index files
 * only they reference (docs/engine.md "Base-table history"). Private to
 * gc.c, which runs it as one of its jobs.
 *
 * The rules are Lance's cleanup_old_versions (LanceDB optimize's
 * cleanupOlderThan), written for our own loop:
 *
 *   old       a version whose manifest timestamp is older than the
 *             retention (gc_history_retention_ms), that is not the newest
 *             version and that no tag (`_refs/tags/<name>.json`) names
 *   retained  every other version
 *   deleted   the manifests of old versions, and every file an old version
 *             references that no retained version references: data files
 *             (`data/<path>`, with memwald's `_memwald/keys/<stem>.keys`),
 *             deletion files (`_deletions/<frag>-<read_version>-<id>.<ext>`),
 *             transaction files (`_transactions/<name>`)
 *   kept      files no manifest references (an uncommitted writer's, or a
 *             crashed one's): they may belong to a commit in progress, and a
 *             listing gives no age to tell (Lance waits 7 days by mtime)
 *
 * A concurrent writer (LanceDB, our compactor, a peer daemon's) builds its
 * commit on the newest version, which is retained, so it only ever
 * references files of a retained version or files of its own that no
 * manifest references yet: neither is deleted. That holds only if the plan
 * has the keys of every version it retains: a listed version whose manifest
 * is gone when read was deleted by another cleanup (a peer daemon's,
 * LanceDB's), which means a version newer than our listing exists; the run
 * then deletes nothing (stats.stale_listings) and the next one lists again.
 * Files go before the manifests that reference them, so a crash part-way
 * leaves old manifests whose files are (partly) gone — never files no
 * manifest names — and the next run finishes the job.
 *
 * One run: LIST _versions/, LIST _refs/tags/ (GET each tag), GET every
 * manifest not seen before (cached by version: versions are immutable),
 * then HEAD + DELETE each victim file (bytes counted), then DELETE the old
 * manifests, oldest first. Limits below; a table past them is refused
 * with a log line (nothing deleted).
 *
 * Errors: negative errno; the run stops at the first failed request (what
 * was deleted stays deleted; a rerun continues).
 */
#ifndef MW_SHARD_GC_BASE_H
#define MW_SHARD_GC_BASE_H

#include <stdint.h>

#include "storage/storage.h"

#define MW_GC_BASE_MAX_VERSIONS 65536
#define MW_GC_BASE_MAX_TAGS 64
#define MW_GC_BASE_BATCH 32           /* storage requests in flight per run */
#define MW_GC_BASE_MAX_VICTIMS 1000000

typedef struct mw_gc_base mw_gc_base_t;

typedef struct mw_gc_base_stats {
  uint64_t runs;
  uint64_t versions_deleted;    /* base manifests deleted */
  uint64_t files_deleted;       /* data, deletion, transaction, key-index files */
  uint64_t bytes_deleted;       /* of those files and the manifests */
  uint64_t versions_retained;   /* at the end of the last run */
  uint64_t stale_listings;      /* runs that deleted nothing: a listed version was gone when read */
} mw_gc_base_stats_t;

typedef void (*mw_gc_base_cb)(void *arg, int status, const char *what);

/* name: for logs (the table's path). No I/O. */
int mw_gc_base_new(mw_storage_t *st, const char *name, mw_gc_base_t **out);
void mw_gc_base_free(mw_gc_base_t *b);
/* One run with this retention; cb once, later, on the loop (0 or the first
 * failure, `what` naming the step). A negative return: no callback. */
int mw_gc_base_run(mw_gc_base_t *b, uint64_t retention_ms, mw_gc_base_cb cb, void *arg);
void mw_gc_base_stats(const mw_gc_base_t *b, mw_gc_base_stats_t *out);
/* Tests only (NULL otherwise): called on the loop once `_versions/` is
 * listed, before any manifest is read (name: the table's, as in logs); it
 * may change the table's files to stage a race with another cleanup. */
extern void (*mw_gc_base_listed_hook_for_tests)(const char *name);

#endif
