/*
 * test_base_update.c — the compaction commit of a base table (base_update.h).
 *
 * Golden: tests/lance/data/compact/lsm_update/t.lance was written by
 * LanceDB 0.39.0 (tools/gen-compact-fixtures.mjs). Its version 4 is
 * `Table.update(id in [10, 14))`, an Update transaction on version 3. Given
 * version 3 and the plan read back from version 4 (the deletion file, the
 * new fragment, the transaction's uuid and the timestamp), our builder must
 * write version 4's manifest file and its .txn byte for byte.
 *
 * Then a compaction plan on top of the newest version (6): the result
 * decodes, carries the new fragment ids, the deletion flag, a rewritten
 * MemWAL entry (fresh uuid, dataset_version 7, compacted generation), and
 * a second plan that does not advance the generation is refused -ESTALE.
 * Bad plans are refused with their reasons.
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
#include <uuid/uuid.h>

#include "lance/base_update.h"
#include "lance/route.h"
#include "lance/shard_manifest.h"
#include "testutil.h"

static uint8_t *version_file(uint64_t v, size_t *len) {
  char name[MW_DMANIFEST_NAME_BYTES];
  assert_true(mw_dmanifest_name(v, name, sizeof name) > 0);
  char *path = tu_strf("%s/tests/lance/data/compact/lsm_update/t.lance/_versions/%s",
                       getenv("MW_SOURCE_ROOT"), name);
  uint8_t *p = tu_read_file(path, len);
  if (p == NULL) fail_msg("cannot read %s", path);
  free(path);
  return p;
}

static void meta_of(uint64_t v, mw_table_meta_t *t, uint8_t **bytes, size_t *len) {
  *bytes = version_file(v, len);
  mw_err_t err = {0};
  int rc = mw_table_meta_read(*bytes, *len, t, &err);
  if (rc < 0) fail_msg("version %llu: %s", (unsigned long long)v, err.msg);
  t->version = v;
}

static void test_golden_update(void **state) {
  (void)state;
  mw_table_meta_t v3, v4;
  uint8_t *b3, *b4;
  size_t n3, n4;
  meta_of(3, &v3, &b3, &n3);
  meta_of(4, &v4, &b4, &n4);
  const Lance__Table__Manifest *m4 = v4.manifest.pb;
  assert_int_equal(m4->n_fragments, 2);
  const Lance__Table__DataFragment *f0 = m4->fragments[0], *f1 = m4->fragments[1];
  assert_non_null(f0->deletion_file);
  mw_bu_deletion_t del = {.fragment_id = f0->id,
                          .kind = (mw_deletion_kind_t)f0->deletion_file->file_type,
                          .id = f0->deletion_file->id,
                          .num_deleted_rows = f0->deletion_file->num_deleted_rows};
  assert_int_equal(del.kind, MW_DELETION_ARROW); /* what LanceDB writes */
  assert_int_equal(del.num_deleted_rows, 4);
  const Lance__Table__DataFile *df = f1->files[0];
  mw_bu_fragment_t frag = {.data_file = df->path, .file_size_bytes = df->file_size_bytes,
                           .physical_rows = f1->physical_rows, .field_ids = df->fields,
                           .column_indices = df->column_indices, .n_columns = df->n_fields};
  uint32_t preserve[] = {1}; /* LanceDB's update names the updated column */
  mw_base_update_t u = {.deletions = &del, .n_deletions = 1, .fragments = &frag, .n_fragments = 1,
                        .preserve_fields = preserve, .n_preserve_fields = 1,
                        .timestamp_ns = m4->timestamp->seconds * 1000000000 + m4->timestamp->nanos};
  /* transaction_file = "3-<uuid>.txn" */
  char uuid_text[37];
  assert_int_equal(sscanf(m4->transaction_file, "3-%36[0-9a-f-].txn", uuid_text), 1);
  assert_int_equal(uuid_parse(uuid_text, u.txn_uuid), 0);
  mw_base_commit_t c;
  mw_err_t err = {0};
  int rc = mw_base_update_build(&v3, &u, &c, &err);
  if (rc < 0) fail_msg("%s", err.msg);
  assert_int_equal(c.version, 4);
  assert_int_equal(c.first_fragment_id, 1);
  assert_string_equal(c.txn_name, m4->transaction_file);
  assert_int_equal(c.live_rows, 2000);
  char *txn_path = tu_strf("%s/tests/lance/data/compact/lsm_update/t.lance/_transactions/%s",
                           getenv("MW_SOURCE_ROOT"), c.txn_name);
  size_t tlen;
  uint8_t *txn = tu_read_file(txn_path, &tlen);
  assert_non_null(txn);
  assert_int_equal(c.txn.len, tlen);
  assert_memory_equal(c.txn.data, txn, tlen);
  assert_int_equal(c.manifest.len, n4);
  assert_memory_equal(c.manifest.data, b4, n4);
  print_message("# base_update: LanceDB's update commit (version 4, %zu + %zu bytes) rebuilt byte for byte\n",
                n4, tlen);
  free(txn);
  free(txn_path);
  mw_base_commit_free(&c);
  mw_table_meta_free(&v3);
  mw_table_meta_free(&v4);
  free(b3);
  free(b4);
}

