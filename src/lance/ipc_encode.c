/*
 * ipc_encode.c — Arrow IPC stream encoder (see ipc.h): the columnar model
 * of batch.h into the bytes arrow-rs StreamWriter writes.
 *
 * A stream is a sequence of encapsulated messages, then EOS:
 *
 *   ff ff ff ff  38 02 00 00   continuation, metadata length 568 (8+568 = 576)
 *   10 00 00 00 ...            flatbuffer Message{V5, Schema, ...}, zero padded
 *   ff ff ff ff  78 01 00 00   continuation, metadata length 376
 *   ...                        Message{V5, RecordBatch, bodyLength 6784}
 *   ff ff ff ff ... 00 00      body: buffers at 64-aligned offsets, zero padded
 *   ff ff ff ff  00 00 00 00   EOS
 *
 * Encoding reproduces arrow-rs StreamWriter byte for byte: the flatbuffer
 * objects are created in the order arrow-ipc's convert.rs/writer.rs create
 * them (per field: metadata, name, children vector, type table, Field table;
 * per batch: compression table, buffers vector, nodes vector, RecordBatch,
 * Message), and flatbuf.c lays them out like flatbuffers-rs. Metadata is
 * padded so 8 + length is a multiple of 64; each body buffer starts at a
 * 64-byte multiple; a column without nulls gets an all-0xFF validity bitmap.
 *
 * A batch is encoded in two passes: collect() lists each column's nodes
 * and source buffers (src_buf_t: bytes, an all-ones bitmap, or a zero
 * fill) in Arrow's depth-first order, then the body is laid out from that
 * list (compressed per buffer with ZSTD when asked). The decoder
 * (ipc_decode.c) checks every length this file writes.
 */
#include "lance/ipc.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "lance/ipc_int.h"
#include "lance/util.h"

void mw_ipc_writer_init(mw_ipc_writer_t *w) {
  assert(w != NULL);
  memset(w, 0, sizeof *w);
  mw_fbb_init(&w->fbb);
}

void mw_ipc_writer_free(mw_ipc_writer_t *w) {
  assert(w != NULL);
  mw_fbb_free(&w->fbb);
  mw_buf_free(&w->body);
  mw_buf_free(&w->scratch);
  mw_buf_free(&w->ones);
  ZSTD_freeCCtx(w->zctx);
  memset(w, 0, sizeof *w);
}

/* Reserve an 8-aligned array of n items in the scratch stack; returns its
 * byte offset (pointers move when scratch grows, so callers keep offsets). */
static int scratch_push(mw_ipc_writer_t *w, size_t bytes, size_t *mark) {
  assert(w != NULL);
  assert(mark != NULL);
  size_t at = (w->scratch.len + 7) & ~(size_t)7;
  /* +8: never a NULL data pointer, even for an empty array */
  if (mw_buf_reserve(&w->scratch, at - w->scratch.len + bytes + 8) < 0) return -ENOMEM;
  w->scratch.len = at + bytes;
  *mark = at;
  return 0;
}

static uint32_t *scratch_u32(mw_ipc_writer_t *w, size_t mark) {
  assert(w != NULL);
  return (uint32_t *)(void *)(w->scratch.data + mark);
}

/* Vector of KeyValue tables, plus an optional extra entry at the end. */
static int fb_kvs(mw_ipc_writer_t *w, const mw_kvs_t *kvs, const char *xkey, const char *xval,
                  uint32_t *off) {
  assert(w != NULL);
  assert(kvs != NULL);
  assert(off != NULL);
  size_t n = kvs->n + (xkey != NULL), mark;
  if (scratch_push(w, n * 4, &mark) < 0) return -ENOMEM;
  for (size_t i = 0; i < n; i++) {
    const char *k = i < kvs->n ? kvs->items[i].key : xkey;
    const void *v = i < kvs->n ? (const void *)kvs->items[i].value : xval;
    size_t vn = i < kvs->n ? kvs->items[i].value_len : strlen(xval);
    uint32_t ko = mw_fbb_string(&w->fbb, k, strlen(k));
    uint32_t vo = mw_fbb_string(&w->fbb, v, vn);
    mw_fbb_table_start(&w->fbb);
    mw_fbb_slot_off(&w->fbb, 0, ko);
    mw_fbb_slot_off(&w->fbb, 1, vo);
    scratch_u32(w, mark)[i] = mw_fbb_table_end(&w->fbb);
  }
  *off = mw_fbb_vec_offsets(&w->fbb, scratch_u32(w, mark), n);
  w->scratch.len = mark;
  return 0;
}

