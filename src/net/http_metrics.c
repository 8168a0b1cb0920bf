/*
 * http_metrics.c — a deliberately tiny HTTP/1.1 responder for Prometheus
 * scrapes (see http_metrics.h). One request per connection, no keep-alive,
 * no chunked bodies, nothing but the request line is interpreted.
 */
#include "net/http_metrics.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/listen.h"
#include "net/server.h" /* mw_server_addr_parse */

typedef struct hconn {
  uv_tcp_t tcp;
  uv_timer_t timer;
  mw_http_metrics_t *h;
  struct hconn *prev, *next;
  char head[MW_HTTP_MAX_HEAD_BYTES];
  size_t len;
  int handles;
  bool answered, closing;
  uv_write_t wr;
  mw_buf_t out;
  bool is_tls, failed;
  mw_tls_conn_t tls;
  int writes;           /* handshake flights in flight (heap copies) */
} hconn_t;

struct mw_http_metrics {
  uv_loop_t *loop;
  uv_tcp_t listener;
  mw_metrics_t *metrics;
  mw_tls_ctx_t *tls;
  mw_buf_t plain, wire; /* TLS scratch of the loop thread */
  hconn_t *conns;
  size_t n_conns;
  bool stopping, listener_open;
};

static void maybe_free(mw_http_metrics_t *h) {
  assert(h->n_conns <= MW_HTTP_MAX_CONNECTIONS + 1); /* one over: accepted to be refused */
  if (!h->stopping || h->listener_open || h->n_conns > 0) return;
  mw_buf_free(&h->plain);
  mw_buf_free(&h->wire);
  free(h);
}

static void on_closed(uv_handle_t *hd) {
  hconn_t *c = hd->data;
  if (--c->handles > 0) return;
  assert(c->closing); /* only conn_close closes its handles */
  assert(c->writes == 0); /* a flight in flight holds the tcp handle open */
  mw_http_metrics_t *h = c->h;
  if (c->prev) c->prev->next = c->next;
  else h->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  h->n_conns--;
  mw_buf_free(&c->out);
  mw_tls_conn_free(&c->tls);
  free(c);
  maybe_free(h);
}

static void conn_close(hconn_t *c) {
  if (c->closing) return;
  c->closing = true;
  uv_close((uv_handle_t *)&c->tcp, on_closed);
  uv_close((uv_handle_t *)&c->timer, on_closed);
}

static void on_written(uv_write_t *w, int status) {
  (void)status;
  assert(((hconn_t *)w->data)->answered); /* the one reply */
  conn_close(w->data);
}

static void respond(hconn_t *c, int code, const char *reason, const mw_buf_t *body, bool head_only) {
  assert(!c->answered); /* one reply per connection */
  assert(reason != NULL);
  c->answered = true;
  uv_read_stop((uv_stream_t *)&c->tcp);
  uv_timer_stop(&c->timer);
  char hdr[256];
  size_t blen = body ? body->len : strlen(reason) + 1;
  int n = snprintf(hdr, sizeof hdr,
                   "HTTP/1.1 %d %s\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                   "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                   code, reason, blen);
  assert(n > 0);
  assert((size_t)n < sizeof hdr); /* the reasons are ours and short */
  int rc = mw_buf_append(&c->out, hdr, (size_t)n);
  if (rc == 0 && !head_only) {
    if (body) rc = mw_buf_append(&c->out, body->data, body->len);
    else {
      rc = mw_buf_append(&c->out, reason, strlen(reason));
      if (rc == 0) rc = mw_buf_append(&c->out, "\n", 1);
    }
  }
  if (rc == 0 && c->is_tls) { /* the reply inside TLS, then close_notify */
    mw_buf_t *w = &c->h->wire;
    mw_buf_reset(w);
    rc = mw_tls_conn_write(&c->tls, c->out.data, c->out.len, w, NULL);
    if (rc == 0) rc = mw_tls_conn_close_notify(&c->tls, w);
    mw_buf_reset(&c->out);
    if (rc == 0) rc = mw_buf_append(&c->out, w->data, w->len);
  }
  uv_buf_t b = uv_buf_init((char *)c->out.data, (unsigned)c->out.len);
  c->wr.data = c;
  if (rc < 0 || uv_write(&c->wr, (uv_stream_t *)&c->tcp, &b, 1, on_written) < 0) conn_close(c);
}

