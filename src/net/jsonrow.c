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
 * Numbers: the integer mantissa is accumulated while scanning, then
 * converted by the column's type in jsonrow_number.h (Clinger's fast path,
 * else strtod_l: every float correctly rounded; integers range-checked).
 * Dates, times and instants given as strings: jsonrow_time.h; binary
 * values as base64: base64.h. This file keeps the scan, the mapping onto
 * the columns and the messages.
 *
 * Rollback: each column receives exactly one append per row, so on any error
 * every column longer than batch->n_rows is truncated back with
 * mw_column_truncate (batch.c), and so is every list or struct column, whose
 * children may hold values of the failed row without the row itself. Duplicate keys are found with a per-field
 * row stamp, so nothing is cleared per row.
 */
#include "net/jsonrow.h"

#include "common/utf8.h"
#include "net/base64.h"
#include "net/jsonrow_number.h"
#include "net/jsonrow_time.h"

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

typedef mw_jsonrow_num_t num_t;

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

/* What a JSON value for f looks like, for "expected ..." messages. */
static const char *expected_what(const mw_field_t *f, char *out, size_t out_len) {
  switch (f->type) {
    case MW_T_INT8: case MW_T_INT16: case MW_T_INT32: case MW_T_INT64:
    case MW_T_UINT8: case MW_T_UINT16: case MW_T_UINT32: case MW_T_UINT64: return "an integer";
    case MW_T_FLOAT16: case MW_T_FLOAT32: case MW_T_FLOAT64: return "a number";
    case MW_T_DECIMAL128: return "a number or a decimal string";
    case MW_T_BOOL: return "true or false";
    case MW_T_UTF8: case MW_T_LARGE_UTF8: return "a string";
    case MW_T_BINARY: case MW_T_LARGE_BINARY: case MW_T_FIXED_BINARY: return "a base64 string";
    case MW_T_TIMESTAMP: return "an RFC 3339 string or an integer";
    case MW_T_DATE32: case MW_T_DATE64: return "a YYYY-MM-DD string or an integer";
    case MW_T_TIME32: case MW_T_TIME64: return "an HH:MM:SS string or an integer";
    case MW_T_FSL: snprintf(out, out_len, "an array of %d numbers", f->fsl_dim); return out;
    case MW_T_LIST: case MW_T_LARGE_LIST: return "an array";
    case MW_T_STRUCT: return "an object";
  }
  return "a value";
}

static const char *type_desc(const mw_field_t *f, char *out, size_t out_len) {
  return mw_field_type_text(f, out, out_len);
}

/* The field being parsed ("v", "meta.host", "tags[2]"), for messages. */
#define FNAME(c) ((c)->p->path)

static int fail_mismatch(ctx_t *c, const mw_field_t *f, const uint8_t *at) {
  char w[48], t[96];
  return FAIL(c, MW_JSONROW_E_TYPE, at, "field \"%s\": expected %s (%s), got %s", FNAME(c),
              expected_what(f, w, sizeof w), type_desc(f, t, sizeof t), got_kind(*at));
}

/* Append ".name" or "[i]" to the path; returns the old length to restore. */
static size_t path_push(ctx_t *c, const char *name, int64_t index) {
  char *p = c->p->path;
  size_t at = strlen(p), cap = sizeof c->p->path;
  assert(at < cap); /* NUL-terminated: snprintf truncates */
  if (name) snprintf(p + at, cap - at, "%s%s", at ? "." : "", name);
  else snprintf(p + at, cap - at, "[%lld]", (long long)index);
  return at;
}

static void path_pop(ctx_t *c, size_t at) {
  assert(at < sizeof c->p->path);
  c->p->path[at] = 0;
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

/* The value of the up to 8 digits at p (8 bytes readable), their count in
 * *k: SWAR, one 8-byte load. Bytes '0'..'9' xor 0x30 are exactly the bytes
 * 0..9 (high nibble 0, low nibble + 6 < 0x10), so the first byte failing
 * that ends the run; the run is shifted to the top (zeros below it are
 * leading zero digits) and converted with three multiplies (the 8-digit
 * reduction simdjson uses: pairs, then quads, then the 8). */
static MW_ALWAYS_INLINE uint64_t digits8(const uint8_t *p, unsigned *k) {
  uint64_t v;
  memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap64(v);
#endif
  v ^= UINT64_C(0x3030303030303030);
  uint64_t bad = (v & UINT64_C(0xF0F0F0F0F0F0F0F0)) |
                 (((v & UINT64_C(0x0F0F0F0F0F0F0F0F)) + UINT64_C(0x0606060606060606)) &
                  UINT64_C(0x1010101010101010));
  unsigned n = bad ? (unsigned)__builtin_ctzll(bad) / 8 : 8;
  *k = n;
  if (n == 0) return 0;
  v <<= 8 * (8 - n);
  v = v * 10 + (v >> 8);
  v = (((v & UINT64_C(0x000000FF000000FF)) * UINT64_C(0x000F424000000064)) +
       (((v >> 16) & UINT64_C(0x000000FF000000FF)) * UINT64_C(0x0000271000000001))) >> 32;
  return v;
}

static const uint64_t pow10_u64[9] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000,
                                      100000000};

