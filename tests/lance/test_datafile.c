/*
 * test_datafile.c — Lance data files (src/lance/datafile.c) and the schema
 * mapping (src/lance/lance_schema.c).
 *
 * Round trips of every type with and without nulls, multi-page columns
 * (150 000 rows with small pages; 1.1 M rows with the default 8 MiB pages),
 * zstd on and off, several input batches, extra global buffers. Layout:
 * our column metadata for 3000 doubles equals the golden bytes of
 * lance-files.md §2.2 (except the page buffer offsets), and our all-false
 * `_tombstone` column metadata equals Lance's byte for byte. Golden: every
 * .lance file in $MW_VECTORS opens and decodes; SSTable values are checked
 * against expected.jsonl and against the PK index Lance wrote; every
 * FileDescriptor re-encodes to identical bytes through lance_schema.
 * Lance-only encodings we never write are checked on hand-built files:
 * InlineBitpacking (FastLanes) int32 values with OutOfLineBitpacking and RLE
 * def levels, and 2.0 legacy pages (flat, nullable, binary with
 * null_adjustment, fixed_size_list).
 * Robustness: every truncation and many byte flips give an error, not a crash.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include <cmocka.h>

#include "cases.h"

#include "encodings_v2_1.pb-c.h"
#include "file2.pb-c.h"
#include "google/protobuf/any.pb-c.h"
#include "lance/datafile.h"
#include "lance/lance_schema.h"
#include "testutil.h"

/* ---------------------------------------------------------------- helpers */

static uint32_t rng_state = 12345;
static uint32_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 17;
  rng_state ^= rng_state << 5;
  return rng_state;
}

static void all_types_schema(mw_schema_t *s, bool nullable) {
  static const struct { const char *name; mw_type_t t; } cols[] = {
      {"i32", MW_T_INT32},   {"i64", MW_T_INT64}, {"u32", MW_T_UINT32}, {"u64", MW_T_UINT64},
      {"f32", MW_T_FLOAT32}, {"f64", MW_T_FLOAT64}, {"b", MW_T_BOOL},   {"s", MW_T_UTF8},
      {"bin", MW_T_BINARY},  {"vec", MW_T_FSL},
  };
  mw_schema_init(s);
  for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++) {
    int idx = mw_schema_add(s, cols[i].name, cols[i].t, nullable);
    assert_true(idx >= 0);
    s->fields[idx].id = idx;
    if (cols[i].t == MW_T_FSL) s->fields[idx].fsl_dim = 8;
  }
}

/* Append n rows; with null_mod > 0 every null_mod-th row (offset by column) is null. */
static void fill_batch(mw_batch_t *b, int64_t n, int null_mod) {
  const mw_schema_t *s = b->schema;
  for (size_t c = 0; c < s->n_fields; c++) {
    const mw_field_t *f = &s->fields[c];
    mw_column_t *col = &b->cols[c];
    for (int64_t r = 0; r < n; r++) {
      if (null_mod > 0 && f->nullable && (r + (int64_t)c) % null_mod == 0) {
        assert_int_equal(mw_column_append_null(col, f), 0);
        continue;
      }
      uint64_t v = ((uint64_t)rnd() << 32) | rnd();
      char str[64];
      float vec[64];
      int rc = 0;
      switch (f->type) {
        case MW_T_BOOL: rc = mw_column_append_bool(col, v & 1); break;
        case MW_T_UTF8:
        case MW_T_BINARY: {
          int len = snprintf(str, sizeof str, "row_%" PRId64 "_%.*s", r, (int)(v % 20), "abcdefghijklmnopqrstuvwxyz");
          rc = mw_column_append_bytes(col, str, (size_t)len);
          break;
        }
        case MW_T_FLOAT64: {
          double d = (double)(int64_t)v / 1e9;
          rc = mw_column_append_fixed(col, &d, 8);
          break;
        }
        case MW_T_FLOAT32: {
          float x = (float)(int32_t)v / 1e3f;
          rc = mw_column_append_fixed(col, &x, 4);
          break;
        }
        case MW_T_FSL:
          for (int k = 0; k < f->fsl_dim; k++) vec[k] = (float)(rnd() % 1000) / 7.0f;
          rc = mw_column_append_fixed(col, vec, 4 * (size_t)f->fsl_dim);
          break;
        default: rc = mw_column_append_fixed(col, &v, mw_type_width(f)); break;
      }
      assert_int_equal(rc, 0);
    }
  }
  b->n_rows += n;
}

static void assert_columns_equal(const mw_field_t *f, const mw_column_t *a, int64_t a0,
                                 const mw_column_t *b, int64_t n) {
  for (int64_t r = 0; r < n; r++) {
    bool va = mw_column_valid(a, a0 + r), vb = mw_column_valid(b, r);
    if (va != vb) fail_msg("field %s row %" PRId64 ": validity %d vs %d", f->name, r, va, vb);
    if (!va) continue;
    if (f->type == MW_T_BOOL) {
      assert_int_equal(mw_bit_get(a->values.data, a0 + r), mw_bit_get(b->values.data, r));
    } else if (f->type == MW_T_UTF8 || f->type == MW_T_BINARY) {
      size_t na, nb;
      const uint8_t *pa = mw_column_bytes(a, a0 + r, &na), *pb = mw_column_bytes(b, r, &nb);
      if (na != nb || memcmp(pa, pb, na) != 0) fail_msg("field %s row %" PRId64 ": bytes differ", f->name, r);
    } else {
      size_t w = mw_type_width(f);
      if (memcmp(a->values.data + (size_t)(a0 + r) * w, b->values.data + (size_t)r * w, w) != 0)
        fail_msg("field %s row %" PRId64 ": value differs", f->name, r);
    }
  }
}

static void write_file(const mw_schema_t *s, const mw_batch_t *const *bs, size_t nb,
                       const mw_datafile_write_opts_t *opts, mw_buf_t *out) {
  mw_err_t err = {0};
  int rc = mw_datafile_write(s, bs, nb, NULL, 0, opts, out, &err);
  if (rc != 0) fail_msg("write: %d %s", rc, err.msg);
}

static void read_file(const mw_buf_t *buf, mw_datafile_t *f, mw_batch_t *b) {
  mw_err_t err = {0};
  int rc = mw_datafile_open(f, buf->data, buf->len, NULL, &err);
  if (rc != 0) fail_msg("open: %d %s", rc, err.msg);
  rc = mw_datafile_read_batch(f, b, &err);
  if (rc != 0) fail_msg("read: %d %s", rc, err.msg);
}

/* Round trip one batch (or several) and compare every value. */
static void roundtrip(int64_t rows, int null_mod, const mw_datafile_write_opts_t *opts,
                      size_t n_batches) {
  mw_schema_t s;
  all_types_schema(&s, null_mod > 0);
  mw_batch_t *in = calloc(n_batches, sizeof *in);
  const mw_batch_t **ptrs = calloc(n_batches, sizeof *ptrs);
  for (size_t i = 0; i < n_batches; i++) {
    assert_int_equal(mw_batch_init(&in[i], &s), 0);
    fill_batch(&in[i], rows / (int64_t)n_batches + (int64_t)i, null_mod);
    ptrs[i] = &in[i];
  }
  mw_buf_t buf = MW_BUF_INIT;
  write_file(&s, ptrs, n_batches, opts, &buf);
  mw_datafile_t f;
  mw_batch_t out;
  read_file(&buf, &f, &out);
  assert_int_equal(f.major, 2);
  assert_int_equal(f.minor, 2);
  assert_true(mw_schema_equal(&f.schema, &s));
  int64_t total = 0;
  for (size_t i = 0; i < n_batches; i++) total += in[i].n_rows;
  assert_int_equal(out.n_rows, total);
  for (size_t c = 0; c < s.n_fields; c++) {
    int64_t at = 0, nulls = 0;
    for (size_t i = 0; i < n_batches; i++) {
      assert_columns_equal(&s.fields[c], &out.cols[c], at, &in[i].cols[c], in[i].n_rows);
      at += in[i].n_rows;
      nulls += in[i].cols[c].null_count;
    }
    assert_int_equal(out.cols[c].null_count, nulls);
  }
  mw_batch_free(&out);
  mw_datafile_close(&f);
  for (size_t i = 0; i < n_batches; i++) mw_batch_free(&in[i]);
  free(in);
  free(ptrs);
  mw_buf_free(&buf);
  mw_schema_free(&s);
}

