/*
 * fuzz_arrowframe.c — libFuzzer target for the ARROW frame reader
 * (src/net/arrowframe.c: frame bytes -> rows of the table's batch).
 *
 * Every input is one frame, decoded against three tables:
 *   vectors  id int64 not null (pk), name utf8, v float64,
 *            vec fixed_size_list<float32, 8>, _tombstone bool not null —
 *            the reference vectors' WAL entries match it exactly
 *   subset   id int64 not null, v float64, note utf8 (absent from those
 *            entries), _tombstone bool not null; ignore_unknown_fields
 *   all      c0..c9: int32, int64 not null, uint32, uint64, float32, float64,
 *            bool, utf8, binary, fixed_size_list<float32, 2> — the schema of
 *            the all-types seeds (from fuzz/corpus/ipc)
 * The batches are reused across inputs (as a reset batch must be reusable),
 * and so is one IPC reader (opts.reader) for two of the tables.
 * Invariants:
 *   - failure: a reply code, a message starting "ARROW frame: ", a batch with
 *     no rows; a frame the IPC decoder refuses is always code parse;
 *   - success: rows > 0, mw_batch_validate passes, no nulls in not-null
 *     columns, every utf8 and large_utf8 value, nested ones included, is
 *     UTF-8 (an independent check), and the
 *     batch encodes (as the WAL writer would), decodes again through the
 *     frame reader to the same rows, and encodes to the same bytes; when
 *     the frame passes through (out->wal_ipc), the WAL entry made of its
 *     re-framed record batches decodes to the same rows (same bytes once
 *     encoded) and passes through again.
 * Seeds: fuzz/corpus/arrowframe/ (small WAL entries of the reference
 * vectors, the ipc all-types streams, and frames of our own: subsets,
 * reordered columns, a wrong type, an unknown column, invalid UTF-8).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lance/ipc.h"
#include "lance/schema_text.h"
#include "net/arrowframe.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

#define CHECK(c)                                                                    \
  do {                                                                              \
    if (!(c)) {                                                                     \
      fprintf(stderr, "fuzz_arrowframe: check failed: %s (line %d)\n", #c, __LINE__); \
      abort();                                                                      \
    }                                                                               \
  } while (0)

enum { T_VECTORS, T_SUBSET, T_ALL, T_FLAT, T_NESTED, N_TABLES };

/* The tables of tests/lance/data/types (LanceDB's WAL entries of them are
 * in the corpus): every non-nested type, and lists and structs. */
static const char *const flat_text =
    "id:int64 not null, i8:int8, i16:int16, u8:uint8, u16:uint16 not null, f16:float16, "
    "ts_s:timestamp<s>, ts_ms:timestamp<ms>, ts_us:timestamp<us>, ts_ns:timestamp<ns>, "
    "ts_utc:timestamp<us, UTC>, ts_tz:timestamp<ms, Asia/Kolkata>, d32:date32, d64:date64, "
    "t32:time32<ms>, t32s:time32<s>, t64:time64<us>, t64n:time64<ns>, dec:decimal128<10, 2>, "
    "dec38:decimal128<38, 6>, ls:large_string, lb:large_binary, fsb:fixed_size_binary<4>, "
    "fsb16:fixed_size_binary<16>, v16:fixed_size_list<float16, 4>, v64:fixed_size_list<float64, 3>, "
    "vi8:fixed_size_list<int8, 8>, vu8:fixed_size_list<uint8, 16>";
static const char *const nested_text =
    "id:int64 not null, li:list<int32>, ls_str:list<string>, l_ts:list<timestamp<ms>>, "
    "l_dec:list<decimal128<9, 1>>, l_fsl:list<fixed_size_list<float16, 2>>, st:struct<a: int32, "
    "b: string, inner: struct<x: double, when: timestamp<us, UTC>, tags: list<string>>>, "
    "l_st:list<struct<k: string, v: int64>>";

static mw_schema_t tables[N_TABLES];
static mw_ipc_limits_t lim; /* defaults, but zstd output <= 16 MiB */
static mw_batch_t outs[N_TABLES], again[N_TABLES];
static mw_ipc_writer_t writer; /* reused: the harness allocates little per input */
static mw_ipc_reader_t reader;
static mw_buf_t e1, e2, e3;

