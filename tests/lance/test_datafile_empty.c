/*
 * test_datafile_empty.c — data files whose pages carry no items or no
 * values (issue 26), through our writer and our reader:
 *
 *   - every pattern (lists and large lists all null, all empty and both,
 *     lists of structs and structs of lists without items, lists of lists,
 *     structs all null, vectors all null, strings and binaries all empty,
 *     every flat type all null, and items only in a window of rows so pages
 *     with items sit among pages of levels only) at 1, 300 and 40 000 rows
 *     (past the 32 767 levels of one nested page), zstd on and off, default
 *     and 4 KiB pages, one batch and three: the rows read back exactly
 *     (exact JSON of every cell, tests/common/exact_json.c);
 *   - the pages an all-null or all-empty column gets, as Lance writes them
 *     (ConstantLayout, no buffers / the empty value in page buffer 0);
 *   - the reader's strictness: a column whose pages do not hold the file's
 *     rows is refused, naming the column and both counts; the file the old
 *     writer made for the issue's table (data/empty/issue26_tags.lance:
 *     `tags` without pages) is refused as "column 5: pages hold 0 of 300
 *     rows", as LanceDB refuses it;
 *   - golden: LanceDB's own SSTable of the same patterns
 *     (data/empty/lancedb_empty_300.lance) reads, and rewritten by us gives
 *     the same rows and, for all-null, all-empty and levels-only columns,
 *     the same bytes (ColumnMetadata or page buffers) as Lance's.
 *
 * Rows come from JSON lines through the daemon's own parser (net/jsonrow),
 * so `tags` left out, `null` and `[]` are exactly what a producer sends.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cases.h"

#include "exact_json.h"
#include "lance/datafile.h"
#include "lance/datafile_info.h"
#include "lance/lance_schema.h"
#include "lance/schema_text.h"
#include "net/jsonrow.h"
#include "testutil.h"

/* One pattern: a schema (after `id:int64 not null`) and row k's members
 * (JSON text after `"id":k`, may be empty: every column left out). `few`
 * rows from `few_from` on get `few_json` instead. */
typedef struct pattern {
  const char *name, *schema;
  const char *(*row)(int64_t k);
} pattern_t;

#define FEW_FROM 20000
#define FEW 300
static bool few(int64_t k) { return k >= FEW_FROM && k < FEW_FROM + FEW; }

static const char *r_tags(int64_t k) { return few(k) ? "\"tags\":[\"x\"], \"n\":1" : k % 3 == 0 ? "\"n\":1" : k % 3 == 1 ? "\"tags\":null, \"n\":2" : "\"tags\":[], \"n\":3"; }
static const char *r_list_null(int64_t k) { return few(k) ? "\"l\":[\"a\"], \"ll\":[1], \"lls\":[\"b\"]" : "\"l\":null"; }
static const char *r_list_empty(int64_t k) { return few(k) ? "\"l\":[\"a\",\"\"], \"ll\":[7], \"lls\":[\"\"]" : "\"l\":[], \"ll\":[], \"lls\":[]"; }
static const char *r_list_mix(int64_t k) { return few(k) ? "\"l\":[1,null], \"ll\":[null]" : k % 2 ? "\"l\":[], \"ll\":null" : "\"l\":null, \"ll\":[]"; }
static const char *r_struct_null(int64_t k) { return few(k) ? "\"s\":{\"a\":1,\"b\":\"b\",\"c\":{\"x\":2,\"t\":[\"q\"]}}" : "\"s\":null"; }
static const char *r_struct_list(int64_t k) {
  return few(k) ? "\"s\":{\"a\":1,\"t\":[\"y\"]}" : k % 4 == 0 ? "\"s\":null" : k % 4 == 1 ? "\"s\":{\"a\":null,\"t\":null}" : k % 4 == 2 ? "\"s\":{\"a\":2,\"t\":[]}" : "\"s\":{\"t\":null}";
}
static const char *r_list_struct(int64_t k) { return few(k) ? "\"l\":[{\"k\":\"a\",\"v\":1},null]" : k % 3 == 0 ? "\"l\":null" : k % 3 == 1 ? "\"l\":[]" : "\"l\":[null]"; }
static const char *r_list_list(int64_t k) { return few(k) ? "\"l\":[[1],[]]" : k % 4 == 0 ? "\"l\":null" : k % 4 == 1 ? "\"l\":[]" : k % 4 == 2 ? "\"l\":[[],null]" : "\"l\":[null]"; }
static const char *r_vec_null(int64_t k) { return few(k) ? "\"v\":[1,2,3,4], \"w\":[0.5,1]" : "\"v\":null"; }
static const char *r_str_empty(int64_t k) { return few(k) ? "\"s\":\"s\", \"b\":\"AQ==\", \"ls\":\"l\", \"lb\":\"Ag==\"" : "\"s\":\"\", \"b\":\"\", \"ls\":\"\", \"lb\":\"\""; }
static const char *r_all_null(int64_t k) { return few(k) ? "\"i8\":1, \"s\":\"x\", \"bo\":true, \"fsb\":\"AAECAw==\"" : ""; }

