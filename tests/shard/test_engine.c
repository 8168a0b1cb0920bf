/*
 * test_engine.c — the shard engine against real storage in scratch copies of
 * the golden vectors: claim (fresh v1 byte-identical to Lance's, epoch bump
 * + fence sentinel, SEALED refusal, unseal, seal, drop), two writers fencing
 * each other, replay (of an unflushed WAL, with a flush when the MemTable is
 * full, skipping stale entries above a sentinel), SSTable rows read back
 * from the data file, WAL entries byte-identical to every Lance entry in the
 * vectors, group commit (one entry per tick, acks in order, pipelining,
 * durable_write = false), collisions and I/O errors, commit_update against a
 * tailer's same-epoch bump, freeze + backpressure, the router, drop_table.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cases.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/metrics.h"
#include "lance/datafile.h"
#include "lance/dataset_manifest.h"
#include "lance/zone_seed.h"
#include "lance/ipc.h"
#include "lance/route.h"
#include "lance/shard_manifest.h"
#include "lance/sstable.h"
#include "rows.h"
#include "shard/table_int.h" /* white-box: the tests read the table's fields */
#include "storage/local.h"
#include "testutil.h"

#define UNSHARDED "aa48498d-ac91-59e2-8452-69f46010ace2"

typedef struct env {
  uv_loop_t loop;
  char *scratch;
  char *table_dir;
  mw_table_t *t;
  const char *inspect_allow; /* the one verify problem a test makes on purpose */
} env_t;

typedef struct done {
  bool fired;
  int status;
  char reason[600];
} done_t;

static void on_done(mw_shard_t *s, int status, const char *reason, void *arg) {
  (void)s;
  done_t *d = arg;
  d->fired = true;
  d->status = status;
  snprintf(d->reason, sizeof d->reason, "%s", reason ? reason : "");
}

/* Every wait in these tests has a deadline of its own, well inside meson's
 * timeout, so a hang names itself. A loop that blocks in its poll with no
 * timer at all is still caught by meson's timeout only. */
#define RUN_UNTIL_MAX_S 120

static void run_until(uv_loop_t *loop, const bool *flag) {
  uint64_t t0_ns = uv_hrtime();
  while (!*flag) {
    int alive = uv_run(loop, UV_RUN_ONCE);
    if (!alive && !*flag) fail_msg("loop went idle before the awaited event");
    if (!*flag && uv_hrtime() - t0_ns > RUN_UNTIL_MAX_S * 1000000000ull)
      fail_msg("the awaited event did not come within %d s", RUN_UNTIL_MAX_S);
  }
}

static char *copy_vector(const char *name, const char *scratch) {
  char *dst = tu_strf("%s/t.lance", scratch);
  char *cmd = tu_strf("cp -r '%s/%s/t.lance' '%s' && chmod -R u+w '%s'", tu_vectors_dir(), name, dst, dst);
  assert_int_equal(system(cmd), 0);
  free(cmd);
  return dst;
}

/* The table's storage in a test: durable or not, with test faults. */
static mw_storage_config_t test_storage(bool durable, const mw_storage_fault_t *fault) {
  mw_storage_config_t sc;
  mw_storage_config_init(&sc, NULL);
  sc.durable = durable;
  sc.fault = fault;
  return sc;
}

static void env_open(env_t *e, const char *vector, bool drop_memwal, const char *const *keys,
                     const char *const *values, size_t n) {
  memset(e, 0, sizeof *e);
  assert_int_equal(uv_loop_init(&e->loop), 0);
  e->scratch = tu_mkdtemp("engine");
  e->table_dir = copy_vector(vector, e->scratch);
  if (drop_memwal) {
    char *p = tu_strf("%s/_mem_wal", e->table_dir);
    tu_rmtree(p);
    free(p);
  }
  mw_storage_config_t sc = test_storage(false, NULL);
  mw_table_opts_t o = {.config_keys = keys, .config_values = values, .n_config = n,
                       .storage = &sc, .sstable_seed = 7};
  mw_err_t err = {0};
  int rc = mw_table_open(&e->loop, e->table_dir, &o, &e->t, &err);
  if (rc < 0) fail_msg("open: %s", err.msg);
}

static bool closed_flag;
static void on_table_closed(mw_table_t *t) {
  (void)t;
  closed_flag = true;
}

/* memwal-inspect on what a test leaves in its scratch directory: every
 * object decodes and verify passes (tests/inspect/inspect_tables.py). A
 * table whose _versions/ is there must be found (a finder that saw nothing
 * would pass vacuously); a dropped one is gone. */
static void inspect_scratch(const char *scratch, const char *table_dir, const char *allow) {
  char *v = tu_strf("%s/_versions", table_dir);
  struct stat sb;
  unsigned want = stat(v, &sb) == 0 ? 1 : 0;
  free(v);
  if (tu_inspect_tables(scratch, allow, want) != 0) fail_msg("memwal-inspect on %s failed (see above)", scratch);
}

/* Release every ACTIVE shard, close the table, inspect and remove the
 * scratch copy. */
static void env_close(env_t *e) {
  for (size_t i = 0; i < e->t->n_shards; i++) {
    mw_shard_t *s = &e->t->shards[i]->shard;
    if (mw_shard_state(s) != MW_SS_ACTIVE) continue;
    done_t d = {0};
    assert_int_equal(mw_shard_release(s, on_done, &d), 0);
    run_until(&e->loop, &d.fired);
    assert_int_equal(d.status, 0);
  }
  closed_flag = false;
  assert_int_equal(mw_table_close(e->t, on_table_closed), 0);
  run_until(&e->loop, &closed_flag);
  uv_run(&e->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&e->loop), 0);
  inspect_scratch(e->scratch, e->table_dir, e->inspect_allow);
  tu_rmtree(e->scratch);
  free(e->scratch);
  free(e->table_dir);
}

static mw_shard_t *unsharded(env_t *e) {
  uint8_t id[16];
  mw_shard_uuid_unsharded(id);
  mw_shard_t *s = mw_table_shard(e->t, id, true);
  assert_non_null(s);
  return s;
}

/* A second table handle (its own storage) on a's directory and a's loop: a
 * second writer process, in effect. Only b->t is set. */
static void env_open_second(env_t *a, env_t *b) {
  memset(b, 0, sizeof *b);
  mw_storage_config_t sc = test_storage(false, NULL);
  mw_table_opts_t o = {.storage = &sc};
  mw_err_t err = {0};
  if (mw_table_open(&a->loop, a->table_dir, &o, &b->t, &err) != 0) fail_msg("second handle: %s", err.msg);
}

static void env_close_second(env_t *a, env_t *b) {
  closed_flag = false;
  assert_int_equal(mw_table_close(b->t, on_table_closed), 0);
  run_until(&a->loop, &closed_flag);
}

static void claim_ok(env_t *e, mw_shard_t *s) {
  done_t d = {0};
  assert_int_equal(mw_shard_claim(s, on_done, &d), 0);
  run_until(&e->loop, &d.fired);
  if (d.status != 0) fail_msg("claim: %d %s", d.status, d.reason);
  assert_int_equal(mw_shard_state(s), MW_SS_ACTIVE);
}

static char *shard_path(env_t *e, const char *sub) {
  return tu_strf("%s/_mem_wal/" UNSHARDED "/%s", e->table_dir, sub);
}

static uint8_t *read_rel(env_t *e, const char *sub, size_t *n) {
  char *p = shard_path(e, sub);
  uint8_t *b = tu_read_file(p, n);
  free(p);
  return b;
}

static bool exists_rel(env_t *e, const char *sub) {
  char *p = shard_path(e, sub);
  struct stat st;
  bool ok = stat(p, &st) == 0;
  free(p);
  return ok;
}

static char *name_of(uint64_t n, const char *dir, const char *ext) {
  char name[MW_BITREV_NAME_BYTES];
  assert_true(mw_bitrev_name(n, ext, name, sizeof name) > 0);
  return tu_strf("%s/%s", dir, name);
}

static void read_manifest(env_t *e, uint64_t v, mw_shard_manifest_t *m) {
  char *rel = name_of(v, "manifest", ".binpb");
  size_t n;
  uint8_t *b = read_rel(e, rel, &n);
  if (b == NULL) fail_msg("missing manifest v%" PRIu64, v);
  mw_err_t err = {0};
  assert_int_equal(mw_shard_manifest_decode(b, n, m, &err), 0);
  free(b);
  free(rel);
}

/* Writes: a counter of acks, with order checks. */
typedef struct wctx {
  int acked, failed, last_status;
  int order[4096];
  char reason[600];
  bool stop_flag;
  int expect;
} wctx_t;

typedef struct wreq {
  mw_shard_write_t w;
  wctx_t *c;
  int idx;
  env_t *e;
  bool check_absent;   /* durable_write=false: the WAL entry must not exist yet */
  bool absent_seen;
} wreq_t;

static void on_write(mw_shard_write_t *w, int status, const char *reason) {
  wreq_t *r = w->data;
  wctx_t *c = r->c;
  if (status == 0) c->order[c->acked++] = r->idx;
  else {
    c->failed++;
    c->last_status = status;
    snprintf(c->reason, sizeof c->reason, "%s", reason ? reason : "");
  }
  if (r->check_absent) r->absent_seen = !exists_rel(r->e, "wal/1000000000000000000000000000000000000000000000000000000000000000.arrow");
  if (c->acked + c->failed == c->expect) c->stop_flag = true;
}

static int write_rows(env_t *e, mw_shard_t *s, er_model_t *m, wreq_t *r, wctx_t *c, int idx, int64_t rows) {
  mw_batch_t b;
  assert_int_equal(er_batch(m, &e->t->schema, rows, 0.0, &b), 0);
  r->w.data = r;
  r->c = c;
  r->idx = idx;
  r->e = e;
  int rc = mw_shard_write(s, &r->w, &b, on_write);
  if (rc < 0) mw_batch_free(&b);
  return rc;
}

/* ------------------------------------------------------------------ claim */

static void test_claim_fresh_v1_bytes(void **state) {
  (void)state;
  env_t e;
  env_open(&e, "unsharded-small", true, NULL, NULL, 0);
  mw_shard_t *s = unsharded(&e);
  claim_ok(&e, s);
  mw_shard_stats_t st;
  mw_shard_stats(s, &st);
  assert_int_equal(st.epoch, 1);
  assert_int_equal(st.manifest_version, 1);
  assert_int_equal(st.wal_next_position, 1);
  size_t n1, n2;
  uint8_t *ours = read_rel(&e, "manifest/1000000000000000000000000000000000000000000000000000000000000000.binpb", &n1);
  char *golden = tu_strf("%s/unsharded-small/t.lance/_mem_wal/" UNSHARDED
                         "/manifest/1000000000000000000000000000000000000000000000000000000000000000.binpb",
                         tu_vectors_dir());
  uint8_t *lance = tu_read_file(golden, &n2);
  assert_non_null(ours);
  assert_non_null(lance);
  assert_int_equal(n1, 28);
  assert_int_equal(n1, n2);
  assert_memory_equal(ours, lance, n1);
  size_t nh;
  uint8_t *hint = read_rel(&e, "manifest/version_hint.json", &nh);
  assert_int_equal(nh, 13);
  assert_memory_equal(hint, "{\"version\":1}", 13);
  /* epoch 1: no fence sentinel */
  assert_false(exists_rel(&e, "wal/1000000000000000000000000000000000000000000000000000000000000000.arrow"));
  free(hint);
  free(ours);
  free(lance);
  free(golden);
  env_close(&e);
}

static void test_claim_bumps_epoch_writes_sentinel(void **state) {
  (void)state;
  env_t e;
  env_open(&e, "unsharded-small", false, NULL, NULL, 0);
  mw_shard_t *s = unsharded(&e);
  claim_ok(&e, s);
  mw_shard_stats_t st;
  mw_shard_stats(s, &st);
  /* vector: v1 epoch 1, v2 flush (replay_after 3) -> we write v3 epoch 2 */
  assert_int_equal(st.epoch, 2);
  assert_int_equal(st.manifest_version, 3);
  mw_shard_manifest_t m2, m3;
  mw_shard_manifest_init(&m2);
  mw_shard_manifest_init(&m3);
  read_manifest(&e, 2, &m2);
  read_manifest(&e, 3, &m3);
  assert_int_equal(m3.writer_epoch, 2);
  assert_int_equal(m3.n_sstables, m2.n_sstables);
  assert_int_equal(m3.replay_after_wal_entry_position, m2.replay_after_wal_entry_position);
  assert_int_equal(m3.current_generation, m2.current_generation);
  /* the sentinel sits at the WAL tip (3 entries -> position 4) */
  char *rel = name_of(4, "wal", ".arrow");
  size_t n;
  uint8_t *b = read_rel(&e, rel, &n);
  assert_non_null(b);
  assert_int_equal(n, 200);
  mw_ipc_stream_t sx;
  mw_err_t err = {0};
  assert_int_equal(mw_ipc_decode(b, n, NULL, &sx, &err), 0);
  assert_int_equal(sx.n_batches, 0);
  assert_true(mw_ipc_is_fence_sentinel(&sx.schema));
  uint64_t ep;
  assert_int_equal(mw_ipc_writer_epoch(&sx.schema, &ep, &err), 0);
  assert_int_equal(ep, 2);
  mw_ipc_stream_free(&sx);
  /* replay started after replay_after = 3: the sentinel, then the hole at 5 */
  assert_int_equal(st.wal_next_position, 5);
  assert_int_equal(st.memtable_rows, 0);
  free(b);
  free(rel);
  mw_shard_manifest_free(&m2);
  mw_shard_manifest_free(&m3);
  env_close(&e);
}

