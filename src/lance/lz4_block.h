/*
 * lz4_block.h — the LZ4 *block* format, decode only (Lance's General{LZ4}
 * buffers: `u32 LE raw length || LZ4 block`, lance-files.md §3.4).
 *
 * Owns nothing: a pure function over caller buffers. Why our own and not
 * liblz4: the reader needs one bounded decode of blocks Lance's writer makes
 * (dictionary buffers of LanceDB's SSTables); the format is a dozen lines
 * and a new library for every build would cost more than it saves. Nothing
 * here compresses.
 *
 * The block is a run of sequences, each
 *   token (hi nibble: literal length, lo nibble: match length - 4)
 *   [255...255 n]  literal length extension when the nibble is 15
 *   literals
 *   u16 LE offset (1..bytes produced so far) + match length extension
 * and the last sequence is literals only. A match copies from `offset`
 * bytes back in the output, overlapping when offset < length.
 *
 * Errors: -EBADMSG for a block that is truncated, refers before the start
 * of the output, or does not produce exactly `raw` bytes.
 */
#ifndef MW_LANCE_LZ4_BLOCK_H
#define MW_LANCE_LZ4_BLOCK_H

#include <stddef.h>
#include <stdint.h>

/* Decode the block src[0..n) into out[0..raw): 0 when it produces exactly
 * raw bytes, else -EBADMSG (out's contents are then unspecified). */
int mw_lz4_block_decode(const uint8_t *src, size_t n, uint8_t *out, size_t raw);

#endif
