/*
 * jsonrow.c — schema-directed NDJSON row parser (see jsonrow.h).
 *
 * Why hand-written: a producer line is one flat object whose members map 1:1
 * onto the table's columns, e.g. (60 bytes)
 *
 *   {"id":123,"name":"abc","v":1.5,"vec":[0.5,1,-2e-3]}
 *
 * Debian's JSON libraries either build a DOM (json-c, jansson: one malloc per
 * value, then a second walk to copy into the columns) or call back per token
 * (yajl: a callback per value plus its own buffer copies and no way to tell it
 * the expected type). Both cost several times the work of the line itself and
 * neither checks our mapping rules. A single forward scan that knows the
 * schema does all of it in one pass: the key is looked up (first guess: the
 * field after the previous one, since producers send columns in order; then
 * an open-addressing hash), and the value is parsed by that column's rules
 * straight into its builder. Plain strings are appended from the line itself;
 * only strings with escapes, base64 and numbers that miss the exact fast path
 * go through a reused scratch buffer.
 *
 * Numbers: the integer mantissa is accumulated while scanning. Floats take
 * Clinger's fast path (mantissa <= 2^53 and |exp10| <= 22 for float64,
 * <= 2^24 and <= 10 for float32: one correctly rounded IEEE operation), else
 * strtod_l/strtof_l in the C locale, so every value is correctly rounded
 * (2^53+1 -> 2^53). An overflow to infinity (1e400) is a type error; an
 * underflow rounds to zero or a subnormal as IEEE says.
 *
 * Rollback: each column receives exactly one append per row, so on any error
 * every column longer than batch->n_rows is truncated back with
 * mw_column_truncate (batch.c). Duplicate keys are found with a per-field
 * row stamp, so nothing is cleared per row.
 */
#include "net/jsonrow.h"

#include "common/utf8.h"

#include <assert.h>
#include <errno.h>
#include <float.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ctx {
  mw_jsonrow_parser_t *p;
  const uint8_t *s;   /* line start */
  const uint8_t *e;   /* line end */
  const uint8_t *pos; /* cursor */
  mw_batch_t *out;
  mw_jsonrow_error_t *err;
  bool is_delete;
} ctx_t;

typedef struct num {
  const uint8_t *start;
  size_t len;
  uint64_t mant;      /* all digits, integer and fraction, when !ovf */
  int32_t frac_digits;
  int32_t exp;        /* signed decimal exponent after e/E, saturated */
  bool neg, ovf, frac_exp;
} num_t;

const char *mw_jsonrow_class_name(mw_jsonrow_class_t cls) {
  switch (cls) {
    case MW_JSONROW_OK: return "ok";
    case MW_JSONROW_E_PARSE: return "parse";
    case MW_JSONROW_E_SCHEMA: return "schema";
    case MW_JSONROW_E_TYPE: return "type";
    case MW_JSONROW_E_PK: return "pk";
    case MW_JSONROW_E_INTERNAL: return "internal";
  }
  return "?";
}

/* ------------------------------------------------------------------ errors */

static int fail_code(ctx_t *c, int code, mw_jsonrow_class_t cls, const uint8_t *at,
                     const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int fail_code(ctx_t *c, int code, mw_jsonrow_class_t cls, const uint8_t *at,
                     const char *fmt, ...) {
  assert(code < 0);
  if (c->err == NULL || c->err->cls != MW_JSONROW_OK) return code;
  c->err->cls = cls;
  c->err->offset = at ? (size_t)(at - c->s) : 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->err->msg, sizeof c->err->msg, fmt, ap);
  va_end(ap);
  return code;
}

#define FAIL(c, cls, at, ...) fail_code((c), -EBADMSG, (cls), (at), __VA_ARGS__)
#define NOMEM(c) fail_code((c), -ENOMEM, MW_JSONROW_E_INTERNAL, (c)->pos, "out of memory")

/* Printable, bounded copy of untrusted bytes for a message. */
static const char *shown(const uint8_t *p, size_t n, char *out, size_t out_len) {
  assert(out_len >= 8);
  size_t o = 0, i = 0;
  for (; i < n && o + 8 < out_len; i++) {
    uint8_t b = p[i];
    if (b >= 0x20 && b < 0x7f && b != '"' && b != '\\') out[o++] = (char)b;
    else o += (size_t)snprintf(out + o, out_len - o, "\\x%02x", b);
  }
  if (i < n) memcpy(out + o, "...", 3), o += 3;
  out[o] = 0;
  return out;
}

static const char *byte_desc(ctx_t *c, const uint8_t *at, char *out, size_t out_len) {
  if (at >= c->e) return "end of line";
  if (*at >= 0x21 && *at < 0x7f) snprintf(out, out_len, "'%c'", *at);
  else snprintf(out, out_len, "byte 0x%02x", *at);
  return out;
}

static const char *got_kind(uint8_t ch) {
  switch (ch) {
    case '"': return "a string";
    case 't': case 'f': return "a boolean";
    case 'n': return "null";
    case '[': return "an array";
    case '{': return "an object";
    default: return "a number";
  }
}

static const char *expected_what(const mw_field_t *f, char *out, size_t out_len) {
  switch (f->type) {
    case MW_T_INT32: case MW_T_INT64: case MW_T_UINT32: case MW_T_UINT64: return "an integer";
    case MW_T_FLOAT32: case MW_T_FLOAT64: return "a number";
    case MW_T_BOOL: return "true or false";
    case MW_T_UTF8: return "a string";
    case MW_T_BINARY: return "a base64 string";
    case MW_T_FSL_F32: snprintf(out, out_len, "an array of %d numbers", f->fsl_dim); return out;
  }
  return "a value";
}

