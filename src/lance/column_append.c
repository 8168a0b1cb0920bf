/*
 * column_append.c — the column builders of batch.h: one row at a time
 * (mw_column_append_*), ranges of rows of another column
 * (mw_column_append_range, used by the MemTable and the merges), and
 * truncation back to a length.
 *
 * The validity bitmap is only materialised when the first null arrives
 * (then back-filled with ones), so a column without nulls never pays for
 * one, and encoders that must write an all-ones bitmap (arrow-rs does)
 * synthesise it. Nested columns recurse: a LIST row is its items appended
 * to children[0] and then an offset (mw_column_list_end); a STRUCT row is
 * one value per child and then a validity bit (mw_column_struct_end).
 * Appending "bc" to a utf8 column holding "a":
 *
 *   before   length 1, offsets 0 1,   values "a"
 *   after    length 2, offsets 0 1 3, values "abc"
 *
 * A buffer that is a view (common/buf.h) is copied before it is written.
 * Every recursion is bounded by MW_MAX_NESTING.
 */
#include "lance/batch.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- builders */

/* Set row `c->length`'s validity bit, materialising the bitmap on first null. */
static int column_push_validity(mw_column_t *c, bool valid) {
  int64_t row = c->length;
  if (valid && c->validity.len == 0) return 0;
  if (mw_buf_own(&c->validity) < 0) return -ENOMEM; /* written below */
  if (c->validity.len == 0) {
    size_t n = (size_t)(row + 8) / 8;
    if (mw_buf_fill(&c->validity, 0xFF, n) < 0) return -ENOMEM;
    if (row % 8) c->validity.data[n - 1] = (uint8_t)((1u << (row % 8)) - 1);
    else c->validity.data[n - 1] = 0;
  } else if ((size_t)(row / 8) >= c->validity.len) {
    if (mw_buf_put_u8(&c->validity, 0) < 0) return -ENOMEM;
  }
  mw_bit_set(c->validity.data, row, valid);
  return 0;
}

static int bool_push(mw_buf_t *bits, int64_t row, bool v) {
  if (mw_buf_own(bits) < 0) return -ENOMEM;
  if ((size_t)(row / 8) >= bits->len && mw_buf_put_u8(bits, 0) < 0) return -ENOMEM;
  mw_bit_set(bits->data, row, v);
  return 0;
}

/* FSL child validity: push `dim` bits of value v for a new row, if the child
 * bitmap is materialised (an empty one means every item is valid). */
static int items_push(mw_column_t *c, int64_t dim, bool v) {
  if (c->item_validity.len == 0) return 0;
  int64_t base = c->length * dim;
  for (int64_t k = 0; k < dim; k++)
    if (bool_push(&c->item_validity, base + k, v) < 0) return -ENOMEM;
  if (!v) c->item_null_count += dim;
  return 0;
}

static int offset_push(mw_column_t *c, int64_t end) {
  if (end > INT32_MAX) return -EFBIG;
  int32_t e = (int32_t)end;
  return mw_buf_append(&c->offsets, &e, 4);
}

static int append_empty(mw_column_t *c, const mw_field_t *f, bool null);

/* The slot a null parent gives a child: null where allowed, else a zero or
 * empty value (Arrow leaves it undefined; arrow-rs writes zeros). */
static int append_filler(mw_column_t *c, const mw_field_t *f) {
  return append_empty(c, f, f->nullable);
}

/* A null row (null = true) or a valid zero/empty/false one. */
static int append_empty(mw_column_t *c, const mw_field_t *f, bool null) {
  assert(!null || f->nullable);
  int rc = 0;
  switch (mw_field_layout(f)) {
    case MW_LAYOUT_BOOL: rc = bool_push(&c->values, c->length, false); break;
    case MW_LAYOUT_VAR: rc = offset_push(c, (int64_t)c->values.len); break;
    case MW_LAYOUT_LIST: rc = offset_push(c, c->children[0].length); break;
    case MW_LAYOUT_STRUCT:
      for (uint32_t i = 0; i < f->n_children && rc == 0; i++)
        rc = append_filler(&c->children[i], &f->children[i]);
      break;
    case MW_LAYOUT_FSL:
      /* like arrow-rs, the items of a null list are null children */
      rc = mw_buf_extend(&c->values, mw_type_width(f)) ? 0 : -ENOMEM;
      if (rc == 0) rc = items_push(c, f->fsl_dim, !null);
      break;
    default: rc = mw_buf_extend(&c->values, mw_type_width(f)) ? 0 : -ENOMEM; break;
  }
  if (rc < 0) return rc;
  if (column_push_validity(c, !null) < 0) return -ENOMEM;
  c->length++;
  c->null_count += null;
  return 0;
}