static void handle(hconn_t *c) {
  assert(c->len >= 4); /* a head ends with an empty line */
  assert(c->len <= sizeof c->head);
  char *sp1 = memchr(c->head, ' ', c->len);
  char *eol = memchr(c->head, '\r', c->len);
  if (!sp1 || !eol || sp1 > eol) {
    respond(c, 400, "Bad Request", NULL, false);
    return;
  }
  size_t ml = (size_t)(sp1 - c->head);
  bool get = ml == 3 && memcmp(c->head, "GET", 3) == 0;
  bool head = ml == 4 && memcmp(c->head, "HEAD", 4) == 0;
  if (!get && !head) {
    respond(c, 405, "Method Not Allowed", NULL, false);
    return;
  }
  char *path = sp1 + 1;
  char *sp2 = memchr(path, ' ', (size_t)(eol - path));
  size_t pl = sp2 ? (size_t)(sp2 - path) : (size_t)(eol - path);
  char *q = memchr(path, '?', pl);
  if (q) pl = (size_t)(q - path);
  if (pl != 8 || memcmp(path, "/metrics", 8) != 0) {
    respond(c, 404, "Not Found", NULL, head);
    return;
  }
  mw_buf_t body = MW_BUF_INIT;
  if (c->h->metrics && mw_metrics_render(c->h->metrics, &body) < 0) {
    mw_buf_free(&body);
    respond(c, 500, "Internal Server Error", NULL, head);
    return;
  }
  respond(c, 200, "OK", &body, head);
  mw_buf_free(&body);
}

static void on_alloc(uv_handle_t *hd, size_t hint, uv_buf_t *b) {
  (void)hint;
  hconn_t *c = hd->data;
  assert(c->len < sizeof c->head); /* a full head was answered 400 */
  /* TLS: ciphertext lands in the head's free room and is replaced by its
   * plaintext (records carry at most what they hold, so it fits but for
   * framing, which the 400 for a full head covers) */
  *b = uv_buf_init(c->head + c->len, (unsigned)(sizeof c->head - c->len));
}

/* A handshake flight (or alert) to the peer: a heap copy per write. */
typedef struct hwrite {
  uv_write_t req;
  hconn_t *c;
  char data[];
} hwrite_t;

static void on_flight_written(uv_write_t *req, int status) {
  hwrite_t *w = req->data;
  hconn_t *c = w->c;
  c->writes--;
  free(w);
  if (status < 0 || (c->failed && c->writes == 0)) conn_close(c); /* the alert is out */
}

static int write_flight(hconn_t *c, const mw_buf_t *wire) {
  if (wire->len == 0) return 0;
  hwrite_t *w = malloc(sizeof *w + wire->len);
  if (w == NULL) return -ENOMEM;
  memcpy(w->data, wire->data, wire->len);
  w->c = c;
  w->req.data = w;
  uv_buf_t b = uv_buf_init(w->data, (unsigned)wire->len);
  int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_flight_written);
  if (rc < 0) {
    free(w);
    return rc;
  }
  c->writes++;
  return 0;
}

/* TLS: the ciphertext in c->head[c->len, + n) becomes plaintext in its
 * place. Returns the plaintext bytes, or < 0 (the connection closes once
 * the alert is out). */
