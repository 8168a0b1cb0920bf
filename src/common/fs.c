/*
 * fs.c — see fs.h.
 *
 * The path is copied once and cut at each '/' in turn, so every prefix is
 * made in order from the root down; a prefix that exists (EEXIST) is passed
 * over, which also makes two processes making the same tree at once safe.
 */
#include "common/fs.h"

#include <assert.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

int mw_fs_mkdir_p(const char *path, mode_t mode) {
  assert(path != NULL);
  assert((mode & ~(mode_t)07777) == 0);
  char buf[MW_FS_PATH_MAX_BYTES];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof buf) return -ENAMETOOLONG;
  memcpy(buf, path, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (buf[i] != '/' && buf[i] != '\0') continue;
    char c = buf[i];
    buf[i] = '\0';
    if (mkdir(buf, mode) != 0 && errno != EEXIST) return -errno;
    buf[i] = c;
  }
  return 0;
}
