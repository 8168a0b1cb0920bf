/*
 * fuzz_lineproto.c — libFuzzer target for the producers' line protocol
 * (src/net/lineproto.c): framing (mw_lp_feed/mw_lp_next, incl. ARROW
 * <nbytes> frames, too_long lines and frames, "\r\n", AUTH, USE, DEL) and
 * reply sequencing (mw_lp_push_* / *_done / mw_lp_drain).
 *
 * Input: byte 0 chooses the limits (bit 7 set: the defaults, 1 MiB lines and
 * 64 MiB frames; else max_line_bytes = 16 + 8 * (bits 0-4) and
 * max_frame_bytes = 16 << 2 * (bits 5-6)), byte 1 seeds a xorshift PRNG, the
 * rest (<= 16 KiB) is the byte stream a producer sends. Seeds:
 * fuzz/corpus/lineproto/.
 *
 * Framing invariants: the stream fed at once (A) and fed in PRNG-sized
 * chunks of 1..256 bytes (B) give the same requests: kind, line, bytes,
 * payload; errors the same code, and the same message except too_long
 * (whose wording depends on whether the newline had arrived). Both end with
 * the same bytes buffered, and B never buffers more than one partial line
 * (max_line_bytes + 1) or one frame plus the last chunk.
 *
 * Reply invariants: B's requests are answered as the server does (rows
 * grouped into submissions cut at random and by every other request; ARROW a
 * submission of 1..7 rows; errors, SYNC, PING, QUIT, REPLIES), completed in
 * PRNG order with OK or an error whose reason holds control bytes (some
 * refused in part: k of the rows written), SYNCs sometimes failed, drained
 * at random moments; the reply mode before any request is PRNG-chosen. The
 * drained text, with consecutive OK lines merged, must equal the model's:
 * every reply in request order as its mode allows (ERRORS: no OK; NONE: no
 * OK, no ERR; SYNC and PONG always), SYNC <rows OK so far>, nothing after
 * QUIT, one line per reply without control bytes; and once everything is
 * drained nothing is left unacked.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/lineproto.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

#define CHECK(c)                                                                   \
  do {                                                                             \
    if (!(c)) {                                                                    \
      fprintf(stderr, "fuzz_lineproto: check failed: %s (line %d)\n", #c, __LINE__); \
      abort();                                                                     \
    }                                                                              \
  } while (0)

#define MAX_INPUT_BYTES 16384 /* every request takes >= 2 bytes */
#define MAX_REQS (MAX_INPUT_BYTES / 2 + 8)

typedef struct req {
  mw_lp_kind_t kind;
  uint64_t line;
  size_t bytes, len, off; /* payload in the log buffer */
  mw_lp_code_t code;
  char msg[MW_LP_MSG_BYTES];
} req_t;

typedef struct reqlog {
  req_t *r;
  size_t n;
  mw_buf_t data;
} reqlog_t;

static uint32_t rng;
static uint32_t next_rand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 17;
  rng ^= rng << 5;
  return rng;
}

static void log_req(reqlog_t *L, const mw_lp_request_t *q) {
  CHECK(L->n < MAX_REQS);
  req_t *r = &L->r[L->n++];
  memset(r, 0, sizeof *r);
  r->kind = q->kind;
  r->line = q->line;
  r->bytes = q->bytes;
  r->code = q->kind == MW_LP_ERROR ? q->code : MW_LP_OK;
  if (q->kind == MW_LP_ERROR) {
    CHECK(q->code != MW_LP_OK && q->msg[0] != 0 && strlen(q->msg) < MW_LP_MSG_BYTES);
    memcpy(r->msg, q->msg, sizeof r->msg);
    return;
  }
  CHECK(q->len == 0 || q->data != NULL);
  r->off = L->data.len;
  r->len = q->len;
  CHECK(mw_buf_append(&L->data, q->data, q->len) == 0);
}

static bool same_req(const reqlog_t *A, const req_t *a, const reqlog_t *B, const req_t *b) {
  if (a->kind != b->kind || a->line != b->line || a->code != b->code) return false;
  if (a->kind == MW_LP_ERROR)
    return a->code == MW_LP_E_TOO_LONG || strcmp(a->msg, b->msg) == 0;
  return a->bytes == b->bytes && a->len == b->len &&
         memcmp(A->data.data + a->off, B->data.data + b->off, a->len) == 0;
}

