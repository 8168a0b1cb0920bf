/*
 * test_datafile_bigstr.c — utf8/binary values of 256 bytes and more
 * (issue 26: gendiff seeds 116, 1014, 5067, 5114, 20025), through our
 * writer and our reader:
 *
 *   - the page layout: a page holding such a value is FullZip (as Lance
 *     writes it: its "narrow" test is a longest value under 256 bytes),
 *     with buffer 0 = [control byte] + length + bytes per row and buffer 1
 *     = the row starts; MiniBlock pages never have a non-final chunk of
 *     one value (log_num_values 0: LanceDB refuses the file with
 *     "miniblock_metadata: non-final chunk 1 of 6 has invalid
 *     log_num_values=0", the failure);
 *   - round trips of string, large_string, binary, large_binary, strings in
 *     lists and structs, small and huge values mixed (up to 40 KB), nulls,
 *     zstd on and off, default and 16 KiB pages, 7 to 3000 rows: the rows
 *     read back exactly (exact JSON of every cell).
 *
 * Rows come from JSON lines through the daemon's own parser (net/jsonrow).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cases.h"

#include "exact_json.h"
#include "lance/datafile.h"
#include "lance/datafile_info.h"
#include "lance/schema_text.h"
#include "net/jsonrow.h"
#include "testutil.h"

#define SCHEMA "id:int64 not null, s:string, ls:large_string, b:binary, lb:large_binary, " \
               "l:list<string>, st:struct<a:int32, t:string>"
#define LINE_MAX_BYTES (8 * 60000)

/* Length of row k's value in a column: 0 = null, small, or huge (1.5 KB
 * to 40 KB) by a fixed pattern; `mix` 0 = every value huge. */
static size_t len_of(int64_t k, int col, int mix) {
  uint64_t h = (uint64_t)(k * 2654435761u) ^ (uint64_t)col * 40503u;
  if (mix == 0) return 1500 + (size_t)(h % 2000);
  if (h % 11 == 0) return 0;
  if (h % 5 == 0) return h % 17 == 0 ? 40000 : 1500 + (size_t)(h % 2000);
  return 1 + (size_t)(h % 40);
}

/* `n` characters of text (base64 for binaries: n rounded up to 4). */
static void put_text(char **p, size_t n, int64_t k, bool b64) {
  static const char b64s[] = "QUJDRA==";
  size_t m = b64 ? (n + 3) / 4 * 4 : n;
  for (size_t i = 0; i < m; i++) (*p)[i] = b64 ? b64s[i % 4] : (char)('a' + (k + (int64_t)i) % 26);
  *p += m;
}

static void put(char **p, const char *s) {
  size_t n = strlen(s);
  memcpy(*p, s, n);
  *p += n;
}

static void put_member(char **p, const char *name, size_t n, int64_t k, bool b64, bool list) {
  put(p, ", \"");
  put(p, name);
  put(p, "\":");
  if (n == 0) {
    put(p, "null");
    return;
  }
  put(p, list ? "[\"" : "\"");
  put_text(p, n, k, b64);
  put(p, list ? "\", null, \"x\"]" : "\"");
}

static void rows(const mw_schema_t *s, int64_t from, int64_t to, int mix, mw_batch_t *b) {
  mw_jsonrow_parser_t jp;
  mw_jsonrow_error_t e;
  static char line[LINE_MAX_BYTES];
  assert_int_equal(mw_jsonrow_init(&jp, s, NULL), 0);
  assert_int_equal(mw_batch_init(b, s), 0);
  for (int64_t k = from; k < to; k++) {
    char *p = line, num[64];
    snprintf(num, sizeof num, "{\"id\":%lld", (long long)k);
    put(&p, num);
    put_member(&p, "s", len_of(k, 1, mix), k, false, false);
    put_member(&p, "ls", len_of(k, 2, mix), k, false, false);
    put_member(&p, "b", len_of(k, 3, mix), k, true, false);
    put_member(&p, "lb", len_of(k, 4, mix), k, true, false);
    put_member(&p, "l", len_of(k, 5, mix), k, false, true);
    snprintf(num, sizeof num, ", \"st\":{\"a\":%lld", (long long)k);
    put(&p, num);
    put_member(&p, "t", len_of(k, 6, mix), k, false, false);
    put(&p, "}}");
    assert_true((size_t)(p - line) < LINE_MAX_BYTES);
    if (mw_jsonrow_parse(&jp, line, (size_t)(p - line), false, b, &e) != 0) fail_msg("row %lld: %s", (long long)k, e.msg);
  }
  mw_jsonrow_free(&jp);
}

