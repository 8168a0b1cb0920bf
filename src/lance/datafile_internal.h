/*
 * datafile_internal.h — PRIVATE to the data-file codec's own files
 * (src/lance/datafile_*.c below); nothing else may include it. The API is
 * lance/datafile.h.
 *
 * The codec is one concept per file:
 *   datafile_write.c        the file: writer set-up, page buffers, column
 *                           metadata, descriptor, offset tables, footer
 *   datafile_write_pages.c  the pages of a flat column (MiniBlock, FullZip,
 *                           Constant) and their value encodings
 *   datafile_write_nested.c lists and structs: rep/def levels (shredding)
 *                           and the pages of each leaf column
 *   datafile_read.c         open, footer, descriptor, global buffers, the
 *                           column loop; the output helpers of every page
 *                           decoder
 *   datafile_read20.c       2.0 pages (legacy ArrayEncoding, protobuf wire)
 *   datafile_read21.c       2.1/2.2 page layouts of a flat column
 *                           (MiniBlock, FullZip, Constant)
 *   datafile_values.c       a MiniBlock chunk's value and def-level
 *                           compressions (Flat, Variable, FSL, RLE, FSST,
 *                           InlineBitpacking)
 *   datafile_dict.c         MiniBlock pages with a dictionary
 *   datafile_read_nested.c  nested columns: level maps and assembly
 *   datafile_compress.c     General{ZSTD, LZ4} buffers, both directions
 *   datafile_bitpack.c      FastLanes bit unpacking (inline, out of line)
 * (fullzip.c, datafile_fields.c and datafile_info.c are codecs of their own
 * with public headers.)
 *
 * What they share: the writer's state (writer_t) and the reader's page
 * context (rctx_t), the Lance protobuf names, the chunk constants, and the
 * path of a nested leaf (lpath_t), whose levels the writer numbers and the
 * reader maps back. Functions shared between files are named mw_df_*.
 */
#ifndef MW_LANCE_DATAFILE_INTERNAL_H
#define MW_LANCE_DATAFILE_INTERNAL_H

#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "encodings_v2_1.pb-c.h"
#include "file2.pb-c.h"
#include "lance/datafile.h"
#include "lance/fsst.h"

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

static inline size_t pad8(size_t n) { return (n + 7) & ~(size_t)7; }
static inline bool is_var(const mw_field_t *f) { return mw_field_layout(f) == MW_LAYOUT_VAR; }
static inline bool is_bool(const mw_field_t *f) { return f->type == MW_T_BOOL; }

/* Bytes per chunk offset of a VAR field: 8 for large types (Lance refuses a
 * LargeUtf8 page with 32-bit offsets: "expected 64-bit offsets"), else 4. */
static inline size_t off_width(const mw_field_t *f) { return mw_field_info(f)->large ? 8 : 4; }

/* Value bytes of rows [a, b) of a utf8/binary column. */
static inline size_t var_bytes(const mw_column_t *c, int64_t a, int64_t b) {
  const int32_t *off = (const int32_t *)(const void *)c->offsets.data;
  return (size_t)(off[b] - off[a]);
}

/* ---- the path of a nested leaf (writer and reader) ---- */

#define MAX_PATH (MW_MAX_NESTING + 2)

typedef struct lpath {
  const mw_field_t *f[MAX_PATH];    /* top .. leaf */
  const mw_column_t *c[MAX_PATH];   /* the matching columns */
  int k;                            /* index of the leaf */
  Lance__Encodings21__RepDefLayer layer[MAX_PATH];
  uint16_t null_level[MAX_PATH], empty_level[MAX_PATH], rep_level[MAX_PATH];
  uint16_t max_rep, max_def;
} lpath_t;

/* Whether a null at depth i keeps a leaf slot (datafile_write_nested.c). */
bool mw_df_slot_below(const lpath_t *p, int i);

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
  size_t n_cols;         /* Lance columns (leaves) of the file */
  int64_t rows;          /* the file's: the pages of every column add up to them */
  mw_err_t *err;
} writer_t;

/* A page buffer to write: bytes and their length. */
typedef struct wbuf {
  const void *p;
  size_t n;
} wbuf_t;

/* The value compression of a leaf (as the MiniBlock and FullZip pages
 * choose it). */
typedef struct vcomp {
  Lance__Encodings21__Flat flat, off;
  Lance__Encodings21__Variable var;
  Lance__Encodings21__FixedSizeList fsl;
  CE ce, ce_off, ce_item;
} vcomp_t;

/* datafile_write.c */
int mw_df_put_buffer(writer_t *w, const void *p, size_t n, uint64_t *pos);
int mw_df_page_write(writer_t *w, Lance__Encodings21__PageLayout__LayoutCase lc, void *layout,
                     int64_t first, int64_t rows, const wbuf_t *bufs, size_t n_bufs);
