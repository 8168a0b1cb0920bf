/*
 * datafile_write_pages.c — the pages of one flat column (lance-files.md §3;
 * docs/sstable.md "Pages"): which layout each page gets, and its bytes.
 *
 * Design: a column is cut into pages of at most max_page_bytes, each one of
 *   - MiniBlock (ints, floats, bool, short utf8/binary): buffer 0 = u32
 *     chunk words, buffer 1 = chunks. A chunk is
 *       u16 num_levels | [u16 def_bytes] | u32 value_bytes | 0xFE pad to 8 |
 *       [u16 def levels, 0xFE pad to 8] | value buffer (zero-padded to 8)
 *     and its word is ((chunk_bytes/8 - 1) << 4) | log2(values), log2 = 0 for
 *     the last chunk of a page. Chunks hold 4 KiB of fixed-width values (1024
 *     x 32-bit, 512 x 64-bit), 4096 bools, or a power of two of strings
 *     (value buffer = (n+1) offsets from the buffer start, then bytes).
 *     Pages with nulls carry def levels as raw u16 (Flat{16}, NULLABLE_ITEM);
 *     pages without nulls carry none (ALL_VALID_ITEM). With zstd, each
 *     chunk's value buffer becomes u64 LE raw length || zstd frame
 *     (datafile_compress.c) and the value compression General{ZSTD, inner}.
 *   - FullZip: fixed_size_list<float32, D> rows back to back, each [1 control
 *     byte = def level, only when the page has nulls] + D floats, read from
 *     the batches in place (colsrc_t); and utf8/binary pages holding a value
 *     of VAR_MINIBLOCK_MAX_LEN bytes or more (fullzip_var_page).
 *   - Constant: a bool column all false and without nulls (`_tombstone`):
 *     no buffers, inline_value 0x00. A page all null: no buffers, no value,
 *     layers [NULLABLE_ITEM]. utf8/binary all empty: page buffer 0 = the
 *     empty value (datafile_read21.c's constant_scalar form).
 * As Lance writes them (docs/sstable.md "Pages with no items or no values").
 * Every page's rows add up to the column's (asserted in
 * mw_df_write_column; the reader checks the same sum as untrusted input).
 *
 * Sample: a MiniBlock chunk of three int32 values 7, null, 9 (the page has
 * nulls, so def levels are there):
 *   03 00 | 06 00 | 10 00 00 00        3 levels, 6 def bytes, 16 value bytes
 *   00 00 01 00 00 00 | fe fe          def levels 0 1 0, padded to 8
 *   07 00 00 00 | 00 00 00 00 | 09 00 00 00 | (4 bytes to pad to 8)
 *                                      the values, the null's slot too
 * and its word ((32/8 - 1) << 4) | 0 = 0x30 (the page's last chunk).
 */
#include "lance/datafile_internal.h"

/* Fixed-width values per MiniBlock chunk: ~4 KiB, a power of two (every
 * chunk but a page's last must hold one), at least 1. */
static int64_t fixed_per_chunk(size_t width) {
  assert(width > 0);
  int64_t per = 1;
  while (per * 2 * (int64_t)width <= CHUNK_BYTES && per * 2 <= CHUNK_MAX_VALUES) per *= 2;
  return per;
}

/* Nulls among rows [start, end). */
static int64_t count_nulls(const mw_column_t *c, int64_t start, int64_t end) {
  assert(start <= end);
  assert(end <= c->length);
  if (c->validity.len == 0 || c->null_count == 0) return 0;
  int64_t valid = 0, i = start;
  const uint8_t *bits = c->validity.data;
  for (; i < end && (i & 7); i++) valid += mw_bit_get(bits, i);
  for (; i + 64 <= end; i += 64) {
    uint64_t word;
    memcpy(&word, bits + (i >> 3), 8);
    valid += __builtin_popcountll(word);
  }
  for (; i < end; i++) valid += mw_bit_get(bits, i);
  return (end - start) - valid;
}

