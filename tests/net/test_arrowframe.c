/*
 * test_arrowframe.c — the ARROW frame reader (src/net/arrowframe.c).
 *
 * The table is the reference vectors' (id int64 not null, name utf8,
 * v float64, vec fixed_size_list<float32, 8>, _tombstone bool not null).
 * Golden: a WAL entry Lance wrote decodes to its 100 rows, column for column
 * equal to the IPC decoder's. Frames of our own (mw_ipc_encode): a subset in
 * another order (absent columns null, _tombstone false), several batches, and
 * every refusal with its reply class and exact message: wrong type, wrong
 * vector dimension, missing not-null column, unknown column (accepted with
 * ignore_unknown_fields), duplicate column, nulls in a not-null column,
 * invalid UTF-8 (flat, large_utf8, list items, struct children, two levels
 * down; the fuzz_arrowframe crash of 2026-12-01 was a large_utf8 column that
 * was never checked), no rows, a fence sentinel, every truncation of a real
 * entry.
 * After a refusal the batch holds no rows and takes the next frame.
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cases.h"

#include "lance/ipc.h"
#include "lance/schema_text.h"
#include "net/arrowframe.h"
#include "testutil.h"

/* ---------------------------------------------------------------- helpers */

static void add(mw_schema_t *s, const char *name, mw_type_t t, bool nullable, int32_t dim) {
  int i = mw_schema_add(s, name, t, nullable);
  assert_true(i >= 0);
  if (t == MW_T_FSL) s->fields[i].fsl_dim = dim;
}

static void table_schema(mw_schema_t *s) {
  mw_schema_init(s);
  add(s, "id", MW_T_INT64, false, 0);
  add(s, "name", MW_T_UTF8, true, 0);
  add(s, "v", MW_T_FLOAT64, true, 0);
  add(s, "vec", MW_T_FSL, true, 8);
  add(s, "_tombstone", MW_T_BOOL, false, 0);
}

static uint8_t *read_wal(const char *vector, const char *name, size_t *len) {
  char *path = tu_strf("%s/%s/t.lance/_mem_wal/aa48498d-ac91-59e2-8452-69f46010ace2/wal/%s.arrow",
                       tu_vectors_dir(), vector, name);
  uint8_t *p = tu_read_file(path, len);
  if (p == NULL) fail_msg("cannot read %s", path);
  free(path);
  return p;
}
#define POS1 "1000000000000000000000000000000000000000000000000000000000000000"

/* A frame-building column: one of a few value patterns for `rows` rows. */
typedef struct col {
  const char *name;
  mw_type_t type;
  bool nullable;
  int32_t dim;
  int nulls_every;      /* 0 = none, k = every k-th row null */
  const char *bad_utf8; /* utf8: this value in row 1 */
} col_t;

/* Encode one stream of `n_batches` batches of `rows` rows each. */
static void frame(const col_t *cols, size_t n_cols, int64_t rows, size_t n_batches, mw_buf_t *out) {
  mw_schema_t s;
  mw_schema_init(&s);
  for (size_t i = 0; i < n_cols; i++) add(&s, cols[i].name, cols[i].type, cols[i].nullable, cols[i].dim);
  mw_batch_t b[4];
  const mw_batch_t *bs[4];
  assert_true(n_batches <= 4);
  for (size_t k = 0; k < n_batches; k++) {
    assert_int_equal(mw_batch_init(&b[k], &s), 0);
    for (int64_t r = 0; r < rows; r++) {
      int64_t v = (int64_t)k * 1000 + r;
      for (size_t i = 0; i < n_cols; i++) {
        const col_t *c = &cols[i];
        mw_column_t *col = &b[k].cols[i];
        if (c->nulls_every && r % c->nulls_every == 0) {
          assert_int_equal(mw_column_append_null(col, &s.fields[i]), 0);
          continue;
        }
        switch (c->type) {
        case MW_T_INT64: assert_int_equal(mw_column_append_fixed(col, &v, 8), 0); break;
        case MW_T_INT32: {
          int32_t x = (int32_t)v;
          assert_int_equal(mw_column_append_fixed(col, &x, 4), 0);
          break;
        }
        case MW_T_FLOAT64: {
          double x = (double)v / 4;
          assert_int_equal(mw_column_append_fixed(col, &x, 8), 0);
          break;
        }
        case MW_T_BOOL: assert_int_equal(mw_column_append_bool(col, r % 2), 0); break;
        case MW_T_UTF8: {
          char t[32];
          int n = snprintf(t, sizeof t, "n%" PRId64, v);
          if (c->bad_utf8 && r == 1)
            assert_int_equal(mw_column_append_bytes(col, c->bad_utf8, strlen(c->bad_utf8)), 0);
          else
            assert_int_equal(mw_column_append_bytes(col, t, (size_t)n), 0);
          break;
        }
        case MW_T_FSL: {
          float x[16];
          for (int j = 0; j < c->dim; j++) x[j] = (float)(v + j);
          assert_int_equal(mw_column_append_fixed(col, x, 4 * (size_t)c->dim), 0);
          break;
        }
        default: fail_msg("type %d not used here", c->type);
        }
      }
    }
    b[k].n_rows = rows;
    bs[k] = &b[k];
  }
  mw_err_t err = {0};
  mw_buf_reset(out);
  assert_int_equal(mw_ipc_encode(&s, bs, n_batches, NULL, out, &err), 0);
  for (size_t k = 0; k < n_batches; k++) mw_batch_free(&b[k]);
  mw_schema_free(&s);
}

