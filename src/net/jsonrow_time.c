/*
 * jsonrow_time.c — the text forms of dates, times and instants (see
 * jsonrow_time.h).
 *
 * Fixed-width fields are read by position (a date is exactly 10 bytes, a
 * clock at least 8), each checked for its range before use, so the
 * arithmetic after is exact: days by Howard Hinnant's days_from_civil, a
 * clock in nanoseconds (under 2^47), and an instant in the column's unit
 * with overflow checks (a timestamp[ns] spans only 1677..2262).
 */
#include "net/jsonrow_time.h"

#include <assert.h>

#include "lance/types.h"

static const int64_t per_second[4] = {1, 1000, 1000000, 1000000000};

int64_t mw_jsonrow_per_second(uint8_t unit) {
  assert(unit <= MW_UNIT_NS);
  return per_second[unit];
}

/* Days from 1970-01-01 to y-m-d of the proleptic Gregorian calendar
 * (Howard Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  assert(m >= 1);
  assert(m <= 12);
  y -= m <= 2;
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  unsigned yoe = (unsigned)(y - era * 400);
  unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + (int64_t)doe - 719468;
}

static bool leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

/* n digits at p as a number, or -1. */
static int64_t digits(const uint8_t *p, size_t n) {
  assert(n <= 4); /* the widest field, a year */
  int64_t v = 0;
  for (size_t i = 0; i < n; i++) {
    if (p[i] < '0' || p[i] > '9') return -1;
    v = v * 10 + (p[i] - '0');
  }
  return v;
}

bool mw_jsonrow_date(const uint8_t *p, int64_t *days) {
  assert(p != NULL);
  assert(days != NULL);
  int64_t y = digits(p, 4), m = digits(p + 5, 2), d = digits(p + 8, 2);
  static const uint8_t mdays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (p[4] != '-' || p[7] != '-' || y < 0 || m < 1 || m > 12 || d < 1) return false;
  if (d > mdays[m - 1] + (m == 2 && leap(y))) return false;
  *days = days_from_civil(y, (unsigned)m, (unsigned)d);
  return true;
}

bool mw_jsonrow_clock(const uint8_t *p, size_t n, int64_t *ns, size_t *len, int *frac_digits) {
  assert(ns != NULL);
  assert(len != NULL);
  if (n < 8) return false;
  int64_t h = digits(p, 2), mi = digits(p + 3, 2), se = digits(p + 6, 2);
  if (p[2] != ':' || p[5] != ':' || h < 0 || h > 23 || mi < 0 || mi > 59 || se < 0 || se > 59)
    return false;
  int64_t frac = 0;
  size_t at = 8;
  int fd = 0;
  if (at < n && p[at] == '.') {
    at++;
    for (; at < n && p[at] >= '0' && p[at] <= '9'; at++, fd++) {
      if (fd >= 9) return false;
      frac = frac * 10 + (p[at] - '0');
    }
    if (fd == 0) return false;
  }
  for (int k = fd; k < 9; k++) frac *= 10;
  *ns = ((h * 60 + mi) * 60 + se) * per_second[MW_UNIT_NS] + frac;
  assert(*ns < 86400 * per_second[MW_UNIT_NS]); /* within the day */
  *len = at;
  *frac_digits = fd;
  return true;
}

bool mw_jsonrow_ns_to_unit(int64_t ns, uint8_t unit, int64_t *out) {
  assert(unit <= MW_UNIT_NS);
  assert(out != NULL);
  int64_t div = per_second[MW_UNIT_NS] / per_second[unit];
  if (ns % div != 0) return false;
  *out = ns / div;
  return true;
}

/* The offset "+hh:mm" / "-hh:mm" / "Z" at p[at..n) in seconds east, its
 * end in *end; false when malformed. Nothing there: UTC. */
static bool utc_offset(const uint8_t *p, size_t n, size_t at, int64_t *off_s, size_t *end) {
  *off_s = 0;
  *end = at;
  if (at < n && (p[at] == 'Z' || p[at] == 'z')) {
    *end = at + 1;
  } else if (at < n && (p[at] == '+' || p[at] == '-')) {
    int64_t oh = n - at >= 6 ? digits(p + at + 1, 2) : -1, om = n - at >= 6 ? digits(p + at + 4, 2) : -1;
    if (oh < 0 || oh > 23 || om < 0 || om > 59 || p[at + 3] != ':') return false;
    *off_s = (oh * 60 + om) * 60 * (p[at] == '-' ? -1 : 1);
    *end = at + 6;
  }
  return true;
}

const char *mw_jsonrow_rfc3339(const uint8_t *p, size_t n, uint8_t unit, int64_t *out) {
  assert(unit <= MW_UNIT_NS);
  assert(out != NULL);
  int64_t days, clock_ns, off_s;
  size_t used, at;
  int fd;
  if (n < 19 || !mw_jsonrow_date(p, &days) || (p[10] != 'T' && p[10] != 't' && p[10] != ' '))
    return "not an RFC 3339 timestamp (YYYY-MM-DDTHH:MM:SS[.fff][Z|+hh:mm])";
  if (!mw_jsonrow_clock(p + 11, n - 11, &clock_ns, &used, &fd))
    return "not an RFC 3339 timestamp (bad time of day)";
  if (!utc_offset(p, n, 11 + used, &off_s, &at))
    return "not an RFC 3339 timestamp (bad offset, want +hh:mm)";
  if (at != n) return "not an RFC 3339 timestamp (trailing characters)";
  int64_t sub_ns = clock_ns % per_second[MW_UNIT_NS], sub;
  if (!mw_jsonrow_ns_to_unit(sub_ns, unit, &sub)) return "has a fraction finer than the column's unit";
  int64_t secs = days * 86400 + clock_ns / per_second[MW_UNIT_NS] - off_s, v;
  if (__builtin_mul_overflow(secs, per_second[unit], &v) || __builtin_add_overflow(v, sub, &v))
    return "is out of range for the column's unit";
  *out = v;
  return NULL;
}
