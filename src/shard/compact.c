/*
 * compact.c — see compact.h.
 *
 * A run is a chain of phases; each phase submits its storage requests at
 * once (storage queues past its in-flight limit) and the last completion
 * moves to the next phase. CPU work (decode, merge, encode) runs on the
 * thread pool in three jobs, so the loop only moves bytes:
 *
 *   SHARD_READ   mstore read_latest (our own op on the shard's store)
 *   BASE_READ    base_store read_latest                 <------------+
 *   SST_MANIFEST GET each picked SSTable's _versions manifest        |
 *   SST_FILES    GET its data file and deletion file                 |
 *   MERGE        pool: decode, map to the table schema, merge, write |
 *                the new fragment's data file and key index          |
 *   KEYS_GET     GET the key index of every base data file not cached|
 *   KEYS_DATA    GET the data files whose index is missing           |
 *   KEYS_WORK    pool: decode / build those indexes                  |
 *   KEYS_PUT     PUT the built ones (best effort: only a cache)      |
 *   DELS_GET     GET the deletion files of fragments with hits       |
 *   BUILD        pool: lookups, unions, .bin files, the commit bytes |
 *   COMMIT       base_store commit -- lost race (-EEXIST) -----------+
 *
 * The SSTables, the merged rows and the new data file survive a lost race;
 * only the superseded rows are found again (the new version may hold new
 * fragments, or new deletion files). If the new version already compacted
 * any picked generation (another compactor of this shard), the run ends and
 * the next one starts from that version.
 *
 * Memory of one run: the picked SSTables (decoded), the merged rows, the
 * new data file, and the data files of base fragments whose key index is
 * built (once per data file ever, then it lives in _memwald/keys/).
 */
#include "shard/compact.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "common/log.h"
#include "common/metrics.h"
#include "lance/base_update.h"
#include "lance/datafile.h"
#include "lance/deletion.h"
#include "lance/keyindex.h"
#include "lance/lsm_merge.h"
#include "lance/sstable.h"
#include "shard/base_store.h"
#include "shard/table.h"

#define KEY_BYTES 512
#define BACKOFF_BASE_MS 1000
#define BACKOFF_MAX_MS 60000
#define SST_MANIFEST_NAME "_versions/18446744073709551614.manifest"

/* ------------------------------------------------------------------ config */

void mw_compact_config_defaults(mw_compact_config_t *c) {
  assert(c != NULL);
  c->enabled = true;
  c->min_sstables = 4;
  c->min_bytes = (uint64_t)64 << 20;
  c->max_age_ms = 30000;
  c->max_sstables = 64;
  c->max_rows = 2000000;
  c->interval_ms = 1000;
  c->keyindex_cache_bytes = (uint64_t)256 << 20;
}

static int parse_u64(const char *v, uint64_t lo, uint64_t hi, uint64_t *out) {
  char *end = NULL;
  if (v == NULL || *v < '0' || *v > '9') return -EINVAL;
  unsigned long long x = strtoull(v, &end, 10);
  if (*end != '\0' || x < lo || x > hi) return -EINVAL;
  *out = x;
  return 0;
}

int mw_compact_config_set(mw_compact_config_t *c, const char *key, const char *value, mw_err_t *err) {
  assert(c != NULL && key != NULL && value != NULL);
  uint64_t v = 0;
  int rc = 0;
  if (strcmp(key, "compaction") == 0) {
    if (strcmp(value, "on") == 0 || strcmp(value, "true") == 0) c->enabled = true;
    else if (strcmp(value, "off") == 0 || strcmp(value, "false") == 0) c->enabled = false;
    else rc = -EINVAL;
  } else if (strcmp(key, "compaction_min_sstables") == 0) {
    if ((rc = parse_u64(value, 1, 100000, &v)) == 0) c->min_sstables = (uint32_t)v;
  } else if (strcmp(key, "compaction_min_bytes") == 0) {
    if ((rc = parse_u64(value, 1, UINT64_MAX / 2, &v)) == 0) c->min_bytes = v;
  } else if (strcmp(key, "compaction_max_age_ms") == 0) {
    if ((rc = parse_u64(value, 0, 86400000ull * 365, &v)) == 0) c->max_age_ms = v;
  } else if (strcmp(key, "compaction_max_sstables") == 0) {
    if ((rc = parse_u64(value, 1, MW_MERGE_MAX_RUNS, &v)) == 0) c->max_sstables = (uint32_t)v;
  } else if (strcmp(key, "compaction_max_rows") == 0) {
    if ((rc = parse_u64(value, 1, (uint64_t)MW_MERGE_MAX_ROWS, &v)) == 0) c->max_rows = v;
  } else if (strcmp(key, "compaction_interval_ms") == 0) {
    if ((rc = parse_u64(value, 10, 86400000, &v)) == 0) c->interval_ms = v;
  } else if (strcmp(key, "compaction_keyindex_cache_bytes") == 0) {
    if ((rc = parse_u64(value, 0, UINT64_MAX / 2, &v)) == 0) c->keyindex_cache_bytes = v;
  } else {
    return -ENOENT;
  }
  if (rc < 0) return mw_err_set(err, -EINVAL, "config: %s: bad value '%s'", key, value);
  return 0;
}

/* ----------------------------------------------------------------- metrics */

static struct {
  bool ready;
  mw_metric_t *runs_ok, *runs_failed, *conflicts, *sstables, *rows_in, *rows_written, *rows_masked;
  mw_metric_t *keyindex_built, *seconds;
  mw_metric_family_t *seconds_fam;
} cm;

static mw_metric_t *one(mw_metric_family_t *f) { return f ? mw_metric_series(f, NULL) : NULL; }

static void metrics_init(void) {
  if (cm.ready) return;
  mw_metrics_t *m = mw_metrics_default();
  static const char *const result[] = {"result"}, *const kind[] = {"kind"};
  mw_metric_family_t *runs = mw_metrics_register(m, MW_METRIC_COUNTER, "memwald_compaction_runs_total",
                                                 "Compaction runs: result=committed|failed.", result, 1, NULL, 0);
  if (runs) {
    const char *ok[] = {"committed"}, *bad[] = {"failed"};
    cm.runs_ok = mw_metric_series(runs, ok);
    cm.runs_failed = mw_metric_series(runs, bad);
  }
  cm.conflicts = one(mw_metrics_register(m, MW_METRIC_COUNTER, "memwald_compaction_conflicts_total",
                                         "Base-table commits lost to another writer (retried).", NULL, 0, NULL, 0));
  cm.sstables = one(mw_metrics_register(m, MW_METRIC_COUNTER, "memwald_compaction_sstables_total",
                                        "SSTables compacted into the base table.", NULL, 0, NULL, 0));
  mw_metric_family_t *rows = mw_metrics_register(
      m, MW_METRIC_COUNTER, "memwald_compaction_rows_total",
      "Rows: kind=merged (live SSTable rows read), written (new base rows), masked (base rows deleted).",
      kind, 1, NULL, 0);
  if (rows) {
    const char *a[] = {"merged"}, *b[] = {"written"}, *d[] = {"masked"};
    cm.rows_in = mw_metric_series(rows, a);
    cm.rows_written = mw_metric_series(rows, b);
    cm.rows_masked = mw_metric_series(rows, d);
  }
  cm.keyindex_built = one(mw_metrics_register(m, MW_METRIC_COUNTER, "memwald_keyindex_built_total",
                                              "Key indexes built from base data files.", NULL, 0, NULL, 0));
  static const double b[] = {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
  cm.seconds_fam = mw_metrics_register(m, MW_METRIC_HISTOGRAM, "memwald_compaction_seconds",
                                       "Duration of a committed compaction run.", NULL, 0, b, sizeof b / sizeof b[0]);
  cm.seconds = one(cm.seconds_fam);
  cm.ready = true;
}

static void count(mw_metric_t *m, uint64_t n) {
  if (m) mw_counter_add(m, n);
}

/* ----------------------------------------------------------------- state */

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
  char key[KEY_BYTES], del_key[KEY_BYTES];
  bool has_del;
  int del_kind;
  uint64_t physical_rows;
  mw_batch_t batch;   /* table schema */
  uint32_t *deleted;
  size_t n_deleted;
} sst_in_t;

