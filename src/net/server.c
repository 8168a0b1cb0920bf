/*
 * server.c — producer connections on the libuv loop.
 *
 * Design: one conn_t per socket with its lineproto state, the table chosen by
 * USE, a jsonrow parser for that table and one open submission (sub_t) that
 * collects rows. Everything that produces a reply first cuts the open
 * submission, so reply items stay in request order. A conn_t lives while its
 * handles are open or any engine completion is outstanding (refs); a
 * completion that arrives after the socket closed only drops its ref.
 *
 * Reads: libuv allocates from one 64 KiB buffer shared by every connection
 * (alloc and read run back to back on the loop thread); each chunk is fed
 * and fully processed, then the flow-control predicate decides whether to
 * keep reading (see server.h). Writes: each drain of ready replies is one
 * uv_write of a heap copy; write_queue_bytes counts them until their
 * callback.
 */
#include "net/server.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "lance/ipc.h"
#include "net/arrowframe.h"
#include "net/jsonrow.h"
#include "net/lineproto.h"

typedef struct conn conn_t;

typedef struct sub {
  conn_t *c;
  mw_batch_t batch;
  void *table;
  uint32_t rows;
  uint64_t first_line, last_line;
  size_t bytes;
  uint64_t ticket;
  uint64_t t0_ns;
  char table_name[MW_LP_TABLE_NAME_BYTES];
} sub_t;

struct conn {
  uv_tcp_t tcp;
  uv_timer_t idle;
  mw_server_t *srv;
  conn_t *prev, *next;
  mw_lineproto_t lp;
  bool authed, reading, closing, eof;
  int handles_open;
  int refs;                  /* engine completions outstanding */
  void *table;
  const mw_schema_t *schema;
  char table_name[MW_LP_TABLE_NAME_BYTES];
  mw_jsonrow_parser_t parser;
  bool parser_ok;
  sub_t *open;
  size_t write_queue_bytes;
  int writes;
};

typedef struct wreq {
  uv_write_t req;
  conn_t *c;
  size_t len;
  char data[];
} wreq_t;

struct mw_server {
  uv_loop_t *loop;
  mw_server_opts_t opts;
  mw_fe_engine_t eng;
  char *token, *default_table;
  uv_tcp_t listeners[MW_SERVER_MAX_LISTEN];
  size_t n_listeners;
  conn_t *conns;
  size_t n_conns;
  bool stopping;
  int closing_handles;
  void (*stop_cb)(void *);
  void *stop_arg;
  mw_metric_family_t *m_conn, *m_conn_total, *m_rows, *m_bytes, *m_errors, *m_lat;
  /* One read buffer for every connection: libuv calls alloc and read back to
   * back on the loop thread, and each chunk is fed to lineproto at once. */
  char *rbuf;
  bool rbuf_busy;
};

/* ------------------------------------------------------------------ metrics */

static void metrics_init(mw_server_t *s) {
  mw_metrics_t *m = s->opts.metrics;
  if (!m) return;
  static const char *const tl[1] = {"table"}, *const cl[1] = {"code"};
  s->m_conn = mw_metrics_register(m, MW_METRIC_GAUGE, "memwald_connections",
                                  "Open producer connections.", NULL, 0, NULL, 0);
  s->m_conn_total = mw_metrics_register(m, MW_METRIC_COUNTER, "memwald_connections_total",
                                        "Producer connections accepted.", NULL, 0, NULL, 0);
  s->m_rows = mw_metrics_register(m, MW_METRIC_COUNTER, "memwald_rows_ingested_total",
                                  "Rows acknowledged to producers.", tl, 1, NULL, 0);
  s->m_bytes = mw_metrics_register(m, MW_METRIC_COUNTER, "memwald_bytes_ingested_total",
                                   "Request bytes of acknowledged rows.", tl, 1, NULL, 0);
  s->m_errors = mw_metrics_register(m, MW_METRIC_COUNTER, "memwald_errors_total",
                                    "ERR replies sent, by code.", cl, 1, NULL, 0);
  s->m_lat = mw_metrics_register(m, MW_METRIC_HISTOGRAM, "memwald_ack_latency_seconds",
                                 "From submission to acknowledgement.", NULL, 0, NULL, 0);
}

