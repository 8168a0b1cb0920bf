/*
 * jsonrow_number.c — JSON numbers off the fast paths (see
 * jsonrow_number.h): strtod_l/strtof_l for floats the fast path cannot
 * round exactly, integer range checks per width, binary16 rounding,
 * decimal128 text, and integers given as strings (JavaScript's 64-bit
 * values). Each conversion is exact or refuses: nothing here rounds twice
 * or truncates a digit silently.
 */
#include "net/jsonrow_number.h"

#include <assert.h>
#include <errno.h>
#include <locale.h>
#include <stdlib.h>

/* NUL-terminated copy of the number's text in scratch, for strtod_l. */
static const char *num_text(const mw_jsonrow_num_t *n, mw_buf_t *b) {
  mw_buf_reset(b);
  if (mw_buf_reserve(b, n->len + 1) < 0) return NULL;
  memcpy(b->data, n->start, n->len);
  b->data[n->len] = 0;
  return (const char *)b->data;
}

int mw_jsonrow_num_strtod(const mw_jsonrow_num_t *n, void *c_locale, mw_buf_t *scratch, double *out) {
  assert(c_locale != NULL);
  assert(scratch != NULL);
  const char *t = num_text(n, scratch);
  if (t == NULL) return -ENOMEM;
  double d = strtod_l(t, NULL, (locale_t)c_locale);
  if (isinf(d)) return -ERANGE;
  *out = d;
  return 0;
}

int mw_jsonrow_num_strtof(const mw_jsonrow_num_t *n, void *c_locale, mw_buf_t *scratch, float *out) {
  assert(c_locale != NULL);
  assert(scratch != NULL);
  const char *t = num_text(n, scratch);
  if (t == NULL) return -ENOMEM;
  float x = strtof_l(t, NULL, (locale_t)c_locale);
  if (isinf(x)) return -ERANGE;
  *out = x;
  return 0;
}

bool mw_jsonrow_f64_to_f16(double d, uint16_t *out) {
  assert(out != NULL);
  uint64_t b;
  memcpy(&b, &d, 8);
  uint16_t sign = (uint16_t)(b >> 48) & 0x8000;
  int e = (int)((b >> 52) & 0x7ff);
  uint64_t m = b & ((UINT64_C(1) << 52) - 1);
  if (e == 0x7ff) { /* inf or nan */
    *out = sign | 0x7c00 | (m ? 0x200 : 0);
    return m != 0;
  }
  int he = e - 1023 + 15;
  if (he >= 0x1f) return false;
  if (he <= 0) { /* subnormal or zero in binary16 */
    if (he < -10) {
      *out = sign;
      return true;
    }
    m |= UINT64_C(1) << 52;
    int shift = 42 + 1 - he; /* 52 - 10 + (1 - he) */
    assert(shift <= 53);     /* he >= -10 */
    uint64_t q = m >> shift, rem = m & ((UINT64_C(1) << shift) - 1), half = UINT64_C(1) << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) q++;
    *out = sign | (uint16_t)q;
    return true;
  }
  uint64_t q = m >> 42, rem = m & ((UINT64_C(1) << 42) - 1), half = UINT64_C(1) << 41;
  uint32_t h = (uint32_t)he << 10 | (uint32_t)q;
  if (rem > half || (rem == half && (q & 1))) h++; /* may carry into the exponent */
  if ((h >> 10) >= 0x1f) return false;
  *out = sign | (uint16_t)h;
  return true;
}

static bool is_digit(uint8_t b) { return b >= '0' && b <= '9'; }

bool mw_jsonrow_string_integer(const uint8_t *s, size_t n, mw_jsonrow_num_t *num) {
  assert(num != NULL);
  memset(num, 0, sizeof *num);
  num->start = s;
  num->len = n;
  size_t i = 0;
  if (i < n && s[i] == '-') num->neg = true, i++;
  if (i == n || (s[i] == '0' && i + 1 < n)) return false;
  for (; i < n; i++) {
    if (!is_digit(s[i])) return false;
    uint64_t d = (uint64_t)(s[i] - '0');
    if (num->mant > (UINT64_MAX - d) / 10) num->ovf = true;
    else num->mant = num->mant * 10 + d;
  }
  return true;
}

/* The exponent "e[+-]digits" at s[*i..n) into *exp (saturated at 1000);
 * false when there are no digits. */
static bool decimal_exponent(const uint8_t *s, size_t n, size_t *i, int64_t *exp) {
  bool eneg = false;
  (*i)++;
  if (*i < n && (s[*i] == '+' || s[*i] == '-')) eneg = s[*i] == '-', (*i)++;
  if (*i == n) return false;
  for (; *i < n && is_digit(s[*i]); (*i)++)
    if (*exp < 1000) *exp = *exp * 10 + (s[*i] - '0');
  if (eneg) *exp = -*exp;
  return true;
}

const char *mw_jsonrow_decimal(const uint8_t *s, size_t n, const mw_field_t *f, __int128 *out) {
  assert(f != NULL);
  assert(f->precision <= MW_MAX_DECIMAL_PRECISION); /* checked with the schema (batch.c) */
  size_t i = 0;
  bool neg = false, any = false;
  unsigned __int128 v = 0, limit = 1;
  int frac = 0, ndig = 0;
  int64_t exp = 0;
  for (int k = 0; k < f->precision; k++) limit *= 10;
  if (i < n && (s[i] == '-' || s[i] == '+')) neg = s[i] == '-', i++;
  for (bool dot = false; i < n; i++) {
    if (s[i] == '.' && !dot) {
      dot = true;
      continue;
    }
    if (!is_digit(s[i])) break;
    any = true;
    if (v == 0 && s[i] == '0' && !dot) continue; /* leading zeros */
    if (ndig >= 39) return "has more digits than the precision allows";
    v = v * 10 + (unsigned)(s[i] - '0');
    ndig += v != 0 || dot;
    frac += dot;
  }
  if (!any) return "is not a decimal number";
  if (i < n && (s[i] == 'e' || s[i] == 'E') && !decimal_exponent(s, n, &i, &exp))
    return "is not a decimal number";
  if (i != n) return "is not a decimal number";
  int64_t shift = (int64_t)f->scale - frac + exp;
  for (; shift < 0; shift++) {
    if (v % 10) return "has more fraction digits than the column's scale";
    v /= 10;
  }
  for (; shift > 0; shift--) {
    if (v >= limit) return "does not fit the column's precision";
    v *= 10;
  }
  if (v >= limit) return "does not fit the column's precision";
  *out = neg ? -(__int128)v : (__int128)v;
  return NULL;
}
