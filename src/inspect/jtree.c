/*
 * jtree.c — ordered JSON tree and its two renderings (see jtree.h).
 */
#include "inspect/jtree.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define INLINE_MAX_ITEMS 16

static void *xalloc(size_t n) {
  void *p = calloc(1, n ? n : 1);
  if (p == NULL) {
    fputs("memwal-inspect: out of memory\n", stderr);
    abort();
  }
  return p;
}

static j_t *mk(j_type_t t) {
  assert(t >= J_NULL);
  assert(t <= J_OBJ);
  j_t *v = xalloc(sizeof *v);
  v->t = t;
  return v;
}

j_t *j_obj(void) { return mk(J_OBJ); }
j_t *j_arr(void) { return mk(J_ARR); }
j_t *j_null(void) { return mk(J_NULL); }

j_t *j_strn(const void *p, size_t n) {
  assert(p != NULL || n == 0);
  j_t *v = mk(J_STR);
  v->s = xalloc(n + 1);
  if (n) memcpy(v->s, p, n);
  v->slen = n;
  return v;
}

j_t *j_str(const char *s) { return j_strn(s ? s : "", s ? strlen(s) : 0); }

j_t *j_int(int64_t x) {
  j_t *v = mk(J_INT);
  v->i = x;
  return v;
}

j_t *j_uint(uint64_t x) {
  j_t *v = mk(J_UINT);
  v->u = x;
  return v;
}

j_t *j_dbl(double x) {
  j_t *v = mk(J_DBL);
  v->d = x;
  return v;
}

j_t *j_bool(bool x) {
  j_t *v = mk(J_BOOL);
  v->b = x;
  return v;
}

j_t *j_fmt(const char *fmt, ...) {
  assert(fmt != NULL);
  va_list ap;
  va_start(ap, fmt);
  char *s = NULL;
  int n = vasprintf(&s, fmt, ap);
  va_end(ap);
  if (n < 0) abort();
  j_t *v = j_strn(s, (size_t)n);
  free(s);
  return v;
}

static void grow(j_t *c) {
  assert(c->t == J_ARR || c->t == J_OBJ);
  assert(c->n <= c->cap);
  if (c->n < c->cap) return;
  size_t cap = c->cap ? 2 * c->cap : 8;
  j_t **items = realloc(c->items, cap * sizeof *items);
  if (items == NULL) abort();
  c->items = items;
  if (c->t == J_OBJ) {
    char **keys = realloc(c->keys, cap * sizeof *keys);
    if (keys == NULL) abort();
    c->keys = keys;
  }
  c->cap = cap;
}

j_t *j_set(j_t *obj, const char *key, j_t *v) {
  assert(obj != NULL);
  assert(obj->t == J_OBJ);
  assert(key != NULL);
  assert(v != NULL);
  grow(obj);
  obj->keys[obj->n] = strdup(key);
  if (obj->keys[obj->n] == NULL) abort();
  obj->items[obj->n++] = v;
  return v;
}

j_t *j_push(j_t *arr, j_t *v) {
  assert(arr != NULL);
  assert(arr->t == J_ARR);
  assert(v != NULL);
  grow(arr);
  arr->items[arr->n++] = v;
  return v;
}

void j_free(j_t *v) {
  if (v == NULL) return;
  assert(v->n <= v->cap);
  assert(v->t == J_OBJ || v->keys == NULL); /* only objects own keys */
  for (size_t i = 0; i < v->n; i++) {
    j_free(v->items[i]);
    if (v->t == J_OBJ) free(v->keys[i]);
  }
  free(v->items);
  free(v->keys);
  free(v->s);
  free(v);
}

/* ------------------------------------------------------------------ JSON */

/* Length of the valid UTF-8 sequence at p (0 if invalid). */
static size_t utf8_len(const unsigned char *p, size_t n) {
  assert(n > 0);
  unsigned char c = p[0];
  size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (k == 0 || k > n || (k == 2 && c < 0xc2)) return 0;
  for (size_t i = 1; i < k; i++)
    if ((p[i] & 0xc0) != 0x80) return 0;
  if (k == 3 && c == 0xe0 && p[1] < 0xa0) return 0;
  if (k == 3 && c == 0xed && p[1] >= 0xa0) return 0;
  if (k == 4 && ((c == 0xf0 && p[1] < 0x90) || c > 0xf4 || (c == 0xf4 && p[1] >= 0x90))) return 0;
  return k;
}

static void json_str(FILE *out, const char *s, size_t n) {
  assert(out != NULL);
  assert(s != NULL || n == 0);
  const unsigned char *p = (const unsigned char *)s;
  fputc('"', out);
  for (size_t i = 0; i < n;) {
    unsigned char c = p[i];
    if (c == '"' || c == '\\') fprintf(out, "\\%c", c), i++;
    else if (c == '\n') fputs("\\n", out), i++;
    else if (c == '\t') fputs("\\t", out), i++;
    else if (c == '\r') fputs("\\r", out), i++;
    else if (c < 0x20) fprintf(out, "\\u%04x", c), i++;
    else {
      size_t k = utf8_len(p + i, n - i);
      if (k == 0) {
        fprintf(out, "\\u%04x", c); /* a raw byte, not a character */
        i++;
      } else {
        fwrite(p + i, 1, k, out);
        i += k;
      }
    }
  }
  fputc('"', out);
}