static void count_conn(mw_server_t *s, int delta) {
  if (s->m_conn) mw_gauge_add(mw_metric_series(s->m_conn, NULL), delta);
  if (s->m_conn_total && delta > 0) mw_counter_add(mw_metric_series(s->m_conn_total, NULL), 1);
}

static void count_error(mw_server_t *s, mw_lp_code_t code) {
  if (!s->m_errors) return;
  const char *v[1] = {mw_lp_code_name(code)};
  mw_counter_add(mw_metric_series(s->m_errors, v), 1);
}

/* ------------------------------------------------------------------ lifetime */

static void conn_maybe_free(conn_t *c) {
  if (c->handles_open > 0 || c->refs > 0 || c->writes > 0) return;
  assert(c->closing);
  if (c->open) {
    mw_batch_free(&c->open->batch);
    free(c->open);
  }
  if (c->parser_ok) mw_jsonrow_free(&c->parser);
  mw_lp_free(&c->lp);
  free(c);
}

static void server_maybe_done(mw_server_t *s) {
  if (!s->stopping || s->closing_handles > 0 || s->n_conns > 0) return;
  void (*cb)(void *) = s->stop_cb;
  void *arg = s->stop_arg;
  free(s->token);
  free(s->default_table);
  free(s->rbuf);
  free(s);
  if (cb) cb(arg);
}

static void on_conn_handle_closed(uv_handle_t *h) {
  conn_t *c = h->data;
  c->handles_open--;
  if (c->handles_open == 0) {
    mw_server_t *s = c->srv;
    s->n_conns--;
    count_conn(s, -1);
    c->srv = NULL;
    conn_maybe_free(c);
    server_maybe_done(s);
  }
}

static void conn_close(conn_t *c) {
  assert(c && c->srv);
  if (c->closing) return;
  c->closing = true;
  mw_server_t *s = c->srv;
  if (c->prev) c->prev->next = c->next;
  else s->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  uv_close((uv_handle_t *)&c->tcp, on_conn_handle_closed);
  uv_close((uv_handle_t *)&c->idle, on_conn_handle_closed);
}

/* ------------------------------------------------------------------ writing */

static void flow(conn_t *c);

static void on_write(uv_write_t *req, int status) {
  wreq_t *w = req->data;
  conn_t *c = w->c;
  c->write_queue_bytes -= w->len;
  c->writes--;
  free(w);
  if (c->closing) {
    conn_maybe_free(c);
    return;
  }
  if (status < 0) {
    conn_close(c);
    return;
  }
  flow(c);
}

/* Write every ready reply. */
static void send_ready(conn_t *c) {
  assert(c);
  if (c->closing) return;
  mw_buf_t out = MW_BUF_INIT;
  int rc = mw_lp_drain(&c->lp, &out);
  if (rc < 0) {
    mw_buf_free(&out);
    conn_close(c);
    return;
  }
  if (out.len > 0) {
    wreq_t *w = malloc(sizeof *w + out.len);
    if (!w) {
      mw_buf_free(&out);
      conn_close(c);
      return;
    }
    memcpy(w->data, out.data, out.len);
    w->len = out.len;
    w->c = c;
    w->req.data = w;
    uv_buf_t b = uv_buf_init(w->data, (unsigned)w->len);
    if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_write) < 0) {
      free(w);
      mw_buf_free(&out);
      conn_close(c);
      return;
    }
    c->write_queue_bytes += w->len;
    c->writes++;
  }
  mw_buf_free(&out);
}

/* ------------------------------------------------------------------ flow */

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf);
static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf);

static void flow(conn_t *c) {
  if (c->closing) return;
  mw_server_t *s = c->srv;
  assert(s && c->handles_open == 2);
  if (c->lp.quit || c->eof) {
    /* close once every reply is out and nothing is in flight */
    if (mw_lp_pending(&c->lp) == 0 && c->write_queue_bytes == 0) conn_close(c);
    else if (c->lp.quit && c->write_queue_bytes == 0 && c->refs == 0) conn_close(c);
    if (c->reading) {
      uv_read_stop((uv_stream_t *)&c->tcp);
      c->reading = false;
    }
    return;
  }
  bool want = c->lp.unacked_bytes <= s->opts.max_unacked_bytes_per_connection &&
              c->write_queue_bytes <= s->opts.max_reply_bytes_per_connection;
  if (want && !c->reading) {
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0) c->reading = true;
  } else if (!want && c->reading) {
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = false;
  }
}

