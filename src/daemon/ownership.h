/*
 * ownership.h — the daemon's part in sharing a table with other daemons:
 * its node identity, what it remembers about the shards it held, and the
 * takeover check at start-up (README "Several daemons on one table").
 *
 * Owns: `data_dir/node_id` (a random 32-hex id made at the first start and
 * kept: the daemon's identity in owner records, shard/owners.h) and
 * `data_dir/held/<table>/<shard-uuid>` (the last epoch this daemon held the
 * shard at, written after each owner record of ours), both through a local
 * storage on data_dir.
 *
 * Takeover check: before the configured shards are claimed, each one this
 * daemon remembers holding (epoch M) whose owner record now names another
 * node at an epoch above M was taken over while this daemon was down (an
 * operator's `memwalctl claim` on a peer: failover). Claiming it back would
 * fence the peer that now serves it, so the shard is given up instead —
 * writes for it get `not_owner` naming the new owner — and the daemon says
 * so in its log. `memwalctl claim` here takes it back deliberately. A shard
 * never held here (no memory), or whose record is this node's, is claimed as
 * configured.
 *
 * Errors: negative errno with the reason in *err (start-up only).
 */
#ifndef MW_DAEMON_OWNERSHIP_H
#define MW_DAEMON_OWNERSHIP_H

#include <stdint.h>

#include "common/err.h"
#include "daemon/config.h"
#include "shard/owners.h"
#include "shard/table.h"
#include "storage/storage.h"

#define MW_DAEMON_HELD_PREFIX "held/"

typedef struct mw_daemon_owner mw_daemon_owner_t;

/* Per table: the hook arg for its owner records. */
typedef struct mw_daemon_owner_table {
  mw_daemon_owner_t *o;
  char name[128];
} mw_daemon_owner_table_t;

struct mw_daemon_owner {
  mw_owner_self_t self;
  mw_storage_config_t local_cfg;   /* data_dir */
  char data_dir[1024];
  mw_storage_t *local;             /* data_dir, on the loop (after serve) */
  mw_daemon_owner_table_t tables[MW_CONFIG_MAX_TABLES];
  uint32_t writes;                 /* memory puts in flight */
};

/* Start-up: read (or make) the node id in data_dir. */
int mw_daemon_owner_open(mw_daemon_owner_t *o, const mw_config_t *cfg, mw_err_t *err);
/* Table i (named name) is open: give up the shards taken over while this
 * daemon was down (see above), and hook its owner records. Before claims. */
int mw_daemon_owner_check(mw_daemon_owner_t *o, size_t i, const char *name, mw_table_t *t,
                          const mw_storage_config_t *sc, mw_err_t *err);
/* The check in two halves: the scan (blocking reads of the memory and of
 * the owner records, the disowns; any thread, on a table loaded and not yet
 * claiming, shard/table.h mw_table_load) and the hook (on the loop, once the
 * table is started). */
int mw_daemon_owner_scan(const mw_daemon_owner_t *o, const char *name, mw_table_t *t,
                         const mw_storage_config_t *sc, mw_err_t *err);
int mw_daemon_owner_hook(mw_daemon_owner_t *o, size_t i, const char *name, mw_table_t *t);
/* The daemon listens: its address for owner records, and the data_dir
 * storage on the loop for the memory writes (must outlive the tables). */
void mw_daemon_owner_serve(mw_daemon_owner_t *o, mw_storage_t *local, const char *address);
/* "host:port" for owner records from a listen address and its real port:
 * a wildcard host (0.0.0.0, ::, empty) becomes the host name. */
void mw_daemon_owner_address(const char *listen, int port, char *out, size_t cap);

#endif
