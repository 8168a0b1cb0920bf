/*
 * shard.c — see shard.h and docs/design.md (state table).
 *
 * A write's life: validate → (queue while claiming or backpressured) →
 * insert into the active MemTable (seq = ++s->seq) → mw_wal_add (group
 * commit) → on_durable(position, seq_last) acknowledges every write with
 * seq <= seq_last, in order. With durable_write = false the ack is queued at
 * the insert. Every callback goes through the `done` list and runs from the
 * `kick` timer on the next loop turn, never inside the caller's call.
 *
 * Freezing: after an insert, a full MemTable is frozen (its pending batches
 * are cut into their own WAL entry, since the WAL never mixes generations)
 * and a new one with generation+1 takes its place. The flusher takes the
 * oldest frozen MemTable once every batch in it is durable, and publishes it
 * (flush.c). Frozen MemTables stay in memory until their manifest commit.
 *
 * Parking: FENCED / SEALED / CLOSED / FAILED fail every queued and waiting
 * write with the park status and the reason (logged once).
 *
 * Self-recovery: park(FAILED) opens (or continues) a fault episode in
 * s->fault and arms the housekeeping timer for an automatic re-claim
 * (1 s doubling to max_fault_retry_interval_ms). The re-claim is an
 * ordinary claim (epoch+1, fence sentinel, replay) without a control
 * completion (auto_claim); an operator's claim arriving meanwhile attaches
 * to it. A failed attempt parks FAILED again with retries+1; ACTIVE ends
 * the episode (memwald_shard_recoveries_total{kind="reclaim"}). Failed
 * flushes keep their own retry loop (the shard stays ACTIVE) but are
 * reported in the same s->fault record (kind="flush").
 */
#include "shard/shard.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/metrics.h"
#include "common/log.h"
#include "common/setting.h"
#include "lance/route.h"

enum { CTL_NONE = 0, CTL_CLAIM, CTL_FLUSH, CTL_SEAL, CTL_UNSEAL, CTL_RELEASE, CTL_DROP, CTL_ABORT };

static const char *const state_names[] = {"NEW",    "CLAIMING", "REPLAYING", "ACTIVE",
                                          "FENCED", "SEALED",   "CLOSED",    "FAILED"};

const char *mw_shard_state_name(mw_shard_state_t st) {
  return (unsigned)st < sizeof state_names / sizeof *state_names ? state_names[st] : "?";
}

/* ------------------------------------------------------------------ config */

void mw_shard_config_defaults(mw_shard_config_t *c) {
  assert(c != NULL);
  memset(c, 0, sizeof *c);
  c->durable_write = true;
  c->max_wal_buffer_size = (uint64_t)10 << 20;
  c->max_wal_flush_interval_ms = 1;
  c->max_memtable_size = (uint64_t)256 << 20;
  c->max_memtable_rows = 100000;
  c->max_memtable_batches = 8000;
  c->manifest_scan_batch_size = 2;
  c->max_unflushed_memtable_bytes = (uint64_t)1 << 30;
  c->backpressure_log_interval_ms = 30000; /* Lance's defaults */
  c->stats_log_interval_ms = 60000;
  /* One entry in flight by default: with more, entries above a peer's fence
   * sentinel can land and Lance's replay would resurrect rows we refused
   * (docs/engine.md). Group commit keeps throughput: everything that
   * arrives while an entry is in flight goes into the next one. */
  c->max_wal_inflight = 1;
  c->max_queued_writes = 1024;
  c->max_memtable_age_ms = 10000;
  c->max_fault_retry_interval_ms = 30000;
  c->shard_spec_id = 1;
}

/* The numeric keys and their limits. */
#define SK(field, lo, hi) MW_SETTING_NUM(mw_shard_config_t, field, #field, lo, hi)
static const mw_setting_num_t num_keys[] = {
    SK(max_wal_buffer_size, 0, UINT64_MAX),
    SK(max_memtable_size, 0, UINT64_MAX),
    SK(max_memtable_rows, 0, UINT64_MAX),
    SK(max_memtable_batches, 0, UINT64_MAX),
    SK(max_unflushed_memtable_bytes, 0, UINT64_MAX),
    SK(max_wal_flush_interval_ms, 0, 3600000),
    SK(manifest_scan_batch_size, 1, MW_MSTORE_MAX_PROBES),
    SK(max_wal_inflight, 1, MW_WAL_MAX_INFLIGHT),
    SK(max_queued_writes, 0, 1000000),
    SK(backpressure_log_interval_ms, 0, 86400000),
    SK(stats_log_interval_ms, 0, 86400000),
    SK(max_memtable_age_ms, 0, 86400000),
    SK(max_fault_retry_interval_ms, 0, 3600000),
};
#undef SK

static int set_flag(bool *field, const char *value, const char *yes, const char *no) {
  if (value && strcmp(value, yes) == 0) *field = true;
  else if (value && strcmp(value, no) == 0) *field = false;
  else return -EINVAL;
  return 0;
}

int mw_shard_config_set(mw_shard_config_t *c, const char *key, const char *value, mw_err_t *err) {
  assert(c != NULL);
  assert(key != NULL);
  int rc = -ENOENT;
  if (strcmp(key, "durable_write") == 0) rc = set_flag(&c->durable_write, value, "true", "false");
  /* ours: zstd-compressed SSTable data pages */
  else if (strcmp(key, "sstable_zstd") == 0) rc = set_flag(&c->sstable_zstd, value, "true", "false");
  else if (strcmp(key, "wal_compression") == 0) rc = set_flag(&c->wal_zstd, value, "zstd", "none");
  if (rc == -EINVAL)
    return mw_err_set(err, rc, "config %s: expected %s, got '%.64s'", key,
                      strcmp(key, "wal_compression") == 0 ? "zstd or none" : "true or false",
                      value ? value : "(none)");
  if (rc != -ENOENT) return rc;
  return mw_setting_set_num(c, num_keys, sizeof num_keys / sizeof *num_keys, key, value, err);
}

/* --------------------------------------------------------------- memtables */

/* ----------------------------------------------------------------- metrics */

/* Process-wide engine metrics (registered on the loop thread at the first
 * shard's init; recording is lock-free). */
static struct {
  bool ready;
  mw_metric_t *wal_path[4]; /* passed_through batches, bytes; encoded batches, bytes */
  mw_metric_t *wal_entries, *wal_bytes, *mt_bytes, *flushes, *flush_failures, *fences, *refused;
  mw_metric_t *flush_s;
  mw_metric_family_t *flush_fam;
  mw_metric_t *recovered_reclaim, *recovered_flush;
  mw_metric_t *states[MW_SS_FAILED + 1];
} em;

static void metrics_init(void) {
  if (em.ready) return;
  static const double b[] = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
  const mw_metric_def_t defs[] = {
      {MW_METRIC_COUNTER, "memwald_wal_entries_total", "WAL entries made durable.", .series = {&em.wal_entries}},
      {MW_METRIC_COUNTER, "memwald_wal_bytes_total", "Bytes of WAL entries made durable.",
       .series = {&em.wal_bytes}},
      {MW_METRIC_COUNTER, "memwald_wal_batches_total",
       "Record batches in WAL entries: path=passed_through (an ARROW frame's messages as they "
       "came), path=encoded (encoded from the rows).",
       "path", {"passed_through", "encoded"}, {&em.wal_path[0], &em.wal_path[2]}},
      {MW_METRIC_COUNTER, "memwald_wal_batch_bytes_total",
       "Bytes of record batch messages in WAL entries, by path (as memwald_wal_batches_total).", "path",
       {"passed_through", "encoded"}, {&em.wal_path[1], &em.wal_path[3]}},
      {MW_METRIC_GAUGE, "memwald_memtable_bytes", "Unflushed MemTable bytes (Lance's estimate), all shards.",
       .series = {&em.mt_bytes}},
      {MW_METRIC_COUNTER, "memwald_flushes_total", "SSTables committed.", .series = {&em.flushes}},
      {MW_METRIC_COUNTER, "memwald_flush_failures_total", "Flush attempts that failed (retried).",
       .series = {&em.flush_failures}},
      {MW_METRIC_COUNTER, "memwald_fences_total", "Shards fenced by a newer epoch.", .series = {&em.fences}},
      {MW_METRIC_HISTOGRAM, "memwald_flush_seconds", "Time from flush start to manifest commit.",
       .series = {&em.flush_s}, .family = &em.flush_fam, .bounds = b, .n_bounds = sizeof b / sizeof b[0]},
      {MW_METRIC_COUNTER, "memwald_shard_recoveries_total",
       "Fault episodes ended by the engine itself: kind=reclaim (a FAILED shard claimed again), "
       "kind=flush (a flush committed after failed attempts).",
       "kind", {"reclaim", "flush"}, {&em.recovered_reclaim, &em.recovered_flush}},
  };
  mw_metric_def_t states = {MW_METRIC_GAUGE, "memwald_shards", "Shards by engine state.", "state"};
  _Static_assert(sizeof state_names / sizeof *state_names == MW_SS_FAILED + 1, "a name per state");
  _Static_assert(MW_SS_FAILED + 1 <= MW_METRIC_DEF_MAX_VALUES, "a series per state");
  for (int i = 0; i <= MW_SS_FAILED; i++) {
    states.values[i] = state_names[i];
    states.series[i] = &em.states[i];
  }
  mw_metrics_t *m = mw_metrics_default();
  enum { BEFORE_REFUSED = 7 }; /* the registry renders in registration order: kept as it was */
  mw_metrics_register_defs(m, defs, BEFORE_REFUSED);
  em.refused = mw_flush_refused_metric("flush");
  mw_metrics_register_defs(m, defs + BEFORE_REFUSED, sizeof defs / sizeof *defs - BEFORE_REFUSED);
  mw_metrics_register_defs(m, &states, 1);
  em.ready = true;
}

