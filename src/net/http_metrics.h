/*
 * http_metrics.h — `GET /metrics` over HTTP/1.1 (metrics_listen).
 *
 * Owns: one TCP listener and its short-lived connections. Each connection
 * sends one request head (at most MW_HTTP_MAX_HEAD_BYTES, within
 * MW_HTTP_TIMEOUT_MS); the reply is
 *   HTTP/1.1 200 OK
 *   Content-Type: text/plain; version=0.0.4; charset=utf-8
 *   Content-Length: N
 *   Connection: close
 * with the registry's text exposition (metrics.h) for GET (or HEAD)
 * /metrics, 404 for any other path, 405 for other methods, 400 for a
 * malformed or oversized head; then the connection closes.
 *
 * With a TLS context (metrics_listen = ADDR tls) the same exchange runs
 * inside TLS (net/tls.h): the head is the plaintext, the reply is
 * encrypted, and MW_HTTP_TIMEOUT_MS bounds the handshake too. At most
 * MW_HTTP_MAX_CONNECTIONS connections, handshaking or not.
 *
 * Errors: negative errno; start names the address in *err.
 */
#ifndef MW_NET_HTTP_METRICS_H
#define MW_NET_HTTP_METRICS_H

#include <uv.h>

#include "common/err.h"
#include "common/metrics.h"
#include "net/tls.h"

#define MW_HTTP_MAX_HEAD_BYTES 8192
#define MW_HTTP_TIMEOUT_MS 10000
#define MW_HTTP_MAX_CONNECTIONS 64

typedef struct mw_http_metrics mw_http_metrics_t;

/* listen: "HOST:PORT" or "[V6]:PORT" (server.h's syntax). tls: NULL for
 * plain HTTP, else it must outlive the listener. */
int mw_http_metrics_start(uv_loop_t *loop, const char *listen, mw_metrics_t *metrics, mw_tls_ctx_t *tls,
                          mw_http_metrics_t **out, mw_err_t *err);
/* Close the listener and every connection; frees itself when done. */
void mw_http_metrics_stop(mw_http_metrics_t *h);
/* Bound port (for port 0), or -EINVAL. */
int mw_http_metrics_port(const mw_http_metrics_t *h);

#endif
