/*
 * jsonrow_number.h — JSON numbers to column values, for jsonrow.c: floats
 * correctly rounded, integers range-checked in their width, binary16,
 * decimal128 exact, and integers given as strings.
 *
 * Owns: the scanned number (mw_jsonrow_num_t: the mantissa accumulated by
 * jsonrow.c's scanner, its fraction digits and exponent) and every
 * conversion of it. The fast paths are inline here because they run once
 * per number on the hot path (a call would cost as much as the
 * conversion); the rest is in jsonrow_number.c.
 *
 * Floats take Clinger's fast path (mantissa <= 2^53 and |exp10| <= 22: one
 * correctly rounded IEEE operation), else strtod_l/strtof_l in the C
 * locale, so every value is correctly rounded (2^53+1 -> 2^53). An overflow
 * to infinity (1e400) is a range error; an underflow rounds to zero or a
 * subnormal as IEEE says.
 *
 * Errors: -ERANGE (out of range for the type), -EDOM (an integer column
 * given a fraction or exponent), -ENOMEM; a decimal's reason is a static
 * string. jsonrow.c turns each into the producer's message.
 */
#ifndef MW_NET_JSONROW_NUMBER_H
#define MW_NET_JSONROW_NUMBER_H

#include <assert.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/buf.h"
#include "lance/batch.h"

#define MW_ALWAYS_INLINE inline __attribute__((always_inline))

typedef struct mw_jsonrow_num {
  const uint8_t *start; /* its text in the line */
  size_t len;
  uint64_t mant;        /* all digits, integer and fraction, when !ovf */
  int32_t frac_digits;
  int32_t exp;          /* signed decimal exponent after e/E, saturated */
  bool neg, ovf, frac_exp;
} mw_jsonrow_num_t;

/* The fast paths need each operation rounded once, in its own type. */
#define MW_JSONROW_FAST_PATH_OK (FLT_EVAL_METHOD == 0)

static const double mw_jsonrow_pow10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                            1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                            1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* Clinger's fast path: m <= 2^53 and 10^|e| <= 10^22 are exact doubles, so
 * their product or quotient, rounded once, is the double nearest m*10^e.
 * false: not on the fast path (use mw_jsonrow_num_strtod). */
static MW_ALWAYS_INLINE bool mw_jsonrow_num_fast_double(const mw_jsonrow_num_t *n, double *out) {
  int64_t e10 = (int64_t)n->exp - n->frac_digits;
  if (!MW_JSONROW_FAST_PATH_OK || n->ovf || n->mant > (UINT64_C(1) << 53) || e10 < -22 || e10 > 22)
    return false;
  double d = (double)n->mant;
  d = e10 < 0 ? d / mw_jsonrow_pow10[-e10] : d * mw_jsonrow_pow10[e10];
  *out = n->neg ? -d : d;
  return true;
}

/* A float32 from the double fast path, rounded once. When d is the double
 * nearest the exact value x (Clinger's fast path above), (float)d is the
 * float nearest x unless d is exactly halfway between two floats: every
 * float and every midpoint between two floats (of the normal range) is a
 * double, and rounding to double is monotonic, so x and d lie on the same
 * side of every midpoint other than d itself (and when d is a float, x is
 * within half a double ulp of it, far from any midpoint). So: fast when d is
 * in the normal float range (or zero) and not a midpoint (the 29 low
 * mantissa bits a float drops are not exactly 1000...0); otherwise strtof.
 * This takes up to 16 significant digits (m <= 2^53) and |e| <= 22, where a
 * float-only fast path takes 7 digits (m <= 2^24) and |e| <= 10. */
static MW_ALWAYS_INLINE bool mw_jsonrow_double_to_float_once(double d, float *out) {
  uint64_t b;
  memcpy(&b, &d, 8);
  unsigned be = (unsigned)(b >> 52) & 0x7ff;
  if ((b << 1) == 0) { /* +-0 */
    *out = (float)d;
    return true;
  }
  /* float normals: 2^-126 <= |d| < 2^128, biased double exponents 897..1150 */
  if (be < 1023 - 126 || be > 1023 + 127) return false;
  if ((b & ((UINT64_C(1) << 29) - 1)) == (UINT64_C(1) << 28)) return false; /* a midpoint */
  float x = (float)d;
  if (isinf(x)) return false;
  *out = x;
  return true;
}

/* An integer of type t (width 1, 2, 4, 8; signed or not) as two's
 * complement bits in *bits (the caller stores the low `width` bytes).
 * -EDOM for a fraction or exponent, -ERANGE when it does not fit. Inline:
 * once per integer value. */
static MW_ALWAYS_INLINE int mw_jsonrow_num_int(const mw_jsonrow_num_t *n, mw_type_t t, uint64_t *bits) {
  assert(n != NULL);
  assert(bits != NULL);
  if (n->frac_exp) return -EDOM;
  const mw_type_info_t *ti = mw_type_info(t);
  unsigned bitsw = 8 * ti->width;
  assert(bitsw >= 8);
  assert(bitsw <= 64);
  uint64_t m = n->mant;
  uint64_t umax = bitsw == 64 ? UINT64_MAX : (UINT64_C(1) << bitsw) - 1;
  bool ok = !n->ovf;
  if (ti->order == MW_ORDER_SIGNED) ok = ok && m <= (n->neg ? umax / 2 + 1 : umax / 2);
  else ok = ok && m <= umax && (!n->neg || m == 0);
  if (!ok) return -ERANGE;
  *bits = n->neg ? 0 - m : m; /* two's complement; truncated by the caller */
  return 0;
}

/* The number off the fast paths, through strtod_l/strtof_l in c_locale
 * (a locale_t), its text copied NUL-terminated into scratch. 0, -ERANGE
 * (infinite), -ENOMEM. */
int mw_jsonrow_num_strtod(const mw_jsonrow_num_t *n, void *c_locale, mw_buf_t *scratch, double *out);
int mw_jsonrow_num_strtof(const mw_jsonrow_num_t *n, void *c_locale, mw_buf_t *scratch, float *out);
/* IEEE binary16 nearest to d (ties to even); false when it overflows. */
bool mw_jsonrow_f64_to_f16(double d, uint16_t *out);
/* A JSON-number-like integer filling the string s[0..n) into *num; false
 * when it is not one. */
bool mw_jsonrow_string_integer(const uint8_t *s, size_t n, mw_jsonrow_num_t *num);
/* Decimal text (JSON number syntax, or that inside a string) -> int128
 * scaled by 10^f->scale, exactly, within f->precision digits. NULL, or a
 * static reason. */
const char *mw_jsonrow_decimal(const uint8_t *s, size_t n, const mw_field_t *f, __int128 *out);

#endif
