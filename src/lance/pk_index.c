/*
 * pk_index.c — `_pk_index/page_data.lance` + `page_lookup.lance` (§7.1).
 *
 * Design: gather (key, row) pairs, sort them by key then row, and write both
 * files with the data-file writer (datafile_write*.c). Lance's own flusher writes
 * these as 2.0 files, but 2.2 index files read back correctly too [E✓ pk22 in
 * lance-files.md §7.1], and writing 2.2 keeps one tested writer and one
 * layout for everything memwald emits; the reader handles both.
 *
 * Sorting: integer keys are mapped to an order-preserving u64 (signed keys
 * get their sign bit flipped). Keys that already ascend (counter ids, the
 * usual case; a merge's sorted rows) are not sorted at all, and the caller
 * is told so (mw_pk_sort_rows returns 1): this is the one in-order check,
 * the key index and the merge use its answer. Else integers are
 * radix-sorted (stable, so equal keys keep row order), packed with their
 * row into one word when the key range allows, in as few passes as the
 * range needs. Strings are qsorted by memcmp then length (Arrow's byte
 * order), ties by row. Null keys first, by row.
 *
 * The same writer builds a maintained BTree index's two files for an SSTable
 * (sindex.h): pages of 4096 entries there, and a page with nulls has a null
 * min (mw_btree_shape_t), as LanceDB 0.39.0 writes them.
 *
 * page_lookup for the reference SSTable (300 int64 keys 0..263):
 *   min 0 (int64, nullable) | max 263 | null_count 0 (uint32) | page_idx 0 (uint32)
 *   schema metadata: batch_size = "8192", range_partitioned = "false"
 */
#include "lance/pk_index.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lance/datafile.h"

/* A string key for qsort: bytes and row. */
typedef struct sent {
  const uint8_t *p;
  uint32_t n;
  uint32_t row;
} sent_t;

static int cmp_str(const void *a, const void *b) {
  const sent_t *x = a, *y = b;
  uint32_t m = x->n < y->n ? x->n : y->n;
  int c = m ? memcmp(x->p, y->p, m) : 0;
  if (c) return c;
  if (x->n != y->n) return x->n < y->n ? -1 : 1;
  return x->row < y->row ? -1 : x->row > y->row;
}

/* An integer key for the wide radix sort: order-preserving u64 and row. */
typedef struct ient {
  uint64_t key;
  uint64_t row;
} ient_t;

static bool is_str(mw_type_t t) { return mw_type_info(t)->layout == MW_LAYOUT_VAR; }

static uint64_t int_key(mw_type_t t, const uint8_t *v) {
  switch (t) {
    case MW_T_INT32: return (uint64_t)(mw_load_u32le(v) ^ 0x80000000u);
    case MW_T_UINT32: return mw_load_u32le(v);
    case MW_T_INT64: return mw_load_u64le(v) ^ 0x8000000000000000ull;
    default: return mw_load_u64le(v);
  }
}

/* Digits of at most 11 bits: a pass's 2 048 counters (16 KiB) stay in L1,
 * and a 34-bit key range (16 connections of counter ids) takes 4 passes. */
#define RADIX_DIGIT_MAX_BITS 11
#define RADIX_PASSES_MAX ((64 + RADIX_DIGIT_MAX_BITS - 1) / RADIX_DIGIT_MAX_BITS)
_Static_assert(RADIX_PASSES_MAX * RADIX_DIGIT_MAX_BITS >= 64, "the passes cover a whole word");

/* Stable LSD radix sort of the words a[0..n) on their bits [lo, lo + bits)
 * (the bits below lo are the row: equal keys keep row order). Every pass's
 * counts come from one read of the input; a digit equal in every word is a
 * pass skipped. */
