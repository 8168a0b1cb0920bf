/*
 * bgprio.h — background work at a lower CPU priority than the ack path.
 *
 * Owns: the nice value of the calling thread while it runs one piece of
 * background work (a flush part, a compaction phase) on a libuv pool thread.
 * Errors: none returned. A thread is lowered only where its priority can be
 * restored (RLIMIT_NICE, root); elsewhere background work runs at normal
 * priority (logged once for the process), so the shared pool threads never
 * stay at the background value for other work.
 */
#ifndef MW_COMMON_BGPRIO_H
#define MW_COMMON_BGPRIO_H

/* The nice value background work runs at. Not 19: a flush must still make
 * progress on a saturated machine, or unflushed MemTables pile up to the
 * backpressure limit; at 10 the CFS weight is 110 against the ack path's
 * 1024, so the loop and the parse workers win every contested slice. */
enum { MW_BGPRIO_NICE = 10 };
_Static_assert(MW_BGPRIO_NICE > 0 && MW_BGPRIO_NICE <= 19, "background nice must lower the priority");

/* Lowers the calling thread to MW_BGPRIO_NICE; returns the value to hand
 * to mw_bgprio_leave. */
int mw_bgprio_enter(void);
/* Puts the calling thread back to what mw_bgprio_enter found, if enter
 * lowered it (only where RLIMIT_NICE >= 20 - old, systemd's LimitNICE=, or
 * as root). */
void mw_bgprio_leave(int old_nice);

#endif
