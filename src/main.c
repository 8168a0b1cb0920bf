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
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "common/err.h"
#include "common/log.h"
#include "daemon/config.h"
#include "daemon/notify.h"
#include "storage/storage.h"

#ifndef MW_VERSION
#define MW_VERSION "0.1.0"
#endif

typedef struct mw_daemon {
  uv_loop_t *loop;
  uv_signal_t sig_term, sig_int, sig_hup;
  mw_notify_t notify;
  mw_storage_t *storage; /* data_dir; tables get their own (issue 4) */
  mw_config_t cfg;
  const char *config_path;
  const char **sets;
  size_t n_sets;
  int stopping;
  uint64_t started_ms;
} mw_daemon_t;

static void usage(FILE *f) {
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

static void close_cb(uv_handle_t *h) { (void)h; }

static void close_walk(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h)) uv_close(h, close_cb);
}

static void on_storage_closed(void *arg) {
  mw_daemon_t *d = arg;
  d->storage = NULL;
  /* With nothing left open, closing the remaining handles ends uv_run. */
  uv_walk(d->loop, close_walk, NULL);
}

static void begin_stop(mw_daemon_t *d, const char *why) {
  if (d->stopping) {
    mw_log_warn("second %s during shutdown: stopping now", why);
    exit(1);
  }
  d->stopping = 1;
  mw_log_notice("stopping (%s): no new connections, draining", why);
  mw_notify_stopping();
  /* Stop accepting, drain acknowledged writes, flush MemTables: the front
   * ends and the shard engine register their shutdown steps here as they
   * land. Storage closes last: it lets every accepted operation finish
   * (and call back) before it goes. */
  mw_notify_close(&d->notify);
  uv_signal_stop(&d->sig_hup);
  if (d->storage != NULL) mw_storage_close(d->storage, on_storage_closed, d);
  else on_storage_closed(d);
}

static void reload(mw_daemon_t *d) {
  mw_notify_reloading();
  mw_config_t *next = malloc(sizeof *next);
  mw_err_t err = {0};
  if (next == NULL) {
    mw_log_err("reload: out of memory; keeping the running configuration");
  } else if (mw_config_load(next, d->config_path, d->sets, d->n_sets, &err) < 0) {
    mw_log_err("reload failed, keeping the running configuration: %s", err.msg);
  } else {
    if (next->log_level != d->cfg.log_level) {
      mw_log_notice("reload: log_level %s -> %s", mw_log_level_name(d->cfg.log_level),
                    mw_log_level_name(next->log_level));
      d->cfg.log_level = next->log_level;
      mw_log_set_level(next->log_level);
    }
    next->log_level = d->cfg.log_level;
    if (memcmp(next, &d->cfg, sizeof *next) != 0)
      mw_log_warn("reload: settings other than log_level changed in %s; they take effect "
                  "after a restart", d->config_path ? d->config_path : "(no file)");
    else
      mw_log_info("reload: configuration re-read from %s",
                  d->config_path ? d->config_path : "(no file)");
  }
  free(next);
  mw_notify_ready("running");
}

static void on_signal(uv_signal_t *s, int signum) {
  mw_daemon_t *d = s->data;
  if (signum == SIGHUP) {
    reload(d);
    return;
  }
  begin_stop(d, signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

static int start_signals(mw_daemon_t *d) {
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

static int parse_args(mw_daemon_t *d, int argc, char **argv, int *mode) {
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

int main(int argc, char **argv) {
  static mw_daemon_t d; /* large (config tables): keep it off the stack */
  int mode = 0;
  mw_log_init();
  if (parse_args(&d, argc, argv, &mode) < 0) return 2;
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
  if (mw_config_load(&d.cfg, d.config_path, d.sets, d.n_sets, &err) < 0) {
    fprintf(stderr, "memwald: %s\n", err.msg);
    return 2;
  }
  if (mode == 'k') {
    printf("%s: ok\n", d.config_path ? d.config_path : "(defaults)");
    return 0;
  }
  if (mode == 'p') {
    mw_config_print(&d.cfg, stdout);
    return 0;
  }
  mw_log_set_level(d.cfg.log_level);
  signal(SIGPIPE, SIG_IGN);

  int rc;
  d.loop = uv_default_loop();
  d.started_ms = uv_now(d.loop);
  mw_storage_config_t scfg;
  mw_storage_config_init(&scfg, d.cfg.data_dir);
  scfg.backend = d.cfg.io_backend == MW_IO_URING     ? MW_STORAGE_URING
                 : d.cfg.io_backend == MW_IO_THREADS ? MW_STORAGE_THREADS
                                                     : MW_STORAGE_AUTO;
  scfg.max_inflight = (uint32_t)d.cfg.max_inflight;
  scfg.max_object_bytes = (size_t)d.cfg.max_object_bytes;
  if ((rc = mw_storage_open(d.loop, &scfg, &d.storage, &err)) < 0) {
    mw_log_err("storage at %s: %s", d.cfg.data_dir, err.msg[0] ? err.msg : strerror(-rc));
    return 1;
  }
  if ((rc = start_signals(&d)) < 0 || (rc = mw_notify_start(&d.notify, d.loop)) < 0) {
    mw_log_err("start-up: %s", uv_strerror(rc));
    return 1;
  }
  mw_log_notice("memwald %s started: config=%s data_dir=%s storage=%s tables=%zu log_level=%s "
                "pid=%d",
                MW_VERSION, d.config_path ? d.config_path : "(defaults)", d.cfg.data_dir,
                mw_storage_backend_name(d.storage), d.cfg.n_tables,
                mw_log_level_name(d.cfg.log_level), (int)getpid());
  mw_notify_ready("running");
  uv_run(d.loop, UV_RUN_DEFAULT);
  rc = uv_loop_close(d.loop);
  if (rc != 0) mw_log_warn("event loop closed with handles still open: %s", uv_strerror(rc));
  mw_log_notice("stopped cleanly");
  free(d.sets);
  return 0;
}