static const pattern_t patterns[] = {
    {"issue 26: tags left out, null or []",
     "ts:timestamp<us, UTC>, d:date32, i16:int16, u8:uint8, tags:list<string>, "
     "meta:struct<n:int32, s:string>, v:fixed_size_list<float16, 4>, n:int32",
     r_tags},
    {"lists all null", "l:list<string>, ll:large_list<int64>, lls:large_list<string>", r_list_null},
    {"lists all empty", "l:list<string>, ll:large_list<int32 not null>, lls:large_list<string>", r_list_empty},
    {"lists null or empty", "l:list<int32>, ll:large_list<string>", r_list_mix},
    {"structs all null", "s:struct<a:int32, b:string, c:struct<x:double, t:list<string>>>", r_struct_null},
    {"struct of a list without items", "s:struct<a:int32, t:list<string>>", r_struct_list},
    {"list of structs without items", "l:list<struct<k:string, v:int64>>", r_list_struct},
    {"list of lists without items", "l:list<list<int32>>", r_list_list},
    {"vectors all null", "v:fixed_size_list<float16, 4>, w:fixed_size_list<float32, 2>", r_vec_null},
    {"strings and binaries all empty", "s:string, b:binary, ls:large_string, lb:large_binary", r_str_empty},
    {"every flat type all null",
     "i8:int8, i16:int16, i32:int32, i64:int64, u8:uint8, u16:uint16, u32:uint32, u64:uint64, "
     "f16:float16, f32:float, f64:double, bo:bool, ts:timestamp<ns>, tz:timestamp<us, UTC>, "
     "d32:date32, d64:date64, t32:time32<ms>, t64:time64<us>, dec:decimal128<10, 2>, "
     "fsb:fixed_size_binary<4>, s:string, b:binary, ls:large_string, lb:large_binary",
     r_all_null},
};
#define N_PATTERNS (sizeof patterns / sizeof patterns[0])

/* Rows [from, to) of pattern p into batch b (schema s). */
static void rows(const mw_schema_t *s, const pattern_t *p, int64_t from, int64_t to, mw_batch_t *b) {
  mw_jsonrow_parser_t jp;
  mw_jsonrow_error_t e;
  assert_int_equal(mw_jsonrow_init(&jp, s, NULL), 0);
  assert_int_equal(mw_batch_init(b, s), 0);
  for (int64_t k = from; k < to; k++) {
    char line[512];
    const char *m = p->row(k);
    snprintf(line, sizeof line, "{\"id\":%lld%s%s}", (long long)k, *m ? ", " : "", m);
    if (mw_jsonrow_parse(&jp, line, strlen(line), false, b, &e) != 0) fail_msg("%s: %s: %s", p->name, line, e.msg);
  }
  mw_jsonrow_free(&jp);
}