int mw_column_append_null(mw_column_t *c, const mw_field_t *f) {
  assert(f->nullable);
  return append_empty(c, f, true);
}

int mw_column_append_fixed(mw_column_t *c, const void *value, size_t width) {
  assert(c->item_validity.len == 0);
  int rc = mw_buf_append(&c->values, value, width);
  if (rc < 0) return rc;
  if (column_push_validity(c, true) < 0) return -ENOMEM;
  c->length++;
  return 0;
}

int mw_column_append_fsl(mw_column_t *c, const mw_field_t *f, const void *items) {
  assert(f->type == MW_T_FSL);
  int rc = mw_buf_append(&c->values, items, mw_type_width(f));
  if (rc < 0) return rc;
  if (items_push(c, f->fsl_dim, true) < 0) return -ENOMEM;
  if (column_push_validity(c, true) < 0) return -ENOMEM;
  c->length++;
  return 0;
}

/* The room is reserved past values.len, so a row that fails half way (a bad
 * item) leaves nothing to roll back; commit does the fallible pushes before
 * it moves len and length, as append_fsl does. */
void *mw_column_fsl_room(mw_column_t *c, const mw_field_t *f) {
  assert(f->type == MW_T_FSL);
  size_t w = mw_type_width(f);
  if (mw_buf_reserve(&c->values, w) < 0) return NULL;
  assert(c->values.cap - c->values.len >= w);
  return c->values.data + c->values.len;
}

int mw_column_fsl_commit(mw_column_t *c, const mw_field_t *f) {
  assert(f->type == MW_T_FSL);
  size_t w = mw_type_width(f);
  assert(!mw_buf_is_view(&c->values));
  assert(c->values.cap - c->values.len >= w);
  if (items_push(c, f->fsl_dim, true) < 0) return -ENOMEM;
  if (column_push_validity(c, true) < 0) return -ENOMEM;
  c->values.len += w;
  c->length++;
  return 0;
}

int mw_column_append_bool(mw_column_t *c, bool v) {
  if (bool_push(&c->values, c->length, v) < 0) return -ENOMEM;
  if (column_push_validity(c, true) < 0) return -ENOMEM;
  c->length++;
  return 0;
}

int mw_column_append_bytes(mw_column_t *c, const void *p, size_t n) {
  if (n > (size_t)INT32_MAX - c->values.len) return -EFBIG;
  int rc = mw_buf_append(&c->values, p, n);
  if (rc < 0) return rc;
  if (offset_push(c, (int64_t)c->values.len) < 0) return -ENOMEM;
  if (column_push_validity(c, true) < 0) return -ENOMEM;
  c->length++;
  return 0;
}

int mw_column_list_end(mw_column_t *c) {
  assert(c->n_children == 1);
  int rc = offset_push(c, c->children[0].length);
  if (rc < 0) return rc;
  if (column_push_validity(c, true) < 0) return -ENOMEM;
  c->length++;
  return 0;
}

int mw_column_struct_end(mw_column_t *c) {
  assert(c->n_children >= 1);
  for (uint32_t i = 0; i < c->n_children; i++) assert(c->children[i].length == c->length + 1);
  if (column_push_validity(c, true) < 0) return -ENOMEM;
  c->length++;
  return 0;
}

int mw_column_append_parent(mw_column_t *c, bool valid) {
  assert(c->n_children >= 1);
  bool list = c->offsets.len > 0;
  if (list && offset_push(c, c->children[0].length) < 0) return -ENOMEM;
  if (column_push_validity(c, valid) < 0) return -ENOMEM;
  c->length++;
  c->null_count += !valid;
  return 0;
}

void mw_column_list_grow(mw_column_t *c) {
  assert(c->n_children == 1);
  assert(c->offsets.len == (size_t)(c->length + 1) * 4);
  assert(c->children[0].length <= INT32_MAX);
  int32_t end = (int32_t)c->children[0].length;
  memcpy(c->offsets.data + 4 * c->length, &end, 4);
}

/* After row `r` of src was appended as dst's last row, give it src's item
 * validity bits: materialise dst's bitmap (ones, zero past the end) the
 * first time src has a null item, then overwrite the row's bits. */
