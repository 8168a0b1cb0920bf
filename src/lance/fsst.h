/*
 * fsst.h — FSST (Fast Static Symbol Table) string decompression, decode
 * only, in the form Lance's writer stores it (lance-files.md §3.4; Lance
 * dictionary-free string pages under Fsst{symbol_table, values}).
 *
 * Owns nothing: pure functions over caller buffers. Our own (no Debian
 * package has it) and small: a compressed string is a run of one-byte
 * codes, each standing for a symbol of 1..8 bytes, except code 255, which
 * escapes the next byte as itself.
 *
 * The symbol table one page carries (2312 bytes as Lance writes it):
 *   u64 LE header   bits 63..32 "FSST" (0x46535354), bit 24 = compressed
 *                   (off: the strings are stored as they are), bits 7..0 =
 *                   number of symbols n (0..255)
 *   n x u64 LE      the symbols, first byte lowest
 *   n x u8          their lengths, 1..8
 *   zero padding
 * e.g. a page too small to be worth compressing:
 *   00 00 00 00 54 53 53 46 | 00 ... (n = 0, compressed off)
 *
 * Errors: -EBADMSG for a malformed table or string (a code without a
 * symbol, an escape at the end), -ENOBUFS when the output does not fit.
 */
#ifndef MW_LANCE_FSST_H
#define MW_LANCE_FSST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MW_FSST_MAX_SYMBOLS 255
#define MW_FSST_MAX_SYMBOL_BYTES 8
#define MW_FSST_ESCAPE 255

typedef struct mw_fsst_table {
  bool compressed;                /* false: strings are stored verbatim */
  unsigned n_symbols;             /* codes 0..n_symbols-1 are symbols */
  uint8_t len[MW_FSST_MAX_SYMBOLS];
  uint8_t sym[MW_FSST_MAX_SYMBOLS][MW_FSST_MAX_SYMBOL_BYTES];
} mw_fsst_table_t;

/* Parse a symbol table (p, n): 0 or -EBADMSG. */
int mw_fsst_table_parse(mw_fsst_table_t *t, const uint8_t *p, size_t n);

/* Decode one compressed string src[0..n) into out[0..cap): 0 with
 * *out_len set, -EBADMSG for a bad code, -ENOBUFS when cap is too small
 * (cap >= 8 * n always suffices). */
int mw_fsst_decode(const mw_fsst_table_t *t, const uint8_t *src, size_t n, uint8_t *out, size_t cap,
                   size_t *out_len);

#endif
