/*
 * test_sstable.c — the SSTable writer (lance/sstable.h).
 *
 * Unit tests: file list and names, the deletion bitmap = every earlier
 * duplicate (tombstones included), the accounting fields (memwal.md §6.3's
 * worked example: 5 rows of (i64, 6-char utf8, f64, bool) = 171 bytes),
 * determinism under a seed, the build in parts (three threads at once give
 * the same bytes as one call), input checks, local writes.
 *
 * Golden tests: for every SSTable Lance wrote in the vectors, rebuild it from
 * the WAL entries it covered (decoded with our IPC codec) and check that
 *   - bloom_filter.bin is byte-identical to Lance's,
 *   - the _deletions bitmap is byte-identical to Lance's,
 *   - in_memory_bytes / physical_rows / primary_key_bytes equal the shard
 *     manifest's entry,
 *   - the data file and _pk_index/page_data.lance decode (with our reader) to
 *     the same rows as Lance's files.
 * The data file itself is not byte-identical (random names, timestamp, and
 * Lance's encoding choices); the interop suite proves LanceDB reads ours.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "cases.h"

#include "../interop/shardio.c"
#include "lance/bloom.h"
#include "lance/datafile.h"
#include "lance/dataset_manifest.h"
#include "lance/deletion.h"
#include "lance/sstable.h"
#include "lance/zone_seed.h"
#include "testutil.h"

/* ------------------------------------------------------------ fixtures */

static void vec_schema(mw_schema_t *s, bool with_vec) {
  mw_schema_init(s);
  assert_true(mw_schema_add(s, "id", MW_T_INT64, false) >= 0);
  assert_true(mw_schema_add(s, "name", MW_T_UTF8, true) >= 0);
  assert_true(mw_schema_add(s, "v", MW_T_FLOAT64, true) >= 0);
  if (with_vec) {
    int i = mw_schema_add(s, "vec", MW_T_FSL, true);
    assert_true(i >= 0);
    s->fields[i].fsl_dim = 8;
  }
  assert_true(mw_schema_add(s, "_tombstone", MW_T_BOOL, false) >= 0);
  for (size_t i = 0; i < s->n_fields; i++) s->fields[i].id = (int32_t)i;
  s->fields[0].pk_position = 1;
  assert_int_equal(mw_kvs_set(&s->fields[0].meta, "lance-schema:unenforced-primary-key:position", "1", 1), 0);
}

/* Append (id, name, v, [vec], tomb); name NULL = null. */
static void add_row(mw_batch_t *b, int64_t id, const char *name, double v, bool tomb) {
  const mw_schema_t *s = b->schema;
  size_t c = 0;
  assert_int_equal(mw_column_append_fixed(&b->cols[c++], &id, 8), 0);
  if (name) assert_int_equal(mw_column_append_bytes(&b->cols[c++], name, strlen(name)), 0);
  else assert_int_equal(mw_column_append_null(&b->cols[c], &s->fields[c]), 0), c++;
  assert_int_equal(mw_column_append_fixed(&b->cols[c++], &v, 8), 0);
  if (s->n_fields == 5) {
    float vec[8] = {1, 2, 3, 4, 5, 6, 7, (float)id};
    assert_int_equal(mw_column_append_fixed(&b->cols[c++], vec, 32), 0);
  }
  assert_int_equal(mw_column_append_bool(&b->cols[c++], tomb), 0);
  b->n_rows++;
}

static const mw_batch_t *const *one(const mw_batch_t *b) {
  static const mw_batch_t *arr[1];
  arr[0] = b;
  return arr;
}

/* ------------------------------------------------------------ unit tests */

static void test_accounting_example(void **state) {
  (void)state;
  mw_schema_t s;
  vec_schema(&s, false);
  mw_batch_t b;
  assert_int_equal(mw_batch_init(&b, &s), 0);
  for (int i = 0; i < 5; i++) add_row(&b, 100 + i, "abcdef", i * 1.5, false);
  /* memwal.md §6.3: 5-row batch of (i64, utf8 6-char, f64, bool) = 131 + 40 */
  assert_int_equal(mw_batch_lance_bytes(&b), 171);
  mw_batch_t b2;
  assert_int_equal(mw_batch_init(&b2, &s), 0);
  add_row(&b2, 1, NULL, 2.0, false);  /* a null name: +1 validity byte, 0 value bytes */
  add_row(&b2, 2, "xy", 3.0, false);
  assert_int_equal(mw_batch_lance_bytes(&b2), 40 + 16 + (1 + 8 + 2) + 16 + 1);
  const mw_batch_t *bs[2] = {&b, &b2};
  mw_sstable_t sst = {0};
  mw_err_t err = {0};
  mw_sstable_opts_t o = {.seed = 1, .timestamp_ns = 1};
  assert_int_equal(mw_sstable_build(&s, bs, 2, 3, &o, &sst, &err), 0);
  assert_int_equal(sst.generation, 3);
  assert_int_equal(sst.physical_rows, 7);
  assert_int_equal(sst.primary_key_bytes, 56);
  assert_int_equal(sst.in_memory_bytes, 171 + 40 + 16 + 11 + 16 + 1);
  assert_int_equal(sst.deleted_rows, 0);
  mw_sstable_free(&sst);
  mw_batch_free(&b);
  mw_batch_free(&b2);
  mw_schema_free(&s);
}

