/*
 * test_bloom.c — SipHash-1-3, the PK hash, dedup and bloom_filter.bin.
 *
 * Reference values: SipHash-1-3 digests and PK hashes were computed with the
 * independent Python implementation in ../shared/reference/bloom.py (which
 * reproduces Lance's bloom files), over the byte strings spelled out in each
 * test. Golden test: for every SSTable of the vectors, the keys listed in
 * tests/lance/data/sst_keys/ (tools/gen-misc-fixtures.py, from the WAL
 * entries the SSTable covers) rebuild its bloom_filter.bin byte for byte.
 * Per key type: tests/lance/data/bloom_types/ (tools/gen-bloom-fixtures.mjs)
 * holds a bloom_filter.bin Lance's own writer flushed for 300 int32, int64,
 * utf8 and binary keys, which must be rebuilt byte for byte, and Lance's
 * refusal of uint32, uint64 and bool keys, which we must refuse too.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "cases.h"

#include "lance/bloom.h"
#include "testutil.h"

/* ------------------------------------------------------------- fixtures */

typedef struct keys {
  char *sst;    /* path relative to the vectors dir */
  int64_t rows; /* from the shard manifest */
  int64_t *ids;
  size_t n;
} keys_t;

static char *data_dir(void) {
  const char *root = getenv("MW_SOURCE_ROOT");
  assert_non_null(root);
  return tu_strf("%s/tests/lance/data", root);
}

