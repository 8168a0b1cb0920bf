/*
 * batch.c — schemas, metadata lists and record batches (see batch.h).
 *
 * Builders grow Arrow buffers one row at a time. The validity bitmap is only
 * materialised when the first null arrives (then back-filled with ones), so a
 * column without nulls never pays for one, and encoders that must write an
 * all-ones bitmap (arrow-rs does) synthesise it.
 */
#include "lance/batch.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t mw_type_width(const mw_field_t *f) {
  switch (f->type) {
    case MW_T_INT32: case MW_T_UINT32: case MW_T_FLOAT32: return 4;
    case MW_T_INT64: case MW_T_UINT64: case MW_T_FLOAT64: return 8;
    case MW_T_FSL_F32: return 4 * (size_t)f->fsl_dim;
    case MW_T_BOOL: case MW_T_UTF8: case MW_T_BINARY: return 0;
  }
  return 0;
}

const char *mw_type_name(mw_type_t t) {
  switch (t) {
    case MW_T_INT32: return "int32";
    case MW_T_INT64: return "int64";
    case MW_T_UINT32: return "uint32";
    case MW_T_UINT64: return "uint64";
    case MW_T_FLOAT32: return "float32";
    case MW_T_FLOAT64: return "float64";
    case MW_T_BOOL: return "bool";
    case MW_T_UTF8: return "utf8";
    case MW_T_BINARY: return "binary";
    case MW_T_FSL_F32: return "fixed_size_list<float32>";
  }
  return "?";
}

int mw_type_lance_logical(const mw_field_t *f, char *out, size_t out_len) {
  const char *s = NULL;
  switch (f->type) {
    case MW_T_INT32: s = "int32"; break;
    case MW_T_INT64: s = "int64"; break;
    case MW_T_UINT32: s = "uint32"; break;
    case MW_T_UINT64: s = "uint64"; break;
    case MW_T_FLOAT32: s = "float"; break;
    case MW_T_FLOAT64: s = "double"; break;
    case MW_T_BOOL: s = "bool"; break;
    case MW_T_UTF8: s = "string"; break;
    case MW_T_BINARY: s = "binary"; break;
    case MW_T_FSL_F32: {
      int n = snprintf(out, out_len, "fixed_size_list:float:%d", f->fsl_dim);
      return n < 0 || (size_t)n >= out_len ? -EINVAL : 0;
    }
  }
  if (s == NULL || strlen(s) >= out_len) return -EINVAL;
  memcpy(out, s, strlen(s) + 1);
  return 0;
}

/* ---------------------------------------------------------------- metadata */

int mw_kvs_set(mw_kvs_t *kvs, const char *key, const void *value, size_t value_len) {
  assert(kvs != NULL && key != NULL);
  uint8_t *v = malloc(value_len + 1);
  if (v == NULL) return -ENOMEM;
  if (value_len > 0) memcpy(v, value, value_len);
  v[value_len] = 0;
  for (size_t i = 0; i < kvs->n; i++) {
    if (strcmp(kvs->items[i].key, key) == 0) {
      free(kvs->items[i].value);
      kvs->items[i].value = v;
      kvs->items[i].value_len = value_len;
      return 0;
    }
  }
  char *k = strdup(key);
  mw_kv_t *items = realloc(kvs->items, (kvs->n + 1) * sizeof *items);
  if (k == NULL || items == NULL) {
    free(k);
    free(v);
    if (items != NULL) kvs->items = items;
    return -ENOMEM;
  }
  kvs->items = items;
  kvs->items[kvs->n++] = (mw_kv_t){k, v, value_len};
  return 0;
}

const mw_kv_t *mw_kvs_get(const mw_kvs_t *kvs, const char *key) {
  for (size_t i = 0; i < kvs->n; i++)
    if (strcmp(kvs->items[i].key, key) == 0) return &kvs->items[i];
  return NULL;
}

bool mw_kvs_remove(mw_kvs_t *kvs, const char *key) {
  for (size_t i = 0; i < kvs->n; i++) {
    if (strcmp(kvs->items[i].key, key) != 0) continue;
    free(kvs->items[i].key);
    free(kvs->items[i].value);
    memmove(&kvs->items[i], &kvs->items[i + 1], (kvs->n - i - 1) * sizeof *kvs->items);
    kvs->n--;
    return true;
  }
  return false;
}

void mw_kvs_free(mw_kvs_t *kvs) {
  if (kvs == NULL) return;
  for (size_t i = 0; i < kvs->n; i++) {
    free(kvs->items[i].key);
    free(kvs->items[i].value);
  }
  free(kvs->items);
  kvs->items = NULL;
  kvs->n = 0;
}

