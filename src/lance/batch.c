/*
 * batch.c — fields, schemas, metadata lists and record batches (see batch.h).
 *
 * Builders grow Arrow buffers one row at a time. The validity bitmap is only
 * materialised when the first null arrives (then back-filled with ones), so a
 * column without nulls never pays for one, and encoders that must write an
 * all-ones bitmap (arrow-rs does) synthesise it.
 *
 * Nested columns recurse: a LIST row is its items appended to children[0]
 * and then an offset (mw_column_list_end); a STRUCT row is one value per
 * child and then a validity bit (mw_column_struct_end). Example, a column
 * `tags: list<utf8>` after the rows ["a","bc"], null, []:
 *
 *   tags      length 3, validity 0b101, offsets 0 2 2 2
 *   item      length 2, offsets 0 1 3, values "abc"
 *
 * Every walk over a tree (init, free, reset, copy, equality, validate,
 * append_range, truncate) is bounded by MW_MAX_NESTING, which
 * mw_field_check enforces on every field a decoder builds.
 */
#include "lance/batch.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/utf8.h"

/* ------------------------------------------------------------------ fields */

size_t mw_fsl_item_width(const mw_field_t *f) {
  assert(f->type == MW_T_FSL);
  return mw_type_info(f->item_type)->width;
}

size_t mw_type_width(const mw_field_t *f) {
  const mw_type_info_t *ti = mw_type_info(f->type);
  switch (ti->layout) {
    case MW_LAYOUT_FIXED:
      return f->type == MW_T_FIXED_BINARY ? (size_t)f->byte_width : ti->width;
    case MW_LAYOUT_FSL:
      return mw_type_info(f->item_type)->width * (size_t)f->fsl_dim;
    default:
      return 0;
  }
}

static void field_init(mw_field_t *f, mw_type_t type, bool nullable) {
  memset(f, 0, sizeof *f);
  f->type = type;
  f->nullable = nullable;
  f->item_nullable = true;
  f->item_type = MW_T_FLOAT32;
  f->unit = type == MW_T_TIME64 || type == MW_T_TIMESTAMP ? MW_UNIT_US : MW_UNIT_S;
  f->id = -1;
}

static void field_free(mw_field_t *f) {
  free(f->name);
  free(f->tz);
  for (uint32_t i = 0; i < f->n_children; i++) field_free(&f->children[i]);
  free(f->children);
  mw_kvs_free(&f->meta);
  memset(f, 0, sizeof *f);
}

void mw_field_free(mw_field_t *f) {
  if (f != NULL) field_free(f);
}

int mw_field_add_child(mw_field_t *parent, const char *name, mw_type_t type, bool nullable) {
  assert(parent != NULL);
  assert(name != NULL);
  mw_layout_t l = mw_field_layout(parent);
  if (l != MW_LAYOUT_LIST && l != MW_LAYOUT_STRUCT) return -EINVAL;
  if ((l == MW_LAYOUT_LIST && parent->n_children >= 1) ||
      parent->n_children >= MW_MAX_STRUCT_FIELDS)
    return -EFBIG;
  mw_field_t *c = realloc(parent->children, (parent->n_children + 1) * sizeof *c);
  if (c == NULL) return -ENOMEM;
  parent->children = c;
  mw_field_t *f = &c[parent->n_children];
  field_init(f, type, nullable);
  if ((f->name = strdup(name)) == NULL) return -ENOMEM;
  return (int)parent->n_children++;
}

static int field_copy(mw_field_t *d, const mw_field_t *s) {
  *d = *s;
  d->name = NULL, d->tz = NULL, d->children = NULL, d->n_children = 0;
  d->meta = (mw_kvs_t){0};
  if ((d->name = strdup(s->name)) == NULL) return -ENOMEM;
  if (s->tz && (d->tz = strdup(s->tz)) == NULL) return -ENOMEM;
  if (mw_kvs_copy(&d->meta, &s->meta) < 0) return -ENOMEM;
  if (s->n_children) {
    if ((d->children = calloc(s->n_children, sizeof *d->children)) == NULL) return -ENOMEM;
    for (uint32_t i = 0; i < s->n_children; i++) {
      d->n_children++;
      if (field_copy(&d->children[i], &s->children[i]) < 0) return -ENOMEM;
    }
  }
  assert(d->n_children == s->n_children);
  return 0;
}

size_t mw_field_count(const mw_field_t *f) {
  size_t n = 1;
  for (uint32_t i = 0; i < f->n_children; i++) n += mw_field_count(&f->children[i]);
  return n;
}

#define WHY(...) (snprintf(why, why_len, __VA_ARGS__), -EINVAL)

static int field_check(const mw_field_t *f, int depth, char *why, size_t why_len) {
  const mw_type_info_t *ti = mw_type_info(f->type);
  const char *n = f->name ? f->name : "?";
  if (ti->layout == 0) return WHY("field '%s': unknown type %d", n, (int)f->type);
  if (depth > MW_MAX_NESTING) return WHY("field '%s': nested deeper than %d levels", n, MW_MAX_NESTING);
  switch (f->type) {
    case MW_T_FSL:
      if (f->fsl_dim < 1 || f->fsl_dim > MW_MAX_FSL_DIM)
        return WHY("field '%s': list size %d not in 1..%d", n, f->fsl_dim, MW_MAX_FSL_DIM);
      if (!mw_type_valid(f->item_type) || !mw_type_info(f->item_type)->fsl_item)
        return WHY("field '%s': fixed_size_list of %s is not supported", n, mw_type_name(f->item_type));
      break;
    case MW_T_FIXED_BINARY:
      if (f->byte_width < 1 || f->byte_width > MW_MAX_FIXED_BINARY_BYTES)
        return WHY("field '%s': byte width %d not in 1..%d", n, f->byte_width, MW_MAX_FIXED_BINARY_BYTES);
      break;
    case MW_T_TIMESTAMP:
      if (f->unit > MW_UNIT_NS) return WHY("field '%s': bad time unit %u", n, f->unit);
      if (f->tz && (f->tz[0] == 0 || strlen(f->tz) > MW_MAX_TZ_BYTES))
        return WHY("field '%s': time zone empty or longer than %d bytes", n, MW_MAX_TZ_BYTES);
      break;
    case MW_T_TIME32:
      if (f->unit != MW_UNIT_S && f->unit != MW_UNIT_MS)
        return WHY("field '%s': time32 takes the unit s or ms", n);
      break;
    case MW_T_TIME64:
      if (f->unit != MW_UNIT_US && f->unit != MW_UNIT_NS)
        return WHY("field '%s': time64 takes the unit us or ns", n);
      break;
    case MW_T_DECIMAL128:
      if (f->precision < 1 || f->precision > MW_MAX_DECIMAL_PRECISION)
        return WHY("field '%s': decimal precision %u not in 1..%d", n, f->precision, MW_MAX_DECIMAL_PRECISION);
      if (f->scale > (int)f->precision || f->scale < -(int)f->precision)
        return WHY("field '%s': decimal scale %d outside -%u..%u", n, f->scale, f->precision, f->precision);
      break;
    default:
      break;
  }
  if (ti->layout == MW_LAYOUT_LIST && f->n_children != 1)
    return WHY("field '%s': a list has one child, not %u", n, f->n_children);
  if (ti->layout == MW_LAYOUT_STRUCT && (f->n_children < 1 || f->n_children > MW_MAX_STRUCT_FIELDS))
    return WHY("field '%s': a struct has 1..%d fields, not %u", n, MW_MAX_STRUCT_FIELDS, f->n_children);
  if (ti->layout != MW_LAYOUT_LIST && ti->layout != MW_LAYOUT_STRUCT && f->n_children != 0)
    return WHY("field '%s': %s has no children", n, ti->name);
  for (uint32_t i = 0; i < f->n_children; i++) {
    const mw_field_t *c = &f->children[i];
    if (c->name == NULL || c->name[0] == 0) return WHY("field '%s': child %u has no name", n, i);
    for (uint32_t j = 0; ti->layout == MW_LAYOUT_STRUCT && j < i; j++)
      if (strcmp(f->children[j].name, c->name) == 0)
        return WHY("field '%s': duplicate struct field '%s'", n, c->name);
    int rc = field_check(c, depth + 1, why, why_len);
    if (rc < 0) return rc;
  }
  return 0;
}

