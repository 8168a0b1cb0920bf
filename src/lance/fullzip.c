/*
 * fullzip.c — FullZip page bodies of nested fixed-width columns (fullzip.h).
 *
 * Design: two pure loops over one buffer each way. The reader walks buffer
 * 0 level by level: it reads the control word, splits it into rep (high
 * bits) and def (low bits_def bits), and copies the value after it when the
 * level is visible; a level with a non-zero rep level equal to the maximum
 * rep (or any level when there is no repetition) starts a row, and the
 * byte offset of every row start is compared with the repetition index.
 * The writer emits the same for one list level (the HNSW graph's adjacency
 * lists), choosing the repetition index width as Lance's
 * BytepackedIntegerEncoder does: the narrowest of 1, 2, 4, 8 bytes that
 * holds the buffer's total length.
 */
#include "lance/fullzip.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

size_t mw_fullzip_word_bytes(unsigned bits_rep, unsigned bits_def) {
  unsigned bits = bits_rep + bits_def;
  return bits == 0 ? 0 : bits <= 8 ? 1 : bits <= 16 ? 2 : 4;
}

static size_t index_width(uint64_t max_value) {
  return max_value <= UINT8_MAX ? 1 : max_value <= UINT16_MAX ? 2 : max_value <= UINT32_MAX ? 4 : 8;
}