typedef struct fwork {
  io_owner_t io;      /* first */
  const Lance__Table__DataFragment *f; /* in run.base.meta */
  const char *pk_file;
  int32_t pk_field_pos; /* the PK's field position in that data file's schema */
  kentry_t *ke;
  bool need_data;     /* no usable key index: read the data file */
  mw_storage_req_t req, del_req;
  char key[KEY_BYTES], del_key[KEY_BYTES], del_put_key[KEY_BYTES];
  mw_keyindex_t decoded; /* pool result */
  bool has_decoded;
  mw_buf_t built;     /* a key index built from the data file */
  char built_key[KEY_BYTES];
  mw_err_t work_err;
  int work_rc;
  mw_buf_t hits;
  mw_buf_t del_new;
  uint64_t del_id, num_deleted;
  bool remove, change;
} fwork_t;

enum {
  R_IDLE = 0, R_SHARD_READ, R_BASE_READ, R_SST_MANIFEST, R_SST_FILES, R_MERGE, R_KEYS_GET,
  R_KEYS_DATA, R_KEYS_WORK, R_KEYS_PUT, R_DELS_GET, R_BUILD, R_COMMIT,
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
  mw_err_t err;
  mw_shard_t *shard;
  cshard_t *cs;
  uint64_t t0_ms;
  int attempts;
  mw_mstore_op_t mop;
  mw_bstore_op_t bop;
  uint64_t compacted_before;  /* in the base version the plan was made on */
  sst_in_t *ssts;
  size_t n_ssts;
  uint64_t last_gen;
  mw_merge_t merge;
  bool has_merge;
  char data_name[MW_DATA_FILE_NAME_BYTES];
  char data_key[KEY_BYTES], keys_key[KEY_BYTES];
  mw_buf_t data_file, data_keys;
  bool data_put;              /* the new fragment's files are stored */
  fwork_t *frags;
  size_t n_frags;
  mw_base_commit_t commit;
  bool has_commit;
  mw_bstore_file_t *files;
  size_t n_files;
  char *txn_key;
  mw_err_t work_err;
  int work_rc;
  uint64_t rows_masked;
  uint64_t removed;
  int deferred;               /* a failure met while requests were in flight */
} run_t;

typedef struct waiter {
  mw_compact_cb cb;
  void *arg;
  int status;
  char reason[MW_COMPACT_REASON_BYTES];
} waiter_t;

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
  cshard_t *shards;
  size_t n_shards;
  kentry_t **cache;
  size_t n_cache;
  size_t cache_bytes;
  waiter_t waiters[MW_COMPACT_MAX_WAITERS];
  size_t n_waiters;
  int pk_base;               /* PK field index in the base schema */
  mw_compact_stats_t stats;
};

static void run_next(mw_compact_t *c);
static void run_fail(mw_compact_t *c, int status);
static void on_io(mw_storage_req_t *req, int status);
static void schedule(mw_compact_t *c, uint64_t delay_ms);

/* ------------------------------------------------------------ key cache */

static void kentry_free(kentry_t *e) {
  if (e == NULL) return;
  mw_keyindex_free(&e->ki);
  free(e->data_file);
  free(e);
}

static kentry_t *cache_find(mw_compact_t *c, const char *data_file) {
  for (size_t i = 0; i < c->n_cache; i++)
    if (strcmp(c->cache[i]->data_file, data_file) == 0) {
      c->cache[i]->used = c->tick;
      return c->cache[i];
    }
  return NULL;
}

static size_t keyindex_bytes(const mw_keyindex_t *ki) {
  size_t n = ki->bloom.n_blocks * MW_BLOOM_BLOCK_BYTES;
  for (size_t i = 0; i < ki->schema.n_fields; i++)
    n += ki->batch.cols[i].values.len + ki->batch.cols[i].offsets.len;
  return n + sizeof(kentry_t);
}

/* Drop the least recently used entries not used by the current run until
 * the cache fits its budget. */
static void cache_trim(mw_compact_t *c) {
  while (c->cache_bytes > c->cfg.keyindex_cache_bytes) {
    size_t victim = c->n_cache;
    for (size_t i = 0; i < c->n_cache; i++)
      if (c->cache[i]->used < c->tick && (victim == c->n_cache || c->cache[i]->used < c->cache[victim]->used))
        victim = i;
    if (victim == c->n_cache) return;
    c->cache_bytes -= c->cache[victim]->bytes;
    kentry_free(c->cache[victim]);
    c->cache[victim] = c->cache[--c->n_cache];
  }
}

static kentry_t *cache_add(mw_compact_t *c, const char *data_file, mw_keyindex_t *ki) {
  kentry_t **p = realloc(c->cache, (c->n_cache + 1) * sizeof *p);
  kentry_t *e = calloc(1, sizeof *e);
  if (p) c->cache = p;
  if (p == NULL || e == NULL || (e->data_file = strdup(data_file)) == NULL) {
    free(e);
    return NULL;
  }
  e->ki = *ki; /* the batch borrows ki->schema: fix the pointer after the move */
  e->ki.batch.schema = &e->ki.schema;
  e->ki.offsets = (const uint32_t *)(const void *)e->ki.batch.cols[1].values.data;
  memset(ki, 0, sizeof *ki);
  e->bytes = keyindex_bytes(&e->ki);
  e->used = c->tick;
  c->cache[c->n_cache++] = e;
  c->cache_bytes += e->bytes;
  return e;
}

/* ---------------------------------------------------------- shard state */

static cshard_t *cshard_get(mw_compact_t *c, const uint8_t id[16]) {
  for (size_t i = 0; i < c->n_shards; i++)
    if (memcmp(c->shards[i].id, id, 16) == 0) return &c->shards[i];
  cshard_t *p = realloc(c->shards, (c->n_shards + 1) * sizeof *p);
  if (p == NULL) return NULL;
  c->shards = p;
  cshard_t *s = &c->shards[c->n_shards++];
  memset(s, 0, sizeof *s);
  memcpy(s->id, id, 16);
  return s;
}

/* Uncompacted SSTables in a shard manifest above `compacted`. */
static void count_uncompacted(const mw_shard_manifest_t *m, uint64_t compacted, uint64_t *n,
                              uint64_t *bytes) {
  *n = 0;
  *bytes = 0;
  for (size_t i = 0; i < m->n_sstables; i++) {
    if (m->sstables[i].generation <= compacted) continue;
    (*n)++;
    *bytes += m->sstables[i].in_memory_bytes;
  }
}

/* --------------------------------------------------------------- run state */

static void run_reset(mw_compact_t *c) {
  run_t *r = &c->run;
  for (size_t i = 0; i < r->n_ssts; i++) {
    sst_in_t *s = &r->ssts[i];
    mw_storage_req_cleanup(&s->req);
    mw_storage_req_cleanup(&s->del_req);
    if (s->batch.cols) mw_batch_free(&s->batch);
    free(s->deleted);
    free(s->dir);
  }
  free(r->ssts);
  for (size_t i = 0; i < r->n_frags; i++) {
    fwork_t *f = &r->frags[i];
    mw_storage_req_cleanup(&f->req);
    mw_storage_req_cleanup(&f->del_req);
    if (f->has_decoded) mw_keyindex_free(&f->decoded);
    mw_buf_free(&f->built);
    mw_buf_free(&f->hits);
    mw_buf_free(&f->del_new);
  }
  free(r->frags);
  if (r->has_merge) mw_merge_free(&r->merge);
  mw_buf_free(&r->data_file);
  mw_buf_free(&r->data_keys);
  if (r->has_commit) mw_base_commit_free(&r->commit);
  free(r->files);
  free(r->txn_key);
  mw_mstore_op_free(&r->mop);
  mw_bstore_op_free(&r->bop);
  memset(r, 0, sizeof *r);
}

static void frags_reset(run_t *r) {
  for (size_t i = 0; i < r->n_frags; i++) {
    fwork_t *f = &r->frags[i];
    mw_storage_req_cleanup(&f->req);
    mw_storage_req_cleanup(&f->del_req);
    if (f->has_decoded) mw_keyindex_free(&f->decoded);
    mw_buf_free(&f->built);
    mw_buf_free(&f->hits);
    mw_buf_free(&f->del_new);
  }
  free(r->frags);
  r->frags = NULL;
  r->n_frags = 0;
  if (r->has_commit) mw_base_commit_free(&r->commit);
  r->has_commit = false;
  free(r->files);
  r->files = NULL;
  r->n_files = 0;
  free(r->txn_key);
  r->txn_key = NULL;
}