static void test_sealed_refuses_claim_then_unseal(void **state) {
  (void)state;
  env_t e;
  env_open(&e, "unsharded-small", false, NULL, NULL, 0);
  /* hand-write v3 = v2 with status SEALED (as a drop coordinator would) */
  mw_shard_manifest_t m;
  mw_shard_manifest_init(&m);
  read_manifest(&e, 2, &m);
  m.version = 3;
  m.status = MW_SHARD_SEALED;
  mw_buf_t buf = MW_BUF_INIT;
  assert_int_equal(mw_shard_manifest_encode(&m, &buf), 0);
  char *rel = name_of(3, "manifest", ".binpb");
  char *p = shard_path(&e, rel);
  assert_int_equal(tu_write_file(p, buf.data, buf.len), 0);
  mw_shard_t *s = unsharded(&e);
  done_t d = {0};
  assert_int_equal(mw_shard_claim(s, on_done, &d), 0);
  run_until(&e.loop, &d.fired);
  assert_int_equal(d.status, -EROFS);
  assert_non_null(strstr(d.reason, "shard " UNSHARDED " is sealed; refusing claim"));
  assert_int_equal(mw_shard_state(s), MW_SS_SEALED);
  assert_false(exists_rel(&e, "manifest/0010000000000000000000000000000000000000000000000000000000000000.binpb"));
  /* a write to a sealed shard is refused at once */
  wctx_t c = {0};
  wreq_t r = {0};
  er_model_t mod;
  er_model_init(&mod, 3, 100);
  assert_int_equal(write_rows(&e, s, &mod, &r, &c, 0, 5), -EROFS);
  /* unseal: commit ACTIVE (v4, epoch 1), then claim (v5, epoch 2) */
  d = (done_t){0};
  assert_int_equal(mw_shard_unseal(s, on_done, &d), 0);
  run_until(&e.loop, &d.fired);
  if (d.status != 0) fail_msg("unseal: %s", d.reason);
  mw_shard_stats_t st;
  mw_shard_stats(s, &st);
  assert_int_equal(st.state, MW_SS_ACTIVE);
  assert_int_equal(st.manifest_version, 5);
  assert_int_equal(st.epoch, 2);
  assert_false(st.sealed);
  /* seal through the engine: pending writes become durable, status SEALED */
  c = (wctx_t){.expect = 1};
  assert_int_equal(write_rows(&e, s, &mod, &r, &c, 0, 5), 0);
  d = (done_t){0};
  assert_int_equal(mw_shard_seal(s, on_done, &d), 0);
  run_until(&e.loop, &d.fired);
  assert_int_equal(d.status, 0);
  assert_int_equal(c.acked, 1);
  assert_int_equal(mw_shard_state(s), MW_SS_SEALED);
  mw_shard_manifest_t m6;
  mw_shard_manifest_init(&m6);
  read_manifest(&e, 6, &m6);
  assert_int_equal(m6.status, MW_SHARD_SEALED);
  assert_int_equal(m6.writer_epoch, 2);
  mw_shard_manifest_free(&m6);
  /* drop: the shard directory goes */
  d = (done_t){0};
  assert_int_equal(mw_shard_drop(s, on_done, &d), 0);
  run_until(&e.loop, &d.fired);
  assert_int_equal(d.status, 0);
  assert_int_equal(mw_shard_state(s), MW_SS_CLOSED);
  assert_false(exists_rel(&e, "manifest"));
  assert_false(exists_rel(&e, "wal"));
  er_model_free(&mod);
  mw_buf_free(&buf);
  free(p);
  free(rel);
  mw_shard_manifest_free(&m);
  env_close(&e);
}

/* --------------------------------------------------------------- fencing */

/* Writers A and B: two handles on one copy of "unsharded-small". A claims
 * the unsharded shard (epoch 1) and gets 10 rows acknowledged (WAL
 * position 1); B has claimed nothing yet. */
static mw_shard_t *open_two_writers(env_t *a, env_t *b, er_model_t *mod, uint64_t seed, wreq_t *r) {
  env_open(a, "unsharded-small", true, NULL, NULL, 0);
  env_open_second(a, b);
  mw_shard_t *sa = unsharded(a);
  claim_ok(a, sa);
  er_model_init(mod, seed, 1000);
  wctx_t c = {.expect = 1};
  assert_int_equal(write_rows(a, sa, mod, r, &c, 0, 10), 0);
  run_until(&a->loop, &c.stop_flag);
  assert_int_equal(c.acked, 1);
  return sa;
}

static void test_two_writers_fence(void **state) {
  (void)state;
  env_t a, b;
  er_model_t mod;
  wreq_t r[4] = {0};
  mw_shard_t *sa = open_two_writers(&a, &b, &mod, 5, &r[0]);
  wctx_t c;
  /* B claims: epoch 2, sentinel at position 2, replays A's entry */
  mw_shard_t *sb = unsharded(&b);
  done_t d = {0};
  assert_int_equal(mw_shard_claim(sb, on_done, &d), 0);
  run_until(&a.loop, &d.fired);
  assert_int_equal(d.status, 0);
  mw_shard_stats_t st;
  mw_shard_stats(sb, &st);
  assert_int_equal(st.epoch, 2);
  assert_int_equal(st.memtable_rows, 10);
  assert_int_equal(st.wal_next_position, 3);
  /* A's next write collides with the sentinel and is fenced */
  c = (wctx_t){.expect = 2};
  assert_int_equal(write_rows(&a, sa, &mod, &r[1], &c, 1, 10), 0);
  assert_int_equal(write_rows(&a, sa, &mod, &r[2], &c, 2, 10), 0);
  run_until(&a.loop, &c.stop_flag);
  assert_int_equal(c.acked, 0);
  assert_int_equal(c.failed, 2);
  assert_int_equal(c.last_status, -ESTALE);
  assert_non_null(strstr(c.reason, "stored epoch 2"));
  assert_int_equal(mw_shard_state(sa), MW_SS_FENCED);
  assert_int_equal(write_rows(&a, sa, &mod, &r[3], &c, 3, 1), -ESTALE);
  /* nothing of A's landed after the sentinel */
  assert_false(exists_rel(&a, "wal/1100000000000000000000000000000000000000000000000000000000000000.arrow"));
  /* B keeps working and flushes A's acked rows with its own */
  c = (wctx_t){.expect = 1};
  assert_int_equal(write_rows(&a, sb, &mod, &r[0], &c, 0, 5), 0);
  run_until(&a.loop, &c.stop_flag);
  assert_int_equal(c.acked, 1);
  d = (done_t){0};
  assert_int_equal(mw_shard_flush(sb, on_done, &d), 0);
  run_until(&a.loop, &d.fired);
  assert_int_equal(d.status, 0);
  mw_shard_stats(sb, &st);
  assert_int_equal(st.sstables, 1);
  assert_int_equal(st.replay_after, 3);
  d = (done_t){0};
  assert_int_equal(mw_shard_release(sb, on_done, &d), 0);
  run_until(&a.loop, &d.fired);
  env_close_second(&a, &b);
  er_model_free(&mod);
  env_close(&a);
}

/* An operator's claim of a shard already ACTIVE here reads the manifest:
 * still ours → -EALREADY naming the epoch, nothing changes; taken by a peer
 * while idle (nothing written since, so nothing noticed the fence) → the
 * shard parks FENCED and claims it back at a newer epoch, replaying the
 * peer's rows, and the peer is fenced in turn. */
static void test_claim_of_active_shard_checks_manifest(void **state) {
  (void)state;
  env_t a, b;
  er_model_t mod;
  wreq_t r[4] = {0};
  mw_shard_t *sa = open_two_writers(&a, &b, &mod, 31, &r[0]);
  wctx_t c;
  /* still ours: refused, and the shard keeps its epoch and keeps writing */
  done_t d = {0};
  assert_int_equal(mw_shard_claim(sa, on_done, &d), 0);
  run_until(&a.loop, &d.fired);
  assert_int_equal(d.status, -EALREADY);
  assert_non_null(strstr(d.reason, "already ACTIVE here at epoch 1"));
  mw_shard_stats_t st;
  mw_shard_stats(sa, &st);
  assert_int_equal(st.state, MW_SS_ACTIVE);
  assert_int_equal(st.epoch, 1);
  c = (wctx_t){.expect = 1};
  assert_int_equal(write_rows(&a, sa, &mod, &r[1], &c, 1, 5), 0);
  run_until(&a.loop, &c.stop_flag);
  assert_int_equal(c.acked, 1);
  /* B takes the shard (epoch 2) and writes; A, idle, notices nothing */
  mw_shard_t *sb = unsharded(&b);
  claim_ok(&a, sb);
  c = (wctx_t){.expect = 1};
  assert_int_equal(write_rows(&a, sb, &mod, &r[2], &c, 2, 7), 0);
  run_until(&a.loop, &c.stop_flag);
  assert_int_equal(c.acked, 1);
  assert_int_equal(mw_shard_state(sa), MW_SS_ACTIVE);
  /* A's claim finds epoch 2 in the manifest and takes the shard back */
  d = (done_t){0};
  assert_int_equal(mw_shard_claim(sa, on_done, &d), 0);
  run_until(&a.loop, &d.fired);
  if (d.status != 0) fail_msg("claim back: %d %s", d.status, d.reason);
  mw_shard_stats(sa, &st);
  assert_int_equal(st.state, MW_SS_ACTIVE);
  assert_int_equal(st.epoch, 3);
  assert_int_equal(st.memtable_rows, 22); /* 10 + 5 (A, epoch 1) + 7 (B, epoch 2) */
  /* B is fenced in turn at its next write */
  c = (wctx_t){.expect = 1};
  assert_int_equal(write_rows(&a, sb, &mod, &r[3], &c, 3, 1), 0);
  run_until(&a.loop, &c.stop_flag);
  assert_int_equal(c.acked, 0);
  assert_int_equal(c.last_status, -ESTALE);
  assert_int_equal(mw_shard_state(sb), MW_SS_FENCED);
  /* B claims back (epoch 4) and A, stale again, gets a write and a claim
   * at once: whichever of its WAL put and the claim's manifest read meets
   * the fence first, the write is refused and the claim takes the shard */
  claim_ok(&a, sb);
  c = (wctx_t){.expect = 1};
  d = (done_t){0};
  assert_int_equal(write_rows(&a, sa, &mod, &r[1], &c, 4, 3), 0);
  assert_int_equal(mw_shard_claim(sa, on_done, &d), 0);
  run_until(&a.loop, &c.stop_flag);
  run_until(&a.loop, &d.fired);
  assert_int_equal(c.acked, 0);
  assert_int_equal(c.last_status, -ESTALE);
  if (d.status != 0) fail_msg("claim during a fenced write: %d %s", d.status, d.reason);
  mw_shard_stats(sa, &st);
  assert_int_equal(st.state, MW_SS_ACTIVE);
  assert_int_equal(st.epoch, 5);
  c = (wctx_t){.expect = 1}; /* B, stale now, notices at its next write */
  assert_int_equal(write_rows(&a, sb, &mod, &r[3], &c, 5, 1), 0);
  run_until(&a.loop, &c.stop_flag);
  assert_int_equal(c.last_status, -ESTALE);
  d = (done_t){0};
  assert_int_equal(mw_shard_release(sa, on_done, &d), 0);
  run_until(&a.loop, &d.fired);
  assert_int_equal(d.status, 0);
  env_close_second(&a, &b);
  er_model_free(&mod);
  env_close(&a);
}

/* A claim of a shard parked FENCED while its old epoch's flush is still in
 * flight waits for that flush to end on the fence (as the claim of a stale
 * ACTIVE shard does) instead of refusing with -EBUSY: an operator's claim
 * right after a fence must win. The flush is held by a storage delay of
 * 2 s on A's requests (submitted while it is set); A's WAL put, submitted
 * with no delay, meets B's sentinel at once and parks the shard. */
static void test_claim_of_fenced_shard_waits_for_flush(void **state) {
  (void)state;
  env_t a, b;
  er_model_t mod;
  wreq_t r[2] = {0};
  mw_shard_t *sa = open_two_writers(&a, &b, &mod, 37, &r[0]);
  mw_shard_t *sb = unsharded(&b);
  claim_ok(&a, sb); /* epoch 2; A, idle, still believes it is ACTIVE */
  mw_storage_fault_t f = {.delay_ms = 2000};
  assert_int_equal(mw_storage_fault_set(a.t->st, &f), 0);
  done_t df = {0};
  assert_int_equal(mw_shard_flush(sa, on_done, &df), 0); /* its first read waits 2 s */
  assert_int_equal(mw_storage_fault_set(a.t->st, NULL), 0);
  wctx_t c = {.expect = 1};
  assert_int_equal(write_rows(&a, sa, &mod, &r[1], &c, 1, 5), 0);
  run_until(&a.loop, &c.stop_flag);
  assert_int_equal(c.last_status, -ESTALE);
  assert_int_equal(mw_shard_state(sa), MW_SS_FENCED);
  assert_true(df.fired); /* the park answered the flush */
  assert_int_equal(df.status, -ESTALE);
  assert_true(sa->flush.busy); /* the precondition: the old epoch's flush is in flight */
  done_t d = {0};
  assert_int_equal(mw_shard_claim(sa, on_done, &d), 0);
  run_until(&a.loop, &d.fired);
  if (d.status != 0) fail_msg("claim of a FENCED shard with a flush in flight: %d %s", d.status, d.reason);
  mw_shard_stats_t st;
  mw_shard_stats(sa, &st);
  assert_int_equal(st.state, MW_SS_ACTIVE);
  assert_int_equal(st.epoch, 3);
  assert_int_equal(st.memtable_rows, 10); /* A's acked entry, replayed; the refused 5 are not there */
  d = (done_t){0}; /* B, stale now: its release-flush meets A's fence */
  assert_int_equal(mw_shard_release(sb, on_done, &d), 0);
  run_until(&a.loop, &d.fired);
  assert_int_equal(d.status, -ESTALE);
  env_close_second(&a, &b);
  er_model_free(&mod);
  env_close(&a);
}

