/*
 * log.c — see log.h. Each line is formatted into a stack buffer and written
 * with a single write(2) so lines from different threads never interleave.
 */
#include "common/log.h"

#include <assert.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_int log_level = MW_LOG_INFO;
static bool log_journal = false;

static const char *const level_names[8] = {
    "emerg", "alert", "crit", "error", "warn", "notice", "info", "debug",
};

void mw_log_init(void) {
  const char *js = getenv("JOURNAL_STREAM");
  log_journal = js != NULL && js[0] != '\0';
}

void mw_log_set_level(int level) {
  assert(level >= 0);
  assert(level <= 7);
  atomic_store(&log_level, level);
}

int mw_log_get_level(void) { return atomic_load(&log_level); }

bool mw_log_enabled(int level) { return level <= atomic_load(&log_level); }

int mw_log_level_parse(const char *name) {
  assert(name != NULL);
  for (int i = 0; i < 8; i++)
    if (strcmp(name, level_names[i]) == 0) return i;
  if (strcmp(name, "warning") == 0) return MW_LOG_WARN;
  if (strcmp(name, "err") == 0) return MW_LOG_ERR;
  return -1;
}

const char *mw_log_level_name(int level) {
  return level >= 0 && level <= 7 ? level_names[level] : "?";
}

void mw_log(int level, const char *fmt, ...) {
  assert(level >= 0);
  assert(level <= 7);
  if (!mw_log_enabled(level)) return;
  char line[MW_LOG_LINE_BYTES];
  int n;
  if (log_journal) {
    n = snprintf(line, sizeof line, "<%d>", level);
  } else {
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-6s ",
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                 tm.tm_sec, ts.tv_nsec / 1000000, level_names[level]);
  }
  if (n < 0) return;
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
  va_end(ap);
  if (m < 0) return;
  size_t len = (size_t)n + (size_t)m;
  if (len > sizeof line - 2) len = sizeof line - 2; /* truncated, keep the newline */
  line[len++] = '\n';
  ssize_t w = write(STDERR_FILENO, line, len);
  (void)w; /* nowhere to report a failed log write */
}

bool mw_log_limit_take(mw_log_limit_t *l, uint64_t now_ms, uint64_t *suppressed) {
  assert(l != NULL);
  assert(suppressed != NULL);
  assert(l->burst > 0);
  assert(l->window_ms > 0);
  *suppressed = 0;
  if (now_ms < l->window_start_ms || now_ms - l->window_start_ms >= l->window_ms) {
    l->window_start_ms = now_ms;
    l->used = 0;
  }
  if (l->used >= l->burst) {
    l->suppressed++;
    return false;
  }
  l->used++;
  *suppressed = l->suppressed;
  l->suppressed = 0;
  return true;
}
