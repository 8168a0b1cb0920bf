/*
 * datafile_fields.c — DataFile.fields / column_indices: the mapping LanceDB
 * writes, and the check of one it reads (datafile_fields.h).
 *
 * Design: one pre-order walk of a schema builds the mapping (2.1+: leaves
 * only; 2.0: every field), numbering fields without an id the way
 * lance_schema.c does, so the ids always match the data file's own Field
 * list. The check builds that mapping from the data file's own schema (what
 * its columns really hold) and compares the manifest's entries with it one
 * by one, after LanceDB's own refusals (lengths, -1 rules, index bounds);
 * the first problem is the answer.
 *
 * A table `id int64, tags list<string>, meta struct<a: int32, b: string>,
 * v fixed_size_list<float16, 4>` (ids 0; 1, item 2; 3, a 4, b 5; 6) in a 2.2
 * file:  fields [0, 2, 4, 5, 6]  column_indices [0, 1, 2, 3, 4]
 * and in a 2.0 file: fields [0..6], column_indices [0..6].
 */
#include "lance/datafile_fields.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* 20, 21, 22 for file versions 2.0 (0.3 in a 2.0 footer), 2.1, 2.2. */
static int version_of(uint32_t major, uint32_t minor) {
  if ((major == 0 && minor == 3) || (major == 2 && minor == 0)) return 20;
  if (major == 2 && (minor == 1 || minor == 2)) return 20 + (int)minor;
  return -ENOTSUP;
}

static bool is_parent(const mw_field_t *f) {
  mw_layout_t l = mw_field_layout(f);
  return l == MW_LAYOUT_LIST || l == MW_LAYOUT_STRUCT;
}

static bool meta_true(const mw_field_t *f, const char *key) {
  const mw_kv_t *kv = mw_kvs_get(&f->meta, key);
  return kv != NULL && kv->value_len == 4 && strncasecmp((const char *)kv->value, "true", 4) == 0;
}

/* Fields whose column layout Lance makes differently from memwald's. */
static int unsupported(const mw_field_t *f, mw_err_t *err) {
  if (meta_true(f, "packed") || meta_true(f, "lance-encoding:packed"))
    return mw_err_set(err, -ENOTSUP, "field '%s': a packed struct (one column) is not supported", f->name);
  if (mw_kvs_get(&f->meta, "lance-encoding:blob") != NULL)
    return mw_err_set(err, -ENOTSUP, "field '%s': a blob field is not supported", f->name);
  if (f->type == MW_T_STRUCT && f->n_children == 0)
    return mw_err_set(err, -ENOTSUP, "field '%s': a struct without members has no column layout", f->name);
  return 0;
}

typedef struct walk {
  int32_t *ids, *cols;
  size_t cap, n;
  int32_t next_id;
  bool every_field; /* 2.0: parents have columns too */
  mw_err_t *err;
} walk_t;

static int walk(walk_t *w, const mw_field_t *f, int depth) {
  assert(depth <= MW_MAX_NESTING + 1);
  int32_t id = f->id >= 0 ? f->id : w->next_id;
  if (id + 1 > w->next_id) w->next_id = id + 1;
  int rc = unsupported(f, w->err);
  if (rc < 0) return rc;
  if (!is_parent(f) || w->every_field) {
    if (w->n >= w->cap) return mw_err_set(w->err, -EFBIG, "more than %zu columns", w->cap);
    w->ids[w->n] = id;
    w->cols[w->n] = (int32_t)w->n;
    w->n++;
  }
  for (uint32_t i = 0; i < f->n_children; i++)
    if ((rc = walk(w, &f->children[i], depth + 1)) < 0) return rc;
  return 0;
}

