/*
 * main.c — the memwald daemon: arguments, configuration, the event loop,
 * signals and systemd notification.
 *
 * Life cycle:
 *   load config (defaults < -c FILE < --set ...)   errors name FILE:LINE
 *   prepare data_dir                               refuse to start if unusable
 *   start loop: signals, watchdog, READY=1
 *   SIGHUP          reload FILE (+ the same --set), apply reloadable keys
 *   SIGTERM/SIGINT  STOPPING=1, stop accepting, drain, flush, exit 0
 *   a second SIGTERM/SIGINT during the drain stops at once (exit 1)
 *
 * Exit codes: 0 clean stop, 1 runtime failure, 2 bad usage or configuration.
 */
#include <assert.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "common/err.h"
#include "common/log.h"
#include "common/metrics.h"
#include "daemon/check.h"
#include "daemon/config.h"
#include "daemon/memtrim.h"
#include "daemon/notify.h"
#include "daemon/security.h"
#include "daemon/stats.h"
#include "daemon/tables.h"
#include "daemon/testhook.h"
#include "net/admin_engine.h"
#include "net/http_metrics.h"
#include "net/server.h"
#include "storage/fault.h"
#include "storage/storage.h"

#ifndef MW_VERSION
#define MW_VERSION "0.1.0"
#endif

/* The share of shutdown_timeout_ms a stop spends starting flushes (see
 * on_server_stopped); the rest is for the flushes in flight and closing. */
#define MW_STOP_FLUSH_PERCENT 75
_Static_assert(MW_STOP_FLUSH_PERCENT > 0 && MW_STOP_FLUSH_PERCENT < 100, "leave time to close");

typedef struct mw_daemon {
  uv_loop_t *loop;
  uv_signal_t sig_term, sig_int, sig_hup;
  mw_notify_t notify;
  mw_memtrim_t memtrim;
  mw_daemon_stats_t stats;
  mw_storage_t *storage; /* data_dir; each table has its own */
  mw_daemon_tables_t tables;
  mw_fe_engine_t engine;
  mw_server_t *server;
  mw_fe_admin_t admin_ctx;
  mw_admin_t *admin;
  mw_http_metrics_t *http;
  mw_tls_ctx_t *tls; /* tls listeners' and metrics_listen's (daemon/security.h) */
  uv_timer_t stop_timer;
  mw_config_t cfg;
  const char *config_path;
  const char **sets;
  size_t n_sets;
  int stopping;
  uint64_t started_ms;
  uint64_t stop_started_ms; /* uv_now when begin_stop ran */
  char removing[512];     /* the tables a reload is removing, "" when none */
  bool reload_again;      /* a reload's additions wait for that removal */
} mw_daemon_t;

static void usage(FILE *f) {
  assert(f != NULL);
  fprintf(f,
          "usage: memwald [-c FILE] [--set section.key=value ...] [--check | --print-config]\n"
          "\n"
          "  -c, --config FILE   configuration file (INI; see conf/memwald.conf)\n"
          "      --set K=V       override one key: daemon.log_level=debug,\n"
          "                      storage.io_backend=threads, table.NAME.uri=/data/t.lance\n"
          "      --check         validate the configuration and exit\n"
          "      --print-config  print the effective configuration and exit\n"
          "      --print-keys    list every configuration key and exit\n"
          "  -V, --version       print the version and exit\n"
          "  -h, --help          this text\n");
}

/* memwald_build_info{version} 1: which build a scrape came from. */
static void build_info(void) {
  static const char *const names[1] = {"version"};
  mw_metric_family_t *f = mw_metrics_register(mw_metrics_default(), MW_METRIC_GAUGE,
                                              "memwald_build_info",
                                              "The running memwald's version (the value is 1).",
                                              names, 1, NULL, 0);
  const char *v[1] = {MW_VERSION};
  if (f != NULL) mw_gauge_set(mw_metric_series(f, v), 1);
}

