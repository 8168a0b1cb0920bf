/* fsst.c — see fsst.h. */
#include "lance/fsst.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

#include "common/buf.h"

#define FSST_MAGIC 0x46535354u /* "FSST", the header's high 32 bits */
#define FSST_ON_BIT (1u << 24)

_Static_assert(MW_FSST_MAX_SYMBOLS == MW_FSST_ESCAPE, "every code below the escape may be a symbol");

int mw_fsst_table_parse(mw_fsst_table_t *t, const uint8_t *p, size_t n) {
  assert(t != NULL);
  memset(t, 0, sizeof *t);
  if (p == NULL || n < 8) return -EBADMSG;
  uint64_t hdr = mw_load_u64le(p);
  if ((uint32_t)(hdr >> 32) != FSST_MAGIC) return -EBADMSG;
  t->compressed = (hdr & FSST_ON_BIT) != 0;
  t->n_symbols = (unsigned)(hdr & 0xFF);
  if (t->n_symbols > MW_FSST_MAX_SYMBOLS) return -EBADMSG;
  if (n - 8 < (size_t)t->n_symbols * 9) return -EBADMSG;
  const uint8_t *lens = p + 8 + (size_t)t->n_symbols * 8;
  for (unsigned i = 0; i < t->n_symbols; i++) {
    if (lens[i] < 1 || lens[i] > MW_FSST_MAX_SYMBOL_BYTES) return -EBADMSG;
    t->len[i] = lens[i];
    memcpy(t->sym[i], p + 8 + (size_t)i * 8, MW_FSST_MAX_SYMBOL_BYTES);
  }
  assert(t->n_symbols <= MW_FSST_MAX_SYMBOLS);
  return 0;
}

int mw_fsst_decode(const mw_fsst_table_t *t, const uint8_t *src, size_t n, uint8_t *out, size_t cap,
                   size_t *out_len) {
  assert(t != NULL);
  assert(src != NULL || n == 0);
  *out_len = 0;
  if (!t->compressed) {
    if (n > cap) return -ENOBUFS;
    if (n) memcpy(out, src, n);
    *out_len = n;
    return 0;
  }
  size_t op = 0;
  for (size_t ip = 0; ip < n; ip++) {
    uint8_t c = src[ip];
    if (c == MW_FSST_ESCAPE) {
      if (++ip == n) return -EBADMSG; /* an escape needs its byte */
      if (op == cap) return -ENOBUFS;
      out[op++] = src[ip];
      continue;
    }
    if (c >= t->n_symbols) return -EBADMSG;
    size_t l = t->len[c];
    if (l > cap - op) return -ENOBUFS;
    memcpy(out + op, t->sym[c], l);
    op += l;
  }
  assert(op <= cap);
  *out_len = op;
  return 0;
}