/* Rows [start, end) of a MiniBlock page starting at `start`. */
static int64_t mb_page_end(const writer_t *w, const mw_field_t *f, const mw_column_t *c,
                           int64_t start) {
  int64_t n = c->length;
  assert(start < n);
  if (is_var(f)) {
    /* largest end with bytes + ow*rows <= max_page_bytes (monotone: binary search) */
    int64_t lo = start + 1, hi = n;
    size_t ow = off_width(f);
    while (lo < hi) {
      int64_t mid = lo + (hi - lo + 1) / 2;
      if (var_bytes(c, start, mid) + ow * (size_t)(mid - start) <= w->max_page_bytes) lo = mid;
      else hi = mid - 1;
    }
    assert(lo <= n);
    return lo;
  }
  int64_t per = is_bool(f) ? CHUNK_MAX_VALUES : fixed_per_chunk(mw_type_width(f));
  int64_t bits_per = is_bool(f) ? 1 : 8 * (int64_t)mw_type_width(f);
  int64_t rows = (int64_t)(w->max_page_bytes * 8 / (size_t)bits_per) / per * per;
  if (rows < per) rows = per;
  return start + rows < n ? start + rows : n;
}

/* Values in the next chunk of a MiniBlock page (a power of two unless it is
 * the page's last chunk). */
static int64_t mb_chunk_values(const mw_field_t *f, const mw_column_t *c, int64_t row,
                               int64_t end) {
  int64_t left = end - row;
  assert(left > 0);
  if (!is_var(f)) {
    int64_t per = is_bool(f) ? CHUNK_MAX_VALUES : fixed_per_chunk(mw_type_width(f));
    return left < per ? left : per;
  }
  size_t ow = off_width(f);
  if (left <= CHUNK_MAX_VALUES && var_bytes(c, row, end) + ow * (size_t)left <= CHUNK_BYTES)
    return left;
  int64_t k = 1;
  while (2 * k < left && 2 * k <= CHUNK_MAX_VALUES &&
         var_bytes(c, row, row + 2 * k) + 2 * ow * (size_t)k <= CHUNK_BYTES)
    k *= 2;
  assert(k <= left);
  return k;
}

/* Raw (uncompressed, 8-padded) value-buffer size of a chunk. */
size_t mw_df_vb_size(const mw_field_t *f, const mw_column_t *c, int64_t row, int64_t cnt) {
  assert(cnt > 0);
  assert(row + cnt <= c->length);
  if (f->type == MW_T_BOOL) return pad8((size_t)(cnt + 7) / 8);
  if (is_var(f)) return pad8(off_width(f) * (size_t)(cnt + 1) + var_bytes(c, row, row + cnt));
  return pad8((size_t)cnt * mw_type_width(f));
}

/* Fill a zeroed area of mw_df_vb_size() bytes with the chunk's value buffer. */
void mw_df_vb_fill(uint8_t *dst, const mw_field_t *f, const mw_column_t *c, int64_t row,
                    int64_t cnt) {
  assert(cnt > 0);
  assert(row + cnt <= c->length);
  if (f->type == MW_T_BOOL) {
    if ((row & 7) == 0) {
      memcpy(dst, c->values.data + (row >> 3), (size_t)(cnt + 7) / 8);
      if (cnt & 7) dst[cnt >> 3] &= (uint8_t)((1u << (cnt & 7)) - 1);
    } else {
      for (int64_t i = 0; i < cnt; i++)
        if (mw_bit_get(c->values.data, row + i)) dst[i >> 3] |= (uint8_t)(1u << (i & 7));
    }
  } else if (is_var(f)) {
    const int32_t *off = (const int32_t *)(const void *)c->offsets.data;
    size_t ow = off_width(f);
    uint64_t base = (uint64_t)(ow * (size_t)(cnt + 1)) - (uint64_t)off[row];
    for (int64_t i = 0; i <= cnt; i++) {
      if (ow == 8) mw_store_u64le(dst + 8 * i, base + (uint64_t)off[row + i]);
      else mw_store_u32le(dst + 4 * i, (uint32_t)(base + (uint64_t)off[row + i]));
    }
    size_t n = var_bytes(c, row, row + cnt);
    if (n) memcpy(dst + ow * (size_t)(cnt + 1), c->values.data + off[row], n);
  } else {
    size_t wd = mw_type_width(f);
    memcpy(dst, c->values.data + (size_t)row * wd, (size_t)cnt * wd);
  }
}

