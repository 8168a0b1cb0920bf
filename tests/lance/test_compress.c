/*
 * test_compress.c — the two decompressors the data-file reader needs for
 * pages Lance's writer makes: LZ4 blocks (lance/lz4_block.h: dictionary
 * buffers under General{LZ4}) and FSST strings (lance/fsst.h).
 *
 * LZ4 goldens: two blocks LanceDB 0.39.0 wrote into an SSTable's dictionary
 * pages (tests/interop/make-encodings.mjs, 700 rows: the 5 int64 values of
 * `grp` and the 7 entries of `city`), decoded independently by a Python
 * decoder written from the format description when the test was made. A
 * second implementation in this file (a greedy compressor, from the format
 * description too) makes blocks with literal and match length extensions
 * and overlapping matches for inputs of every shape; they must decode to the
 * input. Malformed blocks: every truncation of a valid block, offsets 0 and
 * before the output, lengths past the output or the input, too short output.
 * FSST: hand-made symbol tables (the header as Lance's writer lays it out),
 * escapes, codes without a symbol, an escape at the end, a full output.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cases.h"

#include "lance/fsst.h"
#include "lance/lz4_block.h"

/* ------------------------------------------------------------------ LZ4 */

static int lz4(const uint8_t *blk, size_t n, uint8_t *out, size_t raw) { return mw_lz4_block_decode(blk, n, out, raw); }

static void test_lz4_literals(void **state) {
  (void)state;
  static const uint8_t blk[] = {0x50, 'h', 'e', 'l', 'l', 'o'};
  uint8_t out[5];
  assert_int_equal(lz4(blk, sizeof blk, out, 5), 0);
  assert_memory_equal(out, "hello", 5);
  /* an empty block is an empty output */
  assert_int_equal(lz4(NULL, 0, NULL, 0), 0);
  assert_int_equal(lz4(blk, 0, out, 5), -EBADMSG);
}

static void test_lz4_matches(void **state) {
  (void)state;
  /* "abc", then 9 bytes from 3 back (overlapping: abcabcabc), then "!" */
  static const uint8_t a[] = {0x35, 'a', 'b', 'c', 3, 0, 0x10, '!'};
  uint8_t out[64];
  assert_int_equal(lz4(a, sizeof a, out, 13), 0);
  assert_memory_equal(out, "abcabcabcabc!", 13);
  /* offset 1 repeats one byte: "x" + 11 x 'x' (match length 4 + 7) */
  static const uint8_t b[] = {0x17, 'x', 1, 0, 0x00};
  assert_int_equal(lz4(b, sizeof b, out, 12), 0);
  for (int i = 0; i < 12; i++) assert_int_equal(out[i], 'x');
}

static void test_lz4_extensions(void **state) {
  (void)state;
  /* 300 literals: nibble 15 + 255 + 30; then a match of 4 + 15 + 255 + 1 =
   * 275 bytes from 300 back; then 2 literals */
  uint8_t blk[400], out[600], want[600];
  size_t n = 0;
  blk[n++] = 0xFF;
  blk[n++] = 255;
  blk[n++] = 30;
  for (int i = 0; i < 300; i++) blk[n++] = want[i] = (uint8_t)(i * 7 + 1);
  blk[n++] = 300 & 0xFF;
  blk[n++] = 300 >> 8;
  blk[n++] = 255;
  blk[n++] = 1;
  for (int i = 0; i < 275; i++) want[300 + i] = want[i];
  blk[n++] = 0x20;
  blk[n++] = want[575] = 'y';
  blk[n++] = want[576] = 'z';
  assert_int_equal(lz4(blk, n, out, 577), 0);
  assert_memory_equal(out, want, 577);
  /* the same block with one byte too many or too few wanted */
  assert_int_equal(lz4(blk, n, out, 576), -EBADMSG);
  assert_int_equal(lz4(blk, n, out, 578), -EBADMSG);
}

