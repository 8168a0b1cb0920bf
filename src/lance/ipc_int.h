/*
 * ipc_int.h — what the Arrow IPC stream codec's files share (private to
 * ipc_encode.c, ipc_decode.c, ipc_rebatch.c and ipc_wal.c; the public API
 * is ipc.h).
 *
 * One stream message, as all three read or write it:
 *
 *   ff ff ff ff  78 01 00 00   continuation, metadata length 376
 *   10 00 00 00 ...            flatbuffer Message{version V5 (4), header
 *                              type (HDR_*), header table, bodyLength}
 *   ...                        body: bodyLength bytes of buffers
 *
 * Here: the flatbuffer enum values of Schema.fbs/Message.fbs the codec
 * uses, the decoder's state (dec_t) and a batch body's cursor (body_t),
 * which rebatch frames messages with, and the few functions one file lends
 * another (message framing, the Message table, node and buffer counts).
 */
#ifndef MW_LANCE_IPC_INT_H
#define MW_LANCE_IPC_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lance/ipc.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the IPC codec assumes a little-endian host");

enum { HDR_SCHEMA = 1, HDR_DICT = 2, HDR_BATCH = 3 };
/* Arrow flatbuffer Type union ids (Schema.fbs). */
enum {
  TY_INT = 2, TY_FLOAT = 3, TY_BINARY = 4, TY_UTF8 = 5, TY_BOOL = 6, TY_DECIMAL = 7,
  TY_DATE = 8, TY_TIME = 9, TY_TIMESTAMP = 10, TY_LIST = 12, TY_STRUCT = 13,
  TY_FIXED_BINARY = 15, TY_FSL = 16, TY_LARGE_BINARY = 19, TY_LARGE_UTF8 = 20,
  TY_LARGE_LIST = 21,
};
enum { DATE_DAY = 0, DATE_MS = 1 };
enum { META_V4 = 3, META_V5 = 4 };
enum { CODEC_LZ4 = 0, CODEC_ZSTD = 1 };
#define MAX_META_ENTRIES 4096
#define MAX_BATCHES_DEFAULT ((size_t)1 << 20)

static inline size_t pad64(size_t n) { return (n + 63) & ~(size_t)63; }
static inline size_t pad_to(size_t n, size_t align) { return (n + align - 1) & ~(align - 1); }

/* The decoder's state over one stream (ipc_decode.c; ipc_rebatch.c frames with it). */
typedef struct dec {
  const uint8_t *p;
  size_t n;
  mw_ipc_limits_t lim;
  mw_err_t *err;
  size_t copy_budget;   /* bytes we may still copy out of the input */
  size_t zstd_budget;   /* bytes we may still decompress */
  size_t str_budget;    /* bytes of names and metadata we may still copy */
  mw_ipc_reader_t *rd;  /* zstd context and scratch buffers */
  bool view;            /* buffers as views into p where they can be (decode_view) */
  /* dictionary-encoded top-level fields of this stream (materialised) */
  struct dict {
    int64_t id;
    size_t field;          /* top-level field index */
    uint8_t index_width;   /* bytes: 1, 2, 4, 8 */
    bool index_signed;
    bool have;             /* a dictionary batch arrived */
    mw_schema_t vs;        /* one field "values" of the field's type */
    mw_column_t values;
  } dicts[MW_IPC_MAX_DICTS];
  size_t n_dicts;
  struct dict *pending;    /* set by read_type for the field being read */
  size_t dict_budget;      /* bytes materialising dictionaries may still add */
} dec_t;

/* One record batch's body: its Buffer and FieldNode vectors and where the
 * next of each is read (ipc_decode.c). */
typedef struct body {
  const mw_fbr_t *r;
  size_t bufs;      /* position of the Buffer structs in r */
  size_t n_bufs, next_buf;
  size_t nodes;
  size_t n_nodes, next_node;
  const uint8_t *p; /* body bytes */
  size_t len;
  size_t pos;       /* absolute offset of the body */
  bool zstd;
} body_t;

/* Field nodes and buffers of a field's tree (ipc_encode.c). */
void mw_ipc_count_field(const mw_field_t *f, size_t *nodes, size_t *bufs);
/* The Message table around a header (ipc_encode.c). */
uint32_t mw_ipc_fb_message(mw_fbb_t *b, uint8_t hdr_type, uint32_t header, int64_t body_len);
/* Frame one message at *pos. Returns 1 (message), 0 (EOS) or -errno (ipc_decode.c). */
int mw_ipc_frame(dec_t *d, size_t *pos, mw_fbr_t *r, mw_fbt_t *msg, uint8_t *ht, mw_fbt_t *hdr, body_t *b);
/* A decimal u64 of 1..20 digits; -EBADMSG otherwise (ipc_wal.c). */
int mw_ipc_parse_u64(const uint8_t *p, size_t n, uint64_t *v);

#endif