/* Unpack column `col`'s metadata. */
static Lance__File__V2__ColumnMetadata *colmeta(const mw_datafile_t *f, uint32_t col) {
  const uint8_t *p;
  size_t n;
  assert_int_equal(mw_datafile_column_metadata(f, col, &p, &n, NULL), 0);
  Lance__File__V2__ColumnMetadata *cm = lance__file__v2__column_metadata__unpack(NULL, n, p);
  assert_non_null(cm);
  return cm;
}

static void hex_to_bytes(const char *hex, uint8_t *out, size_t *n) {
  size_t k = 0;
  for (const char *p = hex; p[0] && p[1]; p += 2) {
    unsigned v;
    assert_int_equal(sscanf(p, "%2x", &v), 1);
    out[k++] = (uint8_t)v;
  }
  *n = k;
}

/* ---------------------------------------------------------------- round trips */

static void test_roundtrip_no_nulls(void **state) {
  (void)state;
  roundtrip(5000, 0, NULL, 1);
}

static void test_roundtrip_nulls(void **state) {
  (void)state;
  roundtrip(5000, 7, NULL, 1);
  roundtrip(3, 2, NULL, 1);
  roundtrip(1, 0, NULL, 1);
}

static void test_roundtrip_batches(void **state) {
  (void)state;
  roundtrip(10001, 5, NULL, 3);
  roundtrip(777, 0, NULL, 4);
}

/* Several batches are written as their concatenation would be, byte for
 * byte: FSL columns are read batch by batch in place (write_fsl), so page
 * boundaries fall inside batches, an empty batch sits between, and a batch
 * without nulls (no validity bitmap) meets one with nulls in one page. */
static void same_as_concat(int64_t rows, size_t n_batches, const int *null_mods, size_t page_bytes) {
  mw_schema_t s;
  all_types_schema(&s, true);
  mw_batch_t *in = calloc(n_batches, sizeof *in);
  const mw_batch_t **ptrs = calloc(n_batches, sizeof *ptrs);
  mw_batch_t all;
  assert_int_equal(mw_batch_init(&all, &s), 0);
  for (size_t i = 0; i < n_batches; i++) {
    assert_int_equal(mw_batch_init(&in[i], &s), 0);
    int64_t n = i == 1 ? 0 : rows / (int64_t)n_batches + 3 * (int64_t)i;
    fill_batch(&in[i], n, null_mods[i]);
    ptrs[i] = &in[i];
    for (size_t c = 0; c < s.n_fields; c++)
      assert_int_equal(mw_column_append_range(&all.cols[c], &in[i].cols[c], &s.fields[c], 0, n), 0);
    all.n_rows += n;
  }
  mw_datafile_write_opts_t o = {.max_page_bytes = page_bytes};
  mw_buf_t a = MW_BUF_INIT, b = MW_BUF_INIT;
  const mw_batch_t *ap = &all;
  write_file(&s, ptrs, n_batches, &o, &a);
  write_file(&s, &ap, 1, &o, &b);
  assert_int_equal(a.len, b.len);
  assert_memory_equal(a.data, b.data, a.len);
  mw_buf_free(&a);
  mw_buf_free(&b);
  for (size_t i = 0; i < n_batches; i++) mw_batch_free(&in[i]);
  mw_batch_free(&all);
  free(in);
  free(ptrs);
  mw_schema_free(&s);
}

static void test_batches_same_as_concat(void **state) {
  (void)state;
  static const int none[4] = {0, 0, 0, 0}, mixed[4] = {0, 0, 5, 0}, all_nulls[4] = {3, 2, 7, 11};
  same_as_concat(20000, 4, none, 4096);
  same_as_concat(20000, 4, mixed, 4096);
  same_as_concat(20000, 4, all_nulls, 64 << 10);
  same_as_concat(900, 3, mixed, 0);
}

static void test_roundtrip_zstd(void **state) {
  (void)state;
  mw_datafile_write_opts_t o = {.zstd = true};
  roundtrip(9000, 0, &o, 1);
  roundtrip(9000, 3, &o, 2);
}

static void test_multipage(void **state) {
  (void)state;
  mw_datafile_write_opts_t o = {.max_page_bytes = 64 << 10};
  roundtrip(150000, 11, &o, 1);
  roundtrip(150000, 0, &o, 2);
  /* page count and priorities of a small-page file */
  mw_schema_t s;
  all_types_schema(&s, true);
  mw_batch_t b;
  assert_int_equal(mw_batch_init(&b, &s), 0);
  fill_batch(&b, 100000, 13);
  mw_buf_t buf = MW_BUF_INIT;
  const mw_batch_t *bp = &b;
  write_file(&s, &bp, 1, &o, &buf);
  mw_datafile_t f;
  assert_int_equal(mw_datafile_open(&f, buf.data, buf.len, NULL, NULL), 0);
  for (uint32_t c = 0; c < f.n_columns; c++) {
    Lance__File__V2__ColumnMetadata *cm = colmeta(&f, c);
    /* 100 000 bools are 12.5 KB: one page; every other column spans several */
    if (f.schema.fields[c].type != MW_T_BOOL) assert_true(cm->n_pages > 1);
    else assert_int_equal(cm->n_pages, 1);
    uint64_t row = 0;
    for (size_t i = 0; i < cm->n_pages; i++) {
      assert_int_equal(cm->pages[i]->priority, row);
      for (size_t k = 0; k < cm->pages[i]->n_buffer_offsets; k++)
        assert_int_equal(cm->pages[i]->buffer_offsets[k] % 64, 0);
      row += cm->pages[i]->length;
    }
    assert_int_equal(row, 100000);
    lance__file__v2__column_metadata__free_unpacked(cm, NULL);
  }
  mw_datafile_close(&f);
  mw_buf_free(&buf);
  mw_batch_free(&b);
  mw_schema_free(&s);
}

/* 1.1 M int64 rows with the default 8 MiB pages span two pages. */
static void test_default_pages(void **state) {
  (void)state;
  mw_schema_t s;
  mw_schema_init(&s);
  assert_int_equal(mw_schema_add(&s, "id", MW_T_INT64, false), 0);
  mw_batch_t b;
  assert_int_equal(mw_batch_init(&b, &s), 0);
  int64_t n = 1100000;
  int64_t *v = mw_buf_extend(&b.cols[0].values, 8 * (size_t)n);
  for (int64_t i = 0; i < n; i++) v[i] = i * 3 - 7;
  b.cols[0].length = b.n_rows = n;
  mw_buf_t buf = MW_BUF_INIT;
  const mw_batch_t *bp = &b;
  write_file(&s, &bp, 1, NULL, &buf);
  mw_datafile_t f;
  mw_batch_t out;
  read_file(&buf, &f, &out);
  Lance__File__V2__ColumnMetadata *cm = colmeta(&f, 0);
  assert_int_equal(cm->n_pages, 2);
  assert_int_equal(cm->pages[0]->length, (8u << 20) / 8);
  lance__file__v2__column_metadata__free_unpacked(cm, NULL);
  assert_memory_equal(out.cols[0].values.data, b.cols[0].values.data, 8 * (size_t)n);
  mw_batch_free(&out);
  mw_datafile_close(&f);
  mw_buf_free(&buf);
  mw_batch_free(&b);
  mw_schema_free(&s);
}

static void test_extra_global_buffers(void **state) {
  (void)state;
  mw_schema_t s;
  all_types_schema(&s, true);
  assert_int_equal(mw_kvs_set(&s.meta, "lance.seed.i32", "1:1024", 6), 0);
  mw_batch_t b;
  assert_int_equal(mw_batch_init(&b, &s), 0);
  fill_batch(&b, 300, 4);
  const char *g1 = "ARROW1 first extra buffer", *g3 = "third";
  uint8_t big[1000];
  for (size_t i = 0; i < sizeof big; i++) big[i] = (uint8_t)i;
  mw_datafile_gbuf_t extra[3] = {{g1, strlen(g1)}, {big, sizeof big}, {g3, strlen(g3)}};
  mw_buf_t buf = MW_BUF_INIT;
  assert_int_equal(mw_buf_append(&buf, "junk", 4), 0); /* offsets are relative to the entry length */
  const mw_batch_t *bp = &b;
  mw_err_t err = {0};
  assert_int_equal(mw_datafile_write(&s, &bp, 1, extra, 3, NULL, &buf, &err), 0);
  mw_datafile_t f;
  assert_int_equal(mw_datafile_open(&f, buf.data + 4, buf.len - 4, NULL, &err), 0);
  assert_int_equal(f.n_global_buffers, 4);
  const uint8_t *p, *p0;
  size_t n, n0;
  assert_int_equal(mw_datafile_global_buffer(&f, 0, &p0, &n0, NULL), 0);
  for (uint32_t i = 1; i <= 3; i++) {
    assert_int_equal(mw_datafile_global_buffer(&f, i, &p, &n, NULL), 0);
    assert_int_equal(n, extra[i - 1].len);
    assert_memory_equal(p, extra[i - 1].data, n);
    assert_int_equal((p - f.data) % 64, 0);
    assert_true(p < p0); /* extra buffers come before the schema */
  }
  assert_int_equal((p0 - f.data) % 64, 0);
  assert_int_equal(mw_datafile_global_buffer(&f, 4, &p, &n, NULL), -EINVAL);
  const mw_kv_t *kv = mw_kvs_get(&f.schema.meta, "lance.seed.i32");
  assert_non_null(kv);
  assert_string_equal((const char *)kv->value, "1:1024");
  mw_datafile_close(&f);
  mw_buf_free(&buf);
  mw_batch_free(&b);
  mw_schema_free(&s);
}