int mw_kvs_copy(mw_kvs_t *dst, const mw_kvs_t *src) {
  assert(dst != src);
  for (size_t i = 0; i < src->n; i++) {
    int rc = mw_kvs_set(dst, src->items[i].key, src->items[i].value, src->items[i].value_len);
    if (rc < 0) return rc;
  }
  return 0;
}

/* ----------------------------------------------------------------- schemas */

void mw_schema_init(mw_schema_t *s) { memset(s, 0, sizeof *s); }

static void field_free(mw_field_t *f) {
  free(f->name);
  mw_kvs_free(&f->meta);
}

void mw_schema_free(mw_schema_t *s) {
  if (s == NULL) return;
  for (size_t i = 0; i < s->n_fields; i++) field_free(&s->fields[i]);
  free(s->fields);
  mw_kvs_free(&s->meta);
  mw_schema_init(s);
}

int mw_schema_add(mw_schema_t *s, const char *name, mw_type_t type, bool nullable) {
  assert(s != NULL && name != NULL);
  if (s->n_fields >= MW_MAX_FIELDS) return -EFBIG;
  mw_field_t *fields = realloc(s->fields, (s->n_fields + 1) * sizeof *fields);
  if (fields == NULL) return -ENOMEM;
  s->fields = fields;
  mw_field_t *f = &s->fields[s->n_fields];
  memset(f, 0, sizeof *f);
  f->name = strdup(name);
  if (f->name == NULL) return -ENOMEM;
  f->type = type;
  f->nullable = nullable;
  f->item_nullable = true;
  f->id = -1;
  return (int)s->n_fields++;
}

int mw_schema_copy(mw_schema_t *dst, const mw_schema_t *src) {
  mw_schema_init(dst);
  for (size_t i = 0; i < src->n_fields; i++) {
    const mw_field_t *sf = &src->fields[i];
    int idx = mw_schema_add(dst, sf->name, sf->type, sf->nullable);
    if (idx < 0) goto fail;
    mw_field_t *df = &dst->fields[idx];
    df->fsl_dim = sf->fsl_dim;
    df->item_nullable = sf->item_nullable;
    df->id = sf->id;
    df->pk_position = sf->pk_position;
    if (mw_kvs_copy(&df->meta, &sf->meta) < 0) goto fail;
  }
  if (mw_kvs_copy(&dst->meta, &src->meta) < 0) goto fail;
  return 0;
fail:
  mw_schema_free(dst);
  return -ENOMEM;
}

int mw_schema_find(const mw_schema_t *s, const char *name) {
  for (size_t i = 0; i < s->n_fields; i++)
    if (strcmp(s->fields[i].name, name) == 0) return (int)i;
  return -ENOENT;
}

bool mw_schema_equal(const mw_schema_t *a, const mw_schema_t *b) {
  if (a->n_fields != b->n_fields) return false;
  for (size_t i = 0; i < a->n_fields; i++) {
    const mw_field_t *x = &a->fields[i], *y = &b->fields[i];
    if (strcmp(x->name, y->name) != 0 || x->type != y->type || x->nullable != y->nullable)
      return false;
    if (x->type == MW_T_FSL_F32 && x->fsl_dim != y->fsl_dim) return false;
  }
  return true;
}

/* ----------------------------------------------------------------- batches */

static void column_init(mw_column_t *c) {
  memset(c, 0, sizeof *c);
}

static void column_free(mw_column_t *c) {
  mw_buf_free(&c->validity);
  mw_buf_free(&c->values);
  mw_buf_free(&c->offsets);
  mw_buf_free(&c->item_validity);
  column_init(c);
}

int mw_batch_init(mw_batch_t *b, const mw_schema_t *schema) {
  assert(b != NULL && schema != NULL);
  b->schema = schema;
  b->n_rows = 0;
  b->cols = calloc(schema->n_fields ? schema->n_fields : 1, sizeof *b->cols);
  if (b->cols == NULL) return -ENOMEM;
  for (size_t i = 0; i < schema->n_fields; i++) {
    mw_field_t *f = &schema->fields[i];
    if (f->type == MW_T_UTF8 || f->type == MW_T_BINARY) {
      int32_t zero = 0;
      if (mw_buf_append(&b->cols[i].offsets, &zero, 4) < 0) {
        mw_batch_free(b);
        return -ENOMEM;
      }
    }
  }
  return 0;
}

void mw_batch_free(mw_batch_t *b) {
  if (b == NULL || b->cols == NULL) return;
  for (size_t i = 0; i < b->schema->n_fields; i++) column_free(&b->cols[i]);
  free(b->cols);
  b->cols = NULL;
  b->n_rows = 0;
}

