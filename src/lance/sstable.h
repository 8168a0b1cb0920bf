/*
 * sstable.h — build one MemWAL SSTable (a flushed MemTable) as a list of files.
 *
 * Owns: composing the codecs (datafile, pk_index, bloom, deletion,
 * dataset_manifest) into one complete SSTable directory, exactly the set of
 * files Lance 12's `MemTableFlusher::flush` leaves (memwal.md §1.4, §6.2;
 * lance-files.md §7), minus the unreferenced `_transactions/0-<uuid>.txn`:
 *
 *   <8 hex>_gen_<G>/
 *     data/<24 binary digits + 26 hex>.lance      one fragment, rows in insert order
 *     _deletions/0-1-<random u64>.bin             only if a PK appears twice
 *     _versions/18446744073709551614.manifest     dataset version 1
 *     _versions/latest_version_hint.json          {"version":1}
 *     _pk_index/page_data.lance                   (key, row) for EVERY physical row
 *     _pk_index/page_lookup.lance
 *     bloom_filter.bin                            32 KiB split-block bloom filter
 *
 * With opts.zone_seeds the data file also holds one zone write seed (v1)
 * per column as global buffers 1..C, and the manifest sets
 * FLAG_ZONE_WRITE_SEEDS (1<<16) in both feature flags: it is the first
 * commit referencing those seeds (seed proposal 002).
 *
 * I/O free: mw_sstable_build() returns (relative path, bytes) pairs; the
 * engine writes them through the storage layer (plain puts, any order, the
 * manifest last is good practice) and then publishes the SSTable with a shard
 * manifest update using mw_sstable_t's accounting fields (shard/flush.c).
 * The codec never touches a file.
 *
 * Input: the frozen MemTable's schema — base columns with their Lance field
 * ids and PK markers (mw_field_t.pk_position), then `_tombstone: bool not
 * null` as the LAST field — and its batches in insert order. The newest row
 * per primary key survives (§6.2 step 4); all earlier copies go into the
 * deletion bitmap, including earlier copies shadowed by a tombstone row (the
 * tombstone row itself stays: readers use it to hide older generations).
 *
 * Randomness: the directory's 8 hex digits, the data file name and the
 * deletion-file id come from getrandom(2) unless opts.seed != 0, which makes
 * every name reproducible (tests). The manifest timestamp is opts.timestamp_ns
 * or the wall clock.
 *
 * Read-back: every part decodes its files again and compares them with the
 * rows (readback.h; opts.skip_readback turns it off for benches): the data
 * file against the batches, the deletion file against the dedup's offsets,
 * the bloom filter against every key's hash, the _pk_index files against
 * the keys. A file that does not read back fails the build with -EBADMSG
 * and a reason naming it (mw_sstable_job_refused tells a job's caller).
 *
 * Vectors: item nulls under a NULL vector (arrow-js/arrow-rs write them) are
 * dropped from the data file through borrowed views of the batches; item
 * nulls inside a valid vector are refused by the datafile writer (-ENOTSUP).
 *
 * Errors: negative errno with a reason in *err: -EBADMSG (a file refused by
 * its read-back), -EINVAL (schema without a
 * trailing non-null bool `_tombstone`, no PK, no rows, batches of another
 * schema, a bad dir_name), -ENOTSUP (a composite PK, which LanceDB 0.39
 * refuses too, or a type a codec does not implement), -ENOMEM, -EFBIG (over
 * a limit below).
 */
#ifndef MW_LANCE_SSTABLE_H
#define MW_LANCE_SSTABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"
#include "lance/batch.h"
#include "lance/hnsw.h"

/* One SSTable holds at most this many rows: Lance row offsets and the
 * roaring deletion bitmap are u32. */
#define MW_SSTABLE_MAX_ROWS ((int64_t)UINT32_MAX)
#define MW_SSTABLE_MAX_BATCHES 1000000
/* "<8 hex>_gen_<u64>" plus NUL fits. */
#define MW_SSTABLE_DIR_NAME_BYTES 40
#define MW_SSTABLE_MAX_VINDEXES 4
#define MW_SSTABLE_MAX_SINDEXES 8
#define MW_SSTABLE_MAX_FILES (8 + 2 * MW_SSTABLE_MAX_VINDEXES + 2 * MW_SSTABLE_MAX_SINDEXES)
#define MW_SSTABLE_INDEX_NAME_BYTES 256

