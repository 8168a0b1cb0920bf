/*
 * admin.c — the admin socket on the libuv loop (see admin.h).
 *
 * One mw_admin_req_t per accepted connection: it reads one request line
 * (bounded, with a read timeout), checks the command table below, then
 * either answers itself (metrics, errors) or hands the words to the engine.
 * The request outlives its socket until the engine has replied, so a client
 * that hangs up mid-flush does not leave the engine a dangling pointer.
 */
#include "net/admin.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "net/listen.h"

struct mw_admin_req {
  uv_pipe_t pipe;
  uv_timer_t timer;
  mw_admin_t *a;
  mw_admin_req_t *prev, *next;
  char buf[MW_ADMIN_MAX_REQUEST_BYTES + 1];
  size_t len;
  int handles;
  bool dispatched, replied, closing;
  bool too_long; /* over the limit: discard up to the newline, then refuse */
  uv_write_t wr;
  mw_buf_t out;
};

struct mw_admin {
  uv_loop_t *loop;
  uv_pipe_t listener;
  char *path;
  mw_admin_engine_t eng;
  mw_metrics_t *metrics;
  mw_admin_req_t *reqs;
  size_t n_reqs;
  bool stopping, listener_open;
};

/* The one command table (admin.h), indexed by id. */
static const mw_admin_command_t COMMANDS[MW_ADMIN_N_COMMANDS] = {
    [MW_ADMIN_STATUS] = {"status", MW_ADMIN_STATUS, 0, 0, "status"},
    [MW_ADMIN_METRICS] = {"metrics", MW_ADMIN_METRICS, 0, 0, "metrics"},
    [MW_ADMIN_FLUSH] = {"flush", MW_ADMIN_FLUSH, 0, 2, "flush [TABLE [SHARD]]"},
    [MW_ADMIN_SEAL] = {"seal", MW_ADMIN_SEAL, 2, 2, "seal TABLE SHARD"},
    [MW_ADMIN_UNSEAL] = {"unseal", MW_ADMIN_UNSEAL, 2, 2, "unseal TABLE SHARD"},
    [MW_ADMIN_DROP] = {"drop", MW_ADMIN_DROP, 2, 2, "drop TABLE SHARD"},
    [MW_ADMIN_DROP_TABLE] = {"drop-table", MW_ADMIN_DROP_TABLE, 1, 1, "drop-table TABLE"},
    [MW_ADMIN_CLAIM] = {"claim", MW_ADMIN_CLAIM, 2, 2, "claim TABLE SHARD"},
    [MW_ADMIN_RELEASE] = {"release", MW_ADMIN_RELEASE, 2, 2, "release TABLE SHARD"},
    [MW_ADMIN_COMPACT] = {"compact", MW_ADMIN_COMPACT, 0, 1, "compact [TABLE]"},
    [MW_ADMIN_FAULT] = {"fault", MW_ADMIN_FAULT, 2, 4,
                        "fault TABLE set KEY=VALUE[,KEY=VALUE...] | fault TABLE clear"},
};

const mw_admin_command_t *mw_admin_command(const char *name) {
  assert(name != NULL);
  for (size_t k = 0; k < MW_ADMIN_N_COMMANDS; k++) {
    assert(COMMANDS[k].id == (mw_admin_cmd_t)k); /* the table is indexed by id */
    if (strcmp(COMMANDS[k].name, name) == 0) return &COMMANDS[k];
  }
  return NULL;
}

int mw_admin_json_str(mw_buf_t *out, const char *s) {
  assert(out);
  assert(s);
  int rc = mw_buf_append(out, "\"", 1);
  for (const unsigned char *p = (const unsigned char *)s; *p && rc == 0; p++) {
    char esc[8];
    if (*p == '"' || *p == '\\') {
      esc[0] = '\\';
      esc[1] = (char)*p;
      rc = mw_buf_append(out, esc, 2);
    } else if (*p < 0x20 || *p == 0x7f) {
      snprintf(esc, sizeof esc, "\\u%04x", *p);
      rc = mw_buf_append(out, esc, 6);
    } else {
      rc = mw_buf_append(out, p, 1);
    }
  }
  if (rc == 0) rc = mw_buf_append(out, "\"", 1);
  return rc;
}

/* ------------------------------------------------------------------ lifetime */

static void admin_maybe_free(mw_admin_t *a) {
  assert(a->n_reqs <= MW_ADMIN_MAX_CONNECTIONS + 1); /* one over: accepted to be refused */
  if (!a->stopping || a->listener_open || a->n_reqs > 0) return;
  free(a->path);
  free(a);
}

static void req_maybe_free(mw_admin_req_t *r) {
  assert(r->handles >= 0);
  assert(r->handles <= 2); /* pipe and timer */
  if (r->handles > 0 || (r->dispatched && !r->replied)) return;
  mw_buf_free(&r->out);
  free(r);
}

