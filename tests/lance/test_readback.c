/*
 * test_readback.c — memwald's read-back of what it is about to publish
 * (lance/readback.h).
 *
 * A data file of every layout (ints, floats, bools, strings, a vector with
 * null rows, list<utf8> with null, empty and full rows, struct<int32, utf8>
 * with null rows), in several batches with and without zstd, reads back
 * equal to its batches; then the batches are changed one value at a time
 * after the file was written (a vector item, a list item, a struct child, a
 * bool, a string's last byte, a null where a value was) and each change is
 * refused, naming the column and the row. A truncated file, a flipped page
 * byte and a file of fewer rows are refused; the bloom filter, the deletion
 * file and the _pk_index files are refused when they do not hold what was
 * written. mw_sstable_build of the same batches passes its read-back. A
 * vector index reads back against its column, and is refused when the
 * column changed after its build or its files are damaged, also inside an
 * SSTable build (the part is marked refused).
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cases.h"

#include "lance/bloom.h"
#include "lance/datafile.h"
#include "lance/deletion.h"
#include "lance/pk_index.h"
#include "lance/readback.h"
#include "lance/sstable.h"

enum { C_ID, C_NAME, C_V, C_FLAG, C_VEC, C_TAGS, C_META, C_TOMB, N_COLS };
#define MARKER 12345.678 /* C_V of row 7: a float64 page holds its bytes as they are */

static void all_layouts(mw_schema_t *s) {
  mw_schema_init(s);
  assert_int_equal(mw_schema_add(s, "id", MW_T_INT64, false), C_ID);
  assert_int_equal(mw_schema_add(s, "name", MW_T_UTF8, true), C_NAME);
  assert_int_equal(mw_schema_add(s, "v", MW_T_FLOAT64, true), C_V);
  assert_int_equal(mw_schema_add(s, "flag", MW_T_BOOL, true), C_FLAG);
  assert_int_equal(mw_schema_add(s, "vec", MW_T_FSL, true), C_VEC);
  s->fields[C_VEC].fsl_dim = 4;
  s->fields[C_VEC].item_type = MW_T_FLOAT32;
  assert_int_equal(mw_schema_add(s, "tags", MW_T_LIST, true), C_TAGS);
  assert_int_equal(mw_field_add_child(&s->fields[C_TAGS], "item", MW_T_UTF8, true), 0);
  assert_int_equal(mw_schema_add(s, "meta", MW_T_STRUCT, true), C_META);
  assert_int_equal(mw_field_add_child(&s->fields[C_META], "a", MW_T_INT32, true), 0);
  assert_int_equal(mw_field_add_child(&s->fields[C_META], "b", MW_T_UTF8, true), 1);
  assert_int_equal(mw_schema_add(s, "_tombstone", MW_T_BOOL, false), C_TOMB);
  for (size_t i = 0; i < s->n_fields; i++) s->fields[i].id = (int32_t)i;
  s->fields[C_ID].pk_position = 1;
  char why[160];
  for (size_t i = 0; i < s->n_fields; i++) assert_int_equal(mw_field_check(&s->fields[i], why, sizeof why), 0);
}

static void add_row(mw_batch_t *b, int64_t id) {
  const mw_schema_t *s = b->schema;
  mw_column_t *c = b->cols;
  char txt[32];
  double v = id == 7 ? MARKER : (double)id / 4;
  float vec[4] = {(float)id, 1, 2, 3};
  int32_t a = (int32_t)id * 3;
  assert_int_equal(mw_column_append_fixed(&c[C_ID], &id, 8), 0);
  snprintf(txt, sizeof txt, "name-%" PRId64, id);
  if (id % 5 == 1) assert_int_equal(mw_column_append_null(&c[C_NAME], &s->fields[C_NAME]), 0);
  else assert_int_equal(mw_column_append_bytes(&c[C_NAME], txt, strlen(txt)), 0);
  assert_int_equal(mw_column_append_fixed(&c[C_V], &v, 8), 0);
  assert_int_equal(mw_column_append_bool(&c[C_FLAG], id % 3 == 0), 0);
  if (id % 4 == 2) assert_int_equal(mw_column_append_null(&c[C_VEC], &s->fields[C_VEC]), 0);
  else assert_int_equal(mw_column_append_fsl(&c[C_VEC], &s->fields[C_VEC], vec), 0);
  if (id % 6 == 3) {
    assert_int_equal(mw_column_append_null(&c[C_TAGS], &s->fields[C_TAGS]), 0);
  } else {
    for (int64_t k = 0; k < id % 3; k++) { /* 0, 1 or 2 items */
      snprintf(txt, sizeof txt, "t%" PRId64 ".%" PRId64, id, k);
      assert_int_equal(mw_column_append_bytes(&c[C_TAGS].children[0], txt, strlen(txt)), 0);
    }
    assert_int_equal(mw_column_list_end(&c[C_TAGS]), 0);
  }
  if (id % 7 == 4) {
    assert_int_equal(mw_column_append_null(&c[C_META], &s->fields[C_META]), 0);
  } else {
    snprintf(txt, sizeof txt, "m%" PRId64, id);
    assert_int_equal(mw_column_append_fixed(&c[C_META].children[0], &a, 4), 0);
    assert_int_equal(mw_column_append_bytes(&c[C_META].children[1], txt, strlen(txt)), 0);
    assert_int_equal(mw_column_struct_end(&c[C_META]), 0);
  }
  assert_int_equal(mw_column_append_bool(&c[C_TOMB], false), 0);
  b->n_rows++;
}