static int items_copy(mw_column_t *dst, const mw_column_t *src, int64_t dim, int64_t r) {
  int64_t base = (dst->length - 1) * dim;
  if (dst->item_validity.len == 0) {
    bool all = true;
    for (int64_t k = 0; k < dim && all; k++) all = mw_bit_get(src->item_validity.data, r * dim + k);
    if (all) return 0;
    int64_t bits = base + dim;
    size_t n = (size_t)((bits + 7) / 8);
    if (mw_buf_fill(&dst->item_validity, 0xFF, n) < 0) return -ENOMEM;
    if (bits % 8) dst->item_validity.data[n - 1] = (uint8_t)((1u << (bits % 8)) - 1);
  }
  if (mw_buf_own(&dst->item_validity) < 0) return -ENOMEM;
  for (int64_t k = 0; k < dim; k++) {
    bool v = mw_bit_get(src->item_validity.data, r * dim + k);
    bool old = mw_bit_get(dst->item_validity.data, base + k);
    mw_bit_set(dst->item_validity.data, base + k, v);
    dst->item_null_count += (int64_t)old - (int64_t)v;
  }
  assert(dst->item_null_count >= 0);
  return 0;
}

static int append_row(mw_column_t *dst, const mw_column_t *src, const mw_field_t *f, int64_t r) {
  bool valid = mw_column_valid(src, r);
  int rc;
  switch (mw_field_layout(f)) {
    case MW_LAYOUT_BOOL:
      if (!valid) return mw_column_append_null(dst, f);
      return mw_column_append_bool(dst, mw_bit_get(src->values.data, r));
    case MW_LAYOUT_VAR: {
      if (!valid) return mw_column_append_null(dst, f);
      size_t n;
      const uint8_t *p = mw_column_bytes(src, r, &n);
      return mw_column_append_bytes(dst, p, n);
    }
    case MW_LAYOUT_LIST: {
      int64_t a, b;
      mw_column_list_range(src, r, &a, &b);
      /* a null list keeps whatever items it spans out of the copy */
      if (!valid) return mw_column_append_null(dst, f);
      rc = mw_column_append_range(&dst->children[0], &src->children[0], &f->children[0], a, b - a);
      return rc < 0 ? rc : mw_column_list_end(dst);
    }
    case MW_LAYOUT_STRUCT:
      for (uint32_t i = 0; i < f->n_children; i++)
        if ((rc = append_row(&dst->children[i], &src->children[i], &f->children[i], r)) < 0)
          return rc;
      if (column_push_validity(dst, valid) < 0) return -ENOMEM;
      dst->length++;
      dst->null_count += !valid;
      return 0;
    case MW_LAYOUT_FSL:
      /* null rows too: their items' bits are copied as the writer set them */
      rc = !valid ? mw_column_append_null(dst, f)
                  : mw_column_append_fsl(dst, f, src->values.data + (size_t)r * mw_type_width(f));
      if (rc == 0 && src->item_validity.len) rc = items_copy(dst, src, f->fsl_dim, r);
      return rc;
    default: {
      if (!valid) return mw_column_append_null(dst, f);
      size_t w = mw_type_width(f);
      return mw_column_append_fixed(dst, src->values.data + (size_t)r * w, w);
    }
  }
}

/* Reference path: one row at a time. Nested, bool and FSL columns take it;
 * the bulk path below must give the same rows (tests/lance/test_batch.c). */
static int append_rows(mw_column_t *dst, const mw_column_t *src, const mw_field_t *f,
                       int64_t start, int64_t count) {
  assert(start >= 0);
  assert(count >= 0);
  assert(start + count <= src->length);
  assert(dst->n_children == f->n_children);
  assert(src->n_children == f->n_children);
  for (int64_t r = start; r < start + count; r++) {
    int rc = append_row(dst, src, f, r);
    if (rc < 0) return rc;
  }
  return 0;
}

/* Zero bits in [from, to) of a bitmap: whole bytes by popcount. */
static int64_t bits_zeros(const uint8_t *bits, int64_t from, int64_t to) {
  int64_t zeros = 0, i = from;
  for (; i < to && i % 8; i++) zeros += !mw_bit_get(bits, i);
  for (; i + 8 <= to; i += 8) zeros += 8 - __builtin_popcount(bits[i / 8]);
  for (; i < to; i++) zeros += !mw_bit_get(bits, i);
  assert(zeros >= 0);
  assert(zeros <= to - from);
  return zeros;
}

/* The 8 bits of a `len`-byte bitmap starting at bit `at` (past the end: 0). */
static uint8_t bits_byte(const uint8_t *bits, size_t len, int64_t at) {
  size_t i = (size_t)(at / 8);
  unsigned s = (unsigned)(at % 8);
  unsigned lo = i < len ? bits[i] : 0, hi = i + 1 < len ? bits[i + 1] : 0;
  return (uint8_t)(s ? (lo >> s) | (hi << (8 - s)) : lo);
}

