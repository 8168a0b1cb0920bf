/*
 * zone_seed.h — zone write seeds (../shared/seeds/002 proposal; lance-files.md §8).
 *
 * Owns: the per-zone column statistics saved inside a Lance data file, both
 * directions:
 *   - building version 1 seeds while rows are written (mw_seed_builder_*),
 *     one builder per column, fed in file row order across batches;
 *   - the locator in the data file's schema metadata,
 *     `lance.seed.<column> = "<buffer_index>:<rows_per_zone>"`;
 *   - decoding a seed global buffer (a complete Arrow IPC file, ipc_file.h)
 *     of version 0 or 1, with every structural rule checked
 *     (mw_seed_decode), and checking a decoded seed against the column's
 *     real values (mw_seed_check_column).
 *
 * Version 1 record (one row per zone of rows_per_zone rows; only the last
 * zone may be shorter):
 *
 *   min, max            value_type, nullable   bounds on non-null, non-NaN values
 *   null_count          uint32                 exact
 *   nan_count           uint32                 exact, NaNs of either sign
 *   negative_nan_count  uint32                 exact, NaNs with the sign bit set
 *   zone_length         uint64                 physical rows summarized
 *   schema metadata     version = "1", seed_null_bitmap = hex(roaring) (optional)
 *
 * Ordering is Arrow Rust's: integers numerically, floats by IEEE total order
 * (-inf < ... < -0.0 < +0.0 < ... < +inf; NaNs are excluded from bounds),
 * bool false < true, utf8/binary bytewise (memcmp, then the shorter first),
 * decimal128 as the signed 128-bit integer it stores (one scale per column,
 * so unscaled order is value order), fixed_size_binary bytewise over its
 * width (Rust's `[u8]` order, which Arrow's min/max of such arrays use).
 * Bounds our builder writes are
 * exact; a bound is null (unknown) when the zone has no ordinary value
 * (zone_length = null_count + nan_count) and, always, for types without
 * supported bounds (lists, fixed-size lists, structs, and any type without a descriptor), whose
 * counts then describe the outer column.
 *
 * Types are described by mw_seed_type_of(): a kind (signed, unsigned, float,
 * bool, bytes, fixed-width bytes, none) and a width. A column type added to batch.h gets null
 * bounds (always correct) until it gets a descriptor there.
 *
 * Errors: negative errno with a reason in *err: -EBADMSG for a malformed or
 * inconsistent seed (naming the zone, column and field), -ENOTSUP for a seed
 * version other than 0 or 1, -EINVAL for bad arguments, -EFBIG over a limit,
 * -ENOMEM. mw_seed_check_column returns -EBADMSG when the seed does not
 * describe the data (naming the zone, the row and the statistic).
 */
#ifndef MW_LANCE_ZONE_SEED_H
#define MW_LANCE_ZONE_SEED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"
#include "lance/batch.h"
#include "lance/ipc.h"

#define MW_SEED_META_PREFIX "lance.seed."
#define MW_SEED_VERSION_KEY "version"
#define MW_SEED_NULL_BITMAP_KEY "seed_null_bitmap"
#define MW_SEED_DEFAULT_ROWS_PER_ZONE 8192
/* zone_length of a whole zone must fit the uint32 counts. */
#define MW_SEED_MAX_ROWS_PER_ZONE ((uint64_t)1 << 30)
/* A seed describes at most this many zones (a 2^32-row file in zones of 8). */
#define MW_SEED_MAX_ZONES ((size_t)1 << 29)
/* seed_null_bitmap is written only while its roaring serialisation stays
 * this small ("where cheap": it is hex text inside two copies of the IPC
 * schema, one in the stream and one in the footer). */
#define MW_SEED_NULL_BITMAP_MAX_BYTES ((size_t)64 << 10)
#define MW_SEED_MAX_BYTES ((size_t)1 << 30)
/* "lance.seed." + column name; names are limited by batch.h callers. */
#define MW_SEED_LOCATOR_BYTES 48

typedef enum mw_seed_kind {
  MW_SEED_KIND_NONE = 0, /* no bounds: min/max always null */
  MW_SEED_KIND_SINT,     /* little-endian two's complement, width 1..16 */
  MW_SEED_KIND_UINT,     /* little-endian unsigned, width 1..8 */
  MW_SEED_KIND_FLOAT,    /* IEEE 754, width 2, 4 or 8; NaN counts apply */
  MW_SEED_KIND_BOOL,     /* bitmap values */
  MW_SEED_KIND_BYTES,    /* utf8/binary with int32 offsets */
  MW_SEED_KIND_FIXED_BYTES, /* fixed_size_binary: `width` bytes a value, memcmp order */
} mw_seed_kind_t;

typedef struct mw_seed_type {
  mw_seed_kind_t kind;
  uint32_t width;        /* bytes per value for SINT/UINT/FLOAT/FIXED_BYTES */
} mw_seed_type_t;

/* The per-type descriptor (the one place a new column type is taught). */
mw_seed_type_t mw_seed_type_of(const mw_field_t *f);

/* --- locator: lance.seed.<column> = "<buffer_index>:<rows_per_zone>" --- */
typedef struct mw_seed_locator {
  uint32_t buffer_index;
  uint64_t rows_per_zone;
  bool has_field_id;     /* a third ":<field id>" segment (newer Lance writers) */
  int32_t field_id;
} mw_seed_locator_t;

