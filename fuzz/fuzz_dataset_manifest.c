/*
 * fuzz_dataset_manifest.c — libFuzzer target for Lance dataset manifests:
 * the whole-file reader (framing, Manifest, index section, MemWAL index,
 * feature flags), the Manifest message decoder on raw bytes (encode must be
 * stable: encode(decode(encode(decode(x)))) == encode(decode(x))), the index
 * section decoder, the manifest-name parser, and every DataFile's fields /
 * column_indices checked (lance/datafile_fields.h) against a data file of
 * the manifest's own schema in the version the DataFile records.
 * Seeds: fuzz/corpus/dataset_manifest/ (base and SSTable manifests, nested
 * tables in file versions 2.0, 2.1 and 2.2).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lance/datafile_fields.h"
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

/* Each DataFile against a file holding the schema's fields as memwald
 * writes them: 0, or a refusal with its reason; never a crash. */
static void check_mappings(const mw_table_meta_t *t) {
  static int32_t ids[MW_DF_FIELDS_MAX], cols[MW_DF_FIELDS_MAX];
  const Lance__Table__Manifest *pb = t->manifest.pb;
  for (size_t i = 0; i < pb->n_fragments; i++)
    for (size_t k = 0; k < pb->fragments[i]->n_files; k++) {
      const Lance__Table__DataFile *df = pb->fragments[i]->files[k];
      mw_err_t err = {0};
      int nc = mw_datafile_fields(&t->schema, df->file_major_version, df->file_minor_version, ids, cols,
                                  MW_DF_FIELDS_MAX, &err);
      if (nc < 0 && nc != -ENOTSUP && nc != -EFBIG) abort();
      if (nc < 0) continue;
      mw_df_ref_t ref = {.ids = df->fields, .n_ids = df->n_fields, .cols = df->column_indices,
                         .n_cols = df->n_column_indices, .major = df->file_major_version,
                         .minor = df->file_minor_version};
      mw_df_file_t file = {.schema = &t->schema, .n_columns = (uint32_t)nc, .major = df->file_major_version,
                           .minor = df->file_minor_version};
      int rc = mw_datafile_fields_check(&t->schema, &ref, &file, &err);
      if (rc != 0 && rc != -EBADMSG && rc != -ENOTSUP) abort();
      if (rc != 0 && err.msg[0] == '\0') abort();
    }
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
    check_mappings(&t);
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
