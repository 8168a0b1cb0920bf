/*
 * test_shard_manifest.c — ShardManifest codec, bit-reversed names, version
 * hint and the latest-version search (memwal.md §1.2, §1.3, §3).
 *
 * Golden: every manifest/<64 digits>.binpb under $MW_VECTORS decodes, re-encodes to the
 * identical bytes, and its version equals the version in its file name; every
 * manifest/version_hint.json parses and names the newest .binpb.
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

#include "lance/shard_manifest.h"
#include "testutil.h"

static const uint8_t V1_BYTES[] = {0x08, 0x01, 0x10, 0x01, 0x30, 0x01, 0x50, 0x01, 0x5a, 0x12,
                                   0x0a, 0x10, 0xaa, 0x48, 0x49, 0x8d, 0xac, 0x91, 0x59, 0xe2,
                                   0x84, 0x52, 0x69, 0xf4, 0x60, 0x10, 0xac, 0xe2};

static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

static void test_golden_roundtrip(void **state) {
  (void)state;
  char **paths;
  size_t n = tu_find_files(tu_vectors_dir(), ".binpb", &paths);
  assert_true(n >= 10);
  size_t checked = 0;
  for (size_t i = 0; i < n; i++) {
    if (strstr(paths[i], "/manifest/") == NULL) continue;
    size_t len;
    uint8_t *bytes = tu_read_file(paths[i], &len);
    assert_non_null(bytes);
    mw_shard_manifest_t m;
    mw_err_t err = {0};
    int rc = mw_shard_manifest_decode(bytes, len, &m, &err);
    if (rc != 0) fail_msg("%s: %s", paths[i], err.msg);
    uint64_t v;
    assert_int_equal(mw_shard_manifest_name_parse(base_name(paths[i]), &v), 0);
    assert_int_equal(m.version, v);
    assert_true(m.has_shard_id);
    assert_true(m.writer_epoch >= 1);
    assert_true(m.current_generation >= 1);
    assert_int_equal(m.current_generation, m.n_sstables + 1);
    mw_buf_t out = MW_BUF_INIT;
    assert_int_equal(mw_shard_manifest_encode(&m, &out), 0);
    assert_int_equal(out.len, len);
    assert_memory_equal(out.data, bytes, len);
    mw_buf_free(&out);
    mw_shard_manifest_free(&m);
    free(bytes);
    checked++;
  }
  printf("# shard manifests re-encoded byte-identical: %zu\n", checked);
  assert_true(checked >= 10);
  tu_free_names(paths, n);
}

static void test_reference_v2(void **state) {
  (void)state;
  char *p = tu_strf("%s/unsharded-small/t.lance/_mem_wal/aa48498d-ac91-59e2-8452-69f46010ace2/"
                    "manifest/0100000000000000000000000000000000000000000000000000000000000000.binpb",
                    tu_vectors_dir());
  size_t len;
  uint8_t *bytes = tu_read_file(p, &len);
  assert_non_null(bytes);
  mw_shard_manifest_t m;
  assert_int_equal(mw_shard_manifest_decode(bytes, len, &m, NULL), 0);
  assert_int_equal(m.version, 2);
  assert_int_equal(m.writer_epoch, 1);
  assert_int_equal(m.replay_after_wal_entry_position, 3);
  assert_int_equal(m.wal_entry_position_last_seen, 3);
  assert_int_equal(m.current_generation, 2);
  assert_int_equal(m.n_sstables, 1);
  assert_int_equal(m.sstables[0].generation, 1);
  assert_string_equal(m.sstables[0].path, "aa4a1b97_gen_1");
  assert_true(m.sstables[0].physical_rows > 0);
  assert_int_equal(m.sstables[0].primary_key_bytes, 8 * m.sstables[0].physical_rows);
  assert_int_equal(m.shard_spec_id, 1);
  assert_int_equal(m.status, MW_SHARD_ACTIVE);
  static const uint8_t uuid[16] = {0xaa, 0x48, 0x49, 0x8d, 0xac, 0x91, 0x59, 0xe2,
                                   0x84, 0x52, 0x69, 0xf4, 0x60, 0x10, 0xac, 0xe2};
  assert_memory_equal(m.shard_id, uuid, 16);
  mw_shard_manifest_free(&m);
  free(bytes);
  free(p);
}

static void test_build_v1(void **state) {
  (void)state;
  mw_shard_manifest_t m;
  mw_shard_manifest_init(&m);
  m.version = 1;
  m.writer_epoch = 1;
  m.current_generation = 1;
  m.shard_spec_id = 1;
  m.has_shard_id = true;
  memcpy(m.shard_id, V1_BYTES + 12, 16);
  mw_buf_t out = MW_BUF_INIT;
  assert_int_equal(mw_shard_manifest_encode(&m, &out), 0);
  assert_int_equal(out.len, sizeof V1_BYTES);
  assert_memory_equal(out.data, V1_BYTES, sizeof V1_BYTES);

  /* Copy, add an sstable, seal, field entry: survives a round trip. */
  mw_shard_manifest_t c, d;
  mw_shard_manifest_init(&c);
  assert_int_equal(mw_shard_manifest_copy(&c, &m), 0);
  assert_int_equal(mw_shard_manifest_add_sstable(&c, 1, "0badf00d_gen_1", 10, 0, 24), 0);
  c.status = MW_SHARD_SEALED;
  c.version = 2;
  mw_buf_reset(&out);
  assert_int_equal(mw_shard_manifest_encode(&c, &out), 0);
  assert_int_equal(mw_shard_manifest_decode(out.data, out.len, &d, NULL), 0);
  assert_int_equal(d.status, MW_SHARD_SEALED);
  assert_int_equal(d.n_sstables, 1);
  assert_string_equal(d.sstables[0].path, "0badf00d_gen_1");
  assert_int_equal(d.sstables[0].in_memory_bytes, 10);
  assert_int_equal(d.sstables[0].physical_rows, 0);
  assert_int_equal(d.sstables[0].primary_key_bytes, 24);
  mw_shard_manifest_free(&d);
  mw_shard_manifest_free(&c);
  mw_shard_manifest_free(&m);
  mw_buf_free(&out);
}