static const char *type_desc(const mw_field_t *f, char *out, size_t out_len) {
  if (f->type == MW_T_FSL_F32) {
    snprintf(out, out_len, "fixed_size_list<float32,%d>", f->fsl_dim);
    return out;
  }
  return mw_type_name(f->type);
}

static int fail_mismatch(ctx_t *c, const mw_field_t *f, const uint8_t *at) {
  char w[48], t[48];
  return FAIL(c, MW_JSONROW_E_TYPE, at, "field \"%s\": expected %s (%s), got %s", f->name,
              expected_what(f, w, sizeof w), type_desc(f, t, sizeof t), got_kind(*at));
}

/* --------------------------------------------------------------- scanning */

static inline const uint8_t *skip_ws(const uint8_t *p, const uint8_t *e) {
  while (p < e && (*p == ' ' || *p == '\t')) p++;
  return p;
}

static inline bool is_digit(uint8_t b) { return b >= '0' && b <= '9'; }

static int hexval(uint8_t b) {
  if (b >= '0' && b <= '9') return b - '0';
  if (b >= 'a' && b <= 'f') return b - 'a' + 10;
  if (b >= 'A' && b <= 'F') return b - 'A' + 10;
  return -1;
}

/* Four hex digits at p (p + 4 <= e checked by the caller); -1 if not hex. */
static int32_t hex4(const uint8_t *p) {
  int32_t v = 0;
  for (int i = 0; i < 4; i++) {
    int h = hexval(p[i]);
    if (h < 0) return -1;
    v = v << 4 | h;
  }
  return v;
}

/* Scan the string whose opening quote is at c->pos; check UTF-8, control
 * characters and escapes (incl. surrogate pairing). On return *raw, *raw_len
 * span the bytes between the quotes and c->pos is past the closing quote. */
