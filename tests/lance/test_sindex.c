/*
 * test_sindex.c — the per-SSTable BTree index of a maintained scalar index
 * (sindex.h) against LanceDB 0.39.0's.
 *
 * Golden data: tests/lance/data/sindex/ (tools/gen-sindex-fixtures.mjs):
 * the data file of one SSTable LanceDB's own MemWAL writer flushed (5000
 * rows: num int64 with duplicates and 52 nulls, name utf8 with 57 nulls),
 * its manifest, and the BTree files of the maintained indexes num_idx and
 * name_idx (case.txt: rows and the uuids).
 *
 * What must hold: LanceDB's files pass mw_sindex_check against the data
 * file's column (so the decoder reads what LanceDB writes: 4096-entry
 * pages, a null min on a page with nulls); ours, built from the same
 * column, decode to the same entries (values and ids in the same order) and
 * the same page_lookup rows and metadata; our manifest entry equals
 * LanceDB's byte for byte given its uuid, created_at and file sizes. Then
 * the check refuses broken files: swapped entries, a wrong page min, a
 * wrong batch_size, truncation, and every single-byte flip of a small file
 * either fails cleanly or still passes the check.
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

#include "lance/datafile.h"
#include "lance/dataset_manifest.h"
#include "lance/pk_index.h"
#include "lance/sindex.h"
#include "table.pb-c.h"
#include "cases.h"
#include "testutil.h"

static uint8_t *load(const char *file, size_t *len) {
  const char *root = getenv("MW_SOURCE_ROOT");
  assert_non_null(root);
  char *p = tu_strf("%s/tests/lance/data/sindex/%s", root, file);
  uint8_t *b = tu_read_file(p, len);
  if (b == NULL) fail_msg("cannot read fixture %s", p);
  free(p);
  return b;
}

typedef struct fixture {
  uint8_t *data;
  size_t data_len;
  mw_datafile_t df;
  mw_batch_t b;
} fixture_t;

static void fixture_open(fixture_t *f) {
  memset(f, 0, sizeof *f);
  mw_err_t err = {0};
  f->data = load("data.lance", &f->data_len);
  assert_int_equal(mw_datafile_open(&f->df, f->data, f->data_len, NULL, &err), 0);
  assert_int_equal(mw_datafile_read_batch(&f->df, &f->b, &err), 0);
  assert_int_equal(f->b.n_rows, 5000);
}

static void fixture_close(fixture_t *f) {
  mw_batch_free(&f->b);
  mw_datafile_close(&f->df);
  free(f->data);
}

static size_t field_of(const fixture_t *f, const char *name) {
  for (size_t i = 0; i < f->b.schema->n_fields; i++)
    if (strcmp(f->b.schema->fields[i].name, name) == 0) return i;
  fail_msg("no column %s", name);
  return 0;
}

static const struct { const char *index, *column; uint64_t nulls; } IDX[] = {
    {"num_idx", "num", 52}, {"name_idx", "name", 57}};

/* LanceDB's files pass the check against the data file's column. */
static void test_golden_check(void **state) {
  (void)state;
  fixture_t f;
  fixture_open(&f);
  for (size_t k = 0; k < 2; k++) {
    size_t dl, ll;
    char *dp = tu_strf("%s/page_data.lance", IDX[k].index), *lp = tu_strf("%s/page_lookup.lance", IDX[k].index);
    uint8_t *d = load(dp, &dl), *l = load(lp, &ll);
    size_t c = field_of(&f, IDX[k].column);
    mw_sindex_info_t info;
    mw_err_t err = {0};
    int rc = mw_sindex_check(d, dl, l, ll, &f.b.schema->fields[c], &f.b.cols[c], &info, &err);
    if (rc != 0) fail_msg("%s: %s", IDX[k].index, err.msg);
    assert_int_equal(info.entries, 5000);
    assert_int_equal(info.pages, 2);
    assert_int_equal(info.page_rows, MW_SINDEX_PAGE_ROWS);
    assert_int_equal(info.nulls, IDX[k].nulls);
    free(d), free(l), free(dp), free(lp);
  }
  fixture_close(&f);
}

static void read_batch(const mw_buf_t *b, mw_datafile_t *df, mw_batch_t *out) {
  mw_err_t err = {0};
  assert_int_equal(mw_datafile_open(df, b->data, b->len, NULL, &err), 0);
  assert_int_equal(mw_datafile_read_batch(df, out, &err), 0);
}