/* ------------------------------------------------------------------ submissions */

static uint64_t now_ns(void) { return uv_hrtime(); }

static void on_sub_done(void *arg, int status, const char *reason) {
  sub_t *b = arg;
  conn_t *c = b->c;
  assert(c && c->refs > 0);
  c->refs--;
  if (!c->closing) {
    mw_server_t *s = c->srv;
    mw_lp_code_t code = mw_lp_code_from_errno(status);
    mw_lp_rows_done(&c->lp, b->ticket, code, status ? (reason ? reason : mw_strerror(status)) : NULL);
    if (code != MW_LP_OK) count_error(s, code);
    if (code == MW_LP_OK && s->m_rows) {
      const char *v[1] = {b->table_name};
      mw_counter_add(mw_metric_series(s->m_rows, v), b->rows);
      mw_counter_add(mw_metric_series(s->m_bytes, v), b->bytes);
    }
    if (s->m_lat) mw_histogram_observe(mw_metric_series(s->m_lat, NULL), s->m_lat,
                                       (double)(now_ns() - b->t0_ns) / 1e9);
    send_ready(c);
    flow(c);
  }
  mw_batch_free(&b->batch);
  free(b);
  if (c->closing) conn_maybe_free(c);
}

/* Hand the open submission to the engine (if it holds rows). */
static void cut(conn_t *c) {
  sub_t *b = c->open;
  if (!b) return;
  assert(b->c == c && b->batch.n_rows == (int64_t)b->rows);
  c->open = NULL;
  if (b->rows == 0) {
    mw_batch_free(&b->batch);
    free(b);
    return;
  }
  mw_server_t *s = c->srv;
  int rc = mw_lp_push_rows(&c->lp, b->rows, b->first_line, b->last_line, b->bytes, &b->ticket);
  if (rc < 0) { /* out of memory: the rows cannot even be answered */
    mw_batch_free(&b->batch);
    free(b);
    conn_close(c);
    return;
  }
  b->t0_ns = now_ns();
  mw_err_t err = {0};
  c->refs++;
  rc = s->eng.submit(s->eng.data, b->table, &b->batch, on_sub_done, b, &err);
  if (rc < 0) {
    c->refs--;
    mw_lp_rows_done(&c->lp, b->ticket, mw_lp_code_from_errno(rc), err.code ? err.msg : mw_strerror(rc));
    count_error(s, mw_lp_code_from_errno(rc));
    mw_batch_free(&b->batch);
    free(b);
  }
}

static sub_t *open_sub(conn_t *c) {
  if (c->open) return c->open;
  sub_t *b = calloc(1, sizeof *b);
  if (!b) return NULL;
  if (mw_batch_init(&b->batch, c->schema) < 0) {
    free(b);
    return NULL;
  }
  b->c = c;
  b->table = c->table;
  snprintf(b->table_name, sizeof b->table_name, "%s", c->table_name);
  c->open = b;
  return b;
}

static void reply_err(conn_t *c, uint64_t line, mw_lp_code_t code, const char *msg, size_t bytes) {
  cut(c);
  count_error(c->srv, code);
  if (mw_lp_push_err(&c->lp, line, code, msg, bytes) < 0) conn_close(c);
}

static bool use_table(conn_t *c, const char *name, size_t len) {
  mw_server_t *s = c->srv;
  const mw_schema_t *schema = NULL;
  void *t = s->eng.table_find(s->eng.data, name, len, &schema);
  if (!t || !schema) return false;
  if (c->parser_ok) mw_jsonrow_free(&c->parser);
  c->parser_ok = false;
  mw_jsonrow_opts_t o = {.ignore_unknown_fields = s->opts.ignore_unknown_fields,
                         .max_line_bytes = c->lp.lim.max_line_bytes,
                         .delete_keep = s->eng.delete_keep ? s->eng.delete_keep(s->eng.data, t) : NULL};
  if (mw_jsonrow_init(&c->parser, schema, &o) < 0) return false;
  c->parser_ok = true;
  c->table = t;
  c->schema = schema;
  snprintf(c->table_name, sizeof c->table_name, "%.*s", (int)len, name);
  return true;
}

