/*
 * ipc_rebatch.c — pass-through of record batches (see ipc.h,
 * mw_ipc_rebatch): the record batch messages of a stream the decoder
 * accepted, re-framed for a target schema without decoding the columns.
 *
 * Only the metadata is written anew; the body is copied as it is, and a
 * target bool column the stream lacks (`_tombstone`) gets a false bitmap
 * appended to the body. A stream batch of 3 rows {id: int64} (no validity
 * buffer, 8-byte alignment, as pyarrow writes it) re-framed for
 * {id: int64, _tombstone: bool not null}:
 *
 *   ff ff ff ff  <len>         continuation, metadata length (8+len % 64 == 0)
 *   ...                        Message{V5, RecordBatch{length 3,
 *                                nodes [(3,0), (3,0)],
 *                                buffers [(0,0) (0,24) | (24,0) (24,1)]},
 *                                bodyLength 32}
 *   <24 body bytes, as they were>  00 00 00 00 00 00 00 00   false bitmap
 *
 * Anything it cannot pass through as it is (dictionaries, compression,
 * unaligned buffers, short fixed_size_list children) is -ENOTSUP with the
 * output unchanged, and the caller encodes the decoded batch instead.
 */
#include "lance/ipc.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lance/ipc_int.h"

/* Where one top-level field's nodes and buffers sit in a record batch. */
typedef struct rb_span {
  size_t node0, n_nodes, buf0, n_bufs;
} rb_span_t;

/* Every fixed_size_list in f's tree has a child of exactly len * dim
 * items (the decoder pads a short one; passing it through would not). */
static bool spans_full(const mw_fbr_t *r, size_t nodes, const mw_field_t *f, size_t *k) {
  int64_t len = (int64_t)mw_load_u64le(r->p + nodes + 16 * (*k)++);
  switch (mw_field_layout(f)) {
    case MW_LAYOUT_FSL: {
      int64_t clen = (int64_t)mw_load_u64le(r->p + nodes + 16 * (*k)++);
      return clen == len * (int64_t)f->fsl_dim;
    }
    case MW_LAYOUT_LIST:
    case MW_LAYOUT_STRUCT:
      for (uint32_t i = 0; i < f->n_children; i++)
        if (!spans_full(r, nodes, &f->children[i], k)) return false;
      return true;
    default: return true;
  }
}

/* The stream's node and buffer vectors of batch bt (positions in r), checked
 * to be ones rebatch can re-frame: every field's spans full, every buffer
 * 8-aligned inside the body. Fills span[] per stream field. */
static int rb_source(const mw_fbr_t *r, const mw_fbt_t *bt, const body_t *b, const mw_schema_t *fs, rb_span_t *span,
                     size_t *nodes, size_t *bufs, size_t *n_bufs) {
  assert(fs->n_fields <= MW_MAX_FIELDS);
  size_t want_nodes = 0, want_bufs = 0, n_nodes;
  int rc;
  for (size_t j = 0; j < fs->n_fields; j++) {
    span[j].node0 = want_nodes, span[j].buf0 = want_bufs;
    mw_ipc_count_field(&fs->fields[j], &want_nodes, &want_bufs);
    span[j].n_nodes = want_nodes - span[j].node0, span[j].n_bufs = want_bufs - span[j].buf0;
  }
  if ((rc = mw_fbr_vector(r, bt, 1, 16, want_nodes, nodes, &n_nodes, "nodes")) < 0 ||
      (rc = mw_fbr_vector(r, bt, 2, 16, want_bufs, bufs, n_bufs, "buffers")) < 0)
    return rc;
  if (n_nodes != want_nodes || *n_bufs != want_bufs) return -ENOTSUP;
  for (size_t j = 0, k = 0; j < fs->n_fields; j++)
    if (!spans_full(r, *nodes, &fs->fields[j], &k)) return -ENOTSUP;
  for (size_t i = 0; i < *n_bufs; i++) {
    uint64_t off = mw_load_u64le(r->p + *bufs + 16 * i), len = mw_load_u64le(r->p + *bufs + 16 * i + 8);
    if (off % 8 != 0 || off > b->len || len > b->len - off) return -ENOTSUP;
  }
  return 0;
}

