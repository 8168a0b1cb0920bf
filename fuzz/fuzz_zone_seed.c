/*
 * fuzz_zone_seed.c — libFuzzer target for the zone write seed reader
 * (zone_seed.h) and the Arrow IPC file decoder under it (ipc_file.h).
 *
 * Input: byte 0 picks the data column's type (or none), bytes 1-2 pick
 * rows_per_zone (1 + u16), the rest is the seed buffer. A seed that decodes
 * must satisfy every rule the decoder promises (counts within zone_length,
 * negative NaNs within NaNs, zone lengths summing to total_rows, a bitmap
 * agreeing with the null counts); the IPC file decoder alone must agree with
 * it. Seeds: fuzz/corpus/zone_seed/ (v1 seeds of every type, a v0 seed).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lance/ipc_file.h"
#include "lance/zone_seed.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

#define CHECK(c)                                                                   \
  do {                                                                             \
    if (!(c)) {                                                                    \
      fprintf(stderr, "fuzz_zone_seed: check failed: %s (line %d)\n", #c, __LINE__); \
      abort();                                                                     \
    }                                                                              \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  static const mw_type_t types[] = {MW_T_INT32, MW_T_INT64, MW_T_UINT32, MW_T_UINT64,
                                    MW_T_FLOAT32, MW_T_FLOAT64, MW_T_BOOL, MW_T_UTF8,
                                    MW_T_BINARY, MW_T_FSL};
  if (n < 3) return 0;
  size_t nt = sizeof types / sizeof types[0];
  mw_field_t f = {.name = (char *)"v", .type = types[d[0] % nt], .nullable = true, .fsl_dim = 8,
                  .item_nullable = true};
  bool with_field = d[0] < 128;
  uint64_t rpz = 1 + (uint64_t)(d[1] | d[2] << 8);
  mw_seed_t s;
  mw_err_t err = {0};
  int rc = mw_seed_decode(d + 3, n - 3, with_field ? &f : NULL, rpz, UINT64_MAX, &s, &err);
  if (rc < 0) {
    CHECK(rc == -EBADMSG || rc == -ENOTSUP || rc == -EFBIG || rc == -ENOMEM || rc == -EINVAL);
    CHECK(err.msg[0] != 0);
    mw_seed_free(&s);
    return 0;
  }
  CHECK(s.version == 0 || s.version == 1);
  uint64_t total = 0;
  for (size_t z = 0; z < s.n_zones; z++) {
    CHECK(s.zone_length[z] >= 1 && s.zone_length[z] <= rpz);
    CHECK((uint64_t)s.null_count[z] + s.nan_count[z] <= s.zone_length[z]);
    if (s.negative_nan_count) CHECK(s.negative_nan_count[z] <= s.nan_count[z]);
    total += s.zone_length[z];
  }
  CHECK(total == s.total_rows);
  uint64_t nulls = 0;
  for (size_t z = 0; z < s.n_zones; z++) nulls += s.null_count[z];
  if (s.has_null_bitmap) CHECK(s.n_null_offsets == nulls);
  mw_ipc_stream_t st;
  CHECK(mw_ipc_file_decode(d + 3, n - 3, NULL, &st, NULL) == 0);
  CHECK(st.n_batches <= 1 && (st.n_batches == 0 ? 0 : (size_t)st.batches[0].n_rows) == s.n_zones);
  mw_ipc_stream_free(&st);
  mw_seed_free(&s);
  return 0;
}
