/*
 * flatbuf.c — FlatBuffers builder (byte-compatible with flatbuffers-rs) and
 * verifying reader. See flatbuf.h for the layout rules.
 *
 * Sample (the Message table of a Schema message, as arrow-rs writes it):
 *   10 00 00 00            root uoffset -> table at 16
 *   00 00                  padding (finish aligns for the 4-byte root)
 *   0a 00 0e 00 0c 00 0b 00 04 00   vtable: 10 bytes, object 14 bytes,
 *                          version @12, header_type @11, header @4
 *   0a 00 00 00            soffset: vtable is 10 bytes before the table
 *   14 00 00 00            header uoffset
 *   00 00 00 01 04 00      padding, header_type=1 (Schema), version=4 (V5)
 */
#include "lance/flatbuf.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"

/* ----------------------------------------------------------------- builder */

void mw_fbb_init(mw_fbb_t *b) {
  assert(b != NULL);
  memset(b, 0, sizeof *b);
  b->min_align = 1;
}

void mw_fbb_free(mw_fbb_t *b) {
  assert(b != NULL);
  free(b->buf);
  free(b->vts);
  mw_fbb_init(b);
}

void mw_fbb_reset(mw_fbb_t *b) {
  assert(b != NULL);
  b->head = b->cap;
  b->min_align = 1;
  b->n_locs = 0;
  b->n_vts = 0;
  b->err = 0;
}

/* Make room for n more bytes below head; returns the new head pointer. */
static uint8_t *make_space(mw_fbb_t *b, size_t n) {
  assert(b != NULL);
  assert(b->head <= b->cap);
  if (b->err) return NULL;
  if (b->head < n || b->buf == NULL) {
    size_t used = b->cap - b->head, cap = b->cap ? b->cap : 256;
    while (cap - used < n) cap *= 2;
    if (cap > MW_FBB_MAX_BYTES) {
      b->err = -EFBIG;
      return NULL;
    }
    uint8_t *nb = malloc(cap);
    if (nb == NULL) {
      b->err = -ENOMEM;
      return NULL;
    }
    if (used) memcpy(nb + cap - used, b->buf + b->head, used);
    free(b->buf);
    b->buf = nb;
    b->head = cap - used;
    b->cap = cap;
  }
  assert(b->head >= n);
  b->head -= n;
  return b->buf + b->head;
}

static void pad(mw_fbb_t *b, size_t n) {
  assert(n > 0);
  uint8_t *p = make_space(b, n);
  if (p) memset(p, 0, n);
}

static void align(mw_fbb_t *b, size_t len, size_t al) {
  assert(al);
  assert((al & (al - 1)) == 0);
  if (al > b->min_align) b->min_align = al;
  size_t n = (size_t)(-(mw_fbb_used(b) + len)) & (al - 1);
  if (n) pad(b, n);
}

static uint32_t push_raw(mw_fbb_t *b, const void *v, size_t sz) {
  assert(v != NULL);
  assert(sz == 1 || sz == 2 || sz == 4 || sz == 8); /* scalars, as mw_fbr_field reads them */
  align(b, sz, sz);
  uint8_t *p = make_space(b, sz);
  if (p) memcpy(p, v, sz); /* little-endian host, checked in ipc_int.h */
  return mw_fbb_used(b);
}

static uint32_t push_u32(mw_fbb_t *b, uint32_t v) { return push_raw(b, &v, 4); }

static uint32_t push_uoff(mw_fbb_t *b, uint32_t target) {
  assert(b != NULL);
  assert(target <= mw_fbb_used(b)); /* offsets point at what is already built */
  align(b, 4, 4);
  uint8_t *p = make_space(b, 4);
  if (p) mw_store_u32le(p, mw_fbb_used(b) - target);
  return mw_fbb_used(b);
}

static void track(mw_fbb_t *b, int slot, uint32_t off) {
  assert(slot >= 0);
  assert(slot < MW_FBB_MAX_SLOTS);
  assert(b->n_locs < MW_FBB_MAX_SLOTS);
  b->locs[b->n_locs].off = off;
  b->locs[b->n_locs].voff = (uint16_t)(4 + 2 * slot);
  b->n_locs++;
}