static void test_decode_lenient(void **state) {
  (void)state;
  /* Reordered fields + an unknown field 99 (varint) + status 7 (unknown). */
  const uint8_t b[] = {0x50, 0x01, 0x08, 0x05, 0x98, 0x06, 0x2a, 0x78, 0x07, 0x10, 0x03};
  mw_shard_manifest_t m;
  mw_err_t err = {0};
  assert_int_equal(mw_shard_manifest_decode(b, sizeof b, &m, &err), 0);
  assert_int_equal(m.version, 5);
  assert_int_equal(m.writer_epoch, 3);
  assert_int_equal(m.shard_spec_id, 1);
  assert_int_equal(m.status, MW_SHARD_ACTIVE);
  assert_false(m.has_shard_id);
  mw_shard_manifest_free(&m);
  /* SEALED */
  const uint8_t s[] = {0x08, 0x01, 0x78, 0x01};
  assert_int_equal(mw_shard_manifest_decode(s, sizeof s, &m, NULL), 0);
  assert_int_equal(m.status, MW_SHARD_SEALED);
  mw_shard_manifest_free(&m);
}

static void expect_bad(const uint8_t *b, size_t n, const char *needle) {
  mw_shard_manifest_t m;
  mw_err_t err = {0};
  assert_int_equal(mw_shard_manifest_decode(b, n, &m, &err), -EBADMSG);
  assert_int_equal(err.code, -EBADMSG);
  if (needle && strstr(err.msg, needle) == NULL) fail_msg("reason '%s' lacks '%s'", err.msg, needle);
  mw_shard_manifest_free(&m);
}