/* The target's node and buffer counts (*tn, *tb) and the bytes its absent
 * bools' false bitmaps add to the body (*extra). */
static int rb_target_size(const mw_schema_t *target, const int *map, const rb_span_t *span, int64_t rows, size_t *tn,
                          size_t *tb, size_t *extra) {
  assert(target->n_fields <= MW_MAX_FIELDS);
  assert(rows > 0);
  *tn = *tb = *extra = 0;
  for (size_t i = 0; i < target->n_fields; i++) {
    if (map[i] >= 0) {
      *tn += span[map[i]].n_nodes, *tb += span[map[i]].n_bufs;
      continue;
    }
    if (target->fields[i].type != MW_T_BOOL || target->fields[i].nullable) return -ENOTSUP;
    *tn += 1, *tb += 2;
    *extra += ((size_t)(rows + 7) / 8 + 7) & ~(size_t)7;
  }
  return 0;
}

/* the target's nodes and buffers: the stream's, reordered, plus a
 * false bitmap (no validity buffer) for each absent bool */
static void rb_fill(const mw_fbr_t *r, size_t nodes, size_t bufs, const mw_schema_t *target, const int *map,
                    const rb_span_t *span, int64_t rows, size_t body_len, int64_t *tnode, int64_t *tbuf, size_t tn,
                    size_t tb, size_t extra) {
  size_t an = 0, ab = 0, at = body_len;
  for (size_t i = 0; i < target->n_fields; i++) {
    if (map[i] < 0) {
      size_t bits = ((size_t)(rows + 7) / 8 + 7) & ~(size_t)7;
      tnode[2 * an] = rows, tnode[2 * an + 1] = 0, an++;
      tbuf[2 * ab] = (int64_t)at, tbuf[2 * ab + 1] = 0, ab++;
      tbuf[2 * ab] = (int64_t)at, tbuf[2 * ab + 1] = (rows + 7) / 8, ab++;
      at += bits;
      continue;
    }
    const rb_span_t *sp = &span[map[i]];
    for (size_t k = 0; k < sp->n_nodes; k++, an++) {
      tnode[2 * an] = (int64_t)mw_load_u64le(r->p + nodes + 16 * (sp->node0 + k));
      tnode[2 * an + 1] = (int64_t)mw_load_u64le(r->p + nodes + 16 * (sp->node0 + k) + 8);
    }
    for (size_t k = 0; k < sp->n_bufs; k++, ab++) {
      tbuf[2 * ab] = (int64_t)mw_load_u64le(r->p + bufs + 16 * (sp->buf0 + k));
      tbuf[2 * ab + 1] = (int64_t)mw_load_u64le(r->p + bufs + 16 * (sp->buf0 + k) + 8);
    }
  }
  assert(an == tn);
  assert(ab == tb);
  assert(at == body_len + extra);
}

/* The re-framed message: RecordBatch{rows, tnode, tbuf}, then the stream's
 * body and the false bitmaps (extra zero bytes). */
static int rb_write(mw_fbb_t *fb, int64_t rows, const int64_t *tnode, size_t tn, const int64_t *tbuf, size_t tb,
                    const body_t *b, size_t body_len, size_t extra, mw_buf_t *out) {
  assert(body_len >= b->len);
  mw_fbb_reset(fb);
  uint32_t vb = mw_fbb_vec_structs(fb, tbuf, tb, 16, 8);
  uint32_t vn = mw_fbb_vec_structs(fb, tnode, tn, 16, 8);
  mw_fbb_table_start(fb);
  mw_fbb_slot_i64(fb, 0, rows, 0);
  mw_fbb_slot_off(fb, 1, vn);
  mw_fbb_slot_off(fb, 2, vb);
  uint32_t rbt = mw_fbb_table_end(fb);
  const uint8_t *mp;
  size_t mn;
  int rc = mw_fbb_finish(fb, mw_ipc_fb_message(fb, HDR_BATCH, rbt, (int64_t)(body_len + extra)), &mp, &mn);
  if (rc < 0) return rc;
  size_t meta = pad64(mn + 8);
  if ((rc = mw_buf_reserve(out, meta + body_len + extra)) < 0) return rc;
  mw_buf_put_u32le(out, 0xFFFFFFFFu);
  mw_buf_put_u32le(out, (uint32_t)(meta - 8));
  mw_buf_append(out, mp, mn);
  mw_buf_fill(out, 0, meta - 8 - mn);
  mw_buf_append(out, b->p, b->len);
  mw_buf_fill(out, 0, body_len - b->len + extra); /* padding, then the false bitmaps */
  return 0;
}