int mw_datafile_fields(const mw_schema_t *s, uint32_t major, uint32_t minor, int32_t *ids,
                       int32_t *cols, size_t cap, mw_err_t *err) {
  assert(s != NULL);
  assert(ids != NULL);
  assert(cols != NULL);
  int v = version_of(major, minor);
  if (v < 0) return mw_err_set(err, v, "Lance file version %u.%u has no v2 column layout", major, minor);
  walk_t w = {.ids = ids, .cols = cols, .cap = cap, .every_field = v == 20, .err = err};
  for (size_t i = 0; i < s->n_fields; i++)
    if (s->fields[i].id + 1 > w.next_id) w.next_id = s->fields[i].id + 1;
  for (size_t i = 0; i < s->n_fields; i++) {
    int rc = walk(&w, &s->fields[i], 0);
    if (rc < 0) return rc;
  }
  assert(w.n <= cap);
  return (int)w.n;
}

/* ------------------------------------------------------------------ check */

static const mw_field_t *find_in(const mw_field_t *f, int32_t id) {
  if (f->id == id) return f;
  for (uint32_t i = 0; i < f->n_children; i++) {
    const mw_field_t *c = find_in(&f->children[i], id);
    if (c) return c;
  }
  return NULL;
}

static const mw_field_t *by_id(const mw_schema_t *s, int32_t id) {
  for (size_t i = 0; i < s->n_fields; i++) {
    const mw_field_t *f = find_in(&s->fields[i], id);
    if (f) return f;
  }
  return NULL;
}

typedef struct cctx {
  const mw_schema_t *table;
  const mw_df_ref_t *ref;
  const mw_df_file_t *file;
  int version;
  int32_t *fids, *fcols; /* the file's own mapping */
  int nf;
  int32_t *owner;        /* per file column: the ref id naming it, INT32_MIN = none */
  mw_err_t *err;
} cctx_t;

static const char *name_at(const cctx_t *c, int32_t col, int32_t *id) {
  for (int k = 0; k < c->nf; k++)
    if (c->fcols[k] == col) {
      const mw_field_t *f = by_id(c->file->schema, c->fids[k]);
      *id = c->fids[k];
      return f ? f->name : "?";
    }
  *id = -1;
  return "?";
}

/* LanceDB's refusals of a 2.1+ entry (validate_leaf_column_indices). */
static int check_rule(const cctx_t *c, const mw_field_t *tf, int32_t id, int32_t col) {
  if (c->version < 21) return 0;
  bool needs_column = !is_parent(tf);
  if (needs_column && col == -1)
    return mw_err_set(c->err, -EBADMSG, "field '%s' (id=%d) has column_index=-1, but leaf fields must have a "
                      "valid column index in file format 2.1+", tf->name, id);
  if (!needs_column && col != -1)
    return mw_err_set(c->err, -EBADMSG, "non-leaf field '%s' (id=%d) has column_index=%d, but non-leaf fields "
                      "should have column_index=-1 in file format 2.1+", tf->name, id, col);
  return 0;
}

/* An entry with a column: within the file, one field per column, the column
 * the file's own schema gives the field, and the same type. */
static int check_column(cctx_t *c, const mw_field_t *tf, int32_t id, int32_t col) {
  if ((uint32_t)col >= c->file->n_columns)
    return mw_err_set(c->err, -EBADMSG, "field '%s' (id=%d) has column_index=%d, but the data file has only %u columns",
                      tf->name, id, col, c->file->n_columns);
  if (c->owner[col] != INT32_MIN)
    return mw_err_set(c->err, -EBADMSG, "fields id %d and id %d both name column %d", c->owner[col], id, col);
  c->owner[col] = id;
  int k = 0;
  while (k < c->nf && c->fids[k] != id) k++;
  int32_t other;
  const char *holder = name_at(c, col, &other);
  if (k == c->nf)
    return mw_err_set(c->err, -EBADMSG, "field '%s' (id=%d) has column_index=%d, but the data file holds no column "
                      "of field id %d (column %d is field '%s' (id %d))", tf->name, id, col, id, col, holder, other);
  if (c->fcols[k] != col)
    return mw_err_set(c->err, -EBADMSG, "field '%s' (id=%d) is column %d of the data file, but column_index says %d "
                      "(LanceDB would decode field '%s' (id %d) as '%s')", tf->name, id, c->fcols[k], col, holder,
                      other, tf->name);
  const mw_field_t *ff = by_id(c->file->schema, id);
  if (ff != NULL && !mw_field_type_equal(tf, ff)) {
    char a[96], b[96];
    return mw_err_set(c->err, -EBADMSG, "field '%s' (id=%d) is %s in the table's schema but %s in the data file",
                      tf->name, id, mw_field_type_text(tf, a, sizeof a), mw_field_type_text(ff, b, sizeof b));
  }
  return 0;
}

