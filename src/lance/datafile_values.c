/*
 * datafile_values.c — the compressive encodings inside a MiniBlock chunk
 * (reader): its def levels and its values (lance-files.md §3.2).
 *
 * Design: a chunk's value buffers are decoded by the value compression
 * the page names, one function per encoding (mbv_*), after any General
 * wrapper is taken off (datafile_compress.c):
 *   Flat{8w | 1}            fixed-width values or bools as they are
 *   InlineBitpacking{8w}    FastLanes blocks (datafile_bitpack.c)
 *   Variable{Flat{32|64}}   (n+1) offsets from the buffer start, the bytes
 *   FixedSizeList{Flat}     vectors, [item validity bits in buffer 0]
 *   Rle{Flat{8w}, Flat{8}}  run values in buffer 0, run lengths in 1
 *   Fsst{table, Variable}   strings, each decompressed after
 * Def levels (mw_df_def_decode) are raw u16 (Flat{16}), RLE, or bit-packed
 * (Inline or OutOfLine). Values land in rows [r, r + cnt) of the page
 * context's column; each decoder checks the buffer holds them before it
 * copies (-EBADMSG otherwise) and reads no byte past it.
 *
 * Sample: Variable{offsets Flat{32}} of "ab", "", "c" (offsets count from
 * the buffer's start, past the 16 bytes of offsets):
 *   10 00 00 00 | 12 00 00 00 | 12 00 00 00 | 13 00 00 00 | 61 62 63
 */
#include "lance/datafile_internal.h"

static int fsst_values(rctx_t *x, const Lance__Encodings21__Fsst *fs, const uint8_t *const *vb, const size_t *vn,
                       int64_t r, int64_t cnt, const uint16_t *def, bool compressed, size_t vmax);


/* Decode def levels of one chunk into x->scratch as u16. */
int mw_df_def_decode(rctx_t *x, const CE *dc, const uint8_t *p, size_t n, int64_t cnt) {
  assert(cnt >= 0);
  mw_buf_reset(&x->scratch);
  uint16_t *lv = mw_buf_extend(&x->scratch, 2 * (size_t)cnt);
  if (lv == NULL) return -ENOMEM;
  if (dc->compression_case == CE_FLAT && dc->flat->bits_per_value == 16 && dc->flat->data == NULL) {
    if (n < 2 * (size_t)cnt) return BAD(x, "def levels: %zu bytes for %lld levels", x->col, x->page, n, (long long)cnt);
    for (int64_t i = 0; i < cnt; i++) lv[i] = mw_load_u16le(p + 2 * i);
    return 0;
  }
  if (dc->compression_case == CE_RLE && dc->rle->values && dc->rle->run_lengths &&
      dc->rle->values->compression_case == CE_FLAT &&
      dc->rle->run_lengths->compression_case == CE_FLAT) {
    uint64_t vb = dc->rle->values->flat->bits_per_value, lb = dc->rle->run_lengths->flat->bits_per_value;
    if ((vb != 8 && vb != 16) || (lb != 8 && lb != 16 && lb != 32))
      return UNSUP(x, "RLE def levels of %llu/%llu bits", x->col, x->page, (unsigned long long)vb, (unsigned long long)lb);
    if (n < 8) return BAD(x, "RLE def levels: %zu bytes", x->col, x->page, n);
    uint64_t vbytes = mw_load_u64le(p);
    size_t vw = vb / 8, lw = lb / 8;
    if (vbytes > n - 8 || vbytes % vw) return BAD(x, "RLE values size %llu", x->col, x->page, (unsigned long long)vbytes);
    size_t runs = vbytes / vw;
    if (runs > (n - 8 - vbytes) / lw) return BAD(x, "RLE run lengths truncated", x->col, x->page);
    const uint8_t *vp = p + 8, *lp = p + 8 + vbytes;
    int64_t at = 0;
    for (size_t i = 0; i < runs; i++) {
      uint16_t v = vw == 1 ? vp[i] : mw_load_u16le(vp + 2 * i);
      uint64_t len = lw == 1 ? lp[i] : lw == 2 ? mw_load_u16le(lp + 2 * i) : mw_load_u32le(lp + 4 * i);
      if (len > (uint64_t)(cnt - at)) return BAD(x, "RLE runs exceed %lld levels", x->col, x->page, (long long)cnt);
      for (uint64_t k = 0; k < len; k++) lv[at++] = v;
    }
    if (at != cnt) return BAD(x, "RLE runs give %lld of %lld levels", x->col, x->page, (long long)at, (long long)cnt);
    return 0;
  }
  if (dc->compression_case == CE_OOL_BP && dc->out_of_line_bitpacking->uncompressed_bits_per_value == 16 &&
      dc->out_of_line_bitpacking->values && dc->out_of_line_bitpacking->values->compression_case == CE_FLAT)
    return mw_df_def_ool16(x, (unsigned)dc->out_of_line_bitpacking->values->flat->bits_per_value, p, n, cnt, lv);
  if (dc->compression_case == CE_INLINE_BP && dc->inline_bitpacking->uncompressed_bits_per_value == 16 &&
      dc->inline_bitpacking->values == NULL) {
    /* block form: per 1024 levels a u16 width then 64*W u16 words */
    uint64_t vals[FASTLANES_BLOCK];
    size_t at = 0;
    for (int64_t done = 0; done < cnt; done += FASTLANES_BLOCK) {
      if (n - at < 2) return BAD(x, "def bitpacking truncated", x->col, x->page);
      unsigned wb = mw_load_u16le(p + at);
      at += 2;
      if (wb > 16 || n - at < 128 * (size_t)wb) return BAD(x, "def bitpacking block of width %u truncated", x->col, x->page, wb);
      mw_df_fastlanes_unpack(p + at, 16, wb, vals);
      at += 128 * (size_t)wb;
      for (int64_t i = 0; i < FASTLANES_BLOCK && done + i < cnt; i++) lv[done + i] = (uint16_t)vals[i];
    }
    return 0;
  }
  return UNSUP(x, "def level compression %d", x->col, x->page, (int)dc->compression_case);
}

