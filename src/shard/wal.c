/*
 * wal.c — see wal.h.
 *
 * Entry ring: ents[head .. head+count) in position order. An entry is
 *   E_WRITING  put_if_absent in flight at e->position
 *   E_DONE     durable, waiting for the older entries before it
 *   E_WAIT     its slot was taken; check_fenced decides
 * and returns to E_FREE once reported. Because every entry is cut in order
 * and gets the next position, reporting the ring head first gives acks in
 * position order even though puts finish in any order.
 *
 * Bytes on disk (one entry = one Arrow IPC stream, arrow-rs layout):
 *   ff ff ff ff <i32 meta len> <Schema message, padded to 64> (writer_epoch)
 *   ff ff ff ff <i32 meta len> <RecordBatch message> <body> ...
 *   ff ff ff ff 00 00 00 00
 */
#include "shard/wal.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "lance/shard_manifest.h"
#include "lance/sstable.h"

enum { E_FREE = 0, E_WRITING, E_DONE, E_WAIT, E_RETRY };

int mw_wal_entry_key(const mw_wal_t *w, uint64_t position, char *out, size_t n) {
  char name[MW_BITREV_NAME_BYTES];
  int rc = mw_wal_entry_name(position, name, sizeof name);
  if (rc < 0) return rc;
  int k = snprintf(out, n, "%s%s", w->dir, name);
  return (k < 0 || (size_t)k >= n) ? -ENAMETOOLONG : 0;
}

static void on_timer(uv_timer_t *t);
static void on_timer_close(uv_handle_t *h);

int mw_wal_init(mw_wal_t *w, uv_loop_t *loop, mw_storage_t *st, mw_mstore_t *ms,
                const mw_schema_t *table_schema, uint64_t epoch, const mw_wal_config_t *cfg,
                mw_wal_durable_cb on_durable, mw_wal_failed_cb on_failed, mw_err_t *err) {
  assert(w != NULL);
  assert(st != NULL);
  assert(ms != NULL);
  assert(table_schema != NULL);
  assert(cfg != NULL);
  assert(on_durable != NULL);
  assert(on_failed != NULL);
  memset(w, 0, sizeof *w);
  w->st = st;
  w->ms = ms;
  w->table_schema = table_schema;
  w->epoch = epoch;
  w->cfg = *cfg;
  if (w->cfg.max_inflight == 0) w->cfg.max_inflight = 4;
  if (w->cfg.max_inflight > MW_WAL_MAX_INFLIGHT) w->cfg.max_inflight = MW_WAL_MAX_INFLIGHT;
  w->on_durable = on_durable;
  w->on_failed = on_failed;
  snprintf(w->dir, sizeof w->dir, "%swal/", ms->shard_dir);
  mw_schema_init(&w->schema);
  int rc = mw_wal_begin(w, epoch, err);
  if (rc < 0) return rc;
  mw_ipc_writer_init(&w->ipc);
  for (size_t i = 0; i < MW_WAL_MAX_INFLIGHT; i++) {
    w->ents[i].w = w;
    mw_storage_req_init(&w->ents[i].req);
    w->ents[i].req.data = &w->ents[i];
  }
  mw_mstore_op_init(&w->fop);
  w->fop.data = w;
  mw_storage_req_init(&w->disc.req);
  w->disc.req.data = w;
  mw_storage_req_init(&w->sreq);
  w->sreq.data = w;
  uv_timer_init(loop, &w->timer);
  w->timer.data = w;
  uv_timer_init(loop, &w->retry_timer);
  w->retry_timer.data = w;
  return 0;
}

/* Forget every pending batch (their pass-through bytes are the log's). */
static void drop_pending(mw_wal_t *w) {
  for (size_t i = 0; i < w->n_pend; i++) mw_buf_free(&w->pend[i].ipc);
  w->n_pend = 0;
  w->pend_bytes = 0;
}

int mw_wal_begin(mw_wal_t *w, uint64_t epoch, mw_err_t *err) {
  assert(w != NULL);
  assert(!mw_wal_busy(w));
  w->epoch = epoch;
  w->next_position = 0;
  drop_pending(w);
  w->failed = 0;
  w->stalled = false;
  w->stalled_entry = NULL;
  w->head = w->count = 0;
  w->landed_lo = w->landed_hi = 0; /* a new epoch: nothing of it landed yet */
  for (size_t i = 0; i < MW_WAL_MAX_INFLIGHT; i++) {
    w->ents[i].state = E_FREE;
    mw_buf_free(&w->ents[i].taken);
  }
  mw_schema_free(&w->schema);
  mw_schema_init(&w->schema);
  mw_buf_reset(&w->schema_msg); /* its writer_epoch changes */
  int rc = mw_schema_copy(&w->schema, w->table_schema);
  char text[24];
  snprintf(text, sizeof text, "%" PRIu64, epoch);
  if (rc == 0) rc = mw_kvs_set(&w->schema.meta, MW_IPC_WRITER_EPOCH_KEY, text, strlen(text));
  if (rc < 0) return mw_err_set(err, rc, "wal: cannot build the stream schema");
  return 0;
}

