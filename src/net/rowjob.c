/*
 * rowjob.c — parse a run of NDJSON row lines into groups and refused lines.
 *
 * Design: the loop thread copies each row line into the job (one append to
 * `raw`, one index entry), a worker parses them with the job's own parser
 * into batches, and the loop reads the output in line order. A refused line
 * ends the group before it, so "OK <rows before>" can precede its ERR, as it
 * did when lines were parsed on the loop thread. Nothing here is shared
 * between jobs: the schema is read-only while the table is open.
 */
#include "net/rowjob.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(MW_ROWJOB_MAX_BYTES <= (size_t)UINT32_MAX + 1, "line offsets are 32-bit");
_Static_assert(MW_ROWJOB_MAX_LINES <= UINT32_MAX, "line counts are 32-bit");

void mw_rowjob_init(mw_rowjob_t *j) {
  assert(j != NULL);
  memset(j, 0, sizeof *j);
  mw_buf_init(&j->raw);
}

/* Free what the output still holds; keep the array. */
static void out_clear(mw_rowjob_t *j) {
  for (size_t i = 0; i < j->n_out; i++)
    if (!j->out[i].is_err && !j->out[i].taken) mw_batch_free(&j->out[i].batch);
  j->n_out = 0;
}

void mw_rowjob_free(mw_rowjob_t *j) {
  assert(j != NULL);
  out_clear(j);
  free(j->out);
  free(j->lines);
  mw_buf_free(&j->raw);
  if (j->parser_ok) mw_jsonrow_free(&j->parser);
  memset(j, 0, sizeof *j);
}

int mw_rowjob_begin(mw_rowjob_t *j, const void *table, const mw_schema_t *schema,
                    const char *table_name, const mw_jsonrow_opts_t *opts,
                    uint32_t max_group_rows) {
  assert(j != NULL);
  assert(table != NULL);
  assert(schema != NULL);
  assert(table_name != NULL);
  out_clear(j);
  mw_buf_reset(&j->raw);
  j->n_lines = 0;
  j->bytes = 0;
  j->rows_ok = j->rows_refused = 0;
  j->status = 0;
  j->ran = false;
  j->max_group_rows = max_group_rows ? max_group_rows : MW_ROWJOB_MAX_LINES;
  if (!j->parser_ok || j->parser_table != table) {
    if (j->parser_ok) mw_jsonrow_free(&j->parser);
    j->parser_ok = false;
    int rc = mw_jsonrow_init(&j->parser, schema, opts);
    if (rc < 0) return rc;
    j->parser_ok = true;
    j->parser_table = table;
  }
  j->table = table;
  j->schema = schema;
  snprintf(j->table_name, sizeof j->table_name, "%s", table_name);
  assert(j->parser.schema == schema);
  return 0;
}

int mw_rowjob_add(mw_rowjob_t *j, const char *data, size_t len, uint64_t line, size_t bytes,
                  bool del) {
  assert(j->table != NULL);
  assert(!j->ran);
  assert(line > 0);
  assert(bytes >= len);
  if (j->n_lines >= MW_ROWJOB_MAX_LINES || j->raw.len + len > MW_ROWJOB_MAX_BYTES ||
      bytes > UINT32_MAX)
    return -E2BIG;
  if (j->n_lines == j->cap_lines) {
    uint32_t cap = j->cap_lines ? 2 * j->cap_lines : 256;
    mw_rowjob_line_t *l = realloc(j->lines, (size_t)cap * sizeof *l);
    if (!l) return -ENOMEM;
    j->lines = l;
    j->cap_lines = cap;
  }
  size_t off = j->raw.len;
  int rc = mw_buf_append(&j->raw, data, len);
  if (rc < 0) return rc;
  j->lines[j->n_lines++] = (mw_rowjob_line_t){
      .line = line, .off = (uint32_t)off, .len = (uint32_t)len, .bytes = (uint32_t)bytes, .del = del};
  j->bytes += bytes;
  assert(j->raw.len == off + len);
  return 0;
}