/* Digits from p on into *m (*nd digits so far; *ovf once they pass 2^64-1):
 * 8 at a time while at least 8 bytes remain and *m stays below 10^19 (no
 * check needed), else one by one with the overflow check. Returns the end. */
static MW_ALWAYS_INLINE const uint8_t *scan_digits(const uint8_t *p, const uint8_t *e, uint64_t *m,
                                         int32_t *nd, bool *ovf) {
  for (;;) {
    if (e - p >= 8) {
      unsigned k;
      uint64_t v = digits8(p, &k);
      if (*nd + (int32_t)k <= 19) {
        *m = *m * pow10_u64[k] + v, *nd += (int32_t)k, p += k;
        if (k < 8) return p;
        continue;
      }
    }
    if (p >= e || !is_digit(*p)) return p;
    uint64_t d = (uint64_t)(*p - '0');
    if (*nd < 19 || (!*ovf && *m <= (UINT64_MAX - d) / 10)) *m = *m * 10 + d, ++*nd;
    else *ovf = true;
    p++;
  }
}

/* Scan a JSON number at c->pos (grammar-checked; parse error if malformed),
 * in one pass: the digits (integer and fraction) accumulate into n->mant as
 * they are checked, so converting it needs no second look at the text unless
 * it leaves the exact fast paths below. Kept in locals, not *n, while
 * scanning: the text is bytes, which may alias *n, so stores to *n per digit
 * would be real stores. */
