/*
 * readback.c — see readback.h.
 *
 * Design: the data-file check decodes one column at a time (memory: one
 * decoded column beside the file and its source) and walks it against the
 * source batches in step. A column's rows are compared in two levels:
 *
 *   rows_equal       validity 64 rows at a time (skipped when neither side
 *                    has a null); the valid rows of each word compared
 *                    inline (FIXED, BOOL) or by runs (the others)
 *   run_equal        a run whose rows are all valid: FIXED one memcmp,
 *                    VAR the lengths then one memcmp of the bytes, FSL one
 *                    memcmp (items compared one by one only when a side
 *                    has item nulls), LIST the lengths then the items'
 *                    range through rows_equal, STRUCT each child's range
 *
 * so a column without nulls costs one pass of memcmp over its bytes. Only
 * when a batch differs is it walked again row by row, to name the first row
 * that differs (a refusal is rare; its message should be exact).
 *
 * Decoded bytes are never trusted beyond what the reader validated
 * (mw_datafile_read_column validates the column it returns); the source
 * batches are the MemTable's or the merge's, valid by construction.
 */
#include "lance/readback.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lance/bloom.h"
#include "lance/datafile.h"
#include "lance/deletion.h"
#include "lance/pk_index.h"

#define MW_READBACK_NAME_BYTES 256 /* "<sstable dir>/_indices" in messages */

/* ------------------------------------------------------------- columns */

static bool rows_equal(const mw_field_t *f, const mw_column_t *a, int64_t ai, const mw_column_t *b,
                       int64_t bi, int64_t n);

static bool item_valid(const mw_column_t *c, int64_t i) {
  return c->item_validity.len == 0 || mw_bit_get(c->item_validity.data, i);
}

static bool fsl_run_equal(const mw_field_t *f, const mw_column_t *a, int64_t ai, const mw_column_t *b,
                          int64_t bi, int64_t n) {
  size_t iw = mw_fsl_item_width(f), dim = (size_t)f->fsl_dim;
  if (a->item_null_count == 0 && b->item_null_count == 0)
    return memcmp(a->values.data + (size_t)ai * dim * iw, b->values.data + (size_t)bi * dim * iw,
                  (size_t)n * dim * iw) == 0;
  for (int64_t r = 0; r < n; r++)
    for (size_t k = 0; k < dim; k++) {
      int64_t x = (ai + r) * (int64_t)dim + (int64_t)k, y = (bi + r) * (int64_t)dim + (int64_t)k;
      bool va = item_valid(a, x);
      if (va != item_valid(b, y)) return false;
      if (va && memcmp(a->values.data + (size_t)x * iw, b->values.data + (size_t)y * iw, iw) != 0)
        return false;
    }
  return true;
}

/* VAR and LIST: the same lengths row by row; *a0, *b0 and *len get where
 * the run's bytes (items) start on each side and how many there are. */
static bool lengths_equal(const mw_column_t *a, int64_t ai, const mw_column_t *b, int64_t bi, int64_t n,
                          int64_t *a0, int64_t *b0, int64_t *len) {
  const int32_t *oa = (const int32_t *)(const void *)a->offsets.data;
  const int32_t *ob = (const int32_t *)(const void *)b->offsets.data;
  for (int64_t r = 0; r < n; r++)
    if (oa[ai + r + 1] - oa[ai + r] != ob[bi + r + 1] - ob[bi + r]) return false;
  *a0 = oa[ai];
  *b0 = ob[bi];
  *len = (int64_t)oa[ai + n] - oa[ai];
  return true;
}

