/*
 * notify.c — see notify.h. sd_notify(3) messages used:
 *   READY=1 + STATUS=...        after start-up
 *   RELOADING=1 ... READY=1     around a SIGHUP reload
 *   STOPPING=1                  when a graceful stop begins
 *   WATCHDOG=1                  every WATCHDOG_USEC/2
 */
#include "daemon/notify.h"

#include <assert.h>
#include <stdio.h>
#include <systemd/sd-daemon.h>

#include "common/log.h"

static void on_watchdog(uv_timer_t *t) {
  (void)t;
  sd_notify(0, "WATCHDOG=1");
}

int mw_notify_start(mw_notify_t *n, uv_loop_t *loop) {
  assert(n != NULL);
  assert(loop != NULL);
  n->started = 0;
  n->watchdog_usec = 0;
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0) return 0;
  int rc = uv_timer_init(loop, &n->watchdog);
  if (rc < 0) return rc;
  n->watchdog_usec = usec;
  uint64_t every_ms = usec / 2000 ? usec / 2000 : 1;
  rc = uv_timer_start(&n->watchdog, on_watchdog, 0, every_ms);
  if (rc < 0) return rc;
  n->started = 1;
  mw_log_info("systemd watchdog: ping every %llu ms", (unsigned long long)every_ms);
  return 0;
}

void mw_notify_ready(const char *status) {
  char msg[512];
  snprintf(msg, sizeof msg, "READY=1\nSTATUS=%s", status ? status : "ready");
  sd_notify(0, msg);
}

void mw_notify_status(const char *status) {
  char msg[512];
  snprintf(msg, sizeof msg, "STATUS=%s", status);
  sd_notify(0, msg);
}

void mw_notify_reloading(void) { sd_notify(0, "RELOADING=1"); }

void mw_notify_stopping(void) { sd_notify(0, "STOPPING=1\nSTATUS=stopping"); }

void mw_notify_close(mw_notify_t *n) {
  if (!n->started) return;
  uv_timer_stop(&n->watchdog);
  uv_close((uv_handle_t *)&n->watchdog, NULL);
  n->started = 0;
}