static void count(mw_metric_t *m, uint64_t n) {
  if (m) mw_counter_add(m, n);
}

/* The shard's state machine (shard.h): whether `to` may follow `from`.
 * NEW -> CLAIMING -> REPLAYING -> ACTIVE; a parked state (FENCED, SEALED,
 * CLOSED, FAILED) may follow any; a claim starts again from NEW or a parked
 * state other than SEALED, which goes back to NEW by an unseal first. */
static bool may_follow(mw_shard_state_t from, mw_shard_state_t to) {
  switch (to) {
    case MW_SS_NEW: return from == MW_SS_SEALED;
    case MW_SS_CLAIMING: return from == MW_SS_NEW || (from >= MW_SS_FENCED && from != MW_SS_SEALED);
    case MW_SS_REPLAYING: return from == MW_SS_CLAIMING;
    case MW_SS_ACTIVE: return from == MW_SS_REPLAYING;
    default: return to >= MW_SS_FENCED;
  }
}

/* Every state change goes through here (memwald_shards{state}). */
static void set_state(mw_shard_t *s, mw_shard_state_t st) {
  assert(st <= MW_SS_FAILED);
  assert(s->state <= MW_SS_FAILED);
  assert(may_follow(s->state, st));
  if (em.states[s->state]) mw_gauge_add(em.states[s->state], -1);
  if (em.states[st]) mw_gauge_add(em.states[st], 1);
  s->state = st;
}

static void mt_bytes_add(double delta) {
  if (em.mt_bytes && delta != 0) mw_gauge_add(em.mt_bytes, delta);
}

static mw_shard_mt_t *mt_new(mw_shard_t *s, uint64_t gen) {
  assert(gen >= 1);
  mw_shard_mt_t *mt = calloc(1, sizeof *mt);
  if (mt == NULL) return NULL;
  if (mw_memtable_init(&mt->m, s->schema, gen) < 0) {
    free(mt);
    return NULL;
  }
  return mt;
}

static void mt_free(mw_shard_mt_t *mt) {
  if (mt == NULL) return;
  mt_bytes_add(-(double)mt->m.in_memory_bytes);
  mw_memtable_free(&mt->m);
  free(mt);
}

static uint64_t unflushed_bytes(const mw_shard_t *s) {
  assert(s->n_frozen <= MW_SHARD_MAX_FROZEN);
  uint64_t n = s->active ? (uint64_t)s->active->m.in_memory_bytes : 0;
  for (uint32_t i = 0; i < s->n_frozen; i++) n += (uint64_t)s->frozen[i]->m.in_memory_bytes;
  return n;
}

/* Free every MemTable not in use by a running flush. */
static void drop_memtables(mw_shard_t *s) {
  assert(s->n_frozen <= MW_SHARD_MAX_FROZEN);
  mt_free(s->active);
  s->active = NULL;
  uint32_t keep = s->flush.busy && s->n_frozen > 0 ? 1 : 0;
  for (uint32_t i = keep; i < s->n_frozen; i++) mt_free(s->frozen[i]);
  s->n_frozen = keep;
  assert(!s->flush.busy || s->n_frozen <= 1); /* a running flush keeps the MemTable it reads */
}

/* ------------------------------------------------------------- completions */

static void on_kick(uv_timer_t *t);

static void kick(mw_shard_t *s) {
  if (!s->closing) uv_timer_start(&s->kick, on_kick, 0, 0);
}

static void complete(mw_shard_t *s, mw_shard_write_t *w, int status) {
  assert(w != NULL);
  assert(status <= 0);
  w->status = status;
  w->next = NULL;
  if (s->done_tail) s->done_tail->next = w;
  else s->done_head = w;
  s->done_tail = w;
  kick(s);
}

static void ctl_done(mw_shard_t *s, int status, const char *reason) {
  if (s->ctl == CTL_NONE) return;
  assert(!s->ctl_pending_done); /* one control at a time: its answer is not queued yet */
  s->ctl = CTL_NONE;
  s->ctl_status = status;
  snprintf(s->ctl_reason, sizeof s->ctl_reason, "%s", reason ? reason : "");
  s->ctl_pending_done = true;
  kick(s);
}

/* The flush queued behind a running one (mw_shard_flush) starts once no
 * control runs; refused then (the shard parked or closing), it answers. */
static void start_next_flush(mw_shard_t *s) {
  if (s->flush_next_cb == NULL) return;
  if (s->ctl != CTL_NONE || s->ctl_pending_done) return; /* a callback began a control */
  mw_shard_done_cb cb = s->flush_next_cb;
  void *arg = s->flush_next_arg;
  s->flush_next_cb = NULL;
  s->flush_next_arg = NULL;
  int rc = mw_shard_flush(s, cb, arg);
  assert(s->flush_next_cb == NULL); /* no control ran: it began or was refused, never queued */
  assert(rc != -EBUSY);
  if (rc < 0) cb(s, rc, s->reason[0] ? s->reason : mw_strerror(rc), arg);
}

static void on_kick(uv_timer_t *t) {
  mw_shard_t *s = t->data;
  while (s->done_head) {
    mw_shard_write_t *w = s->done_head;
    s->done_head = w->next;
    if (s->done_head == NULL) s->done_tail = NULL;
    const char *reason = NULL;
    if (w->status != 0) reason = s->reason[0] ? s->reason : mw_strerror(w->status);
    w->cb(w, w->status, reason);
  }
  if (s->ctl_pending_done) {
    s->ctl_pending_done = false;
    mw_shard_done_cb cb = s->ctl_cb;
    s->ctl_cb = NULL;
    if (cb) cb(s, s->ctl_status, s->ctl_status ? s->ctl_reason : NULL, s->ctl_arg);
  }
  start_next_flush(s);
}

/* ------------------------------------------------------------------ parking */

/* Writes whose WAL entry is still being written when the shard parks are
 * kept: the put may land, and then the next owner replays those rows, so
 * they must be acknowledged, not refused (on_wal_late answers them). The
 * ack list is in seq order, so the kept ones are a prefix. */
static void fail_writes(mw_shard_t *s, int status) {
  uint64_t keep = s->wal_ready && s->wal.failed ? mw_wal_unresolved_seq(&s->wal) : 0;
  mw_shard_write_t *last_kept = NULL, *w = s->ack_head;
  while (w && w->seq <= keep) {
    last_kept = w;
    w = w->next;
  }
  if (last_kept) last_kept->next = NULL;
  else s->ack_head = NULL;
  s->ack_tail = last_kept;
  while (w) {
    mw_shard_write_t *next = w->next;
    s->n_waiting--;
    complete(s, w, status);
    w = next;
  }
  while (s->q_head) {
    w = s->q_head;
    s->q_head = w->next;
    s->n_queued--;
    mw_batch_free(&w->batch);
    complete(s, w, status);
  }
  s->q_tail = NULL;
  assert(s->n_queued == 0);
  assert(s->ack_head != NULL || s->n_waiting == 0);
}

static void set_bp(mw_shard_t *s, bool on) {
  if (s->backpressured == on) return;
  s->backpressured = on;
  uint64_t now = uv_now(s->loop);
  if (on && (s->bp_logged_ms == 0 || now - s->bp_logged_ms >= MW_SHARD_BP_LOG_INTERVAL_MS)) {
    mw_log_warn("shard %s: backpressure on (%" PRIu64 " unflushed bytes > %" PRIu64 ")", s->id_str,
                unflushed_bytes(s), s->cfg.max_unflushed_memtable_bytes);
    s->bp_logged_ms = now ? now : 1;
  } else {
    mw_log_debug("shard %s: backpressure %s", s->id_str, on ? "on" : "off");
  }
  if (s->on_backpressure) s->on_backpressure(s, on);
}

static void arm_timer(mw_shard_t *s);

/* s->reason for a FAILED shard: the error and when the engine tries again
 * (refreshed whenever a write is refused, so the figure stays current). */
static void fault_reason(mw_shard_t *s) {
  if (s->state != MW_SS_FAILED || s->fault.status == 0) return;
  if (s->reclaim_at_ms == 0) {
    snprintf(s->reason, sizeof s->reason, "%s", s->fault.error);
    return;
  }
  uint64_t now = uv_now(s->loop);
  uint64_t left = s->reclaim_at_ms > now ? s->reclaim_at_ms - now : 0;
  const char *name = mw_errno_name(s->fault.status);
  snprintf(s->reason, sizeof s->reason,
           "%.380s (storage error %s; not acknowledged; retrying: automatic re-claim in %" PRIu64
           " ms)",
           s->fault.error, name, left);
}

