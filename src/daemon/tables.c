/*
 * tables.c — see tables.h.
 *
 * Storage: every table's storage configuration comes from one place,
 * mw_daemon_storage_config (the `[storage]` section: backend, limits; then
 * the table's own settings). Start-up work on a table — finishing an
 * interrupted drop, checking that it exists, bootstrapping it — goes
 * through the table's storage (shard/table.h), never the file system
 * directly, so it is the same on every backend.
 *
 * Bootstrap: the files lance/table_create.h makes are written in order,
 * each with put-if-absent (-EEXIST = someone else created the table: we
 * stop and open theirs), except the version hint, which LanceDB overwrites
 * too and which is a plain put.
 */
#include "daemon/tables.h"
#include "daemon/check.h"
#include "daemon/testhook.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fs.h"
#include "common/log.h"
#include "lance/route.h"
#include "lance/schema_text.h"
#include "lance/table_create.h"

/* ------------------------------------------------------------ storage */

void mw_daemon_storage_config(const mw_config_t *cfg, const mw_table_config_t *tc, const char *uri,
                              mw_storage_config_t *out) {
  assert(cfg != NULL);
  assert(uri != NULL);
  assert(out != NULL);
  mw_storage_config_init(out, uri);
  out->backend = cfg->io_backend;
  out->max_inflight = (uint32_t)cfg->max_inflight;
  out->max_object_bytes = (size_t)cfg->max_object_bytes;
  out->s3.request_timeout_ms = (uint32_t)cfg->s3_request_timeout_ms;
  out->s3.retry_deadline_ms = (uint32_t)cfg->s3_retry_deadline_ms;
  out->s3.part_bytes = (size_t)cfg->s3_part_bytes;
  if (tc != NULL) { /* the table's own S3 settings win over the environment */
    if (tc->s3_endpoint[0]) out->s3.endpoint = tc->s3_endpoint;
    if (tc->s3_region[0]) out->s3.region = tc->s3_region;
    out->s3.path_style = tc->s3_path_style;
    out->s3.allow_http = tc->s3_allow_http;
  }
  assert(out->max_inflight > 0);
  assert(out->max_object_bytes > 0);
}

/* ------------------------------------------------------------ bootstrap */

int mw_daemon_mkdir_parent(const char *file) {
  char dir[2048];
  snprintf(dir, sizeof dir, "%s", file);
  char *slash = strrchr(dir, '/');
  if (slash == NULL || slash == dir) return 0;
  *slash = '\0';
  return mw_fs_mkdir_p(dir, 0750);
}

int mw_daemon_table_create(const mw_table_config_t *tc, const mw_table_opts_t *o, mw_err_t *err) {
  assert(tc != NULL);
  assert(o != NULL);
  mw_schema_t schema;
  mw_shard_spec_t spec;
  mw_table_files_t files;
  int rc;
  mw_schema_init(&schema);
  memset(&files, 0, sizeof files);
  if ((rc = mw_schema_text_parse(tc->schema, &schema, err)) < 0 ||
      (rc = mw_schema_pk_text_apply(&schema, tc->primary_key, err)) < 0 ||
      (rc = mw_shard_spec_text_parse(tc->spec, &schema, &spec, err)) < 0)
    goto fail;
  mw_table_create_params_t p = {.schema = &schema, .spec = &spec};
  if ((rc = mw_table_create_encode(&p, &files, err)) < 0) goto fail;
  mw_table_new_file_t nf[MW_TABLE_CREATE_FILES];
  assert(files.n <= MW_TABLE_CREATE_FILES);
  for (size_t i = 0; i < files.n; i++)
    nf[i] = (mw_table_new_file_t){.key = files.files[i].path,
                                  .bytes = files.files[i].bytes.data,
                                  .len = files.files[i].bytes.len,
                                  .replace = strstr(files.files[i].path, "latest_version_hint") != NULL};
  rc = mw_table_bootstrap(tc->uri, o, nf, files.n, err);
fail:
  mw_table_files_free(&files);
  mw_schema_free(&schema);
  return rc;
}

/* ------------------------------------------------------------- ownership */

/* Turn the section's `shards` list into the owned shard set, now that the
 * table's spec and schema are known. "all" leaves the table owning
 * everything. */
static int set_owned(mw_table_t *t, const mw_table_config_t *tc, mw_err_t *err) {
  mw_err_t e = {0};
  int rc = mw_table_own_list(t, tc->shards, &e);
  return rc < 0 ? mw_err_set(err, rc, "[table %s] shards: %s", tc->name, e.msg) : 0;
}

/* Our writer settings, highest layer over the table's writer_config_defaults:
 * at most MW_DAEMON_WRITER_KEYS of them (17 numbers, 5 words today). */
#define MW_DAEMON_WRITER_KEYS 32