static int radix_sort_words(uint64_t *a, size_t n, unsigned lo, unsigned bits) {
  assert(bits >= 1);
  assert(lo + bits <= 64);
  unsigned passes = (bits + RADIX_DIGIT_MAX_BITS - 1) / RADIX_DIGIT_MAX_BITS;
  unsigned dbits = (bits + passes - 1) / passes;
  size_t radix = (size_t)1 << dbits, mask = radix - 1;
  assert(passes <= RADIX_PASSES_MAX);
  assert(dbits <= RADIX_DIGIT_MAX_BITS);
  size_t *cnt = calloc(passes * radix, sizeof *cnt);
  uint64_t *tmp = malloc((n ? n : 1) * sizeof *tmp);
  if (cnt == NULL || tmp == NULL) {
    free(cnt);
    free(tmp);
    return -ENOMEM;
  }
  for (size_t i = 0; i < n; i++)
    for (unsigned p = 0; p < passes; p++) cnt[p * radix + ((a[i] >> (lo + p * dbits)) & mask)]++;
  uint64_t *src = a, *dst = tmp;
  for (unsigned p = 0; p < passes; p++) {
    size_t *c = cnt + p * radix;
    unsigned shift = lo + p * dbits;
    if (n == 0 || c[(src[0] >> shift) & mask] == n) continue;
    size_t sum = 0;
    for (size_t d = 0; d < radix; d++) {
      size_t k = c[d];
      c[d] = sum;
      sum += k;
    }
    for (size_t i = 0; i < n; i++) dst[c[(src[i] >> shift) & mask]++] = src[i];
    uint64_t *t = src;
    src = dst;
    dst = t;
  }
  if (src != a) memcpy(a, src, n * sizeof *a);
  free(cnt);
  free(tmp);
  return 0;
}

/* Stable LSD radix sort on key (8-bit digits; digits equal in every key are
 * skipped), for key ranges too wide to share a word with the row. Rows
 * enter in increasing order, so ties stay ordered by row. */
static int radix_sort(ient_t *a, size_t n) {
  ient_t *tmp = malloc((n ? n : 1) * sizeof *tmp);
  if (tmp == NULL) return -ENOMEM;
  ient_t *src = a, *dst = tmp;
  for (unsigned shift = 0; shift < 64; shift += 8) {
    size_t cnt[256] = {0};
    for (size_t i = 0; i < n; i++) cnt[(src[i].key >> shift) & 0xff]++;
    if (n == 0 || cnt[(src[0].key >> shift) & 0xff] == n) continue;
    size_t sum = 0;
    for (unsigned d = 0; d < 256; d++) {
      size_t c = cnt[d];
      cnt[d] = sum;
      sum += c;
    }
    for (size_t i = 0; i < n; i++) dst[cnt[(src[i].key >> shift) & 0xff]++] = src[i];
    ient_t *t = src;
    src = dst;
    dst = t;
  }
  if (src != a) memcpy(a, src, n * sizeof *a);
  free(tmp);
  return 0;
}

static unsigned bit_width(uint64_t x) { return x ? 64u - (unsigned)__builtin_clzll(x) : 0u; }

/* Order the m non-null integer keys k[0..m) whose rows are rows[0..m)
 * (ascending): keys that already ascend (ids from a counter, runs merged in
 * order) keep the order they came in (returns 1); else (key - min) and the
 * row share one word when they fit, radix-sorted on the key bits alone;
 * else the 16-byte (key, row) sort (returns 0). k is overwritten. */
static int sort_int_keys(uint64_t *k, uint32_t *rows, size_t m) {
  assert(k != NULL);
  assert(rows != NULL);
  uint64_t lo = m ? k[0] : 0, hi = lo;
  bool ascending = true;
  for (size_t i = 1; i < m; i++) {
    ascending &= k[i - 1] <= k[i];
    lo = k[i] < lo ? k[i] : lo;
    hi = k[i] > hi ? k[i] : hi;
  }
  if (ascending) return 1;
  assert(m >= 2);
  assert(hi > lo);
  unsigned key_bits = bit_width(hi - lo), row_bits = bit_width(rows[m - 1]);
  if (row_bits == 0) row_bits = 1;
  if (key_bits + row_bits <= 64) {
    for (size_t i = 0; i < m; i++) k[i] = (k[i] - lo) << row_bits | rows[i];
    int rc = radix_sort_words(k, m, row_bits, key_bits);
    uint64_t mask = ((uint64_t)1 << row_bits) - 1;
    for (size_t i = 0; rc == 0 && i < m; i++) rows[i] = (uint32_t)(k[i] & mask);
    return rc;
  }
  ient_t *e = malloc(m * sizeof *e);
  if (e == NULL) return -ENOMEM;
  for (size_t i = 0; i < m; i++) e[i] = (ient_t){k[i] - lo, rows[i]};
  int rc = radix_sort(e, m);
  for (size_t i = 0; rc == 0 && i < m; i++) rows[i] = (uint32_t)e[i].row;
  free(e);
  return rc;
}