/* An entry of an older epoch ABOVE a newer claim's sentinel was written by a
 * fenced writer and never acknowledged (a pipelined writer can leave such
 * entries): replay skips it. Entries below the sentinel are replayed. */
static void test_replay_skips_stale_entries_above_sentinel(void **state) {
  (void)state;
  env_t a, b;
  er_model_t mod;
  wreq_t r = {0};
  mw_shard_t *sa = open_two_writers(&a, &b, &mod, 29, &r);
  mw_shard_t *sb = unsharded(&b);
  claim_ok(&a, sb); /* epoch 2: sentinel at 2, replays A's 10 rows */
  mw_shard_stats_t st;
  mw_shard_stats(sb, &st);
  assert_int_equal(st.memtable_rows, 10);
  done_t d = {0};
  assert_int_equal(mw_shard_release(sb, on_done, &d), 0); /* flush: replay_after = 1 */
  run_until(&a.loop, &d.fired);
  assert_int_equal(d.status, 0);
  /* a stale epoch-1 entry lands at 3, above the epoch-2 sentinel */
  size_t n;
  uint8_t *bytes = read_rel(&a, "wal/1000000000000000000000000000000000000000000000000000000000000000.arrow", &n);
  char *p3 = shard_path(&a, "wal/1100000000000000000000000000000000000000000000000000000000000000.arrow");
  assert_int_equal(tu_write_file(p3, bytes, n), 0);
  claim_ok(&a, sb); /* epoch 3: replays 2 (sentinel), skips 3, 4 = its sentinel */
  mw_shard_stats(sb, &st);
  assert_int_equal(st.epoch, 3);
  assert_int_equal(st.memtable_rows, 0);
  assert_int_equal(st.wal_next_position, 5);
  /* A still believes it is ACTIVE: its release-flush is fenced */
  d = (done_t){0};
  assert_int_equal(mw_shard_release(sa, on_done, &d), 0);
  run_until(&a.loop, &d.fired);
  assert_int_equal(d.status, -ESTALE);
  assert_non_null(strstr(d.reason, "stored epoch 3"));
  assert_int_equal(mw_shard_state(sa), MW_SS_FENCED);
  d = (done_t){0};
  assert_int_equal(mw_shard_release(sb, on_done, &d), 0);
  run_until(&a.loop, &d.fired);
  env_close_second(&a, &b);
  free(p3);
  free(bytes);
  er_model_free(&mod);
  a.inspect_allow = "epochs never decrease"; /* the stale entry this test planted */
  env_close(&a);
}

/* ---------------------------------------------------------------- replay */

/* A flush asked for while one runs (an operator's `memwalctl flush` while
 * recovery flushes what it replayed) follows it instead of failing -EBUSY:
 * both answer 0, in order; a third while one waits is refused. */
typedef struct order {
  done_t d;
  int *seq;
  int at;
} order_t;

static void on_order(mw_shard_t *s, int status, const char *reason, void *arg) {
  order_t *o = arg;
  assert_false(o->d.fired); /* answered once */
  on_done(s, status, reason, &o->d);
  o->at = ++*o->seq;
}

static void test_flush_behind_flush(void **state) {
  (void)state;
  env_t e;
  env_open(&e, "unsharded-unflushed", false, NULL, NULL, 0);
  mw_shard_t *s = unsharded(&e);
  claim_ok(&e, s);
  int seq = 0;
  order_t a = {.seq = &seq}, b = {.seq = &seq};
  done_t c = {0};
  assert_int_equal(mw_shard_flush(s, on_order, &a), 0);
  assert_int_equal(mw_shard_flush(s, on_order, &b), 0); /* was -EBUSY */
  assert_int_equal(mw_shard_flush(s, on_done, &c), -EBUSY); /* one waits already */
  run_until(&e.loop, &b.d.fired);
  assert_true(a.d.fired);
  assert_int_equal(a.d.status, 0);
  assert_int_equal(b.d.status, 0);
  assert_int_equal(a.at, 1);
  assert_int_equal(b.at, 2);
  assert_false(c.fired);
  mw_shard_stats_t st;
  mw_shard_stats(s, &st);
  assert_int_equal(st.memtable_rows, 0);
  assert_int_equal(st.frozen, 0);
  /* idle again: a flush begins at once and answers */
  done_t d = {0};
  assert_int_equal(mw_shard_flush(s, on_done, &d), 0);
  run_until(&e.loop, &d.fired);
  assert_int_equal(d.status, 0);
  d = (done_t){0};
  assert_int_equal(mw_shard_release(s, on_done, &d), 0);
  run_until(&e.loop, &d.fired);
  assert_int_equal(d.status, 0);
  env_close(&e);
}

static void test_replay_unflushed_then_flush(void **state) {
  (void)state;
  env_t e;
  env_open(&e, "unsharded-unflushed", false, NULL, NULL, 0);
  /* the WAL rows, decoded independently */
  er_row_t *want = NULL;
  size_t n_want = 0;
  for (uint64_t p = 1; p <= 3; p++) {
    char *rel = name_of(p, "wal", ".arrow");
    size_t n;
    uint8_t *bytes = read_rel(&e, rel, &n);
    assert_non_null(bytes);
    mw_batch_t *bs;
    size_t nb;
    uint64_t ep;
    mw_err_t err = {0};
    assert_int_equal(mw_wal_decode_entry(bytes, n, &e.t->schema, &ep, &bs, &nb, &err), 0);
    assert_int_equal(ep, 1);
    for (size_t i = 0; i < nb; i++) {
      want = realloc(want, (n_want + (size_t)bs[i].n_rows) * sizeof *want);
      for (int64_t r = 0; r < bs[i].n_rows; r++) er_row_read(&bs[i], r, &want[n_want++]);
      mw_batch_free(&bs[i]);
    }
    free(bs);
    free(bytes);
    free(rel);
  }
  assert_int_equal(n_want, 300);
  mw_shard_t *s = unsharded(&e);
  claim_ok(&e, s);
  mw_shard_stats_t st;
  mw_shard_stats(s, &st);
  assert_int_equal(st.epoch, 2);
  assert_int_equal(st.memtable_rows, 300);
  assert_int_equal(st.wal_next_position, 5); /* sentinel at 4 */
  done_t d = {0};
  assert_int_equal(mw_shard_flush(s, on_done, &d), 0);
  run_until(&e.loop, &d.fired);
  assert_int_equal(d.status, 0);
  mw_shard_manifest_t m;
  mw_shard_manifest_init(&m);
  read_manifest(&e, 3, &m);
  assert_int_equal(m.writer_epoch, 2);
  assert_int_equal(m.replay_after_wal_entry_position, 3);
  assert_int_equal(m.wal_entry_position_last_seen, 3);
  assert_int_equal(m.current_generation, 2);
  assert_int_equal(m.n_sstables, 1);
  assert_int_equal(m.sstables[0].generation, 1);
  assert_int_equal(m.sstables[0].physical_rows, 300);
  assert_int_equal(m.sstables[0].primary_key_bytes, 2400);
  /* read the SSTable's data file back */
  char *dd = tu_strf("%s/_mem_wal/" UNSHARDED "/%s/data", e.table_dir, m.sstables[0].path);
  char **names;
  size_t nn = tu_list_dir(dd, ".lance", &names);
  assert_int_equal(nn, 1);
  char *fp = tu_strf("%s/%s", dd, names[0]);
  size_t flen;
  uint8_t *fb = tu_read_file(fp, &flen);
  mw_datafile_t df;
  mw_err_t err = {0};
  assert_int_equal(mw_datafile_open(&df, fb, flen, NULL, &err), 0);
  mw_batch_t got;
  assert_int_equal(mw_datafile_read_batch(&df, &got, &err), 0);
  assert_int_equal(got.n_rows, 300);
  for (int64_t r = 0; r < got.n_rows; r++) {
    er_row_t x;
    er_row_read(&got, r, &x);
    if (!er_row_equal(&x, &want[r])) fail_msg("row %" PRId64 " differs (id %" PRId64 ")", r, x.id);
  }
  mw_batch_free(&got);
  mw_datafile_close(&df);
  free(fb);
  free(fp);
  tu_free_names(names, nn);
  free(dd);
  free(want);
  /* a second claim replays from 4: the sentinel only */
  d = (done_t){0};
  assert_int_equal(mw_shard_release(s, on_done, &d), 0);
  run_until(&e.loop, &d.fired);
  claim_ok(&e, s);
  mw_shard_stats(s, &st);
  assert_int_equal(st.epoch, 3);
  assert_int_equal(st.memtable_rows, 0);
  mw_shard_manifest_free(&m);
  env_close(&e);
}

/* An ARROW frame's record batch messages (mw_ipc_rebatch, with room before
 * them as net/arrowframe.c leaves it) that make a WAL entry alone are
 * written from their own buffer (wal.h: in place), and the entry is the
 * stream the copying path builds from the same messages, byte for byte; a
 * batch without messages is encoded. Status counts both paths, and a new
 * claim replays both entries' rows. */
static void test_wal_pass_through_in_place(void **state) {
  (void)state;
  env_t e;
  env_open(&e, "unsharded-small", true, NULL, NULL, 0);
  mw_shard_t *s = unsharded(&e);
  claim_ok(&e, s);
  er_model_t mod;
  er_model_init(&mod, 41, 1000);
  mw_batch_t b, b2;
  assert_int_equal(er_batch(&mod, &e.t->schema, 50, 0.0, &b), 0);
  assert_int_equal(er_batch(&mod, &e.t->schema, 30, 0.0, &b2), 0);
  er_row_t want[80];
  for (int64_t r = 0; r < 50; r++) er_row_read(&b, r, &want[r]);
  for (int64_t r = 0; r < 30; r++) er_row_read(&b2, r, &want[50 + r]);
  /* the frame: the table's columns as a producer's stream */
  const mw_batch_t *bp = &b;
  mw_buf_t frame = MW_BUF_INIT;
  mw_err_t err = {0};
  assert_int_equal(mw_ipc_encode(&e.t->schema, &bp, 1, NULL, &frame, &err), 0);
  mw_ipc_stream_t st;
  assert_int_equal(mw_ipc_decode(frame.data, frame.len, NULL, &st, &err), 0);
  int map[MW_MAX_FIELDS];
  for (size_t i = 0; i < e.t->schema.n_fields; i++) map[i] = (int)i;
  enum { HEAD = 1024 };
  assert_int_equal(mw_buf_fill(&b.wal_ipc, 0, HEAD), 0);
  assert_int_equal(mw_ipc_rebatch(frame.data, frame.len, &st, &e.t->schema, map, &b.wal_ipc, &err), 0);
  b.wal_ipc_head = HEAD;
  mw_buf_t msgs = MW_BUF_INIT; /* a copy, for the copying path's bytes */
  assert_int_equal(mw_buf_append(&msgs, b.wal_ipc.data + HEAD, b.wal_ipc.len - HEAD), 0);
  wctx_t c = {.expect = 1};
  wreq_t r[2] = {0};
  r[0].w.data = &r[0], r[0].c = &c, r[0].e = &e;
  assert_int_equal(mw_shard_write(s, &r[0].w, &b, on_write), 0);
  run_until(&e.loop, &c.stop_flag);
  assert_int_equal(c.acked, 1);
  assert_int_equal(s->wal.in_place, 1);
  mw_shard_stats_t sst;
  mw_shard_stats(s, &sst);
  assert_int_equal(sst.wal_batches_passed_through, 1);
  assert_int_equal(sst.wal_bytes_passed_through, msgs.len);
  assert_int_equal(sst.wal_batches_encoded, 0);
  /* the entry on disk = the stream encode_parts builds from the messages */
  size_t n;
  uint8_t *got = read_rel(&e, "wal/1000000000000000000000000000000000000000000000000000000000000000.arrow", &n);
  assert_non_null(got);
  mw_ipc_part_t part = {&b, msgs.data, msgs.len};
  mw_buf_t copied = MW_BUF_INIT;
  assert_int_equal(mw_ipc_writer_encode_parts(&s->wal.ipc, &s->wal.schema, &part, 1, NULL, &copied, &err), 0);
  assert_int_equal(n, copied.len);
  assert_memory_equal(got, copied.data, n);
  free(got);
  /* a batch without messages: encoded */
  c = (wctx_t){.expect = 1};
  r[1].w.data = &r[1], r[1].c = &c, r[1].e = &e;
  assert_int_equal(mw_shard_write(s, &r[1].w, &b2, on_write), 0);
  run_until(&e.loop, &c.stop_flag);
  assert_int_equal(c.acked, 1);
  mw_shard_stats(s, &sst);
  assert_int_equal(sst.wal_batches_passed_through, 1);
  assert_int_equal(sst.wal_batches_encoded, 1);
  assert_true(sst.wal_bytes_encoded > 0);
  assert_int_equal(s->wal.in_place, 1);
  /* a second writer's claim replays both entries: the same 80 rows */
  env_t b_env;
  env_open_second(&e, &b_env);
  mw_shard_t *sb = unsharded(&b_env);
  claim_ok(&e, sb);
  mw_shard_stats(sb, &sst);
  assert_int_equal(sst.memtable_rows, 80);
  const mw_memtable_t *m = &sb->active->m;
  int64_t k = 0;
  for (size_t i = 0; i < m->n_batches; i++)
    for (int64_t row = 0; row < m->batches[i].n_rows; row++, k++) {
      er_row_t x;
      er_row_read(&m->batches[i], row, &x);
      if (!er_row_equal(&x, &want[k])) fail_msg("replayed row %" PRId64 " differs", k);
    }
  assert_int_equal(k, 80);
  done_t d = {0};
  assert_int_equal(mw_shard_release(sb, on_done, &d), 0);
  run_until(&e.loop, &d.fired);
  assert_int_equal(d.status, 0);
  d = (done_t){0}; /* the first writer, fenced by the claim */
  assert_int_equal(mw_shard_release(s, on_done, &d), 0);
  run_until(&e.loop, &d.fired);
  assert_int_equal(d.status, -ESTALE);
  env_close_second(&e, &b_env);
  mw_buf_free(&copied);
  mw_buf_free(&msgs);
  mw_buf_free(&frame);
  mw_ipc_stream_free(&st);
  er_model_free(&mod);
  env_close(&e);
}