/* Parse the metadata value. Decimal without sign or leading zeros; buffer
 * index >= 1 (0 is the FileDescriptor); rows_per_zone in
 * [1, MW_SEED_MAX_ROWS_PER_ZONE]. -EBADMSG otherwise. */
int mw_seed_locator_parse(const uint8_t *v, size_t n, mw_seed_locator_t *out, mw_err_t *err);
/* "<buffer_index>:<rows_per_zone>" into out; returns its length or -ENOSPC. */
int mw_seed_locator_format(uint32_t buffer_index, uint64_t rows_per_zone, char *out,
                           size_t out_len);

/* --- builder (version 1) --- */
typedef struct mw_seed_builder {
  mw_field_t field;          /* copy of the column's field (name, type; borrowed strings) */
  mw_seed_type_t ty;
  uint64_t rows_per_zone;
  uint64_t rows;             /* rows fed so far */
  /* the open zone */
  uint64_t z_rows, z_nulls, z_nans, z_neg_nans;
  bool z_have;               /* an ordinary value was seen */
  uint8_t z_min[16], z_max[16]; /* fixed width and bool (0/1) */
  int64_t z_min_row, z_max_row; /* bytes: the row holding the bound */
  mw_buf_t z_minb, z_maxb;   /* bytes: copies, taken when a zone closes */
  /* null offsets for seed_null_bitmap (u32 LE); dropped past the limit */
  mw_buf_t nulls;
  bool nulls_ok;
  /* the seed record batch being built */
  mw_schema_t schema;
  mw_batch_t batch;
  bool ready;
} mw_seed_builder_t;

/* rows_per_zone in [1, MW_SEED_MAX_ROWS_PER_ZONE]. The field's name and
 * metadata are borrowed until mw_seed_builder_free. */
int mw_seed_builder_init(mw_seed_builder_t *b, const mw_field_t *field, uint64_t rows_per_zone,
                         mw_err_t *err);
/* Feed rows [start, start + count) of column c (of b's field), after every
 * row fed before. */
int mw_seed_builder_add(mw_seed_builder_t *b, const mw_column_t *c, int64_t start, int64_t count,
                        mw_err_t *err);
/* Close the last zone and append the seed's IPC file to out. The builder
 * can then only be freed. */
int mw_seed_builder_finish(mw_seed_builder_t *b, mw_ipc_writer_t *w, mw_buf_t *out,
                           mw_err_t *err);
void mw_seed_builder_free(mw_seed_builder_t *b);

/* --- every column of a data file at once (SSTables, compaction's fragments) --- */
typedef struct mw_seed_set {
  mw_schema_t schema;  /* the input schema plus lance.seed.<column> locators */
  mw_buf_t *bufs;      /* one IPC file per column, in column order */
  size_t n;
} mw_seed_set_t;

/* One v1 seed per column of `schema` over the rows of batches[0..n) in
 * order, to be written as global buffers first_index, first_index+1, ...
 * (1 when they are the file's only extra buffers); x->schema is what the
 * data file's FileDescriptor must hold. Free with mw_seed_set_free, also
 * after a failure. */
int mw_seed_set_build(mw_seed_set_t *x, const mw_schema_t *schema, const mw_batch_t *const *batches,
                      size_t n, uint64_t rows_per_zone, uint32_t first_index, mw_err_t *err);
void mw_seed_set_free(mw_seed_set_t *x);

/* --- decoded seed --- */
typedef struct mw_seed {
  int version;                 /* 0 or 1 */
  uint64_t rows_per_zone;
  mw_ipc_stream_t ipc;         /* the decoded IPC file */
  size_t n_zones;
  const mw_field_t *value_field; /* the `min` field (its type is the column's) */
  const mw_column_t *min, *max;
  const uint32_t *null_count, *nan_count, *negative_nan_count; /* last: v1 only, else NULL */
  const uint64_t *zone_length;
  uint64_t total_rows;         /* sum of zone_length */
  bool has_null_bitmap;
  uint32_t *null_offsets;      /* ascending; malloc'd */
  size_t n_null_offsets;
} mw_seed_t;

/* Decode and validate one seed buffer. `field` (may be NULL) is the data
 * file's column: when given, the seed's value type must equal it.
 * `file_rows` (UINT64_MAX = unknown) must equal the sum of zone lengths.
 * Free with mw_seed_free, also after a failure. */
int mw_seed_decode(const uint8_t *p, size_t n, const mw_field_t *field, uint64_t rows_per_zone,
                   uint64_t file_rows, mw_seed_t *s, mw_err_t *err);
void mw_seed_free(mw_seed_t *s);

/* Check a decoded seed against the column's values (all file rows): exact
 * counts, bounds containing every ordinary value, the bitmap equal to the
 * null positions. */
int mw_seed_check_column(const mw_seed_t *s, const mw_field_t *field, const mw_column_t *c,
                         mw_err_t *err);

/* Compare two values of one kind/width (for bytes: (p, n) pairs; for bool a
 * single byte 0/1). <0, 0, >0 in Arrow Rust order. Floats must not be NaN. */
int mw_seed_compare(mw_seed_type_t t, const uint8_t *a, size_t an, const uint8_t *b, size_t bn);

#endif
