/*
 * shardio.h — test-only helpers around one MemWAL shard
 * folder (`<table>/_mem_wal/<uuid>/`): find and read the latest shard
 * manifest, publish a new version (put-if-absent + version_hint.json), read
 * WAL entries through our IPC decoder, and recover which WAL positions each
 * of Lance's SSTables covered (from the manifest history).
 *
 * Used by mw_sst_tool (interop suite) and test_sstable (lance suite, which
 * includes shardio.c directly). Not part of the daemon: the engine goes
 * through the storage layer instead.
 *
 * Errors: negative errno, with the path in *err.
 */
#ifndef MW_TESTS_SHARDIO_H
#define MW_TESTS_SHARDIO_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "lance/batch.h"
#include "lance/ipc.h"
#include "lance/shard_manifest.h"
#include "lance/sstable.h"

#define SI_MAX_SHARDS 64
#define SI_MAX_WAL_ENTRIES 100000

/* One decoded WAL entry. A fence sentinel has n_batches == 0. */
typedef struct si_wal_entry {
  uint64_t position;
  mw_ipc_stream_t s;  /* batches borrow &s.schema: never move an entry */
} si_wal_entry_t;

/* Lance's SSTable generation G covered WAL positions (first-1, last]. */
typedef struct si_coverage {
  uint64_t generation;
  uint64_t after;  /* replay_after before the flush */
  uint64_t last;   /* replay_after after the flush */
  mw_sstable_ref_t ref; /* copy of the manifest entry (path owned) */
} si_coverage_t;

/* Route the table at `table` (a folder or s3://BUCKET/PREFIX/NAME.lance)
 * through the storage layer: every si_* call on a path under it then uses
 * mw_storage_sync_* (the endpoint and keys of an S3 table from the AWS_*
 * environment). Without si_open, paths are plain files. */
int si_open(const char *table, mw_err_t *err);
void si_close(void);
/* The names of dir's direct children (objects or folders), sorted. */
int si_list_children(const char *dir, char ***names, size_t *n);

/* Read a whole file (malloc'd, NUL-terminated). */
int si_slurp(const char *path, uint8_t **p, size_t *n);

/* Sorted shard folder paths (malloc'd) under <table>/_mem_wal. */
int si_list_shards(const char *table_dir, char ***paths, size_t *n);
void si_free_strings(char **s, size_t n);

/* Latest manifest version by §3.3 (hint, then probes); 0 = none. */
int si_latest_version(const char *shard_dir, uint64_t *version, mw_err_t *err);
int si_read_manifest(const char *shard_dir, uint64_t version, mw_shard_manifest_t *m,
                     mw_err_t *err);
/* Write m (m->version must be latest+1) with O_EXCL, then version_hint.json. */
int si_publish_manifest(const char *shard_dir, const mw_shard_manifest_t *m, mw_err_t *err);

/* Highest WAL position p such that 1..p all exist (0 = none). */
int si_wal_last(const char *shard_dir, uint64_t *last);
int si_wal_read(const char *shard_dir, uint64_t position, si_wal_entry_t *e, mw_err_t *err);
void si_wal_entry_free(si_wal_entry_t *e);

/* From manifest versions 1..latest: every SSTable Lance published, in order,
 * with the WAL range it covers. *cov is malloc'd; free with si_coverage_free. */
int si_coverage(const char *shard_dir, si_coverage_t **cov, size_t *n, mw_err_t *err);
void si_coverage_free(si_coverage_t *cov, size_t n);

/* The memtable schema an SSTable stores for WAL-entry schema `wal`: a copy
 * without the `writer_epoch` schema metadata, Lance field ids = position
 * (true for tables whose fields were never dropped), PK markers kept. */
int si_sstable_schema(const mw_schema_t *wal, mw_schema_t *out);

/* Write every file of sst under shard_dir (creating directories, mode
 * 0755/0644). Refuses to overwrite: -EEXIST when <shard_dir>/<dir_name>
 * exists. */
int si_sstable_write_dir(const mw_sstable_t *sst, const char *shard_dir, mw_err_t *err);

#endif
