/*
 * memtrim.h — the daemon's memory housekeeping: give freed heap back to the
 * kernel, and report resident and heap memory as metrics.
 *
 * Why: the soak showed RSS climbing by ~0.5 MiB a minute while the heap
 * really in use stayed flat (~20-22 MiB, glibc malloc_stats). The memory was
 * free but retained: every thread-pool thread that builds SSTables gets its
 * own glibc arena, and those arenas only shrink from their top. A periodic
 * malloc_trim(0) returns the free pages of every arena
 * (madvise(MADV_DONTNEED)); one call took RSS from 50.4 to 37.4 MiB, and
 * with it a 45-minute soak stayed at 17.9-34.1 MiB instead of 26.2-59.4
 * (docs/reliability.md §5).
 *
 * Owns: one uv_timer (unref'd: it never keeps the loop alive) and one
 * uv_work_t. Every `interval_ms` the work runs on libuv's thread pool (never
 * on the loop: a trim walks every arena under its lock): RSS before, trim,
 * RSS and the heap usage (mw_heap_usage) after. The loop then sets the gauges
 *   process_resident_memory_bytes   RSS (/proc/self/statm)
 *   memwald_heap_inuse_bytes        malloc'd and not freed (incl. mmapped)
 *   memwald_heap_free_bytes         free but still held by malloc
 * and counts memwald_memory_trimmed_bytes_total (RSS given back). With
 * interval_ms = 0 the timer still samples (every 10 s) but never trims.
 * At most one work item is in flight; a tick that finds one running skips.
 *
 * The heap gauges come from common/heap.h: glibc's mallinfo2, or under ASan
 * its allocator's own counts (glibc's arenas are unused there); the trim is
 * glibc only. Elsewhere the gauges show RSS alone. The admin `status`
 * reads the same figures at the moment it is asked (heap_live_bytes).
 *
 * Errors: mw_memtrim_start returns 0 or a negative errno from libuv.
 */
#ifndef MW_DAEMON_MEMTRIM_H
#define MW_DAEMON_MEMTRIM_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "common/metrics.h"

#define MW_MEMTRIM_SAMPLE_MS 10000 /* sampling period when trimming is off */

typedef struct mw_memtrim {
  uv_timer_t timer;
  uv_work_t work;
  uint64_t interval_ms; /* 0: sample only */
  bool busy;            /* work in flight */
  bool started;
  bool closing;
  /* written by the work, read on the loop in after_work */
  uint64_t rss_before_bytes, rss_after_bytes, heap_inuse_bytes, heap_free_bytes;
  mw_metric_t *m_rss, *m_inuse, *m_free, *m_trimmed;
} mw_memtrim_t;

int mw_memtrim_start(mw_memtrim_t *t, uv_loop_t *loop, uint64_t interval_ms, mw_metrics_t *m);
/* Stop the timer and close it; a work item in flight still finishes. */
void mw_memtrim_stop(mw_memtrim_t *t);

#endif