/* Submit a GET counted in run.pending; the owner's io.status gets the result. */
static int io_get(mw_compact_t *c, mw_storage_req_t *req, io_owner_t *owner, const char *key) {
  req->data = owner;
  owner->c = c;
  c->run.pending++;
  int rc = mw_storage_get(c->t->st, req, key, 0, UINT64_MAX, on_io);
  if (rc < 0) {
    c->run.pending--;
    owner->status = rc;
  }
  return rc;
}

static int io_put(mw_compact_t *c, mw_storage_req_t *req, io_owner_t *owner, const char *key,
                  const mw_buf_t *b) {
  req->data = owner;
  owner->c = c;
  c->run.pending++;
  int rc = mw_storage_put(c->t->st, req, key, b->data, b->len, on_io);
  if (rc < 0) {
    c->run.pending--;
    owner->status = rc;
  }
  return rc;
}

static void on_io(mw_storage_req_t *req, int status) {
  io_owner_t *o = req->data;
  mw_compact_t *c = o->c;
  /* a request's owner may hold two requests: keep the first failure */
  if (o->status == 0) o->status = status;
  assert(c->run.pending > 0);
  if (--c->run.pending == 0) run_next(c);
}

/* -------------------------------------------------------------- the plan */

static int cmp_gen(const void *a, const void *b) {
  const mw_sstable_ref_t *x = *(const mw_sstable_ref_t *const *)a, *y = *(const mw_sstable_ref_t *const *)b;
  return x->generation < y->generation ? -1 : x->generation > y->generation;
}

/* Pick the SSTables above compacted_before, oldest first, within budget. */
static int pick(mw_compact_t *c, const mw_shard_manifest_t *m) {
  run_t *r = &c->run;
  const mw_sstable_ref_t **v = malloc((m->n_sstables + 1) * sizeof *v);
  if (v == NULL) return -ENOMEM;
  size_t n = 0;
  for (size_t i = 0; i < m->n_sstables; i++)
    if (m->sstables[i].generation > r->compacted_before) v[n++] = &m->sstables[i];
  qsort(v, n, sizeof *v, cmp_gen);
  uint64_t rows = 0;
  size_t k = 0;
  while (k < n && k < c->cfg.max_sstables && (k == 0 || rows + v[k]->physical_rows <= c->cfg.max_rows)) {
    rows += v[k]->physical_rows;
    k++;
  }
  r->ssts = calloc(k + 1, sizeof *r->ssts);
  if (r->ssts == NULL) {
    free(v);
    return -ENOMEM;
  }
  for (size_t i = 0; i < k; i++) {
    sst_in_t *s = &r->ssts[i];
    s->generation = v[i]->generation;
    s->in_memory_bytes = v[i]->in_memory_bytes;
    mw_storage_req_init(&s->req);
    mw_storage_req_init(&s->del_req);
    if ((s->dir = strdup(v[i]->path)) == NULL) {
      free(v);
      return -ENOMEM;
    }
    r->n_ssts++;
  }
  r->last_gen = k ? v[k - 1]->generation : 0;
  free(v);
  return (int)k;
}

/* ------------------------------------------------------------ the phases */

static void phase_base_read(mw_compact_t *c);

static void on_shard_read(mw_mstore_op_t *op, int status) {
  mw_compact_t *c = op->data;
  c->run.first_err = status;
  run_next(c);
}

static void on_base_read(mw_bstore_op_t *op, int status) {
  mw_compact_t *c = op->data;
  c->run.first_err = status;
  if (status < 0) mw_err_set(&c->run.err, status, "%s", op->err.msg);
  run_next(c);
}

static void phase_base_read(mw_compact_t *c) {
  run_t *r = &c->run;
  r->phase = R_BASE_READ;
  r->bop.data = c;
  r->bop.accept_flags = c->t->cfg.zone_write_seeds ? MW_FLAG_ZONE_WRITE_SEEDS : 0;
  int rc = mw_bstore_read_latest(c->t->st, &r->bop, on_base_read);
  if (rc < 0) run_fail(c, rc);
}

/* The base version just read must still be the table we opened: same
 * fields (ids, names, types), a MemWAL index. */
static int check_base(mw_compact_t *c) {
  const mw_table_meta_t *m = &c->run.bop.meta;
  const mw_schema_t *a = &m->schema, *b = &c->t->meta.schema;
  if (!m->has_memwal)
    return mw_err_set(&c->run.err, -ENOTSUP, "base version %" PRIu64 " has no MemWAL index", m->version);
  bool same = a->n_fields == b->n_fields;
  for (size_t i = 0; same && i < a->n_fields; i++)
    same = a->fields[i].id == b->fields[i].id && a->fields[i].type == b->fields[i].type &&
           strcmp(a->fields[i].name, b->fields[i].name) == 0;
  if (!same)
    return mw_err_set(&c->run.err, -ENOTSUP, "base version %" PRIu64 " has another schema than the "
                      "one memwald opened; restart memwald to compact it", m->version);
  return 0;
}

static void phase_sst_manifests(mw_compact_t *c) {
  run_t *r = &c->run;
  r->phase = R_SST_MANIFEST;
  const char *sdir = r->shard->ms.shard_dir;
  for (size_t i = 0; i < r->n_ssts; i++) {
    sst_in_t *s = &r->ssts[i];
    snprintf(s->key, sizeof s->key, "%s%s/%s", sdir, s->dir, SST_MANIFEST_NAME);
    io_get(c, &s->req, &s->io, s->key);
  }
  if (r->pending == 0) run_next(c);
}

/* From an SSTable's own manifest: its data file and deletion file. */
static int sst_parse_manifest(mw_compact_t *c, sst_in_t *s) {
  mw_err_t *err = &c->run.err;
  mw_section_t msg;
  mw_dmanifest_t m = {0};
  int rc = mw_dmanifest_unframe(s->req.buf.data, s->req.buf.len, &msg, NULL, err);
  if (rc == 0) rc = mw_dmanifest_decode(msg.data, msg.len, &m, err);
  if (rc == 0 && (m.pb->n_fragments != 1 || m.pb->fragments[0]->n_files != 1))
    rc = mw_err_set(err, -ENOTSUP, "SSTable %s: %zu fragments (one with one data file expected)", s->dir,
                    m.pb->n_fragments);
  if (rc == 0) {
    const Lance__Table__DataFragment *f = m.pb->fragments[0];
    const char *sdir = c->run.shard->ms.shard_dir;
    s->physical_rows = f->physical_rows;
    snprintf(s->key, sizeof s->key, "%s%s/data/%s", sdir, s->dir, f->files[0]->path);
    s->has_del = f->deletion_file != NULL;
    if (s->has_del) {
      const Lance__Table__DeletionFile *d = f->deletion_file;
      s->del_kind = d->file_type == LANCE__TABLE__DELETION_FILE__DELETION_FILE_TYPE__BITMAP;
      snprintf(s->del_key, sizeof s->del_key, "%s%s/%s/%" PRIu64 "-%" PRIu64 "-%" PRIu64 ".%s", sdir,
               s->dir, MW_DELETION_DIR, f->id, d->read_version, d->id, s->del_kind ? "bin" : "arrow");
    }
  }
  if (rc < 0) mw_err_set(err, rc, "SSTable %s: manifest refused", s->dir);
  mw_dmanifest_free(&m);
  return rc;
}

static void phase_sst_files(mw_compact_t *c) {
  run_t *r = &c->run;
  for (size_t i = 0; i < r->n_ssts; i++) {
    sst_in_t *s = &r->ssts[i];
    if (s->io.status < 0) {
      mw_err_set(&r->err, s->io.status, "SSTable %s (generation %" PRIu64 "): GET %s: %s", s->dir,
                 s->generation, s->key, mw_strerror(s->io.status));
      run_fail(c, s->io.status);
      return;
    }
    int rc = sst_parse_manifest(c, s);
    if (rc < 0) {
      run_fail(c, rc);
      return;
    }
  }
  r->phase = R_SST_FILES;
  for (size_t i = 0; i < r->n_ssts; i++) {
    sst_in_t *s = &r->ssts[i];
    io_get(c, &s->req, &s->io, s->key);
    if (s->has_del) io_get(c, &s->del_req, &s->io, s->del_key);
  }
  if (r->pending == 0) run_next(c);
}