static void on_retry_close(uv_handle_t *h) {
  mw_wal_t *w = h->data;
  mw_schema_free(&w->schema);
  mw_ipc_writer_free(&w->ipc);
  for (size_t i = 0; i < MW_WAL_MAX_INFLIGHT; i++) {
    mw_storage_req_cleanup(&w->ents[i].req);
    mw_buf_free(&w->ents[i].bytes);
    mw_buf_free(&w->ents[i].taken);
  }
  mw_buf_free(&w->schema_msg);
  mw_mstore_op_free(&w->fop);
  mw_storage_req_cleanup(&w->disc.req);
  mw_storage_req_cleanup(&w->sreq);
  mw_buf_free(&w->sbytes);
  drop_pending(w);
  free(w->pend);
  w->pend = NULL;
  free(w->landed);
  w->landed = NULL;
  if (w->close_cb) w->close_cb(w);
}

void mw_wal_close(mw_wal_t *w, void (*cb)(mw_wal_t *w)) {
  assert(w != NULL);
  assert(!w->closing);
  assert(!mw_wal_busy(w));
  w->closing = true;
  w->close_cb = cb;
  uv_close((uv_handle_t *)&w->timer, on_timer_close);
}

static void on_timer_close(uv_handle_t *h) {
  mw_wal_t *w = h->data;
  uv_close((uv_handle_t *)&w->retry_timer, on_retry_close);
}

bool mw_wal_idle(const mw_wal_t *w) { return w->n_pend == 0 && w->count == 0; }

bool mw_wal_busy(const mw_wal_t *w) {
  return w->count > 0 || w->fop.busy || w->disc.busy || w->s_cb != NULL;
}

/* ---------------------------------------------------------------- landed */

/* Entries are reported in position order, so a landing is at or above
 * landed_hi; positions skipped in between (an entry that did not land
 * after a failure) stay 0. One that would not fit in the ring, or a
 * failed allocation, is simply not remembered: GC reads that entry. */
static void note_landed(mw_wal_t *w, uint64_t pos, size_t bytes) {
  _Static_assert(MW_WAL_LANDED_SLOTS > 0 && MW_WAL_LANDED_SLOTS <= 65536, "ring size");
  if (bytes == 0 || bytes > UINT32_MAX) return;
  if (w->landed == NULL && (w->landed = calloc(MW_WAL_LANDED_SLOTS, sizeof *w->landed)) == NULL) return;
  if (w->landed_lo == w->landed_hi) w->landed_lo = w->landed_hi = pos;
  if (pos < w->landed_hi || pos - w->landed_lo >= MW_WAL_LANDED_SLOTS) return;
  for (uint64_t p = w->landed_hi; p < pos; p++) w->landed[p % MW_WAL_LANDED_SLOTS] = 0;
  w->landed[pos % MW_WAL_LANDED_SLOTS] = (uint32_t)bytes;
  w->landed_hi = pos + 1;
  assert(w->landed_hi - w->landed_lo <= MW_WAL_LANDED_SLOTS);
}

uint64_t mw_wal_landed_size(const mw_wal_t *w, uint64_t position) {
  assert(w != NULL);
  if (w->landed == NULL || position < w->landed_lo || position >= w->landed_hi) return 0;
  return w->landed[position % MW_WAL_LANDED_SLOTS];
}

void mw_wal_landed_forget(mw_wal_t *w, uint64_t position) {
  assert(w != NULL);
  if (position <= w->landed_lo) return;
  w->landed_lo = position < w->landed_hi ? position : w->landed_hi;
  assert(w->landed_lo <= w->landed_hi);
}

/* ----------------------------------------------------------------- failure */

static void drain_failed(mw_wal_t *w);

static void report_late(mw_wal_t *w);

static void fail(mw_wal_t *w, int status, const char *reason) {
  assert(status < 0);
  if (w->failed) return;
  w->failed = status;
  w->late_status = 0;
  drop_pending(w);
  if (w->timer_armed) uv_timer_stop(&w->timer);
  w->timer_armed = false;
  uv_timer_stop(&w->retry_timer);
  mw_log_debug("wal %s: failed: %s", w->dir, reason); /* the shard logs it once */
  if (w->on_late) report_late(w); /* resolved ones now, running ones later */
  else drain_failed(w);            /* entries not being written are forgotten now */
  w->on_failed(w, status, reason);
}

/* After a failure, resolve entries from the head in position order: stop at
 * one whose put is still running. An entry that did not land makes every
 * later one a failure too (a replay stops at the hole it leaves). */
static void report_late(mw_wal_t *w) {
  assert(w->failed);
  assert(w->on_late != NULL);
  while (w->count > 0) {
    mw_wal_entry_t *e = &w->ents[w->head];
    if (e->state == E_WRITING) return;
    int st = e->state == E_DONE && e->landed ? 0 : w->failed;
    if (w->late_status != 0) st = w->late_status;
    else if (st != 0) w->late_status = st;
    uint64_t pos = e->position, seq = e->seq_last;
    e->state = E_FREE;
    w->head = (w->head + 1) % MW_WAL_MAX_INFLIGHT;
    w->count--;
    if (st == 0) {
      w->entries_written++;
      w->bytes_written += e->put_n;
      w->last_durable_position = pos;
      note_landed(w, pos, e->put_n);
    }
    mw_buf_free(&e->taken);
    w->on_late(w, pos, seq, st);
  }
}

