/*
 * arrowframe.h — one ARROW frame of the producers' line protocol -> rows of
 * the table's batch. Pure: no loop, no I/O, no state between calls.
 *
 * Owns the rule that turns the frame's bytes (an Arrow IPC stream: schema
 * message, record batches, EOS; see lance/ipc.h) into rows for the table
 * (docs/protocol.md 1.5):
 *   - the frame's columns are matched to the table's by name; order is free;
 *   - a matched column must have the table's type (fixed_size_list: and its
 *     dimension); nullability is checked on the values, not the declaration;
 *   - a table column the frame lacks is null, `_tombstone` is false; a
 *     missing not-null column is refused;
 *   - a frame column the table lacks is refused unless ignore_unknown_fields;
 *     a column name given twice is refused;
 *   - every record batch is appended, in order; a frame without rows is
 *     refused.
 *
 * Pass-through (docs/protocol.md 1.5): on success out->wal_ipc holds the
 * frame's record batch messages re-framed for the table's WAL stream (its
 * bodies as they are, a false `_tombstone` bitmap appended when the frame
 * has none) whenever mw_ipc_rebatch allows it: no dictionaries, no body
 * compression, no column the table lacks, no absent column but
 * `_tombstone`, aligned buffers, full fixed_size_list children. Otherwise
 * it stays empty and the WAL encodes the decoded rows. The messages start
 * at out->wal_ipc_head (MW_ARROWFRAME_WAL_HEAD_BYTES of room before them).
 *
 * Errors: 0 on success (out->n_rows rows appended), else a negative errno,
 * *code set to the reply class and err to the reply message, which starts
 * with "ARROW frame: ":
 *   parse     the IPC decoder refused the bytes (-EBADMSG, -ENOTSUP, -EFBIG)
 *             "ARROW frame: <decoder reason naming the byte offset>"
 *   schema    -EBADMSG  column "x" (not null) is missing / unknown column "x" /
 *             duplicate column "x" / no rows
 *   type      -EBADMSG  column "x" is utf8, the table has int64 (fixed_size_list:
 *             "fixed_size_list<float32, 4>") / column "x" row N: invalid UTF-8 /
 *             column "x" has N nulls, the table's is not null / invalid values
 *   internal  -ENOMEM, -EFBIG (the batch is full)
 * On failure `out` holds no rows (its memory is kept).
 */
#ifndef MW_NET_ARROWFRAME_H
#define MW_NET_ARROWFRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "lance/batch.h"
#include "lance/ipc.h"
#include "net/lineproto.h"

/* Room left before the pass-through messages (mw_batch_t.wal_ipc_head) for
 * the WAL stream's schema message, so a frame that makes a WAL entry alone
 * is written from out->wal_ipc without copying its messages (shard/wal.h
 * mw_wal_add_ipc). A schema message of ~40 plain columns fits; a larger one
 * makes the WAL copy the messages instead. */
#define MW_ARROWFRAME_WAL_HEAD_BYTES 4096

typedef struct mw_arrowframe_opts {
  bool ignore_unknown_fields;
  const mw_ipc_limits_t *lim; /* NULL = mw_ipc_limits_default */
  mw_ipc_reader_t *reader;    /* reused decoder (no allocation once warm);
                               * NULL = a one-shot mw_ipc_decode */
  bool no_pass_through;       /* leave out->wal_ipc empty (see below) */
} mw_arrowframe_opts_t;

/* Decode frame p[0, n) into `out`, a batch initialised for `table`
 * (mw_batch_init) holding no rows. opts may be NULL (defaults). */
int mw_arrowframe_decode(const uint8_t *p, size_t n, const mw_schema_t *table,
                         const mw_arrowframe_opts_t *opts, mw_batch_t *out, mw_lp_code_t *code,
                         mw_err_t *err);

#endif
