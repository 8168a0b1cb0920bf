/*
 * schema_text.c — the config's schema / primary_key / spec / shards text
 * (see schema_text.h).
 *
 * One tiny lexer serves all four: tokens are identifiers
 * [A-Za-z_][A-Za-z0-9_]*, decimal numbers and the punctuation `: , < > ( )`,
 * separated by optional spaces or tabs. Each token remembers its 1-based
 * column so every error can say where, what it saw and what it wanted:
 *
 *   schema = id:int64 not null, vec:fixed_size_list<float32,8>
 *            ^col 1              ^col 21
 *
 * Identity shard values (`shards = us,eu`) are free text between commas,
 * trimmed, and checked against the identity column's type.
 */
#include "lance/schema_text.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum tk_kind { TK_END, TK_IDENT, TK_NUM, TK_PUNCT, TK_BAD } tk_kind_t;

typedef struct tok {
  tk_kind_t kind;
  const char *p;
  size_t len;
  size_t col; /* 1-based */
} tok_t;

typedef struct lex {
  const char *what; /* config key, for messages */
  const char *s;
  const char *pos;
  tok_t t;          /* current token */
  mw_err_t *err;
} lex_t;

static bool is_alpha(char ch) {
  return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || ch == '_';
}
static bool is_digit(char ch) { return ch >= '0' && ch <= '9'; }

static void lex_next(lex_t *l) {
  assert(l != NULL);
  const char *p = l->pos;
  while (*p == ' ' || *p == '\t') p++;
  tok_t t = {TK_END, p, 0, (size_t)(p - l->s) + 1};
  if (*p == 0) {
    /* end */
  } else if (is_alpha(*p)) {
    t.kind = TK_IDENT;
    while (is_alpha(p[t.len]) || is_digit(p[t.len])) t.len++;
  } else if (is_digit(*p)) {
    t.kind = TK_NUM;
    while (is_digit(p[t.len])) t.len++;
  } else if (strchr(":,<>()", *p) != NULL) {
    t.kind = TK_PUNCT;
    t.len = 1;
  } else {
    t.kind = TK_BAD;
    t.len = 1;
  }
  l->t = t;
  l->pos = p + t.len;
}

/* The first character after the current token and any blanks. */
static char lex_peek(const lex_t *l) {
  assert(l != NULL);
  const char *p = l->pos;
  while (*p == ' ' || *p == '\t') p++;
  return *p;
}

static void lex_init(lex_t *l, const char *what, const char *text, mw_err_t *err) {
  assert(l != NULL);
  *l = (lex_t){what, text, text, {TK_END, text, 0, 1}, err};
  lex_next(l);
}

static bool tok_is(const tok_t *t, const char *s) {
  return t->kind != TK_END && t->len == strlen(s) && memcmp(t->p, s, t->len) == 0;
}

/* `"token"` (bounded, printable) or `end of text`. */
static const char *tok_show(const tok_t *t, char *out, size_t out_len) {
  assert(t != NULL);
  if (t->kind == TK_END) return "end of text";
  if (t->kind == TK_BAD && ((unsigned char)*t->p < 0x20 || (unsigned char)*t->p >= 0x7f)) {
    snprintf(out, out_len, "byte 0x%02x", (unsigned char)*t->p);
    return out;
  }
  snprintf(out, out_len, "\"%.*s\"", (int)(t->len > 64 ? 64 : t->len), t->p);
  return out;
}

static int expected(lex_t *l, const char *what) {
  assert(l != NULL);
  char g[80];
  return mw_err_set(l->err, -EINVAL, "%s: column %zu: expected %s, got %s", l->what, l->t.col,
                    what, tok_show(&l->t, g, sizeof g));
}

static int expect_punct(lex_t *l, char ch, const char *what) {
  assert(l != NULL);
  if (l->t.kind != TK_PUNCT || *l->t.p != ch) return expected(l, what);
  lex_next(l);
  return 0;
}