static void keys_load(const char *path, keys_t *k) {
  size_t len;
  char *txt = (char *)tu_read_file(path, &len);
  if (!txt) fail_msg("cannot read fixture %s", path);
  memset(k, 0, sizeof *k);
  k->ids = malloc((len / 2 + 1) * sizeof *k->ids);
  assert_non_null(k->ids);
  char *save = NULL;
  for (char *line = strtok_r(txt, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    if (strncmp(line, "sst ", 4) == 0) k->sst = strdup(line + 4);
    else if (strncmp(line, "rows ", 5) == 0) k->rows = strtoll(line + 5, NULL, 10);
    else if (strncmp(line, "shard ", 6) == 0) continue;
    else k->ids[k->n++] = strtoll(line, NULL, 10);
  }
  free(txt);
  assert_non_null(k->sst);
  assert_int_equal(k->rows, (int64_t)k->n);
}

static void keys_free(keys_t *k) {
  free(k->sst);
  free(k->ids);
}

/* A one-column int64 PK batch. */
static void int64_batch(mw_schema_t *s, mw_batch_t *b, const int64_t *ids, size_t n) {
  mw_schema_init(s);
  int idx = mw_schema_add(s, "id", MW_T_INT64, false);
  assert_int_equal(idx, 0);
  s->fields[0].pk_position = 1;
  assert_int_equal(mw_batch_init(b, s), 0);
  assert_int_equal(mw_buf_append(&b->cols[0].values, ids, n * 8), 0);
  b->cols[0].length = (int64_t)n;
  b->n_rows = (int64_t)n;
  assert_int_equal(mw_batch_validate(b), 0);
}

/* --------------------------------------------------------------- SipHash */

static void test_siphash_reference(void **state) {
  (void)state;
  uint8_t seq[64];
  for (int i = 0; i < 64; i++) seq[i] = (uint8_t)i;
  assert_true(mw_siphash13(0, 0, "", 0) == 0xd1fba762150c532cULL);
  assert_true(mw_siphash13(0, 0, seq, 64) == 0x75e05fd5bbc870c6ULL);
  assert_true(mw_siphash13(0, 0, seq, 15) == 0xf30eb725bb91c9eaULL);
  /* Streaming in uneven pieces gives the digest of the concatenation. */
  for (size_t cut1 = 0; cut1 <= 64; cut1 += 3) {
    for (size_t cut2 = cut1; cut2 <= 64; cut2 += 7) {
      mw_sip13_t s;
      mw_sip13_init(&s, 0, 0);
      mw_sip13_write(&s, seq, cut1);
      mw_sip13_write(&s, seq + cut1, cut2 - cut1);
      mw_sip13_write(&s, seq + cut2, 64 - cut2);
      assert_true(mw_sip13_finish(&s) == 0x75e05fd5bbc870c6ULL);
    }
  }
  /* The key matters. */
  assert_true(mw_siphash13(1, 0, seq, 64) != 0x75e05fd5bbc870c6ULL);
}

/* -------------------------------------------------------------- PK hash */

static uint64_t hash_bytes(const void *p, size_t n) { return mw_siphash13(0, 0, p, n); }

static void test_pk_hash_int(void **state) {
  (void)state;
  /* int64 500: fed 00 f4 01 00 00 00 00 00 00. */
  int64_t ids[] = {500, -1, 0, INT64_MIN};
  mw_schema_t s;
  mw_batch_t b;
  int64_batch(&s, &b, ids, 4);
  uint64_t h[4];
  assert_int_equal(mw_pk_hash_batch(&b, h, NULL), 0);
  assert_true(h[0] == 0x5f4c76bb6281ba3cULL);
  for (int i = 0; i < 4; i++) {
    uint8_t fed[9] = {0};
    mw_store_u64le(fed + 1, (uint64_t)ids[i]);
    assert_true(h[i] == hash_bytes(fed, 9));
  }
  mw_batch_free(&b);
  mw_schema_free(&s);

  /* int32 1: fed 00 01 00 00 00; a nullable column with a null goes through
   * the streaming path and must agree. */
  mw_schema_init(&s);
  assert_int_equal(mw_schema_add(&s, "k", MW_T_INT32, true), 0);
  s.fields[0].pk_position = 1;
  assert_int_equal(mw_batch_init(&b, &s), 0);
  int32_t v1 = 1, v2 = -7;
  assert_int_equal(mw_column_append_fixed(&b.cols[0], &v1, 4), 0);
  assert_int_equal(mw_column_append_fixed(&b.cols[0], &v2, 4), 0);
  b.n_rows = 2;
  uint64_t h2[3];
  assert_int_equal(mw_pk_hash_batch(&b, h2, NULL), 0); /* fast path */
  assert_true(h2[0] == 0x53de5ce8452a2c5aULL);
  assert_int_equal(mw_column_append_null(&b.cols[0], &s.fields[0]), 0);
  b.n_rows = 3;
  uint64_t h3[3];
  assert_int_equal(mw_pk_hash_batch(&b, h3, NULL), 0); /* streaming path */
  assert_true(h3[0] == 0x53de5ce8452a2c5aULL);
  uint8_t fed2[5] = {0, 0xf9, 0xff, 0xff, 0xff};
  assert_true(h2[1] == hash_bytes(fed2, 5) && h3[1] == h2[1]);
  /* null: just the byte 01. */
  assert_true(h3[2] == 0x44bc103b1f8540edULL);
  mw_batch_free(&b);
  mw_schema_free(&s);
}

static void test_pk_hash_bytes(void **state) {
  (void)state;
  mw_schema_t s;
  mw_batch_t b;
  mw_schema_init(&s);
  assert_int_equal(mw_schema_add(&s, "u", MW_T_UTF8, false), 0);
  assert_int_equal(mw_schema_add(&s, "bin", MW_T_BINARY, false), 1);
  s.fields[0].pk_position = 1;
  assert_int_equal(mw_batch_init(&b, &s), 0);
  assert_int_equal(mw_column_append_bytes(&b.cols[0], "key50", 5), 0);
  assert_int_equal(mw_column_append_bytes(&b.cols[1], "abc", 3), 0);
  b.n_rows = 1;
  uint64_t h;
  /* utf8 "key50": fed 00 6b 65 79 35 30 ff. */
  assert_int_equal(mw_pk_hash_batch(&b, &h, NULL), 0);
  assert_true(h == 0xbdd29195d5716986ULL);
  /* binary "abc" alone: fed 00, u64 LE 3, 61 62 63. */
  s.fields[0].pk_position = 0;
  s.fields[1].pk_position = 1;
  assert_int_equal(mw_pk_hash_batch(&b, &h, NULL), 0);
  assert_true(h == 0xf0e2804c09bbbb30ULL);
  /* composite (bin, utf8): the two feeds concatenated. */
  s.fields[0].pk_position = 2;
  assert_int_equal(mw_pk_hash_batch(&b, &h, NULL), 0);
  const uint8_t fed[] = {0, 3, 0, 0, 0, 0, 0, 0, 0, 'a', 'b', 'c', 0, 'k', 'e', 'y', '5', '0', 0xff};
  assert_true(h == hash_bytes(fed, sizeof fed));
  /* no PK, broken positions */
  s.fields[0].pk_position = 0;
  s.fields[1].pk_position = 0;
  mw_err_t err = {0};
  assert_int_equal(mw_pk_hash_batch(&b, &h, &err), -EINVAL);
  assert_non_null(strstr(err.msg, "no primary key"));
  s.fields[0].pk_position = 1;
  s.fields[1].pk_position = 3;
  assert_int_equal(mw_pk_hash_batch(&b, &h, NULL), -EINVAL);
  mw_batch_free(&b);
  mw_schema_free(&s);

  /* Types Lance 12 refuses as keys are refused, naming the allowed ones. */
  static const mw_type_t refused[] = {MW_T_BOOL, MW_T_UINT32, MW_T_UINT64, MW_T_FLOAT64,
                                      MW_T_FLOAT32};
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
    mw_schema_init(&s);
    assert_int_equal(mw_schema_add(&s, "f", refused[i], false), 0);
    s.fields[0].pk_position = 1;
    assert_int_equal(mw_batch_init(&b, &s), 0);
    uint64_t zero = 0;
    size_t width = refused[i] == MW_T_UINT64 || refused[i] == MW_T_FLOAT64 ? 8 : 4;
    if (refused[i] == MW_T_BOOL)
      assert_int_equal(mw_column_append_bool(&b.cols[0], true), 0);
    else
      assert_int_equal(mw_column_append_fixed(&b.cols[0], &zero, width), 0);
    b.n_rows = 1;
    h = 0x1234;
    memset(&err, 0, sizeof err);
    assert_int_equal(mw_pk_hash_batch(&b, &h, &err), -ENOTSUP);
    assert_non_null(strstr(err.msg, "Lance 12 hashes only int32, int64, utf8, large_utf8, binary and large_binary"));
    assert_non_null(strstr(err.msg, mw_type_name(refused[i])));
    assert_true(h == 0x1234); /* nothing written */
    mw_batch_free(&b);
    mw_schema_free(&s);
  }
}

