/*
 * test_legacy_v1.c — Lance v1 ("legacy", format.proto) data files.
 *
 * Golden files: tests/lance/data/legacy_v1/<name>.lance were written by LanceDB
 * 0.39.0 (tests/interop/make-legacy-v1.mjs, dataStorageVersion "legacy"),
 * and <name>.expected holds what LanceDB read back from them, cell by cell. Our
 * reader must print exactly those cells: every type v1 stores (int32, int64,
 * float, double, bool, string, binary, fixed_size_list<float, 3>), LanceDB's
 * null rules (a null number reads as 0, an empty string of a nullable field
 * as null), -0.0, and a file of two batches.
 *
 * Files built here from the format definition alone (the seed's messages,
 * hand-encoded) check the layout rules one by one: page table geometry,
 * batch offsets, var-binary offsets, encodings we refuse, the footer; and
 * every truncation and byte flip of a golden file must fail cleanly or
 * decode.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cases.h"

#include "lance/legacy_v1.h"
#include "testutil.h"

/* The committed goldens, or (MW_LEGACY_V1_DIR, the interop test
 * legacy-v1-fresh) files the pinned LanceDB has just written. */
static char *data_path(const char *name) {
  const char *dir = getenv("MW_LEGACY_V1_DIR");
  if (dir != NULL) return tu_strf("%s/%s", dir, name);
  const char *src = getenv("MW_SOURCE_ROOT");
  if (src == NULL) fail_msg("MW_SOURCE_ROOT is not set");
  return tu_strf("%s/tests/lance/data/legacy_v1/%s", src, name);
}

/* One cell in the .expected notation (see make-legacy-v1.mjs). */
static void cell(const mw_field_t *f, const mw_column_t *c, int64_t i, char *out, size_t n) {
  if (!mw_column_valid(c, i)) {
    snprintf(out, n, "null");
    return;
  }
  size_t at = 0;
  const uint8_t *v = c->values.data;
  switch (f->type) {
    case MW_T_INT32: snprintf(out, n, "%d", ((const int32_t *)(const void *)v)[i]); break;
    case MW_T_INT64: snprintf(out, n, "%lld", (long long)((const int64_t *)(const void *)v)[i]); break;
    case MW_T_UINT32: snprintf(out, n, "%u", ((const uint32_t *)(const void *)v)[i]); break;
    case MW_T_UINT64: snprintf(out, n, "%llu", (unsigned long long)((const uint64_t *)(const void *)v)[i]); break;
    case MW_T_FLOAT32: snprintf(out, n, "f32:%08x", ((const uint32_t *)(const void *)v)[i]); break;
    case MW_T_FLOAT64: snprintf(out, n, "f64:%016llx", (unsigned long long)((const uint64_t *)(const void *)v)[i]); break;
    case MW_T_BOOL: snprintf(out, n, "%s", mw_bit_get(v, i) ? "true" : "false"); break;
    case MW_T_UTF8:
    case MW_T_BINARY: {
      size_t len;
      const uint8_t *p = mw_column_bytes(c, i, &len);
      at = (size_t)snprintf(out, n, "%s", f->type == MW_T_UTF8 ? "s:" : "b:");
      for (size_t k = 0; k < len && at + 3 < n; k++) at += (size_t)snprintf(out + at, n - at, "%02x", p[k]);
      break;
    }
    case MW_T_FSL: {
      at = (size_t)snprintf(out, n, "v:");
      const uint32_t *q = (const uint32_t *)(const void *)v + (size_t)i * (size_t)f->fsl_dim;
      for (int k = 0; k < f->fsl_dim && at + 10 < n; k++)
        at += (size_t)snprintf(out + at, n - at, "%s%08x", k ? "," : "", q[k]);
      break;
    }
    default: snprintf(out, n, "(type %s)", mw_type_name(f->type)); break; /* v1 files hold no other type */
  }
}

