/*
 * fuzz_jsonrow.c — libFuzzer target for the NDJSON row parser.
 *
 * A fixed schema covers every type (int32/int64 pk/uint32/uint64, float32,
 * float64, bool, utf8, binary, fixed_size_list<float32,3>, _tombstone). The
 * input is split at '\n' into lines; a first byte >= 0x80 is a mode byte
 * (bit 0: delete, bit 1: ignore unknown fields) and is not parsed. Every line is parsed into one batch, and after each call:
 *   - success appends exactly one row, failure appends none and leaves every
 *     buffer byte-identical (checked via lengths and a checksum);
 *   - a failure has a class and a non-empty message;
 *   - mw_batch_validate holds and every utf8 value is valid UTF-8.
 * Seeds: fuzz/corpus/jsonrow/.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/jsonrow.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

#define CHECK(c)                                                                  \
  do {                                                                            \
    if (!(c)) {                                                                   \
      fprintf(stderr, "fuzz_jsonrow: check failed: %s (line %d)\n", #c, __LINE__); \
      abort();                                                                    \
    }                                                                             \
  } while (0)

static mw_schema_t schema;
static mw_jsonrow_parser_t parser, parser_ign;

static void setup(void) {
  static int done;
  if (done) return;
  done = 1;
  mw_schema_init(&schema);
  int id = mw_schema_add(&schema, "id", MW_T_INT64, false);
  mw_schema_add(&schema, "i32", MW_T_INT32, true);
  mw_schema_add(&schema, "u32", MW_T_UINT32, true);
  mw_schema_add(&schema, "u64", MW_T_UINT64, true);
  mw_schema_add(&schema, "f32", MW_T_FLOAT32, true);
  mw_schema_add(&schema, "f64", MW_T_FLOAT64, true);
  mw_schema_add(&schema, "b", MW_T_BOOL, true);
  mw_schema_add(&schema, "s", MW_T_UTF8, true);
  mw_schema_add(&schema, "bin", MW_T_BINARY, true);
  int v = mw_schema_add(&schema, "vec", MW_T_FSL_F32, true);
  mw_schema_add(&schema, "_tombstone", MW_T_BOOL, false);
  schema.fields[v].fsl_dim = 3;
  schema.fields[id].pk_position = 1;
  mw_jsonrow_opts_t o = {.max_line_bytes = 4096, .max_depth = 8};
  CHECK(mw_jsonrow_init(&parser, &schema, &o) == 0);
  o.ignore_unknown_fields = true;
  CHECK(mw_jsonrow_init(&parser_ign, &schema, &o) == 0);
}

static uint64_t sum_buf(uint64_t h, const mw_buf_t *b) {
  h = h * 1000003 + b->len;
  for (size_t i = 0; i < b->len; i++) h = (h ^ b->data[i]) * 1099511628211ull;
  return h;
}

static uint64_t batch_sum(const mw_batch_t *b) {
  uint64_t h = (uint64_t)b->n_rows;
  for (size_t i = 0; i < b->schema->n_fields; i++) {
    const mw_column_t *c = &b->cols[i];
    h = h * 31 + (uint64_t)c->length * 7 + (uint64_t)c->null_count;
    h = sum_buf(h, &c->validity);
    h = sum_buf(h, &c->values);
    h = sum_buf(h, &c->offsets);
    h = sum_buf(h, &c->item_validity);
  }
  return h;
}

static int utf8_ok(const uint8_t *p, size_t n) {
  size_t i = 0;
  while (i < n) {
    uint8_t b = p[i];
    size_t k = b < 0x80 ? 1 : b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3
             : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
    if (k == 0 || i + k > n) return 0;
    for (size_t j = 1; j < k; j++)
      if ((p[i + j] & 0xC0) != 0x80) return 0;
    if (b == 0xE0 && p[i + 1] < 0xA0) return 0;
    if (b == 0xED && p[i + 1] > 0x9F) return 0;
    if (b == 0xF0 && p[i + 1] < 0x90) return 0;
    if (b == 0xF4 && p[i + 1] > 0x8F) return 0;
    i += k;
  }
  return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  setup();
  mw_batch_t b;
  CHECK(mw_batch_init(&b, &schema) == 0);
  size_t start = 0;
  while (start <= n) {
    const uint8_t *nl = start < n ? memchr(d + start, '\n', n - start) : NULL;
    size_t end = nl ? (size_t)(nl - d) : n;
    size_t len = end - start;
    /* a leading byte >= 0x80 is a mode byte, not part of the line:
     * bit 0 = delete, bit 1 = ignore unknown fields */
    bool del = false;
    mw_jsonrow_parser_t *p = &parser;
    if (len > 0 && d[start] >= 0x80) {
      del = d[start] & 1;
      if (d[start] & 2) p = &parser_ign;
      start++, len--;
    }
    int64_t rows = b.n_rows;
    uint64_t before = batch_sum(&b);
    mw_jsonrow_error_t e;
    int rc = mw_jsonrow_parse(p, (const char *)d + start, len, del, &b, &e);
    if (rc == 0) {
      CHECK(b.n_rows == rows + 1);
      CHECK(e.cls == MW_JSONROW_OK);
      /* the tombstone says which mode wrote the row */
      CHECK(mw_bit_get(b.cols[10].values.data, rows) == del);
    } else {
      CHECK(rc == -EBADMSG);
      CHECK(e.cls >= MW_JSONROW_E_PARSE && e.cls <= MW_JSONROW_E_PK);
      CHECK(e.msg[0] != 0);
      CHECK(e.offset <= len);
      CHECK(b.n_rows == rows);
      CHECK(batch_sum(&b) == before);
    }
    CHECK(mw_batch_validate(&b) == 0);
    if (rc == 0 && mw_column_valid(&b.cols[7], rows)) {
      /* not mw_column_bytes: values.data is NULL while every string is empty */
      const int32_t *off = (const int32_t *)(const void *)b.cols[7].offsets.data;
      size_t sl = (size_t)(off[rows + 1] - off[rows]);
      if (sl) CHECK(utf8_ok(b.cols[7].values.data + off[rows], sl));
    }
    if (nl == NULL) break;
    start = end + 1;
  }
  mw_batch_free(&b);
  return 0;
}
