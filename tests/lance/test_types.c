/*
 * test_types.c — every column type memwald supports, against files LanceDB
 * 0.39.0 (Lance 12) wrote for tables of those types (tests/lance/data/types,
 * made by tools/gen-type-fixtures.mjs; "flat" = scalars, temporal, decimal,
 * large and fixed binaries, fixed_size_lists; "nested" = lists and structs
 * with nulls at every level):
 *
 *   - its WAL entries decode and re-encode byte for byte (arrow-rs layout),
 *     and every decoded value equals LanceDB's own read-back (K.rows.jsonl,
 *     compared as exact JSON, see tests/common/exact_json.h);
 *   - the schema of the base table's manifest, of the WAL entries and of
 *     memwald's config text for the same table agree field for field, and
 *     manifest -> our Lance fields -> manifest keeps every logical type;
 *   - the SSTable data file Lance wrote reads back exactly (flat kind), and
 *     our own data file of the same rows does too.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cases.h"

#include "exact_json.h"
#include "lance/dataset_manifest.h"
#include "lance/datafile.h"
#include "lance/ipc.h"
#include "lance/lance_schema.h"
#include "lance/schema_text.h"
#include "net/arrowframe.h"
#include "testutil.h"

#define MAX_ROWS 64

typedef struct expect {
  char *line[MAX_ROWS]; /* by id */
} expect_t;

static char *data_path(const char *kind, const char *suffix) {
  const char *root = getenv("MW_SOURCE_ROOT");
  return tu_strf("%s/tests/lance/data/types/%s.%s", root ? root : ".", kind, suffix);
}

static uint8_t *read_data(const char *kind, const char *suffix, size_t *n) {
  char *p = data_path(kind, suffix);
  uint8_t *d = tu_read_file(p, n);
  if (d == NULL) fail_msg("cannot read %s", p);
  free(p);
  return d;
}

/* K.rows.jsonl: one exact line per id (ids are 0..MAX_ROWS-1). */
static void load_expect(const char *kind, expect_t *e) {
  size_t n;
  char *text = (char *)read_data(kind, "rows.jsonl", &n);
  memset(e, 0, sizeof *e);
  for (char *l = strtok(text, "\n"); l; l = strtok(NULL, "\n")) {
    int id;
    if (sscanf(l, "{\"id\":\"%d\"", &id) != 1 || id < 0 || id >= MAX_ROWS) fail_msg("bad line %s", l);
    e->line[id] = strdup(l);
  }
  free(text);
}

static void free_expect(expect_t *e) {
  for (int i = 0; i < MAX_ROWS; i++) free(e->line[i]);
}

/* Every row of b (fields without _tombstone) equals LanceDB's line for its id. */
static int64_t check_rows(const mw_batch_t *b, const expect_t *e, const char *what) {
  size_t nf = b->schema->n_fields;
  if (nf && strcmp(b->schema->fields[nf - 1].name, "_tombstone") == 0) nf--;
  assert_string_equal(b->schema->fields[0].name, "id");
  mw_buf_t got = MW_BUF_INIT;
  for (int64_t r = 0; r < b->n_rows; r++) {
    int64_t id;
    memcpy(&id, b->cols[0].values.data + 8 * r, 8);
    assert_true(id >= 0 && id < MAX_ROWS && e->line[id] != NULL);
    mw_buf_reset(&got);
    assert_int_equal(tu_exact_row(b, nf, r, &got), 0);
    if (got.len != strlen(e->line[id]) || memcmp(got.data, e->line[id], got.len) != 0)
      fail_msg("%s row %lld (id %lld):\n  got  %.*s\n  want %s", what, (long long)r, (long long)id,
               (int)got.len, (const char *)got.data, e->line[id]);
  }
  mw_buf_free(&got);
  return b->n_rows;
}

