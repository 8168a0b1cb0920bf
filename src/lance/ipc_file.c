/*
 * ipc_file.c — Arrow IPC file format around the stream codec (see ipc_file.h).
 *
 * A file holding one 2-row batch, as we write it (offsets in decimal):
 *
 *   0     41 52 52 4f 57 31 00 00        "ARROW1", 2 bytes of padding
 *   8     ff ff ff ff  f8 00 00 00 ...   schema message (ipc_encode.c, arrow-rs layout)
 *   264   ff ff ff ff  b8 00 00 00 ...   record batch message + body
 *   ...   ff ff ff ff  00 00 00 00       EOS
 *   F     <Footer flatbuffer>            Footer { version: V5,
 *                                                 schema: Schema (same table as
 *                                                         the schema message),
 *                                                 dictionaries: [],
 *                                                 recordBatches: [Block] }
 *   n-10  <i32 LE footer length = n-10-F>
 *   n-6   41 52 52 4f 57 31              "ARROW1"
 *
 * Block is a 24-byte struct: i64 offset of the message's continuation marker
 * from the start of the file, i32 metaDataLength (8-byte prefix + padded
 * flatbuffer), 4 bytes of padding, i64 bodyLength.
 *
 * Writing: the stream is encoded by ipc_encode.c right after the magic; its frames
 * are then walked to collect the blocks, and the footer is built with the
 * writer's flatbuffer builder (the schema table through
 * mw_ipc_writer_schema_table, so footer and stream can never disagree).
 *
 * Reading: both magics, the footer length, the footer (version, schema,
 * blocks) and the stream (decoded by ipc_decode.c, which checks every buffer) are
 * checked, then the footer is compared with the stream.
 */
#include "lance/ipc_file.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "lance/flatbuf.h"

enum { HDR_SCHEMA = 1, HDR_BATCH = 3 };
enum { META_V4 = 3, META_V5 = 4 };
#define BLOCK_BYTES 24
#define HEAD_BYTES 8
#define TAIL_BYTES (4 + MW_IPC_FILE_MAGIC_BYTES)
#define MAX_BLOCKS ((size_t)1 << 20)

_Static_assert(MW_IPC_FILE_MIN_BYTES == HEAD_BYTES + 8 + TAIL_BYTES, "minimum file layout");

typedef struct block {
  int64_t offset;
  int32_t meta_len;
  int64_t body_len;
} block_t;

typedef struct blocks {
  block_t *v;
  size_t n, cap;
} blocks_t;

static int blocks_push(blocks_t *b, block_t x) {
  if (b->n == b->cap) {
    size_t cap = b->cap ? 2 * b->cap : 8;
    block_t *nv = realloc(b->v, cap * sizeof *nv);
    if (nv == NULL) return -ENOMEM;
    b->v = nv;
    b->cap = cap;
  }
  b->v[b->n++] = x;
  return 0;
}

/* Walk the encapsulated messages of p[start, end) (positions are file
 * offsets) and collect a block for every record batch message. Stops at EOS
 * or at `end`; the first message must be the schema. */
static int walk_frames(const uint8_t *p, size_t start, size_t end, blocks_t *out,
                       mw_err_t *err) {
  size_t pos = start;
  bool first = true;
  while (pos < end) {
    if (end - pos < 8) return mw_err_set(err, -EBADMSG, "ipc file: byte %zu: truncated message prefix", pos);
    if (mw_load_u32le(p + pos) != 0xFFFFFFFFu)
      return mw_err_set(err, -EBADMSG, "ipc file: byte %zu: expected continuation marker ffffffff", pos);
    int32_t mlen = (int32_t)mw_load_u32le(p + pos + 4);
    if (mlen == 0) return 0; /* EOS */
    if (mlen < 0 || (size_t)mlen > end - pos - 8)
      return mw_err_set(err, -EBADMSG, "ipc file: byte %zu: metadata length %d past the stream", pos + 4, mlen);
    mw_fbr_t r = {p + pos + 8, (size_t)mlen, pos + 8, err};
    mw_fbt_t msg;
    uint8_t ht;
    int64_t body;
    int rc = mw_fbr_root(&r, &msg, "message");
    if (rc < 0 || (rc = mw_fbr_u8(&r, &msg, 1, 0, &ht, "message header type")) < 0 ||
        (rc = mw_fbr_i64(&r, &msg, 3, 0, &body, "message body length")) < 0)
      return rc;
    size_t body_at = pos + 8 + (size_t)mlen;
    if (body < 0 || (uint64_t)body > end - body_at)
      return mw_err_set(err, -EBADMSG, "ipc file: byte %zu: body length %" PRId64 " past the stream", pos + 8, body);
    if (first && ht != HDR_SCHEMA)
      return mw_err_set(err, -EBADMSG, "ipc file: byte %zu: first message is type %u, not a schema", pos, ht);
    if (ht == HDR_BATCH &&
        (rc = blocks_push(out, (block_t){(int64_t)pos, mlen + 8, body})) < 0)
      return rc;
    if (out->n > MAX_BLOCKS) return mw_err_set(err, -EFBIG, "ipc file: more than %zu record batches", MAX_BLOCKS);
    first = false;
    pos = body_at + (size_t)body;
  }
  return 0;
}

