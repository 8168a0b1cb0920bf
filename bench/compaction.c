/*
 * bench_compaction — a long ingest with small MemTables through the engine,
 * with or without compaction and GC, for bench/compaction.py (which also
 * has LanceDB 0.39.0 read the tables and write the same rows once).
 *
 *   bench_compaction --dir DIR --flushes N [--rows-per-flush R] [--keys K]
 *                    [--compaction on|off] [--create] [--seed S]
 *                    [--sequential FIRST] [--runs] [--no-readback]
 *
 * DIR/t.lance: {id int64 pk, name utf8, v float64}, unsharded (created with
 * --create by our bootstrap). Each MemTable holds R rows (max_memtable_rows),
 * written in 25-row writes of upserts over K keys (10 % deletes), so N
 * flushes make N SSTables. With compaction on: the defaults, except
 * gc_grace_ms, gc_manifest_grace_ms, gc_history_retention_ms and
 * gc_history_interval_ms = 1000 so the run's end shows what GC leaves
 * (the history included); after the last
 * flush the tool waits for the policy to catch up (no run in progress, fewer
 * than 4 uncompacted SSTables; at most 20 s) before releasing. Storage
 * without fsync (this measures file counts, bytes and LanceDB's reads, not
 * durability). Prints one line per 500 flushes and, at the end:
 *
 *   result flushes=N rows=W seconds=T runs=C compacted_sstables=S
 *          live_sstables=L wal_files_deleted=D sentinels=X base_version=V
 *
 * Running again on the same DIR (without --create) continues the table:
 * bench/compaction.py measures LanceDB after 10 flushes, then continues.
 *
 * --sequential FIRST: keys FIRST, FIRST+1, ... in order, no deletes (grows
 * the base by every row: bench/compaction_scale.py builds big bases so).
 * --runs: one line per committed compaction run (its duration, the base
 * fragments it started from, SSTables and rows), for the scaling figures.
 * --compact-every N: after every N flushes, and at the end, a requested
 * compaction (as `memwalctl compact`), waited for: runs of N SSTables.
 * --no-readback: flushes and compactions publish without reading their
 * files back first (lance/readback.h; the daemon always does): run the
 * same command with and without it to see what the read-back costs; the
 * result line says readback=on|off and the process's CPU seconds.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "common/log.h"
#include "lance/route.h"
#include "lance/schema_text.h"
#include "lance/table_create.h"
#include "shard/table_int.h" /* white-box: reads compaction and GC state */

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("bench_compaction: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

static int mkdir_p(const char *path) {
  char buf[8192];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    mkdir(buf, 0755);
    *p = '/';
  }
  return mkdir(buf, 0755) == 0 || errno == EEXIST ? 0 : -errno;
}

static void create(const char *table) {
  mw_schema_t s;
  mw_shard_spec_t sp;
  mw_table_files_t files;
  mw_err_t err = {0};
  mw_schema_init(&s);
  if (mw_schema_text_parse("id:int64 not null, name:string, v:double", &s, &err) < 0 ||
      mw_schema_pk_text_apply(&s, "id", &err) < 0 || mw_shard_spec_text_parse("unsharded", &s, &sp, &err) < 0)
    die("schema: %s", err.msg);
  mw_table_create_params_t p = {.schema = &s, .spec = &sp};
  if (mw_table_create_encode(&p, &files, &err) < 0) die("create: %s", err.msg);
  for (size_t i = 0; i < files.n; i++) {
    char path[8192], dir[8192];
    snprintf(path, sizeof path, "%s/%s", table, files.files[i].path);
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = 0;
    if (mkdir_p(dir) < 0) die("mkdir %s", dir);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(files.files[i].bytes.data, 1, files.files[i].bytes.len, f) != files.files[i].bytes.len ||
        fclose(f) != 0)
      die("write %s", path);
  }
  mw_table_files_free(&files);
  mw_schema_free(&s);
}

static int pending, failures;
static void on_write(mw_table_write_t *w, int status, const char *reason) {
  if (status != 0) {
    fprintf(stderr, "bench_compaction: write failed: %s\n", reason ? reason : "?");
    failures++;
  }
  free(w);
  pending--;
}

