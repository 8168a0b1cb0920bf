/*
 * proof_tool.c — the engine side of the takeover / drop / crash proofs
 * (tests/shard/proofs.mjs drives it and LanceDB 0.39.0 together). Every
 * line it prints goes out with one write(2), so a parent reading the pipe
 * sees each event exactly when it happened, even if this process is killed
 * right after.
 *
 *   proof_tool hold TABLE --lo L
 *       claim the unsharded shard and write 10-row writes (ids L+10j..)
 *       until fenced: "ack J" / "refused J STATUS REASON"; "ready" after 20
 *       acks (the parent then lets LanceDB take the shard); after 1 000
 *       writes "paused J" and it waits for a stdin line before writing on
 *       (the parent sends one once LanceDB has fenced it); at the end one
 *       more write must fail at once: "after STATUS REASON"; then
 *       "done acked=N refused=M late_acks=K" (K: acks after a refusal).
 *   proof_tool take TABLE --lo L --n N
 *       claim (fences LanceDB), write N rows, "ready", wait for a stdin
 *       line, write N more, release (flush): "acked J..." lines, "released".
 *   proof_tool seal-cycle TABLE --model-out FILE
 *       write 1000 model rows, seal; a fresh handle's claim must be refused
 *       (SEALED); unseal; release. The model goes to FILE (check.mjs).
 *   proof_tool drop TABLE [--preseal K] [--write]
 *       optionally write model rows, seal the first K shards and close
 *       (an interrupted drop), then drop_table in a fresh handle: "dropped".
 *   proof_tool drop-fail TABLE --fail-bucket B --model-out FILE
 *       write model rows into every bucket, abort (rows in the WAL only);
 *       then drop_table with the seal of bucket B's shard failing (fault on
 *       its next-but-one manifest key): must roll back.
 *   proof_tool crashw TABLE --start J [--keys K] [--rows R]
 *       write forever: "s J" before each write is submitted, "a J" on its
 *       ack, "f J" on a failure; write J sets keys 100000+(J*7919+r*131)%K,
 *       name "wJ" (r < R). The parent SIGKILLs it.
 *   proof_tool open TABLE
 *       mw_table_open only: "open ok" or "open STATUS REASON".
 *   proof_tool recover TABLE
 *       claim every shard (replay), release (flush), "recovered".
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <unistd.h>

#include "common/log.h"
#include "lance/route.h"
#include "lance/shard_manifest.h"
#include "rows.h"
#include "shard/table_int.h" /* white-box: the tests read the table's fields */
#include "storage/fault.h"
#include "storage/local.h"

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
  line[n++] = '\n';
  for (int off = 0; off < n;) {
    ssize_t w = write(1, line + off, (size_t)(n - off));
    if (w <= 0) _exit(3);
    off += (int)w;
  }
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("proof_tool: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

static uv_loop_t loop;
static const char *table_path;

static mw_table_t *open_table(const char *const *keys, const char *const *values, size_t n,
                              const mw_storage_fault_t *fault) {
  mw_storage_config_t sc;
  mw_storage_config_init(&sc, NULL);
  sc.durable = false;
  sc.fault = fault;
  mw_table_opts_t o = {.config_keys = keys, .config_values = values, .n_config = n, .storage = &sc};
  mw_table_t *t;
  mw_err_t err = {0};
  if (mw_table_open(&loop, table_path, &o, &t, &err) < 0) die("open: %s", err.msg);
  return t;
}

static bool closed;
static void on_closed(mw_table_t *t) {
  (void)t;
  closed = true;
}
static void close_table(mw_table_t *t) {
  closed = false;
  if (mw_table_close(t, on_closed) < 0) die("close: busy");
  while (!closed) uv_run(&loop, UV_RUN_ONCE);
}

typedef struct ctl {
  bool fired;
  int status;
  char reason[600];
} ctl_t;
static void on_ctl(mw_shard_t *s, int status, const char *reason, void *arg) {
  (void)s;
  ctl_t *c = arg;
  c->fired = true;
  c->status = status;
  snprintf(c->reason, sizeof c->reason, "%s", reason ? reason : "");
}
static void wait_ctl(ctl_t *c) {
  while (!c->fired) uv_run(&loop, UV_RUN_ONCE);
}

/* Every created shard: release (flush) if ACTIVE, or abort. */
static void stop_all(mw_table_t *t, bool abort) {
  for (size_t i = 0; i < t->n_shards; i++) {
    mw_shard_t *s = &t->shards[i]->shard;
    if (mw_shard_state(s) != MW_SS_ACTIVE) continue;
    ctl_t c = {0};
    int rc = abort ? mw_shard_abort(s, on_ctl, &c) : mw_shard_release(s, on_ctl, &c);
    if (rc < 0) die("stop %s: %d", s->id_str, rc);
    wait_ctl(&c);
    if (c.status != 0) die("stop %s: %s", s->id_str, c.reason);
  }
}

/* ------------------------------------------------------------ row writes */

typedef struct wr {
  mw_table_write_t w;
  int64_t j;
} wr_t;

static int outstanding;
static void (*on_result)(int64_t j, int status, const char *reason);

static void on_write(mw_table_write_t *w, int status, const char *reason) {
  wr_t *x = w->data;
  outstanding--;
  on_result(x->j, status, reason);
  free(x);
}

/* One write of `rows` rows: ids from idf(j, r), name "<tag><j>", v = j. */
static int submit(mw_table_t *t, int64_t j, int rows, int64_t (*idf)(int64_t, int), const char *tag,
                  mw_err_t *err) {
  mw_batch_t b;
  if (mw_batch_init(&b, &t->schema) < 0) die("batch");
  for (int r = 0; r < rows; r++) {
    er_row_t row;
    memset(&row, 0, sizeof row);
    row.id = idf(j, r);
    snprintf(row.name, sizeof row.name, "%s%" PRId64, tag, j);
    row.v = (double)j;
    row.vec_null = true;
    if (er_row_append(&b, &row) < 0) die("row");
  }
  wr_t *x = calloc(1, sizeof *x);
  x->j = j;
  x->w.data = x;
  int rc = mw_table_write(t, &x->w, &b, on_write, err);
  if (rc < 0) {
    mw_batch_free(&b);
    free(x);
    return rc;
  }
  outstanding++;
  return 0;
}

/* ------------------------------------------------------------------ hold */

static int64_t lo_ids;
static int64_t id_lo(int64_t j, int r) { return lo_ids + j * 10 + r; }
static int64_t acked_n, refused_n, late_acks, first_refused = -1;
static bool stop_writing;

static void hold_result(int64_t j, int status, const char *reason) {
  if (status == 0) {
    acked_n++;
    if (first_refused >= 0 && j > first_refused) late_acks++;
    say("ack %" PRId64, j);
    if (acked_n == 20) say("ready");
    return;
  }
  refused_n++;
  if (first_refused < 0 || j < first_refused) first_refused = j;
  stop_writing = true;
  say("refused %" PRId64 " %d %s", j, status, reason ? reason : "");
}

/* Writes before the hold pauses for the parent (well under LanceDB's
 * 8 000-batch MemTable bound however writes group into WAL entries). */
#define HOLD_PAUSE_WRITES 1000

static int cmd_hold(void) {
  mw_table_t *t = open_table(NULL, NULL, 0, NULL);
  on_result = hold_result;
  int64_t j = 0;
  bool paused = false;
  while (!stop_writing || outstanding > 0) {
    if (!stop_writing && !paused && j >= HOLD_PAUSE_WRITES && outstanding == 0) {
      /* Wait for the parent's "go" (sent once LanceDB's open has fenced us)
       * rather than growing the WAL LanceDB must replay: past 8 000 batches
       * LanceDB 0.39.0 flushes the replayed MemTable without its
       * _pk_index/ (../shared/peer/FINDINGS.md b, c) and the proof fails on
       * Lance's defect, not ours. */
      paused = true;
      say("paused %" PRId64, j);
      char line[64];
      if (fgets(line, sizeof line, stdin) == NULL) die("stdin closed");
    }
    while (!stop_writing && outstanding < 4 && (paused || j < HOLD_PAUSE_WRITES)) {
      mw_err_t err = {0};
      int rc = submit(t, j, 10, id_lo, "m", &err);
      if (rc < 0) {
        say("refused %" PRId64 " %d %s", j, rc, err.msg);
        refused_n++;
        if (first_refused < 0) first_refused = j;
        stop_writing = true;
      }
      j++;
      if (j > 2000000) die("never fenced");
    }
    uv_run(&loop, UV_RUN_ONCE);
  }
  mw_err_t err = {0};
  int rc = submit(t, j, 10, id_lo, "m", &err);
  say("after %d %s", rc, err.msg);
  if (rc == 0) die("a write after the fence was accepted");
  say("done acked=%" PRId64 " refused=%" PRId64 " late_acks=%" PRId64, acked_n, refused_n, late_acks);
  stop_all(t, true);
  close_table(t);
  return late_acks == 0 ? 0 : 1;
}

/* ------------------------------------------------------------------ take */

static int64_t take_failed;
static void take_result(int64_t j, int status, const char *reason) {
  if (status != 0) {
    take_failed++;
    say("failed %" PRId64 " %s", j, reason ? reason : "");
  } else {
    say("acked %" PRId64, j);
  }
}

static void write_n(mw_table_t *t, int64_t j0, int64_t writes) {
  for (int64_t j = j0; j < j0 + writes; j++) {
    mw_err_t err = {0};
    if (submit(t, j, 10, id_lo, "c", &err) < 0) die("write %" PRId64 ": %s", j, err.msg);
    if (outstanding >= 4) uv_run(&loop, UV_RUN_ONCE);
  }
  while (outstanding > 0) uv_run(&loop, UV_RUN_ONCE);
}

static int cmd_take(int64_t n) {
  mw_table_t *t = open_table(NULL, NULL, 0, NULL);
  on_result = take_result;
  uint8_t id[16];
  mw_shard_uuid_unsharded(id);
  mw_shard_t *s = mw_table_shard(t, id, true);
  ctl_t c = {0};
  if (s == NULL || mw_shard_claim(s, on_ctl, &c) < 0) die("claim");
  wait_ctl(&c);
  if (c.status != 0) die("claim: %s", c.reason);
  say("claimed epoch %" PRIu64, s->epoch);
  write_n(t, 0, n / 10);
  say("ready");
  char line[64];
  if (fgets(line, sizeof line, stdin) == NULL) die("stdin closed");
  write_n(t, n / 10, n / 10);
  stop_all(t, false);
  close_table(t);
  say("released failed=%" PRId64, take_failed);
  return take_failed == 0 ? 0 : 1;
}

/* ----------------------------------------------------------------- model */

static int model_failed;
static void model_result(int64_t j, int status, const char *reason) {
  (void)j;
  if (status != 0) {
    model_failed++;
    fprintf(stderr, "proof_tool: write failed: %s\n", reason ? reason : "?");
  }
}

static void write_model(mw_table_t *t, er_model_t *m, int64_t rows, int64_t per) {
  on_result = model_result;
  for (int64_t done = 0; done < rows; done += per) {
    mw_batch_t b;
    if (er_batch(m, &t->schema, per, 0.05, &b) < 0) die("batch");
    wr_t *x = calloc(1, sizeof *x);
    x->w.data = x;
    mw_err_t err = {0};
    if (mw_table_write(t, &x->w, &b, on_write, &err) < 0) die("write: %s", err.msg);
    outstanding++;
    if (outstanding >= 8) uv_run(&loop, UV_RUN_ONCE);
  }
  while (outstanding > 0) uv_run(&loop, UV_RUN_ONCE);
  if (model_failed) die("%d writes failed", model_failed);
}

static void save_model(er_model_t *m, const char *out) {
  FILE *f = fopen(out, "w");
  if (f == NULL || er_model_write(m, f) < 0 || fclose(f) != 0) die("%s: write failed", out);
}

static mw_shard_t *first_shard(mw_table_t *t) {
  if (t->n_shards == 0) die("no shard");
  return &t->shards[0]->shard;
}

static int cmd_seal_cycle(const char *model_out) {
  mw_table_t *t = open_table(NULL, NULL, 0, NULL);
  er_model_t m;
  er_model_init(&m, 11, 600);
  write_model(t, &m, 1000, 50);
  mw_shard_t *s = first_shard(t);
  ctl_t c = {0};
  if (mw_shard_seal(s, on_ctl, &c) < 0) die("seal");
  wait_ctl(&c);
  if (c.status != 0 || mw_shard_state(s) != MW_SS_SEALED) die("seal: %s", c.reason);
  say("sealed");
  close_table(t);

  t = open_table(NULL, NULL, 0, NULL);
  uint8_t id[16];
  mw_shard_uuid_unsharded(id);
  s = mw_table_shard(t, id, true);
  c = (ctl_t){0};
  if (mw_shard_claim(s, on_ctl, &c) < 0) die("claim");
  wait_ctl(&c);
  say("claim %d %s", c.status, c.reason);
  if (c.status != -EROFS || strstr(c.reason, "is sealed; refusing claim") == NULL)
    die("a SEALED shard was not refused: %d %s", c.status, c.reason);
  c = (ctl_t){0};
  if (mw_shard_unseal(s, on_ctl, &c) < 0) die("unseal");
  wait_ctl(&c);
  if (c.status != 0 || mw_shard_state(s) != MW_SS_ACTIVE) die("unseal: %s", c.reason);
  say("unsealed epoch %" PRIu64, s->epoch);
  stop_all(t, false);
  close_table(t);
  save_model(&m, model_out);
  er_model_free(&m);
  return 0;
}

/* ------------------------------------------------------------------ drop */

typedef struct dropped {
  bool fired;
  int status;
  char reason[600];
} dropped_t;
static void on_dropped(mw_table_t *t, int status, const char *reason, void *arg) {
  (void)t;
  dropped_t *d = arg;
  d->fired = true;
  d->status = status;
  snprintf(d->reason, sizeof d->reason, "%s", reason ? reason : "");
}

static void drop_table(mw_table_t *t, dropped_t *d) {
  *d = (dropped_t){0};
  int rc = mw_table_drop(t, on_dropped, d);
  if (rc < 0) die("drop_table refused: %d", rc);
  while (!d->fired) uv_run(&loop, UV_RUN_ONCE);
}

/* The table's storage, blocking (local disk or S3: the proofs run on both). */
static mw_storage_sync_t *sync_open(void) {
  mw_storage_config_t sc;
  mw_storage_config_init(&sc, table_path);
  sc.durable = false;
  mw_storage_sync_t *ss = NULL;
  mw_err_t err = {0};
  if (mw_storage_sync_open(&sc, &ss, &err) < 0) die("storage %s: %s", table_path, err.msg);
  return ss;
}

/* How many objects are left under the table (0 once a drop took). */
static size_t objects_left(void) {
  mw_storage_sync_t *ss = sync_open();
  mw_storage_req_t req;
  mw_storage_req_init(&req);
  mw_err_t err = {0};
  int rc = mw_storage_sync_list(ss, "", &req, &err);
  size_t n = rc == 0 ? req.nkeys : 0;
  if (rc < 0 && rc != -ENOENT) die("list %s: %s", table_path, err.msg);
  mw_storage_req_cleanup(&req);
  mw_storage_sync_close(ss);
  return n;
}

static int cmd_drop(int preseal, bool write) {
  mw_table_t *t = open_table(NULL, NULL, 0, NULL);
  if (write || preseal > 0) {
    er_model_t m;
    er_model_init(&m, 12, 600);
    write_model(t, &m, 600, 30);
    er_model_free(&m);
  }
  int sealed = 0;
  for (size_t i = 0; i < t->n_shards && sealed < preseal; i++) {
    mw_shard_t *s = &t->shards[i]->shard;
    ctl_t c = {0};
    if (mw_shard_seal(s, on_ctl, &c) < 0) die("seal");
    wait_ctl(&c);
    if (c.status != 0) die("seal: %s", c.reason);
    sealed++;
  }
  stop_all(t, true);
  close_table(t);
  if (preseal) say("presealed %d", sealed);

  t = open_table(NULL, NULL, 0, NULL);
  dropped_t d;
  drop_table(t, &d);
  if (d.status != 0) die("drop_table: %s", d.reason);
  close_table(t);
  if (access(table_path, F_OK) == 0) die("%s still exists", table_path);
  /* on S3 no directory tells: list (opening a local storage would make its
   * root again, so a local table is checked by the access() above) */
  size_t left = strncmp(table_path, "s3://", 5) == 0 ? objects_left() : 0;
  if (left > 0) die("%s: %zu objects left after the drop", table_path, left);
  say("dropped");
  return 0;
}

/* The shard's newest manifest version, and the step at which a put (not
 * a probe) of a manifest fails: the link on disk, the body on S3 (only a
 * put sends one). */
static uint64_t latest_version(const char *sid, uint32_t *put_steps) {
  char prefix[256];
  snprintf(prefix, sizeof prefix, "_mem_wal/%s/manifest/", sid);
  mw_storage_sync_t *ss = sync_open();
  mw_storage_req_t req;
  mw_storage_req_init(&req);
  mw_err_t err = {0};
  if (mw_storage_sync_list(ss, prefix, &req, &err) < 0) die("list %s%s: %s", table_path, prefix, err.msg);
  uint64_t best = 0, v;
  for (size_t i = 0; i < req.nkeys; i++)
    if (mw_shard_manifest_name_parse(req.keys[i] + strlen(prefix), &v) == 0 && v > best) best = v;
  mw_storage_req_cleanup(&req);
  int step = mw_storage_step_parse(mw_storage_sync_storage(ss), "link");
  if (step < 0) step = mw_storage_step_parse(mw_storage_sync_storage(ss), "body");
  if (step < 0) die("%s: no put step to fail", table_path);
  *put_steps = MW_STEP_BIT((unsigned)step);
  mw_storage_sync_close(ss);
  return best;
}

static int cmd_drop_fail(uint32_t bucket, const char *model_out) {
  mw_table_t *t = open_table(NULL, NULL, 0, NULL);
  er_model_t m;
  er_model_init(&m, 13, 600);
  write_model(t, &m, 1200, 40);
  stop_all(t, true); /* abort: the rows live in the WAL only */
  close_table(t);

  uint8_t id[16];
  char sid[MW_UUID_STR_BYTES], name[96], key[256];
  mw_shard_uuid_bucket(bucket, id);
  mw_shard_uuid_format(id, sid);
  uint32_t put_steps = 0;
  uint64_t v = latest_version(sid, &put_steps);
  /* the drop's claim writes v+1, its seal v+2: make that put fail */
  mw_shard_manifest_name(v + 2, name, sizeof name);
  snprintf(key, sizeof key, "_mem_wal/%s/manifest/%s", sid, name);
  mw_storage_fault_t fault = {.fail_prefix = key, .fail_errno = EIO,
                              .fail_steps = put_steps}; /* the put, not the probes */
  t = open_table(NULL, NULL, 0, &fault);
  dropped_t d;
  drop_table(t, &d);
  say("drop %d %s", d.status, d.reason);
  if (d.status == 0 || strstr(d.reason, "rolled back") == NULL) die("drop_table did not roll back");
  for (size_t i = 0; i < t->n_shards; i++) {
    mw_shard_t *s = &t->shards[i]->shard;
    say("shard %s %s", s->id_str, mw_shard_state_name(mw_shard_state(s)));
    if (mw_shard_state(s) == MW_SS_SEALED) die("shard %s is still SEALED after the rollback", s->id_str);
  }
  stop_all(t, true);
  close_table(t);
  save_model(&m, model_out);
  er_model_free(&m);
  return 0;
}

/* ----------------------------------------------------------------- crash */

static int64_t crash_keys = 5000;
static int crash_rows = 100;
static int64_t id_crash(int64_t j, int r) { return 100000 + (j * 7919 + (int64_t)r * 131) % crash_keys; }
static void crash_result(int64_t j, int status, const char *reason) {
  (void)reason;
  if (status == 0) say("a %" PRId64, j);
  else say("f %" PRId64 " %d", j, status);
}

static int cmd_crashw(int64_t start) {
  static const char *const keys[] = {"max_memtable_rows"};
  static const char *const vals[] = {"3000"};
  mw_table_t *t = open_table(keys, vals, 1, NULL);
  on_result = crash_result;
  for (int64_t j = start; j < start + 1000000; j++) {
    say("s %" PRId64, j);
    mw_err_t err = {0};
    int rc = submit(t, j, crash_rows, id_crash, "w", &err);
    if (rc < 0) {
      say("f %" PRId64 " %d", j, rc);
      uv_run(&loop, UV_RUN_ONCE);
      continue;
    }
    while (outstanding >= 4) uv_run(&loop, UV_RUN_ONCE);
  }
  return 0;
}

static int cmd_open(void) {
  mw_storage_config_t sc;
  mw_storage_config_init(&sc, NULL);
  sc.durable = false;
  mw_table_opts_t o = {.storage = &sc};
  mw_table_t *t;
  mw_err_t err = {0};
  int rc = mw_table_open(&loop, table_path, &o, &t, &err);
  if (rc < 0) {
    say("open %d %s", rc, err.msg);
    return 0;
  }
  say("open ok");
  close_table(t);
  return 0;
}

static int cmd_recover(void) {
  mw_table_t *t = open_table(NULL, NULL, 0, NULL);
  mw_table_claim_owned(t);
  for (size_t i = 0; i < t->n_shards; i++) {
    mw_shard_t *s = &t->shards[i]->shard;
    while (mw_shard_state(s) == MW_SS_CLAIMING || mw_shard_state(s) == MW_SS_REPLAYING)
      uv_run(&loop, UV_RUN_ONCE);
    if (mw_shard_state(s) != MW_SS_ACTIVE) die("recover %s: %s", s->id_str, mw_shard_reason(s));
  }
  stop_all(t, false);
  close_table(t);
  say("recovered");
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3) die("usage: proof_tool MODE TABLE [options] (see the file's comment)");
  er_deadline("proof_tool", 120);
  const char *mode = argv[1];
  table_path = argv[2];
  const char *model_out = NULL;
  int64_t n = 100, start = 0;
  int preseal = 0;
  uint32_t bucket = 2;
  bool write = false;
  for (int i = 3; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--write") == 0) { write = true; continue; }
    if (v == NULL) die("missing value for %s", a);
    i++;
    if (strcmp(a, "--lo") == 0) lo_ids = strtoll(v, NULL, 10);
    else if (strcmp(a, "--n") == 0) n = strtoll(v, NULL, 10);
    else if (strcmp(a, "--model-out") == 0) model_out = v;
    else if (strcmp(a, "--preseal") == 0) preseal = atoi(v);
    else if (strcmp(a, "--fail-bucket") == 0) bucket = (uint32_t)atoi(v);
    else if (strcmp(a, "--start") == 0) start = strtoll(v, NULL, 10);
    else if (strcmp(a, "--keys") == 0) crash_keys = strtoll(v, NULL, 10);
    else if (strcmp(a, "--rows") == 0) crash_rows = atoi(v);
    else die("unknown option %s", a);
  }
  mw_log_init();
  mw_log_set_level(MW_LOG_WARN);
  if (uv_loop_init(&loop) != 0) die("loop");
  int rc;
  if (strcmp(mode, "hold") == 0) rc = cmd_hold();
  else if (strcmp(mode, "take") == 0) rc = cmd_take(n);
  else if (strcmp(mode, "seal-cycle") == 0 && model_out) rc = cmd_seal_cycle(model_out);
  else if (strcmp(mode, "drop") == 0) rc = cmd_drop(preseal, write);
  else if (strcmp(mode, "drop-fail") == 0 && model_out) rc = cmd_drop_fail(bucket, model_out);
  else if (strcmp(mode, "crashw") == 0) rc = cmd_crashw(start);
  else if (strcmp(mode, "recover") == 0) rc = cmd_recover();
  else if (strcmp(mode, "open") == 0) rc = cmd_open();
  else die("unknown mode %s (or a missing --model-out)", mode);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  return rc;
}