/* ---------------------------------------------------------------- layouts */

/* lance-files.md §2.2: ColumnMetadata of `v: float64`, 3000 rows, no nulls.
 * Only the page buffer offsets differ (ours start at 0 and 64). */
static void test_golden_float64_colmeta(void **state) {
  (void)state;
  static const char *golden =
      "0a2912270a250a1f2f6c616e63652e656e636f64696e67732e436f6c756d6e456e636f64696e6712020a00"
      "124a0a06809a02c09a02120418f0bb0118b817223712350a330a1d2f6c616e63652e656e636f64696e677332312e"
      "506167654c61796f757412120a101a040a020840320101380148b8175001";
  uint8_t g[256], want[256];
  size_t gn, wn = 0;
  hex_to_bytes(golden, g, &gn);
  /* rebuild with offsets [0, 64]: page length 0x4a - 4, offsets 0a 02 00 40 */
  const size_t cm_enc = 2 + 0x29, off_at = cm_enc + 2;
  memcpy(want, g, cm_enc);
  wn = cm_enc;
  want[wn++] = 0x12;
  want[wn++] = 0x4a - 4;
  want[wn++] = 0x0a, want[wn++] = 0x02, want[wn++] = 0x00, want[wn++] = 0x40;
  memcpy(want + wn, g + off_at + 8, gn - off_at - 8);
  wn += gn - off_at - 8;
  mw_schema_t s;
  mw_schema_init(&s);
  assert_int_equal(mw_schema_add(&s, "v", MW_T_FLOAT64, true), 0);
  mw_batch_t b;
  assert_int_equal(mw_batch_init(&b, &s), 0);
  for (int i = 0; i < 3000; i++) {
    double d = i * 0.5;
    assert_int_equal(mw_column_append_fixed(&b.cols[0], &d, 8), 0);
  }
  b.n_rows = 3000;
  mw_buf_t buf = MW_BUF_INIT;
  const mw_batch_t *bp = &b;
  write_file(&s, &bp, 1, NULL, &buf);
  mw_datafile_t f;
  assert_int_equal(mw_datafile_open(&f, buf.data, buf.len, NULL, NULL), 0);
  const uint8_t *p;
  size_t n;
  assert_int_equal(mw_datafile_column_metadata(&f, 0, &p, &n, NULL), 0);
  assert_int_equal(n, wn);
  assert_memory_equal(p, want, wn);
  /* chunk words: 5 x 512 values of 4104 bytes (0x2009), then the last chunk */
  assert_int_equal(mw_load_u32le(buf.data), 0x2009);
  assert_int_equal(mw_load_u32le(buf.data + 20), ((3528 / 8 - 1) << 4));
  assert_memory_equal(buf.data + 64, "\x00\x00\x00\x10\x00\x00\xfe\xfe", 8);
  mw_datafile_close(&f);
  mw_buf_free(&buf);
  mw_batch_free(&b);
  mw_schema_free(&s);
}

static size_t sstable_data_files(char ***paths) {
  char **all;
  size_t n = tu_find_files(tu_vectors_dir(), ".lance", &all), k = 0;
  for (size_t i = 0; i < n; i++) {
    if (strstr(all[i], "/_mem_wal/") && strstr(all[i], "/data/")) all[k++] = all[i];
    else free(all[i]);
  }
  *paths = all;
  return k;
}

/* Our all-false non-null bool column metadata equals Lance's `_tombstone`. */
static void test_golden_tombstone(void **state) {
  (void)state;
  char **paths;
  size_t np = sstable_data_files(&paths);
  assert_true(np >= 5);
  for (size_t i = 0; i < np; i++) {
    size_t len;
    uint8_t *d = tu_read_file(paths[i], &len);
    assert_non_null(d);
    mw_datafile_t f;
    assert_int_equal(mw_datafile_open(&f, d, len, NULL, NULL), 0);
    int ti = mw_schema_find(&f.schema, "_tombstone");
    assert_true(ti >= 0);
    const uint8_t *lp;
    size_t ln;
    assert_int_equal(mw_datafile_column_metadata(&f, (uint32_t)ti, &lp, &ln, NULL), 0);
    mw_schema_t s;
    mw_schema_init(&s);
    assert_int_equal(mw_schema_add(&s, "_tombstone", MW_T_BOOL, false), 0);
    mw_batch_t b;
    assert_int_equal(mw_batch_init(&b, &s), 0);
    for (uint64_t r = 0; r < f.n_rows; r++) assert_int_equal(mw_column_append_bool(&b.cols[0], false), 0);
    b.n_rows = (int64_t)f.n_rows;
    mw_buf_t buf = MW_BUF_INIT;
    const mw_batch_t *bp = &b;
    write_file(&s, &bp, 1, NULL, &buf);
    mw_datafile_t g;
    assert_int_equal(mw_datafile_open(&g, buf.data, buf.len, NULL, NULL), 0);
    const uint8_t *op;
    size_t on;
    assert_int_equal(mw_datafile_column_metadata(&g, 0, &op, &on, NULL), 0);
    assert_int_equal(on, ln);
    assert_memory_equal(op, lp, ln);
    mw_datafile_close(&g);
    mw_buf_free(&buf);
    mw_batch_free(&b);
    mw_schema_free(&s);
    mw_datafile_close(&f);
    free(d);
  }
  tu_free_names(paths, np);
}

/* ---------------------------------------------------------------- golden reads */

/* Every FileDescriptor in the vectors: schema → mw_schema → Fields gives
 * byte-identical protobuf. */
static void test_golden_schema_bytes(void **state) {
  (void)state;
  char **paths;
  size_t np = tu_find_files(tu_vectors_dir(), ".lance", &paths), checked = 0;
  for (size_t i = 0; i < np; i++) {
    if (strstr(paths[i], "/_versions/")) continue;
    size_t len;
    uint8_t *d = tu_read_file(paths[i], &len);
    mw_datafile_t f;
    mw_err_t err = {0};
    if (mw_datafile_open(&f, d, len, NULL, &err) != 0) fail_msg("%s: %s", paths[i], err.msg);
    const uint8_t *g;
    size_t gn;
    assert_int_equal(mw_datafile_global_buffer(&f, 0, &g, &gn, NULL), 0);
    Lance__File__V2__FileDescriptor *fd = lance__file__v2__file_descriptor__unpack(NULL, gn, g);
    assert_non_null(fd);
    Lance__File__Field **fields;
    size_t nf;
    assert_int_equal(mw_lance_fields_from_schema(&f.schema, &fields, &nf), 0);
    assert_int_equal(nf, fd->schema->n_fields);
    Lance__File__Field **orig = fd->schema->fields;
    fd->schema->fields = fields;
    size_t rn = lance__file__v2__file_descriptor__get_packed_size(fd);
    uint8_t *re = malloc(rn);
    lance__file__v2__file_descriptor__pack(fd, re);
    if (rn != gn || memcmp(re, g, gn) != 0) fail_msg("%s: FileDescriptor re-encodes differently", paths[i]);
    fd->schema->fields = orig;
    free(re);
    mw_lance_fields_free(fields, nf);
    lance__file__v2__file_descriptor__free_unpacked(fd, NULL);
    mw_datafile_close(&f);
    free(d);
    checked++;
  }
  assert_true(checked >= 40);
  tu_free_names(paths, np);
}

static int64_t i64_at(const mw_column_t *c, int64_t r) {
  int64_t v;
  memcpy(&v, c->values.data + 8 * r, 8);
  return v;
}

