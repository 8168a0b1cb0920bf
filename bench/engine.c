/*
 * engine.c — ingest through the shard engine on scratch copies of a vector
 * table (unsharded-small without its _mem_wal/), with LanceDB's own shard
 * writer as the peer in the same run. A benchmark, run by hand, not a test.
 *
 *   build/bench/bench_engine [--vectors DIR] [--no-fsync] [--window SCALE]
 *                            [--no-peer] [--seconds S] [--replay-mb M]
 *                            [--parts 1234] [--no-readback]
 *
 * --parts runs only the listed parts (digits; default all four).
 * --no-readback: flushes publish without reading their files back first
 * (lance/readback.h; the daemon always does), to measure what it costs:
 * run the same parts with and without it (part 4's flush line, part 3's
 * acks during flushes).
 *
 * Parts (rows of the vectors' schema: id int64 PK, name utf8, v float64,
 * vec fixed_size_list<float32, 8>, _tombstone; batches generated before
 * the clock starts):
 *   1. pipelined: windows of 256 / 64 / 8 outstanding writes of 1 / 100 /
 *      10 000 rows; rows/s, ack p50/p99 (submit -> durable callback).
 *   2. closed loop, one write at a time (the peer's discipline), fsync and
 *      no fsync, beside node ../shared/peer/bench-ingest.mjs (LanceDB 0.39.0
 *      mergeInsert, one call at a time; it never fsyncs) at
 *      max_wal_flush_interval_ms=1 and at its defaults (100 ms); ratios.
 *      The peer needs tests/interop/node_modules (linked into a scratch copy
 *      of the peer's scripts).
 *   3. open loop: 100 000 rows/s offered as 1 000 writes/s of 100 rows for
 *      --seconds (default 5); latency from the write's scheduled time to its
 *      ack (no coordinated omission), split by whether a flush was running
 *      when the write was submitted (default MemTable of 100 000 rows: one
 *      flush a second).
 *   4. replay: --replay-mb (default 256) of WAL written (no flush, aborted),
 *      then a fresh table handle claims the shard and replays it into one
 *      MemTable; WAL bytes on disk / (claim -> ACTIVE). The files are in the
 *      page cache (no way to drop it without root), so this is decode +
 *      insert speed, not disk speed.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <malloc.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "common/log.h"
#include "rows.h"
#include "shard/memtable.h"
#include "shard/table.h"

#ifndef MW_SOURCE_ROOT
#define MW_SOURCE_ROOT "."
#endif

typedef struct breq {
  mw_shard_write_t w;
  uint64_t t0;
  bool during_flush;
} breq_t;

static uint64_t *lat, *lat_flush;
static size_t n_lat, n_lat_flush, outstanding, failed;
static bool split_by_flush;
static bool no_readback; /* --no-readback */