uint64_t mw_wal_unresolved_seq(const mw_wal_t *w) {
  uint64_t seq = 0;
  for (size_t i = 0; i < w->count; i++) {
    const mw_wal_entry_t *e = &w->ents[(w->head + i) % MW_WAL_MAX_INFLIGHT];
    if (e->seq_last > seq) seq = e->seq_last;
  }
  return seq;
}

void mw_wal_fail(mw_wal_t *w, int status, const char *reason) { fail(w, status, reason); }

/* ------------------------------------------------------------------ cutting */

static void on_entry_put(mw_storage_req_t *req, int status);

static int submit_entry(mw_wal_entry_t *e) {
  int rc = mw_wal_entry_key(e->w, e->position, e->key, sizeof e->key);
  if (rc < 0) return rc;
  e->state = E_WRITING;
  return mw_storage_put_if_absent(e->w->st, &e->req, e->key, e->put_p, e->put_n, on_entry_put);
}

static bool can_cut(const mw_wal_t *w) {
  return !w->failed && !w->stalled && !w->closing && w->next_position > 0 && w->n_pend > 0 &&
         w->count < w->cfg.max_inflight;
}

/* The stream's schema message (encoded once per epoch): an empty stream's
 * bytes without the EOS. */
static int schema_msg(mw_wal_t *w, mw_err_t *err) {
  if (w->schema_msg.len > 0) return 0;
  int rc = mw_ipc_writer_encode(&w->ipc, &w->schema, NULL, 0, NULL, &w->schema_msg, err);
  if (rc < 0) return rc;
  assert(w->schema_msg.len > 8);
  assert(w->schema_msg.len % 8 == 0);
  w->schema_msg.len -= 8;
  return 0;
}

/* A lone pass-through batch whose buffer has room for the schema message
 * before its messages: the entry is that buffer (schema message copied
 * into the room, EOS appended), taken from the pending batch, so its
 * messages are never copied. 1 when done, 0 when the batch does not allow
 * it (cut_encoded builds the entry), -errno. */
static int cut_in_place(mw_wal_t *w, mw_wal_entry_t *e) {
  mw_wal_pending_t *pd = &w->pend[0];
  if (pd->ipc.len <= pd->ipc_head || w->cfg.zstd) return 0;
  int rc = schema_msg(w, NULL);
  if (rc < 0) return rc;
  size_t slen = w->schema_msg.len, head = pd->ipc_head, msgs = pd->ipc.len - head;
  if (slen > head) return 0;
  if ((rc = mw_buf_put_u64le(&pd->ipc, 0x00000000FFFFFFFFull)) < 0) return rc;
  memcpy(pd->ipc.data + head - slen, w->schema_msg.data, slen);
  e->taken = pd->ipc;
  mw_buf_init(&pd->ipc);
  e->put_p = e->taken.data + head - slen;
  e->put_n = e->taken.len - (head - slen);
  w->passed_through++;
  w->passed_bytes += msgs;
  w->in_place++;
  assert(e->put_n == slen + msgs + 8);
  return 1;
}

/* The entry encoded into the slot's buffer: a batch that came with its
 * record batch messages (an ARROW frame that could go as it is, see
 * mw_wal_add_ipc) is copied as they are; the others are encoded. A zstd
 * log encodes everything (the messages are uncompressed). rc 1 = already
 * cut in place. */
static int cut_encoded(mw_wal_t *w, mw_wal_entry_t *e, size_t k, mw_err_t *err) {
  mw_ipc_part_t stack[64];
  mw_ipc_part_t *parts = k <= 64 ? stack : malloc(k * sizeof *parts);
  if (parts == NULL) return mw_err_set(err, -ENOMEM, "out of memory cutting a WAL entry");
  uint64_t raw_batches = 0, raw_bytes = 0;
  for (size_t i = 0; i < k; i++) {
    const mw_wal_pending_t *pd = &w->pend[i];
    bool raw = pd->ipc.len > pd->ipc_head && !w->cfg.zstd;
    size_t n = raw ? pd->ipc.len - pd->ipc_head : 0;
    parts[i] = (mw_ipc_part_t){&pd->b, raw ? pd->ipc.data + pd->ipc_head : NULL, n};
    raw_batches += raw;
    raw_bytes += n;
  }
  mw_buf_reset(&e->bytes);
  mw_ipc_opts_t opts = {.zstd = w->cfg.zstd};
  int rc = schema_msg(w, err);
  if (rc == 0) rc = mw_ipc_writer_encode_parts(&w->ipc, &w->schema, parts, k, &opts, &e->bytes, err);
  if (parts != stack) free(parts);
  if (rc < 0) return rc;
  assert(e->bytes.len >= w->schema_msg.len + 8 + raw_bytes);
  e->put_p = e->bytes.data;
  e->put_n = e->bytes.len;
  w->passed_through += raw_batches;
  w->passed_bytes += raw_bytes;
  w->encoded += k - raw_batches;
  w->encoded_bytes += e->bytes.len - w->schema_msg.len - 8 - raw_bytes;
  return 0;
}

