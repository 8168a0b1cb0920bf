/*
 * rows.h — deterministic rows for the vectors' schema (id int64 PK, name
 * utf8, v float64, vec fixed_size_list<float32, 8>, then _tombstone) and a
 * model of the table's final state per key, for the shard tests and the
 * LanceDB interop tool. Test-only.
 */
#ifndef MW_TESTS_ENGINE_ROWS_H
#define MW_TESTS_ENGINE_ROWS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "lance/batch.h"

typedef struct er_row {
  int64_t id;
  bool tomb;
  char name[48];
  bool name_null;
  double v;
  bool v_null;
  float vec[8];
  bool vec_null;
} er_row_t;

typedef struct er_model {
  uint64_t rnd;
  er_row_t *last;     /* per key: the newest row written */
  bool *set;
  int64_t max_key;
} er_model_t;

/* The tools' own deadline: after `seconds`, print "<tool>: no result within
 * N s (an awaited engine event never came)" to stderr and exit 3, so a stuck
 * wait fails with a message rather than at meson's timeout. */
void er_deadline(const char *tool, unsigned seconds);

void er_model_init(er_model_t *m, uint64_t seed, int64_t max_key);
void er_model_free(er_model_t *m);
uint64_t er_rand(er_model_t *m);
/* A random row for key `id` (tomb_frac: probability of a delete). */
void er_row_gen(er_model_t *m, er_row_t *r, int64_t id, double tomb_frac);
/* Append to a batch of the vectors' schema (fields id, name, v, vec, _tombstone). */
int er_row_append(mw_batch_t *b, const er_row_t *r);
/* n random rows with keys in [0, max_key) into a fresh batch; recorded in the model. */
int er_batch(er_model_t *m, const mw_schema_t *schema, int64_t n, double tomb_frac, mw_batch_t *out);
/* The model's final state as check.mjs --model lines. */
int er_model_write(const er_model_t *m, FILE *f);
/* Row r of a batch as an er_row_t (for comparisons). */
void er_row_read(const mw_batch_t *b, int64_t r, er_row_t *out);
bool er_row_equal(const er_row_t *a, const er_row_t *b);

/* A writer fault for the read-back tests (lance/sstable.h's data hook): the
 * row count in a Lance data file's FileDescriptor (its last field,
 * `length`) becomes n ^ 1, every other byte as written: the file still
 * opens, but its pages no longer hold its rows. Counts the files it
 * changed in er_flipped_files (any thread). -1 when `file` is no data file. */
extern _Atomic int er_flipped_files;
int er_flip_row_count(mw_buf_t *file);

#endif
