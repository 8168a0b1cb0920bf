/*
 * ipc_wal.c — what a MemWAL WAL entry carries in its stream's schema
 * metadata (see ipc.h "WAL helpers"): the writer epoch, and the fence
 * sentinel, a stream with no fields and no batches whose metadata says a
 * new writer took the shard over. The sentinel's schema metadata, as its
 * Schema message holds it (two KeyValue tables):
 *
 *   "fence_sentinel" = "true"
 *   "writer_epoch"   = "7"        (decimal u64, 1..20 digits)
 *
 * The epoch is parsed strictly (digits only, no sign, no overflow): a
 * stream's metadata is untrusted input, so a bad value is an error naming
 * it, never an assert.
 */
#include "lance/ipc.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lance/ipc_int.h"

int mw_ipc_parse_u64(const uint8_t *p, size_t n, uint64_t *v) {
  assert(p != NULL || n == 0);
  assert(v != NULL);
  if (n == 0 || n > 20) return -EBADMSG;
  uint64_t x = 0;
  for (size_t i = 0; i < n; i++) {
    if (p[i] < '0' || p[i] > '9') return -EBADMSG;
    uint64_t d = (uint64_t)(p[i] - '0');
    if (x > (UINT64_MAX - d) / 10) return -EBADMSG;
    x = x * 10 + d;
  }
  *v = x;
  return 0;
}

int mw_ipc_writer_epoch(const mw_schema_t *schema, uint64_t *epoch, mw_err_t *err) {
  assert(schema != NULL);
  assert(epoch != NULL);
  const mw_kv_t *kv = mw_kvs_get(&schema->meta, MW_IPC_WRITER_EPOCH_KEY);
  if (kv == NULL) return mw_err_set(err, -EBADMSG, "WAL entry missing writer_epoch metadata");
  if (mw_ipc_parse_u64(kv->value, kv->value_len, epoch) < 0)
    return mw_err_set(err, -EBADMSG, "WAL entry writer_epoch is not a decimal u64: \"%.40s\"",
                      (const char *)kv->value);
  return 0;
}

bool mw_ipc_is_fence_sentinel(const mw_schema_t *schema) {
  assert(schema != NULL);
  const mw_kv_t *kv = mw_kvs_get(&schema->meta, MW_IPC_FENCE_SENTINEL_KEY);
  return kv != NULL && kv->value_len == 4 && memcmp(kv->value, "true", 4) == 0;
}

int mw_ipc_fence_sentinel(uint64_t epoch, mw_buf_t *out, mw_err_t *err) {
  mw_schema_t s;
  char num[24];
  assert(out != NULL);
  int n = snprintf(num, sizeof num, "%" PRIu64, epoch);
  assert(n >= 1);
  assert(n <= 20); /* what mw_ipc_parse_u64 accepts back */
  mw_schema_init(&s);
  int rc = mw_kvs_set(&s.meta, MW_IPC_FENCE_SENTINEL_KEY, "true", 4);
  if (rc == 0) rc = mw_kvs_set(&s.meta, MW_IPC_WRITER_EPOCH_KEY, num, (size_t)n);
  if (rc == 0) rc = mw_ipc_encode(&s, NULL, 0, NULL, out, err);
  mw_schema_free(&s);
  return rc < 0 ? mw_err_set(err, rc, "ipc: fence sentinel") : 0;
}
