/*
 * datafile_read21.c — the pages of a flat column in a Lance 2.1/2.2 file:
 * the three PageLayouts (lance-files.md §3.2).
 *
 * Design: mw_df_page21 unpacks the page's PageLayout and hands it to its
 * layout's decoder, which checks the layout against the field and the
 * page (item counts, layers, buffers) and decodes into rows [row0,
 * row0 + n) of the pre-sized column:
 *   MiniBlock  buffer 0 chunk words, buffer 1 chunks (header, def levels,
 *              value buffers); each chunk's values go through its value
 *              compression (datafile_values.c), a dictionary page's
 *              through datafile_dict.c
 *   FullZip    rows back to back: fixed-width (vectors) or, for long
 *              strings, control byte + length + bytes per row
 *   Constant   one value for every row (inline, or a utf8/binary value in
 *              page buffer 0), nulls from raw u16 def levels or all null
 * Nested fields' pages go to datafile_read_nested.c instead; it shares
 * the constant decoders here.
 *
 * Sample: a utf8 MiniBlock page our writer made (fuzz/corpus/datafile/
 * mw_pk_utf8.lance). Buffer 0, one chunk word: d0 03 00 00 = (0x3d + 1) x 8
 * = 496 bytes, log2 0: the page's last chunk, holding its remaining 50
 * rows. Buffer 1, the chunk:
 *   32 00 | 64 00 | 80 01 00 00      50 levels, 100 def bytes, 384 value bytes
 *   01 00 01 00 ... 00 00 | fe fe fe fe   def levels (13 nulls first), to 8
 *   cc 00 00 00 cc 00 00 00 ... cd 00 00 00 ...
 *                                    51 u32 offsets from 204 (= 4 x 51) on,
 *                                    then the strings' bytes
 */
#include "lance/datafile_internal.h"

static int miniblock_page(rctx_t *x, const Lance__Encodings21__MiniBlockLayout *mb) {
  assert(x->row0 + x->n <= x->c->length); /* read_flat checked the page's rows */
  if (mb->rep_compression || mb->repetition_index_depth)
    return UNSUP(x, "miniblock with repetition", x->col, x->page);
  if (mb->value_compression == NULL) return BAD(x, "miniblock without value compression", x->col, x->page);
  if (mb->n_layers != 1 || (mb->layers[0] != LAYER_ALL_VALID && mb->layers[0] != LAYER_NULLABLE))
    return UNSUP(x, "miniblock layers not a single item layer", x->col, x->page);
  if (mb->num_items != (uint64_t)x->n)
    return BAD(x, "num_items %llu != page length %lld", x->col, x->page, (unsigned long long)mb->num_items, (long long)x->n);
  if (x->f->major == 2 && x->f->minor >= 2 && !mb->has_large_chunk)
    return BAD(x, "2.2 miniblock without has_large_chunk", x->col, x->page);
  const CE *dc = mb->def_compression;
  if ((dc != NULL) != (mb->layers[0] == LAYER_NULLABLE))
    return BAD(x, "def compression does not match the layer", x->col, x->page);
  size_t nvb = (size_t)mb->num_buffers;
  if (nvb < 1 || nvb > 2) return UNSUP(x, "%zu value buffers per chunk", x->col, x->page, nvb);
  if (x->n_bufs < 2) return BAD(x, "miniblock page with %zu buffers", x->col, x->page, x->n_bufs);
  /* with a dictionary, the chunks decode into indices, gathered after */
  if (mb->dictionary) return mw_df_dict_page(x, mb, nvb);
  return mw_df_miniblock_chunks(x, x, mb, nvb);
}

/* The chunks of a MiniBlock page: def levels mark x's rows null, values go
 * to xv (x itself, or the index column of a dictionary page). */
