/*
 * server.h — the producers' TCP server (libuv) over lineproto.h.
 *
 * Owns: the listening sockets (several `listen` addresses, IPv4 and IPv6),
 * every producer connection, and the path from bytes to engine submissions:
 * rows of one connection are parsed (jsonrow.h) into one batch per table
 * until a non-row request, the end of the received chunk, or max_batch_rows
 * cuts it; the batch goes to the engine through mw_fe_engine_t, and the
 * engine's completion releases `OK <n>` (lineproto.h keeps replies in
 * request order). ARROW frames are decoded (ipc.h) and submitted whole.
 *
 * Flow control, per connection:
 *   - unacknowledged input (rows submitted, replies queued) over
 *     max_unacked_bytes_per_connection: stop reading the socket; resume when
 *     acknowledgements drain it;
 *   - replies written but not yet taken by the peer (libuv write queue) over
 *     max_reply_bytes_per_connection: stop reading, so a client that never
 *     reads cannot grow the daemon's memory;
 *   - no byte received for idle_timeout_ms and no engine work in flight:
 *     close.
 * Over max_connections a new connection gets "ERR 0 overloaded ..." and is
 * closed.
 *
 * Metrics (when opts.metrics): memwald_connections (gauge),
 * memwald_connections_total, memwald_rows_ingested_total{table},
 * memwald_bytes_ingested_total{table}, memwald_errors_total{code},
 * memwald_ack_latency_seconds (submission -> acknowledgement).
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

#define MW_SERVER_MAX_LISTEN 16
#define MW_SERVER_DEFAULT_MAX_CONNECTIONS 1024
#define MW_SERVER_DEFAULT_MAX_UNACKED_BYTES ((size_t)16 << 20)
#define MW_SERVER_DEFAULT_MAX_REPLY_BYTES ((size_t)256 << 10)
#define MW_SERVER_DEFAULT_MAX_BATCH_ROWS 8192
#define MW_SERVER_READ_CHUNK_BYTES ((size_t)64 << 10)

/* Engine completion: status 0 or negative errno (lineproto.h maps it to a
 * reply code), reason for people (may be NULL). Called exactly once. */
typedef void (*mw_fe_done_cb)(void *arg, int status, const char *reason);

typedef struct mw_fe_engine {
  void *data;
  /* The table named `name` (len bytes): its handle, and the schema rows are
   * parsed into (user columns, then `_tombstone: bool not null`). NULL when
   * there is no such table. */
  void *(*table_find)(void *data, const char *name, size_t len, const mw_schema_t **schema);
  /* Write `batch` (bound to the table's schema). 0: done will be called
   * later (never from inside submit), and the batch's contents may have been
   * taken (the server frees what is left). < 0: refused now, reason in *err. */
  int (*submit)(void *data, void *table, mw_batch_t *batch, mw_fe_done_cb done, void *arg,
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
  size_t max_batch_rows;                /* rows per submission; 0 = default */
  uint64_t idle_timeout_ms;             /* 0 = never */
  const char *auth_token;               /* NULL or "" = no AUTH */
  const char *default_table;            /* rows before USE; NULL = USE required */
  bool ignore_unknown_fields;
  mw_metrics_t *metrics;                /* NULL = none */
} mw_server_opts_t;

typedef struct mw_server mw_server_t;

int mw_server_start(uv_loop_t *loop, const mw_server_opts_t *opts, const mw_fe_engine_t *engine,
                    mw_server_t **out, mw_err_t *err);
/* Close the listeners and every connection (pending replies are dropped),
 * then cb (may be NULL) and free. Engine completions still outstanding are
 * absorbed when they arrive; the engine must outlive them. */
void mw_server_stop(mw_server_t *s, void (*cb)(void *arg), void *arg);
size_t mw_server_connections(const mw_server_t *s);
/* The bound port of listener i (useful with port 0), or -EINVAL. */
int mw_server_port(const mw_server_t *s, size_t i);

/* Parse "host:port" / "[v6]:port" into a sockaddr (IPv4 or IPv6). */
int mw_server_addr_parse(const char *text, struct sockaddr_storage *out);

#endif
