/*
 * test_gc.c — garbage collection (shard/gc.h) against real storage.
 *
 *   wal           many WAL entries and flushes: GC deletes every entry below
 *                 min(replay_after, last_seen) and nothing at or above it;
 *                 a second handle's claim replays exactly the model.
 *   fenced_writer the split-brain case Lance's spec warns about: A holds the
 *                 shard and goes quiet, B claims it (its fence sentinel takes
 *                 A's next slot), writes and flushes far past that slot, and
 *                 B's GC runs. The sentinel survives, A's next write collides
 *                 with it and is refused -ESTALE, nothing of A's is
 *                 acknowledged after the fence.
 *   sstables      compaction, then GC unlists the compacted SSTables and
 *                 deletes their directories (grace 0 here); an unlisted
 *                 directory left by a crash is found by the scan and goes too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "lance/route.h"
#include "lance/shard_manifest.h"
#include "rows.h"
#include "shard/table.h"
#include "testutil.h"

#define UNSHARDED "aa48498d-ac91-59e2-8452-69f46010ace2"
#define RUN_UNTIL_MAX_S 120

typedef struct env {
  uv_loop_t loop;
  char *scratch, *dir;
} env_t;

static void run_until(uv_loop_t *loop, bool (*pred)(void *), void *arg) {
  uint64_t t0 = uv_hrtime();
  while (!pred(arg)) {
    if (!uv_run(loop, UV_RUN_ONCE) && !pred(arg)) fail_msg("loop went idle before the awaited event");
    if (uv_hrtime() - t0 > RUN_UNTIL_MAX_S * 1000000000ull)
      fail_msg("the awaited event did not come within %d s", RUN_UNTIL_MAX_S);
  }
}

static bool flag_set(void *arg) { return *(bool *)arg; }

static void env_init(env_t *e) {
  memset(e, 0, sizeof *e);
  assert_int_equal(uv_loop_init(&e->loop), 0);
  e->scratch = tu_mkdtemp("gc");
  e->dir = tu_strf("%s/t.lance", e->scratch);
  char *cmd = tu_strf("cp -r '%s/unsharded-small/t.lance' '%s' && chmod -R u+w '%s' && rm -rf '%s/_mem_wal'",
                      tu_vectors_dir(), e->dir, e->dir, e->dir);
  assert_int_equal(system(cmd), 0);
  free(cmd);
}

static void env_free(env_t *e) {
  uv_run(&e->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&e->loop), 0);
  tu_rmtree(e->scratch);
  free(e->scratch);
  free(e->dir);
}

static mw_table_t *open_table(env_t *e, const char *gc) {
  const char *keys[] = {"max_memtable_rows", "compaction", "gc", "gc_grace_ms", "gc_interval_ms"};
  const char *values[] = {"300", "off", gc, "0", "10"};
  mw_storage_config_t sc;
  mw_storage_config_init(&sc, NULL);
  sc.durable = false;
  mw_table_opts_t o = {.config_keys = keys, .config_values = values, .n_config = 5, .storage = &sc};
  mw_table_t *t = NULL;
  mw_err_t err = {0};
  if (mw_table_open(&e->loop, e->dir, &o, &t, &err) < 0) fail_msg("open: %s", err.msg);
  return t;
}

static mw_shard_t *unsharded(mw_table_t *t) {
  uint8_t id[16];
  mw_shard_uuid_unsharded(id);
  mw_shard_t *s = mw_table_shard(t, id, true);
  assert_non_null(s);
  return s;
}

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

static void on_compacted(void *arg, int status, const char *reason) {
  done_t *d = arg;
  d->fired = true;
  d->status = status;
  snprintf(d->reason, sizeof d->reason, "%s", reason ? reason : "");
}

static void ctl(env_t *e, int (*fn)(mw_shard_t *, mw_shard_done_cb, void *), mw_shard_t *s) {
  done_t d = {0};
  assert_int_equal(fn(s, on_done, &d), 0);
  run_until(&e->loop, flag_set, &d.fired);
  if (d.status != 0) fail_msg("control: %s", d.reason);
}

/* Writes one at a time (each its own WAL entry), acknowledged in order. */
typedef struct wr {
  mw_shard_write_t w;
  bool fired;
  int status;
} wr_t;

static void on_write(mw_shard_write_t *w, int status, const char *reason) {
  (void)reason;
  wr_t *r = w->data;
  r->fired = true;
  r->status = status;
}

