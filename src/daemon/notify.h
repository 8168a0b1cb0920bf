/*
 * notify.h — systemd integration: sd_notify state and the watchdog.
 *
 * Owns: one uv_timer that pets the watchdog at half of WATCHDOG_USEC, only
 * when systemd asked for it (sd_watchdog_enabled). Outside systemd every call
 * is a cheap no-op (NOTIFY_SOCKET unset).
 *
 * The watchdog runs on the event loop on purpose: if the loop stalls (a
 * blocking call slipped in), the pings stop and systemd restarts us.
 *
 * Errors: mw_notify_start returns 0 or a negative errno from libuv.
 */
#ifndef MW_DAEMON_NOTIFY_H
#define MW_DAEMON_NOTIFY_H

#include <stdint.h>
#include <uv.h>

typedef struct mw_notify {
  uv_timer_t watchdog;
  uint64_t watchdog_usec; /* 0 = disabled */
  int started;
} mw_notify_t;

int mw_notify_start(mw_notify_t *n, uv_loop_t *loop);
void mw_notify_ready(const char *status);
void mw_notify_status(const char *status);
void mw_notify_reloading(void);
void mw_notify_stopping(void);
void mw_notify_close(mw_notify_t *n);

#endif
