/*
 * admin_engine.c — admin commands as shard-engine operations (see
 * admin_engine.h). One heap `op_t` per command counts the engine callbacks
 * it waits for, keeps the first failure, and replies once the count drops
 * to zero. Engine callbacks never run inside the call that starts them, but
 * an op holds one extra count while it is starting operations anyway.
 */
#include "net/admin_engine.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/heap.h"
#include "common/log.h"
#include "storage/fault.h"
#include "lance/route.h"


typedef struct op {
  mw_admin_req_t *r;
  char cmd[16];
  char table[256];
  int left;
  int n;
  int status;
  char reason[MW_ERR_MSG_BYTES];
  mw_table_t *t;
  mw_shard_t *s;
  uint8_t id[16];    /* s's */
  mw_fe_admin_t *a;
  bool compacting;   /* compact: the flushes are done, the compactions run */
  mw_compact_stats_t before; /* compact on one table: its stats at the start */
} op_t;

/* ------------------------------------------------------------------ status */

static int put(mw_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int put(mw_buf_t *b, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof tmp) return -EOVERFLOW;
  return mw_buf_append(b, tmp, (size_t)n);
}

static uint64_t ago(const mw_fe_admin_t *a, uint64_t t_ms) {
  uint64_t now = a->loop ? uv_now(a->loop) : 0;
  return t_ms && now > t_ms ? now - t_ms : 0;
}

/* ,"fault":{...} for a shard in a fault episode (FAILED and re-claiming,
 * or a flush being retried). */
static int fault_json(const mw_fe_admin_t *a, const mw_shard_t *s, mw_buf_t *out) {
  const mw_shard_fault_t *f = mw_shard_fault(s);
  if (f == NULL) return 0;
  uint64_t now = a->loop ? uv_now(a->loop) : 0;
  int64_t next = f->next_retry_ms == 0 ? -1
                 : f->next_retry_ms > now ? (int64_t)(f->next_retry_ms - now) : 0;
  int rc = put(out, ",\"fault\":{\"op\":\"%s\",\"errno\":\"%s\",\"for_ms\":%" PRIu64
               ",\"retries\":%" PRIu32 ",\"next_retry_ms\":%" PRId64 ",\"error\":",
               f->op, mw_errno_name(f->status), ago(a, f->since_ms), f->retries, next);
  if (rc == 0) rc = mw_admin_json_str(out, f->error);
  if (rc == 0) rc = mw_buf_append(out, "}", 1);
  return rc;
}


/* ,"storage":[{"table",...health...,"fault":{...}}] */
static int storage_json(const mw_fe_admin_t *a, mw_buf_t *out) {
  int rc = mw_buf_append(out, ",\"storage\":[", 12);
  bool first = true;
  for (size_t i = 0; rc == 0 && i < mw_fe_tables_count(a->tables); i++) {
    const mw_table_t *t = mw_fe_tables_live(a->tables, i);
    mw_storage_t *st = t == NULL ? NULL : mw_table_storage(t);
    if (st == NULL) continue;
    mw_storage_health_t h;
    mw_storage_health(st, &h);
    rc = put(out, "%s{\"table\":", first ? "" : ",");
    first = false;
    if (rc == 0) rc = mw_admin_json_str(out, mw_fe_tables_name(a->tables, i));
    if (rc == 0)
      rc = put(out,
               ",\"backend\":\"%s\",\"ops_ok\":%" PRIu64 ",\"ops_failed\":%" PRIu64
               ",\"consecutive_failures\":%" PRIu32 ",\"healthy\":%s,\"last_error\":\"%s\""
               ",\"last_error_ms_ago\":%" PRId64 ",\"last_ok_ms_ago\":%" PRId64
               ",\"inflight\":%" PRIu32 ",\"queued\":%" PRIu32 ",\"max_inflight\":%" PRIu32
               ",\"max_object_bytes\":%zu",
               mw_storage_backend_name(st), h.ops_ok, h.ops_failed, h.consecutive_failures,
               h.consecutive_failures == 0 ? "true" : "false",
               h.last_error ? mw_errno_name(h.last_error) : "",
               h.last_error_ms ? (int64_t)ago(a, h.last_error_ms) : -1,
               h.last_ok_ms ? (int64_t)ago(a, h.last_ok_ms) : -1, mw_storage_inflight(st),
               mw_storage_queued(st), mw_storage_max_inflight(st),
               mw_storage_max_object_bytes(st));
    mw_storage_fault_t f;
    mw_storage_fault_get(st, &f);
    bool armed = f.fail_nth || f.fail_prefix || f.fail_sync_once || f.delay_ms;
    if (rc == 0 && armed) {
      rc = put(out, ",\"fault_injected\":{\"nth\":%" PRIu64 ",\"errno\":\"%s\",\"delay_ms\":%" PRIu32
               ",\"fsync_once\":%s,\"steps\":\"", f.fail_nth,
               f.fail_errno ? mw_errno_name(-f.fail_errno) : "", f.delay_ms,
               f.fail_sync_once ? "true" : "false");
      for (unsigned k = 0, n = 0; rc == 0 && k < mw_storage_step_count(st); k++)
        if (f.fail_steps & MW_STEP_BIT(k))
          rc = put(out, "%s%s", n++ ? "+" : "", mw_storage_step_name(st, k));
      if (rc == 0) rc = mw_buf_append(out, "\",\"prefix\":", 11);
      if (rc == 0) rc = mw_admin_json_str(out, f.fail_prefix ? f.fail_prefix : "");
      if (rc == 0) rc = mw_buf_append(out, "}", 1);
    }
    if (rc == 0) rc = mw_buf_append(out, "}", 1);
  }
  if (rc == 0) rc = mw_buf_append(out, "]", 1);
  return rc;
}

