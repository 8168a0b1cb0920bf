/*
 * lance_schema.c — mw_schema_t <-> lance.file.Field lists (lance-files.md §2.3).
 *
 * Design: the schema tree is written in pre-order, a field followed by its
 * subtree, each child naming its parent by id; that is how Lance serialises
 * its own schema, so reading rebuilds the tree by recursive descent and a
 * list that is not in pre-order is refused. fixed_size_list has no child
 * Field (the item type lives in the logical type string).
 *
 * A Field as Lance writes it (column `id`, the primary key of the vectors):
 *   12 02 'i' 'd'                         name = "id"          (id 0 omitted)
 *   20 ff ff ff ff ff ff ff ff ff 01      parent_id = -1 (10-byte varint)
 *   2a 05 'int64'                         logical_type
 *   38 01                                 encoding = PLAIN (legacy hint)
 *   52 35 0a 2c 'lance-schema:unenforced-primary-key:position' 12 01 '1'
 *   60 01  68 01                          unenforced_primary_key, position 1
 * and a struct's child (`a: int32` inside `st`, ids 26 and 25):
 *   12 01 'a' 18 1a 20 19 2a 05 'int32' 30 01 38 01
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

/* ---------------------------------------------------------- logical types */

/* Types whose logical name has no parameter, in the FSL item spelling too. */
static const struct {
  const char *name;
  mw_type_t t;
} simple[] = {
    {"int8", MW_T_INT8},       {"uint8", MW_T_UINT8},       {"int16", MW_T_INT16},
    {"uint16", MW_T_UINT16},   {"int32", MW_T_INT32},       {"uint32", MW_T_UINT32},
    {"int64", MW_T_INT64},     {"uint64", MW_T_UINT64},     {"halffloat", MW_T_FLOAT16},
    {"float", MW_T_FLOAT32},   {"double", MW_T_FLOAT64},    {"bool", MW_T_BOOL},
    {"string", MW_T_UTF8},     {"binary", MW_T_BINARY},     {"large_string", MW_T_LARGE_UTF8},
    {"large_binary", MW_T_LARGE_BINARY}, {"date32:day", MW_T_DATE32}, {"date64:ms", MW_T_DATE64},
    {"struct", MW_T_STRUCT},
};
#define N_SIMPLE (sizeof simple / sizeof simple[0])

static const char *simple_name(mw_type_t t) {
  for (size_t i = 0; i < N_SIMPLE; i++)
    if (simple[i].t == t) return simple[i].name;
  return NULL;
}

int mw_lance_logical(const mw_field_t *f, char *out, size_t out_len) {
  assert(f != NULL);
  assert(out != NULL);
  int n;
  const char *unit = mw_unit_name(f->unit);
  switch (f->type) {
    case MW_T_FSL: {
      const char *item = simple_name(f->item_type);
      if (item == NULL) return -EINVAL;
      n = snprintf(out, out_len, "fixed_size_list:%s:%d", item, f->fsl_dim);
      break;
    }
    case MW_T_FIXED_BINARY: n = snprintf(out, out_len, "fixed_size_binary:%d", f->byte_width); break;
    case MW_T_TIMESTAMP:
      n = snprintf(out, out_len, "timestamp:%s:%s", unit ? unit : "?", f->tz ? f->tz : "-");
      break;
    case MW_T_TIME32: n = snprintf(out, out_len, "time32:%s", unit ? unit : "?"); break;
    case MW_T_TIME64: n = snprintf(out, out_len, "time64:%s", unit ? unit : "?"); break;
    case MW_T_DECIMAL128:
      n = snprintf(out, out_len, "decimal:128:%u:%d", f->precision, f->scale);
      break;
    case MW_T_LIST: case MW_T_LARGE_LIST: {
      bool of_struct = f->n_children == 1 && f->children[0].type == MW_T_STRUCT;
      n = snprintf(out, out_len, "%s%s", f->type == MW_T_LIST ? "list" : "large_list",
                   of_struct ? ".struct" : "");
      break;
    }
    default: {
      const char *s = simple_name(f->type);
      if (s == NULL) return -EINVAL;
      n = snprintf(out, out_len, "%s", s);
      break;
    }
  }
  return n < 0 || (size_t)n >= out_len ? -EINVAL : 0;
}

