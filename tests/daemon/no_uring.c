/*
 * no_uring — run a program with io_uring refused, as a seccomp sandbox or a
 * locked-down container would refuse it: io_uring_setup(2) fails with EPERM.
 *
 *   no_uring PROGRAM [ARGS...]
 *
 * Used by the daemon suite to prove memwald falls back to its thread-pool
 * storage backend and says so once in its log.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define MW_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define MW_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "no_uring: add this architecture's AUDIT_ARCH"
#endif

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: no_uring PROGRAM [ARGS...]\n");
    return 2;
  }
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, MW_AUDIT_ARCH, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {.len = sizeof filter / sizeof filter[0], .filter = filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
    fprintf(stderr, "no_uring: cannot install the seccomp filter: %s\n", strerror(errno));
    return 2;
  }
  execv(argv[1], argv + 1);
  fprintf(stderr, "no_uring: exec %s: %s\n", argv[1], strerror(errno));
  return 2;
}
