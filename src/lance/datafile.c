/*
 * datafile.c — Lance v2 data files (lance-files.md §2, §3, §8).
 *
 * Writer (2.2 only). One Lance column per field; pages of at most
 * max_page_bytes, each page one of:
 *   - MiniBlock (ints, floats, bool, utf8/binary): buffer 0 = u32 chunk words,
 *     buffer 1 = chunks. A chunk is
 *       u16 num_levels | [u16 def_bytes] | u32 value_bytes | 0xFE pad to 8 |
 *       [u16 def levels, 0xFE pad to 8] | value buffer (zero-padded to 8)
 *     and its word is ((chunk_bytes/8 - 1) << 4) | log2(values), log2 = 0 for
 *     the last chunk of a page. Chunks hold 4 KiB of fixed-width values (1024
 *     x 32-bit, 512 x 64-bit), 4096 bools, or a power of two of strings
 *     (value buffer = (n+1) u32 offsets from the buffer start, then bytes).
 *     Pages with nulls carry def levels as raw u16 (Flat{16}, NULLABLE_ITEM);
 *     pages without nulls carry none (ALL_VALID_ITEM).
 *   - FullZip (fixed_size_list<float32, D>): buffer 0 = rows back to back, each
 *     [1 control byte = def level, only when the page has nulls] + D floats.
 *   - Constant (a bool column that is all false and has no nulls, like
 *     `_tombstone`): no buffers, inline_value 0x00. A column all null: no
 *     buffers, no value, layers [NULLABLE_ITEM]. utf8/binary all empty:
 *     page buffer 0 = the empty value (constant_scalar's form). As Lance
 *     writes them (docs/sstable.md "Pages with no items or no values").
 * With zstd, each chunk's value buffer becomes u64 LE raw length || zstd
 * frame and the value compression is General{ZSTD, inner}.
 *
 * The file (all offsets relative to its start; page and global buffers start
 * on 64-byte boundaries, padding 0x48 'H' as Lance does):
 *   pages | extra global buffers 1..N | FileDescriptor (gbuf 0) |
 *   ColumnMetadata 0..C-1 | CMO {u64 pos, u64 size}*C | GBO {..}*G |
 *   u64 colmeta0, u64 cmo, u64 gbo, u32 G, u32 C, u16 2, u16 2, "LANC"
 *
 * Sample: the column metadata of a 3000-row non-null float64 column (§2.2):
 *   0a 29 12 27 0a 25 0a 1f "/lance.encodings.ColumnEncoding" 12 02 0a 00
 *   12 4a 0a 06 <2 page buffer offsets> 12 04 18 f0 bb 01 18 b8 17
 *         22 37 12 35 0a 33 0a 1d "/lance.encodings21.PageLayout" 12 12
 *         0a 10 1a 04 0a 02 08 40 32 01 01 38 01 48 b8 17 50 01
 *
 * Reader: parses the footer and tables of 2.0 (footer 0.3 or 2.0), 2.1 and
 * 2.2 files, checks every offset against the file size before use, and
 * decodes each page into a column that was pre-sized for the file's rows
 * (rows are bounded by read_opts.max_rows, so allocations are bounded).
 * 2.0 page encodings are parsed by a small protobuf wire reader (we do not
 * compile Lance's legacy encodings proto). InlineBitpacking is FastLanes:
 * per 1024 values a T-sized bit width word then W*128 bytes, value
 * (row, lane) at bit row*W of lane `lane`'s word stream.
 */
#include "lance/datafile.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "encodings_v2_1.pb-c.h"
#include "file2.pb-c.h"
#include "google/protobuf/any.pb-c.h"
#include "lance/lance_schema.h"
#include "lance/fsst.h"
#include "lance/fullzip.h"
#include "lance/lz4_block.h"

#define PAD_PAGE 0x48
#define PAD_CHUNK 0xFE
#define CHUNK_BYTES 4096
#define CHUNK_MAX_VALUES 4096
#define CHUNK_MAX_DECODE_VALUES 32768
#define VAR_MINIBLOCK_MAX_LEN 256 /* a longer utf8/binary value makes its page FullZip */
#define FASTLANES_BLOCK 1024
#define DEFAULT_ZSTD_LEVEL 3
#define URL_PAGE21 "/lance.encodings21.PageLayout"
#define URL_ARRAY20 "/lance.encodings.ArrayEncoding"
#define URL_COLUMN "/lance.encodings.ColumnEncoding"

/* Shorter names for protobuf-c's generated identifiers. */
typedef Lance__Encodings21__CompressiveEncoding CE;
#define CE_INIT LANCE__ENCODINGS21__COMPRESSIVE_ENCODING__INIT
#define CE_FLAT LANCE__ENCODINGS21__COMPRESSIVE_ENCODING__COMPRESSION_FLAT
#define CE_VARIABLE LANCE__ENCODINGS21__COMPRESSIVE_ENCODING__COMPRESSION_VARIABLE
#define CE_OOL_BP LANCE__ENCODINGS21__COMPRESSIVE_ENCODING__COMPRESSION_OUT_OF_LINE_BITPACKING
#define CE_INLINE_BP LANCE__ENCODINGS21__COMPRESSIVE_ENCODING__COMPRESSION_INLINE_BITPACKING
#define CE_RLE LANCE__ENCODINGS21__COMPRESSIVE_ENCODING__COMPRESSION_RLE
#define CE_GENERAL LANCE__ENCODINGS21__COMPRESSIVE_ENCODING__COMPRESSION_GENERAL
#define CE_FSL LANCE__ENCODINGS21__COMPRESSIVE_ENCODING__COMPRESSION_FIXED_SIZE_LIST
#define CE_FSST LANCE__ENCODINGS21__COMPRESSIVE_ENCODING__COMPRESSION_FSST
#define LAYER_ALL_VALID LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_ALL_VALID_ITEM
#define LAYER_NULLABLE LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_NULLABLE_ITEM
#define SCHEME_ZSTD LANCE__ENCODINGS21__COMPRESSION_SCHEME__COMPRESSION_ALGORITHM_ZSTD
#define SCHEME_LZ4 LANCE__ENCODINGS21__COMPRESSION_SCHEME__COMPRESSION_ALGORITHM_LZ4
#define PL_MINIBLOCK LANCE__ENCODINGS21__PAGE_LAYOUT__LAYOUT_MINI_BLOCK_LAYOUT
#define PL_CONSTANT LANCE__ENCODINGS21__PAGE_LAYOUT__LAYOUT_CONSTANT_LAYOUT
#define PL_FULLZIP LANCE__ENCODINGS21__PAGE_LAYOUT__LAYOUT_FULL_ZIP_LAYOUT

static size_t pad8(size_t n) { return (n + 7) & ~(size_t)7; }

static bool is_var(const mw_field_t *f) { return mw_field_layout(f) == MW_LAYOUT_VAR; }
static bool is_bool(const mw_field_t *f) { return f->type == MW_T_BOOL; }

/* Fixed-width values per MiniBlock chunk: ~4 KiB, a power of two (every
 * chunk but a page's last must hold one), at least 1. */
static int64_t fixed_per_chunk(size_t width) {
  assert(width > 0);
  int64_t per = 1;
  while (per * 2 * (int64_t)width <= CHUNK_BYTES && per * 2 <= CHUNK_MAX_VALUES) per *= 2;
  return per;
}

/* Pack a message into a fresh heap buffer. */
static int pack_msg(const ProtobufCMessage *m, uint8_t **out, size_t *n) {
  size_t len = protobuf_c_message_get_packed_size(m);
  uint8_t *p = malloc(len ? len : 1);
  if (p == NULL) return -ENOMEM;
  size_t got = protobuf_c_message_pack(m, p);
  assert(got == len);
  *out = p;
  *n = got;
  return 0;
}

/* Encoding{direct{Any{url, value}}} as a fresh heap buffer (DirectEncoding bytes). */
static int pack_any(const char *url, const uint8_t *val, size_t len, uint8_t **out, size_t *n) {
  Google__Protobuf__Any any = GOOGLE__PROTOBUF__ANY__INIT;
  any.type_url = (char *)url;
  any.value.data = (uint8_t *)val;
  any.value.len = len;
  return pack_msg(&any.base, out, n);
}

/* ======================================================================
 * Writer
 * ====================================================================== */

typedef struct wpage {
  uint64_t off[3], size[3]; /* words, chunks, [repetition index] */
  size_t n_bufs;
  uint64_t length, priority;
  uint8_t *any; /* packed Any{PageLayout} */
  size_t any_len;
} wpage_t;

typedef struct writer {
  mw_buf_t *out;
  size_t base;
  size_t max_page_bytes;
  bool zstd;
  int zstd_level;
  ZSTD_CCtx *zc;
  mw_buf_t words, data, raw, zbuf;
  wpage_t *pages;
  size_t n_pages, cap_pages;
  mw_buf_t colmeta;      /* serialized ColumnMetadata, back to back */
  uint64_t *colmeta_len; /* per column */
  mw_column_t concat;    /* one column of several batches, concatenated */
  mw_err_t *err;
} writer_t;

/* Append a buffer at a 64-aligned position and pad after it with 'H'. */
static int put_buffer(writer_t *w, const void *p, size_t n, uint64_t *pos) {
  int rc = mw_buf_fill(w->out, PAD_PAGE, (size_t)(-(w->out->len - w->base)) & 63);
  if (rc < 0) return rc;
  *pos = w->out->len - w->base;
  if (n > 0 && (rc = mw_buf_append(w->out, p, n)) < 0) return rc;
  return mw_buf_fill(w->out, PAD_PAGE, (size_t)(-(w->out->len - w->base)) & 63);
}

static int add_page(writer_t *w, const ProtobufCMessage *layout, uint64_t length, uint64_t first) {
  if (w->n_pages == w->cap_pages) {
    size_t cap = w->cap_pages ? 2 * w->cap_pages : 8;
    wpage_t *p = realloc(w->pages, cap * sizeof *p);
    if (p == NULL) return -ENOMEM;
    w->pages = p;
    w->cap_pages = cap;
  }
  wpage_t *pg = &w->pages[w->n_pages];
  memset(pg, 0, sizeof *pg);
  uint8_t *lay = NULL;
  size_t lay_len = 0;
  int rc = pack_msg(layout, &lay, &lay_len);
  if (rc < 0) return rc;
  rc = pack_any(URL_PAGE21, lay, lay_len, &pg->any, &pg->any_len);
  free(lay);
  if (rc < 0) return rc;
  pg->length = length;
  pg->priority = first;
  w->n_pages++;
  return 0;
}

static void pages_clear(writer_t *w) {
  for (size_t i = 0; i < w->n_pages; i++) free(w->pages[i].any);
  w->n_pages = 0;
}

/* A page buffer to write: bytes and their length. */
typedef struct wbuf {
  const void *p;
  size_t n;
} wbuf_t;

/* Add a page whose layout is `layout` (a MiniBlockLayout, FullZipLayout or
 * ConstantLayout, as `lc` says) holding rows [first, first + rows), and
 * write its buffers bufs[0..n_bufs) in order, each 64-aligned. */
static int page_write(writer_t *w, Lance__Encodings21__PageLayout__LayoutCase lc, void *layout,
                      int64_t first, int64_t rows, const wbuf_t *bufs, size_t n_bufs) {
  assert(layout != NULL);
  assert(n_bufs <= 3);
  Lance__Encodings21__PageLayout pl = LANCE__ENCODINGS21__PAGE_LAYOUT__INIT;
  pl.layout_case = lc;
  if (lc == PL_MINIBLOCK) pl.mini_block_layout = layout;
  else if (lc == PL_FULLZIP) pl.full_zip_layout = layout;
  else pl.constant_layout = layout;
  assert(lc == PL_MINIBLOCK || lc == PL_FULLZIP || lc == PL_CONSTANT);
  int rc = add_page(w, &pl.base, (uint64_t)rows, (uint64_t)first);
  if (rc < 0) return rc;
  wpage_t *pg = &w->pages[w->n_pages - 1];
  pg->n_bufs = n_bufs;
  for (size_t i = 0; i < n_bufs && rc == 0; i++) {
    pg->size[i] = bufs[i].n;
    rc = put_buffer(w, bufs[i].p, bufs[i].n, &pg->off[i]);
  }
  return rc;
}

/* Serialize the pending pages of one column into w->colmeta. */
static int flush_column_meta(writer_t *w, size_t col) {
  static const uint8_t col_enc_value[] = {0x0a, 0x00}; /* ColumnEncoding{values: Empty} */
  uint8_t *col_any = NULL;
  size_t col_any_len = 0;
  int rc = pack_any(URL_COLUMN, col_enc_value, sizeof col_enc_value, &col_any, &col_any_len);
  if (rc < 0) return rc;
  Lance__File__V2__ColumnMetadata__Page *pgs = calloc(w->n_pages + 1, sizeof *pgs);
  Lance__File__V2__ColumnMetadata__Page **pptr = calloc(w->n_pages + 1, sizeof *pptr);
  Lance__File__V2__Encoding *encs = calloc(w->n_pages + 1, sizeof *encs);
  Lance__File__V2__DirectEncoding *dirs = calloc(w->n_pages + 1, sizeof *dirs);
  rc = -ENOMEM;
  if (pgs == NULL || pptr == NULL || encs == NULL || dirs == NULL) goto done;
  for (size_t i = 0; i < w->n_pages; i++) {
    wpage_t *wp = &w->pages[i];
    lance__file__v2__direct_encoding__init(&dirs[i]);
    dirs[i].encoding.data = wp->any;
    dirs[i].encoding.len = wp->any_len;
    lance__file__v2__encoding__init(&encs[i]);
    encs[i].location_case = LANCE__FILE__V2__ENCODING__LOCATION_DIRECT;
    encs[i].direct = &dirs[i];
    lance__file__v2__column_metadata__page__init(&pgs[i]);
    pgs[i].n_buffer_offsets = pgs[i].n_buffer_sizes = wp->n_bufs;
    pgs[i].buffer_offsets = wp->off;
    pgs[i].buffer_sizes = wp->size;
    pgs[i].length = wp->length;
    pgs[i].priority = wp->priority;
    pgs[i].encoding = &encs[i];
    pptr[i] = &pgs[i];
  }
  Lance__File__V2__DirectEncoding cdir = LANCE__FILE__V2__DIRECT_ENCODING__INIT;
  cdir.encoding.data = col_any;
  cdir.encoding.len = col_any_len;
  Lance__File__V2__Encoding cenc = LANCE__FILE__V2__ENCODING__INIT;
  cenc.location_case = LANCE__FILE__V2__ENCODING__LOCATION_DIRECT;
  cenc.direct = &cdir;
  Lance__File__V2__ColumnMetadata cm = LANCE__FILE__V2__COLUMN_METADATA__INIT;
  cm.encoding = &cenc;
  cm.n_pages = w->n_pages;
  cm.pages = pptr;
  size_t len = lance__file__v2__column_metadata__get_packed_size(&cm);
  uint8_t *dst = mw_buf_extend(&w->colmeta, len);
  if (dst == NULL) goto done;
  lance__file__v2__column_metadata__pack(&cm, dst);
  w->colmeta_len[col] = len;
  rc = 0;
done:
  free(col_any);
  free(pgs);
  free(pptr);
  free(encs);
  free(dirs);
  pages_clear(w);
  return rc;
}

/* Nulls among rows [start, end). */
static int64_t count_nulls(const mw_column_t *c, int64_t start, int64_t end) {
  if (c->validity.len == 0 || c->null_count == 0) return 0;
  int64_t valid = 0, i = start;
  const uint8_t *bits = c->validity.data;
  for (; i < end && (i & 7); i++) valid += mw_bit_get(bits, i);
  for (; i + 64 <= end; i += 64) {
    uint64_t word;
    memcpy(&word, bits + (i >> 3), 8);
    valid += __builtin_popcountll(word);
  }
  for (; i < end; i++) valid += mw_bit_get(bits, i);
  return (end - start) - valid;
}

/* Bytes per chunk offset of a VAR field: 8 for large types (Lance refuses a
 * LargeUtf8 page with 32-bit offsets: "expected 64-bit offsets"), else 4. */
static size_t off_width(const mw_field_t *f) { return mw_field_info(f)->large ? 8 : 4; }

static size_t var_bytes(const mw_column_t *c, int64_t a, int64_t b) {
  const int32_t *off = (const int32_t *)(const void *)c->offsets.data;
  return (size_t)(off[b] - off[a]);
}

