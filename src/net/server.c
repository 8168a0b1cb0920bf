/*
 * server.c — producer connections on the libuv loop.
 *
 * Design: one conn_t per socket with its lineproto state, the table chosen by
 * USE, a jsonrow parser for that table and one open submission (sub_t) that
 * collects rows: an ARROW frame's, or the gather of parsed groups (server.h;
 * flow() cuts it once nothing more of the write is on its way, its timer
 * after write_gather_ms). Everything that produces a reply first cuts the
 * open submission, so reply items stay in request order. A conn_t lives
 * while its handles are open or any engine completion is outstanding
 * (refs); a completion that arrives after the socket closed only drops its
 * ref.
 *
 * Reads: libuv allocates from one 64 KiB buffer shared by every connection
 * (alloc and read run back to back on the loop thread); each chunk is fed
 * and fully processed, then the flow-control predicate decides whether to
 * keep reading (see server.h). Reading and the idle timer go together
 * (set_reading): a connection memwald paused is never idle. Writes: each
 * drain of ready replies is one uv_write of a heap copy; write_queue_bytes
 * counts them until their callback.
 *
 * A connection's close, in order of preference:
 *   peer EOF or QUIT      once every reply due is written
 *   server stop (drain)   reading stops; once refs, replies and writes are
 *                         all done: shutdown (FIN), discard input to EOF
 *   idle, errors, drain timeout   at once, logged with what was lost
 */
#include "net/server.h"

#include <arpa/inet.h>
#include <assert.h>
#include <netdb.h>
#include <sys/ioctl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "lance/ipc.h"
#include "net/arrowframe.h"
#include "net/jsonrow.h"
#include "net/listen.h"
#include "net/lineproto.h"
#include "net/rowjob.h"
#include "net/workpool.h"

/* Parse jobs per connection: dispatched (in flight or parsed, not yet
 * applied) plus the one collecting lines. A connection with every slot in
 * flight stops reading (backpressure), so at most this many chunks of one
 * connection wait for a worker. */
#define PARSE_JOBS 4
/* Connections waiting for accept on a producers' listener. */
#define MW_SERVER_BACKLOG 1024
/* A lone write's run, at most this many lines and bytes, while no other
 * parse is in flight on the whole server, is parsed on the loop thread at
 * once: its ack would wait for a worker's wake-up and gain nothing (~256
 * rows of ~60 B parse in about the time of two thread wake-ups on a loaded
 * machine). Lone: no partial line is buffered after it (else more of the
 * write is on its way, in reads that may be small). The bytes bound keeps
 * wide rows off the loop: 256 lines of ~1 KB (a vec(128) row) cost 16 times
 * as much. Without both, a one-at-a-time write of 10 000 wide rows was
 * parsed on the loop in reads of a few lines each: put_value_at was a third
 * of the loop's samples (docs/benchmarks.md). */
#define PARSE_INLINE_ROWS 256
#define PARSE_INLINE_BYTES ((size_t)16 << 10)
_Static_assert(PARSE_JOBS >= 2, "one job collecting while one is parsed");
_Static_assert(PARSE_INLINE_ROWS < MW_SERVER_DEFAULT_MAX_BATCH_ROWS, "large runs go to workers");

typedef struct conn conn_t;

/* One parse of a run of row lines (rowjob.h) on the server's workers. */
typedef struct pjob {
  mw_work_t work;
  conn_t *c;
  mw_server_t *s;
  mw_rowjob_t rj;
  bool done; /* parsed, not applied yet */
} pjob_t;

typedef struct sub sub_t;

/* One engine write of a submission: the batch of one of its groups. */
typedef struct sub_piece {
  sub_t *b;
  uint32_t rows;
} sub_piece_t;

/* A submission: an ARROW frame's rows, or (the gather) the parsed rows of
 * consecutive groups of one connection and table, answered with one reply.
 * Each group goes to the engine as its own write, all in the same loop turn
 * (so into the same WAL entry while the log is idle), not concatenated:
 * copying every row of the gather once more, row by row, was 37% of the
 * loop thread's samples with 16 pipelined connections. The reply waits for
 * every write; a group refused ends the submission (later groups are not
 * written) and the reply says how many of its rows were written. */
struct sub {
  conn_t *c;
  mw_batch_t batch;
  /* the gather's later groups, each its own engine write */
  mw_batch_t *more;
  uint32_t n_more, cap_more;
  sub_piece_t one;           /* the piece of a submission of one batch */
  sub_piece_t *pieces;       /* &one, or 1 + n_more of them */
  uint32_t left;             /* engine writes outstanding (+1 while submitting) */
  uint32_t written;          /* rows of its writes that completed */
  int status;                /* the first refusal, 0 while none */
  char reason[MW_LP_MSG_BYTES];
  int64_t lance_bytes;       /* the gather's rows, Lance's estimate */
  void *table;
  uint32_t rows;
  uint64_t first_line, last_line;
  size_t bytes;
  uint64_t ticket;
  uint64_t t0_ns;
  char table_name[MW_LP_TABLE_NAME_BYTES];
};

#define PEER_BYTES 64
#define WHY_BYTES 200
#define CONN_HANDLES 4 /* tcp, idle, gather_timer, deadline */

struct conn {
  uv_tcp_t tcp;
  uv_timer_t idle;
  uv_timer_t gather_timer;   /* runs while `open` gathers parsed rows */
  uv_timer_t deadline;       /* the handshake's, then AUTH's */
  uv_shutdown_t shutdown_req;
  mw_server_t *srv;
  conn_t *prev, *next;
  mw_lineproto_t lp;
  bool authed, reading, closing, eof;
  bool peer_eof;             /* the peer closed its side */
  bool shutting;             /* finishing: FIN being sent */
  bool discarding;           /* finishing: FIN sent, input thrown away until EOF */
  const char *why;           /* finishing: why the connection ends (static) */
  uint64_t rows_rejected;
  char peer[PEER_BYTES];
  int handles_open;
  int refs;                  /* engine completions outstanding */
  void *table;
  const mw_schema_t *schema;
  char table_name[MW_LP_TABLE_NAME_BYTES];
  mw_jsonrow_opts_t jopts;   /* the table's parser options (use_table) */
  /* Row lines are parsed by jobs, applied in line order: jobs[job_head ..
   * job_head + job_count) are dispatched, `fill` (the slot after them)
   * collects lines. A request that must wait for them is kept in `stash`
   * (its data stays in lp's buffer: nothing is fed while it waits). */
  pjob_t jobs[PARSE_JOBS];
  uint32_t job_head, job_count;
  pjob_t *fill;
  size_t parse_bytes;        /* input bytes of dispatched jobs not applied */
  mw_lp_request_t stash;
  bool stashed, in_process;
  bool read_full;            /* the last read filled the read buffer */
  sub_t *open;               /* an ARROW frame's submission, or the gather */
  size_t write_queue_bytes;
  int writes;
  /* TLS (net/tls.h) and credentials (net/creds.h) */
  bool is_tls, handshaking, tls_failed;
  bool auth_in_clear;        /* AUTH allowed over this plain listener */
  uint64_t accepted_ms;      /* uv_now at accept */
  const mw_cred_t *cred;     /* the principal, NULL before authentication */
  unsigned perms;            /* MW_PERM_* on the current table */
  char cred_name[MW_CREDS_NAME_BYTES];
  char fail_why[WHY_BYTES];  /* why it ends, when not the usual reasons */
  mw_tls_conn_t tls;
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
  mw_lp_replies_t listen_replies[MW_SERVER_MAX_LISTEN];
  bool listen_tls[MW_SERVER_MAX_LISTEN];
  bool listen_auth_in_clear[MW_SERVER_MAX_LISTEN];
  mw_creds_t *creds;         /* NULL: no authentication */
  size_t n_handshakes;       /* TLS connections whose handshake is unfinished */
  mw_buf_t tls_plain, tls_wire; /* scratch of the loop thread */
  size_t n_listeners;
  uv_timer_t drain_timer;
  bool drain_timer_on;
  conn_t *conns;
  size_t n_conns;
  bool stopping;
  int closing_handles;
  size_t jobs;               /* parse jobs in flight, closed connections' too */
  mw_workpool_t *pool;       /* parse workers; NULL: every parse on the loop */
  void (*stop_cb)(void *);
  void *stop_arg;
  mw_metric_family_t *m_conn, *m_conn_total, *m_rows, *m_bytes, *m_errors, *m_rejected, *m_lat;
  mw_metric_family_t *m_handshakes;
  mw_log_limit_t log_rejects, log_closes;
  /* One read buffer for every connection: libuv calls alloc and read back to
   * back on the loop thread, and each chunk is fed to lineproto at once. */
  char *rbuf;
  bool rbuf_busy;
};

/* ------------------------------------------------------------------ metrics */

static void metrics_init(mw_server_t *s) {
  mw_metrics_t *m = s->opts.metrics;
  if (!m) return;
  static const char *const tl[1] = {"table"}, *const tcl[2] = {"table", "code"};
  s->m_conn = mw_metrics_register(m, MW_METRIC_GAUGE, "memwald_connections",
                                  "Open producer connections.", NULL, 0, NULL, 0);
  s->m_conn_total = mw_metrics_register(m, MW_METRIC_COUNTER, "memwald_connections_total",
                                        "Producer connections accepted.", NULL, 0, NULL, 0);
  s->m_rows = mw_metrics_register(m, MW_METRIC_COUNTER, "memwald_rows_ingested_total",
                                  "Rows acknowledged to producers.", tl, 1, NULL, 0);
  s->m_bytes = mw_metrics_register(m, MW_METRIC_COUNTER, "memwald_bytes_ingested_total",
                                   "Request bytes of acknowledged rows.", tl, 1, NULL, 0);
  s->m_errors = mw_metrics_register(m, MW_METRIC_COUNTER, "memwald_errors_total",
                                    "ERR replies due (sent or not, by the reply mode), by table and code.",
                                    tcl, 2, NULL, 0);
  s->m_rejected = mw_metrics_register(m, MW_METRIC_COUNTER, "memwald_rows_rejected_total",
                                      "Rows not written: lines refused and rows of refused groups.",
                                      tcl, 2, NULL, 0);
  s->m_lat = mw_metrics_register(m, MW_METRIC_HISTOGRAM, "memwald_ack_latency_seconds",
                                 "From submission to acknowledgement.", tl, 1, NULL, 0);
  static const char *const rl[1] = {"result"};
  s->m_handshakes = mw_metrics_register(m, MW_METRIC_COUNTER, "memwald_tls_handshakes_total",
                                        "TLS handshakes on producers' listeners, by result "
                                        "(ok, failed, timeout, evicted).", rl, 1, NULL, 0);
}

