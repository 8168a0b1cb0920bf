/*
 * fuzz_transaction.c — libFuzzer target for the Lance transaction decoder
 * (transaction.h).
 *
 * A decode either fails with a reason or yields an operation name and
 * counts that every list agrees with. Seeds: fuzz/corpus/transaction/ (the
 * vectors' .txn files: overwrite, update_config, create_index).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lance/transaction.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

#define CHECK(c)                                                                      \
  do {                                                                                \
    if (!(c)) {                                                                       \
      fprintf(stderr, "fuzz_transaction: check failed: %s (line %d)\n", #c, __LINE__); \
      abort();                                                                        \
    }                                                                                 \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  mw_txn_t t;
  mw_err_t err = {0};
  int rc = mw_txn_decode(d, n, &t, &err);
  if (rc < 0) {
    CHECK(rc == -EBADMSG || rc == -EFBIG || rc == -ENOMEM);
    CHECK(err.msg[0] != 0);
  } else {
    CHECK(t.op_name != NULL);
    CHECK(t.op_tag == 0 || mw_txn_op_name(t.op_tag) != NULL);
    for (size_t i = 0; i < t.n_fragments; i++) CHECK(t.fragments[i] != NULL);
    for (size_t i = 0; i < t.n_schema; i++) CHECK(t.schema[i] != NULL);
  }
  mw_txn_free(&t);
  return 0;
}
