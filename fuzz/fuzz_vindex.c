/*
 * fuzz_vindex.c — libFuzzer target for the per-SSTable vector index decoders
 * (src/lance/vindex_check.c over the data-file reader's FullZip lists,
 * src/lance/fullzip.c) and the HNSW builder on hostile floats.
 * Input kinds, by their first 4 bytes:
 *   "FZIP" u8 bits_rep, u8 bits_def, u8 value_bytes, u8 max_visible_def,
 *          u16 LE items, u16 LE visible, u16 LE rows, then buffer 0 — one
 *          FullZip page body (fullzip.h), no repetition index check;
 *   "HNSW" u8 n (1..64), u8 dim (1..16), u8 distance, u8 m, then floats
 *          (NaN, inf and denormals included): build, search every vector,
 *          write both index files and check them, and their rows against
 *          the vectors (mw_vindex_check_rows; must pass);
 *   anything else: u32 LE length L, index.idx = the next L bytes,
 *          auxiliary.idx = the rest: mw_vindex_check must return an error
 *          or a consistent info, never crash, leak or allocate unboundedly.
 * Seeds: fuzz/corpus/vindex/ (LanceDB's four fixture pairs from
 * tests/lance/data/vindex and one pair of ours, framed as above; FZIP and
 * HNSW inputs).
 */
#include <stddef.h>
#include <stdint.h>

#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "lance/fullzip.h"
#include "lance/hnsw.h"
#include "lance/vindex_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

static void fzip(const uint8_t *d, size_t n) {
  if (n < 14) return;
  mw_fullzip_shape_t s = {.bits_rep = d[4] % 20, .bits_def = d[5] % 20, .value_bytes = d[6],
                          .max_visible_def = d[7], .num_items = mw_load_u16le(d + 8),
                          .num_visible_items = mw_load_u16le(d + 10), .rows = mw_load_u16le(d + 12)};
  uint16_t *rep = malloc(2 * (s.num_items + 1)), *def = malloc(2 * (s.num_items + 1));
  mw_buf_t vals = MW_BUF_INIT;
  if (rep && def && mw_fullzip_unzip(&s, d + 14, n - 14, NULL, 0, rep, def, &vals, NULL) == 0 &&
      vals.len != s.num_visible_items * s.value_bytes)
    abort();
  mw_buf_free(&vals);
  free(rep);
  free(def);
}

static void hnsw(const uint8_t *d, size_t n) {
  if (n < 8) return;
  uint32_t cnt = d[4] % 64 + 1, dim = d[5] % 16 + 1;
  mw_vindex_input_t in = {.rows = cnt, .dim = dim, .dist = (mw_distance_t)(d[6] % 3)};
  in.hnsw.m = d[7] % 8 + 2, in.hnsw.ef_construction = 16;
  float *v = calloc((size_t)cnt * dim, sizeof *v);
  if (v == NULL) return;
  memcpy(v, d + 8, (n - 8) < (size_t)cnt * dim * 4 ? n - 8 : (size_t)cnt * dim * 4);
  in.vecs = v;
  mw_vindex_t x;
  mw_vindex_info_t info;
  if (mw_vindex_build(&in, &x, NULL) == 0) {
    if (mw_vindex_check(x.index_idx.data, x.index_idx.len, x.aux_idx.data, x.aux_idx.len, &info, NULL) != 0) abort();
    if (mw_vindex_check_rows(&info, &in, NULL) != 0) abort(); /* every finite vector named once */
    mw_vindex_info_free(&info);
    mw_vindex_free(&x);
  }
  free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  if (n >= 4 && memcmp(d, "FZIP", 4) == 0) {
    fzip(d, n);
    return 0;
  }
  if (n >= 4 && memcmp(d, "HNSW", 4) == 0) {
    hnsw(d, n);
    return 0;
  }
  if (n < 4) return 0;
  uint32_t l = mw_load_u32le(d);
  if (l > n - 4) return 0;
  mw_vindex_info_t info;
  if (mw_vindex_check(d + 4, l, d + 4 + l, n - 4 - l, &info, NULL) == 0) {
    if (info.level_offsets[1] != info.nodes || info.entry_point >= info.nodes) abort();
    for (uint32_t i = 1; i < info.nodes; i++)
      if (info.row_ids[i] <= info.row_ids[i - 1]) abort();
  }
  mw_vindex_info_free(&info);
  return 0;
}
