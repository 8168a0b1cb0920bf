/*
 * stats.c — see stats.h. One tick a second looks at every table: the
 * intervals come from each table's merged writer configuration (mw_table_config),
 * so a table's writer_config_defaults and the config file both apply.
 */
#include "daemon/stats.h"

#include <assert.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "shard/table.h"

static void on_tick(uv_timer_t *t);

int mw_daemon_stats_start(mw_daemon_stats_t *s, uv_loop_t *loop, mw_daemon_tables_t *dt,
                          mw_metrics_t *metrics) {
  assert(s != NULL);
  assert(loop != NULL);
  assert(dt != NULL);
  memset(s, 0, sizeof *s);
  s->loop = loop;
  s->dt = dt;
  static const char *const tl[1] = {"table"};
  if (metrics != NULL)
    s->disk = mw_metrics_register(metrics, MW_METRIC_GAUGE, "memwald_table_disk_bytes",
                                  "Bytes a table takes on the local disk (every file's blocks), "
                                  "measured every 30 s or stats_log_interval_ms.", tl, 1, NULL, 0);
  uint64_t now = uv_now(loop);
  for (size_t i = 0; i < MW_CONFIG_MAX_TABLES; i++) {
    s->per[i].last_stats_ms = s->per[i].last_bp_ms = now;
    s->per[i].last_disk_ms = now - MW_STATS_DISK_MS; /* the first walk at the first tick */
  }
  int rc = uv_timer_init(loop, &s->tick);
  if (rc < 0) return rc;
  s->tick.data = s;
  uv_unref((uv_handle_t *)&s->tick);
  return uv_timer_start(&s->tick, on_tick, MW_STATS_TICK_MS, MW_STATS_TICK_MS);
}

void mw_daemon_stats_stop(mw_daemon_stats_t *s) {
  assert(s != NULL);
  if (s->stopping) return;
  s->stopping = true;
  uv_close((uv_handle_t *)&s->tick, NULL);
}

/* ------------------------------------------------------------------- disk */

static __thread uint64_t walk_sum; /* one walk at a time, on one pool thread */

static int add_blocks(const char *path, const struct stat *st, int flag, struct FTW *f) {
  (void)path;
  (void)f;
  if (flag == FTW_F || flag == FTW_D || flag == FTW_DP) walk_sum += (uint64_t)st->st_blocks * 512;
  return 0;
}

static void walk(uv_work_t *w) {
  mw_daemon_stats_t *s = w->data;
  walk_sum = 0;
  if (nftw(s->walk_path, add_blocks, 32, FTW_PHYS) != 0)
    mw_log_debug("stats: %s: the disk walk stopped early", s->walk_path);
  s->walk_bytes = walk_sum;
}

static void walked(uv_work_t *w, int status) {
  mw_daemon_stats_t *s = w->data;
  assert(s->walking);
  s->walking = false;
  if (s->stopping || status != 0 || s->disk == NULL) return;
  const char *v[1] = {s->walk_name};
  mw_gauge_set(mw_metric_series(s->disk, v), (double)s->walk_bytes);
}

static void start_walk(mw_daemon_stats_t *s, const char *name, const char *uri) {
  if (s->walking || s->disk == NULL) return;
  const char *path = strncmp(uri, "file://", 7) == 0 ? uri + 7 : uri;
  if (strstr(path, "://") != NULL) return; /* not on the local disk */
  snprintf(s->walk_name, sizeof s->walk_name, "%s", name);
  snprintf(s->walk_path, sizeof s->walk_path, "%s", path);
  s->work.data = s;
  if (uv_queue_work(s->loop, &s->work, walk, walked) == 0) s->walking = true;
}

/* ------------------------------------------------------------------- logs */

