/*
 * gc.c — see gc.h.
 *
 * Jobs (one at a time for the table; each a batch of at most
 * MW_GC_MAX_BATCH storage requests):
 *
 *   SCAN    LIST _mem_wal/<uuid>/  ->  wal_next = lowest WAL position;
 *           unlisted `<8hex>_gen_<G>` directories become candidates
 *   TRIM    commit_update (own op, our epoch): sstables -= {gen <= G}
 *           -> those directories become candidates, since now
 *   DELETE  delete_prefix of candidates with gen <= compacted whose grace
 *           is over and that the newest manifest does not list
 *   WAL     for positions [wal_next, horizon): an entry this process wrote
 *           in its epoch (mw_wal_landed_size) holds rows; any other the
 *           latest listing of wal/ shows is read (bytes [0, 4 KiB)); one
 *           the listing does not show is gone (a hole, or deleted before
 *           a restart) and costs no request. Delete each that holds a
 *           record batch (not a sentinel), the batch's in one delete_many
 *           (S3: one DeleteObjects) -> wal_next. Past the listing,
 *           a new LIST of wal/ first (WAL_LIST).
 *
 * A sample of what stays in a long-running shard's wal/ (positions):
 *   3 (a sentinel: claim of epoch 2), 41 (a sentinel: epoch 3), 990..1003
 * where 990 = min(replay_after, last_seen) and 1003 is the tip.
 */
#include "shard/gc.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/metrics.h"
#include "common/setting.h"
#include "lance/ipc.h"
#include "lance/shard_manifest.h"
#include "shard/gc_base.h"
#include "shard/table_int.h"

#define BACKOFF_BASE_MS 1000
#define BACKOFF_MAX_MS 60000
#define KEY_BYTES 256

enum { J_NONE = 0, J_SCAN, J_TRIM, J_DELETE, J_WAL_LIST, J_WAL_GET, J_WAL_DELETE, J_MF_HINT, J_MF_HINT_PUT,
       J_MF_DELETE, J_BASE };

typedef struct gdir {
  char *name;
  uint64_t gen;
  uint64_t since_ms;
} gdir_t;

typedef struct gshard {
  uint8_t id[16];
  bool scanned;
  uint64_t wal_next;
  /* The latest listing of wal/: the positions it showed at or above
   * wal_next, sorted (wal_pos[wal_pos_i..n_wal_pos)), and wal_listed_to,
   * the horizon when it was taken: every entry below that had been written
   * by then, so one below it that the listing lacks is gone. */
  uint64_t *wal_pos;
  size_t n_wal_pos, wal_pos_i;
  uint64_t wal_listed_to;
  uint64_t trimmed_gen;
  /* The compacted generation the next trim waits for, and when it was
   * committed (or first seen): taken from the compactor's state when GC
   * has none, kept until trimmed. Not the compactor's newest: each run
   * restarts that one's time, so a shard compacting more often than the
   * grace was never trimmed (its manifest listed every SSTable ever). */
  uint64_t wait_gen, wait_ms;
  gdir_t *dirs;
  size_t n_dirs;
  uint32_t failures;
  uint64_t next_try_ms;
  /* shard-manifest history */
  uint64_t mf_low;          /* lowest version that may exist (0: unknown) */
  uint64_t mf_target;       /* the floor being proposed */
  uint64_t mf_floor;        /* proposed floor: versions below go after the grace */
  uint64_t mf_floor_ms;     /* when the hint was last seen (or made) >= mf_floor */
} gshard_t;

typedef struct gio {
  mw_gc_t *g;
  mw_storage_req_t req;
  uint64_t pos;
  size_t dir;
  int status;
  bool drop;      /* WAL: the entry holds rows, delete it */
  uint64_t known; /* WAL: the size of an entry this process wrote (no read), else 0 */
  char key[KEY_BYTES];
} gio_t;

struct mw_gc {
  mw_table_t *t;
  mw_gc_config_t cfg;
  uv_timer_t timer;
  bool timer_open, stopping;
  void (*stop_cb)(void *);
  void *stop_arg;
  gshard_t **shards;        /* each its own allocation (g->cur points at one) */
  size_t n_shards;
  size_t rr;
  int job;
  gshard_t *cur;
  mw_shard_t *cur_shard;
  mw_storage_req_t list_req;
  mw_mstore_op_t op;
  gio_t ios[MW_GC_MAX_BATCH];
  size_t n_ios, pending;
  /* one delete_many for a step's deletions: keys of ios[del_io[k]] */
  mw_storage_req_t del_req;
  const char *del_keys[MW_GC_MAX_BATCH];
  int del_st[MW_GC_MAX_BATCH];
  size_t del_io[MW_GC_MAX_BATCH];
  size_t n_del;
  uint64_t trim_gen;
  uint64_t trim_start_ms;   /* uv_now() when the trim started */
  uint64_t list_horizon;    /* scan / WAL_LIST: the horizon when the LIST was sent */
  uint64_t wal_end;         /* WAL: where this batch's walk stopped */
  gdir_t *trimmed;          /* the directories the trim's commit removed */
  size_t n_trimmed;
  mw_ipc_reader_t rd;
  mw_gc_stats_t stats;
  mw_gc_base_t *base;
  uint64_t next_base_ms;
  uint32_t base_failures;
  char hint[32];
};

static struct {
  bool ready;
  mw_metric_t *wal_deleted, *wal_bytes, *sentinels, *trims, *dirs;
  mw_metric_t *wal_reads, *wal_reads_absent, *wal_lists;
  mw_metric_t *manifests, *base_versions, *base_files, *base_bytes;
} gm;

static void metrics_init(void) {
  if (gm.ready) return;
  static const mw_metric_def_t defs[] = {
      {MW_METRIC_COUNTER, "memwald_gc_wal_entries_deleted_total", "WAL entries deleted by GC.",
       .series = {&gm.wal_deleted}},
      {MW_METRIC_COUNTER, "memwald_gc_wal_bytes_deleted_total", "Bytes of WAL entries deleted by GC.",
       .series = {&gm.wal_bytes}},
      {MW_METRIC_COUNTER, "memwald_gc_sentinels_kept_total", "Fence sentinels GC passed over (never deleted).",
       .series = {&gm.sentinels}},
      {MW_METRIC_COUNTER, "memwald_gc_wal_reads_total", "WAL entries GC read to tell a fence sentinel from data.",
       .series = {&gm.wal_reads}},
      {MW_METRIC_COUNTER, "memwald_gc_wal_reads_absent_total", "WAL entries GC went to read and found gone.",
       .series = {&gm.wal_reads_absent}},
      {MW_METRIC_COUNTER, "memwald_gc_wal_lists_total", "Listings of a shard's wal/ by GC.",
       .series = {&gm.wal_lists}},
      {MW_METRIC_COUNTER, "memwald_gc_sstables_trimmed_total", "Compacted SSTables removed from shard manifests.",
       .series = {&gm.trims}},
      {MW_METRIC_COUNTER, "memwald_gc_sstable_dirs_deleted_total",
       "SSTable directories deleted after their grace period.", .series = {&gm.dirs}},
      {MW_METRIC_COUNTER, "memwald_gc_shard_manifests_deleted_total",
       "Old shard-manifest versions deleted by GC.", .series = {&gm.manifests}},
      {MW_METRIC_COUNTER, "memwald_gc_base_versions_deleted_total",
       "Old base-table versions (manifests) deleted by GC.", .series = {&gm.base_versions}},
      {MW_METRIC_COUNTER, "memwald_gc_base_files_deleted_total",
       "Base-table data, deletion, transaction and key-index files deleted by GC.", .series = {&gm.base_files}},
      {MW_METRIC_COUNTER, "memwald_gc_base_bytes_deleted_total", "Bytes of base-table history deleted by GC.",
       .series = {&gm.base_bytes}},
  };
  mw_metrics_register_defs(mw_metrics_default(), defs, sizeof defs / sizeof *defs);
  gm.ready = true;
}

