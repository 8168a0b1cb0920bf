/*
 * lineproto.c — framing and reply sequencing for one producer connection.
 *
 * Framing is a small state machine over one input buffer:
 *   LINE      look for '\n' (resuming the search where the last call stopped,
 *             so a long line is scanned once); a line that cannot end within
 *             max_line_bytes turns into ERROR too_long and state DISCARD
 *   DISCARD   drop bytes up to and including the next '\n'
 *   FRAME     wait until frame_len bytes are buffered after an ARROW header
 *   SKIP      drop skip_left bytes (an oversized ARROW frame)
 * Consumed bytes are compacted away on the next feed.
 *
 * Replies are a ring of items in request order; see lineproto.h.
 */
#include "net/lineproto.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ST_LINE = 0, ST_DISCARD, ST_FRAME, ST_SKIP };
enum { IT_ROWS = 1, IT_ERR, IT_SYNC, IT_PONG, IT_QUIT, IT_MODE };

static const char *const CODE_NAMES[MW_LP_N_CODES] = {
    "ok",        "parse",  "schema", "type",       "pk",   "table",   "too_long",
    "not_owner", "fenced", "sealed", "overloaded", "auth", "internal",
    "forbidden"};

const char *mw_lp_code_name(mw_lp_code_t c) {
  return (unsigned)c < MW_LP_N_CODES ? CODE_NAMES[c] : "internal";
}

static const char *const REPLIES_NAMES[MW_LP_N_REPLIES] = {"all", "errors", "none"};
static const char *const REPLIES_WORDS[MW_LP_N_REPLIES] = {"ALL", "ERRORS", "NONE"};

const char *mw_lp_replies_name(mw_lp_replies_t m) {
  assert((unsigned)m < MW_LP_N_REPLIES);
  return REPLIES_NAMES[m];
}

mw_lp_code_t mw_lp_code_from_errno(int status) {
  switch (status) {
  case 0: return MW_LP_OK;
  case -EXDEV:
  case -ESHUTDOWN: return MW_LP_E_NOT_OWNER; /* released (or stopping): no longer ours */
  case -ESTALE: return MW_LP_E_FENCED;
  case -EROFS: return MW_LP_E_SEALED;
  case -EAGAIN:
  case -ENOBUFS: return MW_LP_E_OVERLOADED;
  case -ENOENT: return MW_LP_E_TABLE;
  case -EACCES: return MW_LP_E_AUTH;
  case -EPERM: return MW_LP_E_FORBIDDEN;
  default: return MW_LP_E_INTERNAL;
  }
}

int mw_lp_init(mw_lineproto_t *lp, const mw_lp_limits_t *lim) {
  assert(lp);
  memset(lp, 0, sizeof *lp);
  lp->lim.max_line_bytes = lim && lim->max_line_bytes ? lim->max_line_bytes : MW_LP_DEFAULT_MAX_LINE_BYTES;
  lp->lim.max_frame_bytes = lim && lim->max_frame_bytes ? lim->max_frame_bytes : MW_LP_DEFAULT_MAX_FRAME_BYTES;
  if (lp->lim.max_frame_bytes > MW_LP_MAX_FRAME_BYTES || lp->lim.max_line_bytes < 16 ||
      lp->lim.max_line_bytes > MW_LP_MAX_FRAME_BYTES)
    return -EINVAL;
  return 0;
}

void mw_lp_free(mw_lineproto_t *lp) {
  if (!lp) return;
  mw_buf_free(&lp->in);
  mw_buf_free(&lp->text);
  free(lp->items);
  memset(lp, 0, sizeof *lp);
}

/* ------------------------------------------------------------------ framing */