static MW_ALWAYS_INLINE int scan_number(ctx_t *c, num_t *n) {
  const uint8_t *p = c->pos, *e = c->e;
  uint64_t m = 0;
  int32_t nd = 0, fd = 0, ex = 0; /* digits in m, of them after '.', exponent */
  bool neg = false, ovf = false, fe = false;
  if (p < e && *p == '-') neg = true, p++;
  if (p >= e || !is_digit(*p)) goto bad;
  if (*p == '0') {
    p++;
    if (p < e && is_digit(*p))
      return FAIL(c, MW_JSONROW_E_PARSE, p, "at byte %zu: leading zero in a number",
                  (size_t)(c->pos - c->s));
  } else {
    p = scan_digits(p, e, &m, &nd, &ovf);
  }
  if (p < e && *p == '.') {
    p++;
    fe = true;
    if (p >= e || !is_digit(*p)) goto bad;
    int32_t nd0 = nd;
    p = scan_digits(p, e, &m, &nd, &ovf);
    fd = nd - nd0; /* digits past the 2^64 overflow are not in m, nor counted */
  }
  if (p < e && (*p == 'e' || *p == 'E')) {
    p++;
    fe = true;
    bool eneg = false;
    if (p < e && (*p == '+' || *p == '-')) eneg = *p == '-', p++;
    if (p >= e || !is_digit(*p)) goto bad;
    for (; p < e && is_digit(*p); p++)
      if (ex < 100000) ex = ex * 10 + (*p - '0');
    if (eneg) ex = -ex;
  }
  n->start = c->pos;
  n->len = (size_t)(p - c->pos);
  n->mant = m;
  n->frac_digits = fd;
  n->exp = ex;
  n->neg = neg, n->ovf = ovf, n->frac_exp = fe;
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
  assert(depth >= 1);
  assert(depth <= c->p->opts.max_depth);
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

static int fail_range(ctx_t *c, const mw_field_t *f, const num_t *n) {
  char t[96], v[48];
  return FAIL(c, MW_JSONROW_E_TYPE, n->start, "field \"%s\": %s is out of range for %s", FNAME(c),
              shown(n->start, n->len, v, sizeof v), type_desc(f, t, sizeof t));
}

/* A conversion's error (jsonrow_number.h) as the producer's message. */
static int fail_number(ctx_t *c, const mw_field_t *f, const num_t *n, int rc) {
  assert(rc < 0);
  return rc == -ENOMEM ? NOMEM(c) : fail_range(c, f, n);
}

static __attribute__((noinline)) int num_to_double_slow(ctx_t *c, const mw_field_t *f,
                                                        const num_t *n, double *out) {
  int rc = mw_jsonrow_num_strtod(n, c->p->c_locale, &c->p->scratch, out);
  return rc < 0 ? fail_number(c, f, n, rc) : 0;
}

static __attribute__((noinline)) int num_to_float_slow(ctx_t *c, const mw_field_t *f,
                                                       const num_t *n, float *out) {
  int rc = mw_jsonrow_num_strtof(n, c->p->c_locale, &c->p->scratch, out);
  return rc < 0 ? fail_number(c, f, n, rc) : 0;
}

static inline int num_to_double(ctx_t *c, const mw_field_t *f, const num_t *n, double *out) {
  if (mw_jsonrow_num_fast_double(n, out)) return 0;
  return num_to_double_slow(c, f, n, out);
}

static inline int num_to_float(ctx_t *c, const mw_field_t *f, const num_t *n, float *out) {
  double d;
  if (mw_jsonrow_num_fast_double(n, &d) && mw_jsonrow_double_to_float_once(d, out)) return 0;
  return num_to_float_slow(c, f, n, out);
}

/* An integer value of type t (width 1, 2, 4, 8; signed or not) as two's
 * complement bits in *bits (the caller stores the low `width` bytes). */
static int num_to_int_type(ctx_t *c, const mw_field_t *f, mw_type_t t, const num_t *n,
                           uint64_t *bits) {
  int rc = mw_jsonrow_num_int(n, t, bits);
  if (rc == -EDOM) {
    char td[96], v[48];
    return FAIL(c, MW_JSONROW_E_TYPE, n->start,
                "field \"%s\": expected an integer (%s), got %s (a fraction or exponent)",
                FNAME(c), type_desc(f, td, sizeof td), shown(n->start, n->len, v, sizeof v));
  }
  return rc < 0 ? fail_range(c, f, n) : 0;
}

static int num_to_int(ctx_t *c, const mw_field_t *f, const num_t *n, uint64_t *bits) {
  return num_to_int_type(c, f, f->type, n, bits);
}

static int num_to_half(ctx_t *c, const mw_field_t *f, const num_t *n, uint16_t *out) {
  double d;
  int rc = num_to_double(c, f, n, &d);
  if (rc < 0) return rc;
  if (!mw_jsonrow_f64_to_f16(d, out)) return fail_range(c, f, n);
  return 0;
}

/* ----------------------------------------------------------------- values */

static int put_value_at(ctx_t *c, const mw_field_t *f, mw_column_t *col, bool is_pk, uint32_t depth);

static int append_int(ctx_t *c, mw_column_t *col, size_t width, uint64_t bits) {
  uint8_t le[8];
  mw_store_u64le(le, bits);
  return mw_column_append_fixed(col, le, width) < 0 ? NOMEM(c) : 0;
}

static int fail_text(ctx_t *c, const mw_field_t *f, const uint8_t *at, const uint8_t *p, size_t n,
                     const char *why) {
  char t[96], v[48];
  return FAIL(c, MW_JSONROW_E_TYPE, at, "field \"%s\": \"%s\" %s (%s)", FNAME(c),
              shown(p, n, v, sizeof v), why, type_desc(f, t, sizeof t));
}

/* A string into a column that parses its text: integers, temporal
 * types, decimals. */
static int put_string_value(ctx_t *c, const mw_field_t *f, mw_column_t *col, const uint8_t *at,
                            const uint8_t *p, size_t n) {
  const mw_type_info_t *ti = mw_field_info(f);
  num_t num;
  int64_t v, days, ns;
  size_t used;
  int fd, rc;
  uint64_t bits;
  const char *why;
  bool is_int = mw_jsonrow_string_integer(p, n, &num);
  switch (f->type) {
    case MW_T_TIMESTAMP:
      if (is_int) break;
      if ((why = mw_jsonrow_rfc3339(p, n, f->unit, &v)) != NULL) return fail_text(c, f, at, p, n, why);
      return append_int(c, col, 8, (uint64_t)v);
    case MW_T_DATE32: case MW_T_DATE64:
      if (is_int) break;
      if (n != 10 || !mw_jsonrow_date(p, &days))
        return fail_text(c, f, at, p, n, "is not a date (YYYY-MM-DD)");
      if (f->type == MW_T_DATE32) {
        if (days < INT32_MIN || days > INT32_MAX) return fail_text(c, f, at, p, n, "is out of range");
        return append_int(c, col, 4, (uint64_t)days);
      }
      return append_int(c, col, 8, (uint64_t)(days * 86400000));
    case MW_T_TIME32: case MW_T_TIME64:
      if (is_int) break;
      if (!mw_jsonrow_clock(p, n, &ns, &used, &fd) || used != n)
        return fail_text(c, f, at, p, n, "is not a time of day (HH:MM:SS[.fff])");
      if (!mw_jsonrow_ns_to_unit(ns, f->unit, &v)) return fail_text(c, f, at, p, n, "has a fraction finer than the column's unit");
      return append_int(c, col, ti->width, (uint64_t)v);
    case MW_T_DECIMAL128: {
      __int128 d;
      if ((why = mw_jsonrow_decimal(p, n, f, &d)) != NULL) return fail_text(c, f, at, p, n, why);
      return mw_column_append_fixed(col, &d, 16) < 0 ? NOMEM(c) : 0;
    }
    default:
      if (!is_int) {
        char t[96], sv[48];
        return FAIL(c, MW_JSONROW_E_TYPE, at, "field \"%s\": expected an integer (%s), got the "
                    "string \"%s\"", FNAME(c), type_desc(f, t, sizeof t), shown(p, n, sv, sizeof sv));
      }
      break;
  }
  /* an integer given as a string (JavaScript's 64-bit values) */
  if ((rc = num_to_int(c, f, &num, &bits)) < 0) return rc;
  if ((f->type == MW_T_TIME32 || f->type == MW_T_TIME64) && (int64_t)bits >= 0) {
    if ((int64_t)bits >= 86400 * mw_jsonrow_per_second(f->unit)) return fail_range(c, f, &num);
  } else if (f->type == MW_T_TIME32 || f->type == MW_T_TIME64) {
    return fail_range(c, f, &num);
  }
  return append_int(c, col, ti->width, bits);
}

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
  mw_type_t t = f->type;
  if (t != MW_T_UTF8 && t != MW_T_LARGE_UTF8 && t != MW_T_BINARY && t != MW_T_LARGE_BINARY &&
      t != MW_T_FIXED_BINARY)
    return put_string_value(c, f, col, at, raw, raw_len);
  if (t == MW_T_BINARY || t == MW_T_LARGE_BINARY || t == MW_T_FIXED_BINARY) {
    /* decode in place after the decoded text: base64 output is shorter */
    size_t start = esc ? sb->len : 0, out_len = 0;
    char td[96];
    if (!esc) mw_buf_reset(sb);
    if (mw_buf_reserve(sb, raw_len * 3 / 4 + 4) < 0) return NOMEM(c);
    if (esc) raw = sb->data; /* reserve may have moved it */
    size_t bad = mw_base64_decode(raw, raw_len, sb->data + start, &out_len);
    if (bad > raw_len)
      return FAIL(c, MW_JSONROW_E_TYPE, at,
                  "field \"%s\": expected a base64 string (%s), got a length of %zu "
                  "(not a multiple of 4)", FNAME(c), type_desc(f, td, sizeof td), raw_len);
    if (bad)
      return FAIL(c, MW_JSONROW_E_TYPE, at,
                  "field \"%s\": expected a base64 string (%s), bad character at %zu",
                  FNAME(c), type_desc(f, td, sizeof td), bad);
    raw = sb->data + start;
    raw_len = out_len;
    if (t == MW_T_FIXED_BINARY) {
      if (raw_len != (size_t)f->byte_width)
        return FAIL(c, MW_JSONROW_E_TYPE, at, "field \"%s\": %zu bytes, the column holds %d (%s)",
                    FNAME(c), raw_len, f->byte_width, type_desc(f, td, sizeof td));
      return mw_column_append_fixed(col, raw, raw_len) < 0 ? NOMEM(c) : 0;
    }
  }
  rc = mw_column_append_bytes(col, raw, raw_len);
  return rc < 0 ? fail_code(c, rc, MW_JSONROW_E_INTERNAL, at, "column \"%s\" is full", FNAME(c))
                : 0;
}