typedef struct fixture {
  mw_schema_t table;
  mw_batch_t out;
  mw_buf_t frame;
  mw_lp_code_t code;
  mw_err_t err;
} fixture_t;

static int setup(void **state) {
  fixture_t *f = calloc(1, sizeof *f);
  if (!f) return -1;
  table_schema(&f->table);
  if (mw_batch_init(&f->out, &f->table) < 0) return -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture_t *f = *state;
  mw_batch_free(&f->out);
  mw_schema_free(&f->table);
  mw_buf_free(&f->frame);
  free(f);
  return 0;
}

static int decode(fixture_t *f, const uint8_t *p, size_t n, bool ignore_unknown) {
  mw_arrowframe_opts_t o = {.ignore_unknown_fields = ignore_unknown};
  memset(&f->err, 0, sizeof f->err);
  f->code = MW_LP_E_INTERNAL;
  int rc = mw_arrowframe_decode(p, n, &f->table, &o, &f->out, &f->code, &f->err);
  if (rc < 0) {
    assert_int_equal(f->out.n_rows, 0);
    for (size_t i = 0; i < f->table.n_fields; i++) assert_int_equal(f->out.cols[i].length, 0);
  }
  return rc;
}

/* Decode f->frame, expect a refusal with this class and message. */
static void refused(fixture_t *f, mw_lp_code_t code, const char *msg) {
  int rc = decode(f, f->frame.data, f->frame.len, false);
  assert_int_equal(rc, -EBADMSG);
  assert_int_equal(f->err.code, -EBADMSG);
  assert_string_equal(mw_lp_code_name(f->code), mw_lp_code_name(code));
  assert_string_equal(f->err.msg, msg);
}

static int64_t i64_at(const mw_column_t *c, int64_t r) {
  int64_t v;
  memcpy(&v, c->values.data + 8 * r, 8);
  return v;
}

static double f64_at(const mw_column_t *c, int64_t r) {
  double v;
  memcpy(&v, c->values.data + 8 * r, 8);
  return v;
}

/* ------------------------------------------------------------------ tests */

/* Lance's own WAL entry: 100 rows, each column as the IPC decoder sees it. */
static void test_good_frame_golden(void **state) {
  fixture_t *f = *state;
  size_t len;
  uint8_t *p = read_wal("unsharded-small", POS1, &len);
  assert_int_equal(decode(f, p, len, false), 0);
  assert_int_equal(f->code, MW_LP_OK);
  assert_int_equal(f->out.n_rows, 100);
  assert_int_equal(mw_batch_validate(&f->out), 0);
  mw_ipc_stream_t st;
  assert_int_equal(mw_ipc_decode(p, len, NULL, &st, NULL), 0);
  assert_int_equal(st.n_batches, 1);
  for (size_t i = 0; i < f->table.n_fields; i++) {
    int j = mw_schema_find(&st.schema, f->table.fields[i].name);
    assert_true(j >= 0);
    const mw_column_t *a = &f->out.cols[i], *b = &st.batches[0].cols[j];
    assert_int_equal(a->length, 100);
    assert_int_equal(a->null_count, b->null_count);
    assert_int_equal(a->values.len, b->values.len);
    assert_memory_equal(a->values.data, b->values.data, a->values.len);
    for (int64_t r = 0; r < 100; r++) assert_int_equal(mw_column_valid(a, r), mw_column_valid(b, r));
  }
  mw_ipc_stream_free(&st);
  /* the same batch takes the next frame once reset */
  mw_batch_reset(&f->out);
  assert_int_equal(decode(f, p, len, false), 0);
  assert_int_equal(f->out.n_rows, 100);
  free(p);
}