static size_t writer_settings(const mw_table_config_t *tc, const char **k, const char **v,
                              char (*buf)[32]) {
  struct { const char *name; int64_t value; } ints[] = {
      {"max_wal_buffer_size", tc->max_wal_buffer_size},
      {"max_wal_flush_interval_ms", tc->max_wal_flush_interval_ms},
      {"max_memtable_size", tc->max_memtable_size},
      {"max_memtable_rows", tc->max_memtable_rows},
      {"max_memtable_batches", tc->max_memtable_batches},
      {"max_memtable_age_ms", tc->max_memtable_age_ms},
      {"max_fault_retry_interval_ms", tc->max_fault_retry_interval_ms},
      {"manifest_scan_batch_size", tc->manifest_scan_batch_size},
      {"max_unflushed_memtable_bytes", tc->max_unflushed_memtable_bytes},
      {"backpressure_log_interval_ms", tc->backpressure_log_interval_ms},
      {"stats_log_interval_ms", tc->stats_log_interval_ms},
      {"compaction_min_sstables", tc->compaction_min_sstables},
      {"compaction_min_bytes", tc->compaction_min_bytes},
      {"compaction_max_age_ms", tc->compaction_max_age_ms},
      {"compaction_max_sstables", tc->compaction_max_sstables},
      {"compaction_max_rows", tc->compaction_max_rows},
      {"gc_grace_ms", tc->gc_grace_ms},
      {"gc_manifest_keep_versions", tc->gc_manifest_keep_versions},
      {"gc_manifest_grace_ms", tc->gc_manifest_grace_ms},
      {"gc_history_retention_ms", tc->gc_history_retention_ms},
      {"gc_history_interval_ms", tc->gc_history_interval_ms},
  };
  size_t n = 0;
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
    if (ints[i].value < 0) continue;
    snprintf(buf[n], 32, "%" PRId64, ints[i].value);
    k[n] = ints[i].name;
    v[n] = buf[n];
    n++;
  }
  if (tc->durable_write >= 0) {
    k[n] = "durable_write";
    v[n++] = tc->durable_write ? "true" : "false";
  }
  if (tc->compaction >= 0) {
    k[n] = "compaction";
    v[n++] = tc->compaction ? "on" : "off";
  }
  if (tc->compaction_zstd >= 0) {
    k[n] = "compaction_zstd";
    v[n++] = tc->compaction_zstd ? "true" : "false";
  }
  if (tc->gc >= 0) {
    k[n] = "gc";
    v[n++] = tc->gc ? "on" : "off";
  }
  k[n] = "wal_compression";
  v[n++] = tc->wal_compression == MW_WAL_COMPRESSION_ZSTD ? "zstd" : "none";
  k[n] = "sstable_zstd";
  v[n++] = tc->sstable_zstd ? "true" : "false";
  assert(n <= MW_DAEMON_WRITER_KEYS);
  return n;
}

static void forget_table(mw_table_t *t) { (void)t; }

/* ------------------------------------------------------------- opening */

/* Opening a table has a blocking half and a loop half. The blocking half —
 * finishing an interrupted drop, looking for the table, bootstrapping it,
 * loading its manifest (mw_table_load), the schema check, the shard list
 * and the takeover scan — is storage requests on private loops: on S3 about
 * ten of them, each up to s3_retry_deadline_ms, plus up to
 * MW_DAEMON_CREATE_WAIT_MS after a lost create race. It runs on a thread of
 * its own, touching only its opening_t (and reading the node identity and
 * the configuration), so it never holds up the loop or the other tables:
 * start-up opens MW_DAEMON_OPEN_THREADS tables at once. The loop half
 * (mw_table_start, the owner-record hook, registration, eager claims) runs
 * on the loop's thread afterwards, in configuration order. */
#define MW_DAEMON_OPEN_THREADS 8

/* After a lost create race the winner may still be writing its files
 * (version 1 without the MemWAL index, then version 2): the load is
 * repeated, every MW_DAEMON_CREATE_WAIT_STEP_MS, until it succeeds or
 * MW_DAEMON_CREATE_WAIT_MS have passed. */
#define MW_DAEMON_CREATE_WAIT_MS 20000
#define MW_DAEMON_CREATE_WAIT_STEP_MS 100
_Static_assert(MW_DAEMON_CREATE_WAIT_STEP_MS < MW_DAEMON_CREATE_WAIT_MS, "the wait polls");

typedef struct opening {
  const mw_config_t *cfg;           /* read only, on the thread too */
  const mw_table_config_t *tc;
  const mw_daemon_owner_t *owner;
  mw_storage_config_t sc;
  const char *keys[MW_DAEMON_WRITER_KEYS], *values[MW_DAEMON_WRITER_KEYS];
  char buf[MW_DAEMON_WRITER_KEYS][32];
  mw_table_opts_t o;                /* o.storage = &sc */
  uv_thread_t thread;
  bool threaded;
  mw_table_t *t;                    /* loaded by the thread, started on the loop */
  int rc;
  mw_err_t err;
} opening_t;

