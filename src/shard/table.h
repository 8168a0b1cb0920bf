/*
 * table.h — one Lance table opened for MemWAL writing: its schema, its
 * MemWAL index, the merged writer configuration, the router and the shards
 * this daemon owns (memwal.md §8, §9).
 *
 * Owns: one mw_storage_t rooted at the table's URI (a directory or an S3
 * prefix; every key below is relative to it), the table schema (base columns with Lance field ids and
 * PK markers, then `_tombstone: bool not null`, which takes the next field
 * id), and one mw_shard_t per shard touched so far (created on the first
 * write for it — a lazy claim — or all at once by mw_table_claim_owned).
 *
 * Open (synchronous, start-up; through a blocking storage on a private loop,
 * storage.h): list `_versions/`, read the newest base manifest, and refuse with the exact reason when the table has no MemWAL
 * index, uses feature flags we do not implement, has no primary key or one
 * whose type Lance cannot hash, or maintains a full-text index or an index
 * of a kind LanceDB's MemWAL does not maintain (BTree and vector ones are
 * accepted; docs/indexes.md). Config: Lance defaults (with our 1 ms
 * group-commit interval) < the index's writer_config_defaults < the
 * caller's keys; both layers are logged. Then, in the background, sweep what
 * crashed writers left (storage's sweep_tmp, MW_TABLE_SWEEP_MIN_AGE_S).
 *
 * Start-up helpers (synchronous, same storage configuration): whether a
 * table exists, bootstrap its files, detect and finish an interrupted
 * drop_table.
 *
 * Router (table_write.c): unsharded -> the `unsharded` shard; bucket(N) on a
 * column -> `bucket-<b>`; identity on a column -> `identity-<value>`
 * (route.h). One batch may span up to MW_TABLE_MAX_PARTS shards (-E2BIG
 * past it). A row for a shard the daemon does not own is an error naming
 * the shard.
 *
 * Errors: negative errno with the reason in *err (open) or passed to the
 * write callback.
 */
#ifndef MW_SHARD_TABLE_H
#define MW_SHARD_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/err.h"
#include "lance/batch.h"
#include "lance/dataset_manifest.h"
#include "shard/compact.h"
#include "shard/gc.h"
#include "shard/owners.h"
#include "shard/recover.h"
#include "shard/shard.h"
#include "storage/storage.h"

#define MW_TABLE_MAX_SHARDS 4096
/* Shards one batch may span (mw_table_route): every bucket of the largest
 * bucket spec, and as many identity values. */
#define MW_TABLE_MAX_PARTS 4096
#define MW_TABLE_MAX_CONFIG 64
#define MW_TABLE_REASON_BYTES MW_ERR_MSG_BYTES
/* Leftovers younger than this are left alone at open: a live writer (here
 * or in another process) may still be using them. Removing one under a live
 * writer would only fail that writer's put, never lose an acknowledged one,
 * so this bounds needless failures, not safety. */
#define MW_TABLE_SWEEP_MIN_AGE_S 600

typedef struct mw_table_opts {
  const char *const *config_keys;   /* memwald's writer config (highest layer) */
  const char *const *config_values;
  size_t n_config;
  const uint8_t (*owned)[16];       /* shards this daemon owns; NULL = all */
  size_t n_owned;
  /* The table's storage: backend, limits, durability, S3 settings, test
   * faults (its uri is ignored: the table's is used). NULL = defaults. */
  const mw_storage_config_t *storage;
  uint64_t sstable_seed;            /* tests: deterministic SSTable names */
  /* Zone write seeds v1 in every data file (table key zone_write_seeds):
   * also what lets a table whose manifest carries FLAG_ZONE_WRITE_SEEDS
   * open; without it such a table is refused, naming the flag. */
  bool zone_write_seeds;
  uint64_t zone_seed_rows_per_zone; /* 0 = 8192 */
  /* Benches only, to measure what the read-back costs: flushes and
   * compactions publish their files without reading them back first
   * (lance/readback.h). No config key sets it; the daemon always checks. */
  bool skip_readback;
  /* The daemon's identity for owner records (shard/owners.h); NULL = none
   * written. Must outlive the table. */
  const mw_owner_self_t *self;
} mw_table_opts_t;

