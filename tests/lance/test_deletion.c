/*
 * test_deletion.c — deletion files (roaring portable format) and their names.
 *
 * Golden test: for every SSTable in the vectors, its `_deletions/<name>.bin`
 * decodes, re-encodes to identical bytes, is named 0-1-<u64>.bin, and holds
 * exactly the offsets our dedup (bloom.h) computes from the SSTable's keys
 * (tests/lance/data/sst_keys/, tools/gen-misc-fixtures.py). Corruption
 * tests: every truncation and every single-bit flip of a two-container file
 * and of each golden file either fails cleanly or decodes to a bitmap that
 * re-encodes to the mutated bytes.
 *
 * The ARROW_ARRAY kind: the two `.arrow` files LanceDB 0.39.0 wrote in
 * tests/lance/data/compact/lsm_update (tools/gen-compact-fixtures.mjs) hold
 * exactly the offsets its update and delete removed; every truncation and
 * bit flip of the small one fails cleanly or decodes to a valid set. The
 * union of sorted sets is checked against a brute-force bitmap.
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

#include "lance/bloom.h"
#include "lance/deletion.h"
#include "testutil.h"

/* Decode, then re-encode: 0 when the bytes round-trip (no-run files must
 * come back identical), else the decode error. */
static int roundtrip(const uint8_t *p, size_t len, uint64_t max_rows) {
  uint32_t *offs;
  size_t n;
  int rc = mw_deletion_decode(p, len, max_rows, &offs, &n, NULL);
  if (rc < 0) {
    assert_null(offs);
    assert_int_equal(n, 0);
    return rc;
  }
  uint64_t card;
  assert_int_equal(mw_deletion_cardinality(p, len, &card, NULL), 0);
  assert_int_equal(card, n);
  mw_buf_t out = MW_BUF_INIT;
  assert_int_equal(mw_deletion_encode(offs, n, &out, NULL), 0);
  if (mw_load_u32le(p) == 12346) { /* the run variant re-encodes differently */
    assert_int_equal(out.len, len);
    assert_memory_equal(out.data, p, len);
  }
  mw_buf_free(&out);
  free(offs);
  return 0;
}

/* Every truncation fails; every single-bit flip fails or round-trips. */
static void mutate_all(const uint8_t *p, size_t len, uint64_t max_rows) {
  for (size_t cut = 0; cut < len; cut++) {
    uint8_t *q = malloc(cut + 1); /* exact size so ASan sees overreads */
    assert_non_null(q);
    memcpy(q, p, cut);
    assert_true(roundtrip(q, cut, max_rows) < 0);
    free(q);
  }
  uint8_t *q = malloc(len);
  assert_non_null(q);
  for (size_t i = 0; i < len; i++) {
    for (int bit = 0; bit < 8; bit++) {
      memcpy(q, p, len);
      q[i] ^= (uint8_t)(1u << bit);
      int rc = roundtrip(q, len, max_rows);
      assert_true(rc == 0 || rc == -EBADMSG);
    }
  }
  free(q);
}

