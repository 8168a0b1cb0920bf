/*
 * vindex_file.c — build index.idx and auxiliary.idx (vindex_file.h).
 *
 * The files are laid out as LanceDB 0.39.0 lays them out (measured on
 * tests/lance/data/vindex, tools/gen-vindex-fixtures.mjs): global buffer 1
 * (the IVF protobuf) at offset 0, then each column's one page, then the
 * FileDescriptor (global buffer 0), column metadata, the CMO and GBO tables
 * and the 40-byte footer; every buffer but the descriptor starts on a
 * 64-byte boundary, padded with 'H'. Pages:
 *   __vector_id, _rowid      MiniBlock, flat(32|64), one chunk per 4 KiB
 *   __sq_code                MiniBlock, fixed_size_list(dim, flat(8))
 *   __neighbors, _distance   FullZip, flat(32), bits_rep 1, bits_def 1
 *                            (0 without an empty list), layers
 *                            [all_valid_item, emptyable_list] (fullzip.h)
 * A MiniBlock chunk: u16 0 (no levels) | u32 value bytes | FE FE | values
 * zero-padded to 8; its u32 word is ((bytes / 8 - 1) << 4) | log2(values),
 * log2 = 0 in the page's last chunk.
 *
 * The IVF protobuf (lance-index pb.Ivf) of one partition of R rows and a
 * zero centroid of D floats, bytes:
 *   12 01 00 | 1a <n> varint(R) | 22 <n> { 08 02 | 12 <n> 01 varint(D) |
 *   1a <n> <4D zero bytes> }
 * This file builds both files with its own small Lance-file assembler (the
 * column shapes are fixed, and the data-file writer has no FullZip list).
 */
#include "lance/vindex_file.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "encodings_v2_1.pb-c.h"
#include "file2.pb-c.h"
#include "google/protobuf/any.pb-c.h"
#include "lance/batch.h"
#include "lance/sst_index_entry.h"
#include "lance/pbwire.h"
#include "lance/fullzip.h"
#include "lance/lance_schema.h"

#define PAD_PAGE 0x48
#define PAD_CHUNK 0xFE
#define CHUNK_BYTES 4096
#define URL_PAGE21 "/lance.encodings21.PageLayout"
#define URL_COLUMN "/lance.encodings.ColumnEncoding"
#define MAX_COLS 3

typedef Lance__Encodings21__CompressiveEncoding CE;

/* ------------------------------------------------------------ JSON numbers */

size_t mw_vindex_json_double(double v, char out[32]) {
  if (v == 0) return (size_t)snprintf(out, 32, "%s0.0", signbit(v) ? "-" : "");
  if (!isfinite(v)) return (size_t)snprintf(out, 32, "null");
  char sci[40];
  int prec = 0;
  for (prec = 0; prec < 17; prec++) { /* shortest digits that round-trip */
    snprintf(sci, sizeof sci, "%.*e", prec, v);
    if (strtod(sci, NULL) == v) break;
  }
  char digits[24];
  size_t nd = 0;
  const char *p = sci + (sci[0] == '-');
  for (; *p && *p != 'e'; p++)
    if (*p != '.') digits[nd++] = *p;
  while (nd > 1 && digits[nd - 1] == '0') nd--;
  digits[nd] = '\0';
  int kk = atoi(p + 1) + 1; /* v = 0.digits x 10^kk */
  const char *sign = v < 0 ? "-" : "";
  if (kk > 0 && kk <= 16) {
    if ((int)nd <= kk) return (size_t)snprintf(out, 32, "%s%s%.*s.0", sign, digits, kk - (int)nd, "0000000000000000");
    return (size_t)snprintf(out, 32, "%s%.*s.%s", sign, kk, digits, digits + kk);
  }
  if (kk > -5 && kk <= 0) return (size_t)snprintf(out, 32, "%s0.%.*s%s", sign, -kk, "00000", digits);
  if (nd == 1) return (size_t)snprintf(out, 32, "%s%se%d", sign, digits, kk - 1);
  return (size_t)snprintf(out, 32, "%s%c.%se%d", sign, digits[0], digits + 1, kk - 1);
}

/* ------------------------------------------------------------ protobuf bits */

