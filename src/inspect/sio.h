/*
 * sio.h — the inspector's synchronous view of one table's storage.
 *
 * Owns: one blocking storage handle (mw_storage_sync_*, src/storage) for the
 * table's URI, a local path or s3://BUCKET/PREFIX, and the few reads the
 * tool makes. Every byte the inspector and the verifier read goes through
 * here, so they read a table exactly as the daemon's storage layer sees it,
 * on disk or on object storage.
 *
 * Nothing is written: a local table must already exist (the storage layer
 * would create a missing root, and a typo must not make a table).
 *
 * Errors: negative errno with a reason in *err (-ENOENT for a missing
 * object or table, -EFBIG over max_object_bytes).
 */
#ifndef MW_INSPECT_SIO_H
#define MW_INSPECT_SIO_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"
#include "storage/storage.h"

/* Largest object the tool reads (a data file of a big compaction). */
#define MW_SIO_MAX_OBJECT_BYTES ((size_t)4 << 30)

typedef struct mw_sio {
  mw_storage_sync_t *ss;
  char root[4096];
} mw_sio_t;

/* Open the table at `root`: a directory that must exist, file://PATH or
 * s3://BUCKET/PREFIX (credentials and endpoint from the environment). */
int mw_sio_open(mw_sio_t *s, const char *root, mw_err_t *err);
void mw_sio_close(mw_sio_t *s);
/* Whole object into out (reset first). */
int mw_sio_get(mw_sio_t *s, const char *key, mw_buf_t *out, mw_err_t *err);
/* Object size, or -ENOENT. */
int mw_sio_head(mw_sio_t *s, const char *key, uint64_t *size, mw_err_t *err);
/* Sorted keys under prefix; *keys is malloc'd (free with mw_sio_free_keys). */
int mw_sio_list(mw_sio_t *s, const char *prefix, char ***keys, size_t *n, mw_err_t *err);
void mw_sio_free_keys(char **keys, size_t n);

#endif
