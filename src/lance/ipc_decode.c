/*
 * ipc_decode.c — Arrow IPC stream decoder (see ipc.h): the bytes of a
 * stream (arrow-rs, pyarrow, apache-arrow JS) into the columnar model of
 * batch.h.
 *
 * A stream is messages, each framed (mw_ipc_frame) as
 *
 *   ff ff ff ff  38 02 00 00   continuation, metadata length 568
 *   10 00 00 00 ...            flatbuffer Message{V4 or V5, header, bodyLength}
 *   ...                        body (RecordBatch, DictionaryBatch)
 *
 * then EOS (ff ff ff ff 00 00 00 00); bytes after EOS are an error. The
 * first message is the Schema; its Field tables become mw_field_t (types
 * checked against what batch.h models, nesting bounded); DictionaryBatch
 * messages fill the dictionaries of dictionary-encoded top-level fields;
 * each RecordBatch becomes an mw_batch_t.
 *
 * Decoding copies each buffer once into the batch (memcpy), or, through
 * mw_ipc_decode_view, keeps it as a view into the input where it can
 * (can_view: uncompressed, 8-aligned; int32 offsets starting at 0), counts nulls
 * with popcount to check null_count, and checks utf8/binary offsets. Every
 * copied byte is charged to a budget (input size, or the zstd limit), so a
 * hostile stream whose buffers overlap cannot make us allocate more than a
 * small multiple of its size. Everything read is untrusted: a bad length or
 * offset is an -EBADMSG naming the byte, never an assert.
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

void mw_ipc_limits_default(mw_ipc_limits_t *lim) {
  assert(lim != NULL);
  lim->max_fields = MW_MAX_FIELDS;
  lim->max_batch_rows = MW_MAX_BATCH_ROWS;
  lim->max_batches = MAX_BATCHES_DEFAULT;
  lim->max_decompressed_bytes = MW_IPC_MAX_DECOMPRESSED_BYTES;
}

static int bad_at(dec_t *d, size_t pos, const char *what, const char *why) {
  assert(d != NULL);
  return mw_err_set(d->err, -EBADMSG, "ipc: byte %zu: %s: %s", pos, what, why);
}

static int take_string(dec_t *d, size_t pos, const char *s, size_t n, char **out,
                       const char *what) {
  assert(d != NULL);
  if (memchr(s, 0, n) != NULL) return bad_at(d, pos, what, "NUL inside a string");
  if (n + 1 > d->str_budget) return bad_at(d, pos, what, "strings exceed the input size");
  d->str_budget -= n + 1;
  *out = strndup(s, n);
  return *out ? 0 : -ENOMEM;
}

/* KeyValue vector at `slot` of table t into kvs (order kept). */
static int read_kvs(dec_t *d, const mw_fbr_t *r, const mw_fbt_t *t, int slot, mw_kvs_t *kvs,
                    const char *what) {
  assert(d != NULL);
  assert(r != NULL);
  size_t start, count;
  int rc = mw_fbr_vector(r, t, slot, 4, MAX_META_ENTRIES, &start, &count, what);
  if (rc <= 0) return rc;
  for (size_t i = 0; i < count; i++) {
    mw_fbt_t kv;
    const char *k = "", *v = "";
    size_t kn = 0, vn = 0;
    if ((rc = mw_fbr_table_at(r, start + 4 * i, &kv, what)) < 0) return rc;
    if ((rc = mw_fbr_string(r, &kv, 0, &k, &kn, what)) < 0) return rc;
    if ((rc = mw_fbr_string(r, &kv, 1, &v, &vn, what)) < 0) return rc;
    if (memchr(k, 0, kn) != NULL) return bad_at(d, r->base + kv.pos, what, "NUL in key");
    if (kn + vn + 2 > d->str_budget)
      return bad_at(d, r->base + kv.pos, what, "metadata exceeds the input size");
    d->str_budget -= kn + vn + 2;
    char key[256];
    char *kp = kn < sizeof key ? key : malloc(kn + 1);
    if (kp == NULL) return -ENOMEM;
    memcpy(kp, k, kn);
    kp[kn] = 0;
    rc = mw_kvs_set(kvs, kp, v, vn);
    if (kp != key) free(kp);
    if (rc < 0) return rc;
  }
  return 0;
}

static int parse_pk_position(dec_t *d, size_t pos, mw_field_t *f) {
  assert(f != NULL);
  const mw_kv_t *kv = mw_kvs_get(&f->meta, MW_IPC_PK_POSITION_KEY);
  if (kv == NULL) return 0;
  uint64_t v;
  if (mw_ipc_parse_u64(kv->value, kv->value_len, &v) < 0 || v == 0 || v > MW_MAX_FIELDS)
    return bad_at(d, pos, f->name, "bad primary-key position metadata");
  f->pk_position = (uint32_t)v;
  return 0;
}

static int read_field(dec_t *d, const mw_fbr_t *r, const mw_fbt_t *ft, mw_field_t *f, int depth);

/* Children of a nested field: each Field table read into a new child. */
static int read_children(dec_t *d, const mw_fbr_t *r, size_t start, size_t count, mw_field_t *f,
                         int depth) {
  assert(r != NULL);
  assert(f != NULL);
  for (size_t i = 0; i < count; i++) {
    mw_fbt_t ct;
    const char *name = "";
    size_t nn = 0;
    uint8_t nullable;
    int rc;
    if ((rc = mw_fbr_table_at(r, start + 4 * i, &ct, f->name)) < 0) return rc;
    if ((rc = mw_fbr_string(r, &ct, 0, &name, &nn, "field name")) < 0) return rc;
    if ((rc = mw_fbr_u8(r, &ct, 1, 0, &nullable, "field nullable")) < 0) return rc;
    char *nm = NULL;
    if ((rc = take_string(d, r->base + ct.pos, name, nn, &nm, "field name")) < 0) return rc;
    rc = mw_field_add_child(f, nn ? nm : "item", MW_T_INT32, nullable != 0);
    free(nm);
    if (rc < 0)
      return rc == -ENOMEM ? rc : bad_at(d, r->base + ct.pos, f->name, "too many children");
    if ((rc = read_field(d, r, &ct, &f->children[rc], depth + 1)) < 0) return rc;
  }
  return 0;
}

/* Field.dictionary (DictionaryEncoding {id: long, indexType: Int, isOrdered,
 * dictionaryKind}) of a top-level field: the field keeps its value type and
 * its record batch columns hold indices, materialised by read_dict_column
 * (apache-arrow's tableFromArrays writes every string column this way). */