/* Top-level field `tag` of a protobuf message (the first one), or NULL. */
static const uint8_t *pb_field(const uint8_t *p, size_t n, uint32_t tag, mw_pb_field_t *out) {
  size_t pos = 0;
  while (mw_pb_next(p, n, &pos, out, 0, NULL) > 0)
    if (out->tag == tag) return out->data ? out->data : p;
  return NULL;
}

static size_t pb_count(const uint8_t *p, size_t n, uint32_t tag) {
  size_t pos = 0, k = 0;
  mw_pb_field_t f;
  while (mw_pb_next(p, n, &pos, &f, 0, NULL) > 0) k += f.tag == tag;
  return k;
}

static void test_compaction_commit(void **state) {
  (void)state;
  mw_table_meta_t v6;
  uint8_t *b6;
  size_t n6;
  meta_of(6, &v6, &b6, &n6);
  assert_true(v6.has_memwal);
  assert_int_equal(v6.memwal.n_compacted, 0);
  const Lance__Table__Manifest *m6 = v6.manifest.pb;
  assert_int_equal(m6->n_fragments, 3); /* the base, update's, add's */
  uint8_t shard[16];
  mw_shard_uuid_unsharded(shard);
  int32_t ids[] = {0, 1}, cols[] = {0, 1};
  mw_bu_fragment_t frag = {.data_file = "ours.lance", .file_size_bytes = 1234, .physical_rows = 10,
                           .field_ids = ids, .column_indices = cols, .n_columns = 2};
  /* fragment 0 already has 604 deleted rows: the union adds 6 */
  mw_bu_deletion_t del = {.fragment_id = 0, .kind = MW_DELETION_BITMAP, .id = 77,
                          .num_deleted_rows = 610};
  uint64_t gone = m6->fragments[2]->id; /* the appended one-row fragment */
  mw_compacted_sstable_t cs = {.generation = 5};
  memcpy(cs.shard_id, shard, 16);
  mw_base_update_t u = {.deletions = &del, .n_deletions = 1, .removed = &gone, .n_removed = 1,
                        .fragments = &frag, .n_fragments = 1, .compacted = &cs, .n_compacted = 1,
                        .timestamp_ns = 1700000000123456789, .created_at_ms = 1700000000123};
  mw_base_commit_t c;
  mw_err_t err = {0};
  int rc = mw_base_update_build(&v6, &u, &c, &err);
  if (rc < 0) fail_msg("%s", err.msg);
  assert_int_equal(c.version, 7);
  assert_int_equal(c.first_fragment_id, 3); /* max_fragment_id 2 + 1 */
  assert_int_equal(c.live_rows, (2000 - 610) + 4 + 10);
  mw_table_meta_t v7;
  rc = mw_table_meta_read(c.manifest.data, c.manifest.len, &v7, &err);
  if (rc < 0) fail_msg("our manifest: %s", err.msg);
  const Lance__Table__Manifest *m7 = v7.manifest.pb;
  assert_int_equal(m7->version, 7);
  assert_int_equal(m7->n_fragments, 3);
  assert_int_equal(m7->fragments[0]->id, 0);
  assert_int_equal(m7->fragments[0]->deletion_file->file_type,
                   LANCE__TABLE__DELETION_FILE__DELETION_FILE_TYPE__BITMAP);
  assert_int_equal(m7->fragments[0]->deletion_file->read_version, 6);
  assert_int_equal(m7->fragments[0]->deletion_file->id, 77);
  assert_int_equal(m7->fragments[1]->id, m6->fragments[1]->id);
  assert_int_equal(m7->fragments[2]->id, 3);
  assert_string_equal(m7->fragments[2]->files[0]->path, "ours.lance");
  assert_int_equal(m7->max_fragment_id, 3);
  assert_int_equal(m7->reader_feature_flags, MW_FLAG_DELETION_FILES);
  assert_int_equal(m7->writer_feature_flags, MW_FLAG_DELETION_FILES);
  assert_string_equal(m7->transaction_file, c.txn_name);
  assert_int_equal(m7->timestamp->seconds, 1700000000);
  assert_int_equal(m7->timestamp->nanos, 123456789);
  /* the MemWAL entry: rewritten; everything else carried */
  assert_true(v7.has_memwal);
  assert_int_equal(v7.memwal.n_compacted, 1);
  assert_memory_equal(v7.memwal.compacted[0].shard_id, shard, 16);
  assert_int_equal(v7.memwal.compacted[0].generation, 5);
  assert_int_equal(v7.memwal.dataset_version, 7);
  assert_int_equal(v7.memwal.created_at_ms, 1700000000123);
  assert_memory_not_equal(v7.memwal.uuid, v6.memwal.uuid, 16);
  assert_int_equal(v7.memwal.kind, v6.memwal.kind);
  assert_int_equal(v7.memwal.num_shards, v6.memwal.num_shards);
  assert_int_equal(v7.indexes.n, v6.indexes.n);
  /* the inline transaction section is the .txn */
  mw_section_t sec;
  size_t mpos = 0;
  mw_section_t msg;
  assert_int_equal(mw_dmanifest_unframe(c.manifest.data, c.manifest.len, &msg, &mpos, NULL), 0);
  assert_int_equal(mw_dmanifest_section_at(c.manifest.data, c.manifest.len, m7->transaction_section,
                                           mpos, &sec, NULL), 0);
  assert_int_equal(sec.len, c.txn.len);
  assert_memory_equal(sec.data, c.txn.data, c.txn.len);
  /* Transaction{1: 6, 2: uuid, 108: Update{1: [gone], 2: frag 0, 3: new, 5: {shard, 5}}} */
  mw_pb_field_t f;
  assert_non_null(pb_field(c.txn.data, c.txn.len, 1, &f));
  assert_int_equal(f.value, 6);
  assert_non_null(pb_field(c.txn.data, c.txn.len, 108, &f));
  const uint8_t *up = f.data;
  size_t up_len = f.len;
  assert_int_equal(pb_count(up, up_len, 1), 1);
  assert_int_equal(pb_count(up, up_len, 2), 1);
  assert_int_equal(pb_count(up, up_len, 3), 1);
  assert_int_equal(pb_count(up, up_len, 5), 1);
  assert_int_equal(pb_count(up, up_len, 6), 0);
  assert_non_null(pb_field(up, up_len, 3, &f));
  Lance__Table__DataFragment *nf = lance__table__data_fragment__unpack(NULL, f.len, f.data);
  assert_non_null(nf);
  assert_int_equal(nf->id, 0); /* unassigned in the transaction, as Lance writes it */
  assert_int_equal(nf->physical_rows, 10);
  lance__table__data_fragment__free_unpacked(nf, NULL);

  /* the same generation again (another compactor won): refused */
  mw_base_commit_t again;
  mw_err_t e2 = {0};
  mw_base_update_t u2 = {.fragments = &frag, .n_fragments = 1, .compacted = &cs, .n_compacted = 1};
  v7.version = 7;
  assert_int_equal(mw_base_update_build(&v7, &u2, &again, &e2), -ESTALE);
  assert_non_null(strstr(e2.msg, "compacted up to generation 5"));
  cs.generation = 6;
  assert_int_equal(mw_base_update_build(&v7, &u2, &again, &e2), 0);
  mw_table_meta_t v8;
  assert_int_equal(mw_table_meta_read(again.manifest.data, again.manifest.len, &v8, NULL), 0);
  assert_int_equal(v8.memwal.n_compacted, 1);
  assert_int_equal(v8.memwal.compacted[0].generation, 6);
  assert_int_equal(v8.manifest.pb->fragments[3]->id, 4);
  mw_table_meta_free(&v8);
  mw_base_commit_free(&again);
  mw_table_meta_free(&v7);
  mw_base_commit_free(&c);
  mw_table_meta_free(&v6);
  free(b6);
}