static void dump(const mw_batch_t *b, mw_buf_t *out) {
  mw_buf_reset(out);
  for (int64_t r = 0; r < b->n_rows; r++) {
    assert_int_equal(tu_exact_row(b, b->schema->n_fields, r, out), 0);
    assert_int_equal(mw_buf_put_u8(out, '\n'), 0);
  }
}

/* Every MiniBlock page of every column: no chunk but the last has
 * log_num_values 0 (the chunk word's low 4 bits). Returns the FullZip
 * pages of columns 1..4 (the flat strings and binaries). */
static size_t check_pages(const mw_datafile_t *f, const mw_buf_t *file) {
  size_t fullzip = 0;
  mw_err_t err = {0};
  for (uint32_t c = 0; c < f->n_columns; c++) {
    mw_page_info_t *pi = NULL;
    size_t np = 0;
    assert_int_equal(mw_datafile_column_info(f, c, &pi, &np, &err), 0);
    for (size_t k = 0; k < np; k++) {
      if (strcmp(pi[k].layout, "full_zip") == 0 && c >= 1 && c <= 4) fullzip++;
      if (strcmp(pi[k].layout, "mini_block") != 0) continue;
      size_t words = pi[k].buf_size[0] / 4;
      const uint8_t *w = file->data + pi[k].buf_offset[0];
      for (size_t i = 0; i + 1 < words; i++)
        if ((mw_load_u32le(w + 4 * i) & 15) == 0)
          fail_msg("column %u page %zu: non-final chunk %zu of %zu has log_num_values 0", c, k, i, words);
    }
    free(pi);
  }
  return fullzip;
}

/* Write n rows (in n_batches batches), check the pages, read them back
 * exactly. Returns the FullZip pages. */
static size_t roundtrip(int64_t n, size_t n_batches, int mix, bool zstd, size_t page_bytes) {
  mw_schema_t s;
  mw_err_t err = {0};
  if (mw_schema_text_parse(SCHEMA, &s, &err) != 0) fail_msg("%s", err.msg);
  mw_batch_t bs[3];
  const mw_batch_t *ptrs[3];
  mw_buf_t want = MW_BUF_INIT, got = MW_BUF_INIT, part = MW_BUF_INIT, file = MW_BUF_INIT;
  for (size_t i = 0; i < n_batches; i++) {
    rows(&s, n * (int64_t)i / (int64_t)n_batches, n * (int64_t)(i + 1) / (int64_t)n_batches, mix, &bs[i]);
    ptrs[i] = &bs[i];
    dump(&bs[i], &part);
    assert_int_equal(mw_buf_append(&want, part.data, part.len), 0);
  }
  mw_datafile_write_opts_t o = {.zstd = zstd, .max_page_bytes = page_bytes};
  if (mw_datafile_write(&s, ptrs, n_batches, NULL, 0, &o, &file, &err) != 0) fail_msg("write: %s", err.msg);
  mw_datafile_t f;
  mw_batch_t back;
  if (mw_datafile_open(&f, file.data, file.len, NULL, &err) != 0) fail_msg("open: %s", err.msg);
  size_t fz = check_pages(&f, &file);
  if (mw_datafile_read_batch(&f, &back, &err) != 0)
    fail_msg("%lld rows, mix %d, zstd %d, pages %zu: read: %s", (long long)n, mix, zstd, page_bytes, err.msg);
  assert_int_equal(back.n_rows, n);
  dump(&back, &got);
  if (got.len != want.len || memcmp(got.data, want.data, got.len) != 0)
    fail_msg("%lld rows, mix %d, zstd %d, pages %zu: rows differ", (long long)n, mix, zstd, page_bytes);
  mw_batch_free(&back);
  mw_datafile_close(&f);
  for (size_t i = 0; i < n_batches; i++) mw_batch_free(&bs[i]);
  mw_buf_free(&want), mw_buf_free(&got), mw_buf_free(&part), mw_buf_free(&file);
  mw_schema_free(&s);
  return fz;
}