static int read_dictionary_encoding(dec_t *d, const mw_fbr_t *r, const mw_fbt_t *de,
                                    mw_field_t *f, int depth) {
  assert(d != NULL);
  assert(r != NULL);
  assert(de != NULL);
  int64_t id;
  mw_fbt_t it;
  int32_t bits;
  uint8_t sgn;
  int16_t kind;
  int rc = mw_fbr_i64(r, de, 0, 0, &id, f->name);
  if (rc < 0 || (rc = mw_fbr_table(r, de, 1, &it, f->name)) < 0) return rc;
  if (rc == 0) return bad_at(d, r->base + de->pos, f->name, "dictionary without an index type");
  if ((rc = mw_fbr_i32(r, &it, 0, 0, &bits, f->name)) < 0 || (rc = mw_fbr_u8(r, &it, 1, 0, &sgn, f->name)) < 0 ||
      (rc = mw_fbr_i16(r, de, 3, 0, &kind, f->name)) < 0)
    return rc;
  if (depth > 0) return mw_err_set(d->err, -ENOTSUP, "ipc: field %s: a dictionary inside a nested field", f->name);
  if (bits != 8 && bits != 16 && bits != 32 && bits != 64)
    return bad_at(d, r->base + it.pos, f->name, "dictionary index of a bad width");
  if (kind != 0) return mw_err_set(d->err, -ENOTSUP, "ipc: field %s: dictionary kind %d", f->name, kind);
  for (size_t i = 0; i < d->n_dicts; i++)
    if (d->dicts[i].id == id) return bad_at(d, r->base + de->pos, f->name, "dictionary id used twice");
  if (d->n_dicts >= MW_IPC_MAX_DICTS)
    return mw_err_set(d->err, -EFBIG, "ipc: more than %d dictionary-encoded fields", MW_IPC_MAX_DICTS);
  struct dict *x = &d->dicts[d->n_dicts++];
  memset(x, 0, sizeof *x);
  x->id = id;
  x->index_width = (uint8_t)(bits / 8);
  x->index_signed = sgn != 0;
  d->pending = x;
  return 0;
}

static int read_type(dec_t *d, const mw_fbr_t *r, const mw_fbt_t *ft, mw_field_t *f, int depth);

/* Int {bitWidth, is_signed} */
static int read_int_type(dec_t *d, const mw_fbr_t *r, const mw_fbt_t *ty, mw_field_t *f) {
  assert(d != NULL);
  assert(f != NULL);
  static const mw_type_t sgn[4] = {MW_T_INT8, MW_T_INT16, MW_T_INT32, MW_T_INT64};
  static const mw_type_t uns[4] = {MW_T_UINT8, MW_T_UINT16, MW_T_UINT32, MW_T_UINT64};
  int32_t i32;
  uint8_t u8;
  int rc;
  if ((rc = mw_fbr_i32(r, ty, 0, 0, &i32, f->name)) < 0) return rc;
  if ((rc = mw_fbr_u8(r, ty, 1, 0, &u8, f->name)) < 0) return rc;
  int k = i32 == 8 ? 0 : i32 == 16 ? 1 : i32 == 32 ? 2 : i32 == 64 ? 3 : -1;
  if (k < 0) return mw_err_set(d->err, -ENOTSUP, "ipc: field %s: %d-bit integers", f->name, i32);
  f->type = u8 ? sgn[k] : uns[k];
  return 0;
}

/* Time {unit, bitWidth}: 32 bits hold s or ms, 64 bits us or ns */
static int read_time_type(dec_t *d, const mw_fbr_t *r, const mw_fbt_t *ty, mw_field_t *f) {
  assert(r != NULL);
  assert(ty != NULL);
  assert(f != NULL);
  int32_t i32;
  int16_t i16;
  int rc;
  if ((rc = mw_fbr_i16(r, ty, 0, MW_UNIT_MS, &i16, f->name)) < 0) return rc;
  if ((rc = mw_fbr_i32(r, ty, 1, 32, &i32, f->name)) < 0) return rc;
  if (!(i32 == 32 && (i16 == MW_UNIT_S || i16 == MW_UNIT_MS)) &&
      !(i32 == 64 && (i16 == MW_UNIT_US || i16 == MW_UNIT_NS)))
    return bad_at(d, r->base + ty->pos, f->name, "time unit does not match its bit width");
  f->type = i32 == 32 ? MW_T_TIME32 : MW_T_TIME64;
  f->unit = (uint8_t)i16;
  return 0;
}

/* Timestamp {unit, timezone} */
static int read_timestamp_type(dec_t *d, const mw_fbr_t *r, const mw_fbt_t *ty, mw_field_t *f) {
  assert(d != NULL);
  assert(r != NULL);
  assert(ty != NULL);
  const char *tz = NULL;
  size_t tzn = 0;
  int16_t i16;
  int rc;
  if ((rc = mw_fbr_i16(r, ty, 0, 0, &i16, f->name)) < 0) return rc;
  if (i16 < 0 || i16 > MW_UNIT_NS) return bad_at(d, r->base + ty->pos, f->name, "bad timestamp unit");
  if ((rc = mw_fbr_string(r, ty, 1, &tz, &tzn, f->name)) < 0) return rc;
  f->type = MW_T_TIMESTAMP;
  f->unit = (uint8_t)i16;
  if (rc == 1 && tzn > 0) {
    if (tzn > MW_MAX_TZ_BYTES) return mw_err_set(d->err, -ENOTSUP, "ipc: field %s: time zone of %zu bytes", f->name, tzn);
    if ((rc = take_string(d, r->base + ty->pos, tz, tzn, &f->tz, "time zone")) < 0) return rc;
  }
  return 0;
}

/* Decimal {precision, scale, bitWidth}: 128 bits only */
static int read_decimal_type(dec_t *d, const mw_fbr_t *r, const mw_fbt_t *ty, mw_field_t *f) {
  assert(d != NULL);
  assert(f != NULL);
  const char *w = f->name;
  int32_t prec, scale, bits;
  int rc;
  if ((rc = mw_fbr_i32(r, ty, 0, 0, &prec, w)) < 0 || (rc = mw_fbr_i32(r, ty, 1, 0, &scale, w)) < 0 ||
      (rc = mw_fbr_i32(r, ty, 2, 128, &bits, w)) < 0)
    return rc;
  if (bits != 128) return mw_err_set(d->err, -ENOTSUP, "ipc: field %s: %d-bit decimals", w, bits);
  if (prec < 1 || prec > MW_MAX_DECIMAL_PRECISION || scale < -prec || scale > prec)
    return mw_err_set(d->err, -ENOTSUP, "ipc: field %s: decimal precision %d scale %d", w, prec, scale);
  f->type = MW_T_DECIMAL128;
  f->precision = (uint8_t)prec;
  f->scale = (int8_t)scale;
  return 0;
}

/* FixedSizeList {listSize} of one number child (the Field table at cstart). */
static int read_fsl_type(dec_t *d, const mw_fbr_t *r, const mw_fbt_t *ft, const mw_fbt_t *ty, size_t cstart,
                         size_t ccount, mw_field_t *f, int depth) {
  assert(depth <= MW_MAX_NESTING);
  const char *w = f->name;
  mw_fbt_t child;
  int32_t dim;
  int rc;
  if ((rc = mw_fbr_i32(r, ty, 0, 0, &dim, w)) < 0) return rc;
  if (dim <= 0) return bad_at(d, r->base + ty->pos, w, "list size <= 0");
  if (dim > MW_MAX_FSL_DIM)
    return mw_err_set(d->err, -ENOTSUP, "ipc: field %s: list size %d", w, dim);
  if (ccount != 1) return bad_at(d, r->base + ft->pos, w, "list without one child");
  if ((rc = mw_fbr_table_at(r, cstart, &child, w)) < 0) return rc;
  mw_field_t item = {.name = (char *)"item", .item_type = MW_T_FLOAT32};
  uint8_t nullable, ctt;
  /* check the child's type id first: only a number child is read, so a
   * list whose child is itself (a cycle) cannot recurse */
  if ((rc = mw_fbr_u8(r, &child, 2, 0, &ctt, w)) < 0) return rc;
  if (ctt != TY_FLOAT && ctt != TY_INT)
    return mw_err_set(d->err, -ENOTSUP, "ipc: field %s: fixed_size_list of Arrow type id %u", w, ctt);
  if ((rc = read_type(d, r, &child, &item, depth + 1)) < 0) return rc;
  if (!mw_type_info(item.type)->fsl_item)
    return mw_err_set(d->err, -ENOTSUP, "ipc: field %s: list of %s", w, mw_type_name(item.type));
  if ((rc = mw_fbr_u8(r, &child, 1, 0, &nullable, w)) < 0) return rc;
  f->type = MW_T_FSL;
  f->item_type = item.type;
  f->fsl_dim = dim;
  f->item_nullable = nullable != 0;
  return 0;
}

