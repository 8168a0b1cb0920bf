/*
 * engine_tool.c — writes rows into a copy of a vector table THROUGH THE
 * ENGINE (table router, shard claim + replay, group commit, flush on
 * release) and prints the model of what it wrote, for tests/interop/run.sh:
 *
 *   engine_tool model TABLE --scenario NAME --model-out FILE [--seed N]
 *
 * run.sh then has LanceDB 0.39.0 read the table (check.mjs) and compares it
 * with the vector's expected.jsonl overlaid by the model. Scenarios:
 *   small   1000 rows in 50-row writes, 10% deletes, keys 0..599
 *   freeze  3000 rows in 30-row writes with max_memtable_rows = 400, so one
 *           run publishes several SSTables per shard; 5% deletes
 *   zstd    like small with wal_compression = zstd
 *   abort, abort-freeze, abort-zstd   like small / freeze / zstd, but the shards are aborted
 *           (no final flush): the last rows stay in the WAL only, for
 *           lance_replay.sh (LanceDB itself replays them)
 *   abort-arrow   like abort, each batch sent as an ARROW frame (columns in
 *           another order and body buffers 8-byte aligned as pyarrow and
 *           apache-arrow write them every other write, _tombstone left out when the
 *           batch deletes nothing) decoded by mw_arrowframe_decode, so the
 *           WAL entries carry the frames' record batches as they came; the
 *           tool fails unless every write went through that way
 *   compact, compact-freeze   like small / freeze, then every shard is
 *           flushed and compacted into the base table (`memwalctl compact`:
 *           mw_table_compact), Lance's own SSTables of the vector included;
 *           run.sh then also checks LanceDB's plain (base-only) query and
 *           countRows()
 *   compact-bg   like freeze with background compaction after every 2
 *           SSTables, racing the flushes, then a final compaction
 *   compact-gc   like compact-bg with GC at once (gc_grace_ms = 0, a tick
 *           every 50 ms); after the final compaction the tool waits until
 *           GC has unlisted every compacted SSTable, deleted their
 *           directories and every WAL entry below each shard's horizon, and
 *           fails unless it deleted some of each: LanceDB then reads a table
 *           GC has been through
 *   compact-history   unsharded, 15 flushes, compaction after every 2
 *           SSTables, GC with history retention 0 and 4 shard-manifest
 *           versions kept: waits until GC has also deleted old base versions
 *           (with the files only they reference) and old shard manifests;
 *           then reopens the table with the default retention (1 h) and
 *           writes, flushes and compacts once more, so that two versions
 *           are retained: run.sh has LanceDB check out and read each
 *   compact-history-lancedb   the same with a 1 s retention while a LanceDB
 *           writer appends to the base table (run.sh starts
 *           append_base.mjs beside the tool): every append commits, and
 *           LanceDB reads the model plus the appended rows
 */
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "rows.h"
#include "lance/ipc.h"
#include "net/arrowframe.h"
#include "shard/table_int.h" /* white-box: the tests read the table's fields */

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("engine_tool: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

typedef struct scen {
  const char *name;
  int64_t rows, batch;
  double tomb;
  const char *keys[8], *values[8];
  size_t n_cfg;
  bool abort;   /* leave the rows in the WAL: no flush at the end */
  bool compact; /* flush and compact everything before the release */
  bool gc_wait; /* then wait for GC to collect everything compaction freed */
  int history;  /* and old base versions and shard manifests (1: all but the newest); then one more round */
  bool arrow;   /* every batch travels as an ARROW frame (mw_arrowframe_decode) */
} scen_t;

static const scen_t scens[] = {
    {"small", 1000, 50, 0.10, {NULL}, {NULL}, 0},
    {"freeze", 3000, 30, 0.05, {"max_memtable_rows"}, {"400"}, 1},
    {"zstd", 1000, 50, 0.10, {"wal_compression"}, {"zstd"}, 1},
    /* for lance_replay.sh: LanceDB must replay our WAL entries */
    {"abort", 1000, 50, 0.10, {NULL}, {NULL}, 0, true},
    {"abort-freeze", 3000, 30, 0.05, {"max_memtable_rows"}, {"400"}, 1, true},
    /* LanceDB must replay zstd-compressed WAL entries (Arrow BodyCompression) */
    {"abort-zstd", 1000, 50, 0.10, {"wal_compression"}, {"zstd"}, 1, true},
    /* every write an ARROW frame whose record batches go into the WAL as
     * they came (pass-through): LanceDB must replay those entries */
    {"abort-arrow", 1000, 50, 0.10, {NULL}, {NULL}, 0, true, .arrow = true},
    /* compaction into the base table (a request, as memwalctl compact) */
    /* (a week of base history kept: inspect's verify-compacted needs the
     * vector's own versions, made long ago, beside the compaction's) */
    {"compact", 1000, 50, 0.10, {"compaction", "gc_history_retention_ms"}, {"off", "604800000"}, 2, false, true},
    {"compact-freeze", 3000, 30, 0.05, {"max_memtable_rows", "compaction"}, {"400", "off"}, 2, false, true},
    {"compact-bg", 3000, 30, 0.05, {"max_memtable_rows", "compaction_min_sstables"}, {"400", "2"}, 2, false,
     true},
    {"compact-gc", 3000, 30, 0.05, {"max_memtable_rows", "compaction_min_sstables", "gc_grace_ms", "gc_interval_ms"},
     {"400", "2", "0", "50"}, 4, false, true, true},
    {"compact-history", 3000, 30, 0.05,
     {"max_memtable_rows", "compaction_min_sstables", "gc_grace_ms", "gc_interval_ms", "gc_manifest_keep_versions",
      "gc_manifest_grace_ms", "gc_history_retention_ms", "gc_history_interval_ms"},
     {"200", "2", "0", "20", "4", "0", "0", "50"}, 8, false, true, true, 1},
    {"compact-history-lancedb", 3000, 30, 0.05,
     {"max_memtable_rows", "compaction_min_sstables", "gc_grace_ms", "gc_interval_ms", "gc_manifest_keep_versions",
      "gc_manifest_grace_ms", "gc_history_retention_ms", "gc_history_interval_ms"},
     {"200", "2", "0", "20", "4", "0", "1000", "50"}, 8, false, true, true, 2},
};

/* GC has collected everything compaction freed, in every shard, by GC's own
 * account: its trim of every compacted generation has answered (the cached
 * manifest alone says little: a trim's manifest is cached when its put
 * lands, before the version-hint PUT and the answer; gc.c records the
 * directories before the commit so they count as waiting meanwhile, but the
 * wait asks for the answer too), those directories are deleted, and so is
 * the WAL below the horizon. */
static bool gc_caught_up(mw_table_t *t) {
  for (size_t i = 0; i < t->n_shards; i++) {
    mw_table_shard_t *ts = t->shards[i];
    mw_compact_shard_t cs = {0};
    mw_gc_shard_stats_t gs = {0};
    if (!mw_compact_shard_state(t->compact, ts->id, &cs) || !mw_gc_shard_stats(t->gc, ts->id, &gs)) return false;
    if (gs.trimmed_gen < cs.compacted_gen) return false;
    const mw_shard_manifest_t *m = &ts->shard.ms.cached;
    for (size_t k = 0; k < m->n_sstables; k++)
      if (m->sstables[k].generation <= cs.compacted_gen) return false;
    if (gs.dirs_waiting > 0 || gs.wal_first < gs.horizon) return false;
  }
  return true;
}

static int history_wait;
static uint64_t history_runs_before; /* base history runs finished when the last compaction committed */
/* ... and the history: old base versions and shard manifests are gone. The
 * base counts are those of a history run that started after the last
 * compaction's commit (the second run finished since then), not of one that
 * listed the versions before it. */
static bool history_caught_up(mw_table_t *t) {
  mw_gc_stats_t g;
  mw_gc_stats(t->gc, &g);
  if (g.base_runs < history_runs_before + 2) return false;
  if (g.base_versions_deleted == 0 || g.manifests_deleted == 0) return false;
  if (history_wait == 1 && g.base_versions_retained != 1) return false;
  /* with a LanceDB appender: until GC has deleted versions its appends made
   * (the vector brings 3, our compactions a few) */
  if (history_wait == 2 && g.base_versions_deleted < 12) return false;
  for (size_t i = 0; i < t->n_shards; i++) {
    mw_gc_shard_stats_t gs = {0};
    if (!mw_gc_shard_stats(t->gc, t->shards[i]->id, &gs) || gs.manifest_floor != 0) return false;
  }
  return true;
}

static bool gc_done;
static void on_gc_poll(uv_timer_t *tm) {
  if (!gc_caught_up(tm->data) || (history_wait && !history_caught_up(tm->data))) return;
  gc_done = true;
  uv_timer_stop(tm);
}

/* The batch as an ARROW frame (fields reversed when `reverse`, _tombstone
 * left out when no row is a delete), decoded the way the daemon does:
 * *b becomes the decoded batch, with its pass-through messages. */
static void via_arrow(const mw_schema_t *ts, mw_batch_t *b, bool reverse) {
  mw_schema_t fs;
  mw_schema_init(&fs);
  if (mw_schema_copy(&fs, ts) < 0) die("schema copy");
  int tomb = mw_schema_find(ts, "_tombstone");
  bool deletes = false;
  for (int64_t r = 0; tomb >= 0 && r < b->n_rows; r++)
    deletes |= mw_bit_get(b->cols[tomb].values.data, r);
  /* a permutation of the fields: the frame's first, a left-out _tombstone last */
  size_t n = ts->n_fields, k = 0, order[MW_MAX_FIELDS];
  for (size_t i = 0; i < n; i++) {
    size_t j = reverse ? n - 1 - i : i;
    if ((int)j != tomb || deletes) order[k++] = j;
  }
  size_t sent = k;
  if (sent < n) order[k++] = (size_t)tomb;
  mw_field_t tmp[MW_MAX_FIELDS];
  mw_column_t cols[MW_MAX_FIELDS];
  for (size_t i = 0; i < n; i++) tmp[i] = fs.fields[order[i]], cols[i] = b->cols[order[i]];
  memcpy(fs.fields, tmp, n * sizeof *tmp);
  mw_schema_t view = {.fields = fs.fields, .n_fields = sent};
  mw_batch_t fb = {.schema = &view, .n_rows = b->n_rows, .cols = cols};
  const mw_batch_t *fbp = &fb;
  mw_buf_t frame = MW_BUF_INIT;
  mw_err_t err = {0};
  mw_ipc_opts_t eo = {.body_align_bytes = reverse ? 8 : 64}; /* pyarrow's, arrow-rs's */
  if (mw_ipc_encode(&view, &fbp, 1, &eo, &frame, &err) < 0) die("frame: %s", err.msg);
  mw_schema_free(&fs);
  mw_batch_t out;
  if (mw_batch_init(&out, ts) < 0) die("batch");
  mw_lp_code_t code;
  if (mw_arrowframe_decode(frame.data, frame.len, ts, NULL, &out, &code, &err) < 0)
    die("arrow frame refused: %s", err.msg);
  if (out.wal_ipc.len == 0) die("a frame of the table's columns did not pass through");
  mw_buf_free(&frame);
  mw_batch_free(b);
  *b = out;
}

static int pending, failures;
static void on_write(mw_table_write_t *w, int status, const char *reason) {
  if (status != 0) {
    fprintf(stderr, "engine_tool: write failed: %s\n", reason ? reason : "?");
    failures++;
  }
  free(w);
  pending--;
}

static int ctl_left;
static void on_ctl(mw_shard_t *s, int status, const char *reason, void *arg) {
  (void)arg;
  if (status != 0) die("shard %s: %s", s->id_str, reason ? reason : "?");
  ctl_left--;
}

static int compacted = 1;
static void on_compacted(void *arg, int status, const char *reason) {
  (void)arg;
  if (status != 0) die("compaction: %s", reason ? reason : "?");
  compacted = 0;
}

static bool closed;
static void on_closed(mw_table_t *t) {
  (void)t;
  closed = true;
}

int main(int argc, char **argv) {
  if (argc < 3 || strcmp(argv[1], "model") != 0)
    die("usage: engine_tool model TABLE --scenario NAME --model-out FILE [--seed N]");
  er_deadline("engine_tool", 120);
  const char *table = argv[2], *scen_name = NULL, *out = NULL;
  uint64_t seed = 1;
  for (int i = 3; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--scenario") == 0) scen_name = argv[i + 1];
    else if (strcmp(argv[i], "--model-out") == 0) out = argv[i + 1];
    else if (strcmp(argv[i], "--seed") == 0) seed = strtoull(argv[i + 1], NULL, 10);
    else die("unknown option %s", argv[i]);
  }
  const scen_t *sc = NULL;
  for (size_t i = 0; i < sizeof scens / sizeof *scens; i++)
    if (scen_name && strcmp(scens[i].name, scen_name) == 0) sc = &scens[i];
  if (sc == NULL || out == NULL) die("need --scenario (small|freeze|zstd) and --model-out");
  mw_log_init();
  mw_log_set_level(MW_LOG_NOTICE);

  uv_loop_t loop;
  uv_loop_init(&loop);
  mw_storage_config_t stc;
  mw_storage_config_init(&stc, NULL);
  stc.durable = false;
  mw_table_opts_t o = {.config_keys = sc->keys, .config_values = sc->values, .n_config = sc->n_cfg,
                       .storage = &stc};
  mw_table_t *t;
  mw_err_t err = {0};
  if (mw_table_open(&loop, table, &o, &t, &err) < 0) die("open: %s", err.msg);

  er_model_t m;
  er_model_init(&m, seed, 600);
  for (int64_t done = 0; done < sc->rows; done += sc->batch) {
    mw_batch_t b;
    if (er_batch(&m, &t->schema, sc->batch, sc->tomb, &b) < 0) die("batch");
    if (sc->arrow) via_arrow(&t->schema, &b, (done / sc->batch) % 2 == 1);
    mw_table_write_t *w = calloc(1, sizeof *w);
    err = (mw_err_t){0};
    if (mw_table_write(t, w, &b, on_write, &err) < 0) die("write: %s", err.msg);
    pending++;
    /* let some writes overlap, others wait */
    if ((done / sc->batch) % 4 == 3) uv_run(&loop, UV_RUN_NOWAIT);
  }
  while (pending > 0) uv_run(&loop, UV_RUN_ONCE);
  if (failures) die("%d writes failed", failures);

  if (sc->compact) {
    for (size_t i = 0; i < t->n_shards; i++) {
      ctl_left++;
      if (mw_shard_flush(&t->shards[i]->shard, on_ctl, NULL) < 0) die("flush");
    }
    while (ctl_left > 0) uv_run(&loop, UV_RUN_ONCE);
    if (mw_table_compact(t, on_compacted, NULL) < 0) die("compact refused");
    while (compacted) uv_run(&loop, UV_RUN_ONCE);
    mw_compact_stats_t cs;
    mw_compact_stats(t->compact, &cs);
    fprintf(stderr, "engine_tool: compaction: %" PRIu64 " runs, %" PRIu64 " SSTables, %" PRIu64
            " rows in, %" PRIu64 " written, %" PRIu64 " base rows masked, base version %" PRIu64 "\n",
            cs.runs, cs.sstables, cs.rows_in, cs.rows_written, cs.rows_masked, cs.base_version);
    if (cs.runs == 0) die("no compaction run committed");
    mw_gc_stats_t gs;
    mw_gc_stats(t->gc, &gs);
    history_runs_before = gs.base_runs;
  }
  uv_timer_t tm; /* outlives its close: the loop finishes closing it later */
  history_wait = sc->history;
  if (sc->gc_wait) { /* polls GC's own state (it works on its timer): not a sleep */
    uv_timer_init(&loop, &tm);
    tm.data = t;
    uv_timer_start(&tm, on_gc_poll, 20, 20);
    while (!gc_done) uv_run(&loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&tm, NULL);
    mw_gc_stats_t gs;
    mw_gc_stats(t->gc, &gs);
    fprintf(stderr, "engine_tool: gc: %" PRIu64 " WAL entries deleted (%" PRIu64 " bytes), %" PRIu64
            " sentinels kept, %" PRIu64 " SSTables unlisted, %" PRIu64 " directories deleted\n",
            gs.wal_deleted, gs.wal_bytes_deleted, gs.sentinels_kept, gs.sstables_trimmed, gs.dirs_deleted);
    if (gs.wal_deleted == 0 || gs.sstables_trimmed == 0 || gs.dirs_deleted == 0)
      die("GC collected nothing of some kind");
    if (sc->history)
      fprintf(stderr, "engine_tool: gc history: %" PRIu64 " shard manifests, %" PRIu64 " base versions, %" PRIu64
              " base files (%" PRIu64 " bytes) deleted, %" PRIu64 " versions retained\n", gs.manifests_deleted,
              gs.base_versions_deleted, gs.base_files_deleted, gs.base_bytes_deleted, gs.base_versions_retained);
  }
  for (size_t i = 0; i < t->n_shards; i++) {
    mw_shard_t *s = &t->shards[i]->shard;
    mw_shard_stats_t st;
    mw_shard_stats(s, &st);
    fprintf(stderr, "engine_tool: shard %s epoch %" PRIu64 " rows %" PRIu64 " wal entries %" PRIu64
            " sstables %" PRIu64 " frozen %u, batches passed through %" PRIu64 " (%" PRIu64
            " entries written in place), encoded %" PRIu64 "\n",
            s->id_str, st.epoch, st.rows_acked, st.wal_entries, st.sstables, st.frozen,
            st.wal_batches_passed_through, s->wal.in_place, st.wal_batches_encoded);
    if (sc->arrow && (st.wal_batches_passed_through != (uint64_t)(sc->rows / sc->batch) ||
                      st.wal_batches_encoded != 0 || st.wal_bytes_passed_through == 0))
      die("shard %s: %" PRIu64 " of %" PRId64 " batches passed through, %" PRIu64 " encoded", s->id_str,
          st.wal_batches_passed_through, sc->rows / sc->batch, st.wal_batches_encoded);

    ctl_left++;
    if ((sc->abort ? mw_shard_abort(s, on_ctl, NULL) : mw_shard_release(s, on_ctl, NULL)) < 0)
      die("release %s", s->id_str);
  }
  while (ctl_left > 0) uv_run(&loop, UV_RUN_ONCE);
  if (mw_table_close(t, on_closed) < 0) die("close");
  while (!closed) uv_run(&loop, UV_RUN_ONCE);
  if (sc->history) { /* default retention: this round's version and the one before stay */
    const char *k2[] = {"compaction"}, *v2[] = {"off"};
    mw_table_opts_t o2 = {.config_keys = k2, .config_values = v2, .n_config = 1, .storage = &stc};
    if (mw_table_open(&loop, table, &o2, &t, &err) < 0) die("reopen: %s", err.msg);
    mw_batch_t b;
    if (er_batch(&m, &t->schema, 100, 0.1, &b) < 0) die("batch");
    mw_table_write_t *w = calloc(1, sizeof *w);
    if (mw_table_write(t, w, &b, on_write, &err) < 0) die("write: %s", err.msg);
    pending++;
    while (pending > 0) uv_run(&loop, UV_RUN_ONCE);
    if (failures) die("the last write failed");
    for (size_t i = 0; i < t->n_shards; i++) {
      ctl_left++;
      if (mw_shard_flush(&t->shards[i]->shard, on_ctl, NULL) < 0) die("flush");
    }
    while (ctl_left > 0) uv_run(&loop, UV_RUN_ONCE);
    compacted = 1;
    if (mw_table_compact(t, on_compacted, NULL) < 0) die("compact refused");
    while (compacted) uv_run(&loop, UV_RUN_ONCE);
    for (size_t i = 0; i < t->n_shards; i++) {
      ctl_left++;
      if (mw_shard_release(&t->shards[i]->shard, on_ctl, NULL) < 0) die("release");
    }
    while (ctl_left > 0) uv_run(&loop, UV_RUN_ONCE);
    closed = false;
    if (mw_table_close(t, on_closed) < 0) die("close");
    while (!closed) uv_run(&loop, UV_RUN_ONCE);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);

  FILE *f = fopen(out, "w");
  if (f == NULL || er_model_write(&m, f) < 0 || fclose(f) != 0) die("%s: write failed", out);
  er_model_free(&m);
  return 0;
}
