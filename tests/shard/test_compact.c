/*
 * test_compact.c — compaction into the base table (shard/compact.h) against
 * real storage in scratch copies of the golden vectors, read back with our
 * own readers (LanceDB reads the same tables in the interop tests).
 *
 * Each test starts from a vector with its `_mem_wal/` removed, so the prior
 * state is exactly the vector's base rows; the model is that state overlaid
 * by every row written (newest wins, tombstones delete). After compaction
 * the base table's live rows (fragments minus deletion files) must equal
 * the model, and compacted_sstables must name the newest generation.
 *
 *   model        2400 rows, MemTables of 300 rows (several SSTables), one
 *                request: base == model, key indexes stored for the base's
 *                data files, a second request commits nothing.
 *   conflict     another writer commits the very version our commit puts
 *                (a storage hook writes it just before our link): the
 *                compactor loses the race, reads the new version, masks the
 *                other writer's rows it supersedes, keeps the rest, commits
 *                the next version.
 *   two_writers  bucket4-small, two table handles (two daemons) own two
 *                buckets each and compact at the same time: every shard's
 *                rows and generation reach the base, nothing twice.
 *   bad_keyindex a damaged key index is refused and rebuilt from its data
 *                file; the result is unchanged.
 *   zone_seeds   zone_write_seeds on: the fragment compaction writes carries
 *                a v1 seed per column matching its values, the commit sets
 *                FLAG_ZONE_WRITE_SEEDS in both flags, the next commit keeps
 *                it, and the table then opens only with seeds on.
 *   strpk        a table with a utf8 primary key made by our bootstrap:
 *                three rounds of upserts and deletes, each compacted, the
 *                base read back after each equals the model (key indexes and
 *                merge over string keys, superseded rows masked by key).
 *   fold         30 small compactions in a row: small fragments are folded
 *                into the new ones, so the base never holds more than
 *                MW_COMPACT_FOLD_TRIGGER + 1 fragments, and still == model;
 *                after the first run no key index is read or built (each
 *                run caches the index of the fragment it wrote);
 *                with the data files gone, the fold's error names the data
 *                file (not the deletion file read beside it).
 *   new_shards   a run that meets three shards for the first time after it
 *                took a fourth: under ASan, no write into per-shard state
 *                that moved (it once did); then base == model.
 *   find_error   the key lookups run on a pool thread, not the loop's; one
 *                that fails (-ENOMEM, injected) fails the run with a reason
 *                naming the fragment, commits nothing (the base version and
 *                rows stay), and the next request compacts: base == model.
 *   readback_refused  a new base data file whose row count a writer fault
 *                changed is refused by the read-back: the run fails naming
 *                the file, counted; nothing committed or put; the shard
 *                keeps taking writes; without the fault: base == model.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cases.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/metrics.h"
#include "lance/base_update.h"
#include "lance/datafile.h"
#include "lance/deletion.h"
#include "lance/keyindex.h"
#include "lance/route.h"
#include "lance/schema_text.h"
#include "lance/sstable.h"
#include "lance/table_create.h"
#include "lance/zone_seed.h"
#include "rows.h"
#include "shard/table_int.h" /* white-box: the tests read the table's fields */
#include "storage/fault.h"
#include "storage/local.h"
#include "testutil.h"

#define KEYS 400
#define MW_COMPACT_FOLD_TRIGGER_FOR_TESTS 8 /* compact_int.h's MW_COMPACT_FOLD_TRIGGER */
#define RUN_UNTIL_MAX_S 120

static void run_until(uv_loop_t *loop, const bool *flag) {
  uint64_t t0 = uv_hrtime();
  while (!*flag) {
    if (!uv_run(loop, UV_RUN_ONCE) && !*flag) fail_msg("loop went idle before the awaited event");
    if (!*flag && uv_hrtime() - t0 > RUN_UNTIL_MAX_S * 1000000000ull)
      fail_msg("the awaited event did not come within %d s", RUN_UNTIL_MAX_S);
  }
}

typedef struct env {
  uv_loop_t loop;
  char *scratch, *dir;
} env_t;

static void env_init(env_t *e, const char *vector) {
  memset(e, 0, sizeof *e);
  assert_int_equal(uv_loop_init(&e->loop), 0);
  e->scratch = tu_mkdtemp("compact");
  e->dir = tu_strf("%s/t.lance", e->scratch);
  char *cmd = tu_strf("cp -r '%s/%s/t.lance' '%s' && chmod -R u+w '%s' && rm -rf '%s/_mem_wal'",
                      tu_vectors_dir(), vector, e->dir, e->dir, e->dir);
  assert_int_equal(system(cmd), 0);
  free(cmd);
}

/* Closes the loop, then memwal-inspect on the table (every object decodes,
 * verify passes: tests/inspect/inspect_tables.py) before it is removed. */
static void env_free(env_t *e) {
  uv_run(&e->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&e->loop), 0);
  if (tu_inspect_tables(e->scratch, NULL, 1) != 0) fail_msg("memwal-inspect on %s failed (see above)", e->scratch);
  tu_rmtree(e->scratch);
  free(e->scratch);
  free(e->dir);
}

static bool open_zone_seeds; /* test_zone_seeds: the next open_table writes seeds */
static const char *open_interval; /* test_new_shards: compaction_interval_ms of the next open */

static mw_table_t *open_table(env_t *e, const uint8_t (*owned)[16], size_t n_owned,
                              const mw_storage_fault_t *fault) {
  /* key indexes stored for every data file, however small (the cases below
   * check them on disk) */
  static const char *keys[] = {"max_memtable_rows", "compaction", "compaction_min_sstables",
                                "compaction_interval_ms", "compaction_keyindex_store_rows"};
  const char *values[] = {"300", "off", "1", open_interval ? open_interval : "1000", "0"}; /* only on request */
  mw_storage_config_t sc;
  mw_storage_config_init(&sc, NULL);
  sc.durable = false;
  sc.fault = fault;
  mw_table_opts_t o = {.config_keys = keys, .config_values = values, .n_config = 5, .storage = &sc,
                       .owned = owned, .n_owned = n_owned, .zone_write_seeds = open_zone_seeds,
                       .zone_seed_rows_per_zone = open_zone_seeds ? 100 : 0};
  mw_table_t *t = NULL;
  mw_err_t err = {0};
  if (mw_table_open(&e->loop, e->dir, &o, &t, &err) < 0) fail_msg("open: %s", err.msg);
  return t;
}

/* ------------------------------------------------------ base read-back */

/* The live rows of the newest base version: state[id] / present[id]. */
typedef struct base_view {
  er_row_t rows[KEYS + 100];
  bool present[KEYS + 100];
  uint64_t version;
  mw_table_meta_t meta;
} base_view_t;

static uint8_t *read_key(const env_t *e, const char *key, size_t *n) {
  char *p = tu_strf("%s/%s", e->dir, key);
  uint8_t *b = tu_read_file(p, n);
  if (b == NULL) fail_msg("cannot read %s", p);
  free(p);
  return b;
}