/* Read one Field table's type into f (type, parameters, children). */
static int read_type(dec_t *d, const mw_fbr_t *r, const mw_fbt_t *ft, mw_field_t *f, int depth) {
  assert(f != NULL);
  assert(depth >= 0);
  uint8_t tt;
  mw_fbt_t ty;
  size_t cstart = 0, ccount = 0;
  const char *w = f->name;
  int rc = mw_fbr_u8(r, ft, 2, 0, &tt, w);
  if (rc < 0) return rc;
  if (depth > MW_MAX_NESTING)
    return mw_err_set(d->err, -ENOTSUP, "ipc: field %s: nested deeper than %d levels", w, MW_MAX_NESTING);
  if ((rc = mw_fbr_table(r, ft, 4, &ty, w)) < 0) return rc;
  if (rc == 1 && (rc = read_dictionary_encoding(d, r, &ty, f, depth)) < 0) return rc;
  if ((rc = mw_fbr_vector(r, ft, 5, 4, MW_MAX_STRUCT_FIELDS, &cstart, &ccount, w)) < 0) return rc;
  if ((rc = mw_fbr_table(r, ft, 3, &ty, w)) < 0) return rc;
  if (rc == 0) return bad_at(d, r->base + ft->pos, w, "field without a type table");
  bool nested = tt == TY_FSL || tt == TY_LIST || tt == TY_LARGE_LIST || tt == TY_STRUCT;
  if (!nested && ccount != 0) return bad_at(d, r->base + ft->pos, w, "unexpected children");
  int32_t i32;
  int16_t i16;
  switch (tt) {
    case TY_INT: return read_int_type(d, r, &ty, f);
    case TY_FLOAT:
      if ((rc = mw_fbr_i16(r, &ty, 0, 0, &i16, w)) < 0) return rc;
      if (i16 < 0 || i16 > 2) return mw_err_set(d->err, -ENOTSUP, "ipc: field %s: float precision %d", w, i16);
      f->type = i16 == 0 ? MW_T_FLOAT16 : i16 == 1 ? MW_T_FLOAT32 : MW_T_FLOAT64;
      return 0;
    case TY_BOOL: f->type = MW_T_BOOL; return 0;
    case TY_UTF8: f->type = MW_T_UTF8; return 0;
    case TY_BINARY: f->type = MW_T_BINARY; return 0;
    case TY_LARGE_UTF8: f->type = MW_T_LARGE_UTF8; return 0;
    case TY_LARGE_BINARY: f->type = MW_T_LARGE_BINARY; return 0;
    case TY_FIXED_BINARY:
      if ((rc = mw_fbr_i32(r, &ty, 0, 0, &i32, w)) < 0) return rc;
      if (i32 < 1 || i32 > MW_MAX_FIXED_BINARY_BYTES)
        return mw_err_set(d->err, -ENOTSUP, "ipc: field %s: fixed_size_binary of %d bytes", w, i32);
      f->type = MW_T_FIXED_BINARY;
      f->byte_width = i32;
      return 0;
    case TY_DATE:
      if ((rc = mw_fbr_i16(r, &ty, 0, DATE_MS, &i16, w)) < 0) return rc;
      if (i16 != DATE_DAY && i16 != DATE_MS) return bad_at(d, r->base + ty.pos, w, "bad date unit");
      f->type = i16 == DATE_DAY ? MW_T_DATE32 : MW_T_DATE64;
      return 0;
    case TY_TIME: return read_time_type(d, r, &ty, f);
    case TY_TIMESTAMP: return read_timestamp_type(d, r, &ty, f);
    case TY_DECIMAL: return read_decimal_type(d, r, &ty, f);
    case TY_FSL: return read_fsl_type(d, r, ft, &ty, cstart, ccount, f, depth);
    case TY_LIST: case TY_LARGE_LIST: case TY_STRUCT:
      f->type = tt == TY_LIST ? MW_T_LIST : tt == TY_LARGE_LIST ? MW_T_LARGE_LIST : MW_T_STRUCT;
      if (f->type != MW_T_STRUCT && ccount != 1) return bad_at(d, r->base + ft->pos, w, "list without one child");
      if (f->type == MW_T_STRUCT && ccount == 0) return bad_at(d, r->base + ft->pos, w, "struct without fields");
      return read_children(d, r, cstart, ccount, f, depth);
    default:
      return mw_err_set(d->err, -ENOTSUP, "ipc: field %s: Arrow type id %u", w, tt);
  }
}

/* Type, metadata and primary-key position of the Field table ft. */
static int read_field(dec_t *d, const mw_fbr_t *r, const mw_fbt_t *ft, mw_field_t *f, int depth) {
  assert(r != NULL);
  assert(ft != NULL);
  assert(f != NULL);
  int rc = read_type(d, r, ft, f, depth);
  if (rc < 0) return rc;
  if ((rc = read_kvs(d, r, ft, 6, &f->meta, f->name)) < 0) return rc;
  return parse_pk_position(d, r->base + ft->pos, f);
}

static int read_schema(dec_t *d, const mw_fbr_t *r, const mw_fbt_t *st, mw_schema_t *s) {
  assert(d != NULL);
  assert(r != NULL);
  assert(s != NULL);
  int16_t endian;
  size_t start = 0, count = 0;
  int rc = mw_fbr_i16(r, st, 0, 0, &endian, "schema");
  if (rc < 0) return rc;
  if (endian != 0) return mw_err_set(d->err, -ENOTSUP, "ipc: big-endian schema");
  if ((rc = mw_fbr_vector(r, st, 1, 4, d->lim.max_fields, &start, &count, "schema fields")) < 0)
    return rc;
  for (size_t i = 0; i < count; i++) {
    mw_fbt_t ft;
    const char *name = "";
    size_t nn = 0;
    uint8_t nullable;
    if ((rc = mw_fbr_table_at(r, start + 4 * i, &ft, "field")) < 0) return rc;
    if ((rc = mw_fbr_string(r, &ft, 0, &name, &nn, "field name")) < 0) return rc;
    if ((rc = mw_fbr_u8(r, &ft, 1, 0, &nullable, "field nullable")) < 0) return rc;
    char *nm = NULL;
    if ((rc = take_string(d, r->base + ft.pos, name, nn, &nm, "field name")) < 0) return rc;
    rc = mw_schema_add(s, nm, MW_T_INT32, nullable != 0);
    free(nm);
    if (rc < 0) return rc;
    mw_field_t *f = &s->fields[rc];
    size_t fi = (size_t)rc;
    d->pending = NULL;
    if ((rc = read_field(d, r, &ft, f, 0)) < 0) return rc;
    if (d->pending) {
      mw_layout_t l = mw_field_layout(f);
      if (l != MW_LAYOUT_VAR && l != MW_LAYOUT_FIXED)
        return mw_err_set(d->err, -ENOTSUP, "ipc: field %s: a dictionary of %s values", f->name, mw_type_name(f->type));
      d->pending->field = fi;
      d->pending = NULL;
    }
    char why[160];
    if (mw_field_check(f, why, sizeof why) < 0)
      return bad_at(d, r->base + ft.pos, f->name, why);
  }
  return read_kvs(d, r, st, 2, &s->meta, "schema metadata");
}

