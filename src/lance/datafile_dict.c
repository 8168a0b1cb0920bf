/*
 * datafile_dict.c — MiniBlock pages with a dictionary (reader).
 *
 * Design: Lance (2.1+) may dictionary-encode a page: the chunks then hold indices
 * (any value compression of unsigned integers: InlineBitpacking, RLE,
 * Flat) and page buffer 2 holds the dictionary's num_dictionary_items
 * values as one block, encoded by MiniBlockLayout.dictionary:
 *   Flat{8w}                   the values back to back (fixed width)
 *   InlineBitpacking{8w}       per 1024 values a width word and a FastLanes
 *                              block, as in a chunk (fixed width)
 *   OutOfLineBitpacking{8w, Flat{W}}  FastLanes blocks of W bits, one
 *                              width for all (ool_unpack; fixed width)
 *   Variable{offsets Flat{32}} u32 32 | u32 start of the bytes | (n+1) u32
 *                              offsets (from that start) | the bytes
 *                              (Flat{64}: the same with u64 fields)
 * either possibly inside General{LZ4|ZSTD}. A sample from an SSTable
 * LanceDB wrote, 2461 int64 keys with 591 distinct values:
 *   values inline_bitpacking(32), dictionary(591): general(lz4, flat(64)),
 *   buffer 2 = u32 4728 (591 x 8) || an LZ4 block of the sorted keys.
 * A null row's index points at some entry; the row stays null. The page
 * decodes in three steps: the dictionary (dict_decode, by its encoding),
 * the chunks into a column of indices (mw_df_miniblock_chunks with a page
 * context of its own; the def levels still mark the page's rows null),
 * then each row gathers its entry (dict_gather). Counts and indices are
 * untrusted: an index past the dictionary is -EBADMSG.
 */
#include "lance/datafile_internal.h"

typedef struct dict {
  uint64_t n;
  size_t w;                  /* fixed width: bytes per value */
  const uint8_t *vals;       /* fixed: n * w bytes; variable: the bytes */
  size_t vals_len;
  const uint8_t *offs;       /* variable: n + 1 offsets of ow bytes */
  size_t ow;
  mw_buf_t raw;              /* the decompressed block */
  mw_column_t col;           /* bitpacked values, unpacked */
} dict_t;

static void dict_free(dict_t *d) {
  mw_buf_free(&d->raw);
  mw_buf_free(&d->col.values);
}

/* The decoded dictionary's values: d->n of d->w bytes each. */
static void dict_fixed(dict_t *d, const uint8_t *vals) {
  assert(d->w == 1 || d->w == 2 || d->w == 4 || d->w == 8);
  d->vals = vals;
  d->vals_len = (size_t)d->n * d->w;
}

/* InlineBitpacking{8w} of a fixed-width dictionary. */
static int dict_inline_bp(rctx_t *x, const CE *ce, const uint8_t *p, size_t n, dict_t *d) {
  const mw_field_t *f = x->fld;
  assert(ce->compression_case == CE_INLINE_BP);
  d->w = mw_type_width(f);
  unsigned t = (unsigned)ce->inline_bitpacking->uncompressed_bits_per_value;
  if ((d->w != 1 && d->w != 2 && d->w != 4 && d->w != 8) || t != 8 * d->w || ce->inline_bitpacking->values)
    return UNSUP(x, "dictionary of inline bitpacking(%u) for %s", x->col, x->page, t, mw_type_name(f->type));
  if (mw_buf_fill(&d->col.values, 0, (size_t)d->n * d->w) < 0) return -ENOMEM;
  d->col.length = (int64_t)d->n;
  rctx_t xd = *x; /* unpack into the dictionary's own column (no scratch used) */
  xd.c = &d->col, xd.row0 = 0;
  int rc = mw_df_inline_bp(&xd, p, n, 0, (int64_t)d->n, t);
  if (rc < 0) return rc;
  dict_fixed(d, d->col.values.data);
  return 0;
}

