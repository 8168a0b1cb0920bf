/*
 * config.c — the key table, value parsers and the inih glue (see config.h).
 *
 * Every key is one row of `keys[]`: where it lives (daemon, storage or a
 * table), its type, bounds, default and whether SIGHUP may change it. Adding
 * a key is adding a row (and documenting it in conf/memwald.conf, which
 * tests/e2e checks).
 *
 * Value syntax:
 *   integers   decimal, optionally with a binary size suffix for byte counts:
 *              KiB, MiB, GiB (e.g. `max_object_bytes = 64MiB`)
 *   booleans   true/false, yes/no, on/off, 1/0
 *   lists      `listen` may repeat, or hold several comma-separated addresses,
 *              each optionally followed by its reply mode, `tls` and
 *              `plaintext_auth` (AUTH allowed in clear off loopback):
 *              `listen = 127.0.0.1:7070, 127.0.0.1:7071 replies=none`,
 *              `listen = 0.0.0.0:7443 tls`
 *   long text  `schema` and `shards` may continue on indented lines (or
 *              repeat); the pieces are joined with ", ". Debian's libinih
 *              reads at most 199 characters per line, so a longer line is
 *              refused with its line number rather than silently split.
 */
#include "daemon/config.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/setting.h"

typedef enum { SC_DAEMON, SC_STORAGE, SC_TABLE } scope_t;
typedef enum { T_STR, T_JOIN, T_INT, T_BOOL, T_LEVEL, T_LISTEN, T_IO, T_WALC, T_CLAIM, T_TRIBOOL,
               T_REPLIES } ktype_t;

typedef struct key {
  scope_t scope;
  const char *name;
  ktype_t type;
  size_t off;    /* into mw_config_t (daemon/storage) or mw_table_config_t */
  size_t size;   /* T_STR capacity */
  int64_t min, max;
  bool reloadable;
} cfg_key_t;

#define D(f) offsetof(mw_config_t, f), sizeof(((mw_config_t *)0)->f)
#define TB(f) offsetof(mw_table_config_t, f), sizeof(((mw_table_config_t *)0)->f)
#define KiB 1024LL
#define MiB (1024LL * 1024)
#define GiB (1024LL * 1024 * 1024)

