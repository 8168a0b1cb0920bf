/*
 * test_bgprio.c — common/bgprio: background work is lowered to
 * MW_BGPRIO_NICE and put back, and never left lowered where the process may
 * not put it back (the pool threads it runs on also carry the `threads`
 * storage backend's WAL puts).
 *
 * Each case runs in a child (the rlimit and the uid changes must not leak
 * into the other cases). Two cases: root (CAP_SYS_NICE), where the thread
 * is lowered and put back; and uid 65534 with RLIMIT_NICE 0 (a daemon run
 * by hand), where it must not be lowered at all (the code before this test
 * lowered it and left it at 10). The RLIMIT_NICE >= 20 path (systemd's
 * LimitNICE=20, as a user) needs CAP_SYS_RESOURCE to set up, which this
 * sandbox's root lacks (hard limit 0), so it has no case here.
 */
#include <errno.h>
#include <stdbool.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cases.h"

#include "common/bgprio.h"

static int nice_now(void) {
  errno = 0;
  int v = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
  return v == -1 && errno != 0 ? -100 : v;
}

/* In the child: 0 when the nice value is `during` inside enter/leave and 0
 * after; the failing step's number otherwise. */
static int child_case(bool drop_root, int during) {
  if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 0) < 0) return 10;
  struct rlimit rl = {0, 0};
  if (drop_root && setrlimit(RLIMIT_NICE, &rl) < 0) return 11;
  if (drop_root && setresuid(65534, 65534, 65534) < 0) return 12;
  int old = mw_bgprio_enter();
  if (old != 0) return 1;
  if (nice_now() != during) return 2;
  int inner = mw_bgprio_enter(); /* nested: no change */
  if (nice_now() != during) return 3;
  mw_bgprio_leave(inner);
  if (nice_now() != during) return 4;
  mw_bgprio_leave(old);
  if (nice_now() != 0) return 5; /* never left lowered */
  return 0;
}

static void run_case(bool drop_root, int during) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) _exit(child_case(drop_root, during));
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  if (WEXITSTATUS(st) != 0) fprintf(stderr, "%s: failed at step %d\n", drop_root ? "uid 65534" : "root", WEXITSTATUS(st));
  assert_int_equal(WEXITSTATUS(st), 0);
}

/* Only root can set up both cases (reset a nice value, change uid): the
 * README's test command runs as root; anywhere else this fails, saying why. */
static void need_root(void) {
  if (geteuid() != 0) fail_msg("test_bgprio must run as root (it changes uid and nice values)");
}

/* Root: lowered while inside, back to 0 after. */
static void test_restore_permitted(void **state) {
  (void)state;
  need_root();
  run_case(false, MW_BGPRIO_NICE);
}

/* No permission (a user's default RLIMIT_NICE of 0): never lowered, since
 * it could not be put back. */
static void test_restore_not_permitted(void **state) {
  (void)state;
  need_root();
  run_case(true, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_restore_permitted),
      cmocka_unit_test(test_restore_not_permitted),
  };
  return tu_run_group_name("bgprio", tests, NULL, NULL);
}