/* A number into a float column of type t (float16/32/64): its bytes in
 * v and their count in *width; *width = 0 when t is not a float type. */
static MW_ALWAYS_INLINE int num_to_float_type(ctx_t *c, const mw_field_t *f, mw_type_t t,
                                              const num_t *n, uint8_t v[8], size_t *width) {
  int rc = 0;
  if (t == MW_T_FLOAT16) {
    uint16_t h;
    if ((rc = num_to_half(c, f, n, &h)) == 0) memcpy(v, &h, *width = 2);
  } else if (t == MW_T_FLOAT32) {
    float x;
    if ((rc = num_to_float(c, f, n, &x)) == 0) memcpy(v, &x, *width = 4);
  } else if (t == MW_T_FLOAT64) {
    double x;
    if ((rc = num_to_double(c, f, n, &x)) == 0) memcpy(v, &x, *width = 8);
  }
  return rc;
}

/* A JSON number into a number-like column. */
static int put_number(ctx_t *c, const mw_field_t *f, mw_column_t *col, const uint8_t *at) {
  num_t num;
  int rc = scan_number(c, &num);
  if (rc < 0) return rc;
  const mw_type_info_t *ti = mw_field_info(f);
  uint8_t v[8];
  size_t width = 0;
  if ((rc = num_to_float_type(c, f, f->type, &num, v, &width)) < 0) return rc;
  if (width > 0) return mw_column_append_fixed(col, v, width) < 0 ? NOMEM(c) : 0;
  if (f->type == MW_T_DECIMAL128) {
    __int128 d;
    const char *why = mw_jsonrow_decimal(num.start, num.len, f, &d);
    if (why) return fail_text(c, f, at, num.start, num.len, why);
    return mw_column_append_fixed(col, &d, 16) < 0 ? NOMEM(c) : 0;
  }
  if (ti->layout != MW_LAYOUT_FIXED || f->type == MW_T_FIXED_BINARY ||
      (ti->order != MW_ORDER_SIGNED && ti->order != MW_ORDER_UNSIGNED))
    return fail_mismatch(c, f, at);
  uint64_t bits;
  if ((rc = num_to_int(c, f, &num, &bits)) < 0) return rc;
  if ((f->type == MW_T_TIME32 || f->type == MW_T_TIME64) &&
      ((int64_t)bits < 0 || (int64_t)bits >= 86400 * mw_jsonrow_per_second(f->unit)))
    return fail_range(c, f, &num);
  return append_int(c, col, ti->width, bits);
}

/* An item of a fixed_size_list into vec (the item type's width). */
static int put_item(ctx_t *c, const mw_field_t *f, uint8_t *dst) {
  num_t num;
  int rc = scan_number(c, &num);
  if (rc < 0) return rc;
  uint8_t v[8];
  size_t width = 0;
  if ((rc = num_to_float_type(c, f, f->item_type, &num, v, &width)) < 0) return rc;
  if (width == 0) { /* an integer item */
    uint64_t bits;
    if ((rc = num_to_int_type(c, f, f->item_type, &num, &bits)) < 0) return rc;
    mw_store_u64le(v, bits);
    width = mw_fsl_item_width(f);
  }
  assert(width <= sizeof v);
  memcpy(dst, v, width);
  return 0;
}