static void count(mw_metric_t *m, uint64_t n) {
  if (m) mw_counter_add(m, n);
}

/* ------------------------------------------------------------------ config */

void mw_gc_config_defaults(mw_gc_config_t *c) {
  assert(c != NULL);
  c->enabled = true;
  c->grace_ms = 60000;
  c->interval_ms = 1000;
  c->manifest_keep = 16;
  c->manifest_grace_ms = 600000;
  c->history_retention_ms = 3600000;
  c->history_interval_ms = 60000;
}

/* The numeric keys and their limits. */
#define GK(field, key, lo, hi) MW_SETTING_NUM(mw_gc_config_t, field, key, lo, hi)
static const mw_setting_num_t num_keys[] = {
    GK(grace_ms, "gc_grace_ms", 0, 86400000ull * 30),
    GK(interval_ms, "gc_interval_ms", 10, 86400000),
    GK(manifest_keep, "gc_manifest_keep_versions", 2, 1000000),
    GK(manifest_grace_ms, "gc_manifest_grace_ms", 0, 86400000ull * 30),
    GK(history_retention_ms, "gc_history_retention_ms", 0, 86400000ull * 365),
    GK(history_interval_ms, "gc_history_interval_ms", 10, 86400000),
};
#undef GK

int mw_gc_config_set(mw_gc_config_t *c, const char *key, const char *value, mw_err_t *err) {
  assert(c != NULL);
  assert(key != NULL);
  assert(value != NULL);
  if (strcmp(key, "gc") == 0) {
    if (strcmp(value, "on") == 0 || strcmp(value, "true") == 0) c->enabled = true;
    else if (strcmp(value, "off") == 0 || strcmp(value, "false") == 0) c->enabled = false;
    else return mw_err_set(err, -EINVAL, "config: gc: expected on or off, got '%.64s'", value);
    return 0;
  }
  return mw_setting_set_num(c, num_keys, sizeof num_keys / sizeof *num_keys, key, value, err);
}

/* ------------------------------------------------------------ shard state */

static gshard_t *gshard_get(mw_gc_t *g, const uint8_t id[16]) {
  for (size_t i = 0; i < g->n_shards; i++)
    if (memcmp(g->shards[i]->id, id, 16) == 0) return g->shards[i];
  gshard_t **p = realloc(g->shards, (g->n_shards + 1) * sizeof *p);
  if (p == NULL) return NULL;
  g->shards = p;
  gshard_t *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  memcpy(s->id, id, 16);
  g->shards[g->n_shards++] = s;
  return s;
}

static bool listed(const mw_shard_manifest_t *m, const char *dir) {
  for (size_t i = 0; i < m->n_sstables; i++)
    if (strcmp(m->sstables[i].path, dir) == 0) return true;
  return false;
}

/* Records `name` as a candidate (grace from `now`); a known one keeps its
 * time unless `restart`, which restarts its grace at `now`. */
static int add_dir_at(gshard_t *gs, const char *name, uint64_t gen, uint64_t now, bool restart) {
  for (size_t i = 0; i < gs->n_dirs; i++)
    if (strcmp(gs->dirs[i].name, name) == 0) {
      if (restart) gs->dirs[i].since_ms = now;
      return 0;
    }
  if (gs->n_dirs >= MW_GC_MAX_PENDING_DIRS) return -ENOSPC;
  gdir_t *p = realloc(gs->dirs, (gs->n_dirs + 1) * sizeof *p);
  if (p == NULL) return -ENOMEM;
  gs->dirs = p;
  if ((p[gs->n_dirs].name = strdup(name)) == NULL) return -ENOMEM;
  p[gs->n_dirs].gen = gen;
  p[gs->n_dirs].since_ms = now;
  gs->n_dirs++;
  return 0;
}

static int add_dir(gshard_t *gs, const char *name, uint64_t gen, uint64_t now) {
  return add_dir_at(gs, name, gen, now, false);
}

static void drop_dir(gshard_t *gs, size_t i) {
  free(gs->dirs[i].name);
  gs->dirs[i] = gs->dirs[--gs->n_dirs];
}

/* "<8hex>_gen_<G>" -> G, or 0 for any other name. */
static uint64_t dir_gen(const char *name, size_t n) {
  const char *p = memmem(name, n, "_gen_", 5);
  if (p == NULL || p + 5 >= name + n) return 0;
  uint64_t g = 0;
  for (const char *q = p + 5; q < name + n; q++) {
    if (*q < '0' || *q > '9' || g > UINT64_MAX / 10 - 9) return 0;
    g = g * 10 + (uint64_t)(*q - '0');
  }
  return g;
}

/* ------------------------------------------------------------ job ending */

static void on_timer(uv_timer_t *h);

static void rearm(mw_gc_t *g, uint64_t delay_ms) {
  assert(g->job == J_NONE); /* a tick only between jobs */
  if (!g->timer_open || g->stopping) return;
  uv_timer_start(&g->timer, on_timer, delay_ms, 0);
}

static void job_end(mw_gc_t *g, int status, const char *what) {
  gshard_t *gs = g->cur;
  assert(g->job != J_NONE); /* every start_* names its job before it can fail */
  assert(what != NULL);
  g->job = J_NONE;
  g->cur = NULL;
  g->cur_shard = NULL;
  if (status < 0 && gs != NULL) {
    g->stats.failures++;
    snprintf(g->stats.last_error, sizeof g->stats.last_error, "%s: %s", what, mw_strerror(status));
    gs->failures++;
    uint32_t sh = gs->failures - 1 < 6 ? gs->failures - 1 : 6;
    uint64_t d = (uint64_t)BACKOFF_BASE_MS << sh;
    gs->next_try_ms = uv_now(g->t->loop) + (d > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : d);
    mw_log_warn("table %s: GC %s failed: %s (retrying later)", g->t->path, what, mw_strerror(status));
  } else if (gs != NULL) {
    gs->failures = 0;
  }
  if (g->stopping) {
    if (g->stop_cb && !g->timer_open) {
      void (*cb)(void *) = g->stop_cb;
      g->stop_cb = NULL;
      cb(g->stop_arg);
    }
    return;
  }
  rearm(g, status < 0 ? g->cfg.interval_ms : 0);
}

