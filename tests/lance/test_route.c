/*
 * test_route.c — bucket hash and shard UUIDs.
 *
 * Proves: every test vector of memwal.md §8.3 (hashes and buckets), every
 * UUID of §8.4 and of the vectors README ("Layout facts": buckets 0..6,
 * unsharded), and that every id in the WAL entries of each bucket4-small
 * shard (tests/lance/data/wal_ids/, from tools/gen-misc-fixtures.py)
 * buckets, with 4 buckets, to the bucket whose UUID names that shard.
 * Non-ASCII string vectors (sign-extended leftover bytes) come from a
 * literal Python transcription of §8.3; they guard against regressions
 * only.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cases.h"

#include "lance/route.h"
#include "testutil.h"

/* A one-row, one-column batch holding `v` (n bytes; n = 0 for null). */
typedef struct one {
  mw_schema_t s;
  mw_batch_t b;
} one_t;

static void one_make(one_t *o, mw_type_t t, const void *v, size_t n) {
  mw_schema_init(&o->s);
  assert_int_equal(mw_schema_add(&o->s, "k", t, true), 0);
  assert_int_equal(mw_batch_init(&o->b, &o->s), 0);
  mw_column_t *c = &o->b.cols[0];
  if (v == NULL) assert_int_equal(mw_column_append_null(c, &o->s.fields[0]), 0);
  else if (t == MW_T_BOOL) assert_int_equal(mw_column_append_bool(c, *(const bool *)v), 0);
  else if (t == MW_T_UTF8 || t == MW_T_BINARY) assert_int_equal(mw_column_append_bytes(c, v, n), 0);
  else assert_int_equal(mw_column_append_fixed(c, v, n), 0);
  o->b.n_rows = 1;
}

static void one_free(one_t *o) {
  mw_batch_free(&o->b);
  mw_schema_free(&o->s);
}

static int32_t hash_of(mw_type_t t, const void *v, size_t n) {
  one_t o;
  one_make(&o, t, v, n);
  int32_t h = 12345;
  assert_int_equal(mw_route_hash_value(&o.s.fields[0], &o.b.cols[0], 0, &h), 0);
  uint32_t b8;
  assert_int_equal(mw_route_bucket_rows(&o.s.fields[0], &o.b.cols[0], 1, 8, &b8, NULL), 0);
  assert_int_equal(b8, mw_route_bucket_of(h, 8));
  one_free(&o);
  return h;
}

static uint32_t bucket8(mw_type_t t, const void *v, size_t n) {
  return mw_route_bucket_of(hash_of(t, v, n), 8);
}

static void test_spec_vectors(void **state) {
  (void)state;
  /* memwal.md §8.3, num_buckets = 8. */
  const struct { int32_t v, hash; uint32_t bucket; } i32[] = {
      {1, -68075478, 2}, {2, 1085422463, 7}, {3, 847579505, 1}};
  for (size_t i = 0; i < 3; i++) {
    assert_int_equal(mw_murmur3_int(i32[i].v), i32[i].hash);
    assert_int_equal(hash_of(MW_T_INT32, &i32[i].v, 4), i32[i].hash);
    assert_int_equal(bucket8(MW_T_INT32, &i32[i].v, 4), i32[i].bucket);
  }
  const struct { int64_t v; int32_t hash; uint32_t bucket; } i64[] = {
      {1, 1392991556, 4}, {2, -971005196, 4}, {3, -1556392013, 3},
      {5, 1740791543, 7}, {-1, 1651860712, 0}};
  for (size_t i = 0; i < 5; i++) {
    assert_int_equal(mw_murmur3_long(i64[i].v), i64[i].hash);
    assert_int_equal(hash_of(MW_T_INT64, &i64[i].v, 8), i64[i].hash);
    assert_int_equal(bucket8(MW_T_INT64, &i64[i].v, 8), i64[i].bucket);
  }
  const struct { const char *s; int32_t hash; uint32_t bucket; } str[] = {
      {"a", 721651713, 1}, {"b", -829116891, 5}, {"hello", -1306563072, 0},
      /* regression values (sign-extended leftovers, whole blocks, empty) */
      {"\xc3\xa9", -153731279, 1}, {"na\xc3\xafve-\xc3\xbc", 803010212, 4},
      {"abcd", 1139631978, 2}, {"\xff\x80\x7f", -1469372427, 5}, {"", 0, 0}};
  for (size_t i = 0; i < sizeof str / sizeof *str; i++) {
    size_t n = strlen(str[i].s);
    assert_int_equal(mw_murmur3_bytes(str[i].s, n), str[i].hash);
    assert_int_equal(hash_of(MW_T_UTF8, str[i].s, n), str[i].hash);
    assert_int_equal(hash_of(MW_T_BINARY, str[i].s, n), str[i].hash);
    assert_int_equal(bucket8(MW_T_UTF8, str[i].s, n), str[i].bucket);
  }
  bool t = true, f = false;
  assert_int_equal(bucket8(MW_T_BOOL, &t, 1), 2);
  assert_int_equal(hash_of(MW_T_BOOL, &f, 1), mw_murmur3_int(0));
  float f32 = 1.25f;
  double f64 = 1.25;
  assert_int_equal(bucket8(MW_T_FLOAT32, &f32, 4), 0);
  assert_int_equal(bucket8(MW_T_FLOAT64, &f64, 8), 0);
  uint32_t bits32;
  memcpy(&bits32, &f32, 4);
  assert_int_equal(hash_of(MW_T_FLOAT32, &f32, 4), mw_murmur3_int((int32_t)bits32));
}

