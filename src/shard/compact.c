/*
 * compact.c — see compact.h; compact_int.h maps the three files.
 *
 * A run compacts every due shard of the table at once (one base commit for
 * all of them: a table of 1024 buckets does not make 1024 versions). It is
 * a chain of phases; each phase submits its storage requests at once
 * (storage queues past its in-flight limit) and the last completion moves to
 * the next phase. CPU work runs on the thread pool in four jobs, so the
 * loop only moves bytes:
 *
 *   BASE_READ    base_store read_latest                 <------------+
 *   (plan)       per shard: the SSTables above compacted_sstables    |
 *   SST_MANIFEST GET each picked SSTable's own manifest              |
 *   SST_FILES    GET its data file and deletion file                 |
 *   MERGE        pool: decode, merge each shard's SSTables           |
 *   KEYS_GET     GET the key index of every base data file not cached|
 *   KEYS_DATA    GET the data files whose index is missing           |
 *   KEYS_WORK    pool: decode / build those indexes                  |
 *   KEYS_PUT     PUT the built ones (best effort: only a cache)      |
 *   DELS_FIND    pool: the key lookups in every base fragment's index|
 *   DELS_GET     GET deletion files of fragments with hits,          |
 *                and the data of small fragments to fold             |
 *   BUILD        pool: unions, .bin files, folded rows, the new      |
 *                fragment, each file read back (readback.h), its     |
 *                key index, the commit bytes                         |
 *   COMMIT       base_store commit -- lost race (-EEXIST) -----------+
 *
 * The SSTables and their merge survive a lost race; the rest is redone
 * against the new version (it may hold new fragments or deletion files). If
 * the new version already compacted a picked generation (another compactor
 * of that shard), the run ends and the next one starts from that version.
 *
 * Memory of one run: the picked SSTables (decoded), the merged rows, the
 * folded fragments, the new data file, and the data files of base fragments
 * whose key index is built (once per data file ever).
 */
#include "shard/compact.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "common/bgprio.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/setting.h"
#include "shard/compact_int.h"

#define BACKOFF_BASE_MS 1000
#define BACKOFF_MAX_MS 60000

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
  c->fragment_rows = 1000000;
  c->zstd = true;
  c->keyindex_store_rows = 65536;
}

/* The numeric keys and their limits. */
#define CK(field, lo, hi) MW_SETTING_NUM(mw_compact_config_t, field, "compaction_" #field, lo, hi)
static const mw_setting_num_t num_keys[] = {
    CK(min_sstables, 1, 100000),
    CK(min_bytes, 1, UINT64_MAX / 2),
    CK(max_age_ms, 0, 86400000ull * 365),
    CK(max_sstables, 1, MW_MERGE_MAX_RUNS),
    CK(max_rows, 1, (uint64_t)MW_MERGE_MAX_ROWS),
    CK(interval_ms, 10, 86400000),
    CK(keyindex_cache_bytes, 0, UINT64_MAX / 2),
    CK(keyindex_store_rows, 0, UINT64_MAX / 2),
    CK(fragment_rows, 1, (uint64_t)MW_MERGE_MAX_ROWS),
};
#undef CK

static int set_on_off(bool *field, const char *key, const char *value, mw_err_t *err) {
  if (strcmp(value, "on") == 0 || strcmp(value, "true") == 0) *field = true;
  else if (strcmp(value, "off") == 0 || strcmp(value, "false") == 0) *field = false;
  else return mw_err_set(err, -EINVAL, "config %s: expected on or off, got '%.64s'", key, value);
  return 0;
}

int mw_compact_config_set(mw_compact_config_t *c, const char *key, const char *value, mw_err_t *err) {
  assert(c != NULL);
  assert(key != NULL);
  assert(value != NULL);
  if (strcmp(key, "compaction") == 0) return set_on_off(&c->enabled, key, value, err);
  if (strcmp(key, "compaction_zstd") == 0) return set_on_off(&c->zstd, key, value, err);
  return mw_setting_set_num(c, num_keys, sizeof num_keys / sizeof *num_keys, key, value, err);
}

/* ----------------------------------------------------------------- metrics */