typedef struct fixture {
  mw_schema_t s;
  mw_batch_t b[3];
  const mw_batch_t *bp[3];
  mw_buf_t file;
} fixture_t;

/* 3 batches of 40, 1 and 300 rows (ids 0..340), written as one data file. */
static void fixture_make(fixture_t *x, bool zstd) {
  memset(x, 0, sizeof *x);
  all_layouts(&x->s);
  const int64_t rows[3] = {40, 1, 300};
  int64_t id = 0;
  for (int i = 0; i < 3; i++) {
    assert_int_equal(mw_batch_init(&x->b[i], &x->s), 0);
    for (int64_t r = 0; r < rows[i]; r++) add_row(&x->b[i], id++);
    assert_int_equal(mw_batch_validate(&x->b[i]), 0);
    x->bp[i] = &x->b[i];
  }
  mw_sstable_opts_t o = {.zstd = zstd};
  mw_err_t err = {0};
  int rc = mw_sstable_data_file(&x->s, x->bp, 3, &o, &x->file, &err);
  if (rc != 0) fail_msg("write: %d %s", rc, err.msg);
}

static void fixture_free(fixture_t *x) {
  for (int i = 0; i < 3; i++) mw_batch_free(&x->b[i]);
  mw_schema_free(&x->s);
  mw_buf_free(&x->file);
}

/* The read-back of x's file against its batches: 0, or -EBADMSG whose
 * reason contains `want`. */
static void expect(fixture_t *x, size_t n_batches, const char *want) {
  mw_err_t err = {0};
  int rc = mw_readback_data_file(&x->s, x->bp, n_batches, x->file.data, x->file.len, "t/data/x.lance", &err);
  if (want == NULL) {
    if (rc != 0) fail_msg("read-back refused a good file: %d %s", rc, err.msg);
    return;
  }
  assert_int_equal(rc, -EBADMSG);
  if (strstr(err.msg, want) == NULL || strstr(err.msg, "t/data/x.lance") == NULL)
    fail_msg("reason \"%s\" does not name the file and \"%s\"", err.msg, want);
}

static void test_every_layout_reads_back(void **state) {
  (void)state;
  for (int z = 0; z < 2; z++) {
    fixture_t x;
    fixture_make(&x, z == 1);
    expect(&x, 3, NULL);
    fixture_free(&x);
  }
}

/* Batch 2 (ids 41..340) changed after the file was written: row r of the
 * file is id r. Each change is refused naming the column and the row. */
