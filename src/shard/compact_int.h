/*
 * compact_int.h — the compactor's private state, shared by its three files:
 *
 *   compact.c       policy, requests, lifecycle, the phase switch, commit
 *   compact_sst.c   reading the picked SSTables and merging them (pool)
 *   compact_keys.c  the key-index cache, finding the superseded base rows,
 *                   folding small fragments, building the commit (pool)
 *
 * Nothing outside src/shard/compact*.c includes this.
 */
#ifndef MW_SHARD_COMPACT_INT_H
#define MW_SHARD_COMPACT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/err.h"
#include "lance/base_update.h"
#include "lance/keyindex.h"
#include "lance/lsm_merge.h"
#include "shard/base_store.h"
#include "shard/compact.h"
#include "shard/table_int.h"

#define MW_COMPACT_KEY_BYTES 512
/* Small fragments (fewer live rows than compaction_fragment_rows) are kept
 * to at most this many: when a commit would leave more, the smallest are
 * folded into the new fragment until MW_COMPACT_FOLD_KEEP remain. */
#define MW_COMPACT_FOLD_TRIGGER 8
#define MW_COMPACT_FOLD_KEEP 3
/* A one-file fragment with more than this share of its rows deleted is
 * rewritten (folded) by the next run: dead rows stay below ~half the data. */
#define MW_COMPACT_DEAD_PERCENT 50

_Static_assert(MW_COMPACT_DEAD_PERCENT > 0 && MW_COMPACT_DEAD_PERCENT < 100, "a share of rows");
#define MW_COMPACT_SST_MANIFEST "_versions/18446744073709551614.manifest"

typedef struct io_owner {
  mw_compact_t *c;
  int status;
} io_owner_t;

typedef struct kentry {
  char *data_file;
  mw_keyindex_t ki;
  size_t bytes;
  uint64_t used;      /* run tick of its last use */
} kentry_t;

typedef struct sst_in {
  io_owner_t io;      /* first */
  uint64_t generation;
  char *dir;
  uint64_t in_memory_bytes;
  mw_storage_req_t req, del_req;
  char key[MW_COMPACT_KEY_BYTES], del_key[MW_COMPACT_KEY_BYTES];
  bool has_del;
  int del_kind;       /* 1 = BITMAP */
  uint64_t physical_rows;
  mw_batch_t batch;   /* table schema */
  uint32_t *deleted;
  size_t n_deleted;
} sst_in_t;

/* One shard's part of a run: its picked SSTables and their merge. */
typedef struct group {
  mw_shard_t *shard;
  struct cshard *cs;
  uint64_t compacted_before;  /* in the base version the plan was made on */
  uint64_t last_gen;
  sst_in_t *ssts;
  size_t n_ssts;
  mw_merge_t merge;
  bool has_merge;
} group_t;

typedef struct fwork {
  io_owner_t io;      /* first */
  io_owner_t data_io; /* DELS_GET: the folded fragment's data file (io: its deletion file) */
  const Lance__Table__DataFragment *f; /* in run.bop.meta */
  const char *pk_file;
  kentry_t *ke;
  bool need_data;     /* no usable key index: read the data file */
  bool fold;          /* fold this small fragment into the new one */
  mw_storage_req_t req, del_req, data_req;
  char key[MW_COMPACT_KEY_BYTES], del_key[MW_COMPACT_KEY_BYTES];
  char del_put_key[MW_COMPACT_KEY_BYTES], built_key[MW_COMPACT_KEY_BYTES];
  mw_keyindex_t decoded; /* pool result */
  bool has_decoded;
  mw_buf_t built;     /* a key index built from the data file */
  mw_err_t work_err;
  int work_rc;
  mw_buf_t hits;      /* u32 offsets whose keys the merge supersedes (pool: DELS_FIND) */
  int64_t n_hits;     /* hits.len / 4 once found */
  mw_buf_t del_new;
  uint64_t del_id, num_deleted;
  bool remove, change;
} fwork_t;

enum {
  R_IDLE = 0, R_BASE_READ, R_SST_MANIFEST, R_SST_FILES, R_MERGE, R_KEYS_GET, R_KEYS_DATA,
  R_KEYS_WORK, R_KEYS_PUT, R_DELS_FIND, R_DELS_GET, R_BUILD, R_COMMIT,
};

typedef struct cshard {
  uint8_t id[16];
  mw_compact_shard_t st;
  uint64_t oldest_seen_ms;   /* when an uncompacted SSTable was first seen */
  uint64_t next_try_ms;      /* back-off after a failure */
  bool requested;            /* a request waits for it */
  uint64_t request_gen;      /* done once compacted up to this */
} cshard_t;

