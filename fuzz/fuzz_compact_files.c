/*
 * fuzz_compact_files.c — libFuzzer target for the files compaction reads
 * back from storage: its own key index (src/lance/keyindex.c, int64 and
 * utf8 keys) and Lance deletion files of both kinds (src/lance/deletion.c:
 * the roaring .bin and LanceDB's Arrow-file .arrow), and the list of files
 * a base manifest references that history GC keeps or deletes
 * (src/lance/base_files.c: every key under data/, _memwald/keys/,
 * _deletions/ or _transactions/, never climbing out). The first byte picks
 * the decoder (modulo 5); any input must give an error or a value that
 * passes the decoder's own invariants, never a crash or a leak.
 * Seeds: fuzz/corpus/compact_files/ (key indexes from our writer, the two
 * .arrow files LanceDB wrote in tests/lance/data/compact, a .bin).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <string.h>

#include "lance/base_files.h"
#include "lance/deletion.h"
#include "lance/keyindex.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

static void keyindex(mw_type_t t, const uint8_t *d, size_t n) {
  mw_field_t f = {.name = (char *)"id", .type = t, .id = 0, .pk_position = 1};
  mw_keyindex_t ki;
  if (mw_keyindex_decode(d, n, &f, &ki, NULL) == 0 && ki.n <= 0) __builtin_trap();
  mw_keyindex_free(&ki);
}

static void deletions(bool arrow, const uint8_t *d, size_t n) {
  uint32_t *offs = NULL;
  size_t k = 0;
  int rc = arrow ? mw_deletion_arrow_decode(d, n, 1u << 20, &offs, &k, NULL)
                 : mw_deletion_decode(d, n, 1u << 20, &offs, &k, NULL);
  for (size_t i = 1; rc == 0 && i < k; i++)
    if (offs[i] <= offs[i - 1]) __builtin_trap();
  free(offs);
}

static int base_key(void *arg, const char *key) {
  (void)arg;
  static const char *const dirs[] = {"data/", "_memwald/keys/", "_deletions/", "_transactions/"};
  bool ok = false;
  for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++)
    if (strncmp(key, dirs[i], strlen(dirs[i])) == 0 && key[strlen(dirs[i])] != '\0') ok = true;
  /* no ".." component: "x..keys" (a data file named "x.") is a name, not a way up */
  size_t n = strlen(key);
  bool up = strcmp(key, "..") == 0 || strncmp(key, "../", 3) == 0 || strstr(key, "/../") != NULL ||
            (n >= 3 && strcmp(key + n - 3, "/..") == 0);
  if (!ok || up) __builtin_trap();
  return 0;
}

static void base_files(const uint8_t *d, size_t n) {
  int64_t ts = 0;
  (void)mw_base_manifest_files(d, n, 1, &ts, base_key, NULL, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  if (n == 0) return 0;
  switch (d[0] % 5) {
    case 0: keyindex(MW_T_INT64, d + 1, n - 1); break;
    case 1: keyindex(MW_T_UTF8, d + 1, n - 1); break;
    case 2: deletions(true, d + 1, n - 1); break;
    case 3: deletions(false, d + 1, n - 1); break;
    default: base_files(d + 1, n - 1); break;
  }
  return 0;
}