/* OutOfLineBitpacking{8w, Flat{W}} of a fixed-width dictionary. */
static int dict_ool_bp(rctx_t *x, const CE *ce, const uint8_t *p, size_t n, dict_t *d) {
  const mw_field_t *f = x->fld;
  const Lance__Encodings21__OutOfLineBitpacking *ob = ce->out_of_line_bitpacking;
  assert(ce->compression_case == CE_OOL_BP);
  d->w = mw_type_width(f);
  unsigned t = (unsigned)ob->uncompressed_bits_per_value;
  if ((d->w != 1 && d->w != 2 && d->w != 4 && d->w != 8) || t != 8 * d->w || ob->values == NULL ||
      ob->values->compression_case != CE_FLAT || ob->values->flat->data)
    return UNSUP(x, "dictionary of out_of_line_bitpacking(%u) for %s", x->col, x->page, t, mw_type_name(f->type));
  if (mw_buf_fill(&d->col.values, 0, (size_t)d->n * d->w) < 0) return -ENOMEM;
  int rc = mw_df_ool_unpack(x, p, n, d->n, t, ob->values->flat->bits_per_value, d->col.values.data);
  if (rc < 0) return rc;
  dict_fixed(d, d->col.values.data);
  return 0;
}

/* Flat{8w}: a fixed-width dictionary's values as they are. */
static int dict_flat(rctx_t *x, const CE *ce, const uint8_t *p, size_t n, dict_t *d) {
  const mw_field_t *f = x->fld;
  assert(ce->compression_case == CE_FLAT);
  d->w = mw_type_width(f);
  if (ce->flat->bits_per_value != 8 * d->w || ce->flat->data)
    return UNSUP(x, "dictionary of flat(%llu) for %s", x->col, x->page, (unsigned long long)ce->flat->bits_per_value, mw_type_name(f->type));
  if (n / d->w < d->n) return BAD(x, "dictionary of %zu bytes for %llu values", x->col, x->page, n, (unsigned long long)d->n);
  dict_fixed(d, p);
  return 0;
}

/* Variable{offsets Flat{32|64}}: a utf8/binary dictionary block. */
static int dict_variable(rctx_t *x, const uint8_t *p, size_t n, dict_t *d) {
  assert(is_var(x->fld));
  assert(d->n > 0);
  if (n < 8) return BAD(x, "variable dictionary of %zu bytes", x->col, x->page, n);
  uint32_t bits = mw_load_u32le(p);
  size_t hdr = bits == 32 ? 8 : 16;
  if ((bits != 32 && bits != 64) || n < hdr) return UNSUP(x, "variable dictionary block with %u-bit offsets", x->col, x->page, bits);
  uint64_t start = bits == 32 ? mw_load_u32le(p + 4) : mw_load_u64le(p + 8);
  d->ow = bits / 8;
  if (start < hdr || start > n || (start - hdr) / d->ow < d->n + 1)
    return BAD(x, "variable dictionary: bytes start at %llu of %zu for %llu values", x->col, x->page, (unsigned long long)start, n, (unsigned long long)d->n);
  d->offs = p + hdr;
  d->vals = p + start;
  d->vals_len = n - (size_t)start;
  uint64_t prev = 0;
  for (uint64_t i = 0; i <= d->n; i++) { /* offsets never go back and stay inside the bytes */
    uint64_t o = d->ow == 4 ? mw_load_u32le(d->offs + 4 * i) : mw_load_u64le(d->offs + 8 * i);
    if ((i > 0 && o < prev) || o > d->vals_len)
      return BAD(x, "variable dictionary offset %llu of entry %llu out of range", x->col, x->page, (unsigned long long)o, (unsigned long long)i);
    prev = o;
  }
  return 0;
}

/* The page's dictionary (buffer 2) into d, by its encoding. */
static int dict_decode(rctx_t *x, const Lance__Encodings21__MiniBlockLayout *mb, dict_t *d) {
  const mw_field_t *f = x->fld;
  assert(mb->dictionary != NULL);
  memset(d, 0, sizeof *d);
  d->n = mb->num_dictionary_items;
  if (x->n_bufs < 3) return BAD(x, "dictionary page with %zu buffers", x->col, x->page, x->n_bufs);
  if (d->n == 0 || d->n > (uint64_t)x->n + 1) return BAD(x, "%llu dictionary items for %lld rows", x->col, x->page, (unsigned long long)d->n, (long long)x->n);
  const CE *ce;
  int scheme, rc = mw_df_unwrap_general(x, mb->dictionary, &ce, &scheme);
  if (rc < 0) return rc;
  const uint8_t *p = x->buf[2];
  size_t n = x->buf_len[2];
  size_t max_raw = is_var(f) ? var_max(x) : (size_t)d->n * mw_type_width(f);
  if ((rc = mw_df_general_buf(x, scheme, &d->raw, &p, &n, max_raw)) < 0) return rc;
  bool fixed = mw_field_layout(f) == MW_LAYOUT_FIXED && f->type != MW_T_BOOL;
  if (ce->compression_case == CE_INLINE_BP && fixed) return dict_inline_bp(x, ce, p, n, d);
  if (ce->compression_case == CE_OOL_BP && fixed) return dict_ool_bp(x, ce, p, n, d);
  if (ce->compression_case == CE_FLAT && fixed) return dict_flat(x, ce, p, n, d);
  if (ce->compression_case != CE_VARIABLE || !is_var(f))
    return UNSUP(x, "dictionary encoding %d for %s", x->col, x->page, (int)ce->compression_case, mw_type_name(f->type));
  return dict_variable(x, p, n, d);
}