/* Every .lance file decodes fully; SSTable data files are checked value by value. */
static void test_golden_read_all(void **state) {
  (void)state;
  char **paths;
  size_t np = tu_find_files(tu_vectors_dir(), ".lance", &paths), files = 0;
  for (size_t i = 0; i < np; i++) {
    if (strstr(paths[i], "/_versions/")) continue;
    size_t len;
    uint8_t *d = tu_read_file(paths[i], &len);
    mw_datafile_t f;
    mw_batch_t b;
    mw_err_t err = {0};
    if (mw_datafile_open(&f, d, len, NULL, &err) != 0) fail_msg("%s: %s", paths[i], err.msg);
    if (mw_datafile_read_batch(&f, &b, &err) != 0) fail_msg("%s: %s", paths[i], err.msg);
    assert_int_equal((uint64_t)b.n_rows, f.n_rows);
    assert_true(f.n_rows > 0);
    int id = mw_schema_find(&f.schema, "id"), name = mw_schema_find(&f.schema, "name");
    int v = mw_schema_find(&f.schema, "v"), vec = mw_schema_find(&f.schema, "vec");
    int tomb = mw_schema_find(&f.schema, "_tombstone");
    if (id >= 0) {
      assert_int_equal(f.major, 2);
      assert_int_equal(f.minor, 2);
      assert_true(v >= 0 && vec >= 0 && name >= 0);
      assert_int_equal(b.cols[id].null_count, 0);
      if (strstr(paths[i], "/_mem_wal/")) assert_int_equal(f.schema.fields[id].pk_position, 1);
      assert_int_equal(f.schema.fields[vec].fsl_dim, 8);
      int64_t named = 0;
      for (int64_t r = 0; r < b.n_rows; r++) {
        int64_t key = i64_at(&b.cols[id], r);
        assert_true(key >= 0 && key < 100000);
        if (mw_column_valid(&b.cols[name], r)) {
          size_t n;
          const uint8_t *p = mw_column_bytes(&b.cols[name], r, &n);
          char s[64];
          long long mid = -1;
          assert_true(n < sizeof s);
          memcpy(s, p, n);
          s[n] = 0;
          /* names are "w<k>_<id>_<4 chars>" (SSTables) or "b_<id>_..." (base) */
          if (sscanf(s, "%*[^_]_%lld_", &mid) != 1 || mid != key) fail_msg("%s row %lld: name '%s' for id %lld", paths[i], (long long)r, s, (long long)key);
          named++;
        }
        if (mw_column_valid(&b.cols[v], r)) {
          double x;
          memcpy(&x, b.cols[v].values.data + 8 * r, 8);
          assert_true(isfinite(x));
        }
        if (mw_column_valid(&b.cols[vec], r)) {
          for (int k = 0; k < 8; k++) {
            float x;
            memcpy(&x, b.cols[vec].values.data + 32 * r + 4 * k, 4);
            assert_true(x >= -1.0f && x <= 1.0f);
          }
        }
      }
      assert_true(named > b.n_rows / 2);
      if (tomb >= 0) {
        for (int64_t r = 0; r < b.n_rows; r++) assert_false(mw_bit_get(b.cols[tomb].values.data, r));
      }
    }
    mw_batch_free(&b);
    mw_datafile_close(&f);
    free(d);
    files++;
  }
  assert_true(files >= 40);
  tu_free_names(paths, np);
}

/* unsharded-small has one SSTable generation; the last copy of each id in it
 * is the final state (expected.jsonl) for ids >= 50 that were written. */
static void test_golden_values_vs_expected(void **state) {
  (void)state;
  char **paths;
  size_t np = sstable_data_files(&paths);
  const char *sst = NULL;
  for (size_t i = 0; i < np; i++)
    if (strstr(paths[i], "/unsharded-small/")) sst = paths[i];
  assert_non_null(sst);
  size_t len, elen;
  uint8_t *d = tu_read_file(sst, &len);
  char *epath = tu_strf("%s/unsharded-small/expected.jsonl", tu_vectors_dir());
  char *exp = (char *)tu_read_file(epath, &elen);
  assert_non_null(exp);
  mw_datafile_t f;
  mw_batch_t b;
  read_file(&(mw_buf_t){d, len, len}, &f, &b);
  int id = mw_schema_find(&f.schema, "id"), name = mw_schema_find(&f.schema, "name");
  int v = mw_schema_find(&f.schema, "v");
  int64_t matched = 0;
  for (char *line = exp; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
    long long key;
    if (sscanf(line, "{\"id\":\"%lld\"", &key) != 1) continue;
    int64_t last = -1;
    for (int64_t r = 0; r < b.n_rows; r++)
      if (i64_at(&b.cols[id], r) == key) last = r;
    if (last < 0) continue;
    char *nm = strstr(line, "\"name\":"), *vv = strstr(line, "\"v\":");
    assert_non_null(nm);
    assert_non_null(vv);
    if (strncmp(nm + 7, "null", 4) == 0) {
      assert_false(mw_column_valid(&b.cols[name], last));
    } else {
      size_t n;
      const uint8_t *p = mw_column_bytes(&b.cols[name], last, &n);
      assert_true(mw_column_valid(&b.cols[name], last));
      assert_memory_equal(nm + 8, p, n);
      assert_int_equal(nm[8 + n], '"');
    }
    if (strncmp(vv + 4, "null", 4) == 0) {
      assert_false(mw_column_valid(&b.cols[v], last));
    } else {
      double want = strtod(vv + 4, NULL), got;
      memcpy(&got, b.cols[v].values.data + 8 * last, 8);
      assert_true(mw_column_valid(&b.cols[v], last));
      assert_true(want == got);
    }
    matched++;
  }
  assert_true(matched >= 150);
  mw_batch_free(&b);
  mw_datafile_close(&f);
  free(d);
  free(exp);
  free(epath);
  tu_free_names(paths, np);
}

/* Decode a Lance SSTable, write it with our writer, decode again: same values. */
static void test_golden_rewrite(void **state) {
  (void)state;
  char **paths;
  size_t np = sstable_data_files(&paths);
  for (size_t i = 0; i < np; i++) {
    size_t len;
    uint8_t *d = tu_read_file(paths[i], &len);
    mw_datafile_t f, g;
    mw_batch_t a, b;
    read_file(&(mw_buf_t){d, len, len}, &f, &a);
    for (int z = 0; z < 2; z++) {
      mw_buf_t buf = MW_BUF_INIT;
      mw_datafile_write_opts_t o = {.zstd = z == 1};
      const mw_batch_t *ap = &a;
      write_file(&f.schema, &ap, 1, &o, &buf);
      read_file(&buf, &g, &b);
      assert_int_equal(b.n_rows, a.n_rows);
      for (size_t c = 0; c < f.schema.n_fields; c++) {
        assert_int_equal(b.cols[c].null_count, a.cols[c].null_count);
        assert_columns_equal(&f.schema.fields[c], &a.cols[c], 0, &b.cols[c], a.n_rows);
      }
      /* the descriptor is the same bytes */
      const uint8_t *p1, *p2;
      size_t n1, n2;
      assert_int_equal(mw_datafile_global_buffer(&f, 0, &p1, &n1, NULL), 0);
      assert_int_equal(mw_datafile_global_buffer(&g, 0, &p2, &n2, NULL), 0);
      assert_int_equal(n1, n2);
      assert_memory_equal(p1, p2, n1);
      mw_batch_free(&b);
      mw_datafile_close(&g);
      mw_buf_free(&buf);
    }
    mw_batch_free(&a);
    mw_datafile_close(&f);
    free(d);
  }
  tu_free_names(paths, np);
}

/* ---------------------------------------------------------------- robustness */

static void try_decode(const uint8_t *p, size_t n) {
  mw_datafile_t f;
  mw_batch_t b;
  mw_datafile_read_opts_t o = {.max_rows = 1 << 16, .max_column_bytes = 16 << 20};
  if (mw_datafile_open(&f, p, n, &o, NULL) != 0) return;
  if (mw_datafile_read_batch(&f, &b, NULL) == 0) mw_batch_free(&b);
  mw_datafile_close(&f);
}

/* A zstd file of 40 all-types rows (nullable, every 3rd null): the input
 * the corruption tests mutate. */
static void write_zstd_sample(mw_buf_t *buf) {
  mw_schema_t s;
  all_types_schema(&s, true);
  mw_batch_t b;
  assert_int_equal(mw_batch_init(&b, &s), 0);
  fill_batch(&b, 40, 3);
  const mw_batch_t *bp = &b;
  mw_datafile_write_opts_t o = {.zstd = true};
  write_file(&s, &bp, 1, &o, buf);
  mw_batch_free(&b);
  mw_schema_free(&s);
}