static const cfg_key_t keys[] = {
    {SC_DAEMON, "log_level", T_LEVEL, D(log_level), 0, 7, true},
    {SC_DAEMON, "data_dir", T_STR, D(data_dir), 0, 0, false},
    {SC_DAEMON, "admin_socket", T_STR, D(admin_socket), 0, 0, false},
    {SC_DAEMON, "listen", T_LISTEN, D(listen), 0, 0, false},
    {SC_DAEMON, "replies", T_REPLIES, D(replies), 0, 0, false},
    {SC_DAEMON, "default_table", T_STR, D(default_table), 0, 0, false},
    {SC_DAEMON, "auth_token", T_STR, D(auth_token), 0, 0, false},
    {SC_DAEMON, "credentials_file", T_STR, D(credentials_file), 0, 0, true},
    {SC_DAEMON, "tls_cert_file", T_STR, D(tls_cert_file), 0, 0, true},
    {SC_DAEMON, "tls_key_file", T_STR, D(tls_key_file), 0, 0, true},
    {SC_DAEMON, "tls_ca_file", T_STR, D(tls_ca_file), 0, 0, true},
    {SC_DAEMON, "tls_client_cert", T_STR, D(tls_client_cert), 0, 0, true},
    {SC_DAEMON, "max_handshakes", T_INT, D(max_handshakes), 1, 100000, false},
    {SC_DAEMON, "handshake_timeout_ms", T_INT, D(handshake_timeout_ms), 100, 600000, false},
    {SC_DAEMON, "auth_timeout_ms", T_INT, D(auth_timeout_ms), 100, 600000, false},
    {SC_DAEMON, "max_preauth_bytes", T_INT, D(max_preauth_bytes), 64, 1 * MiB, false},
    {SC_DAEMON, "max_line_bytes", T_INT, D(max_line_bytes), 64, 64 * MiB, false},
    {SC_DAEMON, "max_connections", T_INT, D(max_connections), 1, 1000000, false},
    {SC_DAEMON, "max_unacked_bytes_per_connection", T_INT, D(max_unacked_bytes_per_connection),
     4 * KiB, 1 * GiB, false},
    {SC_DAEMON, "max_frame_bytes", T_INT, D(max_frame_bytes), 1 * KiB, 1 * GiB, false},
    {SC_DAEMON, "max_reply_bytes_per_connection", T_INT, D(max_reply_bytes_per_connection), 4 * KiB,
     1 * GiB, false},
    {SC_DAEMON, "max_batch_rows", T_INT, D(max_batch_rows), 1, 1048576, false},
    {SC_DAEMON, "write_gather_ms", T_INT, D(write_gather_ms), 0, 1000, false},
    {SC_DAEMON, "idle_timeout_ms", T_INT, D(idle_timeout_ms), 0, 86400000, false},
    {SC_DAEMON, "ignore_unknown_fields", T_BOOL, D(ignore_unknown_fields), 0, 1, false},
    {SC_DAEMON, "json_objects_as_text", T_BOOL, D(json_objects_as_text), 0, 1, false},
    {SC_DAEMON, "metrics_listen", T_STR, D(metrics_listen), 0, 0, false},
    {SC_DAEMON, "shutdown_timeout_ms", T_INT, D(shutdown_timeout_ms), 0, 3600000, false},
    {SC_DAEMON, "memory_trim_interval_ms", T_INT, D(memory_trim_interval_ms), 0, 3600000, false},
    {SC_STORAGE, "io_backend", T_IO, D(io_backend), 0, 0, false},
    {SC_STORAGE, "max_inflight", T_INT, D(max_inflight), 1, 65536, false},
    {SC_STORAGE, "max_object_bytes", T_INT, D(max_object_bytes), 4 * KiB, 16 * GiB, false},
    {SC_STORAGE, "s3_request_timeout_ms", T_INT, D(s3_request_timeout_ms), 100, 3600000, false},
    {SC_STORAGE, "s3_retry_deadline_ms", T_INT, D(s3_retry_deadline_ms), 0, 3600000, false},
    {SC_STORAGE, "s3_part_bytes", T_INT, D(s3_part_bytes), 5 * MiB, 5 * GiB, false},
    {SC_TABLE, "uri", T_STR, TB(uri), 0, 0, false},
    {SC_TABLE, "s3_endpoint", T_STR, TB(s3_endpoint), 0, 0, false},
    {SC_TABLE, "s3_region", T_STR, TB(s3_region), 0, 0, false},
    {SC_TABLE, "s3_path_style", T_TRIBOOL, TB(s3_path_style), 0, 1, false},
    {SC_TABLE, "s3_allow_http", T_TRIBOOL, TB(s3_allow_http), 0, 1, false},
    {SC_TABLE, "create", T_BOOL, TB(create), 0, 1, false},
    {SC_TABLE, "schema", T_JOIN, TB(schema), 0, 0, false},
    {SC_TABLE, "primary_key", T_STR, TB(primary_key), 0, 0, false},
    {SC_TABLE, "spec", T_STR, TB(spec), 0, 0, false},
    {SC_TABLE, "shards", T_JOIN, TB(shards), 0, 0, false},
    {SC_TABLE, "claim", T_CLAIM, TB(claim), 0, 0, false},
    {SC_TABLE, "durable_write", T_TRIBOOL, TB(durable_write), 0, 1, false},
    {SC_TABLE, "max_wal_buffer_size", T_INT, TB(max_wal_buffer_size), 4 * KiB, 4 * GiB, false},
    {SC_TABLE, "max_wal_flush_interval_ms", T_INT, TB(max_wal_flush_interval_ms), 0, 60000, false},
    {SC_TABLE, "max_memtable_size", T_INT, TB(max_memtable_size), 64 * KiB, 64 * GiB, false},
    {SC_TABLE, "max_memtable_rows", T_INT, TB(max_memtable_rows), 1, 1000000000, false},
    {SC_TABLE, "max_memtable_batches", T_INT, TB(max_memtable_batches), 1, 1000000, false},
    {SC_TABLE, "max_memtable_age_ms", T_INT, TB(max_memtable_age_ms), 0, 86400000, false},
    {SC_TABLE, "max_fault_retry_interval_ms", T_INT, TB(max_fault_retry_interval_ms), 0, 3600000, false},
    {SC_TABLE, "manifest_scan_batch_size", T_INT, TB(manifest_scan_batch_size), 1, 64, false},
    {SC_TABLE, "max_unflushed_memtable_bytes", T_INT, TB(max_unflushed_memtable_bytes), 1 * MiB,
     1024 * GiB, false},
    {SC_TABLE, "backpressure_log_interval_ms", T_INT, TB(backpressure_log_interval_ms), 0,
     86400000, false},
    {SC_TABLE, "stats_log_interval_ms", T_INT, TB(stats_log_interval_ms), 0, 86400000, false},
    {SC_TABLE, "wal_compression", T_WALC, TB(wal_compression), 0, 0, false},
    {SC_TABLE, "sstable_zstd", T_BOOL, TB(sstable_zstd), 0, 1, false},
    {SC_TABLE, "zone_write_seeds", T_BOOL, TB(zone_write_seeds), 0, 1, false},
    {SC_TABLE, "zone_seed_rows_per_zone", T_INT, TB(zone_seed_rows_per_zone), 1, 1073741824, false},
    {SC_TABLE, "compaction", T_TRIBOOL, TB(compaction), 0, 1, false},
    {SC_TABLE, "compaction_min_sstables", T_INT, TB(compaction_min_sstables), 1, 100000, false},
    {SC_TABLE, "compaction_min_bytes", T_INT, TB(compaction_min_bytes), 1, 1024 * GiB, false},
    {SC_TABLE, "compaction_max_age_ms", T_INT, TB(compaction_max_age_ms), 0, 86400000, false},
    {SC_TABLE, "compaction_max_sstables", T_INT, TB(compaction_max_sstables), 1, 65536, false},
    {SC_TABLE, "compaction_max_rows", T_INT, TB(compaction_max_rows), 1, 1000000000, false},
    {SC_TABLE, "compaction_zstd", T_TRIBOOL, TB(compaction_zstd), 0, 1, false},
    {SC_TABLE, "gc", T_TRIBOOL, TB(gc), 0, 1, false},
    {SC_TABLE, "gc_grace_ms", T_INT, TB(gc_grace_ms), 0, 86400000, false},
    {SC_TABLE, "gc_manifest_keep_versions", T_INT, TB(gc_manifest_keep_versions), 2, 1000000, false},
    {SC_TABLE, "gc_manifest_grace_ms", T_INT, TB(gc_manifest_grace_ms), 0, 86400000, false},
    {SC_TABLE, "gc_history_retention_ms", T_INT, TB(gc_history_retention_ms), 0, 31536000000, false},
    {SC_TABLE, "gc_history_interval_ms", T_INT, TB(gc_history_interval_ms), 10, 86400000, false},
};
#define N_KEYS (sizeof keys / sizeof keys[0])

/* The slot of table key `k` in mw_table_config_t.key_lines: its ordinal
 * among the table keys of keys[]. */
static int table_slot(const cfg_key_t *k) {
  assert(k >= keys);
  assert(k < keys + N_KEYS);
  assert(k->scope == SC_TABLE);
  int slot = 0;
  for (const cfg_key_t *q = keys; q < k; q++) slot += q->scope == SC_TABLE;
  assert(slot < MW_CONFIG_TABLE_KEY_SLOTS);
  return slot;
}

