/*
 * testutil.h — small helpers shared by the cmocka suites: locating the golden
 * vectors, reading whole files, listing a directory, scratch directories, and
 * memwal-inspect over the tables a test leaves.
 * Test-only code; failures abort the test with a message naming the path.
 */
#ifndef MW_TESTUTIL_H
#define MW_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

/* $MW_VECTORS, or aborts the test run with a clear message when unset or
 * missing (a golden test must never pass vacuously). */
const char *tu_vectors_dir(void);
/* Read a whole file; returns malloc'd bytes (NUL-terminated) or NULL with errno. */
uint8_t *tu_read_file(const char *path, size_t *len);
int tu_write_file(const char *path, const void *p, size_t len);
/* Sorted list of entry names in `dir` matching suffix `suffix` (NULL = all,
 * "." and ".." excluded). Returns count; *names is malloc'd (free with
 * tu_free_names). */
size_t tu_list_dir(const char *dir, const char *suffix, char ***names);
void tu_free_names(char **names, size_t n);
/* Recursively find files under `root` whose path ends with `suffix`. */
size_t tu_find_files(const char *root, const char *suffix, char ***paths);
/* mkdtemp under $TMPDIR (or /tmp); returns a malloc'd path. */
char *tu_mkdtemp(const char *tag);
/* rm -rf (best effort). */
void tu_rmtree(const char *path);
/* memwal-inspect on every table under root (tests/inspect/inspect_tables.py:
 * `dump --json` decodes every object, `verify` finds no problem, or only
 * problems whose text contains allow, unless allow is NULL); its report goes
 * to stderr. Call it before removing a scratch directory, when nothing writes
 * to it any more. Returns the script's exit status: 0 when every table
 * passed and at least min_tables were found; nonzero otherwise, also when
 * MW_SOURCE_ROOT or MW_INSPECT is unset (meson's test_env sets both). */
int tu_inspect_tables(const char *root, const char *allow, unsigned min_tables);
/* printf into a malloc'd string. */
char *tu_strf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