/* Cut one entry from the pending prefix of one tag. */
static void cut_one(mw_wal_t *w) {
  assert(can_cut(w));
  /* One generation per entry; at most buffer_bytes per entry (at least one
   * batch), so an entry stays far below the storage object limit. */
  size_t k = 1;
  uint64_t sum = w->pend[0].bytes;
  while (k < w->n_pend && w->pend[k].tag == w->pend[0].tag &&
         (w->cfg.buffer_bytes == 0 || sum + w->pend[k].bytes <= w->cfg.buffer_bytes))
    sum += w->pend[k++].bytes;
  mw_wal_entry_t *e = &w->ents[(w->head + w->count) % MW_WAL_MAX_INFLIGHT];
  assert(e->state == E_FREE);
  assert(e->taken.data == NULL);
  mw_err_t err = {0};
  int rc = k == 1 ? cut_in_place(w, e) : 0;
  if (rc == 0) rc = cut_encoded(w, e, k, &err);
  uint64_t bytes = 0;
  for (size_t i = 0; i < k; i++) {
    bytes += w->pend[i].bytes;
    mw_buf_free(&w->pend[i].ipc);
  }
  if (rc < 0) {
    fail(w, rc, err.msg[0] ? err.msg : "WAL entry encoding failed");
    return;
  }
  e->seq_last = w->pend[k - 1].seq;
  e->position = w->next_position++;
  e->collisions = e->io_retries = 0;
  e->failed_put = false;
  e->maybe_written = false;
  e->landed = false;
  memmove(w->pend, w->pend + k, (w->n_pend - k) * sizeof *w->pend);
  w->n_pend -= k;
  w->pend_bytes -= bytes;
  w->count++;
  rc = submit_entry(e);
  if (rc < 0) {
    e->state = E_FREE;
    mw_buf_free(&e->taken);
    w->count--;
    char msg[160];
    snprintf(msg, sizeof msg, "WAL put of position %" PRIu64 " refused: %s", e->position,
             mw_strerror(rc));
    fail(w, rc, msg);
  }
}

/* The cut timer. An idle log (no entry in flight) cuts at the end of this
 * loop turn: every batch added by this turn's callbacks (all connections'
 * reads of one poll) goes into one entry, and nothing waits for the
 * interval. While entries are in flight the batches gather for the next
 * entry, which the completion cuts; flush_interval_ms only bounds how long
 * they wait for a free slot before a parallel entry is cut (max_inflight >
 * 1). So the interval is an upper bound, never a delay. */
static void arm_timer(mw_wal_t *w) {
  if (w->timer_armed || w->n_pend == 0 || w->failed || w->closing) return;
  w->timer_armed = true;
  w->timer_fired = false;
  uint64_t delay_ms = w->count == 0 ? 0 : w->cfg.flush_interval_ms;
  assert(delay_ms <= w->cfg.flush_interval_ms);
  uv_timer_start(&w->timer, on_timer, delay_ms, 0);
}

/* Cut while allowed; `all` = ignore the timer (flush, completion). */
static void pump(mw_wal_t *w, bool all) {
  while (can_cut(w) && (all || w->timer_fired || w->cfg.flush_interval_ms == 0 ||
                        (w->cfg.buffer_bytes > 0 && w->pend_bytes >= w->cfg.buffer_bytes)))
    cut_one(w);
  if (w->n_pend == 0) {
    w->timer_fired = false;
    if (w->timer_armed) uv_timer_stop(&w->timer);
    w->timer_armed = false;
  } else if (!w->timer_armed && !w->timer_fired) {
    arm_timer(w);
  }
}

static void on_timer(uv_timer_t *t) {
  mw_wal_t *w = t->data;
  w->timer_armed = false;
  w->timer_fired = true;  /* stays set until the pending list drains */
  pump(w, false);
}

void mw_wal_start(mw_wal_t *w, uint64_t position) {
  assert(w != NULL);
  assert(position >= 1);
  w->next_position = position;
  pump(w, false);
}

int mw_wal_add(mw_wal_t *w, const mw_batch_t *b, uint64_t seq, uint64_t tag) {
  return mw_wal_add_ipc(w, b, seq, tag, NULL, 0);
}

int mw_wal_add_ipc(mw_wal_t *w, const mw_batch_t *b, uint64_t seq, uint64_t tag, mw_buf_t *ipc,
                   size_t head) {
  assert(w != NULL);
  assert(b != NULL);
  assert(ipc == NULL || ipc->len == 0 || head <= ipc->len);
  assert(ipc == NULL || ipc->len == 0 || (ipc->len - head) % 8 == 0);
  if (w->failed) return w->failed;
  if (w->closing) return -ESHUTDOWN;
  if (w->n_pend >= MW_WAL_MAX_PENDING_BATCHES) return -ENOBUFS;
  if (w->n_pend == w->cap_pend) {
    size_t cap = w->cap_pend ? w->cap_pend * 2 : 64;
    mw_wal_pending_t *p = realloc(w->pend, cap * sizeof *p);
    if (p == NULL) return -ENOMEM;
    w->pend = p;
    w->cap_pend = cap;
  }
  mw_wal_pending_t *p = &w->pend[w->n_pend++];
  p->b = *b;
  mw_buf_init(&p->b.wal_ipc); /* the MemTable's batch: never its bytes */
  mw_buf_init(&p->ipc);
  p->ipc_head = 0;
  if (ipc != NULL && ipc->len > 0) {
    p->ipc = *ipc; /* taken */
    p->ipc_head = head;
    mw_buf_init(ipc);
  }
  p->seq = seq;
  p->tag = tag;
  p->bytes = (uint64_t)mw_batch_lance_bytes(b);
  w->pend_bytes += p->bytes;
  pump(w, false);
  return 0;
}