/* One record batch message re-framed for target (see ipc.h). */
static int rebatch_one(mw_fbb_t *fb, const mw_fbr_t *r, const mw_fbt_t *bt, const body_t *b,
                       const mw_ipc_stream_t *st, const mw_schema_t *target, const int *map,
                       mw_buf_t *out, mw_err_t *err) {
  int64_t rows;
  mw_fbt_t comp;
  int rc = mw_fbr_i64(r, bt, 0, 0, &rows, "record batch length");
  if (rc < 0) return rc;
  if (rows == 0) return 0;
  if ((rc = mw_fbr_table(r, bt, 3, &comp, "compression")) < 0) return rc;
  if (rc == 1) return -ENOTSUP;
  rb_span_t span[MW_MAX_FIELDS];
  size_t nodes, bufs, n_bufs, tn, tb, extra;
  if ((rc = rb_source(r, bt, b, &st->schema, span, &nodes, &bufs, &n_bufs)) < 0) return rc;
  if ((rc = rb_target_size(target, map, span, rows, &tn, &tb, &extra)) < 0) return rc;
  size_t body_len = (b->len + 7) & ~(size_t)7;
  int64_t *tnode = malloc((tn ? tn : 1) * 16), *tbuf = malloc((tb ? tb : 1) * 16);
  if (tnode == NULL || tbuf == NULL) {
    rc = -ENOMEM;
  } else {
    rb_fill(r, nodes, bufs, target, map, span, rows, body_len, tnode, tbuf, tn, tb, extra);
    rc = rb_write(fb, rows, tnode, tn, tbuf, tb, b, body_len, extra, out);
  }
  free(tnode);
  free(tbuf);
  (void)err;
  return rc;
}

int mw_ipc_rebatch(const uint8_t *p, size_t n, const mw_ipc_stream_t *st,
                   const mw_schema_t *target, const int *map, mw_buf_t *out, mw_err_t *err) {
  assert(p != NULL);
  assert(st != NULL);
  assert(target != NULL);
  assert(map != NULL);
  assert(out != NULL);
  assert(target->n_fields <= MW_MAX_FIELDS);
  assert(st->schema.n_fields <= MW_MAX_FIELDS);
  if (st->n_dict_fields > 0) return -ENOTSUP;
  bool used[MW_MAX_FIELDS] = {false};
  for (size_t i = 0; i < target->n_fields; i++) {
    if (map[i] < 0) continue;
    assert((size_t)map[i] < st->schema.n_fields);
    if (used[map[i]]) return -ENOTSUP;
    used[map[i]] = true;
  }
  for (size_t j = 0; j < st->schema.n_fields; j++)
    if (!used[j]) return -ENOTSUP;
  size_t start = out->len, pos = 0;
  dec_t d = {.p = p, .n = n, .err = err};
  mw_ipc_limits_default(&d.lim);
  mw_fbr_t r;
  mw_fbt_t msg, hdr;
  uint8_t ht;
  body_t b;
  mw_fbb_t fb;
  mw_fbb_init(&fb);
  int rc;
  while ((rc = mw_ipc_frame(&d, &pos, &r, &msg, &ht, &hdr, &b)) == 1) {
    if (ht == HDR_SCHEMA) continue;
    if (ht != HDR_BATCH) {
      rc = -ENOTSUP;
      break;
    }
    if ((rc = rebatch_one(&fb, &r, &hdr, &b, st, target, map, out, err)) < 0) break;
  }
  mw_fbb_free(&fb);
  if (rc < 0) out->len = start;
  assert(rc < 0 || (out->len - start) % 8 == 0);
  return rc < 0 ? rc : 0;
}