/* Rows [ai, ai+n) of a against [bi, bi+n) of b, every one valid on both. */
static bool run_equal(const mw_field_t *f, const mw_column_t *a, int64_t ai, const mw_column_t *b,
                      int64_t bi, int64_t n) {
  assert(n > 0);
  int64_t a0, b0, len;
  switch (mw_field_layout(f)) {
    case MW_LAYOUT_FIXED: {
      size_t w = mw_type_width(f);
      return memcmp(a->values.data + (size_t)ai * w, b->values.data + (size_t)bi * w, (size_t)n * w) == 0;
    }
    case MW_LAYOUT_BOOL:
      for (int64_t r = 0; r < n; r++)
        if (mw_bit_get(a->values.data, ai + r) != mw_bit_get(b->values.data, bi + r)) return false;
      return true;
    case MW_LAYOUT_VAR:
      if (!lengths_equal(a, ai, b, bi, n, &a0, &b0, &len)) return false;
      return len == 0 || memcmp(a->values.data + a0, b->values.data + b0, (size_t)len) == 0;
    case MW_LAYOUT_FSL: return fsl_run_equal(f, a, ai, b, bi, n);
    case MW_LAYOUT_LIST:
      if (!lengths_equal(a, ai, b, bi, n, &a0, &b0, &len)) return false;
      return rows_equal(&f->children[0], &a->children[0], a0, &b->children[0], b0, len);
    case MW_LAYOUT_STRUCT:
      for (uint32_t i = 0; i < f->n_children; i++)
        if (!rows_equal(&f->children[i], &a->children[i], ai, &b->children[i], bi, n)) return false;
      return true;
  }
  assert(!"readback: a field of no layout");
  return false;
}

/* A fixed-width value, the common widths compared without a call. */
static bool fixed_equal(const uint8_t *a, const uint8_t *b, size_t w) {
  uint64_t x, y;
  switch (w) {
    case 1: return *a == *b;
    case 2: x = y = 0, memcpy(&x, a, 2), memcpy(&y, b, 2); return x == y;
    case 4: x = y = 0, memcpy(&x, a, 4), memcpy(&y, b, 4); return x == y;
    case 8: memcpy(&x, a, 8), memcpy(&y, b, 8); return x == y;
    default: return memcmp(a, b, w) == 0;
  }
}

/* The validity of rows [i, i+n) of c, n <= 64, as bits 0..n-1 (all ones
 * without a bitmap). Bits past the column's length are never read as rows. */
static uint64_t valid_bits(const mw_column_t *c, int64_t i, int64_t n) {
  assert(n > 0);
  assert(n <= 64);
  uint64_t mask = n == 64 ? ~0ull : (1ull << n) - 1;
  if (c->validity.len == 0) return mask;
  size_t byte = (size_t)(i >> 3), have = c->validity.len - byte;
  unsigned shift = (unsigned)(i & 7);
  uint64_t w = 0;
  memcpy(&w, c->validity.data + byte, have < 8 ? have : 8);
  w >>= shift;
  if (shift > 0 && have > 8) w |= (uint64_t)c->validity.data[byte + 8] << (64 - shift);
  return w & mask;
}

/* The valid rows `bits` of rows [ai, ai+64) / [bi, bi+64): FIXED and BOOL
 * row by row without a call, the others by runs of valid rows (between
 * nulls runs are short: a memcmp call per run of a fixed-width column cost
 * more than its compare, measured). */
static bool valid_rows_equal(const mw_field_t *f, const mw_column_t *a, int64_t ai, const mw_column_t *b,
                             int64_t bi, uint64_t bits) {
  mw_layout_t l = mw_field_layout(f);
  size_t w = l == MW_LAYOUT_FIXED ? mw_type_width(f) : 0;
  while (bits != 0) {
    int64_t r = __builtin_ctzll(bits);
    if (l == MW_LAYOUT_FIXED || l == MW_LAYOUT_BOOL) {
      bits &= bits - 1;
      bool same = w ? fixed_equal(a->values.data + (size_t)(ai + r) * w, b->values.data + (size_t)(bi + r) * w, w)
                    : mw_bit_get(a->values.data, ai + r) == mw_bit_get(b->values.data, bi + r);
      if (!same) return false;
      continue;
    }
    uint64_t rest = ~(bits >> r);
    int64_t len = rest == 0 ? 64 - r : __builtin_ctzll(rest);
    if (!run_equal(f, a, ai + r, b, bi + r, len)) return false;
    bits &= len + r >= 64 ? 0 : ~0ull << (len + r);
  }
  return true;
}

/* Rows [ai, ai+n) of a (read back) against [bi, bi+n) of b (written):
 * the same validity, and the same value in every valid row; 64 rows at a
 * time when either side has nulls. */
