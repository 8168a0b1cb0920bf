/*
 * util.h — small pure helpers several lance/ codecs share, each a static
 * inline so a codec's library needs no other to link:
 *
 *   mw_bitmap_bytes(bits)  bytes of an Arrow bitmap (validity, bool values)
 *                          of `bits` bits, LSB first: 9 bits -> 2 bytes
 *   mw_u32_cmp(a, b)       qsort order of uint32_t (row offsets, row ids)
 *
 * Before this header each was copied into the files that used it
 * (sstable.c, ipc.c, batch.c; keyindex.c, deletion.c, shard/compact_keys.c).
 */
#ifndef MW_LANCE_UTIL_H
#define MW_LANCE_UTIL_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes of a bitmap of `bits` bits. bits is a length the caller has
 * checked (never negative). */
static inline uint64_t mw_bitmap_bytes(int64_t bits) {
  assert(bits >= 0);
  return ((uint64_t)bits + 7) / 8;
}

/* qsort comparator: ascending uint32_t. */
static inline int mw_u32_cmp(const void *a, const void *b) {
  assert(a != NULL);
  assert(b != NULL);
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

#endif
