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

#include "cases.h"

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
  assert_int_equal(s.fields[3].type, MW_T_FSL);
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
                                   MW_T_FSL, MW_T_FSL};
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

#define TYPES                                                                              \
  "a type (int8..int64, uint8..uint64, float16, float, double, bool, string, large_string, " \
  "binary, large_binary, fixed_size_binary<N>, date32, date64, time32<s|ms>, time64<us|ns>, " \
  "timestamp<unit[, tz]>, decimal128<P,S>, fixed_size_list<T,D>, list<T>, large_list<T>, "  \
  "struct<name:T, ...>)"

static void test_schema_bad(void **state) {
  (void)state;
  schema_bad("", "schema: no columns");
  schema_bad("   ", "schema: no columns");
  schema_bad("id:int65", "schema: column 4: expected " TYPES ", got \"int65\"");
  schema_bad("id int64", "schema: column 4: expected ':' after the column name, got \"int64\"");
  schema_bad("id:", "schema: column 4: expected " TYPES ", got end of text");
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
  schema_bad("Id:INT64", "schema: column 4: expected " TYPES ", got \"INT64\"");
  schema_bad("v:fixed_size_list<float32,0>",
             "schema: column 27: the list size must be in 1..65536, got \"0\"");
  schema_bad("v:fixed_size_list<float32,65537>",
             "schema: column 27: the list size must be in 1..65536, got \"65537\"");
  schema_bad("v:fixed_size_list<float32,99999999999>",
             "schema: column 27: the list size must be in 1..65536, got \"99999999999\"");
  schema_bad("v:fixed_size_list<string,8>",
             "schema: column 19: a fixed_size_list item must be a number type (int8..uint64, "
             "float16, float, double), got \"string\"");
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
                     "string, large_string, binary or large_binary (the key types Lance 12 accepts "
                     "and can flush)"},
      {"vec", -EINVAL, "primary_key: column 1: \"vec\" is fixed_size_list<float32, 2>; a key "
                       "must be int32, int64, string, large_string, binary or large_binary (the "
                       "key types Lance 12 accepts and can flush)"},
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
                               "a:binary not null", "a:large_string not null",
                               "a:large_binary not null"};
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
    schema_ok(keys[i], &s);
    assert_int_equal(mw_schema_pk_text_apply(&s, "a", NULL), 0);
    mw_schema_free(&s);
  }
  static const char *refused[] = {"a:uint64 not null", "a:bool not null", "a:uint32 not null",
                                  "a:int8 not null", "a:int16 not null", "a:uint8 not null",
                                  "a:date32 not null", "a:timestamp<us> not null",
                                  "a:decimal128<10,2> not null", "a:float16 not null",
                                  "a:fixed_size_binary<16> not null"};
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
    schema_ok(refused[i], &s);
    mw_err_clear(&e);
    assert_int_equal(mw_schema_pk_text_apply(&s, "a", &e), -EINVAL);
    assert_non_null(strstr(e.msg, "the key types Lance 12 accepts and can flush"));
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
                        "int32, int64, uint32, uint64, float, double, bool or string column)"},
      {"bucket(vec,4)", "spec: column 8: bucket() cannot use \"vec\" of type "
                        "fixed_size_list<float32, 2> (use an int32, int64, uint32, uint64, "
                        "float, double, bool or string column)"},
      {"identity(v)", "spec: column 10: identity() cannot use \"v\" of type float64 (use an "
                      "int32, int64, uint32, uint64, string or bool column)"},
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

/* Every type of types.h, its parameters, and the text round trip
 * (mw_field_type_text gives text the parser takes back to the same field). */