static void check_wal(const char *kind) {
  expect_t e;
  load_expect(kind, &e);
  for (int w = 1; w <= 2; w++) {
    char suffix[32];
    snprintf(suffix, sizeof suffix, "wal.%d.arrow", w);
    size_t n;
    uint8_t *d = read_data(kind, suffix, &n);
    mw_ipc_stream_t s;
    mw_err_t err = {0};
    if (mw_ipc_decode(d, n, NULL, &s, &err) != 0) fail_msg("%s %s: %s", kind, suffix, err.msg);
    assert_int_equal(s.n_batches, 1);
    const mw_batch_t *bp = &s.batches[0];
    assert_int_equal(mw_batch_validate(bp), 0);
    assert_int_equal(check_rows(bp, &e, suffix), 12);
    mw_buf_t out = MW_BUF_INIT;
    assert_int_equal(mw_ipc_encode(&s.schema, &bp, 1, NULL, &out, &err), 0);
    if (out.len != n || memcmp(out.data, d, n) != 0) {
      size_t i = 0;
      while (i < n && i < out.len && out.data[i] == d[i]) i++;
      fail_msg("%s %s: re-encoding differs at byte %zu (%zu vs %zu bytes)", kind, suffix, i, out.len, n);
    }
    /* and with zstd, decode -> same values */
    mw_ipc_opts_t z = {.zstd = true};
    mw_buf_reset(&out);
    assert_int_equal(mw_ipc_encode(&s.schema, &bp, 1, &z, &out, &err), 0);
    mw_ipc_stream_t s2;
    assert_int_equal(mw_ipc_decode(out.data, out.len, NULL, &s2, &err), 0);
    assert_true(mw_schema_equal(&s.schema, &s2.schema));
    check_rows(&s2.batches[0], &e, "zstd");
    mw_ipc_stream_free(&s2);
    mw_buf_free(&out);
    mw_ipc_stream_free(&s);
    free(d);
  }
  free_expect(&e);
}

static void test_wal_flat(void **state) {
  (void)state;
  check_wal("flat");
}

static void test_wal_nested(void **state) {
  (void)state;
  check_wal("nested");
}

/* The same table seen three ways: LanceDB's manifest, its WAL entry and our
 * config text. */
static void check_schemas(const char *kind) {
  size_t n;
  mw_err_t err = {0};
  char *text = (char *)read_data(kind, "schema.txt", &n);
  text[strcspn(text, "\n")] = 0;
  mw_schema_t cfg;
  if (mw_schema_text_parse(text, &cfg, &err) != 0) fail_msg("%s: %s", kind, err.msg);
  uint8_t *m = read_data(kind, "manifest", &n);
  mw_table_meta_t meta;
  if (mw_table_meta_read(m, n, &meta, &err) != 0) fail_msg("%s manifest: %s", kind, err.msg);
  uint8_t *w = read_data(kind, "wal.1.arrow", &n);
  mw_ipc_stream_t s;
  assert_int_equal(mw_ipc_decode(w, n, NULL, &s, &err), 0);
  assert_int_equal(meta.schema.n_fields, cfg.n_fields);
  assert_int_equal(s.schema.n_fields, cfg.n_fields + 1); /* + _tombstone */
  char a[MW_FIELD_TEXT_BYTES], b[MW_FIELD_TEXT_BYTES];
  for (size_t i = 0; i < cfg.n_fields; i++) {
    const mw_field_t *x = &cfg.fields[i], *y = &meta.schema.fields[i], *z = &s.schema.fields[i];
    assert_string_equal(x->name, y->name);
    assert_string_equal(x->name, z->name);
    if (!mw_field_type_equal(x, y) || !mw_field_type_equal(x, z))
      fail_msg("%s field %s: config %s, manifest %s, WAL %s", kind, x->name,
               mw_field_type_text(x, a, sizeof a), mw_field_type_text(y, b, sizeof b),
               mw_field_type_text(z, b, sizeof b));
    assert_int_equal(x->nullable || i == 0, y->nullable || i == 0);
  }
  assert_int_equal(meta.schema.fields[0].pk_position, 1);
  /* manifest fields -> schema -> fields: every logical type and id survives */
  Lance__File__Field **lf = NULL;
  size_t nlf = 0;
  assert_int_equal(mw_lance_fields_from_schema(&meta.schema, &lf, &nlf), 0);
  const Lance__Table__Manifest *pb = meta.manifest.pb;
  assert_int_equal(nlf, pb->n_fields);
  for (size_t i = 0; i < nlf; i++) {
    assert_string_equal(lf[i]->name, pb->fields[i]->name);
    assert_string_equal(lf[i]->logical_type, pb->fields[i]->logical_type);
    assert_int_equal(lf[i]->id, pb->fields[i]->id);
    assert_int_equal(lf[i]->parent_id, pb->fields[i]->parent_id);
    assert_int_equal(lf[i]->nullable, pb->fields[i]->nullable);
    assert_int_equal(lf[i]->encoding, pb->fields[i]->encoding);
  }
  /* leaves = Lance columns */
  int leaves = mw_lance_leaves(&meta.schema, NULL, NULL, 4 * MW_MAX_FIELDS);
  size_t parents = 0;
  for (size_t i = 0; i < pb->n_fields; i++)
    parents += strcmp(pb->fields[i]->logical_type, "struct") == 0 ||
               strncmp(pb->fields[i]->logical_type, "list", 4) == 0;
  assert_int_equal((size_t)leaves, pb->n_fields - parents);
  mw_lance_fields_free(lf, nlf);
  mw_ipc_stream_free(&s);
  mw_table_meta_free(&meta);
  mw_schema_free(&cfg);
  free(text);
  free(m);
  free(w);
}