static void test_changed_values_refused(void **state) {
  (void)state;
  fixture_t x;
  fixture_make(&x, true);
  mw_batch_t *b = &x.b[2];
  /* a vector item (row 45 = batch row 4) */
  float *f = (float *)(void *)b->cols[C_VEC].values.data;
  f[4 * 4 + 3] += 1;
  expect(&x, 3, "column 'vec' row 45: the value read back differs");
  f[4 * 4 + 3] -= 1;
  /* a list item's last byte (row 44 has 2 items) */
  mw_column_t *items = &b->cols[C_TAGS].children[0];
  const int32_t *lo = (const int32_t *)(const void *)b->cols[C_TAGS].offsets.data;
  const int32_t *io = (const int32_t *)(const void *)items->offsets.data;
  uint8_t *last = items->values.data + io[lo[3 + 1]] - 1;
  (*last)++;
  expect(&x, 3, "column 'tags' row 44");
  (*last)--;
  /* a struct child (row 50) */
  int32_t *a = (int32_t *)(void *)b->cols[C_META].children[0].values.data;
  a[9] ^= 1;
  expect(&x, 3, "column 'meta' row 50");
  a[9] ^= 1;
  /* a bool (row 42) */
  uint8_t *flags = b->cols[C_FLAG].values.data;
  mw_bit_set(flags, 1, !mw_bit_get(flags, 1));
  expect(&x, 3, "column 'flag' row 42");
  mw_bit_set(flags, 1, !mw_bit_get(flags, 1));
  /* a value made null (row 43's v; the column gets a validity bitmap) */
  mw_column_t *v = &b->cols[C_V];
  assert_int_equal(v->validity.len, 0);
  assert_int_equal(mw_buf_fill(&v->validity, 0xff, (size_t)(v->length + 7) / 8), 0);
  mw_bit_set(v->validity.data, 2, false);
  v->null_count = 1;
  expect(&x, 3, "column 'v' row 43: written as null, read back as a value");
  mw_buf_reset(&v->validity);
  v->null_count = 0;
  expect(&x, 3, NULL);
  /* a string made null past the first 64 rows of a batch that starts at
   * file row 41 (validity compared 64 bits at a time, unaligned) */
  mw_column_t *name = &b->cols[C_NAME];
  assert_true(name->validity.len > 0 && mw_bit_get(name->validity.data, 131));
  mw_bit_set(name->validity.data, 131, false);
  name->null_count++;
  expect(&x, 3, "column 'name' row 172: written as null, read back as a value");
  mw_bit_set(name->validity.data, 131, true);
  name->null_count--;
  expect(&x, 3, NULL);
  /* fewer rows written than the file holds */
  expect(&x, 2, "file has 341 rows (limit 42)");
  fixture_free(&x);
}

static void test_damaged_file_refused(void **state) {
  (void)state;
  fixture_t x;
  fixture_make(&x, false);
  /* a flipped byte of a page: row 7's float64, stored as it is */
  double m = MARKER;
  uint8_t *hit = memmem(x.file.data, x.file.len, &m, sizeof m);
  assert_non_null(hit);
  hit[0] ^= 0x40;
  expect(&x, 3, "column 'v' row 7: the value read back differs");
  hit[0] ^= 0x40;
  expect(&x, 3, NULL);
  /* truncated: no footer */
  size_t len = x.file.len;
  x.file.len = len - 100;
  expect(&x, 3, "refused: no LANC magic");
  x.file.len = len;
  fixture_free(&x);
}

static void test_bloom_deletions_pk_index(void **state) {
  (void)state;
  mw_err_t err = {0};
  /* bloom: every inserted hash is in it; one never inserted is refused */
  uint64_t h[3] = {1111, 2222, 3333};
  mw_bloom_t bf;
  mw_buf_t bytes = MW_BUF_INIT;
  assert_int_equal(mw_bloom_init(&bf, MW_BLOOM_SST_BYTES), 0);
  mw_bloom_insert_many(&bf, h, 2);
  assert_int_equal(mw_bloom_encode(&bf, &bytes), 0);
  assert_int_equal(mw_readback_bloom(bytes.data, bytes.len, h, 2, "d/bloom_filter.bin", &err), 0);
  assert_int_equal(mw_readback_bloom(bytes.data, bytes.len, h, 3, "d/bloom_filter.bin", &err), -EBADMSG);
  assert_non_null(strstr(err.msg, "row 2's key is not in it"));
  assert_int_equal(mw_readback_bloom(bytes.data, 17, h, 2, "d/bloom_filter.bin", &err), -EBADMSG);
  mw_bloom_free(&bf);
  /* deletions: exactly the offsets */
  uint32_t dead[3] = {0, 5, 9}, other[3] = {0, 5, 8};
  mw_buf_reset(&bytes);
  assert_int_equal(mw_deletion_encode(dead, 3, &bytes, &err), 0);
  assert_int_equal(mw_readback_deletions(bytes.data, bytes.len, 10, dead, 3, "d/_deletions/x.bin", &err), 0);
  mw_err_clear(&err);
  assert_int_equal(mw_readback_deletions(bytes.data, bytes.len, 10, other, 3, "d/_deletions/x.bin", &err), -EBADMSG);
  assert_non_null(strstr(err.msg, "offset 2 is 9, 8 written"));
  mw_err_clear(&err);
  assert_int_equal(mw_readback_deletions(bytes.data, bytes.len, 10, dead, 2, "d/_deletions/x.bin", &err), -EBADMSG);
  mw_buf_free(&bytes);
  /* the PK index of 20 000 keys (3 pages), against those keys and others */
  mw_field_t pk = {.name = "id", .type = MW_T_INT64, .pk_position = 1};
  mw_column_t keys;
  assert_int_equal(mw_column_init(&keys, &pk), 0);
  for (int64_t i = 0; i < 20000; i++) {
    int64_t k = (i * 7919) % 20000;
    assert_int_equal(mw_column_append_fixed(&keys, &k, 8), 0);
  }
  mw_buf_t data = MW_BUF_INIT, lookup = MW_BUF_INIT;
  assert_int_equal(mw_pk_index_write(&pk, &keys, 0, &data, &lookup, &err), 0);
  mw_err_clear(&err);
  assert_int_equal(mw_readback_pk_index(&pk, &keys, &data, &lookup, "d", &err), 0);
  ((int64_t *)(void *)keys.values.data)[12345] += 1;
  assert_int_equal(mw_readback_pk_index(&pk, &keys, &data, &lookup, "d", &err), -EBADMSG);
  assert_non_null(strstr(err.msg, "d/_pk_index/page_data.lance refused"));
  ((int64_t *)(void *)keys.values.data)[12345] -= 1;
  mw_err_clear(&err);
  assert_int_equal(mw_readback_pk_index(&pk, &keys, &lookup, &lookup, "d", &err), -EBADMSG);
  mw_column_free(&keys);
  mw_buf_free(&data);
  mw_buf_free(&lookup);
}