static ssize_t tls_in(hconn_t *c, size_t n) {
  mw_http_metrics_t *h = c->h;
  mw_buf_reset(&h->plain);
  mw_buf_reset(&h->wire);
  int rc = mw_tls_conn_feed(&c->tls, c->head + c->len, n, &h->plain, &h->wire, NULL);
  if (write_flight(c, &h->wire) < 0 || rc < 0) {
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->answered = c->failed = true;
    if (c->writes == 0) conn_close(c);
    return -1;
  }
  size_t room = sizeof c->head - c->len;
  size_t take = h->plain.len < room ? h->plain.len : room;
  if (take > 0) memcpy(c->head + c->len, h->plain.data, take); /* a flight alone: none */
  return (ssize_t)take;
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b) {
  (void)b;
  hconn_t *c = st->data;
  if (c->closing || c->answered) return;
  if (n < 0) {
    conn_close(c);
    return;
  }
  if (c->is_tls && (n = tls_in(c, (size_t)n)) < 0) return;
  c->len += (size_t)n;
  for (size_t i = 3; i < c->len; i++)
    if (memcmp(c->head + i - 3, "\r\n\r\n", 4) == 0) {
      handle(c);
      return;
    }
  if (c->len == sizeof c->head) respond(c, 400, "Bad Request", NULL, false);
}

static void on_timeout(uv_timer_t *t) { conn_close(t->data); }

static void on_connection(uv_stream_t *l, int status) {
  mw_http_metrics_t *h = l->data;
  if (status < 0 || h->stopping) return;
  hconn_t *c = calloc(1, sizeof *c);
  if (!c) return;
  c->h = h;
  uv_tcp_init(h->loop, &c->tcp);
  uv_timer_init(h->loop, &c->timer);
  c->tcp.data = c->timer.data = c;
  c->handles = 2;
  c->next = h->conns;
  if (h->conns) h->conns->prev = c;
  h->conns = c;
  h->n_conns++;
  if (uv_accept(l, (uv_stream_t *)&c->tcp) < 0 || h->n_conns > MW_HTTP_MAX_CONNECTIONS) {
    conn_close(c);
    return;
  }
  if (h->tls != NULL) {
    if (mw_tls_conn_init(&c->tls, h->tls) < 0) {
      conn_close(c);
      return;
    }
    c->is_tls = true;
  }
  uv_timer_start(&c->timer, on_timeout, MW_HTTP_TIMEOUT_MS, 0);
  uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void on_listener_closed(uv_handle_t *hd) {
  mw_http_metrics_t *h = hd->data;
  h->listener_open = false;
  maybe_free(h);
}

int mw_http_metrics_start(uv_loop_t *loop, const char *listen, mw_metrics_t *metrics, mw_tls_ctx_t *tls,
                          mw_http_metrics_t **out, mw_err_t *err) {
  assert(loop);
  assert(listen);
  assert(out);
  *out = NULL;
  struct sockaddr_storage sa;
  int prc = mw_server_addr_parse(listen, &sa, err);
  if (prc < 0) return prc;
  mw_http_metrics_t *h = calloc(1, sizeof *h);
  if (!h) return -ENOMEM;
  h->loop = loop;
  h->metrics = metrics;
  h->tls = tls;
  h->listener_open = true;
  int rc = mw_listen_tcp(loop, &h->listener, &sa, MW_LISTEN_SMALL_BACKLOG, on_connection, h);
  if (rc < 0) {
    mw_err_set(err, rc, "metrics_listen %s: %s", listen, uv_strerror(rc));
    h->stopping = true;
    uv_close((uv_handle_t *)&h->listener, on_listener_closed);
    return rc;
  }
  *out = h;
  return 0;
}

void mw_http_metrics_stop(mw_http_metrics_t *h) {
  assert(h);
  assert(!h->stopping);
  h->stopping = true;
  uv_close((uv_handle_t *)&h->listener, on_listener_closed);
  for (hconn_t *c = h->conns; c; c = c->next) conn_close(c);
}

int mw_http_metrics_port(const mw_http_metrics_t *h) {
  assert(h != NULL);
  return mw_listen_port(&h->listener);
}