void mw_batch_reset(mw_batch_t *b) {
  for (size_t i = 0; i < b->schema->n_fields; i++) {
    mw_column_t *c = &b->cols[i];
    c->length = c->null_count = c->item_null_count = 0;
    mw_buf_reset(&c->validity);
    mw_buf_reset(&c->values);
    mw_buf_reset(&c->item_validity);
    c->offsets.len = c->offsets.len ? 4 : 0; /* keep the leading 0 offset */
  }
  b->n_rows = 0;
}

static int bitmap_len_ok(const mw_buf_t *bm, int64_t bits) {
  return bm->len == 0 || bm->len == (size_t)((bits + 7) / 8);
}

int mw_batch_validate(const mw_batch_t *b) {
  for (size_t i = 0; i < b->schema->n_fields; i++) {
    const mw_field_t *f = &b->schema->fields[i];
    const mw_column_t *c = &b->cols[i];
    if (c->length != b->n_rows || !bitmap_len_ok(&c->validity, c->length)) return -EINVAL;
    int64_t nulls = 0;
    if (c->validity.len)
      for (int64_t r = 0; r < c->length; r++) nulls += !mw_bit_get(c->validity.data, r);
    if (nulls != c->null_count || (!f->nullable && nulls != 0)) return -EINVAL;
    switch (f->type) {
      case MW_T_BOOL:
        if (c->values.len != (size_t)((c->length + 7) / 8)) return -EINVAL;
        break;
      case MW_T_UTF8:
      case MW_T_BINARY: {
        if (c->offsets.len != (size_t)(c->length + 1) * 4) return -EINVAL;
        const int32_t *off = (const int32_t *)(const void *)c->offsets.data;
        if (off[0] != 0) return -EINVAL;
        for (int64_t r = 0; r < c->length; r++)
          if (off[r + 1] < off[r]) return -EINVAL;
        if ((size_t)off[c->length] != c->values.len) return -EINVAL;
        break;
      }
      default:
        if (c->values.len != (size_t)c->length * mw_type_width(f)) return -EINVAL;
        if (f->type == MW_T_FSL_F32) {
          int64_t items = c->length * f->fsl_dim, inulls = 0;
          if (!bitmap_len_ok(&c->item_validity, items)) return -EINVAL;
          if (c->item_validity.len)
            for (int64_t k = 0; k < items; k++) inulls += !mw_bit_get(c->item_validity.data, k);
          if (inulls != c->item_null_count) return -EINVAL;
        }
        break;
    }
  }
  return 0;
}

/* ------------------------------------------------------------- builders */

