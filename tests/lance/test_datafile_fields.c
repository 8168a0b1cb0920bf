/*
 * test_datafile_fields.c — DataFile.fields / column_indices
 * (lance/datafile_fields.h) against the manifests LanceDB 0.39.0 wrote for
 * a table with list, struct, list of struct, struct with a list,
 * fixed_size_list and list of fixed_size_list columns, in Lance file
 * versions 2.0, 2.1 and 2.2 (tests/lance/data/layout,
 * tools/gen-layout-fixtures.mjs).
 *
 * Golden: the mapping memwald builds from the manifest's schema is byte for
 * byte the one LanceDB recorded, and the check accepts LanceDB's DataFile
 * against its data file. Then every way a mapping can be wrong is refused
 * with its reason, first of all the one compaction wrote before issue 26
 * (top-level field ids as columns 0..n-1), with LanceDB's own words.
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

#include "lance/datafile.h"
#include "lance/datafile_fields.h"
#include "lance/dataset_manifest.h"
#include "testutil.h"

typedef struct golden {
  uint8_t *man, *data;
  size_t man_len, data_len;
  mw_table_meta_t meta;
  mw_datafile_t file;
  const Lance__Table__DataFile *df;
} golden_t;

static void golden_load(golden_t *g, const char *tag, bool open_file) {
  memset(g, 0, sizeof *g);
  const char *root = getenv("MW_SOURCE_ROOT");
  char *mp = tu_strf("%s/tests/lance/data/layout/%s.manifest", root ? root : ".", tag);
  char *dp = tu_strf("%s/tests/lance/data/layout/%s.lance", root ? root : ".", tag);
  g->man = tu_read_file(mp, &g->man_len);
  g->data = tu_read_file(dp, &g->data_len);
  if (g->man == NULL || g->data == NULL) fail_msg("cannot read %s or %s", mp, dp);
  mw_err_t err = {0};
  if (mw_table_meta_read(g->man, g->man_len, &g->meta, &err) < 0) fail_msg("%s: %s", mp, err.msg);
  const Lance__Table__Manifest *pb = g->meta.manifest.pb;
  assert_int_equal(pb->n_fragments, 1);
  assert_int_equal(pb->fragments[0]->n_files, 1);
  g->df = pb->fragments[0]->files[0];
  if (open_file && mw_datafile_open(&g->file, g->data, g->data_len, NULL, &err) < 0) fail_msg("%s: %s", dp, err.msg);
  free(mp);
  free(dp);
}

static void golden_free(golden_t *g, bool opened) {
  if (opened) mw_datafile_close(&g->file);
  mw_table_meta_free(&g->meta);
  free(g->man);
  free(g->data);
}

/* memwald's mapping for the manifest's schema is exactly LanceDB's. */
static void expect_same_mapping(const char *tag, uint32_t major, uint32_t minor, size_t n) {
  golden_t g;
  golden_load(&g, tag, false);
  assert_int_equal(g.df->file_major_version, major);
  assert_int_equal(g.df->file_minor_version, minor);
  int32_t ids[MW_DF_FIELDS_MAX], cols[MW_DF_FIELDS_MAX];
  mw_err_t err = {0};
  int got = mw_datafile_fields(&g.meta.schema, major, minor, ids, cols, MW_DF_FIELDS_MAX, &err);
  assert_int_equal(got, (int)n);
  assert_int_equal(g.df->n_fields, n);
  assert_int_equal(g.df->n_column_indices, n);
  assert_memory_equal(ids, g.df->fields, n * sizeof *ids);
  assert_memory_equal(cols, g.df->column_indices, n * sizeof *cols);
  golden_free(&g, false);
}

static void test_golden_mappings(void **state) {
  (void)state;
  expect_same_mapping("2_0", 2, 0, 18); /* every field */
  expect_same_mapping("2_1", 2, 1, 11); /* the leaves */
  expect_same_mapping("2_2", 2, 2, 11);
  /* the leaves of 2.1+, by id: id, tags.item, meta.a, meta.b, ls.item.x,
   * ls.item.y, sl.n, sl.l.item, v (a fixed_size_list is a leaf),
   * lfsl.item, x */
  golden_t g;
  golden_load(&g, "2_2", false);
  static const int32_t want[] = {0, 2, 4, 5, 8, 9, 11, 13, 14, 16, 17};
  assert_memory_equal(g.df->fields, want, sizeof want);
  golden_free(&g, false);
}