/* The first record batch's columns move into the output (no copy): a
 * reused decoder keeps working after giving them away, and the output owns
 * what it got (ASan: no double free once both are freed). */
static void test_moved_columns_reader(void **state) {
  fixture_t *f = *state;
  size_t len;
  uint8_t *p = read_wal("unsharded-small", POS1, &len);
  mw_ipc_reader_t rd;
  mw_ipc_reader_init(&rd);
  mw_arrowframe_opts_t o = {.reader = &rd};
  mw_batch_t first;
  assert_int_equal(mw_batch_init(&first, &f->table), 0);
  assert_int_equal(mw_arrowframe_decode(p, len, &f->table, &o, &first, &f->code, &f->err), 0);
  for (int round = 0; round < 2; round++) {
    mw_batch_reset(&f->out);
    assert_int_equal(mw_arrowframe_decode(p, len, &f->table, &o, &f->out, &f->code, &f->err), 0);
    assert_int_equal(f->out.n_rows, 100);
    for (size_t i = 0; i < f->table.n_fields; i++) {
      const mw_column_t *a = &f->out.cols[i], *b = &first.cols[i];
      assert_int_equal(a->length, b->length);
      assert_int_equal(a->values.len, b->values.len);
      assert_true(a->values.len == 0 || a->values.data != b->values.data);
      assert_memory_equal(a->values.data, b->values.data, a->values.len);
    }
  }
  mw_batch_free(&first);
  mw_ipc_reader_free(&rd);
  free(p);
}

/* ------------------------------------------------------- pass-through */

/* The WAL entry built from f->out (its wal_ipc when it has one, else its
 * columns) decodes to exactly f->out's rows: both sides encoded from the
 * model (each copied row by row) give the same bytes. Returns the entry (caller frees). */
static mw_buf_t wal_roundtrip(fixture_t *f) {
  mw_schema_t ws;
  mw_schema_init(&ws);
  assert_int_equal(mw_schema_copy(&ws, &f->table), 0);
  assert_int_equal(mw_kvs_set(&ws.meta, MW_IPC_WRITER_EPOCH_KEY, "7", 1), 0);
  const mw_buf_t *ipc = &f->out.wal_ipc;
  size_t head = f->out.wal_ipc_head;
  assert_true(ipc->len == 0 || (head == MW_ARROWFRAME_WAL_HEAD_BYTES && ipc->len > head));
  mw_ipc_part_t part = {&f->out, ipc->len ? ipc->data + head : NULL, ipc->len - (ipc->len ? head : 0)};
  mw_ipc_writer_t w;
  mw_ipc_writer_init(&w);
  mw_buf_t entry = MW_BUF_INIT, a = MW_BUF_INIT, b = MW_BUF_INIT;
  mw_err_t err = {0};
  assert_int_equal(mw_ipc_writer_encode_parts(&w, &ws, &part, 1, NULL, &entry, &err), 0);
  mw_ipc_stream_t st;
  assert_int_equal(mw_ipc_decode(entry.data, entry.len, NULL, &st, &err), 0);
  uint64_t epoch = 0;
  assert_int_equal(mw_ipc_writer_epoch(&st.schema, &epoch, &err), 0);
  assert_int_equal(epoch, 7);
  assert_int_equal(st.schema.n_fields, f->table.n_fields);
  mw_batch_t cat;
  assert_int_equal(mw_batch_init(&cat, &f->table), 0);
  for (size_t k = 0; k < st.n_batches; k++) {
    assert_true(st.batches[k].n_rows > 0); /* empty record batches are left out */
    for (size_t i = 0; i < f->table.n_fields; i++)
      assert_int_equal(mw_column_append_range(&cat.cols[i], &st.batches[k].cols[i], &f->table.fields[i], 0,
                                              st.batches[k].n_rows), 0);
    cat.n_rows += st.batches[k].n_rows;
  }
  assert_int_equal(cat.n_rows, f->out.n_rows);
  assert_int_equal(mw_batch_validate(&cat), 0);
  /* both copied row by row (bits past a bitmap's length are not data) */
  mw_batch_t mine;
  assert_int_equal(mw_batch_init(&mine, &f->table), 0);
  for (size_t i = 0; i < f->table.n_fields; i++)
    assert_int_equal(mw_column_append_range(&mine.cols[i], &f->out.cols[i], &f->table.fields[i], 0,
                                            f->out.n_rows), 0);
  mine.n_rows = f->out.n_rows;
  const mw_batch_t *pa = &cat, *pb = &mine;
  assert_int_equal(mw_ipc_encode(&ws, &pa, 1, NULL, &a, &err), 0);
  assert_int_equal(mw_ipc_encode(&ws, &pb, 1, NULL, &b, &err), 0);
  assert_int_equal(a.len, b.len);
  assert_memory_equal(a.data, b.data, a.len);
  mw_batch_free(&cat);
  mw_batch_free(&mine);
  mw_ipc_stream_free(&st);
  mw_buf_free(&a);
  mw_buf_free(&b);
  mw_ipc_writer_free(&w);
  mw_schema_free(&ws);
  return entry;
}