static void count_handshake(mw_server_t *s, const char *result) {
  assert(result != NULL);
  if (!s->m_handshakes) return;
  const char *v[1] = {result};
  mw_counter_add(mw_metric_series(s->m_handshakes, v), 1);
}

static void count_conn(mw_server_t *s, int delta) {
  if (s->m_conn) mw_gauge_add(mw_metric_series(s->m_conn, NULL), delta);
  if (s->m_conn_total && delta > 0) mw_counter_add(mw_metric_series(s->m_conn_total, NULL), 1);
}

/* One ERR due on `table` ("" when none is known), refusing `rows` rows. */
static void count_error(mw_server_t *s, const char *table, mw_lp_code_t code, uint64_t rows) {
  assert(table != NULL);
  assert(code != MW_LP_OK);
  if (!s->m_errors) return;
  const char *v[2] = {table, mw_lp_code_name(code)};
  mw_counter_add(mw_metric_series(s->m_errors, v), 1);
  if (rows > 0) mw_counter_add(mw_metric_series(s->m_rejected, v), rows);
}

/* ------------------------------------------------------------------ logs */

/* `n` bytes of `p` as one log-safe token: printable ASCII kept, anything
 * else as \xHH, at most MW_SERVER_LOG_PREFIX_BYTES of input, "..." when cut. */
static void log_prefix(const char *p, size_t n, char *out, size_t cap) {
  assert(out != NULL);
  assert(cap >= 8);
  size_t w = 0, take = n > MW_SERVER_LOG_PREFIX_BYTES ? MW_SERVER_LOG_PREFIX_BYTES : n;
  for (size_t i = 0; i < take && p && w + 5 < cap; i++) {
    unsigned char ch = (unsigned char)p[i];
    if (ch >= 0x20 && ch < 0x7f && ch != '\\') out[w++] = (char)ch;
    else w += (size_t)snprintf(out + w, cap - w, "\\x%02x", ch);
  }
  if (take < n && w + 4 < cap) w += (size_t)snprintf(out + w, cap - w, "...");
  assert(w < cap);
  out[w] = '\0';
}

static void log_reject(conn_t *c, uint64_t line, mw_lp_code_t code, const char *msg,
                       const char *data, size_t len) {
  mw_server_t *s = c->srv;
  uint64_t suppressed;
  if (!mw_log_limit_take(&s->log_rejects, uv_now(s->loop), &suppressed)) return;
  if (suppressed > 0)
    mw_log_warn("%" PRIu64 " more rejected lines were not logged (at most %d per %d s)",
                suppressed, MW_SERVER_LOG_BURST, MW_SERVER_LOG_WINDOW_MS / 1000);
  char pre[MW_SERVER_LOG_PREFIX_BYTES * 4 + 8];
  log_prefix(data, data ? len : 0, pre, sizeof pre);
  mw_log_warn("rejected: peer %s table \"%s\" line %" PRIu64 " %s: %s%s%s%s", c->peer,
              c->table_name, line, mw_lp_code_name(code), msg, data ? ": \"" : "", pre,
              data ? "\"" : "");
}

/* ------------------------------------------------------------------ lifetime */

/* A submission never handed over (its groups too). */
static void sub_free(sub_t *b) {
  assert(b->n_more <= b->cap_more);
  for (uint32_t i = 0; i < b->n_more; i++) mw_batch_free(&b->more[i]);
  free(b->more);
  if (b->pieces != &b->one) free(b->pieces);
  mw_batch_free(&b->batch);
  free(b);
}

static void conn_maybe_free(conn_t *c) {
  if (c->handles_open > 0 || c->refs > 0 || c->writes > 0 || c->shutting) return;
  assert(c->closing);
  if (c->open) sub_free(c->open);
  for (int i = 0; i < PARSE_JOBS; i++) mw_rowjob_free(&c->jobs[i].rj);
  mw_lp_free(&c->lp);
  mw_tls_conn_free(&c->tls);
  free(c);
}

static void on_drain_timer_closed(uv_handle_t *h);
static void on_pool_closed(void *arg);

static void server_maybe_done(mw_server_t *s) {
  assert(s->closing_handles >= 0);
  if (!s->stopping || s->n_conns > 0) return;
  if (s->jobs > 0) return; /* a worker still reads a table's schema */
  if (s->pool) { /* no job in flight: the workers go */
    assert(mw_workpool_in_flight(s->pool) == 0);
    mw_workpool_t *p = s->pool;
    s->pool = NULL;
    s->closing_handles++;
    mw_workpool_close(p, on_pool_closed, s);
  }
  if (s->drain_timer_on) { /* every connection drained: the timer goes too */
    s->drain_timer_on = false;
    s->closing_handles++;
    uv_close((uv_handle_t *)&s->drain_timer, on_drain_timer_closed);
  }
  if (s->closing_handles > 0) return;
  void (*cb)(void *) = s->stop_cb;
  void *arg = s->stop_arg;
  free(s->token);
  free(s->default_table);
  free(s->rbuf);
  mw_creds_free(s->creds);
  mw_buf_free(&s->tls_plain);
  mw_buf_free(&s->tls_wire);
  free(s);
  if (cb) cb(arg);
}

static void on_conn_handle_closed(uv_handle_t *h) {
  conn_t *c = h->data;
  assert(c->closing); /* only conn_close closes its handles */
  assert(c->handles_open > 0);
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

/* Bytes received and not read yet: the kernel's receive queue. */
static size_t kernel_queued_bytes(conn_t *c) {
  uv_os_fd_t fd;
  int queued = 0;
  if (uv_fileno((uv_handle_t *)&c->tcp, &fd) != 0 || ioctl(fd, FIONREAD, &queued) != 0) queued = 0;
  return (size_t)(queued > 0 ? queued : 0);
}

/* Bytes the peer sent that no request consumed: the kernel's receive queue
 * and a partial line or frame. */
static size_t unread_bytes(conn_t *c) {
  return kernel_queued_bytes(c) + mw_lp_buffered(&c->lp) + mw_tls_conn_buffered(&c->tls);
}

/* Close now, saying why. What the close loses (input not read, replies not
 * written, submissions whose answer will not be sent) makes it a warning. */
static void conn_close(conn_t *c, const char *why) {
  assert(c);
  assert(c->srv);
  assert(why != NULL);
  if (c->closing) return;
  mw_server_t *s = c->srv;
  size_t unread = c->discarding ? 0 : unread_bytes(c);
  size_t undelivered = c->lp.quit ? 0 : mw_lp_pending(&c->lp);
  bool lost = unread > 0 || undelivered > 0 || c->refs > 0;
  uint64_t suppressed;
  if (mw_log_limit_take(&s->log_closes, uv_now(s->loop), &suppressed)) {
    if (suppressed > 0)
      mw_log_notice("%" PRIu64 " more closed connections were not logged (at most %d per %d s)",
                    suppressed, MW_SERVER_LOG_BURST, MW_SERVER_LOG_WINDOW_MS / 1000);
    mw_log(lost ? MW_LOG_WARN : MW_LOG_INFO,
           "connection %s closed (%s): %" PRIu64 " rows acknowledged, %" PRIu64
           " rejected; %zu bytes unread, %zu replies not sent, %d submissions unanswered",
           c->peer, why, c->lp.acked_rows, c->rows_rejected, unread, undelivered, c->refs);
  }
  c->closing = true;
  if (c->handshaking) {
    c->handshaking = false;
    s->n_handshakes--;
  }
  /* parsed jobs waiting for an earlier one are dropped now; those still
   * on a worker drop their refs when they come back (parse_after) */
  for (uint32_t k = 0; k < c->job_count; k++) {
    pjob_t *j = &c->jobs[(c->job_head + k) % PARSE_JOBS];
    if (!j->done) continue;
    j->done = false;
    c->refs--;
    s->jobs--;
  }
  c->job_count = 0;
  if (c->prev) c->prev->next = c->next;
  else s->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  uv_close((uv_handle_t *)&c->tcp, on_conn_handle_closed);
  uv_close((uv_handle_t *)&c->idle, on_conn_handle_closed);
  uv_close((uv_handle_t *)&c->gather_timer, on_conn_handle_closed);
  uv_close((uv_handle_t *)&c->deadline, on_conn_handle_closed);
}

/* ------------------------------------------------------------------ writing */

static void flow(conn_t *c);
static void cut(conn_t *c);

static void on_write(uv_write_t *req, int status) {
  wreq_t *w = req->data;
  conn_t *c = w->c;
  assert(c->writes > 0);
  assert(c->write_queue_bytes >= w->len); /* counted when written */
  c->write_queue_bytes -= w->len;
  c->writes--;
  free(w);
  if (c->closing) {
    conn_maybe_free(c);
    return;
  }
  if (status < 0) {
    conn_close(c, uv_strerror(status));
    return;
  }
  /* a peer taking its replies is not idle */
  if (c->reading && !c->discarding && c->srv->opts.idle_timeout_ms > 0) uv_timer_again(&c->idle);
  flow(c);
}

/* Write n bytes as they are (replies, or TLS records): one heap copy,
 * counted until its callback. */
static void write_raw(conn_t *c, const void *p, size_t n) {
  assert(!c->closing);
  if (n == 0) return;
  wreq_t *w = malloc(sizeof *w + n);
  if (!w) {
    conn_close(c, "out of memory");
    return;
  }
  memcpy(w->data, p, n);
  w->len = n;
  w->c = c;
  w->req.data = w;
  uv_buf_t b = uv_buf_init(w->data, (unsigned)w->len);
  int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_write);
  if (rc < 0) {
    free(w);
    conn_close(c, uv_strerror(rc));
    return;
  }
  c->write_queue_bytes += w->len;
  c->writes++;
}

