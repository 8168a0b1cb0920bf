/*
 * ipc.h — Arrow IPC streams: the bytes of one MemWAL WAL entry.
 *
 * Owns: decoding a stream (schema message, record batches, EOS) into the
 * columnar model of batch.h, and encoding the model back into the exact bytes
 * arrow-rs StreamWriter produces (64-byte aligned metadata and body buffers,
 * all-ones validity bitmaps for columns without nulls, flatbuffers laid out
 * as flatbuffers-rs lays them out). Optional Arrow BodyCompression ZSTD.
 *
 * Types: every mw_type_t (types.h): Int 8..64 signed and unsigned, Float
 * 16/32/64, Bool, Utf8/Binary and Large*, FixedSizeBinary, Date, Time,
 * Timestamp (unit, zone), Decimal128, FixedSizeList of numbers, List,
 * LargeList, Struct_, nested to MW_MAX_NESTING. Large types carry 64-bit
 * offsets on the wire and 32-bit ones in memory. Anything else decodes to
 * -ENOTSUP.
 *
 * Dictionaries (decode only): a top-level field with a DictionaryEncoding
 * (what apache-arrow's tableFromArrays writes for strings) decodes to its
 * value type, every index replaced by its value from the stream's
 * DictionaryBatch messages (replacement or delta), the materialised bytes
 * bounded by max_decompressed_bytes. Re-encoding writes plain columns.
 *
 * Metadata: field and schema metadata are kept in order. On decode,
 * field.pk_position is parsed from `lance-schema:unenforced-primary-key:position`
 * (the entry stays in field.meta). On encode, field.meta is written as is; a
 * field with pk_position > 0 whose meta lacks the key gets it appended.
 *
 * Errors: 0 or a negative errno. Corrupt or truncated input gives -EBADMSG
 * with `err` naming the byte offset and the problem; unsupported but valid
 * Arrow gives -ENOTSUP; a limit exceeded gives -EFBIG. A stream must end with
 * the EOS marker; bytes after it are an error.
 */
#ifndef MW_LANCE_IPC_H
#define MW_LANCE_IPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"
#include "lance/batch.h"
#include "lance/flatbuf.h"

#define MW_IPC_WRITER_EPOCH_KEY "writer_epoch"
#define MW_IPC_FENCE_SENTINEL_KEY "fence_sentinel"
#define MW_IPC_PK_POSITION_KEY "lance-schema:unenforced-primary-key:position"
#define MW_IPC_ALIGN_BYTES 64
#define MW_IPC_MAX_DECOMPRESSED_BYTES ((size_t)1 << 30)
#define MW_IPC_MAX_DICTS 64

typedef struct mw_ipc_limits {
  size_t max_fields;              /* <= MW_MAX_FIELDS */
  int64_t max_batch_rows;         /* <= MW_MAX_BATCH_ROWS */
  size_t max_batches;             /* record batches per stream */
  size_t max_decompressed_bytes;  /* zstd output per stream */
} mw_ipc_limits_t;

/* The defaults used when a NULL limits pointer is passed. */
void mw_ipc_limits_default(mw_ipc_limits_t *lim);

typedef struct mw_ipc_stream {
  mw_schema_t schema;
  mw_batch_t *batches;  /* each borrows &schema: do not move the struct after decode */
  size_t n_batches;
  size_t n_dict_fields; /* fields that came dictionary-encoded (decoded to values) */
} mw_ipc_stream_t;

/* Reusable decoder: the decoded stream lives in `stream` until the next
 * call; a warm reader whose streams keep the same schema reuses every
 * column buffer (no allocation, no page faults), which is how WAL replay
 * reaches memcpy speed. On failure `stream` is empty. Not thread-safe. */
typedef struct mw_ipc_reader {
  mw_ipc_stream_t stream;
  size_t batches_init;   /* stream.batches[0, batches_init) hold memory */
  size_t batches_alloc;  /* slots allocated in stream.batches */
  void *dctx;            /* ZSTD_DCtx, created on first compressed input */
  mw_buf_t tmp[3];       /* decompressed buffers */
} mw_ipc_reader_t;

void mw_ipc_reader_init(mw_ipc_reader_t *rd);
void mw_ipc_reader_free(mw_ipc_reader_t *rd);
int mw_ipc_reader_decode(mw_ipc_reader_t *rd, const uint8_t *p, size_t n,
                         const mw_ipc_limits_t *lim, mw_err_t *err);

/* Decode a whole stream into a stream the caller owns (free with
 * mw_ipc_stream_free). On failure *out is left empty (nothing to free). */
int mw_ipc_decode(const uint8_t *p, size_t n, const mw_ipc_limits_t *lim,
                  mw_ipc_stream_t *out, mw_err_t *err);
void mw_ipc_stream_free(mw_ipc_stream_t *s);
/* The same over a blob's bytes, without copying what can stay where it is:
 * every uncompressed, 8-byte aligned buffer (validity, values, int32
 * offsets that start at 0) becomes a view into the blob (common/buf.h),
 * and each batch holding a view takes a reference to the blob as its
 * `backing` (lance/batch.h). The rest is copied as mw_ipc_decode does
 * (decompressed or dictionary columns, 64-bit or rebased offsets, padded
 * fixed_size_list children, sliced list children). The same checks run
 * either way. The blob outlives the batches by reference: the caller may
 * drop its own. */