/* Bits of each index, from the value compression (through General). */
static unsigned index_bits(const CE *vc) {
  if (vc->compression_case == CE_GENERAL && vc->general->values) vc = vc->general->values;
  switch (vc->compression_case) {
    case CE_FLAT: return (unsigned)vc->flat->bits_per_value;
    case CE_INLINE_BP: return (unsigned)vc->inline_bitpacking->uncompressed_bits_per_value;
    case CE_RLE: return vc->rle->values && vc->rle->values->compression_case == CE_FLAT ? (unsigned)vc->rle->values->flat->bits_per_value : 0;
    default: return 0;
  }
}

/* Rows [row0, row0 + n) of x->c from the indices (idx, iw bytes each). */
static int dict_gather(rctx_t *x, const dict_t *d, const uint8_t *idx, size_t iw) {
  assert(iw == 1 || iw == 2 || iw == 4 || iw == 8);
  assert(x->row0 + x->n <= x->c->length);
  for (int64_t i = 0; i < x->n; i++) {
    int64_t r = x->row0 + i;
    bool null = !mw_bit_get(x->c->validity.data, r);
    uint64_t k = mw_df_load_uint(idx + (size_t)i * iw, iw);
    if (!null && k >= d->n)
      return BAD(x, "row %lld: dictionary index %llu of %llu entries", x->col, x->page, (long long)i, (unsigned long long)k, (unsigned long long)d->n);
    if (d->offs == NULL) {
      if (!null) memcpy(slot(x, r), d->vals + (size_t)k * d->w, d->w);
      continue;
    }
    uint64_t a = 0, b = 0;
    if (!null) {
      a = d->ow == 4 ? mw_load_u32le(d->offs + 4 * k) : mw_load_u64le(d->offs + 8 * k);
      b = d->ow == 4 ? mw_load_u32le(d->offs + 4 * (k + 1)) : mw_load_u64le(d->offs + 8 * (k + 1));
    }
    int rc = mw_df_var_put(x, r, d->vals + a, (size_t)(b - a));
    if (rc < 0) return rc;
  }
  return 0;
}


/* A MiniBlock page with a dictionary: the dictionary, the chunks into a
 * column of indices, then each row's entry. */
int mw_df_dict_page(rctx_t *x, const Lance__Encodings21__MiniBlockLayout *mb, size_t nvb) {
  assert(mb->dictionary != NULL);
  assert(nvb == 1 || nvb == 2);
  unsigned ib = index_bits(mb->value_compression);
  if (ib != 8 && ib != 16 && ib != 32 && ib != 64)
    return UNSUP(x, "dictionary indices of %u bits", x->col, x->page, ib);
  size_t iw = ib / 8;
  mw_field_t ifld;
  memset(&ifld, 0, sizeof ifld);
  ifld.type = iw == 1 ? MW_T_UINT8 : iw == 2 ? MW_T_UINT16 : iw == 4 ? MW_T_UINT32 : MW_T_UINT64;
  assert(mw_type_width(&ifld) == iw);
  mw_column_t icol;
  memset(&icol, 0, sizeof icol);
  rctx_t xi = *x; /* its own scratch buffers: the page's def levels stay in x's */
  xi.fld = &ifld, xi.c = &icol, xi.row0 = 0;
  xi.scratch = (mw_buf_t)MW_BUF_INIT, xi.scratch2 = (mw_buf_t)MW_BUF_INIT;
  dict_t d;
  int rc = dict_decode(x, mb, &d);
  if (rc == 0 && mw_buf_fill(&icol.values, 0, (size_t)x->n * iw) < 0) rc = -ENOMEM;
  icol.length = x->n;
  if (rc == 0) rc = mw_df_miniblock_chunks(x, &xi, mb, nvb);
  if (rc == 0) rc = dict_gather(x, &d, icol.values.data, iw);
  mw_buf_free(&xi.scratch);
  mw_buf_free(&xi.scratch2);
  mw_buf_free(&icol.values);
  dict_free(&d);
  return rc;
}
