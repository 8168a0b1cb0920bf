/*
 * route.h — shard routing: the bucket hash and LanceDB's shard UUIDs.
 *
 * Owns (memwal.md §8.3, §8.4):
 *   - the Spark/Iceberg Murmur3 x86_32 bucket hash (seed 0, Spark's
 *     leftover-byte variant) and bucket = (hash & 0x7fffffff) % num_buckets;
 *   - shard UUIDs: UUID v5 (SHA-1) under namespace
 *     4c534d57-5249-5445-5f53-484152443031 ("LSMWRITE_SHARD01") of the names
 *     `unsharded`, `bucket-<n>` and `identity-<raw scalar bytes>`;
 *   - formatting/parsing of UUIDs as 36-char lowercase hyphenated text.
 * UUIDs are 16 bytes in RFC (big-endian) order, as stored in ShardManifest
 * field 11.
 *
 * Errors: negative errno; -EINVAL for bad arguments (num_buckets 0 or >
 * MW_ROUTE_MAX_BUCKETS, row out of range, null identity value, bad UUID
 * text), -ENOTSUP for a type the transform does not accept.
 */
#ifndef MW_LANCE_ROUTE_H
#define MW_LANCE_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "lance/batch.h"

/* InitializeMemWalBuilder accepts 1..=1024 buckets. */
#define MW_ROUTE_MAX_BUCKETS 1024
/* Identity names: "identity-" + value; limit the value bytes. */
#define MW_ROUTE_MAX_IDENTITY_BYTES 4096
/* 36 characters + NUL. */
#define MW_UUID_STR_BYTES 37

/* --- Murmur3 (Spark/Iceberg bucket transform) --- */
int32_t mw_murmur3_int(int32_t v);
int32_t mw_murmur3_long(int64_t v);
int32_t mw_murmur3_bytes(const void *p, size_t n);
/* Bucket of a hash; num_buckets must be in 1..MW_ROUTE_MAX_BUCKETS. */
uint32_t mw_route_bucket_of(int32_t hash, uint32_t num_buckets);

/* Bucket hash of row `row` of column c (field f gives the type): bool,
 * int32, int64, uint32, uint64, float32, float64 (±0 -> 0, any NaN ->
 * canonical NaN), utf8, binary. A null gives hash 0. */
int mw_route_hash_value(const mw_field_t *f, const mw_column_t *c, int64_t row, int32_t *hash);
/* Buckets of rows [0, n_rows) into out (uint32 per row). */
int mw_route_bucket_rows(const mw_field_t *f, const mw_column_t *c, int64_t n_rows,
                         uint32_t num_buckets, uint32_t *out, mw_err_t *err);

/* --- shard UUIDs --- */
void mw_shard_uuid_unsharded(uint8_t out[16]);
void mw_shard_uuid_bucket(uint32_t bucket, uint8_t out[16]);
/* Identity shard from the raw scalar bytes (ints LE at own width, utf8 raw,
 * bool one byte). */
int mw_shard_uuid_identity_raw(const void *value, size_t n, uint8_t out[16]);
/* The raw scalar bytes of row `row` (ints LE at own width, bool 1 byte,
 * utf8 raw): the identity shard name suffix, and the value of a
 * ShardFieldEntry (§8.5). Returns the length, or -EINVAL (null, row out of
 * range, longer than cap), -ENOTSUP (float, binary, fsl). */
int mw_route_scalar_bytes(const mw_field_t *f, const mw_column_t *c, int64_t row, uint8_t *out,
                          size_t cap, mw_err_t *err);
/* An identity value's raw scalar bytes (as above) as people write it in a
 * shard name "identity-<text>": ints in decimal, bool true/false, utf8 as
 * is; the one place both directions live, so status shows exactly what
 * memwalctl accepts. Text: writes at most cap bytes incl. NUL (a longer
 * string is cut), returns the full length or -ENOTSUP (not an identity
 * type) / -EINVAL (n wrong for the type). Parse: returns the raw length,
 * -EINVAL when text is no value of the type (or longer than cap), -ENOTSUP
 * as above. */
int mw_route_scalar_text(mw_type_t type, const uint8_t *raw, size_t n, char *out, size_t cap);
int mw_route_scalar_parse(mw_type_t type, const char *text, uint8_t *out, size_t cap);
/* Identity shard of row `row` of a column: int32/int64/uint32/uint64, bool,
 * utf8. Null -> -EINVAL; float/binary/fsl -> -ENOTSUP. */
int mw_shard_uuid_identity(const mw_field_t *f, const mw_column_t *c, int64_t row,
                           uint8_t out[16], mw_err_t *err);

/* --- UUID text --- */
/* Lowercase "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" + NUL. */
void mw_shard_uuid_format(const uint8_t uuid[16], char out[MW_UUID_STR_BYTES]);
/* Exactly 36 characters in that shape (either case); -EINVAL otherwise. */
int mw_shard_uuid_parse(const char *s, uint8_t out[16]);

#endif