/* ,"compaction":{...},"gc":{...} of one table. */
static int compaction_json(const mw_table_housekeeping_t *hk, mw_buf_t *out) {
  if (hk->compact == NULL || hk->gc == NULL) return 0;
  mw_compact_stats_t c;
  mw_gc_stats_t g;
  mw_compact_stats(hk->compact, &c);
  mw_gc_stats(hk->gc, &g);
  int rc = put(out, ",\"compaction\":{\"enabled\":%s,\"running\":%s,\"runs\":%" PRIu64
               ",\"failures\":%" PRIu64 ",\"conflicts\":%" PRIu64 ",\"sstables\":%" PRIu64
               ",\"rows_merged\":%" PRIu64 ",\"rows_written\":%" PRIu64 ",\"rows_masked\":%" PRIu64
               ",\"base_version\":%" PRIu64 ",\"last_run_ms\":%" PRIu64 ",\"last_error\":",
               hk->compact_enabled ? "true" : "false", c.running ? "true" : "false", c.runs,
               c.failures, c.conflicts, c.sstables, c.rows_in, c.rows_written, c.rows_masked,
               c.base_version, c.last_run_ms);
  if (rc == 0) rc = mw_admin_json_str(out, c.last_error);
  if (rc == 0)
    rc = put(out, "},\"gc\":{\"enabled\":%s,\"grace_ms\":%" PRIu64 ",\"wal_deleted\":%" PRIu64
             ",\"wal_bytes_deleted\":%" PRIu64 ",\"sentinels_kept\":%" PRIu64 ",\"wal_reads\":%" PRIu64
             ",\"wal_reads_absent\":%" PRIu64 ",\"wal_lists\":%" PRIu64 ",\"sstables_trimmed\":%" PRIu64
             ",\"dirs_deleted\":%" PRIu64 ",\"manifests_deleted\":%" PRIu64 ",\"hints_rewritten\":%" PRIu64
             ",\"history_retention_ms\":%" PRIu64 ",\"base_versions_deleted\":%" PRIu64
             ",\"base_files_deleted\":%" PRIu64 ",\"base_bytes_deleted\":%" PRIu64
             ",\"base_versions_retained\":%" PRIu64 ",\"base_stale_listings\":%" PRIu64
             ",\"failures\":%" PRIu64 ",\"last_error\":",
             hk->gc_enabled ? "true" : "false", hk->gc_grace_ms, g.wal_deleted, g.wal_bytes_deleted,
             g.sentinels_kept, g.wal_reads, g.wal_reads_absent, g.wal_lists, g.sstables_trimmed, g.dirs_deleted, g.manifests_deleted, g.hints_rewritten,
             hk->gc_history_retention_ms, g.base_versions_deleted, g.base_files_deleted, g.base_bytes_deleted,
             g.base_versions_retained, g.base_stale_listings, g.failures);
  if (rc == 0) rc = mw_admin_json_str(out, g.last_error);
  if (rc == 0) rc = mw_buf_append(out, "}", 1);
  return rc;
}

