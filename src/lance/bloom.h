/*
 * bloom.h — the primary-key hash, flush-time dedup and bloom_filter.bin.
 *
 * Owns three pure computations the SSTable flush runs over every memtable
 * (memwal.md §6.2 step 4, §6.4, §6.5; lance-files.md §7.2):
 *
 *   1. mw_pk_hash_*: the 64-bit PK hash of each row, equal to Lance's
 *      compute_row_hash: Rust DefaultHasher (SipHash-1-3, key (0,0)) fed, per
 *      PK column in order, one byte is_null and, for a non-null value, its
 *      Rust `Hash` bytes (i32/i64 LE, str = bytes ‖ 0xFF, [u8] = u64 LE
 *      length ‖ bytes; large_utf8 and large_binary the same). Verified byte
 *      for byte against bloom files Lance 12 wrote, for every key type it
 *      accepts and can flush.
 *   2. mw_dedup_deletions: from the row hashes in insert order, the sorted
 *      row offsets superseded by a later row with the same hash.
 *   3. mw_bloom_*: a Parquet split-block bloom filter (Lance's Sbbf) with one
 *      insert per row hash; its encoding is the raw blocks, no header.
 *
 * Errors: negative errno; -EINVAL for a caller bug (bad size, no PK column),
 * -ENOTSUP for a type Lance 12 refuses or cannot flush as a PK (uint32,
 * uint64, bool, floats, the narrow, temporal and fixed-size types),
 * -EBADMSG for a malformed bloom file, -ENOMEM. An optional mw_err_t gets
 * the reason.
 */
#ifndef MW_LANCE_BLOOM_H
#define MW_LANCE_BLOOM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"
#include "lance/batch.h"

/* --- SipHash-1-3 (Rust's DefaultHasher) --- */

/* Streaming state; the result depends only on the concatenation of the bytes
 * written, as with Rust's SipHasher13. */
typedef struct mw_sip13 {
  uint64_t v0, v1, v2, v3;
  uint64_t tail;   /* pending bytes, little-endian */
  uint32_t ntail;  /* 0..7 */
  uint64_t total;  /* bytes written so far */
} mw_sip13_t;

void mw_sip13_init(mw_sip13_t *s, uint64_t k0, uint64_t k1);
void mw_sip13_write(mw_sip13_t *s, const void *p, size_t n);
uint64_t mw_sip13_finish(const mw_sip13_t *s);
/* One-shot: SipHash-1-3 of n bytes with key (k0, k1). */
uint64_t mw_siphash13(uint64_t k0, uint64_t k1, const void *p, size_t n);

/* --- PK hash --- */

/* Hash rows [0, n_rows) of the PK columns cols[0..n_cols) (composite PK in
 * PK order; each column has at least n_rows rows) into out[0..n_rows).
 * Supported: int32, int64, utf8, large_utf8, binary, large_binary (Lance
 * 12's key types); any other type gives -ENOTSUP. */
int mw_pk_hash_columns(const mw_field_t *const *fields, const mw_column_t *const *cols,
                       size_t n_cols, int64_t n_rows, uint64_t *out, mw_err_t *err);
/* Same over a batch's PK fields (pk_position 1, 2, ... in order); out holds
 * b->n_rows hashes. -EINVAL when the schema has no PK. */
int mw_pk_hash_batch(const mw_batch_t *b, uint64_t *out, mw_err_t *err);

/* What Lance 12 inserts into bloom_filter.bin is its memtable's row hash,
 * which for large_utf8 and large_binary keys feeds only the is_null byte:
 * every row of such a key gets SipHash13(00) (Lance's blooms for them have
 * 8 bits set, tests/lance/data/bloom_types), while its dedup still tells
 * the keys apart. memwald keeps value hashes for dedup (mw_pk_hash_*) and
 * writes Lance's bloom: true, with *hash, when every row of key field f has
 * that one bloom hash. */
bool mw_pk_bloom_constant(const mw_field_t *f, uint64_t *hash);

/* --- dedup (memwal.md §6.2 step 4) --- */

#define MW_DEDUP_MAX_ROWS ((int64_t)INT32_MAX)
/* Rows per partition above which the input is partitioned by hash. */
#define MW_DEDUP_PART_ROWS 4096

/* hashes[0..n) in insert order. Writes to out_offsets (room for n entries)
 * the ascending offsets of every row whose hash appears again later (the
 * newest row per key survives). Returns the count, or -errno (-EINVAL,
 * -ENOMEM). Memory: about 12 bytes per row plus n/8 bytes, plus a set of
 * 16 bytes per row of the largest partition (~64 KiB for uniform hashes). */
int64_t mw_dedup_deletions(const uint64_t *hashes, int64_t n, uint32_t *out_offsets);

/* The same with scratch memory kept between calls (one per flusher). */
typedef struct mw_dedup {
  mw_buf_t scratch;
} mw_dedup_t;
#define MW_DEDUP_INIT {MW_BUF_INIT}
int64_t mw_dedup_run(mw_dedup_t *d, const uint64_t *hashes, int64_t n, uint32_t *out_offsets);
void mw_dedup_free(mw_dedup_t *d);

/* --- split-block bloom filter --- */

#define MW_BLOOM_BLOCK_BYTES 32
#define MW_BLOOM_MIN_BYTES 32
#define MW_BLOOM_MAX_BYTES ((size_t)128 << 20)
/* The size Lance writes for every SSTable: with_ndv_fpp(8192, 0.00057). */
#define MW_BLOOM_SST_NDV 8192
#define MW_BLOOM_SST_FPP 0.00057
#define MW_BLOOM_SST_BYTES 32768

typedef struct mw_bloom {
  uint32_t *words;  /* n_blocks * 8 words, host order */
  size_t n_blocks;  /* a power of two when made by mw_bloom_init */
} mw_bloom_t;

/* Sbbf::with_ndv_fpp sizing: bits = floor(-8·ndv / ln(1 − fpp^(1/8))),
 * bytes = bits / 8 clamped to [32, 128 MiB] and rounded up to a power of
 * two. (8192, 0.00057) -> 131239 bits -> 16404 bytes -> 32768. Returns 0 when
 * fpp is not in [0, 1). */
size_t mw_bloom_bytes_for(uint64_t ndv, double fpp);

/* An empty filter of n_bytes (a power of two in [32, 128 MiB]). */
int mw_bloom_init(mw_bloom_t *bf, size_t n_bytes);
void mw_bloom_free(mw_bloom_t *bf);
void mw_bloom_clear(mw_bloom_t *bf);
void mw_bloom_insert(mw_bloom_t *bf, uint64_t hash);
void mw_bloom_insert_many(mw_bloom_t *bf, const uint64_t *hashes, size_t n);
bool mw_bloom_check(const mw_bloom_t *bf, uint64_t hash);
/* Append the file bytes (n_blocks × 8 u32 LE) to out. */
int mw_bloom_encode(const mw_bloom_t *bf, mw_buf_t *out);
/* Load a bloom_filter.bin; its length must be a non-zero multiple of 32 and
 * at most MW_BLOOM_MAX_BYTES (Lance reads any multiple of 32). */
int mw_bloom_decode(mw_bloom_t *bf, const uint8_t *p, size_t len, mw_err_t *err);

#endif