/* ----------------------------------------------------------- reply model */

enum { M_ROWS = 1, M_ERR, M_SYNC, M_PONG, M_QUIT, M_MODE };

typedef struct item {
  int kind;
  uint64_t ticket, line, last_line;
  uint32_t rows, written;
  mw_lp_replies_t mode; /* M_MODE */
  bool done;
  mw_lp_code_t code;
  char msg[MW_LP_MSG_BYTES];
} item_t;

typedef struct sim {
  mw_lineproto_t *lp;
  item_t items[MAX_REQS];
  size_t n, lo;        /* items; items[0, lo) are done */
  uint32_t open_rows; /* the open submission */
  uint64_t open_first, open_last;
  size_t open_bytes;
  mw_buf_t out;
  mw_lp_replies_t mode0; /* before any request */
} sim_t;

static item_t *add_item(sim_t *s, int kind) {
  CHECK(s->n < MAX_REQS);
  item_t *it = &s->items[s->n++];
  memset(it, 0, sizeof *it);
  it->kind = kind;
  return it;
}

static void cut(sim_t *s) {
  if (s->open_rows == 0) return;
  item_t *it = add_item(s, M_ROWS);
  it->rows = s->open_rows;
  it->line = s->open_first;
  it->last_line = s->open_last;
  CHECK(mw_lp_push_rows(s->lp, it->rows, it->line, it->last_line, s->open_bytes, &it->ticket) == 0);
  s->open_rows = 0;
  s->open_bytes = 0;
}

static void complete(sim_t *s, item_t *it) {
  static const char *reasons[] = {"shard sealed", "bad\nreason\r\twith\001control bytes", ""};
  uint32_t r = next_rand();
  it->done = true;
  if (it->kind == M_ROWS) {
    it->code = r % 4 == 0 ? (mw_lp_code_t)(MW_LP_E_NOT_OWNER + (r >> 8) % 4) : MW_LP_OK;
    const char *why = reasons[(r >> 4) % 3];
    snprintf(it->msg, sizeof it->msg, "%s", why);
    it->written = it->code != MW_LP_OK && r % 3 == 0 ? (r >> 12) % it->rows : 0;
    mw_lp_rows_done_partial(s->lp, it->ticket, it->code, it->written, it->code == MW_LP_OK ? NULL : why);
  } else if (it->kind == M_SYNC) {
    it->code = r % 5 == 0 ? MW_LP_E_FENCED : MW_LP_OK;
    if (it->code == MW_LP_OK) mw_lp_sync_done(s->lp, it->ticket);
    else mw_lp_sync_failed(s->lp, it->ticket, it->line, it->code, "fenced by epoch 9");
  }
}

/* Complete a random few of the oldest 16 open items (all: every one). */
static void complete_some(sim_t *s, bool all) {
  while (s->lo < s->n && s->items[s->lo].done) s->lo++;
  size_t end = all || s->n - s->lo < 16 ? s->n : s->lo + 16;
  for (size_t i = s->lo; i < end; i++) {
    item_t *it = &s->items[i];
    if (!it->done && (all || next_rand() % 3 == 0)) complete(s, it);
  }
}

static void drain(sim_t *s) {
  size_t before = s->out.len;
  int rc = mw_lp_drain(s->lp, &s->out);
  CHECK(rc >= 0 && (size_t)rc == s->out.len - before);
}

static void answer(sim_t *s, const mw_lp_request_t *q) {
  item_t *it;
  switch (q->kind) {
  case MW_LP_ROW:
  case MW_LP_DEL:
    if (s->open_rows == 0) s->open_first = q->line;
    s->open_rows++;
    s->open_last = q->line;
    s->open_bytes += q->bytes;
    if (next_rand() % 4 == 0) cut(s);
    return;
  case MW_LP_USE:
  case MW_LP_AUTH: return;
  case MW_LP_ARROW:
    cut(s);
    s->open_rows = 1 + (uint32_t)(q->len % 7);
    s->open_first = s->open_last = q->line;
    s->open_bytes = q->bytes;
    cut(s);
    return;
  case MW_LP_ERROR:
    cut(s);
    it = add_item(s, M_ERR);
    it->done = true;
    it->line = q->line;
    it->code = q->code;
    snprintf(it->msg, sizeof it->msg, "%s", q->msg);
    CHECK(mw_lp_push_err(s->lp, q->line, q->code, q->msg, q->bytes) == 0);
    return;
  case MW_LP_SYNC:
    cut(s);
    it = add_item(s, M_SYNC);
    it->line = q->line;
    CHECK(mw_lp_push_sync(s->lp, q->bytes, &it->ticket) == 0);
    return;
  case MW_LP_PING:
    cut(s);
    add_item(s, M_PONG)->done = true;
    CHECK(mw_lp_push_pong(s->lp, q->bytes) == 0);
    return;
  case MW_LP_QUIT:
    cut(s);
    add_item(s, M_QUIT)->done = true;
    CHECK(mw_lp_push_quit(s->lp, q->bytes) == 0);
    return;
  case MW_LP_REPLIES:
    cut(s);
    it = add_item(s, M_MODE);
    it->done = true;
    it->mode = q->replies;
    CHECK(mw_lp_push_replies(s->lp, q->replies, q->bytes) == 0);
    return;
  }
  CHECK(0);
}

