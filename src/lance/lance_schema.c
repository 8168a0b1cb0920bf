/*
 * lance_schema.c — mw_schema_t <-> lance.file.Field lists (lance-files.md §2.3).
 *
 * Design: one flat, pre-order Field per top-level column. memwald's types are
 * all "leaf-like" in Lance's sense: fixed_size_list<float32, D> has no child
 * Field (the element type lives in the logical type string), so every field
 * gets parent_id -1 and the list is exactly the schema's field order.
 *
 * A Field as Lance writes it (column `id`, the primary key of the vectors):
 *   12 02 'i' 'd'                         name = "id"          (id 0 omitted)
 *   20 ff ff ff ff ff ff ff ff ff 01      parent_id = -1 (10-byte varint)
 *   2a 05 'int64'                         logical_type
 *   38 01                                 encoding = PLAIN (legacy hint)
 *   52 35 0a 2c 'lance-schema:unenforced-primary-key:position' 12 01 '1'
 *   60 01  68 01                          unenforced_primary_key, position 1
 * protobuf-c emits fields in field-number order and skips proto3 zero values,
 * which is what prost (Lance) does, so decode → encode is byte-identical.
 *
 * Metadata order is kept (mw_kvs_t is ordered); the PK position key is added
 * to the field metadata when a PK field does not carry it already, because
 * Lance's own files always have both the key and fields 12/13.
 */
#include "lance/lance_schema.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PK_META_KEY "lance-schema:unenforced-primary-key:position"
#define LOGICAL_MAX_BYTES 64

static void field_free(Lance__File__Field *f) {
  if (f == NULL) return;
  for (size_t i = 0; i < f->n_metadata; i++) {
    if (f->metadata[i] == NULL) continue;
    free(f->metadata[i]->key);
    free(f->metadata[i]->value.data);
    free(f->metadata[i]);
  }
  free(f->metadata);
  free(f->name);
  free(f->logical_type);
  free(f);
}

void mw_lance_fields_free(Lance__File__Field **fields, size_t n) {
  if (fields == NULL) return;
  for (size_t i = 0; i < n; i++) field_free(fields[i]);
  free(fields);
}

/* Append one metadata entry (key/value copied). */
static int meta_add(Lance__File__Field *lf, const char *key, const uint8_t *v, size_t vlen) {
  Lance__File__Field__MetadataEntry **m =
      realloc(lf->metadata, (lf->n_metadata + 1) * sizeof *m);
  if (m == NULL) return -ENOMEM;
  lf->metadata = m;
  Lance__File__Field__MetadataEntry *e = malloc(sizeof *e);
  if (e == NULL) return -ENOMEM;
  lance__file__field__metadata_entry__init(e);
  e->key = strdup(key);
  e->value.data = malloc(vlen ? vlen : 1);
  if (e->key == NULL || e->value.data == NULL) {
    free(e->key);
    free(e->value.data);
    free(e);
    return -ENOMEM;
  }
  if (vlen) memcpy(e->value.data, v, vlen);
  e->value.len = vlen;
  lf->metadata[lf->n_metadata++] = e;
  return 0;
}

static int field_from(const mw_field_t *f, int32_t index, Lance__File__Field **out) {
  char logical[LOGICAL_MAX_BYTES];
  int rc = mw_type_lance_logical(f, logical, sizeof logical);
  if (rc < 0) return rc;
  Lance__File__Field *lf = malloc(sizeof *lf);
  if (lf == NULL) return -ENOMEM;
  lance__file__field__init(lf);
  lf->name = strdup(f->name);
  lf->logical_type = strdup(logical);
  if (lf->name == NULL || lf->logical_type == NULL) goto nomem;
  lf->id = f->id >= 0 ? f->id : index;
  lf->parent_id = -1;
  lf->nullable = f->nullable;
  lf->encoding = (f->type == MW_T_UTF8 || f->type == MW_T_BINARY) ? LANCE__FILE__ENCODING__VAR_BINARY
                                                                  : LANCE__FILE__ENCODING__PLAIN;
  for (size_t i = 0; i < f->meta.n; i++) {
    const mw_kv_t *kv = &f->meta.items[i];
    if (meta_add(lf, kv->key, kv->value, kv->value_len) < 0) goto nomem;
  }
  if (f->pk_position > 0) {
    lf->unenforced_primary_key = true;
    lf->unenforced_primary_key_position = f->pk_position;
    if (mw_kvs_get(&f->meta, PK_META_KEY) == NULL) {
      char pos[16];
      int n = snprintf(pos, sizeof pos, "%u", f->pk_position);
      if (meta_add(lf, PK_META_KEY, (const uint8_t *)pos, (size_t)n) < 0) goto nomem;
    }
  }
  *out = lf;
  return 0;
nomem:
  field_free(lf);
  return -ENOMEM;
}

