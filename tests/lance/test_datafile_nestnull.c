/*
 * test_datafile_nestnull.c — a not-null member inside a struct that has
 * nulls (issue 26, gendiff seed 2035979854), through our writer and reader.
 *
 * Arrow needs a not-null member's nulls masked by its own struct's
 * validity. Where an outer struct is null, Lance's reader makes every
 * member below it null down to the leaf, so each layer below a struct with
 * nulls must be nullable (LanceDB's writer makes them so: its members are
 * null there). With all-valid layers for `x2` and `n`, LanceDB 0.39.0
 * refused our file: "Found unmasked nulls for non-nullable StructArray
 * field". Checked here: the rows read back exactly, and the leaf columns'
 * layers (inner first) are all nullable_item, as in LanceDB's own file of
 * the same rows; and the same for a struct of not-null members as a list
 * item that is null. The file the old writer made for the first schema
 * (data/nestnull/old_writer_s_x2_n.lance, 300 rows) is refused by our
 * reader, naming the field, as LanceDB refuses it.
 *
 * The Arrow side (lance/ipc.c): LanceDB's WAL entries carry those members
 * null where their struct is (apache-arrow, as LanceDB writes them:
 * data/nestnull/masked_nulls.arrows, 6 rows, `s` null in rows 1 and 4). We
 * read them as valid (the field says not null), counting their bitmaps in
 * Lance's size estimate as Lance does; a null in a not-null member whose
 * struct is valid (unmasked_null.arrows, row 2) is refused.
 *
 * Also (gendiff seed 1036): a nested page is one MiniBlock chunk, and
 * LanceDB decodes a whole chunk for each range of rows it takes; a 14 MB
 * chunk of strings under deletions made it ask for 58 GB. A nested leaf's
 * pages now keep their values under 32 KiB: 300 rows of 1 KB strings in a
 * struct take 7 pages or more, and read back.
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
#include "lance/ipc.h"
#include "lance/schema_text.h"
#include "net/jsonrow.h"
#include "testutil.h"

#define ROWS 300

static void rows(const mw_schema_t *s, const char *(*row)(int64_t, char *, size_t), mw_batch_t *b, mw_buf_t *want) {
  mw_jsonrow_parser_t jp;
  mw_jsonrow_error_t e;
  assert_int_equal(mw_jsonrow_init(&jp, s, NULL), 0);
  assert_int_equal(mw_batch_init(b, s), 0);
  for (int64_t k = 0; k < ROWS; k++) {
    char m[1200], line[1300];
    snprintf(line, sizeof line, "{\"id\":%lld, %s}", (long long)k, row(k, m, sizeof m));
    if (mw_jsonrow_parse(&jp, line, strlen(line), false, b, &e) != 0) fail_msg("%s: %s", line, e.msg);
  }
  mw_jsonrow_free(&jp);
  mw_buf_reset(want);
  for (int64_t r = 0; r < b->n_rows; r++) {
    assert_int_equal(tu_exact_row(b, b->schema->n_fields, r, want), 0);
    assert_int_equal(mw_buf_put_u8(want, '\n'), 0);
  }
}

/* Write the rows, read them back exactly, and check column c's layers. */
static void check(const char *schema, const char *(*row)(int64_t, char *, size_t), uint32_t c, const char *layers) {
  mw_schema_t s;
  mw_err_t err = {0};
  if (mw_schema_text_parse(schema, &s, &err) != 0) fail_msg("%s", err.msg);
  mw_batch_t b, back;
  mw_buf_t want = MW_BUF_INIT, got = MW_BUF_INIT, file = MW_BUF_INIT;
  rows(&s, row, &b, &want);
  const mw_batch_t *ptr = &b;
  if (mw_datafile_write(&s, &ptr, 1, NULL, 0, NULL, &file, &err) != 0) fail_msg("write: %s", err.msg);
  mw_datafile_t f;
  assert_int_equal(mw_datafile_open(&f, file.data, file.len, NULL, &err), 0);
  if (mw_datafile_read_batch(&f, &back, &err) != 0) fail_msg("read: %s", err.msg);
  for (int64_t r = 0; r < back.n_rows; r++) {
    assert_int_equal(tu_exact_row(&back, back.schema->n_fields, r, &got), 0);
    assert_int_equal(mw_buf_put_u8(&got, '\n'), 0);
  }
  if (got.len != want.len || memcmp(got.data, want.data, got.len) != 0) fail_msg("%s: rows differ", schema);
  mw_page_info_t *pi = NULL;
  size_t np = 0;
  assert_int_equal(mw_datafile_column_info(&f, c, &pi, &np, &err), 0);
  assert_int_equal(np, 1);
  if (strstr(pi[0].encoding, layers) == NULL) fail_msg("column %u: %s, want %s", c, pi[0].encoding, layers);
  free(pi);
  mw_batch_free(&back);
  mw_datafile_close(&f);
  mw_batch_free(&b);
  mw_buf_free(&want), mw_buf_free(&got), mw_buf_free(&file);
  mw_schema_free(&s);
}

