/*
 * fuzz_datafile.c — libFuzzer target for the Lance data-file reader
 * (src/lance/datafile.c): open, list global buffers, decode every column.
 * Any input must give an error or a valid batch, never a crash, a leak or
 * an unbounded allocation (row and column-byte limits are set low here).
 * Seeds: fuzz/corpus/datafile/ (small Lance-written files from the vectors:
 * a 2.2 SSTable, 2.0 _pk_index files; and files from our own writer with
 * nulls, zstd and extra global buffers).
 */
#include <stddef.h>
#include <stdint.h>

#include "lance/datafile.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  mw_datafile_t f;
  mw_datafile_read_opts_t o = {.max_rows = 1 << 16, .max_column_bytes = 32 << 20};
  if (mw_datafile_open(&f, d, n, &o, NULL) != 0) return 0;
  for (uint32_t i = 0; i < f.n_global_buffers; i++) {
    const uint8_t *p;
    size_t len;
    (void)mw_datafile_global_buffer(&f, i, &p, &len, NULL);
  }
  mw_batch_t b;
  if (mw_datafile_read_batch(&f, &b, NULL) == 0) {
    if (mw_batch_validate(&b) != 0) __builtin_trap();
    mw_batch_free(&b);
  }
  mw_datafile_close(&f);
  return 0;
}