int mw_df_miniblock_chunks(rctx_t *x, rctx_t *xv, const Lance__Encodings21__MiniBlockLayout *mb, size_t nvb) {
  const CE *dc = mb->def_compression;
  assert(xv->row0 + x->n <= xv->c->length); /* the values' column holds the page */
  size_t ww = mb->has_large_chunk ? 4 : 2, sw = ww;
  const uint8_t *words = x->buf[0], *data = x->buf[1];
  uint64_t n_words = x->buf_len[0] / ww, dlen = x->buf_len[1], at = 0;
  int64_t done = 0;
  for (uint64_t ci = 0; ci < n_words; ci++) {
    uint32_t wd = ww == 4 ? mw_load_u32le(words + 4 * ci) : mw_load_u16le(words + 2 * ci);
    uint64_t cbytes = ((uint64_t)(wd >> 4) + 1) * 8;
    bool last = ci + 1 == n_words;
    int64_t cnt = last ? x->n - done : (int64_t)1 << (wd & 15);
    if (cnt <= 0 || cnt > x->n - done || cnt > CHUNK_MAX_DECODE_VALUES)
      return BAD(x, "chunk %llu holds %lld values, %lld left", x->col, x->page, (unsigned long long)ci, (long long)cnt, (long long)(x->n - done));
    if (cbytes > dlen - at) return BAD(x, "chunk %llu at byte %llu overruns the %llu-byte buffer", x->col, x->page, (unsigned long long)ci, (unsigned long long)at, (unsigned long long)dlen);
    const uint8_t *cp = data + at;
    size_t hn = 2 + (dc ? 2 : 0) + nvb * sw, pos;
    if (hn > cbytes) return BAD(x, "chunk %llu header truncated", x->col, x->page, (unsigned long long)ci);
    uint16_t levels = mw_load_u16le(cp);
    size_t defn = dc ? mw_load_u16le(cp + 2) : 0, vn[2] = {0, 0};
    const uint8_t *vb[2] = {NULL, NULL};
    for (size_t b = 0; b < nvb; b++) vn[b] = sw == 4 ? mw_load_u32le(cp + 2 + (dc ? 2 : 0) + 4 * b) : mw_load_u16le(cp + 2 + (dc ? 2 : 0) + 2 * b);
    pos = pad8(hn);
    if (dc && levels != cnt) return BAD(x, "chunk %llu has %u levels for %lld values", x->col, x->page, (unsigned long long)ci, levels, (long long)cnt);
    const uint8_t *defp = cp + pos;
    if (defn > cbytes - pos) return BAD(x, "chunk %llu def levels overrun", x->col, x->page, (unsigned long long)ci);
    pos += pad8(defn);
    for (size_t b = 0; b < nvb; b++) {
      if (pos > cbytes || vn[b] > cbytes - pos) return BAD(x, "chunk %llu value buffer %zu overruns", x->col, x->page, (unsigned long long)ci, b);
      vb[b] = cp + pos;
      pos += pad8(vn[b]);
    }
    const uint16_t *def = NULL;
    int rc;
    if (dc) {
      if ((rc = mw_df_def_decode(x, dc, defp, defn, cnt)) < 0) return rc;
      def = (const uint16_t *)(const void *)x->scratch.data;
    }
    if ((rc = mw_df_mb_values(xv, mb->value_compression, vb, vn, xv->row0 + done, cnt, def)) < 0) return rc;
    if (def)
      for (int64_t i = 0; i < cnt; i++)
        if (def[i]) mark_null(x, x->row0 + done + i);
    done += cnt;
    at += cbytes;
  }
  assert(at <= dlen); /* every chunk was checked to fit */
  if (done != x->n) return BAD(x, "chunks hold %lld of %lld values", x->col, x->page, (long long)done, (long long)x->n);
  return 0;
}

/* FullZip of utf8/binary values (Lance picks it for large values): buffer 0
 * holds the rows back to back, each a control byte of def bits (when the
 * layer is nullable; non-zero = null) and, for a valid row, its length
 * (bits_per_offset wide) and bytes; buffer 1 is a repetition index of row
 * starts, not needed to read the page whole. The values may be FSST
 * (Fsst{table, Variable}, each value decompressed on its own) or, for
 * values over 32 KiB, General{zstd, Variable}: each value u64 LE raw
 * length || zstd frame (Lance's CompressedBufferEncoder). Two rows,
 * null then "abc":
 *   01 | 00 03 00 00 00 61 62 63 */