int mw_ipc_file_encode(mw_ipc_writer_t *w, const mw_schema_t *schema,
                       const mw_batch_t *const *batches, size_t n_batches, mw_buf_t *out,
                       mw_err_t *err) {
  assert(w != NULL);
  assert(schema != NULL);
  assert(out != NULL);
  size_t base = out->len;
  blocks_t bl = {0};
  uint8_t *raw = NULL;
  int rc = mw_buf_append(out, MW_IPC_FILE_MAGIC "\0\0", HEAD_BYTES);
  if (rc < 0) goto fail;
  if ((rc = mw_ipc_writer_encode(w, schema, batches, n_batches, NULL, out, err)) < 0) goto fail;
  size_t stream_end = out->len;
  if ((rc = walk_frames(out->data + base, HEAD_BYTES, stream_end - base, &bl, err)) < 0) goto fail;
  assert(bl.n == n_batches);
  raw = malloc(BLOCK_BYTES * (bl.n ? bl.n : 1));
  if (raw == NULL) {
    rc = -ENOMEM;
    goto fail;
  }
  for (size_t i = 0; i < bl.n; i++) {
    uint8_t *e = raw + BLOCK_BYTES * i;
    memset(e, 0, BLOCK_BYTES);
    mw_store_u64le(e, (uint64_t)bl.v[i].offset);
    mw_store_u32le(e + 8, (uint32_t)bl.v[i].meta_len);
    mw_store_u64le(e + 16, (uint64_t)bl.v[i].body_len);
  }
  mw_fbb_t *b = &w->fbb;
  mw_fbb_reset(b);
  uint32_t sch;
  if ((rc = mw_ipc_writer_schema_table(w, schema, &sch)) < 0) goto fail;
  uint32_t recs = mw_fbb_vec_structs(b, raw, bl.n, BLOCK_BYTES, 8);
  uint32_t dicts = mw_fbb_vec_structs(b, NULL, 0, BLOCK_BYTES, 8);
  mw_fbb_table_start(b);
  mw_fbb_slot_off(b, 1, sch);
  mw_fbb_slot_off(b, 2, dicts);
  mw_fbb_slot_off(b, 3, recs);
  mw_fbb_slot_i16(b, 0, META_V5, 0);
  uint32_t footer = mw_fbb_table_end(b);
  const uint8_t *fp;
  size_t fn;
  if ((rc = mw_fbb_finish(b, footer, &fp, &fn)) < 0) goto fail;
  if (fn > MW_IPC_FILE_MAX_FOOTER_BYTES) {
    rc = mw_err_set(err, -EFBIG, "ipc file: footer of %zu bytes", fn);
    goto fail;
  }
  if ((rc = mw_buf_append(out, fp, fn)) < 0 || (rc = mw_buf_put_u32le(out, (uint32_t)fn)) < 0 ||
      (rc = mw_buf_append(out, MW_IPC_FILE_MAGIC, MW_IPC_FILE_MAGIC_BYTES)) < 0)
    goto fail;
  free(raw);
  free(bl.v);
  assert(out->len - base >= MW_IPC_FILE_MIN_BYTES);
  return 0;
fail:
  free(raw);
  free(bl.v);
  out->len = base;
  if (rc == -ENOMEM) mw_err_set(err, rc, "ipc file: out of memory");
  return mw_err_set(err, rc, "ipc file encode failed");
}

