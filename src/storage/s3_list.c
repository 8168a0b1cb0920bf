/*
 * s3_list.c — listings: ListObjectsV2 pages into the keys of a `list` (or
 * of the listing a delete_prefix and delete_root's probe start with).
 *
 * A page's <Key>s are object names: the backend's prefix and its '/' come
 * off, and a name that is not a storage key we could name
 * (mw_storage_key_valid) is skipped, never reported. The keys gather in
 * req->buf as "k\0k\0..." (at most MW_STORAGE_LIST_MAX_KEYS: -EOVERFLOW
 * past it); a truncated page's NextContinuationToken is where the next
 * page starts. At the end req->keys points into req->buf, sorted.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "storage/s3_int.h"

/* Keys of one ListObjectsV2 page into req->buf; true when more pages come. */
int mw_s3__list_page(mw_s3_t *s, mw_storage_req_t *req, bool *more) {
  mw_storage_req_s3_t *a = mw_s3_req(req);
  mw_s3_task_t *t = mw_s3__task(req);
  if (t == NULL) return -ENOMEM;
  const char *p = (const char *)a->resp.data, *end = p + a->resp.len, *v;
  size_t n, plen = s->prefix[0] ? strlen(s->prefix) + 1 : 0;
  char key[MW_STORAGE_KEY_MAX_BYTES * 2 + 8];
  const char *q = p;
  while (mw_s3__xml_next(&q, end, "Key", &v, &n)) {
    if (mw_s3__xml_text(v, n, key, sizeof key) < 0) continue;
    if (strlen(key) < plen) continue;
    if (plen > 0 && (memcmp(key, s->prefix, plen - 1) != 0 || key[plen - 1] != '/')) continue;
    const char *k = key + plen;
    if (!mw_storage_key_valid(k)) continue; /* not a key we could name */
    if (t->nkeys >= MW_STORAGE_LIST_MAX_KEYS) return -EOVERFLOW;
    int rc = mw_buf_append(&req->buf, k, strlen(k) + 1);
    if (rc < 0) return rc;
    t->nkeys++;
  }
  q = p;
  *more = mw_s3__xml_next(&q, end, "IsTruncated", &v, &n) && n == 4 && memcmp(v, "true", 4) == 0;
  t->token[0] = '\0';
  q = p;
  if (*more && (!mw_s3__xml_next(&q, end, "NextContinuationToken", &v, &n) ||
                mw_s3__xml_text(v, n, t->token, sizeof t->token) <= 0))
    return -EBADMSG;
  return 0;
}

static int cmp_key(const void *x, const void *y) {
  return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* req->keys over the NUL-separated keys in req->buf, sorted. */
int mw_s3__index_keys(mw_storage_req_t *req, size_t n) {
  free(req->keys);
  req->keys = NULL;
  req->nkeys = 0;
  if (n == 0) return 0;
  req->keys = malloc(n * sizeof *req->keys);
  if (req->keys == NULL) return -ENOMEM;
  const char *k = (const char *)req->buf.data;
  for (size_t i = 0; i < n; i++) {
    req->keys[i] = k;
    k += strlen(k) + 1;
  }
  assert(k == (const char *)req->buf.data + req->buf.len);
  qsort(req->keys, n, sizeof *req->keys, cmp_key);
  req->nkeys = n;
  return 0;
}