/* Open or continue a fault episode for a shard that just parked FAILED
 * (prev = the state it failed in) and schedule the automatic re-claim. */
static void fault_failed(mw_shard_t *s, mw_shard_state_t prev, int status) {
  uint64_t now = uv_now(s->loop);
  bool again = s->auto_claim && s->fault.status != 0 && strcmp(s->fault.op, "flush") != 0;
  if (!again) {
    memset(&s->fault, 0, sizeof s->fault);
    s->fault.since_ms = now ? now : 1;
    snprintf(s->fault.op, sizeof s->fault.op, "%s",
             prev == MW_SS_CLAIMING ? "claim" : prev == MW_SS_REPLAYING ? "replay" : "wal");
  } else {
    s->fault.retries++;
  }
  s->auto_claim = false;
  s->fault.status = status < 0 ? status : -EIO;
  snprintf(s->fault.error, sizeof s->fault.error, "%s", s->reason);
  s->reclaim_at_ms = 0;
  s->fault.next_retry_ms = 0;
  uint64_t cap = s->cfg.max_fault_retry_interval_ms;
  if (cap > 0 && !s->closing) {
    uint64_t base = cap < MW_SHARD_RECLAIM_BASE_MS ? cap : MW_SHARD_RECLAIM_BASE_MS;
    uint32_t shift = s->fault.retries < 20 ? s->fault.retries : 20;
    uint64_t delay = base << shift;
    if (delay > cap) delay = cap;
    s->reclaim_at_ms = now + delay;
    s->fault.next_retry_ms = s->reclaim_at_ms;
    arm_timer(s);
  }
  fault_reason(s);
}

static void park(mw_shard_t *s, mw_shard_state_t st, int status, const char *reason) {
  assert(st >= MW_SS_FENCED);
  bool was_parked = s->state >= MW_SS_FENCED;
  if (was_parked && s->state != MW_SS_CLOSED && st != MW_SS_CLOSED) return; /* first reason wins */
  mw_shard_state_t prev = s->state;
  set_state(s, st);
  s->park_status = status;
  snprintf(s->reason, sizeof s->reason, "%s", reason ? reason : "");
  if (st == MW_SS_FENCED) count(em.fences, 1);
  if (st == MW_SS_FAILED) {
    bool again = s->auto_claim && s->fault.status != 0;
    fault_failed(s, prev, status);
    if (again) /* one line per failed attempt; attempts back off (1 s doubling) */
      mw_log_warn("shard %s: automatic re-claim %u failed: %s", s->id_str, s->fault.retries,
                  s->reason);
    else
      mw_log_err("shard %s: FAILED: %s", s->id_str, s->reason);
  } else {
    s->auto_claim = false;
    s->reclaim_at_ms = 0;
    memset(&s->fault, 0, sizeof s->fault);
  }
  if (st == MW_SS_FENCED)
    mw_log_err("shard %s: %s: %s", s->id_str, mw_shard_state_name(st), s->reason);
  else if (st != MW_SS_FAILED)
    mw_log_notice("shard %s: %s%s%s", s->id_str, mw_shard_state_name(st), s->reason[0] ? ": " : "",
                  s->reason);
  if ((st == MW_SS_FENCED || st == MW_SS_FAILED) && s->wal_ready && !s->wal.failed)
    mw_wal_fail(&s->wal, status ? status : -EIO, s->reason);
  fail_writes(s, status ? status : -ESHUTDOWN);
  if (s->replay_waiting) {
    s->replay_waiting = false;
    mw_wal_reader_clear(&s->reader);
  }
  drop_memtables(s);
  s->stopping = false;
  set_bp(s, false);
  if (!s->claim_checking) ctl_done(s, status, s->reason); /* else on_claim_checked claims */
}

/* ------------------------------------------------------------------- flush */

static void maybe_flush(mw_shard_t *s);
static void progress(mw_shard_t *s);
static void insert_replayed(mw_shard_t *s);
static void admit(mw_shard_t *s);

static void update_bp(mw_shard_t *s);

/* Flush retries back off from 100 ms, doubling, to at most 10 s. */
#define FLUSH_RETRY_BASE_MS 100
#define FLUSH_RETRY_MAX_MS 10000

static void on_timer(uv_timer_t *t);

/* Arm the housekeeping timer for the nearest deadline (age bound, retry). */
static void arm_timer(mw_shard_t *s) {
  if (s->closing) return;
  uint64_t next = 0;
  if (s->active_since_ms && s->cfg.max_memtable_age_ms)
    next = s->active_since_ms + s->cfg.max_memtable_age_ms;
  if (s->flush_retry_at_ms && (next == 0 || s->flush_retry_at_ms < next)) next = s->flush_retry_at_ms;
  if (s->reclaim_at_ms && (next == 0 || s->reclaim_at_ms < next)) next = s->reclaim_at_ms;
  if (s->claim_retry_at_ms && (next == 0 || s->claim_retry_at_ms < next)) next = s->claim_retry_at_ms;
  if (next == 0) {
    uv_timer_stop(&s->timer);
    return;
  }
  uint64_t now = uv_now(s->loop);
  uv_timer_start(&s->timer, on_timer, next > now ? next - now : 0, 0);
}

/* Called after rows land in the active MemTable: start its age clock. */
static void note_rows(mw_shard_t *s) {
  if (s->active == NULL || s->active->m.n_rows == 0 || s->active_since_ms != 0) return;
  s->active_since_ms = uv_now(s->loop);
  if (s->active_since_ms == 0) s->active_since_ms = 1;
  arm_timer(s);
}

static void freeze_active(mw_shard_t *s) {
  mw_shard_mt_t *mt = s->active;
  if (mt == NULL || mt->m.n_rows == 0) return;
  if (s->n_frozen >= MW_SHARD_MAX_FROZEN) return; /* the flusher is behind; backpressure holds */
  assert(s->state == MW_SS_ACTIVE || s->state == MW_SS_REPLAYING); /* parked: no MemTable left */
  mw_shard_mt_t *next = mt_new(s, mt->m.generation + 1);
  if (next == NULL) {
    park(s, MW_SS_FAILED, -ENOMEM, "out of memory freezing the MemTable");
    return;
  }
  if (s->wal_ready) mw_wal_flush(&s->wal);
  mt->m.frozen = true;
  s->frozen[s->n_frozen++] = mt;
  s->active = next;
  s->active_since_ms = 0;
  arm_timer(s);
  mw_log_debug("shard %s: froze generation %" PRIu64 " (%" PRId64 " rows)", s->id_str,
               mt->m.generation, mt->m.n_rows);
  maybe_flush(s);
}

/* A failed flush attempt (not fenced, shard not parked or closing): keep
 * the frozen MemTable (its rows stay readable and in the WAL) and try again
 * later; nothing was committed, so no manifest points at the partial
 * SSTable directory (and a refused read-back put nothing at all). */
static void flush_retry_later(mw_shard_t *s, const mw_flush_t *f, int status) {
  assert(status < 0);
  assert(s->state < MW_SS_FENCED); /* a parked shard does not retry */
  s->flush_failures++;
  count(em.flush_failures, 1);
  if (f->refused) count(em.refused, 1);
  uint32_t shift = s->flush_failures - 1 < 7 ? s->flush_failures - 1 : 7;
  uint64_t delay = (uint64_t)FLUSH_RETRY_BASE_MS << shift;
  uint64_t cap = FLUSH_RETRY_MAX_MS;
  if (s->cfg.max_fault_retry_interval_ms > 0 && s->cfg.max_fault_retry_interval_ms < cap)
    cap = s->cfg.max_fault_retry_interval_ms;
  if (delay > cap) delay = cap;
  if (s->fault.status == 0) {
    memset(&s->fault, 0, sizeof s->fault);
    s->fault.since_ms = uv_now(s->loop) ? uv_now(s->loop) : 1;
    snprintf(s->fault.op, sizeof s->fault.op, "flush");
  }
  s->fault.status = status;
  s->fault.retries = s->flush_failures - 1;
  snprintf(s->fault.error, sizeof s->fault.error, "%s", f->err.msg[0] ? f->err.msg : mw_strerror(status));
  s->fault.next_retry_ms = uv_now(s->loop) + delay;
  mw_log_warn("shard %s: flush of generation %" PRIu64 " failed (attempt %u): %s; retrying in "
              "%" PRIu64 " ms", s->id_str, s->n_frozen ? s->frozen[0]->m.generation : 0,
              s->flush_failures, f->err.msg[0] ? f->err.msg : mw_strerror(status), delay);
  s->flush_retry_at_ms = uv_now(s->loop) + delay;
  arm_timer(s);
  update_bp(s);
  progress(s);
}

