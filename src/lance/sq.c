/*
 * sq.c — the 8-bit scalar quantizer (sq.h). Truncation, not rounding: Rust's
 * `as u8` on the scaled f64, which saturates (negative and NaN -> 0, past
 * 255 -> 255); checked byte for byte against auxiliary.idx files LanceDB
 * 0.39.0 wrote (tests/lance/data/vindex).
 */
#include "lance/sq.h"

#include <assert.h>
#include <float.h>
#include <math.h>

void mw_sq_bounds_init(mw_sq_bounds_t *b) {
  assert(b != NULL);
  b->lo = DBL_MAX;
  b->hi = -DBL_MAX;
}

void mw_sq_bounds_update(mw_sq_bounds_t *b, const float *values, size_t n) {
  assert(b != NULL);
  assert(values != NULL || n == 0);
  for (size_t i = 0; i < n; i++) {
    double v = values[i];
    if (v < b->lo) b->lo = v; /* NaN compares false both ways: skipped, as f64::min does */
    if (v > b->hi) b->hi = v;
  }
}

static uint8_t saturate(double v) {
  if (!(v > 0)) return 0; /* also NaN */
  if (v >= 255) return 255;
  return (uint8_t)v;
}

void mw_sq_encode(const mw_sq_bounds_t *b, const float *values, size_t n, uint8_t *codes) {
  assert(b != NULL);
  assert(codes != NULL);
  assert(values != NULL || n == 0);
  double range = b->hi - b->lo;
  for (size_t i = 0; i < n; i++)
    codes[i] = b->lo == b->hi ? 0 : saturate(((double)values[i] - b->lo) * 255.0 / range);
}

float mw_sq_decode(const mw_sq_bounds_t *b, uint8_t code) {
  assert(b != NULL);
  return (float)(b->lo + (double)code * (b->hi - b->lo) / 255.0);
}
