/*
 * bench_ingest — load generator for the producers' protocol (docs/protocol.md).
 *
 *   bench_ingest [--connections N] [--rows R] [--batch B] [--table T]
 *                [--vec D] [--pipeline P] HOST:PORT
 *
 * N connections (default 4) each send R/N rows (default 1 000 000 in all) as
 * NDJSON lines `{"id":<unique>,"name":"r<id>","v":<id>/2[,"vec":[...D]]}`,
 * B rows per write (default 1000), with at most P writes (default 8) not yet
 * acknowledged per connection. A write's ack latency runs from its send to
 * the OK that covers its last row. Prints one line:
 *
 *   rows=1000000 conns=4 batch=1000 secs=2.41 rows_per_s=414937 MB_per_s=27.1
 *   ack_p50_ms=1.8 ack_p99_ms=6.2 errors=0
 *
 * Any ERR reply is counted and its first occurrence printed to stderr; the
 * exit status is 1 when there were errors. The table needs an int64 `id`
 * primary key, `name` string and `v` double (and `vec`
 * fixed_size_list<float32,D> with --vec D).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#define MAX_PIPELINE 1024

typedef struct bconn {
  uv_tcp_t tcp;
  uv_connect_t creq;
  int64_t next_id, end_id;
  uint64_t sent_rows, acked_rows;
  uint64_t inflight_end[MAX_PIPELINE]; /* cumulative row count at the end of each write */
  uint64_t inflight_t0[MAX_PIPELINE];
  size_t head, count;
  char rbuf[65536];
  size_t rlen;
  int done;
} bconn_t;

static int N = 4, B = 1000, P = 8, VEC = 0;
static int64_t R = 1000000;
static const char *TABLE = "events";
static uint64_t *lat;
static size_t n_lat, cap_lat;
static uint64_t errors, bytes_sent;
static int finished;

static void on_written(uv_write_t *w, int status) {
  if (status < 0) fprintf(stderr, "bench_ingest: write: %s\n", uv_strerror(status));
  free(w->data);
  free(w);
}

static void send_more(bconn_t *c) {
  while (c->count < (size_t)P && c->next_id < c->end_id) {
    size_t cap = (size_t)B * (64 + (size_t)VEC * 12) + 64, len = 0;
    char *buf = malloc(cap);
    int k = 0;
    for (; k < B && c->next_id < c->end_id; k++, c->next_id++) {
      len += (size_t)snprintf(buf + len, cap - len, "{\"id\":%" PRId64 ",\"name\":\"r%" PRId64 "\",\"v\":%.1f",
                              c->next_id, c->next_id, (double)c->next_id / 2);
      if (VEC) {
        len += (size_t)snprintf(buf + len, cap - len, ",\"vec\":[");
        for (int d = 0; d < VEC; d++) len += (size_t)snprintf(buf + len, cap - len, "%s0.5", d ? "," : "");
        len += (size_t)snprintf(buf + len, cap - len, "]");
      }
      len += (size_t)snprintf(buf + len, cap - len, "}\n");
    }
    c->sent_rows += (uint64_t)k;
    size_t slot = (c->head + c->count) % MAX_PIPELINE;
    c->inflight_end[slot] = c->sent_rows;
    c->inflight_t0[slot] = uv_hrtime();
    c->count++;
    bytes_sent += len;
    uv_write_t *w = malloc(sizeof *w);
    w->data = buf;
    uv_buf_t b = uv_buf_init(buf, (unsigned)len);
    uv_write(w, (uv_stream_t *)&c->tcp, &b, 1, on_written);
  }
}

static void acked(bconn_t *c, uint64_t n) {
  c->acked_rows += n;
  uint64_t now = uv_hrtime();
  while (c->count > 0 && c->inflight_end[c->head] <= c->acked_rows) {
    if (n_lat == cap_lat) {
      cap_lat = cap_lat ? cap_lat * 2 : 4096;
      lat = realloc(lat, cap_lat * sizeof *lat);
    }
    lat[n_lat++] = now - c->inflight_t0[c->head];
    c->head = (c->head + 1) % MAX_PIPELINE;
    c->count--;
  }
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b) {
  (void)hint;
  bconn_t *c = h->data;
  *b = uv_buf_init(c->rbuf + c->rlen, (unsigned)(sizeof c->rbuf - c->rlen));
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b) {
  (void)b;
  bconn_t *c = st->data;
  if (n < 0) {
    if (!c->done) fprintf(stderr, "bench_ingest: connection closed early: %s\n", uv_strerror((int)n));
    uv_close((uv_handle_t *)st, NULL);
    if (!c->done) finished++, c->done = 1;
    return;
  }
  c->rlen += (size_t)n;
  char *p = c->rbuf, *nl;
  while ((nl = memchr(p, '\n', c->rlen - (size_t)(p - c->rbuf)))) {
    *nl = 0;
    if (strncmp(p, "OK ", 3) == 0) acked(c, strtoull(p + 3, NULL, 10));
    else if (strncmp(p, "ERR ", 4) == 0) {
      if (errors++ == 0) fprintf(stderr, "bench_ingest: %s\n", p);
      /* a refused group: count its rows as answered */
      const char *k = strstr(p, " rows (lines ");
      uint64_t rows = 1;
      if (k) {
        const char *q = k;
        while (q > p && q[-1] >= '0' && q[-1] <= '9') q--;
        rows = strtoull(q, NULL, 10);
      }
      acked(c, rows);
    }
    p = nl + 1;
  }
  c->rlen -= (size_t)(p - c->rbuf);
  memmove(c->rbuf, p, c->rlen);
  if (c->next_id >= c->end_id && c->count == 0 && !c->done) {
    c->done = 1;
    finished++;
    uv_close((uv_handle_t *)st, NULL);
    return;
  }
  send_more(c);
}