static bool rows_equal(const mw_field_t *f, const mw_column_t *a, int64_t ai, const mw_column_t *b,
                       int64_t bi, int64_t n) {
  assert(ai >= 0);
  assert(ai + n <= a->length);
  assert(bi >= 0);
  assert(bi + n <= b->length);
  if (n == 0) return true;
  if (a->null_count == 0 && b->null_count == 0) return run_equal(f, a, ai, b, bi, n);
  for (int64_t r = 0; r < n; r += 64) {
    int64_t k = n - r < 64 ? n - r : 64;
    uint64_t va = valid_bits(a, ai + r, k);
    if (va != valid_bits(b, bi + r, k)) return false;
    if (!valid_rows_equal(f, a, ai + r, b, bi + r, va)) return false;
  }
  return true;
}

/* Column `c` read back (`got`) against every batch's column c. */
static int column_check(const mw_field_t *f, size_t c, const mw_column_t *got,
                        const mw_batch_t *const *batches, size_t n, const char *name, mw_err_t *err) {
  int64_t at = 0;
  for (size_t i = 0; i < n; i++) {
    const mw_column_t *want = &batches[i]->cols[c];
    if (rows_equal(f, got, at, want, 0, want->length)) {
      at += want->length;
      continue;
    }
    for (int64_t r = 0; r < want->length; r++) { /* name the first row that differs */
      if (rows_equal(f, got, at + r, want, r, 1)) continue;
      bool vg = mw_column_valid(got, at + r), vw = mw_column_valid(want, r);
      return mw_err_set(err, -EBADMSG, "read-back of %s refused: column '%s' row %" PRId64 ": %s", name,
                        f->name, at + r,
                        vg == vw ? "the value read back differs from the one written"
                        : vw     ? "written as a value, read back as null"
                                 : "written as null, read back as a value");
    }
    assert(!"readback: a batch differs but none of its rows");
    return mw_err_set(err, -EBADMSG, "read-back of %s refused: column '%s' rows %" PRId64 "..%" PRId64 " differ",
                      name, f->name, at, at + want->length - 1);
  }
  assert(at == got->length);
  return 0;
}

/* ----------------------------------------------------------- data file */

static int open_fail(int rc, const char *name, const mw_err_t *why, mw_err_t *err) {
  if (rc == -ENOMEM) return mw_err_set(err, rc, "read-back of %s: out of memory", name);
  return mw_err_set(err, -EBADMSG, "read-back of %s refused: %s", name, why->msg[0] ? why->msg : mw_strerror(rc));
}

/* The file's rows and fields against the source's. */
static int shape_check(const mw_datafile_t *df, const mw_schema_t *schema, int64_t rows, const char *name,
                       mw_err_t *err) {
  if (df->n_rows != (uint64_t)rows)
    return mw_err_set(err, -EBADMSG, "read-back of %s refused: %" PRIu64 " rows, %" PRId64 " written", name,
                      df->n_rows, rows);
  if (!mw_schema_equal(&df->schema, schema))
    return mw_err_set(err, -EBADMSG, "read-back of %s refused: its fields are not the %zu written", name,
                      schema->n_fields);
  for (size_t i = 0; i < schema->n_fields; i++)
    if (schema->fields[i].id >= 0 && df->schema.fields[i].id != schema->fields[i].id)
      return mw_err_set(err, -EBADMSG, "read-back of %s refused: field '%s' has id %d, %d written", name,
                        schema->fields[i].name, df->schema.fields[i].id, schema->fields[i].id);
  return 0;
}

