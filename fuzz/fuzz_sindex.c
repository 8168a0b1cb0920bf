/*
 * fuzz_sindex.c — libFuzzer target for the per-SSTable BTree index decoder
 * (src/lance/sindex.c's mw_sindex_check over the data-file reader) and its
 * builder.
 * Input kinds, by their first 4 bytes:
 *   "BLDI" then int64 LE values, a value whose low byte is 0x80 a null:
 *          build the BTree of that column (int64), which must pass the
 *          check against the column;
 *   "BLDS" then strings split at 0x00, a 0xff byte a null: the same with
 *          a utf8-typed binary column;
 *   anything else: u32 LE length L, page_data.lance = the next L bytes,
 *          page_lookup.lance = the rest: mw_sindex_check must return an
 *          error or consistent facts, never crash, leak or allocate
 *          unboundedly.
 * Seeds: fuzz/corpus/sindex/ (LanceDB's num_idx and name_idx pairs from
 * tests/lance/data/sindex, framed as above, and build inputs).
 */
#include <stddef.h>
#include <stdint.h>

#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "lance/sindex.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

static void build_check(mw_schema_t *s, mw_batch_t *b) {
  mw_buf_t pd = MW_BUF_INIT, pl = MW_BUF_INIT;
  mw_sindex_info_t info;
  if (mw_sindex_build(&s->fields[0], &b->cols[0], &pd, &pl, NULL) == 0 &&
      (mw_sindex_check(pd.data, pd.len, pl.data, pl.len, &s->fields[0], &b->cols[0], &info, NULL) != 0 ||
       info.entries != (uint64_t)b->n_rows))
    abort();
  mw_buf_free(&pd);
  mw_buf_free(&pl);
}

static void build(const uint8_t *d, size_t n, bool strings) {
  mw_schema_t s;
  mw_batch_t b;
  mw_schema_init(&s);
  if (mw_schema_add(&s, "v", strings ? MW_T_BINARY : MW_T_INT64, true) < 0 || mw_batch_init(&b, &s) < 0) {
    mw_schema_free(&s);
    return;
  }
  int rc = 0;
  if (strings) {
    for (size_t at = 4; at < n && rc == 0; b.n_rows++) {
      const uint8_t *z = memchr(d + at, 0, n - at);
      size_t len = z ? (size_t)(z - (d + at)) : n - at;
      rc = len == 1 && d[at] == 0xff ? mw_column_append_null(&b.cols[0], &s.fields[0])
                                     : mw_column_append_bytes(&b.cols[0], d + at, len);
      at += len + 1;
    }
  } else {
    for (size_t at = 4; at + 8 <= n && rc == 0; at += 8, b.n_rows++)
      rc = d[at] == 0x80 ? mw_column_append_null(&b.cols[0], &s.fields[0])
                         : mw_column_append_fixed(&b.cols[0], d + at, 8);
  }
  if (rc == 0) build_check(&s, &b);
  mw_batch_free(&b);
  mw_schema_free(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  if (n >= 4 && memcmp(d, "BLDI", 4) == 0) {
    build(d, n, false);
    return 0;
  }
  if (n >= 4 && memcmp(d, "BLDS", 4) == 0) {
    build(d, n, true);
    return 0;
  }
  if (n < 4) return 0;
  uint32_t l = (uint32_t)d[0] | (uint32_t)d[1] << 8 | (uint32_t)d[2] << 16 | (uint32_t)d[3] << 24;
  if (l > n - 4) return 0;
  mw_sindex_info_t info;
  if (mw_sindex_check(d + 4, l, d + 4 + l, n - 4 - l, NULL, NULL, &info, NULL) == 0 &&
      (info.page_rows == 0 || info.pages != (info.entries + info.page_rows - 1) / info.page_rows ||
       info.nulls > info.entries))
    abort();
  return 0;
}
