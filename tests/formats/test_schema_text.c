/*
 * test_schema_text.c — the config's table description (src/lance/schema_text.c):
 * schema, primary_key, spec and shards text, good and bad, with the exact
 * messages (column number, token, what was expected); _tombstone and field ids.
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

#include "lance/schema_text.h"

static void schema_ok(const char *text, mw_schema_t *s) {
  mw_err_t e;
  mw_err_clear(&e);
  int rc = mw_schema_text_parse(text, s, &e);
  if (rc != 0) fail_msg("%s -> %d %s", text, rc, e.msg);
}

/* Parse must fail with exactly `msg`, and leave an empty schema. */
static void schema_bad(const char *text, const char *msg) {
  mw_schema_t s;
  mw_err_t e;
  mw_err_clear(&e);
  int rc = mw_schema_text_parse(text, &s, &e);
  if (rc != -EINVAL || strcmp(e.msg, msg) != 0)
    fail_msg("'%s': rc %d msg '%s', wanted '%s'", text, rc, e.msg, msg);
  assert_int_equal(s.n_fields, 0);
  assert_null(s.fields);
}

static void test_schema_good(void **state) {
  (void)state;
  mw_schema_t s;
  schema_ok("id:int64 not null, name:string, v:double, vec:fixed_size_list<float32,8>", &s);
  assert_int_equal(s.n_fields, 4);
  assert_string_equal(s.fields[0].name, "id");
  assert_int_equal(s.fields[0].type, MW_T_INT64);
  assert_false(s.fields[0].nullable);
  assert_int_equal(s.fields[1].type, MW_T_UTF8);
  assert_true(s.fields[1].nullable);
  assert_int_equal(s.fields[2].type, MW_T_FLOAT64);
  assert_int_equal(s.fields[3].type, MW_T_FSL_F32);
  assert_int_equal(s.fields[3].fsl_dim, 8);
  assert_true(s.fields[3].item_nullable);
  for (size_t i = 0; i < s.n_fields; i++) {
    assert_int_equal(s.fields[i].id, -1);
    assert_int_equal(s.fields[i].pk_position, 0);
  }
  mw_schema_free(&s);

  /* every type name and alias, spacing, tabs */
  schema_ok(" a:int32 ,b :int64,c: uint32,\td:uint64 not  null,e:float,f:float32,g:double,"
            "h:float64,i:bool not null,j:string,k:utf8,_l9:binary,"
            "M:fixed_size_list < float , 65536 >,n:fixed_size_list<float32,1> not null ", &s);
  static const mw_type_t want[] = {MW_T_INT32,   MW_T_INT64,   MW_T_UINT32, MW_T_UINT64,
                                   MW_T_FLOAT32, MW_T_FLOAT32, MW_T_FLOAT64, MW_T_FLOAT64,
                                   MW_T_BOOL,    MW_T_UTF8,    MW_T_UTF8,   MW_T_BINARY,
                                   MW_T_FSL_F32, MW_T_FSL_F32};
  assert_int_equal(s.n_fields, 14);
  for (size_t i = 0; i < 14; i++) assert_int_equal(s.fields[i].type, want[i]);
  assert_string_equal(s.fields[11].name, "_l9");
  assert_int_equal(s.fields[12].fsl_dim, 65536);
  assert_int_equal(s.fields[13].fsl_dim, 1);
  assert_false(s.fields[3].nullable);
  assert_false(s.fields[8].nullable);
  assert_false(s.fields[13].nullable);
  assert_true(s.fields[12].nullable);
  mw_schema_free(&s);
}

