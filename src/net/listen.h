/*
 * listen.h — the listening sockets of the front ends on the libuv loop:
 * the producers' TCP listeners (server.c), the /metrics listener
 * (http_metrics.c) and the admin Unix socket (admin.c) are bound, listened
 * on and asked for their port here, once.
 *
 * Owns: nothing but the calls; each listener handle is embedded in its
 * owner, which closes it (uv_close) on error as after a stop: the handle
 * is initialised whatever a start returns, so the owner's one close path
 * serves both.
 *
 * Errors: negative errno (libuv's), with the address and the reason in
 * *err where one is taken.
 */
#ifndef MW_NET_LISTEN_H
#define MW_NET_LISTEN_H

#include <stdbool.h>
#include <sys/socket.h>
#include <uv.h>

#include "common/err.h"

/* The backlog of the admin socket and /metrics (a few clients at a time). */
#define MW_LISTEN_SMALL_BACKLOG 64

/* Initialise l on loop (l->data = data), bind it to *sa (an IPv6 address
 * for IPv6 only) and listen with cb. */
int mw_listen_tcp(uv_loop_t *loop, uv_tcp_t *l, const struct sockaddr_storage *sa, int backlog,
                  uv_connection_cb cb, void *data);
/* Initialise l on loop (l->data = data), bind it to the Unix socket path
 * (a stale socket file there is removed first; -EADDRINUSE when a process
 * still accepts on it, -EEXIST when it is not a socket), give the file
 * `mode` and listen with cb. On an error after the bind the file is
 * removed. `what` names the socket in *err ("admin socket"). */
int mw_listen_unix(uv_loop_t *loop, uv_pipe_t *l, const char *path, int mode, uv_connection_cb cb,
                   void *data, const char *what, mw_err_t *err);
/* The port a TCP listener is bound to, or -EINVAL. */
int mw_listen_port(const uv_tcp_t *l);
/* Whether *sa is loopback (127.0.0.0/8, ::1). */
bool mw_listen_loopback(const struct sockaddr_storage *sa);

#endif