static int fullzip_var(rctx_t *x, const Lance__Encodings21__FullZipLayout *fz) {
  const mw_field_t *f = x->fld;
  assert(is_var(f));
  const CE *vc = fz->value_compression;
  const Lance__Encodings21__Fsst *fs = NULL;
  bool zs = vc->compression_case == CE_GENERAL && vc->general->compression != NULL &&
            vc->general->compression->scheme == SCHEME_ZSTD; /* each value u64 raw || frame */
  if (zs) vc = vc->general->values;
  if (vc != NULL && vc->compression_case == CE_FSST && !zs) {
    fs = vc->fsst;
    vc = fs->values;
  }
  size_t ow = fz->bits_per_offset / 8, ctrl = fz->bits_def ? 1 : 0;
  if (vc == NULL || vc->compression_case != CE_VARIABLE || (ow != 4 && ow != 8) || fz->bits_per_offset % 8)
    return UNSUP(x, "fullzip variable-width encoding for %s", x->col, x->page, mw_type_name(f->type));
  mw_fsst_table_t t;
  if (fs && mw_fsst_table_parse(&t, fs->symbol_table.data, fs->symbol_table.len) < 0)
    return BAD(x, "fsst symbol table of %zu bytes malformed", x->col, x->page, fs->symbol_table.len);
  size_t vmax = var_max(x);
  const uint8_t *p = x->buf[0];
  size_t n = x->buf_len[0], at = 0;
  for (int64_t i = 0; i < x->n; i++) {
    int64_t r = x->row0 + i;
    if (ctrl) {
      if (at >= n) return BAD(x, "fullzip row %lld past the %zu-byte buffer", x->col, x->page, (long long)i, n);
      if (p[at++] & ((1u << fz->bits_def) - 1)) {
        mark_null(x, r);
        int rc = mw_df_var_put(x, r, NULL, 0);
        if (rc < 0) return rc;
        continue;
      }
    }
    if (n - at < ow) return BAD(x, "fullzip row %lld: length past the buffer", x->col, x->page, (long long)i);
    uint64_t len = ow == 4 ? mw_load_u32le(p + at) : mw_load_u64le(p + at);
    at += ow;
    if (len > n - at) return BAD(x, "fullzip row %lld: %llu bytes past the buffer", x->col, x->page, (long long)i, (unsigned long long)len);
    const uint8_t *vp = p + at;
    size_t vn = (size_t)len;
    int rc = zs && vn > 0 ? mw_df_zstd_buf(x, &x->scratch, &vp, &vn, vmax) : 0;
    if (rc == 0) rc = fs && t.compressed ? mw_df_var_put_fsst(x, r, &t, vp, vn, vmax) : mw_df_var_put(x, r, vp, vn);
    if (rc < 0) return rc;
    if (x->c->values.len > vmax) return BAD(x, "values exceed %zu bytes", x->col, x->page, vmax);
    at += (size_t)len;
  }
  assert(at <= n); /* every row was checked to fit */
  if (at != n) return BAD(x, "fullzip buffer holds %zu bytes after the last row", x->col, x->page, n - at);
  return 0;
}

static int fullzip_page_read(rctx_t *x, const Lance__Encodings21__FullZipLayout *fz) {
  const mw_field_t *f = x->fld;
  const CE *vc = fz->value_compression;
  if (vc != NULL && is_var(f) && fz->bits_rep == 0 && fz->bits_def <= 8 && fz->n_layers == 1 &&
      fz->details_case == LANCE__ENCODINGS21__FULL_ZIP_LAYOUT__DETAILS_BITS_PER_OFFSET &&
      fz->num_items == (uint64_t)x->n && x->n_bufs >= 1 && (fz->bits_def > 0) == (fz->layers[0] == LAYER_NULLABLE))
    return fullzip_var(x, fz);
  if (fz->bits_rep || fz->bits_def > 8 || fz->details_case != LANCE__ENCODINGS21__FULL_ZIP_LAYOUT__DETAILS_BITS_PER_VALUE)
    return UNSUP(x, "fullzip with repetition or variable width", x->col, x->page);
  if (vc == NULL) return BAD(x, "fullzip without value compression", x->col, x->page);
  if (fz->num_items != (uint64_t)x->n || x->n_bufs < 1)
    return BAD(x, "fullzip num_items %u for %lld rows", x->col, x->page, fz->num_items, (long long)x->n);
  if (fz->n_layers != 1 || (fz->bits_def > 0) != (fz->layers[0] == LAYER_NULLABLE))
    return BAD(x, "fullzip layers do not match bits_def", x->col, x->page);
  size_t w = mw_type_width(f), vbits = 0, ctrl = fz->bits_def ? 1 : 0;
  bool validity = false;
  if (f->type == MW_T_FSL && vc->compression_case == CE_FSL) {
    const Lance__Encodings21__FixedSizeList *fl = vc->fixed_size_list;
    if (fl->items_per_value != (uint64_t)f->fsl_dim || !fl->values || fl->values->compression_case != CE_FLAT ||
        fl->values->flat->bits_per_value != 8 * mw_fsl_item_width(f))
      return UNSUP(x, "fullzip fsl variant", x->col, x->page);
    validity = fl->has_validity;
  } else if (vc->compression_case == CE_FLAT && !is_var(f) && f->type != MW_T_BOOL &&
             vc->flat->bits_per_value == 8 * w) {
  } else {
    return UNSUP(x, "fullzip value compression %d for %s", x->col, x->page, (int)vc->compression_case, mw_type_name(f->type));
  }
  assert(!is_var(f)); /* fixed-width rows from here */
  size_t vbytes = validity ? ((size_t)f->fsl_dim + 7) / 8 : 0;
  vbits = (size_t)fz->bits_per_value;
  if (vbits != 8 * (w + vbytes)) return BAD(x, "fullzip bits_per_value %zu", x->col, x->page, vbits);
  size_t rowb = ctrl + vbytes + w;
  if (x->buf_len[0] / rowb < (uint64_t)x->n) return BAD(x, "fullzip buffer of %llu bytes for %lld rows", x->col, x->page, (unsigned long long)x->buf_len[0], (long long)x->n);
  const uint8_t *p = x->buf[0];
  if (rowb == w) {
    memcpy(slot(x, x->row0), p, (size_t)x->n * w);
    return 0;
  }
  for (int64_t i = 0; i < x->n; i++, p += rowb) {
    bool null = ctrl && (p[0] & ((1u << fz->bits_def) - 1));
    if (null) {
      mark_null(x, x->row0 + i);
      continue;
    }
    memcpy(slot(x, x->row0 + i), p + ctrl + vbytes, w);
    for (int64_t k = 0; validity && k < f->fsl_dim; k++)
      if (!mw_bit_get(p + ctrl, k)) return UNSUP(x, "null items inside fullzip vectors", x->col, x->page);
  }
  return 0;
}

