/*
 * s3_loop.c — libcurl's multi interface on the libuv loop.
 *
 * One CURLM per storage. curl's socket callback keeps one uv_poll_t per
 * socket it wants watched, its timer callback one uv_timer_t; both drive
 * curl_multi_socket_action(), after which finished transfers are collected
 * (curl_multi_info_read) and each request's attempt is handed to
 * s3_retry.c. Nothing blocks the loop: name resolution runs on curl's
 * resolver thread, connects and TLS are non-blocking. Connections are
 * reused through the multi handle's cache (CURLMOPT_MAXCONNECTS =
 * max_inflight); finished easy handles are kept in a small pool
 * (MW_S3_EASY_POOL). The front bounds requests in flight (max_inflight), and
 * each request runs one exchange at a time, so at most max_inflight
 * transfers run.
 *
 * All handles are unreferenced; one uv_async_t ("keep") is referenced while
 * requests run, so an idle storage does not keep uv_run() alive. Every
 * handle counts in open_handles; a close ends when the last one is closed,
 * and only then frees the backend's state.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "storage/s3_int.h"

/* A socket curl wants watched. */
typedef struct mw_s3_sock {
  uv_poll_t poll;
  mw_s3_t *s;
  curl_socket_t fd;
  struct mw_s3_sock *next;
} mw_s3_sock_t;

static void check_done(mw_s3_t *s);

/* Every handle of the backend ends here; the last one finishes a close. */
static void handle_gone(mw_s3_t *s) {
  assert(s->open_handles > 0);
  if (--s->open_handles > 0 || s->close_done == NULL) return;
  void (*done)(mw_storage_t *) = s->close_done;
  mw_storage_t *st = s->st;
  free(s);
  st->be_state = NULL;
  done(st);
}

static void sock_closed(uv_handle_t *h) {
  mw_s3_sock_t *k = h->data;
  mw_s3_t *s = k->s;
  free(k);
  handle_gone(s);
}

static void sock_forget(mw_s3_t *s, mw_s3_sock_t *k) {
  assert(k->s == s);
  for (mw_s3_sock_t **pp = &s->socks; *pp != NULL; pp = &(*pp)->next)
    if (*pp == k) {
      *pp = k->next;
      break;
    }
  uv_poll_stop(&k->poll);
  uv_close((uv_handle_t *)&k->poll, sock_closed);
}

static void on_poll(uv_poll_t *h, int status, int events) {
  mw_s3_sock_t *k = h->data;
  int flags = 0;
  if (status < 0) flags |= CURL_CSELECT_ERR;
  if (events & UV_READABLE) flags |= CURL_CSELECT_IN;
  if (events & UV_WRITABLE) flags |= CURL_CSELECT_OUT;
  int running = 0;
  mw_s3_t *s = k->s;
  curl_multi_socket_action(s->multi, k->fd, flags, &running);
  check_done(s);
}

static int on_socket(CURL *e, curl_socket_t fd, int what, void *userp, void *socketp) {
  (void)e;
  mw_s3_t *s = userp;
  mw_s3_sock_t *k = socketp;
  if (what == CURL_POLL_REMOVE) {
    if (k != NULL) {
      curl_multi_assign(s->multi, fd, NULL);
      sock_forget(s, k);
    }
    return 0;
  }
  if (k == NULL) {
    k = calloc(1, sizeof *k);
    if (k == NULL) return -1;
    k->s = s;
    k->fd = fd;
    if (uv_poll_init_socket(s->st->loop, &k->poll, fd) < 0) {
      free(k);
      return -1;
    }
    k->poll.data = k;
    uv_unref((uv_handle_t *)&k->poll);
    k->next = s->socks;
    s->socks = k;
    s->open_handles++;
    curl_multi_assign(s->multi, fd, k);
  }
  int ev = ((what & CURL_POLL_IN) ? UV_READABLE : 0) | ((what & CURL_POLL_OUT) ? UV_WRITABLE : 0);
  uv_poll_start(&k->poll, ev, on_poll);
  return 0;
}

static void on_curl_timer(uv_timer_t *t) {
  mw_s3_t *s = t->data;
  int running = 0;
  curl_multi_socket_action(s->multi, CURL_SOCKET_TIMEOUT, 0, &running);
  check_done(s);
}

