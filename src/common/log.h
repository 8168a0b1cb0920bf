/*
 * log.h — one line per event, to stderr.
 *
 * Owns: the process-wide log level (an atomic, so SIGHUP can change it while
 * storage threads log) and the output format.
 *
 * Format: when stderr is connected to journald (JOURNAL_STREAM is set), each
 * line starts with the sd-daemon priority prefix `<N>` and nothing else, since
 * journald adds the time. Otherwise:
 *   2026-11-30T23:59:59.123Z warn  storage: put wal/0100…: No space left
 * Lines longer than MW_LOG_LINE_BYTES are truncated, never split.
 *
 * Levels are syslog priorities, so the numbers are journald's.
 */
#ifndef MW_COMMON_LOG_H
#define MW_COMMON_LOG_H

#include <stdbool.h>
#include <stdint.h>

#define MW_LOG_LINE_BYTES 2048

enum mw_log_level {
  MW_LOG_ERR = 3,
  MW_LOG_WARN = 4,
  MW_LOG_NOTICE = 5,
  MW_LOG_INFO = 6,
  MW_LOG_DEBUG = 7,
};

/* Decide the format from the environment (JOURNAL_STREAM) once at start-up. */
void mw_log_init(void);
void mw_log_set_level(int level);
int mw_log_get_level(void);
/* "error", "warn", "notice", "info", "debug" -> level, or -1. */
int mw_log_level_parse(const char *name);
const char *mw_log_level_name(int level);
bool mw_log_enabled(int level);

void mw_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A rate limit for one kind of line (rejected rows, closed connections): at
 * most `burst` lines per `window_ms`. The lines refused are counted, and the
 * first line allowed after them reports how many there were, so a flood of
 * bad input costs a bounded log and still leaves its size on record. */
typedef struct mw_log_limit {
  uint32_t burst;
  uint64_t window_ms;
  uint64_t window_start_ms;
  uint32_t used;
  uint64_t suppressed;
} mw_log_limit_t;

#define MW_LOG_LIMIT_INIT(burst_, window_ms_) {.burst = (burst_), .window_ms = (window_ms_)}

/* true: log this line now, and first report *suppressed (when > 0) lines
 * left out before it; false: leave it out (counted). now_ms: any monotonic
 * clock in milliseconds (the loop's uv_now). */
bool mw_log_limit_take(mw_log_limit_t *l, uint64_t now_ms, uint64_t *suppressed);

#define mw_log_err(...) mw_log(MW_LOG_ERR, __VA_ARGS__)
#define mw_log_warn(...) mw_log(MW_LOG_WARN, __VA_ARGS__)
#define mw_log_notice(...) mw_log(MW_LOG_NOTICE, __VA_ARGS__)
#define mw_log_info(...) mw_log(MW_LOG_INFO, __VA_ARGS__)
#define mw_log_debug(...) \
  do { if (mw_log_enabled(MW_LOG_DEBUG)) mw_log(MW_LOG_DEBUG, __VA_ARGS__); } while (0)

#endif