/* One shard's entry of the status document (k: its index in the table). */
static int shard_json(const mw_fe_admin_t *a, const mw_table_housekeeping_t *hk,
                      const mw_table_shard_info_t *ts, size_t k, mw_buf_t *out) {
  mw_shard_stats_t st;
  mw_shard_stats(ts->shard, &st);
  int rc = put(out, "%s{\"id\":\"%s\",\"key\":", k ? "," : "", mw_shard_id_str(ts->shard));
  if (rc == 0) rc = mw_admin_json_str(out, ts->key);
  if (rc == 0 && ts->key_truncated) rc = put(out, ",\"key_truncated\":true");
  if (rc == 0)
    rc = put(out,
           ",\"state\":\"%s\",\"status\":\"%s\",\"epoch\":%" PRIu64
           ",\"manifest_version\":%" PRIu64 ",\"wal_position\":%" PRIu64 ",\"replay_after\":%" PRIu64
           ",\"memtable_rows\":%" PRId64 ",\"memtable_bytes\":%" PRId64 ",\"frozen\":%" PRIu32
           ",\"sstables\":%" PRIu64 ",\"rows_acked\":%" PRIu64 ",\"wal_entries\":%" PRIu64
           ",\"flushes\":%" PRIu64 ",\"backpressured\":%s",
           mw_shard_state_name(st.state),
           st.sealed ? "SEALED" : "ACTIVE", st.epoch, st.manifest_version, st.wal_next_position,
           st.replay_after, st.memtable_rows, st.memtable_bytes, st.frozen, st.sstables,
           st.rows_acked, st.wal_entries, st.flushes, st.backpressured ? "true" : "false");
  if (rc == 0) rc = put(out, ",\"recoveries\":%" PRIu64, st.recoveries);
  if (rc == 0)
    rc = put(out, ",\"wal_batches_passed_through\":%" PRIu64 ",\"wal_bytes_passed_through\":%" PRIu64
             ",\"wal_batches_encoded\":%" PRIu64 ",\"wal_bytes_encoded\":%" PRIu64,
             st.wal_batches_passed_through, st.wal_bytes_passed_through, st.wal_batches_encoded,
             st.wal_bytes_encoded);
  mw_compact_shard_t cs;
  if (rc == 0 && hk->compact && mw_compact_shard_state(hk->compact, ts->id, &cs))
    rc = put(out, ",\"compacted_generation\":%" PRIu64 ",\"uncompacted_sstables\":%" PRIu64
             ",\"uncompacted_bytes\":%" PRIu64 ",\"compaction_failures\":%" PRIu32,
             cs.compacted_gen, cs.uncompacted, cs.uncompacted_bytes, cs.failures);
  mw_gc_shard_stats_t gs;
  if (rc == 0 && hk->gc && mw_gc_shard_stats(hk->gc, ts->id, &gs))
    rc = put(out, ",\"wal_first\":%" PRIu64 ",\"wal_gc_horizon\":%" PRIu64
             ",\"sstable_dirs_waiting\":%" PRIu32 ",\"manifest_first\":%" PRIu64 ",\"manifest_floor\":%" PRIu64,
             gs.wal_first, gs.horizon, gs.dirs_waiting, gs.manifest_first, gs.manifest_floor);
  if (rc == 0 && mw_shard_reason(ts->shard)[0]) {
    rc = mw_buf_append(out, ",\"reason\":", 10);
    if (rc == 0) rc = mw_admin_json_str(out, mw_shard_reason(ts->shard));
  }
  if (rc == 0) rc = fault_json(a, ts->shard, out);
  if (rc == 0) rc = mw_buf_append(out, "}", 1);
  return rc;
}