static void test_file_list(void **state) {
  (void)state;
  mw_schema_t s;
  vec_schema(&s, true);
  mw_batch_t b;
  assert_int_equal(mw_batch_init(&b, &s), 0);
  add_row(&b, 7, "a", 1, false);
  add_row(&b, 8, "b", 2, false);
  mw_sstable_t sst = {0};
  mw_err_t err = {0};
  mw_sstable_opts_t o = {.seed = 99, .timestamp_ns = 1};
  assert_int_equal(mw_sstable_build(&s, one(&b), 1, 12, &o, &sst, &err), 0);

  regex_t re;
  assert_int_equal(regcomp(&re, "^[0-9a-f]{8}_gen_12$", REG_EXTENDED | REG_NOSUB), 0);
  assert_int_equal(regexec(&re, sst.dir_name, 0, NULL, 0), 0);
  regfree(&re);
  /* no duplicates: no deletion file, 6 files */
  assert_int_equal(sst.n_files, 6);
  for (size_t i = 0; i < sst.n_files; i++) {
    assert_memory_equal(sst.files[i].path, sst.dir_name, strlen(sst.dir_name));
    assert_int_equal(sst.files[i].path[strlen(sst.dir_name)], '/');
    assert_true(sst.files[i].bytes.len > 0);
    assert_null(strstr(sst.files[i].path, "_deletions"));
  }
  const mw_sstable_file_t *f = mw_sstable_find(&sst, "bloom_filter.bin");
  assert_non_null(f);
  assert_int_equal(f->bytes.len, 32768);
  f = mw_sstable_find(&sst, "_versions/latest_version_hint.json");
  assert_non_null(f);
  assert_int_equal(f->bytes.len, 13);
  assert_memory_equal(f->bytes.data, "{\"version\":1}", 13);
  assert_non_null(mw_sstable_find(&sst, "_versions/18446744073709551614.manifest"));
  assert_non_null(mw_sstable_find(&sst, "_pk_index/page_data.lance"));
  assert_non_null(mw_sstable_find(&sst, "_pk_index/page_lookup.lance"));
  /* data/<24 binary digits><26 hex>.lance, a UUIDv4 underneath */
  const mw_sstable_file_t *d = NULL;
  for (size_t i = 0; i < sst.n_files; i++)
    if (strstr(sst.files[i].path, "/data/")) d = &sst.files[i];
  assert_non_null(d);
  const char *name = strstr(d->path, "/data/") + 6;
  assert_int_equal(regcomp(&re, "^[01]{24}[0-9a-f]{26}\\.lance$", REG_EXTENDED | REG_NOSUB), 0);
  assert_int_equal(regexec(&re, name, 0, NULL, 0), 0);
  regfree(&re);
  assert_int_equal(name[24 + 6], '4'); /* version nibble of byte 6 */
  assert_int_equal(d->bytes.len, sst.data_file_bytes);
  assert_memory_equal(d->bytes.data + d->bytes.len - 4, "LANC", 4);

  /* the caller may name the directory */
  mw_sstable_t named = {0};
  mw_sstable_opts_t o2 = {.dir_name = "0badc0de_gen_12", .timestamp_ns = 1};
  assert_int_equal(mw_sstable_build(&s, one(&b), 1, 12, &o2, &named, &err), 0);
  assert_string_equal(named.dir_name, "0badc0de_gen_12");
  mw_sstable_free(&named);
  mw_sstable_free(&sst);
  mw_batch_free(&b);
  mw_schema_free(&s);
}

static void test_dedup_bitmap(void **state) {
  (void)state;
  mw_schema_t s;
  vec_schema(&s, true);
  mw_batch_t b1, b2;
  assert_int_equal(mw_batch_init(&b1, &s), 0);
  assert_int_equal(mw_batch_init(&b2, &s), 0);
  /* offsets: 0:7 1:8 2:7 3:9 | 4:8 5:9(tombstone) 6:10 7:7 */
  add_row(&b1, 7, "a", 1, false);
  add_row(&b1, 8, "b", 1, false);
  add_row(&b1, 7, "c", 1, false);
  add_row(&b1, 9, "d", 1, false);
  add_row(&b2, 8, "e", 1, false);
  add_row(&b2, 9, NULL, 0, true);
  add_row(&b2, 10, "f", 1, false);
  add_row(&b2, 7, "g", 1, false);
  const mw_batch_t *bs[2] = {&b1, &b2};
  mw_sstable_t sst = {0};
  mw_err_t err = {0};
  mw_sstable_opts_t o = {.seed = 5, .timestamp_ns = 1};
  assert_int_equal(mw_sstable_build(&s, bs, 2, 1, &o, &sst, &err), 0);
  assert_int_equal(sst.physical_rows, 8);
  assert_int_equal(sst.deleted_rows, 4);
  assert_int_equal(sst.n_files, 7);
  char want[64];
  snprintf(want, sizeof want, "/_deletions/0-1-%" PRIu64 ".bin", sst.deletion_id);
  const mw_sstable_file_t *f = mw_sstable_find(&sst, want);
  assert_non_null(f);
  uint32_t *offs = NULL;
  size_t n = 0;
  assert_int_equal(mw_deletion_decode(f->bytes.data, f->bytes.len, 8, &offs, &n, &err), 0);
  assert_int_equal(n, 4);
  uint32_t expect[4] = {0, 1, 2, 3}; /* 7@0, 8@1, 7@2, 9@3 all superseded */
  assert_memory_equal(offs, expect, sizeof expect);
  free(offs);
  /* byte sample from the file comment: {0} alone */
  mw_buf_t one_off = MW_BUF_INIT;
  uint32_t zero = 0;
  assert_int_equal(mw_deletion_encode(&zero, 1, &one_off, &err), 0);
  const uint8_t sample[] = {0x3a, 0x30, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0};
  assert_int_equal(one_off.len, sizeof sample);
  assert_memory_equal(one_off.data, sample, sizeof sample);
  mw_buf_free(&one_off);
  mw_sstable_free(&sst);
  mw_batch_free(&b1);
  mw_batch_free(&b2);
  mw_schema_free(&s);
}