/* pb.Ivf of one partition of `rows` rows and a zero centroid of dim floats. */
static int ivf_encode(uint64_t rows, uint32_t dim, mw_buf_t *out) {
  mw_buf_t t = MW_BUF_INIT, lens = MW_BUF_INIT, shape = MW_BUF_INIT;
  uint8_t zero = 0;
  int rc = mw_pb_put_varint(&lens, rows);
  if (rc == 0) rc = mw_pb_put_varint(&shape, 1);
  if (rc == 0) rc = mw_pb_put_varint(&shape, dim);
  if (rc == 0) rc = mw_buf_append(&t, (const uint8_t[]){0x08, 0x02}, 2); /* data_type FLOAT32 */
  if (rc == 0) rc = mw_pb_put_len(&t, 2, shape.data, shape.len);
  if (rc == 0) rc = mw_pb_put_varint(&t, 3 << 3 | 2);
  if (rc == 0) rc = mw_pb_put_varint(&t, (uint64_t)dim * 4);
  if (rc == 0) rc = mw_buf_fill(&t, 0, (size_t)dim * 4);
  if (rc == 0) rc = mw_pb_put_len(out, 2, &zero, 1); /* offsets [0] */
  if (rc == 0) rc = mw_pb_put_len(out, 3, lens.data, lens.len);
  if (rc == 0) rc = mw_pb_put_len(out, 4, t.data, t.len);
  mw_buf_free(&t);
  mw_buf_free(&lens);
  mw_buf_free(&shape);
  return rc;
}

int mw_vindex_entry_encode(const uint8_t uuid[16], const char *name, int32_t field_id,
                           uint64_t dataset_version, uint64_t created_at_ms, mw_buf_t *out,
                           mw_err_t *err) {
  assert(uuid != NULL);
  assert(name != NULL);
  assert(out != NULL);
  if (field_id < 0 || strlen(name) == 0)
    return mw_err_set(err, -EINVAL, "vector index entry: field id %d, name '%s'", field_id, name);
  mw_sst_index_entry_t e = {.uuid = uuid, .name = name, .field_id = field_id, .dataset_version = dataset_version,
                        .index_version = 1, .created_at_ms = created_at_ms, .details_url = MW_VINDEX_DETAILS_URL};
  int rc = mw_sst_index_entry_encode(&e, out);
  return rc < 0 ? mw_err_set(err, rc, "vector index entry: out of memory") : 0;
}

int mw_vindex_details_distance(const char *type_url, const uint8_t *value, size_t len,
                               mw_distance_t *out) {
  assert(out != NULL);
  if (type_url == NULL || strcmp(type_url, MW_VINDEX_DETAILS_URL) != 0) return -ENOENT;
  uint64_t metric = 0;
  for (size_t at = 0; at < len;) { /* the top-level fields: varint, length or fixed */
    uint64_t key = 0, v = 0;
    for (unsigned sh = 0;; sh += 7) {
      if (at >= len || sh > 63) return -EBADMSG;
      key |= (uint64_t)(value[at] & 0x7f) << sh;
      if (!(value[at++] & 0x80)) break;
    }
    unsigned wt = key & 7;
    if (wt == 0 || wt == 2)
      for (unsigned sh = 0;; sh += 7) {
        if (at >= len || sh > 63) return -EBADMSG;
        v |= (uint64_t)(value[at] & 0x7f) << sh;
        if (!(value[at++] & 0x80)) break;
      }
    if (wt == 2 && v > len - at) return -EBADMSG;
    if (wt == 1 || wt == 5) v = wt == 1 ? 8 : 4;
    if (wt != 0 && wt != 1 && wt != 2 && wt != 5) return -EBADMSG;
    if (wt != 0 && v > len - at) return -EBADMSG;
    if (wt != 0) at += (size_t)v;
    if (key >> 3 == 1 && wt == 0) metric = v;
  }
  if (metric > MW_DIST_DOT) return -ENOTSUP;
  static const mw_distance_t by_metric[] = {MW_DIST_L2, MW_DIST_COSINE, MW_DIST_DOT};
  *out = by_metric[metric];
  return 0;
}

/* ------------------------------------------------------------ Lance file assembly */

typedef struct page {
  uint64_t off[2], size[2];
  size_t n_bufs;
  uint64_t rows;
  uint8_t *any; /* packed Any{PageLayout} */
  size_t any_len;
} page_t;

typedef struct lfile {
  mw_buf_t *out;
  size_t base;
  page_t pages[MAX_COLS];
  size_t n_cols;
  uint64_t gbo[4];        /* {pos, size} of global buffers 0 and 1 */
  mw_buf_t scratch_a, scratch_b;
} lfile_t;

static int put_buffer(lfile_t *f, const void *p, size_t n, uint64_t *pos) {
  assert(f != NULL);
  assert(pos != NULL);
  int rc = mw_buf_fill(f->out, PAD_PAGE, (size_t)(-(f->out->len - f->base)) & 63);
  if (rc < 0) return rc;
  *pos = f->out->len - f->base;
  if (n > 0 && (rc = mw_buf_append(f->out, p, n)) < 0) return rc;
  return mw_buf_fill(f->out, PAD_PAGE, (size_t)(-(f->out->len - f->base)) & 63);
}

