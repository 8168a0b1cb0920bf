/*
 * memtable.h — one shard's in-memory table of rows not yet in an SSTable.
 *
 * Owns: the record batches appended to it (moved in, freed with it), one PK
 * hash per row in insert order, and a hash index from PK hash to the newest
 * row holding it. Last write wins: a later row with the same key supersedes
 * the earlier one (the earlier row is still stored — Lance's SSTable keeps it
 * too and masks it with the deletion vector, memwal.md §6.2); a delete is a
 * row with `_tombstone = true`.
 *
 * Accounting follows Lance so our manifests carry the same estimates:
 * in_memory_bytes = Σ mw_batch_lance_bytes(batch) (lance/batch.h: Arrow
 * slice payload + 40 per batch, memwal.md §6.3).
 *
 * Limits: at most MW_MEMTABLE_MAX_BATCHES batches and MW_MEMTABLE_MAX_ROWS
 * rows whatever the configuration says; the shard freezes the table well
 * before (max_memtable_rows/size/batches).
 *
 * Errors: negative errno; -EINVAL for a batch whose schema does not match,
 * -EFBIG past the hard limits, -ENOMEM. A failed append leaves the table
 * unchanged and the batch still owned by the caller.
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
  uint64_t *hashes;          /* n_rows PK hashes, insert order */
  int64_t n_rows, cap_rows;
  /* open addressing: slot -> row + 1 (0 = empty); capacity a power of two */
  uint32_t *index;
  size_t index_cap;
  int64_t n_keys;            /* distinct PK hashes */
  int64_t n_tombstones;      /* tombstone rows (deletes) */
  int64_t in_memory_bytes;
  int64_t primary_key_bytes; /* payload bytes of the PK columns */
  uint64_t first_wal_position, last_wal_position; /* 0 = none */
  bool frozen;
} mw_memtable_t;

int mw_memtable_init(mw_memtable_t *m, const mw_schema_t *schema, uint64_t generation);
void mw_memtable_free(mw_memtable_t *m);
/* Move `batch` in (on success the caller's struct is emptied). Its schema
 * must be `m->schema` or equal to it; it is rebound to m->schema. The rows
 * belong to WAL entry `wal_position` (0 when not yet assigned). */
int mw_memtable_append(mw_memtable_t *m, mw_batch_t *batch, uint64_t wal_position, mw_err_t *err);
/* Record that the batches appended since the last call landed in entry P. */
void mw_memtable_cover(mw_memtable_t *m, uint64_t wal_position);
bool mw_memtable_full(const mw_memtable_t *m, const mw_memtable_limits_t *lim);
/* Heap bytes the table holds (buffer capacities, the PK hashes, the index):
 * what it costs, beside in_memory_bytes, Lance's estimate of the rows. */
int64_t mw_memtable_heap_bytes(const mw_memtable_t *m);
/* Row number of the newest row with this PK hash, or -1. */
int64_t mw_memtable_lookup(const mw_memtable_t *m, uint64_t pk_hash);

#endif
