/*
 * shard.h — one MemWAL shard's writer: the state machine of docs/design.md
 * (NEW → CLAIMING → REPLAYING → ACTIVE; parked FENCED / SEALED / CLOSED /
 * FAILED) on the libuv loop.
 *
 * Owns: the shard's manifest store, WAL (group commit), the active MemTable,
 * the frozen MemTables waiting for their flush, the flusher, the writes
 * waiting for durability and the writes waiting for room (backpressure).
 * Borrows: the loop, the table's storage (rooted at the table directory) and
 * the table schema (base columns with Lance field ids and PK markers, then
 * `_tombstone: bool not null`).
 *
 * Writes: mw_shard_write() moves a batch of the table schema in. It either
 * returns a negative errno at once (the callback will not run) or 0, and then
 * the callback runs exactly once, later, on the loop:
 *   0          acknowledged (durable_write: in a durable WAL entry; else
 *              inserted in the MemTable)
 *   -ESTALE    fenced: a peer claimed the shard; the reason names its epoch
 *   -EROFS     sealed (drop in flight)
 *   -ESHUTDOWN the shard was released / closed
 *   -EIO etc.  the WAL failed (poisoned): re-claim to replay
 * Immediate errors: -EINVAL (batch does not match the schema), -EFBIG
 * (a batch over MW_SHARD_MAX_BATCH_BYTES), -EAGAIN
 * (overloaded: the backpressure queue is full), the parked state's status.
 * A write arriving before the claim (lazy shard) starts the claim and waits.
 *
 * Backpressure: above max_unflushed_memtable_bytes (active + frozen) writes
 * wait in a queue of at most max_queued_writes; mw_shard_backpressured()
 * and the on_backpressure event tell the front end to stop reading.
 *
 * Control operations (claim, flush, seal, unseal, release, drop) take a
 * completion (status, reason); one runs at a time (-EBUSY otherwise).
 *
 * Self-recovery: a shard parked FAILED (an I/O error on a WAL put, a claim,
 * a replay read...) is claimed again by the engine itself after 1 s,
 * doubling to max_fault_retry_interval_ms (default 30 s; 0 = never). The
 * claim replays the WAL, so every acknowledged row is kept and nothing that
 * was refused is acknowledged later. While FAILED, writes are refused at
 * once with the park status and a reason naming the error and the time to
 * the next attempt; while the automatic claim runs they queue (at most
 * max_queued_writes). FENCED, SEALED and CLOSED shards are never re-claimed
 * automatically. mw_shard_fault() tells the current fault episode (also a
 * failing flush, which is retried while the shard stays ACTIVE).
 */
#ifndef MW_SHARD_SHARD_H
#define MW_SHARD_SHARD_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "common/err.h"
#include "lance/batch.h"
#include "lance/sstable.h"
#include "shard/flush.h"
#include "shard/manifest_store.h"
#include "shard/memtable.h"
#include "shard/wal.h"
#include "storage/storage.h"

#define MW_SHARD_MAX_FROZEN 64
#define MW_SHARD_REASON_BYTES MW_ERR_MSG_BYTES
#define MW_SHARD_BP_LOG_INTERVAL_MS 30000
/* A single write larger than this is refused (-EFBIG): it must fit one WAL
 * entry, and entries must fit one storage object (256 MiB by default). */
#define MW_SHARD_MAX_BATCH_BYTES ((uint64_t)64 << 20)
/* Automatic re-claim of a FAILED shard: the first attempt after this long
 * (or max_fault_retry_interval_ms if smaller), doubling. */
#define MW_SHARD_RECLAIM_BASE_MS 1000
#define MW_SHARD_FAULT_OP_BYTES 16

typedef enum mw_shard_state {
  MW_SS_NEW = 0,     /* not claimed yet */
  MW_SS_CLAIMING,
  MW_SS_REPLAYING,
  MW_SS_ACTIVE,
  MW_SS_FENCED,      /* parked: a peer holds a newer epoch */
  MW_SS_SEALED,      /* parked: manifest status SEALED */
  MW_SS_CLOSED,      /* parked: released / dropped */
  MW_SS_FAILED,      /* parked: I/O failure or poisoned WAL; claim again */
} mw_shard_state_t;

const char *mw_shard_state_name(mw_shard_state_t s);