static void schema_of(const pattern_t *p, mw_schema_t *s) {
  char text[1024];
  mw_err_t err = {0};
  snprintf(text, sizeof text, "id:int64 not null, %s", p->schema);
  if (mw_schema_text_parse(text, s, &err) != 0) fail_msg("%s: %s", p->name, err.msg);
}

/* Every row of b as exact JSON lines. */
static void dump(const mw_batch_t *b, mw_buf_t *out) {
  mw_buf_reset(out);
  for (int64_t r = 0; r < b->n_rows; r++) {
    assert_int_equal(tu_exact_row(b, b->schema->n_fields, r, out), 0);
    assert_int_equal(mw_buf_put_u8(out, '\n'), 0);
  }
}

/* Write n rows of p (in n_batches batches) and read them back exactly. */
static void roundtrip(const pattern_t *p, int64_t n, size_t n_batches, bool zstd, size_t page_bytes) {
  mw_schema_t s;
  schema_of(p, &s);
  mw_batch_t bs[3];
  const mw_batch_t *ptrs[3];
  mw_buf_t want = MW_BUF_INIT, got = MW_BUF_INIT, part = MW_BUF_INIT, file = MW_BUF_INIT;
  assert_true(n_batches >= 1 && n_batches <= 3);
  for (size_t i = 0; i < n_batches; i++) {
    rows(&s, p, n * (int64_t)i / (int64_t)n_batches, n * (int64_t)(i + 1) / (int64_t)n_batches, &bs[i]);
    ptrs[i] = &bs[i];
    dump(&bs[i], &part);
    assert_int_equal(mw_buf_append(&want, part.data, part.len), 0);
  }
  mw_datafile_write_opts_t o = {.zstd = zstd, .max_page_bytes = page_bytes};
  mw_err_t err = {0};
  if (mw_datafile_write(&s, ptrs, n_batches, NULL, 0, &o, &file, &err) != 0) fail_msg("%s: write: %s", p->name, err.msg);
  mw_datafile_t f;
  mw_batch_t back;
  if (mw_datafile_open(&f, file.data, file.len, NULL, &err) != 0) fail_msg("%s: open: %s", p->name, err.msg);
  if (mw_datafile_read_batch(&f, &back, &err) != 0)
    fail_msg("%s (%lld rows, %zu batches, zstd %d, pages %zu): read: %s", p->name, (long long)n, n_batches, zstd, page_bytes, err.msg);
  assert_int_equal(back.n_rows, n);
  dump(&back, &got);
  if (got.len != want.len || memcmp(got.data, want.data, got.len) != 0)
    fail_msg("%s (%lld rows, %zu batches, zstd %d): rows differ", p->name, (long long)n, n_batches, zstd);
  mw_batch_free(&back);
  mw_datafile_close(&f);
  for (size_t i = 0; i < n_batches; i++) mw_batch_free(&bs[i]);
  mw_buf_free(&want), mw_buf_free(&got), mw_buf_free(&part), mw_buf_free(&file);
  mw_schema_free(&s);
}

static void test_patterns_small(void **state) {
  (void)state;
  static const int64_t ns[] = {1, 2, 300};
  for (size_t i = 0; i < N_PATTERNS; i++)
    for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++)
      for (int z = 0; z < 2; z++) {
        roundtrip(&patterns[i], ns[j], 1, z, 0);
        if (ns[j] >= 3) roundtrip(&patterns[i], ns[j], 3, z, 4096);
      }
}

/* 40 000 rows: nested pages hold at most 32 767 levels, so a column of
 * levels only takes two pages; rows 20 000..20 299 carry items (pages with
 * values among pages of levels only), and 4 KiB pages split the rest. */
static void test_patterns_many_pages(void **state) {
  (void)state;
  for (size_t i = 0; i < N_PATTERNS; i++)
    for (int z = 0; z < 2; z++) {
      roundtrip(&patterns[i], 40000, 1, z, 0);
      roundtrip(&patterns[i], 40000, 3, z, 4096);
    }
}

