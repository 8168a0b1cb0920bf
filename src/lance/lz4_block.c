/* lz4_block.c — see lz4_block.h. */
#include "lance/lz4_block.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

#define MIN_MATCH 4

/* A length nibble of 15 continues in bytes of 255 until a smaller one. */
static int ext_len(const uint8_t *src, size_t n, size_t *ip, size_t *len) {
  for (;;) {
    if (*ip >= n) return -EBADMSG;
    uint8_t b = src[(*ip)++];
    if (*len > SIZE_MAX - b) return -EBADMSG;
    *len += b;
    if (b != 255) return 0;
  }
}

int mw_lz4_block_decode(const uint8_t *src, size_t n, uint8_t *out, size_t raw) {
  assert(src != NULL || n == 0);
  assert(out != NULL || raw == 0);
  size_t ip = 0, op = 0;
  while (ip < n) {
    uint8_t token = src[ip++];
    size_t lit = token >> 4;
    if (lit == 15 && ext_len(src, n, &ip, &lit) < 0) return -EBADMSG;
    if (lit > n - ip || lit > raw - op) return -EBADMSG;
    memcpy(out + op, src + ip, lit);
    ip += lit, op += lit;
    if (ip == n) break; /* the last sequence: literals only */
    if (n - ip < 2) return -EBADMSG;
    size_t off = (size_t)src[ip] | (size_t)src[ip + 1] << 8;
    ip += 2;
    if (off == 0 || off > op) return -EBADMSG;
    size_t mlen = token & 15;
    if (mlen == 15 && ext_len(src, n, &ip, &mlen) < 0) return -EBADMSG;
    if (mlen > SIZE_MAX - MIN_MATCH) return -EBADMSG;
    mlen += MIN_MATCH;
    if (mlen > raw - op) return -EBADMSG;
    for (size_t i = 0; i < mlen; i++, op++) out[op] = out[op - off]; /* may overlap */
  }
  assert(op <= raw);
  return op == raw ? 0 : -EBADMSG;
}