/* A decimal integer filling s[0..n) exactly, in [lo, hi]. */
static bool parse_int(const char *s, size_t n, long lo, long hi, long *v) {
  assert(v != NULL);
  if (n == 0 || n > 10) return false;
  bool neg = s[0] == '-';
  if (neg && n == 1) return false;
  long x = 0;
  for (size_t i = neg; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return false;
    x = x * 10 + (s[i] - '0');
  }
  if (neg) x = -x;
  if (x < lo || x > hi) return false;
  *v = x;
  return true;
}

static bool has_prefix(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

/* Parse a logical type into f (type and parameters; no children). */
static int parse_logical(const char *lt, mw_field_t *f) {
  assert(f != NULL);
  for (size_t i = 0; i < N_SIMPLE; i++) {
    if (strcmp(lt, simple[i].name) == 0) {
      f->type = simple[i].t;
      return 0;
    }
  }
  long v, w;
  const char *p, *c;
  if (strcmp(lt, "list") == 0 || strcmp(lt, "list.struct") == 0) return f->type = MW_T_LIST, 0;
  if (strcmp(lt, "large_list") == 0 || strcmp(lt, "large_list.struct") == 0)
    return f->type = MW_T_LARGE_LIST, 0;
  if (has_prefix(lt, "fixed_size_list:")) {
    p = lt + strlen("fixed_size_list:");
    if ((c = strrchr(p, ':')) == NULL || !parse_int(c + 1, strlen(c + 1), 1, MW_MAX_FSL_DIM, &v))
      return -EBADMSG;
    for (size_t i = 0; i < N_SIMPLE; i++) {
      if (strlen(simple[i].name) == (size_t)(c - p) && memcmp(simple[i].name, p, (size_t)(c - p)) == 0 &&
          mw_type_info(simple[i].t)->fsl_item) {
        f->type = MW_T_FSL;
        f->item_type = simple[i].t;
        f->fsl_dim = (int32_t)v;
        return 0;
      }
    }
    return -ENOTSUP;
  }
  if (has_prefix(lt, "fixed_size_binary:")) {
    p = lt + strlen("fixed_size_binary:");
    if (!parse_int(p, strlen(p), 1, MW_MAX_FIXED_BINARY_BYTES, &v)) return -EBADMSG;
    f->type = MW_T_FIXED_BINARY;
    f->byte_width = (int32_t)v;
    return 0;
  }
  if (has_prefix(lt, "timestamp:")) {
    p = lt + strlen("timestamp:");
    if ((c = strchr(p, ':')) == NULL) return -EBADMSG;
    int u = mw_unit_parse(p, (size_t)(c - p));
    size_t tzn = strlen(c + 1);
    if (u < 0 || tzn == 0 || tzn > MW_MAX_TZ_BYTES) return -EBADMSG;
    f->type = MW_T_TIMESTAMP;
    f->unit = (uint8_t)u;
    if (strcmp(c + 1, "-") != 0 && (f->tz = strdup(c + 1)) == NULL) return -ENOMEM;
    return 0;
  }
  if (has_prefix(lt, "time32:") || has_prefix(lt, "time64:")) {
    bool t64 = lt[4] == '6';
    p = lt + strlen("time32:");
    int u = mw_unit_parse(p, strlen(p));
    if (u < 0) return -EBADMSG;
    if (t64 != (u == MW_UNIT_US || u == MW_UNIT_NS)) return -EBADMSG;
    f->type = t64 ? MW_T_TIME64 : MW_T_TIME32;
    f->unit = (uint8_t)u;
    return 0;
  }
  if (has_prefix(lt, "decimal:128:")) {
    p = lt + strlen("decimal:128:");
    if ((c = strchr(p, ':')) == NULL || !parse_int(p, (size_t)(c - p), 1, MW_MAX_DECIMAL_PRECISION, &v) ||
        !parse_int(c + 1, strlen(c + 1), -v, v, &w))
      return -EBADMSG;
    f->type = MW_T_DECIMAL128;
    f->precision = (uint8_t)v;
    f->scale = (int8_t)w;
    return 0;
  }
  return -ENOTSUP;
}

/* ------------------------------------------------------------------ write */

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
  assert(lf != NULL);
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

static Lance__File__Encoding encoding_hint(const mw_field_t *f) {
  switch (mw_field_layout(f)) {
    case MW_LAYOUT_VAR: return LANCE__FILE__ENCODING__VAR_BINARY;
    case MW_LAYOUT_STRUCT: return 0; /* None */
    default: return LANCE__FILE__ENCODING__PLAIN;
  }
}

static int field_from(const mw_field_t *f, int32_t id, int32_t parent, Lance__File__Field **out) {
  assert(f != NULL);
  assert(out != NULL);
  char logical[MW_LANCE_LOGICAL_MAX_BYTES];
  int rc = mw_lance_logical(f, logical, sizeof logical);
  if (rc < 0) return rc;
  Lance__File__Field *lf = malloc(sizeof *lf);
  if (lf == NULL) return -ENOMEM;
  lance__file__field__init(lf);
  lf->name = strdup(f->name);
  lf->logical_type = strdup(logical);
  if (lf->name == NULL || lf->logical_type == NULL) goto nomem;
  lf->id = id;
  lf->parent_id = parent;
  lf->nullable = f->nullable;
  lf->encoding = encoding_hint(f);
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

typedef struct wstate {
  Lance__File__Field **fields;
  size_t n, cap;
  int32_t next_id; /* for fields without an id */
} wstate_t;

static int write_tree(wstate_t *w, const mw_field_t *f, int32_t parent, int depth) {
  assert(f != NULL);
  if (depth > MW_MAX_NESTING || w->n >= w->cap) return -EINVAL;
  int32_t id = f->id >= 0 ? f->id : w->next_id;
  if (id + 1 > w->next_id) w->next_id = id + 1;
  int rc = field_from(f, id, parent, &w->fields[w->n]);
  if (rc < 0) return rc;
  w->n++;
  for (uint32_t i = 0; i < f->n_children; i++)
    if ((rc = write_tree(w, &f->children[i], id, depth + 1)) < 0) return rc;
  return 0;
}

int mw_lance_fields_from_schema(const mw_schema_t *s, Lance__File__Field ***out, size_t *n_out) {
  assert(s != NULL);
  assert(out != NULL);
  assert(n_out != NULL);
  if (s->n_fields > MW_MAX_FIELDS) return -EINVAL;
  size_t total = 0;
  for (size_t i = 0; i < s->n_fields; i++) total += mw_field_count(&s->fields[i]);
  if (total > MW_MAX_FIELDS * 4) return -EINVAL;
  wstate_t w = {calloc(total ? total : 1, sizeof *w.fields), 0, total, 0};
  if (w.fields == NULL) return -ENOMEM;
  /* fields without an id come after the highest id present */
  for (size_t i = 0; i < s->n_fields; i++)
    if (s->fields[i].id + 1 > w.next_id) w.next_id = s->fields[i].id + 1;
  for (size_t i = 0; i < s->n_fields; i++) {
    int rc = write_tree(&w, &s->fields[i], -1, 0);
    if (rc < 0) {
      mw_lance_fields_free(w.fields, w.n);
      return rc;
    }
  }
  assert(w.n == total);
  *out = w.fields;
  *n_out = w.n;
  return 0;
}

static int leaves(const mw_field_t *f, const mw_field_t **lv, int32_t *ids, size_t cap, size_t *n,
                  int32_t *next_id) {
  assert(f != NULL);
  assert(n != NULL);
  assert(next_id != NULL);
  int32_t id = f->id >= 0 ? f->id : *next_id;
  if (id + 1 > *next_id) *next_id = id + 1;
  mw_layout_t l = mw_field_layout(f);
  if (l != MW_LAYOUT_LIST && l != MW_LAYOUT_STRUCT) {
    if (*n >= cap) return -EFBIG;
    if (lv) lv[*n] = f;
    if (ids) ids[*n] = id;
    (*n)++;
    return 0;
  }
  for (uint32_t i = 0; i < f->n_children; i++) {
    int rc = leaves(&f->children[i], lv, ids, cap, n, next_id);
    if (rc < 0) return rc;
  }
  return 0;
}

int mw_lance_leaves(const mw_schema_t *s, const mw_field_t **lv, int32_t *ids, size_t cap) {
  assert(s != NULL);
  size_t n = 0;
  int32_t next = 0;
  for (size_t i = 0; i < s->n_fields; i++)
    if (s->fields[i].id + 1 > next) next = s->fields[i].id + 1;
  for (size_t i = 0; i < s->n_fields; i++) {
    int rc = leaves(&s->fields[i], lv, ids, cap, &n, &next);
    if (rc < 0) return rc;
  }
  return (int)n;
}

/* ------------------------------------------------------------------- read */

typedef struct rstate {
  Lance__File__Field *const *fields;
  size_t n, at;
  mw_err_t *err;
} rstate_t;

static int fill_field(const Lance__File__Field *lf, size_t idx, mw_field_t *f, mw_err_t *err) {
  assert(lf != NULL);
  assert(f != NULL);
  const char *name = lf->name ? lf->name : "";
  const char *lt = lf->logical_type ? lf->logical_type : "";
  int rc = parse_logical(lt, f);
  if (rc < 0)
    return mw_err_set(err, rc, "field %zu '%s': logical type '%s' %s", idx, name, lt,
                      rc == -ENOTSUP ? "not supported" : "malformed");
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

/* The children of f (the field at r->at - 1), which follow it in pre-order. */
static int read_children(rstate_t *r, mw_field_t *f, int32_t id, int depth) {
  assert(f != NULL);
  mw_layout_t l = mw_field_layout(f);
  while (r->at < r->n && r->fields[r->at] != NULL && r->fields[r->at]->parent_id == id &&
         id != -1) {
    const Lance__File__Field *lf = r->fields[r->at];
    const char *name = lf->name ? lf->name : "";
    if (l != MW_LAYOUT_LIST && l != MW_LAYOUT_STRUCT)
      return mw_err_set(r->err, -EBADMSG, "field %zu '%s': parent '%s' is %s, not a list or struct",
                        r->at, name, f->name, mw_type_name(f->type));
    if (depth >= MW_MAX_NESTING)
      return mw_err_set(r->err, -ENOTSUP, "field %zu '%s': nested deeper than %d levels", r->at,
                        name, MW_MAX_NESTING);
    if (name[0] == 0) return mw_err_set(r->err, -EBADMSG, "field %zu: empty name", r->at);
    int k = mw_field_add_child(f, name, MW_T_INT32, lf->nullable);
    if (k < 0)
      return mw_err_set(r->err, k == -ENOMEM ? k : -EBADMSG, "field %zu '%s': too many children of '%s'",
                        r->at, name, f->name);
    mw_field_t *c = &f->children[k];
    size_t idx = r->at++;
    int rc = fill_field(lf, idx, c, r->err);
    if (rc == 0) rc = read_children(r, c, lf->id, depth + 1);
    if (rc < 0) return rc;
  }
  return 0;
}

int mw_lance_schema_from_fields(Lance__File__Field *const *fields, size_t n, mw_schema_t *out,
                                mw_err_t *err) {
  assert(out != NULL);
  assert(fields != NULL || n == 0);
  if (n > MW_MAX_FIELDS * 4)
    return mw_err_set(err, -EBADMSG, "%zu fields exceed the limit of %d", n, MW_MAX_FIELDS * 4);
  for (size_t i = 0; i < n; i++)
    if (fields[i] == NULL) return mw_err_set(err, -EBADMSG, "field %zu missing", i);
  rstate_t r = {fields, n, 0, err};
  while (r.at < n) {
    const Lance__File__Field *lf = fields[r.at];
    const char *name = lf->name ? lf->name : "";
    if (lf->parent_id != -1)
      return mw_err_set(err, -EBADMSG, "field %zu '%s': parent id %d is not an earlier list or struct",
                        r.at, name, lf->parent_id);
    if (name[0] == 0) return mw_err_set(err, -EBADMSG, "field %zu: empty name", r.at);
    if (mw_schema_find(out, name) >= 0)
      return mw_err_set(err, -EBADMSG, "field %zu: duplicate name '%s'", r.at, name);
    int k = mw_schema_add(out, name, MW_T_INT32, lf->nullable);
    if (k < 0) return mw_err_set(err, k, "field %zu '%s': cannot add to schema", r.at, name);
    mw_field_t *f = &out->fields[k];
    size_t idx = r.at++;
    int rc = fill_field(lf, idx, f, err);
    if (rc == 0) rc = read_children(&r, f, lf->id, 0);
    if (rc < 0) return rc;
    char why[160];
    if (mw_field_check(f, why, sizeof why) < 0)
      return mw_err_set(err, -EBADMSG, "field %zu: %s", idx, why);
  }
  assert(r.at == n);
  return 0;
}