int mw_lp_feed(mw_lineproto_t *lp, const void *p, size_t n) {
  assert(lp);
  assert(p || n == 0);
  assert(lp->pos <= lp->in.len);
  /* the next frame, announced, fits the buffer at most twice over: keep
   * it (its pages are mapped already) */
  bool frame_fits = lp->state == ST_FRAME && lp->frame_len <= lp->in.cap &&
                    lp->in.cap / 2 <= lp->frame_len;
  if (lp->pos == lp->in.len && lp->in.cap > MW_LP_KEEP_BYTES && !frame_fits) {
    mw_buf_free(&lp->in); /* a long line or frame is gone: give its memory back */
    lp->pos = 0;
  }
  if (lp->pos > 0) { /* compact */
    size_t rest = lp->in.len - lp->pos;
    memmove(lp->in.data, lp->in.data + lp->pos, rest);
    lp->in.len = rest;
    lp->pos = 0;
  }
  /* a frame's buffer grows once, to the whole frame, not by doubling */
  if (lp->state == ST_FRAME && lp->in.len < lp->frame_len &&
      mw_buf_reserve(&lp->in, (size_t)lp->frame_len - lp->in.len) < 0)
    return -ENOMEM;
  return mw_buf_append(&lp->in, p, n);
}

size_t mw_lp_buffered(const mw_lineproto_t *lp) { return lp->in.len - lp->pos; }

static void consume(mw_lineproto_t *lp, size_t n) {
  assert(lp->pos + n <= lp->in.len);
  lp->pos += n;
  lp->scan = 0;
}

static int error_req(mw_lp_request_t *r, uint64_t line, mw_lp_code_t code, size_t bytes,
                     const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int error_req(mw_lp_request_t *r, uint64_t line, mw_lp_code_t code, size_t bytes,
                     const char *fmt, ...) {
  r->kind = MW_LP_ERROR;
  r->line = line;
  r->code = code;
  r->bytes = bytes;
  r->data = NULL;
  r->len = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->msg, sizeof r->msg, fmt, ap);
  va_end(ap);
  return 1;
}

static bool word(const char *s, size_t n, const char *w, size_t *rest) {
  size_t k = strlen(w);
  if (n < k || memcmp(s, w, k) != 0) return false;
  if (n == k) {
    *rest = n;
    return true;
  }
  if (s[k] != ' ') return false;
  while (k < n && s[k] == ' ') k++;
  *rest = k;
  return true;
}

static bool printable_token(const char *s, size_t n, size_t max) {
  if (n == 0 || n >= max) return false;
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] == 0x7f) return false;
  return true;
}

/* "ARROW <bytes>" (the count at s[k..n)): the frame comes next (state
 * FRAME, returns 0), or an oversized one is skipped (state SKIP, ERROR). */
static int arrow_header(mw_lineproto_t *lp, const char *s, size_t n, size_t k, size_t bytes,
                        mw_lp_request_t *r) {
  assert(lp->state == ST_LINE); /* a header is a line */
  uint64_t ln = lp->line, v = 0;
  size_t d = 0;
  for (; k + d < n && d < 12 && s[k + d] >= '0' && s[k + d] <= '9'; d++) v = v * 10 + (uint64_t)(s[k + d] - '0');
  if (d == 0 || k + d != n || v == 0)
    return error_req(r, ln, MW_LP_E_PARSE, bytes, "ARROW needs a byte count (1..%zu)",
                     lp->lim.max_frame_bytes);
  if (v > lp->lim.max_frame_bytes) {
    lp->state = ST_SKIP;
    lp->skip_left = v;
    return error_req(r, ln, MW_LP_E_TOO_LONG, bytes + v,
                     "ARROW frame of %" PRIu64 " bytes exceeds max_frame_bytes %zu; skipped", v,
                     lp->lim.max_frame_bytes);
  }
  assert(v <= MW_LP_MAX_FRAME_BYTES); /* max_frame_bytes is within it (mw_lp_init) */
  lp->state = ST_FRAME;
  lp->frame_len = v;
  lp->frame_line = ln;
  lp->frame_hdr_bytes = bytes;
  return 0; /* the request comes when the frame is complete */
}

