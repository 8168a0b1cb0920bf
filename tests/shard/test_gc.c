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
 *   wal_delete_fault  GC deletes a step's WAL entries in one delete_many;
 *                 one entry whose deletion fails (a per-key fault) stops
 *                 wal_first there (everything below it is gone, it and the
 *                 horizon's entries stay); once the fault is gone GC goes on.
 *   restart_listing  what restarts leave (a fence sentinel kept low, every
 *                 entry above it deleted): a new owner's GC reads no
 *                 deleted position (only what its listing shows), reads
 *                 none of the entries it wrote itself, and still deletes
 *                 everything below the horizon but the sentinels.
 *   sstables      compaction, then GC unlists the compacted SSTables and
 *                 deletes their directories (grace 0 here); an unlisted
 *                 directory left by a crash is found by the scan and goes too.
 *   trim_steady   compactions more often than the grace: trims still come
 *                 (each unlists what was compacted a grace before).
 *   trim_answer_lost  the trim's manifest put lands but answers an error:
 *                 the retried trim finds nothing left to unlist, and the
 *                 directories still go in this process; GC's account never
 *                 shows compacted SSTables unlisted and not waiting.
 *   trim_lost_to_claim  a peer claims epoch+1 between our compaction and
 *                 GC's trim: the trim's put loses (EEXIST), and no SSTable
 *                 directory the peer's newest manifest names is deleted.
 *   history       the base table's old versions and the files only they
 *                 reference, and shard-manifest versions below the newest
 *                 gc_manifest_keep_versions: rounds of writes + flush +
 *                 compaction with a 1 h retention (nothing of the base
 *                 goes), then a handle with retention 0: every version but
 *                 the newest goes, with exactly the files only they named
 *                 (files no manifest ever named stay); every file the newest
 *                 names is there; the shard's manifests left are contiguous
 *                 up to the newest and the hint names one of them; a stale
 *                 hint naming a deleted version still leads our claim to the
 *                 newest (LIST fallback), not to a version GC freed.
 *   release_waits_for_trim  a release that begins while GC's trim (a
 *                 commit of the shard manifest) is on its way to storage
 *                 answers after the trim landed: the manifest the released
 *                 shard holds is the newest on storage, and none comes
 *                 later (a busy machine's test_history found one).
 *   history_peer_cleanup  a peer commits a version and its cleanup deletes
 *                 our listing's newest between our LIST and our GET of it
 *                 (split_brain_gc's lost data files): that run deletes
 *                 nothing, the next deletes exactly the old versions' files.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cases.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/metrics.h"
#include "lance/base_files.h"
#include "lance/dataset_manifest.h"
#include "lance/route.h"
#include "lance/shard_manifest.h"
#include "rows.h"
#include "shard/gc_base.h"
#include "shard/table_int.h" /* white-box: the tests read the table's fields */
#include "storage/fault.h"
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

static mw_table_t *open_table_durable(env_t *e, const char *gc, bool durable) {
  const char *keys[] = {"max_memtable_rows", "compaction", "gc", "gc_grace_ms", "gc_interval_ms"};
  const char *values[] = {"300", "off", gc, "0", "10"};
  mw_storage_config_t sc;
  mw_storage_config_init(&sc, NULL);
  sc.durable = durable;
  mw_table_opts_t o = {.config_keys = keys, .config_values = values, .n_config = 5, .storage = &sc};
  mw_table_t *t = NULL;
  mw_err_t err = {0};
  if (mw_table_open(&e->loop, e->dir, &o, &t, &err) < 0) fail_msg("open: %s", err.msg);
  return t;
}

static mw_table_t *open_table(env_t *e, const char *gc) { return open_table_durable(e, gc, false); }

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
  assert_int_equal(gs.wal_reads, 0);      /* every entry is its own: none read */
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

/* An unlabelled counter of the process-wide registry (GC counts there too). */
static uint64_t counter_value(const char *family) {
  mw_metrics_t *m = mw_metrics_default();
  for (size_t i = 0; i < m->n_families; i++)
    if (strcmp(m->families[i].name, family) == 0)
      return atomic_load(&mw_metric_series(&m->families[i], NULL)->value);
  fail_msg("metric family %s not registered", family);
  return 0;
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
  uint64_t reads0 = 0, lists0 = 0;
  mw_gc_stats_t gs0;
  /* B claims: epoch 2, its sentinel takes A's next slot */
  b = open_table(&e, "on"); /* registers the memwald_gc_* families */
  reads0 = counter_value("memwald_gc_wal_reads_total");
  lists0 = counter_value("memwald_gc_wal_lists_total");
  mw_gc_stats(b->gc, &gs0); /* taken with the counters: the loop is not running */
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
  /* read: A's entries and B's own sentinel (positions 1..slot); B's own
   * entries above it are known to hold rows */
  assert_int_equal(gs.wal_reads, slot);
  assert_int_equal(gs.wal_reads_absent, 0);
  /* the same counts reach the metrics (A's GC is off: B's alone count;
   * wal_lists counts only listings after the scan's, 0 here) */
  assert_int_equal(counter_value("memwald_gc_wal_reads_total") - reads0, gs.wal_reads - gs0.wal_reads);
  assert_int_equal(counter_value("memwald_gc_wal_lists_total") - lists0, gs.wal_lists - gs0.wal_lists);
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

static bool gc_failed(void *arg) {
  mw_gc_stats_t gs;
  mw_gc_stats((mw_gc_t *)arg, &gs);
  return gs.failures > 0;
}

static void test_wal_delete_fault(void **state) {
  (void)state;
  env_t e;
  env_init(&e);
  mw_table_t *t = open_table(&e, "on");
  mw_shard_t *s = unsharded(t);
  er_model_t m;
  er_model_init(&m, 13, 500);
  char name[MW_BITREV_NAME_BYTES];
  mw_wal_entry_name(20, name, sizeof name);
  char *key = tu_strf("_mem_wal/" UNSHARDED "/wal/%s", name);
  int unlink_step = mw_storage_step_parse(t->st, "unlink");
  assert_true(unlink_step >= 0);
  mw_storage_fault_t f = {.fail_prefix = key, .fail_errno = EIO, .fail_steps = MW_STEP_BIT((unsigned)unlink_step)};
  assert_int_equal(mw_storage_fault_set(t->st, &f), 0);
  for (int i = 0; i < 50; i++) assert_int_equal(write_one(&e, s, t, &m, 20), 0);
  ctl(&e, mw_shard_flush, s);
  uint64_t h = horizon(s);
  assert_true(h > 40);
  run_until(&e.loop, gc_failed, t->gc);
  mw_gc_shard_stats_t ss;
  uint8_t id[16];
  mw_shard_uuid_unsharded(id);
  assert_true(mw_gc_shard_stats(t->gc, id, &ss));
  assert_int_equal(ss.wal_first, 20);
  assert_true(wal_exists(&e, 20));
  for (uint64_t p = 1; p < 20; p++)
    if (wal_exists(&e, p)) fail_msg("position %" PRIu64 " below the failed one survived", p);
  mw_gc_stats_t gs;
  mw_gc_stats(t->gc, &gs);
  assert_non_null(strstr(gs.last_error, "WAL delete"));
  assert_int_equal(mw_storage_fault_set(t->st, NULL), 0);
  gc_wait_t w = {t, h};
  run_until(&e.loop, gc_reached, &w);
  for (uint64_t p = 1; p < h; p++)
    if (wal_exists(&e, p)) fail_msg("position %" PRIu64 " below the horizon survived", p);
  mw_gc_stats(t->gc, &gs);
  assert_int_equal(gs.wal_deleted, h - 1);
  ctl(&e, mw_shard_release, s);
  close_table(&e, t);
  free(key);
  er_model_free(&m);
  env_free(&e);
}

static void test_restart_listing(void **state) {
  (void)state;
  env_t e;
  env_init(&e);
  er_model_t m;
  er_model_init(&m, 9, 500);
  mw_table_t *a = open_table(&e, "off");
  mw_shard_t *sa = unsharded(a);
  for (int i = 0; i < 5; i++) assert_int_equal(write_one(&e, sa, a, &m, 20), 0);
  ctl(&e, mw_shard_release, sa);
  close_table(&e, a);
  /* B: epoch 2, sentinel s1; GC deletes everything below its horizon but s1 */
  mw_table_t *b = open_table(&e, "on");
  mw_shard_t *sb = unsharded(b);
  ctl(&e, mw_shard_claim, sb);
  uint64_t s1 = sb->wal.s_position;
  for (int i = 0; i < 40; i++) assert_int_equal(write_one(&e, sb, b, &m, 20), 0);
  ctl(&e, mw_shard_flush, sb);
  uint64_t h = horizon(sb);
  assert_true(s1 > 1 && h > s1 + 30);
  gc_wait_t w = {b, h};
  run_until(&e.loop, gc_reached, &w);
  ctl(&e, mw_shard_release, sb);
  close_table(&e, b);
  uint64_t existing = 0, tip = 0;
  for (uint64_t p = 1; p < h + 100; p++)
    if (wal_exists(&e, p)) {
      existing++;
      tip = p;
    }
  assert_true(wal_exists(&e, s1));
  assert_true(existing < tip - s1); /* B's GC left holes above s1 */
  /* C: epoch 3, sentinel s2 above everything; its GC starts at s1 */
  mw_table_t *c = open_table(&e, "on");
  mw_shard_t *sc = unsharded(c);
  ctl(&e, mw_shard_claim, sc);
  uint64_t s2 = sc->wal.s_position;
  assert_true(s2 > tip);
  for (int i = 0; i < 30; i++) assert_int_equal(write_one(&e, sc, c, &m, 20), 0);
  ctl(&e, mw_shard_flush, sc);
  uint64_t h2 = horizon(sc);
  assert_true(h2 > s2 + 20);
  w = (gc_wait_t){c, h2};
  run_until(&e.loop, gc_reached, &w);
  mw_gc_stats_t gs;
  mw_gc_stats(c->gc, &gs);
  /* every entry below s2 that was left, and s2: read once; no deleted
   * position was asked for; C's own entries went unread */
  assert_int_equal(gs.wal_reads, existing + 1);
  assert_int_equal(gs.wal_reads_absent, 0);
  assert_int_equal(gs.sentinels_kept, 2);
  assert_int_equal(gs.wal_deleted, existing - 1 + (h2 - s2 - 1));
  for (uint64_t p = 1; p < h2; p++)
    if (p != s1 && p != s2 && wal_exists(&e, p)) fail_msg("position %" PRIu64 " survived GC", p);
  assert_true(wal_exists(&e, s1));
  assert_true(wal_exists(&e, s2));
  for (uint64_t p = h2; p < sc->wal.next_position; p++)
    if (!wal_exists(&e, p)) fail_msg("position %" PRIu64 " at/above the horizon is gone", p);
  ctl(&e, mw_shard_release, sc);
  close_table(&e, c);
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

/* Compactions coming more often than the grace (every round here, rounds
 * far shorter than the 1 s grace) still get their SSTables unlisted: a trim
 * waits for a generation compacted a grace ago, not for the newest run to
 * age. On the old rule each run restarted the wait, so under steady
 * compaction no trim ever came and the manifest listed every SSTable ever
 * flushed (tools/read-stress: 114 per shard after 195 s, none trimmed). */
static void test_trim_steady(void **state) {
  (void)state;
  env_t e;
  env_init(&e);
  const char *keys[] = {"max_memtable_rows", "compaction", "gc", "gc_grace_ms", "gc_interval_ms"};
  const char *values[] = {"300", "off", "on", "1000", "10"};
  mw_table_opts_t o = {.config_keys = keys, .config_values = values, .n_config = 5};
  mw_table_t *t = NULL;
  mw_err_t err = {0};
  if (mw_table_open(&e.loop, e.dir, &o, &t, &err) < 0) fail_msg("open: %s", err.msg);
  mw_shard_t *s = unsharded(t);
  er_model_t m;
  er_model_init(&m, 8, 500);
  uv_update_time(&e.loop);
  uint64_t t0 = uv_now(&e.loop), last = 0, max_gap_ms = 0;
  size_t rounds = 0;
  while (rounds < 10 || uv_now(&e.loop) - t0 < 5000) {
    assert_int_equal(write_one(&e, s, t, &m, 60), 0);
    done_t d = {0};
    assert_int_equal(mw_table_compact(t, on_compacted, &d), 0); /* flushes, then compacts */
    run_until(&e.loop, flag_set, &d.fired);
    if (d.status != 0) fail_msg("compaction: %s", d.reason);
    uv_update_time(&e.loop);
    uint64_t now = uv_now(&e.loop);
    if (last > 0 && now - last > max_gap_ms) max_gap_ms = now - last;
    last = now;
    rounds++;
  }
  mw_gc_stats_t gs;
  mw_gc_stats(t->gc, &gs);
  print_message("# %zu compactions in %" PRIu64 " ms (longest gap %" PRIu64 " ms): %" PRIu64 " trims, %" PRIu64
                " SSTables trimmed, %zu listed\n", rounds, uv_now(&e.loop) - t0, max_gap_ms, gs.trims,
                gs.sstables_trimmed, s->ms.cached.n_sstables);
  assert_true(gs.trims >= 1);
  assert_true(gs.sstables_trimmed >= 1);
  assert_true(s->ms.cached.n_sstables < rounds);
  ctl(&e, mw_shard_release, s);
  close_table(&e, t);
  er_model_free(&m);
  env_free(&e);
}

/* GC's own account of a trim, read at any moment: the SSTables the newest
 * manifest no longer lists but whose directories are still there are
 * counted as waiting, so "trimmed up to the compacted generation and none
 * waiting" means their directories are gone. */
typedef struct account_wait {
  mw_table_t *t;
  mw_shard_t *s;
  uint64_t compacted;
  bool lagged; /* a sample had the SSTables unlisted and none waiting */
  bool done;
} account_wait_t;

static bool trim_accounted(void *arg) {
  account_wait_t *w = arg;
  mw_gc_shard_stats_t st;
  uint8_t id[16];
  mw_shard_uuid_unsharded(id);
  if (!mw_gc_shard_stats(w->t->gc, id, &st)) return false;
  bool listed = false;
  for (size_t i = 0; i < w->s->ms.cached.n_sstables; i++)
    listed |= w->s->ms.cached.sstables[i].generation <= w->compacted;
  if (!listed && st.dirs_waiting == 0 && st.trimmed_gen < w->compacted) w->lagged = true;
  return st.trimmed_gen >= w->compacted && st.dirs_waiting == 0;
}

static void on_account_tick(uv_check_t *h) { /* after every loop iteration: every state GC passes */
  account_wait_t *w = h->data;
  if (trim_accounted(w)) w->done = true;
}

/* The trim's manifest put lands but its answer is an error (here: the
 * directory fsync after the link fails; on S3 a lost answer after the
 * create's retries run out): GC retries the trim against the manifest its
 * lost put made, which lists none of the compacted SSTables. Their
 * directories must still be deleted, by this process, not left until a
 * restart's scan; and GC's account never shows them unlisted and not
 * waiting (sampled after every loop iteration). */
static void test_trim_answer_lost(void **state) {
  (void)state;
  env_t e;
  env_init(&e);
  mw_table_t *t = open_table_durable(&e, "on", true);
  mw_shard_t *s = unsharded(t);
  er_model_t m;
  er_model_init(&m, 9, 500);
  for (int i = 0; i < 12; i++) assert_int_equal(write_one(&e, s, t, &m, 60), 0);
  ctl(&e, mw_shard_flush, s);
  size_t before = count_gen_dirs(&e);
  assert_true(before >= 2);
  /* the trim is the next commit: manifest version cached + 1 */
  char key[MW_MSTORE_KEY_BYTES];
  assert_int_equal(mw_mstore_manifest_key(&s->ms, s->ms.cached.version + 1, key, sizeof key), 0);
  int dirsync = mw_storage_step_parse(t->st, "dirsync");
  assert_true(dirsync >= 0);
  mw_storage_fault_t f = {.fail_prefix = key, .fail_errno = EIO, .fail_steps = MW_STEP_BIT((unsigned)dirsync)};
  assert_int_equal(mw_storage_fault_set(t->st, &f), 0);
  uint64_t top = 0;
  for (size_t i = 0; i < s->ms.cached.n_sstables; i++)
    if (s->ms.cached.sstables[i].generation > top) top = s->ms.cached.sstables[i].generation;
  account_wait_t w = {.t = t, .s = s, .compacted = top};
  uv_check_t chk;
  assert_int_equal(uv_check_init(&e.loop, &chk), 0);
  chk.data = &w;
  assert_int_equal(uv_check_start(&chk, on_account_tick), 0);
  done_t d = {0};
  assert_int_equal(mw_table_compact(t, on_compacted, &d), 0);
  run_until(&e.loop, flag_set, &d.fired);
  assert_int_equal(d.status, 0);
  run_until(&e.loop, flag_set, &w.done);
  uv_close((uv_handle_t *)&chk, NULL);
  mw_gc_stats_t gs;
  mw_gc_stats(t->gc, &gs);
  assert_true(gs.failures >= 1); /* the lost answer happened */
  assert_int_equal(s->ms.cached.n_sstables, 0);
  assert_int_equal(count_gen_dirs(&e), 0);
  assert_int_equal(gs.dirs_deleted, before);
  assert_false(w.lagged);
  assert_int_equal(mw_storage_fault_set(t->st, NULL), 0);
  ctl(&e, mw_shard_release, s);
  close_table(&e, t);
  er_model_free(&m);
  env_free(&e);
}

/* A peer (LanceDB opening the shard) claims epoch+1 as manifest version
 * v+1, copying our SSTable list, in the moment between our compaction's
 * commit and GC's trim: the trim's put of v+1 loses (EEXIST) while this
 * process still holds the shard ACTIVE. The trim recorded the compacted
 * directories as candidates before its commit (6b93d48), but the peer's
 * newest manifest names them: none may be deleted, however many GC ticks
 * pass (two trims, each answered -ESTALE), nor by the abort and close. */
typedef struct peer_claim {
  done_t d;
  env_t *e;
  mw_shard_t *s;
  uint64_t version, epoch;
} peer_claim_t;

static void on_compacted_peer_claims(void *arg, int status, const char *reason) {
  peer_claim_t *pc = arg;
  on_compacted(&pc->d, status, reason);
  /* synchronously, before GC's next tick: the peer's claim of v+1 */
  mw_shard_manifest_t m;
  mw_shard_manifest_init(&m);
  assert_int_equal(mw_shard_manifest_copy(&m, &pc->s->ms.cached), 0);
  m.version = pc->version = pc->s->ms.cached.version + 1;
  m.writer_epoch = pc->epoch = pc->s->ms.cached.writer_epoch + 1;
  mw_buf_t b;
  mw_buf_init(&b);
  assert_int_equal(mw_shard_manifest_encode(&m, &b), 0);
  char key[MW_MSTORE_KEY_BYTES];
  assert_int_equal(mw_mstore_manifest_key(&pc->s->ms, m.version, key, sizeof key), 0);
  char *path = tu_strf("%s/%s", pc->e->dir, key);
  FILE *f = fopen(path, "wbx");
  assert_non_null(f);
  assert_int_equal(fwrite(b.data, 1, b.len, f), b.len);
  assert_int_equal(fclose(f), 0);
  free(path);
  mw_buf_free(&b);
  mw_shard_manifest_free(&m);
}

static bool gc_failed_twice(void *arg) {
  mw_gc_stats_t gs;
  mw_gc_stats((mw_gc_t *)arg, &gs);
  return gs.failures >= 2;
}

static void test_trim_lost_to_claim(void **state) {
  (void)state;
  env_t e;
  env_init(&e);
  mw_table_t *t = open_table(&e, "on");
  mw_shard_t *s = unsharded(t);
  er_model_t m;
  er_model_init(&m, 10, 500);
  for (int i = 0; i < 12; i++) assert_int_equal(write_one(&e, s, t, &m, 60), 0);
  ctl(&e, mw_shard_flush, s);
  size_t before = count_gen_dirs(&e);
  size_t listed = s->ms.cached.n_sstables;
  assert_true(before >= 2);
  assert_int_equal(listed, before);
  peer_claim_t pc = {.e = &e, .s = s};
  assert_int_equal(mw_table_compact(t, on_compacted_peer_claims, &pc), 0);
  run_until(&e.loop, flag_set, &pc.d.fired);
  assert_int_equal(pc.d.status, 0);
  /* the trim lost and GC retried it after its backoff: two full chances
   * to delete a candidate */
  run_until(&e.loop, gc_failed_twice, t->gc);
  mw_gc_stats_t gs;
  mw_gc_stats(t->gc, &gs);
  assert_non_null(strstr(gs.last_error, "fenced"));
  assert_int_equal(gs.dirs_deleted, 0);
  assert_int_equal(gs.trims, 0);
  assert_int_equal(count_gen_dirs(&e), before);
  /* the newest manifest on storage is the peer's and names them all */
  assert_int_equal(s->ms.cached.version, pc.version);
  assert_int_equal(s->ms.cached.writer_epoch, pc.epoch);
  assert_int_equal(s->ms.cached.n_sstables, listed);
  ctl(&e, mw_shard_abort, s); /* the rows stay in the WAL (the peer replays them) */
  close_table(&e, t);
  assert_int_equal(count_gen_dirs(&e), before);
  er_model_free(&m);
  env_free(&e);
}

/* ---------------------------------------------------------------- history */

static mw_table_t *open_history(env_t *e, const char *retention) {
  const char *keys[] = {"max_memtable_rows", "compaction", "gc", "gc_grace_ms", "gc_interval_ms",
                        "gc_manifest_keep_versions", "gc_manifest_grace_ms", "gc_history_retention_ms",
                        "gc_history_interval_ms"};
  const char *values[] = {"300", "off", "on", "0", "10", "4", "0", retention, "20"};
  mw_storage_config_t sc;
  mw_storage_config_init(&sc, NULL);
  sc.durable = false;
  mw_table_opts_t o = {.config_keys = keys, .config_values = values, .n_config = 9, .storage = &sc};
  mw_table_t *t = NULL;
  mw_err_t err = {0};
  if (mw_table_open(&e->loop, e->dir, &o, &t, &err) < 0) fail_msg("open: %s", err.msg);
  return t;
}

/* Names in dir (not . and ..), each "<prefix><name>", into a NULL-ended array. */
static char **list_dir(const char *dir, const char *prefix, size_t *n) {
  DIR *d = opendir(dir);
  char **out = calloc(1, sizeof *out);
  *n = 0;
  if (d == NULL) return out;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.') continue;
    out = realloc(out, (*n + 2) * sizeof *out);
    out[(*n)++] = tu_strf("%s%s", prefix, de->d_name);
    out[*n] = NULL;
  }
  closedir(d);
  return out;
}

static void free_list(char **l, size_t n) {
  for (size_t i = 0; i < n; i++) free(l[i]);
  free(l);
}

typedef struct keyset {
  char **k;
  size_t n;
} keyset_t;

static bool ks_has(const keyset_t *s, const char *key) {
  for (size_t i = 0; i < s->n; i++)
    if (strcmp(s->k[i], key) == 0) return true;
  return false;
}

static int ks_add(void *arg, const char *key) {
  keyset_t *s = arg;
  if (ks_has(s, key)) return 0;
  s->k = realloc(s->k, (s->n + 1) * sizeof *s->k);
  s->k[s->n++] = strdup(key);
  return 0;
}

static void ks_free(keyset_t *s) {
  free_list(s->k, s->n);
  memset(s, 0, sizeof *s);
}

/* Every key the table's manifests reference now; *versions = how many. */
static void referenced(const env_t *e, keyset_t *out, size_t *versions) {
  char *vd = tu_strf("%s/_versions", e->dir);
  size_t n;
  char **names = list_dir(vd, "", &n);
  *versions = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t v;
    if (mw_dmanifest_name_parse(names[i], &v, NULL) < 0) continue;
    char *path = tu_strf("%s/%s", vd, names[i]);
    size_t len;
    uint8_t *bytes = tu_read_file(path, &len);
    if (bytes == NULL && errno == ENOENT) {  /* GC deleted it after the listing: no longer a version */
      free(path);
      continue;
    }
    assert_non_null(bytes);
    int64_t ts;
    mw_err_t err = {0};
    if (mw_base_manifest_files(bytes, len, v, &ts, ks_add, out, &err) < 0) fail_msg("%s: %s", path, err.msg);
    free(bytes);
    free(path);
    (*versions)++;
  }
  free_list(names, n);
  free(vd);
}

static bool exists_rel(const env_t *e, const char *key) {
  char *p = tu_strf("%s/%s", e->dir, key);
  struct stat sb;
  bool ok = stat(p, &sb) == 0;
  free(p);
  return ok;
}

static size_t count_versions(const env_t *e) {
  keyset_t ks = {0};
  size_t v;
  referenced(e, &ks, &v);
  ks_free(&ks);
  return v;
}

typedef struct hist_wait {
  const env_t *e;
  mw_table_t *t;
} hist_wait_t;

static bool history_collected(void *arg) {
  hist_wait_t *w = arg;
  mw_gc_stats_t gs;
  mw_gc_stats(w->t->gc, &gs);
  mw_gc_shard_stats_t ss;
  uint8_t id[16];
  mw_shard_uuid_unsharded(id);
  if (!mw_gc_shard_stats(w->t->gc, id, &ss) || ss.manifest_floor != 0 || ss.manifest_first <= 1) return false;
  return gs.base_versions_deleted > 0 && count_versions(w->e) == 1;
}

static void rounds(env_t *e, mw_table_t *t, er_model_t *m, int n) {
  mw_shard_t *s = unsharded(t);
  for (int r = 0; r < n; r++) {
    for (int i = 0; i < 3; i++) assert_int_equal(write_one(e, s, t, m, 60), 0);
    ctl(e, mw_shard_flush, s);
    done_t d = {0};
    assert_int_equal(mw_table_compact(t, on_compacted, &d), 0);
    run_until(&e->loop, flag_set, &d.fired);
    if (d.status != 0) fail_msg("compaction: %s", d.reason);
  }
}

static void test_history(void **state) {
  (void)state;
  env_t e;
  env_init(&e);
  er_model_t m;
  er_model_init(&m, 31, 500);
  /* 1 h retention: the base keeps every version made now (the vector's
   * own, made long ago, may go) */
  mw_table_t *t = open_history(&e, "3600000");
  rounds(&e, t, &m, 12);
  ctl(&e, mw_shard_release, unsharded(t));
  close_table(&e, t);
  keyset_t all = {0};
  size_t before;
  referenced(&e, &all, &before);
  if (before < 12) fail_msg("only %zu base versions after 12 compactions", before);
  /* files no manifest names: an uncommitted (or crashed) writer's */
  char *cmd = tu_strf("echo x > '%s/data/orphan.lance' && echo x > '%s/_transactions/9-orphan.txn'", e.dir, e.dir);
  assert_int_equal(system(cmd), 0);
  free(cmd);

  /* retention 0: everything but the newest version goes */
  t = open_history(&e, "0");
  rounds(&e, t, &m, 1);
  hist_wait_t w = {&e, t};
  run_until(&e.loop, history_collected, &w);
  mw_shard_t *s = unsharded(t);
  uint64_t epoch = s->epoch;
  ctl(&e, mw_shard_release, s);
  uint64_t latest = s->ms.cached.version;
  close_table(&e, t);
  keyset_t now = {0};
  size_t after;
  referenced(&e, &now, &after);
  assert_int_equal(after, 1);
  for (size_t i = 0; i < now.n; i++)
    if (!exists_rel(&e, now.k[i]) && strncmp(now.k[i], "_memwald/", 9) != 0)
      fail_msg("%s is referenced by the newest version but gone", now.k[i]);
  size_t gone = 0;
  for (size_t i = 0; i < all.n; i++) {
    if (ks_has(&now, all.k[i])) continue;
    if (exists_rel(&e, all.k[i])) fail_msg("%s is referenced only by deleted versions but still there", all.k[i]);
    gone++;
  }
  assert_true(gone > 0);
  assert_true(exists_rel(&e, "data/orphan.lance"));
  assert_true(exists_rel(&e, "_transactions/9-orphan.txn"));

  /* the shard's manifests: contiguous up to the newest, hint among them */
  char *md = tu_strf("%s/_mem_wal/" UNSHARDED "/manifest", e.dir);
  size_t n;
  char **names = list_dir(md, "", &n);
  uint64_t lo = UINT64_MAX, hi = 0, count = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t v;
    if (mw_shard_manifest_name_parse(names[i], &v) < 0) continue;
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
    count++;
  }
  free_list(names, n);
  assert_int_equal(hi, latest);
  assert_true(lo > 1);
  assert_int_equal(count, hi - lo + 1);
  assert_true(count >= 4);
  char *hint_path = tu_strf("%s/version_hint.json", md);
  size_t hl;
  uint8_t *hb = tu_read_file(hint_path, &hl);
  uint64_t hint = 0;
  assert_int_equal(mw_version_hint_parse(hb, hl, &hint, NULL), 0);
  free(hb);
  assert_true(hint >= lo && hint <= hi);

  /* a stale hint naming a deleted version: our claim still finds the newest */
  FILE *f = fopen(hint_path, "w");
  assert_non_null(f);
  fputs("{\"version\":1}", f);
  fclose(f);
  t = open_table(&e, "off");
  s = unsharded(t);
  ctl(&e, mw_shard_claim, s);
  assert_int_equal(s->ms.cached.version, latest + 1);
  assert_int_equal(s->epoch, epoch + 1);
  ctl(&e, mw_shard_release, s);
  close_table(&e, t);

  /* retention 1 h again: young versions stay */
  t = open_history(&e, "3600000");
  rounds(&e, t, &m, 2);
  ctl(&e, mw_shard_release, unsharded(t));
  close_table(&e, t);
  assert_true(count_versions(&e) >= 3);

  free(hint_path);
  free(md);
  ks_free(&all);
  ks_free(&now);
  er_model_free(&m);
  env_free(&e);
}

/* ----------------------------------------------------- history: a peer */

/* The newest version of the table at dir (0: none), its manifest path in *path. */
static uint64_t newest_version(const char *dir, char **path) {
  char *vd = tu_strf("%s/_versions", dir);
  size_t n;
  char **names = list_dir(vd, "", &n);
  uint64_t best = 0;
  *path = NULL;
  for (size_t i = 0; i < n; i++) {
    uint64_t v;
    if (mw_dmanifest_name_parse(names[i], &v, NULL) < 0 || v <= best) continue;
    best = v;
    free(*path);
    *path = tu_strf("%s/%s", vd, names[i]);
  }
  free_list(names, n);
  free(vd);
  return best;
}

static const char *peer_dir;
static int peer_runs;
static uint64_t peer_version; /* the version the peer committed */

/* Between our LIST of _versions/ and our first GET: a peer commits N+1 on
 * the newest version N (the same files, as a commit built on N keeps them)
 * and its cleanup, whose listing shows N+1, deletes N (not its newest, older
 * than its retention). First run only. */
static void peer_commits_and_cleans(const char *name) {
  (void)name;
  if (peer_runs++ > 0) return;
  char *path;
  uint64_t n = newest_version(peer_dir, &path);
  assert_true(n >= 3);
  size_t len;
  uint8_t *bytes = tu_read_file(path, &len);
  assert_non_null(bytes);
  char next[MW_DMANIFEST_NAME_BYTES];
  assert_true(mw_dmanifest_name(n + 1, next, sizeof next) >= 0);
  char *np = tu_strf("%s/_versions/%s", peer_dir, next);
  assert_int_equal(tu_write_file(np, bytes, len), 0);
  assert_int_equal(unlink(path), 0);
  peer_version = n + 1;
  free(np);
  free(bytes);
  free(path);
}

static void on_base_run(void *arg, int status, const char *what) {
  done_t *d = arg;
  d->fired = true;
  d->status = status;
  snprintf(d->reason, sizeof d->reason, "%s", what ? what : "");
}

/* Every file the newest version names is there (memwald's key indexes are
 * only a cache: absent when compaction never built one). */
static void newest_files_present(const env_t *e, const char *when) {
  char *path;
  uint64_t v = newest_version(e->dir, &path);
  size_t len;
  uint8_t *bytes = tu_read_file(path, &len);
  assert_non_null(bytes);
  keyset_t ks = {0};
  int64_t ts;
  mw_err_t err = {0};
  if (mw_base_manifest_files(bytes, len, v, &ts, ks_add, &ks, &err) < 0) fail_msg("%s: %s", path, err.msg);
  assert_true(ks.n > 0);
  for (size_t i = 0; i < ks.n; i++)
    if (!exists_rel(e, ks.k[i]) && strncmp(ks.k[i], "_memwald/", 9) != 0)
      fail_msg("%s: %s is referenced by the newest version (v%" PRIu64 ") but gone", when, ks.k[i], v);
  ks_free(&ks);
  free(bytes);
  free(path);
}

/* history_peer_cleanup: two cleanups on one table (two daemons owning
 * different shards, or LanceDB's cleanup_old_versions beside us). Ours lists
 * versions ..N, then a peer commits N+1 and deletes N before we read N's
 * manifest. Our run must delete nothing: N's files are still named by N+1,
 * and without N's manifest nothing tells us which they are. The next run
 * (a fresh listing) deletes every old version with only its own files. */
static void test_history_peer_cleanup(void **state) {
  (void)state;
  env_t e;
  env_init(&e);
  er_model_t m;
  er_model_init(&m, 47, 500);
  mw_table_t *t = open_history(&e, "3600000");
  rounds(&e, t, &m, 4);
  ctl(&e, mw_shard_release, unsharded(t));
  close_table(&e, t);
  keyset_t all = {0};
  size_t before;
  referenced(&e, &all, &before);
  if (before < 4) fail_msg("only %zu base versions after 4 compactions", before);

  t = open_table(&e, "off"); /* only the storage; no GC of its own */
  mw_gc_base_t *b = NULL;
  assert_int_equal(mw_gc_base_new(t->st, e.dir, &b), 0);
  peer_dir = e.dir;
  peer_runs = 0;
  mw_gc_base_listed_hook_for_tests = peer_commits_and_cleans;
  done_t d = {0};
  assert_int_equal(mw_gc_base_run(b, 0, on_base_run, &d), 0);
  run_until(&e.loop, flag_set, &d.fired);
  if (d.status != 0) fail_msg("first run: %s: %s", d.reason, mw_strerror(d.status));
  mw_gc_base_stats_t st;
  mw_gc_base_stats(b, &st);
  assert_int_equal(peer_runs, 1);
  newest_files_present(&e, "after the run that raced the peer");
  assert_int_equal(st.stale_listings, 1);
  assert_int_equal(st.files_deleted, 0);
  assert_int_equal(st.versions_deleted, 0);
  assert_int_equal(count_versions(&e), before); /* N went, N+1 came */

  /* the next run lists again: every version but N+1 goes, with exactly the
   * files no longer named */
  memset(&d, 0, sizeof d);
  assert_int_equal(mw_gc_base_run(b, 0, on_base_run, &d), 0);
  run_until(&e.loop, flag_set, &d.fired);
  if (d.status != 0) fail_msg("second run: %s: %s", d.reason, mw_strerror(d.status));
  mw_gc_base_listed_hook_for_tests = NULL;
  mw_gc_base_stats(b, &st);
  assert_int_equal(st.stale_listings, 1);
  assert_int_equal(st.versions_deleted, before - 1);
  assert_true(st.files_deleted > 0);
  newest_files_present(&e, "after the next run");
  keyset_t now = {0};
  size_t after;
  referenced(&e, &now, &after);
  assert_int_equal(after, 1);
  char *path;
  assert_int_equal(newest_version(e.dir, &path), peer_version);
  free(path);
  for (size_t i = 0; i < all.n; i++)
    if (!ks_has(&now, all.k[i]) && exists_rel(&e, all.k[i]))
      fail_msg("%s is referenced only by deleted versions but still there", all.k[i]);
  mw_gc_base_free(b);
  close_table(&e, t);
  ks_free(&all);
  ks_free(&now);
  er_model_free(&m);
  env_free(&e);
}

/* ------------------------------------------------ release waits for trim */

/* The newest shard-manifest version in the shard's manifest/ directory. */
static uint64_t newest_shard_manifest(const env_t *e) {
  char *md = tu_strf("%s/_mem_wal/" UNSHARDED "/manifest", e->dir);
  size_t n;
  char **names = list_dir(md, "", &n);
  uint64_t hi = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t v;
    if (mw_shard_manifest_name_parse(names[i], &v) == 0 && v > hi) hi = v;
  }
  free_list(names, n);
  free(md);
  return hi;
}

