/*
 * datafile_read20.c — the pages of a Lance 2.0 file (footer 0.3 or 2.0):
 * the legacy ArrayEncoding (lance-files.md §3.1).
 *
 * Design: we do not compile Lance's legacy encodings proto; a small
 * protobuf wire walker (pb_find: the last field of a number, varint or
 * bytes) reads just the encodings 2.0 files hold for our types:
 *   Nullable{no_nulls | some_nulls{validity, values} | all_nulls}
 *     around Flat{bits_per_value, buffer{index, type = page}}
 *     or FixedSizeList{dimension, items: Nullable{no_nulls{Flat}}}
 *   Binary{indices: Nullable{no_nulls{Flat{64}}}, bytes: Flat{8},
 *          null_adjustment} (utf8/binary; an end offset >= the
 *          adjustment marks a null, the offset minus it)
 * Anything else is -ENOTSUP naming what it is; a field out of range is
 * -EBADMSG.
 *
 * Sample: a non-null int64 page, ArrayEncoding{nullable{no_nulls{values:
 * flat{bits 64, buffer{index 0, type page}}}}}:
 *   12 0a | 0a 08 | 0a 06 | 0a 04 | 08 40 | 12 00
 *   nullable  no_nulls  values  flat  bits 64  buffer (index 0, type 0)
 */
#include "lance/datafile_internal.h"

typedef struct pbv {
  const uint8_t *p;
  size_t n;
} pbv_t;

static int pb_varint(const uint8_t *p, size_t n, size_t *i, uint64_t *v) {
  assert(*i <= n);
  uint64_t r = 0;
  for (int s = 0; s < 64; s += 7) {
    if (*i >= n) return -EBADMSG;
    uint8_t b = p[(*i)++];
    r |= (uint64_t)(b & 0x7f) << s;
    if (!(b & 0x80)) {
      *v = r;
      return 0;
    }
  }
  return -EBADMSG;
}

/* Find the last field `num` in msg; varint → *v, bytes → *sub. 1 = found. */
static int pb_find(pbv_t msg, uint32_t num, uint64_t *v, pbv_t *sub) {
  assert(msg.p != NULL || msg.n == 0);
  size_t i = 0;
  int found = 0;
  while (i < msg.n) {
    uint64_t key, val;
    if (pb_varint(msg.p, msg.n, &i, &key) < 0) return -EBADMSG;
    uint32_t wt = key & 7;
    if (wt == 0) {
      if (pb_varint(msg.p, msg.n, &i, &val) < 0) return -EBADMSG;
      if ((key >> 3) == num && v) *v = val, found = 1;
    } else if (wt == 2) {
      if (pb_varint(msg.p, msg.n, &i, &val) < 0 || val > msg.n - i) return -EBADMSG;
      if ((key >> 3) == num && sub) *sub = (pbv_t){msg.p + i, (size_t)val}, found = 1;
      i += val;
    } else if (wt == 1 || wt == 5) {
      size_t k = wt == 1 ? 8 : 4;
      if (k > msg.n - i) return -EBADMSG;
      i += k;
    } else {
      return -EBADMSG;
    }
  }
  assert(i == msg.n); /* each field ended inside the message */
  return found;
}

/* Legacy Flat{bits, buffer{index, type=page}} → page buffer. */
static int legacy_flat(rctx_t *x, pbv_t arr, uint64_t want_bits, const uint8_t **p,
                       uint64_t *len) {
  assert(want_bits == 1 || want_bits % 8 == 0);
  pbv_t flat, bufm;
  uint64_t bits = 0, idx = 0, type = 0;
  if (pb_find(arr, 1, NULL, &flat) != 1) return UNSUP(x, "2.0 encoding is not flat", x->col, x->page);
  if (pb_find(flat, 3, NULL, &bufm) == 1) return UNSUP(x, "2.0 flat compression", x->col, x->page);
  if (pb_find(flat, 1, &bits, NULL) < 0 || pb_find(flat, 2, NULL, &bufm) != 1 ||
      pb_find(bufm, 1, &idx, NULL) < 0 || pb_find(bufm, 2, &type, NULL) < 0)
    return BAD(x, "2.0 flat encoding malformed", x->col, x->page);
  if (bits != want_bits) return UNSUP(x, "2.0 flat of %llu bits, want %llu", x->col, x->page,
                                      (unsigned long long)bits, (unsigned long long)want_bits);
  if (type != 0 || idx >= x->n_bufs)
    return BAD(x, "2.0 flat buffer %llu (type %llu) out of range", x->col, x->page,
               (unsigned long long)idx, (unsigned long long)type);
  *p = x->buf[idx];
  *len = x->buf_len[idx];
  return 0;
}

