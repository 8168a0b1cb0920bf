/*
 * check.h — what start-up would refuse, found before anything starts.
 *
 * Owns the checks of a loaded configuration that need more than the key
 * table (config.h): every listen and metrics_listen address, resolved as
 * the listeners will resolve it; each table's schema, primary_key, spec and
 * shards text; and, for a table that exists, the configured schema against
 * the table's own. `memwald --check` and start-up run the same functions,
 * so --check passes exactly what start-up accepts.
 *
 * Messages name where the value came from (config.h mw_config_key_where)
 * and, for a schema, the column by name, not by byte offset:
 *   memwald.conf:31: [table events] schema: column "v": expected a type
 *     (int32, int64, ...), got "int65"
 *   memwald.conf:31: [table events] schema: differs from the table at
 *     /var/lib/memwald/events.lance: column "extra" (string) is not in the
 *     table (memwald never changes a table's schema: ...)
 *
 * Errors: negative errno (-EINVAL for a bad configuration, -ENOMEM) with
 * the message in *err.
 */
#ifndef MW_DAEMON_CHECK_H
#define MW_DAEMON_CHECK_H

#include "common/err.h"
#include "daemon/config.h"
#include "lance/batch.h"

/* Addresses and every table's text keys. */
int mw_daemon_check_config(const mw_config_t *cfg, mw_err_t *err);
/* A table that exists: its schema (`_tombstone` last, as shard/table.h
 * builds it) against the section's `schema` and `primary_key`, when set.
 * Any difference is an error naming the first one found. */
int mw_daemon_check_table_schema(const mw_config_t *cfg, const mw_table_config_t *tc,
                                 const mw_schema_t *table, mw_err_t *err);
/* For --check: open each table that exists (read only, on a private loop),
 * as start-up does, and check its schema and `shards` against it; a table
 * missing with create = false is refused as start-up refuses it. */
int mw_daemon_check_tables(const mw_config_t *cfg, mw_err_t *err);

#endif
