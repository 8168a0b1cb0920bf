/*
 * route.c — bucket hash (Spark/Iceberg Murmur3) and shard UUIDs (v5).
 *
 * Bucket hash. Murmur3 x86_32 with seed 0, in 32-bit wrapping arithmetic:
 * an int hashes as one 4-byte block, a long as two (low word first), bytes as
 * their whole 4-byte LE blocks and then each leftover byte as a block of its
 * own, sign-extended (Spark's variant, not standard Murmur3's tail), and the
 * finalizer mixes in the byte length (4, 8 or n). Examples (num_buckets 8):
 *
 *   int32 1  -> block 01 00 00 00                -> -68075478   -> bucket 2
 *   int64 1  -> blocks 01 00 00 00, 00 00 00 00  -> 1392991556  -> bucket 4
 *   "a"      -> leftover 0x61                    -> 721651713   -> bucket 1
 *
 * bucket = (hash & 0x7fffffff) % num_buckets; a null row hashes to 0.
 *
 * Shard UUIDs. LanceDB names shards by UUID v5 (SHA-1) under the namespace
 * whose 16 bytes are ASCII "LSMWRITE_SHARD01":
 *
 *   namespace 4c 53 4d 57 52 49 54 45 5f 53 48 41 52 44 30 31
 *   name      "bucket-3"  -> 1d8d46d4-1ffd-5f6e-9aea-466d5ea76fdb
 *
 * The SHA-1 and version/variant bits come from libuuid
 * (uuid_generate_sha1).
 */
#include "lance/route.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uuid/uuid.h>

#include "common/buf.h"

/* ------------------------------------------------------------------ Murmur3 */

static inline uint32_t rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

static inline uint32_t mix_k(uint32_t k) {
  k *= 0xcc9e2d51u;
  k = rotl32(k, 15);
  return k * 0x1b873593u;
}

static inline uint32_t mix_h(uint32_t h, uint32_t k) {
  h ^= k;
  h = rotl32(h, 13);
  return h * 5u + 0xe6546b64u;
}

