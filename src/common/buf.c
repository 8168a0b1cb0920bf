/*
 * buf.c — growable byte buffers (see buf.h).
 *
 * Growth doubles the capacity (minimum 64 bytes) so appends are amortised
 * O(1); the MW_BUF_MAX_BYTES cap turns runaway growth into -EFBIG. A view
 * (cap == 0, data set) is copied into an allocation of its own by the
 * first write (reserve), never realloc'd or freed.
 */
#include "common/buf.h"

#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ blobs */

struct mw_blob {
  atomic_uint refs;
  size_t len;
  uint8_t *data;
};

mw_blob_t *mw_blob_new(uint8_t *data, size_t len) {
  assert(data != NULL || len == 0);
  mw_blob_t *b = malloc(sizeof *b);
  if (b == NULL) {
    free(data);
    return NULL;
  }
  atomic_init(&b->refs, 1);
  b->len = len;
  b->data = data;
  return b;
}

const uint8_t *mw_blob_data(const mw_blob_t *b) { return b->data; }
size_t mw_blob_len(const mw_blob_t *b) { return b->len; }
uint32_t mw_blob_refs(const mw_blob_t *b) { return atomic_load(&((mw_blob_t *)b)->refs); }

mw_blob_t *mw_blob_ref(mw_blob_t *b) {
  if (b == NULL) return NULL;
  unsigned old = atomic_fetch_add(&b->refs, 1);
  assert(old > 0);
  assert(old < UINT32_MAX);
  (void)old;
  return b;
}

void mw_blob_unref(mw_blob_t *b) {
  if (b == NULL) return;
  unsigned old = atomic_fetch_sub(&b->refs, 1);
  assert(old > 0);
  if (old != 1) return;
  free(b->data);
  free(b);
}

/* ---------------------------------------------------------------- buffers */

void mw_buf_init(mw_buf_t *b) {
  assert(b != NULL);
  b->data = NULL;
  b->len = 0;
  b->cap = 0;
}

void mw_buf_view(mw_buf_t *b, const uint8_t *p, size_t n) {
  assert(b != NULL);
  assert(p != NULL || n == 0);
  b->data = n ? (uint8_t *)p : NULL; /* never written through: see mw_buf_own */
  b->len = n;
  b->cap = 0;
}

int mw_buf_own(mw_buf_t *b) {
  assert(b != NULL);
  if (!mw_buf_is_view(b)) return 0;
  size_t cap = b->len < 64 ? 64 : b->len;
  uint8_t *p = malloc(cap);
  if (p == NULL) return -ENOMEM;
  memcpy(p, b->data, b->len);
  b->data = p;
  b->cap = cap;
  assert(!mw_buf_is_view(b));
  return 0;
}

void mw_buf_free(mw_buf_t *b) {
  if (b == NULL) return;
  if (!mw_buf_is_view(b)) free(b->data);
  mw_buf_init(b);
}

void mw_buf_reset(mw_buf_t *b) {
  assert(b != NULL);
  if (mw_buf_is_view(b)) b->data = NULL; /* forget the view */
  b->len = 0;
}

int mw_buf_reserve(mw_buf_t *b, size_t extra) {
  assert(b != NULL);
  assert(mw_buf_is_view(b) || b->len <= b->cap);
  if (extra > MW_BUF_MAX_BYTES - b->len) return -EFBIG;
  size_t need = b->len + extra;
  if (need <= b->cap) return 0;
  if (mw_buf_is_view(b)) { /* copy-on-write: the view's bytes into our own */
    int rc = mw_buf_own(b);
    if (rc < 0) return rc;
    if (need <= b->cap) return 0;
  }
  size_t cap = b->cap < 64 ? 64 : b->cap;
  while (cap < need) cap = cap > MW_BUF_MAX_BYTES / 2 ? MW_BUF_MAX_BYTES : cap * 2;
  uint8_t *p = realloc(b->data, cap);
  if (p == NULL) return -ENOMEM;
  b->data = p;
  b->cap = cap;
  return 0;
}

int mw_buf_reserve_exact(mw_buf_t *b, size_t extra) {
  assert(b != NULL);
  assert(b->len <= b->cap);
  if (extra > MW_BUF_MAX_BYTES - b->len) return -EFBIG;
  size_t need = b->len + extra;
  if (need <= b->cap) return 0;
  uint8_t *p = realloc(b->data, need);
  if (p == NULL) return -ENOMEM;
  b->data = p;
  b->cap = need;
  return 0;
}

void mw_buf_shrink(mw_buf_t *b) {
  assert(b != NULL);
  if (mw_buf_is_view(b)) return; /* not ours to give back */
  assert(b->len <= b->cap);
  if (b->len == 0) {
    mw_buf_free(b);
    return;
  }
  if (b->cap - b->len <= b->len / 8) return;
  uint8_t *p = realloc(b->data, b->len);
  if (p == NULL) return; /* keeping the slack is always correct */
  b->data = p;
  b->cap = b->len;
  assert(b->cap == b->len);
}

int mw_buf_append(mw_buf_t *b, const void *p, size_t n) {
  if (n == 0) return 0;
  assert(p != NULL);
  int rc = mw_buf_reserve(b, n);
  if (rc < 0) return rc;
  memcpy(b->data + b->len, p, n);
  b->len += n;
  return 0;
}

int mw_buf_fill(mw_buf_t *b, uint8_t v, size_t n) {
  assert(b != NULL);
  if (n == 0) return 0;
  int rc = mw_buf_reserve(b, n);
  if (rc < 0) return rc;
  memset(b->data + b->len, v, n);
  b->len += n;
  return 0;
}

int mw_buf_align(mw_buf_t *b, size_t align, uint8_t v) {
  assert(align != 0);
  assert((align & (align - 1)) == 0);
  size_t rem = b->len & (align - 1);
  return rem == 0 ? 0 : mw_buf_fill(b, v, align - rem);
}

int mw_buf_put_u8(mw_buf_t *b, uint8_t v) { return mw_buf_append(b, &v, 1); }

int mw_buf_put_u16le(mw_buf_t *b, uint16_t v) {
  uint8_t t[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
  return mw_buf_append(b, t, 2);
}

int mw_buf_put_u32le(mw_buf_t *b, uint32_t v) {
  uint8_t t[4];
  mw_store_u32le(t, v);
  return mw_buf_append(b, t, 4);
}

int mw_buf_put_u64le(mw_buf_t *b, uint64_t v) {
  uint8_t t[8];
  mw_store_u64le(t, v);
  return mw_buf_append(b, t, 8);
}

void *mw_buf_extend(mw_buf_t *b, size_t n) {
  /* Reserve at least one byte so data is never NULL here: NULL + 0 is
   * undefined behaviour in C (UBSan flags it). */
  if (mw_buf_reserve(b, n ? n : 1) < 0) return NULL;
  void *p = b->data + b->len;
  if (n > 0) memset(p, 0, n);
  b->len += n;
  assert(b->len <= b->cap); /* reserve made the room */
  return p;
}

uint8_t *mw_buf_steal(mw_buf_t *b, size_t *len) {
  assert(b != NULL);
  assert(len != NULL);
  if (mw_buf_is_view(b) && mw_buf_own(b) < 0) {
    *len = 0;
    mw_buf_init(b);
    return NULL;
  }
  uint8_t *p = b->data;
  *len = b->len;
  mw_buf_init(b);
  return p;
}