static void test_type_rules(void **state) {
  (void)state;
  /* unsigned -> cast to the signed type of the same width */
  uint32_t u32 = 0xffffffffu;
  uint64_t u64 = UINT64_MAX;
  assert_int_equal(hash_of(MW_T_UINT32, &u32, 4), mw_murmur3_int(-1));
  assert_int_equal(hash_of(MW_T_UINT64, &u64, 8), 1651860712);
  /* ±0 -> 0, every NaN -> the canonical NaN */
  float pz = 0.0f, nz = -0.0f, nan1 = NAN;
  uint32_t nanbits = 0xffc00001u;
  float nan2;
  memcpy(&nan2, &nanbits, 4);
  assert_int_equal(hash_of(MW_T_FLOAT32, &pz, 4), mw_murmur3_int(0));
  assert_int_equal(hash_of(MW_T_FLOAT32, &nz, 4), mw_murmur3_int(0));
  assert_int_equal(hash_of(MW_T_FLOAT32, &nan1, 4), mw_murmur3_int(0x7fc00000));
  assert_int_equal(hash_of(MW_T_FLOAT32, &nan2, 4), mw_murmur3_int(0x7fc00000));
  double dz = -0.0, dnan;
  uint64_t dnanbits = 0xfff0000000000001ull;
  memcpy(&dnan, &dnanbits, 8);
  assert_int_equal(hash_of(MW_T_FLOAT64, &dz, 8), mw_murmur3_long(0));
  assert_int_equal(hash_of(MW_T_FLOAT64, &dnan, 8), mw_murmur3_long(0x7ff8000000000000ll));
  /* null -> hash 0 -> bucket 0 */
  assert_int_equal(hash_of(MW_T_INT64, NULL, 0), 0);
  assert_int_equal(bucket8(MW_T_UTF8, NULL, 0), 0);
  /* bad arguments */
  one_t o;
  int64_t v = 1;
  uint32_t out;
  int32_t h;
  one_make(&o, MW_T_INT64, &v, 8);
  mw_err_t err = {0};
  assert_int_equal(mw_route_bucket_rows(&o.s.fields[0], &o.b.cols[0], 1, 0, &out, &err), -EINVAL);
  assert_int_equal(mw_route_bucket_rows(&o.s.fields[0], &o.b.cols[0], 1, 1025, &out, NULL), -EINVAL);
  assert_int_equal(mw_route_bucket_rows(&o.s.fields[0], &o.b.cols[0], 2, 4, &out, NULL), -EINVAL);
  assert_int_equal(mw_route_hash_value(&o.s.fields[0], &o.b.cols[0], 1, &h), -EINVAL);
  o.s.fields[0].type = MW_T_FSL;
  assert_int_equal(mw_route_hash_value(&o.s.fields[0], &o.b.cols[0], 0, &h), -ENOTSUP);
  one_free(&o);
}

