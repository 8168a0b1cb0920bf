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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/s3_int.h"

/* Keys of one ListObjectsV2 page into req->buf; true when more pages come. */
static int list_page(mw_s3_t *s, mw_storage_req_t *req, bool *more) {
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
  assert(t->nkeys <= MW_STORAGE_LIST_MAX_KEYS);
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
static int index_keys(mw_storage_req_t *req, size_t n) {
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

/* ListObjectsV2 of the request's prefix (delete_root's probe: one key of
 * the whole root), from the continuation token on. */
int mw_s3__list_build(mw_s3_t *s, mw_storage_req_t *req, mw_s3_spec_t *sp, mw_buf_t *q) {
  mw_storage_req_s3_t *a = mw_s3_req(req);
  mw_s3_task_t *t = a->task;
  assert(t != NULL);
  bool probe = a->phase == P_PROBE;
  sp->method = "GET";
  sp->key = NULL;
  int rc = 0;
  if (t->token[0]) rc = mw_s3__query_add(q, "continuation-token=", t->token);
  if (rc == 0 && t->token[0]) rc = mw_s3__append(q, "&");
  if (rc == 0) rc = mw_s3__append(q, "list-type=2&");
  if (rc == 0 && probe) rc = mw_s3__append(q, "max-keys=1&");
  if (rc == 0) rc = mw_s3__append(q, "prefix=");
  if (rc == 0) rc = mw_s3__encode_name(s, probe ? "" : req->priv.key, false, false, q);
  return rc;
}

/* delete_root's probe (ListObjectsV2 max-keys=1 after the aborts): a key
 * left means the root is not empty. */
static int probe_answer(mw_s3_t *s, mw_storage_req_t *req) {
  mw_s3_task_t *t = mw_s3_req(req)->task;
  assert(req->priv.op == MW_OP_DELETE_ROOT);
  bool more = false;
  int rc = list_page(s, req, &more);
  if (rc < 0) return rc;
  if (t->nkeys > 0) {
    char why[MW_STORAGE_KEY_MAX_BYTES + 32];
    snprintf(why, sizeof why, "not empty: %s is an object", (const char *)req->buf.data);
    mw_buf_reset(&req->buf);
    mw_s3__set_reason(s, req, why);
    return mw_s3__end(s, req, -ENOTEMPTY);
  }
  return mw_s3__end(s, req, 0);
}

int mw_s3__list_answer(mw_s3_t *s, mw_storage_req_t *req, const mw_s3_answer_t *an) {
  mw_storage_req_s3_t *a = mw_s3_req(req);
  mw_s3_task_t *t = a->task;
  assert(t != NULL); /* submit made it */
  if (!an->ok) return 0;
  if (a->phase == P_PROBE) return probe_answer(s, req);
  assert(a->phase == P_LIST);
  bool more = false;
  int rc = list_page(s, req, &more);
  if (rc < 0) return rc;
  assert(t->nkeys <= MW_STORAGE_LIST_MAX_KEYS);
  if (more) return mw_s3__go(s, req, P_LIST);
  if (req->priv.op == MW_OP_DELETE_PREFIX) {
    t->i = t->off = 0;
    mw_s3__delete_next(s, req);
    return MW_S3_MOVED;
  }
  assert(req->priv.op == MW_OP_LIST);
  return mw_s3__end(s, req, index_keys(req, t->nkeys));
}
