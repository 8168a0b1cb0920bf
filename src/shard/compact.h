/*
 * compact.h — compaction of a table's SSTables into its base table
 * (memwal.md §10, §11; docs/engine.md "Compaction").
 *
 * Owns, per table: the compaction runs (one at a time), the policy timer,
 * the key-index cache of base data files, the requests of `memwalctl
 * compact`, and the per-shard compaction state (the generation the base
 * table records as compacted, when that commit happened, failures).
 * Borrows the table (its storage, schemas and shards); never touches a
 * shard's control slot, its manifest operation or its flusher: it reads
 * shard manifests with an operation of its own, so a claim, seal or flush
 * never waits for it.
 *
 * One run, for one shard ACTIVE here:
 *   1. read the shard manifest (latest) and the base table's latest version;
 *   2. pick the SSTables with generation > compacted_sstables[shard], oldest
 *      first, up to max_sstables / max_rows;
 *   3. read each (its manifest, data file, deletion file) and merge them
 *      (lsm_merge.h) on the thread pool: rows sorted by key + every key;
 *   4. write the rows as one new fragment (Lance 2.2, sstable.h's data-file
 *      writer), read it back (readback.h: a data file that does not decode
 *      to those rows fails the run, nothing is committed, the SSTables stay
 *      uncompacted) and its key index (keyindex.h);
 *   5. find the base rows holding those keys through the key index of every
 *      base data file (cached; read from `_memwald/keys/`, or built once
 *      from the data file and stored there), union them with each
 *      fragment's deletion file (a fully deleted fragment is removed);
 *   6. commit version+1 (base_update.h, base_store.h): new fragment, new
 *      deletion files, compacted_sstables[shard] = last generation, the
 *      Update transaction file. Lost race (another writer committed first):
 *      read the latest again, stop if that version already compacted any
 *      of our generations, else find the superseded rows again against it
 *      and retry (at most MW_COMPACT_MAX_ATTEMPTS).
 *
 * Policy: every interval_ms, a shard is compacted when it has min_sstables
 * uncompacted SSTables, or min_bytes of them, or its oldest uncompacted one
 * has waited max_age_ms. A failed run backs off (1 s doubling to 60 s).
 *
 * Status of a request (mw_compact_request): 0 when every owned ACTIVE shard
 * of the table has no uncompacted SSTable left (as of the request); the
 * first failure's status and reason otherwise; -ECANCELED when the table
 * closes first.
 */
#ifndef MW_SHARD_COMPACT_H
#define MW_SHARD_COMPACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/err.h"

#define MW_COMPACT_MAX_ATTEMPTS 16
#define MW_COMPACT_MAX_WAITERS 64
#define MW_COMPACT_REASON_BYTES MW_ERR_MSG_BYTES

struct mw_table;
typedef struct mw_compact mw_compact_t;

typedef struct mw_compact_config {
  bool enabled;                /* compaction = on (default) */
  uint32_t min_sstables;       /* start a run at this many uncompacted SSTables */
  uint64_t min_bytes;          /* ... or this many bytes of them (in_memory_bytes) */
  uint64_t max_age_ms;         /* ... or when the oldest has waited this long */
  uint32_t max_sstables;       /* per run */
  uint64_t max_rows;           /* per run (physical rows read) */
  uint64_t interval_ms;        /* policy check period */
  uint64_t keyindex_cache_bytes; /* memory for cached key indexes */
  uint64_t fragment_rows;      /* fragments below this many live rows are folded together */
  bool zstd;                   /* compaction_zstd: the base's new data files zstd-compressed (default) */
  /* compaction_keyindex_store_rows (65 536): key indexes of data files with
   * fewer rows are not stored in _memwald/keys/: rebuilding one from the
   * data file's key column (once per process, then cached) costs less than
   * the room it takes beside a small file (~12 bytes a row, against
   * LanceDB's ~20 for a narrow table) */
  uint64_t keyindex_store_rows;
} mw_compact_config_t;