static int scan_string(ctx_t *c, const uint8_t **raw, size_t *raw_len, bool *escaped) {
  const uint8_t *p = c->pos + 1, *e = c->e;
  assert(*c->pos == '"');
  *escaped = false;
  for (;;) {
    while (p < e && *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\') p++;
    if (p >= e) return FAIL(c, MW_JSONROW_E_PARSE, c->pos, "at byte %zu: unterminated string",
                            (size_t)(c->pos - c->s));
    uint8_t b = *p;
    if (b == '"') break;
    if (b < 0x20)
      return FAIL(c, MW_JSONROW_E_PARSE, p, "at byte %zu: control character 0x%02x in a string",
                  (size_t)(p - c->s), b);
    if (b >= 0x80) {
      size_t n = mw_utf8_seq(p, (size_t)(e - p));
      if (n == 0)
        return FAIL(c, MW_JSONROW_E_PARSE, p, "at byte %zu: invalid UTF-8", (size_t)(p - c->s));
      p += n;
      continue;
    }
    /* backslash */
    *escaped = true;
    if (e - p < 2) return FAIL(c, MW_JSONROW_E_PARSE, p, "at byte %zu: unterminated string",
                               (size_t)(c->pos - c->s));
    uint8_t x = p[1];
    if (x == '"' || x == '\\' || x == '/' || x == 'b' || x == 'f' || x == 'n' || x == 'r' ||
        x == 't') {
      p += 2;
      continue;
    }
    if (x != 'u')
      return FAIL(c, MW_JSONROW_E_PARSE, p, "at byte %zu: invalid escape '\\%c'",
                  (size_t)(p - c->s), x >= 0x20 && x < 0x7f ? x : '?');
    int32_t u = e - p >= 6 ? hex4(p + 2) : -1;
    if (u < 0) return FAIL(c, MW_JSONROW_E_PARSE, p, "at byte %zu: \\u needs 4 hex digits",
                           (size_t)(p - c->s));
    if (u >= 0xDC00 && u <= 0xDFFF)
      return FAIL(c, MW_JSONROW_E_PARSE, p, "at byte %zu: lone low surrogate \\u%04X",
                  (size_t)(p - c->s), (unsigned)u);
    if (u >= 0xD800 && u <= 0xDBFF) {
      int32_t l = e - p >= 12 && p[6] == '\\' && p[7] == 'u' ? hex4(p + 8) : -1;
      if (l < 0xDC00 || l > 0xDFFF)
        return FAIL(c, MW_JSONROW_E_PARSE, p,
                    "at byte %zu: high surrogate \\u%04X not followed by a low surrogate",
                    (size_t)(p - c->s), (unsigned)u);
      p += 12;
    } else {
      p += 6;
    }
  }
  *raw = c->pos + 1;
  *raw_len = (size_t)(p - *raw);
  c->pos = p + 1;
  return 0;
}

static uint8_t *put_utf8(uint8_t *o, uint32_t cp) {
  if (cp < 0x80) {
    *o++ = (uint8_t)cp;
  } else if (cp < 0x800) {
    *o++ = (uint8_t)(0xC0 | cp >> 6);
    *o++ = (uint8_t)(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *o++ = (uint8_t)(0xE0 | cp >> 12);
    *o++ = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
    *o++ = (uint8_t)(0x80 | (cp & 0x3F));
  } else {
    *o++ = (uint8_t)(0xF0 | cp >> 18);
    *o++ = (uint8_t)(0x80 | (cp >> 12 & 0x3F));
    *o++ = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
    *o++ = (uint8_t)(0x80 | (cp & 0x3F));
  }
  return o;
}

/* Decode a string already checked by scan_string into `out` (reset first).
 * The decoded form is never longer than the raw one. */
static int decode_string(const uint8_t *raw, size_t n, mw_buf_t *out) {
  mw_buf_reset(out);
  if (mw_buf_reserve(out, n + 1) < 0) return -ENOMEM;
  uint8_t *o = out->data;
  const uint8_t *p = raw, *e = raw + n;
  while (p < e) {
    if (*p != '\\') {
      *o++ = *p++;
      continue;
    }
    uint8_t x = p[1];
    p += 2;
    switch (x) {
      case 'b': *o++ = '\b'; break;
      case 'f': *o++ = '\f'; break;
      case 'n': *o++ = '\n'; break;
      case 'r': *o++ = '\r'; break;
      case 't': *o++ = '\t'; break;
      case 'u': {
        uint32_t cp = (uint32_t)hex4(p);
        p += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          uint32_t lo = (uint32_t)hex4(p + 2);
          p += 6;
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        o = put_utf8(o, cp);
        break;
      }
      default: *o++ = x; break; /* " \ / */
    }
  }
  out->len = (size_t)(o - out->data);
  assert(out->len <= n);
  return 0;
}

/* Scan a JSON number at c->pos (grammar-checked; parse error if malformed). */
static int scan_number(ctx_t *c, num_t *n) {
  const uint8_t *p = c->pos, *e = c->e;
  memset(n, 0, sizeof *n);
  n->start = p;
  if (p < e && *p == '-') n->neg = true, p++;
  if (p >= e || !is_digit(*p)) goto bad;
  if (*p == '0') {
    p++;
    if (p < e && is_digit(*p))
      return FAIL(c, MW_JSONROW_E_PARSE, p, "at byte %zu: leading zero in a number",
                  (size_t)(c->pos - c->s));
  } else {
    for (; p < e && is_digit(*p); p++) {
      uint64_t d = (uint64_t)(*p - '0');
      if (n->mant > (UINT64_MAX - d) / 10) n->ovf = true;
      else n->mant = n->mant * 10 + d;
    }
  }
  if (p < e && *p == '.') {
    p++;
    n->frac_exp = true;
    if (p >= e || !is_digit(*p)) goto bad;
    for (; p < e && is_digit(*p); p++) {
      uint64_t d = (uint64_t)(*p - '0');
      if (n->mant > (UINT64_MAX - d) / 10) n->ovf = true;
      else n->mant = n->mant * 10 + d, n->frac_digits++;
    }
  }
  if (p < e && (*p == 'e' || *p == 'E')) {
    p++;
    n->frac_exp = true;
    bool eneg = false;
    if (p < e && (*p == '+' || *p == '-')) eneg = *p == '-', p++;
    if (p >= e || !is_digit(*p)) goto bad;
    for (; p < e && is_digit(*p); p++)
      if (n->exp < 100000) n->exp = n->exp * 10 + (*p - '0');
    if (eneg) n->exp = -n->exp;
  }
  n->len = (size_t)(p - n->start);
  c->pos = p;
  return 0;
bad:
  return FAIL(c, MW_JSONROW_E_PARSE, c->pos, "at byte %zu: malformed number",
              (size_t)(c->pos - c->s));
}

/* Check the literal `lit` at c->pos and step over it. */
static int scan_literal(ctx_t *c, const char *lit, size_t n) {
  if ((size_t)(c->e - c->pos) < n || memcmp(c->pos, lit, n) != 0)
    return FAIL(c, MW_JSONROW_E_PARSE, c->pos, "at byte %zu: invalid literal (expected %s)",
                (size_t)(c->pos - c->s), lit);
  c->pos += n;
  return 0;
}

/* Skip any JSON value (members the row does not use), depth-limited. */
static int skip_value(ctx_t *c, uint32_t depth) {
  char d[16];
  if (c->pos >= c->e)
    return FAIL(c, MW_JSONROW_E_PARSE, c->pos, "at byte %zu: expected a value, got end of line",
                (size_t)(c->pos - c->s));
  uint8_t ch = *c->pos;
  const uint8_t *raw;
  size_t raw_len;
  bool esc;
  num_t num;
  switch (ch) {
    case '"': return scan_string(c, &raw, &raw_len, &esc);
    case 't': return scan_literal(c, "true", 4);
    case 'f': return scan_literal(c, "false", 5);
    case 'n': return scan_literal(c, "null", 4);
    case '[': case '{': {
      uint8_t close = ch == '[' ? ']' : '}';
      if (depth + 1 > c->p->opts.max_depth)
        return FAIL(c, MW_JSONROW_E_PARSE, c->pos, "at byte %zu: nesting deeper than %u",
                    (size_t)(c->pos - c->s), c->p->opts.max_depth);
      c->pos = skip_ws(c->pos + 1, c->e);
      if (c->pos < c->e && *c->pos == close) {
        c->pos++;
        return 0;
      }
      for (;;) {
        int rc;
        if (close == '}') {
          if (c->pos >= c->e || *c->pos != '"')
            return FAIL(c, MW_JSONROW_E_PARSE, c->pos, "at byte %zu: expected a key, got %s",
                        (size_t)(c->pos - c->s), byte_desc(c, c->pos, d, sizeof d));
          if ((rc = scan_string(c, &raw, &raw_len, &esc)) < 0) return rc;
          c->pos = skip_ws(c->pos, c->e);
          if (c->pos >= c->e || *c->pos != ':')
            return FAIL(c, MW_JSONROW_E_PARSE, c->pos, "at byte %zu: expected ':', got %s",
                        (size_t)(c->pos - c->s), byte_desc(c, c->pos, d, sizeof d));
          c->pos = skip_ws(c->pos + 1, c->e);
        }
        if ((rc = skip_value(c, depth + 1)) < 0) return rc;
        c->pos = skip_ws(c->pos, c->e);
        if (c->pos < c->e && *c->pos == ',') {
          c->pos = skip_ws(c->pos + 1, c->e);
          continue;
        }
        if (c->pos < c->e && *c->pos == close) {
          c->pos++;
          return 0;
        }
        return FAIL(c, MW_JSONROW_E_PARSE, c->pos, "at byte %zu: expected ',' or '%c', got %s",
                    (size_t)(c->pos - c->s), close, byte_desc(c, c->pos, d, sizeof d));
      }
    }
    default:
      if (ch == '-' || is_digit(ch)) return scan_number(c, &num);
      return FAIL(c, MW_JSONROW_E_PARSE, c->pos, "at byte %zu: expected a value, got %s",
                  (size_t)(c->pos - c->s), byte_desc(c, c->pos, d, sizeof d));
  }
}

/* ---------------------------------------------------------------- numbers */

/* The fast paths need each operation rounded once, in its own type. */
#define FAST_PATH_OK (FLT_EVAL_METHOD == 0)

static const double pow10_d[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                   1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                   1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
static const float pow10_f[11] = {1e0f, 1e1f, 1e2f, 1e3f, 1e4f, 1e5f,
                                  1e6f, 1e7f, 1e8f, 1e9f, 1e10f};

/* NUL-terminated copy of the number's text in scratch, for strtod_l. */
static const char *num_text(ctx_t *c, const num_t *n) {
  mw_buf_t *b = &c->p->scratch;
  mw_buf_reset(b);
  if (mw_buf_reserve(b, n->len + 1) < 0) return NULL;
  memcpy(b->data, n->start, n->len);
  b->data[n->len] = 0;
  return (const char *)b->data;
}

static int fail_range(ctx_t *c, const mw_field_t *f, const num_t *n) {
  char t[48], v[48];
  return FAIL(c, MW_JSONROW_E_TYPE, n->start, "field \"%s\": %s is out of range for %s", f->name,
              shown(n->start, n->len, v, sizeof v), type_desc(f, t, sizeof t));
}

static int num_to_double(ctx_t *c, const mw_field_t *f, const num_t *n, double *out) {
  int64_t e10 = (int64_t)n->exp - n->frac_digits;
  if (FAST_PATH_OK && !n->ovf && n->mant <= (UINT64_C(1) << 53) && e10 >= -22 && e10 <= 22) {
    double d = (double)n->mant;
    d = e10 < 0 ? d / pow10_d[-e10] : d * pow10_d[e10];
    *out = n->neg ? -d : d;
    return 0;
  }
  const char *t = num_text(c, n);
  if (t == NULL) return NOMEM(c);
  double d = strtod_l(t, NULL, (locale_t)c->p->c_locale);
  if (isinf(d)) return fail_range(c, f, n);
  *out = d;
  return 0;
}

static int num_to_float(ctx_t *c, const mw_field_t *f, const num_t *n, float *out) {
  int64_t e10 = (int64_t)n->exp - n->frac_digits;
  if (FAST_PATH_OK && !n->ovf && n->mant <= (UINT64_C(1) << 24) && e10 >= -10 && e10 <= 10) {
    float x = (float)n->mant;
    x = e10 < 0 ? x / pow10_f[-e10] : x * pow10_f[e10];
    *out = n->neg ? -x : x;
    return 0;
  }
  const char *t = num_text(c, n);
  if (t == NULL) return NOMEM(c);
  float x = strtof_l(t, NULL, (locale_t)c->p->c_locale);
  if (isinf(x)) return fail_range(c, f, n);
  *out = x;
  return 0;
}

/* An integer column's value as 4 or 8 little-endian bytes in *bits. */
static int num_to_int(ctx_t *c, const mw_field_t *f, const num_t *n, uint64_t *bits) {
  if (n->frac_exp) {
    char t[48], v[48];
    return FAIL(c, MW_JSONROW_E_TYPE, n->start,
                "field \"%s\": expected an integer (%s), got %s (a fraction or exponent)",
                f->name, type_desc(f, t, sizeof t), shown(n->start, n->len, v, sizeof v));
  }
  uint64_t m = n->mant;
  bool ok;
  switch (f->type) {
    case MW_T_INT32: ok = !n->ovf && m <= (n->neg ? UINT64_C(1) << 31 : INT32_MAX); break;
    case MW_T_INT64: ok = !n->ovf && m <= (n->neg ? UINT64_C(1) << 63 : INT64_MAX); break;
    case MW_T_UINT32: ok = !n->ovf && m <= UINT32_MAX && (!n->neg || m == 0); break;
    default: ok = !n->ovf && (!n->neg || m == 0); break;
  }
  if (!ok) return fail_range(c, f, n);
  *bits = n->neg ? 0 - m : m; /* two's complement; truncated to 32 bits by the caller */
  return 0;
}

/* ------------------------------------------------------------------ base64 */

static int b64val(uint8_t ch) {
  if (ch >= 'A' && ch <= 'Z') return ch - 'A';
  if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
  if (ch >= '0' && ch <= '9') return ch - '0' + 52;
  if (ch == '+') return 62;
  if (ch == '/') return 63;
  return -1;
}

/* Standard alphabet, padded, canonical (zero pad bits). Returns 0, or the
 * 1-based position of the first bad character, or n+1 for a bad length. */
static size_t b64_decode(const uint8_t *s, size_t n, uint8_t *out, size_t *out_len) {
  if (n % 4) return n + 1;
  size_t o = 0;
  for (size_t i = 0; i < n; i += 4) {
    int v[4], pad = 0;
    for (int k = 0; k < 4; k++) {
      if (s[i + k] == '=' && i + 4 == n && k >= 2 && (k == 3 || s[i + 3] == '=')) {
        v[k] = 0;
        pad++;
        continue;
      }
      v[k] = b64val(s[i + k]);
      if (v[k] < 0 || pad) return i + (size_t)k + 1;
    }
    uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
    if ((pad == 1 && (w & 0xFF)) || (pad == 2 && (w & 0xFFFF))) return i + 4 - (size_t)pad;
    out[o++] = (uint8_t)(w >> 16);
    if (pad < 2) out[o++] = (uint8_t)(w >> 8);
    if (pad < 1) out[o++] = (uint8_t)w;
  }
  *out_len = o;
  return 0;
}

/* ----------------------------------------------------------------- values */

static int put_string(ctx_t *c, const mw_field_t *f, mw_column_t *col) {
  const uint8_t *raw, *at = c->pos;
  size_t raw_len;
  bool esc;
  int rc = scan_string(c, &raw, &raw_len, &esc);
  if (rc < 0) return rc;
  mw_buf_t *sb = &c->p->scratch;
  if (esc) {
    if (decode_string(raw, raw_len, sb) < 0) return NOMEM(c);
    raw = sb->data;
    raw_len = sb->len;
  }
  if (f->type == MW_T_BINARY) {
    /* decode in place after the decoded text: base64 output is shorter */
    size_t start = esc ? sb->len : 0, out_len = 0;
    if (!esc) mw_buf_reset(sb);
    if (mw_buf_reserve(sb, raw_len * 3 / 4 + 4) < 0) return NOMEM(c);
    if (esc) raw = sb->data; /* reserve may have moved it */
    size_t bad = b64_decode(raw, raw_len, sb->data + start, &out_len);
    if (bad > raw_len)
      return FAIL(c, MW_JSONROW_E_TYPE, at,
                  "field \"%s\": expected a base64 string (binary), got a length of %zu "
                  "(not a multiple of 4)", f->name, raw_len);
    if (bad)
      return FAIL(c, MW_JSONROW_E_TYPE, at,
                  "field \"%s\": expected a base64 string (binary), bad character at %zu",
                  f->name, bad);
    raw = sb->data + start;
    raw_len = out_len;
  }
  rc = mw_column_append_bytes(col, raw, raw_len);
  return rc < 0 ? fail_code(c, rc, MW_JSONROW_E_INTERNAL, at, "column \"%s\" is full", f->name)
                : 0;
}

static int put_vector(ctx_t *c, const mw_field_t *f, mw_column_t *col) {
  const uint8_t *at = c->pos;
  char d[16], t[48];
  int32_t n = 0, dim = f->fsl_dim;
  float *vec = c->p->vec;
  c->pos = skip_ws(c->pos + 1, c->e);
  if (c->pos < c->e && *c->pos == ']') {
    c->pos++;
  } else {
    for (;;) {
      if (c->pos >= c->e)
        return FAIL(c, MW_JSONROW_E_PARSE, c->pos, "at byte %zu: unterminated array",
                    (size_t)(at - c->s));
      uint8_t ch = *c->pos;
      if (ch != '-' && !is_digit(ch)) {
        if (ch != '"' && ch != 't' && ch != 'f' && ch != 'n' && ch != '[' && ch != '{')
          return FAIL(c, MW_JSONROW_E_PARSE, c->pos, "at byte %zu: expected a value, got %s",
                      (size_t)(c->pos - c->s), byte_desc(c, c->pos, d, sizeof d));
        return FAIL(c, MW_JSONROW_E_TYPE, c->pos,
                    "field \"%s\": element %d: expected a number (float32), got %s", f->name, n,
                    got_kind(ch));
      }
      num_t num;
      float x;
      int rc = scan_number(c, &num);
      if (rc < 0) return rc;
      if ((rc = num_to_float(c, f, &num, &x)) < 0) return rc;
      if (n < dim) vec[n] = x;
      if (n < INT32_MAX) n++;
      c->pos = skip_ws(c->pos, c->e);
      if (c->pos < c->e && *c->pos == ',') {
        c->pos = skip_ws(c->pos + 1, c->e);
        continue;
      }
      if (c->pos < c->e && *c->pos == ']') {
        c->pos++;
        break;
      }
      return FAIL(c, MW_JSONROW_E_PARSE, c->pos, "at byte %zu: expected ',' or ']', got %s",
                  (size_t)(c->pos - c->s), byte_desc(c, c->pos, d, sizeof d));
    }
  }
  if (n != dim)
    return FAIL(c, MW_JSONROW_E_TYPE, at, "field \"%s\": expected %d numbers (%s), got %d",
                f->name, dim, type_desc(f, t, sizeof t), n);
  /* the builder keeps a materialised item bitmap in step (batch.c) */
  if (mw_column_append_fixed(col, vec, (size_t)dim * 4) < 0) return NOMEM(c);
  return 0;
}

/* Parse the value at c->pos by field fi's rules and append it. */
static int put_value(ctx_t *c, int fi) {
  const mw_field_t *f = &c->p->schema->fields[fi];
  mw_column_t *col = &c->out->cols[fi];
  const uint8_t *at = c->pos;
  char d[16];
  if (at >= c->e)
    return FAIL(c, MW_JSONROW_E_PARSE, at, "at byte %zu: expected a value, got end of line",
                (size_t)(at - c->s));
  uint8_t ch = *at;
  int rc;
  if (ch == 'n') {
    if ((rc = scan_literal(c, "null", 4)) < 0) return rc;
    if (fi == c->p->pk)
      return FAIL(c, MW_JSONROW_E_PK, at, "primary key field \"%s\" is null", f->name);
    if (!f->nullable) {
      char t[48], w[48];
      return FAIL(c, MW_JSONROW_E_TYPE, at, "field \"%s\": expected %s (%s not null), got null",
                  f->name, expected_what(f, w, sizeof w), type_desc(f, t, sizeof t));
    }
    if (mw_column_append_null(col, f) < 0) return NOMEM(c);
    return 0;
  }
  if (ch == 't' || ch == 'f') {
    const char *lit = ch == 't' ? "true" : "false";
    size_t len = ch == 't' ? 4 : 5;
    if ((size_t)(c->e - at) < len || memcmp(at, lit, len) != 0) return scan_literal(c, lit, len);
    if (f->type != MW_T_BOOL) return fail_mismatch(c, f, at);
    c->pos += len;
    if (mw_column_append_bool(col, ch == 't') < 0) return NOMEM(c);
    return 0;
  }
  if (ch == '"') {
    if (f->type != MW_T_UTF8 && f->type != MW_T_BINARY) return fail_mismatch(c, f, at);
    return put_string(c, f, col);
  }
  if (ch == '[') {
    if (f->type != MW_T_FSL_F32) return fail_mismatch(c, f, at);
    return put_vector(c, f, col);
  }
  if (ch == '{') return fail_mismatch(c, f, at);
  if (ch != '-' && !is_digit(ch))
    return FAIL(c, MW_JSONROW_E_PARSE, at, "at byte %zu: expected a value, got %s",
                (size_t)(at - c->s), byte_desc(c, at, d, sizeof d));
  num_t num;
  if ((rc = scan_number(c, &num)) < 0) return rc;
  switch (f->type) {
    case MW_T_INT32: case MW_T_UINT32: case MW_T_INT64: case MW_T_UINT64: {
      uint64_t v;
      if ((rc = num_to_int(c, f, &num, &v)) < 0) return rc;
      if (f->type == MW_T_INT32 || f->type == MW_T_UINT32) {
        uint32_t v32 = (uint32_t)v;
        rc = mw_column_append_fixed(col, &v32, 4);
      } else {
        rc = mw_column_append_fixed(col, &v, 8);
      }
      break;
    }
    case MW_T_FLOAT32: {
      float x;
      if ((rc = num_to_float(c, f, &num, &x)) < 0) return rc;
      rc = mw_column_append_fixed(col, &x, 4);
      break;
    }
    case MW_T_FLOAT64: {
      double x;
      if ((rc = num_to_double(c, f, &num, &x)) < 0) return rc;
      rc = mw_column_append_fixed(col, &x, 8);
      break;
    }
    default:
      return fail_mismatch(c, f, at);
  }
  return rc < 0 ? NOMEM(c) : 0;
}

/* ------------------------------------------------------------ field names */

static uint32_t name_hash(const uint8_t *p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
  return h;
}

static int lookup(const mw_jsonrow_parser_t *p, const uint8_t *k, size_t n, int guess) {
  const mw_field_t *fs = p->schema->fields;
  if (guess >= 0 && (size_t)guess < p->schema->n_fields && p->name_lens[guess] == n &&
      memcmp(fs[guess].name, k, n) == 0)
    return guess;
  uint32_t h = name_hash(k, n), mask = p->n_slots - 1;
  for (uint32_t i = h & mask;; i = (i + 1) & mask) {
    const mw_jsonrow_slot_t *s = &p->slots[i];
    if (s->field < 0) return -1;
    if (s->hash == h && p->name_lens[s->field] == n && memcmp(fs[s->field].name, k, n) == 0)
      return s->field;
  }
}

/* ------------------------------------------------------------------- init */

int mw_jsonrow_init(mw_jsonrow_parser_t *p, const mw_schema_t *schema,
                    const mw_jsonrow_opts_t *opts) {
  assert(p != NULL && schema != NULL);
  memset(p, 0, sizeof *p);
  p->schema = schema;
  p->pk = p->tombstone = p->keep = -1;
  if (opts) p->opts = *opts;
  if (p->opts.max_line_bytes == 0) p->opts.max_line_bytes = MW_JSONROW_DEFAULT_MAX_LINE_BYTES;
  if (p->opts.max_depth == 0) p->opts.max_depth = MW_JSONROW_DEFAULT_MAX_DEPTH;
  size_t n = schema->n_fields;
  if (n == 0 || n > MW_MAX_FIELDS || p->opts.max_line_bytes > MW_JSONROW_MAX_LINE_BYTES ||
      p->opts.max_depth > MW_JSONROW_MAX_DEPTH)
    return -EINVAL;
  p->n_slots = 8;
  while (p->n_slots < 2 * n) p->n_slots <<= 1;
  p->name_lens = calloc(n, sizeof *p->name_lens);
  p->seen = calloc(n, sizeof *p->seen);
  p->slots = malloc(p->n_slots * sizeof *p->slots);
  p->c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
  if (!p->name_lens || !p->seen || !p->slots || !p->c_locale) goto nomem;
  for (uint32_t i = 0; i < p->n_slots; i++) p->slots[i].field = -1;
  p->max_dim = 1;
  const mw_field_t *last = &schema->fields[n - 1];
  if (strcmp(last->name, "_tombstone") == 0 && last->type == MW_T_BOOL && !last->nullable)
    p->tombstone = (int)n - 1;
  p->deletes_ok = true;
  for (size_t i = 0; i < n; i++) {
    const mw_field_t *f = &schema->fields[i];
    if (f->type < MW_T_INT32 || f->type > MW_T_FSL_F32) goto inval;
    if (f->type == MW_T_FSL_F32 && (f->fsl_dim < 1 || f->fsl_dim > MW_MAX_FSL_DIM)) goto inval;
    if (f->type == MW_T_FSL_F32 && f->fsl_dim > p->max_dim) p->max_dim = f->fsl_dim;
    if (f->pk_position == 1) {
      if (p->pk >= 0) goto inval; /* compound keys are not supported */
      p->pk = (int)i;
    }
    p->name_lens[i] = strlen(f->name);
    uint32_t h = name_hash((const uint8_t *)f->name, p->name_lens[i]);
    uint32_t j = h & (p->n_slots - 1);
    while (p->slots[j].field >= 0) {
      if (strcmp(schema->fields[p->slots[j].field].name, f->name) == 0) goto inval; /* dup */
      j = (j + 1) & (p->n_slots - 1);
    }
    p->slots[j] = (mw_jsonrow_slot_t){h, (int32_t)i};
  }
  for (size_t i = 0; i < n; i++)
    if ((int)i != p->pk && (int)i != p->tombstone && !schema->fields[i].nullable)
      p->deletes_ok = false;
  if (p->pk < 0 || p->tombstone < 0) p->deletes_ok = false;
  if (p->opts.delete_keep != NULL) {
    int k = mw_schema_find(schema, p->opts.delete_keep);
    if (k < 0 || k == p->tombstone) goto inval;
    p->keep = k == p->pk ? -1 : k;
  }
  p->vec = malloc((size_t)p->max_dim * sizeof *p->vec);
  if (p->vec == NULL) goto nomem;
  assert(p->n_slots >= 2 * n);
  return 0;
inval:
  mw_jsonrow_free(p);
  return -EINVAL;
nomem:
  mw_jsonrow_free(p);
  return -ENOMEM;
}

void mw_jsonrow_free(mw_jsonrow_parser_t *p) {
  if (p == NULL) return;
  free(p->name_lens);
  free(p->seen);
  free(p->slots);
  free(p->vec);
  if (p->c_locale) freelocale((locale_t)p->c_locale);
  mw_buf_free(&p->scratch);
  mw_buf_free(&p->keybuf);
  memset(p, 0, sizeof *p);
}

/* ------------------------------------------------------------------ parse */

/* Read one member's key at c->pos; *fi = field index or -1 (unknown). */
static int read_key(ctx_t *c, int guess, int *fi, const uint8_t **key, size_t *key_len) {
  char d[16];
  if (c->pos >= c->e || *c->pos != '"')
    return FAIL(c, MW_JSONROW_E_PARSE, c->pos, "at byte %zu: expected a field name, got %s",
                (size_t)(c->pos - c->s), byte_desc(c, c->pos, d, sizeof d));
  bool esc;
  int rc = scan_string(c, key, key_len, &esc);
  if (rc < 0) return rc;
  if (esc) {
    if (decode_string(*key, *key_len, &c->p->keybuf) < 0) return NOMEM(c);
    *key = c->p->keybuf.data;
    *key_len = c->p->keybuf.len;
  }
  *fi = lookup(c->p, *key, *key_len, guess);
  c->pos = skip_ws(c->pos, c->e);
  if (c->pos >= c->e || *c->pos != ':')
    return FAIL(c, MW_JSONROW_E_PARSE, c->pos, "at byte %zu: expected ':', got %s",
                (size_t)(c->pos - c->s), byte_desc(c, c->pos, d, sizeof d));
  c->pos = skip_ws(c->pos + 1, c->e);
  return 0;
}

static int parse_member(ctx_t *c, int *guess) {
  const uint8_t *kat = c->pos, *key;
  size_t key_len;
  int fi = -1, rc;
  char k[80];
  if ((rc = read_key(c, *guess, &fi, &key, &key_len)) < 0) return rc;
  mw_jsonrow_parser_t *p = c->p;
  if (fi < 0) {
    if (c->is_delete || p->opts.ignore_unknown_fields) return skip_value(c, 1);
    return FAIL(c, MW_JSONROW_E_SCHEMA, kat, "unknown field \"%s\"",
                shown(key, key_len, k, sizeof k));
  }
  if (fi == p->tombstone)
    return FAIL(c, MW_JSONROW_E_SCHEMA, kat, "field \"_tombstone\" is reserved (use DEL)");
  if (p->seen[fi] == p->stamp)
    return FAIL(c, MW_JSONROW_E_PARSE, kat, "at byte %zu: duplicate key \"%s\"",
                (size_t)(kat - c->s), p->schema->fields[fi].name);
  p->seen[fi] = p->stamp;
  *guess = fi + 1;
  if (c->is_delete && fi != p->pk && fi != p->keep) return skip_value(c, 1);
  return put_value(c, fi);
}

/* Fill the columns the object did not name: nulls, _tombstone, or errors. */
static int fill_missing(ctx_t *c) {
  mw_jsonrow_parser_t *p = c->p;
  const mw_schema_t *s = p->schema;
  if (p->pk >= 0 && p->seen[p->pk] != p->stamp)
    return FAIL(c, MW_JSONROW_E_PK, c->e, "missing primary key field \"%s\"",
                s->fields[p->pk].name);
  for (size_t i = 0; i < s->n_fields; i++) {
    const mw_field_t *f = &s->fields[i];
    mw_column_t *col = &c->out->cols[i];
    int rc = 0;
    if ((int)i == p->tombstone) {
      rc = mw_column_append_bool(col, c->is_delete);
    } else if (c->is_delete && (int)i == p->keep && p->seen[i] != p->stamp) {
      return FAIL(c, MW_JSONROW_E_SCHEMA, c->e,
                  "a delete must name field \"%s\": rows are routed to shards by it", f->name);
    } else if (c->is_delete ? ((int)i == p->pk || (int)i == p->keep) : p->seen[i] == p->stamp) {
      continue;
    } else if (f->nullable) {
      rc = mw_column_append_null(col, f);
    } else {
      char t[48];
      return FAIL(c, MW_JSONROW_E_SCHEMA, c->e, "missing field \"%s\" (%s not null)", f->name,
                  type_desc(f, t, sizeof t));
    }
    if (rc < 0) return NOMEM(c);
  }
  return 0;
}

static int parse_row(ctx_t *c) {
  char d[16];
  c->pos = skip_ws(c->s, c->e);
  if (c->pos >= c->e || *c->pos != '{')
    return FAIL(c, MW_JSONROW_E_PARSE, c->pos, "at byte %zu: expected '{', got %s",
                (size_t)(c->pos - c->s), byte_desc(c, c->pos, d, sizeof d));
  c->pos = skip_ws(c->pos + 1, c->e);
  int guess = 0, rc;
  if (c->pos < c->e && *c->pos == '}') {
    c->pos++;
  } else {
    for (;;) {
      if ((rc = parse_member(c, &guess)) < 0) return rc;
      c->pos = skip_ws(c->pos, c->e);
      if (c->pos < c->e && *c->pos == ',') {
        c->pos = skip_ws(c->pos + 1, c->e);
        continue;
      }
      if (c->pos < c->e && *c->pos == '}') {
        c->pos++;
        break;
      }
      return FAIL(c, MW_JSONROW_E_PARSE, c->pos, "at byte %zu: expected ',' or '}', got %s",
                  (size_t)(c->pos - c->s), byte_desc(c, c->pos, d, sizeof d));
    }
  }
  c->pos = skip_ws(c->pos, c->e);
  if (c->pos != c->e)
    return FAIL(c, MW_JSONROW_E_PARSE, c->pos, "at byte %zu: trailing garbage after the object",
                (size_t)(c->pos - c->s));
  return fill_missing(c);
}

int mw_jsonrow_parse(mw_jsonrow_parser_t *p, const char *line, size_t len, bool is_delete,
                     mw_batch_t *out, mw_jsonrow_error_t *err) {
  assert(p != NULL && p->schema != NULL && out != NULL);
  assert(out->schema == p->schema || out->schema->n_fields == p->schema->n_fields);
  ctx_t c = {p, (const uint8_t *)line, (const uint8_t *)line + len, (const uint8_t *)line,
             out, err, is_delete};
  if (err) {
    err->cls = MW_JSONROW_OK;
    err->offset = 0;
    err->msg[0] = 0;
  }
  if (len > p->opts.max_line_bytes)
    return FAIL(&c, MW_JSONROW_E_PARSE, c.s, "line of %zu bytes is longer than %zu", len,
                p->opts.max_line_bytes);
  if (out->n_rows >= MW_MAX_BATCH_ROWS)
    return fail_code(&c, -EFBIG, MW_JSONROW_E_INTERNAL, c.s, "batch is full");
  if (is_delete && !p->deletes_ok)
    return FAIL(&c, MW_JSONROW_E_SCHEMA, c.s,
                "this table cannot take deletes (needs a primary key, a _tombstone column "
                "and every other column nullable)");
  if (++p->stamp == 0) {
    memset(p->seen, 0, p->schema->n_fields * sizeof *p->seen);
    p->stamp = 1;
  }
  int rc = parse_row(&c);
  if (rc < 0) {
    for (size_t i = 0; i < p->schema->n_fields; i++)
      if (out->cols[i].length > out->n_rows)
        mw_column_truncate(&out->cols[i], &p->schema->fields[i], out->n_rows);
    return rc;
  }
  out->n_rows++;
  return 0;
}