int mw_fe_status_json(const mw_fe_admin_t *a, mw_buf_t *out) {
  assert(a);
  assert(out);
  uint64_t up = a->loop ? (uv_now(a->loop) - a->start_ms) / 1000 : 0;
  int rc = mw_buf_append(out, "{\"version\":", 11);
  if (rc == 0) rc = mw_admin_json_str(out, a->version ? a->version : "");
  if (rc == 0)
    rc = put(out, ",\"uptime_s\":%" PRIu64 ",\"connections\":%zu", up,
             a->server ? mw_server_connections(a->server) : 0);
  /* read now, not the memtrim gauge's last 10 s sample: a test compares
   * the live heap across windows of a flood (common/heap.h) */
  mw_heap_usage_t heap;
  mw_heap_usage(&heap);
  if (rc == 0)
    rc = put(out, ",\"heap_live_bytes\":%" PRIu64 ",\"heap_free_bytes\":%" PRIu64
             ",\"heap_source\":\"%s\",\"tables\":[", heap.live_bytes, heap.free_bytes, heap.source);
  bool first = true;
  for (size_t i = 0; rc == 0 && i < mw_fe_tables_count(a->tables); i++) {
    const mw_table_t *t = mw_fe_tables_live(a->tables, i);
    if (t == NULL) continue;
    rc = put(out, "%s{\"name\":", first ? "" : ",");
    first = false;
    if (rc == 0) rc = mw_admin_json_str(out, mw_fe_tables_name(a->tables, i));
    if (rc == 0) rc = mw_buf_append(out, ",\"path\":", 8);
    if (rc == 0) rc = mw_admin_json_str(out, mw_table_path(t));
    if (rc == 0) rc = mw_buf_append(out, ",\"shards\":[", 11);
    mw_table_housekeeping_t hk;
    mw_table_housekeeping(t, &hk);
    size_t n_shards = mw_table_shard_count(t);
    for (size_t k = 0; rc == 0 && k < n_shards; k++) {
      mw_table_shard_info_t ts;
      mw_table_shard_at(t, k, &ts); /* O(1) a shard: 1 024 buckets in ~5 ms */
      rc = shard_json(a, &hk, &ts, k, out);
    }
    if (rc == 0) rc = mw_buf_append(out, "]", 1);
    if (rc == 0) rc = compaction_json(&hk, out);
    if (rc == 0) rc = mw_buf_append(out, "}", 1);
  }
  if (rc == 0) rc = mw_buf_append(out, "]", 1);
  if (rc == 0) rc = storage_json(a, out);
  if (rc == 0) rc = mw_buf_append(out, "}", 2); /* with the NUL */
  if (rc == 0) out->len--;
  return rc;
}

/* ------------------------------------------------------------------ commands */

static void start_compactions(op_t *o);

static void op_finish(op_t *o) {
  assert(o->left == 0); /* every count dropped */
  assert(o->r != NULL);
  if (o->status == 0 && strcmp(o->cmd, "compact") == 0 && !o->compacting) {
    start_compactions(o); /* the flushes committed: now compact */
    return;
  }
  if (o->status < 0) {
    char msg[MW_ERR_MSG_BYTES + 300];
    snprintf(msg, sizeof msg, "table %s: %s", o->table, o->reason[0] ? o->reason : mw_strerror(o->status));
    mw_admin_reply(o->r, o->status, msg);
  } else if (strcmp(o->cmd, "flush") == 0) {
    char j[64];
    snprintf(j, sizeof j, "{\"flushed\":%d}", o->n);
    mw_admin_reply(o->r, 0, j);
  } else if (strcmp(o->cmd, "compact") == 0) {
    char j[400];
    mw_table_housekeeping_t hk = {0};
    if (o->t) mw_table_housekeeping(o->t, &hk);
    if (hk.compact) {
      mw_compact_stats_t st;
      mw_compact_stats(hk.compact, &st);
      snprintf(j, sizeof j, "{\"compacted\":%d,\"runs\":%" PRIu64 ",\"sstables\":%" PRIu64
               ",\"rows_written\":%" PRIu64 ",\"base_version\":%" PRIu64 "}", o->n,
               st.runs - o->before.runs, st.sstables - o->before.sstables,
               st.rows_written - o->before.rows_written, st.base_version);
    } else {
      snprintf(j, sizeof j, "{\"compacted\":%d}", o->n);
    }
    mw_admin_reply(o->r, 0, j);
  } else if (strcmp(o->cmd, "drop-table") == 0) {
    mw_buf_t b = MW_BUF_INIT;
    int rc = mw_buf_append(&b, "{\"table\":", 9);
    if (rc == 0) rc = mw_admin_json_str(&b, o->table);
    if (rc == 0) rc = mw_buf_append(&b, ",\"dropped\":true}", 17);
    mw_admin_reply(o->r, rc, rc == 0 ? (const char *)b.data : "out of memory");
    mw_buf_free(&b);
  } else {
    mw_shard_stats_t st;
    mw_shard_stats(o->s, &st);
    char key[MW_TABLE_SHARD_KEY_BYTES], j[512];
    mw_table_shard_name(o->t, o->id, key, sizeof key);
    snprintf(j, sizeof j, "{\"shard\":\"%s\",\"key\":\"%s\",\"state\":\"%s\",\"status\":\"%s\",\"epoch\":%" PRIu64 "}",
             mw_shard_id_str(o->s), key, mw_shard_state_name(st.state), st.sealed ? "SEALED" : "ACTIVE", st.epoch);
    mw_admin_reply(o->r, 0, j);
  }
  free(o);
}