typedef struct run {
  int phase;
  size_t pending;
  int first_err;
  int deferred;               /* a failure met while requests were in flight */
  mw_err_t err;
  uint64_t t0_ms;
  int attempts;
  mw_bstore_op_t bop;
  bool planned;
  group_t *groups;
  size_t n_groups;
  int64_t n_keys;             /* every group's winning keys (lookups) */
  char data_name[MW_DATA_FILE_NAME_BYTES];
  char data_key[MW_COMPACT_KEY_BYTES], keys_key[MW_COMPACT_KEY_BYTES];
  mw_buf_t data_file, data_keys;
  mw_keyindex_t new_ki;       /* data_keys decoded (pool), cached once committed */
  bool has_new_ki;
  uint64_t new_rows;          /* rows of the new fragment */
  fwork_t *frags;
  size_t n_frags;
  mw_base_commit_t commit;
  bool has_commit;
  mw_bstore_file_t *files;
  size_t n_files;
  char *txn_key;
  mw_err_t work_err;
  int work_rc;
  bool refused;               /* a file of this run did not read back (readback.h) */
  uint64_t rows_masked, removed, folded, folded_rows;
} run_t;

typedef struct waiter {
  mw_compact_cb cb;
  void *arg;
  int status;
  char reason[MW_COMPACT_REASON_BYTES];
} waiter_t;

typedef struct kcache {
  kentry_t **slots;           /* open addressing by data-file name */
  size_t cap, n;
  size_t bytes;
} kcache_t;

struct mw_compact {
  mw_table_t *t;
  mw_compact_config_t cfg;
  uv_timer_t timer;
  uv_work_t work;
  bool timer_open, work_busy, stopping;
  void (*stop_cb)(void *);
  void *stop_arg;
  run_t run;
  uint64_t tick;
  size_t rr;                  /* round robin over the table's shards */
  cshard_t **shards;          /* each its own allocation (groups point at them) */
  size_t n_shards;
  kcache_t cache;
  waiter_t waiters[MW_COMPACT_MAX_WAITERS];
  size_t n_waiters;
  int pk_base;                /* PK field index in the base schema */
  mw_compact_stats_t stats;
};

/* compact.c */
void mw_compact__next(mw_compact_t *c);             /* a phase's requests all landed */
void mw_compact__fail(mw_compact_t *c, int status); /* end the run (deferred while busy) */
void mw_compact__queue_work(mw_compact_t *c, int phase);
int mw_compact__get(mw_compact_t *c, mw_storage_req_t *req, io_owner_t *o, const char *key);
int mw_compact__put(mw_compact_t *c, mw_storage_req_t *req, io_owner_t *o, const char *key,
                    const mw_buf_t *b);
void mw_compact__random(void *p, size_t n);
void mw_compact__count(const char *which, uint64_t n); /* "keyindex_built" */
/* Whether run phase `to` may follow `from` (the order above; every phase
 * change asserts it). */
bool mw_compact__may_follow(int from, int to);

/* compact_sst.c */
void mw_compact__group_free(group_t *g);
int mw_compact__pick(mw_compact_t *c, group_t *g, const mw_shard_manifest_t *m, uint64_t *budget_ssts,
                     uint64_t *budget_rows);
void mw_compact__sst_manifests(mw_compact_t *c);    /* R_SST_MANIFEST */
void mw_compact__sst_files(mw_compact_t *c);        /* R_SST_FILES */
void mw_compact__work_merge(mw_compact_t *c);       /* pool */

/* compact_keys.c */
void mw_compact__cache_free(kcache_t *k);
void mw_compact__frags_reset(run_t *r);
void mw_compact__keys_get(mw_compact_t *c);         /* R_KEYS_GET */
void mw_compact__keys_data(mw_compact_t *c);        /* R_KEYS_DATA */
void mw_compact__work_keys(mw_compact_t *c);        /* pool */
void mw_compact__keys_put(mw_compact_t *c);         /* R_KEYS_PUT */
void mw_compact__dels_find(mw_compact_t *c);        /* folds chosen; queues R_DELS_FIND */
void mw_compact__work_find(mw_compact_t *c);        /* pool: the key lookups */
void mw_compact__dels_get(mw_compact_t *c);         /* R_DELS_GET */
void mw_compact__work_build(mw_compact_t *c);       /* pool */
void mw_compact__cache_committed(mw_compact_t *c);  /* the commit landed: cache follows the base */

#endif