int mw_ipc_schema_table_decode(const mw_fbr_t *r, const mw_fbt_t *t, const mw_ipc_limits_t *lim,
                               mw_schema_t *out, mw_err_t *err) {
  assert(r != NULL);
  assert(t != NULL);
  assert(out != NULL);
  dec_t d = {.p = r->p, .n = r->n, .err = err, .copy_budget = r->n, .str_budget = r->n};
  if (lim) d.lim = *lim;
  else mw_ipc_limits_default(&d.lim);
  if (d.lim.max_fields > MW_MAX_FIELDS) d.lim.max_fields = MW_MAX_FIELDS;
  mw_schema_init(out);
  int rc = read_schema(&d, r, t, out);
  if (rc < 0) mw_schema_free(out);
  return rc;
}

/* ------------------------------------------------------------ batch body */

static int next_node(dec_t *d, body_t *b, int64_t *len, int64_t *nulls, const char *what) {
  assert(d != NULL);
  assert(b != NULL);
  assert(len != NULL);
  size_t at = b->nodes + 16 * b->next_node;
  if (b->next_node >= b->n_nodes) return bad_at(d, b->r->base, what, "too few field nodes");
  b->next_node++;
  *len = (int64_t)mw_load_u64le(b->r->p + at);
  *nulls = (int64_t)mw_load_u64le(b->r->p + at + 8);
  if (*len < 0 || *len > d->lim.max_batch_rows * (int64_t)MW_MAX_FSL_DIM || *nulls < 0 || *nulls > *len)
    return bad_at(d, b->r->base + at, what, "bad field node length or null count");
  return 0;
}

/* The next body buffer, decompressed if needed into d->tmp[role]. */
static int next_buf(dec_t *d, body_t *b, int role, const uint8_t **p, size_t *n,
                    const char *what) {
  assert(d != NULL);
  assert(n != NULL);
  size_t at = b->bufs + 16 * b->next_buf;
  if (b->next_buf >= b->n_bufs) return bad_at(d, b->r->base, what, "too few buffers");
  b->next_buf++;
  uint64_t off = mw_load_u64le(b->r->p + at), len = mw_load_u64le(b->r->p + at + 8);
  if (off > b->len || len > b->len - off)
    return bad_at(d, b->r->base + at, what, "buffer outside the message body");
  *p = b->p + off;
  *n = (size_t)len;
  if (!b->zstd || len == 0) return 0;
  size_t zpos = b->pos + (size_t)off;
  if (len < 8) return bad_at(d, zpos, what, "compressed buffer shorter than 8 bytes");
  int64_t ulen = (int64_t)mw_load_u64le(*p);
  if (ulen == -1) {
    *p += 8;
    *n -= 8;
    return 0;
  }
  if (ulen < 0 || (uint64_t)ulen > d->zstd_budget)
    return mw_err_set(d->err, ulen < 0 ? -EBADMSG : -EFBIG,
                      "ipc: byte %zu: %s: uncompressed length %" PRId64 " over the limit", zpos,
                      what, ulen);
  unsigned long long fcs = ZSTD_getFrameContentSize(*p + 8, (size_t)len - 8);
  if (fcs == ZSTD_CONTENTSIZE_ERROR || (fcs != ZSTD_CONTENTSIZE_UNKNOWN && fcs != (uint64_t)ulen))
    return bad_at(d, zpos, what, "bad zstd frame header");
  mw_buf_t *t = &d->rd->tmp[role];
  mw_buf_reset(t);
  if (mw_buf_reserve(t, (size_t)ulen ? (size_t)ulen : 1) < 0) return -ENOMEM;
  if (d->rd->dctx == NULL && (d->rd->dctx = ZSTD_createDCtx()) == NULL) return -ENOMEM;
  size_t got = ZSTD_decompressDCtx(d->rd->dctx, t->data, (size_t)ulen, *p + 8, (size_t)len - 8);
  if (ZSTD_isError(got) || got != (size_t)ulen)
    return bad_at(d, zpos, what, "zstd data corrupt or of the wrong length");
  d->zstd_budget -= got;
  t->len = got;
  *p = t->data;
  *n = got;
  return 0;
}

/* A buffer the decoder may keep as a view into the input instead of a copy
 * (mw_ipc_decode_view): uncompressed (a decompressed one lives in scratch),
 * 8-byte aligned in memory (the model reads offsets and values through
 * typed pointers), not empty. */
static bool can_view(const dec_t *d, const body_t *b, const uint8_t *p, size_t n) {
  assert(d != NULL);
  return d->view && !b->zstd && n > 0 && ((uintptr_t)p & 7) == 0;
}

static int take_bytes(dec_t *d, const body_t *b, const uint8_t *p, size_t n, mw_buf_t *dst) {
  if (can_view(d, b, p, n) && dst->len == 0) {
    mw_buf_free(dst);
    mw_buf_view(dst, p, n);
    return 0;
  }
  return mw_buf_append(dst, p, n);
}

static int charge(dec_t *d, body_t *b, size_t n, const char *what) {
  assert(d != NULL);
  assert(b != NULL);
  if (b->zstd) return 0; /* already charged to the zstd budget */
  if (n > d->copy_budget) return bad_at(d, b->pos, what, "buffers overlap beyond the input size");
  d->copy_budget -= n;
  return 0;
}

static int64_t count_zero_bits(const uint8_t *p, int64_t bits) {
  int64_t ones = 0, i = 0, full = bits / 64;
  for (; i < full; i++) {
    uint64_t w;
    memcpy(&w, p + 8 * i, 8);
    ones += __builtin_popcountll(w);
  }
  for (int64_t k = full * 64; k < bits; k++) ones += mw_bit_get(p, k);
  return bits - ones;
}

/* Copy a bitmap of `bits` bits. Bits past the end are kept as written
 * (arrow-rs may leave ones there), so re-encoding gives the same bytes. */
static int take_bits(dec_t *d, body_t *b, const uint8_t *p, size_t n, int64_t bits, mw_buf_t *dst,
                     const char *what) {
  assert(b != NULL);
  size_t need = mw_bitmap_bytes(bits);
  if (n < need) return bad_at(d, b->pos, what, "bitmap buffer too short");
  int rc = charge(d, b, need, what);
  if (rc < 0 || (rc = take_bytes(d, b, p, need, dst)) < 0) return rc;
  return 0;
}

/* A validity buffer into dst. Nulls in a non-nullable field are refused
 * unless `mask` (the validity of the struct above, NULL: none) is null at
 * each of them: Arrow allows those (a null struct's members, which
 * LanceDB's writer makes null too, issue 26); then dst holds the bits for
 * the members below and 1 is returned (the caller drops them). */