static void on_row(conn_t *c, const mw_lp_request_t *r) {
  assert(r->kind == MW_LP_ROW || r->kind == MW_LP_DEL);
  if (!c->table) {
    reply_err(c, r->line, MW_LP_E_TABLE, "no table selected: send USE <table> first", r->bytes);
    return;
  }
  sub_t *b = open_sub(c);
  if (!b) {
    reply_err(c, r->line, MW_LP_E_INTERNAL, "out of memory", r->bytes);
    return;
  }
  mw_jsonrow_error_t je;
  int rc = mw_jsonrow_parse(&c->parser, r->data, r->len, r->kind == MW_LP_DEL, &b->batch, &je);
  if (rc < 0) {
    static const mw_lp_code_t map[] = {
        [MW_JSONROW_OK] = MW_LP_E_INTERNAL,   [MW_JSONROW_E_PARSE] = MW_LP_E_PARSE,
        [MW_JSONROW_E_SCHEMA] = MW_LP_E_SCHEMA, [MW_JSONROW_E_TYPE] = MW_LP_E_TYPE,
        [MW_JSONROW_E_PK] = MW_LP_E_PK,       [MW_JSONROW_E_INTERNAL] = MW_LP_E_INTERNAL};
    mw_lp_code_t code = rc == -EBADMSG && (unsigned)je.cls <= MW_JSONROW_E_INTERNAL ? map[je.cls]
                                                                                    : MW_LP_E_INTERNAL;
    char msg[MW_LP_MSG_BYTES];
    snprintf(msg, sizeof msg, "byte %zu: %s", je.offset, je.msg);
    reply_err(c, r->line, code, msg, r->bytes);
    return;
  }
  if (b->rows == 0) b->first_line = r->line;
  b->rows++;
  b->last_line = r->line;
  b->bytes += r->bytes;
  if (b->rows >= c->srv->opts.max_batch_rows) cut(c);
}

/* An Arrow frame: a stream whose columns are the table's (net/arrowframe.h:
 * by name and type; `_tombstone` optional, false when absent). */
static void on_arrow(conn_t *c, const mw_lp_request_t *r) {
  cut(c);
  if (!c->table) {
    reply_err(c, r->line, MW_LP_E_TABLE, "no table selected: send USE <table> first", r->bytes);
    return;
  }
  sub_t *b = open_sub(c);
  if (!b) {
    reply_err(c, r->line, MW_LP_E_INTERNAL, "out of memory", r->bytes);
    return;
  }
  /* a compressed frame may expand: at most 4x the frame limit, so one
   * connection's frame costs bounded memory (the IPC default is 1 GiB) */
  mw_ipc_limits_t lim;
  mw_ipc_limits_default(&lim);
  size_t frame_max = c->srv->opts.max_frame_bytes ? c->srv->opts.max_frame_bytes : MW_LP_DEFAULT_MAX_FRAME_BYTES;
  if (4 * frame_max < lim.max_decompressed_bytes) lim.max_decompressed_bytes = 4 * frame_max;
  mw_arrowframe_opts_t o = {.ignore_unknown_fields = c->srv->opts.ignore_unknown_fields, .lim = &lim};
  mw_lp_code_t code = MW_LP_OK;
  mw_err_t err = {0};
  if (mw_arrowframe_decode((const uint8_t *)r->data, r->len, c->schema, &o, &b->batch, &code,
                           &err) < 0) {
    c->open = NULL;
    mw_batch_free(&b->batch);
    free(b);
    reply_err(c, r->line, code, err.msg, r->bytes);
    return;
  }
  b->rows = (uint32_t)b->batch.n_rows;
  b->first_line = b->last_line = r->line;
  b->bytes = r->bytes;
  cut(c);
}

typedef struct sync_req {
  conn_t *c;
  uint64_t ticket;
  uint64_t line;
} sync_req_t;

static void sync_answer(conn_t *c, uint64_t ticket, uint64_t line, int status, const char *reason) {
  if (status == 0) mw_lp_sync_done(&c->lp, ticket);
  else mw_lp_sync_failed(&c->lp, ticket, line, mw_lp_code_from_errno(status), reason);
}