static int fb_field(mw_ipc_writer_t *w, const mw_field_t *f, uint32_t *off, int depth);

/* The FSL child field ("item") a fixed_size_list field implies. */
static mw_field_t fsl_item(const mw_field_t *f) {
  assert(f != NULL);
  mw_field_t item = {.name = (char *)"item", .type = f->item_type, .nullable = f->item_nullable,
                     .item_type = MW_T_FLOAT32, .id = -1};
  return item;
}

/* Child Field tables of f (FSL: its item), their offsets left in scratch at
 * *mark. As in arrow-rs, the children are built first, then the parent's
 * type table, then the vector of children (fb_children_end). */
static int fb_children(mw_ipc_writer_t *w, const mw_field_t *f, size_t *mark, int depth) {
  assert(f != NULL);
  assert(mark != NULL);
  size_t n = f->type == MW_T_FSL ? 1 : f->n_children;
  if (scratch_push(w, n * 4, mark) < 0) return -ENOMEM;
  for (size_t i = 0; i < n; i++) {
    mw_field_t item = f->type == MW_T_FSL ? fsl_item(f) : f->children[i];
    uint32_t off;
    int rc = fb_field(w, &item, &off, depth + 1);
    if (rc < 0) return rc;
    scratch_u32(w, *mark)[i] = off;
  }
  return 0;
}

static uint32_t fb_children_end(mw_ipc_writer_t *w, const mw_field_t *f, size_t mark) {
  assert(w != NULL);
  assert(f != NULL);
  size_t n = f->type == MW_T_FSL ? 1 : f->n_children;
  uint32_t v = mw_fbb_vec_offsets(&w->fbb, scratch_u32(w, mark), n);
  w->scratch.len = mark;
  return v;
}

/* The slots of a field-less or parameter type table (open in b), and its
 * type id; -EINVAL for a type the Arrow schema cannot carry. */
static int fb_plain_type(mw_fbb_t *b, const mw_field_t *f, uint8_t *tt) {
  assert(f != NULL);
  assert(tt != NULL);
  switch (f->type) {
    case MW_T_BOOL: *tt = TY_BOOL; break;
    case MW_T_UTF8: *tt = TY_UTF8; break;
    case MW_T_BINARY: *tt = TY_BINARY; break;
    case MW_T_LARGE_UTF8: *tt = TY_LARGE_UTF8; break;
    case MW_T_LARGE_BINARY: *tt = TY_LARGE_BINARY; break;
    case MW_T_FIXED_BINARY:
      mw_fbb_slot_i32(b, 0, f->byte_width, 0);
      *tt = TY_FIXED_BINARY;
      break;
    case MW_T_DATE32: case MW_T_DATE64:
      mw_fbb_slot_i16(b, 0, f->type == MW_T_DATE32 ? DATE_DAY : DATE_MS, DATE_MS);
      *tt = TY_DATE;
      break;
    case MW_T_TIME32: case MW_T_TIME64:
      mw_fbb_slot_i32(b, 1, f->type == MW_T_TIME32 ? 32 : 64, 32);
      mw_fbb_slot_i16(b, 0, f->unit, MW_UNIT_MS);
      *tt = TY_TIME;
      break;
    case MW_T_DECIMAL128:
      mw_fbb_slot_i32(b, 0, f->precision, 0);
      mw_fbb_slot_i32(b, 1, f->scale, 0);
      mw_fbb_slot_i32(b, 2, 128, 128);
      *tt = TY_DECIMAL;
      break;
    default:
      return -EINVAL;
  }
  return 0;
}