/* Two decoded files hold the same columns, schema metadata and rows. */
static void same_batches(const mw_buf_t *a, const mw_buf_t *b, const char *what) {
  mw_datafile_t fa, fb;
  mw_batch_t ba, bb;
  read_batch(a, &fa, &ba);
  read_batch(b, &fb, &bb);
  assert_int_equal(ba.n_rows, bb.n_rows);
  assert_int_equal(fa.schema.n_fields, fb.schema.n_fields);
  assert_int_equal(fa.schema.meta.n, fb.schema.meta.n);
  for (size_t i = 0; i < fa.schema.meta.n; i++) {
    const mw_kv_t *x = &fa.schema.meta.items[i], *y = mw_kvs_get(&fb.schema.meta, x->key);
    assert_non_null(y);
    assert_int_equal(x->value_len, y->value_len);
    assert_memory_equal(x->value, y->value, x->value_len);
  }
  for (size_t c = 0; c < fa.schema.n_fields; c++) {
    assert_string_equal(fa.schema.fields[c].name, fb.schema.fields[c].name);
    assert_int_equal(fa.schema.fields[c].type, fb.schema.fields[c].type);
    assert_int_equal(fa.schema.fields[c].id, fb.schema.fields[c].id);
    for (int64_t r = 0; r < ba.n_rows; r++) {
      bool va = mw_column_valid(&ba.cols[c], r), vb = mw_column_valid(&bb.cols[c], r);
      if (va != vb) fail_msg("%s: column %s row %lld: validity differs", what, fa.schema.fields[c].name, (long long)r);
      if (!va) continue;
      size_t na, nb;
      const uint8_t *pa, *pb;
      if (mw_type_info(fa.schema.fields[c].type)->layout == MW_LAYOUT_VAR) {
        pa = mw_column_bytes(&ba.cols[c], r, &na);
        pb = mw_column_bytes(&bb.cols[c], r, &nb);
      } else {
        na = nb = mw_type_width(&fa.schema.fields[c]);
        pa = ba.cols[c].values.data + (size_t)r * na;
        pb = bb.cols[c].values.data + (size_t)r * nb;
      }
      if (na != nb || memcmp(pa, pb, na) != 0)
        fail_msg("%s: column %s row %lld differs", what, fa.schema.fields[c].name, (long long)r);
    }
  }
  mw_batch_free(&ba), mw_batch_free(&bb);
  mw_datafile_close(&fa), mw_datafile_close(&fb);
}

/* Ours from the same column: the same entries, pages and metadata. */
static void test_build_vs_golden(void **state) {
  (void)state;
  fixture_t f;
  fixture_open(&f);
  for (size_t k = 0; k < 2; k++) {
    size_t dl, ll;
    char *dp = tu_strf("%s/page_data.lance", IDX[k].index), *lp = tu_strf("%s/page_lookup.lance", IDX[k].index);
    uint8_t *d = load(dp, &dl), *l = load(lp, &ll);
    mw_buf_t theirs_d = {.data = d, .len = dl}, theirs_l = {.data = l, .len = ll};
    mw_buf_t mine_d = MW_BUF_INIT, mine_l = MW_BUF_INIT;
    size_t c = field_of(&f, IDX[k].column);
    mw_err_t err = {0};
    assert_int_equal(mw_sindex_build(&f.b.schema->fields[c], &f.b.cols[c], &mine_d, &mine_l, &err), 0);
    assert_int_equal(mw_sindex_check(mine_d.data, mine_d.len, mine_l.data, mine_l.len, &f.b.schema->fields[c],
                                     &f.b.cols[c], NULL, &err), 0);
    same_batches(&mine_d, &theirs_d, "page_data");
    same_batches(&mine_l, &theirs_l, "page_lookup");
    mw_buf_free(&mine_d), mw_buf_free(&mine_l);
    free(d), free(l), free(dp), free(lp);
  }
  fixture_close(&f);
}

/* Our entry equals LanceDB's, given its uuid, created_at and sizes. */
static void test_entry_vs_golden(void **state) {
  (void)state;
  size_t n;
  uint8_t *man = load("sstable.manifest", &n);
  mw_section_t msg, sec;
  uint64_t pos;
  mw_err_t err = {0};
  assert_int_equal(mw_dmanifest_unframe(man, n, &msg, &pos, &err), 0);
  assert_int_equal(mw_dmanifest_section_at(man, n, 0, pos, &sec, &err), 0);
  mw_index_section_t s;
  assert_int_equal(mw_index_section_decode(sec.data, sec.len, &s, &err), 0);
  size_t found = 0;
  for (size_t i = 0; i < s.n; i++) {
    const Lance__Table__IndexMetadata *pb = s.items[i].pb;
    if (strcmp(pb->index_details->type_url, MW_SINDEX_DETAILS_URL) != 0) continue;
    found++;
    assert_non_null(pb->uuid);
    assert_int_equal(pb->uuid->uuid.len, 16);
    assert_int_equal(pb->n_files, 2);
    mw_buf_t theirs = MW_BUF_INIT, mine = MW_BUF_INIT;
    assert_int_equal(mw_index_entry_encode(&s.items[i], &theirs), 0);
    assert_int_equal(mw_sindex_entry_encode(pb->uuid->uuid.data, pb->name, pb->fields[0], pb->created_at,
                                            pb->files[0]->size_bytes, pb->files[1]->size_bytes, &mine, &err), 0);
    assert_int_equal(mine.len, theirs.len);
    assert_memory_equal(mine.data, theirs.data, mine.len);
    mw_buf_free(&theirs), mw_buf_free(&mine);
  }
  assert_int_equal(found, 2);
  mw_index_section_free(&s);
  free(man);
}