/* A decimal number token in [lo, hi]. */
static int take_number(lex_t *l, const char *what, long lo, long hi, long *out) {
  assert(l != NULL);
  assert(out != NULL);
  if (l->t.kind != TK_NUM) return expected(l, what);
  long v = l->t.len > 9 ? hi + 1 : strtol(l->t.p, NULL, 10);
  if (v < lo || v > hi) {
    char g[80];
    return mw_err_set(l->err, -EINVAL, "%s: column %zu: %s must be in %ld..%ld, got %s", l->what,
                      l->t.col, what, lo, hi, tok_show(&l->t, g, sizeof g));
  }
  *out = v;
  lex_next(l);
  return 0;
}

static int check_text(const char *what, const char *text, mw_err_t *err) {
  if (text == NULL) return mw_err_set(err, -EINVAL, "%s: missing", what);
  if (strlen(text) > MW_SCHEMA_TEXT_MAX_BYTES)
    return mw_err_set(err, -EINVAL, "%s: longer than %d bytes", what, MW_SCHEMA_TEXT_MAX_BYTES);
  return 0;
}

/* ------------------------------------------------------------------ schema */

/* Type names without parameters (aliases included). */
static const struct {
  const char *name;
  mw_type_t type;
} type_names[] = {
    {"int8", MW_T_INT8},           {"int16", MW_T_INT16},         {"int32", MW_T_INT32},
    {"int64", MW_T_INT64},         {"uint8", MW_T_UINT8},         {"uint16", MW_T_UINT16},
    {"uint32", MW_T_UINT32},       {"uint64", MW_T_UINT64},       {"float16", MW_T_FLOAT16},
    {"halffloat", MW_T_FLOAT16},   {"float", MW_T_FLOAT32},       {"float32", MW_T_FLOAT32},
    {"double", MW_T_FLOAT64},      {"float64", MW_T_FLOAT64},     {"bool", MW_T_BOOL},
    {"string", MW_T_UTF8},         {"utf8", MW_T_UTF8},           {"large_string", MW_T_LARGE_UTF8},
    {"large_utf8", MW_T_LARGE_UTF8}, {"binary", MW_T_BINARY},     {"large_binary", MW_T_LARGE_BINARY},
    {"date32", MW_T_DATE32},       {"date64", MW_T_DATE64},
};

#define TYPE_LIST \
  "a type (int8..int64, uint8..uint64, float16, float, double, bool, string, large_string, " \
  "binary, large_binary, fixed_size_binary<N>, date32, date64, time32<s|ms>, time64<us|ns>, " \
  "timestamp<unit[, tz]>, decimal128<P,S>, fixed_size_list<T,D>, list<T>, large_list<T>, " \
  "struct<name:T, ...>)"

static int parse_type(lex_t *l, mw_field_t *f, int depth);
static int parse_field(lex_t *l, mw_field_t *parent, mw_schema_t *s, int depth);

/* `not null` after a type: *nullable = false. */
static int take_not_null(lex_t *l, bool *nullable) {
  assert(l != NULL);
  assert(nullable != NULL);
  *nullable = true;
  if (!tok_is(&l->t, "not")) return 0;
  lex_next(l);
  if (!tok_is(&l->t, "null")) return expected(l, "null (after not)");
  lex_next(l);
  *nullable = false;
  return 0;
}

/* A unit name at the current token, one of `allowed` (bit per mw_unit_t). */
static int take_unit(lex_t *l, unsigned allowed, const char *what, uint8_t *unit) {
  assert(l != NULL);
  assert(unit != NULL);
  int u = l->t.kind == TK_IDENT ? mw_unit_parse(l->t.p, l->t.len) : -EINVAL;
  if (u < 0 || !(allowed & (1u << u))) return expected(l, what);
  *unit = (uint8_t)u;
  lex_next(l);
  return 0;
}

