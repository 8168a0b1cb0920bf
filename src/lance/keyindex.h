/*
 * keyindex.h — memwald's key index of one base-table data file: which row
 * offsets hold which primary keys, so that compaction finds the base rows a
 * merge supersedes without reading the base table.
 *
 * Owns the file `_memwald/keys/<data file stem>.keys`, one per data file
 * that holds the primary-key column (data files never change, so neither
 * does the index). It is a Lance 2.2 data file written by datafile.h:
 *
 *   columns   key    (the PK type, not null)   every physical row's key,
 *             offset (uint32, not null)        sorted by (key, offset)
 *   metadata  memwald.keyindex = "1", memwald.keyindex.rows = physical rows,
 *             memwald.keyindex.data_file = the data file's name
 *   global buffer 1: a split-block bloom filter (bloom.h) over the PK hashes,
 *             sized for the keys at MW_KEYINDEX_FPP
 *
 * Lance ignores the `_memwald/` folder (it is not one of a dataset's), and
 * the index is only a cache: a missing one is rebuilt from the data file.
 * A decoded index is checked whole (sorted, every offset once, every key in
 * the bloom), so a corrupt file is refused rather than trusted.
 *
 * Cost: a lookup of m keys probes the bloom m times and binary-searches the
 * few that pass: O(m + hits·log n). Memory: the keys, 4 bytes per row and
 * about 1.8 bytes per row of bloom.
 *
 * Errors: negative errno with a reason in *err: -EBADMSG (not a key index,
 * unsorted, an offset out of range or repeated, a key missing from the
 * bloom), -EINVAL (a key type that cannot be indexed, a column shorter than
 * its length), -ENOMEM, -EFBIG.
 */
#ifndef MW_LANCE_KEYINDEX_H
#define MW_LANCE_KEYINDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"
#include "lance/batch.h"
#include "lance/bloom.h"

#define MW_KEYINDEX_DIR "_memwald/keys"
#define MW_KEYINDEX_EXT ".keys"
#define MW_KEYINDEX_FPP 0.001
#define MW_KEYINDEX_MAX_ROWS ((int64_t)UINT32_MAX)
#define MW_KEYINDEX_NAME_BYTES 160

typedef struct mw_keyindex {
  mw_schema_t schema;       /* {key: PK type, offset: uint32} */
  mw_batch_t batch;         /* both columns, sorted by (key, offset) */
  const uint32_t *offsets;  /* batch.cols[1] values */
  int64_t n;                /* = physical rows */
  mw_bloom_t bloom;
  char data_file[MW_KEYINDEX_NAME_BYTES];
} mw_keyindex_t;

/* "_memwald/keys/<stem>.keys" for data file `data_file` ("x.lance"). */
int mw_keyindex_name(const char *data_file, char *out, size_t out_len);

/* Append the index of a data file whose physical rows have the keys
 * keys[0..length): row i is offset i. */
int mw_keyindex_build(const mw_field_t *pk, const mw_column_t *keys, const char *data_file,
                      mw_buf_t *out, mw_err_t *err);

/* Decode and check a whole index for key field `pk` (type must match).
 * Free with mw_keyindex_free, also after a failure. */
int mw_keyindex_decode(const uint8_t *p, size_t n, const mw_field_t *pk, mw_keyindex_t *out,
                       mw_err_t *err);
/* The same for bytes mw_keyindex_build just returned to this process:
 * the whole-index check (a sort check, a hash and a bloom probe per key)
 * is skipped, since nothing stored them in between. */
int mw_keyindex_decode_built(const uint8_t *p, size_t n, const mw_field_t *pk, mw_keyindex_t *out,
                             mw_err_t *err);
void mw_keyindex_free(mw_keyindex_t *ki);

/* Every offset whose key is one of probe[0..n) (hashes[i] = its PK hash)
 * is appended to *out as u32, ascending and unique over this call. Returns
 * how many were appended, or -ENOMEM. */
int64_t mw_keyindex_find(const mw_keyindex_t *ki, const mw_field_t *pk, const mw_column_t *probe,
                         const uint64_t *hashes, int64_t n, mw_buf_t *out);

/* The same for probe keys in n_runs columns, each ascending (ties
 * allowed) and without nulls: a merge's keys (lsm_merge.h), one column per
 * shard. A merge-walk of both sorted sides, galloping over the index's
 * keys: a probe below the index's current key costs one comparison and no
 * bloom probe, so keys that interleave with the fragment's (many
 * producers, each with its own key range) cost about K + hits·log n
 * comparisons, and keys that miss the fragment's range about log K +
 * log n. Unsorted runs give wrong answers: check them once
 * (mw_keyindex_sorted). Returns how many were appended, or -ENOMEM. */
int64_t mw_keyindex_find_sorted(const mw_keyindex_t *ki, const mw_field_t *pk, const mw_column_t *const *runs,
                                size_t n_runs, mw_buf_t *out);

/* Whether probe is ascending (ties allowed) and free of nulls. */
bool mw_keyindex_sorted(const mw_field_t *pk, const mw_column_t *probe);

#endif
