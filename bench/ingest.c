/*
 * bench_ingest — load generator for the producers' protocol (docs/protocol.md).
 *
 *   bench_ingest [--connections N] [--seconds S] [--warmup W] [--rows R]
 *                [--batch B] [--pipeline P] [--shape small|wide] [--arrow]
 *                [--rate ROWS_PER_S] [--table T] [--id-base I] [--spread] HOST:PORT
 *   bench_ingest --sink [--batch B] HOST:PORT      (a stand-in server)
 *
 * --tls: every connection runs TLS (OpenSSL over memory BIOs, the server's
 * certificate not verified: a benchmark, not a client to copy), handshakes
 * before the clock starts counting writes, and --auth TOKEN sends
 * `AUTH TOKEN` first (plain or TLS). Ciphertext goes out as one heap copy
 * per write; the client's encryption cost is in gen_cpu.
 *
 * N connections (default 16) each send writes of B rows (default 1000), at
 * most P writes (default 8) not yet acknowledged per connection, for S
 * seconds (default 5; --rows caps the total), then wait for the last acks.
 * A write is one send of B NDJSON lines, or one `ARROW <n>` frame of B rows
 * with --arrow. Its ack latency runs from its send to the `OK` that covers its
 * last row. Latencies count the writes sent after the first W seconds
 * (default 1; the warm-up) and before S; rows/s and MB/s count the writes
 * acknowledged in that window, over its length.
 *
 * Row shapes (table columns id int64 not null, name string, v double, and
 * vec fixed_size_list<float32,128> for `wide`):
 *   small  {"id":1000000042,"name":"customer-000000000042","v":42.25}  ~66 B
 *   wide   small + ,"vec":[0.1234,...128 values]                       ~960 B
 * Ids are unique: connection c uses id-base + c * 10^9 + k.
 *
 * Closed loop (default): a connection sends its next write as soon as fewer
 * than P are unacknowledged. Open loop (--rate R): write k of connection c is
 * due at t0 + (k + c/N) * N*B/R seconds; a 1 ms timer sends every due write
 * (if P are already unacknowledged it waits for an ack). The latency is
 * reported from the send (ack_*) and from the due time (sched_p99_ms, which
 * also counts the generator's lateness and pipeline waits).
 *
 * Honesty of the figures: the generator formats rows with a hand-written
 * integer printer into per-slot buffers allocated once (no malloc, no
 * snprintf per row); an ARROW frame is encoded once (src/lance/ipc.h) and
 * only its id column is patched per send. gen_cpu is the generator's own CPU
 * time over the measured wall time (cores it used); --sink measures the
 * generator alone: it counts lines (or frames, B rows each) per read and
 * answers `OK <n>`, doing nothing else.
 *
 * Output, one line of key=value pairs:
 *   mode=ndjson shape=small conns=16 batch=1000 pipeline=8 rate=0 secs=4.00
 *   rows=6000000 rows_per_s=1500000 MB_per_s=99.0 bytes_per_row=66.0
 *   ack_p50_ms=.. ack_p99_ms=.. ack_p999_ms=.. ack_max_ms=.. sched_p99_ms=..
 *   writes=.. gen_cpu=0.21 errors=0
 * Any ERR reply is counted and its first occurrence printed to stderr; exit
 * status 1 when there were errors or a connection closed early.
 */
#include <assert.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <uv.h>

#include "common/buf.h"
#include "lance/batch.h"
#include "lance/ipc.h"

#define MAX_PIPELINE 1024
#define MAX_CONNECTIONS 4096
#define MAX_BATCH_ROWS 100000
#define WIDE_DIM 128
#define ID_STRIDE 1000000000LL
#define DRAIN_LIMIT_S 120 /* after the stop, wait this long for the last acks */
#define SMALL_ROW_MAX_BYTES 128
#define WIDE_ROW_MAX_BYTES (SMALL_ROW_MAX_BYTES + WIDE_DIM * 8 + 16)

typedef struct slot {
  uv_write_t w;
  char *buf;
  size_t cap, len;
  uint64_t end_rows;  /* cumulative rows of the connection at this write's end */
  uint64_t t_send, t_sched;
  bool writing;       /* uv_write callback not yet run: slot not reusable */
  bool measured;      /* sent inside the measured window */
} slot_t;