static int pack_any(const char *url, const ProtobufCMessage *m, uint8_t **out, size_t *n) {
  assert(n != NULL);
  size_t len = protobuf_c_message_get_packed_size(m);
  uint8_t *val = malloc(len ? len : 1);
  if (val == NULL) return -ENOMEM;
  protobuf_c_message_pack(m, val);
  Google__Protobuf__Any any = GOOGLE__PROTOBUF__ANY__INIT;
  any.type_url = (char *)url;
  any.value.data = val;
  any.value.len = len;
  *n = google__protobuf__any__get_packed_size(&any);
  *out = malloc(*n);
  if (*out != NULL) google__protobuf__any__pack(&any, *out);
  free(val);
  return *out ? 0 : -ENOMEM;
}

static int page_layout(page_t *pg, Lance__Encodings21__PageLayout *pl) {
  assert(pg != NULL);
  assert(pl != NULL);
  return pack_any(URL_PAGE21, &pl->base, &pg->any, &pg->any_len);
}

/* A MiniBlock page of n fixed-width values (width bytes each). */
static int mb_page(lfile_t *f, page_t *pg, const uint8_t *vals, uint64_t n, size_t width, CE *vc) {
  assert(f != NULL);
  assert(pg != NULL);
  uint64_t per = 1;
  while (per * 2 * width <= CHUNK_BYTES) per *= 2;
  unsigned log2 = 0;
  while (((uint64_t)1 << log2) < per) log2++;
  mw_buf_t *words = &f->scratch_a, *data = &f->scratch_b;
  mw_buf_reset(words), mw_buf_reset(data);
  int rc = 0;
  for (uint64_t at = 0; at < n && rc == 0; at += per) {
    uint64_t cnt = n - at < per ? n - at : per;
    size_t vb = (size_t)cnt * width, start = data->len;
    rc = mw_buf_put_u16le(data, 0);
    if (rc == 0) rc = mw_buf_put_u32le(data, (uint32_t)vb);
    if (rc == 0) rc = mw_buf_fill(data, PAD_CHUNK, 2);
    if (rc == 0) rc = mw_buf_append(data, vals + (size_t)at * width, vb);
    if (rc == 0) rc = mw_buf_fill(data, 0, (size_t)(-(data->len - start)) & 7);
    bool last = at + cnt == n;
    if (rc == 0) rc = mw_buf_put_u32le(words, (uint32_t)(((data->len - start) / 8 - 1) << 4 | (last ? 0 : log2)));
  }
  if (rc == 0) rc = put_buffer(f, words->data, words->len, &pg->off[0]);
  if (rc == 0) rc = put_buffer(f, data->data, data->len, &pg->off[1]);
  if (rc < 0) return rc;
  pg->size[0] = words->len, pg->size[1] = data->len, pg->n_bufs = 2, pg->rows = n;
  Lance__Encodings21__RepDefLayer layer = LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_ALL_VALID_ITEM;
  Lance__Encodings21__MiniBlockLayout mb = LANCE__ENCODINGS21__MINI_BLOCK_LAYOUT__INIT;
  mb.value_compression = vc;
  mb.n_layers = 1, mb.layers = &layer;
  mb.num_buffers = 1, mb.num_items = n, mb.has_large_chunk = true;
  Lance__Encodings21__PageLayout pl = LANCE__ENCODINGS21__PAGE_LAYOUT__INIT;
  pl.layout_case = LANCE__ENCODINGS21__PAGE_LAYOUT__LAYOUT_MINI_BLOCK_LAYOUT;
  pl.mini_block_layout = &mb;
  return page_layout(pg, &pl);
}

static int flat_page(lfile_t *f, page_t *pg, const void *vals, uint64_t n, size_t width) {
  Lance__Encodings21__Flat flat = LANCE__ENCODINGS21__FLAT__INIT;
  flat.bits_per_value = 8 * width;
  CE vc = LANCE__ENCODINGS21__COMPRESSIVE_ENCODING__INIT;
  vc.compression_case = LANCE__ENCODINGS21__COMPRESSIVE_ENCODING__COMPRESSION_FLAT;
  vc.flat = &flat;
  return mb_page(f, pg, vals, n, width, &vc);
}

