/*
 * bloom.c — PK hash (SipHash-1-3), flush dedup, split-block bloom filter.
 *
 * PK hash. Lance keys every memtable row by Rust's DefaultHasher, which is
 * SipHash-1-3 with key (0, 0) over the concatenation of everything written to
 * it. Per PK column it writes is_null as one byte, then for a non-null value
 * the value's `Hash` bytes. Example, int64 id 500:
 *
 *   bytes fed   00 f4 01 00 00 00 00 00 00      (is_null=0, 500 as i64 LE)
 *   hash        0x5f4c76bb6281ba3c
 *
 * utf8 "ab" feeds 00 61 62 ff; binary {61 62} feeds 00 02 00.. 00 61 62 (u64
 * length first); a null feeds just 01. The single int64/int32 column without
 * nulls (the common case) skips the streaming state: 9 bytes are one SipHash
 * word (v << 8) plus a one-byte tail (v >> 56).
 *
 * Key types. Lance 12's set_unenforced_primary_key accepts Int32, Int64,
 * Utf8, LargeUtf8, Binary, LargeBinary and FixedSizeBinary keys, not nullable,
 * but its flush cannot hash FixedSizeBinary ("unsupported type
 * FixedSizeBinary(16) for hashing"). So memwald's keys are int32, int64,
 * utf8, large_utf8, binary and large_binary; large_utf8 hashes as utf8 and
 * large_binary as binary (the value-distinguishing hash dedup needs, and what
 * newer Lance's compute_pk_hash feeds), while Lance 12's bloom for them holds
 * one constant hash (mw_pk_bloom_constant). Each key type rebuilds a
 * bloom_filter.bin written by Lance byte for byte
 * (tests/lance/data/bloom_types, tools/gen-bloom-fixtures.mjs). Every other type (uint32, uint64, bool, the
 * narrow, half-float, temporal and fixed-size types) is refused (-ENOTSUP):
 * Lance refuses them as keys or cannot flush them, so no bloom we wrote for
 * them could agree with its probes.
 *
 * Dedup. Walking rows newest first, a row is superseded iff its hash was
 * already seen; an open-addressing set of u64 (linear probing, capacity the
 * power of two >= 2 × rows, so load <= 1/2) answers that. Hash 0 is kept in a
 * flag because 0 marks an empty slot. A set over 1M rows (16 MiB) would miss
 * cache on every probe, so large inputs are first partitioned (stably) by the
 * top hash bits into up to 1024 parts of ~MW_DEDUP_PART_ROWS rows, each
 * deduplicated with one reused cache-sized set. Superseded rows are marked in
 * a bitmap, which is read out in ascending order. All of it lives in one
 * scratch buffer that an mw_dedup_t keeps between flushes (page faults on
 * fresh memory cost more than the dedup itself).
 *
 * Bloom filter. n_blocks blocks of 8 u32 words. Insert(h): block
 * ((h >> 32) * n_blocks) >> 32, and in word i of it the bit
 * (u32(h) * SALT[i]) >> 27. The file is the words in little-endian order.
 * Inserting id 500's hash into a 1-block filter gives:
 *
 *   00 00 00 80 00 00 08 00 00 00 80 00 00 00 00 01
 *   00 20 00 00 20 00 00 00 00 00 20 00 00 40 00 00
 */
#include "lance/bloom.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- SipHash */