static void test_decode_malformed(void **state) {
  (void)state;
  const uint8_t trunc_varint[] = {0x08, 0x80};
  expect_bad(trunc_varint, sizeof trunc_varint, "byte 0");
  const uint8_t long_len[] = {0x08, 0x01, 0x42, 0x10, 0x08};
  expect_bad(long_len, sizeof long_len, "byte 2");
  const uint8_t group[] = {0x0b};
  expect_bad(group, sizeof group, "wire type");
  const uint8_t bad_uuid[] = {0x5a, 0x03, 0x0a, 0x01, 0xaa};
  expect_bad(bad_uuid, sizeof bad_uuid, "shard_id");
  const uint8_t slash_path[] = {0x42, 0x05, 0x12, 0x03, '.', '/', 'x'};
  expect_bad(slash_path, sizeof slash_path, "path");
  const uint8_t nul_path[] = {0x42, 0x05, 0x12, 0x03, 'a', 0, 'x'};
  expect_bad(nul_path, sizeof nul_path, "NUL");
  const uint8_t wrong_wire[] = {0x42, 0x01}; /* sstables as varint */
  expect_bad(wrong_wire, sizeof wrong_wire, NULL);
  /* Every truncation and single-byte corruption of the golden v1: never a
   * crash, either an error or a decodable manifest. */
  for (size_t k = 0; k < sizeof V1_BYTES; k++) {
    mw_shard_manifest_t m;
    int rc = mw_shard_manifest_decode(V1_BYTES, k, &m, NULL);
    assert_true(rc == 0 || rc == -EBADMSG);
    mw_shard_manifest_free(&m);
    for (int x = 0; x < 256; x += 17) {
      uint8_t c[sizeof V1_BYTES];
      memcpy(c, V1_BYTES, sizeof c);
      c[k] ^= (uint8_t)x;
      rc = mw_shard_manifest_decode(c, sizeof c, &m, NULL);
      assert_true(rc == 0 || rc == -EBADMSG);
      mw_shard_manifest_free(&m);
    }
  }
}

static void test_limits(void **state) {
  (void)state;
  /* 100 001 empty sstables: 2 bytes each. */
  size_t n = (MW_SHARD_MAX_SSTABLES + 1) * 2;
  uint8_t *b = malloc(n);
  for (size_t i = 0; i < n; i += 2) {
    b[i] = 0x42;
    b[i + 1] = 0x00;
  }
  expect_bad(b, n, "sstables");
  free(b);
  /* path of 4097 bytes */
  n = 3 + 3 + 4097;
  b = malloc(n);
  b[0] = 0x42;
  b[1] = 0x84;
  b[2] = 0x20; /* 4100 = 0x1004 -> 84 20 */
  b[3] = 0x12;
  b[4] = 0x81;
  b[5] = 0x20; /* 4097 -> 81 20 */
  memset(b + 6, 'a', 4097);
  expect_bad(b, n, "path");
  free(b);
  mw_shard_manifest_t m;
  mw_shard_manifest_init(&m);
  char longp[MW_SHARD_MAX_PATH_BYTES + 2];
  memset(longp, 'a', sizeof longp - 1);
  longp[sizeof longp - 1] = 0;
  assert_int_equal(mw_shard_manifest_add_sstable(&m, 1, longp, 0, 0, 0), -EINVAL);
  mw_shard_manifest_free(&m);
}