static int sq_page(lfile_t *f, page_t *pg, const uint8_t *codes, uint64_t n, uint32_t dim) {
  Lance__Encodings21__Flat flat = LANCE__ENCODINGS21__FLAT__INIT;
  flat.bits_per_value = 8;
  CE item = LANCE__ENCODINGS21__COMPRESSIVE_ENCODING__INIT;
  item.compression_case = LANCE__ENCODINGS21__COMPRESSIVE_ENCODING__COMPRESSION_FLAT;
  item.flat = &flat;
  Lance__Encodings21__FixedSizeList fsl = LANCE__ENCODINGS21__FIXED_SIZE_LIST__INIT;
  fsl.items_per_value = dim;
  fsl.values = &item;
  CE vc = LANCE__ENCODINGS21__COMPRESSIVE_ENCODING__INIT;
  vc.compression_case = LANCE__ENCODINGS21__COMPRESSIVE_ENCODING__COMPRESSION_FIXED_SIZE_LIST;
  vc.fixed_size_list = &fsl;
  return mb_page(f, pg, codes, n, dim, &vc);
}

/* A FullZip page of list<32-bit> rows (offsets into values). */
static int fz_page(lfile_t *f, page_t *pg, const int32_t *offsets, uint64_t rows, const void *values) {
  assert(f != NULL);
  assert(pg != NULL);
  mw_buf_t *zipped = &f->scratch_a, *repidx = &f->scratch_b;
  mw_buf_reset(zipped), mw_buf_reset(repidx);
  mw_fullzip_shape_t s;
  int rc = mw_fullzip_zip_list(offsets, rows, values, 4, zipped, repidx, &s);
  if (rc == 0) rc = put_buffer(f, zipped->data, zipped->len, &pg->off[0]);
  if (rc == 0) rc = put_buffer(f, repidx->data, repidx->len, &pg->off[1]);
  if (rc < 0) return rc;
  pg->size[0] = zipped->len, pg->size[1] = repidx->len, pg->n_bufs = 2, pg->rows = rows;
  Lance__Encodings21__Flat flat = LANCE__ENCODINGS21__FLAT__INIT;
  flat.bits_per_value = 32;
  CE vc = LANCE__ENCODINGS21__COMPRESSIVE_ENCODING__INIT;
  vc.compression_case = LANCE__ENCODINGS21__COMPRESSIVE_ENCODING__COMPRESSION_FLAT;
  vc.flat = &flat;
  Lance__Encodings21__RepDefLayer layers[2] = {
      LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_ALL_VALID_ITEM,
      s.bits_def ? LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_EMPTYABLE_LIST
                 : LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_ALL_VALID_LIST};
  Lance__Encodings21__FullZipLayout fz = LANCE__ENCODINGS21__FULL_ZIP_LAYOUT__INIT;
  fz.bits_rep = s.bits_rep, fz.bits_def = s.bits_def;
  fz.details_case = LANCE__ENCODINGS21__FULL_ZIP_LAYOUT__DETAILS_BITS_PER_VALUE;
  fz.bits_per_value = 32;
  fz.num_items = (uint32_t)s.num_items, fz.num_visible_items = (uint32_t)s.num_visible_items;
  fz.value_compression = &vc;
  fz.n_layers = 2, fz.layers = layers;
  Lance__Encodings21__PageLayout pl = LANCE__ENCODINGS21__PAGE_LAYOUT__INIT;
  pl.layout_case = LANCE__ENCODINGS21__PAGE_LAYOUT__LAYOUT_FULL_ZIP_LAYOUT;
  pl.full_zip_layout = &fz;
  return page_layout(pg, &pl);
}

/* ColumnMetadata of one one-page column, appended to cm. */
static int column_meta(const page_t *pg, mw_buf_t *cm, uint64_t *len) {
  assert(pg != NULL);
  assert(len != NULL);
  static const uint8_t empty[] = {0x0a, 0x00}; /* ColumnEncoding{values: Empty} */
  Google__Protobuf__Any cany = GOOGLE__PROTOBUF__ANY__INIT;
  cany.type_url = (char *)URL_COLUMN;
  cany.value.data = (uint8_t *)empty, cany.value.len = sizeof empty;
  uint8_t cbytes[64];
  size_t cn = google__protobuf__any__pack(&cany, cbytes);
  Lance__File__V2__DirectEncoding cdir = LANCE__FILE__V2__DIRECT_ENCODING__INIT, pdir = cdir;
  cdir.encoding.data = cbytes, cdir.encoding.len = cn;
  pdir.encoding.data = pg->any, pdir.encoding.len = pg->any_len;
  Lance__File__V2__Encoding cenc = LANCE__FILE__V2__ENCODING__INIT, penc = cenc;
  cenc.location_case = penc.location_case = LANCE__FILE__V2__ENCODING__LOCATION_DIRECT;
  cenc.direct = &cdir, penc.direct = &pdir;
  Lance__File__V2__ColumnMetadata__Page p = LANCE__FILE__V2__COLUMN_METADATA__PAGE__INIT, *pp = &p;
  p.n_buffer_offsets = p.n_buffer_sizes = pg->n_bufs;
  p.buffer_offsets = (uint64_t *)pg->off, p.buffer_sizes = (uint64_t *)pg->size;
  p.length = pg->rows, p.encoding = &penc;
  Lance__File__V2__ColumnMetadata m = LANCE__FILE__V2__COLUMN_METADATA__INIT;
  m.encoding = &cenc, m.n_pages = 1, m.pages = &pp;
  *len = lance__file__v2__column_metadata__get_packed_size(&m);
  uint8_t *dst = mw_buf_extend(cm, *len);
  if (dst == NULL) return -ENOMEM;
  lance__file__v2__column_metadata__pack(&m, dst);
  return 0;
}

