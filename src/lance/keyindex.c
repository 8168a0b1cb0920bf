/*
 * keyindex.c — see keyindex.h.
 *
 * Sample: the index of a 3-row data file with int64 keys (7, 3, 7) is a
 * 2.2 data file whose two columns read back as
 *
 *   key    3  7  7
 *   offset 1  0  2
 *
 * with metadata {memwald.keyindex: "1", memwald.keyindex.rows: "3",
 * memwald.keyindex.data_file: "<name>.lance"} and a 32-byte bloom filter
 * (the smallest) in global buffer 1.
 */
#include "lance/keyindex.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lance/datafile.h"
#include "lance/pk_index.h"
#include "lance/util.h"

#define META_MAGIC "memwald.keyindex"
#define META_ROWS "memwald.keyindex.rows"
#define META_FILE "memwald.keyindex.data_file"

int mw_keyindex_name(const char *data_file, char *out, size_t out_len) {
  assert(data_file != NULL);
  assert(out != NULL);
  size_t n = strlen(data_file);
  if (n > 6 && strcmp(data_file + n - 6, ".lance") == 0) n -= 6;
  if (n == 0 || memchr(data_file, '/', n) != NULL) return -EINVAL;
  int k = snprintf(out, out_len, "%s/%.*s%s", MW_KEYINDEX_DIR, (int)n, data_file, MW_KEYINDEX_EXT);
  if (k < 0 || (size_t)k >= out_len) return -ENAMETOOLONG;
  return k;
}

/* The key types (types.c `pk`) and unsigned ints. */
static bool indexable(mw_type_t t) {
  return t == MW_T_INT32 || t == MW_T_INT64 || t == MW_T_UINT32 || t == MW_T_UINT64 ||
         mw_type_info(t)->layout == MW_LAYOUT_VAR;
}

static int index_schema(const mw_field_t *pk, mw_schema_t *s) {
  mw_schema_init(s);
  int rc = mw_schema_add(s, "key", pk->type, false);
  if (rc >= 0) rc = mw_schema_add(s, "offset", MW_T_UINT32, false);
  if (rc < 0) return rc;
  s->fields[0].id = 0;
  s->fields[1].id = 1;
  return 0;
}

/* Both columns of the index in sorted order, without a call per row (two
 * per row were most of a compaction's key index build): fixed-width keys
 * already in order (mw_pk_sort_rows returned 1: compaction's merged rows)
 * are not copied at all, the key column views them (they outlive the
 * write below); in-order strings are copied in one append; else
 * fixed-width keys are gathered straight into the column's buffer,
 * strings row by row. Offsets are written in place. */
static int gather(const mw_field_t *pk, const mw_column_t *keys, const uint32_t *rows, bool in_order,
                  int64_t n, mw_batch_t *b) {
  assert(n > 0);
  assert(keys->null_count == 0);
  assert(b->cols[1].validity.len == 0); /* no validity to keep */
  uint8_t *ov = mw_buf_extend(&b->cols[1].values, 4 * (size_t)n);
  if (ov == NULL) return -ENOMEM;
  for (int64_t i = 0; i < n; i++) mw_store_u32le(ov + 4 * i, rows[i]);
  b->cols[1].length = n;
  if (in_order && mw_field_layout(pk) == MW_LAYOUT_FIXED) {
    mw_buf_free(&b->cols[0].values);
    mw_buf_view(&b->cols[0].values, keys->values.data, mw_type_width(pk) * (size_t)n);
    b->cols[0].length = n;
  } else if (in_order) {
    int rc = mw_column_append_range(&b->cols[0], keys, pk, 0, n);
    if (rc < 0) return rc;
  } else if (mw_field_layout(pk) == MW_LAYOUT_FIXED) {
    size_t w = mw_type_width(pk);
    uint8_t *kv = mw_buf_extend(&b->cols[0].values, w * (size_t)n);
    if (kv == NULL) return -ENOMEM;
    const uint8_t *src = keys->values.data;
    if (w == 8)
      for (int64_t i = 0; i < n; i++) memcpy(kv + 8 * i, src + 8 * (size_t)rows[i], 8);
    else
      for (int64_t i = 0; i < n; i++) memcpy(kv + w * (size_t)i, src + w * (size_t)rows[i], w);
    b->cols[0].length = n;
  } else {
    for (int64_t i = 0; i < n; i++) {
      int rc = mw_column_append_range(&b->cols[0], keys, pk, rows[i], 1);
      if (rc < 0) return rc;
    }
  }
  b->n_rows = n;
  assert(b->cols[0].length == n);
  return 0;
}

