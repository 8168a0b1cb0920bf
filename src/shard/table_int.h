/*
 * table_int.h — the fields of mw_table_t and of its shard records, private
 * to shard/ (table.c, table_write.c, compaction, GC, recovery) and to
 * white-box tests. The rest of the daemon sees mw_table_t as opaque and
 * reads what it needs through table.h (mw_table_shard_at for status,
 * mw_table_shard_name/mw_table_shard_parse for names), as libuv keeps its
 * handles' private fields to itself.
 */
#ifndef MW_SHARD_TABLE_INT_H
#define MW_SHARD_TABLE_INT_H

#include "shard/table.h"

typedef struct mw_table_shard {
  uint8_t id[16];
  /* "unsharded", "bucket-N" (set when the shard is made), or for identity
   * tables "identity-<value>" once the daemon knows the value (the router
   * sent rows of it here, or an admin command named the shard so); "" until
   * then. A longer value is cut (at a UTF-8 boundary) and key_truncated is
   * set. */
  char key[MW_TABLE_SHARD_KEY_BYTES];
  bool key_truncated;
  mw_shard_t shard;
} mw_table_shard_t;

/* drop_table's two-phase commit (mw_table_drop); private. */
typedef struct mw_table_drop {
  int phase, sub;
  size_t i, n;
  uint8_t (*ids)[16];
  bool *was_active;     /* ACTIVE in this table before the drop */
  int status;
  char reason[MW_TABLE_REASON_BYTES];
  mw_table_drop_cb cb;
  void *arg;
  mw_storage_req_t req;
  char **tops;          /* commit: top-level folders to delete */
  size_t n_tops;
} mw_table_drop_t;

struct mw_table {
  uv_loop_t *loop;
  mw_storage_t *st;
  char *path;
  mw_table_meta_t meta;
  mw_schema_t schema;
  mw_shard_config_t cfg;
  mw_sharding_kind_t kind;
  int route_field;                  /* schema index of the sharding column, -1 */
  uint32_t num_buckets;
  /* shard ids by bucket (unsharded: [0]), made once at open: a UUID v5 is a
   * SHA-1, a quarter of the ingest CPU when it was made per row */
  uint8_t (*route_ids)[16];
  bool own_all;
  uint8_t (*owned)[16];
  size_t n_owned;
  mw_table_shard_t **shards;
  size_t n_shards, cap_shards;
  void *data;
  void (*on_backpressure)(mw_shard_t *s, bool on);
  size_t closing_left;
  void (*close_cb)(struct mw_table *t);
  mw_table_drop_t *drop;
  mw_storage_req_t sweep_req;       /* the sweep at open */
  bool sweep_done;
  mw_owners_t owners;               /* owner records (shard/owners.h) */
  size_t swept;                     /* leftovers it removed */
  /* compaction into the base table (compact.h); stopped before a drop or
   * a close */
  mw_compact_config_t compact_cfg;
  mw_compact_t *compact;
  /* garbage collection of WAL entries and compacted SSTables (gc.h) */
  mw_gc_config_t gc_cfg;
  mw_gc_t *gc;
  mw_recover_t *recover;            /* NULL until mw_table_recover_owned */
  bool compact_stopped;             /* compaction and GC stopped (or stopping) */
  void (*housekeeping_cb)(void *arg);
  size_t housekeeping_left;
};

#endif