/* `, tz>` of a timestamp: the raw text up to '>' (trimmed) is the zone. */
static int take_tz(lex_t *l, mw_field_t *f) {
  assert(l != NULL);
  assert(f != NULL);
  const char *p = l->t.p, *e = strchr(p, '>');
  size_t col = l->t.col;
  if (e == NULL) return expected(l, "a time zone and '>'");
  while (e > p && (e[-1] == ' ' || e[-1] == '\t')) e--;
  size_t n = (size_t)(e - p);
  if (n == 0 || n > MW_MAX_TZ_BYTES)
    return mw_err_set(l->err, -EINVAL, "%s: column %zu: time zone must be 1..%d characters", l->what,
                      col, MW_MAX_TZ_BYTES);
  for (size_t i = 0; i < n; i++) {
    if ((unsigned char)p[i] <= 0x20 || (unsigned char)p[i] >= 0x7f || p[i] == ',' || p[i] == '<')
      return mw_err_set(l->err, -EINVAL, "%s: column %zu: time zone \"%.*s\" has a character "
                        "that is not allowed", l->what, col, (int)n, p);
    /* Lance 12 splits "timestamp:us:<tz>" on ':' and refuses such a table */
    if (p[i] == ':')
      return mw_err_set(l->err, -EINVAL, "%s: column %zu: time zone \"%.*s\": Lance 12 cannot "
                        "store a zone with ':' (write a name such as UTC or Asia/Kolkata)",
                        l->what, col, (int)n, p);
  }
  if ((f->tz = strndup(p, n)) == NULL) return mw_err_set(l->err, -ENOMEM, "%s: out of memory", l->what);
  l->pos = e;
  lex_next(l);
  return 0;
}

/* decimal128<precision, scale>: the two numbers after the '<'. */
static int parse_decimal_params(lex_t *l, mw_field_t *f) {
  assert(l != NULL);
  assert(f->type == MW_T_DECIMAL128);
  long d, sc;
  int rc;
  if ((rc = take_number(l, "the precision", 1, MW_MAX_DECIMAL_PRECISION, &d)) < 0) return rc;
  if ((rc = expect_punct(l, ',', "',' and the scale")) < 0) return rc;
  if ((rc = take_number(l, "the scale", 0, d, &sc)) < 0) return rc;
  f->precision = (uint8_t)d;
  f->scale = (int8_t)sc;
  return 0;
}

/* fixed_size_list<item type, size>: the item (a number type) and the size. */
static int parse_fsl_params(lex_t *l, mw_field_t *f, int depth) {
  assert(l != NULL);
  assert(f->type == MW_T_FSL);
  mw_field_t item;
  memset(&item, 0, sizeof item);
  tok_t it = l->t;
  int rc = parse_type(l, &item, depth + 1);
  if (rc < 0) {
    mw_field_free(&item);
    return rc;
  }
  bool ok = mw_type_info(item.type)->fsl_item;
  mw_type_t t = item.type;
  mw_field_free(&item);
  if (!ok) {
    char g[80];
    return mw_err_set(l->err, -EINVAL, "%s: column %zu: a fixed_size_list item must be a number "
                      "type (int8..uint64, float16, float, double), got %s", l->what, it.col,
                      tok_show(&it, g, sizeof g));
  }
  long d;
  if ((rc = expect_punct(l, ',', "','")) < 0) return rc;
  if ((rc = take_number(l, "the list size", 1, MW_MAX_FSL_DIM, &d)) < 0) return rc;
  f->item_type = t;
  f->fsl_dim = (int32_t)d;
  return 0;
}

