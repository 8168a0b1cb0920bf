/*
 * s3_name.c — key encoding: a storage key's object name, and the
 * percent-encoding of names and query values.
 *
 * "s3://BUCKET/PREFIX" + "/" + key is the object name; the path is
 * percent-encoded per segment (RFC 3986 unreserved characters kept, '/'
 * kept in paths), query parameters are passed sorted and percent-encoded
 * as k=v, since curl 7.88's SigV4 does not canonicalise them
 * (../shared/s3/README.md). What curl signs is then exactly what is sent.
 */
#include <assert.h>
#include <string.h>

#include "storage/s3_int.h"

static bool unreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.' || c == '~';
}

/* Percent-encode s (keeping '/' when path) onto b. */
int mw_s3__encode(mw_buf_t *b, const char *s, bool path) {
  static const char hx[] = "0123456789ABCDEF";
  int rc = 0;
  assert(b != NULL);
  assert(s != NULL);
  for (; rc == 0 && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (unreserved(c) || (path && c == '/')) {
      rc = mw_buf_append(b, s, 1);
    } else {
      char e[3] = {'%', hx[c >> 4], hx[c & 15]};
      rc = mw_buf_append(b, e, 3);
    }
  }
  return rc;
}

int mw_s3__append(mw_buf_t *b, const char *s) { return mw_buf_append(b, s, strlen(s)); }

/* The object name of key k (prefix/k, or k without a prefix). */
int mw_s3__object_name(const mw_s3_t *s, const char *k, mw_buf_t *out) {
  assert(s->prefix != NULL);
  int rc = 0;
  if (s->prefix[0]) {
    rc = mw_s3__append(out, s->prefix);
    if (rc == 0) rc = mw_buf_append(out, "/", 1);
  }
  if (rc == 0) rc = mw_s3__append(out, k);
  return rc;
}

/* The object name of k (k itself when raw: an object name already),
 * percent-encoded onto out. */
int mw_s3__encode_name(const mw_s3_t *s, const char *k, bool raw, bool path, mw_buf_t *out) {
  mw_buf_t name = MW_BUF_INIT;
  assert(k != NULL);
  assert(out != NULL);
  int rc = raw ? mw_s3__append(&name, k) : mw_s3__object_name(s, k, &name);
  if (rc == 0) rc = mw_buf_append(&name, "", 1);
  if (rc == 0) rc = mw_s3__encode(out, (const char *)name.data, path);
  mw_buf_free(&name);
  return rc;
}

/* "k=" (given with its '=' and any '&' before it) and v percent-encoded. */
int mw_s3__query_add(mw_buf_t *q, const char *k_eq, const char *v) {
  assert(strchr(k_eq, '=') != NULL);
  int rc = mw_s3__append(q, k_eq);
  if (rc == 0) rc = mw_s3__encode(q, v, false);
  return rc;
}
