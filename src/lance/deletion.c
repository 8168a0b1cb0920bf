/*
 * deletion.c — Lance `_deletions/<name>.bin`: RoaringBitmap, portable format.
 *
 * Layout written (no-run variant), all little-endian:
 *
 *   u32 cookie 12346        3a 30 00 00
 *   u32 container count     01 00 00 00
 *   per container: u16 key (offset >> 16), u16 cardinality - 1
 *                           00 00 02 00         key 0, 3 values
 *   per container: u32 byte offset of its data from the file start
 *                           10 00 00 00         (= 16)
 *   containers: array (cardinality <= 4096) = sorted u16 low halves,
 *               bitmap (> 4096) = 1024 u64 words, bit v = value v present
 *                           0c 00 0f 00 22 00   offsets {12, 15, 34}
 *
 * That is the unsharded-epochs gen-3 file, 22 bytes. The run variant (cookie
 * 12347 | (count - 1) << 16, then a run-flag bitmap of ceil(count/8) bytes,
 * key/cardinality pairs, offsets only when count >= 4, and run containers as
 * u16 n_runs + n × (u16 start, u16 length - 1)) is accepted when reading.
 *
 * Encoding goes through CRoaring (roaring_bitmap_of_ptr + portable
 * serialisation, never run_optimize). Decoding first walks the bytes with
 * scan(): keys strictly ascending, offsets equal to where each container
 * really starts, arrays strictly ascending, bitmap popcounts and run sums
 * equal to the header cardinality, no trailing bytes. Only then does
 * CRoaring's portable_deserialize_safe see them, and its cardinality must
 * agree.
 */
#include "lance/deletion.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <roaring/roaring.h>

#include "lance/flatbuf.h"
#include "lance/ipc.h"
#include "lance/util.h"

#define COOKIE_NO_RUN 12346u
#define COOKIE_RUN 12347u
#define NO_OFFSET_THRESHOLD 4u
#define MAX_KEYS 65536u
#define ARRAY_MAX_CARD 4096u
#define BITMAP_BYTES 8192u

typedef struct scan {
  uint64_t card;      /* total values */
  uint64_t max_value; /* largest value, valid when card > 0 */
} scan_t;

static int need(size_t pos, size_t n, size_t len, const char *what, mw_err_t *err) {
  if (n > len || pos > len - n)
    return mw_err_set(err, -EBADMSG, "deletion file: %s at byte %zu needs %zu bytes, file has %zu",
                      what, pos, n, len);
  return 0;
}

static int scan_array(const uint8_t *p, size_t pos, uint32_t card, uint32_t *last,
                      mw_err_t *err) {
  uint32_t prev = 0;
  for (uint32_t i = 0; i < card; i++) {
    uint32_t v = mw_load_u16le(p + pos + 2 * i);
    if (i > 0 && v <= prev)
      return mw_err_set(err, -EBADMSG, "deletion file: array value at byte %zu not ascending",
                        pos + 2 * (size_t)i);
    prev = v;
  }
  *last = prev;
  return 0;
}

static int scan_bitmap(const uint8_t *p, size_t pos, uint32_t card, uint32_t *last,
                       mw_err_t *err) {
  uint64_t pop = 0;
  *last = 0;
  for (uint32_t w = 0; w < BITMAP_BYTES / 8; w++) {
    uint64_t x = mw_load_u64le(p + pos + 8 * w);
    if (!x) continue;
    pop += (uint64_t)__builtin_popcountll(x);
    *last = w * 64 + 63 - (uint32_t)__builtin_clzll(x);
  }
  if (pop != card)
    return mw_err_set(err, -EBADMSG,
                      "deletion file: bitmap container at byte %zu has %" PRIu64
                      " bits set, header says %u", pos, pop, card);
  return 0;
}

