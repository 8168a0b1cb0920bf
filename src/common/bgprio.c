/*
 * bgprio.c — see bgprio.h.
 *
 * Why: on a 2-core machine a flush (sort, encode, bloom) or a compaction
 * (merge, key lookups) runs for tens to hundreds of milliseconds on a libuv
 * pool thread at the same priority as the loop thread and the parse
 * workers; CFS then shares the cores evenly and every ack waiting on the
 * loop waits behind it. Background work at nice 10 only takes the CPU the
 * ack path leaves idle (and ~10 % of a contested core, so it never starves).
 *
 * Linux's setpriority(PRIO_PROCESS, tid) changes one thread. Raising the
 * nice value is always allowed; lowering it back needs CAP_SYS_NICE or an
 * RLIMIT_NICE ceiling of at least 20 - old (systemd/memwald.service sets
 * LimitNICE=20). The pool threads are shared: they also run the stats walk,
 * the heap trim and, under the `threads` storage backend, every WAL put of
 * the ack path. A pool thread left at nice 10 would slow those, so a thread
 * is lowered only when it can be put back: when the limit allows it, or the
 * process is root (which may still lack CAP_SYS_NICE: the first failed
 * restore then stops all lowering, so at most one thread is left behind).
 * Where lowering is not allowed, background work runs at normal priority
 * and one log line says what would enable it.
 */
#include "common/bgprio.h"

#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/log.h"

static _Thread_local int depth;      /* nested enters on this thread */
static _Thread_local bool lowered;   /* this thread's outermost enter lowered it */
static atomic_bool restore_failed;   /* a restore failed once: lower no more */
static atomic_bool told_not_allowed; /* the "runs at normal priority" line is logged */

static id_t self_tid(void) { return (id_t)syscall(SYS_gettid); }

/* May this process set a thread's nice back to old_nice? */
static bool restore_allowed(int old_nice) {
  assert(old_nice >= -20);
  assert(old_nice <= 19);
  if (atomic_load(&restore_failed)) return false;
  struct rlimit rl;
  if (getrlimit(RLIMIT_NICE, &rl) == 0 &&
      (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= (rlim_t)(20 - old_nice)))
    return true;
  if (geteuid() == 0) return true; /* CAP_SYS_NICE, usually: a failure sets restore_failed */
  if (!atomic_exchange(&told_not_allowed, true))
    mw_log_info("flush and compaction run at normal priority: LimitNICE=%d (RLIMIT_NICE) or "
                "CAP_SYS_NICE lets them yield the CPU to the ack path", 20 - old_nice);
  return false;
}

int mw_bgprio_enter(void) {
  assert(depth >= 0);
  errno = 0;
  int old = getpriority(PRIO_PROCESS, self_tid());
  if (old == -1 && errno != 0) old = 0;
  assert(old >= -20);
  assert(old <= 19);
  if (depth++ == 0) {
    lowered = old < MW_BGPRIO_NICE && restore_allowed(old) &&
              setpriority(PRIO_PROCESS, self_tid(), MW_BGPRIO_NICE) == 0;
  }
  assert(depth > 0);
  return old;
}

void mw_bgprio_leave(int old_nice) {
  assert(depth > 0);
  assert(old_nice >= -20);
  assert(old_nice <= 19);
  if (--depth > 0 || !lowered) return;
  lowered = false;
  if (setpriority(PRIO_PROCESS, self_tid(), old_nice) < 0 && !atomic_exchange(&restore_failed, true))
    mw_log_info("a pool thread stays at nice %d (%s); background work runs at normal priority "
                "from now on: give the daemon LimitNICE=%d or CAP_SYS_NICE",
                MW_BGPRIO_NICE, errno == EPERM ? "not permitted" : "failed", 20 - old_nice);
}