static void test_schema_types(void **state) {
  (void)state;
  mw_schema_t s, t;
  char buf[MW_FIELD_TEXT_BYTES];
  schema_ok("a:int8, b:int16, c:uint8, d:uint16 not null, e:float16, e2:halffloat, "
            "f:large_string, g:large_utf8, h:large_binary, i:fixed_size_binary<16>, "
            "j:date32, k:date64, l:time32<s>, m:time32<ms>, n:time64<us>, o:time64<ns>, "
            "p:timestamp, q:timestamp<ns>, r:timestamp<ms, UTC>, s1:timestamp<s,Europe/Paris>, "
            "s2:timestamp<us, Etc/GMT+5>, u:decimal128<38,10>, v:decimal128<1, 0>, "
            "w:fixed_size_list<float16, 8>, x:fixed_size_list<double,3>, y:fixed_size_list<int8, 32>, "
            "z:fixed_size_list<uint8,64>, l1:list<int32>, l2:large_list<string not null>, "
            "l3:list<struct<a: int32, b: list<timestamp<ms>>>>, "
            "st:struct<host: string, pid: int32 not null, at: struct<x: double, y: bool>> not null",
            &s);
  static const mw_type_t want[] = {
      MW_T_INT8, MW_T_INT16, MW_T_UINT8, MW_T_UINT16, MW_T_FLOAT16, MW_T_FLOAT16,
      MW_T_LARGE_UTF8, MW_T_LARGE_UTF8, MW_T_LARGE_BINARY, MW_T_FIXED_BINARY, MW_T_DATE32,
      MW_T_DATE64, MW_T_TIME32, MW_T_TIME32, MW_T_TIME64, MW_T_TIME64, MW_T_TIMESTAMP,
      MW_T_TIMESTAMP, MW_T_TIMESTAMP, MW_T_TIMESTAMP, MW_T_TIMESTAMP, MW_T_DECIMAL128,
      MW_T_DECIMAL128, MW_T_FSL, MW_T_FSL, MW_T_FSL, MW_T_FSL, MW_T_LIST, MW_T_LARGE_LIST,
      MW_T_LIST, MW_T_STRUCT};
  assert_int_equal(s.n_fields, sizeof want / sizeof *want);
  for (size_t i = 0; i < s.n_fields; i++) assert_int_equal(s.fields[i].type, want[i]);
  assert_false(s.fields[3].nullable);
  assert_int_equal(s.fields[9].byte_width, 16);
  assert_int_equal(s.fields[12].unit, MW_UNIT_S);
  assert_int_equal(s.fields[13].unit, MW_UNIT_MS);
  assert_int_equal(s.fields[15].unit, MW_UNIT_NS);
  assert_int_equal(s.fields[16].unit, MW_UNIT_US); /* bare timestamp */
  assert_null(s.fields[16].tz);
  assert_string_equal(s.fields[18].tz, "UTC");
  assert_string_equal(s.fields[19].tz, "Europe/Paris");
  assert_string_equal(s.fields[20].tz, "Etc/GMT+5");
  assert_int_equal(s.fields[21].precision, 38);
  assert_int_equal(s.fields[21].scale, 10);
  assert_int_equal(s.fields[23].item_type, MW_T_FLOAT16);
  assert_int_equal(s.fields[23].fsl_dim, 8);
  assert_int_equal(s.fields[25].item_type, MW_T_INT8);
  assert_int_equal(s.fields[27].children[0].type, MW_T_INT32);
  assert_true(s.fields[27].children[0].nullable);
  assert_false(s.fields[28].children[0].nullable);
  const mw_field_t *l3 = &s.fields[29];
  assert_int_equal(l3->children[0].type, MW_T_STRUCT);
  assert_int_equal(l3->children[0].children[1].children[0].type, MW_T_TIMESTAMP);
  const mw_field_t *st = &s.fields[30];
  assert_false(st->nullable);
  assert_int_equal(st->n_children, 3);
  assert_false(st->children[1].nullable);
  assert_string_equal(mw_field_type_text(st, buf, sizeof buf),
                      "struct<host: utf8, pid: int32 not null, at: struct<x: float64, y: bool>>");
  assert_string_equal(mw_field_type_text(&s.fields[20], buf, sizeof buf), "timestamp<us, Etc/GMT+5>");
  /* every field's text parses back to the same field */
  char text[8192];
  size_t at = 0;
  for (size_t i = 0; i < s.n_fields; i++)
    at += (size_t)snprintf(text + at, sizeof text - at, "%s%s:%s%s", i ? ", " : "", s.fields[i].name,
                           mw_field_type_text(&s.fields[i], buf, sizeof buf),
                           s.fields[i].nullable ? "" : " not null");
  schema_ok(text, &t);
  assert_true(mw_schema_equal(&s, &t));
  /* ids in pre-order: a field, then its children */
  mw_schema_ids_assign(&t);
  assert_int_equal(t.fields[27].id, 27);
  assert_int_equal(t.fields[27].children[0].id, 28);
  assert_int_equal(t.fields[29].id, 31);
  assert_int_equal(t.fields[29].children[0].id, 32);
  assert_int_equal(t.fields[29].children[0].children[1].children[0].id, 35);
  assert_int_equal(t.fields[30].id, 36);
  assert_int_equal(mw_schema_tombstone_append(&t), 31);
  assert_int_equal(t.fields[31].id, 42); /* after st's 6 fields */
  mw_schema_free(&t);
  mw_schema_free(&s);

  schema_bad("t:time64<ms>", "schema: column 10: expected us or ns, got \"ms\"");
  schema_bad("t:time32<us>", "schema: column 10: expected s or ms, got \"us\"");
  schema_bad("t:timestamp<xs>", "schema: column 13: expected a unit (s, ms, us, ns), got \"xs\"");
  schema_bad("t:timestamp<us,>", "schema: column 16: time zone must be 1..64 characters");
  schema_bad("t:timestamp<us, a<b>", "schema: column 17: time zone \"a<b\" has a character that is not allowed");
  schema_bad("t:timestamp<us, +05:30>", "schema: column 17: time zone \"+05:30\": Lance 12 cannot "
             "store a zone with ':' (write a name such as UTC or Asia/Kolkata)");
  schema_bad("t:timestamp<us, UTC", "schema: column 17: expected a time zone and '>', got \"UTC\"");
  schema_bad("d:decimal128<39,2>", "schema: column 14: the precision must be in 1..38, got \"39\"");
  schema_bad("d:decimal128<10,11>", "schema: column 17: the scale must be in 0..10, got \"11\"");
  schema_bad("d:decimal128<10>", "schema: column 16: expected ',' and the scale, got \">\"");
  schema_bad("b:fixed_size_binary<0>", "schema: column 21: the byte width must be in 1..65536, got \"0\"");
  schema_bad("l:list<>", "schema: column 8: expected " TYPES ", got \">\"");
  schema_bad("l:list<int32, int64>", "schema: column 13: expected '>', got \",\"");
  schema_bad("s:struct<>", "schema: column 10: expected a struct field name, got \">\"");
  schema_bad("s:struct<a:int32, a:bool>", "schema: column 19: duplicate struct field \"a\"");
  schema_bad("s:struct<a int32>", "schema: column 12: expected ':' after the struct field name, got \"int32\"");
  schema_bad("s:struct<_tombstone:bool, x:list<_tombstone>>",
             "schema: column 34: expected " TYPES ", got \"_tombstone\"");
  schema_bad("v:fixed_size_list<list<int32>,4>",
             "schema: column 19: a fixed_size_list item must be a number type (int8..uint64, "
             "float16, float, double), got \"list\"");
  /* nesting is bounded */
  char deep[512];
  size_t n = (size_t)snprintf(deep, sizeof deep, "x:");
  for (int i = 0; i < MW_MAX_NESTING + 2; i++) n += (size_t)snprintf(deep + n, sizeof deep - n, "list<");
  n += (size_t)snprintf(deep + n, sizeof deep - n, "int32");
  for (int i = 0; i < MW_MAX_NESTING + 2; i++) n += (size_t)snprintf(deep + n, sizeof deep - n, ">");
  mw_err_t e;
  mw_err_clear(&e);
  assert_int_equal(mw_schema_text_parse(deep, &s, &e), -EINVAL);
  assert_non_null(strstr(e.msg, "nested deeper than 8 levels"));
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
      cmocka_unit_test(test_schema_types),
  };
  return tu_run_group(tests, NULL, NULL);
}