typedef struct bconn {
  uv_tcp_t tcp;
  uv_connect_t creq;
  int idx;
  int64_t next_id;
  uint64_t sent_rows, acked_rows;
  uint64_t writes_sent;  /* writes issued, for the open-loop schedule */
  slot_t *slots;         /* ring of P slots; [head, head+count) in flight */
  size_t head, count;
  char rbuf[65536];
  size_t rlen;
  bool connected, done;
  SSL *ssl;           /* --tls */
  BIO *bin, *bout;
  char cbuf[65536];   /* ciphertext read */
} bconn_t;

typedef struct opts {
  int conns, batch, pipeline;
  double seconds, warmup, rate;
  int64_t rows_cap, id_base;
  bool wide, arrow, sink, tls, spread;
  const char *table, *auth;
} opts_t;

static opts_t O = {.conns = 16, .batch = 1000, .pipeline = 8, .seconds = 5, .warmup = 1, .table = "events"};
static uv_loop_t *loop;
static bconn_t *cs;
static uint64_t t0, t_warm, t_stop;
static bool stopped;
static int finished;
static uint64_t *lat, *lat_sched;
static size_t n_lat, cap_lat;
static uint64_t errors, bytes_measured, rows_measured, writes_measured, rows_total;
static uv_timer_t tick;
/* ARROW: one encoded frame ("ARROW <n>\n" + stream) and where its ids are */
static mw_buf_t frame;
static size_t frame_ids_off;
static char vecs[10000][7]; /* "0.dddd" */

/* Which of the 10 000 values item d of row id's vector takes. By default
 * (id*7 + d*13) % 10 000: cheap, but rows whose id*7 differ by 1 get vectors
 * 1e-4 apart in every item, near-duplicates no 8-bit quantizer tells apart.
 * --spread mixes id and d so that near ids get unrelated vectors (a vector
 * index's benchmark, bench/vindex_ingest.py, needs rows findable by their
 * own vector); it repeats every 10007 * 101 ids. bench/vindex-peer.mjs
 * computes the same. */
static uint64_t vec_item(int64_t id, int d) {
  uint64_t i = (uint64_t)id, k = (uint64_t)d;
  if (!O.spread) return (i * 7 + k * 13) % 10000;
  return ((i % 10007) * 7919 + k * 104729 + (i % 101) * k * 31) % 10000;
}

/* ------------------------------------------------------------ formatting */

static size_t put_u64(char *p, uint64_t v) {
  char tmp[24];
  size_t n = 0;
  do tmp[n++] = (char)('0' + v % 10), v /= 10;
  while (v);
  for (size_t i = 0; i < n; i++) p[i] = tmp[n - 1 - i];
  return n;
}

static size_t put_str(char *p, const char *s) {
  size_t n = strlen(s);
  memcpy(p, s, n);
  return n;
}

/* One NDJSON row; returns its length (<= WIDE_ROW_MAX_BYTES). */
static size_t put_row(char *p, int64_t id) {
  size_t n = put_str(p, "{\"id\":");
  n += put_u64(p + n, (uint64_t)id);
  n += put_str(p + n, ",\"name\":\"customer-");
  char num[24];
  size_t k = put_u64(num, (uint64_t)id % 1000000000000ULL);
  memset(p + n, '0', 12 - k);
  memcpy(p + n + 12 - k, num, k);
  n += 12;
  n += put_str(p + n, "\",\"v\":");
  n += put_u64(p + n, (uint64_t)id % 1000000);
  n += put_str(p + n, ".25");
  if (O.wide) {
    n += put_str(p + n, ",\"vec\":[");
    for (int d = 0; d < WIDE_DIM; d++) {
      if (d) p[n++] = ',';
      memcpy(p + n, vecs[vec_item(id, d)], 6);
      n += 6;
    }
    p[n++] = ']';
  }
  p[n++] = '}';
  p[n++] = '\n';
  assert(n <= WIDE_ROW_MAX_BYTES);
  return n;
}

/* Build the ARROW frame template: B rows with ids 0..B-1 in the shape's
 * columns, encoded once; frame_ids_off locates the id values for patching. */