/* A request of `kind` whose argument is s[k..n) (DEL, USE, AUTH). */
static int with_arg(mw_lp_request_t *r, mw_lp_kind_t kind, const char *s, size_t n, size_t k) {
  assert(k <= n);
  r->kind = kind;
  r->data = s + k;
  r->len = n - k;
  return 1;
}

/* "REPLIES ALL|ERRORS|NONE" (the word at s[k..n)). */
static int replies_req(mw_lp_request_t *r, const char *s, size_t n, size_t k) {
  assert(k <= n);
  for (int m = 0; m < MW_LP_N_REPLIES; m++)
    if (n - k == strlen(REPLIES_WORDS[m]) && memcmp(s + k, REPLIES_WORDS[m], n - k) == 0) {
      r->kind = MW_LP_REPLIES;
      r->replies = (mw_lp_replies_t)m;
      return 1;
    }
  return error_req(r, r->line, MW_LP_E_PARSE, r->bytes, "REPLIES needs ALL, ERRORS or NONE");
}

/* Classify one complete line (terminator stripped): 1 with a request in
 * *r, 0 when none is due yet (an ARROW header). */
static int parse_line(mw_lineproto_t *lp, const char *s, size_t n, size_t bytes,
                      mw_lp_request_t *r) {
  assert(n > 0); /* empty lines are counted, never parsed */
  assert(n <= lp->lim.max_line_bytes);
  uint64_t ln = lp->line;
  r->line = ln;
  r->bytes = bytes;
  r->data = s;
  r->len = n;
  size_t k;
  if (s[0] == '{') return r->kind = MW_LP_ROW, 1;
  if (word(s, n, "DEL", &k)) {
    if (k == n || s[k] != '{') return error_req(r, ln, MW_LP_E_PARSE, bytes, "DEL needs a JSON object");
    return with_arg(r, MW_LP_DEL, s, n, k);
  }
  if (word(s, n, "USE", &k)) {
    if (!printable_token(s + k, n - k, MW_LP_TABLE_NAME_BYTES))
      return error_req(r, ln, MW_LP_E_PARSE, bytes, "USE needs one table name (1..%d printable bytes)",
                       MW_LP_TABLE_NAME_BYTES - 1);
    return with_arg(r, MW_LP_USE, s, n, k);
  }
  if (word(s, n, "AUTH", &k)) {
    if (!printable_token(s + k, n - k, MW_LP_TOKEN_BYTES))
      return error_req(r, ln, MW_LP_E_AUTH, bytes, "AUTH needs one token");
    return with_arg(r, MW_LP_AUTH, s, n, k);
  }
  if (word(s, n, "REPLIES", &k)) return replies_req(r, s, n, k);
  if (n == 4 && memcmp(s, "SYNC", 4) == 0) return r->kind = MW_LP_SYNC, 1;
  if (n == 4 && memcmp(s, "PING", 4) == 0) return r->kind = MW_LP_PING, 1;
  if (n == 4 && memcmp(s, "QUIT", 4) == 0) return r->kind = MW_LP_QUIT, 1;
  if (word(s, n, "ARROW", &k)) return arrow_header(lp, s, n, k, bytes, r);
  return error_req(r, ln, MW_LP_E_PARSE, bytes,
                   "unknown request (expected a JSON object, DEL, USE, SYNC, PING, QUIT, AUTH, ARROW "
                   "or REPLIES)");
}

/* State FRAME: the ARROW frame as the request once all of it is buffered
 * (1), else 0. */
static int frame_ready(mw_lineproto_t *lp, const char *base, size_t avail, mw_lp_request_t *r) {
  assert(lp->state == ST_FRAME);
  assert(lp->frame_len > 0); /* "ARROW 0" is refused */
  if (avail < lp->frame_len) return 0;
  r->kind = MW_LP_ARROW;
  r->line = lp->frame_line;
  r->data = base;
  r->len = (size_t)lp->frame_len;
  r->bytes = lp->frame_hdr_bytes + r->len;
  consume(lp, r->len);
  lp->state = ST_LINE;
  return 1;
}

