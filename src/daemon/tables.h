/*
 * tables.h — the daemon's tables: create (if configured), open, own, close.
 *
 * Owns: one mw_table_t per `[table NAME]` section and the front end's name
 * registry over them. mw_daemon_tables_open returns once every table is
 * open (nothing is served before): a drop_table interrupted by a crash is
 * finished, a table that does not exist is bootstrapped when `create = true`
 * (lance/table_create.h: the two versions LanceDB writes, each file a
 * put-if-absent through the table's storage so a racing creator cannot be
 * overwritten), then loaded; `shards` narrows the shards this daemon owns.
 * Those blocking steps run on a thread per table, up to 8 tables side by
 * side, so a table on a slow S3 delays only itself (tables.c "opening");
 * then, on the loop, each table is started through the shard engine and
 * registered, and `claim = eager` claims its shards.
 *
 * Shutdown is asynchronous: every shard is released (its MemTable flushed
 * to an SSTable and the manifest committed; up to a deadline, past which
 * the rest are aborted with their rows in the WAL), then each table is
 * closed. A
 * reload adds tables the same way start-up opens them and removes tables
 * the way the stop closes them, one table set at a time.
 *
 * Errors: negative errno with the table's name and the reason in *err.
 */
#ifndef MW_DAEMON_TABLES_H
#define MW_DAEMON_TABLES_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "common/err.h"
#include "daemon/config.h"
#include "daemon/ownership.h"
#include "net/engine_table.h"
#include "shard/table.h"

typedef struct mw_daemon_tables {
  mw_fe_tables_t fe; /* the one registry of tables (net/engine_table.h): the index of a
                     * table there is its index in which[] and asked[] below */
  mw_daemon_owner_t owner; /* node identity, owner records (daemon/ownership.h) */
  uv_loop_t *loop;
  /* the release running (a stop, or a reload's removal; one at a time) */
  bool releasing, stopping, stop_waiting;
  bool which[MW_CONFIG_MAX_TABLES];  /* the tables it releases */
  uv_timer_t retry;           /* shards still claiming: look again */
  bool retry_armed;
  bool *asked[MW_CONFIG_MAX_TABLES]; /* release requested, per shard */
  size_t pending;
  int failures;
  size_t flushing;            /* releases (flushes) in flight: <= MW_DAEMON_RELEASE_PARALLEL */
  uint64_t flush_deadline_ms; /* uv_now past which shards are aborted, not flushed; 0: none */
  size_t unflushed;           /* shards aborted at the deadline with rows in their MemTables
                               * (readable by main.c after the stop's callback) */
  void (*rel_cb)(void *arg, int failures);
  void *rel_arg;
  void (*stop_cb)(void *arg, int failures); /* a stop waiting for a removal */
  void *stop_arg;
  uint64_t stop_deadline_ms;      /* the stop's flush deadline (mw_daemon_tables_close) */
  /* a reload's additions in flight (their blocking halves on threads) */
  size_t adding;
  struct mw_daemon_adding *adds;  /* those additions (tables.c) */
  size_t cancelling;              /* of them, ones a removal cancelled */
  bool rel_parked;                /* a release done but for those */
  void (*add_stop_cb)(void *arg, int failures); /* a stop waiting for them */
  void *add_stop_arg;
} mw_daemon_tables_t;

/* Create (when configured and absent), open and register every table. */
int mw_daemon_tables_open(uv_loop_t *loop, const mw_config_t *cfg, mw_daemon_tables_t *dt,
                          mw_err_t *err);
/* Open one more table (a [table] section a reload added, tc one of cfg's
 * sections), as start-up opens one: created if configured and absent,
 * registered for clients. Asynchronous: the blocking half runs on a thread
 * of its own while the loop serves every other table, then cb(arg, name,
 * status, reason) runs on the loop — status 0 once the table is open and
 * registered, or -errno with the reason (-ESHUTDOWN when a stop came
 * first: a stop waits for the openings in flight). cfg and tc are copied.
 * Returns -ESHUTDOWN once stopping, -ENOSPC past MW_CONFIG_MAX_TABLES. */
typedef void (*mw_daemon_added_cb)(void *arg, const char *name, int status, const char *reason);
int mw_daemon_tables_add(mw_daemon_tables_t *dt, const mw_config_t *cfg, const mw_table_config_t *tc,
                         mw_daemon_added_cb cb, void *arg, mw_err_t *err);
/* Remove tables (sections a reload removed): gone for clients at once
 * (their writes in flight finish), every shard released (flushed), each
 * table closed, then cb(arg, failures). A name still opening (an addition
 * in flight) is cancelled: its opening runs to its end and is then thrown
 * away, never registered or served (its added callback gets -ECANCELED),
 * and cb waits for that end, so the name is free again when cb runs.
 * -EBUSY while an earlier removal runs, -ESHUTDOWN once stopping, -ENOENT
 * for a name neither open nor opening. */
int mw_daemon_tables_remove(mw_daemon_tables_t *dt, const char *const *names, size_t n,
                            void (*cb)(void *arg, int failures), void *arg, mw_err_t *err);
/* Release (flush) every shard, close every table, then cb(arg, failures);
 * after a removal still running, if one is. At most
 * MW_DAEMON_RELEASE_PARALLEL shards flush at once, so flushes finish one
 * after another rather than all together at the end. Past
 * flush_deadline_ms (uv_now; 0 = none) the shards not yet asked are
 * aborted instead (mw_shard_abort: their WAL is made durable, their rows
 * stay there and the next claim replays them) and counted in
 * dt->unflushed; the flushes in flight finish. So a stop with thousands
 * of shards ends inside shutdown_timeout_ms without losing a row. */
#define MW_DAEMON_RELEASE_PARALLEL 32
void mw_daemon_tables_close(mw_daemon_tables_t *dt, uint64_t flush_deadline_ms,
                            void (*cb)(void *arg, int failures), void *arg);
/* mkdir -p of the directory that holds `file` (the admin socket's). */
int mw_daemon_mkdir_parent(const char *file);
/* Create the table at tc->uri from the section's schema/primary_key/spec,
 * through storage configured by o->storage. -EEXIST when a table is already
 * there (or another creator won). */
int mw_daemon_table_create(const mw_table_config_t *tc, const mw_table_opts_t *o, mw_err_t *err);
/* The storage configuration of table tc at uri (tc NULL: data_dir): the
 * `[storage]` section's backend, limits and S3 timeouts, then the table's S3
 * overrides. The one place that maps the daemon's configuration to
 * storage's; the strings point into cfg / tc. */
void mw_daemon_storage_config(const mw_config_t *cfg, const mw_table_config_t *tc, const char *uri,
                              mw_storage_config_t *out);

#endif