static void on_sync_done(void *arg, int status, const char *reason) {
  sync_req_t *tk = arg;
  conn_t *c = tk->c;
  c->refs--;
  if (!c->closing) {
    sync_answer(c, tk->ticket, tk->line, status, reason);
    send_ready(c);
    flow(c);
  }
  free(tk);
  if (c->closing) conn_maybe_free(c);
}

static void on_sync(conn_t *c, const mw_lp_request_t *r) {
  cut(c);
  uint64_t ticket;
  if (mw_lp_push_sync(&c->lp, r->bytes, &ticket) < 0) {
    conn_close(c);
    return;
  }
  mw_server_t *s = c->srv;
  if (!s->eng.sync) {
    mw_lp_sync_done(&c->lp, ticket);
    return;
  }
  sync_req_t *tk = malloc(sizeof *tk);
  if (!tk) {
    mw_lp_sync_failed(&c->lp, ticket, r->line, MW_LP_E_INTERNAL, "out of memory");
    return;
  }
  tk->c = c;
  tk->ticket = ticket;
  tk->line = r->line;
  c->refs++;
  mw_err_t err = {0};
  int rc = s->eng.sync(s->eng.data, on_sync_done, tk, &err);
  if (rc != 0) { /* answered now: nothing to wait for, or refused */
    c->refs--;
    free(tk);
    sync_answer(c, ticket, r->line, rc < 0 ? rc : 0, err.msg[0] ? err.msg : NULL);
  }
}

/* Token comparison whose time does not depend on where the bytes differ. */
static bool token_ok(const char *want, const char *got, size_t n) {
  size_t wl = strlen(want);
  unsigned char d = (unsigned char)(wl != n);
  for (size_t i = 0; i < n; i++) d |= (unsigned char)(want[i % (wl ? wl : 1)] ^ got[i]);
  return d == 0 && wl > 0;
}

/* One request. Returns false when the connection stops taking requests. */
static bool handle(conn_t *c, const mw_lp_request_t *r) {
  mw_server_t *s = c->srv;
  assert(s && !c->closing && r->line > 0);
  if (!c->authed) {
    if (r->kind == MW_LP_AUTH && token_ok(s->token, r->data, r->len)) {
      c->authed = true;
      return true;
    }
    reply_err(c, r->line, MW_LP_E_AUTH,
              r->kind == MW_LP_AUTH ? "wrong token" : "AUTH <token> must come first", r->bytes);
    if (!c->closing) mw_lp_push_quit(&c->lp, 0);
    return false;
  }
  switch (r->kind) {
  case MW_LP_ROW:
  case MW_LP_DEL: on_row(c, r); break;
  case MW_LP_ARROW: on_arrow(c, r); break;
  case MW_LP_USE:
    cut(c);
    if (!use_table(c, r->data, r->len)) {
      char msg[MW_LP_MSG_BYTES];
      snprintf(msg, sizeof msg, "unknown table \"%.*s\"", (int)(r->len > 200 ? 200 : r->len), r->data);
      reply_err(c, r->line, MW_LP_E_TABLE, msg, r->bytes);
    }
    break;
  case MW_LP_SYNC: on_sync(c, r); break;
  case MW_LP_PING:
    cut(c);
    if (mw_lp_push_pong(&c->lp, r->bytes) < 0) conn_close(c);
    break;
  case MW_LP_QUIT:
    cut(c);
    if (mw_lp_push_quit(&c->lp, r->bytes) < 0) conn_close(c);
    return false;
  case MW_LP_AUTH: break; /* already authenticated (or no token): ignored */
  case MW_LP_ERROR: reply_err(c, r->line, r->code, r->msg, r->bytes); break;
  }
  return !c->closing;
}

/* ------------------------------------------------------------------ reading */

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  (void)hint;
  conn_t *c = h->data;
  mw_server_t *s = c->srv;
  assert(!s->rbuf_busy);
  s->rbuf_busy = true;
  *buf = uv_buf_init(s->rbuf, (unsigned)MW_SERVER_READ_CHUNK_BYTES);
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf) {
  conn_t *c = st->data;
  if (buf->base == c->srv->rbuf) c->srv->rbuf_busy = false;
  if (c->closing) return;
  if (n < 0) {
    /* EOF or error: a half line is dropped; answer what is complete */
    c->eof = true;
    cut(c);
    send_ready(c);
    if (n != UV_EOF) conn_close(c);
    else flow(c);
    return;
  }
  if (n == 0) return;
  uv_timer_again(&c->idle);
  if (c->lp.quit || mw_lp_feed(&c->lp, buf->base, (size_t)n) < 0) {
    if (!c->lp.quit) conn_close(c);
    return;
  }
  mw_lp_request_t r;
  bool go = true;
  while (go && !c->closing && mw_lp_next(&c->lp, &r) == 1) go = handle(c, &r);
  if (c->closing) return;
  if (!go) { /* QUIT or failed AUTH: ignore the rest */
    c->eof = true;
  }
  cut(c);
  send_ready(c);
  flow(c);
}

