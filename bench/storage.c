/*
 * bench/storage.c — how fast is durable storage, next to the machine's own
 * floor measured in the same run, on the same filesystem.
 *
 *   ours   small: N put_if_absent of S bytes, fsync on, one at a time (-j 1)
 *                 and J at a time; ops/s and per-op latency p50/p99.
 *          large: put_if_absent of 64 MiB objects, one at a time; MB/s.
 *   theirs small: a plain loop of pwrite(S bytes) + fdatasync on one file.
 *          large: `dd if=/dev/zero of=... bs=1M count=L conv=fsync`, timed.
 *
 * A durable put_if_absent is five syscalls that reach the disk's ordering
 * point (file fsync, link, directory fsync) where the fdatasync loop has one,
 * so the one-at-a-time ratio shows that overhead; J in flight lets the
 * filesystem batch journal commits, which the loop cannot.
 *
 *   delete: N objects deleted one at a time, durable (unlink + fsync of the
 *           directory, the default since the removal must survive power
 *           loss) and, for the cost of that fsync, with fsync off (unlink
 *           only, the earlier behaviour).
 *
 * The disk is shared and noisy, so every figure is the median of -r rounds
 * (default 3), and within a round ours and theirs run back to back.
 *
 * Usage: bench_storage [-d dir] [-n small_ops] [-s small_bytes] [-j inflight]
 *                      [-L large_mib] [-b uring|threads|both] [-r rounds]
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "storage/storage.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef struct run {
  uv_loop_t loop;
  mw_storage_t *st;
  const uint8_t *payload;
  size_t len;
  int total, next, done, fails;
  double *lat; /* per-op latency, seconds */
  double *t0;
  const char *prefix;
} run_t;

static void small_cb(mw_storage_req_t *req, int status);

static void small_submit(run_t *r, mw_storage_req_t *req) {
  char key[128];
  int i = r->next++;
  snprintf(key, sizeof key, "%s/%08d", r->prefix, i);
  mw_storage_req_init(req);
  req->data = r;
  req->size = (uint64_t)i;
  r->t0[i] = now_s();
  if (mw_storage_put_if_absent(r->st, req, key, r->payload, r->len, small_cb) != 0) abort();
  req->size = (uint64_t)i;
}

static void small_cb(mw_storage_req_t *req, int status) {
  run_t *r = req->data;
  int i = (int)req->size;
  r->lat[i] = now_s() - r->t0[i];
  if (status != 0) r->fails++;
  r->done++;
  if (r->next < r->total) small_submit(r, req);
}

static void on_closed(void *arg) { *(int *)arg = 1; }

static int open_st_sync(run_t *r, const char *root, mw_storage_backend_t b, bool fsync) {
  memset(r, 0, sizeof *r);
  uv_loop_init(&r->loop);
  mw_storage_config_t cfg;
  mw_storage_config_init(&cfg, root);
  cfg.backend = b;
  cfg.durable = fsync;
  cfg.max_inflight = 256;
  mw_err_t err = {0};
  int rc = mw_storage_open(&r->loop, &cfg, &r->st, &err);
  if (rc != 0) fprintf(stderr, "open %s: %s\n", root, err.msg);
  return rc;
}

static int open_st(run_t *r, const char *root, mw_storage_backend_t b) {
  return open_st_sync(r, root, b, true);
}

static void close_st(run_t *r) {
  int closed = 0;
  mw_storage_close(r->st, on_closed, &closed);
  while (!closed) uv_run(&r->loop, UV_RUN_ONCE);
  uv_loop_close(&r->loop);
}