static void test_schema_bad(void **state) {
  (void)state;
  schema_bad("", "schema: no columns");
  schema_bad("   ", "schema: no columns");
  schema_bad("id:int65",
             "schema: column 4: expected a type (int32, int64, uint32, uint64, float, double, "
             "bool, string, binary, fixed_size_list<float32,D>), got \"int65\"");
  schema_bad("id int64", "schema: column 4: expected ':' after the column name, got \"int64\"");
  schema_bad("id:", "schema: column 4: expected a type (int32, int64, uint32, uint64, float, "
                    "double, bool, string, binary, fixed_size_list<float32,D>), got end of text");
  schema_bad("1id:int64", "schema: column 1: expected a column name, got \"1\"");
  schema_bad("id:int64,", "schema: column 10: expected a column name, got end of text");
  schema_bad("id:int64,,a:bool", "schema: column 10: expected a column name, got \",\"");
  schema_bad("id:int64 null", "schema: column 10: expected ',' or \"not null\" or end of text, "
                              "got \"null\"");
  schema_bad("id:int64 not", "schema: column 13: expected null (after not), got end of text");
  schema_bad("id:int64 not nul", "schema: column 14: expected null (after not), got \"nul\"");
  schema_bad("id:int64, id:string", "schema: column 11: duplicate column \"id\"");
  schema_bad("a:bool,_tombstone:bool", "schema: column 8: \"_tombstone\" is reserved");
  schema_bad("a-b:bool", "schema: column 2: expected ':' after the column name, got \"-\"");
  schema_bad("a:bool;b:bool", "schema: column 7: expected ',' or \"not null\" or end of text, "
                              "got \";\"");
  schema_bad("\xc3\xa9:bool", "schema: column 1: expected a column name, got byte 0xc3");
  schema_bad("Id:INT64", "schema: column 4: expected a type (int32, int64, uint32, uint64, "
                         "float, double, bool, string, binary, fixed_size_list<float32,D>), "
                         "got \"INT64\"");
  schema_bad("v:fixed_size_list<float32,0>",
             "schema: column 27: the list size must be in 1..65536, got \"0\"");
  schema_bad("v:fixed_size_list<float32,65537>",
             "schema: column 27: the list size must be in 1..65536, got \"65537\"");
  schema_bad("v:fixed_size_list<float32,99999999999>",
             "schema: column 27: the list size must be in 1..65536, got \"99999999999\"");
  schema_bad("v:fixed_size_list<float64,8>",
             "schema: column 19: expected float32 (the only list item type), got \"float64\"");
  schema_bad("v:fixed_size_list<float32 8>", "schema: column 27: expected ',', got \"8\"");
  schema_bad("v:fixed_size_list[float32,8]", "schema: column 18: expected '<', got \"[\"");
  schema_bad("v:fixed_size_list<float32,8", "schema: column 28: expected '>', got end of text");
  schema_bad("v:fixed_size_list<float32,x>",
             "schema: column 27: expected the list size, got \"x\"");

  /* limits: a 257-byte name, 1025 columns */
  char *t = malloc(20000);
  assert_non_null(t);
  memset(t, 'a', 257);
  strcpy(t + 257, ":bool");
  schema_bad(t, "schema: column 1: name longer than 256 bytes");
  size_t n = 0;
  for (int i = 0; i <= 1024; i++) n += (size_t)sprintf(t + n, "%sc%d:bool", i ? "," : "", i);
  mw_schema_t s;
  mw_err_t e;
  mw_err_clear(&e);
  assert_int_equal(mw_schema_text_parse(t, &s, &e), -EINVAL);
  assert_non_null(strstr(e.msg, "more than 1024 columns"));
  free(t);
  mw_err_clear(&e);
  assert_int_equal(mw_schema_text_parse(NULL, &s, &e), -EINVAL);
}

