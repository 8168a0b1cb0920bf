/*
 * engine_table.h — the server's engine interface (server.h) onto the shard
 * engine's tables (shard/table.h).
 *
 * Owns: the name -> table registry the front ends see: each entry's name,
 * a copy of its table's schema, and whether it is gone for clients. The
 * tables themselves are the daemon's. Entries are never reused: the server
 * holds an entry (its slot number) for each connection, and a table removed
 * by a reload may be closed and freed while a connection still names it,
 * so nothing a connection holds points into the table (its rows are parsed
 * against the entry's schema copy, and the entry says the table is gone).
 * A submission is one mw_table_write (routed to shards there; the batch is
 * consumed on success); its completion status and reason become the reply
 * (lineproto.h maps -EXDEV not_owner, -ESTALE fenced, -EROFS sealed, -EAGAIN
 * overloaded). SYNC needs no barrier: the engine acknowledges a write only
 * once its WAL entry is durable (durable_write, the default), so `sync` is
 * NULL. With durable_write = false, SYNC says nothing more than OK does
 * (documented in docs/protocol.md).
 *
 * Errors: submit returns mw_table_write's immediate error (-ENOMEM, -EXDEV
 * for a row of a shard we do not own, ...), with its reason.
 */
#ifndef MW_NET_ENGINE_TABLE_H
#define MW_NET_ENGINE_TABLE_H

#include <stdbool.h>
#include <stddef.h>

#include "net/server.h"
#include "shard/table.h"

#define MW_FE_MAX_TABLES 256

#define MW_FE_NAME_BYTES 128

/* The one registry of the daemon's tables, by index (entries are never
 * reused, so an index names one table for the daemon's life: daemon/
 * keeps its own per-table data under the same index). The fields are
 * private to engine_table.c: every other module reads and changes an
 * entry through the functions below. Embedded (not opaque) only so the
 * daemon can own it without an allocation. */
typedef struct mw_fe_tables {
  const char *names[MW_FE_MAX_TABLES]; /* into name_buf */
  mw_table_t *tables[MW_FE_MAX_TABLES]; /* borrowed; NULL once removed and closed */
  bool dropped[MW_FE_MAX_TABLES];      /* drop-table committed or removed: gone for clients */
  mw_schema_t *schemas[MW_FE_MAX_TABLES]; /* copies, freed by mw_fe_tables_free */
  char name_buf[MW_FE_MAX_TABLES][MW_FE_NAME_BYTES];
  size_t n;
} mw_fe_tables_t;

/* Register `t` under `name` (copied, with its schema). -ENOSPC past
 * MW_FE_MAX_TABLES, -EEXIST for a live name already there, -ENAMETOOLONG,
 * -ENOMEM. Returns the entry's index. */
int mw_fe_tables_add(mw_fe_tables_t *ts, const char *name, mw_table_t *t);
/* A table removed (by a reload): gone for clients like a dropped one, and
 * its entry forgets the table (which the daemon then closes). */
void mw_fe_tables_remove(mw_fe_tables_t *ts, size_t i);
/* Free the schema copies (after the server has stopped). */
void mw_fe_tables_free(mw_fe_tables_t *ts);
/* After a committed drop-table: the name no longer resolves (USE, status,
 * admin commands answer "unknown table"), and rows still sent by
 * connections that had selected it get ERR table. The table object stays
 * open (every shard parked) until the daemon closes it. */
void mw_fe_tables_drop(mw_fe_tables_t *ts, const mw_table_t *t);
/* The same for entry i (a reload removing it: its writes in flight finish). */
void mw_fe_tables_drop_at(mw_fe_tables_t *ts, size_t i);
/* The number of entries ever added (indexes 0 .. count - 1). */
size_t mw_fe_tables_count(const mw_fe_tables_t *ts);
/* Entry i's name (kept after a drop or removal). */
const char *mw_fe_tables_name(const mw_fe_tables_t *ts, size_t i);
/* Entry i's table, dropped or not; NULL once removed (and closed). */
mw_table_t *mw_fe_tables_table(const mw_fe_tables_t *ts, size_t i);
/* Entry i's table while clients may use it; NULL once dropped or removed. */
mw_table_t *mw_fe_tables_live(const mw_fe_tables_t *ts, size_t i);
/* The index of the live table called name, or -ENOENT (unknown or dropped). */
int mw_fe_tables_index(const mw_fe_tables_t *ts, const char *name);
/* The live table called name, or NULL (unknown or dropped). */
mw_table_t *mw_fe_tables_find(const mw_fe_tables_t *ts, const char *name);
/* Fill *out with callbacks over *ts (which must outlive the server). */
void mw_fe_tables_engine(mw_fe_tables_t *ts, mw_fe_engine_t *out);

#endif
