/*
 * base64.c — the base64 decoder of binary JSON values (see base64.h).
 *
 * Four characters make three bytes; only the last quad may end in one or
 * two '=' and its dropped bits must be zero (canonical). A table-free
 * character map: the alphabet is five runs, cheaper to test than to load.
 */
#include "net/base64.h"

#include <assert.h>

static int b64val(uint8_t ch) {
  if (ch >= 'A' && ch <= 'Z') return ch - 'A';
  if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
  if (ch >= '0' && ch <= '9') return ch - '0' + 52;
  if (ch == '+') return 62;
  if (ch == '/') return 63;
  return -1;
}

size_t mw_base64_decode(const uint8_t *s, size_t n, uint8_t *out, size_t *out_len) {
  assert(s != NULL || n == 0);
  assert(out_len != NULL);
  if (n % 4) return n + 1;
  size_t o = 0;
  for (size_t i = 0; i < n; i += 4) {
    int v[4], pad = 0;
    for (int k = 0; k < 4; k++) {
      if (s[i + k] == '=' && i + 4 == n && k >= 2 && (k == 3 || s[i + 3] == '=')) {
        v[k] = 0;
        pad++;
        continue;
      }
      v[k] = b64val(s[i + k]);
      if (v[k] < 0 || pad) return i + (size_t)k + 1;
    }
    uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
    if ((pad == 1 && (w & 0xFF)) || (pad == 2 && (w & 0xFFFF))) return i + 4 - (size_t)pad;
    out[o++] = (uint8_t)(w >> 16);
    if (pad < 2) out[o++] = (uint8_t)(w >> 8);
    if (pad < 1) out[o++] = (uint8_t)w;
  }
  assert(o <= n / 4 * 3); /* the room the caller planned */
  *out_len = o;
  return 0;
}