static void put_clean(mw_buf_t *b, const char *m) {
  for (; *m; m++) {
    char c = (unsigned char)*m < ' ' ? ' ' : *m;
    CHECK(mw_buf_append(b, &c, 1) == 0);
  }
}

static void putf(mw_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(mw_buf_t *b, const char *fmt, ...) {
  char t[2 * MW_LP_MSG_BYTES];
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(t, sizeof t, fmt, ap);
  va_end(ap);
  CHECK(k >= 0 && (size_t)k < sizeof t);
  CHECK(mw_buf_append(b, t, (size_t)k) == 0);
}

/* The replies as docs/protocol.md describes them, OK lines fully merged. */
static void model(const sim_t *s, mw_buf_t *m) {
  uint64_t ok = 0, acked = 0;
  mw_lp_replies_t mode = s->mode0;
  for (size_t i = 0; i < s->n; i++) {
    const item_t *it = &s->items[i];
    if (it->kind == M_ROWS && it->code == MW_LP_OK) {
      if (mode == MW_LP_REPLIES_ALL) ok += it->rows;
      acked += it->rows;
      continue;
    }
    if (it->kind == M_MODE) { /* prints nothing; OKs on both sides merge */
      mode = it->mode;
      continue;
    }
    if ((it->kind == M_ERR || it->kind == M_ROWS) && mode == MW_LP_REPLIES_NONE) continue;
    if (ok) putf(m, "OK %" PRIu64 "\n", ok);
    ok = 0;
    if (it->kind == M_QUIT) return;
    if (it->kind == M_PONG) putf(m, "PONG\n");
    if (it->kind == M_SYNC && it->code == MW_LP_OK) putf(m, "SYNC %" PRIu64 "\n", acked);
    if (it->kind == M_SYNC && it->code != MW_LP_OK) {
      putf(m, "ERR %" PRIu64 " %s SYNC failed, rows acknowledged earlier may be lost: ", it->line,
           mw_lp_code_name(it->code));
      put_clean(m, "fenced by epoch 9");
      putf(m, "\n");
    }
    if (it->kind == M_ERR) {
      putf(m, "ERR %" PRIu64 " %s ", it->line, mw_lp_code_name(it->code));
      put_clean(m, it->msg);
      putf(m, "\n");
    }
    if (it->kind == M_ROWS && it->written == 0)
      putf(m, "ERR %" PRIu64 " %s %" PRIu32 " rows (lines %" PRIu64 "-%" PRIu64 ") not written: ",
           it->line, mw_lp_code_name(it->code), it->rows, it->line, it->last_line);
    if (it->kind == M_ROWS && it->written > 0)
      putf(m, "ERR %" PRIu64 " %s %" PRIu32 " rows (lines %" PRIu64 "-%" PRIu64 "): %" PRIu32
           " written, %" PRIu32 " not written: ", it->line, mw_lp_code_name(it->code), it->rows,
           it->line, it->last_line, it->written, it->rows - it->written);
    if (it->kind == M_ROWS) {
      put_clean(m, it->msg[0] ? it->msg : "");
      putf(m, "\n");
    }
  }
  if (ok) putf(m, "OK %" PRIu64 "\n", ok);
}

/* Merge consecutive "OK n" lines; check every line is printable text. */
static void merge_ok(const mw_buf_t *in, mw_buf_t *m) {
  uint64_t ok = 0;
  const char *p = (const char *)in->data, *e = p + in->len;
  while (p < e) {
    const char *nl = memchr(p, '\n', (size_t)(e - p));
    CHECK(nl != NULL);
    for (const char *q = p; q < nl; q++) CHECK((unsigned char)*q >= ' ');
    if (nl - p > 3 && memcmp(p, "OK ", 3) == 0) {
      uint64_t v = strtoull(p + 3, NULL, 10);
      CHECK(v > 0);
      ok += v;
    } else {
      if (ok) putf(m, "OK %" PRIu64 "\n", ok);
      ok = 0;
      CHECK(mw_buf_append(m, p, (size_t)(nl - p) + 1) == 0);
    }
    p = nl + 1;
  }
  if (ok) putf(m, "OK %" PRIu64 "\n", ok);
}

/* ------------------------------------------------------------------ main */

static void next_all(mw_lineproto_t *lp, reqlog_t *L, sim_t *s) {
  mw_lp_request_t q;
  int rc;
  while ((rc = mw_lp_next(lp, &q)) == 1) {
    log_req(L, &q);
    if (s) answer(s, &q);
  }
  CHECK(rc == 0);
  size_t cap = lp->lim.max_line_bytes + 1;
  if (lp->frame_len > cap) cap = (size_t)lp->frame_len;
  CHECK(mw_lp_buffered(lp) <= cap);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  if (n < 2 || n > MAX_INPUT_BYTES + 2) return 0;
  mw_lp_limits_t lim = {0};
  if (!(d[0] & 0x80)) {
    lim.max_line_bytes = 16 + 8 * (size_t)(d[0] & 0x1f);
    lim.max_frame_bytes = (size_t)16 << (2 * ((d[0] >> 5) & 3));
  }
  rng = 0x9e3779b9u ^ ((uint32_t)d[1] * 0x01000193u);
  const uint8_t *p = d + 2;
  n -= 2;

  static reqlog_t A, B;
  static sim_t s;
  if (!A.r) {
    A.r = calloc(MAX_REQS, sizeof *A.r);
    B.r = calloc(MAX_REQS, sizeof *B.r);
    CHECK(A.r && B.r);
  }
  A.n = B.n = 0;
  mw_buf_reset(&A.data);
  mw_buf_reset(&B.data);

  mw_lineproto_t la, lb;
  CHECK(mw_lp_init(&la, &lim) == 0 && mw_lp_init(&lb, &lim) == 0);
  CHECK(mw_lp_feed(&la, p, n) == 0);
  next_all(&la, &A, NULL);

  s.lp = &lb;
  s.mode0 = (mw_lp_replies_t)(next_rand() % MW_LP_N_REPLIES);
  mw_lp_replies_default(&lb, s.mode0);
  s.n = s.lo = 0;
  s.open_rows = 0;
  s.open_bytes = 0;
  mw_buf_reset(&s.out);
  for (size_t off = 0; off < n;) {
    uint32_t bits = next_rand() % 9;
    size_t k = 1 + next_rand() % (1u << bits);
    if (k > n - off) k = n - off;
    CHECK(mw_lp_feed(&lb, p + off, k) == 0);
    off += k;
    next_all(&lb, &B, &s);
    complete_some(&s, false);
    if (next_rand() % 2) drain(&s);
  }
  cut(&s);
  complete_some(&s, true);
  drain(&s);

  /* framing: chunking does not matter */
  CHECK(A.n == B.n);
  for (size_t i = 0; i < A.n; i++) CHECK(same_req(&A, &A.r[i], &B, &B.r[i]));
  CHECK(mw_lp_buffered(&la) == mw_lp_buffered(&lb));
  /* replies: the model's text */
  mw_buf_t want = MW_BUF_INIT, got = MW_BUF_INIT;
  model(&s, &want);
  merge_ok(&s.out, &got);
  if (want.len != got.len || memcmp(want.data, got.data, want.len) != 0) {
    fprintf(stderr, "want:\n%.*s\ngot:\n%.*s\n", (int)want.len, (const char *)want.data,
            (int)got.len, (const char *)got.data);
    CHECK(0);
  }
  CHECK(lb.quit || (mw_lp_pending(&lb) == 0 && lb.unacked_bytes == 0));
  mw_buf_free(&want);
  mw_buf_free(&got);
  mw_lp_free(&la);
  mw_lp_free(&lb);
  return 0;
}