/* ---------------------------------------------------------------- dedup */

static void test_dedup(void **state) {
  (void)state;
  uint32_t out[16];
  /* keys a b a c b a -> newest a@5, b@4, c@3 survive. */
  uint64_t h[] = {11, 22, 11, 33, 22, 11};
  assert_int_equal(mw_dedup_deletions(h, 6, out), 3);
  assert_int_equal(out[0], 0);
  assert_int_equal(out[1], 1);
  assert_int_equal(out[2], 2);
  /* hash 0 is an ordinary key. */
  uint64_t z[] = {0, 5, 0, 0, 5, 7};
  assert_int_equal(mw_dedup_deletions(z, 6, out), 3);
  assert_int_equal(out[0], 0);
  assert_int_equal(out[1], 1);
  assert_int_equal(out[2], 2);
  /* all distinct, empty, one row */
  uint64_t d[] = {1, 2, 3, 4};
  assert_int_equal(mw_dedup_deletions(d, 4, out), 0);
  assert_int_equal(mw_dedup_deletions(d, 0, out), 0);
  assert_int_equal(mw_dedup_deletions(d, 1, out), 0);
  assert_int_equal(mw_dedup_deletions(d, -1, out), -EINVAL);
  /* all equal: everything but the last row. */
  uint64_t e[16];
  for (int i = 0; i < 16; i++) e[i] = 0xdeadbeefULL << 20;
  assert_int_equal(mw_dedup_deletions(e, 16, out), 15);
  for (int i = 0; i < 15; i++) assert_int_equal(out[i], i);
  /* Colliding table slots (same high bits after mixing are likely for a
   * stride of the capacity) are still told apart. */
  uint64_t c[12];
  for (int i = 0; i < 12; i++) c[i] = (uint64_t)(i % 6) << 58;
  assert_int_equal(mw_dedup_deletions(c, 12, out), 6);
  for (int i = 0; i < 6; i++) assert_int_equal(out[i], i);
}

