/*
 * datafile_info.h — what a Lance v2 data file is made of, for people: the
 * pages of each column with their buffers and a one-line description of the
 * page encoding (inspector, verifier).
 *
 * Owns: decoding ColumnMetadata pages and their PageLayout (2.1/2.2) or
 * naming the legacy ArrayEncoding (2.0) without decoding any values. The
 * values themselves are read by datafile.h.
 *
 * Sample description of the SSTable float64 column of lance-files.md §2.2:
 *   mini_block{values: flat(64), layers: [all_valid_item], buffers: 1,
 *              items: 3000, large_chunk}
 *
 * Errors: negative errno with a reason in *err: -EBADMSG for malformed
 * metadata (naming the column and page), -EINVAL for a column out of range,
 * -EFBIG over MW_DATAFILE_MAX_PAGES, -ENOMEM.
 */
#ifndef MW_LANCE_DATAFILE_INFO_H
#define MW_LANCE_DATAFILE_INFO_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "lance/datafile.h"

#define MW_PAGE_INFO_ENCODING_BYTES 512

typedef struct mw_page_info {
  uint64_t rows;
  uint64_t priority;                /* first row of the page */
  size_t n_buffers;
  uint64_t buf_offset[MW_DATAFILE_MAX_PAGE_BUFFERS];
  uint64_t buf_size[MW_DATAFILE_MAX_PAGE_BUFFERS];
  const char *layout;               /* "mini_block", "full_zip", "constant", "legacy", "other" */
  char encoding[MW_PAGE_INFO_ENCODING_BYTES];
} mw_page_info_t;

/* Every page of column `col` into a malloc'd array (free() it). */
int mw_datafile_column_info(const mw_datafile_t *f, uint32_t col, mw_page_info_t **pages,
                            size_t *n_pages, mw_err_t *err);

#endif