/* Every column of the file whose field the table has is listed (else
 * LanceDB reads that field as nulls). Skipped when the DataFile has
 * tombstones (ids below 0: fields a later data file replaced). */
static int check_coverage(const cctx_t *c) {
  for (size_t i = 0; i < c->ref->n_ids; i++)
    if (c->ref->ids[i] < 0) return 0;
  for (int k = 0; k < c->nf; k++) {
    const mw_field_t *tf = by_id(c->table, c->fids[k]);
    if (tf == NULL || c->owner[c->fcols[k]] == c->fids[k]) continue;
    return mw_err_set(c->err, -EBADMSG, "field '%s' (id=%d) is column %d of the data file, but DataFile.fields "
                      "does not map it there: LanceDB reads it as nulls", tf->name, c->fids[k], c->fcols[k]);
  }
  return 0;
}

static int check_entries(cctx_t *c) {
  for (size_t i = 0; i < c->ref->n_ids; i++) {
    int32_t id = c->ref->ids[i], col = c->ref->cols[i];
    const mw_field_t *tf = by_id(c->table, id);
    if (tf == NULL) continue; /* a field the table dropped */
    int rc = check_rule(c, tf, id, col);
    if (rc == 0 && col >= 0) rc = check_column(c, tf, id, col);
    if (rc < 0) return rc;
  }
  return check_coverage(c);
}

int mw_datafile_fields_check(const mw_schema_t *table, const mw_df_ref_t *ref,
                             const mw_df_file_t *file, mw_err_t *err) {
  assert(table != NULL);
  assert(ref != NULL);
  assert(file != NULL);
  assert(file->schema != NULL);
  if (ref->n_ids != ref->n_cols)
    return mw_err_set(err, -EBADMSG, "DataFile has %zu field ids but %zu column indices (LanceDB refuses unequal "
                      "lengths)", ref->n_ids, ref->n_cols);
  int rv = version_of(ref->major, ref->minor), fv = version_of(file->major, file->minor);
  if (rv < 0) return mw_err_set(err, rv, "DataFile records file version %u.%u", ref->major, ref->minor);
  if (fv < 0) return mw_err_set(err, fv, "the data file's footer says version %u.%u", file->major, file->minor);
  if (rv != fv)
    return mw_err_set(err, -EBADMSG, "DataFile records file version %d.%d, the data file's footer says %u.%u",
                      rv / 10, rv % 10, file->major, file->minor);
  cctx_t c = {.table = table, .ref = ref, .file = file, .version = rv, .err = err};
  c.fids = malloc(MW_DF_FIELDS_MAX * sizeof *c.fids);
  c.fcols = malloc(MW_DF_FIELDS_MAX * sizeof *c.fcols);
  c.owner = malloc(((size_t)file->n_columns + 1) * sizeof *c.owner);
  int rc = c.fids && c.fcols && c.owner ? 0 : mw_err_set(err, -ENOMEM, "out of memory");
  if (rc == 0) {
    for (uint32_t i = 0; i < file->n_columns; i++) c.owner[i] = INT32_MIN;
    c.nf = rc = mw_datafile_fields(file->schema, file->major, file->minor, c.fids, c.fcols, MW_DF_FIELDS_MAX, err);
  }
  if (rc >= 0) rc = check_entries(&c);
  free(c.fids);
  free(c.fcols);
  free(c.owner);
  return rc < 0 ? rc : 0;
}
