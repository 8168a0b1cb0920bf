/*
 * datafile_info.c — page structure of a Lance v2 data file (see
 * datafile_info.h). Read-only over the file bytes the datafile reader
 * borrowed; every buffer position is checked against the file size.
 */
#include "lance/datafile_info.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "encodings_v2_1.pb-c.h"
#include "file2.pb-c.h"
#include "google/protobuf/any.pb-c.h"

#define URL_PAGE21 "/lance.encodings21.PageLayout"
#define URL_ARRAY20 "/lance.encodings.ArrayEncoding"
#define MAX_DEPTH 8

typedef struct sb {
  char *p;
  size_t n, at;
} sb_t;

static void put(sb_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sb_t *s, const char *fmt, ...) {
  assert(s != NULL);
  if (s->at >= s->n) return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(s->p + s->at, s->n - s->at, fmt, ap);
  va_end(ap);
  if (k > 0) s->at += (size_t)k < s->n - s->at ? (size_t)k : s->n - s->at - 1;
  assert(s->at < s->n); /* the text stays NUL-terminated */
}

static const char *scheme(const Lance__Encodings21__BufferCompression *b) {
  if (b == NULL) return "none";
  switch (b->scheme) {
    case LANCE__ENCODINGS21__COMPRESSION_SCHEME__COMPRESSION_ALGORITHM_LZ4: return "lz4";
    case LANCE__ENCODINGS21__COMPRESSION_SCHEME__COMPRESSION_ALGORITHM_ZSTD: return "zstd";
    default: return "unspecified";
  }
}

static void ce(sb_t *s, const Lance__Encodings21__CompressiveEncoding *e, int depth) {
  assert(s != NULL);
  assert(depth >= 0);
  if (e == NULL) {
    put(s, "none");
    return;
  }
  if (depth > MAX_DEPTH) {
    put(s, "...");
    return;
  }
  switch (e->compression_case) {
    case LANCE__ENCODINGS21__COMPRESSIVE_ENCODING__COMPRESSION_FLAT:
      put(s, "flat(%" PRIu64 "%s%s)", e->flat->bits_per_value, e->flat->data ? ", " : "",
          e->flat->data ? scheme(e->flat->data) : "");
      break;
    case LANCE__ENCODINGS21__COMPRESSIVE_ENCODING__COMPRESSION_VARIABLE:
      put(s, "variable(offsets: ");
      ce(s, e->variable->offsets, depth + 1);
      if (e->variable->values) put(s, ", values: %s", scheme(e->variable->values));
      put(s, ")");
      break;
    case LANCE__ENCODINGS21__COMPRESSIVE_ENCODING__COMPRESSION_CONSTANT: put(s, "constant"); break;
    case LANCE__ENCODINGS21__COMPRESSIVE_ENCODING__COMPRESSION_OUT_OF_LINE_BITPACKING:
      put(s, "out_of_line_bitpacking(%" PRIu64 ", ", e->out_of_line_bitpacking->uncompressed_bits_per_value);
      ce(s, e->out_of_line_bitpacking->values, depth + 1);
      put(s, ")");
      break;
    case LANCE__ENCODINGS21__COMPRESSIVE_ENCODING__COMPRESSION_INLINE_BITPACKING:
      put(s, "inline_bitpacking(%" PRIu64 ")", e->inline_bitpacking->uncompressed_bits_per_value);
      break;
    case LANCE__ENCODINGS21__COMPRESSIVE_ENCODING__COMPRESSION_RLE:
      put(s, "rle(values: ");
      ce(s, e->rle->values, depth + 1);
      put(s, ", runs: ");
      ce(s, e->rle->run_lengths, depth + 1);
      put(s, ")");
      break;
    case LANCE__ENCODINGS21__COMPRESSIVE_ENCODING__COMPRESSION_GENERAL:
      put(s, "general(%s", scheme(e->general->compression));
      if (e->general->compression && e->general->compression->level) put(s, " level %d", e->general->compression->level);
      put(s, ", ");
      ce(s, e->general->values, depth + 1);
      put(s, ")");
      break;
    case LANCE__ENCODINGS21__COMPRESSIVE_ENCODING__COMPRESSION_FIXED_SIZE_LIST:
      put(s, "fixed_size_list(%" PRIu64 "%s, ", e->fixed_size_list->items_per_value,
          e->fixed_size_list->has_validity ? ", item validity" : "");
      ce(s, e->fixed_size_list->values, depth + 1);
      put(s, ")");
      break;
    case LANCE__ENCODINGS21__COMPRESSIVE_ENCODING__COMPRESSION_FSST: {
      /* the table's header says whether the strings are compressed at all */
      const ProtobufCBinaryData *st = &e->fsst->symbol_table;
      uint64_t hdr = st->len >= 8 ? mw_load_u64le(st->data) : 0;
      if ((hdr >> 32) != 0x46535354u) put(s, "fsst(bad table, ");
      else if (!(hdr & (1u << 24))) put(s, "fsst(off, ");
      else put(s, "fsst(%u symbols, ", (unsigned)(hdr & 0xFF));
      ce(s, e->fsst->values, depth + 1);
      put(s, ")");
      break;
    }
    default: put(s, "compression %d", (int)e->compression_case); break;
  }
}