int mw_lp_next(mw_lineproto_t *lp, mw_lp_request_t *r) {
  assert(lp);
  assert(r);
  for (;;) {
    const char *base = (const char *)lp->in.data + lp->pos;
    size_t avail = lp->in.len - lp->pos;
    if (lp->state == ST_SKIP) {
      size_t k = avail < lp->skip_left ? avail : (size_t)lp->skip_left;
      consume(lp, k);
      lp->skip_left -= k;
      if (lp->skip_left > 0) return 0;
      lp->state = ST_LINE;
      continue;
    }
    if (lp->state == ST_FRAME) return frame_ready(lp, base, avail, r);
    if (avail == 0) return 0;
    const char *nl = memchr(base + lp->scan, '\n', avail - lp->scan);
    if (lp->state == ST_DISCARD) {
      if (!nl) {
        consume(lp, avail);
        return 0;
      }
      consume(lp, (size_t)(nl - base) + 1);
      lp->state = ST_LINE;
      continue;
    }
    if (!nl) {
      /* the limit plus one byte for a possible '\r' */
      if (avail > lp->lim.max_line_bytes + 1) {
        lp->line++;
        lp->state = ST_DISCARD;
        consume(lp, avail);
        error_req(r, lp->line, MW_LP_E_TOO_LONG, avail,
                  "line longer than max_line_bytes %zu; skipped to the next newline",
                  lp->lim.max_line_bytes);
        r->data = base; /* its start, for logs */
        r->len = avail;
        return 1;
      }
      lp->scan = avail;
      return 0;
    }
    size_t len = (size_t)(nl - base), bytes = len + 1;
    if (len > 0 && base[len - 1] == '\r') len--;
    lp->line++;
    consume(lp, bytes);
    if (len > lp->lim.max_line_bytes) {
      error_req(r, lp->line, MW_LP_E_TOO_LONG, bytes,
                "line of %zu bytes is longer than max_line_bytes %zu", len, lp->lim.max_line_bytes);
    } else if (len == 0) {
      continue; /* empty line: counted, no reply */
    } else if (!parse_line(lp, base, len, bytes, r)) {
      continue;
    }
    if (r->kind == MW_LP_ERROR) { /* the line, for logs */
      r->data = base;
      r->len = len;
    }
    return 1;
  }
}

/* ------------------------------------------------------------------ replies */

static int push(mw_lineproto_t *lp, uint8_t kind, mw_lp_item_t **out, uint64_t *ticket) {
  if (lp->count == lp->cap) {
    size_t nc = lp->cap ? lp->cap * 2 : 16;
    mw_lp_item_t *ni = malloc(nc * sizeof *ni);
    if (!ni) return -ENOMEM;
    for (size_t i = 0; i < lp->count; i++) ni[i] = lp->items[(lp->head + i) % lp->cap];
    free(lp->items);
    lp->items = ni;
    lp->cap = nc;
    lp->head = 0;
  }
  mw_lp_item_t *it = &lp->items[(lp->head + lp->count) % lp->cap];
  memset(it, 0, sizeof *it);
  it->kind = kind;
  if (ticket) *ticket = lp->base_ticket + lp->count;
  lp->count++;
  *out = it;
  return 0;
}

static mw_lp_item_t *by_ticket(mw_lineproto_t *lp, uint64_t ticket) {
  assert(ticket >= lp->base_ticket);
  assert(ticket < lp->base_ticket + lp->count);
  return &lp->items[(lp->head + (ticket - lp->base_ticket)) % lp->cap];
}

static void set_msg(mw_lineproto_t *lp, mw_lp_item_t *it, const char *msg) {
  size_t n = msg ? strnlen(msg, MW_LP_MSG_BYTES) : 0;
  it->msg_off = lp->text.len;
  it->msg_len = 0;
  for (size_t i = 0; i < n; i++) { /* one line: no control bytes */
    char c = (unsigned char)msg[i] < ' ' ? ' ' : msg[i];
    if (mw_buf_append(&lp->text, &c, 1) < 0) return;
    it->msg_len++;
  }
}

