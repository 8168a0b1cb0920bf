/*
 * readback.h — before memwald publishes a file it wrote, it reads it back.
 *
 * Owns: the checks between encoding a file and publishing it (issue 26,
 * defence in depth). A data file LanceDB cannot read, once a manifest names
 * it, makes every row of the table unreadable to LanceDB; so each file an
 * SSTable or a compaction is about to publish is decoded again with
 * memwald's own readers, on the thread that encoded it, and compared with
 * what was meant to be written. What does not decode, or decodes to other
 * rows, is refused: the caller publishes nothing (the rows stay in the WAL
 * and the MemTable, or the SSTables stay uncompacted) and tries again later.
 *
 * What is compared:
 *   data file   (mw_readback_data_file) the row count, the fields (names,
 *               types, nullability, Lance ids), then each column decoded
 *               alone (mw_datafile_read_column, as strict as LanceDB's
 *               reader) and compared with the source batches row by row:
 *               validity, and each valid row's value — fixed-width bytes,
 *               bool bits, string bytes, vector items with their validity,
 *               list lengths and items, struct children, at every depth.
 *               Slots under a null row hold no value and are skipped. Runs
 *               of valid rows compare in bulk (one memcmp for a fixed-width
 *               or string run): exact, and cheaper than hashing both sides.
 *   bloom       (mw_readback_bloom) decodes, and every row's PK hash probes
 *               positive in it.
 *   deletions   (mw_readback_deletions) decodes to exactly the offsets.
 *   PK index    (mw_readback_pk_index) page_data holds every physical row
 *               once (ids 0..n-1 each once), keys ascending, key i the
 *               written key of row ids[i]; page_lookup has one row per 8192
 *               keys, whose min and max are its page's first and last key.
 *   vector index (mw_readback_vindex) both files pass mw_vindex_check (as
 *               Lance's IVF_HNSW_SQ reader needs them), with the distance,
 *               node count, entry point and SQ bounds built, and name
 *               exactly the rows with a vector, each once
 *               (mw_vindex_check_rows).
 *
 * The cost (docs/engine.md, "Read-back before publishing"): one more decode
 * of each file, one pass over the rows.
 *
 * Errors: -EBADMSG = refused, with a reason naming the file and what is
 * wrong ("read-back of 1a2b_gen_3/data/x.lance refused: column 'v' row 17:
 * the value read back differs from the one written"); -ENOMEM (nothing was
 * checked: the caller fails the attempt without counting a refusal).
 */
#ifndef MW_LANCE_READBACK_H
#define MW_LANCE_READBACK_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"
#include "lance/batch.h"
#include "lance/vindex_file.h"

/* `data[0..len)`, a data file named `name` (for messages), must hold exactly
 * the rows of batches[0..n) (schema `schema`, in order). */
int mw_readback_data_file(const mw_schema_t *schema, const mw_batch_t *const *batches, size_t n,
                          const uint8_t *data, size_t len, const char *name, mw_err_t *err);

/* The bloom filter `p[0..len)` must decode and hold every hashes[0..n). */
int mw_readback_bloom(const uint8_t *p, size_t len, const uint64_t *hashes, int64_t n,
                      const char *name, mw_err_t *err);

/* The deletion file `p[0..len)` of a fragment of `rows` rows must decode to
 * exactly offsets[0..n) (ascending). */
int mw_readback_deletions(const uint8_t *p, size_t len, uint64_t rows, const uint32_t *offsets,
                          size_t n, const char *name, mw_err_t *err);

/* The _pk_index files of an SSTable whose physical rows have the keys
 * `keys` (field `pk`), fragment 0; `dir` names the SSTable in messages. */
int mw_readback_pk_index(const mw_field_t *pk, const mw_column_t *keys, const mw_buf_t *page_data,
                         const mw_buf_t *page_lookup, const char *dir, mw_err_t *err);

/* The vector index `built` from `in` (its files in _indices/ of `dir`, for
 * messages). */
int mw_readback_vindex(const mw_vindex_input_t *in, const mw_vindex_t *built, const char *dir,
                       mw_err_t *err);

#endif
