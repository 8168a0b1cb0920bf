/*
 * batch.h — memwald's in-memory columnar data: schemas and record batches.
 *
 * Every codec speaks this model: the Arrow IPC codec decodes WAL entries into
 * it and encodes it back, the Lance data-file writer and the SSTable writer
 * consume it, and the MemTable (shard engine) stores its rows in it. Types
 * and their properties live in types.h (one table); this file owns fields
 * (a type plus its parameters and children), columns and their builders.
 *
 * The layout is Arrow's, so encoding to IPC is a copy of buffers (types.h
 * lists the layouts):
 *
 *   layout   values buffer                      offsets         children
 *   FIXED    length * width bytes LE            -               -
 *   BOOL     bitmap, LSB first                  -               -
 *   VAR      concatenated bytes                 length+1 i32    -
 *   FSL      length * dim items (null rows keep -               -
 *            a zero-filled slot) + item_validity
 *   LIST     -                                  length+1 i32    [0] the items
 *   STRUCT   -                                  -               one per field
 *
 * Every column may have a validity bitmap. Offsets are int32 in memory for
 * every type, large_* included (a batch is bounded by MW_MAX_BATCH_ROWS rows
 * and 2 GiB per buffer anyway); the IPC codec (ipc_encode.c,
 * ipc_decode.c) widens and narrows them on the wire.
 * A struct's children have the struct's length; a struct row that is null
 * still has a slot in every child (null there, or a zero/empty value when
 * the child is not nullable), as arrow-rs and apache-arrow build them.
 *
 * A validity buffer is a bitmap (LSB first, 1 = valid) of ceil(length/8)
 * bytes; an EMPTY validity buffer means "every row valid". null_count is
 * always exact. Bits past `length` in any bitmap are zero in bitmaps our
 * builders make; bitmaps decoded from Arrow IPC keep the writer's bytes (arrow-rs
 * may leave ones there, and re-encoding must reproduce them), so never rely on
 * them. A materialised fsl item_validity gives null rows null items (arrow-rs).
 *
 * Ownership: a schema owns its fields (names, parameters, children,
 * metadata); a batch owns its column buffers and child columns but only
 * borrows its schema (many batches share one schema). A column buffer may
 * be a view (common/buf.h: cap == 0) into bytes the batch's `backing` blob
 * keeps alive (a WAL entry decoded in place, lance/ipc.h
 * mw_ipc_decode_view); the builders copy a view before writing into it, so
 * a batch with views appends and truncates like any other. Whoever moves
 * a view-holding column into another batch gives that batch a reference
 * (mw_batch_adopt).
 *
 * Interface note for other modules: code that walks columns generically
 * should use mw_column_append_range / mw_column_truncate and the type table
 * rather than the buffers, so that nested columns keep working.
 *
 * Errors: negative errno (-ENOMEM, -EFBIG, -EINVAL); see common/err.h.
 */
#ifndef MW_LANCE_BATCH_H
#define MW_LANCE_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "lance/types.h"

/* Limits: keep every count inside int32 so Arrow offsets and Lance's u32
 * fields can hold it. MW_MAX_FIELDS bounds top-level fields and, separately,
 * all fields of a schema counted with their children. */
#define MW_MAX_FIELDS 1024
#define MW_MAX_BATCH_ROWS (INT32_MAX / 2)
#define MW_FIELD_TEXT_BYTES 512

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
  bool nullable;
  /* type parameters; zero where they do not apply (mw_field_check) */
  int32_t fsl_dim;      /* FSL: 1..MW_MAX_FSL_DIM */
  mw_type_t item_type;  /* FSL: a type with fsl_item set (default float32) */
  bool item_nullable;   /* FSL: the child field "item" nullability (arrow-rs: true) */
  int32_t byte_width;   /* FIXED_BINARY: 1..MW_MAX_FIXED_BINARY_BYTES */
  uint8_t unit;         /* TIMESTAMP: any mw_unit_t; TIME32: s, ms; TIME64: us, ns */
  char *tz;             /* TIMESTAMP: time zone text, NULL = none */
  uint8_t precision;    /* DECIMAL128: 1..38 */
  int8_t scale;         /* DECIMAL128: -precision..precision */
  struct mw_field *children; /* LIST, LARGE_LIST: one (the item); STRUCT: its fields */
  uint32_t n_children;
  /* Lance */
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
  mw_buf_t offsets;       /* VAR, LIST: (length + 1) int32 LE */
  mw_buf_t item_validity; /* FSL only: child bitmap over length*dim items; empty = all valid */
  int64_t item_null_count;
  struct mw_column *children; /* LIST: 1, STRUCT: one per field */
  uint32_t n_children;
} mw_column_t;

