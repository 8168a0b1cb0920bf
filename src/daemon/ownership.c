/*
 * ownership.c — see ownership.h.
 *
 * Start-up work (node id, memory reads, owner record reads) is blocking, on
 * private loops (storage.h's mw_storage_sync_*): the scan runs on the
 * thread that loads the table (daemon/tables.c), before it serves anything;
 * only the hook (owner-record callbacks, peers' records prefetched) runs on
 * the loop.
 * Memory writes happen later, when a shard becomes ACTIVE, on the loop,
 * through the daemon's data_dir storage; each is one small put job.
 */
#include "daemon/ownership.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/log.h"
#include "daemon/tables.h"
#include "lance/route.h"

typedef struct job {
  mw_daemon_owner_t *o;
  mw_storage_req_t req;
  char key[MW_STORAGE_KEY_MAX_BYTES];
  char body[32];
} job_t;

static int held_key(const char *name, const uint8_t id[16], char *out, size_t cap) {
  char s[MW_UUID_STR_BYTES];
  mw_shard_uuid_format(id, s);
  int n = snprintf(out, cap, MW_DAEMON_HELD_PREFIX "%s/%s", name, s);
  if (n < 0 || (size_t)n >= cap || !mw_storage_key_valid(out)) return -EINVAL;
  return 0;
}

int mw_daemon_owner_open(mw_daemon_owner_t *o, const mw_config_t *cfg, mw_err_t *err) {
  assert(o != NULL);
  assert(cfg != NULL);
  memset(o, 0, sizeof *o);
  snprintf(o->data_dir, sizeof o->data_dir, "%s", cfg->data_dir);
  mw_daemon_storage_config(cfg, NULL, o->data_dir, &o->local_cfg);
  mw_storage_sync_t *ss = NULL;
  int rc = mw_storage_sync_open(&o->local_cfg, &ss, err);
  if (rc < 0) return rc;
  mw_buf_t b = MW_BUF_INIT;
  rc = mw_storage_sync_get(ss, "node_id", &b, err);
  if (rc == -ENOENT) { /* the first start with this data_dir: a new identity */
    uint8_t r[16];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
      rc = mw_err_set(err, -EIO, "cannot make a node id: getrandom failed");
    } else {
      char hex[33];
      for (int i = 0; i < 16; i++) snprintf(hex + 2 * i, 3, "%02x", r[i]);
      rc = mw_storage_sync_put(ss, "node_id", hex, 32, true, err);
      if (rc == -EEXIST) rc = 0; /* another start made it first: read theirs */
      if (rc == 0) rc = mw_storage_sync_get(ss, "node_id", &b, err);
    }
  }
  if (rc == 0 && (b.len < 8 || b.len >= sizeof o->self.node))
    rc = mw_err_set(err, -EBADMSG, "%s/node_id: not a node id (%zu bytes)", o->data_dir, b.len);
  if (rc == 0) {
    memcpy(o->self.node, b.data, b.len);
    o->self.node[b.len] = '\0';
    for (char *p = o->self.node; *p; p++)
      if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) rc = -EBADMSG;
    if (rc < 0) mw_err_set(err, rc, "%s/node_id: not lowercase hex", o->data_dir);
  }
  mw_buf_free(&b);
  mw_storage_sync_close(ss);
  if (rc == 0) mw_log_info("ownership: node id %s (%s/node_id)", o->self.node, o->data_dir);
  return rc;
}

/* ---- memory of the shards held here ---- */

static void on_remembered(mw_storage_req_t *req, int status) {
  job_t *j = req->data;
  assert(j->o->writes > 0);
  j->o->writes--;
  if (status < 0)
    mw_log_warn("ownership: cannot remember %s: %s", j->key, mw_storage_req_error(req));
  mw_storage_req_cleanup(req);
  free(j);
}

static void on_held(void *arg, const uint8_t id[16], uint64_t epoch) {
  mw_daemon_owner_table_t *ot = arg;
  mw_daemon_owner_t *o = ot->o;
  assert(o != NULL);
  assert(epoch > 0);
  if (o->local == NULL) return;
  job_t *j = calloc(1, sizeof *j);
  if (j == NULL) return;
  j->o = o;
  int n = snprintf(j->body, sizeof j->body, "%" PRIu64 "\n", epoch);
  mw_storage_req_init(&j->req);
  j->req.data = j;
  int rc = held_key(ot->name, id, j->key, sizeof j->key);
  if (rc == 0) rc = mw_storage_put(o->local, &j->req, j->key, j->body, (size_t)n, on_remembered);
  if (rc < 0) {
    free(j);
    return;
  }
  o->writes++;
}

/* The epoch remembered for (name, id), 0 when none. */
static uint64_t remembered(mw_storage_sync_t *ss, const char *name, const uint8_t id[16]) {
  char key[MW_STORAGE_KEY_MAX_BYTES];
  if (held_key(name, id, key, sizeof key) < 0) return 0;
  mw_buf_t b = MW_BUF_INIT;
  uint64_t e = 0;
  if (mw_storage_sync_get(ss, key, &b, NULL) == 0 && b.len > 0 && b.len < 24) {
    char num[24];
    memcpy(num, b.data, b.len);
    num[b.len] = '\0';
    e = strtoull(num, NULL, 10);
  }
  mw_buf_free(&b);
  return e;
}

