/*
 * test_transaction.c — Lance transaction files (lance/transaction.h).
 *
 * Golden: every .txn LanceDB 0.39.0 wrote in ../shared/vectors decodes, and
 * the three base-table ones are what the table's history says: version 0 an
 * Overwrite with one fragment of 50 rows and the schema id/name/v/vec,
 * version 1 an UpdateConfig (the primary-key field metadata), version 2 a
 * CreateIndex of __lance_mem_wal; every SSTable's own .txn is an Overwrite
 * of one fragment. The transaction_section of each base manifest decodes
 * too, and the Update that compaction writes (lance/base_update.h) decodes
 * back to its removed ids, fragments and compacted_sstables. Every
 * truncation of a golden file fails cleanly or decodes.
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
#include "lance/transaction.h"
#include "testutil.h"

static void test_op_names(void **state) {
  (void)state;
  assert_string_equal(mw_txn_op_name(100), "append");
  assert_string_equal(mw_txn_op_name(108), "update");
  assert_string_equal(mw_txn_op_name(112), "update_mem_wal_state");
  assert_null(mw_txn_op_name(99));
  assert_null(mw_txn_op_name(117));
}

static void check_base(const char *path, const mw_txn_t *t) {
  const char *base = strrchr(path, '/') + 1;
  if (strncmp(base, "0-", 2) == 0) {
    assert_string_equal(t->op_name, "overwrite");
    assert_int_equal(t->read_version, 0);
    assert_int_equal(t->n_fragments, 1);
    assert_int_equal(t->fragments[0]->physical_rows, 50);
    assert_int_equal(t->n_schema, 4);
    assert_string_equal(t->schema[0]->name, "id");
    assert_string_equal(t->schema[3]->name, "vec");
  } else if (strncmp(base, "1-", 2) == 0) {
    assert_string_equal(t->op_name, "update_config");
    assert_int_equal(t->read_version, 1);
  } else if (strncmp(base, "2-", 2) == 0) {
    assert_string_equal(t->op_name, "create_index");
    assert_int_equal(t->n_new_indices, 1);
    assert_string_equal(t->new_indices[0]->name, MW_MEMWAL_INDEX_NAME);
  } else {
    fail_msg("%s: unexpected transaction", path);
  }
  /* the uuid in the name is the transaction's */
  assert_non_null(t->uuid);
  assert_non_null(strstr(base, t->uuid));
}

static void test_golden(void **state) {
  (void)state;
  char **paths;
  size_t n = tu_find_files(tu_vectors_dir(), ".txn", &paths);
  assert_true(n >= 10);
  size_t bases = 0, ssts = 0;
  for (size_t i = 0; i < n; i++) {
    size_t len;
    uint8_t *p = tu_read_file(paths[i], &len);
    assert_non_null(p);
    mw_txn_t t;
    mw_err_t err = {0};
    if (mw_txn_decode(p, len, &t, &err) < 0) fail_msg("%s: %s", paths[i], err.msg);
    if (strstr(paths[i], "_gen_") != NULL) {
      assert_string_equal(t.op_name, "overwrite");
      assert_int_equal(t.n_fragments, 1);
      assert_true(t.fragments[0]->physical_rows > 0);
      ssts++;
    } else {
      check_base(paths[i], &t);
      bases++;
    }
    mw_txn_free(&t);
    for (size_t cut = 0; cut < len; cut++) {
      uint8_t *q = malloc(cut + 1);
      memcpy(q, p, cut);
      if (mw_txn_decode(q, cut, &t, NULL) == 0) assert_non_null(t.op_name);
      mw_txn_free(&t);
      free(q);
    }
    free(p);
  }
  assert_int_equal(bases, 15); /* 5 vectors x 3 versions */
  assert_true(ssts >= 5);
  tu_free_names(paths, n);
}

/* Each base manifest's transaction_section is the same message. */
static void test_manifest_sections(void **state) {
  (void)state;
  char **paths;
  size_t n = tu_find_files(tu_vectors_dir(), ".manifest", &paths), found = 0;
  for (size_t i = 0; i < n; i++) {
    if (strstr(paths[i], "_mem_wal") != NULL) continue;
    size_t len;
    uint8_t *p = tu_read_file(paths[i], &len);
    mw_section_t msg;
    uint64_t pos;
    mw_dmanifest_t m = {0};
    assert_int_equal(mw_dmanifest_unframe(p, len, &msg, &pos, NULL), 0);
    assert_int_equal(mw_dmanifest_decode(msg.data, msg.len, &m, NULL), 0);
    if (m.has_transaction_section) {
      mw_section_t sec;
      mw_txn_t t;
      assert_int_equal(mw_dmanifest_section_at(p, len, m.pb->transaction_section, pos, &sec, NULL), 0);
      mw_err_t err = {0};
      if (mw_txn_decode(sec.data, sec.len, &t, &err) < 0) fail_msg("%s: %s", paths[i], err.msg);
      assert_int_equal(t.read_version + 1, m.pb->version);
      mw_txn_free(&t);
      found++;
    }
    mw_dmanifest_free(&m);
    free(p);
  }
  assert_true(found >= 10);
  tu_free_names(paths, n);
}