/* Replay decodes an entry's rows as views into the entry as read (wal.h
 * mw_wal_decode_entry_view) when they are at least 7/8 of it: the
 * MemTable's batches share the entry's blob, which its heap accounting
 * counts once; an entry of one small row is copied instead (its blob
 * freed). The rows are the written ones either way. */
static void test_replay_views_entry(void **state) {
  (void)state;
  env_t e;
  env_open(&e, "unsharded-small", true, NULL, NULL, 0);
  mw_shard_t *s = unsharded(&e);
  claim_ok(&e, s);
  er_model_t mod;
  er_model_init(&mod, 43, 100000);
  enum { N = 3, ROWS = 4000 };
  wctx_t c = {.expect = N};
  wreq_t r[N + 1] = {0};
  for (int i = 0; i < N; i++) assert_int_equal(write_rows(&e, s, &mod, &r[i], &c, i, ROWS), 0);
  run_until(&e.loop, &c.stop_flag); /* written in one loop turn: one entry of 3 batches */
  assert_int_equal(c.acked, N);
  mw_shard_stats_t st;
  mw_shard_stats(s, &st);
  assert_int_equal(st.wal_entries, 1);
  c = (wctx_t){.expect = 1};
  assert_int_equal(write_rows(&e, s, &mod, &r[N], &c, N, 1), 0); /* a small entry */
  run_until(&e.loop, &c.stop_flag);
  assert_int_equal(c.acked, 1);
  /* what was written, row by row */
  const mw_memtable_t *ma = &s->active->m;
  assert_int_equal(ma->n_rows, N * ROWS + 1);
  er_row_t *want = calloc(N * ROWS + 1, sizeof *want);
  int64_t k = 0;
  for (size_t i = 0; i < ma->n_batches; i++)
    for (int64_t row = 0; row < ma->batches[i].n_rows; row++) er_row_read(&ma->batches[i], row, &want[k++]);
  env_t b_env;
  env_open_second(&e, &b_env);
  mw_shard_t *sb = unsharded(&b_env);
  claim_ok(&e, sb);
  const mw_memtable_t *m = &sb->active->m;
  assert_int_equal(m->n_rows, N * ROWS + 1);
  assert_int_equal(m->n_batches, N + 1);
  const mw_blob_t *blob = m->batches[0].backing;
  assert_non_null(blob);
  for (int i = 1; i < N; i++) assert_ptr_equal(m->batches[i].backing, blob); /* one entry, one blob */
  assert_null(m->batches[N].backing); /* the 1-row entry: copied */
  assert_int_equal(mw_blob_refs(blob), N);
  uint64_t viewed = 0;
  for (int i = 0; i < N; i++) viewed += mw_batch_view_bytes(&m->batches[i]);
  assert_true(viewed * 8 >= mw_blob_len(blob) * MW_WAL_VIEW_MIN_EIGHTHS);
  /* heap: the blob once, plus structs and the small batch's buffers */
  int64_t heap = mw_memtable_heap_bytes(m);
  assert_true(heap >= (int64_t)mw_blob_len(blob));
  assert_true(heap < (int64_t)mw_blob_len(blob) + 64 * 1024);
  k = 0;
  for (size_t i = 0; i < m->n_batches; i++)
    for (int64_t row = 0; row < m->batches[i].n_rows; row++, k++) {
      er_row_t x;
      er_row_read(&m->batches[i], row, &x);
      if (!er_row_equal(&x, &want[k])) fail_msg("replayed row %" PRId64 " differs", k);
    }
  /* the flush reads the views (then frees them with the MemTable) */
  done_t d = {0};
  assert_int_equal(mw_shard_release(sb, on_done, &d), 0);
  run_until(&e.loop, &d.fired);
  assert_int_equal(d.status, 0);
  d = (done_t){0};
  assert_int_equal(mw_shard_release(s, on_done, &d), 0);
  run_until(&e.loop, &d.fired);
  assert_int_equal(d.status, -ESTALE);
  env_close_second(&e, &b_env);
  free(want);
  er_model_free(&mod);
  env_close(&e);
}

/* The WAL stream schema the engine builds (base schema from the table's
 * manifest + _tombstone + writer_epoch) re-encodes Lance's own WAL entries
 * byte for byte. */
static void test_wal_entry_bytes_match_lance(void **state) {
  (void)state;
  static const char *const vecs[] = {"unsharded-unflushed", "unsharded-small", "unsharded-epochs",
                                     "unsharded-flushes", "bucket4-small"};
  size_t checked = 0, sentinels = 0;
  for (size_t v = 0; v < sizeof vecs / sizeof *vecs; v++) {
    env_t e;
    env_open(&e, vecs[v], false, NULL, NULL, 0);
    mw_shard_t *s = unsharded(&e); /* only its WAL stream schema is used */
    char *root = tu_strf("%s/_mem_wal", e.table_dir);
    char **paths;
    size_t np = tu_find_files(root, ".arrow", &paths);
    assert_true(np > 0);
    for (size_t i = 0; i < np; i++) {
      size_t n;
      uint8_t *bytes = tu_read_file(paths[i], &n);
      assert_non_null(bytes);
      mw_batch_t *bs;
      size_t nb;
      uint64_t ep;
      mw_err_t err = {0};
      assert_int_equal(mw_wal_decode_entry(bytes, n, &e.t->schema, &ep, &bs, &nb, &err), 0);
      mw_buf_t out = MW_BUF_INIT;
      if (nb == 0) {
        sentinels++; /* metadata order is a HashMap's: compare the decoded facts */
        assert_int_equal(mw_ipc_fence_sentinel(ep, &out, &err), 0);
        assert_int_equal(out.len, n);
      } else {
        assert_int_equal(mw_wal_begin(&s->wal, ep, &err), 0);
        const mw_batch_t *ptrs[64];
        assert_true(nb <= 64);
        for (size_t k = 0; k < nb; k++) ptrs[k] = &bs[k];
        assert_int_equal(mw_ipc_encode(&s->wal.schema, ptrs, nb, NULL, &out, &err), 0);
        if (out.len != n || memcmp(out.data, bytes, n) != 0) fail_msg("%s: our bytes differ", paths[i]);
        checked++;
      }
      mw_buf_free(&out);
      for (size_t k = 0; k < nb; k++) mw_batch_free(&bs[k]);
      free(bs);
      free(bytes);
    }
    tu_free_names(paths, np);
    free(root);
    env_close(&e);
  }
  assert_true(checked >= 20);
  assert_true(sentinels >= 1);
}

/* §5: a MemTable over its limit during replay is flushed before the next
 * entry goes in, covering the entries before it. */
static void test_replay_flushes_full_memtable(void **state) {
  (void)state;
  env_t e;
  const char *k[] = {"max_memtable_rows"};
  const char *v[] = {"150"};
  env_open(&e, "unsharded-unflushed", false, k, v, 1);
  mw_shard_t *s = unsharded(&e);
  claim_ok(&e, s);
  mw_shard_stats_t st;
  mw_shard_stats(s, &st);
  /* entries 1+2 (200 rows) were flushed before entry 3 went in */
  assert_int_equal(st.memtable_rows, 100);
  assert_int_equal(st.sstables, 1);
  assert_int_equal(st.replay_after, 2);
  mw_shard_manifest_t m;
  mw_shard_manifest_init(&m);
  read_manifest(&e, 3, &m);
  assert_int_equal(m.n_sstables, 1);
  assert_int_equal(m.sstables[0].physical_rows, 200);
  assert_int_equal(m.current_generation, 2);
  assert_int_equal(st.generation, 2);
  mw_shard_manifest_free(&m);
  env_close(&e);
}

/* ---------------------------------------------------------- group commit */

static void test_group_commit_one_entry(void **state) {
  (void)state;
  env_t e;
  const char *k[] = {"max_wal_flush_interval_ms"};
  const char *v[] = {"20"};
  env_open(&e, "unsharded-small", true, k, v, 1);
  mw_shard_t *s = unsharded(&e);
  claim_ok(&e, s);
  er_model_t mod;
  er_model_init(&mod, 9, 5000);
  enum { N = 64 };
  static wreq_t r[N];
  wctx_t c = {.expect = N};
  for (int i = 0; i < N; i++) assert_int_equal(write_rows(&e, s, &mod, &r[i], &c, i, 1 + i % 3), 0);
  run_until(&e.loop, &c.stop_flag);
  assert_int_equal(c.acked, N);
  for (int i = 0; i < N; i++) assert_int_equal(c.order[i], i);
  mw_shard_stats_t st;
  mw_shard_stats(s, &st);
  assert_int_equal(st.wal_entries, 1);
  assert_int_equal(st.wal_next_position, 2);
  size_t n;
  uint8_t *b = read_rel(&e, "wal/1000000000000000000000000000000000000000000000000000000000000000.arrow", &n);
  assert_non_null(b);
  mw_ipc_stream_t sx;
  mw_err_t err = {0};
  assert_int_equal(mw_ipc_decode(b, n, NULL, &sx, &err), 0);
  assert_int_equal(sx.n_batches, N);
  mw_ipc_stream_free(&sx);
  free(b);
  /* pipelined: interval 0 and 4 in flight -> several entries, acks still in order */
  mw_shard_stats(s, &st);
  c = (wctx_t){.expect = N};
  s->wal.cfg.flush_interval_ms = 0;
  for (int i = 0; i < N; i++) {
    assert_int_equal(write_rows(&e, s, &mod, &r[i], &c, i, 2), 0);
    if (i % 8 == 7) uv_run(&e.loop, UV_RUN_NOWAIT);
  }
  run_until(&e.loop, &c.stop_flag);
  assert_int_equal(c.acked, N);
  for (int i = 0; i < N; i++) assert_int_equal(c.order[i], i);
  mw_shard_stats_t st2;
  mw_shard_stats(s, &st2);
  assert_true(st2.wal_entries > st.wal_entries + 1);
  er_model_free(&mod);
  env_close(&e);
}

/* An idle WAL commits at once, whatever max_wal_flush_interval_ms says
 * (here 10 s): the interval bounds a wait, it is not a delay. Writes that
 * arrive while an entry is in flight gather into the next entry, which the
 * completion cuts (natural group commit). */
static void test_idle_wal_commits_at_once(void **state) {
  (void)state;
  env_t e;
  const char *k[] = {"max_wal_flush_interval_ms"};
  const char *v[] = {"10000"};
  env_open(&e, "unsharded-small", true, k, v, 1);
  mw_shard_t *s = unsharded(&e);
  claim_ok(&e, s);
  er_model_t mod;
  er_model_init(&mod, 13, 5000);
  enum { N = 10 };
  static wreq_t r[N + 1];
  wctx_t c = {.expect = 1};
  uint64_t t0_ms = uv_now(&e.loop);
  assert_int_equal(write_rows(&e, s, &mod, &r[0], &c, 0, 3), 0);
  run_until(&e.loop, &c.stop_flag);
  assert_int_equal(c.acked, 1);
  assert_true(uv_now(&e.loop) - t0_ms < 5000);
  mw_shard_stats_t st;
  mw_shard_stats(s, &st);
  assert_int_equal(st.wal_entries, 1);
  /* one entry in flight, then N writes: they wait for it and go into one entry */
  c = (wctx_t){.expect = N + 1};
  assert_int_equal(write_rows(&e, s, &mod, &r[0], &c, 0, 2), 0);
  for (int turn = 0; turn < 1000 && s->wal.count == 0; turn++) uv_run(&e.loop, UV_RUN_NOWAIT);
  assert_int_equal(s->wal.count, 1); /* cut by the turn after the write, not by the 10 s timer */
  for (int i = 1; i <= N; i++) assert_int_equal(write_rows(&e, s, &mod, &r[i], &c, i, 1 + i % 3), 0);
  run_until(&e.loop, &c.stop_flag);
  assert_int_equal(c.acked, N + 1);
  for (int i = 0; i <= N; i++) assert_int_equal(c.order[i], i);
  mw_shard_stats(s, &st);
  assert_int_equal(st.wal_entries, 3);
  assert_true(uv_now(&e.loop) - t0_ms < 5000);
  er_model_free(&mod);
  env_close(&e);
}