static int mb_chunk(writer_t *w, const mw_field_t *f, const mw_column_t *c, int64_t row,
                    int64_t cnt, bool nulls, bool last) {
  assert(2 * cnt <= UINT16_MAX); /* levels and def bytes fit the header's u16s */
  size_t raw = mw_df_vb_size(f, c, row, cnt), vbn = raw;
  if (w->zstd) {
    mw_buf_reset(&w->raw);
    uint8_t *r = mw_buf_extend(&w->raw, raw);
    if (r == NULL) return -ENOMEM;
    mw_df_vb_fill(r, f, c, row, cnt);
    int rc = mw_df_zstd_wrap(w, r, raw);
    if (rc < 0) return rc;
    vbn = w->zbuf.len;
  }
  if (vbn > UINT32_MAX) return mw_err_set(w->err, -EFBIG, "chunk value buffer of %zu bytes", vbn);
  size_t defn = nulls ? 2 * (size_t)cnt : 0;
  size_t total = 8 + pad8(defn) + pad8(vbn);
  size_t at = w->data.len;
  uint8_t *p = mw_buf_extend(&w->data, total);
  if (p == NULL) return -ENOMEM;
  if (nulls) {
    p[0] = (uint8_t)cnt, p[1] = (uint8_t)(cnt >> 8);
    p[2] = (uint8_t)defn, p[3] = (uint8_t)(defn >> 8);
    mw_store_u32le(p + 4, (uint32_t)vbn);
    uint8_t *d = p + 8;
    for (int64_t i = 0; i < cnt; i++) d[2 * i] = !mw_bit_get(c->validity.data, row + i);
    memset(d + defn, PAD_CHUNK, pad8(defn) - defn);
  } else {
    mw_store_u32le(p + 2, (uint32_t)vbn);
    p[6] = p[7] = PAD_CHUNK;
  }
  uint8_t *v = p + 8 + pad8(defn);
  if (w->zstd) memcpy(v, w->zbuf.data, vbn);
  else mw_df_vb_fill(v, f, c, row, cnt);
  memset(v + vbn, PAD_CHUNK, pad8(vbn) - vbn);
  assert(w->data.len == at + total);
  assert(total % 8 == 0);
  (void)at;
  uint32_t lg = last ? 0 : (uint32_t)__builtin_ctzll((unsigned long long)cnt);
  return mw_buf_put_u32le(&w->words, (uint32_t)((total / 8 - 1) << 4) | lg);
}

static int mb_page(writer_t *w, const mw_field_t *f, const mw_column_t *c, int64_t start,
                   int64_t end) {
  bool nulls = count_nulls(c, start, end) > 0;
  mw_buf_reset(&w->words);
  mw_buf_reset(&w->data);
  int rc;
  size_t chunks = 0;
  for (int64_t row = start; row < end; chunks++) {
    int64_t cnt = mb_chunk_values(f, c, row, end);
    assert(cnt <= CHUNK_MAX_VALUES);
    assert(cnt >= 2 || row + cnt == end); /* Lance refuses log_num_values 0 before the last */
    if ((rc = mb_chunk(w, f, c, row, cnt, nulls, row + cnt == end)) < 0) return rc;
    row += cnt;
  }
  assert(w->words.len == 4 * chunks); /* one word per chunk: the reader counts them so */
  Lance__Encodings21__Flat flat = LANCE__ENCODINGS21__FLAT__INIT, flat32 = flat, flat16 = flat;
  flat.bits_per_value = f->type == MW_T_BOOL ? 1 : is_var(f) ? 32 : 8 * mw_type_width(f);
  flat32.bits_per_value = is_var(f) ? 8 * off_width(f) : 32; /* the offsets of a VAR chunk */
  flat16.bits_per_value = 16;
  CE ce_val = CE_INIT, ce_off = CE_INIT, ce_def = CE_INIT, ce_gen = CE_INIT;
  Lance__Encodings21__Variable var = LANCE__ENCODINGS21__VARIABLE__INIT;
  if (is_var(f)) {
    ce_off.compression_case = CE_FLAT, ce_off.flat = &flat32;
    var.offsets = &ce_off;
    ce_val.compression_case = CE_VARIABLE, ce_val.variable = &var;
  } else {
    ce_val.compression_case = CE_FLAT, ce_val.flat = &flat;
  }
  Lance__Encodings21__BufferCompression bc = LANCE__ENCODINGS21__BUFFER_COMPRESSION__INIT;
  bc.scheme = SCHEME_ZSTD;
  Lance__Encodings21__General gen = LANCE__ENCODINGS21__GENERAL__INIT;
  gen.compression = &bc;
  gen.values = &ce_val;
  ce_gen.compression_case = CE_GENERAL, ce_gen.general = &gen;
  ce_def.compression_case = CE_FLAT, ce_def.flat = &flat16;
  Lance__Encodings21__RepDefLayer layer = nulls ? LAYER_NULLABLE : LAYER_ALL_VALID;
  Lance__Encodings21__MiniBlockLayout mb = LANCE__ENCODINGS21__MINI_BLOCK_LAYOUT__INIT;
  mb.def_compression = nulls ? &ce_def : NULL;
  mb.value_compression = w->zstd ? &ce_gen : &ce_val;
  mb.n_layers = 1;
  mb.layers = &layer;
  mb.num_buffers = 1;
  mb.num_items = (uint64_t)(end - start);
  mb.has_large_chunk = 1;
  wbuf_t bufs[2] = {{w->words.data, w->words.len}, {w->data.data, w->data.len}};
  return mw_df_page_write(w, PL_MINIBLOCK, &mb, start, end - start, bufs, 2);
}

