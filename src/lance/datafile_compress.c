/*
 * datafile_compress.c — General{ZSTD, LZ4}: the compressed buffers of a
 * Lance 2.1/2.2 page, both directions (lance-files.md §3.2).
 *
 * Design: the writer compresses a MiniBlock chunk's value buffer with zstd
 * when asked (mw_df_zstd_wrap: one context per file, made by the writer's
 * set-up). The reader strips the General wrapper of a value or dictionary
 * encoding (mw_df_unwrap_general) and decompresses the buffer into scratch
 * memory the page context owns (mw_df_general_buf). A raw length in the
 * file is only a claim: zstd output grows as it really appears, stopping
 * one byte past the claim, and every claim is bounded by the caller's
 * max_raw (the page's values at their widest, or the column's byte limit).
 * The zstd decompression context is the read options' or the file's own,
 * made on the first zstd buffer and freed by mw_datafile_close.
 *
 * Sample: a zstd value buffer, as the writer makes it and the reader takes
 * it (a bare frame, magic 28 b5 2f fd, is taken too):
 *   00 10 00 00 00 00 00 00 | 28 b5 2f fd ...
 *   u64 LE raw length 4096    the zstd frame
 * and an LZ4 one (Lance's dictionaries): u32 LE raw length || LZ4 block.
 */
#include "lance/datafile_internal.h"

#include "lance/lz4_block.h"

/* The chunk's raw value buffer (n bytes) as u64 LE n || zstd frame in
 * w->zbuf. */
int mw_df_zstd_wrap(writer_t *w, const uint8_t *raw, size_t n) {
  assert(w->zstd);
  assert(w->zc != NULL);
  size_t bound = ZSTD_compressBound(n);
  mw_buf_reset(&w->zbuf);
  uint8_t *z = mw_buf_extend(&w->zbuf, 8 + bound);
  if (z == NULL) return -ENOMEM;
  mw_store_u64le(z, n);
  size_t zn = ZSTD_compressCCtx(w->zc, z + 8, bound, raw, n, w->zstd_level);
  if (ZSTD_isError(zn)) return mw_err_set(w->err, -EIO, "zstd: %s", ZSTD_getErrorName(zn));
  assert(zn <= bound);
  w->zbuf.len = 8 + zn;
  return 0;
}

/* Strip a General{ZSTD|LZ4} wrapper; returns the inner encoding and the
 * scheme (0 when there is no wrapper). */
int mw_df_unwrap_general(rctx_t *x, const CE *vc, const CE **inner, int *scheme) {
  *scheme = 0;
  *inner = vc;
  if (vc->compression_case != CE_GENERAL) return 0;
  if (vc->general->values == NULL || vc->general->compression == NULL)
    return BAD(x, "general compression incomplete", x->col, x->page);
  int sc = (int)vc->general->compression->scheme;
  if (sc != SCHEME_ZSTD && sc != SCHEME_LZ4) return UNSUP(x, "general compression scheme %d", x->col, x->page, sc);
  *scheme = sc;
  *inner = vc->general->values;
  assert(*scheme != 0); /* with a wrapper, the caller decompresses */
  if ((*inner)->compression_case == CE_GENERAL) return UNSUP(x, "nested general compression", x->col, x->page);
  return 0;
}

/* Decompress the frames in src into out (reset first), growing out as the
 * output really appears: the raw length in the file is only a claim, and a
 * 6 KiB file that claimed 2 GiB once made this reader allocate 2 GiB up
 * front (fuzz_datafile, regress-zstd-claims-2gib). Stops with -EBADMSG past
 * raw bytes or on a corrupt or truncated frame; out->len = bytes produced. */
#define ZSTD_FIRST_GROW_BYTES ((size_t)64 << 10)
static int zstd_grow(ZSTD_DCtx *dc, mw_buf_t *out, const uint8_t *src, size_t sn, size_t raw) {
  assert(dc != NULL);
  mw_buf_reset(out);
  ZSTD_inBuffer in = {src, sn, 0};
  size_t want = raw + 1; /* one byte more: a frame longer than claimed shows */
  int rc = 0;
  for (;;) {
    if (out->len == want) { rc = -EBADMSG; break; }
    if (out->cap == out->len) {
      size_t grow = out->len > ZSTD_FIRST_GROW_BYTES ? out->len : ZSTD_FIRST_GROW_BYTES;
      if (grow > want - out->len) grow = want - out->len;
      if ((rc = mw_buf_reserve(out, grow)) < 0) break;
    }
    size_t room = out->cap - out->len;
    if (room > want - out->len) room = want - out->len;
    ZSTD_outBuffer o = {out->data + out->len, room, 0};
    size_t r = ZSTD_decompressStream(dc, &o, &in);
    out->len += o.pos;
    if (ZSTD_isError(r)) { rc = -EBADMSG; break; }
    if (r == 0 && in.pos == in.size) break;           /* last frame complete */
    if (in.pos == in.size && o.pos < o.size) { rc = -EBADMSG; break; } /* truncated */
  }
  assert(out->len <= want);
  return rc;
}