/* Append validity bits [start, start + count) of src to dst, which holds
 * `have` rows: nothing when both are all valid, else dst's bitmap is
 * materialised and the range copied a byte at a time (shifted when either
 * offset is not byte-aligned), tail bits past the end left zero. Adds the
 * range's nulls to dst->null_count. */
static int validity_append(mw_column_t *dst, const mw_column_t *src, int64_t start, int64_t count) {
  int64_t have = dst->length;
  int64_t zeros = src->validity.len ? bits_zeros(src->validity.data, start, start + count) : 0;
  if (zeros == 0 && dst->validity.len == 0) return 0;
  if (mw_buf_own(&dst->validity) < 0) return -ENOMEM;
  if (dst->validity.len == 0) {
    size_t n = (size_t)(have + 7) / 8;
    if (mw_buf_fill(&dst->validity, 0xFF, n) < 0) return -ENOMEM;
    if (have % 8) dst->validity.data[n - 1] = (uint8_t)((1u << (have % 8)) - 1);
  }
  assert(dst->validity.len == (size_t)(have + 7) / 8);
  size_t want = (size_t)(have + count + 7) / 8;
  if (want > dst->validity.len && !mw_buf_extend(&dst->validity, want - dst->validity.len)) return -ENOMEM;
  uint8_t *d = dst->validity.data;
  const uint8_t *s = src->validity.data;
  size_t slen = src->validity.len;
  int64_t i = 0;
  for (; i < count && (have + i) % 8; i++) mw_bit_set(d, have + i, slen == 0 || mw_bit_get(s, start + i));
  for (; i + 8 <= count; i += 8) d[(have + i) / 8] = slen ? bits_byte(s, slen, start + i) : 0xFF;
  for (; i < count; i++) mw_bit_set(d, have + i, slen == 0 || mw_bit_get(s, start + i));
  dst->null_count += zeros;
  return 0;
}

/* FIXED: one copy of the value range. */
static int append_fixed_range(mw_column_t *dst, const mw_column_t *src, const mw_field_t *f,
                              int64_t start, int64_t count) {
  size_t w = mw_type_width(f);
  assert(w > 0);
  assert(dst->values.len == (size_t)dst->length * w);
  /* room first: a failure leaves dst as it was (validity_append's own
   * failures leave its bitmap describing the rows dst already has) */
  int rc = mw_buf_reserve(&dst->values, (size_t)count * w);
  if (rc < 0) return rc;
  if ((rc = validity_append(dst, src, start, count)) < 0) return rc;
  rc = mw_buf_append(&dst->values, src->values.data + (size_t)start * w, (size_t)count * w);
  assert(rc == 0); /* reserved above */
  dst->length += count;
  return 0;
}

/* VAR: one copy of the bytes the range spans, offsets rebased in one loop.
 * Null rows keep the bytes src gave them (Arrow leaves them undefined). */
static int append_var_range(mw_column_t *dst, const mw_column_t *src, int64_t start, int64_t count) {
  const int32_t *so = (const int32_t *)(const void *)src->offsets.data;
  int64_t a = so[start], b = so[start + count];
  assert(a >= 0);
  assert(b >= a);
  assert(b <= (int64_t)src->values.len);
  if ((size_t)(b - a) > (size_t)INT32_MAX - dst->values.len) return -EFBIG;
  assert(dst->offsets.len == (size_t)(dst->length + 1) * 4);
  /* room first, as append_fixed_range: a failure leaves dst as it was */
  int rc = mw_buf_reserve(&dst->values, (size_t)(b - a));
  if (rc < 0) return rc;
  if ((rc = mw_buf_reserve(&dst->offsets, (size_t)count * 4)) < 0) return rc;
  if ((rc = mw_buf_own(&dst->offsets)) < 0) return rc;
  if ((rc = validity_append(dst, src, start, count)) < 0) return rc;
  int64_t delta = (int64_t)dst->values.len - a;
  rc = mw_buf_append(&dst->values, src->values.data + a, (size_t)(b - a));
  assert(rc == 0); /* reserved above */
  int32_t *d = (int32_t *)(void *)(dst->offsets.data + dst->offsets.len);
  for (int64_t i = 0; i < count; i++) d[i] = (int32_t)(so[start + 1 + i] + delta);
  dst->offsets.len += (size_t)count * 4;
  dst->length += count;
  return 0;
}

