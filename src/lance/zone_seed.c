/*
 * zone_seed.c — zone write seeds, version 1 writer and version 0/1 reader
 * (see zone_seed.h; the proposal is ../shared/seeds/002_824728b6da531c39.txt).
 *
 * Where a seed lives: data-file schema metadata (FileDescriptor, global
 * buffer 0) holds `lance.seed.v = "1:8192"`, and global buffer 1 holds an
 * Arrow IPC file. For a float64 column v of 10 000 rows with one null at row
 * 3, a -NaN at row 5 and values 0.5 .. 9999.5 otherwise, that file decodes to
 *
 *   schema metadata {version: "1", seed_null_bitmap: "3a3000000100000000000000100000000300"}
 *   min      max      null_count nan_count negative_nan_count zone_length
 *   0.5      8191.5   1          1         1                  8192
 *   8192.5   9999.5   0          0         0                  1808
 *
 * (the bitmap is the roaring portable serialisation of {3}: cookie 12346,
 * one container, key 0, cardinality-1 0, offset 16, then the u16 value 3).
 *
 * Builder: rows arrive in file order, in runs that never cross a zone
 * boundary (mw_seed_builder_add splits them). Fixed-width kinds scan with
 * one specialised loop per (kind, width) that keeps the bounds as integer
 * keys (floats by IEEE total order, like Rust's f64::total_cmp); strings
 * keep the row of the current bound and copy it when the call ends, so a
 * zone costs one copy per bound per batch, not per improvement. A closed zone
 * becomes one row of the seed batch, which the IPC file writer encodes at
 * the end.
 *
 * Reader: every count is checked with 64-bit sums of 32-bit values (no
 * overflow possible) and the zone-length sum with an overflow check; the
 * bitmap's offsets are checked against the zones' null counts.
 */
#include "lance/zone_seed.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lance/deletion.h"
#include "lance/ipc_file.h"

_Static_assert(MW_SEED_MAX_ROWS_PER_ZONE <= UINT32_MAX, "a whole zone's counts fit uint32");
_Static_assert(MW_SEED_DEFAULT_ROWS_PER_ZONE <= MW_SEED_MAX_ROWS_PER_ZONE, "default zone size");

enum { F_MIN = 0, F_MAX, F_NULLS, F_NANS, F_NEG_NANS, F_LEN };
#define V0_FIELDS 5
#define V1_FIELDS 6
/* offsets kept for the bitmap before giving up on it (4 bytes each) */
#define MAX_NULL_OFFSETS ((size_t)1 << 20)

typedef __int128 skey_t;

mw_seed_type_t mw_seed_type_of(const mw_field_t *f) {
  assert(f != NULL);
  /* from the type table's ordering class: integers, decimal128 and the
   * temporal types (signed ints of their width, 1..16 bytes), floats of 2, 4
   * or 8 bytes, bool, the variable-width byte strings and fixed_size_binary
   * (bytes of the field's width). Nested types get no bounds (null bounds
   * are always correct). */
  const mw_type_info_t *ti = mw_type_info(f->type);
  switch (ti->order) {
    case MW_ORDER_SIGNED:
      if (ti->layout == MW_LAYOUT_FIXED && ti->width <= 16) return (mw_seed_type_t){MW_SEED_KIND_SINT, ti->width};
      break;
    case MW_ORDER_UNSIGNED: return (mw_seed_type_t){MW_SEED_KIND_UINT, ti->width};
    case MW_ORDER_FLOAT: return (mw_seed_type_t){MW_SEED_KIND_FLOAT, ti->width};
    case MW_ORDER_BOOL: return (mw_seed_type_t){MW_SEED_KIND_BOOL, 1};
    case MW_ORDER_BYTES:
      if (ti->layout == MW_LAYOUT_VAR) return (mw_seed_type_t){MW_SEED_KIND_BYTES, 0};
      if (ti->layout == MW_LAYOUT_FIXED && f->byte_width > 0)
        return (mw_seed_type_t){MW_SEED_KIND_FIXED_BYTES, (uint32_t)f->byte_width};
      break;
    case MW_ORDER_NONE: break;
  }
  return (mw_seed_type_t){MW_SEED_KIND_NONE, 0};
}

/* ------------------------------------------------------------ value keys */

static uint64_t load_bits(const uint8_t *p, unsigned w) {
  uint64_t v = 0;
  memcpy(&v, p, w); /* little-endian host (ipc_int.h asserts it) */
  return v;
}

static bool float_nan(uint64_t bits, unsigned w) {
  switch (w) {
    case 2: return (bits & 0x7c00) == 0x7c00 && (bits & 0x03ff);
    case 4: return (bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu);
    default: return (bits & 0x7ff0000000000000ull) == 0x7ff0000000000000ull &&
                    (bits & 0x000fffffffffffffull);
  }
}

static bool float_neg(uint64_t bits, unsigned w) { return (bits >> (8 * w - 1)) & 1; }

/* IEEE total order as a signed key (Rust total_cmp: flip the magnitude bits
 * of negative values). */
static skey_t float_key(uint64_t bits, unsigned w) {
  switch (w) {
    case 2: {
      int16_t s = (int16_t)(uint16_t)bits;
      return (skey_t)(int16_t)(s ^ (int16_t)((uint16_t)(s >> 15) >> 1));
    }
    case 4: {
      int32_t s = (int32_t)(uint32_t)bits;
      return (skey_t)(int32_t)(s ^ (int32_t)((uint32_t)(s >> 31) >> 1));
    }
    default: {
      int64_t s = (int64_t)bits;
      return (skey_t)(s ^ (int64_t)((uint64_t)(s >> 63) >> 1));
    }
  }
}

static skey_t fixed_key(mw_seed_type_t t, const uint8_t *p) {
  unsigned w = t.width;
  if (t.kind == MW_SEED_KIND_FLOAT) return float_key(load_bits(p, w), w);
  if (t.kind == MW_SEED_KIND_UINT) return (skey_t)load_bits(p, w);
  if (w == 16) {
    skey_t k;
    memcpy(&k, p, 16);
    return k;
  }
  uint64_t v = load_bits(p, w);
  unsigned sh = 64 - 8 * w;
  return (skey_t)((int64_t)(v << sh) >> sh);
}