static void base_read(const env_t *e, base_view_t *v) {
  if (v->version != 0) mw_table_meta_free(&v->meta); /* a view read before */
  memset(v, 0, sizeof *v);
  char *vdir = tu_strf("%s/_versions", e->dir);
  char **names;
  size_t n = tu_list_dir(vdir, ".manifest", &names);
  mw_err_t err = {0};
  assert_int_equal(mw_dmanifest_latest(names, n, &v->version, NULL, &err), 0);
  char name[MW_DMANIFEST_NAME_BYTES], key[300];
  mw_dmanifest_name(v->version, name, sizeof name);
  snprintf(key, sizeof key, "_versions/%s", name);
  size_t len;
  uint8_t *b = read_key(e, key, &len);
  if (mw_table_meta_read(b, len, &v->meta, &err) < 0) fail_msg("base v%" PRIu64 ": %s", v->version, err.msg);
  free(b);
  tu_free_names(names, n);
  free(vdir);
  const Lance__Table__Manifest *pb = v->meta.manifest.pb;
  for (size_t i = 0; i < pb->n_fragments; i++) {
    const Lance__Table__DataFragment *f = pb->fragments[i];
    snprintf(key, sizeof key, "data/%s", f->files[0]->path);
    uint8_t *data = read_key(e, key, &len);
    mw_datafile_t df;
    mw_batch_t batch;
    assert_int_equal(mw_datafile_open(&df, data, len, NULL, NULL), 0);
    assert_int_equal(mw_datafile_read_batch(&df, &batch, NULL), 0);
    assert_int_equal((uint64_t)batch.n_rows, f->physical_rows);
    uint8_t *dead = calloc((size_t)batch.n_rows + 1, 1);
    if (f->deletion_file) {
      const Lance__Table__DeletionFile *d = f->deletion_file;
      bool bitmap = d->file_type == LANCE__TABLE__DELETION_FILE__DELETION_FILE_TYPE__BITMAP;
      snprintf(key, sizeof key, "_deletions/%" PRIu64 "-%" PRIu64 "-%" PRIu64 ".%s", f->id, d->read_version,
               d->id, bitmap ? "bin" : "arrow");
      size_t dl;
      uint8_t *db = read_key(e, key, &dl);
      uint32_t *offs;
      size_t k;
      int rc = bitmap ? mw_deletion_decode(db, dl, f->physical_rows, &offs, &k, NULL)
                      : mw_deletion_arrow_decode(db, dl, f->physical_rows, &offs, &k, NULL);
      assert_int_equal(rc, 0);
      assert_int_equal(k, d->num_deleted_rows);
      for (size_t j = 0; j < k; j++) dead[offs[j]] = 1;
      free(offs);
      free(db);
    }
    for (int64_t r = 0; r < batch.n_rows; r++) {
      if (dead[r]) continue;
      er_row_t row;
      memset(&row, 0, sizeof row);
      const mw_column_t *c = batch.cols;
      memcpy(&row.id, c[0].values.data + 8 * r, 8);
      assert_true(row.id >= 0 && row.id < KEYS + 100);
      if (v->present[row.id]) fail_msg("key %" PRId64 " is live twice in the base", row.id);
      row.name_null = !mw_column_valid(&c[1], r);
      if (!row.name_null) {
        size_t nn;
        const uint8_t *p = mw_column_bytes(&c[1], r, &nn);
        memcpy(row.name, p, nn < sizeof row.name - 1 ? nn : sizeof row.name - 1);
      }
      row.v_null = !mw_column_valid(&c[2], r);
      if (!row.v_null) memcpy(&row.v, c[2].values.data + 8 * r, 8);
      row.vec_null = !mw_column_valid(&c[3], r);
      if (!row.vec_null) memcpy(row.vec, c[3].values.data + 32 * r, 32);
      v->rows[row.id] = row;
      v->present[row.id] = true;
    }
    free(dead);
    mw_batch_free(&batch);
    mw_datafile_close(&df);
    free(data);
  }
}

/* prior overlaid by the model must be what the base holds now */
static void expect_model(const base_view_t *prior, const er_model_t *m, const base_view_t *now,
                         const bool *extra_live, const er_row_t *extra) {
  int64_t live = 0;
  for (int64_t k = 0; k < KEYS + 100; k++) {
    bool want = prior->present[k];
    const er_row_t *w = &prior->rows[k];
    if (extra_live && extra_live[k]) want = true, w = &extra[k];
    if (k < m->max_key && m->set[k]) {
      want = !m->last[k].tomb;
      w = &m->last[k];
    }
    if (want != now->present[k]) fail_msg("key %" PRId64 ": %s in the base, expected %s", k,
                                           now->present[k] ? "live" : "absent", want ? "live" : "absent");
    if (!want) continue;
    er_row_t a = *w, b = now->rows[k];
    a.tomb = b.tomb = false;
    if (!er_row_equal(&a, &b)) fail_msg("key %" PRId64 ": the base row differs from the model", k);
    live++;
  }
  assert_true(live > 0);
}

/* -------------------------------------------------------------- driving */

static int writes_left, writes_failed;
static void on_write(mw_table_write_t *w, int status, const char *reason) {
  if (status != 0) {
    print_message("write failed: %s\n", reason ? reason : "?");
    writes_failed++;
  }
  free(w);
  writes_left--;
}

/* n rows in 40-row writes; keys restricted to `mask` buckets of 4 (0 = any) */
static void write_rows(env_t *e, mw_table_t *t, er_model_t *m, int n, unsigned mask) {
  bool done = false;
  for (int at = 0; at < n; at += 40) {
    mw_batch_t b;
    assert_int_equal(mw_batch_init(&b, &t->schema), 0);
    while (b.n_rows < 40) {
      int64_t id = (int64_t)(er_rand(m) % (uint64_t)m->max_key);
      if (mask && !(mask & (1u << mw_route_bucket_of(mw_murmur3_long(id), 4)))) continue;
      er_row_t r;
      er_row_gen(m, &r, id, 0.1);
      assert_int_equal(er_row_append(&b, &r), 0);
      m->last[id] = r;
      m->set[id] = true;
    }
    mw_table_write_t *w = calloc(1, sizeof *w);
    mw_err_t err = {0};
    if (mw_table_write(t, w, &b, on_write, &err) < 0) fail_msg("write: %s", err.msg);
    writes_left++;
  }
  (void)done;
  while (writes_left > 0) assert_true(uv_run(&e->loop, UV_RUN_ONCE) || writes_left == 0);
  assert_int_equal(writes_failed, 0);
}

typedef struct done {
  bool fired;
  int status;
  char reason[600];
} done_t;