static int build_frame(void) {
  mw_schema_t s;
  mw_batch_t b;
  mw_schema_init(&s);
  int id = mw_schema_add(&s, "id", MW_T_INT64, false);
  int nm = mw_schema_add(&s, "name", MW_T_UTF8, true);
  int v = mw_schema_add(&s, "v", MW_T_FLOAT64, true);
  int vc = O.wide ? mw_schema_add(&s, "vec", MW_T_FSL, true) : 0;
  if (id < 0 || nm < 0 || v < 0 || vc < 0) return -ENOMEM;
  if (O.wide) s.fields[vc].fsl_dim = WIDE_DIM, s.fields[vc].item_nullable = true;
  int rc = mw_batch_init(&b, &s);
  float vec[WIDE_DIM];
  char name[40];
  for (int64_t i = 0; i < O.batch && rc == 0; i++) {
    double dv = (double)(i % 1000000) + 0.25;
    int n = snprintf(name, sizeof name, "customer-%012" PRId64, i);
    rc = mw_column_append_fixed(&b.cols[id], &i, 8);
    if (rc == 0) rc = mw_column_append_bytes(&b.cols[nm], name, (size_t)n);
    if (rc == 0) rc = mw_column_append_fixed(&b.cols[v], &dv, 8);
    for (int d = 0; d < WIDE_DIM && O.wide; d++) vec[d] = (float)vec_item(i, d) / 10000.0f;
    if (rc == 0 && O.wide) rc = mw_column_append_fixed(&b.cols[vc], vec, sizeof vec);
    b.n_rows++;
  }
  mw_buf_t enc;
  mw_buf_init(&enc);
  const mw_batch_t *bp = &b;
  mw_err_t err = {0};
  if (rc == 0) rc = mw_ipc_encode(&s, &bp, 1, NULL, &enc, &err);
  if (rc < 0) {
    fprintf(stderr, "bench_ingest: frame: %s %s\n", strerror(-rc), err.msg);
    goto fail;
  }
  char hdr[40];
  int hn = snprintf(hdr, sizeof hdr, "ARROW %zu\n", enc.len);
  rc = mw_buf_append(&frame, hdr, (size_t)hn);
  if (rc == 0) rc = mw_buf_append(&frame, enc.data, enc.len);
  if (rc < 0) goto fail;
  const uint8_t *ids = b.cols[id].values.data;
  uint8_t *at = memmem(frame.data, frame.len, ids, (size_t)O.batch * 8);
  if (at == NULL) {
    rc = -EBADMSG;
    fprintf(stderr, "bench_ingest: frame: id column not found in the encoded stream\n");
    goto fail;
  }
  frame_ids_off = (size_t)(at - frame.data);
  assert(frame_ids_off + (size_t)O.batch * 8 <= frame.len);
fail:
  mw_buf_free(&enc);
  mw_batch_free(&b);
  mw_schema_free(&s);
  return rc;
}

/* ------------------------------------------------------------ generator */

static void send_more(bconn_t *c);
static SSL_CTX *tls_ctx;

/* --tls: a write of ciphertext, a heap copy; sl (or NULL) is its slot. */
typedef struct twrite {
  uv_write_t w;
  bconn_t *c;
  slot_t *sl;
  char data[];
} twrite_t;

static void on_tls_written(uv_write_t *w, int status) {
  twrite_t *t = w->data;
  if (status < 0) fprintf(stderr, "bench_ingest: write: %s\n", uv_strerror(status));
  bconn_t *c = t->c;
  if (t->sl) t->sl->writing = false;
  bool more = t->sl != NULL;
  free(t);
  if (more && !c->done) send_more(c);
}

/* Everything the TLS out BIO holds, written (sl: the slot it carries). */
static void tls_flush(bconn_t *c, slot_t *sl) {
  size_t n = BIO_ctrl_pending(c->bout);
  if (n == 0) {
    if (sl) sl->writing = false;
    return;
  }
  twrite_t *t = malloc(sizeof *t + n);
  if (!t || BIO_read(c->bout, t->data, (int)n) != (int)n) exit(4);
  t->c = c;
  t->sl = sl;
  t->w.data = t;
  uv_buf_t b = uv_buf_init(t->data, (unsigned)n);
  if (uv_write(&t->w, (uv_stream_t *)&c->tcp, &b, 1, on_tls_written) < 0) exit(3);
}

/* Plaintext to the server: through TLS with --tls, else a try_write
 * (small request lines at connect). */
static void send_plain(bconn_t *c, const char *p, size_t n) {
  if (c->ssl) {
    size_t w;
    if (SSL_write_ex(c->ssl, p, n, &w) != 1 || w != n) exit(3);
    tls_flush(c, NULL);
    return;
  }
  uv_buf_t b = uv_buf_init((char *)p, (unsigned)n);
  if (uv_try_write((uv_stream_t *)&c->tcp, &b, 1) != (int)n) {
    fprintf(stderr, "bench_ingest: could not send the first lines\n");
    exit(3);
  }
}