int mw_df_flush_column_meta(writer_t *w, size_t col);
/* datafile_write_pages.c */
int mw_df_write_column(writer_t *w, const mw_field_t *f, const mw_column_t *c);
int mw_df_write_fsl(writer_t *w, const mw_field_t *f, const mw_batch_t *const *batches,
                    size_t n_batches, size_t fi);
size_t mw_df_vb_size(const mw_field_t *f, const mw_column_t *c, int64_t row, int64_t cnt);
void mw_df_vb_fill(uint8_t *dst, const mw_field_t *f, const mw_column_t *c, int64_t row,
                   int64_t cnt);
void mw_df_value_compression(const mw_field_t *f, vcomp_t *v);
/* datafile_write_nested.c */
int mw_df_write_nested(writer_t *w, lpath_t *p, int depth, size_t *col);
/* datafile_compress.c: a MiniBlock chunk's value buffer (raw bytes) as
 * u64 LE raw length || zstd frame, into w->zbuf. */
int mw_df_zstd_wrap(writer_t *w, const uint8_t *raw, size_t n);

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

static inline void mark_null(rctx_t *x, int64_t row) {
  mw_bit_set(x->c->validity.data, row, false);
  x->c->null_count++;
}

/* Fixed-width output slot of row r. */
static inline uint8_t *slot(rctx_t *x, int64_t r) {
  return x->c->values.data + (size_t)r * mw_type_width(x->fld);
}

/* The most bytes a utf8/binary column may decode to: the reader's column
 * limit, and Arrow's 32-bit offsets. */
static inline size_t var_max(const rctx_t *x) {
  return x->f->max_column_bytes < INT32_MAX ? (size_t)x->f->max_column_bytes : INT32_MAX;
}

/* datafile_read.c */
void mw_df_bits_copy_out(rctx_t *x, int64_t r, const uint8_t *src, int64_t cnt);
int mw_df_var_put(rctx_t *x, int64_t r, const uint8_t *p, size_t n);
int mw_df_var_put_fsst(rctx_t *x, int64_t r, const mw_fsst_table_t *t, const uint8_t *p, size_t n,
                       size_t max);
int mw_df_page_buffers(rctx_t *x, const Lance__File__V2__ColumnMetadata__Page *pg);
int mw_df_column_prepare(rctx_t *x, const mw_field_t *fl, mw_column_t *c, int64_t n);
/* datafile_read20.c */
int mw_df_legacy_page(rctx_t *x, const uint8_t *p, size_t n);
/* datafile_read21.c */
int mw_df_page21(rctx_t *x, const uint8_t *val, size_t len);
int mw_df_miniblock_chunks(rctx_t *x, rctx_t *xv, const Lance__Encodings21__MiniBlockLayout *mb,
                           size_t nvb);
int mw_df_constant_fill(rctx_t *x, const mw_field_t *f, const uint8_t *v, size_t len);
int mw_df_constant_scalar(rctx_t *x, const uint8_t *p, uint64_t n);
/* datafile_dict.c */
int mw_df_dict_page(rctx_t *x, const Lance__Encodings21__MiniBlockLayout *mb, size_t nvb);
/* datafile_values.c */
int mw_df_def_decode(rctx_t *x, const CE *dc, const uint8_t *p, size_t n, int64_t cnt);
int mw_df_mb_values(rctx_t *x, const CE *vc, const uint8_t *const *vb, const size_t *vn, int64_t r,
                    int64_t cnt, const uint16_t *def);
/* datafile_read_nested.c: field `field`'s leaf columns from *col on */
int mw_df_read_nested(mw_datafile_t *f, size_t col, const mw_field_t *fld, mw_column_t *out,
                      mw_err_t *err);
/* datafile_compress.c */
int mw_df_unwrap_general(rctx_t *x, const CE *vc, const CE **inner, int *scheme);
int mw_df_general_buf(rctx_t *x, int scheme, mw_buf_t *dst, const uint8_t **p, size_t *n,
                      size_t max_raw);
int mw_df_zstd_buf(rctx_t *x, mw_buf_t *dst, const uint8_t **p, size_t *n, size_t max_raw);
/* datafile_bitpack.c */
void mw_df_fastlanes_unpack(const uint8_t *src, unsigned t, unsigned wbits, uint64_t *out);
uint64_t mw_df_load_uint(const uint8_t *p, size_t tb);
int mw_df_inline_bp(rctx_t *x, const uint8_t *p, size_t n, int64_t r, int64_t cnt, unsigned t);
int mw_df_def_ool16(rctx_t *x, unsigned wbits, const uint8_t *p, size_t n, int64_t cnt,
                    uint16_t *lv);
int mw_df_ool_unpack(rctx_t *x, const uint8_t *p, size_t n, uint64_t cnt, unsigned t,
                     uint64_t wbits, uint8_t *dst);

#endif