static void close_cb(uv_handle_t *h) { (void)h; }

static void close_walk(uv_handle_t *h, void *arg) {
  assert(h != NULL);
  assert(arg == NULL);
  (void)arg;
  if (!uv_is_closing(h)) uv_close(h, close_cb);
}

static void on_storage_closed(void *arg) {
  mw_daemon_t *d = arg;
  assert(d->stopping > 0); /* storage closes only at the stop */
  d->storage = NULL;
  /* With nothing left open, closing the remaining handles ends uv_run. */
  uv_walk(d->loop, close_walk, NULL);
}

/* Step 3: tables flushed and closed; storage goes last, after letting every
 * accepted operation finish. */
static void on_tables_closed(void *arg, int failures) {
  mw_daemon_t *d = arg;
  assert(d->stopping == 1); /* the stop that closed them is running */
  assert(failures >= 0);
  assert(d->server == NULL); /* step 2 came after the server stopped */
  if (failures > 0) {
    mw_log_err("stop: %d shard(s) could not be flushed; their rows stay in the WAL and are "
               "replayed by the next owner", failures);
    d->stopping = 2; /* exit non-zero */
  } else if (d->tables.unflushed > 0) {
    mw_log_notice("stop: %zu shard(s) not flushed before the stop's flush deadline (%d%% of "
                  "shutdown_timeout_ms = %lld); their rows stay in the WAL and are replayed at the "
                  "next start", d->tables.unflushed, MW_STOP_FLUSH_PERCENT,
                  (long long)d->cfg.shutdown_timeout_ms);
  } else {
    mw_log_notice("stop: every MemTable flushed");
  }
  if (d->storage != NULL) mw_storage_close(d->storage, on_storage_closed, d);
  else on_storage_closed(d);
}

/* Step 2: no connection left; release (flush) every shard. Flushes start
 * until MW_STOP_FLUSH_PERCENT of shutdown_timeout_ms has passed since the
 * stop began; the shards left then are aborted with their rows in the WAL
 * (daemon/tables.h), so the flushes in flight, the aborts and the closes
 * finish in the rest, before on_stop_timeout would exit(1). A 1 024-shard
 * stop took 36 s once in CI against the default 30 s: every flush
 * fsyncs ~35 times, and at 7 ms a fsync on a loaded disk that is 2.9-38.7 s
 * here, measured. */
static void on_server_stopped(void *arg) {
  mw_daemon_t *d = arg;
  assert(d->stopping == 1);
  assert(d->admin == NULL); /* step 1 stopped accepting */
  assert(d->http == NULL);
  d->server = NULL;
  uint64_t deadline = 0;
  if (d->cfg.shutdown_timeout_ms > 0)
    deadline = d->stop_started_ms + (uint64_t)d->cfg.shutdown_timeout_ms * MW_STOP_FLUSH_PERCENT / 100;
  mw_daemon_tables_close(&d->tables, deadline, on_tables_closed, d);
}

static void on_stop_timeout(uv_timer_t *t) {
  mw_daemon_t *d = t->data;
  assert(d->stopping > 0);
  mw_log_err("stop: not finished after shutdown_timeout_ms = %lld; exiting. Acknowledged rows "
             "are safe in the WAL and are replayed by the next owner",
             (long long)d->cfg.shutdown_timeout_ms);
  exit(1);
}