int mw_pk_sort_rows(const mw_field_t *pk, const mw_column_t *keys, uint32_t *rows,
                    int64_t *n_nulls) {
  assert(pk != NULL);
  assert(keys != NULL);
  assert(rows != NULL);
  assert(n_nulls != NULL);
  int64_t n = keys->length, nn = 0, k = 0;
  if (keys->null_count > 0)
    for (int64_t i = 0; i < n; i++)
      if (!mw_column_valid(keys, i)) rows[nn++] = (uint32_t)i;
  *n_nulls = nn;
  if (is_str(pk->type)) {
    sent_t *e = malloc((size_t)(n - nn + 1) * sizeof *e);
    if (e == NULL) return -ENOMEM;
    bool ascending = true; /* rows ascend, so a tie compares < 0 too */
    for (int64_t i = 0; i < n; i++) {
      if (nn > 0 && !mw_column_valid(keys, i)) continue;
      size_t len;
      e[k].p = mw_column_bytes(keys, i, &len);
      e[k].n = (uint32_t)len;
      e[k].row = (uint32_t)i;
      if (k > 0) ascending &= cmp_str(&e[k - 1], &e[k]) < 0;
      k++;
    }
    if (!ascending) qsort(e, (size_t)k, sizeof *e, cmp_str);
    for (int64_t i = 0; i < k; i++) rows[nn + i] = e[i].row;
    free(e);
    return ascending && nn == 0;
  }
  uint64_t *kv = malloc((size_t)(n - nn + 1) * sizeof *kv);
  if (kv == NULL) return -ENOMEM;
  size_t w = mw_type_width(pk);
  mw_type_t t = pk->type;
  for (int64_t i = 0; i < n; i++) {
    if (nn > 0 && !mw_column_valid(keys, i)) continue;
    kv[k] = int_key(t, keys->values.data + (size_t)i * w);
    rows[nn + k++] = (uint32_t)i;
  }
  assert(k == n - nn);
  int rc = sort_int_keys(kv, rows + nn, (size_t)k);
  free(kv);
  if (rc == 1 && nn > 0) rc = 0; /* in order, but the nulls moved first */
  assert(rc <= 1);
  return rc;
}

int mw_pk_key_cmp(const mw_field_t *pk, const mw_column_t *a, int64_t i, const mw_column_t *b,
                  int64_t j) {
  assert(pk != NULL);
  assert(a != NULL);
  assert(b != NULL);
  assert(i >= 0);
  assert(i < a->length);
  assert(j >= 0);
  assert(j < b->length);
  bool va = mw_column_valid(a, i), vb = mw_column_valid(b, j);
  if (!va || !vb) return va == vb ? 0 : va ? 1 : -1; /* nulls first */
  if (is_str(pk->type)) {
    size_t na, nb;
    const uint8_t *pa = mw_column_bytes(a, i, &na), *pb = mw_column_bytes(b, j, &nb);
    size_t m = na < nb ? na : nb;
    int c = m ? memcmp(pa, pb, m) : 0;
    if (c) return c < 0 ? -1 : 1;
    return na == nb ? 0 : na < nb ? -1 : 1;
  }
  size_t w = mw_type_width(pk);
  uint64_t x = int_key(pk->type, a->values.data + (size_t)i * w);
  uint64_t y = int_key(pk->type, b->values.data + (size_t)j * w);
  return x == y ? 0 : x < y ? -1 : 1;
}

/* Append the key of row `row` (or a null) to column c. */
static int put_key(mw_column_t *c, const mw_field_t *f, const mw_column_t *src, int64_t row) {
  if (!mw_column_valid(src, row)) return mw_column_append_null(c, f);
  if (is_str(f->type)) {
    size_t n;
    const uint8_t *p = mw_column_bytes(src, row, &n);
    return mw_column_append_bytes(c, p, n);
  }
  size_t w = mw_type_width(f);
  return mw_column_append_fixed(c, src->values.data + (size_t)row * w, w);
}