static void on_idle(uv_timer_t *t) {
  conn_t *c = t->data;
  if (c->closing) return;
  if (c->refs == 0) conn_close(c);
}

/* ------------------------------------------------------------------ accept */

static void free_handle(uv_handle_t *h) { free(h); }

static void on_reject_written(uv_write_t *req, int status) {
  (void)status;
  uv_close((uv_handle_t *)req->handle, free_handle);
  free(req);
}

static void reject(mw_server_t *s, uv_stream_t *server) {
  uv_tcp_t *t = malloc(sizeof *t);
  if (!t) return;
  uv_tcp_init(s->loop, t);
  if (uv_accept(server, (uv_stream_t *)t) < 0) {
    uv_close((uv_handle_t *)t, free_handle);
    return;
  }
  static char msg[] = "ERR 0 overloaded too many connections (max_connections)\n";
  uv_write_t *w = malloc(sizeof *w);
  uv_buf_t b = uv_buf_init(msg, sizeof msg - 1);
  if (!w || uv_write(w, (uv_stream_t *)t, &b, 1, on_reject_written) < 0) {
    free(w);
    uv_close((uv_handle_t *)t, free_handle);
  }
  count_error(s, MW_LP_E_OVERLOADED);
}

static void on_connection(uv_stream_t *server, int status) {
  mw_server_t *s = server->data;
  if (status < 0 || s->stopping) return;
  if (s->n_conns >= s->opts.max_connections) {
    reject(s, server);
    return;
  }
  conn_t *c = calloc(1, sizeof *c);
  if (!c) return;
  mw_lp_limits_t lim = {.max_line_bytes = s->opts.max_line_bytes,
                        .max_frame_bytes = s->opts.max_frame_bytes};
  if (mw_lp_init(&c->lp, &lim) < 0) {
    free(c);
    return;
  }
  c->srv = s;
  uv_tcp_init(s->loop, &c->tcp);
  uv_timer_init(s->loop, &c->idle);
  c->tcp.data = c->idle.data = c;
  c->handles_open = 2;
  c->next = s->conns;
  if (s->conns) s->conns->prev = c;
  s->conns = c;
  s->n_conns++;
  count_conn(s, +1);
  c->authed = s->token == NULL;
  if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
    conn_close(c);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  if (s->opts.idle_timeout_ms) uv_timer_start(&c->idle, on_idle, s->opts.idle_timeout_ms, s->opts.idle_timeout_ms);
  if (s->default_table) use_table(c, s->default_table, strlen(s->default_table));
  flow(c);
}

/* ------------------------------------------------------------------ public */

int mw_server_addr_parse(const char *text, struct sockaddr_storage *out) {
  assert(text && out);
  char host[256];
  const char *colon = strrchr(text, ':');
  if (!colon || colon == text || strlen(colon + 1) == 0 || strlen(colon + 1) > 5) return -EINVAL;
  char *end;
  long port = strtol(colon + 1, &end, 10);
  if (*end || port < 0 || port > 65535) return -EINVAL;
  size_t hl = (size_t)(colon - text);
  if (hl >= sizeof host) return -EINVAL;
  memcpy(host, text, hl);
  host[hl] = 0;
  memset(out, 0, sizeof *out);
  if (host[0] == '[') {
    if (hl < 3 || host[hl - 1] != ']') return -EINVAL;
    host[hl - 1] = 0;
    return uv_ip6_addr(host + 1, (int)port, (struct sockaddr_in6 *)out) == 0 ? 0 : -EINVAL;
  }
  if (strcmp(host, "*") == 0) strcpy(host, "0.0.0.0");
  return uv_ip4_addr(host, (int)port, (struct sockaddr_in *)out) == 0 ? 0 : -EINVAL;
}