static void on_written(uv_write_t *w, int status) {
  slot_t *sl = w->data;
  if (status < 0) fprintf(stderr, "bench_ingest: write: %s\n", uv_strerror(status));
  sl->writing = false;
  bconn_t *c = w->handle->data;
  if (!c->done) send_more(c);
}

static bool may_send(bconn_t *c, uint64_t now) {
  if (!c->connected || c->done || stopped || c->count >= (size_t)O.pipeline) return false;
  if (O.rows_cap && (int64_t)rows_total >= O.rows_cap) return false;
  if (c->slots[(c->head + c->count) % (size_t)O.pipeline].writing) return false;
  if (O.rate > 0) {
    double per_write_ns = 1e9 * (double)O.conns * O.batch / O.rate;
    uint64_t due = t0 + (uint64_t)(((double)c->writes_sent + (double)c->idx / O.conns) * per_write_ns);
    if (due > now) return false;
  }
  return true;
}

/* Fill one slot with B rows (or the frame with its ids patched) and send it. */
static void send_more(bconn_t *c) {
  uint64_t now = uv_hrtime();
  while (may_send(c, now)) {
    slot_t *sl = &c->slots[(c->head + c->count) % (size_t)O.pipeline];
    int64_t first = c->next_id;
    if (O.arrow) {
      char *ids = sl->buf + frame_ids_off; /* unaligned: after "ARROW <n>\n" */
      for (int i = 0; i < O.batch; i++) {
        int64_t v = first + i;
        memcpy(ids + (size_t)i * 8, &v, 8);
      }
      sl->len = frame.len;
    } else {
      size_t len = 0;
      for (int i = 0; i < O.batch; i++) len += put_row(sl->buf + len, first + i);
      sl->len = len;
    }
    c->next_id += O.batch;
    c->sent_rows += (uint64_t)O.batch;
    rows_total += (uint64_t)O.batch;
    sl->end_rows = c->sent_rows;
    sl->t_send = uv_hrtime();
    sl->t_sched = O.rate > 0 ? t0 + (uint64_t)(((double)c->writes_sent + (double)c->idx / O.conns) * 1e9 *
                                                   O.conns * O.batch / O.rate)
                             : sl->t_send;
    sl->measured = sl->t_send >= t_warm && sl->t_send < t_stop;
    if (sl->measured) writes_measured++;
    c->writes_sent++;
    c->count++;
    sl->writing = true;
    if (c->ssl) {
      size_t w;
      if (SSL_write_ex(c->ssl, sl->buf, sl->len, &w) != 1 || w != sl->len) exit(3);
      tls_flush(c, sl);
      now = sl->t_send;
      continue;
    }
    sl->w.data = sl;
    uv_buf_t b = uv_buf_init(sl->buf, (unsigned)sl->len);
    int rc = uv_write(&sl->w, (uv_stream_t *)&c->tcp, &b, 1, on_written);
    if (rc < 0) {
      fprintf(stderr, "bench_ingest: write: %s\n", uv_strerror(rc));
      exit(3);
    }
    now = sl->t_send;
  }
}

static void record(uint64_t send_lat, uint64_t sched_lat) {
  if (n_lat == cap_lat) {
    cap_lat = cap_lat ? cap_lat * 2 : 65536;
    lat = realloc(lat, cap_lat * sizeof *lat);
    lat_sched = realloc(lat_sched, cap_lat * sizeof *lat_sched);
    if (!lat || !lat_sched) exit(4);
  }
  lat[n_lat] = send_lat;
  lat_sched[n_lat++] = sched_lat;
}

static void acked(bconn_t *c, uint64_t n) {
  c->acked_rows += n;
  uint64_t now = uv_hrtime();
  while (c->count > 0 && c->slots[c->head].end_rows <= c->acked_rows) {
    slot_t *sl = &c->slots[c->head];
    if (sl->measured) record(now - sl->t_send, now - sl->t_sched);
    if (now >= t_warm && now < t_stop) bytes_measured += sl->len, rows_measured += (uint64_t)O.batch;
    c->head = (c->head + 1) % (size_t)O.pipeline;
    c->count--;
  }
}