/* Reference dedup by sorting (hash, row): in each run of equal hashes all
 * rows but the last are deleted. */
typedef struct hr {
  uint64_t h;
  uint32_t row;
} hr_t;

static int hr_cmp(const void *a, const void *b) {
  const hr_t *x = a, *y = b;
  if (x->h != y->h) return x->h < y->h ? -1 : 1;
  return x->row < y->row ? -1 : x->row > y->row;
}

static int u32_cmp(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

static size_t dedup_reference(const uint64_t *h, size_t n, uint32_t *out) {
  hr_t *v = malloc(n * sizeof *v);
  assert_non_null(v);
  for (size_t i = 0; i < n; i++) v[i] = (hr_t){h[i], (uint32_t)i};
  qsort(v, n, sizeof *v, hr_cmp);
  size_t cnt = 0;
  for (size_t i = 0; i + 1 < n; i++)
    if (v[i].h == v[i + 1].h) out[cnt++] = v[i].row;
  free(v);
  qsort(out, cnt, sizeof *out, u32_cmp);
  return cnt;
}

static void test_dedup_partitioned(void **state) {
  (void)state;
  /* Sizes around the partitioning threshold and well above it, with hash
   * 0, skewed partitions (equal top bits) and reused contexts. */
  const size_t sizes[] = {4096, 4097, 9000, 70001, 300000};
  mw_dedup_t d = MW_DEDUP_INIT;
  for (size_t t = 0; t < sizeof sizes / sizeof *sizes; t++) {
    size_t n = sizes[t];
    uint64_t *h = malloc(n * sizeof *h);
    uint32_t *got = malloc(n * sizeof *got), *want = malloc(n * sizeof *want);
    assert_true(h && got && want);
    uint64_t x = 7 + t;
    for (size_t i = 0; i < n; i++) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      uint64_t key = (x >> 20) % (n / 2 + 1);
      h[i] = mw_siphash13(0, 0, &key, 8);
      if (key == 3) h[i] = 0;
      if (t == 3 && key % 2) h[i] &= 0x00ffffffffffffffULL; /* one fat partition */
    }
    int64_t got_n = mw_dedup_run(&d, h, (int64_t)n, got);
    size_t want_n = dedup_reference(h, n, want);
    assert_int_equal(got_n, want_n);
    assert_memory_equal(got, want, want_n * sizeof *want);
    free(h);
    free(got);
    free(want);
  }
  mw_dedup_free(&d);
}

/* ---------------------------------------------------------------- bloom */

static void test_bloom_sizing(void **state) {
  (void)state;
  assert_int_equal(mw_bloom_bytes_for(MW_BLOOM_SST_NDV, MW_BLOOM_SST_FPP), MW_BLOOM_SST_BYTES);
  assert_int_equal(mw_bloom_bytes_for(10, 0.1), 32);       /* 57 bits -> 7 B -> min 32 */
  assert_int_equal(mw_bloom_bytes_for(1000, 0.001), 2048); /* 14607 bits -> 1825 B */
  assert_int_equal(mw_bloom_bytes_for(1000, 0.01), 2048);  /* 9681 bits -> 1210 B */
  assert_int_equal(mw_bloom_bytes_for(100, 0.1), 128);     /* 577 bits -> 72 B */
  assert_int_equal(mw_bloom_bytes_for(0, 0.5), 32);
  assert_int_equal(mw_bloom_bytes_for(1ULL << 40, 0.01), MW_BLOOM_MAX_BYTES);
  assert_int_equal(mw_bloom_bytes_for(10, 0.0), 32); /* -inf bits saturate to 0 */
  assert_int_equal(mw_bloom_bytes_for(10, 1.0), 0);
  assert_int_equal(mw_bloom_bytes_for(10, -0.5), 0);
}

