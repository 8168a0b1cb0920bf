/*
 * s3_xml.c — the XML of S3's answers and of the bodies we send.
 *
 * S3 answers with small, flat documents (ListBucketResult,
 * ListMultipartUploadsResult, InitiateMultipartUploadResult, DeleteResult,
 * Error) whose fields we read by tag name. No XML parser: a scanner finds
 * the next <Tag>value</Tag> after a position (callers restart from the
 * document's start, or scan inside an element's value, for each field), and
 * a value is decoded as text (the five predefined entities and ASCII
 * character references; anything else is refused, never guessed). Bodies we
 * send (DeleteObjects, CompleteMultipartUpload) hold keys escaped here.
 * Every read is bounded by the answer's length, never by a NUL.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "storage/s3_int.h"

/* Next <tag>value</tag> in [*p, end): value bounds; *p moves past it. */
bool mw_s3__xml_next(const char **p, const char *end, const char *tag, const char **v,
                     size_t *n) {
  char open[64], close[66];
  int lo = snprintf(open, sizeof open, "<%s>", tag);
  int lc = snprintf(close, sizeof close, "</%s>", tag);
  assert(lo > 0);
  assert(lc > 0);
  assert((size_t)lc < sizeof close);
  const char *a = memmem(*p, (size_t)(end - *p), open, (size_t)lo);
  if (a == NULL) return false;
  a += lo;
  const char *z = memmem(a, (size_t)(end - a), close, (size_t)lc);
  if (z == NULL) return false;
  *v = a;
  *n = (size_t)(z - a);
  *p = z + lc;
  return true;
}

/* XML text -> out (entities decoded, NUL-terminated); -1 when it does not
 * fit or an entity is unknown. */
int mw_s3__xml_text(const char *v, size_t n, char *out, size_t cap) {
  assert(cap > 0);
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    char c = v[i];
    if (c == '&') {
      static const struct { const char *e; char c; } ents[] = {
          {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
      bool hit = false;
      for (size_t k = 0; k < 5 && !hit; k++) {
        size_t el = strlen(ents[k].e);
        if (n - i >= el && memcmp(v + i, ents[k].e, el) == 0) {
          c = ents[k].c;
          i += el - 1;
          hit = true;
        }
      }
      if (!hit && n - i > 3 && v[i + 1] == '#') { /* &#NN; or &#xNN; (ASCII only) */
        char *endp = NULL;
        bool hex = v[i + 2] == 'x';
        long x = strtol(v + i + (hex ? 3 : 2), &endp, hex ? 16 : 10);
        if (endp == NULL || endp >= v + n || *endp != ';' || x <= 0 || x > 127) return -1;
        c = (char)x;
        i = (size_t)(endp - v);
        hit = true;
      }
      if (!hit) return -1;
    }
    if (o + 1 >= cap) return -1;
    out[o++] = c;
  }
  out[o] = '\0';
  return (int)o;
}

/* "2026-12-01T22:40:53.608Z" -> Unix seconds, or -1. */
int64_t mw_s3__iso8601(const char *v) {
  struct tm tm;
  memset(&tm, 0, sizeof tm);
  if (sscanf(v, "%d-%d-%dT%d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
             &tm.tm_min, &tm.tm_sec) != 6)
    return -1;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return (int64_t)timegm(&tm);
}

/* XML text of s onto b (&, <, >, " and ' as entities). */
int mw_s3__xml_escape(mw_buf_t *b, const char *s) {
  int rc = 0;
  for (; rc == 0 && *s; s++) {
    const char *e = *s == '&' ? "&amp;" : *s == '<' ? "&lt;" : *s == '>' ? "&gt;"
                  : *s == '"' ? "&quot;" : *s == '\'' ? "&apos;" : NULL;
    rc = e != NULL ? mw_s3__append(b, e) : mw_buf_append(b, s, 1);
  }
  return rc;
}