static uint64_t load_width(const uint8_t *p, size_t w) {
  uint64_t v = 0;
  for (size_t i = 0; i < w; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

static int put_width(mw_buf_t *b, uint64_t v, size_t w) {
  uint8_t tmp[8];
  for (size_t i = 0; i < w; i++) tmp[i] = (uint8_t)(v >> (8 * i));
  return mw_buf_append(b, tmp, w);
}

static int check_shape(const mw_fullzip_shape_t *s, mw_err_t *err) {
  if (s->bits_rep > MW_FULLZIP_MAX_LEVEL_BITS || s->bits_def > MW_FULLZIP_MAX_LEVEL_BITS)
    return mw_err_set(err, -EBADMSG, "fullzip: %u rep bits, %u def bits (limit %d each)", s->bits_rep,
                      s->bits_def, MW_FULLZIP_MAX_LEVEL_BITS);
  if (s->value_bytes == 0 || s->value_bytes > MW_FULLZIP_MAX_VALUE_BYTES)
    return mw_err_set(err, -EBADMSG, "fullzip: %zu-byte values", s->value_bytes);
  if (s->num_visible_items > s->num_items)
    return mw_err_set(err, -EBADMSG, "fullzip: %llu visible of %llu items",
                      (unsigned long long)s->num_visible_items, (unsigned long long)s->num_items);
  return 0;
}

/* The repetition index: rows + 1 entries of one width, equal to starts[]. */
static int check_repidx(const mw_fullzip_shape_t *s, const uint8_t *ri, size_t ri_len,
                        const mw_buf_t *starts, mw_err_t *err) {
  uint64_t n = s->rows + 1;
  size_t w = ri_len / n;
  if (ri_len % n != 0 || (w != 1 && w != 2 && w != 4 && w != 8))
    return mw_err_set(err, -EBADMSG, "fullzip: repetition index of %zu bytes for %llu rows", ri_len,
                      (unsigned long long)s->rows);
  const uint64_t *st = (const uint64_t *)(const void *)starts->data;
  for (uint64_t r = 0; r < n; r++) {
    uint64_t v = load_width(ri + r * w, w);
    if (v != st[r])
      return mw_err_set(err, -EBADMSG, "fullzip: repetition index entry %llu is %llu, row starts at byte %llu",
                        (unsigned long long)r, (unsigned long long)v, (unsigned long long)st[r]);
  }
  return 0;
}

int mw_fullzip_unzip(const mw_fullzip_shape_t *s, const uint8_t *buf, size_t len,
                     const uint8_t *repidx, size_t repidx_len, uint16_t *rep, uint16_t *def,
                     mw_buf_t *values, mw_err_t *err) {
  assert(s != NULL);
  assert(buf != NULL || len == 0);
  assert(rep != NULL);
  assert(def != NULL);
  assert(values != NULL);
  int rc = check_shape(s, err);
  if (rc < 0) return rc;
  size_t ww = mw_fullzip_word_bytes(s->bits_rep, s->bits_def), at = 0;
  uint32_t def_mask = (1u << s->bits_def) - 1, max_rep = (1u << s->bits_rep) - 1;
  uint64_t visible = 0, rows = 0;
  mw_buf_t starts = MW_BUF_INIT;
  for (uint64_t i = 0; i < s->num_items; i++) {
    if (len - at < ww) { rc = mw_err_set(err, -EBADMSG, "fullzip: level %llu past the %zu-byte buffer", (unsigned long long)i, len); goto done; }
    uint32_t word = (uint32_t)load_width(buf + at, ww);
    uint32_t r = word >> s->bits_def, d = word & def_mask;
    if (r > max_rep) { rc = mw_err_set(err, -EBADMSG, "fullzip: level %llu has rep %u", (unsigned long long)i, r); goto done; }
    rep[i] = (uint16_t)r, def[i] = (uint16_t)d;
    if (s->bits_rep == 0 || r == max_rep) { /* a new row */
      if (rows++ >= s->rows) { rc = mw_err_set(err, -EBADMSG, "fullzip: more than %llu rows", (unsigned long long)s->rows); goto done; }
      uint64_t st = at;
      if ((rc = mw_buf_append(&starts, &st, 8)) < 0) goto done;
    } else if (i == 0) {
      rc = mw_err_set(err, -EBADMSG, "fullzip: first level has rep %u, not a row start", r);
      goto done;
    }
    at += ww;
    if (d > s->max_visible_def) continue;
    if (len - at < s->value_bytes) { rc = mw_err_set(err, -EBADMSG, "fullzip: value of level %llu past the buffer", (unsigned long long)i); goto done; }
    if (++visible > s->num_visible_items) { rc = mw_err_set(err, -EBADMSG, "fullzip: more than %llu visible items", (unsigned long long)s->num_visible_items); goto done; }
    if ((rc = mw_buf_append(values, buf + at, s->value_bytes)) < 0) goto done;
    at += s->value_bytes;
  }
  if (at != len || visible != s->num_visible_items || rows != s->rows) {
    rc = mw_err_set(err, -EBADMSG, "fullzip: %zu of %zu bytes, %llu of %llu visible items, %llu of %llu rows", at,
                    len, (unsigned long long)visible, (unsigned long long)s->num_visible_items,
                    (unsigned long long)rows, (unsigned long long)s->rows);
    goto done;
  }
  uint64_t end = at;
  if ((rc = mw_buf_append(&starts, &end, 8)) < 0) goto done;
  rc = s->bits_rep && repidx ? check_repidx(s, repidx, repidx_len, &starts, err) : 0;
done:
  mw_buf_free(&starts);
  return rc;
}

int mw_fullzip_zip_list(const int32_t *offsets, uint64_t rows, const uint8_t *values,
                        size_t value_bytes, mw_buf_t *zipped, mw_buf_t *repidx,
                        mw_fullzip_shape_t *s) {
  assert(offsets != NULL);
  assert(zipped != NULL);
  assert(repidx != NULL);
  assert(s != NULL);
  assert(value_bytes > 0);
  assert(value_bytes <= MW_FULLZIP_MAX_VALUE_BYTES);
  bool empties = false;
  for (uint64_t r = 0; r < rows; r++) empties |= offsets[r + 1] == offsets[r];
  memset(s, 0, sizeof *s);
  s->bits_rep = 1, s->bits_def = empties ? 1 : 0, s->value_bytes = value_bytes, s->rows = rows;
  uint64_t items = (uint64_t)(offsets[rows] - offsets[0]);
  s->num_visible_items = items;
  mw_buf_t starts = MW_BUF_INIT;
  size_t base = zipped->len;
  int rc = 0;
  for (uint64_t r = 0; r < rows && rc == 0; r++) {
    uint64_t st = zipped->len - base;
    rc = mw_buf_append(&starts, &st, 8);
    int32_t a = offsets[r], b = offsets[r + 1];
    assert(b >= a);
    if (rc == 0 && a == b) rc = mw_buf_put_u8(zipped, (uint8_t)(1u << s->bits_def | 1u)), s->num_items++;
    for (int32_t k = a; k < b && rc == 0; k++, s->num_items++) {
      rc = mw_buf_put_u8(zipped, (uint8_t)(k == a ? 1u << s->bits_def : 0));
      if (rc == 0) rc = mw_buf_append(zipped, values + (size_t)k * value_bytes, value_bytes);
    }
  }
  uint64_t end = zipped->len - base;
  if (rc == 0) rc = mw_buf_append(&starts, &end, 8);
  size_t w = index_width(end);
  const uint64_t *st = (const uint64_t *)(const void *)starts.data;
  for (uint64_t r = 0; r <= rows && rc == 0; r++) rc = put_width(repidx, st[r], w);
  mw_buf_free(&starts);
  return rc;
}
