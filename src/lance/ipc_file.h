/*
 * ipc_file.h — the Arrow IPC *file* format (random-access, "ARROW1" magic).
 *
 * Owns: wrapping an IPC stream (ipc.h) into the file layout of the Arrow
 * columnar spec and checking that layout on the way back:
 *
 *   "ARROW1" 00 00 | stream: schema, record batches, EOS | Footer | i32 len | "ARROW1"
 *
 * The footer repeats the schema (readers such as arrow-rs FileReader take the
 * schema, including its metadata, from the footer, not from the stream) and
 * lists one Block {offset, metaDataLength, bodyLength} per record batch.
 * Zone write seeds (zone_seed.h) are stored as such files inside Lance data
 * files' global buffers.
 *
 * Decoding accepts what arrow-rs, pyarrow and arrow-js write: the stream
 * section may end with or without the EOS marker; the footer's schema must
 * equal the stream's (fields, types, nullability and every metadata entry),
 * and its blocks must name exactly the stream's record batch messages, in
 * order. Dictionaries are refused (-ENOTSUP); the stream codec (ipc.h)
 * materialises them.
 *
 * Errors: negative errno; -EBADMSG with a reason naming the byte offset (in
 * the file) for malformed input, -ENOTSUP for valid Arrow we do not decode,
 * -EFBIG over a limit, -ENOMEM.
 */
#ifndef MW_LANCE_IPC_FILE_H
#define MW_LANCE_IPC_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"
#include "lance/batch.h"
#include "lance/ipc.h"

#define MW_IPC_FILE_MAGIC "ARROW1"
#define MW_IPC_FILE_MAGIC_BYTES 6
/* 8 (magic + pad) + 8 (EOS) + 4 (footer length) + 6 (magic): an empty stream
 * still needs a schema message and a footer, so real files are larger. */
#define MW_IPC_FILE_MIN_BYTES 26
#define MW_IPC_FILE_MAX_FOOTER_BYTES ((size_t)64 << 20)

/* Append a complete IPC file holding `schema` and batches[0..n) to `out`
 * (offsets in the footer are relative to out's length on entry). On failure
 * `out` is restored. w is a reusable stream writer (ipc.h). */
int mw_ipc_file_encode(mw_ipc_writer_t *w, const mw_schema_t *schema,
                       const mw_batch_t *const *batches, size_t n_batches, mw_buf_t *out,
                       mw_err_t *err);

/* Decode a whole IPC file into *out (free with mw_ipc_stream_free; empty on
 * failure). lim may be NULL (ipc.h defaults). */
int mw_ipc_file_decode(const uint8_t *p, size_t n, const mw_ipc_limits_t *lim,
                       mw_ipc_stream_t *out, mw_err_t *err);

#endif