static int descriptor(lfile_t *f, const mw_schema_t *s, uint64_t rows) {
  Lance__File__Field **fields = NULL;
  size_t nf = 0;
  int rc = mw_lance_fields_from_schema(s, &fields, &nf);
  if (rc < 0) return rc;
  Lance__File__Schema__MetadataEntry ents[8], *eptr[8];
  assert(s->meta.n <= 8);
  for (size_t i = 0; i < s->meta.n; i++) {
    lance__file__schema__metadata_entry__init(&ents[i]);
    ents[i].key = s->meta.items[i].key;
    ents[i].value.data = s->meta.items[i].value, ents[i].value.len = s->meta.items[i].value_len;
    eptr[i] = &ents[i];
  }
  Lance__File__Schema schema = LANCE__FILE__SCHEMA__INIT;
  schema.n_fields = nf, schema.fields = fields;
  schema.n_metadata = s->meta.n, schema.metadata = eptr;
  Lance__File__V2__FileDescriptor fd = LANCE__FILE__V2__FILE_DESCRIPTOR__INIT;
  fd.schema = &schema, fd.length = rows;
  size_t n = lance__file__v2__file_descriptor__get_packed_size(&fd);
  rc = mw_buf_fill(f->out, PAD_PAGE, (size_t)(-(f->out->len - f->base)) & 63);
  f->gbo[0] = f->out->len - f->base, f->gbo[1] = n;
  uint8_t *dst = rc == 0 ? mw_buf_extend(f->out, n) : NULL;
  if (dst) lance__file__v2__file_descriptor__pack(&fd, dst);
  mw_lance_fields_free(fields, nf);
  return dst ? 0 : -ENOMEM;
}

/* Everything after the pages: descriptor, column metadata, tables, footer. */
static int lfile_finish(lfile_t *f, const mw_schema_t *s, uint64_t rows) {
  assert(f != NULL);
  int rc = descriptor(f, s, rows);
  if (rc < 0) return rc;
  uint64_t cm_start = f->out->len - f->base, cmo[2 * MAX_COLS];
  for (size_t c = 0; c < f->n_cols && rc == 0; c++) {
    cmo[2 * c] = f->out->len - f->base;
    rc = column_meta(&f->pages[c], f->out, &cmo[2 * c + 1]);
  }
  uint64_t cmo_start = f->out->len - f->base;
  for (size_t i = 0; i < 2 * f->n_cols && rc == 0; i++) rc = mw_buf_put_u64le(f->out, cmo[i]);
  uint64_t gbo_start = f->out->len - f->base;
  for (size_t i = 0; i < 4 && rc == 0; i++) rc = mw_buf_put_u64le(f->out, f->gbo[i]);
  if (rc == 0) rc = mw_buf_put_u64le(f->out, cm_start);
  if (rc == 0) rc = mw_buf_put_u64le(f->out, cmo_start);
  if (rc == 0) rc = mw_buf_put_u64le(f->out, gbo_start);
  if (rc == 0) rc = mw_buf_put_u32le(f->out, 2);
  if (rc == 0) rc = mw_buf_put_u32le(f->out, (uint32_t)f->n_cols);
  if (rc == 0) rc = mw_buf_put_u16le(f->out, 2);
  if (rc == 0) rc = mw_buf_put_u16le(f->out, 2);
  if (rc == 0) rc = mw_buf_append(f->out, "LANC", 4);
  return rc;
}

static void lfile_free(lfile_t *f) {
  assert(f != NULL);
  for (size_t i = 0; i < MAX_COLS; i++) free(f->pages[i].any);
  mw_buf_free(&f->scratch_a);
  mw_buf_free(&f->scratch_b);
}

/* ------------------------------------------------------------ the two files */

