/*
 * recover.c — see recover.h.
 *
 * One probe per owned shard; each is a small state machine driven by its
 * own storage completions and by the table's recovery timer (for the quiet
 * period and retries):
 *
 *   READ (manifest) -> TIP (HEAD batches from replay_after + 1) -> WAIT
 *     -> READ -> TIP -> same version and tip? -> CLAIM -> FLUSH -> DONE
 *                                   | moved: WAIT again (a peer writes)
 *
 * Sample log of a restart after a crash with 300 acknowledged rows of
 * bucket 2 only in the WAL:
 *   recovery: shard 8e13…: WAL positions 41..43 past replay_after 40, nobody
 *     writing for 2500 ms: claiming it
 *   shard 8e13…: ACTIVE at epoch 5, next WAL position 45, 300 rows replayed
 *   recovery: shard 8e13…: recovered (300 rows flushed)
 */
#include "shard/recover.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "lance/route.h"
#include "lance/shard_manifest.h"
#include "shard/table_int.h"

enum { P_READ = 1, P_TIP, P_OWNER, P_WAIT, P_CLAIM, P_FLUSH, P_DONE };

typedef struct probe {
  mw_recover_t *r;
  uint8_t id[16];
  mw_shard_t *s;
  int phase, look;
  bool busy;                 /* a storage op / control in flight */
  mw_mstore_op_t op;
  mw_storage_req_t reqs[MW_RECOVER_MAX_PROBES];
  uint32_t outstanding, steps;
  int first_err;
  uint64_t base, tip_now;
  uint64_t version[2], tip[2], replay_after;
  uint64_t epoch;            /* the manifest's writer_epoch at the first look */
  uint64_t due_ms;
  char key[MW_RECOVER_MAX_PROBES][256];
} probe_t;

struct mw_recover {
  mw_table_t *t;
  uv_timer_t timer;
  bool timer_open, stopping;
  void (*stop_cb)(void *);
  void *stop_arg;
  probe_t *probes;
  size_t n;
  uint64_t quiet_ms;
  mw_recover_stats_t stats;
};

static void arm(mw_recover_t *r);

static void finish_stop(mw_recover_t *r) {
  if (!r->stopping || r->timer_open || r->stop_cb == NULL) return;
  for (size_t i = 0; i < r->n; i++)
    if (r->probes[i].busy) return;
  void (*cb)(void *) = r->stop_cb;
  r->stop_cb = NULL;
  cb(r->stop_arg);
}

static void done(probe_t *p, const char *why) {
  if (p->phase == P_DONE) return;
  p->phase = P_DONE;
  assert(p->r->stats.pending > 0);
  p->r->stats.pending--;
  if (why) mw_log_info("recovery: shard %s: %s", p->s->id_str, why);
}

static void retry_later(probe_t *p, const char *what, int status) {
  mw_log_warn("recovery: shard %s: %s: %s; looking again in %" PRIu64 " ms", p->s->id_str, what,
              mw_strerror(status), p->r->quiet_ms);
  p->phase = P_WAIT;
  p->look = 0;
  p->due_ms = uv_now(p->r->t->loop) + p->r->quiet_ms;
}

/* ------------------------------------------------------------------ look */

static void on_head(mw_storage_req_t *req, int status);

static void probe_tip(probe_t *p) {
  p->phase = P_TIP;
  p->outstanding = 0;
  p->first_err = 0;
  p->tip_now = 0;
  if (++p->steps > MW_RECOVER_MAX_STEPS) {
    /* a WAL this long past replay_after: treat it as written to right now */
    p->tip_now = UINT64_MAX - p->steps;
    return;
  }
  for (uint32_t i = 0; i < MW_RECOVER_MAX_PROBES; i++) {
    char name[MW_BITREV_NAME_BYTES];
    mw_wal_entry_name(p->base + 1 + i, name, sizeof name);
    snprintf(p->key[i], sizeof p->key[i], "%swal/%s", p->s->ms.shard_dir, name);
    p->reqs[i].data = p;
    int rc = mw_storage_head(p->r->t->st, &p->reqs[i], p->key[i], on_head);
    if (rc < 0) {
      p->first_err = rc;
      break;
    }
    p->outstanding++;
  }
  p->busy = p->outstanding > 0;
}

static void look_done(probe_t *p);