int mw_readback_data_file(const mw_schema_t *schema, const mw_batch_t *const *batches, size_t n,
                          const uint8_t *data, size_t len, const char *name, mw_err_t *err) {
  assert(schema != NULL);
  assert(name != NULL);
  assert(batches != NULL || n == 0);
  int64_t rows = 0;
  uint64_t source_bytes = 0; /* caps a column's decode (a corrupt size) */
  for (size_t i = 0; i < n; i++) {
    rows += batches[i]->n_rows;
    uint64_t b = 0;
    for (size_t c = 0; c < schema->n_fields; c++) b += mw_column_mem_bytes(&batches[i]->cols[c]);
    source_bytes += b;
  }
  mw_datafile_read_opts_t ro = {.max_rows = (uint64_t)rows + 1,
                                .max_column_bytes = 2 * source_bytes + MW_DATAFILE_DEFAULT_MAX_COLUMN_BYTES};
  mw_datafile_t df;
  mw_err_t why = {0};
  int rc = mw_datafile_open(&df, data, len, &ro, &why);
  if (rc < 0) {
    mw_datafile_close(&df);
    return open_fail(rc, name, &why, err);
  }
  rc = shape_check(&df, schema, rows, name, err);
  for (size_t c = 0; rc == 0 && c < schema->n_fields; c++) {
    mw_column_t got;
    rc = mw_column_init(&got, &df.schema.fields[c]);
    if (rc == 0 && (rc = mw_datafile_read_column(&df, c, &got, &why)) < 0) rc = open_fail(rc, name, &why, err);
    else if (rc == 0 && got.length != rows)
      rc = mw_err_set(err, -EBADMSG, "read-back of %s refused: column '%s' has %" PRId64 " of %" PRId64 " rows",
                      name, schema->fields[c].name, got.length, rows);
    else if (rc == 0) rc = column_check(&schema->fields[c], c, &got, batches, n, name, err);
    mw_column_free(&got);
  }
  mw_datafile_close(&df);
  if (rc == -ENOMEM) mw_err_set(err, rc, "read-back of %s: out of memory", name);
  return rc;
}

/* ---------------------------------------------------- bloom, deletions */

int mw_readback_bloom(const uint8_t *p, size_t len, const uint64_t *hashes, int64_t n, const char *name,
                      mw_err_t *err) {
  assert(name != NULL);
  assert(hashes != NULL || n == 0);
  mw_bloom_t bf = {0};
  mw_err_t why = {0};
  int rc = mw_bloom_decode(&bf, p, len, &why);
  if (rc < 0) {
    mw_bloom_free(&bf);
    return open_fail(rc, name, &why, err);
  }
  for (int64_t i = 0; rc == 0 && i < n; i++)
    if (!mw_bloom_check(&bf, hashes[i]))
      rc = mw_err_set(err, -EBADMSG, "read-back of %s refused: row %" PRId64 "'s key is not in it", name, i);
  mw_bloom_free(&bf);
  return rc;
}

int mw_readback_deletions(const uint8_t *p, size_t len, uint64_t rows, const uint32_t *offsets, size_t n,
                          const char *name, mw_err_t *err) {
  assert(name != NULL);
  assert(offsets != NULL || n == 0);
  uint32_t *got = NULL;
  size_t n_got = 0;
  mw_err_t why = {0};
  int rc = mw_deletion_decode(p, len, rows, &got, &n_got, &why);
  if (rc < 0) rc = open_fail(rc, name, &why, err);
  else if (n_got != n)
    rc = mw_err_set(err, -EBADMSG, "read-back of %s refused: %zu offsets, %zu written", name, n_got, n);
  for (size_t i = 0; rc == 0 && i < n; i++)
    if (got[i] != offsets[i])
      rc = mw_err_set(err, -EBADMSG, "read-back of %s refused: offset %zu is %" PRIu32 ", %" PRIu32 " written",
                      name, i, got[i], offsets[i]);
  free(got);
  return rc < 0 ? rc : 0;
}

/* ------------------------------------------------------------ PK index */

static int open_batch(const mw_buf_t *b, mw_datafile_t *df, mw_batch_t *out, uint64_t rows, const char *name,
                      mw_err_t *err) {
  mw_datafile_read_opts_t ro = {.max_rows = rows + 1};
  mw_err_t why = {0};
  memset(out, 0, sizeof *out);
  int rc = mw_datafile_open(df, b->data, b->len, &ro, &why);
  if (rc == 0) rc = mw_datafile_read_batch(df, out, &why);
  if (rc < 0) return open_fail(rc, name, &why, err);
  if (df->n_rows != rows || df->schema.n_fields < 2)
    return mw_err_set(err, -EBADMSG, "read-back of %s refused: %" PRIu64 " rows of %zu columns, %" PRIu64
                      " rows written", name, df->n_rows, df->schema.n_fields, rows);
  return 0;
}