/* Blocks LanceDB wrote (u32 LE raw length first, as in its buffers). */
static const uint8_t GOLD_GRP[] = {
    0x28, 0x00, 0x00, 0x00, 0xf2, 0x03, 0x03, 0x80, 0xc6, 0xa4, 0x7e, 0x8d, 0x03, 0x00, 0x00, 0x40, 0xa8,
    0x8c, 0x5a, 0x83, 0xfd, 0xff, 0x2a, 0x00, 0x01, 0x00, 0x11, 0x01, 0x07, 0x00, 0xa0, 0x20, 0x00, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
static const char GOLD_CITY_HEX[] =
    "4d000000662000000028000100f02e060000000a0000000f000000180000001c000000250000004265726c696e436f726b44"
    "616b61724564696e627572676846c3a873416d7374657264616d";

static size_t unhex(const char *h, uint8_t *out) {
  size_t n = strlen(h) / 2;
  for (size_t i = 0; i < n; i++) {
    unsigned v;
    assert_int_equal(sscanf(h + 2 * i, "%2x", &v), 1);
    out[i] = (uint8_t)v;
  }
  return n;
}

static uint32_t le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

static void test_lz4_lancedb_golden(void **state) {
  (void)state;
  uint8_t out[128];
  assert_int_equal(le32(GOLD_GRP), 40);
  assert_int_equal(lz4(GOLD_GRP + 4, sizeof GOLD_GRP - 4, out, 40), 0);
  static const int64_t grp[5] = {1000000000000003LL, -700000000000000LL, 42, 9007199254740993LL, -1};
  assert_memory_equal(out, grp, sizeof grp); /* little-endian host */
  uint8_t city[128];
  size_t n = unhex(GOLD_CITY_HEX, city);
  uint32_t raw = le32(city);
  assert_int_equal(raw, 77);
  assert_int_equal(lz4(city + 4, n - 4, out, raw), 0);
  /* Variable{Flat32}: u32 32, u32 40 (start of bytes), 8 offsets, bytes */
  assert_int_equal(le32(out), 32);
  assert_int_equal(le32(out + 4), 40);
  static const uint32_t offs[8] = {0, 0, 6, 10, 15, 24, 28, 37};
  for (int i = 0; i < 8; i++) assert_int_equal(le32(out + 8 + 4 * i), offs[i]);
  assert_memory_equal(out + 40, "BerlinCorkDakarEdinburghF\xc3\xa8sAmsterdam", 37);
}

/* A second implementation: greedy LZ4 block compression from the format
 * description (4-byte hash chain of one entry, the last 5 bytes literal, no
 * match starting in the last 12), enough to produce every kind of sequence. */
static void put_len(uint8_t *o, size_t *n, size_t v) {
  while (v >= 255) {
    o[(*n)++] = 255;
    v -= 255;
  }
  o[(*n)++] = (uint8_t)v;
}

static size_t lz4_compress_ref(const uint8_t *in, size_t len, uint8_t *o) {
  enum { HBITS = 12 };
  size_t *tab = calloc((size_t)1 << HBITS, sizeof *tab); /* position + 1 */
  size_t n = 0, anchor = 0, i = 0;
  while (len >= 13 && i + 12 < len) {
    uint32_t w;
    memcpy(&w, in + i, 4);
    uint32_t h = (w * 2654435761u) >> (32 - HBITS);
    size_t cand = tab[h];
    tab[h] = i + 1;
    if (cand == 0 || i - (cand - 1) > 65535 || memcmp(in + cand - 1, in + i, 4) != 0) {
      i++;
      continue;
    }
    size_t m = cand - 1, ml = 4;
    while (i + ml + 5 < len && in[m + ml] == in[i + ml]) ml++;
    size_t lit = i - anchor;
    uint8_t *tok = &o[n++];
    *tok = (uint8_t)((lit >= 15 ? 15 : lit) << 4 | (ml - 4 >= 15 ? 15 : ml - 4));
    if (lit >= 15) put_len(o, &n, lit - 15);
    memcpy(o + n, in + anchor, lit);
    n += lit;
    o[n++] = (uint8_t)((i - m) & 0xFF);
    o[n++] = (uint8_t)((i - m) >> 8);
    if (ml - 4 >= 15) put_len(o, &n, ml - 4 - 15);
    i += ml;
    anchor = i;
  }
  size_t lit = len - anchor;
  o[n++] = (uint8_t)((lit >= 15 ? 15 : lit) << 4);
  if (lit >= 15) put_len(o, &n, lit - 15);
  memcpy(o + n, in + anchor, lit);
  n += lit;
  free(tab);
  return n;
}

static void test_lz4_roundtrip(void **state) {
  (void)state;
  enum { MAX = 70000 };
  uint8_t *in = malloc(MAX), *blk = malloc(MAX + MAX / 255 + 64), *out = malloc(MAX);
  uint32_t seed = 12345;
  size_t sizes[] = {0, 1, 12, 13, 14, 100, 4096, 65536 + 100, MAX};
  for (int shape = 0; shape < 4; shape++) {
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
      size_t len = sizes[k];
      for (size_t i = 0; i < len; i++) {
        seed = seed * 1103515245u + 12345u;
        switch (shape) {
          case 0: in[i] = (uint8_t)(seed >> 24); break;              /* random: literals */
          case 1: in[i] = 'a'; break;                                /* one byte: long overlapping matches */
          case 2: in[i] = (uint8_t)"lance memwal "[i % 13]; break;   /* periodic */
          default: in[i] = (seed >> 28) < 3 ? (uint8_t)(seed >> 16) : (uint8_t)(i / 300); break; /* mixed */
        }
      }
      size_t n = lz4_compress_ref(in, len, blk);
      memset(out, 0xAA, MAX);
      assert_int_equal(lz4(blk, n, out, len), 0);
      assert_memory_equal(out, in, len);
      /* every truncation of a valid block fails (but the empty block is the
       * empty output); so does a short output */
      for (size_t cut = 0; len > 0 && cut < n; cut += n > 2000 ? n / 500 + 1 : 1)
        assert_int_equal(lz4(blk, cut, out, len), -EBADMSG);
      if (len) assert_int_equal(lz4(blk, n, out, len - 1), -EBADMSG);
    }
  }
  free(in);
  free(blk);
  free(out);
}