void mw_fbb_table_start(mw_fbb_t *b) {
  assert(b != NULL);
  b->n_locs = 0;
  b->table_start = mw_fbb_used(b);
}

void mw_fbb_slot_u8(mw_fbb_t *b, int slot, uint8_t v, uint8_t def) {
  assert(b != NULL);
  if (v != def) track(b, slot, push_raw(b, &v, 1));
}
void mw_fbb_slot_i16(mw_fbb_t *b, int slot, int16_t v, int16_t def) {
  assert(b != NULL);
  if (v != def) track(b, slot, push_raw(b, &v, 2));
}
void mw_fbb_slot_i32(mw_fbb_t *b, int slot, int32_t v, int32_t def) {
  assert(b != NULL);
  if (v != def) track(b, slot, push_raw(b, &v, 4));
}
void mw_fbb_slot_i64(mw_fbb_t *b, int slot, int64_t v, int64_t def) {
  assert(b != NULL);
  if (v != def) track(b, slot, push_raw(b, &v, 8));
}
void mw_fbb_slot_off(mw_fbb_t *b, int slot, uint32_t off) {
  assert(b->err != 0 || off > 0); /* 0 is where nothing is built yet */
  track(b, slot, push_uoff(b, off));
}

static bool vt_equal(const mw_fbb_t *b, const uint8_t *vt, size_t len, uint32_t old_used) {
  assert(b != NULL);
  const uint8_t *old = b->buf + b->cap - old_used;
  return mw_load_u16le(old) == len && memcmp(old, vt, len) == 0;
}

uint32_t mw_fbb_table_end(mw_fbb_t *b) {
  assert(b != NULL);
  uint32_t obj = push_u32(b, 0);
  size_t vt_len = 4;
  for (size_t i = 0; i < b->n_locs; i++)
    if ((size_t)b->locs[i].voff + 2 > vt_len) vt_len = (size_t)b->locs[i].voff + 2;
  uint8_t *vt = make_space(b, vt_len);
  if (vt == NULL) return 0;
  memset(vt, 0, vt_len);
  vt[0] = (uint8_t)vt_len;
  vt[1] = (uint8_t)(vt_len >> 8);
  uint32_t size = obj - b->table_start;
  vt[2] = (uint8_t)size;
  vt[3] = (uint8_t)(size >> 8);
  for (size_t i = 0; i < b->n_locs; i++) {
    uint32_t fo = obj - b->locs[i].off;
    vt[b->locs[i].voff] = (uint8_t)fo;
    vt[b->locs[i].voff + 1] = (uint8_t)(fo >> 8);
  }
  uint32_t vt_used = 0;
  for (size_t i = 0; i < b->n_vts && !vt_used; i++)
    if (vt_equal(b, vt, vt_len, b->vts[i])) vt_used = b->vts[i];
  if (vt_used) {
    b->head += vt_len; /* duplicate: drop it, share the old one */
  } else {
    if (b->n_vts == b->cap_vts) {
      size_t nc = b->cap_vts ? 2 * b->cap_vts : 16;
      uint32_t *nv = realloc(b->vts, nc * sizeof *nv);
      if (nv == NULL) {
        b->err = -ENOMEM;
        return 0;
      }
      b->vts = nv;
      b->cap_vts = nc;
    }
    vt_used = mw_fbb_used(b);
    b->vts[b->n_vts++] = vt_used;
  }
  mw_store_u32le(b->buf + b->cap - obj, (uint32_t)((int32_t)vt_used - (int32_t)obj));
  b->n_locs = 0;
  return obj;
}

uint32_t mw_fbb_string(mw_fbb_t *b, const void *s, size_t n) {
  assert(s != NULL || n == 0);
  assert(n < MW_FBB_MAX_BYTES);
  align(b, n + 1, 4);
  pad(b, 1);
  uint8_t *p = make_space(b, n);
  if (p && n) memcpy(p, s, n);
  return push_u32(b, (uint32_t)n);
}