/* ---- the takeover check ---- */

int mw_daemon_owner_scan(const mw_daemon_owner_t *o, const char *name, mw_table_t *t,
                         const mw_storage_config_t *sc, mw_err_t *err) {
  assert(o != NULL);
  assert(name != NULL);
  assert(t != NULL);
  assert(sc != NULL);
  assert(mw_table_shard_count(t) == 0); /* before any claim */
  uint8_t(*ids)[16] = calloc(MW_TABLE_MAX_SHARDS, 16);
  if (ids == NULL) return mw_err_set(err, -ENOMEM, "out of memory");
  size_t n = mw_table_spec_ids(t, true, ids, MW_TABLE_MAX_SHARDS);
  mw_storage_sync_t *local = NULL, *shared = NULL;
  int rc = mw_storage_sync_open(&o->local_cfg, &local, err);
  mw_storage_config_t c = *sc;
  c.fault = NULL;
  if (rc == 0) rc = mw_storage_sync_open(&c, &shared, err);
  for (size_t k = 0; rc == 0 && k < n; k++) {
    uint64_t mine = remembered(local, name, ids[k]);
    if (mine == 0) continue; /* never held here: claimed as configured */
    mw_owner_rec_t r;
    int q = mw_owner_read_sync(shared, ids[k], &r, NULL);
    if (q < 0 || strcmp(r.node, o->self.node) == 0 || r.epoch <= mine) continue;
    char s[MW_UUID_STR_BYTES];
    mw_shard_uuid_format(ids[k], s);
    int d = mw_table_disown(t, ids[k]);
    if (d < 0) {
      mw_log_warn("table %s: shard %s was taken over by memwald at %s (node %.12s, epoch %" PRIu64
                  ") while this daemon was down, but cannot be given up (%s): claiming it as configured",
                  name, s, r.address, r.node, r.epoch, mw_strerror(d));
      continue;
    }
    mw_log_notice("table %s: shard %s is FENCED here: memwald at %s (node %.12s) took it over at epoch %"
                  PRIu64 " while this daemon was down (it last held epoch %" PRIu64 "); not claiming "
                  "it back — `memwalctl claim %s %s` would", name, s, r.address, r.node, r.epoch, mine,
                  name, s);
  }
  mw_storage_sync_close(shared);
  mw_storage_sync_close(local);
  free(ids);
  return rc;
}

int mw_daemon_owner_hook(mw_daemon_owner_t *o, size_t i, const char *name, mw_table_t *t) {
  assert(o != NULL);
  assert(i < MW_CONFIG_MAX_TABLES);
  assert(t != NULL);
  assert(mw_table_storage(t) != NULL); /* started: its owner records live on the loop */
  mw_daemon_owner_table_t *ot = &o->tables[i];
  ot->o = o;
  snprintf(ot->name, sizeof ot->name, "%s", name);
  mw_owners_t *owners = mw_table_owners(t);
  owners->on_held = on_held;
  owners->on_held_arg = ot;
  /* peers' records of the shards we do not own, for not_owner replies */
  if (mw_table_sharding(t) != MW_SHARDING_BUCKET) return 0;
  uint8_t(*ids)[16] = calloc(MW_OWNERS_MAX_FETCHES, 16);
  if (ids == NULL) return -ENOMEM;
  size_t m = mw_table_spec_ids(t, false, ids, MW_OWNERS_MAX_FETCHES);
  mw_owners_prefetch(owners, (const uint8_t(*)[16])ids, m);
  free(ids);
  return 0;
}

int mw_daemon_owner_check(mw_daemon_owner_t *o, size_t i, const char *name, mw_table_t *t,
                          const mw_storage_config_t *sc, mw_err_t *err) {
  assert(o != NULL);
  assert(t != NULL);
  assert(sc != NULL);
  int rc = mw_daemon_owner_scan(o, name, t, sc, err);
  if (rc == 0) rc = mw_daemon_owner_hook(o, i, name, t);
  return rc;
}

void mw_daemon_owner_serve(mw_daemon_owner_t *o, mw_storage_t *local, const char *address) {
  assert(o != NULL);
  assert(address != NULL);
  o->local = local;
  snprintf(o->self.address, sizeof o->self.address, "%s", address);
}

void mw_daemon_owner_address(const char *listen, int port, char *out, size_t cap) {
  assert(listen != NULL);
  assert(out != NULL);
  assert(cap > 0);
  char host[256];
  snprintf(host, sizeof host, "%s", listen);
  char *colon = strrchr(host, ':');
  if (colon != NULL) *colon = '\0';
  if (host[0] == '[') { /* [v6] */
    memmove(host, host + 1, strlen(host));
    char *rb = strchr(host, ']');
    if (rb) *rb = '\0';
  }
  if (host[0] == '\0' || strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0) {
    if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
  }
  snprintf(out, cap, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
}