static const char *const scope_names[] = {"daemon", "storage", "table"};

size_t mw_config_key_count(void) { return N_KEYS; }

const char *mw_config_key_name(size_t i) {
  static char names[N_KEYS][96];
  assert(i < N_KEYS);
  snprintf(names[i], sizeof names[i], "%s.%s%s", scope_names[keys[i].scope],
           keys[i].scope == SC_TABLE ? "*." : "", keys[i].name);
  return names[i];
}

bool mw_config_key_reloadable(size_t i) {
  assert(i < N_KEYS);
  return keys[i].reloadable;
}

static void table_defaults(mw_table_config_t *t, const char *name) {
  memset(t, 0, sizeof *t);
  snprintf(t->name, sizeof t->name, "%s", name);
  snprintf(t->spec, sizeof t->spec, "unsharded");
  snprintf(t->shards, sizeof t->shards, "all");
  t->durable_write = -1;
  t->s3_path_style = -1;
  t->s3_allow_http = -1;
  t->max_wal_buffer_size = -1;
  t->max_wal_flush_interval_ms = -1;
  t->max_memtable_size = -1;
  t->max_memtable_rows = -1;
  t->max_memtable_batches = -1;
  t->max_memtable_age_ms = -1;
  t->max_fault_retry_interval_ms = -1;
  t->manifest_scan_batch_size = -1;
  t->max_unflushed_memtable_bytes = -1;
  t->zone_seed_rows_per_zone = 8192; /* MW_SEED_DEFAULT_ROWS_PER_ZONE */
  t->backpressure_log_interval_ms = -1;
  t->stats_log_interval_ms = -1;
  t->wal_compression = MW_WAL_COMPRESSION_NONE;
  t->compaction = -1;
  t->compaction_zstd = -1;
  t->compaction_min_sstables = -1;
  t->compaction_min_bytes = -1;
  t->compaction_max_age_ms = -1;
  t->compaction_max_sstables = -1;
  t->compaction_max_rows = -1;
  t->gc = -1;
  t->gc_grace_ms = -1;
  t->gc_manifest_keep_versions = -1;
  t->gc_manifest_grace_ms = -1;
  t->gc_history_retention_ms = -1;
  t->gc_history_interval_ms = -1;
}

void mw_config_defaults(mw_config_t *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->log_level = MW_LOG_INFO;
  snprintf(cfg->data_dir, sizeof cfg->data_dir, "/var/lib/memwald");
  snprintf(cfg->admin_socket, sizeof cfg->admin_socket, "/run/memwald/admin.sock");
  snprintf(cfg->listen[0], sizeof cfg->listen[0], "127.0.0.1:7070");
  for (size_t i = 0; i < MW_CONFIG_MAX_LISTEN; i++) cfg->listen_replies[i] = MW_REPLIES_DEFAULT;
  cfg->n_listen = 1;
  cfg->replies = MW_REPLIES_ALL;
  snprintf(cfg->tls_client_cert, sizeof cfg->tls_client_cert, "none");
  cfg->max_handshakes = 256;
  cfg->handshake_timeout_ms = 10000;
  cfg->auth_timeout_ms = 10000;
  cfg->max_preauth_bytes = 4096;
  cfg->max_line_bytes = 1 * MiB;
  cfg->max_connections = 4096;
  cfg->max_unacked_bytes_per_connection = 8 * MiB;
  cfg->max_frame_bytes = 64 * MiB;
  cfg->max_reply_bytes_per_connection = 256 * KiB;
  cfg->max_batch_rows = 8192;
  cfg->write_gather_ms = 10;
  cfg->idle_timeout_ms = 300000;
  cfg->shutdown_timeout_ms = 30000;
  cfg->memory_trim_interval_ms = 10000;
  cfg->io_backend = MW_STORAGE_AUTO;
  cfg->max_inflight = 256;
  cfg->max_object_bytes = 256 * MiB;
  cfg->s3_request_timeout_ms = 30000;
  cfg->s3_retry_deadline_ms = 15000;
  cfg->s3_part_bytes = 16 * MiB;
}

/* ------------------------------------------------------------ value parsers */

static const char *const replies_names[] = {"all", "errors", "none"};

static int parse_replies(const char *v, mw_replies_mode_t *out) {
  for (int i = 0; i < 3; i++)
    if (strcmp(v, replies_names[i]) == 0) return *out = (mw_replies_mode_t)i, 0;
  return -EINVAL;
}

static int parse_bool(const char *v, bool *out) {
  assert(v != NULL);
  assert(out != NULL);
  static const char *const yes[] = {"true", "yes", "on", "1"};
  static const char *const no[] = {"false", "no", "off", "0"};
  for (size_t i = 0; i < 4; i++) {
    if (strcasecmp(v, yes[i]) == 0) return *out = true, 0;
    if (strcasecmp(v, no[i]) == 0) return *out = false, 0;
  }
  return -EINVAL;
}

/* Where each `key =` of the file is (inih does not tell its handler): the
 * first line of each (section, key), and of each section header. */
#define MAX_SPOTS 2048
typedef struct spot {
  char section[136];
  char key[48];  /* "" for the header */
  int line;
} spot_t;

typedef struct load_ctx {
  mw_config_t *cfg;
  mw_err_t *err;
  const char *name;  /* the file, for messages */
  spot_t *spots;
  size_t n_spots;
  char msg[MW_ERR_MSG_BYTES];
  int source;        /* 1 = file, 2 = --set */
  int listen_source; /* source that last assigned listen */
  const void *join_field; /* T_JOIN field assigned in this source, to append to */
} load_ctx_t;

