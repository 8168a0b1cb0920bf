/*
 * batch.h — memwald's in-memory columnar data: schemas and record batches.
 *
 * Every codec speaks this model: the Arrow IPC codec decodes WAL entries into
 * it and encodes it back, the Lance data-file writer and the SSTable writer
 * consume it, and the MemTable (shard engine) stores its rows in it.
 *
 * The layout is Arrow's, so encoding to IPC is a copy of buffers:
 *
 *   type        values buffer                     offsets        validity
 *   int32/u32   length * 4 bytes LE               -              optional
 *   int64/u64   length * 8 bytes LE               -              optional
 *   float32/64  length * 4 / 8 bytes LE           -              optional
 *   bool        bitmap, LSB first                 -              optional
 *   utf8/binary concatenated bytes                length+1 i32   optional
 *   fsl<f32,D>  length * D * 4 bytes (null rows   -              optional
 *               keep a zero-filled slot)                          + item_validity
 *
 * A validity buffer is a bitmap (LSB first, 1 = valid) of ceil(length/8)
 * bytes; an EMPTY validity buffer means "every row valid". null_count is
 * always exact. Bits past `length` in any bitmap are zero in bitmaps our
 * builders make; bitmaps decoded from Arrow IPC keep the writer's bytes (arrow-rs
 * may leave ones there, and re-encoding must reproduce them), so never rely on
 * them. A materialised fsl item_validity gives null rows null items (arrow-rs).
 *
 * Ownership: a schema owns its strings and metadata; a batch owns its column
 * buffers but only borrows its schema (many batches share one schema).
 *
 * Errors: negative errno (-ENOMEM, -EFBIG, -EINVAL); see common/err.h.
 */
#ifndef MW_LANCE_BATCH_H
#define MW_LANCE_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

/* Limits: keep every count inside int32 so Arrow offsets and Lance's u32
 * fields can hold it. */
#define MW_MAX_FIELDS 1024
#define MW_MAX_FSL_DIM 65536
#define MW_MAX_BATCH_ROWS (INT32_MAX / 2)

typedef enum mw_type {
  MW_T_INT32 = 1,
  MW_T_INT64,
  MW_T_UINT32,
  MW_T_UINT64,
  MW_T_FLOAT32,
  MW_T_FLOAT64,
  MW_T_BOOL,
  MW_T_UTF8,
  MW_T_BINARY,
  MW_T_FSL_F32, /* fixed_size_list<float32, fsl_dim> */
} mw_type_t;

/* One metadata entry. Keys are NUL-terminated text; values are bytes (Lance
 * maps are map<string, bytes>) but are NUL-terminated too for convenience. */
typedef struct mw_kv {
  char *key;
  uint8_t *value;
  size_t value_len;
} mw_kv_t;

/* An ordered list of metadata entries; order is kept because byte-exact
 * re-encoding needs it. */
typedef struct mw_kvs {
  mw_kv_t *items;
  size_t n;
} mw_kvs_t;

typedef struct mw_field {
  char *name;
  mw_type_t type;
  int32_t fsl_dim;      /* MW_T_FSL_F32 only, 1..MW_MAX_FSL_DIM */
  bool nullable;
  bool item_nullable;   /* FSL child field "item" nullability (arrow-rs: true) */
  int32_t id;           /* Lance field id, -1 when unknown (Arrow IPC has none) */
  uint32_t pk_position; /* 1-based position in the unenforced primary key, 0 = none */
  mw_kvs_t meta;        /* field metadata, in order */
} mw_field_t;

typedef struct mw_schema {
  mw_field_t *fields;
  size_t n_fields;
  mw_kvs_t meta;        /* schema metadata, in order */
} mw_schema_t;

typedef struct mw_column {
  int64_t length;
  int64_t null_count;
  mw_buf_t validity;      /* empty = all valid */
  mw_buf_t values;
  mw_buf_t offsets;       /* utf8/binary: (length + 1) int32 LE */
  mw_buf_t item_validity; /* fsl only: child bitmap over length*dim items; empty = all valid */
  int64_t item_null_count;
} mw_column_t;

typedef struct mw_batch {
  const mw_schema_t *schema; /* borrowed */
  int64_t n_rows;
  mw_column_t *cols;         /* schema->n_fields columns, in schema order */
} mw_batch_t;