static void test_bloom_basic(void **state) {
  (void)state;
  mw_bloom_t bf;
  assert_int_equal(mw_bloom_init(&bf, 48), -EINVAL);
  assert_int_equal(mw_bloom_init(&bf, 16), -EINVAL);
  /* The one-block example of bloom.c's header comment. */
  assert_int_equal(mw_bloom_init(&bf, 32), 0);
  mw_bloom_insert(&bf, 0x5f4c76bb6281ba3cULL);
  mw_buf_t out = MW_BUF_INIT;
  assert_int_equal(mw_bloom_encode(&bf, &out), 0);
  const uint8_t want[32] = {0x00, 0x00, 0x00, 0x80, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x80,
                            0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x20, 0x00, 0x00, 0x20, 0x00,
                            0x00, 0x00, 0x00, 0x00, 0x20, 0x00, 0x00, 0x40, 0x00, 0x00};
  assert_int_equal(out.len, 32);
  assert_memory_equal(out.data, want, 32);
  mw_bloom_free(&bf);
  mw_buf_free(&out);

  /* No false negatives; false positives near the design rate. */
  assert_int_equal(mw_bloom_init(&bf, MW_BLOOM_SST_BYTES), 0);
  uint64_t x = 0x1234567;
  for (int i = 0; i < 8192; i++) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    mw_bloom_insert(&bf, mw_siphash13(0, 0, &x, 8));
  }
  x = 0x1234567;
  for (int i = 0; i < 8192; i++) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    assert_true(mw_bloom_check(&bf, mw_siphash13(0, 0, &x, 8)));
  }
  int fp = 0;
  for (uint64_t i = 0; i < 100000; i++) fp += mw_bloom_check(&bf, mw_siphash13(9, 9, &i, 8));
  printf("# # bloom: %d false positives in 100000 (design 0.057%% at 8192 keys)\n", fp);
  assert_true(fp < 300);
  mw_bloom_clear(&bf);
  assert_false(mw_bloom_check(&bf, 0x5f4c76bb6281ba3cULL));
  mw_bloom_free(&bf);

  /* decode */
  mw_err_t err = {0};
  uint8_t bytes[64] = {0};
  assert_int_equal(mw_bloom_decode(&bf, bytes, 0, &err), -EBADMSG);
  assert_int_equal(mw_bloom_decode(&bf, bytes, 33, NULL), -EBADMSG);
  assert_null(bf.words);
  memcpy(bytes + 32, want, 32);
  assert_int_equal(mw_bloom_decode(&bf, bytes, 64, NULL), 0);
  assert_int_equal(bf.n_blocks, 2);
  mw_bloom_free(&bf);
}

