/*
 * test_ipc.c — Arrow IPC stream codec (src/lance/ipc.c).
 *
 * Golden: every WAL entry of the reference vectors decodes and re-encodes to
 * identical bytes; values spot-checked against vectors/README.md. Round trips
 * of every type with and without nulls, several batches, zstd. Robustness:
 * every prefix and many byte flips of a real entry give an error or a valid
 * decode (run under ASan in the sanitizer build).
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "cases.h"

#include "lance/ipc.h"
#include "testutil.h"

/* ---------------------------------------------------------------- helpers */

static size_t wal_files(char ***paths) {
  char **all;
  size_t n = tu_find_files(tu_vectors_dir(), ".arrow", &all), k = 0;
  for (size_t i = 0; i < n; i++) {
    if (strstr(all[i], "/_mem_wal/") && strstr(all[i], "/wal/")) all[k++] = all[i];
    else free(all[i]);
  }
  *paths = all;
  return k;
}

static uint8_t *read_wal(const char *vector, size_t pos, size_t *len) {
  /* bit-reversed position, 64 binary digits */
  char name[80];
  for (int i = 0; i < 64; i++) name[i] = (char)('0' + ((pos >> i) & 1));
  memcpy(name + 64, ".arrow", 7);
  char *path = tu_strf("%s/%s/t.lance/_mem_wal/aa48498d-ac91-59e2-8452-69f46010ace2/wal/%s",
                       tu_vectors_dir(), vector, name);
  uint8_t *p = tu_read_file(path, len);
  if (p == NULL) fail_msg("cannot read %s", path);
  free(path);
  return p;
}

static const char *meta_str(const mw_kvs_t *kvs, const char *key) {
  const mw_kv_t *kv = mw_kvs_get(kvs, key);
  return kv ? (const char *)kv->value : NULL;
}

static int64_t i64_at(const mw_column_t *c, int64_t r) {
  int64_t v;
  memcpy(&v, c->values.data + 8 * r, 8);
  return v;
}

/* Semantic column equality (validity by bit, values of valid rows). */
static void assert_column_equal(const mw_field_t *f, const mw_column_t *a, const mw_column_t *b) {
  assert_int_equal(a->length, b->length);
  assert_int_equal(a->null_count, b->null_count);
  for (int64_t r = 0; r < a->length; r++)
    assert_int_equal(mw_column_valid(a, r), mw_column_valid(b, r));
  switch (f->type) {
    case MW_T_UTF8:
    case MW_T_BINARY:
      assert_int_equal(a->offsets.len, b->offsets.len);
      assert_memory_equal(a->offsets.data, b->offsets.data, a->offsets.len);
      break;
    case MW_T_FSL:
      assert_int_equal(a->item_null_count, b->item_null_count);
      for (int64_t i = 0; i < a->length * f->fsl_dim; i++) {
        bool va = a->item_validity.len == 0 || mw_bit_get(a->item_validity.data, i);
        bool vb = b->item_validity.len == 0 || mw_bit_get(b->item_validity.data, i);
        assert_int_equal(va, vb);
      }
      break;
    default: break;
  }
  assert_int_equal(a->values.len, b->values.len);
  if (a->values.len) assert_memory_equal(a->values.data, b->values.data, a->values.len);
}

static void assert_kvs_equal(const mw_kvs_t *a, const mw_kvs_t *b) {
  assert_int_equal(a->n, b->n);
  for (size_t i = 0; i < a->n; i++) {
    assert_string_equal(a->items[i].key, b->items[i].key);
    assert_int_equal(a->items[i].value_len, b->items[i].value_len);
    assert_memory_equal(a->items[i].value, b->items[i].value, a->items[i].value_len);
  }
}

static void assert_schema_equal(const mw_schema_t *a, const mw_schema_t *b) {
  assert_true(mw_schema_equal(a, b));
  for (size_t i = 0; i < a->n_fields; i++) {
    assert_int_equal(a->fields[i].pk_position, b->fields[i].pk_position);
    assert_int_equal(a->fields[i].item_nullable, b->fields[i].item_nullable);
    const mw_field_t *fa = &a->fields[i], *fb = &b->fields[i];
    if (fa->pk_position && !mw_kvs_get(&fa->meta, MW_IPC_PK_POSITION_KEY)) {
      /* the encoder appended the key */
      assert_int_equal(fb->meta.n, fa->meta.n + 1);
      assert_string_equal(fb->meta.items[fa->meta.n].key, MW_IPC_PK_POSITION_KEY);
      mw_kvs_t head = {fb->meta.items, fa->meta.n};
      assert_kvs_equal(&fa->meta, &head);
    } else {
      assert_kvs_equal(&fa->meta, &fb->meta);
    }
  }
  assert_kvs_equal(&a->meta, &b->meta);
}

