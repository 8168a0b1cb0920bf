/*
 * fuzz_owners_json.c — libFuzzer target for the owner record's parse
 * (lance/owners_json.h).
 *
 * A parse either fails with -EBADMSG and a reason, or yields a node and an
 * address that are NUL-terminated within their fields. The input is given
 * without a terminating NUL, so a read past n shows under ASan. Seeds:
 * fuzz/corpus/owners_json/ (a record as shard/owners.c writes it).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lance/owners_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

#define CHECK(c)                                                                      \
  do {                                                                                \
    if (!(c)) {                                                                       \
      fprintf(stderr, "fuzz_owners_json: check failed: %s (line %d)\n", #c, __LINE__); \
      abort();                                                                        \
    }                                                                                 \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  mw_owner_json_t o;
  mw_err_t err = {0};
  int rc = mw_owner_json_parse((const char *)d, n, &o, &err);
  if (rc < 0) {
    CHECK(rc == -EBADMSG);
    CHECK(err.msg[0] != 0);
  } else {
    CHECK(rc == 0);
    CHECK(memchr(o.node, '\0', sizeof o.node) != NULL);
    CHECK(memchr(o.address, '\0', sizeof o.address) != NULL);
  }
  return 0;
}
