/*
 * fuzz_datafile.c — libFuzzer target for the Lance data-file reader
 * (src/lance/datafile_read*.c): open, list global buffers, describe every
 * column's pages (datafile_info.c, the inspector's view), decode every column.
 * Any input must give an error or a valid batch, never a crash, a leak or
 * an unbounded allocation (row and column-byte limits are set low here).
 * A file that reads is written again by our writer (which may refuse what
 * it does not write, e.g. null items inside vectors) and must read back
 * with the same rows and schema: the round trip covers the nested writer.
 * Inputs that begin with "LZ4B" or "FSST" go straight to the decompressors
 * the reader uses (lance/lz4_block.h, lance/fsst.h): an LZ4 block (u32 LE
 * raw length first), or a symbol table (u16 LE length first) and a string.
 * Their output must stay inside its bounds and, for LZ4, be exactly the raw
 * length asked for.
 * Seeds: fuzz/corpus/datafile/ (small Lance-written files from the vectors:
 * a 2.2 SSTable, 2.0 _pk_index files; an SSTable LanceDB wrote with
 * dictionary pages (LZ4 blocks) and constant value buffers; files from our
 * own writer with nulls, zstd and extra global buffers; lz4-* and fsst-*
 * inputs for the decompressors).
 */
#include <stddef.h>
#include <stdint.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lance/datafile.h"
#include "common/buf.h"
#include "lance/datafile_info.h"
#include "lance/fsst.h"
#include "lance/lz4_block.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

#define RAW_MAX (1u << 20)

static void lz4_one(const uint8_t *d, size_t n) {
  if (n < 4) return;
  uint32_t raw = mw_load_u32le(d) % RAW_MAX;
  uint8_t *out = malloc(raw + 1);
  if (out == NULL) return;
  out[raw] = 0x5A; /* a guard byte just past the output */
  (void)mw_lz4_block_decode(d + 4, n - 4, out, raw);
  if (out[raw] != 0x5A) __builtin_trap();
  free(out);
}

static void fsst_one(const uint8_t *d, size_t n) {
  if (n < 2) return;
  size_t tl = mw_load_u16le(d);
  if (tl > n - 2) return;
  mw_fsst_table_t t;
  if (mw_fsst_table_parse(&t, d + 2, tl) != 0) return;
  const uint8_t *s = d + 2 + tl;
  size_t sn = n - 2 - tl, cap = sn * MW_FSST_MAX_SYMBOL_BYTES, got;
  uint8_t *out = malloc(cap + 1);
  if (out == NULL) return;
  out[cap] = 0x5A;
  int rc = mw_fsst_decode(&t, s, sn, out, cap, &got);
  if (rc == -ENOBUFS || (rc == 0 && got > cap) || out[cap] != 0x5A) __builtin_trap(); /* 8 x always fits */
  free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  if (n >= 4 && memcmp(d, "LZ4B", 4) == 0) {
    lz4_one(d + 4, n - 4);
    return 0;
  }
  if (n >= 4 && memcmp(d, "FSST", 4) == 0) {
    fsst_one(d + 4, n - 4);
    return 0;
  }
  mw_datafile_t f;
  mw_datafile_read_opts_t o = {.max_rows = 1 << 16, .max_column_bytes = 32 << 20};
  if (mw_datafile_open(&f, d, n, &o, NULL) != 0) return 0;
  for (uint32_t i = 0; i < f.n_global_buffers; i++) {
    const uint8_t *p;
    size_t len;
    (void)mw_datafile_global_buffer(&f, i, &p, &len, NULL);
  }
  for (uint32_t c = 0; c < f.n_columns; c++) {
    mw_page_info_t *pages = NULL;
    size_t np = 0;
    if (mw_datafile_column_info(&f, c, &pages, &np, NULL) == 0) {
      for (size_t k = 0; k < np; k++)
        for (size_t b = 0; b < pages[k].n_buffers; b++)
          if (pages[k].buf_offset[b] > n || pages[k].buf_size[b] > n - pages[k].buf_offset[b]) __builtin_trap();
      free(pages);
    }
  }
  mw_batch_t b;
  if (mw_datafile_read_batch(&f, &b, NULL) == 0) {
    if (mw_batch_validate(&b) != 0) __builtin_trap();
    mw_buf_t out = MW_BUF_INIT;
    const mw_batch_t *bp = &b;
    if (mw_datafile_write(&f.schema, &bp, 1, NULL, 0, NULL, &out, NULL) == 0) {
      mw_datafile_t g;
      mw_batch_t c;
      if (mw_datafile_open(&g, out.data, out.len, &o, NULL) != 0) __builtin_trap();
      if (mw_datafile_read_batch(&g, &c, NULL) != 0) __builtin_trap();
      if (c.n_rows != b.n_rows || !mw_schema_equal(&g.schema, &f.schema)) __builtin_trap();
      mw_batch_free(&c);
      mw_datafile_close(&g);
    }
    mw_buf_free(&out);
    mw_batch_free(&b);
  }
  mw_datafile_close(&f);
  return 0;
}