/* A zstd value buffer's u64 raw length is a claim. Found by fuzz_datafile:
 * a 6 KiB file claiming 2 GiB made the reader allocate 2 GiB before the
 * frame proved short (regress seed fuzz/corpus/datafile/regress-zstd-
 * claims-2gib). A claim past the reader's column limit is refused by name,
 * for every column (variable-width ones were bounded only by 2 GiB); a
 * claim under it that the frame does not fill is "corrupt". */
static void test_zstd_raw_length_is_a_claim(void **state) {
  (void)state;
  mw_buf_t buf = MW_BUF_INIT;
  write_zstd_sample(&buf);
  uint8_t *copy = malloc(buf.len);
  assert_non_null(copy);
  mw_datafile_read_opts_t ro = {.max_rows = 1 << 16, .max_column_bytes = 1 << 20};
  size_t frames = 0;
  for (size_t m = 8; m + 4 <= buf.len; m++) {
    if (memcmp(buf.data + m, "\x28\xb5\x2f\xfd", 4) != 0) continue;
    uint64_t raw = 0;
    for (int k = 7; k >= 0; k--) raw = raw << 8 | buf.data[m - 8 + k];
    if (raw == 0 || raw > (1u << 20)) continue; /* not a length prefix */
    frames++;
    const uint64_t claims[2] = {(uint64_t)1 << 29, raw + 1000};
    const char *want[2] = {"exceeds", "zstd frame corrupt"};
    for (int c = 0; c < 2; c++) {
      memcpy(copy, buf.data, buf.len);
      for (int k = 0; k < 8; k++) copy[m - 8 + k] = (uint8_t)(claims[c] >> (8 * k));
      mw_datafile_t f;
      mw_batch_t out;
      mw_err_t err = {0};
      assert_int_equal(mw_datafile_open(&f, copy, buf.len, &ro, &err), 0);
      assert_true(mw_datafile_read_batch(&f, &out, &err) < 0);
      if (strstr(err.msg, want[c]) == NULL) fail_msg("claim %" PRIu64 " at %zu: %s", claims[c], m, err.msg);
      mw_datafile_close(&f);
    }
  }
  assert_true(frames >= 8); /* every value column is zstd-compressed */
  free(copy);
  mw_buf_free(&buf);
}

/* The zstd decompression context is reused, not made per buffer: a file
 * makes one on its first zstd buffer and keeps it for every column; a
 * context borrowed through the options is used instead and left to its
 * owner. A corrupt frame leaves the context mid-frame: the next file read
 * with it must still decode (the context is reset per buffer). */
static void test_zstd_context_reused(void **state) {
  (void)state;
  mw_schema_t s;
  all_types_schema(&s, true);
  mw_buf_t buf = MW_BUF_INIT;
  write_zstd_sample(&buf);
  /* the file's own context: made once, kept until close; these rows are the
   * reference for the reads below (the round trip is test_roundtrip_zstd's) */
  mw_datafile_t f, fin;
  mw_batch_t out, in;
  read_file(&buf, &fin, &in);
  assert_non_null(fin.zstd_dctx);
  assert_true(fin.zstd_dctx_owned);
  assert_int_equal(in.n_rows, 40);
  /* a borrowed one, through a corrupt frame and then a good file */
  uint8_t *bad = malloc(buf.len);
  assert_non_null(bad);
  memcpy(bad, buf.data, buf.len);
  /* the first frame's u64 raw length, two bytes short: the frame gives more
   * output than claimed and the read stops with the frame half decoded */
  size_t m = 8;
  uint64_t raw = 0;
  for (; m + 4 <= buf.len; m++) {
    if (memcmp(bad + m, "\x28\xb5\x2f\xfd", 4) != 0) continue;
    raw = 0;
    for (int k = 7; k >= 0; k--) raw = raw << 8 | bad[m - 8 + k];
    if (raw >= 3 && raw <= (1u << 20)) break;
  }
  assert_true(m + 4 <= buf.len);
  raw -= 2; /* the reader stops at claim + 1 bytes: one byte before the end */
  for (int k = 0; k < 8; k++) bad[m - 8 + k] = (uint8_t)(raw >> (8 * k));
  ZSTD_DCtx *dc = ZSTD_createDCtx();
  assert_non_null(dc);
  mw_datafile_read_opts_t ro = {.zstd_dctx = dc};
  mw_err_t err = {0};
  for (int round = 0; round < 2; round++) {
    assert_int_equal(mw_datafile_open(&f, bad, buf.len, &ro, &err), 0);
    assert_true(mw_datafile_read_batch(&f, &out, &err) < 0);
    if (strstr(err.msg, "zstd frame corrupt") == NULL) fail_msg("round %d: %s", round, err.msg);
    assert_ptr_equal(f.zstd_dctx, dc);
    assert_false(f.zstd_dctx_owned);
    mw_datafile_close(&f);
    assert_int_equal(mw_datafile_open(&f, buf.data, buf.len, &ro, &err), 0);
    if (mw_datafile_read_batch(&f, &out, &err) != 0) fail_msg("round %d: %s", round, err.msg);
    assert_ptr_equal(f.zstd_dctx, dc);
    assert_int_equal(out.n_rows, in.n_rows);
    for (size_t c = 0; c < s.n_fields; c++) assert_columns_equal(&s.fields[c], &out.cols[c], 0, &in.cols[c], in.n_rows);
    mw_batch_free(&out);
    mw_datafile_close(&f);
  }
  ZSTD_freeDCtx(dc); /* still ours: the files did not free it */
  free(bad);
  mw_batch_free(&in);
  mw_datafile_close(&fin);
  assert_null(fin.zstd_dctx);
  mw_buf_free(&buf);
  mw_schema_free(&s);
}

static void test_corrupt(void **state) {
  (void)state;
  mw_buf_t buf = MW_BUF_INIT;
  write_zstd_sample(&buf);
  uint8_t *copy = malloc(buf.len);
  /* every truncation, aligned to the end so the footer moves */
  for (size_t cut = 1; cut < buf.len; cut++) {
    memcpy(copy, buf.data + cut, buf.len - cut);
    try_decode(copy, buf.len - cut);
    try_decode(buf.data, buf.len - cut);
  }
  /* byte flips everywhere */
  for (size_t i = 0; i < buf.len; i++) {
    memcpy(copy, buf.data, buf.len);
    copy[i] ^= (uint8_t)(1u << (i % 8));
    try_decode(copy, buf.len);
    copy[i] = 0xff;
    try_decode(copy, buf.len);
  }
  /* a real Lance file, random flips */
  char **paths;
  size_t np = sstable_data_files(&paths), len;
  uint8_t *d = tu_read_file(paths[0], &len);
  uint8_t *c2 = malloc(len);
  for (int k = 0; k < 20000; k++) {
    memcpy(c2, d, len);
    c2[rnd() % len] = (uint8_t)rnd();
    c2[len - 1 - rnd() % 1200] = (uint8_t)rnd();
    try_decode(c2, len);
  }
  mw_err_t err = {0};
  assert_int_equal(mw_datafile_open(&(mw_datafile_t){0}, d, 10, NULL, &err), -EBADMSG);
  assert_non_null(strstr(err.msg, "footer"));
  free(c2);
  free(d);
  tu_free_names(paths, np);
  free(copy);
  mw_buf_free(&buf);
}

/* ---------------------------------------------------------------- Lance-only encodings */

/* FastLanes pack of 1024 T-bit values at W bits (the layout of the fastlanes
 * crate that Lance uses: value (row, lane) at bits row*W of lane `lane`). */
static void fl_pack(const uint64_t *in, unsigned t, unsigned wb, uint8_t *out) {
  static const unsigned order[8] = {0, 4, 2, 6, 1, 5, 3, 7};
  unsigned lanes = 1024 / t, tb = t / 8;
  memset(out, 0, (size_t)wb * 128);
  for (unsigned lane = 0; lane < lanes; lane++)
    for (unsigned row = 0; row < t; row++) {
      uint64_t v = in[order[row / 8] * 16 + (row % 8) * 128 + lane];
      for (unsigned b = 0; b < wb; b++) {
        unsigned bit = row * wb + b, word = bit / t, sh = bit % t;
        if ((v >> b) & 1) out[(size_t)(lanes * word + lane) * tb + sh / 8] |= (uint8_t)(1u << (sh % 8));
      }
    }
}