/* The type table and children vector of a field, in the order arrow-rs'
 * get_fb_field_type creates them: numbers make the empty children vector
 * first; the field-less, parameter and temporal tables come before it;
 * nested types build their child Fields first. Slots equal to the schema
 * default are omitted (Date.unit MILLISECOND, Time.unit MILLISECOND and
 * bitWidth 32, Decimal.bitWidth 128), and Timestamp always creates its zone
 * string, even an empty one that nothing references. */
static int fb_type(mw_ipc_writer_t *w, const mw_field_t *f, uint8_t *tt, uint32_t *type,
                   uint32_t *children, int depth) {
  assert(depth <= MW_MAX_NESTING);
  mw_fbb_t *b = &w->fbb;
  const mw_type_info_t *ti = mw_field_info(f);
  int rc;
  switch (f->type) {
    case MW_T_INT8: case MW_T_INT16: case MW_T_INT32: case MW_T_INT64:
    case MW_T_UINT8: case MW_T_UINT16: case MW_T_UINT32: case MW_T_UINT64:
      *children = mw_fbb_vec_offsets(b, NULL, 0);
      mw_fbb_table_start(b);
      mw_fbb_slot_u8(b, 1, ti->order == MW_ORDER_SIGNED, 0);
      mw_fbb_slot_i32(b, 0, 8 * ti->width, 0);
      *type = mw_fbb_table_end(b);
      *tt = TY_INT;
      return 0;
    case MW_T_FLOAT16: case MW_T_FLOAT32: case MW_T_FLOAT64:
      *children = mw_fbb_vec_offsets(b, NULL, 0);
      mw_fbb_table_start(b);
      mw_fbb_slot_i16(b, 0, f->type == MW_T_FLOAT16 ? 0 : f->type == MW_T_FLOAT32 ? 1 : 2, 0);
      *type = mw_fbb_table_end(b);
      *tt = TY_FLOAT;
      return 0;
    case MW_T_FSL: case MW_T_LIST: case MW_T_LARGE_LIST: case MW_T_STRUCT: {
      size_t mark;
      if ((rc = fb_children(w, f, &mark, depth)) < 0) return rc;
      mw_fbb_table_start(b);
      if (f->type == MW_T_FSL) mw_fbb_slot_i32(b, 0, f->fsl_dim, 0);
      *type = mw_fbb_table_end(b);
      *children = fb_children_end(w, f, mark);
      *tt = f->type == MW_T_FSL ? TY_FSL : f->type == MW_T_LIST ? TY_LIST
            : f->type == MW_T_LARGE_LIST ? TY_LARGE_LIST : TY_STRUCT;
      return 0;
    }
    case MW_T_TIMESTAMP: {
      uint32_t tz = mw_fbb_string(b, f->tz ? f->tz : "", f->tz ? strlen(f->tz) : 0);
      mw_fbb_table_start(b);
      mw_fbb_slot_i16(b, 0, f->unit, 0);
      if (f->tz) mw_fbb_slot_off(b, 1, tz);
      *tt = TY_TIMESTAMP;
      break;
    }
    default:
      mw_fbb_table_start(b);
      if ((rc = fb_plain_type(b, f, tt)) < 0) return rc;
      break;
  }
  *type = mw_fbb_table_end(b);
  *children = mw_fbb_vec_offsets(b, NULL, 0);
  return 0;
}

static int fb_field(mw_ipc_writer_t *w, const mw_field_t *f, uint32_t *off, int depth) {
  assert(f->name != NULL);
  if (depth > MW_MAX_NESTING) return -EINVAL;
  uint32_t meta = 0, type = 0, children = 0;
  uint8_t tt = 0;
  char pk[16];
  const char *xkey = NULL;
  if (f->pk_position > 0 && mw_kvs_get(&f->meta, MW_IPC_PK_POSITION_KEY) == NULL) {
    snprintf(pk, sizeof pk, "%" PRIu32, f->pk_position);
    xkey = MW_IPC_PK_POSITION_KEY;
  }
  if ((f->meta.n > 0 || xkey) && fb_kvs(w, &f->meta, xkey, pk, &meta) < 0) return -ENOMEM;
  uint32_t name = mw_fbb_string(&w->fbb, f->name, strlen(f->name));
  int rc = fb_type(w, f, &tt, &type, &children, depth);
  if (rc < 0) return rc;
  mw_fbb_t *b = &w->fbb;
  mw_fbb_table_start(b);
  mw_fbb_slot_off(b, 0, name);
  mw_fbb_slot_u8(b, 2, tt, 0);
  mw_fbb_slot_u8(b, 1, f->nullable, 0);
  mw_fbb_slot_off(b, 5, children);
  mw_fbb_slot_off(b, 3, type);
  if (meta) mw_fbb_slot_off(b, 6, meta);
  *off = mw_fbb_table_end(b);
  return 0;
}

