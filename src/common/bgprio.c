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
 * RLIMIT_NICE ceiling (systemd/memwald.service sets LimitNICE=). Without
 * either, the pool thread stays at the background value; libuv's pool then
 * runs its other items (stats walk, trim; the `threads` storage backend's
 * syscalls) at that value too, which costs them only under contention.
 */
#include "common/bgprio.h"

#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/log.h"

static _Thread_local int depth; /* nested enters on this thread */
static atomic_bool warned;

static id_t self_tid(void) { return (id_t)syscall(SYS_gettid); }

int mw_bgprio_enter(void) {
  assert(depth >= 0);
  errno = 0;
  int old = getpriority(PRIO_PROCESS, self_tid());
  if (old == -1 && errno != 0) old = 0;
  if (depth++ == 0 && old < MW_BGPRIO_NICE) (void)setpriority(PRIO_PROCESS, self_tid(), MW_BGPRIO_NICE);
  assert(old >= -20 && old <= 19);
  return old;
}

void mw_bgprio_leave(int old_nice) {
  assert(depth > 0);
  assert(old_nice >= -20 && old_nice <= 19);
  if (--depth > 0 || old_nice >= MW_BGPRIO_NICE) return;
  if (setpriority(PRIO_PROCESS, self_tid(), old_nice) < 0 && !atomic_exchange(&warned, true))
    mw_log_info("background work stays at nice %d on its pool threads (%s): give the daemon "
                "LimitNICE=%d or CAP_SYS_NICE to restore them between jobs",
                MW_BGPRIO_NICE, errno == EPERM ? "not permitted" : "failed", 20 - old_nice);
}