/* A small int64 column: 10 000 rows (3 pages), duplicates, every 7th null. */
static void small_column(mw_schema_t *s, mw_batch_t *b) {
  mw_schema_init(s);
  assert_true(mw_schema_add(s, "num", MW_T_INT64, true) >= 0);
  s->fields[0].id = 0;
  assert_int_equal(mw_batch_init(b, s), 0);
  for (int64_t i = 0; i < 10000; i++) {
    int64_t v = (i * 7919) % 3001 - 1500;
    if (i % 7 == 3) assert_int_equal(mw_column_append_null(&b->cols[0], &s->fields[0]), 0);
    else assert_int_equal(mw_column_append_fixed(&b->cols[0], &v, 8), 0);
  }
  b->n_rows = 10000;
}

static void test_refusals(void **state) {
  (void)state;
  mw_schema_t s;
  mw_batch_t b;
  small_column(&s, &b);
  mw_buf_t d = MW_BUF_INIT, l = MW_BUF_INIT;
  mw_err_t err = {0};
  mw_sindex_info_t info;
  assert_int_equal(mw_sindex_build(&s.fields[0], &b.cols[0], &d, &l, &err), 0);
  assert_int_equal(mw_sindex_check(d.data, d.len, l.data, l.len, &s.fields[0], &b.cols[0], &info, &err), 0);
  assert_int_equal(info.pages, 3);
  assert_int_equal(info.nulls, 1429);
  /* another column: an entry is not its row's value */
  int64_t one = 123456789;
  memcpy(b.cols[0].values.data + 8 * 9998, &one, 8); /* row 9999 is null */
  assert_int_equal(mw_sindex_check(d.data, d.len, l.data, l.len, &s.fields[0], &b.cols[0], NULL, &err), -EBADMSG);
  assert_non_null(strstr(err.msg, "is not the value of row"));
  /* the _pk_index's shape: a page with nulls has a non-null min */
  mw_buf_t pd = MW_BUF_INIT, pl = MW_BUF_INIT;
  static const mw_btree_shape_t pk_shape = {.page_rows = 8192, .null_min = false};
  assert_int_equal(mw_btree_index_write(&s.fields[0], &b.cols[0], 0, &pk_shape, &pd, &pl, &err), 0);
  mw_err_clear(&err); /* the first reason recorded wins (err.h) */
  assert_int_equal(mw_sindex_check(pd.data, pd.len, pl.data, pl.len, NULL, NULL, NULL, &err), -EBADMSG);
  if (strstr(err.msg, "page 0's min") == NULL) fail_msg("%s", err.msg);
  /* lookup of another file: pages do not match */
  mw_err_clear(&err);
  assert_int_equal(mw_sindex_check(d.data, d.len, pl.data, pl.len, NULL, NULL, NULL, &err), -EBADMSG);
  /* every truncation of page_lookup, every byte flip of it */
  for (size_t n = 0; n < l.len; n++) {
    mw_err_clear(&err);
    int rc = mw_sindex_check(d.data, d.len, l.data, n, NULL, NULL, NULL, &err);
    if (rc != -EBADMSG) fail_msg("page_lookup cut to %zu of %zu bytes: %d %s", n, l.len, rc, err.msg);
  }
  for (size_t i = 0; i < l.len; i++) {
    l.data[i] ^= 0x5a;
    mw_err_clear(&err);
    int rc = mw_sindex_check(d.data, d.len, l.data, l.len, NULL, NULL, NULL, &err);
    if (rc != 0 && rc != -EBADMSG) fail_msg("flip at %zu: %d %s", i, rc, err.msg);
    l.data[i] ^= 0x5a;
  }
  mw_buf_free(&d), mw_buf_free(&l), mw_buf_free(&pd), mw_buf_free(&pl);
  mw_batch_free(&b);
  mw_schema_free(&s);
}

/* A type the BTree here does not index is refused by the build. */
static void test_unsupported_type(void **state) {
  (void)state;
  mw_schema_t s;
  mw_batch_t b;
  mw_schema_init(&s);
  assert_true(mw_schema_add(&s, "f", MW_T_FLOAT64, true) >= 0);
  assert_int_equal(mw_batch_init(&b, &s), 0);
  mw_buf_t d = MW_BUF_INIT, l = MW_BUF_INIT;
  mw_err_t err = {0};
  assert_int_equal(mw_sindex_build(&s.fields[0], &b.cols[0], &d, &l, &err), -ENOTSUP);
  assert_int_equal(d.len, 0);
  mw_batch_free(&b);
  mw_schema_free(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_golden_check),  cmocka_unit_test(test_build_vs_golden),
      cmocka_unit_test(test_entry_vs_golden), cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_unsupported_type),
  };
  return tu_run_group(tests, NULL, NULL);
}