static int fail(load_ctx_t *c, const char *section, const char *name, const char *fmt,
                const char *arg) {
  assert(section != NULL);
  assert(fmt != NULL);
  char reason[256];
  snprintf(reason, sizeof reason, fmt, arg);
  snprintf(c->msg, sizeof c->msg, "[%.160s] %.96s: %.240s", section, name, reason);
  return 0; /* inih: 0 = error on this line */
}

static bool valid_table_name(const char *n) {
  size_t len = strlen(n);
  if (len == 0 || len >= sizeof((mw_table_config_t *)0)->name) return false;
  for (size_t i = 0; i < len; i++)
    if (!isalnum((unsigned char)n[i]) && n[i] != '_' && n[i] != '-') return false;
  return true;
}

static mw_table_config_t *table_get(mw_config_t *cfg, const char *name, bool create) {
  assert(valid_table_name(name)); /* on_key checked it */
  assert(cfg->n_tables <= MW_CONFIG_MAX_TABLES);
  for (size_t i = 0; i < cfg->n_tables; i++)
    if (strcmp(cfg->tables[i].name, name) == 0) return &cfg->tables[i];
  if (!create || cfg->n_tables >= MW_CONFIG_MAX_TABLES) return NULL;
  mw_table_config_t *t = &cfg->tables[cfg->n_tables++];
  table_defaults(t, name);
  return t;
}