static void opening_init(opening_t *op, mw_daemon_tables_t *dt, const mw_config_t *cfg,
                         const mw_table_config_t *tc) {
  assert(tc != NULL);
  assert(tc->uri[0] != '\0'); /* the configuration check requires one */
  memset(op, 0, sizeof *op);
  op->cfg = cfg;
  op->tc = tc;
  op->owner = &dt->owner;
  mw_daemon_storage_config(cfg, tc, tc->uri, &op->sc);
  size_t n = writer_settings(tc, op->keys, op->values, op->buf);
  op->o = (mw_table_opts_t){.config_keys = op->keys, .config_values = op->values, .n_config = n,
                            .storage = &op->sc, .self = &dt->owner.self,
                            .zone_write_seeds = tc->zone_write_seeds,
                            .zone_seed_rows_per_zone =
                                tc->zone_seed_rows_per_zone > 0 ? (uint64_t)tc->zone_seed_rows_per_zone : 0};
}

static int load_table(const mw_table_config_t *tc, const mw_table_opts_t *o, bool raced,
                      mw_table_t **t, mw_err_t *err) {
  assert(tc != NULL);
  assert(o != NULL);
  assert(t != NULL);
  uint64_t deadline = uv_hrtime() + (uint64_t)MW_DAEMON_CREATE_WAIT_MS * 1000000u;
  for (;;) {
    mw_err_t e = {0};
    int rc = mw_table_load(tc->uri, o, t, &e);
    if (rc == 0) return 0;
    bool again = raced && uv_hrtime() < deadline && (rc == -ENOTSUP || rc == -ENOENT);
    if (!again) return mw_err_set(err, rc, "%s", e.msg);
    mw_log_info("table %s: %s; waiting for the other creator to finish", tc->name, e.msg);
    usleep(MW_DAEMON_CREATE_WAIT_STEP_MS * 1000);
  }
}

/* The blocking half (any thread). */
static int opening_load(opening_t *op) {
  assert(op->tc != NULL);
  assert(op->t == NULL); /* loaded once */
  const mw_table_config_t *tc = op->tc;
  const mw_table_opts_t *o = &op->o;
  mw_err_t *err = &op->err;
  bool raced = false; /* another process created the table as we tried to */
  int rc = mw_table_drop_interrupted(tc->uri, o, err);
  if (rc < 0) return mw_err_set(err, rc, "[table %s] cannot check %s", tc->name, tc->uri);
  if (rc == 1) {
    /* every shard was sealed before that commit began: finish it */
    mw_log_notice("table %s: finishing the drop_table interrupted at %s", tc->name, tc->uri);
    if ((rc = mw_table_drop_remains(tc->uri, o, err)) < 0) return rc;
  }
  if ((rc = mw_table_exists(tc->uri, o, err)) < 0)
    return mw_err_set(err, rc, "[table %s] cannot look at %s", tc->name, tc->uri);
  /* A table found while create = true may be another creator's, half
   * written (version 1 comes before the MemWAL index): wait for it as after
   * a lost race. A table that never gets the index still fails, later. */
  if (rc == 1 && tc->create) raced = true;
  if (rc == 0) {
    if (!tc->create)
      return mw_err_set(err, -ENOENT, "[table %s] no Lance table at %s (set create = true to "
                        "create it)", tc->name, tc->uri);
    mw_err_t cerr = {0};
    rc = mw_daemon_table_create(tc, o, &cerr);
    if (rc == -EEXIST) {
      mw_log_notice("table %s: another process created %s first; opening it", tc->name, tc->uri);
      raced = true;
    } else if (rc < 0) {
      mw_err_set(err, rc, "%s", cerr.msg);
      return mw_err_set(err, rc, "[table %s] create %s failed", tc->name, tc->uri);
    } else {
      mw_log_notice("table %s: created %s (%s, primary key %s)", tc->name, tc->uri, tc->spec,
                    tc->primary_key);
    }
  }
  if ((rc = load_table(tc, o, raced, &op->t, err)) < 0) return rc;
  if ((rc = mw_daemon_check_table_schema(op->cfg, tc, mw_table_schema(op->t), err)) < 0) return rc;
  if ((rc = set_owned(op->t, tc, err)) < 0) return rc;
  /* shards taken over by a peer while we were down are given up here */
  if ((rc = mw_daemon_owner_scan(op->owner, tc->name, op->t, &op->sc, err)) < 0)
    return mw_err_set(err, rc, "[table %s] ownership check", tc->name);
  return 0;
}