static void add(mw_schema_t *s, const char *name, mw_type_t t, bool nullable, int32_t dim) {
  int i = mw_schema_add(s, name, t, nullable);
  CHECK(i >= 0);
  if (t == MW_T_FSL) s->fields[i].fsl_dim = dim;
}

static void setup(void) {
  mw_schema_t *s = &tables[T_VECTORS];
  mw_schema_init(s);
  add(s, "id", MW_T_INT64, false, 0);
  s->fields[0].pk_position = 1;
  add(s, "name", MW_T_UTF8, true, 0);
  add(s, "v", MW_T_FLOAT64, true, 0);
  add(s, "vec", MW_T_FSL, true, 8);
  add(s, "_tombstone", MW_T_BOOL, false, 0);
  s = &tables[T_SUBSET];
  mw_schema_init(s);
  add(s, "id", MW_T_INT64, false, 0);
  s->fields[0].pk_position = 1;
  add(s, "v", MW_T_FLOAT64, true, 0);
  add(s, "note", MW_T_UTF8, true, 0);
  add(s, "_tombstone", MW_T_BOOL, false, 0);
  s = &tables[T_ALL]; /* c0..c9 as in fuzz/corpus/ipc/all-types-*.arrow */
  mw_schema_init(s);
  static const mw_type_t types[] = {MW_T_INT32,   MW_T_INT64,   MW_T_UINT32, MW_T_UINT64,
                                    MW_T_FLOAT32, MW_T_FLOAT64, MW_T_BOOL,   MW_T_UTF8,
                                    MW_T_BINARY,  MW_T_FSL};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    char name[8];
    snprintf(name, sizeof name, "c%zu", i);
    add(s, name, types[i], i != 1, 2);
  }
  for (int t = T_FLAT; t <= T_NESTED; t++) {
    mw_err_t err = {0};
    CHECK(mw_schema_text_parse(t == T_FLAT ? flat_text : nested_text, &tables[t], &err) == 0);
    CHECK(mw_schema_pk_text_apply(&tables[t], "id", &err) == 0);
    CHECK(mw_schema_tombstone_append(&tables[t]) > 0);
  }
  mw_ipc_limits_default(&lim);
  lim.max_decompressed_bytes = 16u << 20;
  lim.max_batches = 4096;
  for (int t = 0; t < N_TABLES; t++) {
    CHECK(mw_batch_init(&outs[t], &tables[t]) == 0);
    CHECK(mw_batch_init(&again[t], &tables[t]) == 0);
  }
}

static bool empty(const mw_batch_t *b) {
  if (b->n_rows != 0) return false;
  for (size_t i = 0; i < b->schema->n_fields; i++)
    if (b->cols[i].length != 0 || b->cols[i].null_count != 0) return false;
  return true;
}