/* ShardWriterConfig (memwal.md §9) plus memwald's own knobs. */
typedef struct mw_shard_config {
  bool durable_write;
  uint64_t max_wal_buffer_size;        /* bytes */
  uint32_t max_wal_flush_interval_ms;
  uint64_t max_memtable_size;          /* bytes (Lance's estimate) */
  uint64_t max_memtable_rows;
  uint64_t max_memtable_batches;
  uint32_t manifest_scan_batch_size;
  uint64_t max_unflushed_memtable_bytes;
  /* How often the daemon logs that a shard's writes wait on backpressure,
   * and its shards' statistics (daemon/stats.h); 0 = never. */
  uint64_t backpressure_log_interval_ms;
  uint64_t stats_log_interval_ms;
  /* memwald */
  uint32_t max_wal_inflight;           /* entries written at once, 1..8 */
  bool wal_zstd;                       /* wal_compression = zstd */
  bool sstable_zstd;                   /* key sstable_zstd: zstd data pages in SSTables */
  uint32_t max_queued_writes;          /* backpressure queue */
  /* Freeze (and so flush) a MemTable whose oldest row is this old: LanceDB
   * readers never read the WAL, so this bounds how long an acknowledged row
   * stays invisible to them. 0 = never. Default 10 000. */
  uint64_t max_memtable_age_ms;
  /* A FAILED shard is re-claimed after 1 s, doubling up to this (also the
   * cap of the flush retry back-off when smaller than 10 s). 0 = no
   * automatic re-claim (an operator's `claim` only). Default 30 000. */
  uint64_t max_fault_retry_interval_ms;
  uint32_t shard_spec_id;              /* for a fresh claim (LanceDB: 1) */
  /* Zone write seeds v1 in every SSTable data file (table key
   * zone_write_seeds; docs/sstable.md): makes the SSTables unreadable to
   * LanceDB 0.39.0, which refuses FLAG_ZONE_WRITE_SEEDS. */
  bool zone_write_seeds;
  uint64_t zone_seed_rows_per_zone;    /* 0 = 8192 */
  uint64_t sstable_seed;               /* tests: deterministic SSTable names */
  /* The table's maintained vector indexes: every SSTable gets its own
   * IVF_HNSW_SQ index of each (docs/indexes.md). Names point into the
   * table's metadata, which outlives its shards. */
  mw_sstable_vindex_t vindexes[MW_SSTABLE_MAX_VINDEXES];
  size_t n_vindexes;
  /* The maintained BTree indexes on columns mw_btree_type_ok accepts: every
   * SSTable gets its own BTree of each (sindex.h). */
  mw_sstable_sindex_t sindexes[MW_SSTABLE_MAX_SINDEXES];
  size_t n_sindexes;
  /* Benches only (mw_table_opts_t.skip_readback, no config key): flushes
   * and compactions publish their files without reading them back. */
  bool skip_readback;
} mw_shard_config_t;

/* Lance's ShardWriterConfig defaults, except max_wal_flush_interval_ms = 1
 * (memwald's group commit) and our own knobs. */
void mw_shard_config_defaults(mw_shard_config_t *c);
/* Set one key by its writer_config_defaults name (memwal.md §9) or one of
 * ours (max_wal_inflight, wal_compression, max_queued_writes). Returns 0,
 * -ENOENT for an unknown key, -EINVAL for a bad value (reason in err). */
int mw_shard_config_set(mw_shard_config_t *c, const char *key, const char *value, mw_err_t *err);

typedef struct mw_shard mw_shard_t;
typedef struct mw_shard_write mw_shard_write_t;
typedef void (*mw_shard_write_cb)(mw_shard_write_t *w, int status, const char *reason);
typedef void (*mw_shard_done_cb)(mw_shard_t *s, int status, const char *reason, void *arg);

struct mw_shard_write {
  void *data;                 /* the caller's */
  /* private */
  mw_shard_t *shard;
  mw_shard_write_cb cb;
  mw_batch_t batch;           /* while queued before insert */
  uint64_t seq;
  int status;
  bool barrier;               /* mw_shard_sync: no rows, waits for durability */
  mw_shard_write_t *next;
};

typedef struct mw_shard_mt {
  mw_memtable_t m;
  uint64_t seq_last;          /* newest write seq inserted (0: none / replayed) */
  uint64_t covered;           /* flush: WAL positions covered */
} mw_shard_mt_t;

/* The current fault episode: from the first failure until the shard is
 * ACTIVE again (or, for a flush, until a flush commits). */
typedef struct mw_shard_fault {
  int status;                /* -errno of the last failure; 0 = no fault */
  char op[MW_SHARD_FAULT_OP_BYTES]; /* "wal", "claim", "replay", "flush", ... */
  char error[MW_SHARD_REASON_BYTES]; /* the last failure's reason */
  uint64_t since_ms;         /* uv_now() of the episode's first failure */
  uint32_t retries;          /* recovery attempts that failed so far */
  uint64_t next_retry_ms;    /* uv_now() of the next attempt; 0 = running / none */
} mw_shard_fault_t;

