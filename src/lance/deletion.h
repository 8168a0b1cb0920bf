/*
 * deletion.h — Lance deletion files (`_deletions/<name>.bin`, BITMAP kind).
 *
 * Owns (lance-files.md §5): the encoding of a fragment's deleted row offsets
 * as a RoaringBitmap in the portable serialisation, no-run variant (cookie
 * 12346, what roaring-rs writes for Lance), its checked decoding, and the
 * file name `{fragment_id}-{read_version}-{id}.bin` (id = random u64) under
 * the dataset's `_deletions/` folder.
 *
 * Decoding validates every header field, offset and container before the
 * bytes reach CRoaring (whose 0.2.x reader trusts container cardinalities),
 * so corrupt input gives -EBADMSG with the byte offset, never a crash. The
 * run-container variant (cookie 12347) is read too, since other writers may
 * produce it; we never write it.
 *
 * The ARROW_ARRAY kind (`.arrow`) is read too: LanceDB 0.39.0 writes it for
 * every `Table.delete`/`update` on a base table (an Arrow IPC *file*, one
 * non-null UInt32 column `row_id`, ZSTD body compression), and compaction
 * must union such files with its own deletions. It is never written: the
 * union is written as a `.bin`.
 *
 * Errors: negative errno; -EBADMSG malformed file, -EINVAL bad argument
 * (offsets not strictly ascending, bad name), -ENOTSUP a `.arrow` name given
 * to mw_deletion_name_parse (callers then use the kind from the manifest),
 * -ENOMEM.
 */
#ifndef MW_LANCE_DELETION_H
#define MW_LANCE_DELETION_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"

#define MW_DELETION_DIR "_deletions"
/* Largest .bin accepted: 2^15 bitmap containers (2^31 rows) plus headers. */
#define MW_DELETION_MAX_BYTES ((size_t)300 << 20)
/* "18446744073709551615-18446744073709551615-18446744073709551615.bin" + NUL */
#define MW_DELETION_NAME_BYTES 67

/* Append the serialisation of offsets[0..n) (strictly ascending) to out. */
int mw_deletion_encode(const uint32_t *offsets, size_t n, mw_buf_t *out, mw_err_t *err);

/* Decode a .bin into a malloc'd ascending array *offsets of *n entries
 * (NULL when *n is 0; free() it). Every offset must be < max_rows (the
 * fragment's physical row count), else -EBADMSG. */
int mw_deletion_decode(const uint8_t *p, size_t len, uint64_t max_rows, uint32_t **offsets,
                       size_t *n, mw_err_t *err);

/* Decode a `.arrow` (ARROW_ARRAY) file the same way: ascending, unique,
 * every offset < max_rows. Lance writes the offsets in any order; they are
 * sorted here, and a repeated offset is -EBADMSG. */
int mw_deletion_arrow_decode(const uint8_t *p, size_t len, uint64_t max_rows, uint32_t **offsets,
                             size_t *n, mw_err_t *err);

/* Union of two ascending arrays into a malloc'd ascending array (*out NULL
 * when both are empty). Returns the count or -ENOMEM / -EINVAL (an input
 * not strictly ascending). */
int64_t mw_deletion_union(const uint32_t *a, size_t na, const uint32_t *b, size_t nb,
                          uint32_t **out);

/* Number of deleted rows recorded in a .bin, after the same validation. */
int mw_deletion_cardinality(const uint8_t *p, size_t len, uint64_t *card, mw_err_t *err);

/* "{fragment_id}-{read_version}-{id}.bin" into out (>= MW_DELETION_NAME_BYTES).
 * Returns the length or -EINVAL when out is too small. */
int mw_deletion_name_format(uint64_t fragment_id, uint64_t read_version, uint64_t id, char *out,
                            size_t out_len);
/* Parse a file name (no folder). Decimal u64s without sign or leading zeros
 * (except "0"); `.arrow` names give -ENOTSUP, anything else malformed
 * -EINVAL. */
int mw_deletion_name_parse(const char *name, uint64_t *fragment_id, uint64_t *read_version,
                           uint64_t *id);

#endif