/* One batch of HEADs came back (or none could be sent). */
static void on_head(mw_storage_req_t *req, int status) {
  probe_t *p = req->data;
  uint32_t i = (uint32_t)(req - p->reqs);
  if (status < 0 && status != -ENOENT && p->first_err == 0) p->first_err = status;
  if (status == -ENOENT && (p->tip_now == 0 || p->base + 1 + i < p->tip_now)) p->tip_now = p->base + 1 + i;
  if (--p->outstanding > 0) return;
  p->busy = false;
  if (p->r->stopping) {
    finish_stop(p->r);
    return;
  }
  if (p->first_err < 0) {
    retry_later(p, "WAL probe", p->first_err);
    return;
  }
  if (p->tip_now == 0) { /* all present: further */
    p->base += MW_RECOVER_MAX_PROBES;
    probe_tip(p);
    if (!p->busy && p->first_err < 0) retry_later(p, "WAL probe", p->first_err);
    else if (!p->busy) look_done(p);
    return;
  }
  look_done(p);
}

static void on_read(mw_mstore_op_t *op, int status) {
  probe_t *p = op->data;
  p->busy = false;
  if (p->r->stopping) {
    finish_stop(p->r);
    return;
  }
  if (status == -ENOENT) { /* no manifest: a shard nobody ever claimed */
    p->r->stats.clean++;
    done(p, NULL);
    return;
  }
  if (status < 0) {
    retry_later(p, "manifest read", status);
    return;
  }
  p->version[p->look - 1] = op->m.version;
  if (p->look == 1) p->epoch = op->m.writer_epoch;
  p->replay_after = op->m.replay_after_wal_entry_position;
  p->base = p->replay_after;
  p->steps = 0;
  probe_tip(p);
  if (!p->busy && p->first_err < 0) retry_later(p, "WAL probe", p->first_err);
  else if (!p->busy) look_done(p);
}

static void look(probe_t *p) {
  p->phase = P_READ;
  p->look = p->look == 1 ? 2 : 1;
  p->op.data = p;
  int rc = mw_mstore_read_latest(&p->s->ms, &p->op, on_read);
  if (rc < 0) {
    retry_later(p, "manifest read", rc);
    return;
  }
  p->busy = true;
}

/* --------------------------------------------------------------- decide */

static void on_flushed(mw_shard_t *s, int status, const char *reason, void *arg) {
  probe_t *p = arg;
  (void)s;
  p->busy = false;
  if (status < 0) mw_log_warn("recovery: shard %s: flush after the replay failed: %s (the MemTable's "
                              "age bound flushes it)", p->s->id_str, reason ? reason : mw_strerror(status));
  p->r->stats.recovered++;
  done(p, "recovered: replayed rows flushed, visible to LanceDB readers");
  finish_stop(p->r);
}

static void on_claimed(mw_shard_t *s, int status, const char *reason, void *arg) {
  probe_t *p = arg;
  p->busy = false;
  if (status < 0) {
    if (status == -ESTALE || status == -EROFS) {
      p->r->stats.busy_peers++;
      done(p, reason ? reason : "claimed elsewhere meanwhile");
    } else {
      retry_later(p, "claim", status);
    }
    finish_stop(p->r);
    return;
  }
  mw_shard_stats_t st;
  mw_shard_stats(s, &st);
  p->r->stats.rows += (uint64_t)st.memtable_rows;
  if (p->r->stopping) {
    finish_stop(p->r);
    return;
  }
  p->phase = P_FLUSH;
  int rc = mw_shard_flush(s, on_flushed, p);
  if (rc < 0) {
    p->r->stats.recovered++;
    done(p, "recovered (replayed; the MemTable's age bound flushes it)");
    return;
  }
  p->busy = true;
}

static void claim_now(probe_t *p);
static bool owner_lookup(probe_t *p);

static void look_done(probe_t *p) {
  int k = p->look - 1;
  p->tip[k] = p->tip_now;
  if (p->tip_now == p->replay_after + 1) {
    p->r->stats.clean++;
    done(p, NULL);
    return;
  }
  if (p->look == 1 && owner_lookup(p)) return; /* the shortcut, if the record says us */
  if (p->look == 2 && p->version[0] == p->version[1] && p->tip[0] == p->tip[1]) {
    mw_log_notice("recovery: shard %s: WAL positions %" PRIu64 "..%" PRIu64 " past replay_after %" PRIu64
                  ", nobody writing for %" PRIu64 " ms: claiming it", p->s->id_str, p->replay_after + 1,
                  p->tip_now - 1, p->replay_after, p->r->quiet_ms);
    claim_now(p);
    return;
  }
  if (p->look == 2) {
    if (p->r->stats.busy_peers == 0 || p->tip[0] != p->tip[1])
      mw_log_notice("recovery: shard %s: its WAL grows (tip %" PRIu64 " -> %" PRIu64 ", manifest v%" PRIu64
                    " -> v%" PRIu64 "): a peer holds it; not fencing it, looking again in %" PRIu64 " ms",
                    p->s->id_str, p->tip[0], p->tip[1], p->version[0], p->version[1], p->r->quiet_ms);
    p->version[0] = p->version[1];
    p->tip[0] = p->tip[1];
    p->look = 1;
  }
  p->phase = P_WAIT;
  p->due_ms = uv_now(p->r->t->loop) + p->r->quiet_ms;
}