/* Returns ops/s; fills p50/p99 in ms. */
static double ours_small(const char *root, mw_storage_backend_t b, int n, size_t size, int j,
                         double *p50, double *p99) {
  run_t r;
  if (open_st(&r, root, b) != 0) return 0;
  uint8_t *buf = malloc(size);
  memset(buf, 'x', size);
  char prefix[64];
  static int runs;
  snprintf(prefix, sizeof prefix, "small%d", runs++);
  r.payload = buf;
  r.len = size;
  r.total = n;
  r.prefix = prefix;
  r.lat = calloc((size_t)n, sizeof *r.lat);
  r.t0 = calloc((size_t)n, sizeof *r.t0);
  mw_storage_req_t *reqs = calloc((size_t)j, sizeof *reqs);
  double t = now_s();
  for (int i = 0; i < j && r.next < n; i++) small_submit(&r, &reqs[i]);
  while (r.done < n) uv_run(&r.loop, UV_RUN_ONCE);
  t = now_s() - t;
  if (r.fails) fprintf(stderr, "%d small puts failed\n", r.fails);
  qsort(r.lat, (size_t)n, sizeof *r.lat, cmp_d);
  *p50 = r.lat[n / 2] * 1e3;
  *p99 = r.lat[(size_t)((double)n * 0.99)] * 1e3;
  close_st(&r);
  free(reqs);
  free(r.lat);
  free(r.t0);
  free(buf);
  return n / t;
}

static void large_cb(mw_storage_req_t *req, int status) {
  run_t *r = req->data;
  if (status != 0) {
    fprintf(stderr, "large put: %s\n", strerror(-status));
    r->fails++;
  }
  r->done++;
}

/* MB/s writing total_mib in 64 MiB objects, one at a time. */
static double ours_large(const char *root, mw_storage_backend_t b, int total_mib) {
  run_t r;
  if (open_st(&r, root, b) != 0) return 0;
  size_t obj = (size_t)64 << 20;
  uint8_t *buf = malloc(obj);
  memset(buf, 0, obj); /* same bytes as dd's /dev/zero */
  int nobj = total_mib / 64 > 0 ? total_mib / 64 : 1;
  static int runs;
  int run = runs++;
  double t = now_s();
  for (int i = 0; i < nobj; i++) {
    mw_storage_req_t req;
    mw_storage_req_init(&req);
    req.data = &r;
    char key[64];
    snprintf(key, sizeof key, "large%d/%d", run, i);
    int want = r.done + 1;
    if (mw_storage_put_if_absent(r.st, &req, key, buf, obj, large_cb) != 0) abort();
    while (r.done < want) uv_run(&r.loop, UV_RUN_ONCE);
  }
  t = now_s() - t;
  close_st(&r);
  free(buf);
  return (double)nobj * 64.0 * 1.048576 / t;
}

static void del_cb(mw_storage_req_t *req, int status) {
  run_t *r = req->data;
  if (status != 0) r->fails++;
  r->done++;
}

/* Delete n objects one at a time (created first, without fsync); ops/s and
 * p50 in ms. */
static double ours_delete(const char *root, mw_storage_backend_t b, int n, bool fsync,
                          double *p50) {
  run_t r;
  static int runs;
  int run = runs++;
  if (open_st_sync(&r, root, b, false) != 0) return 0;
  char key[64];
  for (int i = 0; i < n; i++) {
    mw_storage_req_t req;
    mw_storage_req_init(&req);
    req.data = &r;
    snprintf(key, sizeof key, "del%d/%08d", run, i);
    if (mw_storage_put_if_absent(r.st, &req, key, "x", 1, del_cb) != 0) abort();
    while (r.done < i + 1) uv_run(&r.loop, UV_RUN_ONCE);
  }
  close_st(&r);
  if (open_st_sync(&r, root, b, fsync) != 0) return 0;
  double *lat = calloc((size_t)n, sizeof *lat);
  double t = now_s();
  for (int i = 0; i < n; i++) {
    mw_storage_req_t req;
    mw_storage_req_init(&req);
    req.data = &r;
    snprintf(key, sizeof key, "del%d/%08d", run, i);
    double t0 = now_s();
    if (mw_storage_delete(r.st, &req, key, del_cb) != 0) abort();
    while (r.done < i + 1) uv_run(&r.loop, UV_RUN_ONCE);
    lat[i] = now_s() - t0;
  }
  t = now_s() - t;
  if (r.fails) fprintf(stderr, "%d deletes failed\n", r.fails);
  close_st(&r);
  qsort(lat, (size_t)n, sizeof *lat, cmp_d);
  *p50 = lat[n / 2] * 1e3;
  free(lat);
  return n / t;
}

