/*
 * datafile_read.c — the Lance data-file reader (2.0, 2.1, 2.2): the file
 * around the pages (lance-files.md §2, §8).
 *
 * Design: mw_datafile_open borrows the whole file image, parses the 40-byte
 * footer, checks both offset tables against the file size, and decodes the
 * FileDescriptor (global buffer 0) into the schema, whose leaf count must
 * equal the footer's column count. A column is decoded on request: its
 * ColumnMetadata is unpacked, the column pre-sized for the file's rows
 * (rows are bounded by read_opts.max_rows and bytes by max_column_bytes,
 * so every allocation is bounded), and each page, its buffers checked
 * against the file (mw_df_page_buffers), goes to the decoder of its
 * encoding: the 2.0 ArrayEncoding (datafile_read20.c) or the 2.1/2.2
 * PageLayout (datafile_read21.c; nested fields: datafile_read_nested.c).
 * A page decodes into rows [row0, row0 + n) of the column through the
 * output helpers here (mw_df_var_put and kin), in row order. Every byte of
 * the file is untrusted: a bad offset, length or count is -EBADMSG naming
 * the column, page and byte, never an assert.
 *
 * Sample: the footer (last 40 bytes) of a 1479-byte file our writer made
 * (fuzz/corpus/datafile/mw_pk_utf8.lance: 2 columns, 1 global buffer):
 *   83 04 00 00 00 00 00 00 | 6f 05 00 00 00 00 00 00 | 8f 05 00 00 00 00 00 00
 *   column metadata at 1155   CMO table at 1391         GBO table at 1423
 *   01 00 00 00 | 02 00 00 00 | 02 00 02 00 | 4c 41 4e 43
 *   G = 1         C = 2         2.2           "LANC"
 * open checks 1391 + 2 x 16 <= 1439 and 1423 + 1 x 16 <= 1439 (the footer).
 */
#include "lance/datafile_internal.h"

#include "google/protobuf/any.pb-c.h"
#include "lance/lance_schema.h"


/* Copy `cnt` bits from src (bit offset 0) to the bool column at row r. */
void mw_df_bits_copy_out(rctx_t *x, int64_t r, const uint8_t *src, int64_t cnt) {
  assert(cnt >= 0);
  assert(r + cnt <= x->c->length); /* inside the pre-sized column */
  uint8_t *dst = x->c->values.data;
  if ((r & 7) == 0) {
    memcpy(dst + (r >> 3), src, (size_t)(cnt + 7) / 8);
    if (cnt & 7) dst[(r + cnt) >> 3] &= (uint8_t)((1u << (cnt & 7)) - 1);
    return;
  }
  for (int64_t i = 0; i < cnt; i++) mw_bit_set(dst, r + i, mw_bit_get(src, i));
}

/* Append one utf8/binary value (row order is guaranteed by the caller). */
int mw_df_var_put(rctx_t *x, int64_t r, const uint8_t *p, size_t n) {
  int32_t *off = (int32_t *)(void *)x->c->offsets.data;
  assert(r < x->c->length);
  assert((size_t)off[r] == x->c->values.len); /* rows in order, none skipped */
  if (x->c->values.len + n > INT32_MAX) return BAD(x, "string data exceeds 2 GiB", x->col, x->page);
  if (n && mw_buf_append(&x->c->values, p, n) < 0) return -ENOMEM;
  off[r + 1] = (int32_t)x->c->values.len;
  return 0;
}

/* Append one FSST-compressed utf8/binary value, decompressed (at most 8
 * bytes per code byte); the column stays within max bytes. */