static void test_schemas(void **state) {
  (void)state;
  check_schemas("flat");
  check_schemas("nested");
}

/* Lance's own SSTable data file, then ours of the same rows. */
static void test_sstable_flat(void **state) {
  (void)state;
  expect_t e;
  load_expect("flat", &e);
  size_t n;
  uint8_t *d = read_data("flat", "sst.lance", &n);
  mw_datafile_t f;
  mw_batch_t b;
  mw_err_t err = {0};
  if (mw_datafile_open(&f, d, n, NULL, &err) != 0) fail_msg("open: %s", err.msg);
  if (mw_datafile_read_batch(&f, &b, &err) != 0) fail_msg("read: %s", err.msg);
  assert_int_equal(check_rows(&b, &e, "Lance's SSTable"), 24);
  /* our writer, our reader */
  mw_buf_t out = MW_BUF_INIT;
  const mw_batch_t *bp = &b;
  mw_datafile_write_opts_t opts[] = {{0}, {.zstd = true}, {.max_page_bytes = 4096}};
  for (size_t o = 0; o < sizeof opts / sizeof *opts; o++) {
    mw_buf_reset(&out);
    if (mw_datafile_write(&f.schema, &bp, 1, NULL, 0, &opts[o], &out, &err) != 0) fail_msg("write: %s", err.msg);
    mw_datafile_t g;
    mw_batch_t c;
    assert_int_equal(mw_datafile_open(&g, out.data, out.len, NULL, &err), 0);
    if (mw_datafile_read_batch(&g, &c, &err) != 0) fail_msg("read ours: %s", err.msg);
    assert_true(mw_schema_equal(&g.schema, &f.schema));
    assert_int_equal(check_rows(&c, &e, "our data file"), 24);
    mw_batch_free(&c);
    mw_datafile_close(&g);
  }
  mw_buf_free(&out);
  mw_batch_free(&b);
  mw_datafile_close(&f);
  free(d);
  free_expect(&e);
}

/* Lance's SSTable of lists and structs, then ours of the same rows. */
static void test_sstable_nested(void **state) {
  (void)state;
  expect_t e;
  load_expect("nested", &e);
  size_t n;
  uint8_t *d = read_data("nested", "sst.lance", &n);
  mw_datafile_t f;
  mw_batch_t b;
  mw_err_t err = {0};
  if (mw_datafile_open(&f, d, n, NULL, &err) != 0) fail_msg("open: %s", err.msg);
  if (mw_datafile_read_batch(&f, &b, &err) != 0) fail_msg("read: %s", err.msg);
  assert_int_equal(check_rows(&b, &e, "Lance's nested SSTable"), 24);
  mw_buf_t out = MW_BUF_INIT;
  const mw_batch_t *bp = &b;
  mw_datafile_write_opts_t opts[] = {{0}, {.zstd = true}, {.max_page_bytes = 4096}};
  for (size_t o = 0; o < sizeof opts / sizeof *opts; o++) {
    mw_buf_reset(&out);
    if (mw_datafile_write(&f.schema, &bp, 1, NULL, 0, &opts[o], &out, &err) != 0) fail_msg("write: %s", err.msg);
    mw_datafile_t g;
    mw_batch_t c;
    assert_int_equal(mw_datafile_open(&g, out.data, out.len, NULL, &err), 0);
    assert_int_equal(g.n_columns, f.n_columns);
    if (mw_datafile_read_batch(&g, &c, &err) != 0) fail_msg("read ours: %s", err.msg);
    assert_true(mw_schema_equal(&g.schema, &f.schema));
    assert_int_equal(check_rows(&c, &e, "our nested data file"), 24);
    mw_batch_free(&c);
    mw_datafile_close(&g);
  }
  /* the rows in two batches: the writer concatenates the trees */
  mw_batch_t h[2];
  for (int k = 0; k < 2; k++) {
    assert_int_equal(mw_batch_init(&h[k], &f.schema), 0);
    int64_t a = k ? 10 : 0, m = k ? b.n_rows - 10 : 10;
    for (size_t c = 0; c < f.schema.n_fields; c++)
      assert_int_equal(mw_column_append_range(&h[k].cols[c], &b.cols[c], &f.schema.fields[c], a, m), 0);
    h[k].n_rows = m;
  }
  const mw_batch_t *hp[2] = {&h[0], &h[1]};
  mw_buf_reset(&out);
  if (mw_datafile_write(&f.schema, hp, 2, NULL, 0, NULL, &out, &err) != 0) fail_msg("write 2: %s", err.msg);
  mw_datafile_t g;
  mw_batch_t c;
  assert_int_equal(mw_datafile_open(&g, out.data, out.len, NULL, &err), 0);
  if (mw_datafile_read_batch(&g, &c, &err) != 0) fail_msg("read 2: %s", err.msg);
  assert_int_equal(check_rows(&c, &e, "our data file of two batches"), 24);
  mw_batch_free(&c);
  mw_datafile_close(&g);
  mw_batch_free(&h[0]);
  mw_batch_free(&h[1]);
  mw_buf_free(&out);
  mw_batch_free(&b);
  mw_datafile_close(&f);
  free(d);
  free_expect(&e);
}