static void on_flush_done(mw_flush_t *f, int status) {
  mw_shard_t *s = f->data;
  bool parked = s->state >= MW_SS_FENCED;
  if (status < 0 && status != -ESTALE && !parked && !s->closing) {
    flush_retry_later(s, f, status);
    return;
  }
  if (status == 0) {
    if (s->flush_failures > 0) {
      mw_log_notice("shard %s: flush succeeded after %u failed attempt(s); fault cleared after "
                    "%" PRIu64 " ms", s->id_str, s->flush_failures,
                    s->fault.since_ms ? uv_now(s->loop) - s->fault.since_ms : 0);
      count(em.recovered_flush, 1);
      s->recoveries++;
      if (strcmp(s->fault.op, "flush") == 0) memset(&s->fault, 0, sizeof s->fault);
    }
    s->flush_failures = 0;
  }
  if (status < 0 && !parked) {
    park(s, status == -ESTALE ? MW_SS_FENCED : MW_SS_FAILED, status, f->err.msg);
    parked = true;
  }
  if (s->n_frozen > 0) {
    mt_free(s->frozen[0]);
    memmove(s->frozen, s->frozen + 1, (s->n_frozen - 1) * sizeof *s->frozen);
    s->n_frozen--;
  }
  if (parked) {
    drop_memtables(s);
    progress(s);
    return;
  }
  s->flushes++;
  count(em.flushes, 1);
  if (em.flush_s)
    mw_histogram_observe(em.flush_s, em.flush_fam,
                         (double)(uv_now(s->loop) - s->flush_started_ms) / 1000.0);
  if (s->replay_waiting) {
    s->replay_waiting = false;
    insert_replayed(s);
  }
  update_bp(s);
  admit(s);
  maybe_flush(s);
  progress(s);
}

static int start_claim(mw_shard_t *s);

/* The automatic re-claim of a FAILED shard (fault_failed scheduled it). */
static void auto_reclaim(mw_shard_t *s) {
  s->reclaim_at_ms = 0;
  if (s->state != MW_SS_FAILED || s->closing) return;
  if (s->ctl != CTL_NONE || s->ctl_pending_done || mw_wal_busy(&s->wal) || s->flush.busy ||
      s->op.busy) {
    /* an operator's command or the failed I/O is still finishing */
    s->reclaim_at_ms = uv_now(s->loop) + 100;
    s->fault.next_retry_ms = s->reclaim_at_ms;
    return;
  }
  mw_log_info("shard %s: automatic re-claim (attempt %u, %s for %" PRIu64 " ms)", s->id_str,
              s->fault.retries + 1, mw_errno_name(s->fault.status),
              uv_now(s->loop) - s->fault.since_ms);
  s->fault.next_retry_ms = 0;
  int rc = start_claim(s);
  if (rc < 0) {
    /* start_claim left it FAILED; try again later */
    s->auto_claim = true;
    mw_shard_state_t prev = MW_SS_CLAIMING;
    fault_failed(s, prev, rc);
    return;
  }
  s->auto_claim = true;
}

static void retry_claim(mw_shard_t *s);

static void on_timer(uv_timer_t *t) {
  mw_shard_t *s = t->data;
  uint64_t now = uv_now(s->loop);
  if (s->reclaim_at_ms && now >= s->reclaim_at_ms) auto_reclaim(s);
  if (s->claim_retry_at_ms && now >= s->claim_retry_at_ms) retry_claim(s);
  if (s->flush_retry_at_ms && now >= s->flush_retry_at_ms) {
    s->flush_retry_at_ms = 0;
    maybe_flush(s);
  }
  if (s->active_since_ms && s->cfg.max_memtable_age_ms &&
      now >= s->active_since_ms + s->cfg.max_memtable_age_ms) {
    if (s->state == MW_SS_ACTIVE && !s->stopping && !s->hold_age_flush &&
        s->n_frozen < MW_SHARD_MAX_FROZEN) {
      mw_log_debug("shard %s: MemTable reached max_memtable_age_ms", s->id_str);
      freeze_active(s); /* resets active_since_ms */
    } else {
      s->active_since_ms = now; /* cannot freeze now (flusher behind, parked): look again */
    }
  }
  arm_timer(s);
}

static void maybe_flush(mw_shard_t *s) {
  if (s->flush.busy || s->n_frozen == 0 || s->flush_retry_at_ms != 0) return;
  if (s->state != MW_SS_ACTIVE && s->state != MW_SS_REPLAYING) return;
  if (s->ctl == CTL_SEAL || s->ctl == CTL_ABORT) return; /* no new flushes */
  mw_shard_mt_t *mt = s->frozen[0];
  assert(mt->m.frozen); /* only a frozen MemTable is flushed: no row lands in it meanwhile */
  if (mt->seq_last > s->durable_seq) return; /* on_durable calls again */
  uint64_t covered = mt->m.last_wal_position > mt->covered ? mt->m.last_wal_position : mt->covered;
  s->flush_started_ms = uv_now(s->loop);
  int rc = mw_flush_start(&s->flush, &mt->m, s->epoch, covered, on_flush_done);
  if (rc < 0) park(s, rc == -ESTALE ? MW_SS_FENCED : MW_SS_FAILED, rc,
                   s->flush.op.err.msg[0] ? s->flush.op.err.msg : "flush could not start");
}

/* --------------------------------------------------------------- write path */

static void update_bp(mw_shard_t *s) {
  bool on = s->cfg.max_unflushed_memtable_bytes > 0 &&
            unflushed_bytes(s) > s->cfg.max_unflushed_memtable_bytes;
  if (on && s->n_frozen == 0) freeze_active(s); /* give the flusher something to free */
  set_bp(s, on);
}

static mw_memtable_limits_t limits(const mw_shard_t *s) {
  mw_memtable_limits_t l = {(int64_t)s->cfg.max_memtable_rows, (int64_t)s->cfg.max_memtable_size,
                            (int64_t)s->cfg.max_memtable_batches};
  return l;
}

/* A barrier waits on the ack list behind every write inserted so far
 * (seq order is kept: its seq is the newest write's) and cuts the WAL
 * entry now, so a SYNC waits one fsync, not a flush interval. */
static void wait_durable(mw_shard_t *s, mw_shard_write_t *w) {
  assert(w->barrier);
  assert(s->state < MW_SS_FENCED);
  if (s->durable_seq >= s->seq) {
    complete(s, w, 0);
    return;
  }
  w->seq = s->seq;
  w->next = NULL;
  if (s->ack_tail) s->ack_tail->next = w;
  else s->ack_head = w;
  s->ack_tail = w;
  s->n_waiting++;
  if (s->wal_ready) mw_wal_flush(&s->wal);
}

static void insert(mw_shard_t *s, mw_shard_write_t *w) {
  assert(s->state == MW_SS_ACTIVE);
  assert(s->active != NULL);
  if (w->barrier) {
    wait_durable(s, w);
    return;
  }
  int64_t rows = w->batch.n_rows;
  if (rows == 0) {
    mw_batch_free(&w->batch);
    complete(s, w, 0);
    return;
  }
  mw_err_t err = {0};
  mw_memtable_t *m = &s->active->m;
  int64_t before = m->in_memory_bytes;
  /* an ARROW frame's record batch messages go to the WAL, not the MemTable */
  mw_buf_t ipc = w->batch.wal_ipc;
  size_t ipc_head = w->batch.wal_ipc_head;
  mw_buf_init(&w->batch.wal_ipc);
  w->batch.wal_ipc_head = 0;
  int rc = mw_memtable_append(m, &w->batch, 0, &err);
  if (rc == 0) mt_bytes_add((double)(m->in_memory_bytes - before));
  if (rc < 0) {
    mw_log_warn("shard %s: write refused: %s", s->id_str, err.msg);
    mw_buf_free(&ipc);
    mw_batch_free(&w->batch);
    complete(s, w, rc);
    return;
  }
  w->seq = ++s->seq;
  s->active->seq_last = w->seq;
  s->rows_acked += (uint64_t)rows;
  if (!s->cfg.durable_write) {
    s->writes_acked++;
    complete(s, w, 0);
  } else {
    w->next = NULL;
    if (s->ack_tail) s->ack_tail->next = w;
    else s->ack_head = w;
    s->ack_tail = w;
    s->n_waiting++;
  }
  rc = mw_wal_add_ipc(&s->wal, &m->batches[m->n_batches - 1], w->seq, m->generation, &ipc,
                      ipc_head);
  mw_buf_free(&ipc); /* when refused */
  if (rc < 0) {
    if (s->state < MW_SS_FENCED) park(s, MW_SS_FAILED, rc, "WAL refused a batch");
    return;
  }
  note_rows(s);
  mw_memtable_limits_t l = limits(s);
  if (mw_memtable_full(m, &l)) freeze_active(s);
  update_bp(s);
}

static void admit(mw_shard_t *s) {
  while (s->q_head && s->state == MW_SS_ACTIVE && !s->stopping && !s->backpressured) {
    mw_shard_write_t *w = s->q_head;
    s->q_head = w->next;
    if (s->q_head == NULL) s->q_tail = NULL;
    s->n_queued--;
    insert(s, w);
  }
}