/* An int32/int64/uint32/uint64 key as a value that orders as the key does. */
static int64_t int_key(const mw_field_t *pk, const uint8_t *p) {
  switch (pk->type) {
    case MW_T_INT32: { int32_t v; memcpy(&v, p, 4); return v; }
    case MW_T_UINT32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case MW_T_UINT64: { uint64_t v; memcpy(&v, p, 8); return (int64_t)(v ^ 0x8000000000000000ull); }
    default: { int64_t v; memcpy(&v, p, 8); return v; }
  }
}

/* Entry i of page_data against row `id` of the keys, and after entry i-1;
 * w: the keys' width, 0 for strings. NULL, or what is wrong. */
static const char *pk_entry_check(const mw_field_t *pk, size_t w, const mw_column_t *keys, const mw_column_t *vals,
                                  int64_t i, int64_t id) {
  bool valid = mw_column_valid(vals, i);
  if (valid != mw_column_valid(keys, id)) return "is not the key of row";
  if (!valid) return NULL;
  const uint8_t *v = vals->values.data;
  if (w ? !fixed_equal(v + (size_t)i * w, keys->values.data + (size_t)id * w, w)
        : mw_pk_key_cmp(pk, vals, i, keys, id) != 0)
    return "is not the key of row";
  if (i == 0 || !mw_column_valid(vals, i - 1)) return NULL;
  bool ordered = w ? int_key(pk, v + (size_t)(i - 1) * w) <= int_key(pk, v + (size_t)i * w)
                   : mw_pk_key_cmp(pk, vals, i - 1, vals, i) <= 0;
  return ordered ? NULL : "is out of order, at row";
}

/* page_data: (values, ids) sorted by key, every row once, key i = keys[ids[i]]. */
static int pk_data_check(const mw_field_t *pk, const mw_column_t *keys, const mw_batch_t *d, const char *name,
                         mw_err_t *err) {
  int64_t n = keys->length;
  const mw_column_t *vals = &d->cols[0], *ids = &d->cols[1];
  if (d->schema->fields[0].type != pk->type || d->schema->fields[1].type != MW_T_UINT64 || ids->null_count)
    return mw_err_set(err, -EBADMSG, "read-back of %s refused: columns are not (key, uint64 id)", name);
  uint8_t *seen = calloc((size_t)n / 8 + 1, 1);
  if (seen == NULL) return -ENOMEM;
  size_t w = mw_field_layout(pk) == MW_LAYOUT_FIXED ? mw_type_width(pk) : 0;
  int rc = 0;
  for (int64_t i = 0; rc == 0 && i < n; i++) {
    uint64_t id;
    memcpy(&id, ids->values.data + 8 * i, 8);
    bool fresh = id < (uint64_t)n && !mw_bit_get(seen, (int64_t)id);
    const char *why = fresh ? pk_entry_check(pk, w, keys, vals, i, (int64_t)id) : "names a row out of range or twice:";
    if (why != NULL)
      rc = mw_err_set(err, -EBADMSG, "read-back of %s refused: entry %" PRId64 " %s %" PRIu64, name, i, why, id);
    else mw_bit_set(seen, (int64_t)id, true);
  }
  free(seen);
  return rc;
}

/* page_lookup: one row per page, min and max its first and last key. */
static int pk_lookup_check(const mw_field_t *pk, const mw_column_t *vals, const mw_batch_t *l,
                           const char *name, mw_err_t *err) {
  if (l->schema->n_fields < 2 || l->schema->fields[0].type != pk->type || l->schema->fields[1].type != pk->type)
    return mw_err_set(err, -EBADMSG, "read-back of %s refused: columns are not (min, max, ...)", name);
  if (vals->null_count > 0) return 0; /* null keys: pages' min and max skip them */
  for (int64_t p = 0; p < l->n_rows; p++) {
    int64_t first = p * MW_PK_INDEX_PAGE_ROWS, last = first + MW_PK_INDEX_PAGE_ROWS - 1;
    if (last >= vals->length) last = vals->length - 1;
    if (!mw_column_valid(&l->cols[0], p) || !mw_column_valid(&l->cols[1], p) ||
        mw_pk_key_cmp(pk, &l->cols[0], p, vals, first) != 0 || mw_pk_key_cmp(pk, &l->cols[1], p, vals, last) != 0)
      return mw_err_set(err, -EBADMSG, "read-back of %s refused: page %" PRId64 "'s min or max is not its keys'",
                        name, p);
  }
  return 0;
}

