/*
 * frontend_harness.c — the producers' server (src/net/server.h) over a fake
 * in-memory engine, for socket tests (test_frontend.py).
 *
 *   frontend_harness [--listen ADDR]... [--token T] [--max-connections N]
 *                    [--max-line-bytes N] [--max-unacked N] [--max-reply N]
 *                    [--idle-ms N] [--default-table T] [--admin PATH]
 *                    [--metrics-listen ADDR] [--replies all|errors|none]
 *                    [--drain-ms N] [--gather-ms N (write_gather_ms; default 10)]
 *
 * Prints "READY <port of listener 0> [<port of listener 1> ...]" once
 * listening; on SIGTERM/SIGINT stops and prints "ROWS <table>=<acked rows>
 * ...", "WRITES <table>=<submit calls taken> ..." then "BYE". RLIMIT_NOFILE is raised to its hard limit.
 *
 * Fake tables (schema id:int64 not null PK, name:string, v:double,
 * vec:fixed_size_list<float32,8>, then _tombstone) and how they complete:
 *   events, other   acknowledged on the next loop turn
 *   slow            acknowledged after 300 ms
 *   stuck           acknowledged after 5 s; each submission is logged
 *                   ("harness: submitted N rows to stuck") so a test knows
 *                   the rows are in flight
 *   fenced          -ESTALE  "shard ...: a peer holds epoch 9"
 *   sealed          -EROFS   "shard ... is sealed"
 *   notmine         -EXDEV   "row 0 belongs to shard bucket-3, not owned"
 *   busy            refused at submit with -EAGAIN
 *   broken          -EIO
 *   partial         -EROFS with the first half of the rows written (a group
 *                   over two shards, one sealed), at once
 * SYNC on any table completes on the next loop turn.
 *
 * With --admin PATH the admin socket serves a fake engine: three shards
 * (events bucket-0 ACTIVE, events bucket-1 SEALED, other unsharded) whose
 * status, seal/unseal/drop/claim/release/drop-table change that state, and a
 * flush that replies 50 ms later; --metrics-listen adds HTTP /metrics (the
 * READY line then ends with " metrics=<port>").
 */
#include <errno.h>
#include <stdbool.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <uv.h>

#include "common/metrics.h"
#include "lance/schema_text.h"
#include "net/server.h"
#include "net/admin.h"
#include "net/http_metrics.h"

#define N_TABLES 10
static const char *const TABLES[N_TABLES] = {"events",  "other", "slow",   "fenced",  "sealed",
                                             "notmine", "busy",  "broken", "partial", "stuck"};

typedef struct fake {
  mw_schema_t schema;
  uint64_t rows[N_TABLES];
  uint64_t writes[N_TABLES]; /* submit calls taken */
  uv_loop_t *loop;
} fake_t;

static fake_t F;

typedef struct job {
  uv_timer_t timer;
  mw_fe_write_cb done;
  mw_fe_done_cb sync_done;
  void *arg;
  int status;
  const char *reason;
  size_t table;
  int64_t rows;
  int64_t written;
} job_t;

static void *table_find(void *data, const char *name, size_t len, const mw_schema_t **schema) {
  fake_t *f = data;
  for (size_t i = 0; i < N_TABLES; i++)
    if (strlen(TABLES[i]) == len && memcmp(TABLES[i], name, len) == 0) {
      *schema = &f->schema;
      return (void *)(TABLES + i);
    }
  return NULL;
}

static void job_closed(uv_handle_t *h) { free(h->data); }

static void job_fire(uv_timer_t *t) {
  job_t *j = t->data;
  if (j->status == 0) F.rows[j->table] += (uint64_t)j->rows;
  else F.rows[j->table] += (uint64_t)j->written;
  if (j->sync_done) j->sync_done(j->arg, j->status, j->reason);
  else j->done(j->arg, j->status, (uint32_t)j->written, j->reason);
  uv_close((uv_handle_t *)&j->timer, job_closed);
}