static int take_validity(dec_t *d, body_t *b, int64_t len, int64_t nulls, bool nullable,
                         const mw_buf_t *mask, mw_buf_t *dst, const char *what) {
  const uint8_t *p;
  size_t n;
  int rc = next_buf(d, b, 0, &p, &n, what);
  if (rc < 0 || nulls == 0) return rc;
  if (!nullable && (mask == NULL || mask->len == 0)) return bad_at(d, b->pos, what, "nulls in a non-nullable field");
  if ((rc = take_bits(d, b, p, n, len, dst, what)) < 0) return rc;
  if (count_zero_bits(dst->data, len) != nulls)
    return bad_at(d, b->pos, what, "null_count does not match the validity bitmap");
  if (nullable) return 0;
  assert(mask->len >= mw_bitmap_bytes(len));
  for (int64_t i = 0; i < len; i++)
    if (!mw_bit_get(dst->data, i) && mw_bit_get(mask->data, i))
      return bad_at(d, b->pos, what, "nulls in a non-nullable field");
  return 1;
}

static int take_fixed(dec_t *d, body_t *b, size_t need, mw_buf_t *dst, const char *what) {
  assert(b != NULL);
  const uint8_t *p;
  size_t n;
  int rc = next_buf(d, b, 1, &p, &n, what);
  if (rc < 0) return rc;
  if (n < need) return bad_at(d, b->pos, what, "values buffer too short");
  if ((rc = charge(d, b, need, what)) < 0) return rc;
  return take_bytes(d, b, p, need, dst);
}

/* int32 offsets that start at 0, kept as a view once checked (monotone,
 * non-negative: the model's form already). */
static int view_offsets(dec_t *d, body_t *b, int64_t len, const uint8_t *op, mw_column_t *c,
                        int64_t *end, const char *what) {
  const int32_t *o = (const int32_t *)(const void *)op;
  bool bad = false;
  for (int64_t i = 1; i <= len; i++) bad |= o[i] < o[i - 1];
  if (bad) return bad_at(d, b->pos, what, "offsets not monotone or a span over 2 GiB");
  mw_buf_free(&c->offsets);
  mw_buf_view(&c->offsets, op, (size_t)(len + 1) * 4);
  *end = o[len];
  assert(o[0] == 0);
  assert(*end >= 0);
  return 0;
}

/* The offsets buffer of a VAR or LIST column of len rows: int32, or int64
 * for large types. Checked (monotone, non-negative, every span inside
 * int32) and stored rebased to 0 as int32 in c->offsets; *base and *end are
 * the first and last offsets as written. */
static int take_offsets(dec_t *d, body_t *b, int64_t len, bool large, mw_column_t *c,
                        int64_t *base, int64_t *end, const char *what) {
  const uint8_t *op;
  size_t on, ow = large ? 8 : 4, need = (size_t)(len + 1) * ow;
  int rc = next_buf(d, b, 1, &op, &on, what);
  if (rc < 0) return rc;
  c->offsets.len = 0;
  *base = *end = 0;
  if (len == 0 && on == 0) return mw_buf_put_u32le(&c->offsets, 0);
  if (on < need) return bad_at(d, b->pos, what, "offsets buffer too short");
  if ((rc = charge(d, b, need, what)) < 0) return rc;
  if (!large && can_view(d, b, op, need) && mw_load_u32le(op) == 0)
    return view_offsets(d, b, len, op, c, end, what);
  int32_t *o = mw_buf_extend(&c->offsets, (size_t)(len + 1) * 4);
  if (o == NULL) return -ENOMEM;
  int64_t first = large ? (int64_t)mw_load_u64le(op) : (int32_t)mw_load_u32le(op), prev = first;
  if (first < 0) return bad_at(d, b->pos, what, "negative offset");
  bool bad = false;
  for (int64_t i = 0; i <= len; i++) {
    int64_t v = large ? (int64_t)mw_load_u64le(op + 8 * i) : (int32_t)mw_load_u32le(op + 4 * i);
    bad |= v < prev || v - first > INT32_MAX;
    o[i] = (int32_t)(v - first);
    prev = v;
  }
  if (bad) return bad_at(d, b->pos, what, "offsets not monotone or a span over 2 GiB");
  *base = first;
  *end = prev;
  assert(o[0] == 0);
  assert(c->offsets.len == (size_t)(len + 1) * 4);
  return 0;
}

static int take_varlen(dec_t *d, body_t *b, int64_t len, bool large, mw_column_t *c,
                       const char *what) {
  assert(b != NULL);
  assert(c != NULL);
  int64_t base, end;
  const uint8_t *vp;
  size_t vn;
  int rc = take_offsets(d, b, len, large, c, &base, &end, what);
  if (rc < 0 || (rc = next_buf(d, b, 2, &vp, &vn, what)) < 0) return rc;
  if ((uint64_t)end > vn) return bad_at(d, b->pos, what, "offsets past the data");
  size_t dn = (size_t)(end - base);
  if ((rc = charge(d, b, dn, what)) < 0) return rc;
  return take_bytes(d, b, vp + base, dn, &c->values);
}

/* apache-arrow for JavaScript (18.1.0 seen) leaves a fixed_size_list's child
 * short when the last slots are null: its builder appends no child values
 * for trailing nulls, so the child holds 2392 floats for 300 slots of 8 with
 * slot 299 null. The Arrow spec wants length*size; the missing values belong
 * to null slots and are never read. Such a child is accepted when every slot
 * it does not cover is null, and padded (zeros, null items). */
static bool fsl_short_child_ok(const mw_column_t *c, int64_t len, int64_t clen, int64_t dim) {
  if (clen > len * dim || clen % dim != 0) return false;
  if (clen == len * dim) return true;
  if (c->null_count == 0 || c->validity.len == 0) return false;
  for (int64_t k = clen / dim; k < len; k++)
    if (mw_bit_get(c->validity.data, k)) return false;
  return true;
}

static int fsl_pad_child(mw_column_t *c, int64_t have, int64_t want, size_t item_width) {
  assert(have < want);
  if (mw_buf_own(&c->item_validity) < 0) return -ENOMEM; /* written in place */
  if (c->item_validity.len > 0) { /* items [have, want) null */
    size_t bytes = (size_t)(want + 7) / 8;
    uint8_t last = (uint8_t)(have % 8 ? (1u << (have % 8)) - 1 : 0xff);
    if (have % 8) c->item_validity.data[have / 8] &= last;
    c->item_validity.len = (size_t)(have + 7) / 8;
    if (mw_buf_fill(&c->item_validity, 0, bytes - c->item_validity.len) < 0) return -ENOMEM;
    c->item_null_count += want - have;
  }
  return mw_buf_fill(&c->values, 0, (size_t)(want - have) * item_width);
}

static int read_column(dec_t *d, body_t *b, const mw_field_t *f, int64_t rows, bool exact,
                       const mw_buf_t *mask, mw_column_t *c, int depth);

/* Keep items [base, end) of a list's child (arrow writers may leave the
 * child longer than its offsets say, or start the offsets past 0). */
static int slice_child(mw_column_t *c, const mw_field_t *f, int64_t base, int64_t end) {
  assert(c != NULL);
  mw_column_t tmp;
  int rc = mw_column_init(&tmp, f);
  if (rc == 0) rc = mw_column_append_range(&tmp, c, f, base, end - base);
  if (rc < 0) {
    mw_column_free(&tmp);
    return rc;
  }
  mw_column_free(c);
  *c = tmp;
  return 0;
}

/* The buffers after a column's validity: its values, offsets, children
 * (`mask`: the validity its struct members' nulls must sit under). */