static int legacy_values(rctx_t *x, pbv_t arr) {
  int64_t n = x->n;
  assert(!is_var(x->fld)); /* legacy_binary */
  const uint8_t *p;
  uint64_t len;
  int rc;
  if (x->fld->type == MW_T_FSL) {
    pbv_t fsl, items, nul, nn, inner;
    uint64_t dim = 0;
    if (pb_find(arr, 3, NULL, &fsl) != 1 || pb_find(fsl, 1, &dim, NULL) < 0 ||
        pb_find(fsl, 2, NULL, &items) != 1)
      return UNSUP(x, "2.0 vector encoding not fixed_size_list", x->col, x->page);
    if (dim != (uint64_t)x->fld->fsl_dim) return BAD(x, "2.0 fsl dimension %llu", x->col, x->page, (unsigned long long)dim);
    if (pb_find(items, 2, NULL, &nul) != 1 || pb_find(nul, 1, NULL, &nn) != 1 ||
        pb_find(nn, 1, NULL, &inner) != 1)
      return UNSUP(x, "2.0 fsl items not nullable/no_nulls", x->col, x->page);
    arr = inner;
  }
  /* fsl items are flat{item bits}; the row is dim of them */
  uint64_t bits = x->fld->type == MW_T_BOOL  ? 1
                  : x->fld->type == MW_T_FSL ? 8 * mw_fsl_item_width(x->fld)
                                             : 8 * mw_type_width(x->fld);
  uint64_t need = x->fld->type == MW_T_BOOL ? ((uint64_t)n + 7) / 8 : (uint64_t)n * mw_type_width(x->fld);
  if ((rc = legacy_flat(x, arr, bits, &p, &len)) < 0) return rc;
  if (len < need) return BAD(x, "2.0 values buffer of %llu bytes too short", x->col, x->page, (unsigned long long)len);
  if (x->fld->type == MW_T_BOOL) mw_df_bits_copy_out(x, x->row0, p, n);
  else memcpy(slot(x, x->row0), p, (size_t)n * mw_type_width(x->fld));
  return 0;
}

static int legacy_binary(rctx_t *x, pbv_t bin) {
  assert(is_var(x->fld));
  pbv_t ind, bytes, nul, nn, inner;
  uint64_t adj = 0;
  const uint8_t *ip, *bp;
  uint64_t il, bl;
  int rc;
  if (pb_find(bin, 1, NULL, &ind) != 1 || pb_find(bin, 2, NULL, &bytes) != 1 ||
      pb_find(bin, 3, &adj, NULL) < 0)
    return BAD(x, "2.0 binary encoding malformed", x->col, x->page);
  if (pb_find(ind, 2, NULL, &nul) != 1 || pb_find(nul, 1, NULL, &nn) != 1 ||
      pb_find(nn, 1, NULL, &inner) != 1)
    return UNSUP(x, "2.0 binary indices not nullable/no_nulls", x->col, x->page);
  if ((rc = legacy_flat(x, inner, 64, &ip, &il)) < 0) return rc;
  if ((rc = legacy_flat(x, bytes, 8, &bp, &bl)) < 0) return rc;
  if (il < 8 * (uint64_t)x->n) return BAD(x, "2.0 binary indices too short", x->col, x->page);
  uint64_t prev = 0;
  for (int64_t i = 0; i < x->n; i++) {
    uint64_t end = mw_load_u64le(ip + 8 * i);
    bool null = adj > 0 && end >= adj;
    if (null) end -= adj;
    if (end < prev || end > bl) return BAD(x, "2.0 binary offset %llu of row %lld out of range", x->col, x->page, (unsigned long long)end, (long long)i);
    if (null) mark_null(x, x->row0 + i);
    if ((rc = mw_df_var_put(x, x->row0 + i, bp + prev, (size_t)(end - prev))) < 0) return rc;
    prev = end;
  }
  assert(prev <= bl);
  return 0;
}

/* A 2.0 page: its ArrayEncoding (p, n) decoded into rows [row0, row0 + n). */
int mw_df_legacy_page(rctx_t *x, const uint8_t *p, size_t n) {
  assert(p != NULL || n == 0);
  pbv_t arr = {p, n};
  pbv_t nul, sub, bin;
  int rc;
  if (is_var(x->fld)) {
    if (pb_find(arr, 6, NULL, &bin) != 1) return UNSUP(x, "2.0 string encoding not binary", x->col, x->page);
    return legacy_binary(x, bin);
  }
  if (pb_find(arr, 2, NULL, &nul) != 1) return UNSUP(x, "2.0 encoding not nullable", x->col, x->page);
  if (pb_find(nul, 1, NULL, &sub) == 1) { /* no_nulls{values} */
    pbv_t v;
    if (pb_find(sub, 1, NULL, &v) != 1) return BAD(x, "2.0 no_nulls without values", x->col, x->page);
    return legacy_values(x, v);
  }
  if (pb_find(nul, 2, NULL, &sub) == 1) { /* some_nulls{validity, values} */
    pbv_t vm, v;
    const uint8_t *bp;
    uint64_t bl;
    if (pb_find(sub, 1, NULL, &vm) != 1 || pb_find(sub, 2, NULL, &v) != 1)
      return BAD(x, "2.0 some_nulls malformed", x->col, x->page);
    if ((rc = legacy_flat(x, vm, 1, &bp, &bl)) < 0) return rc;
    if (bl < (uint64_t)(x->n + 7) / 8) return BAD(x, "2.0 validity too short", x->col, x->page);
    if ((rc = legacy_values(x, v)) < 0) return rc;
    for (int64_t i = 0; i < x->n; i++)
      if (!mw_bit_get(bp, i)) mark_null(x, x->row0 + i);
    return 0;
  }
  if (pb_find(nul, 3, NULL, &sub) == 1) { /* all_nulls */
    for (int64_t i = 0; i < x->n; i++) mark_null(x, x->row0 + i);
    return 0;
  }
  return BAD(x, "2.0 nullable encoding empty", x->col, x->page);
}