/* A float32 vector item on a fast path, or NULL (nothing consumed) for
 * anything else: the general scan then sees the same bytes and gives what it
 * always gave, value or refusal. The grammar is scan_number's (the same bytes
 * are taken), so only the conversion differs, and it gives the bits strtof
 * gives (correct rounding is unique):
 *   m < 2^63 and 10^|e| with |e| <= 22 (an exact double), so
 *   d = fl(fl(m) op 10^|e|) is within 2^-52 of x = m*10^e, relatively: under
 *   3 units of d's last place. A float midpoint is a double whose 29 low
 *   mantissa bits are 1000...0, so when d is a float normal and its low bits
 *   are more than 3 units from that pattern, no midpoint lies between x and d
 *   and (float)d is the float nearest x. Else NULL (strtof decides).
 * Unlike the double route (Clinger: m <= 2^53), this takes 17-19 digit
 * mantissas too: float32 vectors printed as doubles ("0.12345679104328156",
 * what json.dumps makes of numpy float32 values) would all go to strtof_l.
 * Producers' vectors ("0.1234", "-1.5e-3") all take it: a dimension of 128
 * made the general path (scan into num_t, the double fast path, the midpoint
 * check, a copy through a row buffer) 35% of the daemon's self time in wide
 * ingest. */
#define F32_MID_SLACK 4
static MW_ALWAYS_INLINE const uint8_t *f32_fast(const uint8_t *p, const uint8_t *e, float *out) {
  uint64_t m = 0;
  int32_t nd = 0, fd = 0, ex = 0;
  bool neg = false, ovf = false;
  if (!MW_JSONROW_FAST_PATH_OK) return NULL;
  if (p < e && *p == '-') neg = true, p++;
  if (p >= e || !is_digit(*p)) return NULL;
  if (*p == '0') {
    if (++p < e && is_digit(*p)) return NULL; /* leading zero: the general scan says so */
  } else {
    p = scan_digits(p, e, &m, &nd, &ovf);
  }
  if (p < e && *p == '.') {
    if (++p >= e || !is_digit(*p)) return NULL;
    int32_t nd0 = nd;
    p = scan_digits(p, e, &m, &nd, &ovf);
    fd = nd - nd0;
  }
  if (p < e && (*p == 'e' || *p == 'E')) {
    bool eneg = false;
    if (++p < e && (*p == '+' || *p == '-')) eneg = *p == '-', p++;
    if (p >= e || !is_digit(*p)) return NULL;
    for (; p < e && is_digit(*p); p++)
      if (ex < 100000) ex = ex * 10 + (*p - '0');
    if (eneg) ex = -ex;
  }
  int32_t e10 = ex - fd;
  if (ovf || m >= (UINT64_C(1) << 63) || e10 < -22 || e10 > 22) return NULL;
  double d = (double)(int64_t)m;
  d = e10 < 0 ? d / mw_jsonrow_pow10[-e10] : d * mw_jsonrow_pow10[e10];
  uint64_t b;
  memcpy(&b, &d, 8);
  if (b != 0) { /* m == 0: an exact zero */
    unsigned be = (unsigned)(b >> 52) & 0x7ff;
    /* float normals, 2^-126 <= |d| < 2^128: biased double exponents 897..1150 */
    if (be <= 1023 - 126 || be > 1023 + 127) return NULL;
    uint64_t low = b & ((UINT64_C(1) << 29) - 1);
    if (low - ((UINT64_C(1) << 28) - F32_MID_SLACK) <= 2 * F32_MID_SLACK) return NULL;
  }
  float x = (float)d;
  if (isinf(x)) return NULL; /* rounds past FLT_MAX: strtof's inf, refused as out of range */
  *out = neg ? -x : x;
  return p;
}

/* [n1, ..., nD] into a fixed_size_list row: the items go straight into the
 * column's value buffer (room for the row reserved once), float32 items
 * through f32_fast where they can, every other item (and every refusal)
 * through scan_number and put_item as before. The row is committed only
 * when exactly D numbers came. The cursor is kept in a local: stores of
 * items through a byte pointer would make the compiler reload c->pos. */
