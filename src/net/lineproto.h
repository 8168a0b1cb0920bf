/*
 * lineproto.h — the producers' line protocol, one connection, I/O free.
 *
 * Owns two things per connection (docs/protocol.md is the contract):
 *
 * 1. Framing: bytes in (mw_lp_feed), requests out (mw_lp_next). Lines end in
 *    "\n" ("\r\n" accepted) and are numbered from 1. Requests:
 *      {...}            upsert one row (JSON object, parsed later by jsonrow.h)
 *      DEL {...}        delete by primary key
 *      USE <table>      select the table for the rows that follow
 *      SYNC             reply once every earlier row is durable
 *      PING             reply PONG
 *      QUIT             close after the earlier replies
 *      AUTH <token>     must come first when a token is configured
 *      ARROW <nbytes>   followed by exactly nbytes of an Arrow IPC stream
 *      REPLIES ALL|ERRORS|NONE   which replies the requests after it get
 *    An empty line is counted and ignored. A line longer than max_line_bytes
 *    yields an ERROR request (code too_long) as soon as the limit is passed;
 *    the rest of it is skipped without buffering and framing resumes after
 *    the next "\n". An ARROW frame over max_frame_bytes is skipped the same
 *    way (its nbytes are discarded). Anything else is ERROR parse.
 *
 *    Sample input and the requests it gives:
 *      "USE events\n{\"id\":1}\r\nPING\nARROW 312\n<312 bytes>SYNC\n"
 *      -> USE(1) ROW(2) PING(3) ARROW(4, 312 bytes) SYNC(5)
 *
 * 2. Replies, in request order, whatever order the engine completes in:
 *    the server queues one item per reply-producing request (a submission of
 *    rows, an error, SYNC, PONG, QUIT) and marks row submissions and SYNCs
 *    done later; mw_lp_drain emits the ready prefix:
 *      OK <n>                    the next n rows since the previous OK are
 *                                acknowledged (consecutive submissions merge)
 *      ERR <line> <code> <msg>   preceded by the OK for every earlier row
 *      SYNC <n>                  n = rows acknowledged on this connection so far
 *      PONG
 *    A failed submission gives one ERR naming its first line; its message
 *    starts with "<k> rows (lines <a>-<b>) not written: ", or, when some of
 *    its rows were written (a group over several shards, one refused),
 *    "<k> rows (lines <a>-<b>): <w> written, <k-w> not written: ".
 *
 *    Reply modes (REPLIES, or the listener's default before any request):
 *      ALL     every reply above (the default)
 *      ERRORS  no OK lines; ERR, SYNC and PONG as usual
 *      NONE    no OK and no ERR lines; SYNC and PONG still answered
 *    A mode change is queued like a reply, so it applies exactly to the
 *    requests after it; OK counts rows since the previous OK or mode change.
 *    Log shippers that never read (rsyslog omfwd, Fluent Bit, Vector) run
 *    with NONE: nothing accumulates in their receive buffer, and flow
 *    control is TCP's alone (unacknowledged input still stops reading).
 *
 * Memory: the input buffer holds at most one partial line (<= max_line_bytes)
 * or one ARROW frame (<= max_frame_bytes) plus the last fed chunk. Every
 * queued reply counts the input bytes it answers in unacked_bytes, which the
 * server compares with max_unacked_bytes_per_connection to stop reading.
 *
 * Errors: negative errno (-ENOMEM; -EINVAL for bad limits); requests never
 * fail, they become ERROR requests with a code and a message.
 */
#ifndef MW_NET_LINEPROTO_H
#define MW_NET_LINEPROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

#define MW_LP_DEFAULT_MAX_LINE_BYTES ((size_t)1 << 20)
#define MW_LP_DEFAULT_MAX_FRAME_BYTES ((size_t)64 << 20)
#define MW_LP_MAX_FRAME_BYTES ((size_t)1 << 30)
#define MW_LP_MSG_BYTES 768 /* an ERR reason: table name + byte + column + why */
#define MW_LP_KEEP_BYTES ((size_t)256 << 10) /* input buffer kept between lines */
#define MW_LP_TABLE_NAME_BYTES 256
#define MW_LP_TOKEN_BYTES 256

typedef enum mw_lp_code {
  MW_LP_OK = 0,
  MW_LP_E_PARSE,
  MW_LP_E_SCHEMA,
  MW_LP_E_TYPE,
  MW_LP_E_PK,
  MW_LP_E_TABLE,
  MW_LP_E_TOO_LONG,
  MW_LP_E_NOT_OWNER,
  MW_LP_E_FENCED,
  MW_LP_E_SEALED,
  MW_LP_E_OVERLOADED,
  MW_LP_E_AUTH,
  MW_LP_E_INTERNAL,
  MW_LP_E_FORBIDDEN, /* authenticated, but not allowed this (creds.h) */
  MW_LP_N_CODES
} mw_lp_code_t;

typedef enum mw_lp_kind {
  MW_LP_ROW = 1,
  MW_LP_DEL,
  MW_LP_USE,
  MW_LP_SYNC,
  MW_LP_PING,
  MW_LP_QUIT,
  MW_LP_AUTH,
  MW_LP_ARROW,
  MW_LP_ERROR,
  MW_LP_REPLIES,
} mw_lp_kind_t;

typedef enum mw_lp_replies {
  MW_LP_REPLIES_ALL = 0,
  MW_LP_REPLIES_ERRORS,
  MW_LP_REPLIES_NONE,
  MW_LP_N_REPLIES
} mw_lp_replies_t;

