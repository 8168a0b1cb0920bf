/*
 * exact_json.c — see exact_json.h. Numbers print like JavaScript's
 * Number#toString for the values the fixtures use (the shortest %.*g that
 * reads back to the same double; no exponent below 1e21).
 */
#include "exact_json.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int putf(mw_buf_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int putf(mw_buf_t *o, const char *fmt, ...) {
  char tmp[128];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  return n < 0 ? -EINVAL : mw_buf_append(o, tmp, (size_t)n);
}

static int put_double(mw_buf_t *o, double d) {
  char tmp[64];
  if (d == 0) return putf(o, "%s", signbit(d) ? "0" : "0"); /* JSON.stringify(-0) is "0" */
  for (int p = 1; p <= 17; p++) {
    snprintf(tmp, sizeof tmp, "%.*g", p, d);
    if (strtod(tmp, NULL) == d) break;
  }
  /* %g may use an exponent where JavaScript writes all digits */
  if (strchr(tmp, 'e') && fabs(d) < 1e21 && fabs(d) >= 1) snprintf(tmp, sizeof tmp, "%.0f", d);
  return putf(o, "%s", tmp);
}

static double half_to_double(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
  return h & 0x8000 ? -v : v;
}

static int put_int128(mw_buf_t *o, __int128 v) {
  char tmp[48];
  int i = sizeof tmp - 1;
  tmp[i] = 0;
  unsigned __int128 u = v < 0 ? -(unsigned __int128)v : (unsigned __int128)v;
  do {
    tmp[--i] = (char)('0' + (int)(u % 10));
    u /= 10;
  } while (u);
  if (v < 0) tmp[--i] = '-';
  return putf(o, "\"%s\"", tmp + i);
}

static int put_string(mw_buf_t *o, const uint8_t *p, size_t n) {
  int rc = mw_buf_put_u8(o, '"');
  for (size_t i = 0; i < n && rc == 0; i++) {
    uint8_t b = p[i];
    if (b == '"' || b == '\\') rc = putf(o, "\\%c", b);
    else if (b == '\n') rc = putf(o, "\\n");
    else if (b == '\t') rc = putf(o, "\\t");
    else if (b == '\r') rc = putf(o, "\\r");
    else if (b < 0x20) rc = putf(o, "\\u%04x", b);
    else rc = mw_buf_put_u8(o, b);
  }
  return rc == 0 ? mw_buf_put_u8(o, '"') : rc;
}

/* A FIXED value of type t at p. */
static int put_fixed(mw_buf_t *o, mw_type_t t, size_t width, const uint8_t *p) {
  uint64_t u = 0;
  for (size_t i = 0; i < width && i < 8; i++) u |= (uint64_t)p[i] << (8 * i);
  switch (t) {
    case MW_T_INT8: return putf(o, "%d", (int8_t)u);
    case MW_T_INT16: return putf(o, "%d", (int16_t)u);
    case MW_T_INT32: return putf(o, "%" PRId32, (int32_t)u);
    case MW_T_UINT8: case MW_T_UINT16: case MW_T_UINT32: return putf(o, "%" PRIu64, u);
    case MW_T_INT64: return putf(o, "\"%" PRId64 "\"", (int64_t)u);
    case MW_T_UINT64: return putf(o, "\"%" PRIu64 "\"", u);
    case MW_T_FLOAT16: return put_double(o, half_to_double((uint16_t)u));
    case MW_T_FLOAT32: {
      float f;
      memcpy(&f, p, 4);
      return put_double(o, f);
    }
    case MW_T_FLOAT64: {
      double d;
      memcpy(&d, p, 8);
      return put_double(o, d);
    }
    case MW_T_DATE32: case MW_T_TIME32: return putf(o, "\"%" PRId32 "\"", (int32_t)u);
    case MW_T_TIMESTAMP: case MW_T_DATE64: case MW_T_TIME64: return putf(o, "\"%" PRId64 "\"", (int64_t)u);
    case MW_T_DECIMAL128: {
      __int128 v;
      memcpy(&v, p, 16);
      return put_int128(o, v);
    }
    case MW_T_FIXED_BINARY: {
      int rc = mw_buf_put_u8(o, '[');
      for (size_t i = 0; i < width && rc == 0; i++) rc = putf(o, "%s%u", i ? "," : "", p[i]);
      return rc == 0 ? mw_buf_put_u8(o, ']') : rc;
    }
    default: return -EINVAL;
  }
}

