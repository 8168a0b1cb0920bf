/*
 * utf8.h — UTF-8 validation (RFC 3629), header-only so the JSON parser's
 * inner loop inlines it.
 *
 * Owns nothing. Rejects overlong forms, UTF-16 surrogates (U+D800..DFFF)
 * and code points above U+10FFFF: exactly what Arrow's and Lance's utf8
 * columns may hold. Sample: "é" = c3 a9 (2 bytes) is valid; c0 a9
 * (overlong) and ed a0 80 (a surrogate) are not.
 *
 * Errors: none; mw_utf8_seq returns 0 for an invalid sequence.
 */
#ifndef MW_COMMON_UTF8_H
#define MW_COMMON_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Length of the valid UTF-8 sequence at p (n >= 1 bytes available), or 0. */
static inline size_t mw_utf8_seq(const uint8_t *p, size_t n) {
  uint8_t b = p[0];
  if (b < 0x80) return 1;
  size_t k;
  uint8_t lo = 0x80, hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) k = 2;
  else if (b >= 0xE0 && b <= 0xEF) {
    k = 3;
    if (b == 0xE0) lo = 0xA0; /* no overlongs */
    if (b == 0xED) hi = 0x9F; /* no UTF-16 surrogates */
  } else if (b >= 0xF0 && b <= 0xF4) {
    k = 4;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F; /* <= U+10FFFF */
  } else {
    return 0;
  }
  if (n < k || p[1] < lo || p[1] > hi) return 0;
  for (size_t i = 2; i < k; i++)
    if ((p[i] & 0xC0) != 0x80) return 0;
  return k;
}

/* True when all n bytes at p are UTF-8. */
static inline bool mw_utf8_valid(const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n;) {
    size_t k = mw_utf8_seq(p + i, n - i);
    if (k == 0) return false;
    i += k;
  }
  return true;
}

#endif
