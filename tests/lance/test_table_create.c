/*
 * test_table_create.c — table bootstrap (src/lance/table_create.h) against
 * tables LanceDB 0.39.0 itself wrote.
 *
 * Golden: tests/lance/data/bootstrap/{unsharded,bucket,identity}.lance were made
 * by `createEmptyTable("t", schema with the PK position metadata on id)` then
 * `setLsmWriteSpec(...)` (schema id:int64 not null PK, region:string, v:double;
 * specs unsharded, bucket(id,4), identity(region) with writer default
 * max_wal_flush_interval_ms=50). We read their uuids and times back, rebuild
 * all five files from the config text and compare every byte.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uuid/uuid.h>

#include <cmocka.h>

#include "cases.h"

#include "lance/dataset_manifest.h"
#include "lance/schema_text.h"
#include "lance/table_create.h"
#include "testutil.h"

static char *data_path(const char *rel) {
  const char *root = getenv("MW_SOURCE_ROOT");
  char *p = NULL;
  assert_true(asprintf(&p, "%s/tests/lance/data/bootstrap/%s", root ? root : ".", rel) > 0);
  return p;
}

static void make_schema(mw_schema_t *s, const char *spec_text, mw_shard_spec_t *spec) {
  mw_err_t err = {0};
  assert_int_equal(mw_schema_text_parse("id:int64 not null, region:string, v:double", s, &err), 0);
  assert_int_equal(mw_schema_pk_text_apply(s, "id", &err), 0);
  mw_schema_ids_assign(s);
  assert_int_equal(mw_shard_spec_text_parse(spec_text, s, spec, &err), 0);
}

static uint8_t *read_rel(const char *table, const char *rel, size_t *len) {
  char *dir = data_path(table), *p = NULL;
  assert_true(asprintf(&p, "%s/%s", dir, rel) > 0);
  uint8_t *b = tu_read_file(p, len);
  assert_non_null(b);
  free(dir);
  free(p);
  return b;
}

static void manifest_time(const uint8_t *file, size_t n, int64_t *s, int32_t *ns) {
  mw_section_t m;
  uint64_t pos;
  assert_int_equal(mw_dmanifest_unframe(file, n, &m, &pos, NULL), 0);
  mw_dmanifest_t d;
  assert_int_equal(mw_dmanifest_decode(m.data, m.len, &d, NULL), 0);
  assert_non_null(d.pb->timestamp);
  *s = d.pb->timestamp->seconds;
  *ns = d.pb->timestamp->nanos;
  assert_false(d.has_max_fragment_id);
  mw_dmanifest_free(&d);
}

static void golden(const char *table, const char *spec_text, const mw_kvs_t *wcd) {
  mw_schema_t s;
  mw_shard_spec_t spec;
  make_schema(&s, spec_text, &spec);
  mw_table_create_params_t p = {.schema = &s, .spec = &spec, .writer_config_defaults = wcd};
  /* uuids from the transaction file names */
  char *dir = data_path(table), *tdir = NULL;
  assert_true(asprintf(&tdir, "%s/_transactions", dir) > 0);
  char **names;
  size_t n = tu_list_dir(tdir, ".txn", &names);
  assert_int_equal(n, 2);
  for (size_t i = 0; i < n; i++) {
    char u[37];
    memcpy(u, names[i] + 2, 36);
    u[36] = 0;
    assert_int_equal(uuid_parse(u, names[i][0] == '0' ? p.txn1_uuid : p.txn2_uuid), 0);
  }
  tu_free_names(names, n);
  /* times and the index uuid from the manifests */
  size_t l1, l2;
  uint8_t *m1 = read_rel(table, "_versions/18446744073709551614.manifest", &l1);
  uint8_t *m2 = read_rel(table, "_versions/18446744073709551613.manifest", &l2);
  manifest_time(m1, l1, &p.v1_seconds, &p.v1_nanos);
  manifest_time(m2, l2, &p.v2_seconds, &p.v2_nanos);
  mw_table_meta_t t;
  mw_err_t err = {0};
  assert_int_equal(mw_table_meta_read(m2, l2, &t, &err), 0);
  assert_true(t.has_memwal);
  memcpy(p.index_uuid, t.memwal.uuid, 16);
  p.created_at_ms = t.memwal.created_at_ms;
  mw_table_meta_free(&t);

  mw_table_files_t f;
  assert_int_equal(mw_table_create_encode(&p, &f, &err), 0);
  assert_int_equal(f.n, 5);
  for (size_t i = 0; i < f.n; i++) {
    size_t len;
    uint8_t *want = read_rel(table, f.files[i].path, &len);
    if (len != f.files[i].bytes.len || memcmp(want, f.files[i].bytes.data, len) != 0)
      fail_msg("%s/%s differs (%zu vs %zu bytes)", table, f.files[i].path, f.files[i].bytes.len,
               len);
    free(want);
  }
  printf("# # %s: 5 files byte-identical to LanceDB's\n", table);
  mw_table_files_free(&f);
  free(m1);
  free(m2);
  free(tdir);
  free(dir);
  mw_schema_free(&s);
}