static int parse_param_type(lex_t *l, mw_field_t *f, int depth) {
  assert(l != NULL);
  assert(f != NULL);
  assert(depth <= MW_MAX_NESTING); /* parse_type refused deeper */
  int rc;
  long d;
  lex_next(l);
  if ((rc = expect_punct(l, '<', "'<'")) < 0) return rc;
  switch (f->type) {
    case MW_T_FIXED_BINARY:
      if ((rc = take_number(l, "the byte width", 1, MW_MAX_FIXED_BINARY_BYTES, &d)) < 0) return rc;
      f->byte_width = (int32_t)d;
      break;
    case MW_T_TIME32:
      if ((rc = take_unit(l, 1u << MW_UNIT_S | 1u << MW_UNIT_MS, "s or ms", &f->unit)) < 0) return rc;
      break;
    case MW_T_TIME64:
      if ((rc = take_unit(l, 1u << MW_UNIT_US | 1u << MW_UNIT_NS, "us or ns", &f->unit)) < 0) return rc;
      break;
    case MW_T_TIMESTAMP:
      if ((rc = take_unit(l, 0xF, "a unit (s, ms, us, ns)", &f->unit)) < 0) return rc;
      if (l->t.kind == TK_PUNCT && *l->t.p == ',') {
        lex_next(l);
        if ((rc = take_tz(l, f)) < 0) return rc;
      }
      break;
    case MW_T_DECIMAL128:
      if ((rc = parse_decimal_params(l, f)) < 0) return rc;
      break;
    case MW_T_FSL:
      if ((rc = parse_fsl_params(l, f, depth)) < 0) return rc;
      break;
    case MW_T_LIST: case MW_T_LARGE_LIST: {
      int k = mw_field_add_child(f, "item", MW_T_INT32, true);
      if (k < 0) return mw_err_set(l->err, k, "%s: out of memory", l->what);
      if ((rc = parse_type(l, &f->children[0], depth + 1)) < 0) return rc;
      if ((rc = take_not_null(l, &f->children[0].nullable)) < 0) return rc;
      break;
    }
    case MW_T_STRUCT:
      for (;;) {
        if ((rc = parse_field(l, f, NULL, depth + 1)) < 0) return rc;
        if (l->t.kind != TK_PUNCT || *l->t.p != ',') break;
        lex_next(l);
      }
      break;
    default:
      assert(!"a type without parameters");
      return -EINVAL;
  }
  return expect_punct(l, '>', "'>'");
}

/* Parse a type at the current token into f (type, parameters, children). */
static int parse_type(lex_t *l, mw_field_t *f, int depth) {
  assert(l != NULL);
  assert(f != NULL);
  if (l->t.kind != TK_IDENT) return expected(l, TYPE_LIST);
  if (depth > MW_MAX_NESTING)
    return mw_err_set(l->err, -EINVAL, "%s: column %zu: types nested deeper than %d levels",
                      l->what, l->t.col, MW_MAX_NESTING);
  for (size_t i = 0; i < sizeof type_names / sizeof type_names[0]; i++) {
    if (tok_is(&l->t, type_names[i].name)) {
      f->type = type_names[i].type;
      lex_next(l);
      return 0;
    }
  }
  static const struct {
    const char *name;
    mw_type_t type;
  } param[] = {
      {"fixed_size_binary", MW_T_FIXED_BINARY}, {"time32", MW_T_TIME32}, {"time64", MW_T_TIME64},
      {"timestamp", MW_T_TIMESTAMP},           {"decimal128", MW_T_DECIMAL128},
      {"fixed_size_list", MW_T_FSL},           {"list", MW_T_LIST},
      {"large_list", MW_T_LARGE_LIST},         {"struct", MW_T_STRUCT},
  };
  for (size_t i = 0; i < sizeof param / sizeof param[0]; i++) {
    if (!tok_is(&l->t, param[i].name)) continue;
    f->type = param[i].type;
    f->unit = f->type == MW_T_TIMESTAMP ? MW_UNIT_US : f->unit;
    /* a bare `timestamp` is timestamp<us> (Arrow's and LanceDB's default) */
    if (f->type == MW_T_TIMESTAMP && lex_peek(l) != '<') {
      lex_next(l);
      return 0;
    }
    return parse_param_type(l, f, depth);
  }
  return expected(l, TYPE_LIST);
}