static void report(const char *name, mw_table_t *t, mw_daemon_stats_table_t *p, uint64_t now,
                   bool stats_due, bool bp_due) {
  size_t by_state[MW_SS_FAILED + 1] = {0};
  int64_t mt_rows = 0, mt_bytes = 0;
  uint64_t frozen = 0, sstables = 0, acked = 0, wal = 0, flushes = 0;
  char waiting[512] = "";
  size_t w = 0, n_waiting = 0;
  size_t n_shards = mw_table_shard_count(t);
  for (size_t k = 0; k < n_shards; k++) {
    mw_table_shard_info_t ts;
    mw_table_shard_at(t, k, &ts);
    mw_shard_stats_t st;
    mw_shard_stats(ts.shard, &st);
    if ((unsigned)st.state <= MW_SS_FAILED) by_state[st.state]++;
    mt_rows += st.memtable_rows;
    mt_bytes += st.memtable_bytes;
    frozen += st.frozen;
    sstables += st.sstables;
    acked += st.rows_acked;
    wal += st.wal_entries;
    flushes += st.flushes;
    if (st.backpressured && w < sizeof waiting) {
      w += (size_t)snprintf(waiting + w, sizeof waiting - w, "%s%s (%" PRId64 " MiB in MemTables)",
                            n_waiting ? ", " : "", ts.key, (st.memtable_bytes >> 20));
      n_waiting++;
    }
  }
  if (bp_due && n_waiting > 0) {
    mw_log_warn("table %s: writes of %zu shard(s) wait on backpressure (max_unflushed_memtable_bytes "
                "= %" PRIu64 "): %s", name, n_waiting, mw_table_config(t)->max_unflushed_memtable_bytes, waiting);
    p->last_bp_ms = now;
  }
  if (!stats_due) return;
  char states[256];
  size_t sw = 0;
  for (int st = 0; st <= MW_SS_FAILED && sw < sizeof states; st++)
    if (by_state[st])
      sw += (size_t)snprintf(states + sw, sizeof states - sw, "%s%zu %s", sw ? ", " : "", by_state[st],
                             mw_shard_state_name((mw_shard_state_t)st));
  mw_log_info("table %s: %zu shards (%s), memtable %" PRId64 " rows %.1f MiB, %" PRIu64 " frozen, %" PRIu64
              " SSTables, %" PRIu64 " rows acked (+%" PRIu64 "), %" PRIu64 " WAL entries, %" PRIu64 " flushes",
              name, n_shards, sw ? states : "none open", mt_rows, (double)mt_bytes / (1 << 20), frozen,
              sstables, acked, acked - (acked >= p->rows_acked_then ? p->rows_acked_then : acked), wal, flushes);
  p->rows_acked_then = acked;
  p->last_stats_ms = now;
}

static void on_tick(uv_timer_t *h) {
  mw_daemon_stats_t *s = h->data;
  if (s->stopping) return;
  uint64_t now = uv_now(s->loop);
  mw_fe_tables_t *fe = &s->dt->fe;
  for (size_t i = 0; i < mw_fe_tables_count(fe) && i < MW_CONFIG_MAX_TABLES; i++) {
    mw_table_t *t = mw_fe_tables_live(fe, i);
    if (t == NULL) continue;
    mw_daemon_stats_table_t *p = &s->per[i];
    const mw_shard_config_t *cfg = mw_table_config(t);
    uint64_t si = cfg->stats_log_interval_ms, bi = cfg->backpressure_log_interval_ms;
    bool stats_due = si > 0 && now - p->last_stats_ms >= si;
    bool bp_due = bi > 0 && now - p->last_bp_ms >= bi;
    if (stats_due || bp_due) report(mw_fe_tables_name(fe, i), t, p, now, stats_due, bp_due);
    uint64_t di = si > 0 && si < MW_STATS_DISK_MS ? si : MW_STATS_DISK_MS;
    if (now - p->last_disk_ms >= di && !s->walking) {
      p->last_disk_ms = now;
      start_walk(s, mw_fe_tables_name(fe, i), mw_table_path(t));
    }
  }
}