static void test_durable_false_acks_before_put(void **state) {
  (void)state;
  env_t e;
  const char *k[] = {"durable_write", "max_wal_flush_interval_ms"};
  const char *v[] = {"false", "50"};
  env_open(&e, "unsharded-small", true, k, v, 2);
  mw_shard_t *s = unsharded(&e);
  claim_ok(&e, s);
  er_model_t mod;
  er_model_init(&mod, 11, 100);
  static wreq_t r[3];
  wctx_t c = {.expect = 3};
  for (int i = 0; i < 3; i++) {
    r[i].check_absent = true;
    assert_int_equal(write_rows(&e, s, &mod, &r[i], &c, i, 4), 0);
  }
  run_until(&e.loop, &c.stop_flag);
  assert_int_equal(c.acked, 3);
  for (int i = 0; i < 3; i++) assert_true(r[i].absent_seen);
  /* the entry still gets written */
  mw_shard_stats_t st;
  for (int i = 0; i < 1000000; i++) {
    mw_shard_stats(s, &st);
    if (st.wal_entries == 1) break;
    uv_run(&e.loop, UV_RUN_ONCE);
  }
  assert_int_equal(st.wal_entries, 1);
  assert_true(exists_rel(&e, "wal/1000000000000000000000000000000000000000000000000000000000000000.arrow"));
  er_model_free(&mod);
  env_close(&e);
}

/* SYNC with durable_write = false: writes are acknowledged before their WAL
 * entry exists; the barrier fires only once it does, long before the 10 s
 * flush interval (it cuts the entry), and a barrier after a fence reports
 * the fence instead of success. */
typedef struct sync_seen {
  bool fired;
  int status;
  bool entry_existed;
  env_t *e;
  const char *entry;
} sync_seen_t;

static void on_sync_barrier(mw_shard_write_t *w, int status, const char *reason) {
  (void)reason;
  sync_seen_t *ss = w->data;
  ss->fired = true;
  ss->status = status;
  ss->entry_existed = exists_rel(ss->e, ss->entry);
}

static void test_sync_barrier_durable_false(void **state) {
  (void)state;
  env_t e;
  const char *k[] = {"durable_write", "max_wal_flush_interval_ms"};
  const char *v[] = {"false", "10000"};
  env_open(&e, "unsharded-small", true, k, v, 2);
  mw_shard_t *s = unsharded(&e);
  /* nothing written yet: the barrier answers on the next turn */
  static mw_shard_write_t bw[3];
  sync_seen_t ss = {.e = &e, .entry = "wal/1000000000000000000000000000000000000000000000000000000000000000.arrow"};
  for (int i = 0; i < 3; i++) bw[i].data = &ss;
  assert_int_equal(mw_shard_sync(s, &bw[0], on_sync_barrier), 0);
  run_until(&e.loop, &ss.fired);
  assert_int_equal(ss.status, 0);
  claim_ok(&e, s);
  er_model_t mod;
  er_model_init(&mod, 12, 100);
  static wreq_t r[2];
  wctx_t c = {.expect = 2};
  for (int i = 0; i < 2; i++) {
    r[i].check_absent = true;
    assert_int_equal(write_rows(&e, s, &mod, &r[i], &c, i, 4), 0);
  }
  ss = (sync_seen_t){.e = &e, .entry = ss.entry};
  assert_int_equal(mw_shard_sync(s, &bw[1], on_sync_barrier), 0);
  uint64_t t0 = uv_now(&e.loop);
  run_until(&e.loop, &ss.fired);
  assert_int_equal(c.acked, 2);
  assert_true(r[0].absent_seen && r[1].absent_seen); /* acked before the entry */
  assert_int_equal(ss.status, 0);
  assert_true(ss.entry_existed); /* the barrier waited for it */
  assert_true(uv_now(&e.loop) - t0 < 5000);
  mw_shard_stats_t st;
  mw_shard_stats(s, &st);
  assert_int_equal(st.writes_acked, 2); /* barriers are not writes */
  /* a second handle claims (epoch 2): A's next rows are acked (durable_write
   * = false) but can never reach the WAL; A's barrier must say so */
  env_t b;
  env_open_second(&e, &b);
  mw_shard_t *sb = unsharded(&b);
  done_t d = {0};
  assert_int_equal(mw_shard_claim(sb, on_done, &d), 0);
  run_until(&e.loop, &d.fired);
  assert_int_equal(d.status, 0);
  c = (wctx_t){.expect = 1};
  assert_int_equal(write_rows(&e, s, &mod, &r[0], &c, 0, 3), 0);
  ss = (sync_seen_t){.e = &e, .entry = ss.entry};
  assert_int_equal(mw_shard_sync(s, &bw[2], on_sync_barrier), 0);
  run_until(&e.loop, &ss.fired);
  assert_int_equal(c.acked, 1);
  assert_int_equal(ss.status, -ESTALE);
  assert_int_equal(mw_shard_state(s), MW_SS_FENCED);
  d = (done_t){0};
  assert_int_equal(mw_shard_release(sb, on_done, &d), 0);
  run_until(&e.loop, &d.fired);
  env_close_second(&e, &b);
  er_model_free(&mod);
  env_close(&e);
}

/* A slot taken by a writer that is not newer (no fencing): move on. */
static void test_wal_collision_not_fenced(void **state) {
  (void)state;
  env_t e;
  env_open(&e, "unsharded-small", true, NULL, NULL, 0);
  mw_shard_t *s = unsharded(&e);
  claim_ok(&e, s);
  er_model_t mod;
  er_model_init(&mod, 21, 100);
  wreq_t r[2] = {0};
  wctx_t c = {.expect = 1};
  assert_int_equal(write_rows(&e, s, &mod, &r[0], &c, 0, 3), 0);
  run_until(&e.loop, &c.stop_flag);
  /* someone (epoch 1, say a stale twin) put an entry at position 2 */
  size_t n;
  uint8_t *b = read_rel(&e, "wal/1000000000000000000000000000000000000000000000000000000000000000.arrow", &n);
  char *p2 = shard_path(&e, "wal/0100000000000000000000000000000000000000000000000000000000000000.arrow");
  assert_int_equal(tu_write_file(p2, b, n), 0);
  c = (wctx_t){.expect = 1};
  assert_int_equal(write_rows(&e, s, &mod, &r[1], &c, 1, 3), 0);
  run_until(&e.loop, &c.stop_flag);
  assert_int_equal(c.acked, 1);
  assert_true(exists_rel(&e, "wal/1100000000000000000000000000000000000000000000000000000000000000.arrow"));
  mw_shard_stats_t st;
  mw_shard_stats(s, &st);
  assert_int_equal(st.state, MW_SS_ACTIVE);
  assert_int_equal(st.wal_next_position, 4);
  free(p2);
  free(b);
  er_model_free(&mod);
  env_close(&e);
}

/* Every WAL put fails: retried 3 times, then the shard parks FAILED and the
 * write reports the I/O error; nothing is acknowledged. */
static void test_wal_io_error_fails_writes(void **state) {
  (void)state;
  env_t e;
  memset(&e, 0, sizeof e);
  assert_int_equal(uv_loop_init(&e.loop), 0);
  e.scratch = tu_mkdtemp("engine");
  e.table_dir = copy_vector("unsharded-small", e.scratch);
  char *p = tu_strf("%s/_mem_wal", e.table_dir);
  tu_rmtree(p);
  free(p);
  mw_storage_fault_t fault = {.fail_prefix = "_mem_wal/" UNSHARDED "/wal/", .fail_errno = EIO,
                              .fail_steps = MW_STEP_BIT(MW_STEP_WRITE)};
  mw_storage_config_t sc = test_storage(false, &fault);
  mw_table_opts_t o = {.storage = &sc};
  mw_err_t err = {0};
  assert_int_equal(mw_table_open(&e.loop, e.table_dir, &o, &e.t, &err), 0);
  mw_shard_t *s = unsharded(&e);
  claim_ok(&e, s);
  er_model_t mod;
  er_model_init(&mod, 23, 100);
  wreq_t r[2] = {0};
  wctx_t c = {.expect = 2};
  assert_int_equal(write_rows(&e, s, &mod, &r[0], &c, 0, 3), 0);
  assert_int_equal(write_rows(&e, s, &mod, &r[1], &c, 1, 3), 0);
  run_until(&e.loop, &c.stop_flag);
  assert_int_equal(c.acked, 0);
  assert_int_equal(c.failed, 2);
  assert_int_equal(c.last_status, -EIO);
  assert_non_null(strstr(c.reason, "failed after 3 retries"));
  assert_int_equal(mw_shard_state(s), MW_SS_FAILED);
  er_model_free(&mod);
  env_close(&e);
}

/* The WAL entry is linked, then its directory fsync fails (EIO, every
 * retry): the writes are not acknowledged, and their ERR says the outcome
 * is unknown, because the entry exists and a later claim replays it. */
static void test_wal_dirsync_failure_is_indeterminate(void **state) {
  (void)state;
  env_t e;
  memset(&e, 0, sizeof e);
  assert_int_equal(uv_loop_init(&e.loop), 0);
  e.scratch = tu_mkdtemp("engine");
  e.table_dir = copy_vector("unsharded-small", e.scratch);
  char *p = tu_strf("%s/_mem_wal", e.table_dir);
  tu_rmtree(p);
  free(p);
  mw_storage_fault_t fault = {.fail_prefix = "_mem_wal/" UNSHARDED "/wal/", .fail_errno = EIO,
                              .fail_steps = MW_STEP_BIT(MW_STEP_DIRSYNC)};
  mw_storage_config_t sc = test_storage(true, &fault); /* durable: the directory is synced */
  mw_table_opts_t o = {.storage = &sc};
  mw_err_t err = {0};
  assert_int_equal(mw_table_open(&e.loop, e.table_dir, &o, &e.t, &err), 0);
  mw_shard_t *s = unsharded(&e);
  claim_ok(&e, s);
  er_model_t mod;
  er_model_init(&mod, 29, 100);
  wreq_t r[1] = {0};
  wctx_t c = {.expect = 1};
  assert_int_equal(write_rows(&e, s, &mod, &r[0], &c, 0, 3), 0);
  run_until(&e.loop, &c.stop_flag);
  assert_int_equal(c.acked, 0);
  assert_int_equal(c.failed, 1);
  assert_non_null(strstr(c.reason, "outcome unknown"));
  assert_true(exists_rel(&e, "wal/1000000000000000000000000000000000000000000000000000000000000000.arrow"));
  er_model_free(&mod);
  env_close(&e);
}

/* -------------------------------------------------------- commit_update */

static bool op_done;
static int op_status;
static void on_op(mw_mstore_op_t *op, int status) {
  (void)op;
  op_done = true;
  op_status = status;
}

static int bump_cursor(void *arg, const mw_shard_manifest_t *cur, mw_shard_manifest_t *next, mw_err_t *err) {
  (void)arg, (void)cur, (void)err;
  next->current_generation = 9;
  return 0;
}

static void test_commit_update_tolerates_tailer(void **state) {
  (void)state;
  env_t e;
  env_open(&e, "unsharded-small", true, NULL, NULL, 0);
  mw_mstore_t ms;
  uint8_t id[16];
  mw_shard_uuid_unsharded(id);
  mw_mstore_init(&ms, e.t->st, id, 1, 2);
  mw_mstore_op_t op;
  mw_mstore_op_init(&op);
  op_done = false;
  assert_int_equal(mw_mstore_claim(&ms, &op, on_op), 0);
  run_until(&e.loop, &op_done);
  assert_int_equal(op_status, 0);
  assert_int_equal(op.m.version, 1);
  /* a tailer bumps the cursor under the same epoch: v2, last_seen 7 */
  mw_shard_manifest_t t;
  mw_shard_manifest_init(&t);
  assert_int_equal(mw_shard_manifest_copy(&t, &op.m), 0);
  t.version = 2;
  t.wal_entry_position_last_seen = 7;
  mw_buf_t buf = MW_BUF_INIT;
  assert_int_equal(mw_shard_manifest_encode(&t, &buf), 0);
  char *rel = name_of(2, "manifest", ".binpb");
  char *p = shard_path(&e, rel);
  assert_int_equal(tu_write_file(p, buf.data, buf.len), 0);
  /* our cached view is still v1: the put of v2 loses, we re-read and write v3 */
  op_done = false;
  assert_int_equal(mw_mstore_commit_update(&ms, &op, 1, bump_cursor, NULL, on_op), 0);
  run_until(&e.loop, &op_done);
  assert_int_equal(op_status, 0);
  assert_int_equal(op.m.version, 3);
  mw_shard_manifest_t m3;
  mw_shard_manifest_init(&m3);
  read_manifest(&e, 3, &m3);
  assert_int_equal(m3.writer_epoch, 1);
  assert_int_equal(m3.wal_entry_position_last_seen, 7);
  assert_int_equal(m3.current_generation, 9);
  /* a stale epoch is fenced */
  op_done = false;
  int rc = mw_mstore_commit_update(&ms, &op, 0, bump_cursor, NULL, on_op);
  if (rc == 0) {
    run_until(&e.loop, &op_done);
    rc = op_status;
  }
  assert_int_equal(rc, -ESTALE);
  assert_non_null(strstr(op.err.msg, "stored epoch 1"));
  size_t nh;
  uint8_t *hint = read_rel(&e, "manifest/version_hint.json", &nh);
  assert_int_equal(nh, 13);
  assert_memory_equal(hint, "{\"version\":3}", 13);
  free(hint);
  mw_shard_manifest_free(&m3);
  mw_shard_manifest_free(&t);
  mw_buf_free(&buf);
  free(p);
  free(rel);
  mw_mstore_op_free(&op);
  mw_mstore_free(&ms);
  env_close(&e);
}

/* --------------------------------------------------- freeze, backpressure */

static int bp_events;
static void on_bp(mw_shard_t *s, bool on) {
  (void)s;
  if (on) bp_events++;
}