static void on_write(mw_shard_write_t *w, int status, const char *reason) {
  breq_t *r = w->data;
  if (status != 0) {
    if (failed++ == 0) fprintf(stderr, "write failed: %s\n", reason ? reason : "?");
  }
  uint64_t d = uv_hrtime() - r->t0;
  if (split_by_flush && r->during_flush) lat_flush[n_lat_flush++] = d;
  else lat[n_lat++] = d;
  outstanding--;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static double pct_ms(uint64_t *v, size_t n, int p) {
  if (n == 0) return 0;
  size_t i = n * (size_t)p / 100;
  return (double)v[i < n ? i : n - 1] / 1e6;
}

typedef struct result {
  double rows_per_s, p50_ms, p99_ms;
  size_t writes;
} result_t;

/* Closed loop: keep `window` writes outstanding until `writes` are done or
 * max_s seconds have passed. */
static result_t run_case(uv_loop_t *loop, mw_shard_t *s, const mw_schema_t *schema, int64_t rows,
                         size_t writes, size_t window, double max_s, bool print) {
  er_model_t m;
  er_model_init(&m, 99, 1000000);
  mw_batch_t *bs = calloc(writes, sizeof *bs);
  breq_t *rq = calloc(window, sizeof *rq);
  lat = calloc(writes, sizeof *lat);
  for (size_t i = 0; i < writes; i++)
    if (er_batch(&m, schema, rows, 0.0, &bs[i]) < 0) exit(1);
  n_lat = failed = outstanding = 0;
  split_by_flush = false;
  mw_shard_stats_t st0, st1;
  mw_shard_stats(s, &st0);
  uint64_t t0 = uv_hrtime(), deadline = t0 + (uint64_t)(max_s * 1e9);
  size_t next = 0, slot = 0;
  uint64_t payload = 0; /* Lance's in-memory estimate of the rows written */
  while ((next < writes && uv_hrtime() < deadline) || outstanding > 0) {
    while (next < writes && outstanding < window && uv_hrtime() < deadline) {
      /* slots are reused round-robin; window bounds the outstanding ones */
      breq_t *r = &rq[slot];
      slot = (slot + 1) % window;
      r->w.data = r;
      r->t0 = uv_hrtime();
      int64_t bb = mw_batch_lance_bytes(&bs[next]); /* before the batch is moved in */
      int rc = mw_shard_write(s, &r->w, &bs[next], on_write);
      if (rc == -EAGAIN) break;
      payload += (uint64_t)bb;
      if (rc < 0) {
        fprintf(stderr, "write refused: %d\n", rc);
        exit(1);
      }
      next++;
      outstanding++;
    }
    uv_run(loop, UV_RUN_ONCE);
  }
  double secs = (double)(uv_hrtime() - t0) / 1e9;
  mw_shard_stats(s, &st1);
  qsort(lat, n_lat, sizeof *lat, cmp_u64);
  result_t res = {(double)rows * (double)next / secs, pct_ms(lat, n_lat, 50), pct_ms(lat, n_lat, 99), next};
  if (print)
    printf("  batch %6" PRId64 " rows, window %3zu: %9.0f rows/s  %7.1f MB/s  %7.0f writes/s  ack p50 %8.3f ms"
           "  p99 %8.3f ms  (%zu writes, %" PRIu64 " WAL entries, %" PRIu64 " flushes, %zu failed)\n",
           rows, window, res.rows_per_s, (double)payload / 1e6 / secs, (double)next / secs, res.p50_ms,
           res.p99_ms, next,
           st1.wal_entries - st0.wal_entries, st1.flushes - st0.flushes, failed);
  fflush(stdout);
  for (size_t i = 0; i < writes; i++) mw_batch_free(&bs[i]);
  free(bs);
  free(rq);
  free(lat);
  er_model_free(&m);
  return res;
}

/* ------------------------------------------------------------ table setup */

static int ctl_done;
static void on_ctl(mw_shard_t *s, int status, const char *reason, void *arg) {
  (void)s, (void)arg;
  if (status != 0) {
    fprintf(stderr, "control: %s\n", reason ? reason : "?");
    exit(1);
  }
  ctl_done = 1;
}
static int closed;
static void on_closed(mw_table_t *t) {
  (void)t;
  closed = 1;
}

static const char *vectors;
static char scratch[] = "/tmp/mw-bench-engine.XXXXXX";
static int n_tables;

static void sh(const char *cmd) {
  if (system(cmd) != 0) {
    fprintf(stderr, "failed: %s\n", cmd);
    exit(1);
  }
}

/* A fresh copy of the vector table, claimed. */
static mw_table_t *open_fresh(uv_loop_t *loop, char *path, size_t n, bool no_fsync, const char *const *keys,
                              const char *const *values, size_t n_cfg, mw_shard_t **out) {
  snprintf(path, n, "%s/t%d.lance", scratch, n_tables++);
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "cp -r '%s/unsharded-small/t.lance' '%s' && chmod -R u+w '%s' && rm -rf '%s/_mem_wal'",
           vectors, path, path, path);
  sh(cmd);
  mw_storage_config_t sc;
  mw_storage_config_init(&sc, NULL);
  sc.durable = !no_fsync;
  mw_table_opts_t o = {.storage = &sc, .config_keys = keys, .config_values = values, .n_config = n_cfg,
                       .skip_readback = no_readback};
  mw_table_t *t;
  mw_err_t err = {0};
  if (mw_table_open(loop, path, &o, &t, &err) < 0) {
    fprintf(stderr, "open: %s\n", err.msg);
    exit(1);
  }
  uint8_t id[16];
  mw_shard_uuid_unsharded(id);
  mw_shard_t *s = mw_table_shard(t, id, true);
  ctl_done = 0;
  if (mw_shard_claim(s, on_ctl, NULL) < 0) exit(1);
  while (!ctl_done) uv_run(loop, UV_RUN_ONCE);
  *out = s;
  return t;
}