static bool ctl_done;
static void on_ctl(mw_shard_t *s, int status, const char *reason, void *arg) {
  (void)s;
  (void)arg;
  if (status != 0) die("control: %s", reason ? reason : "?");
  ctl_done = true;
}

/* With compaction on, the state a reader meets once the daemon has been
 * idle for a few grace periods: no run in progress, fewer uncompacted
 * SSTables than would make one due (compaction_min_sstables, 4), and GC
 * caught up (every compacted SSTable unlisted and its directory deleted,
 * no WAL entry below the horizon but sentinels, shard manifests down to the
 * kept ones, base history down to 3 versions); or 30 s. */
static bool settled;
static mw_table_t *settle_t;
static uint64_t settle_t0, settle_ms;
static void on_settle(uv_timer_t *tm) {
  mw_compact_stats_t cs;
  mw_compact_shard_t css = {0};
  mw_gc_shard_stats_t gs = {0};
  uint8_t id[16];
  mw_shard_uuid_unsharded(id);
  mw_compact_stats(settle_t->compact, &cs);
  mw_compact_shard_state(settle_t->compact, id, &css);
  bool gc_known = mw_gc_shard_stats(settle_t->gc, id, &gs);
  mw_shard_t *s = mw_table_shard(settle_t, id, false);
  bool listed_compacted = false;
  for (size_t k = 0; s != NULL && k < s->ms.cached.n_sstables; k++)
    if (s->ms.cached.sstables[k].generation <= css.compacted_gen) listed_compacted = true;
  bool gc_done = gc_known && !listed_compacted && gs.dirs_waiting == 0 && gs.wal_first >= gs.horizon;
  mw_gc_stats_t g;
  mw_gc_stats(settle_t->gc, &g);
  uint64_t latest = s != NULL ? s->ms.cached.version : 0;
  gc_done = gc_done && gs.manifest_floor == 0 && latest < gs.manifest_first + 16 + MW_GC_MANIFEST_MIN_BATCH &&
            g.base_runs > 0 && g.base_versions_retained <= 3;
  settle_ms = uv_now(tm->loop) - settle_t0;
  if ((!cs.running && css.uncompacted < 4 && gc_done) || settle_ms > 30000) {
    settled = true;
    uv_timer_stop(tm);
  }
}

static bool compact_done;
static void on_compacted(void *arg, int status, const char *reason) {
  (void)arg;
  if (status != 0) die("compaction: %s", reason ? reason : "?");
  compact_done = true;
}

static void request_compaction(uv_loop_t *loop, mw_table_t *t) {
  compact_done = false;
  if (mw_table_compact(t, on_compacted, NULL) < 0) die("compaction refused");
  while (!compact_done) uv_run(loop, UV_RUN_ONCE);
}

/* --runs: a line for each run committed since the last call. */
static uint64_t runs_seen;
static void report_runs(mw_table_t *t) {
  mw_compact_stats_t cs;
  mw_compact_stats(t->compact, &cs);
  if (cs.runs == runs_seen) return;
  printf("run n=%" PRIu64 " ms=%" PRIu64 " base_fragments=%" PRIu64 " base_version=%" PRIu64 " sstables_total=%" PRIu64
         " rows_in_total=%" PRIu64 " keyindex_built=%" PRIu64 " folded_total=%" PRIu64 "\n", cs.runs, cs.last_run_ms,
         cs.base_fragments, cs.base_version, cs.sstables, cs.rows_in, cs.keyindex_built, cs.folded);
  fflush(stdout);
  runs_seen = cs.runs;
}

static bool closed;
static void on_closed(mw_table_t *t) {
  (void)t;
  closed = true;
}

