/*
 * test_dataset_manifest.c — Lance dataset manifests (lance-files.md §4) and
 * the base-table metadata memwald reads (memwal.md §8).
 *
 * Golden: every _versions/<n>.manifest under $MW_VECTORS (base tables and
 * SSTables) is unframed, decoded and re-encoded to identical bytes; every
 * SSTable manifest is rebuilt from scratch by mw_sst_manifest_encode to
 * identical bytes; every base table's MemWAL index entry, index section,
 * CreateIndex transaction and whole file are re-encoded from our structs to
 * identical bytes.
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

#include "lance/dataset_manifest.h"
#include "lance/shard_manifest.h"
#include "testutil.h"

static const char *const TABLES[] = {"unsharded-small", "unsharded-epochs", "unsharded-flushes",
                                     "unsharded-unflushed", "bucket4-small"};
#define N_TABLES (sizeof TABLES / sizeof TABLES[0])

static uint8_t *read_latest_base(const char *table, size_t *len, uint64_t *version) {
  char *dir = tu_strf("%s/%s/t.lance/_versions", tu_vectors_dir(), table);
  char **names;
  size_t n = tu_list_dir(dir, NULL, &names);
  size_t idx;
  mw_err_t err = {0};
  if (mw_dmanifest_latest(names, n, version, &idx, &err) != 0) fail_msg("%s: %s", dir, err.msg);
  char *path = tu_strf("%s/%s", dir, names[idx]);
  uint8_t *b = tu_read_file(path, len);
  assert_non_null(b);
  free(path);
  tu_free_names(names, n);
  free(dir);
  return b;
}

static void test_names(void **state) {
  (void)state;
  char s[MW_DMANIFEST_NAME_BYTES];
  assert_int_equal(mw_dmanifest_name(1, s, sizeof s), 29);
  assert_string_equal(s, "18446744073709551614.manifest");
  assert_int_equal(mw_dmanifest_name(3, s, sizeof s), 29);
  assert_string_equal(s, "18446744073709551612.manifest");
  assert_int_equal(mw_dmanifest_name(UINT64_MAX - 5, s, sizeof s), 29);
  assert_string_equal(s, "00000000000000000005.manifest");
  assert_int_equal(mw_dmanifest_name(0, s, sizeof s), -EINVAL);
  assert_int_equal(mw_dmanifest_name(1, s, 29), -ENOSPC);
  uint64_t v;
  bool v2;
  assert_int_equal(mw_dmanifest_name_parse("18446744073709551614.manifest", &v, &v2), 0);
  assert_int_equal(v, 1);
  assert_true(v2);
  assert_int_equal(mw_dmanifest_name_parse("00000000000000000005.manifest", &v, &v2), 0);
  assert_true(v == UINT64_MAX - 5);
  assert_int_equal(mw_dmanifest_name_parse("7.manifest", &v, &v2), 0);
  assert_int_equal(v, 7);
  assert_false(v2);
  static const char *bad[] = {"latest_version_hint.json", ".manifest", "0.manifest",
                              "18446744073709551615.manifest", "18446744073709551616.manifest",
                              "184467440737095516140.manifest", "1x.manifest", "7.manifest.tmp",
                              "-1.manifest", "99999999999999999999.manifest"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (mw_dmanifest_name_parse(bad[i], &v, &v2) != -EINVAL) fail_msg("accepted %s", bad[i]);
  char *mixed[] = {"3.manifest", "18446744073709551614.manifest"};
  mw_err_t err = {0};
  assert_int_equal(mw_dmanifest_latest(mixed, 2, &v, NULL, &err), -EBADMSG);
  char *none[] = {"latest_version_hint.json"};
  assert_int_equal(mw_dmanifest_latest(none, 1, &v, NULL, NULL), -ENOENT);
  char *v1s[] = {"2.manifest", "10.manifest", "9.manifest", "junk"};
  size_t idx;
  assert_int_equal(mw_dmanifest_latest(v1s, 4, &v, &idx, NULL), 0);
  assert_int_equal(v, 10);
  assert_int_equal(idx, 1);
  /* Vectors: the latest base version is 3 in every table. */
  for (size_t i = 0; i < N_TABLES; i++) {
    size_t len;
    uint8_t *b = read_latest_base(TABLES[i], &len, &v);
    assert_int_equal(v, 3);
    free(b);
  }
}