/* "identity-" + at most this many bytes of the value are kept for status. */
#define MW_TABLE_SHARD_KEY_VALUE_BYTES 64
#define MW_TABLE_SHARD_KEY_BYTES (MW_TABLE_SHARD_KEY_VALUE_BYTES + 16)

/* The table is opaque outside shard/: its fields are in shard/table_int.h
 * (for shard/'s own files and white-box tests); everyone else goes through
 * the functions below. */
typedef struct mw_table mw_table_t;
typedef void (*mw_table_drop_cb)(mw_table_t *t, int status, const char *reason, void *arg);

typedef struct mw_table_write mw_table_write_t;
typedef void (*mw_table_write_cb)(mw_table_write_t *w, int status, const char *reason);

struct mw_table_write {
  void *data;
  /* Set before a failing cb: rows of the batch written anyway. When the
   * batch spanned several shards, some may have been (0 < rows_written <
   * the batch's rows); the reason then names each shard and what happened
   * to its rows. */
  int64_t rows_written;
  /* private */
  mw_table_t *t;
  mw_table_write_cb cb;
  size_t left;
  int status;
  size_t n_parts;
  struct mw_table_part_outcome *parts;
  char reason[MW_TABLE_REASON_BYTES];
  mw_shard_write_t part0;     /* the first shard's write */
  mw_shard_write_t *more;     /* the others' (a batch spanning shards) */
};

int mw_table_open(uv_loop_t *loop, const char *path, const mw_table_opts_t *opts, mw_table_t **out,
                  mw_err_t *err);
/* mw_table_open in two halves, so that the blocking one can run off the
 * loop (a thread of the caller's: on S3 it is several requests, each up to
 * the retry deadline). mw_table_load does every read (drop marker, latest
 * base manifest) on a private loop, checks schema and index and merges the
 * config; it touches no caller loop and is legal on any thread. The loaded
 * table serves nothing until mw_table_start (on the loop's thread) opens its
 * storage, compaction and owner records there; a failed start frees it. A
 * loaded table that is never started is freed with mw_table_unload. */
int mw_table_load(const char *path, const mw_table_opts_t *opts, mw_table_t **out, mw_err_t *err);
int mw_table_start(uv_loop_t *loop, mw_table_t *t, const mw_table_opts_t *opts, mw_err_t *err);
void mw_table_unload(mw_table_t *t);
/* Release every shard's handles and the storage, then cb. Every shard must
 * be parked (released, sealed, fenced...) and idle: -EBUSY otherwise. */
int mw_table_close(mw_table_t *t, void (*cb)(mw_table_t *t));

/* The shard with this id, created (state NEW) when `create`; NULL when not
 * owned or not created. */
mw_shard_t *mw_table_shard(mw_table_t *t, const uint8_t id[16], bool create);
/* Whether this daemon owns shard id (the config's shard list; all when none). */
bool mw_table_owns(const mw_table_t *t, const uint8_t id[16]);
/* The shard's name for people: "unsharded", "bucket-<b>", "identity-<value>"
 * once the value is known (else "identity"), "manual" otherwise. The one
 * place a shard id becomes a name (status, admin replies, write errors). */
void mw_table_shard_name(const mw_table_t *t, const uint8_t id[16], char *out, size_t n);
/* Remember "identity-<value>" (value as text) for shard id when its record
 * exists and has no key yet; cut to MW_TABLE_SHARD_KEY_VALUE_BYTES. */
void mw_table_shard_set_key(mw_table_t *t, const uint8_t id[16], const char *value);
/* An operator's claim of a shard this daemon was not configured to own
 * (failover): from now on the daemon owns it. Returns the shard (created
 * NEW) or NULL (-ENOMEM, MW_TABLE_MAX_SHARDS). */
mw_shard_t *mw_table_adopt(mw_table_t *t, const uint8_t id[16]);
/* Stop owning a shard that is not running here (state NEW): writes for it
 * get not_owner, claim_owned skips it. -EBUSY when it runs. */