static void test_freeze_flush_and_backpressure(void **state) {
  (void)state;
  env_t e;
  const char *k[] = {"max_memtable_rows", "max_unflushed_memtable_bytes"};
  const char *v[] = {"100", "20000"};
  env_open(&e, "unsharded-small", true, k, v, 2);
  e.t->on_backpressure = on_bp;
  bp_events = 0;
  mw_shard_t *s = unsharded(&e);
  claim_ok(&e, s);
  er_model_t mod;
  er_model_init(&mod, 13, 100000);
  enum { N = 200 };
  static wreq_t r[N];
  wctx_t c = {.expect = N};
  for (int i = 0; i < N; i++) assert_int_equal(write_rows(&e, s, &mod, &r[i], &c, i, 10), 0);
  run_until(&e.loop, &c.stop_flag);
  assert_int_equal(c.acked, N);
  for (int i = 0; i < N; i++) assert_int_equal(c.order[i], i);
  assert_true(bp_events > 0);
  done_t d = {0};
  assert_int_equal(mw_shard_flush(s, on_done, &d), 0);
  run_until(&e.loop, &d.fired);
  assert_int_equal(d.status, 0);
  mw_shard_stats_t st;
  mw_shard_stats(s, &st);
  assert_int_equal(st.sstables, 20);   /* 2000 rows, 100 per MemTable */
  assert_int_equal(st.frozen, 0);
  assert_false(st.backpressured);
  er_model_free(&mod);
  env_close(&e);
}

/* ------------------------------------------------- age bound, flush retries */

/* A condition polled on the loop (every 2 ms) until it holds; the loop's own
 * progress, not a sleep, is what the test waits for. */
typedef struct poll_ctx {
  uv_timer_t t;
  mw_shard_t *s;
  bool (*cond)(struct poll_ctx *p);
  bool met;
  int arg;
} poll_ctx_t;

static void on_poll(uv_timer_t *t) {
  poll_ctx_t *p = t->data;
  if (p->cond(p)) {
    p->met = true;
    uv_timer_stop(t);
  }
}

static void wait_for(env_t *e, poll_ctx_t *p) {
  p->met = false;
  uv_timer_init(&e->loop, &p->t);
  p->t.data = p;
  uv_timer_start(&p->t, on_poll, 2, 2);
  run_until(&e->loop, &p->met);
  uv_close((uv_handle_t *)&p->t, NULL);
}

static bool has_sstables(poll_ctx_t *p) {
  mw_shard_stats_t st;
  mw_shard_stats(p->s, &st);
  return st.sstables >= (uint64_t)p->arg;
}

static bool flush_failed(poll_ctx_t *p) { return p->s->flush_failures >= (uint32_t)p->arg; }

/* max_memtable_age_ms: acknowledged rows reach an SSTable (where LanceDB
 * readers see them) without any flush request or size limit. */
static void test_memtable_age_bound(void **state) {
  (void)state;
  env_t e;
  const char *k[] = {"max_memtable_age_ms"};
  const char *v[] = {"50"};
  env_open(&e, "unsharded-small", true, k, v, 1);
  mw_shard_t *s = unsharded(&e);
  claim_ok(&e, s);
  er_model_t mod;
  er_model_init(&mod, 31, 1000);
  wreq_t r = {0};
  wctx_t c = {.expect = 1};
  /* the age counts from the first row's insert: t0 is taken before it (an
   * ack can take longer than 10 ms on a loaded machine under ASan) */
  uv_update_time(&e.loop); /* uv_now is cached: a stale t0 would weaken the check */
  uint64_t t0 = uv_now(&e.loop);
  assert_int_equal(write_rows(&e, s, &mod, &r, &c, 0, 20), 0);
  run_until(&e.loop, &c.stop_flag);
  assert_int_equal(c.acked, 1);
  poll_ctx_t p = {.s = s, .cond = has_sstables, .arg = 1};
  wait_for(&e, &p);
  assert_true(uv_now(&e.loop) - t0 >= 40); /* not before the bound (timer granularity aside) */
  mw_shard_stats_t st;
  mw_shard_stats(s, &st);
  assert_int_equal(st.memtable_rows, 0);
  assert_int_equal(mw_shard_state(s), MW_SS_ACTIVE);
  er_model_free(&mod);
  env_close(&e);
}

/* A flush that fails is retried with backoff and then commits; the shard
 * stays ACTIVE and nothing is lost. The SSTable directory name is fixed by
 * the test seed, so a file squatting on it makes every attempt fail until
 * the test removes it. */
static void test_flush_retried_after_failure(void **state) {
  (void)state;
  env_t e;
  env_open(&e, "unsharded-small", true, NULL, NULL, 0);
  mw_shard_t *s = unsharded(&e);
  claim_ok(&e, s);
  /* the directory name the engine's first flush (generation 1) will use */
  mw_schema_t sch;
  mw_schema_init(&sch);
  int id = mw_schema_add(&sch, "id", MW_T_INT64, false);
  sch.fields[id].pk_position = 1;
  mw_schema_add(&sch, "_tombstone", MW_T_BOOL, false);
  mw_batch_t b;
  assert_int_equal(mw_batch_init(&b, &sch), 0);
  int64_t one = 1;
  mw_column_append_fixed(&b.cols[0], &one, 8);
  mw_column_append_bool(&b.cols[1], false);
  b.n_rows = 1;
  const mw_batch_t *bs[1] = {&b};
  mw_sstable_opts_t so = {.seed = 7};
  mw_sstable_t sst;
  assert_int_equal(mw_sstable_build(&sch, bs, 1, 1, &so, &sst, NULL), 0);
  char *blocker = shard_path(&e, sst.dir_name);
  mw_sstable_free(&sst);
  mw_batch_free(&b);
  mw_schema_free(&sch);
  assert_int_equal(tu_write_file(blocker, "x", 1), 0);

  er_model_t mod;
  er_model_init(&mod, 37, 1000);
  wreq_t r = {0};
  wctx_t c = {.expect = 1};
  assert_int_equal(write_rows(&e, s, &mod, &r, &c, 0, 30), 0);
  run_until(&e.loop, &c.stop_flag);
  assert_int_equal(c.acked, 1);
  done_t d = {0};
  assert_int_equal(mw_shard_flush(s, on_done, &d), 0);
  poll_ctx_t p = {.s = s, .cond = flush_failed, .arg = 2};
  wait_for(&e, &p); /* two failed attempts, the second after a backoff */
  assert_false(d.fired);
  assert_int_equal(mw_shard_state(s), MW_SS_ACTIVE);
  assert_int_equal(unlink(blocker), 0);
  run_until(&e.loop, &d.fired);
  assert_int_equal(d.status, 0);
  mw_shard_stats_t st;
  mw_shard_stats(s, &st);
  assert_int_equal(st.sstables, 1);
  assert_int_equal(s->flush_failures, 0);
  assert_true(exists_rel(&e, "manifest/version_hint.json"));
  free(blocker);
  er_model_free(&mod);
  env_close(&e);
}

/* ------------------------------------------------------------ read-back */

static void flip_hook(mw_buf_t *file) { (void)er_flip_row_count(file); }

/* Teardown: the writer fault is off after the test, also when it failed. */
static int hook_off(void **state) {
  (void)state;
  mw_sstable_data_hook_for_tests = NULL;
  return 0;
}

static uint64_t refused_count(const char *op) {
  return atomic_load(&mw_flush_refused_metric(op)->value);
}

/* The newest row of every key in the shard's SSTables (generation order,
 * rows in insert order) must be the model's. */
static void expect_sstables_hold_model(env_t *e, mw_shard_t *s, const er_model_t *m) {
  const mw_shard_manifest_t *man = &s->ms.cached;
  er_row_t *got = calloc((size_t)m->max_key, sizeof *got);
  bool *seen = calloc((size_t)m->max_key, 1);
  for (uint64_t g = 1; g <= man->current_generation; g++)
    for (size_t i = 0; i < man->n_sstables; i++) {
      if (man->sstables[i].generation != g) continue;
      char *dd = tu_strf("%s/_mem_wal/" UNSHARDED "/%s/data", e->table_dir, man->sstables[i].path);
      char **names;
      size_t nn = tu_list_dir(dd, ".lance", &names);
      assert_int_equal(nn, 1);
      char *fp = tu_strf("%s/%s", dd, names[0]);
      size_t flen;
      uint8_t *fb = tu_read_file(fp, &flen);
      mw_datafile_t df;
      mw_batch_t b;
      assert_int_equal(mw_datafile_open(&df, fb, flen, NULL, NULL), 0);
      assert_int_equal(mw_datafile_read_batch(&df, &b, NULL), 0);
      for (int64_t r = 0; r < b.n_rows; r++) {
        er_row_t x;
        er_row_read(&b, r, &x);
        assert_true(x.id >= 0 && x.id < m->max_key);
        got[x.id] = x;
        seen[x.id] = true;
      }
      mw_batch_free(&b);
      mw_datafile_close(&df);
      free(fb);
      free(fp);
      tu_free_names(names, nn);
      free(dd);
    }
  for (int64_t k = 0; k < m->max_key; k++) {
    if (seen[k] != m->set[k]) fail_msg("key %" PRId64 ": %s", k, seen[k] ? "in an SSTable, never written" : "lost");
    if (seen[k] && !er_row_equal(&got[k], &m->last[k])) fail_msg("key %" PRId64 ": not the newest row", k);
  }
  free(got);
  free(seen);
}

/* A data file that does not read back is never published: the flush's
 * files are put nowhere, the shard manifest stays, the rows stay in the
 * MemTable (and the WAL), the shard stays ACTIVE and acknowledges writes,
 * the refusal is counted and retried with backoff; once the writer fault
 * is gone, the flush commits and every acknowledged row is in the
 * SSTables. The fault (sstable.h's data hook) changes the data file's row
 * count between its encoding and its read-back. */
static void test_flush_readback_refused(void **state) {
  (void)state;
  env_t e;
  const char *k[] = {"max_fault_retry_interval_ms"};
  const char *v[] = {"200"};
  env_open(&e, "unsharded-small", true, k, v, 1);
  mw_shard_t *s = unsharded(&e);
  claim_ok(&e, s);
  er_model_t mod;
  er_model_init(&mod, 47, 5000);
  wreq_t r[3] = {0};
  wctx_t c = {.expect = 2};
  assert_int_equal(write_rows(&e, s, &mod, &r[0], &c, 0, 30), 0);
  assert_int_equal(write_rows(&e, s, &mod, &r[1], &c, 1, 5000), 0); /* the parts at once */
  run_until(&e.loop, &c.stop_flag);
  assert_int_equal(c.acked, 2);
  uint64_t version = s->ms.cached.version, before = refused_count("flush");
  er_flipped_files = 0;
  mw_sstable_data_hook_for_tests = flip_hook;
  done_t d = {0};
  assert_int_equal(mw_shard_flush(s, on_done, &d), 0);
  poll_ctx_t p = {.s = s, .cond = flush_failed, .arg = 2};
  wait_for(&e, &p); /* refused twice, the second after a backoff */
  assert_false(d.fired);
  assert_true(er_flipped_files >= 2);
  assert_int_equal(refused_count("flush") - before, s->flush_failures);
  const mw_shard_fault_t *fault = mw_shard_fault(s);
  assert_non_null(fault);
  assert_string_equal(fault->op, "flush");
  assert_int_equal(fault->status, -EBADMSG);
  if (strstr(fault->error, "read-back of ") == NULL || strstr(fault->error, ".lance refused") == NULL)
    fail_msg("the refusal reported as: %s", fault->error);
  /* nothing published, nothing put, every row still in memory */
  assert_int_equal(s->ms.cached.version, version);
  assert_int_equal(s->ms.cached.n_sstables, 0);
  char *dir = shard_path(&e, "");
  char **names;
  size_t n_dirs = tu_list_dir(dir, "_gen_1", &names);
  tu_free_names(names, n_dirs);
  free(dir);
  assert_int_equal(n_dirs, 0);
  mw_shard_stats_t st;
  mw_shard_stats(s, &st);
  assert_int_equal(st.frozen, 1);
  assert_int_equal(s->frozen[0]->m.n_rows, 5030);
  assert_int_equal(mw_shard_state(s), MW_SS_ACTIVE);
  /* the shard keeps acknowledging writes meanwhile */
  wctx_t c2 = {.expect = 1};
  assert_int_equal(write_rows(&e, s, &mod, &r[2], &c2, 2, 40), 0);
  run_until(&e.loop, &c2.stop_flag);
  assert_int_equal(c2.acked, 1);
  /* the fault gone: the retry publishes, and the next flush the rest */
  mw_sstable_data_hook_for_tests = NULL;
  run_until(&e.loop, &d.fired);
  assert_int_equal(d.status, 0);
  assert_null(mw_shard_fault(s));
  d = (done_t){0};
  assert_int_equal(mw_shard_flush(s, on_done, &d), 0);
  run_until(&e.loop, &d.fired);
  assert_int_equal(d.status, 0);
  mw_shard_stats(s, &st);
  assert_int_equal(st.sstables, 2);
  assert_int_equal(st.memtable_rows, 0);
  expect_sstables_hold_model(&e, s, &mod);
  er_model_free(&mod);
  env_close(&e);
}

/* ----------------------------------------------------- self-recovery */

static bool state_is(poll_ctx_t *p) { return mw_shard_state(p->s) == (mw_shard_state_t)p->arg; }
static bool reclaim_failed(poll_ctx_t *p) {
  const mw_shard_fault_t *f = mw_shard_fault(p->s);
  return f != NULL && f->retries >= (uint32_t)p->arg && mw_shard_state(p->s) == MW_SS_FAILED;
}

/* WAL puts fail (EIO) past the 3 retries: the shard parks FAILED, nothing
 * is acknowledged, writes are refused at once naming the error and the
 * retry; a re-claim under the same fault fails and backs off; once the
 * fault clears the engine claims the shard again by itself within
 * max_fault_retry_interval_ms (+ the claim), replaying exactly the
 * acknowledged rows; writes are acknowledged again. */