/* CPU seconds of the whole process (every thread). */
static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static uint64_t rnd_state = 1;
static uint64_t rnd(void) {
  uint64_t z = (rnd_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

int main(int argc, char **argv) {
  const char *dir = NULL, *compaction = "on";
  uint64_t flushes = 0, rows_per_flush = 100, keys = 50000;
  bool do_create = false, print_runs = false, no_readback = false;
  int64_t seq = -1;
  uint64_t compact_every = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--create") == 0) do_create = true;
    else if (strcmp(argv[i], "--runs") == 0) print_runs = true;
    else if (strcmp(argv[i], "--no-readback") == 0) no_readback = true;
    else if (i + 1 < argc && strcmp(argv[i], "--sequential") == 0) seq = strtoll(argv[++i], NULL, 10);
    else if (i + 1 < argc && strcmp(argv[i], "--compact-every") == 0) compact_every = strtoull(argv[++i], NULL, 10);
    else if (i + 1 >= argc) die("%s needs a value", argv[i]);
    else if (strcmp(argv[i], "--dir") == 0) dir = argv[++i];
    else if (strcmp(argv[i], "--flushes") == 0) flushes = strtoull(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--rows-per-flush") == 0) rows_per_flush = strtoull(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--keys") == 0) keys = strtoull(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--compaction") == 0) compaction = argv[++i];
    else if (strcmp(argv[i], "--seed") == 0) rnd_state = strtoull(argv[++i], NULL, 10);
    else die("unknown option %s", argv[i]);
  }
  if (dir == NULL || flushes == 0 || rows_per_flush < 25 || keys == 0)
    die("usage: bench_compaction --dir DIR --flushes N [--rows-per-flush R>=25] [--keys K] "
        "[--compaction on|off] [--create] [--seed S]");
  bool on = strcmp(compaction, "on") == 0;
  char table[4096], rows_s[32];
  snprintf(table, sizeof table, "%s/t.lance", dir);
  if (do_create) create(table);
  mw_log_init();
  mw_log_set_level(MW_LOG_WARN);
  uv_loop_t loop;
  uv_loop_init(&loop);
  snprintf(rows_s, sizeof rows_s, "%" PRIu64, rows_per_flush);
  const char *k[] = {"max_memtable_rows", "compaction", "gc", "gc_grace_ms", "gc_manifest_grace_ms",
                     "gc_history_retention_ms", "gc_history_interval_ms"};
  const char *v[] = {rows_s, on ? "on" : "off", on ? "on" : "off", "1000", "1000", "1000", "1000"};
  mw_storage_config_t sc;
  mw_storage_config_init(&sc, NULL);
  sc.durable = false;
  mw_table_opts_t o = {.config_keys = k, .config_values = v, .n_config = 7, .storage = &sc,
                       .skip_readback = no_readback};
  mw_table_t *t;
  mw_err_t err = {0};
  if (mw_table_open(&loop, table, &o, &t, &err) < 0) die("open: %s", err.msg);
  uint8_t id[16];
  mw_shard_uuid_unsharded(id);
  uint64_t t0 = uv_hrtime(), written = 0, next_report = 500, target = flushes * rows_per_flush;
  uint64_t next_compact = compact_every;
  mw_shard_t *s = NULL;
  while (written < target) {
    if (s == NULL) s = mw_table_shard(t, id, false);
    if (s != NULL) {
      mw_shard_stats_t st;
      mw_shard_stats(s, &st);
      if (st.frozen > 0) { /* one MemTable of R rows per SSTable: wait for its flush */
        uv_run(&loop, UV_RUN_ONCE);
        continue;
      }
      if (compact_every > 0 && st.flushes >= next_compact) {
        request_compaction(&loop, t);
        next_compact = st.flushes + compact_every;
        if (print_runs) report_runs(t);
      }
      if (st.flushes >= next_report) {
        mw_compact_stats_t cs;
        mw_compact_stats(t->compact, &cs);
        fprintf(stderr, "bench_compaction: %" PRIu64 " flushes, %" PRIu64 " rows, %.1f s, %" PRIu64
                " compaction runs, %" PRIu64 " SSTables listed\n", st.flushes, written,
                (double)(uv_hrtime() - t0) / 1e9, cs.runs, st.sstables);
        next_report += 500;
      }
    }
    mw_batch_t b;
    if (mw_batch_init(&b, &t->schema) < 0) die("batch");
    for (int r = 0; r < 25; r++) {
      int64_t key = seq >= 0 ? seq + (int64_t)written : (int64_t)(rnd() % keys);
      bool tomb = seq < 0 && rnd() % 10 == 0;
      double val = (double)(rnd() >> 11) / 9007199254740992.0;
      char name[32];
      int n = snprintf(name, sizeof name, "n%" PRId64 "_%" PRIu64, key, written);
      mw_column_append_fixed(&b.cols[0], &key, 8);
      if (tomb) {
        mw_column_append_null(&b.cols[1], &t->schema.fields[1]);
        mw_column_append_null(&b.cols[2], &t->schema.fields[2]);
      } else {
        mw_column_append_bytes(&b.cols[1], name, (size_t)n);
        mw_column_append_fixed(&b.cols[2], &val, 8);
      }
      mw_column_append_bool(&b.cols[3], tomb);
      b.n_rows++;
      written++;
    }
    mw_table_write_t *w = calloc(1, sizeof *w);
    err = (mw_err_t){0};
    if (mw_table_write(t, w, &b, on_write, &err) < 0) die("write: %s", err.msg);
    pending++;
    while (pending > 4) uv_run(&loop, UV_RUN_ONCE);
    if (print_runs) report_runs(t);
  }
  while (pending > 0) uv_run(&loop, UV_RUN_ONCE);
  if (failures) die("%d writes failed", failures);
  if (compact_every > 0) { /* the rest: flush what the MemTable holds, then compact it */
    ctl_done = false;
    if (mw_shard_flush(s, on_ctl, NULL) < 0) die("flush");
    while (!ctl_done) uv_run(&loop, UV_RUN_ONCE);
    request_compaction(&loop, t);
    if (print_runs) report_runs(t);
  }
  double secs = (double)(uv_hrtime() - t0) / 1e9;
  uv_timer_t tm; /* outlives its close: the loop finishes closing it later */
  if (on) { /* let the policy settle (GC runs meanwhile): the state a reader meets */
    uv_timer_init(&loop, &tm);
    settle_t = t;
    settle_t0 = uv_now(&loop);
    uv_timer_start(&tm, on_settle, 50, 50);
    while (!settled) {
      uv_run(&loop, UV_RUN_ONCE);
      if (print_runs) report_runs(t);
    }
    uv_close((uv_handle_t *)&tm, NULL);
  }
  mw_shard_stats_t st;
  mw_shard_stats(s, &st);
  mw_compact_stats_t cs;
  mw_gc_stats_t gs;
  mw_compact_stats(t->compact, &cs);
  mw_gc_stats(t->gc, &gs);
  mw_compact_shard_t css = {0};
  mw_compact_shard_state(t->compact, id, &css);
  ctl_done = false;
  if (mw_shard_release(s, on_ctl, NULL) < 0) die("release");
  while (!ctl_done) uv_run(&loop, UV_RUN_ONCE);
  if (mw_table_close(t, on_closed) < 0) die("close");
  while (!closed) uv_run(&loop, UV_RUN_ONCE);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  printf("result flushes=%" PRIu64 " rows=%" PRIu64 " seconds=%.1f settle_ms=%" PRIu64 " runs=%" PRIu64 " compacted_sstables=%" PRIu64
         " listed_sstables=%" PRIu64 " uncompacted_sstables=%" PRIu64 " wal_files_deleted=%" PRIu64
         " sentinels=%" PRIu64 " folded=%" PRIu64 " base_version=%" PRIu64 " manifests_deleted=%" PRIu64
         " base_versions_deleted=%" PRIu64 " base_files_deleted=%" PRIu64 " base_bytes_deleted=%" PRIu64
         " run_ms_total=%" PRIu64 " keyindex_built=%" PRIu64 " readback=%s cpu_s=%.2f\n",
         st.flushes, written, secs, settle_ms, cs.runs, cs.sstables, st.sstables, on ? css.uncompacted : st.sstables,
         gs.wal_deleted, gs.sentinels_kept, cs.folded, cs.base_version, gs.manifests_deleted,
         gs.base_versions_deleted, gs.base_files_deleted, gs.base_bytes_deleted, cs.total_run_ms, cs.keyindex_built,
         no_readback ? "off" : "on", cpu_s());
  return 0;
}