int mw_keyindex_build(const mw_field_t *pk, const mw_column_t *keys, const char *data_file,
                      mw_buf_t *out, mw_err_t *err) {
  assert(pk != NULL);
  assert(keys != NULL);
  assert(data_file != NULL);
  assert(out != NULL);
  int64_t n = keys->length;
  if (!indexable(pk->type))
    return mw_err_set(err, -EINVAL, "key index: type %s cannot be indexed", mw_type_name(pk->type));
  if (n <= 0 || n > MW_KEYINDEX_MAX_ROWS || n > MW_MAX_BATCH_ROWS)
    return mw_err_set(err, -EFBIG, "key index: %" PRId64 " rows", n);
  if (keys->null_count != 0)
    return mw_err_set(err, -EINVAL, "key index: %" PRId64 " null keys", keys->null_count);
  if (strlen(data_file) >= MW_KEYINDEX_NAME_BYTES)
    return mw_err_set(err, -EINVAL, "key index: data file name too long");
  mw_schema_t s;
  mw_batch_t b = {0};
  mw_bloom_t bloom = {0};
  mw_buf_t bloom_bytes = MW_BUF_INIT;
  uint32_t *rows = malloc((size_t)n * sizeof *rows);
  uint64_t *hashes = malloc((size_t)n * sizeof *hashes);
  int64_t nulls = 0;
  char text[24];
  int rc = -ENOMEM;
  mw_schema_init(&s);
  if (rows == NULL || hashes == NULL) goto fail;
  mw_schema_free(&s);
  if ((rc = index_schema(pk, &s)) < 0) goto fail;
  snprintf(text, sizeof text, "%" PRId64, n);
  if ((rc = mw_kvs_set(&s.meta, META_MAGIC, "1", 1)) < 0 ||
      (rc = mw_kvs_set(&s.meta, META_ROWS, text, strlen(text))) < 0 ||
      (rc = mw_kvs_set(&s.meta, META_FILE, data_file, strlen(data_file))) < 0 ||
      (rc = mw_pk_sort_rows(pk, keys, rows, &nulls)) < 0)
    goto fail;
  bool in_order = rc == 1; /* compaction's merged rows: nothing was sorted */
  assert(nulls == 0);
  if ((rc = mw_batch_init(&b, &s)) < 0 || (rc = gather(pk, keys, rows, in_order, n, &b)) < 0) goto fail;
  const mw_field_t *fp = pk;
  const mw_column_t *cp = keys;
  if (rc == 0) rc = mw_pk_hash_columns(&fp, &cp, 1, n, hashes, err);
  if (rc == 0) rc = mw_bloom_init(&bloom, mw_bloom_bytes_for((uint64_t)n, MW_KEYINDEX_FPP));
  if (rc == 0) {
    mw_bloom_insert_many(&bloom, hashes, (size_t)n);
    rc = mw_bloom_encode(&bloom, &bloom_bytes);
  }
  if (rc == 0) {
    const mw_batch_t *bp = &b;
    mw_datafile_gbuf_t g = {bloom_bytes.data, bloom_bytes.len};
    rc = mw_datafile_write(&s, &bp, 1, &g, 1, NULL, out, err);
  }
fail:
  if (b.cols) mw_batch_free(&b);
  mw_schema_free(&s);
  mw_bloom_free(&bloom);
  mw_buf_free(&bloom_bytes);
  free(rows);
  free(hashes);
  if (rc < 0) mw_err_set(err, rc, "key index of %s: build failed", data_file);
  return rc;
}

void mw_keyindex_free(mw_keyindex_t *ki) {
  if (ki == NULL) return;
  if (ki->batch.cols) mw_batch_free(&ki->batch);
  mw_schema_free(&ki->schema);
  mw_bloom_free(&ki->bloom);
  memset(ki, 0, sizeof *ki);
}

