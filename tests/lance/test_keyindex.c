/*
 * test_keyindex.c — compaction's key index of base data files (keyindex.h).
 *
 * The sample of keyindex.c; random int64 and utf8 key columns with
 * duplicates: every probe finds exactly the offsets a brute-force scan does;
 * the name rule; refusals (null keys, a key type mismatch, a file that is
 * not a key index); and every bit flip and truncation of a small index
 * either fails with -EBADMSG or decodes to an index that still passes its
 * own checks (sorted, offsets once, keys in the bloom). The key-range
 * prefilter of find skips only probes outside [min, max]: probes equal to
 * the min and the max, and inside the range, still find their rows.
 * find_sorted (compaction's merge-walk over 1-4 ascending runs of probes:
 * below, above, inside and interleaved with the index's key clusters, runs
 * sharing keys) finds exactly what find does; mw_keyindex_sorted accepts
 * ascending runs with ties and refuses one out of order.
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

#include "lance/keyindex.h"
#include "lance/pk_index.h"

static mw_field_t field(mw_type_t t) {
  return (mw_field_t){.name = (char *)"id", .type = t, .nullable = false, .id = 0, .pk_position = 1};
}

static void put(mw_column_t *c, const mw_field_t *f, int64_t k) {
  if (f->type == MW_T_UTF8) {
    char s[32];
    int n = snprintf(s, sizeof s, "key-%lld", (long long)k);
    assert_int_equal(mw_column_append_bytes(c, s, (size_t)n), 0);
  } else {
    assert_int_equal(mw_column_append_fixed(c, &k, 8), 0);
  }
}

static void column_init(mw_column_t *c, const mw_field_t *f) {
  memset(c, 0, sizeof *c);
  if (f->type == MW_T_UTF8) assert_int_equal(mw_buf_append(&c->offsets, &(int32_t){0}, 4), 0);
}

static void column_free(mw_column_t *c) {
  mw_buf_free(&c->validity);
  mw_buf_free(&c->values);
  mw_buf_free(&c->offsets);
  mw_buf_free(&c->item_validity);
}

static void hashes_of(const mw_field_t *f, const mw_column_t *c, uint64_t *h) {
  const mw_field_t *fp = f;
  const mw_column_t *cp = c;
  assert_int_equal(mw_pk_hash_columns(&fp, &cp, 1, c->length, h, NULL), 0);
}

static void test_sample(void **state) {
  (void)state;
  mw_field_t f = field(MW_T_INT64);
  mw_column_t keys, probe;
  column_init(&keys, &f);
  column_init(&probe, &f);
  put(&keys, &f, 7), put(&keys, &f, 3), put(&keys, &f, 7);
  mw_buf_t file = MW_BUF_INIT;
  mw_err_t err = {0};
  assert_int_equal(mw_keyindex_build(&f, &keys, "abc.lance", &file, &err), 0);
  mw_keyindex_t ki;
  assert_int_equal(mw_keyindex_decode(file.data, file.len, &f, &ki, &err), 0);
  assert_int_equal(ki.n, 3);
  assert_string_equal(ki.data_file, "abc.lance");
  const uint32_t offs[] = {1, 0, 2};
  for (int i = 0; i < 3; i++) assert_int_equal(ki.offsets[i], offs[i]);
  assert_int_equal(ki.bloom.n_blocks, 1); /* 32 bytes, the smallest */
  put(&probe, &f, 7), put(&probe, &f, 4), put(&probe, &f, 3);
  uint64_t h[3];
  hashes_of(&f, &probe, h);
  mw_buf_t out = MW_BUF_INIT;
  assert_int_equal(mw_keyindex_find(&ki, &f, &probe, h, 3, &out), 3);
  const uint32_t *v = (const uint32_t *)(const void *)out.data;
  assert_int_equal(v[0], 0);
  assert_int_equal(v[1], 1);
  assert_int_equal(v[2], 2);
  char name[MW_KEYINDEX_NAME_BYTES];
  assert_true(mw_keyindex_name("abc.lance", name, sizeof name) > 0);
  assert_string_equal(name, "_memwald/keys/abc.keys");
  assert_int_equal(mw_keyindex_name("a/b.lance", name, sizeof name), -EINVAL);
  /* refusals */
  mw_keyindex_t bad;
  mw_field_t s = field(MW_T_UTF8);
  assert_int_equal(mw_keyindex_decode(file.data, file.len, &s, &bad, &err), -EBADMSG);
  mw_keyindex_free(&bad);
  mw_column_t nul = {0};
  mw_field_t nf = f;
  nf.nullable = true;
  assert_int_equal(mw_column_append_null(&nul, &nf), 0);
  mw_buf_t tmp = MW_BUF_INIT;
  assert_int_equal(mw_keyindex_build(&f, &nul, "x.lance", &tmp, NULL), -EINVAL);
  column_free(&nul);
  mw_buf_free(&tmp);
  mw_buf_free(&out);
  mw_keyindex_free(&ki);
  mw_buf_free(&file);
  column_free(&keys);
  column_free(&probe);
}