static int check_batch(const mw_shard_t *s, const mw_batch_t *b) {
  if (b->schema != s->schema && !mw_schema_equal(b->schema, s->schema)) return -EINVAL;
  if (mw_batch_validate(b) < 0) return -EINVAL;
  /* one WAL entry must hold it: stay well inside the storage object limit */
  if ((uint64_t)mw_batch_lance_bytes(b) > MW_SHARD_MAX_BATCH_BYTES) return -EFBIG;
  for (size_t i = 0; i < s->schema->n_fields; i++)
    if (!s->schema->fields[i].nullable && b->cols[i].null_count > 0) return -EINVAL;
  return 0;
}

static int start_claim(mw_shard_t *s);

int mw_shard_write(mw_shard_t *s, mw_shard_write_t *w, mw_batch_t *batch, mw_shard_write_cb cb) {
  assert(s != NULL);
  assert(w != NULL);
  assert(batch != NULL);
  assert(cb != NULL);
  if (s->closing) return -ESHUTDOWN;
  if (s->state >= MW_SS_FENCED) {
    fault_reason(s); /* "... retrying in N ms" stays current */
    return s->park_status ? s->park_status : -ESHUTDOWN;
  }
  if (s->stopping) return s->ctl == CTL_SEAL ? -EROFS : -ESHUTDOWN;
  int rc = check_batch(s, batch);
  if (rc < 0) return rc;
  bool must_queue = s->state != MW_SS_ACTIVE || s->backpressured || s->q_head != NULL;
  if (must_queue && s->n_queued >= s->cfg.max_queued_writes) return -EAGAIN;
  if (s->state == MW_SS_NEW) {
    rc = start_claim(s); /* lazy claim: the first write starts it */
    if (rc < 0) return rc;
  }
  w->shard = s;
  w->cb = cb;
  w->batch = *batch;
  w->batch.schema = s->schema;
  memset(batch, 0, sizeof *batch);
  w->status = 0;
  w->barrier = false;
  w->next = NULL;
  if (!must_queue) {
    insert(s, w);
    return 0;
  }
  if (s->q_tail) s->q_tail->next = w;
  else s->q_head = w;
  s->q_tail = w;
  s->n_queued++;
  return 0;
}

int mw_shard_sync(mw_shard_t *s, mw_shard_write_t *w, mw_shard_write_cb cb) {
  assert(s != NULL);
  assert(w != NULL);
  assert(cb != NULL);
  if (s->closing) return -ESHUTDOWN;
  memset(&w->batch, 0, sizeof w->batch);
  w->shard = s;
  w->cb = cb;
  w->status = 0;
  w->barrier = true;
  w->next = NULL;
  if (s->q_head == NULL && s->durable_seq >= s->seq) {
    complete(s, w, 0); /* everything inserted is durable (or nothing was) */
    return 0;
  }
  if (s->state >= MW_SS_FENCED) {
    fault_reason(s);
    return s->park_status ? s->park_status : -ESHUTDOWN;
  }
  if (s->q_head == NULL) {
    wait_durable(s, w);
    return 0;
  }
  if (s->n_queued >= s->cfg.max_queued_writes) return -EAGAIN;
  s->q_tail->next = w;
  s->q_tail = w;
  s->n_queued++;
  return 0;
}

/* WAL callbacks */
static void on_durable(mw_wal_t *wal, uint64_t position, uint64_t seq_last) {
  mw_shard_t *s = wal->data;
  assert(seq_last >= s->durable_seq);
  s->durable_seq = seq_last;
  count(em.wal_entries, 1);
  count(em.wal_bytes, wal->bytes_written - s->wal_bytes_counted);
  s->wal_bytes_counted = wal->bytes_written;
  const uint64_t path[4] = {wal->passed_through, wal->passed_bytes, wal->encoded, wal->encoded_bytes};
  for (size_t i = 0; i < 4; i++) {
    assert(path[i] >= s->wal_path_counted[i]);
    count(em.wal_path[i], path[i] - s->wal_path_counted[i]);
    s->wal_path_counted[i] = path[i];
  }
  mw_shard_mt_t *mt = s->active;
  for (uint32_t i = 0; i < s->n_frozen; i++)
    if (s->frozen[i]->seq_last >= seq_last) {
      mt = s->frozen[i];
      break;
    }
  if (mt != NULL && position >= mt->m.last_wal_position) mw_memtable_cover(&mt->m, position);
  while (s->ack_head && s->ack_head->seq <= seq_last) {
    mw_shard_write_t *w = s->ack_head;
    s->ack_head = w->next;
    if (s->ack_head == NULL) s->ack_tail = NULL;
    s->n_waiting--;
    if (!w->barrier) s->writes_acked++;
    complete(s, w, 0);
  }
  maybe_flush(s);
  progress(s);
}

/* The outcome of an entry that was being written when the log failed
 * (wal.h): landed -> its writes are durable (the next owner replays it),
 * acknowledge them; else refuse them with the park reason. */
static void on_wal_late(mw_wal_t *wal, uint64_t position, uint64_t seq_last, int status) {
  mw_shard_t *s = wal->data;
  assert(wal->failed);
  uint32_t n = 0;
  if (status == 0 && seq_last > s->durable_seq) s->durable_seq = seq_last;
  while (s->ack_head && s->ack_head->seq <= seq_last) {
    mw_shard_write_t *w = s->ack_head;
    s->ack_head = w->next;
    if (s->ack_head == NULL) s->ack_tail = NULL;
    s->n_waiting--;
    if (status == 0 && !w->barrier) s->writes_acked++;
    n += !w->barrier;
    complete(s, w, status == 0 ? 0 : s->park_status ? s->park_status : status);
  }
  if (status == 0) {
    count(em.wal_entries, 1);
    mw_log_notice("shard %s: WAL entry %" PRIu64 " landed after the shard stopped (%s): its %u writes "
                  "are acknowledged; the next owner replays it", s->id_str, position,
                  mw_shard_state_name(s->state), n);
  }
}

static void on_wal_failed(mw_wal_t *wal, int status, const char *reason) {
  mw_shard_t *s = wal->data;
  if (s->state >= MW_SS_FENCED) return;
  char msg[MW_SHARD_REASON_BYTES];
  snprintf(msg, sizeof msg, "%s", reason);
  park(s, status == -ESTALE ? MW_SS_FENCED : MW_SS_FAILED, status, msg);
}

/* ------------------------------------------------------------- claim/replay */

static void replay_next(mw_shard_t *s);

static void become_active(mw_shard_t *s, uint64_t hole) {
  assert(s->state == MW_SS_REPLAYING); /* replay read past the last entry */
  assert(s->active != NULL);
  assert(hole >= 1);
  set_state(s, MW_SS_ACTIVE);
  s->reason[0] = '\0';
  s->park_status = 0;
  if (s->auto_claim && s->fault.status != 0) {
    mw_log_notice("shard %s: recovered by itself: ACTIVE again %" PRIu64 " ms after the fault "
                  "(%s: %s), %u failed re-claim(s) before", s->id_str,
                  uv_now(s->loop) - s->fault.since_ms, s->fault.op,
                  mw_errno_name(s->fault.status),
                  s->fault.retries);
    s->recoveries++;
    count(em.recovered_reclaim, 1);
  }
  s->auto_claim = false;
  s->reclaim_at_ms = 0;
  if (strcmp(s->fault.op, "flush") != 0) memset(&s->fault, 0, sizeof s->fault);
  mw_log_info("shard %s: ACTIVE at epoch %" PRIu64 ", next WAL position %" PRIu64
              ", %" PRId64 " rows replayed",
              s->id_str, s->epoch, hole, s->active->m.n_rows);
  mw_wal_start(&s->wal, hole);
  if (s->on_active != NULL) s->on_active(s);
  mw_memtable_limits_t l = limits(s);
  if (mw_memtable_full(&s->active->m, &l)) freeze_active(s);
  if (s->ctl == CTL_CLAIM || s->ctl == CTL_UNSEAL) ctl_done(s, 0, NULL);
  update_bp(s);
  admit(s);
  progress(s); /* a release that waited for the automatic re-claim */
}

static void insert_replayed(mw_shard_t *s) {
  mw_wal_reader_t *r = &s->reader;
  assert(s->state == MW_SS_REPLAYING);
  assert(r->position == s->replay_pos);
  mw_err_t err = {0};
  for (size_t i = 0; i < r->n_batches; i++) {
    int64_t before = s->active->m.in_memory_bytes;
    int rc = mw_memtable_append(&s->active->m, &r->batches[i], r->position, &err);
    if (rc == 0) mt_bytes_add((double)(s->active->m.in_memory_bytes - before));
    if (rc < 0) {
      char msg[MW_SHARD_REASON_BYTES];
      snprintf(msg, sizeof msg, "replay of WAL entry %" PRIu64 ": %.400s", r->position, err.msg);
      park(s, MW_SS_FAILED, rc, msg);
      return;
    }
  }
  note_rows(s);
  mw_wal_reader_clear(r);
  s->replay_pos++;
  replay_next(s);
}