static void conn_done(bconn_t *c) {
  if (c->done) return;
  c->done = true;
  finished++;
  uv_close((uv_handle_t *)&c->tcp, NULL);
  if (finished == O.conns) uv_close((uv_handle_t *)&tick, NULL);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b) {
  (void)hint;
  bconn_t *c = h->data;
  if (c->ssl) *b = uv_buf_init(c->cbuf, (unsigned)sizeof c->cbuf);
  else *b = uv_buf_init(c->rbuf + c->rlen, (unsigned)(sizeof c->rbuf - c->rlen));
}

static void start_writing(bconn_t *c);

/* --tls: n bytes of ciphertext in; the handshake advanced, plaintext
 * appended to rbuf. Returns the plaintext bytes. */
static size_t tls_in(bconn_t *c, size_t n) {
  if (BIO_write(c->bin, c->cbuf, (int)n) != (int)n) exit(4);
  if (!SSL_is_init_finished(c->ssl)) {
    int r = SSL_do_handshake(c->ssl);
    tls_flush(c, NULL);
    if (r != 1) {
      int e = SSL_get_error(c->ssl, r);
      if (e != SSL_ERROR_WANT_READ) {
        fprintf(stderr, "bench_ingest: TLS handshake failed (%d)\n", e);
        ERR_print_errors_fp(stderr);
        exit(3);
      }
      return 0;
    }
    start_writing(c);
  }
  size_t got = 0, r;
  while (c->rlen + got < sizeof c->rbuf && SSL_read_ex(c->ssl, c->rbuf + c->rlen + got,
                                                       sizeof c->rbuf - c->rlen - got, &r) == 1)
    got += r;
  tls_flush(c, NULL); /* a key update's answer, if any */
  return got;
}

/* Rows of a refused group: "ERR <line> <code> <k> rows (lines a-b) ..." or 1. */
static uint64_t err_rows(const char *p) {
  const char *k = strstr(p, " rows (lines ");
  if (!k) return O.arrow ? (uint64_t)O.batch : 1;
  const char *q = k;
  while (q > p && q[-1] >= '0' && q[-1] <= '9') q--;
  return strtoull(q, NULL, 10);
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b) {
  (void)b;
  bconn_t *c = st->data;
  if (n < 0) {
    if (!c->done) fprintf(stderr, "bench_ingest: connection closed early: %s\n", uv_strerror((int)n));
    errors += c->done ? 0 : 1;
    conn_done(c);
    return;
  }
  if (c->ssl) n = (ssize_t)tls_in(c, (size_t)n);
  c->rlen += (size_t)n;
  char *p = c->rbuf, *nl;
  while ((nl = memchr(p, '\n', c->rlen - (size_t)(p - c->rbuf)))) {
    *nl = 0;
    if (strncmp(p, "OK ", 3) == 0) {
      acked(c, strtoull(p + 3, NULL, 10));
    } else if (strncmp(p, "ERR ", 4) == 0) {
      if (errors++ == 0) fprintf(stderr, "bench_ingest: %s\n", p);
      acked(c, err_rows(p));
    }
    p = nl + 1;
  }
  c->rlen -= (size_t)(p - c->rbuf);
  memmove(c->rbuf, p, c->rlen);
  if (c->rlen == sizeof c->rbuf) c->rlen = 0; /* a reply line longer than the buffer: drop it */
  if (stopped && c->count == 0) {
    conn_done(c);
    return;
  }
  send_more(c);
}

static void on_tick(uv_timer_t *t) {
  (void)t;
  uint64_t now = uv_hrtime();
  if (!stopped && (now >= t_stop || (O.rows_cap && (int64_t)rows_total >= O.rows_cap))) {
    stopped = true;
    if (now < t_stop) t_stop = now;
  }
  bool give_up = stopped && now > t_stop + (uint64_t)DRAIN_LIMIT_S * 1000000000ULL;
  for (int i = 0; i < O.conns; i++) {
    bconn_t *c = &cs[i];
    if (c->done || (!c->connected && !give_up)) continue;
    if (give_up) {
      if (errors++ == 0) fprintf(stderr, "bench_ingest: no ack for %d s after the stop: giving up\n", DRAIN_LIMIT_S);
      conn_done(c);
    } else if (stopped && c->count == 0) conn_done(c);
    else send_more(c);
  }
}