static void layers(sb_t *s, const Lance__Encodings21__RepDefLayer *l, size_t n) {
  assert(s != NULL);
  assert(l != NULL || n == 0);
  static const char *const names[] = {"unspecified", "all_valid_item", "all_valid_list", "nullable_item",
                                      "nullable_list", "emptyable_list", "null_and_empty_list"};
  put(s, "layers: [");
  for (size_t i = 0; i < n; i++)
    put(s, "%s%s", i ? ", " : "", (unsigned)l[i] < sizeof names / sizeof names[0] ? names[l[i]] : "?");
  put(s, "]");
}

static void layout21(mw_page_info_t *pi, const uint8_t *v, size_t n) {
  assert(pi != NULL);
  assert(v != NULL || n == 0);
  sb_t s = {pi->encoding, sizeof pi->encoding, 0};
  Lance__Encodings21__PageLayout *pl = lance__encodings21__page_layout__unpack(NULL, n, v);
  if (pl == NULL) {
    pi->layout = "other";
    put(&s, "PageLayout protobuf malformed");
    return;
  }
  switch (pl->layout_case) {
    case LANCE__ENCODINGS21__PAGE_LAYOUT__LAYOUT_MINI_BLOCK_LAYOUT: {
      const Lance__Encodings21__MiniBlockLayout *m = pl->mini_block_layout;
      pi->layout = "mini_block";
      put(&s, "mini_block{values: ");
      ce(&s, m->value_compression, 0);
      if (m->def_compression) put(&s, ", def: "), ce(&s, m->def_compression, 0);
      if (m->rep_compression) put(&s, ", rep: "), ce(&s, m->rep_compression, 0);
      if (m->dictionary) put(&s, ", dictionary(%" PRIu64 "): ", m->num_dictionary_items), ce(&s, m->dictionary, 0);
      put(&s, ", ");
      layers(&s, m->layers, m->n_layers);
      put(&s, ", buffers: %" PRIu64 ", items: %" PRIu64 "%s}", m->num_buffers, m->num_items,
          m->has_large_chunk ? ", large_chunk" : "");
      break;
    }
    case LANCE__ENCODINGS21__PAGE_LAYOUT__LAYOUT_FULL_ZIP_LAYOUT: {
      const Lance__Encodings21__FullZipLayout *z = pl->full_zip_layout;
      pi->layout = "full_zip";
      put(&s, "full_zip{values: ");
      ce(&s, z->value_compression, 0);
      put(&s, ", bits_def: %u, bits_rep: %u, %s: %u, items: %u, ", z->bits_def, z->bits_rep,
          z->details_case == LANCE__ENCODINGS21__FULL_ZIP_LAYOUT__DETAILS_BITS_PER_OFFSET ? "bits_per_offset" : "bits_per_value",
          z->details_case == LANCE__ENCODINGS21__FULL_ZIP_LAYOUT__DETAILS_BITS_PER_OFFSET ? z->bits_per_offset : z->bits_per_value,
          z->num_items);
      layers(&s, z->layers, z->n_layers);
      put(&s, "}");
      break;
    }
    case LANCE__ENCODINGS21__PAGE_LAYOUT__LAYOUT_CONSTANT_LAYOUT: {
      const Lance__Encodings21__ConstantLayout *c = pl->constant_layout;
      pi->layout = "constant";
      put(&s, "constant{");
      if (c->inline_value.len > 0) {
        put(&s, "value: 0x");
        for (size_t i = 0; i < c->inline_value.len && i < 32; i++) put(&s, "%02x", c->inline_value.data[i]);
      } else if (pi->n_buffers == 1 || pi->n_buffers == 3) {
        put(&s, "value in page buffer 0");
      } else {
        put(&s, "all null");
      }
      /* two more buffers: an empty rep buffer and u16 def levels */
      if (pi->n_buffers == 2 || pi->n_buffers == 3) put(&s, ", def levels in page buffer %u", (unsigned)pi->n_buffers - 1);
      put(&s, ", ");
      layers(&s, c->layers, c->n_layers);
      put(&s, "}");
      break;
    }
    default:
      pi->layout = "other";
      put(&s, "page layout %d (not decoded)", (int)pl->layout_case);
      break;
  }
  lance__encodings21__page_layout__free_unpacked(pl, NULL);
}