/* LanceDB's WAL entries sent as ARROW frames into the table of its manifest:
 * every row arrives exactly; a column of another unit or zone is refused
 * naming both types. */
static void check_frames(const char *kind) {
  expect_t e;
  load_expect(kind, &e);
  size_t n, wn;
  mw_err_t err = {0};
  uint8_t *m = read_data(kind, "manifest", &n), *w = read_data(kind, "wal.1.arrow", &wn);
  mw_table_meta_t meta;
  assert_int_equal(mw_table_meta_read(m, n, &meta, &err), 0);
  mw_schema_t table;
  assert_int_equal(mw_schema_copy(&table, &meta.schema), 0);
  assert_true(mw_schema_tombstone_append(&table) > 0);
  mw_batch_t b;
  mw_lp_code_t code;
  assert_int_equal(mw_batch_init(&b, &table), 0);
  if (mw_arrowframe_decode(w, wn, &table, NULL, &b, &code, &err) != 0) fail_msg("%s: %s", kind, err.msg);
  assert_int_equal(check_rows(&b, &e, "frame"), 12);
  mw_batch_reset(&b);
  /* the table's first non-key column as another type: refused, both named */
  mw_field_t *f = &table.fields[1];
  mw_type_t was = f->type;
  f->type = f->type == MW_T_STRUCT ? MW_T_LIST : MW_T_STRUCT;
  mw_err_clear(&err);
  assert_int_equal(mw_arrowframe_decode(w, wn, &table, NULL, &b, &code, &err), -EBADMSG);
  assert_int_equal(code, MW_LP_E_TYPE);
  char *want = tu_strf("ARROW frame: column \"%s\" is ", f->name);
  assert_non_null(strstr(err.msg, want));
  free(want);
  f->type = was;
  mw_batch_free(&b);
  mw_schema_free(&table);
  mw_table_meta_free(&meta);
  free(m);
  free(w);
  free_expect(&e);
}

static void test_frames(void **state) {
  (void)state;
  check_frames("flat");
  check_frames("nested");
  /* a unit mismatch is named exactly */
  mw_schema_t t, g;
  mw_err_t err = {0};
  assert_int_equal(mw_schema_text_parse("id:int64 not null, ts:timestamp<us, UTC>", &t, &err), 0);
  assert_int_equal(mw_schema_text_parse("id:int64 not null, ts:timestamp<ms>", &g, &err), 0);
  mw_batch_t src;
  assert_int_equal(mw_batch_init(&src, &g), 0);
  int64_t v = 1;
  assert_int_equal(mw_column_append_fixed(&src.cols[0], &v, 8), 0);
  assert_int_equal(mw_column_append_fixed(&src.cols[1], &v, 8), 0);
  src.n_rows = 1;
  mw_buf_t frame = MW_BUF_INIT;
  const mw_batch_t *sp = &src;
  assert_int_equal(mw_ipc_encode(&g, &sp, 1, NULL, &frame, &err), 0);
  mw_batch_t b;
  mw_lp_code_t code;
  assert_int_equal(mw_batch_init(&b, &t), 0);
  assert_int_equal(mw_arrowframe_decode(frame.data, frame.len, &t, NULL, &b, &code, &err), -EBADMSG);
  assert_string_equal(err.msg, "ARROW frame: column \"ts\" is timestamp<ms>, the table has timestamp<us, UTC>");
  mw_batch_free(&b);
  mw_batch_free(&src);
  mw_buf_free(&frame);
  mw_schema_free(&t);
  mw_schema_free(&g);
}