int mw_lp_push_rows(mw_lineproto_t *lp, uint32_t n_rows, uint64_t first_line, uint64_t last_line,
                    size_t bytes, uint64_t *ticket) {
  assert(n_rows > 0);
  assert(first_line <= last_line);
  assert(ticket);
  mw_lp_item_t *it;
  int rc = push(lp, IT_ROWS, &it, ticket);
  if (rc < 0) return rc;
  it->rows = n_rows;
  it->line = first_line;
  it->last_line = last_line;
  it->bytes = bytes;
  lp->unacked_bytes += bytes;
  return 0;
}

void mw_lp_rows_done(mw_lineproto_t *lp, uint64_t ticket, mw_lp_code_t code, const char *reason) {
  mw_lp_rows_done_partial(lp, ticket, code, 0, reason);
}

void mw_lp_rows_done_partial(mw_lineproto_t *lp, uint64_t ticket, mw_lp_code_t code,
                             uint32_t rows_written, const char *reason) {
  mw_lp_item_t *it = by_ticket(lp, ticket);
  assert(it->kind == IT_ROWS);
  assert(!it->done);
  assert(code != MW_LP_OK || rows_written == 0);
  assert(rows_written < it->rows);
  it->done = true;
  it->code = code;
  it->rows_written = rows_written;
  if (code == MW_LP_OK) return;
  char msg[MW_LP_MSG_BYTES];
  const char *why = reason ? reason : mw_lp_code_name(code);
  if (rows_written == 0)
    snprintf(msg, sizeof msg, "%" PRIu32 " rows (lines %" PRIu64 "-%" PRIu64 ") not written: %s",
             it->rows, it->line, it->last_line, why);
  else
    snprintf(msg, sizeof msg,
             "%" PRIu32 " rows (lines %" PRIu64 "-%" PRIu64 "): %" PRIu32 " written, %" PRIu32
             " not written: %s",
             it->rows, it->line, it->last_line, rows_written, it->rows - rows_written, why);
  set_msg(lp, it, msg);
}

int mw_lp_push_err(mw_lineproto_t *lp, uint64_t line, mw_lp_code_t code, const char *msg,
                   size_t bytes) {
  assert(code != MW_LP_OK);
  mw_lp_item_t *it;
  int rc = push(lp, IT_ERR, &it, NULL);
  if (rc < 0) return rc;
  it->done = true;
  it->code = code;
  it->line = line;
  it->bytes = bytes;
  lp->unacked_bytes += bytes;
  set_msg(lp, it, msg);
  return 0;
}

int mw_lp_push_sync(mw_lineproto_t *lp, size_t bytes, uint64_t *ticket) {
  mw_lp_item_t *it;
  int rc = push(lp, IT_SYNC, &it, ticket);
  if (rc < 0) return rc;
  it->bytes = bytes;
  lp->unacked_bytes += bytes;
  return 0;
}

void mw_lp_sync_done(mw_lineproto_t *lp, uint64_t ticket) {
  mw_lp_item_t *it = by_ticket(lp, ticket);
  assert(it->kind == IT_SYNC);
  it->done = true;
}

void mw_lp_sync_failed(mw_lineproto_t *lp, uint64_t ticket, uint64_t line, mw_lp_code_t code,
                       const char *reason) {
  mw_lp_item_t *it = by_ticket(lp, ticket);
  assert(it->kind == IT_SYNC);
  assert(!it->done);
  assert(code != MW_LP_OK);
  it->done = true;
  it->code = code;
  it->line = line;
  char msg[MW_LP_MSG_BYTES];
  snprintf(msg, sizeof msg, "SYNC failed, rows acknowledged earlier may be lost: %s",
           reason ? reason : mw_lp_code_name(code));
  set_msg(lp, it, msg);
}