static void opening_run(void *arg) {
  opening_t *op = arg;
  assert(op->rc == 0);
  assert(op->t == NULL);
  op->rc = opening_load(op);
  if (op->rc < 0) {
    mw_table_unload(op->t);
    op->t = NULL;
  }
  assert((op->rc == 0) == (op->t != NULL));
}

/* The loop half: start the loaded table and serve it. dt->fe is the one
 * registry of tables: its index is the table's index in dt->which,
 * dt->asked and the owner records. */
static int opening_finish(mw_daemon_tables_t *dt, opening_t *op, mw_err_t *err) {
  const mw_table_config_t *tc = op->tc;
  if (op->rc < 0) return mw_err_set(err, op->rc, "%s", op->err.msg);
  assert(op->t != NULL);
  mw_table_t *t = op->t;
  op->t = NULL;
  size_t n = mw_fe_tables_count(&dt->fe);
  if (n >= MW_CONFIG_MAX_TABLES) {
    mw_table_unload(t);
    return mw_err_set(err, -ENOSPC, "[table %s] more than %d tables opened since start: restart "
                      "memwald to open more", tc->name, MW_CONFIG_MAX_TABLES);
  }
  /* tests only (daemon/testhook.h): the data path's faults, armed once the
   * table exists (power-loss snapshots it), for the storage it starts */
  int rc = mw_testhook_fault(tc->uri, &op->sc.fault, err);
  if (rc < 0) {
    mw_table_unload(t);
    return rc;
  }
  if ((rc = mw_table_start(dt->loop, t, &op->o, err)) < 0) return rc; /* t is freed */
  rc = mw_daemon_owner_hook(&dt->owner, n, tc->name, t);
  if (rc < 0) mw_err_set(err, rc, "[table %s] owner records", tc->name);
  if (rc == 0 && (rc = mw_fe_tables_add(&dt->fe, tc->name, t)) < 0)
    mw_err_set(err, rc, "[table %s] cannot register", tc->name);
  if (rc < 0) { /* nothing claimed yet: the close is quick */
    if (mw_table_close(t, forget_table) < 0) mw_log_err("table %s: close refused", tc->name);
    return rc;
  }
  assert((size_t)rc == n);
  mw_testhook_attach(tc->uri, mw_table_storage(t));
  if (tc->claim == MW_CLAIM_EAGER && (rc = mw_table_claim_owned(t)) < 0)
    return mw_err_set(err, rc, "[table %s] eager claim failed", tc->name);
  /* whatever `claim` says: owned shards with unflushed WAL entries nobody
   * writes are claimed and flushed (shard/recover.h) */
  if ((rc = mw_table_recover_owned(t)) < 0)
    mw_log_err("table %s: recovery at start: %s (writes still claim the shards)", tc->name, mw_strerror(rc));
  mw_log_notice("table %s: open at %s, %s, shards %s, claim %s", tc->name, tc->uri,
                mw_table_sharding(t) == MW_SHARDING_BUCKET     ? "bucket"
                : mw_table_sharding(t) == MW_SHARDING_IDENTITY ? "identity"
                                                               : "unsharded",
                tc->shards, tc->claim == MW_CLAIM_EAGER ? "eager" : "lazy");
  return 0;
}

/* Start the blocking half on a thread of its own (inline when no thread
 * can be had: the open is still right, only slower). */
static void opening_spawn(opening_t *op) {
  op->threaded = uv_thread_create(&op->thread, opening_run, op) == 0;
  if (!op->threaded) opening_run(op);
}

static void opening_join(opening_t *op) {
  assert(op != NULL);
  if (op->threaded) uv_thread_join(&op->thread);
  op->threaded = false;
}

int mw_daemon_tables_open(uv_loop_t *loop, const mw_config_t *cfg, mw_daemon_tables_t *dt,
                          mw_err_t *err) {
  assert(loop != NULL);
  assert(cfg != NULL);
  assert(dt != NULL);
  memset(dt, 0, sizeof *dt);
  dt->loop = loop;
  int rc = mw_daemon_owner_open(&dt->owner, cfg, err);
  if (rc < 0) return mw_err_set(err, rc, "data_dir %s: node identity", cfg->data_dir);
  rc = uv_timer_init(loop, &dt->retry);
  if (rc < 0) return mw_err_set(err, rc, "tables: %s", uv_strerror(rc));
  dt->retry.data = dt;
  opening_t *ops = calloc(MW_DAEMON_OPEN_THREADS, sizeof *ops);
  if (ops == NULL) return mw_err_set(err, -ENOMEM, "out of memory");
  for (size_t base = 0; rc == 0 && base < cfg->n_tables; base += MW_DAEMON_OPEN_THREADS) {
    size_t n = cfg->n_tables - base < MW_DAEMON_OPEN_THREADS ? cfg->n_tables - base : MW_DAEMON_OPEN_THREADS;
    for (size_t i = 0; i < n; i++) {
      opening_init(&ops[i], dt, cfg, &cfg->tables[base + i]);
      opening_spawn(&ops[i]);
    }
    for (size_t i = 0; i < n; i++) opening_join(&ops[i]);
    for (size_t i = 0; i < n; i++) {
      if (rc == 0) rc = opening_finish(dt, &ops[i], err);
      mw_table_unload(ops[i].t); /* loaded, not started (an earlier table failed) */
      ops[i].t = NULL;
    }
  }
  free(ops);
  return rc;
}