/* ------------------------------------------------------------------ UUIDs */

static void expect_uuid(const uint8_t u[16], const char *want) {
  char s[MW_UUID_STR_BYTES];
  mw_shard_uuid_format(u, s);
  assert_string_equal(s, want);
  uint8_t back[16];
  assert_int_equal(mw_shard_uuid_parse(s, back), 0);
  assert_memory_equal(back, u, 16);
}

static const char *BUCKET_UUIDS[] = {
    "4a388480-a25b-59a8-b058-24217f980256", "8e131bde-8368-54ff-89d9-c2e1cc781b29",
    "e00299e4-8c4b-50fc-bbdd-ce8179135761", "1d8d46d4-1ffd-5f6e-9aea-466d5ea76fdb",
    "cf03bea8-d856-5262-8086-6db02af640c1", "367e4db5-c08e-5e77-b7c4-fefacdf598d8",
    "ef2289a0-bae6-5b12-be90-66e831df3f16", "8bbfeae7-9aba-5077-b693-c16562a7058b"};
#define UNSHARDED_UUID "aa48498d-ac91-59e2-8452-69f46010ace2"

static void test_shard_uuids(void **state) {
  (void)state;
  uint8_t u[16];
  mw_shard_uuid_unsharded(u);
  expect_uuid(u, UNSHARDED_UUID);
  for (uint32_t b = 0; b < 8; b++) {
    mw_shard_uuid_bucket(b, u);
    expect_uuid(u, BUCKET_UUIDS[b]);
  }
  /* identity: "c1" and i64 5, raw and through columns */
  assert_int_equal(mw_shard_uuid_identity_raw("c1", 2, u), 0);
  expect_uuid(u, "4888bff7-7fa5-51da-b466-aee1ec763524");
  one_t o;
  one_make(&o, MW_T_UTF8, "c1", 2);
  memset(u, 0, 16);
  assert_int_equal(mw_shard_uuid_identity(&o.s.fields[0], &o.b.cols[0], 0, u, NULL), 0);
  expect_uuid(u, "4888bff7-7fa5-51da-b466-aee1ec763524");
  one_free(&o);
  int64_t five = 5;
  one_make(&o, MW_T_INT64, &five, 8);
  uint8_t raw[8];
  assert_int_equal(mw_route_scalar_bytes(&o.s.fields[0], &o.b.cols[0], 0, raw, 8, NULL), 8);
  assert_memory_equal(raw, "\x05\0\0\0\0\0\0\0", 8);
  assert_int_equal(mw_route_scalar_bytes(&o.s.fields[0], &o.b.cols[0], 0, raw, 7, NULL), -EINVAL);
  memset(u, 0, 16);
  assert_int_equal(mw_shard_uuid_identity(&o.s.fields[0], &o.b.cols[0], 0, u, NULL), 0);
  expect_uuid(u, "67754d1c-50df-52e2-adfd-f6a3788969b0");
  one_free(&o);
  /* int32 5 uses its own width: a different name, a different UUID. */
  int32_t five32 = 5;
  uint8_t u32[16];
  one_make(&o, MW_T_INT32, &five32, 4);
  assert_int_equal(mw_shard_uuid_identity(&o.s.fields[0], &o.b.cols[0], 0, u32, NULL), 0);
  assert_int_equal(mw_shard_uuid_identity_raw("\x05\0\0\0", 4, u), 0);
  assert_memory_equal(u, u32, 16);
  one_free(&o);
  bool t = true;
  one_make(&o, MW_T_BOOL, &t, 1);
  assert_int_equal(mw_shard_uuid_identity(&o.s.fields[0], &o.b.cols[0], 0, u32, NULL), 0);
  assert_int_equal(mw_shard_uuid_identity_raw("\x01", 1, u), 0);
  assert_memory_equal(u, u32, 16);
  one_free(&o);
  /* null refused, float refused, oversize refused */
  mw_err_t err = {0};
  one_make(&o, MW_T_INT64, NULL, 0);
  assert_int_equal(mw_shard_uuid_identity(&o.s.fields[0], &o.b.cols[0], 0, u, &err), -EINVAL);
  assert_non_null(strstr(err.msg, "null"));
  one_free(&o);
  double d = 1.0;
  one_make(&o, MW_T_FLOAT64, &d, 8);
  assert_int_equal(mw_shard_uuid_identity(&o.s.fields[0], &o.b.cols[0], 0, u, NULL), -ENOTSUP);
  one_free(&o);
  static char big[MW_ROUTE_MAX_IDENTITY_BYTES + 1];
  assert_int_equal(mw_shard_uuid_identity_raw(big, sizeof big, u), -EINVAL);
}