static double theirs_fdatasync(const char *root, int n, size_t size, double *p50, double *p99) {
  char path[4200];
  snprintf(path, sizeof path, "%s/fdatasync-loop.bin", root);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return 0;
  uint8_t *buf = malloc(size);
  memset(buf, 'x', size);
  double *lat = calloc((size_t)n, sizeof *lat);
  double t = now_s();
  for (int i = 0; i < n; i++) {
    double t0 = now_s();
    if (pwrite(fd, buf, size, (off_t)i * (off_t)size) != (ssize_t)size || fdatasync(fd) != 0) {
      perror("fdatasync loop");
      break;
    }
    lat[i] = now_s() - t0;
  }
  t = now_s() - t;
  close(fd);
  unlink(path);
  qsort(lat, (size_t)n, sizeof *lat, cmp_d);
  *p50 = lat[n / 2] * 1e3;
  *p99 = lat[(size_t)((double)n * 0.99)] * 1e3;
  free(lat);
  free(buf);
  return n / t;
}

static double theirs_dd(const char *root, int total_mib) {
  char of[4200], count[32];
  snprintf(of, sizeof of, "of=%s/dd.bin", root);
  snprintf(count, sizeof count, "count=%d", total_mib);
  double t = now_s();
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 2);
    execlp("dd", "dd", "if=/dev/zero", of, "bs=1M", count, "conv=fsync", (char *)NULL);
    _exit(127);
  }
  int ws = 0;
  waitpid(pid, &ws, 0);
  t = now_s() - t;
  unlink(of + 3);
  if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
    fprintf(stderr, "dd failed (status %d)\n", ws);
    return 0;
  }
  return total_mib * 1.048576 / t;
}

static void rmrf(const char *dir) {
  pid_t pid = fork();
  if (pid == 0) {
    execlp("rm", "rm", "-rf", dir, (char *)NULL);
    _exit(127);
  }
  waitpid(pid, NULL, 0);
}

