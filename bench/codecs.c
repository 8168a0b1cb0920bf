/*
 * codecs.c — benchmark of the hot codecs against LanceDB itself.
 *
 *   build/bench/bench_codecs [--rows 1000000] [--batch 10000] [--no-peer]
 *
 * Rows: the vectors' schema (id int64 PK, name utf8 "row_<i>", v float64,
 * vec fixed_size_list<float32, 8>, _tombstone bool), no nulls, the same values
 * bench/codecs-peer.mjs generates. Measured, in one process:
 *   - WAL-entry encode: every batch as one Arrow IPC stream (mw_ipc_writer);
 *   - WAL-entry decode: those streams back into batches (mw_ipc_decode);
 *   - SSTable build: all rows as one SSTable (data file, dedup, bloom, PK
 *     index, manifest), zstd off and on, in memory (no disk writes);
 *   - the same build in its parts, each on a thread at once (the flusher's
 *     way), alternated with one call, best of 5 each, and each part's time;
 *   - the cost of zone write seeds v1 (zone_write_seeds): the same build
 *     with and without seeds, alternated 10 times each, best of each, and
 *     the seeds alone (mw_seed_set_build, best of 10) as a share of the
 *     flush without them (target: under 10%);
 *   - the cost of the read-back (lance/readback.h): the build in parts
 *     with and without it (alternated, best of 5 each; each part's thread
 *     CPU), and the data file alone, zstd off and on: its write against its
 *     read-back and compare.
 * Then `node bench/codecs-peer.mjs` (tests/interop/node_modules) times
 * LanceDB 0.39.0 writing the same rows: a plain dataset write, LSM puts (WAL)
 * and the memtable flush (SSTable); the last lines print the ratios.
 *
 * MB/s are 1e6 bytes per second of payload (8+8+32+4+len(name) per row, the
 * measure of peer/bench-ingest.mjs) unless said otherwise. It is a benchmark,
 * run by hand, not a test.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

#include "lance/ipc.h"
#include "lance/readback.h"
#include "lance/sstable.h"
#include "lance/zone_seed.h"

#ifndef MW_SOURCE_ROOT
#define MW_SOURCE_ROOT "."
#endif

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU seconds of the whole process (every thread): the figure that does
 * not depend on how busy the machine is. */