static void put_u16(mw_buf_t *b, uint16_t v) { assert_int_equal(mw_buf_put_u16le(b, v), 0); }

static void pack_to(mw_buf_t *b, const ProtobufCMessage *m) {
  size_t n = protobuf_c_message_get_packed_size(m);
  uint8_t *p = mw_buf_extend(b, n);
  assert_non_null(p);
  protobuf_c_message_pack(m, p);
}

/* A 2.2 file with one nullable int32 column of 1500 rows in one MiniBlock
 * page of two chunks (1024 + 476): values InlineBitpacking{32}; def levels
 * OutOfLineBitpacking{16, Flat{1}} (full block packed, tail raw) when
 * def_rle is false, else RLE{Flat16, Flat8}. Built by hand because our writer
 * emits neither; the packer follows the fastlanes crate's layout. */
static void bitpacked_file(bool def_rle, const int32_t *want, const bool *null, int n, mw_buf_t *file) {
  mw_buf_t words = MW_BUF_INIT, data = MW_BUF_INIT;
  enum { W = 11 };
  uint8_t packed[16 * 128];
  uint64_t vals[1024];
  for (int c = 0; c < 2; c++) {
    int start = c * 1024, cnt = c == 0 ? 1024 : n - 1024;
    mw_buf_t def = MW_BUF_INIT;
    if (!def_rle && c == 0) {
      for (int i = 0; i < 1024; i++) vals[i] = null[start + i];
      fl_pack(vals, 16, 1, packed);
      assert_int_equal(mw_buf_append(&def, packed, 128), 0);
    } else if (!def_rle) {
      for (int i = 0; i < cnt; i++) put_u16(&def, null[start + i]); /* raw tail */
    } else {
      mw_buf_t rv = MW_BUF_INIT, rl = MW_BUF_INIT;
      for (int i = 0; i < cnt;) {
        int j = i;
        while (j < cnt && j - i < 255 && null[start + j] == null[start + i]) j++;
        put_u16(&rv, null[start + i]);
        assert_int_equal(mw_buf_put_u8(&rl, (uint8_t)(j - i)), 0);
        i = j;
      }
      assert_int_equal(mw_buf_put_u64le(&def, rv.len), 0);
      assert_int_equal(mw_buf_append(&def, rv.data, rv.len), 0);
      assert_int_equal(mw_buf_append(&def, rl.data, rl.len), 0);
      mw_buf_free(&rv);
      mw_buf_free(&rl);
    }
    memset(vals, 0, sizeof vals);
    for (int i = 0; i < cnt; i++) vals[i] = null[start + i] ? 0 : (uint32_t)want[start + i];
    fl_pack(vals, 32, W, packed);
    size_t at = data.len, vn = 4 + (size_t)W * 128;
    put_u16(&data, (uint16_t)cnt);
    put_u16(&data, (uint16_t)def.len);
    assert_int_equal(mw_buf_put_u32le(&data, (uint32_t)vn), 0);
    assert_int_equal(mw_buf_append(&data, def.data, def.len), 0);
    assert_int_equal(mw_buf_align(&data, 8, 0xfe), 0);
    assert_int_equal(mw_buf_put_u32le(&data, W), 0);
    assert_int_equal(mw_buf_append(&data, packed, (size_t)W * 128), 0);
    assert_int_equal(mw_buf_align(&data, 8, 0xfe), 0);
    assert_int_equal(mw_buf_put_u32le(&words, (uint32_t)(((data.len - at) / 8 - 1) << 4) | (c == 0 ? 10 : 0)), 0);
    mw_buf_free(&def);
  }
  uint64_t off[2] = {0, 0}, size[2] = {words.len, data.len};
  assert_int_equal(mw_buf_append(file, words.data, words.len), 0);
  assert_int_equal(mw_buf_align(file, 64, 'H'), 0);
  off[1] = file->len;
  assert_int_equal(mw_buf_append(file, data.data, data.len), 0);
  assert_int_equal(mw_buf_align(file, 64, 'H'), 0);
  /* PageLayout */
  Lance__Encodings21__InlineBitpacking ib = LANCE__ENCODINGS21__INLINE_BITPACKING__INIT;
  ib.uncompressed_bits_per_value = 32;
  Lance__Encodings21__CompressiveEncoding vc = LANCE__ENCODINGS21__COMPRESSIVE_ENCODING__INIT;
  vc.compression_case = LANCE__ENCODINGS21__COMPRESSIVE_ENCODING__COMPRESSION_INLINE_BITPACKING;
  vc.inline_bitpacking = &ib;
  Lance__Encodings21__Flat f1 = LANCE__ENCODINGS21__FLAT__INIT, f16 = f1, f8 = f1;
  f1.bits_per_value = 1, f16.bits_per_value = 16, f8.bits_per_value = 8;
  Lance__Encodings21__CompressiveEncoding c1 = LANCE__ENCODINGS21__COMPRESSIVE_ENCODING__INIT, c16 = c1, c8 = c1, dc = c1;
  c1.compression_case = c16.compression_case = c8.compression_case = LANCE__ENCODINGS21__COMPRESSIVE_ENCODING__COMPRESSION_FLAT;
  c1.flat = &f1, c16.flat = &f16, c8.flat = &f8;
  Lance__Encodings21__OutOfLineBitpacking ool = LANCE__ENCODINGS21__OUT_OF_LINE_BITPACKING__INIT;
  ool.uncompressed_bits_per_value = 16;
  ool.values = &c1;
  Lance__Encodings21__Rle rle = LANCE__ENCODINGS21__RLE__INIT;
  rle.values = &c16;
  rle.run_lengths = &c8;
  if (def_rle) dc.compression_case = LANCE__ENCODINGS21__COMPRESSIVE_ENCODING__COMPRESSION_RLE, dc.rle = &rle;
  else dc.compression_case = LANCE__ENCODINGS21__COMPRESSIVE_ENCODING__COMPRESSION_OUT_OF_LINE_BITPACKING, dc.out_of_line_bitpacking = &ool;
  Lance__Encodings21__RepDefLayer layer = LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_NULLABLE_ITEM;
  Lance__Encodings21__MiniBlockLayout mb = LANCE__ENCODINGS21__MINI_BLOCK_LAYOUT__INIT;
  mb.def_compression = &dc;
  mb.value_compression = &vc;
  mb.n_layers = 1, mb.layers = &layer, mb.num_buffers = 1, mb.num_items = (uint64_t)n, mb.has_large_chunk = 1;
  Lance__Encodings21__PageLayout pl = LANCE__ENCODINGS21__PAGE_LAYOUT__INIT;
  pl.layout_case = LANCE__ENCODINGS21__PAGE_LAYOUT__LAYOUT_MINI_BLOCK_LAYOUT;
  pl.mini_block_layout = &mb;
  mw_buf_t plb = MW_BUF_INIT, anyb = MW_BUF_INIT, cmb = MW_BUF_INIT, fdb = MW_BUF_INIT;
  pack_to(&plb, &pl.base);
  Google__Protobuf__Any any = GOOGLE__PROTOBUF__ANY__INIT;
  any.type_url = "/lance.encodings21.PageLayout";
  any.value.data = plb.data, any.value.len = plb.len;
  pack_to(&anyb, &any.base);
  Lance__File__V2__DirectEncoding de = LANCE__FILE__V2__DIRECT_ENCODING__INIT;
  de.encoding.data = anyb.data, de.encoding.len = anyb.len;
  Lance__File__V2__Encoding enc = LANCE__FILE__V2__ENCODING__INIT;
  enc.location_case = LANCE__FILE__V2__ENCODING__LOCATION_DIRECT, enc.direct = &de;
  Lance__File__V2__ColumnMetadata__Page pg = LANCE__FILE__V2__COLUMN_METADATA__PAGE__INIT, *pgp = &pg;
  pg.n_buffer_offsets = pg.n_buffer_sizes = 2, pg.buffer_offsets = off, pg.buffer_sizes = size;
  pg.length = (uint64_t)n, pg.encoding = &enc;
  Lance__File__V2__ColumnMetadata cm = LANCE__FILE__V2__COLUMN_METADATA__INIT;
  cm.n_pages = 1, cm.pages = &pgp;
  pack_to(&cmb, &cm.base);
  mw_schema_t s;
  mw_schema_init(&s);
  assert_int_equal(mw_schema_add(&s, "x", MW_T_INT32, true), 0);
  Lance__File__Field **fields;
  size_t nf;
  assert_int_equal(mw_lance_fields_from_schema(&s, &fields, &nf), 0);
  Lance__File__Schema sc = LANCE__FILE__SCHEMA__INIT;
  sc.n_fields = nf, sc.fields = fields;
  Lance__File__V2__FileDescriptor fd = LANCE__FILE__V2__FILE_DESCRIPTOR__INIT;
  fd.schema = &sc, fd.length = (uint64_t)n;
  pack_to(&fdb, &fd.base);
  uint64_t gb0 = file->len, cm0;
  assert_int_equal(mw_buf_append(file, fdb.data, fdb.len), 0);
  cm0 = file->len;
  assert_int_equal(mw_buf_append(file, cmb.data, cmb.len), 0);
  uint64_t cmo = file->len;
  mw_buf_put_u64le(file, cm0), mw_buf_put_u64le(file, cmb.len);
  uint64_t gbo = file->len;
  mw_buf_put_u64le(file, gb0), mw_buf_put_u64le(file, fdb.len);
  mw_buf_put_u64le(file, cm0), mw_buf_put_u64le(file, cmo), mw_buf_put_u64le(file, gbo);
  mw_buf_put_u32le(file, 1), mw_buf_put_u32le(file, 1), mw_buf_put_u16le(file, 2), mw_buf_put_u16le(file, 2);
  assert_int_equal(mw_buf_append(file, "LANC", 4), 0);
  mw_lance_fields_free(fields, nf);
  mw_schema_free(&s);
  mw_buf_free(&plb), mw_buf_free(&anyb), mw_buf_free(&cmb), mw_buf_free(&fdb);
  mw_buf_free(&words), mw_buf_free(&data);
}