/* Every row of the page gets the inline value v (len bytes). */
int mw_df_constant_fill(rctx_t *x, const mw_field_t *f, const uint8_t *v, size_t len) {
  assert(len > 0);
  assert(x->row0 + x->n <= x->c->length);
  if (f->type == MW_T_BOOL) {
    if (len != 1 || v[0] > 1) return UNSUP(x, "bool constant of %zu bytes", x->col, x->page, len);
    for (int64_t i = 0; v[0] && i < x->n; i++) mw_bit_set(x->c->values.data, x->row0 + i, true);
    return 0;
  }
  if (mw_field_layout(f) != MW_LAYOUT_FIXED || len != mw_type_width(f))
    return UNSUP(x, "constant of %zu bytes for %s", x->col, x->page, len, mw_type_name(f->type));
  for (int64_t i = 0; i < x->n; i++) memcpy(slot(x, x->row0 + i), v, len);
  return 0;
}

/* A constant utf8/binary value Lance keeps in page buffer 0 instead of
 * inline_value (which holds fixed-width values of at most 32 bytes): the
 * value as a one-row Arrow array, its buffer count, their sizes, then the
 * buffers. "__replay__" (a column whose rows all hold it):
 *   02 00 00 00 | 08 00 00 00 0a 00 00 00 | 00 00 00 00 0a 00 00 00 | "__replay__"
 *   2 buffers     sizes 8 and 10           offsets 0, 10             the bytes
 * (large types: 16 bytes of u64 offsets). Every valid row of the page gets it. */
int mw_df_constant_scalar(rctx_t *x, const uint8_t *p, uint64_t n) {
  const mw_field_t *f = x->fld;
  assert(x->row0 + x->n <= x->c->length);
  if (!is_var(f)) return UNSUP(x, "constant value buffer for %s", x->col, x->page, mw_type_name(f->type));
  if (n < 12 || mw_load_u32le(p) != 2) return BAD(x, "constant value buffer of %llu bytes: not 2 buffers", x->col, x->page, (unsigned long long)n);
  uint64_t ol = mw_load_u32le(p + 4), dl = mw_load_u32le(p + 8);
  if ((ol != 8 && ol != 16) || 12 + ol + dl != n)
    return BAD(x, "constant value buffer: sizes %llu + %llu in %llu bytes", x->col, x->page, (unsigned long long)ol,
               (unsigned long long)dl, (unsigned long long)n);
  const uint8_t *op = p + 12, *data = op + ol;
  uint64_t a = ol == 8 ? mw_load_u32le(op) : mw_load_u64le(op), b = ol == 8 ? mw_load_u32le(op + 4) : mw_load_u64le(op + 8);
  if (a > b || b > dl) return BAD(x, "constant value offsets %llu..%llu of %llu bytes", x->col, x->page, (unsigned long long)a,
                                 (unsigned long long)b, (unsigned long long)dl);
  for (int64_t i = 0; i < x->n; i++) { /* rows the def levels made null stay empty */
    bool null = !mw_bit_get(x->c->validity.data, x->row0 + i);
    int rc = mw_df_var_put(x, x->row0 + i, data + a, null ? 0 : (size_t)(b - a));
    if (rc < 0) return rc;
  }
  return 0;
}