int mw_table_disown(mw_table_t *t, const uint8_t id[16]);
/* Eager start: claim every owned shard the spec can name (unsharded: one;
 * bucket: every owned bucket; identity: the listed ones). Returns how many
 * claims were started. */
int mw_table_claim_owned(mw_table_t *t);

/* ---- reading a table from outside shard/ (table_info.c) ---- */

/* The table's URI as opened, its storage (NULL before mw_table_start), its
 * schema (`_tombstone` last), the merged shard configuration, its sharding. */
const char *mw_table_path(const mw_table_t *t);
mw_storage_t *mw_table_storage(const mw_table_t *t);
const mw_schema_t *mw_table_schema(const mw_table_t *t);
const mw_shard_config_t *mw_table_config(const mw_table_t *t);
mw_sharding_kind_t mw_table_sharding(const mw_table_t *t);
/* The column a bucket or identity table routes by; NULL otherwise. */
const mw_field_t *mw_table_route_field(const mw_table_t *t);
/* The owner records (owners.h) of a started table, for the daemon's hooks. */
mw_owners_t *mw_table_owners(mw_table_t *t);

/* Compaction and GC of the table (NULL before mw_table_start) and whether
 * each is enabled: what status and `memwalctl compact` report. */
typedef struct mw_table_housekeeping {
  const mw_compact_t *compact;
  const mw_gc_t *gc;
  bool compact_enabled, gc_enabled;
  uint64_t gc_grace_ms, gc_history_retention_ms;
} mw_table_housekeeping_t;
void mw_table_housekeeping(const mw_table_t *t, mw_table_housekeeping_t *out);

/* One shard record as status, the stats log and a stop read it. */
typedef struct mw_table_shard_info {
  uint8_t id[16];
  char key[MW_TABLE_SHARD_KEY_BYTES]; /* mw_table_shard_name's; O(1) once the key is known */
  bool key_truncated;                 /* an identity value cut for the key */
  mw_shard_t *shard;                  /* to read (stats) or drive (release, flush) */
} mw_table_shard_info_t;
/* Shards made so far (by a write, a claim or the eager start), in order;
 * the count only grows while the table is open. */
size_t mw_table_shard_count(const mw_table_t *t);
/* The i-th of them, i < mw_table_shard_count(t). */
void mw_table_shard_at(const mw_table_t *t, size_t i, mw_table_shard_info_t *out);

/* A shard as people name it (a UUID, "unsharded", "bucket-<b>" or "<b>",
 * "identity-<value>") -> its id: the inverse of mw_table_shard_name.
 * -EINVAL naming the text when it fits none of the table's spec. */
int mw_table_shard_parse(const mw_table_t *t, const char *text, uint8_t id[16], mw_err_t *err);
/* A config `shards` list (bucket numbers or identity values, checked
 * against the table's spec and schema): from now on the table owns only
 * those; "all" changes nothing. Before any claim. -EINVAL (or -ENOMEM) with
 * the reason, and ownership unchanged. */
int mw_table_own_list(mw_table_t *t, const char *list_text, mw_err_t *err);
/* The ids the spec can name that this daemon owns (owned = true:
 * unsharded's one shard, the owned buckets, the listed identity values) or
 * does not own (owned = false: bucket tables' other buckets; none
 * otherwise). At most cap; returns how many. */
size_t mw_table_spec_ids(const mw_table_t *t, bool owned, uint8_t (*ids)[16], size_t cap);

/* Recovery at start (recover.h): claim and flush every owned shard still
 * NEW whose WAL holds rows past replay_after and that nobody is writing.
 * Call once, after the ownership is final (and after an eager claim). The
 * daemon does; tests that drive claims themselves do not. */
int mw_table_recover_owned(mw_table_t *t);

/* Route `batch` (table schema, `_tombstone` included; consumed on success)
 * to its shards and write each part. Immediate error (nothing written), or
 * 0 and then cb once with the first failure among the parts (or 0), and
 * w->rows_written set. */