static void test_auto_reclaim_after_wal_failure(void **state) {
  (void)state;
  env_t e;
  const char *k[] = {"max_fault_retry_interval_ms"};
  const char *v[] = {"200"};
  env_open(&e, "unsharded-small", true, k, v, 1);
  mw_shard_t *s = unsharded(&e);
  claim_ok(&e, s);
  er_model_t mod;
  er_model_init(&mod, 41, 100000);
  wreq_t r[5] = {0};
  wctx_t c = {.expect = 2};
  assert_int_equal(write_rows(&e, s, &mod, &r[0], &c, 0, 5), 0);
  assert_int_equal(write_rows(&e, s, &mod, &r[1], &c, 1, 5), 0);
  run_until(&e.loop, &c.stop_flag);
  assert_int_equal(c.acked, 2);

  mw_storage_fault_t f = {.fail_prefix = "_mem_wal/" UNSHARDED "/wal/", .fail_errno = EIO,
                          .fail_steps = MW_STEP_BIT(MW_STEP_WRITE)};
  assert_int_equal(mw_storage_fault_set(e.t->st, &f), 0);
  wctx_t c2 = {.expect = 1};
  assert_int_equal(write_rows(&e, s, &mod, &r[2], &c2, 2, 5), 0);
  run_until(&e.loop, &c2.stop_flag);
  assert_int_equal(c2.acked, 0);
  assert_int_equal(c2.last_status, -EIO);
  assert_non_null(strstr(c2.reason, "retrying"));
  assert_int_equal(mw_shard_state(s), MW_SS_FAILED);
  const mw_shard_fault_t *fault = mw_shard_fault(s);
  assert_non_null(fault);
  assert_string_equal(fault->op, "wal");
  assert_int_equal(fault->status, -EIO);
  assert_true(fault->next_retry_ms > 0);
  /* refused at once while FAILED, with the storage error and the retry */
  mw_batch_t b;
  assert_int_equal(er_batch(&mod, &e.t->schema, 3, 0.0, &b), 0);
  assert_int_equal(mw_shard_write(s, &r[3].w, &b, on_write), -EIO);
  mw_batch_free(&b);
  assert_non_null(strstr(mw_shard_reason(s), "EIO"));
  assert_non_null(strstr(mw_shard_reason(s), "retrying"));
  /* the automatic re-claim fails under the same fault (fence sentinel) */
  poll_ctx_t p = {.s = s, .cond = reclaim_failed, .arg = 1};
  wait_for(&e, &p);
  assert_true(mw_shard_fault(s)->next_retry_ms > 0);
  assert_int_equal(s->recoveries, 0);

  assert_int_equal(mw_storage_fault_set(e.t->st, NULL), 0);
  uint64_t t_clear = uv_now(&e.loop);
  poll_ctx_t pa = {.s = s, .cond = state_is, .arg = MW_SS_ACTIVE};
  wait_for(&e, &pa);
  uint64_t took = uv_now(&e.loop) - t_clear;
  assert_true(took <= 200 + 1000);
  assert_null(mw_shard_fault(s));
  assert_int_equal(s->recoveries, 1);
  mw_shard_stats_t st;
  mw_shard_stats(s, &st);
  assert_int_equal(st.memtable_rows, 10); /* the 10 acked rows, not the 5 refused */
  wctx_t c3 = {.expect = 1};
  assert_int_equal(write_rows(&e, s, &mod, &r[4], &c3, 4, 5), 0);
  run_until(&e.loop, &c3.stop_flag);
  assert_int_equal(c3.acked, 1);
  mw_shard_stats(s, &st);
  assert_int_equal(st.memtable_rows, 15);
  er_model_free(&mod);
  env_close(&e);
}

/* A flush whose shard-manifest commit fails (ENOSPC on the link of the next
 * manifest version) is retried (capped by max_fault_retry_interval_ms) while
 * the shard stays ACTIVE and reports the fault; after the fault clears the
 * flush commits and the fault is gone. */
static void test_flush_manifest_commit_recovers(void **state) {
  (void)state;
  env_t e;
  const char *k[] = {"max_fault_retry_interval_ms"};
  const char *v[] = {"200"};
  env_open(&e, "unsharded-small", true, k, v, 1);
  mw_shard_t *s = unsharded(&e);
  claim_ok(&e, s);
  er_model_t mod;
  er_model_init(&mod, 43, 1000);
  wreq_t r = {0};
  wctx_t c = {.expect = 1};
  assert_int_equal(write_rows(&e, s, &mod, &r, &c, 0, 30), 0);
  run_until(&e.loop, &c.stop_flag);
  assert_int_equal(c.acked, 1);
  mw_storage_fault_t f = {.fail_prefix = "_mem_wal/" UNSHARDED "/manifest/", .fail_errno = ENOSPC,
                          .fail_steps = MW_STEP_BIT(MW_STEP_LINK)};
  assert_int_equal(mw_storage_fault_set(e.t->st, &f), 0);
  done_t d = {0};
  assert_int_equal(mw_shard_flush(s, on_done, &d), 0);
  poll_ctx_t p = {.s = s, .cond = flush_failed, .arg = 3};
  wait_for(&e, &p);
  assert_false(d.fired);
  assert_int_equal(mw_shard_state(s), MW_SS_ACTIVE);
  const mw_shard_fault_t *fault = mw_shard_fault(s);
  assert_non_null(fault);
  assert_string_equal(fault->op, "flush");
  assert_int_equal(fault->status, -ENOSPC);
  assert_true(fault->retries >= 2);
  assert_true(fault->next_retry_ms - uv_now(&e.loop) <= 200);
  assert_int_equal(mw_storage_fault_set(e.t->st, NULL), 0);
  uint64_t t_clear = uv_now(&e.loop);
  run_until(&e.loop, &d.fired);
  assert_int_equal(d.status, 0);
  assert_true(uv_now(&e.loop) - t_clear <= 200 + 1000);
  mw_shard_stats_t st;
  mw_shard_stats(s, &st);
  assert_int_equal(st.sstables, 1);
  assert_null(mw_shard_fault(s));
  assert_int_equal(s->recoveries, 1);
  er_model_free(&mod);
  env_close(&e);
}

/* One failed fsync (of the WAL entry's temp file, fsync on): the put is
 * retried at the same position and the write acknowledged once; nothing
 * fails, the shard stays ACTIVE, the storage counts one failure. */
static void test_one_failed_fsync(void **state) {
  (void)state;
  env_t e;
  memset(&e, 0, sizeof e);
  assert_int_equal(uv_loop_init(&e.loop), 0);
  e.scratch = tu_mkdtemp("engine");
  e.table_dir = copy_vector("unsharded-small", e.scratch);
  char *p = tu_strf("%s/_mem_wal", e.table_dir);
  tu_rmtree(p);
  free(p);
  mw_storage_config_t sc = test_storage(true, NULL);
  mw_table_opts_t o = {.storage = &sc};
  mw_err_t err = {0};
  assert_int_equal(mw_table_open(&e.loop, e.table_dir, &o, &e.t, &err), 0);
  mw_shard_t *s = unsharded(&e);
  claim_ok(&e, s);
  mw_storage_health_t h0, h1;
  mw_storage_health(e.t->st, &h0);
  mw_storage_fault_t f = {.fail_sync_once = true};
  assert_int_equal(mw_storage_fault_set(e.t->st, &f), 0);
  er_model_t mod;
  er_model_init(&mod, 47, 1000);
  wreq_t r = {0};
  wctx_t c = {.expect = 1};
  assert_int_equal(write_rows(&e, s, &mod, &r, &c, 0, 7), 0);
  run_until(&e.loop, &c.stop_flag);
  assert_int_equal(c.acked, 1);
  assert_int_equal(c.failed, 0);
  assert_int_equal(mw_shard_state(s), MW_SS_ACTIVE);
  mw_storage_health(e.t->st, &h1);
  assert_int_equal(h1.ops_failed - h0.ops_failed, 1);
  assert_int_equal(h1.last_error, -EIO);
  assert_int_equal(h1.consecutive_failures, 0);
  mw_shard_stats_t st;
  mw_shard_stats(s, &st);
  assert_int_equal(st.wal_entries, 1);
  assert_int_equal(st.memtable_rows, 7);
  assert_null(mw_shard_fault(s));
  er_model_free(&mod);
  env_close(&e);
}

/* ------------------------------------------------------------------ router */

static void test_router_bucket(void **state) {
  (void)state;
  env_t e;
  env_open(&e, "bucket4-small", false, NULL, NULL, 0);
  assert_int_equal(e.t->kind, MW_SHARDING_BUCKET);
  assert_int_equal(e.t->num_buckets, 4);
  er_model_t mod;
  er_model_init(&mod, 17, 1000);
  mw_batch_t b;
  assert_int_equal(er_batch(&mod, &e.t->schema, 200, 0.0, &b), 0);
  uint8_t(*ids)[16];
  mw_batch_t *parts;
  size_t n;
  mw_err_t err = {0};
  assert_int_equal(mw_table_route(e.t, &b, &ids, &parts, &n, &err), 0);
  assert_int_equal(n, 4);
  int64_t total = 0;
  for (size_t j = 0; j < n; j++) {
    for (int64_t r = 0; r < parts[j].n_rows; r++) {
      int64_t id;
      memcpy(&id, parts[j].cols[0].values.data + 8 * r, 8);
      uint8_t want[16];
      mw_shard_uuid_bucket(mw_route_bucket_of(mw_murmur3_long(id), 4), want);
      assert_memory_equal(want, ids[j], 16);
    }
    total += parts[j].n_rows;
    mw_batch_free(&parts[j]);
  }
  assert_int_equal(total, 200);
  free(parts);
  free(ids);
  /* a daemon owning bucket 0 only refuses rows for bucket 3, naming it */
  uint8_t own[1][16];
  mw_shard_uuid_bucket(0, own[0]);
  e.t->own_all = false;
  e.t->owned = malloc(16);
  memcpy(e.t->owned, own, 16);
  e.t->n_owned = 1;
  err = (mw_err_t){0};
  assert_int_equal(mw_table_route(e.t, &b, &ids, &parts, &n, &err), -EXDEV);
  assert_non_null(strstr(err.msg, "which this daemon does not own"));
  mw_batch_free(&b);
  er_model_free(&mod);
  env_close(&e);
}

/* drop_table: an ACTIVE shard with writes in flight, three shards never
 * touched here; the in-flight writes are acknowledged (the seal drains
 * them), a second drop is refused while one runs, the table directory goes. */
typedef struct tdrop {
  bool fired;
  int status;
  char reason[600];
} tdrop_t;
static void on_table_dropped(mw_table_t *t, int status, const char *reason, void *arg) {
  (void)t;
  tdrop_t *d = arg;
  d->fired = true;
  d->status = status;
  snprintf(d->reason, sizeof d->reason, "%s", reason ? reason : "");
}

static void test_drop_table(void **state) {
  (void)state;
  env_t e;
  env_open(&e, "bucket4-small", false, NULL, NULL, 0);
  uint8_t id[16];
  mw_shard_uuid_bucket(0, id);
  mw_shard_t *s = mw_table_shard(e.t, id, true);
  claim_ok(&e, s);
  er_model_t mod;
  er_model_init(&mod, 5, 100);
  wctx_t c = {.expect = 3};
  wreq_t r[3];
  memset(r, 0, sizeof r);
  for (int i = 0; i < 3; i++) assert_int_equal(write_rows(&e, s, &mod, &r[i], &c, i, 10), 0);
  tdrop_t d = {0};
  assert_int_equal(mw_table_drop(e.t, on_table_dropped, &d), 0);
  assert_int_equal(mw_table_drop(e.t, on_table_dropped, &d), -EBUSY);
  assert_int_equal(mw_table_close(e.t, on_table_closed), -EBUSY);
  run_until(&e.loop, &d.fired);
  if (d.status != 0) fail_msg("drop: %s", d.reason);
  assert_int_equal(c.acked, 3);
  assert_int_equal(c.failed, 0);
  assert_int_equal(e.t->n_shards, 4); /* the three others were claimed and sealed too */
  for (size_t i = 0; i < e.t->n_shards; i++) assert_int_equal(mw_shard_state(&e.t->shards[i]->shard), MW_SS_CLOSED);
  struct stat sb;
  assert_int_equal(stat(e.table_dir, &sb), -1);
  er_model_free(&mod);
  env_close(&e);
}

/* A commit interrupted after the shards were sealed (here: deleting the
 * base table's data/ fails) leaves the drop marker; the table then refuses
 * to open, and mw_table_drop_remains finishes the drop. */