/* A check of ids/cols against the 2.2 golden file (its manifest's schema,
 * with meta.a made int64 when retype); returns rc, the reason in err. */
static int check_22(const int32_t *ids, size_t n_ids, const int32_t *cols, size_t n_cols, uint32_t minor,
                    bool retype, mw_err_t *err) {
  golden_t g;
  golden_load(&g, "2_2", true);
  if (retype) {
    int meta = mw_schema_find(&g.meta.schema, "meta");
    assert_true(meta >= 0);
    assert_string_equal(g.meta.schema.fields[meta].children[0].name, "a");
    g.meta.schema.fields[meta].children[0].type = MW_T_INT64;
  }
  mw_df_ref_t ref = {.ids = ids, .n_ids = n_ids, .cols = cols, .n_cols = n_cols, .major = 2, .minor = minor};
  mw_df_file_t file = {.schema = &g.file.schema, .n_columns = g.file.n_columns, .major = g.file.major,
                       .minor = g.file.minor};
  int rc = mw_datafile_fields_check(&g.meta.schema, &ref, &file, err);
  golden_free(&g, true);
  return rc;
}

static void test_golden_checks(void **state) {
  (void)state;
  for (int v = 1; v <= 2; v++) {
    golden_t g;
    golden_load(&g, v == 1 ? "2_1" : "2_2", true);
    assert_int_equal(g.file.major, 2);
    assert_int_equal(g.file.minor, (uint32_t)v);
    assert_int_equal(g.file.n_columns, 11);
    mw_df_ref_t ref = {.ids = g.df->fields, .n_ids = g.df->n_fields, .cols = g.df->column_indices,
                       .n_cols = g.df->n_column_indices, .major = g.df->file_major_version,
                       .minor = g.df->file_minor_version};
    mw_df_file_t file = {.schema = &g.file.schema, .n_columns = g.file.n_columns, .major = g.file.major,
                         .minor = g.file.minor};
    mw_err_t err = {0};
    int rc = mw_datafile_fields_check(&g.meta.schema, &ref, &file, &err);
    if (rc != 0) fail_msg("2.%d: %s", v, err.msg);
    golden_free(&g, true);
  }
}

#define N_LEAVES 11
static const int32_t LEAF_IDS[N_LEAVES] = {0, 2, 4, 5, 8, 9, 11, 13, 14, 16, 17};
static const int32_t LEAF_COLS[N_LEAVES] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10};

static void expect_refused_n(const int32_t *ids, size_t n_ids, const int32_t *cols, size_t n_cols, uint32_t minor,
                             bool retype, const char *reason) {
  mw_err_t err = {0};
  int rc = check_22(ids, n_ids, cols, n_cols, minor, retype, &err);
  if (rc != -EBADMSG || strstr(err.msg, reason) == NULL)
    fail_msg("rc %d, reason \"%s\"; want -EBADMSG and \"%s\"", rc, err.msg, reason);
}

static void expect_refused(const int32_t *ids, const int32_t *cols, size_t n, const char *reason) {
  expect_refused_n(ids, n, cols, n, 2, false, reason);
}

/* What compaction wrote before issue 26: every top-level field as column i. */
static void test_refuses_top_level_columns(void **state) {
  (void)state;
  static const int32_t ids[] = {0, 1, 3, 6, 10, 14, 15, 17}, cols[] = {0, 1, 2, 3, 4, 5, 6, 7};
  expect_refused(ids, cols, 8,
                 "non-leaf field 'tags' (id=1) has column_index=1, but non-leaf fields should have "
                 "column_index=-1 in file format 2.1+");
}

typedef struct mapping {
  int32_t ids[N_LEAVES + 1], cols[N_LEAVES + 1];
} mapping_t;

static mapping_t leaves(void) {
  mapping_t m;
  memcpy(m.ids, LEAF_IDS, sizeof LEAF_IDS);
  memcpy(m.cols, LEAF_COLS, sizeof LEAF_COLS);
  return m;
}