static void test_primary_key(void **state) {
  (void)state;
  mw_schema_t s;
  mw_err_t e;
  schema_ok("id:int64 not null, name:string not null, v:double not null, n:int32, "
            "b:binary not null, vec:fixed_size_list<float32,2> not null", &s);
  mw_err_clear(&e);
  assert_int_equal(mw_schema_pk_text_apply(&s, " id ", &e), 0);
  assert_int_equal(s.fields[0].pk_position, 1);
  const mw_kv_t *kv = mw_kvs_get(&s.fields[0].meta, MW_PK_POSITION_KEY);
  assert_non_null(kv);
  assert_string_equal(MW_PK_POSITION_KEY, "lance-schema:unenforced-primary-key:position");
  assert_int_equal(kv->value_len, 1);
  assert_memory_equal(kv->value, "1", 1);
  assert_int_equal(s.fields[0].meta.n, 1);
  for (size_t i = 1; i < s.n_fields; i++) assert_int_equal(s.fields[i].pk_position, 0);
  /* applying again to the same column is harmless; another column is refused */
  assert_int_equal(mw_schema_pk_text_apply(&s, "id", &e), 0);
  assert_int_equal(s.fields[0].meta.n, 1);
  mw_err_clear(&e);
  assert_int_equal(mw_schema_pk_text_apply(&s, "name", &e), -EEXIST);
  assert_string_equal(e.msg, "primary_key: \"id\" is already the primary key");

  struct {
    const char *text;
    int rc;
    const char *msg;
  } bad[] = {
      {"id,name", -ENOTSUP, "primary_key: column 3: compound primary keys are not supported "
                            "(LanceDB 0.39 refuses them); name one column"},
      {"nope", -EINVAL, "primary_key: column 1: no column named \"nope\" in the schema"},
      {"", -EINVAL, "primary_key: column 1: expected a column name, got end of text"},
      {"id name", -EINVAL, "primary_key: column 4: expected end of text (one column), got "
                           "\"name\""},
      {"  n", -EINVAL, "primary_key: column 3: \"n\" must be declared not null"},
      {"v", -EINVAL, "primary_key: column 1: \"v\" is float64; a key must be int32, int64, "
                     "string or binary (Lance 12 refuses uint32, uint64 and bool keys)"},
      {"vec", -EINVAL, "primary_key: column 1: \"vec\" is fixed_size_list<float32>; a key must "
                       "be int32, int64, string or binary (Lance 12 refuses uint32, uint64 and "
                       "bool keys)"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    mw_err_clear(&e);
    int rc = mw_schema_pk_text_apply(&s, bad[i].text, &e);
    if (rc != bad[i].rc || strcmp(e.msg, bad[i].msg) != 0)
      fail_msg("'%s': rc %d msg '%s'", bad[i].text, rc, e.msg);
  }
  mw_schema_free(&s);

  /* each type Lance 12 accepts as a key is accepted; the others are refused */
  static const char *keys[] = {"a:int32 not null", "a:int64 not null", "a:string not null",
                               "a:binary not null"};
  for (size_t i = 0; i < 4; i++) {
    schema_ok(keys[i], &s);
    assert_int_equal(mw_schema_pk_text_apply(&s, "a", NULL), 0);
    mw_schema_free(&s);
  }
  static const char *refused[] = {"a:uint64 not null", "a:bool not null", "a:uint32 not null"};
  for (size_t i = 0; i < 3; i++) {
    schema_ok(refused[i], &s);
    mw_err_clear(&e);
    assert_int_equal(mw_schema_pk_text_apply(&s, "a", &e), -EINVAL);
    assert_non_null(strstr(e.msg, "Lance 12 refuses uint32, uint64 and bool keys"));
    mw_schema_free(&s);
  }

}

static void test_spec(void **state) {
  (void)state;
  mw_schema_t s;
  mw_err_t e;
  mw_shard_spec_t sp;
  schema_ok("id:int64 not null, region:string, v:double, f:float, ok:bool, u:uint32, "
            "bin:binary, vec:fixed_size_list<float32,2>, i:int32", &s);
  assert_int_equal(mw_shard_spec_text_parse("unsharded", &s, &sp, NULL), 0);
  assert_int_equal(sp.kind, MW_SHARD_UNSHARDED);
  assert_int_equal(sp.column, -1);
  assert_int_equal(sp.num_buckets, 0);
  assert_int_equal(mw_shard_spec_text_parse(" bucket( id , 16 ) ", &s, &sp, NULL), 0);
  assert_int_equal(sp.kind, MW_SHARD_BUCKET);
  assert_int_equal(sp.column, 0);
  assert_int_equal(sp.num_buckets, 16);
  assert_int_equal(mw_shard_spec_text_parse("identity(region)", &s, &sp, NULL), 0);
  assert_int_equal(sp.kind, MW_SHARD_IDENTITY);
  assert_int_equal(sp.column, 1);
  assert_string_equal(mw_shard_kind_name(sp.kind), "identity");
  /* bucket accepts ints, floats, bool, string; identity ints, string, bool */
  static const char *good[] = {"bucket(v,1)", "bucket(f,1024)", "bucket(ok,2)", "bucket(u,3)",
                               "bucket(region,8)", "bucket(i,5)", "identity(id)",
                               "identity(ok)", "identity(u)", "identity(i)"};
  for (size_t i = 0; i < sizeof good / sizeof *good; i++)
    assert_int_equal(mw_shard_spec_text_parse(good[i], &s, &sp, NULL), 0);

  struct {
    const char *text;
    const char *msg;
  } bad[] = {
      {"hash(id)", "spec: column 1: expected unsharded, bucket(column,N) or identity(column), "
                   "got \"hash\""},
      {"", "spec: column 1: expected unsharded, bucket(column,N) or identity(column), got end "
           "of text"},
      {"bucket(id)", "spec: column 10: expected ',' and the number of buckets, got \")\""},
      {"bucket(id,0)", "spec: column 11: the number of buckets must be in 1..1024, got \"0\""},
      {"bucket(id,1025)", "spec: column 11: the number of buckets must be in 1..1024, got "
                          "\"1025\""},
      {"bucket(id,16", "spec: column 13: expected ')', got end of text"},
      {"bucket(nope,16)", "spec: column 8: no column named \"nope\" in the schema"},
      {"bucket(bin,4)", "spec: column 8: bucket() cannot use \"bin\" of type binary (use an "
                        "integer, float, double, bool or string column)"},
      {"bucket(vec,4)", "spec: column 8: bucket() cannot use \"vec\" of type "
                        "fixed_size_list<float32> (use an integer, float, double, bool or "
                        "string column)"},
      {"identity(v)", "spec: column 10: identity() cannot use \"v\" of type float64 (use an "
                      "integer, string or bool column)"},
      {"identity(region,4)", "spec: column 16: expected ')', got \",\""},
      {"identity region", "spec: column 10: expected '(', got \"region\""},
      {"unsharded()", "spec: column 10: expected end of text, got \"(\""},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    mw_err_clear(&e);
    int rc = mw_shard_spec_text_parse(bad[i].text, &s, &sp, &e);
    if (rc != -EINVAL || strcmp(e.msg, bad[i].msg) != 0)
      fail_msg("'%s': rc %d msg '%s'", bad[i].text, rc, e.msg);
  }
  mw_schema_free(&s);
}

static void shards_bad(const char *text, const mw_schema_t *s, const mw_shard_spec_t *sp,
                       const char *msg) {
  mw_shard_list_t l;
  mw_err_t e;
  mw_err_clear(&e);
  int rc = mw_shard_list_text_parse(text, s, sp, &l, &e);
  if (rc != -EINVAL || strcmp(e.msg, msg) != 0)
    fail_msg("'%s': rc %d msg '%s', wanted '%s'", text, rc, e.msg, msg);
  assert_int_equal(l.n, 0);
  assert_null(l.buckets);
  assert_null(l.values);
}

static void test_shards(void **state) {
  (void)state;
  mw_schema_t s;
  mw_shard_list_t l;
  schema_ok("id:int64 not null, region:string, ok:bool, i:int32, u:uint32", &s);
  mw_shard_spec_t un = {MW_SHARD_UNSHARDED, -1, 0}, bk = {MW_SHARD_BUCKET, 0, 8},
                  idr = {MW_SHARD_IDENTITY, 1, 0}, idb = {MW_SHARD_IDENTITY, 2, 0},
                  idi = {MW_SHARD_IDENTITY, 3, 0}, idu = {MW_SHARD_IDENTITY, 4, 0};
  for (int k = 0; k < 3; k++) {
    const mw_shard_spec_t *sp = k == 0 ? &un : k == 1 ? &bk : &idr;
    assert_int_equal(mw_shard_list_text_parse(" all ", &s, sp, &l, NULL), 0);
    assert_true(l.all);
    assert_int_equal(l.n, 0);
    mw_shard_list_free(&l);
  }
  assert_int_equal(mw_shard_list_text_parse("0,3, 5 ,7", &s, &bk, &l, NULL), 0);
  assert_false(l.all);
  assert_int_equal(l.n, 4);
  assert_int_equal(l.buckets[0], 0);
  assert_int_equal(l.buckets[1], 3);
  assert_int_equal(l.buckets[2], 5);
  assert_int_equal(l.buckets[3], 7);
  mw_shard_list_free(&l);
  assert_int_equal(mw_shard_list_text_parse("us, eu ,ap south", &s, &idr, &l, NULL), 0);
  assert_int_equal(l.n, 3);
  assert_string_equal(l.values[0], "us");
  assert_string_equal(l.values[1], "eu");
  assert_string_equal(l.values[2], "ap south");
  mw_shard_list_free(&l);
  assert_int_equal(mw_shard_list_text_parse("true,false", &s, &idb, &l, NULL), 0);
  assert_int_equal(l.n, 2);
  mw_shard_list_free(&l);
  assert_int_equal(mw_shard_list_text_parse("-2147483648,2147483647,0", &s, &idi, &l, NULL), 0);
  assert_int_equal(l.n, 3);
  assert_string_equal(l.values[0], "-2147483648");
  mw_shard_list_free(&l);

  shards_bad("0", &s, &un, "shards: column 1: expected all (the spec is unsharded), got \"0\"");
  shards_bad("", &s, &bk, "shards: column 1: expected all or a list of shards, got end of text");
  shards_bad("all,1", &s, &bk, "shards: column 4: expected end of text after all, got \",\"");
  shards_bad("0,8", &s, &bk, "shards: column 3: a bucket number (0..7) must be in 0..7, got \"8\"");
  shards_bad("0,x", &s, &bk, "shards: column 3: expected a bucket number (0..7), got \"x\"");
  shards_bad("1,2,1", &s, &bk, "shards: column 5: bucket 1 listed twice");
  shards_bad("1 2", &s, &bk, "shards: column 3: expected ',' or end of text, got \"2\"");
  shards_bad("1,", &s, &bk, "shards: column 3: expected a bucket number (0..7), got end of text");
  shards_bad("us,,eu", &s, &idr, "shards: column 4: empty value");
  shards_bad("us, eu,us", &s, &idr, "shards: column 8: \"us\" listed twice");
  shards_bad("true,yes", &s, &idb,
             "shards: column 6: \"yes\" is not a valid bool value of identity column \"ok\"");
  shards_bad("2147483648", &s, &idi,
             "shards: column 1: \"2147483648\" is not a valid int32 value of identity column \"i\"");
  shards_bad("1, 2x", &s, &idi,
             "shards: column 4: \"2x\" is not a valid int32 value of identity column \"i\"");
  shards_bad("-1", &s, &idu,
             "shards: column 1: \"-1\" is not a valid uint32 value of identity column \"u\"");
  mw_schema_free(&s);
}

static void test_tombstone_and_ids(void **state) {
  (void)state;
  mw_schema_t s;
  schema_ok("id:int64 not null, name:string", &s);
  assert_int_equal(mw_schema_tombstone_append(&s), 2);
  assert_string_equal(s.fields[2].name, "_tombstone");
  assert_int_equal(s.fields[2].type, MW_T_BOOL);
  assert_false(s.fields[2].nullable);
  assert_int_equal(s.fields[2].id, 2); /* no ids yet: n_fields */
  assert_int_equal(mw_schema_tombstone_append(&s), -EEXIST);
  mw_schema_free(&s);

  schema_ok("a:int32, b:bool, c:string", &s);
  mw_schema_ids_assign(&s);
  for (int i = 0; i < 3; i++) assert_int_equal(s.fields[i].id, i);
  s.fields[1].id = 7; /* ids need not be dense: the next one follows the max */
  assert_int_equal(mw_schema_tombstone_append(&s), 3);
  assert_int_equal(s.fields[3].id, 8);
  /* the tombstone name is reserved in the text */
  mw_schema_free(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_schema_good), cmocka_unit_test(test_schema_bad),
      cmocka_unit_test(test_primary_key), cmocka_unit_test(test_spec),
      cmocka_unit_test(test_shards),      cmocka_unit_test(test_tombstone_and_ids),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
