/*
 * server.h — the producers' TCP server (libuv) over lineproto.h.
 *
 * Owns: the listening sockets (several `listen` addresses, IPv4 and IPv6),
 * every producer connection, and the path from bytes to engine submissions:
 * the loop thread splits lines (lineproto.h); rows of one connection are
 * collected into a parse job (rowjob.h) until a non-row request, the end of
 * the received chunk, or max_batch_rows cuts it, and parsed (jsonrow.h) on
 * the server's worker threads (workpool.h; a short run with nothing else in
 * flight at once on the loop). Jobs are applied on the loop in line order:
 * each group of good rows goes to the engine through mw_fe_engine_t (always
 * called on the loop thread), each refused line becomes its ERR, and the
 * engine's completion releases `OK <n>` (lineproto.h keeps replies in
 * request order). ARROW frames are decoded (ipc.h) and submitted whole.
 *
 * The gather (opts.write_gather_ms > 0): consecutive groups of one
 * connection are kept as one submission while more of the write is on its
 * way (a job not yet applied; while reading, a partial line buffered or,
 * after a full read, bytes in the kernel's queue), and handed over at once
 * when nothing is: no wait for a lone write. At the cut each group goes to
 * the engine as its own write, all in one loop turn (one WAL entry while
 * the log is idle), and the submission gets one reply once every write has
 * finished: not copied again into one batch (the MemTable trims each
 * group's builder slack). Anything that
 * replies cuts it first (reply order); it is bounded by write_gather_ms
 * (a timer from its first rows), by max_unacked_bytes_per_connection / 4
 * request bytes (gathered bytes count as unacknowledged),
 * MW_SERVER_MAX_GATHER_ROWS, _GROUPS and _LANCE_BYTES.
 * Workers: one per CPU; the environment variable MEMWALD_PARSE_THREADS=N
 * sets N (0: every parse on the loop thread, for A/B benchmarks).
 *
 * Flow control, per connection:
 *   - unacknowledged input (rows being parsed or submitted, replies queued) over
 *     max_unacked_bytes_per_connection: stop reading the socket; resume when
 *     acknowledgements drain it;
 *   - every parse job slot (4) in flight, or a request waiting for the
 *     parses before it: stop reading until a job is applied;
 *   - replies written but not yet taken by the peer (libuv write queue) over
 *     max_reply_bytes_per_connection: stop reading, so a client that never
 *     reads cannot grow the daemon's memory;
 *   - no byte received for idle_timeout_ms and no engine work in flight:
 *     close. The idle timer runs only while the server reads the socket:
 *     a connection the server paused (above) is waiting on memwald or on
 *     the peer's reading, not idle, and is never reset for it (TCP
 *     keepalive finds a dead peer instead).
 * Over max_connections a new connection gets "ERR 0 overloaded ..." and is
 * closed.
 *
 * Reply modes: each listener has a default (opts.replies, or
 * opts.listen_replies[i]) that a connection changes with REPLIES
 * (lineproto.h); with NONE a producer that never reads costs no reply
 * bytes at all. An AUTH failure is answered in every mode.
 *
 * Graceful stop (mw_server_stop): the listeners close; each connection
 * stops reading, its submissions in flight finish, every reply due is
 * written, then it half-closes (FIN) and discards input until the peer
 * closes, so no reply is lost to a reset. drain_timeout_ms bounds the
 * whole drain; connections left then are closed and logged with what they
 * lost.
 *
 * Logs, rate-limited (common/log.h): each rejected line or refused group
 * (peer, table, line, code, the reason, a prefix of the line) and each
 * closed connection (peer, why, rows acknowledged and rejected, input left
 * unread and replies not delivered).
 *
 * Metrics (when opts.metrics): memwald_connections (gauge),
 * memwald_connections_total, memwald_rows_ingested_total{table},
 * memwald_bytes_ingested_total{table}, memwald_errors_total{table,code}
 * (ERR replies due, sent or not by the reply mode),
 * memwald_rows_rejected_total{table,code} (rows not written: lines
 * refused, rows of refused groups), memwald_ack_latency_seconds{table}
 * (submission -> acknowledgement; gathered rows from their parse),
 * memwald_tls_handshakes_total{result} (ok, failed, timeout, evicted).
 * `table` is "" before a table is known.
 *
 * TLS (opts.tls and a listener's listen_tls): the socket's bytes go
 * through net/tls.h before lineproto and replies are encrypted on their
 * way out; the rest of the connection is the same. A TLS listener accepts
 * at most max_handshakes connections whose handshake is unfinished (more
 * are closed at once) and gives each handshake_timeout_ms. A handshake
 * that fails is logged (rate-limited) with OpenSSL's reason and the
 * connection closed after the alert.
 *
 * Credentials (opts.creds, net/creds.h; opts.auth_token as a principal
 * "auth_token" with write and delete on every table): with either set, a
 * connection must authenticate before anything else, by `AUTH <token>` or
 * by a verified client certificate whose subject is listed. `AUTH` is
 * refused on a plain TCP listener unless it is bound to loopback or its
 * listen_plain_auth is set. An unauthenticated connection has
 * auth_timeout_ms and max_preauth_bytes (a partial first line) before it
 * gets `ERR <line> auth ...` and is closed. Once authenticated, rows need
 * `write` on the current table, `DEL` (and an ARROW frame with
 * tombstones) `delete`; a row without it gets `ERR <line> forbidden ...`
 * and is not written. mw_server_set_creds swaps the credentials (SIGHUP):
 * connections keep their principal when its name is still there (its new
 * grants apply), and a connection whose principal is gone or changed is
 * refused (`ERR 0 auth ... revoked`) and closed.
 *
 * Errors: negative errno; mw_server_start names the listen address that
 * failed in *err.
 */
