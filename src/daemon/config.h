/*
 * config.h — memwald's configuration: defaults, the INI file, --set overrides.
 *
 * Owns: the mw_config_t value and the table of every known key. The table is
 * the single source of truth: the parser, the `--set` overrides, validation
 * and `memwald --print-config` all walk it, and conf/memwald.conf documents
 * the same keys (a test checks that each key in the table appears there).
 *
 * Sources, later ones winning: built-in defaults, the file given with -c, then
 * each `--set section.key=value` in order. Tables are sections `[table NAME]`
 * in the file and `table.NAME.key` on the command line.
 *
 * Errors: mw_config_load() returns 0 or a negative errno and fills *err with
 * "FILE:LINE: [section] key: reason" (or "--set ARG: reason"). Unknown sections
 * and unknown keys are errors, never silently ignored: a typo in a durability
 * setting must not fall back to a default. For the same reason a `--set
 * table.NAME.key` overrides a table the file defines; it never adds one.
 *
 * Paths: a table's `uri` that is relative (no leading '/', no scheme such as
 * s3://) is resolved against data_dir once loading is done, so a daemon
 * started by systemd in `/` finds the same tables as one started by hand.
 * Other relative paths (data_dir, admin_socket) are the working directory's.
 */
#ifndef MW_DAEMON_CONFIG_H
#define MW_DAEMON_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "storage/storage.h"

#define MW_CONFIG_MAX_TABLES 64
#define MW_CONFIG_MAX_LISTEN 16
#define MW_CONFIG_MAX_VALUE_BYTES 4096
#define MW_CONFIG_MAX_SETS 256
#define MW_CONFIG_TABLE_KEY_SLOTS 64 /* >= the number of [table] keys */

typedef enum { MW_WAL_COMPRESSION_NONE = 0, MW_WAL_COMPRESSION_ZSTD } mw_wal_compression_t;
typedef enum { MW_CLAIM_LAZY = 0, MW_CLAIM_EAGER } mw_claim_mode_t;
/* Which replies a producer connection gets (net/lineproto.h's modes, same
 * order): all, errors (no OK lines), none (no OK or ERR lines). */
typedef enum { MW_REPLIES_ALL = 0, MW_REPLIES_ERRORS, MW_REPLIES_NONE } mw_replies_mode_t;
#define MW_REPLIES_DEFAULT (-1) /* a listen address without its own mode */

typedef struct mw_table_config {
  char name[128];
  char uri[1024];       /* a path, file://PATH or s3://BUCKET/PREFIX/NAME.lance */
  /* S3 overrides of the AWS environment; "" / -1 = not set */
  char s3_endpoint[256];
  char s3_region[64];
  int s3_path_style;    /* -1, 0, 1 */
  int s3_allow_http;    /* -1, 0, 1 */
  bool create;
  char schema[MW_CONFIG_MAX_VALUE_BYTES];
  char primary_key[256];
  char spec[256];   /* unsharded | bucket(col,N) | identity(col) */
  char shards[1024]; /* all | comma-separated bucket numbers or identity values */
  mw_claim_mode_t claim;
  /* Lance writer settings (writer_config_defaults names, memwal.md §9). A
   * value of -1 means "not set here": use the table's defaults. */
  int durable_write; /* -1, 0, 1 */
  int64_t max_wal_buffer_size;
  int64_t max_wal_flush_interval_ms;
  int64_t max_memtable_size;
  int64_t max_memtable_rows;
  int64_t max_memtable_batches;
  int64_t max_memtable_age_ms;
  int64_t max_fault_retry_interval_ms; /* automatic re-claim back-off cap (engine.md) */
  int64_t manifest_scan_batch_size;
  int64_t max_unflushed_memtable_bytes;
  int64_t backpressure_log_interval_ms;
  int64_t stats_log_interval_ms;
  mw_wal_compression_t wal_compression;
  bool sstable_zstd;
  bool zone_write_seeds;            /* zone write seeds v1 (docs/sstable.md) */
  int64_t zone_seed_rows_per_zone;  /* rows per zone of each seed, default 8192 */
  /* Where each key's value came from, for messages (mw_config_key_where):
   * > 0 the file's line, MW_CONFIG_FROM_SET a --set, 0 the default. */
  int section_line;
  int key_lines[MW_CONFIG_TABLE_KEY_SLOTS];
  /* compaction into the base table and GC (docs/engine.md); -1 = default */
  int compaction;                      /* -1, 0, 1 */
  int compaction_zstd;                 /* -1, 0, 1 */
  int64_t compaction_min_sstables;
  int64_t compaction_min_bytes;
  int64_t compaction_max_age_ms;
  int64_t compaction_max_sstables;
  int64_t compaction_max_rows;
  int gc;                              /* -1, 0, 1 */
  int64_t gc_grace_ms;
  int64_t gc_manifest_keep_versions;
  int64_t gc_manifest_grace_ms;
  int64_t gc_history_retention_ms;
  int64_t gc_history_interval_ms;
} mw_table_config_t;