int mw_seed_compare(mw_seed_type_t t, const uint8_t *a, size_t an, const uint8_t *b, size_t bn) {
  if (t.kind == MW_SEED_KIND_BYTES || t.kind == MW_SEED_KIND_FIXED_BYTES) {
    size_t m = an < bn ? an : bn;
    int c = m ? memcmp(a, b, m) : 0;
    if (c != 0) return c;
    return an < bn ? -1 : an > bn;
  }
  if (t.kind == MW_SEED_KIND_BOOL) return (int)a[0] - (int)b[0];
  assert(t.kind != MW_SEED_KIND_NONE);
  skey_t ka = fixed_key(t, a), kb = fixed_key(t, b);
  return ka < kb ? -1 : ka > kb;
}

/* Borrow row i's value: fixed width (fixed_size_binary too) in place, bool
 * as tmp[0], bytes via offsets. */
static const uint8_t *value_at(mw_seed_type_t t, const mw_column_t *c, int64_t i, size_t *n,
                               uint8_t *tmp) {
  switch (t.kind) {
    case MW_SEED_KIND_BOOL:
      tmp[0] = mw_bit_get(c->values.data, i);
      *n = 1;
      return tmp;
    case MW_SEED_KIND_BYTES: return mw_column_bytes(c, i, n);
    default:
      *n = t.width;
      return c->values.data + (size_t)i * t.width;
  }
}

/* ----------------------------------------------------------------- locator */