void mw_wal_flush(mw_wal_t *w) {
  assert(w != NULL);
  w->timer_fired = w->n_pend > 0;
  pump(w, true);
}

/* -------------------------------------------------------------- completion */

static void report(mw_wal_t *w) {
  while (w->count > 0) {
    mw_wal_entry_t *e = &w->ents[w->head];
    if (e->state != E_DONE) break;
    uint64_t pos = e->position, seq = e->seq_last;
    e->state = E_FREE;
    w->head = (w->head + 1) % MW_WAL_MAX_INFLIGHT;
    w->count--;
    w->entries_written++;
    w->bytes_written += e->put_n;
    w->last_durable_position = pos;
    note_landed(w, pos, e->put_n);
    mw_buf_free(&e->taken);
    if (!w->failed) w->on_durable(w, pos, seq);
  }
}

/* Drop every finished entry after a failure (nothing is reported). */
static void drain_failed(mw_wal_t *w) {
  while (w->count > 0 && w->ents[w->head].state != E_WRITING) {
    w->ents[w->head].state = E_FREE;
    mw_buf_free(&w->ents[w->head].taken);
    w->head = (w->head + 1) % MW_WAL_MAX_INFLIGHT;
    w->count--;
  }
}

static void on_fence_check(mw_mstore_op_t *op, int status);
static void on_rediscover(mw_wal_t *w, int status, uint64_t tip);

static void start_check(mw_wal_t *w, mw_wal_entry_t *e, int reason) {
  w->stalled = true;
  w->stalled_entry = e;
  w->fop_reason = reason;
  int rc = mw_mstore_check_fenced(w->ms, &w->fop, w->epoch, on_fence_check);
  if (rc < 0) {
    char msg[160];
    snprintf(msg, sizeof msg, "WAL position %" PRIu64 ": fencing check refused: %s", e->position,
             mw_strerror(rc));
    fail(w, rc, msg);
  }
}

static void on_retry_timer(uv_timer_t *t);

/* Arm the retry timer for the earliest entry waiting to be re-put. */
static void arm_retry(mw_wal_t *w) {
  uint64_t first = UINT64_MAX, now = uv_now(w->retry_timer.loop);
  for (size_t i = 0; i < w->count; i++) {
    const mw_wal_entry_t *e = &w->ents[(w->head + i) % MW_WAL_MAX_INFLIGHT];
    if (e->state == E_RETRY && e->retry_at < first) first = e->retry_at;
  }
  if (first == UINT64_MAX || w->closing) return;
  uv_timer_start(&w->retry_timer, on_retry_timer, first > now ? first - now : 0, 0);
}

static void on_retry_timer(uv_timer_t *t) {
  mw_wal_t *w = t->data;
  uint64_t now = uv_now(t->loop);
  if (w->failed) return;
  for (size_t i = 0; i < w->count; i++) {
    mw_wal_entry_t *e = &w->ents[(w->head + i) % MW_WAL_MAX_INFLIGHT];
    if (e->state != E_RETRY || e->retry_at > now) continue;
    int rc = submit_entry(e);
    if (rc < 0) {
      e->state = E_DONE;
      fail(w, rc, "WAL retry refused");
      drain_failed(w);
      return;
    }
  }
  arm_retry(w);
}

static void on_entry_put(mw_storage_req_t *req, int status) {
  mw_wal_entry_t *e = req->data;
  mw_wal_t *w = e->w;
  assert(e->state == E_WRITING);
  if (w->failed) {
    e->state = E_DONE;
    e->landed = status == 0;
    if (w->on_late) report_late(w);
    else drain_failed(w);
    return;
  }
  if (status == 0) {
    e->state = E_DONE;
    e->landed = true;
    if (w->stalled_entry == e) {
      w->stalled = false;
      w->stalled_entry = NULL;
    }
    report(w);
    pump(w, true);
    return;
  }
  char msg[320];
  if (status != -EEXIST && mw_storage_req_maybe_written(req)) e->maybe_written = true;
  if (status == -EEXIST && e->failed_put && e->maybe_written) {
    /* our own entry, linked before its directory fsync failed: whether it
     * survives is unknown, and the next claim replays it if it does */
    snprintf(msg, sizeof msg,
             "WAL position %" PRIu64 ": outcome unknown: the entry was linked but its directory "
             "fsync failed; not acknowledged, yet the next claim replays it if it survived",
             e->position);
    e->state = E_DONE;
    fail(w, -EIO, msg);
    drain_failed(w);
    return;
  }
  if (status == -EEXIST && e->failed_put) {
    snprintf(msg, sizeof msg,
             "WAL position %" PRIu64 " was taken after a failed PUT; in-memory state may diverge",
             e->position);
    e->state = E_DONE;
    fail(w, -EIO, msg);
    drain_failed(w);
    return;
  }
  if (status != -EEXIST && e->io_retries < MW_WAL_PUT_RETRIES) {
    /* same position again after 50 ms, 100 ms, 200 ms (capped at 5 s) */
    uint64_t delay = MW_WAL_RETRY_BASE_MS << e->io_retries;
    if (delay > MW_WAL_RETRY_MAX_MS) delay = MW_WAL_RETRY_MAX_MS;
    e->io_retries++;
    e->failed_put = true;
    e->state = E_RETRY;
    e->retry_at = uv_now(w->retry_timer.loop) + delay;
    mw_log_warn("wal %s: put of position %" PRIu64 " failed (%s); retry %u in %" PRIu64 " ms",
                w->dir, e->position, mw_strerror(status), e->io_retries, delay);
    arm_retry(w);
    return;
  }
  e->state = E_WAIT;
  if (status == -EEXIST) e->collisions++;
  if (w->stalled) return; /* a check is already running; it decides for all */
  start_check(w, e, status);
}