static void test_bitrev_names(void **state) {
  (void)state;
  char name[MW_BITREV_NAME_BYTES];
  static const struct { uint64_t n; const char *prefix; } ex[] = {
      {1, "1000"}, {2, "0100"}, {3, "1100"}, {4, "0010"}, {5, "1010"}, {7, "1110"}};
  for (size_t i = 0; i < sizeof ex / sizeof ex[0]; i++) {
    assert_int_equal(mw_shard_manifest_name(ex[i].n, name, sizeof name), 70);
    assert_memory_equal(name, ex[i].prefix, 4);
    for (int k = 4; k < 64; k++) assert_int_equal(name[k], '0');
    assert_string_equal(name + 64, ".binpb");
    uint64_t v = 0;
    assert_int_equal(mw_bitrev_parse(name, &v), 0);
    assert_int_equal(v, ex[i].n);
  }
  assert_int_equal(mw_wal_entry_name(1, name, sizeof name), 70);
  assert_string_equal(name, "1000000000000000000000000000000000000000000000000000000000000000.arrow");
  uint64_t big = 0x8000000000000001ull, v;
  assert_int_equal(mw_bitrev_name(big, NULL, name, sizeof name), 64);
  assert_int_equal(name[0], '1');
  assert_int_equal(name[63], '1');
  assert_int_equal(mw_bitrev_parse(name, &v), 0);
  assert_true(v == big);
  assert_int_equal(mw_bitrev_name(1, ".binpb", name, 70), -ENOSPC);
  /* Parse rules: text before the first '.', exactly 64 binary digits. */
  const char *ok_tmp = "1100000000000000000000000000000000000000000000000000000000000000.arrow.tmp.ab";
  assert_int_equal(mw_bitrev_parse(ok_tmp, &v), 0);
  assert_int_equal(v, 3);
  assert_int_equal(mw_shard_manifest_name_parse(ok_tmp, &v), -EINVAL); /* needs .binpb */
  assert_int_equal(mw_bitrev_parse("version_hint.json", &v), -EINVAL);
  assert_int_equal(mw_bitrev_parse("100000000000000000000000000000000000000000000000000000000000000.binpb", &v),
                   -EINVAL); /* 63 digits */
  assert_int_equal(mw_bitrev_parse("10000000000000000000000000000000000000000000000000000000000000000", &v),
                   -EINVAL); /* 65 digits */
  assert_int_equal(mw_bitrev_parse("1000000000000000000000000000000000000000000000000000000000000002.binpb", &v),
                   -EINVAL);
  assert_int_equal(mw_bitrev_parse("", &v), -EINVAL);
  assert_int_equal(mw_bitrev_parse(".1000000000000000000000000000000000000000000000000000000000000000", &v),
                   -EINVAL);
}

static void test_version_hint(void **state) {
  (void)state;
  char s[64];
  assert_int_equal(mw_version_hint_encode(2, s, sizeof s), 13);
  assert_string_equal(s, "{\"version\":2}");
  assert_int_equal(mw_version_hint_encode(UINT64_MAX, s, sizeof s), 32);
  assert_int_equal(mw_version_hint_encode(2, s, 13), -ENOSPC);
  uint64_t v = 0;
  static const struct { const char *text; uint64_t want; } good[] = {
      {"{\"version\":2}", 2},
      {" { \"version\" : 17 } \n", 17},
      {"{\"version\":0}", 0},
      {"{\"version\":18446744073709551615}", UINT64_MAX},
  };
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    assert_int_equal(mw_version_hint_parse((const uint8_t *)good[i].text, strlen(good[i].text), &v, NULL), 0);
    assert_true(v == good[i].want);
  }
  static const char *bad[] = {"", "{}", "{\"version\":}", "{\"version\":-1}", "{\"version\":1.5}",
                              "{\"version\":\"2\"}", "{\"version\":2,\"x\":1}", "{\"version\":2}x",
                              "{\"version\":18446744073709551616}", "{\"version\":01}",
                              "{\"Version\":2}", "{\"version\":2", "null"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    mw_err_t err = {0};
    v = 99;
    assert_int_equal(mw_version_hint_parse((const uint8_t *)bad[i], strlen(bad[i]), &v, &err), -EBADMSG);
    assert_int_equal(v, 99);
    assert_true(err.msg[0] != 0);
  }
  /* Golden hints name the newest manifest in their directory. */
  char **paths;
  size_t n = tu_find_files(tu_vectors_dir(), "/manifest/version_hint.json", &paths);
  assert_true(n >= 5);
  for (size_t i = 0; i < n; i++) {
    size_t len;
    uint8_t *b = tu_read_file(paths[i], &len);
    assert_non_null(b);
    assert_int_equal(mw_version_hint_parse(b, len, &v, NULL), 0);
    assert_int_equal(mw_version_hint_encode(v, s, sizeof s), (int)len);
    assert_memory_equal(s, b, len);
    char *dir = strdup(paths[i]);
    *strrchr(dir, '/') = 0;
    char **names;
    size_t k = tu_list_dir(dir, ".binpb", &names);
    uint64_t maxv = 0;
    for (size_t j = 0; j < k; j++) {
      uint64_t x;
      assert_int_equal(mw_shard_manifest_name_parse(names[j], &x), 0);
      if (x > maxv) maxv = x;
    }
    assert_int_equal(v, maxv);
    assert_int_equal(k, maxv); /* gap-free 1..max */
    tu_free_names(names, k);
    free(dir);
    free(b);
  }
  tu_free_names(paths, n);
}