/* The shortcut (docs/engine.md "Recovery at start"): the owner record names
 * this node at exactly the manifest's writer epoch, so the last claim was
 * ours, by a process of this node that is gone (we are it, restarted), and
 * nobody claimed since (a LanceDB claim raises the manifest's epoch; another
 * daemon's raises it and replaces the record). No writer can hold the shard
 * at that epoch: claim without waiting the quiet period. */
static void on_owner(mw_storage_req_t *req, int status) {
  probe_t *p = req->data;
  p->busy = false;
  if (p->r->stopping) {
    finish_stop(p->r);
    return;
  }
  mw_owner_rec_t rec = {0};
  const mw_owner_self_t *self = p->r->t->owners.self;
  bool ours = status == 0 && self != NULL && mw_owner_parse((const char *)req->buf.data, req->buf.len, &rec) == 0 &&
              strcmp(rec.node, self->node) == 0 && rec.epoch == p->epoch && p->epoch > 0;
  mw_storage_req_cleanup(req);
  mw_storage_req_init(req);
  if (ours) {
    p->r->stats.shortcuts++;
    mw_log_notice("recovery: shard %s: WAL positions %" PRIu64 "..%" PRIu64 " past replay_after %" PRIu64
                  "; last claimed by this node at epoch %" PRIu64 " and by nobody since (owner record): "
                  "claiming it without the quiet period", p->s->id_str, p->replay_after + 1, p->tip_now - 1,
                  p->replay_after, p->epoch);
    claim_now(p);
    return;
  }
  p->phase = P_WAIT;
  p->due_ms = uv_now(p->r->t->loop) + p->r->quiet_ms;
}

/* Start the owner-record read; false when there is none to read. */
static bool owner_lookup(probe_t *p) {
  const mw_owner_self_t *self = p->r->t->owners.self;
  if (self == NULL || self->node[0] == '\0') return false;
  char key[256];
  mw_owner_key(p->id, key, sizeof key);
  mw_storage_req_t *req = &p->reqs[0];
  mw_storage_req_cleanup(req);
  mw_storage_req_init(req);
  req->data = p;
  p->phase = P_OWNER;
  if (mw_storage_get(p->r->t->st, req, key, 0, MW_OWNER_RECORD_BYTES, on_owner) < 0) return false;
  p->busy = true;
  return true;
}

static void claim_now(probe_t *p) {
  p->phase = P_CLAIM;
  int rc = mw_shard_claim(p->s, on_claimed, p);
  if (rc == -EALREADY || rc == -EROFS) {
    done(p, rc == -EROFS ? "SEALED: left to the drop" : "claimed meanwhile");
    return;
  }
  if (rc < 0) {
    retry_later(p, "claim", rc);
    return;
  }
  p->busy = true;
}

/* ---------------------------------------------------------------- timer */

static void on_timer(uv_timer_t *h) {
  mw_recover_t *r = h->data;
  if (r->stopping) return;
  uint64_t now = uv_now(r->t->loop);
  for (size_t i = 0; i < r->n; i++) {
    probe_t *p = &r->probes[i];
    if (p->phase == P_DONE || p->busy) continue;
    if (mw_shard_state(p->s) != MW_SS_NEW) { /* a write, an operator or `claim = eager` claimed it */
      done(p, NULL);
      continue;
    }
    if (p->phase == P_WAIT && p->due_ms <= now) look(p);
  }
  arm(r);
}

static void arm(mw_recover_t *r) {
  if (!r->timer_open || r->stopping) return;
  uint64_t next = UINT64_MAX, now = uv_now(r->t->loop);
  for (size_t i = 0; i < r->n; i++) {
    const probe_t *p = &r->probes[i];
    if (p->phase == P_DONE) continue;
    uint64_t due = p->phase == P_WAIT ? p->due_ms : now + 100; /* busy ones: watch for state changes */
    if (due < next) next = due;
  }
  if (next == UINT64_MAX) return; /* every probe is done */
  uv_timer_start(&r->timer, on_timer, next > now ? next - now : 0, 0);
}