static void on_fence_check(mw_mstore_op_t *op, int status) {
  mw_wal_t *w = op->data;
  mw_wal_entry_t *e = w->stalled_entry;
  char msg[MW_ERR_MSG_BYTES + 64];
  if (w->failed) return;
  if (status == -ESTALE) {
    fail(w, -ESTALE, op->err.msg);
    drain_failed(w);
    return;
  }
  if (status < 0 && status != -ENOENT) {
    snprintf(msg, sizeof msg, "WAL position %" PRIu64 ": fencing check failed: %s", e->position,
             op->err.msg);
    fail(w, status, msg);
    drain_failed(w);
    return;
  }
  if (w->fop_reason != -EEXIST) {
    snprintf(msg, sizeof msg, "WAL put of position %" PRIu64 " failed after %d retries: %s",
             e->position, MW_WAL_PUT_RETRIES, mw_strerror(w->fop_reason));
    fail(w, w->fop_reason, msg);
    drain_failed(w);
    return;
  }
  if (w->count > 1 || e != &w->ents[w->head]) {
    snprintf(msg, sizeof msg,
             "WAL position %" PRIu64 " taken by another writer (not fenced) while later entries "
             "were in flight; re-claim the shard to replay",
             e->position);
    fail(w, -EIO, msg);
    drain_failed(w);
    return;
  }
  if (e->collisions > MW_WAL_MAX_COLLISIONS) {
    snprintf(msg, sizeof msg, "WAL append gave up after %d collisions", MW_WAL_MAX_COLLISIONS);
    fail(w, -EBUSY, msg);
    drain_failed(w);
    return;
  }
  if (e->collisions % MW_WAL_REDISCOVER_EVERY == 0) {
    int rc = mw_wal_discover(w, e->position, on_rediscover);
    if (rc < 0) {
      fail(w, rc, "WAL tip re-discovery refused");
      drain_failed(w);
    }
    return;
  }
  on_rediscover(w, 0, e->position + 1);
}

static void on_rediscover(mw_wal_t *w, int status, uint64_t tip) {
  mw_wal_entry_t *e = w->stalled_entry;
  if (w->failed) return;
  if (status < 0) {
    fail(w, status, "WAL tip re-discovery failed");
    drain_failed(w);
    return;
  }
  e->position = tip > e->position ? tip : e->position + 1;
  w->next_position = e->position + 1;
  mw_log_info("wal %s: slot taken, moving to position %" PRIu64, w->dir, e->position);
  int rc = submit_entry(e);
  if (rc < 0) {
    e->state = E_DONE;
    fail(w, rc, "WAL put refused");
    drain_failed(w);
  }
}

/* --------------------------------------------------------------- discovery */

static void disc_finish(mw_wal_t *w, int status, uint64_t tip) {
  w->disc.busy = false;
  w->disc.done(w, status, tip);
}

static void on_disc_list(mw_storage_req_t *req, int status) {
  mw_wal_t *w = req->data;
  if (status == -ENOENT) status = 0;
  if (status < 0) {
    disc_finish(w, status, 0);
    return;
  }
  uint64_t max = 0;
  size_t dl = strlen(w->dir);
  for (size_t i = 0; i < req->nkeys; i++) {
    const char *k = req->keys[i];
    if (strncmp(k, w->dir, dl) != 0 || strchr(k + dl, '/') != NULL) continue;
    uint64_t p;
    if (mw_bitrev_parse(k + dl, &p) == 0 && p > max) max = p;
  }
  mw_storage_req_cleanup(req);
  disc_finish(w, 0, max + 1);
}

static void on_disc_head(mw_storage_req_t *req, int status) {
  mw_wal_t *w = req->data;
  char key[MW_WAL_KEY_BYTES];
  int rc;
  if (status == -ENOENT) {
    if (w->disc.probes == 1) {
      /* The hint itself is missing: list the directory instead. */
      rc = mw_storage_list(w->st, &w->disc.req, w->dir, on_disc_list);
      if (rc < 0) disc_finish(w, rc, 0);
      return;
    }
    disc_finish(w, 0, w->disc.probe);
    return;
  }
  if (status < 0) {
    disc_finish(w, status, 0);
    return;
  }
  if (w->disc.probes >= MW_WAL_MAX_CURSOR_PROBES) {
    disc_finish(w, -EBUSY, 0);
    return;
  }
  w->disc.probe++;
  w->disc.probes++;
  rc = mw_wal_entry_key(w, w->disc.probe, key, sizeof key);
  if (rc == 0) rc = mw_storage_head(w->st, &w->disc.req, key, on_disc_head);
  if (rc < 0) disc_finish(w, rc, 0);
}