/* Encode, decode, compare with the source batches. */
static void roundtrip(const mw_schema_t *s, const mw_batch_t *const *bs, size_t n,
                      const mw_ipc_opts_t *opts, mw_buf_t *enc) {
  mw_err_t err = {0};
  mw_ipc_stream_t st;
  enc->len = 0;
  int rc = mw_ipc_encode(s, bs, n, opts, enc, &err);
  if (rc) fail_msg("encode: %s", err.msg);
  rc = mw_ipc_decode(enc->data, enc->len, NULL, &st, &err);
  if (rc) fail_msg("decode: %s", err.msg);
  assert_schema_equal(s, &st.schema);
  assert_int_equal(st.n_batches, n);
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(mw_batch_validate(&st.batches[i]), 0);
    assert_int_equal(st.batches[i].n_rows, bs[i]->n_rows);
    for (size_t c = 0; c < s->n_fields; c++)
      assert_column_equal(&s->fields[c], &bs[i]->cols[c], &st.batches[i].cols[c]);
  }
  mw_ipc_stream_free(&st);
}

/* A schema with every type, nullable and not. */
static void all_types_schema(mw_schema_t *s) {
  mw_schema_init(s);
  static const mw_type_t types[] = {MW_T_INT32, MW_T_INT64, MW_T_UINT32, MW_T_UINT64,
                                    MW_T_FLOAT32, MW_T_FLOAT64, MW_T_BOOL, MW_T_UTF8,
                                    MW_T_BINARY, MW_T_FSL};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    for (int nullable = 0; nullable < 2; nullable++) {
      char name[32];
      snprintf(name, sizeof name, "%s_%s", mw_type_name(types[i]), nullable ? "n" : "nn");
      int idx = mw_schema_add(s, name, types[i], nullable);
      assert_true(idx >= 0);
      if (types[i] == MW_T_FSL) s->fields[idx].fsl_dim = 3;
    }
  }
  s->fields[1].pk_position = 1; /* key appended by the encoder */
  assert_int_equal(mw_kvs_set(&s->fields[2].meta, "a", "x", 1), 0);
  assert_int_equal(mw_kvs_set(&s->fields[2].meta, "b", "", 0), 0);
  assert_int_equal(mw_kvs_set(&s->meta, "writer_epoch", "7", 1), 0);
  assert_int_equal(mw_kvs_set(&s->meta, "zz", "yy", 2), 0);
}

/* Fill `rows` rows; every 3rd row of a nullable column is null when `nulls`. */
static void fill_batch(const mw_schema_t *s, mw_batch_t *b, int64_t rows, bool nulls, int seed) {
  assert_int_equal(mw_batch_init(b, s), 0);
  for (int64_t r = 0; r < rows; r++) {
    for (size_t c = 0; c < s->n_fields; c++) {
      const mw_field_t *f = &s->fields[c];
      mw_column_t *col = &b->cols[c];
      int64_t v = r * 7 + seed;
      if (f->nullable && nulls && (r + (int64_t)c) % 3 == 0) {
        assert_int_equal(mw_column_append_null(col, f), 0);
        continue;
      }
      switch (f->type) {
        case MW_T_INT32: case MW_T_UINT32: {
          int32_t x = (int32_t)v;
          assert_int_equal(mw_column_append_fixed(col, &x, 4), 0);
          break;
        }
        case MW_T_INT64: case MW_T_UINT64:
          assert_int_equal(mw_column_append_fixed(col, &v, 8), 0);
          break;
        case MW_T_FLOAT32: {
          float x = (float)v * 0.5f;
          assert_int_equal(mw_column_append_fixed(col, &x, 4), 0);
          break;
        }
        case MW_T_FLOAT64: {
          double x = (double)v * -0.25;
          assert_int_equal(mw_column_append_fixed(col, &x, 8), 0);
          break;
        }
        case MW_T_BOOL: assert_int_equal(mw_column_append_bool(col, v % 2), 0); break;
        case MW_T_UTF8: case MW_T_BINARY: {
          char txt[32];
          int n = r % 4 == 1 ? 0 : snprintf(txt, sizeof txt, "s%" PRId64, v); /* empty strings */
          assert_int_equal(mw_column_append_bytes(col, txt, (size_t)n), 0);
          break;
        }
        case MW_T_FSL: {
          float x[3] = {(float)v, (float)v + 1, (float)v + 2};
          assert_int_equal(mw_column_append_fixed(col, x, 12), 0);
          break;
        }
        default: fail_msg("fill_batch: type %s", mw_type_name(f->type));
      }
    }
  }
  b->n_rows = rows;
  /* FSL null rows: the child's items are null too (as arrow-rs builders do). */
  for (size_t c = 0; c < s->n_fields; c++) {
    mw_column_t *col = &b->cols[c];
    const mw_field_t *f = &s->fields[c];
    if (f->type != MW_T_FSL || col->null_count == 0) continue;
    int64_t items = rows * f->fsl_dim;
    assert_int_equal(mw_buf_fill(&col->item_validity, 0, (size_t)(items + 7) / 8), 0);
    for (int64_t r = 0; r < rows; r++)
      for (int k = 0; k < f->fsl_dim; k++) {
        bool valid = mw_column_valid(col, r);
        mw_bit_set(col->item_validity.data, r * f->fsl_dim + k, valid);
        col->item_null_count += !valid;
      }
  }
  assert_int_equal(mw_batch_validate(b), 0);
}

