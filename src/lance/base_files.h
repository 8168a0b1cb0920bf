/*
 * base_files.h — which files one base-table manifest references, as keys
 * relative to the table directory (what history GC keeps or deletes; see
 * shard/gc_base.h).
 *
 * For every fragment: `data/<path>` of each data file, with memwald's key
 * index `_memwald/keys/<stem>.keys` beside it (keyindex.h; absent for a
 * file compaction never indexed — a delete of an absent key is harmless),
 * and `_deletions/<fragment>-<read_version>-<id>.<bin|arrow>` (BITMAP or
 * ARROW_ARRAY) when it has a deletion file; then `_transactions/<name>`
 * when the manifest names a transaction file. A key may repeat.
 *
 * Refused with -ENOTSUP (the caller deletes nothing): base paths (shallow
 * clones, multi-base tables), overlays, files with a base_id, paths that
 * climb out of their folder. -EBADMSG for a malformed file.
 */
#ifndef MW_LANCE_BASE_FILES_H
#define MW_LANCE_BASE_FILES_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define MW_BASE_FILE_KEY_BYTES 512

/* cb returns 0 to go on, or a negative errno that stops the walk (and is
 * returned). *ts_ms: the manifest's timestamp in ms since the epoch, or -1
 * when it has none. `file` is the whole framed manifest file. */
typedef int (*mw_base_file_cb)(void *arg, const char *key);
int mw_base_manifest_files(const uint8_t *file, size_t n, uint64_t version, int64_t *ts_ms,
                           mw_base_file_cb cb, void *arg, mw_err_t *err);

#endif
