/*
 * column.c — a column's life (init, free, reset, memory), its validation
 * against its field, and the search for a non-UTF-8 string in it (see
 * batch.h for the layouts).
 *
 * A column mirrors its field's tree: a LIST has one child column (the
 * items), a STRUCT one per child field. `tags: list<utf8>` after the rows
 * ["a","bc"], null, []:
 *
 *   tags      length 3, validity 0b101, offsets 0 2 2 2
 *   item      length 2, offsets 0 1 3, values "abc"
 *
 * mw_column_validate checks every invariant the builders keep (bitmap
 * lengths, exact null counts, offsets monotone and inside the values,
 * children's lengths), so a column a decoder filled can be trusted after
 * it. Walks are bounded by MW_MAX_NESTING.
 */
#include "lance/batch.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/utf8.h"
#include "lance/batch_int.h"

/* ----------------------------------------------------------------- columns */

int mw_column_init(mw_column_t *c, const mw_field_t *f) {
  assert(c != NULL);
  assert(f != NULL);
  memset(c, 0, sizeof *c);
  mw_layout_t l = mw_field_layout(f);
  if ((l == MW_LAYOUT_VAR || l == MW_LAYOUT_LIST) && mw_buf_fill(&c->offsets, 0, 4) < 0)
    return -ENOMEM;
  if (f->n_children == 0) return 0;
  if ((c->children = calloc(f->n_children, sizeof *c->children)) == NULL) goto nomem;
  for (uint32_t i = 0; i < f->n_children; i++) {
    c->n_children++;
    if (mw_column_init(&c->children[i], &f->children[i]) < 0) goto nomem;
  }
  assert(c->n_children == f->n_children);
  return 0;
nomem:
  mw_column_free(c);
  return -ENOMEM;
}

void mw_column_free(mw_column_t *c) {
  if (c == NULL) return;
  mw_buf_free(&c->validity);
  mw_buf_free(&c->values);
  mw_buf_free(&c->offsets);
  mw_buf_free(&c->item_validity);
  for (uint32_t i = 0; i < c->n_children; i++) mw_column_free(&c->children[i]);
  free(c->children);
  memset(c, 0, sizeof *c);
}

void mw_column_reset(mw_column_t *c) {
  c->length = c->null_count = c->item_null_count = 0;
  mw_buf_reset(&c->validity);
  mw_buf_reset(&c->values);
  mw_buf_reset(&c->item_validity);
  if (mw_buf_is_view(&c->offsets)) { /* a leading 0 offset of our own */
    mw_buf_reset(&c->offsets);
    (void)mw_buf_put_u32le(&c->offsets, 0); /* on ENOMEM an empty buffer, as after free */
  }
  c->offsets.len = c->offsets.len ? 4 : 0; /* keep the leading 0 offset */
  if (c->offsets.len) memset(c->offsets.data, 0, 4);
  for (uint32_t i = 0; i < c->n_children; i++) mw_column_reset(&c->children[i]);
}

uint64_t mw_column_mem_bytes(const mw_column_t *c) {
  uint64_t n = c->validity.len + c->values.len + c->offsets.len + c->item_validity.len;
  for (uint32_t i = 0; i < c->n_children; i++) n += mw_column_mem_bytes(&c->children[i]);
  return n;
}

static int bitmap_len_ok(const mw_buf_t *bm, int64_t bits) {
  return bm->len == 0 || bm->len == (size_t)((bits + 7) / 8);
}