static int scan_runs(const uint8_t *p, size_t pos, size_t len, uint32_t card, size_t *size,
                     uint32_t *last, mw_err_t *err) {
  int rc = need(pos, 2, len, "run count", err);
  if (rc < 0) return rc;
  uint32_t n_runs = mw_load_u16le(p + pos);
  rc = need(pos + 2, 4 * (size_t)n_runs, len, "runs", err);
  if (rc < 0) return rc;
  if (n_runs == 0) return mw_err_set(err, -EBADMSG, "deletion file: empty run container at %zu", pos);
  uint64_t sum = 0;
  int64_t prev_end = -1;
  for (uint32_t i = 0; i < n_runs; i++) {
    uint32_t start = mw_load_u16le(p + pos + 2 + 4 * i);
    uint32_t lm1 = mw_load_u16le(p + pos + 4 + 4 * i);
    if ((int64_t)start <= prev_end || start + lm1 > 0xffff)
      return mw_err_set(err, -EBADMSG, "deletion file: run %u at byte %zu overlaps or overflows",
                        i, pos + 2 + 4 * (size_t)i);
    prev_end = start + lm1;
    sum += lm1 + 1;
  }
  if (sum != card)
    return mw_err_set(err, -EBADMSG,
                      "deletion file: run container at byte %zu holds %" PRIu64
                      " values, header says %u", pos, sum, card);
  *size = 2 + 4 * (size_t)n_runs;
  *last = (uint32_t)prev_end;
  return 0;
}

/* Validate the whole file; see the top comment for the checks. */
static int scan(const uint8_t *p, size_t len, scan_t *out, mw_err_t *err) {
  assert(out != NULL);
  out->card = 0;
  out->max_value = 0;
  if (len > MW_DELETION_MAX_BYTES)
    return mw_err_set(err, -EBADMSG, "deletion file: %zu bytes exceeds the %zu-byte limit", len,
                      MW_DELETION_MAX_BYTES);
  int rc = need(0, 4, len, "cookie", err);
  if (rc < 0) return rc;
  uint32_t cookie = mw_load_u32le(p);
  size_t pos, n, runflags = 0;
  bool has_offsets;
  if (cookie == COOKIE_NO_RUN) {
    if ((rc = need(4, 4, len, "container count", err)) < 0) return rc;
    uint32_t cnt = mw_load_u32le(p + 4);
    if (cnt > MAX_KEYS)
      return mw_err_set(err, -EBADMSG, "deletion file: %u containers at byte 4", cnt);
    n = cnt;
    pos = 8;
    has_offsets = true;
  } else if ((cookie & 0xffff) == COOKIE_RUN) {
    n = (cookie >> 16) + 1;
    runflags = 4;
    pos = 4 + (n + 7) / 8;
    if ((rc = need(4, (n + 7) / 8, len, "run flags", err)) < 0) return rc;
    has_offsets = n >= NO_OFFSET_THRESHOLD;
  } else {
    return mw_err_set(err, -EBADMSG, "deletion file: bad cookie 0x%08x at byte 0", cookie);
  }
  size_t keys = pos;
  if ((rc = need(keys, 4 * n, len, "key/cardinality table", err)) < 0) return rc;
  pos += 4 * n;
  size_t offs = pos;
  if (has_offsets) {
    if ((rc = need(offs, 4 * n, len, "offset table", err)) < 0) return rc;
    pos += 4 * n;
  }
  for (size_t k = 0; k < n; k++) {
    uint32_t key = mw_load_u16le(p + keys + 4 * k);
    uint32_t card = (uint32_t)mw_load_u16le(p + keys + 4 * k + 2) + 1;
    if (k > 0 && key <= mw_load_u16le(p + keys + 4 * (k - 1)))
      return mw_err_set(err, -EBADMSG, "deletion file: key at byte %zu not ascending", keys + 4 * k);
    if (has_offsets && mw_load_u32le(p + offs + 4 * k) != pos)
      return mw_err_set(err, -EBADMSG, "deletion file: offset at byte %zu is %u, container is at %zu",
                        offs + 4 * k, mw_load_u32le(p + offs + 4 * k), pos);
    bool is_run = runflags && (p[runflags + k / 8] >> (k % 8)) & 1;
    uint32_t last = 0;
    size_t size = 0;
    if (is_run) {
      rc = scan_runs(p, pos, len, card, &size, &last, err);
    } else if (card <= ARRAY_MAX_CARD) {
      size = 2 * (size_t)card;
      rc = need(pos, size, len, "array container", err);
      if (rc == 0) rc = scan_array(p, pos, card, &last, err);
    } else {
      size = BITMAP_BYTES;
      rc = need(pos, size, len, "bitmap container", err);
      if (rc == 0) rc = scan_bitmap(p, pos, card, &last, err);
    }
    if (rc < 0) return rc;
    pos += size;
    out->card += card;
    out->max_value = (uint64_t)key << 16 | last;
  }
  if (pos != len)
    return mw_err_set(err, -EBADMSG, "deletion file: %zu trailing bytes after byte %zu", len - pos,
                      pos);
  assert(out->card <= (uint64_t)n << 16);
  return 0;
}