static mw_rowjob_out_t *out_push(mw_rowjob_t *j) {
  if (j->n_out == j->cap_out) {
    size_t cap = j->cap_out ? 2 * j->cap_out : 4;
    mw_rowjob_out_t *o = realloc(j->out, cap * sizeof *o);
    if (!o) return NULL;
    j->out = o;
    j->cap_out = cap;
  }
  mw_rowjob_out_t *o = &j->out[j->n_out++];
  memset(o, 0, offsetof(mw_rowjob_out_t, msg));
  o->msg[0] = '\0';
  return o;
}

/* The open group, or a new one (NULL: out of memory). */
static mw_rowjob_out_t *group_open(mw_rowjob_t *j) {
  if (j->n_out > 0 && !j->out[j->n_out - 1].is_err && j->out[j->n_out - 1].rows < j->max_group_rows)
    return &j->out[j->n_out - 1];
  mw_rowjob_out_t *o = out_push(j);
  if (!o) return NULL;
  if (mw_batch_init(&o->batch, j->schema) < 0) {
    j->n_out--;
    return NULL;
  }
  return o;
}

static mw_lp_code_t code_of(int rc, const mw_jsonrow_error_t *je) {
  static const mw_lp_code_t map[] = {
      [MW_JSONROW_OK] = MW_LP_E_INTERNAL,     [MW_JSONROW_E_PARSE] = MW_LP_E_PARSE,
      [MW_JSONROW_E_SCHEMA] = MW_LP_E_SCHEMA, [MW_JSONROW_E_TYPE] = MW_LP_E_TYPE,
      [MW_JSONROW_E_PK] = MW_LP_E_PK,         [MW_JSONROW_E_INTERNAL] = MW_LP_E_INTERNAL};
  _Static_assert(sizeof map / sizeof map[0] == MW_JSONROW_E_INTERNAL + 1, "every class mapped");
  if (rc != -EBADMSG || (unsigned)je->cls > MW_JSONROW_E_INTERNAL) return MW_LP_E_INTERNAL;
  return map[je->cls];
}

/* Line l was refused: the group before it is closed by this record. */
static int refuse(mw_rowjob_t *j, const mw_rowjob_line_t *l, int rc, const mw_jsonrow_error_t *je) {
  mw_rowjob_out_t *o = out_push(j);
  if (!o) return -ENOMEM;
  o->is_err = true;
  o->line = l->line;
  o->code = code_of(rc, je);
  o->off = l->off;
  o->len = l->len;
  o->bytes = l->bytes;
  /* table, byte, column (jsonrow names it), reason */
  snprintf(o->msg, sizeof o->msg, "table \"%.127s\": byte %zu: %.255s", j->table_name, je->offset,
           je->msg);
  j->rows_refused++;
  return 0;
}

void mw_rowjob_run(mw_rowjob_t *j) {
  assert(j->parser_ok);
  assert(!j->ran);
  assert(j->n_out == 0);
  j->ran = true;
  for (uint32_t i = 0; i < j->n_lines; i++) {
    const mw_rowjob_line_t *l = &j->lines[i];
    mw_rowjob_out_t *g = group_open(j);
    if (!g) {
      j->status = -ENOMEM;
      break;
    }
    mw_jsonrow_error_t je = {0};
    int rc = mw_jsonrow_parse(&j->parser, (const char *)j->raw.data + l->off, l->len, l->del,
                              &g->batch, &je);
    if (rc < 0) {
      if (g->rows == 0) { /* an empty group goes: the refusal takes its place */
        mw_batch_free(&g->batch);
        j->n_out--;
      }
      if (refuse(j, l, rc, &je) < 0) {
        j->status = -ENOMEM;
        break;
      }
      continue;
    }
    if (g->rows == 0) g->first_line = l->line;
    g->rows++;
    g->last_line = l->line;
    g->bytes += l->bytes;
    j->rows_ok++;
    assert(g->batch.n_rows == (int64_t)g->rows);
  }
  assert(j->status < 0 || j->rows_ok + j->rows_refused == j->n_lines);
}

mw_batch_t mw_rowjob_take(mw_rowjob_t *j, size_t i) {
  assert(i < j->n_out);
  assert(!j->out[i].is_err);
  assert(!j->out[i].taken);
  mw_batch_t b = j->out[i].batch;
  j->out[i].batch = (mw_batch_t){0};
  j->out[i].taken = true;
  assert(b.n_rows == (int64_t)j->out[i].rows);
  return b;
}