/* A column given as the same field of several batches, in order, read
 * without concatenating them first (a MemTable's FSL column is most of an
 * SSTable's bytes: a concatenated copy would be written once more, into
 * fresh memory, only to be copied out again). */
typedef struct colsrc {
  const mw_batch_t *const *bs;
  size_t nb;
  size_t fi;
} colsrc_t;

/* The stretch of segment k within global rows [r, end): rows [*a, *b) of
 * its column, *base its first global row. Advances k and base past it. */
static const mw_column_t *colsrc_next(const colsrc_t *s, size_t *k, int64_t *base, int64_t r,
                                      int64_t end, int64_t *a, int64_t *b) {
  assert(*k < s->nb);
  assert(r >= *base);
  assert(r < end);
  const mw_column_t *c = &s->bs[*k]->cols[s->fi];
  *a = r - *base;
  *b = end - *base < c->length ? end - *base : c->length;
  if (*b < *a) *b = *a;
  *base += c->length;
  (*k)++;
  return c;
}

/* Position (k, base) at the segment holding global row `start`. */
static void colsrc_seek(const colsrc_t *s, int64_t start, size_t *k, int64_t *base) {
  assert(start >= 0);
  *k = 0;
  *base = 0;
  while (*k < s->nb && *base + s->bs[*k]->cols[s->fi].length <= start)
    *base += s->bs[(*k)++]->cols[s->fi].length;
  assert(*k < s->nb);
}