/* Decode every manifest field of a v1 file; compare with NAME.expected. */
static void golden(const char *name, size_t want_fields, size_t want_batches) {
  char *ln = tu_strf("%s.lance", name), *en = tu_strf("%s.expected", name);
  char *lp = data_path(ln), *ep = data_path(en);
  free(ln), free(en);
  size_t len, elen;
  uint8_t *p = tu_read_file(lp, &len), *e = tu_read_file(ep, &elen);
  if (p == NULL || e == NULL) fail_msg("cannot read %s / %s", lp, ep);
  assert_true(mw_v1_is_v1(p, len));
  mw_v1_file_t f;
  mw_err_t err = {0};
  if (mw_v1_open(&f, p, len, &err) < 0) fail_msg("%s: %s", lp, err.msg);
  assert_int_equal(f.major, 0);
  assert_int_equal(f.minor, 2);
  assert_true(f.has_manifest);
  assert_int_equal(f.manifest.n_fields, want_fields);
  assert_int_equal(f.pages.n_batches, want_batches);
  assert_string_equal(f.manifest.data_format_version, "0.1");
  assert_string_equal(f.manifest.writer_version, "12.0.0");
  assert_true(f.has_stats);
  /* the columns, as LanceDB printed them */
  mw_field_t mf[16];
  mw_column_t cols[16];
  assert_true(want_fields <= 16);
  memset(cols, 0, sizeof cols);
  char *save = NULL, *line = strtok_r((char *)e, "\n", &save);
  char *hdr_save = NULL, *name_tok = strtok_r(line, "\t", &hdr_save);
  for (size_t i = 0; i < want_fields; i++, name_tok = strtok_r(NULL, "\t", &hdr_save)) {
    assert_non_null(name_tok);
    assert_string_equal(f.manifest.fields[i].name, name_tok);
    if (mw_v1_field_type(&f.manifest.fields[i], &mf[i], &err) < 0) fail_msg("%s", err.msg);
    if (mw_v1_read_column(&f, false, &f.manifest.fields[i], &mf[i], &cols[i], &err) < 0) fail_msg("%s", err.msg);
    assert_int_equal((uint64_t)cols[i].length, mw_v1_rows(&f));
  }
  int64_t row = 0;
  char got[512];
  while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
    char *cs = NULL, *tok = strtok_r(line, "\t", &cs);
    for (size_t i = 0; i < want_fields; i++, tok = strtok_r(NULL, "\t", &cs)) {
      assert_non_null(tok);
      cell(&mf[i], &cols[i], row, got, sizeof got);
      if (strcmp(got, tok) != 0) fail_msg("%s row %lld column %s: LanceDB read %s, we %s", name, (long long)row, mf[i].name, tok, got);
    }
    row++;
  }
  assert_int_equal((uint64_t)row, mw_v1_rows(&f));
  /* the statistics section decodes too: one row per batch */
  size_t decoded = 0;
  for (size_t i = 0; i < f.n_stats_fields; i++) {
    mw_field_t sf;
    if (mw_v1_field_type(&f.stats_fields[i], &sf, NULL) < 0) continue; /* struct parents */
    mw_column_t sc = {0};
    if (mw_v1_read_column(&f, true, &f.stats_fields[i], &sf, &sc, &err) < 0) fail_msg("stats: %s", err.msg);
    assert_int_equal(sc.length, (int64_t)want_batches);
    decoded++;
    mw_buf_free(&sc.values), mw_buf_free(&sc.validity), mw_buf_free(&sc.offsets);
  }
  size_t parents = 0;
  for (size_t i = 0; i < f.n_stats_fields; i++) parents += strcmp(f.stats_fields[i].logical_type, "struct") == 0;
  assert_true(parents >= want_fields - 1); /* every column but a vector has statistics */
  assert_int_equal(decoded, 3 * parents);  /* null_count, min_value, max_value each */
  for (size_t i = 0; i < want_fields; i++)
    mw_buf_free(&cols[i].values), mw_buf_free(&cols[i].validity), mw_buf_free(&cols[i].offsets);
  mw_v1_close(&f);
  free(p), free(e), free(lp), free(ep);
}

static void test_golden_types(void **state) {
  (void)state;
  golden("types", 8, 1);
}

static void test_golden_batches(void **state) {
  (void)state;
  golden("batches", 2, 2);
}

/* Every truncation fails; every byte flip fails cleanly or decodes. */
static void test_golden_mutations(void **state) {
  (void)state;
  char *lp = data_path("types.lance");
  size_t len;
  uint8_t *p = tu_read_file(lp, &len);
  assert_non_null(p);
  for (size_t cut = 0; cut < len; cut += 7) {
    uint8_t *q = malloc(cut + 1);
    memcpy(q, p, cut);
    mw_v1_file_t f;
    assert_true(mw_v1_open(&f, q, cut, NULL) < 0);
    mw_v1_close(&f);
    free(q);
  }
  for (size_t i = 0; i < len; i++) {
    uint8_t *q = malloc(len);
    memcpy(q, p, len);
    q[i] ^= 0x5a;
    mw_v1_file_t f;
    if (mw_v1_open(&f, q, len, NULL) == 0) {
      for (size_t k = 0; k < f.manifest.n_fields; k++) {
        mw_field_t mf;
        mw_column_t c = {0};
        if (mw_v1_field_type(&f.manifest.fields[k], &mf, NULL) == 0) mw_v1_read_column(&f, false, &f.manifest.fields[k], &mf, &c, NULL);
        mw_buf_free(&c.values), mw_buf_free(&c.validity), mw_buf_free(&c.offsets);
      }
    }
    mw_v1_close(&f);
    free(q);
  }
  free(p);
  free(lp);
}