/* Set row `c->length`'s validity bit, materialising the bitmap on first null. */
static int column_push_validity(mw_column_t *c, bool valid) {
  int64_t row = c->length;
  if (valid && c->validity.len == 0) return 0;
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

int mw_column_append_null(mw_column_t *c, const mw_field_t *f) {
  assert(f->nullable);
  if (column_push_validity(c, false) < 0) return -ENOMEM;
  int rc = 0;
  switch (f->type) {
    case MW_T_BOOL: rc = bool_push(&c->values, c->length, false); break;
    case MW_T_UTF8:
    case MW_T_BINARY: {
      int32_t end = (int32_t)c->values.len;
      rc = mw_buf_append(&c->offsets, &end, 4);
      break;
    }
    case MW_T_FSL_F32:
      /* like arrow-rs, the items of a null list are null children */
      rc = mw_buf_extend(&c->values, mw_type_width(f)) ? 0 : -ENOMEM;
      if (rc == 0) rc = items_push(c, f->fsl_dim, false);
      break;
    default: rc = mw_buf_extend(&c->values, mw_type_width(f)) ? 0 : -ENOMEM; break;
  }
  if (rc < 0) return rc;
  c->length++;
  c->null_count++;
  return 0;
}

int mw_column_append_fixed(mw_column_t *c, const void *value, size_t width) {
  int rc = mw_buf_append(&c->values, value, width);
  if (rc < 0) return rc;
  /* only fsl columns have an item bitmap; their width is 4 * dim */
  if (items_push(c, (int64_t)width / 4, true) < 0) return -ENOMEM;
  if (column_push_validity(c, true) < 0) return -ENOMEM;
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
  int32_t end = (int32_t)c->values.len;
  if (mw_buf_append(&c->offsets, &end, 4) < 0) return -ENOMEM;
  if (column_push_validity(c, true) < 0) return -ENOMEM;
  c->length++;
  return 0;
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
  for (int64_t k = 0; k < dim; k++) {
    bool v = mw_bit_get(src->item_validity.data, r * dim + k);
    bool old = mw_bit_get(dst->item_validity.data, base + k);
    mw_bit_set(dst->item_validity.data, base + k, v);
    dst->item_null_count += (int64_t)old - (int64_t)v;
  }
  assert(dst->item_null_count >= 0);
  return 0;
}

int mw_column_append_range(mw_column_t *dst, const mw_column_t *src, const mw_field_t *f,
                           int64_t start, int64_t count) {
  assert(start >= 0 && count >= 0 && start + count <= src->length);
  for (int64_t r = start; r < start + count; r++) {
    int rc;
    if (!mw_column_valid(src, r)) {
      rc = mw_column_append_null(dst, f);
    } else if (f->type == MW_T_BOOL) {
      rc = mw_column_append_bool(dst, mw_bit_get(src->values.data, r));
    } else if (f->type == MW_T_UTF8 || f->type == MW_T_BINARY) {
      size_t n;
      const uint8_t *p = mw_column_bytes(src, r, &n);
      rc = mw_column_append_bytes(dst, p, n);
    } else {
      size_t w = mw_type_width(f);
      rc = mw_column_append_fixed(dst, src->values.data + (size_t)r * w, w);
    }
    if (rc < 0) return rc;
    if (f->type == MW_T_FSL_F32 && src->item_validity.len &&
        (rc = items_copy(dst, src, f->fsl_dim, r)) < 0)
      return rc;
  }
  return 0;
}

/* Count zero bits in [from, to) of a bitmap, shrink it to `to_keep` bits and
 * clear the bits past them. An empty bitmap (all valid) stays empty. */
static int64_t bitmap_truncate(mw_buf_t *bm, int64_t from, int64_t to, int64_t to_keep) {
  if (bm->len == 0) return 0;
  int64_t zeros = 0;
  for (int64_t i = from; i < to; i++) zeros += !mw_bit_get(bm->data, i);
  bm->len = (size_t)((to_keep + 7) / 8);
  if (to_keep % 8) bm->data[bm->len - 1] &= (uint8_t)((1u << (to_keep % 8)) - 1);
  return zeros;
}

void mw_column_truncate(mw_column_t *c, const mw_field_t *f, int64_t length) {
  assert(length >= 0 && length <= c->length);
  int64_t old = c->length;
  if (length == old) return;
  c->null_count -= bitmap_truncate(&c->validity, length, old, length);
  switch (f->type) {
    case MW_T_BOOL:
      bitmap_truncate(&c->values, length, old, length);
      break;
    case MW_T_UTF8:
    case MW_T_BINARY: {
      const int32_t *off = (const int32_t *)(const void *)c->offsets.data;
      c->values.len = (size_t)off[length];
      c->offsets.len = (size_t)(length + 1) * 4;
      break;
    }
    case MW_T_FSL_F32:
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
  assert(c->null_count >= 0 && c->item_null_count >= 0);
}

/* ------------------------------------------------------------ accounting */

static int64_t bitmap_bytes(int64_t bits) { return (bits + 7) / 8; }

/* Arrow slice payload of one column (arrow-rs get_slice_memory_size):
 * validity only when there are nulls; utf8 = 4·len offsets + value bytes. */
static int64_t column_lance_bytes(const mw_field_t *f, const mw_column_t *c) {
  int64_t n = c->null_count > 0 ? bitmap_bytes(c->length) : 0;
  switch (f->type) {
    case MW_T_BOOL: return n + bitmap_bytes(c->length);
    case MW_T_UTF8:
    case MW_T_BINARY: {
      if (c->length == 0) return n;
      const int32_t *off = (const int32_t *)(const void *)c->offsets.data;
      assert(off[c->length] >= off[0]);
      return n + 4 * c->length + (int64_t)(off[c->length] - off[0]);
    }
    case MW_T_FSL_F32:
      n += c->item_null_count > 0 ? bitmap_bytes(c->length * f->fsl_dim) : 0;
      return n + c->length * (int64_t)mw_type_width(f);
    default: return n + c->length * (int64_t)mw_type_width(f);
  }
}

int64_t mw_batch_lance_bytes(const mw_batch_t *b) {
  assert(b != NULL && b->schema != NULL);
  int64_t n = MW_BATCH_LANCE_OVERHEAD_BYTES;
  for (size_t i = 0; i < b->schema->n_fields; i++) n += column_lance_bytes(&b->schema->fields[i], &b->cols[i]);
  assert(n >= MW_BATCH_LANCE_OVERHEAD_BYTES);
  return n;
}