static __attribute__((noinline)) int put_vector(ctx_t *c, const mw_field_t *f, mw_column_t *col) {
  const uint8_t *at = c->pos, *e = c->e, *p;
  char d[16], t[96];
  int32_t n = 0, dim = f->fsl_dim;
  size_t iw = mw_fsl_item_width(f);
  bool f32 = f->item_type == MW_T_FLOAT32;
  uint8_t *room = mw_column_fsl_room(col, f);
  if (room == NULL) return NOMEM(c);
  assert(dim >= 1);
  assert(dim <= MW_MAX_FSL_DIM);
  p = skip_ws(at + 1, e);
  if (p < e && *p == ']') {
    p++;
  } else {
    for (;;) {
      float x;
      const uint8_t *q = f32 ? f32_fast(p, e, &x) : NULL;
      if (q != NULL) {
        if (n < dim) memcpy(room + (size_t)n * 4, &x, 4);
        p = q;
      } else {
        c->pos = p;
        if (p >= e)
          return FAIL(c, MW_JSONROW_E_PARSE, p, "at byte %zu: unterminated array",
                      (size_t)(at - c->s));
        uint8_t ch = *p;
        if (ch != '-' && !is_digit(ch)) {
          if (ch != '"' && ch != 't' && ch != 'f' && ch != 'n' && ch != '[' && ch != '{')
            return FAIL(c, MW_JSONROW_E_PARSE, p, "at byte %zu: expected a value, got %s",
                        (size_t)(p - c->s), byte_desc(c, p, d, sizeof d));
          return FAIL(c, MW_JSONROW_E_TYPE, p,
                      "field \"%s\": element %d: expected a number (%s), got %s", FNAME(c), n,
                      mw_type_name(f->item_type), got_kind(ch));
        }
        uint8_t scratch[16];
        int rc = put_item(c, f, n < dim ? room + (size_t)n * iw : scratch);
        if (rc < 0) return rc;
        p = c->pos;
      }
      if (n < INT32_MAX) n++;
      if (p < e && *p == ',') { /* the usual separator, no space before it */
        p = skip_ws(p + 1, e);
        continue;
      }
      p = skip_ws(p, e);
      if (p < e && *p == ',') {
        p = skip_ws(p + 1, e);
        continue;
      }
      if (p < e && *p == ']') {
        p++;
        break;
      }
      c->pos = p;
      return FAIL(c, MW_JSONROW_E_PARSE, p, "at byte %zu: expected ',' or ']', got %s",
                  (size_t)(p - c->s), byte_desc(c, p, d, sizeof d));
    }
  }
  c->pos = p;
  if (n != dim)
    return FAIL(c, MW_JSONROW_E_TYPE, at, "field \"%s\": expected %d numbers (%s), got %d",
                FNAME(c), dim, type_desc(f, t, sizeof t), n);
  /* the builder keeps a materialised item bitmap in step (batch.c) */
  if (mw_column_fsl_commit(col, f) < 0) return NOMEM(c);
  return 0;
}

static int fail_depth(ctx_t *c) {
  return FAIL(c, MW_JSONROW_E_PARSE, c->pos, "at byte %zu: nesting deeper than %u",
              (size_t)(c->pos - c->s), c->p->opts.max_depth);
}

/* After a list's element or a struct's member: ',' (*more = true, the
 * next one's start skipped to) or the closing byte (*more = false, past
 * it); anything else is a parse error naming both. */
static MW_ALWAYS_INLINE int next_item(ctx_t *c, uint8_t close, bool *more) {
  assert(close == ']' || close == '}');
  char d[16];
  c->pos = skip_ws(c->pos, c->e);
  if (c->pos < c->e && *c->pos == ',') {
    c->pos = skip_ws(c->pos + 1, c->e);
    *more = true;
    return 0;
  }
  if (c->pos < c->e && *c->pos == close) {
    c->pos++;
    *more = false;
    return 0;
  }
  return FAIL(c, MW_JSONROW_E_PARSE, c->pos, "at byte %zu: expected ',' or '%c', got %s",
              (size_t)(c->pos - c->s), close, byte_desc(c, c->pos, d, sizeof d));
}

/* Past a list's '[' or a struct's '{' at c->pos, one level deeper than
 * depth: *more = false when it closes at once (empty). */
static int open_items(ctx_t *c, uint32_t depth, uint8_t close, bool *more) {
  assert(c->pos < c->e); /* at the opening byte */
  if (depth + 1 > c->p->opts.max_depth) return fail_depth(c);
  c->pos = skip_ws(c->pos + 1, c->e);
  *more = !(c->pos < c->e && *c->pos == close);
  if (!*more) c->pos++;
  return 0;
}

/* [v1, ...] into a list column: each element by the item's rules. */
static int put_list(ctx_t *c, const mw_field_t *f, mw_column_t *col, uint32_t depth) {
  assert(f->n_children == 1); /* a list's item */
  bool more;
  int rc = open_items(c, depth, ']', &more);
  if (rc < 0) return rc;
  for (int64_t i = 0; more; i++) {
    size_t mark = path_push(c, NULL, i);
    rc = put_value_at(c, &f->children[0], &col->children[0], false, depth + 1);
    path_pop(c, mark);
    if (rc < 0) return rc;
    if ((rc = next_item(c, ']', &more)) < 0) return rc;
  }
  rc = mw_column_list_end(col);
  return rc < 0 ? fail_code(c, rc, MW_JSONROW_E_INTERNAL, c->pos, "column \"%s\" is full", FNAME(c)) : 0;
}

/* A member's name and its ':' at c->pos (of the row: a "field", of a
 * struct value: a "member"): the name (decoded when it has escapes) in
 * *key, c->pos at its value. */