/* ------------------------------------------------------------------ golden */

static void test_golden_reencode(void **state) {
  (void)state;
  char **paths;
  size_t n = wal_files(&paths), same = 0;
  assert_true(n >= 40);
  mw_ipc_writer_t w;
  mw_ipc_writer_init(&w);
  mw_buf_t out = MW_BUF_INIT;
  for (size_t i = 0; i < n; i++) {
    size_t len;
    uint8_t *p = tu_read_file(paths[i], &len);
    assert_non_null(p);
    mw_ipc_stream_t st;
    mw_err_t err = {0};
    int rc = mw_ipc_decode(p, len, NULL, &st, &err);
    if (rc) fail_msg("%s: decode: %s", paths[i], err.msg);
    const mw_batch_t *bs[64];
    assert_true(st.n_batches <= 64);
    for (size_t k = 0; k < st.n_batches; k++) bs[k] = &st.batches[k];
    mw_buf_reset(&out);
    rc = mw_ipc_writer_encode(&w, &st.schema, bs, st.n_batches, NULL, &out, &err);
    if (rc) fail_msg("%s: encode: %s", paths[i], err.msg);
    size_t diff = 0;
    while (diff < len && diff < out.len && p[diff] == out.data[diff]) diff++;
    bool ok = out.len == len && diff == len;
    printf("# %s %s (%zu bytes, %zu batches)", ok ? "identical" : "DIFFERS", paths[i], len,
           st.n_batches);
    if (!ok) printf(" first difference at byte %zu, lengths %zu vs %zu", diff, len, out.len);
    printf("\n");
    same += ok;
    mw_ipc_stream_free(&st);
    free(p);
  }
  printf("# %zu of %zu WAL entries re-encode byte-identically\n", same, n);
  assert_int_equal(same, n);
  mw_buf_free(&out);
  mw_ipc_writer_free(&w);
  tu_free_names(paths, n);
}

static void test_golden_values(void **state) {
  (void)state;
  static const int64_t first[] = {50, 123, 193}, last[] = {122, 192, 263};
  for (size_t pos = 1; pos <= 3; pos++) {
    size_t len;
    uint8_t *p = read_wal("unsharded-small", pos, &len);
    mw_ipc_stream_t st;
    mw_err_t err = {0};
    assert_int_equal(mw_ipc_decode(p, len, NULL, &st, &err), 0);
    assert_int_equal(st.schema.n_fields, 5);
    static const char *names[] = {"id", "name", "v", "vec", "_tombstone"};
    static const mw_type_t types[] = {MW_T_INT64, MW_T_UTF8, MW_T_FLOAT64, MW_T_FSL, MW_T_BOOL};
    for (size_t i = 0; i < 5; i++) {
      assert_string_equal(st.schema.fields[i].name, names[i]);
      assert_int_equal(st.schema.fields[i].type, types[i]);
    }
    assert_false(st.schema.fields[0].nullable);
    assert_int_equal(st.schema.fields[0].pk_position, 1);
    assert_int_equal(st.schema.fields[1].pk_position, 0);
    assert_int_equal(st.schema.fields[3].fsl_dim, 8);
    assert_true(st.schema.fields[3].item_nullable);
    assert_false(st.schema.fields[4].nullable);
    uint64_t epoch = 0;
    assert_int_equal(mw_ipc_writer_epoch(&st.schema, &epoch, NULL), 0);
    assert_int_equal(epoch, 1);
    assert_false(mw_ipc_is_fence_sentinel(&st.schema));
    assert_int_equal(st.n_batches, 1);
    const mw_batch_t *b = &st.batches[0];
    assert_int_equal(b->n_rows, 100);
    assert_int_equal(mw_batch_validate(b), 0);
    assert_int_equal(i64_at(&b->cols[0], 0), first[pos - 1]);
    assert_int_equal(i64_at(&b->cols[0], 99), last[pos - 1]);
    /* _tombstone is false everywhere */
    for (int64_t r = 0; r < 100; r++) assert_false(mw_bit_get(b->cols[4].values.data, r));
    mw_ipc_stream_free(&st);
    free(p);
  }
  /* position 1 of unsharded-small: the dump in vectors/README (nulls 7,7,4; child 32) */
  size_t len;
  uint8_t *p = read_wal("unsharded-small", 1, &len);
  mw_ipc_stream_t st;
  assert_int_equal(mw_ipc_decode(p, len, NULL, &st, NULL), 0);
  assert_int_equal(st.batches[0].cols[1].null_count, 7);
  assert_int_equal(st.batches[0].cols[2].null_count, 7);
  assert_int_equal(st.batches[0].cols[3].null_count, 4);
  assert_int_equal(st.batches[0].cols[3].item_null_count, 32);
  mw_ipc_stream_free(&st);
  free(p);
}

