/*
 * setting.c — see setting.h.
 *
 * strtoull does the digits; everything it would also accept (leading
 * spaces, a sign, which wraps a negative number round to a huge one) is
 * refused before it runs, and an overflow is told apart from a range
 * failure so the message says which.
 */
#include "common/setting.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The multiplier of a unit after the digits ("" = 1), 0 when unknown. */
static uint64_t unit_multiplier(const char *s, unsigned flags) {
  assert(s != NULL);
  if (*s == '\0') return 1;
  if (!(flags & MW_SETTING_SIZES)) return 0;
  while (*s == ' ' || *s == '\t') s++;
  if (*s == '\0') return 1;
  if (strcmp(s, "KiB") == 0) return (uint64_t)1 << 10;
  if (strcmp(s, "MiB") == 0) return (uint64_t)1 << 20;
  if (strcmp(s, "GiB") == 0) return (uint64_t)1 << 30;
  return 0;
}

int mw_setting_parse_u64(const char *key, const char *text, uint64_t lo, uint64_t hi, unsigned flags,
                         uint64_t *out, mw_err_t *err) {
  assert(key != NULL);
  assert(out != NULL);
  assert(lo <= hi);
  const int w = MW_SETTING_TEXT_SHOWN;
  const char *units = flags & MW_SETTING_SIZES ? " (optionally with KiB, MiB or GiB)" : "";
  if (text == NULL) return mw_err_set(err, -EINVAL, "config %s: no value", key);
  char *end = NULL;
  errno = 0;
  unsigned long long x = text[0] >= '0' && text[0] <= '9' ? strtoull(text, &end, 10) : 0;
  uint64_t mul = end != NULL ? unit_multiplier(end, flags) : 0;
  if (mul == 0)
    return mw_err_set(err, -EINVAL, "config %s: expected a whole number in %llu..%llu%s, got '%.*s'", key,
                      (unsigned long long)lo, (unsigned long long)hi, units, w, text);
  if (errno == ERANGE || x > UINT64_MAX / mul)
    return mw_err_set(err, -EINVAL, "config %s: '%.*s' does not fit in 64 bits (limit %llu..%llu)", key, w,
                      text, (unsigned long long)lo, (unsigned long long)hi);
  uint64_t v = (uint64_t)x * mul;
  if (v < lo || v > hi)
    return mw_err_set(err, -EINVAL, "config %s: '%.*s' is outside %llu..%llu", key, w, text,
                      (unsigned long long)lo, (unsigned long long)hi);
  *out = v;
  return 0;
}