static void on_listener_closed(uv_handle_t *h) {
  mw_server_t *s = h->data;
  s->closing_handles--;
  server_maybe_done(s);
}

int mw_server_start(uv_loop_t *loop, const mw_server_opts_t *opts, const mw_fe_engine_t *engine,
                    mw_server_t **out, mw_err_t *err) {
  assert(loop && opts && engine && out);
  *out = NULL;
  if (!engine->table_find || !engine->submit)
    return mw_err_set(err, -EINVAL, "server: engine lacks table_find or submit");
  if (opts->n_listen == 0 || opts->n_listen > MW_SERVER_MAX_LISTEN)
    return mw_err_set(err, -EINVAL, "server: 1..%d listen addresses", MW_SERVER_MAX_LISTEN);
  mw_server_t *s = calloc(1, sizeof *s);
  if (!s) return -ENOMEM;
  s->loop = loop;
  s->opts = *opts;
  s->eng = *engine;
  if (!s->opts.max_connections) s->opts.max_connections = MW_SERVER_DEFAULT_MAX_CONNECTIONS;
  if (!s->opts.max_unacked_bytes_per_connection)
    s->opts.max_unacked_bytes_per_connection = MW_SERVER_DEFAULT_MAX_UNACKED_BYTES;
  if (!s->opts.max_reply_bytes_per_connection)
    s->opts.max_reply_bytes_per_connection = MW_SERVER_DEFAULT_MAX_REPLY_BYTES;
  if (!s->opts.max_batch_rows) s->opts.max_batch_rows = MW_SERVER_DEFAULT_MAX_BATCH_ROWS;
  if (opts->auth_token && opts->auth_token[0]) s->token = strdup(opts->auth_token);
  if (opts->default_table && opts->default_table[0]) s->default_table = strdup(opts->default_table);
  s->rbuf = malloc(MW_SERVER_READ_CHUNK_BYTES);
  if (!s->rbuf || (opts->auth_token && opts->auth_token[0] && !s->token)) {
    free(s->rbuf);
    free(s->token);
    free(s->default_table);
    free(s);
    return -ENOMEM;
  }
  s->opts.listen = NULL;
  metrics_init(s);
  int rc = 0;
  for (size_t i = 0; i < opts->n_listen && rc == 0; i++) {
    struct sockaddr_storage sa;
    rc = mw_server_addr_parse(opts->listen[i], &sa);
    if (rc < 0) {
      mw_err_set(err, rc, "listen %s: expected HOST:PORT or [V6]:PORT", opts->listen[i]);
      break;
    }
    uv_tcp_t *l = &s->listeners[i];
    uv_tcp_init(loop, l);
    l->data = s;
    s->n_listeners++;
    rc = uv_tcp_bind(l, (struct sockaddr *)&sa, sa.ss_family == AF_INET6 ? UV_TCP_IPV6ONLY : 0);
    if (rc == 0) rc = uv_listen((uv_stream_t *)l, 1024, on_connection);
    if (rc < 0) mw_err_set(err, rc, "listen %s: %s", opts->listen[i], uv_strerror(rc));
  }
  if (rc < 0) {
    mw_server_stop(s, NULL, NULL);
    return rc;
  }
  *out = s;
  return 0;
}

void mw_server_stop(mw_server_t *s, void (*cb)(void *arg), void *arg) {
  assert(s && !s->stopping);
  s->stopping = true;
  s->stop_cb = cb;
  s->stop_arg = arg;
  for (size_t i = 0; i < s->n_listeners; i++) {
    s->closing_handles++;
    uv_close((uv_handle_t *)&s->listeners[i], on_listener_closed);
  }
  while (s->conns) conn_close(s->conns);
  server_maybe_done(s); /* frees now only when nothing was open */
}

size_t mw_server_connections(const mw_server_t *s) { return s->n_conns; }

int mw_server_port(const mw_server_t *s, size_t i) {
  if (i >= s->n_listeners) return -EINVAL;
  struct sockaddr_storage sa;
  int len = sizeof sa;
  if (uv_tcp_getsockname(&s->listeners[i], (struct sockaddr *)&sa, &len) < 0) return -EINVAL;
  return ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
                                        : ((struct sockaddr_in *)&sa)->sin_port);
}