static void test_golden_sentinel(void **state) {
  (void)state;
  size_t len;
  uint8_t *p = read_wal("unsharded-epochs", 3, &len); /* epoch 2's sentinel */
  assert_int_equal(len, 200);
  mw_ipc_stream_t st;
  assert_int_equal(mw_ipc_decode(p, len, NULL, &st, NULL), 0);
  assert_int_equal(st.schema.n_fields, 0);
  assert_int_equal(st.n_batches, 0);
  assert_true(mw_ipc_is_fence_sentinel(&st.schema));
  assert_string_equal(meta_str(&st.schema.meta, "fence_sentinel"), "true");
  uint64_t epoch;
  assert_int_equal(mw_ipc_writer_epoch(&st.schema, &epoch, NULL), 0);
  assert_int_equal(epoch, 2);
  mw_buf_t out = MW_BUF_INIT;
  assert_int_equal(mw_ipc_fence_sentinel(2, &out, NULL), 0);
  assert_int_equal(out.len, 200);
  assert_memory_equal(out.data, p, 200);
  mw_buf_free(&out);
  mw_ipc_stream_free(&st);
  free(p);
}

/* ------------------------------------------------------------------ views */

/* Count the buffers of a column that are views. */
static size_t views_in(const mw_column_t *c) {
  size_t n = mw_buf_is_view(&c->validity) + mw_buf_is_view(&c->values) + mw_buf_is_view(&c->offsets) +
             mw_buf_is_view(&c->item_validity);
  for (uint32_t i = 0; i < c->n_children; i++) n += views_in(&c->children[i]);
  return n;
}

/* mw_ipc_decode_view: the rows mw_ipc_decode gives, with the buffers that
 * can stay in the blob viewing it (the blob outlives the caller's
 * reference through the batches'), and the rest copied; the batches stay
 * usable builders (appends copy the views). Every golden WAL entry, our
 * all-types streams (nulls, several batches) and a zstd one (all copied). */
static void check_view_decode(const uint8_t *p, size_t len, bool want_views, const char *what) {
  mw_ipc_stream_t a, b;
  mw_err_t err = {0};
  if (mw_ipc_decode(p, len, NULL, &a, &err) != 0) fail_msg("%s: decode: %s", what, err.msg);
  uint8_t *copy = malloc(len ? len : 1);
  assert_non_null(copy);
  memcpy(copy, p, len);
  mw_blob_t *blob = mw_blob_new(copy, len);
  assert_non_null(blob);
  if (mw_ipc_decode_view(blob, NULL, &b, &err) != 0) fail_msg("%s: decode_view: %s", what, err.msg);
  size_t views = 0, backed = 0;
  for (size_t i = 0; i < b.n_batches; i++) {
    backed += b.batches[i].backing == blob;
    for (size_t c = 0; c < b.schema.n_fields; c++) views += views_in(&b.batches[i].cols[c]);
    assert_true(b.batches[i].backing == NULL || b.batches[i].backing == blob);
    assert_int_equal(b.batches[i].backing != NULL, mw_batch_view_bytes(&b.batches[i]) > 0);
  }
  assert_int_equal(mw_blob_refs(blob), 1 + backed);
  if (want_views) assert_true(views > 0 && backed > 0);
  else assert_int_equal(views, 0);
  mw_blob_unref(blob); /* the batches keep it alive */
  assert_int_equal(b.n_batches, a.n_batches);
  for (size_t i = 0; i < a.n_batches; i++) {
    assert_int_equal(mw_batch_validate(&b.batches[i]), 0);
    assert_int_equal(b.batches[i].n_rows, a.batches[i].n_rows);
    for (size_t c = 0; c < a.schema.n_fields; c++)
      assert_column_equal(&a.schema.fields[c], &a.batches[i].cols[c], &b.batches[i].cols[c]);
  }
  /* a viewed batch still builds: append its own rows to it (copy-on-write) */
  for (size_t i = 0; i < b.n_batches; i++) {
    mw_batch_t *x = &b.batches[i];
    int64_t n = x->n_rows;
    for (size_t c = 0; c < b.schema.n_fields; c++)
      assert_int_equal(mw_column_append_range(&x->cols[c], &a.batches[i].cols[c], &b.schema.fields[c], 0, n), 0);
    x->n_rows = 2 * n;
    assert_int_equal(mw_batch_validate(x), 0);
    for (size_t c = 0; c < b.schema.n_fields; c++) mw_column_truncate(&x->cols[c], &b.schema.fields[c], n);
    x->n_rows = n;
    for (size_t c = 0; c < a.schema.n_fields; c++)
      assert_column_equal(&a.schema.fields[c], &a.batches[i].cols[c], &x->cols[c]);
  }
  /* own: copies every view, drops the reference */
  for (size_t i = 0; i < b.n_batches; i++) {
    assert_int_equal(mw_batch_own(&b.batches[i]), 0);
    assert_null(b.batches[i].backing);
    assert_int_equal(mw_batch_view_bytes(&b.batches[i]), 0);
  }
  mw_ipc_stream_free(&b);
  mw_ipc_stream_free(&a);
}

