/*
 * fuzz_ipc.c — libFuzzer target for the Arrow IPC stream decoder.
 *
 * Decode the input under tight limits. On success every batch must pass
 * mw_batch_validate; re-encode it (plain, or zstd when the input's last byte
 * is odd), decode that again and require the same model, and require that
 * encoding the second model gives the very same bytes (encode is a fixed
 * point after one round). A reader reused across inputs must agree with
 * one-shot decoding, and so must the view decoder (mw_ipc_decode_view over
 * a blob copy of the input: buffers viewing the blob, each batch holding
 * a reference exactly when it has views; mw_batch_own leaves the same
 * model and no reference). Seeds: fuzz/corpus/ipc/ (vector WAL entries, all types,
 * zstd).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lance/ipc.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

#define CHECK(c)                                                    \
  do {                                                              \
    if (!(c)) {                                                     \
      fprintf(stderr, "fuzz_ipc: check failed: %s (line %d)\n", #c, __LINE__); \
      abort();                                                      \
    }                                                               \
  } while (0)

static bool buf_eq(const mw_buf_t *a, const mw_buf_t *b) {
  return a->len == b->len && (a->len == 0 || memcmp(a->data, b->data, a->len) == 0);
}

static bool kvs_eq(const mw_kvs_t *a, const mw_kvs_t *b) {
  if (a->n != b->n) return false;
  for (size_t i = 0; i < a->n; i++)
    if (strcmp(a->items[i].key, b->items[i].key) != 0 ||
        a->items[i].value_len != b->items[i].value_len ||
        memcmp(a->items[i].value, b->items[i].value, a->items[i].value_len) != 0)
      return false;
  return true;
}

static void same_stream(const mw_ipc_stream_t *a, const mw_ipc_stream_t *b) {
  CHECK(mw_schema_equal(&a->schema, &b->schema));
  CHECK(kvs_eq(&a->schema.meta, &b->schema.meta));
  for (size_t i = 0; i < a->schema.n_fields; i++) {
    CHECK(kvs_eq(&a->schema.fields[i].meta, &b->schema.fields[i].meta));
    CHECK(a->schema.fields[i].pk_position == b->schema.fields[i].pk_position);
    CHECK(a->schema.fields[i].item_nullable == b->schema.fields[i].item_nullable);
  }
  CHECK(a->n_batches == b->n_batches);
  for (size_t k = 0; k < a->n_batches; k++) {
    const mw_batch_t *x = &a->batches[k], *y = &b->batches[k];
    CHECK(x->n_rows == y->n_rows);
    for (size_t i = 0; i < a->schema.n_fields; i++) {
      const mw_column_t *c = &x->cols[i], *e = &y->cols[i];
      CHECK(c->length == e->length && c->null_count == e->null_count);
      CHECK(c->item_null_count == e->item_null_count);
      CHECK(buf_eq(&c->validity, &e->validity) && buf_eq(&c->values, &e->values));
      CHECK(buf_eq(&c->offsets, &e->offsets) && buf_eq(&c->item_validity, &e->item_validity));
    }
  }
}

/* The view decoder against one-shot decoding's outcome (rc, and *want on
 * success). */
static void view_agrees(const uint8_t *d, size_t n, const mw_ipc_limits_t *lim, int rc,
                        const mw_ipc_stream_t *want) {
  uint8_t *copy = malloc(n ? n : 1);
  CHECK(copy != NULL);
  if (n) memcpy(copy, d, n);
  mw_blob_t *blob = mw_blob_new(copy, n);
  CHECK(blob != NULL);
  mw_ipc_stream_t v;
  int vrc = mw_ipc_decode_view(blob, lim, &v, NULL);
  CHECK(vrc == rc || rc == -ENOMEM || vrc == -ENOMEM);
  if (vrc < 0 || want == NULL) {
    CHECK(mw_blob_refs(blob) == 1);
    mw_blob_unref(blob);
    if (vrc == 0) mw_ipc_stream_free(&v);
    return;
  }
  size_t backed = 0;
  for (size_t i = 0; i < v.n_batches; i++) {
    const mw_batch_t *b = &v.batches[i];
    CHECK(mw_batch_validate(b) == 0);
    CHECK((b->backing != NULL) == (mw_batch_view_bytes(b) > 0));
    CHECK(b->backing == NULL || b->backing == blob);
    backed += b->backing != NULL;
  }
  CHECK(mw_blob_refs(blob) == 1 + backed);
  mw_blob_unref(blob); /* the batches keep it */
  same_stream(want, &v);
  for (size_t i = 0; i < v.n_batches; i++) {
    CHECK(mw_batch_own(&v.batches[i]) == 0);
    CHECK(v.batches[i].backing == NULL && mw_batch_view_bytes(&v.batches[i]) == 0);
  }
  same_stream(want, &v);
  mw_ipc_stream_free(&v);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  mw_ipc_limits_t lim;
  mw_ipc_limits_default(&lim);
  lim.max_decompressed_bytes = 16u << 20;
  lim.max_batches = 4096;
  mw_ipc_stream_t s1, s2;
  mw_err_t err = {0};
  int rc = mw_ipc_decode(d, n, &lim, &s1, &err);
  /* a reader reused across inputs must agree with one-shot decoding */
  static mw_ipc_reader_t rd;
  static bool rd_init;
  if (!rd_init) {
    mw_ipc_reader_init(&rd);
    rd_init = true;
  }
  int rrc = mw_ipc_reader_decode(&rd, d, n, &lim, NULL);
  CHECK(rrc == rc || (rc == -ENOMEM) || (rrc == -ENOMEM));
  if (rc == 0 && rrc == 0) same_stream(&s1, &rd.stream);
  view_agrees(d, n, &lim, rc, rc == 0 ? &s1 : NULL);
  if (rc < 0) {
    CHECK(rc == -EBADMSG || rc == -ENOTSUP || rc == -EFBIG || rc == -ENOMEM);
    CHECK(err.msg[0] != 0);
    return 0;
  }
  for (size_t i = 0; i < s1.n_batches; i++) CHECK(mw_batch_validate(&s1.batches[i]) == 0);
  const mw_batch_t **bs = calloc(s1.n_batches + 1, sizeof *bs);
  CHECK(bs != NULL);
  for (size_t i = 0; i < s1.n_batches; i++) bs[i] = &s1.batches[i];
  mw_ipc_opts_t opts = {.zstd = n > 0 && (d[n - 1] & 1), .zstd_level = 1};
  mw_buf_t e1 = MW_BUF_INIT, e2 = MW_BUF_INIT;
  rc = mw_ipc_encode(&s1.schema, bs, s1.n_batches, &opts, &e1, &err);
  CHECK(rc == 0);
  lim.max_decompressed_bytes = MW_IPC_MAX_DECOMPRESSED_BYTES;
  rc = mw_ipc_decode(e1.data, e1.len, &lim, &s2, &err);
  if (rc != 0) fprintf(stderr, "re-decode: %s\n", err.msg);
  CHECK(rc == 0);
  same_stream(&s1, &s2);
  for (size_t i = 0; i < s2.n_batches; i++) bs[i] = &s2.batches[i];
  CHECK(mw_ipc_encode(&s2.schema, bs, s2.n_batches, &opts, &e2, &err) == 0);
  CHECK(buf_eq(&e1, &e2));
  mw_buf_free(&e1);
  mw_buf_free(&e2);
  free(bs);
  mw_ipc_stream_free(&s2);
  mw_ipc_stream_free(&s1);
  return 0;
}