static void on_req_closed(uv_handle_t *h) {
  mw_admin_req_t *r = h->data;
  assert(r->closing); /* only req_close closes its handles */
  assert(r->handles > 0);
  if (--r->handles == 0) {
    mw_admin_t *a = r->a;
    if (a) {
      if (r->prev) r->prev->next = r->next;
      else a->reqs = r->next;
      if (r->next) r->next->prev = r->prev;
      a->n_reqs--;
      r->a = NULL;
      admin_maybe_free(a);
    }
    req_maybe_free(r);
  }
}

static void req_close(mw_admin_req_t *r) {
  if (r->closing) return;
  r->closing = true;
  uv_close((uv_handle_t *)&r->pipe, on_req_closed);
  uv_close((uv_handle_t *)&r->timer, on_req_closed);
}

/* ------------------------------------------------------------------ replies */

static void on_written(uv_write_t *w, int status) {
  (void)status;
  mw_admin_req_t *r = w->data;
  assert(r->out.len > 0); /* a reply was written */
  req_close(r);
}

static void send_reply(mw_admin_req_t *r) {
  assert(!r->closing); /* nothing is written to a closing socket */
  assert(r->out.len > 0);
  uv_buf_t b = uv_buf_init((char *)r->out.data, (unsigned)r->out.len);
  r->wr.data = r;
  if (uv_write(&r->wr, (uv_stream_t *)&r->pipe, &b, 1, on_written) < 0) req_close(r);
}

static void reply_error(mw_admin_req_t *r, const char *msg) {
  assert(msg != NULL);
  mw_buf_reset(&r->out);
  int rc = mw_buf_append(&r->out, "{\"ok\":false,\"error\":", 20);
  if (rc == 0) rc = mw_admin_json_str(&r->out, msg);
  if (rc == 0) rc = mw_buf_append(&r->out, "}\n", 2);
  if (rc < 0) req_close(r);
  else send_reply(r);
}

void mw_admin_reply(mw_admin_req_t *r, int status, const char *text) {
  assert(r);
  assert(!r->replied);
  r->replied = true;
  if (r->closing) { /* client gone or admin stopped */
    req_maybe_free(r);
    return;
  }
  if (status < 0) {
    reply_error(r, text && text[0] ? text : strerror(-status));
    return;
  }
  mw_buf_reset(&r->out);
  int rc = mw_buf_append(&r->out, "{\"ok\":true,\"result\":", 20);
  const char *j = text && text[0] ? text : "{}";
  if (rc == 0) rc = mw_buf_append(&r->out, j, strlen(j));
  if (rc == 0) rc = mw_buf_append(&r->out, "}\n", 2);
  if (rc < 0) req_close(r);
  else send_reply(r);
}

/* ------------------------------------------------------------------ commands */

static void dispatch(mw_admin_req_t *r) {
  assert(!r->dispatched); /* one command per connection */
  assert(r->len <= MW_ADMIN_MAX_REQUEST_BYTES); /* buf has room for the NUL */
  char *argv[MW_ADMIN_MAX_ARGS + 2];
  int argc = 0;
  char *save = NULL;
  r->buf[r->len] = 0;
  char *nl = strchr(r->buf, '\n');
  if (nl) *nl = 0;
  size_t n = strlen(r->buf);
  if (n > 0 && r->buf[n - 1] == '\r') r->buf[n - 1] = 0;
  for (char *w = strtok_r(r->buf, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
    if (argc == MW_ADMIN_MAX_ARGS + 1) {
      reply_error(r, "too many words");
      return;
    }
    argv[argc++] = w;
  }
  argv[argc] = NULL;
  if (argc == 0) {
    reply_error(r, "empty request; commands: status, metrics, flush, compact, seal, unseal, drop, drop-table, claim, release");
    return;
  }
  const mw_admin_command_t *cmd = mw_admin_command(argv[0]);
  char msg[MW_ADMIN_MAX_REQUEST_BYTES + 128];
  if (cmd == NULL) {
    snprintf(msg, sizeof msg, "unknown command \"%.200s\"; commands: status, metrics, flush, compact, seal, unseal, drop, drop-table, claim, release", argv[0]);
    reply_error(r, msg);
    return;
  }
  if (argc - 1 < cmd->min_args || argc - 1 > cmd->max_args) {
    snprintf(msg, sizeof msg, "usage: %s", cmd->usage);
    reply_error(r, msg);
    return;
  }
  mw_admin_t *a = r->a;
  if (cmd->id == MW_ADMIN_METRICS) {
    mw_buf_t text = MW_BUF_INIT, j = MW_BUF_INIT;
    int rc = a->metrics ? mw_metrics_render(a->metrics, &text) : 0;
    if (rc == 0) rc = mw_buf_append(&text, "", 1);
    if (rc == 0) rc = mw_buf_append(&j, "{\"text\":", 8);
    if (rc == 0) rc = mw_admin_json_str(&j, (const char *)text.data);
    if (rc == 0) rc = mw_buf_append(&j, "}", 2); /* with the NUL */
    r->dispatched = true;
    mw_admin_reply(r, rc, rc == 0 ? (const char *)j.data : "out of memory");
    mw_buf_free(&text);
    mw_buf_free(&j);
    return;
  }
  if (!a->eng.command) {
    reply_error(r, "no engine");
    return;
  }
  r->dispatched = true;
  a->eng.command(a->eng.data, argc, (const char *const *)argv, r);
}

/* ------------------------------------------------------------------ reading */

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b) {
  (void)hint;
  mw_admin_req_t *r = h->data;
  assert(r->len < MW_ADMIN_MAX_REQUEST_BYTES); /* room left: a full buffer is reset or ends */
  *b = uv_buf_init(r->buf + r->len, (unsigned)(MW_ADMIN_MAX_REQUEST_BYTES - r->len));
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b) {
  (void)b;
  mw_admin_req_t *r = st->data;
  if (r->closing || r->dispatched) return;
  if (n < 0 && n != UV_EOF) {
    req_close(r);
    return;
  }
  if (n > 0) r->len += (size_t)n;
  assert(r->len <= MW_ADMIN_MAX_REQUEST_BYTES); /* libuv fills at most what on_alloc gave */
  bool line = memchr(r->buf, '\n', r->len) != NULL;
  if (!line && n != UV_EOF) {
    if (r->len == MW_ADMIN_MAX_REQUEST_BYTES) { /* keep reading so the close is clean */
      r->too_long = true;
      r->len = 0;
    }
    return;
  }
  uv_read_stop(st);
  uv_timer_stop(&r->timer);
  if (r->too_long) {
    reply_error(r, "request longer than 4096 bytes");
    return;
  }
  dispatch(r);
}