static int write_one(env_t *e, mw_shard_t *s, mw_table_t *t, er_model_t *m, int rows) {
  mw_batch_t b;
  assert_int_equal(er_batch(m, &t->schema, rows, 0.1, &b), 0);
  wr_t r = {0};
  r.w.data = &r;
  int rc = mw_shard_write(s, &r.w, &b, on_write);
  if (rc < 0) {
    mw_batch_free(&b);
    return rc;
  }
  run_until(&e->loop, flag_set, &r.fired);
  return r.status;
}

static char *wal_path(const env_t *e, uint64_t pos) {
  char name[MW_BITREV_NAME_BYTES];
  mw_wal_entry_name(pos, name, sizeof name);
  return tu_strf("%s/_mem_wal/" UNSHARDED "/wal/%s", e->dir, name);
}

static bool wal_exists(const env_t *e, uint64_t pos) {
  char *p = wal_path(e, pos);
  struct stat sb;
  bool ok = stat(p, &sb) == 0;
  free(p);
  return ok;
}

typedef struct gc_wait {
  mw_table_t *t;
  uint64_t until;
} gc_wait_t;

static bool gc_reached(void *arg) {
  gc_wait_t *w = arg;
  mw_gc_shard_stats_t st;
  uint8_t id[16];
  mw_shard_uuid_unsharded(id);
  return mw_gc_shard_stats(w->t->gc, id, &st) && st.wal_first >= w->until;
}

static uint64_t horizon(mw_shard_t *s) {
  uint64_t r = s->ms.cached.replay_after_wal_entry_position, l = s->ms.cached.wal_entry_position_last_seen;
  return r < l ? r : l;
}

static bool closed;
static void on_closed(mw_table_t *t) {
  (void)t;
  closed = true;
}

static void close_table(env_t *e, mw_table_t *t) {
  closed = false;
  assert_int_equal(mw_table_close(t, on_closed), 0);
  run_until(&e->loop, flag_set, &closed);
}

static void test_wal(void **state) {
  (void)state;
  env_t e;
  env_init(&e);
  mw_table_t *t = open_table(&e, "on");
  mw_shard_t *s = unsharded(t);
  er_model_t m;
  er_model_init(&m, 21, 500);
  for (int i = 0; i < 60; i++) assert_int_equal(write_one(&e, s, t, &m, 50), 0);
  ctl(&e, mw_shard_flush, s);
  uint64_t h = horizon(s), tip = s->wal.next_position;
  assert_true(h > 40 && tip > h);
  gc_wait_t w = {t, h};
  run_until(&e.loop, gc_reached, &w);
  mw_gc_stats_t gs;
  mw_gc_stats(t->gc, &gs);
  assert_int_equal(gs.wal_deleted, h - 1);
  assert_int_equal(gs.sentinels_kept, 0); /* epoch 1: no sentinel */
  for (uint64_t p = 1; p < h; p++)
    if (wal_exists(&e, p)) fail_msg("WAL position %" PRIu64 " below the horizon %" PRIu64 " survived", p, h);
  for (uint64_t p = h; p < tip; p++)
    if (!wal_exists(&e, p)) fail_msg("WAL position %" PRIu64 " at/above the horizon is gone", p);
  /* rows past the last flush stay in the WAL; a new owner replays them */
  assert_int_equal(write_one(&e, s, t, &m, 30), 0);
  ctl(&e, mw_shard_abort, s);
  close_table(&e, t);
  t = open_table(&e, "off");
  s = unsharded(t);
  ctl(&e, mw_shard_claim, s);
  ctl(&e, mw_shard_release, s);
  close_table(&e, t);
  er_model_free(&m);
  env_free(&e);
}