/* Split the bytes before the manifest into u32-len sections. */
static size_t split_sections(const uint8_t *p, uint64_t mpos, mw_section_t *secs, size_t max) {
  size_t k = 0;
  uint64_t off = 0;
  while (off < mpos) {
    assert_true(k < max);
    assert_int_equal(mw_dmanifest_section_at(p, mpos + 4, off, mpos, &secs[k], NULL), 0);
    off += 4 + secs[k].len;
    k++;
  }
  assert_true(off == mpos);
  return k;
}

static void test_golden_roundtrip(void **state) {
  (void)state;
  char **paths;
  size_t n = tu_find_files(tu_vectors_dir(), ".manifest", &paths);
  size_t checked = 0, sst = 0;
  for (size_t i = 0; i < n; i++) {
    if (strstr(paths[i], "/_versions/") == NULL) continue;
    size_t len;
    uint8_t *b = tu_read_file(paths[i], &len);
    assert_non_null(b);
    mw_section_t msg, secs[MW_DMANIFEST_MAX_SECTIONS];
    uint64_t mpos;
    mw_err_t err = {0};
    if (mw_dmanifest_unframe(b, len, &msg, &mpos, &err) != 0) fail_msg("%s: %s", paths[i], err.msg);
    size_t ns = split_sections(b, mpos, secs, MW_DMANIFEST_MAX_SECTIONS);
    mw_dmanifest_t m;
    if (mw_dmanifest_decode(msg.data, msg.len, &m, &err) != 0) fail_msg("%s: %s", paths[i], err.msg);
    uint64_t v;
    const char *base = strrchr(paths[i], '/') + 1;
    assert_int_equal(mw_dmanifest_name_parse(base, &v, NULL), 0);
    assert_int_equal(m.pb->version, v);
    assert_true(m.has_max_fragment_id);
    mw_buf_t out = MW_BUF_INIT;
    assert_int_equal(mw_dmanifest_encode(&m, &out), 0);
    assert_int_equal(out.len, msg.len);
    assert_memory_equal(out.data, msg.data, msg.len);
    mw_buf_t file = MW_BUF_INIT;
    assert_int_equal(mw_dmanifest_file_encode(secs, ns, out.data, out.len, &file), 0);
    assert_int_equal(file.len, len);
    assert_memory_equal(file.data, b, len);
    if (strstr(paths[i], "/_mem_wal/")) {
      sst++;
      assert_int_equal(ns, 0);
      assert_int_equal(m.pb->version, 1);
      assert_int_equal(m.pb->reader_feature_flags, 0);
    }
    mw_buf_free(&file);
    mw_buf_free(&out);
    mw_dmanifest_free(&m);
    free(b);
    checked++;
  }
  printf("# dataset manifests re-encoded byte-identical: %zu (%zu SSTable, %zu base)\n",
                checked, sst, checked - sst);
  assert_true(sst >= 10);
  assert_int_equal(checked - sst, 3 * N_TABLES);
  tu_free_names(paths, n);
}