/* ----------------------------------------------- built from format.proto */

static void pb_varint(mw_buf_t *b, uint64_t v) {
  while (v >= 0x80) {
    mw_buf_put_u8(b, (uint8_t)(v | 0x80));
    v >>= 7;
  }
  mw_buf_put_u8(b, (uint8_t)v);
}
static void pb_u(mw_buf_t *b, uint32_t tag, uint64_t v) {
  pb_varint(b, (uint64_t)tag << 3);
  pb_varint(b, v);
}
static void pb_bytes(mw_buf_t *b, uint32_t tag, const void *p, size_t n) {
  pb_varint(b, (uint64_t)tag << 3 | 2);
  pb_varint(b, n);
  mw_buf_append(b, p, n);
}
static void pb_str(mw_buf_t *b, uint32_t tag, const char *s) { pb_bytes(b, tag, s, strlen(s)); }

/* Field per format.proto: type, name, id, parent_id, logical_type, nullable, encoding. */
static void pb_field(mw_buf_t *m, const char *name, int32_t id, const char *lt, bool nullable, int enc) {
  mw_buf_t f = MW_BUF_INIT;
  pb_u(&f, 1, MW_V1_FIELD_LEAF);
  pb_str(&f, 2, name);
  pb_u(&f, 3, (uint64_t)id);
  pb_u(&f, 4, (uint64_t)(int64_t)-1);
  pb_str(&f, 5, lt);
  pb_u(&f, 6, nullable);
  pb_u(&f, 7, (uint64_t)enc);
  pb_bytes(m, 1, f.data, f.len);
  mw_buf_free(&f);
}

typedef struct hv1 {
  int str_encoding;        /* VAR_BINARY normally */
  bool bad_offsets;        /* batch_offsets not monotone */
  bool metadata_gap;       /* a byte between metadata and footer */
  bool short_page;         /* page table says 3 items for a 2-row batch */
  int64_t page_table_shift; /* move the page table position */
} hv1_t;

/* Two batches (rows 0-1, 2-4) of {n int64 PLAIN, s string VAR_BINARY}. */
static void build_v1(const hv1_t *h, mw_buf_t *out) {
  int64_t nums[5] = {7, -8, 9, INT64_MIN, INT64_MAX};
  const char *strs[5] = {"ab", "", "c", "dé", "fff"};
  uint64_t pt[2][2][2];
  /* field 0: two PLAIN pages */
  pt[0][0][0] = out->len, pt[0][0][1] = 2;
  mw_buf_append(out, nums, 16);
  pt[0][1][0] = out->len, pt[0][1][1] = 3;
  mw_buf_append(out, nums + 2, 24);
  /* field 1: bytes, then (items + 1) absolute end offsets */
  for (int b = 0; b < 2; b++) {
    int lo = b ? 2 : 0, hi = b ? 5 : 2;
    uint64_t starts = out->len;
    uint64_t offs[6];
    offs[0] = starts;
    for (int i = lo; i < hi; i++) {
      mw_buf_append(out, strs[i], strlen(strs[i]));
      offs[i - lo + 1] = out->len;
    }
    pt[1][b][0] = out->len, pt[1][b][1] = (uint64_t)(hi - lo);
    for (int i = 0; i <= hi - lo; i++) mw_buf_put_u64le(out, offs[i]);
  }
  if (h->short_page) pt[0][0][1] = 3;
  uint64_t ptp = out->len;
  for (int fi = 0; fi < 2; fi++)
    for (int b = 0; b < 2; b++) mw_buf_put_u64le(out, pt[fi][b][0]), mw_buf_put_u64le(out, pt[fi][b][1]);
  /* the manifest: fields, version 1 */
  mw_buf_t m = MW_BUF_INIT;
  pb_field(&m, "n", 0, "int64", false, MW_V1_ENC_PLAIN);
  pb_field(&m, "s", 1, "string", true, h->str_encoding);
  pb_u(&m, 3, 1);
  uint64_t mpos = out->len;
  mw_buf_put_u32le(out, (uint32_t)m.len);
  mw_buf_append(out, m.data, m.len);
  /* metadata */
  mw_buf_t md = MW_BUF_INIT, offs = MW_BUF_INIT;
  pb_u(&md, 1, mpos);
  pb_varint(&offs, 0), pb_varint(&offs, h->bad_offsets ? 4 : 2), pb_varint(&offs, 5);
  if (h->bad_offsets) pb_varint(&offs, 3);
  pb_bytes(&md, 2, offs.data, offs.len);
  pb_u(&md, 3, (uint64_t)((int64_t)ptp + h->page_table_shift));
  uint64_t metapos = out->len;
  mw_buf_put_u32le(out, (uint32_t)md.len);
  mw_buf_append(out, md.data, md.len);
  if (h->metadata_gap) mw_buf_put_u8(out, 0);
  mw_buf_put_u64le(out, metapos);
  mw_buf_put_u16le(out, 0);
  mw_buf_put_u16le(out, 2);
  mw_buf_append(out, "LANC", 4);
  mw_buf_free(&m), mw_buf_free(&md), mw_buf_free(&offs);
}