int mw_field_check(const mw_field_t *f, char *why, size_t why_len) {
  assert(f != NULL);
  assert(why != NULL);
  assert(why_len > 0);
  why[0] = 0;
  return field_check(f, 0, why, why_len);
}

static bool tz_equal(const char *a, const char *b) {
  return (a == NULL && b == NULL) || (a && b && strcmp(a, b) == 0);
}

static bool type_equal(const mw_field_t *a, const mw_field_t *b, bool strict) {
  if (a->type != b->type || a->n_children != b->n_children) return false;
  switch (a->type) {
    case MW_T_FSL:
      if (a->fsl_dim != b->fsl_dim || a->item_type != b->item_type) return false;
      break;
    case MW_T_FIXED_BINARY: if (a->byte_width != b->byte_width) return false; break;
    case MW_T_TIMESTAMP: if (a->unit != b->unit || !tz_equal(a->tz, b->tz)) return false; break;
    case MW_T_TIME32: case MW_T_TIME64: if (a->unit != b->unit) return false; break;
    case MW_T_DECIMAL128:
      if (a->precision != b->precision || a->scale != b->scale) return false;
      break;
    default: break;
  }
  for (uint32_t i = 0; i < a->n_children; i++) {
    const mw_field_t *x = &a->children[i], *y = &b->children[i];
    if ((a->type == MW_T_STRUCT || strict) && strcmp(x->name, y->name) != 0) return false;
    if (strict && x->nullable != y->nullable) return false;
    if (!type_equal(x, y, strict)) return false;
  }
  return true;
}

bool mw_field_type_equal(const mw_field_t *a, const mw_field_t *b) {
  assert(a != NULL);
  assert(b != NULL);
  return type_equal(a, b, false);
}

