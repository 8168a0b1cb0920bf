/*
 * sq.h — Lance's 8-bit scalar quantizer (lance-index sq.rs, ScalarQuantizer
 * with num_bits 8) as the MemWAL flush trains it: one pair of bounds for a
 * whole SSTable, the min and max over every item of every non-null vector,
 * and each item coded as (v - lo) * 255 / (hi - lo) truncated toward zero
 * and saturated to 0..255 (all 0 when lo == hi). Bounds are doubles (the
 * floats widened), as the `lance:sq` JSON stores them.
 *
 * Owns nothing; pure functions. No errors: callers pass valid sizes.
 */
#ifndef MW_LANCE_SQ_H
#define MW_LANCE_SQ_H

#include <stddef.h>
#include <stdint.h>

typedef struct mw_sq_bounds {
  double lo, hi; /* lo > hi when no value was seen */
} mw_sq_bounds_t;

void mw_sq_bounds_init(mw_sq_bounds_t *b);
/* Widen b over values[0 .. n). */
void mw_sq_bounds_update(mw_sq_bounds_t *b, const float *values, size_t n);
/* codes[i] for values[i], i < n. */
void mw_sq_encode(const mw_sq_bounds_t *b, const float *values, size_t n, uint8_t *codes);
/* The value a code stands for (the middle of its bucket is not what Lance
 * uses: it decodes to lo + code * (hi - lo) / 255). */
float mw_sq_decode(const mw_sq_bounds_t *b, uint8_t code);

#endif