static void test_deterministic(void **state) {
  (void)state;
  mw_schema_t s;
  vec_schema(&s, true);
  mw_batch_t b;
  assert_int_equal(mw_batch_init(&b, &s), 0);
  for (int i = 0; i < 300; i++) add_row(&b, i % 97, i % 5 ? "x" : NULL, i, i % 11 == 0);
  mw_sstable_t a = {0}, c = {0}, d = {0};
  mw_err_t err = {0};
  mw_sstable_opts_t o = {.seed = 77, .timestamp_ns = 123456789};
  assert_int_equal(mw_sstable_build(&s, one(&b), 1, 4, &o, &a, &err), 0);
  assert_int_equal(mw_sstable_build(&s, one(&b), 1, 4, &o, &c, &err), 0);
  assert_int_equal(a.n_files, c.n_files);
  for (size_t i = 0; i < a.n_files; i++) {
    assert_string_equal(a.files[i].path, c.files[i].path);
    assert_int_equal(a.files[i].bytes.len, c.files[i].bytes.len);
    assert_memory_equal(a.files[i].bytes.data, c.files[i].bytes.data, a.files[i].bytes.len);
  }
  /* without a seed, names differ between two builds */
  mw_sstable_opts_t r = {.timestamp_ns = 1};
  assert_int_equal(mw_sstable_build(&s, one(&b), 1, 4, &r, &d, &err), 0);
  assert_string_not_equal(a.dir_name, d.dir_name);
  /* zstd changes the data file only */
  mw_sstable_t z = {0};
  mw_sstable_opts_t oz = {.seed = 77, .timestamp_ns = 123456789, .zstd = true};
  assert_int_equal(mw_sstable_build(&s, one(&b), 1, 4, &oz, &z, &err), 0);
  assert_string_equal(z.dir_name, a.dir_name);
  const mw_sstable_file_t *bz = mw_sstable_find(&z, "bloom_filter.bin"), *ba = mw_sstable_find(&a, "bloom_filter.bin");
  assert_memory_equal(bz->bytes.data, ba->bytes.data, 32768);
  mw_sstable_free(&z);
  mw_sstable_free(&a);
  mw_sstable_free(&c);
  mw_sstable_free(&d);
  mw_batch_free(&b);
  mw_schema_free(&s);
}

/* The build in parts: each part on its own thread, all at once, gives the
 * same files byte for byte as mw_sstable_build under the same seed; parts
 * run in another order too; end refuses a job a part did not finish. */
typedef struct part_arg {
  mw_sstable_job_t *job;
  int part, rc;
  mw_err_t err;
} part_arg_t;

static void *run_part(void *arg) {
  part_arg_t *a = arg;
  a->rc = mw_sstable_job_run(a->job, a->part, &a->err);
  return NULL;
}

static void same_files(const mw_sstable_t *a, const mw_sstable_t *b) {
  assert_int_equal(a->n_files, b->n_files);
  assert_string_equal(a->dir_name, b->dir_name);
  assert_int_equal(a->deleted_rows, b->deleted_rows);
  assert_int_equal(a->data_file_bytes, b->data_file_bytes);
  assert_int_equal(a->in_memory_bytes, b->in_memory_bytes);
  for (size_t i = 0; i < a->n_files; i++) {
    assert_string_equal(a->files[i].path, b->files[i].path);
    assert_int_equal(a->files[i].bytes.len, b->files[i].bytes.len);
    assert_memory_equal(a->files[i].bytes.data, b->files[i].bytes.data, a->files[i].bytes.len);
  }
}