/* ------------------------------------------------------------------- scan */

static uint64_t shard_horizon(const mw_shard_t *s) {
  uint64_t r = s->ms.cached.replay_after_wal_entry_position, l = s->ms.cached.wal_entry_position_last_seen;
  return r < l ? r : l;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static void wal_listing_free(gshard_t *gs) {
  free(gs->wal_pos);
  gs->wal_pos = NULL;
  gs->n_wal_pos = gs->wal_pos_i = 0;
}

/* Keep the WAL positions of a listing of the shard (keys "<shard_dir>wal/
 * <bitrev>.arrow", others ignored), sorted; it covers positions below
 * listed_to. *low = the lowest position, or 0 when none. -ENOMEM leaves a
 * listing that covers nothing (listed_to 0): the next WAL step lists again. */
static int wal_listing_take(gshard_t *gs, const mw_storage_req_t *req, size_t pl, uint64_t listed_to,
                            uint64_t *low) {
  wal_listing_free(gs);
  gs->wal_listed_to = 0;
  *low = 0;
  size_t n = 0;
  for (size_t i = 0; i < req->nkeys; i++) n += strncmp(req->keys[i] + pl, "wal/", 4) == 0;
  if (n > 0 && (gs->wal_pos = malloc(n * sizeof *gs->wal_pos)) == NULL) return -ENOMEM;
  for (size_t i = 0; i < req->nkeys; i++) {
    const char *rest = req->keys[i] + pl;
    uint64_t pos;
    if (strncmp(rest, "wal/", 4) == 0 && mw_bitrev_parse(rest + 4, &pos) == 0 && pos > 0)
      gs->wal_pos[gs->n_wal_pos++] = pos;
  }
  assert(gs->n_wal_pos <= n);
  if (gs->n_wal_pos > 1) qsort(gs->wal_pos, gs->n_wal_pos, sizeof *gs->wal_pos, cmp_u64);
  gs->wal_listed_to = listed_to;
  *low = gs->n_wal_pos ? gs->wal_pos[0] : 0;
  return 0;
}

static void on_scanned(mw_storage_req_t *req, int status) {
  mw_gc_t *g = req->data;
  gshard_t *gs = g->cur;
  mw_shard_t *s = g->cur_shard;
  assert(g->job == J_SCAN);
  assert(s != NULL);
  if (status < 0 && status != -ENOENT) {
    job_end(g, status, "scan");
    return;
  }
  size_t pl = strlen(s->ms.shard_dir);
  uint64_t low = 0, mf_low = 0, now = uv_now(g->t->loop);
  if (status == 0 && wal_listing_take(gs, req, pl, g->list_horizon, &low) < 0) {
    mw_storage_req_cleanup(&g->list_req);
    mw_storage_req_init(&g->list_req);
    job_end(g, -ENOMEM, "scan");
    return;
  }
  for (size_t i = 0; status == 0 && i < req->nkeys; i++) {
    const char *rest = req->keys[i] + pl;
    if (strncmp(rest, "wal/", 4) == 0) continue; /* wal_listing_take */
    if (strncmp(rest, "manifest/", 9) == 0) {
      uint64_t v;
      if (mw_shard_manifest_name_parse(rest + 9, &v) == 0 && v > 0 && (mf_low == 0 || v < mf_low)) mf_low = v;
      continue;
    }
    const char *slash = strchr(rest, '/');
    if (slash == NULL) continue;
    size_t n = (size_t)(slash - rest);
    uint64_t gen = dir_gen(rest, n);
    if (gen == 0 || n >= KEY_BYTES) continue;
    char name[KEY_BYTES];
    memcpy(name, rest, n);
    name[n] = '\0';
    if (!listed(&s->ms.cached, name)) add_dir(gs, name, gen, now);
  }
  if (low > gs->wal_next) gs->wal_next = low;
  if (gs->wal_next == 0) gs->wal_next = 1;
  gs->mf_low = mf_low;
  gs->scanned = true;
  mw_storage_req_cleanup(&g->list_req);
  mw_storage_req_init(&g->list_req);
  mw_log_info("table %s: shard %s: GC scan: WAL from position %" PRIu64 ", manifests from v%" PRIu64
              ", %zu unlisted SSTable directories", g->t->path, s->id_str, gs->wal_next, gs->mf_low, gs->n_dirs);
  job_end(g, 0, "scan");
}

static int start_scan(mw_gc_t *g) {
  assert(g->job == J_NONE);
  assert(!g->cur->scanned);
  g->job = J_SCAN;
  g->list_horizon = shard_horizon(g->cur_shard);
  g->list_req.data = g;
  g->list_req.background = true; /* GC yields to the data path (storage.h) */
  return mw_storage_list(g->t->st, &g->list_req, g->cur_shard->ms.shard_dir, on_scanned);
}

/* ------------------------------------------------------------------- trim */

static void trimmed_free(mw_gc_t *g) {
  for (size_t i = 0; i < g->n_trimmed; i++) free(g->trimmed[i].name);
  free(g->trimmed);
  g->trimmed = NULL;
  g->n_trimmed = 0;
}

/* next = cur minus every SSTable of generation <= trim_gen. */
static int trim_fn(void *arg, const mw_shard_manifest_t *cur, mw_shard_manifest_t *next, mw_err_t *err) {
  mw_gc_t *g = arg;
  assert(g->job == J_TRIM);
  assert(g->trim_gen > 0);
  if (cur->status != MW_SHARD_ACTIVE)
    return mw_err_set(err, -EROFS, "shard is SEALED: no trim");
  trimmed_free(g); /* a retried commit calls this again */
  g->trimmed = calloc(next->n_sstables + 1, sizeof *g->trimmed);
  if (g->trimmed == NULL) return -ENOMEM;
  size_t k = 0;
  for (size_t i = 0; i < next->n_sstables; i++) {
    mw_sstable_ref_t *r = &next->sstables[i];
    if (r->generation <= g->trim_gen) {
      g->trimmed[g->n_trimmed].name = r->path; /* moved */
      g->trimmed[g->n_trimmed++].gen = r->generation;
      continue;
    }
    next->sstables[k++] = *r;
  }
  next->n_sstables = k;
  return 0;
}

/* The trim's candidates (recorded at its start) wait a whole grace from now:
 * the commit may have landed at any moment until its answer. */
static void trim_regrace(mw_gc_t *g, gshard_t *gs, uint64_t now) {
  for (size_t i = 0; i < gs->n_dirs; i++)
    if (gs->dirs[i].gen <= g->trim_gen && gs->dirs[i].since_ms >= g->trim_start_ms) gs->dirs[i].since_ms = now;
}

static void on_trimmed(mw_mstore_op_t *op, int status) {
  mw_gc_t *g = op->data;
  gshard_t *gs = g->cur;
  assert(g->job == J_TRIM);
  assert(gs != NULL);
  uint64_t now = uv_now(g->t->loop);
  trim_regrace(g, gs, now);
  if (status < 0) { /* the candidates stay: one still listed is never deleted (start_delete) */
    trimmed_free(g);
    job_end(g, status, "trim");
    return;
  }
  for (size_t i = 0; i < g->n_trimmed; i++) add_dir_at(gs, g->trimmed[i].name, g->trimmed[i].gen, now, true);
  g->stats.trims++;
  g->stats.sstables_trimmed += g->n_trimmed;
  count(gm.trims, g->n_trimmed);
  gs->trimmed_gen = g->trim_gen;
  mw_log_info("table %s: shard %s: %zu compacted SSTables (generation <= %" PRIu64 ") unlisted in "
              "manifest v%" PRIu64 "; deleted after %" PRIu64 " ms", g->t->path, g->cur_shard->id_str,
              g->n_trimmed, g->trim_gen, op->m.version, g->cfg.grace_ms);
  trimmed_free(g);
  job_end(g, 0, "trim");
}

/* The SSTables the trim unlists become candidates BEFORE its commit: the
 * commit caches its manifest when the put lands, and calls back only after
 * the version-hint PUT, so GC's account must not wait for the callback (a
 * status between the two would show the SSTables neither listed nor
 * waiting). And a commit whose put landed but whose answer was lost (an
 * error) is retried against the manifest it made itself, which lists none
 * of them: its trim_fn then removes nothing, and without this record the
 * directories would stay until a restart's scan. A candidate the newest
 * manifest still lists is never deleted (start_delete), so a trim that
 * really failed leaves them safe. */
static int start_trim(mw_gc_t *g, uint64_t gen, uint64_t now) {
  mw_shard_t *s = g->cur_shard;
  const mw_shard_manifest_t *m = &s->ms.cached;
  assert(g->job == J_NONE);
  assert(gen > 0);
  g->job = J_TRIM;
  g->trim_gen = gen;
  g->trim_start_ms = now;
  for (size_t i = 0; i < m->n_sstables; i++)
    if (m->sstables[i].generation <= gen)
      add_dir_at(g->cur, m->sstables[i].path, m->sstables[i].generation, now, true);
  g->op.data = g;
  return mw_mstore_commit_update(&s->ms, &g->op, s->epoch, trim_fn, g, on_trimmed);
}

/* ----------------------------------------------------------------- delete */

static void on_io(mw_storage_req_t *req, int status);
static void batch_complete(mw_gc_t *g);

static int start_delete(mw_gc_t *g, uint64_t compacted, uint64_t now) {
  gshard_t *gs = g->cur;
  mw_shard_t *s = g->cur_shard;
  assert(g->job == J_NONE);
  assert(gs->scanned); /* the candidates come from the scan */
  g->job = J_DELETE;
  g->n_ios = g->pending = 0;
  for (size_t i = 0; i < gs->n_dirs && g->n_ios < MW_GC_MAX_BATCH; i++) {
    gdir_t *d = &gs->dirs[i];
    if (d->gen > compacted || now - d->since_ms < g->cfg.grace_ms) continue;
    if (listed(&s->ms.cached, d->name)) continue; /* a flush committed it after the scan */
    gio_t *io = &g->ios[g->n_ios++];
    io->dir = i;
    io->status = 0;
    snprintf(io->key, sizeof io->key, "%s%s/", s->ms.shard_dir, d->name);
    io->req.data = io;
    io->req.background = true; /* GC yields to the data path (storage.h) */
    int rc = mw_storage_delete_prefix(g->t->st, &io->req, io->key, on_io);
    if (rc < 0) io->status = rc;
    else g->pending++;
  }
  if (g->n_ios == 0) return -EAGAIN; /* nothing due */
  if (g->pending == 0) return g->ios[0].status;
  return 0;
}

static void delete_done(mw_gc_t *g) {
  gshard_t *gs = g->cur;
  assert(g->pending == 0);
  assert(g->n_ios <= MW_GC_MAX_BATCH);
  int first = 0;
  /* drop from the highest index down, so earlier indexes stay valid */
  for (size_t k = g->n_ios; k-- > 0;) {
    gio_t *io = &g->ios[k];
    if (io->status < 0) {
      if (first == 0) first = io->status;
      continue;
    }
    g->stats.dirs_deleted++;
    count(gm.dirs, 1);
    drop_dir(gs, io->dir);
  }
  for (size_t k = 0; k < g->n_ios; k++) mw_storage_req_cleanup(&g->ios[k].req);
  job_end(g, first, "SSTable delete");
}

/* -------------------------------------------------------------------- WAL */

static void on_wal_listed(mw_storage_req_t *req, int status) {
  mw_gc_t *g = req->data;
  gshard_t *gs = g->cur;
  assert(g->job == J_WAL_LIST);
  assert(gs != NULL);
  if (status < 0 && status != -ENOENT) {
    job_end(g, status, "WAL list");
    return;
  }
  g->stats.wal_lists++;
  count(gm.wal_lists, 1);
  /* (-ENOENT: nothing there at all; the listing is empty) */
  uint64_t low;
  int rc = wal_listing_take(gs, req, strlen(g->cur_shard->ms.shard_dir), g->list_horizon, &low);
  mw_storage_req_cleanup(&g->list_req);
  mw_storage_req_init(&g->list_req);
  job_end(g, rc, "WAL list");
}

static int start_wal_list(mw_gc_t *g, uint64_t horizon) {
  mw_shard_t *s = g->cur_shard;
  assert(g->job == J_WAL_GET); /* start_wal found positions past its listing */
  assert(g->n_ios == 0);
  g->job = J_WAL_LIST;
  g->list_horizon = horizon;
  snprintf(g->ios[0].key, sizeof g->ios[0].key, "%swal/", s->ms.shard_dir);
  g->list_req.data = g;
  g->list_req.background = true; /* GC yields to the data path (storage.h) */
  return mw_storage_list(g->t->st, &g->list_req, g->ios[0].key, on_wal_listed);
}

static void wal_sniffed(mw_gc_t *g);
static void batch_complete(mw_gc_t *g);

/* ------------------------------------------------------ batched deletes */

/* Each key's own status goes to its io (the request's status is the first
 * of them). */
static void on_deleted(mw_storage_req_t *req, int status) {
  mw_gc_t *g = req->data;
  (void)status;
  for (size_t k = 0; k < g->n_del; k++) {
    gio_t *io = &g->ios[g->del_io[k]];
    if (io->status == 0) io->status = g->del_st[k];
  }
  mw_storage_req_cleanup(&g->del_req);
  assert(g->pending == 1);
  g->pending = 0;
  batch_complete(g);
}

/* Queue ios[k]'s key for this step's delete_many. */
static void delete_add(mw_gc_t *g, size_t k) {
  assert(g->n_del < MW_GC_MAX_BATCH);
  assert(k < g->n_ios);
  g->del_io[g->n_del] = k;
  g->del_keys[g->n_del++] = g->ios[k].key;
}

/* One request for every queued key (at most MW_GC_MAX_BATCH, under
 * MW_STORAGE_DELETE_MANY_MAX): on S3 one DeleteObjects where there were as
 * many DELETEs. 0 with one request pending, or -errno (none). */
static int delete_submit(mw_gc_t *g) {
  _Static_assert(MW_GC_MAX_BATCH <= MW_STORAGE_DELETE_MANY_MAX, "one delete_many a step");
  assert(g->n_del > 0);
  assert(g->pending == 0);
  mw_storage_req_init(&g->del_req);
  g->del_req.data = g;
  g->del_req.background = true; /* GC yields to the data path (storage.h) */
  int rc = mw_storage_delete_many(g->t->st, &g->del_req, g->del_keys, g->n_del, g->del_st, on_deleted);
  if (rc == 0) g->pending = 1;
  return rc;
}

/* One batch of positions from wal_next: entries this process wrote go
 * straight to deletion, entries the listing shows are read first, and
 * positions the listing lacks are passed over. -EAGAIN when nothing below
 * the horizon is left. */
static int start_wal(mw_gc_t *g, uint64_t horizon) {
  gshard_t *gs = g->cur;
  mw_shard_t *s = g->cur_shard;
  assert(g->job == J_DELETE); /* only when no SSTable delete was due (shard_job) */
  assert(gs->wal_next < horizon);
  g->job = J_WAL_GET;
  g->n_ios = g->pending = 0;
  while (gs->wal_pos_i < gs->n_wal_pos && gs->wal_pos[gs->wal_pos_i] < gs->wal_next) gs->wal_pos_i++;
  uint64_t p = gs->wal_next;
  bool relist = false;
  while (p < horizon && g->n_ios < MW_GC_MAX_BATCH) {
    uint64_t known = mw_wal_landed_size(&s->wal, p);
    bool listed_here = gs->wal_pos_i < gs->n_wal_pos && gs->wal_pos[gs->wal_pos_i] == p;
    if (listed_here) gs->wal_pos_i++;
    if (known == 0 && !listed_here) {
      if (p >= gs->wal_listed_to) { /* written after the listing: list again */
        relist = true;
        break;
      }
      /* gone before the listing: on to the next listed (or written) one */
      /* (an entry this process wrote below wal_listed_to was there to be
       * listed, so nothing known lies between) */
      uint64_t next = gs->wal_pos_i < gs->n_wal_pos ? gs->wal_pos[gs->wal_pos_i] : gs->wal_listed_to;
      assert(next > p);
      p = next < horizon ? next : horizon;
      continue;
    }
    gio_t *io = &g->ios[g->n_ios++];
    char name[MW_BITREV_NAME_BYTES];
    mw_wal_entry_name(p, name, sizeof name);
    snprintf(io->key, sizeof io->key, "%swal/%s", s->ms.shard_dir, name);
    io->pos = p;
    io->status = 0;
    io->drop = false;
    io->known = known;
    io->req.data = io;
    p++;
  }
  assert(p <= horizon);
  g->wal_end = p;
  if (g->n_ios == 0) {
    if (relist) return start_wal_list(g, horizon);
    gs->wal_next = p; /* only positions gone already */
    if (gs->wal_pos_i >= gs->n_wal_pos) wal_listing_free(gs);
    g->job = J_NONE;
    return -EAGAIN;
  }
  for (size_t k = 0; k < g->n_ios; k++) {
    gio_t *io = &g->ios[k];
    if (io->known) continue;
    io->req.background = true; /* GC yields to the data path (storage.h) */
    int rc = mw_storage_get(g->t->st, &io->req, io->key, 0, MW_GC_SNIFF_BYTES, on_io);
    if (rc < 0) {
      io->status = rc;
      break;
    }
    g->stats.wal_reads++;
    count(gm.wal_reads, 1);
    g->pending++;
  }
  if (g->pending == 0) {
    for (size_t k = 0; k < g->n_ios; k++)
      if (g->ios[k].status < 0) return g->ios[k].status;
    wal_sniffed(g); /* every entry known: straight to deletion */
  }
  return 0;
}

/* A data entry has record batches; a sentinel has none. Anything we cannot
 * read as an entry with rows is kept: only a certain data entry goes. */
static bool holds_rows(mw_gc_t *g, const mw_storage_req_t *req) {
  if (req->size > MW_GC_SNIFF_BYTES) return true; /* sentinels are ~200 bytes */
  if (mw_ipc_reader_decode(&g->rd, req->buf.data, req->buf.len, NULL, NULL) < 0) return false;
  return g->rd.stream.n_batches > 0;
}

static void wal_done(mw_gc_t *g);

static void wal_sniffed(mw_gc_t *g) {
  mw_shard_t *s = g->cur_shard;
  g->job = J_WAL_DELETE;
  g->pending = 0;
  g->n_del = 0;
  for (size_t k = 0; k < g->n_ios; k++) {
    gio_t *io = &g->ios[k];
    if (io->status == -ENOENT) { /* a hole, or gone already */
      io->status = 0;
      g->stats.wal_reads_absent++;
      count(gm.wal_reads_absent, 1);
      continue;
    }
    if (io->status < 0) break; /* this and later positions wait for the next round */
    io->drop = io->known > 0 || holds_rows(g, &io->req);
    if (!io->drop) {
      g->stats.sentinels_kept++;
      count(gm.sentinels, 1);
      mw_log_info("table %s: shard %s: GC keeps WAL position %" PRIu64 " (a fence sentinel)", g->t->path,
                  s->id_str, io->pos);
      continue;
    }
    mw_buf_reset(&io->req.buf);
    delete_add(g, k);
  }
  int rc = g->n_del > 0 ? delete_submit(g) : 0;
  for (size_t k = 0; rc < 0 && k < g->n_del; k++) g->ios[g->del_io[k]].status = rc;
  if (g->pending == 0) wal_done(g); /* nothing to delete (sentinels, holes), or refused */
}

static void wal_done(mw_gc_t *g) {
  gshard_t *gs = g->cur;
  assert(g->pending == 0);
  assert(g->n_ios <= MW_GC_MAX_BATCH);
  int first = 0;
  for (size_t k = 0; k < g->n_ios; k++) {
    gio_t *io = &g->ios[k];
    if (io->status < 0) {
      first = io->status;
      break;
    }
    if (io->drop) {
      uint64_t size = io->known > 0 ? io->known : io->req.size;
      g->stats.wal_deleted++;
      g->stats.wal_bytes_deleted += size;
      count(gm.wal_deleted, 1);
      count(gm.wal_bytes, size);
    }
    gs->wal_next = io->pos + 1;
  }
  if (first == 0 && g->wal_end > gs->wal_next) gs->wal_next = g->wal_end; /* and the gone ones after */
  if (gs->wal_pos_i >= gs->n_wal_pos) wal_listing_free(gs);
  mw_wal_landed_forget(&g->cur_shard->wal, gs->wal_next);
  for (size_t k = 0; k < g->n_ios; k++) mw_storage_req_cleanup(&g->ios[k].req);
  job_end(g, first, "WAL delete");
}

static void batch_complete(mw_gc_t *g);

static void on_io(mw_storage_req_t *req, int status) {
  gio_t *io = req->data;
  mw_gc_t *g = io->g;
  if (io->status == 0) io->status = status;
  assert(g->pending > 0);
  if (--g->pending == 0) batch_complete(g);
}

/* ------------------------------------------------------ manifest history */

/* Lance's readers find the newest shard manifest from version_hint.json:
 * if the hinted version is missing they fall back to version 1 and probe
 * forward, which finds a stale latest (or none) once old versions are gone.
 * So versions below F are deleted only while the hint names F or later,
 * checked (and rewritten to our newest if not) when F is proposed, again
 * gc_manifest_grace_ms later, and before every batch; the grace covers a
 * reader that read an older hint just before. docs/engine.md has the whole
 * argument, with what it assumes of a stalled hint writer. */

static void hint_key(const mw_shard_t *s, char *out, size_t n) {
  snprintf(out, n, "%smanifest/version_hint.json", s->ms.shard_dir);
}

static int start_mf_hint(mw_gc_t *g, uint64_t target) {
  assert(g->job == J_NONE || g->job == J_DELETE); /* nothing of the shard's was due before */
  assert(target > g->cur->mf_low);
  g->job = J_MF_HINT;
  g->cur->mf_target = target;
  g->n_ios = 1;
  g->pending = 0;
  gio_t *io = &g->ios[0];
  mw_storage_req_cleanup(&io->req);
  mw_storage_req_init(&io->req);
  io->status = 0;
  io->req.data = io;
  hint_key(g->cur_shard, io->key, sizeof io->key);
  io->req.background = true; /* GC yields to the data path (storage.h) */
  int rc = mw_storage_get(g->t->st, &io->req, io->key, 0, MW_VERSION_HINT_MAX_BYTES, on_io);
  if (rc < 0) return rc;
  g->pending = 1;
  return 0;
}

static void mf_hint_put(mw_gc_t *g, uint64_t hint) {
  mw_shard_t *s = g->cur_shard;
  gio_t *io = &g->ios[0];
  uint64_t latest = s->ms.cached.version;
  mw_log_info("table %s: shard %s: version_hint.json names v%" PRIu64 ", below the GC floor v%" PRIu64
              ": rewriting it to v%" PRIu64 " (old versions wait another %" PRIu64 " ms)", g->t->path,
              s->id_str, hint, g->cur->mf_target, latest, g->cfg.manifest_grace_ms);
  int n = mw_version_hint_encode(latest, g->hint, sizeof g->hint);
  assert(g->job == J_MF_HINT); /* the hint read found it below the floor */
  g->job = J_MF_HINT_PUT;
  mw_storage_req_cleanup(&io->req);
  mw_storage_req_init(&io->req);
  io->req.data = io;
  io->status = 0;
  io->req.background = true; /* GC yields to the data path (storage.h) */
  int rc = n < 0 ? n : mw_storage_put(g->t->st, &io->req, io->key, g->hint, (size_t)n, on_io);
  if (rc < 0) {
    mw_storage_req_cleanup(&io->req);
    job_end(g, rc, "version hint rewrite");
    return;
  }
  g->pending = 1;
}

static void mf_deleted(mw_gc_t *g);

static void mf_delete(mw_gc_t *g) {
  gshard_t *gs = g->cur;
  mw_shard_t *s = g->cur_shard;
  assert(g->job == J_MF_HINT); /* the hint names the floor or later: old versions may go */
  assert(gs->mf_floor > 0);
  g->job = J_MF_DELETE;
  g->n_ios = g->pending = g->n_del = 0;
  int rc = 0;
  for (uint64_t v = gs->mf_low; v < gs->mf_floor && g->n_ios < MW_GC_MAX_BATCH; v++) {
    gio_t *io = &g->ios[g->n_ios++];
    mw_storage_req_cleanup(&io->req);
    mw_storage_req_init(&io->req);
    io->req.data = io;
    io->pos = v;
    io->status = 0;
    if ((rc = mw_mstore_manifest_key(&s->ms, v, io->key, sizeof io->key)) < 0) {
      io->status = rc;
      break;
    }
    delete_add(g, g->n_ios - 1);
  }
  if (g->n_del > 0 && (rc = delete_submit(g)) < 0)
    for (size_t k = 0; k < g->n_del; k++) g->ios[g->del_io[k]].status = rc;
  if (g->pending == 0) mf_deleted(g); /* the versions before a refused one still count */
}

static void mf_hint_read(mw_gc_t *g) {
  gshard_t *gs = g->cur;
  gio_t *io = &g->ios[0];
  assert(g->n_ios == 1);
  assert(gs->mf_target > 0);
  uint64_t hint = 0;
  if (io->status < 0 && io->status != -ENOENT) {
    int st = io->status;
    mw_storage_req_cleanup(&io->req);
    job_end(g, st, "version hint read");
    return;
  }
  if (io->status == 0 && mw_version_hint_parse(io->req.buf.data, io->req.buf.len, &hint, NULL) < 0) hint = 0;
  uint64_t now = uv_now(g->t->loop);
  if (hint < gs->mf_target) {
    g->stats.hints_rewritten++;
    mf_hint_put(g, hint);
    return;
  }
  mw_storage_req_cleanup(&io->req);
  if (gs->mf_floor == 0) { /* proposal: the grace starts now */
    gs->mf_floor = gs->mf_target;
    gs->mf_floor_ms = now;
    mw_log_info("table %s: shard %s: shard-manifest versions v%" PRIu64 "..v%" PRIu64 " are deleted after "
                "%" PRIu64 " ms (the hint names v%" PRIu64 ")", g->t->path, g->cur_shard->id_str, gs->mf_low,
                gs->mf_floor - 1, g->cfg.manifest_grace_ms, hint);
    job_end(g, 0, "manifest floor");
    return;
  }
  mf_delete(g);
}

static void mf_hint_written(mw_gc_t *g) {
  gshard_t *gs = g->cur;
  gio_t *io = &g->ios[0];
  assert(g->n_ios == 1);
  assert(g->pending == 0);
  int st = io->status;
  mw_storage_req_cleanup(&io->req);
  if (st < 0) {
    job_end(g, st, "version hint rewrite");
    return;
  }
  /* a floor (proposed or in progress) waits one more grace from now */
  gs->mf_floor = gs->mf_target;
  gs->mf_floor_ms = uv_now(g->t->loop);
  job_end(g, 0, "version hint rewrite");
}

static void mf_deleted(mw_gc_t *g) {
  gshard_t *gs = g->cur;
  assert(g->job == J_MF_DELETE);
  assert(g->pending == 0);
  int first = 0;
  uint64_t n = 0;
  for (size_t k = 0; k < g->n_ios; k++) {
    gio_t *io = &g->ios[k];
    if (io->status < 0) {
      first = io->status;
      break;
    }
    gs->mf_low = io->pos + 1;
    n++;
  }
  for (size_t k = 0; k < g->n_ios; k++) mw_storage_req_cleanup(&g->ios[k].req);
  g->stats.manifests_deleted += n;
  count(gm.manifests, n);
  if (gs->mf_low >= gs->mf_floor) {
    mw_log_info("table %s: shard %s: shard-manifest versions below v%" PRIu64 " deleted", g->t->path,
                g->cur_shard->id_str, gs->mf_floor);
    gs->mf_floor = 0;
  }
  job_end(g, first, "manifest delete");
}

/* Next manifest job of the shard, or -EAGAIN. */
static int manifest_job(mw_gc_t *g, gshard_t *gs, const mw_shard_t *s, uint64_t now) {
  uint64_t latest = s->ms.cached.version, keep = g->cfg.manifest_keep;
  if (gs->mf_low == 0 || latest <= keep) return -EAGAIN;
  uint64_t floor = latest - keep + 1; /* versions floor..latest stay */
  if (gs->mf_floor == 0) {
    if (floor < gs->mf_low + MW_GC_MANIFEST_MIN_BATCH) return -EAGAIN;
    return start_mf_hint(g, floor);
  }
  if (gs->mf_low >= gs->mf_floor || now - gs->mf_floor_ms < g->cfg.manifest_grace_ms) return -EAGAIN;
  return start_mf_hint(g, gs->mf_floor);
}

/* ------------------------------------------------------------ base history */

static void on_base(void *arg, int status, const char *what) {
  mw_gc_t *g = arg;
  assert(g->job == J_BASE);
  mw_gc_base_stats_t b;
  mw_gc_base_stats(g->base, &b);
  count(gm.base_versions, b.versions_deleted - g->stats.base_versions_deleted);
  count(gm.base_files, b.files_deleted - g->stats.base_files_deleted);
  count(gm.base_bytes, b.bytes_deleted - g->stats.base_bytes_deleted);
  g->stats.base_runs = b.runs;
  g->stats.base_versions_deleted = b.versions_deleted;
  g->stats.base_files_deleted = b.files_deleted;
  g->stats.base_bytes_deleted = b.bytes_deleted;
  g->stats.base_versions_retained = b.versions_retained;
  g->stats.base_stale_listings = b.stale_listings;
  uint64_t now = uv_now(g->t->loop), delay = g->cfg.history_interval_ms;
  if (status < 0 && status != -ENOENT) {
    g->stats.failures++;
    snprintf(g->stats.last_error, sizeof g->stats.last_error, "base history %s: %s", what, mw_strerror(status));
    mw_log_warn("table %s: base history GC: %s failed: %s (retrying later)", g->t->path, what,
                mw_strerror(status));
    uint32_t sh = g->base_failures < 6 ? g->base_failures : 6;
    g->base_failures++;
    uint64_t d = (uint64_t)BACKOFF_BASE_MS << sh;
    if (d < delay) delay = d;
  } else {
    g->base_failures = 0;
  }
  g->next_base_ms = now + delay;
  job_end(g, 0, "base history");
}

static bool start_base(mw_gc_t *g, uint64_t now) {
  assert(g->job == J_NONE); /* no shard had a job this tick */
  if (g->base == NULL || now < g->next_base_ms) return false;
  g->job = J_BASE;
  g->cur = NULL;
  g->cur_shard = NULL;
  int rc = mw_gc_base_run(g->base, g->cfg.history_retention_ms, on_base, g);
  if (rc < 0) {
    g->job = J_NONE;
    g->next_base_ms = now + g->cfg.history_interval_ms;
    mw_log_warn("table %s: base history GC not started: %s", g->t->path, mw_strerror(rc));
    return false;
  }
  return true;
}

/* ------------------------------------------------------------------ ticks */

/* Whether a trim of every SSTable of generation <= *gen is due: one the
 * base recorded compacted at least a grace ago and the manifest still
 * lists. Trims come at most once a grace under steady compaction, each
 * unlisting what was compacted a grace before. */
static bool trim_due(const mw_gc_t *g, gshard_t *gs, const mw_shard_t *s, const mw_compact_shard_t *cs,
                     uint64_t now, uint64_t *gen) {
  if (cs->compacted_gen == 0 || cs->committed_ms == 0) return false;
  if (gs->wait_gen == 0 || gs->wait_gen > cs->compacted_gen) { /* none yet, or the state began again */
    gs->wait_gen = cs->compacted_gen;
    gs->wait_ms = cs->committed_ms;
  }
  assert(gs->wait_gen <= cs->compacted_gen);
  if (now - gs->wait_ms < g->cfg.grace_ms) return false;
  for (size_t i = 0; i < s->ms.cached.n_sstables; i++)
    if (s->ms.cached.sstables[i].generation <= gs->wait_gen) {
      *gen = gs->wait_gen;
      return true;
    }
  /* trimmed (or never listed): wait for the newest from its commit on */
  gs->wait_gen = cs->compacted_gen;
  gs->wait_ms = cs->committed_ms;
  return false;
}

/* Start the next job for shard s; -EAGAIN when it has none. */
static int shard_job(mw_gc_t *g, gshard_t *gs, mw_shard_t *s, uint64_t now) {
  assert(g->job == J_NONE);
  assert(mw_shard_state(s) == MW_SS_ACTIVE); /* GC works only beside a live writer's epoch */
  g->cur = gs;
  g->cur_shard = s;
  if (!gs->scanned) return start_scan(g);
  mw_compact_shard_t cs = {0};
  if (g->t->compact) mw_compact_shard_state(g->t->compact, gs->id, &cs);
  uint64_t trim_gen = 0;
  if (trim_due(g, gs, s, &cs, now, &trim_gen)) return start_trim(g, trim_gen, now);
  int rc = start_delete(g, cs.compacted_gen, now);
  if (rc != -EAGAIN) return rc;
  const mw_shard_manifest_t *m = &s->ms.cached;
  uint64_t r = m->replay_after_wal_entry_position, l = m->wal_entry_position_last_seen;
  uint64_t horizon = r < l ? r : l;
  if (gs->wal_next > 0 && gs->wal_next < horizon) {
    rc = start_wal(g, horizon);
    if (rc != -EAGAIN) return rc;
  }
  return manifest_job(g, gs, s, now);
}

static void on_timer(uv_timer_t *h) {
  mw_gc_t *g = h->data;
  if (g->stopping || g->job != J_NONE) return;
  uint64_t now = uv_now(g->t->loop);
  size_t n = g->t->n_shards;
  if (g->cfg.enabled && (g->t->drop == NULL || g->t->drop->phase == 0)) {
    for (size_t k = 0; k < n; k++) {
      mw_table_shard_t *ts = g->t->shards[(g->rr + k) % n];
      mw_shard_t *s = &ts->shard;
      if (mw_shard_state(s) != MW_SS_ACTIVE || !s->ms.has_cached || s->ctl != 0) continue;
      gshard_t *gs = gshard_get(g, ts->id);
      if (gs == NULL || gs->next_try_ms > now) continue;
      int rc = shard_job(g, gs, s, now);
      if (rc == -EAGAIN) {
        g->job = J_NONE;
        continue;
      }
      g->rr = (g->rr + k + 1) % (n ? n : 1);
      if (rc < 0) job_end(g, rc, "submit");
      return;
    }
    if (start_base(g, now)) return;
  }
  g->cur = NULL;
  g->cur_shard = NULL;
  rearm(g, g->cfg.interval_ms);
}

/* Completion of a batch job (delete / WAL): storage callbacks only. */
static void batch_complete(mw_gc_t *g) {
  if (g->job == J_DELETE) delete_done(g);
  else if (g->job == J_WAL_GET) wal_sniffed(g);
  else if (g->job == J_WAL_DELETE) wal_done(g);
  else if (g->job == J_MF_HINT) mf_hint_read(g);
  else if (g->job == J_MF_HINT_PUT) mf_hint_written(g);
  else if (g->job == J_MF_DELETE) mf_deleted(g);
}

/* --------------------------------------------------------------- lifecycle */

int mw_gc_new(mw_table_t *t, const mw_gc_config_t *cfg, mw_gc_t **out) {
  assert(t != NULL);
  assert(out != NULL);
  metrics_init();
  mw_gc_t *g = calloc(1, sizeof *g);
  if (g == NULL) return -ENOMEM;
  g->t = t;
  if (cfg) g->cfg = *cfg;
  else mw_gc_config_defaults(&g->cfg);
  mw_storage_req_init(&g->list_req);
  mw_storage_req_init(&g->del_req);
  mw_mstore_op_init(&g->op);
  mw_ipc_reader_init(&g->rd);
  int rc = mw_gc_base_new(t->st, t->path, &g->base);
  if (rc < 0) {
    mw_ipc_reader_free(&g->rd);
    mw_mstore_op_free(&g->op);
    free(g);
    return rc;
  }
  for (size_t i = 0; i < MW_GC_MAX_BATCH; i++) {
    mw_storage_req_init(&g->ios[i].req);
    g->ios[i].g = g;
  }
  *out = g;
  return 0;
}

void mw_gc_start(mw_gc_t *g) {
  assert(g != NULL);
  assert(!g->timer_open);
  int rc = uv_timer_init(g->t->loop, &g->timer);
  assert(rc == 0); /* cannot fail on an initialised loop */
  (void)rc;
  g->timer.data = g;
  g->timer_open = true;
  rearm(g, g->cfg.interval_ms);
}

static void on_timer_closed(uv_handle_t *h) {
  mw_gc_t *g = h->data;
  g->timer_open = false;
  if (g->job == J_NONE && g->stop_cb) {
    void (*cb)(void *) = g->stop_cb;
    g->stop_cb = NULL;
    cb(g->stop_arg);
  }
}

void mw_gc_stop(mw_gc_t *g, void (*cb)(void *arg), void *arg) {
  assert(g != NULL);
  assert(cb != NULL);
  assert(!g->stopping);
  assert(g->timer_open); /* started, stopped once */
  g->stopping = true;
  g->stop_cb = cb;
  g->stop_arg = arg;
  if (g->timer_open) {
    uv_timer_stop(&g->timer);
    uv_close((uv_handle_t *)&g->timer, on_timer_closed);
  }
}

void mw_gc_free(mw_gc_t *g) {
  if (g == NULL) return;
  assert(g->job == J_NONE);
  assert(!g->timer_open);
  for (size_t i = 0; i < g->n_shards; i++) {
    for (size_t k = 0; k < g->shards[i]->n_dirs; k++) free(g->shards[i]->dirs[k].name);
    free(g->shards[i]->dirs);
    wal_listing_free(g->shards[i]);
    free(g->shards[i]);
  }
  free(g->shards);
  trimmed_free(g);
  for (size_t i = 0; i < MW_GC_MAX_BATCH; i++) mw_storage_req_cleanup(&g->ios[i].req);
  mw_storage_req_cleanup(&g->list_req);
  mw_storage_req_cleanup(&g->del_req);
  mw_mstore_op_free(&g->op);
  mw_ipc_reader_free(&g->rd);
  mw_gc_base_free(g->base);
  free(g);
}

void mw_gc_stats(const mw_gc_t *g, mw_gc_stats_t *out) {
  assert(g != NULL);
  assert(out != NULL);
  *out = g->stats;
}

bool mw_gc_shard_stats(const mw_gc_t *g, const uint8_t id[16], mw_gc_shard_stats_t *out) {
  assert(g != NULL);
  assert(id != NULL);
  assert(out != NULL);
  for (size_t i = 0; i < g->n_shards; i++) {
    if (memcmp(g->shards[i]->id, id, 16) != 0) continue;
    out->wal_first = g->shards[i]->wal_next;
    mw_shard_t *s = mw_table_shard(g->t, id, false);
    out->horizon = 0;
    if (s != NULL && s->ms.has_cached) {
      uint64_t r = s->ms.cached.replay_after_wal_entry_position, l = s->ms.cached.wal_entry_position_last_seen;
      out->horizon = r < l ? r : l;
    }
    out->trimmed_gen = g->shards[i]->trimmed_gen;
    out->dirs_waiting = (uint32_t)g->shards[i]->n_dirs;
    out->manifest_first = g->shards[i]->mf_low;
    out->manifest_floor = g->shards[i]->mf_floor;
    return true;
  }
  return false;
}

void mw_gc_kick(mw_gc_t *g) {
  assert(g != NULL);
  if (g->job == J_NONE) rearm(g, 0);
}