/* Sorted, every offset below n exactly once, every key in the bloom. */
static int check_index(mw_keyindex_t *ki, const mw_field_t *pk, mw_err_t *err) {
  const mw_column_t *k = &ki->batch.cols[0];
  int64_t n = ki->n;
  if (k->null_count != 0 || ki->batch.cols[1].null_count != 0)
    return mw_err_set(err, -EBADMSG, "key index: null keys or offsets");
  uint8_t *seen = calloc((size_t)n / 8 + 1, 1);
  uint64_t *h = malloc((size_t)n * sizeof *h);
  int rc = seen && h ? 0 : -ENOMEM;
  for (int64_t i = 0; i < n && rc == 0; i++) {
    uint32_t o = ki->offsets[i];
    if (o >= n || mw_bit_get(seen, o))
      rc = mw_err_set(err, -EBADMSG, "key index: offset %u at row %" PRId64 " is repeated or not below %" PRId64,
                      o, i, n);
    else if (i > 0 && mw_pk_key_cmp(pk, k, i - 1, k, i) > 0)
      rc = mw_err_set(err, -EBADMSG, "key index: keys not sorted at row %" PRId64, i);
    else
      mw_bit_set(seen, o, true);
  }
  const mw_field_t *fp = pk;
  if (rc == 0) rc = mw_pk_hash_columns(&fp, &k, 1, n, h, err);
  for (int64_t i = 0; i < n && rc == 0; i++)
    if (!mw_bloom_check(&ki->bloom, h[i]))
      rc = mw_err_set(err, -EBADMSG, "key index: the key at row %" PRId64 " is not in its bloom filter", i);
  free(seen);
  free(h);
  return rc;
}

static int decode(const uint8_t *p, size_t n, const mw_field_t *pk, bool check, mw_keyindex_t *out,
                  mw_err_t *err) {
  assert(pk != NULL);
  assert(out != NULL);
  memset(out, 0, sizeof *out);
  mw_schema_init(&out->schema);
  mw_datafile_t f;
  int rc = mw_datafile_open(&f, p, n, NULL, err);
  if (rc < 0) return rc;
  const mw_kv_t *magic = mw_kvs_get(&f.schema.meta, META_MAGIC);
  const mw_kv_t *rows = mw_kvs_get(&f.schema.meta, META_ROWS);
  const mw_kv_t *file = mw_kvs_get(&f.schema.meta, META_FILE);
  char *end = NULL;
  unsigned long long nrows = rows ? strtoull((const char *)rows->value, &end, 10) : 0;
  if (magic == NULL || strcmp((const char *)magic->value, "1") != 0 || rows == NULL || *end != '\0' ||
      file == NULL || file->value_len >= MW_KEYINDEX_NAME_BYTES || f.schema.n_fields != 2 ||
      f.schema.fields[0].type != pk->type || f.schema.fields[1].type != MW_T_UINT32 ||
      nrows != f.n_rows || nrows == 0 || nrows > (unsigned long long)MW_KEYINDEX_MAX_ROWS) {
    rc = mw_err_set(err, -EBADMSG, "key index: not a memwald key index of a %s key", mw_type_name(pk->type));
    goto done;
  }
  const uint8_t *gb;
  size_t gn;
  memcpy(out->data_file, file->value, file->value_len);
  if ((rc = mw_datafile_global_buffer(&f, 1, &gb, &gn, err)) < 0 ||
      (rc = mw_bloom_decode(&out->bloom, gb, gn, err)) < 0 ||
      (rc = mw_datafile_read_batch(&f, &out->batch, err)) < 0 ||
      (rc = mw_schema_copy(&out->schema, &f.schema)) < 0)
    goto done;
  out->batch.schema = &out->schema;
  out->n = (int64_t)nrows;
  out->offsets = (const uint32_t *)(const void *)out->batch.cols[1].values.data;
  if (check) rc = check_index(out, pk, err);
done:
  mw_datafile_close(&f);
  return rc;
}

int mw_keyindex_decode(const uint8_t *p, size_t n, const mw_field_t *pk, mw_keyindex_t *out,
                       mw_err_t *err) {
  return decode(p, n, pk, true, out, err);
}

int mw_keyindex_decode_built(const uint8_t *p, size_t n, const mw_field_t *pk, mw_keyindex_t *out,
                             mw_err_t *err) {
  return decode(p, n, pk, false, out, err);
}

/* out[start..) as u32s: sorted and unique; returns how many remain. */
static int64_t sort_unique(mw_buf_t *out, size_t start) {
  size_t k = (out->len - start) / 4;
  uint32_t *v = (uint32_t *)(void *)(out->data + start);
  if (k > 1) qsort(v, k, 4, mw_u32_cmp);
  size_t w = 0;
  for (size_t i = 0; i < k; i++)
    if (w == 0 || v[i] != v[w - 1]) v[w++] = v[i];
  out->len = start + 4 * w;
  return (int64_t)w;
}

