/*
 * schema.c — the schema model of batch.h: fields (a type, its parameters,
 * its children), their checks, equality and text, metadata lists, and
 * schemas. (lance_schema.c maps this model to Lance's lance.file.Field;
 * schema_text.c parses the config's text of it.)
 *
 * A field is a tree bounded by MW_MAX_NESTING, which mw_field_check
 * enforces on every field a decoder builds, so every walk over it here
 * (free, copy, count, equality, text) is bounded too. A field's text is
 * what error messages and the inspector print, e.g. for
 * `tags: list<utf8>` and a struct:
 *
 *   list<utf8>
 *   struct<a: int64 not null, ts: timestamp<us, UTC>>
 *
 * Metadata lists (mw_kvs_t) keep their order: byte-exact re-encoding of
 * Arrow and Lance schemas needs it. A value is bytes with a NUL after it.
 */
#include "lance/batch.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lance/batch_int.h"

/* ------------------------------------------------------------------ fields */

size_t mw_fsl_item_width(const mw_field_t *f) {
  assert(f->type == MW_T_FSL);
  return mw_type_info(f->item_type)->width;
}

size_t mw_type_width(const mw_field_t *f) {
  assert(f != NULL);
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
  assert(f != NULL);
  memset(f, 0, sizeof *f);
  f->type = type;
  f->nullable = nullable;
  f->item_nullable = true;
  f->item_type = MW_T_FLOAT32;
  f->unit = type == MW_T_TIME64 || type == MW_T_TIMESTAMP ? MW_UNIT_US : MW_UNIT_S;
  f->id = -1;
}

static void field_free(mw_field_t *f) {
  assert(f != NULL);
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
  assert(f != NULL);
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
  assert(b != NULL);
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
void mw_text_put(char *out, size_t len, size_t *at, const char *fmt, ...) {
  if (*at + 1 >= len) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(out + *at, len - *at, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  *at += (size_t)n < len - *at ? (size_t)n : len - *at - 1;
}

static void type_text(const mw_field_t *f, char *out, size_t len, size_t *at) {
  assert(f != NULL);
  const char *name = mw_type_name(f->type);
  switch (f->type) {
    case MW_T_FSL:
      mw_text_put(out, len, at, "fixed_size_list<%s, %d>", mw_type_name(f->item_type), f->fsl_dim);
      return;
    case MW_T_FIXED_BINARY: mw_text_put(out, len, at, "%s<%d>", name, f->byte_width); return;
    case MW_T_TIMESTAMP:
      mw_text_put(out, len, at, "timestamp<%s%s%s>", mw_unit_name(f->unit) ? mw_unit_name(f->unit) : "?",
          f->tz ? ", " : "", f->tz ? f->tz : "");
      return;
    case MW_T_TIME32: case MW_T_TIME64:
      mw_text_put(out, len, at, "%s<%s>", name, mw_unit_name(f->unit) ? mw_unit_name(f->unit) : "?");
      return;
    case MW_T_DECIMAL128: mw_text_put(out, len, at, "decimal128<%u, %d>", f->precision, f->scale); return;
    case MW_T_LIST: case MW_T_LARGE_LIST: case MW_T_STRUCT:
      mw_text_put(out, len, at, "%s<", name);
      for (uint32_t i = 0; i < f->n_children; i++) {
        const mw_field_t *c = &f->children[i];
        if (f->type == MW_T_STRUCT) mw_text_put(out, len, at, "%s%s: ", i ? ", " : "", c->name);
        type_text(c, out, len, at);
        if (!c->nullable) mw_text_put(out, len, at, " not null");
      }
      mw_text_put(out, len, at, ">");
      return;
    default: mw_text_put(out, len, at, "%s", name); return;
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
  assert(kvs != NULL);
  for (size_t i = 0; i < kvs->n; i++)
    if (strcmp(kvs->items[i].key, key) == 0) return &kvs->items[i];
  return NULL;
}

bool mw_kvs_remove(mw_kvs_t *kvs, const char *key) {
  assert(kvs != NULL);
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
  assert(s != NULL);
  for (size_t i = 0; i < s->n_fields; i++)
    if (strcmp(s->fields[i].name, name) == 0) return (int)i;
  return -ENOENT;
}

bool mw_schema_equal(const mw_schema_t *a, const mw_schema_t *b) {
  assert(a != NULL);
  assert(b != NULL);
  if (a->n_fields != b->n_fields) return false;
  for (size_t i = 0; i < a->n_fields; i++) {
    const mw_field_t *x = &a->fields[i], *y = &b->fields[i];
    if (strcmp(x->name, y->name) != 0 || x->nullable != y->nullable || !type_equal(x, y, true))
      return false;
  }
  return true;
}