static int column_validate(const mw_column_t *c, const mw_field_t *f) {
  if (c->length < 0 || !bitmap_len_ok(&c->validity, c->length)) return -EINVAL;
  if (c->n_children != f->n_children) return -EINVAL;
  int64_t nulls = 0;
  if (c->validity.len)
    for (int64_t r = 0; r < c->length; r++) nulls += !mw_bit_get(c->validity.data, r);
  if (nulls != c->null_count || (!f->nullable && nulls != 0)) return -EINVAL;
  switch (mw_field_layout(f)) {
    case MW_LAYOUT_BOOL:
      if (c->values.len != (size_t)((c->length + 7) / 8)) return -EINVAL;
      break;
    case MW_LAYOUT_VAR:
    case MW_LAYOUT_LIST: {
      if (c->offsets.len != (size_t)(c->length + 1) * 4) return -EINVAL;
      const int32_t *off = (const int32_t *)(const void *)c->offsets.data;
      if (off[0] != 0) return -EINVAL;
      for (int64_t r = 0; r < c->length; r++)
        if (off[r + 1] < off[r]) return -EINVAL;
      int64_t end = mw_field_layout(f) == MW_LAYOUT_VAR ? (int64_t)c->values.len
                                                         : c->children[0].length;
      if (off[c->length] != end) return -EINVAL;
      break;
    }
    case MW_LAYOUT_STRUCT:
      for (uint32_t i = 0; i < c->n_children; i++)
        if (c->children[i].length != c->length) return -EINVAL;
      break;
    case MW_LAYOUT_FSL: {
      if (c->values.len != (size_t)c->length * mw_type_width(f)) return -EINVAL;
      int64_t items = c->length * f->fsl_dim, inulls = 0;
      if (!bitmap_len_ok(&c->item_validity, items)) return -EINVAL;
      if (c->item_validity.len)
        for (int64_t k = 0; k < items; k++) inulls += !mw_bit_get(c->item_validity.data, k);
      if (inulls != c->item_null_count) return -EINVAL;
      break;
    }
    default:
      if (c->values.len != (size_t)c->length * mw_type_width(f)) return -EINVAL;
      break;
  }
  for (uint32_t i = 0; i < c->n_children; i++) {
    int rc = column_validate(&c->children[i], &f->children[i]);
    if (rc < 0) return rc;
  }
  return 0;
}

int mw_column_validate(const mw_column_t *c, const mw_field_t *f) {
  assert(c != NULL);
  assert(f != NULL);
  return column_validate(c, f);
}

/* ----------------------------------------------------------------- utf8 */

/* Row of LIST column c holding item k: the last r with off[r] <= k (offsets
 * are monotone and cover every item, so off[r] <= k < off[r + 1]). */
static int64_t list_row_of(const mw_column_t *c, int64_t k) {
  const int32_t *off = (const int32_t *)(const void *)c->offsets.data;
  int64_t lo = 0, hi = c->length; /* invariant: off[lo] <= k < off[hi] */
  assert(off[0] <= k);
  assert(k < off[c->length]);
  while (hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2;
    if (off[mid] <= k) lo = mid;
    else hi = mid;
  }
  assert(off[lo] <= k);
  assert(k < off[lo + 1]);
  return lo;
}

/* utf8_find at `depth`: path[0..at) names c; on a find, *row is c's row. */
static bool utf8_find(const mw_column_t *c, const mw_field_t *f, int depth, int64_t *row,
                      char *path, size_t path_len, size_t at) {
  assert(depth <= MW_MAX_NESTING);
  assert(c->n_children == f->n_children);
  if (f->type == MW_T_UTF8 || f->type == MW_T_LARGE_UTF8) {
    for (int64_t r = 0; r < c->length; r++) {
      size_t n;
      const uint8_t *p = mw_column_bytes(c, r, &n);
      if (mw_column_valid(c, r) && !mw_utf8_valid(p, n)) {
        *row = r;
        return true;
      }
    }
    return false;
  }
  mw_layout_t layout = mw_field_layout(f);
  for (uint32_t i = 0; i < c->n_children; i++) {
    size_t end = at;
    if (layout == MW_LAYOUT_LIST) mw_text_put(path, path_len, &end, "[]");
    else mw_text_put(path, path_len, &end, ".%s", f->children[i].name);
    int64_t k;
    if (utf8_find(&c->children[i], &f->children[i], depth + 1, &k, path, path_len, end)) {
      *row = layout == MW_LAYOUT_LIST ? list_row_of(c, k) : k;
      return true;
    }
  }
  if (at < path_len) path[at] = '\0'; /* no find: the path is back to c's name */
  return false;
}

bool mw_column_utf8_find(const mw_column_t *c, const mw_field_t *f, const char *name,
                         int64_t *row, char *path, size_t path_len) {
  assert(c != NULL);
  assert(f != NULL);
  assert(name != NULL);
  assert(path != NULL);
  assert(path_len > 0);
  size_t at = 0;
  path[0] = '\0';
  mw_text_put(path, path_len, &at, "%s", name);
  bool found = utf8_find(c, f, 0, row, path, path_len, at);
  assert(!found || *row >= 0);
  assert(!found || *row < c->length);
  return found;
}
