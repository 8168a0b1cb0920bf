/*
 * jtree.h — the inspector's output model: a small ordered JSON tree, printed
 * either as JSON (--json) or as indented text.
 *
 * Every decoder of the inspector builds one tree per artifact, so the text
 * and JSON outputs can never disagree (the text is a rendering of the same
 * tree). Objects keep insertion order. Strings are bytes; JSON output
 * escapes them (invalid UTF-8 bytes become \u00XX of the byte, so any input
 * gives valid JSON).
 *
 * Text rendering:
 *   kind: shard_manifest
 *   version: 2
 *   sstables:
 *     - generation: 1
 *       path: aa4a1b97_gen_1
 *   shard_id: aa48498d-ac91-59e2-8452-69f46010ace2
 * A short array of scalars is printed inline: `fields: [0, 1, 2]`.
 *
 * Allocation failures abort (a command-line tool; nothing to save).
 */
#ifndef MW_INSPECT_JTREE_H
#define MW_INSPECT_JTREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum { J_NULL, J_BOOL, J_INT, J_UINT, J_DBL, J_STR, J_ARR, J_OBJ } j_type_t;

typedef struct j j_t;
struct j {
  j_type_t t;
  bool b;
  int64_t i;
  uint64_t u;
  double d;
  char *s;         /* J_STR bytes (NUL-terminated, may hold NULs: slen) */
  size_t slen;
  j_t **items;     /* J_ARR / J_OBJ */
  char **keys;     /* J_OBJ */
  size_t n, cap;
};

j_t *j_obj(void);
j_t *j_arr(void);
j_t *j_str(const char *s);
j_t *j_strn(const void *p, size_t n);
j_t *j_int(int64_t v);
j_t *j_uint(uint64_t v);
j_t *j_dbl(double v);
j_t *j_bool(bool v);
j_t *j_null(void);
j_t *j_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Add to an object (key copied) / array; returns the value for chaining. */
j_t *j_set(j_t *obj, const char *key, j_t *v);
j_t *j_push(j_t *arr, j_t *v);
void j_free(j_t *v);

void j_print_json(FILE *out, const j_t *v);
void j_print_text(FILE *out, const j_t *v);

#endif
