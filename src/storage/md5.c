/*
 * md5.c — MD5 as RFC 1321 defines it: 64-byte blocks, four rounds of 16
 * steps over a 4-word state, the message padded with 0x80, zeros and its
 * bit length (little endian). Only S3's Content-MD5 uses it.
 */
#include "storage/md5.h"

#include <assert.h>
#include <string.h>

/* Per-step left rotations, by round. */
static const uint8_t rot[4][4] = {{7, 12, 17, 22}, {5, 9, 14, 20}, {4, 11, 16, 23}, {6, 10, 15, 21}};

/* K[i] = floor(abs(sin(i + 1)) * 2^32) (RFC 1321, section 3.4). */
static const uint32_t K[64] = {
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391};

static uint32_t rotl(uint32_t x, unsigned n) { return (x << n) | (x >> (32 - n)); }

static void block(uint32_t h[4], const uint8_t *p) {
  assert(h != NULL);
  assert(p != NULL);
  uint32_t m[16];
  for (unsigned i = 0; i < 16; i++)
    m[i] = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
           (uint32_t)p[4 * i + 3] << 24;
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3];
  for (unsigned i = 0; i < 64; i++) {
    uint32_t f;
    unsigned g;
    switch (i / 16) {
      case 0: f = (b & c) | (~b & d); g = i; break;
      case 1: f = (d & b) | (~d & c); g = (5 * i + 1) % 16; break;
      case 2: f = b ^ c ^ d; g = (3 * i + 5) % 16; break;
      default: f = c ^ (b | ~d); g = (7 * i) % 16; break;
    }
    uint32_t t = d;
    d = c;
    c = b;
    b = b + rotl(a + f + K[i] + m[g], rot[i / 16][i % 4]);
    a = t;
  }
  h[0] += a;
  h[1] += b;
  h[2] += c;
  h[3] += d;
}

void mw_md5(const void *data, size_t len, uint8_t out[MW_MD5_BYTES]) {
  assert(data != NULL || len == 0);
  assert(out != NULL);
  uint32_t h[4] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476};
  const uint8_t *p = data;
  size_t left = len;
  for (; left >= 64; p += 64, left -= 64) block(h, p);
  uint8_t tail[128] = {0};
  if (left > 0) memcpy(tail, p, left);
  tail[left] = 0x80;
  size_t tlen = left < 56 ? 64 : 128;
  uint64_t bits = (uint64_t)len * 8;
  for (unsigned i = 0; i < 8; i++) tail[tlen - 8 + i] = (uint8_t)(bits >> (8 * i));
  block(h, tail);
  if (tlen == 128) block(h, tail + 64);
  for (unsigned i = 0; i < 4; i++)
    for (unsigned j = 0; j < 4; j++) out[4 * i + j] = (uint8_t)(h[i] >> (8 * j));
}

void mw_md5_base64(const void *data, size_t len, char out[MW_MD5_B64_BYTES]) {
  static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  uint8_t d[MW_MD5_BYTES + 2] = {0};
  mw_md5(data, len, d);
  size_t o = 0;
  for (size_t i = 0; i < MW_MD5_BYTES; i += 3) {
    uint32_t v = (uint32_t)d[i] << 16 | (uint32_t)d[i + 1] << 8 | d[i + 2];
    out[o++] = b64[v >> 18 & 63];
    out[o++] = b64[v >> 12 & 63];
    out[o++] = i + 1 < MW_MD5_BYTES ? b64[v >> 6 & 63] : '=';
    out[o++] = i + 2 < MW_MD5_BYTES ? b64[v & 63] : '=';
  }
  assert(o == MW_MD5_B64_BYTES - 1);
  out[o] = '\0';
}