static void test_decode_view(void **state) {
  (void)state;
  char **paths;
  size_t n = wal_files(&paths), with_rows = 0;
  assert_true(n >= 40);
  for (size_t i = 0; i < n; i++) {
    size_t len;
    uint8_t *p = tu_read_file(paths[i], &len);
    assert_non_null(p);
    mw_ipc_stream_t st;
    assert_int_equal(mw_ipc_decode(p, len, NULL, &st, NULL), 0);
    bool rows = false, zstd = strstr(paths[i], "zstd") != NULL;
    for (size_t k = 0; k < st.n_batches; k++) rows |= st.batches[k].n_rows > 0;
    mw_ipc_stream_free(&st);
    check_view_decode(p, len, rows && !zstd, paths[i]);
    with_rows += rows;
    free(p);
  }
  assert_true(with_rows >= 20);
  tu_free_names(paths, n);
  mw_schema_t s;
  all_types_schema(&s);
  mw_batch_t b1, b2;
  fill_batch(&s, &b1, 37, false, 1);
  fill_batch(&s, &b2, 64, true, 2);
  const mw_batch_t *bs[] = {&b1, &b2};
  mw_buf_t enc = MW_BUF_INIT;
  assert_int_equal(mw_ipc_encode(&s, bs, 2, NULL, &enc, NULL), 0);
  check_view_decode(enc.data, enc.len, true, "all types");
  mw_ipc_opts_t o8 = {.body_align_bytes = 8};
  mw_buf_reset(&enc);
  assert_int_equal(mw_ipc_encode(&s, bs, 2, &o8, &enc, NULL), 0);
  check_view_decode(enc.data, enc.len, true, "all types, 8-byte aligned");
  mw_ipc_opts_t z = {.zstd = true};
  mw_buf_reset(&enc);
  assert_int_equal(mw_ipc_encode(&s, bs, 2, &z, &enc, NULL), 0);
  check_view_decode(enc.data, enc.len, false, "all types, zstd");
  /* apache-arrow's short fixed_size_list child: padded, so copied (the
   * other columns view) */
  char *path = tu_strf("%s/tests/lance/data/arrowjs/short_fsl.arrow", getenv("MW_SOURCE_ROOT"));
  size_t sn;
  uint8_t *sp = tu_read_file(path, &sn);
  assert_non_null(sp);
  check_view_decode(sp, sn, true, path);
  free(sp);
  free(path);
  /* a corrupt stream: nothing decoded, the blob freed with our reference */
  uint8_t *bad = malloc(enc.len);
  memcpy(bad, enc.data, enc.len);
  bad[enc.len - 8] = 0; /* EOS marker broken */
  mw_blob_t *blob = mw_blob_new(bad, enc.len);
  mw_ipc_stream_t st;
  mw_err_t err = {0};
  assert_int_equal(mw_ipc_decode_view(blob, NULL, &st, &err), -EBADMSG);
  assert_int_equal(mw_blob_refs(blob), 1);
  mw_blob_unref(blob);
  mw_buf_free(&enc);
  mw_batch_free(&b1);
  mw_batch_free(&b2);
  mw_schema_free(&s);
}

/* ------------------------------------------------------------- round trip */

