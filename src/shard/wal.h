/*
 * wal.h — one shard's write-ahead log: group-commit appender, fence
 * sentinel, tip discovery and the replay reader (memwal.md §2, §3.5, §4).
 *
 * Owns: the key prefix `_mem_wal/<uuid>/wal/`, the WAL stream schema (the
 * table schema incl. `_tombstone` plus schema metadata writer_epoch = our
 * epoch), the pending batch list, one uv_timer and a ring of at most
 * MW_WAL_MAX_INFLIGHT entries being written.
 *
 * Group commit: mw_wal_add() queues a batch (a shallow copy: the column
 * buffers stay owned by the MemTable and must outlive the cut);
 * mw_wal_add_ipc() also hands over the batch's record batch messages (an
 * ARROW frame's, re-framed), which the entry then carries as they are. An entry is
 * cut — the pending batches of one MemTable generation, in order, up to
 * buffer_bytes (at least one batch) — at the end of the loop turn that
 * added the first pending batch when nothing is in flight (an idle log
 * commits at once), when an earlier entry completes and batches wait (the
 * natural group commit: what arrives during a put goes into the next entry),
 * when buffer_bytes are pending, when a free slot has been waited for
 * flush_interval_ms while other entries are in flight (an upper bound, not a
 * delay), or on mw_wal_flush(). Entries are written concurrently (put_if_absent at
 * consecutive 1-based positions) but reported durable strictly in position
 * order through on_durable(position, seq_last).
 *
 * Collisions (§2): put_if_absent lost -> check_fenced. Fenced -> on_failed
 * (-ESTALE, the reason names the peer's epoch). Not fenced and the entry was
 * the only one in flight -> retry at position+1 (re-discover the tip every
 * 16th time, give up after 1024). Not fenced while later entries were in
 * flight -> on_failed(-EIO): positions would no longer follow write order, so
 * the shard must be re-claimed (replay rebuilds a consistent MemTable). Other
 * put errors are retried on the same position 3 times (after 50, 100, 200 ms,
 * memwal.md §2), then check_fenced decides between -ESTALE and the error; a
 * collision on a slot whose put failed before poisons the log ("taken after
 * a failed PUT").
 * After on_failed nothing more is written. Entries whose put is still
 * running when the log fails keep their writers waiting: on_late (when set)
 * reports each unresolved entry's outcome, in position order, once known:
 * 0 when it landed (it sits below any claimant's fence sentinel, so the
 * claimant replays it: its rows are durable and must be acknowledged), else
 * the failure (also for every entry after one that did not land: replay
 * stops at that hole). mw_wal_unresolved_seq() says which writes wait.
 *
 * Errors: negative errno; see above for the callback statuses.
 */
#ifndef MW_SHARD_WAL_H
#define MW_SHARD_WAL_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "common/buf.h"
#include "common/err.h"
#include "lance/batch.h"
#include "lance/ipc.h"
#include "shard/manifest_store.h"
#include "storage/storage.h"

#define MW_WAL_MAX_INFLIGHT 8
#define MW_WAL_MAX_COLLISIONS 1024
#define MW_WAL_REDISCOVER_EVERY 16
#define MW_WAL_MAX_CURSOR_PROBES 4096
#define MW_WAL_PUT_RETRIES 3
#define MW_WAL_RETRY_BASE_MS 50
#define MW_WAL_RETRY_MAX_MS 5000
#define MW_WAL_MAX_PENDING_BATCHES 1000000
#define MW_WAL_KEY_BYTES 192
/* Landed entries remembered for GC (mw_wal_landed_size): 4 bytes each. */
#define MW_WAL_LANDED_SLOTS 4096

typedef struct mw_wal mw_wal_t;

typedef struct mw_wal_config {
  uint32_t flush_interval_ms; /* 0: cut whenever a slot is free */
  uint64_t buffer_bytes;      /* cut at once past this many pending bytes (0: never) */
  uint32_t max_inflight;      /* 1..MW_WAL_MAX_INFLIGHT; 0 = 4 */
  bool zstd;                  /* wal_compression = zstd */
} mw_wal_config_t;

typedef void (*mw_wal_durable_cb)(mw_wal_t *w, uint64_t position, uint64_t seq_last);
typedef void (*mw_wal_failed_cb)(mw_wal_t *w, int status, const char *reason);
typedef void (*mw_wal_done_cb)(mw_wal_t *w, int status, uint64_t position);
typedef void (*mw_wal_late_cb)(mw_wal_t *w, uint64_t position, uint64_t seq_last, int status);

typedef struct mw_wal_pending {
  mw_batch_t b;     /* shallow copy */
  mw_buf_t ipc;     /* owned: b's record batch messages from ipc_head on (empty: encode b) */
  size_t ipc_head;  /* free bytes before them (room for the stream's schema message) */
  uint64_t seq;
  uint64_t tag;     /* MemTable generation: an entry never spans two */
  uint64_t bytes;
} mw_wal_pending_t;