/* The value compressions of a MiniBlock chunk, one function each; p/n is
 * the chunk's first value buffer, already through General (zstd, lz4). */
static int mbv_flat(rctx_t *x, const CE *ce, const uint8_t *p, size_t n, int64_t r, int64_t cnt) {
  assert(ce->compression_case == CE_FLAT);
  const mw_field_t *f = x->fld;
  size_t w = mw_type_width(f);
  uint64_t bits = f->type == MW_T_BOOL ? 1 : 8 * w;
  if (is_var(f) || f->type == MW_T_FSL || ce->flat->bits_per_value != bits || ce->flat->data)
    return UNSUP(x, "flat of %llu bits for %s", x->col, x->page, (unsigned long long)ce->flat->bits_per_value, mw_type_name(f->type));
  if (n < ((size_t)cnt * bits + 7) / 8) return BAD(x, "value buffer of %zu bytes for %lld values", x->col, x->page, n, (long long)cnt);
  if (f->type == MW_T_BOOL) mw_df_bits_copy_out(x, r, p, cnt);
  else memcpy(slot(x, r), p, (size_t)cnt * w);
  return 0;
}

static int mbv_inline_bp(rctx_t *x, const CE *ce, const uint8_t *p, size_t n, int64_t r, int64_t cnt) {
  assert(ce->compression_case == CE_INLINE_BP);
  const mw_field_t *f = x->fld;
  size_t w = mw_type_width(f);
  unsigned t = (unsigned)ce->inline_bitpacking->uncompressed_bits_per_value;
  /* Lance bitpacks any 1/2/4/8-byte fixed type as unsigned bits
   * (integers, temporal types, even float16) */
  if (mw_field_layout(f) != MW_LAYOUT_FIXED || (w != 1 && w != 2 && w != 4 && w != 8) ||
      t != 8 * w || ce->inline_bitpacking->values)
    return UNSUP(x, "inline bitpacking of %u bits for %s", x->col, x->page, t, mw_type_name(f->type));
  return mw_df_inline_bp(x, p, n, r, cnt, t);
}

static int mbv_variable(rctx_t *x, const CE *ce, const uint8_t *p, size_t n, int64_t r, int64_t cnt) {
  assert(ce->compression_case == CE_VARIABLE);
  const mw_field_t *f = x->fld;
  const CE *oc = ce->variable->offsets;
  if (!is_var(f) || oc == NULL || oc->compression_case != CE_FLAT || ce->variable->values ||
      (oc->flat->bits_per_value != 32 && oc->flat->bits_per_value != 64) || oc->flat->data)
    return UNSUP(x, "variable encoding variant for %s", x->col, x->page, mw_type_name(f->type));
  size_t ow = oc->flat->bits_per_value / 8;
  if (n / ow < (size_t)cnt + 1) return BAD(x, "offsets truncated (%zu bytes)", x->col, x->page, n);
  uint64_t prev = ow == 4 ? mw_load_u32le(p) : mw_load_u64le(p);
  for (int64_t i = 0; i < cnt; i++) {
    uint64_t e = ow == 4 ? mw_load_u32le(p + 4 * (i + 1)) : mw_load_u64le(p + 8 * (i + 1));
    if (e < prev || e > n) return BAD(x, "string offset %llu of value %lld out of range", x->col, x->page, (unsigned long long)e, (long long)i);
    int rc = mw_df_var_put(x, r + i, p + prev, (size_t)(e - prev));
    if (rc < 0) return rc;
    prev = e;
  }
  assert(prev <= n); /* every offset was checked */
  return 0;
}