static void test_encode_layout(void **state) {
  (void)state;
  /* lance-files.md §5: offsets 0..1999 -> one array container, 4016 bytes. */
  uint32_t *offs = malloc(70010 * sizeof *offs);
  assert_non_null(offs);
  for (uint32_t i = 0; i < 2000; i++) offs[i] = i;
  mw_buf_t out = MW_BUF_INIT;
  assert_int_equal(mw_deletion_encode(offs, 2000, &out, NULL), 0);
  assert_int_equal(out.len, 4016);
  const uint8_t head[] = {0x3a, 0x30, 0, 0, 1, 0, 0, 0, 0, 0, 0xcf, 0x07, 0x10, 0, 0, 0, 0, 0, 1, 0};
  assert_memory_equal(out.data, head, sizeof head);
  assert_int_equal(roundtrip(out.data, out.len, 2000), 0);
  assert_int_equal(roundtrip(out.data, out.len, 1999), -EBADMSG); /* offset 1999 out of range */

  /* bitmap container (5000 values in key 0) + array container (key 1). */
  size_t n = 0;
  for (uint32_t i = 0; i < 5000; i++) offs[n++] = i;
  for (uint32_t i = 70000; i < 70010; i++) offs[n++] = i;
  mw_buf_reset(&out);
  assert_int_equal(mw_deletion_encode(offs, n, &out, NULL), 0);
  assert_int_equal(out.len, 8 + 8 + 8 + 8192 + 20);
  const uint8_t head2[] = {0x3a, 0x30, 0, 0, 2, 0, 0, 0, 0, 0, 0x87, 0x13, 1, 0, 9, 0,
                           24, 0, 0, 0, 0x18, 0x20, 0, 0};
  assert_memory_equal(out.data, head2, sizeof head2);
  assert_int_equal(out.data[24], 0xff);                       /* values 0..7 */
  assert_int_equal(mw_load_u16le(out.data + 24 + 8192), 70000 - 65536);
  uint32_t *dec;
  size_t nd;
  assert_int_equal(mw_deletion_decode(out.data, out.len, 70010, &dec, &nd, NULL), 0);
  assert_int_equal(nd, n);
  assert_memory_equal(dec, offs, n * sizeof *dec);
  free(dec);
  mutate_all(out.data, out.len, 70010);

  /* empty bitmap: cookie + zero containers */
  mw_buf_reset(&out);
  assert_int_equal(mw_deletion_encode(NULL, 0, &out, NULL), 0);
  const uint8_t empty[] = {0x3a, 0x30, 0, 0, 0, 0, 0, 0};
  assert_int_equal(out.len, 8);
  assert_memory_equal(out.data, empty, 8);
  assert_int_equal(mw_deletion_decode(out.data, out.len, 0, &dec, &nd, NULL), 0);
  assert_int_equal(nd, 0);
  assert_null(dec);

  /* not strictly ascending */
  uint32_t bad1[] = {1, 3, 2}, bad2[] = {1, 1};
  mw_err_t err = {0};
  size_t before = out.len;
  assert_int_equal(mw_deletion_encode(bad1, 3, &out, &err), -EINVAL);
  assert_int_equal(mw_deletion_encode(bad2, 2, &out, NULL), -EINVAL);
  assert_int_equal(out.len, before);
  assert_non_null(strstr(err.msg, "offset 2"));
  mw_buf_free(&out);
  free(offs);
}

static void test_decode_errors(void **state) {
  (void)state;
  uint32_t *dec;
  size_t nd;
  mw_err_t err = {0};
  /* bad cookie */
  const uint8_t c1[] = {0x3c, 0x30, 0, 0, 0, 0, 0, 0};
  assert_int_equal(mw_deletion_decode(c1, sizeof c1, 10, &dec, &nd, &err), -EBADMSG);
  assert_non_null(strstr(err.msg, "cookie"));
  /* keys not ascending */
  const uint8_t c2[] = {0x3a, 0x30, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0,
                        24, 0, 0, 0, 26, 0, 0, 0, 5, 0, 6, 0};
  assert_int_equal(mw_deletion_decode(c2, sizeof c2, 1 << 20, &dec, &nd, NULL), -EBADMSG);
  /* array not ascending */
  const uint8_t c3[] = {0x3a, 0x30, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 16, 0, 0, 0, 6, 0, 5, 0};
  assert_int_equal(mw_deletion_decode(c3, sizeof c3, 100, &dec, &nd, NULL), -EBADMSG);
  /* wrong data offset */
  const uint8_t c4[] = {0x3a, 0x30, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 17, 0, 0, 0, 5, 0, 6, 0};
  assert_int_equal(mw_deletion_decode(c4, sizeof c4, 100, &dec, &nd, NULL), -EBADMSG);
  /* trailing byte */
  const uint8_t c5[] = {0x3a, 0x30, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 16, 0, 0, 0, 5, 0, 6, 0, 0};
  assert_int_equal(mw_deletion_decode(c5, sizeof c5, 100, &dec, &nd, NULL), -EBADMSG);
  assert_int_equal(mw_deletion_decode(c5, sizeof c5 - 1, 100, &dec, &nd, NULL), 0);
  assert_int_equal(nd, 2);
  assert_int_equal(dec[0], 5);
  assert_int_equal(dec[1], 6);
  free(dec);
  /* huge container count */
  const uint8_t c6[] = {0x3a, 0x30, 0, 0, 0xff, 0xff, 0xff, 0xff};
  assert_int_equal(mw_deletion_decode(c6, sizeof c6, 100, &dec, &nd, NULL), -EBADMSG);
  /* bitmap container whose popcount disagrees with the header (CRoaring
   * 0.2 would trust the header and overrun the output array) */
  uint8_t *bm = calloc(1, 16 + 8192);
  assert_non_null(bm);
  const uint8_t bh[] = {0x3a, 0x30, 0, 0, 1, 0, 0, 0, 0, 0, 0x00, 0x20, 16, 0, 0, 0};
  memcpy(bm, bh, 16); /* card 8193 claimed */
  memset(bm + 16, 0xff, 1024); /* 8192 set */
  assert_int_equal(mw_deletion_decode(bm, 16 + 8192, 1 << 16, &dec, &nd, &err), -EBADMSG);
  bm[16 + 1024] = 1; /* now 8193: valid */
  assert_int_equal(roundtrip(bm, 16 + 8192, 1 << 16), 0);
  free(bm);
  /* garbage never crashes */
  uint8_t junk[64];
  uint64_t x = 99;
  for (int r = 0; r < 20000; r++) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    size_t len = (size_t)(x >> 58);
    for (size_t i = 0; i < len; i++) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      junk[i] = (uint8_t)(x >> 56);
    }
    if (len >= 4 && r % 2) mw_store_u32le(junk, r % 4 == 1 ? 12346 : 12347 | (uint32_t)(x & 3) << 16);
    int rc = roundtrip(junk, len, UINT32_MAX);
    assert_true(rc == 0 || rc == -EBADMSG);
  }
}