static int page_info(const mw_datafile_t *f, uint32_t col, size_t k, const Lance__File__V2__ColumnMetadata__Page *pg,
                     mw_page_info_t *pi, mw_err_t *err) {
  assert(f != NULL);
  memset(pi, 0, sizeof *pi);
  pi->rows = pg->length;
  pi->priority = pg->priority;
  if (pg->n_buffer_offsets != pg->n_buffer_sizes || pg->n_buffer_offsets > MW_DATAFILE_MAX_PAGE_BUFFERS)
    return mw_err_set(err, -EBADMSG, "column %u page %zu: %zu buffer offsets, %zu sizes", col, k,
                      pg->n_buffer_offsets, pg->n_buffer_sizes);
  pi->n_buffers = pg->n_buffer_offsets;
  for (size_t i = 0; i < pi->n_buffers; i++) {
    pi->buf_offset[i] = pg->buffer_offsets[i];
    pi->buf_size[i] = pg->buffer_sizes[i];
    if (pi->buf_offset[i] > f->len || pi->buf_size[i] > f->len - pi->buf_offset[i])
      return mw_err_set(err, -EBADMSG, "column %u page %zu: buffer %zu at %" PRIu64 "+%" PRIu64 " beyond the %zu-byte file",
                        col, k, i, pi->buf_offset[i], pi->buf_size[i], f->len);
  }
  sb_t s = {pi->encoding, sizeof pi->encoding, 0};
  pi->layout = "other";
  if (pg->encoding == NULL || pg->encoding->location_case != LANCE__FILE__V2__ENCODING__LOCATION_DIRECT) {
    put(&s, "encoding not stored inline");
    return 0;
  }
  const ProtobufCBinaryData *e = &pg->encoding->direct->encoding;
  Google__Protobuf__Any *any = google__protobuf__any__unpack(NULL, e->len, e->data);
  if (any == NULL || any->type_url == NULL) {
    if (any) google__protobuf__any__free_unpacked(any, NULL);
    return mw_err_set(err, -EBADMSG, "column %u page %zu: encoding Any malformed", col, k);
  }
  if (strcmp(any->type_url, URL_PAGE21) == 0) {
    layout21(pi, any->value.data, any->value.len);
  } else if (strcmp(any->type_url, URL_ARRAY20) == 0) {
    pi->layout = "legacy";
    put(&s, "2.0 ArrayEncoding (%zu bytes)", any->value.len);
  } else {
    put(&s, "%s (%zu bytes)", any->type_url, any->value.len);
  }
  google__protobuf__any__free_unpacked(any, NULL);
  return 0;
}

int mw_datafile_column_info(const mw_datafile_t *f, uint32_t col, mw_page_info_t **pages,
                            size_t *n_pages, mw_err_t *err) {
  assert(f != NULL);
  assert(pages != NULL);
  assert(n_pages != NULL);
  *pages = NULL;
  *n_pages = 0;
  const uint8_t *p;
  size_t n;
  int rc = mw_datafile_column_metadata(f, col, &p, &n, err);
  if (rc < 0) return rc;
  Lance__File__V2__ColumnMetadata *cm = lance__file__v2__column_metadata__unpack(NULL, n, p);
  if (cm == NULL) return mw_err_set(err, -EBADMSG, "column %u: ColumnMetadata at byte %zu malformed", col, (size_t)(p - f->data));
  if (cm->n_pages > MW_DATAFILE_MAX_PAGES) {
    rc = mw_err_set(err, -EFBIG, "column %u: %zu pages", col, cm->n_pages);
    goto done;
  }
  mw_page_info_t *v = calloc(cm->n_pages ? cm->n_pages : 1, sizeof *v);
  if (v == NULL) {
    rc = -ENOMEM;
    goto done;
  }
  for (size_t i = 0; i < cm->n_pages && rc == 0; i++) rc = page_info(f, col, i, cm->pages[i], &v[i], err);
  if (rc < 0) {
    free(v);
    goto done;
  }
  *pages = v;
  *n_pages = cm->n_pages;
done:
  lance__file__v2__column_metadata__free_unpacked(cm, NULL);
  return rc;
}