static uint64_t rnd(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void random_round(mw_type_t t, uint64_t seed) {
  mw_field_t f = field(t);
  int64_t n = 1 + (int64_t)(rnd(&seed) % 5000), space = 1 + n / 2;
  int64_t *k = malloc((size_t)n * sizeof *k);
  mw_column_t keys, probe;
  column_init(&keys, &f);
  column_init(&probe, &f);
  for (int64_t i = 0; i < n; i++) {
    k[i] = (int64_t)(rnd(&seed) % (uint64_t)space) - space / 3;
    put(&keys, &f, k[i]);
  }
  mw_buf_t file = MW_BUF_INIT;
  assert_int_equal(mw_keyindex_build(&f, &keys, "r.lance", &file, NULL), 0);
  mw_keyindex_t ki;
  mw_err_t err = {0};
  int rc = mw_keyindex_decode(file.data, file.len, &f, &ki, &err);
  if (rc < 0) fail_msg("%s", err.msg);
  int64_t np = 200;
  int64_t *pk = malloc((size_t)np * sizeof *pk);
  for (int64_t i = 0; i < np; i++) {
    pk[i] = (int64_t)(rnd(&seed) % (uint64_t)(2 * space)) - space / 3;
    put(&probe, &f, pk[i]);
  }
  uint64_t *h = malloc((size_t)np * sizeof *h);
  hashes_of(&f, &probe, h);
  mw_buf_t out = MW_BUF_INIT;
  int64_t got = mw_keyindex_find(&ki, &f, &probe, h, np, &out);
  uint8_t *want = calloc((size_t)n, 1);
  int64_t nwant = 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < np && !want[i]; j++)
      if (k[i] == pk[j]) want[i] = 1, nwant++;
  assert_int_equal(got, nwant);
  const uint32_t *v = (const uint32_t *)(const void *)out.data;
  for (int64_t i = 0; i < got; i++) {
    assert_true(want[v[i]]);
    if (i > 0) assert_true(v[i] > v[i - 1]);
  }
  free(want);
  mw_buf_free(&out);
  free(h);
  free(pk);
  mw_keyindex_free(&ki);
  mw_buf_free(&file);
  column_free(&keys);
  column_free(&probe);
  free(k);
}

static void test_random(void **state) {
  (void)state;
  for (uint64_t seed = 1; seed <= 40; seed++) random_round(seed % 2 ? MW_T_INT64 : MW_T_UTF8, seed);
}

/* Keys 20 10 16 14 12 18 (offsets 0..5); probes below the min, at the min,
 * inside but absent, inside and present, at the max, above the max. */
static void range_round(mw_type_t t) {
  mw_field_t f = field(t);
  mw_column_t keys, probe, one;
  column_init(&keys, &f);
  column_init(&probe, &f);
  column_init(&one, &f);
  const int64_t ks[] = {20, 10, 16, 14, 12, 18};
  for (int i = 0; i < 6; i++) put(&keys, &f, ks[i]);
  mw_buf_t file = MW_BUF_INIT;
  assert_int_equal(mw_keyindex_build(&f, &keys, "r.lance", &file, NULL), 0);
  mw_keyindex_t ki;
  assert_int_equal(mw_keyindex_decode(file.data, file.len, &f, &ki, NULL), 0);
  /* utf8 order: "key-1" < "key-10" < ... < "key-20" < "key-21" < "key-9" */
  const int64_t ps[] = {1, 10, 15, 16, 20, 21, 9};
  for (int i = 0; i < 7; i++) put(&probe, &f, ps[i]);
  uint64_t h[7];
  hashes_of(&f, &probe, h);
  mw_buf_t out = MW_BUF_INIT;
  assert_int_equal(mw_keyindex_find(&ki, &f, &probe, h, 7, &out), 3);
  const uint32_t *v = (const uint32_t *)(const void *)out.data;
  assert_int_equal(v[0], 0); /* 20, the max */
  assert_int_equal(v[1], 1); /* 10, the min */
  assert_int_equal(v[2], 2); /* 16, inside */
  mw_buf_reset(&out);
  assert_int_equal(mw_keyindex_find(&ki, &f, &probe, h, 1, &out), 0); /* 1: below the min */
  assert_int_equal(mw_keyindex_find(&ki, &f, &probe, h + 5, 0, &out), 0);
  mw_keyindex_free(&ki);
  mw_buf_reset(&file);
  put(&one, &f, 15); /* min = max */
  assert_int_equal(mw_keyindex_build(&f, &one, "o.lance", &file, NULL), 0);
  assert_int_equal(mw_keyindex_decode(file.data, file.len, &f, &ki, NULL), 0);
  assert_int_equal(mw_keyindex_find(&ki, &f, &probe, h, 7, &out), 1); /* the probe 15 */
  mw_buf_reset(&out);
  mw_column_t p15;
  column_init(&p15, &f);
  put(&p15, &f, 14), put(&p15, &f, 15), put(&p15, &f, 16);
  uint64_t h15[3];
  hashes_of(&f, &p15, h15);
  assert_int_equal(mw_keyindex_find(&ki, &f, &p15, h15, 3, &out), 1);
  assert_int_equal(((const uint32_t *)(const void *)out.data)[0], 0);
  column_free(&p15);
  mw_keyindex_free(&ki);
  mw_buf_free(&out);
  mw_buf_free(&file);
  column_free(&keys);
  column_free(&probe);
  column_free(&one);
}