int mw_column_append_range(mw_column_t *dst, const mw_column_t *src, const mw_field_t *f,
                           int64_t start, int64_t count) {
  assert(dst != NULL);
  assert(src != NULL);
  assert(f != NULL);
  assert(start >= 0);
  assert(count >= 0);
  assert(start + count <= src->length);
  assert(dst->n_children == f->n_children);
  assert(src->n_children == f->n_children);
  if (count == 0) return 0;
  /* the bitmaps' tail rule (bits past the end are zero) and a materialised
   * bitmap's exact length let the bulk copy extend them in place */
  bool exact = dst->validity.len == 0 || dst->validity.len == (size_t)(dst->length + 7) / 8;
  mw_layout_t l = mw_field_layout(f);
  if (l == MW_LAYOUT_VAR)
    exact = exact && dst->offsets.len == (size_t)(dst->length + 1) * 4 &&
            src->offsets.len >= (size_t)(src->length + 1) * 4;
  if (l == MW_LAYOUT_FIXED) exact = exact && dst->values.len == (size_t)dst->length * mw_type_width(f);
  switch (exact ? l : MW_LAYOUT_STRUCT) {
    case MW_LAYOUT_VAR: return append_var_range(dst, src, start, count);
    case MW_LAYOUT_BOOL:
    case MW_LAYOUT_LIST:
    case MW_LAYOUT_STRUCT:
    case MW_LAYOUT_FSL: return append_rows(dst, src, f, start, count);
    default:
      if (dst->item_validity.len) return append_rows(dst, src, f, start, count);
      return append_fixed_range(dst, src, f, start, count);
  }
}

int mw_column_append_range_rows(mw_column_t *dst, const mw_column_t *src, const mw_field_t *f,
                                int64_t start, int64_t count) {
  assert(dst != NULL);
  assert(src != NULL);
  assert(f != NULL);
  return append_rows(dst, src, f, start, count); /* asserts the range */
}

/* Count zero bits in [from, to) of a bitmap, shrink it to `to_keep` bits and
 * clear the bits past them. An empty bitmap (all valid) stays empty. */
static int64_t bitmap_truncate(mw_buf_t *bm, int64_t from, int64_t to, int64_t to_keep) {
  if (bm->len == 0) return 0;
  int64_t zeros = 0;
  for (int64_t i = from; i < to; i++) zeros += !mw_bit_get(bm->data, i);
  bm->len = (size_t)((to_keep + 7) / 8);
  /* a view whose copy fails keeps its bits past to_keep (nothing reads them) */
  if (to_keep % 8 && mw_buf_own(bm) == 0) bm->data[bm->len - 1] &= (uint8_t)((1u << (to_keep % 8)) - 1);
  return zeros;
}

void mw_column_truncate(mw_column_t *c, const mw_field_t *f, int64_t length) {
  assert(length >= 0);
  assert(length <= c->length);
  int64_t old = c->length;
  mw_layout_t l = mw_field_layout(f);
  /* children may run ahead of their parent, at any depth (a row failed half
   * way): cut every one back to what the parent's rows span */
  if (l == MW_LAYOUT_STRUCT)
    for (uint32_t i = 0; i < c->n_children; i++)
      mw_column_truncate(&c->children[i], &f->children[i], length);
  if (l == MW_LAYOUT_LIST) {
    const int32_t *off = (const int32_t *)(const void *)c->offsets.data;
    mw_column_truncate(&c->children[0], &f->children[0], off[length]);
  }
  if (length == old) return;
  c->null_count -= bitmap_truncate(&c->validity, length, old, length);
  switch (l) {
    case MW_LAYOUT_BOOL:
      bitmap_truncate(&c->values, length, old, length);
      break;
    case MW_LAYOUT_VAR: {
      const int32_t *off = (const int32_t *)(const void *)c->offsets.data;
      c->values.len = (size_t)off[length];
      c->offsets.len = (size_t)(length + 1) * 4;
      break;
    }
    case MW_LAYOUT_LIST:
      c->offsets.len = (size_t)(length + 1) * 4;
      break;
    case MW_LAYOUT_STRUCT:
      break;
    case MW_LAYOUT_FSL:
      c->item_null_count -= bitmap_truncate(&c->item_validity, length * f->fsl_dim,
                                            old * f->fsl_dim, length * f->fsl_dim);
      c->values.len = (size_t)length * mw_type_width(f);
      break;
    default:
      c->values.len = (size_t)length * mw_type_width(f);
      break;
  }
  c->length = length;
  /* a bitmap without zeros says nothing: drop it, restoring the state before
   * the first null arrived */
  if (c->null_count == 0) c->validity.len = 0;
  if (c->item_null_count == 0) c->item_validity.len = 0;
  assert(c->null_count >= 0);
  assert(c->item_null_count >= 0);
}