static inline uint32_t fmix(uint32_t h, uint32_t len) {
  h ^= len;
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

int32_t mw_murmur3_int(int32_t v) {
  return (int32_t)fmix(mix_h(0, mix_k((uint32_t)v)), 4);
}

int32_t mw_murmur3_long(int64_t v) {
  uint64_t u = (uint64_t)v;
  uint32_t h = mix_h(0, mix_k((uint32_t)u));
  h = mix_h(h, mix_k((uint32_t)(u >> 32)));
  return (int32_t)fmix(h, 8);
}

int32_t mw_murmur3_bytes(const void *p, size_t n) {
  const uint8_t *b = p;
  assert(p != NULL || n == 0);
  uint32_t h = 0;
  size_t whole = n & ~(size_t)3;
  for (size_t i = 0; i < whole; i += 4) h = mix_h(h, mix_k(mw_load_u32le(b + i)));
  for (size_t i = whole; i < n; i++) h = mix_h(h, mix_k((uint32_t)(int32_t)(int8_t)b[i]));
  return (int32_t)fmix(h, (uint32_t)n);
}

uint32_t mw_route_bucket_of(int32_t hash, uint32_t num_buckets) {
  assert(num_buckets >= 1);
  assert(num_buckets <= MW_ROUTE_MAX_BUCKETS);
  return ((uint32_t)hash & 0x7fffffffu) % num_buckets;
}

/* -------------------------------------------------------------- per value */

int mw_route_hash_value(const mw_field_t *f, const mw_column_t *c, int64_t row, int32_t *hash) {
  assert(f != NULL);
  assert(c != NULL);
  assert(hash != NULL);
  if (row < 0 || row >= c->length) return -EINVAL;
  if (!mw_column_valid(c, row)) {
    *hash = 0;
    return 0;
  }
  const uint8_t *v = c->values.data;
  switch (f->type) {
    case MW_T_BOOL:
      *hash = mw_murmur3_int(mw_bit_get(v, row) ? 1 : 0);
      return 0;
    case MW_T_INT32: case MW_T_UINT32:
      *hash = mw_murmur3_int((int32_t)mw_load_u32le(v + 4 * row));
      return 0;
    case MW_T_INT64: case MW_T_UINT64:
      *hash = mw_murmur3_long((int64_t)mw_load_u64le(v + 8 * row));
      return 0;
    case MW_T_FLOAT32: {
      uint32_t bits = mw_load_u32le(v + 4 * row);
      float x;
      memcpy(&x, &bits, 4);
      if (x == 0.0f) bits = 0;
      else if (isnan(x)) bits = 0x7fc00000u;
      *hash = mw_murmur3_int((int32_t)bits);
      return 0;
    }
    case MW_T_FLOAT64: {
      uint64_t bits = mw_load_u64le(v + 8 * row);
      double x;
      memcpy(&x, &bits, 8);
      if (x == 0.0) bits = 0;
      else if (isnan(x)) bits = 0x7ff8000000000000ull;
      *hash = mw_murmur3_long((int64_t)bits);
      return 0;
    }
    case MW_T_UTF8: case MW_T_BINARY: {
      size_t n;
      const uint8_t *p = mw_column_bytes(c, row, &n);
      *hash = mw_murmur3_bytes(p, n);
      return 0;
    }
    default:
      return -ENOTSUP;
  }
}

int mw_route_bucket_rows(const mw_field_t *f, const mw_column_t *c, int64_t n_rows,
                         uint32_t num_buckets, uint32_t *out, mw_err_t *err) {
  assert(f != NULL);
  assert(c != NULL);
  assert(out != NULL || n_rows == 0);
  if (num_buckets < 1 || num_buckets > MW_ROUTE_MAX_BUCKETS)
    return mw_err_set(err, -EINVAL, "route: num_buckets %u not in 1..%d", num_buckets,
                      MW_ROUTE_MAX_BUCKETS);
  if (n_rows < 0 || n_rows > c->length)
    return mw_err_set(err, -EINVAL, "route: %lld rows asked, column has %lld", (long long)n_rows,
                      (long long)c->length);
  for (int64_t i = 0; i < n_rows; i++) {
    int32_t h;
    int rc = mw_route_hash_value(f, c, i, &h);
    if (rc < 0)
      return mw_err_set(err, rc, "route: column '%s' of type %s cannot be bucketed",
                        f->name ? f->name : "?", mw_type_name(f->type));
    out[i] = mw_route_bucket_of(h, num_buckets);
  }
  return 0;
}

/* ------------------------------------------------------------------- UUIDs */

/* ASCII "LSMWRITE_SHARD01" = 4c534d57-5249-5445-5f53-484152443031. */
static const uint8_t SHARD_NS[16] = {0x4c, 0x53, 0x4d, 0x57, 0x52, 0x49, 0x54, 0x45,
                                     0x5f, 0x53, 0x48, 0x41, 0x52, 0x44, 0x30, 0x31};

static void uuid_v5(const void *name, size_t n, uint8_t out[16]) {
  uuid_generate_sha1(out, SHARD_NS, (const char *)name, n);
  assert((out[6] >> 4) == 5);
}

void mw_shard_uuid_unsharded(uint8_t out[16]) {
  assert(out != NULL);
  uuid_v5("unsharded", 9, out);
}

void mw_shard_uuid_bucket(uint32_t bucket, uint8_t out[16]) {
  char name[32];
  assert(out != NULL);
  int n = snprintf(name, sizeof name, "bucket-%u", bucket);
  assert(n > 0);
  assert((size_t)n < sizeof name);
  uuid_v5(name, (size_t)n, out);
}

int mw_shard_uuid_identity_raw(const void *value, size_t n, uint8_t out[16]) {
  static const char prefix[] = "identity-";
  uint8_t name[sizeof prefix - 1 + MW_ROUTE_MAX_IDENTITY_BYTES];
  assert(out != NULL);
  assert(value != NULL || n == 0);
  if (n > MW_ROUTE_MAX_IDENTITY_BYTES) return -EINVAL;
  memcpy(name, prefix, sizeof prefix - 1);
  if (n) memcpy(name + sizeof prefix - 1, value, n);
  uuid_v5(name, sizeof prefix - 1 + n, out);
  return 0;
}

int mw_route_scalar_bytes(const mw_field_t *f, const mw_column_t *c, int64_t row, uint8_t *out,
                          size_t cap, mw_err_t *err) {
  assert(f != NULL);
  assert(c != NULL);
  assert(out != NULL || cap == 0);
  if (row < 0 || row >= c->length)
    return mw_err_set(err, -EINVAL, "shard scalar: row %lld of %lld", (long long)row,
                      (long long)c->length);
  if (!mw_column_valid(c, row))
    return mw_err_set(err, -EINVAL, "shard scalar: row %lld of '%s' is null", (long long)row,
                      f->name ? f->name : "?");
  const uint8_t *v = c->values.data, *src;
  uint8_t b;
  size_t n;
  switch (f->type) {
    case MW_T_INT32: case MW_T_UINT32: src = v + 4 * row; n = 4; break;
    case MW_T_INT64: case MW_T_UINT64: src = v + 8 * row; n = 8; break;
    case MW_T_BOOL:
      b = mw_bit_get(v, row) ? 1 : 0;
      src = &b;
      n = 1;
      break;
    case MW_T_UTF8: src = mw_column_bytes(c, row, &n); break;
    default:
      return mw_err_set(err, -ENOTSUP, "shard scalar: type %s is not an identity type",
                        mw_type_name(f->type));
  }
  if (n > cap)
    return mw_err_set(err, -EINVAL, "shard scalar: value of %zu bytes exceeds %zu", n, cap);
  if (n) memcpy(out, src, n);
  return (int)n;
}

int mw_route_scalar_text(mw_type_t type, const uint8_t *raw, size_t n, char *out, size_t cap) {
  assert(raw != NULL || n == 0);
  assert(out != NULL);
  assert(cap > 0);
  uint64_t u = 0;
  for (size_t i = 0; i < n && i < 8; i++) u |= (uint64_t)raw[i] << (8 * i);
  int len;
  switch (type) {
    case MW_T_UTF8:
      if (n > INT32_MAX) return -EINVAL;
      len = snprintf(out, cap, "%.*s", (int)n, (const char *)raw);
      break;
    case MW_T_BOOL:
      if (n != 1) return -EINVAL;
      len = snprintf(out, cap, "%s", raw[0] ? "true" : "false");
      break;
    case MW_T_INT32:
      if (n != 4) return -EINVAL;
      len = snprintf(out, cap, "%" PRId32, (int32_t)(uint32_t)u);
      break;
    case MW_T_INT64:
      if (n != 8) return -EINVAL;
      len = snprintf(out, cap, "%" PRId64, (int64_t)u);
      break;
    case MW_T_UINT32:
    case MW_T_UINT64:
      if (n != (type == MW_T_UINT32 ? 4u : 8u)) return -EINVAL;
      len = snprintf(out, cap, "%" PRIu64, u);
      break;
    default: return -ENOTSUP;
  }
  assert(len >= 0);
  return len;
}

int mw_route_scalar_parse(mw_type_t type, const char *text, uint8_t *out, size_t cap) {
  assert(text != NULL);
  assert(out != NULL || cap == 0);
  char *end;
  size_t n;
  errno = 0;
  switch (type) {
    case MW_T_UTF8:
      n = strlen(text);
      if (n > cap) return -EINVAL;
      memcpy(out, text, n);
      return (int)n;
    case MW_T_BOOL:
      if (strcmp(text, "true") != 0 && strcmp(text, "false") != 0) return -EINVAL;
      if (cap < 1) return -EINVAL;
      out[0] = strcmp(text, "true") == 0;
      return 1;
    case MW_T_INT32:
    case MW_T_INT64: {
      long long x = strtoll(text, &end, 10);
      if (errno != 0 || *end != '\0' || *text == '\0' || *text == ' ') return -EINVAL;
      if (type == MW_T_INT32 && (x < INT32_MIN || x > INT32_MAX)) return -EINVAL;
      n = type == MW_T_INT32 ? 4 : 8;
      if (n > cap) return -EINVAL;
      for (size_t i = 0; i < n; i++) out[i] = (uint8_t)((unsigned long long)x >> (8 * i));
      return (int)n;
    }
    case MW_T_UINT32:
    case MW_T_UINT64: {
      if (*text < '0' || *text > '9') return -EINVAL; /* strtoull takes "-1" and " 1" */
      unsigned long long x = strtoull(text, &end, 10);
      if (errno != 0 || *end != '\0') return -EINVAL;
      if (type == MW_T_UINT32 && x > UINT32_MAX) return -EINVAL;
      n = type == MW_T_UINT32 ? 4 : 8;
      if (n > cap) return -EINVAL;
      for (size_t i = 0; i < n; i++) out[i] = (uint8_t)(x >> (8 * i));
      return (int)n;
    }
    default: return -ENOTSUP;
  }
}

int mw_shard_uuid_identity(const mw_field_t *f, const mw_column_t *c, int64_t row,
                           uint8_t out[16], mw_err_t *err) {
  assert(out != NULL);
  uint8_t buf[MW_ROUTE_MAX_IDENTITY_BYTES];
  int n = mw_route_scalar_bytes(f, c, row, buf, sizeof buf, err);
  if (n < 0) return n;
  int rc = mw_shard_uuid_identity_raw(buf, (size_t)n, out);
  assert(rc == 0);
  return rc;
}

/* -------------------------------------------------------------- UUID text */

void mw_shard_uuid_format(const uint8_t uuid[16], char out[MW_UUID_STR_BYTES]) {
  static const char hex[] = "0123456789abcdef";
  assert(uuid != NULL);
  assert(out != NULL);
  size_t o = 0;
  for (int i = 0; i < 16; i++) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out[o++] = '-';
    out[o++] = hex[uuid[i] >> 4];
    out[o++] = hex[uuid[i] & 15];
  }
  out[o] = '\0';
  assert(o == MW_UUID_STR_BYTES - 1);
}

static int hexval(char ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}

int mw_shard_uuid_parse(const char *s, uint8_t out[16]) {
  assert(s != NULL);
  assert(out != NULL);
  uint8_t tmp[16];
  size_t o = 0;
  for (int i = 0; i < 36; i++) {
    bool dash_pos = (i == 8 || i == 13 || i == 18 || i == 23);
    if (s[i] == '\0') return -EINVAL;
    if (dash_pos) {
      if (s[i] != '-') return -EINVAL;
      continue;
    }
    int hi = hexval(s[i]), lo = hexval(s[i + 1]);
    if (hi < 0 || lo < 0) return -EINVAL;
    tmp[o++] = (uint8_t)(hi << 4 | lo);
    i++;
  }
  if (s[36] != '\0') return -EINVAL;
  assert(o == 16);
  memcpy(out, tmp, 16);
  return 0;
}