static void test_range(void **state) {
  (void)state;
  range_round(MW_T_INT64);
  range_round(MW_T_UTF8);
}

/* v[0..n) appended to c in key order (the PK sort: signed ints, strings
 * by bytes). */
static void put_sorted(mw_column_t *c, const mw_field_t *f, const int64_t *v, int64_t n) {
  mw_column_t tmp;
  column_init(&tmp, f);
  for (int64_t i = 0; i < n; i++) put(&tmp, f, v[i]);
  uint32_t *rows = malloc((size_t)(n + 1) * sizeof *rows);
  int64_t nulls = 0;
  assert_in_range(mw_pk_sort_rows(f, &tmp, rows, &nulls), 0, 1);
  for (int64_t i = 0; i < n; i++) put(c, f, v[rows[i]]);
  free(rows);
  column_free(&tmp);
}

/* Keys in clusters (like 16 producers with their own id ranges), probes in
 * runs that interleave with them, miss them, or repeat each other. */
static void sorted_round(mw_type_t t, uint64_t seed) {
  mw_field_t f = field(t);
  int64_t clusters = 1 + (int64_t)(rnd(&seed) % 16), per = 1 + (int64_t)(rnd(&seed) % 300);
  int64_t n = clusters * per, stride = 100000;
  int64_t *k = malloc((size_t)n * sizeof *k);
  mw_column_t keys;
  column_init(&keys, &f);
  for (int64_t i = 0; i < n; i++) {
    k[i] = (i % clusters) * stride + (int64_t)(rnd(&seed) % (uint64_t)(per + per / 4 + 1)); /* some twice */
    put(&keys, &f, k[i]);
  }
  mw_buf_t file = MW_BUF_INIT;
  assert_int_equal(mw_keyindex_build(&f, &keys, "s.lance", &file, NULL), 0);
  mw_keyindex_t ki;
  assert_int_equal(mw_keyindex_decode(file.data, file.len, &f, &ki, NULL), 0);
  size_t nr = 1 + rnd(&seed) % 4;
  mw_column_t runs[4], all;
  const mw_column_t *rp[4];
  column_init(&all, &f);
  for (size_t r = 0; r < nr; r++) {
    int64_t np = (int64_t)(rnd(&seed) % 400), *v = malloc((size_t)(np + 1) * sizeof *v);
    int mode = (int)(rnd(&seed) % 4);
    for (int64_t i = 0; i < np; i++) {
      uint64_t x = rnd(&seed);
      if (mode == 0) v[i] = (int64_t)(x % (uint64_t)(clusters * stride)) - stride; /* anywhere, some below */
      else if (mode == 1) v[i] = clusters * stride + (int64_t)(x % 1000); /* all above */
      else if (mode == 2) v[i] = -1 - (int64_t)(x % 1000); /* all below */
      else v[i] = (int64_t)(x % (uint64_t)clusters) * stride + (int64_t)((x >> 20) % (uint64_t)(2 * per + 2));
    }
    /* unique inside a run (a merge's keys are), repeats across runs */
    int64_t w = 0;
    for (int64_t i = 0; i < np; i++) {
      bool dup = false;
      for (int64_t j = 0; j < w && !dup; j++) dup = v[j] == v[i];
      if (!dup) v[w++] = v[i];
    }
    column_init(&runs[r], &f);
    put_sorted(&runs[r], &f, v, w);
    for (int64_t i = 0; i < w; i++) put(&all, &f, v[i]);
    assert_true(mw_keyindex_sorted(&f, &runs[r]));
    rp[r] = &runs[r];
    free(v);
  }
  uint64_t *h = malloc((size_t)(all.length + 1) * sizeof *h);
  if (all.length > 0) hashes_of(&f, &all, h);
  mw_buf_t want = MW_BUF_INIT, got = MW_BUF_INIT;
  int64_t nw = mw_keyindex_find(&ki, &f, &all, h, all.length, &want);
  int64_t ng = mw_keyindex_find_sorted(&ki, &f, rp, nr, &got);
  assert_true(nw >= 0);
  assert_int_equal(ng, nw);
  assert_int_equal(got.len, want.len);
  if (nw > 0) assert_memory_equal(got.data, want.data, want.len);
  mw_buf_free(&want);
  mw_buf_free(&got);
  free(h);
  for (size_t r = 0; r < nr; r++) column_free(&runs[r]);
  column_free(&all);
  mw_keyindex_free(&ki);
  mw_buf_free(&file);
  column_free(&keys);
  free(k);
}