/* A reload's addition: the opening's blocking half on its thread while the
 * loop serves everyone else; the thread wakes the loop (uv_async_send, the
 * one libuv call legal from another thread) for the loop half. The
 * configuration is copied: the reload's is gone by then. */
typedef struct mw_daemon_adding {
  opening_t op;
  mw_daemon_tables_t *dt;
  mw_config_t cfg;                  /* op.cfg, op.tc point in here */
  uv_async_t wake;
  mw_daemon_added_cb cb;
  void *arg;
  struct mw_daemon_adding *next;    /* dt->adds */
  bool cancelled;                   /* a removal came first: never served */
} adding_t;

static void close_start(mw_daemon_tables_t *dt, void (*cb)(void *arg, int failures), void *arg);
static void release_done(mw_daemon_tables_t *dt);

static void adding_run(void *arg) {
  adding_t *a = arg;
  opening_run(&a->op);
  uv_async_send(&a->wake);
}

static void adding_free(uv_handle_t *h) { free(h->data); }

static void on_added(uv_async_t *h) {
  adding_t *a = h->data;
  mw_daemon_tables_t *dt = a->dt;
  opening_join(&a->op); /* the thread has ended, or is ending */
  mw_err_t err = {0};
  int rc;
  if (a->cancelled || dt->stopping) { /* loaded while removed or stopped: never served */
    mw_table_unload(a->op.t);
    a->op.t = NULL;
    rc = a->cancelled ? mw_err_set(&err, -ECANCELED, "[table %s] removed by a reload while it "
                                   "was opening; not served", a->op.tc->name)
                      : mw_err_set(&err, -ESHUTDOWN, "[table %s] memwald is stopping", a->op.tc->name);
  } else {
    rc = opening_finish(dt, &a->op, &err);
  }
  assert(a->op.t == NULL);
  assert(dt->adding > 0);
  dt->adding--;
  adding_t **pp = &dt->adds;
  while (*pp != a) pp = &(*pp)->next;
  *pp = a->next;
  a->cb(a->arg, a->op.tc->name, rc, rc < 0 ? err.msg : NULL);
  uv_close((uv_handle_t *)&a->wake, adding_free);
  if (a->cancelled) { /* the removal that cancelled it may have waited for this */
    assert(dt->cancelling > 0);
    if (--dt->cancelling == 0 && dt->rel_parked) {
      dt->rel_parked = false;
      release_done(dt);
    }
  }
  if (dt->adding == 0 && dt->add_stop_cb != NULL) { /* the stop waited for the additions */
    void (*cb)(void *, int) = dt->add_stop_cb;
    dt->add_stop_cb = NULL;
    close_start(dt, cb, dt->add_stop_arg);
  }
}

int mw_daemon_tables_add(mw_daemon_tables_t *dt, const mw_config_t *cfg, const mw_table_config_t *tc,
                         mw_daemon_added_cb cb, void *arg, mw_err_t *err) {
  assert(dt != NULL);
  assert(dt->loop != NULL);
  assert(cfg != NULL);
  assert(tc != NULL);
  assert(cb != NULL);
  if (dt->stopping) return mw_err_set(err, -ESHUTDOWN, "[table %s] memwald is stopping", tc->name);
  if (mw_fe_tables_count(&dt->fe) + dt->adding >= MW_CONFIG_MAX_TABLES)
    return mw_err_set(err, -ENOSPC, "[table %s] more than %d tables opened since start: restart "
                      "memwald to open more", tc->name, MW_CONFIG_MAX_TABLES);
  adding_t *a = malloc(sizeof *a);
  if (a == NULL) return mw_err_set(err, -ENOMEM, "out of memory");
  memcpy(&a->cfg, cfg, sizeof a->cfg);
  const mw_table_config_t *mine = mw_config_table(&a->cfg, tc->name);
  assert(mine != NULL); /* tc is one of cfg's sections */
  opening_init(&a->op, dt, &a->cfg, mine);
  a->dt = dt;
  a->cb = cb;
  a->arg = arg;
  int rc = uv_async_init(dt->loop, &a->wake, on_added);
  if (rc < 0) {
    free(a);
    return mw_err_set(err, rc, "[table %s] %s", tc->name, uv_strerror(rc));
  }
  a->wake.data = a;
  a->cancelled = false;
  a->next = dt->adds;
  dt->adds = a;
  dt->adding++;
  a->op.threaded = uv_thread_create(&a->op.thread, adding_run, a) == 0;
  if (!a->op.threaded) adding_run(a); /* no thread: inline, the wake still comes */
  return 0;
}