static void test_uuid_text(void **state) {
  (void)state;
  uint8_t u[16], v[16];
  assert_int_equal(mw_shard_uuid_parse("AA48498D-AC91-59E2-8452-69F46010ACE2", u), 0);
  mw_shard_uuid_unsharded(v);
  assert_memory_equal(u, v, 16);
  const char *bad[] = {"", "aa48498d-ac91-59e2-8452-69f46010ace", "aa48498d-ac91-59e2-8452-69f46010ace2x",
                       "aa48498dac91-59e2-8452-69f46010ace2-", "aa48498d-ac91-59e2-8452+69f46010ace2",
                       "ga48498d-ac91-59e2-8452-69f46010ace2", "aa48498d-ac91-59e2-8452-69f46010ac 2",
                       "{aa48498d-ac91-59e2-8452-69f46010ace2}"};
  memcpy(u, v, 16);
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    assert_int_equal(mw_shard_uuid_parse(bad[i], u), -EINVAL);
    assert_memory_equal(u, v, 16); /* untouched on failure */
  }
}

/* Identity values as text: every text the writer shows parses back to the
 * same bytes (so memwalctl takes what status prints), and malformed or
 * out-of-range text is refused. */
static void test_scalar_text(void **state) {
  (void)state;
  struct { mw_type_t type; const char *text; int n; } good[] = {
      {MW_T_INT32, "-2147483648", 4}, {MW_T_INT32, "2147483647", 4}, {MW_T_INT32, "0", 4},
      {MW_T_INT64, "-9223372036854775808", 8}, {MW_T_INT64, "42", 8},
      {MW_T_UINT32, "4294967295", 4}, {MW_T_UINT64, "18446744073709551615", 8},
      {MW_T_BOOL, "true", 1}, {MW_T_BOOL, "false", 1}, {MW_T_UTF8, "eu-west", 7}, {MW_T_UTF8, "", 0},
  };
  for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
    uint8_t raw[16];
    char back[64];
    int n = mw_route_scalar_parse(good[i].type, good[i].text, raw, sizeof raw);
    assert_int_equal(n, good[i].n);
    int len = mw_route_scalar_text(good[i].type, raw, (size_t)n, back, sizeof back);
    assert_int_equal(len, (int)strlen(good[i].text));
    assert_string_equal(back, good[i].text);
  }
  /* the bytes are the router's: int64 42 little-endian, as its UUID input */
  uint8_t raw[8], want[8] = {42, 0, 0, 0, 0, 0, 0, 0};
  assert_int_equal(mw_route_scalar_parse(MW_T_INT64, "42", raw, sizeof raw), 8);
  assert_memory_equal(raw, want, 8);
  struct { mw_type_t type; const char *text; int rc; } bad[] = {
      {MW_T_INT32, "2147483648", -EINVAL}, {MW_T_INT32, "", -EINVAL}, {MW_T_INT32, " 1", -EINVAL},
      {MW_T_INT64, "1x", -EINVAL}, {MW_T_INT64, "9223372036854775808", -EINVAL},
      {MW_T_UINT32, "-1", -EINVAL}, {MW_T_UINT32, "4294967296", -EINVAL}, {MW_T_UINT64, " 1", -EINVAL},
      {MW_T_UINT64, "18446744073709551616", -EINVAL}, {MW_T_BOOL, "yes", -EINVAL},
      {MW_T_FLOAT64, "1.5", -ENOTSUP}, {MW_T_BINARY, "ab", -ENOTSUP}, {MW_T_INT16, "1", -ENOTSUP},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    assert_int_equal(mw_route_scalar_parse(bad[i].type, bad[i].text, raw, sizeof raw), bad[i].rc);
  /* a string longer than the buffer is refused, not cut */
  assert_int_equal(mw_route_scalar_parse(MW_T_UTF8, "123456789", raw, sizeof raw), -EINVAL);
  /* text: a wrong width or a non-identity type is refused; a long value is cut */
  char out[4];
  assert_int_equal(mw_route_scalar_text(MW_T_INT64, raw, 4, out, sizeof out), -EINVAL);
  assert_int_equal(mw_route_scalar_text(MW_T_FLOAT32, raw, 4, out, sizeof out), -ENOTSUP);
  assert_int_equal(mw_route_scalar_text(MW_T_UTF8, (const uint8_t *)"abcdef", 6, out, sizeof out), 6);
  assert_string_equal(out, "abc");
}