typedef struct mw_shard_stats {
  mw_shard_state_t state;
  uint64_t epoch;
  uint64_t manifest_version;
  uint64_t wal_next_position;
  uint64_t replay_after;
  uint64_t generation;         /* active MemTable's generation */
  int64_t memtable_rows;
  int64_t memtable_bytes;
  uint32_t frozen;
  uint64_t sstables;
  bool sealed;                 /* manifest status */
  bool backpressured;
  uint64_t writes_acked, rows_acked, wal_entries, flushes;
  /* record batches (and their message bytes) the WAL wrote as an ARROW
   * frame's messages came, against those it encoded (shard/wal.h) */
  uint64_t wal_batches_passed_through, wal_bytes_passed_through;
  uint64_t wal_batches_encoded, wal_bytes_encoded;
  uint32_t queued_writes, waiting_acks;
  uint64_t recoveries;         /* fault episodes ended by the engine itself */
} mw_shard_stats_t;

struct mw_shard {
  void *data;
  void (*on_backpressure)(mw_shard_t *s, bool on);
  /* Called each time the shard becomes ACTIVE (a claim or unseal done,
   * its WAL replayed; s->epoch is the epoch it holds). */
  void (*on_active)(mw_shard_t *s);
  /* private */
  uv_loop_t *loop;
  mw_storage_t *st;
  const mw_schema_t *schema;
  mw_shard_config_t cfg;
  mw_shard_state_t state;
  char id_str[MW_UUID_STR_BYTES];
  char reason[MW_SHARD_REASON_BYTES]; /* why parked */
  int park_status;
  uint64_t epoch;
  mw_mstore_t ms;
  mw_mstore_op_t op;          /* claim, seal, unseal */
  mw_shard_manifest_t claimed;
  bool wal_ready;
  mw_wal_t wal;
  mw_wal_reader_t reader;
  uint64_t replay_pos;
  uint64_t replay_max_epoch;  /* highest entry epoch seen in this replay */
  bool replay_waiting;        /* paused for a flush during replay */
  mw_flush_t flush;
  mw_shard_mt_t *active;
  mw_shard_mt_t *frozen[MW_SHARD_MAX_FROZEN];
  uint32_t n_frozen;
  uint64_t seq, durable_seq;
  /* writes inserted, waiting for their WAL entry (seq order) */
  mw_shard_write_t *ack_head, *ack_tail;
  /* writes not yet inserted (claiming / backpressure) */
  mw_shard_write_t *q_head, *q_tail;
  uint32_t n_queued, n_waiting;
  /* completions to run on the next loop turn */
  mw_shard_write_t *done_head, *done_tail;
  uv_timer_t kick;
  /* housekeeping: the MemTable age bound and flush retries */
  uv_timer_t timer;
  uint64_t active_since_ms;   /* uv_now() of the active MemTable's first row, 0 = empty */
  uint64_t flush_retry_at_ms; /* 0 = no retry pending */
  uint32_t flush_failures;    /* consecutive failed flush attempts */
  uint64_t flush_started_ms;  /* for memwald_flush_seconds */
  uint64_t wal_bytes_counted; /* WAL bytes already added to the metrics */
  uint64_t wal_path_counted[4]; /* wal passed_through, passed_bytes, encoded, encoded_bytes: ditto */
  bool backpressured;
  uint64_t bp_logged_ms;
  /* the one control operation */
  int ctl;
  mw_shard_done_cb ctl_cb;
  void *ctl_arg;
  uint64_t ctl_gen;           /* flush: done when generations <= this are flushed */
  int ctl_status;
  char ctl_reason[MW_SHARD_REASON_BYTES];
  bool ctl_pending_done;
  /* one flush asked for while a flush runs (an operator's after recovery's):
   * started when that one has answered, so it is never refused as busy */
  mw_shard_done_cb flush_next_cb;
  void *flush_next_arg;
  bool stopping;              /* seal/release: refuse writes */
  bool hold_age_flush;        /* mw_shard_hold_age_flush: the age bound freezes nothing */
  mw_storage_req_t dreq;      /* drop */
  uint64_t writes_acked, rows_acked, flushes;
  /* faults and self-recovery */
  mw_shard_fault_t fault;
  uint64_t reclaim_at_ms;     /* automatic re-claim due; 0 = none */
  bool auto_claim;            /* the running claim is the engine's own */
  bool claim_checking;        /* an operator's claim of an ACTIVE shard reads the manifest */
  uint64_t claim_retry_at_ms; /* that claim, fenced, waits for the old epoch's I/O */
  uint64_t claim_retry_until_ms;
  uint64_t recoveries;
  bool closing;
  void (*close_cb)(mw_shard_t *s);
};