static void test_golden_unsharded(void **state) {
  (void)state;
  golden("unsharded.lance", "unsharded", NULL);
}

static void test_golden_bucket(void **state) {
  (void)state;
  golden("bucket.lance", "bucket(id,4)", NULL);
}

static void test_golden_identity(void **state) {
  (void)state;
  mw_kvs_t w = {0};
  assert_int_equal(mw_kvs_set(&w, "max_wal_flush_interval_ms", "50", 2), 0);
  golden("identity.lance", "identity(region)", &w);
  mw_kvs_free(&w);
}

/* Random identities, times "now", and the result reads back through the
 * daemon's own base-table reader with the spec intact. */
static void test_random_readback(void **state) {
  (void)state;
  mw_schema_t s;
  mw_shard_spec_t spec;
  make_schema(&s, "bucket(id,16)", &spec);
  mw_table_create_params_t p = {.schema = &s, .spec = &spec};
  mw_table_files_t a, b;
  mw_err_t err = {0};
  assert_int_equal(mw_table_create_encode(&p, &a, &err), 0);
  assert_int_equal(mw_table_create_encode(&p, &b, &err), 0);
  assert_string_not_equal(a.files[0].path, b.files[0].path); /* fresh v4 uuids */
  assert_string_equal(a.files[4].path, "_versions/latest_version_hint.json");
  assert_memory_equal(a.files[4].bytes.data, "{\"version\":2}", 13);
  mw_table_meta_t t;
  assert_int_equal(mw_table_meta_read(a.files[3].bytes.data, a.files[3].bytes.len, &t, &err), 0);
  assert_int_equal(t.version, 2);
  assert_true(t.has_memwal);
  assert_int_equal(t.memwal.kind, MW_SHARDING_BUCKET);
  assert_int_equal(t.memwal.num_buckets, 16);
  assert_int_equal(t.memwal.num_shards, 16);
  assert_int_equal(t.memwal.dataset_version, 1);
  assert_int_equal(t.memwal.source_field_id, 0);
  assert_int_equal((t.memwal.uuid[6] >> 4), 4); /* v4 */
  assert_true(t.memwal.created_at_ms > 1700000000000ull);
  assert_int_equal(t.n_pk, 1);
  assert_int_equal(t.pk_field_ids[0], 0);
  mw_table_meta_free(&t);
  /* version 1 has no index */
  assert_int_equal(mw_table_meta_read(a.files[1].bytes.data, a.files[1].bytes.len, &t, &err), 0);
  assert_int_equal(t.version, 1);
  assert_false(t.has_memwal);
  mw_table_meta_free(&t);
  mw_table_files_free(&a);
  mw_table_files_free(&b);
  mw_schema_free(&s);
}

static void test_refusals(void **state) {
  (void)state;
  mw_schema_t s;
  mw_shard_spec_t spec;
  mw_err_t err = {0};
  make_schema(&s, "identity(region)", &spec);
  mw_table_files_t f;
  /* identity on a double column */
  mw_shard_spec_t bad = {.kind = MW_SHARD_IDENTITY, .column = 2};
  mw_table_create_params_t p = {.schema = &s, .spec = &bad};
  assert_int_equal(mw_table_create_encode(&p, &f, &err), -ENOTSUP);
  assert_non_null(strstr(err.msg, "identity(v)"));
  mw_table_files_free(&f);
  /* column out of range, zero buckets */
  mw_err_clear(&err);
  bad = (mw_shard_spec_t){.kind = MW_SHARD_BUCKET, .column = 7, .num_buckets = 4};
  assert_int_equal(mw_table_create_encode(&p, &f, &err), -EINVAL);
  mw_table_files_free(&f);
  bad = (mw_shard_spec_t){.kind = MW_SHARD_BUCKET, .column = 0, .num_buckets = 0};
  assert_int_equal(mw_table_create_encode(&p, &f, NULL), -EINVAL);
  mw_table_files_free(&f);
  mw_schema_free(&s);
  /* no primary key */
  assert_int_equal(mw_schema_text_parse("id:int64 not null", &s, &err), 0);
  mw_shard_spec_t u = {.kind = MW_SHARD_UNSHARDED, .column = -1};
  p = (mw_table_create_params_t){.schema = &s, .spec = &u};
  mw_err_clear(&err);
  assert_int_equal(mw_table_create_encode(&p, &f, &err), -EINVAL);
  assert_non_null(strstr(err.msg, "primary key"));
  mw_table_files_free(&f);
  mw_schema_free(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_golden_unsharded), cmocka_unit_test(test_golden_bucket),
      cmocka_unit_test(test_golden_identity), cmocka_unit_test(test_random_readback),
      cmocka_unit_test(test_refusals),
  };
  return tu_run_group(tests, NULL, NULL);
}
