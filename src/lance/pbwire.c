/*
 * pbwire.c — see pbwire.h. Sample: field 3 holding the 5 bytes "hello"
 * is 1a 05 68 65 6c 6c 6f (tag = 3 << 3 | 2, length 5, the bytes); the
 * varint 300 is ac 02.
 */
#include "lance/pbwire.h"

#include <assert.h>

int mw_pb_put_varint(mw_buf_t *b, uint64_t v) {
  assert(b != NULL);
  uint8_t tmp[MW_PB_VARINT_MAX_BYTES];
  size_t k = 0;
  do {
    uint8_t byte = (uint8_t)(v & 0x7f);
    v >>= 7;
    tmp[k++] = (uint8_t)(byte | (v ? 0x80 : 0));
  } while (v);
  assert(k <= sizeof tmp);
  return mw_buf_append(b, tmp, k);
}

int mw_pb_put_len(mw_buf_t *b, uint32_t field, const void *p, size_t n) {
  assert(b != NULL);
  assert(field >= 1);
  assert(p != NULL || n == 0);
  int rc = mw_pb_put_varint(b, (uint64_t)field << 3 | MW_PB_WIRE_LEN);
  if (rc == 0) rc = mw_pb_put_varint(b, n);
  if (rc == 0 && n > 0) rc = mw_buf_append(b, p, n);
  return rc;
}