/* The body of the only record batch of a frame (its bytes after the
 * batch's metadata, up to the EOS marker). */
static const uint8_t *only_body(const mw_buf_t *frame, size_t *n) {
  size_t at = 8 + mw_load_u32le(frame->data + 4); /* past the schema message */
  at += 8 + mw_load_u32le(frame->data + at + 4);  /* past the batch's metadata */
  *n = frame->len - 8 - at;
  return frame->data + at;
}

/* A frame of the table's columns in the table's order, without
 * _tombstone, one batch: its body goes into the WAL entry as it is (a
 * false bitmap appended), and the entry holds the frame's rows. */
static void test_pass_through_same_order(void **state) {
  fixture_t *f = *state;
  const col_t cols[] = {{"id", MW_T_INT64, false, 0, 0, NULL}, {"name", MW_T_UTF8, true, 0, 3, NULL},
                        {"v", MW_T_FLOAT64, true, 0, 0, NULL}, {"vec", MW_T_FSL, true, 8, 4, NULL}};
  frame(cols, 4, 37, 1, &f->frame);
  assert_int_equal(decode(f, f->frame.data, f->frame.len, false), 0);
  assert_true(f->out.wal_ipc.len > 0);
  mw_buf_t entry = wal_roundtrip(f);
  size_t bn;
  const uint8_t *body = only_body(&f->frame, &bn);
  assert_non_null(memmem(entry.data, entry.len, body, bn));
  for (int64_t r = 0; r < 37; r++) assert_false(mw_bit_get(f->out.cols[4].values.data, r));
  mw_buf_free(&entry);
}

/* Every column, _tombstone included, in another order, two batches: the
 * messages are re-framed in the table's order over the same bodies. */
static void test_pass_through_reordered(void **state) {
  fixture_t *f = *state;
  const col_t cols[] = {{"vec", MW_T_FSL, true, 8, 0, NULL}, {"_tombstone", MW_T_BOOL, false, 0, 0, NULL},
                        {"id", MW_T_INT64, false, 0, 0, NULL}, {"v", MW_T_FLOAT64, true, 0, 5, NULL},
                        {"name", MW_T_UTF8, true, 0, 0, NULL}};
  frame(cols, 5, 20, 2, &f->frame);
  assert_int_equal(decode(f, f->frame.data, f->frame.len, false), 0);
  assert_int_equal(f->out.n_rows, 40);
  assert_true(f->out.wal_ipc.len > 0);
  mw_buf_t entry = wal_roundtrip(f);
  mw_buf_free(&entry);
  for (int64_t r = 0; r < 40; r++) assert_int_equal(mw_bit_get(f->out.cols[4].values.data, r), (r % 20) % 2);
}

/* Lance's own WAL entry is a frame that goes through as it is. */
static void test_pass_through_golden(void **state) {
  fixture_t *f = *state;
  size_t len;
  uint8_t *p = read_wal("unsharded-small", POS1, &len);
  assert_int_equal(decode(f, p, len, false), 0);
  assert_true(f->out.wal_ipc.len > 0);
  mw_buf_t entry = wal_roundtrip(f);
  mw_buf_free(&entry);
  free(p);
}

/* Frames that cannot go as they are: the rows are still right, encoded
 * from the decoded columns (wal_ipc empty). */