/* ------------------------------------------------------------- release */

/* A release: every shard of a set of tables released (flushed), then each
 * table closed, then a callback. The stop is one over every table; a
 * reload's removal one over the tables it removes. One runs at a time (a
 * stop that comes during a removal starts when the removal is done):
 * mw_table_close frees the table before calling back (with NULL), so the
 * release it belongs to is found here. */
static mw_daemon_tables_t *closing;

static void release_start(mw_daemon_tables_t *dt, const bool *which, uint64_t deadline_ms,
                          void (*cb)(void *, int), void *arg);

static void release_done(mw_daemon_tables_t *dt) {
  assert(dt->releasing);
  assert(dt->pending == 0);
  closing = NULL;
  if (dt->cancelling > 0) { /* openings this removal cancelled: their end first */
    dt->rel_parked = true;
    return;
  }
  dt->releasing = false;
  void (*cb)(void *, int) = dt->rel_cb;
  void *arg = dt->rel_arg;
  /* the last release of a stop; not a removal a stop waits behind (for
   * it, or for additions in flight: their stop starts a release after) */
  bool final = dt->stopping && !dt->stop_waiting && dt->add_stop_cb == NULL;
  if (final) uv_close((uv_handle_t *)&dt->retry, NULL);
  cb(arg, dt->failures);
  if (dt->stop_waiting) { /* the removal is done: now the stop */
    dt->stop_waiting = false;
    bool all[MW_CONFIG_MAX_TABLES];
    for (size_t i = 0; i < MW_CONFIG_MAX_TABLES; i++) all[i] = i < mw_fe_tables_count(&dt->fe) && mw_fe_tables_table(&dt->fe, i) != NULL;
    release_start(dt, all, dt->stop_deadline_ms, dt->stop_cb, dt->stop_arg);
  }
}

static void table_closed(mw_table_t *t) {
  (void)t;
  mw_daemon_tables_t *dt = closing;
  assert(dt != NULL);
  assert(dt->pending > 0);
  if (--dt->pending == 0) release_done(dt);
}

static void close_tables(mw_daemon_tables_t *dt) {
  assert(dt->pending == 0); /* every release answered */
  assert(dt->flushing == 0);
  dt->pending = 1; /* holds until every close is started */
  closing = dt;
  for (size_t i = 0; i < mw_fe_tables_count(&dt->fe); i++) {
    free(dt->asked[i]);
    dt->asked[i] = NULL;
    mw_table_t *t = mw_fe_tables_table(&dt->fe, i);
    if (!dt->which[i] || t == NULL) continue;
    mw_fe_tables_remove(&dt->fe, i);
    dt->pending++;
    if (mw_table_close(t, table_closed) < 0) {
      mw_log_err("table %s: close refused", mw_fe_tables_name(&dt->fe, i));
      dt->failures++;
      dt->pending--;
    }
  }
  if (--dt->pending == 0) release_done(dt);
}

static void release_pass(mw_daemon_tables_t *dt);

/* Drop one count of `pending` (a shard's answer, or a pass's hold). */
static void release_drop(mw_daemon_tables_t *dt) {
  assert(dt->pending > 0);
  if (--dt->pending == 0) close_tables(dt);
}

/* A shard fenced while releasing lost nothing: every row it acknowledged is
 * in its WAL, which the newer owner replays. Not a failure of the stop. */
static void shard_done(mw_daemon_tables_t *dt, mw_shard_t *s, int status, const char *reason,
                       const char *what) {
  assert(what != NULL);
  assert(dt->pending > 0); /* the shard answering still holds its count */
  if (status == -ESTALE && s != NULL) {
    mw_log_notice("shard %s: a newer owner took it before the %s; it replays our WAL",
                  mw_shard_id_str(s), what);
  } else if (status < 0 && s != NULL) {
    mw_log_err("shard %s: %s: %s", mw_shard_id_str(s), what, reason ? reason : mw_strerror(status));
    dt->failures++;
  }
}

/* A release (a flush) ended: its slot goes to the next shard. */
static void shard_released(mw_shard_t *s, int status, const char *reason, void *arg) {
  mw_daemon_tables_t *dt = arg;
  assert(dt->flushing > 0);
  dt->flushing--;
  shard_done(dt, s, status, reason, "release");
  release_pass(dt); /* before the drop: pending must not reach 0 while shards wait */
  release_drop(dt);
}