static void begin_stop(mw_daemon_t *d, const char *why) {
  assert(why != NULL);
  assert(d->loop != NULL);
  if (d->stopping) {
    mw_log_warn("second %s during shutdown: stopping now", why);
    exit(1);
  }
  d->stopping = 1;
  d->stop_started_ms = uv_now(d->loop);
  mw_log_notice("stopping (%s): no new connections, draining, then flushing", why);
  mw_notify_stopping();
  mw_notify_close(&d->notify);
  mw_memtrim_stop(&d->memtrim);
  mw_daemon_stats_stop(&d->stats);
  uv_signal_stop(&d->sig_hup);
  if (d->cfg.shutdown_timeout_ms > 0 && uv_timer_init(d->loop, &d->stop_timer) == 0) {
    d->stop_timer.data = d;
    uv_timer_start(&d->stop_timer, on_stop_timeout, (uint64_t)d->cfg.shutdown_timeout_ms, 0);
    uv_unref((uv_handle_t *)&d->stop_timer);
  }
  /* Step 1: stop accepting (admin, metrics, producers). */
  if (d->admin != NULL) mw_admin_stop(d->admin);
  d->admin = NULL;
  if (d->http != NULL) mw_http_metrics_stop(d->http);
  d->http = NULL;
  if (d->server != NULL) mw_server_stop(d->server, on_server_stopped, d);
  else on_server_stopped(d);
}

/* Two [table] sections alike, wherever they stand in the file. */
static bool table_same(const mw_table_config_t *a, const mw_table_config_t *b) {
  assert(a != NULL);
  assert(b != NULL);
  assert(strcmp(a->name, b->name) == 0); /* the same section in two configurations */
  static mw_table_config_t x, y; /* large: off the stack; the loop thread only */
  memcpy(&x, a, sizeof x);
  memcpy(&y, b, sizeof y);
  x.section_line = y.section_line = 0;
  memset(x.key_lines, 0, sizeof x.key_lines);
  memset(y.key_lines, 0, sizeof y.key_lines);
  return memcmp(&x, &y, sizeof x) == 0;
}

static void reload(mw_daemon_t *d);

static void on_tables_removed(void *arg, int failures) {
  mw_daemon_t *d = arg;
  assert(d->removing[0] != '\0'); /* the removal remove_tables started */
  assert(failures >= 0);
  if (failures > 0)
    mw_log_err("reload: %d shard(s) of %s could not be flushed; their rows stay in the WAL and are "
               "replayed by the next owner", failures, d->removing);
  else
    mw_log_notice("reload: released and closed %s", d->removing);
  d->removing[0] = '\0';
  if (d->reload_again && !d->stopping) { /* sections were added too: now that the others are gone */
    d->reload_again = false;
    reload(d);
  }
}

/* Tables whose sections are gone: released (flushed) and closed, one
 * removal at a time. Returns whether one started. */
static bool remove_tables(mw_daemon_t *d, const mw_config_t *next) {
  assert(d->removing[0] == '\0'); /* one removal at a time */
  assert(next != NULL);
  const char *names[MW_CONFIG_MAX_TABLES];
  size_t n = 0, w = 0;
  for (size_t i = 0; i < d->cfg.n_tables; i++)
    if (mw_config_table(next, d->cfg.tables[i].name) == NULL) names[n++] = d->cfg.tables[i].name;
  if (n == 0) return false;
  for (size_t i = 0; i < n && w < sizeof d->removing; i++)
    w += (size_t)snprintf(d->removing + w, sizeof d->removing - w, "%s[table %s]", i ? ", " : "", names[i]);
  mw_err_t err = {0};
  if (mw_daemon_tables_remove(&d->tables, names, n, on_tables_removed, d, &err) < 0) {
    mw_log_err("reload: %s not removed: %s; send SIGHUP again later", d->removing, err.msg);
    d->removing[0] = '\0';
    return false;
  }
  mw_log_notice("reload: %s no longer configured: releasing (flushing) and closing", d->removing);
  size_t k = 0; /* the running configuration forgets them now */
  for (size_t i = 0; i < d->cfg.n_tables; i++)
    if (mw_config_table(next, d->cfg.tables[i].name) != NULL)
      memmove(&d->cfg.tables[k++], &d->cfg.tables[i], sizeof d->cfg.tables[i]);
  d->cfg.n_tables = k;
  return true;
}