/* ---------------------------------------------------------- pool: merge */

/* The data file's columns, moved into a batch of the table schema: by field
 * id, `_tombstone` by name (other writers may number it differently). */
static int sst_decode(const mw_table_t *t, sst_in_t *s, mw_err_t *err) {
  mw_datafile_t f;
  mw_batch_t fb = {0};
  int rc = mw_datafile_open(&f, s->req.buf.data, s->req.buf.len, NULL, err);
  if (rc < 0) return rc;
  if ((rc = mw_datafile_read_batch(&f, &fb, err)) < 0) goto done;
  if ((uint64_t)fb.n_rows != s->physical_rows) {
    rc = mw_err_set(err, -EBADMSG, "%" PRId64 " rows, the manifest says %" PRIu64, fb.n_rows, s->physical_rows);
    goto done;
  }
  if ((rc = mw_batch_init(&s->batch, &t->schema)) < 0) goto done;
  s->batch.n_rows = fb.n_rows;
  for (size_t i = 0; i < t->schema.n_fields && rc == 0; i++) {
    const mw_field_t *want = &t->schema.fields[i];
    bool tomb = i == t->schema.n_fields - 1;
    size_t j = 0;
    while (j < f.schema.n_fields && (tomb ? strcmp(f.schema.fields[j].name, want->name) != 0
                                          : f.schema.fields[j].id != want->id))
      j++;
    if (j == f.schema.n_fields || f.schema.fields[j].type != want->type) {
      rc = mw_err_set(err, -ENOTSUP, "no column '%s' of type %s (schema changed?)", want->name,
                      mw_type_name(want->type));
      break;
    }
    mw_buf_free(&s->batch.cols[i].offsets); /* mw_batch_init's leading offset */
    s->batch.cols[i] = fb.cols[j];
    memset(&fb.cols[j], 0, sizeof fb.cols[j]);
  }
  if (rc == 0 && mw_batch_validate(&s->batch) < 0)
    rc = mw_err_set(err, -EBADMSG, "the decoded rows are not a valid batch");
done:
  if (fb.cols) mw_batch_free(&fb);
  mw_datafile_close(&f);
  mw_buf_free(&s->req.buf); /* the decoded rows own their buffers now */
  return rc;
}

static int sst_deletions(sst_in_t *s, mw_err_t *err) {
  if (!s->has_del) return 0;
  int rc = s->del_kind ? mw_deletion_decode(s->del_req.buf.data, s->del_req.buf.len, s->physical_rows,
                                            &s->deleted, &s->n_deleted, err)
                       : mw_deletion_arrow_decode(s->del_req.buf.data, s->del_req.buf.len,
                                                  s->physical_rows, &s->deleted, &s->n_deleted, err);
  mw_buf_free(&s->del_req.buf);
  return rc;
}

static void random_bytes(void *p, size_t n) {
  uint8_t *b = p;
  while (n > 0) {
    ssize_t k = getrandom(b, n, 0);
    if (k > 0) {
      b += k;
      n -= (size_t)k;
    }
  }
}

static void work_merge(mw_compact_t *c) {
  run_t *r = &c->run;
  mw_table_t *t = c->t;
  mw_err_t *err = &r->work_err;
  int rc = 0;
  for (size_t i = 0; i < r->n_ssts && rc == 0; i++) {
    sst_in_t *s = &r->ssts[i];
    rc = sst_decode(t, s, err);
    if (rc == 0) rc = sst_deletions(s, err);
    if (rc < 0) mw_err_set(err, rc, "SSTable %s (generation %" PRIu64 ")", s->dir, s->generation);
  }
  mw_merge_run_t *runs = calloc(r->n_ssts + 1, sizeof *runs);
  if (rc == 0 && runs == NULL) rc = -ENOMEM;
  for (size_t i = 0; rc == 0 && i < r->n_ssts; i++)
    runs[i] = (mw_merge_run_t){.batch = &r->ssts[i].batch, .deleted = r->ssts[i].deleted,
                               .n_deleted = r->ssts[i].n_deleted, .generation = r->ssts[i].generation};
  if (rc == 0) {
    rc = mw_merge_runs(&t->schema, &t->meta.schema, runs, r->n_ssts, &r->merge, err);
    r->has_merge = true;
  }
  free(runs);
  /* The SSTables are no longer needed: the merge copied every winner. */
  for (size_t i = 0; i < r->n_ssts; i++) {
    if (r->ssts[i].batch.cols) mw_batch_free(&r->ssts[i].batch);
    free(r->ssts[i].deleted);
    r->ssts[i].deleted = NULL;
  }
  if (rc == 0 && r->merge.rows.n_rows > 0) {
    uint8_t u[16];
    random_bytes(u, sizeof u);
    mw_data_file_name(u, r->data_name);
    const mw_batch_t *bp = &r->merge.rows;
    mw_sstable_opts_t o = {.zstd = t->cfg.sstable_zstd, .zone_seeds = t->cfg.zone_write_seeds,
                           .seed_rows_per_zone = t->cfg.zone_seed_rows_per_zone};
    rc = mw_sstable_data_file(&t->meta.schema, &bp, 1, &o, &r->data_file, err);
    if (rc == 0)
      rc = mw_keyindex_build(&t->meta.schema.fields[c->pk_base], &r->merge.rows.cols[c->pk_base],
                             r->data_name, &r->data_keys, err);
  }
  r->work_rc = rc;
}

/* ---------------------------------------------------- pool: key indexes */

static void work_keys(mw_compact_t *c) {
  run_t *r = &c->run;
  const mw_field_t *pk = &c->t->meta.schema.fields[c->pk_base];
  for (size_t i = 0; i < r->n_frags; i++) {
    fwork_t *f = &r->frags[i];
    if (f->ke != NULL || f->has_decoded) continue;
    f->work_rc = 0;
    if (!f->need_data) {
      f->work_rc = mw_keyindex_decode(f->req.buf.data, f->req.buf.len, pk, &f->decoded, &f->work_err);
      f->has_decoded = true;
      if (f->work_rc == 0 && strcmp(f->decoded.data_file, f->pk_file) != 0)
        f->work_rc = mw_err_set(&f->work_err, -EBADMSG, "key index of %s names %s", f->pk_file,
                                f->decoded.data_file);
      mw_buf_free(&f->req.buf);
      continue;
    }
    /* build it from the data file's PK column */
    mw_datafile_t df;
    mw_column_t col = {0};
    int rc = mw_datafile_open(&df, f->req.buf.data, f->req.buf.len, NULL, &f->work_err);
    if (rc == 0) {
      size_t j = 0;
      while (j < df.schema.n_fields && df.schema.fields[j].id != pk->id) j++;
      if (j == df.schema.n_fields)
        rc = mw_err_set(&f->work_err, -EBADMSG, "data file %s has no field id %d", f->pk_file, pk->id);
      else if ((uint64_t)df.n_rows != f->f->physical_rows)
        rc = mw_err_set(&f->work_err, -EBADMSG, "data file %s has %" PRIu64 " rows, fragment %" PRIu64 " says %" PRIu64,
                        f->pk_file, df.n_rows, f->f->id, f->f->physical_rows);
      else
        rc = mw_datafile_read_column(&df, j, &col, &f->work_err);
      if (rc == 0) rc = mw_keyindex_build(pk, &col, f->pk_file, &f->built, &f->work_err);
      if (rc == 0) rc = mw_keyindex_decode(f->built.data, f->built.len, pk, &f->decoded, &f->work_err);
      f->has_decoded = true;
      mw_datafile_close(&df);
    }
    mw_buf_free(&col.validity);
    mw_buf_free(&col.values);
    mw_buf_free(&col.offsets);
    mw_buf_free(&col.item_validity);
    mw_buf_free(&f->req.buf);
    f->work_rc = rc;
  }
}

/* ------------------------------------------------- pool: build the commit */