/* An abort past the flush deadline ended (the WAL durable, rows kept). */
static void shard_aborted(mw_shard_t *s, int status, const char *reason, void *arg) {
  mw_daemon_tables_t *dt = arg;
  shard_done(dt, s, status, reason, "abort");
  release_drop(dt);
}

/* Ask shards not yet asked to release (flush, then stop owning), at most
 * MW_DAEMON_RELEASE_PARALLEL at a time: 1 024 flushes started together
 * queue ~36 000 storage steps (each flush puts ~9 files, and each put
 * fsyncs its file and directory: 9 file and 26 directory fsyncs a flush,
 * measured) in FIFO order, so none commits before nearly all are done;
 * in slots they commit one after another, and at the deadline most are.
 * Past dt->flush_deadline_ms a shard with rows is aborted instead (its
 * WAL made durable, its rows left there for the next claim to replay).
 * A shard still claiming or replaying (a start-up claim, an admin claim),
 * or busy with an admin command, cannot be released yet: the release
 * waits for it, looking again every MW_DAEMON_RELEASE_RETRY_MS (and at the
 * deadline), and holds `pending` meanwhile. shutdown_timeout_ms bounds a
 * stop (main.c) and sets the deadline inside it. */
#define MW_DAEMON_RELEASE_RETRY_MS 20
_Static_assert(MW_DAEMON_RELEASE_PARALLEL >= 1, "a release needs a slot");

static void on_retry(uv_timer_t *h);

/* Start shard s's release, or past the deadline its abort: 0 when asked
 * (its callback will drop the count of `pending` taken here). */
static int release_one(mw_daemon_tables_t *dt, mw_shard_t *s, bool hurry) {
  assert(s != NULL);
  assert(dt->releasing); /* only a release pass asks shards */
  mw_shard_stats_t st;
  mw_shard_stats(s, &st);
  bool rows = st.memtable_rows > 0 || st.frozen > 0;
  dt->pending++;
  int rc;
  if (hurry && rows && st.state == MW_SS_ACTIVE) {
    rc = mw_shard_abort(s, shard_aborted, dt);
    if (rc == 0) dt->unflushed++;
  } else {
    rc = mw_shard_release(s, shard_released, dt);
    if (rc == 0) dt->flushing++;
  }
  if (rc < 0) dt->pending--;
  return rc;
}

static void release_pass(mw_daemon_tables_t *dt) {
  if (!dt->releasing || dt->pending == 0) return; /* done, or its tables closing */
  uint64_t now = uv_now(dt->loop);
  bool hurry = dt->flush_deadline_ms != 0 && now >= dt->flush_deadline_ms;
  size_t waiting = 0, queued = 0;
  for (size_t i = 0; i < mw_fe_tables_count(&dt->fe); i++) {
    mw_table_t *t = mw_fe_tables_table(&dt->fe, i);
    if (!dt->which[i] || t == NULL) continue;
    size_t n_shards = mw_table_shard_count(t);
    for (size_t k = 0; k < n_shards && dt->asked[i]; k++) {
      if (dt->asked[i][k]) continue;
      if (!hurry && dt->flushing >= MW_DAEMON_RELEASE_PARALLEL) {
        queued++; /* a slot frees when a release ends: shard_released */
        continue;
      }
      mw_table_shard_info_t ts;
      mw_table_shard_at(t, k, &ts);
      mw_shard_t *s = ts.shard;
      mw_shard_state_t st = mw_shard_state(s);
      int rc = release_one(dt, s, hurry);
      if (rc == 0) {
        dt->asked[i][k] = true;
        continue;
      }
      if (rc == -EBUSY || st == MW_SS_CLAIMING || st == MW_SS_REPLAYING) waiting++;
      else dt->asked[i][k] = true; /* parked already: nothing to release */
    }
  }
  uint64_t delay;
  if (waiting > 0) {
    delay = MW_DAEMON_RELEASE_RETRY_MS;
  } else if (queued > 0 && dt->flush_deadline_ms > now) {
    delay = dt->flush_deadline_ms - now;
  } else {
    if (dt->retry_armed) { /* nothing left to look at again: the timer's hold goes */
      assert(dt->pending > 1); /* every caller holds a count of its own */
      uv_timer_stop(&dt->retry);
      dt->retry_armed = false;
      release_drop(dt);
    }
    return;
  }
  if (dt->retry_armed) { /* one hold for the armed timer: just make it no later */
    if (uv_timer_get_due_in(&dt->retry) > delay) uv_timer_start(&dt->retry, on_retry, delay, 0);
    return;
  }
  dt->pending++; /* on_retry drops it */
  dt->retry_armed = true;
  uv_timer_start(&dt->retry, on_retry, delay, 0);
}

static void on_retry(uv_timer_t *h) {
  mw_daemon_tables_t *dt = h->data;
  assert(dt->retry_armed);
  assert(dt->pending > 0);
  dt->retry_armed = false;
  release_pass(dt);
  release_drop(dt); /* the armed timer's hold */
}