static const char *r_struct(int64_t k, char *m, size_t n) {
  if (k % 3 == 1) snprintf(m, n, "\"s\":null");
  else snprintf(m, n, "\"s\":{\"a\":%lld,\"x2\":{\"n\":%lld,\"m\":%s}}", (long long)k, (long long)(100 + k), k % 2 ? "null" : "7");
  return m;
}

static const char *r_list(int64_t k, char *m, size_t n) {
  if (k % 4 == 0) snprintf(m, n, "\"l\":null");
  else snprintf(m, n, "\"l\":[{\"x\":{\"n\":%lld}},null,{\"x\":{\"n\":-1}}]", (long long)k);
  return m;
}

/* struct<a, x2: struct<n not null, m> not null>, the struct null in a
 * third of the rows: n's layers are those of LanceDB's file. */
static void test_notnull_in_null_struct(void **state) {
  (void)state;
  const char *schema = "id:int64 not null, s:struct<a:int32, x2:struct<n:uint64 not null, m:int32> not null>";
  check(schema, r_struct, 2, "layers: [nullable_item, nullable_item, nullable_item]");
  check(schema, r_struct, 3, "layers: [nullable_item, nullable_item, nullable_item]");
}

/* list<struct<x: struct<n not null> not null>>, an item null. */
static void test_notnull_in_null_item(void **state) {
  (void)state;
  check("id:int64 not null, l:list<struct<x:struct<n:int64 not null> not null>>", r_list, 1,
        "layers: [nullable_item, nullable_item, nullable_item, nullable_list]");
}

/* The old writer's file: x2's layer all-valid under the null s. */
static void test_old_file_refused(void **state) {
  (void)state;
  const char *root = getenv("MW_SOURCE_ROOT");
  char *path = tu_strf("%s/tests/lance/data/nestnull/old_writer_s_x2_n.lance", root ? root : ".");
  size_t n = 0;
  uint8_t *d = tu_read_file(path, &n);
  if (d == NULL) fail_msg("cannot read %s", path);
  mw_datafile_t f;
  mw_batch_t b;
  mw_err_t err = {0};
  assert_int_equal(mw_datafile_open(&f, d, n, NULL, &err), 0);
  assert_int_equal(f.n_rows, ROWS);
  assert_int_equal(mw_datafile_read_batch(&f, &b, &err), -EBADMSG);
  const char *want = "column 2 page 0: the non-nullable field 'n' is null below the null 's' with no nulls in its struct's layer";
  if (strcmp(err.msg, want) != 0) fail_msg("'%s'", err.msg);
  mw_datafile_close(&f);
  free(d);
  free(path);
}

static uint8_t *data_file(const char *name, size_t *n) {
  const char *root = getenv("MW_SOURCE_ROOT");
  char *path = tu_strf("%s/tests/lance/data/nestnull/%s", root ? root : ".", name);
  uint8_t *d = tu_read_file(path, n);
  if (d == NULL) fail_msg("cannot read %s", path);
  free(path);
  return d;
}