static void on_shard_done(mw_shard_t *s, int status, const char *reason, void *arg) {
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

static void flush_all(env_t *e, mw_table_t *t) {
  for (size_t i = 0; i < t->n_shards; i++) {
    mw_shard_t *s = &t->shards[i]->shard;
    if (mw_shard_state(s) != MW_SS_ACTIVE) continue;
    done_t d = {0};
    assert_int_equal(mw_shard_flush(s, on_shard_done, &d), 0);
    run_until(&e->loop, &d.fired);
    assert_int_equal(d.status, 0);
  }
}

static void compact(env_t *e, mw_table_t *t) {
  done_t d = {0};
  assert_int_equal(mw_table_compact(t, on_compacted, &d), 0);
  assert_false(d.fired); /* never answered inside the call */
  run_until(&e->loop, &d.fired);
  if (d.status != 0) fail_msg("compaction: %s", d.reason);
}

static bool closed;
static void on_closed(mw_table_t *t) {
  (void)t;
  closed = true;
}

static void close_table(env_t *e, mw_table_t *t) {
  for (size_t i = 0; i < t->n_shards; i++) {
    mw_shard_t *s = &t->shards[i]->shard;
    if (mw_shard_state(s) != MW_SS_ACTIVE) continue;
    done_t d = {0};
    assert_int_equal(mw_shard_release(s, on_shard_done, &d), 0);
    run_until(&e->loop, &d.fired);
    assert_int_equal(d.status, 0);
  }
  closed = false;
  assert_int_equal(mw_table_close(t, on_closed), 0);
  run_until(&e->loop, &closed);
}

static uint64_t top_generation(mw_table_t *t, size_t i) {
  const mw_shard_t *s = &t->shards[i]->shard;
  uint64_t g = 0;
  for (size_t k = 0; k < s->ms.cached.n_sstables; k++)
    if (s->ms.cached.sstables[k].generation > g) g = s->ms.cached.sstables[k].generation;
  return g;
}

/* ---------------------------------------------------------------- tests */

static void test_model(void **state) {
  (void)state;
  env_t e;
  env_init(&e, "unsharded-small");
  base_view_t *prior = calloc(1, sizeof *prior), *now = calloc(1, sizeof *now);
  base_read(&e, prior);
  mw_table_t *t = open_table(&e, NULL, 0, NULL);
  er_model_t m;
  er_model_init(&m, 11, KEYS);
  write_rows(&e, t, &m, 2400, 0);
  flush_all(&e, t);
  assert_int_equal(t->n_shards, 1);
  uint64_t top = top_generation(t, 0);
  assert_true(top >= 8); /* 2400 rows / 300 per MemTable */
  compact(&e, t);
  mw_compact_stats_t cs;
  mw_compact_stats(t->compact, &cs);
  assert_true(cs.runs >= 1);
  assert_int_equal(cs.sstables, top);
  assert_int_equal(cs.failures, 0);
  assert_int_equal(cs.keyindex_built, 1); /* the vector's one base data file */
  mw_compact_shard_t st;
  assert_true(mw_compact_shard_state(t->compact, t->shards[0]->id, &st));
  assert_int_equal(st.compacted_gen, top);
  base_read(&e, now);
  expect_model(prior, &m, now, NULL, NULL);
  assert_int_equal(mw_memwal_compacted(&now->meta.memwal, t->shards[0]->id), top);
  assert_int_equal(now->version, prior->version + cs.runs);
  /* a key index for every data file of the base */
  const Lance__Table__Manifest *pb = now->meta.manifest.pb;
  for (size_t i = 0; i < pb->n_fragments; i++) {
    char name[MW_KEYINDEX_NAME_BYTES];
    assert_true(mw_keyindex_name(pb->fragments[i]->files[0]->path, name, sizeof name) > 0);
    char *p = tu_strf("%s/%s", e.dir, name);
    struct stat sb;
    if (stat(p, &sb) != 0) fail_msg("no key index %s", p);
    free(p);
  }
  /* nothing left: a second request commits nothing */
  compact(&e, t);
  mw_compact_stats_t cs2;
  mw_compact_stats(t->compact, &cs2);
  assert_int_equal(cs2.runs, cs.runs);
  close_table(&e, t);
  /* a restarted daemon knows nothing yet and finds it all done */
  t = open_table(&e, NULL, 0, NULL);
  write_rows(&e, t, &m, 80, 0); /* claims the shard */
  flush_all(&e, t);
  compact(&e, t);
  base_read(&e, now);
  expect_model(prior, &m, now, NULL, NULL);
  close_table(&e, t);
  er_model_free(&m);
  mw_table_meta_free(&prior->meta);
  mw_table_meta_free(&now->meta);
  free(prior);
  free(now);
  env_free(&e);
}

/* --- conflict: another writer commits our version first -------------- */

static struct {
  env_t *e;
  bool armed, fired;
  er_row_t rows[KEYS + 100];
  bool live[KEYS + 100];
  int64_t ids[16];
  size_t n;
} foreign;

static void write_file(const env_t *e, const char *key, const mw_buf_t *b) {
  char *p = tu_strf("%s/%s", e->dir, key);
  assert_int_equal(tu_write_file(p, b->data, b->len), 0);
  free(p);
}

/* Commit "version N+1" as another writer would: an appended fragment. */
static void foreign_commit(void) {
  base_view_t *v = calloc(1, sizeof *v);
  base_read(foreign.e, v);
  mw_schema_t *s = &v->meta.schema;
  mw_batch_t b;
  assert_int_equal(mw_batch_init(&b, s), 0);
  for (size_t i = 0; i < foreign.n; i++) {
    er_row_t r = {.id = foreign.ids[i], .v = 1000.0 + (double)i, .vec_null = true};
    snprintf(r.name, sizeof r.name, "foreign_%" PRId64, r.id);
    assert_int_equal(mw_column_append_fixed(&b.cols[0], &r.id, 8), 0);
    assert_int_equal(mw_column_append_bytes(&b.cols[1], r.name, strlen(r.name)), 0);
    assert_int_equal(mw_column_append_fixed(&b.cols[2], &r.v, 8), 0);
    assert_int_equal(mw_column_append_null(&b.cols[3], &s->fields[3]), 0);
    b.n_rows++;
    foreign.rows[r.id] = r;
    foreign.live[r.id] = true;
  }
  mw_buf_t data = MW_BUF_INIT;
  const mw_batch_t *bp = &b;
  assert_int_equal(mw_sstable_data_file(s, &bp, 1, NULL, &data, NULL), 0);
  int32_t ids[4] = {0, 1, 2, 3}, cols[4] = {0, 1, 2, 3};
  for (int i = 0; i < 4; i++) ids[i] = s->fields[i].id;
  mw_bu_fragment_t frag = {.data_file = "foreign.lance", .file_size_bytes = data.len,
                           .physical_rows = (uint64_t)b.n_rows, .field_ids = ids, .column_indices = cols,
                           .n_columns = 4};
  mw_base_update_t u = {.fragments = &frag, .n_fragments = 1};
  mw_base_commit_t c;
  v->meta.version = v->version;
  assert_int_equal(mw_base_update_build(&v->meta, &u, &c, NULL), 0);
  write_file(foreign.e, "data/foreign.lance", &data);
  char key[300], name[MW_DMANIFEST_NAME_BYTES];
  mw_dmanifest_name(c.version, name, sizeof name);
  snprintf(key, sizeof key, "_versions/%s", name);
  write_file(foreign.e, key, &c.manifest);
  mw_base_commit_free(&c);
  mw_buf_free(&data);
  mw_batch_free(&b);
  mw_table_meta_free(&v->meta);
  free(v);
}

static void on_step(void *ctx, const mw_storage_req_t *req, unsigned step) {
  (void)ctx;
  if (!foreign.armed || foreign.fired || step != MW_STEP_LINK) return;
  if (strncmp(mw_storage_req_key(req), "_versions/", 10) != 0) return;
  foreign.fired = true;
  foreign_commit();
}

static void test_conflict(void **state) {
  (void)state;
  env_t e;
  env_init(&e, "unsharded-small");
  memset(&foreign, 0, sizeof foreign);
  foreign.e = &e;
  base_view_t *prior = calloc(1, sizeof *prior), *now = calloc(1, sizeof *now);
  base_read(&e, prior);
  mw_storage_fault_t fault = {.on_step = on_step};
  mw_table_t *t = open_table(&e, NULL, 0, &fault);
  er_model_t m;
  er_model_init(&m, 5, KEYS);
  write_rows(&e, t, &m, 1200, 0);
  flush_all(&e, t);
  /* the other writer's rows: five keys we also wrote, five we never write */
  for (int64_t k = 0, got = 0; k < KEYS && got < 5; k++)
    if (m.set[k]) foreign.ids[foreign.n++] = k, got++;
  for (int64_t k = KEYS; k < KEYS + 5; k++) foreign.ids[foreign.n++] = k;
  foreign.armed = true;
  compact(&e, t);
  assert_true(foreign.fired);
  mw_compact_stats_t cs;
  mw_compact_stats(t->compact, &cs);
  assert_int_equal(cs.conflicts, 1);
  assert_int_equal(cs.failures, 0);
  base_read(&e, now);
  assert_int_equal(now->version, prior->version + 2); /* theirs, then ours */
  /* ours win where we wrote; their other five rows stay */
  bool extra[KEYS + 100] = {0};
  for (size_t i = 5; i < foreign.n; i++) extra[foreign.ids[i]] = true;
  expect_model(prior, &m, now, extra, foreign.rows);
  close_table(&e, t);
  er_model_free(&m);
  mw_table_meta_free(&prior->meta);
  mw_table_meta_free(&now->meta);
  free(prior);
  free(now);
  env_free(&e);
}

/* --- two daemons, different shards, one base table ------------------ */

static void test_two_writers(void **state) {
  (void)state;
  env_t e;
  env_init(&e, "bucket4-small");
  base_view_t *prior = calloc(1, sizeof *prior), *now = calloc(1, sizeof *now);
  base_read(&e, prior);
  uint8_t a_ids[2][16], b_ids[2][16];
  for (uint32_t i = 0; i < 2; i++) {
    mw_shard_uuid_bucket(i, a_ids[i]);
    mw_shard_uuid_bucket(i + 2, b_ids[i]);
  }
  mw_table_t *a = open_table(&e, (const uint8_t(*)[16])a_ids, 2, NULL);
  mw_table_t *b = open_table(&e, (const uint8_t(*)[16])b_ids, 2, NULL);
  er_model_t m; /* one model: the buckets split the keys, so no key is written twice */
  er_model_init(&m, 9, KEYS);
  for (int round = 0; round < 3; round++) {
    write_rows(&e, a, &m, 600, 0x3);
    write_rows(&e, b, &m, 600, 0xc);
  }
  flush_all(&e, a);
  flush_all(&e, b);
  done_t da = {0}, db = {0};
  assert_int_equal(mw_table_compact(a, on_compacted, &da), 0);
  assert_int_equal(mw_table_compact(b, on_compacted, &db), 0);
  run_until(&e.loop, &da.fired);
  run_until(&e.loop, &db.fired);
  if (da.status != 0 || db.status != 0) fail_msg("compaction: %s / %s", da.reason, db.reason);
  mw_compact_stats_t sa, sb;
  mw_compact_stats(a->compact, &sa);
  mw_compact_stats(b->compact, &sb);
  print_message("# two writers: %" PRIu64 " + %" PRIu64 " runs, %" PRIu64 " + %" PRIu64 " lost races\n",
                sa.runs, sb.runs, sa.conflicts, sb.conflicts);
  assert_true(sa.runs >= 1 && sb.runs >= 1); /* a run commits all of a handle's due shards at once */
  base_read(&e, now);
  expect_model(prior, &m, now, NULL, NULL);
  assert_int_equal(now->meta.memwal.n_compacted, 4);
  for (size_t i = 0; i < a->n_shards; i++)
    assert_int_equal(mw_memwal_compacted(&now->meta.memwal, a->shards[i]->id), top_generation(a, i));
  for (size_t i = 0; i < b->n_shards; i++)
    assert_int_equal(mw_memwal_compacted(&now->meta.memwal, b->shards[i]->id), top_generation(b, i));
  close_table(&e, a);
  close_table(&e, b);
  er_model_free(&m);
  mw_table_meta_free(&prior->meta);
  mw_table_meta_free(&now->meta);
  free(prior);
  free(now);
  env_free(&e);
}

/* --- a damaged key index is only a cache -------------------------------- */

static void test_bad_keyindex(void **state) {
  (void)state;
  env_t e;
  env_init(&e, "unsharded-small");
  base_view_t *prior = calloc(1, sizeof *prior), *now = calloc(1, sizeof *now);
  base_read(&e, prior);
  char name[MW_KEYINDEX_NAME_BYTES];
  assert_true(mw_keyindex_name(prior->meta.manifest.pb->fragments[0]->files[0]->path, name, sizeof name) > 0);
  char *p = tu_strf("%s/_memwald", e.dir);
  assert_int_equal(mkdir(p, 0755), 0);
  free(p);
  p = tu_strf("%s/_memwald/keys", e.dir);
  assert_int_equal(mkdir(p, 0755), 0);
  free(p);
  p = tu_strf("%s/%s", e.dir, name);
  assert_int_equal(tu_write_file(p, "not a key index", 15), 0);
  mw_table_t *t = open_table(&e, NULL, 0, NULL);
  er_model_t m;
  er_model_init(&m, 3, KEYS);
  write_rows(&e, t, &m, 900, 0);
  flush_all(&e, t);
  compact(&e, t);
  mw_compact_stats_t cs;
  mw_compact_stats(t->compact, &cs);
  assert_int_equal(cs.keyindex_built, 1);
  base_read(&e, now);
  expect_model(prior, &m, now, NULL, NULL);
  size_t n;
  uint8_t *kb = tu_read_file(p, &n);
  assert_non_null(kb);
  mw_keyindex_t ki;
  assert_int_equal(mw_keyindex_decode(kb, n, &now->meta.schema.fields[0], &ki, NULL), 0); /* rewritten */
  mw_keyindex_free(&ki);
  free(kb);
  free(p);
  close_table(&e, t);
  er_model_free(&m);
  mw_table_meta_free(&prior->meta);
  mw_table_meta_free(&now->meta);
  free(prior);
  free(now);
  env_free(&e);
}

/* --- zone write seeds on base fragments ------------------------------- */

/* The latest base manifest (any feature flag accepted). */
static void latest_meta(const env_t *e, mw_table_meta_t *t) {
  char *vdir = tu_strf("%s/_versions", e->dir);
  char **names;
  size_t n = tu_list_dir(vdir, ".manifest", &names);
  uint64_t v;
  assert_int_equal(mw_dmanifest_latest(names, n, &v, NULL, NULL), 0);
  char name[MW_DMANIFEST_NAME_BYTES], key[300];
  mw_dmanifest_name(v, name, sizeof name);
  snprintf(key, sizeof key, "_versions/%s", name);
  size_t len;
  uint8_t *b = read_key(e, key, &len);
  mw_err_t err = {0};
  if (mw_table_meta_read_ex(b, len, MW_FLAG_ZONE_WRITE_SEEDS, t, &err) < 0) fail_msg("%s", err.msg);
  free(b);
  tu_free_names(names, n);
  free(vdir);
}

/* Seeded fragments of a manifest: each seed decodes and describes the rows. */
static size_t check_fragment_seeds(const env_t *e, const mw_table_meta_t *t) {
  size_t seeded = 0;
  const Lance__Table__Manifest *pb = t->manifest.pb;
  for (size_t i = 0; i < pb->n_fragments; i++) {
    char key[300];
    snprintf(key, sizeof key, "data/%s", pb->fragments[i]->files[0]->path);
    size_t len;
    uint8_t *data = read_key(e, key, &len);
    mw_datafile_t df;
    mw_batch_t batch;
    mw_err_t err = {0};
    assert_int_equal(mw_datafile_open(&df, data, len, NULL, NULL), 0);
    assert_int_equal(mw_datafile_read_batch(&df, &batch, NULL), 0);
    size_t found = 0;
    for (size_t c = 0; c < df.schema.n_fields; c++) {
      char mk[128];
      snprintf(mk, sizeof mk, "lance.seed.%s", df.schema.fields[c].name);
      const mw_kv_t *kv = mw_kvs_get(&df.schema.meta, mk);
      if (kv == NULL) continue;
      mw_seed_locator_t loc;
      const uint8_t *p;
      size_t n;
      mw_seed_t s;
      assert_int_equal(mw_seed_locator_parse(kv->value, kv->value_len, &loc, NULL), 0);
      assert_int_equal(loc.rows_per_zone, 100);
      assert_int_equal(mw_datafile_global_buffer(&df, loc.buffer_index, &p, &n, NULL), 0);
      if (mw_seed_decode(p, n, &df.schema.fields[c], 100, df.n_rows, &s, &err) < 0 ||
          mw_seed_check_column(&s, &df.schema.fields[c], &batch.cols[c], &err) < 0)
        fail_msg("%s %s: %s", key, mk, err.msg);
      assert_int_equal(s.version, 1);
      mw_seed_free(&s);
      found++;
    }
    assert_true(found == 0 || found == df.schema.n_fields); /* all columns or none */
    seeded += found > 0;
    mw_batch_free(&batch);
    mw_datafile_close(&df);
    free(data);
  }
  return seeded;
}

static void test_zone_seeds(void **state) {
  (void)state;
  env_t e;
  env_init(&e, "unsharded-small");
  open_zone_seeds = true;
  mw_table_t *t = open_table(&e, NULL, 0, NULL);
  er_model_t m;
  er_model_init(&m, 17, KEYS);
  write_rows(&e, t, &m, 600, 0);
  flush_all(&e, t);
  compact(&e, t);
  mw_table_meta_t meta;
  latest_meta(&e, &meta);
  assert_int_equal(meta.reader_feature_flags & MW_FLAG_ZONE_WRITE_SEEDS, MW_FLAG_ZONE_WRITE_SEEDS);
  assert_int_equal(meta.writer_feature_flags & MW_FLAG_ZONE_WRITE_SEEDS, MW_FLAG_ZONE_WRITE_SEEDS);
  assert_int_equal(check_fragment_seeds(&e, &meta), 1); /* the vector's own fragment has none */
  mw_table_meta_free(&meta);
  /* a derived version keeps both bits */
  write_rows(&e, t, &m, 200, 0);
  flush_all(&e, t);
  compact(&e, t);
  latest_meta(&e, &meta);
  assert_int_equal(meta.reader_feature_flags & MW_FLAG_ZONE_WRITE_SEEDS, MW_FLAG_ZONE_WRITE_SEEDS);
  assert_int_equal(meta.writer_feature_flags & MW_FLAG_ZONE_WRITE_SEEDS, MW_FLAG_ZONE_WRITE_SEEDS);
  assert_true(check_fragment_seeds(&e, &meta) >= 1);
  mw_table_meta_free(&meta);
  close_table(&e, t);
  /* the flagged table opens only with seeds on */
  open_zone_seeds = false;
  mw_storage_config_t sc;
  mw_storage_config_init(&sc, NULL);
  sc.durable = false;
  mw_table_opts_t o = {.storage = &sc};
  mw_err_t err = {0};
  assert_int_equal(mw_table_open(&e.loop, e.dir, &o, &t, &err), -ENOTSUP);
  assert_non_null(strstr(err.msg, "FLAG_ZONE_WRITE_SEEDS"));
  er_model_free(&m);
  env_free(&e);
}

/* --- a utf8 primary key ------------------------------------------------- */

#define SKEYS 200

static void create_table(const char *dir, const char *schema, const char *pk, const char *spec) {
  mw_schema_t s;
  mw_shard_spec_t sp;
  mw_table_files_t files;
  mw_err_t err = {0};
  mw_schema_init(&s);
  if (mw_schema_text_parse(schema, &s, &err) < 0 || mw_schema_pk_text_apply(&s, pk, &err) < 0 ||
      mw_shard_spec_text_parse(spec, &s, &sp, &err) < 0)
    fail_msg("schema: %s", err.msg);
  mw_table_create_params_t p = {.schema = &s, .spec = &sp};
  if (mw_table_create_encode(&p, &files, &err) < 0) fail_msg("create: %s", err.msg);
  for (size_t i = 0; i < files.n; i++) {
    char *path = tu_strf("%s/%s", dir, files.files[i].path);
    char *cmd = tu_strf("mkdir -p \"$(dirname '%s')\"", path);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(tu_write_file(path, files.files[i].bytes.data, files.files[i].bytes.len), 0);
    free(cmd);
    free(path);
  }
  mw_table_files_free(&files);
  mw_schema_free(&s);
}

/* live rows of the newest base version: key k -> value, or absent */
static void strpk_base(const env_t *e, bool *present, int64_t *value) {
  base_view_t *v = calloc(1, sizeof *v);
  char *vdir = tu_strf("%s/_versions", e->dir);
  char **names;
  size_t n = tu_list_dir(vdir, ".manifest", &names);
  assert_int_equal(mw_dmanifest_latest(names, n, &v->version, NULL, NULL), 0);
  char name[MW_DMANIFEST_NAME_BYTES], key[300];
  mw_dmanifest_name(v->version, name, sizeof name);
  snprintf(key, sizeof key, "_versions/%s", name);
  size_t len;
  uint8_t *b = read_key(e, key, &len);
  assert_int_equal(mw_table_meta_read(b, len, &v->meta, NULL), 0);
  free(b);
  memset(present, 0, SKEYS * sizeof *present);
  const Lance__Table__Manifest *pb = v->meta.manifest.pb;
  for (size_t i = 0; i < pb->n_fragments; i++) {
    const Lance__Table__DataFragment *f = pb->fragments[i];
    snprintf(key, sizeof key, "data/%s", f->files[0]->path);
    uint8_t *data = read_key(e, key, &len);
    mw_datafile_t df;
    mw_batch_t batch;
    assert_int_equal(mw_datafile_open(&df, data, len, NULL, NULL), 0);
    assert_int_equal(mw_datafile_read_batch(&df, &batch, NULL), 0);
    uint8_t *dead = calloc((size_t)batch.n_rows + 1, 1);
    if (f->deletion_file) {
      const Lance__Table__DeletionFile *d = f->deletion_file;
      snprintf(key, sizeof key, "_deletions/%" PRIu64 "-%" PRIu64 "-%" PRIu64 ".bin", f->id, d->read_version, d->id);
      size_t dl;
      uint8_t *db = read_key(e, key, &dl);
      uint32_t *offs;
      size_t k;
      assert_int_equal(mw_deletion_decode(db, dl, f->physical_rows, &offs, &k, NULL), 0);
      for (size_t j = 0; j < k; j++) dead[offs[j]] = 1;
      free(offs);
      free(db);
    }
    for (int64_t r = 0; r < batch.n_rows; r++) {
      if (dead[r]) continue;
      size_t kn;
      const uint8_t *kp = mw_column_bytes(&batch.cols[0], r, &kn);
      char ks[32];
      assert_true(kn < sizeof ks);
      memcpy(ks, kp, kn);
      ks[kn] = 0;
      int k = atoi(ks + 1);
      assert_true(k >= 0 && k < SKEYS);
      if (present[k]) fail_msg("key %s is live twice", ks);
      present[k] = true;
      memcpy(&value[k], batch.cols[1].values.data + 8 * r, 8);
    }
    free(dead);
    mw_batch_free(&batch);
    mw_datafile_close(&df);
    free(data);
  }
  tu_free_names(names, n);
  free(vdir);
  mw_table_meta_free(&v->meta);
  free(v);
}

static void test_strpk(void **state) {
  (void)state;
  env_t e;
  memset(&e, 0, sizeof e);
  assert_int_equal(uv_loop_init(&e.loop), 0);
  e.scratch = tu_mkdtemp("compact-str");
  e.dir = tu_strf("%s/s.lance", e.scratch);
  create_table(e.dir, "id:string not null, v:int64", "id", "unsharded");
  mw_table_t *t = open_table(&e, NULL, 0, NULL);
  bool want[SKEYS] = {0}, got[SKEYS];
  int64_t wv[SKEYS], gv[SKEYS];
  uint64_t rnd = 99;
  for (int round = 0; round < 3; round++) {
    for (int w = 0; w < 10; w++) {
      mw_batch_t b;
      assert_int_equal(mw_batch_init(&b, &t->schema), 0);
      for (int i = 0; i < 40; i++) {
        rnd = rnd * 6364136223846793005ull + 1442695040888963407ull;
        int k = (int)((rnd >> 33) % SKEYS);
        bool tomb = (rnd >> 20) % 5 == 0;
        int64_t v = (int64_t)(rnd >> 40) + round;
        char ks[16];
        int n = snprintf(ks, sizeof ks, "k%05d", k);
        assert_int_equal(mw_column_append_bytes(&b.cols[0], ks, (size_t)n), 0);
        if (tomb) assert_int_equal(mw_column_append_null(&b.cols[1], &t->schema.fields[1]), 0);
        else assert_int_equal(mw_column_append_fixed(&b.cols[1], &v, 8), 0);
        assert_int_equal(mw_column_append_bool(&b.cols[2], tomb), 0);
        b.n_rows++;
        want[k] = !tomb;
        wv[k] = v;
      }
      mw_table_write_t *tw = calloc(1, sizeof *tw);
      mw_err_t err = {0};
      if (mw_table_write(t, tw, &b, on_write, &err) < 0) fail_msg("write: %s", err.msg);
      writes_left++;
    }
    while (writes_left > 0) assert_true(uv_run(&e.loop, UV_RUN_ONCE) || writes_left == 0);
    assert_int_equal(writes_failed, 0);
    flush_all(&e, t);
    compact(&e, t);
    strpk_base(&e, got, gv);
    for (int k = 0; k < SKEYS; k++) {
      if (want[k] != got[k]) fail_msg("round %d key k%05d: %s in the base", round, k, got[k] ? "live" : "absent");
      if (want[k] && wv[k] != gv[k]) fail_msg("round %d key k%05d: value differs", round, k);
    }
  }
  mw_compact_stats_t cs;
  mw_compact_stats(t->compact, &cs);
  assert_int_equal(cs.runs, 3);
  assert_true(cs.rows_masked > 0); /* rounds 2 and 3 superseded rows of earlier ones */
  close_table(&e, t);
  env_free(&e);
}

/* --- shards a run meets for the first time --------------------------- */

/* A request finds only shards[0] with SSTables; the run it starts then meets
 * the other three ACTIVE shards for the first time and makes their
 * per-shard state while shards[0]'s group already points at its own (a
 * regression: that state once moved under the run's feet, and the commit
 * wrote into freed memory: ASan reports it, plain builds crashed in split
 * brain). Then the rest is compacted; base == model. */
static void test_new_shards(void **state) {
  (void)state;
  env_t e;
  env_init(&e, "bucket4-small");
  base_view_t *prior = calloc(1, sizeof *prior), *now = calloc(1, sizeof *now);
  base_read(&e, prior);
  open_interval = "86400000"; /* the policy's timer never fires by itself here */
  mw_table_t *t = open_table(&e, NULL, 0, NULL);
  open_interval = NULL;
  er_model_t m;
  er_model_init(&m, 23, KEYS);
  write_rows(&e, t, &m, 800, 0);
  assert_int_equal(t->n_shards, 4);
  for (size_t i = 0; i < t->n_shards; i++) assert_int_equal(mw_shard_state(&t->shards[i]->shard), MW_SS_ACTIVE);
  done_t f = {0};
  assert_int_equal(mw_shard_flush(&t->shards[0]->shard, on_shard_done, &f), 0);
  run_until(&e.loop, &f.fired);
  assert_int_equal(f.status, 0);
  for (size_t i = 1; i < t->n_shards; i++) assert_int_equal(top_generation(t, i), 0);
  compact(&e, t);
  mw_compact_shard_t st;
  assert_true(mw_compact_shard_state(t->compact, t->shards[0]->id, &st));
  assert_int_equal(st.compacted_gen, top_generation(t, 0));
  for (size_t i = 1; i < t->n_shards; i++) /* the run met them */
    assert_true(mw_compact_shard_state(t->compact, t->shards[i]->id, &st));
  flush_all(&e, t);
  compact(&e, t);
  base_read(&e, now);
  expect_model(prior, &m, now, NULL, NULL);
  for (size_t i = 0; i < t->n_shards; i++)
    assert_int_equal(mw_memwal_compacted(&now->meta.memwal, t->shards[i]->id), top_generation(t, i));
  close_table(&e, t);
  er_model_free(&m);
  mw_table_meta_free(&prior->meta);
  mw_table_meta_free(&now->meta);
  free(prior);
  free(now);
  env_free(&e);
}

/* --- folding small fragments ------------------------------------------ */

static void test_fold(void **state) {
  (void)state;
  env_t e;
  env_init(&e, "unsharded-small");
  base_view_t *prior = calloc(1, sizeof *prior), *now = calloc(1, sizeof *now);
  base_read(&e, prior);
  mw_table_t *t = open_table(&e, NULL, 0, NULL);
  er_model_t m;
  er_model_init(&m, 17, KEYS);
  size_t most = 0;
  mw_compact_stats_t first;
  for (int round = 0; round < 30; round++) {
    write_rows(&e, t, &m, 80, 0);
    flush_all(&e, t);
    compact(&e, t);
    if (round == 0) mw_compact_stats(t->compact, &first);
    base_read(&e, now);
    size_t n = now->meta.manifest.pb->n_fragments;
    if (n > most) most = n;
    if (n > MW_COMPACT_FOLD_TRIGGER_FOR_TESTS + 1) fail_msg("round %d: %zu fragments in the base", round, n);
  }
  expect_model(prior, &m, now, NULL, NULL);
  mw_compact_stats_t cs;
  mw_compact_stats(t->compact, &cs);
  print_message("# fold: 30 compactions, at most %zu fragments, %" PRIu64 " folded, %" PRIu64 " rows written\n",
                most, cs.folded, cs.rows_written);
  assert_true(cs.folded > 0);
  assert_int_equal(cs.runs, 30);
  /* after the first run every index comes from the cache: each run caches
   * the index of the fragment it wrote (no GET, no decode next run) */
  assert_true(first.keyindex_read + first.keyindex_built > 0);
  assert_int_equal(cs.keyindex_read, first.keyindex_read);
  assert_int_equal(cs.keyindex_built, first.keyindex_built);

  /* the base's data files gone (key indexes stay cached): the run that
   * folds a fragment fails naming the data file it could not read, not the
   * fragment's deletion file read beside it (both GETs share the phase) */
  char *cmd = tu_strf("mkdir '%s/held' && mv '%s'/data/*.lance '%s/held/'", e.scratch, e.dir, e.scratch);
  assert_int_equal(system(cmd), 0);
  free(cmd);
  done_t d = {0};
  for (int round = 0; round < 10 && d.status == 0; round++) {
    write_rows(&e, t, &m, 80, 0);
    flush_all(&e, t);
    memset(&d, 0, sizeof d);
    assert_int_equal(mw_table_compact(t, on_compacted, &d), 0);
    run_until(&e.loop, &d.fired);
  }
  assert_int_equal(d.status, -ENOENT);
  if (strstr(d.reason, "GET data/") == NULL || strstr(d.reason, "_deletions/") != NULL)
    fail_msg("a missing data file reported as: %s", d.reason);
  cmd = tu_strf("mv '%s/held/'*.lance '%s/data/'", e.scratch, e.dir); /* whole again for the inspection */
  assert_int_equal(system(cmd), 0);
  free(cmd);
  close_table(&e, t);
  er_model_free(&m);
  mw_table_meta_free(&prior->meta);
  mw_table_meta_free(&now->meta);
  free(prior);
  free(now);
  env_free(&e);
}

/* --- a flush while a compaction is held mid-merge (issue 12) -------- */

/* The merge job blocks in the hook (on a pool thread) until the test posts
 * `hold_release`; `hold_async` wakes the loop when it has entered. */
static uv_sem_t hold_release;
static uv_async_t hold_async;
static bool hold_entered;
static void on_hold_async(uv_async_t *a) {
  (void)a;
  hold_entered = true;
}
static void hold_merge(void) {
  uv_async_send(&hold_async);
  uv_sem_wait(&hold_release);
}

static void test_flush_during_merge(void **state) {
  (void)state;
  env_t e;
  env_init(&e, "unsharded-small");
  mw_table_t *t = open_table(&e, NULL, 0, NULL);
  er_model_t m;
  er_model_init(&m, 7, KEYS);
  write_rows(&e, t, &m, 1200, 0);
  flush_all(&e, t);
  assert_int_equal(uv_sem_init(&hold_release, 0), 0);
  assert_int_equal(uv_async_init(&e.loop, &hold_async, on_hold_async), 0);
  hold_entered = false;
  mw_compact_merge_hook_for_tests = hold_merge;
  done_t c = {0};
  assert_int_equal(mw_table_compact(t, on_compacted, &c), 0);
  run_until(&e.loop, &hold_entered); /* the run is now inside its merge job */
  mw_shard_t *s = &t->shards[0]->shard;
  uint64_t gen0 = top_generation(t, 0);
  write_rows(&e, t, &m, 400, 0); /* > max_memtable_rows: a MemTable freezes */
  flush_all(&e, t);              /* and every flush commits, merge still held */
  assert_true(top_generation(t, 0) > gen0);
  assert_int_equal(mw_shard_state(s), MW_SS_ACTIVE);
  assert_false(c.fired);
  mw_compact_merge_hook_for_tests = NULL;
  uv_sem_post(&hold_release);
  run_until(&e.loop, &c.fired);
  if (c.status != 0) fail_msg("compaction: %s", c.reason);
  uv_close((uv_handle_t *)&hold_async, NULL);
  uv_sem_destroy(&hold_release);
  compact(&e, t); /* the SSTables flushed meanwhile too */
  close_table(&e, t);
  er_model_free(&m);
  env_free(&e);
}

/* --- a failed key lookup on the pool ----------------------------------- */

static uv_thread_t find_loop_thread;
static int find_calls, find_off_loop, find_fail_at;
static int find_hook(void) {
  uv_thread_t self = uv_thread_self();
  find_calls++; /* the loop waits for the job: no other thread counts */
  if (!uv_thread_equal(&self, &find_loop_thread)) find_off_loop++;
  return find_calls == find_fail_at ? -ENOMEM : 0;
}

static void test_find_error(void **state) {
  (void)state;
  env_t e;
  env_init(&e, "unsharded-small");
  base_view_t *prior = calloc(1, sizeof *prior), *mid = calloc(1, sizeof *mid), *now = calloc(1, sizeof *now);
  base_read(&e, prior);
  mw_table_t *t = open_table(&e, NULL, 0, NULL);
  er_model_t m;
  er_model_init(&m, 23, KEYS);
  write_rows(&e, t, &m, 900, 0);
  flush_all(&e, t);
  compact(&e, t); /* two base fragments now: the vector's and ours */
  base_read(&e, mid);
  assert_true(mid->meta.manifest.pb->n_fragments >= 2);
  bool present[KEYS + 100];
  memcpy(present, mid->present, sizeof present);

  write_rows(&e, t, &m, 600, 0);
  flush_all(&e, t);
  find_loop_thread = uv_thread_self();
  find_calls = find_off_loop = 0;
  find_fail_at = 2; /* the second fragment's lookup */
  mw_compact_find_hook_for_tests = find_hook;
  done_t d = {0};
  assert_int_equal(mw_table_compact(t, on_compacted, &d), 0);
  run_until(&e.loop, &d.fired);
  mw_compact_find_hook_for_tests = NULL;
  assert_int_equal(d.status, -ENOMEM);
  if (strstr(d.reason, "key lookup in fragment") == NULL) fail_msg("the lookup failure reported as: %s", d.reason);
  assert_int_equal(find_calls, 2); /* stops at the first failure */
  assert_int_equal(find_off_loop, find_calls);
  mw_compact_stats_t cs;
  mw_compact_stats(t->compact, &cs);
  assert_int_equal(cs.failures, 1);
  base_read(&e, now); /* nothing committed: the same version, the same live rows */
  assert_int_equal(now->version, mid->version);
  assert_memory_equal(now->present, present, sizeof present);

  compact(&e, t); /* the hook gone: the next request compacts it all */
  base_read(&e, now);
  assert_true(now->version > mid->version);
  expect_model(prior, &m, now, NULL, NULL);
  close_table(&e, t);
  er_model_free(&m);
  mw_table_meta_free(&prior->meta);
  mw_table_meta_free(&mid->meta);
  mw_table_meta_free(&now->meta);
  free(prior);
  free(mid);
  free(now);
  env_free(&e);
}

static void flip_hook(mw_buf_t *file) { (void)er_flip_row_count(file); }

/* Teardown: the writer fault is off after the test, also when it failed. */
static int hook_off(void **state) {
  (void)state;
  mw_sstable_data_hook_for_tests = NULL;
  return 0;
}

/* A base fragment that does not read back is never committed: the writer
 * fault (sstable.h's data hook) changes the new data file's row count
 * between its encoding and its read-back; the run fails naming the file,
 * the refusal is counted, nothing is committed or put (the base version,
 * its live rows and compacted_sstables stay; no data file is added), the
 * SSTables stay uncompacted and the shard keeps acknowledging writes; the
 * fault gone, the next request compacts every acknowledged row. */
static void test_readback_refused(void **state) {
  (void)state;
  env_t e;
  env_init(&e, "unsharded-small");
  base_view_t *prior = calloc(1, sizeof *prior), *now = calloc(1, sizeof *now);
  base_read(&e, prior);
  mw_table_t *t = open_table(&e, NULL, 0, NULL);
  er_model_t m;
  er_model_init(&m, 29, KEYS);
  write_rows(&e, t, &m, 900, 0);
  flush_all(&e, t);
  uint64_t top = top_generation(t, 0);
  char *ddir = tu_strf("%s/data", e.dir);
  char **names;
  size_t n_data = tu_list_dir(ddir, ".lance", &names);
  tu_free_names(names, n_data);
  uint64_t before = atomic_load(&mw_flush_refused_metric("compaction")->value);
  er_flipped_files = 0;
  mw_sstable_data_hook_for_tests = flip_hook;
  done_t d = {0};
  assert_int_equal(mw_table_compact(t, on_compacted, &d), 0);
  run_until(&e.loop, &d.fired);
  mw_sstable_data_hook_for_tests = NULL;
  assert_int_equal(d.status, -EBADMSG);
  if (strstr(d.reason, "read-back of data/") == NULL || strstr(d.reason, ".lance refused") == NULL)
    fail_msg("the refusal reported as: %s", d.reason);
  assert_int_equal(er_flipped_files, 1);
  assert_int_equal(atomic_load(&mw_flush_refused_metric("compaction")->value) - before, 1);
  mw_compact_stats_t cs;
  mw_compact_stats(t->compact, &cs);
  assert_int_equal(cs.failures, 1);
  assert_int_equal(cs.runs, 0);
  base_read(&e, now); /* nothing committed, nothing put */
  assert_int_equal(now->version, prior->version);
  assert_memory_equal(now->present, prior->present, sizeof prior->present);
  assert_int_equal(mw_memwal_compacted(&now->meta.memwal, t->shards[0]->id), 0);
  size_t n_after = tu_list_dir(ddir, ".lance", &names);
  tu_free_names(names, n_after);
  assert_int_equal(n_after, n_data);
  assert_int_equal(top_generation(t, 0), top); /* the SSTables stay listed */
  write_rows(&e, t, &m, 120, 0); /* and the shard keeps acknowledging writes */
  flush_all(&e, t);
  compact(&e, t); /* the fault gone: every acknowledged row reaches the base */
  base_read(&e, now);
  assert_true(now->version > prior->version);
  expect_model(prior, &m, now, NULL, NULL);
  assert_int_equal(mw_memwal_compacted(&now->meta.memwal, t->shards[0]->id), top_generation(t, 0));
  close_table(&e, t);
  free(ddir);
  er_model_free(&m);
  mw_table_meta_free(&prior->meta);
  mw_table_meta_free(&now->meta);
  free(prior);
  free(now);
  env_free(&e);
}

int main(void) {
  mw_log_init();
  mw_log_set_level(MW_LOG_WARN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_model),
      cmocka_unit_test(test_conflict),
      cmocka_unit_test(test_two_writers),
      cmocka_unit_test(test_bad_keyindex),
      cmocka_unit_test(test_zone_seeds),
      cmocka_unit_test(test_fold),
      cmocka_unit_test(test_strpk),
      cmocka_unit_test(test_new_shards),
      cmocka_unit_test(test_flush_during_merge),
      cmocka_unit_test(test_find_error),
      cmocka_unit_test_teardown(test_readback_refused, hook_off),
  };
  return tu_run_group_name("compact", tests, NULL, NULL);
}