/* Write batch b (schema s) as one Lance data file into out when rc >= 0
 * (nothing failed building it), then free both. Returns rc or the write's. */
static int finish_file(mw_schema_t *s, mw_batch_t *b, int rc, mw_buf_t *out, mw_err_t *err) {
  assert(s != NULL);
  assert(b != NULL);
  assert(rc < 0 || b->cols != NULL);
  if (rc >= 0) {
    const mw_batch_t *bp = b;
    rc = mw_datafile_write(s, &bp, 1, NULL, 0, NULL, out, err);
  }
  if (b->cols) mw_batch_free(b);
  mw_schema_free(s);
  return rc;
}

static int build_data(const mw_field_t *pk, const mw_column_t *keys, const uint32_t *rows,
                      uint32_t frag, int64_t n, mw_buf_t *out, mw_err_t *err) {
  assert(pk != NULL);
  assert(keys != NULL);
  assert(rows != NULL || n == 0);
  assert(n >= 0);
  assert(n <= keys->length); /* each row of keys is indexed at most once */
  mw_schema_t s;
  mw_batch_t b = {0};
  mw_schema_init(&s);
  int rc = mw_schema_add(&s, "values", pk->type, true);
  if (rc >= 0) rc = mw_schema_add(&s, "ids", MW_T_UINT64, false);
  if (rc < 0) goto fail;
  s.fields[0].fsl_dim = pk->fsl_dim;
  s.fields[0].id = 0;
  s.fields[1].id = 1;
  if ((rc = mw_batch_init(&b, &s)) < 0) goto fail;
  mw_column_t *ids = &b.cols[1];
  if (mw_buf_extend(&ids->values, 8 * (size_t)n) == NULL && n > 0) {
    rc = -ENOMEM;
    goto fail;
  }
  size_t w = mw_type_width(pk);
  uint8_t *kv = NULL;
  if (!is_str(pk->type) && keys->null_count == 0 && n > 0) { /* fast path: gather fixed keys */
    if ((kv = mw_buf_extend(&b.cols[0].values, (size_t)n * w)) == NULL) {
      rc = -ENOMEM;
      goto fail;
    }
    b.cols[0].length = n;
  }
  for (int64_t i = 0; i < n; i++) {
    if (kv) memcpy(kv + (size_t)i * w, keys->values.data + (size_t)rows[i] * w, w);
    else if ((rc = put_key(&b.cols[0], &s.fields[0], keys, rows[i])) < 0) goto fail;
    mw_store_u64le(ids->values.data + 8 * i, (uint64_t)frag << 32 | rows[i]);
  }
  ids->length = n;
  b.n_rows = n;
fail:
  return finish_file(&s, &b, rc, out, err);
}

/* One row per page of page_rows entries. A page's min is its first non-null
 * key (the _pk_index's keys are never null), or null when the page holds
 * nulls and null_min is set (a maintained BTree's, as LanceDB writes it). */