/* Write every ready reply (encrypted on a TLS connection; thrown away
 * once TLS failed: nothing can carry them). */
static void send_ready(conn_t *c) {
  assert(c);
  if (c->closing) return;
  mw_buf_t out = MW_BUF_INIT;
  int rc = mw_lp_drain(&c->lp, &out);
  if (rc < 0) {
    mw_buf_free(&out);
    conn_close(c, "out of memory");
    return;
  }
  if (out.len > 0 && c->is_tls) {
    mw_server_t *s = c->srv;
    mw_err_t err = {0};
    mw_buf_reset(&s->tls_wire);
    if (c->tls_failed || !c->tls.ready) {
      /* dropped */
    } else if (mw_tls_conn_write(&c->tls, out.data, out.len, &s->tls_wire, &err) < 0) {
      conn_close(c, err.msg);
    } else {
      write_raw(c, s->tls_wire.data, s->tls_wire.len);
    }
  } else if (out.len > 0) {
    write_raw(c, out.data, out.len);
  }
  mw_buf_free(&out);
}

/* ------------------------------------------------------------------ flow */

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf);
static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf);
static void on_idle(uv_timer_t *t);

/* Reading and the idle timer, together: a connection memwald stopped
 * reading is not idle. */
static void set_reading(conn_t *c, bool on) {
  mw_server_t *s = c->srv;
  assert(!c->closing);
  if (on == c->reading) return;
  if (on) {
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0) return;
    c->reading = true;
    if (s->opts.idle_timeout_ms && !c->discarding)
      uv_timer_start(&c->idle, on_idle, s->opts.idle_timeout_ms, s->opts.idle_timeout_ms);
  } else {
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = false;
    uv_timer_stop(&c->idle);
  }
}

static void on_shutdown(uv_shutdown_t *req, int status) {
  conn_t *c = req->data;
  assert(c->shutting); /* finish started it */
  assert(!c->discarding);
  c->shutting = false;
  if (c->closing) {
    conn_maybe_free(c);
    return;
  }
  if (status < 0) {
    conn_close(c, c->why);
    return;
  }
  /* Closing now, with input unread, would reset the connection and could
   * destroy replies the peer has not read yet: wait for its EOF instead,
   * at most MW_SERVER_LINGER_MS. */
  c->discarding = true;
  set_reading(c, true);
  if (!c->reading) {
    conn_close(c, c->why);
    return;
  }
  uv_timer_start(&c->idle, on_idle, MW_SERVER_LINGER_MS, 0);
}

/* Every reply due is written and nothing is in flight: end the connection.
 * After the peer's EOF, close; otherwise FIN first (on_shutdown). */
static void finish(conn_t *c, const char *why) {
  assert(!c->closing);
  assert(why != NULL);
  assert(c->refs == 0);
  assert(c->writes == 0);
  if (c->shutting || c->discarding) return;
  c->why = why;
  if (c->peer_eof) {
    conn_close(c, why);
    return;
  }
  set_reading(c, false);
  if (c->is_tls && c->tls.ready && !c->tls_failed) { /* close_notify, then the FIN */
    mw_server_t *s = c->srv;
    mw_buf_reset(&s->tls_wire);
    if (mw_tls_conn_close_notify(&c->tls, &s->tls_wire) == 0) write_raw(c, s->tls_wire.data, s->tls_wire.len);
    if (c->closing) return;
  }
  c->shutting = true;
  c->shutdown_req.data = c;
  if (uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->tcp, on_shutdown) < 0) {
    c->shutting = false;
    conn_close(c, why);
  }
}

/* Nothing in flight (parse jobs are refs too), every reply written (after
 * QUIT: up to the QUIT). */
static bool answered(const conn_t *c) {
  bool replies_left = mw_lp_pending(&c->lp) > 0 && !c->lp.quit;
  assert(!c->stashed || c->job_count > 0); /* a kept request waits for a job */
  return c->refs == 0 && c->writes == 0 && !replies_left;
}

/* Whether to read more: input being parsed or gathered counts as
 * unacknowledged; a kept request or every job slot in flight (backpressure
 * from the workers) stops reading too. */
static bool wants_input(const conn_t *c) {
  assert(c->job_count <= PARSE_JOBS);
  const mw_server_t *s = c->srv;
  size_t gathered = c->open ? c->open->bytes : 0;
  return c->lp.unacked_bytes + c->parse_bytes + gathered <= s->opts.max_unacked_bytes_per_connection &&
         c->write_queue_bytes <= s->opts.max_reply_bytes_per_connection && !c->stashed &&
         c->job_count < PARSE_JOBS;
}

/* The gather waits only for rows already on their way: parse jobs not yet
 * applied or, while the socket is read, a partial line in the buffer, or
 * bytes in the kernel's receive queue after a read that filled the buffer
 * (a chunk that ended on a line's end in the middle of a write). */
static bool gather_more_coming(conn_t *c, bool reading) {
  assert(c->open != NULL); /* asked only while a gather is open */
  if (c->job_count > 0) return true;
  if (!reading) return false;
  return mw_lp_buffered(&c->lp) > 0 || mw_tls_conn_buffered(&c->tls) > 0 ||
         (c->read_full && kernel_queued_bytes(c) > 0);
}

static void flow(conn_t *c) {
  if (c->closing || c->shutting || c->discarding) return;
  mw_server_t *s = c->srv;
  assert(s);
  assert(c->handles_open == CONN_HANDLES);
  assert(c->fill == NULL);
  assert(!c->in_process); /* between requests */
  if (s->stopping || c->lp.quit || c->eof) {
    /* no new requests: gathered rows go now; end once everything due is answered */
    cut(c);
    if (c->closing) return;
    send_ready(c);
    if (c->closing) return;
    set_reading(c, false);
    if (answered(c))
      finish(c, c->fail_why[0] ? c->fail_why : s->stopping ? "stop" : c->lp.quit ? "quit" : "eof");
    return;
  }
  bool want = wants_input(c);
  if (c->open && !gather_more_coming(c, want)) { /* nothing more is coming: never wait */
    cut(c);
    if (c->closing) return;
    send_ready(c);
    if (c->closing) return;
    want = wants_input(c);
  }
  set_reading(c, want);
}

/* ------------------------------------------------------------------ submissions */

static uint64_t now_ns(void) { return uv_hrtime(); }

/* A refused group: one ERR (lineproto), counted and logged. */
static void group_refused(conn_t *c, sub_t *b, int status, uint32_t written, const char *reason) {
  assert(status < 0);
  assert(written < b->rows);
  mw_lp_code_t code = mw_lp_code_from_errno(status);
  const char *why = reason ? reason : mw_strerror(status);
  mw_lp_rows_done_partial(&c->lp, b->ticket, code, written, why);
  count_error(c->srv, b->table_name, code, b->rows - written);
  c->rows_rejected += b->rows - written;
  char msg[MW_LP_MSG_BYTES + 64];
  snprintf(msg, sizeof msg, "%" PRIu32 " rows (lines %" PRIu64 "-%" PRIu64 "), %" PRIu32 " written: %s",
           b->rows, b->first_line, b->last_line, written, why);
  log_reject(c, b->first_line, code, msg, NULL, 0);
}

/* Every write of submission b has finished (or was refused at once):
 * its one reply. `later`: from an engine completion, not inside the
 * submitting call (which sends and flows itself). */
static void sub_done(conn_t *c, sub_t *b, bool later) {
  assert(b->left == 0);
  assert(b->status < 0 || b->written == b->rows);
  if (!c->closing) {
    mw_server_t *s = c->srv;
    if (b->status < 0) group_refused(c, b, b->status, b->written, b->reason[0] ? b->reason : NULL);
    else mw_lp_rows_done(&c->lp, b->ticket, MW_LP_OK, NULL);
    if (b->status == 0 && s->m_rows) {
      const char *v[1] = {b->table_name};
      mw_counter_add(mw_metric_series(s->m_rows, v), b->rows);
      mw_counter_add(mw_metric_series(s->m_bytes, v), b->bytes);
    }
    if (s->m_lat) {
      const char *v[1] = {b->table_name};
      mw_histogram_observe(mw_metric_series(s->m_lat, v), s->m_lat, (double)(now_ns() - b->t0_ns) / 1e9);
    }
    if (later) {
      send_ready(c);
      flow(c);
    }
  }
  sub_free(b);
  if (later && c->closing) conn_maybe_free(c);
}

/* Write p of its submission failed (status < 0) with rows_written of its
 * rows written anyway, or was refused at once (rows_written 0). */
static void piece_failed(sub_t *b, int status, uint32_t rows_written, const char *reason) {
  assert(status < 0);
  b->written += rows_written;
  if (b->status < 0) return;
  b->status = status;
  snprintf(b->reason, sizeof b->reason, "%s", reason ? reason : "");
}

static void on_piece_done(void *arg, int status, uint32_t rows_written, const char *reason) {
  sub_piece_t *p = arg;
  sub_t *b = p->b;
  conn_t *c = b->c;
  assert(c);
  assert(c->refs > 0);
  assert(b->left > 0);
  assert(status < 0 || rows_written == 0);
  c->refs--;
  if (status < 0) piece_failed(b, status, rows_written, reason);
  else b->written += p->rows;
  if (--b->left == 0) sub_done(c, b, true);
}