static void test_build_in_parts(void **state) {
  (void)state;
  mw_schema_t s;
  vec_schema(&s, true);
  mw_batch_t b[3];
  const mw_batch_t *bp[3];
  for (int k = 0; k < 3; k++) {
    assert_int_equal(mw_batch_init(&b[k], &s), 0);
    for (int i = 0; i < 4000; i++) add_row(&b[k], (k * 4000 + i) % 9001, i % 7 ? "x" : NULL, i, i % 13 == 0);
    bp[k] = &b[k];
  }
  mw_err_t err = {0};
  mw_sstable_opts_t o = {.seed = 5, .timestamp_ns = 42, .zone_seeds = true};
  mw_sstable_t whole = {0}, threaded = {0}, reversed = {0};
  assert_int_equal(mw_sstable_build(&s, bp, 3, 9, &o, &whole, &err), 0);
  assert_true(whole.deleted_rows > 0); /* the deletion file is among them */

  mw_sstable_job_t *job;
  assert_int_equal(mw_sstable_job_begin(&s, bp, 3, 9, &o, &job, &err), 0);
  pthread_t th[MW_SSTABLE_PARTS];
  part_arg_t args[MW_SSTABLE_PARTS];
  for (int i = 0; i < MW_SSTABLE_PARTS; i++) {
    args[i] = (part_arg_t){.job = job, .part = i};
    assert_int_equal(pthread_create(&th[i], NULL, run_part, &args[i]), 0);
  }
  for (int i = 0; i < MW_SSTABLE_PARTS; i++) {
    assert_int_equal(pthread_join(th[i], NULL), 0);
    assert_int_equal(args[i].rc, 0);
  }
  assert_int_equal(mw_sstable_job_end(job, &threaded, &err), 0);
  same_files(&whole, &threaded);

  assert_int_equal(mw_sstable_job_begin(&s, bp, 3, 9, &o, &job, &err), 0);
  for (int i = MW_SSTABLE_PARTS; i-- > 0;) assert_int_equal(mw_sstable_job_run(job, i, &err), 0);
  assert_int_equal(mw_sstable_job_end(job, &reversed, &err), 0);
  same_files(&whole, &reversed);

  /* a part that never ran: refused, nothing left behind (ASan) */
  mw_sstable_t none = {0};
  assert_int_equal(mw_sstable_job_begin(&s, bp, 3, 9, &o, &job, &err), 0);
  assert_int_equal(mw_sstable_job_run(job, MW_SSTABLE_PART_DATA, &err), 0);
  mw_err_clear(&err);
  assert_int_equal(mw_sstable_job_end(job, &none, &err), -ECANCELED);
  assert_non_null(strstr(err.msg, "did not run"));
  assert_int_equal(none.n_files, 0);
  /* a job dropped halfway */
  assert_int_equal(mw_sstable_job_begin(&s, bp, 3, 9, &o, &job, &err), 0);
  assert_int_equal(mw_sstable_job_run(job, MW_SSTABLE_PART_KEYS, &err), 0);
  mw_sstable_job_free(job);
  /* begin checks the input like the whole build */
  assert_int_equal(mw_sstable_job_begin(&s, bp, 0, 9, &o, &job, &err), -EINVAL);
  assert_null(job);

  mw_sstable_free(&whole);
  mw_sstable_free(&threaded);
  mw_sstable_free(&reversed);
  for (int k = 0; k < 3; k++) mw_batch_free(&b[k]);
  mw_schema_free(&s);
}

static void test_bad_input(void **state) {
  (void)state;
  mw_schema_t s;
  vec_schema(&s, false);
  mw_batch_t b;
  assert_int_equal(mw_batch_init(&b, &s), 0);
  mw_sstable_t sst = {0};
  mw_err_t err = {0};
  /* no rows */
  assert_int_equal(mw_sstable_build(&s, one(&b), 1, 1, NULL, &sst, &err), -EINVAL);
  assert_int_equal(mw_sstable_build(&s, NULL, 0, 1, NULL, &sst, &err), -EINVAL);
  add_row(&b, 1, "a", 1, false);
  /* no PK */
  s.fields[0].pk_position = 0;
  mw_err_clear(&err);
  assert_int_equal(mw_sstable_build(&s, one(&b), 1, 1, NULL, &sst, &err), -EINVAL);
  assert_non_null(strstr(err.msg, "primary-key"));
  s.fields[0].pk_position = 1;
  /* _tombstone not last / nullable */
  s.fields[3].nullable = true;
  mw_err_clear(&err);
  assert_int_equal(mw_sstable_build(&s, one(&b), 1, 1, NULL, &sst, &err), -EINVAL);
  assert_non_null(strstr(err.msg, "_tombstone"));
  s.fields[3].nullable = false;
  /* a bad caller-given name */
  mw_sstable_opts_t o = {.dir_name = "a/b"};
  assert_int_equal(mw_sstable_build(&s, one(&b), 1, 1, &o, &sst, &err), -EINVAL);
  assert_int_equal(sst.n_files, 0);
  mw_batch_free(&b);
  mw_schema_free(&s);
}

