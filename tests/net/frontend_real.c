/*
 * frontend_real.c — the producers' server over the real shard engine
 * (src/net/engine_table.h onto shard/table.h), for test_frontend_lancedb.py.
 *
 *   frontend_real TABLE_DIR NAME [ADMIN_SOCKET]
 *
 * With ADMIN_SOCKET the admin socket serves the engine's commands
 * (net/admin_engine.h).
 * Opens the table (no fsync: tests only), serves it as NAME on 127.0.0.1:0,
 * prints "READY <port>". On SIGTERM: stops the server, releases every shard
 * (flush to SSTables, so LanceDB's reader sees the rows), closes the table,
 * prints "BYE <shards>" and exits 0; any failure exits 1 with a message.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <uv.h>

#include "common/log.h"
#include "net/admin_engine.h"
#include "net/engine_table.h"

static uv_loop_t *L;
static mw_table_t *T;
static mw_server_t *S;
static uv_signal_t SIG;
static int ctl_left, failures;
static mw_admin_t *A;

static void on_closed(mw_table_t *t) {
  (void)t;
  uv_close((uv_handle_t *)&SIG, NULL);
}

static void on_ctl(mw_shard_t *s, int status, const char *reason, void *arg) {
  (void)arg;
  if (status < 0) {
    fprintf(stderr, "release %s: %s\n", s->id_str, reason ? reason : "failed");
    failures++;
  }
  if (--ctl_left == 0 && mw_table_close(T, on_closed) < 0) {
    fprintf(stderr, "close failed\n");
    exit(1);
  }
}

static void on_stopped(void *arg) {
  (void)arg;
  size_t n = mw_table_shard_count(T);
  printf("BYE %zu\n", n);
  fflush(stdout);
  ctl_left = (int)n + 1;
  for (size_t i = 0; i < n; i++) {
    mw_table_shard_info_t ts;
    mw_table_shard_at(T, i, &ts);
    if (mw_shard_state(ts.shard) >= MW_SS_FENCED) { /* parked (dropped): nothing to release */
      ctl_left--;
    } else if (mw_shard_release(ts.shard, on_ctl, NULL) < 0) {
      fprintf(stderr, "release %zu refused\n", i);
      failures++;
      ctl_left--;
    }
  }
  on_ctl(NULL, 0, NULL, NULL); /* the +1 hold */
}

static void on_signal(uv_signal_t *h, int sig) {
  (void)h;
  (void)sig;
  if (A) mw_admin_stop(A);
  A = NULL;
  if (S) mw_server_stop(S, on_stopped, NULL);
  S = NULL;
}

int main(int argc, char **argv) {
  if (argc != 3 && argc != 4) {
    fprintf(stderr, "usage: frontend_real TABLE_DIR NAME [ADMIN_SOCKET]\n");
    return 2;
  }
  mw_log_init();
  mw_log_set_level(MW_LOG_WARN);
  L = uv_default_loop();
  mw_storage_config_t sc;
  mw_storage_config_init(&sc, NULL);
  sc.durable = false;
  mw_table_opts_t o = {.storage = &sc};
  mw_err_t err = {0};
  if (mw_table_open(L, argv[1], &o, &T, &err) < 0) {
    fprintf(stderr, "open: %s\n", err.msg);
    return 1;
  }
  static mw_fe_tables_t ts;
  mw_fe_tables_add(&ts, argv[2], T);
  mw_fe_engine_t eng;
  mw_fe_tables_engine(&ts, &eng);
  const char *listen[1] = {"127.0.0.1:0"};
  mw_server_opts_t so = {.listen = listen, .n_listen = 1, .metrics = mw_metrics_default(),
                         .write_gather_ms = 10}; /* the daemon's default */
  if (mw_server_start(L, &so, &eng, &S, &err) < 0) {
    fprintf(stderr, "server: %s\n", err.msg);
    return 1;
  }
  static mw_fe_admin_t fa;
  fa = (mw_fe_admin_t){.tables = &ts, .loop = L, .version = "test", .start_ms = uv_now(L), .server = S};
  mw_admin_engine_t ae;
  mw_fe_admin_engine(&fa, &ae);
  if (argc == 4 && mw_admin_start(L, argv[3], &ae, mw_metrics_default(), &A, &err) < 0) {
    fprintf(stderr, "admin: %s\n", err.msg);
    return 1;
  }
  uv_signal_init(L, &SIG);
  uv_signal_start(&SIG, on_signal, SIGTERM);
  printf("READY %d\n", mw_server_port(S, 0));
  fflush(stdout);
  uv_run(L, UV_RUN_DEFAULT);
  uv_loop_close(L);
  return failures ? 1 : 0;
}