static void op_done(op_t *o, int status, const char *reason) {
  assert(o->left > 0); /* each count is dropped once */
  if (status < 0 && o->status == 0) {
    o->status = status;
    snprintf(o->reason, sizeof o->reason, "%s", reason ? reason : mw_strerror(status));
  }
  if (--o->left == 0) op_finish(o);
}

static void on_shard_done(mw_shard_t *s, int status, const char *reason, void *arg) {
  (void)s;
  op_done(arg, status, reason);
}

static void on_drop_done(mw_table_t *t, int status, const char *reason, void *arg) {
  op_t *o = arg;
  assert(o->t == t); /* drop-table names one table */
  if (status == 0) mw_fe_tables_drop(o->a->tables, t); /* committed: gone for clients */
  op_done(o, status, reason);
}

static void on_compacted(void *arg, int status, const char *reason) {
  op_done(arg, status, reason);
}

/* compact, second step: every table's compaction, one reply for all. */
static void start_compactions(op_t *o) {
  mw_fe_admin_t *a = o->a;
  assert(!o->compacting); /* the second step runs once */
  assert(o->status == 0);  /* after flushes that all succeeded */
  o->compacting = true;
  o->left = 1;
  o->n = 0;
  for (size_t i = 0; i < mw_fe_tables_count(a->tables); i++) {
    mw_table_t *t = mw_fe_tables_live(a->tables, i);
    if (t == NULL || (o->t && t != o->t)) continue;
    o->left++;
    int rc = mw_table_compact(t, on_compacted, o);
    if (rc < 0) op_done(o, rc, "compaction is stopped (the table is closing or dropped)");
    else o->n++;
  }
  op_done(o, 0, NULL);
}

static mw_table_t *find_table(const mw_fe_admin_t *a, const char *name) {
  return mw_fe_tables_find(a->tables, name);
}

static void start_flush(mw_fe_admin_t *a, op_t *o, int argc, const char *const *argv) {
  for (size_t i = 0; i < mw_fe_tables_count(a->tables); i++) {
    mw_table_t *t = mw_fe_tables_live(a->tables, i);
    if (t == NULL || (argc >= 2 && t != o->t)) continue;
    uint8_t id[16];
    mw_err_t err = {0};
    if (argc >= 3 && mw_table_shard_parse(t, argv[2], id, &err) < 0) {
      op_done(o, -EINVAL, err.msg);
      return;
    }
    size_t n_shards = mw_table_shard_count(t);
    for (size_t k = 0; k < n_shards; k++) {
      mw_table_shard_info_t ts;
      mw_table_shard_at(t, k, &ts);
      mw_shard_t *s = ts.shard;
      if (argc >= 3 && memcmp(ts.id, id, 16) != 0) continue;
      if (mw_shard_state(s) != MW_SS_ACTIVE) {
        if (argc >= 3) op_done(o, -EINVAL, "the shard is not ACTIVE");
        if (argc >= 3) return;
        continue;
      }
      o->left++;
      int rc = mw_shard_flush(s, on_shard_done, o);
      if (rc < 0) op_done(o, rc, mw_shard_reason(s)[0] ? mw_shard_reason(s) : mw_strerror(rc));
      else o->n++;
    }
  }
}

/* ------------------------------------------------------------ fault (tests) */

/* `fault TABLE set k=v[,k=v...]` / `fault TABLE clear`: change the table
 * storage's fault injection at run time. Only when the daemon runs with
 * MEMWALD_TEST_FAULTS=1. The hooks installed at start (on_step, the
 * power-loss journal) are kept. Keys: nth=N (the Nth storage operation
 * submitted from now on), prefix=KEY-PREFIX, target=wal|manifest|shard with
 * shard=SHARD (a prefix under that shard's _mem_wal directory), errno=NAME|N
 * (default EIO), steps=STEP[+STEP...] (default any), delay_ms=D,
 * fsync_once (alias sync_once: the next durability step fails). Steps are
 * the table storage backend's own names. Replies with the status `storage` entry's fault fields. */
/* What `fault TABLE set ...` asks for, while its KEY=VALUEs are read. */
typedef struct fault_args {
  mw_storage_fault_t f;
  char prefix[MW_STORAGE_KEY_MAX_BYTES + 64];
  bool has_prefix;
  char target[16], shard[512];
} fault_args_t;

/* One KEY[=VALUE] (kv, its '=' cut into v: NULL without one). The storage
 * reads its own keys (mw_storage_fault_parse); the table's places are here. */