int mw_table_write(mw_table_t *t, mw_table_write_t *w, mw_batch_t *batch, mw_table_write_cb cb,
                   mw_err_t *err);

/* SYNC for a set of tables (a connection may have written to several):
 * cb(arg, 0, NULL) once every write submitted to any of their shards before
 * this call is durable (mw_shard_sync on each shard). Tables with
 * durable_write need nothing: their acknowledged rows are durable already.
 * The first failing shard's status and reason win. Returns 0 (cb will run,
 * never inline), 1 (nothing to wait for: no callback), or -errno with err
 * set (-ENOMEM; a shard's refusal when no shard accepted it). */
typedef void (*mw_table_sync_cb)(void *arg, int status, const char *reason);
int mw_tables_sync(mw_table_t *const *tables, size_t n, mw_table_sync_cb cb, void *arg,
                   mw_err_t *err);
/* Split without writing: part_ids[k] / parts[k] for k < *n_parts (parts
 * bound to the table schema, caller frees), parts in the order their first
 * row appears; -ENODATA for a batch without rows. When every row goes to one
 * shard, the batch's columns are moved into parts[0] (batch is left with no
 * rows); otherwise batch is unchanged. */
int mw_table_route(mw_table_t *t, mw_batch_t *batch, uint8_t (**part_ids)[16],
                   mw_batch_t **parts, size_t *n_parts, mw_err_t *err);

/* `memwalctl compact`: compact every owned ACTIVE shard's SSTables into the
 * base table; cb once committed (compact.h for the status). */
int mw_table_compact(mw_table_t *t, mw_compact_cb cb, void *arg);

/* drop_table (docs/design.md "Drop-table two-phase commit"). Prepare: list
 * `_mem_wal/` and claim (so fence) every shard found there or active here,
 * owned or not, then seal each (pending writes made durable, SEALED
 * committed under our epoch). A shard already SEALED counts as sealed, so a
 * drop interrupted by a crash is finished by running it again. If a claim or
 * a seal fails, rollback: every shard sealed (by this run or an earlier one)
 * is unsealed (ACTIVE committed, re-claimed, replayed: nothing is lost);
 * shards that were not ACTIVE here before are then released (flushed), and
 * cb gets the failure. Commit: delete each shard directory, then every other
 * top-level folder, `_versions/` last, then the table directory.
 * One drop at a time (-EBUSY); -EBUSY too while a shard has a control
 * operation running. Afterwards the table may only be closed. */
int mw_table_drop(mw_table_t *t, mw_table_drop_cb cb, void *arg);
/* 1 when a drop_table's commit started at uri and did not finish (the
 * marker it writes before deleting anything is still there), 0 when not,
 * -errno when the storage cannot tell. mw_table_open refuses such a table
 * with -ECANCELED. opts: its storage configuration (NULL = defaults). */
int mw_table_drop_interrupted(const char *uri, const mw_table_opts_t *opts, mw_err_t *err);
/* Finish an interrupted drop: every shard was sealed before the commit
 * began, so deleting the rest is what the drop promised. Synchronous (for
 * start-up). -ENOENT when there is no interrupted drop at uri. */
int mw_table_drop_remains(const char *uri, const mw_table_opts_t *opts, mw_err_t *err);

/* 1 when uri holds a table (`_versions/` has an object), 0 when not, -errno
 * when the storage cannot tell. Synchronous. */
int mw_table_exists(const char *uri, const mw_table_opts_t *opts, mw_err_t *err);
/* Write a new table's files, in order (lance/table_create.h makes them):
 * put-if-absent each, except those marked replace (the version hint, which
 * LanceDB overwrites too). -EEXIST when another creator got there first.
 * Synchronous. */
typedef struct mw_table_new_file {
  const char *key;      /* relative to the table, e.g. "_versions/1.manifest" */
  const void *bytes;
  size_t len;
  bool replace;
} mw_table_new_file_t;
int mw_table_bootstrap(const char *uri, const mw_table_opts_t *opts, const mw_table_new_file_t *files,
                       size_t n, mw_err_t *err);

#endif