static int frag_deletions(mw_compact_t *c, fwork_t *f, uint64_t read_version, mw_err_t *err) {
  const uint32_t *hits = (const uint32_t *)(const void *)f->hits.data;
  size_t n_hits = f->hits.len / 4;
  const Lance__Table__DeletionFile *d = f->f->deletion_file;
  uint32_t *old = NULL, *u = NULL;
  size_t n_old = 0;
  int rc = 0;
  if (d != NULL) {
    bool bitmap = d->file_type == LANCE__TABLE__DELETION_FILE__DELETION_FILE_TYPE__BITMAP;
    rc = bitmap ? mw_deletion_decode(f->del_req.buf.data, f->del_req.buf.len, f->f->physical_rows, &old,
                                     &n_old, err)
                : mw_deletion_arrow_decode(f->del_req.buf.data, f->del_req.buf.len, f->f->physical_rows,
                                           &old, &n_old, err);
    if (rc < 0) return mw_err_set(err, rc, "fragment %" PRIu64 ": deletion file %s", f->f->id, f->del_key);
  }
  int64_t k = mw_deletion_union(old, n_old, hits, n_hits, &u);
  if (k < 0) rc = (int)k;
  if (rc == 0 && (size_t)k > n_old) {
    f->change = true;
    c->run.rows_masked += (uint64_t)k - n_old;
    f->num_deleted = (uint64_t)k;
    if ((uint64_t)k >= f->f->physical_rows) {
      f->remove = true;
    } else {
      random_bytes(&f->del_id, sizeof f->del_id);
      char name[MW_DELETION_NAME_BYTES];
      mw_deletion_name_format(f->f->id, read_version, f->del_id, name, sizeof name);
      snprintf(f->del_put_key, sizeof f->del_put_key, "%s/%s", MW_DELETION_DIR, name);
      rc = mw_deletion_encode(u, (size_t)k, &f->del_new, err);
    }
  }
  free(old);
  free(u);
  return rc;
}

static void work_build(mw_compact_t *c) {
  run_t *r = &c->run;
  mw_table_t *t = c->t;
  mw_err_t *err = &r->work_err;
  const mw_table_meta_t *base = &r->bop.meta;
  const mw_field_t *pk = &t->meta.schema.fields[c->pk_base];
  int rc = 0;
  r->rows_masked = 0;
  r->removed = 0;
  size_t nd = 0, nr = 0;
  for (size_t i = 0; i < r->n_frags && rc == 0; i++) {
    fwork_t *f = &r->frags[i];
    if (f->hits.len == 0) continue;
    rc = frag_deletions(c, f, base->version, err);
    nd += f->change && !f->remove;
    nr += f->remove;
  }
  mw_bu_deletion_t *dels = calloc(nd + 1, sizeof *dels);
  uint64_t *removed = calloc(nr + 1, sizeof *removed);
  if (rc == 0 && (dels == NULL || removed == NULL)) rc = -ENOMEM;
  nd = nr = 0;
  for (size_t i = 0; i < r->n_frags && rc == 0; i++) {
    fwork_t *f = &r->frags[i];
    if (f->remove) removed[nr++] = f->f->id;
    else if (f->change)
      dels[nd++] = (mw_bu_deletion_t){.fragment_id = f->f->id, .kind = MW_DELETION_BITMAP, .id = f->del_id,
                                      .num_deleted_rows = f->num_deleted};
  }
  r->removed = nr;
  size_t ncols = t->meta.schema.n_fields;
  int32_t *ids = calloc(ncols + 1, sizeof *ids), *cols = calloc(ncols + 1, sizeof *cols);
  if (rc == 0 && (ids == NULL || cols == NULL)) rc = -ENOMEM;
  for (size_t i = 0; rc == 0 && i < ncols; i++) {
    ids[i] = t->meta.schema.fields[i].id;
    cols[i] = (int32_t)i;
  }
  mw_bu_fragment_t frag = {.data_file = r->data_name, .file_size_bytes = r->data_file.len,
                           .physical_rows = (uint64_t)r->merge.rows.n_rows, .field_ids = ids,
                           .column_indices = cols, .n_columns = ncols};
  mw_compacted_sstable_t cs = {.generation = r->last_gen};
  memcpy(cs.shard_id, r->shard->ms.shard_id, 16);
  mw_base_update_t u = {.deletions = dels, .n_deletions = nd, .removed = removed, .n_removed = nr,
                        .fragments = &frag, .n_fragments = r->merge.rows.n_rows > 0 ? 1 : 0,
                        .compacted = &cs, .n_compacted = 1,
                        /* seeded fragments: the commit carries FLAG_ZONE_WRITE_SEEDS (docs/sstable.md) */
                        .add_feature_flags = t->cfg.zone_write_seeds && r->merge.rows.n_rows > 0
                                                 ? MW_FLAG_ZONE_WRITE_SEEDS : 0};
  if (rc == 0) {
    rc = mw_base_update_build(base, &u, &r->commit, err);
    r->has_commit = rc == 0;
  }
  (void)pk;
  free(dels);
  free(removed);
  free(ids);
  free(cols);
  r->work_rc = rc;
}

/* ---------------------------------------------------------- pool plumbing */

static void work_cb(uv_work_t *w) {
  mw_compact_t *c = w->data;
  switch (c->run.phase) {
    case R_MERGE: work_merge(c); break;
    case R_KEYS_WORK: work_keys(c); break;
    case R_BUILD: work_build(c); break;
    default: assert(0 && "compact: pool job in a storage phase");
  }
}

static void after_work_cb(uv_work_t *w, int status) {
  mw_compact_t *c = w->data;
  c->work_busy = false;
  if (status < 0) c->run.work_rc = status;
  run_next(c);
}

static void queue_work(mw_compact_t *c, int phase) {
  c->run.phase = phase;
  c->run.work_rc = 0;
  mw_err_clear(&c->run.work_err);
  c->work.data = c;
  int rc = uv_queue_work(c->t->loop, &c->work, work_cb, after_work_cb);
  if (rc < 0) {
    run_fail(c, rc);
    return;
  }
  c->work_busy = true;
}

/* ------------------------------------------------- base key resolution */

/* Set up one fwork per base fragment: its PK data file and cache entry. */
static int frags_prepare(mw_compact_t *c) {
  run_t *r = &c->run;
  const Lance__Table__Manifest *pb = r->bop.meta.manifest.pb;
  int32_t pk_id = c->t->meta.schema.fields[c->pk_base].id;
  r->frags = calloc(pb->n_fragments + 1, sizeof *r->frags);
  if (r->frags == NULL) return -ENOMEM;
  r->n_frags = pb->n_fragments;
  for (size_t i = 0; i < pb->n_fragments; i++) {
    fwork_t *f = &r->frags[i];
    f->f = pb->fragments[i];
    mw_storage_req_init(&f->req);
    mw_storage_req_init(&f->del_req);
    for (size_t d = 0; d < f->f->n_files && f->pk_file == NULL; d++)
      for (size_t k = 0; k < f->f->files[d]->n_fields; k++)
        if (f->f->files[d]->fields[k] == pk_id) f->pk_file = f->f->files[d]->path;
    if (f->pk_file == NULL || strchr(f->pk_file, '/') != NULL)
      return mw_err_set(&r->err, -ENOTSUP, "base fragment %" PRIu64 " has no data file holding the "
                        "primary key (or one outside data/)", f->f->id);
    f->ke = cache_find(c, f->pk_file);
  }
  return 0;
}

static void phase_keys_get(mw_compact_t *c) {
  run_t *r = &c->run;
  frags_reset(r);
  int rc = frags_prepare(c);
  if (rc < 0) {
    run_fail(c, rc);
    return;
  }
  r->phase = R_KEYS_GET;
  for (size_t i = 0; i < r->n_frags; i++) {
    fwork_t *f = &r->frags[i];
    if (f->ke != NULL) continue;
    if (mw_keyindex_name(f->pk_file, f->key, sizeof f->key) < 0) {
      mw_err_set(&r->err, -ENAMETOOLONG, "data file name %s", f->pk_file);
      run_fail(c, -ENAMETOOLONG);
      return;
    }
    io_get(c, &f->req, &f->io, f->key);
  }
  if (r->pending == 0) run_next(c);
}