static int fullzip_page(writer_t *w, const mw_field_t *f, const colsrc_t *s, int64_t start,
                        int64_t end) {
  assert(start < end);
  size_t rowb = mw_type_width(f);
  size_t k;
  int64_t base, a, b;
  int64_t nulls = 0;
  colsrc_seek(s, start, &k, &base);
  for (int64_t r = start; r < end; r = base) {
    const mw_column_t *c = colsrc_next(s, &k, &base, r, end, &a, &b);
    nulls += count_nulls(c, a, b);
  }
  int rc;
  mw_buf_reset(&w->data);
  if (nulls) { /* [control byte = def level] + the row, per row */
    uint8_t *p = mw_buf_extend(&w->data, (size_t)(end - start) * (rowb + 1));
    if (p == NULL) return -ENOMEM;
    colsrc_seek(s, start, &k, &base);
    for (int64_t r = start; r < end; r = base) {
      const mw_column_t *c = colsrc_next(s, &k, &base, r, end, &a, &b);
      bool all_valid = c->validity.len == 0 || c->null_count == 0;
      for (int64_t i = a; i < b; i++, p += rowb + 1) {
        p[0] = !all_valid && !mw_bit_get(c->validity.data, i);
        memcpy(p + 1, c->values.data + (size_t)i * rowb, rowb);
      }
    }
  }
  size_t n = nulls ? w->data.len : (size_t)(end - start) * rowb;
  Lance__Encodings21__Flat flat_item = LANCE__ENCODINGS21__FLAT__INIT;
  flat_item.bits_per_value = 8 * mw_fsl_item_width(f);
  CE ce_items = CE_INIT, ce_fsl = CE_INIT;
  ce_items.compression_case = CE_FLAT, ce_items.flat = &flat_item;
  Lance__Encodings21__FixedSizeList fsl = LANCE__ENCODINGS21__FIXED_SIZE_LIST__INIT;
  fsl.items_per_value = (uint64_t)f->fsl_dim;
  fsl.values = &ce_items;
  ce_fsl.compression_case = CE_FSL, ce_fsl.fixed_size_list = &fsl;
  Lance__Encodings21__RepDefLayer layer = nulls ? LAYER_NULLABLE : LAYER_ALL_VALID;
  Lance__Encodings21__FullZipLayout fz = LANCE__ENCODINGS21__FULL_ZIP_LAYOUT__INIT;
  fz.bits_def = nulls ? 1 : 0;
  fz.details_case = LANCE__ENCODINGS21__FULL_ZIP_LAYOUT__DETAILS_BITS_PER_VALUE;
  fz.bits_per_value = (uint32_t)(rowb * 8);
  fz.num_items = fz.num_visible_items = (uint32_t)(end - start);
  fz.value_compression = &ce_fsl;
  fz.n_layers = 1;
  fz.layers = &layer;
  wbuf_t buf = {w->data.data, n};
  if (nulls) return mw_df_page_write(w, PL_FULLZIP, &fz, start, end - start, &buf, 1);
  /* no nulls: the rows as they are, each segment's stretch in turn */
  if ((rc = mw_df_page_write(w, PL_FULLZIP, &fz, start, end - start, NULL, 0)) < 0) return rc;
  wpage_t *pg = &w->pages[w->n_pages - 1];
  pg->n_bufs = 1;
  pg->size[0] = n;
  if ((rc = mw_df_put_buffer(w, NULL, 0, &pg->off[0])) < 0) return rc;
  colsrc_seek(s, start, &k, &base);
  for (int64_t r = start; r < end && rc == 0; r = base) {
    const mw_column_t *c = colsrc_next(s, &k, &base, r, end, &a, &b);
    if (b > a) rc = mw_buf_append(w->out, c->values.data + (size_t)a * rowb, (size_t)(b - a) * rowb);
  }
  if (rc == 0) rc = mw_buf_fill(w->out, PAD_PAGE, (size_t)(-(w->out->len - w->base)) & 63);
  assert(rc < 0 || w->out->len - w->base >= pg->off[0] + n);
  return rc;
}

/* Rows [first, first + n) all null: a ConstantLayout with no value and no
 * buffers, layers [NULLABLE_ITEM] (what Lance writes for such a page, its
 * "simple all null" layout; it reads every row as null). */
static int all_null_page(writer_t *w, int64_t first, int64_t n) {
  assert(n > 0);
  assert(first >= 0);
  Lance__Encodings21__RepDefLayer layer = LAYER_NULLABLE;
  Lance__Encodings21__ConstantLayout cl = LANCE__ENCODINGS21__CONSTANT_LAYOUT__INIT;
  cl.n_layers = 1;
  cl.layers = &layer;
  return mw_df_page_write(w, PL_CONSTANT, &cl, first, n, NULL, 0);
}

/* A FixedSizeList column: FullZip pages of whole rows, read from field fi
 * of every batch in place (colsrc_t). */
int mw_df_write_fsl(writer_t *w, const mw_field_t *f, const mw_batch_t *const *batches,
                    size_t n_batches, size_t fi) {
  const colsrc_t src = {.bs = batches, .nb = n_batches, .fi = fi}, *s = &src;
  int64_t total = 0, nulls = 0;
  for (size_t i = 0; i < s->nb; i++) {
    const mw_column_t *c = &s->bs[i]->cols[s->fi];
    if (c->item_null_count > 0 && c->null_count < c->length)
      return mw_err_set(w->err, -ENOTSUP, "field '%s': null items inside vectors", f->name);
    total += c->length;
    nulls += c->null_count;
  }
  assert(f->type == MW_T_FSL);
  assert(total == w->rows); /* the batches' rows, in place */
  if (total > 0 && nulls == total) return all_null_page(w, 0, total); /* one page, as Lance */
  size_t rowb = mw_type_width(f) + 1;
  int64_t per = (int64_t)(w->max_page_bytes / rowb);
  if (per < 1) per = 1;
  int rc;
  for (int64_t st = 0; st < total; st += per)
    if ((rc = fullzip_page(w, f, s, st, st + per < total ? st + per : total)) < 0) return rc;
  return 0;
}

