/*
 * base64.h — base64 text to bytes, for binary columns given as JSON strings
 * (jsonrow.c).
 *
 * Owns: the decoder only (memwald never writes base64). Standard alphabet
 * (RFC 4648 §4), padded, canonical: the pad bits must be zero, so each byte
 * string has exactly one accepted text and a round trip through any encoder
 * gives the same bytes.
 *
 * Errors: not an errno: the position of the first bad character, so the
 * caller can name it in its message.
 */
#ifndef MW_NET_BASE64_H
#define MW_NET_BASE64_H

#include <stddef.h>
#include <stdint.h>

/* Decode s[0..n) into out (room for n / 4 * 3 bytes), its length in
 * *out_len. Returns 0, or the 1-based position of the first bad character,
 * or n + 1 when n is not a multiple of 4. out may be s's own buffer past s. */
size_t mw_base64_decode(const uint8_t *s, size_t n, uint8_t *out, size_t *out_len);

#endif