/* The running configuration forgets section `name` (an addition failed). */
static void forget_section(mw_daemon_t *d, const char *name) {
  assert(name != NULL);
  assert(d->cfg.n_tables <= MW_CONFIG_MAX_TABLES);
  size_t k = 0;
  for (size_t i = 0; i < d->cfg.n_tables; i++)
    if (strcmp(d->cfg.tables[i].name, name) != 0)
      memmove(&d->cfg.tables[k++], &d->cfg.tables[i], sizeof d->cfg.tables[i]);
  d->cfg.n_tables = k;
}

static void on_table_added(void *arg, const char *name, int status, const char *reason) {
  mw_daemon_t *d = arg;
  assert(name != NULL);
  assert(status <= 0);
  if (status == 0) {
    const mw_table_config_t *tc = mw_config_table(&d->cfg, name);
    mw_log_notice("reload: [table %s] added: open at %s", name, tc ? tc->uri : "?");
    return;
  }
  if (status == -ECANCELED) { /* its section was removed while it opened: as asked */
    mw_log_notice("reload: [table %s] not served: %s", name, reason ? reason : mw_strerror(status));
    return; /* the removal forgot the section already */
  }
  mw_log_err("reload: [table %s] not opened: %s", name, reason ? reason : mw_strerror(status));
  forget_section(d, name); /* a later SIGHUP tries again */
}

/* Sections a reload added: opened as start-up opens them, each off the
 * loop (tables.h): the running configuration lists a section from the
 * start of its opening, so a SIGHUP meanwhile does not open it twice. */
static void add_tables(mw_daemon_t *d, const mw_config_t *next) {
  assert(d->removing[0] == '\0'); /* additions wait for a removal */
  assert(!d->stopping);
  for (size_t i = 0; i < next->n_tables; i++) {
    const mw_table_config_t *tc = &next->tables[i];
    if (mw_config_table(&d->cfg, tc->name) != NULL) continue;
    mw_err_t err = {0};
    if (d->cfg.n_tables >= MW_CONFIG_MAX_TABLES ||
        mw_daemon_tables_add(&d->tables, next, tc, on_table_added, d, &err) < 0) {
      mw_log_err("reload: [table %s] not opened: %s", tc->name, err.msg[0] ? err.msg : "too many tables");
      continue;
    }
    memcpy(&d->cfg.tables[d->cfg.n_tables++], tc, sizeof *tc);
    mw_log_notice("reload: [table %s] new: opening %s", tc->name, tc->uri);
  }
}

/* SIGHUP: log_level, and [table] sections added or removed. Everything
 * else takes effect at a restart, and says so. A file that does not load
 * or check keeps the running configuration whole. */