static void test_fenced_writer(void **state) {
  (void)state;
  env_t e;
  env_init(&e);
  mw_table_t *a = open_table(&e, "off"), *b = NULL;
  mw_shard_t *sa = unsharded(a);
  er_model_t m;
  er_model_init(&m, 3, 500);
  for (int i = 0; i < 5; i++) assert_int_equal(write_one(&e, sa, a, &m, 20), 0);
  uint64_t slot = sa->wal.next_position; /* where A writes next */
  /* B claims: epoch 2, its sentinel takes A's next slot */
  b = open_table(&e, "on");
  mw_shard_t *sb = unsharded(b);
  ctl(&e, mw_shard_claim, sb);
  assert_true(wal_exists(&e, slot));
  for (int i = 0; i < 40; i++) assert_int_equal(write_one(&e, sb, b, &m, 20), 0);
  ctl(&e, mw_shard_flush, sb);
  uint64_t h = horizon(sb);
  assert_true(h > slot + 10);
  gc_wait_t w = {b, h};
  run_until(&e.loop, gc_reached, &w);
  mw_gc_stats_t gs;
  mw_gc_stats(b->gc, &gs);
  assert_int_equal(gs.sentinels_kept, 1);
  assert_int_equal(gs.wal_deleted, h - 2); /* all but the sentinel */
  assert_true(wal_exists(&e, slot));
  for (uint64_t p = 1; p < h; p++)
    if (p != slot && wal_exists(&e, p)) fail_msg("position %" PRIu64 " survived GC", p);
  /* A wakes up and writes: the slot is taken, A learns it is fenced */
  int rc = write_one(&e, sa, a, &m, 20);
  assert_int_equal(rc, -ESTALE);
  assert_int_equal(mw_shard_state(sa), MW_SS_FENCED);
  assert_true(wal_exists(&e, slot));
  ctl(&e, mw_shard_release, sb);
  close_table(&e, a);
  close_table(&e, b);
  er_model_free(&m);
  env_free(&e);
}

static size_t count_gen_dirs(const env_t *e) {
  char *p = tu_strf("%s/_mem_wal/" UNSHARDED, e->dir);
  DIR *d = opendir(p);
  assert_non_null(d);
  size_t n = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) n += strstr(de->d_name, "_gen_") != NULL;
  closedir(d);
  free(p);
  return n;
}

typedef struct trim_wait {
  mw_table_t *t;
  const env_t *e;
} trim_wait_t;

static bool trimmed_and_deleted(void *arg) {
  trim_wait_t *w = arg;
  mw_gc_shard_stats_t st;
  uint8_t id[16];
  mw_shard_uuid_unsharded(id);
  return mw_gc_shard_stats(w->t->gc, id, &st) && st.trimmed_gen > 0 && st.dirs_waiting == 0;
}

static void test_sstables(void **state) {
  (void)state;
  env_t e;
  env_init(&e);
  /* a leftover of a crash: an SSTable directory no manifest lists */
  char *junk = tu_strf("%s/_mem_wal/" UNSHARDED "/deadbeef_gen_1", e.dir);
  char *cmd = tu_strf("mkdir -p '%s/data' && echo x > '%s/data/x.lance'", junk, junk);
  assert_int_equal(system(cmd), 0);
  free(cmd);
  mw_table_t *t = open_table(&e, "on");
  mw_shard_t *s = unsharded(t);
  er_model_t m;
  er_model_init(&m, 8, 500);
  for (int i = 0; i < 20; i++) assert_int_equal(write_one(&e, s, t, &m, 60), 0);
  ctl(&e, mw_shard_flush, s);
  size_t before = count_gen_dirs(&e);
  assert_true(before >= 4);
  done_t d = {0};
  assert_int_equal(mw_table_compact(t, on_compacted, &d), 0);
  run_until(&e.loop, flag_set, &d.fired);
  assert_int_equal(d.status, 0);
  trim_wait_t w = {t, &e};
  run_until(&e.loop, trimmed_and_deleted, &w);
  assert_int_equal(s->ms.cached.n_sstables, 0); /* every SSTable is in the base now */
  assert_int_equal(count_gen_dirs(&e), 0);
  struct stat sb;
  assert_int_not_equal(stat(junk, &sb), 0);
  mw_gc_stats_t gs;
  mw_gc_stats(t->gc, &gs);
  assert_int_equal(gs.sstables_trimmed, before - 1);
  assert_int_equal(gs.dirs_deleted, before);
  /* writes go on; the next SSTable is listed as usual */
  assert_int_equal(write_one(&e, s, t, &m, 60), 0);
  ctl(&e, mw_shard_release, s);
  assert_int_equal(s->ms.cached.n_sstables, 1);
  close_table(&e, t);
  free(junk);
  er_model_free(&m);
  env_free(&e);
}

int main(void) {
  mw_log_init();
  mw_log_set_level(MW_LOG_WARN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_wal),
      cmocka_unit_test(test_fenced_writer),
      cmocka_unit_test(test_sstables),
  };
  return cmocka_run_group_tests_name("gc", tests, NULL, NULL);
}