static int read_values(dec_t *d, body_t *b, const mw_field_t *f, int64_t len, const mw_buf_t *mask,
                       mw_column_t *c, int depth) {
  assert(b != NULL);
  assert(f != NULL);
  assert(c != NULL);
  const char *w = f->name;
  int rc;
  switch (mw_field_layout(f)) {
    case MW_LAYOUT_BOOL: {
      const uint8_t *p;
      size_t n;
      if ((rc = next_buf(d, b, 1, &p, &n, w)) < 0) return rc;
      return take_bits(d, b, p, n, len, &c->values, w);
    }
    case MW_LAYOUT_VAR:
      return take_varlen(d, b, len, mw_field_info(f)->large, c, w);
    case MW_LAYOUT_LIST: {
      int64_t base, end;
      if ((rc = take_offsets(d, b, len, mw_field_info(f)->large, c, &base, &end, w)) < 0) return rc;
      mw_column_t *ch = &c->children[0];
      if ((rc = read_column(d, b, &f->children[0], end, false, NULL, ch, depth + 1)) < 0) return rc;
      return base != 0 || ch->length != end ? slice_child(ch, &f->children[0], base, end) : 0;
    }
    case MW_LAYOUT_STRUCT:
      for (uint32_t i = 0; i < f->n_children; i++)
        if ((rc = read_column(d, b, &f->children[i], len, true, mask, &c->children[i], depth + 1)) < 0)
          return rc;
      return 0;
    case MW_LAYOUT_FSL: {
      int64_t clen, cnulls;
      size_t iw = mw_fsl_item_width(f);
      if ((rc = next_node(d, b, &clen, &cnulls, w)) < 0) return rc;
      if (!fsl_short_child_ok(c, len, clen, f->fsl_dim))
        return bad_at(d, b->r->base, w, "list child length is not length*size");
      c->item_null_count = cnulls;
      if ((rc = take_validity(d, b, clen, cnulls, f->item_nullable, NULL, &c->item_validity, w)) < 0)
        return rc;
      if ((rc = take_fixed(d, b, (size_t)clen * iw, &c->values, w)) < 0) return rc;
      return clen < len * f->fsl_dim ? fsl_pad_child(c, clen, len * f->fsl_dim, iw) : 0;
    }
    default:
      return take_fixed(d, b, (size_t)len * mw_type_width(f), &c->values, w);
  }
}

/* One column (and its children) of `rows` rows, or at least `rows` when
 * not exact (a list's child, sliced by the caller). A non-nullable member
 * whose nulls sit under its struct's (`mask`) is read as valid. */
static int read_column(dec_t *d, body_t *b, const mw_field_t *f, int64_t rows, bool exact,
                       const mw_buf_t *mask, mw_column_t *c, int depth) {
  assert(b != NULL);
  assert(f != NULL);
  assert(c != NULL);
  int64_t len, nulls;
  const char *w = f->name;
  if (depth > MW_MAX_NESTING) return bad_at(d, b->r->base, w, "nested too deep");
  int rc = next_node(d, b, &len, &nulls, w);
  if (rc < 0) return rc;
  if (exact ? len != rows : len < rows)
    return bad_at(d, b->r->base, w, "field node length differs from its parent's");
  c->length = len;
  c->null_count = nulls;
  if ((rc = take_validity(d, b, len, nulls, f->nullable, mask, &c->validity, w)) < 0) return rc;
  bool masked = rc == 1;
  rc = read_values(d, b, f, len, c->validity.len ? &c->validity : mask, c, depth);
  if (masked) { /* valid as the field says; its struct is null there */
    c->null_count = 0;
    mw_buf_free(&c->validity);
  }
  return rc;
}

static struct dict *dict_of(dec_t *d, size_t field) {
  assert(d != NULL);
  for (size_t i = 0; i < d->n_dicts; i++)
    if (d->dicts[i].field == field) return &d->dicts[i];
  return NULL;
}

static void dicts_free(dec_t *d) {
  assert(d != NULL);
  for (size_t i = 0; i < d->n_dicts; i++) {
    mw_column_free(&d->dicts[i].values);
    mw_schema_free(&d->dicts[i].vs);
  }
  d->n_dicts = 0;
}

/* A dictionary-encoded column: its node, validity and indices, each index
 * replaced by its dictionary value (bounded by dict_budget). */
static int read_dict_column(dec_t *d, body_t *b, struct dict *x, const mw_field_t *f, int64_t rows,
                            mw_column_t *c) {
  assert(d != NULL);
  assert(b != NULL);
  assert(f != NULL);
  int64_t len, nulls;
  const char *w = f->name;
  mw_buf_t bits = MW_BUF_INIT;
  const uint8_t *p;
  size_t n;
  int rc = next_node(d, b, &len, &nulls, w);
  if (rc < 0) return rc;
  if (len != rows) return bad_at(d, b->r->base, w, "field node length differs from the batch length");
  if ((rc = take_validity(d, b, len, nulls, f->nullable, NULL, &bits, w)) < 0) goto done;
  if ((rc = next_buf(d, b, 1, &p, &n, w)) < 0) goto done;
  if (n / x->index_width < (size_t)len) {
    rc = bad_at(d, b->pos, w, "dictionary indices buffer too short");
    goto done;
  }
  if (!x->have && len > nulls) {
    rc = bad_at(d, b->pos, w, "indices before their dictionary batch");
    goto done;
  }
  for (int64_t i = 0; i < len && rc == 0; i++) {
    if (bits.len && !mw_bit_get(bits.data, i)) {
      rc = mw_column_append_null(c, f);
      continue;
    }
    uint64_t u = 0;
    for (unsigned k = 0; k < x->index_width; k++) u |= (uint64_t)p[(size_t)i * x->index_width + k] << (8 * k);
    int64_t idx = (int64_t)u;
    if (x->index_signed && x->index_width < 8 && (u >> (8 * x->index_width - 1)) & 1)
      idx = (int64_t)(u | ~((UINT64_C(1) << (8 * x->index_width)) - 1));
    if (idx < 0 || idx >= x->values.length) {
      rc = bad_at(d, b->pos, w, "dictionary index out of range");
      break;
    }
    size_t vb = mw_field_layout(f) == MW_LAYOUT_VAR ? 0 : mw_type_width(f);
    if (vb == 0) mw_column_bytes(&x->values, idx, &vb);
    if (vb + 4 > d->dict_budget) {
      rc = mw_err_set(d->err, -EFBIG, "ipc: field %s: dictionary values exceed %zu bytes", w,
                      d->lim.max_decompressed_bytes);
      break;
    }
    d->dict_budget -= vb + 4;
    rc = mw_column_append_range(c, &x->values, &x->vs.fields[0], idx, 1);
  }
done:
  mw_buf_free(&bits);
  return rc;
}