static void test_bloom_golden(void **state) {
  (void)state;
  const char *vec = tu_vectors_dir();
  char *dir = data_dir();
  char *kdir = tu_strf("%s/sst_keys", dir);
  char **names;
  size_t n = tu_list_dir(kdir, ".txt", &names);
  assert_true(n >= 13);
  size_t matched = 0;
  for (size_t i = 0; i < n; i++) {
    char *path = tu_strf("%s/%s", kdir, names[i]);
    keys_t k;
    keys_load(path, &k);
    char *bpath = tu_strf("%s/%s/bloom_filter.bin", vec, k.sst);
    size_t blen;
    uint8_t *golden = tu_read_file(bpath, &blen);
    if (!golden) fail_msg("cannot read %s", bpath);
    assert_int_equal(blen, MW_BLOOM_SST_BYTES);

    mw_schema_t s;
    mw_batch_t b;
    int64_batch(&s, &b, k.ids, k.n);
    uint64_t *h = malloc(k.n * sizeof *h);
    assert_non_null(h);
    assert_int_equal(mw_pk_hash_batch(&b, h, NULL), 0);
    mw_bloom_t bf;
    assert_int_equal(mw_bloom_init(&bf, mw_bloom_bytes_for(MW_BLOOM_SST_NDV, MW_BLOOM_SST_FPP)), 0);
    mw_bloom_insert_many(&bf, h, k.n);
    mw_buf_t out = MW_BUF_INIT;
    assert_int_equal(mw_bloom_encode(&bf, &out), 0);
    assert_int_equal(out.len, blen);
    if (memcmp(out.data, golden, blen) != 0) fail_msg("bloom differs for %s", k.sst);
    matched++;

    /* Reading the golden file back finds every key. */
    mw_bloom_t rd;
    assert_int_equal(mw_bloom_decode(&rd, golden, blen, NULL), 0);
    for (size_t j = 0; j < k.n; j++) assert_true(mw_bloom_check(&rd, h[j]));
    mw_bloom_free(&rd);

    mw_buf_free(&out);
    mw_bloom_free(&bf);
    free(h);
    mw_batch_free(&b);
    mw_schema_free(&s);
    free(golden);
    free(bpath);
    keys_free(&k);
    free(path);
  }
  printf("# # bloom: %zu SSTable bloom_filter.bin files rebuilt byte for byte\n", matched);
  tu_free_names(names, n);
  free(kdir);
  free(dir);
}

/* ------------------------------------------------- bloom per key type */

/* tests/lance/data/bloom_types/<type>.keys: "type <name>", "rows <n>",
 * then one key per line (integers in decimal, utf8/binary as 'x' + hex). */
typedef struct type_fixture {
  const char *name;
  mw_type_t type;
  bool lance_accepts;
  const char *why; /* in <name>.rejected when Lance refuses */
} type_fixture_t;

#define NOT_KEY "not supported as a primary key"
static const type_fixture_t TYPE_FIXTURES[] = {
    {"int32", MW_T_INT32, true, NULL},
    {"int64", MW_T_INT64, true, NULL},
    {"utf8", MW_T_UTF8, true, NULL},
    {"binary", MW_T_BINARY, true, NULL},
    {"large_utf8", MW_T_LARGE_UTF8, true, NULL},
    {"large_binary", MW_T_LARGE_BINARY, true, NULL},
    {"uint32", MW_T_UINT32, false, NOT_KEY},
    {"uint64", MW_T_UINT64, false, NOT_KEY},
    {"bool", MW_T_BOOL, false, NOT_KEY},
    {"int8", MW_T_INT8, false, NOT_KEY},
    {"int16", MW_T_INT16, false, NOT_KEY},
    {"uint8", MW_T_UINT8, false, NOT_KEY},
    {"uint16", MW_T_UINT16, false, NOT_KEY},
    {"date32", MW_T_DATE32, false, NOT_KEY},
    {"timestamp_us", MW_T_TIMESTAMP, false, NOT_KEY},
    /* accepted as a key, then its flush fails: not a key for us */
    {"fixed_size_binary", MW_T_FIXED_BINARY, false, "unsupported type FixedSizeBinary(16) for hashing"},
};

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  fail_msg("bad hex digit '%c'", c);
  return -1;
}

/* Append one key line to column c of type t. */
static void append_key(mw_column_t *c, mw_type_t t, const char *line) {
  if (t == MW_T_INT32) {
    int32_t v = (int32_t)strtol(line, NULL, 10);
    assert_int_equal(mw_column_append_fixed(c, &v, 4), 0);
  } else if (t == MW_T_INT64) {
    int64_t v = strtoll(line, NULL, 10);
    assert_int_equal(mw_column_append_fixed(c, &v, 8), 0);
  } else {
    assert_true(line[0] == 'x');
    size_t n = strlen(line + 1);
    assert_true(n % 2 == 0 && n / 2 <= 256);
    uint8_t bytes[256];
    for (size_t i = 0; i < n / 2; i++)
      bytes[i] = (uint8_t)(hexval(line[1 + 2 * i]) << 4 | hexval(line[2 + 2 * i]));
    assert_int_equal(mw_column_append_bytes(c, bytes, n / 2), 0);
  }
}