/* `name:type [not null]` into the schema (parent NULL) or a struct. */
static int parse_field(lex_t *l, mw_field_t *parent, mw_schema_t *s, int depth) {
  assert(l != NULL);
  char name[MW_SCHEMA_NAME_MAX_BYTES + 1];
  tok_t nt = l->t;
  if (nt.kind != TK_IDENT) return expected(l, parent ? "a struct field name" : "a column name");
  if (nt.len > MW_SCHEMA_NAME_MAX_BYTES)
    return mw_err_set(l->err, -EINVAL, "%s: column %zu: name longer than %d bytes", l->what,
                      nt.col, MW_SCHEMA_NAME_MAX_BYTES);
  memcpy(name, nt.p, nt.len);
  name[nt.len] = 0;
  if (parent == NULL && strcmp(name, "_tombstone") == 0)
    return mw_err_set(l->err, -EINVAL, "%s: column %zu: \"_tombstone\" is reserved", l->what,
                      nt.col);
  bool dup = false;
  if (parent == NULL) dup = mw_schema_find(s, name) >= 0;
  for (uint32_t i = 0; parent && i < parent->n_children; i++)
    dup |= strcmp(parent->children[i].name, name) == 0;
  if (dup)
    return mw_err_set(l->err, -EINVAL, "%s: column %zu: duplicate %s \"%s\"", l->what, nt.col,
                      parent ? "struct field" : "column", name);
  if (parent == NULL && s->n_fields >= MW_MAX_FIELDS)
    return mw_err_set(l->err, -EINVAL, "%s: column %zu: more than %d columns", l->what, nt.col,
                      MW_MAX_FIELDS);
  if (parent != NULL && parent->n_children >= MW_MAX_STRUCT_FIELDS)
    return mw_err_set(l->err, -EINVAL, "%s: column %zu: more than %d struct fields", l->what,
                      nt.col, MW_MAX_STRUCT_FIELDS);
  lex_next(l);
  int rc;
  if ((rc = expect_punct(l, ':', parent ? "':' after the struct field name" : "':' after the column name")) < 0)
    return rc;
  int idx = parent ? mw_field_add_child(parent, name, MW_T_INT32, true)
                   : mw_schema_add(s, name, MW_T_INT32, true);
  if (idx < 0) return mw_err_set(l->err, idx, "%s: out of memory", l->what);
  mw_field_t *f = parent ? &parent->children[idx] : &s->fields[idx];
  if ((rc = parse_type(l, f, depth)) < 0) return rc;
  if ((rc = take_not_null(l, &f->nullable)) < 0) return rc;
  char why[160];
  if (mw_field_check(f, why, sizeof why) < 0)
    return mw_err_set(l->err, -EINVAL, "%s: column %zu: %s", l->what, nt.col, why);
  return 0;
}

int mw_schema_text_parse(const char *text, mw_schema_t *out, mw_err_t *err) {
  assert(out != NULL);
  mw_schema_init(out);
  int rc = check_text("schema", text, err);
  if (rc < 0) return rc;
  lex_t l;
  lex_init(&l, "schema", text, err);
  if (l.t.kind == TK_END) return mw_err_set(err, -EINVAL, "schema: no columns");
  for (;;) {
    if ((rc = parse_field(&l, NULL, out, 0)) < 0) goto fail;
    if (l.t.kind == TK_END) break;
    if ((rc = expect_punct(&l, ',', "',' or \"not null\" or end of text")) < 0) goto fail;
  }
  assert(out->n_fields > 0);
  return 0;
fail:
  mw_schema_free(out);
  return rc;
}

/* ------------------------------------------------------------- primary key */

/* The key types Lance 12 accepts (types.c `pk`; setUnenforcedPrimaryKey's
 * refusals are in tests/lance/data/bloom_types/). */
static bool pk_type_ok(mw_type_t t) { return mw_type_info(t)->pk; }

/* Column name at the current token -> field index. */
static int take_column(lex_t *l, const mw_schema_t *s, tok_t *at) {
  assert(l != NULL);
  assert(at != NULL);
  char name[MW_SCHEMA_NAME_MAX_BYTES + 1], g[80];
  *at = l->t;
  if (l->t.kind != TK_IDENT) return expected(l, "a column name");
  int idx = -ENOENT;
  if (l->t.len <= MW_SCHEMA_NAME_MAX_BYTES) {
    memcpy(name, l->t.p, l->t.len);
    name[l->t.len] = 0;
    idx = mw_schema_find(s, name);
  }
  if (idx < 0)
    return mw_err_set(l->err, -EINVAL, "%s: column %zu: no column named %s in the schema",
                      l->what, l->t.col, tok_show(&l->t, g, sizeof g));
  lex_next(l);
  return idx;
}