static job_t *later(size_t table, int64_t rows, int status, const char *reason, uint64_t ms,
                    void *arg) {
  job_t *j = calloc(1, sizeof *j);
  if (!j) return NULL;
  j->arg = arg;
  j->status = status;
  j->reason = reason;
  j->table = table;
  j->rows = rows;
  uv_timer_init(F.loop, &j->timer);
  j->timer.data = j;
  uv_timer_start(&j->timer, job_fire, ms, 0);
  return j;
}

static int submit(void *data, void *table, mw_batch_t *batch, mw_fe_write_cb done, void *arg,
                  mw_err_t *err) {
  (void)data;
  size_t t = (size_t)((const char *const *)table - TABLES);
  if (mw_batch_validate(batch) < 0) return mw_err_set(err, -EINVAL, "invalid batch");
  const char *name = TABLES[t];
  if (strcmp(name, "busy") == 0) return mw_err_set(err, -EAGAIN, "shard unsharded: queue full");
  int st = 0;
  const char *why = NULL;
  uint64_t ms = 0;
  if (strcmp(name, "slow") == 0) ms = 300;
  else if (strcmp(name, "stuck") == 0) {
    ms = 5000;
    fprintf(stderr, "harness: submitted %lld rows to stuck\n", (long long)batch->n_rows);
  }
  else if (strcmp(name, "fenced") == 0) st = -ESTALE, why = "shard aa48498d: a peer holds epoch 9";
  else if (strcmp(name, "sealed") == 0) st = -EROFS, why = "shard aa48498d is sealed";
  else if (strcmp(name, "notmine") == 0)
    st = -EXDEV, why = "row 0 belongs to shard bucket-3, which this daemon does not own";
  else if (strcmp(name, "broken") == 0) st = -EIO, why = "WAL put failed 3 times";
  else if (strcmp(name, "partial") == 0)
    st = -EROFS, why = "bucket-1 (some rows) not written: shard 9c5e is sealed; written: bucket-0 (the others)";
  int64_t rows = batch->n_rows;
  mw_batch_free(batch); /* taken, as mw_table_write does */
  job_t *j = later(t, rows, st, why, ms, arg);
  if (!j) return mw_err_set(err, -ENOMEM, "out of memory");
  j->done = done;
  F.writes[t]++;
  if (strcmp(name, "partial") == 0) j->written = rows / 2;
  return 0;
}

static int sync_barrier(void *data, mw_fe_done_cb done, void *arg, mw_err_t *err) {
  (void)data;
  job_t *j = later(0, 0, 0, NULL, 0, arg);
  if (!j) return mw_err_set(err, -ENOMEM, "out of memory");
  j->sync_done = done;
  return 0;
}

static mw_server_t *SRV;
static uv_signal_t SIGS[2];
static mw_admin_t *ADMIN;
static mw_http_metrics_t *HTTP;

static void on_stopped(void *arg) {
  (void)arg;
  printf("ROWS");
  for (size_t i = 0; i < N_TABLES; i++) printf(" %s=%llu", TABLES[i], (unsigned long long)F.rows[i]);
  printf("\nWRITES");
  for (size_t i = 0; i < N_TABLES; i++) printf(" %s=%llu", TABLES[i], (unsigned long long)F.writes[i]);
  printf("\nBYE\n");
  fflush(stdout);
  uv_close((uv_handle_t *)&SIGS[0], NULL);
  uv_close((uv_handle_t *)&SIGS[1], NULL);
}

static void on_signal(uv_signal_t *h, int sig) {
  (void)h;
  (void)sig;
  if (!SRV) return;
  mw_server_t *s = SRV;
  SRV = NULL;
  if (ADMIN) mw_admin_stop(ADMIN);
  if (HTTP) mw_http_metrics_stop(HTTP);
  mw_server_stop(s, on_stopped, NULL);
}

/* ------------------------------------------------------------ fake admin */

