/*
 * heap.c — see heap.h.
 */
#include "common/heap.h"

#include <assert.h>
#include <stddef.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#define MW_HEAP_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MW_HEAP_ASAN 1
#endif
#endif

#if defined(MW_HEAP_ASAN)
/* sanitizer/allocator_interface.h, which gcc 12 does not ship; libasan
 * exports both. */
size_t __sanitizer_get_current_allocated_bytes(void);
size_t __sanitizer_get_free_bytes(void);
#elif defined(__GLIBC__)
#include <malloc.h>
#endif

void mw_heap_usage(mw_heap_usage_t *out) {
  assert(out != NULL);
  memset(out, 0, sizeof *out);
#if defined(MW_HEAP_ASAN)
  out->live_bytes = (uint64_t)__sanitizer_get_current_allocated_bytes();
  out->free_bytes = (uint64_t)__sanitizer_get_free_bytes();
  out->source = "asan";
#elif defined(__GLIBC__)
  struct mallinfo2 mi = mallinfo2();
  out->live_bytes = (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
  out->free_bytes = (uint64_t)mi.fordblks;
  out->source = "mallinfo2";
#else
  out->source = "none";
#endif
  assert(out->source != NULL);
}