static MW_ALWAYS_INLINE int member_name(ctx_t *c, const char *what, const uint8_t **key,
                                        size_t *key_len) {
  char d[16];
  const uint8_t *raw;
  size_t raw_len;
  bool esc;
  if (c->pos >= c->e || *c->pos != '"')
    return FAIL(c, MW_JSONROW_E_PARSE, c->pos, "at byte %zu: expected a %s name, got %s",
                (size_t)(c->pos - c->s), what, byte_desc(c, c->pos, d, sizeof d));
  int rc = scan_string(c, &raw, &raw_len, &esc);
  if (rc < 0) return rc;
  *key = raw, *key_len = raw_len;
  if (esc) {
    if (decode_string(raw, raw_len, &c->p->keybuf) < 0) return NOMEM(c);
    *key = c->p->keybuf.data, *key_len = c->p->keybuf.len;
  }
  c->pos = skip_ws(c->pos, c->e);
  if (c->pos >= c->e || *c->pos != ':')
    return FAIL(c, MW_JSONROW_E_PARSE, c->pos, "at byte %zu: expected ':', got %s",
                (size_t)(c->pos - c->s), byte_desc(c, c->pos, d, sizeof d));
  c->pos = skip_ws(c->pos + 1, c->e);
  return 0;
}

/* One "name": value of a struct (its start at kat): into its child column,
 * marked in seen; an unknown name is skipped or refused. */
static int put_member(ctx_t *c, const mw_field_t *f, mw_column_t *col, uint32_t depth, uint8_t *seen) {
  char k[80];
  const uint8_t *kat = c->pos, *key = NULL;
  size_t key_len = 0;
  int rc = member_name(c, "member", &key, &key_len);
  if (rc < 0) return rc;
  int ci = -1;
  for (uint32_t i = 0; i < f->n_children && ci < 0; i++)
    if (strlen(f->children[i].name) == key_len && memcmp(f->children[i].name, key, key_len) == 0)
      ci = (int)i;
  if (ci < 0) {
    if (!c->p->opts.ignore_unknown_fields)
      return FAIL(c, MW_JSONROW_E_SCHEMA, kat, "field \"%s\": unknown member \"%s\"", FNAME(c),
                  shown(key, key_len, k, sizeof k));
    return skip_value(c, depth + 1);
  }
  assert((uint32_t)ci < MW_MAX_STRUCT_FIELDS); /* fits seen[] */
  if (mw_bit_get(seen, ci))
    return FAIL(c, MW_JSONROW_E_PARSE, kat, "at byte %zu: duplicate key \"%s\"",
                (size_t)(kat - c->s), f->children[ci].name);
  mw_bit_set(seen, ci, true);
  size_t mark = path_push(c, f->children[ci].name, 0);
  rc = put_value_at(c, &f->children[ci], &col->children[ci], false, depth + 1);
  path_pop(c, mark);
  return rc;
}

/* The members a struct value did not give: null, or refused when the
 * member is not nullable. */
static int struct_missing(ctx_t *c, const mw_field_t *f, mw_column_t *col, const uint8_t *seen) {
  for (uint32_t i = 0; i < f->n_children; i++) {
    if (mw_bit_get(seen, i)) continue;
    const mw_field_t *cf = &f->children[i];
    if (!cf->nullable) {
      char t[96];
      size_t mark = path_push(c, cf->name, 0);
      int rc = FAIL(c, MW_JSONROW_E_SCHEMA, c->pos, "missing field \"%s\" (%s not null)", FNAME(c),
                    type_desc(cf, t, sizeof t));
      path_pop(c, mark);
      return rc;
    }
    if (mw_column_append_null(&col->children[i], cf) < 0) return NOMEM(c);
  }
  return 0;
}

/* {"a": v, ...} into a struct column: members by name, each once; the ones
 * not given are null (or refused when not nullable). */
static int put_struct(ctx_t *c, const mw_field_t *f, mw_column_t *col, uint32_t depth) {
  assert(f->n_children <= MW_MAX_STRUCT_FIELDS);
  uint8_t seen[MW_MAX_STRUCT_FIELDS / 8] = {0};
  bool more;
  int rc = open_items(c, depth, '}', &more);
  if (rc < 0) return rc;
  while (more) {
    if ((rc = put_member(c, f, col, depth, seen)) < 0) return rc;
    if ((rc = next_item(c, '}', &more)) < 0) return rc;
  }
  rc = struct_missing(c, f, col, seen);
  if (rc < 0) return rc;
  return mw_column_struct_end(col) < 0 ? NOMEM(c) : 0;
}

/* An object or array into a string column as its JSON text (opt-in). */
static int put_json_text(ctx_t *c, mw_column_t *col, uint32_t depth) {
  const uint8_t *start = c->pos;
  int rc = skip_value(c, depth);
  if (rc < 0) return rc;
  rc = mw_column_append_bytes(col, start, (size_t)(c->pos - start));
  return rc < 0 ? fail_code(c, rc, MW_JSONROW_E_INTERNAL, start, "column \"%s\" is full", FNAME(c)) : 0;
}

