/*
 * show.h — turn one stored object of a Lance/MemWAL table into a jtree.
 *
 * Owns: recognising what an object is (by its key, then by its bytes) and
 * rendering what the src/lance codecs decode from it. No decoding of
 * formats happens here: every byte is parsed by a src/lance codec, this
 * module only names and arranges the results.
 *
 * Kinds (and the key that identifies them):
 *   wal_entry          _mem_wal/<shard>/wal/<64 bits>.arrow
 *   shard_manifest     _mem_wal/<shard>/manifest/<64 bits>.binpb
 *   version_hint       .../version_hint.json, .../latest_version_hint.json
 *   dataset_manifest   .../_versions/<n>.manifest
 *   transaction        .../_transactions/<v>-<uuid>.txn
 *   deletion_bitmap    .../_deletions/<f>-<v>-<id>.bin
 *   deletion_arrow     .../_deletions/<f>-<v>-<id>.arrow
 *   pk_index_data      .../_pk_index/page_data.lance
 *   pk_index_lookup    .../_pk_index/page_lookup.lance
 *   bloom_filter       .../bloom_filter.bin
 *   data_file          *.lance (Lance 2.0/2.1/2.2, or legacy v1 by its footer)
 *   zone_seed          a seed buffer on its own (an Arrow IPC file)
 *   owner_record       _memwald/owners/<shard>.json (lance/owners_json.h)
 *   staging            a put that never finished: memwald's .tmp-<hex>, or
 *                      a Lance/object_store temp (<key>.tmp.<id>, <key>#<n>)
 *   (memwald's key indexes, _memwald/keys/<stem>.keys, are data files)
 *
 * Errors: negative errno with the codec's reason in *err.
 */
#ifndef MW_INSPECT_SHOW_H
#define MW_INSPECT_SHOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "inspect/jtree.h"

typedef enum mw_kind {
  MW_KIND_UNKNOWN = 0,
  MW_KIND_WAL,
  MW_KIND_SHARD_MANIFEST,
  MW_KIND_VERSION_HINT,
  MW_KIND_DATASET_MANIFEST,
  MW_KIND_TXN,
  MW_KIND_DELETION_BIN,
  MW_KIND_DELETION_ARROW,
  MW_KIND_PK_DATA,
  MW_KIND_PK_LOOKUP,
  MW_KIND_BLOOM,
  MW_KIND_DATAFILE,
  MW_KIND_ZONE_SEED,
  MW_KIND_OWNER,
  MW_KIND_STAGING,
  MW_KIND_COUNT_
} mw_kind_t;

typedef struct mw_show_opts {
  int64_t max_rows;      /* rows/values/zones printed per list; -1 = all */
} mw_show_opts_t;

const char *mw_kind_name(mw_kind_t k);
/* -EINVAL for an unknown name. */
int mw_kind_parse(const char *name, mw_kind_t *k);
/* The key names the temp of a put that never finished (kind staging). */
bool mw_key_is_staging(const char *key);
/* By key first; by content when the key says nothing. */
mw_kind_t mw_kind_of(const char *key, const uint8_t *p, size_t n);

/* Decode `p` as `kind` into a new tree (*out, free with j_free). */
int mw_show(const char *key, mw_kind_t kind, const uint8_t *p, size_t n, const mw_show_opts_t *o,
            j_t **out, mw_err_t *err);

/* Building blocks the verifier reuses. */
j_t *mw_show_uuid(const uint8_t id[16]);
void mw_uuid_text(const uint8_t id[16], char out[37]);

#endif