int mw_wal_discover(mw_wal_t *w, uint64_t hint, mw_wal_done_cb cb) {
  assert(w != NULL);
  assert(cb != NULL);
  if (w->disc.busy) return -EBUSY;
  char key[MW_WAL_KEY_BYTES];
  int rc;
  w->disc.done = cb;
  w->disc.probe = hint;
  w->disc.probes = 1;
  if (hint == 0) {
    rc = mw_storage_list(w->st, &w->disc.req, w->dir, on_disc_list);
  } else {
    rc = mw_wal_entry_key(w, hint, key, sizeof key);
    if (rc == 0) rc = mw_storage_head(w->st, &w->disc.req, key, on_disc_head);
  }
  if (rc == 0) w->disc.busy = true;
  return rc;
}

/* ---------------------------------------------------------- fence sentinel */

static void on_sentinel_put(mw_storage_req_t *req, int status);

static void sentinel_done(mw_wal_t *w, int status) {
  mw_wal_done_cb cb = w->s_cb;
  w->s_cb = NULL;
  cb(w, status, w->s_position);
}

static void on_sentinel_tip(mw_wal_t *w, int status, uint64_t tip) {
  if (status < 0) {
    sentinel_done(w, status);
    return;
  }
  w->s_position = tip;
  int rc = mw_wal_entry_key(w, tip, w->skey, sizeof w->skey);
  if (rc == 0)
    rc = mw_storage_put_if_absent(w->st, &w->sreq, w->skey, w->sbytes.data, w->sbytes.len,
                                  on_sentinel_put);
  if (rc < 0) sentinel_done(w, rc);
}

static void on_sentinel_put(mw_storage_req_t *req, int status) {
  mw_wal_t *w = req->data;
  if (status == -EEXIST && ++w->s_collisions <= MW_WAL_MAX_COLLISIONS) {
    int rc = mw_wal_discover(w, w->s_position, on_sentinel_tip);
    if (rc < 0) sentinel_done(w, rc);
    return;
  }
  if (status == -EEXIST) status = -EBUSY;
  if (status == 0)
    mw_log_info("wal %s: fence sentinel for epoch %" PRIu64 " at position %" PRIu64, w->dir,
                w->epoch, w->s_position);
  sentinel_done(w, status);
}

int mw_wal_fence(mw_wal_t *w, uint64_t hint, mw_wal_done_cb cb) {
  assert(w != NULL);
  assert(cb != NULL);
  if (w->s_cb != NULL || w->disc.busy) return -EBUSY;
  mw_buf_reset(&w->sbytes);
  int rc = mw_ipc_fence_sentinel(w->epoch, &w->sbytes, NULL);
  if (rc < 0) return rc;
  w->s_collisions = 0;
  rc = mw_wal_discover(w, hint, on_sentinel_tip);
  if (rc == 0) w->s_cb = cb;
  return rc;
}

/* ------------------------------------------------------------------ reader */

static int bind_batch(const mw_schema_t *table, mw_batch_t *src, mw_batch_t *dst, mw_err_t *err) {
  const mw_schema_t *ss = src->schema;
  int rc = mw_batch_init(dst, table);
  if (rc < 0) return rc;
  dst->n_rows = src->n_rows;
  for (size_t i = 0; i < table->n_fields; i++) {
    const mw_field_t *f = &table->fields[i];
    int j = mw_schema_find(ss, f->name);
    if (j < 0) {
      if (strcmp(f->name, "_tombstone") != 0 || f->type != MW_T_BOOL) {
        rc = mw_err_set(err, -EBADMSG, "WAL entry lacks column '%s'", f->name);
        goto fail;
      }
      mw_column_t *c = &dst->cols[i];
      if (mw_buf_extend(&c->values, (size_t)(src->n_rows + 7) / 8) == NULL && src->n_rows > 0) {
        rc = -ENOMEM;
        goto fail;
      }
      c->length = src->n_rows;
      continue;
    }
    const mw_field_t *g = &ss->fields[j];
    if (!mw_field_type_equal(g, f)) {
      char gt[MW_FIELD_TEXT_BYTES], ft[MW_FIELD_TEXT_BYTES];
      rc = mw_err_set(err, -EBADMSG, "WAL column '%s' is %s, the table says %s", f->name,
                      mw_field_type_text(g, gt, sizeof gt), mw_field_type_text(f, ft, sizeof ft));
      goto fail;
    }
    if (!f->nullable && src->cols[j].null_count > 0) {
      rc = mw_err_set(err, -EBADMSG, "WAL column '%s' has nulls; the table says not null", f->name);
      goto fail;
    }
    mw_column_t tmp = dst->cols[i];
    dst->cols[i] = src->cols[j];
    src->cols[j] = tmp;
  }
  if ((rc = mw_batch_adopt(dst, src->backing)) < 0) goto fail; /* its views came along */
  return 0;
fail:
  mw_batch_free(dst);
  return rc;
}