static void test_lz4_malformed(void **state) {
  (void)state;
  uint8_t out[64];
  /* offset 0 */
  static const uint8_t off0[] = {0x10, 'a', 0, 0, 0x00};
  assert_int_equal(lz4(off0, sizeof off0, out, 5), -EBADMSG);
  /* an offset before the start of the output */
  static const uint8_t before[] = {0x10, 'a', 2, 0, 0x00};
  assert_int_equal(lz4(before, sizeof before, out, 5), -EBADMSG);
  /* a match longer than the output */
  static const uint8_t longm[] = {0x1F, 'a', 1, 0, 200, 0x00};
  assert_int_equal(lz4(longm, sizeof longm, out, 64), -EBADMSG);
  /* literals longer than the output, or than the input */
  static const uint8_t longl[] = {0x50, 'a', 'b', 'c', 'd', 'e'};
  assert_int_equal(lz4(longl, sizeof longl, out, 4), -EBADMSG);
  assert_int_equal(lz4(longl, 4, out, 5), -EBADMSG);
  /* a length extension that runs off the end */
  static const uint8_t ext[] = {0xF0, 255, 255};
  assert_int_equal(lz4(ext, sizeof ext, out, 64), -EBADMSG);
  /* a match offset of one byte */
  static const uint8_t half[] = {0x10, 'a', 1};
  assert_int_equal(lz4(half, sizeof half, out, 5), -EBADMSG);
  /* a huge extension does not wrap around */
  uint8_t big[4 + 40];
  big[0] = 0xF0;
  memset(big + 1, 255, sizeof big - 2);
  big[sizeof big - 1] = 0;
  assert_int_equal(lz4(big, sizeof big, out, 64), -EBADMSG);
}

/* ----------------------------------------------------------------- FSST */

/* A table as Lance's writer exports it: header, n symbols, n lengths,
 * padded to 2312 bytes. */
static size_t fsst_table(uint8_t *t, bool on, unsigned n, const char *const *syms) {
  memset(t, 0, 2312);
  uint64_t hdr = (uint64_t)0x46535354 << 32 | (on ? 1u << 24 : 0) | n;
  for (int i = 0; i < 8; i++) t[i] = (uint8_t)(hdr >> (8 * i));
  for (unsigned i = 0; i < n; i++) {
    memcpy(t + 8 + 8 * i, syms[i], strlen(syms[i]));
    t[8 + 8 * n + i] = (uint8_t)strlen(syms[i]);
  }
  return 2312;
}