static void test_vector_items_and_composite_pk(void **state) {
  (void)state;
  mw_schema_t s;
  vec_schema(&s, true);
  mw_batch_t b;
  assert_int_equal(mw_batch_init(&b, &s), 0);
  add_row(&b, 1, "a", 1, false);
  add_row(&b, 2, "b", 2, false);
  /* row 1's vector is null, and (as arrow-js writes it) so are its items */
  mw_column_t *vc = &b.cols[3];
  memset(vc->values.data + 32, 0, 32);
  vc->validity.len = 0;
  assert_non_null(mw_buf_extend(&vc->validity, 1));
  vc->validity.data[0] = 0x01;
  vc->null_count = 1;
  assert_non_null(mw_buf_extend(&vc->item_validity, 2));
  vc->item_validity.data[0] = 0xFF;
  vc->item_validity.data[1] = 0x00;
  vc->item_null_count = 8;
  assert_int_equal(mw_batch_validate(&b), 0);
  mw_sstable_t sst = {0};
  mw_err_t err = {0};
  assert_int_equal(mw_sstable_build(&s, one(&b), 1, 1, NULL, &sst, &err), 0);
  /* the input is untouched; the file holds row 0's vector and a null */
  assert_int_equal(vc->item_null_count, 8);
  assert_int_equal(vc->item_validity.len, 2);
  const mw_sstable_file_t *d = NULL;
  for (size_t i = 0; i < sst.n_files; i++)
    if (strstr(sst.files[i].path, "/data/")) d = &sst.files[i];
  assert_non_null(d);
  mw_datafile_t f;
  mw_batch_t got;
  assert_int_equal(mw_datafile_open(&f, d->bytes.data, d->bytes.len, NULL, &err), 0);
  assert_int_equal(mw_datafile_read_batch(&f, &got, &err), 0);
  assert_int_equal(got.n_rows, 2);
  assert_true(mw_column_valid(&got.cols[3], 0));
  assert_false(mw_column_valid(&got.cols[3], 1));
  assert_memory_equal(got.cols[3].values.data, vc->values.data, 32);
  mw_batch_free(&got);
  mw_datafile_close(&f);
  mw_sstable_free(&sst);
  /* a null item inside a valid vector is refused, not silently dropped */
  vc->item_validity.data[0] = 0xF7;
  vc->item_null_count = 9;
  mw_err_clear(&err);
  assert_int_equal(mw_sstable_build(&s, one(&b), 1, 1, NULL, &sst, &err), -ENOTSUP);
  assert_int_equal(sst.n_files, 0);
  vc->item_validity.data[0] = 0xFF;
  vc->item_null_count = 8;
  /* composite primary keys: LanceDB 0.39 refuses them, so do we */
  s.fields[2].pk_position = 2;
  mw_err_clear(&err);
  assert_int_equal(mw_sstable_build(&s, one(&b), 1, 1, NULL, &sst, &err), -ENOTSUP);
  assert_non_null(strstr(err.msg, "composite"));
  mw_batch_free(&b);
  mw_schema_free(&s);
}

static void test_write_dir(void **state) {
  (void)state;
  mw_schema_t s;
  vec_schema(&s, true);
  mw_batch_t b;
  assert_int_equal(mw_batch_init(&b, &s), 0);
  add_row(&b, 1, "a", 1, false);
  add_row(&b, 1, "b", 2, false);
  mw_sstable_t sst = {0};
  mw_err_t err = {0};
  assert_int_equal(mw_sstable_build(&s, one(&b), 1, 2, NULL, &sst, &err), 0);
  char *dir = tu_mkdtemp("sstable");
  assert_int_equal(si_sstable_write_dir(&sst, dir, &err), 0);
  for (size_t i = 0; i < sst.n_files; i++) {
    char *p = tu_strf("%s/%s", dir, sst.files[i].path);
    size_t n;
    uint8_t *got = tu_read_file(p, &n);
    assert_non_null(got);
    assert_int_equal(n, sst.files[i].bytes.len);
    assert_memory_equal(got, sst.files[i].bytes.data, n);
    free(got);
    free(p);
  }
  assert_int_equal(si_sstable_write_dir(&sst, dir, &err), -EEXIST);
  tu_rmtree(dir);
  free(dir);
  mw_sstable_free(&sst);
  mw_batch_free(&b);
  mw_schema_free(&s);
}

/* ------------------------------------------------------------ golden */

static uint8_t *read_rel(const char *dir, const char *rel, size_t *n) {
  char *p = tu_strf("%s/%s", dir, rel);
  uint8_t *d = tu_read_file(p, n);
  if (d == NULL) fail_msg("cannot read %s", p);
  free(p);
  return d;
}

/* Row-by-row equality of column `c` of two decoded batches. */
static void assert_columns_equal(const mw_field_t *f, const mw_column_t *a, const mw_column_t *b,
                                 const char *what) {
  if (a->length != b->length) fail_msg("%s %s: %" PRId64 " vs %" PRId64 " rows", what, f->name, a->length, b->length);
  size_t w = mw_type_width(f);
  for (int64_t r = 0; r < a->length; r++) {
    bool va = mw_column_valid(a, r), vb = mw_column_valid(b, r);
    if (va != vb) fail_msg("%s %s row %" PRId64 ": validity %d vs %d", what, f->name, r, va, vb);
    if (!va) continue;
    bool same;
    if (f->type == MW_T_BOOL) {
      same = mw_bit_get(a->values.data, r) == mw_bit_get(b->values.data, r);
    } else if (f->type == MW_T_UTF8 || f->type == MW_T_BINARY) {
      size_t na, nb;
      const uint8_t *pa = mw_column_bytes(a, r, &na), *pb = mw_column_bytes(b, r, &nb);
      same = na == nb && memcmp(pa, pb, na) == 0;
    } else {
      same = memcmp(a->values.data + (size_t)r * w, b->values.data + (size_t)r * w, w) == 0;
    }
    if (!same) fail_msg("%s %s row %" PRId64 ": values differ", what, f->name, r);
  }
}