uint32_t mw_ipc_fb_message(mw_fbb_t *b, uint8_t hdr_type, uint32_t header, int64_t body_len) {
  mw_fbb_table_start(b);
  mw_fbb_slot_i16(b, 0, META_V5, 0);
  mw_fbb_slot_u8(b, 1, hdr_type, 0);
  mw_fbb_slot_i64(b, 3, body_len, 0);
  mw_fbb_slot_off(b, 2, header);
  return mw_fbb_table_end(b);
}

/* Finish the flatbuffer and append continuation, length, metadata, padding. */
static int emit_metadata(mw_ipc_writer_t *w, uint32_t root, mw_buf_t *out, size_t body_len) {
  assert(w != NULL);
  const uint8_t *p;
  size_t n;
  int rc = mw_fbb_finish(&w->fbb, root, &p, &n);
  if (rc < 0) return rc;
  size_t total = pad64(n + 8);
  if (total - 8 > INT32_MAX) return -EFBIG;
  if (mw_buf_reserve(out, total + body_len) < 0) return -ENOMEM;
  mw_buf_put_u32le(out, 0xFFFFFFFFu);
  mw_buf_put_u32le(out, (uint32_t)(total - 8));
  mw_buf_append(out, p, n);
  return mw_buf_fill(out, 0, total - 8 - n);
}

int mw_ipc_writer_schema_table(mw_ipc_writer_t *w, const mw_schema_t *s, uint32_t *off) {
  assert(w != NULL);
  assert(s != NULL);
  assert(off != NULL);
  mw_fbb_t *b = &w->fbb;
  size_t mark;
  if (scratch_push(w, s->n_fields * 4, &mark) < 0) return -ENOMEM;
  for (size_t i = 0; i < s->n_fields; i++) {
    uint32_t fo;
    int rc = fb_field(w, &s->fields[i], &fo, 0);
    if (rc < 0) return rc;
    scratch_u32(w, mark)[i] = fo;
  }
  uint32_t fields = mw_fbb_vec_offsets(b, scratch_u32(w, mark), s->n_fields), meta = 0;
  w->scratch.len = mark;
  if (s->meta.n > 0 && fb_kvs(w, &s->meta, NULL, NULL, &meta) < 0) return -ENOMEM;
  mw_fbb_table_start(b);
  mw_fbb_slot_off(b, 1, fields);
  if (meta) mw_fbb_slot_off(b, 2, meta);
  *off = mw_fbb_table_end(b);
  return 0;
}

static int encode_schema(mw_ipc_writer_t *w, const mw_schema_t *s, mw_buf_t *out) {
  assert(w != NULL);
  uint32_t schema;
  mw_fbb_reset(&w->fbb);
  int rc = mw_ipc_writer_schema_table(w, s, &schema);
  if (rc < 0) return rc;
  return emit_metadata(w, mw_ipc_fb_message(&w->fbb, HDR_SCHEMA, schema, 0), out, 0);
}

/* One body buffer to write. */
typedef enum src_kind {
  SRC_COPY = 0, /* n bytes at p */
  SRC_ONES,     /* n bytes 0xFF (a validity bitmap without nulls) */
  SRC_WIDEN,    /* n bytes of int64 offsets widened from the int32 ones at p */
} src_kind_t;

typedef struct src_buf {
  const uint8_t *p;
  size_t n;
  src_kind_t kind;
} src_buf_t;

typedef struct enc_batch {
  size_t nodes_mark, bufs_mark, srcs_mark;
  size_t n_nodes, n_bufs, cap_nodes, cap_bufs;
} enc_batch_t;

