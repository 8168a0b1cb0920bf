/*
 * stats.h — the daemon's periodic reports on its tables.
 *
 * Owns one timer (MW_STATS_TICK_MS, unref'd: it never keeps the loop
 * alive) and three reports, each per table:
 *   - every stats_log_interval_ms (the table's merged writer setting; Lance
 *     default 60 000, 0 = never) one info line: shards by state, MemTable
 *     rows and bytes, frozen MemTables, SSTables, rows acknowledged (and
 *     since the last line), WAL entries, flushes;
 *   - every backpressure_log_interval_ms (default 30 000, 0 = never), while
 *     any shard's writes wait on backpressure, one warning naming those
 *     shards (the engine logs the moment it starts; this says it lasts);
 *   - every MW_STATS_DISK_MS (or stats_log_interval_ms when shorter) the
 *     bytes the table takes on disk (the blocks of every file under it,
 *     summed on the thread pool, one walk at a time) in the gauge
 *     memwald_table_disk_bytes{table}. Tables not on the local disk (an
 *     s3:// uri) are not walked.
 * Sample:
 *   info   table events: 4 shards (4 ACTIVE), memtable 1200 rows 3.1 MiB,
 *          0 frozen, 17 SSTables, 120000 rows acked (+1200), 340 WAL entries, 9 flushes
 *
 * Errors: mw_daemon_stats_start returns a negative errno (uv's); the
 * reports themselves never fail (a walk that cannot read a directory counts
 * what it could and logs once at debug).
 */
#ifndef MW_DAEMON_STATS_H
#define MW_DAEMON_STATS_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "common/metrics.h"
#include "daemon/tables.h"

#define MW_STATS_TICK_MS 1000
#define MW_STATS_DISK_MS 30000

typedef struct mw_daemon_stats_table {
  uint64_t last_stats_ms, last_bp_ms, last_disk_ms;
  uint64_t rows_acked_then;
} mw_daemon_stats_table_t;

typedef struct mw_daemon_stats {
  uv_loop_t *loop;
  uv_timer_t tick;
  mw_daemon_tables_t *dt;       /* borrowed */
  mw_metric_family_t *disk;
  mw_daemon_stats_table_t per[MW_CONFIG_MAX_TABLES];
  /* one disk walk at a time, off the loop */
  uv_work_t work;
  bool walking, stopping;
  char walk_name[128];
  char walk_path[4096];
  uint64_t walk_bytes;
} mw_daemon_stats_t;

int mw_daemon_stats_start(mw_daemon_stats_t *s, uv_loop_t *loop, mw_daemon_tables_t *dt,
                          mw_metrics_t *metrics);
/* Stop reporting (the tables may then go away). A disk walk in flight
 * finishes on the pool and reports nothing. */
void mw_daemon_stats_stop(mw_daemon_stats_t *s);

#endif
