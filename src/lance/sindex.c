/*
 * sindex.c — the per-SSTable BTree index of a maintained scalar index
 * (sindex.h; docs/indexes.md).
 *
 * Design: the files are pk_index.c's BTree (the same sort, the same two
 * Lance 2.2 files through the data-file writer) in the shape LanceDB's flush
 * gives a maintained BTree: pages of 4096 entries, a null min on a page that
 * holds nulls. The manifest entry is written field by field, as LanceDB's
 * bytes are (tests/lance/test_sindex.c compares them). The check decodes
 * both files with the data-file reader and walks them once, so it is the
 * read-back of a build, memwal-inspect's decoder and the fuzz target's
 * subject at once; untrusted bytes only ever give -EBADMSG with a reason.
 */
#include "lance/sindex.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "lance/datafile.h"
#include "lance/sst_index_entry.h"
#include "lance/pk_index.h"

int mw_sindex_build(const mw_field_t *field, const mw_column_t *col, mw_buf_t *data, mw_buf_t *lookup,
                    mw_err_t *err) {
  assert(field != NULL);
  assert(col != NULL);
  static const mw_btree_shape_t shape = {.page_rows = MW_SINDEX_PAGE_ROWS, .null_min = true};
  if (!mw_btree_type_ok(field->type))
    return mw_err_set(err, -ENOTSUP, "BTree index on '%s': type %s is not indexed here", field->name,
                      mw_type_name(field->type));
  return mw_btree_index_write(field, col, 0, &shape, data, lookup, err);
}

/* ------------------------------------------------------------ the entry */

int mw_sindex_entry_encode(const uint8_t uuid[16], const char *name, int32_t field_id, uint64_t created_at_ms,
                           uint64_t data_bytes, uint64_t lookup_bytes, mw_buf_t *out, mw_err_t *err) {
  assert(uuid != NULL);
  assert(name != NULL);
  assert(out != NULL);
  if (field_id < 0 || name[0] == '\0')
    return mw_err_set(err, -EINVAL, "BTree index entry: field id %d, name '%s'", field_id, name);
  mw_sst_index_entry_t e = {.uuid = uuid, .name = name, .field_id = field_id, .dataset_version = 1,
                        .index_version = 0, .created_at_ms = created_at_ms, .details_url = MW_SINDEX_DETAILS_URL,
                        .n_files = 2, .file_paths = {MW_SINDEX_DATA_FILE, MW_SINDEX_LOOKUP_FILE},
                        .file_bytes = {data_bytes, lookup_bytes}};
  int rc = mw_sst_index_entry_encode(&e, out);
  return rc < 0 ? mw_err_set(err, rc, "BTree index entry: out of memory") : 0;
}

/* ------------------------------------------------------------ the check */

typedef struct opened {
  mw_datafile_t df;
  mw_batch_t b;
  bool open;
} opened_t;

static int open_file(const uint8_t *p, size_t n, const char *what, opened_t *o, mw_err_t *err) {
  mw_datafile_read_opts_t ro = {.max_rows = MW_SINDEX_MAX_ROWS};
  mw_err_t why = {0};
  int rc = mw_datafile_open(&o->df, p, n, &ro, &why);
  o->open = rc == 0;
  if (rc == 0) rc = mw_datafile_read_batch(&o->df, &o->b, &why);
  if (rc == -ENOMEM) return mw_err_set(err, rc, "%s: out of memory", what);
  if (rc < 0) return mw_err_set(err, -EBADMSG, "%s: %s", what, why.msg);
  return 0;
}

static void close_file(opened_t *o) {
  if (o->b.cols) mw_batch_free(&o->b);
  if (o->open) mw_datafile_close(&o->df);
}

/* The schema of page_data: values (an indexable type), ids uint64 not null. */
static int data_schema(const mw_schema_t *s, mw_err_t *err) {
  if (s->n_fields != 2 || strcmp(s->fields[0].name, "values") != 0 || strcmp(s->fields[1].name, "ids") != 0)
    return mw_err_set(err, -EBADMSG, "%s: not the columns values, ids", MW_SINDEX_DATA_FILE);
  if (!mw_btree_type_ok(s->fields[0].type) || s->fields[1].type != MW_T_UINT64)
    return mw_err_set(err, -EBADMSG, "%s: values %s, ids %s: not a BTree's types", MW_SINDEX_DATA_FILE,
                      mw_type_name(s->fields[0].type), mw_type_name(s->fields[1].type));
  return 0;
}