static inline uint64_t rotl64(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

#define SIPROUND(v0, v1, v2, v3)                                         \
  do {                                                                   \
    v0 += v1; v1 = rotl64(v1, 13); v1 ^= v0; v0 = rotl64(v0, 32);        \
    v2 += v3; v3 = rotl64(v3, 16); v3 ^= v2;                             \
    v0 += v3; v3 = rotl64(v3, 21); v3 ^= v0;                             \
    v2 += v1; v1 = rotl64(v1, 17); v1 ^= v2; v2 = rotl64(v2, 32);        \
  } while (0)

void mw_sip13_init(mw_sip13_t *s, uint64_t k0, uint64_t k1) {
  assert(s != NULL);
  s->v0 = k0 ^ 0x736f6d6570736575ULL;
  s->v1 = k1 ^ 0x646f72616e646f6dULL;
  s->v2 = k0 ^ 0x6c7967656e657261ULL;
  s->v3 = k1 ^ 0x7465646279746573ULL;
  s->tail = 0;
  s->ntail = 0;
  s->total = 0;
}

static inline void sip_compress(mw_sip13_t *s, uint64_t m) {
  s->v3 ^= m;
  SIPROUND(s->v0, s->v1, s->v2, s->v3);
  s->v0 ^= m;
}

void mw_sip13_write(mw_sip13_t *s, const void *p, size_t n) {
  const uint8_t *q = p;
  assert(s != NULL);
  assert(s->ntail < 8);
  assert(p != NULL || n == 0);
  s->total += n;
  if (s->ntail) {
    while (n && s->ntail < 8) {
      s->tail |= (uint64_t)*q++ << (8 * s->ntail++);
      n--;
    }
    if (s->ntail < 8) return;
    sip_compress(s, s->tail);
    s->tail = 0;
    s->ntail = 0;
  }
  for (; n >= 8; n -= 8, q += 8) sip_compress(s, mw_load_u64le(q));
  while (n--) s->tail |= (uint64_t)*q++ << (8 * s->ntail++);
}

static inline void sip_write_u8(mw_sip13_t *s, uint8_t v) {
  s->total++;
  s->tail |= (uint64_t)v << (8 * s->ntail++);
  if (s->ntail == 8) {
    sip_compress(s, s->tail);
    s->tail = 0;
    s->ntail = 0;
  }
}

/* The last block b (length byte and tail) and the finalisation: one
 * compression round, then three finalisation rounds (SipHash-1-3). */
static inline uint64_t sip_final(uint64_t v0, uint64_t v1, uint64_t v2, uint64_t v3, uint64_t b) {
  v3 ^= b;
  SIPROUND(v0, v1, v2, v3);
  v0 ^= b;
  v2 ^= 0xff;
  SIPROUND(v0, v1, v2, v3);
  SIPROUND(v0, v1, v2, v3);
  SIPROUND(v0, v1, v2, v3);
  return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t mw_sip13_finish(const mw_sip13_t *s) {
  assert(s != NULL);
  assert(s->ntail < 8);
  assert(s->total % 8 == s->ntail); /* the tail holds the bytes past the last word */
  return sip_final(s->v0, s->v1, s->v2, s->v3, (s->total & 0xff) << 56 | s->tail);
}

uint64_t mw_siphash13(uint64_t k0, uint64_t k1, const void *p, size_t n) {
  mw_sip13_t s;
  mw_sip13_init(&s, k0, k1);
  mw_sip13_write(&s, p, n);
  return mw_sip13_finish(&s);
}

/* Key (0,0), at most one full word then `tail` of `len` bytes in total:
 * the inlined form of the common one-column keys. */
static inline uint64_t sip_short(bool has_word, uint64_t word, uint64_t tail, uint64_t len) {
  assert(len <= 16);
  assert(has_word == (len >= 8));
  uint64_t v0 = 0x736f6d6570736575ULL, v1 = 0x646f72616e646f6dULL;
  uint64_t v2 = 0x6c7967656e657261ULL, v3 = 0x7465646279746573ULL;
  if (has_word) {
    v3 ^= word;
    SIPROUND(v0, v1, v2, v3);
    v0 ^= word;
  }
  return sip_final(v0, v1, v2, v3, (len & 0xff) << 56 | tail);
}

/* ----------------------------------------------------------------- PK hash */

/* The key types of types.c (`pk`); large strings and binaries hash as
 * their 32-bit-offset twins (str / [u8] Hash), verified against Lance's
 * blooms in tests/lance/data/bloom_types. */
static bool pk_type_ok(mw_type_t t) {
  switch (t) {
    case MW_T_INT32: case MW_T_INT64: case MW_T_UTF8: case MW_T_BINARY:
    case MW_T_LARGE_UTF8: case MW_T_LARGE_BINARY:
      assert(mw_type_info(t)->pk);
      return true;
    default:
      assert(!mw_type_info(t)->pk);
      return false;
  }
}

/* Feed one row of one column: is_null byte, then the Rust Hash bytes. */
static void feed_value(mw_sip13_t *s, const mw_field_t *f, const mw_column_t *c, int64_t i) {
  if (!mw_column_valid(c, i)) {
    sip_write_u8(s, 1);
    return;
  }
  sip_write_u8(s, 0);
  const uint8_t *v = c->values.data;
  switch (f->type) {
    case MW_T_INT32:
      mw_sip13_write(s, v + 4 * i, 4);
      break;
    case MW_T_INT64:
      mw_sip13_write(s, v + 8 * i, 8);
      break;
    case MW_T_UTF8:
    case MW_T_LARGE_UTF8: {
      size_t n;
      const uint8_t *p = mw_column_bytes(c, i, &n);
      mw_sip13_write(s, p, n);
      sip_write_u8(s, 0xff);
      break;
    }
    case MW_T_BINARY:
    case MW_T_LARGE_BINARY: {
      size_t n;
      const uint8_t *p = mw_column_bytes(c, i, &n);
      uint8_t len[8];
      mw_store_u64le(len, (uint64_t)n);
      mw_sip13_write(s, len, 8);
      mw_sip13_write(s, p, n);
      break;
    }
    default:
      assert(!"unreachable: type checked by caller");
  }
}

static void hash_i64_nonnull(const uint8_t *v, int64_t n, uint64_t *out) {
  for (int64_t i = 0; i < n; i++) {
    uint64_t x = mw_load_u64le(v + 8 * i);
    out[i] = sip_short(true, x << 8, x >> 56, 9);
  }
}

static void hash_i32_nonnull(const uint8_t *v, int64_t n, uint64_t *out) {
  for (int64_t i = 0; i < n; i++) {
    uint64_t x = mw_load_u32le(v + 4 * i);
    out[i] = sip_short(false, 0, x << 8, 5);
  }
}

static int check_column(const mw_field_t *f, const mw_column_t *c, int64_t n_rows, size_t k,
                        mw_err_t *err) {
  if (!pk_type_ok(f->type))
    return mw_err_set(err, -ENOTSUP,
                      "pk hash: column %zu '%s' has type %s; Lance 12 hashes only int32, int64, "
                      "utf8, large_utf8, binary and large_binary primary keys", k, f->name ? f->name : "?",
                      mw_type_name(f->type));
  if (c->length < n_rows)
    return mw_err_set(err, -EINVAL, "pk hash: column %zu has %lld rows, need %lld", k,
                      (long long)c->length, (long long)n_rows);
  return 0;
}

int mw_pk_hash_columns(const mw_field_t *const *fields, const mw_column_t *const *cols,
                       size_t n_cols, int64_t n_rows, uint64_t *out, mw_err_t *err) {
  assert(fields != NULL);
  assert(cols != NULL);
  assert(out != NULL || n_rows == 0);
  if (n_cols == 0 || n_cols > MW_MAX_FIELDS || n_rows < 0)
    return mw_err_set(err, -EINVAL, "pk hash: %zu columns, %lld rows", n_cols, (long long)n_rows);
  for (size_t k = 0; k < n_cols; k++) {
    int rc = check_column(fields[k], cols[k], n_rows, k, err);
    if (rc < 0) return rc;
  }
  if (n_cols == 1 && cols[0]->null_count == 0) {
    mw_type_t t = fields[0]->type;
    if (t == MW_T_INT64) {
      hash_i64_nonnull(cols[0]->values.data, n_rows, out);
      return 0;
    }
    if (t == MW_T_INT32) {
      hash_i32_nonnull(cols[0]->values.data, n_rows, out);
      return 0;
    }
  }
  for (int64_t i = 0; i < n_rows; i++) {
    mw_sip13_t s;
    mw_sip13_init(&s, 0, 0);
    for (size_t k = 0; k < n_cols; k++) feed_value(&s, fields[k], cols[k], i);
    out[i] = mw_sip13_finish(&s);
  }
  return 0;
}

bool mw_pk_bloom_constant(const mw_field_t *f, uint64_t *hash) {
  assert(f != NULL);
  assert(hash != NULL);
  if (f->type != MW_T_LARGE_UTF8 && f->type != MW_T_LARGE_BINARY) return false;
  static const uint8_t not_null = 0;
  *hash = mw_siphash13(0, 0, &not_null, 1);
  return true;
}

int mw_pk_hash_batch(const mw_batch_t *b, uint64_t *out, mw_err_t *err) {
  assert(b != NULL);
  assert(b->schema != NULL);
  const mw_schema_t *sc = b->schema;
  const mw_field_t *fields[MW_MAX_FIELDS];
  const mw_column_t *cols[MW_MAX_FIELDS];
  size_t n = 0;
  /* PK positions are 1..n; collect them in position order. */
  for (uint32_t pos = 1; pos <= sc->n_fields; pos++) {
    size_t found = 0;
    for (size_t j = 0; j < sc->n_fields; j++) {
      if (sc->fields[j].pk_position != pos) continue;
      fields[n] = &sc->fields[j];
      cols[n] = &b->cols[j];
      found++;
    }
    if (found > 1)
      return mw_err_set(err, -EINVAL, "pk hash: two fields have pk position %u", pos);
    if (found == 0) break;
    n++;
  }
  if (n == 0) return mw_err_set(err, -EINVAL, "pk hash: schema has no primary key");
  for (size_t j = 0; j < sc->n_fields; j++)
    if (sc->fields[j].pk_position > n)
      return mw_err_set(err, -EINVAL, "pk hash: pk positions are not 1..n (field '%s')",
                        sc->fields[j].name);
  assert(n <= sc->n_fields);
  return mw_pk_hash_columns(fields, cols, n, b->n_rows, out, err);
}

/* ------------------------------------------------------------------- dedup */

/* Mark in `del` (bit per row) the rows of one partition superseded by a
 * later row: walk newest first through a cleared table of `cap` slots. The
 * partition lists its rows in ascending order; idx NULL means rows 0..n-1. */
static void dedup_part(const uint64_t *h, const uint32_t *idx, size_t n, uint64_t *slots,
                       size_t cap, int shift, uint64_t *del) {
  assert(cap >= 2 * n);
  assert((cap & (cap - 1)) == 0);
  memset(slots, 0, cap * sizeof *slots);
  size_t mask = cap - 1;
  bool seen_zero = false;
  for (size_t k = n; k-- > 0;) {
    uint64_t x = h[k];
    bool dup;
    if (x == 0) {
      dup = seen_zero;
      seen_zero = true;
    } else {
      size_t j = (size_t)((x * 0x9E3779B97F4A7C15ULL) >> shift);
      while (slots[j] != 0 && slots[j] != x) j = (j + 1) & mask;
      dup = slots[j] == x;
      slots[j] = x;
    }
    if (dup) {
      size_t row = idx ? idx[k] : k;
      del[row >> 6] |= 1ULL << (row & 63);
    }
  }
}

/* Carve 8-byte-aligned arrays out of the context's scratch buffer. */
static void *carve(uint8_t **cur, size_t bytes) {
  void *p = *cur;
  *cur += (bytes + 7) & ~(size_t)7;
  return p;
}

/* The arrays of one run, carved out of the context's scratch buffer in
 * this order: where each partition starts (n_parts + 1), the deletion
 * bitmap (a bit per row) and, when partitioned, the hashes and row ids in
 * partition order; the hash set's slots follow them. */
typedef struct dedup_arrays {
  size_t *start;
  uint64_t *del;
  uint64_t *ph; /* NULL when unpartitioned */
  uint32_t *pi;
} dedup_arrays_t;

static uint8_t *dedup_carve(uint8_t *cur, dedup_arrays_t *a, size_t n_parts, size_t del_words,
                            size_t rows, bool parted) {
  assert(cur != NULL);
  assert(n_parts >= 1);
  assert(del_words == (rows + 63) / 64);
  a->start = carve(&cur, 8 * (n_parts + 1));
  a->del = carve(&cur, 8 * del_words);
  a->ph = parted ? carve(&cur, 8 * rows) : NULL;
  a->pi = parted ? carve(&cur, 4 * rows) : NULL;
  return cur;
}

/* Sort the rows stably by their top `pbits` hash bits into a->ph and a->pi
 * (a counting sort); a->start[p] is where partition p begins, a->start
 * zeroed on entry. Returns the rows of the largest partition. */
static size_t dedup_partition(const uint64_t *hashes, size_t rows, int pbits, dedup_arrays_t *a) {
  assert(pbits >= 1);
  assert(pbits <= 10);
  size_t n_parts = (size_t)1 << pbits, *start = a->start;
  for (size_t i = 0; i < rows; i++) start[(hashes[i] >> (64 - pbits)) + 1]++;
  size_t max_part = 0;
  for (size_t p = 0; p < n_parts; p++) {
    if (start[p + 1] > max_part) max_part = start[p + 1];
    start[p + 1] += start[p];
  }
  assert(start[n_parts] == rows);
  /* Scatter stably; start[p] walks to the end of part p, then is
   * restored from its neighbour. */
  for (size_t i = 0; i < rows; i++) {
    size_t slot = start[hashes[i] >> (64 - pbits)]++;
    a->ph[slot] = hashes[i];
    a->pi[slot] = (uint32_t)i;
  }
  for (size_t p = n_parts; p > 0; p--) start[p] = start[p - 1];
  start[0] = 0;
  return max_part;
}

/* The rows whose bit is set in del, ascending, into out; returns how many. */
static int64_t dedup_offsets(const uint64_t *del, size_t del_words, uint32_t *out) {
  assert(del != NULL);
  assert(out != NULL);
  int64_t cnt = 0;
  for (size_t w = 0; w < del_words; w++) {
    for (uint64_t x = del[w]; x; x &= x - 1)
      out[cnt++] = (uint32_t)(w * 64 + (size_t)__builtin_ctzll(x));
  }
  return cnt;
}

int64_t mw_dedup_run(mw_dedup_t *d, const uint64_t *hashes, int64_t n, uint32_t *out_offsets) {
  assert(d != NULL);
  assert(hashes != NULL || n == 0);
  assert(out_offsets != NULL || n == 0);
  if (n < 0 || n > MW_DEDUP_MAX_ROWS) return -EINVAL;
  if (n < 2) return 0;
  size_t rows = (size_t)n;
  /* Partition by the top hash bits so each partition's set (~64 KiB) stays
   * in cache; small inputs are one partition, used in place. */
  int pbits = 0;
  while (pbits < 10 && (rows >> pbits) > MW_DEDUP_PART_ROWS) pbits++;
  size_t n_parts = (size_t)1 << pbits;
  size_t del_words = (rows + 63) / 64;
  /* The set is sized after counting; reserve for the worst case up front
   * only when unpartitioned (where max_part = rows). */
  size_t need_fixed = 8 * (n_parts + 1) + 8 * del_words + 16 +
                      (pbits ? ((8 * rows + 7) & ~(size_t)7) + ((4 * rows + 7) & ~(size_t)7) : 0);
  mw_buf_reset(&d->scratch);
  int rc = mw_buf_reserve(&d->scratch, need_fixed);
  if (rc < 0) return rc;
  dedup_arrays_t a;
  uint8_t *cur = dedup_carve(d->scratch.data, &a, n_parts, del_words, rows, pbits > 0);
  memset(a.start, 0, 8 * (n_parts + 1));
  memset(a.del, 0, 8 * del_words);
  size_t max_part = pbits > 0 ? dedup_partition(hashes, rows, pbits, &a) : rows;
  size_t cap = 16;
  int shift = 60;
  while (cap < 2 * max_part) {
    cap <<= 1;
    shift--;
  }
  size_t used = (size_t)(cur - d->scratch.data);
  if (d->scratch.cap < used + 8 * cap) {
    /* Grow keeps the bytes already written; re-derive the pointers. */
    d->scratch.len = used;
    rc = mw_buf_reserve(&d->scratch, 8 * cap);
    if (rc < 0) return rc;
    cur = dedup_carve(d->scratch.data, &a, n_parts, del_words, rows, pbits > 0);
  }
  uint64_t *slots = carve(&cur, 8 * cap);
  if (pbits == 0) {
    dedup_part(hashes, NULL, rows, slots, cap, shift, a.del);
  } else {
    for (size_t p = 0; p < n_parts; p++)
      dedup_part(a.ph + a.start[p], a.pi + a.start[p], a.start[p + 1] - a.start[p], slots, cap,
                 shift, a.del);
  }
  int64_t cnt = dedup_offsets(a.del, del_words, out_offsets);
  assert(cnt < n);
  return cnt;
}

void mw_dedup_free(mw_dedup_t *d) {
  if (d) mw_buf_free(&d->scratch);
}

int64_t mw_dedup_deletions(const uint64_t *hashes, int64_t n, uint32_t *out_offsets) {
  mw_dedup_t d = {MW_BUF_INIT};
  int64_t rc = mw_dedup_run(&d, hashes, n, out_offsets);
  mw_dedup_free(&d);
  return rc;
}

/* ------------------------------------------------------------------- bloom */

static const uint32_t SALT[8] = {0x47b6137bu, 0x44974d91u, 0x8824ad5bu, 0xa2b7289du,
                                 0x705495c7u, 0x2df1424bu, 0x9efc4947u, 0x5c6bfb31u};

size_t mw_bloom_bytes_for(uint64_t ndv, double fpp) {
  if (!(fpp >= 0.0 && fpp < 1.0)) return 0;
  double bits_f = -8.0 * (double)ndv / log(1.0 - pow(fpp, 1.0 / 8.0));
  /* Rust's `as usize` saturates (NaN and negatives -> 0); fpp = 0 gives
   * -inf bits, hence the minimum size. */
  size_t bytes;
  if (!(bits_f > 0.0)) bytes = 0;
  else if (bits_f >= (double)MW_BLOOM_MAX_BYTES * 8.0) bytes = MW_BLOOM_MAX_BYTES;
  else bytes = (size_t)bits_f / 8;
  if (bytes < MW_BLOOM_MIN_BYTES) bytes = MW_BLOOM_MIN_BYTES;
  size_t p = MW_BLOOM_MIN_BYTES;
  while (p < bytes) p <<= 1;
  assert(p >= MW_BLOOM_MIN_BYTES);
  assert(p <= MW_BLOOM_MAX_BYTES);
  return p;
}

int mw_bloom_init(mw_bloom_t *bf, size_t n_bytes) {
  assert(bf != NULL);
  bf->words = NULL;
  bf->n_blocks = 0;
  if (n_bytes < MW_BLOOM_MIN_BYTES || n_bytes > MW_BLOOM_MAX_BYTES || (n_bytes & (n_bytes - 1)))
    return -EINVAL;
  bf->words = calloc(n_bytes / 4, sizeof(uint32_t));
  if (!bf->words) return -ENOMEM;
  bf->n_blocks = n_bytes / MW_BLOOM_BLOCK_BYTES;
  return 0;
}

void mw_bloom_free(mw_bloom_t *bf) {
  if (!bf) return;
  free(bf->words);
  bf->words = NULL;
  bf->n_blocks = 0;
}

void mw_bloom_clear(mw_bloom_t *bf) {
  assert(bf != NULL);
  if (bf->words) memset(bf->words, 0, bf->n_blocks * MW_BLOOM_BLOCK_BYTES);
}

static inline uint32_t *block_of(const mw_bloom_t *bf, uint64_t h) {
  uint64_t b = ((h >> 32) * (uint64_t)bf->n_blocks) >> 32;
  return bf->words + 8 * b;
}

void mw_bloom_insert(mw_bloom_t *bf, uint64_t hash) {
  assert(bf != NULL);
  assert(bf->n_blocks > 0);
  uint32_t *w = block_of(bf, hash);
  uint32_t x = (uint32_t)hash;
  for (int i = 0; i < 8; i++) w[i] |= 1u << ((x * SALT[i]) >> 27);
}

/* A filter past L2 (a key index's, ~1.8 bytes per row) misses the cache on
 * almost every insert: the block BLOOM_PREFETCH_AHEAD inserts on is asked
 * for early. An SSTable's 32 KiB filter stays in cache and skips it. */
#define BLOOM_PREFETCH_AHEAD 16
#define BLOOM_PREFETCH_MIN_BYTES (256u << 10)
_Static_assert(BLOOM_PREFETCH_MIN_BYTES > MW_BLOOM_SST_BYTES, "SSTable filters stay unprefetched");

void mw_bloom_insert_many(mw_bloom_t *bf, const uint64_t *hashes, size_t n) {
  assert(bf != NULL);
  assert(bf->n_blocks > 0);
  assert(hashes != NULL || n == 0);
  size_t i = 0;
  if (bf->n_blocks * MW_BLOOM_BLOCK_BYTES >= BLOOM_PREFETCH_MIN_BYTES)
    for (; i + BLOOM_PREFETCH_AHEAD < n; i++) {
      __builtin_prefetch(block_of(bf, hashes[i + BLOOM_PREFETCH_AHEAD]), 1, 0);
      mw_bloom_insert(bf, hashes[i]);
    }
  for (; i < n; i++) mw_bloom_insert(bf, hashes[i]);
}

bool mw_bloom_check(const mw_bloom_t *bf, uint64_t hash) {
  assert(bf != NULL);
  assert(bf->n_blocks > 0);
  const uint32_t *w = block_of(bf, hash);
  uint32_t x = (uint32_t)hash;
  for (int i = 0; i < 8; i++)
    if (!(w[i] & (1u << ((x * SALT[i]) >> 27)))) return false;
  return true;
}

int mw_bloom_encode(const mw_bloom_t *bf, mw_buf_t *out) {
  assert(bf != NULL);
  assert(out != NULL);
  assert(bf->n_blocks > 0);
  size_t n_words = bf->n_blocks * 8;
  uint8_t *p = mw_buf_extend(out, n_words * 4);
  if (!p) return -ENOMEM;
  for (size_t i = 0; i < n_words; i++) mw_store_u32le(p + 4 * i, bf->words[i]);
  return 0;
}

int mw_bloom_decode(mw_bloom_t *bf, const uint8_t *p, size_t len, mw_err_t *err) {
  assert(bf != NULL);
  assert(p != NULL || len == 0);
  bf->words = NULL;
  bf->n_blocks = 0;
  if (len == 0 || len % MW_BLOOM_BLOCK_BYTES != 0)
    return mw_err_set(err, -EBADMSG, "bloom filter: length %zu is not a non-zero multiple of 32",
                      len);
  if (len > MW_BLOOM_MAX_BYTES)
    return mw_err_set(err, -EBADMSG, "bloom filter: length %zu exceeds %zu bytes", len,
                      MW_BLOOM_MAX_BYTES);
  bf->words = malloc(len);
  if (!bf->words) return -ENOMEM;
  for (size_t i = 0; i < len / 4; i++) bf->words[i] = mw_load_u32le(p + 4 * i);
  bf->n_blocks = len / MW_BLOOM_BLOCK_BYTES;
  return 0;
}