static void test_accepts_what_lance_accepts(void **state) {
  (void)state;
  mapping_t m = leaves();
  mw_err_t err = {0};
  assert_int_equal(check_22(m.ids, N_LEAVES, m.cols, N_LEAVES, 2, false, &err), 0);
  /* a list listed with -1 */
  m.ids[N_LEAVES] = 1, m.cols[N_LEAVES] = -1;
  assert_int_equal(check_22(m.ids, N_LEAVES + 1, m.cols, N_LEAVES + 1, 2, false, &err), 0);
  /* a field id the table does not have (dropped): skipped */
  m.ids[N_LEAVES] = 99, m.cols[N_LEAVES] = 4;
  assert_int_equal(check_22(m.ids, N_LEAVES + 1, m.cols, N_LEAVES + 1, 2, false, &err), 0);
}

static void test_refuses_each_wrong_mapping(void **state) {
  (void)state;
  mapping_t m = leaves();
  expect_refused_n(m.ids, N_LEAVES, m.cols, N_LEAVES - 1, 2, false, "11 field ids but 10 column indices");
  expect_refused_n(m.ids, N_LEAVES, m.cols, N_LEAVES, 1, false,
                   "DataFile records file version 2.1, the data file's footer says 2.2");
  m.cols[3] = -1;
  expect_refused(m.ids, m.cols, N_LEAVES,
                 "field 'b' (id=5) has column_index=-1, but leaf fields must have a valid column index");
  m = leaves();
  m.cols[10] = 11;
  expect_refused(m.ids, m.cols, N_LEAVES, "field 'x' (id=17) has column_index=11, but the data file has only 11 columns");
  m = leaves();
  m.cols[10] = 9;
  expect_refused(m.ids, m.cols, N_LEAVES, "fields id 16 and id 17 both name column 9");
  m = leaves(); /* meta.a and sl.n, both int32: LanceDB would read each other's values */
  m.cols[2] = 6, m.cols[6] = 2;
  expect_refused(m.ids, m.cols, N_LEAVES,
                 "field 'a' (id=4) is column 2 of the data file, but column_index says 6 (LanceDB would decode "
                 "field 'n' (id 11) as 'a')");
  m = leaves();
  expect_refused(m.ids, m.cols, N_LEAVES - 1,
                 "field 'x' (id=17) is column 10 of the data file, but DataFile.fields does not map it there: "
                 "LanceDB reads it as nulls");
  m = leaves();
  expect_refused_n(m.ids, N_LEAVES, m.cols, N_LEAVES, 2, true,
                   "field 'a' (id=4) is int64 in the table's schema but int32 in the data file");
}

static void test_build_limits(void **state) {
  (void)state;
  golden_t g;
  golden_load(&g, "2_2", false);
  int32_t ids[MW_DF_FIELDS_MAX], cols[MW_DF_FIELDS_MAX];
  mw_err_t err = {0};
  assert_int_equal(mw_datafile_fields(&g.meta.schema, 2, 2, ids, cols, 10, &err), -EFBIG);
  assert_int_equal(mw_datafile_fields(&g.meta.schema, 0, 1, ids, cols, MW_DF_FIELDS_MAX, &err), -ENOTSUP);
  assert_int_equal(mw_datafile_fields(&g.meta.schema, 2, 3, ids, cols, MW_DF_FIELDS_MAX, &err), -ENOTSUP);
  /* a 2.0 footer says 0.3 */
  assert_int_equal(mw_datafile_fields(&g.meta.schema, 0, 3, ids, cols, MW_DF_FIELDS_MAX, &err), 18);
  /* a packed struct is one column in Lance: not memwald's layout */
  int meta = mw_schema_find(&g.meta.schema, "meta");
  assert_int_equal(mw_kvs_set(&g.meta.schema.fields[meta].meta, "packed", "true", 4), 0);
  mw_err_clear(&err);
  assert_int_equal(mw_datafile_fields(&g.meta.schema, 2, 2, ids, cols, MW_DF_FIELDS_MAX, &err), -ENOTSUP);
  assert_non_null(strstr(err.msg, "field 'meta': a packed struct"));
  golden_free(&g, false);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_golden_mappings),
      cmocka_unit_test(test_golden_checks),
      cmocka_unit_test(test_refuses_top_level_columns),
      cmocka_unit_test(test_accepts_what_lance_accepts),
      cmocka_unit_test(test_refuses_each_wrong_mapping),
      cmocka_unit_test(test_build_limits),
  };
  return tu_run_group(tests, NULL, NULL);
}