static void on_replay_read(mw_wal_reader_t *r, int status) {
  mw_shard_t *s = r->data;
  char msg[MW_SHARD_REASON_BYTES];
  if (s->state != MW_SS_REPLAYING) {
    mw_wal_reader_clear(r);
    progress(s);
    return;
  }
  if (status == -ENOENT) {
    become_active(s, r->position);
    return;
  }
  if (status < 0) {
    snprintf(msg, sizeof msg, "replay: %.400s", r->err.msg[0] ? r->err.msg : mw_strerror(status));
    park(s, MW_SS_FAILED, status, msg);
    return;
  }
  if (r->epoch > s->epoch) {
    snprintf(msg, sizeof msg,
             "WAL replay aborted: entry at position %" PRIu64 " has writer_epoch %" PRIu64
             " > our claimed epoch %" PRIu64 " for shard %s",
             r->position, r->epoch, s->epoch, s->id_str);
    mw_wal_reader_clear(r);
    park(s, MW_SS_FENCED, -ESTALE, msg);
    return;
  }
  if (r->epoch < s->replay_max_epoch) {
    /* Written by a fenced writer after a newer claim's sentinel: such an
     * entry was never acknowledged (acks follow positions, and the slot
     * below it was lost to the sentinel), so its rows must not appear. */
    mw_log_warn("shard %s: skipping WAL entry %" PRIu64 " of epoch %" PRIu64
                " written after epoch %" PRIu64 "'s fence (never acknowledged)",
                s->id_str, r->position, r->epoch, s->replay_max_epoch);
    mw_wal_reader_clear(r);
    s->replay_pos++;
    replay_next(s);
    return;
  }
  s->replay_max_epoch = r->epoch;
  if (r->n_batches == 0) { /* a fence sentinel */
    s->replay_pos++;
    replay_next(s);
    return;
  }
  mw_memtable_t *m = &s->active->m;
  mw_memtable_limits_t l = limits(s);
  if (m->n_rows > 0 && (mw_memtable_full(m, &l) ||
                        (l.max_batches > 0 && (int64_t)(m->n_batches + r->n_batches) > l.max_batches))) {
    /* §5: flush the full MemTable first. It covers up to its last entry
     * (Lance says P-1; equal unless sentinels or skipped entries sit in
     * between, which the next replay then simply reads again). */
    freeze_active(s);
    if (s->state != MW_SS_REPLAYING) return;
    s->replay_waiting = true;
    return; /* on_flush_done continues */
  }
  insert_replayed(s);
}

static void replay_next(mw_shard_t *s) {
  assert(s->state == MW_SS_REPLAYING);
  assert(!s->replay_waiting);
  int rc = mw_wal_read(&s->reader, s->replay_pos, on_replay_read);
  if (rc < 0) park(s, MW_SS_FAILED, rc, "replay: WAL read refused");
}

static void start_replay(mw_shard_t *s) {
  assert(s->state == MW_SS_CLAIMING); /* claimed (and fenced): nothing parks a claiming shard */
  assert(s->wal_ready);
  set_state(s, MW_SS_REPLAYING);
  s->replay_pos = s->claimed.replay_after_wal_entry_position + 1;
  s->replay_max_epoch = 0;
  replay_next(s);
}

static void on_fence_written(mw_wal_t *wal, int status, uint64_t position) {
  mw_shard_t *s = wal->data;
  (void)position;
  if (status < 0) {
    char msg[128];
    snprintf(msg, sizeof msg, "fence sentinel: %s", mw_strerror(status));
    park(s, MW_SS_FAILED, status, msg);
    return;
  }
  start_replay(s);
}

static void on_claimed(mw_mstore_op_t *op, int status) {
  mw_shard_t *s = op->data;
  assert(s->state == MW_SS_CLAIMING);
  assert(s->active == NULL); /* start_claim dropped the MemTables */
  if (status < 0) {
    mw_shard_state_t st = status == -EROFS ? MW_SS_SEALED
                          : status == -ESTALE ? MW_SS_FENCED
                                              : MW_SS_FAILED;
    park(s, st, status, op->err.msg);
    return;
  }
  mw_err_t err = {0};
  s->epoch = op->m.writer_epoch;
  int rc = mw_shard_manifest_copy(&s->claimed, &op->m);
  if (rc == 0) rc = mw_wal_begin(&s->wal, s->epoch, &err);
  uint64_t gen = op->m.current_generation ? op->m.current_generation : 1;
  if (rc == 0 && (s->active = mt_new(s, gen)) == NULL) rc = -ENOMEM;
  if (rc < 0) {
    park(s, MW_SS_FAILED, rc, err.msg[0] ? err.msg : "claim: out of memory");
    return;
  }
  s->wal_ready = true;
  s->seq = s->durable_seq = 0;
  if (s->epoch >= 2) {
    rc = mw_wal_fence(&s->wal, s->claimed.wal_entry_position_last_seen, on_fence_written);
    if (rc < 0) park(s, MW_SS_FAILED, rc, "fence sentinel refused");
    return;
  }
  start_replay(s);
}

static int start_claim(mw_shard_t *s) {
  assert(s->state == MW_SS_NEW || s->state >= MW_SS_FENCED); /* never a claim over a live one */
  assert(s->state != MW_SS_SEALED);                          /* an unseal first (on_unsealed) */
  if (mw_wal_busy(&s->wal) || s->flush.busy || s->op.busy) return -EBUSY;
  drop_memtables(s);
  set_state(s, MW_SS_CLAIMING);
  s->reason[0] = '\0';
  s->park_status = 0;
  s->wal_ready = false;
  s->reclaim_at_ms = 0;
  s->auto_claim = false;
  mw_mstore_invalidate(&s->ms);
  int rc = mw_mstore_claim(&s->ms, &s->op, on_claimed);
  if (rc < 0) {
    set_state(s, MW_SS_FAILED);
    s->park_status = rc;
    snprintf(s->reason, sizeof s->reason, "claim refused: %s", mw_strerror(rc));
  }
  return rc;
}

/* ---------------------------------------------------------------- controls */

static int ctl_begin(mw_shard_t *s, int kind, mw_shard_done_cb cb, void *arg) {
  assert(kind > CTL_NONE);
  assert(kind <= CTL_ABORT);
  if (s->closing) return -ESHUTDOWN;
  if (s->ctl != CTL_NONE || s->ctl_pending_done) return -EBUSY;
  s->ctl = kind;
  s->ctl_cb = cb;
  s->ctl_arg = arg;
  return 0;
}

static int seal_update(void *arg, const mw_shard_manifest_t *cur, mw_shard_manifest_t *next,
                       mw_err_t *err) {
  (void)arg, (void)cur, (void)err;
  next->status = MW_SHARD_SEALED;
  return 0;
}

static int unseal_update(void *arg, const mw_shard_manifest_t *cur, mw_shard_manifest_t *next,
                         mw_err_t *err) {
  (void)arg, (void)cur, (void)err;
  next->status = MW_SHARD_ACTIVE;
  return 0;
}

static void on_sealed(mw_mstore_op_t *op, int status) {
  mw_shard_t *s = op->data;
  assert(s->ctl == CTL_SEAL || s->state >= MW_SS_FENCED); /* the seal's own, or parked since */
  if (status < 0) {
    park(s, status == -ESTALE ? MW_SS_FENCED : MW_SS_FAILED, status, op->err.msg);
    return;
  }
  char msg[128];
  snprintf(msg, sizeof msg, "shard %s is sealed (manifest v%" PRIu64 ")", s->id_str, op->m.version);
  park(s, MW_SS_SEALED, -EROFS, msg);
  s->ctl_status = 0; /* the seal itself succeeded */
}

/* Move a stopping shard (seal/release) or a flush along. */
static void progress(mw_shard_t *s) {
  if (s->ctl == CTL_FLUSH) {
    if (s->state >= MW_SS_FENCED) return; /* park() answered */
    if (s->n_frozen == 0 || s->frozen[0]->m.generation > s->ctl_gen) ctl_done(s, 0, NULL);
    return;
  }
  if (!s->stopping || s->state != MW_SS_ACTIVE) return;
  if (!mw_wal_idle(&s->wal)) return;
  /* GC's trim may still be committing a manifest: a stop answers after it
   * (on_manifests_idle calls back here), so nothing of ours lands after. */
  if (s->ctl == CTL_RELEASE) {
    freeze_active(s);
    if (s->n_frozen > 0 || s->flush.busy || s->ms.n_busy > 0) return;
    char msg[96];
    snprintf(msg, sizeof msg, "shard %s released", s->id_str);
    park(s, MW_SS_CLOSED, -ESHUTDOWN, msg);
    s->ctl_status = 0;
    return;
  }
  if (s->ctl == CTL_ABORT && !s->flush.busy && s->ms.n_busy == 0) {
    char msg[96];
    snprintf(msg, sizeof msg, "shard %s aborted (unflushed rows stay in the WAL)", s->id_str);
    park(s, MW_SS_CLOSED, -ESHUTDOWN, msg);
    s->ctl_status = 0;
    return;
  }
  if (s->ctl == CTL_SEAL && !s->flush.busy && !s->op.busy && s->ms.n_busy == 0) {
    int rc = mw_mstore_commit_update(&s->ms, &s->op, s->epoch, seal_update, s, on_sealed);
    if (rc < 0) park(s, rc == -ESTALE ? MW_SS_FENCED : MW_SS_FAILED, rc, s->op.err.msg);
  }
}