static int read_batch(dec_t *d, const mw_fbr_t *r, const mw_fbt_t *bt, body_t *b,
                      const mw_schema_t *s, mw_batch_t *out, bool reuse) {
  int64_t rows;
  mw_fbt_t comp;
  size_t want_nodes = 0, want_bufs = 0;
  for (size_t i = 0; i < s->n_fields; i++) {
    if (s == &d->rd->stream.schema && dict_of(d, i)) want_nodes += 1, want_bufs += 2; /* indices */
    else mw_ipc_count_field(&s->fields[i], &want_nodes, &want_bufs);
  }
  int rc = mw_fbr_i64(r, bt, 0, 0, &rows, "record batch length");
  if (rc < 0) return rc;
  if (rows < 0) return bad_at(d, r->base + bt->pos, "record batch", "negative length");
  if (rows > d->lim.max_batch_rows)
    return mw_err_set(d->err, -EFBIG, "ipc: byte %zu: batch of %" PRId64 " rows over the limit",
                      r->base + bt->pos, rows);
  b->r = r;
  b->n_nodes = b->n_bufs = 0;
  if ((rc = mw_fbr_vector(r, bt, 1, 16, want_nodes, &b->nodes, &b->n_nodes, "nodes")) < 0 ||
      (rc = mw_fbr_vector(r, bt, 2, 16, want_bufs, &b->bufs, &b->n_bufs, "buffers")) < 0)
    return rc;
  if (b->n_nodes != want_nodes || b->n_bufs != want_bufs)
    return bad_at(d, r->base + bt->pos, "record batch", "node or buffer count does not match the schema");
  b->zstd = false;
  if ((rc = mw_fbr_table(r, bt, 3, &comp, "compression")) < 0) return rc;
  if (rc == 1) {
    uint8_t codec, method;
    if ((rc = mw_fbr_u8(r, &comp, 0, 0, &codec, "compression")) < 0 ||
        (rc = mw_fbr_u8(r, &comp, 1, 0, &method, "compression")) < 0)
      return rc;
    if (codec != CODEC_ZSTD || method != 0)
      return mw_err_set(d->err, -ENOTSUP, "ipc: compression codec %u method %u", codec, method);
    b->zstd = true;
  }
  b->next_node = b->next_buf = 0;
  if (reuse) mw_batch_reset(out);
  else if ((rc = mw_batch_init(out, s)) < 0) return rc;
  out->n_rows = rows;
  for (size_t i = 0; i < s->n_fields; i++) {
    struct dict *x = s == &d->rd->stream.schema ? dict_of(d, i) : NULL;
    rc = x ? read_dict_column(d, b, x, &s->fields[i], rows, &out->cols[i])
           : read_column(d, b, &s->fields[i], rows, true, NULL, &out->cols[i], 0);
    if (rc < 0) goto fail;
  }
  assert(b->next_node == b->n_nodes);
  assert(b->next_buf == b->n_bufs);
  return 0;
fail:
  mw_batch_free(out);
  return rc == -ENOMEM ? mw_err_set(d->err, rc, "ipc: out of memory") : rc;
}

/* Frame one message at *pos. Returns 1 (message), 0 (EOS) or -errno. */
int mw_ipc_frame(dec_t *d, size_t *pos, mw_fbr_t *r, mw_fbt_t *msg, uint8_t *ht,
                 mw_fbt_t *hdr, body_t *b) {
  size_t at = *pos;
  if (d->n - at < 8)
    return mw_err_set(d->err, -EBADMSG, "ipc: byte %zu: %s", at,
                      d->n == at ? "stream ends without the EOS marker" : "truncated message prefix");
  if (mw_load_u32le(d->p + at) != 0xFFFFFFFFu)
    return mw_err_set(d->err, -EBADMSG, "ipc: byte %zu: expected continuation marker ffffffff", at);
  int32_t mlen = (int32_t)mw_load_u32le(d->p + at + 4);
  if (mlen == 0) {
    *pos = at + 8;
    return 0;
  }
  if (mlen < 0 || (size_t)mlen > d->n - at - 8)
    return mw_err_set(d->err, -EBADMSG, "ipc: byte %zu: metadata length %d past the end", at + 4, mlen);
  *r = (mw_fbr_t){d->p + at + 8, (size_t)mlen, at + 8, d->err};
  int16_t ver;
  int64_t body_len;
  int rc = mw_fbr_root(r, msg, "message");
  if (rc < 0 || (rc = mw_fbr_i16(r, msg, 0, 0, &ver, "message version")) < 0 ||
      (rc = mw_fbr_u8(r, msg, 1, 0, ht, "message header type")) < 0 ||
      (rc = mw_fbr_i64(r, msg, 3, 0, &body_len, "message body length")) < 0)
    return rc;
  assert(r->n == (size_t)mlen);
  if (ver != META_V4 && ver != META_V5)
    return mw_err_set(d->err, -ENOTSUP, "ipc: byte %zu: metadata version %d", at + 8, ver);
  size_t body_at = at + 8 + (size_t)mlen;
  if (body_len < 0 || (uint64_t)body_len > d->n - body_at)
    return mw_err_set(d->err, -EBADMSG, "ipc: byte %zu: body length %" PRId64 " past the end",
                      at + 8, body_len);
  if ((rc = mw_fbr_table(r, msg, 2, hdr, "message header")) < 0) return rc;
  if (rc == 0) return mw_err_set(d->err, -EBADMSG, "ipc: byte %zu: message without a header", at + 8);
  assert(body_at + (size_t)body_len <= d->n);
  b->p = d->p + body_at;
  b->len = (size_t)body_len;
  b->pos = body_at;
  *pos = body_at + (size_t)body_len;
  return 1;
}

/* A DictionaryBatch {id, data: RecordBatch of one column, isDelta}: the
 * values of a dictionary, replaced or (delta) extended. */
static int read_dict_batch(dec_t *d, const mw_fbr_t *r, const mw_fbt_t *hdr, body_t *b, size_t at) {
  assert(d != NULL);
  int64_t id;
  uint8_t delta;
  mw_fbt_t data;
  int rc = mw_fbr_i64(r, hdr, 0, 0, &id, "dictionary batch");
  if (rc < 0 || (rc = mw_fbr_u8(r, hdr, 2, 0, &delta, "dictionary batch")) < 0 ||
      (rc = mw_fbr_table(r, hdr, 1, &data, "dictionary batch")) < 0)
    return rc;
  if (rc == 0) return mw_err_set(d->err, -EBADMSG, "ipc: byte %zu: dictionary batch without data", at);
  struct dict *x = NULL;
  for (size_t i = 0; i < d->n_dicts; i++)
    if (d->dicts[i].id == id) x = &d->dicts[i];
  if (x == NULL) return mw_err_set(d->err, -EBADMSG, "ipc: byte %zu: dictionary batch for unknown id %" PRId64, at, id);
  const mw_field_t *f = &d->rd->stream.schema.fields[x->field];
  if (x->vs.n_fields == 0) {
    int k = mw_schema_add(&x->vs, "values", f->type, true);
    if (k < 0) return k;
    mw_field_t *v = &x->vs.fields[0];
    v->byte_width = f->byte_width, v->unit = f->unit, v->precision = f->precision, v->scale = f->scale;
    if (f->tz && (v->tz = strdup(f->tz)) == NULL) return -ENOMEM;
    if ((rc = mw_column_init(&x->values, v)) < 0) return rc;
  }
  mw_batch_t vb;
  if ((rc = read_batch(d, r, &data, b, &x->vs, &vb, false)) < 0) return rc;
  if (!delta) mw_column_reset(&x->values);
  rc = mw_column_append_range(&x->values, &vb.cols[0], &x->vs.fields[0], 0, vb.n_rows);
  mw_batch_free(&vb);
  x->have = true;
  return rc;
}

/* Decode the next batch into slot n_batches, reusing an initialised slot's
 * memory when there is one. */