static void test_run_variant(void **state) {
  (void)state;
  /* cookie 12347, one container, run flag set, key 0 card 10, no offset
   * table (< 4 containers), runs [5..9] and [20..24]. */
  const uint8_t runs[] = {0x3b, 0x30, 0, 0, 0x01, 0, 0, 9, 0, 2, 0, 5, 0, 4, 0, 20, 0, 4, 0};
  uint32_t *dec;
  size_t nd;
  assert_int_equal(mw_deletion_decode(runs, sizeof runs, 25, &dec, &nd, NULL), 0);
  assert_int_equal(nd, 10);
  for (size_t i = 0; i < 5; i++) {
    assert_int_equal(dec[i], 5 + i);
    assert_int_equal(dec[5 + i], 20 + i);
  }
  free(dec);
  assert_int_equal(mw_deletion_decode(runs, sizeof runs, 24, &dec, &nd, NULL), -EBADMSG);
  /* overlapping runs */
  uint8_t bad[sizeof runs];
  memcpy(bad, runs, sizeof runs);
  bad[15] = 8;
  assert_int_equal(mw_deletion_decode(bad, sizeof bad, 100, &dec, &nd, NULL), -EBADMSG);
  /* run sum disagrees with the header */
  memcpy(bad, runs, sizeof runs);
  bad[7] = 10;
  assert_int_equal(mw_deletion_decode(bad, sizeof bad, 100, &dec, &nd, NULL), -EBADMSG);
  /* our encoder writes the no-run form of the same set */
  uint32_t vals[10] = {5, 6, 7, 8, 9, 20, 21, 22, 23, 24};
  mw_buf_t out = MW_BUF_INIT;
  assert_int_equal(mw_deletion_encode(vals, 10, &out, NULL), 0);
  assert_int_equal(mw_load_u32le(out.data), 12346);
  mw_buf_free(&out);
  for (size_t cut = 0; cut < sizeof runs; cut++)
    assert_int_equal(mw_deletion_decode(runs, cut, 100, &dec, &nd, NULL), -EBADMSG);
}

static void test_names(void **state) {
  (void)state;
  char name[MW_DELETION_NAME_BYTES];
  assert_int_equal(mw_deletion_name_format(0, 1, 3339865732904389523ULL, name, sizeof name), 27);
  assert_string_equal(name, "0-1-3339865732904389523.bin");
  uint64_t f, v, id;
  assert_int_equal(mw_deletion_name_parse(name, &f, &v, &id), 0);
  assert_true(f == 0 && v == 1 && id == 3339865732904389523ULL);
  int n = mw_deletion_name_format(UINT64_MAX, UINT64_MAX, UINT64_MAX, name, sizeof name);
  assert_int_equal(n, MW_DELETION_NAME_BYTES - 1);
  assert_int_equal(mw_deletion_name_parse(name, &f, &v, &id), 0);
  assert_true(f == UINT64_MAX && v == UINT64_MAX && id == UINT64_MAX);
  assert_int_equal(mw_deletion_name_format(0, 1, 2, name, 9), -EINVAL);
  assert_int_equal(mw_deletion_name_parse("0-1-2.arrow", &f, &v, &id), -ENOTSUP);
  const char *bad[] = {"", "0-1.bin", "00-1-2.bin", "0-1-2.binx", "0-1-2", "-1-2-3.bin",
                       "0-1-18446744073709551616.bin", "0-+1-2.bin", "0-1-2-3.bin", "a-1-2.bin",
                       "0-1-2.BIN", "_deletions/0-1-2.bin", " 0-1-2.bin"};
  f = 77;
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    assert_int_equal(mw_deletion_name_parse(bad[i], &f, &v, &id), -EINVAL);
  assert_int_equal(f, 77);
}