static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* MB/s of 64 MiB written in 1 MiB pieces and fsynced, in $TMPDIR or /tmp
 * (the storage layer's pattern for large objects). 0 when it cannot run. */
static double fsync_write_rate_mb_s(void) {
  const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  char path[512];
  snprintf(path, sizeof path, "%s/memwald-bench-fsync-%d", dir, (int)getpid());
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return 0;
  static char chunk[1 << 20];
  memset(chunk, 0x5a, sizeof chunk);
  double t0 = now_s();
  int ok = 1;
  for (int i = 0; i < 64 && ok; i++) ok = write(fd, chunk, sizeof chunk) == (ssize_t)sizeof chunk;
  ok = ok && fsync(fd) == 0;
  double t = now_s() - t0;
  close(fd);
  unlink(path);
  return ok && t > 0 ? 64.0 * 1.048576 / t : 0;
}

static void die(const char *what, const mw_err_t *err) {
  fprintf(stderr, "codecs: %s: %s\n", what, err && err->msg[0] ? err->msg : "failed");
  exit(1);
}

static void make_schema(mw_schema_t *s) {
  mw_schema_init(s);
  if (mw_schema_add(s, "id", MW_T_INT64, false) < 0 || mw_schema_add(s, "name", MW_T_UTF8, true) < 0 ||
      mw_schema_add(s, "v", MW_T_FLOAT64, true) < 0 || mw_schema_add(s, "vec", MW_T_FSL, true) < 0 ||
      mw_schema_add(s, "_tombstone", MW_T_BOOL, false) < 0)
    die("schema", NULL);
  for (size_t i = 0; i < s->n_fields; i++) s->fields[i].id = (int32_t)i;
  s->fields[3].fsl_dim = 8;
  s->fields[0].pk_position = 1;
  mw_kvs_set(&s->fields[0].meta, "lance-schema:unenforced-primary-key:position", "1", 1);
}

static uint64_t fill(mw_batch_t *b, int64_t start, int64_t n) {
  uint64_t payload = 0;
  for (int64_t i = start; i < start + n; i++) {
    char name[32];
    int len = snprintf(name, sizeof name, "row_%" PRId64, i);
    double v = (double)i * 0.5;
    float vec[8];
    for (int k = 0; k < 8; k++) vec[k] = (float)((i + k) % 1000) / 1000.0f;
    if (mw_column_append_fixed(&b->cols[0], &i, 8) < 0 ||
        mw_column_append_bytes(&b->cols[1], name, (size_t)len) < 0 ||
        mw_column_append_fixed(&b->cols[2], &v, 8) < 0 ||
        mw_column_append_fixed(&b->cols[3], vec, 32) < 0 || mw_column_append_bool(&b->cols[4], false) < 0)
      die("fill", NULL);
    b->n_rows++;
    payload += 8 + 8 + 32 + 4 + (uint64_t)len;
  }
  return payload;
}

/* The SSTable build in parts (mw_sstable_job_*), each part on its own
 * thread at once, as the flusher runs them on libuv's pool. Returns the wall
 * seconds; part_s[i] / part_cpu[i] = each part's own wall / thread CPU time. */
typedef struct part_run {
  mw_sstable_job_t *job;
  int part, rc;
  double s, cpu;
  mw_err_t err;
} part_run_t;

static double thread_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *run_part(void *arg) {
  part_run_t *r = arg;
  double t0 = now_s(), c0 = thread_cpu_s();
  r->rc = mw_sstable_job_run(r->job, r->part, &r->err);
  r->s = now_s() - t0;
  r->cpu = thread_cpu_s() - c0;
  return NULL;
}

static double build_in_parts(const mw_schema_t *s, const mw_batch_t **bp, size_t nb,
                             const mw_sstable_opts_t *o, double part_s[MW_SSTABLE_PARTS],
                             double part_cpu[MW_SSTABLE_PARTS]) {
  mw_err_t err = {0};
  mw_sstable_job_t *job;
  mw_sstable_t sst = {0};
  double t0 = now_s();
  if (mw_sstable_job_begin(s, bp, nb, 1, o, &job, &err) < 0) die("sstable job", &err);
  pthread_t th[MW_SSTABLE_PARTS];
  part_run_t r[MW_SSTABLE_PARTS];
  for (int i = 0; i < MW_SSTABLE_PARTS; i++) {
    r[i] = (part_run_t){.job = job, .part = i};
    if (pthread_create(&th[i], NULL, run_part, &r[i]) != 0) die("pthread_create", NULL);
  }
  for (int i = 0; i < MW_SSTABLE_PARTS; i++) {
    pthread_join(th[i], NULL);
    if (r[i].rc < 0) die("sstable part", &r[i].err);
    part_s[i] = r[i].s;
    part_cpu[i] = r[i].cpu;
  }
  if (mw_sstable_job_end(job, &sst, &err) < 0) die("sstable job end", &err);
  double t = now_s() - t0;
  mw_sstable_free(&sst);
  return t;
}

/* The read-back's cost (lance/readback.h): the build in parts with and
 * without it, alternated, best of 5 each (wall) and each part's least
 * thread CPU; then the data file alone, zstd off (the flush's default) and
 * on (compaction's): its write and its read-back, least thread CPU of 5. */
static void readback_costs(const mw_schema_t *s, const mw_batch_t **bp, size_t nb, double mb) {
  double wall[2] = {1e30, 1e30}, cpu[2][MW_SSTABLE_PARTS];
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < MW_SSTABLE_PARTS; i++) cpu[k][i] = 1e30;
  for (int round = 0; round < 10; round++) {
    int skip = round & 1;
    mw_sstable_opts_t o = {.timestamp_ns = 1, .skip_readback = skip};
    double ps[MW_SSTABLE_PARTS], pc[MW_SSTABLE_PARTS];
    double t = build_in_parts(s, bp, nb, &o, ps, pc);
    if (t < wall[skip]) wall[skip] = t;
    for (int i = 0; i < MW_SSTABLE_PARTS; i++)
      if (pc[i] < cpu[skip][i]) cpu[skip][i] = pc[i];
  }
  double with = 0, without = 0;
  for (int i = 0; i < MW_SSTABLE_PARTS; i++) with += cpu[0][i], without += cpu[1][i];
  printf("sstable read-back: parts %.3f s with, %.3f s without (%+.1f%% wall); CPU %.3f s with, %.3f s without "
         "(%+.1f%%): data file %.3f/%.3f, keys+dedup+bloom %.3f/%.3f, PK index %.3f/%.3f\n",
         wall[0], wall[1], 100.0 * (wall[0] - wall[1]) / wall[1], with, without, 100.0 * (with - without) / without,
         cpu[0][0], cpu[1][0], cpu[0][1], cpu[1][1], cpu[0][2], cpu[1][2]);
  for (int z = 0; z < 2; z++) {
    double wr = 1e30, rb = 1e30;
    size_t bytes = 0;
    for (int round = 0; round < 5; round++) {
      mw_buf_t f = MW_BUF_INIT;
      mw_err_t err = {0};
      mw_sstable_opts_t o = {.zstd = z == 1};
      double c0 = thread_cpu_s();
      if (mw_sstable_data_file(s, bp, nb, &o, &f, &err) < 0) die("data file", &err);
      double c1 = thread_cpu_s();
      if (mw_readback_data_file(s, bp, nb, f.data, f.len, "bench", &err) < 0) die("read-back", &err);
      double c2 = thread_cpu_s();
      if (c1 - c0 < wr) wr = c1 - c0;
      if (c2 - c1 < rb) rb = c2 - c1;
      bytes = f.len;
      mw_buf_free(&f);
    }
    printf("data file%-5s %.1f MB: written in %.3f s CPU (%.0f MB/s), read back and compared in %.3f s "
           "(%.0f MB/s) = +%.0f%% of the write\n", z ? " zstd" : "", (double)bytes / 1e6, wr, mb / wr, rb, mb / rb,
           100.0 * rb / wr);
  }
}

