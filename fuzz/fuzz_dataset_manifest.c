/*
 * fuzz_dataset_manifest.c — libFuzzer target for Lance dataset manifests:
 * the whole-file reader (framing, Manifest, index section, MemWAL index,
 * feature flags), the Manifest message decoder on raw bytes (encode must be
 * stable: encode(decode(encode(decode(x)))) == encode(decode(x))), the index
 * section decoder, and the manifest-name parser.
 * Seeds: fuzz/corpus/dataset_manifest/ (base and SSTable manifests).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lance/dataset_manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

static void message_roundtrip(const uint8_t *d, size_t n) {
  mw_dmanifest_t m, m2;
  if (mw_dmanifest_decode(d, n, &m, NULL) == 0) {
    mw_buf_t a = MW_BUF_INIT, b = MW_BUF_INIT;
    if (mw_dmanifest_encode(&m, &a) != 0) abort();
    if (mw_dmanifest_decode(a.data, a.len, &m2, NULL) != 0) abort();
    if (mw_dmanifest_encode(&m2, &b) != 0) abort();
    if (a.len != b.len || (a.len && memcmp(a.data, b.data, a.len) != 0)) abort();
    mw_dmanifest_free(&m2);
    mw_buf_free(&a);
    mw_buf_free(&b);
  }
  mw_dmanifest_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  mw_table_meta_t t;
  mw_err_t err = {0};
  int rc = mw_table_meta_read(d, n, &t, &err);
  if (rc == 0) {
    mw_buf_t out = MW_BUF_INIT;
    if (t.has_memwal && mw_memwal_index_entry_encode(&t.memwal, &out) != 0) abort();
    for (size_t i = 0; i < t.indexes.n; i++)
      if (mw_index_entry_encode(&t.indexes.items[i], &out) != 0) abort();
    mw_buf_free(&out);
  } else if (rc != -EBADMSG && rc != -ENOTSUP && rc != -ENOMEM) {
    abort();
  } else if (err.msg[0] == '\0') {
    abort(); /* every refusal carries a reason */
  }
  mw_table_meta_free(&t);

  /* The file's manifest message if it frames, else the raw input. */
  mw_section_t msg;
  if (mw_dmanifest_unframe(d, n, &msg, NULL, NULL) == 0) message_roundtrip(msg.data, msg.len);
  else message_roundtrip(d, n);

  mw_index_section_t s;
  (void)mw_index_section_decode(d, n, &s, NULL);
  mw_index_section_free(&s);

  char name[64];
  size_t k = n < sizeof name - 1 ? n : sizeof name - 1;
  memcpy(name, d, k);
  name[k] = '\0';
  uint64_t v;
  bool v2;
  if (mw_dmanifest_name_parse(name, &v, &v2) == 0 && v2) {
    char back[MW_DMANIFEST_NAME_BYTES];
    if (mw_dmanifest_name(v, back, sizeof back) != 29 || strcmp(back, name) != 0) abort();
  }
  return 0;
}
