/*
 * admin_engine.h — the admin socket's commands (admin.h) carried out on the
 * shard engine's tables (engine_table.h, shard/table.h, shard/shard.h).
 *
 * Owns: the mapping of each admin command onto engine calls, the `status`
 * JSON (docs/protocol.md §2) and the SHARD argument syntax:
 *   a shard UUID | unsharded | bucket-<b> | <b> (bucket specs) |
 *   identity-<value> (value as the config's `shards` text: ints in decimal,
 *   true/false, strings raw)
 * Commands reply when the engine's callback says the operation committed:
 *   flush [T [S]]  every ACTIVE shard (of T / just S); {"flushed":n}
 *   seal/unseal/claim/release/drop T S  {"table","shard","key","state","epoch"}
 *                  (claim opens the shard if this daemon owns it)
 *   drop-table T   mw_table_drop; {"table","dropped":true}; the table may
 *                  then only be closed (the daemon must stop serving it)
 *   fault T set K=V,... | fault T clear   tests only: refused unless the
 *                  daemon runs with MEMWALD_TEST_FAULTS=1; changes the table
 *                  storage's fault injection (docs/protocol.md §2.1)
 * `status` also carries each shard's fault episode and recoveries, and each
 * table storage's health (mw_storage_health) at the top level.
 * Errors come back as the engine's reason, prefixed with the table name.
 */
#ifndef MW_NET_ADMIN_ENGINE_H
#define MW_NET_ADMIN_ENGINE_H

#include <stdint.h>
#include <uv.h>

#include "common/buf.h"
#include "common/err.h"
#include "net/admin.h"
#include "net/engine_table.h"

typedef struct mw_fe_admin {
  mw_fe_tables_t *tables;   /* borrowed */
  uv_loop_t *loop;
  const char *version;      /* e.g. MW_VERSION */
  uint64_t start_ms;        /* uv_now() at start-up */
  mw_server_t *server;      /* for the connection count; may be NULL */
} mw_fe_admin_t;

/* Fill *out with a command callback over *a (which must outlive the admin
 * socket). */
void mw_fe_admin_engine(mw_fe_admin_t *a, mw_admin_engine_t *out);
/* The `status` result object. */
int mw_fe_status_json(const mw_fe_admin_t *a, mw_buf_t *out);

#endif
