/*
 * datafile_write.c — the Lance 2.2 data-file writer: the file around the
 * pages (lance-files.md §2, §8; docs/sstable.md "Data file").
 *
 * Design: one pass over the schema's top-level fields; each field's Lance
 * columns (one per leaf: a flat field has one, a list or struct one per
 * leaf below it) are encoded page by page by datafile_write_pages.c or
 * datafile_write_nested.c, which write each page's buffers straight into
 * the output (mw_df_page_write) and queue its PageLayout; when a column is
 * done its ColumnMetadata is serialized (mw_df_flush_column_meta). The
 * output buffer is reserved up front from the batches' sizes. Everything
 * else follows the pages:
 *   pages | extra global buffers 1..N | FileDescriptor (gbuf 0) |
 *   ColumnMetadata 0..C-1 | CMO {u64 pos, u64 size}*C | GBO {..}*G |
 *   u64 colmeta0, u64 cmo, u64 gbo, u32 G, u32 C, u16 major, u16 minor, "LANC"
 * All offsets are relative to the file's start; page and global buffers
 * start on 64-byte boundaries, padded with 0x48 'H' as Lance pads them.
 * On failure the output is cut back to its length on entry.
 *
 * Sample: the 40-byte footer of a 983-byte _pk_index file Lance wrote (4
 * columns, 1 global buffer; ours say 02 00 02 00, version 2.2):
 *   b9 01 00 00 00 00 00 00 | 5f 03 00 00 00 00 00 00 | 9f 03 00 00 00 00 00 00
 *   colmeta0 = 441            cmo = 863                 gbo = 927
 *   01 00 00 00 | 04 00 00 00 | 00 00 03 00 | 4c 41 4e 43
 *   G = 1         C = 4         0.3 (= 2.0)   "LANC"
 */
#include "lance/datafile_internal.h"

#include "google/protobuf/any.pb-c.h"
#include "lance/lance_schema.h"


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
  assert(url != NULL);
  assert(val != NULL || len == 0);
  Google__Protobuf__Any any = GOOGLE__PROTOBUF__ANY__INIT;
  any.type_url = (char *)url;
  any.value.data = (uint8_t *)val;
  any.value.len = len;
  return pack_msg(&any.base, out, n);
}

/* Append a buffer at a 64-aligned position and pad after it with 'H'. */
int mw_df_put_buffer(writer_t *w, const void *p, size_t n, uint64_t *pos) {
  assert(p != NULL || n == 0);
  int rc = mw_buf_fill(w->out, PAD_PAGE, (size_t)(-(w->out->len - w->base)) & 63);
  if (rc < 0) return rc;
  *pos = w->out->len - w->base;
  assert(*pos % MW_DATAFILE_ALIGN_BYTES == 0);
  if (n > 0 && (rc = mw_buf_append(w->out, p, n)) < 0) return rc;
  return mw_buf_fill(w->out, PAD_PAGE, (size_t)(-(w->out->len - w->base)) & 63);
}

static int add_page(writer_t *w, const ProtobufCMessage *layout, uint64_t length, uint64_t first) {
  assert(length > 0); /* a column of no rows has no pages */
  assert(first + length <= (uint64_t)w->rows);
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
  assert(w->n_pages <= w->cap_pages);
  for (size_t i = 0; i < w->n_pages; i++) free(w->pages[i].any);
  w->n_pages = 0;
}

/* Add a page whose layout is `layout` (a MiniBlockLayout, FullZipLayout or
 * ConstantLayout, as `lc` says) holding rows [first, first + rows), and
 * write its buffers bufs[0..n_bufs) in order, each 64-aligned. */
int mw_df_page_write(writer_t *w, Lance__Encodings21__PageLayout__LayoutCase lc, void *layout,
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
    rc = mw_df_put_buffer(w, bufs[i].p, bufs[i].n, &pg->off[i]);
  }
  return rc;
}