static void assert_files_decode_equal(const uint8_t *pa, size_t na, const uint8_t *pb, size_t nb,
                                      const char *what) {
  mw_datafile_t fa, fb;
  mw_err_t err = {0};
  if (mw_datafile_open(&fa, pa, na, NULL, &err) < 0) fail_msg("%s (ours): %s", what, err.msg);
  if (mw_datafile_open(&fb, pb, nb, NULL, &err) < 0) fail_msg("%s (Lance's): %s", what, err.msg);
  mw_batch_t ba, bb;
  if (mw_datafile_read_batch(&fa, &ba, &err) < 0) fail_msg("%s (ours): %s", what, err.msg);
  if (mw_datafile_read_batch(&fb, &bb, &err) < 0) fail_msg("%s (Lance's): %s", what, err.msg);
  assert_int_equal(fa.schema.n_fields, fb.schema.n_fields);
  assert_int_equal(ba.n_rows, bb.n_rows);
  for (size_t c = 0; c < fa.schema.n_fields; c++) {
    assert_string_equal(fa.schema.fields[c].name, fb.schema.fields[c].name);
    assert_int_equal(fa.schema.fields[c].id, fb.schema.fields[c].id);
    assert_columns_equal(&fa.schema.fields[c], &ba.cols[c], &bb.cols[c], what);
  }
  mw_batch_free(&ba);
  mw_batch_free(&bb);
  mw_datafile_close(&fa);
  mw_datafile_close(&fb);
}

/* Decode a whole SSTable manifest file, blank what is random by design
 * (data-file name and size, deletion id, timestamp) and re-encode it. */
static void normalized_manifest(const uint8_t *p, size_t n, mw_buf_t *out, const char *what) {
  mw_err_t err = {0};
  mw_section_t sec;
  uint64_t pos;
  if (mw_dmanifest_unframe(p, n, &sec, &pos, &err) < 0) fail_msg("%s: %s", what, err.msg);
  mw_dmanifest_t m = {0};
  if (mw_dmanifest_decode(sec.data, sec.len, &m, &err) < 0) fail_msg("%s: %s", what, err.msg);
  assert_int_equal(m.pb->version, 1);
  assert_int_equal(m.pb->n_fragments, 1);
  Lance__Table__DataFragment *fr = m.pb->fragments[0];
  assert_int_equal(fr->n_files, 1);
  static char blank[] = "x.lance";
  char *orig = fr->files[0]->path; /* owned by the unpacked message: restored below */
  fr->files[0]->path = blank;
  fr->files[0]->file_size_bytes = 0;
  if (fr->deletion_file) fr->deletion_file->id = 0;
  if (m.pb->timestamp) m.pb->timestamp->seconds = m.pb->timestamp->nanos = 0;
  assert_int_equal(mw_dmanifest_encode(&m, out), 0);
  fr->files[0]->path = orig;
  mw_dmanifest_free(&m);
}

static int golden_checked;