static void test_lance_bitpacking(void **state) {
  (void)state;
  enum { N = 1500 };
  int32_t want[N];
  bool null[N];
  for (int i = 0; i < N; i++) {
    want[i] = (int32_t)(rnd() % 2048);
    null[i] = i % 13 == 5 || (i >= 1100 && i < 1500 && i % 400 < 300);
  }
  for (int mode = 0; mode < 2; mode++) {
    mw_buf_t file = MW_BUF_INIT;
    bitpacked_file(mode == 1, want, null, N, &file);
    mw_datafile_t f;
    mw_batch_t b;
    read_file(&file, &f, &b);
    assert_int_equal(b.n_rows, N);
    int64_t nulls = 0;
    for (int i = 0; i < N; i++) {
      nulls += null[i];
      assert_int_equal(mw_column_valid(&b.cols[0], i), !null[i]);
      if (!null[i]) {
        int32_t got;
        memcpy(&got, b.cols[0].values.data + 4 * i, 4);
        assert_int_equal(got, want[i]);
      }
    }
    assert_int_equal(b.cols[0].null_count, nulls);
    for (size_t i = 0; i < file.len; i += 7) { /* corrupt copies never crash */
      uint8_t save = file.data[i];
      file.data[i] ^= 0x5a;
      try_decode(file.data, file.len);
      file.data[i] = save;
    }
    mw_batch_free(&b);
    mw_datafile_close(&f);
    mw_buf_free(&file);
  }
}

/* ---- hand-built 2.0 files (lance-files.md §3.1, the layouts lancew.py wrote) ---- */

static void pbv(mw_buf_t *b, uint64_t v) {
  do {
    uint8_t c = v & 0x7f;
    v >>= 7;
    assert_int_equal(mw_buf_put_u8(b, (uint8_t)(c | (v ? 0x80 : 0))), 0);
  } while (v);
}
static void pbu(mw_buf_t *b, uint32_t field, uint64_t v) { pbv(b, (uint64_t)field << 3), pbv(b, v); }
static void pbm(mw_buf_t *b, uint32_t field, const mw_buf_t *m) {
  pbv(b, (uint64_t)field << 3 | 2), pbv(b, m->len);
  if (m->len) assert_int_equal(mw_buf_append(b, m->data, m->len), 0);
}
/* ArrayEncoding{flat{bits, buffer{index}}} */
static void ae_flat(mw_buf_t *out, uint64_t bits, uint64_t idx) {
  mw_buf_t buf = MW_BUF_INIT, flat = MW_BUF_INIT;
  if (idx) pbu(&buf, 1, idx);
  pbu(&flat, 1, bits), pbm(&flat, 2, &buf);
  pbm(out, 1, &flat);
  mw_buf_free(&buf), mw_buf_free(&flat);
}
/* ArrayEncoding{nullable{no_nulls{values}}} or {some_nulls{validity, values}} */
static void ae_nullable(mw_buf_t *out, const mw_buf_t *validity, const mw_buf_t *values) {
  mw_buf_t inner = MW_BUF_INIT, nul = MW_BUF_INIT;
  if (validity) pbm(&inner, 1, validity), pbm(&inner, 2, values);
  else pbm(&inner, 1, values);
  pbm(&nul, validity ? 2 : 1, &inner);
  pbm(out, 2, &nul);
  mw_buf_free(&inner), mw_buf_free(&nul);
}

typedef struct page20 {
  mw_buf_t bufs[2];
  size_t n_bufs;
  mw_buf_t enc; /* ArrayEncoding */
} page20_t;

static void file20(const mw_schema_t *s, page20_t *pages, uint64_t rows, mw_buf_t *file) {
  mw_buf_t cms = MW_BUF_INIT, fdb = MW_BUF_INIT;
  uint64_t *cm_len = calloc(s->n_fields, sizeof *cm_len);
  for (size_t c = 0; c < s->n_fields; c++) {
    page20_t *p = &pages[c];
    uint64_t off[2], size[2];
    for (size_t k = 0; k < p->n_bufs; k++) {
      off[k] = file->len, size[k] = p->bufs[k].len;
      assert_int_equal(mw_buf_append(file, p->bufs[k].data, p->bufs[k].len), 0);
      assert_int_equal(mw_buf_align(file, 64, 0), 0);
    }
    mw_buf_t anyb = MW_BUF_INIT;
    Google__Protobuf__Any any = GOOGLE__PROTOBUF__ANY__INIT;
    any.type_url = "/lance.encodings.ArrayEncoding";
    any.value.data = p->enc.data, any.value.len = p->enc.len;
    pack_to(&anyb, &any.base);
    Lance__File__V2__DirectEncoding de = LANCE__FILE__V2__DIRECT_ENCODING__INIT;
    de.encoding.data = anyb.data, de.encoding.len = anyb.len;
    Lance__File__V2__Encoding enc = LANCE__FILE__V2__ENCODING__INIT;
    enc.location_case = LANCE__FILE__V2__ENCODING__LOCATION_DIRECT, enc.direct = &de;
    Lance__File__V2__ColumnMetadata__Page pg = LANCE__FILE__V2__COLUMN_METADATA__PAGE__INIT, *pgp = &pg;
    pg.n_buffer_offsets = pg.n_buffer_sizes = p->n_bufs, pg.buffer_offsets = off, pg.buffer_sizes = size;
    pg.length = rows, pg.encoding = &enc;
    Lance__File__V2__ColumnMetadata cm = LANCE__FILE__V2__COLUMN_METADATA__INIT;
    cm.n_pages = 1, cm.pages = &pgp;
    size_t before = cms.len;
    pack_to(&cms, &cm.base);
    cm_len[c] = cms.len - before;
    mw_buf_free(&anyb);
  }
  Lance__File__Field **fields;
  size_t nf;
  assert_int_equal(mw_lance_fields_from_schema(s, &fields, &nf), 0);
  Lance__File__Schema sc = LANCE__FILE__SCHEMA__INIT;
  sc.n_fields = nf, sc.fields = fields;
  Lance__File__V2__FileDescriptor fd = LANCE__FILE__V2__FILE_DESCRIPTOR__INIT;
  fd.schema = &sc, fd.length = rows;
  pack_to(&fdb, &fd.base);
  uint64_t gb0 = file->len;
  assert_int_equal(mw_buf_append(file, fdb.data, fdb.len), 0);
  uint64_t cm0 = file->len, at = cm0;
  assert_int_equal(mw_buf_append(file, cms.data, cms.len), 0);
  uint64_t cmo = file->len;
  for (size_t c = 0; c < s->n_fields; c++) mw_buf_put_u64le(file, at), mw_buf_put_u64le(file, cm_len[c]), at += cm_len[c];
  uint64_t gbo = file->len;
  mw_buf_put_u64le(file, gb0), mw_buf_put_u64le(file, fdb.len);
  mw_buf_put_u64le(file, cm0), mw_buf_put_u64le(file, cmo), mw_buf_put_u64le(file, gbo);
  mw_buf_put_u32le(file, 1), mw_buf_put_u32le(file, (uint32_t)s->n_fields);
  mw_buf_put_u16le(file, 0), mw_buf_put_u16le(file, 3);
  assert_int_equal(mw_buf_append(file, "LANC", 4), 0);
  mw_lance_fields_free(fields, nf);
  free(cm_len);
  mw_buf_free(&cms), mw_buf_free(&fdb);
}