/* Serialize the pending pages of one column into w->colmeta. */
int mw_df_flush_column_meta(writer_t *w, size_t col) {
  assert(col < w->n_cols);
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
  uint64_t rows = 0;
  for (size_t i = 0; i < w->n_pages; i++) {
    wpage_t *wp = &w->pages[i];
    assert(wp->priority == rows); /* pages in row order, none missing */
    rows += wp->length;
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
  /* every column holds the file's rows (the reader checks the same sum,
   * as untrusted input) */
  assert(rows == (uint64_t)w->rows);
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

/* Append `n` bits of `src` (NULL = all ones) at bit `at` of a zeroed bitmap. */
static void bits_put(uint8_t *dst, int64_t at, const uint8_t *src, int64_t n) {
  assert(at >= 0);
  assert(n > 0);
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
  assert(nb > 1);
  assert(dst->values.len == 0); /* reset by field_column */
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
  assert(row == total);
  if (off) off[total] = (int32_t)vb;
  dst->length = total;
  dst->null_count = nulls;
  return 0;
}

static int write_descriptor(writer_t *w, const mw_schema_t *s, uint64_t rows, uint64_t *pos,
                            uint64_t *len) {
  assert(rows <= (uint64_t)MW_MAX_BATCH_ROWS); /* check_inputs */
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
  rc = mw_df_put_buffer(w, buf, n, pos);
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
  assert(batches != NULL || nb == 0);
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
  *w = (writer_t){.out = out, .base = out->len, .n_cols = (size_t)n_cols, .err = err};
  w->max_page_bytes = opts && opts->max_page_bytes ? opts->max_page_bytes : MW_DATAFILE_DEFAULT_PAGE_BYTES;
  if (w->max_page_bytes < MW_DATAFILE_MIN_PAGE_BYTES) w->max_page_bytes = MW_DATAFILE_MIN_PAGE_BYTES;
  assert(w->max_page_bytes >= MW_DATAFILE_MIN_PAGE_BYTES);
  w->zstd = opts && opts->zstd;
  w->zstd_level = opts && opts->zstd_level ? opts->zstd_level : DEFAULT_ZSTD_LEVEL;
  w->colmeta_len = calloc((size_t)n_cols + 1, sizeof *w->colmeta_len);
  if (w->colmeta_len == NULL) return -ENOMEM;
  if (w->zstd && (w->zc = ZSTD_createCCtx()) == NULL) return -ENOMEM;
  return 0;
}

static void writer_free(writer_t *w) {
  assert(w->n_pages <= w->cap_pages);
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
  /* the column holds the file's rows (an FSL of several batches is read in place) */
  if (l != MW_LAYOUT_FSL || n_batches == 1) assert((*c)->length == w->rows);
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
    rc = mw_df_write_nested(w, &path, 0, col);
  } else {
    rc = l == MW_LAYOUT_FSL ? mw_df_write_fsl(w, f, batches, n_batches, fi) : mw_df_write_column(w, f, c);
    if (rc == 0) rc = mw_df_flush_column_meta(w, (*col)++);
  }
  if (rc < 0) return mw_err_set(w->err, rc, "field '%s': cannot encode column", f->name);
  return 0;
}

/* Everything after the pages: the extra global buffers, the descriptor
 * (global buffer 0), the column metadata, both offset tables and the
 * footer (docs/sstable.md "Data file"). */
static int write_tail(writer_t *w, const mw_schema_t *schema, int64_t rows, const mw_datafile_gbuf_t *extra,
                      size_t n_extra, size_t n_cols) {
  assert(w->n_pages == 0); /* every column's pages are in its metadata */
  assert(n_cols == w->n_cols);
  mw_buf_t *out = w->out;
  uint64_t *cmo = calloc(2 * n_cols + 1, sizeof *cmo);
  uint64_t *gbo = calloc(2 * (n_extra + 1), sizeof *gbo);
  int rc = cmo != NULL && gbo != NULL ? 0 : -ENOMEM;
  for (size_t i = 0; i < n_extra && rc == 0; i++) {
    gbo[2 * (i + 1) + 1] = extra[i].len;
    rc = mw_df_put_buffer(w, extra[i].data, extra[i].len, &gbo[2 * (i + 1)]);
  }
  if (rc == 0) rc = write_descriptor(w, schema, (uint64_t)rows, &gbo[0], &gbo[1]);
  uint64_t cm_start = out->len - w->base, at = cm_start;
  if (rc == 0) rc = mw_buf_append(out, w->colmeta.data, w->colmeta.len);
  for (size_t i = 0; i < n_cols && rc == 0; i++) {
    cmo[2 * i] = at;
    cmo[2 * i + 1] = w->colmeta_len[i];
    at += w->colmeta_len[i];
  }
  assert(rc < 0 || at == cm_start + w->colmeta.len);
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
  assert(rc < 0 || out->len - w->base == gbo_start + 16 * (n_extra + 1) + MW_DATAFILE_FOOTER_BYTES);
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
  w.rows = rows;
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