static void test_roundtrip_types(void **state) {
  (void)state;
  mw_schema_t s;
  all_types_schema(&s);
  mw_batch_t b1, b2, b3, b4;
  fill_batch(&s, &b1, 37, false, 1);
  fill_batch(&s, &b2, 64, true, 2);
  fill_batch(&s, &b3, 1, true, 3);
  fill_batch(&s, &b4, 0, false, 4);
  const mw_batch_t *bs[] = {&b1, &b2, &b3, &b4};
  mw_buf_t enc = MW_BUF_INIT;
  roundtrip(&s, bs, 4, NULL, &enc);
  /* layout: 64-aligned messages, EOS at the end */
  assert_int_equal(enc.len % 8, 0);
  assert_int_equal(mw_load_u32le(enc.data), 0xFFFFFFFFu);
  assert_int_equal((mw_load_u32le(enc.data + 4) + 8) % 64, 0);
  assert_memory_equal(enc.data + enc.len - 8, "\xff\xff\xff\xff\0\0\0\0", 8);
  /* the pk key was added to the field's metadata */
  mw_ipc_stream_t st;
  assert_int_equal(mw_ipc_decode(enc.data, enc.len, NULL, &st, NULL), 0);
  assert_string_equal(meta_str(&st.schema.fields[1].meta, MW_IPC_PK_POSITION_KEY), "1");
  assert_string_equal(meta_str(&st.schema.fields[2].meta, "a"), "x");
  mw_ipc_stream_free(&st);
  /* no batches: schema only */
  roundtrip(&s, NULL, 0, NULL, &enc);
  mw_buf_free(&enc);
  mw_batch_free(&b1);
  mw_batch_free(&b2);
  mw_batch_free(&b3);
  mw_batch_free(&b4);
  mw_schema_free(&s);
}

static void test_roundtrip_zstd(void **state) {
  (void)state;
  mw_schema_t s;
  all_types_schema(&s);
  mw_batch_t b1, b2;
  fill_batch(&s, &b1, 1000, true, 5);
  fill_batch(&s, &b2, 3, false, 6);
  const mw_batch_t *bs[] = {&b1, &b2};
  mw_buf_t plain = MW_BUF_INIT, z = MW_BUF_INIT;
  roundtrip(&s, bs, 2, NULL, &plain);
  mw_ipc_opts_t opts = {.zstd = true, .zstd_level = 3};
  roundtrip(&s, bs, 2, &opts, &z);
  assert_true(z.len < plain.len);
  /* a tiny decompression limit refuses the stream */
  mw_ipc_limits_t lim;
  mw_ipc_limits_default(&lim);
  lim.max_decompressed_bytes = 100;
  mw_ipc_stream_t st;
  mw_err_t err = {0};
  assert_int_equal(mw_ipc_decode(z.data, z.len, &lim, &st, &err), -EFBIG);
  assert_non_null(strstr(err.msg, "limit"));
  mw_buf_free(&plain);
  mw_buf_free(&z);
  mw_batch_free(&b1);
  mw_batch_free(&b2);
  mw_schema_free(&s);
}

static void test_writer_reuse(void **state) {
  (void)state;
  mw_schema_t s;
  all_types_schema(&s);
  mw_batch_t b;
  fill_batch(&s, &b, 50, true, 9);
  const mw_batch_t *bs[] = {&b, &b, &b};
  mw_ipc_writer_t w;
  mw_ipc_writer_init(&w);
  mw_buf_t a = MW_BUF_INIT, c = MW_BUF_INIT;
  assert_int_equal(mw_ipc_writer_encode(&w, &s, bs, 3, NULL, &a, NULL), 0);
  assert_int_equal(mw_ipc_writer_encode(&w, &s, bs, 3, NULL, &c, NULL), 0);
  assert_int_equal(a.len, c.len);
  assert_memory_equal(a.data, c.data, a.len);
  /* appends: a second stream follows the first */
  assert_int_equal(mw_ipc_writer_encode(&w, &s, bs, 1, NULL, &c, NULL), 0);
  assert_true(c.len > a.len);
  mw_ipc_stream_t st;
  assert_int_equal(mw_ipc_decode(a.data, a.len, NULL, &st, NULL), 0);
  assert_int_equal(st.n_batches, 3);
  mw_ipc_stream_free(&st);
  /* a null count without a validity bitmap is refused */
  int64_t keep = b.cols[0].null_count;
  mw_buf_t keepv = b.cols[0].validity;
  b.cols[0].validity = (mw_buf_t)MW_BUF_INIT;
  b.cols[0].null_count = 3;
  assert_int_equal(mw_ipc_writer_encode(&w, &s, bs, 1, NULL, &a, NULL), -EINVAL);
  b.cols[0].null_count = keep;
  b.cols[0].validity = keepv;
  /* a batch of another schema is refused */
  mw_schema_t other;
  mw_schema_init(&other);
  assert_int_equal(mw_ipc_writer_encode(&w, &other, bs, 1, NULL, &a, NULL), -EINVAL);
  mw_schema_free(&other);
  mw_buf_free(&a);
  mw_buf_free(&c);
  mw_ipc_writer_free(&w);
  mw_batch_free(&b);
  mw_schema_free(&s);
}