static void phase_keys_data(mw_compact_t *c) {
  run_t *r = &c->run;
  r->phase = R_KEYS_DATA;
  for (size_t i = 0; i < r->n_frags; i++) {
    fwork_t *f = &r->frags[i];
    if (f->ke != NULL) continue;
    if (f->io.status == 0) continue;
    if (f->io.status != -ENOENT) {
      mw_err_set(&r->err, f->io.status, "GET %s: %s", f->key, mw_strerror(f->io.status));
      run_fail(c, f->io.status);
      return;
    }
    f->io.status = 0;
    f->need_data = true;
    snprintf(f->key, sizeof f->key, "data/%s", f->pk_file);
    io_get(c, &f->req, &f->io, f->key);
  }
  if (r->pending == 0) run_next(c);
}

static void phase_keys_put(mw_compact_t *c) {
  run_t *r = &c->run;
  for (size_t i = 0; i < r->n_frags; i++) {
    fwork_t *f = &r->frags[i];
    if (f->ke != NULL) continue;
    if (f->io.status < 0) {
      mw_err_set(&r->err, f->io.status, "GET %s: %s", f->key, mw_strerror(f->io.status));
      run_fail(c, f->io.status);
      return;
    }
    if (f->work_rc < 0 && !f->need_data) {
      /* a damaged index is only a cache: rebuild it from the data file */
      mw_log_warn("table %s: key index %s refused (%s); rebuilding it", c->t->path, f->key, f->work_err.msg);
    } else if (f->work_rc < 0) {
      mw_err_set(&r->err, f->work_rc, "key index of %s: %s", f->pk_file, f->work_err.msg);
      run_fail(c, f->work_rc);
      return;
    }
  }
  /* refused indexes go round once more, by their data file */
  bool again = false;
  for (size_t i = 0; i < r->n_frags; i++) {
    fwork_t *f = &r->frags[i];
    if (f->ke == NULL && f->work_rc < 0 && !f->need_data) {
      if (f->has_decoded) mw_keyindex_free(&f->decoded);
      f->has_decoded = false;
      f->io.status = -ENOENT;
      again = true;
    }
  }
  if (again) {
    phase_keys_data(c);
    return;
  }
  r->phase = R_KEYS_PUT;
  for (size_t i = 0; i < r->n_frags; i++) {
    fwork_t *f = &r->frags[i];
    if (f->ke != NULL) continue;
    f->ke = cache_add(c, f->pk_file, &f->decoded);
    f->has_decoded = false;
    if (f->ke == NULL) {
      run_fail(c, -ENOMEM);
      return;
    }
    if (f->built.len == 0) continue;
    c->stats.keyindex_built++;
    count(cm.keyindex_built, 1);
    mw_keyindex_name(f->pk_file, f->built_key, sizeof f->built_key);
    io_put(c, &f->req, &f->io, f->built_key, &f->built);
  }
  if (r->pending == 0) run_next(c);
}

/* Lookups happen on the loop: with the indexes cached they cost bloom
 * probes and a few binary searches per fragment. */
static void phase_dels_get(mw_compact_t *c) {
  run_t *r = &c->run;
  for (size_t i = 0; i < r->n_frags; i++) {
    fwork_t *f = &r->frags[i];
    if (f->built.len > 0 && f->io.status < 0)
      mw_log_warn("table %s: key index %s not stored (%s); it is rebuilt next time", c->t->path,
                  f->built_key, mw_strerror(f->io.status));
    mw_buf_free(&f->built);
    f->io.status = 0;
  }
  cache_trim(c);
  const mw_field_t *pk = &c->t->meta.schema.fields[c->pk_base];
  r->phase = R_DELS_GET;
  for (size_t i = 0; i < r->n_frags; i++) {
    fwork_t *f = &r->frags[i];
    mw_buf_reset(&f->hits);
    int64_t n = mw_keyindex_find(&f->ke->ki, pk, &r->merge.keys, r->merge.hashes, r->merge.n_keys, &f->hits);
    if (n < 0) {
      run_fail(c, (int)n);
      return;
    }
    const Lance__Table__DeletionFile *d = f->f->deletion_file;
    if (n == 0 || d == NULL) continue;
    bool bitmap = d->file_type == LANCE__TABLE__DELETION_FILE__DELETION_FILE_TYPE__BITMAP;
    snprintf(f->del_key, sizeof f->del_key, "%s/%" PRIu64 "-%" PRIu64 "-%" PRIu64 ".%s", MW_DELETION_DIR,
             f->f->id, d->read_version, d->id, bitmap ? "bin" : "arrow");
    io_get(c, &f->del_req, &f->io, f->del_key);
  }
  if (r->pending == 0) run_next(c);
}

/* ------------------------------------------------------------ the commit */

static void on_commit(mw_bstore_op_t *op, int status) {
  mw_compact_t *c = op->data;
  c->run.first_err = status;
  if (status < 0) mw_err_set(&c->run.err, status, "%s", op->err.msg);
  run_next(c);
}

static void phase_commit(mw_compact_t *c) {
  run_t *r = &c->run;
  size_t n = 0;
  r->files = calloc(r->n_frags + 4, sizeof *r->files);
  r->txn_key = malloc(strlen(MW_TXN_DIR) + 2 + MW_TXN_NAME_BYTES);
  if (r->files == NULL || r->txn_key == NULL) {
    run_fail(c, -ENOMEM);
    return;
  }
  if (r->data_file.len > 0 && !r->data_put) {
    snprintf(r->data_key, sizeof r->data_key, "data/%s", r->data_name);
    mw_keyindex_name(r->data_name, r->keys_key, sizeof r->keys_key);
    r->files[n++] = (mw_bstore_file_t){r->data_key, r->data_file.data, r->data_file.len};
    r->files[n++] = (mw_bstore_file_t){r->keys_key, r->data_keys.data, r->data_keys.len};
  }
  for (size_t i = 0; i < r->n_frags; i++) {
    fwork_t *f = &r->frags[i];
    if (f->change && !f->remove)
      r->files[n++] = (mw_bstore_file_t){f->del_put_key, f->del_new.data, f->del_new.len};
  }
  sprintf(r->txn_key, "%s/%s", MW_TXN_DIR, r->commit.txn_name);
  r->files[n++] = (mw_bstore_file_t){r->txn_key, r->commit.txn.data, r->commit.txn.len};
  r->n_files = n;
  r->phase = R_COMMIT;
  r->bop.data = c;
  int rc = mw_bstore_commit(c->t->st, &r->bop, r->files, n, r->commit.version, &r->commit.manifest, on_commit);
  if (rc < 0) {
    mw_err_set(&r->err, rc, "base commit of version %" PRIu64 " refused", r->commit.version);
    run_fail(c, rc);
  }
}

/* ------------------------------------------------------------ run ending */

static void waiters_check(mw_compact_t *c, int status, const char *reason);

static void run_end(mw_compact_t *c) {
  run_reset(c);
  c->stats.running = false;
  if (c->stopping) {
    if (!c->work_busy && !c->timer_open && c->stop_cb) {
      void (*cb)(void *) = c->stop_cb;
      c->stop_cb = NULL;
      cb(c->stop_arg);
    }
    return;
  }
  schedule(c, 0);
}

static void run_fail(mw_compact_t *c, int status) {
  run_t *r = &c->run;
  assert(status < 0);
  if (r->pending > 0 || c->work_busy) { /* let them land first (run_next) */
    if (r->deferred == 0) r->deferred = status;
    return;
  }
  if (r->err.code == 0) mw_err_set(&r->err, status, "%s", mw_strerror(status));
  char reason[MW_COMPACT_REASON_BYTES];
  snprintf(reason, sizeof reason, "shard %s: compaction failed: %.400s", r->shard ? r->shard->id_str : "?",
           r->err.msg);
  snprintf(c->stats.last_error, sizeof c->stats.last_error, "%s", reason);
  c->stats.failures++;
  count(cm.runs_failed, 1);
  if (r->cs) {
    r->cs->st.failures++;
    uint32_t sh = r->cs->st.failures - 1 < 6 ? r->cs->st.failures - 1 : 6;
    uint64_t d = (uint64_t)BACKOFF_BASE_MS << sh;
    r->cs->next_try_ms = uv_now(c->t->loop) + (d > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : d);
    if (r->cs->requested) {
      r->cs->requested = false;
      waiters_check(c, status, reason);
    }
  }
  mw_log_warn("table %s: %s (retrying later)", c->t->path, reason);
  run_end(c);
}