static void test_no_pass_through(void **state) {
  fixture_t *f = *state;
  /* a nullable column absent (name, vec): only _tombstone may be added */
  const col_t sub[] = {{"v", MW_T_FLOAT64, true, 0, 3, NULL}, {"id", MW_T_INT64, false, 0, 0, NULL}};
  frame(sub, 2, 5, 2, &f->frame);
  assert_int_equal(decode(f, f->frame.data, f->frame.len, false), 0);
  assert_int_equal(f->out.wal_ipc.len, 0);
  mw_buf_t entry = wal_roundtrip(f);
  mw_buf_free(&entry);
  /* a column the table lacks (ignore_unknown_fields) */
  const col_t extra[] = {{"id", MW_T_INT64, false, 0, 0, NULL}, {"name", MW_T_UTF8, true, 0, 0, NULL},
                         {"v", MW_T_FLOAT64, true, 0, 0, NULL}, {"vec", MW_T_FSL, true, 8, 0, NULL},
                         {"zz", MW_T_INT64, true, 0, 0, NULL}};
  frame(extra, 5, 9, 1, &f->frame);
  mw_batch_reset(&f->out);
  assert_int_equal(decode(f, f->frame.data, f->frame.len, true), 0);
  assert_int_equal(f->out.wal_ipc.len, 0);
  entry = wal_roundtrip(f);
  mw_buf_free(&entry);
  /* asked not to */
  frame(extra, 4, 9, 1, &f->frame);
  mw_batch_reset(&f->out);
  mw_arrowframe_opts_t o = {.no_pass_through = true};
  assert_int_equal(mw_arrowframe_decode(f->frame.data, f->frame.len, &f->table, &o, &f->out, &f->code, &f->err), 0);
  assert_int_equal(f->out.wal_ipc.len, 0);
  /* zstd body compression */
  mw_batch_reset(&f->out);
  assert_int_equal(decode(f, f->frame.data, f->frame.len, false), 0);
  assert_true(f->out.wal_ipc.len > 0);
  const mw_batch_t *pb = &f->out;
  mw_buf_t z = MW_BUF_INIT;
  mw_ipc_opts_t zo = {.zstd = true};
  assert_int_equal(mw_ipc_encode(&f->table, &pb, 1, &zo, &z, &f->err), 0);
  mw_batch_reset(&f->out);
  assert_int_equal(decode(f, z.data, z.len, false), 0);
  assert_int_equal(f->out.n_rows, 9);
  assert_int_equal(f->out.wal_ipc.len, 0);
  entry = wal_roundtrip(f);
  mw_buf_free(&entry);
  mw_buf_free(&z);
}

/* mw_ipc_rebatch itself on apache-arrow's frames: dictionary-encoded
 * columns and a short fixed_size_list child are refused (-ENOTSUP, out
 * unchanged); a plain frame of the same library goes through. */
static void rebatch_file(const char *rel, int want) {
  const char *root = getenv("MW_SOURCE_ROOT");
  assert_non_null(root);
  char *path = tu_strf("%s/%s", root, rel);
  size_t len;
  uint8_t *p = tu_read_file(path, &len);
  if (p == NULL) fail_msg("cannot read %s", path);
  mw_ipc_stream_t st;
  mw_err_t err = {0};
  assert_int_equal(mw_ipc_decode(p, len, NULL, &st, &err), 0);
  int map[MW_MAX_FIELDS];
  for (size_t i = 0; i < st.schema.n_fields; i++) map[i] = (int)i;
  mw_buf_t out = MW_BUF_INIT;
  assert_int_equal(mw_buf_append(&out, "12345678", 8), 0);
  int rc = mw_ipc_rebatch(p, len, &st, &st.schema, map, &out, NULL);
  if (rc != want) fail_msg("%s: mw_ipc_rebatch %d, expected %d", rel, rc, want);
  if (want < 0) assert_int_equal(out.len, 8);
  else assert_true(out.len > 8);
  mw_buf_free(&out);
  mw_ipc_stream_free(&st);
  free(p);
  free(path);
}

static void test_rebatch_refusals(void **state) {
  (void)state;
  rebatch_file("fuzz/corpus/arrowframe/apache-arrow-dict_table.arrow", -ENOTSUP);
  rebatch_file("fuzz/corpus/arrowframe/apache-arrow-dict_stream.arrow", -ENOTSUP);
  rebatch_file("tests/lance/data/arrowjs/short_fsl.arrow", -ENOTSUP);
  rebatch_file("fuzz/corpus/arrowframe/all-types-zstd.arrow", -ENOTSUP);
  rebatch_file("fuzz/corpus/arrowframe/lancedb-types-nested.arrow", 0);
  rebatch_file("fuzz/corpus/arrowframe/all-types-2batches.arrow", 0);
}

/* {v, id} in that order: name and vec null, _tombstone false; two batches
 * appended in order. */