/* The whole build reads back its files; a data file damaged between its
 * encoding and its read-back (the test hook) fails the build. */
static void flip_marker(mw_buf_t *file) {
  double m = MARKER;
  uint8_t *hit = memmem(file->data, file->len, &m, sizeof m);
  if (hit != NULL) hit[0] ^= 0x40;
}

static void test_sstable_build_reads_back(void **state) {
  (void)state;
  fixture_t x;
  fixture_make(&x, false);
  mw_sstable_t sst = {0};
  mw_err_t err = {0};
  int rc = mw_sstable_build(&x.s, x.bp, 3, 1, NULL, &sst, &err);
  if (rc != 0) fail_msg("build: %d %s", rc, err.msg);
  mw_sstable_free(&sst);
  mw_sstable_data_hook_for_tests = flip_marker;
  rc = mw_sstable_build(&x.s, x.bp, 3, 1, NULL, &sst, &err);
  assert_int_equal(rc, -EBADMSG);
  assert_non_null(strstr(err.msg, "column 'v' row 7"));
  assert_int_equal(sst.n_files, 0);
  mw_sstable_opts_t skip = {.skip_readback = true}; /* benches only */
  mw_err_clear(&err);
  assert_int_equal(mw_sstable_build(&x.s, x.bp, 3, 1, &skip, &sst, &err), 0);
  mw_sstable_data_hook_for_tests = NULL;
  mw_sstable_free(&sst);
  fixture_free(&x);
}

/* ------------------------------------------------------ vector index */

#define VX_ROWS 60
#define VX_DIM 4

/* VX_ROWS vectors of VX_DIM, every 7th null; the index built from them. */
static void vx_make(float *vecs, uint8_t *valid, mw_vindex_input_t *in, mw_vindex_t *built) {
  memset(valid, 0, VX_ROWS / 8 + 1);
  for (int r = 0; r < VX_ROWS; r++) {
    for (int i = 0; i < VX_DIM; i++) vecs[r * VX_DIM + i] = (float)((r * 7 + i * 3) % 17) / 8 - 1;
    if (r % 7 != 6) valid[r >> 3] |= (uint8_t)(1u << (r & 7));
  }
  *in = (mw_vindex_input_t){.vecs = vecs, .validity = valid, .rows = VX_ROWS, .dim = VX_DIM, .dist = MW_DIST_L2};
  mw_err_t err = {0};
  int rc = mw_vindex_build(in, built, &err);
  if (rc != 0) fail_msg("build: %d %s", rc, err.msg);
}