static int add_listen(load_ctx_t *c, const char *section, const char *name, const char *value) {
  assert(c->source == 1 || c->source == 2);
  assert(c->cfg->n_listen <= MW_CONFIG_MAX_LISTEN);
  mw_config_t *cfg = c->cfg;
  if (c->listen_source != c->source) cfg->n_listen = 0; /* a new source replaces the list */
  c->listen_source = c->source;
  char tmp[MW_CONFIG_MAX_VALUE_BYTES];
  snprintf(tmp, sizeof tmp, "%s", value);
  char *save = NULL;
  for (char *tok = strtok_r(tmp, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    while (isspace((unsigned char)*tok)) tok++;
    size_t len = strlen(tok);
    while (len && isspace((unsigned char)tok[len - 1])) tok[--len] = '\0';
    if (len == 0) continue;
    if (cfg->n_listen >= MW_CONFIG_MAX_LISTEN)
      return fail(c, section, name, "more than %s addresses", "16");
    int mode = MW_REPLIES_DEFAULT;
    bool tls = false, plain_auth = false;
    char *sp = strpbrk(tok, " \t");
    if (sp != NULL) { /* "ADDR [replies=MODE] [tls] [plaintext_auth]" */
      *sp++ = '\0';
      char *save2 = NULL;
      for (char *o = strtok_r(sp, " \t", &save2); o; o = strtok_r(NULL, " \t", &save2)) {
        mw_replies_mode_t m;
        if (strcmp(o, "tls") == 0) tls = true;
        else if (strcmp(o, "plaintext_auth") == 0) plain_auth = true;
        else if (strncmp(o, "replies=", 8) == 0 && parse_replies(o + 8, &m) == 0) mode = (int)m;
        else
          return fail(c, section, name,
                      "after the address only replies=all|errors|none, tls and plaintext_auth, got '%s'", o);
      }
      len = strlen(tok);
    }
    if (len >= sizeof cfg->listen[0]) return fail(c, section, name, "address too long: %s", tok);
    if (strrchr(tok, ':') == NULL)
      return fail(c, section, name, "expected HOST:PORT or [V6]:PORT, got '%s'", tok);
    for (const char *q = tok; *q; q++)
      if (!isalnum((unsigned char)*q) && !strchr(".:[]-_%", *q))
        return fail(c, section, name, "'%s' is not an address (HOST:PORT or [V6]:PORT)", tok);
    cfg->listen_replies[cfg->n_listen] = mode;
    cfg->listen_tls[cfg->n_listen] = tls;
    cfg->listen_plain_auth[cfg->n_listen] = plain_auth;
    memcpy(cfg->listen[cfg->n_listen++], tok, len + 1);
  }
  return 1;
}

/* ------------------------------------------------------------ setters
 *
 * One path for every key: on_key() finds the key's row, assign() calls the
 * setter of its type from setters[]. A setter parses the value, checks it
 * against the row's limits and stores it, or says why not through fail()
 * ("[section] key: reason", which load_sources() prefixes with FILE:LINE or
 * "--set ARG"). Integers all go through common's mw_setting_parse_u64, as the
 * shard, compaction and GC settings do. */

typedef int (*setter_t)(load_ctx_t *c, const cfg_key_t *k, char *field, const char *section,
                        const char *value);

/* The names of an enum-valued type, in the enum's order. */
typedef struct enum_names {
  const char *const *names;
  int n;
} enum_names_t;

static const char *const walc_names[] = {"none", "zstd"};
static const char *const claim_names[] = {"lazy", "eager"};

static enum_names_t enum_of(ktype_t t) {
  switch (t) {
    case T_WALC: return (enum_names_t){walc_names, 2};
    case T_CLAIM: return (enum_names_t){claim_names, 2};
    case T_REPLIES: return (enum_names_t){replies_names, 3};
    default: break;
  }
  assert(!"not an enum-valued key type");
  return (enum_names_t){NULL, 0};
}

/* T_STR, and T_JOIN's first piece of a source. */
static int set_str(load_ctx_t *c, const cfg_key_t *k, char *field, const char *section,
                   const char *value) {
  assert(k->size > 0);
  size_t vlen = strlen(value);
  if (vlen >= k->size) return fail(c, section, k->name, "value longer than %s bytes", "the limit");
  memcpy(field, value, vlen + 1);
  return 1;
}

/* T_JOIN: a repeat or continuation in the same source appends ", value". */
static int set_join(load_ctx_t *c, const cfg_key_t *k, char *field, const char *section,
                    const char *value) {
  assert(k->type == T_JOIN);
  if (c->join_field != field) {
    c->join_field = field;
    return set_str(c, k, field, section, value);
  }
  size_t have = strlen(field), vlen = strlen(value);
  assert(have < k->size);
  if (have + 2 + vlen >= k->size)
    return fail(c, section, k->name, "value longer than %s bytes", "the limit");
  memcpy(field + have, ", ", 2);
  memcpy(field + have + 2, value, vlen + 1);
  return 1;
}

static int set_int(load_ctx_t *c, const cfg_key_t *k, char *field, const char *section,
                   const char *value) {
  assert(k->size == sizeof(int64_t));
  assert(k->min >= 0); /* every integer key is a count, a size or a time */
  assert(k->min <= k->max);
  uint64_t n;
  mw_err_t e = {0};
  if (mw_setting_parse_u64(NULL, value, (uint64_t)k->min, (uint64_t)k->max, MW_SETTING_SIZES, &n, &e) < 0)
    return fail(c, section, k->name, "%.200s", e.msg); /* the reason quotes at most 64 bytes */
  assert(n <= (uint64_t)k->max);
  int64_t v = (int64_t)n;
  memcpy(field, &v, sizeof v);
  return 1;
}

/* T_BOOL stores a bool; T_TRIBOOL an int (-1, the default, = unset). */
static int set_bool(load_ctx_t *c, const cfg_key_t *k, char *field, const char *section,
                    const char *value) {
  assert(k->type == T_BOOL || k->type == T_TRIBOOL);
  bool b;
  if (parse_bool(value, &b) < 0) return fail(c, section, k->name, "expected true or false, got '%s'", value);
  if (k->type == T_BOOL) {
    assert(k->size == sizeof(bool));
    *(bool *)(void *)field = b;
  } else {
    assert(k->size == sizeof(int));
    *(int *)(void *)field = b ? 1 : 0;
  }
  return 1;
}

static int set_level(load_ctx_t *c, const cfg_key_t *k, char *field, const char *section,
                     const char *value) {
  assert(k->size == sizeof(int));
  int lvl = mw_log_level_parse(value);
  if (lvl < 0) return fail(c, section, k->name, "expected error, warn, notice, info or debug, got '%s'", value);
  assert(lvl >= k->min);
  assert(lvl <= k->max);
  *(int *)(void *)field = lvl;
  return 1;
}

static int set_io(load_ctx_t *c, const cfg_key_t *k, char *field, const char *section,
                  const char *value) {
  assert(k->size == sizeof(mw_storage_backend_t));
  mw_storage_backend_t v;
  if (mw_storage_backend_parse(value, &v) < 0 || v == MW_STORAGE_S3)
    return fail(c, section, k->name, "expected auto, uring or threads, got '%s'", value);
  *(mw_storage_backend_t *)(void *)field = v;
  return 1;
}

/* An enum-valued key (enum_of): the value's index among its names. The
 * message lists them: "expected a, b or c". */
static int set_enum(load_ctx_t *c, const cfg_key_t *k, char *field, const char *section,
                    const char *value) {
  assert(k->size == sizeof(int)); /* the enums of config.h are int-sized */
  enum_names_t e = enum_of(k->type);
  assert(e.n >= 2);
  for (int i = 0; i < e.n; i++)
    if (strcmp(value, e.names[i]) == 0) {
      *(int *)(void *)field = i;
      return 1;
    }
  char want[96];
  size_t w = 0;
  for (int i = 0; i < e.n && w < sizeof want; i++)
    w += (size_t)snprintf(want + w, sizeof want - w, "%s%s", i == 0 ? "" : i == e.n - 1 ? " or " : ", ",
                          e.names[i]);
  char reason[256];
  snprintf(reason, sizeof reason, "expected %s, got '%.140s'", want, value);
  return fail(c, section, k->name, "%s", reason);
}

static int set_listen(load_ctx_t *c, const cfg_key_t *k, char *field, const char *section,
                      const char *value) {
  assert(k->type == T_LISTEN);
  assert(field == (char *)c->cfg->listen);
  return add_listen(c, section, k->name, value);
}

static const setter_t setters[] = {
    [T_STR] = set_str,     [T_JOIN] = set_join,   [T_INT] = set_int,       [T_BOOL] = set_bool,
    [T_LEVEL] = set_level, [T_LISTEN] = set_listen, [T_IO] = set_io,       [T_WALC] = set_enum,
    [T_CLAIM] = set_enum,  [T_TRIBOOL] = set_bool, [T_REPLIES] = set_enum,
};
_Static_assert(sizeof setters / sizeof setters[0] == T_REPLIES + 1, "a setter for every key type");

static int assign(load_ctx_t *c, const cfg_key_t *k, void *base, const char *section,
                  const char *value) {
  assert(k >= keys);
  assert(k < keys + N_KEYS);
  assert(setters[k->type] != NULL);
  return setters[k->type](c, k, (char *)base + k->off, section, value);
}

static int spot_line(const load_ctx_t *c, const char *section, const char *key) {
  for (size_t i = 0; i < c->n_spots; i++)
    if (strcmp(c->spots[i].section, section) == 0 && strcmp(c->spots[i].key, key) == 0)
      return c->spots[i].line;
  return 0;
}

/* Record where a table key's value comes from (the file's line or --set). */
static void note_where(load_ctx_t *c, const cfg_key_t *k, mw_table_config_t *t, const char *section) {
  assert(c->source == 1 || c->source == 2);
  assert(t != NULL);
  int *line = &t->key_lines[table_slot(k)];
  if (c->source == 2) *line = MW_CONFIG_FROM_SET;
  else if (*line <= 0) *line = spot_line(c, section, k->name);
  if (c->source == 1 && t->section_line == 0) t->section_line = spot_line(c, section, "");
}

/* inih callback: returns 1 on success, 0 on error (message in ctx). Also
 * called by --set handling with the same contract. */
static int on_key(void *user, const char *section, const char *name, const char *value) {
  load_ctx_t *c = user;
  assert(section != NULL);
  assert(c->source == 1 || c->source == 2); /* the file, then --set */
  scope_t scope;
  void *base;
  if (strcmp(section, "daemon") == 0) {
    scope = SC_DAEMON;
    base = c->cfg;
  } else if (strcmp(section, "storage") == 0) {
    scope = SC_STORAGE;
    base = c->cfg;
  } else if (strncmp(section, "table ", 6) == 0) {
    const char *tname = section + 6;
    while (*tname == ' ') tname++;
    if (!valid_table_name(tname))
      return fail(c, section, name, "bad table name '%s' (letters, digits, '_' and '-', at most 127)", tname);
    scope = SC_TABLE;
    base = table_get(c->cfg, tname, c->source == 1);
    if (base == NULL && c->source == 2) {
      char known[512] = "";
      for (size_t i = 0, w = 0; i < c->cfg->n_tables && w < sizeof known; i++)
        w += (size_t)snprintf(known + w, sizeof known - w, "%s%s", i ? ", " : "", c->cfg->tables[i].name);
      snprintf(c->msg, sizeof c->msg,
               "no [table %.100s] section in %.160s: --set overrides a table's keys, it does not "
               "define a table (tables: %.120s)", tname, c->name, known[0] ? known : "none");
      return 0;
    }
    if (base == NULL) return fail(c, section, name, "more than %s tables", "64");
  } else {
    snprintf(c->msg, sizeof c->msg,
             "unknown section [%s] (expected [daemon], [storage] or [table NAME])", section);
    return 0;
  }
  if (name == NULL) return 1; /* section header alone (INI_CALL_HANDLER_ON_NEW_SECTION) */
  for (size_t i = 0; i < N_KEYS; i++)
    if (keys[i].scope == scope && strcmp(keys[i].name, name) == 0) {
      if (scope == SC_TABLE) note_where(c, &keys[i], base, section);
      return assign(c, &keys[i], base, section, value);
    }
  if (strcmp(name, "allow_unmaintained_indexes") == 0) /* removed with issue 27 */
    return fail(c, section, name, "%s", "'allow_unmaintained_indexes' was removed: memwald opens tables whose "
                "write spec maintains BTree or vector indexes without it (docs/indexes.md); delete the line");
  return fail(c, section, name, "unknown key '%s'", name);
}

/* "daemon.log_level=debug" or "table.events.uri=/x" -> on_key(). */
static int apply_set(load_ctx_t *c, const char *arg) {
  assert(arg != NULL);
  assert(c->source == 2);
  char buf[MW_CONFIG_MAX_VALUE_BYTES + 256];
  if (strlen(arg) >= sizeof buf) {
    snprintf(c->msg, sizeof c->msg, "too long");
    return 0;
  }
  snprintf(buf, sizeof buf, "%s", arg);
  char *eq = strchr(buf, '=');
  if (eq == NULL) {
    snprintf(c->msg, sizeof c->msg, "expected section.key=value");
    return 0;
  }
  *eq = '\0';
  char *value = eq + 1;
  char *dot = strchr(buf, '.');
  if (dot == NULL) {
    snprintf(c->msg, sizeof c->msg, "expected section.key=value");
    return 0;
  }
  *dot = '\0';
  char section[512];
  const char *key = dot + 1;
  if (strcmp(buf, "table") == 0) {
    char *dot2 = strrchr(dot + 1, '.');
    if (dot2 == NULL) {
      snprintf(c->msg, sizeof c->msg, "expected table.NAME.key=value");
      return 0;
    }
    *dot2 = '\0';
    snprintf(section, sizeof section, "table %.200s", dot + 1);
    key = dot2 + 1;
  } else {
    snprintf(section, sizeof section, "%.200s", buf);
  }
  return on_key(c, section, key, value);
}

/* A relative uri, against data_dir. */
static int resolve_uri(mw_config_t *cfg, mw_table_config_t *t, mw_err_t *err) {
  if (t->uri[0] == '/' || strstr(t->uri, "://") != NULL) return 0;
  const char *u = t->uri;
  while (u[0] == '.' && u[1] == '/') u += 2; /* "./events.lance" -> "events.lance" */
  char joined[sizeof t->uri];
  int n = snprintf(joined, sizeof joined, "%s/%s", cfg->data_dir, u);
  if (n < 0 || (size_t)n >= sizeof joined)
    return mw_err_set(err, -ENAMETOOLONG, "[table %s] uri: data_dir/%s is longer than %zu bytes",
                      t->name, t->uri, sizeof joined - 1);
  memcpy(t->uri, joined, (size_t)n + 1);
  return 0;
}

/* metrics_listen's `tls` suffix, the client certificate mode, and the
 * files a tls listener needs. */
static int check_tls(mw_config_t *cfg, mw_err_t *err) {
  char *sp = strpbrk(cfg->metrics_listen, " \t");
  if (sp != NULL) {
    char *o = sp;
    while (isspace((unsigned char)*o)) o++;
    if (strcmp(o, "tls") != 0)
      return mw_err_set(err, -EINVAL, "[daemon] metrics_listen: after the address only tls, got '%s'", o);
    *sp = '\0';
    cfg->metrics_tls = true;
  }
  const char *cc = cfg->tls_client_cert;
  if (strcmp(cc, "none") != 0 && strcmp(cc, "optional") != 0 && strcmp(cc, "require") != 0)
    return mw_err_set(err, -EINVAL, "[daemon] tls_client_cert: expected none, optional or require, got '%s'", cc);
  if (strcmp(cc, "none") != 0 && cfg->tls_ca_file[0] == '\0')
    return mw_err_set(err, -EINVAL, "[daemon] tls_client_cert = %s needs tls_ca_file", cc);
  bool any = cfg->metrics_tls;
  for (size_t i = 0; i < cfg->n_listen; i++) any |= cfg->listen_tls[i];
  if (any && (cfg->tls_cert_file[0] == '\0' || cfg->tls_key_file[0] == '\0'))
    return mw_err_set(err, -EINVAL, "[daemon] a tls listener needs tls_cert_file and tls_key_file");
  return 0;
}

static int check_config(mw_config_t *cfg, mw_err_t *err) {
  assert(cfg->n_tables <= MW_CONFIG_MAX_TABLES);
  assert(cfg->n_listen <= MW_CONFIG_MAX_LISTEN);
  for (size_t i = 0; i < cfg->n_tables; i++) {
    mw_table_config_t *t = &cfg->tables[i];
    if (t->uri[0] == '\0')
      return mw_err_set(err, -EINVAL, "[table %s] uri: required", t->name);
    int rc = resolve_uri(cfg, t, err);
    if (rc < 0) return rc;
    if (t->create && (t->schema[0] == '\0' || t->primary_key[0] == '\0'))
      return mw_err_set(err, -EINVAL,
                        "[table %s] create = true needs schema and primary_key", t->name);
    if (t->durable_write == 1 && t->max_wal_flush_interval_ms == 0)
      return mw_err_set(err, -EINVAL,
                        "[table %s] durable_write needs max_wal_flush_interval_ms > 0", t->name);
  }
  if (cfg->default_table[0] && mw_config_table(cfg, cfg->default_table) == NULL)
    return mw_err_set(err, -EINVAL, "[daemon] default_table: no [table %s] section",
                      cfg->default_table);
  if (cfg->data_dir[0] == '\0') return mw_err_set(err, -EINVAL, "[daemon] data_dir: required");
  return check_tls(cfg, err);
}

/* One line of the file: a section header or a `key =` at its start. */
static void scan_spot(load_ctx_t *c, const char *l, int line, char *section, size_t cap) {
  assert(section != NULL);
  assert(cap > 0);
  if (c->n_spots >= MAX_SPOTS) return;
  size_t k = 0;
  if (*l == '[') {
    const char *e = strchr(l, ']');
    if (e == NULL) return;
    snprintf(section, cap, "%.*s", (int)(e - l - 1), l + 1);
  } else if (isalpha((unsigned char)*l)) {
    while (isalnum((unsigned char)l[k]) || l[k] == '_') k++;
  } else {
    return; /* a continuation, a comment or nothing */
  }
  spot_t *sp = &c->spots[c->n_spots++];
  snprintf(sp->section, sizeof sp->section, "%s", section);
  snprintf(sp->key, sizeof sp->key, "%.*s", (int)k, l);
  sp->line = line;
}

/* libinih (Debian build) splits lines longer than INI_MAX_LINE-1 characters
 * into pieces it then misparses; refuse them up front with the line number.
 * The same pass notes where each section and key is (scan_spot). */
static int check_line_lengths(FILE *f, const char *path, load_ctx_t *c, mw_err_t *err) {
  assert(f != NULL);
  assert(c->spots != NULL);
  char l[INI_MAX_LINE + 1], section[136] = "";
  int line = 0;
  while (fgets(l, sizeof l, f) != NULL) {
    line++;
    size_t len = strlen(l);
    if (len > 0 && l[len - 1] == '\n') l[--len] = '\0';
    else if (!feof(f) || len >= INI_MAX_LINE - 1)
      return mw_err_set(err, -EINVAL,
                        "%s:%d: line longer than %d characters; continue a long value on "
                        "indented lines", path, line, INI_MAX_LINE - 2);
    if (len >= INI_MAX_LINE - 1)
      return mw_err_set(err, -EINVAL,
                        "%s:%d: line longer than %d characters; continue a long value on "
                        "indented lines", path, line, INI_MAX_LINE - 2);
    scan_spot(c, l, line, section, sizeof section);
  }
  rewind(f);
  return 0;
}

/* Parse one source: the file (source 1), then the --set list (source 2). */
static int load_sources(mw_config_t *cfg, const char *name, FILE *f, const char *const *sets,
                        size_t n_sets, mw_err_t *err) {
  assert(cfg != NULL);
  assert(sets != NULL || n_sets == 0);
  load_ctx_t c = {.cfg = cfg, .err = err, .source = 1, .name = name};
  if (f != NULL) {
    c.spots = calloc(MAX_SPOTS, sizeof *c.spots);
    if (c.spots == NULL) return mw_err_set(err, -ENOMEM, "out of memory");
    int rc = check_line_lengths(f, name, &c, err);
    int line = rc < 0 ? 0 : ini_parse_file(f, on_key, &c);
    free(c.spots);
    c.spots = NULL;
    c.n_spots = 0;
    if (rc < 0) return rc;
    if (line != 0) {
      if (line < 0) return mw_err_set(err, -EIO, "%s: cannot read", name);
      if (c.msg[0] == '\0') snprintf(c.msg, sizeof c.msg, "syntax error (expected key = value)");
      return mw_err_set(err, -EINVAL, "%s:%d: %s", name, line, c.msg);
    }
  }
  if (n_sets > MW_CONFIG_MAX_SETS) return mw_err_set(err, -E2BIG, "more than %d --set", MW_CONFIG_MAX_SETS);
  c.source = 2;
  c.join_field = NULL;
  for (size_t i = 0; i < n_sets; i++) {
    c.msg[0] = '\0';
    if (!apply_set(&c, sets[i])) return mw_err_set(err, -EINVAL, "--set %s: %s", sets[i], c.msg);
  }
  return check_config(cfg, err);
}

int mw_config_load_stream(mw_config_t *cfg, const char *name, void *file, const char *const *sets,
                          size_t n_sets, mw_err_t *err) {
  assert(cfg != NULL);
  assert(name != NULL);
  mw_config_defaults(cfg);
  snprintf(cfg->path, sizeof cfg->path, "%s", name);
  return load_sources(cfg, name, file, sets, n_sets, err);
}

int mw_config_load(mw_config_t *cfg, const char *path, const char *const *sets, size_t n_sets,
                   mw_err_t *err) {
  assert(cfg != NULL);
  mw_config_defaults(cfg);
  if (path == NULL) return load_sources(cfg, "(defaults)", NULL, sets, n_sets, err);
  snprintf(cfg->path, sizeof cfg->path, "%s", path);
  FILE *f = fopen(path, "r");
  if (f == NULL) return mw_err_set(err, -errno, "%s: %s", path, strerror(errno));
  int rc = load_sources(cfg, path, f, sets, n_sets, err);
  fclose(f);
  return rc;
}

const mw_table_config_t *mw_config_table(const mw_config_t *cfg, const char *name) {
  assert(cfg != NULL);
  assert(name != NULL);
  for (size_t i = 0; i < cfg->n_tables; i++)
    if (strcmp(cfg->tables[i].name, name) == 0) return &cfg->tables[i];
  return NULL;
}

void mw_config_key_where(const mw_config_t *cfg, const mw_table_config_t *t, const char *key,
                         char *out, size_t n) {
  assert(cfg);
  assert(t);
  assert(key);
  assert(out);
  assert(n > 0);
  int line = 0;
  for (size_t i = 0; i < N_KEYS; i++)
    if (keys[i].scope == SC_TABLE && strcmp(keys[i].name, key) == 0) line = t->key_lines[table_slot(&keys[i])];
  const char *file = cfg->path[0] ? cfg->path : "(defaults)";
  if (line == MW_CONFIG_FROM_SET) snprintf(out, n, "--set table.%s.%s", t->name, key);
  else if (line > 0) snprintf(out, n, "%s:%d: [table %s] %s", file, line, t->name, key);
  else if (t->section_line > 0) snprintf(out, n, "%s:%d: [table %s] %s", file, t->section_line, t->name, key);
  else snprintf(out, n, "%s: [table %s] %s", file, t->name, key);
}

static void print_value(FILE *f, const cfg_key_t *k, const void *base) {
  assert(k >= keys);
  assert(k < keys + N_KEYS);
  const char *field = (const char *)base + k->off;
  switch (k->type) {
    case T_STR:
    case T_JOIN:
      /* never echo a secret into logs or terminals */
      if (strcmp(k->name, "auth_token") == 0 && field[0]) fprintf(f, "(set)");
      else fprintf(f, "%s", field);
      if (strcmp(k->name, "metrics_listen") == 0 && ((const mw_config_t *)base)->metrics_tls) fprintf(f, " tls");
      break;
    case T_INT: fprintf(f, "%" PRId64, *(const int64_t *)(const void *)field); break;
    case T_BOOL: fprintf(f, "%s", *(const bool *)(const void *)field ? "true" : "false"); break;
    case T_TRIBOOL: {
      int v = *(const int *)(const void *)field;
      fprintf(f, "%s", v < 0 ? "" : v ? "true" : "false");
      break;
    }
    case T_LEVEL: fprintf(f, "%s", mw_log_level_name(*(const int *)(const void *)field)); break;
    case T_IO: {
      fprintf(f, "%s", mw_storage_backend_label(*(const mw_storage_backend_t *)(const void *)field));
      break;
    }
    case T_WALC: fprintf(f, "%s", *(const mw_wal_compression_t *)(const void *)field ? "zstd" : "none"); break;
    case T_CLAIM: fprintf(f, "%s", *(const mw_claim_mode_t *)(const void *)field ? "eager" : "lazy"); break;
    case T_LISTEN: {
      const mw_config_t *cfg = base;
      for (size_t i = 0; i < cfg->n_listen; i++) {
        fprintf(f, "%s%s", i ? ", " : "", cfg->listen[i]);
        if (cfg->listen_replies[i] != MW_REPLIES_DEFAULT)
          fprintf(f, " replies=%s", replies_names[cfg->listen_replies[i]]);
        if (cfg->listen_tls[i]) fprintf(f, " tls");
        if (cfg->listen_plain_auth[i]) fprintf(f, " plaintext_auth");
      }
      break;
    }
    case T_REPLIES: fprintf(f, "%s", replies_names[*(const mw_replies_mode_t *)(const void *)field]); break;
  }
}

void mw_config_print(const mw_config_t *cfg, void *file) {
  assert(cfg != NULL);
  assert(file != NULL);
  FILE *f = file;
  for (int s = SC_DAEMON; s <= SC_STORAGE; s++) {
    fprintf(f, "[%s]\n", scope_names[s]);
    for (size_t i = 0; i < N_KEYS; i++) {
      if ((int)keys[i].scope != s) continue;
      fprintf(f, "%s = ", keys[i].name);
      print_value(f, &keys[i], cfg);
      fputc('\n', f);
    }
  }
  for (size_t t = 0; t < cfg->n_tables; t++) {
    fprintf(f, "[table %s]\n", cfg->tables[t].name);
    for (size_t i = 0; i < N_KEYS; i++) {
      if (keys[i].scope != SC_TABLE) continue;
      /* -1 = inherit the table's writer_config_defaults: print nothing */
      if (keys[i].type == T_INT && *(const int64_t *)(const void *)((const char *)&cfg->tables[t] + keys[i].off) < 0)
        continue;
      if (keys[i].type == T_TRIBOOL && *(const int *)(const void *)((const char *)&cfg->tables[t] + keys[i].off) < 0)
        continue;
      fprintf(f, "%s = ", keys[i].name);
      print_value(f, &keys[i], &cfg->tables[t]);
      fputc('\n', f);
    }
  }
}