static void test_writer_epoch(void **state) {
  (void)state;
  mw_schema_t s;
  mw_schema_init(&s);
  uint64_t e = 0;
  mw_err_t err = {0};
  assert_int_equal(mw_ipc_writer_epoch(&s, &e, &err), -EBADMSG);
  assert_non_null(strstr(err.msg, "missing writer_epoch"));
  const char *badv[] = {"", "x", "-1", "1 ", "18446744073709551616"};
  for (size_t i = 0; i < 5; i++) {
    assert_int_equal(mw_kvs_set(&s.meta, "writer_epoch", badv[i], strlen(badv[i])), 0);
    assert_int_equal(mw_ipc_writer_epoch(&s, &e, NULL), -EBADMSG);
  }
  assert_int_equal(mw_kvs_set(&s.meta, "writer_epoch", "18446744073709551615", 20), 0);
  assert_int_equal(mw_ipc_writer_epoch(&s, &e, NULL), 0);
  assert_true(e == UINT64_MAX);
  mw_schema_free(&s);
  /* sentinel for a large epoch round-trips */
  mw_buf_t out = MW_BUF_INIT;
  assert_int_equal(mw_ipc_fence_sentinel(123456789012ull, &out, NULL), 0);
  mw_ipc_stream_t st;
  assert_int_equal(mw_ipc_decode(out.data, out.len, NULL, &st, NULL), 0);
  assert_int_equal(mw_ipc_writer_epoch(&st.schema, &e, NULL), 0);
  assert_true(e == 123456789012ull);
  assert_true(mw_ipc_is_fence_sentinel(&st.schema));
  mw_ipc_stream_free(&st);
  mw_buf_free(&out);
}

/* A reused reader gives the same streams as one-shot decoding, across
 * schema changes (data, sentinel, data) and failures. */
static void test_reader_reuse(void **state) {
  (void)state;
  struct { const char *vec; size_t pos; } seq[] = {
      {"unsharded-small", 1}, {"unsharded-small", 2}, {"unsharded-epochs", 3},
      {"unsharded-epochs", 4}, {"unsharded-epochs", 1}, {"unsharded-small", 3}};
  mw_ipc_reader_t rd;
  mw_ipc_reader_init(&rd);
  for (int round = 0; round < 2; round++) {
    for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) {
      size_t len;
      uint8_t *p = read_wal(seq[i].vec, seq[i].pos, &len);
      mw_ipc_stream_t one;
      assert_int_equal(mw_ipc_decode(p, len, NULL, &one, NULL), 0);
      assert_int_equal(mw_ipc_reader_decode(&rd, p, len, NULL, NULL), 0);
      assert_schema_equal(&one.schema, &rd.stream.schema);
      assert_int_equal(one.n_batches, rd.stream.n_batches);
      for (size_t k = 0; k < one.n_batches; k++) {
        assert_ptr_equal(rd.stream.batches[k].schema, &rd.stream.schema);
        assert_ptr_equal(one.batches[k].schema, &one.schema);
        assert_int_equal(mw_batch_validate(&rd.stream.batches[k]), 0);
        for (size_t c = 0; c < one.schema.n_fields; c++)
          assert_column_equal(&one.schema.fields[c], &one.batches[k].cols[c],
                              &rd.stream.batches[k].cols[c]);
      }
      mw_ipc_stream_free(&one);
      /* a corrupt entry in between leaves the reader usable */
      if (i == 2) {
        assert_int_equal(mw_ipc_reader_decode(&rd, p, len - 1, NULL, NULL), -EBADMSG);
        assert_int_equal(rd.stream.n_batches, 0);
      }
      free(p);
    }
  }
  mw_ipc_reader_free(&rd);
}

/* ---------------------------------------------------------- robustness */

/* Decode; on success the result must satisfy every model invariant. */
static int decode_check(const uint8_t *p, size_t n, const mw_ipc_limits_t *lim) {
  mw_ipc_stream_t st;
  mw_err_t err = {0};
  int rc = mw_ipc_decode(p, n, lim, &st, &err);
  if (rc < 0) {
    assert_true(rc == -EBADMSG || rc == -ENOTSUP || rc == -EFBIG);
    assert_true(err.msg[0] != 0);
    return rc;
  }
  for (size_t i = 0; i < st.n_batches; i++) assert_int_equal(mw_batch_validate(&st.batches[i]), 0);
  mw_ipc_stream_free(&st);
  return 0;
}

static void test_truncation(void **state) {
  (void)state;
  size_t len;
  uint8_t *p = read_wal("unsharded-small", 1, &len);
  for (size_t n = 0; n < len; n++) {
    uint8_t *q = malloc(n ? n : 1); /* exact size so ASan sees any overread */
    memcpy(q, p, n);
    mw_err_t err = {0};
    mw_ipc_stream_t st;
    int rc = mw_ipc_decode(q, n, NULL, &st, &err);
    if (rc != -EBADMSG) fail_msg("prefix of %zu bytes: rc %d", n, rc);
    assert_non_null(strstr(err.msg, "byte "));
    free(q);
  }
  assert_int_equal(decode_check(p, len, NULL), 0);
  /* trailing garbage after EOS */
  uint8_t *q = malloc(len + 1);
  memcpy(q, p, len);
  q[len] = 0;
  mw_err_t err = {0};
  mw_ipc_stream_t st;
  assert_int_equal(mw_ipc_decode(q, len + 1, NULL, &st, &err), -EBADMSG);
  assert_non_null(strstr(err.msg, "after the EOS"));
  free(q);
  free(p);
}