static int constant_false_page(writer_t *w, int64_t n) {
  assert(n > 0);
  assert(n == w->rows); /* the column's one page */
  static uint8_t zero = 0;
  Lance__Encodings21__RepDefLayer layer = LAYER_ALL_VALID;
  Lance__Encodings21__ConstantLayout cl = LANCE__ENCODINGS21__CONSTANT_LAYOUT__INIT;
  cl.n_layers = 1;
  cl.layers = &layer;
  cl.inline_value.data = &zero;
  cl.inline_value.len = 1;
  return mw_df_page_write(w, PL_CONSTANT, &cl, 0, n, NULL, 0);
}

/* A utf8/binary column of n rows all empty, none null: a ConstantLayout
 * whose page buffer 0 holds the empty value as a one-row Arrow array (as
 * constant_scalar reads it: 2 buffers, the offsets' size, 0 data bytes,
 * offsets 0 0), layers [ALL_VALID_ITEM], as Lance writes it. */
static int empty_value_page(writer_t *w, const mw_field_t *f, int64_t n) {
  assert(is_var(f));
  assert(n == w->rows); /* the column's one page */
  uint8_t v[12 + 16] = {0};
  size_t ow = off_width(f), len = 12 + 2 * ow;
  mw_store_u32le(v, 2);
  mw_store_u32le(v + 4, (uint32_t)(2 * ow));
  Lance__Encodings21__RepDefLayer layer = LAYER_ALL_VALID;
  Lance__Encodings21__ConstantLayout cl = LANCE__ENCODINGS21__CONSTANT_LAYOUT__INIT;
  cl.n_layers = 1;
  cl.layers = &layer;
  wbuf_t buf = {v, len};
  return mw_df_page_write(w, PL_CONSTANT, &cl, 0, n, &buf, 1);
}

static bool bool_all_false(const mw_column_t *c) {
  size_t nbytes = (size_t)(c->length + 7) / 8;
  for (size_t i = 0; i < nbytes && i < c->values.len; i++)
    if (c->values.data[i]) return false;
  return true;
}

/* The value compression of a leaf (as mb_page and fullzip_page choose it). */
void mw_df_value_compression(const mw_field_t *f, vcomp_t *v) {
  assert(mw_field_layout(f) != MW_LAYOUT_LIST); /* a leaf */
  assert(mw_field_layout(f) != MW_LAYOUT_STRUCT);
  v->flat = (Lance__Encodings21__Flat)LANCE__ENCODINGS21__FLAT__INIT;
  v->off = v->flat;
  v->ce = v->ce_off = v->ce_item = (CE)CE_INIT;
  if (is_var(f)) {
    v->var = (Lance__Encodings21__Variable)LANCE__ENCODINGS21__VARIABLE__INIT;
    v->off.bits_per_value = 8 * off_width(f);
    v->ce_off.compression_case = CE_FLAT, v->ce_off.flat = &v->off;
    v->var.offsets = &v->ce_off;
    v->ce.compression_case = CE_VARIABLE, v->ce.variable = &v->var;
  } else if (f->type == MW_T_FSL) {
    v->fsl = (Lance__Encodings21__FixedSizeList)LANCE__ENCODINGS21__FIXED_SIZE_LIST__INIT;
    v->flat.bits_per_value = 8 * mw_fsl_item_width(f);
    v->ce_item.compression_case = CE_FLAT, v->ce_item.flat = &v->flat;
    v->fsl.items_per_value = (uint64_t)f->fsl_dim;
    v->fsl.values = &v->ce_item;
    v->ce.compression_case = CE_FSL, v->ce.fixed_size_list = &v->fsl;
  } else {
    v->flat.bits_per_value = is_bool(f) ? 1 : 8 * mw_type_width(f);
    v->ce.compression_case = CE_FLAT, v->ce.flat = &v->flat;
  }
}

/* Rows [start, end) of a utf8/binary column holding a value of
 * VAR_MINIBLOCK_MAX_LEN bytes or more: a FullZip page, as Lance writes
 * such a page (its "narrow" test; MiniBlock chunks of two such values
 * could not stay near 4 KiB, and a one-value chunk that is not a page's
 * last is refused). Buffer 0: per row [control byte = def level, only
 * when the page has nulls] + for a valid row its length (offset width)
 * and bytes; buffer 1: the byte offset of each row start, plus the end,
 * each as wide as Lance's BytepackedIntegerEncoder makes them (the
 * narrowest of 1, 2, 4, 8 holding its bound on the buffer's length).
 * Values stay uncompressed (Variable), zstd or not. */