/* The smallest case: seven 1.5-3.5 KB strings, then every mix. */
static void test_roundtrips(void **state) {
  (void)state;
  assert_int_equal(roundtrip(7, 1, 0, false, 0), 4); /* one FullZip page per flat column */
  assert_int_equal(roundtrip(7, 1, 0, true, 0), 4);
  const int64_t ns[] = {7, 300, 3000};
  for (size_t i = 0; i < 3; i++)
    for (int z = 0; z < 2; z++) {
      size_t want = ns[i] >= 300 ? 4 : 0; /* 7 rows: not every column has a huge value */
      assert_true(roundtrip(ns[i], i == 2 ? 3 : 1, 1, z, 0) >= want);
      assert_true(roundtrip(ns[i], 2, 1, z, 16384) >= want);
    }
}

/* The bytes of a FullZip page: rows null, 300 x 'a', "" in a nullable
 * string column; and a page of values under 256 bytes stays MiniBlock. */
static void test_fullzip_bytes(void **state) {
  (void)state;
  mw_schema_t s;
  mw_err_t err = {0};
  assert_int_equal(mw_schema_text_parse("s:string, t:string", &s, &err), 0);
  mw_jsonrow_parser_t jp;
  mw_jsonrow_error_t e;
  mw_batch_t b;
  assert_int_equal(mw_jsonrow_init(&jp, &s, NULL), 0);
  assert_int_equal(mw_batch_init(&b, &s), 0);
  const char *lines[3] = {"{\"s\":null, \"t\":\"a\"}", NULL, "{\"s\":\"\", \"t\":\"\"}"};
  char big[700];
  snprintf(big, sizeof big, "{\"s\":\"%0300d\", \"t\":\"%0255d\"}", 0, 0);
  lines[1] = big;
  for (int r = 0; r < 3; r++)
    if (mw_jsonrow_parse(&jp, lines[r], strlen(lines[r]), false, &b, &e) != 0) fail_msg("%s", e.msg);
  mw_jsonrow_free(&jp);
  const mw_batch_t *ptr = &b;
  mw_buf_t file = MW_BUF_INIT;
  assert_int_equal(mw_datafile_write(&s, &ptr, 1, NULL, 0, NULL, &file, &err), 0);
  mw_datafile_t f;
  assert_int_equal(mw_datafile_open(&f, file.data, file.len, NULL, &err), 0);
  mw_page_info_t *pi = NULL;
  size_t np = 0;
  assert_int_equal(mw_datafile_column_info(&f, 0, &pi, &np, &err), 0);
  assert_int_equal(np, 1);
  assert_string_equal(pi[0].layout, "full_zip");
  assert_int_equal(pi[0].n_buffers, 2);
  uint8_t want0[1 + 1 + 4 + 300 + 1 + 4];
  memset(want0, '0', sizeof want0);
  memcpy(want0, "\x01\x00\x2c\x01\x00\x00", 6);
  memcpy(want0 + 306, "\x00\x00\x00\x00\x00", 5);
  assert_int_equal(pi[0].buf_size[0], sizeof want0);
  assert_memory_equal(file.data + pi[0].buf_offset[0], want0, sizeof want0);
  /* row starts 0, 1, 306 and the end 311, u16 (the bound 300 + 3 + 12) */
  assert_int_equal(pi[0].buf_size[1], 8);
  assert_memory_equal(file.data + pi[0].buf_offset[1], "\x00\x00\x01\x00\x32\x01\x37\x01", 8);
  free(pi);
  assert_int_equal(mw_datafile_column_info(&f, 1, &pi, &np, &err), 0);
  assert_int_equal(np, 1);
  assert_string_equal(pi[0].layout, "mini_block"); /* 255 bytes: still narrow */
  free(pi);
  mw_datafile_close(&f);
  mw_batch_free(&b);
  mw_buf_free(&file);
  mw_schema_free(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_roundtrips),
      cmocka_unit_test(test_fullzip_bytes),
  };
  return tu_run_group(tests, NULL, NULL);
}