static int on_timer(CURLM *m, long timeout_ms, void *userp) {
  (void)m;
  mw_s3_t *s = userp;
  if (timeout_ms < 0) uv_timer_stop(&s->timer);
  else uv_timer_start(&s->timer, on_curl_timer, (uint64_t)timeout_ms, 0);
  return 0;
}

void mw_s3__keep_on(mw_s3_t *s) {
  assert(s->close_done == NULL); /* no request after close */
  if (s->active++ == 0) uv_ref((uv_handle_t *)&s->keep);
}

void mw_s3__keep_off(mw_s3_t *s) {
  assert(s->active > 0);
  if (--s->active == 0) uv_unref((uv_handle_t *)&s->keep);
}

/* ------------------------------------------------------------ easy handles */

CURL *mw_s3__easy_get(mw_s3_t *s) {
  assert(s->npool <= MW_S3_EASY_POOL);
  if (s->npool > 0) {
    CURL *e = s->pool[--s->npool];
    curl_easy_reset(e);
    return e;
  }
  return curl_easy_init();
}

void mw_s3__easy_put(mw_s3_t *s, CURL *e) {
  assert(e != NULL);
  assert(s->npool <= MW_S3_EASY_POOL);
  if (s->npool < MW_S3_EASY_POOL) s->pool[s->npool++] = e;
  else curl_easy_cleanup(e);
}

/* Finished transfers: each request's attempt is over. */
static void check_done(mw_s3_t *s) {
  CURLMsg *msg;
  int left = 0;
  while ((msg = curl_multi_info_read(s->multi, &left)) != NULL) {
    if (msg->msg != CURLMSG_DONE) continue;
    CURL *e = msg->easy_handle;
    int cc = (int)msg->data.result;
    mw_storage_req_t *req = NULL;
    curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&req);
    assert(req != NULL);
    assert(req->be.s3.easy == e);
    long code = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
    curl_multi_remove_handle(s->multi, e);
    curl_slist_free_all(req->be.s3.headers);
    req->be.s3.headers = NULL;
    req->be.s3.easy = NULL;
    mw_s3__easy_put(s, e);
    req->be.s3.http_status = (int32_t)code;
    req->be.s3.curl_code = cc;
    mw_s3__attempt_done(s, req, cc);
  }
}

/* ------------------------------------------------------------ open / close */

int mw_s3__loop_open(mw_s3_t *s, mw_err_t *err) {
  mw_storage_t *st = s->st;
  assert(s->multi == NULL);
  assert(s->open_handles == 0);
  if ((s->multi = curl_multi_init()) == NULL)
    return mw_err_set(err, -ENOMEM, "storage: curl_multi_init failed");
  curl_multi_setopt(s->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
  curl_multi_setopt(s->multi, CURLMOPT_SOCKETDATA, s);
  curl_multi_setopt(s->multi, CURLMOPT_TIMERFUNCTION, on_timer);
  curl_multi_setopt(s->multi, CURLMOPT_TIMERDATA, s);
  curl_multi_setopt(s->multi, CURLMOPT_MAXCONNECTS, (long)st->cfg.max_inflight);
  uv_timer_init(st->loop, &s->timer);
  uv_timer_init(st->loop, &s->backoff);
  uv_async_init(st->loop, &s->keep, NULL);
  s->timer.data = s->backoff.data = s->keep.data = s;
  uv_unref((uv_handle_t *)&s->timer);
  uv_unref((uv_handle_t *)&s->backoff);
  uv_unref((uv_handle_t *)&s->keep);
  s->open_handles = 3;
  return 0;
}

static void base_closed(uv_handle_t *h) { handle_gone(h->data); }

void mw_s3__loop_close(mw_s3_t *s, void (*done)(mw_storage_t *st)) {
  assert(s->active == 0);
  assert(s->waits == NULL);
  assert(s->open_handles >= 3); /* the timers and the async, and any sockets */
  s->close_done = done;
  while (s->npool > 0) curl_easy_cleanup(s->pool[--s->npool]);
  curl_multi_cleanup(s->multi); /* closes the cached connections */
  s->multi = NULL;
  while (s->socks != NULL) sock_forget(s, s->socks); /* those curl did not report */
  uv_close((uv_handle_t *)&s->timer, base_closed);
  uv_close((uv_handle_t *)&s->backoff, base_closed);
  uv_close((uv_handle_t *)&s->keep, base_closed);
}
