/*
 * owners.h — who holds which shard of a table, as far as memwald daemons
 * know: one owner record per shard under `_memwald/owners/<shard-uuid>.json`
 * in the table's storage (a local folder or an S3 prefix shared by several
 * daemons), written by the daemon that claimed the shard.
 *
 * Owns: the records this table's daemon writes, and a bounded cache of the
 * records of shards it does not own, for `not_owner` replies that name the
 * owner ("held by memwald at 10.0.0.2:7070, node 7f3a…, epoch 5").
 *
 * A record is a hint, never a lock: fencing is the shard manifest's epoch
 * (memwal.md §3). It is written (a plain put, replacing the previous one)
 * each time a shard becomes ACTIVE here, and read (a) to name the owner in a
 * `not_owner` reply, and (b) at start-up, to notice that a shard this daemon
 * held was taken over while it was down (daemon/tables.c). A record can be
 * stale (its daemon died); a LanceDB writer writes none. Lance ignores the
 * `_memwald/` folder; drop_table deletes it with the rest.
 *
 * Format: lance/owners_json.h (its limits, key prefix and parse).
 *
 * Errors: negative errno; parse errors -EBADMSG.
 */
#ifndef MW_SHARD_OWNERS_H
#define MW_SHARD_OWNERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/err.h"
#include "lance/owners_json.h"
#include "storage/storage.h"

#define MW_OWNERS_MAX_CACHED 1024 /* peers' records kept per table */
#define MW_OWNERS_MAX_FETCHES 16  /* lookups in flight per table */
#define MW_OWNERS_REFRESH_MS 2000 /* a cached record older than this is looked up again */

/* The daemon's identity, filled by the daemon (its address once it
 * listens); records are written only while node[0] != '\0'. */
typedef struct mw_owner_self {
  char node[MW_OWNER_NODE_BYTES];        /* stable across restarts (data_dir) */
  char address[MW_OWNER_ADDRESS_BYTES];  /* host:port producers should use */
} mw_owner_self_t;

typedef struct mw_owner_rec {
  uint8_t id[16];
  char node[MW_OWNER_NODE_BYTES];
  char address[MW_OWNER_ADDRESS_BYTES];
  uint64_t epoch;
  bool known;            /* a record was read */
  bool fetching;
  uint64_t fetched_ms;   /* loop time of the last lookup's answer */
} mw_owner_rec_t;

typedef struct mw_owners {
  uv_loop_t *loop;
  mw_storage_t *st;
  const mw_owner_self_t *self;           /* NULL: no records written */
  mw_owner_rec_t *recs;
  size_t n, cap;
  uint32_t fetches;                      /* lookups in flight */
  uint32_t writes;                       /* record puts in flight */
  /* After a record of ours was written: the daemon remembers the epoch
   * (to detect a takeover after a restart). */
  void (*on_held)(void *arg, const uint8_t id[16], uint64_t epoch);
  void *on_held_arg;
} mw_owners_t;

void mw_owners_init(mw_owners_t *o, uv_loop_t *loop, mw_storage_t *st, const mw_owner_self_t *self);
void mw_owners_free(mw_owners_t *o);
/* Shard id became ACTIVE here at epoch: write our record (in the
 * background; a failure is logged, not fatal: the record is a hint). */
void mw_owners_record(mw_owners_t *o, const uint8_t id[16], uint64_t epoch);
/* For a not_owner reply: "held by memwald at ADDR (node N, epoch E)" into
 * out when a record is known, else "" (returns the length). Starts a
 * lookup in the background when none is cached or it is older than
 * MW_OWNERS_REFRESH_MS, so the next reply can name the owner. */
size_t mw_owners_describe(mw_owners_t *o, const uint8_t id[16], char *out, size_t cap);
/* Look the records of ids up now, in the background (at open: the shards a
 * daemon does not own); at most MW_OWNERS_MAX_FETCHES at once. */
void mw_owners_prefetch(mw_owners_t *o, const uint8_t (*ids)[16], size_t n);

/* The record's key: "_memwald/owners/<uuid>.json". */
void mw_owner_key(const uint8_t id[16], char *out, size_t cap);
int mw_owner_encode(const mw_owner_self_t *self, uint64_t epoch, char *out, size_t cap);
int mw_owner_parse(const char *json, size_t n, mw_owner_rec_t *out);
/* Start-up (blocking): the record of shard id. 0, -ENOENT, -EBADMSG, -errno. */
int mw_owner_read_sync(mw_storage_sync_t *ss, const uint8_t id[16], mw_owner_rec_t *out,
                       mw_err_t *err);

#endif