static void on_connect(uv_connect_t *req, int status) {
  bconn_t *c = req->data;
  if (status < 0) {
    fprintf(stderr, "bench_ingest: connect: %s\n", uv_strerror(status));
    exit(3);
  }
  uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
  if (!O.tls) {
    start_writing(c);
    return;
  }
  c->ssl = SSL_new(tls_ctx);
  c->bin = BIO_new(BIO_s_mem());
  c->bout = BIO_new(BIO_s_mem());
  if (!c->ssl || !c->bin || !c->bout) exit(4);
  SSL_set_bio(c->ssl, c->bin, c->bout);
  SSL_set_connect_state(c->ssl);
  (void)SSL_do_handshake(c->ssl); /* the ClientHello */
  tls_flush(c, NULL);
}

/* Connected (and TLS up): AUTH, USE, then the writes. */
static void start_writing(bconn_t *c) {
  char first[600];
  int n = 0;
  if (O.auth) n = snprintf(first, sizeof first, "AUTH %.256s\n", O.auth);
  n += snprintf(first + n, sizeof first - (size_t)n, "USE %.256s\n", O.table);
  send_plain(c, first, (size_t)n);
  c->connected = true;
  send_more(c);
}

/* ----------------------------------------------------------------- sink */

typedef struct sconn {
  uv_tcp_t tcp;
  uint64_t skip;      /* frame bytes still to skip */
  char line[64];      /* partial request line (only the start is kept) */
  size_t line_len;
  bool first_done;    /* the USE line */
} sconn_t;

static char sink_buf[1 << 16];

static void sink_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b) {
  (void)h, (void)hint;
  *b = uv_buf_init(sink_buf, sizeof sink_buf);
}

static void sink_written(uv_write_t *w, int status) {
  (void)status;
  free(w);
}

static void sink_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b) {
  sconn_t *s = st->data;
  if (n < 0) {
    uv_close((uv_handle_t *)st, (uv_close_cb)free);
    return;
  }
  uint64_t rows = 0;
  const char *p = b->base, *end = b->base + n;
  while (p < end) {
    if (s->skip) {
      size_t k = (size_t)(end - p) < s->skip ? (size_t)(end - p) : s->skip;
      p += k, s->skip -= k;
      if (!s->skip) rows += (uint64_t)O.batch;
      continue;
    }
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t k = (size_t)((nl ? nl : end) - p);
    if (s->line_len < sizeof s->line - 1) {
      size_t c = k < sizeof s->line - 1 - s->line_len ? k : sizeof s->line - 1 - s->line_len;
      memcpy(s->line + s->line_len, p, c);
      s->line_len += c;
    }
    if (!nl) break;
    s->line[s->line_len] = 0;
    if (!s->first_done) s->first_done = true;
    else if (strncmp(s->line, "ARROW ", 6) == 0) s->skip = strtoull(s->line + 6, NULL, 10);
    else rows++;
    s->line_len = 0;
    p = nl + 1;
  }
  if (rows) {
    uv_write_t *w = malloc(sizeof *w + 32);
    char *txt = (char *)(w + 1);
    int len = snprintf(txt, 32, "OK %" PRIu64 "\n", rows);
    uv_buf_t ob = uv_buf_init(txt, (unsigned)len);
    uv_write(w, st, &ob, 1, sink_written);
  }
}

static void sink_conn(uv_stream_t *srv, int status) {
  if (status < 0) return;
  sconn_t *s = calloc(1, sizeof *s);
  uv_tcp_init(loop, &s->tcp);
  s->tcp.data = s;
  if (uv_accept(srv, (uv_stream_t *)&s->tcp) == 0) uv_read_start((uv_stream_t *)&s->tcp, sink_alloc, sink_read);
  else uv_close((uv_handle_t *)&s->tcp, (uv_close_cb)free);
}

static int run_sink(const struct sockaddr *sa) {
  static uv_tcp_t srv;
  uv_tcp_init(loop, &srv);
  int rc = uv_tcp_bind(&srv, sa, 0);
  if (rc == 0) rc = uv_listen((uv_stream_t *)&srv, 128, sink_conn);
  if (rc < 0) {
    fprintf(stderr, "bench_ingest: sink: %s\n", uv_strerror(rc));
    return 1;
  }
  struct sockaddr_storage ss;
  int len = sizeof ss;
  uv_tcp_getsockname(&srv, (struct sockaddr *)&ss, &len);
  fprintf(stderr, "bench_ingest: sink listening on port %d\n", ntohs(((struct sockaddr_in *)&ss)->sin_port));
  return uv_run(loop, UV_RUN_DEFAULT);
}