static int64_t *node_at(mw_ipc_writer_t *w, const enc_batch_t *e, size_t i) {
  assert(w != NULL);
  assert(e != NULL);
  return (int64_t *)(void *)(w->scratch.data + e->nodes_mark) + 2 * i;
}
static int64_t *buf_at(mw_ipc_writer_t *w, const enc_batch_t *e, size_t i) {
  assert(w != NULL);
  assert(e != NULL);
  return (int64_t *)(void *)(w->scratch.data + e->bufs_mark) + 2 * i;
}
static src_buf_t *src_at(mw_ipc_writer_t *w, const enc_batch_t *e, size_t i) {
  assert(w != NULL);
  assert(e != NULL);
  return (src_buf_t *)(void *)(w->scratch.data + e->srcs_mark) + i;
}

static void add_node(mw_ipc_writer_t *w, enc_batch_t *e, int64_t len, int64_t nulls) {
  assert(e->n_nodes < e->cap_nodes);
  int64_t *nd = node_at(w, e, e->n_nodes++);
  nd[0] = len;
  nd[1] = nulls;
}
static void add_src(mw_ipc_writer_t *w, enc_batch_t *e, const uint8_t *p, size_t n, src_kind_t k) {
  assert(e->n_bufs < e->cap_bufs);
  *src_at(w, e, e->n_bufs++) = (src_buf_t){p, n, k};
}

/* Field nodes and buffers of a field's tree (depth-first, as Arrow lists
 * them): FSL adds its child's node and 2 buffers, LIST its offsets and the
 * child tree, STRUCT one tree per child. */
void mw_ipc_count_field(const mw_field_t *f, size_t *nodes, size_t *bufs) {
  assert(f != NULL);
  assert(nodes != NULL);
  assert(bufs != NULL);
  (*nodes)++;
  switch (mw_field_layout(f)) {
    case MW_LAYOUT_VAR: *bufs += 3; return;
    case MW_LAYOUT_FSL: *nodes += 1, *bufs += 3; return;
    case MW_LAYOUT_LIST: *bufs += 2; break;
    case MW_LAYOUT_STRUCT: *bufs += 1; break;
    default: *bufs += 2; return;
  }
  for (uint32_t i = 0; i < f->n_children; i++) mw_ipc_count_field(&f->children[i], nodes, bufs);
}

static int bad_column(mw_err_t *err, const mw_field_t *f, const char *why) {
  assert(f != NULL);
  return mw_err_set(err, -EINVAL, "ipc encode: column %s: %s", f->name, why);
}

/* Offsets of a VAR or LIST column: int32 as they are, or widened. */
static int add_offsets(mw_ipc_writer_t *w, enc_batch_t *e, const mw_field_t *f,
                       const mw_column_t *c, int64_t *end, mw_err_t *err) {
  assert(c != NULL);
  assert(end != NULL);
  int64_t len = c->length;
  if (c->offsets.len < (size_t)(len + 1) * 4) return bad_column(err, f, "short offsets");
  int32_t last;
  memcpy(&last, c->offsets.data + len * 4, 4);
  *end = last;
  bool large = mw_field_info(f)->large;
  add_src(w, e, c->offsets.data, (size_t)(len + 1) * (large ? 8 : 4), large ? SRC_WIDEN : SRC_COPY);
  return 0;
}