int mw_deletion_cardinality(const uint8_t *p, size_t len, uint64_t *card, mw_err_t *err) {
  assert(p != NULL || len == 0);
  assert(card != NULL);
  scan_t s;
  int rc = scan(p, len, &s, err);
  if (rc < 0) return rc;
  *card = s.card;
  return 0;
}

int mw_deletion_decode(const uint8_t *p, size_t len, uint64_t max_rows, uint32_t **offsets,
                       size_t *n, mw_err_t *err) {
  assert(p != NULL || len == 0);
  assert(offsets != NULL);
  assert(n != NULL);
  *offsets = NULL;
  *n = 0;
  scan_t s;
  int rc = scan(p, len, &s, err);
  if (rc < 0) return rc;
  if (s.card > 0 && s.max_value >= max_rows)
    return mw_err_set(err, -EBADMSG, "deletion file: offset %" PRIu64 " not below %" PRIu64
                      " rows", s.max_value, max_rows);
  if (s.card == 0) return 0;
  roaring_bitmap_t *r = roaring_bitmap_portable_deserialize_safe((const char *)p, len);
  if (!r) return mw_err_set(err, -EBADMSG, "deletion file: CRoaring rejected %zu bytes", len);
  uint32_t *vals = NULL;
  if (roaring_bitmap_portable_deserialize_size((const char *)p, len) != len ||
      roaring_bitmap_get_cardinality(r) != s.card) {
    rc = mw_err_set(err, -EBADMSG, "deletion file: CRoaring disagrees on size or cardinality");
    goto fail;
  }
  vals = malloc((size_t)s.card * sizeof *vals);
  if (!vals) {
    rc = -ENOMEM;
    goto fail;
  }
  roaring_bitmap_to_uint32_array(r, vals);
  if (vals[s.card - 1] != s.max_value) {
    rc = mw_err_set(err, -EBADMSG, "deletion file: CRoaring disagrees on the largest offset");
    goto fail;
  }
  roaring_bitmap_free(r);
  *offsets = vals;
  *n = (size_t)s.card;
  return 0;
fail:
  roaring_bitmap_free(r);
  free(vals);
  return rc;
}

int mw_deletion_encode(const uint32_t *offsets, size_t n, mw_buf_t *out, mw_err_t *err) {
  assert(offsets != NULL || n == 0);
  assert(out != NULL);
  for (size_t i = 1; i < n; i++)
    if (offsets[i] <= offsets[i - 1])
      return mw_err_set(err, -EINVAL, "deletion encode: offset %zu (%u) not above %u", i,
                        offsets[i], offsets[i - 1]);
  roaring_bitmap_t *r = roaring_bitmap_of_ptr(n, offsets);
  if (!r) return -ENOMEM;
  int rc = 0;
  size_t size = roaring_bitmap_portable_size_in_bytes(r);
  if (size > MW_DELETION_MAX_BYTES) {
    rc = mw_err_set(err, -EFBIG, "deletion encode: %zu bytes", size);
    goto done;
  }
  size_t base = out->len;
  uint8_t *dst = mw_buf_extend(out, size);
  if (!dst) {
    rc = -ENOMEM;
    goto done;
  }
  size_t wrote = roaring_bitmap_portable_serialize(r, (char *)dst);
  if (wrote != size || mw_load_u32le(dst) != COOKIE_NO_RUN) {
    out->len = base;
    rc = mw_err_set(err, -EIO, "deletion encode: CRoaring wrote %zu of %zu bytes or a run cookie",
                    wrote, size);
  }
done:
  roaring_bitmap_free(r);
  return rc;
}

int mw_deletion_name_format(uint64_t fragment_id, uint64_t read_version, uint64_t id, char *out,
                            size_t out_len) {
  assert(out != NULL);
  int n = snprintf(out, out_len, "%" PRIu64 "-%" PRIu64 "-%" PRIu64 ".bin", fragment_id,
                   read_version, id);
  if (n < 0 || (size_t)n >= out_len) return -EINVAL;
  assert(n < MW_DELETION_NAME_BYTES);
  return n;
}