static void run_committed(mw_compact_t *c) {
  run_t *r = &c->run;
  uint64_t ms = uv_now(c->t->loop) - r->t0_ms;
  c->stats.runs++;
  c->stats.sstables += r->n_ssts;
  c->stats.rows_in += (uint64_t)r->merge.rows_in;
  c->stats.rows_written += (uint64_t)r->merge.rows.n_rows;
  c->stats.rows_masked += r->rows_masked;
  c->stats.base_version = r->commit.version;
  c->stats.last_run_ms = ms;
  count(cm.runs_ok, 1);
  count(cm.sstables, r->n_ssts);
  count(cm.rows_in, (uint64_t)r->merge.rows_in);
  count(cm.rows_written, (uint64_t)r->merge.rows.n_rows);
  count(cm.rows_masked, r->rows_masked);
  if (cm.seconds) mw_histogram_observe(cm.seconds, cm.seconds_fam, (double)ms / 1000.0);
  r->cs->st.compacted_gen = r->last_gen;
  r->cs->st.committed_ms = uv_now(c->t->loop);
  r->cs->st.failures = 0;
  r->cs->next_try_ms = 0;
  r->cs->oldest_seen_ms = 0;
  mw_log_info("table %s: shard %s: compacted generations %" PRIu64 "..%" PRIu64 " (%zu SSTables, %" PRId64
              " rows in, %" PRId64 " written, %" PRId64 " deletes, %" PRIu64 " base rows masked, %" PRIu64
              " fragments removed) as base version %" PRIu64 " in %" PRIu64 " ms%s",
              c->t->path, r->shard->id_str, r->ssts[0].generation, r->last_gen, r->n_ssts, r->merge.rows_in,
              r->merge.rows.n_rows, r->merge.tombstones, r->rows_masked, r->removed, r->commit.version, ms,
              r->attempts > 1 ? " after lost races" : "");
  if (r->cs->requested && r->last_gen >= r->cs->request_gen) {
    r->cs->requested = false;
    waiters_check(c, 0, NULL);
  }
  run_end(c);
}

/* A run found nothing to do for its shard (or another compactor did it). */
static void run_nothing(mw_compact_t *c) {
  run_t *r = &c->run;
  if (r->cs->requested && r->cs->st.compacted_gen >= r->cs->request_gen) {
    r->cs->requested = false;
    waiters_check(c, 0, NULL);
  }
  r->cs->oldest_seen_ms = 0;
  run_end(c);
}

/* ------------------------------------------------------ the phase switch */

static void after_shard_read(mw_compact_t *c) {
  run_t *r = &c->run;
  if (r->first_err < 0) {
    mw_err_set(&r->err, r->first_err, "shard manifest: %s", r->mop.err.msg[0] ? r->mop.err.msg : mw_strerror(r->first_err));
    run_fail(c, r->first_err);
    return;
  }
  phase_base_read(c);
}

static void after_base_read(mw_compact_t *c) {
  run_t *r = &c->run;
  if (r->first_err < 0) {
    run_fail(c, r->first_err);
    return;
  }
  int rc = check_base(c);
  if (rc < 0) {
    run_fail(c, rc);
    return;
  }
  uint64_t compacted = mw_memwal_compacted(&r->bop.meta.memwal, r->shard->ms.shard_id);
  if (compacted > r->cs->st.compacted_gen) {
    r->cs->st.compacted_gen = compacted;
    r->cs->st.committed_ms = uv_now(c->t->loop);
  }
  if (r->bop.meta.version > c->stats.base_version) c->stats.base_version = r->bop.meta.version;
  if (r->n_ssts == 0) { /* first read of this run: make the plan */
    r->compacted_before = compacted;
    count_uncompacted(&r->mop.m, compacted, &r->cs->st.uncompacted, &r->cs->st.uncompacted_bytes);
    rc = pick(c, &r->mop.m);
    if (rc < 0) {
      run_fail(c, rc);
      return;
    }
    if (rc == 0) {
      run_nothing(c);
      return;
    }
    phase_sst_manifests(c);
    return;
  }
  /* after a lost race */
  if (compacted != r->compacted_before) {
    mw_log_notice("table %s: shard %s: another compactor reached generation %" PRIu64
                  " first; this run stops", c->t->path, r->shard->id_str, compacted);
    run_nothing(c);
    return;
  }
  phase_keys_get(c);
}

static void run_next(mw_compact_t *c) {
  run_t *r = &c->run;
  if (r->deferred < 0) {
    run_fail(c, r->deferred);
    return;
  }
  if (c->stopping && !c->work_busy) {
    mw_err_set(&r->err, -ECANCELED, "the table is closing");
    run_fail(c, -ECANCELED);
    return;
  }
  switch (r->phase) {
    case R_SHARD_READ: after_shard_read(c); return;
    case R_BASE_READ: after_base_read(c); return;
    case R_SST_MANIFEST: phase_sst_files(c); return;
    case R_SST_FILES:
      for (size_t i = 0; i < r->n_ssts; i++)
        if (r->ssts[i].io.status < 0) {
          mw_err_set(&r->err, r->ssts[i].io.status, "SSTable %s (generation %" PRIu64 "): %s", r->ssts[i].dir,
                     r->ssts[i].generation, mw_strerror(r->ssts[i].io.status));
          run_fail(c, r->ssts[i].io.status);
          return;
        }
      queue_work(c, R_MERGE);
      return;
    case R_MERGE:
      if (r->work_rc < 0) {
        mw_err_set(&r->err, r->work_rc, "%s", r->work_err.msg[0] ? r->work_err.msg : mw_strerror(r->work_rc));
        run_fail(c, r->work_rc);
        return;
      }
      phase_keys_get(c);
      return;
    case R_KEYS_GET: phase_keys_data(c); return;
    case R_KEYS_DATA:
      for (size_t i = 0; i < r->n_frags; i++)
        if (r->frags[i].ke == NULL && r->frags[i].io.status < 0) {
          mw_err_set(&r->err, r->frags[i].io.status, "GET %s: %s", r->frags[i].key,
                     mw_strerror(r->frags[i].io.status));
          run_fail(c, r->frags[i].io.status);
          return;
        }
      queue_work(c, R_KEYS_WORK);
      return;
    case R_KEYS_WORK: phase_keys_put(c); return;
    case R_KEYS_PUT: phase_dels_get(c); return;
    case R_DELS_GET:
      for (size_t i = 0; i < r->n_frags; i++)
        if (r->frags[i].io.status < 0) {
          mw_err_set(&r->err, r->frags[i].io.status, "GET %s: %s", r->frags[i].del_key,
                     mw_strerror(r->frags[i].io.status));
          run_fail(c, r->frags[i].io.status);
          return;
        }
      queue_work(c, R_BUILD);
      return;
    case R_BUILD:
      if (r->work_rc < 0) {
        mw_err_set(&r->err, r->work_rc, "%s", r->work_err.msg[0] ? r->work_err.msg : mw_strerror(r->work_rc));
        run_fail(c, r->work_rc);
        return;
      }
      phase_commit(c);
      return;
    case R_COMMIT:
      if (r->first_err == 0) {
        run_committed(c);
        return;
      }
      if (r->first_err == -EEXIST && ++r->attempts < MW_COMPACT_MAX_ATTEMPTS) {
        c->stats.conflicts++;
        count(cm.conflicts, 1);
        r->data_put = true; /* the puts before the lost link all succeeded */
        mw_err_clear(&r->err);
        phase_base_read(c);
        return;
      }
      run_fail(c, r->first_err);
      return;
    default: assert(0 && "compact: completion in no phase");
  }
}

/* -------------------------------------------------------------- policy */