typedef struct fshard {
  const char *table, *key;
  const char *state; /* ACTIVE, CLOSED, FENCED */
  bool sealed, dropped;
  uint64_t epoch, version, wal, replay_after, mt_rows, mt_bytes, frozen, sstables;
} fshard_t;

static fshard_t SHARDS[] = {
    {"events", "bucket-0", "ACTIVE", false, false, 2, 5, 17, 12, 100, 40960, 1, 3},
    {"events", "bucket-1", "ACTIVE", true, false, 1, 3, 4, 4, 0, 0, 0, 1},
    {"other", "unsharded", "ACTIVE", false, false, 7, 9, 30, 28, 2, 512, 0, 4},
};
#define N_SHARDS (sizeof SHARDS / sizeof SHARDS[0])
static uint64_t START_MS;

static fshard_t *fshard(const char *t, const char *k) {
  for (size_t i = 0; i < N_SHARDS; i++)
    if (!SHARDS[i].dropped && strcmp(SHARDS[i].table, t) == 0 && strcmp(SHARDS[i].key, k) == 0)
      return &SHARDS[i];
  return NULL;
}

static bool ftable(const char *t) {
  for (size_t i = 0; i < N_TABLES; i++)
    if (strcmp(TABLES[i], t) == 0) return true;
  return false;
}

static void status_json(mw_buf_t *b) {
  char tmp[512];
  snprintf(tmp, sizeof tmp, "{\"version\":\"test\",\"uptime_s\":%llu,\"connections\":%zu,\"tables\":[",
           (unsigned long long)((uv_now(F.loop) - START_MS) / 1000), SRV ? mw_server_connections(SRV) : 0);
  mw_buf_append(b, tmp, strlen(tmp));
  const char *last = NULL;
  for (size_t i = 0; i < N_SHARDS; i++) {
    fshard_t *s = &SHARDS[i];
    if (s->dropped) continue;
    if (!last || strcmp(last, s->table) != 0) {
      if (last) mw_buf_append(b, "]},", 3);
      snprintf(tmp, sizeof tmp, "{\"name\":\"%s\",\"path\":\"/data/%s.lance\",\"shards\":[", s->table, s->table);
      mw_buf_append(b, tmp, strlen(tmp));
    } else {
      mw_buf_append(b, ",", 1);
    }
    last = s->table;
    snprintf(tmp, sizeof tmp,
             "{\"id\":\"%08zx-0000-5000-8000-000000000000\",\"key\":\"%s\",\"state\":\"%s\",\"status\":\"%s\","
             "\"epoch\":%llu,\"manifest_version\":%llu,\"wal_position\":%llu,\"replay_after\":%llu,"
             "\"memtable_rows\":%llu,\"memtable_bytes\":%llu,\"frozen\":%llu,\"sstables\":%llu}",
             i, s->key, s->state, s->sealed ? "SEALED" : "ACTIVE", (unsigned long long)s->epoch,
             (unsigned long long)s->version, (unsigned long long)s->wal, (unsigned long long)s->replay_after,
             (unsigned long long)s->mt_rows, (unsigned long long)s->mt_bytes, (unsigned long long)s->frozen,
             (unsigned long long)s->sstables);
    mw_buf_append(b, tmp, strlen(tmp));
  }
  if (last) mw_buf_append(b, "]}", 2);
  mw_buf_append(b, "]}", 3); /* with the NUL */
}

typedef struct flush_job {
  uv_timer_t t;
  mw_admin_req_t *r;
  int n;
} flush_job_t;

static void flush_closed(uv_handle_t *h) { free(h->data); }
static void flush_fire(uv_timer_t *t) {
  flush_job_t *j = t->data;
  char out[64];
  snprintf(out, sizeof out, "{\"flushed\":%d}", j->n);
  mw_admin_reply(j->r, 0, out);
  uv_close((uv_handle_t *)&j->t, flush_closed);
}