static int meta_set(mw_schema_t *s, const char *key, const mw_buf_t *v) {
  assert(s != NULL);
  assert(v != NULL);
  return mw_kvs_set(&s->meta, key, v->data, v->len);
}

static int printf_buf(mw_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int printf_buf(mw_buf_t *b, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof tmp) return -EFBIG;
  return mw_buf_append(b, tmp, (size_t)n);
}

static int list_field(mw_schema_t *s, const char *name, mw_type_t item, int32_t id) {
  assert(s != NULL);
  int i = mw_schema_add(s, name, MW_T_LIST, true);
  if (i < 0) return i;
  mw_field_t *f = &s->fields[i];
  f->id = id;
  int c = mw_field_add_child(f, "item", item, true);
  if (c < 0) return c;
  f->children[c].id = id + 1;
  return mw_kvs_set(&f->meta, "lance-encoding:structural-encoding", "fullzip", 7);
}

/* index.idx's schema and its metadata (in the order Lance adds it). */
static int index_schema(mw_schema_t *s, const mw_vindex_t *v, const mw_hnsw_t *g, const uint32_t *level_rows) {
  assert(s != NULL);
  assert(v != NULL);
  assert(g != NULL);
  int i = mw_schema_add(s, "__vector_id", MW_T_UINT32, true);
  if (i < 0) return i;
  s->fields[i].id = 0;
  int rc = list_field(s, "__neighbors", MW_T_UINT32, 1);
  if (rc == 0) rc = list_field(s, "_distance", MW_T_FLOAT32, 3);
  mw_buf_t t = MW_BUF_INIT;
  if (rc == 0) rc = printf_buf(&t, "{\"type\":\"%s\",\"distance_type\":\"%s\"}", MW_VINDEX_TYPE, mw_distance_name(g->dist));
  if (rc == 0) rc = meta_set(s, "lance:index", &t);
  mw_buf_reset(&t);
  if (rc == 0) rc = printf_buf(&t, "1");
  if (rc == 0) rc = meta_set(s, "lance:ivf", &t);
  mw_buf_reset(&t);
  if (rc == 0)
    rc = printf_buf(&t, "[\"{\\\"entry_point\\\":%u,\\\"params\\\":{\\\"max_level\\\":%u,\\\"m\\\":%u,"
                        "\\\"ef_construction\\\":%u,\\\"prefetch_distance\\\":%d},\\\"level_offsets\\\":[",
                    v->entry_point, g->max_level, g->m, g->ef_construction, MW_VINDEX_PREFETCH_DISTANCE);
  uint64_t off = 0;
  for (uint16_t l = 0; l <= g->max_level && rc == 0; l++) {
    rc = printf_buf(&t, "%s%llu", l ? "," : "", (unsigned long long)off);
    if (l < g->max_level) off += level_rows[l];
  }
  if (rc == 0) rc = printf_buf(&t, "]}\"]");
  if (rc == 0) rc = meta_set(s, "lance:hnsw", &t);
  mw_buf_free(&t);
  return rc;
}

static int aux_schema(mw_schema_t *s, const mw_vindex_t *v, uint32_t dim, mw_distance_t dist) {
  assert(s != NULL);
  assert(v != NULL);
  int i = mw_schema_add(s, "_rowid", MW_T_UINT64, false);
  if (i < 0) return i;
  s->fields[i].id = 0;
  if ((i = mw_schema_add(s, "__sq_code", MW_T_FSL, true)) < 0) return i;
  s->fields[i].id = 1, s->fields[i].fsl_dim = (int32_t)dim;
  s->fields[i].item_type = MW_T_UINT8, s->fields[i].item_nullable = true;
  char lo[32], hi[32];
  mw_vindex_json_double(v->bounds.lo, lo);
  mw_vindex_json_double(v->bounds.hi, hi);
  mw_buf_t t = MW_BUF_INIT;
  int rc = printf_buf(&t, "%s", mw_distance_name(dist));
  if (rc == 0) rc = meta_set(s, "distance_type", &t);
  mw_buf_reset(&t);
  if (rc == 0) rc = printf_buf(&t, "1");
  if (rc == 0) rc = meta_set(s, "lance:ivf", &t);
  mw_buf_reset(&t);
  if (rc == 0) rc = printf_buf(&t, "[\"{\\\"dim\\\":%u,\\\"num_bits\\\":8,\\\"bounds\\\":{\\\"start\\\":%s,\\\"end\\\":%s}}\"]", dim, lo, hi);
  if (rc == 0) rc = meta_set(s, "storage_metadata", &t);
  mw_buf_reset(&t);
  if (rc == 0) rc = printf_buf(&t, "{\"dim\":%u,\"num_bits\":8,\"bounds\":{\"start\":%s,\"end\":%s}}", dim, lo, hi);
  if (rc == 0) rc = meta_set(s, "lance:sq", &t);
  mw_buf_free(&t);
  return rc;
}