static void golden_one(const char *shard_dir, const si_coverage_t *cv, si_wal_entry_t *wal) {
  mw_err_t err = {0};
  mw_schema_t schema;
  const mw_batch_t **bs = NULL;
  size_t nb = 0;
  bool have = false;
  for (uint64_t p = cv->after + 1; p <= cv->last; p++) {
    si_wal_entry_t *e = &wal[p - 1];
    if (e->s.n_batches == 0) continue;
    if (!have) {
      assert_int_equal(si_sstable_schema(&e->s.schema, &schema), 0);
      have = true;
    }
    bs = realloc(bs, (nb + e->s.n_batches) * sizeof *bs);
    for (size_t i = 0; i < e->s.n_batches; i++) {
      e->s.batches[i].schema = &schema;
      bs[nb++] = &e->s.batches[i];
    }
  }
  assert_true(have);
  mw_sstable_t sst = {0};
  if (mw_sstable_build(&schema, bs, nb, cv->generation, NULL, &sst, &err) < 0)
    fail_msg("%s gen %" PRIu64 ": %s", shard_dir, cv->generation, err.msg);
  /* accounting = the shard manifest's entry */
  assert_int_equal(sst.physical_rows, cv->ref.physical_rows);
  assert_int_equal(sst.primary_key_bytes, cv->ref.primary_key_bytes);
  if (sst.in_memory_bytes != cv->ref.in_memory_bytes)
    fail_msg("%s/%s: in_memory_bytes %" PRIu64 ", Lance %" PRIu64, shard_dir, cv->ref.path,
             sst.in_memory_bytes, cv->ref.in_memory_bytes);

  char *lance = tu_strf("%s/%s", shard_dir, cv->ref.path);
  size_t n;
  /* bloom_filter.bin: byte-identical */
  uint8_t *bloom = read_rel(lance, "bloom_filter.bin", &n);
  const mw_sstable_file_t *f = mw_sstable_find(&sst, "bloom_filter.bin");
  assert_int_equal(n, f->bytes.len);
  if (memcmp(bloom, f->bytes.data, n) != 0) fail_msg("%s: bloom_filter.bin differs", lance);
  free(bloom);
  /* deletion bitmap: byte-identical (names differ: random id) */
  char *ddir = tu_strf("%s/_deletions", lance);
  char **names;
  size_t nd = tu_list_dir(ddir, ".bin", &names);
  if (nd == 0) {
    assert_int_equal(sst.deleted_rows, 0);
    for (size_t i = 0; i < sst.n_files; i++) assert_null(strstr(sst.files[i].path, "/_deletions/"));
  } else {
    assert_int_equal(nd, 1);
    char *rel = tu_strf("_deletions/%s", names[0]);
    uint8_t *del = read_rel(lance, rel, &n);
    const mw_sstable_file_t *ours = NULL;
    for (size_t i = 0; i < sst.n_files; i++)
      if (strstr(sst.files[i].path, "/_deletions/0-1-")) ours = &sst.files[i];
    assert_non_null(ours);
    assert_int_equal(n, ours->bytes.len);
    if (memcmp(del, ours->bytes.data, n) != 0) fail_msg("%s: %s differs", lance, rel);
    uint64_t card;
    assert_int_equal(mw_deletion_cardinality(del, n, &card, &err), 0);
    assert_int_equal(card, sst.deleted_rows);
    free(del);
    free(rel);
  }
  tu_free_names(names, nd);
  free(ddir);
  /* data file and page_data decode to the same rows */
  char *datadir = tu_strf("%s/data", lance);
  nd = tu_list_dir(datadir, ".lance", &names);
  assert_int_equal(nd, 1);
  char *rel = tu_strf("data/%s", names[0]);
  uint8_t *data = read_rel(lance, rel, &n);
  const mw_sstable_file_t *ours = NULL;
  for (size_t i = 0; i < sst.n_files; i++)
    if (strstr(sst.files[i].path, "/data/")) ours = &sst.files[i];
  assert_files_decode_equal(ours->bytes.data, ours->bytes.len, data, n, rel);
  free(data);
  free(rel);
  tu_free_names(names, nd);
  free(datadir);
  /* dataset manifest: identical once the random parts are blanked */
  uint8_t *man = read_rel(lance, "_versions/18446744073709551614.manifest", &n);
  f = mw_sstable_find(&sst, "_versions/18446744073709551614.manifest");
  mw_buf_t ma = MW_BUF_INIT, mb = MW_BUF_INIT;
  normalized_manifest(f->bytes.data, f->bytes.len, &ma, "our manifest");
  normalized_manifest(man, n, &mb, "Lance's manifest");
  assert_int_equal(ma.len, mb.len);
  if (memcmp(ma.data, mb.data, ma.len) != 0) fail_msg("%s: manifests differ beyond names/sizes/ids/time", lance);
  mw_buf_free(&ma);
  mw_buf_free(&mb);
  free(man);
  uint8_t *pd = read_rel(lance, "_pk_index/page_data.lance", &n);
  f = mw_sstable_find(&sst, "_pk_index/page_data.lance");
  assert_files_decode_equal(f->bytes.data, f->bytes.len, pd, n, "_pk_index/page_data.lance");
  free(pd);
  uint8_t *pl = read_rel(lance, "_pk_index/page_lookup.lance", &n);
  f = mw_sstable_find(&sst, "_pk_index/page_lookup.lance");
  assert_files_decode_equal(f->bytes.data, f->bytes.len, pl, n, "_pk_index/page_lookup.lance");
  free(pl);

  free(lance);
  mw_sstable_free(&sst);
  free(bs);
  /* the batches go back to their own stream's schema before ours dies */
  for (uint64_t p = cv->after + 1; p <= cv->last; p++)
    for (size_t i = 0; i < wal[p - 1].s.n_batches; i++) wal[p - 1].s.batches[i].schema = &wal[p - 1].s.schema;
  mw_schema_free(&schema);
  golden_checked++;
}

static void test_golden_vectors(void **state) {
  (void)state;
  const char *vec = tu_vectors_dir();
  char **names;
  size_t nv = tu_list_dir(vec, NULL, &names);
  for (size_t v = 0; v < nv; v++) {
    char *table = tu_strf("%s/%s/t.lance", vec, names[v]);
    struct stat st;
    if (stat(table, &st) != 0) { free(table); continue; }
    char **shards;
    size_t ns;
    assert_int_equal(si_list_shards(table, &shards, &ns), 0);
    for (size_t s = 0; s < ns; s++) {
      mw_err_t err = {0};
      si_coverage_t *cov;
      size_t nc;
      if (si_coverage(shards[s], &cov, &nc, &err) < 0) fail_msg("%s", err.msg);
      uint64_t last;
      si_wal_last(shards[s], &last);
      si_wal_entry_t *wal = calloc(last ? last : 1, sizeof *wal);
      for (uint64_t p = 1; p <= last; p++)
        if (si_wal_read(shards[s], p, &wal[p - 1], &err) < 0) fail_msg("%s", err.msg);
      for (size_t i = 0; i < nc; i++) golden_one(shards[s], &cov[i], wal);
      for (uint64_t p = 1; p <= last; p++) si_wal_entry_free(&wal[p - 1]);
      free(wal);
      si_coverage_free(cov, nc);
    }
    si_free_strings(shards, ns);
    free(table);
  }
  tu_free_names(names, nv);
  /* 1 + 3 + 5 + 0 + 4 SSTables in the vectors */
  assert_int_equal(golden_checked, 13);
}

/* Zone write seeds v1 (opts.zone_seeds): one seed per column, located by
 * lance.seed.<column>, describing the data file's rows exactly, and
 * FLAG_ZONE_WRITE_SEEDS in both feature flags of the SSTable's manifest.
 * Without the option the data file and manifest are as before. */
static void seeded_build(bool seeds, mw_sstable_t *sst, mw_schema_t *s, mw_batch_t *b) {
  vec_schema(s, true);
  assert_int_equal(mw_batch_init(b, s), 0);
  for (int i = 0; i < 1000; i++) add_row(b, i % 700, i % 9 ? "n" : NULL, i % 5 ? i * 0.5 : -0.0, i % 17 == 0);
  mw_err_t err = {0};
  mw_sstable_opts_t o = {.seed = 5, .timestamp_ns = 1, .zone_seeds = seeds, .seed_rows_per_zone = 128};
  if (mw_sstable_build(s, one(b), 1, 2, &o, sst, &err) < 0) fail_msg("%s", err.msg);
}