/* Load <name>.keys into a one-column PK batch. */
static void type_batch(const char *path, const type_fixture_t *tf, mw_schema_t *s, mw_batch_t *b) {
  size_t len;
  char *txt = (char *)tu_read_file(path, &len);
  if (!txt) fail_msg("cannot read fixture %s", path);
  mw_schema_init(s);
  assert_int_equal(mw_schema_add(s, "k", tf->type, false), 0);
  s->fields[0].pk_position = 1;
  assert_int_equal(mw_batch_init(b, s), 0);
  int64_t rows = -1;
  int line_no = 0;
  char *save = NULL;
  for (char *line = strtok_r(txt, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    line_no++;
    if (line_no == 1) {
      char *want = tu_strf("type %s", tf->name);
      assert_string_equal(line, want);
      free(want);
    } else if (line_no == 2) {
      assert_true(strncmp(line, "rows ", 5) == 0);
      rows = strtoll(line + 5, NULL, 10);
    } else {
      append_key(&b->cols[0], tf->type, line);
    }
  }
  free(txt);
  b->n_rows = b->cols[0].length;
  assert_true(rows > 0);
  assert_int_equal(b->n_rows, rows);
  assert_int_equal(mw_batch_validate(b), 0);
}

static void test_bloom_types_golden(void **state) {
  (void)state;
  char *dir = data_dir();
  size_t rebuilt = 0, refused = 0;
  for (size_t t = 0; t < sizeof TYPE_FIXTURES / sizeof *TYPE_FIXTURES; t++) {
    const type_fixture_t *tf = &TYPE_FIXTURES[t];
    char *kpath = tu_strf("%s/bloom_types/%s.keys", dir, tf->name);
    char *bpath = tu_strf("%s/bloom_types/%s.bloom", dir, tf->name);
    char *rpath = tu_strf("%s/bloom_types/%s.rejected", dir, tf->name);
    size_t blen = 0, rlen = 0;
    uint8_t *golden = tu_read_file(bpath, &blen);
    char *why = (char *)tu_read_file(rpath, &rlen);
    if (!tf->lance_accepts) {
      /* Lance refused the key type; so must we. */
      if (!why || golden) fail_msg("%s: want %s and no .bloom", tf->name, rpath);
      if (strstr(why, tf->why) == NULL) fail_msg("%s: Lance's reason changed: %s", tf->name, why);
      assert_false(mw_type_info(tf->type)->pk);
      mw_schema_t s;
      mw_batch_t b;
      mw_schema_init(&s);
      assert_int_equal(mw_schema_add(&s, "k", tf->type, false), 0);
      s.fields[0].byte_width = 16;
      s.fields[0].pk_position = 1;
      assert_int_equal(mw_batch_init(&b, &s), 0);
      uint64_t h;
      assert_int_equal(mw_pk_hash_batch(&b, &h, NULL), -ENOTSUP);
      mw_batch_free(&b);
      mw_schema_free(&s);
      refused++;
    } else {
      if (!golden || why) fail_msg("%s: want %s and no .rejected", tf->name, bpath);
      assert_int_equal(blen, MW_BLOOM_SST_BYTES);
      mw_schema_t s;
      mw_batch_t b;
      type_batch(kpath, tf, &s, &b);
      uint64_t *h = malloc((size_t)b.n_rows * sizeof *h);
      assert_non_null(h);
      assert_int_equal(mw_pk_hash_batch(&b, h, NULL), 0);
      uint64_t same;
      bool constant = mw_pk_bloom_constant(&s.fields[0], &same);
      assert_int_equal(constant, tf->type == MW_T_LARGE_UTF8 || tf->type == MW_T_LARGE_BINARY);
      if (constant) { /* the value hashes still tell the keys apart (dedup) */
        uint32_t dead[512];
        assert_int_equal(mw_dedup_deletions(h, b.n_rows, dead), 0);
        for (int64_t r = 0; r < b.n_rows; r++) h[r] = same;
      }
      mw_bloom_t bf;
      assert_int_equal(mw_bloom_init(&bf, MW_BLOOM_SST_BYTES), 0);
      mw_bloom_insert_many(&bf, h, (size_t)b.n_rows);
      mw_buf_t out = MW_BUF_INIT;
      assert_int_equal(mw_bloom_encode(&bf, &out), 0);
      assert_int_equal(out.len, blen);
      if (memcmp(out.data, golden, blen) != 0)
        fail_msg("bloom differs from Lance's for %s keys", tf->name);
      /* One flipped hash would no longer match: the check can fail. */
      h[0] ^= 1;
      mw_bloom_clear(&bf);
      mw_bloom_insert_many(&bf, h, (size_t)b.n_rows);
      mw_buf_reset(&out);
      assert_int_equal(mw_bloom_encode(&bf, &out), 0);
      assert_true(memcmp(out.data, golden, blen) != 0);
      printf("# # bloom %s: %lld keys rebuild Lance's bloom_filter.bin byte for byte\n", tf->name,
             (long long)b.n_rows);
      rebuilt++;
      mw_buf_free(&out);
      mw_bloom_free(&bf);
      free(h);
      mw_batch_free(&b);
      mw_schema_free(&s);
    }
    free(golden);
    free(why);
    free(kpath);
    free(bpath);
    free(rpath);
  }
  assert_int_equal(rebuilt, 6);
  assert_int_equal(refused, 10);
  free(dir);
}

/* ---------------------------------------------------------------- speed */

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void test_speed_1m(void **state) {
  (void)state;
  const size_t n = 1000000;
  int64_t *ids = malloc(n * sizeof *ids);
  uint64_t *h = malloc(n * sizeof *h);
  uint32_t *del = malloc(n * sizeof *del);
  assert_true(ids && h && del);
  /* 30 % of the rows reuse an earlier id. */
  uint64_t x = 42;
  int64_t next = 0;
  for (size_t i = 0; i < n; i++) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    ids[i] = ((x >> 33) % 10 < 3 && next > 0) ? (int64_t)((x >> 7) % (uint64_t)next) : next++;
  }
  mw_schema_t s;
  mw_batch_t b;
  int64_batch(&s, &b, ids, n);
  mw_bloom_t bf;
  assert_int_equal(mw_bloom_init(&bf, MW_BLOOM_SST_BYTES), 0);

  /* Run 1 pays the page faults of fresh memory; run 2 is the steady state
   * of a flusher that keeps its mw_dedup_t and arrays. */
  mw_dedup_t d = MW_DEDUP_INIT;
  for (int run = 1; run <= 2; run++) {
    mw_bloom_clear(&bf);
    double t0 = now_ms();
    assert_int_equal(mw_pk_hash_batch(&b, h, NULL), 0);
    double t1 = now_ms();
    int64_t nd = mw_dedup_run(&d, h, (int64_t)n, del);
    double t2 = now_ms();
    mw_bloom_insert_many(&bf, h, n);
    double t3 = now_ms();
    assert_int_equal(nd, (int64_t)n - next);
    printf("# # speed run %d: 1M int64 keys: hash %.1f ms + dedup %.1f ms + bloom %.1f ms = "
                  "%.1f ms (%lld deleted)\n", run, t1 - t0, t2 - t1, t3 - t2, t3 - t0,
                  (long long)nd);
  }
  mw_dedup_free(&d);
  mw_bloom_free(&bf);
  mw_batch_free(&b);
  mw_schema_free(&s);
  free(ids);
  free(h);
  free(del);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_siphash_reference), cmocka_unit_test(test_pk_hash_int),
      cmocka_unit_test(test_pk_hash_bytes),     cmocka_unit_test(test_dedup),
      cmocka_unit_test(test_dedup_partitioned),
      cmocka_unit_test(test_bloom_sizing),      cmocka_unit_test(test_bloom_basic),
      cmocka_unit_test(test_bloom_golden),      cmocka_unit_test(test_bloom_types_golden),
      cmocka_unit_test(test_speed_1m),
  };
  return tu_run_group_name("bloom", tests, NULL, NULL);
}