/* Column c's pages: their layout names and buffer counts. */
static void pages_are(const mw_datafile_t *f, uint32_t c, const char *layout, size_t n_pages, size_t n_bufs) {
  mw_page_info_t *pi = NULL;
  size_t np = 0;
  mw_err_t err = {0};
  assert_int_equal(mw_datafile_column_info(f, c, &pi, &np, &err), 0);
  if (np != n_pages) fail_msg("column %u: %zu pages, want %zu", c, np, n_pages);
  for (size_t k = 0; k < np; k++) {
    if (strcmp(pi[k].layout, layout) != 0) fail_msg("column %u page %zu: %s (%s), want %s", c, k, pi[k].layout, pi[k].encoding, layout);
    if (pi[k].n_buffers != n_bufs) fail_msg("column %u page %zu: %zu buffers, want %zu", c, k, pi[k].n_buffers, n_bufs);
  }
  free(pi);
}

/* What each kind of page is, as Lance writes it (compared with LanceDB
 * 0.39.0's SSTable of the same rows, tests/interop make-table.mjs --kind
 * empty): all null -> one constant page without buffers; all empty
 * strings -> constant with the value in buffer 0; a nested column of
 * levels only -> constant with rep and def buffers. */
static void test_page_layouts(void **state) {
  (void)state;
  const pattern_t *cases[] = {&patterns[10], &patterns[9], &patterns[1], &patterns[4]};
  for (size_t i = 0; i < 4; i++) {
    mw_schema_t s;
    mw_batch_t b;
    mw_buf_t file = MW_BUF_INIT;
    mw_err_t err = {0};
    schema_of(cases[i], &s);
    rows(&s, cases[i], 0, 300, &b);
    const mw_batch_t *ptr = &b;
    assert_int_equal(mw_datafile_write(&s, &ptr, 1, NULL, 0, NULL, &file, &err), 0);
    mw_datafile_t f;
    assert_int_equal(mw_datafile_open(&f, file.data, file.len, NULL, &err), 0);
    for (uint32_t c = 1; c < f.n_columns; c++)
      pages_are(&f, c, "constant", 1, i == 0 ? 0 : i == 1 ? 1 : 2);
    mw_datafile_close(&f);
    mw_batch_free(&b);
    mw_buf_free(&file);
    mw_schema_free(&s);
  }
}

/* Patch the FileDescriptor's row count (its last field, a 2-byte varint
 * here) by `delta`. */
static void patch_rows(mw_buf_t *file, int delta) {
  mw_datafile_t f;
  mw_err_t err = {0};
  assert_int_equal(mw_datafile_open(&f, file->data, file->len, NULL, &err), 0);
  const uint8_t *p;
  size_t n;
  assert_int_equal(mw_datafile_global_buffer(&f, 0, &p, &n, &err), 0);
  uint8_t *v = file->data + (p - file->data) + n - 2; /* 0x10 <2-byte varint> */
  assert_int_equal(v[-1], 0x10);
  unsigned rows = (unsigned)(v[0] & 0x7f) | (unsigned)v[1] << 7;
  assert_int_equal(rows, f.n_rows);
  rows = (unsigned)((int)rows + delta);
  v[0] = (uint8_t)(0x80 | (rows & 0x7f));
  v[1] = (uint8_t)(rows >> 7);
  mw_datafile_close(&f);
}

