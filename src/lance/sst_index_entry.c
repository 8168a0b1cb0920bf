/*
 * sst_index_entry.c — see sst_index_entry.h. Field by field (tag: wire type):
 *   1 uuid: len {1: 16 bytes}     2 fields: len {packed field ids}
 *   3 name: len                   4 dataset_version: varint
 *   5 fragment_bitmap: len (roaring {0})   6 index_details: len (Any {1: url})
 *   7 index_version: varint       8 created_at: varint (when set)
 *  10 files: len {1: path, 2: size_bytes}, one per file
 */
#include "lance/sst_index_entry.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

#include "lance/pbwire.h"

/* roaring portable serialization of {0} (the SSTable's one fragment):
 * cookie 12346, one container (key 0, cardinality 1), offset 16, value 0 */
static const uint8_t frag0[] = {0x3a, 0x30, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0};

static int put_varint_field(mw_buf_t *out, uint32_t field, uint64_t v) {
  int rc = mw_pb_put_varint(out, (uint64_t)field << 3);
  return rc == 0 ? mw_pb_put_varint(out, v) : rc;
}

/* IndexFile {path = 1, size_bytes = 2} as field 10. */
static int put_file(mw_buf_t *out, const char *path, uint64_t bytes) {
  assert(path != NULL);
  mw_buf_t f = MW_BUF_INIT;
  int rc = mw_pb_put_len(&f, 1, path, strlen(path));
  if (rc == 0) rc = put_varint_field(&f, 2, bytes);
  if (rc == 0) rc = mw_pb_put_len(out, 10, f.data, f.len);
  mw_buf_free(&f);
  return rc;
}

int mw_sst_index_entry_encode(const mw_sst_index_entry_t *e, mw_buf_t *out) {
  assert(e != NULL);
  assert(out != NULL);
  assert(e->uuid != NULL);
  assert(e->name != NULL);
  assert(e->details_url != NULL);
  assert(e->field_id >= 0);
  assert(e->n_files <= MW_SST_INDEX_ENTRY_MAX_FILES);
  mw_buf_t u = MW_BUF_INIT, f = MW_BUF_INIT, any = MW_BUF_INIT;
  size_t base = out->len;
  int rc = mw_pb_put_len(&u, 1, e->uuid, 16);
  if (rc == 0) rc = mw_pb_put_varint(&f, (uint64_t)e->field_id);
  if (rc == 0) rc = mw_pb_put_len(&any, 1, e->details_url, strlen(e->details_url));
  if (rc == 0) rc = mw_pb_put_len(out, 1, u.data, u.len);
  if (rc == 0) rc = mw_pb_put_len(out, 2, f.data, f.len);
  if (rc == 0) rc = mw_pb_put_len(out, 3, e->name, strlen(e->name));
  if (rc == 0) rc = put_varint_field(out, 4, e->dataset_version);
  if (rc == 0) rc = mw_pb_put_len(out, 5, frag0, sizeof frag0);
  if (rc == 0) rc = mw_pb_put_len(out, 6, any.data, any.len);
  if (rc == 0) rc = put_varint_field(out, 7, e->index_version);
  if (rc == 0 && e->created_at_ms) rc = put_varint_field(out, 8, e->created_at_ms);
  for (size_t i = 0; rc == 0 && i < e->n_files; i++) rc = put_file(out, e->file_paths[i], e->file_bytes[i]);
  mw_buf_free(&u);
  mw_buf_free(&f);
  mw_buf_free(&any);
  if (rc < 0) out->len = base;
  assert(rc < 0 || out->len > base);
  return rc;
}