static int fault_kv(mw_storage_t *st, fault_args_t *fa, const char *kv, const char *v,
                    mw_err_t *err) {
  assert(st != NULL);
  assert(fa != NULL);
  int rc = mw_storage_fault_parse(st, &fa->f, kv, v, err);
  if (rc != -ENOENT) return rc;
  if (v == NULL && (strcmp(kv, "prefix") == 0 || strcmp(kv, "target") == 0 || strcmp(kv, "shard") == 0))
    return mw_err_set(err, -EINVAL, "fault set: bad value for %.100s", kv);
  if (strcmp(kv, "prefix") == 0) {
    if (strlen(v) > MW_STORAGE_KEY_MAX_BYTES) return mw_err_set(err, -EINVAL, "fault set: bad value for prefix");
    snprintf(fa->prefix, sizeof fa->prefix, "%.1023s", v);
    fa->has_prefix = true;
  } else if (strcmp(kv, "target") == 0) {
    snprintf(fa->target, sizeof fa->target, "%.15s", v);
  } else if (strcmp(kv, "shard") == 0) {
    snprintf(fa->shard, sizeof fa->shard, "%.500s", v);
  } else {
    return mw_err_set(err, -EINVAL, "fault set: unknown key \"%.100s\" (nth, prefix, target, "
                                    "shard, errno, steps, delay_ms, fsync_once)", kv);
  }
  return 0;
}

/* target=wal|manifest|shard with shard=SHARD: a prefix under that shard's
 * _mem_wal directory. */
static int fault_target(mw_table_t *t, fault_args_t *fa, mw_err_t *err) {
  assert(fa->target[0] != '\0');
  uint8_t id[16];
  char sid[MW_UUID_STR_BYTES];
  if (!fa->shard[0]) return mw_err_set(err, -EINVAL, "fault set: target= needs shard=SHARD");
  int rc = mw_table_shard_parse(t, fa->shard, id, err);
  if (rc < 0) return rc;
  mw_shard_uuid_format(id, sid);
  const char *sub = strcmp(fa->target, "wal") == 0        ? "wal/"
                    : strcmp(fa->target, "manifest") == 0 ? "manifest/"
                    : strcmp(fa->target, "shard") == 0    ? ""
                                                          : NULL;
  if (sub == NULL)
    return mw_err_set(err, -EINVAL, "fault set: target must be wal, manifest or shard");
  snprintf(fa->prefix, sizeof fa->prefix, "_mem_wal/%s/%s", sid, sub);
  fa->has_prefix = true;
  return 0;
}

