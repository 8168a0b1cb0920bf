/*
 * workpool.c — fixed worker threads, one mutex-guarded FIFO each way.
 *
 * Design: the loop appends to `todo` and signals one worker; a worker pops
 * the head, runs it without the lock, appends it to `done` and wakes the
 * loop with uv_async_send (which coalesces: the loop's callback takes the
 * whole `done` list at once). Items are the callers' (embedded in their
 * owners): the pool allocates nothing per item.
 */
#include "net/workpool.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

struct mw_workpool {
  uv_loop_t *loop;
  uv_async_t async;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  mw_work_t *todo_head, *todo_tail; /* under mu */
  mw_work_t *done_head, *done_tail; /* under mu */
  bool stopping;                    /* under mu */
  size_t in_flight;                 /* loop thread only */
  size_t n_threads;
  pthread_t threads[MW_WORKPOOL_MAX_THREADS];
  void (*close_cb)(void *);
  void *close_arg;
};

static void *worker(void *arg) {
  mw_workpool_t *p = arg;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->todo_head && !p->stopping) pthread_cond_wait(&p->cv, &p->mu);
    if (!p->todo_head) break; /* stopping, nothing left */
    mw_work_t *w = p->todo_head;
    p->todo_head = w->next;
    if (!p->todo_head) p->todo_tail = NULL;
    pthread_mutex_unlock(&p->mu);
    w->work(w);
    w->next = NULL;
    pthread_mutex_lock(&p->mu);
    if (p->done_tail) p->done_tail->next = w;
    else p->done_head = w;
    p->done_tail = w;
    uv_async_send(&p->async);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

static void on_async(uv_async_t *a) {
  mw_workpool_t *p = a->data;
  pthread_mutex_lock(&p->mu);
  mw_work_t *w = p->done_head;
  p->done_head = p->done_tail = NULL;
  pthread_mutex_unlock(&p->mu);
  while (w) {
    mw_work_t *next = w->next;
    assert(p->in_flight > 0);
    p->in_flight--;
    w->after(w); /* may submit more, or free w's owner */
    w = next;
  }
}

static void on_async_closed(uv_handle_t *h);

static size_t default_threads(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) n = 1;
  return (size_t)n > MW_WORKPOOL_MAX_THREADS ? MW_WORKPOOL_MAX_THREADS : (size_t)n;
}

static void stop_threads(mw_workpool_t *p) {
  pthread_mutex_lock(&p->mu);
  p->stopping = true;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  for (size_t i = 0; i < p->n_threads; i++) pthread_join(p->threads[i], NULL);
  p->n_threads = 0;
}

static void free_pool(mw_workpool_t *p) {
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

int mw_workpool_start(uv_loop_t *loop, size_t threads, mw_workpool_t **out) {
  assert(loop != NULL);
  assert(out != NULL);
  if (threads == 0) threads = default_threads();
  if (threads > MW_WORKPOOL_MAX_THREADS) threads = MW_WORKPOOL_MAX_THREADS;
  mw_workpool_t *p = calloc(1, sizeof *p);
  if (!p) return -ENOMEM;
  p->loop = loop;
  if (pthread_mutex_init(&p->mu, NULL) != 0) {
    free(p);
    return -ENOMEM;
  }
  if (pthread_cond_init(&p->cv, NULL) != 0) {
    pthread_mutex_destroy(&p->mu);
    free(p);
    return -ENOMEM;
  }
  int rc = uv_async_init(loop, &p->async, on_async);
  if (rc < 0) {
    free_pool(p);
    return rc;
  }
  p->async.data = p;
  for (size_t i = 0; i < threads; i++) {
    if (pthread_create(&p->threads[i], NULL, worker, p) != 0) {
      stop_threads(p);
      uv_close((uv_handle_t *)&p->async, on_async_closed); /* frees p, no cb */
      return -EAGAIN;
    }
    p->n_threads++;
  }
  assert(p->n_threads == threads);
  *out = p;
  return 0;
}

void mw_workpool_submit(mw_workpool_t *p, mw_work_t *w) {
  assert(p != NULL);
  assert(w != NULL);
  assert(w->work != NULL);
  assert(w->after != NULL);
  w->next = NULL;
  p->in_flight++;
  pthread_mutex_lock(&p->mu);
  assert(!p->stopping);
  if (p->todo_tail) p->todo_tail->next = w;
  else p->todo_head = w;
  p->todo_tail = w;
  pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

size_t mw_workpool_in_flight(const mw_workpool_t *p) { return p->in_flight; }
size_t mw_workpool_threads(const mw_workpool_t *p) { return p->n_threads; }

static void on_async_closed(uv_handle_t *h) {
  mw_workpool_t *p = h->data;
  void (*cb)(void *) = p->close_cb;
  void *arg = p->close_arg;
  free_pool(p);
  if (cb) cb(arg);
}

void mw_workpool_close(mw_workpool_t *p, void (*cb)(void *arg), void *arg) {
  assert(p != NULL);
  assert(p->in_flight == 0); /* callers drain first */
  stop_threads(p);
  p->close_cb = cb;
  p->close_arg = arg;
  uv_close((uv_handle_t *)&p->async, on_async_closed);
}