typedef struct mw_wal_entry {
  mw_wal_t *w;
  mw_storage_req_t req;
  mw_buf_t bytes;             /* the slot's encode buffer (kept warm between entries) */
  mw_buf_t taken;             /* or: a pass-through batch's buffer, written in place */
  const uint8_t *put_p;       /* what the put writes: inside bytes or taken */
  size_t put_n;
  uint64_t position;
  uint64_t seq_last;
  uint32_t collisions, io_retries;
  uint64_t retry_at;          /* loop ms of the next re-put (E_RETRY) */
  int state;
  bool failed_put;
  bool maybe_written;          /* a failed put got past its link (storage.h) */
  bool landed;                 /* its put succeeded */
  char key[MW_WAL_KEY_BYTES];
} mw_wal_entry_t;

/* Tip discovery (§4.3) and the fence sentinel (§4.2). */
typedef struct mw_wal_disc {
  mw_storage_req_t req;
  uint64_t probe;
  uint32_t probes;
  bool busy;
  void (*done)(mw_wal_t *w, int status, uint64_t tip);
} mw_wal_disc_t;

struct mw_wal {
  void *data;                 /* the owner's */
  mw_storage_t *st;
  mw_mstore_t *ms;
  const mw_schema_t *table_schema; /* borrowed */
  mw_schema_t schema;         /* stream schema: + writer_epoch */
  uint64_t epoch;
  mw_wal_config_t cfg;
  mw_wal_durable_cb on_durable;
  mw_wal_failed_cb on_failed;
  mw_wal_late_cb on_late;      /* optional, see above */
  int late_status;            /* after a failure: first entry that did not land */
  char dir[MW_WAL_KEY_BYTES]; /* "_mem_wal/<uuid>/wal/" */
  uint64_t next_position;     /* 0 = not started */
  mw_wal_pending_t *pend;
  size_t n_pend, cap_pend;
  uint64_t pend_bytes;
  uv_timer_t timer;
  uv_timer_t retry_timer;     /* re-puts after I/O errors */
  bool timer_armed, timer_fired;
  mw_wal_entry_t ents[MW_WAL_MAX_INFLIGHT];
  size_t head, count;
  mw_ipc_writer_t ipc;
  int failed;                 /* 0, or the status given to on_failed */
  bool stalled;               /* a collision is being resolved */
  mw_wal_entry_t *stalled_entry;
  mw_mstore_op_t fop;         /* check_fenced */
  int fop_reason;             /* the put error that started the check */
  mw_wal_disc_t disc;
  /* fence sentinel */
  mw_storage_req_t sreq;
  mw_buf_t sbytes;
  char skey[MW_WAL_KEY_BYTES];
  uint32_t s_collisions;
  uint64_t s_position;
  mw_wal_done_cb s_cb;
  /* Entries of this epoch whose put succeeded, by position: sizes of
   * [landed_lo, landed_hi) in landed[pos % MW_WAL_LANDED_SLOTS] (0 = not
   * known to have landed). Allocated at the first landing; GC forgets what
   * it has deleted; a landing that does not fit is not remembered. */
  uint32_t *landed;
  uint64_t landed_lo, landed_hi;
  /* stats */
  uint64_t entries_written, bytes_written, last_durable_position;
  mw_buf_t schema_msg;        /* the stream's schema message (cached per epoch) */
  /* Record batches written as their messages came (an ARROW frame's, see
   * mw_wal_add_ipc) against those encoded from columns, and the bytes of
   * their messages in the entries (headers and bodies; the schema message
   * and EOS are counted in neither). In place = entries put straight from
   * the pass-through buffer (one batch whose room held the schema message:
   * no copy of the messages at all); the others are copied into the slot's
   * buffer. Counted when the entry is cut. */
  uint64_t passed_through, passed_bytes, encoded, encoded_bytes, in_place;
  bool closing;
  void (*close_cb)(mw_wal_t *w);
};

int mw_wal_init(mw_wal_t *w, uv_loop_t *loop, mw_storage_t *st, mw_mstore_t *ms,
                const mw_schema_t *table_schema, uint64_t epoch, const mw_wal_config_t *cfg,
                mw_wal_durable_cb on_durable, mw_wal_failed_cb on_failed, mw_err_t *err);
/* (Re)start for a new epoch: forget positions, pending batches and any
 * failure, rebuild the stream schema. The log must not be busy. */
int mw_wal_begin(mw_wal_t *w, uint64_t epoch, mw_err_t *err);
/* Fail the log from outside (the shard got fenced by a flush): on_failed
 * runs once, nothing more is written. */
void mw_wal_fail(mw_wal_t *w, int status, const char *reason);
/* After a failure: the newest write seq of an entry whose outcome on_late
 * has not reported yet (0 = none). Writes up to it must wait for on_late. */
