/*
 * arrowframe.c — ARROW frame -> rows of the table's batch (see arrowframe.h).
 *
 * Three passes over a decoded stream, each failing with the reply's class:
 *   1. decode      mw_ipc_decode (the bytes are untrusted; it checks every
 *                  offset, length and buffer against the record batch)
 *   2. match       table column i -> frame column map[i] (-1 = absent) by
 *                  name, type and FSL dimension; then every frame column must
 *                  be known (unless ignore_unknown_fields) and named once
 *   3. append      no nulls where the table has a not-null column; then each
 *                  record batch, column by column, into `out` (the first
 *                  one's columns are moved, not copied); absent
 *                  columns get nulls (`_tombstone`: false); then the result
 *                  is validated (nulls in not-null columns) and every utf8
 *                  and large_utf8 value, nested ones too, is checked to be
 *                  UTF-8 (Lance readers refuse anything else, so one bad
 *                  frame must not reach the table)
 *   4. pass-through the frame's record batches, re-framed for the table's
 *                  WAL stream with their bodies as they are (mw_ipc_rebatch),
 *                  go into out->wal_ipc when the frame allows it, so the WAL
 *                  writes them instead of encoding the rows again
 * Example: table {id int64 not null, v utf8, _tombstone bool not null} and a
 * frame {v utf8, id int64} of 3 rows -> map = {1, 0, -1}, 3 rows with
 * _tombstone = false.
 */
#include "net/arrowframe.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define TOMBSTONE "_tombstone"

#define REFUSE(c, rc, ...) ((*code = (c)), mw_err_set(err, (rc), __VA_ARGS__))

/* "int64", "fixed_size_list<float32, 8>", "timestamp<ms, UTC>". */
static const char *type_text(const mw_field_t *f, char *buf, size_t len) {
  return mw_field_type_text(f, buf, len);
}

/* Pass 2: map[i] = frame column of table column i, or -1. */
static int match(const mw_schema_t *ts, const mw_schema_t *fs, bool ignore_unknown, int *map,
                 mw_lp_code_t *code, mw_err_t *err) {
  assert(ts->n_fields <= MW_MAX_FIELDS);
  for (size_t i = 0; i < ts->n_fields; i++) {
    const mw_field_t *f = &ts->fields[i];
    int j = mw_schema_find(fs, f->name);
    map[i] = j < 0 ? -1 : j;
    if (j < 0) {
      if (!f->nullable && strcmp(f->name, TOMBSTONE) != 0)
        return REFUSE(MW_LP_E_SCHEMA, -EBADMSG, "ARROW frame: column \"%s\" (not null) is missing",
                      f->name);
      continue;
    }
    const mw_field_t *g = &fs->fields[j];
    if (!mw_field_type_equal(g, f)) {
      char a[MW_FIELD_TEXT_BYTES / 2], b[MW_FIELD_TEXT_BYTES / 2];
      return REFUSE(MW_LP_E_TYPE, -EBADMSG, "ARROW frame: column \"%s\" is %s, the table has %s",
                    f->name, type_text(g, a, sizeof a), type_text(f, b, sizeof b));
    }
  }
  for (size_t j = 0; j < fs->n_fields; j++) {
    const char *name = fs->fields[j].name;
    if (!ignore_unknown && mw_schema_find(ts, name) < 0)
      return REFUSE(MW_LP_E_SCHEMA, -EBADMSG, "ARROW frame: unknown column \"%s\"", name);
    if (mw_schema_find(fs, name) != (int)j)
      return REFUSE(MW_LP_E_SCHEMA, -EBADMSG, "ARROW frame: duplicate column \"%s\"", name);
  }
  return 0;
}

/* Pass 3, before appending (the column builders assert that a not-null
 * column never takes a null): nulls where the table has none. */
static int check_nulls(const mw_schema_t *ts, const mw_ipc_stream_t *st, const int *map,
                       mw_lp_code_t *code, mw_err_t *err) {
  for (size_t i = 0; i < ts->n_fields; i++) {
    if (map[i] < 0 || ts->fields[i].nullable) continue;
    int64_t nulls = 0;
    for (size_t k = 0; k < st->n_batches; k++) nulls += st->batches[k].cols[map[i]].null_count;
    if (nulls > 0)
      return REFUSE(MW_LP_E_TYPE, -EBADMSG, "ARROW frame: column \"%s\" has %" PRId64
                    " nulls, the table's is not null", ts->fields[i].name, nulls);
  }
  return 0;
}

/* Pass 3, one record batch. The first one (out has no rows yet) gives its
 * decoded columns to `out` (a swap: the decoder's buffers become the
 * batch's, which the MemTable then keeps), so a frame of one record batch
 * costs one copy of its values, the decode's; later batches are appended.
 * The decoder's columns are in the model's canonical form (the WAL replay
 * hands them to the MemTable the same way), so both paths hold the same. */