static void reload(mw_daemon_t *d) {
  assert(!d->stopping); /* SIGHUP is stopped, and a removal reloads only when not stopping */
  assert(d->cfg.n_tables <= MW_CONFIG_MAX_TABLES);
  mw_notify_reloading();
  mw_config_t *next = malloc(sizeof *next), *rest = malloc(sizeof *rest);
  mw_err_t err = {0};
  const char *file = d->config_path ? d->config_path : "(no file)";
  if (next == NULL || rest == NULL) {
    mw_log_err("reload: out of memory; keeping the running configuration");
  } else if (mw_config_load(next, d->config_path, d->sets, d->n_sets, &err) < 0 ||
             mw_daemon_check_config(next, &err) < 0) {
    mw_log_err("reload failed, keeping the running configuration: %s", err.msg);
  } else {
    mw_daemon_security_reload(next, d->tls, d->server);
    /* reloaded just now: not "changed, takes effect after a restart" */
    memcpy(d->cfg.tls_cert_file, next->tls_cert_file, sizeof d->cfg.tls_cert_file);
    memcpy(d->cfg.tls_key_file, next->tls_key_file, sizeof d->cfg.tls_key_file);
    memcpy(d->cfg.tls_ca_file, next->tls_ca_file, sizeof d->cfg.tls_ca_file);
    memcpy(d->cfg.tls_client_cert, next->tls_client_cert, sizeof d->cfg.tls_client_cert);
    memcpy(d->cfg.credentials_file, next->credentials_file, sizeof d->cfg.credentials_file);
    if (next->log_level != d->cfg.log_level) {
      mw_log_notice("reload: log_level %s -> %s", mw_log_level_name(d->cfg.log_level),
                    mw_log_level_name(next->log_level));
      d->cfg.log_level = next->log_level;
      mw_log_set_level(next->log_level);
    }
    for (size_t i = 0; i < next->n_tables; i++) {
      const mw_table_config_t *was = mw_config_table(&d->cfg, next->tables[i].name);
      if (was != NULL && !table_same(was, &next->tables[i]))
        mw_log_warn("reload: [table %s] changed in %s; the change takes effect after a restart",
                    next->tables[i].name, file);
    }
    memcpy(rest, next, sizeof *rest); /* the rest: everything but log_level and the tables */
    rest->log_level = d->cfg.log_level;
    memcpy(rest->tables, d->cfg.tables, sizeof rest->tables);
    rest->n_tables = d->cfg.n_tables;
    if (memcmp(rest, &d->cfg, sizeof *rest) != 0)
      mw_log_warn("reload: [daemon] or [storage] settings other than log_level changed in %s; they "
                  "take effect after a restart", file);
    if (d->removing[0] != '\0') {
      d->reload_again = true; /* after the removal running now */
      mw_log_notice("reload: waiting for the removal of %s", d->removing);
    } else if (remove_tables(d, next)) {
      d->reload_again = true; /* additions once the removed tables are closed */
    } else {
      add_tables(d, next);
    }
    mw_log_info("reload: configuration re-read from %s", file);
  }
  free(next);
  free(rest);
  mw_notify_ready("running");
}