static void test_subset_schema(void **state) {
  fixture_t *f = *state;
  const col_t cols[] = {{"v", MW_T_FLOAT64, true, 0, 3, NULL}, {"id", MW_T_INT64, false, 0, 0, NULL}};
  frame(cols, 2, 5, 2, &f->frame);
  assert_int_equal(decode(f, f->frame.data, f->frame.len, false), 0);
  assert_int_equal(f->code, MW_LP_OK);
  assert_int_equal(f->out.n_rows, 10);
  assert_int_equal(mw_batch_validate(&f->out), 0);
  const mw_column_t *id = &f->out.cols[0], *name = &f->out.cols[1], *v = &f->out.cols[2],
                    *vec = &f->out.cols[3], *tomb = &f->out.cols[4];
  for (int64_t r = 0; r < 10; r++) {
    int64_t want = (r / 5) * 1000 + r % 5;
    assert_int_equal(i64_at(id, r), want);
    assert_false(mw_column_valid(name, r));
    assert_false(mw_column_valid(vec, r));
    assert_int_equal(mw_column_valid(v, r), (r % 5) % 3 != 0);
    if (mw_column_valid(v, r)) assert_true(f64_at(v, r) == (double)want / 4);
    assert_true(mw_column_valid(tomb, r));
    assert_false(mw_bit_get(tomb->values.data, r));
  }
  assert_int_equal(name->null_count, 10);
  assert_int_equal(tomb->null_count, 0);
}

static void test_wrong_type(void **state) {
  fixture_t *f = *state;
  const col_t cols[] = {{"id", MW_T_UTF8, false, 0, 0, NULL}};
  frame(cols, 1, 3, 1, &f->frame);
  refused(f, MW_LP_E_TYPE, "ARROW frame: column \"id\" is utf8, the table has int64");
  const col_t cols2[] = {{"id", MW_T_INT64, false, 0, 0, NULL}, {"vec", MW_T_FSL, true, 4, 0, NULL}};
  frame(cols2, 2, 3, 1, &f->frame);
  refused(f, MW_LP_E_TYPE,
          "ARROW frame: column \"vec\" is fixed_size_list<float32, 4>, the table has "
          "fixed_size_list<float32, 8>");
}

static void test_missing_not_null(void **state) {
  fixture_t *f = *state;
  const col_t cols[] = {{"name", MW_T_UTF8, true, 0, 0, NULL}};
  frame(cols, 1, 3, 1, &f->frame);
  refused(f, MW_LP_E_SCHEMA, "ARROW frame: column \"id\" (not null) is missing");
  /* a fence sentinel: no columns at all */
  mw_buf_reset(&f->frame);
  assert_int_equal(mw_ipc_fence_sentinel(3, &f->frame, NULL), 0);
  refused(f, MW_LP_E_SCHEMA, "ARROW frame: column \"id\" (not null) is missing");
}

static void test_unknown_column(void **state) {
  fixture_t *f = *state;
  const col_t cols[] = {{"id", MW_T_INT64, false, 0, 0, NULL}, {"extra", MW_T_INT32, true, 0, 0, NULL}};
  frame(cols, 2, 4, 1, &f->frame);
  refused(f, MW_LP_E_SCHEMA, "ARROW frame: unknown column \"extra\"");
  assert_int_equal(decode(f, f->frame.data, f->frame.len, true), 0); /* ignore_unknown_fields */
  assert_int_equal(f->out.n_rows, 4);
  assert_int_equal(i64_at(&f->out.cols[0], 3), 3);
}

static void test_duplicate_column(void **state) {
  fixture_t *f = *state;
  const col_t cols[] = {{"id", MW_T_INT64, false, 0, 0, NULL}, {"v", MW_T_FLOAT64, true, 0, 0, NULL},
                        {"v", MW_T_FLOAT64, true, 0, 0, NULL}};
  frame(cols, 3, 2, 1, &f->frame);
  refused(f, MW_LP_E_SCHEMA, "ARROW frame: duplicate column \"v\"");
}

static void test_bad_values(void **state) {
  fixture_t *f = *state;
  const col_t nulls[] = {{"id", MW_T_INT64, true, 0, 2, NULL}};
  frame(nulls, 1, 4, 1, &f->frame);
  refused(f, MW_LP_E_TYPE, "ARROW frame: column \"id\" has 2 nulls, the table's is not null");
  const col_t utf8[] = {{"id", MW_T_INT64, false, 0, 0, NULL}, {"name", MW_T_UTF8, true, 0, 0, "a\xc3("}};
  frame(utf8, 2, 3, 1, &f->frame);
  refused(f, MW_LP_E_TYPE, "ARROW frame: column \"name\" row 1: invalid UTF-8");
  const col_t none[] = {{"id", MW_T_INT64, false, 0, 0, NULL}};
  frame(none, 1, 0, 1, &f->frame);
  refused(f, MW_LP_E_SCHEMA, "ARROW frame: no rows");
  /* the batch is still usable */
  frame(none, 1, 2, 1, &f->frame);
  assert_int_equal(decode(f, f->frame.data, f->frame.len, false), 0);
  assert_int_equal(f->out.n_rows, 2);
}

