/*
 * engine.c — durable ingest through the shard engine (group commit, fsync on,
 * flushes as they come), on a scratch copy of a vector table.
 *
 *   build/bench/bench_engine [--vectors DIR] [--no-fsync] [--window N]
 *
 * For batches of 1, 100 and 10 000 rows (the vectors' schema: id int64 PK,
 * name utf8, v float64, vec fixed_size_list<float32, 8>, _tombstone) it keeps
 * a window of writes outstanding, and prints rows/s and the ack latency
 * (submit -> durable callback) p50/p99. Batches are generated before the
 * clock starts. A benchmark, run by hand, not a test.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "rows.h"
#include "shard/table.h"

#ifndef MW_SOURCE_ROOT
#define MW_SOURCE_ROOT "."
#endif

typedef struct breq {
  mw_shard_write_t w;
  uint64_t t0;
} breq_t;

static uint64_t *lat;
static size_t n_lat, outstanding, failed;

static void on_write(mw_shard_write_t *w, int status, const char *reason) {
  breq_t *r = w->data;
  if (status != 0) {
    if (failed++ == 0) fprintf(stderr, "write failed: %s\n", reason ? reason : "?");
  }
  lat[n_lat++] = uv_hrtime() - r->t0;
  outstanding--;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static void run_case(uv_loop_t *loop, mw_shard_t *s, const mw_schema_t *schema, int64_t rows,
                     size_t writes, size_t window) {
  er_model_t m;
  er_model_init(&m, 99, 1000000);
  mw_batch_t *bs = calloc(writes, sizeof *bs);
  breq_t *rq = calloc(window, sizeof *rq);
  lat = calloc(writes, sizeof *lat);
  for (size_t i = 0; i < writes; i++)
    if (er_batch(&m, schema, rows, 0.0, &bs[i]) < 0) exit(1);
  n_lat = failed = outstanding = 0;
  mw_shard_stats_t st0, st1;
  mw_shard_stats(s, &st0);
  uint64_t t0 = uv_hrtime();
  size_t next = 0, slot = 0;
  while (next < writes || outstanding > 0) {
    while (next < writes && outstanding < window) {
      /* slots are reused round-robin; window bounds the outstanding ones */
      breq_t *r = &rq[slot];
      slot = (slot + 1) % window;
      r->w.data = r;
      r->t0 = uv_hrtime();
      int rc = mw_shard_write(s, &r->w, &bs[next], on_write);
      if (rc == -EAGAIN) break;
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
  printf("batch %6" PRId64 " rows: %9.0f rows/s  %7.0f writes/s  ack p50 %7.3f ms  p99 %7.3f ms  "
         "(%zu writes, %" PRIu64 " WAL entries, %" PRIu64 " flushes, %zu failed)\n",
         rows, (double)rows * (double)writes / secs, (double)writes / secs,
         (double)lat[n_lat / 2] / 1e6, (double)lat[n_lat * 99 / 100] / 1e6, writes,
         st1.wal_entries - st0.wal_entries, st1.flushes - st0.flushes, failed);
  fflush(stdout);
  for (size_t i = 0; i < writes; i++) mw_batch_free(&bs[i]);
  free(bs);
  free(rq);
  free(lat);
  er_model_free(&m);
}

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

int main(int argc, char **argv) {
  const char *vectors = getenv("MW_VECTORS");
  bool no_fsync = false;
  size_t window_scale = 1;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--vectors") == 0 && i + 1 < argc) vectors = argv[++i];
    else if (strcmp(argv[i], "--no-fsync") == 0) no_fsync = true;
    else if (strcmp(argv[i], "--window") == 0 && i + 1 < argc) window_scale = strtoul(argv[++i], NULL, 10);
    else {
      fprintf(stderr, "usage: bench_engine [--vectors DIR] [--no-fsync] [--window SCALE]\n");
      return 2;
    }
  }
  if (vectors == NULL) vectors = MW_SOURCE_ROOT "/../shared/vectors";
  mw_log_init();
  mw_log_set_level(MW_LOG_WARN);
  char tmpl[] = "/tmp/mw-bench-engine.XXXXXX";
  if (mkdtemp(tmpl) == NULL) return 1;
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "cp -r '%s/unsharded-small/t.lance' '%s/t.lance' && chmod -R u+w '%s' && rm -rf '%s/t.lance/_mem_wal'",
           vectors, tmpl, tmpl, tmpl);
  if (system(cmd) != 0) return 1;
  snprintf(cmd, sizeof cmd, "%s/t.lance", tmpl);
  uv_loop_t loop;
  uv_loop_init(&loop);
  mw_table_opts_t o = {.no_fsync = no_fsync};
  mw_table_t *t;
  mw_err_t err = {0};
  if (mw_table_open(&loop, cmd, &o, &t, &err) < 0) {
    fprintf(stderr, "open: %s\n", err.msg);
    return 1;
  }
  uint8_t id[16];
  mw_shard_uuid_unsharded(id);
  mw_shard_t *s = mw_table_shard(t, id, true);
  if (mw_shard_claim(s, on_ctl, NULL) < 0) return 1;
  while (!ctl_done) uv_run(&loop, UV_RUN_ONCE);
  printf("memwald engine, durable ingest (%s, storage %s, group commit %u ms, %u entries in flight)\n",
         no_fsync ? "NO fsync" : "fsync", mw_storage_backend_name(t->st), t->cfg.max_wal_flush_interval_ms,
         t->cfg.max_wal_inflight);
  run_case(&loop, s, &t->schema, 1, 20000, 256 * window_scale);
  run_case(&loop, s, &t->schema, 100, 3000, 64 * window_scale);
  run_case(&loop, s, &t->schema, 10000, 60, 8 * window_scale);
  ctl_done = 0;
  if (mw_shard_release(s, on_ctl, NULL) < 0) return 1;
  while (!ctl_done) uv_run(&loop, UV_RUN_ONCE);
  mw_table_close(t, on_closed);
  while (!closed) uv_run(&loop, UV_RUN_ONCE);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
  return system(cmd) == 0 ? 0 : 1;
}