static int push_simple(mw_lineproto_t *lp, uint8_t kind, size_t bytes) {
  mw_lp_item_t *it;
  int rc = push(lp, kind, &it, NULL);
  if (rc < 0) return rc;
  it->done = true;
  it->bytes = bytes;
  lp->unacked_bytes += bytes;
  return 0;
}

int mw_lp_push_pong(mw_lineproto_t *lp, size_t bytes) { return push_simple(lp, IT_PONG, bytes); }
int mw_lp_push_quit(mw_lineproto_t *lp, size_t bytes) { return push_simple(lp, IT_QUIT, bytes); }

int mw_lp_push_replies(mw_lineproto_t *lp, mw_lp_replies_t mode, size_t bytes) {
  assert((unsigned)mode < MW_LP_N_REPLIES);
  int rc = push_simple(lp, IT_MODE, bytes);
  if (rc == 0) lp->items[(lp->head + lp->count - 1) % lp->cap].rows = (uint32_t)mode;
  return rc;
}

void mw_lp_replies_default(mw_lineproto_t *lp, mw_lp_replies_t mode) {
  assert((unsigned)mode < MW_LP_N_REPLIES);
  assert(lp->count == 0);
  lp->replies = mode;
}

static int flush_ok(mw_buf_t *out, uint64_t *pending) {
  if (*pending == 0) return 0;
  char b[32];
  int n = snprintf(b, sizeof b, "OK %" PRIu64 "\n", *pending);
  *pending = 0;
  return mw_buf_append(out, b, (size_t)n);
}

static int put_err(mw_lineproto_t *lp, const mw_lp_item_t *it, mw_buf_t *out) {
  char b[64];
  int n = snprintf(b, sizeof b, "ERR %" PRIu64 " %s ", it->line, mw_lp_code_name(it->code));
  int rc = mw_buf_append(out, b, (size_t)n);
  if (rc == 0) rc = mw_buf_append(out, lp->text.data + it->msg_off, it->msg_len);
  if (rc == 0) rc = mw_buf_append(out, "\n", 1);
  return rc;
}

int mw_lp_drain(mw_lineproto_t *lp, mw_buf_t *out) {
  assert(lp);
  assert(out);
  size_t start = out->len;
  uint64_t ok = 0;
  int rc = 0;
  while (lp->count > 0 && rc == 0 && !lp->quit) {
    mw_lp_item_t *it = &lp->items[lp->head];
    if (!it->done) break;
    if (it->kind == IT_ROWS && it->code == MW_LP_OK) {
      if (lp->replies == MW_LP_REPLIES_ALL) ok += it->rows;
      lp->acked_rows += it->rows;
    } else {
      rc = flush_ok(out, &ok);
      if (rc < 0) break;
      char b[40];
      bool errs = lp->replies != MW_LP_REPLIES_NONE;
      switch (it->kind) {
      case IT_ROWS:
      case IT_ERR: rc = errs ? put_err(lp, it, out) : 0; break;
      case IT_MODE: lp->replies = (mw_lp_replies_t)it->rows; break;
      case IT_SYNC:
        if (it->code != MW_LP_OK) {
          rc = put_err(lp, it, out); /* asked for: answered in every mode */
          break;
        }
        rc = mw_buf_append(out, b, (size_t)snprintf(b, sizeof b, "SYNC %" PRIu64 "\n", lp->acked_rows));
        break;
      case IT_PONG: rc = mw_buf_append(out, "PONG\n", 5); break;
      case IT_QUIT: lp->quit = true; break;
      default: assert(0);
      }
      if (rc < 0) break;
    }
    lp->unacked_bytes -= it->bytes;
    lp->head = (lp->head + 1) % lp->cap;
    lp->count--;
    lp->base_ticket++;
  }
  if (rc == 0) rc = flush_ok(out, &ok);
  if (lp->count == 0) mw_buf_reset(&lp->text);
  assert(lp->count > 0 || lp->unacked_bytes == 0);
  return rc < 0 ? rc : (int)(out->len - start);
}