static int build_lookup(const mw_field_t *pk, const mw_column_t *keys, const uint32_t *rows,
                        int64_t n_nulls, int64_t n, const mw_btree_shape_t *shape, mw_buf_t *out,
                        mw_err_t *err) {
  assert(pk != NULL);
  assert(keys != NULL);
  assert(n_nulls >= 0);
  assert(n_nulls <= n);
  assert(shape->page_rows > 0);
  assert(shape->page_rows <= MW_PK_INDEX_PAGE_ROWS);
  char bs[24];
  int bs_len = snprintf(bs, sizeof bs, "%u", shape->page_rows);
  mw_schema_t s;
  mw_batch_t b = {0};
  mw_schema_init(&s);
  int rc = mw_schema_add(&s, "min", pk->type, true);
  if (rc >= 0) rc = mw_schema_add(&s, "max", pk->type, true);
  if (rc >= 0) rc = mw_schema_add(&s, "null_count", MW_T_UINT32, false);
  if (rc >= 0) rc = mw_schema_add(&s, "page_idx", MW_T_UINT32, false);
  if (rc >= 0) rc = mw_kvs_set(&s.meta, "batch_size", bs, (size_t)bs_len);
  if (rc >= 0) rc = mw_kvs_set(&s.meta, "range_partitioned", "false", 5);
  if (rc < 0) goto fail;
  for (size_t i = 0; i < s.n_fields; i++) s.fields[i].id = (int32_t)i;
  if ((rc = mw_batch_init(&b, &s)) < 0) goto fail;
  uint32_t page = 0;
  for (int64_t at = 0; at < n; at += shape->page_rows, page++) {
    int64_t end = at + shape->page_rows < n ? at + shape->page_rows : n;
    /* nulls sort first: this page holds the ones in [at, n_nulls) */
    uint32_t nulls = (uint32_t)(n_nulls > at ? (n_nulls < end ? n_nulls : end) - at : 0);
    int64_t lo = at + nulls < end && !(shape->null_min && nulls) ? at + nulls : at;
    if ((rc = put_key(&b.cols[0], &s.fields[0], keys, rows[lo])) < 0 ||
        (rc = put_key(&b.cols[1], &s.fields[1], keys, rows[end - 1])) < 0 ||
        (rc = mw_column_append_fixed(&b.cols[2], &nulls, 4)) < 0 ||
        (rc = mw_column_append_fixed(&b.cols[3], &page, 4)) < 0)
      goto fail;
    b.n_rows++;
  }
fail:
  return finish_file(&s, &b, rc, out, err);
}

int mw_pk_index_write(const mw_field_t *pk_field, const mw_column_t *keys, uint32_t fragment_id,
                      mw_buf_t *page_data, mw_buf_t *page_lookup, mw_err_t *err) {
  static const mw_btree_shape_t pk_shape = {.page_rows = MW_PK_INDEX_PAGE_ROWS, .null_min = false};
  return mw_btree_index_write(pk_field, keys, fragment_id, &pk_shape, page_data, page_lookup, err);
}

bool mw_btree_type_ok(mw_type_t t) {
  /* the key types (types.c `pk`) plus unsigned ints, which sort the same way */
  return t == MW_T_INT32 || t == MW_T_INT64 || t == MW_T_UINT32 || t == MW_T_UINT64 || is_str(t);
}

int mw_btree_index_write(const mw_field_t *pk_field, const mw_column_t *keys, uint32_t fragment_id,
                         const mw_btree_shape_t *shape, mw_buf_t *page_data, mw_buf_t *page_lookup,
                         mw_err_t *err) {
  assert(pk_field != NULL);
  assert(keys != NULL);
  assert(page_data != NULL);
  assert(page_lookup != NULL);
  assert(shape != NULL);
  mw_type_t t = pk_field->type;
  if (!mw_btree_type_ok(t))
    return mw_err_set(err, -EINVAL, "pk field '%s': type %s cannot be indexed", pk_field->name,
                      mw_type_name(t));
  int64_t n = keys->length;
  if (n < 0 || n > UINT32_MAX || n > MW_MAX_BATCH_ROWS)
    return mw_err_set(err, -EFBIG, "pk index of %lld rows", (long long)n);
  size_t w = mw_type_width(pk_field);
  if ((!is_str(t) && keys->values.len < (size_t)n * w) ||
      (is_str(t) && keys->offsets.len < 4 * (size_t)(n + 1)))
    return mw_err_set(err, -EINVAL, "pk column '%s' shorter than %lld rows", pk_field->name, (long long)n);
  uint32_t *rows = malloc(((size_t)n + 1) * sizeof *rows);
  if (rows == NULL) return -ENOMEM;
  int64_t n_nulls = 0;
  size_t d0 = page_data->len;
  int rc = mw_pk_sort_rows(pk_field, keys, rows, &n_nulls);
  if (rc >= 0) rc = build_data(pk_field, keys, rows, fragment_id, n, page_data, err);
  if (rc >= 0) rc = build_lookup(pk_field, keys, rows, n_nulls, n, shape, page_lookup, err);
  if (rc < 0) {
    page_data->len = d0;
    mw_err_set(err, rc, "pk index for '%s' failed", pk_field->name);
  }
  free(rows);
  return rc < 0 ? rc : 0;
}