/* Parse the value at c->pos by field f's rules and append it to col. */
static int put_value_at(ctx_t *c, const mw_field_t *f, mw_column_t *col, bool is_pk, uint32_t depth) {
  const uint8_t *at = c->pos;
  char d[16];
  if (at >= c->e)
    return FAIL(c, MW_JSONROW_E_PARSE, at, "at byte %zu: expected a value, got end of line",
                (size_t)(at - c->s));
  uint8_t ch = *at;
  mw_layout_t l = mw_field_layout(f);
  int rc;
  if (ch == 'n') {
    if ((rc = scan_literal(c, "null", 4)) < 0) return rc;
    if (is_pk)
      return FAIL(c, MW_JSONROW_E_PK, at, "primary key field \"%s\" is null", FNAME(c));
    if (!f->nullable) {
      char t[96], w[48];
      return FAIL(c, MW_JSONROW_E_TYPE, at, "field \"%s\": expected %s (%s not null), got null",
                  FNAME(c), expected_what(f, w, sizeof w), type_desc(f, t, sizeof t));
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
  bool text = c->p->opts.objects_as_text && (f->type == MW_T_UTF8 || f->type == MW_T_LARGE_UTF8);
  if (ch == '"') {
    if (l == MW_LAYOUT_FSL || l == MW_LAYOUT_LIST || l == MW_LAYOUT_STRUCT || l == MW_LAYOUT_BOOL ||
        f->type == MW_T_FLOAT16 || f->type == MW_T_FLOAT32 || f->type == MW_T_FLOAT64)
      return fail_mismatch(c, f, at);
    return put_string(c, f, col);
  }
  if (ch == '[') {
    if (text) return put_json_text(c, col, depth);
    if (l == MW_LAYOUT_FSL) return put_vector(c, f, col);
    if (l == MW_LAYOUT_LIST) return put_list(c, f, col, depth);
    return fail_mismatch(c, f, at);
  }
  if (ch == '{') {
    if (text) return put_json_text(c, col, depth);
    if (l == MW_LAYOUT_STRUCT) return put_struct(c, f, col, depth);
    return fail_mismatch(c, f, at);
  }
  if (ch != '-' && !is_digit(ch))
    return FAIL(c, MW_JSONROW_E_PARSE, at, "at byte %zu: expected a value, got %s",
                (size_t)(at - c->s), byte_desc(c, at, d, sizeof d));
  if (l != MW_LAYOUT_FIXED || f->type == MW_T_FIXED_BINARY) {
    num_t num;
    return (rc = scan_number(c, &num)) < 0 ? rc : fail_mismatch(c, f, at);
  }
  return put_number(c, f, col, at);
}

/* The value of top-level field fi. */
static int put_value(ctx_t *c, int fi) {
  const mw_field_t *f = &c->p->schema->fields[fi];
  /* a copy, not snprintf: this runs per value, and formatting the name
   * was ~10% of the daemon's CPU at 10 000-row writes */
  size_t n = c->p->name_lens[fi];
  if (n >= sizeof c->p->path) n = sizeof c->p->path - 1; /* cut, as snprintf did */
  memcpy(c->p->path, f->name, n);
  c->p->path[n] = '\0';
  assert(n < sizeof c->p->path);
  return put_value_at(c, f, &c->out->cols[fi], fi == c->p->pk, 1);
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
  assert(p != NULL);
  assert(schema != NULL);
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
  const mw_field_t *last = &schema->fields[n - 1];
  if (strcmp(last->name, "_tombstone") == 0 && last->type == MW_T_BOOL && !last->nullable)
    p->tombstone = (int)n - 1;
  p->deletes_ok = true;
  for (size_t i = 0; i < n; i++) {
    const mw_field_t *f = &schema->fields[i];
    char why[160];
    if (mw_field_check(f, why, sizeof why) < 0) goto inval;
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
  if (p->c_locale) freelocale((locale_t)p->c_locale);
  mw_buf_free(&p->scratch);
  mw_buf_free(&p->keybuf);
  memset(p, 0, sizeof *p);
}

/* ------------------------------------------------------------------ parse */

/* Read one member's key at c->pos; *fi = field index or -1 (unknown). */
static int read_key(ctx_t *c, int guess, int *fi, const uint8_t **key, size_t *key_len) {
  int rc = member_name(c, "field", key, key_len);
  if (rc < 0) return rc;
  *fi = lookup(c->p, *key, *key_len, guess);
  return 0;
}

static int parse_member(ctx_t *c, int *guess) {
  const uint8_t *kat = c->pos, *key = NULL;
  size_t key_len = 0;
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
  bool more = !(c->pos < c->e && *c->pos == '}');
  if (!more) c->pos++;
  while (more) {
    if ((rc = parse_member(c, &guess)) < 0) return rc;
    if ((rc = next_item(c, '}', &more)) < 0) return rc;
  }
  c->pos = skip_ws(c->pos, c->e);
  if (c->pos != c->e)
    return FAIL(c, MW_JSONROW_E_PARSE, c->pos, "at byte %zu: trailing garbage after the object",
                (size_t)(c->pos - c->s));
  return fill_missing(c);
}

int mw_jsonrow_parse(mw_jsonrow_parser_t *p, const char *line, size_t len, bool is_delete,
                     mw_batch_t *out, mw_jsonrow_error_t *err) {
  assert(p != NULL);
  assert(p->schema != NULL);
  assert(out != NULL);
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
    /* a list or struct may have children appended without its own row */
    for (size_t i = 0; i < p->schema->n_fields; i++) {
      mw_layout_t l = mw_field_layout(&p->schema->fields[i]);
      if (out->cols[i].length > out->n_rows || l == MW_LAYOUT_LIST || l == MW_LAYOUT_STRUCT)
        mw_column_truncate(&out->cols[i], &p->schema->fields[i], out->n_rows);
    }
    return rc;
  }
  out->n_rows++;
  return 0;
}