#ifndef MW_NET_SERVER_H
#define MW_NET_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/err.h"
#include "common/metrics.h"
#include "lance/batch.h"
#include "net/creds.h"
#include "net/lineproto.h"
#include "net/tls.h"

#define MW_SERVER_MAX_LISTEN 16
#define MW_SERVER_DEFAULT_MAX_CONNECTIONS 1024
#define MW_SERVER_DEFAULT_MAX_UNACKED_BYTES ((size_t)16 << 20)
#define MW_SERVER_DEFAULT_MAX_REPLY_BYTES ((size_t)256 << 10)
#define MW_SERVER_DEFAULT_MAX_BATCH_ROWS 8192
#define MW_SERVER_MAX_GATHER_ROWS ((uint32_t)1 << 20)       /* rows of one gathered write */
#define MW_SERVER_MAX_GATHER_LANCE_BYTES ((size_t)16 << 20) /* its Lance bytes (shard: 64 MiB) */
#define MW_SERVER_MAX_GATHER_GROUPS 512                    /* parsed groups in one gather */
#define MW_SERVER_READ_CHUNK_BYTES ((size_t)64 << 10)
#define MW_SERVER_DEFAULT_DRAIN_TIMEOUT_MS 10000
#define MW_SERVER_KEEPALIVE_S 60
#define MW_SERVER_LINGER_MS 2000           /* after the FIN, for the peer's EOF */
#define MW_SERVER_LOG_BURST 20          /* log lines of each kind per window */
#define MW_SERVER_LOG_WINDOW_MS 10000
#define MW_SERVER_LOG_PREFIX_BYTES 80   /* of a rejected line, escaped */
#define MW_SERVER_DEFAULT_MAX_HANDSHAKES 256
#define MW_SERVER_DEFAULT_HANDSHAKE_TIMEOUT_MS 10000
#define MW_SERVER_DEFAULT_AUTH_TIMEOUT_MS 10000
#define MW_SERVER_DEFAULT_MAX_PREAUTH_BYTES 4096

/* Engine completion: status 0 or negative errno (lineproto.h maps it to a
 * reply code), reason for people (may be NULL). Called exactly once. */
typedef void (*mw_fe_done_cb)(void *arg, int status, const char *reason);
/* A submission's completion: as mw_fe_done_cb, and when status < 0,
 * rows_written of its rows (< all of them) were written anyway (a batch
 * over several shards, one of which refused); the reason then says what
 * happened to each shard's rows. */
typedef void (*mw_fe_write_cb)(void *arg, int status, uint32_t rows_written, const char *reason);