int main(int argc, char **argv) {
  const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  char defdir[4000];
  snprintf(defdir, sizeof defdir, "%s/memwald-bench-storage-%d", tmp, (int)getpid());
  const char *dir = defdir, *which = "both";
  int n = 1000, j = 32, large_mib = 256, rounds = 3;
  size_t size = 1024;
  int opt;
  while ((opt = getopt(argc, argv, "d:n:s:j:L:b:r:")) != -1) {
    switch (opt) {
      case 'd': dir = optarg; break;
      case 'n': n = atoi(optarg); break;
      case 's': size = (size_t)atol(optarg); break;
      case 'j': j = atoi(optarg); break;
      case 'L': large_mib = atoi(optarg); break;
      case 'b': which = optarg; break;
      case 'r': rounds = atoi(optarg); break;
      default:
        fprintf(stderr, "usage: %s [-d dir] [-n ops] [-s bytes] [-j inflight] [-L MiB] "
                        "[-b uring|threads|both] [-r rounds]\n", argv[0]);
        return 2;
    }
  }
  if (n < 10 || j < 1 || j > 256 || size < 1 || large_mib < 1 || rounds < 1 || rounds > 15)
    return 2;
  mw_log_init();
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (strlen(dir) > 3000) return 2;
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
    perror(dir);
    return 1;
  }
  printf("storage bench in %s: %d small puts of %zu B, %d MiB large, fsync on, "
         "median of %d interleaved rounds\n", dir, n, size, large_mib, rounds);
  enum { MAXR = 15 };
  /* [what][round]: 0 fds 1 dd, then per backend 2+3b: j1, jJ, large */
  double v[12][MAXR] = {{0}}, p50[12][MAXR] = {{0}}, p99[12][MAXR] = {{0}};
  const mw_storage_backend_t backs[] = {MW_STORAGE_URING, MW_STORAGE_THREADS};
  const char *names[] = {"uring", "threads"};
  bool use[2];
  for (int b = 0; b < 2; b++) use[b] = strcmp(which, "both") == 0 || strcmp(which, names[b]) == 0;
  for (int r = 0; r < rounds; r++) {
    v[0][r] = theirs_fdatasync(dir, n, size, &p50[0][r], &p99[0][r]);
    for (int b = 0; b < 2; b++)
      if (use[b]) {
        v[2 + 3 * b][r] = ours_small(dir, backs[b], n, size, 1, &p50[2 + 3 * b][r], &p99[2 + 3 * b][r]);
        v[3 + 3 * b][r] = ours_small(dir, backs[b], n, size, j, &p50[3 + 3 * b][r], &p99[3 + 3 * b][r]);
      }
    for (int b = 0; b < 2; b++)
      if (use[b]) { /* [8 + 2b]: durable delete, [9 + 2b]: unlink only */
        v[8 + 2 * b][r] = ours_delete(dir, backs[b], n, true, &p50[8 + 2 * b][r]);
        v[9 + 2 * b][r] = ours_delete(dir, backs[b], n, false, &p50[9 + 2 * b][r]);
      }
    v[1][r] = theirs_dd(dir, large_mib);
    for (int b = 0; b < 2; b++)
      if (use[b]) v[4 + 3 * b][r] = ours_large(dir, backs[b], large_mib);
  }
  double med[12], m50[12], m99[12];
  for (int k = 0; k < 12; k++) {
    qsort(v[k], (size_t)rounds, sizeof(double), cmp_d);
    qsort(p50[k], (size_t)rounds, sizeof(double), cmp_d);
    qsort(p99[k], (size_t)rounds, sizeof(double), cmp_d);
    med[k] = v[k][rounds / 2];
    m50[k] = p50[k][rounds / 2];
    m99[k] = p99[k][rounds / 2];
  }
  printf("theirs  fdatasync loop  %9.0f ops/s  p50 %6.3f ms  p99 %6.3f ms\n", med[0], m50[0], m99[0]);
  printf("theirs  dd conv=fsync   %9.1f MB/s\n", med[1]);
  for (int b = 0; b < 2; b++) {
    if (!use[b]) continue;
    int k = 2 + 3 * b;
    printf("ours    %-7s pia -j1   %9.0f ops/s  p50 %6.3f ms  p99 %6.3f ms  ratio %.2f\n",
           names[b], med[k], m50[k], m99[k], med[0] > 0 ? med[k] / med[0] : 0);
    printf("ours    %-7s pia -j%-3d %9.0f ops/s  p50 %6.3f ms  p99 %6.3f ms  ratio %.2f\n",
           names[b], j, med[k + 1], m50[k + 1], m99[k + 1], med[0] > 0 ? med[k + 1] / med[0] : 0);
    printf("ours    %-7s large     %9.1f MB/s                              ratio %.2f\n",
           names[b], med[k + 2], med[1] > 0 ? med[k + 2] / med[1] : 0);
  }
  for (int b = 0; b < 2; b++) {
    if (!use[b]) continue;
    int k = 8 + 2 * b;
    printf("ours    %-7s delete    %9.0f ops/s  p50 %6.3f ms  (unlink + dir fsync)\n", names[b],
           med[k], m50[k]);
    printf("ours    %-7s delete    %9.0f ops/s  p50 %6.3f ms  (unlink only, fsync off)  "
           "cost of the fsync %.1fx\n", names[b], med[k + 1], m50[k + 1],
           med[k] > 0 ? med[k + 1] / med[k] : 0);
  }
  printf("(ratio = ours / theirs: small vs the fdatasync loop, large vs dd)\n");
  if (dir == defdir) rmrf(dir);
  return 0;
}