static bool kvs_equal(const mw_kvs_t *a, const mw_kvs_t *b) {
  if (a->n != b->n) return false;
  for (size_t i = 0; i < a->n; i++) {
    if (strcmp(a->items[i].key, b->items[i].key) != 0) return false;
    if (a->items[i].value_len != b->items[i].value_len) return false;
    if (memcmp(a->items[i].value, b->items[i].value, a->items[i].value_len) != 0) return false;
  }
  return true;
}

static bool schemas_match(const mw_schema_t *a, const mw_schema_t *b) {
  if (!mw_schema_equal(a, b) || !kvs_equal(&a->meta, &b->meta)) return false;
  for (size_t i = 0; i < a->n_fields; i++)
    if (!kvs_equal(&a->fields[i].meta, &b->fields[i].meta)) return false;
  return true;
}

/* Parse the footer at p[f, f+fn): version, schema (into *fs), blocks. */
static int read_footer(const uint8_t *p, size_t f, size_t fn, const mw_ipc_limits_t *lim,
                       mw_schema_t *fs, blocks_t *bl, mw_err_t *err) {
  mw_fbr_t r = {p + f, fn, f, err};
  mw_fbt_t ft, st;
  int16_t ver;
  size_t start, count;
  int rc = mw_fbr_root(&r, &ft, "footer");
  if (rc < 0 || (rc = mw_fbr_i16(&r, &ft, 0, 0, &ver, "footer version")) < 0) return rc;
  if (ver != META_V4 && ver != META_V5)
    return mw_err_set(err, -ENOTSUP, "ipc file: byte %zu: footer metadata version %d", f, ver);
  if ((rc = mw_fbr_table(&r, &ft, 1, &st, "footer schema")) < 0) return rc;
  if (rc == 0) return mw_err_set(err, -EBADMSG, "ipc file: byte %zu: footer without a schema", f);
  if ((rc = mw_fbr_vector(&r, &ft, 2, BLOCK_BYTES, MAX_BLOCKS, &start, &count, "footer dictionaries")) < 0)
    return rc;
  if (rc == 1 && count > 0)
    return mw_err_set(err, -ENOTSUP, "ipc file: byte %zu: %zu dictionary blocks", f, count);
  if ((rc = mw_fbr_vector(&r, &ft, 3, BLOCK_BYTES, MAX_BLOCKS, &start, &count, "footer record batches")) < 0)
    return rc;
  for (size_t i = 0; rc == 1 && i < count; i++) {
    const uint8_t *e = p + f + start + BLOCK_BYTES * i;
    block_t b = {(int64_t)mw_load_u64le(e), (int32_t)mw_load_u32le(e + 8), (int64_t)mw_load_u64le(e + 16)};
    int prc = blocks_push(bl, b);
    if (prc < 0) return prc;
  }
  return mw_ipc_schema_table_decode(&r, &st, lim, fs, err);
}

/* The two magics and the footer length: *f = where the footer starts. */
static int file_frame(const uint8_t *p, size_t n, size_t *f, mw_err_t *err) {
  assert(p != NULL || n == 0);
  assert(f != NULL);
  if (n < MW_IPC_FILE_MIN_BYTES)
    return mw_err_set(err, -EBADMSG, "ipc file: %zu bytes, shorter than the smallest file", n);
  if (memcmp(p, MW_IPC_FILE_MAGIC, MW_IPC_FILE_MAGIC_BYTES) != 0)
    return mw_err_set(err, -EBADMSG, "ipc file: byte 0: no ARROW1 magic");
  if (memcmp(p + n - MW_IPC_FILE_MAGIC_BYTES, MW_IPC_FILE_MAGIC, MW_IPC_FILE_MAGIC_BYTES) != 0)
    return mw_err_set(err, -EBADMSG, "ipc file: byte %zu: no trailing ARROW1 magic", n - MW_IPC_FILE_MAGIC_BYTES);
  int32_t flen = (int32_t)mw_load_u32le(p + n - TAIL_BYTES);
  if (flen <= 0 || (size_t)flen > n - HEAD_BYTES - TAIL_BYTES || (size_t)flen > MW_IPC_FILE_MAX_FOOTER_BYTES)
    return mw_err_set(err, -EBADMSG, "ipc file: byte %zu: footer length %d does not fit the %zu-byte file",
                      n - TAIL_BYTES, flen, n);
  *f = n - TAIL_BYTES - (size_t)flen;
  assert(*f >= HEAD_BYTES);
  return 0;
}