static int fullzip_var_page(writer_t *w, const mw_field_t *f, const mw_column_t *c, int64_t start,
                            int64_t end) {
  assert(start < end);
  assert(is_var(f));
  const int32_t *off = (const int32_t *)(const void *)c->offsets.data;
  size_t ow = off_width(f), n = (size_t)(end - start);
  bool nulls = count_nulls(c, start, end) > 0;
  uint64_t bound = var_bytes(c, start, end) + (nulls ? n : 0) + ow * n;
  size_t iw = bound <= UINT8_MAX ? 1 : bound <= UINT16_MAX ? 2 : bound <= UINT32_MAX ? 4 : 8;
  mw_buf_reset(&w->data);
  mw_buf_reset(&w->words);
  int rc = 0;
  uint8_t le[8];
  for (int64_t r = start; r <= end && rc == 0; r++) {
    for (size_t i = 0; i < iw; i++) le[i] = (uint8_t)((uint64_t)w->data.len >> (8 * i));
    rc = mw_buf_append(&w->words, le, iw); /* the row's start (the end after the last) */
    if (rc < 0 || r == end) break;
    bool valid = mw_column_valid(c, r);
    uint8_t ctrl = !valid;
    if (nulls) rc = mw_buf_append(&w->data, &ctrl, 1);
    if (rc < 0 || !valid) continue;
    uint64_t len = (uint64_t)(off[r + 1] - off[r]);
    for (size_t i = 0; i < ow; i++) le[i] = (uint8_t)(len >> (8 * i));
    rc = mw_buf_append(&w->data, le, ow);
    if (rc == 0 && len > 0) rc = mw_buf_append(&w->data, c->values.data + off[r], (size_t)len);
  }
  if (rc < 0) return rc;
  assert(w->data.len <= bound);
  vcomp_t vc;
  mw_df_value_compression(f, &vc);
  Lance__Encodings21__RepDefLayer layer = nulls ? LAYER_NULLABLE : LAYER_ALL_VALID;
  Lance__Encodings21__FullZipLayout fz = LANCE__ENCODINGS21__FULL_ZIP_LAYOUT__INIT;
  fz.bits_def = nulls ? 1 : 0;
  fz.details_case = LANCE__ENCODINGS21__FULL_ZIP_LAYOUT__DETAILS_BITS_PER_OFFSET;
  fz.bits_per_offset = (uint32_t)(8 * ow);
  fz.num_items = fz.num_visible_items = (uint32_t)n;
  fz.value_compression = &vc.ce;
  fz.n_layers = 1;
  fz.layers = &layer;
  wbuf_t bufs[2] = {{w->data.data, w->data.len}, {w->words.data, w->words.len}};
  return mw_df_page_write(w, PL_FULLZIP, &fz, start, (int64_t)n, bufs, 2);
}


/* Longest value of rows [a, b) of a utf8/binary column (a null's is 0). */
static size_t var_max_len(const mw_column_t *c, int64_t a, int64_t b) {
  assert(a < b);
  const int32_t *off = (const int32_t *)(const void *)c->offsets.data;
  size_t m = 0;
  for (int64_t r = a; r < b; r++)
    if ((size_t)(off[r + 1] - off[r]) > m) m = (size_t)(off[r + 1] - off[r]);
  return m;
}

int mw_df_write_column(writer_t *w, const mw_field_t *f, const mw_column_t *c) {
  if (c->length == 0) return 0;
  if (f->type == MW_T_BOOL && c->null_count == 0 && bool_all_false(c))
    return constant_false_page(w, c->length);
  assert(f->type != MW_T_FSL); /* write_fsl */
  if (c->null_count == c->length) return all_null_page(w, 0, c->length); /* one page, as Lance */
  if (is_var(f) && c->null_count == 0 && var_bytes(c, 0, c->length) == 0) return empty_value_page(w, f, c->length);
  int rc;
  int64_t s = 0;
  while (s < c->length) {
    int64_t e = mb_page_end(w, f, c, s);
    if (count_nulls(c, s, e) == e - s) rc = all_null_page(w, s, e - s);
    else if (is_var(f) && var_max_len(c, s, e) >= VAR_MINIBLOCK_MAX_LEN) rc = fullzip_var_page(w, f, c, s, e);
    else rc = mb_page(w, f, c, s, e);
    if (rc < 0) return rc;
    s = e;
  }
  assert(s == c->length); /* the pages hold the column's rows, none twice */
  return 0;
}