static void admin_command(void *data, int argc, const char *const *argv, mw_admin_req_t *r) {
  (void)data;
  char msg[512];
  const char *cmd = argv[0];
  if (strcmp(cmd, "status") == 0) {
    mw_buf_t b = MW_BUF_INIT;
    status_json(&b);
    mw_admin_reply(r, 0, (const char *)b.data);
    mw_buf_free(&b);
    return;
  }
  if (argc >= 2 && !ftable(argv[1])) {
    snprintf(msg, sizeof msg, "unknown table \"%s\"", argv[1]);
    mw_admin_reply(r, -ENOENT, msg);
    return;
  }
  if (strcmp(cmd, "flush") == 0) { /* completes later, like a real flush */
    flush_job_t *j = calloc(1, sizeof *j);
    j->r = r;
    for (size_t i = 0; i < N_SHARDS; i++)
      if (!SHARDS[i].dropped && (argc < 2 || strcmp(SHARDS[i].table, argv[1]) == 0) &&
          (argc < 3 || strcmp(SHARDS[i].key, argv[2]) == 0)) {
        j->n++;
        SHARDS[i].sstables += SHARDS[i].mt_rows ? 1 : 0;
        SHARDS[i].mt_rows = SHARDS[i].mt_bytes = 0;
      }
    uv_timer_init(F.loop, &j->t);
    j->t.data = j;
    uv_timer_start(&j->t, flush_fire, 50, 0);
    return;
  }
  if (strcmp(cmd, "drop-table") == 0) {
    for (size_t i = 0; i < N_SHARDS; i++)
      if (!SHARDS[i].dropped && strcmp(SHARDS[i].table, argv[1]) == 0 && !SHARDS[i].sealed) {
        snprintf(msg, sizeof msg, "table %s: shard %s is not sealed", argv[1], SHARDS[i].key);
        mw_admin_reply(r, -EBUSY, msg);
        return;
      }
    for (size_t i = 0; i < N_SHARDS; i++)
      if (strcmp(SHARDS[i].table, argv[1]) == 0) SHARDS[i].dropped = true;
    mw_admin_reply(r, 0, "{\"dropped\":true}");
    return;
  }
  fshard_t *s = fshard(argv[1], argv[2]);
  if (!s) {
    snprintf(msg, sizeof msg, "table %s: no shard %s here", argv[1], argv[2]);
    mw_admin_reply(r, -ENOENT, msg);
    return;
  }
  if (strcmp(cmd, "seal") == 0) s->sealed = true;
  else if (strcmp(cmd, "unseal") == 0) s->sealed = false;
  else if (strcmp(cmd, "claim") == 0) s->epoch++, s->state = "ACTIVE";
  else if (strcmp(cmd, "release") == 0) s->state = "CLOSED";
  else if (strcmp(cmd, "drop") == 0) {
    if (!s->sealed) {
      snprintf(msg, sizeof msg, "shard %s is not sealed; seal it first", s->key);
      mw_admin_reply(r, -EBUSY, msg);
      return;
    }
    s->dropped = true;
  }
  snprintf(msg, sizeof msg, "{\"table\":\"%s\",\"shard\":\"%s\",\"epoch\":%llu}", s->table, s->key,
           (unsigned long long)s->epoch);
  mw_admin_reply(r, 0, msg);
}

static int harness_admin_start(const char *path, const char *metrics_listen, mw_err_t *err) {
  START_MS = uv_now(F.loop);
  mw_admin_engine_t ae = {.data = NULL, .command = admin_command};
  int rc = 0;
  if (path) rc = mw_admin_start(F.loop, path, &ae, mw_metrics_default(), &ADMIN, err);
  if (rc == 0 && metrics_listen) rc = mw_http_metrics_start(F.loop, metrics_listen, mw_metrics_default(), NULL, &HTTP, err);
  return rc;
}