static struct {
  bool ready;
  mw_metric_t *runs_ok, *runs_failed, *conflicts, *sstables, *rows_in, *rows_written, *rows_masked;
  mw_metric_t *keyindex_built, *seconds, *refused;
  mw_metric_family_t *seconds_fam, *shard_sstables, *shard_bytes;
} cm;

static void metrics_init(void) {
  if (cm.ready) return;
  static const double b[] = {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
  static const mw_metric_def_t before[] = {
      {MW_METRIC_COUNTER, "memwald_compaction_runs_total", "Compaction runs: result=committed|failed.", "result",
       {"committed", "failed"}, {&cm.runs_ok, &cm.runs_failed}},
      {MW_METRIC_COUNTER, "memwald_compaction_conflicts_total",
       "Base-table commits lost to another writer (retried).", .series = {&cm.conflicts}},
      {MW_METRIC_COUNTER, "memwald_compaction_sstables_total", "SSTables compacted into the base table.",
       .series = {&cm.sstables}},
      {MW_METRIC_COUNTER, "memwald_compaction_rows_total",
       "Rows: kind=merged (live SSTable rows read), written (new base rows), masked (base rows deleted).", "kind",
       {"merged", "written", "masked"}, {&cm.rows_in, &cm.rows_written, &cm.rows_masked}},
  };
  /* the registry renders in registration order: the refused counter stays between */
  static const mw_metric_def_t after[] = {
      {MW_METRIC_COUNTER, "memwald_keyindex_built_total", "Key indexes built from base data files.",
       .series = {&cm.keyindex_built}},
      {MW_METRIC_HISTOGRAM, "memwald_compaction_seconds", "Duration of a committed compaction run.",
       .series = {&cm.seconds}, .family = &cm.seconds_fam, .bounds = b, .n_bounds = sizeof b / sizeof b[0]},
      {MW_METRIC_GAUGE, "memwald_shard_sstables",
       "SSTables a LanceDB reader reads (listed, not compacted), per shard.", "shard",
       .family = &cm.shard_sstables},
      {MW_METRIC_GAUGE, "memwald_shard_sstable_bytes", "Their in-memory bytes (Lance's estimate), per shard.",
       "shard", .family = &cm.shard_bytes},
  };
  mw_metrics_t *m = mw_metrics_default();
  mw_metrics_register_defs(m, before, sizeof before / sizeof *before);
  cm.refused = mw_flush_refused_metric("compaction");
  mw_metrics_register_defs(m, after, sizeof after / sizeof *after);
  cm.ready = true;
}

static void count(mw_metric_t *m, uint64_t n) {
  if (m) mw_counter_add(m, n);
}


/* ------------------------------------------------------------- helpers */

void mw_compact__count(const char *which, uint64_t n) {
  if (strcmp(which, "keyindex_built") == 0) count(cm.keyindex_built, n);
}

void mw_compact__random(void *p, size_t n) {
  uint8_t *b = p;
  while (n > 0) {
    ssize_t k = getrandom(b, n, 0);
    if (k > 0) {
      b += k;
      n -= (size_t)k;
    }
  }
}

/* The run's phases in order; a commit lost to another writer reads the base
 * again (R_COMMIT -> R_BASE_READ), which then goes straight back to the key
 * indexes (R_BASE_READ -> R_KEYS_GET); a key index missing from storage
 * after the pool's look sends KEYS_WORK back to KEYS_DATA. */
bool mw_compact__may_follow(int from, int to) {
  switch (to) {
    case R_BASE_READ: return from == R_IDLE || from == R_COMMIT;
    case R_SST_MANIFEST: return from == R_BASE_READ;
    case R_SST_FILES: return from == R_SST_MANIFEST;
    case R_MERGE: return from == R_SST_FILES;
    case R_KEYS_GET: return from == R_MERGE || from == R_BASE_READ;
    case R_KEYS_DATA: return from == R_KEYS_GET || from == R_KEYS_WORK;
    case R_KEYS_WORK: return from == R_KEYS_DATA;
    case R_KEYS_PUT: return from == R_KEYS_WORK;
    case R_DELS_FIND: return from == R_KEYS_PUT;
    case R_DELS_GET: return from == R_DELS_FIND;
    case R_BUILD: return from == R_DELS_GET;
    case R_COMMIT: return from == R_BUILD;
    default: return false;
  }
}

static void on_io(mw_storage_req_t *req, int status) {
  io_owner_t *o = req->data;
  mw_compact_t *c = o->c;
  if (o->status == 0) o->status = status; /* an owner may hold two requests: keep the first failure */
  assert(c->run.pending > 0);
  if (--c->run.pending == 0) mw_compact__next(c);
}

int mw_compact__get(mw_compact_t *c, mw_storage_req_t *req, io_owner_t *o, const char *key) {
  req->data = o;
  o->c = c;
  c->run.pending++;
  req->background = true; /* compaction yields to the data path (storage.h) */
  int rc = mw_storage_get(c->t->st, req, key, 0, UINT64_MAX, on_io);
  if (rc < 0) {
    c->run.pending--;
    o->status = rc;
  }
  return rc;
}

int mw_compact__put(mw_compact_t *c, mw_storage_req_t *req, io_owner_t *o, const char *key,
                    const mw_buf_t *b) {
  req->data = o;
  o->c = c;
  c->run.pending++;
  req->background = true; /* compaction yields to the data path (storage.h) */
  int rc = mw_storage_put(c->t->st, req, key, b->data, b->len, on_io);
  if (rc < 0) {
    c->run.pending--;
    o->status = rc;
  }
  return rc;
}

/* ---------------------------------------------------------- shard state */

/* A shard's compaction state, made on first use. Each lives in its own
 * allocation: a run's groups point at them while later calls add more. */
static cshard_t *cshard_get(mw_compact_t *c, const uint8_t id[16]) {
  for (size_t i = 0; i < c->n_shards; i++)
    if (memcmp(c->shards[i]->id, id, 16) == 0) return c->shards[i];
  cshard_t **p = realloc(c->shards, (c->n_shards + 1) * sizeof *p);
  if (p == NULL) return NULL;
  c->shards = p;
  cshard_t *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  memcpy(s->id, id, 16);
  c->shards[c->n_shards++] = s;
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

/* -------------------------------------------------------------- run state */

static void run_reset(mw_compact_t *c) {
  run_t *r = &c->run;
  for (size_t k = 0; k < r->n_groups; k++) mw_compact__group_free(&r->groups[k]);
  free(r->groups);
  mw_compact__frags_reset(r);
  mw_bstore_op_free(&r->bop);
  memset(r, 0, sizeof *r);
}

/* ------------------------------------------------------------ run ending */

static void waiters_check(mw_compact_t *c, int status, const char *reason);
static void schedule(mw_compact_t *c, uint64_t delay_ms);

static void run_end(mw_compact_t *c) {
  assert(c->run.pending == 0);
  assert(!c->work_busy); /* mw_compact__fail waits for both */
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

void mw_compact__fail(mw_compact_t *c, int status) {
  run_t *r = &c->run;
  assert(status < 0);
  if (r->pending > 0 || c->work_busy) { /* let them land first (mw_compact__next) */
    if (r->deferred == 0) r->deferred = status;
    return;
  }
  if (r->err.code == 0) mw_err_set(&r->err, status, "%s", mw_strerror(status));
  char reason[MW_COMPACT_REASON_BYTES];
  snprintf(reason, sizeof reason, "compaction failed: %.440s", r->err.msg);
  snprintf(c->stats.last_error, sizeof c->stats.last_error, "%s", reason);
  c->stats.failures++;
  count(cm.runs_failed, 1);
  bool requested = false;
  for (size_t k = 0; k < r->n_groups; k++) {
    cshard_t *cs = r->groups[k].cs;
    cs->st.failures++;
    uint32_t sh = cs->st.failures - 1 < 6 ? cs->st.failures - 1 : 6;
    uint64_t d = (uint64_t)BACKOFF_BASE_MS << sh;
    cs->next_try_ms = uv_now(c->t->loop) + (d > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : d);
    requested |= cs->requested;
    cs->requested = false;
  }
  if (requested) waiters_check(c, status, reason);
  mw_log_warn("table %s: %s (retrying later)", c->t->path, reason);
  run_end(c);
}

static void run_committed(mw_compact_t *c) {
  run_t *r = &c->run;
  assert(r->phase == R_COMMIT);
  assert(r->first_err == 0);
  uint64_t ms = uv_now(c->t->loop) - r->t0_ms, ssts = 0, rows_in = 0, written = r->new_rows;
  int64_t tombstones = 0;
  bool answered = false;
  for (size_t k = 0; k < r->n_groups; k++) {
    group_t *g = &r->groups[k];
    ssts += g->n_ssts;
    rows_in += (uint64_t)g->merge.rows_in;
    tombstones += g->merge.tombstones;
    g->cs->st.compacted_gen = g->last_gen;
    g->cs->st.committed_ms = uv_now(c->t->loop);
    g->cs->st.failures = 0;
    g->cs->next_try_ms = 0;
    g->cs->oldest_seen_ms = 0;
    if (g->cs->requested && g->last_gen >= g->cs->request_gen) {
      g->cs->requested = false;
      answered = true;
    }
  }
  c->stats.runs++;
  c->stats.sstables += ssts;
  c->stats.rows_in += rows_in;
  c->stats.rows_written += written;
  c->stats.rows_masked += r->rows_masked;
  c->stats.folded += r->folded;
  c->stats.base_version = r->commit.version;
  c->stats.last_run_ms = ms;
  c->stats.total_run_ms += ms;
  c->stats.base_fragments = r->n_frags;
  count(cm.runs_ok, 1);
  count(cm.sstables, ssts);
  count(cm.rows_in, rows_in);
  count(cm.rows_written, written);
  count(cm.rows_masked, r->rows_masked);
  if (cm.seconds) mw_histogram_observe(cm.seconds, cm.seconds_fam, (double)ms / 1000.0);
  mw_log_info("table %s: compacted %zu shard(s), %" PRIu64 " SSTables (%" PRIu64 " rows in, %" PRId64
              " deletes), folded %" PRIu64 " small fragments (%" PRIu64 " rows), masked %" PRIu64
              " base rows, removed %" PRIu64 " fragments: base version %" PRIu64 " with a %" PRIu64
              "-row fragment, in %" PRIu64 " ms%s", c->t->path, r->n_groups, ssts, rows_in, tombstones,
              r->folded, r->folded_rows, r->rows_masked, r->removed, r->commit.version, written, ms,
              r->attempts > 1 ? " after lost races" : "");
  mw_compact__cache_committed(c);
  if (answered) waiters_check(c, 0, NULL);
  run_end(c);
}

/* The run found nothing to do (or another compactor did it). */
static void run_nothing(mw_compact_t *c) {
  run_t *r = &c->run;
  bool answered = false;
  for (size_t k = 0; k < r->n_groups; k++) {
    cshard_t *cs = r->groups[k].cs;
    if (cs->requested && cs->st.compacted_gen >= cs->request_gen) {
      cs->requested = false;
      answered = true;
    }
    cs->oldest_seen_ms = 0;
  }
  if (answered) waiters_check(c, 0, NULL);
  run_end(c);
}

/* -------------------------------------------------------------- the plan */

static void on_base_read(mw_bstore_op_t *op, int status) {
  mw_compact_t *c = op->data;
  assert(c->run.phase == R_BASE_READ);
  c->run.first_err = status;
  if (status < 0) mw_err_set(&c->run.err, status, "%s", op->err.msg);
  mw_compact__next(c);
}

static void phase_base_read(mw_compact_t *c) {
  run_t *r = &c->run;
  assert(mw_compact__may_follow(r->phase, R_BASE_READ));
  assert(r->pending == 0);
  r->phase = R_BASE_READ;
  r->bop.data = c;
  r->bop.accept_flags = c->t->cfg.zone_write_seeds ? MW_FLAG_ZONE_WRITE_SEEDS : 0;
  int rc = mw_bstore_read_latest(c->t->st, &r->bop, on_base_read);
  if (rc < 0) mw_compact__fail(c, rc);
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

/* First base read of the run: pick each group's SSTables, drop empty ones. */
static int plan(mw_compact_t *c) {
  run_t *r = &c->run;
  assert(!r->planned); /* once a run: a re-read after a lost race keeps the plan */
  uint64_t budget_ssts = c->cfg.max_sstables, budget_rows = c->cfg.max_rows;
  size_t kept = 0;
  for (size_t k = 0; k < r->n_groups; k++) {
    group_t *g = &r->groups[k];
    uint64_t compacted = mw_memwal_compacted(&r->bop.meta.memwal, g->shard->ms.shard_id);
    if (compacted > g->cs->st.compacted_gen) {
      g->cs->st.compacted_gen = compacted;
      g->cs->st.committed_ms = uv_now(c->t->loop);
    }
    g->compacted_before = compacted;
    count_uncompacted(&g->shard->ms.cached, compacted, &g->cs->st.uncompacted, &g->cs->st.uncompacted_bytes);
    int n = budget_ssts > 0 ? mw_compact__pick(c, g, &g->shard->ms.cached, &budget_ssts, &budget_rows) : 0;
    if (n < 0) return n;
    if (n == 0) {
      if (g->cs->requested && g->cs->st.compacted_gen >= g->cs->request_gen) {
        g->cs->requested = false;
        waiters_check(c, 0, NULL);
      }
      g->cs->oldest_seen_ms = 0;
      mw_compact__group_free(g);
      continue;
    }
    r->groups[kept++] = *g;
    if (&r->groups[kept - 1] != g) memset(g, 0, sizeof *g);
  }
  r->n_groups = kept;
  r->planned = true;
  return (int)kept;
}

static void after_base_read(mw_compact_t *c) {
  run_t *r = &c->run;
  assert(r->phase == R_BASE_READ);
  assert(r->n_groups > 0); /* start_run began only with a due shard */
  if (r->first_err < 0) {
    mw_compact__fail(c, r->first_err);
    return;
  }
  int rc = check_base(c);
  if (rc < 0) {
    mw_compact__fail(c, rc);
    return;
  }
  if (r->bop.meta.version > c->stats.base_version) c->stats.base_version = r->bop.meta.version;
  if (!r->planned) {
    rc = plan(c);
    if (rc < 0) mw_compact__fail(c, rc);
    else if (rc == 0) run_nothing(c);
    else mw_compact__sst_manifests(c);
    return;
  }
  /* after a lost race: did another compactor take some of our generations? */
  for (size_t k = 0; k < r->n_groups; k++) {
    group_t *g = &r->groups[k];
    uint64_t compacted = mw_memwal_compacted(&r->bop.meta.memwal, g->shard->ms.shard_id);
    if (compacted == g->compacted_before) continue;
    mw_log_notice("table %s: shard %s: another compactor reached generation %" PRIu64 " first; this run "
                  "stops", c->t->path, g->shard->id_str, compacted);
    g->cs->st.compacted_gen = compacted;
    g->cs->st.committed_ms = uv_now(c->t->loop);
    run_nothing(c);
    return;
  }
  mw_compact__keys_get(c);
}

/* ------------------------------------------------------------ the commit */

static void on_commit(mw_bstore_op_t *op, int status) {
  mw_compact_t *c = op->data;
  assert(c->run.phase == R_COMMIT);
  c->run.first_err = status;
  if (status < 0) mw_err_set(&c->run.err, status, "%s", op->err.msg);
  mw_compact__next(c);
}

static void phase_commit(mw_compact_t *c) {
  run_t *r = &c->run;
  size_t n = 0;
  r->files = calloc(r->n_frags + 4, sizeof *r->files);
  r->txn_key = malloc(strlen(MW_TXN_DIR) + 2 + MW_TXN_NAME_BYTES);
  if (r->files == NULL || r->txn_key == NULL) {
    mw_compact__fail(c, -ENOMEM);
    return;
  }
  if (r->data_file.len > 0) {
    snprintf(r->data_key, sizeof r->data_key, "data/%s", r->data_name);
    mw_keyindex_name(r->data_name, r->keys_key, sizeof r->keys_key);
    r->files[n++] = (mw_bstore_file_t){r->data_key, r->data_file.data, r->data_file.len};
    if (r->new_rows >= c->cfg.keyindex_store_rows)
      r->files[n++] = (mw_bstore_file_t){r->keys_key, r->data_keys.data, r->data_keys.len};
  }
  for (size_t i = 0; i < r->n_frags; i++) {
    fwork_t *f = &r->frags[i];
    if (f->change && !f->remove && !f->fold)
      r->files[n++] = (mw_bstore_file_t){f->del_put_key, f->del_new.data, f->del_new.len};
  }
  sprintf(r->txn_key, "%s/%s", MW_TXN_DIR, r->commit.txn_name);
  r->files[n++] = (mw_bstore_file_t){r->txn_key, r->commit.txn.data, r->commit.txn.len};
  r->n_files = n;
  assert(n <= r->n_frags + 4); /* the data file, its key index, the transaction, one per fragment */
  assert(mw_compact__may_follow(r->phase, R_COMMIT));
  r->phase = R_COMMIT;
  r->bop.data = c;
  int rc = mw_bstore_commit(c->t->st, &r->bop, r->files, n, r->commit.version, &r->commit.manifest, on_commit);
  if (rc < 0) {
    mw_err_set(&r->err, rc, "base commit of version %" PRIu64 " refused", r->commit.version);
    mw_compact__fail(c, rc);
  }
}

/* ---------------------------------------------------------- pool plumbing */

void (*mw_compact_merge_hook_for_tests)(void);
int (*mw_compact_find_hook_for_tests)(void);

static void work_cb(uv_work_t *w) {
  mw_compact_t *c = w->data;
  int nice_old = mw_bgprio_enter(); /* never ahead of the ack path (bgprio.h) */
  switch (c->run.phase) {
    case R_MERGE:
      if (mw_compact_merge_hook_for_tests != NULL) mw_compact_merge_hook_for_tests();
      mw_compact__work_merge(c);
      break;
    case R_KEYS_WORK: mw_compact__work_keys(c); break;
    case R_DELS_FIND: mw_compact__work_find(c); break;
    case R_BUILD: mw_compact__work_build(c); break;
    default: assert(!"compact: pool job in a storage phase");
  }
  mw_bgprio_leave(nice_old);
}

static void after_work_cb(uv_work_t *w, int status) {
  mw_compact_t *c = w->data;
  assert(c->work_busy);
  c->work_busy = false;
  if (status < 0) c->run.work_rc = status;
  mw_compact__next(c);
}

void mw_compact__queue_work(mw_compact_t *c, int phase) {
  assert(!c->work_busy); /* one pool job at a time */
  assert(mw_compact__may_follow(c->run.phase, phase));
  c->run.phase = phase;
  c->run.work_rc = 0;
  mw_err_clear(&c->run.work_err);
  c->work.data = c;
  int rc = uv_queue_work(c->t->loop, &c->work, work_cb, after_work_cb);
  if (rc < 0) {
    mw_compact__fail(c, rc);
    return;
  }
  c->work_busy = true;
}

/* ------------------------------------------------------ the phase switch */

static bool io_failed(mw_compact_t *c, int status, const char *what, const char *key) {
  if (status >= 0) return false;
  mw_err_set(&c->run.err, status, "%s %s: %s", what, key, mw_strerror(status));
  mw_compact__fail(c, status);
  return true;
}

static bool work_failed(mw_compact_t *c) {
  run_t *r = &c->run;
  if (r->work_rc >= 0) return false;
  mw_err_set(&r->err, r->work_rc, "%s", r->work_err.msg[0] ? r->work_err.msg : mw_strerror(r->work_rc));
  if (r->refused) count(cm.refused, 1);
  mw_compact__fail(c, r->work_rc);
  return true;
}

void mw_compact__next(mw_compact_t *c) {
  run_t *r = &c->run;
  if (r->deferred < 0) {
    mw_compact__fail(c, r->deferred);
    return;
  }
  if (c->stopping && !c->work_busy) {
    mw_err_set(&r->err, -ECANCELED, "the table is closing");
    mw_compact__fail(c, -ECANCELED);
    return;
  }
  switch (r->phase) {
    case R_BASE_READ: after_base_read(c); return;
    case R_SST_MANIFEST: mw_compact__sst_files(c); return;
    case R_SST_FILES:
      for (size_t k = 0; k < r->n_groups; k++)
        for (size_t i = 0; i < r->groups[k].n_ssts; i++)
          if (io_failed(c, r->groups[k].ssts[i].io.status, "GET", r->groups[k].ssts[i].key)) return;
      mw_compact__queue_work(c, R_MERGE);
      return;
    case R_MERGE:
      if (!work_failed(c)) mw_compact__keys_get(c);
      return;
    case R_KEYS_GET: mw_compact__keys_data(c); return;
    case R_KEYS_DATA:
      for (size_t i = 0; i < r->n_frags; i++)
        if (r->frags[i].ke == NULL && io_failed(c, r->frags[i].io.status, "GET", r->frags[i].key)) return;
      mw_compact__queue_work(c, R_KEYS_WORK);
      return;
    case R_KEYS_WORK: mw_compact__keys_put(c); return;
    case R_KEYS_PUT: mw_compact__dels_find(c); return;
    case R_DELS_FIND:
      if (!work_failed(c)) mw_compact__dels_get(c);
      return;
    case R_DELS_GET:
      for (size_t i = 0; i < r->n_frags; i++)
        if (io_failed(c, r->frags[i].data_io.status, "GET", r->frags[i].key) ||
            io_failed(c, r->frags[i].io.status, "GET", r->frags[i].del_key))
          return;
      mw_compact__queue_work(c, R_BUILD);
      return;
    case R_BUILD:
      if (!work_failed(c)) phase_commit(c);
      return;
    case R_COMMIT:
      if (r->first_err == 0) {
        run_committed(c);
        return;
      }
      if (r->first_err == -EEXIST && ++r->attempts < MW_COMPACT_MAX_ATTEMPTS) {
        c->stats.conflicts++;
        count(cm.conflicts, 1);
        mw_err_clear(&r->err);
        phase_base_read(c);
        return;
      }
      mw_compact__fail(c, r->first_err);
      return;
    default: assert(!"compact: completion in no phase");
  }
}

/* -------------------------------------------------------------- policy */

static bool due(const mw_compact_t *c, cshard_t *cs, mw_shard_t *s, uint64_t now) {
  if (!s->ms.has_cached) return false;
  uint64_t n, bytes;
  count_uncompacted(&s->ms.cached, cs->st.compacted_gen, &n, &bytes);
  cs->st.uncompacted = n;
  cs->st.uncompacted_bytes = bytes;
  const char *lv[] = {s->id_str};
  if (cm.shard_sstables) mw_gauge_set(mw_metric_series(cm.shard_sstables, lv), (double)n);
  if (cm.shard_bytes) mw_gauge_set(mw_metric_series(cm.shard_bytes, lv), (double)bytes);
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

/* A run over every due shard (round robin from the last start, so a large
 * table's shards take turns when the budget runs out). */
static void start_run(mw_compact_t *c, uint64_t now) {
  run_t *r = &c->run;
  assert(r->phase == R_IDLE);
  size_t n = c->t->n_shards;
  memset(r, 0, sizeof *r);
  if ((r->groups = calloc(n + 1, sizeof *r->groups)) == NULL) return;
  for (size_t k = 0; k < n; k++) {
    mw_table_shard_t *ts = c->t->shards[(c->rr + k) % n];
    mw_shard_t *s = &ts->shard;
    if (mw_shard_state(s) != MW_SS_ACTIVE) continue;
    cshard_t *cs = cshard_get(c, ts->id);
    if (cs == NULL || !due(c, cs, s, now)) continue;
    r->groups[r->n_groups++] = (group_t){.shard = s, .cs = cs};
  }
  c->rr = n ? (c->rr + 1) % n : 0;
  if (r->n_groups == 0) {
    free(r->groups);
    r->groups = NULL;
    return;
  }
  c->tick++;
  r->t0_ms = now;
  r->attempts = 1;
  mw_bstore_op_init(&r->bop);
  c->stats.running = true;
  phase_base_read(c);
}

static void on_timer(uv_timer_t *h) {
  mw_compact_t *c = h->data;
  if (c->stopping || c->run.phase != R_IDLE) return;
  if (c->t->drop != NULL && c->t->drop->phase != 0) return;
  uint64_t now = uv_now(c->t->loop);
  start_run(c, now);
  if (c->run.phase != R_IDLE) return;
  /* nothing due: requests whose shards have nothing left, or are gone */
  for (size_t i = 0; i < c->n_shards; i++) {
    cshard_t *cs = c->shards[i];
    if (!cs->requested) continue;
    mw_shard_t *s = mw_table_shard(c->t, cs->id, false);
    if (s == NULL || mw_shard_state(s) != MW_SS_ACTIVE) {
      cs->requested = false;
      waiters_check(c, -ESHUTDOWN, "a shard stopped being ACTIVE here before its compaction");
    } else if (cs->st.uncompacted == 0 || (cs->st.compacted_gen >= cs->request_gen)) {
      cs->requested = false;
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
    if (c->shards[i]->requested) return;
  size_t n = c->n_waiters;
  waiter_t w[MW_COMPACT_MAX_WAITERS];
  memcpy(w, c->waiters, n * sizeof *w);
  c->n_waiters = 0;
  for (size_t i = 0; i < n; i++) w[i].cb(w[i].arg, w[i].status, w[i].status ? w[i].reason : NULL);
}

int mw_compact_request(mw_compact_t *c, mw_compact_cb cb, void *arg) {
  assert(c != NULL);
  assert(cb != NULL);
  if (c->stopping) return -ESHUTDOWN;
  if (c->n_waiters == MW_COMPACT_MAX_WAITERS) return -EBUSY;
  for (size_t i = 0; i < c->t->n_shards; i++) {
    mw_table_shard_t *ts = c->t->shards[i];
    mw_shard_t *s = &ts->shard;
    if (mw_shard_state(s) != MW_SS_ACTIVE || !s->ms.has_cached) continue;
    uint64_t top = 0;
    for (size_t k = 0; k < s->ms.cached.n_sstables; k++)
      if (s->ms.cached.sstables[k].generation > top) top = s->ms.cached.sstables[k].generation;
    if (top == 0) continue;
    cshard_t *cs = cshard_get(c, ts->id);
    if (cs == NULL) return -ENOMEM;
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
  assert(t != NULL);
  assert(out != NULL);
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
  assert(c != NULL);
  assert(!c->timer_open);
  int rc = uv_timer_init(c->t->loop, &c->timer);
  assert(rc == 0); /* cannot fail on an initialised loop */
  (void)rc;
  c->timer.data = c;
  c->timer_open = true;
  schedule(c, c->cfg.interval_ms);
}

static void on_timer_closed(uv_handle_t *h) {
  mw_compact_t *c = h->data;
  assert(c->stopping);
  c->timer_open = false;
  if (c->run.phase == R_IDLE && !c->work_busy && c->stop_cb) {
    void (*cb)(void *) = c->stop_cb;
    c->stop_cb = NULL;
    cb(c->stop_arg);
  }
}

void mw_compact_stop(mw_compact_t *c, void (*cb)(void *arg), void *arg) {
  assert(c != NULL);
  assert(cb != NULL);
  assert(!c->stopping);
  assert(c->timer_open); /* started, stopped once */
  c->stopping = true;
  c->stop_cb = cb;
  c->stop_arg = arg;
  for (size_t i = 0; i < c->n_shards; i++) c->shards[i]->requested = false;
  waiters_check(c, -ECANCELED, "the table is closing");
  uv_timer_stop(&c->timer);
  /* the close callback, or the running phase's completion, calls back */
  uv_close((uv_handle_t *)&c->timer, on_timer_closed);
}

void mw_compact_free(mw_compact_t *c) {
  if (c == NULL) return;
  assert(c->run.phase == R_IDLE);
  assert(!c->work_busy);
  assert(!c->timer_open);
  mw_compact__cache_free(&c->cache);
  for (size_t i = 0; i < c->n_shards; i++) free(c->shards[i]);
  free(c->shards);
  free(c);
}

void mw_compact_stats(const mw_compact_t *c, mw_compact_stats_t *out) {
  assert(c != NULL);
  assert(out != NULL);
  *out = c->stats;
}

bool mw_compact_shard_state(const mw_compact_t *c, const uint8_t id[16], mw_compact_shard_t *out) {
  assert(c != NULL);
  assert(id != NULL);
  assert(out != NULL);
  for (size_t i = 0; i < c->n_shards; i++)
    if (memcmp(c->shards[i]->id, id, 16) == 0) {
      *out = c->shards[i]->st;
      return true;
    }
  return false;
}