/* apache-arrow's stream with x2 and n null under the null s. */
static void test_ipc_masked_nulls(void **state) {
  (void)state;
  size_t n = 0;
  uint8_t *d = data_file("masked_nulls.arrows", &n);
  mw_ipc_stream_t st;
  mw_err_t err = {0};
  if (mw_ipc_decode(d, n, NULL, &st, &err) != 0) fail_msg("decode: %s", err.msg);
  assert_int_equal(st.n_batches, 1);
  const mw_batch_t *b = &st.batches[0];
  const mw_column_t *s = &b->cols[1], *x2 = &s->children[1], *nn = &x2->children[0];
  assert_int_equal(s->null_count, 2);
  assert_int_equal(x2->null_count, 0);
  assert_int_equal(nn->null_count, 0);
  assert_int_equal(x2->validity.len, 0);
  assert_int_equal(nn->validity.len, 0);
  for (int64_t r = 0; r < 6; r++) {
    uint64_t v;
    memcpy(&v, nn->values.data + 8 * r, 8);
    if (r % 3 != 1) assert_int_equal(v, 100 + r);
  }
  /* 40 + id 48 + s 1 + a (1 + 24) + x2 1 + n (1 + 48): x2's and n's bitmaps
   * count, as in LanceDB's arrays */
  assert_int_equal(mw_batch_lance_bytes(b), 164);
  mw_ipc_stream_free(&st);
  free(d);
}

/* x2 null in row 2, where s is valid: refused. */
static void test_ipc_unmasked_null(void **state) {
  (void)state;
  size_t n = 0;
  uint8_t *d = data_file("unmasked_null.arrows", &n);
  mw_ipc_stream_t st;
  mw_err_t err = {0};
  assert_int_equal(mw_ipc_decode(d, n, NULL, &st, &err), -EBADMSG);
  if (strstr(err.msg, "x2") == NULL || strstr(err.msg, "nulls in a non-nullable field") == NULL)
    fail_msg("'%s'", err.msg);
  free(d);
}

static const char *r_wide(int64_t k, char *m, size_t n) {
  char v[1100];
  memset(v, 'a' + (int)(k % 26), 1000);
  v[1000] = 0;
  snprintf(m, n, "\"s\":{\"t\":\"%s\",\"n\":%lld}", v, (long long)k);
  return m;
}

/* 300 rows of 1000-byte strings in a struct: pages of at most 32 KiB of
 * values (each one chunk), the rows exact. */
static void test_wide_values_split(void **state) {
  (void)state;
  mw_schema_t s;
  mw_err_t err = {0};
  assert_int_equal(mw_schema_text_parse("id:int64 not null, s:struct<t:string, n:int64>", &s, &err), 0);
  mw_batch_t b, back;
  mw_buf_t want = MW_BUF_INIT, got = MW_BUF_INIT, file = MW_BUF_INIT;
  rows(&s, r_wide, &b, &want);
  const mw_batch_t *ptr = &b;
  assert_int_equal(mw_datafile_write(&s, &ptr, 1, NULL, 0, NULL, &file, &err), 0);
  mw_datafile_t f;
  assert_int_equal(mw_datafile_open(&f, file.data, file.len, NULL, &err), 0);
  mw_page_info_t *pi = NULL;
  size_t np = 0;
  assert_int_equal(mw_datafile_column_info(&f, 1, &pi, &np, &err), 0);
  if (np < 7) fail_msg("%zu pages of 1 KB strings for %d rows", np, ROWS);
  for (size_t i = 0; i < np; i++)
    if (pi[i].buf_size[1] > 32768 + 1100) fail_msg("page %zu: a chunk of %llu bytes", i, (unsigned long long)pi[i].buf_size[1]);
  free(pi);
  if (mw_datafile_read_batch(&f, &back, &err) != 0) fail_msg("read: %s", err.msg);
  for (int64_t r = 0; r < back.n_rows; r++) {
    assert_int_equal(tu_exact_row(&back, back.schema->n_fields, r, &got), 0);
    assert_int_equal(mw_buf_put_u8(&got, '\n'), 0);
  }
  if (got.len != want.len || memcmp(got.data, want.data, got.len) != 0) fail_msg("rows differ");
  mw_batch_free(&back);
  mw_datafile_close(&f);
  mw_batch_free(&b);
  mw_buf_free(&want), mw_buf_free(&got), mw_buf_free(&file);
  mw_schema_free(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_notnull_in_null_struct),
      cmocka_unit_test(test_notnull_in_null_item),
      cmocka_unit_test(test_old_file_refused),
      cmocka_unit_test(test_ipc_masked_nulls),
      cmocka_unit_test(test_ipc_unmasked_null),
      cmocka_unit_test(test_wide_values_split),
  };
  return tu_run_group(tests, NULL, NULL);
}