int mw_df_var_put_fsst(rctx_t *x, int64_t r, const mw_fsst_table_t *t, const uint8_t *p, size_t n, size_t max) {
  mw_column_t *c = x->c;
  assert(r < c->length);
  assert((size_t)((const int32_t *)(const void *)c->offsets.data)[r] == c->values.len); /* in order */
  size_t cap = n * MW_FSST_MAX_SYMBOL_BYTES, got;
  if (mw_buf_reserve(&c->values, cap + 1) < 0) return -ENOMEM;
  if (mw_fsst_decode(t, p, n, c->values.data + c->values.len, cap, &got) < 0)
    return BAD(x, "fsst string of row %lld corrupt", x->col, x->page, (long long)r);
  if (got > max - c->values.len || c->values.len + got > INT32_MAX)
    return BAD(x, "fsst strings exceed %zu bytes", x->col, x->page, max);
  c->values.len += got;
  ((int32_t *)(void *)c->offsets.data)[r + 1] = (int32_t)c->values.len;
  return 0;
}

/* The page's buffers, checked against the file, into x->buf. */
int mw_df_page_buffers(rctx_t *x, const Lance__File__V2__ColumnMetadata__Page *pg) {
  const mw_datafile_t *f = x->f;
  assert(pg != NULL);
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
  assert(x->n >= 0);
  assert(x->row0 + x->n <= x->c->length); /* read_flat checked the page's rows */
  int brc = mw_df_page_buffers(x, pg);
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
    rc = mw_df_page21(x, any->value.data, any->value.len);
  else if (strcmp(any->type_url, URL_ARRAY20) == 0 && !(f->major == 2 && f->minor >= 1))
    rc = mw_df_legacy_page(x, any->value.data, any->value.len);
  else
    rc = UNSUP(x, "page encoding '%s' in a %u.%u file", x->col, x->page, any->type_url, f->major, f->minor);
  google__protobuf__any__free_unpacked(any, NULL);
  return rc;
}

/* Size the empty column for n rows (values zeroed, validity all ones). */
int mw_df_column_prepare(rctx_t *x, const mw_field_t *fl, mw_column_t *c, int64_t n) {
  assert(n >= 0);
  assert(c->length == 0);
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
  assert(f != NULL);
  assert(p != NULL);
  assert(n != NULL);
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
  assert(field < f->n_columns); /* open matched the leaves to the columns */
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
  if ((rc = mw_df_column_prepare(&x, x.fld, out, (int64_t)f->n_rows)) < 0) goto done;
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
  assert(out->length == (int64_t)f->n_rows); /* sized so; pages fill, never grow it */
  rc = 0;
done:
  lance__file__v2__column_metadata__free_unpacked(cm, NULL);
  mw_buf_free(&x.scratch);
  mw_buf_free(&x.scratch2);
  return rc;
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
  assert(f != NULL);
  assert(out != NULL);
  assert(out->length == 0);
  if (field >= f->schema.n_fields) return mw_err_set(err, -EINVAL, "field %zu of %zu", field, f->schema.n_fields);
  const mw_field_t *fld = &f->schema.fields[field];
  size_t col = first_column(&f->schema, field);
  mw_layout_t l = mw_field_layout(fld);
  if (l != MW_LAYOUT_LIST && l != MW_LAYOUT_STRUCT) return read_flat(f, col, fld, out, err);
  return mw_df_read_nested(f, col, fld, out, err);
}

int mw_datafile_global_buffer(const mw_datafile_t *f, uint32_t idx, const uint8_t **p, size_t *n,
                              mw_err_t *err) {
  assert(f != NULL);
  assert(p != NULL);
  assert(n != NULL);
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
  assert(max_rows <= MW_MAX_BATCH_ROWS); /* clamped by open */
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
  assert(f->zstd_dctx != NULL || !f->zstd_dctx_owned);
  if (f->zstd_dctx_owned) ZSTD_freeDCtx(f->zstd_dctx);
  f->zstd_dctx = NULL;
  f->zstd_dctx_owned = false;
  mw_schema_free(&f->schema);
  f->data = NULL;
  f->len = 0;
}

int mw_datafile_read_batch(mw_datafile_t *f, mw_batch_t *out, mw_err_t *err) {
  assert(f != NULL);
  assert(out != NULL);
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