static void test_bad_plans(void **state) {
  (void)state;
  mw_table_meta_t v6;
  uint8_t *b6;
  size_t n6;
  meta_of(6, &v6, &b6, &n6);
  mw_base_commit_t c;
  mw_err_t err = {0};
  uint64_t unknown = 99;
  mw_base_update_t u = {.removed = &unknown, .n_removed = 1};
  mw_err_clear(&err);
  assert_int_equal(mw_base_update_build(&v6, &u, &c, &err), -EINVAL);
  assert_non_null(strstr(err.msg, "removed fragment 99"));
  mw_bu_deletion_t all = {.fragment_id = 0, .kind = MW_DELETION_BITMAP, .id = 1, .num_deleted_rows = 2000};
  u = (mw_base_update_t){.deletions = &all, .n_deletions = 1};
  mw_err_clear(&err);
  assert_int_equal(mw_base_update_build(&v6, &u, &c, &err), -EINVAL);
  assert_non_null(strstr(err.msg, "remove the fragment instead"));
  uint64_t twice[] = {0, 0};
  u = (mw_base_update_t){.removed = twice, .n_removed = 2};
  mw_err_clear(&err);
  assert_int_equal(mw_base_update_build(&v6, &u, &c, &err), -EINVAL);
  assert_non_null(strstr(err.msg, "removed twice"));
  mw_bu_deletion_t del = {.fragment_id = 0, .kind = MW_DELETION_BITMAP, .id = 1, .num_deleted_rows = 5};
  u = (mw_base_update_t){.deletions = &del, .n_deletions = 1, .removed = twice, .n_removed = 1};
  mw_err_clear(&err);
  assert_int_equal(mw_base_update_build(&v6, &u, &c, &err), -EINVAL);
  assert_non_null(strstr(err.msg, "or is removed"));
  /* a removal of everything is a valid plan: no fragment, no deletion flag */
  uint64_t every[] = {0, 1, 2};
  u = (mw_base_update_t){.removed = every, .n_removed = 3};
  mw_err_clear(&err);
  assert_int_equal(mw_base_update_build(&v6, &u, &c, &err), 0);
  mw_table_meta_t v7;
  assert_int_equal(mw_table_meta_read(c.manifest.data, c.manifest.len, &v7, NULL), 0);
  assert_int_equal(v7.manifest.pb->n_fragments, 0);
  assert_int_equal(v7.manifest.pb->reader_feature_flags, 0);
  assert_int_equal(v7.manifest.pb->max_fragment_id, 2); /* ids are never reused */
  assert_int_equal(c.live_rows, 0);
  mw_table_meta_free(&v7);
  mw_base_commit_free(&c);
  mw_table_meta_free(&v6);
  free(b6);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_golden_update),
      cmocka_unit_test(test_compaction_commit),
      cmocka_unit_test(test_bad_plans),
  };
  return tu_run_group_name("base_update", tests, NULL, NULL);
}
