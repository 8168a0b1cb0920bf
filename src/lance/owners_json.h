/*
 * owners_json.h — the owner record's bytes: one small JSON object naming the
 * daemon that last claimed a shard, stored at `_memwald/owners/<uuid>.json`
 * in the table's storage (who writes, reads and caches them: shard/owners.h;
 * memwal-inspect shows them: inspect/show.c).
 *
 * Owns the record's limits, its key prefix and its parse. The parse is pure
 * (no I/O, no clock), so the daemon and the inspector read a record alike.
 *
 * Format (at most MW_OWNER_RECORD_BYTES):
 *   {"node":"9f1c…32 hex","address":"127.0.0.1:7070","epoch":5,"pid":4242,
 *    "host":"db-3","at_ms":1764633600000}
 * The parse needs "node" and "address" (strings without escapes, which the
 * writer never produces) and "epoch" (decimal digits); other members are
 * ignored.
 *
 * Errors: -EBADMSG for a record that is empty, too long, or lacks one of the
 * three members (the optional mw_err_t names which and why).
 */
#ifndef MW_LANCE_OWNERS_JSON_H
#define MW_LANCE_OWNERS_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define MW_OWNERS_PREFIX "_memwald/owners/"
#define MW_OWNER_NODE_BYTES 40
#define MW_OWNER_ADDRESS_BYTES 128
#define MW_OWNER_RECORD_BYTES 1024

typedef struct mw_owner_json {
  char node[MW_OWNER_NODE_BYTES];       /* NUL-terminated */
  char address[MW_OWNER_ADDRESS_BYTES]; /* NUL-terminated */
  uint64_t epoch;
} mw_owner_json_t;

/* Parse the record's n bytes (no NUL needed) into out. 0 or -EBADMSG. */
int mw_owner_json_parse(const char *json, size_t n, mw_owner_json_t *out, mw_err_t *err);

#endif