/* Item k of row `row` of a vector column is null (the column's item bitmap,
 * made all valid on the first null item). */
static int fsl_item_null(rctx_t *x, int64_t row, int64_t k) {
  const mw_field_t *f = x->fld;
  mw_column_t *c = x->c;
  assert(k < f->fsl_dim);
  if (c->item_validity.len == 0) {
    size_t tot = (size_t)c->length * (size_t)f->fsl_dim;
    size_t nb = (tot + 7) / 8;
    if (mw_buf_fill(&c->item_validity, 0xFF, nb) < 0) return -ENOMEM;
    if (tot & 7) c->item_validity.data[nb - 1] = (uint8_t)((1u << (tot & 7)) - 1);
  }
  mw_bit_set(c->item_validity.data, row * f->fsl_dim + k, false);
  c->item_null_count++;
  return 0;
}

static int mbv_fsl(rctx_t *x, const CE *ce, const uint8_t *const *vb, const size_t *vn, const uint8_t *p,
                   size_t n, bool compressed, int64_t r, int64_t cnt, const uint16_t *def) {
  const mw_field_t *f = x->fld;
  const Lance__Encodings21__FixedSizeList *fl = ce->fixed_size_list;
  assert(ce->compression_case == CE_FSL);
  if (f->type != MW_T_FSL || fl->items_per_value != (uint64_t)f->fsl_dim || fl->values == NULL ||
      fl->values->compression_case != CE_FLAT || fl->values->flat->bits_per_value != 8 * mw_fsl_item_width(f))
    return UNSUP(x, "fixed_size_list variant for %s", x->col, x->page, mw_type_name(f->type));
  size_t items = (size_t)cnt * (size_t)f->fsl_dim;
  const uint8_t *vp = p;
  size_t vpn = n;
  if (fl->has_validity) {
    if (compressed) return UNSUP(x, "compressed fsl with validity", x->col, x->page);
    if (n < (items + 7) / 8) return BAD(x, "fsl validity truncated", x->col, x->page);
    vp = vb[1], vpn = vn[1];
  }
  size_t iw = mw_fsl_item_width(f);
  if (vpn < items * iw) return BAD(x, "fsl values of %zu bytes for %lld rows", x->col, x->page, vpn, (long long)cnt);
  memcpy(slot(x, r), vp, items * iw);
  for (int64_t i = 0; i < cnt; i++) {
    if (def && def[i]) {
      memset(slot(x, r + i), 0, mw_type_width(f));
      continue;
    }
    for (int64_t k = 0; fl->has_validity && k < f->fsl_dim; k++)
      if (!mw_bit_get(p, i * f->fsl_dim + k) && fsl_item_null(x, r + i, k) < 0) return -ENOMEM;
  }
  return 0;
}

/* Lance's RLE (physical/rle.rs): two value buffers per chunk, the run
 * values Flat{8w} and their lengths Flat{8} (1..255 each):
 *   values 01 00 00 00 02 00 00 00   lengths 03 02   -> 1 1 1 2 2 */
static int mbv_rle(rctx_t *x, const CE *ce, const uint8_t *const *vb, const size_t *vn, const uint8_t *p,
                   size_t n, bool compressed, int64_t r, int64_t cnt) {
  const mw_field_t *f = x->fld;
  size_t w = mw_type_width(f);
  const Lance__Encodings21__Rle *rl = ce->rle;
  assert(ce->compression_case == CE_RLE);
  if (mw_field_layout(f) != MW_LAYOUT_FIXED || (w != 1 && w != 2 && w != 4 && w != 8) || compressed ||
      rl->values == NULL || rl->values->compression_case != CE_FLAT ||
      rl->values->flat->bits_per_value != 8 * w || rl->run_lengths == NULL ||
      rl->run_lengths->compression_case != CE_FLAT || rl->run_lengths->flat->bits_per_value != 8)
    return UNSUP(x, "rle variant for %s", x->col, x->page, mw_type_name(f->type));
  size_t runs = vn[1];
  if (vb[1] == NULL || n / w < runs) return BAD(x, "rle of %zu runs with %zu value bytes", x->col, x->page, runs, n);
  int64_t at = 0;
  for (size_t i = 0; i < runs; i++) {
    uint8_t len = vb[1][i];
    if (len == 0 || len > cnt - at) return BAD(x, "rle run %zu of %u values overruns the chunk's %lld", x->col, x->page, i, len, (long long)cnt);
    for (uint8_t k = 0; k < len; k++) memcpy(slot(x, r + at + k), p + i * w, w);
    at += len;
  }
  if (at != cnt) return BAD(x, "rle runs hold %lld of %lld values", x->col, x->page, (long long)at, (long long)cnt);
  return 0;
}

