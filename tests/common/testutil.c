/* testutil.c — see testutil.h. */
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

const char *tu_vectors_dir(void) {
  const char *d = getenv("MW_VECTORS");
  struct stat st;
  if (d == NULL || stat(d, &st) != 0 || !S_ISDIR(st.st_mode)) {
    fprintf(stderr, "golden vectors not found: MW_VECTORS=%s\n", d ? d : "(unset)");
    abort();
  }
  return d;
}

uint8_t *tu_read_file(const char *path, size_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  struct stat st;
  if (fstat(fd, &st) != 0) { close(fd); return NULL; }
  uint8_t *p = malloc((size_t)st.st_size + 1);
  size_t got = 0;
  while (p != NULL && got < (size_t)st.st_size) {
    ssize_t r = read(fd, p + got, (size_t)st.st_size - got);
    if (r <= 0) { free(p); p = NULL; break; }
    got += (size_t)r;
  }
  close(fd);
  if (p == NULL) return NULL;
  p[got] = 0;
  *len = got;
  return p;
}

int tu_write_file(const char *path, const void *p, size_t len) {
  FILE *f = fopen(path, "wb");
  if (f == NULL) return -errno;
  size_t w = fwrite(p, 1, len, f);
  int rc = fclose(f);
  return (w == len && rc == 0) ? 0 : -EIO;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

size_t tu_list_dir(const char *dir, const char *suffix, char ***names) {
  DIR *d = opendir(dir);
  size_t n = 0, cap = 0;
  char **v = NULL;
  struct dirent *e;
  while (d != NULL && (e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    if (suffix != NULL && !ends_with(e->d_name, suffix)) continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 16;
      v = realloc(v, cap * sizeof *v);
    }
    v[n++] = strdup(e->d_name);
  }
  if (d != NULL) closedir(d);
  if (n) qsort(v, n, sizeof *v, cmp_str);
  *names = v;
  return n;
}

void tu_free_names(char **names, size_t n) {
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
}

static char **found;
static size_t found_n, found_cap;
static const char *found_suffix;

static int find_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  if (flag == FTW_F && ends_with(path, found_suffix)) {
    if (found_n == found_cap) {
      found_cap = found_cap ? found_cap * 2 : 16;
      found = realloc(found, found_cap * sizeof *found);
    }
    found[found_n++] = strdup(path);
  }
  return 0;
}

size_t tu_find_files(const char *root, const char *suffix, char ***paths) {
  found = NULL;
  found_n = found_cap = 0;
  found_suffix = suffix;
  nftw(root, find_cb, 16, FTW_PHYS);
  if (found_n) qsort(found, found_n, sizeof *found, cmp_str);
  *paths = found;
  return found_n;
}

char *tu_mkdtemp(const char *tag) {
  const char *tmp = getenv("TMPDIR");
  char *p = tu_strf("%s/memwald-%s-XXXXXX", tmp ? tmp : "/tmp", tag);
  if (mkdtemp(p) == NULL) {
    fprintf(stderr, "mkdtemp %s: %s\n", p, strerror(errno));
    abort();
  }
  return p;
}

static int rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path) == 0 ? 0 : 0;
}

void tu_rmtree(const char *path) { nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS); }

int tu_inspect_tables(const char *root, const char *allow, unsigned min_tables) {
  const char *src = getenv("MW_SOURCE_ROOT");
  if (src == NULL || getenv("MW_INSPECT") == NULL) {
    fprintf(stderr, "tu_inspect_tables: MW_SOURCE_ROOT and MW_INSPECT must be set (meson test sets them)\n");
    return 2;
  }
  char *script = tu_strf("%s/tests/inspect/inspect_tables.py", src);
  char min[16];
  snprintf(min, sizeof min, "%u", min_tables);
  char *argv[] = {"python3", script, "--min-tables", min, (char *)root, NULL, NULL, NULL};
  if (allow != NULL) {
    argv[5] = "--allow";
    argv[6] = (char *)allow;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t pid;
  int rc = posix_spawnp(&pid, "python3", NULL, NULL, argv, environ);
  free(script);
  if (rc != 0) {
    fprintf(stderr, "tu_inspect_tables: cannot run python3: %s\n", strerror(rc));
    return 2;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return 2;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 2;
}

char *tu_strf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = NULL;
  if (vasprintf(&s, fmt, ap) < 0) abort();
  va_end(ap);
  return s;
}