int mw_schema_pk_text_apply(mw_schema_t *s, const char *text, mw_err_t *err) {
  assert(s != NULL);
  int rc = check_text("primary_key", text, err);
  if (rc < 0) return rc;
  lex_t l;
  lex_init(&l, "primary_key", text, err);
  tok_t at;
  int idx = take_column(&l, s, &at);
  if (idx < 0) return idx;
  if (tok_is(&l.t, ","))
    return mw_err_set(err, -ENOTSUP,
                      "primary_key: column %zu: compound primary keys are not supported "
                      "(LanceDB 0.39 refuses them); name one column", l.t.col);
  if (l.t.kind != TK_END) return expected(&l, "end of text (one column)");
  mw_field_t *f = &s->fields[idx];
  if (f->nullable)
    return mw_err_set(err, -EINVAL, "primary_key: column %zu: \"%s\" must be declared not null",
                      at.col, f->name);
  if (!pk_type_ok(f->type)) {
    char t[MW_FIELD_TEXT_BYTES];
    return mw_err_set(err, -EINVAL,
                      "primary_key: column %zu: \"%s\" is %s; a key must be int32, int64, string, "
                      "large_string, binary or large_binary (the key types Lance 12 accepts and "
                      "can flush)", at.col, f->name, mw_field_type_text(f, t, sizeof t));
  }
  for (size_t i = 0; i < s->n_fields; i++)
    if (s->fields[i].pk_position != 0 && (int)i != idx)
      return mw_err_set(err, -EEXIST, "primary_key: \"%s\" is already the primary key",
                        s->fields[i].name);
  if ((rc = mw_kvs_set(&f->meta, MW_PK_POSITION_KEY, "1", 1)) < 0)
    return mw_err_set(err, rc, "primary_key: out of memory");
  f->pk_position = 1;
  return idx;
}

/* ------------------------------------------------------------------- spec */

const char *mw_shard_kind_name(mw_shard_kind_t k) {
  switch (k) {
    case MW_SHARD_UNSHARDED: return "unsharded";
    case MW_SHARD_BUCKET: return "bucket";
    case MW_SHARD_IDENTITY: return "identity";
  }
  return "?";
}

static bool bucket_type_ok(mw_type_t t) { return mw_type_info(t)->bucket; }

static bool identity_type_ok(mw_type_t t) { return mw_type_info(t)->identity; }

int mw_shard_spec_text_parse(const char *text, const mw_schema_t *s, mw_shard_spec_t *out,
                             mw_err_t *err) {
  assert(s != NULL);
  assert(out != NULL);
  int rc = check_text("spec", text, err);
  if (rc < 0) return rc;
  lex_t l;
  lex_init(&l, "spec", text, err);
  *out = (mw_shard_spec_t){MW_SHARD_UNSHARDED, -1, 0};
  tok_t kind = l.t, at;
  if (tok_is(&kind, "unsharded")) {
    lex_next(&l);
  } else if (tok_is(&kind, "bucket") || tok_is(&kind, "identity")) {
    bool bucket = tok_is(&kind, "bucket");
    lex_next(&l);
    if ((rc = expect_punct(&l, '(', "'('")) < 0) return rc;
    int idx = take_column(&l, s, &at);
    if (idx < 0) return idx;
    mw_type_t t = s->fields[idx].type;
    char tt[MW_FIELD_TEXT_BYTES];
    if (bucket ? !bucket_type_ok(t) : !identity_type_ok(t))
      return mw_err_set(err, -EINVAL, "spec: column %zu: %s() cannot use \"%s\" of type %s (%s)",
                        at.col, bucket ? "bucket" : "identity", s->fields[idx].name,
                        mw_field_type_text(&s->fields[idx], tt, sizeof tt),
                        bucket ? "use an int32, int64, uint32, uint64, float, double, bool or "
                                 "string column"
                               : "use an int32, int64, uint32, uint64, string or bool column");
    long n = 0;
    if (bucket) {
      if ((rc = expect_punct(&l, ',', "',' and the number of buckets")) < 0) return rc;
      if ((rc = take_number(&l, "the number of buckets", 1, MW_SHARD_SPEC_MAX_BUCKETS, &n)) < 0)
        return rc;
    }
    if ((rc = expect_punct(&l, ')', "')'")) < 0) return rc;
    *out = (mw_shard_spec_t){bucket ? MW_SHARD_BUCKET : MW_SHARD_IDENTITY, idx, (uint32_t)n};
  } else {
    return expected(&l, "unsharded, bucket(column,N) or identity(column)");
  }
  if (l.t.kind != TK_END) return expected(&l, "end of text");
  return 0;
}