static void on_signal(uv_signal_t *s, int signum) {
  mw_daemon_t *d = s->data;
  assert(signum == SIGHUP || signum == SIGTERM || signum == SIGINT);
  if (signum == SIGHUP) {
    reload(d);
    return;
  }
  begin_stop(d, signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

static int start_signals(mw_daemon_t *d) {
  assert(d->loop != NULL);
  assert(!d->stopping);
  uv_signal_t *sigs[] = {&d->sig_term, &d->sig_int, &d->sig_hup};
  int nums[] = {SIGTERM, SIGINT, SIGHUP};
  for (int i = 0; i < 3; i++) {
    int rc = uv_signal_init(d->loop, sigs[i]);
    if (rc < 0) return rc;
    sigs[i]->data = d;
    rc = uv_signal_start(sigs[i], on_signal, nums[i]);
    if (rc < 0) return rc;
  }
  return 0;
}

/* The producers' server: listeners, TLS and credentials (daemon/security.h). */
static int start_server(mw_daemon_t *d) {
  assert(d->server == NULL);
  assert(d->cfg.n_listen <= MW_CONFIG_MAX_LISTEN);
  mw_err_t err = {0};
  mw_creds_t *creds = NULL;
  if (mw_daemon_security_load(&d->cfg, &d->tls, &creds, &err) < 0) {
    mw_log_err("%s", err.msg);
    return -1;
  }
  const char *listen[MW_CONFIG_MAX_LISTEN];
  mw_lp_replies_t replies[MW_CONFIG_MAX_LISTEN];
  _Static_assert((int)MW_REPLIES_ALL == (int)MW_LP_REPLIES_ALL &&
                 (int)MW_REPLIES_ERRORS == (int)MW_LP_REPLIES_ERRORS, "reply modes: same order");
  _Static_assert((int)MW_REPLIES_NONE == (int)MW_LP_REPLIES_NONE, "reply modes: same order");
  for (size_t i = 0; i < d->cfg.n_listen; i++) {
    listen[i] = d->cfg.listen[i];
    int m = d->cfg.listen_replies[i];
    replies[i] = (mw_lp_replies_t)(m == MW_REPLIES_DEFAULT ? (int)d->cfg.replies : m);
  }
  const char *def = d->cfg.default_table[0] ? d->cfg.default_table
                    : d->cfg.n_tables == 1  ? d->cfg.tables[0].name
                                            : NULL;
  mw_server_opts_t so = {
      .listen = listen,
      .n_listen = d->cfg.n_listen,
      .max_connections = (size_t)d->cfg.max_connections,
      .max_line_bytes = (size_t)d->cfg.max_line_bytes,
      .max_unacked_bytes_per_connection = (size_t)d->cfg.max_unacked_bytes_per_connection,
      .max_frame_bytes = (size_t)d->cfg.max_frame_bytes,
      .max_reply_bytes_per_connection = (size_t)d->cfg.max_reply_bytes_per_connection,
      .max_batch_rows = (size_t)d->cfg.max_batch_rows,
      .write_gather_ms = (uint64_t)d->cfg.write_gather_ms,
      .idle_timeout_ms = (uint64_t)d->cfg.idle_timeout_ms,
      /* the drain's share of the stop; flushing gets the rest */
      .drain_timeout_ms = d->cfg.shutdown_timeout_ms > 0 ? (uint64_t)d->cfg.shutdown_timeout_ms / 2 : 0,
      .replies = (mw_lp_replies_t)d->cfg.replies,
      .listen_replies = replies,
      .auth_token = d->cfg.auth_token[0] ? d->cfg.auth_token : NULL,
      .creds = creds, /* the server's from here */
      .tls = d->tls,
      .listen_tls = d->cfg.listen_tls,
      .listen_plain_auth = d->cfg.listen_plain_auth,
      .max_handshakes = (size_t)d->cfg.max_handshakes,
      .handshake_timeout_ms = (uint64_t)d->cfg.handshake_timeout_ms,
      .auth_timeout_ms = (uint64_t)d->cfg.auth_timeout_ms,
      .max_preauth_bytes = (size_t)d->cfg.max_preauth_bytes,
      .default_table = def,
      .ignore_unknown_fields = d->cfg.ignore_unknown_fields,
      .json_objects_as_text = d->cfg.json_objects_as_text,
      .metrics = mw_metrics_default(),
  };
  if (d->cfg.n_listen == 0) mw_creds_free(creds);
  if (d->cfg.n_listen > 0 && mw_server_start(d->loop, &so, &d->engine, &d->server, &err) < 0) {
    mw_log_err("listen: %s", err.msg);
    return -1;
  }
  return 0;
}

/* Tables, then the producers' server, the admin socket and /metrics. */
static int start_front(mw_daemon_t *d) {
  assert(d->storage != NULL);
  assert(d->admin == NULL);
  assert(d->http == NULL);
  mw_err_t err = {0};
  if (mw_daemon_tables_open(d->loop, &d->cfg, &d->tables, &err) < 0) {
    mw_log_err("%s", err.msg);
    return -1;
  }
  int src = mw_daemon_stats_start(&d->stats, d->loop, &d->tables, mw_metrics_default());
  if (src < 0) {
    mw_log_err("stats: %s", uv_strerror(src));
    return -1;
  }
  mw_fe_tables_engine(&d->tables.fe, &d->engine);
  if (start_server(d) < 0) return -1;
  d->admin_ctx = (mw_fe_admin_t){.tables = &d->tables.fe, .loop = d->loop, .version = MW_VERSION,
                                 .start_ms = uv_now(d->loop), .server = d->server};
  mw_admin_engine_t ae;
  mw_fe_admin_engine(&d->admin_ctx, &ae);
  if (d->cfg.admin_socket[0]) {
    int rc = mw_daemon_mkdir_parent(d->cfg.admin_socket);
    if (rc < 0) {
      mw_log_err("admin socket %s: cannot create its directory: %s", d->cfg.admin_socket,
                 strerror(-rc));
      return -1;
    }
    if (mw_admin_start(d->loop, d->cfg.admin_socket, &ae, mw_metrics_default(), &d->admin, &err) < 0) {
      mw_log_err("%s", err.msg);
      return -1;
    }
  }
  if (d->cfg.metrics_listen[0] &&
      mw_http_metrics_start(d->loop, d->cfg.metrics_listen, mw_metrics_default(),
                            d->cfg.metrics_tls ? d->tls : NULL, &d->http, &err) < 0) {
    mw_log_err("metrics_listen %s: %s", d->cfg.metrics_listen, err.msg);
    return -1;
  }
  for (size_t i = 0; i < d->cfg.n_listen; i++)
    mw_log_notice("listening on %s%s (port %d)", d->cfg.listen[i], d->cfg.listen_tls[i] ? " tls" : "",
                  mw_server_port(d->server, i));
  /* owner records name this address (several daemons on one table) */
  char addr[MW_OWNER_ADDRESS_BYTES] = "";
  if (d->cfg.n_listen > 0)
    mw_daemon_owner_address(d->cfg.listen[0], mw_server_port(d->server, 0), addr, sizeof addr);
  mw_daemon_owner_serve(&d->tables.owner, d->storage, addr);
  if (d->admin) mw_log_notice("admin socket %s", d->cfg.admin_socket);
  if (d->http)
    mw_log_notice("metrics at %s://%s/metrics", d->cfg.metrics_tls ? "https" : "http", d->cfg.metrics_listen);
  return 0;
}

static int parse_args(mw_daemon_t *d, int argc, char **argv, int *mode) {
  assert(argc >= 1);
  assert(mode != NULL);
  static const struct option opts[] = {
      {"config", required_argument, NULL, 'c'}, {"set", required_argument, NULL, 's'},
      {"check", no_argument, NULL, 'k'},        {"print-config", no_argument, NULL, 'p'},
      {"version", no_argument, NULL, 'V'},      {"help", no_argument, NULL, 'h'},
      {"print-keys", no_argument, NULL, 'K'},
      {NULL, 0, NULL, 0}};
  d->sets = calloc((size_t)argc, sizeof *d->sets);
  if (d->sets == NULL) return -ENOMEM;
  int c;
  while ((c = getopt_long(argc, argv, "c:Vh", opts, NULL)) != -1) {
    switch (c) {
      case 'c': d->config_path = optarg; break;
      case 's': d->sets[d->n_sets++] = optarg; break;
      case 'k': *mode = 'k'; break;
      case 'p': *mode = 'p'; break;
      case 'V': *mode = 'V'; break;
      case 'K': *mode = 'K'; break;
      case 'h': usage(stdout); exit(0);
      default: usage(stderr); return -EINVAL;
    }
  }
  if (optind != argc) {
    fprintf(stderr, "memwald: unexpected argument '%s'\n", argv[optind]);
    usage(stderr);
    return -EINVAL;
  }
  return 0;
}

/* The modes that only read the configuration: --print-keys, --version,
 * --check, --print-config. Returns the exit code, or -1 to run the daemon
 * (the configuration loaded and checked). */
static int offline(mw_daemon_t *d, int mode) {
  assert(mode == 0 || strchr("KVkp", mode) != NULL);
  if (mode == 'K') { /* every known key, for docs and tests */
    for (size_t i = 0; i < mw_config_key_count(); i++)
      printf("%s%s\n", mw_config_key_name(i), mw_config_key_reloadable(i) ? " (reloadable)" : "");
    return 0;
  }
  if (mode == 'V') {
    printf("memwald %s\n", MW_VERSION);
    return 0;
  }
  mw_err_t err = {0};
  if (mw_config_load(&d->cfg, d->config_path, d->sets, d->n_sets, &err) < 0 ||
      (mode != 'p' && mw_daemon_check_config(&d->cfg, &err) < 0)) {
    fprintf(stderr, "memwald: %s\n", err.msg);
    return 2;
  }
  if (mode == 'k') {
    if (mw_daemon_check_tables(&d->cfg, &err) < 0) {
      fprintf(stderr, "memwald: %s\n", err.msg);
      return 2;
    }
    printf("%s: ok\n", d->config_path ? d->config_path : "(defaults)");
    return 0;
  }
  if (mode == 'p') {
    mw_config_print(&d->cfg, stdout);
    return 0;
  }
  return -1;
}

/* The loop, the test hooks, data_dir's storage, the tables and listeners,
 * signals, the watchdog and the trim timer. Returns the exit code on a
 * failure, or -1 once the daemon is ready. */
static int start(mw_daemon_t *d) {
  assert(d->loop == NULL);
  assert(d->storage == NULL);
  mw_err_t err = {0};
  int rc;
  d->loop = uv_default_loop();
  d->started_ms = uv_now(d->loop);
  if (mw_testhook_init(d->loop, &err) < 0) { /* tests only: MEMWALD_CRASH_AT, _POWER_LOSS */
    mw_log_err("%s", err.msg);
    return 2;
  }
  const char *test_faults = getenv("MEMWALD_TEST_FAULTS");
  if (mw_testhook_active() || (test_faults != NULL && strcmp(test_faults, "1") == 0))
    mw_storage_fault_metrics_enable(); /* the test-only series, before any storage opens */
  mw_storage_config_t scfg;
  mw_daemon_storage_config(&d->cfg, NULL, d->cfg.data_dir, &scfg);
  if ((rc = mw_storage_open(d->loop, &scfg, &d->storage, &err)) < 0) {
    mw_log_err("storage at %s: %s", d->cfg.data_dir, err.msg[0] ? err.msg : strerror(-rc));
    return 1;
  }
  build_info();
  if (start_front(d) < 0) return 1;
  if ((rc = start_signals(d)) < 0 || (rc = mw_notify_start(&d->notify, d->loop)) < 0 ||
      (rc = mw_memtrim_start(&d->memtrim, d->loop, (uint64_t)d->cfg.memory_trim_interval_ms,
                             mw_metrics_default())) < 0) {
    mw_log_err("start-up: %s", uv_strerror(rc));
    return 1;
  }
  assert(d->storage != NULL);
  return -1;
}

int main(int argc, char **argv) {
  static mw_daemon_t d; /* large (config tables): keep it off the stack */
  int mode = 0;
  mw_log_init();
  if (parse_args(&d, argc, argv, &mode) < 0) return 2;
  int code = offline(&d, mode);
  if (code >= 0) return code;
  mw_log_set_level(d.cfg.log_level);
  signal(SIGPIPE, SIG_IGN);
  if ((code = start(&d)) >= 0) return code;
  mw_log_notice("memwald %s started: config=%s data_dir=%s storage=%s tables=%zu log_level=%s "
                "pid=%d",
                MW_VERSION, d.config_path ? d.config_path : "(defaults)", d.cfg.data_dir,
                mw_storage_backend_name(d.storage), d.cfg.n_tables,
                mw_log_level_name(d.cfg.log_level), (int)getpid());
  mw_notify_ready("running");
  uv_run(d.loop, UV_RUN_DEFAULT);
  assert(d.stopping > 0); /* the loop ends only after begin_stop closed every handle */
  int rc = uv_loop_close(d.loop);
  if (rc != 0) mw_log_warn("event loop closed with handles still open: %s", uv_strerror(rc));
  mw_fe_tables_free(&d.tables.fe);
  mw_tls_ctx_free(d.tls);
  free(d.sets);
  if (d.stopping == 2) {
    mw_log_err("stopped with errors");
    return 1;
  }
  mw_log_notice("stopped cleanly");
  return 0;
}