typedef struct mw_batch {
  const mw_schema_t *schema; /* borrowed */
  int64_t n_rows;
  mw_column_t *cols;         /* schema->n_fields columns, in schema order */
  mw_blob_t *backing;        /* one reference, or NULL: what the views point into */
  /* Optional: Arrow IPC record batch messages holding exactly these rows
   * for the table's WAL stream schema (lance/ipc.h mw_ipc_rebatch; an ARROW
   * frame that can go to the WAL as it is), in wal_ipc.data[wal_ipc_head,
   * len); the bytes before them are room the WAL may use for its schema
   * message (shard/wal.h mw_wal_add_ipc: the entry is then written from
   * this buffer, not copied). Empty = the WAL encodes the columns. Whoever
   * changes the rows or builds a new batch from them leaves it empty;
   * mw_batch_free frees it. */
  mw_buf_t wal_ipc;
  size_t wal_ipc_head;
} mw_batch_t;

/* --- fields --- */
static inline const mw_type_info_t *mw_field_info(const mw_field_t *f) {
  return mw_type_info(f->type);
}
static inline mw_layout_t mw_field_layout(const mw_field_t *f) { return mw_type_info(f->type)->layout; }
/* Bytes per value of a FIXED or FSL field (fsl: dim * item width), 0 otherwise. */
size_t mw_type_width(const mw_field_t *f);
/* Bytes per FSL item (the item type's width). */
size_t mw_fsl_item_width(const mw_field_t *f);
/* Append a child (name copied) to a LIST/LARGE_LIST (at most one) or STRUCT
 * field. Returns its index or -errno. */
int mw_field_add_child(mw_field_t *parent, const char *name, mw_type_t type, bool nullable);
/* Check the type parameters and children (ranges, child counts, nesting of
 * at most MW_MAX_NESTING levels, struct children named uniquely). 0, or
 * -EINVAL with the reason in why[0..why_len). */
int mw_field_check(const mw_field_t *f, char *why, size_t why_len);
/* Same type and parameters, recursively; names of struct children must
 * match, list item names and child nullability are not compared (values are
 * checked instead). */
bool mw_field_type_equal(const mw_field_t *a, const mw_field_t *b);
/* The type as the config writes it: "timestamp<us, UTC>",
 * "fixed_size_list<float16, 8>", "list<int32>", "struct<a: int32, b: string
 * not null>". Truncated with "..." past out_len. */
const char *mw_field_type_text(const mw_field_t *f, char *out, size_t out_len);
/* Free a field's name, zone, children and metadata (for fields built
 * outside a schema); leaves it zeroed. */
void mw_field_free(mw_field_t *f);
/* Number of fields in the tree (itself and all children). */
size_t mw_field_count(const mw_field_t *f);

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
/* Names, types (mw_field_type_equal) and nullability at every level. */
bool mw_schema_equal(const mw_schema_t *a, const mw_schema_t *b);

/* --- batches --- */
int mw_batch_init(mw_batch_t *b, const mw_schema_t *schema);
void mw_batch_free(mw_batch_t *b);
/* Drop every row but keep the buffers' memory for reuse (views and the
 * backing reference are dropped). */
void mw_batch_reset(mw_batch_t *b);
/* Append every row of srcs[0..n) (same schema, or an equal one) to dst, in
 * order, each of dst's buffers grown once to the rows' total size (no
 * doubling slack: the result is kept, in a MemTable). dst's wal_ipc (and
 * wal_ipc_head) is dropped: its rows changed. On failure (-ENOMEM) dst is
 * rolled back to its rows before the call. */
int mw_batch_concat(mw_batch_t *dst, const mw_batch_t *srcs, size_t n);
/* mw_batch_concat of one batch. */
int mw_batch_append(mw_batch_t *dst, const mw_batch_t *src);
/* b's views may point into blob: take a reference (b keeps at most one
 * backing; a second, different blob is refused with -EINVAL). */
int mw_batch_adopt(mw_batch_t *b, mw_blob_t *blob);
/* Copy every view into a buffer of its own and drop the backing. */
int mw_batch_own(mw_batch_t *b);
/* Bytes of b's buffers that are views (0 without a backing). */
uint64_t mw_batch_view_bytes(const mw_batch_t *b);
/* Check every invariant above (lengths, offsets monotone and in range,
 * null counts, children lengths, nulls only where nullable; utf8 left
 * unchecked). Returns 0 or -EINVAL. */
int mw_batch_validate(const mw_batch_t *b);