typedef struct mw_lp_request {
  mw_lp_kind_t kind;
  uint64_t line;        /* 1-based line number of the request */
  const char *data;     /* ROW/DEL: the JSON object; USE: table; AUTH: token;
                         * ARROW: the frame; ERROR: the line, or the part of it
                         * seen (for logs); borrowed until the next feed/next */
  size_t len;
  size_t bytes;         /* input bytes this request took (line + terminator + frame) */
  mw_lp_code_t code;    /* ERROR only */
  mw_lp_replies_t replies; /* REPLIES only */
  char msg[MW_LP_MSG_BYTES]; /* ERROR only */
} mw_lp_request_t;

typedef struct mw_lp_limits {
  size_t max_line_bytes;  /* 0 = default; without the terminator */
  size_t max_frame_bytes; /* 0 = default */
} mw_lp_limits_t;

typedef struct mw_lp_item {
  uint8_t kind;         /* private: rows, err, sync, pong, quit, mode */
  bool done;
  mw_lp_code_t code;
  uint32_t rows;
  uint32_t rows_written; /* rows items refused in part */
  uint64_t line, last_line;
  size_t bytes;         /* input bytes answered */
  size_t msg_off, msg_len; /* in mw_lineproto_t.text */
} mw_lp_item_t;

typedef struct mw_lineproto {
  mw_lp_limits_t lim;
  /* framing */
  mw_buf_t in;
  size_t pos;           /* first unconsumed byte of `in` */
  size_t scan;          /* bytes after pos already searched for '\n' */
  int state;            /* private */
  uint64_t line;        /* lines seen so far */
  uint64_t skip_left;   /* frame bytes still to discard */
  uint64_t frame_len;   /* frame being collected */
  uint64_t frame_line;
  size_t frame_hdr_bytes;
  /* replies */
  mw_lp_item_t *items;  /* ring */
  size_t cap, head, count;
  uint64_t base_ticket; /* ticket of items[head] */
  mw_buf_t text;        /* reply messages of queued items */
  size_t unacked_bytes;
  uint64_t acked_rows;  /* rows acknowledged so far (SYNC <n>) */
  mw_lp_replies_t replies; /* the mode of the replies being drained */
  bool quit;            /* a QUIT reply was drained */
} mw_lineproto_t;

int mw_lp_init(mw_lineproto_t *lp, const mw_lp_limits_t *lim);
void mw_lp_free(mw_lineproto_t *lp);

/* --- framing --- */
/* Append received bytes. Invalidates pointers of earlier requests. */
int mw_lp_feed(mw_lineproto_t *lp, const void *p, size_t n);
/* Next complete request: 1 (req filled), 0 (more input needed). */
int mw_lp_next(mw_lineproto_t *lp, mw_lp_request_t *req);
/* Bytes buffered but not yet returned as requests. */
size_t mw_lp_buffered(const mw_lineproto_t *lp);

/* --- replies (tickets identify items that complete later) --- */
/* A submission of n_rows rows from lines first..last; bytes = its input. */
int mw_lp_push_rows(mw_lineproto_t *lp, uint32_t n_rows, uint64_t first_line, uint64_t last_line,
                    size_t bytes, uint64_t *ticket);
/* Complete it: MW_LP_OK, or a code and a reason. */
void mw_lp_rows_done(mw_lineproto_t *lp, uint64_t ticket, mw_lp_code_t code, const char *reason);
/* The same for a submission refused in part: rows_written (< its rows) of
 * its rows were written anyway, and the reason says which. */
void mw_lp_rows_done_partial(mw_lineproto_t *lp, uint64_t ticket, mw_lp_code_t code,
                             uint32_t rows_written, const char *reason);
int mw_lp_push_err(mw_lineproto_t *lp, uint64_t line, mw_lp_code_t code, const char *msg,
                   size_t bytes);
int mw_lp_push_sync(mw_lineproto_t *lp, size_t bytes, uint64_t *ticket);
void mw_lp_sync_done(mw_lineproto_t *lp, uint64_t ticket);
/* The barrier failed (e.g. the shard was fenced before rows acknowledged
 * with durable_write = false reached the WAL): the SYNC's reply becomes
 * `ERR <line> <code> SYNC failed, ...: <reason>`. */
void mw_lp_sync_failed(mw_lineproto_t *lp, uint64_t ticket, uint64_t line, mw_lp_code_t code,
                       const char *reason);
int mw_lp_push_pong(mw_lineproto_t *lp, size_t bytes);
int mw_lp_push_quit(mw_lineproto_t *lp, size_t bytes);
/* REPLIES: replies of the requests queued after this one follow `mode`. */
int mw_lp_push_replies(mw_lineproto_t *lp, mw_lp_replies_t mode, size_t bytes);
/* The mode before any request (the listener's default); nothing queued yet. */
void mw_lp_replies_default(mw_lineproto_t *lp, mw_lp_replies_t mode);
/* Append the ready replies to out. Sets lp->quit once QUIT is reached
 * (everything queued after it is dropped). Returns the bytes appended. */
int mw_lp_drain(mw_lineproto_t *lp, mw_buf_t *out);
/* Queued replies not drained yet. */
static inline size_t mw_lp_pending(const mw_lineproto_t *lp) { return lp->count; }

const char *mw_lp_code_name(mw_lp_code_t c);
/* "all", "errors", "none" (lower case, as in the config). */
const char *mw_lp_replies_name(mw_lp_replies_t m);
/* Engine status (negative errno) -> reply code: -EXDEV not_owner, -ESTALE
 * fenced, -EROFS sealed, -EAGAIN/-ENOBUFS overloaded, -ENOENT table,
 * -EACCES auth, anything else internal. */
mw_lp_code_t mw_lp_code_from_errno(int status);

#endif