/* The shard's manifest store has nothing in flight: a stop that waited for
 * GC's trim (progress) moves on. */
static void on_manifests_idle(void *arg) {
  mw_shard_t *s = arg;
  assert(s != NULL);
  assert(s->ms.n_busy == 0);
  if (s->stopping && !s->closing) progress(s);
}

/* An operator's claim of a shard this process holds ACTIVE. An idle shard
 * learns of a peer's newer epoch only at its next WAL put or manifest commit
 * (§3.5), so the claim asks the manifest now. Still ours: -EALREADY, naming
 * the epoch. Fenced: park FENCED (its writes are refused as at any fence)
 * and claim it back, as a claim of a FENCED shard does. */
#define CLAIM_WAIT_STEP_MS 20
#define CLAIM_WAIT_MAX_MS 30000

static void retry_claim(mw_shard_t *s);

static void on_claim_checked(mw_mstore_op_t *op, int status) {
  mw_shard_t *s = op->data;
  assert(s != NULL);
  assert(op == &s->op);
  assert(s->claim_checking);
  assert(s->ctl == CTL_CLAIM);
  char msg[MW_SHARD_REASON_BYTES];
  if (s->state == MW_SS_ACTIVE && status == 0) {
    s->claim_checking = false;
    snprintf(msg, sizeof msg, "shard %s is already ACTIVE here at epoch %" PRIu64
             " (its manifest shows no newer claim)", s->id_str, s->epoch);
    ctl_done(s, -EALREADY, msg);
    return;
  }
  if (s->state == MW_SS_ACTIVE && status != -ESTALE) { /* no answer: report, change nothing */
    s->claim_checking = false;
    ctl_done(s, status, op->err.msg);
    return;
  }
  /* Fenced, seen here or by a WAL put that parked the shard meanwhile: park
   * (claim_checking keeps park() from answering the claim), claim it back. */
  if (s->state == MW_SS_ACTIVE) park(s, MW_SS_FENCED, -ESTALE, op->err.msg);
  assert(s->state >= MW_SS_FENCED);
  assert(s->ctl == CTL_CLAIM);
  s->claim_checking = false;
  s->claim_retry_until_ms = uv_now(s->loop) + CLAIM_WAIT_MAX_MS;
  retry_claim(s);
}

/* The claim above, once the old epoch's WAL put or flush has finished (each
 * fails on the fence by itself); polled every CLAIM_WAIT_STEP_MS, answered
 * with -EBUSY after CLAIM_WAIT_MAX_MS. */
static void retry_claim(mw_shard_t *s) {
  s->claim_retry_at_ms = 0;
  if (s->ctl != CTL_CLAIM || s->state < MW_SS_FENCED) return;
  int rc = start_claim(s);
  if (rc == 0) return; /* on_replayed answers */
  uint64_t now = uv_now(s->loop);
  if (rc == -EBUSY && now < s->claim_retry_until_ms) {
    s->claim_retry_at_ms = now + CLAIM_WAIT_STEP_MS;
    arm_timer(s);
    return;
  }
  char msg[MW_SHARD_REASON_BYTES];
  snprintf(msg, sizeof msg, "%.300s; the shard is %s and the old epoch's I/O did not finish "
           "within %d ms (%s): claim again", s->reason, mw_shard_state_name(s->state),
           CLAIM_WAIT_MAX_MS, mw_strerror(rc));
  ctl_done(s, rc, msg);
}

static int claim_active(mw_shard_t *s, mw_shard_done_cb cb, void *arg) {
  assert(s->state == MW_SS_ACTIVE);
  assert(!s->claim_checking);
  int rc = ctl_begin(s, CTL_CLAIM, cb, arg); /* -EBUSY: a seal/release/flush is running */
  if (rc < 0) return rc;
  rc = mw_mstore_check_fenced(&s->ms, &s->op, s->epoch, on_claim_checked); /* -EBUSY: op running */
  if (rc < 0) {
    s->ctl = CTL_NONE;
    s->ctl_cb = NULL;
    return rc;
  }
  s->claim_checking = true;
  return 0;
}

int mw_shard_claim(mw_shard_t *s, mw_shard_done_cb cb, void *arg) {
  assert(s != NULL);
  if (s->state == MW_SS_SEALED) return -EROFS;
  if (s->auto_claim && (s->state == MW_SS_CLAIMING || s->state == MW_SS_REPLAYING))
    return ctl_begin(s, CTL_CLAIM, cb, arg); /* the automatic re-claim answers it */
  if (s->state == MW_SS_ACTIVE) return claim_active(s, cb, arg);
  if (s->state >= MW_SS_CLAIMING && s->state <= MW_SS_ACTIVE) return -EALREADY;
  int rc = ctl_begin(s, CTL_CLAIM, cb, arg);
  if (rc < 0) return rc;
  fail_writes(s, -ESHUTDOWN);
  rc = start_claim(s);
  if (rc == -EBUSY && s->state >= MW_SS_FENCED) {
    /* Parked with the old epoch's WAL put, flush or manifest commit still
     * in flight (each ends on the fence by itself): wait for it, as the
     * claim of a stale ACTIVE shard does, rather than refuse. */
    s->claim_retry_until_ms = uv_now(s->loop) + CLAIM_WAIT_MAX_MS;
    s->claim_retry_at_ms = uv_now(s->loop) + CLAIM_WAIT_STEP_MS;
    arm_timer(s);
    return 0;
  }
  if (rc < 0) s->ctl = CTL_NONE;
  return rc;
}

int mw_shard_flush(mw_shard_t *s, mw_shard_done_cb cb, void *arg) {
  assert(s != NULL);
  if (s->state != MW_SS_ACTIVE || s->stopping) return s->park_status ? s->park_status : -EINVAL;
  if (s->closing) return -ESHUTDOWN;
  if ((s->ctl == CTL_FLUSH || s->ctl_pending_done) && s->flush_next_cb == NULL) {
    /* a flush runs (recovery's, say) or a control has just answered: this
     * one follows it (start_next_flush) and covers the rows acked by now */
    assert(cb != NULL);
    s->flush_next_cb = cb;
    s->flush_next_arg = arg;
    return 0;
  }
  int rc = ctl_begin(s, CTL_FLUSH, cb, arg);
  if (rc < 0) return rc;
  s->ctl_gen = s->active->m.n_rows > 0 ? s->active->m.generation : s->active->m.generation - 1;
  freeze_active(s);
  progress(s);
  return 0;
}

static int stop(mw_shard_t *s, int kind, mw_shard_done_cb cb, void *arg) {
  /* A release during the automatic re-claim waits for it (then drains and
   * flushes like any release; a failed claim fails the release). */
  bool reclaiming = kind == CTL_RELEASE && s->auto_claim &&
                    (s->state == MW_SS_CLAIMING || s->state == MW_SS_REPLAYING);
  if (s->state != MW_SS_ACTIVE && !reclaiming) return s->park_status ? s->park_status : -EINVAL;
  int rc = ctl_begin(s, kind, cb, arg);
  if (rc < 0) return rc;
  s->stopping = true;
  /* queued (never inserted) writes are refused; inserted ones drain */
  while (s->q_head) {
    mw_shard_write_t *w = s->q_head;
    s->q_head = w->next;
    s->n_queued--;
    if (w->barrier) { /* the refused writes it waited for never count */
      wait_durable(s, w);
      continue;
    }
    mw_batch_free(&w->batch);
    complete(s, w, kind == CTL_SEAL ? -EROFS : -ESHUTDOWN);
  }
  s->q_tail = NULL;
  if (s->state == MW_SS_ACTIVE) mw_wal_flush(&s->wal);
  progress(s);
  return 0;
}

int mw_shard_seal(mw_shard_t *s, mw_shard_done_cb cb, void *arg) {
  assert(s != NULL);
  return stop(s, CTL_SEAL, cb, arg);
}

int mw_shard_release(mw_shard_t *s, mw_shard_done_cb cb, void *arg) {
  assert(s != NULL);
  if (s->state == MW_SS_NEW || s->state == MW_SS_FENCED || s->state == MW_SS_FAILED) {
    int rc = ctl_begin(s, CTL_RELEASE, cb, arg);
    if (rc < 0) return rc;
    park(s, MW_SS_CLOSED, -ESHUTDOWN, "released");
    s->ctl_status = 0;
    return 0;
  }
  return stop(s, CTL_RELEASE, cb, arg);
}

int mw_shard_abort(mw_shard_t *s, mw_shard_done_cb cb, void *arg) {
  assert(s != NULL);
  return stop(s, CTL_ABORT, cb, arg);
}

void mw_shard_hold_age_flush(mw_shard_t *s) {
  assert(s != NULL);
  assert(!s->closing);
  s->hold_age_flush = true;
}