int mw_lance_fields_from_schema(const mw_schema_t *s, Lance__File__Field ***out, size_t *n_out) {
  assert(s != NULL && out != NULL && n_out != NULL);
  if (s->n_fields > MW_MAX_FIELDS) return -EINVAL;
  Lance__File__Field **fields = calloc(s->n_fields ? s->n_fields : 1, sizeof *fields);
  if (fields == NULL) return -ENOMEM;
  for (size_t i = 0; i < s->n_fields; i++) {
    int rc = field_from(&s->fields[i], (int32_t)i, &fields[i]);
    if (rc < 0) {
      mw_lance_fields_free(fields, i);
      return rc;
    }
  }
  *out = fields;
  *n_out = s->n_fields;
  assert(*n_out == s->n_fields);
  return 0;
}

/* Parse Lance's logical type string into our type (and FSL dimension). */
static int parse_logical(const char *lt, mw_type_t *type, int32_t *dim) {
  static const struct { const char *name; mw_type_t t; } simple[] = {
      {"int32", MW_T_INT32}, {"int64", MW_T_INT64},   {"uint32", MW_T_UINT32},
      {"uint64", MW_T_UINT64}, {"float", MW_T_FLOAT32}, {"double", MW_T_FLOAT64},
      {"bool", MW_T_BOOL},   {"string", MW_T_UTF8},   {"binary", MW_T_BINARY},
  };
  *dim = 0;
  for (size_t i = 0; i < sizeof simple / sizeof simple[0]; i++) {
    if (strcmp(lt, simple[i].name) == 0) {
      *type = simple[i].t;
      return 0;
    }
  }
  const char *pfx = "fixed_size_list:float:";
  if (strncmp(lt, pfx, strlen(pfx)) == 0) {
    const char *p = lt + strlen(pfx);
    char *end = NULL;
    long d = strtol(p, &end, 10);
    if (*p < '0' || *p > '9' || end == NULL || *end != 0 || d < 1 || d > MW_MAX_FSL_DIM)
      return -EBADMSG;
    *type = MW_T_FSL_F32;
    *dim = (int32_t)d;
    return 0;
  }
  return -ENOTSUP;
}

static int field_to(const Lance__File__Field *lf, size_t idx, mw_schema_t *out, mw_err_t *err) {
  mw_type_t type;
  int32_t dim;
  const char *name = lf->name ? lf->name : "";
  const char *lt = lf->logical_type ? lf->logical_type : "";
  if (lf->parent_id != -1)
    return mw_err_set(err, -ENOTSUP, "field %zu '%s': nested field (parent_id %d) not supported",
                      idx, name, lf->parent_id);
  int rc = parse_logical(lt, &type, &dim);
  if (rc < 0)
    return mw_err_set(err, rc, "field %zu '%s': logical type '%s' %s", idx, name, lt,
                      rc == -ENOTSUP ? "not supported" : "malformed");
  if (name[0] == 0) return mw_err_set(err, -EBADMSG, "field %zu: empty name", idx);
  rc = mw_schema_add(out, name, type, lf->nullable);
  if (rc < 0) return mw_err_set(err, rc, "field %zu '%s': cannot add to schema", idx, name);
  mw_field_t *f = &out->fields[rc];
  f->fsl_dim = dim;
  f->item_nullable = true;
  f->id = lf->id;
  f->pk_position = lf->unenforced_primary_key
                       ? (lf->unenforced_primary_key_position ? lf->unenforced_primary_key_position : 1)
                       : 0;
  for (size_t i = 0; i < lf->n_metadata; i++) {
    const Lance__File__Field__MetadataEntry *e = lf->metadata[i];
    if (e == NULL || e->key == NULL) return mw_err_set(err, -EBADMSG, "field '%s': bad metadata", name);
    rc = mw_kvs_set(&f->meta, e->key, e->value.data, e->value.len);
    if (rc < 0) return mw_err_set(err, rc, "field '%s': metadata", name);
  }
  return 0;
}

int mw_lance_schema_from_fields(Lance__File__Field *const *fields, size_t n, mw_schema_t *out,
                                mw_err_t *err) {
  assert(out != NULL);
  assert(fields != NULL || n == 0);
  if (n > MW_MAX_FIELDS)
    return mw_err_set(err, -EBADMSG, "%zu fields exceed the limit of %d", n, MW_MAX_FIELDS);
  for (size_t i = 0; i < n; i++) {
    if (fields[i] == NULL) return mw_err_set(err, -EBADMSG, "field %zu missing", i);
    for (size_t j = 0; j < i; j++)
      if (fields[j]->name && fields[i]->name && strcmp(fields[j]->name, fields[i]->name) == 0)
        return mw_err_set(err, -EBADMSG, "field %zu: duplicate name '%s'", i, fields[i]->name);
    int rc = field_to(fields[i], i, out, err);
    if (rc < 0) return rc;
  }
  return 0;
}
