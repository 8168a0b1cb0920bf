/*
 * flush.h — one frozen MemTable becomes one published SSTable
 * (memwal.md §6.2, §3.6).
 *
 * Owns: the SSTable's files between encoding and publication, a
 * uv_work_t for encoding off the loop, and the storage requests of the
 * puts. Steps, in order:
 *
 *   1. check_fenced(epoch)                  (a fenced writer writes nothing)
 *   2. the SSTable job (sstable.h) on libuv's thread pool: above
 *      MW_FLUSH_SERIAL_ROWS rows its MW_SSTABLE_PARTS parts (data file;
 *      keys, dedup and bloom filter; PK index) run at once (one uv_work_t
 *      each), so a flush uses every core the loop does not; a smaller
 *      MemTable's parts (and every flush with the threads storage engine,
 *      whose requests share that pool) run one after another in one work
 *      item. Each part reads its files back where it encoded them
 *      (readback.h); one that does not read back fails the attempt before
 *      anything is put (f->refused says so). The job is assembled on the
 *      loop when the last part is done
 *   3. plain put of every file under `_mem_wal/<uuid>/<8hex>_gen_<G>/`
 *   4. commit_update: sstables += {G, dir, in_memory_bytes, physical_rows,
 *      primary_key_bytes}; replay_after = covered; last_seen =
 *      max(old, covered); current_generation = G+1
 *
 * The manifest put is the only commit point: until the callback reports 0
 * the MemTable must stay alive (and the caller keeps it in memory). A
 * failure leaves at most an orphan directory, which readers ignore; a
 * refused read-back leaves nothing at all.
 *
 * Status: 0 committed; -ESTALE fenced (reason in f->err names the epoch);
 * -EBADMSG with f->refused: a file did not read back (f->err names it and
 * why); other negative errno (reason in f->err).
 */
#ifndef MW_SHARD_FLUSH_H
#define MW_SHARD_FLUSH_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "common/err.h"
#include "lance/sstable.h"
#include "shard/manifest_store.h"
#include "shard/memtable.h"
#include "storage/storage.h"

#define MW_FLUSH_SERIAL_ROWS 4096
#define MW_FLUSH_KEY_BYTES 512

typedef struct mw_flush mw_flush_t;
typedef void (*mw_flush_cb)(mw_flush_t *f, int status);

struct mw_flush {
  void *data;
  mw_err_t err;
  mw_sstable_t sst;          /* valid after a commit until the next start */
  bool refused;              /* the last attempt failed: its files did not read back */
  /* private */
  uv_loop_t *loop;
  mw_storage_t *st;
  mw_mstore_t *ms;
  uint64_t epoch;
  const mw_memtable_t *mt;
  uint64_t covered;
  bool zstd;
  bool zone_seeds;           /* zone write seeds v1 in every data file (sstable.h) */
  uint64_t seed_rows_per_zone; /* 0 = 8192 */
  uint64_t seed;             /* tests: deterministic names; 0 = random */
  const mw_sstable_vindex_t *vindexes; /* maintained vector indexes (borrowed; docs/indexes.md) */
  size_t n_vindexes;
  const mw_sstable_sindex_t *sindexes; /* maintained BTree indexes (borrowed; sindex.h) */
  size_t n_sindexes;
  bool skip_readback;        /* benches only: measure without the read-back */
  mw_flush_cb cb;
  bool busy;
  /* the parallel build: one work item per part of the job */
  mw_sstable_job_t *job;
  const mw_batch_t **ptrs;          /* the MemTable's batches, for the job */
  uv_work_t works[MW_SSTABLE_PARTS];
  int work_rc[MW_SSTABLE_PARTS];
  mw_err_t work_err[MW_SSTABLE_PARTS];
  uint32_t parts_left;
  bool serial;                      /* every part in works[0] (threads storage) */
  mw_mstore_op_t op;
  mw_storage_req_t reqs[MW_SSTABLE_MAX_FILES];
  char keys[MW_SSTABLE_MAX_FILES][MW_FLUSH_KEY_BYTES];
  size_t outstanding;
  int put_err;
};

void mw_flush_init(mw_flush_t *f, uv_loop_t *loop, mw_storage_t *st, mw_mstore_t *ms, bool zstd);
void mw_flush_free(mw_flush_t *f);
/* Flush `mt` (frozen, non-empty, every batch durable in the WAL up to
 * position `covered`). -EBUSY while one runs, -EINVAL for an empty table. */
int mw_flush_start(mw_flush_t *f, const mw_memtable_t *mt, uint64_t epoch, uint64_t covered,
                   mw_flush_cb cb);
/* memwald_readback_refused_total{op}: files memwald wrote and refused to
 * publish because they did not read back, op "flush" (an SSTable) or
 * "compaction" (a base fragment). The series of `op`, its family registered
 * on first use (on the loop thread, as every registration); NULL when the
 * registry is full. */
struct mw_metric *mw_flush_refused_metric(const char *op);

#endif