static void manifest_flags(const mw_sstable_t *sst, uint64_t *r, uint64_t *w) {
  const mw_sstable_file_t *mf = mw_sstable_find(sst, ".manifest");
  assert_non_null(mf);
  mw_table_meta_t t;
  assert_int_equal(mw_table_meta_read_ex(mf->bytes.data, mf->bytes.len, MW_FLAG_ZONE_WRITE_SEEDS, &t, NULL), 0);
  *r = t.reader_feature_flags;
  *w = t.writer_feature_flags;
  mw_table_meta_free(&t);
}

static void test_zone_seeds(void **state) {
  (void)state;
  mw_schema_t s;
  mw_batch_t b;
  mw_sstable_t sst = {0};
  seeded_build(true, &sst, &s, &b);
  const mw_sstable_file_t *df = mw_sstable_find(&sst, ".lance");
  while (df != NULL && strstr(df->path, "/data/") == NULL) df++;
  assert_non_null(df);
  mw_datafile_t f;
  mw_err_t err = {0};
  assert_int_equal(mw_datafile_open(&f, df->bytes.data, df->bytes.len, NULL, &err), 0);
  assert_int_equal(f.n_global_buffers, 1 + s.n_fields);
  for (size_t c = 0; c < s.n_fields; c++) {
    char key[64];
    snprintf(key, sizeof key, "lance.seed.%s", s.fields[c].name);
    const mw_kv_t *kv = mw_kvs_get(&f.schema.meta, key);
    assert_non_null(kv);
    mw_seed_locator_t loc;
    assert_int_equal(mw_seed_locator_parse(kv->value, kv->value_len, &loc, NULL), 0);
    assert_int_equal(loc.buffer_index, c + 1);
    assert_int_equal(loc.rows_per_zone, 128);
    const uint8_t *p;
    size_t n;
    assert_int_equal(mw_datafile_global_buffer(&f, loc.buffer_index, &p, &n, NULL), 0);
    mw_seed_t seed;
    if (mw_seed_decode(p, n, &f.schema.fields[c], 128, f.n_rows, &seed, &err) < 0) fail_msg("%s: %s", key, err.msg);
    assert_int_equal(seed.version, 1);
    assert_int_equal(seed.n_zones, 8); /* 1000 rows in zones of 128: the last holds 104 */
    assert_int_equal(seed.zone_length[7], 104);
    mw_column_t col = {0};
    assert_int_equal(mw_datafile_read_column(&f, c, &col, NULL), 0);
    if (mw_seed_check_column(&seed, &f.schema.fields[c], &col, &err) < 0) fail_msg("%s: %s", key, err.msg);
    mw_buf_free(&col.values), mw_buf_free(&col.validity), mw_buf_free(&col.offsets), mw_buf_free(&col.item_validity);
    mw_seed_free(&seed);
  }
  mw_datafile_close(&f);
  uint64_t r, w;
  manifest_flags(&sst, &r, &w);
  assert_int_equal(r & MW_FLAG_ZONE_WRITE_SEEDS, MW_FLAG_ZONE_WRITE_SEEDS);
  assert_int_equal(w & MW_FLAG_ZONE_WRITE_SEEDS, MW_FLAG_ZONE_WRITE_SEEDS);
  /* a reader that does not accept the flag refuses the manifest, naming it */
  const mw_sstable_file_t *mf = mw_sstable_find(&sst, ".manifest");
  mw_table_meta_t t;
  mw_err_clear(&err);
  assert_int_equal(mw_table_meta_read(mf->bytes.data, mf->bytes.len, &t, &err), -ENOTSUP);
  assert_non_null(strstr(err.msg, "FLAG_ZONE_WRITE_SEEDS"));
  mw_table_meta_free(&t);
  mw_sstable_free(&sst);
  mw_batch_free(&b);
  mw_schema_free(&s);
  /* off: no seeds, no flag, same rows */
  seeded_build(false, &sst, &s, &b);
  df = mw_sstable_find(&sst, ".lance");
  while (df != NULL && strstr(df->path, "/data/") == NULL) df++;
  assert_int_equal(mw_datafile_open(&f, df->bytes.data, df->bytes.len, NULL, &err), 0);
  assert_int_equal(f.n_global_buffers, 1);
  assert_int_equal(f.schema.meta.n, 0);
  mw_datafile_close(&f);
  manifest_flags(&sst, &r, &w);
  assert_int_equal(r, 0);
  assert_int_equal(w, 0);
  mw_sstable_free(&sst);
  mw_batch_free(&b);
  mw_schema_free(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_accounting_example),
      cmocka_unit_test(test_file_list),
      cmocka_unit_test(test_dedup_bitmap),
      cmocka_unit_test(test_deterministic),
      cmocka_unit_test(test_build_in_parts),
      cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_vector_items_and_composite_pk),
      cmocka_unit_test(test_write_dir),
      cmocka_unit_test(test_zone_seeds),
      cmocka_unit_test(test_golden_vectors),
  };
  return tu_run_group(tests, NULL, NULL);
}