static int collect_column(mw_ipc_writer_t *w, enc_batch_t *e, const mw_field_t *f,
                          const mw_column_t *c, int64_t len, int depth, mw_err_t *err) {
  assert(f != NULL);
  if (depth > MW_MAX_NESTING) return bad_column(err, f, "nested too deep");
  if (c->length != len || len < 0 || (c->validity.len && c->validity.len < mw_bitmap_bytes(len)) ||
      c->null_count < 0 || c->null_count > len || (c->null_count && !c->validity.len))
    return bad_column(err, f, "bad length, validity or null count");
  if (c->n_children != f->n_children) return bad_column(err, f, "children do not match the field");
  add_node(w, e, len, c->null_count);
  add_src(w, e, c->validity.len ? c->validity.data : NULL, mw_bitmap_bytes(len),
          c->validity.len ? SRC_COPY : SRC_ONES);
  size_t need;
  int64_t end;
  int rc;
  switch (mw_field_layout(f)) {
    case MW_LAYOUT_BOOL:
      need = mw_bitmap_bytes(len);
      break;
    case MW_LAYOUT_VAR:
      if ((rc = add_offsets(w, e, f, c, &end, err)) < 0) return rc;
      need = (size_t)end;
      break;
    case MW_LAYOUT_LIST:
      if ((rc = add_offsets(w, e, f, c, &end, err)) < 0) return rc;
      return collect_column(w, e, &f->children[0], &c->children[0], end, depth + 1, err);
    case MW_LAYOUT_STRUCT:
      for (uint32_t i = 0; i < f->n_children; i++)
        if ((rc = collect_column(w, e, &f->children[i], &c->children[i], len, depth + 1, err)) < 0)
          return rc;
      return 0;
    case MW_LAYOUT_FSL: {
      int64_t items = len * f->fsl_dim;
      if ((c->item_validity.len && c->item_validity.len < mw_bitmap_bytes(items)) ||
          c->item_null_count < 0 || c->item_null_count > items ||
          (c->item_null_count && !c->item_validity.len))
        return bad_column(err, f, "short item validity");
      add_node(w, e, items, c->item_null_count);
      add_src(w, e, c->item_validity.len ? c->item_validity.data : NULL, mw_bitmap_bytes(items),
              c->item_validity.len ? SRC_COPY : SRC_ONES);
      need = (size_t)items * mw_fsl_item_width(f);
      break;
    }
    default:
      need = (size_t)len * mw_type_width(f);
      break;
  }
  if (c->values.len < need) return bad_column(err, f, "short values buffer");
  add_src(w, e, c->values.data, need, SRC_COPY);
  return 0;
}

/* List nodes and source buffers of one batch, checking buffer sizes. */
static int collect(mw_ipc_writer_t *w, const mw_schema_t *s, const mw_batch_t *bt,
                   enc_batch_t *e, mw_err_t *err) {
  size_t nf = s->n_fields, nodes = 0, bufs = 0;
  for (size_t i = 0; i < nf; i++) mw_ipc_count_field(&s->fields[i], &nodes, &bufs);
  if (scratch_push(w, nodes * 16, &e->nodes_mark) < 0 ||
      scratch_push(w, bufs * 16, &e->bufs_mark) < 0 ||
      scratch_push(w, bufs * sizeof(src_buf_t), &e->srcs_mark) < 0)
    return -ENOMEM;
  e->n_nodes = e->n_bufs = 0;
  e->cap_nodes = nodes, e->cap_bufs = bufs;
  assert(bt->cols != NULL || nf == 0);
  for (size_t i = 0; i < nf; i++) {
    int rc = collect_column(w, e, &s->fields[i], &bt->cols[i], bt->n_rows, 0, err);
    if (rc < 0) return rc;
  }
  assert(e->n_nodes == nodes);
  assert(e->n_bufs == bufs);
  return 0;
}

/* Write a source buffer's n bytes to dst. */
static void src_emit(const src_buf_t *sb, uint8_t *dst) {
  assert(sb != NULL);
  switch (sb->kind) {
    case SRC_COPY: if (sb->n) memcpy(dst, sb->p, sb->n); break;
    case SRC_ONES: memset(dst, 0xFF, sb->n); break;
    case SRC_WIDEN:
      for (size_t i = 0; i < sb->n / 8; i++) {
        int32_t o;
        memcpy(&o, sb->p + 4 * i, 4);
        mw_store_u64le(dst + 8 * i, (uint64_t)(int64_t)o);
      }
      break;
  }
}

/* A contiguous view of a source buffer (ones or widened offsets are built
 * in w->ones). */
static const uint8_t *src_view(mw_ipc_writer_t *w, const src_buf_t *sb) {
  assert(w != NULL);
  assert(sb != NULL);
  if (sb->kind == SRC_COPY) return sb->p;
  mw_buf_reset(&w->ones);
  uint8_t *p = mw_buf_extend(&w->ones, sb->n ? sb->n : 1);
  if (p != NULL) src_emit(sb, p);
  return p;
}