/* Decode the stream section p[HEAD_BYTES, f) into out; writers that stop at
 * the last batch get the EOS marker (which ipc_decode.c requires) appended
 * to a copy. */
static int decode_section(const uint8_t *p, size_t f, const mw_ipc_limits_t *lim,
                          mw_ipc_stream_t *out, mw_err_t *err) {
  assert(p != NULL);
  assert(f >= HEAD_BYTES);
  const uint8_t *s = p + HEAD_BYTES;
  size_t sn = f - HEAD_BYTES;
  uint8_t *copy = NULL;
  bool has_eos = sn >= 8 && mw_load_u64le(s + sn - 8) == 0x00000000FFFFFFFFull;
  if (!has_eos) {
    if ((copy = malloc(sn + 8)) == NULL) return -ENOMEM;
    memcpy(copy, s, sn);
    mw_store_u64le(copy + sn, 0x00000000FFFFFFFFull);
    s = copy;
    sn += 8;
  }
  mw_err_t inner = {0};
  int rc = mw_ipc_decode(s, sn, lim, out, &inner);
  if (rc < 0)
    mw_err_set(err, rc, "ipc file: stream section (byte offsets below count from byte 8): %s", inner.msg);
  free(copy);
  return rc;
}

/* The footer's blocks against the stream's record batch messages. */
static int blocks_match(const blocks_t *fb, const blocks_t *sb, size_t n_batches, size_t f,
                        mw_err_t *err) {
  assert(fb != NULL);
  assert(sb != NULL);
  if (fb->n != sb->n || fb->n != n_batches)
    return mw_err_set(err, -EBADMSG, "ipc file: byte %zu: footer lists %zu record batches, the stream holds %zu",
                      f, fb->n, sb->n);
  for (size_t i = 0; i < fb->n; i++) {
    const block_t *a = &fb->v[i], *b = &sb->v[i];
    if (a->offset != b->offset || a->meta_len != b->meta_len || a->body_len != b->body_len)
      return mw_err_set(err, -EBADMSG,
                        "ipc file: byte %zu: footer block %zu {offset %" PRId64 ", metadata %d, body %" PRId64
                        "} does not match the batch message at byte %" PRId64,
                        f, i, a->offset, a->meta_len, a->body_len, b->offset);
  }
  return 0;
}

int mw_ipc_file_decode(const uint8_t *p, size_t n, const mw_ipc_limits_t *lim,
                       mw_ipc_stream_t *out, mw_err_t *err) {
  assert(out != NULL);
  assert(p != NULL || n == 0);
  memset(out, 0, sizeof *out);
  mw_schema_init(&out->schema);
  size_t f = 0, flen;
  int rc = file_frame(p, n, &f, err);
  if (rc < 0) return rc;
  flen = n - TAIL_BYTES - f;
  mw_schema_t fs;
  mw_schema_init(&fs);
  blocks_t fb = {0}, sb = {0};
  if ((rc = read_footer(p, f, flen, lim, &fs, &fb, err)) < 0) goto done;
  if ((rc = walk_frames(p, HEAD_BYTES, f, &sb, err)) < 0) goto done;
  if ((rc = decode_section(p, f, lim, out, err)) < 0) goto done;
  if (!schemas_match(&fs, &out->schema)) {
    rc = mw_err_set(err, -EBADMSG, "ipc file: byte %zu: the footer's schema differs from the stream's", f);
    goto done;
  }
  rc = blocks_match(&fb, &sb, out->n_batches, f, err);
done:
  if (rc < 0) {
    mw_ipc_stream_free(out);
    mw_schema_init(&out->schema);
  }
  mw_schema_free(&fs);
  free(fb.v);
  free(sb.v);
  return rc;
}