typedef struct mw_fe_engine {
  void *data;
  /* The table named `name` (len bytes): its handle, and the schema rows are
   * parsed into (user columns, then `_tombstone: bool not null`). NULL when
   * there is no such table. */
  void *(*table_find)(void *data, const char *name, size_t len, const mw_schema_t **schema);
  /* Write `batch` (bound to the table's schema). 0: done will be called
   * later (never from inside submit), and the batch's contents may have been
   * taken (the server frees what is left). < 0: refused now, reason in *err. */
  int (*submit)(void *data, void *table, mw_batch_t *batch, mw_fe_write_cb done, void *arg,
                mw_err_t *err);
  /* Optional barrier for SYNC: done once every row submitted so far (to any
   * table: a connection may have switched tables) is durable. 0: done will
   * be called later, never from inside sync. 1: durable already, done is
   * not called. < 0: refused now, reason in *err. NULL: acknowledged rows
   * are durable already. */
  int (*sync)(void *data, mw_fe_done_cb done, void *arg, mw_err_t *err);
  /* Optional: the field a DEL must carry besides the key (the identity
   * sharding column), or NULL. */
  const char *(*delete_keep)(void *data, void *table);
} mw_fe_engine_t;

typedef struct mw_server_opts {
  const char *const *listen;            /* "127.0.0.1:7070", "[::1]:7070", port 0 = any */
  size_t n_listen;
  size_t max_connections;               /* 0 = default */
  size_t max_line_bytes;                /* 0 = lineproto default (1 MiB) */
  size_t max_frame_bytes;               /* 0 = lineproto default */
  size_t max_unacked_bytes_per_connection; /* 0 = default */
  size_t max_reply_bytes_per_connection;   /* 0 = default */
  size_t max_batch_rows;                /* rows per parse group; 0 = default */
  uint64_t write_gather_ms;             /* gather bound (below); 0 = off */
  uint64_t idle_timeout_ms;             /* 0 = never */
  uint64_t drain_timeout_ms;            /* graceful stop; 0 = default */
  mw_lp_replies_t replies;              /* every listener's default reply mode */
  const mw_lp_replies_t *listen_replies; /* per listener (n_listen), or NULL */
  const char *auth_token;               /* NULL or "" = none (a principal "auth_token") */
  mw_creds_t *creds;                    /* NULL = none; the server takes it over */
  mw_tls_ctx_t *tls;                    /* for TLS listeners; must outlive the server */
  const bool *listen_tls;               /* per listener (n_listen), or NULL: none */
  const bool *listen_plain_auth;        /* per listener: AUTH allowed in clear anyway */
  size_t max_handshakes;                /* TLS handshakes in flight; 0 = default */
  uint64_t handshake_timeout_ms;        /* 0 = default */
  uint64_t auth_timeout_ms;             /* before AUTH; 0 = default */
  size_t max_preauth_bytes;             /* buffered before AUTH; 0 = default */
  const char *default_table;            /* rows before USE; NULL = USE required */
  bool ignore_unknown_fields;
  bool json_objects_as_text;            /* mw_jsonrow_opts_t.objects_as_text */
  mw_metrics_t *metrics;                /* NULL = none */
} mw_server_opts_t;

typedef struct mw_server mw_server_t;

int mw_server_start(uv_loop_t *loop, const mw_server_opts_t *opts, const mw_fe_engine_t *engine,
                    mw_server_t **out, mw_err_t *err);
/* Close the listeners, drain every connection (above), then cb (may be
 * NULL) and free. The engine must keep completing submissions meanwhile;
 * completions still outstanding after the drain timeout are absorbed when
 * they arrive, so the engine must outlive them. */
void mw_server_stop(mw_server_t *s, void (*cb)(void *arg), void *arg);
size_t mw_server_connections(const mw_server_t *s);
/* Replace the credentials (takes creds over; NULL = only auth_token, if
 * set). Every connection's principal is looked up again (above). */
void mw_server_set_creds(mw_server_t *s, mw_creds_t *creds);
/* The bound port of listener i (useful with port 0), or -EINVAL. */
int mw_server_port(const mw_server_t *s, size_t i);

/* Parse "host:port" / "[v6]:port" / "*:port" into a sockaddr (IPv4 or
 * IPv6); a host name (localhost) is resolved, its first IPv4 address
 * preferred. -EINVAL with the address and the reason in *err (may be NULL);
 * start-up and `memwald --check` use the same function. */
int mw_server_addr_parse(const char *text, struct sockaddr_storage *out, mw_err_t *err);

#endif
