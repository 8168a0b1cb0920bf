/*
 * buf.h — growable byte buffers.
 *
 * Owns: one heap allocation per buffer. Every codec writes into an mw_buf_t
 * and every reader copies out of a borrowed (ptr, len) view, so this is the one
 * place where output memory grows.
 *
 * Views: a buffer with cap == 0 and data != NULL does not own its bytes
 * (mw_buf_view: e.g. a column decoded in place from a WAL entry, whose
 * memory an mw_blob_t keeps alive; lance/batch.h `backing`). Freeing or
 * resetting a view forgets it; anything that writes (append, reserve,
 * extend, fill, put) first copies it into a buffer of its own
 * (copy-on-write), and mw_buf_own does that explicitly before writing into
 * data[] directly. shrink leaves a view alone, steal returns a copy.
 *
 * Limit: a buffer never grows past MW_BUF_MAX_BYTES (4 GiB); appends past it
 * fail with -EFBIG instead of wrapping a size_t.
 *
 * Errors: functions return 0 or a negative errno (-ENOMEM, -EFBIG). A failed
 * append leaves the buffer unchanged.
 */
#ifndef MW_COMMON_BUF_H
#define MW_COMMON_BUF_H

#include <stddef.h>
#include <stdint.h>

/* --- blobs: refcounted bytes that views point into --- */
/* One heap allocation shared by the buffers viewing it (a WAL entry as read,
 * an ARROW frame): freed with the last reference. References may be taken
 * and dropped on any thread (atomic count). */
typedef struct mw_blob mw_blob_t;
/* Take ownership of data[0, len) (from malloc; mw_buf_steal). NULL on ENOMEM
 * (data is then freed). */
mw_blob_t *mw_blob_new(uint8_t *data, size_t len);
const uint8_t *mw_blob_data(const mw_blob_t *b);
size_t mw_blob_len(const mw_blob_t *b);
mw_blob_t *mw_blob_ref(mw_blob_t *b); /* returns b; NULL-safe */
void mw_blob_unref(mw_blob_t *b);     /* NULL-safe */
uint32_t mw_blob_refs(const mw_blob_t *b);

#define MW_BUF_MAX_BYTES ((size_t)4 << 30)

typedef struct mw_buf {
  uint8_t *data;
  size_t len;
  size_t cap;
} mw_buf_t;

#define MW_BUF_INIT {NULL, 0, 0}

void mw_buf_init(mw_buf_t *b);
/* A view of p[0, n) (not owned; n == 0 gives an empty buffer). */
void mw_buf_view(mw_buf_t *b, const uint8_t *p, size_t n);
static inline int mw_buf_is_view(const mw_buf_t *b) { return b->cap == 0 && b->data != NULL; }
/* Make a view a buffer of its own (a copy); no-op for owned buffers. */
int mw_buf_own(mw_buf_t *b);
void mw_buf_free(mw_buf_t *b);
/* Forget the contents but keep the allocation, for reuse without malloc. */
void mw_buf_reset(mw_buf_t *b);
/* Make room for at least `extra` more bytes. */
int mw_buf_reserve(mw_buf_t *b, size_t extra);
/* Make room for exactly `extra` more bytes when there is less (no doubling):
 * for a buffer whose final size is known, so it carries no slack. */
int mw_buf_reserve_exact(mw_buf_t *b, size_t extra);
int mw_buf_append(mw_buf_t *b, const void *p, size_t n);
/* Append n copies of byte `v` (padding). */
int mw_buf_fill(mw_buf_t *b, uint8_t v, size_t n);
/* Pad with byte `v` until len is a multiple of `align` (a power of two). */
int mw_buf_align(mw_buf_t *b, size_t align, uint8_t v);
int mw_buf_put_u8(mw_buf_t *b, uint8_t v);
int mw_buf_put_u16le(mw_buf_t *b, uint16_t v);
int mw_buf_put_u32le(mw_buf_t *b, uint32_t v);
int mw_buf_put_u64le(mw_buf_t *b, uint64_t v);
/* Grow len by n bytes (zeroed) and return a pointer to them, or NULL. */
void *mw_buf_extend(mw_buf_t *b, size_t n);
/* Give back the capacity past len (growth doubles, so up to half of a
 * buffer can be slack) when it is more than an eighth of len: for buffers
 * that stop growing and are kept, like a MemTable's. Never fails (a refused
 * shrink keeps the buffer as it was); an empty buffer is freed. */
void mw_buf_shrink(mw_buf_t *b);
/* Hand the allocation to the caller (a copy for a view, NULL when that
 * copy fails); the buffer becomes empty. */
uint8_t *mw_buf_steal(mw_buf_t *b, size_t *len);

/* Little-endian loads from unaligned memory. */
static inline uint16_t mw_load_u16le(const uint8_t *p) {
  return (uint16_t)(p[0] | (uint16_t)p[1] << 8);
}
static inline uint32_t mw_load_u32le(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t mw_load_u64le(const uint8_t *p) {
  return (uint64_t)mw_load_u32le(p) | (uint64_t)mw_load_u32le(p + 4) << 32;
}
static inline void mw_store_u32le(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}
static inline void mw_store_u64le(uint8_t *p, uint64_t v) {
  mw_store_u32le(p, (uint32_t)v);
  mw_store_u32le(p + 4, (uint32_t)(v >> 32));
}

#endif