static void test_drop_interrupted_is_finishable(void **state) {
  (void)state;
  env_t e;
  memset(&e, 0, sizeof e);
  assert_int_equal(uv_loop_init(&e.loop), 0);
  e.scratch = tu_mkdtemp("engine");
  e.table_dir = copy_vector("bucket4-small", e.scratch);
  mw_storage_fault_t fault = {.fail_prefix = "data/", .fail_errno = EIO,
                              .fail_steps = MW_STEP_BIT(MW_STEP_UNLINK)};
  mw_storage_config_t sc = test_storage(false, &fault);
  mw_table_opts_t o = {.storage = &sc};
  mw_err_t err = {0};
  assert_int_equal(mw_table_open(&e.loop, e.table_dir, &o, &e.t, &err), 0);
  tdrop_t d = {0};
  assert_int_equal(mw_table_drop(e.t, on_table_dropped, &d), 0);
  run_until(&e.loop, &d.fired);
  assert_int_not_equal(d.status, 0);
  assert_non_null(strstr(d.reason, "run drop_table again"));
  assert_int_equal(mw_table_drop_interrupted(e.table_dir, NULL, NULL), 1);
  closed_flag = false;
  assert_int_equal(mw_table_close(e.t, on_table_closed), 0);
  run_until(&e.loop, &closed_flag);
  mw_table_t *t2 = NULL;
  mw_err_t err2 = {0};
  assert_int_equal(mw_table_open(&e.loop, e.table_dir, NULL, &t2, &err2), -ECANCELED);
  assert_non_null(strstr(err2.msg, "interrupted"));
  mw_err_t err3 = {0};
  assert_int_equal(mw_table_drop_remains(e.table_dir, NULL, &err3), 0);
  struct stat sb;
  assert_int_equal(stat(e.table_dir, &sb), -1);
  assert_int_equal(mw_table_drop_interrupted(e.table_dir, NULL, NULL), 0);
  assert_int_equal(mw_table_drop_remains(e.table_dir, NULL, NULL), -ENOENT);
  uv_run(&e.loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&e.loop), 0);
  tu_rmtree(e.scratch);
  free(e.scratch);
  free(e.table_dir);
}

/* Opening a table sweeps what crashed writers left (docs/storage.md): a
 * temp file older than MW_TABLE_SWEEP_MIN_AGE_S goes, a fresh one (a live
 * writer's, perhaps) stays, and no object is touched. */
static void test_open_sweeps_leftovers(void **state) {
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  char *scratch = tu_mkdtemp("engine-sweep");
  char *dir = copy_vector("unsharded-small", scratch);
  char *wal = tu_strf("%s/_mem_wal/" UNSHARDED "/wal", dir);
  char *cmd = tu_strf("mkdir -p '%s'", wal);
  assert_int_equal(system(cmd), 0);
  char *old = tu_strf("%s/.tmp-0000000000000000000000000000000a", wal);
  char *fresh = tu_strf("%s/.tmp-0000000000000000000000000000000b", dir);
  assert_int_equal(tu_write_file(old, "o", 1), 0);
  assert_int_equal(tu_write_file(fresh, "f", 1), 0);
  struct timespec ts[2];
  clock_gettime(CLOCK_REALTIME, &ts[0]);
  ts[0].tv_sec -= MW_TABLE_SWEEP_MIN_AGE_S + 60;
  ts[1] = ts[0];
  assert_int_equal(utimensat(AT_FDCWD, old, ts, 0), 0);
  mw_storage_config_t sc = test_storage(false, NULL);
  mw_table_opts_t o = {.storage = &sc};
  mw_table_t *t = NULL;
  mw_err_t err = {0};
  assert_int_equal(mw_table_open(&loop, dir, &o, &t, &err), 0);
  run_until(&loop, &t->sweep_done);
  assert_int_equal(t->swept, 1);
  struct stat sb;
  assert_int_equal(stat(old, &sb), -1);
  assert_int_equal(stat(fresh, &sb), 0);
  char *manifest = tu_strf("%s/_versions", dir);
  assert_int_equal(stat(manifest, &sb), 0);
  closed_flag = false;
  assert_int_equal(mw_table_close(t, on_table_closed), 0);
  run_until(&loop, &closed_flag);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
  inspect_scratch(scratch, dir, NULL);
  tu_rmtree(scratch);
  free(manifest);
  free(old);
  free(fresh);
  free(cmd);
  free(wal);
  free(dir);
  free(scratch);
}

static void test_table_refusals(void **state) {
  (void)state;
  uv_loop_t loop;
  uv_loop_init(&loop);
  char *scratch = tu_mkdtemp("engine-refuse");
  mw_table_t *t = NULL;
  mw_err_t err = {0};
  assert_true(mw_table_open(&loop, scratch, NULL, &t, &err) < 0);
  assert_non_null(strstr(err.msg, "_versions"));
  /* unknown writer key from our own config */
  char *dir = copy_vector("unsharded-small", scratch);
  const char *k[] = {"no_such_key"};
  const char *v[] = {"1"};
  mw_table_opts_t o = {.config_keys = k, .config_values = v, .n_config = 1};
  err = (mw_err_t){0};
  assert_int_equal(mw_table_open(&loop, dir, &o, &t, &err), -ENOENT);
  assert_non_null(strstr(err.msg, "no_such_key"));
  free(dir);
  tu_rmtree(scratch);
  free(scratch);
  uv_loop_close(&loop);
}

/* A new base manifest version equal to the latest but with `flags` in both
 * feature flags: what another writer that turned zone seeds on leaves. */
static void base_set_flags(const char *table_dir, uint64_t flags) {
  char *dir = tu_strf("%s/_versions", table_dir);
  char **names;
  size_t n = tu_list_dir(dir, ".manifest", &names);
  uint64_t latest;
  size_t idx;
  assert_int_equal(mw_dmanifest_latest(names, n, &latest, &idx, NULL), 0);
  char *path = tu_strf("%s/%s", dir, names[idx]);
  size_t len;
  uint8_t *p = tu_read_file(path, &len);
  assert_non_null(p);
  mw_section_t msg, isec = {0}, tsec = {0};
  uint64_t pos;
  mw_dmanifest_t m = {0};
  assert_int_equal(mw_dmanifest_unframe(p, len, &msg, &pos, NULL), 0);
  assert_int_equal(mw_dmanifest_decode(msg.data, msg.len, &m, NULL), 0);
  if (m.has_index_section) assert_int_equal(mw_dmanifest_section_at(p, len, m.pb->index_section, pos, &isec, NULL), 0);
  if (m.has_transaction_section) assert_int_equal(mw_dmanifest_section_at(p, len, m.pb->transaction_section, pos, &tsec, NULL), 0);
  m.pb->version = latest + 1;
  m.pb->reader_feature_flags |= flags;
  m.pb->writer_feature_flags |= flags;
  mw_buf_t out = MW_BUF_INIT;
  assert_int_equal(mw_base_manifest_file_encode(&m, isec.data, isec.len, tsec.data, tsec.len, &out), 0);
  char name[MW_DMANIFEST_NAME_BYTES];
  assert_true(mw_dmanifest_name(latest + 1, name, sizeof name) > 0);
  char *np = tu_strf("%s/%s", dir, name);
  assert_int_equal(tu_write_file(np, out.data, out.len), 0);
  mw_buf_free(&out);
  mw_dmanifest_free(&m);
  free(np), free(p), free(path), free(dir);
  tu_free_names(names, n);
}

/* A table flagged FLAG_ZONE_WRITE_SEEDS by another writer: refused naming
 * the flag unless zone seeds are on; with them on, the flush writes a v1
 * seed per column that describes the SSTable's rows, and flags the
 * SSTable's manifest. */
static void test_zone_seeds_table(void **state) {
  (void)state;
  uv_loop_t loop;
  uv_loop_init(&loop);
  char *scratch = tu_mkdtemp("engine-seeds");
  char *dir = copy_vector("unsharded-unflushed", scratch);
  base_set_flags(dir, MW_FLAG_ZONE_WRITE_SEEDS);
  mw_table_t *t = NULL;
  mw_err_t err = {0};
  mw_storage_config_t sc = test_storage(false, NULL);
  mw_table_opts_t o = {.storage = &sc};
  assert_int_equal(mw_table_open(&loop, dir, &o, &t, &err), -ENOTSUP);
  assert_non_null(strstr(err.msg, "FLAG_ZONE_WRITE_SEEDS"));
  assert_non_null(strstr(err.msg, "zone_write_seeds = true"));
  uv_loop_close(&loop);
  /* with seeds on: open, replay the 300 WAL rows, flush */
  env_t e;
  memset(&e, 0, sizeof e);
  assert_int_equal(uv_loop_init(&e.loop), 0);
  e.scratch = scratch;
  e.table_dir = dir;
  o = (mw_table_opts_t){.storage = &sc, .sstable_seed = 7, .zone_write_seeds = true, .zone_seed_rows_per_zone = 64};
  if (mw_table_open(&e.loop, e.table_dir, &o, &e.t, &err) < 0) fail_msg("open: %s", err.msg);
  mw_shard_t *s = unsharded(&e);
  claim_ok(&e, s);
  done_t d = {0};
  assert_int_equal(mw_shard_flush(s, on_done, &d), 0);
  run_until(&e.loop, &d.fired);
  assert_int_equal(d.status, 0);
  mw_shard_manifest_t m;
  mw_shard_manifest_init(&m);
  read_manifest(&e, 3, &m);
  assert_int_equal(m.n_sstables, 1);
  char *sdir = shard_path(&e, m.sstables[0].path);
  char *ddir = tu_strf("%s/data", sdir);
  char **names;
  assert_int_equal(tu_list_dir(ddir, ".lance", &names), 1);
  char *dpath = tu_strf("%s/%s", ddir, names[0]);
  size_t len;
  uint8_t *bytes = tu_read_file(dpath, &len);
  mw_datafile_t f;
  assert_int_equal(mw_datafile_open(&f, bytes, len, NULL, &err), 0);
  assert_int_equal(f.n_rows, 300);
  assert_int_equal(f.n_global_buffers, 1 + f.schema.n_fields);
  for (size_t c = 0; c < f.schema.n_fields; c++) {
    char key[128];
    snprintf(key, sizeof key, "lance.seed.%s", f.schema.fields[c].name);
    const mw_kv_t *kv = mw_kvs_get(&f.schema.meta, key);
    assert_non_null(kv);
    mw_seed_locator_t loc;
    assert_int_equal(mw_seed_locator_parse(kv->value, kv->value_len, &loc, NULL), 0);
    assert_int_equal(loc.rows_per_zone, 64);
    const uint8_t *sp;
    size_t sn;
    assert_int_equal(mw_datafile_global_buffer(&f, loc.buffer_index, &sp, &sn, NULL), 0);
    mw_seed_t seed;
    if (mw_seed_decode(sp, sn, &f.schema.fields[c], 64, 300, &seed, &err) < 0) fail_msg("%s: %s", key, err.msg);
    assert_int_equal(seed.n_zones, 5);
    mw_column_t col = {0};
    assert_int_equal(mw_datafile_read_column(&f, c, &col, NULL), 0);
    if (mw_seed_check_column(&seed, &f.schema.fields[c], &col, &err) < 0) fail_msg("%s: %s", key, err.msg);
    mw_buf_free(&col.values), mw_buf_free(&col.validity), mw_buf_free(&col.offsets), mw_buf_free(&col.item_validity);
    mw_seed_free(&seed);
  }
  mw_datafile_close(&f);
  char *mpath = tu_strf("%s/_versions/18446744073709551614.manifest", sdir);
  uint8_t *mb = tu_read_file(mpath, &len);
  mw_table_meta_t tm;
  assert_int_equal(mw_table_meta_read_ex(mb, len, MW_FLAG_ZONE_WRITE_SEEDS, &tm, NULL), 0);
  assert_int_equal(tm.reader_feature_flags, MW_FLAG_ZONE_WRITE_SEEDS);
  assert_int_equal(tm.writer_feature_flags, MW_FLAG_ZONE_WRITE_SEEDS);
  mw_table_meta_free(&tm);
  free(mb), free(mpath), free(bytes), free(dpath), free(ddir), free(sdir);
  tu_free_names(names, 1);
  mw_shard_manifest_free(&m);
  env_close(&e);
}

int main(void) {
  mw_log_init();
  mw_log_set_level(getenv("MW_TEST_DEBUG") ? MW_LOG_DEBUG : MW_LOG_WARN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_claim_fresh_v1_bytes),
      cmocka_unit_test(test_claim_bumps_epoch_writes_sentinel),
      cmocka_unit_test(test_sealed_refuses_claim_then_unseal),
      cmocka_unit_test(test_two_writers_fence),
      cmocka_unit_test(test_claim_of_active_shard_checks_manifest),
      cmocka_unit_test(test_claim_of_fenced_shard_waits_for_flush),
      cmocka_unit_test(test_replay_unflushed_then_flush),
      cmocka_unit_test(test_flush_behind_flush),
      cmocka_unit_test(test_replay_skips_stale_entries_above_sentinel),
      cmocka_unit_test(test_replay_flushes_full_memtable),
      cmocka_unit_test(test_wal_entry_bytes_match_lance),
      cmocka_unit_test(test_wal_pass_through_in_place),
      cmocka_unit_test(test_replay_views_entry),
      cmocka_unit_test(test_group_commit_one_entry),
      cmocka_unit_test(test_idle_wal_commits_at_once),
      cmocka_unit_test(test_durable_false_acks_before_put),
      cmocka_unit_test(test_sync_barrier_durable_false),
      cmocka_unit_test(test_wal_collision_not_fenced),
      cmocka_unit_test(test_wal_io_error_fails_writes),
      cmocka_unit_test(test_wal_dirsync_failure_is_indeterminate),
      cmocka_unit_test(test_commit_update_tolerates_tailer),
      cmocka_unit_test(test_freeze_flush_and_backpressure),
      cmocka_unit_test(test_memtable_age_bound),
      cmocka_unit_test(test_flush_retried_after_failure),
      cmocka_unit_test(test_auto_reclaim_after_wal_failure),
      cmocka_unit_test(test_flush_manifest_commit_recovers),
      cmocka_unit_test_teardown(test_flush_readback_refused, hook_off),
      cmocka_unit_test(test_one_failed_fsync),
      cmocka_unit_test(test_router_bucket),
      cmocka_unit_test(test_drop_table),
      cmocka_unit_test(test_drop_interrupted_is_finishable),
      cmocka_unit_test(test_table_refusals),
      cmocka_unit_test(test_open_sweeps_leftovers),
      cmocka_unit_test(test_zone_seeds_table),
  };
  return tu_run_group(tests, NULL, NULL);
}