/* Drive the search against a set of existing versions; count probes. */
static uint64_t run_search(const uint8_t *exists, size_t n_exists, uint64_t hint, uint32_t batch,
                           size_t *probes) {
  mw_latest_search_t s;
  mw_latest_search_start(&s, hint, batch);
  size_t total = 0;
  for (int rounds = 0; !mw_latest_search_done(&s); rounds++) {
    assert_true(rounds < 1000);
    uint64_t v[MW_LATEST_MAX_BATCH];
    size_t k = mw_latest_search_next(&s, v, MW_LATEST_MAX_BATCH);
    assert_true(k > 0);
    /* Feed in reverse order: the machine must not care. */
    for (size_t i = k; i-- > 0;) {
      bool e = v[i] < n_exists && exists[v[i]];
      assert_int_equal(mw_latest_search_feed(&s, v[i], e), 0);
      total++;
    }
  }
  if (probes) *probes = total;
  return mw_latest_search_result(&s);
}

static void test_latest_search(void **state) {
  (void)state;
  uint8_t ex[32] = {0};
  size_t probes;
  /* New shard: nothing exists. Probe 1 (hint), then 1,2. */
  assert_int_equal(run_search(ex, sizeof ex, 0, 0, &probes), 0);
  assert_int_equal(probes, 3);
  for (int i = 1; i <= 5; i++) ex[i] = 1;
  /* Exact hint: probe 5, then 6,7. */
  assert_int_equal(run_search(ex, sizeof ex, 5, 2, &probes), 5);
  assert_int_equal(probes, 3);
  /* Stale hint 2: 2 exists, scan 3,4 then 5,6 then 7,8 (none) -> 5. */
  assert_int_equal(run_search(ex, sizeof ex, 2, 2, &probes), 5);
  assert_int_equal(probes, 1 + 2 + 2 + 2);
  /* Unreadable hint (0) behaves as 1. */
  assert_int_equal(run_search(ex, sizeof ex, 0, 2, NULL), 5);
  /* Hint too high: 9 missing -> probe 1 (exists) -> scan. */
  assert_int_equal(run_search(ex, sizeof ex, 9, 2, &probes), 5);
  assert_int_equal(probes, 1 + 1 + 2 + 2 + 2);
  /* Hint too high and no version 1 -> 0 then scan 1,2 (both missing). */
  uint8_t none_at_1[32] = {0};
  none_at_1[3] = 1;
  assert_int_equal(run_search(none_at_1, sizeof none_at_1, 9, 2, NULL), 0);
  /* Gap of one inside a batch: 1..5, 7 exists (6 missing): batch {6,7}
   * finds 7 and the scan continues. */
  ex[7] = 1;
  assert_int_equal(run_search(ex, sizeof ex, 5, 2, NULL), 7);
  /* A whole missing batch hides later versions (Lance's behaviour). */
  ex[7] = 0;
  ex[8] = 1;
  assert_int_equal(run_search(ex, sizeof ex, 5, 2, NULL), 5);
  /* A bigger batch sees past the gap. */
  assert_int_equal(run_search(ex, sizeof ex, 5, 4, NULL), 8);
  /* Batch 1. */
  assert_int_equal(run_search(ex, sizeof ex, 1, 1, NULL), 5);
  /* Feeding protocol errors. */
  mw_latest_search_t s;
  mw_latest_search_start(&s, 3, 2);
  uint64_t v[4];
  assert_int_equal(mw_latest_search_next(&s, v, 4), 1);
  assert_int_equal(v[0], 3);
  assert_int_equal(mw_latest_search_feed(&s, 4, true), -EINVAL);
  assert_int_equal(mw_latest_search_feed(&s, 3, true), 0);
  assert_int_equal(mw_latest_search_next(&s, v, 4), 2);
  assert_int_equal(v[0], 4);
  assert_int_equal(v[1], 5);
  assert_int_equal(mw_latest_search_feed(&s, 5, false), 0);
  assert_int_equal(mw_latest_search_feed(&s, 5, false), -EINVAL);
  assert_int_equal(mw_latest_search_next(&s, v, 4), 1); /* only 4 outstanding */
  assert_int_equal(v[0], 4);
  assert_int_equal(mw_latest_search_feed(&s, 4, false), 0);
  assert_true(mw_latest_search_done(&s));
  assert_int_equal(mw_latest_search_result(&s), 3);
  assert_int_equal(mw_latest_search_next(&s, v, 4), 0);
  /* Hint at u64 max: no overflow. */
  mw_latest_search_start(&s, UINT64_MAX, 2);
  assert_int_equal(mw_latest_search_next(&s, v, 4), 1);
  assert_int_equal(mw_latest_search_feed(&s, UINT64_MAX, true), 0);
  assert_true(mw_latest_search_done(&s));
  assert_true(mw_latest_search_result(&s) == UINT64_MAX);
}

