/*
 * memtable.h — one shard's in-memory table of rows not yet in an SSTable.
 *
 * Owns: the record batches appended to it (moved in, freed with it), in
 * insert order. Last write wins, but not here: a later row with the same
 * key supersedes the earlier one in the SSTable the flush builds (both rows
 * are stored, the earlier one masked by the deletion vector, memwal.md
 * §6.2), and the flush hashes every key for that dedup and for the bloom
 * filter anyway. A delete is a row with `_tombstone = true`.
 *
 * Why no key index (Lance's MemTable has one): nothing reads a memwald
 * MemTable by key. Readers are LanceDB processes, which see base + SSTables;
 * the WAL replays into a MemTable and the flush reads it whole, in order.
 * An index and its per-row hashes cost 16-24 B a row (0.4-0.5x of a
 * ~41-byte row) and most of an append's CPU (issue 14), and answered no
 * question anyone asked.
 *
 * Accounting follows Lance so our manifests carry the same estimates:
 * in_memory_bytes = Σ mw_batch_lance_bytes(batch) (lance/batch.h: Arrow
 * slice payload + 40 per batch, memwal.md §6.3).
 *
 * Limits: at most MW_MEMTABLE_MAX_BATCHES batches and MW_MEMTABLE_MAX_ROWS
 * rows whatever the configuration says; the shard freezes the table well
 * before (max_memtable_rows/size/batches).
 *
 * Errors: negative errno; -EINVAL/-ENOTSUP for a schema without a primary
 * key the flush can hash (at init), -EINVAL for a batch whose schema does
 * not match (at append), -EFBIG past the hard limits, -ENOMEM. A failed append leaves the
 * table unchanged and the batch still owned by the caller.
 */
#ifndef MW_SHARD_MEMTABLE_H
#define MW_SHARD_MEMTABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "lance/batch.h"

#define MW_MEMTABLE_MAX_BATCHES 1000000
#define MW_MEMTABLE_MAX_ROWS ((int64_t)1 << 30)

typedef struct mw_memtable_limits {
  int64_t max_rows;
  int64_t max_bytes;   /* in_memory_bytes */
  int64_t max_batches;
} mw_memtable_limits_t;

typedef struct mw_memtable {
  const mw_schema_t *schema; /* borrowed: the table schema incl. _tombstone */
  uint64_t generation;
  mw_batch_t *batches;
  size_t n_batches, cap_batches;
  int64_t n_rows;
  int64_t n_tombstones;      /* tombstone rows (deletes) */
  int64_t in_memory_bytes;
  int64_t primary_key_bytes; /* payload bytes of the PK columns */
  uint64_t first_wal_position, last_wal_position; /* 0 = none */
  bool frozen;
} mw_memtable_t;

/* 0, or -EINVAL (no primary key) / -ENOTSUP (a key type Lance cannot hash),
 * reason in err (lance/bloom.h mw_pk_hash_batch): the shard checks once, so
 * a MemTable that could never be flushed is never filled. */
int mw_memtable_schema_check(const mw_schema_t *schema, mw_err_t *err);
/* No allocation; the error of mw_memtable_schema_check for a schema it refuses. */
int mw_memtable_init(mw_memtable_t *m, const mw_schema_t *schema, uint64_t generation);
void mw_memtable_free(mw_memtable_t *m);
/* Move `batch` in (on success the caller's struct is emptied). Its schema
 * must be `m->schema` or equal to it; it is rebound to m->schema. The rows
 * belong to WAL entry `wal_position` (0 when not yet assigned). */
int mw_memtable_append(mw_memtable_t *m, mw_batch_t *batch, uint64_t wal_position, mw_err_t *err);
/* Record that the batches appended since the last call landed in entry P. */
void mw_memtable_cover(mw_memtable_t *m, uint64_t wal_position);
bool mw_memtable_full(const mw_memtable_t *m, const mw_memtable_limits_t *lim);
/* Heap bytes the table holds (buffer capacities, the batch and column
 * structs, each backing blob once: a replayed WAL entry whose rows are
 * views into it): what it costs, beside in_memory_bytes, Lance's estimate
 * of the rows. */
int64_t mw_memtable_heap_bytes(const mw_memtable_t *m);

#endif