static void test_byte_flips(void **state) {
  (void)state;
  size_t len;
  uint8_t *p = read_wal("unsharded-small", 2, &len);
  uint8_t *q = malloc(len);
  static const uint8_t xors[] = {0x01, 0x80, 0xFF, 0x10};
  size_t errors = 0, oks = 0;
  /* every byte of the metadata, a stride through the body */
  for (size_t i = 0; i < len; i += (i < 1024 ? 1 : 7)) {
    for (size_t k = 0; k < sizeof xors; k++) {
      memcpy(q, p, len);
      q[i] ^= xors[k];
      if (decode_check(q, len, NULL) < 0) errors++;
      else oks++;
    }
  }
  printf("# byte flips: %zu errors, %zu valid decodes\n", errors, oks);
  assert_true(errors > 100 && oks > 100);
  /* random multi-byte corruption */
  srand(42);
  for (int t = 0; t < 3000; t++) {
    memcpy(q, p, len);
    for (int k = 0; k < 4; k++) q[(size_t)rand() % 1024] = (uint8_t)rand();
    decode_check(q, len, NULL);
  }
  free(q);
  free(p);
}

static void test_limits(void **state) {
  (void)state;
  size_t len;
  uint8_t *p = read_wal("unsharded-small", 1, &len);
  mw_ipc_limits_t lim;
  mw_ipc_limits_default(&lim);
  lim.max_batch_rows = 99;
  mw_err_t err = {0};
  mw_ipc_stream_t st;
  assert_int_equal(mw_ipc_decode(p, len, &lim, &st, &err), -EFBIG);
  mw_ipc_limits_default(&lim);
  lim.max_fields = 4;
  assert_int_equal(mw_ipc_decode(p, len, &lim, &st, NULL), -EBADMSG);
  mw_ipc_limits_default(&lim);
  lim.max_batches = 0;
  assert_int_equal(mw_ipc_decode(p, len, &lim, &st, NULL), -EFBIG);
  /* wrong continuation marker names byte 0 */
  p[0] = 0;
  mw_err_clear(&err);
  assert_int_equal(mw_ipc_decode(p, len, NULL, &st, &err), -EBADMSG);
  assert_non_null(strstr(err.msg, "byte 0"));
  free(p);
}

/* apache-arrow for JavaScript 18.1.0 wrote this stream (tests/lance/data/
 * arrowjs/short_fsl.arrow): vec fixed_size_list<float32,2> of [[1,2],[3,4],
 * null] whose child holds 4 floats, not 6 (no values for the trailing null
 * slot). It decodes, padded: the null slot reads as null with zeros behind. */
static void test_arrowjs_short_fsl_child(void **state) {
  (void)state;
  const char *root = getenv("MW_SOURCE_ROOT");
  assert_non_null(root);
  char *path = tu_strf("%s/tests/lance/data/arrowjs/short_fsl.arrow", root);
  size_t n;
  uint8_t *p = tu_read_file(path, &n);
  assert_non_null(p);
  mw_ipc_stream_t st;
  mw_err_t err = {0};
  assert_int_equal(mw_ipc_decode(p, n, NULL, &st, &err), 0);
  assert_int_equal(st.n_batches, 1);
  const mw_batch_t *b = &st.batches[0];
  assert_int_equal(b->n_rows, 3);
  const mw_column_t *c = &b->cols[1];
  assert_int_equal(c->null_count, 1);
  assert_int_equal(c->values.len, 6 * sizeof(float));
  assert_false(mw_column_valid(c, 2));
  float v[6];
  memcpy(v, c->values.data, sizeof v);
  assert_true(v[0] == 1 && v[1] == 2 && v[2] == 3 && v[3] == 4 && v[4] == 0 && v[5] == 0);
  assert_int_equal(mw_batch_validate(b), 0);
  mw_ipc_stream_free(&st);
  free(p);
  free(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_golden_reencode),
      cmocka_unit_test(test_golden_values),
      cmocka_unit_test(test_golden_sentinel),
      cmocka_unit_test(test_roundtrip_types),
      cmocka_unit_test(test_roundtrip_zstd),
      cmocka_unit_test(test_writer_reuse),
      cmocka_unit_test(test_writer_epoch),
      cmocka_unit_test(test_reader_reuse),
      cmocka_unit_test(test_truncation),
      cmocka_unit_test(test_byte_flips),
      cmocka_unit_test(test_limits),
      cmocka_unit_test(test_arrowjs_short_fsl_child),
      cmocka_unit_test(test_decode_view),
  };
  return tu_run_group(tests, NULL, NULL);
}