/* Rows [start, end) of a MiniBlock page starting at `start`. */
static int64_t mb_page_end(const writer_t *w, const mw_field_t *f, const mw_column_t *c,
                           int64_t start) {
  int64_t n = c->length;
  if (is_var(f)) {
    /* largest end with bytes + ow*rows <= max_page_bytes (monotone: binary search) */
    int64_t lo = start + 1, hi = n;
    size_t ow = off_width(f);
    while (lo < hi) {
      int64_t mid = lo + (hi - lo + 1) / 2;
      if (var_bytes(c, start, mid) + ow * (size_t)(mid - start) <= w->max_page_bytes) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }
  int64_t per = is_bool(f) ? CHUNK_MAX_VALUES : fixed_per_chunk(mw_type_width(f));
  int64_t bits_per = is_bool(f) ? 1 : 8 * (int64_t)mw_type_width(f);
  int64_t rows = (int64_t)(w->max_page_bytes * 8 / (size_t)bits_per) / per * per;
  if (rows < per) rows = per;
  return start + rows < n ? start + rows : n;
}

/* Values in the next chunk of a MiniBlock page (a power of two unless it is
 * the page's last chunk). */
static int64_t mb_chunk_values(const mw_field_t *f, const mw_column_t *c, int64_t row,
                               int64_t end) {
  int64_t left = end - row;
  if (!is_var(f)) {
    int64_t per = is_bool(f) ? CHUNK_MAX_VALUES : fixed_per_chunk(mw_type_width(f));
    return left < per ? left : per;
  }
  size_t ow = off_width(f);
  if (left <= CHUNK_MAX_VALUES && var_bytes(c, row, end) + ow * (size_t)left <= CHUNK_BYTES)
    return left;
  int64_t k = 1;
  while (2 * k < left && 2 * k <= CHUNK_MAX_VALUES &&
         var_bytes(c, row, row + 2 * k) + 2 * ow * (size_t)k <= CHUNK_BYTES)
    k *= 2;
  return k;
}

/* Raw (uncompressed, 8-padded) value-buffer size of a chunk. */
static size_t vb_size(const mw_field_t *f, const mw_column_t *c, int64_t row, int64_t cnt) {
  if (f->type == MW_T_BOOL) return pad8((size_t)(cnt + 7) / 8);
  if (is_var(f)) return pad8(off_width(f) * (size_t)(cnt + 1) + var_bytes(c, row, row + cnt));
  return pad8((size_t)cnt * mw_type_width(f));
}

/* Fill a zeroed area of vb_size() bytes with the chunk's value buffer. */
static void vb_fill(uint8_t *dst, const mw_field_t *f, const mw_column_t *c, int64_t row,
                    int64_t cnt) {
  if (f->type == MW_T_BOOL) {
    if ((row & 7) == 0) {
      memcpy(dst, c->values.data + (row >> 3), (size_t)(cnt + 7) / 8);
      if (cnt & 7) dst[cnt >> 3] &= (uint8_t)((1u << (cnt & 7)) - 1);
    } else {
      for (int64_t i = 0; i < cnt; i++)
        if (mw_bit_get(c->values.data, row + i)) dst[i >> 3] |= (uint8_t)(1u << (i & 7));
    }
  } else if (is_var(f)) {
    const int32_t *off = (const int32_t *)(const void *)c->offsets.data;
    size_t ow = off_width(f);
    uint64_t base = (uint64_t)(ow * (size_t)(cnt + 1)) - (uint64_t)off[row];
    for (int64_t i = 0; i <= cnt; i++) {
      if (ow == 8) mw_store_u64le(dst + 8 * i, base + (uint64_t)off[row + i]);
      else mw_store_u32le(dst + 4 * i, (uint32_t)(base + (uint64_t)off[row + i]));
    }
    size_t n = var_bytes(c, row, row + cnt);
    if (n) memcpy(dst + ow * (size_t)(cnt + 1), c->values.data + off[row], n);
  } else {
    size_t wd = mw_type_width(f);
    memcpy(dst, c->values.data + (size_t)row * wd, (size_t)cnt * wd);
  }
}

static int mb_chunk(writer_t *w, const mw_field_t *f, const mw_column_t *c, int64_t row,
                    int64_t cnt, bool nulls, bool last) {
  size_t raw = vb_size(f, c, row, cnt), vbn = raw;
  if (w->zstd) {
    mw_buf_reset(&w->raw);
    uint8_t *r = mw_buf_extend(&w->raw, raw);
    if (r == NULL) return -ENOMEM;
    vb_fill(r, f, c, row, cnt);
    size_t bound = ZSTD_compressBound(raw);
    mw_buf_reset(&w->zbuf);
    uint8_t *z = mw_buf_extend(&w->zbuf, 8 + bound);
    if (z == NULL) return -ENOMEM;
    mw_store_u64le(z, raw);
    size_t zn = ZSTD_compressCCtx(w->zc, z + 8, bound, r, raw, w->zstd_level);
    if (ZSTD_isError(zn)) return mw_err_set(w->err, -EIO, "zstd: %s", ZSTD_getErrorName(zn));
    vbn = w->zbuf.len = 8 + zn;
  }
  if (vbn > UINT32_MAX) return mw_err_set(w->err, -EFBIG, "chunk value buffer of %zu bytes", vbn);
  size_t defn = nulls ? 2 * (size_t)cnt : 0;
  size_t total = 8 + pad8(defn) + pad8(vbn);
  size_t at = w->data.len;
  uint8_t *p = mw_buf_extend(&w->data, total);
  if (p == NULL) return -ENOMEM;
  if (nulls) {
    p[0] = (uint8_t)cnt, p[1] = (uint8_t)(cnt >> 8);
    p[2] = (uint8_t)defn, p[3] = (uint8_t)(defn >> 8);
    mw_store_u32le(p + 4, (uint32_t)vbn);
    uint8_t *d = p + 8;
    for (int64_t i = 0; i < cnt; i++) d[2 * i] = !mw_bit_get(c->validity.data, row + i);
    memset(d + defn, PAD_CHUNK, pad8(defn) - defn);
  } else {
    mw_store_u32le(p + 2, (uint32_t)vbn);
    p[6] = p[7] = PAD_CHUNK;
  }
  uint8_t *v = p + 8 + pad8(defn);
  if (w->zstd) memcpy(v, w->zbuf.data, vbn);
  else vb_fill(v, f, c, row, cnt);
  memset(v + vbn, PAD_CHUNK, pad8(vbn) - vbn);
  assert(w->data.len == at + total && total % 8 == 0);
  (void)at;
  uint32_t lg = last ? 0 : (uint32_t)__builtin_ctzll((unsigned long long)cnt);
  return mw_buf_put_u32le(&w->words, (uint32_t)((total / 8 - 1) << 4) | lg);
}

static int mb_page(writer_t *w, const mw_field_t *f, const mw_column_t *c, int64_t start,
                   int64_t end) {
  bool nulls = count_nulls(c, start, end) > 0;
  mw_buf_reset(&w->words);
  mw_buf_reset(&w->data);
  int rc;
  for (int64_t row = start; row < end;) {
    int64_t cnt = mb_chunk_values(f, c, row, end);
    assert(cnt > 0 && cnt <= CHUNK_MAX_VALUES);
    assert(cnt >= 2 || row + cnt == end); /* Lance refuses log_num_values 0 before the last */
    if ((rc = mb_chunk(w, f, c, row, cnt, nulls, row + cnt == end)) < 0) return rc;
    row += cnt;
  }
  Lance__Encodings21__Flat flat = LANCE__ENCODINGS21__FLAT__INIT, flat32 = flat, flat16 = flat;
  flat.bits_per_value = f->type == MW_T_BOOL ? 1 : is_var(f) ? 32 : 8 * mw_type_width(f);
  flat32.bits_per_value = is_var(f) ? 8 * off_width(f) : 32; /* the offsets of a VAR chunk */
  flat16.bits_per_value = 16;
  CE ce_val = CE_INIT, ce_off = CE_INIT, ce_def = CE_INIT, ce_gen = CE_INIT;
  Lance__Encodings21__Variable var = LANCE__ENCODINGS21__VARIABLE__INIT;
  if (is_var(f)) {
    ce_off.compression_case = CE_FLAT, ce_off.flat = &flat32;
    var.offsets = &ce_off;
    ce_val.compression_case = CE_VARIABLE, ce_val.variable = &var;
  } else {
    ce_val.compression_case = CE_FLAT, ce_val.flat = &flat;
  }
  Lance__Encodings21__BufferCompression bc = LANCE__ENCODINGS21__BUFFER_COMPRESSION__INIT;
  bc.scheme = SCHEME_ZSTD;
  Lance__Encodings21__General gen = LANCE__ENCODINGS21__GENERAL__INIT;
  gen.compression = &bc;
  gen.values = &ce_val;
  ce_gen.compression_case = CE_GENERAL, ce_gen.general = &gen;
  ce_def.compression_case = CE_FLAT, ce_def.flat = &flat16;
  Lance__Encodings21__RepDefLayer layer = nulls ? LAYER_NULLABLE : LAYER_ALL_VALID;
  Lance__Encodings21__MiniBlockLayout mb = LANCE__ENCODINGS21__MINI_BLOCK_LAYOUT__INIT;
  mb.def_compression = nulls ? &ce_def : NULL;
  mb.value_compression = w->zstd ? &ce_gen : &ce_val;
  mb.n_layers = 1;
  mb.layers = &layer;
  mb.num_buffers = 1;
  mb.num_items = (uint64_t)(end - start);
  mb.has_large_chunk = 1;
  wbuf_t bufs[2] = {{w->words.data, w->words.len}, {w->data.data, w->data.len}};
  return page_write(w, PL_MINIBLOCK, &mb, start, end - start, bufs, 2);
}

/* A column given as the same field of several batches, in order, read
 * without concatenating them first (a MemTable's FSL column is most of an
 * SSTable's bytes: a concatenated copy would be written once more, into
 * fresh memory, only to be copied out again). */
typedef struct colsrc {
  const mw_batch_t *const *bs;
  size_t nb;
  size_t fi;
} colsrc_t;

/* The stretch of segment k within global rows [r, end): rows [*a, *b) of
 * its column, *base its first global row. Advances k and base past it. */
static const mw_column_t *colsrc_next(const colsrc_t *s, size_t *k, int64_t *base, int64_t r,
                                      int64_t end, int64_t *a, int64_t *b) {
  assert(*k < s->nb);
  assert(r >= *base && r < end);
  const mw_column_t *c = &s->bs[*k]->cols[s->fi];
  *a = r - *base;
  *b = end - *base < c->length ? end - *base : c->length;
  if (*b < *a) *b = *a;
  *base += c->length;
  (*k)++;
  return c;
}

/* Position (k, base) at the segment holding global row `start`. */
static void colsrc_seek(const colsrc_t *s, int64_t start, size_t *k, int64_t *base) {
  *k = 0;
  *base = 0;
  while (*k < s->nb && *base + s->bs[*k]->cols[s->fi].length <= start)
    *base += s->bs[(*k)++]->cols[s->fi].length;
  assert(*k < s->nb);
}

static int fullzip_page(writer_t *w, const mw_field_t *f, const colsrc_t *s, int64_t start,
                        int64_t end) {
  assert(start < end);
  size_t rowb = mw_type_width(f);
  size_t k;
  int64_t base, a, b;
  int64_t nulls = 0;
  colsrc_seek(s, start, &k, &base);
  for (int64_t r = start; r < end; r = base) {
    const mw_column_t *c = colsrc_next(s, &k, &base, r, end, &a, &b);
    nulls += count_nulls(c, a, b);
  }
  int rc;
  mw_buf_reset(&w->data);
  if (nulls) { /* [control byte = def level] + the row, per row */
    uint8_t *p = mw_buf_extend(&w->data, (size_t)(end - start) * (rowb + 1));
    if (p == NULL) return -ENOMEM;
    colsrc_seek(s, start, &k, &base);
    for (int64_t r = start; r < end; r = base) {
      const mw_column_t *c = colsrc_next(s, &k, &base, r, end, &a, &b);
      bool all_valid = c->validity.len == 0 || c->null_count == 0;
      for (int64_t i = a; i < b; i++, p += rowb + 1) {
        p[0] = !all_valid && !mw_bit_get(c->validity.data, i);
        memcpy(p + 1, c->values.data + (size_t)i * rowb, rowb);
      }
    }
  }
  size_t n = nulls ? w->data.len : (size_t)(end - start) * rowb;
  Lance__Encodings21__Flat flat_item = LANCE__ENCODINGS21__FLAT__INIT;
  flat_item.bits_per_value = 8 * mw_fsl_item_width(f);
  CE ce_items = CE_INIT, ce_fsl = CE_INIT;
  ce_items.compression_case = CE_FLAT, ce_items.flat = &flat_item;
  Lance__Encodings21__FixedSizeList fsl = LANCE__ENCODINGS21__FIXED_SIZE_LIST__INIT;
  fsl.items_per_value = (uint64_t)f->fsl_dim;
  fsl.values = &ce_items;
  ce_fsl.compression_case = CE_FSL, ce_fsl.fixed_size_list = &fsl;
  Lance__Encodings21__RepDefLayer layer = nulls ? LAYER_NULLABLE : LAYER_ALL_VALID;
  Lance__Encodings21__FullZipLayout fz = LANCE__ENCODINGS21__FULL_ZIP_LAYOUT__INIT;
  fz.bits_def = nulls ? 1 : 0;
  fz.details_case = LANCE__ENCODINGS21__FULL_ZIP_LAYOUT__DETAILS_BITS_PER_VALUE;
  fz.bits_per_value = (uint32_t)(rowb * 8);
  fz.num_items = fz.num_visible_items = (uint32_t)(end - start);
  fz.value_compression = &ce_fsl;
  fz.n_layers = 1;
  fz.layers = &layer;
  wbuf_t buf = {w->data.data, n};
  if (nulls) return page_write(w, PL_FULLZIP, &fz, start, end - start, &buf, 1);
  /* no nulls: the rows as they are, each segment's stretch in turn */
  if ((rc = page_write(w, PL_FULLZIP, &fz, start, end - start, NULL, 0)) < 0) return rc;
  wpage_t *pg = &w->pages[w->n_pages - 1];
  pg->n_bufs = 1;
  pg->size[0] = n;
  if ((rc = put_buffer(w, NULL, 0, &pg->off[0])) < 0) return rc;
  colsrc_seek(s, start, &k, &base);
  for (int64_t r = start; r < end && rc == 0; r = base) {
    const mw_column_t *c = colsrc_next(s, &k, &base, r, end, &a, &b);
    if (b > a) rc = mw_buf_append(w->out, c->values.data + (size_t)a * rowb, (size_t)(b - a) * rowb);
  }
  if (rc == 0) rc = mw_buf_fill(w->out, PAD_PAGE, (size_t)(-(w->out->len - w->base)) & 63);
  assert(rc < 0 || w->out->len - w->base >= pg->off[0] + n);
  return rc;
}

/* Rows [first, first + n) all null: a ConstantLayout with no value and no
 * buffers, layers [NULLABLE_ITEM] (what Lance writes for such a page, its
 * "simple all null" layout; it reads every row as null). */
static int all_null_page(writer_t *w, int64_t first, int64_t n) {
  assert(n > 0);
  assert(first >= 0);
  Lance__Encodings21__RepDefLayer layer = LAYER_NULLABLE;
  Lance__Encodings21__ConstantLayout cl = LANCE__ENCODINGS21__CONSTANT_LAYOUT__INIT;
  cl.n_layers = 1;
  cl.layers = &layer;
  return page_write(w, PL_CONSTANT, &cl, first, n, NULL, 0);
}

/* A FixedSizeList column: FullZip pages of whole rows. */
static int write_fsl(writer_t *w, const mw_field_t *f, const colsrc_t *s) {
  int64_t total = 0, nulls = 0;
  for (size_t i = 0; i < s->nb; i++) {
    const mw_column_t *c = &s->bs[i]->cols[s->fi];
    if (c->item_null_count > 0 && c->null_count < c->length)
      return mw_err_set(w->err, -ENOTSUP, "field '%s': null items inside vectors", f->name);
    total += c->length;
    nulls += c->null_count;
  }
  if (total > 0 && nulls == total) return all_null_page(w, 0, total); /* one page, as Lance */
  size_t rowb = mw_type_width(f) + 1;
  int64_t per = (int64_t)(w->max_page_bytes / rowb);
  if (per < 1) per = 1;
  int rc;
  for (int64_t st = 0; st < total; st += per)
    if ((rc = fullzip_page(w, f, s, st, st + per < total ? st + per : total)) < 0) return rc;
  return 0;
}

static int constant_false_page(writer_t *w, int64_t n) {
  static uint8_t zero = 0;
  Lance__Encodings21__RepDefLayer layer = LAYER_ALL_VALID;
  Lance__Encodings21__ConstantLayout cl = LANCE__ENCODINGS21__CONSTANT_LAYOUT__INIT;
  cl.n_layers = 1;
  cl.layers = &layer;
  cl.inline_value.data = &zero;
  cl.inline_value.len = 1;
  return page_write(w, PL_CONSTANT, &cl, 0, n, NULL, 0);
}

/* A utf8/binary column of n rows all empty, none null: a ConstantLayout
 * whose page buffer 0 holds the empty value as a one-row Arrow array (as
 * constant_scalar reads it: 2 buffers, the offsets' size, 0 data bytes,
 * offsets 0 0), layers [ALL_VALID_ITEM], as Lance writes it. */
static int empty_value_page(writer_t *w, const mw_field_t *f, int64_t n) {
  assert(is_var(f));
  assert(n > 0);
  uint8_t v[12 + 16] = {0};
  size_t ow = off_width(f), len = 12 + 2 * ow;
  mw_store_u32le(v, 2);
  mw_store_u32le(v + 4, (uint32_t)(2 * ow));
  Lance__Encodings21__RepDefLayer layer = LAYER_ALL_VALID;
  Lance__Encodings21__ConstantLayout cl = LANCE__ENCODINGS21__CONSTANT_LAYOUT__INIT;
  cl.n_layers = 1;
  cl.layers = &layer;
  wbuf_t buf = {v, len};
  return page_write(w, PL_CONSTANT, &cl, 0, n, &buf, 1);
}

static bool bool_all_false(const mw_column_t *c) {
  size_t nbytes = (size_t)(c->length + 7) / 8;
  for (size_t i = 0; i < nbytes && i < c->values.len; i++)
    if (c->values.data[i]) return false;
  return true;
}

static int fullzip_var_page(writer_t *w, const mw_field_t *f, const mw_column_t *c, int64_t start,
                            int64_t end);

/* Longest value of rows [a, b) of a utf8/binary column (a null's is 0). */
static size_t var_max_len(const mw_column_t *c, int64_t a, int64_t b) {
  const int32_t *off = (const int32_t *)(const void *)c->offsets.data;
  size_t m = 0;
  for (int64_t r = a; r < b; r++)
    if ((size_t)(off[r + 1] - off[r]) > m) m = (size_t)(off[r + 1] - off[r]);
  return m;
}

static int write_column(writer_t *w, const mw_field_t *f, const mw_column_t *c) {
  if (c->length == 0) return 0;
  if (f->type == MW_T_BOOL && c->null_count == 0 && bool_all_false(c))
    return constant_false_page(w, c->length);
  assert(f->type != MW_T_FSL); /* write_fsl */
  if (c->null_count == c->length) return all_null_page(w, 0, c->length); /* one page, as Lance */
  if (is_var(f) && c->null_count == 0 && var_bytes(c, 0, c->length) == 0) return empty_value_page(w, f, c->length);
  int rc;
  for (int64_t s = 0; s < c->length;) {
    int64_t e = mb_page_end(w, f, c, s);
    if (count_nulls(c, s, e) == e - s) rc = all_null_page(w, s, e - s);
    else if (is_var(f) && var_max_len(c, s, e) >= VAR_MINIBLOCK_MAX_LEN) rc = fullzip_var_page(w, f, c, s, e);
    else rc = mb_page(w, f, c, s, e);
    if (rc < 0) return rc;
    s = e;
  }
  return 0;
}

/* ---- nested columns: one Lance column per leaf, rep/def levels ----
 *
 * A list or struct field has no column of its own: each leaf below it is a
 * column whose levels carry the ancestors' structure (lance-files.md §3.2,
 * Lance's repdef.rs). Along the path top -> leaf every ancestor is a layer;
 * def levels are numbered from the outermost layer down (it gets the highest
 * numbers), 0 = valid all the way:
 *   item/struct with nulls     NULLABLE_ITEM        null = L
 *   list with nulls and empty  NULL_AND_EMPTY_LIST  null = L-1, empty = L
 *   list with nulls            NULLABLE_LIST        null = L
 *   list with empty lists      EMPTYABLE_LIST       empty = L
 *   no nulls (and no empties)  ALL_VALID_ITEM / ALL_VALID_LIST   no level
 * A member of a struct with nulls counts as having nulls (not-null ones
 * too, down to a list): Lance's reader nulls it there and Arrow wants a
 * not-null member's nulls masked by its own struct (docs/sstable.md).
 * Rep levels: the outermost list is max_rep, the innermost 1; the first item
 * of a list gets the level of the outermost list starting there, the others
 * 0. A null or empty list, or a null ancestor above a list, is a "special"
 * level without a value slot; every other level has one (null items and
 * items under null structs get a zero slot). Example, `l: list<int32>` with
 * rows [1, null], null, [] (layers [NULLABLE_ITEM, NULL_AND_EMPTY_LIST]):
 *   rep 1 0 1 1   def 0 1 2 3   values 1 0 (two slots)
 *
 * Pages hold whole rows and one MiniBlock chunk each (at most 32767 levels:
 * the chunk header stores level bytes in a u16), levels raw (Flat{16}),
 * values in the leaf's usual encoding, and with lists the repetition index
 * {rows in the chunk, 0 leftovers}. A page where no level reaches a valid
 * value (lists null or empty, structs or items null) is a ConstantLayout
 * carrying just the levels, RLE'd when they repeat, as Lance writes
 * (levels_page). Every leaf column covers all top-level rows, items or
 * not (issue 26: a list without items once got no pages). */

#define NESTED_MAX_LEVELS 32767
#define NESTED_CHUNK_BYTES 32768 /* values per nested page (one chunk) */
#define MAX_PATH (MW_MAX_NESTING + 2)

typedef struct lpath {
  const mw_field_t *f[MAX_PATH];    /* top .. leaf */
  const mw_column_t *c[MAX_PATH];   /* the matching columns */
  int k;                            /* index of the leaf */
  Lance__Encodings21__RepDefLayer layer[MAX_PATH];
  uint16_t null_level[MAX_PATH], empty_level[MAX_PATH], rep_level[MAX_PATH];
  uint16_t max_rep, max_def;
} lpath_t;

typedef struct levels {
  mw_buf_t rep, def;   /* u16 each */
  mw_buf_t slot;       /* i64 leaf row per level, -1 for a special */
  mw_buf_t row_start;  /* u64 level index where each top-level row starts, + end */
} levels_t;

static bool any_empty_list(const mw_column_t *c) {
  const int32_t *off = (const int32_t *)(const void *)c->offsets.data;
  for (int64_t r = 0; r < c->length; r++)
    if (mw_column_valid(c, r) && off[r + 1] == off[r]) return true;
  return false;
}

/* Layers and level numbers of a path (from the data: a layer with nulls or
 * empty lists gets levels, as Lance decides per page). */
static void path_levels(lpath_t *p) {
  uint16_t def = 0, rep = 0;
  bool has_nulls[MAX_PATH];
  for (int i = 0; i <= p->k; i++) {
    bool list = mw_field_layout(p->f[i]) == MW_LAYOUT_LIST;
    /* a member of a struct with nulls is null there too (not-null ones
     * included: Arrow needs their nulls masked by their own struct's) */
    has_nulls[i] = p->c[i]->null_count > 0 ||
                   (i > 0 && mw_field_layout(p->f[i - 1]) == MW_LAYOUT_STRUCT && has_nulls[i - 1]);
    bool empty = list && any_empty_list(p->c[i]);
    def += (uint16_t)(has_nulls[i] + empty);
    rep += list;
  }
  p->max_def = def;
  p->max_rep = rep;
  for (int i = 0; i <= p->k; i++) {
    bool list = mw_field_layout(p->f[i]) == MW_LAYOUT_LIST;
    bool nulls = has_nulls[i], empty = list && any_empty_list(p->c[i]);
    p->null_level[i] = p->empty_level[i] = p->rep_level[i] = 0;
    if (list) {
      p->rep_level[i] = rep--;
      if (nulls && empty) p->null_level[i] = (uint16_t)(def - 1), p->empty_level[i] = def;
      else if (nulls) p->null_level[i] = def;
      else if (empty) p->empty_level[i] = def;
      p->layer[i] = nulls && empty ? LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_NULL_AND_EMPTY_LIST
                    : nulls       ? LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_NULLABLE_LIST
                    : empty       ? LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_EMPTYABLE_LIST
                                  : LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_ALL_VALID_LIST;
    } else {
      if (nulls) p->null_level[i] = def;
      p->layer[i] = nulls ? LAYER_NULLABLE : LAYER_ALL_VALID;
    }
    def = (uint16_t)(def - nulls - empty);
  }
  assert(def == 0 && rep == 0);
}

/* The rep level a new element gets at depth i: the one passed down, or
 * else that of the first list at or below i (0 when there is none). */
static uint16_t rep_at(const lpath_t *p, int i, uint16_t rep_in) {
  if (rep_in) return rep_in;
  for (; i <= p->k; i++)
    if (mw_field_layout(p->f[i]) == MW_LAYOUT_LIST) return p->rep_level[i];
  return 0;
}

/* Whether a null at depth i keeps a leaf slot: it is a struct (or the leaf)
 * with no list between it and the leaf, so the leaf column has a row there.
 * A null list never has one. */
static bool slot_below(const lpath_t *p, int i) {
  for (int j = i; j <= p->k; j++)
    if (mw_field_layout(p->f[j]) == MW_LAYOUT_LIST) return false;
  return true;
}

static int level_push(levels_t *lv, uint16_t rep, uint16_t def, int64_t slot) {
  int rc = mw_buf_append(&lv->rep, &rep, 2);
  if (rc == 0) rc = mw_buf_append(&lv->def, &def, 2);
  if (rc == 0) rc = mw_buf_append(&lv->slot, &slot, 8);
  return rc;
}

/* Levels of row `row` of the column at depth i (Dremel shredding). */
static int shred(const lpath_t *p, int i, int64_t row, uint16_t rep_in, levels_t *lv) {
  const mw_column_t *c = p->c[i];
  if (i == p->k)
    return level_push(lv, rep_in, mw_column_valid(c, row) ? 0 : p->null_level[i], row);
  if (!mw_column_valid(c, row))
    return level_push(lv, rep_at(p, i, rep_in), p->null_level[i], slot_below(p, i) ? row : -1);
  if (mw_field_layout(p->f[i]) == MW_LAYOUT_STRUCT) return shred(p, i + 1, row, rep_in, lv);
  int64_t a, b;
  mw_column_list_range(c, row, &a, &b);
  uint16_t first = rep_at(p, i, rep_in);
  if (a == b) return level_push(lv, first, p->empty_level[i], -1);
  for (int64_t j = a; j < b; j++) {
    int rc = shred(p, i + 1, j, j == a ? first : 0, lv);
    if (rc < 0) return rc;
  }
  return 0;
}

static void levels_free(levels_t *lv) {
  mw_buf_free(&lv->rep);
  mw_buf_free(&lv->def);
  mw_buf_free(&lv->slot);
  mw_buf_free(&lv->row_start);
}

/* The leaf values of slots [a, b) of the levels, as a flat column. */
static int slot_values(const lpath_t *p, const levels_t *lv, size_t a, size_t b, mw_column_t *out) {
  const mw_field_t *leaf = p->f[p->k];
  const int64_t *slot = (const int64_t *)(const void *)lv->slot.data;
  int rc = mw_column_init(out, leaf);
  for (size_t i = a; i < b && rc == 0; i++)
    if (slot[i] >= 0) rc = mw_column_append_range(out, p->c[p->k], leaf, slot[i], 1);
  return rc;
}

/* The value compression of a leaf (as mb_page and fullzip_page choose it). */
typedef struct vcomp {
  Lance__Encodings21__Flat flat, off;
  Lance__Encodings21__Variable var;
  Lance__Encodings21__FixedSizeList fsl;
  CE ce, ce_off, ce_item;
} vcomp_t;

static void value_compression(const mw_field_t *f, vcomp_t *v) {
  v->flat = (Lance__Encodings21__Flat)LANCE__ENCODINGS21__FLAT__INIT;
  v->off = v->flat;
  v->ce = v->ce_off = v->ce_item = (CE)CE_INIT;
  if (is_var(f)) {
    v->var = (Lance__Encodings21__Variable)LANCE__ENCODINGS21__VARIABLE__INIT;
    v->off.bits_per_value = 8 * off_width(f);
    v->ce_off.compression_case = CE_FLAT, v->ce_off.flat = &v->off;
    v->var.offsets = &v->ce_off;
    v->ce.compression_case = CE_VARIABLE, v->ce.variable = &v->var;
  } else if (f->type == MW_T_FSL) {
    v->fsl = (Lance__Encodings21__FixedSizeList)LANCE__ENCODINGS21__FIXED_SIZE_LIST__INIT;
    v->flat.bits_per_value = 8 * mw_fsl_item_width(f);
    v->ce_item.compression_case = CE_FLAT, v->ce_item.flat = &v->flat;
    v->fsl.items_per_value = (uint64_t)f->fsl_dim;
    v->fsl.values = &v->ce_item;
    v->ce.compression_case = CE_FSL, v->ce.fixed_size_list = &v->fsl;
  } else {
    v->flat.bits_per_value = is_bool(f) ? 1 : 8 * mw_type_width(f);
    v->ce.compression_case = CE_FLAT, v->ce.flat = &v->flat;
  }
}

/* Rows [start, end) of a utf8/binary column holding a value of
 * VAR_MINIBLOCK_MAX_LEN bytes or more: a FullZip page, as Lance writes
 * such a page (its "narrow" test; MiniBlock chunks of two such values
 * could not stay near 4 KiB, and a one-value chunk that is not a page's
 * last is refused). Buffer 0: per row [control byte = def level, only
 * when the page has nulls] + for a valid row its length (offset width)
 * and bytes; buffer 1: the byte offset of each row start, plus the end,
 * each as wide as Lance's BytepackedIntegerEncoder makes them (the
 * narrowest of 1, 2, 4, 8 holding its bound on the buffer's length).
 * Values stay uncompressed (Variable), zstd or not. */
static int fullzip_var_page(writer_t *w, const mw_field_t *f, const mw_column_t *c, int64_t start,
                            int64_t end) {
  assert(start < end);
  assert(is_var(f));
  const int32_t *off = (const int32_t *)(const void *)c->offsets.data;
  size_t ow = off_width(f), n = (size_t)(end - start);
  bool nulls = count_nulls(c, start, end) > 0;
  uint64_t bound = var_bytes(c, start, end) + (nulls ? n : 0) + ow * n;
  size_t iw = bound <= UINT8_MAX ? 1 : bound <= UINT16_MAX ? 2 : bound <= UINT32_MAX ? 4 : 8;
  mw_buf_reset(&w->data);
  mw_buf_reset(&w->words);
  int rc = 0;
  uint8_t le[8];
  for (int64_t r = start; r <= end && rc == 0; r++) {
    for (size_t i = 0; i < iw; i++) le[i] = (uint8_t)((uint64_t)w->data.len >> (8 * i));
    rc = mw_buf_append(&w->words, le, iw); /* the row's start (the end after the last) */
    if (rc < 0 || r == end) break;
    bool valid = mw_column_valid(c, r);
    uint8_t ctrl = !valid;
    if (nulls) rc = mw_buf_append(&w->data, &ctrl, 1);
    if (rc < 0 || !valid) continue;
    uint64_t len = (uint64_t)(off[r + 1] - off[r]);
    for (size_t i = 0; i < ow; i++) le[i] = (uint8_t)(len >> (8 * i));
    rc = mw_buf_append(&w->data, le, ow);
    if (rc == 0 && len > 0) rc = mw_buf_append(&w->data, c->values.data + off[r], (size_t)len);
  }
  if (rc < 0) return rc;
  assert(w->data.len <= bound);
  vcomp_t vc;
  value_compression(f, &vc);
  Lance__Encodings21__RepDefLayer layer = nulls ? LAYER_NULLABLE : LAYER_ALL_VALID;
  Lance__Encodings21__FullZipLayout fz = LANCE__ENCODINGS21__FULL_ZIP_LAYOUT__INIT;
  fz.bits_def = nulls ? 1 : 0;
  fz.details_case = LANCE__ENCODINGS21__FULL_ZIP_LAYOUT__DETAILS_BITS_PER_OFFSET;
  fz.bits_per_offset = (uint32_t)(8 * ow);
  fz.num_items = fz.num_visible_items = (uint32_t)n;
  fz.value_compression = &vc.ce;
  fz.n_layers = 1;
  fz.layers = &layer;
  wbuf_t bufs[2] = {{w->data.data, w->data.len}, {w->words.data, w->words.len}};
  return page_write(w, PL_FULLZIP, &fz, start, (int64_t)n, bufs, 2);
}

/* Raw u16 levels (Flat{16}) for a nested page. */
static void flat16_levels(Lance__Encodings21__Flat *flat16, CE *ce) {
  *flat16 = (Lance__Encodings21__Flat)LANCE__ENCODINGS21__FLAT__INIT;
  flat16->bits_per_value = 16;
  *ce = (CE)CE_INIT;
  ce->compression_case = CE_FLAT;
  ce->flat = flat16;
}

/* Levels of a levels-only page as Lance 12 compresses them when they
 * repeat (fewer runs than half the levels, its default RLE threshold):
 * RLE{values: Flat{16}, run_lengths: Flat{8}} in block form,
 *   u64 LE values_bytes | u16 value per run | u8 length per run
 * runs longer than 255 split into 255s and the rest (300 levels of 1:
 * 04 00 00 00 00 00 00 00 | 01 00 01 00 | ff 2d). Otherwise raw u16
 * (Flat{16}; Lance bit-packs those). Sets *ce to the encoding used. */
typedef struct lenc {
  Lance__Encodings21__Flat f16, f8;
  Lance__Encodings21__Rle rle;
  CE raw, ce_v, ce_l, ce_rle;
} lenc_t;

static int levels_encode(const uint16_t *lv, size_t n, mw_buf_t *out, lenc_t *e, CE **ce) {
  assert(lv != NULL);
  assert(n > 0);
  size_t runs = 1;
  for (size_t i = 1; i < n; i++) runs += lv[i] != lv[i - 1];
  flat16_levels(&e->f16, &e->raw);
  mw_buf_reset(out);
  if (!(2 * runs < n)) { /* raw */
    *ce = &e->raw;
    return mw_buf_append(out, lv, 2 * n);
  }
  size_t pieces = 0;
  for (size_t i = 0, j; i < n; i = j) {
    for (j = i; j < n && lv[j] == lv[i]; j++) {}
    pieces += (j - i + 254) / 255;
  }
  uint8_t *p = mw_buf_extend(out, 8 + 3 * pieces);
  if (p == NULL) return -ENOMEM;
  mw_store_u64le(p, 2 * pieces);
  size_t at = 0;
  for (size_t i = 0, j; i < n; i = j) {
    for (j = i; j < n && lv[j] == lv[i]; j++) {}
    for (size_t left = j - i; left > 0; at++) {
      size_t len = left < 255 ? left : 255;
      p[8 + 2 * at] = (uint8_t)lv[i], p[9 + 2 * at] = (uint8_t)(lv[i] >> 8);
      p[8 + 2 * pieces + at] = (uint8_t)len;
      left -= len;
    }
  }
  assert(at == pieces);
  e->f8 = (Lance__Encodings21__Flat)LANCE__ENCODINGS21__FLAT__INIT;
  e->f8.bits_per_value = 8;
  e->ce_v = e->raw;
  e->ce_l = (CE)CE_INIT;
  e->ce_l.compression_case = CE_FLAT, e->ce_l.flat = &e->f8;
  e->rle = (Lance__Encodings21__Rle)LANCE__ENCODINGS21__RLE__INIT;
  e->rle.values = &e->ce_v, e->rle.run_lengths = &e->ce_l;
  e->ce_rle = (CE)CE_INIT;
  e->ce_rle.compression_case = CE_RLE, e->ce_rle.rle = &e->rle;
  *ce = &e->ce_rle;
  return 0;
}

/* A page of levels [la, lb) (rows [ra, rb)) where no level reaches a
 * valid value (every list null or empty, every struct or item null): a
 * ConstantLayout with no value, the rep levels in page buffer 0 (empty
 * without lists) and the def levels in buffer 1, each RLE or raw
 * (levels_encode), as Lance writes such a page ("complex all null"). */
static int levels_page(writer_t *w, const lpath_t *p, const levels_t *lv, size_t la, size_t lb, int64_t ra,
                       int64_t rb, Lance__Encodings21__RepDefLayer *layers) {
  size_t nlev = lb - la;
  assert(nlev > 0);
  assert(p->max_def > 0); /* nothing valid: something is null or empty */
  lenc_t er, ed;
  CE *ce_rep = NULL, *ce_def = NULL;
  mw_buf_reset(&w->raw);
  int rc = p->max_rep ? levels_encode((const uint16_t *)(const void *)lv->rep.data + la, nlev, &w->raw, &er, &ce_rep) : 0;
  if (rc == 0) rc = levels_encode((const uint16_t *)(const void *)lv->def.data + la, nlev, &w->zbuf, &ed, &ce_def);
  if (rc < 0) return rc;
  Lance__Encodings21__ConstantLayout cl = LANCE__ENCODINGS21__CONSTANT_LAYOUT__INIT;
  cl.n_layers = (size_t)p->k + 1;
  cl.layers = layers;
  cl.rep_compression = ce_rep;
  cl.def_compression = ce_def;
  cl.num_rep_values = p->max_rep ? nlev : 0;
  cl.num_def_values = nlev;
  wbuf_t bufs[2] = {{w->raw.data, w->raw.len}, {w->zbuf.data, w->zbuf.len}};
  return page_write(w, PL_CONSTANT, &cl, ra, rb - ra, bufs, 2);
}

/* The one MiniBlock chunk of a nested page into w->data (its word into
 * w->words): header, rep and def levels [la, lb), the values `vals`. */
static int nested_chunk(writer_t *w, const lpath_t *p, const levels_t *lv, size_t la, size_t lb,
                        const mw_column_t *vals) {
  const mw_field_t *leaf = p->f[p->k];
  bool has_rep = p->max_rep > 0, has_def = p->max_def > 0;
  size_t nlev = lb - la, lbytes = 2 * nlev;
  size_t vbn = vb_size(leaf, vals, 0, vals->length);
  if (vbn > UINT32_MAX) return mw_err_set(w->err, -EFBIG, "field '%s': chunk of %zu value bytes", leaf->name, vbn);
  size_t hdr = 2 + 2 * (has_rep + has_def) + 4;
  size_t total = pad8(hdr) + (has_rep ? pad8(lbytes) : 0) + (has_def ? pad8(lbytes) : 0) + pad8(vbn);
  mw_buf_reset(&w->data);
  mw_buf_reset(&w->words);
  uint8_t *d = mw_buf_extend(&w->data, total);
  if (d == NULL) return -ENOMEM;
  memset(d, PAD_CHUNK, total);
  size_t at = 0;
  d[at++] = (uint8_t)nlev, d[at++] = (uint8_t)(nlev >> 8);
  if (has_rep) d[at++] = (uint8_t)lbytes, d[at++] = (uint8_t)(lbytes >> 8);
  if (has_def) d[at++] = (uint8_t)lbytes, d[at++] = (uint8_t)(lbytes >> 8);
  mw_store_u32le(d + at, (uint32_t)vbn);
  at = pad8(hdr);
  if (has_rep) memcpy(d + at, lv->rep.data + 2 * la, lbytes), at += pad8(lbytes);
  if (has_def) memcpy(d + at, lv->def.data + 2 * la, lbytes), at += pad8(lbytes);
  memset(d + at, 0, vbn);
  vb_fill(d + at, leaf, vals, 0, vals->length);
  assert(at + pad8(vbn) == total && total % 8 == 0);
  return mw_buf_put_u32le(&w->words, (uint32_t)((total / 8 - 1) << 4));
}

/* Nulls inside valid vectors of an FSL leaf's values (item nulls under
 * null rows are dropped). */
static bool fsl_item_nulls(const mw_field_t *leaf, const mw_column_t *vals) {
  assert(vals->length >= 0);
  for (int64_t r = 0; leaf->type == MW_T_FSL && vals->item_null_count > 0 && r < vals->length; r++)
    for (int64_t k = 0; mw_column_valid(vals, r) && k < leaf->fsl_dim; k++)
      if (!mw_bit_get(vals->item_validity.data, r * leaf->fsl_dim + k)) return true;
  return false;
}

/* One page of levels [la, lb) holding rows [ra, rb). */
static int nested_page(writer_t *w, const lpath_t *p, const levels_t *lv, size_t la, size_t lb,
                       int64_t ra, int64_t rb) {
  const mw_field_t *leaf = p->f[p->k];
  size_t slots = 0, valid = 0;
  const int64_t *slot = (const int64_t *)(const void *)lv->slot.data;
  const uint16_t *def = (const uint16_t *)(const void *)lv->def.data;
  for (size_t i = la; i < lb; i++) slots += slot[i] >= 0, valid += def[i] == 0;
  assert(lb > la && lb - la <= NESTED_MAX_LEVELS);
  Lance__Encodings21__RepDefLayer layers[MAX_PATH];
  for (int i = 0; i <= p->k; i++) layers[i] = p->layer[p->k - i]; /* inner first */
  if (valid == 0) return levels_page(w, p, lv, la, lb, ra, rb, layers);
  mw_column_t vals;
  int rc = slot_values(p, lv, la, lb, &vals);
  assert(rc < 0 || vals.length == (int64_t)slots);
  if (rc == 0 && fsl_item_nulls(leaf, &vals))
    rc = mw_err_set(w->err, -ENOTSUP, "field '%s': null items inside vectors", leaf->name);
  if (rc == 0) rc = nested_chunk(w, p, lv, la, lb, &vals);
  mw_column_free(&vals);
  if (rc < 0) return rc;
  bool has_rep = p->max_rep > 0, has_def = p->max_def > 0;
  Lance__Encodings21__Flat flat16;
  CE ce16;
  flat16_levels(&flat16, &ce16);
  vcomp_t vc;
  value_compression(leaf, &vc);
  Lance__Encodings21__MiniBlockLayout mb = LANCE__ENCODINGS21__MINI_BLOCK_LAYOUT__INIT;
  mb.rep_compression = has_rep ? &ce16 : NULL;
  mb.def_compression = has_def ? &ce16 : NULL;
  mb.value_compression = &vc.ce;
  mb.n_layers = (size_t)p->k + 1;
  mb.layers = layers;
  mb.num_buffers = 1;
  mb.repetition_index_depth = has_rep ? 1 : 0;
  mb.num_items = slots;
  mb.has_large_chunk = 1;
  uint8_t idx[16]; /* the repetition index: rows in the chunk, 0 leftovers */
  mw_store_u64le(idx, (uint64_t)(rb - ra));
  mw_store_u64le(idx + 8, 0);
  wbuf_t bufs[3] = {{w->words.data, w->words.len}, {w->data.data, w->data.len}, {idx, sizeof idx}};
  return page_write(w, PL_MINIBLOCK, &mb, ra, rb - ra, bufs, has_rep ? 3 : 2);
}

/* Value bytes slot `row` of the leaf adds to a nested chunk. */
static size_t slot_value_bytes(const lpath_t *p, int64_t row) {
  const mw_field_t *leaf = p->f[p->k];
  if (is_bool(leaf)) return 1;
  if (is_var(leaf)) return off_width(leaf) + var_bytes(p->c[p->k], row, row + 1);
  return mw_type_width(leaf);
}

/* Every page of one leaf column. A page is one MiniBlock chunk, so its
 * values stay under NESTED_CHUNK_BYTES (a row's worth more at most when one
 * row is larger): LanceDB decodes a whole chunk for each range of rows it
 * takes, and with deletions over a chunk of 14 MB it asked for 58 GB and
 * aborted (gendiff seed 1036). */
static int write_leaf_path(writer_t *w, lpath_t *p) {
  levels_t lv = {MW_BUF_INIT, MW_BUF_INIT, MW_BUF_INIT, MW_BUF_INIT};
  path_levels(p);
  int64_t rows = p->c[0]->length;
  int rc = 0;
  for (int64_t r = 0; r < rows && rc == 0; r++) {
    uint64_t at = lv.rep.len / 2;
    rc = mw_buf_append(&lv.row_start, &at, 8);
    if (rc == 0) rc = shred(p, 0, r, 0, &lv);
  }
  uint64_t end = lv.rep.len / 2;
  if (rc == 0) rc = mw_buf_append(&lv.row_start, &end, 8);
  const uint64_t *rs = (const uint64_t *)(const void *)lv.row_start.data;
  const int64_t *slot = (const int64_t *)(const void *)lv.slot.data;
  size_t limit = w->max_page_bytes < NESTED_CHUNK_BYTES ? w->max_page_bytes : NESTED_CHUNK_BYTES;
  for (int64_t ra = 0; ra < rows && rc == 0;) {
    /* whole rows while the levels and the values fit one chunk */
    int64_t rb = ra;
    size_t bytes = 0;
    while (rb < rows && rs[rb + 1] - rs[ra] <= NESTED_MAX_LEVELS) {
      size_t row_bytes = 0;
      for (uint64_t i = rs[rb]; i < rs[rb + 1]; i++)
        if (slot[i] >= 0) row_bytes += slot_value_bytes(p, slot[i]);
      if (rb > ra && bytes + row_bytes > limit) break;
      bytes += row_bytes;
      rb++;
    }
    if (rb == ra) rb = ra + 1; /* one row over the level limit: refused below */
    if (rs[rb] - rs[ra] > NESTED_MAX_LEVELS) {
      rc = mw_err_set(w->err, -EFBIG, "field '%s': row %lld has %llu levels (limit %d)",
                      p->f[0]->name, (long long)ra, (unsigned long long)(rs[rb] - rs[ra]), NESTED_MAX_LEVELS);
      break;
    }
    rc = nested_page(w, p, &lv, (size_t)rs[ra], (size_t)rs[rb], ra, rb);
    ra = rb;
  }
  levels_free(&lv);
  return rc;
}

/* The leaf columns of nested field f, in pre-order, each flushed as one
 * Lance column (*col counts them). */
static int write_nested(writer_t *w, lpath_t *p, int depth, size_t *col) {
  const mw_field_t *f = p->f[depth];
  const mw_column_t *c = p->c[depth];
  mw_layout_t l = mw_field_layout(f);
  if (l != MW_LAYOUT_LIST && l != MW_LAYOUT_STRUCT) {
    p->k = depth;
    int rc = p->c[0]->length ? write_leaf_path(w, p) : 0;
    if (rc == 0) rc = flush_column_meta(w, (*col)++);
    return rc;
  }
  if (depth + 1 >= MAX_PATH) return mw_err_set(w->err, -EINVAL, "field '%s' nested too deep", f->name);
  for (uint32_t i = 0; i < f->n_children; i++) {
    p->f[depth + 1] = &f->children[i];
    p->c[depth + 1] = &c->children[i];
    int rc = write_nested(w, p, depth + 1, col);
    if (rc < 0) return rc;
  }
  return 0;
}

/* Append `n` bits of `src` (NULL = all ones) at bit `at` of a zeroed bitmap. */
static void bits_put(uint8_t *dst, int64_t at, const uint8_t *src, int64_t n) {
  if (src != NULL && (at & 7) == 0) {
    memcpy(dst + (at >> 3), src, (size_t)(n + 7) / 8);
    if (n & 7) dst[(at + n) >> 3] &= (uint8_t)((1u << (n & 7)) - 1);
    return;
  }
  for (int64_t i = 0; i < n; i++)
    if (src == NULL || mw_bit_get(src, i)) mw_bit_set(dst, at + i, true);
}

/* Concatenate field `fi` of several batches into `dst` (empty). */
static int concat_column(const mw_field_t *f, const mw_batch_t *const *bs, size_t nb, size_t fi,
                         mw_column_t *dst) {
  int64_t total = 0, nulls = 0;
  size_t bytes = 0;
  for (size_t i = 0; i < nb; i++) {
    total += bs[i]->cols[fi].length;
    nulls += bs[i]->cols[fi].null_count;
    bytes += bs[i]->cols[fi].values.len;
  }
  if (total > MW_MAX_BATCH_ROWS || bytes > INT32_MAX) return -EFBIG;
  size_t w = mw_type_width(f);
  uint8_t *vals = mw_buf_extend(&dst->values, f->type == MW_T_BOOL ? (size_t)(total + 7) / 8
                                              : is_var(f)          ? bytes
                                                                   : (size_t)total * w);
  uint8_t *val = nulls ? mw_buf_extend(&dst->validity, (size_t)(total + 7) / 8) : NULL;
  int32_t *off = NULL;
  if (is_var(f)) off = mw_buf_extend(&dst->offsets, 4 * (size_t)(total + 1));
  if ((vals == NULL && total > 0) || (nulls && val == NULL) || (is_var(f) && off == NULL))
    return -ENOMEM;
  int64_t row = 0;
  size_t vb = 0;
  for (size_t i = 0; i < nb; i++) {
    const mw_column_t *c = &bs[i]->cols[fi];
    if (c->length == 0) continue;
    if (f->type == MW_T_BOOL) bits_put(vals, row, c->values.data, c->length);
    else if (is_var(f)) {
      const int32_t *so = (const int32_t *)(const void *)c->offsets.data;
      for (int64_t r = 0; r < c->length; r++) off[row + r] = (int32_t)vb + so[r] - so[0];
      size_t n = (size_t)(so[c->length] - so[0]);
      if (n) memcpy(vals + vb, c->values.data + so[0], n);
      vb += n;
    } else memcpy(vals + (size_t)row * w, c->values.data, (size_t)c->length * w);
    if (val) bits_put(val, row, c->validity.len ? c->validity.data : NULL, c->length);
    row += c->length;
  }
  if (off) off[total] = (int32_t)vb;
  dst->length = total;
  dst->null_count = nulls;
  return 0;
}

static int write_descriptor(writer_t *w, const mw_schema_t *s, uint64_t rows, uint64_t *pos,
                            uint64_t *len) {
  Lance__File__Field **fields = NULL;
  size_t nf = 0;
  int rc = mw_lance_fields_from_schema(s, &fields, &nf);
  if (rc < 0) return mw_err_set(w->err, rc, "schema: cannot map to Lance fields");
  Lance__File__Schema__MetadataEntry *ents = calloc(s->meta.n + 1, sizeof *ents);
  Lance__File__Schema__MetadataEntry **eptr = calloc(s->meta.n + 1, sizeof *eptr);
  rc = -ENOMEM;
  if (ents == NULL || eptr == NULL) goto done;
  for (size_t i = 0; i < s->meta.n; i++) {
    lance__file__schema__metadata_entry__init(&ents[i]);
    ents[i].key = s->meta.items[i].key;
    ents[i].value.data = s->meta.items[i].value;
    ents[i].value.len = s->meta.items[i].value_len;
    eptr[i] = &ents[i];
  }
  Lance__File__Schema schema = LANCE__FILE__SCHEMA__INIT;
  schema.n_fields = nf;
  schema.fields = fields;
  schema.n_metadata = s->meta.n;
  schema.metadata = eptr;
  Lance__File__V2__FileDescriptor fd = LANCE__FILE__V2__FILE_DESCRIPTOR__INIT;
  fd.schema = &schema;
  fd.length = rows;
  uint8_t *buf = NULL;
  size_t n = 0;
  if ((rc = pack_msg(&fd.base, &buf, &n)) < 0) goto done;
  rc = put_buffer(w, buf, n, pos);
  /* no padding after global buffer 0: column metadata follows directly */
  w->out->len = w->base + *pos + n;
  *len = n;
  free(buf);
done:
  free(ents);
  free(eptr);
  mw_lance_fields_free(fields, nf);
  return rc;
}

static int check_inputs(const mw_schema_t *schema, const mw_batch_t *const *batches, size_t nb,
                        size_t n_extra, mw_err_t *err) {
  if (schema->n_fields > MW_MAX_FIELDS)
    return mw_err_set(err, -EINVAL, "schema has %zu fields (limit %d)", schema->n_fields,
                      MW_MAX_FIELDS);
  if (n_extra + 1 > MW_DATAFILE_MAX_GLOBAL_BUFFERS)
    return mw_err_set(err, -EINVAL, "%zu extra global buffers (limit %d)", n_extra,
                      MW_DATAFILE_MAX_GLOBAL_BUFFERS - 1);
  int64_t rows = 0;
  for (size_t i = 0; i < nb; i++) {
    if (batches[i] == NULL || (batches[i]->schema != schema &&
                               !mw_schema_equal(batches[i]->schema, schema)))
      return mw_err_set(err, -EINVAL, "batch %zu: schema differs from the file schema", i);
    if (mw_batch_validate(batches[i]) < 0)
      return mw_err_set(err, -EINVAL, "batch %zu: invalid columns", i);
    for (size_t c = 0; c < schema->n_fields; c++)
      if (!schema->fields[c].nullable && batches[i]->cols[c].null_count > 0)
        return mw_err_set(err, -EINVAL, "batch %zu: nulls in non-nullable field '%s'", i,
                          schema->fields[c].name);
    rows += batches[i]->n_rows;
    if (rows > MW_MAX_BATCH_ROWS) return mw_err_set(err, -EFBIG, "too many rows (%lld)", (long long)rows);
  }
  return 0;
}

/* The writer's options and scratch for one file; writer_free releases
 * whatever was made. */
static int writer_init(writer_t *w, const mw_datafile_write_opts_t *opts, int n_cols, mw_buf_t *out,
                       mw_err_t *err) {
  assert(n_cols >= 0);
  *w = (writer_t){.out = out, .base = out->len, .err = err};
  w->max_page_bytes = opts && opts->max_page_bytes ? opts->max_page_bytes : MW_DATAFILE_DEFAULT_PAGE_BYTES;
  if (w->max_page_bytes < MW_DATAFILE_MIN_PAGE_BYTES) w->max_page_bytes = MW_DATAFILE_MIN_PAGE_BYTES;
  w->zstd = opts && opts->zstd;
  w->zstd_level = opts && opts->zstd_level ? opts->zstd_level : DEFAULT_ZSTD_LEVEL;
  w->colmeta_len = calloc((size_t)n_cols + 1, sizeof *w->colmeta_len);
  if (w->colmeta_len == NULL) return -ENOMEM;
  if (w->zstd && (w->zc = ZSTD_createCCtx()) == NULL) return -ENOMEM;
  return 0;
}

static void writer_free(writer_t *w) {
  pages_clear(w);
  free(w->pages);
  mw_buf_free(&w->words);
  mw_buf_free(&w->data);
  mw_buf_free(&w->raw);
  mw_buf_free(&w->zbuf);
  mw_buf_free(&w->colmeta);
  mw_column_free(&w->concat);
  free(w->colmeta_len);
  ZSTD_freeCCtx(w->zc);
}

/* Reserve the whole file up front (growing a 100 MB buffer by doubling
 * costs more than encoding it); returns the rows of all batches. */
static int64_t reserve_file(mw_buf_t *out, const mw_schema_t *schema, const mw_batch_t *const *batches,
                            size_t n_batches) {
  int64_t rows = 0;
  size_t estimate = 65536;
  for (size_t i = 0; i < n_batches; i++) {
    rows += batches[i]->n_rows;
    estimate += (size_t)batches[i]->n_rows * 3 * schema->n_fields;
    for (size_t c = 0; c < schema->n_fields; c++)
      estimate += batches[i]->cols[c].values.len + batches[i]->cols[c].offsets.len;
  }
  if (estimate < MW_BUF_MAX_BYTES - out->len) (void)mw_buf_reserve(out, estimate);
  assert(rows >= 0);
  return rows;
}

/* Field fi of every batch as one column: the only batch's own, or a
 * concatenation (flat columns into w->concat, nested ones into *nested,
 * memory reused across fields). FSL columns are read in place. */
static int field_column(writer_t *w, const mw_field_t *f, const mw_batch_t *const *batches,
                        size_t n_batches, size_t fi, mw_column_t *nested, const mw_column_t **c) {
  mw_layout_t l = mw_field_layout(f);
  bool is_nested = l == MW_LAYOUT_LIST || l == MW_LAYOUT_STRUCT;
  *c = n_batches == 1 ? &batches[0]->cols[fi] : is_nested ? nested : &w->concat;
  mw_buf_reset(&w->concat.values), mw_buf_reset(&w->concat.validity), mw_buf_reset(&w->concat.offsets);
  int rc = 0;
  if (n_batches != 1 && is_nested) { /* none: an empty tree */
    mw_column_free(nested);
    rc = mw_column_init(nested, f);
    for (size_t i = 0; i < n_batches && rc == 0; i++)
      rc = mw_column_append_range(nested, &batches[i]->cols[fi], f, 0, batches[i]->n_rows);
  } else if (n_batches > 1 && l != MW_LAYOUT_FSL) {
    rc = concat_column(f, batches, n_batches, fi, &w->concat);
  }
  if (rc < 0) return mw_err_set(w->err, rc, "field '%s': cannot concatenate batches", f->name);
  return 0;
}

/* One top-level field's columns (one per leaf), advancing *col. */
static int write_field(writer_t *w, const mw_schema_t *schema, const mw_batch_t *const *batches,
                       size_t n_batches, size_t fi, mw_column_t *nested, size_t *col) {
  assert(fi < schema->n_fields);
  const mw_field_t *f = &schema->fields[fi];
  const mw_column_t *c = NULL;
  int rc = field_column(w, f, batches, n_batches, fi, nested, &c);
  if (rc < 0) return rc;
  assert(c != NULL);
  mw_layout_t l = mw_field_layout(f);
  if (l == MW_LAYOUT_LIST || l == MW_LAYOUT_STRUCT) {
    lpath_t path = {.f = {f}, .c = {c}};
    rc = write_nested(w, &path, 0, col);
  } else {
    colsrc_t src = {.bs = batches, .nb = n_batches, .fi = fi};
    rc = l == MW_LAYOUT_FSL ? write_fsl(w, f, &src) : write_column(w, f, c);
    if (rc == 0) rc = flush_column_meta(w, (*col)++);
  }
  if (rc < 0) return mw_err_set(w->err, rc, "field '%s': cannot encode column", f->name);
  return 0;
}

/* Everything after the pages: the extra global buffers, the descriptor
 * (global buffer 0), the column metadata, both offset tables and the
 * footer (docs/sstable.md "Data file"). */
static int write_tail(writer_t *w, const mw_schema_t *schema, int64_t rows, const mw_datafile_gbuf_t *extra,
                      size_t n_extra, size_t n_cols) {
  mw_buf_t *out = w->out;
  uint64_t *cmo = calloc(2 * n_cols + 1, sizeof *cmo);
  uint64_t *gbo = calloc(2 * (n_extra + 1), sizeof *gbo);
  int rc = cmo != NULL && gbo != NULL ? 0 : -ENOMEM;
  for (size_t i = 0; i < n_extra && rc == 0; i++) {
    gbo[2 * (i + 1) + 1] = extra[i].len;
    rc = put_buffer(w, extra[i].data, extra[i].len, &gbo[2 * (i + 1)]);
  }
  if (rc == 0) rc = write_descriptor(w, schema, (uint64_t)rows, &gbo[0], &gbo[1]);
  uint64_t cm_start = out->len - w->base, at = cm_start;
  if (rc == 0) rc = mw_buf_append(out, w->colmeta.data, w->colmeta.len);
  for (size_t i = 0; i < n_cols && rc == 0; i++) {
    cmo[2 * i] = at;
    cmo[2 * i + 1] = w->colmeta_len[i];
    at += w->colmeta_len[i];
  }
  uint64_t cmo_start = out->len - w->base;
  for (size_t i = 0; i < 2 * n_cols && rc >= 0; i++) rc = mw_buf_put_u64le(out, cmo[i]);
  uint64_t gbo_start = out->len - w->base;
  for (size_t i = 0; i < 2 * (n_extra + 1) && rc >= 0; i++) rc = mw_buf_put_u64le(out, gbo[i]);
  if (rc >= 0) rc = mw_buf_put_u64le(out, cm_start);
  if (rc >= 0) rc = mw_buf_put_u64le(out, cmo_start);
  if (rc >= 0) rc = mw_buf_put_u64le(out, gbo_start);
  if (rc >= 0) rc = mw_buf_put_u32le(out, (uint32_t)(n_extra + 1));
  if (rc >= 0) rc = mw_buf_put_u32le(out, (uint32_t)n_cols);
  if (rc >= 0) rc = mw_buf_put_u16le(out, 2);
  if (rc >= 0) rc = mw_buf_put_u16le(out, 2);
  if (rc >= 0) rc = mw_buf_append(out, "LANC", 4);
  free(cmo);
  free(gbo);
  return rc < 0 ? rc : 0;
}

int mw_datafile_write(const mw_schema_t *schema, const mw_batch_t *const *batches,
                      size_t n_batches, const mw_datafile_gbuf_t *extra, size_t n_extra,
                      const mw_datafile_write_opts_t *opts, mw_buf_t *out, mw_err_t *err) {
  assert(schema != NULL);
  assert(out != NULL);
  assert(batches != NULL || n_batches == 0);
  int rc = check_inputs(schema, batches, n_batches, n_extra, err);
  if (rc < 0) return rc;
  /* one Lance column per leaf field (lists and structs have none) */
  int n_cols = mw_lance_leaves(schema, NULL, NULL, 4 * MW_MAX_FIELDS);
  if (n_cols < 0) return mw_err_set(err, -EINVAL, "schema has too many fields");
  writer_t w;
  mw_column_t nested_concat = {0};
  size_t col = 0;
  rc = writer_init(&w, opts, n_cols, out, err);
  int64_t rows = rc == 0 ? reserve_file(out, schema, batches, n_batches) : 0;
  for (size_t fi = 0; fi < schema->n_fields && rc == 0; fi++)
    rc = write_field(&w, schema, batches, n_batches, fi, &nested_concat, &col);
  if (rc == 0) {
    assert(col == (size_t)n_cols);
    rc = write_tail(&w, schema, rows, extra, n_extra, (size_t)n_cols);
  }
  if (rc < 0) {
    mw_err_set(err, rc, "data file write failed");
    out->len = w.base;
  }
  writer_free(&w);
  mw_column_free(&nested_concat);
  return rc;
}

/* ======================================================================
 * Reader
 * ====================================================================== */

/* Where a page decodes to, plus names for error messages. */
typedef struct rctx {
  mw_datafile_t *f; /* not const: its zstd context is made on first need */
  const mw_field_t *fld;
  mw_column_t *c;
  size_t col, page;
  int64_t row0;     /* first row of the page */
  int64_t n;        /* rows in the page */
  size_t n_bufs;
  const uint8_t *buf[MW_DATAFILE_MAX_PAGE_BUFFERS];
  uint64_t buf_len[MW_DATAFILE_MAX_PAGE_BUFFERS];
  mw_err_t *err;
  mw_buf_t scratch, scratch2;
} rctx_t;

#define BAD(x, ...) mw_err_set((x)->err, -EBADMSG, "column %zu page %zu: " __VA_ARGS__)
#define UNSUP(x, ...) mw_err_set((x)->err, -ENOTSUP, "column %zu page %zu: " __VA_ARGS__)

static void mark_null(rctx_t *x, int64_t row) {
  mw_bit_set(x->c->validity.data, row, false);
  x->c->null_count++;
}

/* Fixed-width output slot of row r. */
static uint8_t *slot(rctx_t *x, int64_t r) {
  return x->c->values.data + (size_t)r * mw_type_width(x->fld);
}

/* Copy `cnt` bits from src (bit offset 0) to the bool column at row r. */
static void bits_copy_out(rctx_t *x, int64_t r, const uint8_t *src, int64_t cnt) {
  uint8_t *dst = x->c->values.data;
  if ((r & 7) == 0) {
    memcpy(dst + (r >> 3), src, (size_t)(cnt + 7) / 8);
    if (cnt & 7) dst[(r + cnt) >> 3] &= (uint8_t)((1u << (cnt & 7)) - 1);
    return;
  }
  for (int64_t i = 0; i < cnt; i++) mw_bit_set(dst, r + i, mw_bit_get(src, i));
}

/* Append one utf8/binary value (row order is guaranteed by the caller). */
static int var_put(rctx_t *x, int64_t r, const uint8_t *p, size_t n) {
  int32_t *off = (int32_t *)(void *)x->c->offsets.data;
  if (x->c->values.len + n > INT32_MAX) return BAD(x, "string data exceeds 2 GiB", x->col, x->page);
  if (n && mw_buf_append(&x->c->values, p, n) < 0) return -ENOMEM;
  off[r + 1] = (int32_t)x->c->values.len;
  return 0;
}

/* Append one FSST-compressed utf8/binary value, decompressed (at most 8
 * bytes per code byte); the column stays within var_max bytes. */
static int var_put_fsst(rctx_t *x, int64_t r, const mw_fsst_table_t *t, const uint8_t *p, size_t n, size_t var_max) {
  mw_column_t *c = x->c;
  size_t cap = n * MW_FSST_MAX_SYMBOL_BYTES, got;
  if (mw_buf_reserve(&c->values, cap + 1) < 0) return -ENOMEM;
  if (mw_fsst_decode(t, p, n, c->values.data + c->values.len, cap, &got) < 0)
    return BAD(x, "fsst string of row %lld corrupt", x->col, x->page, (long long)r);
  if (got > var_max - c->values.len || c->values.len + got > INT32_MAX)
    return BAD(x, "fsst strings exceed %zu bytes", x->col, x->page, var_max);
  c->values.len += got;
  ((int32_t *)(void *)c->offsets.data)[r + 1] = (int32_t)c->values.len;
  return 0;
}

/* ---- protobuf wire reader (2.0 legacy encodings) ---- */

typedef struct pbv {
  const uint8_t *p;
  size_t n;
} pbv_t;

static int pb_varint(const uint8_t *p, size_t n, size_t *i, uint64_t *v) {
  uint64_t r = 0;
  for (int s = 0; s < 64; s += 7) {
    if (*i >= n) return -EBADMSG;
    uint8_t b = p[(*i)++];
    r |= (uint64_t)(b & 0x7f) << s;
    if (!(b & 0x80)) {
      *v = r;
      return 0;
    }
  }
  return -EBADMSG;
}

/* Find the last field `num` in msg; varint → *v, bytes → *sub. 1 = found. */
static int pb_find(pbv_t msg, uint32_t num, uint64_t *v, pbv_t *sub) {
  size_t i = 0;
  int found = 0;
  while (i < msg.n) {
    uint64_t key, val;
    if (pb_varint(msg.p, msg.n, &i, &key) < 0) return -EBADMSG;
    uint32_t wt = key & 7;
    if (wt == 0) {
      if (pb_varint(msg.p, msg.n, &i, &val) < 0) return -EBADMSG;
      if ((key >> 3) == num && v) *v = val, found = 1;
    } else if (wt == 2) {
      if (pb_varint(msg.p, msg.n, &i, &val) < 0 || val > msg.n - i) return -EBADMSG;
      if ((key >> 3) == num && sub) *sub = (pbv_t){msg.p + i, (size_t)val}, found = 1;
      i += val;
    } else if (wt == 1 || wt == 5) {
      size_t k = wt == 1 ? 8 : 4;
      if (k > msg.n - i) return -EBADMSG;
      i += k;
    } else {
      return -EBADMSG;
    }
  }
  return found;
}

/* Legacy Flat{bits, buffer{index, type=page}} → page buffer. */
static int legacy_flat(rctx_t *x, pbv_t arr, uint64_t want_bits, const uint8_t **p,
                       uint64_t *len) {
  pbv_t flat, bufm;
  uint64_t bits = 0, idx = 0, type = 0;
  if (pb_find(arr, 1, NULL, &flat) != 1) return UNSUP(x, "2.0 encoding is not flat", x->col, x->page);
  if (pb_find(flat, 3, NULL, &bufm) == 1) return UNSUP(x, "2.0 flat compression", x->col, x->page);
  if (pb_find(flat, 1, &bits, NULL) < 0 || pb_find(flat, 2, NULL, &bufm) != 1 ||
      pb_find(bufm, 1, &idx, NULL) < 0 || pb_find(bufm, 2, &type, NULL) < 0)
    return BAD(x, "2.0 flat encoding malformed", x->col, x->page);
  if (bits != want_bits) return UNSUP(x, "2.0 flat of %llu bits, want %llu", x->col, x->page,
                                      (unsigned long long)bits, (unsigned long long)want_bits);
  if (type != 0 || idx >= x->n_bufs)
    return BAD(x, "2.0 flat buffer %llu (type %llu) out of range", x->col, x->page,
               (unsigned long long)idx, (unsigned long long)type);
  *p = x->buf[idx];
  *len = x->buf_len[idx];
  return 0;
}

static int legacy_values(rctx_t *x, pbv_t arr) {
  int64_t n = x->n;
  const uint8_t *p;
  uint64_t len;
  int rc;
  if (x->fld->type == MW_T_FSL) {
    pbv_t fsl, items, nul, nn, inner;
    uint64_t dim = 0;
    if (pb_find(arr, 3, NULL, &fsl) != 1 || pb_find(fsl, 1, &dim, NULL) < 0 ||
        pb_find(fsl, 2, NULL, &items) != 1)
      return UNSUP(x, "2.0 vector encoding not fixed_size_list", x->col, x->page);
    if (dim != (uint64_t)x->fld->fsl_dim) return BAD(x, "2.0 fsl dimension %llu", x->col, x->page, (unsigned long long)dim);
    if (pb_find(items, 2, NULL, &nul) != 1 || pb_find(nul, 1, NULL, &nn) != 1 ||
        pb_find(nn, 1, NULL, &inner) != 1)
      return UNSUP(x, "2.0 fsl items not nullable/no_nulls", x->col, x->page);
    arr = inner;
  }
  /* fsl items are flat{item bits}; the row is dim of them */
  uint64_t bits = x->fld->type == MW_T_BOOL  ? 1
                  : x->fld->type == MW_T_FSL ? 8 * mw_fsl_item_width(x->fld)
                                             : 8 * mw_type_width(x->fld);
  uint64_t need = x->fld->type == MW_T_BOOL ? ((uint64_t)n + 7) / 8 : (uint64_t)n * mw_type_width(x->fld);
  if ((rc = legacy_flat(x, arr, bits, &p, &len)) < 0) return rc;
  if (len < need) return BAD(x, "2.0 values buffer of %llu bytes too short", x->col, x->page, (unsigned long long)len);
  if (x->fld->type == MW_T_BOOL) bits_copy_out(x, x->row0, p, n);
  else memcpy(slot(x, x->row0), p, (size_t)n * mw_type_width(x->fld));
  return 0;
}

static int legacy_binary(rctx_t *x, pbv_t bin) {
  pbv_t ind, bytes, nul, nn, inner;
  uint64_t adj = 0;
  const uint8_t *ip, *bp;
  uint64_t il, bl;
  int rc;
  if (pb_find(bin, 1, NULL, &ind) != 1 || pb_find(bin, 2, NULL, &bytes) != 1 ||
      pb_find(bin, 3, &adj, NULL) < 0)
    return BAD(x, "2.0 binary encoding malformed", x->col, x->page);
  if (pb_find(ind, 2, NULL, &nul) != 1 || pb_find(nul, 1, NULL, &nn) != 1 ||
      pb_find(nn, 1, NULL, &inner) != 1)
    return UNSUP(x, "2.0 binary indices not nullable/no_nulls", x->col, x->page);
  if ((rc = legacy_flat(x, inner, 64, &ip, &il)) < 0) return rc;
  if ((rc = legacy_flat(x, bytes, 8, &bp, &bl)) < 0) return rc;
  if (il < 8 * (uint64_t)x->n) return BAD(x, "2.0 binary indices too short", x->col, x->page);
  uint64_t prev = 0;
  for (int64_t i = 0; i < x->n; i++) {
    uint64_t end = mw_load_u64le(ip + 8 * i);
    bool null = adj > 0 && end >= adj;
    if (null) end -= adj;
    if (end < prev || end > bl) return BAD(x, "2.0 binary offset %llu of row %lld out of range", x->col, x->page, (unsigned long long)end, (long long)i);
    if (null) mark_null(x, x->row0 + i);
    if ((rc = var_put(x, x->row0 + i, bp + prev, (size_t)(end - prev))) < 0) return rc;
    prev = end;
  }
  return 0;
}

static int legacy_page(rctx_t *x, pbv_t arr) {
  pbv_t nul, sub, bin;
  int rc;
  if (is_var(x->fld)) {
    if (pb_find(arr, 6, NULL, &bin) != 1) return UNSUP(x, "2.0 string encoding not binary", x->col, x->page);
    return legacy_binary(x, bin);
  }
  if (pb_find(arr, 2, NULL, &nul) != 1) return UNSUP(x, "2.0 encoding not nullable", x->col, x->page);
  if (pb_find(nul, 1, NULL, &sub) == 1) { /* no_nulls{values} */
    pbv_t v;
    if (pb_find(sub, 1, NULL, &v) != 1) return BAD(x, "2.0 no_nulls without values", x->col, x->page);
    return legacy_values(x, v);
  }
  if (pb_find(nul, 2, NULL, &sub) == 1) { /* some_nulls{validity, values} */
    pbv_t vm, v;
    const uint8_t *bp;
    uint64_t bl;
    if (pb_find(sub, 1, NULL, &vm) != 1 || pb_find(sub, 2, NULL, &v) != 1)
      return BAD(x, "2.0 some_nulls malformed", x->col, x->page);
    if ((rc = legacy_flat(x, vm, 1, &bp, &bl)) < 0) return rc;
    if (bl < (uint64_t)(x->n + 7) / 8) return BAD(x, "2.0 validity too short", x->col, x->page);
    if ((rc = legacy_values(x, v)) < 0) return rc;
    for (int64_t i = 0; i < x->n; i++)
      if (!mw_bit_get(bp, i)) mark_null(x, x->row0 + i);
    return 0;
  }
  if (pb_find(nul, 3, NULL, &sub) == 1) { /* all_nulls */
    for (int64_t i = 0; i < x->n; i++) mark_null(x, x->row0 + i);
    return 0;
  }
  return BAD(x, "2.0 nullable encoding empty", x->col, x->page);
}

/* ---- 2.1/2.2 MiniBlock ---- */

static void fastlanes_unpack(const uint8_t *src, unsigned t, unsigned wbits, uint64_t *out);

/* OutOfLineBitpacking{16, Flat{W}} def levels: whole 1024-value FastLanes
 * blocks of 64*W u16 words, then the tail either packed as one padded block
 * or stored raw (told apart by the buffer length). */
static int def_ool16(rctx_t *x, unsigned wbits, const uint8_t *p, size_t n, int64_t cnt,
                     uint16_t *lv) {
  uint64_t vals[FASTLANES_BLOCK];
  if (wbits == 0 || wbits > 16) return BAD(x, "def bitpacking width %u", x->col, x->page, wbits);
  size_t wpc = 64 * (size_t)wbits, words = n / 2, full = (size_t)cnt / FASTLANES_BLOCK;
  size_t tail = (size_t)cnt % FASTLANES_BLOCK;
  bool raw = tail > 0 && words == full * wpc + tail;
  if (words < full * wpc + (tail ? (raw ? tail : wpc) : 0))
    return BAD(x, "def bitpacking buffer of %zu bytes for %lld levels", x->col, x->page, n, (long long)cnt);
  for (size_t b = 0; b < full + (tail && !raw); b++) {
    fastlanes_unpack(p + 2 * b * wpc, 16, wbits, vals);
    size_t k = b < full ? FASTLANES_BLOCK : tail;
    for (size_t i = 0; i < k; i++) lv[b * FASTLANES_BLOCK + i] = (uint16_t)vals[i];
  }
  for (size_t i = 0; raw && i < tail; i++)
    lv[full * FASTLANES_BLOCK + i] = mw_load_u16le(p + 2 * (full * wpc + i));
  return 0;
}

/* Decode def levels of one chunk into x->scratch as u16. */
static int def_decode(rctx_t *x, const CE *dc, const uint8_t *p, size_t n, int64_t cnt) {
  mw_buf_reset(&x->scratch);
  uint16_t *lv = mw_buf_extend(&x->scratch, 2 * (size_t)cnt);
  if (lv == NULL) return -ENOMEM;
  if (dc->compression_case == CE_FLAT && dc->flat->bits_per_value == 16 && dc->flat->data == NULL) {
    if (n < 2 * (size_t)cnt) return BAD(x, "def levels: %zu bytes for %lld levels", x->col, x->page, n, (long long)cnt);
    for (int64_t i = 0; i < cnt; i++) lv[i] = mw_load_u16le(p + 2 * i);
    return 0;
  }
  if (dc->compression_case == CE_RLE && dc->rle->values && dc->rle->run_lengths &&
      dc->rle->values->compression_case == CE_FLAT &&
      dc->rle->run_lengths->compression_case == CE_FLAT) {
    uint64_t vb = dc->rle->values->flat->bits_per_value, lb = dc->rle->run_lengths->flat->bits_per_value;
    if ((vb != 8 && vb != 16) || (lb != 8 && lb != 16 && lb != 32))
      return UNSUP(x, "RLE def levels of %llu/%llu bits", x->col, x->page, (unsigned long long)vb, (unsigned long long)lb);
    if (n < 8) return BAD(x, "RLE def levels: %zu bytes", x->col, x->page, n);
    uint64_t vbytes = mw_load_u64le(p);
    size_t vw = vb / 8, lw = lb / 8;
    if (vbytes > n - 8 || vbytes % vw) return BAD(x, "RLE values size %llu", x->col, x->page, (unsigned long long)vbytes);
    size_t runs = vbytes / vw;
    if (runs > (n - 8 - vbytes) / lw) return BAD(x, "RLE run lengths truncated", x->col, x->page);
    const uint8_t *vp = p + 8, *lp = p + 8 + vbytes;
    int64_t at = 0;
    for (size_t i = 0; i < runs; i++) {
      uint16_t v = vw == 1 ? vp[i] : mw_load_u16le(vp + 2 * i);
      uint64_t len = lw == 1 ? lp[i] : lw == 2 ? mw_load_u16le(lp + 2 * i) : mw_load_u32le(lp + 4 * i);
      if (len > (uint64_t)(cnt - at)) return BAD(x, "RLE runs exceed %lld levels", x->col, x->page, (long long)cnt);
      for (uint64_t k = 0; k < len; k++) lv[at++] = v;
    }
    if (at != cnt) return BAD(x, "RLE runs give %lld of %lld levels", x->col, x->page, (long long)at, (long long)cnt);
    return 0;
  }
  if (dc->compression_case == CE_OOL_BP && dc->out_of_line_bitpacking->uncompressed_bits_per_value == 16 &&
      dc->out_of_line_bitpacking->values && dc->out_of_line_bitpacking->values->compression_case == CE_FLAT)
    return def_ool16(x, (unsigned)dc->out_of_line_bitpacking->values->flat->bits_per_value, p, n, cnt, lv);
  if (dc->compression_case == CE_INLINE_BP && dc->inline_bitpacking->uncompressed_bits_per_value == 16 &&
      dc->inline_bitpacking->values == NULL) {
    /* block form: per 1024 levels a u16 width then 64*W u16 words */
    uint64_t vals[FASTLANES_BLOCK];
    size_t at = 0;
    for (int64_t done = 0; done < cnt; done += FASTLANES_BLOCK) {
      if (n - at < 2) return BAD(x, "def bitpacking truncated", x->col, x->page);
      unsigned wb = mw_load_u16le(p + at);
      at += 2;
      if (wb > 16 || n - at < 128 * (size_t)wb) return BAD(x, "def bitpacking block of width %u truncated", x->col, x->page, wb);
      fastlanes_unpack(p + at, 16, wb, vals);
      at += 128 * (size_t)wb;
      for (int64_t i = 0; i < FASTLANES_BLOCK && done + i < cnt; i++) lv[done + i] = (uint16_t)vals[i];
    }
    return 0;
  }
  return UNSUP(x, "def level compression %d", x->col, x->page, (int)dc->compression_case);
}

/* FastLanes unpack of one 1024-value block of T-bit values packed at W bits. */
static void fastlanes_unpack(const uint8_t *src, unsigned t, unsigned wbits, uint64_t *out) {
  static const unsigned order[8] = {0, 4, 2, 6, 1, 5, 3, 7};
  unsigned lanes = FASTLANES_BLOCK / t, tb = t / 8;
  uint64_t mask = wbits == 64 ? ~0ull : ((1ull << wbits) - 1);
  for (unsigned lane = 0; lane < lanes; lane++) {
    for (unsigned row = 0; row < t; row++) {
      unsigned idx = order[row / 8] * 16 + (row % 8) * 128 + lane;
      uint64_t v = 0;
      if (wbits) {
        unsigned bit = row * wbits, word = bit / t, sh = bit % t;
        const uint8_t *wp = src + (size_t)(lanes * word + lane) * tb;
        uint64_t lo = tb == 8 ? mw_load_u64le(wp) : tb == 4 ? mw_load_u32le(wp) : tb == 2 ? mw_load_u16le(wp) : wp[0];
        v = lo >> sh;
        if (sh + wbits > t) {
          const uint8_t *np = src + (size_t)(lanes * (word + 1) + lane) * tb;
          uint64_t hi = tb == 8 ? mw_load_u64le(np) : tb == 4 ? mw_load_u32le(np) : tb == 2 ? mw_load_u16le(np) : np[0];
          v |= hi << (t - sh);
        }
        v &= mask;
      }
      out[idx] = v;
    }
  }
}

/* Load a tb-byte (1, 2, 4, 8) little-endian unsigned integer. */
static uint64_t load_uint(const uint8_t *p, size_t tb) {
  switch (tb) {
    case 1: return p[0];
    case 2: return mw_load_u16le(p);
    case 4: return mw_load_u32le(p);
    default: return mw_load_u64le(p);
  }
}

/* InlineBitpacking of T-bit values (T = 8, 16, 32, 64): per 1024 values a
 * T-bit width word, then the FastLanes block (lance-files.md §3.2). */
static int inline_bp(rctx_t *x, const uint8_t *p, size_t n, int64_t r, int64_t cnt, unsigned t) {
  uint64_t vals[FASTLANES_BLOCK];
  size_t tb = t / 8, at = 0;
  assert(tb == 1 || tb == 2 || tb == 4 || tb == 8);
  for (int64_t done = 0; done < cnt; done += FASTLANES_BLOCK) {
    if (n - at < tb) return BAD(x, "bitpacked chunk truncated at byte %zu", x->col, x->page, at);
    uint64_t wbits = load_uint(p + at, tb);
    at += tb;
    if (wbits > t) return BAD(x, "bit width %llu > %u", x->col, x->page, (unsigned long long)wbits, t);
    size_t bytes = (size_t)wbits * FASTLANES_BLOCK / 8;
    if (n - at < bytes) return BAD(x, "bitpacked block truncated at byte %zu", x->col, x->page, at);
    fastlanes_unpack(p + at, t, (unsigned)wbits, vals);
    at += bytes;
    int64_t k = cnt - done < FASTLANES_BLOCK ? cnt - done : FASTLANES_BLOCK;
    for (int64_t i = 0; i < k; i++) {
      uint8_t le[8];
      mw_store_u64le(le, vals[i]);
      memcpy(slot(x, r + done + i), le, tb);
    }
  }
  return 0;
}

/* Strip a General{ZSTD|LZ4} wrapper; returns the inner encoding and the
 * scheme (0 when there is no wrapper). */
static int unwrap_general(rctx_t *x, const CE *vc, const CE **inner, int *scheme) {
  *scheme = 0;
  *inner = vc;
  if (vc->compression_case != CE_GENERAL) return 0;
  if (vc->general->values == NULL || vc->general->compression == NULL)
    return BAD(x, "general compression incomplete", x->col, x->page);
  int sc = (int)vc->general->compression->scheme;
  if (sc != SCHEME_ZSTD && sc != SCHEME_LZ4) return UNSUP(x, "general compression scheme %d", x->col, x->page, sc);
  *scheme = sc;
  *inner = vc->general->values;
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
static int zstd_buf(rctx_t *x, mw_buf_t *dst, const uint8_t **p, size_t *n, size_t max_raw) {
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
static int general_buf(rctx_t *x, int scheme, mw_buf_t *dst, const uint8_t **p, size_t *n, size_t max_raw) {
  if (scheme == SCHEME_ZSTD) return zstd_buf(x, dst, p, n, max_raw);
  if (scheme == SCHEME_LZ4) return lz4_buf(x, dst, p, n, max_raw);
  assert(scheme == 0);
  return 0;
}

static int fsst_values(rctx_t *x, const Lance__Encodings21__Fsst *fs, const uint8_t *const *vb, const size_t *vn,
                       int64_t r, int64_t cnt, const uint16_t *def, bool compressed, size_t var_max);

/* The value compressions of a MiniBlock chunk, one function each; p/n is
 * the chunk's first value buffer, already through General (zstd, lz4). */
static int mbv_flat(rctx_t *x, const CE *ce, const uint8_t *p, size_t n, int64_t r, int64_t cnt) {
  const mw_field_t *f = x->fld;
  size_t w = mw_type_width(f);
  uint64_t bits = f->type == MW_T_BOOL ? 1 : 8 * w;
  if (is_var(f) || f->type == MW_T_FSL || ce->flat->bits_per_value != bits || ce->flat->data)
    return UNSUP(x, "flat of %llu bits for %s", x->col, x->page, (unsigned long long)ce->flat->bits_per_value, mw_type_name(f->type));
  if (n < ((size_t)cnt * bits + 7) / 8) return BAD(x, "value buffer of %zu bytes for %lld values", x->col, x->page, n, (long long)cnt);
  if (f->type == MW_T_BOOL) bits_copy_out(x, r, p, cnt);
  else memcpy(slot(x, r), p, (size_t)cnt * w);
  return 0;
}

static int mbv_inline_bp(rctx_t *x, const CE *ce, const uint8_t *p, size_t n, int64_t r, int64_t cnt) {
  const mw_field_t *f = x->fld;
  size_t w = mw_type_width(f);
  unsigned t = (unsigned)ce->inline_bitpacking->uncompressed_bits_per_value;
  /* Lance bitpacks any 1/2/4/8-byte fixed type as unsigned bits
   * (integers, temporal types, even float16) */
  if (mw_field_layout(f) != MW_LAYOUT_FIXED || (w != 1 && w != 2 && w != 4 && w != 8) ||
      t != 8 * w || ce->inline_bitpacking->values)
    return UNSUP(x, "inline bitpacking of %u bits for %s", x->col, x->page, t, mw_type_name(f->type));
  return inline_bp(x, p, n, r, cnt, t);
}

static int mbv_variable(rctx_t *x, const CE *ce, const uint8_t *p, size_t n, int64_t r, int64_t cnt) {
  const mw_field_t *f = x->fld;
  const CE *oc = ce->variable->offsets;
  if (!is_var(f) || oc == NULL || oc->compression_case != CE_FLAT || ce->variable->values ||
      (oc->flat->bits_per_value != 32 && oc->flat->bits_per_value != 64) || oc->flat->data)
    return UNSUP(x, "variable encoding variant for %s", x->col, x->page, mw_type_name(f->type));
  size_t ow = oc->flat->bits_per_value / 8;
  if (n / ow < (size_t)cnt + 1) return BAD(x, "offsets truncated (%zu bytes)", x->col, x->page, n);
  uint64_t prev = ow == 4 ? mw_load_u32le(p) : mw_load_u64le(p);
  for (int64_t i = 0; i < cnt; i++) {
    uint64_t e = ow == 4 ? mw_load_u32le(p + 4 * (i + 1)) : mw_load_u64le(p + 8 * (i + 1));
    if (e < prev || e > n) return BAD(x, "string offset %llu of value %lld out of range", x->col, x->page, (unsigned long long)e, (long long)i);
    int rc = var_put(x, r + i, p + prev, (size_t)(e - prev));
    if (rc < 0) return rc;
    prev = e;
  }
  return 0;
}

/* Item k of row `row` of a vector column is null (the column's item bitmap,
 * made all valid on the first null item). */
static int fsl_item_null(rctx_t *x, int64_t row, int64_t k) {
  const mw_field_t *f = x->fld;
  mw_column_t *c = x->c;
  assert(k < f->fsl_dim);
  if (c->item_validity.len == 0) {
    size_t tot = (size_t)c->length * (size_t)f->fsl_dim;
    size_t nb = (tot + 7) / 8;
    if (mw_buf_fill(&c->item_validity, 0xFF, nb) < 0) return -ENOMEM;
    if (tot & 7) c->item_validity.data[nb - 1] = (uint8_t)((1u << (tot & 7)) - 1);
  }
  mw_bit_set(c->item_validity.data, row * f->fsl_dim + k, false);
  c->item_null_count++;
  return 0;
}

static int mbv_fsl(rctx_t *x, const CE *ce, const uint8_t *const *vb, const size_t *vn, const uint8_t *p,
                   size_t n, bool compressed, int64_t r, int64_t cnt, const uint16_t *def) {
  const mw_field_t *f = x->fld;
  const Lance__Encodings21__FixedSizeList *fl = ce->fixed_size_list;
  if (f->type != MW_T_FSL || fl->items_per_value != (uint64_t)f->fsl_dim || fl->values == NULL ||
      fl->values->compression_case != CE_FLAT || fl->values->flat->bits_per_value != 8 * mw_fsl_item_width(f))
    return UNSUP(x, "fixed_size_list variant for %s", x->col, x->page, mw_type_name(f->type));
  size_t items = (size_t)cnt * (size_t)f->fsl_dim;
  const uint8_t *vp = p;
  size_t vpn = n;
  if (fl->has_validity) {
    if (compressed) return UNSUP(x, "compressed fsl with validity", x->col, x->page);
    if (n < (items + 7) / 8) return BAD(x, "fsl validity truncated", x->col, x->page);
    vp = vb[1], vpn = vn[1];
  }
  size_t iw = mw_fsl_item_width(f);
  if (vpn < items * iw) return BAD(x, "fsl values of %zu bytes for %lld rows", x->col, x->page, vpn, (long long)cnt);
  memcpy(slot(x, r), vp, items * iw);
  for (int64_t i = 0; i < cnt; i++) {
    if (def && def[i]) {
      memset(slot(x, r + i), 0, mw_type_width(f));
      continue;
    }
    for (int64_t k = 0; fl->has_validity && k < f->fsl_dim; k++)
      if (!mw_bit_get(p, i * f->fsl_dim + k) && fsl_item_null(x, r + i, k) < 0) return -ENOMEM;
  }
  return 0;
}

/* Lance's RLE (physical/rle.rs): two value buffers per chunk, the run
 * values Flat{8w} and their lengths Flat{8} (1..255 each):
 *   values 01 00 00 00 02 00 00 00   lengths 03 02   -> 1 1 1 2 2 */
static int mbv_rle(rctx_t *x, const CE *ce, const uint8_t *const *vb, const size_t *vn, const uint8_t *p,
                   size_t n, bool compressed, int64_t r, int64_t cnt) {
  const mw_field_t *f = x->fld;
  size_t w = mw_type_width(f);
  const Lance__Encodings21__Rle *rl = ce->rle;
  if (mw_field_layout(f) != MW_LAYOUT_FIXED || (w != 1 && w != 2 && w != 4 && w != 8) || compressed ||
      rl->values == NULL || rl->values->compression_case != CE_FLAT ||
      rl->values->flat->bits_per_value != 8 * w || rl->run_lengths == NULL ||
      rl->run_lengths->compression_case != CE_FLAT || rl->run_lengths->flat->bits_per_value != 8)
    return UNSUP(x, "rle variant for %s", x->col, x->page, mw_type_name(f->type));
  size_t runs = vn[1];
  if (vb[1] == NULL || n / w < runs) return BAD(x, "rle of %zu runs with %zu value bytes", x->col, x->page, runs, n);
  int64_t at = 0;
  for (size_t i = 0; i < runs; i++) {
    uint8_t len = vb[1][i];
    if (len == 0 || len > cnt - at) return BAD(x, "rle run %zu of %u values overruns the chunk's %lld", x->col, x->page, i, len, (long long)cnt);
    for (uint8_t k = 0; k < len; k++) memcpy(slot(x, r + at + k), p + i * w, w);
    at += len;
  }
  if (at != cnt) return BAD(x, "rle runs hold %lld of %lld values", x->col, x->page, (long long)at, (long long)cnt);
  return 0;
}

static int mb_values(rctx_t *x, const CE *vc, const uint8_t *const *vb, const size_t *vn,
                     int64_t r, int64_t cnt, const uint16_t *def) {
  const mw_field_t *f = x->fld;
  assert(cnt >= 0);
  const uint8_t *p = vb[0];
  size_t n = vn[0];
  const CE *ce;
  int scheme;
  int rc = unwrap_general(x, vc, &ce, &scheme);
  if (rc < 0) return rc;
  bool compressed = scheme != 0;
  /* a variable-width page's values are bounded by the reader's column limit */
  size_t var_max = x->f->max_column_bytes < INT32_MAX ? (size_t)x->f->max_column_bytes : INT32_MAX;
  size_t max_raw = is_var(f) ? var_max : (size_t)cnt * (mw_type_width(f) + 8) + 4096;
  if ((rc = general_buf(x, scheme, &x->scratch2, &p, &n, max_raw)) < 0) return rc;
  switch (ce->compression_case) {
    case CE_FLAT: return mbv_flat(x, ce, p, n, r, cnt);
    case CE_INLINE_BP: return mbv_inline_bp(x, ce, p, n, r, cnt);
    case CE_VARIABLE: return mbv_variable(x, ce, p, n, r, cnt);
    case CE_FSL: return mbv_fsl(x, ce, vb, vn, p, n, compressed, r, cnt, def);
    case CE_RLE: return mbv_rle(x, ce, vb, vn, p, n, compressed, r, cnt);
    case CE_FSST: return fsst_values(x, ce->fsst, vb, vn, r, cnt, def, compressed, var_max);
    default:
      return UNSUP(x, "value compression %d not implemented", x->col, x->page, (int)ce->compression_case);
  }
}

/* Fsst{symbol_table, values}: the chunk's strings, FSST-compressed, are
 * encoded by `values` (Variable); they are appended as they are, then
 * replaced by their decompressed bytes (at most 8 per code byte). A page
 * under 32 KiB has the table's compressed bit off: the strings are then
 * stored verbatim (what LanceDB's small SSTables hold). */
static int fsst_values(rctx_t *x, const Lance__Encodings21__Fsst *fs, const uint8_t *const *vb, const size_t *vn,
                       int64_t r, int64_t cnt, const uint16_t *def, bool compressed, size_t var_max) {
  const mw_field_t *f = x->fld;
  if (!is_var(f) || compressed || fs->values == NULL || fs->values->compression_case != CE_VARIABLE)
    return UNSUP(x, "fsst variant for %s", x->col, x->page, mw_type_name(f->type));
  mw_fsst_table_t t;
  if (mw_fsst_table_parse(&t, fs->symbol_table.data, fs->symbol_table.len) < 0)
    return BAD(x, "fsst symbol table of %zu bytes malformed", x->col, x->page, fs->symbol_table.len);
  mw_column_t *c = x->c;
  int32_t *off = (int32_t *)(void *)c->offsets.data;
  size_t start = c->values.len;
  assert((size_t)off[r] == start);
  int rc = mb_values(x, fs->values, vb, vn, r, cnt, def);
  if (rc < 0 || !t.compressed) return rc;
  mw_buf_reset(&x->scratch2); /* the compressed strings, moved aside */
  if (mw_buf_append(&x->scratch2, c->values.data + start, c->values.len - start) < 0) return -ENOMEM;
  c->values.len = start;
  size_t a = 0;
  for (int64_t i = 0; i < cnt; i++) {
    size_t b = (size_t)off[r + i + 1] - start; /* read before var_put_fsst rewrites it */
    assert(b >= a);
    if ((rc = var_put_fsst(x, r + i, &t, x->scratch2.data + a, b - a, var_max)) < 0) return rc;
    a = b;
  }
  return 0;
}

/* ---- MiniBlock pages with a dictionary ----
 *
 * Lance (2.1+) may dictionary-encode a page: the chunks then hold indices
 * (any value compression of unsigned integers: InlineBitpacking, RLE,
 * Flat) and page buffer 2 holds the dictionary's num_dictionary_items
 * values as one block, encoded by MiniBlockLayout.dictionary:
 *   Flat{8w}                   the values back to back (fixed width)
 *   InlineBitpacking{8w}       per 1024 values a width word and a FastLanes
 *                              block, as in a chunk (fixed width)
 *   OutOfLineBitpacking{8w, Flat{W}}  FastLanes blocks of W bits, one
 *                              width for all (ool_unpack; fixed width)
 *   Variable{offsets Flat{32}} u32 32 | u32 start of the bytes | (n+1) u32
 *                              offsets (from that start) | the bytes
 *                              (Flat{64}: the same with u64 fields)
 * either possibly inside General{LZ4|ZSTD}. A sample from an SSTable
 * LanceDB wrote, 2461 int64 keys with 591 distinct values:
 *   values inline_bitpacking(32), dictionary(591): general(lz4, flat(64)),
 *   buffer 2 = u32 4728 (591 x 8) || an LZ4 block of the sorted keys.
 * A null row's index points at some entry; the row stays null. */

typedef struct dict {
  uint64_t n;
  size_t w;                  /* fixed width: bytes per value */
  const uint8_t *vals;       /* fixed: n * w bytes; variable: the bytes */
  size_t vals_len;
  const uint8_t *offs;       /* variable: n + 1 offsets of ow bytes */
  size_t ow;
  mw_buf_t raw;              /* the decompressed block */
  mw_column_t col;           /* bitpacked values, unpacked */
} dict_t;

static void dict_free(dict_t *d) {
  mw_buf_free(&d->raw);
  mw_buf_free(&d->col.values);
}

/* OutOfLineBitpacking{T, Flat{W}} of a whole buffer of cnt T-bit values
 * (as Lance compresses blocks: dictionaries, def levels): whole 1024-value
 * FastLanes blocks of 128*W bytes, then the tail either packed as one
 * padded block or stored raw (T-bit values), told apart by the length.
 * Values go to dst, T/8 bytes each. */
static int ool_unpack(rctx_t *x, const uint8_t *p, size_t n, uint64_t cnt, unsigned t, uint64_t wbits, uint8_t *dst) {
  uint64_t vals[FASTLANES_BLOCK];
  size_t tb = t / 8;
  assert(tb == 1 || tb == 2 || tb == 4 || tb == 8);
  if (wbits == 0 || wbits > t) return BAD(x, "bitpacking width %llu of %u-bit values", x->col, x->page, (unsigned long long)wbits, t);
  uint64_t blk = 128 * wbits, full = cnt / FASTLANES_BLOCK, tail = cnt % FASTLANES_BLOCK;
  bool raw = tail > 0 && n == full * blk + tail * tb;
  if (n < full * blk + (tail ? (raw ? tail * tb : blk) : 0))
    return BAD(x, "bitpacked buffer of %zu bytes for %llu values", x->col, x->page, n, (unsigned long long)cnt);
  for (uint64_t b = 0; b < full + (tail && !raw); b++) {
    fastlanes_unpack(p + b * blk, t, (unsigned)wbits, vals);
    uint64_t k = b < full ? FASTLANES_BLOCK : tail;
    for (uint64_t i = 0; i < k; i++) {
      uint8_t le[8];
      mw_store_u64le(le, vals[i]);
      memcpy(dst + (b * FASTLANES_BLOCK + i) * tb, le, tb);
    }
  }
  if (raw) memcpy(dst + full * FASTLANES_BLOCK * tb, p + full * blk, tail * tb);
  return 0;
}

static int dict_decode(rctx_t *x, const Lance__Encodings21__MiniBlockLayout *mb, dict_t *d) {
  const mw_field_t *f = x->fld;
  memset(d, 0, sizeof *d);
  d->n = mb->num_dictionary_items;
  if (x->n_bufs < 3) return BAD(x, "dictionary page with %zu buffers", x->col, x->page, x->n_bufs);
  if (d->n == 0 || d->n > (uint64_t)x->n + 1) return BAD(x, "%llu dictionary items for %lld rows", x->col, x->page, (unsigned long long)d->n, (long long)x->n);
  const CE *ce;
  int scheme, rc = unwrap_general(x, mb->dictionary, &ce, &scheme);
  if (rc < 0) return rc;
  const uint8_t *p = x->buf[2];
  size_t n = x->buf_len[2];
  size_t var_max = x->f->max_column_bytes < INT32_MAX ? (size_t)x->f->max_column_bytes : INT32_MAX;
  size_t max_raw = is_var(f) ? var_max : (size_t)d->n * mw_type_width(f);
  if ((rc = general_buf(x, scheme, &d->raw, &p, &n, max_raw)) < 0) return rc;
  if (ce->compression_case == CE_INLINE_BP && mw_field_layout(f) == MW_LAYOUT_FIXED && f->type != MW_T_BOOL) {
    d->w = mw_type_width(f);
    unsigned t = (unsigned)ce->inline_bitpacking->uncompressed_bits_per_value;
    if ((d->w != 1 && d->w != 2 && d->w != 4 && d->w != 8) || t != 8 * d->w || ce->inline_bitpacking->values)
      return UNSUP(x, "dictionary of inline bitpacking(%u) for %s", x->col, x->page, t, mw_type_name(f->type));
    if (mw_buf_fill(&d->col.values, 0, (size_t)d->n * d->w) < 0) return -ENOMEM;
    rctx_t xd = *x; /* unpack into the dictionary's own column (no scratch used) */
    xd.c = &d->col, xd.row0 = 0;
    if ((rc = inline_bp(&xd, p, n, 0, (int64_t)d->n, t)) < 0) return rc;
    d->vals = d->col.values.data;
    d->vals_len = (size_t)d->n * d->w;
    return 0;
  }
  if (ce->compression_case == CE_OOL_BP && mw_field_layout(f) == MW_LAYOUT_FIXED && f->type != MW_T_BOOL) {
    const Lance__Encodings21__OutOfLineBitpacking *ob = ce->out_of_line_bitpacking;
    d->w = mw_type_width(f);
    unsigned t = (unsigned)ob->uncompressed_bits_per_value;
    if ((d->w != 1 && d->w != 2 && d->w != 4 && d->w != 8) || t != 8 * d->w || ob->values == NULL ||
        ob->values->compression_case != CE_FLAT || ob->values->flat->data)
      return UNSUP(x, "dictionary of out_of_line_bitpacking(%u) for %s", x->col, x->page, t, mw_type_name(f->type));
    if (mw_buf_fill(&d->col.values, 0, (size_t)d->n * d->w) < 0) return -ENOMEM;
    if ((rc = ool_unpack(x, p, n, d->n, t, ob->values->flat->bits_per_value, d->col.values.data)) < 0) return rc;
    d->vals = d->col.values.data;
    d->vals_len = (size_t)d->n * d->w;
    return 0;
  }
  if (ce->compression_case == CE_FLAT && mw_field_layout(f) == MW_LAYOUT_FIXED && f->type != MW_T_BOOL) {
    d->w = mw_type_width(f);
    if (ce->flat->bits_per_value != 8 * d->w || ce->flat->data)
      return UNSUP(x, "dictionary of flat(%llu) for %s", x->col, x->page, (unsigned long long)ce->flat->bits_per_value, mw_type_name(f->type));
    if (n / d->w < d->n) return BAD(x, "dictionary of %zu bytes for %llu values", x->col, x->page, n, (unsigned long long)d->n);
    d->vals = p;
    d->vals_len = (size_t)d->n * d->w;
    return 0;
  }
  if (ce->compression_case != CE_VARIABLE || !is_var(f))
    return UNSUP(x, "dictionary encoding %d for %s", x->col, x->page, (int)ce->compression_case, mw_type_name(f->type));
  if (n < 8) return BAD(x, "variable dictionary of %zu bytes", x->col, x->page, n);
  uint32_t bits = mw_load_u32le(p);
  size_t hdr = bits == 32 ? 8 : 16;
  if ((bits != 32 && bits != 64) || n < hdr) return UNSUP(x, "variable dictionary block with %u-bit offsets", x->col, x->page, bits);
  uint64_t start = bits == 32 ? mw_load_u32le(p + 4) : mw_load_u64le(p + 8);
  d->ow = bits / 8;
  if (start < hdr || start > n || (start - hdr) / d->ow < d->n + 1)
    return BAD(x, "variable dictionary: bytes start at %llu of %zu for %llu values", x->col, x->page, (unsigned long long)start, n, (unsigned long long)d->n);
  d->offs = p + hdr;
  d->vals = p + start;
  d->vals_len = n - (size_t)start;
  uint64_t prev = 0;
  for (uint64_t i = 0; i <= d->n; i++) { /* offsets never go back and stay inside the bytes */
    uint64_t o = d->ow == 4 ? mw_load_u32le(d->offs + 4 * i) : mw_load_u64le(d->offs + 8 * i);
    if ((i > 0 && o < prev) || o > d->vals_len)
      return BAD(x, "variable dictionary offset %llu of entry %llu out of range", x->col, x->page, (unsigned long long)o, (unsigned long long)i);
    prev = o;
  }
  return 0;
}

/* Bits of each index, from the value compression (through General). */
static unsigned index_bits(const CE *vc) {
  if (vc->compression_case == CE_GENERAL && vc->general->values) vc = vc->general->values;
  switch (vc->compression_case) {
    case CE_FLAT: return (unsigned)vc->flat->bits_per_value;
    case CE_INLINE_BP: return (unsigned)vc->inline_bitpacking->uncompressed_bits_per_value;
    case CE_RLE: return vc->rle->values && vc->rle->values->compression_case == CE_FLAT ? (unsigned)vc->rle->values->flat->bits_per_value : 0;
    default: return 0;
  }
}

/* Rows [row0, row0 + n) of x->c from the indices (idx, iw bytes each). */
static int dict_gather(rctx_t *x, const dict_t *d, const uint8_t *idx, size_t iw) {
  for (int64_t i = 0; i < x->n; i++) {
    int64_t r = x->row0 + i;
    bool null = !mw_bit_get(x->c->validity.data, r);
    uint64_t k = load_uint(idx + (size_t)i * iw, iw);
    if (!null && k >= d->n)
      return BAD(x, "row %lld: dictionary index %llu of %llu entries", x->col, x->page, (long long)i, (unsigned long long)k, (unsigned long long)d->n);
    if (d->offs == NULL) {
      if (!null) memcpy(slot(x, r), d->vals + (size_t)k * d->w, d->w);
      continue;
    }
    uint64_t a = 0, b = 0;
    if (!null) {
      a = d->ow == 4 ? mw_load_u32le(d->offs + 4 * k) : mw_load_u64le(d->offs + 8 * k);
      b = d->ow == 4 ? mw_load_u32le(d->offs + 4 * (k + 1)) : mw_load_u64le(d->offs + 8 * (k + 1));
    }
    int rc = var_put(x, r, d->vals + a, (size_t)(b - a));
    if (rc < 0) return rc;
  }
  return 0;
}

static int miniblock_chunks(rctx_t *x, rctx_t *xv, const Lance__Encodings21__MiniBlockLayout *mb, size_t nvb);

static int miniblock_page(rctx_t *x, const Lance__Encodings21__MiniBlockLayout *mb) {
  if (mb->rep_compression || mb->repetition_index_depth)
    return UNSUP(x, "miniblock with repetition", x->col, x->page);
  if (mb->value_compression == NULL) return BAD(x, "miniblock without value compression", x->col, x->page);
  if (mb->n_layers != 1 || (mb->layers[0] != LAYER_ALL_VALID && mb->layers[0] != LAYER_NULLABLE))
    return UNSUP(x, "miniblock layers not a single item layer", x->col, x->page);
  if (mb->num_items != (uint64_t)x->n)
    return BAD(x, "num_items %llu != page length %lld", x->col, x->page, (unsigned long long)mb->num_items, (long long)x->n);
  if (x->f->major == 2 && x->f->minor >= 2 && !mb->has_large_chunk)
    return BAD(x, "2.2 miniblock without has_large_chunk", x->col, x->page);
  const CE *dc = mb->def_compression;
  if ((dc != NULL) != (mb->layers[0] == LAYER_NULLABLE))
    return BAD(x, "def compression does not match the layer", x->col, x->page);
  size_t nvb = (size_t)mb->num_buffers;
  if (nvb < 1 || nvb > 2) return UNSUP(x, "%zu value buffers per chunk", x->col, x->page, nvb);
  if (x->n_bufs < 2) return BAD(x, "miniblock page with %zu buffers", x->col, x->page, x->n_bufs);
  /* with a dictionary, the chunks decode into indices (xi), gathered after */
  dict_t d;
  memset(&d, 0, sizeof d);
  rctx_t xi;
  mw_field_t ifld;
  mw_column_t icol;
  memset(&icol, 0, sizeof icol);
  rctx_t *xv = x;
  size_t iw = 0;
  int rc = 0;
  if (mb->dictionary) {
    unsigned ib = index_bits(mb->value_compression);
    if (ib != 8 && ib != 16 && ib != 32 && ib != 64)
      return UNSUP(x, "dictionary indices of %u bits", x->col, x->page, ib);
    iw = ib / 8;
    if ((rc = dict_decode(x, mb, &d)) < 0) {
      dict_free(&d);
      return rc;
    }
    memset(&ifld, 0, sizeof ifld);
    ifld.type = iw == 1 ? MW_T_UINT8 : iw == 2 ? MW_T_UINT16 : iw == 4 ? MW_T_UINT32 : MW_T_UINT64;
    if (mw_buf_fill(&icol.values, 0, (size_t)x->n * iw) < 0) {
      dict_free(&d);
      return -ENOMEM;
    }
    xi = *x; /* its own scratch buffers: the page's def levels stay in x's */
    xi.fld = &ifld, xi.c = &icol, xi.row0 = 0;
    xi.scratch = (mw_buf_t)MW_BUF_INIT, xi.scratch2 = (mw_buf_t)MW_BUF_INIT;
    xv = &xi;
  }
  rc = miniblock_chunks(x, xv, mb, nvb);
  if (rc == 0 && mb->dictionary) rc = dict_gather(x, &d, icol.values.data, iw);
  if (mb->dictionary) {
    mw_buf_free(&xi.scratch);
    mw_buf_free(&xi.scratch2);
    mw_buf_free(&icol.values);
    dict_free(&d);
  }
  return rc;
}

/* The chunks of a MiniBlock page: def levels mark x's rows null, values go
 * to xv (x itself, or the index column of a dictionary page). */
static int miniblock_chunks(rctx_t *x, rctx_t *xv, const Lance__Encodings21__MiniBlockLayout *mb, size_t nvb) {
  const CE *dc = mb->def_compression;
  size_t ww = mb->has_large_chunk ? 4 : 2, sw = ww;
  const uint8_t *words = x->buf[0], *data = x->buf[1];
  uint64_t n_words = x->buf_len[0] / ww, dlen = x->buf_len[1], at = 0;
  int64_t done = 0;
  for (uint64_t ci = 0; ci < n_words; ci++) {
    uint32_t wd = ww == 4 ? mw_load_u32le(words + 4 * ci) : mw_load_u16le(words + 2 * ci);
    uint64_t cbytes = ((uint64_t)(wd >> 4) + 1) * 8;
    bool last = ci + 1 == n_words;
    int64_t cnt = last ? x->n - done : (int64_t)1 << (wd & 15);
    if (cnt <= 0 || cnt > x->n - done || cnt > CHUNK_MAX_DECODE_VALUES)
      return BAD(x, "chunk %llu holds %lld values, %lld left", x->col, x->page, (unsigned long long)ci, (long long)cnt, (long long)(x->n - done));
    if (cbytes > dlen - at) return BAD(x, "chunk %llu at byte %llu overruns the %llu-byte buffer", x->col, x->page, (unsigned long long)ci, (unsigned long long)at, (unsigned long long)dlen);
    const uint8_t *cp = data + at;
    size_t hn = 2 + (dc ? 2 : 0) + nvb * sw, pos;
    if (hn > cbytes) return BAD(x, "chunk %llu header truncated", x->col, x->page, (unsigned long long)ci);
    uint16_t levels = mw_load_u16le(cp);
    size_t defn = dc ? mw_load_u16le(cp + 2) : 0, vn[2] = {0, 0};
    const uint8_t *vb[2] = {NULL, NULL};
    for (size_t b = 0; b < nvb; b++) vn[b] = sw == 4 ? mw_load_u32le(cp + 2 + (dc ? 2 : 0) + 4 * b) : mw_load_u16le(cp + 2 + (dc ? 2 : 0) + 2 * b);
    pos = pad8(hn);
    if (dc && levels != cnt) return BAD(x, "chunk %llu has %u levels for %lld values", x->col, x->page, (unsigned long long)ci, levels, (long long)cnt);
    const uint8_t *defp = cp + pos;
    if (defn > cbytes - pos) return BAD(x, "chunk %llu def levels overrun", x->col, x->page, (unsigned long long)ci);
    pos += pad8(defn);
    for (size_t b = 0; b < nvb; b++) {
      if (pos > cbytes || vn[b] > cbytes - pos) return BAD(x, "chunk %llu value buffer %zu overruns", x->col, x->page, (unsigned long long)ci, b);
      vb[b] = cp + pos;
      pos += pad8(vn[b]);
    }
    const uint16_t *def = NULL;
    int rc;
    if (dc) {
      if ((rc = def_decode(x, dc, defp, defn, cnt)) < 0) return rc;
      def = (const uint16_t *)(const void *)x->scratch.data;
    }
    if ((rc = mb_values(xv, mb->value_compression, vb, vn, xv->row0 + done, cnt, def)) < 0) return rc;
    if (def)
      for (int64_t i = 0; i < cnt; i++)
        if (def[i]) mark_null(x, x->row0 + done + i);
    done += cnt;
    at += cbytes;
  }
  if (done != x->n) return BAD(x, "chunks hold %lld of %lld values", x->col, x->page, (long long)done, (long long)x->n);
  return 0;
}

/* FullZip of utf8/binary values (Lance picks it for large values): buffer 0
 * holds the rows back to back, each a control byte of def bits (when the
 * layer is nullable; non-zero = null) and, for a valid row, its length
 * (bits_per_offset wide) and bytes; buffer 1 is a repetition index of row
 * starts, not needed to read the page whole. The values may be FSST
 * (Fsst{table, Variable}, each value decompressed on its own) or, for
 * values over 32 KiB, General{zstd, Variable}: each value u64 LE raw
 * length || zstd frame (Lance's CompressedBufferEncoder). Two rows,
 * null then "abc":
 *   01 | 00 03 00 00 00 61 62 63 */
static int fullzip_var(rctx_t *x, const Lance__Encodings21__FullZipLayout *fz) {
  const mw_field_t *f = x->fld;
  const CE *vc = fz->value_compression;
  const Lance__Encodings21__Fsst *fs = NULL;
  bool zs = vc->compression_case == CE_GENERAL && vc->general->compression != NULL &&
            vc->general->compression->scheme == SCHEME_ZSTD; /* each value u64 raw || frame */
  if (zs) vc = vc->general->values;
  if (vc != NULL && vc->compression_case == CE_FSST && !zs) {
    fs = vc->fsst;
    vc = fs->values;
  }
  size_t ow = fz->bits_per_offset / 8, ctrl = fz->bits_def ? 1 : 0;
  if (vc == NULL || vc->compression_case != CE_VARIABLE || (ow != 4 && ow != 8) || fz->bits_per_offset % 8)
    return UNSUP(x, "fullzip variable-width encoding for %s", x->col, x->page, mw_type_name(f->type));
  mw_fsst_table_t t;
  if (fs && mw_fsst_table_parse(&t, fs->symbol_table.data, fs->symbol_table.len) < 0)
    return BAD(x, "fsst symbol table of %zu bytes malformed", x->col, x->page, fs->symbol_table.len);
  size_t var_max = x->f->max_column_bytes < INT32_MAX ? (size_t)x->f->max_column_bytes : INT32_MAX;
  const uint8_t *p = x->buf[0];
  size_t n = x->buf_len[0], at = 0;
  for (int64_t i = 0; i < x->n; i++) {
    int64_t r = x->row0 + i;
    if (ctrl) {
      if (at >= n) return BAD(x, "fullzip row %lld past the %zu-byte buffer", x->col, x->page, (long long)i, n);
      if (p[at++] & ((1u << fz->bits_def) - 1)) {
        mark_null(x, r);
        int rc = var_put(x, r, NULL, 0);
        if (rc < 0) return rc;
        continue;
      }
    }
    if (n - at < ow) return BAD(x, "fullzip row %lld: length past the buffer", x->col, x->page, (long long)i);
    uint64_t len = ow == 4 ? mw_load_u32le(p + at) : mw_load_u64le(p + at);
    at += ow;
    if (len > n - at) return BAD(x, "fullzip row %lld: %llu bytes past the buffer", x->col, x->page, (long long)i, (unsigned long long)len);
    const uint8_t *vp = p + at;
    size_t vn = (size_t)len;
    int rc = zs && vn > 0 ? zstd_buf(x, &x->scratch, &vp, &vn, var_max) : 0;
    if (rc == 0) rc = fs && t.compressed ? var_put_fsst(x, r, &t, vp, vn, var_max) : var_put(x, r, vp, vn);
    if (rc < 0) return rc;
    if (x->c->values.len > var_max) return BAD(x, "values exceed %zu bytes", x->col, x->page, var_max);
    at += (size_t)len;
  }
  if (at != n) return BAD(x, "fullzip buffer holds %zu bytes after the last row", x->col, x->page, n - at);
  return 0;
}

static int fullzip_page_read(rctx_t *x, const Lance__Encodings21__FullZipLayout *fz) {
  const mw_field_t *f = x->fld;
  const CE *vc = fz->value_compression;
  if (vc != NULL && is_var(f) && fz->bits_rep == 0 && fz->bits_def <= 8 && fz->n_layers == 1 &&
      fz->details_case == LANCE__ENCODINGS21__FULL_ZIP_LAYOUT__DETAILS_BITS_PER_OFFSET &&
      fz->num_items == (uint64_t)x->n && x->n_bufs >= 1 && (fz->bits_def > 0) == (fz->layers[0] == LAYER_NULLABLE))
    return fullzip_var(x, fz);
  if (fz->bits_rep || fz->bits_def > 8 || fz->details_case != LANCE__ENCODINGS21__FULL_ZIP_LAYOUT__DETAILS_BITS_PER_VALUE)
    return UNSUP(x, "fullzip with repetition or variable width", x->col, x->page);
  if (vc == NULL) return BAD(x, "fullzip without value compression", x->col, x->page);
  if (fz->num_items != (uint64_t)x->n || x->n_bufs < 1)
    return BAD(x, "fullzip num_items %u for %lld rows", x->col, x->page, fz->num_items, (long long)x->n);
  if (fz->n_layers != 1 || (fz->bits_def > 0) != (fz->layers[0] == LAYER_NULLABLE))
    return BAD(x, "fullzip layers do not match bits_def", x->col, x->page);
  size_t w = mw_type_width(f), vbits = 0, ctrl = fz->bits_def ? 1 : 0;
  bool validity = false;
  if (f->type == MW_T_FSL && vc->compression_case == CE_FSL) {
    const Lance__Encodings21__FixedSizeList *fl = vc->fixed_size_list;
    if (fl->items_per_value != (uint64_t)f->fsl_dim || !fl->values || fl->values->compression_case != CE_FLAT ||
        fl->values->flat->bits_per_value != 8 * mw_fsl_item_width(f))
      return UNSUP(x, "fullzip fsl variant", x->col, x->page);
    validity = fl->has_validity;
  } else if (vc->compression_case == CE_FLAT && !is_var(f) && f->type != MW_T_BOOL &&
             vc->flat->bits_per_value == 8 * w) {
  } else {
    return UNSUP(x, "fullzip value compression %d for %s", x->col, x->page, (int)vc->compression_case, mw_type_name(f->type));
  }
  size_t vbytes = validity ? ((size_t)f->fsl_dim + 7) / 8 : 0;
  vbits = (size_t)fz->bits_per_value;
  if (vbits != 8 * (w + vbytes)) return BAD(x, "fullzip bits_per_value %zu", x->col, x->page, vbits);
  size_t rowb = ctrl + vbytes + w;
  if (x->buf_len[0] / rowb < (uint64_t)x->n) return BAD(x, "fullzip buffer of %llu bytes for %lld rows", x->col, x->page, (unsigned long long)x->buf_len[0], (long long)x->n);
  const uint8_t *p = x->buf[0];
  if (rowb == w) {
    memcpy(slot(x, x->row0), p, (size_t)x->n * w);
    return 0;
  }
  for (int64_t i = 0; i < x->n; i++, p += rowb) {
    bool null = ctrl && (p[0] & ((1u << fz->bits_def) - 1));
    if (null) {
      mark_null(x, x->row0 + i);
      continue;
    }
    memcpy(slot(x, x->row0 + i), p + ctrl + vbytes, w);
    for (int64_t k = 0; validity && k < f->fsl_dim; k++)
      if (!mw_bit_get(p + ctrl, k)) return UNSUP(x, "null items inside fullzip vectors", x->col, x->page);
  }
  return 0;
}

/* Every row of the page gets the inline value v (len bytes). */
static int constant_fill(rctx_t *x, const mw_field_t *f, const uint8_t *v, size_t len) {
  if (f->type == MW_T_BOOL) {
    if (len != 1 || v[0] > 1) return UNSUP(x, "bool constant of %zu bytes", x->col, x->page, len);
    for (int64_t i = 0; v[0] && i < x->n; i++) mw_bit_set(x->c->values.data, x->row0 + i, true);
    return 0;
  }
  if (mw_field_layout(f) != MW_LAYOUT_FIXED || len != mw_type_width(f))
    return UNSUP(x, "constant of %zu bytes for %s", x->col, x->page, len, mw_type_name(f->type));
  for (int64_t i = 0; i < x->n; i++) memcpy(slot(x, x->row0 + i), v, len);
  return 0;
}

/* A constant utf8/binary value Lance keeps in page buffer 0 instead of
 * inline_value (which holds fixed-width values of at most 32 bytes): the
 * value as a one-row Arrow array, its buffer count, their sizes, then the
 * buffers. "__replay__" (a column whose rows all hold it):
 *   02 00 00 00 | 08 00 00 00 0a 00 00 00 | 00 00 00 00 0a 00 00 00 | "__replay__"
 *   2 buffers     sizes 8 and 10           offsets 0, 10             the bytes
 * (large types: 16 bytes of u64 offsets). Every valid row of the page gets it. */
static int constant_scalar(rctx_t *x, const uint8_t *p, uint64_t n) {
  const mw_field_t *f = x->fld;
  if (!is_var(f)) return UNSUP(x, "constant value buffer for %s", x->col, x->page, mw_type_name(f->type));
  if (n < 12 || mw_load_u32le(p) != 2) return BAD(x, "constant value buffer of %llu bytes: not 2 buffers", x->col, x->page, (unsigned long long)n);
  uint64_t ol = mw_load_u32le(p + 4), dl = mw_load_u32le(p + 8);
  if ((ol != 8 && ol != 16) || 12 + ol + dl != n)
    return BAD(x, "constant value buffer: sizes %llu + %llu in %llu bytes", x->col, x->page, (unsigned long long)ol,
               (unsigned long long)dl, (unsigned long long)n);
  const uint8_t *op = p + 12, *data = op + ol;
  uint64_t a = ol == 8 ? mw_load_u32le(op) : mw_load_u64le(op), b = ol == 8 ? mw_load_u32le(op + 4) : mw_load_u64le(op + 8);
  if (a > b || b > dl) return BAD(x, "constant value offsets %llu..%llu of %llu bytes", x->col, x->page, (unsigned long long)a,
                                 (unsigned long long)b, (unsigned long long)dl);
  for (int64_t i = 0; i < x->n; i++) { /* rows the def levels made null stay empty */
    bool null = !mw_bit_get(x->c->validity.data, x->row0 + i);
    int rc = var_put(x, x->row0 + i, data + a, null ? 0 : (size_t)(b - a));
    if (rc < 0) return rc;
  }
  return 0;
}

/* ConstantLayout. Where the value is: inline_value (fixed width, at most
 * 32 bytes), or page buffer 0 for a utf8/binary value (constant_scalar);
 * nulls: none, all (no value at all), or an empty rep buffer and raw u16
 * def levels, one per row, after the value buffer if there is one (Lance
 * writes these for a nullable column whose valid values are all equal):
 *   buffers  []                 inline value, or all null
 *            [value]            every row holds the value
 *            [rep, def]         inline value, def levels
 *            [value, rep, def]  e.g. "same-value" in 30 bytes, 0, 2 x rows */
static int constant_page(rctx_t *x, const Lance__Encodings21__ConstantLayout *cl) {
  if (cl->rep_compression || cl->def_compression || cl->num_rep_values || cl->num_def_values)
    return UNSUP(x, "constant layout with compressed rep/def levels", x->col, x->page);
  if (cl->n_layers != 1) return UNSUP(x, "constant layout with %zu layers", x->col, x->page, cl->n_layers);
  const mw_field_t *f = x->fld;
  size_t len = cl->inline_value.len;
  bool value_buf = len == 0 && (x->n_bufs == 1 || x->n_bufs == 3);
  size_t d0 = value_buf ? 1 : 0; /* the first rep/def buffer */
  if (x->n_bufs - d0 != 0 && x->n_bufs - d0 != 2)
    return UNSUP(x, "constant layout with %zu buffers", x->col, x->page, x->n_bufs);
  if (x->n_bufs - d0 == 2) {
    if (len == 0 && !value_buf) return BAD(x, "constant def levels without a value", x->col, x->page);
    if (x->buf_len[d0] != 0) return UNSUP(x, "constant layout with rep levels", x->col, x->page);
    if (cl->layers[0] != LAYER_NULLABLE) return BAD(x, "constant def levels on a non-null layer", x->col, x->page);
    const uint8_t *def = x->buf[d0 + 1];
    if (x->buf_len[d0 + 1] < 2 * (uint64_t)x->n)
      return BAD(x, "constant def levels of %llu bytes for %lld rows", x->col, x->page,
                 (unsigned long long)x->buf_len[d0 + 1], (long long)x->n);
    for (int64_t i = 0; i < x->n; i++) {
      uint16_t d = mw_load_u16le(def + 2 * i);
      if (d > 1) return BAD(x, "constant def level %u", x->col, x->page, d);
      if (d) mark_null(x, x->row0 + i);
    }
  }
  if (value_buf) return constant_scalar(x, x->buf[0], x->buf_len[0]);
  if (len == 0) { /* all null */
    if (cl->layers[0] != LAYER_NULLABLE) return BAD(x, "all-null constant page on a non-null layer", x->col, x->page);
    for (int64_t i = 0; i < x->n; i++) {
      mark_null(x, x->row0 + i);
      if (is_var(f)) var_put(x, x->row0 + i, NULL, 0);
    }
    return 0;
  }
  return constant_fill(x, f, cl->inline_value.data, len);
}

static int page21(rctx_t *x, const uint8_t *val, size_t len) {
  Lance__Encodings21__PageLayout *pl = lance__encodings21__page_layout__unpack(NULL, len, val);
  if (pl == NULL) return BAD(x, "PageLayout protobuf malformed", x->col, x->page);
  int rc;
  switch (pl->layout_case) {
    case PL_MINIBLOCK: rc = miniblock_page(x, pl->mini_block_layout); break;
    case PL_FULLZIP: rc = fullzip_page_read(x, pl->full_zip_layout); break;
    case PL_CONSTANT: rc = constant_page(x, pl->constant_layout); break;
    default: rc = UNSUP(x, "page layout not implemented", x->col, x->page); break;
  }
  lance__encodings21__page_layout__free_unpacked(pl, NULL);
  return rc;
}

/* The page's buffers, checked against the file, into x->buf. */
static int page_buffers(rctx_t *x, const Lance__File__V2__ColumnMetadata__Page *pg) {
  const mw_datafile_t *f = x->f;
  if (pg->n_buffer_offsets != pg->n_buffer_sizes || pg->n_buffer_offsets > MW_DATAFILE_MAX_PAGE_BUFFERS)
    return BAD(x, "%zu buffer offsets, %zu sizes", x->col, x->page, pg->n_buffer_offsets, pg->n_buffer_sizes);
  x->n_bufs = pg->n_buffer_offsets;
  for (size_t i = 0; i < x->n_bufs; i++) {
    uint64_t o = pg->buffer_offsets[i], s = pg->buffer_sizes[i];
    if (o > f->len || s > f->len - o)
      return BAD(x, "buffer %zu at %llu+%llu beyond the %zu-byte file", x->col, x->page, i, (unsigned long long)o, (unsigned long long)s, f->len);
    x->buf[i] = f->data + o;
    x->buf_len[i] = s;
  }
  return 0;
}

static int read_page(rctx_t *x, const Lance__File__V2__ColumnMetadata__Page *pg) {
  const mw_datafile_t *f = x->f;
  int brc = page_buffers(x, pg);
  if (brc != 0) return brc;
  if (pg->encoding == NULL || pg->encoding->location_case != LANCE__FILE__V2__ENCODING__LOCATION_DIRECT)
    return UNSUP(x, "page encoding not direct", x->col, x->page);
  ProtobufCBinaryData *e = &pg->encoding->direct->encoding;
  Google__Protobuf__Any *any = google__protobuf__any__unpack(NULL, e->len, e->data);
  if (any == NULL || any->type_url == NULL) {
    if (any) google__protobuf__any__free_unpacked(any, NULL);
    return BAD(x, "page encoding Any malformed", x->col, x->page);
  }
  int rc;
  if (strcmp(any->type_url, URL_PAGE21) == 0 && f->major == 2 && f->minor >= 1)
    rc = page21(x, any->value.data, any->value.len);
  else if (strcmp(any->type_url, URL_ARRAY20) == 0 && !(f->major == 2 && f->minor >= 1))
    rc = legacy_page(x, (pbv_t){any->value.data, any->value.len});
  else
    rc = UNSUP(x, "page encoding '%s' in a %u.%u file", x->col, x->page, any->type_url, f->major, f->minor);
  google__protobuf__any__free_unpacked(any, NULL);
  return rc;
}

/* Size the empty column for n rows (values zeroed, validity all ones). */
static int column_prepare(rctx_t *x, const mw_field_t *fl, mw_column_t *c, int64_t n) {
  size_t vb = is_var(fl) ? 0 : fl->type == MW_T_BOOL ? (size_t)(n + 7) / 8 : (size_t)n * mw_type_width(fl);
  if (vb > x->f->max_column_bytes || (is_var(fl) && 4 * (uint64_t)n > x->f->max_column_bytes))
    return mw_err_set(x->err, -EFBIG, "column %zu: %lld rows of %s exceed the %llu-byte limit", x->col,
                      (long long)n, mw_type_name(fl->type), (unsigned long long)x->f->max_column_bytes);
  if (vb && mw_buf_extend(&c->values, vb) == NULL) return -ENOMEM;
  if (is_var(fl)) {
    mw_buf_reset(&c->offsets);
    if (mw_buf_extend(&c->offsets, 4 * (size_t)(n + 1)) == NULL) return -ENOMEM;
  }
  size_t nb = (size_t)(n + 7) / 8;
  if (nb && mw_buf_fill(&c->validity, 0xFF, nb) < 0) return -ENOMEM;
  if (n & 7) c->validity.data[nb - 1] = (uint8_t)((1u << (n & 7)) - 1);
  c->length = n;
  return 0;
}

int mw_datafile_column_metadata(const mw_datafile_t *f, uint32_t col, const uint8_t **p,
                                size_t *n, mw_err_t *err) {
  assert(f != NULL && p != NULL && n != NULL);
  if (col >= f->n_columns) return mw_err_set(err, -EINVAL, "column %u of %u", col, f->n_columns);
  const uint8_t *e = f->data + f->cmo_start + 16 * (uint64_t)col;
  uint64_t pos = mw_load_u64le(e), sz = mw_load_u64le(e + 8);
  if (pos > f->len || sz > f->len - pos)
    return mw_err_set(err, -EBADMSG, "column %u metadata at %llu+%llu beyond the %zu-byte file",
                      col, (unsigned long long)pos, (unsigned long long)sz, f->len);
  *p = f->data + pos;
  *n = (size_t)sz;
  return 0;
}

/* Lance column `field` (a leaf at the top level) into out. */
static int read_flat(mw_datafile_t *f, size_t field, const mw_field_t *fld, mw_column_t *out,
                     mw_err_t *err) {
  const uint8_t *cmp;
  size_t cmn;
  int rc = mw_datafile_column_metadata(f, (uint32_t)field, &cmp, &cmn, err);
  if (rc < 0) return rc;
  Lance__File__V2__ColumnMetadata *cm = lance__file__v2__column_metadata__unpack(NULL, cmn, cmp);
  if (cm == NULL) return mw_err_set(err, -EBADMSG, "column %zu: ColumnMetadata at byte %zu malformed", field, (size_t)(cmp - f->data));
  rctx_t x = {.f = f, .fld = fld, .c = out, .col = field, .err = err};
  if (cm->n_pages > MW_DATAFILE_MAX_PAGES) {
    rc = mw_err_set(err, -EBADMSG, "column %zu: %zu pages (limit %d)", field, cm->n_pages, MW_DATAFILE_MAX_PAGES);
    goto done;
  }
  if ((rc = column_prepare(&x, x.fld, out, (int64_t)f->n_rows)) < 0) goto done;
  int64_t row = 0;
  for (size_t i = 0; i < cm->n_pages; i++) {
    uint64_t len = cm->pages[i]->length;
    x.page = i;
    if (len > f->n_rows - (uint64_t)row) {
      rc = BAD(&x, "page of %llu rows exceeds the file's %llu rows", x.col, x.page, (unsigned long long)len, (unsigned long long)f->n_rows);
      goto done;
    }
    x.row0 = row;
    x.n = (int64_t)len;
    if (is_var(x.fld)) { /* pages fill offsets in order: start where the last left off */
      int32_t *off = (int32_t *)(void *)out->offsets.data;
      off[row] = (int32_t)out->values.len;
    }
    if ((rc = read_page(&x, cm->pages[i])) < 0) goto done;
    row += (int64_t)len;
  }
  if ((uint64_t)row != f->n_rows) {
    rc = mw_err_set(err, -EBADMSG, "column %zu: pages hold %lld of %llu rows", field, (long long)row, (unsigned long long)f->n_rows);
    goto done;
  }
  if (out->null_count == 0) mw_buf_reset(&out->validity);
  if (out->null_count > 0 && !x.fld->nullable) {
    rc = mw_err_set(err, -EBADMSG, "column %zu: %lld nulls in a non-nullable field", field, (long long)out->null_count);
    goto done;
  }
  rc = 0;
done:
  lance__file__v2__column_metadata__free_unpacked(cm, NULL);
  mw_buf_free(&x.scratch);
  mw_buf_free(&x.scratch2);
  return rc;
}

/* ---- nested columns (lists, structs): assembly from rep/def levels ----
 *
 * Each leaf column is read page by page into its levels and its value
 * slots (the page's values, decoded as for a flat column), then assembled
 * (Dremel) into the field's column tree along the leaf's path; the first
 * leaf of a subtree builds the shared lists and structs, later leaves only
 * their own branch, which is moved into place. Layers come from each page
 * (Lance chooses them per page); their level numbers are rebuilt the way
 * the writer section above assigns them. */

typedef struct rlevels {
  const lpath_t *p;            /* fields; c[] points into the tree being built */
  mw_column_t *node[MAX_PATH]; /* the columns being assembled, top .. leaf */
  /* this page's level map */
  uint16_t null_level[MAX_PATH], empty_level[MAX_PATH], rep_level[MAX_PATH];
  uint16_t max_rep, max_def;
} rlevels_t;

/* The page's layers (inner first) -> the level map of the path. */
static int page_level_map(rctx_t *x, rlevels_t *r, const Lance__Encodings21__RepDefLayer *layers,
                          size_t n_layers) {
  const lpath_t *p = r->p;
  if (n_layers != (size_t)p->k + 1) return BAD(x, "%zu layers for a path of %d fields", x->col, x->page, n_layers, p->k + 1);
  uint16_t def = 0, rep = 0;
  for (size_t j = 0; j < n_layers; j++) {
    Lance__Encodings21__RepDefLayer l = layers[j];
    bool list = mw_field_layout(p->f[p->k - (int)j]) == MW_LAYOUT_LIST;
    bool list_layer = l == LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_ALL_VALID_LIST ||
                      l == LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_NULLABLE_LIST ||
                      l == LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_EMPTYABLE_LIST ||
                      l == LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_NULL_AND_EMPTY_LIST;
    if (list != list_layer || (!list && l != LAYER_ALL_VALID && l != LAYER_NULLABLE))
      return BAD(x, "layer %zu (%d) does not fit field '%s'", x->col, x->page, j, (int)l, p->f[p->k - (int)j]->name);
    def += l == LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_NULL_AND_EMPTY_LIST ? 2
           : l == LAYER_NULLABLE || l == LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_NULLABLE_LIST ||
                     l == LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_EMPTYABLE_LIST ? 1 : 0;
    rep += list;
  }
  r->max_def = def, r->max_rep = rep;
  for (int i = 0; i <= p->k; i++) { /* outer to inner */
    Lance__Encodings21__RepDefLayer l = layers[p->k - i];
    r->null_level[i] = r->empty_level[i] = r->rep_level[i] = 0;
    if (mw_field_layout(p->f[i]) == MW_LAYOUT_LIST) r->rep_level[i] = rep--;
    switch ((int)l) {
      case LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_NULL_AND_EMPTY_LIST:
        r->null_level[i] = (uint16_t)(def - 1), r->empty_level[i] = def, def = (uint16_t)(def - 2);
        break;
      case LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_NULLABLE_LIST:
      case LAYER_NULLABLE: r->null_level[i] = def--; break;
      case LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_EMPTYABLE_LIST: r->empty_level[i] = def--; break;
      default: break;
    }
  }
  assert(def == 0 && rep == 0);
  return 0;
}

static bool rslot_below(const rlevels_t *r, int i) { return slot_below(r->p, i); }

/* Below a null struct at depth e, Lance's reader makes the leaf null and
 * each member whose layer is nullable; Arrow then needs a not-null
 * member's nulls masked by its own struct's. The first not-null member i
 * left unmasked (its struct's layer all-valid), or -1. LanceDB 0.39.0
 * refuses such a page ("Found unmasked nulls for non-nullable StructArray
 * field"); our writer once made it (issue 26, gendiff seed 2035979854). */
static int unmasked_below(const rlevels_t *r, int e) {
  const lpath_t *p = r->p;
  assert(e >= 0);
  assert(e <= p->k);
  if (mw_field_layout(p->f[e]) != MW_LAYOUT_STRUCT) return -1;
  for (int i = e + 2; i <= p->k; i++) {
    if (mw_field_layout(p->f[i - 1]) != MW_LAYOUT_STRUCT) return -1;
    bool nulls_here = i == p->k || r->null_level[i] != 0;
    if (!p->f[i]->nullable && r->null_level[i - 1] == 0 && nulls_here) return i;
  }
  return -1;
}

/* One row (or null/filler) at node i of the path, keeping the parent list's
 * end in step. */
static int node_row(rlevels_t *r, int i, bool valid) {
  const mw_field_t *f = r->p->f[i];
  mw_column_t *c = r->node[i];
  int rc;
  if (mw_field_layout(f) == MW_LAYOUT_LIST || mw_field_layout(f) == MW_LAYOUT_STRUCT)
    rc = mw_column_append_parent(c, valid);
  else
    rc = -EINVAL; /* leaves go through leaf_row */
  if (rc == 0 && i > 0 && mw_field_layout(r->p->f[i - 1]) == MW_LAYOUT_LIST) mw_column_list_grow(r->node[i - 1]);
  return rc;
}

/* The leaf's row: value slot j of vals, or a null. */
static int leaf_row(rlevels_t *r, const mw_column_t *vals, int64_t j, bool null) {
  const mw_field_t *f = r->p->f[r->p->k];
  mw_column_t *c = r->node[r->p->k];
  int rc = null ? mw_column_append_null(c, f) : mw_column_append_range(c, vals, f, j, 1);
  int k = r->p->k;
  if (rc == 0 && k > 0 && mw_field_layout(r->p->f[k - 1]) == MW_LAYOUT_LIST) mw_column_list_grow(r->node[k - 1]);
  return rc;
}

/* Assemble levels [0, n) of a page: rep[] (NULL: no lists), def[] (NULL:
 * all valid), slots taken from vals in order. *rows counts top-level rows. */
static int assemble(rctx_t *x, rlevels_t *r, const uint16_t *rep, const uint16_t *def, size_t n,
                    const mw_column_t *vals, int64_t *rows) {
  const lpath_t *p = r->p;
  int k = p->k;
  int64_t slot = 0;
  *rows = 0;
  for (size_t li = 0; li < n; li++) {
    uint16_t rv = rep ? rep[li] : 0, dv = def ? def[li] : 0;
    int s = 0; /* the depth where this level starts new rows */
    if (r->max_rep > 0 && rv != r->max_rep) {
      /* rep level rv < max: a new item of the list whose level is rv + 1
       * (rv 0: of the innermost list) */
      s = -1;
      for (int i = 0; i <= k; i++)
        if (mw_field_layout(p->f[i]) == MW_LAYOUT_LIST && r->rep_level[i] == rv + 1) s = i + 1;
      if (s < 0) return BAD(x, "rep level %u of level %zu", x->col, x->page, rv, li);
      if (li == 0) return BAD(x, "page starts inside a row (rep level %u)", x->col, x->page, rv);
    }
    if (s == 0) (*rows)++;
    /* where this level stops, and how */
    int e = k;
    enum { VALUE, NUL, EMPTY } kind = VALUE;
    if (dv != 0) {
      e = -1;
      for (int i = 0; i <= k && e < 0; i++) {
        if (r->null_level[i] == dv) e = i, kind = NUL;
        else if (r->empty_level[i] == dv) e = i, kind = EMPTY;
      }
      if (e < 0) return BAD(x, "def level %u of level %zu", x->col, x->page, dv, li);
    }
    if (e < s) return BAD(x, "level %zu ends above where it starts", x->col, x->page, li);
    int rc = 0;
    for (int i = s; i < e && rc == 0; i++) /* the valid ancestors */
      rc = node_row(r, i, true);
    if (rc < 0) return rc;
    bool has_slot = kind == VALUE || (kind == NUL && rslot_below(r, e));
    if (has_slot && slot >= vals->length) return BAD(x, "levels have more value slots than the page's %lld values", x->col, x->page, (long long)vals->length);
    if (kind == EMPTY) {
      if (mw_field_layout(p->f[e]) != MW_LAYOUT_LIST) return BAD(x, "an empty non-list", x->col, x->page);
      rc = node_row(r, e, true);
    } else if (kind == NUL) {
      if (!p->f[e]->nullable) return BAD(x, "null in the non-nullable field '%s'", x->col, x->page, p->f[e]->name);
      if ((rc = unmasked_below(r, e)) >= 0) return BAD(x, "the non-nullable field '%s' is null below the null '%s' with no nulls in its struct's layer", x->col, x->page, p->f[rc]->name, p->f[e]->name);
      if (e == k) {
        rc = leaf_row(r, vals, slot, true);
      } else {
        rc = node_row(r, e, false);
        /* a null struct still gives each descendant a row down to the first
         * list (null, or empty when not nullable); the leaf's row takes the
         * slot */
        for (int i = e + 1; mw_field_layout(p->f[e]) == MW_LAYOUT_STRUCT && i <= k && rc == 0; i++) {
          if (i == k) {
            assert(has_slot);
            rc = leaf_row(r, vals, slot, p->f[k]->nullable);
            break;
          }
          rc = node_row(r, i, !p->f[i]->nullable);
          if (mw_field_layout(p->f[i]) == MW_LAYOUT_LIST) break;
        }
      }
    } else {
      rc = leaf_row(r, vals, slot, false);
    }
    if (rc < 0) return rc;
    slot += has_slot;
  }
  if (slot != vals->length) return BAD(x, "%lld value slots for %lld values", x->col, x->page, (long long)slot, (long long)vals->length);
  return 0;
}

/* Decode `cnt` levels with compression ce (NULL: all 0) into dst (u16). */
static int levels_decode(rctx_t *x, const CE *ce, const uint8_t *p, size_t n, int64_t cnt, mw_buf_t *dst) {
  uint16_t *d = mw_buf_extend(dst, 2 * (size_t)cnt);
  if (d == NULL && cnt > 0) return -ENOMEM;
  if (ce == NULL) return 0;
  int rc = def_decode(x, ce, p, n, cnt);
  if (rc < 0) return rc;
  memcpy(d, x->scratch.data, 2 * (size_t)cnt);
  return 0;
}

/* The chunks of a nested MiniBlock page: their levels appended to rep and
 * def (u16 each; zeros where a chunk has none), their values decoded into
 * v's column (v->n values). */
/* A nested MiniBlock chunk over this many bytes in a page of more than one
 * row is refused: LanceDB decodes the whole chunk for each range of rows it
 * takes (a scan with deletions), and over our old writer's 14 MB chunk of
 * strings it asked for 58 GB and aborted (gendiff seed 1036). Lance's
 * writer keeps chunks small (wide values go to FullZip); ours keeps a
 * nested page's values under NESTED_CHUNK_BYTES, levels under 128 KiB. */
#define NESTED_READ_MAX_CHUNK_BYTES (1u << 20)

static int nested_chunks(rctx_t *x, rctx_t *v, const Lance__Encodings21__MiniBlockLayout *mb, mw_buf_t *rep,
                         mw_buf_t *def) {
  size_t nvb = (size_t)mb->num_buffers, ww = mb->has_large_chunk ? 4 : 2;
  bool hr = mb->rep_compression != NULL, hd = mb->def_compression != NULL;
  const uint8_t *words = x->buf[0], *data = x->buf[1];
  uint64_t n_words = x->buf_len[0] / ww, dlen = x->buf_len[1], at = 0;
  int64_t done_vals = 0, items = v->n;
  int rc = 0;
  for (uint64_t ci = 0; ci < n_words && rc == 0; ci++) {
    uint32_t wd = ww == 4 ? mw_load_u32le(words + 4 * ci) : mw_load_u16le(words + 2 * ci);
    uint64_t cbytes = ((uint64_t)(wd >> 4) + 1) * 8;
    int64_t cnt = ci + 1 == n_words ? items - done_vals : (int64_t)1 << (wd & 15);
    if (cnt < 0 || cnt > items - done_vals) return BAD(x, "chunk %llu holds %lld values", x->col, x->page, (unsigned long long)ci, (long long)cnt);
    if (cbytes > dlen - at) return BAD(x, "chunk %llu overruns the data buffer", x->col, x->page, (unsigned long long)ci);
    if (cbytes > NESTED_READ_MAX_CHUNK_BYTES && x->n > 1) /* see NESTED_READ_MAX_CHUNK_BYTES */
      return BAD(x, "chunk %llu of %llu bytes over %lld rows: LanceDB cannot take rows from it", x->col, x->page,
                 (unsigned long long)ci, (unsigned long long)cbytes, (long long)x->n);
    const uint8_t *cp = data + at;
    size_t hn = 2 + 2 * (hr + hd) + nvb * ww;
    if (hn > cbytes) return BAD(x, "chunk %llu header truncated", x->col, x->page, (unsigned long long)ci);
    uint16_t nlev = mw_load_u16le(cp);
    size_t repn = hr ? mw_load_u16le(cp + 2) : 0, defn = hd ? mw_load_u16le(cp + 2 + 2 * hr) : 0;
    size_t vn[2] = {0, 0}, pos = pad8(hn);
    const uint8_t *vb[2] = {NULL, NULL};
    for (size_t b = 0; b < nvb; b++) vn[b] = ww == 4 ? mw_load_u32le(cp + 2 + 2 * (hr + hd) + 4 * b) : mw_load_u16le(cp + 2 + 2 * (hr + hd) + 2 * b);
    const uint8_t *repp = cp + pos;
    if (repn > cbytes - pos) return BAD(x, "chunk %llu rep levels overrun", x->col, x->page, (unsigned long long)ci);
    pos += pad8(repn);
    const uint8_t *defp = cp + pos;
    if (pos > cbytes || defn > cbytes - pos) return BAD(x, "chunk %llu def levels overrun", x->col, x->page, (unsigned long long)ci);
    pos += pad8(defn);
    for (size_t b = 0; b < nvb; b++) {
      if (pos > cbytes || vn[b] > cbytes - pos) return BAD(x, "chunk %llu value buffer overruns", x->col, x->page, (unsigned long long)ci);
      vb[b] = cp + pos;
      pos += pad8(vn[b]);
    }
    if ((rc = levels_decode(x, mb->rep_compression, repp, repn, nlev, rep)) == 0 &&
        (rc = levels_decode(x, mb->def_compression, defp, defn, nlev, def)) == 0 && cnt > 0)
      rc = mb_values(v, mb->value_compression, vb, vn, done_vals, cnt, NULL);
    done_vals += cnt;
    at += cbytes;
  }
  if (rc == 0 && done_vals != items) return BAD(x, "chunks hold %lld of %lld values", x->col, x->page, (long long)done_vals, (long long)items);
  return rc;
}

/* A MiniBlock page of a nested leaf: levels and values, then assembly.
 * Without rep and def levels (no lists, nothing null: Lance writes chunks
 * of 0 levels then) every value is one valid row. */
static int nested_miniblock(rctx_t *x, rlevels_t *r, const Lance__Encodings21__MiniBlockLayout *mb,
                            int64_t *rows) {
  const mw_field_t *leaf = r->p->f[r->p->k];
  if (mb->dictionary) return UNSUP(x, "miniblock with a dictionary", x->col, x->page);
  if (mb->value_compression == NULL) return BAD(x, "miniblock without value compression", x->col, x->page);
  if (x->f->major == 2 && x->f->minor >= 2 && !mb->has_large_chunk)
    return BAD(x, "2.2 miniblock without has_large_chunk", x->col, x->page);
  int rc = page_level_map(x, r, mb->layers, mb->n_layers);
  if (rc < 0) return rc;
  if ((mb->rep_compression != NULL) != (r->max_rep > 0) || (r->max_def == 0 && mb->def_compression))
    return BAD(x, "rep/def compression does not match the layers", x->col, x->page);
  size_t nvb = (size_t)mb->num_buffers;
  if (nvb < 1 || nvb > 2) return UNSUP(x, "%zu value buffers per chunk", x->col, x->page, nvb);
  if (x->n_bufs < 2 + (r->max_rep > 0)) return BAD(x, "miniblock page with %zu buffers", x->col, x->page, x->n_bufs);
  if (mb->num_items > (uint64_t)x->f->max_column_bytes) return BAD(x, "num_items %llu", x->col, x->page, (unsigned long long)mb->num_items);
  int64_t items = (int64_t)mb->num_items;
  mw_column_t vals = {0};
  mw_buf_t rep = MW_BUF_INIT, def = MW_BUF_INIT;
  rctx_t v = *x; /* the values decode as a flat column of the leaf */
  v.fld = leaf, v.c = &vals, v.row0 = 0, v.n = items;
  v.scratch = (mw_buf_t)MW_BUF_INIT, v.scratch2 = (mw_buf_t)MW_BUF_INIT;
  if ((rc = mw_column_init(&vals, leaf)) < 0 || (rc = column_prepare(&v, leaf, &vals, items)) < 0) goto done;
  if (is_var(leaf)) ((int32_t *)(void *)vals.offsets.data)[0] = 0;
  if ((rc = nested_chunks(x, &v, mb, &rep, &def)) < 0) goto done;
  mw_buf_reset(&vals.validity); /* nulls come from the levels */
  vals.null_count = 0;
  bool levels = mb->rep_compression || mb->def_compression;
  rc = assemble(x, r, r->max_rep ? (const uint16_t *)(const void *)rep.data : NULL,
                mb->def_compression ? (const uint16_t *)(const void *)def.data : NULL,
                levels ? (rep.len ? rep.len : def.len) / 2 : (size_t)items, &vals, rows);
done:
  mw_column_free(&vals);
  mw_buf_free(&rep);
  mw_buf_free(&def);
  mw_buf_free(&v.scratch);
  mw_buf_free(&v.scratch2);
  return rc;
}

/* The value slots among n def levels (levels that reach the leaf, or stop
 * at a null with no list below), and how many of them are valid. */
static int64_t constant_slots(const rlevels_t *r, const uint16_t *dv, uint64_t n, int64_t *valid) {
  int64_t slots = 0;
  *valid = 0;
  for (uint64_t i = 0; i < n; i++) {
    bool slot = dv[i] == 0;
    *valid += slot;
    for (int k = 0; k <= r->p->k && !slot; k++)
      slot = r->null_level[k] == dv[i] && (k == r->p->k || slot_below(r->p, k));
    slots += slot;
  }
  return slots;
}

/* A ConstantLayout page of a nested leaf. Buffers: [rep, def] (raw u16
 * unless compressed), none when the layers have no lists and no nulls (one
 * valid row per page row: Lance writes a struct member that holds one
 * value so), and for a utf8/binary value one more in front, the value as
 * constant_scalar reads it ([value], [value, rep, def]). Every valid slot
 * gets the value; with no valid slot (all null: Lance writes a null
 * struct's string member so) there need not be one. */
static int nested_constant(rctx_t *x, rlevels_t *r, const Lance__Encodings21__ConstantLayout *cl,
                           int64_t *rows) {
  const mw_field_t *leaf = r->p->f[r->p->k];
  int rc = page_level_map(x, r, cl->layers, cl->n_layers);
  if (rc < 0) return rc;
  size_t d0 = x->n_bufs == 1 || x->n_bufs == 3; /* a value buffer first */
  bool bare = x->n_bufs == d0;
  if (x->n_bufs > 3) return UNSUP(x, "nested constant layout with %zu buffers", x->col, x->page, x->n_bufs);
  if (bare && (r->max_rep > 0 || r->max_def > 0)) return BAD(x, "nested constant layout without levels for nullable layers", x->col, x->page);
  uint64_t nrep = bare ? 0 : cl->rep_compression ? cl->num_rep_values : x->buf_len[d0] / 2;
  uint64_t ndef = bare ? (uint64_t)x->n : cl->def_compression ? cl->num_def_values : x->buf_len[d0 + 1] / 2;
  if ((r->max_rep > 0 && nrep != ndef) || ndef > (uint64_t)INT32_MAX) return BAD(x, "%llu rep and %llu def levels", x->col, x->page, (unsigned long long)nrep, (unsigned long long)ndef);
  mw_buf_t rep = MW_BUF_INIT, def = MW_BUF_INIT;
  mw_column_t vals = {0};
  Lance__Encodings21__CompressiveEncoding raw = CE_INIT;
  Lance__Encodings21__Flat f16 = LANCE__ENCODINGS21__FLAT__INIT;
  f16.bits_per_value = 16;
  raw.compression_case = CE_FLAT, raw.flat = &f16;
  if ((rc = levels_decode(x, r->max_rep ? (cl->rep_compression ? cl->rep_compression : &raw) : NULL,
                          x->buf[d0], x->buf_len[d0], (int64_t)ndef, &rep)) < 0 ||
      (rc = levels_decode(x, bare ? NULL : cl->def_compression ? cl->def_compression : &raw, x->buf[d0 + 1],
                          x->buf_len[d0 + 1], (int64_t)ndef, &def)) < 0)
    goto done;
  const uint16_t *dv = (const uint16_t *)(const void *)def.data;
  int64_t valid, slots = constant_slots(r, dv, ndef, &valid);
  rctx_t v = *x;
  v.fld = leaf, v.c = &vals, v.row0 = 0, v.n = slots;
  if ((rc = mw_column_init(&vals, leaf)) < 0 || (rc = column_prepare(&v, leaf, &vals, slots)) < 0) goto done;
  if (is_var(leaf)) ((int32_t *)(void *)vals.offsets.data)[0] = 0;
  if (valid > 0 && d0) rc = constant_scalar(&v, x->buf[0], x->buf_len[0]);
  else if (valid > 0 && cl->inline_value.len > 0) rc = constant_fill(&v, leaf, cl->inline_value.data, cl->inline_value.len);
  else if (valid > 0) rc = UNSUP(x, "%lld valid constant values without a value", x->col, x->page, (long long)valid);
  if (rc < 0) goto done;
  mw_buf_reset(&vals.validity);
  vals.null_count = 0;
  rc = assemble(x, r, r->max_rep ? (const uint16_t *)(const void *)rep.data : NULL, dv, (size_t)ndef, &vals, rows);
done:
  mw_column_free(&vals);
  mw_buf_free(&rep);
  mw_buf_free(&def);
  return rc;
}

/* A FullZip page of a nested fixed-width leaf (Lance writes it for the
 * HNSW graph's list<uint32>/list<float>: fullzip.h): unzip levels and
 * values, then assemble as a MiniBlock page's. Levels with a value slot
 * (def 0, or a null with no list below it) are the visible ones. */
static int nested_fullzip(rctx_t *x, rlevels_t *r, const Lance__Encodings21__FullZipLayout *fz,
                          uint64_t page_rows, int64_t *rows) {
  const mw_field_t *leaf = r->p->f[r->p->k];
  const CE *vc = fz->value_compression;
  int rc = page_level_map(x, r, fz->layers, fz->n_layers);
  if (rc < 0) return rc;
  size_t w = mw_type_width(leaf);
  if (is_var(leaf) || is_bool(leaf) || leaf->type == MW_T_FSL || vc == NULL || vc->compression_case != CE_FLAT ||
      fz->details_case != LANCE__ENCODINGS21__FULL_ZIP_LAYOUT__DETAILS_BITS_PER_VALUE || vc->flat->bits_per_value != 8 * w ||
      fz->bits_per_value != 8 * w)
    return UNSUP(x, "nested fullzip of %s", x->col, x->page, mw_type_name(leaf->type));
  if (x->n_bufs < 1 + (r->max_rep > 0)) return BAD(x, "fullzip page with %zu buffers", x->col, x->page, x->n_bufs);
  if (fz->num_items > (uint64_t)x->f->max_column_bytes / 2) return BAD(x, "num_items %u", x->col, x->page, fz->num_items);
  mw_fullzip_shape_t s = {.bits_rep = fz->bits_rep, .bits_def = fz->bits_def, .value_bytes = w,
                          .num_items = fz->num_items, .num_visible_items = fz->num_visible_items, .rows = page_rows};
  for (int i = 0; i <= r->p->k; i++)
    if (r->null_level[i] > s.max_visible_def && rslot_below(r, i)) s.max_visible_def = r->null_level[i];
  mw_buf_t rep = MW_BUF_INIT, def = MW_BUF_INIT, raw = MW_BUF_INIT;
  mw_column_t vals = {0};
  rctx_t v = *x;
  v.fld = leaf, v.c = &vals, v.row0 = 0, v.n = (int64_t)fz->num_visible_items;
  if (mw_buf_extend(&rep, 2 * (size_t)fz->num_items + 2) == NULL || mw_buf_extend(&def, 2 * (size_t)fz->num_items + 2) == NULL) { rc = -ENOMEM; goto done; }
  rc = mw_fullzip_unzip(&s, x->buf[0], x->buf_len[0], r->max_rep ? x->buf[1] : NULL, r->max_rep ? x->buf_len[1] : 0,
                        (uint16_t *)(void *)rep.data, (uint16_t *)(void *)def.data, &raw, x->err);
  if (rc < 0) { mw_err_prefix(x->err, rc, "column %zu page %zu", x->col, x->page); goto done; }
  if ((rc = mw_column_init(&vals, leaf)) < 0 || (rc = column_prepare(&v, leaf, &vals, v.n)) < 0) goto done;
  if (raw.len) memcpy(vals.values.data, raw.data, raw.len);
  mw_buf_reset(&vals.validity);
  rc = assemble(x, r, r->max_rep ? (const uint16_t *)(const void *)rep.data : NULL,
                (const uint16_t *)(const void *)def.data, (size_t)fz->num_items, &vals, rows);
done:
  mw_column_free(&vals);
  mw_buf_free(&rep);
  mw_buf_free(&def);
  mw_buf_free(&raw);
  return rc;
}

/* One leaf column of a nested field, assembled into r->node[]. */
static int nested_leaf(mw_datafile_t *f, size_t col, rlevels_t *r, mw_err_t *err) {
  const uint8_t *cmp;
  size_t cmn;
  int rc = mw_datafile_column_metadata(f, (uint32_t)col, &cmp, &cmn, err);
  if (rc < 0) return rc;
  Lance__File__V2__ColumnMetadata *cm = lance__file__v2__column_metadata__unpack(NULL, cmn, cmp);
  if (cm == NULL) return mw_err_set(err, -EBADMSG, "column %zu: ColumnMetadata malformed", col);
  rctx_t x = {.f = f, .fld = r->p->f[r->p->k], .col = col, .err = err};
  int64_t row = 0;
  rc = cm->n_pages > MW_DATAFILE_MAX_PAGES ? BAD(&x, "%zu pages", x.col, x.page, cm->n_pages) : 0;
  if (rc == 0 && !(f->major == 2 && f->minor >= 1)) rc = UNSUP(&x, "nested columns in a %u.%u file", x.col, x.page, f->major, f->minor);
  for (size_t i = 0; rc == 0 && i < cm->n_pages; i++) {
    x.page = i;
    const Lance__File__V2__ColumnMetadata__Page *pg = cm->pages[i];
    if ((rc = page_buffers(&x, pg)) < 0) break;
    if (pg->encoding == NULL || pg->encoding->location_case != LANCE__FILE__V2__ENCODING__LOCATION_DIRECT) {
      rc = UNSUP(&x, "page encoding not direct", x.col, x.page);
      break;
    }
    ProtobufCBinaryData *e = &pg->encoding->direct->encoding;
    Google__Protobuf__Any *any = google__protobuf__any__unpack(NULL, e->len, e->data);
    Lance__Encodings21__PageLayout *pl = NULL;
    if (any && any->type_url && strcmp(any->type_url, URL_PAGE21) == 0)
      pl = lance__encodings21__page_layout__unpack(NULL, any->value.len, any->value.data);
    if (any) google__protobuf__any__free_unpacked(any, NULL);
    if (pl == NULL) {
      rc = BAD(&x, "page layout malformed", x.col, x.page);
      break;
    }
    int64_t rows = 0;
    x.n = pg->length > f->n_rows ? 0 : (int64_t)pg->length; /* a bare constant page's levels */
    if (pl->layout_case == PL_MINIBLOCK) rc = nested_miniblock(&x, r, pl->mini_block_layout, &rows);
    else if (pl->layout_case == PL_CONSTANT) rc = nested_constant(&x, r, pl->constant_layout, &rows);
    else if (pl->layout_case == PL_FULLZIP) rc = nested_fullzip(&x, r, pl->full_zip_layout, pg->length, &rows);
    else rc = UNSUP(&x, "this layout for a nested column", x.col, x.page);
    lance__encodings21__page_layout__free_unpacked(pl, NULL);
    if (rc == 0 && (uint64_t)rows != pg->length)
      rc = BAD(&x, "levels hold %lld rows, the page %llu", x.col, x.page, (long long)rows, (unsigned long long)pg->length);
    row += rows;
  }
  if (rc == 0 && (uint64_t)row != f->n_rows)
    rc = mw_err_set(err, -EBADMSG, "column %zu: pages hold %lld of %llu rows", col, (long long)row, (unsigned long long)f->n_rows);
  lance__file__v2__column_metadata__free_unpacked(cm, NULL);
  mw_buf_free(&x.scratch);
  mw_buf_free(&x.scratch2);
  return rc;
}

/* Every leaf below path depth `depth`, assembled into the tree at
 * node[depth]; the first leaf of a subtree builds it in place, later ones
 * in a scratch tree whose branch is then moved in. */
static int nested_read(mw_datafile_t *f, size_t *col, lpath_t *p, rlevels_t *r, int depth,
                       bool first, mw_err_t *err) {
  const mw_field_t *fd = p->f[depth];
  mw_layout_t l = mw_field_layout(fd);
  if (l != MW_LAYOUT_LIST && l != MW_LAYOUT_STRUCT) {
    p->k = depth;
    return nested_leaf(f, (*col)++, r, err);
  }
  for (uint32_t i = 0; i < fd->n_children; i++) {
    p->f[depth + 1] = &fd->children[i];
    if (first || i == 0) {
      r->node[depth + 1] = &r->node[depth]->children[i];
      int rc = nested_read(f, col, p, r, depth + 1, first && i == 0, err);
      if (rc < 0) return rc;
      first = false;
      continue;
    }
    /* a later branch: rebuild the ancestors in a scratch tree, keep only
     * this child's subtree */
    mw_column_t scratch;
    int rc = mw_column_init(&scratch, p->f[0]);
    mw_column_t *saved[MAX_PATH];
    memcpy(saved, r->node, sizeof saved);
    r->node[0] = &scratch;
    for (int d = 1; d <= depth; d++) {
      const mw_field_t *parent = p->f[d - 1];
      uint32_t ci = (uint32_t)(p->f[d] - parent->children);
      r->node[d] = &r->node[d - 1]->children[ci];
    }
    r->node[depth + 1] = &r->node[depth]->children[i];
    if (rc == 0) rc = nested_read(f, col, p, r, depth + 1, true, err);
    if (rc == 0) { /* move the branch into the real tree */
      mw_column_t t = saved[depth]->children[i];
      saved[depth]->children[i] = r->node[depth]->children[i];
      r->node[depth]->children[i] = t;
      if (saved[depth]->children[i].length != saved[depth]->length)
        rc = mw_err_set(err, -EBADMSG, "field '%s': member '%s' has %lld rows, the struct %lld",
                        fd->name, fd->children[i].name, (long long)saved[depth]->children[i].length,
                        (long long)saved[depth]->length);
    }
    memcpy(r->node, saved, sizeof saved);
    mw_column_free(&scratch);
    if (rc < 0) return rc;
  }
  return 0;
}

/* First Lance column of top-level field `field` (fields before it have one
 * per leaf). */
static size_t first_column(const mw_schema_t *s, size_t field) {
  mw_schema_t head = {.fields = s->fields, .n_fields = field};
  int n = mw_lance_leaves(&head, NULL, NULL, 4 * MW_MAX_FIELDS);
  assert(n >= 0);
  return (size_t)n;
}

int mw_datafile_read_column(mw_datafile_t *f, size_t field, mw_column_t *out, mw_err_t *err) {
  assert(f != NULL && out != NULL);
  assert(out->length == 0);
  if (field >= f->schema.n_fields) return mw_err_set(err, -EINVAL, "field %zu of %zu", field, f->schema.n_fields);
  const mw_field_t *fld = &f->schema.fields[field];
  size_t col = first_column(&f->schema, field);
  mw_layout_t l = mw_field_layout(fld);
  if (l != MW_LAYOUT_LIST && l != MW_LAYOUT_STRUCT) return read_flat(f, col, fld, out, err);
  lpath_t p = {.f = {fld}};
  rlevels_t r = {.p = &p, .node = {out}};
  int rc = nested_read(f, &col, &p, &r, 0, true, err);
  if (rc == 0 && out->length != (int64_t)f->n_rows)
    rc = mw_err_set(err, -EBADMSG, "field '%s': %lld rows of %llu", fld->name, (long long)out->length, (unsigned long long)f->n_rows);
  if (rc == 0 && mw_column_validate(out, fld) < 0)
    rc = mw_err_set(err, -EBADMSG, "field '%s': the levels do not make a valid column", fld->name);
  return rc;
}

int mw_datafile_global_buffer(const mw_datafile_t *f, uint32_t idx, const uint8_t **p, size_t *n,
                              mw_err_t *err) {
  assert(f != NULL && p != NULL && n != NULL);
  if (idx >= f->n_global_buffers) return mw_err_set(err, -EINVAL, "global buffer %u of %u", idx, f->n_global_buffers);
  const uint8_t *e = f->data + f->gbo_start + 16 * (uint64_t)idx;
  uint64_t pos = mw_load_u64le(e), sz = mw_load_u64le(e + 8);
  if (pos > f->len || sz > f->len - pos)
    return mw_err_set(err, -EBADMSG, "global buffer %u at %llu+%llu beyond the %zu-byte file", idx,
                      (unsigned long long)pos, (unsigned long long)sz, f->len);
  *p = f->data + pos;
  *n = (size_t)sz;
  return 0;
}

static int parse_descriptor(mw_datafile_t *f, uint64_t max_rows, mw_err_t *err) {
  const uint8_t *p;
  size_t n;
  int rc = mw_datafile_global_buffer(f, 0, &p, &n, err);
  if (rc < 0) return rc;
  Lance__File__V2__FileDescriptor *fd = lance__file__v2__file_descriptor__unpack(NULL, n, p);
  if (fd == NULL) return mw_err_set(err, -EBADMSG, "FileDescriptor at byte %zu (%zu bytes) malformed", (size_t)(p - f->data), n);
  if (fd->schema == NULL) {
    rc = mw_err_set(err, -EBADMSG, "FileDescriptor without schema");
    goto done;
  }
  if (fd->length > max_rows) {
    rc = mw_err_set(err, -EFBIG, "file has %llu rows (limit %llu)", (unsigned long long)fd->length, (unsigned long long)max_rows);
    goto done;
  }
  f->n_rows = fd->length;
  if ((rc = mw_lance_schema_from_fields(fd->schema->fields, fd->schema->n_fields, &f->schema, err)) < 0) goto done;
  for (size_t i = 0; i < fd->schema->n_metadata; i++) {
    Lance__File__Schema__MetadataEntry *e = fd->schema->metadata[i];
    if (e->key == NULL) {
      rc = mw_err_set(err, -EBADMSG, "schema metadata entry %zu without key", i);
      goto done;
    }
    if ((rc = mw_kvs_set(&f->schema.meta, e->key, e->value.data, e->value.len)) < 0) goto done;
  }
  int leaves = mw_lance_leaves(&f->schema, NULL, NULL, MW_MAX_FIELDS * 4);
  if (leaves < 0 || (uint32_t)leaves != f->n_columns)
    rc = mw_err_set(err, -EBADMSG, "%d leaf fields but %u columns", leaves, f->n_columns);
done:
  lance__file__v2__file_descriptor__free_unpacked(fd, NULL);
  return rc;
}

int mw_datafile_open(mw_datafile_t *f, const uint8_t *data, size_t len,
                     const mw_datafile_read_opts_t *opts, mw_err_t *err) {
  assert(f != NULL);
  assert(data != NULL || len == 0);
  memset(f, 0, sizeof *f);
  mw_schema_init(&f->schema);
  f->data = data;
  f->len = len;
  if (len < MW_DATAFILE_FOOTER_BYTES) return mw_err_set(err, -EBADMSG, "file of %zu bytes is shorter than the footer", len);
  const uint8_t *ft = data + len - MW_DATAFILE_FOOTER_BYTES;
  if (memcmp(ft + 36, "LANC", 4) != 0) return mw_err_set(err, -EBADMSG, "no LANC magic at byte %zu", len - 4);
  f->column_meta_start = mw_load_u64le(ft);
  f->cmo_start = mw_load_u64le(ft + 8);
  f->gbo_start = mw_load_u64le(ft + 16);
  f->n_global_buffers = mw_load_u32le(ft + 24);
  f->n_columns = mw_load_u32le(ft + 28);
  f->major = mw_load_u16le(ft + 32);
  f->minor = mw_load_u16le(ft + 34);
  uint64_t body = len - MW_DATAFILE_FOOTER_BYTES;
  if (!((f->major == 0 && f->minor == 3) || (f->major == 2 && f->minor <= 2)))
    return mw_err_set(err, -ENOTSUP, "file version %u.%u", f->major, f->minor);
  if (f->n_global_buffers < 1 || f->n_global_buffers > MW_DATAFILE_MAX_GLOBAL_BUFFERS)
    return mw_err_set(err, -EBADMSG, "%u global buffers", f->n_global_buffers);
  if (f->n_columns > MW_MAX_FIELDS) return mw_err_set(err, -EBADMSG, "%u columns (limit %d)", f->n_columns, MW_MAX_FIELDS);
  if (f->gbo_start > body || 16 * (uint64_t)f->n_global_buffers > body - f->gbo_start)
    return mw_err_set(err, -EBADMSG, "GBO table at %llu overruns the footer", (unsigned long long)f->gbo_start);
  if (f->cmo_start > body || 16 * (uint64_t)f->n_columns > body - f->cmo_start)
    return mw_err_set(err, -EBADMSG, "CMO table at %llu overruns the footer", (unsigned long long)f->cmo_start);
  uint64_t max_rows = opts && opts->max_rows ? opts->max_rows : MW_DATAFILE_DEFAULT_MAX_ROWS;
  f->max_column_bytes = opts && opts->max_column_bytes ? opts->max_column_bytes
                                                       : MW_DATAFILE_DEFAULT_MAX_COLUMN_BYTES;
  f->zstd_dctx = opts ? opts->zstd_dctx : NULL;
  assert(!f->zstd_dctx_owned);
  if (max_rows > MW_MAX_BATCH_ROWS) max_rows = MW_MAX_BATCH_ROWS;
  int rc = parse_descriptor(f, max_rows, err);
  if (rc < 0) {
    mw_schema_free(&f->schema);
    return rc;
  }
  return 0;
}

void mw_datafile_close(mw_datafile_t *f) {
  if (f == NULL) return;
  if (f->zstd_dctx_owned) ZSTD_freeDCtx(f->zstd_dctx);
  f->zstd_dctx = NULL;
  f->zstd_dctx_owned = false;
  mw_schema_free(&f->schema);
  f->data = NULL;
  f->len = 0;
}

int mw_datafile_read_batch(mw_datafile_t *f, mw_batch_t *out, mw_err_t *err) {
  assert(f != NULL && out != NULL);
  int rc = mw_batch_init(out, &f->schema);
  if (rc < 0) return rc;
  for (size_t i = 0; i < f->schema.n_fields; i++) {
    if ((rc = mw_datafile_read_column(f, i, &out->cols[i], err)) < 0) {
      mw_batch_free(out);
      memset(out, 0, sizeof *out);
      return rc;
    }
  }
  out->n_rows = (int64_t)f->n_rows;
  assert(mw_batch_validate(out) == 0);
  return 0;
}
