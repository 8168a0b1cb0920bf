/*
 * bench/powerloss.c — how many acknowledged objects does a power cut take,
 * memwald's writes next to Lance-style writes, under the same model.
 *
 *   memwald      put_if_absent with fsync on: open, write, fsync, close,
 *                link, unlink(temp), fsync of the directory (and, the first
 *                time, of its ancestors) before the acknowledgement.
 *   lance-style  the same put_if_absent path with fsync off: open, write,
 *                close, link, unlink — what Lance's local object-store
 *                writer does for a WAL entry (open/write/close, rename to a
 *                second temp name, linkat, unlink; no fsync at all,
 *                /work/shared/peer/FINDINGS.md §0). The extra rename changes
 *                nothing under this model: neither name is ever fsynced.
 *
 * Each round writes -n objects (WAL-like keys "wal/<pos>", -j in flight)
 * into a fresh root watched by a power-loss journal (src/storage/
 * powerloss.c), cuts the power at a random step of the run (uniform over
 * the steps a calibration run took), lets the storage drain, applies the
 * cut, and reads every key back with a fresh storage. It counts the
 * acknowledged objects that are gone or not byte-identical after the cut,
 * and also the case "power cut after the last acknowledgement".
 *
 * The model is the worst case POSIX allows (everything not covered by a
 * completed fsync is lost). Real filesystems often keep more (ext4 commits
 * its journal every 5 s by default), so lance-style loses less on a real
 * machine — but what it keeps is luck, not a guarantee.
 *
 * Usage: bench_powerloss [-d dir] [-r rounds] [-n objects] [-s bytes]
 *                        [-j inflight] [-b uring|threads]
 */
#include <errno.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "storage/local.h"
#include "storage/storage.h"

typedef struct cutter {
  int countdown; /* 0 = never */
  int steps;
  mw_powerloss_t *pl;
} cutter_t;

static void on_step(void *ctx, const mw_storage_req_t *req, unsigned step) {
  cutter_t *c = ctx;
  (void)req;
  (void)step;
  __atomic_add_fetch(&c->steps, 1, __ATOMIC_SEQ_CST);
  if (c->countdown > 0 && __atomic_sub_fetch(&c->countdown, 1, __ATOMIC_SEQ_CST) == 0)
    mw_powerloss_trip(c->pl);
}

typedef struct run {
  mw_storage_t *st;
  int n, next, done;
  size_t size;
  uint8_t **pay;
  int *status;
} run_t;

static void put_cb(mw_storage_req_t *req, int status);

static void submit(run_t *r, mw_storage_req_t *req) {
  int i = r->next++;
  char key[64];
  snprintf(key, sizeof key, "wal/%08d.arrow", i);
  mw_storage_req_init(req);
  req->data = r;
  req->size = (uint64_t)i;
  if (mw_storage_put_if_absent(r->st, req, key, r->pay[i], r->size, put_cb) != 0) abort();
  req->size = (uint64_t)i; /* submit resets it */
}

static void put_cb(mw_storage_req_t *req, int status) {
  run_t *r = req->data;
  r->status[req->size] = status;
  r->done++;
  if (r->next < r->n) submit(r, req);
}

static void on_closed(void *arg) { *(int *)arg = 1; }

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f) {
  (void)sb;
  (void)flag;
  (void)f;
  return remove(p);
}

typedef struct tally {
  long acked, lost, partial, rounds_with_loss;
} tally_t;

/* One round; countdown 0 = cut after the last acknowledgement. Returns the
 * number of steps the run took, or -1. */