static int open_read(const hv1_t *h, mw_column_t *c0, mw_column_t *c1, mw_err_t *err) {
  mw_buf_t b = MW_BUF_INIT;
  build_v1(h, &b);
  mw_v1_file_t f;
  int rc = mw_v1_open(&f, b.data, b.len, err);
  mw_field_t m0, m1;
  if (rc == 0) rc = mw_v1_field_type(&f.manifest.fields[0], &m0, err);
  if (rc == 0) rc = mw_v1_field_type(&f.manifest.fields[1], &m1, err);
  if (rc == 0) rc = mw_v1_read_column(&f, false, &f.manifest.fields[0], &m0, c0, err);
  if (rc == 0) rc = mw_v1_read_column(&f, false, &f.manifest.fields[1], &m1, c1, err);
  mw_v1_close(&f);
  mw_buf_free(&b);
  return rc;
}

static void col_free(mw_column_t *c) {
  mw_buf_free(&c->values), mw_buf_free(&c->validity), mw_buf_free(&c->offsets);
  memset(c, 0, sizeof *c);
}

static void test_built(void **state) {
  (void)state;
  hv1_t h = {.str_encoding = MW_V1_ENC_VAR_BINARY};
  mw_column_t c0 = {0}, c1 = {0};
  mw_err_t err = {0};
  if (open_read(&h, &c0, &c1, &err) < 0) fail_msg("%s", err.msg);
  assert_int_equal(c0.length, 5);
  assert_int_equal(((int64_t *)(void *)c0.values.data)[3], INT64_MIN);
  assert_int_equal(c1.length, 5);
  assert_int_equal(c1.null_count, 1); /* "" in a nullable field reads as null */
  assert_false(mw_column_valid(&c1, 1));
  size_t n;
  const uint8_t *s = mw_column_bytes(&c1, 3, &n);
  assert_int_equal(n, 3);
  assert_memory_equal(s, "d\xc3\xa9", 3);
  s = mw_column_bytes(&c1, 4, &n);
  assert_memory_equal(s, "fff", 3);
  col_free(&c0), col_free(&c1);
}

static void expect(const hv1_t *h, int code, const char *why) {
  mw_column_t c0 = {0}, c1 = {0};
  mw_err_t err = {0};
  int rc = open_read(h, &c0, &c1, &err);
  if (rc != code || strstr(err.msg, why) == NULL) fail_msg("expected %d \"%s\", got %d \"%s\"", code, why, rc, err.msg);
  col_free(&c0), col_free(&c1);
}

static void test_built_refusals(void **state) {
  (void)state;
  hv1_t ok = {.str_encoding = MW_V1_ENC_VAR_BINARY};
  hv1_t h = ok;
  h.str_encoding = MW_V1_ENC_DICTIONARY;
  expect(&h, -ENOTSUP, "field s: encoding 3");
  h = ok, h.bad_offsets = true;
  expect(&h, -EBADMSG, "is not a running row count");
  h = ok, h.metadata_gap = true;
  expect(&h, -EBADMSG, "not at the footer");
  h = ok, h.short_page = true;
  expect(&h, -EBADMSG, "field n (id 0) batch 0: page holds 3 items, the batch 2");
  h = ok, h.page_table_shift = 1 << 20;
  expect(&h, -EBADMSG, "data page table at");
  h = ok, h.page_table_shift = -1; /* the table now starts one byte early: entries are garbage */
  mw_column_t c0 = {0}, c1 = {0};
  assert_true(open_read(&h, &c0, &c1, NULL) < 0);
  col_free(&c0), col_free(&c1);
  /* a footer of another version is not v1 */
  mw_buf_t b = MW_BUF_INIT;
  build_v1(&ok, &b);
  b.data[b.len - 6] = 3; /* 0.3 = a 2.0 file */
  assert_false(mw_v1_is_v1(b.data, b.len));
  mw_v1_file_t f;
  assert_int_equal(mw_v1_open(&f, b.data, b.len, NULL), -EBADMSG);
  mw_v1_close(&f);
  mw_buf_free(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_golden_types),     cmocka_unit_test(test_golden_batches),
      cmocka_unit_test(test_golden_mutations), cmocka_unit_test(test_built),
      cmocka_unit_test(test_built_refusals),
  };
  return tu_run_group(tests, NULL, NULL);
}