static int append_batch(const mw_schema_t *ts, mw_batch_t *in, const int *map, mw_batch_t *out) {
  assert(in->n_rows >= 0);
  int rc = 0;
  bool first = out->n_rows == 0;
  for (size_t i = 0; i < ts->n_fields && rc == 0; i++) {
    const mw_field_t *f = &ts->fields[i];
    mw_column_t *dst = &out->cols[i];
    if (map[i] >= 0) {
      mw_column_t *src = &in->cols[map[i]];
      assert(src->length == in->n_rows);
      if (first) {
        assert(dst->length == 0);
        assert(dst->n_children == src->n_children);
        mw_column_t tmp = *dst;
        *dst = *src;
        *src = tmp;
        continue;
      }
      rc = mw_column_append_range(dst, src, f, 0, in->n_rows);
      continue;
    }
    if (first && f->type == MW_T_BOOL && !f->nullable) { /* _tombstone: all false */
      assert(dst->length == 0);
      if (in->n_rows > 0 && mw_buf_extend(&dst->values, (size_t)(in->n_rows + 7) / 8) == NULL)
        return -ENOMEM;
      dst->length = in->n_rows;
      continue;
    }
    for (int64_t r = 0; r < in->n_rows && rc == 0; r++)
      rc = f->type == MW_T_BOOL && !f->nullable ? mw_column_append_bool(dst, false)
                                                : mw_column_append_null(dst, f);
  }
  if (rc == 0) out->n_rows += in->n_rows;
  return rc;
}

/* Pass 3, after the appends: the first utf8 or large_utf8 value, at any
 * depth (list items, struct children), that is not UTF-8. */
static int check_utf8(const mw_batch_t *b, mw_lp_code_t *code, mw_err_t *err) {
  for (size_t i = 0; i < b->schema->n_fields; i++) {
    const mw_field_t *f = &b->schema->fields[i];
    char path[MW_FIELD_TEXT_BYTES / 2];
    int64_t r;
    if (!mw_column_utf8_find(&b->cols[i], f, f->name, &r, path, sizeof path)) continue;
    if (strcmp(path, f->name) == 0)
      return REFUSE(MW_LP_E_TYPE, -EBADMSG, "ARROW frame: column \"%s\" row %" PRId64
                    ": invalid UTF-8", f->name, r);
    return REFUSE(MW_LP_E_TYPE, -EBADMSG, "ARROW frame: column \"%s\" row %" PRId64
                  ": invalid UTF-8 in %s", f->name, r, path);
  }
  return 0;
}

/* After every check passed: the frame's record batches re-framed for the
 * table's WAL stream (bodies as they are) into out->wal_ipc, when the frame
 * allows it; else out->wal_ipc stays empty and the WAL encodes the rows. */
static void pass_through(const uint8_t *p, size_t n, const mw_schema_t *table,
                         const mw_ipc_stream_t *st, const int *map, mw_batch_t *out) {
  mw_buf_reset(&out->wal_ipc);
  out->wal_ipc_head = 0;
  /* one allocation: the room, the messages (about the frame's size) and
   * the WAL's EOS */
  if (mw_buf_reserve(&out->wal_ipc, MW_ARROWFRAME_WAL_HEAD_BYTES + n + 64) < 0) return;
  mw_buf_fill(&out->wal_ipc, 0, MW_ARROWFRAME_WAL_HEAD_BYTES);
  if (mw_ipc_rebatch(p, n, st, table, map, &out->wal_ipc, NULL) < 0 ||
      out->wal_ipc.len == MW_ARROWFRAME_WAL_HEAD_BYTES) {
    mw_buf_reset(&out->wal_ipc);
    return;
  }
  out->wal_ipc_head = MW_ARROWFRAME_WAL_HEAD_BYTES;
  assert(out->wal_ipc.len % 8 == 0);
}

int mw_arrowframe_decode(const uint8_t *p, size_t n, const mw_schema_t *table,
                         const mw_arrowframe_opts_t *opts, mw_batch_t *out, mw_lp_code_t *code,
                         mw_err_t *err) {
  assert(p || n == 0);
  assert(table);
  assert(out);
  assert(code);
  assert(out->schema == table);
  assert(out->n_rows == 0);
  *code = MW_LP_OK;
  mw_ipc_limits_t dl;
  mw_ipc_limits_default(&dl);
  const mw_ipc_limits_t *lim = opts && opts->lim ? opts->lim : &dl;
  mw_ipc_reader_t *rd = opts ? opts->reader : NULL;
  mw_ipc_stream_t one, *st = rd ? &rd->stream : &one;
  mw_err_t derr = {0};
  int rc = rd ? mw_ipc_reader_decode(rd, p, n, lim, &derr) : mw_ipc_decode(p, n, lim, &one, &derr);
  if (rc < 0) /* the stream is empty */
    return REFUSE(MW_LP_E_PARSE, rc, "ARROW frame: %.280s", derr.msg[0] ? derr.msg : mw_strerror(rc));
  int map[MW_MAX_FIELDS];
  rc = match(table, &st->schema, opts && opts->ignore_unknown_fields, map, code, err);
  if (rc == 0) rc = check_nulls(table, st, map, code, err);
  for (size_t k = 0; k < st->n_batches && rc == 0; k++) {
    if ((rc = append_batch(table, &st->batches[k], map, out)) < 0)
      REFUSE(MW_LP_E_INTERNAL, rc, "ARROW frame: %s", mw_strerror(rc));
  }
  if (rc == 0 && out->n_rows == 0) rc = REFUSE(MW_LP_E_SCHEMA, -EBADMSG, "ARROW frame: no rows");
  if (rc == 0 && (out->n_rows > UINT32_MAX || mw_batch_validate(out) < 0))
    rc = REFUSE(MW_LP_E_TYPE, -EBADMSG, "ARROW frame: invalid values (the rows do not validate)");
  if (rc == 0) rc = check_utf8(out, code, err);
  if (rc == 0 && !(opts && opts->no_pass_through)) pass_through(p, n, table, st, map, out);
  if (!rd) mw_ipc_stream_free(&one);
  if (rc < 0) mw_batch_reset(out);
  assert((rc < 0) == (*code != MW_LP_OK)); /* an error has its code, a success none */
  assert((rc < 0) == (out->n_rows == 0));  /* rows only on success */
  return rc;
}