/* Rebuild every SSTable manifest from its parameters alone. */
static void test_sstable_builder(void **state) {
  (void)state;
  char **paths;
  size_t n = tu_find_files(tu_vectors_dir(), "18446744073709551614.manifest", &paths);
  size_t built = 0, with_del = 0;
  for (size_t i = 0; i < n; i++) {
    if (strstr(paths[i], "/_mem_wal/") == NULL) continue;
    size_t len;
    uint8_t *b = tu_read_file(paths[i], &len);
    mw_section_t msg;
    assert_int_equal(mw_dmanifest_unframe(b, len, &msg, NULL, NULL), 0);
    mw_dmanifest_t m;
    assert_int_equal(mw_dmanifest_decode(msg.data, msg.len, &m, NULL), 0);
    const Lance__Table__Manifest *pb = m.pb;
    assert_int_equal(pb->n_fragments, 1);
    const Lance__Table__DataFragment *fr = pb->fragments[0];
    assert_int_equal(fr->n_files, 1);
    const Lance__Table__DataFile *df = fr->files[0];
    assert_int_equal(df->n_fields, df->n_column_indices);
    assert_string_equal(pb->fields[pb->n_fields - 1]->name, "_tombstone");
    mw_sst_manifest_params_t p = {
        .fields = pb->fields,
        .n_fields = pb->n_fields,
        .data_file = df->path,
        .field_ids = df->fields,
        .column_indices = df->column_indices,
        .n_columns = df->n_fields,
        .file_size_bytes = df->file_size_bytes,
        .physical_rows = fr->physical_rows,
        .has_deletion = fr->deletion_file != NULL,
        .deletion_id = fr->deletion_file ? fr->deletion_file->id : 0,
        .num_deleted_rows = fr->deletion_file ? fr->deletion_file->num_deleted_rows : 0,
        .timestamp_seconds = pb->timestamp->seconds,
        .timestamp_nanos = pb->timestamp->nanos,
    };
    with_del += p.has_deletion;
    mw_buf_t out = MW_BUF_INIT;
    mw_err_t err = {0};
    assert_int_equal(mw_sst_manifest_encode(&p, &out, &err), 0);
    assert_int_equal(out.len, len);
    assert_memory_equal(out.data, b, len);
    mw_buf_free(&out);
    mw_dmanifest_free(&m);
    free(b);
    built++;
  }
  printf("# SSTable manifests rebuilt byte-identical: %zu (%zu with deletion file)\n", built,
                with_del);
  assert_true(built >= 10);
  assert_true(with_del >= 1);
  tu_free_names(paths, n);
  mw_sst_manifest_params_t bad = {0};
  mw_buf_t out = MW_BUF_INIT;
  assert_int_equal(mw_sst_manifest_encode(&bad, &out, NULL), -EINVAL);
  assert_int_equal(out.len, 0);
}

/* The SSTable manifest of unsharded-small rebuilt from the base table's
 * schema (+ _tombstone) via lance_schema: fields as the flusher writes them. */
static void test_sstable_from_schema(void **state) {
  (void)state;
  size_t len;
  uint64_t v;
  uint8_t *b = read_latest_base("unsharded-small", &len, &v);
  mw_table_meta_t t;
  mw_err_t err = {0};
  assert_int_equal(mw_table_meta_read(b, len, &t, &err), 0);
  mw_schema_t s;
  mw_schema_init(&s);
  assert_int_equal(mw_schema_copy(&s, &t.schema), 0);
  int ti = mw_schema_add(&s, "_tombstone", MW_T_BOOL, false);
  assert_true(ti >= 0);
  s.fields[ti].id = 4;
  Lance__File__Field **fields;
  size_t nf;
  assert_int_equal(mw_lance_fields_from_schema(&s, &fields, &nf), 0);
  char *p = tu_strf("%s/unsharded-small/t.lance/_mem_wal/aa48498d-ac91-59e2-8452-69f46010ace2/"
                    "aa4a1b97_gen_1/_versions/18446744073709551614.manifest", tu_vectors_dir());
  size_t glen;
  uint8_t *g = tu_read_file(p, &glen);
  assert_non_null(g);
  mw_section_t msg;
  mw_dmanifest_t m;
  assert_int_equal(mw_dmanifest_unframe(g, glen, &msg, NULL, NULL), 0);
  assert_int_equal(mw_dmanifest_decode(msg.data, msg.len, &m, NULL), 0);
  const Lance__Table__DataFragment *fr = m.pb->fragments[0];
  const int32_t cols[5] = {0, 1, 2, 3, 4};
  mw_sst_manifest_params_t prm = {
      .fields = fields, .n_fields = nf, .data_file = fr->files[0]->path,
      .field_ids = cols, .column_indices = cols, .n_columns = 5,
      .file_size_bytes = fr->files[0]->file_size_bytes, .physical_rows = fr->physical_rows,
      .has_deletion = true, .deletion_id = fr->deletion_file->id,
      .num_deleted_rows = fr->deletion_file->num_deleted_rows,
      .timestamp_seconds = m.pb->timestamp->seconds, .timestamp_nanos = m.pb->timestamp->nanos};
  mw_buf_t out = MW_BUF_INIT;
  assert_int_equal(mw_sst_manifest_encode(&prm, &out, NULL), 0);
  assert_int_equal(out.len, glen);
  assert_memory_equal(out.data, g, glen);
  /* Without a deletion file: the fragment has none and the rest decodes. */
  prm.has_deletion = false;
  mw_buf_reset(&out);
  assert_int_equal(mw_sst_manifest_encode(&prm, &out, NULL), 0);
  mw_dmanifest_t m2;
  assert_int_equal(mw_dmanifest_unframe(out.data, out.len, &msg, NULL, NULL), 0);
  assert_int_equal(mw_dmanifest_decode(msg.data, msg.len, &m2, NULL), 0);
  assert_null(m2.pb->fragments[0]->deletion_file);
  assert_true(m2.has_max_fragment_id);
  assert_int_equal(m2.pb->version, 1);
  assert_int_equal(m2.pb->fragments[0]->physical_rows, fr->physical_rows);
  mw_dmanifest_free(&m2);
  mw_buf_free(&out);
  mw_dmanifest_free(&m);
  mw_lance_fields_free(fields, nf);
  mw_schema_free(&s);
  mw_table_meta_free(&t);
  free(g);
  free(p);
  free(b);
}