/* ----------------------------------------------------------------- main */

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static double pct_ms(const uint64_t *v, size_t n, double pct) {
  if (n == 0) return 0;
  size_t i = (size_t)((double)n * pct / 100.0);
  return (double)v[i < n ? i : n - 1] / 1e6;
}

static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
         (double)ru.ru_stime.tv_usec / 1e6;
}

static int usage(void) {
  fprintf(stderr, "usage: bench_ingest [--connections N] [--seconds S] [--warmup W] [--rows R] [--batch B] "
                  "[--pipeline P] [--shape small|wide] [--arrow] [--rate ROWS_PER_S] [--table T] "
                  "[--id-base I] [--spread] [--tls] [--auth TOKEN] [--sink] HOST:PORT\n");
  return 2;
}

static int parse_addr(const char *arg, struct sockaddr_storage *sa) {
  char host[256];
  const char *colon = strrchr(arg, ':');
  if (!colon || (size_t)(colon - arg) >= sizeof host) return -EINVAL;
  memcpy(host, arg, (size_t)(colon - arg));
  host[colon - arg] = 0;
  int port = atoi(colon + 1);
  if (host[0] == '[') {
    host[strlen(host) - 1] = 0;
    return uv_ip6_addr(host + 1, port, (struct sockaddr_in6 *)sa);
  }
  return uv_ip4_addr(host, port, (struct sockaddr_in *)sa);
}