int main(int argc, char **argv) {
  int64_t rows = 1000000, batch = 10000;
  bool peer = true;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--rows") == 0 && i + 1 < argc) rows = atoll(argv[++i]);
    else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc) batch = atoll(argv[++i]);
    else if (strcmp(argv[i], "--no-peer") == 0) peer = false;
    else {
      fprintf(stderr, "usage: bench_codecs [--rows N] [--batch B] [--no-peer]\n");
      return 2;
    }
  }
  if (rows <= 0 || batch <= 0) return 2;
  mw_schema_t s;
  make_schema(&s);
  size_t nb = (size_t)((rows + batch - 1) / batch);
  mw_batch_t *b = calloc(nb, sizeof *b);
  const mw_batch_t **bp = calloc(nb, sizeof *bp);
  uint64_t payload = 0;
  for (size_t i = 0; i < nb; i++) {
    if (mw_batch_init(&b[i], &s) < 0) die("batch", NULL);
    int64_t start = (int64_t)i * batch, n = rows - start < batch ? rows - start : batch;
    payload += fill(&b[i], start, n);
    bp[i] = &b[i];
  }
  double mb = (double)payload / 1e6;
  printf("rows %" PRId64 " in %zu batches of %" PRId64 ", payload %.1f MB\n", rows, nb, batch, mb);

  /* WAL-entry encode */
  mw_err_t err = {0};
  mw_ipc_writer_t w;
  mw_ipc_writer_init(&w);
  mw_buf_t *enc = calloc(nb, sizeof *enc);
  double t0 = now_s(), c0 = cpu_s();
  uint64_t wal_bytes = 0;
  for (size_t i = 0; i < nb; i++) {
    if (mw_ipc_writer_encode(&w, &s, &bp[i], 1, NULL, &enc[i], &err) < 0) die("ipc encode", &err);
    wal_bytes += enc[i].len;
  }
  double enc_s = now_s() - t0, enc_cpu = cpu_s() - c0;
  mw_ipc_writer_free(&w);
  printf("wal encode    %8.3f s  %9.1f MB/s  %11.0f rows/s  (%.1f MB of IPC)  CPU %.3f s = %.0f MB/CPU-s\n",
         enc_s, mb / enc_s, (double)rows / enc_s, (double)wal_bytes / 1e6, enc_cpu, mb / enc_cpu);

  /* wal_compression = zstd: what it costs (CPU) and saves (fsynced bytes).
   * The disk's fsynced write rate is measured here too, so the choice is
   * made from this machine's figures: zstd pays off only when the CPU time
   * per MB is below the disk time it saves. */
  {
    mw_ipc_writer_t wz;
    mw_ipc_writer_init(&wz);
    mw_ipc_opts_t zo = {.zstd = true, .zstd_level = 1};
    mw_buf_t zb = MW_BUF_INIT;
    uint64_t z_bytes = 0;
    /* both encodes into one reused (warm) buffer, as the WAL writer does */
    double plain_s = 0, z_s = 0;
    for (int z = 0; z < 2; z++) {
      double tz = now_s();
      for (size_t i = 0; i < nb; i++) {
        mw_buf_reset(&zb);
        if (mw_ipc_writer_encode(&wz, &s, &bp[i], 1, z ? &zo : NULL, &zb, &err) < 0)
          die("ipc encode", &err);
        if (z) z_bytes += zb.len;
      }
      *(z ? &z_s : &plain_s) = now_s() - tz;
    }
    printf("wal encode warm %6.3f s  %9.1f MB/s  (one reused buffer)\n", plain_s, mb / plain_s);
    mw_ipc_writer_free(&wz);
    mw_buf_free(&zb);
    double disk_mb_s = fsync_write_rate_mb_s();
    double saved_mb = (double)(wal_bytes - z_bytes) / 1e6;
    double extra_s = z_s > plain_s ? z_s - plain_s : 0; /* the marginal CPU of compressing */
    double cpu_ms_per_mb = 1e3 * extra_s / ((double)wal_bytes / 1e6);
    double disk_ms_saved_per_mb = disk_mb_s > 0 ? 1e3 * (saved_mb / disk_mb_s) / ((double)wal_bytes / 1e6) : 0;
    printf("wal encode zstd %6.3f s  %9.1f MB/s  %.1f MB -> %.1f MB (%.0f%%)\n", z_s, mb / z_s,
           (double)wal_bytes / 1e6, (double)z_bytes / 1e6, 100.0 * (double)z_bytes / (double)wal_bytes);
    printf("fsynced writes on this disk: %.1f MB/s\n", disk_mb_s);
    printf("wal_compression: zstd costs %.2f ms more CPU per MB of WAL and saves %.2f ms of fsynced "
           "writing per MB (synthetic rows compress far better than most) -> %s\n", cpu_ms_per_mb, disk_ms_saved_per_mb,
           cpu_ms_per_mb < disk_ms_saved_per_mb ? "zstd pays off here" : "keep none (the default)");
  }

  /* WAL-entry decode */
  t0 = now_s();
  c0 = cpu_s();
  int64_t back = 0;
  for (size_t i = 0; i < nb; i++) {
    mw_ipc_stream_t st;
    if (mw_ipc_decode(enc[i].data, enc[i].len, NULL, &st, &err) < 0) die("ipc decode", &err);
    for (size_t k = 0; k < st.n_batches; k++) back += st.batches[k].n_rows;
    mw_ipc_stream_free(&st);
  }
  double dec_s = now_s() - t0, dec_cpu = cpu_s() - c0;
  if (back != rows) die("ipc decode row count", NULL);
  printf("wal decode    %8.3f s  %9.1f MB/s  %11.0f rows/s  CPU %.3f s = %.0f MB/CPU-s\n", dec_s, mb / dec_s,
         (double)rows / dec_s, dec_cpu, mb / dec_cpu);
  for (size_t i = 0; i < nb; i++) mw_buf_free(&enc[i]);
  free(enc);

  /* SSTable build */
  double sst_s[2] = {0, 0};
  for (int z = 0; z < 2; z++) {
    mw_sstable_t sst = {0};
    mw_sstable_opts_t o = {.zstd = z == 1, .timestamp_ns = 1};
    t0 = now_s();
    c0 = cpu_s();
    if (mw_sstable_build(&s, bp, nb, 1, &o, &sst, &err) < 0) die("sstable", &err);
    sst_s[z] = now_s() - t0;
    double sst_cpu = cpu_s() - c0;
    uint64_t bytes = 0;
    for (size_t i = 0; i < sst.n_files; i++) bytes += sst.files[i].bytes.len;
    printf("sstable%-6s %8.3f s  %9.1f MB/s  %11.0f rows/s  (%.1f MB of files)  CPU %.3f s = %.0f MB/CPU-s\n",
           z ? " zstd" : "", sst_s[z], mb / sst_s[z], (double)rows / sst_s[z], (double)bytes / 1e6, sst_cpu,
           mb / sst_cpu);
    mw_sstable_free(&sst);
  }
  /* the build in parts on threads (the flusher's way above
   * MW_FLUSH_SERIAL_ROWS rows) against one call, alternated, best of 5 each */
  double best_whole = 1e30, best_parts = 1e30, parts_s[MW_SSTABLE_PARTS] = {0};
  double parts_cpu[MW_SSTABLE_PARTS] = {0}, min_cpu[MW_SSTABLE_PARTS] = {1e30, 1e30, 1e30};
  _Static_assert(MW_SSTABLE_PARTS == 3, "min_cpu's initialiser");
  double c_whole = 0, c_parts = 0;
  for (int round = 0; round < 10; round++) {
    mw_sstable_opts_t o = {.timestamp_ns = 1};
    c0 = cpu_s();
    if (round & 1) {
      double ps[MW_SSTABLE_PARTS], pc[MW_SSTABLE_PARTS];
      double t = build_in_parts(&s, bp, nb, &o, ps, pc);
      c_parts += cpu_s() - c0;
      for (int i = 0; i < MW_SSTABLE_PARTS; i++)
        if (pc[i] < min_cpu[i]) min_cpu[i] = pc[i];
      if (t < best_parts) {
        best_parts = t;
        memcpy(parts_s, ps, sizeof ps);
        memcpy(parts_cpu, pc, sizeof pc);
      }
    } else {
      mw_sstable_t sst = {0};
      t0 = now_s();
      if (mw_sstable_build(&s, bp, nb, 1, &o, &sst, &err) < 0) die("sstable", &err);
      double t = now_s() - t0;
      c_whole += cpu_s() - c0;
      if (t < best_whole) best_whole = t;
      mw_sstable_free(&sst);
    }
  }
  printf("sstable parts %8.3f s  %9.1f MB/s  (%d threads; one call: %.3f s = %.2fx; CPU per build %.3f vs %.3f s)\n",
         best_parts, mb / best_parts, MW_SSTABLE_PARTS, best_whole, best_whole / best_parts, c_parts / 5,
         c_whole / 5);
  printf("sstable parts alone (wall / thread CPU): data file %.3f / %.3f s, keys+dedup+bloom %.3f / %.3f s, "
         "PK index %.3f / %.3f s\n",
         parts_s[MW_SSTABLE_PART_DATA], parts_cpu[MW_SSTABLE_PART_DATA], parts_s[MW_SSTABLE_PART_KEYS],
         parts_cpu[MW_SSTABLE_PART_KEYS], parts_s[MW_SSTABLE_PART_INDEX], parts_cpu[MW_SSTABLE_PART_INDEX]);
  /* What the parts' CPU (least of 5 each, which the machine's load barely
   * moves) allows on two free cores: the longest part on one, the other two
   * on the other, against all three on one. */
  double d = min_cpu[MW_SSTABLE_PART_DATA], k = min_cpu[MW_SSTABLE_PART_KEYS], x = min_cpu[MW_SSTABLE_PART_INDEX];
  double sum = d + k + x, longest = d > k ? (d > x ? d : x) : (k > x ? k : x);
  double two = longest > sum - longest ? longest : sum - longest;
  printf("sstable parts CPU: %.3f s in all; on 2 free cores at best %.3f s = %.2fx one core (the parts' CPU, "
         "least of 5)\n", sum, two, sum / two);

  /* zone write seeds: alternate with/without so both see the same machine */
  double best[2] = {1e30, 1e30};
  for (int round = 0; round < 20; round++) {
    int seeds = round & 1;
    mw_sstable_t sst = {0};
    mw_sstable_opts_t o = {.timestamp_ns = 1, .zone_seeds = seeds};
    t0 = now_s();
    if (mw_sstable_build(&s, bp, nb, 1, &o, &sst, &err) < 0) die("sstable seeds", &err);
    double t = now_s() - t0;
    if (t < best[seeds]) best[seeds] = t;
    mw_sstable_free(&sst);
  }
  /* the seeds alone (every column's builder and IPC file), best of 10: the
   * difference of two whole builds is within this machine's noise */
  double seeds_alone = 1e30;
  for (int round = 0; round < 10; round++) {
    mw_seed_set_t set;
    t0 = now_s();
    if (mw_seed_set_build(&set, &s, bp, nb, MW_SEED_DEFAULT_ROWS_PER_ZONE, 1, &err) < 0) die("seed set", &err);
    double t = now_s() - t0;
    if (t < seeds_alone) seeds_alone = t;
    mw_seed_set_free(&set);
  }
  printf("sstable seeds %8.3f s  %9.1f MB/s  (without: %.3f s; %+.1f%%, within noise)\n", best[1], mb / best[1],
         best[0], 100.0 * (best[1] - best[0]) / best[0]);
  printf("zone seeds alone %6.4f s  -> %.1f%% of the flush without seeds (target < 10%%)\n", seeds_alone,
         100.0 * seeds_alone / best[0]);
  readback_costs(&s, bp, nb, mb);
  for (size_t i = 0; i < nb; i++) mw_batch_free(&b[i]);
  free(b);
  free(bp);
  mw_schema_free(&s);
  if (!peer) return 0;

  /* LanceDB on the same rows */
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "node '%s/bench/codecs-peer.mjs' --rows %" PRId64 " --batch %" PRId64 " 2>/dev/null",
           MW_SOURCE_ROOT, rows, batch);
  FILE *p = popen(cmd, "r");
  char line[4096] = {0};
  if (p == NULL || fgets(line, sizeof line, p) == NULL) {
    fprintf(stderr, "codecs: LanceDB peer did not run (%s)\n", cmd);
    if (p) pclose(p);
    return 1;
  }
  pclose(p);
  printf("lancedb       %s", line);
  double ds = 0, ps = 0, fs = 0;
  const char *q;
  if ((q = strstr(line, "\"dataset_write_s\":"))) ds = atof(q + 18);
  if ((q = strstr(line, "\"lsm_put_s\":"))) ps = atof(q + 12);
  if ((q = strstr(line, "\"lsm_flush_s\":"))) fs = atof(q + 14);
  if (ds > 0 && ps > 0 && fs > 0) {
    printf("lancedb dataset write  %8.3f s  %9.1f MB/s  -> our sstable is %.1fx faster\n", ds, mb / ds, ds / sst_s[0]);
    printf("lancedb lsm puts (WAL) %8.3f s  %9.1f MB/s  -> our wal encode is %.1fx faster\n", ps, mb / ps, ps / enc_s);
    printf("lancedb lsm flush      %8.3f s  %9.1f MB/s  -> our sstable is %.1fx faster\n", fs, mb / fs, fs / sst_s[0]);
    printf("lancedb lsm flush      %8.3f s  %9.1f MB/s  -> our sstable in parts is %.1fx faster (one call: %.1fx)\n",
           fs, mb / fs, fs / best_parts, fs / best_whole);
    printf("lancedb lsm flush      %8.3f s  (writes no seeds) -> our sstable with zone seeds is %.1fx faster\n", fs,
           fs / best[1]);
  }
  return 0;
}