static void test_base_meta(void **state) {
  (void)state;
  for (size_t i = 0; i < N_TABLES; i++) {
    size_t len;
    uint64_t v;
    uint8_t *b = read_latest_base(TABLES[i], &len, &v);
    mw_table_meta_t t;
    mw_err_t err = {0};
    if (mw_table_meta_read(b, len, &t, &err) != 0) fail_msg("%s: %s", TABLES[i], err.msg);
    assert_int_equal(t.version, 3);
    assert_int_equal(t.reader_feature_flags, 0);
    assert_int_equal(t.writer_feature_flags, 0);
    assert_string_equal(t.data_storage_version, "2.2");
    assert_int_equal(t.manifest.pb->n_fields, 4);
    int id_idx = mw_table_meta_field(&t, t.pk_field_ids[0]);
    assert_true(id_idx >= 0);
    assert_string_equal(t.manifest.pb->fields[id_idx]->name, "id");
    assert_int_equal(t.n_pk, 1);
    assert_int_equal(mw_table_meta_field(&t, 99), -ENOENT);
    assert_int_equal(t.schema.n_fields, 4);
    assert_string_equal(t.schema.fields[0].name, "id");
    assert_int_equal(t.schema.fields[0].type, MW_T_INT64);
    assert_int_equal(t.schema.fields[0].pk_position, 1);
    assert_false(t.schema.fields[0].nullable);
    assert_int_equal(t.schema.fields[3].type, MW_T_FSL);
    assert_int_equal(t.schema.fields[3].fsl_dim, 8);
    assert_true(t.has_memwal);
    const mw_memwal_index_t *x = &t.memwal;
    assert_int_equal(x->dataset_version, 2);
    assert_true(x->created_at_ms > 1700000000000ull);
    assert_true(x->has_spec);
    assert_int_equal(x->spec_id, 1);
    assert_string_equal(x->sharding_field_id, "bucket");
    assert_string_equal(x->result_type, "int32");
    assert_int_equal(x->n_maintained_indexes, 0);
    assert_int_equal(x->n_compacted, 0);
    if (strcmp(TABLES[i], "bucket4-small") == 0) {
      assert_int_equal(x->kind, MW_SHARDING_BUCKET);
      assert_int_equal(x->num_buckets, 4);
      assert_int_equal(x->num_shards, 4);
      assert_int_equal(x->source_field_id, t.manifest.pb->fields[id_idx]->id);
      assert_int_equal(x->parameters.n, 1);
      assert_string_equal(x->parameters.items[0].key, "num_buckets");
    } else {
      assert_int_equal(x->kind, MW_SHARDING_UNSHARDED);
      assert_int_equal(x->num_shards, 1);
      assert_int_equal(x->num_buckets, 0);
      assert_int_equal(x->source_field_id, -1);
    }
    mw_table_meta_free(&t);
    free(b);
    /* Versions 1 and 2 carry no MemWAL index; v1 has no primary key yet. */
    for (uint64_t ver = 1; ver <= 2; ver++) {
      char name[MW_DMANIFEST_NAME_BYTES];
      assert_true(mw_dmanifest_name(ver, name, sizeof name) > 0);
      char *p = tu_strf("%s/%s/t.lance/_versions/%s", tu_vectors_dir(), TABLES[i], name);
      b = tu_read_file(p, &len);
      assert_non_null(b);
      assert_int_equal(mw_table_meta_read(b, len, &t, NULL), 0);
      assert_int_equal(t.version, ver);
      assert_false(t.has_memwal);
      assert_int_equal(t.n_pk, ver == 1 ? 0 : 1);
      mw_table_meta_free(&t);
      free(b);
      free(p);
    }
  }
}