/* A vector index the table maintains (issue 27): every SSTable gets its own
 * IVF_HNSW_SQ index of this column in _indices/<uuid>/ (index.idx,
 * auxiliary.idx; vindex_file.h) and an IndexMetadata entry in its manifest,
 * as LanceDB 0.39.0's flush writes them. An SSTable whose column holds no
 * non-null vector gets none (Lance skips it too). */
typedef struct mw_sstable_vindex {
  const char *name;       /* the base table index's name, e.g. "vec_idx" */
  uint32_t field;         /* top-level field: fixed_size_list<float32, dim> */
  mw_distance_t dist;     /* the base index's distance type */
  mw_hnsw_params_t hnsw;  /* zeros = Lance's MemWAL defaults (m 16, ef 100) */
} mw_sstable_vindex_t;

/* A BTree index the table maintains (issue 27): every SSTable gets its own
 * BTree of this column in _indices/<uuid>/ (page_data.lance,
 * page_lookup.lance; sindex.h) and an IndexMetadata entry in its manifest,
 * as LanceDB 0.39.0's flush writes them. The column's type must pass
 * mw_btree_type_ok. */
typedef struct mw_sstable_sindex {
  const char *name; /* the base table index's name, e.g. "num_idx" */
  uint32_t field;   /* top-level field */
} mw_sstable_sindex_t;

typedef struct mw_sstable_opts {
  bool zstd;            /* compress data-file values with zstd (Lance's General{ZSTD}) */
  const char *dir_name; /* NULL = generate "<8 random hex>_gen_<G>" */
  uint64_t seed;        /* 0 = getrandom(); else a deterministic name generator */
  int64_t timestamp_ns; /* manifest timestamp; 0 = now (CLOCK_REALTIME) */
  size_t max_page_bytes; /* data-file page cap per column; 0 = the datafile default (8 MiB) */
  /* Zone write seeds v1 (zone_seed.h): one seed per column in the data
   * file, located by `lance.seed.<column>` in its schema metadata, and
   * FLAG_ZONE_WRITE_SEEDS in the manifest's reader and writer flags (so
   * LanceDB 0.39.0 refuses the SSTable; docs/sstable.md). */
  bool zone_seeds;
  uint64_t seed_rows_per_zone; /* 0 = MW_SEED_DEFAULT_ROWS_PER_ZONE (8192) */
  /* Maintained vector indexes (borrowed until the build ends), at most
   * MW_SSTABLE_MAX_VINDEXES. The uuids come from the same generator as the
   * other names (opts.seed). */
  const mw_sstable_vindex_t *vindexes;
  size_t n_vindexes;
  /* Maintained BTree indexes (borrowed), at most MW_SSTABLE_MAX_SINDEXES;
   * their uuids are drawn after the vector indexes'. */
  const mw_sstable_sindex_t *sindexes;
  size_t n_sindexes;
  /* Each part reads its files back (readback.h) unless this is set: for
   * measuring the read-back's cost only (benches). */
  bool skip_readback;
} mw_sstable_opts_t;

typedef struct mw_sstable_file {
  char *path;     /* relative to the SHARD directory: "<dir_name>/data/x.lance" */
  mw_buf_t bytes;
} mw_sstable_file_t;

typedef struct mw_sstable {
  /* The shard manifest's SsTable entry (memwal.md §3.1, §6.3). */
  uint64_t generation;
  char dir_name[MW_SSTABLE_DIR_NAME_BYTES]; /* SsTable.path */
  uint64_t in_memory_bytes;   /* per batch: column payload bytes + 40 */
  uint64_t physical_rows;     /* every row written, duplicates included */
  uint64_t primary_key_bytes; /* PK column payload bytes over all rows */
  /* Facts about the contents, for callers and tests. */
  uint64_t deleted_rows;      /* rows masked by the deletion file (0 = no file) */
  uint64_t deletion_id;       /* the <u64> in _deletions/0-1-<u64>.bin */
  uint64_t data_file_bytes;
  size_t n_vindexes_built;    /* vector indexes written (a column of nulls gets none) */
  size_t vindex_build_bytes;  /* the largest HNSW build's memory (hnsw.h bound) */
  size_t n_sindexes_built;    /* BTree indexes written */
  /* The files, in the order they are best written (manifest last). */
  mw_sstable_file_t files[MW_SSTABLE_MAX_FILES];
  size_t n_files;
} mw_sstable_t;

