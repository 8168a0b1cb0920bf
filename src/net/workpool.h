/*
 * workpool.h — a small fixed pool of worker threads for CPU work of the loop.
 *
 * Owns: its threads, one queue of work items (FIFO) and one uv_async_t that
 * brings finished items back to the loop thread, where `after` runs in the
 * order the items finished. Unlike libuv's shared pool, nothing here waits
 * on a disk, a flush or a compaction: a parse is never queued behind an
 * fsync.
 *
 *   loop:   mw_workpool_submit(p, item)          -> item->work on a worker
 *   loop:   item->after(item) once it is done    (uv_async, in finish order)
 *   loop:   mw_workpool_close(p, cb) when no item is in flight
 *
 * Limits: at most MW_WORKPOOL_MAX_THREADS threads. The queue is unbounded
 * here: callers bound what they submit (the server: PARSE_JOBS per
 * connection, each connection stopping its reads past that).
 *
 * Errors: negative errno from mw_workpool_start (-ENOMEM, a thread or the
 * async handle that could not be created; nothing is left running).
 */
#ifndef MW_NET_WORKPOOL_H
#define MW_NET_WORKPOOL_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define MW_WORKPOOL_MAX_THREADS 8

typedef struct mw_work mw_work_t;
struct mw_work {
  void (*work)(mw_work_t *w);  /* on a worker thread */
  void (*after)(mw_work_t *w); /* on the loop thread */
  mw_work_t *next;             /* private */
};

typedef struct mw_workpool mw_workpool_t;

/* threads 0: one per online CPU (at most MW_WORKPOOL_MAX_THREADS). */
int mw_workpool_start(uv_loop_t *loop, size_t threads, mw_workpool_t **out);
void mw_workpool_submit(mw_workpool_t *p, mw_work_t *w);
/* Items submitted and not yet given to `after`. */
size_t mw_workpool_in_flight(const mw_workpool_t *p);
size_t mw_workpool_threads(const mw_workpool_t *p);
/* Stop the threads (none may be in flight) and close the async handle; cb
 * once the pool is freed (on the loop). */
void mw_workpool_close(mw_workpool_t *p, void (*cb)(void *arg), void *arg);

#endif