int main(int argc, char **argv) {
  static const struct option lo[] = {
      {"connections", 1, 0, 'c'}, {"rows", 1, 0, 'r'},    {"batch", 1, 0, 'b'},   {"table", 1, 0, 't'},
      {"pipeline", 1, 0, 'p'},    {"seconds", 1, 0, 's'}, {"warmup", 1, 0, 'w'},  {"shape", 1, 0, 'S'},
      {"arrow", 0, 0, 'a'},       {"rate", 1, 0, 'R'},    {"id-base", 1, 0, 'i'}, {"sink", 0, 0, 'k'},
      {"tls", 0, 0, 'T'},         {"auth", 1, 0, 'A'},    {"spread", 0, 0, 'V'},  {0, 0, 0, 0}};
  int ch;
  while ((ch = getopt_long(argc, argv, "c:r:b:t:p:s:w:S:aR:i:kTA:V", lo, NULL)) != -1) {
    switch (ch) {
    case 'c': O.conns = atoi(optarg); break;
    case 'r': O.rows_cap = atoll(optarg); break;
    case 'b': O.batch = atoi(optarg); break;
    case 't': O.table = optarg; break;
    case 'p': O.pipeline = atoi(optarg); break;
    case 's': O.seconds = atof(optarg); break;
    case 'w': O.warmup = atof(optarg); break;
    case 'S':
      if (strcmp(optarg, "small") && strcmp(optarg, "wide")) return usage();
      O.wide = strcmp(optarg, "wide") == 0;
      break;
    case 'a': O.arrow = true; break;
    case 'R': O.rate = atof(optarg); break;
    case 'i': O.id_base = atoll(optarg); break;
    case 'k': O.sink = true; break;
    case 'T': O.tls = true; break;
    case 'A': O.auth = optarg; break;
    case 'V': O.spread = true; break;
    default: return usage();
    }
  }
  if (optind + 1 != argc || O.conns < 1 || O.conns > MAX_CONNECTIONS || O.batch < 1 ||
      O.batch > MAX_BATCH_ROWS || O.pipeline < 1 || O.pipeline > MAX_PIPELINE || O.seconds <= 0 ||
      O.warmup < 0 || O.warmup >= O.seconds || O.rate < 0 || O.rows_cap < 0 || O.id_base < 0)
    return usage();
  struct sockaddr_storage sa;
  if (parse_addr(argv[optind], &sa) < 0) return usage();
  loop = uv_default_loop();
  if (O.sink) return run_sink((struct sockaddr *)&sa);
  if (O.tls) {
    tls_ctx = SSL_CTX_new(TLS_client_method());
    if (!tls_ctx) return 1;
    SSL_CTX_set_verify(tls_ctx, SSL_VERIFY_NONE, NULL);
  }

  for (int i = 0; i < 10000; i++)
    vecs[i][0] = '0', vecs[i][1] = '.', vecs[i][2] = (char)('0' + i / 1000), vecs[i][3] = (char)('0' + i / 100 % 10),
    vecs[i][4] = (char)('0' + i / 10 % 10), vecs[i][5] = (char)('0' + i % 10), vecs[i][6] = 0;
  mw_buf_init(&frame);
  if (O.arrow && build_frame() < 0) return 1;
  size_t slot_bytes = O.arrow ? frame.len : (size_t)O.batch * (O.wide ? WIDE_ROW_MAX_BYTES : SMALL_ROW_MAX_BYTES);
  cs = calloc((size_t)O.conns, sizeof *cs);
  if (!cs) return 1;
  for (int i = 0; i < O.conns; i++) {
    bconn_t *c = &cs[i];
    c->idx = i;
    c->next_id = O.id_base + (int64_t)i * ID_STRIDE;
    c->slots = calloc((size_t)O.pipeline, sizeof *c->slots);
    if (!c->slots) return 1;
    for (int k = 0; k < O.pipeline; k++) {
      c->slots[k].buf = malloc(slot_bytes);
      if (!c->slots[k].buf) return 1;
      if (O.arrow) memcpy(c->slots[k].buf, frame.data, frame.len);
    }
  }
  /* connect first, then start the clock once every connection is up */
  for (int i = 0; i < O.conns; i++) {
    uv_tcp_init(loop, &cs[i].tcp);
    uv_tcp_nodelay(&cs[i].tcp, 1);
    cs[i].tcp.data = cs[i].creq.data = &cs[i];
  }
  t0 = uv_hrtime();
  t_warm = t0 + (uint64_t)(O.warmup * 1e9);
  t_stop = t0 + (uint64_t)(O.seconds * 1e9);
  for (int i = 0; i < O.conns; i++)
    uv_tcp_connect(&cs[i].creq, &cs[i].tcp, (struct sockaddr *)&sa, on_connect);
  uv_timer_init(loop, &tick);
  uv_timer_start(&tick, on_tick, 1, 1);
  double cpu0 = 0, cpu_warm = -1;
  cpu0 = cpu_s();
  /* run until the stop; note the CPU clock at the warm-up boundary */
  while (uv_run(loop, UV_RUN_ONCE)) {
    if (cpu_warm < 0 && uv_hrtime() >= t_warm) cpu_warm = cpu_s();
    if (stopped) break;
  }
  double cpu_window = cpu_s() - (cpu_warm < 0 ? cpu0 : cpu_warm);
  uv_run(loop, UV_RUN_DEFAULT);
  double secs = (double)(t_stop - t_warm) / 1e9;
  qsort(lat, n_lat, sizeof *lat, cmp_u64);
  double sched99 = 0;
  if (n_lat) {
    qsort(lat_sched, n_lat, sizeof *lat_sched, cmp_u64);
    sched99 = pct_ms(lat_sched, n_lat, 99);
  }
  printf("mode=%s shape=%s conns=%d batch=%d pipeline=%d rate=%.0f secs=%.2f rows=%" PRIu64
         " rows_per_s=%.0f MB_per_s=%.1f bytes_per_row=%.1f ack_p50_ms=%.3f ack_p99_ms=%.3f "
         "ack_p999_ms=%.3f ack_max_ms=%.3f sched_p99_ms=%.3f writes=%" PRIu64 " gen_cpu=%.2f errors=%" PRIu64
         "\n",
         O.arrow ? "arrow" : "ndjson", O.wide ? "wide" : "small", O.conns, O.batch, O.pipeline, O.rate, secs,
         rows_measured, (double)rows_measured / secs, (double)bytes_measured / secs / 1e6,
         rows_measured ? (double)bytes_measured / (double)rows_measured : 0, pct_ms(lat, n_lat, 50),
         pct_ms(lat, n_lat, 99), pct_ms(lat, n_lat, 99.9), n_lat ? (double)lat[n_lat - 1] / 1e6 : 0, sched99,
         writes_measured, cpu_window / secs, errors);
  for (int i = 0; i < O.conns; i++) {
    for (int k = 0; k < O.pipeline; k++) free(cs[i].slots[k].buf);
    free(cs[i].slots);
  }
  free(cs);
  free(lat);
  free(lat_sched);
  mw_buf_free(&frame);
  SSL_CTX_free(tls_ctx);
  return errors || finished != O.conns ? 1 : 0;
}