static void finish(uv_loop_t *loop, mw_table_t *t, mw_shard_t *s, bool abort, const char *path) {
  ctl_done = 0;
  if ((abort ? mw_shard_abort(s, on_ctl, NULL) : mw_shard_release(s, on_ctl, NULL)) < 0) exit(1);
  while (!ctl_done) uv_run(loop, UV_RUN_ONCE);
  closed = 0;
  mw_table_close(t, on_closed);
  while (!closed) uv_run(loop, UV_RUN_ONCE);
  if (path) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    sh(cmd);
  }
}

/* ------------------------------------------------------------------ peer */

typedef struct peer {
  bool ok;
  double rows_per_s[3], p50[3], p99[3];
} peer_t;

static double json_num(const char *line, const char *key) {
  const char *p = strstr(line, key);
  return p ? strtod(p + strlen(key), NULL) : -1;
}

/* node bench-ingest.mjs for batches 1, 100, 10000; config "" = defaults. */
static peer_t run_peer(const char *config, double max_s) {
  peer_t r = {0};
  char cmd[4096];
  snprintf(cmd, sizeof cmd,
           "cd '%s/peer' && node bench-ingest.mjs --rows 200000 --batches 1,100,10000 --max-seconds %.0f "
           "--dir '%s/peer/tables' %s%s 2>/dev/null",
           scratch, max_s, scratch, config[0] ? "--config " : "", config);
  FILE *f = popen(cmd, "r");
  if (f == NULL) return r;
  char line[8192];
  int k = 0;
  while (k < 3 && fgets(line, sizeof line, f) != NULL) {
    if (strstr(line, "\"rows_per_s\"") == NULL) continue;
    r.rows_per_s[k] = json_num(line, "\"rows_per_s\":");
    r.p50[k] = json_num(line, "\"p50\":");
    r.p99[k] = json_num(line, "\"p99\":");
    k++;
  }
  r.ok = pclose(f) == 0 && k == 3;
  return r;
}

static bool peer_setup(void) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd,
           "mkdir -p '%s/peer' && cp '%s/../peer/bench-ingest.mjs' '%s/../peer/lib.mjs' '%s/peer/' && "
           "ln -s '%s/tests/interop/node_modules' '%s/peer/node_modules' && "
           "test -d '%s/peer/node_modules/@lancedb/lancedb' && command -v node >/dev/null",
           scratch, vectors, vectors, scratch, MW_SOURCE_ROOT, scratch, scratch);
  return system(cmd) == 0;
}

/* ------------------------------------------------------------- open loop */

static void open_loop(uv_loop_t *loop, bool no_fsync, double seconds) {
  char path[4096];
  mw_shard_t *s;
  mw_table_t *t = open_fresh(loop, path, sizeof path, no_fsync, NULL, NULL, 0, &s);
  const int64_t rows = 100;
  const double writes_per_s = 1000.0;
  size_t writes = (size_t)(seconds * writes_per_s);
  er_model_t m;
  er_model_init(&m, 7, 1000000);
  mw_batch_t *bs = calloc(writes, sizeof *bs);
  breq_t *rq = calloc(writes, sizeof *rq);
  lat = calloc(writes, sizeof *lat);
  lat_flush = calloc(writes, sizeof *lat_flush);
  for (size_t i = 0; i < writes; i++)
    if (er_batch(&m, mw_table_schema(t), rows, 0.0, &bs[i]) < 0) exit(1);
  n_lat = n_lat_flush = failed = outstanding = 0;
  split_by_flush = true;
  size_t refused = 0, next = 0;
  mw_shard_stats_t st0, st1;
  mw_shard_stats(s, &st0);
  uint64_t t0 = uv_hrtime();
  while (next < writes || outstanding > 0) {
    uint64_t now = uv_hrtime();
    /* submit every write whose scheduled time has come */
    while (next < writes && t0 + (uint64_t)((double)next * 1e9 / writes_per_s) <= now) {
      breq_t *r = &rq[next];
      r->w.data = r;
      r->t0 = t0 + (uint64_t)((double)next * 1e9 / writes_per_s);
      r->during_flush = s->flush.busy;
      int rc = mw_shard_write(s, &r->w, &bs[next], on_write);
      next++;
      if (rc < 0) refused++;
      else outstanding++;
    }
    uv_run(loop, next < writes ? UV_RUN_NOWAIT : UV_RUN_ONCE);
  }
  double secs = (double)(uv_hrtime() - t0) / 1e9;
  mw_shard_stats(s, &st1);
  qsort(lat, n_lat, sizeof *lat, cmp_u64);
  qsort(lat_flush, n_lat_flush, sizeof *lat_flush, cmp_u64);
  printf("  offered 100000 rows/s (1000 writes/s of 100 rows) for %.0f s: achieved %.0f rows/s, %zu refused, "
         "%zu failed, %" PRIu64 " flushes\n",
         seconds, (double)(writes - refused) * (double)rows / secs, refused, failed, st1.flushes - st0.flushes);
  printf("    ack (from scheduled time) idle:         p50 %8.3f ms  p99 %8.3f ms  (%zu writes)\n",
         pct_ms(lat, n_lat, 50), pct_ms(lat, n_lat, 99), n_lat);
  printf("    ack (from scheduled time) during flush: p50 %8.3f ms  p99 %8.3f ms  (%zu writes)\n",
         pct_ms(lat_flush, n_lat_flush, 50), pct_ms(lat_flush, n_lat_flush, 99), n_lat_flush);
  double idle99 = pct_ms(lat, n_lat, 99), flush99 = pct_ms(lat_flush, n_lat_flush, 99);
  printf("    issue 14: idle p99 <= 2 ms: %s; p99 during a flush <= 1.5x idle p99: %.2fx, %s\n",
         idle99 <= 2.0 ? "met" : "NOT met", idle99 > 0 ? flush99 / idle99 : 0,
         n_lat_flush > 0 && flush99 <= 1.5 * idle99 ? "met" : "NOT met");
  fflush(stdout);
  split_by_flush = false;
  for (size_t i = 0; i < writes; i++) mw_batch_free(&bs[i]);
  free(bs);
  free(rq);
  free(lat);
  free(lat_flush);
  er_model_free(&m);
  finish(loop, t, s, false, path);
}