/* Whether SSTables of this table schema can be written: every column type
 * has a data-file encoding here. -ENOTSUP naming the column and its type
 * otherwise (so a table is refused when it opens, not at its first flush). */
int mw_sstable_check_schema(const mw_schema_t *schema, mw_err_t *err);

/* Build every file of one SSTable. `out` must be zeroed or freed; on failure
 * it is left empty. */
int mw_sstable_build(const mw_schema_t *schema, const mw_batch_t *const *batches,
                     size_t n_batches, uint64_t generation, const mw_sstable_opts_t *opts,
                     mw_sstable_t *out, mw_err_t *err);
void mw_sstable_free(mw_sstable_t *sst);

/* The same build in parts that may run on different threads at once (the
 * flusher runs them on libuv's thread pool): begin (checks, accounting,
 * every name drawn, in the order mw_sstable_build draws them, so a seeded
 * build names the same files), then each of the MW_SSTABLE_PARTS parts
 * exactly once, in any order and concurrently (each writes only its own
 * outputs and reads the batches, which must not change until end), then
 * end, which assembles the files in mw_sstable_build's order and the
 * manifest, and frees the job. Parts:
 *   MW_SSTABLE_PART_DATA   the data file (zone seeds included)
 *   MW_SSTABLE_PART_KEYS   PK hashes, dedup (the deletion file), bloom filter
 *   MW_SSTABLE_PART_INDEX  the _pk_index files, the maintained BTree indexes
 *                          (opts.sindexes), then the maintained vector
 *                          indexes (opts.vindexes; a part of their own would
 *                          run them beside the others: left to the flush
 *                          integration of issue 27, shard/flush.c)
 * Each part's error goes to the err it is given; end refuses (-ECANCELED)
 * a job with a part that failed or did not run. mw_sstable_job_free drops a
 * job at any point after begin. */
enum { MW_SSTABLE_PART_DATA = 0, MW_SSTABLE_PART_KEYS, MW_SSTABLE_PART_INDEX, MW_SSTABLE_PARTS };
typedef struct mw_sstable_job mw_sstable_job_t;
int mw_sstable_job_begin(const mw_schema_t *schema, const mw_batch_t *const *batches,
                         size_t n_batches, uint64_t generation, const mw_sstable_opts_t *opts,
                         mw_sstable_job_t **job, mw_err_t *err);
int mw_sstable_job_run(mw_sstable_job_t *job, int part, mw_err_t *err);
int mw_sstable_job_end(mw_sstable_job_t *job, mw_sstable_t *out, mw_err_t *err);
void mw_sstable_job_free(mw_sstable_job_t *job);
/* Whether a part failed because its read-back refused its files (rather
 * than the encoding failing): the flusher counts those. */
bool mw_sstable_job_refused(const mw_sstable_job_t *job);

/* The data-file step alone: append one Lance 2.2 data file holding the
 * rows of batches[0..n) (one schema) to `out`, with the SSTable's options
 * (zstd, page cap) and the same handling of vectors. Compaction writes its
 * base-table fragments through this, so both get every data-file feature. */
int mw_sstable_data_file(const mw_schema_t *schema, const mw_batch_t *const *batches, size_t n,
                         const mw_sstable_opts_t *opts, mw_buf_t *out, mw_err_t *err);
/* Tests only (NULL otherwise): called with the bytes of every data file
 * mw_sstable_data_file has just written (the flush's and compaction's),
 * before anything reads them back; on the encoding thread. A test corrupts
 * them here to see the read-back refuse them. */
extern void (*mw_sstable_data_hook_for_tests)(mw_buf_t *file);
/* Tests only: called with each vector index built, before its read-back
 * (to damage it). */
struct mw_vindex;
extern void (*mw_sstable_vindex_hook_for_tests)(struct mw_vindex *built);

/* The file whose path ends with `suffix` (e.g. "bloom_filter.bin"), or NULL. */
const mw_sstable_file_t *mw_sstable_find(const mw_sstable_t *sst, const char *suffix);

#endif