static int push_batch(dec_t *d, mw_ipc_reader_t *rd, const mw_fbr_t *r, const mw_fbt_t *hdr,
                      body_t *b) {
  assert(d != NULL);
  assert(rd != NULL);
  mw_ipc_stream_t *s = &rd->stream;
  if (s->n_batches >= d->lim.max_batches)
    return mw_err_set(d->err, -EFBIG, "ipc: more than %zu batches", d->lim.max_batches);
  if (s->n_batches == rd->batches_alloc) {
    size_t nc = rd->batches_alloc ? 2 * rd->batches_alloc : 4;
    mw_batch_t *nb = realloc(s->batches, nc * sizeof *nb);
    if (nb == NULL) return -ENOMEM;
    s->batches = nb;
    rd->batches_alloc = nc;
  }
  bool reuse = s->n_batches < rd->batches_init;
  int rc = read_batch(d, r, hdr, b, &s->schema, &s->batches[s->n_batches], reuse);
  if (rc < 0) return rc;
  s->n_batches++;
  if (s->n_batches > rd->batches_init) rd->batches_init = s->n_batches;
  return 0;
}

void mw_ipc_reader_init(mw_ipc_reader_t *rd) {
  assert(rd != NULL);
  memset(rd, 0, sizeof *rd);
  mw_schema_init(&rd->stream.schema);
}

/* Free every initialised batch (they borrow the current schema). */
static void reader_drop_batches(mw_ipc_reader_t *rd) {
  assert(rd != NULL);
  for (size_t i = 0; i < rd->batches_init; i++) mw_batch_free(&rd->stream.batches[i]);
  rd->batches_init = 0;
  rd->stream.n_batches = 0;
}

void mw_ipc_reader_free(mw_ipc_reader_t *rd) {
  assert(rd != NULL);
  reader_drop_batches(rd);
  free(rd->stream.batches);
  mw_schema_free(&rd->stream.schema);
  for (int i = 0; i < 3; i++) mw_buf_free(&rd->tmp[i]);
  ZSTD_freeDCtx(rd->dctx);
  mw_ipc_reader_init(rd);
}

/* Install a freshly decoded schema; keep the batch memory when the columns
 * have the same shape, so a warm reader decodes without page faults. */
static void reader_set_schema(mw_ipc_reader_t *rd, mw_schema_t *ns) {
  assert(rd != NULL);
  assert(ns != NULL);
  if (!mw_schema_equal(&rd->stream.schema, ns)) reader_drop_batches(rd);
  rd->stream.n_batches = 0;
  mw_schema_free(&rd->stream.schema);
  rd->stream.schema = *ns; /* same address: the kept batches still point at it */
  mw_schema_init(ns);
}

static int reader_decode(mw_ipc_reader_t *rd, const uint8_t *p, size_t n,
                         const mw_ipc_limits_t *lim, bool view, mw_err_t *err) {
  assert(rd != NULL);
  assert(p != NULL || n == 0);
  dec_t d = {.p = p, .n = n, .err = err, .copy_budget = n, .str_budget = n, .rd = rd, .view = view};
  if (lim) d.lim = *lim;
  else mw_ipc_limits_default(&d.lim);
  if (d.lim.max_fields > MW_MAX_FIELDS) d.lim.max_fields = MW_MAX_FIELDS;
  if (d.lim.max_batch_rows > MW_MAX_BATCH_ROWS) d.lim.max_batch_rows = MW_MAX_BATCH_ROWS;
  d.zstd_budget = d.dict_budget = d.lim.max_decompressed_bytes;
  size_t pos = 0;
  mw_schema_t ns;
  mw_fbr_t r;
  mw_fbt_t msg, hdr;
  uint8_t ht;
  body_t b;
  mw_schema_init(&ns);
  rd->stream.n_batches = 0;
  int rc = mw_ipc_frame(&d, &pos, &r, &msg, &ht, &hdr, &b);
  if (rc == 0) rc = mw_err_set(err, -EBADMSG, "ipc: byte 0: stream has no schema message");
  if (rc < 0) goto fail;
  if (ht != HDR_SCHEMA) {
    rc = mw_err_set(err, -EBADMSG, "ipc: byte 0: first message is type %u, not a schema", ht);
    goto fail;
  }
  if ((rc = read_schema(&d, &r, &hdr, &ns)) < 0) goto fail;
  reader_set_schema(rd, &ns);
  for (;;) {
    size_t at = pos;
    if ((rc = mw_ipc_frame(&d, &pos, &r, &msg, &ht, &hdr, &b)) < 0) goto fail;
    if (rc == 0) break;
    if (ht == HDR_DICT) {
      if ((rc = read_dict_batch(&d, &r, &hdr, &b, at)) < 0) goto fail;
      continue;
    }
    if (ht != HDR_BATCH) {
      rc = mw_err_set(err, -EBADMSG, "ipc: byte %zu: unexpected message type %u", at, ht);
      goto fail;
    }
    if ((rc = push_batch(&d, rd, &r, &hdr, &b)) < 0) goto fail;
  }
  if (pos != n) {
    rc = mw_err_set(err, -EBADMSG, "ipc: byte %zu: %zu bytes after the EOS marker", pos, n - pos);
    goto fail;
  }
  rd->stream.n_dict_fields = d.n_dicts;
  dicts_free(&d);
  return 0;
fail:
  if (rc == -ENOMEM) mw_err_set(err, rc, "ipc: out of memory");
  dicts_free(&d);
  mw_schema_free(&ns);
  reader_drop_batches(rd);
  mw_schema_free(&rd->stream.schema);
  return rc;
}

int mw_ipc_reader_decode(mw_ipc_reader_t *rd, const uint8_t *p, size_t n,
                         const mw_ipc_limits_t *lim, mw_err_t *err) {
  return reader_decode(rd, p, n, lim, false, err);
}

/* A whole stream into *out through a one-shot reader (views: see
 * mw_ipc_decode_view). */
static int decode_stream(const uint8_t *p, size_t n, const mw_ipc_limits_t *lim, bool view,
                         mw_ipc_stream_t *out, mw_err_t *err) {
  assert(out != NULL);
  mw_ipc_reader_t rd;
  mw_ipc_reader_init(&rd);
  memset(out, 0, sizeof *out);
  int rc = reader_decode(&rd, p, n, lim, view, err);
  if (rc == 0) {
    /* move the stream out; its batches must point at the moved schema */
    *out = rd.stream;
    for (size_t i = 0; i < out->n_batches; i++) out->batches[i].schema = &out->schema;
    memset(&rd.stream, 0, sizeof rd.stream); /* forget the moved stream */
    mw_schema_init(&rd.stream.schema);
    rd.batches_init = rd.batches_alloc = 0;
  }
  mw_ipc_reader_free(&rd);
  return rc;
}

int mw_ipc_decode(const uint8_t *p, size_t n, const mw_ipc_limits_t *lim,
                  mw_ipc_stream_t *out, mw_err_t *err) {
  return decode_stream(p, n, lim, false, out, err);
}

int mw_ipc_decode_view(mw_blob_t *blob, const mw_ipc_limits_t *lim, mw_ipc_stream_t *out,
                       mw_err_t *err) {
  assert(blob != NULL);
  assert(out != NULL);
  int rc = decode_stream(mw_blob_data(blob), mw_blob_len(blob), lim, true, out, err);
  for (size_t i = 0; rc == 0 && i < out->n_batches; i++)
    if (mw_batch_view_bytes(&out->batches[i]) > 0) rc = mw_batch_adopt(&out->batches[i], blob);
  if (rc < 0) mw_ipc_stream_free(out);
  return rc;
}

void mw_ipc_stream_free(mw_ipc_stream_t *s) {
  if (s == NULL) return;
  for (size_t i = 0; i < s->n_batches; i++) mw_batch_free(&s->batches[i]);
  free(s->batches);
  mw_schema_free(&s->schema);
  memset(s, 0, sizeof *s);
}