int mw_readback_pk_index(const mw_field_t *pk, const mw_column_t *keys, const mw_buf_t *page_data,
                         const mw_buf_t *page_lookup, const char *dir, mw_err_t *err) {
  assert(pk != NULL);
  assert(keys != NULL);
  assert(dir != NULL);
  assert(page_data != NULL);
  assert(page_lookup != NULL);
  char dname[160], lname[160];
  snprintf(dname, sizeof dname, "%s/_pk_index/" MW_PK_INDEX_DATA_FILE, dir);
  snprintf(lname, sizeof lname, "%s/_pk_index/" MW_PK_INDEX_LOOKUP_FILE, dir);
  uint64_t n = (uint64_t)keys->length, pages = (n + MW_PK_INDEX_PAGE_ROWS - 1) / MW_PK_INDEX_PAGE_ROWS;
  mw_datafile_t df, lf;
  mw_batch_t d, l;
  memset(&l, 0, sizeof l);
  memset(&lf, 0, sizeof lf); /* closed on every path, opened or not */
  mw_schema_init(&lf.schema);
  int rc = open_batch(page_data, &df, &d, n, dname, err);
  if (rc == 0) rc = pk_data_check(pk, keys, &d, dname, err);
  if (rc == 0) rc = open_batch(page_lookup, &lf, &l, pages, lname, err);
  if (rc == 0) rc = pk_lookup_check(pk, &d.cols[0], &l, lname, err);
  if (l.cols) mw_batch_free(&l);
  mw_datafile_close(&lf);
  if (d.cols) mw_batch_free(&d);
  mw_datafile_close(&df);
  if (rc == -ENOMEM) mw_err_set(err, rc, "read-back of %s: out of memory", dname);
  return rc;
}

/* ------------------------------------------------------ vector index */

/* What the files say against what was built: -EBADMSG naming it, or 0. */
static int vindex_built_check(const mw_vindex_info_t *info, const mw_vindex_input_t *in,
                              const mw_vindex_t *built, mw_err_t *err) {
  if (info->dist != in->dist) return mw_err_set(err, -EBADMSG, "distance type %d, %d built", (int)info->dist, (int)in->dist);
  if (info->nodes != built->nodes) return mw_err_set(err, -EBADMSG, "%u nodes, %u built", info->nodes, built->nodes);
  if (info->entry_point != built->entry_point)
    return mw_err_set(err, -EBADMSG, "entry point %u, %u built", info->entry_point, built->entry_point);
  if (info->bounds.lo != built->bounds.lo || info->bounds.hi != built->bounds.hi)
    return mw_err_set(err, -EBADMSG, "SQ bounds [%g, %g], [%g, %g] built", info->bounds.lo, info->bounds.hi,
                      built->bounds.lo, built->bounds.hi);
  return mw_vindex_check_rows(info, in, err);
}

int mw_readback_vindex(const mw_vindex_input_t *in, const mw_vindex_t *built, const char *dir,
                       mw_err_t *err) {
  assert(in != NULL);
  assert(built != NULL);
  assert(dir != NULL);
  mw_vindex_info_t info = {0};
  mw_err_t why = {0};
  int rc = mw_vindex_check(built->index_idx.data, built->index_idx.len, built->aux_idx.data, built->aux_idx.len,
                           &info, &why);
  if (rc == 0) rc = vindex_built_check(&info, in, built, &why);
  mw_vindex_info_free(&info);
  char name[MW_READBACK_NAME_BYTES];
  snprintf(name, sizeof name, "%s/_indices", dir);
  return rc < 0 ? open_fail(rc, name, &why, err) : 0;
}