/* page_data's entries: ids a permutation of 0..n-1 (and col's values), the
 * values in order. *nulls = the leading nulls. */
static int data_entries(const mw_batch_t *d, const mw_column_t *col, uint64_t *nulls, mw_err_t *err) {
  const mw_field_t *vf = &d->schema->fields[0];
  const mw_column_t *v = &d->cols[0], *ids = &d->cols[1];
  int64_t n = d->n_rows;
  assert(n >= 0);
  assert(col == NULL || col->length == n); /* mw_sindex_check compared them */
  uint8_t *seen = calloc((size_t)n / 8 + 1, 1);
  if (seen == NULL) return mw_err_set(err, -ENOMEM, "%s: out of memory", MW_SINDEX_DATA_FILE);
  int rc = 0;
  *nulls = 0;
  for (int64_t i = 0; i < n && rc == 0; i++) {
    uint64_t id;
    memcpy(&id, ids->values.data + 8 * (size_t)i, 8);
    if (!mw_column_valid(ids, i) || id >= (uint64_t)n || (seen[id >> 3] >> (id & 7) & 1))
      rc = mw_err_set(err, -EBADMSG, "%s: entry %" PRId64 ": id %" PRIu64 " is null, past %" PRId64
                      " rows or repeated", MW_SINDEX_DATA_FILE, i, id, n);
    else if (i > 0 && mw_pk_key_cmp(vf, v, i - 1, v, i) > 0)
      rc = mw_err_set(err, -EBADMSG, "%s: entry %" PRId64 " is below entry %" PRId64, MW_SINDEX_DATA_FILE, i,
                      i - 1);
    else if (col != NULL && mw_pk_key_cmp(vf, v, i, col, (int64_t)id) != 0)
      rc = mw_err_set(err, -EBADMSG, "%s: entry %" PRId64 " is not the value of row %" PRIu64,
                      MW_SINDEX_DATA_FILE, i, id);
    if (rc == 0) seen[id >> 3] |= (uint8_t)(1u << (id & 7));
    if (rc == 0 && !mw_column_valid(v, i)) ++*nulls;
  }
  free(seen);
  return rc;
}

/* batch_size of page_lookup: a decimal 1..MW_PK_INDEX_PAGE_ROWS. */
static int page_rows_of(const mw_schema_t *s, uint32_t *out, mw_err_t *err) {
  const mw_kv_t *kv = mw_kvs_get(&s->meta, "batch_size");
  uint64_t v = 0;
  size_t n = kv ? kv->value_len : 0;
  for (size_t i = 0; i < n && v <= MW_PK_INDEX_PAGE_ROWS; i++)
    v = kv->value[i] >= '0' && kv->value[i] <= '9' ? v * 10 + (uint64_t)(kv->value[i] - '0') : UINT64_MAX;
  if (n == 0 || n > 8 || v == 0 || v > MW_PK_INDEX_PAGE_ROWS)
    return mw_err_set(err, -EBADMSG, "%s: batch_size missing or not 1..%d", MW_SINDEX_LOOKUP_FILE,
                      MW_PK_INDEX_PAGE_ROWS);
  *out = (uint32_t)v;
  return 0;
}

static int lookup_schema(const mw_schema_t *s, mw_type_t t, mw_err_t *err) {
  static const char *const names[] = {"min", "max", "null_count", "page_idx"};
  bool ok = s->n_fields == 4;
  for (size_t i = 0; ok && i < 4; i++) ok = strcmp(s->fields[i].name, names[i]) == 0;
  if (ok) ok = s->fields[0].type == t && s->fields[1].type == t;
  if (ok) ok = s->fields[2].type == MW_T_UINT32 && s->fields[3].type == MW_T_UINT32;
  return ok ? 0 : mw_err_set(err, -EBADMSG, "%s: not the columns min, max (%s), null_count, page_idx (uint32)",
                             MW_SINDEX_LOOKUP_FILE, mw_type_name(t));
}

