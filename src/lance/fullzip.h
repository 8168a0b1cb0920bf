/*
 * fullzip.h — the FullZip page body of a nested fixed-width column:
 * repetition and definition levels zipped with the values, plus the
 * repetition index (lance-files.md §3; Lance's primitive.rs
 * serialize_full_zip_fixed). Lance writes it for list<uint32> and
 * list<float> columns whose field metadata asks for it
 * (`lance-encoding:structural-encoding` = `fullzip`): the HNSW graph of a
 * vector index (index.idx, docs/indexes.md).
 *
 * Owns: only the bytes of the two page buffers. The page layout protobuf,
 * level maps and the assembly of levels into columns stay in datafile_read_nested.c
 * (reader) and vindex_file.c (writer).
 *
 * Buffer 0, one entry per level (item), back to back:
 *   control word (1, 2 or 4 bytes LE: rep << bits_def | def; 0 bytes when
 *   bits_rep + bits_def == 0) | the value (value_bytes) when the level is
 *   visible (def <= max_visible_def: it has a value slot)
 * Buffer 1 (only with repetition): the byte offset in buffer 0 where each
 * row starts, plus the end, rows + 1 unsigned integers of 1, 2, 4 or 8 bytes
 * LE each (the narrowest that holds the buffer's length).
 *
 * Sample: list<uint32> rows [20, 47], [] (bits_rep 1, bits_def 1):
 *   buffer 0: 02 14 00 00 00 | 00 2f 00 00 00 | 03      buffer 1: 00 0a 0b
 *
 * Errors: -EBADMSG with the level, row or byte offset in *err; -EFBIG past
 * a limit; -ENOMEM.
 */
#ifndef MW_LANCE_FULLZIP_H
#define MW_LANCE_FULLZIP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"

#define MW_FULLZIP_MAX_LEVEL_BITS 16 /* bits_rep and bits_def each */
#define MW_FULLZIP_MAX_VALUE_BYTES 4096

typedef struct mw_fullzip_shape {
  unsigned bits_rep, bits_def; /* control word fields */
  size_t value_bytes;          /* bytes of one visible value, 1..MW_FULLZIP_MAX_VALUE_BYTES */
  uint16_t max_visible_def;    /* levels with def <= this carry a value */
  uint64_t num_items;          /* levels in the page */
  uint64_t num_visible_items;  /* levels carrying a value */
  uint64_t rows;               /* top-level rows (rows of the page) */
} mw_fullzip_shape_t;

/* Bytes of one control word for these level widths: 0, 1, 2 or 4. */
size_t mw_fullzip_word_bytes(unsigned bits_rep, unsigned bits_def);

/* Split buffer 0 into rep[num_items], def[num_items] (u16 each, caller
 * sized) and the visible values appended to `values`. With repetition,
 * `repidx` (buffer 1) is checked against the row starts found (NULL: not
 * checked). Every length is checked against the buffer. */
int mw_fullzip_unzip(const mw_fullzip_shape_t *s, const uint8_t *buf, size_t len,
                     const uint8_t *repidx, size_t repidx_len, uint16_t *rep, uint16_t *def,
                     mw_buf_t *values, mw_err_t *err);

/* The inverse for one list level over non-null fixed-width items with no
 * null lists: rows[r] holds offsets[r+1]-offsets[r] items of value_bytes
 * each from `values`. Empty lists get def 1 (EMPTYABLE_LIST) when any row
 * is empty, else no def bits (ALL_VALID_LIST). Appends buffer 0 to `zipped`
 * and the repetition index to `repidx`; fills *s. */
int mw_fullzip_zip_list(const int32_t *offsets, uint64_t rows, const uint8_t *values,
                        size_t value_bytes, mw_buf_t *zipped, mw_buf_t *repidx,
                        mw_fullzip_shape_t *s);

#endif