/* Raw field 2 (uuid text) of a Transaction message. */
static char *txn_uuid(const mw_section_t *txn) {
  size_t pos = 0;
  mw_pb_field_t f;
  while (mw_pb_next(txn->data, txn->len, &pos, &f, 0, NULL) > 0)
    if (f.tag == 2 && f.wire == 2) return strndup((const char *)f.data, f.len);
  return NULL;
}

static void test_base_writer_roundtrip(void **state) {
  (void)state;
  for (size_t i = 0; i < N_TABLES; i++) {
    size_t len;
    uint64_t v;
    uint8_t *b = read_latest_base(TABLES[i], &len, &v);
    mw_table_meta_t t;
    assert_int_equal(mw_table_meta_read(b, len, &t, NULL), 0);
    mw_section_t msg, idx_sec, txn_sec;
    uint64_t mpos;
    assert_int_equal(mw_dmanifest_unframe(b, len, &msg, &mpos, NULL), 0);
    assert_true(t.manifest.has_index_section);
    assert_true(t.manifest.has_transaction_section);
    assert_int_equal(t.manifest.pb->index_section, 0);
    assert_int_equal(mw_dmanifest_section_at(b, len, 0, mpos, &idx_sec, NULL), 0);
    assert_int_equal(mw_dmanifest_section_at(b, len, t.manifest.pb->transaction_section, mpos,
                                             &txn_sec, NULL), 0);
    /* IndexMetadata from our MemWAL struct == Lance's bytes. */
    mw_buf_t entry = MW_BUF_INIT, sec = MW_BUF_INIT, txn = MW_BUF_INIT, file = MW_BUF_INIT;
    assert_int_equal(mw_memwal_index_entry_encode(&t.memwal, &entry), 0);
    mw_section_t ent = {entry.data, entry.len};
    assert_int_equal(mw_index_section_encode(&ent, 1, &sec), 0);
    assert_int_equal(sec.len, idx_sec.len);
    assert_memory_equal(sec.data, idx_sec.data, sec.len);
    /* The generic entry codec agrees too. */
    mw_buf_t generic = MW_BUF_INIT;
    assert_int_equal(t.indexes.n, 1);
    assert_int_equal(mw_index_entry_encode(&t.indexes.items[0], &generic), 0);
    assert_int_equal(generic.len, entry.len);
    assert_memory_equal(generic.data, entry.data, entry.len);
    /* CreateIndex transaction section. */
    char *uuid = txn_uuid(&txn_sec);
    assert_non_null(uuid);
    assert_int_equal(mw_create_index_txn_encode(t.memwal.dataset_version, uuid, entry.data,
                                                entry.len, &txn), 0);
    assert_int_equal(txn.len, txn_sec.len);
    assert_memory_equal(txn.data, txn_sec.data, txn.len);
    /* Whole file. */
    assert_int_equal(mw_base_manifest_file_encode(&t.manifest, sec.data, sec.len, txn.data, txn.len,
                                                  &file), 0);
    assert_int_equal(file.len, len);
    assert_memory_equal(file.data, b, len);
    free(uuid);
    mw_buf_free(&generic);
    mw_buf_free(&entry);
    mw_buf_free(&sec);
    mw_buf_free(&txn);
    mw_buf_free(&file);
    mw_table_meta_free(&t);
    free(b);
  }
}

