/*
 * verify.h — check every invariant memwald relies on, for a whole table.
 *
 * Owns the table walk of `memwal-inspect verify TABLE`: every object is read
 * through sio (src/storage) and decoded by the src/lance codecs; each broken
 * invariant becomes one problem naming the object key. The checks:
 *
 * base table (`_versions/`, `data/`, `_deletions/`, `_transactions/`)
 *   - every manifest decodes, its version equals its name; V1 and V2 names
 *     are not mixed;
 *   - FLAG_ZONE_WRITE_SEEDS set in both reader and writer flags or in
 *     neither, and kept by every later version once set;
 *   - every fragment of the latest version: data files exist with the
 *     recorded size, decode, hold physical_rows rows; zone seeds valid
 *     against the values, and v1 seeds only where the flag is set; deletion
 *     files exist, decode, stay within the fragment's rows and hold
 *     num_deleted_rows offsets;
 *   - the MemWAL index decodes; every compacted_sstables entry names a shard
 *     that exists and a generation that shard has flushed;
 *   - every transaction file decodes and its name is <read_version>-<uuid>.
 * each shard (`_mem_wal/<uuid>/`)
 *   - manifest versions contiguous, each decoding to its own version, the
 *     shard's id, epochs, replay points and generations non-decreasing,
 *     SSTable generations unique and below current_generation; an SSTable
 *     never leaves the manifest before compaction covered it; the version
 *     hint not ahead of the latest manifest;
 *   - WAL positions contiguous above the replay point, each entry decoding,
 *     writer epochs non-decreasing with position and never above the latest
 *     claimed epoch; at most one fence sentinel per epoch, before that
 *     epoch's data, and one for every epoch that took over from an earlier
 *     writer in the WAL;
 *   - every listed SSTable: its dataset manifest, data file (rows =
 *     physical_rows), deletion file (= the rows a later copy of their key
 *     supersedes), _pk_index (every live row's key at its row, sorted;
 *     page_lookup's bounds) and bloom filter (no false negative for any
 *     row's key), zone seeds as for the base table.
 *
 * Errors: mw_verify_table returns -errno only when the table cannot be
 * read at all; problems are collected in the report.
 */
#ifndef MW_INSPECT_VERIFY_H
#define MW_INSPECT_VERIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "inspect/jtree.h"
#include "inspect/sio.h"

#define MW_VERIFY_MAX_PROBLEMS 10000

typedef struct mw_verify_report {
  j_t *problems;          /* [{key, problem}] */
  uint64_t n_problems;    /* all of them (the list stops at MW_VERIFY_MAX_PROBLEMS) */
  uint64_t objects;       /* objects listed */
  uint64_t decoded;       /* objects decoded and checked */
  uint64_t shards, sstables, wal_entries, manifests, data_files, seeds, orphans;
  uint64_t staging;       /* temps of puts that never finished: listed, not checked */
  uint64_t wal_collected; /* WAL positions at or below a replay point with no entry (GC'd) */
  uint64_t vector_indexes; /* SSTable vector indexes checked (docs/indexes.md) */
} mw_verify_report_t;

typedef struct mw_verify_opts {
  bool json;
  bool quiet;
} mw_verify_opts_t;

int mw_verify_table(mw_sio_t *s, mw_verify_report_t *r, mw_err_t *err);
void mw_verify_report_free(mw_verify_report_t *r);
/* The `verify` command: open, check, print; returns the exit status. */
int mw_verify_main(const char *table, const mw_verify_opts_t *o);

#endif