static void on_connect(uv_connect_t *req, int status) {
  bconn_t *c = req->data;
  if (status < 0) {
    fprintf(stderr, "bench_ingest: connect: %s\n", uv_strerror(status));
    exit(3);
  }
  char use[300];
  int n = snprintf(use, sizeof use, "USE %s\n", TABLE);
  uv_write_t *w = malloc(sizeof *w);
  w->data = strdup(use);
  uv_buf_t b = uv_buf_init(w->data, (unsigned)n);
  uv_write(w, (uv_stream_t *)&c->tcp, &b, 1, on_written);
  uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
  send_more(c);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  static const struct option lo[] = {{"connections", 1, 0, 'c'}, {"rows", 1, 0, 'r'}, {"batch", 1, 0, 'b'},
                                     {"table", 1, 0, 't'},       {"vec", 1, 0, 'v'},  {"pipeline", 1, 0, 'p'},
                                     {0, 0, 0, 0}};
  int ch;
  while ((ch = getopt_long(argc, argv, "c:r:b:t:v:p:", lo, NULL)) != -1) {
    switch (ch) {
    case 'c': N = atoi(optarg); break;
    case 'r': R = atoll(optarg); break;
    case 'b': B = atoi(optarg); break;
    case 't': TABLE = optarg; break;
    case 'v': VEC = atoi(optarg); break;
    case 'p': P = atoi(optarg); break;
    default: return 2;
    }
  }
  if (optind + 1 != argc || N < 1 || N > 10000 || B < 1 || R < 1 || P < 1 || P > MAX_PIPELINE || VEC < 0 ||
      VEC > 4096) {
    fprintf(stderr, "usage: bench_ingest [--connections N] [--rows R] [--batch B] [--table T] [--vec D] "
                    "[--pipeline P] HOST:PORT\n");
    return 2;
  }
  char host[256];
  const char *colon = strrchr(argv[optind], ':');
  if (!colon || (size_t)(colon - argv[optind]) >= sizeof host) return 2;
  memcpy(host, argv[optind], (size_t)(colon - argv[optind]));
  host[colon - argv[optind]] = 0;
  struct sockaddr_storage sa;
  int port = atoi(colon + 1);
  if (host[0] == '[') {
    host[strlen(host) - 1] = 0;
    if (uv_ip6_addr(host + 1, port, (struct sockaddr_in6 *)&sa) < 0) return 2;
  } else if (uv_ip4_addr(host, port, (struct sockaddr_in *)&sa) < 0) {
    return 2;
  }
  uv_loop_t *loop = uv_default_loop();
  bconn_t *cs = calloc((size_t)N, sizeof *cs);
  int64_t per = R / N;
  for (int i = 0; i < N; i++) {
    cs[i].next_id = (int64_t)i * per;
    cs[i].end_id = i == N - 1 ? R : (int64_t)(i + 1) * per;
    uv_tcp_init(loop, &cs[i].tcp);
    uv_tcp_nodelay(&cs[i].tcp, 1);
    cs[i].tcp.data = cs[i].creq.data = &cs[i];
    uv_tcp_connect(&cs[i].creq, &cs[i].tcp, (struct sockaddr *)&sa, on_connect);
  }
  uint64_t t0 = uv_hrtime();
  uv_run(loop, UV_RUN_DEFAULT);
  double secs = (double)(uv_hrtime() - t0) / 1e9;
  uint64_t rows = 0;
  for (int i = 0; i < N; i++) rows += cs[i].acked_rows;
  qsort(lat, n_lat, sizeof *lat, cmp_u64);
  double p50 = n_lat ? (double)lat[n_lat / 2] / 1e6 : 0, p99 = n_lat ? (double)lat[n_lat * 99 / 100] / 1e6 : 0;
  printf("rows=%" PRIu64 " conns=%d batch=%d secs=%.2f rows_per_s=%.0f MB_per_s=%.1f ack_p50_ms=%.2f "
         "ack_p99_ms=%.2f errors=%" PRIu64 "\n",
         rows, N, B, secs, (double)rows / secs, (double)bytes_sent / secs / 1e6, p50, p99, errors);
  free(cs);
  free(lat);
  return errors || finished != N ? 1 : 0;
}