/* The graph as Lance's HNSW batch: per level, per node on it (ascending),
 * vector id, neighbor ids, distances. */
typedef struct graph_rows {
  uint32_t *ids;
  int32_t *offsets;
  uint32_t *nbrs;
  float *dists;
  uint64_t rows;
  uint32_t level_rows[MW_HNSW_MAX_LEVEL];
} graph_rows_t;

static int graph_rows(const mw_hnsw_t *g, graph_rows_t *r) {
  uint64_t rows = 0, links = 0;
  for (uint32_t id = 0; id < g->n; id++)
    for (uint16_t l = 0; l <= g->level[id] && l < g->max_level; l++) {
      uint32_t c;
      (void)mw_hnsw_links(g, id, l, &c);
      rows++, links += c, r->level_rows[l]++;
    }
  if (links > INT32_MAX) return -EFBIG;
  r->ids = malloc(rows * sizeof *r->ids);
  r->offsets = malloc((rows + 1) * sizeof *r->offsets);
  r->nbrs = malloc((links ? links : 1) * sizeof *r->nbrs);
  r->dists = malloc((links ? links : 1) * sizeof *r->dists);
  if (!r->ids || !r->offsets || !r->nbrs || !r->dists) return -ENOMEM;
  uint64_t row = 0;
  int32_t at = 0;
  r->offsets[0] = 0;
  for (uint16_t l = 0; l < g->max_level; l++)
    for (uint32_t id = 0; id < g->n; id++) {
      if (g->level[id] < l) continue;
      uint32_t c;
      const mw_hnsw_link_t *k = mw_hnsw_links(g, id, l, &c);
      for (uint32_t j = 0; j < c; j++) r->nbrs[at] = k[j].id, r->dists[at++] = k[j].dist;
      r->ids[row++] = id;
      r->offsets[row] = at;
    }
  assert(row == rows);
  r->rows = rows;
  return 0;
}

static void graph_rows_free(graph_rows_t *r) {
  assert(r != NULL);
  free(r->ids);
  free(r->offsets);
  free(r->nbrs);
  free(r->dists);
}

static int index_file(mw_vindex_t *v, const mw_hnsw_t *g, mw_err_t *err) {
  assert(v != NULL);
  assert(g != NULL);
  graph_rows_t r = {0};
  mw_schema_t s;
  mw_schema_init(&s);
  lfile_t f = {.out = &v->index_idx, .base = v->index_idx.len, .n_cols = 3};
  mw_buf_t ivf = MW_BUF_INIT;
  int rc = graph_rows(g, &r);
  if (rc == 0) rc = index_schema(&s, v, g, r.level_rows);
  if (rc == 0) rc = ivf_encode(r.rows, g->dim, &ivf);
  if (rc == 0) rc = put_buffer(&f, ivf.data, ivf.len, &f.gbo[2]);
  f.gbo[3] = ivf.len;
  if (rc == 0) rc = flat_page(&f, &f.pages[0], r.ids, r.rows, 4);
  if (rc == 0) rc = fz_page(&f, &f.pages[1], r.offsets, r.rows, r.nbrs);
  if (rc == 0) rc = fz_page(&f, &f.pages[2], r.offsets, r.rows, r.dists);
  if (rc == 0) rc = lfile_finish(&f, &s, r.rows);
  lfile_free(&f);
  mw_buf_free(&ivf);
  mw_schema_free(&s);
  graph_rows_free(&r);
  return rc < 0 ? mw_err_set(err, rc, "index.idx: cannot encode (%s)", rc == -EFBIG ? "too many links" : "out of memory") : 0;
}

static int aux_file(mw_vindex_t *v, const uint64_t *row_ids, const uint8_t *codes, uint32_t dim,
                    mw_distance_t dist, mw_err_t *err) {
  assert(v != NULL);
  mw_schema_t s;
  mw_schema_init(&s);
  lfile_t f = {.out = &v->aux_idx, .base = v->aux_idx.len, .n_cols = 2};
  mw_buf_t ivf = MW_BUF_INIT;
  int rc = aux_schema(&s, v, dim, dist);
  if (rc == 0) rc = ivf_encode(v->nodes, dim, &ivf);
  if (rc == 0) rc = put_buffer(&f, ivf.data, ivf.len, &f.gbo[2]);
  f.gbo[3] = ivf.len;
  if (rc == 0) rc = flat_page(&f, &f.pages[0], row_ids, v->nodes, 8);
  if (rc == 0) rc = sq_page(&f, &f.pages[1], codes, v->nodes, dim);
  if (rc == 0) rc = lfile_finish(&f, &s, v->nodes);
  lfile_free(&f);
  mw_buf_free(&ivf);
  mw_schema_free(&s);
  return rc < 0 ? mw_err_set(err, rc, "auxiliary.idx: cannot encode") : 0;
}