/* A hand-made Update (the shape compaction writes): removed ids packed,
 * an updated fragment, compacted_sstables, an unknown field. */
static void put_varint(mw_buf_t *b, uint64_t v) {
  while (v >= 0x80) mw_buf_put_u8(b, (uint8_t)(v | 0x80)), v >>= 7;
  mw_buf_put_u8(b, (uint8_t)v);
}
static void put_len(mw_buf_t *b, uint32_t tag, const mw_buf_t *m) {
  put_varint(b, (uint64_t)tag << 3 | 2);
  put_varint(b, m->len);
  mw_buf_append(b, m->data, m->len);
}

static void test_update(void **state) {
  (void)state;
  mw_buf_t frag = MW_BUF_INIT, uuid = MW_BUF_INIT, cs = MW_BUF_INIT, ids = MW_BUF_INIT, upd = MW_BUF_INIT, t = MW_BUF_INIT;
  put_varint(&frag, 1 << 3), put_varint(&frag, 7);   /* DataFragment.id 7 */
  put_varint(&frag, 4 << 3), put_varint(&frag, 99);  /* physical_rows 99 */
  uint8_t sid[16];
  for (int i = 0; i < 16; i++) sid[i] = (uint8_t)(0xa0 + i);
  put_varint(&uuid, 1 << 3 | 2), put_varint(&uuid, 16), mw_buf_append(&uuid, sid, 16);
  put_len(&cs, 1, &uuid);
  put_varint(&cs, 2 << 3), put_varint(&cs, 5);       /* generation 5 */
  put_varint(&ids, 3), put_varint(&ids, 300);
  put_len(&upd, 1, &ids);                            /* removed_fragment_ids [3, 300] */
  put_len(&upd, 2, &frag);
  put_len(&upd, 5, &cs);
  put_varint(&upd, 7 << 3), put_varint(&upd, 1);     /* update_mode: not decoded, counted */
  put_varint(&t, 1 << 3), put_varint(&t, 4);         /* read_version 4 */
  put_varint(&t, 2 << 3 | 2), put_varint(&t, 3), mw_buf_append(&t, "abc", 3);
  put_len(&t, 108, &upd);
  mw_txn_t x;
  mw_err_t err = {0};
  if (mw_txn_decode(t.data, t.len, &x, &err) < 0) fail_msg("%s", err.msg);
  assert_string_equal(x.op_name, "update");
  assert_int_equal(x.read_version, 4);
  assert_string_equal(x.uuid, "abc");
  assert_int_equal(x.n_removed_ids, 2);
  assert_int_equal(x.removed_ids[1], 300);
  assert_int_equal(x.n_fragments, 1);
  assert_int_equal(x.fragments[0]->id, 7);
  assert_int_equal(x.n_compacted, 1);
  assert_int_equal(x.compacted[0].generation, 5);
  assert_memory_equal(x.compacted[0].shard_id, sid, 16);
  assert_int_equal(x.n_unknown, 1);
  mw_txn_free(&x);
  /* a second, different operation is refused */
  mw_buf_t two = MW_BUF_INIT;
  mw_buf_append(&two, t.data, t.len);
  put_len(&two, 100, &frag);
  mw_err_clear(&err);
  assert_int_equal(mw_txn_decode(two.data, two.len, &x, &err), -EBADMSG);
  assert_non_null(strstr(err.msg, "a second operation (append after update)"));
  mw_txn_free(&x);
  mw_buf_free(&frag), mw_buf_free(&uuid), mw_buf_free(&cs), mw_buf_free(&ids), mw_buf_free(&upd), mw_buf_free(&t), mw_buf_free(&two);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_op_names), cmocka_unit_test(test_golden),
      cmocka_unit_test(test_manifest_sections), cmocka_unit_test(test_update),
  };
  return tu_run_group(tests, NULL, NULL);
}