/* Build an index with every list filled; decode gives it back. */
static void test_memwal_struct_roundtrip(void **state) {
  (void)state;
  mw_memwal_index_t x;
  mw_memwal_index_init(&x);
  for (int k = 0; k < 16; k++) x.uuid[k] = (uint8_t)k;
  x.dataset_version = 7;
  x.created_at_ms = 1796080549658ull;
  x.num_shards = 8;
  x.has_spec = true;
  x.spec_id = 1;
  x.sharding_field_id = strdup("bucket");
  x.kind = MW_SHARDING_BUCKET;
  x.n_source_ids = 1;
  x.source_ids[0] = 0;
  x.result_type = strdup("int32");
  assert_int_equal(mw_kvs_set(&x.parameters, "num_buckets", "8", 1), 0);
  x.maintained_indexes = calloc(2, sizeof(char *));
  x.maintained_indexes[0] = strdup("vec_idx");
  x.n_maintained_indexes = 1;
  x.compacted = calloc(1, sizeof *x.compacted);
  x.compacted[0].shard_id[0] = 0xaa;
  x.compacted[0].generation = 3;
  x.n_compacted = 1;
  assert_int_equal(mw_kvs_set(&x.writer_config_defaults, "max_wal_flush_interval_ms", "50", 2), 0);
  assert_int_equal(mw_kvs_set(&x.writer_config_defaults, "durable_write", "false", 5), 0);
  mw_buf_t e = MW_BUF_INIT;
  assert_int_equal(mw_memwal_index_entry_encode(&x, &e), 0);
  mw_buf_t sec = MW_BUF_INIT;
  mw_section_t ent = {e.data, e.len};
  assert_int_equal(mw_index_section_encode(&ent, 1, &sec), 0);
  mw_index_section_t s;
  assert_int_equal(mw_index_section_decode(sec.data, sec.len, &s, NULL), 0);
  assert_int_equal(s.n, 1);
  assert_true(s.items[0].has_index_version);
  assert_string_equal(s.items[0].pb->name, MW_MEMWAL_INDEX_NAME);
  mw_memwal_index_t y;
  assert_int_equal(mw_memwal_index_decode(s.items[0].pb, &y, NULL), 0);
  assert_memory_equal(y.uuid, x.uuid, 16);
  assert_int_equal(y.dataset_version, 7);
  assert_int_equal(y.kind, MW_SHARDING_BUCKET);
  assert_int_equal(y.num_buckets, 8);
  assert_int_equal(y.source_field_id, 0);
  assert_int_equal(y.n_maintained_indexes, 1);
  assert_string_equal(y.maintained_indexes[0], "vec_idx");
  assert_int_equal(y.n_compacted, 1);
  assert_int_equal(y.compacted[0].generation, 3);
  assert_int_equal(y.compacted[0].shard_id[0], 0xaa);
  assert_int_equal(y.writer_config_defaults.n, 2);
  assert_string_equal(y.writer_config_defaults.items[0].key, "max_wal_flush_interval_ms");
  assert_string_equal((char *)y.writer_config_defaults.items[0].value, "50");
  assert_string_equal(y.writer_config_defaults.items[1].key, "durable_write");
  mw_buf_t e2 = MW_BUF_INIT;
  assert_int_equal(mw_memwal_index_entry_encode(&y, &e2), 0);
  assert_int_equal(e2.len, e.len);
  assert_memory_equal(e2.data, e.data, e.len);
  /* Identity kind and a refused transform. */
  y.kind = MW_SHARDING_IDENTITY;
  mw_kvs_free(&y.parameters);
  mw_buf_reset(&e2);
  assert_int_equal(mw_memwal_index_entry_encode(&y, &e2), 0);
  mw_index_section_free(&s);
  sec.len = 0;
  ent = (mw_section_t){e2.data, e2.len};
  assert_int_equal(mw_index_section_encode(&ent, 1, &sec), 0);
  assert_int_equal(mw_index_section_decode(sec.data, sec.len, &s, NULL), 0);
  mw_memwal_index_t z;
  assert_int_equal(mw_memwal_index_decode(s.items[0].pb, &z, NULL), 0);
  assert_int_equal(z.kind, MW_SHARDING_IDENTITY);
  assert_int_equal(z.num_buckets, 0);
  mw_memwal_index_free(&z);
  /* Bucket without num_buckets -> EBADMSG. */
  y.kind = MW_SHARDING_BUCKET;
  mw_buf_reset(&e2);
  assert_int_equal(mw_memwal_index_entry_encode(&y, &e2), 0);
  mw_index_section_free(&s);
  sec.len = 0;
  ent = (mw_section_t){e2.data, e2.len};
  assert_int_equal(mw_index_section_encode(&ent, 1, &sec), 0);
  assert_int_equal(mw_index_section_decode(sec.data, sec.len, &s, NULL), 0);
  mw_err_t err = {0};
  assert_int_equal(mw_memwal_index_decode(s.items[0].pb, &z, &err), -EBADMSG);
  assert_non_null(strstr(err.msg, "num_buckets"));
  mw_memwal_index_free(&z);
  mw_index_section_free(&s);
  mw_memwal_index_free(&y);
  mw_memwal_index_free(&x);
  mw_buf_free(&e);
  mw_buf_free(&e2);
  mw_buf_free(&sec);
}