int tu_exact_cell(const mw_field_t *f, const mw_column_t *c, int64_t row, mw_buf_t *out) {
  if (!mw_column_valid(c, row)) return putf(out, "null");
  int rc = 0;
  switch (mw_field_layout(f)) {
    case MW_LAYOUT_BOOL: return putf(out, "%s", mw_bit_get(c->values.data, row) ? "true" : "false");
    case MW_LAYOUT_VAR: {
      size_t n;
      const uint8_t *p = mw_column_bytes(c, row, &n);
      if (f->type == MW_T_UTF8 || f->type == MW_T_LARGE_UTF8) return put_string(out, p, n);
      rc = mw_buf_put_u8(out, '[');
      for (size_t i = 0; i < n && rc == 0; i++) rc = putf(out, "%s%u", i ? "," : "", p[i]);
      return rc == 0 ? mw_buf_put_u8(out, ']') : rc;
    }
    case MW_LAYOUT_FSL: {
      size_t iw = mw_fsl_item_width(f);
      const uint8_t *p = c->values.data + (size_t)row * mw_type_width(f);
      rc = mw_buf_put_u8(out, '[');
      for (int32_t k = 0; k < f->fsl_dim && rc == 0; k++) {
        if (k) rc = mw_buf_put_u8(out, ',');
        int64_t item = row * f->fsl_dim + k;
        if (rc == 0 && c->item_validity.len && !mw_bit_get(c->item_validity.data, item)) rc = putf(out, "null");
        else if (rc == 0) rc = put_fixed(out, f->item_type, iw, p + (size_t)k * iw);
      }
      return rc == 0 ? mw_buf_put_u8(out, ']') : rc;
    }
    case MW_LAYOUT_LIST: {
      int64_t a, b;
      mw_column_list_range(c, row, &a, &b);
      rc = mw_buf_put_u8(out, '[');
      for (int64_t i = a; i < b && rc == 0; i++) {
        if (i > a) rc = mw_buf_put_u8(out, ',');
        if (rc == 0) rc = tu_exact_cell(&f->children[0], &c->children[0], i, out);
      }
      return rc == 0 ? mw_buf_put_u8(out, ']') : rc;
    }
    case MW_LAYOUT_STRUCT:
      rc = mw_buf_put_u8(out, '{');
      for (uint32_t i = 0; i < f->n_children && rc == 0; i++) {
        rc = putf(out, "%s", i ? "," : "");
        if (rc == 0) rc = put_string(out, (const uint8_t *)f->children[i].name, strlen(f->children[i].name));
        if (rc == 0) rc = mw_buf_put_u8(out, ':');
        if (rc == 0) rc = tu_exact_cell(&f->children[i], &c->children[i], row, out);
      }
      return rc == 0 ? mw_buf_put_u8(out, '}') : rc;
    default:
      return put_fixed(out, f->type, mw_type_width(f), c->values.data + (size_t)row * mw_type_width(f));
  }
}

int tu_exact_row(const mw_batch_t *b, size_t n_fields, int64_t row, mw_buf_t *out) {
  int rc = mw_buf_put_u8(out, '{');
  for (size_t i = 0; i < n_fields && rc == 0; i++) {
    const mw_field_t *f = &b->schema->fields[i];
    rc = putf(out, "%s", i ? "," : "");
    if (rc == 0) rc = put_string(out, (const uint8_t *)f->name, strlen(f->name));
    if (rc == 0) rc = mw_buf_put_u8(out, ':');
    if (rc == 0) rc = tu_exact_cell(f, &b->cols[i], row, out);
  }
  return rc == 0 ? mw_buf_put_u8(out, '}') : rc;
}