/* ------------------------------------------------------------ golden */

static void test_golden(void **state) {
  (void)state;
  const char *vec = tu_vectors_dir();
  const char *root = getenv("MW_SOURCE_ROOT");
  assert_non_null(root);
  char *kdir = tu_strf("%s/tests/lance/data/sst_keys", root);
  char **names;
  size_t n = tu_list_dir(kdir, ".txt", &names);
  assert_true(n >= 13);
  size_t files = 0, deleted = 0;
  for (size_t i = 0; i < n; i++) {
    char *path = tu_strf("%s/%s", kdir, names[i]);
    size_t len;
    char *txt = (char *)tu_read_file(path, &len);
    if (!txt) fail_msg("cannot read %s", path);
    char *sst = NULL;
    int64_t rows = -1;
    size_t nk = 0;
    int64_t *ids = malloc((len / 2 + 1) * sizeof *ids);
    assert_non_null(ids);
    char *save = NULL;
    for (char *line = strtok_r(txt, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
      if (strncmp(line, "sst ", 4) == 0) sst = strdup(line + 4);
      else if (strncmp(line, "rows ", 5) == 0) rows = strtoll(line + 5, NULL, 10);
      else ids[nk++] = strtoll(line, NULL, 10);
    }
    assert_non_null(sst);
    assert_int_equal(rows, (int64_t)nk);

    /* our dedup over the keys */
    uint64_t *h = malloc(nk * sizeof *h);
    uint32_t *want = malloc(nk * sizeof *want);
    assert_true(h && want);
    for (size_t k = 0; k < nk; k++) {
      uint8_t fed[9] = {0};
      mw_store_u64le(fed + 1, (uint64_t)ids[k]);
      h[k] = mw_siphash13(0, 0, fed, 9);
    }
    int64_t nw = mw_dedup_deletions(h, (int64_t)nk, want);
    assert_true(nw >= 0);

    /* the vector's deletion file */
    char *ddir = tu_strf("%s/%s/_deletions", vec, sst);
    char **dn;
    size_t ndn = tu_list_dir(ddir, ".bin", &dn);
    assert_int_equal(ndn, 1);
    uint64_t frag, rv, id;
    assert_int_equal(mw_deletion_name_parse(dn[0], &frag, &rv, &id), 0);
    assert_true(frag == 0 && rv == 1);
    char back[MW_DELETION_NAME_BYTES];
    assert_true(mw_deletion_name_format(frag, rv, id, back, sizeof back) > 0);
    assert_string_equal(back, dn[0]);
    char *dpath = tu_strf("%s/%s", ddir, dn[0]);
    size_t dlen;
    uint8_t *golden = tu_read_file(dpath, &dlen);
    if (!golden) fail_msg("cannot read %s", dpath);
    assert_int_equal(roundtrip(golden, dlen, (uint64_t)rows), 0);
    uint32_t *got;
    size_t ng;
    assert_int_equal(mw_deletion_decode(golden, dlen, (uint64_t)rows, &got, &ng, NULL), 0);
    if (ng != (size_t)nw || memcmp(got, want, ng * sizeof *got) != 0)
      fail_msg("%s: vector deletes %zu rows, our dedup %lld", sst, ng, (long long)nw);
    /* and our encoding of our dedup is the vector's file */
    mw_buf_t out = MW_BUF_INIT;
    assert_int_equal(mw_deletion_encode(want, (size_t)nw, &out, NULL), 0);
    assert_int_equal(out.len, dlen);
    assert_memory_equal(out.data, golden, dlen);
    mutate_all(golden, dlen, (uint64_t)rows);
    files++;
    deleted += ng;

    mw_buf_free(&out);
    free(got);
    free(golden);
    free(dpath);
    tu_free_names(dn, ndn);
    free(ddir);
    free(h);
    free(want);
    free(ids);
    free(sst);
    free(txt);
    free(path);
  }
  printf("# # deletion: %zu vector deletion files (%zu offsets) equal our dedup and "
                "re-encode byte for byte\n", files, deleted);
  assert_int_equal(files, 13);
  tu_free_names(names, n);
  free(kdir);
}

/* The .arrow file of fixture version `v` (0-<v>-<random>.arrow). */
static uint8_t *arrow_fixture(unsigned v, size_t *len) {
  char *dir = tu_strf("%s/tests/lance/data/compact/lsm_update/t.lance/_deletions",
                      getenv("MW_SOURCE_ROOT"));
  char **names;
  size_t n = tu_list_dir(dir, ".arrow", &names);
  char *want = tu_strf("0-%u-", v);
  uint8_t *p = NULL;
  for (size_t i = 0; i < n && p == NULL; i++) {
    if (strncmp(names[i], want, strlen(want)) != 0) continue;
    char *path = tu_strf("%s/%s", dir, names[i]);
    p = tu_read_file(path, len);
    free(path);
  }
  if (p == NULL) fail_msg("no %s*.arrow in %s", want, dir);
  tu_free_names(names, n);
  free(want);
  free(dir);
  return p;
}

static void test_arrow_golden(void **state) {
  (void)state;
  size_t len;
  uint8_t *p = arrow_fixture(3, &len); /* update(id in [10, 14)) */
  uint32_t *offs;
  size_t n;
  assert_int_equal(mw_deletion_arrow_decode(p, len, 2000, &offs, &n, NULL), 0);
  assert_int_equal(n, 4);
  for (size_t i = 0; i < n; i++) assert_int_equal(offs[i], 10 + i);
  free(offs);
  mw_err_t err = {0};
  assert_int_equal(mw_deletion_arrow_decode(p, len, 13, &offs, &n, &err), -EBADMSG);
  assert_non_null(strstr(err.msg, "not below 13"));
  free(p);
  p = arrow_fixture(4, &len); /* then delete(id in [500, 1100)): the union */
  assert_int_equal(mw_deletion_arrow_decode(p, len, 2000, &offs, &n, NULL), 0);
  assert_int_equal(n, 604);
  for (size_t i = 0; i < 4; i++) assert_int_equal(offs[i], 10 + i);
  for (size_t i = 4; i < n; i++) assert_int_equal(offs[i], 500 + i - 4);
  free(offs);
  free(p);
}

static void test_arrow_corrupt(void **state) {
  (void)state;
  size_t len;
  uint8_t *p = arrow_fixture(3, &len);
  uint8_t *q = malloc(len);
  unsigned ok = 0, refused = 0;
  for (size_t cut = 0; cut < len; cut++) {
    uint32_t *offs;
    size_t n;
    int rc = mw_deletion_arrow_decode(p, cut, 2000, &offs, &n, NULL);
    assert_int_not_equal(rc, 0); /* a truncated file never decodes */
    refused++;
  }
  for (size_t bit = 0; bit < len * 8; bit++) {
    memcpy(q, p, len);
    q[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    uint32_t *offs;
    size_t n;
    int rc = mw_deletion_arrow_decode(q, len, 2000, &offs, &n, NULL);
    if (rc < 0) {
      assert_null(offs);
      refused++;
      continue;
    }
    for (size_t i = 1; i < n; i++) assert_true(offs[i] > offs[i - 1]);
    if (n > 0) assert_true(offs[n - 1] < 2000);
    free(offs);
    ok++;
  }
  assert_true(refused > len);
  assert_true(ok > 0); /* flips in padding and compression markers are harmless */
  free(q);
  free(p);
}

static void test_union(void **state) {
  (void)state;
  uint32_t *u;
  assert_int_equal(mw_deletion_union(NULL, 0, NULL, 0, &u), 0);
  assert_null(u);
  const uint32_t a[] = {1, 5, 9}, bad[] = {3, 3};
  assert_int_equal(mw_deletion_union(a, 3, bad, 2, &u), -EINVAL);
  uint64_t seed = 42;
  for (int round = 0; round < 50; round++) {
    uint32_t x[300], y[300];
    size_t nx = 0, ny = 0;
    uint8_t want[1000] = {0};
    for (uint32_t v = 0; v < 1000; v++) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      unsigned r = (unsigned)(seed >> 60);
      if (r == 1 && nx < 300) x[nx++] = v, want[v] = 1;
      if (r == 2 && ny < 300) y[ny++] = v, want[v] = 1;
      if (r == 3 && nx < 300 && ny < 300) x[nx++] = v, y[ny++] = v, want[v] = 1;
    }
    int64_t k = mw_deletion_union(x, nx, y, ny, &u);
    assert_true(k >= 0);
    size_t at = 0;
    for (uint32_t v = 0; v < 1000; v++)
      if (want[v]) assert_int_equal(u[at++], v);
    assert_int_equal(at, (size_t)k);
    free(u);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_encode_layout), cmocka_unit_test(test_decode_errors),
      cmocka_unit_test(test_run_variant),   cmocka_unit_test(test_names),
      cmocka_unit_test(test_golden),        cmocka_unit_test(test_arrow_golden),
      cmocka_unit_test(test_arrow_corrupt), cmocka_unit_test(test_union),
  };
  return tu_run_group_name("deletion", tests, NULL, NULL);
}