/* Every column, flat and nested, must hold exactly the file's rows. */
static void test_reader_refuses_short_columns(void **state) {
  (void)state;
  mw_schema_t s;
  mw_batch_t b;
  schema_of(&patterns[0], &s);
  rows(&s, &patterns[0], 0, 300, &b);
  const mw_batch_t *ptr = &b;
  for (int delta = -1; delta <= 1; delta += 2) {
    mw_buf_t file = MW_BUF_INIT;
    mw_err_t err = {0};
    assert_int_equal(mw_datafile_write(&s, &ptr, 1, NULL, 0, NULL, &file, &err), 0);
    patch_rows(&file, delta);
    mw_datafile_t f;
    assert_int_equal(mw_datafile_open(&f, file.data, file.len, NULL, &err), 0);
    for (size_t fi = 0; fi < s.n_fields; fi++) {
      mw_column_t c;
      mw_err_t e2 = {0};
      assert_int_equal(mw_column_init(&c, &f.schema.fields[fi]), 0);
      int rc = mw_datafile_read_column(&f, fi, &c, &e2);
      mw_column_free(&c);
      if (rc != -EBADMSG) fail_msg("field %zu with %d rows too many: rc %d (%s)", fi, -delta, rc, e2.msg);
      if (delta > 0 && strstr(e2.msg, "pages hold 300 of 301 rows") == NULL) fail_msg("field %zu: '%s'", fi, e2.msg);
    }
    mw_datafile_close(&f);
    mw_buf_free(&file);
  }
  mw_batch_free(&b);
  mw_schema_free(&s);
}

/* The file the writer made before the fix for the issue's 300 rows without
 * tags: column 5 (tags) has no pages. LanceDB refuses it ("cannot read
 * columns of differing lengths together (tags=0, meta=300)"); so do we. */
static void test_issue26_file_refused(void **state) {
  (void)state;
  const char *root = getenv("MW_SOURCE_ROOT");
  char *path = tu_strf("%s/tests/lance/data/empty/issue26_tags.lance", root ? root : ".");
  size_t n = 0;
  uint8_t *d = tu_read_file(path, &n);
  if (d == NULL) fail_msg("cannot read %s", path);
  mw_datafile_t f;
  mw_batch_t b;
  mw_err_t err = {0};
  assert_int_equal(mw_datafile_open(&f, d, n, NULL, &err), 0);
  assert_int_equal(f.n_rows, 300);
  assert_int_equal(mw_datafile_read_batch(&f, &b, &err), -EBADMSG);
  if (strcmp(err.msg, "column 5: pages hold 0 of 300 rows") != 0) fail_msg("'%s'", err.msg);
  mw_datafile_close(&f);
  free(d);
  free(path);
}

/* ---- golden: LanceDB's SSTable of the edge patterns ----
 * data/empty/lancedb_empty_300.lance: the data file LanceDB 0.39.0 flushed
 * for 300 rows of tests/interop/types_lib.mjs edgeCatalogue (no list item
 * at all; make-table.mjs --kind empty). We read it, write its rows again,
 * and compare: the same rows; for the columns whose pages we write as Lance
 * does, the same bytes. */

static char *data_path(const char *name) {
  const char *root = getenv("MW_SOURCE_ROOT");
  return tu_strf("%s/tests/lance/data/empty/%s", root ? root : ".", name);
}

/* Lance column of top-level field fi (fields before it have one per leaf). */
static uint32_t column_of(const mw_schema_t *s, size_t fi) {
  mw_schema_t head = {.fields = s->fields, .n_fields = fi};
  int n = mw_lance_leaves(&head, NULL, NULL, 4 * MW_MAX_FIELDS);
  assert_true(n >= 0);
  return (uint32_t)n;
}

/* Page `k` of column c of both files: buffer b's bytes equal. */
static void same_buffer(const mw_datafile_t *a, const mw_datafile_t *b, uint32_t c, size_t bi, const char *name) {
  mw_page_info_t *pa = NULL, *pb = NULL;
  size_t na = 0, nb = 0;
  mw_err_t err = {0};
  assert_int_equal(mw_datafile_column_info(a, c, &pa, &na, &err), 0);
  assert_int_equal(mw_datafile_column_info(b, c, &pb, &nb, &err), 0);
  if (na != 1 || nb != 1) fail_msg("%s: %zu and %zu pages", name, na, nb);
  if (strcmp(pa[0].encoding, pb[0].encoding) != 0) fail_msg("%s: Lance %s, ours %s", name, pa[0].encoding, pb[0].encoding);
  if (pa[0].n_buffers <= bi || pa[0].buf_size[bi] != pb[0].buf_size[bi] ||
      memcmp(a->data + pa[0].buf_offset[bi], b->data + pb[0].buf_offset[bi], pa[0].buf_size[bi]) != 0)
    fail_msg("%s: page buffer %zu differs from Lance's", name, bi);
  free(pa);
  free(pb);
}