static bool due(const mw_compact_t *c, cshard_t *cs, mw_shard_t *s, uint64_t now) {
  if (!s->ms.has_cached) return false;
  uint64_t n, bytes;
  count_uncompacted(&s->ms.cached, cs->st.compacted_gen, &n, &bytes);
  cs->st.uncompacted = n;
  cs->st.uncompacted_bytes = bytes;
  if (n == 0) {
    cs->oldest_seen_ms = 0;
    return false;
  }
  if (cs->oldest_seen_ms == 0) cs->oldest_seen_ms = now;
  if (cs->next_try_ms > now) return false;
  if (cs->requested) return true;
  if (!c->cfg.enabled) return false;
  return n >= c->cfg.min_sstables || bytes >= c->cfg.min_bytes ||
         (c->cfg.max_age_ms > 0 && now - cs->oldest_seen_ms >= c->cfg.max_age_ms);
}

static void start_run(mw_compact_t *c, mw_shard_t *s, cshard_t *cs) {
  run_t *r = &c->run;
  assert(r->phase == R_IDLE);
  memset(r, 0, sizeof *r);
  c->tick++;
  r->shard = s;
  r->cs = cs;
  r->t0_ms = uv_now(c->t->loop);
  r->attempts = 1;
  mw_mstore_op_init(&r->mop);
  mw_bstore_op_init(&r->bop);
  r->mop.data = c;
  r->phase = R_SHARD_READ;
  c->stats.running = true;
  int rc = mw_mstore_read_latest(&s->ms, &r->mop, on_shard_read);
  if (rc < 0) run_fail(c, rc);
}

static void on_timer(uv_timer_t *h) {
  mw_compact_t *c = h->data;
  if (c->stopping || c->run.phase != R_IDLE) return;
  uint64_t now = uv_now(c->t->loop);
  /* round robin from the shard after the last one run */
  size_t n = c->t->n_shards;
  for (size_t k = 0; k < n; k++) {
    mw_table_shard_t *ts = c->t->shards[(c->tick + k) % n];
    mw_shard_t *s = &ts->shard;
    if (mw_shard_state(s) != MW_SS_ACTIVE) continue;
    cshard_t *cs = cshard_get(c, ts->id);
    if (cs == NULL) continue;
    if (due(c, cs, s, now)) {
      start_run(c, s, cs);
      return;
    }
    if (cs->requested && cs->st.uncompacted == 0) {
      cs->requested = false;
      waiters_check(c, 0, NULL);
    }
  }
  /* requested shards that are not ACTIVE any more end their request */
  for (size_t i = 0; i < c->n_shards; i++) {
    if (!c->shards[i].requested) continue;
    mw_shard_t *s = mw_table_shard(c->t, c->shards[i].id, false);
    if (s == NULL || mw_shard_state(s) != MW_SS_ACTIVE) {
      c->shards[i].requested = false;
      waiters_check(c, -ESHUTDOWN, "a shard stopped being ACTIVE here before its compaction");
    }
  }
  if (c->n_waiters > 0) waiters_check(c, 0, NULL); /* answers when no shard is requested */
  schedule(c, c->cfg.interval_ms);
}

static void schedule(mw_compact_t *c, uint64_t delay_ms) {
  if (!c->timer_open || c->stopping) return;
  uv_timer_start(&c->timer, on_timer, delay_ms, 0);
}

/* ------------------------------------------------------------- requests */

/* One shard's request ended with `status`: a failure is remembered by every
 * waiter; a waiter is answered once no requested shard remains. */
static void waiters_check(mw_compact_t *c, int status, const char *reason) {
  for (size_t i = 0; i < c->n_waiters; i++)
    if (status < 0 && c->waiters[i].status == 0) {
      c->waiters[i].status = status;
      snprintf(c->waiters[i].reason, sizeof c->waiters[i].reason, "%s", reason ? reason : "");
    }
  for (size_t i = 0; i < c->n_shards; i++)
    if (c->shards[i].requested) return;
  size_t n = c->n_waiters;
  waiter_t w[MW_COMPACT_MAX_WAITERS];
  memcpy(w, c->waiters, n * sizeof *w);
  c->n_waiters = 0;
  for (size_t i = 0; i < n; i++) w[i].cb(w[i].arg, w[i].status, w[i].status ? w[i].reason : NULL);
}

int mw_compact_request(mw_compact_t *c, mw_compact_cb cb, void *arg) {
  assert(c != NULL && cb != NULL);
  if (c->stopping) return -ESHUTDOWN;
  if (c->n_waiters == MW_COMPACT_MAX_WAITERS) return -EBUSY;
  for (size_t i = 0; i < c->t->n_shards; i++) {
    mw_table_shard_t *ts = c->t->shards[i];
    mw_shard_t *s = &ts->shard;
    if (mw_shard_state(s) != MW_SS_ACTIVE || !s->ms.has_cached) continue;
    cshard_t *cs = cshard_get(c, ts->id);
    if (cs == NULL) return -ENOMEM;
    uint64_t top = 0;
    for (size_t k = 0; k < s->ms.cached.n_sstables; k++)
      if (s->ms.cached.sstables[k].generation > top) top = s->ms.cached.sstables[k].generation;
    if (top == 0) continue;
    cs->requested = true;
    if (top > cs->request_gen) cs->request_gen = top;
    cs->next_try_ms = 0; /* an operator asks: no back-off */
  }
  c->waiters[c->n_waiters++] = (waiter_t){.cb = cb, .arg = arg};
  /* answered from the timer (never inside this call), also when nothing is due */
  if (c->run.phase == R_IDLE) schedule(c, 0);
  return 0;
}

/* -------------------------------------------------------------- lifecycle */

int mw_compact_new(mw_table_t *t, const mw_compact_config_t *cfg, mw_compact_t **out) {
  assert(t != NULL && out != NULL);
  metrics_init();
  mw_compact_t *c = calloc(1, sizeof *c);
  if (c == NULL) return -ENOMEM;
  c->t = t;
  if (cfg) c->cfg = *cfg;
  else mw_compact_config_defaults(&c->cfg);
  c->pk_base = -1;
  for (size_t i = 0; i < t->meta.schema.n_fields; i++)
    if (t->meta.schema.fields[i].pk_position == 1) c->pk_base = (int)i;
  assert(c->pk_base >= 0); /* mw_table_open refuses tables without a PK */
  *out = c;
  return 0;
}

void mw_compact_start(mw_compact_t *c) {
  assert(c != NULL && !c->timer_open);
  int rc = uv_timer_init(c->t->loop, &c->timer);
  assert(rc == 0); /* cannot fail on an initialised loop */
  (void)rc;
  c->timer.data = c;
  c->timer_open = true;
  schedule(c, c->cfg.interval_ms);
}

static void on_timer_closed(uv_handle_t *h) {
  mw_compact_t *c = h->data;
  c->timer_open = false;
  if (c->run.phase == R_IDLE && !c->work_busy && c->stop_cb) {
    void (*cb)(void *) = c->stop_cb;
    c->stop_cb = NULL;
    cb(c->stop_arg);
  }
}

void mw_compact_stop(mw_compact_t *c, void (*cb)(void *arg), void *arg) {
  assert(c != NULL && cb != NULL);
  assert(!c->stopping && c->timer_open); /* started, stopped once */
  c->stopping = true;
  c->stop_cb = cb;
  c->stop_arg = arg;
  for (size_t i = 0; i < c->n_shards; i++) c->shards[i].requested = false;
  waiters_check(c, -ECANCELED, "the table is closing");
  /* the close callback, or the running phase's completion, calls back */
  if (c->timer_open) {
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, on_timer_closed);
  }
}

void mw_compact_free(mw_compact_t *c) {
  if (c == NULL) return;
  assert(c->run.phase == R_IDLE && !c->work_busy && !c->timer_open);
  for (size_t i = 0; i < c->n_cache; i++) kentry_free(c->cache[i]);
  free(c->cache);
  free(c->shards);
  free(c);
}

void mw_compact_stats(const mw_compact_t *c, mw_compact_stats_t *out) {
  assert(c != NULL && out != NULL);
  *out = c->stats;
}

bool mw_compact_shard_state(const mw_compact_t *c, const uint8_t id[16], mw_compact_shard_t *out) {
  assert(c != NULL && id != NULL && out != NULL);
  for (size_t i = 0; i < c->n_shards; i++)
    if (memcmp(c->shards[i].id, id, 16) == 0) {
      *out = c->shards[i].st;
      return true;
    }
  return false;
}