static void json_num(FILE *out, double d) {
  assert(out != NULL);
  if (isnan(d) || isinf(d)) { /* not JSON numbers */
    fprintf(out, "\"%s\"", isnan(d) ? (signbit(d) ? "-NaN" : "NaN") : d > 0 ? "Infinity" : "-Infinity");
    return;
  }
  fprintf(out, "%.17g", d);
}

static void json_rec(FILE *out, const j_t *v) {
  assert(v != NULL);
  assert(v->t == J_ARR || v->t == J_OBJ || v->n == 0); /* only containers hold items */
  switch (v->t) {
    case J_NULL: fputs("null", out); break;
    case J_BOOL: fputs(v->b ? "true" : "false", out); break;
    case J_INT: fprintf(out, "%" PRId64, v->i); break;
    case J_UINT: fprintf(out, "%" PRIu64, v->u); break;
    case J_DBL: json_num(out, v->d); break;
    case J_STR: json_str(out, v->s, v->slen); break;
    case J_ARR:
    case J_OBJ:
      fputc(v->t == J_ARR ? '[' : '{', out);
      for (size_t i = 0; i < v->n; i++) {
        if (i) fputc(',', out);
        if (v->t == J_OBJ) {
          json_str(out, v->keys[i], strlen(v->keys[i]));
          fputc(':', out);
        }
        json_rec(out, v->items[i]);
      }
      fputc(v->t == J_ARR ? ']' : '}', out);
      break;
  }
}

void j_print_json(FILE *out, const j_t *v) {
  assert(out != NULL);
  assert(v != NULL);
  json_rec(out, v);
  fputc('\n', out);
}

/* ------------------------------------------------------------------ text */

static bool scalar(const j_t *v) { return v->t != J_ARR && v->t != J_OBJ; }

static void text_scalar(FILE *out, const j_t *v) {
  assert(v != NULL);
  assert(v->t != J_ARR);
  assert(v->t != J_OBJ);
  switch (v->t) {
    case J_NULL: fputs("null", out); break;
    case J_BOOL: fputs(v->b ? "true" : "false", out); break;
    case J_INT: fprintf(out, "%" PRId64, v->i); break;
    case J_UINT: fprintf(out, "%" PRIu64, v->u); break;
    case J_DBL:
      if (isnan(v->d)) fputs(signbit(v->d) ? "-NaN" : "NaN", out);
      else fprintf(out, "%.17g", v->d);
      break;
    case J_STR: {
      bool plain = v->slen > 0 && memchr(v->s, '\n', v->slen) == NULL && strlen(v->s) == v->slen;
      if (plain) fputs(v->s, out);
      else json_str(out, v->s, v->slen);
      break;
    }
    default: break;
  }
}

static bool inline_array(const j_t *v) {
  assert(v != NULL);
  if (v->t != J_ARR || v->n > INLINE_MAX_ITEMS) return false;
  for (size_t i = 0; i < v->n; i++)
    if (!scalar(v->items[i])) return false;
  return true;
}

static void text_rec(FILE *out, const j_t *v, int indent);

static void text_value_after_key(FILE *out, const j_t *v, int indent) {
  assert(v != NULL);
  assert(indent >= 0);
  if (scalar(v)) {
    fputc(' ', out);
    text_scalar(out, v);
    fputc('\n', out);
  } else if (inline_array(v) || v->n == 0) {
    fputs(v->t == J_OBJ ? " {}" : " [", out);
    for (size_t i = 0; v->t == J_ARR && i < v->n; i++) {
      if (i) fputs(", ", out);
      text_scalar(out, v->items[i]);
    }
    if (v->t == J_ARR) fputc(']', out);
    fputc('\n', out);
  } else {
    fputc('\n', out);
    text_rec(out, v, indent + 2);
  }
}

static void text_rec(FILE *out, const j_t *v, int indent) {
  assert(v != NULL);
  assert(indent >= 0);
  if (v->t == J_OBJ) {
    for (size_t i = 0; i < v->n; i++) {
      fprintf(out, "%*s%s:", indent, "", v->keys[i]);
      text_value_after_key(out, v->items[i], indent);
    }
  } else if (v->t == J_ARR) {
    for (size_t i = 0; i < v->n; i++) {
      const j_t *e = v->items[i];
      if (e->t == J_OBJ && e->n > 0) {
        /* "- key: value" then the other keys aligned under it */
        fprintf(out, "%*s- %s:", indent, "", e->keys[0]);
        text_value_after_key(out, e->items[0], indent + 2);
        for (size_t k = 1; k < e->n; k++) {
          fprintf(out, "%*s  %s:", indent, "", e->keys[k]);
          text_value_after_key(out, e->items[k], indent + 2);
        }
      } else if (scalar(e) || inline_array(e) || e->n == 0) {
        fprintf(out, "%*s-", indent, "");
        text_value_after_key(out, e, indent);
      } else {
        fprintf(out, "%*s-\n", indent, "");
        text_rec(out, e, indent + 2);
      }
    }
  } else {
    fprintf(out, "%*s", indent, "");
    text_scalar(out, v);
    fputc('\n', out);
  }
}

void j_print_text(FILE *out, const j_t *v) { text_rec(out, v, 0); }