static int round_run(const char *root, mw_storage_backend_t b, bool fsync, int n, size_t size,
                     int j, int countdown, tally_t *t) {
  nftw(root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
  if (mkdir(root, 0755) != 0) return -1;
  mw_powerloss_t *pl = NULL;
  mw_err_t err = {0};
  if (mw_powerloss_new(root, &pl, &err) != 0) {
    fprintf(stderr, "%s\n", err.msg);
    return -1;
  }
  static cutter_t c;
  c = (cutter_t){countdown, 0, pl};
  mw_storage_fault_t f = {.on_step = on_step, .on_step_ctx = &c, .power_loss = pl};
  mw_storage_config_t cfg;
  mw_storage_config_init(&cfg, root);
  cfg.backend = b;
  cfg.durable = fsync;
  cfg.fault = &f;
  uv_loop_t loop;
  uv_loop_init(&loop);
  run_t r = {0};
  r.n = n;
  r.size = size;
  r.pay = calloc((size_t)n, sizeof *r.pay);
  r.status = calloc((size_t)n, sizeof *r.status);
  for (int i = 0; i < n; i++) {
    r.pay[i] = malloc(size);
    for (size_t k = 0; k < size; k++) r.pay[i][k] = (uint8_t)(i * 131 + k * 7 + 1);
  }
  if (mw_storage_open(&loop, &cfg, &r.st, &err) != 0) {
    fprintf(stderr, "%s\n", err.msg);
    return -1;
  }
  mw_storage_req_t *reqs = calloc((size_t)j, sizeof *reqs);
  for (int i = 0; i < j && r.next < n; i++) submit(&r, &reqs[i]);
  while (r.done < n) uv_run(&loop, UV_RUN_ONCE);
  int closed = 0;
  mw_storage_close(r.st, on_closed, &closed);
  while (!closed) uv_run(&loop, UV_RUN_ONCE);
  if (mw_storage_power_cut(pl, &err) != 0) {
    fprintf(stderr, "power cut: %s\n", err.msg);
    return -1;
  }
  /* what the reboot finds: read the files directly */
  long lost = 0;
  for (int i = 0; i < n; i++) {
    if (r.status[i] != 0) continue;
    t->acked++;
    char key[64];
    snprintf(key, sizeof key, "wal/%08d.arrow", i);
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", root, key);
    FILE *fp = fopen(path, "rb");
    if (fp == NULL) {
      lost++;
      continue;
    }
    uint8_t *buf = malloc(size + 1);
    size_t got = fread(buf, 1, size + 1, fp);
    fclose(fp);
    if (got != size || memcmp(buf, r.pay[i], size) != 0) {
      t->partial++;
      lost++;
    }
    free(buf);
  }
  uv_loop_close(&loop);
  t->lost += lost;
  t->rounds_with_loss += lost > 0;
  for (int i = 0; i < n; i++) free(r.pay[i]);
  free(r.pay);
  free(r.status);
  free(reqs);
  mw_powerloss_free(pl);
  return c.steps;
}

int main(int argc, char **argv) {
  const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  char defdir[4000];
  snprintf(defdir, sizeof defdir, "%s/memwald-bench-powerloss-%d", tmp, (int)getpid());
  const char *dir = defdir, *bname = "uring";
  int rounds = 20, n = 64, j = 8;
  size_t size = 4096;
  int opt;
  while ((opt = getopt(argc, argv, "d:r:n:s:j:b:")) != -1) {
    switch (opt) {
      case 'd': dir = optarg; break;
      case 'r': rounds = atoi(optarg); break;
      case 'n': n = atoi(optarg); break;
      case 's': size = (size_t)atol(optarg); break;
      case 'j': j = atoi(optarg); break;
      case 'b': bname = optarg; break;
      default:
        fprintf(stderr, "usage: %s [-d dir] [-r rounds] [-n objects] [-s bytes] [-j inflight] "
                        "[-b uring|threads]\n", argv[0]);
        return 2;
    }
  }
  mw_storage_backend_t b;
  if (rounds < 1 || rounds > 10000 || n < 1 || n > 100000 || j < 1 || j > 64 || size < 1 ||
      size > ((size_t)16 << 20) || (uint64_t)n * size > ((uint64_t)256 << 20) ||
      mw_storage_backend_parse(bname, &b) != 0 || strlen(dir) > 3000)
    return 2;
  mw_log_init();
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
    perror(dir);
    return 1;
  }
  char root[4100];
  snprintf(root, sizeof root, "%s/root", dir);
  srand((unsigned)getpid());
  printf("power-loss model: %d rounds x %d put_if_absent of %zu B, %d in flight, backend %s\n",
         rounds, n, size, j, bname);
  printf("%-24s %-16s %8s %8s %8s %8s %10s\n", "writer", "power cut", "rounds", "acked", "lost",
         "partial", "rounds w/ loss");
  const char *names[2] = {"memwald (fsync)", "lance-style (no fsync)"};
  for (int m = 0; m < 2; m++) {
    bool fsync = m == 0;
    tally_t cal = {0};
    int steps = round_run(root, b, fsync, n, size, j, 0, &cal);
    if (steps <= 0) return 1;
    tally_t t = {0};
    for (int r = 0; r < rounds; r++)
      if (round_run(root, b, fsync, n, size, j, 1 + rand() % steps, &t) < 0) return 1;
    printf("%-24s %-16s %8d %8ld %8ld %8ld %10ld\n", names[m], "random step", rounds, t.acked,
           t.lost, t.partial, t.rounds_with_loss);
    printf("%-24s %-16s %8d %8ld %8ld %8ld %10ld\n", names[m], "after last ack", 1, cal.acked,
           cal.lost, cal.partial, cal.rounds_with_loss);
  }
  printf("(lost = acknowledged objects absent or not byte-identical after the cut; "
         "partial = present but not byte-identical)\n");
  nftw(root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
  if (dir == defdir) rmdir(dir);
  return 0;
}