/* Hand submission b (rows > 0) to the engine, its reply queued now: one
 * write per batch, in line order. */
static void submit_sub(conn_t *c, sub_t *b) {
  assert(b->c == c);
  assert(b->rows > 0);
  assert(!c->closing);
  mw_server_t *s = c->srv;
  uint32_t n = 1 + b->n_more;
  b->pieces = n == 1 ? &b->one : malloc(n * sizeof *b->pieces);
  int rc = b->pieces ? mw_lp_push_rows(&c->lp, b->rows, b->first_line, b->last_line, b->bytes, &b->ticket)
                     : -ENOMEM;
  if (rc < 0) { /* out of memory: the rows cannot even be answered */
    if (b->pieces == NULL) b->pieces = &b->one;
    sub_free(b);
    conn_close(c, "out of memory");
    return;
  }
  if (b->t0_ns == 0) b->t0_ns = now_ns(); /* a gather's: when its first rows came */
  b->left = 1; /* held until every write is handed over */
  b->written = 0;
  b->status = 0;
  b->reason[0] = '\0';
  int64_t total = 0;
  for (uint32_t i = 0; i < n; i++) {
    mw_batch_t *batch = i == 0 ? &b->batch : &b->more[i - 1];
    total += batch->n_rows;
    b->pieces[i] = (sub_piece_t){.b = b, .rows = (uint32_t)batch->n_rows};
    if (b->status < 0) continue; /* a refusal ends the submission */
    mw_err_t err = {0};
    c->refs++;
    b->left++;
    rc = s->eng.submit(s->eng.data, b->table, batch, on_piece_done, &b->pieces[i], &err);
    if (rc < 0) {
      c->refs--;
      b->left--;
      piece_failed(b, rc, 0, err.code ? err.msg : NULL);
    }
  }
  assert(total == (int64_t)b->rows);
  if (--b->left == 0) sub_done(c, b, false); /* every write refused at once */
}

/* Hand the open submission (an ARROW frame, or the gather) to the engine,
 * if it holds rows. */
