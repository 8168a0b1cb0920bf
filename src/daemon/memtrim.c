/*
 * memtrim.c — see memtrim.h.
 */
#include "daemon/memtrim.h"

#include <assert.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "common/heap.h"
#include "common/log.h"

/* Resident set size from /proc/self/statm (field 2, in pages); 0 if unknown. */
static uint64_t rss_bytes(void) {
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[128];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  unsigned long long size_pages = 0, rss_pages = 0;
  if (sscanf(buf, "%llu %llu", &size_pages, &rss_pages) != 2) return 0;
  long page = sysconf(_SC_PAGESIZE);
  return rss_pages * (uint64_t)(page > 0 ? page : 4096);
}

/* Thread pool. */
static void do_trim(uv_work_t *w) {
  mw_memtrim_t *t = w->data;
  t->rss_before_bytes = rss_bytes();
#ifdef __GLIBC__
  if (t->interval_ms > 0) malloc_trim(0);
#endif
  mw_heap_usage_t h;
  mw_heap_usage(&h);
  t->heap_inuse_bytes = h.live_bytes;
  t->heap_free_bytes = h.free_bytes;
  t->rss_after_bytes = rss_bytes();
}

/* Loop. */
static void after_trim(uv_work_t *w, int status) {
  mw_memtrim_t *t = w->data;
  assert(t->busy);
  t->busy = false;
  if (status < 0) return; /* cancelled at shutdown */
  uint64_t gave = t->rss_before_bytes > t->rss_after_bytes ? t->rss_before_bytes - t->rss_after_bytes : 0;
  if (t->m_rss) mw_gauge_set(t->m_rss, (double)t->rss_after_bytes);
  if (t->m_inuse) mw_gauge_set(t->m_inuse, (double)t->heap_inuse_bytes);
  if (t->m_free) mw_gauge_set(t->m_free, (double)t->heap_free_bytes);
  if (t->m_trimmed && t->interval_ms > 0) mw_counter_add(t->m_trimmed, gave);
  if (gave >= (8u << 20))
    mw_log_debug("memory: malloc_trim gave back %.1f MiB (RSS %.1f MiB, heap in use %.1f MiB)",
                 (double)gave / 1048576.0, (double)t->rss_after_bytes / 1048576.0,
                 (double)t->heap_inuse_bytes / 1048576.0);
}

static void on_tick(uv_timer_t *h) {
  mw_memtrim_t *t = h->data;
  if (t->busy || t->closing) return;
  t->work.data = t;
  if (uv_queue_work(h->loop, &t->work, do_trim, after_trim) == 0) t->busy = true;
}

static mw_metric_t *gauge(mw_metrics_t *m, const char *name, const char *help) {
  mw_metric_family_t *f = mw_metrics_register(m, MW_METRIC_GAUGE, name, help, NULL, 0, NULL, 0);
  return f ? mw_metric_series(f, NULL) : NULL;
}

int mw_memtrim_start(mw_memtrim_t *t, uv_loop_t *loop, uint64_t interval_ms, mw_metrics_t *m) {
  assert(t != NULL);
  assert(loop != NULL);
  memset(t, 0, sizeof *t);
  t->interval_ms = interval_ms;
  if (m) {
    t->m_rss = gauge(m, "process_resident_memory_bytes", "Resident memory size in bytes.");
    t->m_inuse = gauge(m, "memwald_heap_inuse_bytes",
                       "Heap memory allocated and not freed (glibc mallinfo2, or ASan's allocator).");
    t->m_free = gauge(m, "memwald_heap_free_bytes",
                      "Heap memory freed but still held by the allocator.");
    mw_metric_family_t *f = mw_metrics_register(
        m, MW_METRIC_COUNTER, "memwald_memory_trimmed_bytes_total",
        "Resident memory given back to the kernel by malloc_trim.", NULL, 0, NULL, 0);
    t->m_trimmed = f ? mw_metric_series(f, NULL) : NULL;
  }
  int rc = uv_timer_init(loop, &t->timer);
  if (rc < 0) return rc;
  t->timer.data = t;
  uint64_t every = interval_ms > 0 ? interval_ms : MW_MEMTRIM_SAMPLE_MS;
  rc = uv_timer_start(&t->timer, on_tick, every, every);
  if (rc < 0) {
    uv_close((uv_handle_t *)&t->timer, NULL);
    return rc;
  }
  uv_unref((uv_handle_t *)&t->timer);
  t->started = true;
  assert(!t->busy);
  return 0;
}

void mw_memtrim_stop(mw_memtrim_t *t) {
  assert(t != NULL);
  if (!t->started || t->closing) return;
  t->closing = true;
  uv_timer_stop(&t->timer);
  uv_close((uv_handle_t *)&t->timer, NULL);
}