/* ---------------------------------------------------------------- replay */

static uint64_t dir_bytes(const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL) return 0;
  uint64_t n = 0;
  struct dirent *e;
  char p[4600];
  struct stat sb;
  while ((e = readdir(d)) != NULL) {
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    if (e->d_name[0] != '.' && stat(p, &sb) == 0 && S_ISREG(sb.st_mode)) n += (uint64_t)sb.st_size;
  }
  closedir(d);
  return n;
}

/* CPU seconds of the whole process (every thread, io_uring's workers too). */
static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static void replay(uv_loop_t *loop, uint64_t mb) {
  /* one MemTable for the whole WAL: no size, row, batch or age bound may
   * freeze it (on a loaded machine writing the WAL takes longer than the
   * default 10 s age bound, and a flush would move replay_after) */
  static const char *const keys[] = {"max_memtable_rows", "max_memtable_size", "max_memtable_batches",
                                     "max_unflushed_memtable_bytes", "max_memtable_age_ms"};
  static const char *const vals[] = {"1000000000", "100000000000", "100000000", "200000000000", "0"};
  char path[4096];
  mw_shard_t *s;
  mw_table_t *t = open_fresh(loop, path, sizeof path, true, keys, vals, 5, &s);
  char wal[4200];
  snprintf(wal, sizeof wal, "%s/_mem_wal/%s/wal", path, s->id_str);
  er_model_t m;
  er_model_init(&m, 5, 200000); /* the model holds one row per key: keep it small */
  breq_t rq[4];
  n_lat = failed = outstanding = 0;
  size_t writes = (size_t)(mb * 1000000 / 700000) + 1; /* ~0.7 MB per 10 000-row write */
  lat = calloc(writes, sizeof *lat);
  uint64_t w0 = uv_hrtime();
  for (size_t i = 0; i < writes; i++) {
    while (outstanding >= 4) uv_run(loop, UV_RUN_ONCE);
    mw_batch_t b;
    if (er_batch(&m, mw_table_schema(t), 10000, 0.0, &b) < 0) exit(1);
    breq_t *r = &rq[i % 4];
    r->w.data = r;
    r->t0 = uv_hrtime();
    if (mw_shard_write(s, &r->w, &b, on_write) < 0) exit(1);
    outstanding++;
  }
  while (outstanding > 0) uv_run(loop, UV_RUN_ONCE);
  double wsecs = (double)(uv_hrtime() - w0) / 1e9;
  mw_shard_stats_t st;
  mw_shard_stats(s, &st);
  finish(loop, t, s, true, NULL); /* abort: everything stays in the WAL */
  free(lat);
  er_model_free(&m);
  uint64_t bytes = dir_bytes(wal);

  mw_storage_config_t sc;
  mw_storage_config_init(&sc, NULL);
  sc.durable = false;
  mw_table_opts_t o = {.storage = &sc, .config_keys = keys, .config_values = vals, .n_config = 5,
                       .skip_readback = no_readback};
  mw_err_t err = {0};
  if (mw_table_open(loop, path, &o, &t, &err) < 0) exit(1);
  uint8_t id[16];
  mw_shard_uuid_unsharded(id);
  s = mw_table_shard(t, id, true);
  ctl_done = 0;
  size_t heap0 = mallinfo2().uordblks;
  uint64_t r0 = uv_hrtime();
  double c0 = cpu_s();
  if (mw_shard_claim(s, on_ctl, NULL) < 0) exit(1);
  while (!ctl_done) uv_run(loop, UV_RUN_ONCE);
  double rsecs = (double)(uv_hrtime() - r0) / 1e9, rcpu = cpu_s() - c0;
  mw_shard_stats_t st2;
  mw_shard_stats(s, &st2);
  size_t heap1 = mallinfo2().uordblks;
  printf("  WAL of %.1f MB (%" PRIu64 " entries, %zu writes of 10000 rows) written in %.2f s\n", (double)bytes / 1e6,
         st.wal_entries, writes, wsecs);
  printf("  replay (claim -> ACTIVE, %" PRId64 " rows into one MemTable): %.2f s = %.0f MB/s, %.0f rows/s; "
         "CPU %.2f s (all threads) = %.0f MB per CPU-second\n",
         st2.memtable_rows, rsecs, (double)bytes / 1e6 / rsecs, (double)st2.memtable_rows / rsecs, rcpu,
         rcpu > 0 ? (double)bytes / 1e6 / rcpu : 0);
  /* memory: heap in use for the MemTable against the rows' Arrow size
   * (Lance's in_memory_bytes is the Arrow slice payload) */
  double rows = (double)st2.memtable_rows, arrow = (double)st2.memtable_bytes;
  double held = (double)mw_memtable_heap_bytes(&s->active->m);
  printf("  MemTable memory: %.1f B/row held (buffers and structs) for %.1f B/row of Arrow data = %.2fx; "
         "process heap +%.1f B/row during the replay\n", held / rows, arrow / rows, held / arrow,
         (double)(heap1 - heap0) / rows);
  printf("  issue 14: replay >= 1 GB/s: %s (%.0f MB/s); MemTable <= 1.3x the Arrow size: %s (%.2fx)\n",
         (double)bytes / 1e6 / rsecs >= 1000 ? "met" : "NOT met", (double)bytes / 1e6 / rsecs,
         held <= 1.3 * arrow ? "met" : "NOT met", held / arrow);
  fflush(stdout);
  /* flush speed: that MemTable to one SSTable (build, puts, manifest commit) */
  uint64_t mt_bytes = (uint64_t)st2.memtable_bytes;
  ctl_done = 0;
  uint64_t f0 = uv_hrtime();
  double fc0 = cpu_s();
  if (mw_shard_flush(s, on_ctl, NULL) < 0) exit(1);
  while (!ctl_done) uv_run(loop, UV_RUN_ONCE);
  double fsecs = (double)(uv_hrtime() - f0) / 1e9, fcpu = cpu_s() - fc0;
  printf("  flush (one SSTable of %" PRId64 " rows, %.1f MB in memory, no fsync, read-back %s): %.2f s = %.0f MB/s, "
         "%.0f rows/s; CPU %.2f s (all threads) = %.0f MB per CPU-second\n", st2.memtable_rows,
         (double)mt_bytes / 1e6, no_readback ? "off" : "on", fsecs, (double)mt_bytes / 1e6 / fsecs,
         (double)st2.memtable_rows / fsecs, fcpu, fcpu > 0 ? (double)mt_bytes / 1e6 / fcpu : 0);
  fflush(stdout);
  finish(loop, t, s, true, path);
}

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv) {
  vectors = getenv("MW_VECTORS");
  bool no_fsync = false, peer = true;
  size_t window_scale = 1;
  double seconds = 5;
  uint64_t replay_mb = 256;
  const char *parts = "1234";
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--vectors") == 0 && i + 1 < argc) vectors = argv[++i];
    else if (strcmp(argv[i], "--no-fsync") == 0) no_fsync = true;
    else if (strcmp(argv[i], "--no-peer") == 0) peer = false;
    else if (strcmp(argv[i], "--window") == 0 && i + 1 < argc) window_scale = strtoul(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) seconds = strtod(argv[++i], NULL);
    else if (strcmp(argv[i], "--replay-mb") == 0 && i + 1 < argc) replay_mb = strtoull(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--parts") == 0 && i + 1 < argc) parts = argv[++i];
    else if (strcmp(argv[i], "--no-readback") == 0) no_readback = true;
    else {
      fprintf(stderr, "usage: bench_engine [--vectors DIR] [--no-fsync] [--window SCALE] [--no-peer] "
                      "[--seconds S] [--replay-mb M] [--parts 1234] [--no-readback]\n");
      return 2;
    }
  }
  if (vectors == NULL) vectors = MW_SOURCE_ROOT "/../shared/vectors";
  mw_log_init();
  mw_log_set_level(MW_LOG_WARN);
  if (mkdtemp(scratch) == NULL) return 1;
  uv_loop_t loop;
  uv_loop_init(&loop);
  char path[4096];
  mw_shard_t *s;
  mw_table_t *t;

  if (strchr(parts, '1')) {
    t = open_fresh(&loop, path, sizeof path, no_fsync, NULL, NULL, 0, &s);
    printf("1. memwald engine, pipelined ingest (%s, storage %s, group commit %u ms, %u entries in flight)\n",
           no_fsync ? "NO fsync" : "fsync", mw_storage_backend_name(mw_table_storage(t)), mw_table_config(t)->max_wal_flush_interval_ms,
           mw_table_config(t)->max_wal_inflight);
    run_case(&loop, s, mw_table_schema(t), 1, 20000, 256 * window_scale, 1e9, true);
    run_case(&loop, s, mw_table_schema(t), 100, 3000, 64 * window_scale, 1e9, true);
    run_case(&loop, s, mw_table_schema(t), 10000, 60, 8 * window_scale, 1e9, true);
    finish(&loop, t, s, false, path);
  }

  if (strchr(parts, '2')) {
    printf("2. one write at a time (closed loop, as the peer), at most %.0f s or 200000 rows per case\n", seconds);
    static const int64_t batch[3] = {1, 100, 10000};
    result_t ours[2][3];
    for (int f = 0; f < 2; f++) {
      t = open_fresh(&loop, path, sizeof path, f == 1, NULL, NULL, 0, &s);
      printf("  memwald, %s:\n", f ? "no fsync" : "fsync");
      for (int k = 0; k < 3; k++)
        ours[f][k] = run_case(&loop, s, mw_table_schema(t), batch[k], (size_t)(200000 / batch[k]), 1, seconds, true);
      finish(&loop, t, s, false, path);
    }
    if (peer && peer_setup()) {
      static const char *const cfgs[2] = {"max_wal_flush_interval_ms=1", ""};
      for (int c = 0; c < 2; c++) {
        peer_t p = run_peer(cfgs[c], seconds);
        printf("  peer: LanceDB 0.39.0 bench-ingest.mjs, %s (never fsyncs):\n",
               c == 0 ? "max_wal_flush_interval_ms=1" : "its defaults (flush interval 100 ms)");
        if (!p.ok) {
          printf("    (peer failed)\n");
          continue;
        }
        for (int k = 0; k < 3; k++)
          printf("    batch %6" PRId64 ": %9.0f rows/s  call p50 %8.3f ms  p99 %8.3f ms   memwald/peer rows/s: "
                 "%.2fx (fsync), %.2fx (no fsync)\n",
                 batch[k], p.rows_per_s[k], p.p50[k], p.p99[k], ours[0][k].rows_per_s / p.rows_per_s[k],
                 ours[1][k].rows_per_s / p.rows_per_s[k]);
        fflush(stdout);
      }
    } else if (peer) {
      printf("  peer: skipped (node or tests/interop/node_modules missing)\n");
    }
  }

  if (strchr(parts, '3')) {
    printf("3. open loop (%s)\n", no_fsync ? "NO fsync" : "fsync");
    open_loop(&loop, no_fsync, seconds);
  }

  if (strchr(parts, '4')) {
    printf("4. replay speed\n");
    replay(&loop, replay_mb);
  }

  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch);
  return system(cmd) == 0 ? 0 : 1;
}