/* ------------------------------------------------------------- lifecycle */

/* The owned shards this table's spec can name. */
static int owned_ids(mw_table_t *t, uint8_t (**ids)[16], size_t *n) {
  size_t cap = t->kind == MW_SHARDING_BUCKET ? t->num_buckets : t->kind == MW_SHARDING_UNSHARDED ? 1 : t->n_owned;
  *ids = calloc(cap + 1, 16);
  *n = 0;
  if (*ids == NULL) return -ENOMEM;
  for (size_t i = 0; i < cap; i++) {
    uint8_t id[16];
    if (t->kind == MW_SHARDING_UNSHARDED) mw_shard_uuid_unsharded(id);
    else if (t->kind == MW_SHARDING_BUCKET) mw_shard_uuid_bucket((uint32_t)i, id);
    else memcpy(id, t->owned[i], 16);
    if (mw_table_owns(t, id)) memcpy((*ids)[(*n)++], id, 16);
  }
  return 0;
}

int mw_recover_start(mw_table_t *t, uint64_t quiet_ms, mw_recover_t **out) {
  assert(t != NULL);
  assert(out != NULL);
  mw_recover_t *r = calloc(1, sizeof *r);
  if (r == NULL) return -ENOMEM;
  r->t = t;
  if (quiet_ms == 0) {
    quiet_ms = t->cfg.max_memtable_age_ms / 4;
    if (quiet_ms < MW_RECOVER_QUIET_MIN_MS) quiet_ms = MW_RECOVER_QUIET_MIN_MS;
    if (quiet_ms > MW_RECOVER_QUIET_MAX_MS) quiet_ms = MW_RECOVER_QUIET_MAX_MS;
  }
  r->quiet_ms = quiet_ms;
  uint8_t(*ids)[16] = NULL;
  size_t n = 0;
  int rc = owned_ids(t, &ids, &n);
  if (rc == 0 && (r->probes = calloc(n + 1, sizeof *r->probes)) == NULL) rc = -ENOMEM;
  for (size_t i = 0; rc == 0 && i < n; i++) {
    mw_shard_t *s = mw_table_shard(t, ids[i], true);
    if (s == NULL) {
      rc = -ENOMEM;
      break;
    }
    if (mw_shard_state(s) != MW_SS_NEW) continue; /* claimed already (eager) */
    probe_t *p = &r->probes[r->n++];
    p->r = r;
    p->s = s;
    memcpy(p->id, ids[i], 16);
    mw_mstore_op_init(&p->op);
    for (int k = 0; k < MW_RECOVER_MAX_PROBES; k++) mw_storage_req_init(&p->reqs[k]);
    p->phase = P_WAIT; /* the first look runs at once */
    p->due_ms = 0;
  }
  free(ids);
  if (rc < 0) {
    mw_recover_free(r);
    return rc;
  }
  r->stats.probes = (uint32_t)r->n;
  r->stats.pending = (uint32_t)r->n;
  if (r->n > 0)
    mw_log_info("recovery: looking at %zu owned shard(s) for WAL entries past replay_after "
                "(quiet period %" PRIu64 " ms)", r->n, r->quiet_ms);
  uv_timer_init(t->loop, &r->timer);
  r->timer.data = r;
  r->timer_open = true;
  arm(r);
  *out = r;
  return 0;
}

static void on_timer_closed(uv_handle_t *h) {
  mw_recover_t *r = h->data;
  r->timer_open = false;
  finish_stop(r);
}

void mw_recover_stop(mw_recover_t *r, void (*cb)(void *arg), void *arg) {
  assert(r != NULL);
  assert(cb != NULL);
  assert(!r->stopping);
  r->stopping = true;
  r->stop_cb = cb;
  r->stop_arg = arg;
  assert(r->timer_open);
  uv_timer_stop(&r->timer);
  uv_close((uv_handle_t *)&r->timer, on_timer_closed);
}

void mw_recover_free(mw_recover_t *r) {
  if (r == NULL) return;
  for (size_t i = 0; i < r->n; i++) {
    assert(!r->probes[i].busy);
    mw_mstore_op_free(&r->probes[i].op);
    for (int k = 0; k < MW_RECOVER_MAX_PROBES; k++) mw_storage_req_cleanup(&r->probes[i].reqs[k]);
  }
  free(r->probes);
  free(r);
}

void mw_recover_stats(const mw_recover_t *r, mw_recover_stats_t *out) {
  assert(r != NULL);
  assert(out != NULL);
  *out = r->stats;
}