/* Decode (views into `blob` when given) and bind. */
static int decode_entry(const uint8_t *p, size_t n, mw_blob_t *blob, const mw_schema_t *table,
                        uint64_t *epoch, mw_batch_t **batches, size_t *n_batches, mw_err_t *err) {
  assert(table != NULL);
  assert(epoch != NULL);
  assert(batches != NULL);
  assert(n_batches != NULL);
  mw_ipc_stream_t s;
  *batches = NULL;
  *n_batches = 0;
  int rc = blob ? mw_ipc_decode_view(blob, NULL, &s, err) : mw_ipc_decode(p, n, NULL, &s, err);
  if (rc < 0) return rc;
  rc = mw_ipc_writer_epoch(&s.schema, epoch, err);
  if (rc < 0) goto out;
  size_t k = 0;
  for (size_t i = 0; i < s.n_batches; i++) k += s.batches[i].n_rows > 0;
  if (k == 0) goto out;
  mw_batch_t *out = calloc(k, sizeof *out);
  if (out == NULL) {
    rc = -ENOMEM;
    goto out;
  }
  size_t j = 0;
  for (size_t i = 0; i < s.n_batches && rc == 0; i++) {
    if (s.batches[i].n_rows == 0) continue;
    rc = bind_batch(table, &s.batches[i], &out[j], err);
    if (rc == 0) j++;
  }
  if (rc < 0) {
    for (size_t i = 0; i < j; i++) mw_batch_free(&out[i]);
    free(out);
    goto out;
  }
  *batches = out;
  *n_batches = j;
out:
  mw_ipc_stream_free(&s);
  return rc;
}

int mw_wal_decode_entry(const uint8_t *p, size_t n, const mw_schema_t *table, uint64_t *epoch,
                        mw_batch_t **batches, size_t *n_batches, mw_err_t *err) {
  return decode_entry(p, n, NULL, table, epoch, batches, n_batches, err);
}

int mw_wal_decode_entry_view(mw_blob_t *blob, const mw_schema_t *table, uint64_t *epoch,
                             mw_batch_t **batches, size_t *n_batches, mw_err_t *err) {
  assert(blob != NULL);
  int rc = decode_entry(NULL, 0, blob, table, epoch, batches, n_batches, err);
  if (rc < 0) return rc;
  uint64_t viewed = 0, len = mw_blob_len(blob);
  for (size_t i = 0; i < *n_batches; i++) viewed += mw_batch_view_bytes(&(*batches)[i]);
  _Static_assert(MW_WAL_VIEW_MIN_EIGHTHS >= 1 && MW_WAL_VIEW_MIN_EIGHTHS <= 8, "a share of 8");
  if (viewed * 8 >= len * MW_WAL_VIEW_MIN_EIGHTHS) return 0;
  /* too little of the entry is rows: copy them, so the entry is not pinned */
  for (size_t i = 0; i < *n_batches && rc == 0; i++) rc = mw_batch_own(&(*batches)[i]);
  if (rc < 0) {
    for (size_t i = 0; i < *n_batches; i++) mw_batch_free(&(*batches)[i]);
    free(*batches);
    *batches = NULL;
    *n_batches = 0;
    return mw_err_set(err, rc, "WAL entry: out of memory");
  }
  return 0;
}

void mw_wal_reader_init(mw_wal_reader_t *r, mw_wal_t *w) {
  assert(r != NULL);
  assert(w != NULL);
  memset(r, 0, sizeof *r);
  r->w = w;
  mw_storage_req_init(&r->req);
  r->req.data = r;
}

void mw_wal_reader_clear(mw_wal_reader_t *r) {
  for (size_t i = 0; i < r->n_batches; i++) mw_batch_free(&r->batches[i]);
  free(r->batches);
  r->batches = NULL;
  r->n_batches = 0;
}

void mw_wal_reader_free(mw_wal_reader_t *r) {
  if (r == NULL) return;
  mw_wal_reader_clear(r);
  mw_storage_req_cleanup(&r->req);
}

/* The entry as read becomes a blob the batches view (no copy of the rows)
 * unless they hold less than MW_WAL_VIEW_MIN_EIGHTHS of it (then they are
 * copied and the entry freed). */
static void on_read(mw_storage_req_t *req, int status) {
  mw_wal_reader_t *r = req->data;
  if (status == 0) {
    mw_buf_shrink(&req->buf); /* the blob holds the allocation: no slack */
    size_t n;
    uint8_t *p = mw_buf_steal(&req->buf, &n);
    mw_blob_t *blob = p ? mw_blob_new(p, n) : NULL;
    status = blob ? mw_wal_decode_entry_view(blob, r->w->table_schema, &r->epoch, &r->batches,
                                             &r->n_batches, &r->err)
                  : n == 0 ? mw_wal_decode_entry(NULL, 0, r->w->table_schema, &r->epoch,
                                                 &r->batches, &r->n_batches, &r->err)
                           : -ENOMEM;
    mw_blob_unref(blob); /* the batches keep theirs */
    if (status < 0)
      mw_err_set(&r->err, status, "WAL entry %" PRIu64 " (%s): corrupt", r->position, r->key);
  }
  mw_buf_reset(&req->buf);
  r->cb(r, status);
}

int mw_wal_read(mw_wal_reader_t *r, uint64_t position, mw_wal_read_cb cb) {
  assert(r != NULL);
  assert(cb != NULL);
  assert(position >= 1);
  mw_wal_reader_clear(r);
  mw_err_clear(&r->err);
  r->position = position;
  r->epoch = 0;
  r->cb = cb;
  int rc = mw_wal_entry_key(r->w, position, r->key, sizeof r->key);
  if (rc < 0) return rc;
  return mw_storage_get(r->w->st, &r->req, r->key, 0, UINT64_MAX, on_read);
}
