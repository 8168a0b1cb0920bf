/*
 * manifest_store.h — one shard's manifest operations on the storage layer
 * (memwal.md §3.3–§3.6).
 *
 * Owns: the key prefix `_mem_wal/<uuid>/manifest/`, a cache of the newest
 * manifest this process has read or written, and four asynchronous
 * operations, each run by a caller-embedded mw_mstore_op_t:
 *
 *   read_latest    version_hint.json, then HEAD probes (§3.3), a LIST when
 *                  the hinted version is missing (GC), then GET
 *   claim_epoch    ≤16 attempts: read, refuse SEALED, put_if_absent(v+1,
 *                  epoch+1); lost with stored epoch ≥ target = fenced (§3.4)
 *   check_fenced   read; stored epoch > local = fenced (§3.5)
 *   commit_update  ≤10 attempts: cached-or-read, check fencing, build with
 *                  the caller's function, version = current+1, epoch = local,
 *                  put_if_absent; a lost race (a tailer's same-epoch bump)
 *                  drops the cache and retries (§3.6)
 *
 * After every successful manifest put, version_hint.json is overwritten
 * (plain put, best effort: a failure is logged, §1.3) before the callback.
 * The store counts its operations in flight and tells its owner when the
 * last one ends (on_idle).
 *
 * Model: as storage.h — a start function returns a negative errno at once
 * (the callback will not run) or 0, and the callback runs exactly once later
 * on the loop. One op runs one operation at a time; many ops may share one
 * store.
 *
 * Status: 0; -ESTALE fenced (op->stored_epoch = the peer's epoch, op->err
 * names both epochs); -EROFS the shard is SEALED ("shard <id> is sealed;
 * refusing claim"); -ENOENT read_latest found no manifest; -EBUSY retries
 * exhausted; -EBADMSG a corrupt manifest; other storage errors.
 */
#ifndef MW_SHARD_MANIFEST_STORE_H
#define MW_SHARD_MANIFEST_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"
#include "lance/route.h"
#include "lance/shard_manifest.h"
#include "storage/storage.h"

#define MW_MSTORE_CLAIM_ATTEMPTS 16
#define MW_MSTORE_COMMIT_ATTEMPTS 10
#define MW_MSTORE_MAX_PROBES 16
#define MW_MSTORE_MAX_OPS 64
/* "_mem_wal/" + uuid + "/manifest/" + name */
#define MW_MSTORE_DIR_BYTES 64
#define MW_MSTORE_KEY_BYTES 192

typedef struct mw_mstore {
  mw_storage_t *st;
  char shard_dir[MW_MSTORE_DIR_BYTES];  /* "_mem_wal/<uuid>/" */
  uint8_t shard_id[16];
  char shard_str[MW_UUID_STR_BYTES];
  uint32_t spec_id;       /* shard_spec_id of a fresh claim (LanceDB: 1) */
  uint32_t scan_batch;    /* manifest_scan_batch_size, 1..MW_MSTORE_MAX_PROBES */
  bool has_cached;
  mw_shard_manifest_t cached;
  /* Operations in flight on this store, whoever runs them (the shard, its
   * flusher, its WAL's fence checks, GC's trim), at most MW_MSTORE_MAX_OPS. */
  uint32_t n_busy;
  /* Called on the loop after an operation's callback has run when no
   * operation is left in flight (NULL: nobody listens). The shard's stops
   * (release, abort, seal) wait for it: once one answers, no manifest of
   * this process is still on its way to storage. */
  void (*on_idle)(void *arg);
  void *idle_arg;
} mw_mstore_t;

typedef struct mw_mstore_op mw_mstore_op_t;
typedef void (*mw_mstore_cb)(mw_mstore_op_t *op, int status);
/* Build `next` from `cur` (next is already a deep copy of cur; version and
 * epoch are set by the store afterwards). Return 0 or a negative errno. */
typedef int (*mw_mstore_update_fn)(void *arg, const mw_shard_manifest_t *cur,
                                   mw_shard_manifest_t *next, mw_err_t *err);

struct mw_mstore_op {
  void *data;                /* the caller's */
  mw_shard_manifest_t m;     /* result: latest read, or the manifest written */
  uint64_t stored_epoch;     /* -ESTALE: the epoch that fenced us */
  mw_err_t err;
  /* private */
  mw_mstore_t *ms;
  mw_mstore_cb cb;
  int kind, phase, attempts;
  uint64_t epoch;            /* local epoch (check/commit), target (claim) */
  mw_mstore_update_fn fn;
  void *fn_arg;
  mw_latest_search_t search;
  uint32_t outstanding;
  int probe_err;
  mw_storage_req_t req;
  mw_storage_req_t probes[MW_MSTORE_MAX_PROBES];
  uint64_t probe_v[MW_MSTORE_MAX_PROBES];
  mw_shard_manifest_t next;
  mw_buf_t enc;
  char key[MW_MSTORE_KEY_BYTES];
  char hint[32];
  bool hint_read;            /* version_hint.json was there and parsed */
  bool busy;
};

/* shard_id in RFC byte order; scan_batch 0 = 2. No I/O. */
void mw_mstore_init(mw_mstore_t *ms, mw_storage_t *st, const uint8_t shard_id[16],
                    uint32_t spec_id, uint32_t scan_batch);
void mw_mstore_free(mw_mstore_t *ms);
/* Forget the cached manifest (the next commit_update reads storage). */
void mw_mstore_invalidate(mw_mstore_t *ms);

void mw_mstore_op_init(mw_mstore_op_t *op);
void mw_mstore_op_free(mw_mstore_op_t *op);

int mw_mstore_read_latest(mw_mstore_t *ms, mw_mstore_op_t *op, mw_mstore_cb cb);
int mw_mstore_claim(mw_mstore_t *ms, mw_mstore_op_t *op, mw_mstore_cb cb);
int mw_mstore_check_fenced(mw_mstore_t *ms, mw_mstore_op_t *op, uint64_t local_epoch,
                           mw_mstore_cb cb);
int mw_mstore_commit_update(mw_mstore_t *ms, mw_mstore_op_t *op, uint64_t local_epoch,
                            mw_mstore_update_fn fn, void *fn_arg, mw_mstore_cb cb);

/* "<shard_dir>manifest/<bitrev>.binpb" into out. */
int mw_mstore_manifest_key(const mw_mstore_t *ms, uint64_t version, char *out, size_t n);

#endif