/* ------------------------------------------------------------ golden */

static void test_bucket4_golden(void **state) {
  (void)state;
  const char *root = getenv("MW_SOURCE_ROOT");
  assert_non_null(root);
  (void)tu_vectors_dir(); /* the fixtures were derived from these */
  char *dir = tu_strf("%s/tests/lance/data/wal_ids", root);
  char **names;
  size_t n = tu_list_dir(dir, ".txt", &names);
  assert_true(n >= 8);
  unsigned seen_buckets = 0, bucket_shards = 0, unsharded_shards = 0;
  size_t total_ids = 0;
  for (size_t i = 0; i < n; i++) {
    char *path = tu_strf("%s/%s", dir, names[i]);
    size_t len;
    char *txt = (char *)tu_read_file(path, &len);
    if (!txt) fail_msg("cannot read %s", path);
    char shard[64] = "";
    mw_schema_t s;
    mw_batch_t b;
    mw_schema_init(&s);
    assert_int_equal(mw_schema_add(&s, "id", MW_T_INT64, false), 0);
    assert_int_equal(mw_batch_init(&b, &s), 0);
    char *save = NULL;
    for (char *line = strtok_r(txt, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
      if (strncmp(line, "shard ", 6) == 0) snprintf(shard, sizeof shard, "%s", line + 6);
      else if (strncmp(line, "rows ", 5) == 0) continue;
      else {
        int64_t id = strtoll(line, NULL, 10);
        assert_int_equal(mw_column_append_fixed(&b.cols[0], &id, 8), 0);
        b.n_rows++;
      }
    }
    assert_int_equal(strlen(shard), 36);
    if (strncmp(names[i], "bucket4-small__", 15) == 0) {
      assert_true(b.n_rows > 0);
      uint32_t *bk = malloc((size_t)b.n_rows * sizeof *bk);
      assert_non_null(bk);
      assert_int_equal(mw_route_bucket_rows(&s.fields[0], &b.cols[0], b.n_rows, 4, bk, NULL), 0);
      uint8_t u[16];
      char us[MW_UUID_STR_BYTES];
      mw_shard_uuid_bucket(bk[0], u);
      mw_shard_uuid_format(u, us);
      assert_string_equal(us, shard);
      for (int64_t r = 1; r < b.n_rows; r++)
        if (bk[r] != bk[0]) fail_msg("%s row %lld buckets to %u, not %u", names[i], (long long)r, bk[r], bk[0]);
      seen_buckets |= 1u << bk[0];
      bucket_shards++;
      free(bk);
    } else {
      uint8_t u[16];
      char us[MW_UUID_STR_BYTES];
      mw_shard_uuid_unsharded(u);
      mw_shard_uuid_format(u, us);
      assert_string_equal(us, shard);
      unsharded_shards++;
    }
    total_ids += (size_t)b.n_rows;
    mw_batch_free(&b);
    mw_schema_free(&s);
    free(txt);
    free(path);
  }
  assert_int_equal(bucket_shards, 4);
  assert_int_equal(seen_buckets, 0xf);
  assert_true(unsharded_shards >= 4);
  printf("# # route: %zu WAL ids in %u bucket shards and %u unsharded shards route to their "
                "shard UUID\n", total_ids, bucket_shards, unsharded_shards);
  tu_free_names(names, n);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_spec_vectors), cmocka_unit_test(test_type_rules),
      cmocka_unit_test(test_shard_uuids),  cmocka_unit_test(test_uuid_text),
      cmocka_unit_test(test_scalar_text),  cmocka_unit_test(test_bucket4_golden),
  };
  return tu_run_group_name("route", tests, NULL, NULL);
}