/* Compress every buffer into w->body (arrow-rs compress_to_vec framing). */
static int compress_body(mw_ipc_writer_t *w, enc_batch_t *e, int level) {
  assert(w != NULL);
  assert(e != NULL);
  mw_buf_reset(&w->body);
  if (w->zctx == NULL && (w->zctx = ZSTD_createCCtx()) == NULL) return -ENOMEM;
  for (size_t i = 0; i < e->n_bufs; i++) {
    src_buf_t sb = *src_at(w, e, i);
    size_t start = w->body.len;
    if (sb.n > 0) {
      const uint8_t *p = src_view(w, &sb);
      if (p == NULL) return -ENOMEM;
      size_t bound = ZSTD_compressBound(sb.n);
      if (mw_buf_reserve(&w->body, 8 + bound) < 0) return -ENOMEM;
      mw_buf_put_u64le(&w->body, sb.n);
      size_t z = ZSTD_compressCCtx(w->zctx, w->body.data + w->body.len, bound, p, sb.n, level);
      if (ZSTD_isError(z)) return -EIO;
      if (8 + z > sb.n) {
        w->body.len = start;
        mw_buf_put_u64le(&w->body, UINT64_MAX);
        if (mw_buf_append(&w->body, p, sb.n) < 0) return -ENOMEM;
      } else {
        w->body.len += z;
      }
    }
    int64_t *bd = buf_at(w, e, i);
    bd[0] = (int64_t)start;
    bd[1] = (int64_t)(w->body.len - start);
    if (mw_buf_align(&w->body, MW_IPC_ALIGN_BYTES, 0) < 0) return -ENOMEM;
  }
  return 0;
}

static int encode_batch(mw_ipc_writer_t *w, const mw_schema_t *s, const mw_batch_t *bt,
                        const mw_ipc_opts_t *opts, mw_buf_t *out, mw_err_t *err) {
  size_t mark = w->scratch.len, body_len = 0;
  enc_batch_t e;
  int rc = collect(w, s, bt, &e, err);
  if (rc < 0) goto done;
  bool z = opts && opts->zstd;
  size_t align = opts && opts->body_align_bytes ? opts->body_align_bytes : MW_IPC_ALIGN_BYTES;
  assert(align == 8 || align == 16 || align == 32 || align == 64);
  if (z) {
    if ((rc = compress_body(w, &e, opts->zstd_level)) < 0) goto done;
    body_len = w->body.len;
  } else {
    for (size_t i = 0; i < e.n_bufs; i++) {
      int64_t *bd = buf_at(w, &e, i);
      bd[0] = (int64_t)body_len;
      bd[1] = (int64_t)src_at(w, &e, i)->n;
      body_len += pad_to(src_at(w, &e, i)->n, align);
    }
  }
  mw_fbb_t *b = &w->fbb;
  mw_fbb_reset(b);
  uint32_t comp = 0;
  if (z) {
    mw_fbb_table_start(b);
    mw_fbb_slot_u8(b, 0, CODEC_ZSTD, CODEC_LZ4);
    comp = mw_fbb_table_end(b);
  }
  uint32_t bufs = mw_fbb_vec_structs(b, buf_at(w, &e, 0), e.n_bufs, 16, 8);
  uint32_t nodes = mw_fbb_vec_structs(b, node_at(w, &e, 0), e.n_nodes, 16, 8);
  mw_fbb_table_start(b);
  mw_fbb_slot_i64(b, 0, bt->n_rows, 0);
  mw_fbb_slot_off(b, 1, nodes);
  mw_fbb_slot_off(b, 2, bufs);
  if (comp) mw_fbb_slot_off(b, 3, comp);
  uint32_t rb = mw_fbb_table_end(b);
  if ((rc = emit_metadata(w, mw_ipc_fb_message(b, HDR_BATCH, rb, (int64_t)body_len), out, body_len)) < 0)
    goto done;
  if (z) {
    rc = mw_buf_append(out, w->body.data, w->body.len);
    goto done;
  }
  for (size_t i = 0; i < e.n_bufs; i++) {
    src_buf_t sb = *src_at(w, &e, i);
    size_t padded = pad_to(sb.n, align);
    if ((rc = mw_buf_reserve(out, padded)) < 0) goto done; /* reserved already: no-op */
    uint8_t *dst = out->data + out->len;
    src_emit(&sb, dst);
    memset(dst + sb.n, 0, padded - sb.n);
    out->len += padded;
  }
done:
  w->scratch.len = mark;
  return rc;
}