/* ----------------------------------------------------------------- shards */

void mw_shard_list_free(mw_shard_list_t *sl) {
  if (sl == NULL) return;
  for (size_t i = 0; sl->values && i < sl->n; i++) free(sl->values[i]);
  free(sl->values);
  free(sl->buckets);
  memset(sl, 0, sizeof *sl);
}

/* Is `v` (NUL-terminated) a valid identity value for type t? */
static bool identity_value_ok(mw_type_t t, const char *v) {
  if (t == MW_T_UTF8) return true;
  if (t == MW_T_BOOL) return strcmp(v, "true") == 0 || strcmp(v, "false") == 0;
  const char *p = v;
  bool neg = *p == '-';
  if (neg) p++;
  if (!is_digit(*p) || strlen(p) > 20) return false;
  for (const char *q = p; *q; q++)
    if (!is_digit(*q)) return false;
  errno = 0;
  unsigned long long m = strtoull(p, NULL, 10);
  if (errno == ERANGE) return false;
  switch (t) {
    case MW_T_INT32: return m <= (neg ? 2147483648ull : 2147483647ull);
    case MW_T_INT64: return m <= (neg ? 9223372036854775808ull : 9223372036854775807ull);
    case MW_T_UINT32: return (!neg || m == 0) && m <= 4294967295ull;
    case MW_T_UINT64: return !neg || m == 0;
    default: return false;
  }
}

static int add_bucket(mw_shard_list_t *out, const mw_shard_spec_t *spec, lex_t *l) {
  assert(out != NULL);
  assert(spec != NULL);
  assert(l != NULL);
  long b;
  char what[64];
  snprintf(what, sizeof what, "a bucket number (0..%u)", spec->num_buckets - 1);
  tok_t at = l->t;
  int rc = take_number(l, what, 0, (long)spec->num_buckets - 1, &b);
  if (rc < 0) return rc;
  for (size_t i = 0; i < out->n; i++)
    if (out->buckets[i] == (uint32_t)b)
      return mw_err_set(l->err, -EINVAL, "shards: column %zu: bucket %ld listed twice", at.col, b);
  out->buckets[out->n++] = (uint32_t)b;
  return 0;
}

static int add_value(mw_shard_list_t *out, const mw_field_t *f, const char *p, size_t len,
                     size_t col, mw_err_t *err) {
  assert(out != NULL);
  assert(f != NULL);
  while (len && (*p == ' ' || *p == '\t')) p++, len--, col++;
  while (len && (p[len - 1] == ' ' || p[len - 1] == '\t')) len--;
  if (len == 0) return mw_err_set(err, -EINVAL, "shards: column %zu: empty value", col);
  if (len > MW_SHARD_VALUE_MAX_BYTES)
    return mw_err_set(err, -EINVAL, "shards: column %zu: value longer than %d bytes", col,
                      MW_SHARD_VALUE_MAX_BYTES);
  char *v = strndup(p, len);
  if (v == NULL) return mw_err_set(err, -ENOMEM, "shards: out of memory");
  int rc = 0;
  if (!identity_value_ok(f->type, v))
    rc = mw_err_set(err, -EINVAL, "shards: column %zu: \"%.64s\" is not a valid %s value of "
                    "identity column \"%s\"", col, v, mw_type_name(f->type), f->name);
  for (size_t i = 0; rc == 0 && i < out->n; i++)
    if (strcmp(out->values[i], v) == 0)
      rc = mw_err_set(err, -EINVAL, "shards: column %zu: \"%.64s\" listed twice", col, v);
  if (rc < 0) {
    free(v);
    return rc;
  }
  out->values[out->n++] = v;
  return 0;
}