static void on_unsealed(mw_mstore_op_t *op, int status) {
  mw_shard_t *s = op->data;
  assert(s->ctl == CTL_UNSEAL);
  assert(s->state == MW_SS_SEALED); /* a running control keeps every other change out */
  if (status < 0) {
    ctl_done(s, status, op->err.msg);
    return;
  }
  set_state(s, MW_SS_NEW);
  int rc = start_claim(s);
  if (rc < 0) ctl_done(s, rc, s->reason);
}

static void on_unseal_read(mw_mstore_op_t *op, int status) {
  mw_shard_t *s = op->data;
  assert(s->ctl == CTL_UNSEAL);
  assert(s->state == MW_SS_SEALED);
  if (status < 0) {
    ctl_done(s, status, op->err.msg);
    return;
  }
  if (op->m.status != MW_SHARD_SEALED) {
    on_unsealed(op, 0);
    return;
  }
  /* Act as the drop coordinator's rollback: commit ACTIVE under the stored epoch. */
  int rc = mw_mstore_commit_update(&s->ms, &s->op, op->m.writer_epoch, unseal_update, s, on_unsealed);
  if (rc < 0) ctl_done(s, rc, s->op.err.msg);
}

int mw_shard_unseal(mw_shard_t *s, mw_shard_done_cb cb, void *arg) {
  assert(s != NULL);
  if (s->state != MW_SS_SEALED) return -EINVAL;
  int rc = ctl_begin(s, CTL_UNSEAL, cb, arg);
  if (rc < 0) return rc;
  mw_mstore_invalidate(&s->ms);
  rc = mw_mstore_read_latest(&s->ms, &s->op, on_unseal_read);
  if (rc < 0) s->ctl = CTL_NONE;
  return rc;
}

static void on_dropped(mw_storage_req_t *req, int status) {
  mw_shard_t *s = req->data;
  assert(s->ctl == CTL_DROP);
  assert(s->state == MW_SS_SEALED); /* only a sealed shard is dropped */
  if (status < 0) {
    ctl_done(s, status, "drop: delete failed");
    return;
  }
  mw_log_notice("shard %s: dropped (%zu objects)", s->id_str, req->nkeys);
  set_state(s, MW_SS_CLOSED);
  snprintf(s->reason, sizeof s->reason, "shard %s dropped", s->id_str);
  s->park_status = -ESHUTDOWN;
  ctl_done(s, 0, NULL);
}

int mw_shard_drop(mw_shard_t *s, mw_shard_done_cb cb, void *arg) {
  assert(s != NULL);
  if (s->state != MW_SS_SEALED) return -EINVAL;
  int rc = ctl_begin(s, CTL_DROP, cb, arg);
  if (rc < 0) return rc;
  rc = mw_storage_delete_prefix(s->st, &s->dreq, s->ms.shard_dir, on_dropped);
  if (rc < 0) s->ctl = CTL_NONE;
  return rc;
}

/* -------------------------------------------------------------- lifecycle */

int mw_shard_init(mw_shard_t *s, uv_loop_t *loop, mw_storage_t *st, const mw_schema_t *schema,
                  const uint8_t shard_id[16], const mw_shard_config_t *cfg, mw_err_t *err) {
  assert(s != NULL);
  assert(loop != NULL);
  assert(st != NULL);
  assert(schema != NULL);
  assert(cfg != NULL);
  memset(s, 0, sizeof *s);
  metrics_init();
  s->loop = loop;
  s->st = st;
  s->schema = schema;
  s->cfg = *cfg;
  if (schema->n_fields == 0 || strcmp(schema->fields[schema->n_fields - 1].name, "_tombstone") != 0)
    return mw_err_set(err, -EINVAL, "shard: the table schema must end with _tombstone");
  int mrc = mw_memtable_schema_check(schema, err);
  if (mrc < 0) return mrc;
  if (s->cfg.durable_write && s->cfg.max_wal_flush_interval_ms == 0 && s->cfg.max_wal_inflight == 0)
    return mw_err_set(err, -EINVAL, "shard: durable_write needs a WAL flush trigger");
  mw_shard_uuid_format(shard_id, s->id_str);
  mw_mstore_init(&s->ms, st, shard_id, cfg->shard_spec_id, cfg->manifest_scan_batch_size);
  s->ms.on_idle = on_manifests_idle;
  s->ms.idle_arg = s;
  mw_mstore_op_init(&s->op);
  s->op.data = s;
  mw_shard_manifest_init(&s->claimed);
  mw_wal_config_t wc = {cfg->max_wal_flush_interval_ms, cfg->max_wal_buffer_size,
                        cfg->max_wal_inflight, cfg->wal_zstd};
  int rc = mw_wal_init(&s->wal, loop, st, &s->ms, schema, 0, &wc, on_durable, on_wal_failed, err);
  if (rc < 0) {
    mw_mstore_free(&s->ms);
    return rc;
  }
  s->wal.on_late = on_wal_late;
  s->wal.data = s;
  mw_wal_reader_init(&s->reader, &s->wal);
  s->reader.data = s;
  mw_flush_init(&s->flush, loop, st, &s->ms, cfg->sstable_zstd);
  s->flush.data = s;
  s->flush.seed = cfg->sstable_seed;
  s->flush.zone_seeds = cfg->zone_write_seeds;
  s->flush.seed_rows_per_zone = cfg->zone_seed_rows_per_zone;
  s->flush.vindexes = s->cfg.vindexes; /* the shard's own copy of the config */
  s->flush.n_vindexes = s->cfg.n_vindexes;
  s->flush.sindexes = s->cfg.sindexes;
  s->flush.n_sindexes = s->cfg.n_sindexes;
  s->flush.skip_readback = cfg->skip_readback;
  mw_storage_req_init(&s->dreq);
  s->dreq.data = s;
  uv_timer_init(loop, &s->kick);
  s->kick.data = s;
  uv_timer_init(loop, &s->timer);
  s->timer.data = s;
  s->state = MW_SS_NEW;
  if (em.states[MW_SS_NEW]) mw_gauge_add(em.states[MW_SS_NEW], 1);
  return 0;
}

static void on_timer_closed(uv_handle_t *h) {
  mw_shard_t *s = h->data;
  assert(s->closing);
  assert(!s->flush.busy);
  if (em.states[s->state]) mw_gauge_add(em.states[s->state], -1);
  mw_shard_manifest_free(&s->claimed);
  mw_mstore_op_free(&s->op);
  mw_mstore_free(&s->ms);
  mw_wal_reader_free(&s->reader);
  mw_flush_free(&s->flush);
  mw_storage_req_cleanup(&s->dreq);
  drop_memtables(s);
  if (s->close_cb) s->close_cb(s);
}

static void on_kick_closed(uv_handle_t *h) {
  mw_shard_t *s = h->data;
  assert(s->closing);
  uv_close((uv_handle_t *)&s->timer, on_timer_closed);
}

static void on_wal_closed(mw_wal_t *w) {
  mw_shard_t *s = w->data;
  assert(s->closing);
  uv_close((uv_handle_t *)&s->kick, on_kick_closed);
}

int mw_shard_close(mw_shard_t *s, void (*cb)(mw_shard_t *s)) {
  assert(s != NULL);
  if (s->closing) return -EALREADY;
  if ((s->state >= MW_SS_CLAIMING && s->state <= MW_SS_ACTIVE) || mw_wal_busy(&s->wal) ||
      s->flush.busy || s->op.busy || s->ctl != CTL_NONE)
    return -EBUSY;
  fail_writes(s, -ESHUTDOWN);
  /* completions still queued run now, before the handles go */
  on_kick(&s->kick);
  s->closing = true;
  s->close_cb = cb;
  uv_timer_stop(&s->kick);
  uv_timer_stop(&s->timer);
  mw_wal_close(&s->wal, on_wal_closed);
  return 0;
}

void mw_shard_stats(const mw_shard_t *s, mw_shard_stats_t *o) {
  assert(s != NULL);
  assert(o != NULL);
  memset(o, 0, sizeof *o);
  o->state = s->state;
  o->epoch = s->epoch;
  o->manifest_version = s->ms.has_cached ? s->ms.cached.version : 0;
  o->replay_after = s->ms.has_cached ? s->ms.cached.replay_after_wal_entry_position : 0;
  o->sstables = s->ms.has_cached ? s->ms.cached.n_sstables : 0;
  o->sealed = s->ms.has_cached && s->ms.cached.status == MW_SHARD_SEALED;
  o->wal_next_position = s->wal.next_position;
  if (s->active) {
    o->generation = s->active->m.generation;
    o->memtable_rows = s->active->m.n_rows;
    o->memtable_bytes = s->active->m.in_memory_bytes;
  }
  o->frozen = s->n_frozen;
  o->backpressured = s->backpressured;
  o->writes_acked = s->writes_acked;
  o->rows_acked = s->rows_acked;
  o->wal_entries = s->wal.entries_written;
  o->wal_batches_passed_through = s->wal.passed_through;
  o->wal_bytes_passed_through = s->wal.passed_bytes;
  o->wal_batches_encoded = s->wal.encoded;
  o->wal_bytes_encoded = s->wal.encoded_bytes;
  o->flushes = s->flushes;
  o->queued_writes = s->n_queued;
  o->waiting_acks = s->n_waiting;
  o->recoveries = s->recoveries;
}