/* Row p of page_lookup against page p of page_data (nulls: leading nulls). */
static int lookup_row(const mw_batch_t *d, const mw_batch_t *l, int64_t p, uint32_t page_rows, uint64_t nulls,
                      mw_err_t *err) {
  assert(p >= 0);
  assert(p < l->n_rows);
  assert(page_rows > 0);
  const mw_field_t *vf = &d->schema->fields[0];
  int64_t at = p * (int64_t)page_rows, end = at + page_rows < d->n_rows ? at + page_rows : d->n_rows;
  uint64_t want_nulls = nulls > (uint64_t)at ? (nulls < (uint64_t)end ? nulls : (uint64_t)end) - (uint64_t)at : 0;
  uint32_t nc, idx;
  memcpy(&nc, l->cols[2].values.data + 4 * (size_t)p, 4);
  memcpy(&idx, l->cols[3].values.data + 4 * (size_t)p, 4);
  /* the min: null when the page holds nulls, else its first value */
  bool min_ok = want_nulls ? !mw_column_valid(&l->cols[0], p) : mw_pk_key_cmp(vf, &l->cols[0], p, &d->cols[0], at) == 0;
  if (nc != want_nulls || idx != (uint64_t)p || !min_ok || mw_pk_key_cmp(vf, &l->cols[1], p, &d->cols[0], end - 1) != 0)
    return mw_err_set(err, -EBADMSG, "%s: row %" PRId64 " is not page %" PRId64 "'s min, max, null count %" PRIu64
                      " and index", MW_SINDEX_LOOKUP_FILE, p, p, want_nulls);
  return 0;
}

static int lookup_check(const mw_batch_t *d, const mw_batch_t *l, uint64_t nulls, mw_sindex_info_t *info,
                        mw_err_t *err) {
  assert(d->schema->n_fields == 2); /* data_schema passed */
  int rc = lookup_schema(l->schema, d->schema->fields[0].type, err);
  if (rc == 0) rc = page_rows_of(l->schema, &info->page_rows, err);
  if (rc < 0) return rc;
  uint64_t pages = ((uint64_t)d->n_rows + info->page_rows - 1) / info->page_rows;
  if ((uint64_t)l->n_rows != pages)
    return mw_err_set(err, -EBADMSG, "%s: %" PRId64 " rows for %" PRIu64 " pages of %u entries",
                      MW_SINDEX_LOOKUP_FILE, l->n_rows, pages, info->page_rows);
  for (int64_t p = 0; p < l->n_rows && rc == 0; p++) rc = lookup_row(d, l, p, info->page_rows, nulls, err);
  info->pages = pages;
  return rc;
}

int mw_sindex_check(const uint8_t *data, size_t data_len, const uint8_t *lookup, size_t lookup_len,
                    const mw_field_t *field, const mw_column_t *col, mw_sindex_info_t *info, mw_err_t *err) {
  assert(data != NULL || data_len == 0);
  assert(lookup != NULL || lookup_len == 0);
  assert((field == NULL) == (col == NULL));
  mw_sindex_info_t dummy;
  if (info == NULL) info = &dummy;
  memset(info, 0, sizeof *info);
  opened_t d = {0}, l = {0};
  int rc = open_file(data, data_len, MW_SINDEX_DATA_FILE, &d, err);
  if (rc == 0) rc = data_schema(d.b.schema, err);
  if (rc == 0 && field != NULL && (field->type != d.b.schema->fields[0].type || col->length != d.b.n_rows))
    rc = mw_err_set(err, -EBADMSG, "%s: %" PRId64 " %s values for the %" PRId64 " %s rows of '%s'",
                    MW_SINDEX_DATA_FILE, d.b.n_rows, mw_type_name(d.b.schema->fields[0].type), col->length,
                    mw_type_name(field->type), field->name);
  if (rc == 0) rc = data_entries(&d.b, col, &info->nulls, err);
  if (rc == 0) rc = open_file(lookup, lookup_len, MW_SINDEX_LOOKUP_FILE, &l, err);
  if (rc == 0) rc = lookup_check(&d.b, &l.b, info->nulls, info, err);
  if (rc == 0) {
    info->entries = (uint64_t)d.b.n_rows;
    info->type = d.b.schema->fields[0].type;
  }
  close_file(&l);
  close_file(&d);
  return rc;
}