uint64_t mw_wal_unresolved_seq(const mw_wal_t *w);
/* Close the timer; cb runs once it is closed. Entries still in flight must
 * have finished (mw_wal_busy false) — the caller waits for that first. */
void mw_wal_close(mw_wal_t *w, void (*cb)(mw_wal_t *w));
/* Entries are written from `position` on (after replay: the first hole). */
void mw_wal_start(mw_wal_t *w, uint64_t position);
/* Queue a batch (shallow copy). -ESTALE/-EIO after failure, -ENOBUFS when
 * MW_WAL_MAX_PENDING_BATCHES are pending. */
int mw_wal_add(mw_wal_t *w, const mw_batch_t *b, uint64_t seq, uint64_t tag);
/* The same, with the batch's record batch messages for the stream schema
 * (lance/ipc.h mw_ipc_rebatch: exactly b's rows) in ipc->data[head, len):
 * the log takes *ipc (it is left empty) and writes those bytes instead of
 * encoding b, unless the log compresses (zstd). When the batch makes an
 * entry alone and head holds the stream's schema message, the entry is
 * written from this buffer in place (schema message into the room before
 * the messages, EOS after them). ipc may be NULL or empty. */
int mw_wal_add_ipc(mw_wal_t *w, const mw_batch_t *b, uint64_t seq, uint64_t tag, mw_buf_t *ipc,
                   size_t head);
/* Cut every pending batch now (as far as free slots allow; the rest follows
 * as entries complete). */
void mw_wal_flush(mw_wal_t *w);
/* Nothing pending and nothing in flight. */
bool mw_wal_idle(const mw_wal_t *w);
/* Any storage request of the log still outstanding. */
bool mw_wal_busy(const mw_wal_t *w);

/* GC: the size of the entry at `position` when this log wrote it in the
 * current epoch and its put succeeded, so it certainly holds rows and is
 * no fence sentinel; 0 when not known (read it to tell). */
uint64_t mw_wal_landed_size(const mw_wal_t *w, uint64_t position);
/* GC: positions below `position` need no answer any more. */
void mw_wal_landed_forget(mw_wal_t *w, uint64_t position);

/* Find the tip from `hint` (manifest wal_entry_position_last_seen) and write
 * the fence sentinel there, re-discovering on every collision (≤1024).
 * cb(status, position of the sentinel). Returns -EBUSY if one is running. */
int mw_wal_fence(mw_wal_t *w, uint64_t hint, mw_wal_done_cb cb);
/* Tip discovery alone: cb(status, next free position). */
int mw_wal_discover(mw_wal_t *w, uint64_t hint, mw_wal_done_cb cb);

/* --- replay reader --- */
typedef struct mw_wal_reader mw_wal_reader_t;
typedef void (*mw_wal_read_cb)(mw_wal_reader_t *r, int status);

struct mw_wal_reader {
  void *data;
  uint64_t position;
  uint64_t epoch;             /* the entry's writer_epoch */
  mw_batch_t *batches;        /* bound to the table schema; owned until taken */
  size_t n_batches;
  mw_err_t err;
  /* private */
  mw_wal_t *w;
  mw_storage_req_t req;
  mw_wal_read_cb cb;
  char key[MW_WAL_KEY_BYTES];
};

void mw_wal_reader_init(mw_wal_reader_t *r, mw_wal_t *w);
/* Free any batches still held. */
void mw_wal_reader_clear(mw_wal_reader_t *r);
void mw_wal_reader_free(mw_wal_reader_t *r);
/* GET + decode entry `position`. Status 0 (batches may be 0: a sentinel),
 * -ENOENT (a hole: replay ends), -EBADMSG (corrupt entry, reason in r->err). */
int mw_wal_read(mw_wal_reader_t *r, uint64_t position, mw_wal_read_cb cb);

/* Decode a whole entry and rebind its batches to `table` (columns by name;
 * a missing `_tombstone` becomes all false). Pure; used by the reader. */
int mw_wal_decode_entry(const uint8_t *p, size_t n, const mw_schema_t *table, uint64_t *epoch,
                        mw_batch_t **batches, size_t *n_batches, mw_err_t *err);

/* The same over an entry held in a blob: the batches' buffers are views
 * into it (lance/ipc.h mw_ipc_decode_view; each batch holding views takes a
 * reference), unless their views add up to less than
 * MW_WAL_VIEW_MIN_EIGHTHS/8 of the entry: then they are copied, so a small
 * batch never pins a large entry (a sentinel, a mostly-header entry). What
 * replay uses (mw_wal_read). */
#define MW_WAL_VIEW_MIN_EIGHTHS 7
int mw_wal_decode_entry_view(mw_blob_t *blob, const mw_schema_t *table, uint64_t *epoch,
                             mw_batch_t **batches, size_t *n_batches, mw_err_t *err);

/* "<dir><bitrev>.arrow" */
int mw_wal_entry_key(const mw_wal_t *w, uint64_t position, char *out, size_t n);

#endif