/* Dictionary-encoded columns as apache-arrow writes them (tools/
 * gen-dict-fixtures.mjs): decoded to their value type, every index replaced
 * by its value, through initial, delta and replacement dictionary batches;
 * the same frames go into a table's batch as ARROW frames, and re-encode as
 * plain columns. An index past its dictionary is refused naming the field. */
static void check_dict(const char *kind, const char *table_text, int64_t rows) {
  expect_t e;
  load_expect(kind, &e);
  size_t n;
  uint8_t *d = read_data(kind, "arrow", &n);
  mw_err_t err = {0};
  mw_ipc_stream_t s;
  if (mw_ipc_decode(d, n, NULL, &s, &err) != 0) fail_msg("%s: %s", kind, err.msg);
  assert_int_equal(s.schema.fields[1].type, MW_T_UTF8);
  int64_t got = 0;
  for (size_t i = 0; i < s.n_batches; i++) got += check_rows(&s.batches[i], &e, kind);
  assert_int_equal(got, rows);
  /* re-encoded: plain columns, same rows */
  mw_buf_t again = MW_BUF_INIT;
  const mw_batch_t *bp[4];
  assert_true(s.n_batches <= 4);
  for (size_t i = 0; i < s.n_batches; i++) bp[i] = &s.batches[i];
  assert_int_equal(mw_ipc_encode(&s.schema, bp, s.n_batches, NULL, &again, &err), 0);
  mw_ipc_stream_t s2;
  assert_int_equal(mw_ipc_decode(again.data, again.len, NULL, &s2, &err), 0);
  got = 0;
  for (size_t i = 0; i < s2.n_batches; i++) got += check_rows(&s2.batches[i], &e, "re-encoded");
  assert_int_equal(got, rows);
  /* as an ARROW frame into a table */
  mw_schema_t table;
  assert_int_equal(mw_schema_text_parse(table_text, &table, &err), 0);
  assert_true(mw_schema_tombstone_append(&table) > 0);
  mw_batch_t b;
  mw_lp_code_t code;
  assert_int_equal(mw_batch_init(&b, &table), 0);
  if (mw_arrowframe_decode(d, n, &table, NULL, &b, &code, &err) != 0) fail_msg("%s frame: %s", kind, err.msg);
  assert_int_equal(check_rows(&b, &e, "dictionary frame"), rows);
  mw_batch_free(&b);
  mw_schema_free(&table);
  mw_ipc_stream_free(&s2);
  mw_ipc_stream_free(&s);
  mw_buf_free(&again);
  free(d);
  free_expect(&e);
}

static void test_dictionary_frames(void **state) {
  (void)state;
  check_dict("dict_table", "id:int64 not null, s:string, n:int32 not null", 5);
  check_dict("dict_stream", "id:int64 not null, s:string, b:binary", 10);
  size_t n;
  uint8_t *d = read_data("dict_bad", "arrow", &n);
  mw_err_t err = {0};
  mw_ipc_stream_t s;
  assert_int_equal(mw_ipc_decode(d, n, NULL, &s, &err), -EBADMSG);
  assert_non_null(strstr(err.msg, "s: dictionary index out of range"));
  /* a frame cut inside its dictionary batch is refused, not read */
  for (size_t cut = 8; cut < n; cut += 24) {
    mw_err_clear(&err);
    assert_true(mw_ipc_decode(d, cut, NULL, &s, &err) < 0);
  }
  free(d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_wal_flat),
      cmocka_unit_test(test_wal_nested),
      cmocka_unit_test(test_schemas),
      cmocka_unit_test(test_sstable_flat),
      cmocka_unit_test(test_sstable_nested),
      cmocka_unit_test(test_frames),
      cmocka_unit_test(test_dictionary_frames),
  };
  return tu_run_group(tests, NULL, NULL);
}
