/*
 * gc.h — garbage collection of a table's MemWAL history: WAL entries every
 * reader and writer is done with, and SSTables the base table has absorbed
 * (docs/engine.md "Garbage collection", with the fencing argument).
 *
 * Owns, per table: a timer, one job at a time, and per shard the GC state
 * (the lowest WAL position not yet examined, the SSTable directories waiting
 * for their grace period, counters). Borrows the table, its shards (only
 * those ACTIVE here are collected, under their epoch) and the compactor's
 * per-shard state (which generation the base records as compacted, since
 * when). Uses its own manifest operation, never a shard's, on the shard's
 * manifest store: a stop of the shard (seal, release, abort) waits for a
 * trim in flight there (shard.c progress), and GC starts none meanwhile.
 *
 * Per shard, in this order, one step per tick:
 *   scan    once per process: LIST `_mem_wal/<uuid>/` for the lowest WAL
 *           position, and SSTable directories of compacted generations that
 *           no manifest lists any more (left by a crash after a trim, or by
 *           a failed flush): they wait one grace period, then go.
 *   trim    when the base has recorded generation G compacted for at least
 *           gc_grace_ms: commit_update of the shard manifest without the
 *           SSTables of generation <= G (readers skip them already); their
 *           directories wait one more grace period.
 *   delete  directories whose grace period is over: delete_prefix.
 *   wal     entries below min(replay_after, last_seen) of the newest
 *           manifest: each is deleted unless it is a fence sentinel (no
 *           record batch), which is kept forever. An entry this process
 *           wrote in its epoch is known to hold rows; any other is read
 *           (its first 4 KiB) to tell. Only positions a listing of wal/
 *           shows are read (the scan's, then a new one for positions
 *           written after it), so deleted ones cost nothing after a
 *           restart.
 *   mf      shard-manifest versions below the newest
 *           gc_manifest_keep_versions: a floor F is proposed once
 *           version_hint.json names F or later (we rewrite it if not); after
 *           gc_manifest_grace_ms, and with the hint checked again before each
 *           batch, versions below F are deleted, oldest first
 *           (docs/engine.md "Shard manifest history").
 * And per table, every gc_history_interval_ms: the base table's old versions
 * and the files only they reference (gc_base.h, gc_history_retention_ms).
 *
 * Why that keeps fencing sound (docs/engine.md has the whole argument): a
 * fenced writer only ever writes at its own next position, which is the
 * slot its fencer's sentinel took (or an entry that sits above one); GC
 * deletes no sentinel and nothing at or above min(replay_after, last_seen),
 * so that slot stays taken and the stale put collides and learns it is
 * fenced. Replay starts after replay_after, and tip discovery (from
 * last_seen, or a listing's maximum) only needs entries GC keeps.
 *
 * Errors are logged and retried next tick; nothing here fails a write.
 */
#ifndef MW_SHARD_GC_H
#define MW_SHARD_GC_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"

#define MW_GC_MAX_BATCH 64          /* storage requests per step */
#define MW_GC_SNIFF_BYTES 4096      /* a sentinel is ~200 bytes */
#define MW_GC_MAX_PENDING_DIRS 65536
#define MW_GC_MANIFEST_MIN_BATCH 8 /* propose a floor once this many versions can go */

struct mw_table;
typedef struct mw_gc mw_gc_t;

typedef struct mw_gc_config {
  bool enabled;                 /* gc = on (default) */
  uint64_t grace_ms;            /* gc_grace_ms, default 60 000 */
  uint64_t interval_ms;         /* gc_interval_ms, default 1 000 */
  uint64_t manifest_keep;       /* gc_manifest_keep_versions, default 16 */
  uint64_t manifest_grace_ms;   /* gc_manifest_grace_ms, default 600 000 */
  uint64_t history_retention_ms; /* gc_history_retention_ms, default 3 600 000 */
  uint64_t history_interval_ms; /* gc_history_interval_ms, default 60 000 */
} mw_gc_config_t;

void mw_gc_config_defaults(mw_gc_config_t *c);
/* `gc`, `gc_grace_ms`, `gc_interval_ms`, `gc_manifest_keep_versions`,
 * `gc_manifest_grace_ms`, `gc_history_retention_ms`,
 * `gc_history_interval_ms`; -ENOENT for another key. */
int mw_gc_config_set(mw_gc_config_t *c, const char *key, const char *value, mw_err_t *err);

typedef struct mw_gc_stats {
  uint64_t wal_deleted;         /* WAL entries deleted */
  uint64_t wal_bytes_deleted;
  uint64_t sentinels_kept;      /* fence sentinels passed over (kept) */
  uint64_t wal_reads;           /* WAL entries read to tell a sentinel from data */
  uint64_t wal_reads_absent;    /* of those, found gone (the listing was older) */
  uint64_t wal_lists;           /* listings of wal/ after the scan's */
  uint64_t trims;               /* shard-manifest commits that dropped SSTables */
  uint64_t sstables_trimmed;
  uint64_t dirs_deleted;        /* SSTable directories deleted */
  uint64_t manifests_deleted;   /* shard-manifest versions deleted */
  uint64_t hints_rewritten;     /* version_hint.json rewritten before collecting */
  uint64_t base_runs;           /* base-table history runs finished */
  uint64_t base_versions_deleted;
  uint64_t base_files_deleted;
  uint64_t base_bytes_deleted;
  uint64_t base_versions_retained;
  uint64_t base_stale_listings; /* runs that deleted nothing: a listed version vanished (gc_base.h) */
  uint64_t failures;
  char last_error[MW_ERR_MSG_BYTES];
} mw_gc_stats_t;

typedef struct mw_gc_shard_stats {
  uint64_t wal_first;           /* lowest WAL position that may still exist (or a sentinel) */
  uint64_t horizon;             /* min(replay_after, last_seen): GC deletes below it */
  uint64_t trimmed_gen;         /* SSTables up to this generation are unlisted */
  uint32_t dirs_waiting;        /* SSTable directories in their grace period */
  uint64_t manifest_first;      /* lowest shard-manifest version that may still exist */
  uint64_t manifest_floor;      /* proposed floor (0: none) */
} mw_gc_shard_stats_t;

/* No I/O, no handle: free with mw_gc_free if never started. */
int mw_gc_new(struct mw_table *t, const mw_gc_config_t *cfg, mw_gc_t **out);
/* Arm the timer (the loop's handle). */
void mw_gc_start(mw_gc_t *g);
/* No new job; the running one finishes. cb(arg) later on the loop. */
void mw_gc_stop(mw_gc_t *g, void (*cb)(void *arg), void *arg);
void mw_gc_free(mw_gc_t *g);
void mw_gc_stats(const mw_gc_t *g, mw_gc_stats_t *out);
bool mw_gc_shard_stats(const mw_gc_t *g, const uint8_t id[16], mw_gc_shard_stats_t *out);
/* Tests: run the next step now instead of at the next tick. */
void mw_gc_kick(mw_gc_t *g);

#endif