static void test_golden_lancedb_empty(void **state) {
  (void)state;
  char *path = data_path("lancedb_empty_300.lance");
  size_t n = 0;
  uint8_t *d = tu_read_file(path, &n);
  if (d == NULL) fail_msg("cannot read %s", path);
  mw_datafile_t lf, of;
  mw_batch_t lb, ob;
  mw_err_t err = {0};
  mw_buf_t file = MW_BUF_INIT, want = MW_BUF_INIT, got = MW_BUF_INIT;
  if (mw_datafile_open(&lf, d, n, NULL, &err) != 0 || mw_datafile_read_batch(&lf, &lb, &err) != 0) fail_msg("Lance's file: %s", err.msg);
  assert_int_equal(lb.n_rows, 300);
  const mw_batch_t *ptr = &lb;
  assert_int_equal(mw_datafile_write(&lf.schema, &ptr, 1, NULL, 0, NULL, &file, &err), 0);
  if (mw_datafile_open(&of, file.data, file.len, NULL, &err) != 0 || mw_datafile_read_batch(&of, &ob, &err) != 0) fail_msg("ours: %s", err.msg);
  dump(&lb, &want);
  dump(&ob, &got);
  assert_true(got.len == want.len && memcmp(got.data, want.data, got.len) == 0);
  size_t same_meta = 0, same_bufs = 0;
  for (size_t fi = 0; fi < lf.schema.n_fields; fi++) {
    const char *name = lf.schema.fields[fi].name;
    uint32_t c = column_of(&lf.schema, fi);
    size_t nl = strlen(name);
    if (strcmp(name, "st_null") == 0) { /* a null struct's members: levels only */
      for (uint32_t m = 0; m < 2; m++) same_buffer(&lf, &of, c + m, 1, name);
      same_bufs++;
    } else if (nl > 5 && strcmp(name + nl - 5, "_null") == 0) { /* all null: the whole ColumnMetadata */
      const uint8_t *ma, *mb;
      size_t la, lbn;
      assert_int_equal(mw_datafile_column_metadata(&lf, c, &ma, &la, &err), 0);
      assert_int_equal(mw_datafile_column_metadata(&of, c, &mb, &lbn, &err), 0);
      if (la != lbn || memcmp(ma, mb, la) != 0) fail_msg("%s: ColumnMetadata differs from Lance's", name);
      same_meta++;
    } else if (nl > 6 && strcmp(name + nl - 6, "_empty") == 0 && strcmp(name, "l_empty") != 0) {
      same_buffer(&lf, &of, c, 0, name); /* the empty value */
      same_bufs++;
    } else if (strcmp(name, "tags") == 0 || strcmp(name, "l_empty") == 0) {
      same_buffer(&lf, &of, c, 0, name); /* RLE rep levels */
      same_buffer(&lf, &of, c, 1, name); /* RLE def levels */
      same_bufs++;
    }
  }
  assert_int_equal(same_meta, 14); /* v_null and the 13 flat *_null columns */
  assert_int_equal(same_bufs, 6);  /* s_empty, b_empty, ls_empty, tags, l_empty, st_null */
  mw_batch_free(&lb), mw_batch_free(&ob);
  mw_datafile_close(&lf), mw_datafile_close(&of);
  mw_buf_free(&file), mw_buf_free(&want), mw_buf_free(&got);
  free(d);
  free(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_patterns_small),
      cmocka_unit_test(test_patterns_many_pages),
      cmocka_unit_test(test_page_layouts),
      cmocka_unit_test(test_reader_refuses_short_columns),
      cmocka_unit_test(test_issue26_file_refused),
      cmocka_unit_test(test_golden_lancedb_empty),
  };
  return tu_run_group(tests, NULL, NULL);
}
