/*
 * datafile_bitpack.c — FastLanes bit unpacking, as Lance's
 * InlineBitpacking and OutOfLineBitpacking encodings store integers
 * (lance-files.md §3.2).
 *
 * Design: values come in blocks of 1024 T-bit values (T = 8, 16, 32, 64)
 * packed at W bits each into W*1024/8 bytes: T-bit words in 1024/T lanes;
 * value (row, lane) sits at bit row*W of lane `lane`'s word stream, and
 * FastLanes' transposed order puts it at index
 *   order[row / 8] * 16 + (row % 8) * 128 + lane,  order = 0 4 2 6 1 5 3 7.
 * InlineBitpacking precedes each block with a T-bit width word (W may
 * change per block); OutOfLineBitpacking{T, Flat{W}} has one W for the
 * buffer and ends in a tail of < 1024 values either packed as one padded
 * block or stored raw, told apart by the buffer's length. Widths and
 * lengths come from the file: checked, -EBADMSG when wrong; the T of the
 * caller is asserted.
 *
 * Sample: InlineBitpacking{32} of the 1024 values 0, 1, 0, 1, ... (W = 1:
 * one 32-bit word per lane; lane L holds the indexes of L's parity):
 *   01 00 00 00 | 00 00 00 00 | ff ff ff ff | 00 00 00 00 | ff ff ff ff ...
 *   width 1       lane 0        lane 1        lane 2        (32 lanes)
 */
#include "lance/datafile_internal.h"

/* OutOfLineBitpacking{16, Flat{W}} def levels: whole 1024-value FastLanes
 * blocks of 64*W u16 words, then the tail either packed as one padded block
 * or stored raw (told apart by the buffer length). */
int mw_df_def_ool16(rctx_t *x, unsigned wbits, const uint8_t *p, size_t n, int64_t cnt,
                     uint16_t *lv) {
  assert(cnt >= 0);
  assert(lv != NULL);
  uint64_t vals[FASTLANES_BLOCK];
  if (wbits == 0 || wbits > 16) return BAD(x, "def bitpacking width %u", x->col, x->page, wbits);
  size_t wpc = 64 * (size_t)wbits, words = n / 2, full = (size_t)cnt / FASTLANES_BLOCK;
  size_t tail = (size_t)cnt % FASTLANES_BLOCK;
  bool raw = tail > 0 && words == full * wpc + tail;
  if (words < full * wpc + (tail ? (raw ? tail : wpc) : 0))
    return BAD(x, "def bitpacking buffer of %zu bytes for %lld levels", x->col, x->page, n, (long long)cnt);
  for (size_t b = 0; b < full + (tail && !raw); b++) {
    mw_df_fastlanes_unpack(p + 2 * b * wpc, 16, wbits, vals);
    size_t k = b < full ? FASTLANES_BLOCK : tail;
    for (size_t i = 0; i < k; i++) lv[b * FASTLANES_BLOCK + i] = (uint16_t)vals[i];
  }
  for (size_t i = 0; raw && i < tail; i++)
    lv[full * FASTLANES_BLOCK + i] = mw_load_u16le(p + 2 * (full * wpc + i));
  return 0;
}

/* FastLanes unpack of one 1024-value block of T-bit values packed at W bits. */
void mw_df_fastlanes_unpack(const uint8_t *src, unsigned t, unsigned wbits, uint64_t *out) {
  static const unsigned order[8] = {0, 4, 2, 6, 1, 5, 3, 7};
  assert(t == 8 || t == 16 || t == 32 || t == 64);
  assert(wbits <= t); /* checked against the file by every caller */
  unsigned lanes = FASTLANES_BLOCK / t, tb = t / 8;
  uint64_t mask = wbits == 64 ? ~0ull : ((1ull << wbits) - 1);
  for (unsigned lane = 0; lane < lanes; lane++) {
    for (unsigned row = 0; row < t; row++) {
      unsigned idx = order[row / 8] * 16 + (row % 8) * 128 + lane;
      uint64_t v = 0;
      if (wbits) {
        unsigned bit = row * wbits, word = bit / t, sh = bit % t;
        const uint8_t *wp = src + (size_t)(lanes * word + lane) * tb;
        uint64_t lo = tb == 8 ? mw_load_u64le(wp) : tb == 4 ? mw_load_u32le(wp) : tb == 2 ? mw_load_u16le(wp) : wp[0];
        v = lo >> sh;
        if (sh + wbits > t) {
          const uint8_t *np = src + (size_t)(lanes * (word + 1) + lane) * tb;
          uint64_t hi = tb == 8 ? mw_load_u64le(np) : tb == 4 ? mw_load_u32le(np) : tb == 2 ? mw_load_u16le(np) : np[0];
          v |= hi << (t - sh);
        }
        v &= mask;
      }
      out[idx] = v;
    }
  }
}