/* Re-frame the unsharded base manifest with changed flags. */
static void with_flags(uint64_t reader, uint64_t writer, int want_rc, const char *needle) {
  size_t len;
  uint64_t v;
  uint8_t *b = read_latest_base("unsharded-small", &len, &v);
  mw_table_meta_t t;
  assert_int_equal(mw_table_meta_read(b, len, &t, NULL), 0);
  mw_section_t msg, idx, txn;
  uint64_t mpos;
  assert_int_equal(mw_dmanifest_unframe(b, len, &msg, &mpos, NULL), 0);
  assert_int_equal(mw_dmanifest_section_at(b, len, 0, mpos, &idx, NULL), 0);
  assert_int_equal(mw_dmanifest_section_at(b, len, t.manifest.pb->transaction_section, mpos, &txn,
                                           NULL), 0);
  t.manifest.pb->reader_feature_flags = reader;
  t.manifest.pb->writer_feature_flags = writer;
  mw_buf_t file = MW_BUF_INIT;
  assert_int_equal(mw_base_manifest_file_encode(&t.manifest, idx.data, idx.len, txn.data, txn.len,
                                                &file), 0);
  mw_table_meta_t u;
  mw_err_t err = {0};
  assert_int_equal(mw_table_meta_read(file.data, file.len, &u, &err), want_rc);
  if (needle && strstr(err.msg, needle) == NULL) fail_msg("'%s' lacks '%s'", err.msg, needle);
  if (want_rc == 0) {
    assert_true(u.reader_feature_flags == reader);
    assert_true(u.has_memwal);
  }
  mw_table_meta_free(&u);
  mw_table_meta_free(&t);
  mw_buf_free(&file);
  free(b);
}

static void test_feature_flags(void **state) {
  (void)state;
  with_flags(0, 0, 0, NULL);
  with_flags(1, 1, 0, NULL); /* deletion files: honoured */
  with_flags(2, 0, -ENOTSUP, "reader feature flag bit 1");
  with_flags(0, 8, -ENOTSUP, "writer feature flag bit 3");
  with_flags(1 | (1u << 6), 0, -ENOTSUP, "bit 6");
  with_flags(0, (uint64_t)1 << 16, -ENOTSUP, "bit 16");
  with_flags((uint64_t)1 << 63, 0, -ENOTSUP, "bit 63");
}