int mw_df_mb_values(rctx_t *x, const CE *vc, const uint8_t *const *vb, const size_t *vn,
                     int64_t r, int64_t cnt, const uint16_t *def) {
  const mw_field_t *f = x->fld;
  assert(cnt >= 0);
  assert(r + cnt <= x->c->length); /* inside the pre-sized column */
  const uint8_t *p = vb[0];
  size_t n = vn[0];
  const CE *ce;
  int scheme;
  int rc = mw_df_unwrap_general(x, vc, &ce, &scheme);
  if (rc < 0) return rc;
  bool compressed = scheme != 0;
  /* a variable-width page's values are bounded by the reader's column limit */
  size_t vmax = var_max(x);
  size_t max_raw = is_var(f) ? vmax : (size_t)cnt * (mw_type_width(f) + 8) + 4096;
  if ((rc = mw_df_general_buf(x, scheme, &x->scratch2, &p, &n, max_raw)) < 0) return rc;
  switch (ce->compression_case) {
    case CE_FLAT: return mbv_flat(x, ce, p, n, r, cnt);
    case CE_INLINE_BP: return mbv_inline_bp(x, ce, p, n, r, cnt);
    case CE_VARIABLE: return mbv_variable(x, ce, p, n, r, cnt);
    case CE_FSL: return mbv_fsl(x, ce, vb, vn, p, n, compressed, r, cnt, def);
    case CE_RLE: return mbv_rle(x, ce, vb, vn, p, n, compressed, r, cnt);
    case CE_FSST: return fsst_values(x, ce->fsst, vb, vn, r, cnt, def, compressed, vmax);
    default:
      return UNSUP(x, "value compression %d not implemented", x->col, x->page, (int)ce->compression_case);
  }
}

/* Fsst{symbol_table, values}: the chunk's strings, FSST-compressed, are
 * encoded by `values` (Variable); they are appended as they are, then
 * replaced by their decompressed bytes (at most 8 per code byte). A page
 * under 32 KiB has the table's compressed bit off: the strings are then
 * stored verbatim (what LanceDB's small SSTables hold). */
static int fsst_values(rctx_t *x, const Lance__Encodings21__Fsst *fs, const uint8_t *const *vb, const size_t *vn,
                       int64_t r, int64_t cnt, const uint16_t *def, bool compressed, size_t vmax) {
  const mw_field_t *f = x->fld;
  if (!is_var(f) || compressed || fs->values == NULL || fs->values->compression_case != CE_VARIABLE)
    return UNSUP(x, "fsst variant for %s", x->col, x->page, mw_type_name(f->type));
  mw_fsst_table_t t;
  if (mw_fsst_table_parse(&t, fs->symbol_table.data, fs->symbol_table.len) < 0)
    return BAD(x, "fsst symbol table of %zu bytes malformed", x->col, x->page, fs->symbol_table.len);
  mw_column_t *c = x->c;
  int32_t *off = (int32_t *)(void *)c->offsets.data;
  size_t start = c->values.len;
  assert((size_t)off[r] == start);
  int rc = mw_df_mb_values(x, fs->values, vb, vn, r, cnt, def);
  if (rc < 0 || !t.compressed) return rc;
  mw_buf_reset(&x->scratch2); /* the compressed strings, moved aside */
  if (mw_buf_append(&x->scratch2, c->values.data + start, c->values.len - start) < 0) return -ENOMEM;
  c->values.len = start;
  size_t a = 0;
  for (int64_t i = 0; i < cnt; i++) {
    size_t b = (size_t)off[r + i + 1] - start; /* read before var_put_fsst rewrites it */
    assert(b >= a);
    if ((rc = mw_df_var_put_fsst(x, r + i, &t, x->scratch2.data + a, b - a, vmax)) < 0) return rc;
    a = b;
  }
  return 0;
}