uint32_t mw_fbb_vec_structs(mw_fbb_t *b, const void *src, size_t n, size_t elem_size,
                            size_t al) {
  assert(elem_size > 0);
  align(b, n * elem_size, al > 4 ? al : 4);
  uint8_t *p = make_space(b, n * elem_size);
  if (p && n) memcpy(p, src, n * elem_size);
  return push_u32(b, (uint32_t)n);
}

uint32_t mw_fbb_vec_offsets(mw_fbb_t *b, const uint32_t *offs, size_t n) {
  assert(offs != NULL || n == 0);
  assert(n < MW_FBB_MAX_BYTES / 4);
  align(b, n * 4, 4);
  uint8_t *p = make_space(b, n * 4);
  if (p) {
    uint32_t top = mw_fbb_used(b);
    for (size_t i = 0; i < n; i++) mw_store_u32le(p + 4 * i, top - 4 * (uint32_t)i - offs[i]);
  }
  return push_u32(b, (uint32_t)n);
}

int mw_fbb_finish(mw_fbb_t *b, uint32_t root, const uint8_t **p, size_t *n) {
  align(b, 4, b->min_align);
  push_uoff(b, root);
  if (b->err) return b->err;
  *p = b->buf + b->head;
  *n = b->cap - b->head;
  assert(*n % 4 == 0);
  return 0;
}

/* ------------------------------------------------------------------ reader */

static int bad(const mw_fbr_t *r, size_t pos, const char *what, const char *why) {
  assert(r != NULL);
  return mw_err_set(r->err, -EBADMSG, "ipc: byte %zu: %s: %s", r->base + pos, what, why);
}

static int table_at(const mw_fbr_t *r, size_t pos, mw_fbt_t *t, const char *what) {
  assert(t != NULL);
  if (pos > r->n || r->n - pos < 4) return bad(r, pos, what, "table out of bounds");
  int64_t vt = (int64_t)pos - (int32_t)mw_load_u32le(r->p + pos);
  if (vt < 0 || (uint64_t)vt + 4 > r->n) return bad(r, pos, what, "vtable offset out of bounds");
  uint16_t vt_len = mw_load_u16le(r->p + vt), obj_len = mw_load_u16le(r->p + vt + 2);
  if (vt_len < 4 || vt_len % 2 || (uint64_t)vt + vt_len > r->n)
    return bad(r, (size_t)vt, what, "bad vtable length");
  if (obj_len < 4 || r->n - pos < obj_len) return bad(r, pos, what, "bad table size");
  t->pos = pos;
  t->vt = (size_t)vt;
  t->vt_len = vt_len;
  t->obj_len = obj_len;
  return 0;
}

int mw_fbr_root(const mw_fbr_t *r, mw_fbt_t *t, const char *what) {
  assert(r != NULL);
  assert(t != NULL);
  return mw_fbr_table_at(r, 0, t, what);
}

int mw_fbr_field(const mw_fbr_t *r, const mw_fbt_t *t, int slot, size_t size, size_t *pos,
                 const char *what) {
  assert(r != NULL);
  assert(t != NULL);
  assert(pos != NULL);
  size_t vo = 4 + 2 * (size_t)slot;
  *pos = 0;
  if (vo + 2 > t->vt_len) return 0;
  uint16_t fo = mw_load_u16le(r->p + t->vt + vo);
  if (fo == 0) return 0;
  if (fo < 4 || (size_t)fo + size > t->obj_len) return bad(r, t->vt + vo, what, "field offset out of table");
  *pos = t->pos + fo;
  return 0;
}

#define SCALAR_GETTER(name, type, sz, load)                                                 \
  int name(const mw_fbr_t *r, const mw_fbt_t *t, int slot, type def, type *v,               \
           const char *what) {                                                              \
    size_t pos;                                                                             \
    int rc = mw_fbr_field(r, t, slot, sz, &pos, what);                                     \
    if (rc < 0) return rc;                                                                  \
    *v = pos ? (type)(load) : def;                                                          \
    return 0;                                                                               \
  }