/* ConstantLayout. Where the value is: inline_value (fixed width, at most
 * 32 bytes), or page buffer 0 for a utf8/binary value (constant_scalar);
 * nulls: none, all (no value at all), or an empty rep buffer and raw u16
 * def levels, one per row, after the value buffer if there is one (Lance
 * writes these for a nullable column whose valid values are all equal):
 *   buffers  []                 inline value, or all null
 *            [value]            every row holds the value
 *            [rep, def]         inline value, def levels
 *            [value, rep, def]  e.g. "same-value" in 30 bytes, 0, 2 x rows */
static int constant_page(rctx_t *x, const Lance__Encodings21__ConstantLayout *cl) {
  if (cl->rep_compression || cl->def_compression || cl->num_rep_values || cl->num_def_values)
    return UNSUP(x, "constant layout with compressed rep/def levels", x->col, x->page);
  if (cl->n_layers != 1) return UNSUP(x, "constant layout with %zu layers", x->col, x->page, cl->n_layers);
  const mw_field_t *f = x->fld;
  size_t len = cl->inline_value.len;
  bool value_buf = len == 0 && (x->n_bufs == 1 || x->n_bufs == 3);
  size_t d0 = value_buf ? 1 : 0; /* the first rep/def buffer */
  assert(d0 <= x->n_bufs);
  if (x->n_bufs - d0 != 0 && x->n_bufs - d0 != 2)
    return UNSUP(x, "constant layout with %zu buffers", x->col, x->page, x->n_bufs);
  if (x->n_bufs - d0 == 2) {
    if (len == 0 && !value_buf) return BAD(x, "constant def levels without a value", x->col, x->page);
    if (x->buf_len[d0] != 0) return UNSUP(x, "constant layout with rep levels", x->col, x->page);
    if (cl->layers[0] != LAYER_NULLABLE) return BAD(x, "constant def levels on a non-null layer", x->col, x->page);
    const uint8_t *def = x->buf[d0 + 1];
    if (x->buf_len[d0 + 1] < 2 * (uint64_t)x->n)
      return BAD(x, "constant def levels of %llu bytes for %lld rows", x->col, x->page,
                 (unsigned long long)x->buf_len[d0 + 1], (long long)x->n);
    for (int64_t i = 0; i < x->n; i++) {
      uint16_t d = mw_load_u16le(def + 2 * i);
      if (d > 1) return BAD(x, "constant def level %u", x->col, x->page, d);
      if (d) mark_null(x, x->row0 + i);
    }
  }
  if (value_buf) return mw_df_constant_scalar(x, x->buf[0], x->buf_len[0]);
  if (len == 0) { /* all null */
    if (cl->layers[0] != LAYER_NULLABLE) return BAD(x, "all-null constant page on a non-null layer", x->col, x->page);
    for (int64_t i = 0; i < x->n; i++) {
      mark_null(x, x->row0 + i);
      if (is_var(f)) mw_df_var_put(x, x->row0 + i, NULL, 0);
    }
    return 0;
  }
  return mw_df_constant_fill(x, f, cl->inline_value.data, len);
}

int mw_df_page21(rctx_t *x, const uint8_t *val, size_t len) {
  assert(val != NULL || len == 0);
  Lance__Encodings21__PageLayout *pl = lance__encodings21__page_layout__unpack(NULL, len, val);
  if (pl == NULL) return BAD(x, "PageLayout protobuf malformed", x->col, x->page);
  int rc;
  switch (pl->layout_case) {
    case PL_MINIBLOCK: rc = miniblock_page(x, pl->mini_block_layout); break;
    case PL_FULLZIP: rc = fullzip_page_read(x, pl->full_zip_layout); break;
    case PL_CONSTANT: rc = constant_page(x, pl->constant_layout); break;
    default: rc = UNSUP(x, "page layout not implemented", x->col, x->page); break;
  }
  lance__encodings21__page_layout__free_unpacked(pl, NULL);
  return rc;
}