/* The context the file's zstd buffers decode with, reset to a new frame:
 * the options' one, or the file's own, made on the first zstd buffer and
 * kept until close. NULL when it cannot be made. */
static ZSTD_DCtx *file_dctx(mw_datafile_t *f) {
  if (f->zstd_dctx == NULL) {
    f->zstd_dctx = ZSTD_createDCtx();
    f->zstd_dctx_owned = f->zstd_dctx != NULL;
    return f->zstd_dctx;
  }
  /* a corrupt frame leaves the context mid-frame; the next buffer starts clean */
  size_t r = ZSTD_DCtx_reset(f->zstd_dctx, ZSTD_reset_session_only);
  assert(!ZSTD_isError(r));
  (void)r;
  return f->zstd_dctx;
}

/* Decompress a ZSTD value buffer (u64 raw length || frame, or a bare frame)
 * into dst; *p and *n then describe dst. */
int mw_df_zstd_buf(rctx_t *x, mw_buf_t *dst, const uint8_t **p, size_t *n, size_t max_raw) {
  /* the output is never the input: it is decoded into scratch */
  assert(dst->cap == 0 || *p < dst->data || *p >= dst->data + dst->cap);
  const uint8_t *src = *p;
  size_t sn = *n;
  uint64_t raw;
  if (sn >= 4 && src[0] == 0x28 && src[1] == 0xb5 && src[2] == 0x2f && src[3] == 0xfd) {
    unsigned long long fc = ZSTD_getFrameContentSize(src, sn);
    if (fc == ZSTD_CONTENTSIZE_ERROR || fc == ZSTD_CONTENTSIZE_UNKNOWN)
      return BAD(x, "zstd frame without size", x->col, x->page);
    raw = fc;
  } else {
    if (sn < 8) return BAD(x, "zstd buffer of %zu bytes", x->col, x->page, sn);
    raw = mw_load_u64le(src);
    src += 8, sn -= 8;
  }
  if (raw > max_raw) return BAD(x, "zstd raw length %llu exceeds %zu", x->col, x->page, (unsigned long long)raw, max_raw);
  ZSTD_DCtx *dc = file_dctx(x->f);
  if (dc == NULL) return -ENOMEM;
  int rc = zstd_grow(dc, dst, src, sn, (size_t)raw);
  if (rc == -ENOMEM) return rc;
  if (rc < 0 || dst->len != raw) return BAD(x, "zstd frame corrupt", x->col, x->page);
  *p = dst->data;
  *n = dst->len;
  return 0;
}

/* Decompress an LZ4 buffer (u32 LE raw length || LZ4 block) into dst. */
static int lz4_buf(rctx_t *x, mw_buf_t *dst, const uint8_t **p, size_t *n, size_t max_raw) {
  assert(dst->cap == 0 || *p < dst->data || *p >= dst->data + dst->cap); /* not the input */
  if (*n < 4) return BAD(x, "lz4 buffer of %zu bytes", x->col, x->page, *n);
  uint32_t raw = mw_load_u32le(*p);
  if (raw > max_raw) return BAD(x, "lz4 raw length %u exceeds %zu", x->col, x->page, raw, max_raw);
  mw_buf_reset(dst);
  if (mw_buf_reserve(dst, (size_t)raw + 1) < 0) return -ENOMEM;
  if (mw_lz4_block_decode(*p + 4, *n - 4, dst->data, raw) < 0) return BAD(x, "lz4 block corrupt", x->col, x->page);
  dst->len = raw;
  *p = dst->data;
  *n = dst->len;
  return 0;
}

/* Decompress (p, n) by the scheme unwrap_general found, into dst. */
int mw_df_general_buf(rctx_t *x, int scheme, mw_buf_t *dst, const uint8_t **p, size_t *n, size_t max_raw) {
  if (scheme == SCHEME_ZSTD) return mw_df_zstd_buf(x, dst, p, n, max_raw);
  if (scheme == SCHEME_LZ4) return lz4_buf(x, dst, p, n, max_raw);
  assert(scheme == 0);
  return 0;
}