/* A canonical decimal u64 at *s; advances *s. */
static int parse_u64(const char **s, uint64_t *v) {
  const char *q = *s;
  uint64_t x = 0;
  if (*q < '0' || *q > '9') return -EINVAL;
  if (*q == '0' && q[1] >= '0' && q[1] <= '9') return -EINVAL;
  for (; *q >= '0' && *q <= '9'; q++) {
    uint64_t d = (uint64_t)(*q - '0');
    if (x > (UINT64_MAX - d) / 10) return -EINVAL;
    x = x * 10 + d;
  }
  *s = q;
  *v = x;
  return 0;
}

int mw_deletion_name_parse(const char *name, uint64_t *fragment_id, uint64_t *read_version,
                           uint64_t *id) {
  assert(name != NULL);
  assert(fragment_id != NULL);
  assert(read_version != NULL);
  assert(id != NULL);
  const char *s = name;
  uint64_t f, v, i;
  if (parse_u64(&s, &f) < 0 || *s++ != '-') return -EINVAL;
  if (parse_u64(&s, &v) < 0 || *s++ != '-') return -EINVAL;
  if (parse_u64(&s, &i) < 0) return -EINVAL;
  if (strcmp(s, ".arrow") == 0) return -ENOTSUP;
  if (strcmp(s, ".bin") != 0) return -EINVAL;
  *fragment_id = f;
  *read_version = v;
  *id = i;
  return 0;
}

/* ------------------------------------------------------- ARROW_ARRAY kind */

/* An Arrow IPC file: "ARROW1" 00 00, padding, the stream (schema message,
 * record batches, EOS), the Footer flatbuffer, i32 footer length, "ARROW1".
 * The footer's recordBatches blocks (offset i64, metaDataLength i32, pad,
 * bodyLength i64) locate the batches; the schema message starts at the first
 * non-zero word after the magic. The pieces are put back together as a
 * stream and decoded by the IPC codec, which checks every buffer. */
#define ARROW_MAGIC "ARROW1"
#define ARROW_BLOCK_BYTES 24
#define ARROW_MAX_BATCHES 1024

static int arrow_stream(const uint8_t *p, size_t len, mw_buf_t *out, mw_err_t *err) {
  if (len < 8 + 10 || memcmp(p, ARROW_MAGIC, 6) != 0 || memcmp(p + len - 6, ARROW_MAGIC, 6) != 0)
    return mw_err_set(err, -EBADMSG, "deletion file (.arrow): no ARROW1 magic at both ends (%zu bytes)",
                      len);
  uint32_t flen = mw_load_u32le(p + len - 10);
  if (flen > len - 18)
    return mw_err_set(err, -EBADMSG, "deletion file (.arrow): footer of %u bytes in a %zu-byte file",
                      flen, len);
  size_t fstart = len - 10 - flen;
  mw_fbr_t r = {.p = p + fstart, .n = flen, .base = fstart, .err = err};
  mw_fbt_t footer;
  size_t at = 0, count = 0;
  int rc = mw_fbr_root(&r, &footer, "arrow footer");
  if (rc == 0)
    rc = mw_fbr_vector(&r, &footer, 3, ARROW_BLOCK_BYTES, ARROW_MAX_BATCHES, &at, &count,
                       "footer.recordBatches");
  if (rc < 0) return rc;
  if (count == 0) return mw_err_set(err, -EBADMSG, "deletion file (.arrow): no record batch");
  uint64_t first = mw_load_u64le(r.p + at);
  size_t start = 8;
  while (start + 4 <= first && start < fstart && mw_load_u32le(p + start) == 0) start += 8;
  if (first > fstart || start >= first || mw_load_u32le(p + start) != 0xffffffffu)
    return mw_err_set(err, -EBADMSG, "deletion file (.arrow): no schema message before byte %" PRIu64,
                      first);
  rc = mw_buf_append(out, p + start, (size_t)first - start);
  for (size_t i = 0; rc == 0 && i < count; i++) {
    const uint8_t *b = r.p + at + ARROW_BLOCK_BYTES * i;
    uint64_t off = mw_load_u64le(b), body = mw_load_u64le(b + 16);
    uint32_t meta = mw_load_u32le(b + 8);
    if (off > fstart || meta > fstart - off || body > fstart - off - meta)
      return mw_err_set(err, -EBADMSG, "deletion file (.arrow): record batch %zu at byte %" PRIu64
                        " runs past the footer", i, off);
    rc = mw_buf_append(out, p + off, (size_t)(meta + body));
  }
  static const uint8_t eos[8] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0};
  if (rc == 0) rc = mw_buf_append(out, eos, sizeof eos);
  return rc;
}