#define MW_CONFIG_FROM_SET (-1)

typedef struct mw_config {
  /* [daemon] */
  int log_level;
  char data_dir[1024];
  char admin_socket[1024];
  char listen[MW_CONFIG_MAX_LISTEN][256];
  int listen_replies[MW_CONFIG_MAX_LISTEN]; /* mw_replies_mode_t or MW_REPLIES_DEFAULT */
  bool listen_tls[MW_CONFIG_MAX_LISTEN];        /* `ADDR tls` */
  bool listen_plain_auth[MW_CONFIG_MAX_LISTEN]; /* `ADDR plaintext_auth`: AUTH in clear */
  size_t n_listen;
  mw_replies_mode_t replies;
  char default_table[128];
  char auth_token[256];
  /* TLS (docs/security.md): one certificate for every tls listener and
   * metrics_listen's; tls_client_cert none | optional | require */
  char tls_cert_file[1024];
  char tls_key_file[1024];
  char tls_ca_file[1024];
  char tls_client_cert[16];
  char credentials_file[1024]; /* net/creds.h; "" = none */
  int64_t max_handshakes;
  int64_t handshake_timeout_ms;
  int64_t auth_timeout_ms;
  int64_t max_preauth_bytes;
  int64_t max_line_bytes;
  int64_t max_connections;
  int64_t max_unacked_bytes_per_connection;
  int64_t max_frame_bytes;
  int64_t max_reply_bytes_per_connection;
  int64_t max_batch_rows;
  int64_t write_gather_ms; /* a connection's parsed rows wait this long at most for the rest of its write; 0 = off */
  int64_t idle_timeout_ms;
  bool ignore_unknown_fields;
  bool json_objects_as_text; /* a JSON object/array for a string column is stored as its text */
  char metrics_listen[256];
  bool metrics_tls; /* `metrics_listen = ADDR tls` (the suffix taken off metrics_listen) */
  int64_t shutdown_timeout_ms;
  int64_t memory_trim_interval_ms;
  /* [storage]: every table's storage (daemon/tables.c builds it) */
  mw_storage_backend_t io_backend; /* auto | uring | threads (local tables) */
  int64_t max_inflight;
  int64_t max_object_bytes;
  int64_t s3_request_timeout_ms;
  int64_t s3_retry_deadline_ms;
  int64_t s3_part_bytes;
  /* [table NAME] */
  mw_table_config_t tables[MW_CONFIG_MAX_TABLES];
  size_t n_tables;
  /* where it came from, for reloads and messages */
  char path[1024];
} mw_config_t;

void mw_config_defaults(mw_config_t *cfg);
/* Load defaults, then `path` (may be NULL), then the `--set` strings. */
int mw_config_load(mw_config_t *cfg, const char *path, const char *const *sets, size_t n_sets,
                   mw_err_t *err);
/* The same, reading the file's text from an open stream (`name` is used in
 * messages). For tests and the fuzz target (fmemopen). */
int mw_config_load_stream(mw_config_t *cfg, const char *name, void *file /* FILE* */,
                          const char *const *sets, size_t n_sets, mw_err_t *err);
/* Print the effective configuration as INI (used by --print-config). */
void mw_config_print(const mw_config_t *cfg, void *file /* FILE* */);
/* Visit every known key: "section.key" (tables as "table.*.key"). */
size_t mw_config_key_count(void);
const char *mw_config_key_name(size_t i);
bool mw_config_key_reloadable(size_t i);
const mw_table_config_t *mw_config_table(const mw_config_t *cfg, const char *name);
/* Where table key `key` of `t` was set, as messages name it:
 * "FILE:LINE: [table NAME] key", "--set table.NAME.key" or, for a default,
 * "FILE: [table NAME] key" (FILE:LINE of the section when known). */
void mw_config_key_where(const mw_config_t *cfg, const mw_table_config_t *t, const char *key,
                         char *out, size_t n);

#endif