/* snprintf into out + *at, keeping *at <= len - 1. */
static void put(char *out, size_t len, size_t *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char *out, size_t len, size_t *at, const char *fmt, ...) {
  if (*at + 1 >= len) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(out + *at, len - *at, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  *at += (size_t)n < len - *at ? (size_t)n : len - *at - 1;
}

static void type_text(const mw_field_t *f, char *out, size_t len, size_t *at) {
  const char *name = mw_type_name(f->type);
  switch (f->type) {
    case MW_T_FSL:
      put(out, len, at, "fixed_size_list<%s, %d>", mw_type_name(f->item_type), f->fsl_dim);
      return;
    case MW_T_FIXED_BINARY: put(out, len, at, "%s<%d>", name, f->byte_width); return;
    case MW_T_TIMESTAMP:
      put(out, len, at, "timestamp<%s%s%s>", mw_unit_name(f->unit) ? mw_unit_name(f->unit) : "?",
          f->tz ? ", " : "", f->tz ? f->tz : "");
      return;
    case MW_T_TIME32: case MW_T_TIME64:
      put(out, len, at, "%s<%s>", name, mw_unit_name(f->unit) ? mw_unit_name(f->unit) : "?");
      return;
    case MW_T_DECIMAL128: put(out, len, at, "decimal128<%u, %d>", f->precision, f->scale); return;
    case MW_T_LIST: case MW_T_LARGE_LIST: case MW_T_STRUCT:
      put(out, len, at, "%s<", name);
      for (uint32_t i = 0; i < f->n_children; i++) {
        const mw_field_t *c = &f->children[i];
        if (f->type == MW_T_STRUCT) put(out, len, at, "%s%s: ", i ? ", " : "", c->name);
        type_text(c, out, len, at);
        if (!c->nullable) put(out, len, at, " not null");
      }
      put(out, len, at, ">");
      return;
    default: put(out, len, at, "%s", name); return;
  }
}

const char *mw_field_type_text(const mw_field_t *f, char *out, size_t out_len) {
  assert(f != NULL);
  assert(out != NULL);
  assert(out_len >= 8);
  size_t at = 0;
  out[0] = 0;
  type_text(f, out, out_len, &at);
  if (at + 1 >= out_len) memcpy(out + out_len - 4, "...", 4);
  assert(strlen(out) < out_len);
  return out;
}

/* ---------------------------------------------------------------- metadata */

int mw_kvs_set(mw_kvs_t *kvs, const char *key, const void *value, size_t value_len) {
  assert(kvs != NULL);
  assert(key != NULL);
  uint8_t *v = malloc(value_len + 1);
  if (v == NULL) return -ENOMEM;
  if (value_len > 0) memcpy(v, value, value_len);
  v[value_len] = 0;
  for (size_t i = 0; i < kvs->n; i++) {
    if (strcmp(kvs->items[i].key, key) == 0) {
      free(kvs->items[i].value);
      kvs->items[i].value = v;
      kvs->items[i].value_len = value_len;
      return 0;
    }
  }
  char *k = strdup(key);
  mw_kv_t *items = realloc(kvs->items, (kvs->n + 1) * sizeof *items);
  if (k == NULL || items == NULL) {
    free(k);
    free(v);
    if (items != NULL) kvs->items = items;
    return -ENOMEM;
  }
  kvs->items = items;
  kvs->items[kvs->n++] = (mw_kv_t){k, v, value_len};
  return 0;
}

const mw_kv_t *mw_kvs_get(const mw_kvs_t *kvs, const char *key) {
  for (size_t i = 0; i < kvs->n; i++)
    if (strcmp(kvs->items[i].key, key) == 0) return &kvs->items[i];
  return NULL;
}

bool mw_kvs_remove(mw_kvs_t *kvs, const char *key) {
  for (size_t i = 0; i < kvs->n; i++) {
    if (strcmp(kvs->items[i].key, key) != 0) continue;
    free(kvs->items[i].key);
    free(kvs->items[i].value);
    memmove(&kvs->items[i], &kvs->items[i + 1], (kvs->n - i - 1) * sizeof *kvs->items);
    kvs->n--;
    return true;
  }
  return false;
}

void mw_kvs_free(mw_kvs_t *kvs) {
  if (kvs == NULL) return;
  for (size_t i = 0; i < kvs->n; i++) {
    free(kvs->items[i].key);
    free(kvs->items[i].value);
  }
  free(kvs->items);
  kvs->items = NULL;
  kvs->n = 0;
}

int mw_kvs_copy(mw_kvs_t *dst, const mw_kvs_t *src) {
  assert(dst != src);
  for (size_t i = 0; i < src->n; i++) {
    int rc = mw_kvs_set(dst, src->items[i].key, src->items[i].value, src->items[i].value_len);
    if (rc < 0) return rc;
  }
  return 0;
}

/* ----------------------------------------------------------------- schemas */

void mw_schema_init(mw_schema_t *s) { memset(s, 0, sizeof *s); }

void mw_schema_free(mw_schema_t *s) {
  if (s == NULL) return;
  for (size_t i = 0; i < s->n_fields; i++) field_free(&s->fields[i]);
  free(s->fields);
  mw_kvs_free(&s->meta);
  mw_schema_init(s);
}

int mw_schema_add(mw_schema_t *s, const char *name, mw_type_t type, bool nullable) {
  assert(s != NULL);
  assert(name != NULL);
  if (s->n_fields >= MW_MAX_FIELDS) return -EFBIG;
  mw_field_t *fields = realloc(s->fields, (s->n_fields + 1) * sizeof *fields);
  if (fields == NULL) return -ENOMEM;
  s->fields = fields;
  mw_field_t *f = &s->fields[s->n_fields];
  field_init(f, type, nullable);
  f->name = strdup(name);
  if (f->name == NULL) return -ENOMEM;
  return (int)s->n_fields++;
}

int mw_schema_copy(mw_schema_t *dst, const mw_schema_t *src) {
  mw_schema_init(dst);
  if (src->n_fields && (dst->fields = calloc(src->n_fields, sizeof *dst->fields)) == NULL)
    return -ENOMEM;
  for (size_t i = 0; i < src->n_fields; i++) {
    dst->n_fields++;
    if (field_copy(&dst->fields[i], &src->fields[i]) < 0) goto fail;
  }
  if (mw_kvs_copy(&dst->meta, &src->meta) < 0) goto fail;
  assert(dst->n_fields == src->n_fields);
  return 0;
fail:
  mw_schema_free(dst);
  return -ENOMEM;
}

int mw_schema_find(const mw_schema_t *s, const char *name) {
  for (size_t i = 0; i < s->n_fields; i++)
    if (strcmp(s->fields[i].name, name) == 0) return (int)i;
  return -ENOENT;
}

bool mw_schema_equal(const mw_schema_t *a, const mw_schema_t *b) {
  if (a->n_fields != b->n_fields) return false;
  for (size_t i = 0; i < a->n_fields; i++) {
    const mw_field_t *x = &a->fields[i], *y = &b->fields[i];
    if (strcmp(x->name, y->name) != 0 || x->nullable != y->nullable || !type_equal(x, y, true))
      return false;
  }
  return true;
}

/* ----------------------------------------------------------------- columns */

int mw_column_init(mw_column_t *c, const mw_field_t *f) {
  assert(c != NULL);
  assert(f != NULL);
  memset(c, 0, sizeof *c);
  mw_layout_t l = mw_field_layout(f);
  if ((l == MW_LAYOUT_VAR || l == MW_LAYOUT_LIST) && mw_buf_fill(&c->offsets, 0, 4) < 0)
    return -ENOMEM;
  if (f->n_children == 0) return 0;
  if ((c->children = calloc(f->n_children, sizeof *c->children)) == NULL) goto nomem;
  for (uint32_t i = 0; i < f->n_children; i++) {
    c->n_children++;
    if (mw_column_init(&c->children[i], &f->children[i]) < 0) goto nomem;
  }
  assert(c->n_children == f->n_children);
  return 0;
nomem:
  mw_column_free(c);
  return -ENOMEM;
}

void mw_column_free(mw_column_t *c) {
  if (c == NULL) return;
  mw_buf_free(&c->validity);
  mw_buf_free(&c->values);
  mw_buf_free(&c->offsets);
  mw_buf_free(&c->item_validity);
  for (uint32_t i = 0; i < c->n_children; i++) mw_column_free(&c->children[i]);
  free(c->children);
  memset(c, 0, sizeof *c);
}

void mw_column_reset(mw_column_t *c) {
  c->length = c->null_count = c->item_null_count = 0;
  mw_buf_reset(&c->validity);
  mw_buf_reset(&c->values);
  mw_buf_reset(&c->item_validity);
  if (mw_buf_is_view(&c->offsets)) { /* a leading 0 offset of our own */
    mw_buf_reset(&c->offsets);
    (void)mw_buf_put_u32le(&c->offsets, 0); /* on ENOMEM an empty buffer, as after free */
  }
  c->offsets.len = c->offsets.len ? 4 : 0; /* keep the leading 0 offset */
  if (c->offsets.len) memset(c->offsets.data, 0, 4);
  for (uint32_t i = 0; i < c->n_children; i++) mw_column_reset(&c->children[i]);
}

uint64_t mw_column_mem_bytes(const mw_column_t *c) {
  uint64_t n = c->validity.len + c->values.len + c->offsets.len + c->item_validity.len;
  for (uint32_t i = 0; i < c->n_children; i++) n += mw_column_mem_bytes(&c->children[i]);
  return n;
}

/* ----------------------------------------------------------------- batches */

int mw_batch_init(mw_batch_t *b, const mw_schema_t *schema) {
  assert(b != NULL);
  assert(schema != NULL);
  b->schema = schema;
  b->n_rows = 0;
  b->backing = NULL;
  mw_buf_init(&b->wal_ipc);
  b->wal_ipc_head = 0;
  b->cols = calloc(schema->n_fields ? schema->n_fields : 1, sizeof *b->cols);
  if (b->cols == NULL) return -ENOMEM;
  for (size_t i = 0; i < schema->n_fields; i++) {
    if (mw_column_init(&b->cols[i], &schema->fields[i]) < 0) {
      mw_batch_free(b);
      return -ENOMEM;
    }
  }
  return 0;
}

void mw_batch_free(mw_batch_t *b) {
  if (b == NULL || b->cols == NULL) return;
  mw_buf_free(&b->wal_ipc);
  b->wal_ipc_head = 0;
  for (size_t i = 0; i < b->schema->n_fields; i++) mw_column_free(&b->cols[i]);
  free(b->cols);
  b->cols = NULL;
  b->n_rows = 0;
  mw_blob_unref(b->backing); /* after the columns: nothing views it now */
  b->backing = NULL;
}

void mw_batch_reset(mw_batch_t *b) {
  mw_buf_reset(&b->wal_ipc);
  b->wal_ipc_head = 0;
  for (size_t i = 0; i < b->schema->n_fields; i++) mw_column_reset(&b->cols[i]);
  b->n_rows = 0;
  mw_blob_unref(b->backing); /* the reset columns view nothing */
  b->backing = NULL;
}

int mw_batch_adopt(mw_batch_t *b, mw_blob_t *blob) {
  assert(b != NULL);
  if (blob == NULL || b->backing == blob) return 0;
  if (b->backing != NULL) return -EINVAL;
  b->backing = mw_blob_ref(blob);
  assert(mw_blob_refs(blob) >= 2);
  return 0;
}

static int column_own(mw_column_t *c) {
  int rc = 0;
  if (rc == 0) rc = mw_buf_own(&c->validity);
  if (rc == 0) rc = mw_buf_own(&c->values);
  if (rc == 0) rc = mw_buf_own(&c->offsets);
  if (rc == 0) rc = mw_buf_own(&c->item_validity);
  for (uint32_t i = 0; i < c->n_children && rc == 0; i++) rc = column_own(&c->children[i]);
  return rc;
}

int mw_batch_own(mw_batch_t *b) {
  assert(b != NULL);
  if (b->backing == NULL) return 0;
  for (size_t i = 0; i < b->schema->n_fields; i++) {
    int rc = column_own(&b->cols[i]);
    if (rc < 0) return rc; /* some views copied, the rest still backed */
  }
  mw_blob_unref(b->backing);
  b->backing = NULL;
  assert(mw_batch_view_bytes(b) == 0);
  return 0;
}

static uint64_t column_view_bytes(const mw_column_t *c) {
  const mw_buf_t *bufs[4] = {&c->validity, &c->values, &c->offsets, &c->item_validity};
  uint64_t n = 0;
  for (size_t i = 0; i < 4; i++) n += mw_buf_is_view(bufs[i]) ? bufs[i]->len : 0;
  for (uint32_t i = 0; i < c->n_children; i++) n += column_view_bytes(&c->children[i]);
  return n;
}

uint64_t mw_batch_view_bytes(const mw_batch_t *b) {
  uint64_t n = 0;
  for (size_t i = 0; i < b->schema->n_fields; i++) n += column_view_bytes(&b->cols[i]);
  return n;
}

/* Grow each buffer of dst (and of its children) once, to its length plus
 * the sources' (srcs[i] is the same column of source i): the appends that
 * follow then never double a buffer. A bitmap is reserved only when some
 * side has one; a few bytes of rounding per source may stay unused. */
static int column_reserve_total(mw_column_t *dst, const mw_column_t *const *srcs, size_t n) {
  size_t values = 0, offsets = 0, items = 0;
  int64_t rows = dst->length;
  bool nulls = dst->validity.len > 0;
  for (size_t i = 0; i < n; i++) {
    values += srcs[i]->values.len;
    offsets += srcs[i]->offsets.len;
    items += srcs[i]->item_validity.len;
    rows += srcs[i]->length;
    nulls |= srcs[i]->validity.len > 0;
    assert(srcs[i]->n_children == dst->n_children);
  }
  if (mw_buf_reserve_exact(&dst->values, values) < 0) return -ENOMEM;
  if (offsets > 0 && mw_buf_reserve_exact(&dst->offsets, offsets) < 0) return -ENOMEM;
  if (items > 0 && mw_buf_reserve_exact(&dst->item_validity, items + n) < 0) return -ENOMEM;
  size_t bitmap = (size_t)(rows + 7) / 8;
  if (nulls && bitmap > dst->validity.len &&
      mw_buf_reserve_exact(&dst->validity, bitmap - dst->validity.len) < 0)
    return -ENOMEM;
  if (dst->n_children == 0) return 0;
  const mw_column_t **kids = malloc(n * sizeof *kids);
  if (kids == NULL) return -ENOMEM;
  int rc = 0;
  for (uint32_t k = 0; k < dst->n_children && rc == 0; k++) {
    for (size_t i = 0; i < n; i++) kids[i] = &srcs[i]->children[k];
    rc = column_reserve_total(&dst->children[k], kids, n);
  }
  free(kids);
  return rc;
}

int mw_batch_concat(mw_batch_t *dst, const mw_batch_t *srcs, size_t n) {
  assert(dst != NULL);
  assert(srcs != NULL || n == 0);
  const int64_t before = dst->n_rows;
  mw_buf_reset(&dst->wal_ipc);
  dst->wal_ipc_head = 0;
  if (n == 0) return 0;
  const mw_column_t **cols = malloc(n * sizeof *cols);
  if (cols == NULL) return -ENOMEM;
  int rc = 0;
  size_t f = 0;
  for (; f < dst->schema->n_fields && rc == 0; f++) {
    for (size_t i = 0; i < n; i++) {
      assert(srcs[i].schema->n_fields == dst->schema->n_fields);
      cols[i] = &srcs[i].cols[f];
    }
    rc = column_reserve_total(&dst->cols[f], cols, n);
    for (size_t i = 0; i < n && rc == 0; i++)
      rc = mw_column_append_range(&dst->cols[f], cols[i], &dst->schema->fields[f], 0, srcs[i].n_rows);
  }
  free(cols);
  if (rc < 0) { /* every column back to `before` rows, the failed one too */
    for (size_t k = 0; k < f; k++) mw_column_truncate(&dst->cols[k], &dst->schema->fields[k], before);
    return rc;
  }
  for (size_t i = 0; i < n; i++) dst->n_rows += srcs[i].n_rows;
  assert(dst->schema->n_fields == 0 || dst->cols[0].length == dst->n_rows);
  return 0;
}

int mw_batch_append(mw_batch_t *dst, const mw_batch_t *src) { return mw_batch_concat(dst, src, 1); }

static int bitmap_len_ok(const mw_buf_t *bm, int64_t bits) {
  return bm->len == 0 || bm->len == (size_t)((bits + 7) / 8);
}

static int column_validate(const mw_column_t *c, const mw_field_t *f) {
  if (c->length < 0 || !bitmap_len_ok(&c->validity, c->length)) return -EINVAL;
  if (c->n_children != f->n_children) return -EINVAL;
  int64_t nulls = 0;
  if (c->validity.len)
    for (int64_t r = 0; r < c->length; r++) nulls += !mw_bit_get(c->validity.data, r);
  if (nulls != c->null_count || (!f->nullable && nulls != 0)) return -EINVAL;
  switch (mw_field_layout(f)) {
    case MW_LAYOUT_BOOL:
      if (c->values.len != (size_t)((c->length + 7) / 8)) return -EINVAL;
      break;
    case MW_LAYOUT_VAR:
    case MW_LAYOUT_LIST: {
      if (c->offsets.len != (size_t)(c->length + 1) * 4) return -EINVAL;
      const int32_t *off = (const int32_t *)(const void *)c->offsets.data;
      if (off[0] != 0) return -EINVAL;
      for (int64_t r = 0; r < c->length; r++)
        if (off[r + 1] < off[r]) return -EINVAL;
      int64_t end = mw_field_layout(f) == MW_LAYOUT_VAR ? (int64_t)c->values.len
                                                         : c->children[0].length;
      if (off[c->length] != end) return -EINVAL;
      break;
    }
    case MW_LAYOUT_STRUCT:
      for (uint32_t i = 0; i < c->n_children; i++)
        if (c->children[i].length != c->length) return -EINVAL;
      break;
    case MW_LAYOUT_FSL: {
      if (c->values.len != (size_t)c->length * mw_type_width(f)) return -EINVAL;
      int64_t items = c->length * f->fsl_dim, inulls = 0;
      if (!bitmap_len_ok(&c->item_validity, items)) return -EINVAL;
      if (c->item_validity.len)
        for (int64_t k = 0; k < items; k++) inulls += !mw_bit_get(c->item_validity.data, k);
      if (inulls != c->item_null_count) return -EINVAL;
      break;
    }
    default:
      if (c->values.len != (size_t)c->length * mw_type_width(f)) return -EINVAL;
      break;
  }
  for (uint32_t i = 0; i < c->n_children; i++) {
    int rc = column_validate(&c->children[i], &f->children[i]);
    if (rc < 0) return rc;
  }
  return 0;
}

int mw_column_validate(const mw_column_t *c, const mw_field_t *f) {
  assert(c != NULL);
  assert(f != NULL);
  return column_validate(c, f);
}

int mw_batch_validate(const mw_batch_t *b) {
  for (size_t i = 0; i < b->schema->n_fields; i++) {
    if (b->cols[i].length != b->n_rows) return -EINVAL;
    int rc = column_validate(&b->cols[i], &b->schema->fields[i]);
    if (rc < 0) return rc;
  }
  return 0;
}

/* ----------------------------------------------------------------- utf8 */

/* Row of LIST column c holding item k: the last r with off[r] <= k (offsets
 * are monotone and cover every item, so off[r] <= k < off[r + 1]). */
static int64_t list_row_of(const mw_column_t *c, int64_t k) {
  const int32_t *off = (const int32_t *)(const void *)c->offsets.data;
  int64_t lo = 0, hi = c->length; /* invariant: off[lo] <= k < off[hi] */
  assert(off[0] <= k);
  assert(k < off[c->length]);
  while (hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2;
    if (off[mid] <= k) lo = mid;
    else hi = mid;
  }
  assert(off[lo] <= k);
  assert(k < off[lo + 1]);
  return lo;
}

/* utf8_find at `depth`: path[0..at) names c; on a find, *row is c's row. */
static bool utf8_find(const mw_column_t *c, const mw_field_t *f, int depth, int64_t *row,
                      char *path, size_t path_len, size_t at) {
  assert(depth <= MW_MAX_NESTING);
  assert(c->n_children == f->n_children);
  if (f->type == MW_T_UTF8 || f->type == MW_T_LARGE_UTF8) {
    for (int64_t r = 0; r < c->length; r++) {
      size_t n;
      const uint8_t *p = mw_column_bytes(c, r, &n);
      if (mw_column_valid(c, r) && !mw_utf8_valid(p, n)) {
        *row = r;
        return true;
      }
    }
    return false;
  }
  mw_layout_t layout = mw_field_layout(f);
  for (uint32_t i = 0; i < c->n_children; i++) {
    size_t end = at;
    if (layout == MW_LAYOUT_LIST) put(path, path_len, &end, "[]");
    else put(path, path_len, &end, ".%s", f->children[i].name);
    int64_t k;
    if (utf8_find(&c->children[i], &f->children[i], depth + 1, &k, path, path_len, end)) {
      *row = layout == MW_LAYOUT_LIST ? list_row_of(c, k) : k;
      return true;
    }
  }
  if (at < path_len) path[at] = '\0'; /* no find: the path is back to c's name */
  return false;
}

bool mw_column_utf8_find(const mw_column_t *c, const mw_field_t *f, const char *name,
                         int64_t *row, char *path, size_t path_len) {
  assert(c != NULL);
  assert(f != NULL);
  assert(name != NULL);
  assert(path != NULL);
  assert(path_len > 0);
  size_t at = 0;
  path[0] = '\0';
  put(path, path_len, &at, "%s", name);
  bool found = utf8_find(c, f, 0, row, path, path_len, at);
  assert(!found || *row >= 0);
  assert(!found || *row < c->length);
  return found;
}

/* ------------------------------------------------------------- builders */

/* Set row `c->length`'s validity bit, materialising the bitmap on first null. */
static int column_push_validity(mw_column_t *c, bool valid) {
  int64_t row = c->length;
  if (valid && c->validity.len == 0) return 0;
  if (mw_buf_own(&c->validity) < 0) return -ENOMEM; /* written below */
  if (c->validity.len == 0) {
    size_t n = (size_t)(row + 8) / 8;
    if (mw_buf_fill(&c->validity, 0xFF, n) < 0) return -ENOMEM;
    if (row % 8) c->validity.data[n - 1] = (uint8_t)((1u << (row % 8)) - 1);
    else c->validity.data[n - 1] = 0;
  } else if ((size_t)(row / 8) >= c->validity.len) {
    if (mw_buf_put_u8(&c->validity, 0) < 0) return -ENOMEM;
  }
  mw_bit_set(c->validity.data, row, valid);
  return 0;
}

static int bool_push(mw_buf_t *bits, int64_t row, bool v) {
  if (mw_buf_own(bits) < 0) return -ENOMEM;
  if ((size_t)(row / 8) >= bits->len && mw_buf_put_u8(bits, 0) < 0) return -ENOMEM;
  mw_bit_set(bits->data, row, v);
  return 0;
}

/* FSL child validity: push `dim` bits of value v for a new row, if the child
 * bitmap is materialised (an empty one means every item is valid). */
static int items_push(mw_column_t *c, int64_t dim, bool v) {
  if (c->item_validity.len == 0) return 0;
  int64_t base = c->length * dim;
  for (int64_t k = 0; k < dim; k++)
    if (bool_push(&c->item_validity, base + k, v) < 0) return -ENOMEM;
  if (!v) c->item_null_count += dim;
  return 0;
}

static int offset_push(mw_column_t *c, int64_t end) {
  if (end > INT32_MAX) return -EFBIG;
  int32_t e = (int32_t)end;
  return mw_buf_append(&c->offsets, &e, 4);
}

static int append_empty(mw_column_t *c, const mw_field_t *f, bool null);

/* The slot a null parent gives a child: null where allowed, else a zero or
 * empty value (Arrow leaves it undefined; arrow-rs writes zeros). */
static int append_filler(mw_column_t *c, const mw_field_t *f) {
  return append_empty(c, f, f->nullable);
}

/* A null row (null = true) or a valid zero/empty/false one. */
static int append_empty(mw_column_t *c, const mw_field_t *f, bool null) {
  assert(!null || f->nullable);
  int rc = 0;
  switch (mw_field_layout(f)) {
    case MW_LAYOUT_BOOL: rc = bool_push(&c->values, c->length, false); break;
    case MW_LAYOUT_VAR: rc = offset_push(c, (int64_t)c->values.len); break;
    case MW_LAYOUT_LIST: rc = offset_push(c, c->children[0].length); break;
    case MW_LAYOUT_STRUCT:
      for (uint32_t i = 0; i < f->n_children && rc == 0; i++)
        rc = append_filler(&c->children[i], &f->children[i]);
      break;
    case MW_LAYOUT_FSL:
      /* like arrow-rs, the items of a null list are null children */
      rc = mw_buf_extend(&c->values, mw_type_width(f)) ? 0 : -ENOMEM;
      if (rc == 0) rc = items_push(c, f->fsl_dim, !null);
      break;
    default: rc = mw_buf_extend(&c->values, mw_type_width(f)) ? 0 : -ENOMEM; break;
  }
  if (rc < 0) return rc;
  if (column_push_validity(c, !null) < 0) return -ENOMEM;
  c->length++;
  c->null_count += null;
  return 0;
}

int mw_column_append_null(mw_column_t *c, const mw_field_t *f) {
  assert(f->nullable);
  return append_empty(c, f, true);
}

int mw_column_append_fixed(mw_column_t *c, const void *value, size_t width) {
  assert(c->item_validity.len == 0);
  int rc = mw_buf_append(&c->values, value, width);
  if (rc < 0) return rc;
  if (column_push_validity(c, true) < 0) return -ENOMEM;
  c->length++;
  return 0;
}

int mw_column_append_fsl(mw_column_t *c, const mw_field_t *f, const void *items) {
  assert(f->type == MW_T_FSL);
  int rc = mw_buf_append(&c->values, items, mw_type_width(f));
  if (rc < 0) return rc;
  if (items_push(c, f->fsl_dim, true) < 0) return -ENOMEM;
  if (column_push_validity(c, true) < 0) return -ENOMEM;
  c->length++;
  return 0;
}

/* The room is reserved past values.len, so a row that fails half way (a bad
 * item) leaves nothing to roll back; commit does the fallible pushes before
 * it moves len and length, as append_fsl does. */
void *mw_column_fsl_room(mw_column_t *c, const mw_field_t *f) {
  assert(f->type == MW_T_FSL);
  size_t w = mw_type_width(f);
  if (mw_buf_reserve(&c->values, w) < 0) return NULL;
  assert(c->values.cap - c->values.len >= w);
  return c->values.data + c->values.len;
}

int mw_column_fsl_commit(mw_column_t *c, const mw_field_t *f) {
  assert(f->type == MW_T_FSL);
  size_t w = mw_type_width(f);
  assert(!mw_buf_is_view(&c->values));
  assert(c->values.cap - c->values.len >= w);
  if (items_push(c, f->fsl_dim, true) < 0) return -ENOMEM;
  if (column_push_validity(c, true) < 0) return -ENOMEM;
  c->values.len += w;
  c->length++;
  return 0;
}

int mw_column_append_bool(mw_column_t *c, bool v) {
  if (bool_push(&c->values, c->length, v) < 0) return -ENOMEM;
  if (column_push_validity(c, true) < 0) return -ENOMEM;
  c->length++;
  return 0;
}

int mw_column_append_bytes(mw_column_t *c, const void *p, size_t n) {
  if (n > (size_t)INT32_MAX - c->values.len) return -EFBIG;
  int rc = mw_buf_append(&c->values, p, n);
  if (rc < 0) return rc;
  if (offset_push(c, (int64_t)c->values.len) < 0) return -ENOMEM;
  if (column_push_validity(c, true) < 0) return -ENOMEM;
  c->length++;
  return 0;
}

int mw_column_list_end(mw_column_t *c) {
  assert(c->n_children == 1);
  int rc = offset_push(c, c->children[0].length);
  if (rc < 0) return rc;
  if (column_push_validity(c, true) < 0) return -ENOMEM;
  c->length++;
  return 0;
}

int mw_column_struct_end(mw_column_t *c) {
  assert(c->n_children >= 1);
  for (uint32_t i = 0; i < c->n_children; i++) assert(c->children[i].length == c->length + 1);
  if (column_push_validity(c, true) < 0) return -ENOMEM;
  c->length++;
  return 0;
}

int mw_column_append_parent(mw_column_t *c, bool valid) {
  assert(c->n_children >= 1);
  bool list = c->offsets.len > 0;
  if (list && offset_push(c, c->children[0].length) < 0) return -ENOMEM;
  if (column_push_validity(c, valid) < 0) return -ENOMEM;
  c->length++;
  c->null_count += !valid;
  return 0;
}

void mw_column_list_grow(mw_column_t *c) {
  assert(c->n_children == 1);
  assert(c->offsets.len == (size_t)(c->length + 1) * 4);
  assert(c->children[0].length <= INT32_MAX);
  int32_t end = (int32_t)c->children[0].length;
  memcpy(c->offsets.data + 4 * c->length, &end, 4);
}

/* After row `r` of src was appended as dst's last row, give it src's item
 * validity bits: materialise dst's bitmap (ones, zero past the end) the
 * first time src has a null item, then overwrite the row's bits. */
static int items_copy(mw_column_t *dst, const mw_column_t *src, int64_t dim, int64_t r) {
  int64_t base = (dst->length - 1) * dim;
  if (dst->item_validity.len == 0) {
    bool all = true;
    for (int64_t k = 0; k < dim && all; k++) all = mw_bit_get(src->item_validity.data, r * dim + k);
    if (all) return 0;
    int64_t bits = base + dim;
    size_t n = (size_t)((bits + 7) / 8);
    if (mw_buf_fill(&dst->item_validity, 0xFF, n) < 0) return -ENOMEM;
    if (bits % 8) dst->item_validity.data[n - 1] = (uint8_t)((1u << (bits % 8)) - 1);
  }
  if (mw_buf_own(&dst->item_validity) < 0) return -ENOMEM;
  for (int64_t k = 0; k < dim; k++) {
    bool v = mw_bit_get(src->item_validity.data, r * dim + k);
    bool old = mw_bit_get(dst->item_validity.data, base + k);
    mw_bit_set(dst->item_validity.data, base + k, v);
    dst->item_null_count += (int64_t)old - (int64_t)v;
  }
  assert(dst->item_null_count >= 0);
  return 0;
}

static int append_row(mw_column_t *dst, const mw_column_t *src, const mw_field_t *f, int64_t r) {
  bool valid = mw_column_valid(src, r);
  int rc;
  switch (mw_field_layout(f)) {
    case MW_LAYOUT_BOOL:
      if (!valid) return mw_column_append_null(dst, f);
      return mw_column_append_bool(dst, mw_bit_get(src->values.data, r));
    case MW_LAYOUT_VAR: {
      if (!valid) return mw_column_append_null(dst, f);
      size_t n;
      const uint8_t *p = mw_column_bytes(src, r, &n);
      return mw_column_append_bytes(dst, p, n);
    }
    case MW_LAYOUT_LIST: {
      int64_t a, b;
      mw_column_list_range(src, r, &a, &b);
      /* a null list keeps whatever items it spans out of the copy */
      if (!valid) return mw_column_append_null(dst, f);
      rc = mw_column_append_range(&dst->children[0], &src->children[0], &f->children[0], a, b - a);
      return rc < 0 ? rc : mw_column_list_end(dst);
    }
    case MW_LAYOUT_STRUCT:
      for (uint32_t i = 0; i < f->n_children; i++)
        if ((rc = append_row(&dst->children[i], &src->children[i], &f->children[i], r)) < 0)
          return rc;
      if (column_push_validity(dst, valid) < 0) return -ENOMEM;
      dst->length++;
      dst->null_count += !valid;
      return 0;
    case MW_LAYOUT_FSL:
      /* null rows too: their items' bits are copied as the writer set them */
      rc = !valid ? mw_column_append_null(dst, f)
                  : mw_column_append_fsl(dst, f, src->values.data + (size_t)r * mw_type_width(f));
      if (rc == 0 && src->item_validity.len) rc = items_copy(dst, src, f->fsl_dim, r);
      return rc;
    default: {
      if (!valid) return mw_column_append_null(dst, f);
      size_t w = mw_type_width(f);
      return mw_column_append_fixed(dst, src->values.data + (size_t)r * w, w);
    }
  }
}

/* Reference path: one row at a time. Nested, bool and FSL columns take it;
 * the bulk path below must give the same rows (tests/formats/test_batch.c). */
static int append_rows(mw_column_t *dst, const mw_column_t *src, const mw_field_t *f,
                       int64_t start, int64_t count) {
  for (int64_t r = start; r < start + count; r++) {
    int rc = append_row(dst, src, f, r);
    if (rc < 0) return rc;
  }
  return 0;
}

/* Zero bits in [from, to) of a bitmap: whole bytes by popcount. */
static int64_t bits_zeros(const uint8_t *bits, int64_t from, int64_t to) {
  int64_t zeros = 0, i = from;
  for (; i < to && i % 8; i++) zeros += !mw_bit_get(bits, i);
  for (; i + 8 <= to; i += 8) zeros += 8 - __builtin_popcount(bits[i / 8]);
  for (; i < to; i++) zeros += !mw_bit_get(bits, i);
  assert(zeros >= 0);
  assert(zeros <= to - from);
  return zeros;
}

/* The 8 bits of a `len`-byte bitmap starting at bit `at` (past the end: 0). */
static uint8_t bits_byte(const uint8_t *bits, size_t len, int64_t at) {
  size_t i = (size_t)(at / 8);
  unsigned s = (unsigned)(at % 8);
  unsigned lo = i < len ? bits[i] : 0, hi = i + 1 < len ? bits[i + 1] : 0;
  return (uint8_t)(s ? (lo >> s) | (hi << (8 - s)) : lo);
}

/* Append validity bits [start, start + count) of src to dst, which holds
 * `have` rows: nothing when both are all valid, else dst's bitmap is
 * materialised and the range copied a byte at a time (shifted when either
 * offset is not byte-aligned), tail bits past the end left zero. Adds the
 * range's nulls to dst->null_count. */
static int validity_append(mw_column_t *dst, const mw_column_t *src, int64_t start, int64_t count) {
  int64_t have = dst->length;
  int64_t zeros = src->validity.len ? bits_zeros(src->validity.data, start, start + count) : 0;
  if (zeros == 0 && dst->validity.len == 0) return 0;
  if (mw_buf_own(&dst->validity) < 0) return -ENOMEM;
  if (dst->validity.len == 0) {
    size_t n = (size_t)(have + 7) / 8;
    if (mw_buf_fill(&dst->validity, 0xFF, n) < 0) return -ENOMEM;
    if (have % 8) dst->validity.data[n - 1] = (uint8_t)((1u << (have % 8)) - 1);
  }
  assert(dst->validity.len == (size_t)(have + 7) / 8);
  size_t want = (size_t)(have + count + 7) / 8;
  if (want > dst->validity.len && !mw_buf_extend(&dst->validity, want - dst->validity.len)) return -ENOMEM;
  uint8_t *d = dst->validity.data;
  const uint8_t *s = src->validity.data;
  size_t slen = src->validity.len;
  int64_t i = 0;
  for (; i < count && (have + i) % 8; i++) mw_bit_set(d, have + i, slen == 0 || mw_bit_get(s, start + i));
  for (; i + 8 <= count; i += 8) d[(have + i) / 8] = slen ? bits_byte(s, slen, start + i) : 0xFF;
  for (; i < count; i++) mw_bit_set(d, have + i, slen == 0 || mw_bit_get(s, start + i));
  dst->null_count += zeros;
  return 0;
}

/* FIXED: one copy of the value range. */
static int append_fixed_range(mw_column_t *dst, const mw_column_t *src, const mw_field_t *f,
                              int64_t start, int64_t count) {
  size_t w = mw_type_width(f);
  assert(w > 0);
  assert(dst->values.len == (size_t)dst->length * w);
  /* room first: a failure leaves dst as it was (validity_append's own
   * failures leave its bitmap describing the rows dst already has) */
  int rc = mw_buf_reserve(&dst->values, (size_t)count * w);
  if (rc < 0) return rc;
  if ((rc = validity_append(dst, src, start, count)) < 0) return rc;
  rc = mw_buf_append(&dst->values, src->values.data + (size_t)start * w, (size_t)count * w);
  assert(rc == 0); /* reserved above */
  dst->length += count;
  return 0;
}

/* VAR: one copy of the bytes the range spans, offsets rebased in one loop.
 * Null rows keep the bytes src gave them (Arrow leaves them undefined). */
static int append_var_range(mw_column_t *dst, const mw_column_t *src, int64_t start, int64_t count) {
  const int32_t *so = (const int32_t *)(const void *)src->offsets.data;
  int64_t a = so[start], b = so[start + count];
  assert(a >= 0);
  assert(b >= a);
  assert(b <= (int64_t)src->values.len);
  if ((size_t)(b - a) > (size_t)INT32_MAX - dst->values.len) return -EFBIG;
  assert(dst->offsets.len == (size_t)(dst->length + 1) * 4);
  /* room first, as append_fixed_range: a failure leaves dst as it was */
  int rc = mw_buf_reserve(&dst->values, (size_t)(b - a));
  if (rc < 0) return rc;
  if ((rc = mw_buf_reserve(&dst->offsets, (size_t)count * 4)) < 0) return rc;
  if ((rc = mw_buf_own(&dst->offsets)) < 0) return rc;
  if ((rc = validity_append(dst, src, start, count)) < 0) return rc;
  int64_t delta = (int64_t)dst->values.len - a;
  rc = mw_buf_append(&dst->values, src->values.data + a, (size_t)(b - a));
  assert(rc == 0); /* reserved above */
  int32_t *d = (int32_t *)(void *)(dst->offsets.data + dst->offsets.len);
  for (int64_t i = 0; i < count; i++) d[i] = (int32_t)(so[start + 1 + i] + delta);
  dst->offsets.len += (size_t)count * 4;
  dst->length += count;
  return 0;
}

int mw_column_append_range(mw_column_t *dst, const mw_column_t *src, const mw_field_t *f,
                           int64_t start, int64_t count) {
  assert(start >= 0);
  assert(count >= 0);
  assert(start + count <= src->length);
  assert(dst->n_children == f->n_children);
  assert(src->n_children == f->n_children);
  if (count == 0) return 0;
  /* the bitmaps' tail rule (bits past the end are zero) and a materialised
   * bitmap's exact length let the bulk copy extend them in place */
  bool exact = dst->validity.len == 0 || dst->validity.len == (size_t)(dst->length + 7) / 8;
  mw_layout_t l = mw_field_layout(f);
  if (l == MW_LAYOUT_VAR)
    exact = exact && dst->offsets.len == (size_t)(dst->length + 1) * 4 &&
            src->offsets.len >= (size_t)(src->length + 1) * 4;
  if (l == MW_LAYOUT_FIXED) exact = exact && dst->values.len == (size_t)dst->length * mw_type_width(f);
  switch (exact ? l : MW_LAYOUT_STRUCT) {
    case MW_LAYOUT_VAR: return append_var_range(dst, src, start, count);
    case MW_LAYOUT_BOOL:
    case MW_LAYOUT_LIST:
    case MW_LAYOUT_STRUCT:
    case MW_LAYOUT_FSL: return append_rows(dst, src, f, start, count);
    default:
      if (dst->item_validity.len) return append_rows(dst, src, f, start, count);
      return append_fixed_range(dst, src, f, start, count);
  }
}

int mw_column_append_range_rows(mw_column_t *dst, const mw_column_t *src, const mw_field_t *f,
                                int64_t start, int64_t count) {
  assert(start >= 0);
  assert(count >= 0);
  assert(start + count <= src->length);
  assert(dst->n_children == f->n_children);
  assert(src->n_children == f->n_children);
  return append_rows(dst, src, f, start, count);
}

/* Count zero bits in [from, to) of a bitmap, shrink it to `to_keep` bits and
 * clear the bits past them. An empty bitmap (all valid) stays empty. */
static int64_t bitmap_truncate(mw_buf_t *bm, int64_t from, int64_t to, int64_t to_keep) {
  if (bm->len == 0) return 0;
  int64_t zeros = 0;
  for (int64_t i = from; i < to; i++) zeros += !mw_bit_get(bm->data, i);
  bm->len = (size_t)((to_keep + 7) / 8);
  /* a view whose copy fails keeps its bits past to_keep (nothing reads them) */
  if (to_keep % 8 && mw_buf_own(bm) == 0) bm->data[bm->len - 1] &= (uint8_t)((1u << (to_keep % 8)) - 1);
  return zeros;
}

void mw_column_truncate(mw_column_t *c, const mw_field_t *f, int64_t length) {
  assert(length >= 0);
  assert(length <= c->length);
  int64_t old = c->length;
  mw_layout_t l = mw_field_layout(f);
  /* children may run ahead of their parent, at any depth (a row failed half
   * way): cut every one back to what the parent's rows span */
  if (l == MW_LAYOUT_STRUCT)
    for (uint32_t i = 0; i < c->n_children; i++)
      mw_column_truncate(&c->children[i], &f->children[i], length);
  if (l == MW_LAYOUT_LIST) {
    const int32_t *off = (const int32_t *)(const void *)c->offsets.data;
    mw_column_truncate(&c->children[0], &f->children[0], off[length]);
  }
  if (length == old) return;
  c->null_count -= bitmap_truncate(&c->validity, length, old, length);
  switch (l) {
    case MW_LAYOUT_BOOL:
      bitmap_truncate(&c->values, length, old, length);
      break;
    case MW_LAYOUT_VAR: {
      const int32_t *off = (const int32_t *)(const void *)c->offsets.data;
      c->values.len = (size_t)off[length];
      c->offsets.len = (size_t)(length + 1) * 4;
      break;
    }
    case MW_LAYOUT_LIST:
      c->offsets.len = (size_t)(length + 1) * 4;
      break;
    case MW_LAYOUT_STRUCT:
      break;
    case MW_LAYOUT_FSL:
      c->item_null_count -= bitmap_truncate(&c->item_validity, length * f->fsl_dim,
                                            old * f->fsl_dim, length * f->fsl_dim);
      c->values.len = (size_t)length * mw_type_width(f);
      break;
    default:
      c->values.len = (size_t)length * mw_type_width(f);
      break;
  }
  c->length = length;
  /* a bitmap without zeros says nothing: drop it, restoring the state before
   * the first null arrived */
  if (c->null_count == 0) c->validity.len = 0;
  if (c->item_null_count == 0) c->item_validity.len = 0;
  assert(c->null_count >= 0);
  assert(c->item_null_count >= 0);
}

/* ------------------------------------------------------------ accounting */

static int64_t bitmap_bytes(int64_t bits) { return (bits + 7) / 8; }

/* Arrow slice payload of one column (arrow-rs get_slice_memory_size):
 * validity only when there are nulls; utf8 = 4·len offsets + value bytes
 * (8·len for large types); a list adds its offsets and items, a struct its
 * children. `under_null`: a struct above (no list between) has nulls here;
 * a not-null member then has a bitmap too in Lance's arrays (null where its
 * struct is; we keep it valid, issue 26). */
static int64_t column_lance_bytes(const mw_field_t *f, const mw_column_t *c, bool under_null) {
  bool nulls = c->null_count > 0 || (under_null && !f->nullable);
  int64_t n = nulls ? bitmap_bytes(c->length) : 0;
  int64_t ow = mw_field_info(f)->large ? 8 : 4;
  switch (mw_field_layout(f)) {
    case MW_LAYOUT_BOOL: return n + bitmap_bytes(c->length);
    case MW_LAYOUT_VAR: {
      if (c->length == 0) return n;
      const int32_t *off = (const int32_t *)(const void *)c->offsets.data;
      assert(off[c->length] >= off[0]);
      return n + ow * c->length + (int64_t)(off[c->length] - off[0]);
    }
    case MW_LAYOUT_LIST:
      return n + ow * c->length + column_lance_bytes(&f->children[0], &c->children[0], false);
    case MW_LAYOUT_STRUCT:
      for (uint32_t i = 0; i < f->n_children; i++)
        n += column_lance_bytes(&f->children[i], &c->children[i], nulls);
      return n;
    case MW_LAYOUT_FSL:
      n += c->item_null_count > 0 ? bitmap_bytes(c->length * f->fsl_dim) : 0;
      return n + c->length * (int64_t)mw_type_width(f);
    default: return n + c->length * (int64_t)mw_type_width(f);
  }
}

int64_t mw_batch_lance_bytes(const mw_batch_t *b) {
  assert(b != NULL);
  assert(b->schema != NULL);
  int64_t n = MW_BATCH_LANCE_OVERHEAD_BYTES;
  for (size_t i = 0; i < b->schema->n_fields; i++) n += column_lance_bytes(&b->schema->fields[i], &b->cols[i], false);
  assert(n >= MW_BATCH_LANCE_OVERHEAD_BYTES);
  return n;
}