void mw_compact_config_defaults(mw_compact_config_t *c);
/* Set `compaction`, `compaction_min_sstables`, `compaction_min_bytes`,
 * `compaction_max_age_ms`, `compaction_max_sstables`,
 * `compaction_max_rows`, `compaction_interval_ms`,
 * `compaction_keyindex_cache_bytes`, `compaction_fragment_rows`, `compaction_zstd`,
 * `compaction_keyindex_store_rows`. -ENOENT for another key, -EINVAL for a
 * bad value (reason in err). */
int mw_compact_config_set(mw_compact_config_t *c, const char *key, const char *value, mw_err_t *err);

typedef struct mw_compact_stats {
  uint64_t runs;               /* committed runs */
  uint64_t failures;           /* runs that failed (retried later) */
  uint64_t conflicts;          /* base commits lost to another writer */
  uint64_t sstables;           /* SSTables compacted */
  uint64_t rows_in;            /* live SSTable rows merged */
  uint64_t rows_written;       /* rows written to new fragments */
  uint64_t rows_masked;        /* base rows newly deleted */
  uint64_t keyindex_built;     /* key indexes built from data files */
  uint64_t keyindex_read;      /* key indexes read from storage (not cached) */
  uint64_t folded;             /* small fragments folded into new ones */
  uint64_t base_version;       /* newest base version seen */
  uint64_t last_run_ms;        /* duration of the last committed run */
  uint64_t total_run_ms;       /* of every committed run */
  uint64_t base_fragments;     /* fragments of the base the last committed run started from */
  bool running;
  char last_error[MW_COMPACT_REASON_BYTES];
} mw_compact_stats_t;

/* A shard's compaction state, for status and for GC. */
typedef struct mw_compact_shard {
  uint64_t compacted_gen;      /* compacted_sstables[shard] in the newest base seen */
  uint64_t committed_ms;       /* uv_now() when this process committed/saw it; 0 unknown */
  uint64_t uncompacted;        /* SSTables listed above compacted_gen (last look) */
  uint64_t uncompacted_bytes;
  uint32_t failures;           /* consecutive failed runs */
} mw_compact_shard_t;

typedef void (*mw_compact_cb)(void *arg, int status, const char *reason);

/* No I/O, no handle: free with mw_compact_free if never started. */
int mw_compact_new(struct mw_table *t, const mw_compact_config_t *cfg, mw_compact_t **out);
/* Arm the policy timer (the loop's handle). */
void mw_compact_start(mw_compact_t *c);
/* Stop: no new run; a running one finishes its storage step and stops
 * (nothing half-committed: the manifest put is the commit). cb(arg) when
 * idle, always later on the loop. Waiting requests get -ECANCELED. */
void mw_compact_stop(mw_compact_t *c, void (*cb)(void *arg), void *arg);
/* After stop's callback (or without a start). */
void mw_compact_free(mw_compact_t *c);
/* Compact every owned ACTIVE shard now; cb once all are done. -EBUSY when
 * MW_COMPACT_MAX_WAITERS requests wait, -ESHUTDOWN when stopped. */
int mw_compact_request(mw_compact_t *c, mw_compact_cb cb, void *arg);
void mw_compact_stats(const mw_compact_t *c, mw_compact_stats_t *out);
/* The state of shard `id`; false when the compactor has not seen it. */
bool mw_compact_shard_state(const mw_compact_t *c, const uint8_t id[16], mw_compact_shard_t *out);
/* Tests only (NULL otherwise): called on the pool thread at the start of
 * every merge job, before any work; it may block to hold a run mid-merge. */
extern void (*mw_compact_merge_hook_for_tests)(void);
/* Tests only (NULL otherwise): called on the pool thread after each base
 * fragment's key lookup; a negative errno fails that lookup with it. */
extern int (*mw_compact_find_hook_for_tests)(void);

#endif
