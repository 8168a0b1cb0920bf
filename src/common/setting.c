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
  assert(out != NULL);
  assert(lo <= hi);
  const int w = MW_SETTING_TEXT_SHOWN;
  const char *units = flags & MW_SETTING_SIZES ? " (optionally with KiB, MiB or GiB)" : "";
  const char *pre = key != NULL ? "config " : "", *name = key != NULL ? key : "", *sep = key != NULL ? ": " : "";
  if (text == NULL) return mw_err_set(err, -EINVAL, "%s%s%sno value", pre, name, sep);
  char *end = NULL;
  errno = 0;
  unsigned long long x = text[0] >= '0' && text[0] <= '9' ? strtoull(text, &end, 10) : 0;
  uint64_t mul = end != NULL ? unit_multiplier(end, flags) : 0;
  if (mul == 0)
    return mw_err_set(err, -EINVAL, "%s%s%sexpected a whole number in %llu..%llu%s, got '%.*s'", pre, name, sep,
                      (unsigned long long)lo, (unsigned long long)hi, units, w, text);
  if (errno == ERANGE || x > UINT64_MAX / mul)
    return mw_err_set(err, -EINVAL, "%s%s%s'%.*s' does not fit in 64 bits (limit %llu..%llu)", pre, name, sep, w,
                      text, (unsigned long long)lo, (unsigned long long)hi);
  uint64_t v = (uint64_t)x * mul;
  if (v < lo || v > hi)
    return mw_err_set(err, -EINVAL, "%s%s%s'%.*s' is outside %llu..%llu", pre, name, sep, w, text,
                      (unsigned long long)lo, (unsigned long long)hi);
  *out = v;
  return 0;
}

int mw_setting_set_num(void *config, const mw_setting_num_t *table, size_t n, const char *key,
                       const char *value, mw_err_t *err) {
  assert(config != NULL);
  assert(table != NULL);
  assert(key != NULL);
  size_t i = 0;
  while (i < n && strcmp(key, table[i].key) != 0) i++;
  if (i == n) return -ENOENT;
  const mw_setting_num_t *e = &table[i];
  uint64_t v = 0;
  int rc = mw_setting_parse_u64(key, value, e->lo, e->hi, 0, &v, err);
  if (rc < 0) return rc;
  char *field = (char *)config + e->offset;
  if (e->size == sizeof(uint32_t)) {
    assert(e->hi <= UINT32_MAX); /* the limit keeps the value in its field */
    uint32_t v32 = (uint32_t)v;
    memcpy(field, &v32, sizeof v32);
  } else {
    assert(e->size == sizeof(uint64_t));
    memcpy(field, &v, sizeof v);
  }
  return 0;
}
