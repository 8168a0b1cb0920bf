/*
 * flatbuf.h — a tiny hand-written FlatBuffers builder and verifying reader,
 * just enough for Arrow IPC metadata (Message, Schema, RecordBatch).
 *
 * Builder (mw_fbb_*): mirrors the flatbuffers-rs FlatBufferBuilder exactly, so
 * the same sequence of calls gives the same bytes as arrow-rs:
 *   - the buffer grows downward; an object's "offset" is the number of bytes
 *     used when it was finished (distance from the end of the buffer);
 *   - every push first pads with zeros so that (used + size) is a multiple of
 *     the alignment, and remembers the largest alignment (min_align);
 *   - a scalar slot equal to its default is not written;
 *   - a table ends with a 4-byte soffset to its vtable; the vtable is written
 *     right below the table unless an identical vtable already exists in this
 *     buffer (then that one is shared);
 *   - strings: pad so that len+1 is aligned to 4, NUL, bytes, u32 length;
 *   - vectors: pad for the element block, elements, u32 count;
 *   - finish: pad for 4 bytes at min_align, then the root uoffset.
 * Allocation errors are sticky (fbb->err) and checked at mw_fbb_finish, so a
 * build is a straight-line sequence of calls.
 *
 * Reader (mw_fbr_*): every offset, vtable and length is checked against the
 * buffer before use; failures return -EBADMSG and record in `err` the
 * absolute byte offset (base + position) and what was being read.
 */
#ifndef MW_LANCE_FLATBUF_H
#define MW_LANCE_FLATBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define MW_FBB_MAX_SLOTS 16
#define MW_FBB_MAX_BYTES ((size_t)1 << 30)

typedef struct mw_fbb {
  uint8_t *buf;
  size_t cap;
  size_t head;        /* data lives in buf[head, cap) */
  size_t min_align;
  uint32_t table_start;
  struct { uint32_t off; uint16_t voff; } locs[MW_FBB_MAX_SLOTS];
  size_t n_locs;
  uint32_t *vts;      /* used() of every distinct vtable written */
  size_t n_vts, cap_vts;
  int err;            /* sticky negative errno */
} mw_fbb_t;

void mw_fbb_init(mw_fbb_t *b);
void mw_fbb_free(mw_fbb_t *b);
/* Start a new buffer, keeping the memory. */
void mw_fbb_reset(mw_fbb_t *b);
static inline uint32_t mw_fbb_used(const mw_fbb_t *b) { return (uint32_t)(b->cap - b->head); }

void mw_fbb_table_start(mw_fbb_t *b);
uint32_t mw_fbb_table_end(mw_fbb_t *b);
void mw_fbb_slot_u8(mw_fbb_t *b, int slot, uint8_t v, uint8_t def);
void mw_fbb_slot_i16(mw_fbb_t *b, int slot, int16_t v, int16_t def);
void mw_fbb_slot_i32(mw_fbb_t *b, int slot, int32_t v, int32_t def);
void mw_fbb_slot_i64(mw_fbb_t *b, int slot, int64_t v, int64_t def);
void mw_fbb_slot_off(mw_fbb_t *b, int slot, uint32_t off);
uint32_t mw_fbb_string(mw_fbb_t *b, const void *p, size_t n);
/* Vector of inline structs given as raw little-endian bytes. */
uint32_t mw_fbb_vec_structs(mw_fbb_t *b, const void *p, size_t n, size_t elem_size,
                            size_t align);
/* Vector of offsets to previously finished objects. */
uint32_t mw_fbb_vec_offsets(mw_fbb_t *b, const uint32_t *offs, size_t n);
/* Finish with `root`; on success (*p, *n) views the finished bytes. */
int mw_fbb_finish(mw_fbb_t *b, uint32_t root, const uint8_t **p, size_t *n);

/* ------------------------------------------------------------------ reader */

typedef struct mw_fbr {
  const uint8_t *p;
  size_t n;
  size_t base;   /* absolute offset of p[0], for error messages */
  mw_err_t *err;
} mw_fbr_t;

typedef struct mw_fbt {
  size_t pos;      /* table start */
  size_t vt;       /* vtable start */
  uint16_t vt_len;
  uint16_t obj_len;
} mw_fbt_t;

/* Read the root table (uoffset at byte 0). */
int mw_fbr_root(const mw_fbr_t *r, mw_fbt_t *t, const char *what);
/* Position of field `slot` checked to hold `size` bytes, or 0 if absent. */
int mw_fbr_field(const mw_fbr_t *r, const mw_fbt_t *t, int slot, size_t size, size_t *pos,
                 const char *what);
int mw_fbr_u8(const mw_fbr_t *r, const mw_fbt_t *t, int slot, uint8_t def, uint8_t *v,
              const char *what);
int mw_fbr_i16(const mw_fbr_t *r, const mw_fbt_t *t, int slot, int16_t def, int16_t *v,
               const char *what);
int mw_fbr_i32(const mw_fbr_t *r, const mw_fbt_t *t, int slot, int32_t def, int32_t *v,
               const char *what);
int mw_fbr_i64(const mw_fbr_t *r, const mw_fbt_t *t, int slot, int64_t def, int64_t *v,
               const char *what);
/* Sub-table: returns 1 if present (filled), 0 if absent, or -EBADMSG. */
int mw_fbr_table(const mw_fbr_t *r, const mw_fbt_t *t, int slot, mw_fbt_t *sub,
                 const char *what);
/* Table referenced by the uoffset stored at absolute position `at`. */
int mw_fbr_table_at(const mw_fbr_t *r, size_t at, mw_fbt_t *sub, const char *what);
/* String: 1 present, 0 absent, or -EBADMSG. */
int mw_fbr_string(const mw_fbr_t *r, const mw_fbt_t *t, int slot, const char **s,
                  size_t *len, const char *what);
/* Vector: 1 present (*start = first element, *count), 0 absent, -EBADMSG. */
int mw_fbr_vector(const mw_fbr_t *r, const mw_fbt_t *t, int slot, size_t elem_size,
                  size_t max_count, size_t *start, size_t *count, const char *what);

#endif