/* --- columns --- */
/* An empty column for field f (children and the leading offset made). */
int mw_column_init(mw_column_t *c, const mw_field_t *f);
void mw_column_free(mw_column_t *c);
void mw_column_reset(mw_column_t *c);
int mw_column_validate(const mw_column_t *c, const mw_field_t *f);
/* Bytes held by the column's buffers (its own and its children's). */
uint64_t mw_column_mem_bytes(const mw_column_t *c);

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

/* The first valid utf8 or large_utf8 value of column c (field f, named
 * `name`), at any depth (list items, struct children, null parents'
 * slots included), that is not UTF-8 (common/utf8.h: RFC 3629, what Lance's
 * readers accept). Returns true and sets *row to c's row holding it and
 * path to where it is ("tags[]", "st.inner.b"; just `name` for a flat
 * column); false when every value is UTF-8. Validated columns only. */
bool mw_column_utf8_find(const mw_column_t *c, const mw_field_t *f, const char *name,
                         int64_t *row, char *path, size_t path_len);

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
/* A null row: FIXED/FSL get a zero slot (FSL: null items), VAR/LIST repeat
 * the last offset, STRUCT gives every child a null (or, for a child that is
 * not nullable, a zero or empty value). f must be nullable. */
int mw_column_append_null(mw_column_t *c, const mw_field_t *f);
/* FIXED values (width bytes). */
int mw_column_append_fixed(mw_column_t *c, const void *value, size_t width);
/* FSL rows: dim items of the item type's width, all valid. */
int mw_column_append_fsl(mw_column_t *c, const mw_field_t *f, const void *items);
/* FSL, for parsers that write the items in place: room for one row's items
 * (dim items of the item type's width) at the end of the values buffer, or
 * NULL when out of memory; the row exists only after mw_column_fsl_commit,
 * which makes the items written there a valid row (all items valid). Any
 * other append in between invalidates the room. */
void *mw_column_fsl_room(mw_column_t *c, const mw_field_t *f);
int mw_column_fsl_commit(mw_column_t *c, const mw_field_t *f);
int mw_column_append_bool(mw_column_t *c, bool v);
int mw_column_append_bytes(mw_column_t *c, const void *p, size_t n);
/* LIST: close a valid row whose items were appended to children[0]. */
int mw_column_list_end(mw_column_t *c);
/* STRUCT: close a valid row whose children each got one value. */
int mw_column_struct_end(mw_column_t *c);
/* For decoders assembling nested columns level by level (datafile_read_nested.c): a
 * LIST or STRUCT row whose children the caller fills. A LIST row starts
 * empty at its child's end, and mw_column_list_grow() moves its end to the
 * child's length after items were appended; a STRUCT row's children must
 * each get one row. */
int mw_column_append_parent(mw_column_t *c, bool valid);
void mw_column_list_grow(mw_column_t *c);
/* Append rows [start, start+count) of src (same field) to dst. Fixed-width
 * and utf8/binary columns are copied in bulk (values, offsets and validity
 * as ranges); bool, FSL and nested columns row by row. Returns 0 or -errno
 * (-ENOMEM, -EFBIG past int32 offsets); on error dst may hold part of the
 * range (mw_column_truncate rolls it back). */
int mw_column_append_range(mw_column_t *dst, const mw_column_t *src, const mw_field_t *f,
                           int64_t start, int64_t count);
/* The same, one row at a time: the reference the bulk path is tested against. */
int mw_column_append_range_rows(mw_column_t *dst, const mw_column_t *src, const mw_field_t *f,
                                int64_t start, int64_t count);
/* Drop rows [length, c->length) (a builder's rollback): shrinks every buffer
 * and child, fixes null counts and clears bitmap bits past the new length.
 * Keeps memory. A validity bitmap left without zeros is dropped (empty = all
 * valid), so a rolled-back row leaves the buffers as they were before it. A
 * LIST column's child is cut back to the list's last offset and a STRUCT's
 * children to `length`, recursively, even when the column itself is not
 * longer (a row that failed half way may have filled only children). */
void mw_column_truncate(mw_column_t *c, const mw_field_t *f, int64_t length);
/* Byte length and pointer of a VAR value. */
static inline const uint8_t *mw_column_bytes(const mw_column_t *c, int64_t i, size_t *n) {
  const int32_t *off = (const int32_t *)(const void *)c->offsets.data;
  *n = (size_t)(off[i + 1] - off[i]);
  /* an all-empty column has no value buffer: never compute NULL + 0 */
  return c->values.data != NULL ? c->values.data + off[i] : (const uint8_t *)"";
}
/* Item range [*start, *end) of LIST row i. */
static inline void mw_column_list_range(const mw_column_t *c, int64_t i, int64_t *start,
                                        int64_t *end) {
  const int32_t *off = (const int32_t *)(const void *)c->offsets.data;
  *start = off[i];
  *end = off[i + 1];
}

#endif