int main(int argc, char **argv) {
  const char *listen[MW_SERVER_MAX_LISTEN];
  mw_server_opts_t o = {.listen = listen, .write_gather_ms = 10}; /* the daemon's default */
  const char *admin_path = NULL, *metrics_listen = NULL;
  static const struct option lo[] = {
      {"listen", 1, 0, 'l'},      {"token", 1, 0, 't'},        {"max-connections", 1, 0, 'c'},
      {"max-line-bytes", 1, 0, 'L'}, {"max-unacked", 1, 0, 'u'}, {"max-reply", 1, 0, 'r'},
      {"idle-ms", 1, 0, 'i'},     {"default-table", 1, 0, 'd'}, {"admin", 1, 0, 'a'},
      {"metrics-listen", 1, 0, 'm'}, {"replies", 1, 0, 'R'}, {"drain-ms", 1, 0, 'D'},
      {"gather-ms", 1, 0, 'g'},   {0, 0, 0, 0}};
  int ch;
  while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
    switch (ch) {
    case 'l':
      if (o.n_listen < MW_SERVER_MAX_LISTEN) listen[o.n_listen++] = optarg;
      break;
    case 't': o.auth_token = optarg; break;
    case 'c': o.max_connections = strtoull(optarg, NULL, 10); break;
    case 'L': o.max_line_bytes = strtoull(optarg, NULL, 10); break;
    case 'u': o.max_unacked_bytes_per_connection = strtoull(optarg, NULL, 10); break;
    case 'r': o.max_reply_bytes_per_connection = strtoull(optarg, NULL, 10); break;
    case 'i': o.idle_timeout_ms = strtoull(optarg, NULL, 10); break;
    case 'd': o.default_table = optarg; break;
    case 'a': admin_path = optarg; break;
    case 'm': metrics_listen = optarg; break;
    case 'D': o.drain_timeout_ms = strtoull(optarg, NULL, 10); break;
    case 'g': o.write_gather_ms = strtoull(optarg, NULL, 10); break;
    case 'R':
      o.replies = strcmp(optarg, "none") == 0     ? MW_LP_REPLIES_NONE
                  : strcmp(optarg, "errors") == 0 ? MW_LP_REPLIES_ERRORS
                                                  : MW_LP_REPLIES_ALL;
      break;
    default: return 2;
    }
  }
  if (o.n_listen == 0) listen[o.n_listen++] = "127.0.0.1:0";
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  signal(SIGPIPE, SIG_IGN);
  mw_err_t err = {0};
  mw_schema_init(&F.schema);
  if (mw_schema_text_parse("id:int64 not null, name:string, v:double, vec:fixed_size_list<float32,8>",
                           &F.schema, &err) < 0 ||
      mw_schema_pk_text_apply(&F.schema, "id", &err) < 0 || mw_schema_tombstone_append(&F.schema) < 0) {
    fprintf(stderr, "schema: %s\n", err.msg);
    return 1;
  }
  mw_schema_ids_assign(&F.schema);
  F.loop = uv_default_loop();
  o.metrics = mw_metrics_default();
  mw_fe_engine_t eng = {.data = &F, .table_find = table_find, .submit = submit, .sync = sync_barrier};
  if (mw_server_start(F.loop, &o, &eng, &SRV, &err) < 0) {
    fprintf(stderr, "server: %s\n", err.msg);
    return 1;
  }
  if (harness_admin_start(admin_path, metrics_listen, &err) < 0) {
    fprintf(stderr, "admin: %s\n", err.msg);
    return 1;
  }
  uv_signal_init(F.loop, &SIGS[0]);
  uv_signal_init(F.loop, &SIGS[1]);
  uv_signal_start(&SIGS[0], on_signal, SIGTERM);
  uv_signal_start(&SIGS[1], on_signal, SIGINT);
  printf("READY");
  for (size_t i = 0; i < o.n_listen; i++) printf(" %d", mw_server_port(SRV, i));
  if (HTTP) printf(" metrics=%d", mw_http_metrics_port(HTTP));
  printf("\n");
  fflush(stdout);
  uv_run(F.loop, UV_RUN_DEFAULT);
  uv_loop_close(F.loop);
  mw_schema_free(&F.schema);
  return 0;
}
