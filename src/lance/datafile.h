/*
 * datafile.h — Lance v2 data files: a 2.2 writer and a 2.0/2.1/2.2 reader.
 *
 * Owns: the byte layout of one Lance data file (lance-files.md §2, §3, §8):
 * page buffers, extra global buffers, the FileDescriptor (global buffer 0),
 * column metadata, the CMO/GBO tables and the 40-byte footer. The writer turns
 * an mw_schema_t plus record batches into a complete file in an mw_buf_t; the
 * reader borrows a whole file image and decodes columns back into batches.
 *
 * Scope: one Lance column per top-level field (int32/int64/uint32/uint64,
 * float32/float64, bool, utf8/binary, fixed_size_list<float32, D>). The reader
 * decodes every encoding the writer emits plus what Lance 12 writes for these
 * types (Flat, Variable, Constant, FSL in MiniBlock and FullZip, RLE and Flat16
 * def levels, InlineBitpacking (FastLanes) integers, General{ZSTD}, and the
 * 2.0 legacy Flat/Nullable/Binary/FixedSizeList encodings).
 *
 * Errors: negative errno with a reason in *err: -EBADMSG for corrupt input
 * (naming the byte offset, column and page), -ENOTSUP for valid encodings we
 * do not decode, -EINVAL for bad writer input, -ENOMEM, -EFBIG.
 */
#ifndef MW_LANCE_DATAFILE_H
#define MW_LANCE_DATAFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"
#include "lance/batch.h"

#define MW_DATAFILE_FOOTER_BYTES 40
#define MW_DATAFILE_ALIGN_BYTES 64
#define MW_DATAFILE_MAX_GLOBAL_BUFFERS 4096
#define MW_DATAFILE_MAX_PAGES 1048576            /* per column */
#define MW_DATAFILE_MAX_PAGE_BUFFERS 16          /* per page */
#define MW_DATAFILE_DEFAULT_PAGE_BYTES ((size_t)8 << 20)
#define MW_DATAFILE_MIN_PAGE_BYTES ((size_t)4096)
#define MW_DATAFILE_DEFAULT_MAX_ROWS ((uint64_t)1 << 27) /* reader: rows per file */
#define MW_DATAFILE_DEFAULT_MAX_COLUMN_BYTES ((uint64_t)2 << 30) /* reader: decoded column */

/* An extra global buffer (index 1..N in the GBO table). */
typedef struct mw_datafile_gbuf {
  const void *data;
  size_t len;
} mw_datafile_gbuf_t;

typedef struct mw_datafile_write_opts {
  size_t max_page_bytes; /* page data cap per column page; 0 = 8 MiB */
  bool zstd;             /* wrap MiniBlock values in General{ZSTD} */
  int zstd_level;        /* 0 = 3 */
} mw_datafile_write_opts_t;

/* Write a complete 2.2 data file holding the rows of batches[0..n_batches)
 * (all sharing `schema`) and the extra global buffers extra[0..n_extra), which
 * get GBO indexes 1..n_extra in order. The schema metadata goes into the
 * FileDescriptor. Appends to `out`; every file offset is relative to the
 * length `out` had on entry. opts may be NULL. On failure `out` is restored
 * to its entry length. */
int mw_datafile_write(const mw_schema_t *schema, const mw_batch_t *const *batches,
                      size_t n_batches, const mw_datafile_gbuf_t *extra, size_t n_extra,
                      const mw_datafile_write_opts_t *opts, mw_buf_t *out, mw_err_t *err);

typedef struct mw_datafile_read_opts {
  uint64_t max_rows; /* refuse files with more rows; 0 = MW_DATAFILE_DEFAULT_MAX_ROWS */
  uint64_t max_column_bytes; /* refuse to decode a bigger column; 0 = default (2 GiB) */
  /* a zstd decompression context to decode with, borrowed (the caller frees
   * it, after closing the file); NULL: the file makes its own on the first
   * zstd buffer and keeps it until close. A context is ~100 KiB of fresh
   * memory: made per buffer, it was 3.3 % of the daemon in a profile of
   * one write of 10 000 rows at a time (docs/benchmarks.md, 2026-12-04). */
  struct ZSTD_DCtx_s *zstd_dctx;
} mw_datafile_read_opts_t;

/* An open file: the footer and descriptor, parsed. Borrows the file bytes. */
typedef struct mw_datafile {
  const uint8_t *data;
  size_t len;
  uint16_t major, minor;        /* footer version: 0.3 (= 2.0), 2.0, 2.1, 2.2 */
  uint32_t n_columns;
  uint32_t n_global_buffers;
  uint64_t column_meta_start, cmo_start, gbo_start;
  uint64_t n_rows;              /* FileDescriptor.length */
  mw_schema_t schema;           /* from global buffer 0 (fields + schema metadata) */
  uint64_t max_column_bytes;    /* from the read options */
  struct ZSTD_DCtx_s *zstd_dctx; /* borrowed from the options, or owned: see below */
  bool zstd_dctx_owned;         /* made by this file's reads; freed by close */
} mw_datafile_t;

int mw_datafile_open(mw_datafile_t *f, const uint8_t *data, size_t len,
                     const mw_datafile_read_opts_t *opts, mw_err_t *err);
void mw_datafile_close(mw_datafile_t *f);
/* Borrow global buffer `idx` (0 = the FileDescriptor protobuf). */
int mw_datafile_global_buffer(const mw_datafile_t *f, uint32_t idx, const uint8_t **p, size_t *n,
                              mw_err_t *err);
/* Borrow the serialized ColumnMetadata of column `col`. */
int mw_datafile_column_metadata(const mw_datafile_t *f, uint32_t col, const uint8_t **p,
                                size_t *n, mw_err_t *err);
/* Decode field `field` (its column) into `out`, which must be empty (as left
 * by mw_batch_init/mw_batch_reset). */
int mw_datafile_read_column(mw_datafile_t *f, size_t field, mw_column_t *out, mw_err_t *err);
/* mw_batch_init(out, &f->schema) and decode every column. The batch borrows
 * f->schema, so close the file after freeing the batch. */
int mw_datafile_read_batch(mw_datafile_t *f, mw_batch_t *out, mw_err_t *err);

#endif