/* A manifest operation in flight while the shard itself is idle: GC's trim. */
static bool manifest_op_in_flight(void *arg) {
  mw_shard_t *s = arg;
  return s->ms.n_busy > 0;
}

static void test_release_waits_for_trim(void **state) {
  (void)state;
  env_t e;
  env_init(&e);
  mw_table_t *t = open_table(&e, "on"); /* grace 0: a trim right after a compaction */
  mw_shard_t *s = unsharded(t);
  er_model_t m;
  er_model_init(&m, 41, 500);
  for (int i = 0; i < 3; i++) assert_int_equal(write_one(&e, s, t, &m, 60), 0);
  ctl(&e, mw_shard_flush, s);
  /* every storage operation starts 100 ms late: the trim's put is long on
   * its way, and a release of an idle shard needs none */
  mw_storage_fault_t f = {.delay_ms = 100};
  assert_int_equal(mw_storage_fault_set(t->st, &f), 0);
  done_t d = {0};
  assert_int_equal(mw_table_compact(t, on_compacted, &d), 0);
  run_until(&e.loop, flag_set, &d.fired);
  if (d.status != 0) fail_msg("compaction: %s", d.reason);
  mw_gc_stats_t gs0, gs;
  mw_gc_stats(t->gc, &gs0);
  run_until(&e.loop, manifest_op_in_flight, s);
  ctl(&e, mw_shard_release, s);
  assert_int_equal(s->ms.n_busy, 0);
  uint64_t held = s->ms.cached.version;
  mw_gc_stats(t->gc, &gs);
  assert_int_equal(gs.trims, gs0.trims + 1); /* the trim landed before the release answered */
  assert_int_equal(s->ms.cached.n_sstables, 0);
  assert_int_equal(mw_storage_fault_set(t->st, NULL), 0);
  close_table(&e, t);
  assert_int_equal(newest_shard_manifest(&e), held);
  er_model_free(&m);
  env_free(&e);
}

int main(void) {
  mw_log_init();
  mw_log_set_level(getenv("MW_TEST_LOG") ? MW_LOG_INFO : MW_LOG_WARN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_wal),
      cmocka_unit_test(test_fenced_writer),
      cmocka_unit_test(test_wal_delete_fault),
      cmocka_unit_test(test_restart_listing),
      cmocka_unit_test(test_sstables),
      cmocka_unit_test(test_trim_steady),
      cmocka_unit_test(test_trim_answer_lost),
      cmocka_unit_test(test_trim_lost_to_claim),
      cmocka_unit_test(test_history),
      cmocka_unit_test(test_history_peer_cleanup),
      cmocka_unit_test(test_release_waits_for_trim),
  };
  return tu_run_group_name("gc", tests, NULL, NULL);
}