/* 2.0 pages: fixed width with and without nulls, bool, utf8 with nulls
 * (null_adjustment), fsl<f32,4> with nulls; decoded against our batch. */
static void test_read_v20(void **state) {
  (void)state;
  mw_schema_t s;
  mw_schema_init(&s);
  assert_true(mw_schema_add(&s, "i", MW_T_INT64, false) >= 0);
  assert_true(mw_schema_add(&s, "d", MW_T_FLOAT64, true) >= 0);
  assert_true(mw_schema_add(&s, "b", MW_T_BOOL, true) >= 0);
  assert_true(mw_schema_add(&s, "s", MW_T_UTF8, true) >= 0);
  assert_true(mw_schema_add(&s, "v", MW_T_FSL, true) >= 0);
  s.fields[4].fsl_dim = 4;
  mw_batch_t in;
  assert_int_equal(mw_batch_init(&in, &s), 0);
  fill_batch(&in, 700, 0);
  mw_batch_t nb;
  mw_schema_t s2;
  assert_int_equal(mw_schema_copy(&s2, &s), 0);
  assert_int_equal(mw_batch_init(&nb, &s2), 0);
  fill_batch(&nb, 700, 6); /* same schema, with nulls in the nullable columns */
  page20_t pages[5];
  memset(pages, 0, sizeof pages);
  const int64_t n = 700;
  /* i: no nulls, flat{64} */
  mw_buf_append(&pages[0].bufs[0], in.cols[0].values.data, 8 * n), pages[0].n_bufs = 1;
  mw_buf_t fl = MW_BUF_INIT, va = MW_BUF_INIT;
  ae_flat(&fl, 64, 0), ae_nullable(&pages[0].enc, NULL, &fl), mw_buf_reset(&fl);
  /* d, b, v: some_nulls{validity flat{1, buf 0}, values buf 1} */
  for (int c = 1; c <= 4; c += 1) {
    if (c == 3) continue;
    const mw_column_t *col = &nb.cols[c];
    page20_t *p = &pages[c];
    mw_buf_append(&p->bufs[0], col->validity.data, col->validity.len);
    mw_buf_append(&p->bufs[1], col->values.data, col->values.len);
    p->n_bufs = 2;
    ae_flat(&va, 1, 0);
    if (c == 4) { /* fixed_size_list{4, items: nullable{no_nulls{flat{32, buf 1}}}} */
      mw_buf_t items = MW_BUF_INIT, f32 = MW_BUF_INIT, fsl = MW_BUF_INIT;
      ae_flat(&f32, 32, 1), ae_nullable(&items, NULL, &f32);
      pbu(&fsl, 1, 4), pbm(&fsl, 2, &items);
      pbm(&fl, 3, &fsl);
      mw_buf_free(&items), mw_buf_free(&f32), mw_buf_free(&fsl);
    } else {
      ae_flat(&fl, c == 2 ? 1 : 64, 1);
    }
    ae_nullable(&p->enc, &va, &fl);
    mw_buf_reset(&fl), mw_buf_reset(&va);
  }
  /* s: binary{indices: nullable{no_nulls{flat{64, buf 0}}}, bytes: flat{8, buf 1}, null_adjustment} */
  {
    const mw_column_t *col = &nb.cols[3];
    const int32_t *off = (const int32_t *)(const void *)col->offsets.data;
    uint64_t adj = (uint64_t)off[n] + 1;
    for (int64_t r = 0; r < n; r++)
      mw_buf_put_u64le(&pages[3].bufs[0], (uint64_t)off[r + 1] + (mw_column_valid(col, r) ? 0 : adj));
    mw_buf_append(&pages[3].bufs[1], col->values.data, (size_t)off[n]);
    pages[3].n_bufs = 2;
    mw_buf_t ind = MW_BUF_INIT, bytes = MW_BUF_INIT, bin = MW_BUF_INIT;
    ae_flat(&fl, 64, 0), ae_nullable(&ind, NULL, &fl), ae_flat(&bytes, 8, 1);
    pbm(&bin, 1, &ind), pbm(&bin, 2, &bytes), pbu(&bin, 3, adj);
    pbm(&pages[3].enc, 6, &bin);
    mw_buf_free(&ind), mw_buf_free(&bytes), mw_buf_free(&bin), mw_buf_reset(&fl);
  }
  mw_buf_t file = MW_BUF_INIT;
  file20(&s, pages, (uint64_t)n, &file);
  mw_datafile_t f;
  mw_batch_t out;
  read_file(&file, &f, &out);
  assert_int_equal(f.major, 0);
  assert_int_equal(f.minor, 3);
  assert_int_equal(out.n_rows, n);
  assert_columns_equal(&s.fields[0], &in.cols[0], 0, &out.cols[0], n);
  for (size_t c = 1; c < 5; c++) {
    assert_int_equal(out.cols[c].null_count, nb.cols[c].null_count);
    assert_columns_equal(&s.fields[c], &nb.cols[c], 0, &out.cols[c], n);
  }
  assert_true(out.cols[3].null_count > 0);
  for (size_t i = 0; i < file.len; i += 5) {
    uint8_t save = file.data[i];
    file.data[i] ^= 0xa5;
    try_decode(file.data, file.len);
    file.data[i] = save;
  }
  mw_batch_free(&out);
  mw_datafile_close(&f);
  for (int c = 0; c < 5; c++) mw_buf_free(&pages[c].bufs[0]), mw_buf_free(&pages[c].bufs[1]), mw_buf_free(&pages[c].enc);
  mw_buf_free(&fl), mw_buf_free(&va), mw_buf_free(&file);
  mw_batch_free(&in), mw_batch_free(&nb);
  mw_schema_free(&s), mw_schema_free(&s2);
}

static void test_write_rejects(void **state) {
  (void)state;
  mw_schema_t s, t;
  all_types_schema(&s, true);
  all_types_schema(&t, false);
  mw_batch_t b;
  assert_int_equal(mw_batch_init(&b, &t), 0);
  fill_batch(&b, 10, 0);
  mw_buf_t buf = MW_BUF_INIT;
  const mw_batch_t *bp = &b;
  mw_err_t err = {0};
  assert_int_equal(mw_datafile_write(&s, &bp, 1, NULL, 0, NULL, &buf, &err), -EINVAL);
  assert_int_equal(buf.len, 0);
  /* zero rows: a valid empty file */
  mw_batch_t e;
  assert_int_equal(mw_batch_init(&e, &s), 0);
  bp = &e;
  assert_int_equal(mw_datafile_write(&s, &bp, 1, NULL, 0, NULL, &buf, NULL), 0);
  mw_datafile_t f;
  mw_batch_t out;
  read_file(&buf, &f, &out);
  assert_int_equal(out.n_rows, 0);
  mw_batch_free(&out);
  mw_datafile_close(&f);
  mw_batch_free(&e);
  mw_buf_free(&buf);
  mw_batch_free(&b);
  mw_schema_free(&s);
  mw_schema_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_roundtrip_no_nulls),
      cmocka_unit_test(test_roundtrip_nulls),
      cmocka_unit_test(test_roundtrip_batches),
      cmocka_unit_test(test_roundtrip_zstd),
      cmocka_unit_test(test_batches_same_as_concat),
      cmocka_unit_test(test_multipage),
      cmocka_unit_test(test_default_pages),
      cmocka_unit_test(test_extra_global_buffers),
      cmocka_unit_test(test_golden_float64_colmeta),
      cmocka_unit_test(test_golden_tombstone),
      cmocka_unit_test(test_golden_schema_bytes),
      cmocka_unit_test(test_golden_read_all),
      cmocka_unit_test(test_golden_values_vs_expected),
      cmocka_unit_test(test_golden_rewrite),
      cmocka_unit_test(test_zstd_raw_length_is_a_claim),
      cmocka_unit_test(test_zstd_context_reused),
      cmocka_unit_test(test_corrupt),
      cmocka_unit_test(test_lance_bitpacking),
      cmocka_unit_test(test_read_v20),
      cmocka_unit_test(test_write_rejects),
  };
  return tu_run_group(tests, NULL, NULL);
}