/* Load a tb-byte (1, 2, 4, 8) little-endian unsigned integer. */
uint64_t mw_df_load_uint(const uint8_t *p, size_t tb) {
  assert(tb == 1 || tb == 2 || tb == 4 || tb == 8);
  switch (tb) {
    case 1: return p[0];
    case 2: return mw_load_u16le(p);
    case 4: return mw_load_u32le(p);
    default: return mw_load_u64le(p);
  }
}

/* InlineBitpacking of T-bit values (T = 8, 16, 32, 64): per 1024 values a
 * T-bit width word, then the FastLanes block (lance-files.md §3.2). */
int mw_df_inline_bp(rctx_t *x, const uint8_t *p, size_t n, int64_t r, int64_t cnt, unsigned t) {
  uint64_t vals[FASTLANES_BLOCK];
  size_t tb = t / 8, at = 0;
  assert(tb == 1 || tb == 2 || tb == 4 || tb == 8);
  assert(r + cnt <= x->c->length); /* inside the pre-sized column */
  for (int64_t done = 0; done < cnt; done += FASTLANES_BLOCK) {
    if (n - at < tb) return BAD(x, "bitpacked chunk truncated at byte %zu", x->col, x->page, at);
    uint64_t wbits = mw_df_load_uint(p + at, tb);
    at += tb;
    if (wbits > t) return BAD(x, "bit width %llu > %u", x->col, x->page, (unsigned long long)wbits, t);
    size_t bytes = (size_t)wbits * FASTLANES_BLOCK / 8;
    if (n - at < bytes) return BAD(x, "bitpacked block truncated at byte %zu", x->col, x->page, at);
    mw_df_fastlanes_unpack(p + at, t, (unsigned)wbits, vals);
    at += bytes;
    int64_t k = cnt - done < FASTLANES_BLOCK ? cnt - done : FASTLANES_BLOCK;
    for (int64_t i = 0; i < k; i++) {
      uint8_t le[8];
      mw_store_u64le(le, vals[i]);
      memcpy(slot(x, r + done + i), le, tb);
    }
  }
  return 0;
}

/* OutOfLineBitpacking{T, Flat{W}} of a whole buffer of cnt T-bit values
 * (as Lance compresses blocks: dictionaries, def levels): whole 1024-value
 * FastLanes blocks of 128*W bytes, then the tail either packed as one
 * padded block or stored raw (T-bit values), told apart by the length.
 * Values go to dst, T/8 bytes each. */
int mw_df_ool_unpack(rctx_t *x, const uint8_t *p, size_t n, uint64_t cnt, unsigned t, uint64_t wbits, uint8_t *dst) {
  uint64_t vals[FASTLANES_BLOCK];
  size_t tb = t / 8;
  assert(tb == 1 || tb == 2 || tb == 4 || tb == 8);
  if (wbits == 0 || wbits > t) return BAD(x, "bitpacking width %llu of %u-bit values", x->col, x->page, (unsigned long long)wbits, t);
  uint64_t blk = 128 * wbits, full = cnt / FASTLANES_BLOCK, tail = cnt % FASTLANES_BLOCK;
  bool raw = tail > 0 && n == full * blk + tail * tb;
  if (n < full * blk + (tail ? (raw ? tail * tb : blk) : 0))
    return BAD(x, "bitpacked buffer of %zu bytes for %llu values", x->col, x->page, n, (unsigned long long)cnt);
  for (uint64_t b = 0; b < full + (tail && !raw); b++) {
    mw_df_fastlanes_unpack(p + b * blk, t, (unsigned)wbits, vals);
    uint64_t k = b < full ? FASTLANES_BLOCK : tail;
    for (uint64_t i = 0; i < k; i++) {
      uint8_t le[8];
      mw_store_u64le(le, vals[i]);
      memcpy(dst + (b * FASTLANES_BLOCK + i) * tb, le, tb);
    }
  }
  if (raw) memcpy(dst + full * FASTLANES_BLOCK * tb, p + full * blk, tail * tb);
  return 0;
}