static void cut(conn_t *c) {
  sub_t *b = c->open;
  if (!b) return;
  assert(b->c == c);
  c->open = NULL;
  uv_timer_stop(&c->gather_timer);
  if (b->rows == 0) {
    b->pieces = &b->one;
    sub_free(b);
    return;
  }
  submit_sub(c, b);
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

/* Refuse one line: one ERR, one rejected line, counted and logged with a
 * prefix of the line (data may be NULL: never logged). */
static void refuse_line(conn_t *c, uint64_t line, mw_lp_code_t code, const char *msg,
                        const char *data, size_t len, size_t bytes) {
  assert(code != MW_LP_OK);
  assert(msg != NULL);
  assert(!c->closing);
  count_error(c->srv, c->table_name, code, 1);
  c->rows_rejected++;
  log_reject(c, line, code, msg, data, len);
  if (mw_lp_push_err(&c->lp, line, code, msg, bytes) < 0) conn_close(c, "out of memory");
}

/* Refuse request r, after the rows before it. */
static void reply_err(conn_t *c, const mw_lp_request_t *r, mw_lp_code_t code, const char *msg) {
  cut(c);
  if (c->closing) return;
  refuse_line(c, r->line, code, msg, r->data, r->len, r->bytes);
}

static void refresh_perms(conn_t *c);
static bool use_table(conn_t *c, const char *name, size_t len) {
  mw_server_t *s = c->srv;
  const mw_schema_t *schema = NULL;
  /* a barrier: no row of the previous table is still being parsed */
  assert(c->job_count == 0);
  assert(c->fill == NULL);
  void *t = s->eng.table_find(s->eng.data, name, len, &schema);
  if (!t || !schema) return false;
  mw_jsonrow_opts_t o = {.ignore_unknown_fields = s->opts.ignore_unknown_fields,
                         .objects_as_text = s->opts.json_objects_as_text,
                         .max_line_bytes = c->lp.lim.max_line_bytes,
                         .delete_keep = s->eng.delete_keep ? s->eng.delete_keep(s->eng.data, t) : NULL};
  /* a schema the parser cannot take is refused here, not on every row */
  mw_jsonrow_parser_t probe;
  if (mw_jsonrow_init(&probe, schema, &o) < 0) return false;
  mw_jsonrow_free(&probe);
  c->jopts = o;
  c->table = t;
  c->schema = schema;
  snprintf(c->table_name, sizeof c->table_name, "%.*s", (int)len, name);
  refresh_perms(c);
  return true;
}

static unsigned row_needs(const mw_lp_request_t *r) {
  return r->kind == MW_LP_DEL ? MW_PERM_DELETE : MW_PERM_WRITE;
}

/* A row the parse jobs cannot take: no table selected, or not allowed
 * (process() gives the others to the jobs). */
static void refuse_forbidden(conn_t *c, const mw_lp_request_t *r, unsigned need);
static void on_row(conn_t *c, const mw_lp_request_t *r) {
  assert(r->kind == MW_LP_ROW || r->kind == MW_LP_DEL);
  assert(c->table == NULL || (c->perms & row_needs(r)) == 0);
  if (c->table == NULL) reply_err(c, r, MW_LP_E_TABLE, "no table selected: send USE <table> first");
  else refuse_forbidden(c, r, row_needs(r));
}

/* ------------------------------------------------------------------ parse jobs
 *
 * The loop thread splits lines (lineproto) and copies each row line into the
 * collecting job; at the end of each received chunk, at max_batch_rows, or
 * before any other request, the job is dispatched to the libuv pool (or, a
 * short run with nothing else in flight, parsed at once). Completions are
 * applied strictly in dispatch order: each group of good rows becomes one
 * submission (or joins the gather), each refused line one ERR, so replies
 * keep request order. A request that is not a row waits (stash) until every
 * job before it has been applied, as does a row when every slot is in
 * flight; reading stops meanwhile. Each dispatched job holds one ref of its connection.
 */

static void process(conn_t *c);

/* A row line the jobs take: authenticated, a table selected, allowed. */
static bool row_now(const conn_t *c, const mw_lp_request_t *r) {
  return (r->kind == MW_LP_ROW || r->kind == MW_LP_DEL) && c->authed && c->table != NULL &&
         (c->perms & row_needs(r)) != 0;
}

/* The kept request may go on: a row once a slot is free, anything else once
 * every job before it is applied. */
static bool stash_ready(const conn_t *c) {
  if (!c->stashed) return false;
  return row_now(c, &c->stash) ? c->job_count < PARSE_JOBS : c->job_count == 0;
}

static pjob_t *job_at(conn_t *c, uint32_t k) {
  assert(k < PARSE_JOBS);
  return &c->jobs[(c->job_head + k) % PARSE_JOBS];
}

/* The job collecting lines: the open one or the next free slot. NULL when
 * every slot is dispatched (or the connection closed: out of memory). */
static pjob_t *fill_job(conn_t *c) {
  if (c->fill) return c->fill;
  if (c->job_count == PARSE_JOBS) return NULL;
  pjob_t *j = job_at(c, c->job_count);
  assert(!j->done);
  assert(j->c == c);
  if (mw_rowjob_begin(&j->rj, c->table, c->schema, c->table_name, &c->jopts,
                      (uint32_t)c->srv->opts.max_batch_rows) < 0) {
    conn_close(c, "out of memory");
    return NULL;
  }
  c->fill = j;
  return j;
}

static void parse_work(mw_work_t *w) {
  pjob_t *j = (pjob_t *)((char *)w - offsetof(pjob_t, work));
  mw_rowjob_run(&j->rj);
}

static void on_gather_timer(uv_timer_t *t) {
  conn_t *c = t->data;
  if (c->closing) return;
  assert(c->open != NULL);
  assert(!c->in_process);
  cut(c);
  if (c->closing) return;
  send_ready(c);
  flow(c);
}

/* The gather is full: its request bytes at a quarter of the connection's
 * unacknowledged bytes (so it never holds up reading by itself), or its rows,
 * groups or Lance bytes at the server's limits. */
static bool gather_full(const mw_server_t *s, const sub_t *b) {
  return b->bytes >= s->opts.max_unacked_bytes_per_connection / 4 ||
         b->rows >= MW_SERVER_MAX_GATHER_ROWS || b->n_more + 1 >= MW_SERVER_MAX_GATHER_GROUPS ||
         b->lance_bytes >= (int64_t)MW_SERVER_MAX_GATHER_LANCE_BYTES;
}

/* Group i of rj joins the gather (opened with it, its timer started); the
 * gather is cut when full, else by flow() once nothing more is coming, by
 * anything that replies, or by its timer (write_gather_ms). */
static void gather(conn_t *c, mw_rowjob_t *rj, size_t i) {
  mw_server_t *s = c->srv;
  const mw_rowjob_out_t *o = &rj->out[i];
  assert(!o->is_err);
  assert(o->rows > 0);
  assert(s->opts.write_gather_ms > 0);
  sub_t *b = c->open;
  if (b == NULL) {
    if ((b = malloc(sizeof *b)) == NULL) {
      conn_close(c, "out of memory");
      return;
    }
    *b = (sub_t){.c = c, .table = c->table, .rows = o->rows, .first_line = o->first_line,
                 .last_line = o->last_line, .bytes = o->bytes, .t0_ns = now_ns()};
    memcpy(b->table_name, c->table_name, sizeof b->table_name);
    b->batch = mw_rowjob_take(rj, i);
    b->lance_bytes = mw_batch_lance_bytes(&b->batch);
    c->open = b;
    uv_timer_start(&c->gather_timer, on_gather_timer, s->opts.write_gather_ms, 0);
  } else {
    assert(b->table == c->table);
    assert(o->first_line > b->last_line);
    assert(b->n_more + 1 < MW_SERVER_MAX_GATHER_GROUPS);
    if (b->n_more == b->cap_more) {
      uint32_t cap = b->cap_more ? 2 * b->cap_more : 8;
      mw_batch_t *more = realloc(b->more, cap * sizeof *more);
      if (more == NULL) {
        conn_close(c, "out of memory");
        return;
      }
      b->more = more;
      b->cap_more = cap;
    }
    mw_batch_t *g = &b->more[b->n_more++];
    *g = mw_rowjob_take(rj, i);
    b->lance_bytes += mw_batch_lance_bytes(g);
    b->rows += o->rows;
    b->last_line = o->last_line;
    b->bytes += o->bytes;
  }
  if (gather_full(s, b)) cut(c);
}

/* Job j's output, in line order: submissions (or the gather) and refused
 * lines. */
static void apply(conn_t *c, pjob_t *j) {
  mw_rowjob_t *rj = &j->rj;
  assert(rj->ran);
  assert(rj->table == c->table);
  for (size_t i = 0; i < rj->n_out && !c->closing; i++) {
    const mw_rowjob_out_t *o = &rj->out[i];
    if (o->is_err) {
      cut(c); /* the rows gathered before the line are answered first */
      if (c->closing) break;
      refuse_line(c, o->line, o->code, o->msg, mw_rowjob_err_data(rj, o), o->len, o->bytes);
      continue;
    }
    if (c->srv->opts.write_gather_ms > 0) {
      gather(c, rj, i);
      continue;
    }
    sub_t *b = malloc(sizeof *b);
    if (!b) {
      conn_close(c, "out of memory");
      break;
    }
    *b = (sub_t){.c = c, .table = c->table, .rows = o->rows, .first_line = o->first_line,
                 .last_line = o->last_line, .bytes = o->bytes};
    memcpy(b->table_name, c->table_name, sizeof b->table_name);
    b->batch = mw_rowjob_take(rj, i);
    submit_sub(c, b);
  }
  if (!c->closing && rj->status < 0) conn_close(c, "out of memory (parsing rows)");
}

/* Apply the parsed prefix of the dispatched jobs. */
static void apply_ready(conn_t *c) {
  mw_server_t *s = c->srv;
  while (c->job_count > 0 && !c->closing) {
    pjob_t *j = job_at(c, 0);
    if (!j->done) break;
    j->done = false;
    c->job_head = (c->job_head + 1) % PARSE_JOBS;
    c->job_count--;
    assert(c->parse_bytes >= j->rj.bytes);
    assert(c->refs > 0);
    c->parse_bytes -= j->rj.bytes;
    c->refs--;
    s->jobs--;
    apply(c, j);
  }
}

static void parse_after(mw_work_t *w) {
  pjob_t *j = (pjob_t *)((char *)w - offsetof(pjob_t, work));
  conn_t *c = j->c;
  mw_server_t *s = j->s;
  assert(j->rj.ran);
  assert(c->refs > 0);
  assert(s->jobs > 0);
  if (c->closing) { /* nobody to answer */
    c->refs--;
    s->jobs--;
    conn_maybe_free(c);
    server_maybe_done(s);
    return;
  }
  j->done = true;
  apply_ready(c);
  if (c->in_process || c->closing) return; /* a parse run at once: process() goes on */
  if (stash_ready(c)) process(c); /* the kept request's turn */
  if (c->closing) return;
  send_ready(c);
  flow(c);
}

/* Dispatch the collecting job (if it holds lines). */
static void dispatch(conn_t *c) {
  pjob_t *j = c->fill;
  if (!j) return;
  c->fill = NULL;
  if (j->rj.n_lines == 0) return; /* the slot stays free */
  mw_server_t *s = c->srv;
  assert(j == job_at(c, c->job_count));
  c->job_count++;
  c->refs++;
  s->jobs++;
  c->parse_bytes += j->rj.bytes;
  assert(c->job_count <= PARSE_JOBS);
  bool lone = c->stashed || mw_lp_buffered(&c->lp) == 0; /* nothing more of it buffered */
  if (!s->pool || (s->jobs == 1 && lone && j->rj.n_lines <= PARSE_INLINE_ROWS &&
                   j->rj.bytes <= PARSE_INLINE_BYTES)) {
    assert(c->job_count == 1); /* it is the head: applied at once */
    parse_work(&j->work);
    parse_after(&j->work);
    return;
  }
  mw_workpool_submit(s->pool, &j->work);
}

/* Whether a decoded frame deletes: a true `_tombstone` (the schema's
 * last column, bool not null). */
static bool frame_deletes(const mw_batch_t *b) {
  assert(b->schema);
  assert(b->schema->n_fields > 0);
  assert(b->schema->fields[b->schema->n_fields - 1].type == MW_T_BOOL);
  const mw_column_t *t = &b->cols[b->schema->n_fields - 1];
  const uint8_t *bits = t->values.data;
  for (int64_t i = 0; i < b->n_rows && bits; i++)
    if (mw_bit_get(bits, i)) return true;
  return false;
}

/* An Arrow frame: a stream whose columns are the table's (net/arrowframe.h:
 * by name and type; `_tombstone` optional, false when absent). */
static void on_arrow(conn_t *c, const mw_lp_request_t *r) {
  cut(c);
  if (!c->table) {
    reply_err(c, r, MW_LP_E_TABLE, "no table selected: send USE <table> first");
    return;
  }
  sub_t *b = open_sub(c);
  if (!b) {
    reply_err(c, r, MW_LP_E_INTERNAL, "out of memory");
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
    char msg[MW_LP_MSG_BYTES];
    snprintf(msg, sizeof msg, "table \"%.127s\": %.511s", c->table_name, err.msg);
    reply_err(c, r, code, msg);
    return;
  }
  unsigned need = MW_PERM_WRITE | (frame_deletes(&b->batch) ? MW_PERM_DELETE : 0);
  if ((c->perms & need) != need) {
    c->open = NULL;
    mw_batch_free(&b->batch);
    free(b);
    refuse_forbidden(c, r, (c->perms & MW_PERM_WRITE) ? MW_PERM_DELETE : MW_PERM_WRITE);
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
    conn_close(c, "out of memory");
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

/* ------------------------------------------------------------------ credentials */

/* The connection's permissions on its current table. */
static void refresh_perms(conn_t *c) {
  mw_server_t *s = c->srv;
  if (s->creds == NULL) c->perms = MW_PERM_ALL;
  else c->perms = c->authed ? mw_cred_perms(c->cred, c->table_name) : 0;
}

static void set_cred(conn_t *c, const mw_cred_t *cred, const char *how) {
  assert(cred != NULL);
  assert(!c->closing);
  c->cred = cred;
  c->authed = true;
  snprintf(c->cred_name, sizeof c->cred_name, "%s", cred->name);
  uv_timer_stop(&c->deadline);
  refresh_perms(c);
  mw_log_debug("connection %s authenticated as \"%s\" (%s)", c->peer, cred->name, how);
}

/* Refuse the connection's authentication: one ERR (line 0 when no request
 * is answered) in every reply mode, then the connection ends. */
static void auth_refuse(conn_t *c, uint64_t line, size_t bytes, const char *msg) {
  assert(!c->closing);
  assert(msg != NULL);
  if (mw_lp_push_replies(&c->lp, MW_LP_REPLIES_ALL, 0) < 0) {
    conn_close(c, "out of memory");
    return;
  }
  cut(c);
  if (c->closing) return;
  refuse_line(c, line, MW_LP_E_AUTH, msg, NULL, 0, bytes); /* never log a token */
  if (c->closing) return;
  mw_lp_push_quit(&c->lp, 0);
  c->eof = true;
  uv_timer_stop(&c->deadline);
}

/* AUTH <token>: the principal whose token it is. */
static bool on_auth(conn_t *c, const mw_lp_request_t *r) {
  mw_server_t *s = c->srv;
  char msg[MW_LP_MSG_BYTES];
  if (r->kind != MW_LP_AUTH) {
    if (c->cred_name[0]) snprintf(msg, sizeof msg, "credential \"%s\" revoked", c->cred_name);
    auth_refuse(c, r->line, r->bytes, c->cred_name[0] ? msg : "AUTH <token> must come first");
    return false;
  }
  if (!c->auth_in_clear) {
    auth_refuse(c, r->line, r->bytes, "AUTH refused over plain TCP on a listener not bound to loopback: "
                            "use a tls listener (or plaintext_auth on this one)");
    return false;
  }
  const mw_cred_t *cred = mw_creds_by_token(s->creds, r->data, r->len);
  if (cred == NULL) {
    snprintf(msg, sizeof msg, "wrong token%s", c->cred_name[0] ? " (a revoked credential)" : "");
    auth_refuse(c, r->line, r->bytes, msg);
    return false;
  }
  set_cred(c, cred, "token");
  return true;
}

/* A row the connection may not write: which permission it lacks. */
static void refuse_forbidden(conn_t *c, const mw_lp_request_t *r, unsigned need) {
  char msg[MW_LP_MSG_BYTES];
  snprintf(msg, sizeof msg, "table \"%.127s\": principal \"%s\" may not %s (its permissions here: %s)",
           c->table_name, c->cred_name, need == MW_PERM_DELETE ? "delete" : "write", mw_perms_name(c->perms));
  reply_err(c, r, MW_LP_E_FORBIDDEN, msg);
}

/* One request. Returns false when the connection stops taking requests. */
static bool handle(conn_t *c, const mw_lp_request_t *r) {
  mw_server_t *s = c->srv;
  assert(s);
  assert(!c->closing);
  assert(r->line > 0);
  if (!c->authed) return on_auth(c, r);
  switch (r->kind) {
  case MW_LP_ROW:
  case MW_LP_DEL: on_row(c, r); break;
  case MW_LP_ARROW: on_arrow(c, r); break;
  case MW_LP_USE:
    cut(c);
    if (!use_table(c, r->data, r->len)) {
      char msg[MW_LP_MSG_BYTES];
      snprintf(msg, sizeof msg, "unknown table \"%.*s\"", (int)(r->len > 200 ? 200 : r->len), r->data);
      reply_err(c, r, MW_LP_E_TABLE, msg);
    }
    break;
  case MW_LP_REPLIES:
    cut(c);
    if (mw_lp_push_replies(&c->lp, r->replies, r->bytes) < 0) conn_close(c, "out of memory");
    break;
  case MW_LP_SYNC: on_sync(c, r); break;
  case MW_LP_PING:
    cut(c);
    if (mw_lp_push_pong(&c->lp, r->bytes) < 0) conn_close(c, "out of memory");
    break;
  case MW_LP_QUIT:
    cut(c);
    if (mw_lp_push_quit(&c->lp, r->bytes) < 0) conn_close(c, "out of memory");
    return false;
  case MW_LP_AUTH: break; /* already authenticated (or no credentials): ignored */
  case MW_LP_ERROR: reply_err(c, r, r->code, r->msg); break;
  }
  return !c->closing;
}

/* Take the buffered requests in order (see "parse jobs"): rows into the
 * collecting job, anything else once the jobs before it are applied. Stops
 * with the request kept (stash) when it must wait. */
static void process(conn_t *c) {
  assert(!c->closing);
  assert(!c->in_process);
  assert(!c->stashed || stash_ready(c));
  mw_server_t *s = c->srv;
  c->in_process = true;
  while (!c->closing) {
    if (!c->stashed) {
      if (mw_lp_next(&c->lp, &c->stash) != 1) break;
      c->stashed = true;
    }
    const mw_lp_request_t *r = &c->stash;
    if (row_now(c, r)) {
      pjob_t *j = fill_job(c);
      if (!j) break; /* every slot in flight (or closed) */
      if (mw_rowjob_add(&j->rj, r->data, r->len, r->line, r->bytes, r->kind == MW_LP_DEL) < 0) {
        conn_close(c, "out of memory");
        break;
      }
      c->stashed = false;
      if (j->rj.n_lines >= s->opts.max_batch_rows) dispatch(c);
      continue;
    }
    dispatch(c); /* the rows before it go first */
    if (c->job_count > 0) break; /* its reply comes after theirs: wait */
    c->stashed = false;
    if (!handle(c, r)) { /* QUIT or failed AUTH: ignore the rest */
      c->eof = true;
      break;
    }
  }
  if (!c->closing) dispatch(c);
  c->in_process = false;
  assert(c->closing || c->fill == NULL);
}

/* ------------------------------------------------------------------ TLS and deadlines */

static void on_deadline(uv_timer_t *t);

/* The handshake just finished: a listed client certificate authenticates;
 * otherwise, with credentials, AUTH has auth_timeout_ms. */
static void handshake_done(conn_t *c) {
  mw_server_t *s = c->srv;
  assert(c->handshaking);
  assert(c->tls.ready);
  c->handshaking = false;
  s->n_handshakes--;
  count_handshake(s, "ok");
  uv_timer_stop(&c->deadline);
  char subject[MW_TLS_SUBJECT_BYTES], how[MW_TLS_SUBJECT_BYTES + 80];
  const mw_cred_t *cred = NULL;
  if (mw_tls_conn_peer_subject(&c->tls, subject, sizeof subject) == 1)
    cred = mw_creds_by_subject(s->creds, subject);
  if (mw_log_enabled(MW_LOG_DEBUG)) {
    mw_tls_conn_describe(&c->tls, how, sizeof how);
    mw_log_debug("connection %s: TLS up (%s), client certificate \"%s\"", c->peer, how, subject);
  }
  if (cred != NULL) {
    snprintf(how, sizeof how, "certificate %s", subject);
    set_cred(c, cred, how);
  } else if (!c->authed) {
    uv_timer_start(&c->deadline, on_deadline, s->opts.auth_timeout_ms, 0);
  }
}

/* n bytes from a TLS socket: s->tls_plain gets their plaintext, what the
 * peer must get is written; *closed: the peer's close_notify came after
 * it (its EOF). false: the connection ends (TLS failed; nothing of this
 * read is taken). */
static bool tls_in(conn_t *c, const char *data, size_t n, bool *closed) {
  mw_server_t *s = c->srv;
  mw_err_t err = {0};
  mw_buf_reset(&s->tls_plain);
  mw_buf_reset(&s->tls_wire);
  bool was_ready = c->tls.ready;
  int rc = mw_tls_conn_feed(&c->tls, data, n, &s->tls_plain, &s->tls_wire, &err);
  write_raw(c, s->tls_wire.data, s->tls_wire.len); /* an alert too */
  if (c->closing) return false;
  if (rc < 0) {
    c->tls_failed = true;
    snprintf(c->fail_why, sizeof c->fail_why, "%.190s", err.msg);
    if (c->handshaking) {
      count_error(s, "", MW_LP_E_AUTH, 0);
      count_handshake(s, "failed");
    }
    c->eof = c->peer_eof = true; /* nothing more is read: close once the alert is out */
    cut(c);
    if (c->closing) return false;
    send_ready(c);
    flow(c);
    return false;
  }
  if (!was_ready && c->tls.ready) handshake_done(c);
  *closed = rc == 1;
  return true;
}

/* The handshake's deadline, then AUTH's. */
static void on_deadline(uv_timer_t *t) {
  conn_t *c = t->data;
  if (c->closing) return;
  mw_server_t *s = c->srv;
  if (c->handshaking) {
    count_error(s, "", MW_LP_E_AUTH, 0);
    count_handshake(s, "timeout");
    conn_close(c, "TLS handshake not finished within handshake_timeout_ms");
    return;
  }
  if (c->authed || c->eof || c->shutting || c->discarding) return;
  char msg[128];
  snprintf(msg, sizeof msg, "no AUTH within %" PRIu64 " ms (auth_timeout_ms)", s->opts.auth_timeout_ms);
  auth_refuse(c, 0, 0, msg);
  if (c->closing) return;
  send_ready(c);
  flow(c);
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
  if (c->discarding) { /* every reply written, FIN sent: wait for EOF */
    if (n < 0) conn_close(c, c->why);
    return;
  }
  assert(!c->stashed);
  assert(c->fill == NULL); /* reading stops while a request waits */
  if (n < 0) {
    /* EOF or error: a half line is dropped; answer what is complete */
    c->eof = true;
    c->peer_eof = true;
    cut(c);
    if (c->closing) return;
    send_ready(c);
    if (n != UV_EOF) conn_close(c, uv_strerror((int)n));
    else flow(c);
    return;
  }
  if (n == 0) return;
  mw_server_t *s = c->srv;
  c->read_full = (size_t)n == MW_SERVER_READ_CHUNK_BYTES;
  if (s->opts.idle_timeout_ms > 0) uv_timer_again(&c->idle);
  const char *data = buf->base;
  size_t len = (size_t)n;
  bool closed = false;
  if (c->is_tls) {
    if (!tls_in(c, data, len, &closed)) return;
    data = (const char *)s->tls_plain.data;
    len = s->tls_plain.len;
  }
  if (c->lp.quit || (len > 0 && mw_lp_feed(&c->lp, data, len) < 0)) {
    if (!c->lp.quit) conn_close(c, "out of memory");
    return;
  }
  process(c);
  if (c->closing) return;
  if (!c->authed && !c->eof && s->creds && mw_lp_buffered(&c->lp) > s->opts.max_preauth_bytes) {
    char msg[128];
    snprintf(msg, sizeof msg, "more than %zu bytes before AUTH (max_preauth_bytes)", s->opts.max_preauth_bytes);
    auth_refuse(c, 0, 0, msg);
    if (c->closing) return;
  }
  if (closed) { /* close_notify: as the peer's EOF, every complete request is answered */
    c->eof = c->peer_eof = true;
    cut(c);
    if (c->closing) return;
  }
  send_ready(c); /* the gather, if any, is flow's to cut or keep */
  flow(c);
}

/* Reply bytes still in the kernel's send queue: written by us, not yet
 * taken (acknowledged) by the peer. */
static size_t unsent_bytes(conn_t *c) {
  uv_os_fd_t fd;
  int queued = 0;
  if (uv_fileno((uv_handle_t *)&c->tcp, &fd) != 0 || ioctl(fd, TIOCOUTQ, &queued) != 0) return 0;
  return queued > 0 ? (size_t)queued : 0;
}

/* Runs only while the connection is read (set_reading); while finishing
 * it bounds the wait for the peer's EOF. A connection is idle when nothing
 * moves either way: no request, no engine work, no reply on its way. */
static void on_idle(uv_timer_t *t) {
  conn_t *c = t->data;
  if (c->closing) return;
  assert(c->reading);
  if (c->discarding) conn_close(c, c->why);
  else if (c->refs == 0 && c->writes == 0 && c->open == NULL && unsent_bytes(c) == 0)
    conn_close(c, "idle");
}

/* ------------------------------------------------------------------ accept */

static void free_handle(uv_handle_t *h) { free(h); }

static void on_reject_written(uv_write_t *req, int status) {
  (void)status;
  uv_close((uv_handle_t *)req->handle, free_handle);
  free(req);
}

static void log_refused(mw_server_t *s, const char *limit) {
  count_error(s, "", MW_LP_E_OVERLOADED, 0);
  uint64_t suppressed;
  if (mw_log_limit_take(&s->log_closes, uv_now(s->loop), &suppressed))
    mw_log_warn("connection refused: %s reached%s", limit, suppressed ? " (more closes were not logged)" : "");
}

/* Over a limit: accept and close, with "ERR 0 overloaded" on a plain
 * listener (a TLS peer could not read it). */
static void reject(mw_server_t *s, uv_stream_t *server, bool tls, const char *limit) {
  uv_tcp_t *t = malloc(sizeof *t);
  if (!t) return;
  uv_tcp_init(s->loop, t);
  if (uv_accept(server, (uv_stream_t *)t) < 0 || tls) {
    uv_close((uv_handle_t *)t, free_handle);
    if (tls) log_refused(s, limit);
    return;
  }
  static char msg[] = "ERR 0 overloaded too many connections (max_connections)\n";
  uv_write_t *w = malloc(sizeof *w);
  uv_buf_t b = uv_buf_init(msg, sizeof msg - 1);
  if (!w || uv_write(w, (uv_stream_t *)t, &b, 1, on_reject_written) < 0) {
    free(w);
    uv_close((uv_handle_t *)t, free_handle);
  }
  log_refused(s, limit);
}

/* "1.2.3.4:5678" / "[::1]:5678" of the peer, "?" when unknown. */
static void peer_name(uv_tcp_t *t, char *out, size_t n) {
  struct sockaddr_storage sa;
  int len = sizeof sa;
  char host[INET6_ADDRSTRLEN] = "?";
  snprintf(out, n, "?");
  if (uv_tcp_getpeername(t, (struct sockaddr *)&sa, &len) != 0) return;
  if (sa.ss_family == AF_INET6) {
    const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&sa;
    uv_ip6_name(a, host, sizeof host);
    snprintf(out, n, "[%s]:%d", host, ntohs(a->sin6_port));
  } else if (sa.ss_family == AF_INET) {
    const struct sockaddr_in *a = (const struct sockaddr_in *)&sa;
    uv_ip4_name(a, host, sizeof host);
    snprintf(out, n, "%s:%d", host, ntohs(a->sin_port));
  }
}

/* max_handshakes reached: the oldest unfinished handshake makes room for
 * the new one, so a peer holding handshakes open (slowloris) must open
 * max_handshakes connections within one honest handshake's time to keep
 * anyone out, not merely keep them. false: none to evict. */
static bool evict_handshake(mw_server_t *s) {
  conn_t *oldest = NULL;
  for (conn_t *c = s->conns; c; c = c->next)
    if (c->handshaking && !c->closing && (!oldest || c->accepted_ms <= oldest->accepted_ms)) oldest = c;
  if (oldest == NULL) return false;
  count_error(s, "", MW_LP_E_OVERLOADED, 0);
  count_handshake(s, "evicted");
  conn_close(oldest, "TLS handshake evicted: max_handshakes reached, the oldest goes");
  return true;
}

static void on_connection(uv_stream_t *server, int status) {
  mw_server_t *s = server->data;
  if (status < 0 || s->stopping) return;
  size_t li = (size_t)((uv_tcp_t *)server - s->listeners);
  assert(li < s->n_listeners);
  if (s->n_conns >= s->opts.max_connections) {
    reject(s, server, s->listen_tls[li], "max_connections");
    return;
  }
  if (s->listen_tls[li] && s->n_handshakes >= s->opts.max_handshakes && !evict_handshake(s)) {
    reject(s, server, true, "max_handshakes (TLS handshakes in flight)");
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
  for (int i = 0; i < PARSE_JOBS; i++) {
    pjob_t *j = &c->jobs[i];
    mw_rowjob_init(&j->rj);
    j->c = c;
    j->s = s;
    j->work.work = parse_work;
    j->work.after = parse_after;
  }
  uv_tcp_init(s->loop, &c->tcp);
  uv_timer_init(s->loop, &c->idle);
  uv_timer_init(s->loop, &c->gather_timer);
  uv_timer_init(s->loop, &c->deadline);
  c->tcp.data = c->idle.data = c->gather_timer.data = c->deadline.data = c;
  c->handles_open = CONN_HANDLES;
  c->next = s->conns;
  if (s->conns) s->conns->prev = c;
  s->conns = c;
  s->n_conns++;
  count_conn(s, +1);
  c->authed = s->creds == NULL;
  c->perms = c->authed ? MW_PERM_ALL : 0;
  c->auth_in_clear = s->listen_auth_in_clear[li];
  mw_lp_replies_default(&c->lp, s->listen_replies[li]);
  if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
    snprintf(c->peer, sizeof c->peer, "?");
    conn_close(c, "accept failed");
    return;
  }
  if (s->listen_tls[li]) {
    if (mw_tls_conn_init(&c->tls, s->opts.tls) < 0) {
      conn_close(c, "out of memory (TLS)");
      return;
    }
    c->is_tls = c->handshaking = true;
    c->accepted_ms = uv_now(s->loop);
    s->n_handshakes++;
    uv_timer_start(&c->deadline, on_deadline, s->opts.handshake_timeout_ms, 0);
  } else if (!c->authed) {
    uv_timer_start(&c->deadline, on_deadline, s->opts.auth_timeout_ms, 0);
  }
  peer_name(&c->tcp, c->peer, sizeof c->peer);
  uv_tcp_nodelay(&c->tcp, 1);
  uv_tcp_keepalive(&c->tcp, 1, MW_SERVER_KEEPALIVE_S);
  if (s->default_table) use_table(c, s->default_table, strlen(s->default_table));
  flow(c);
}

/* ------------------------------------------------------------------ public */

int mw_server_addr_parse(const char *text, struct sockaddr_storage *out, mw_err_t *err) {
  assert(text);
  assert(out);
  char host[256];
  memset(out, 0, sizeof *out);
  const char *colon = strrchr(text, ':');
  if (!colon || colon == text)
    return mw_err_set(err, -EINVAL, "\"%.200s\": expected HOST:PORT or [V6]:PORT", text);
  char *end;
  errno = 0;
  long port = strtol(colon + 1, &end, 10);
  if (colon[1] == '\0' || *end || errno || port < 0 || port > 65535)
    return mw_err_set(err, -EINVAL, "\"%.200s\": the port must be a number in 0..65535, got \"%.20s\"",
                      text, colon + 1);
  size_t hl = (size_t)(colon - text);
  if (hl >= sizeof host) return mw_err_set(err, -EINVAL, "\"%.200s\": host name too long", text);
  memcpy(host, text, hl);
  host[hl] = 0;
  if (host[0] == '[') {
    if (hl < 3 || host[hl - 1] != ']' || (host[hl - 1] = 0,
        uv_ip6_addr(host + 1, (int)port, (struct sockaddr_in6 *)out) != 0))
      return mw_err_set(err, -EINVAL, "\"%.200s\": [%.100s] is not an IPv6 address", text, host + 1);
    return 0;
  }
  if (strcmp(host, "*") == 0) strcpy(host, "0.0.0.0");
  if (uv_ip4_addr(host, (int)port, (struct sockaddr_in *)out) == 0) return 0;
  /* a name (localhost, a host name): its first address, IPv4 first */
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_ADDRCONFIG};
  struct addrinfo *res = NULL;
  int g = getaddrinfo(host, NULL, &hints, &res);
  if (g != 0)
    return mw_err_set(err, -EINVAL, "\"%.200s\": cannot resolve \"%.100s\": %s", text, host, gai_strerror(g));
  const struct addrinfo *pick = res;
  for (const struct addrinfo *a = res; a; a = a->ai_next)
    if (a->ai_family == AF_INET) {
      pick = a;
      break;
    }
  assert(pick->ai_addrlen <= sizeof *out);
  memcpy(out, pick->ai_addr, pick->ai_addrlen);
  if (out->ss_family == AF_INET6) ((struct sockaddr_in6 *)out)->sin6_port = htons((uint16_t)port);
  else ((struct sockaddr_in *)out)->sin_port = htons((uint16_t)port);
  freeaddrinfo(res);
  return 0;
}

static void on_listener_closed(uv_handle_t *h) {
  mw_server_t *s = h->data;
  s->closing_handles--;
  server_maybe_done(s);
}

/* Every limit left 0: its default. */
static void opts_defaults(mw_server_opts_t *o) {
  if (!o->max_connections) o->max_connections = MW_SERVER_DEFAULT_MAX_CONNECTIONS;
  if (!o->max_unacked_bytes_per_connection) o->max_unacked_bytes_per_connection = MW_SERVER_DEFAULT_MAX_UNACKED_BYTES;
  if (!o->max_reply_bytes_per_connection) o->max_reply_bytes_per_connection = MW_SERVER_DEFAULT_MAX_REPLY_BYTES;
  if (!o->max_batch_rows) o->max_batch_rows = MW_SERVER_DEFAULT_MAX_BATCH_ROWS;
  if (!o->drain_timeout_ms) o->drain_timeout_ms = MW_SERVER_DEFAULT_DRAIN_TIMEOUT_MS;
  if (!o->max_handshakes) o->max_handshakes = MW_SERVER_DEFAULT_MAX_HANDSHAKES;
  if (!o->handshake_timeout_ms) o->handshake_timeout_ms = MW_SERVER_DEFAULT_HANDSHAKE_TIMEOUT_MS;
  if (!o->auth_timeout_ms) o->auth_timeout_ms = MW_SERVER_DEFAULT_AUTH_TIMEOUT_MS;
  if (!o->max_preauth_bytes) o->max_preauth_bytes = MW_SERVER_DEFAULT_MAX_PREAUTH_BYTES;
}

/* The credentials and the auth_token principal; creds is taken over. */
static int creds_with_token(const mw_server_t *s, mw_creds_t **creds) {
  if (s->token == NULL) return 0;
  if (mw_creds_by_name(*creds, "auth_token") != NULL) return 0; /* the file's own wins */
  return mw_creds_add_token(creds, "auth_token", s->token, MW_PERM_ALL);
}

/* Listener i on `addr` (a loopback address allows AUTH in clear). */
static int listen_on(mw_server_t *s, size_t i, const char *addr, mw_err_t *err) {
  assert(i < MW_SERVER_MAX_LISTEN);
  assert(s->n_listeners == i);
  struct sockaddr_storage sa;
  int rc = mw_server_addr_parse(addr, &sa, err);
  if (rc < 0) return rc;
  s->n_listeners++; /* initialised below whatever happens: mw_server_stop closes it */
  if (mw_listen_loopback(&sa)) s->listen_auth_in_clear[i] = true;
  rc = mw_listen_tcp(s->loop, &s->listeners[i], &sa, MW_SERVER_BACKLOG, on_connection, s);
  if (rc < 0) mw_err_set(err, rc, "listen %s: %s", addr, uv_strerror(rc));
  return rc;
}

/* The options a server cannot start with: -EINVAL with the reason. */
static int opts_check(const mw_server_opts_t *opts, const mw_fe_engine_t *engine, mw_err_t *err) {
  bool any_tls = false;
  for (size_t i = 0; opts->listen_tls && i < opts->n_listen && i < MW_SERVER_MAX_LISTEN; i++)
    any_tls |= opts->listen_tls[i];
  if (!engine->table_find || !engine->submit)
    return mw_err_set(err, -EINVAL, "server: engine lacks table_find or submit");
  if (opts->n_listen == 0 || opts->n_listen > MW_SERVER_MAX_LISTEN)
    return mw_err_set(err, -EINVAL, "server: 1..%d listen addresses", MW_SERVER_MAX_LISTEN);
  if (any_tls && opts->tls == NULL)
    return mw_err_set(err, -EINVAL, "server: a tls listener needs tls_cert_file and tls_key_file");
  return 0;
}

/* Each listener's reply mode, TLS and AUTH-in-clear from the options (the
 * per-listener arrays are the caller's: not kept). */
static void listen_settings(mw_server_t *s, const mw_server_opts_t *opts) {
  assert(opts->n_listen <= MW_SERVER_MAX_LISTEN); /* opts_check */
  for (size_t i = 0; i < opts->n_listen; i++) {
    s->listen_replies[i] = opts->listen_replies ? opts->listen_replies[i] : opts->replies;
    assert((unsigned)s->listen_replies[i] < MW_LP_N_REPLIES);
    s->listen_tls[i] = opts->listen_tls && opts->listen_tls[i];
    s->listen_auth_in_clear[i] = s->listen_tls[i] || (opts->listen_plain_auth && opts->listen_plain_auth[i]);
  }
  s->opts.listen_replies = NULL;
  s->opts.listen_tls = s->opts.listen_plain_auth = NULL;
}

/* The parse workers. MEMWALD_PARSE_THREADS=N (benchmarks' A/B runs): N
 * workers, 0 = every parse on the loop thread as before; unset = one per
 * CPU. Without them (degraded, not refused) rows are parsed on the loop. */
static void pool_start(mw_server_t *s) {
  assert(s->pool == NULL);
  const char *pt = getenv("MEMWALD_PARSE_THREADS");
  long n_threads = pt && *pt ? strtol(pt, NULL, 10) : 0;
  if (!(pt && *pt && n_threads <= 0)) {
    int rc = mw_workpool_start(s->loop, n_threads > 0 ? (size_t)n_threads : 0, &s->pool);
    if (rc < 0) {
      mw_log_warn("server: no parse threads (%s): parsing rows on the loop thread", mw_strerror(rc));
      s->pool = NULL;
    }
  }
  mw_log_info("server: %zu parse threads", s->pool ? mw_workpool_threads(s->pool) : (size_t)0);
}

int mw_server_start(uv_loop_t *loop, const mw_server_opts_t *opts, const mw_fe_engine_t *engine,
                    mw_server_t **out, mw_err_t *err) {
  assert(loop);
  assert(opts);
  assert(engine);
  assert(out);
  *out = NULL;
  mw_creds_t *creds = opts->creds;
  int bad = opts_check(opts, engine, err);
  mw_server_t *s = bad ? NULL : calloc(1, sizeof *s);
  if (!s) {
    mw_creds_free(creds);
    return bad ? bad : -ENOMEM;
  }
  s->loop = loop;
  s->opts = *opts;
  s->eng = *engine;
  opts_defaults(&s->opts);
  s->opts.creds = NULL;
  s->creds = creds;
  listen_settings(s, opts);
  s->log_rejects = (mw_log_limit_t)MW_LOG_LIMIT_INIT(MW_SERVER_LOG_BURST, MW_SERVER_LOG_WINDOW_MS);
  s->log_closes = (mw_log_limit_t)MW_LOG_LIMIT_INIT(MW_SERVER_LOG_BURST, MW_SERVER_LOG_WINDOW_MS);
  if (opts->auth_token && opts->auth_token[0]) s->token = strdup(opts->auth_token);
  if (opts->default_table && opts->default_table[0]) s->default_table = strdup(opts->default_table);
  s->rbuf = malloc(MW_SERVER_READ_CHUNK_BYTES);
  if (!s->rbuf || (opts->auth_token && opts->auth_token[0] && !s->token) || creds_with_token(s, &s->creds) < 0) {
    free(s->rbuf);
    free(s->token);
    free(s->default_table);
    mw_creds_free(s->creds);
    free(s);
    return -ENOMEM;
  }
  s->opts.listen = NULL;
  metrics_init(s);
  pool_start(s);
  int rc = 0;
  for (size_t i = 0; i < opts->n_listen && rc == 0; i++) rc = listen_on(s, i, opts->listen[i], err);
  if (rc < 0) {
    mw_server_stop(s, NULL, NULL);
    return rc;
  }
  *out = s;
  return 0;
}

static void on_drain_timer_closed(uv_handle_t *h) { on_listener_closed(h); }

static void on_pool_closed(void *arg) {
  mw_server_t *s = arg;
  assert(s->closing_handles > 0);
  s->closing_handles--;
  server_maybe_done(s);
}

static void on_drain_timeout(uv_timer_t *t) {
  mw_server_t *s = t->data;
  assert(s->stopping);
  mw_log_warn("stop: %zu connections not drained after %" PRIu64 " ms; closing them", s->n_conns,
              s->opts.drain_timeout_ms);
  while (s->conns) conn_close(s->conns, "stop: drain timeout");
}

void mw_server_stop(mw_server_t *s, void (*cb)(void *arg), void *arg) {
  assert(s);
  assert(!s->stopping);
  s->stopping = true;
  s->stop_cb = cb;
  s->stop_arg = arg;
  for (size_t i = 0; i < s->n_listeners; i++) {
    s->closing_handles++;
    uv_close((uv_handle_t *)&s->listeners[i], on_listener_closed);
  }
  if (s->conns && uv_timer_init(s->loop, &s->drain_timer) == 0) {
    s->drain_timer.data = s;
    s->drain_timer_on = true;
    uv_timer_start(&s->drain_timer, on_drain_timeout, s->opts.drain_timeout_ms, 0);
  }
  if (s->n_conns > 0)
    mw_log_info("stop: draining %zu connection%s (%zu row parses in flight)", s->n_conns,
                s->n_conns == 1 ? "" : "s", s->jobs);
  /* each connection drains on its own from here (flow -> drain) */
  conn_t *next;
  for (conn_t *c = s->conns; c; c = next) {
    next = c->next;
    cut(c);
    send_ready(c);
    flow(c);
  }
  server_maybe_done(s); /* frees now only when nothing was open */
}

size_t mw_server_connections(const mw_server_t *s) { return s->n_conns; }

/* Connection c's principal after a credentials swap: the same name and
 * the same secret (token hash, certificate subject), or revoked. */
static void conn_recheck(conn_t *c) {
  mw_server_t *s = c->srv;
  if (c->closing || !c->authed) return; /* refused already, or waiting for AUTH */
  const mw_cred_t *was = c->cred, *now = c->cred_name[0] ? mw_creds_by_name(s->creds, c->cred_name) : NULL;
  bool same = was != NULL && now != NULL && now->kind == was->kind &&
              (now->kind == MW_CRED_TOKEN ? memcmp(now->hash, was->hash, sizeof now->hash) == 0
                                          : strcmp(now->subject, was->subject) == 0);
  if (same) {
    c->cred = now;
    refresh_perms(c);
    return;
  }
  c->cred = NULL;
  c->authed = false;
  c->perms = 0;
  if (c->job_count > 0 || c->stashed || c->open || c->eof || c->shutting || c->discarding)
    return; /* its next request is refused (on_auth) */
  char msg[160];
  if (was) snprintf(msg, sizeof msg, "credential \"%s\" revoked", c->cred_name);
  else snprintf(msg, sizeof msg, "authentication is now required (credentials reloaded)");
  auth_refuse(c, 0, 0, msg);
  if (c->closing) return;
  send_ready(c);
  flow(c);
}

void mw_server_set_creds(mw_server_t *s, mw_creds_t *creds) {
  assert(s != NULL);
  mw_creds_t *old = s->creds;
  s->creds = creds;
  if (creds_with_token(s, &s->creds) < 0) mw_log_err("credentials: out of memory adding auth_token");
  if (s->creds == NULL && old != NULL)
    mw_log_warn("credentials: none left; connections already authenticated keep their rights");
  conn_t *next;
  for (conn_t *c = s->conns; c; c = next) {
    next = c->next; /* a refused connection may close */
    if (s->creds != NULL) {
      conn_recheck(c);
    } else if (!c->closing) { /* no authentication any more */
      c->cred = NULL;
      c->authed = true;
      refresh_perms(c);
    }
  }
  mw_creds_free(old);
}

int mw_server_port(const mw_server_t *s, size_t i) {
  assert(s != NULL);
  if (i >= s->n_listeners) return -EINVAL;
  return mw_listen_port(&s->listeners[i]);
}