static int parse_dec(const uint8_t *p, size_t n, uint64_t max, uint64_t *out) {
  if (n == 0 || n > 20 || (n > 1 && p[0] == '0')) return -EBADMSG;
  uint64_t v = 0;
  for (size_t i = 0; i < n; i++) {
    if (p[i] < '0' || p[i] > '9') return -EBADMSG;
    uint64_t d = (uint64_t)(p[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return -EBADMSG;
    v = v * 10 + d;
  }
  if (v > max) return -EBADMSG;
  *out = v;
  return 0;
}

int mw_seed_locator_parse(const uint8_t *v, size_t n, mw_seed_locator_t *out, mw_err_t *err) {
  assert(out != NULL);
  assert(v != NULL || n == 0);
  memset(out, 0, sizeof *out);
  const uint8_t *c1 = n ? memchr(v, ':', n) : NULL;
  if (c1 == NULL) return mw_err_set(err, -EBADMSG, "seed locator \"%.*s\": no ':'", (int)(n > 40 ? 40 : n), v);
  size_t a = (size_t)(c1 - v), rest = n - a - 1;
  const uint8_t *c2 = memchr(c1 + 1, ':', rest);
  size_t b = c2 ? (size_t)(c2 - c1 - 1) : rest;
  uint64_t idx, rpz, fid = 0;
  if (parse_dec(v, a, UINT32_MAX, &idx) < 0 || idx == 0)
    return mw_err_set(err, -EBADMSG, "seed locator \"%.*s\": buffer index is not a decimal in 1..2^32-1",
                      (int)(n > 40 ? 40 : n), v);
  if (parse_dec(c1 + 1, b, MW_SEED_MAX_ROWS_PER_ZONE, &rpz) < 0 || rpz == 0)
    return mw_err_set(err, -EBADMSG, "seed locator \"%.*s\": rows_per_zone is not a decimal in 1..%" PRIu64,
                      (int)(n > 40 ? 40 : n), v, MW_SEED_MAX_ROWS_PER_ZONE);
  if (c2 != NULL && parse_dec(c2 + 1, rest - b - 1, INT32_MAX, &fid) < 0)
    return mw_err_set(err, -EBADMSG, "seed locator \"%.*s\": field id is not a decimal",
                      (int)(n > 40 ? 40 : n), v);
  out->buffer_index = (uint32_t)idx;
  out->rows_per_zone = rpz;
  out->has_field_id = c2 != NULL;
  out->field_id = (int32_t)fid;
  return 0;
}

int mw_seed_locator_format(uint32_t buffer_index, uint64_t rows_per_zone, char *out,
                           size_t out_len) {
  assert(buffer_index >= 1);
  assert(rows_per_zone >= 1);
  assert(rows_per_zone <= MW_SEED_MAX_ROWS_PER_ZONE);
  int n = snprintf(out, out_len, "%" PRIu32 ":%" PRIu64, buffer_index, rows_per_zone);
  return n < 0 || (size_t)n >= out_len ? -ENOSPC : n;
}

/* ----------------------------------------------------------------- builder */

/* min and max are the column's own type, every parameter and child kept
 * (copied through a two-field view of the column's field). */
static int seed_schema(mw_schema_t *s, const mw_field_t *vf, bool v1) {
  static const char *const names[] = {"min", "max"};
  mw_field_t two[2] = {*vf, *vf};
  two[0].meta = two[1].meta = (mw_kvs_t){0};
  mw_schema_t view = {.fields = two, .n_fields = 2};
  mw_schema_init(s);
  int rc = mw_schema_copy(s, &view);
  if (rc < 0) return rc;
  for (int i = 0; i < 2; i++) {
    mw_field_t *f = &s->fields[i];
    free(f->name);
    if ((f->name = strdup(names[i])) == NULL) return -ENOMEM;
    f->nullable = true;
    f->id = -1;
    f->pk_position = 0;
  }
  const char *counts[] = {"null_count", "nan_count", "negative_nan_count"};
  for (int i = 0; i < (v1 ? 3 : 2); i++)
    if ((rc = mw_schema_add(s, counts[i], MW_T_UINT32, false)) < 0) return rc;
  rc = mw_schema_add(s, "zone_length", MW_T_UINT64, false);
  if (rc < 0) return rc;
  return v1 ? mw_kvs_set(&s->meta, MW_SEED_VERSION_KEY, "1", 1) : 0;
}

int mw_seed_builder_init(mw_seed_builder_t *b, const mw_field_t *field, uint64_t rows_per_zone,
                         mw_err_t *err) {
  assert(b != NULL);
  assert(field != NULL);
  memset(b, 0, sizeof *b);
  mw_schema_init(&b->schema);
  if (rows_per_zone == 0 || rows_per_zone > MW_SEED_MAX_ROWS_PER_ZONE)
    return mw_err_set(err, -EINVAL, "seed for %s: rows_per_zone %" PRIu64 " not in 1..%" PRIu64,
                      field->name, rows_per_zone, MW_SEED_MAX_ROWS_PER_ZONE);
  b->field = *field;
  b->ty = mw_seed_type_of(field);
  b->rows_per_zone = rows_per_zone;
  b->nulls_ok = true;
  int rc = seed_schema(&b->schema, field, true);
  if (rc == 0) rc = mw_batch_init(&b->batch, &b->schema);
  if (rc < 0) {
    mw_schema_free(&b->schema);
    return mw_err_set(err, rc, "seed for %s: out of memory", field->name);
  }
  b->ready = true;
  return 0;
}

void mw_seed_builder_free(mw_seed_builder_t *b) {
  if (b == NULL) return;
  if (b->ready) mw_batch_free(&b->batch);
  mw_schema_free(&b->schema);
  mw_buf_free(&b->z_minb);
  mw_buf_free(&b->z_maxb);
  mw_buf_free(&b->nulls);
  memset(b, 0, sizeof *b);
}

/* State of one scan over rows [s, s + n) of a column, inside one zone. */
typedef struct scan {
  mw_seed_builder_t *b;
  const mw_column_t *c;
  int64_t s, n;
  uint64_t nulls, nans, neg;
} scan_t;

static void note_null(scan_t *x, int64_t i) {
  mw_seed_builder_t *b = x->b;
  x->nulls++;
  if (!b->nulls_ok) return;
  uint64_t row = b->rows + (uint64_t)(i - x->s);
  if (row > UINT32_MAX || b->nulls.len / 4 >= MAX_NULL_OFFSETS || mw_buf_put_u32le(&b->nulls, (uint32_t)row) < 0) {
    b->nulls_ok = false; /* the bitmap is optional: drop it rather than fail */
    mw_buf_free(&b->nulls);
  }
}

static void count_nulls_only(scan_t *x) {
  const mw_column_t *c = x->c;
  if (c->null_count == 0 || c->validity.len == 0) return;
  for (int64_t i = x->s; i < x->s + x->n; i++)
    if (!mw_bit_get(c->validity.data, i)) note_null(x, i);
}

/* One loop per (kind, width): keys in registers, the bound rows remembered. */
#define DEF_SCAN(NAME, T, IS_FLOAT, KEY)                                                   \
  static void NAME(scan_t *x, skey_t *mn, skey_t *mx, int64_t *imn, int64_t *imx, bool *have) { \
    const mw_column_t *c = x->c;                                                           \
    const uint8_t *val = c->null_count ? c->validity.data : NULL;                          \
    const uint8_t *base = c->values.data;                                                  \
    unsigned w = sizeof(T);                                                                \
    for (int64_t i = x->s; i < x->s + x->n; i++) {                                         \
      if (val && !mw_bit_get(val, i)) {                                                    \
        note_null(x, i);                                                                   \
        continue;                                                                          \
      }                                                                                    \
      T raw;                                                                               \
      memcpy(&raw, base + (size_t)i * sizeof(T), sizeof(T));                               \
      if (IS_FLOAT && float_nan((uint64_t)raw, w)) {                                       \
        x->nans++;                                                                         \
        x->neg += float_neg((uint64_t)raw, w);                                             \
        continue;                                                                          \
      }                                                                                    \
      skey_t k = KEY;                                                                       \
      if (!*have) {                                                                        \
        *mn = *mx = k;                                                                     \
        *imn = *imx = i;                                                                   \
        *have = true;                                                                      \
      } else if (k < *mn) {                                                                \
        *mn = k;                                                                           \
        *imn = i;                                                                          \
      } else if (k > *mx) {                                                                \
        *mx = k;                                                                           \
        *imx = i;                                                                          \
      }                                                                                    \
    }                                                                                      \
    (void)w;                                                                               \
  }

DEF_SCAN(scan_i32, uint32_t, false, (skey_t)(int32_t)raw)
DEF_SCAN(scan_i64, uint64_t, false, (skey_t)(int64_t)raw)
DEF_SCAN(scan_u32, uint32_t, false, (skey_t)raw)
DEF_SCAN(scan_u64, uint64_t, false, (skey_t)raw)
DEF_SCAN(scan_f32, uint32_t, true, float_key(raw, 4))
DEF_SCAN(scan_f64, uint64_t, true, float_key(raw, 8))

/* Any other fixed width (a descriptor added for a new type). */
static void scan_generic(scan_t *x, skey_t *mn, skey_t *mx, int64_t *imn, int64_t *imx, bool *have) {
  const mw_column_t *c = x->c;
  mw_seed_type_t t = x->b->ty;
  for (int64_t i = x->s; i < x->s + x->n; i++) {
    if (!mw_column_valid(c, i)) {
      note_null(x, i);
      continue;
    }
    const uint8_t *p = c->values.data + (size_t)i * t.width;
    if (t.kind == MW_SEED_KIND_FLOAT && float_nan(load_bits(p, t.width), t.width)) {
      x->nans++;
      x->neg += float_neg(load_bits(p, t.width), t.width);
      continue;
    }
    skey_t k = fixed_key(t, p);
    if (!*have) {
      *mn = *mx = k;
      *imn = *imx = i;
      *have = true;
    } else if (k < *mn) {
      *mn = k;
      *imn = i;
    } else if (k > *mx) {
      *mx = k;
      *imx = i;
    }
  }
}

static void scan_fixed(scan_t *x) {
  mw_seed_builder_t *b = x->b;
  mw_seed_type_t t = b->ty;
  assert(t.width >= 1);
  assert(t.width <= sizeof b->z_min);
  skey_t mn = 0, mx = 0;
  int64_t imn = -1, imx = -1;
  bool have = false;
  if (t.kind == MW_SEED_KIND_SINT && t.width == 4) scan_i32(x, &mn, &mx, &imn, &imx, &have);
  else if (t.kind == MW_SEED_KIND_SINT && t.width == 8) scan_i64(x, &mn, &mx, &imn, &imx, &have);
  else if (t.kind == MW_SEED_KIND_UINT && t.width == 4) scan_u32(x, &mn, &mx, &imn, &imx, &have);
  else if (t.kind == MW_SEED_KIND_UINT && t.width == 8) scan_u64(x, &mn, &mx, &imn, &imx, &have);
  else if (t.kind == MW_SEED_KIND_FLOAT && t.width == 4) scan_f32(x, &mn, &mx, &imn, &imx, &have);
  else if (t.kind == MW_SEED_KIND_FLOAT && t.width == 8) scan_f64(x, &mn, &mx, &imn, &imx, &have);
  else scan_generic(x, &mn, &mx, &imn, &imx, &have);
  if (!have) return;
  const uint8_t *pmn = x->c->values.data + (size_t)imn * t.width;
  const uint8_t *pmx = x->c->values.data + (size_t)imx * t.width;
  if (!b->z_have || mn < fixed_key(t, b->z_min)) memcpy(b->z_min, pmn, t.width);
  if (!b->z_have || mx > fixed_key(t, b->z_max)) memcpy(b->z_max, pmx, t.width);
  b->z_have = true;
}

static void scan_bool(scan_t *x) {
  mw_seed_builder_t *b = x->b;
  const mw_column_t *c = x->c;
  bool any_false = false, any_true = false;
  int64_t i = x->s, end = x->s + x->n;
  if (c->null_count == 0) { /* no nulls: whole bytes at a time between the edges */
    for (; i < end && (i & 7); i++) {
      if (mw_bit_get(c->values.data, i)) any_true = true;
      else any_false = true;
    }
    for (; i + 8 <= end && !(any_true && any_false); i += 8) {
      uint8_t v = c->values.data[i >> 3];
      any_true |= v != 0;
      any_false |= v != 0xFF;
    }
    if (any_true && any_false) i = end;
  }
  for (; i < end; i++) {
    if (!mw_column_valid(c, i)) {
      note_null(x, i);
      continue;
    }
    if (mw_bit_get(c->values.data, i)) any_true = true;
    else any_false = true;
  }
  if (!any_false && !any_true) return;
  uint8_t lo = any_false ? 0 : 1, hi = any_true ? 1 : 0;
  if (!b->z_have || lo < b->z_min[0]) b->z_min[0] = lo;
  if (!b->z_have || hi > b->z_max[0]) b->z_max[0] = hi;
  b->z_have = true;
}

/* Bytewise order (memcmp, then length), inlined for the scan. */
static inline int bytes_cmp(const uint8_t *a, size_t an, const uint8_t *b, size_t bn) {
  size_t m = an < bn ? an : bn;
  int c = m ? memcmp(a, b, m) : 0;
  return c ? c : (an > bn) - (an < bn);
}

/* Row i's bytes: through the offsets, or `width` bytes in place. */
static inline const uint8_t *row_bytes(mw_seed_type_t t, const mw_column_t *c, int64_t i, size_t *n) {
  if (t.kind == MW_SEED_KIND_BYTES) return mw_column_bytes(c, i, n);
  *n = t.width;
  return c->values.data + (size_t)i * t.width;
}

/* utf8/binary and fixed_size_binary. */
static int scan_bytes(scan_t *x) {
  mw_seed_builder_t *b = x->b;
  const mw_column_t *c = x->c;
  const mw_seed_type_t t = b->ty;
  assert(t.kind == MW_SEED_KIND_BYTES || t.kind == MW_SEED_KIND_FIXED_BYTES);
  const uint8_t *mn = b->z_minb.data, *mx = b->z_maxb.data;
  size_t mnn = b->z_minb.len, mxn = b->z_maxb.len;
  bool have = b->z_have, from_col_mn = false, from_col_mx = false;
  for (int64_t i = x->s; i < x->s + x->n; i++) {
    if (!mw_column_valid(c, i)) {
      note_null(x, i);
      continue;
    }
    size_t n;
    const uint8_t *p = row_bytes(t, c, i, &n);
    if (!have) {
      mn = mx = p;
      mnn = mxn = n;
      from_col_mn = from_col_mx = have = true;
    } else if (bytes_cmp(p, n, mn, mnn) < 0) {
      mn = p, mnn = n, from_col_mn = true;
    } else if (bytes_cmp(p, n, mx, mxn) > 0) {
      mx = p, mxn = n, from_col_mx = true;
    }
  }
  /* the column goes away after this call: keep copies of bounds taken from it */
  if (from_col_mn) {
    mw_buf_reset(&b->z_minb);
    if (mnn && mw_buf_append(&b->z_minb, mn, mnn) < 0) return -ENOMEM;
  }
  if (from_col_mx) {
    mw_buf_reset(&b->z_maxb);
    if (mxn && mw_buf_append(&b->z_maxb, mx, mxn) < 0) return -ENOMEM;
  }
  b->z_have = have;
  return 0;
}

static int append_bound(mw_seed_builder_t *b, size_t col, bool is_max) {
  mw_column_t *c = &b->batch.cols[col];
  const mw_field_t *f = &b->schema.fields[col];
  if (!b->z_have || b->ty.kind == MW_SEED_KIND_NONE) return mw_column_append_null(c, f);
  switch (b->ty.kind) {
    case MW_SEED_KIND_BOOL: return mw_column_append_bool(c, (is_max ? b->z_max : b->z_min)[0] != 0);
    case MW_SEED_KIND_BYTES: {
      const mw_buf_t *v = is_max ? &b->z_maxb : &b->z_minb;
      return mw_column_append_bytes(c, v->len ? v->data : (const uint8_t *)"", v->len);
    }
    case MW_SEED_KIND_FIXED_BYTES: {
      const mw_buf_t *v = is_max ? &b->z_maxb : &b->z_minb;
      assert(v->len == b->ty.width);
      return mw_column_append_fixed(c, v->data, v->len);
    }
    default: return mw_column_append_fixed(c, is_max ? b->z_max : b->z_min, b->ty.width);
  }
}

static int close_zone(mw_seed_builder_t *b) {
  assert(b->z_rows > 0);
  assert(b->z_rows <= b->rows_per_zone);
  assert(b->z_nulls + b->z_nans <= b->z_rows);
  assert(b->z_neg_nans <= b->z_nans);
  /* an ordinary value was seen exactly when the counts leave one */
  assert(b->z_have == (b->z_nulls + b->z_nans < b->z_rows) || b->ty.kind == MW_SEED_KIND_NONE);
  uint32_t counts[3] = {(uint32_t)b->z_nulls, (uint32_t)b->z_nans, (uint32_t)b->z_neg_nans};
  int rc = append_bound(b, F_MIN, false);
  if (rc == 0) rc = append_bound(b, F_MAX, true);
  for (int i = 0; rc == 0 && i < 3; i++) rc = mw_column_append_fixed(&b->batch.cols[F_NULLS + i], &counts[i], 4);
  if (rc == 0) rc = mw_column_append_fixed(&b->batch.cols[F_LEN], &b->z_rows, 8);
  if (rc < 0) return rc;
  b->batch.n_rows++;
  b->z_rows = b->z_nulls = b->z_nans = b->z_neg_nans = 0;
  b->z_have = false;
  mw_buf_reset(&b->z_minb);
  mw_buf_reset(&b->z_maxb);
  return 0;
}

int mw_seed_builder_add(mw_seed_builder_t *b, const mw_column_t *c, int64_t start, int64_t count,
                        mw_err_t *err) {
  assert(b != NULL);
  assert(b->ready);
  assert(c != NULL);
  assert(start >= 0);
  assert(count >= 0);
  assert(start + count <= c->length);
  while (count > 0) {
    uint64_t room = b->rows_per_zone - b->z_rows;
    int64_t n = (uint64_t)count < room ? count : (int64_t)room;
    scan_t x = {.b = b, .c = c, .s = start, .n = n};
    int rc = 0;
    switch (b->ty.kind) {
      case MW_SEED_KIND_NONE: count_nulls_only(&x); break;
      case MW_SEED_KIND_BOOL: scan_bool(&x); break;
      case MW_SEED_KIND_BYTES:
      case MW_SEED_KIND_FIXED_BYTES: rc = scan_bytes(&x); break;
      default: scan_fixed(&x); break;
    }
    if (rc < 0) return mw_err_set(err, rc, "seed for %s: out of memory", b->field.name);
    b->z_rows += (uint64_t)n;
    b->z_nulls += x.nulls;
    b->z_nans += x.nans;
    b->z_neg_nans += x.neg;
    b->rows += (uint64_t)n;
    start += n;
    count -= n;
    if (b->z_rows == b->rows_per_zone && (rc = close_zone(b)) < 0)
      return mw_err_set(err, rc, "seed for %s: out of memory", b->field.name);
  }
  return 0;
}

static int hex_append(mw_buf_t *out, const uint8_t *p, size_t n) {
  static const char digits[] = "0123456789abcdef";
  uint8_t *d = mw_buf_extend(out, 2 * n);
  if (d == NULL) return -ENOMEM;
  for (size_t i = 0; i < n; i++) {
    d[2 * i] = (uint8_t)digits[p[i] >> 4];
    d[2 * i + 1] = (uint8_t)digits[p[i] & 15];
  }
  return 0;
}

/* seed_null_bitmap, when the offsets were kept and serialise small enough. */
static int add_null_bitmap(mw_seed_builder_t *b, mw_err_t *err) {
  if (!b->nulls_ok) return 0;
  mw_buf_t ser = MW_BUF_INIT, hex = MW_BUF_INIT;
  size_t n = b->nulls.len / 4;
  const uint32_t *offs = (const uint32_t *)(const void *)b->nulls.data;
  int rc = n ? mw_deletion_encode(offs, n, &ser, err) : 0;
  if (rc == 0 && ser.len <= MW_SEED_NULL_BITMAP_MAX_BYTES) {
    rc = hex_append(&hex, ser.data, ser.len);
    if (rc == 0) rc = mw_kvs_set(&b->schema.meta, MW_SEED_NULL_BITMAP_KEY, hex.len ? hex.data : (const uint8_t *)"", hex.len);
  }
  mw_buf_free(&ser);
  mw_buf_free(&hex);
  return rc;
}

int mw_seed_builder_finish(mw_seed_builder_t *b, mw_ipc_writer_t *w, mw_buf_t *out,
                           mw_err_t *err) {
  assert(b != NULL);
  assert(b->ready);
  assert(w != NULL);
  assert(out != NULL);
  int rc = b->z_rows > 0 ? close_zone(b) : 0;
  if (rc == 0) rc = add_null_bitmap(b, err);
  if (rc < 0) return mw_err_set(err, rc, "seed for %s: cannot finish", b->field.name);
  assert(b->batch.n_rows == (int64_t)((b->rows + b->rows_per_zone - 1) / b->rows_per_zone));
  const mw_batch_t *bp = &b->batch;
  size_t at = out->len;
  /* a file without rows has no zones: its seed has no record batch */
  rc = mw_ipc_file_encode(w, &b->schema, &bp, b->batch.n_rows > 0, out, err);
  if (rc < 0) return mw_err_set(err, rc, "seed for %s: IPC file encode", b->field.name);
  size_t got = out->len - at;
  if (got > MW_SEED_MAX_BYTES) {
    out->len = at;
    return mw_err_set(err, -EFBIG, "seed for %s: %zu bytes", b->field.name, got);
  }
  return 0;
}

/* -------------------------------------------------------------- seed set */

void mw_seed_set_free(mw_seed_set_t *x) {
  if (x == NULL) return;
  for (size_t i = 0; x->bufs != NULL && i < x->n; i++) mw_buf_free(&x->bufs[i]);
  free(x->bufs);
  mw_schema_free(&x->schema);
  memset(x, 0, sizeof *x);
}

static int seed_column(const mw_field_t *f, size_t col, const mw_batch_t *const *batches, size_t n,
                       uint64_t rpz, mw_ipc_writer_t *w, mw_buf_t *out, mw_err_t *err) {
  mw_seed_builder_t sb;
  int rc = mw_seed_builder_init(&sb, f, rpz, err);
  for (size_t i = 0; rc == 0 && i < n; i++)
    rc = mw_seed_builder_add(&sb, &batches[i]->cols[col], 0, batches[i]->n_rows, err);
  if (rc == 0) rc = mw_seed_builder_finish(&sb, w, out, err);
  mw_seed_builder_free(&sb);
  return rc;
}

int mw_seed_set_build(mw_seed_set_t *x, const mw_schema_t *schema, const mw_batch_t *const *batches,
                      size_t n, uint64_t rows_per_zone, uint32_t first_index, mw_err_t *err) {
  assert(x != NULL);
  assert(schema != NULL);
  assert(batches != NULL || n == 0);
  assert(first_index >= 1);
  memset(x, 0, sizeof *x);
  mw_schema_init(&x->schema);
  size_t nf = schema->n_fields;
  if (nf > UINT32_MAX - first_index) return mw_err_set(err, -EINVAL, "seeds: %zu columns", nf);
  mw_ipc_writer_t w;
  mw_ipc_writer_init(&w);
  int rc = mw_schema_copy(&x->schema, schema);
  x->bufs = calloc(nf + 1, sizeof *x->bufs);
  if (rc == 0 && x->bufs == NULL) rc = -ENOMEM;
  x->n = nf;
  for (size_t c = 0; rc == 0 && c < nf; c++) {
    const mw_field_t *f = &schema->fields[c];
    if ((rc = seed_column(f, c, batches, n, rows_per_zone, &w, &x->bufs[c], err)) < 0) break;
    char val[MW_SEED_LOCATOR_BYTES];
    int vn = mw_seed_locator_format(first_index + (uint32_t)c, rows_per_zone, val, sizeof val);
    size_t kn = strlen(MW_SEED_META_PREFIX) + strlen(f->name) + 1;
    char *key = malloc(kn);
    if (vn < 0 || key == NULL) {
      free(key);
      rc = vn < 0 ? vn : -ENOMEM;
      break;
    }
    snprintf(key, kn, "%s%s", MW_SEED_META_PREFIX, f->name);
    rc = mw_kvs_set(&x->schema.meta, key, val, (size_t)vn);
    free(key);
  }
  mw_ipc_writer_free(&w);
  if (rc < 0) return mw_err_set(err, rc, "zone write seeds of %zu columns", nf);
  assert(x->schema.meta.n >= nf);
  return 0;
}

/* ----------------------------------------------------------------- decoder */

void mw_seed_free(mw_seed_t *s) {
  if (s == NULL) return;
  mw_ipc_stream_free(&s->ipc);
  free(s->null_offsets);
  memset(s, 0, sizeof *s);
}

static int check_schema(const mw_schema_t *sc, int version, const mw_field_t *field,
                        mw_err_t *err) {
  static const char *const names[] = {"min", "max", "null_count", "nan_count", "negative_nan_count", "zone_length"};
  size_t want = version == 1 ? V1_FIELDS : V0_FIELDS;
  if (sc->n_fields != want)
    return mw_err_set(err, -EBADMSG, "seed v%d holds %zu fields, the version %d schema has %zu", version,
                      sc->n_fields, version, want);
  for (size_t i = 0; i < want; i++) {
    size_t k = version == 0 && i == V0_FIELDS - 1 ? F_LEN : i; /* v0 has no negative_nan_count */
    const mw_field_t *f = &sc->fields[i];
    if (strcmp(f->name, names[k]) != 0)
      return mw_err_set(err, -EBADMSG, "seed v%d: field %zu is \"%s\", expected \"%s\"", version, i, f->name, names[k]);
    bool bound = k <= F_MAX;
    mw_type_t t = k == F_LEN ? MW_T_UINT64 : MW_T_UINT32;
    if (bound && !f->nullable)
      return mw_err_set(err, -EBADMSG, "seed v%d: field %s must be nullable", version, f->name);
    if (!bound && (f->type != t || f->nullable))
      return mw_err_set(err, -EBADMSG, "seed v%d: field %s must be a non-null %s", version, f->name, mw_type_name(t));
  }
  const mw_field_t *mn = &sc->fields[F_MIN], *mx = &sc->fields[F_MAX];
  if (!mw_field_type_equal(mn, mx))
    return mw_err_set(err, -EBADMSG, "seed v%d: min is %s, max is %s", version, mw_type_name(mn->type), mw_type_name(mx->type));
  if (field != NULL && !mw_field_type_equal(field, mn))
    return mw_err_set(err, -EBADMSG, "seed v%d: bounds are %s but column %s is %s", version,
                      mw_type_name(mn->type), field->name, mw_type_name(field->type));
  return 0;
}

static int seed_version(const mw_schema_t *sc, int *version, mw_err_t *err) {
  const mw_kv_t *kv = mw_kvs_get(&sc->meta, MW_SEED_VERSION_KEY);
  if (kv == NULL) {
    *version = 0;
    return 0;
  }
  if (kv->value_len == 1 && kv->value[0] == '1') {
    *version = 1;
    return 0;
  }
  return mw_err_set(err, -ENOTSUP, "seed version \"%.*s\" (this reader knows 0 and 1)",
                    (int)(kv->value_len > 20 ? 20 : kv->value_len), (const char *)kv->value);
}

static int hex_val(uint8_t c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static int read_bitmap(mw_seed_t *s, const mw_kv_t *kv, mw_err_t *err) {
  if (kv->value_len % 2)
    return mw_err_set(err, -EBADMSG, "seed_null_bitmap: odd hex length %zu", kv->value_len);
  size_t n = kv->value_len / 2;
  s->has_null_bitmap = true;
  if (n == 0) return 0;
  uint8_t *raw = malloc(n);
  if (raw == NULL) return -ENOMEM;
  for (size_t i = 0; i < n; i++) {
    int hi = hex_val(kv->value[2 * i]), lo = hex_val(kv->value[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      free(raw);
      return mw_err_set(err, -EBADMSG, "seed_null_bitmap: not hex at character %zu", 2 * i);
    }
    raw[i] = (uint8_t)(hi << 4 | lo);
  }
  mw_err_t inner = {0};
  int rc = mw_deletion_decode(raw, n, s->total_rows, &s->null_offsets, &s->n_null_offsets, &inner);
  free(raw);
  if (rc < 0) return mw_err_set(err, rc, "seed_null_bitmap: %s", inner.msg);
  return 0;
}

/* Null counts per zone agree with the bitmap. */
static int check_bitmap(const mw_seed_t *s, mw_err_t *err) {
  size_t k = 0;
  for (size_t z = 0; z < s->n_zones; z++) {
    uint64_t lo = z * s->rows_per_zone, hi = lo + s->zone_length[z], cnt = 0;
    while (k < s->n_null_offsets && s->null_offsets[k] < hi) {
      assert(s->null_offsets[k] >= lo);
      k++, cnt++;
    }
    if (cnt != s->null_count[z])
      return mw_err_set(err, -EBADMSG, "seed zone %zu: null_count %" PRIu32 " but seed_null_bitmap holds %" PRIu64 " nulls",
                        z, s->null_count[z], cnt);
  }
  assert(k == s->n_null_offsets); /* read_bitmap bounded offsets by total_rows */
  return 0;
}

static bool bound_nan(const mw_seed_t *s, mw_seed_type_t t, const mw_column_t *c, size_t z) {
  (void)s;
  return t.kind == MW_SEED_KIND_FLOAT && float_nan(load_bits(c->values.data + z * t.width, t.width), t.width);
}

static int check_zone(const mw_seed_t *s, mw_seed_type_t t, size_t z, mw_err_t *err) {
  uint64_t len = s->zone_length[z], nulls = s->null_count[z], nans = s->nan_count[z];
  bool last = z + 1 == s->n_zones;
  if (len == 0 || len > s->rows_per_zone || (!last && len != s->rows_per_zone))
    return mw_err_set(err, -EBADMSG, "seed zone %zu: zone_length %" PRIu64 " with rows_per_zone %" PRIu64 "%s",
                      z, len, s->rows_per_zone, last ? " (last zone)" : "");
  if (nulls + nans > len) /* two uint32 values: the sum cannot overflow uint64 */
    return mw_err_set(err, -EBADMSG, "seed zone %zu: null_count %" PRIu64 " + nan_count %" PRIu64 " exceed zone_length %" PRIu64,
                      z, nulls, nans, len);
  if (s->negative_nan_count && s->negative_nan_count[z] > nans)
    return mw_err_set(err, -EBADMSG, "seed zone %zu: negative_nan_count %" PRIu32 " exceeds nan_count %" PRIu64,
                      z, s->negative_nan_count[z], nans);
  if (t.kind != MW_SEED_KIND_FLOAT && (nans || (s->negative_nan_count && s->negative_nan_count[z])))
    return mw_err_set(err, -EBADMSG, "seed zone %zu: NaN counts on a non-float column", z);
  bool has_min = mw_column_valid(s->min, (int64_t)z), has_max = mw_column_valid(s->max, (int64_t)z);
  if (t.kind == MW_SEED_KIND_NONE) {
    if (s->version == 1 && (has_min || has_max))
      return mw_err_set(err, -EBADMSG, "seed zone %zu: bounds on a type without supported bounds", z);
    return 0;
  }
  bool min_nan = has_min && bound_nan(s, t, s->min, z), max_nan = has_max && bound_nan(s, t, s->max, z);
  if (s->version == 1 && (min_nan || max_nan))
    return mw_err_set(err, -EBADMSG, "seed zone %zu: NaN %s (version 1 bounds exclude NaN)", z, min_nan ? "min" : "max");
  if (has_min && has_max && !min_nan && !max_nan) {
    uint8_t ta, tb;
    size_t an, bn;
    const uint8_t *a = value_at(t, s->min, (int64_t)z, &an, &ta), *b = value_at(t, s->max, (int64_t)z, &bn, &tb);
    if (mw_seed_compare(t, a, an, b, bn) > 0) return mw_err_set(err, -EBADMSG, "seed zone %zu: min > max", z);
  }
  return 0;
}

int mw_seed_decode(const uint8_t *p, size_t n, const mw_field_t *field, uint64_t rows_per_zone,
                   uint64_t file_rows, mw_seed_t *s, mw_err_t *err) {
  assert(s != NULL);
  assert(p != NULL || n == 0);
  memset(s, 0, sizeof *s);
  mw_schema_init(&s->ipc.schema);
  if (rows_per_zone == 0 || rows_per_zone > MW_SEED_MAX_ROWS_PER_ZONE)
    return mw_err_set(err, -EINVAL, "seed: rows_per_zone %" PRIu64, rows_per_zone);
  if (n > MW_SEED_MAX_BYTES) return mw_err_set(err, -EFBIG, "seed of %zu bytes", n);
  s->rows_per_zone = rows_per_zone;
  int rc = mw_ipc_file_decode(p, n, NULL, &s->ipc, err);
  if (rc < 0) return rc;
  const mw_schema_t *sc = &s->ipc.schema;
  if ((rc = seed_version(sc, &s->version, err)) < 0) return rc;
  if ((rc = check_schema(sc, s->version, field, err)) < 0) return rc;
  if (s->ipc.n_batches > 1)
    return mw_err_set(err, -EBADMSG, "seed holds %zu record batches (readers take only the first)", s->ipc.n_batches);
  s->value_field = &sc->fields[F_MIN];
  mw_seed_type_t t = mw_seed_type_of(s->value_field);
  if (s->ipc.n_batches == 1) {
    const mw_batch_t *bt = &s->ipc.batches[0];
    if ((uint64_t)bt->n_rows > MW_SEED_MAX_ZONES) return mw_err_set(err, -EFBIG, "seed of %" PRId64 " zones", bt->n_rows);
    s->n_zones = (size_t)bt->n_rows;
    s->min = &bt->cols[F_MIN];
    s->max = &bt->cols[F_MAX];
    s->null_count = (const uint32_t *)(const void *)bt->cols[F_NULLS].values.data;
    s->nan_count = (const uint32_t *)(const void *)bt->cols[F_NANS].values.data;
    size_t len_col = s->version == 1 ? F_LEN : F_LEN - 1;
    if (s->version == 1) s->negative_nan_count = (const uint32_t *)(const void *)bt->cols[F_NEG_NANS].values.data;
    s->zone_length = (const uint64_t *)(const void *)bt->cols[len_col].values.data;
  }
  for (size_t z = 0; z < s->n_zones; z++) {
    if ((rc = check_zone(s, t, z, err)) < 0) return rc;
    if (__builtin_add_overflow(s->total_rows, s->zone_length[z], &s->total_rows))
      return mw_err_set(err, -EBADMSG, "seed zone %zu: zone lengths overflow uint64", z);
  }
  if (file_rows != UINT64_MAX && s->total_rows != file_rows)
    return mw_err_set(err, -EBADMSG, "seed zones cover %" PRIu64 " rows, the file holds %" PRIu64, s->total_rows, file_rows);
  const mw_kv_t *bm = mw_kvs_get(&sc->meta, MW_SEED_NULL_BITMAP_KEY);
  if (bm != NULL && ((rc = read_bitmap(s, bm, err)) < 0 || (rc = check_bitmap(s, err)) < 0)) return rc;
  return 0;
}

/* ------------------------------------------------------ check against data */

int mw_seed_check_column(const mw_seed_t *s, const mw_field_t *field, const mw_column_t *c,
                         mw_err_t *err) {
  assert(s != NULL);
  assert(field != NULL);
  assert(c != NULL);
  mw_seed_type_t t = mw_seed_type_of(field);
  if ((uint64_t)c->length != s->total_rows)
    return mw_err_set(err, -EBADMSG, "seed of %s covers %" PRIu64 " rows, the column has %" PRId64,
                      field->name, s->total_rows, c->length);
  size_t k = 0;
  for (size_t z = 0; z < s->n_zones; z++) {
    int64_t lo = (int64_t)(z * s->rows_per_zone), hi = lo + (int64_t)s->zone_length[z];
    uint64_t nulls = 0, nans = 0, neg = 0;
    uint8_t tb, ta, tm;
    size_t mnn = 0, mxn = 0;
    bool has_min = mw_column_valid(s->min, (int64_t)z), has_max = mw_column_valid(s->max, (int64_t)z);
    const uint8_t *mn = has_min ? value_at(t, s->min, (int64_t)z, &mnn, &ta) : NULL;
    const uint8_t *mx = has_max ? value_at(t, s->max, (int64_t)z, &mxn, &tm) : NULL;
    if (t.kind == MW_SEED_KIND_FLOAT && mx && float_nan(load_bits(mx, t.width), t.width)) mx = NULL; /* v0 marker */
    if (t.kind == MW_SEED_KIND_FLOAT && mn && float_nan(load_bits(mn, t.width), t.width)) mn = NULL;
    for (int64_t i = lo; i < hi; i++) {
      if (!mw_column_valid(c, i)) {
        nulls++;
        if (s->has_null_bitmap && (k >= s->n_null_offsets || s->null_offsets[k] != (uint32_t)i))
          return mw_err_set(err, -EBADMSG, "seed of %s: row %" PRId64 " is null but not in seed_null_bitmap", field->name, i);
        k++;
        continue;
      }
      if (s->has_null_bitmap && k < s->n_null_offsets && s->null_offsets[k] == (uint32_t)i)
        return mw_err_set(err, -EBADMSG, "seed of %s: seed_null_bitmap names row %" PRId64 ", which is not null", field->name, i);
      if (t.kind == MW_SEED_KIND_NONE) continue;
      size_t vn;
      const uint8_t *v = value_at(t, c, i, &vn, &tb);
      if (t.kind == MW_SEED_KIND_FLOAT && float_nan(load_bits(v, t.width), t.width)) {
        nans++;
        neg += float_neg(load_bits(v, t.width), t.width);
        continue;
      }
      if ((mn && mw_seed_compare(t, v, vn, mn, mnn) < 0) || (mx && mw_seed_compare(t, v, vn, mx, mxn) > 0))
        return mw_err_set(err, -EBADMSG, "seed of %s zone %zu: row %" PRId64 " lies outside [min, max]", field->name, z, i);
    }
    if (nulls != s->null_count[z] || nans != s->nan_count[z] ||
        (s->negative_nan_count && neg != s->negative_nan_count[z]))
      return mw_err_set(err, -EBADMSG,
                        "seed of %s zone %zu: counts null %" PRIu32 " nan %" PRIu32 " but the rows hold null %" PRIu64 " nan %" PRIu64 " (negative %" PRIu64 ")",
                        field->name, z, s->null_count[z], s->nan_count[z], nulls, nans, neg);
  }
  return 0;
}