/* --- types --- */
/* Bytes per value for fixed-width types (fsl: 4*dim), 0 for bool/utf8/binary. */
size_t mw_type_width(const mw_field_t *f);
const char *mw_type_name(mw_type_t t);
/* Lance logical type string ("int64", "string", "fixed_size_list:float:8"). */
int mw_type_lance_logical(const mw_field_t *f, char *out, size_t out_len);

/* --- metadata lists --- */
int mw_kvs_set(mw_kvs_t *kvs, const char *key, const void *value, size_t value_len);
const mw_kv_t *mw_kvs_get(const mw_kvs_t *kvs, const char *key);
bool mw_kvs_remove(mw_kvs_t *kvs, const char *key);
int mw_kvs_copy(mw_kvs_t *dst, const mw_kvs_t *src);
void mw_kvs_free(mw_kvs_t *kvs);

/* --- schemas --- */
void mw_schema_init(mw_schema_t *s);
void mw_schema_free(mw_schema_t *s);
int mw_schema_copy(mw_schema_t *dst, const mw_schema_t *src);
/* Append a field (name copied). Returns the new field's index or -errno. */
int mw_schema_add(mw_schema_t *s, const char *name, mw_type_t type, bool nullable);
int mw_schema_find(const mw_schema_t *s, const char *name); /* index or -ENOENT */
bool mw_schema_equal(const mw_schema_t *a, const mw_schema_t *b); /* names, types, nullability */

/* --- batches --- */
int mw_batch_init(mw_batch_t *b, const mw_schema_t *schema);
void mw_batch_free(mw_batch_t *b);
/* Drop every row but keep the buffers' memory for reuse. */
void mw_batch_reset(mw_batch_t *b);
/* Check every invariant above (lengths, offsets monotone and in range,
 * null counts, utf8 left unchecked). Returns 0 or -EINVAL. */
int mw_batch_validate(const mw_batch_t *b);

static inline bool mw_bit_get(const uint8_t *bits, int64_t i) {
  return (bits[i >> 3] >> (i & 7)) & 1;
}
static inline void mw_bit_set(uint8_t *bits, int64_t i, bool v) {
  if (v) bits[i >> 3] |= (uint8_t)(1u << (i & 7));
  else bits[i >> 3] &= (uint8_t)~(1u << (i & 7));
}
static inline bool mw_column_valid(const mw_column_t *c, int64_t i) {
  return c->validity.len == 0 || mw_bit_get(c->validity.data, i);
}

/* --- accounting --- */
/* Lance's in-memory estimate of one batch (memwal.md §6.3): the Arrow slice
 * payload of every column (arrow-rs get_slice_memory_size: values, utf8
 * offsets at 4 bytes a row, a validity bitmap only when the column has
 * nulls, an fsl item bitmap only when items are null) plus
 * MW_BATCH_LANCE_OVERHEAD_BYTES. The one estimate for the MemTable's size,
 * the WAL's pending bytes, the write size limit and an SSTable's
 * in_memory_bytes, so they never disagree. */
#define MW_BATCH_LANCE_OVERHEAD_BYTES 40
int64_t mw_batch_lance_bytes(const mw_batch_t *b);

/* --- column builders (append one row; the column's field says the type) --- */
int mw_column_append_null(mw_column_t *c, const mw_field_t *f);
int mw_column_append_fixed(mw_column_t *c, const void *value, size_t width);
int mw_column_append_bool(mw_column_t *c, bool v);
int mw_column_append_bytes(mw_column_t *c, const void *p, size_t n);
/* Append rows [start, start+count) of src (same field) to dst. */
int mw_column_append_range(mw_column_t *dst, const mw_column_t *src, const mw_field_t *f,
                           int64_t start, int64_t count);
/* Drop rows [length, c->length) (a builder's rollback): shrinks every buffer,
 * fixes null counts and clears bitmap bits past the new length. Keeps memory.
 * A validity bitmap left without zeros is dropped (empty = all valid), so a
 * rolled-back row leaves the buffers as they were before it. */
void mw_column_truncate(mw_column_t *c, const mw_field_t *f, int64_t length);
/* Byte length and pointer of a utf8/binary value. */
static inline const uint8_t *mw_column_bytes(const mw_column_t *c, int64_t i, size_t *n) {
  const int32_t *off = (const int32_t *)(const void *)c->offsets.data;
  *n = (size_t)(off[i + 1] - off[i]);
  /* an all-empty column has no value buffer: never compute NULL + 0 */
  return c->values.data != NULL ? c->values.data + off[i] : (const uint8_t *)"";
}

#endif