int mw_shard_list_text_parse(const char *text, const mw_schema_t *s, const mw_shard_spec_t *spec,
                             mw_shard_list_t *out, mw_err_t *err) {
  assert(s != NULL);
  assert(spec != NULL);
  assert(out != NULL);
  memset(out, 0, sizeof *out);
  int rc = check_text("shards", text, err);
  if (rc < 0) return rc;
  lex_t l;
  lex_init(&l, "shards", text, err);
  if (tok_is(&l.t, "all")) {
    lex_next(&l);
    if (l.t.kind != TK_END) return expected(&l, "end of text after all");
    out->all = true;
    return 0;
  }
  if (spec->kind == MW_SHARD_UNSHARDED) return expected(&l, "all (the spec is unsharded)");
  if (l.t.kind == TK_END) return expected(&l, "all or a list of shards");
  if (spec->kind == MW_SHARD_BUCKET) {
    assert(spec->num_buckets >= 1);
    assert(spec->num_buckets <= MW_SHARD_SPEC_MAX_BUCKETS);
    out->buckets = calloc(spec->num_buckets, sizeof *out->buckets);
    if (out->buckets == NULL) return mw_err_set(err, -ENOMEM, "shards: out of memory");
    for (;;) {
      if ((rc = add_bucket(out, spec, &l)) < 0) goto fail;
      if (l.t.kind == TK_END) return 0;
      if ((rc = expect_punct(&l, ',', "',' or end of text")) < 0) goto fail;
    }
  }
  assert(spec->column >= 0);
  assert((size_t)spec->column < s->n_fields);
  out->values = calloc(MW_SHARD_LIST_MAX, sizeof *out->values);
  if (out->values == NULL) return mw_err_set(err, -ENOMEM, "shards: out of memory");
  for (const char *p = text;;) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    if (out->n >= MW_SHARD_LIST_MAX) {
      rc = mw_err_set(err, -EINVAL, "shards: more than %d values", MW_SHARD_LIST_MAX);
      goto fail;
    }
    rc = add_value(out, &s->fields[spec->column], p, len, (size_t)(p - text) + 1, err);
    if (rc < 0) goto fail;
    if (comma == NULL) return 0;
    p = comma + 1;
  }
fail:
  mw_shard_list_free(out);
  return rc;
}

/* ---------------------------------------------------------------- helpers */

/* Highest field id in the tree of f, or -1. */
static int32_t max_id(const mw_field_t *f) {
  assert(f != NULL);
  int32_t m = f->id;
  for (uint32_t i = 0; i < f->n_children; i++) {
    int32_t c = max_id(&f->children[i]);
    if (c > m) m = c;
  }
  return m;
}

int mw_schema_tombstone_append(mw_schema_t *s) {
  assert(s != NULL);
  if (mw_schema_find(s, "_tombstone") >= 0) return -EEXIST;
  int32_t next = -1;
  size_t total = 0;
  for (size_t i = 0; i < s->n_fields; i++) {
    int32_t m = max_id(&s->fields[i]);
    if (m > next) next = m;
    total += mw_field_count(&s->fields[i]);
  }
  next = next >= 0 ? next + 1 : (int32_t)total;
  int idx = mw_schema_add(s, "_tombstone", MW_T_BOOL, false);
  if (idx < 0) return idx;
  s->fields[idx].id = next;
  assert((size_t)idx == s->n_fields - 1);
  return idx;
}

static int32_t ids_assign(mw_field_t *f, int32_t next) {
  assert(f != NULL);
  f->id = next++;
  for (uint32_t i = 0; i < f->n_children; i++) next = ids_assign(&f->children[i], next);
  return next;
}

void mw_schema_ids_assign(mw_schema_t *s) {
  assert(s != NULL);
  int32_t next = 0;
  for (size_t i = 0; i < s->n_fields; i++) next = ids_assign(&s->fields[i], next);
  assert(next >= (int32_t)s->n_fields);
}