/* One stream: the schema message, then per item either `batches[i]`
 * encoded or `parts[i]` (its messages as they are, or its batch encoded),
 * then EOS. Exactly one of batches and parts is given. */
static int encode_stream(mw_ipc_writer_t *w, const mw_schema_t *schema,
                         const mw_batch_t *const *batches, const mw_ipc_part_t *parts, size_t n,
                         const mw_ipc_opts_t *opts, mw_buf_t *out, mw_err_t *err) {
  assert(w != NULL);
  assert(schema != NULL);
  assert(out != NULL);
  assert((batches == NULL) != (parts == NULL) || n == 0);
  size_t start = out->len;
  int rc = 0;
  mw_buf_reset(&w->scratch);
  if (schema->n_fields > MW_MAX_FIELDS) {
    rc = mw_err_set(err, -EFBIG, "ipc encode: %zu fields", schema->n_fields);
    goto fail;
  }
  for (size_t i = 0; i < n; i++) {
    const mw_batch_t *b = batches ? batches[i] : parts[i].msgs ? NULL : parts[i].batch;
    if (parts && parts[i].msgs && parts[i].msgs_len % 8 != 0) {
      rc = mw_err_set(err, -EINVAL, "ipc encode: part %zu: messages not 8-byte aligned", i);
      goto fail;
    }
    if (b != NULL && (b->schema == NULL || b->schema->n_fields != schema->n_fields)) {
      rc = mw_err_set(err, -EINVAL, "ipc encode: batch %zu does not match the schema", i);
      goto fail;
    }
    if (b == NULL && (parts == NULL || parts[i].msgs == NULL)) {
      rc = mw_err_set(err, -EINVAL, "ipc encode: part %zu has neither a batch nor messages", i);
      goto fail;
    }
  }
  if ((rc = encode_schema(w, schema, out)) < 0) goto fail;
  for (size_t i = 0; i < n; i++) {
    if (parts && parts[i].msgs) rc = mw_buf_append(out, parts[i].msgs, parts[i].msgs_len);
    else rc = encode_batch(w, schema, batches ? batches[i] : parts[i].batch, opts, out, err);
    if (rc < 0) goto fail;
  }
  if ((rc = mw_buf_put_u64le(out, 0x00000000FFFFFFFFull)) < 0) goto fail;
  assert((out->len - start) % 8 == 0);
  return 0;
fail:
  out->len = start;
  if (rc == -ENOMEM) mw_err_set(err, rc, "ipc encode: out of memory");
  return mw_err_set(err, rc, "ipc encode failed");
}

int mw_ipc_writer_encode(mw_ipc_writer_t *w, const mw_schema_t *schema,
                         const mw_batch_t *const *batches, size_t n_batches,
                         const mw_ipc_opts_t *opts, mw_buf_t *out, mw_err_t *err) {
  assert(batches != NULL || n_batches == 0);
  static const mw_batch_t *const none[1] = {NULL};
  return encode_stream(w, schema, n_batches ? batches : none, NULL, n_batches, opts, out, err);
}

int mw_ipc_writer_encode_parts(mw_ipc_writer_t *w, const mw_schema_t *schema,
                               const mw_ipc_part_t *parts, size_t n_parts,
                               const mw_ipc_opts_t *opts, mw_buf_t *out, mw_err_t *err) {
  assert(parts != NULL || n_parts == 0);
  static const mw_ipc_part_t none[1];
  return encode_stream(w, schema, NULL, n_parts ? parts : none, n_parts, opts, out, err);
}

int mw_ipc_encode(const mw_schema_t *schema, const mw_batch_t *const *batches,
                  size_t n_batches, const mw_ipc_opts_t *opts, mw_buf_t *out, mw_err_t *err) {
  mw_ipc_writer_t w;
  mw_ipc_writer_init(&w);
  int rc = mw_ipc_writer_encode(&w, schema, batches, n_batches, opts, out, err);
  mw_ipc_writer_free(&w);
  return rc;
}
