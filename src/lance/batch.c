/*
 * batch.c — record batches of batch.h: a schema (borrowed) and one column
 * per top-level field, all of n_rows rows. Here: their life (init, free,
 * reset), views into a backing blob (adopt, own), concatenation,
 * validation, and the accounting of the bytes Lance's writer counts.
 *
 * A batch decoded in place holds views into its WAL entry; the entry's
 * blob stays alive through batch->backing (mw_batch_adopt), and
 * mw_batch_own copies every view so the entry can go.
 *
 * mw_batch_lance_bytes is arrow-rs get_slice_memory_size over the batch,
 * e.g. for 10 rows of {id: int64 not null, name: utf8 with 2 nulls}:
 *
 *   id    10 * 8              =  80
 *   name  2 (bitmap) + 10 * 4 offsets + value bytes
 */
#include "lance/batch.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lance/util.h"

/* ----------------------------------------------------------------- batches */

int mw_batch_init(mw_batch_t *b, const mw_schema_t *schema) {
  assert(b != NULL);
  assert(schema != NULL);
  b->schema = schema;
  b->n_rows = 0;
  b->backing = NULL;
  mw_buf_init(&b->wal_ipc);
  b->wal_ipc_head = 0;
  b->cols = calloc(schema->n_fields ? schema->n_fields : 1, sizeof *b->cols);
  if (b->cols == NULL) return -ENOMEM;
  for (size_t i = 0; i < schema->n_fields; i++) {
    if (mw_column_init(&b->cols[i], &schema->fields[i]) < 0) {
      mw_batch_free(b);
      return -ENOMEM;
    }
  }
  return 0;
}

void mw_batch_free(mw_batch_t *b) {
  if (b == NULL || b->cols == NULL) return;
  mw_buf_free(&b->wal_ipc);
  b->wal_ipc_head = 0;
  for (size_t i = 0; i < b->schema->n_fields; i++) mw_column_free(&b->cols[i]);
  free(b->cols);
  b->cols = NULL;
  b->n_rows = 0;
  mw_blob_unref(b->backing); /* after the columns: nothing views it now */
  b->backing = NULL;
}

void mw_batch_reset(mw_batch_t *b) {
  mw_buf_reset(&b->wal_ipc);
  b->wal_ipc_head = 0;
  for (size_t i = 0; i < b->schema->n_fields; i++) mw_column_reset(&b->cols[i]);
  b->n_rows = 0;
  mw_blob_unref(b->backing); /* the reset columns view nothing */
  b->backing = NULL;
}

int mw_batch_adopt(mw_batch_t *b, mw_blob_t *blob) {
  assert(b != NULL);
  if (blob == NULL || b->backing == blob) return 0;
  if (b->backing != NULL) return -EINVAL;
  b->backing = mw_blob_ref(blob);
  assert(mw_blob_refs(blob) >= 2);
  return 0;
}

static int column_own(mw_column_t *c) {
  int rc = 0;
  if (rc == 0) rc = mw_buf_own(&c->validity);
  if (rc == 0) rc = mw_buf_own(&c->values);
  if (rc == 0) rc = mw_buf_own(&c->offsets);
  if (rc == 0) rc = mw_buf_own(&c->item_validity);
  for (uint32_t i = 0; i < c->n_children && rc == 0; i++) rc = column_own(&c->children[i]);
  return rc;
}

int mw_batch_own(mw_batch_t *b) {
  assert(b != NULL);
  if (b->backing == NULL) return 0;
  for (size_t i = 0; i < b->schema->n_fields; i++) {
    int rc = column_own(&b->cols[i]);
    if (rc < 0) return rc; /* some views copied, the rest still backed */
  }
  mw_blob_unref(b->backing);
  b->backing = NULL;
  assert(mw_batch_view_bytes(b) == 0);
  return 0;
}

static uint64_t column_view_bytes(const mw_column_t *c) {
  const mw_buf_t *bufs[4] = {&c->validity, &c->values, &c->offsets, &c->item_validity};
  uint64_t n = 0;
  for (size_t i = 0; i < 4; i++) n += mw_buf_is_view(bufs[i]) ? bufs[i]->len : 0;
  for (uint32_t i = 0; i < c->n_children; i++) n += column_view_bytes(&c->children[i]);
  return n;
}

uint64_t mw_batch_view_bytes(const mw_batch_t *b) {
  uint64_t n = 0;
  for (size_t i = 0; i < b->schema->n_fields; i++) n += column_view_bytes(&b->cols[i]);
  return n;
}

/* Grow each buffer of dst (and of its children) once, to its length plus
 * the sources' (srcs[i] is the same column of source i): the appends that
 * follow then never double a buffer. A bitmap is reserved only when some
 * side has one; a few bytes of rounding per source may stay unused. */