static void vx_expect(const mw_vindex_input_t *in, const mw_vindex_t *built, const char *want) {
  mw_err_t err = {0};
  int rc = mw_readback_vindex(in, built, "abc_gen_1", &err);
  if (want == NULL) {
    if (rc != 0) fail_msg("read-back refused a good index: %d %s", rc, err.msg);
    return;
  }
  assert_int_equal(rc, -EBADMSG);
  if (strstr(err.msg, want) == NULL || strstr(err.msg, "abc_gen_1/_indices refused") == NULL)
    fail_msg("reason \"%s\" does not name the index and \"%s\"", err.msg, want);
}

/* The index reads back against the column it was built from; a column that
 * changed after the build (a vector row nulled, a null row given a vector,
 * a row more), another distance and damaged files are refused, each naming
 * what is wrong. */
static void test_vindex_reads_back(void **state) {
  (void)state;
  float vecs[VX_ROWS * VX_DIM];
  uint8_t valid[VX_ROWS / 8 + 1];
  mw_vindex_input_t in;
  mw_vindex_t built;
  vx_make(vecs, valid, &in, &built);
  vx_expect(&in, &built, NULL);
  valid[0] &= (uint8_t)~1u; /* row 0 has a node */
  vx_expect(&in, &built, "node 0 names row 0, which has no vector");
  valid[0] |= 1u;
  valid[0] |= 1u << 6; /* row 6 is null: no node */
  vx_expect(&in, &built, "row 6 is not named by any node");
  valid[0] &= (uint8_t)~(1u << 6);
  vecs[6 * VX_DIM + 1] = 0; /* a null row's slot: ignored */
  vx_expect(&in, &built, NULL);
  in.rows = VX_ROWS - 1;
  vx_expect(&in, &built, "past the 59 rows");
  in.rows = VX_ROWS;
  in.dist = MW_DIST_DOT;
  vx_expect(&in, &built, "distance type");
  in.dist = MW_DIST_L2;
  built.aux_idx.len -= 9;
  vx_expect(&in, &built, "auxiliary.idx");
  built.aux_idx.len += 9;
  built.index_idx.data[built.index_idx.len - 1] ^= 0xff; /* the footer's magic */
  vx_expect(&in, &built, "index.idx");
  mw_vindex_free(&built);
}

/* An SSTable build reads its vector index back; one damaged between its
 * build and its read-back (the test hook) fails the build as refused. */
static void truncate_aux(mw_vindex_t *built) { built->aux_idx.len /= 2; }

static void test_sstable_vindex_reads_back(void **state) {
  (void)state;
  fixture_t x;
  fixture_make(&x, false);
  mw_sstable_vindex_t vx = {.name = "vec_idx", .field = C_VEC, .dist = MW_DIST_L2};
  mw_sstable_opts_t o = {.vindexes = &vx, .n_vindexes = 1, .dir_name = "abc_gen_1"};
  mw_sstable_t sst = {0};
  mw_err_t err = {0};
  int rc = mw_sstable_build(&x.s, x.bp, 3, 1, &o, &sst, &err);
  if (rc != 0) fail_msg("build: %d %s", rc, err.msg);
  assert_int_equal(sst.n_vindexes_built, 1);
  mw_sstable_free(&sst);
  mw_sstable_vindex_hook_for_tests = truncate_aux;
  mw_sstable_job_t *j;
  assert_int_equal(mw_sstable_job_begin(&x.s, x.bp, 3, 1, &o, &j, &err), 0);
  for (int i = 0; i < MW_SSTABLE_PARTS - 1; i++) assert_int_equal(mw_sstable_job_run(j, i, &err), 0);
  rc = mw_sstable_job_run(j, MW_SSTABLE_PART_INDEX, &err);
  mw_sstable_vindex_hook_for_tests = NULL;
  assert_int_equal(rc, -EBADMSG);
  assert_true(mw_sstable_job_refused(j));
  if (strstr(err.msg, "read-back of abc_gen_1/_indices refused: auxiliary.idx") == NULL)
    fail_msg("the refusal reads: %s", err.msg);
  mw_sstable_job_free(j);
  fixture_free(&x);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_layout_reads_back),
      cmocka_unit_test(test_changed_values_refused),
      cmocka_unit_test(test_damaged_file_refused),
      cmocka_unit_test(test_bloom_deletions_pk_index),
      cmocka_unit_test(test_sstable_build_reads_back),
      cmocka_unit_test(test_vindex_reads_back),
      cmocka_unit_test(test_sstable_vindex_reads_back),
  };
  return tu_run_group(tests, NULL, NULL);
}