/* An independent UTF-8 check (RFC 3629) of every valid utf8 value. */
static bool utf8_column_ok(const mw_column_t *c) {
  for (int64_t r = 0; r < c->length; r++) {
    if (!mw_column_valid(c, r)) continue;
    size_t len;
    const uint8_t *p = mw_column_bytes(c, r, &len);
    for (size_t i = 0; i < len;) {
      uint32_t cp;
      size_t k = p[i] < 0x80 ? 1 : (p[i] & 0xe0) == 0xc0 ? 2 : (p[i] & 0xf0) == 0xe0 ? 3
               : (p[i] & 0xf8) == 0xf0 ? 4 : 0;
      if (k == 0 || i + k > len) return false;
      cp = k == 1 ? p[i] : (uint32_t)(p[i] & (0x7f >> k));
      for (size_t j = 1; j < k; j++) {
        if ((p[i + j] & 0xc0) != 0x80) return false;
        cp = cp << 6 | (p[i + j] & 0x3f);
      }
      static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
      if (cp < min[k] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
      i += k;
    }
  }
  return true;
}

/* ... and of every utf8 value under it: list items, struct children. */
static bool utf8_tree_ok(const mw_column_t *c, const mw_field_t *f) {
  if (f->type == MW_T_UTF8 || f->type == MW_T_LARGE_UTF8) return utf8_column_ok(c);
  CHECK(c->n_children == f->n_children);
  for (uint32_t i = 0; i < c->n_children; i++)
    if (!utf8_tree_ok(&c->children[i], &f->children[i])) return false;
  return true;
}

static void one(int t, const uint8_t *d, size_t n, int ipc_rc) {
  /* the reused decoder for two tables, one-shot decoding for the third */
  mw_arrowframe_opts_t o = {.ignore_unknown_fields = t == T_SUBSET, .lim = &lim,
                            .reader = t == T_ALL ? NULL : &reader};
  mw_batch_t *out = &outs[t];
  mw_lp_code_t code = MW_LP_E_INTERNAL;
  mw_err_t err = {0};
  int rc = mw_arrowframe_decode(d, n, &tables[t], &o, out, &code, &err);
  if (rc < 0) {
    CHECK(code != MW_LP_OK && err.code == rc);
    CHECK(strncmp(err.msg, "ARROW frame: ", 13) == 0);
    CHECK(empty(out));
    CHECK(ipc_rc == 0 || code == MW_LP_E_PARSE);
    CHECK(code != MW_LP_E_INTERNAL || rc == -ENOMEM || rc == -EFBIG);
    return;
  }
  CHECK(rc == 0 && code == MW_LP_OK && ipc_rc == 0);
  CHECK(out->n_rows > 0 && mw_batch_validate(out) == 0);
  for (size_t i = 0; i < tables[t].n_fields; i++) {
    const mw_field_t *f = &tables[t].fields[i];
    CHECK(f->nullable || out->cols[i].null_count == 0);
    CHECK(utf8_tree_ok(&out->cols[i], f));
  }
  /* what the WAL writer does with it, and the round trip */
  const mw_batch_t *bs[1] = {out};
  mw_buf_reset(&e1);
  mw_buf_reset(&e2);
  CHECK(mw_ipc_writer_encode(&writer, &tables[t], bs, 1, NULL, &e1, &err) == 0);
  mw_err_t err2 = {0};
  rc = mw_arrowframe_decode(e1.data, e1.len, &tables[t], &o, &again[t], &code, &err2);
  if (rc < 0) fprintf(stderr, "re-decode: %s\n", err2.msg);
  CHECK(rc == 0 && again[t].n_rows == out->n_rows);
  bs[0] = &again[t];
  CHECK(mw_ipc_writer_encode(&writer, &tables[t], bs, 1, NULL, &e2, &err) == 0);
  CHECK(e1.len == e2.len && memcmp(e1.data, e2.data, e1.len) == 0);
  /* a frame that passes through: the WAL entry made of its own record
   * batches (re-framed) holds exactly the rows, and passes through again */
  if (out->wal_ipc.len > 0) {
    size_t head = out->wal_ipc_head;
    CHECK(head == MW_ARROWFRAME_WAL_HEAD_BYTES && out->wal_ipc.len > head);
    CHECK((out->wal_ipc.len - head) % 8 == 0);
    mw_ipc_part_t part = {out, out->wal_ipc.data + head, out->wal_ipc.len - head};
    mw_buf_reset(&e3);
    CHECK(mw_ipc_writer_encode_parts(&writer, &tables[t], &part, 1, NULL, &e3, &err) == 0);
    mw_batch_reset(&again[t]);
    rc = mw_arrowframe_decode(e3.data, e3.len, &tables[t], &o, &again[t], &code, &err2);
    if (rc < 0) fprintf(stderr, "pass-through re-decode: %s\n", err2.msg);
    CHECK(rc == 0 && again[t].n_rows == out->n_rows);
    CHECK(again[t].wal_ipc.len > 0);
    bs[0] = &again[t];
    mw_buf_reset(&e2);
    CHECK(mw_ipc_writer_encode(&writer, &tables[t], bs, 1, NULL, &e2, &err) == 0);
    CHECK(e1.len == e2.len && memcmp(e1.data, e2.data, e1.len) == 0);
  }
  mw_batch_reset(out);
  mw_batch_reset(&again[t]);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  static bool ready;
  if (!ready) {
    setup();
    mw_ipc_writer_init(&writer);
    mw_ipc_reader_init(&reader);
    ready = true;
  }
  if (n > (1u << 20)) return 0;
  int ipc_rc = mw_ipc_reader_decode(&reader, d, n, &lim, NULL);
  for (int t = 0; t < N_TABLES; t++) one(t, d, n, ipc_rc);
  return 0;
}