/* `fault TABLE set k=v[,k=v...] [k=v...]`: the faults asked for, into fa. */
static int fault_parse(mw_table_t *t, int argc, const char *const *argv, fault_args_t *fa,
                       mw_err_t *err) {
  mw_storage_t *st = mw_table_storage(t);
  if (argc < 4) return mw_err_set(err, -EINVAL, "fault set: no KEY=VALUE given");
  for (int i = 3; i < argc; i++) {
    char spec[1024];
    snprintf(spec, sizeof spec, "%s", argv[i]);
    char *save = NULL;
    for (char *kv = strtok_r(spec, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
      char *v = strchr(kv, '=');
      if (v) *v++ = 0;
      int rc = fault_kv(st, fa, kv, v, err);
      if (rc < 0) return rc;
    }
  }
  if (fa->target[0]) {
    int rc = fault_target(t, fa, err);
    if (rc < 0) return rc;
  }
  if (fa->has_prefix) fa->f.fail_prefix = fa->prefix;
  if ((fa->f.fail_nth || fa->has_prefix) && fa->f.fail_errno == 0) fa->f.fail_errno = EIO;
  return 0;
}

static int fault_command(mw_fe_admin_t *a, mw_table_t *t, int argc, const char *const *argv,
                         mw_err_t *err) {
  const char *env = getenv("MEMWALD_TEST_FAULTS");
  if (env == NULL || strcmp(env, "1") != 0)
    return mw_err_set(err, -EPERM, "fault injection is for tests only: start memwald with "
                                   "MEMWALD_TEST_FAULTS=1 to enable the fault command");
  (void)a;
  if (argc < 3 || (strcmp(argv[2], "set") != 0 && strcmp(argv[2], "clear") != 0))
    return mw_err_set(err, -EINVAL, "usage: fault TABLE set KEY=VALUE[,KEY=VALUE...] | fault TABLE clear");
  mw_storage_t *st = mw_table_storage(t);
  fault_args_t fa = {.has_prefix = false};
  mw_storage_fault_get_hooks(st, &fa.f); /* no fault, the hooks installed at start */
  if (strcmp(argv[2], "set") == 0) {
    int rc = fault_parse(t, argc, argv, &fa, err);
    if (rc < 0) return rc;
  }
  int rc = mw_storage_fault_set(st, &fa.f);
  if (rc < 0) return mw_err_set(err, rc, "fault: the storage refused the settings");
  mw_log_warn("table %s: TEST fault injection %s%s%s", mw_table_path(t), argv[2], argc > 3 ? " " : "",
              argc > 3 ? argv[3] : "");
  return 0;
}

/* ---------------------------------------------------------------- commands */

typedef struct engine_cmd engine_cmd_t;
typedef int (*shard_op_fn)(mw_shard_t *, mw_shard_done_cb, void *);

/* One admin command on the engine (net/admin.c's table names it and has
 * checked its argument count): what runs it, and for a shard command its
 * operation. */
struct engine_cmd {
  void (*run)(mw_fe_admin_t *a, op_t *o, const engine_cmd_t *c, int argc,
              const char *const *argv);
  shard_op_fn shard_op;
};

/* `status`: the engine's status document (no op: nothing to wait for). */
static void reply_status(mw_fe_admin_t *a, mw_admin_req_t *r) {
  mw_buf_t b = MW_BUF_INIT;
  int rc = mw_fe_status_json(a, &b);
  if (rc == 0) rc = mw_buf_append(&b, "", 1);
  mw_admin_reply(r, rc, rc == 0 ? (const char *)b.data : "status: out of memory");
  mw_buf_free(&b);
}

/* `fault TABLE set|clear ...` (tests only). */
static void run_fault(mw_fe_admin_t *a, op_t *o, const engine_cmd_t *c, int argc,
                      const char *const *argv) {
  (void)c;
  assert(o->t != NULL); /* admin.c asks for a table */
  mw_err_t err = {0};
  int rc = fault_command(a, o->t, argc, argv, &err);
  if (rc < 0) {
    op_done(o, rc, err.msg);
    return;
  }
  mw_buf_t b = MW_BUF_INIT;
  rc = mw_buf_append(&b, "{\"table\":", 9);
  if (rc == 0) rc = mw_admin_json_str(&b, o->table);
  if (rc == 0) rc = put(&b, ",\"fault\":\"%s\"}", argv[2]);
  if (rc == 0) rc = mw_buf_append(&b, "", 1);
  mw_admin_reply(o->r, rc, rc == 0 ? (const char *)b.data : "out of memory");
  mw_buf_free(&b);
  free(o);
}

/* `flush [TABLE [SHARD]]`. */
static void run_flush(mw_fe_admin_t *a, op_t *o, const engine_cmd_t *c, int argc,
                      const char *const *argv) {
  assert(argc <= 3); /* flush [TABLE [SHARD]] (admin.c) */
  (void)c;
  start_flush(a, o, argc, argv);
  op_done(o, 0, NULL);
}

/* `compact [TABLE]`: flush every shard, then compact. */
static void run_compact(mw_fe_admin_t *a, op_t *o, const engine_cmd_t *c, int argc,
                        const char *const *argv) {
  assert(argc <= 2); /* compact [TABLE] (admin.c) */
  (void)c;
  mw_table_housekeeping_t hk = {0};
  if (o->t) mw_table_housekeeping(o->t, &hk);
  if (hk.compact) mw_compact_stats(hk.compact, &o->before);
  start_flush(a, o, argc, argv);
  op_done(o, 0, NULL);
}

/* `drop-table TABLE`. */
static void run_drop_table(mw_fe_admin_t *a, op_t *o, const engine_cmd_t *c, int argc,
                           const char *const *argv) {
  (void)a;
  (void)c;
  (void)argc;
  (void)argv;
  assert(o->t != NULL); /* admin.c asks for a table */
  o->left++;
  int rc = mw_table_drop(o->t, on_drop_done, o);
  if (rc < 0) op_done(o, rc, rc == -EBUSY ? "a drop or another control operation is running" : NULL);
  op_done(o, 0, NULL);
}

/* `drop` is two phases: the operator seals first. -EBUSY (replied) when the
 * shard is still ACTIVE. */
static int drop_needs_seal(op_t *o, const char *shard) {
  mw_shard_stats_t st;
  mw_shard_stats(o->s, &st);
  if (st.sealed) return 0;
  char key[MW_TABLE_SHARD_KEY_BYTES], msg[MW_ERR_MSG_BYTES];
  mw_table_shard_name(o->t, o->id, key, sizeof key);
  snprintf(msg, sizeof msg, "shard %.80s is ACTIVE (state %s): seal it first (memwalctl seal %.100s "
           "%.100s), then drop it", key, mw_shard_state_name(st.state), o->table, shard);
  op_done(o, -EBUSY, msg);
  return -EBUSY;
}

/* `claim|seal|unseal|release|drop TABLE SHARD`: the shard's operation. */
static void run_shard(mw_fe_admin_t *a, op_t *o, const engine_cmd_t *c, int argc,
                      const char *const *argv) {
  (void)a;
  assert(argc >= 3); /* admin.c asks for a table and a shard */
  assert(c->shard_op != NULL);
  uint8_t id[16];
  mw_err_t err = {0};
  if (mw_table_shard_parse(o->t, argv[2], id, &err) < 0) {
    op_done(o, -EINVAL, err.msg);
    return;
  }
  bool claim = c->shard_op == mw_shard_claim;
  /* an operator's claim takes a shard over even when another daemon was
   * configured to own it (failover: README) */
  o->s = claim ? mw_table_adopt(o->t, id) : mw_table_shard(o->t, id, false);
  memcpy(o->id, id, 16);
  if (o->s && strncmp(argv[2], "identity-", 9) == 0) mw_table_shard_set_key(o->t, id, argv[2] + 9);
  if (!o->s) {
    op_done(o, -ENOENT, claim ? "this daemon does not own that shard"
                              : "that shard is not open here (not owned, or not written since start)");
    return;
  }
  if (c->shard_op == mw_shard_drop && drop_needs_seal(o, argv[2]) < 0) return;
  o->left++;
  int rc = c->shard_op(o->s, on_shard_done, o);
  if (rc < 0) op_done(o, rc, mw_shard_reason(o->s)[0] ? mw_shard_reason(o->s) : mw_strerror(rc));
  op_done(o, 0, NULL);
}

/* What each command of admin.c's table does here, by its id (status is
 * answered at once; metrics never comes: admin.c serves it). */
static const engine_cmd_t RUN[MW_ADMIN_N_COMMANDS] = {
    [MW_ADMIN_FAULT] = {run_fault, NULL},
    [MW_ADMIN_FLUSH] = {run_flush, NULL},
    [MW_ADMIN_COMPACT] = {run_compact, NULL},
    [MW_ADMIN_DROP_TABLE] = {run_drop_table, NULL},
    [MW_ADMIN_CLAIM] = {run_shard, mw_shard_claim},
    [MW_ADMIN_SEAL] = {run_shard, mw_shard_seal},
    [MW_ADMIN_UNSEAL] = {run_shard, mw_shard_unseal},
    [MW_ADMIN_RELEASE] = {run_shard, mw_shard_release},
    [MW_ADMIN_DROP] = {run_shard, mw_shard_drop},
};

/* The op of a command: its table (argv[1]; all tables without one), held
 * once while it starts. NULL (replied) when out of memory or the table is
 * unknown. */
static op_t *op_new(mw_fe_admin_t *a, mw_admin_req_t *r, int argc, const char *const *argv) {
  op_t *o = calloc(1, sizeof *o);
  if (!o) {
    mw_admin_reply(r, -ENOMEM, "out of memory");
    return NULL;
  }
  o->r = r;
  o->a = a;
  o->left = 1; /* held while starting */
  snprintf(o->cmd, sizeof o->cmd, "%s", argv[0]);
  snprintf(o->table, sizeof o->table, "%s", argc >= 2 ? argv[1] : "*");
  if (argc >= 2 && !(o->t = find_table(a, argv[1]))) {
    char msg[300];
    snprintf(msg, sizeof msg, "unknown table \"%.200s\"", argv[1]);
    free(o);
    mw_admin_reply(r, -ENOENT, msg);
    return NULL;
  }
  return o;
}

static void command(void *data, int argc, const char *const *argv, mw_admin_req_t *r) {
  mw_fe_admin_t *a = data;
  assert(argc >= 1);
  const mw_admin_command_t *k = mw_admin_command(argv[0]);
  if (k != NULL && k->id == MW_ADMIN_STATUS) return reply_status(a, r);
  const engine_cmd_t *c = k != NULL && RUN[k->id].run != NULL ? &RUN[k->id] : NULL;
  if (c == NULL) {
    mw_admin_reply(r, -EINVAL, "unknown command");
    return;
  }
  op_t *o = op_new(a, r, argc, argv);
  if (o != NULL) c->run(a, o, c, argc, argv);
}

void mw_fe_admin_engine(mw_fe_admin_t *a, mw_admin_engine_t *out) {
  assert(a);
  assert(a->tables);
  assert(out);
  out->data = a;
  out->command = command;
}