static void release_start(mw_daemon_tables_t *dt, const bool *which, uint64_t deadline_ms,
                          void (*cb)(void *, int), void *arg) {
  assert(!dt->releasing);
  assert(cb != NULL);
  assert(dt->flushing == 0);
  assert(!dt->retry_armed);
  dt->releasing = true;
  dt->rel_cb = cb;
  dt->rel_arg = arg;
  dt->failures = 0;
  dt->flush_deadline_ms = deadline_ms;
  dt->unflushed = 0;
  dt->pending = 1;
  for (size_t i = 0; i < mw_fe_tables_count(&dt->fe); i++) {
    mw_table_t *t = mw_fe_tables_table(&dt->fe, i);
    dt->which[i] = which[i] && t != NULL;
    if (!dt->which[i]) continue;
    size_t n_shards = mw_table_shard_count(t);
    for (size_t k = 0; k < n_shards; k++) { /* waiting for a slot, they start no flush of their own */
      mw_table_shard_info_t ts;
      mw_table_shard_at(t, k, &ts);
      mw_shard_hold_age_flush(ts.shard);
    }
    dt->asked[i] = calloc(n_shards + 1, sizeof *dt->asked[i]);
    if (!dt->asked[i]) { /* its shards stay unreleased; their rows stay in the WAL */
      mw_log_err("table %s: out of memory, its shards are not released", mw_fe_tables_name(&dt->fe, i));
      dt->failures++;
    }
  }
  release_pass(dt);
  release_drop(dt); /* the hold */
}

void mw_daemon_tables_close(mw_daemon_tables_t *dt, uint64_t flush_deadline_ms,
                            void (*cb)(void *arg, int failures), void *arg) {
  assert(dt->loop != NULL);
  assert(!dt->stopping);
  dt->stopping = true;
  dt->stop_deadline_ms = flush_deadline_ms;
  if (dt->adding > 0) { /* a reload's openings first: their threads end, on_added goes on */
    dt->add_stop_cb = cb;
    dt->add_stop_arg = arg;
    return;
  }
  close_start(dt, cb, arg);
}

static void close_start(mw_daemon_tables_t *dt, void (*cb)(void *arg, int failures), void *arg) {
  assert(dt->stopping);
  assert(dt->adding == 0);
  if (dt->releasing) { /* a reload's removal first */
    dt->stop_waiting = true;
    dt->stop_cb = cb;
    dt->stop_arg = arg;
    return;
  }
  bool all[MW_CONFIG_MAX_TABLES];
  for (size_t i = 0; i < MW_CONFIG_MAX_TABLES; i++) all[i] = i < mw_fe_tables_count(&dt->fe) && mw_fe_tables_table(&dt->fe, i) != NULL;
  release_start(dt, all, dt->stop_deadline_ms, cb, arg);
}

int mw_daemon_tables_remove(mw_daemon_tables_t *dt, const char *const *names, size_t n,
                            void (*cb)(void *arg, int failures), void *arg, mw_err_t *err) {
  assert(dt != NULL);
  assert(names != NULL || n == 0);
  assert(cb != NULL);
  if (dt->stopping) return mw_err_set(err, -ESHUTDOWN, "memwald is stopping");
  if (dt->releasing) return mw_err_set(err, -EBUSY, "tables removed by an earlier reload are still "
                                                     "being released");
  bool which[MW_CONFIG_MAX_TABLES] = {false};
  adding_t *cancel[MW_CONFIG_MAX_TABLES];
  size_t nc = 0;
  for (size_t k = 0; k < n; k++) {
    int i = mw_fe_tables_index(&dt->fe, names[k]);
    if (i >= 0) {
      which[i] = true;
      continue;
    }
    adding_t *a = dt->adds;
    while (a != NULL && (a->cancelled || strcmp(a->op.tc->name, names[k]) != 0)) a = a->next;
    if (a == NULL) return mw_err_set(err, -ENOENT, "[table %s] is not open", names[k]);
    assert(nc < MW_CONFIG_MAX_TABLES);
    cancel[nc++] = a; /* still opening: cancelled below, once every name is known */
  }
  for (size_t i = 0; i < mw_fe_tables_count(&dt->fe); i++)
    if (which[i]) mw_fe_tables_drop_at(&dt->fe, i); /* gone for clients from now: writes in flight finish */
  for (size_t k = 0; k < nc; k++) {
    mw_log_notice("table %s: removed while opening; the open is thrown away when it ends",
                  cancel[k]->op.tc->name);
    cancel[k]->cancelled = true;
    dt->cancelling++;
  }
  assert(dt->cancelling <= dt->adding);
  release_start(dt, which, 0, cb, arg); /* a removal: no deadline (nothing waits) */
  return 0;
}