SCALAR_GETTER(mw_fbr_u8, uint8_t, 1, r->p[pos])
SCALAR_GETTER(mw_fbr_i16, int16_t, 2, mw_load_u16le(r->p + pos))
SCALAR_GETTER(mw_fbr_i32, int32_t, 4, mw_load_u32le(r->p + pos))
SCALAR_GETTER(mw_fbr_i64, int64_t, 8, mw_load_u64le(r->p + pos))

/* Follow the uoffset at `at`; returns the target position or -EBADMSG. */
static int64_t deref(const mw_fbr_t *r, size_t at, const char *what) {
  assert(r != NULL);
  if (at > r->n || r->n - at < 4) return bad(r, at, what, "offset out of bounds");
  uint64_t target = (uint64_t)at + mw_load_u32le(r->p + at);
  if (target > r->n || r->n - target < 4) return bad(r, at, what, "offset points past the end");
  return (int64_t)target;
}

int mw_fbr_table_at(const mw_fbr_t *r, size_t at, mw_fbt_t *sub, const char *what) {
  assert(sub != NULL);
  int64_t tg = deref(r, at, what);
  if (tg < 0) return (int)tg;
  return table_at(r, (size_t)tg, sub, what);
}

int mw_fbr_table(const mw_fbr_t *r, const mw_fbt_t *t, int slot, mw_fbt_t *sub,
                 const char *what) {
  assert(sub != NULL);
  size_t pos;
  int rc = mw_fbr_field(r, t, slot, 4, &pos, what);
  if (rc < 0) return rc;
  if (pos == 0) return 0;
  rc = mw_fbr_table_at(r, pos, sub, what);
  return rc < 0 ? rc : 1;
}

/* The length-prefixed object (string, vector) an offset field of t points
 * at: 1 with *tg its position and *n its u32 length prefix, 0 when the
 * field is absent, or -EBADMSG. */
static int prefixed_at(const mw_fbr_t *r, const mw_fbt_t *t, int slot, const char *what,
                       int64_t *tg, uint32_t *n) {
  assert(r != NULL);
  assert(t != NULL);
  size_t pos;
  int rc = mw_fbr_field(r, t, slot, 4, &pos, what);
  if (rc < 0) return rc;
  if (pos == 0) return 0;
  *tg = deref(r, pos, what);
  if (*tg < 0) return (int)*tg;
  assert((uint64_t)*tg + 4 <= r->n); /* deref checked the prefix is inside */
  *n = mw_load_u32le(r->p + *tg);
  return 1;
}

int mw_fbr_string(const mw_fbr_t *r, const mw_fbt_t *t, int slot, const char **s,
                  size_t *len, const char *what) {
  assert(s != NULL);
  assert(len != NULL);
  int64_t tg;
  uint32_t n;
  int rc = prefixed_at(r, t, slot, what, &tg, &n);
  if (rc <= 0) return rc;
  if ((uint64_t)n + 5 > r->n - (uint64_t)tg) return bad(r, (size_t)tg, what, "string length past the end");
  if (r->p[tg + 4 + n] != 0) return bad(r, (size_t)tg, what, "string not NUL-terminated");
  *s = (const char *)r->p + tg + 4;
  *len = n;
  return 1;
}

int mw_fbr_vector(const mw_fbr_t *r, const mw_fbt_t *t, int slot, size_t elem_size,
                  size_t max_count, size_t *start, size_t *count, const char *what) {
  assert(elem_size > 0);
  assert(start != NULL);
  assert(count != NULL);
  int64_t tg;
  uint32_t n;
  int rc = prefixed_at(r, t, slot, what, &tg, &n);
  if (rc <= 0) return rc;
  if (n > max_count) return bad(r, (size_t)tg, what, "too many vector elements");
  if ((uint64_t)n * elem_size > r->n - (uint64_t)tg - 4)
    return bad(r, (size_t)tg, what, "vector past the end");
  *start = (size_t)tg + 4;
  *count = n;
  return 1;
}
