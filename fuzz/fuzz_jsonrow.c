/*
 * fuzz_jsonrow.c — libFuzzer target for the NDJSON row parser.
 *
 * A fixed schema covers every type (the first eleven columns as the seeds
 * name them, then narrow ints, float16, timestamps, dates, times, decimal,
 * large and fixed binaries, fixed_size_lists, list, large_list and a nested
 * struct; _tombstone last); the second parser also stores objects in string
 * columns as JSON text. The
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

#include "lance/schema_text.h"
#include "net/jsonrow.h"

#define TOMB 28 /* _tombstone, after the 28 columns of the schema */

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
  /* columns 0..10 as before (the corpus names them), then one of every
   * other type, nested ones included */
  mw_err_t err = {0};
  CHECK(mw_schema_text_parse(
            "id:int64 not null, i32:int32, u32:uint32, u64:uint64, f32:float, f64:double, b:bool, "
            "s:string, bin:binary, vec:fixed_size_list<float32,3>, i8:int8, u16:uint16, "
            "f16:float16, ts:timestamp<ms>, tsn:timestamp<ns, UTC>, d:date32, d64:date64, "
            "t:time64<us>, t32:time32<s>, dec:decimal128<10,2>, ls:large_string, lb:large_binary, "
            "fsb:fixed_size_binary<3>, v16:fixed_size_list<float16,2>, vi8:fixed_size_list<int8,3>, "
            "l:list<int32>, ll:large_list<string not null>, "
            "st:struct<a:int32, b:struct<c:string, d:list<int64>>, e:bool not null>",
            &schema, &err) == 0);
  CHECK(mw_schema_pk_text_apply(&schema, "id", &err) == 0);
  CHECK(mw_schema_tombstone_append(&schema) == TOMB);
  mw_jsonrow_opts_t o = {.max_line_bytes = 4096, .max_depth = 8};
  CHECK(mw_jsonrow_init(&parser, &schema, &o) == 0);
  o.ignore_unknown_fields = true;
  o.objects_as_text = true;
  CHECK(mw_jsonrow_init(&parser_ign, &schema, &o) == 0);
}

static uint64_t sum_buf(uint64_t h, const mw_buf_t *b) {
  h = h * 1000003 + b->len;
  for (size_t i = 0; i < b->len; i++) h = (h ^ b->data[i]) * 1099511628211ull;
  return h;
}

static uint64_t column_sum(uint64_t h, const mw_column_t *c) {
  h = h * 31 + (uint64_t)c->length * 7 + (uint64_t)c->null_count;
  h = sum_buf(h, &c->validity);
  h = sum_buf(h, &c->values);
  h = sum_buf(h, &c->offsets);
  h = sum_buf(h, &c->item_validity);
  for (uint32_t i = 0; i < c->n_children; i++) h = column_sum(h, &c->children[i]);
  return h;
}

static uint64_t batch_sum(const mw_batch_t *b) {
  uint64_t h = (uint64_t)b->n_rows;
  for (size_t i = 0; i < b->schema->n_fields; i++) h = column_sum(h, &b->cols[i]);
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
      CHECK(mw_bit_get(b.cols[TOMB].values.data, rows) == del);
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