int mw_ipc_decode_view(mw_blob_t *blob, const mw_ipc_limits_t *lim, mw_ipc_stream_t *out,
                       mw_err_t *err);

typedef struct mw_ipc_opts {
  bool zstd;          /* Arrow BodyCompression ZSTD (BUFFER) */
  int zstd_level;     /* 0 = zstd default */
  uint32_t body_align_bytes; /* uncompressed body buffers: 0 = 64 (arrow-rs);
                              * 8 = Arrow's minimum (pyarrow, apache-arrow) */
} mw_ipc_opts_t;

/* Reusable encoder state: once warm, encoding allocates nothing but growth of
 * `out`. Not thread-safe; one per shard. */
typedef struct mw_ipc_writer {
  mw_fbb_t fbb;
  mw_buf_t body;      /* compressed body scratch */
  mw_buf_t scratch;   /* offset arrays, node/buffer descriptors */
  mw_buf_t ones;      /* all-ones bitmap source for compression */
  void *zctx;         /* ZSTD_CCtx, created on first compressed use */
} mw_ipc_writer_t;

void mw_ipc_writer_init(mw_ipc_writer_t *w);
void mw_ipc_writer_free(mw_ipc_writer_t *w);
/* Append one complete stream (schema, batches, EOS) to `out`. Every batch
 * must have the schema's fields (checked: n_fields and row counts). */
int mw_ipc_writer_encode(mw_ipc_writer_t *w, const mw_schema_t *schema,
                         const mw_batch_t *const *batches, size_t n_batches,
                         const mw_ipc_opts_t *opts, mw_buf_t *out, mw_err_t *err);
/* Same with a temporary writer (allocates; for tools and tests). */
int mw_ipc_encode(const mw_schema_t *schema, const mw_batch_t *const *batches,
                  size_t n_batches, const mw_ipc_opts_t *opts, mw_buf_t *out, mw_err_t *err);

/* A stream built from parts, in order: a part with `msgs` contributes those
 * bytes (complete record batch messages for `schema`, from mw_ipc_rebatch)
 * as they are; a part without contributes its `batch`, encoded. */
typedef struct mw_ipc_part {
  const mw_batch_t *batch;
  const uint8_t *msgs;
  size_t msgs_len;
} mw_ipc_part_t;
int mw_ipc_writer_encode_parts(mw_ipc_writer_t *w, const mw_schema_t *schema,
                               const mw_ipc_part_t *parts, size_t n_parts,
                               const mw_ipc_opts_t *opts, mw_buf_t *out, mw_err_t *err);

/* --- pass-through (an ARROW frame into the WAL without re-encoding) ---
 * Append to `out` the record batch messages of stream p[0, n) -- which
 * mw_ipc_decode (or a reader) accepted as `st` -- re-framed for `target`:
 * target field i is stream field map[i] (same type), or, when map[i] < 0,
 * a not-null bool column of false values (`_tombstone`). Each body is
 * copied as it is, then the false bitmap appended to it when one is added;
 * only the message metadata is written anew (V5; nodes and buffers in
 * target order; the stream's custom metadata is not carried). Record
 * batches without rows are left out. The result holds exactly st's rows.
 * -ENOTSUP (out unchanged; encode the decoded batch instead) when the
 * stream cannot go as it is: dictionary-encoded fields, body compression,
 * a stream field target has no use for, any other absent target field, a
 * buffer not 8-byte aligned, a fixed_size_list child shorter than its
 * slots (apache-arrow JS with trailing null slots). */
int mw_ipc_rebatch(const uint8_t *p, size_t n, const mw_ipc_stream_t *st,
                   const mw_schema_t *target, const int *map, mw_buf_t *out, mw_err_t *err);

/* --- building blocks for the IPC file format (ipc_file.c) --- */
/* Build the Schema flatbuffer table of `s` into w->fbb (the caller starts
 * and finishes that buffer) exactly as the stream's schema message holds it.
 * *off = the table's offset. */
int mw_ipc_writer_schema_table(mw_ipc_writer_t *w, const mw_schema_t *s, uint32_t *off);
/* Decode a Schema table (e.g. the one in an IPC file footer) into *out
 * (initialised here; empty on failure). lim may be NULL. */
int mw_ipc_schema_table_decode(const mw_fbr_t *r, const mw_fbt_t *t, const mw_ipc_limits_t *lim,
                               mw_schema_t *out, mw_err_t *err);

/* --- WAL helpers --- */
/* The schema's `writer_epoch` as an unsigned decimal; missing or malformed
 * -> -EBADMSG. */
int mw_ipc_writer_epoch(const mw_schema_t *schema, uint64_t *epoch, mw_err_t *err);
/* True when the schema carries fence_sentinel = "true". */
bool mw_ipc_is_fence_sentinel(const mw_schema_t *schema);
/* Append a fence sentinel stream for `epoch` (zero fields, zero batches,
 * metadata {fence_sentinel: "true", writer_epoch: epoch}; 200 bytes). */
int mw_ipc_fence_sentinel(uint64_t epoch, mw_buf_t *out, mw_err_t *err);

#endif