/* The golden shard directories: searching with their hint (and with a stale
 * and an unreadable hint) finds the newest manifest on disk. */
static void test_latest_search_golden(void **state) {
  (void)state;
  char **paths;
  size_t n = tu_find_files(tu_vectors_dir(), "/manifest/version_hint.json", &paths);
  assert_true(n >= 5);
  for (size_t i = 0; i < n; i++) {
    char *dir = strdup(paths[i]);
    *strrchr(dir, '/') = 0;
    char **names;
    size_t k = tu_list_dir(dir, ".binpb", &names);
    uint8_t ex[64] = {0};
    uint64_t maxv = 0;
    for (size_t j = 0; j < k; j++) {
      uint64_t x;
      assert_int_equal(mw_shard_manifest_name_parse(names[j], &x), 0);
      assert_true(x < sizeof ex);
      ex[x] = 1;
      if (x > maxv) maxv = x;
    }
    assert_int_equal(run_search(ex, sizeof ex, maxv, 2, NULL), maxv);
    assert_int_equal(run_search(ex, sizeof ex, 1, 2, NULL), maxv);
    assert_int_equal(run_search(ex, sizeof ex, 0, 2, NULL), maxv);
    assert_int_equal(run_search(ex, sizeof ex, maxv + 10, 2, NULL), maxv);
    tu_free_names(names, k);
    free(dir);
  }
  tu_free_names(paths, n);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_golden_roundtrip),
      cmocka_unit_test(test_reference_v2),
      cmocka_unit_test(test_build_v1),
      cmocka_unit_test(test_decode_lenient),
      cmocka_unit_test(test_decode_malformed),
      cmocka_unit_test(test_limits),
      cmocka_unit_test(test_bitrev_names),
      cmocka_unit_test(test_version_hint),
      cmocka_unit_test(test_latest_search),
      cmocka_unit_test(test_latest_search_golden),
  };
  return tu_run_group_name("shard_manifest", tests, NULL, NULL);
}
