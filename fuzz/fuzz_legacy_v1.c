/*
 * fuzz_legacy_v1.c — libFuzzer target for the Lance v1 (legacy) data file
 * reader (legacy_v1.h).
 *
 * Open the input; on success decode every manifest field and every
 * statistics field it can type. A decoded column must have exactly the
 * file's rows (statistics: one per batch), and every page the table names
 * must lie inside the file. Seeds: fuzz/corpus/legacy_v1/ (LanceDB-written
 * goldens of every type, two batches).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lance/legacy_v1.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

#define CHECK(c)                                                                    \
  do {                                                                              \
    if (!(c)) {                                                                     \
      fprintf(stderr, "fuzz_legacy_v1: check failed: %s (line %d)\n", #c, __LINE__); \
      abort();                                                                      \
    }                                                                               \
  } while (0)

static void column(const mw_v1_file_t *f, bool stats, const mw_v1_field_t *fl) {
  mw_field_t mf;
  if (mw_v1_field_type(fl, &mf, NULL) < 0) return;
  mw_column_t c = {0};
  mw_err_t err = {0};
  int rc = mw_v1_read_column(f, stats, fl, &mf, &c, &err);
  if (rc == 0) {
    CHECK((uint64_t)c.length == (stats ? f->pages.n_batches : mw_v1_rows(f)));
  } else {
    CHECK(rc == -EBADMSG || rc == -ENOTSUP || rc == -EFBIG || rc == -ENOMEM || rc == -EINVAL);
    CHECK(err.msg[0] != 0);
  }
  mw_buf_free(&c.values), mw_buf_free(&c.validity), mw_buf_free(&c.offsets), mw_buf_free(&c.item_validity);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  mw_v1_file_t f;
  mw_err_t err = {0};
  int rc = mw_v1_open(&f, d, n, &err);
  if (rc < 0) {
    CHECK(rc == -EBADMSG || rc == -ENOTSUP || rc == -EFBIG || rc == -ENOMEM);
    CHECK(err.msg[0] != 0);
    mw_v1_close(&f);
    return 0;
  }
  for (size_t i = 0; i < f.pages.n_fields; i++)
    for (size_t b = 0; b < f.pages.n_batches; b++) {
      uint64_t pos, items;
      if (mw_v1_page(&f, false, (int32_t)i, b, &pos, &items, NULL) == 0) CHECK(pos <= n);
    }
  for (size_t i = 0; i < f.manifest.n_fields; i++) column(&f, false, &f.manifest.fields[i]);
  for (size_t i = 0; i < f.n_stats_fields; i++) column(&f, true, &f.stats_fields[i]);
  mw_v1_close(&f);
  return 0;
}