/* No I/O. schema and storage must outlive the shard. */
int mw_shard_init(mw_shard_t *s, uv_loop_t *loop, mw_storage_t *st, const mw_schema_t *schema,
                  const uint8_t shard_id[16], const mw_shard_config_t *cfg, mw_err_t *err);
/* Release the loop handles; cb runs when done. The shard must be parked
 * (NEW, FENCED, SEALED, CLOSED, FAILED) with no storage request in flight:
 * -EBUSY otherwise. Queued writes fail with -ESHUTDOWN. */
int mw_shard_close(mw_shard_t *s, void (*cb)(mw_shard_t *s));

int mw_shard_write(mw_shard_t *s, mw_shard_write_t *w, mw_batch_t *batch, mw_shard_write_cb cb);
/* A durability barrier (the protocol's SYNC): cb(w, 0) once every write
 * submitted before it is in a durable WAL entry — with durable_write =
 * false too, where writes are acknowledged before that. Queued behind
 * writes not yet inserted; cuts the pending WAL entry at once. cb gets the
 * park status if the shard is parked (fenced, failed) before its writes
 * became durable. Returns -EAGAIN when the write queue is full, the park
 * status when parked with writes that never became durable. */
int mw_shard_sync(mw_shard_t *s, mw_shard_write_t *w, mw_shard_write_cb cb);

/* NEW/FENCED/CLOSED/FAILED → CLAIMING → REPLAYING → ACTIVE (cb then).
 * ACTIVE: the shard manifest is read first, since an idle shard notices a
 * peer's newer epoch only at its next put. No newer claim: cb(-EALREADY,
 * "… already ACTIVE here at epoch N …"). Fenced (found by the read, or by a
 * WAL put meanwhile): the shard parks FENCED and is claimed back once the old
 * epoch's put or flush in flight has finished (cb as above; cb(-EBUSY, "…
 * claim again") if that takes over 30 s). FENCED/FAILED/CLOSED with the old
 * epoch's I/O still in flight: the same wait. -EROFS if SEALED; -EALREADY
 * at once while claiming or replaying; -EBUSY while another control runs. */
int mw_shard_claim(mw_shard_t *s, mw_shard_done_cb cb, void *arg);
/* Freeze the active MemTable; cb when every frozen MemTable is committed.
 * While a flush runs (recovery's after a replay, say), one more flush is
 * queued behind it and begins when it has answered, so it covers every row
 * acknowledged by the call; a second one queued then gets -EBUSY, as does
 * any flush while another control (claim, seal, release) runs. */
int mw_shard_flush(mw_shard_t *s, mw_shard_done_cb cb, void *arg);
/* ACTIVE → SEALED: stop accepting, make pending durable, abort without
 * flushing, commit status SEALED under our epoch. */
int mw_shard_seal(mw_shard_t *s, mw_shard_done_cb cb, void *arg);
/* SEALED → commit ACTIVE → claim and replay → ACTIVE. */
int mw_shard_unseal(mw_shard_t *s, mw_shard_done_cb cb, void *arg);
/* ACTIVE → CLOSED: stop accepting, drain, flush everything. */
int mw_shard_release(mw_shard_t *s, mw_shard_done_cb cb, void *arg);
/* ACTIVE → CLOSED without flushing (Lance's abort): stop accepting, make
 * pending writes durable, finish a running flush, drop the MemTables. The
 * next claim replays the WAL. */
int mw_shard_abort(mw_shard_t *s, mw_shard_done_cb cb, void *arg);
/* A stop is coming (daemon/tables.c releases shards a few at a time):
 * from now max_memtable_age_ms freezes nothing, so the shards waiting for
 * their release do not all start flushes of their own at once; the
 * release (which flushes) or abort (which leaves the rows in the WAL)
 * decides. Writes are not affected. */
void mw_shard_hold_age_flush(mw_shard_t *s);
/* SEALED → CLOSED: delete `_mem_wal/<uuid>/`. */
int mw_shard_drop(mw_shard_t *s, mw_shard_done_cb cb, void *arg);

void mw_shard_stats(const mw_shard_t *s, mw_shard_stats_t *out);
static inline bool mw_shard_backpressured(const mw_shard_t *s) { return s->backpressured; }
static inline mw_shard_state_t mw_shard_state(const mw_shard_t *s) { return s->state; }
/* Why the shard is parked ("" when it is not). */
static inline const char *mw_shard_reason(const mw_shard_t *s) { return s->reason; }
/* The shard's UUID as text, for logs and replies. */
static inline const char *mw_shard_id_str(const mw_shard_t *s) { return s->id_str; }
/* The current fault episode, or NULL when the shard is healthy. */
static inline const mw_shard_fault_t *mw_shard_fault(const mw_shard_t *s) {
  return s->fault.status != 0 ? &s->fault : NULL;
}

#endif
