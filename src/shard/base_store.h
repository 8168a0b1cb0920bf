/*
 * base_store.h — the base table's `_versions/` on the storage layer: find
 * and read the newest base manifest, and commit the next one
 * (lance-files.md §4.1; memwal.md §2).
 *
 * Owns two asynchronous operations, each run by a caller-embedded
 * mw_bstore_op_t (one at a time per op):
 *
 *   read_latest  GET _versions/latest_version_hint.json (what LanceDB keeps
 *                beside its manifests); HEAD the hinted version, then the
 *                next two at once until both are missing (versions never
 *                have gaps: every commit is a put-if-absent of latest + 1);
 *                no usable hint, or the hinted version missing: LIST
 *                _versions/ and take the newest name. Then GET it and decode
 *                it (mw_table_meta_read). Only V2 names (20 digits) are
 *                handled: a table with V1 names is -ENOTSUP.
 *   commit       PUT every given file (data, deletion, transaction files:
 *                nobody references them yet, so plain puts), then
 *                put-if-absent `_versions/<version>.manifest`, then
 *                overwrite the hint (best effort, logged). -EEXIST: another
 *                writer committed that version first.
 *
 * Model and status as storage.h: a start function returns a negative errno
 * at once (no callback) or 0 and the callback runs once, later. Status: 0;
 * -EEXIST (commit lost the race); -ENOENT (no base manifest at all);
 * -EBADMSG / -ENOTSUP (the manifest is refused, reason in op->err); other
 * storage errors with the key in op->err.
 */
#ifndef MW_SHARD_BASE_STORE_H
#define MW_SHARD_BASE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"
#include "lance/dataset_manifest.h"
#include "storage/storage.h"

#define MW_BSTORE_VERSIONS_DIR "_versions/"
#define MW_BSTORE_HINT_KEY "_versions/latest_version_hint.json"
#define MW_BSTORE_MAX_FILES 4096      /* per commit */
#define MW_BSTORE_MAX_PROBE_STEPS 4096 /* then LIST */
#define MW_BSTORE_KEY_BYTES 256

typedef struct mw_bstore_file {
  const char *key;            /* relative to the table directory; borrowed */
  const uint8_t *data;        /* borrowed until the callback */
  size_t len;
} mw_bstore_file_t;

typedef struct mw_bstore_op mw_bstore_op_t;
typedef void (*mw_bstore_cb)(mw_bstore_op_t *op, int status);

struct mw_bstore_op {
  void *data;                 /* the caller's */
  /* read_latest's result, valid after a 0 status until the next start */
  uint64_t version;
  mw_table_meta_t meta;
  mw_err_t err;
  /* set by the caller before read_latest: feature flags accepted beyond the
   * supported ones (MW_FLAG_ZONE_WRITE_SEEDS when the table writes seeds) */
  uint64_t accept_flags;
  /* private */
  mw_storage_t *st;
  mw_bstore_cb cb;
  int kind, phase;
  bool busy, has_meta;
  uint64_t probe_base;
  uint32_t steps, outstanding;
  int first_err;
  uint64_t found;
  mw_storage_req_t req;
  mw_storage_req_t probes[2];
  mw_storage_req_t *puts;
  size_t n_puts;
  const mw_bstore_file_t *files;
  size_t n_files;
  char manifest_key[MW_BSTORE_KEY_BYTES];
  const mw_buf_t *manifest;
  uint64_t commit_version;
  char hint[32];
};

void mw_bstore_op_init(mw_bstore_op_t *op);
void mw_bstore_op_free(mw_bstore_op_t *op);

int mw_bstore_read_latest(mw_storage_t *st, mw_bstore_op_t *op, mw_bstore_cb cb);
/* files[0..n) and manifest stay borrowed until the callback. */
int mw_bstore_commit(mw_storage_t *st, mw_bstore_op_t *op, const mw_bstore_file_t *files, size_t n,
                     uint64_t version, const mw_buf_t *manifest, mw_bstore_cb cb);

/* "_versions/<V2 name>" of `version`. */
int mw_bstore_manifest_key(uint64_t version, char *out, size_t n);

#endif