/* Invalid UTF-8 anywhere a utf8 or large_utf8 value lives: the frame is
 * refused naming the top-level column, the row and where the value is. */
enum { BAD_NONE, BAD_LS, BAD_TAGS, BAD_ST_B, BAD_ST_W, BAD_NULL_ROW_SLOT };
static const char *const nested_table =
    "id:int64 not null, ls:large_string, tags:list<string>, "
    "st:struct<a: int32, b: string, inner: struct<w: large_list<large_string>>>";

static void put_str(mw_column_t *c, bool bad, const char *fmt, int64_t r) {
  char t[32];
  int n = snprintf(t, sizeof t, fmt, r);
  if (bad) assert_int_equal(mw_column_append_bytes(c, "x\xed\xa0\x80", 4), 0); /* a surrogate */
  else assert_int_equal(mw_column_append_bytes(c, t, (size_t)n), 0);
}

/* 3 rows: tags [t0a, t0b], [], [t2a, t2b]; st {r, b<r>, {w: [w<r>]}}, the
 * bad value (if any) in row 2, the last item for lists. BAD_NULL_ROW_SLOT:
 * row 1's `ls` is null but its bytes are invalid (a null hides them). */
static void nested_frame(const mw_schema_t *s, int bad, mw_buf_t *out) {
  mw_batch_t b;
  assert_int_equal(mw_batch_init(&b, s), 0);
  for (int64_t r = 0; r < 3; r++) {
    bool last = r == 2;
    assert_int_equal(mw_column_append_fixed(&b.cols[0], &r, 8), 0);
    if (bad == BAD_NULL_ROW_SLOT && r == 1) { /* bytes under a null: offsets span them */
      assert_int_equal(mw_column_append_null(&b.cols[1], &s->fields[1]), 0);
      assert_int_equal(mw_buf_append(&b.cols[1].values, "\xff\xfe", 2), 0);
      int32_t end = (int32_t)b.cols[1].values.len;
      memcpy(b.cols[1].offsets.data + 4 * 2, &end, 4);
    } else {
      put_str(&b.cols[1], bad == BAD_LS && last, "ls%" PRId64, r);
    }
    mw_column_t *tags = &b.cols[2];
    if (r != 1) {
      put_str(&tags->children[0], false, "t%" PRId64 "a", r);
      put_str(&tags->children[0], bad == BAD_TAGS && last, "t%" PRId64 "b", r);
    }
    assert_int_equal(mw_column_list_end(tags), 0);
    mw_column_t *st = &b.cols[3], *inner = &st->children[2], *w = &inner->children[0];
    int32_t a = (int32_t)r;
    assert_int_equal(mw_column_append_fixed(&st->children[0], &a, 4), 0);
    put_str(&st->children[1], bad == BAD_ST_B && last, "b%" PRId64, r);
    put_str(&w->children[0], bad == BAD_ST_W && last, "w%" PRId64, r);
    assert_int_equal(mw_column_list_end(w), 0);
    assert_int_equal(mw_column_struct_end(inner), 0);
    assert_int_equal(mw_column_struct_end(st), 0);
  }
  b.n_rows = 3;
  assert_int_equal(mw_batch_validate(&b), 0);
  const mw_batch_t *bs[1] = {&b};
  mw_err_t err = {0};
  mw_buf_reset(out);
  assert_int_equal(mw_ipc_encode(s, bs, 1, NULL, out, &err), 0);
  mw_batch_free(&b);
}