static void test_sorted(void **state) {
  (void)state;
  for (uint64_t seed = 1; seed <= 60; seed++) sorted_round(seed % 2 ? MW_T_INT64 : MW_T_UTF8, seed);
  mw_field_t f = field(MW_T_INT64);
  mw_column_t c;
  column_init(&c, &f);
  assert_true(mw_keyindex_sorted(&f, &c)); /* empty */
  put(&c, &f, -5), put(&c, &f, 3), put(&c, &f, 3);
  assert_true(mw_keyindex_sorted(&f, &c)); /* ties allowed */
  put(&c, &f, 2);
  assert_false(mw_keyindex_sorted(&f, &c));
  column_free(&c);
  /* built from keys already in order (no sort): rows keep their order,
   * ties included, and the index passes decode's checks */
  column_init(&c, &f);
  const int64_t ks[] = {-7, -7, 0, 4, 4, 4, 9};
  for (int i = 0; i < 7; i++) put(&c, &f, ks[i]);
  mw_buf_t file = MW_BUF_INIT;
  assert_int_equal(mw_keyindex_build(&f, &c, "in-order.lance", &file, NULL), 0);
  mw_keyindex_t ki;
  assert_int_equal(mw_keyindex_decode(file.data, file.len, &f, &ki, NULL), 0);
  for (uint32_t i = 0; i < 7; i++) assert_int_equal(ki.offsets[i], i);
  const mw_column_t *rp[1] = {&c};
  mw_buf_t out = MW_BUF_INIT;
  assert_int_equal(mw_keyindex_find_sorted(&ki, &f, rp, 1, &out), 7);
  mw_buf_free(&out);
  mw_keyindex_free(&ki);
  mw_buf_free(&file);
  column_free(&c);
}

static void test_corrupt(void **state) {
  (void)state;
  mw_field_t f = field(MW_T_INT64);
  mw_column_t keys;
  column_init(&keys, &f);
  for (int64_t i = 0; i < 20; i++) put(&keys, &f, (i * 7) % 11);
  mw_buf_t file = MW_BUF_INIT;
  assert_int_equal(mw_keyindex_build(&f, &keys, "c.lance", &file, NULL), 0);
  uint8_t *q = malloc(file.len);
  unsigned refused = 0, decoded = 0;
  for (size_t cut = 0; cut < file.len; cut += 7) {
    mw_keyindex_t ki;
    int rc = mw_keyindex_decode(file.data, cut, &f, &ki, NULL);
    assert_true(rc < 0);
    mw_keyindex_free(&ki);
    refused++;
  }
  for (size_t bit = 0; bit < file.len * 8; bit++) {
    memcpy(q, file.data, file.len);
    q[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    mw_keyindex_t ki;
    int rc = mw_keyindex_decode(q, file.len, &f, &ki, NULL);
    if (rc < 0) {
      refused++;
    } else {
      decoded++;
      assert_int_equal(ki.n, 20);
    }
    mw_keyindex_free(&ki);
  }
  assert_true(refused > file.len);
  print_message("# keyindex: %u corruptions refused, %u harmless\n", refused, decoded);
  free(q);
  mw_buf_free(&file);
  column_free(&keys);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sample),
      cmocka_unit_test(test_random),
      cmocka_unit_test(test_range),
      cmocka_unit_test(test_sorted),
      cmocka_unit_test(test_corrupt),
  };
  return tu_run_group_name("keyindex", tests, NULL, NULL);
}