int mw_deletion_arrow_decode(const uint8_t *p, size_t len, uint64_t max_rows, uint32_t **offsets,
                             size_t *n, mw_err_t *err) {
  assert(p != NULL || len == 0);
  assert(offsets != NULL);
  assert(n != NULL);
  *offsets = NULL;
  *n = 0;
  if (len > MW_DELETION_MAX_BYTES)
    return mw_err_set(err, -EBADMSG, "deletion file (.arrow): %zu bytes exceeds the %zu-byte limit",
                      len, MW_DELETION_MAX_BYTES);
  mw_buf_t stream = MW_BUF_INIT;
  mw_ipc_stream_t s = {0};
  uint32_t *vals = NULL;
  int rc = arrow_stream(p, len, &stream, err);
  if (rc == 0) rc = mw_ipc_decode(stream.data, stream.len, NULL, &s, err);
  mw_buf_free(&stream);
  if (rc < 0) return rc;
  if (s.schema.n_fields != 1 || s.schema.fields[0].type != MW_T_UINT32 ||
      strcmp(s.schema.fields[0].name, "row_id") != 0) {
    rc = mw_err_set(err, -EBADMSG, "deletion file (.arrow): expected one uint32 column row_id");
    goto done;
  }
  int64_t total = 0;
  for (size_t i = 0; i < s.n_batches; i++) {
    if (s.batches[i].cols[0].null_count != 0) {
      rc = mw_err_set(err, -EBADMSG, "deletion file (.arrow): batch %zu has null row ids", i);
      goto done;
    }
    total += s.batches[i].n_rows;
  }
  if ((uint64_t)total > max_rows) {
    rc = mw_err_set(err, -EBADMSG, "deletion file (.arrow): %" PRId64 " offsets for %" PRIu64 " rows",
                    total, max_rows);
    goto done;
  }
  if (total > 0 && (vals = malloc((size_t)total * sizeof *vals)) == NULL) {
    rc = -ENOMEM;
    goto done;
  }
  size_t k = 0;
  for (size_t i = 0; i < s.n_batches; i++) {
    memcpy(vals + k, s.batches[i].cols[0].values.data, (size_t)s.batches[i].n_rows * 4);
    k += (size_t)s.batches[i].n_rows;
  }
  if (k > 1) qsort(vals, k, sizeof *vals, mw_u32_cmp);
  for (size_t i = 0; i < k; i++) {
    if ((i > 0 && vals[i] == vals[i - 1]) || vals[i] >= max_rows) {
      rc = mw_err_set(err, -EBADMSG, "deletion file (.arrow): offset %u repeated or not below %" PRIu64
                      " rows", vals[i], max_rows);
      goto done;
    }
  }
  *offsets = vals;
  *n = k;
  vals = NULL;
done:
  free(vals);
  mw_ipc_stream_free(&s);
  return rc;
}

int64_t mw_deletion_union(const uint32_t *a, size_t na, const uint32_t *b, size_t nb,
                          uint32_t **out) {
  assert(out != NULL);
  assert(a != NULL || na == 0);
  assert(b != NULL || nb == 0);
  *out = NULL;
  for (size_t i = 1; i < na; i++)
    if (a[i] <= a[i - 1]) return -EINVAL;
  for (size_t i = 1; i < nb; i++)
    if (b[i] <= b[i - 1]) return -EINVAL;
  if (na + nb == 0) return 0;
  uint32_t *u = malloc((na + nb) * sizeof *u);
  if (u == NULL) return -ENOMEM;
  size_t i = 0, j = 0, k = 0;
  while (i < na || j < nb) {
    if (j == nb || (i < na && a[i] < b[j])) u[k++] = a[i++];
    else if (i == na || b[j] < a[i]) u[k++] = b[j++];
    else {
      u[k++] = a[i++];
      j++;
    }
  }
  assert(k <= na + nb);
  assert(k >= (na > nb ? na : nb));
  *out = u;
  return (int64_t)k;
}