static void test_bad_utf8_nested(void **state) {
  fixture_t *f = *state;
  mw_batch_free(&f->out);
  mw_schema_free(&f->table);
  mw_err_t err = {0};
  assert_int_equal(mw_schema_text_parse(nested_table, &f->table, &err), 0);
  assert_int_equal(mw_batch_init(&f->out, &f->table), 0);
  static const struct {
    int bad;
    const char *msg;
  } cases[] = {
      {BAD_LS, "ARROW frame: column \"ls\" row 2: invalid UTF-8"},
      {BAD_TAGS, "ARROW frame: column \"tags\" row 2: invalid UTF-8 in tags[]"},
      {BAD_ST_B, "ARROW frame: column \"st\" row 2: invalid UTF-8 in st.b"},
      {BAD_ST_W, "ARROW frame: column \"st\" row 2: invalid UTF-8 in st.inner.w[]"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    nested_frame(&f->table, cases[i].bad, &f->frame);
    refused(f, MW_LP_E_TYPE, cases[i].msg);
  }
  /* the same rows without a bad value, and a null row's hidden bytes, pass */
  for (int bad = BAD_NONE; bad <= BAD_NULL_ROW_SLOT; bad += BAD_NULL_ROW_SLOT) {
    nested_frame(&f->table, bad, &f->frame);
    assert_int_equal(decode(f, f->frame.data, f->frame.len, false), 0);
    assert_int_equal(f->out.n_rows, 3);
    size_t n;
    const uint8_t *p = mw_column_bytes(&f->out.cols[3].children[2].children[0].children[0], 2, &n);
    assert_int_equal(n, 2);
    assert_memory_equal(p, "w2", 2);
    mw_batch_reset(&f->out);
  }
}

/* The seeds of tools/gen-badutf8-seeds.mjs (apache-arrow's bytes; the first
 * is what crashed fuzz_arrowframe in CI): each frame is refused, naming its
 * column, row and place. */
static void test_bad_utf8_seeds(void **state) {
  fixture_t *f = *state;
  mw_batch_free(&f->out);
  mw_schema_free(&f->table);
  mw_err_t err = {0};
  assert_int_equal(mw_schema_text_parse("id:int64 not null, u16:uint16, ls:large_string, "
                                        "ls_str:list<string>, l_st:list<struct<k: string, v: int64>>, "
                                        "name:string",
                                        &f->table, &err), 0);
  assert_int_equal(mw_batch_init(&f->out, &f->table), 0);
  static const struct {
    const char *file, *msg;
  } cases[] = {
      {"large", "ARROW frame: column \"ls\" row 2: invalid UTF-8"},
      {"list", "ARROW frame: column \"ls_str\" row 1: invalid UTF-8 in ls_str[]"},
      {"list-struct", "ARROW frame: column \"l_st\" row 1: invalid UTF-8 in l_st[].k"},
      {"dict", "ARROW frame: column \"name\" row 1: invalid UTF-8"}, /* a dictionary value */
  };
  const char *root = getenv("MW_SOURCE_ROOT");
  assert_non_null(root);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *path = tu_strf("%s/fuzz/corpus/arrowframe/own-bad-utf8-%s.arrow", root, cases[i].file);
    size_t len;
    uint8_t *p = tu_read_file(path, &len);
    if (p == NULL) fail_msg("cannot read %s", path);
    mw_buf_reset(&f->frame);
    assert_int_equal(mw_buf_append(&f->frame, p, len), 0);
    refused(f, MW_LP_E_TYPE, cases[i].msg);
    free(p);
    free(path);
  }
}

/* Every proper prefix of a real entry is refused as parse with the IPC
 * decoder's reason; one is checked word for word. */
static void test_truncated(void **state) {
  fixture_t *f = *state;
  size_t len;
  uint8_t *p = read_wal("unsharded-small", POS1, &len);
  for (size_t n = 0; n < len; n++) {
    assert_int_equal(decode(f, p, n, false) < 0, 1);
    assert_int_equal(f->code, MW_LP_E_PARSE);
    mw_ipc_stream_t st;
    mw_err_t derr = {0};
    int rc = mw_ipc_decode(p, n, NULL, &st, &derr);
    assert_true(rc < 0);
    assert_int_equal(f->err.code, rc);
    char want[MW_ERR_MSG_BYTES];
    snprintf(want, sizeof want, "ARROW frame: %.280s", derr.msg);
    assert_string_equal(f->err.msg, want);
  }
  assert_int_equal(decode(f, p, len - 8, false), -EBADMSG); /* the EOS marker cut off */
  assert_string_equal(f->err.msg, "ARROW frame: ipc: byte 7744: stream ends without the EOS marker");
  free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_good_frame_golden, setup, teardown),
      cmocka_unit_test_setup_teardown(test_moved_columns_reader, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pass_through_same_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pass_through_reordered, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pass_through_golden, setup, teardown),
      cmocka_unit_test_setup_teardown(test_no_pass_through, setup, teardown),
      cmocka_unit_test(test_rebatch_refusals),
      cmocka_unit_test_setup_teardown(test_subset_schema, setup, teardown),
      cmocka_unit_test_setup_teardown(test_wrong_type, setup, teardown),
      cmocka_unit_test_setup_teardown(test_missing_not_null, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unknown_column, setup, teardown),
      cmocka_unit_test_setup_teardown(test_duplicate_column, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_values, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_utf8_nested, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_utf8_seeds, setup, teardown),
      cmocka_unit_test_setup_teardown(test_truncated, setup, teardown),
  };
  return tu_run_group(tests, NULL, NULL);
}