static int column_reserve_total(mw_column_t *dst, const mw_column_t *const *srcs, size_t n) {
  size_t values = 0, offsets = 0, items = 0;
  int64_t rows = dst->length;
  bool nulls = dst->validity.len > 0;
  for (size_t i = 0; i < n; i++) {
    values += srcs[i]->values.len;
    offsets += srcs[i]->offsets.len;
    items += srcs[i]->item_validity.len;
    rows += srcs[i]->length;
    nulls |= srcs[i]->validity.len > 0;
    assert(srcs[i]->n_children == dst->n_children);
  }
  if (mw_buf_reserve_exact(&dst->values, values) < 0) return -ENOMEM;
  if (offsets > 0 && mw_buf_reserve_exact(&dst->offsets, offsets) < 0) return -ENOMEM;
  if (items > 0 && mw_buf_reserve_exact(&dst->item_validity, items + n) < 0) return -ENOMEM;
  size_t bitmap = (size_t)(rows + 7) / 8;
  if (nulls && bitmap > dst->validity.len &&
      mw_buf_reserve_exact(&dst->validity, bitmap - dst->validity.len) < 0)
    return -ENOMEM;
  if (dst->n_children == 0) return 0;
  const mw_column_t **kids = malloc(n * sizeof *kids);
  if (kids == NULL) return -ENOMEM;
  int rc = 0;
  for (uint32_t k = 0; k < dst->n_children && rc == 0; k++) {
    for (size_t i = 0; i < n; i++) kids[i] = &srcs[i]->children[k];
    rc = column_reserve_total(&dst->children[k], kids, n);
  }
  free(kids);
  return rc;
}

int mw_batch_concat(mw_batch_t *dst, const mw_batch_t *srcs, size_t n) {
  assert(dst != NULL);
  assert(srcs != NULL || n == 0);
  const int64_t before = dst->n_rows;
  mw_buf_reset(&dst->wal_ipc);
  dst->wal_ipc_head = 0;
  if (n == 0) return 0;
  const mw_column_t **cols = malloc(n * sizeof *cols);
  if (cols == NULL) return -ENOMEM;
  int rc = 0;
  size_t f = 0;
  for (; f < dst->schema->n_fields && rc == 0; f++) {
    for (size_t i = 0; i < n; i++) {
      assert(srcs[i].schema->n_fields == dst->schema->n_fields);
      cols[i] = &srcs[i].cols[f];
    }
    rc = column_reserve_total(&dst->cols[f], cols, n);
    for (size_t i = 0; i < n && rc == 0; i++)
      rc = mw_column_append_range(&dst->cols[f], cols[i], &dst->schema->fields[f], 0, srcs[i].n_rows);
  }
  free(cols);
  if (rc < 0) { /* every column back to `before` rows, the failed one too */
    for (size_t k = 0; k < f; k++) mw_column_truncate(&dst->cols[k], &dst->schema->fields[k], before);
    return rc;
  }
  for (size_t i = 0; i < n; i++) dst->n_rows += srcs[i].n_rows;
  assert(dst->schema->n_fields == 0 || dst->cols[0].length == dst->n_rows);
  return 0;
}

int mw_batch_append(mw_batch_t *dst, const mw_batch_t *src) { return mw_batch_concat(dst, src, 1); }

int mw_batch_validate(const mw_batch_t *b) {
  for (size_t i = 0; i < b->schema->n_fields; i++) {
    if (b->cols[i].length != b->n_rows) return -EINVAL;
    int rc = mw_column_validate(&b->cols[i], &b->schema->fields[i]);
    if (rc < 0) return rc;
  }
  return 0;
}

/* ------------------------------------------------------------ accounting */

/* Arrow slice payload of one column (arrow-rs get_slice_memory_size):
 * validity only when there are nulls; utf8 = 4·len offsets + value bytes
 * (8·len for large types); a list adds its offsets and items, a struct its
 * children. `under_null`: a struct above (no list between) has nulls here;
 * a not-null member then has a bitmap too in Lance's arrays (null where its
 * struct is; we keep it valid, issue 26). */
static int64_t column_lance_bytes(const mw_field_t *f, const mw_column_t *c, bool under_null) {
  bool nulls = c->null_count > 0 || (under_null && !f->nullable);
  int64_t n = nulls ? (int64_t)mw_bitmap_bytes(c->length) : 0;
  int64_t ow = mw_field_info(f)->large ? 8 : 4;
  switch (mw_field_layout(f)) {
    case MW_LAYOUT_BOOL: return n + (int64_t)mw_bitmap_bytes(c->length);
    case MW_LAYOUT_VAR: {
      if (c->length == 0) return n;
      const int32_t *off = (const int32_t *)(const void *)c->offsets.data;
      assert(off[c->length] >= off[0]);
      return n + ow * c->length + (int64_t)(off[c->length] - off[0]);
    }
    case MW_LAYOUT_LIST:
      return n + ow * c->length + column_lance_bytes(&f->children[0], &c->children[0], false);
    case MW_LAYOUT_STRUCT:
      for (uint32_t i = 0; i < f->n_children; i++)
        n += column_lance_bytes(&f->children[i], &c->children[i], nulls);
      return n;
    case MW_LAYOUT_FSL:
      n += c->item_null_count > 0 ? (int64_t)mw_bitmap_bytes(c->length * f->fsl_dim) : 0;
      return n + c->length * (int64_t)mw_type_width(f);
    default: return n + c->length * (int64_t)mw_type_width(f);
  }
}

int64_t mw_batch_lance_bytes(const mw_batch_t *b) {
  assert(b != NULL);
  assert(b->schema != NULL);
  int64_t n = MW_BATCH_LANCE_OVERHEAD_BYTES;
  for (size_t i = 0; i < b->schema->n_fields; i++) n += column_lance_bytes(&b->schema->fields[i], &b->cols[i], false);
  assert(n >= MW_BATCH_LANCE_OVERHEAD_BYTES);
  return n;
}