int64_t mw_keyindex_find(const mw_keyindex_t *ki, const mw_field_t *pk, const mw_column_t *probe,
                         const uint64_t *hashes, int64_t n, mw_buf_t *out) {
  assert(ki != NULL);
  assert(pk != NULL);
  assert(probe != NULL);
  assert(out != NULL);
  assert(hashes != NULL || n == 0);
  assert(out->len % 4 == 0); /* out holds u32s */
  const mw_column_t *keys = &ki->batch.cols[0];
  size_t start = out->len;
  int64_t last = ki->n - 1;
  /* The keys are sorted, so keys[0] and keys[last] bound them: a probe
   * outside that range cannot match, and two comparisons against rows
   * that stay in cache are cheaper than the bloom's random reads (new,
   * ascending keys miss every older fragment this way). */
  for (int64_t i = 0; i < n; i++) {
    if (last < 0 || mw_pk_key_cmp(pk, keys, last, probe, i) < 0 || mw_pk_key_cmp(pk, keys, 0, probe, i) > 0)
      continue;
    if (!mw_bloom_check(&ki->bloom, hashes[i])) continue;
    int64_t lo = 0, hi = ki->n; /* first row with key >= probe[i] */
    while (lo < hi) {
      int64_t mid = lo + (hi - lo) / 2;
      if (mw_pk_key_cmp(pk, keys, mid, probe, i) < 0) lo = mid + 1;
      else hi = mid;
    }
    for (; lo < ki->n && mw_pk_key_cmp(pk, keys, lo, probe, i) == 0; lo++)
      if (mw_buf_append(out, &ki->offsets[lo], 4) < 0) return -ENOMEM;
  }
  return sort_unique(out, start);
}

bool mw_keyindex_sorted(const mw_field_t *pk, const mw_column_t *probe) {
  assert(pk != NULL);
  assert(probe != NULL);
  assert(probe->length >= 0);
  for (int64_t i = 0; i < probe->length; i++)
    if (!mw_column_valid(probe, i) || (i > 0 && mw_pk_key_cmp(pk, probe, i - 1, probe, i) > 0)) return false;
  return true;
}

/* The first row in [lo, n) whose key is >= probe[i]: doubling steps from
 * lo, then a binary search inside the last step. Every row below lo is
 * known to be smaller. */
static int64_t gallop(const mw_keyindex_t *ki, const mw_field_t *pk, int64_t lo, const mw_column_t *probe,
                      int64_t i) {
  const mw_column_t *keys = &ki->batch.cols[0];
  int64_t hi = lo, step = 1;
  while (hi < ki->n && mw_pk_key_cmp(pk, keys, hi, probe, i) < 0) {
    lo = hi + 1;
    hi = lo + step < ki->n ? lo + step : ki->n;
    step *= 2;
  }
  while (lo < hi) { /* keys[lo - 1] < probe <= keys[hi] (or hi == n) */
    int64_t mid = lo + (hi - lo) / 2;
    if (mw_pk_key_cmp(pk, keys, mid, probe, i) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* One ascending run of probes against the index, offsets appended. */
static int find_run(const mw_keyindex_t *ki, const mw_field_t *pk, const mw_column_t *probe, mw_buf_t *out) {
  const mw_column_t *keys = &ki->batch.cols[0];
  int64_t to = probe->length;
  int64_t lo = 0, hi = to; /* skip the probes below the index's first key */
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (mw_pk_key_cmp(pk, probe, mid, keys, 0) < 0) lo = mid + 1;
    else hi = mid;
  }
  int64_t pos = 0; /* every key below pos is below the current probe */
  for (int64_t i = lo; i < to && pos < ki->n; i++) {
    int c = mw_pk_key_cmp(pk, keys, pos, probe, i);
    if (c > 0) continue; /* between two of the index's keys: a miss */
    if (c < 0) {
      pos = gallop(ki, pk, pos + 1, probe, i);
      if (pos == ki->n || mw_pk_key_cmp(pk, keys, pos, probe, i) != 0) continue;
    }
    for (int64_t k = pos; k < ki->n && mw_pk_key_cmp(pk, keys, k, probe, i) == 0; k++)
      if (mw_buf_append(out, &ki->offsets[k], 4) < 0) return -ENOMEM;
  }
  return 0;
}

int64_t mw_keyindex_find_sorted(const mw_keyindex_t *ki, const mw_field_t *pk, const mw_column_t *const *runs,
                                size_t n_runs, mw_buf_t *out) {
  assert(ki != NULL);
  assert(pk != NULL);
  assert(out != NULL);
  assert(runs != NULL || n_runs == 0);
  assert(out->len % 4 == 0); /* out holds u32s */
  size_t start = out->len;
  if (ki->n <= 0) return 0;
  for (size_t s = 0; s < n_runs; s++)
    if (find_run(ki, pk, runs[s], out) < 0) return -ENOMEM;
  return sort_unique(out, start); /* two runs may share a key (two shards) */
}
