/*
 * fuzz_shard_manifest.c — libFuzzer target for the shard-manifest side:
 * ShardManifest decode (and, when it decodes, encode -> decode -> encode must
 * be stable), the bit-reversed name parser, and the version-hint parser.
 * Seeds: fuzz/corpus/shard_manifest/ (vector .binpb files and hints).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lance/shard_manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  mw_shard_manifest_t m, m2;
  mw_err_t err = {0};
  if (mw_shard_manifest_decode(d, n, &m, &err) == 0) {
    mw_buf_t a = MW_BUF_INIT, b = MW_BUF_INIT;
    if (mw_shard_manifest_encode(&m, &a) != 0) abort();
    if (mw_shard_manifest_decode(a.data, a.len, &m2, NULL) != 0) abort();
    if (mw_shard_manifest_encode(&m2, &b) != 0) abort();
    if (a.len != b.len || (a.len && memcmp(a.data, b.data, a.len) != 0)) abort();
    mw_shard_manifest_free(&m2);
    mw_buf_free(&a);
    mw_buf_free(&b);
  } else if (err.code == 0 || err.msg[0] == '\0') {
    abort(); /* every failure carries a reason */
  }
  mw_shard_manifest_free(&m);

  uint64_t v;
  (void)mw_version_hint_parse(d, n, &v, NULL);
  char name[128];
  size_t k = n < sizeof name - 1 ? n : sizeof name - 1;
  memcpy(name, d, k);
  name[k] = '\0';
  if (mw_bitrev_parse(name, &v) == 0) {
    char back[MW_BITREV_NAME_BYTES];
    if (mw_bitrev_name(v, NULL, back, sizeof back) != 64 || memcmp(back, name, 64) != 0) abort();
  }
  return 0;
}