static void test_fsst_decode(void **state) {
  (void)state;
  static const char *const syms[] = {"memwal", "la", "nce", " ", "12345678"};
  uint8_t tb[2312];
  mw_fsst_table_t t;
  assert_int_equal(mw_fsst_table_parse(&t, tb, fsst_table(tb, true, 5, syms)), 0);
  assert_true(t.compressed);
  assert_int_equal(t.n_symbols, 5);
  /* "lance memwal!" = la nce ' ' memwal, escaped '!' */
  static const uint8_t s[] = {1, 2, 3, 0, 255, '!', 4};
  uint8_t out[64];
  size_t got;
  assert_int_equal(mw_fsst_decode(&t, s, sizeof s, out, sizeof out, &got), 0);
  assert_int_equal(got, 21);
  assert_memory_equal(out, "lance memwal!12345678", 21);
  /* empty string */
  assert_int_equal(mw_fsst_decode(&t, s, 0, out, sizeof out, &got), 0);
  assert_int_equal(got, 0);
  /* output one byte short; 8 x the input always suffices */
  assert_int_equal(mw_fsst_decode(&t, s, sizeof s, out, 20, &got), -ENOBUFS);
  assert_int_equal(mw_fsst_decode(&t, s + 6, 1, out, 7, &got), -ENOBUFS);
  assert_int_equal(mw_fsst_decode(&t, s + 6, 1, out, 8, &got), 0);
  /* a code without a symbol; an escape without its byte */
  static const uint8_t nosym[] = {1, 5};
  assert_int_equal(mw_fsst_decode(&t, nosym, sizeof nosym, out, sizeof out, &got), -EBADMSG);
  static const uint8_t esc[] = {1, 255};
  assert_int_equal(mw_fsst_decode(&t, esc, sizeof esc, out, sizeof out, &got), -EBADMSG);
}

static void test_fsst_off(void **state) {
  (void)state;
  /* a page under 32 KiB: table off, strings verbatim (LanceDB's small SSTables) */
  uint8_t tb[2312];
  mw_fsst_table_t t;
  assert_int_equal(mw_fsst_table_parse(&t, tb, fsst_table(tb, false, 0, NULL)), 0);
  assert_false(t.compressed);
  uint8_t out[16];
  size_t got;
  assert_int_equal(mw_fsst_decode(&t, (const uint8_t *)"\xff" "abc", 4, out, sizeof out, &got), 0);
  assert_int_equal(got, 4);
  assert_memory_equal(out, "\xff" "abc", 4);
  assert_int_equal(mw_fsst_decode(&t, (const uint8_t *)"abcd", 4, out, 3, &got), -ENOBUFS);
}

static void test_fsst_bad_tables(void **state) {
  (void)state;
  static const char *const syms[] = {"ab", "c"};
  uint8_t tb[2312];
  mw_fsst_table_t t;
  fsst_table(tb, true, 2, syms);
  assert_int_equal(mw_fsst_table_parse(&t, tb, 8 + 2 * 9), 0); /* exactly header + symbols + lengths */
  assert_int_equal(mw_fsst_table_parse(&t, tb, 8 + 2 * 9 - 1), -EBADMSG);
  assert_int_equal(mw_fsst_table_parse(&t, tb, 7), -EBADMSG);
  assert_int_equal(mw_fsst_table_parse(&t, NULL, 0), -EBADMSG);
  tb[7] ^= 1; /* magic */
  assert_int_equal(mw_fsst_table_parse(&t, tb, sizeof tb), -EBADMSG);
  tb[7] ^= 1;
  tb[8 + 16 + 1] = 0; /* a symbol of length 0 */
  assert_int_equal(mw_fsst_table_parse(&t, tb, sizeof tb), -EBADMSG);
  tb[8 + 16 + 1] = 9; /* longer than 8 */
  assert_int_equal(mw_fsst_table_parse(&t, tb, sizeof tb), -EBADMSG);
  /* 255 symbols fit (codes 0..254, 255 escapes) */
  fsst_table(tb, true, 0, NULL);
  tb[0] = 255;
  for (int i = 0; i < 255; i++) tb[8 + 8 * 255 + i] = 1;
  assert_int_equal(mw_fsst_table_parse(&t, tb, sizeof tb), 0);
  assert_int_equal(t.n_symbols, 255);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lz4_literals),      cmocka_unit_test(test_lz4_matches),
      cmocka_unit_test(test_lz4_extensions),    cmocka_unit_test(test_lz4_lancedb_golden),
      cmocka_unit_test(test_lz4_roundtrip),     cmocka_unit_test(test_lz4_malformed),
      cmocka_unit_test(test_fsst_decode),       cmocka_unit_test(test_fsst_off),
      cmocka_unit_test(test_fsst_bad_tables),
  };
  return tu_run_group(tests, NULL, NULL);
}