/* Cosine: v / |v| (a zero vector stays zero). LanceDB's reader searches a
 * cosine IVF_HNSW_SQ index with the query normalized and L2 over the SQ
 * codes, so the codes must be of normalized vectors (docs/indexes.md). */
static void normalize(float *v, size_t dim) {
  assert(v != NULL);
  double nn = 0;
  for (size_t i = 0; i < dim; i++) nn += (double)v[i] * v[i];
  if (nn == 0) return;
  double norm = sqrt(nn); /* in double: 1 / |v| of a denormal vector overflows a float */
  for (size_t i = 0; i < dim; i++) v[i] = (float)(v[i] / norm);
}

/* A row gets a node when its vector is not null and every item is finite
 * (a NaN or infinite item has no distance: it could not be found, and it
 * would make the quantizer's bounds infinite). */
bool mw_vindex_row_indexed(const mw_vindex_input_t *in, uint64_t r) {
  assert(in != NULL);
  assert(r < in->rows);
  if (in->validity != NULL && !(in->validity[r >> 3] >> (r & 7) & 1)) return false;
  for (size_t i = 0; i < in->dim; i++)
    if (!isfinite(in->vecs[r * in->dim + i])) return false;
  return true;
}

int mw_vindex_build(const mw_vindex_input_t *in, mw_vindex_t *out, mw_err_t *err) {
  assert(in != NULL);
  assert(out != NULL);
  memset(out, 0, sizeof *out);
  if (in->vecs == NULL || in->dim == 0 || in->dim > MW_VINDEX_MAX_DIM || in->rows > MW_VINDEX_MAX_ROWS)
    return mw_err_set(err, -EINVAL, "vector index: %llu rows of dimension %u (limits %llu, %d)",
                      (unsigned long long)in->rows, in->dim, (unsigned long long)MW_VINDEX_MAX_ROWS, MW_VINDEX_MAX_DIM);
  uint64_t nodes = 0;
  for (uint64_t r = 0; r < in->rows; r++) nodes += mw_vindex_row_indexed(in, r);
  if (nodes == 0) return mw_err_set(err, -ENODATA, "vector index: no non-null, finite vector in %llu rows", (unsigned long long)in->rows);
  size_t dim = in->dim;
  bool dense = nodes == in->rows && in->dist != MW_DIST_COSINE; /* else a packed copy */
  float *packed = dense ? NULL : malloc(nodes * dim * sizeof *packed);
  uint64_t *row_ids = malloc(nodes * sizeof *row_ids);
  uint8_t *codes = malloc(nodes * dim);
  mw_hnsw_t g = {0};
  int rc = -ENOMEM;
  if ((!dense && packed == NULL) || row_ids == NULL || codes == NULL) goto fail;
  for (uint64_t r = 0, k = 0; r < in->rows; r++) {
    if (!mw_vindex_row_indexed(in, r)) continue;
    if (!dense) memcpy(packed + k * dim, in->vecs + r * dim, dim * sizeof *packed);
    if (in->dist == MW_DIST_COSINE) normalize(packed + k * dim, dim);
    row_ids[k++] = r;
  }
  const float *vecs = dense ? in->vecs : packed;
  out->nodes = (uint32_t)nodes;
  mw_sq_bounds_init(&out->bounds);
  mw_sq_bounds_update(&out->bounds, vecs, nodes * dim);
  mw_sq_encode(&out->bounds, vecs, nodes * dim, codes);
  if ((rc = mw_hnsw_build(&g, vecs, (uint32_t)nodes, in->dim, in->dist, &in->hnsw, err)) < 0) goto fail;
  out->entry_point = g.entry, out->top_level = g.top, out->build_bytes = g.bytes;
  if ((rc = index_file(out, &g, err)) < 0 || (rc = aux_file(out, row_ids, codes, in->dim, in->dist, err)) < 0) goto fail;
  goto done;
fail:
  mw_vindex_free(out);
done:
  mw_hnsw_free(&g);
  free(packed);
  free(row_ids);
  free(codes);
  return rc;
}

void mw_vindex_free(mw_vindex_t *v) {
  if (v == NULL) return;
  mw_buf_free(&v->index_idx);
  mw_buf_free(&v->aux_idx);
  memset(v, 0, sizeof *v);
}