static void test_framing_errors(void **state) {
  (void)state;
  size_t len;
  uint64_t v;
  uint8_t *b = read_latest_base("bucket4-small", &len, &v);
  mw_section_t msg;
  mw_err_t err = {0};
  b[len - 1] ^= 1;
  assert_int_equal(mw_dmanifest_unframe(b, len, &msg, NULL, &err), -EBADMSG);
  assert_non_null(strstr(err.msg, "magic"));
  b[len - 1] ^= 1;
  uint64_t pos = mw_load_u64le(b + len - 16);
  mw_store_u64le(b + len - 16, pos + 1);
  mw_err_clear(&err);
  assert_int_equal(mw_dmanifest_unframe(b, len, &msg, NULL, &err), -EBADMSG);
  mw_store_u64le(b + len - 16, (uint64_t)len);
  mw_err_clear(&err);
  assert_int_equal(mw_dmanifest_unframe(b, len, &msg, NULL, &err), -EBADMSG);
  assert_non_null(strstr(err.msg, "past the footer"));
  mw_store_u64le(b + len - 16, pos);
  assert_int_equal(mw_dmanifest_unframe(b, len, &msg, NULL, NULL), 0);
  /* Index section that runs into the manifest. */
  mw_section_t s;
  assert_int_equal(mw_dmanifest_section_at(b, len, pos - 2, pos, &s, NULL), -EBADMSG);
  uint32_t l0 = mw_load_u32le(b);
  mw_store_u32le(b, (uint32_t)pos);
  assert_int_equal(mw_dmanifest_section_at(b, len, 0, pos, &s, NULL), -EBADMSG);
  mw_table_meta_t t;
  assert_int_equal(mw_table_meta_read(b, len, &t, NULL), -EBADMSG);
  mw_table_meta_free(&t);
  mw_store_u32le(b, l0);
  /* Every truncation, and byte flips everywhere: never a crash. */
  for (size_t k = 0; k <= len; k++) {
    int rc = mw_table_meta_read(b, k, &t, NULL);
    assert_true(k == len ? rc == 0 : rc < 0);
    mw_table_meta_free(&t);
  }
  size_t ok = 0;
  for (size_t k = 0; k < len; k++) {
    for (unsigned x = 1; x < 256; x <<= 1) {
      b[k] ^= (uint8_t)x;
      int rc = mw_table_meta_read(b, len, &t, NULL);
      assert_true(rc == 0 || rc == -EBADMSG || rc == -ENOTSUP);
      ok += rc == 0;
      mw_table_meta_free(&t);
      b[k] ^= (uint8_t)x;
    }
  }
  assert_true(ok > 0);
  free(b);
}

/* Found by fuzz_dataset_manifest: writer_version (field 13) holding a tag
 * varint `80 00` (field number 0). protobuf-c accepted it but re-encoded it
 * as bytes it refuses; decode must refuse it up front. */
static void test_nested_field_zero_refused(void **state) {
  (void)state;
  static const uint8_t bad[] = {0x6a, 0x05, 0x80, 0x00, 0xf5, 0xff, 0x20};
  mw_dmanifest_t m;
  mw_err_t err = {0};
  assert_int_equal(mw_dmanifest_decode(bad, sizeof bad, &m, &err), -EBADMSG);
  assert_non_null(strstr(err.msg, "nested"));
  mw_dmanifest_free(&m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_names),
      cmocka_unit_test(test_golden_roundtrip),
      cmocka_unit_test(test_sstable_builder),
      cmocka_unit_test(test_sstable_from_schema),
      cmocka_unit_test(test_base_meta),
      cmocka_unit_test(test_base_writer_roundtrip),
      cmocka_unit_test(test_memwal_struct_roundtrip),
      cmocka_unit_test(test_feature_flags),
      cmocka_unit_test(test_framing_errors),
      cmocka_unit_test(test_nested_field_zero_refused),
  };
  return tu_run_group_name("dataset_manifest", tests, NULL, NULL);
}