static void on_timeout(uv_timer_t *t) {
  mw_admin_req_t *r = t->data;
  assert(r->handles == 2); /* a timer firing is open, and so is its pipe */
  if (!r->dispatched && !r->closing) {
    uv_read_stop((uv_stream_t *)&r->pipe);
    reply_error(r, "no request within 10 s");
  }
}

static void on_connection(uv_stream_t *l, int status) {
  mw_admin_t *a = l->data;
  if (status < 0 || a->stopping) return;
  assert(a->listener_open);
  mw_admin_req_t *r = calloc(1, sizeof *r);
  if (!r) return;
  uv_pipe_init(a->loop, &r->pipe, 0);
  uv_timer_init(a->loop, &r->timer);
  r->pipe.data = r->timer.data = r;
  r->handles = 2;
  r->a = a;
  r->next = a->reqs;
  if (a->reqs) a->reqs->prev = r;
  a->reqs = r;
  a->n_reqs++;
  if (uv_accept(l, (uv_stream_t *)&r->pipe) < 0 || a->n_reqs > MW_ADMIN_MAX_CONNECTIONS) {
    req_close(r);
    return;
  }
  uv_timer_start(&r->timer, on_timeout, MW_ADMIN_READ_TIMEOUT_MS, 0);
  uv_read_start((uv_stream_t *)&r->pipe, on_alloc, on_read);
}

/* ------------------------------------------------------------------ public */

static void on_listener_closed(uv_handle_t *h) {
  mw_admin_t *a = h->data;
  assert(a->stopping); /* closed by a stop or a failed start */
  assert(a->listener_open);
  a->listener_open = false;
  admin_maybe_free(a);
}

int mw_admin_start(uv_loop_t *loop, const char *path, const mw_admin_engine_t *engine,
                   mw_metrics_t *metrics, mw_admin_t **out, mw_err_t *err) {
  assert(loop);
  assert(path);
  assert(engine);
  assert(out);
  *out = NULL;
  if (strlen(path) == 0 || strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
    return mw_err_set(err, -ENAMETOOLONG, "admin socket %s: empty or too long for a Unix socket", path);
  mw_admin_t *a = calloc(1, sizeof *a);
  if (!a || !(a->path = strdup(path))) {
    free(a);
    return -ENOMEM;
  }
  a->loop = loop;
  a->eng = *engine;
  a->metrics = metrics;
  a->listener_open = true;
  int rc = mw_listen_unix(loop, &a->listener, path, 0660, on_connection, a, "admin socket", err);
  if (rc < 0) {
    a->stopping = true;
    uv_close((uv_handle_t *)&a->listener, on_listener_closed);
    return rc;
  }
  *out = a;
  return 0;
}

void mw_admin_stop(mw_admin_t *a) {
  assert(a);
  assert(!a->stopping);
  a->stopping = true;
  unlink(a->path);
  uv_close((uv_handle_t *)&a->listener, on_listener_closed);
  for (mw_admin_req_t *r = a->reqs; r; r = r->next) req_close(r);
}
