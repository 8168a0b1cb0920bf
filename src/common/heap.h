/*
 * heap.h — how much heap the process holds live, from whichever allocator
 * the build links.
 *
 * Why: RSS is a poor witness for "memory does not grow with the bytes
 * read". glibc keeps freed memory in its arenas until a trim (daemon/
 * memtrim.h gives it back every 10 s) and compaction frees and re-grows
 * tens of MiB at a time, so in a steady 60 s flood the plain build's RSS
 * swung between 127 and 276 MiB while the live heap stayed at 136-141 MB.
 * The live heap is what a leak or a backlog that follows the input grows.
 *
 * Sources, chosen at compile time:
 *   "mallinfo2"  glibc: uordblks + hblkhd (allocated in arenas + mmapped
 *                chunks); free = fordblks (free, still held by malloc).
 *                mallinfo2 walks each arena's free lists under its lock:
 *                call it from an admin command or a timer, not per row.
 *   "asan"       AddressSanitizer's allocator replaces malloc, so glibc's
 *                arenas are unused: __sanitizer_get_current_allocated_bytes
 *                (requested bytes not yet freed; a chunk in the quarantine
 *                counts as freed) and __sanitizer_get_free_bytes.
 *   "none"       any other libc: both 0.
 *
 * Owns nothing. Never fails: an unknown figure reads 0.
 */
#ifndef MW_COMMON_HEAP_H
#define MW_COMMON_HEAP_H

#include <stdint.h>

typedef struct mw_heap_usage {
  uint64_t live_bytes; /* allocated and not freed */
  uint64_t free_bytes; /* freed but still held by the allocator */
  const char *source;  /* "mallinfo2", "asan" or "none": a static string */
} mw_heap_usage_t;

void mw_heap_usage(mw_heap_usage_t *out);

#endif
