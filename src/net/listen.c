/*
 * listen.c — binding and listening for the front ends (see listen.h).
 *
 * The three listeners differ in what they accept (producers, scrapes,
 * admin commands) and how many, not in how they listen: the same bind,
 * IPv6-only flag, listen and port query, and for the admin socket the
 * stale-file check. The handle is initialised before anything can fail, so
 * an owner closes it the same way whether the start failed or a stop came.
 */
#include "net/listen.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int mw_listen_tcp(uv_loop_t *loop, uv_tcp_t *l, const struct sockaddr_storage *sa, int backlog,
                  uv_connection_cb cb, void *data) {
  assert(loop != NULL);
  assert(l != NULL);
  assert(sa != NULL);
  assert(backlog > 0);
  uv_tcp_init(loop, l);
  l->data = data;
  int rc = uv_tcp_bind(l, (const struct sockaddr *)sa, sa->ss_family == AF_INET6 ? UV_TCP_IPV6ONLY : 0);
  if (rc == 0) rc = uv_listen((uv_stream_t *)l, backlog, cb);
  return rc;
}

/* Remove a stale socket file; refuse when something still accepts on it. */
static int clear_stale(const char *path, const char *what, mw_err_t *err) {
  struct stat st;
  if (lstat(path, &st) < 0)
    return errno == ENOENT ? 0 : mw_err_set(err, -errno, "%s %s: %s", what, path, strerror(errno));
  if (!S_ISSOCK(st.st_mode)) return mw_err_set(err, -EEXIST, "%s %s: exists and is not a socket", what, path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
  int live = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
  close(fd);
  if (live) return mw_err_set(err, -EADDRINUSE, "%s %s: another process is listening on it", what, path);
  unlink(path);
  return 0;
}

int mw_listen_unix(uv_loop_t *loop, uv_pipe_t *l, const char *path, int mode, uv_connection_cb cb,
                   void *data, const char *what, mw_err_t *err) {
  assert(loop != NULL);
  assert(l != NULL);
  assert(path != NULL);
  uv_pipe_init(loop, l, 0);
  l->data = data;
  int rc = clear_stale(path, what, err);
  if (rc < 0) return rc;
  rc = uv_pipe_bind(l, path);
  bool bound = rc == 0;
  if (rc == 0 && chmod(path, (mode_t)mode) < 0) rc = -errno;
  if (rc == 0) rc = uv_listen((uv_stream_t *)l, MW_LISTEN_SMALL_BACKLOG, cb);
  if (rc < 0) {
    if (bound) unlink(path);
    mw_err_set(err, rc, "%s %s: %s", what, path, uv_strerror(rc));
  }
  return rc;
}

int mw_listen_port(const uv_tcp_t *l) {
  assert(l != NULL);
  struct sockaddr_storage sa;
  int len = sizeof sa;
  if (uv_tcp_getsockname(l, (struct sockaddr *)&sa, &len) < 0) return -EINVAL;
  return ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
                                        : ((struct sockaddr_in *)&sa)->sin_port);
}

bool mw_listen_loopback(const struct sockaddr_storage *sa) {
  assert(sa != NULL);
  if (sa->ss_family == AF_INET)
    return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
  if (sa->ss_family == AF_INET6) return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
  return false;
}
