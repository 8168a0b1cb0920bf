/*
 * owners.c — see owners.h.
 *
 * Design: records are tiny JSON objects, so one request per record, each
 * in its own heap job (the storage borrows the bytes until its callback).
 * The cache is an unsorted array of at most MW_OWNERS_MAX_CACHED entries
 * (shards of one table a daemon does not own); a lookup is one get. Jobs
 * hold no pointer to the table beyond `o`, which the storage outlives:
 * mw_storage_close drains every accepted request before the table is
 * freed, so a callback never sees a freed mw_owners_t.
 */
#include "shard/owners.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "common/log.h"
#include "lance/route.h"

typedef struct job {
  mw_owners_t *o;
  mw_storage_req_t req;
  uint8_t id[16];
  uint64_t epoch;
  char key[MW_STORAGE_KEY_MAX_BYTES];
  char body[MW_OWNER_RECORD_BYTES];
} job_t;

void mw_owner_key(const uint8_t id[16], char *out, size_t cap) {
  char s[MW_UUID_STR_BYTES];
  mw_shard_uuid_format(id, s);
  int n = snprintf(out, cap, MW_OWNERS_PREFIX "%s.json", s);
  assert(n > 0);
  assert((size_t)n < cap);
}

int mw_owner_encode(const mw_owner_self_t *self, uint64_t epoch, char *out, size_t cap) {
  assert(self != NULL);
  assert(out != NULL);
  char host[64] = "";
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  for (char *p = host; *p; p++)
    if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20) *p = '_';
  struct timeval tv;
  gettimeofday(&tv, NULL);
  uint64_t ms = (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
  int n = snprintf(out, cap,
                   "{\"node\":\"%s\",\"address\":\"%s\",\"epoch\":%" PRIu64 ",\"pid\":%d,"
                   "\"host\":\"%s\",\"at_ms\":%" PRIu64 "}\n",
                   self->node, self->address, epoch, (int)getpid(), host, ms);
  if (n < 0 || (size_t)n >= cap) return -ENAMETOOLONG;
  return n;
}

/* lance/owners_json.h's parse, into the cache's record. */
int mw_owner_parse(const char *json, size_t n, mw_owner_rec_t *out) {
  assert(json != NULL);
  assert(out != NULL);
  mw_owner_json_t j;
  int rc = mw_owner_json_parse(json, n, &j, NULL);
  if (rc < 0) return rc;
  memcpy(out->node, j.node, sizeof out->node);
  memcpy(out->address, j.address, sizeof out->address);
  out->epoch = j.epoch;
  out->known = true;
  return 0;
}

int mw_owner_read_sync(mw_storage_sync_t *ss, const uint8_t id[16], mw_owner_rec_t *out,
                       mw_err_t *err) {
  assert(ss != NULL);
  assert(id != NULL);
  assert(out != NULL);
  char key[MW_STORAGE_KEY_MAX_BYTES];
  mw_owner_key(id, key, sizeof key);
  memset(out, 0, sizeof *out);
  memcpy(out->id, id, 16);
  mw_buf_t b = MW_BUF_INIT;
  uint64_t size = 0;
  int rc = mw_storage_sync_head(ss, key, &size, err);
  if (rc == 0 && size > MW_OWNER_RECORD_BYTES) rc = -EBADMSG;
  if (rc == 0) rc = mw_storage_sync_get(ss, key, &b, err);
  if (rc == 0) rc = mw_owner_parse((const char *)b.data, b.len, out);
  mw_buf_free(&b);
  return rc;
}

void mw_owners_init(mw_owners_t *o, uv_loop_t *loop, mw_storage_t *st, const mw_owner_self_t *self) {
  assert(o != NULL);
  assert(loop != NULL);
  assert(st != NULL);
  memset(o, 0, sizeof *o);
  o->loop = loop;
  o->st = st;
  o->self = self;
}

void mw_owners_free(mw_owners_t *o) {
  assert(o != NULL);
  assert(o->fetches == 0);
  assert(o->writes == 0);
  free(o->recs);
  o->recs = NULL;
  o->n = o->cap = 0;
}

static mw_owner_rec_t *find(mw_owners_t *o, const uint8_t id[16], bool create) {
  for (size_t i = 0; i < o->n; i++)
    if (memcmp(o->recs[i].id, id, 16) == 0) return &o->recs[i];
  if (!create || o->n >= MW_OWNERS_MAX_CACHED) return NULL;
  if (o->n == o->cap) {
    size_t cap = o->cap ? o->cap * 2 : 8;
    mw_owner_rec_t *p = realloc(o->recs, cap * sizeof *p);
    if (p == NULL) return NULL;
    o->recs = p;
    o->cap = cap;
  }
  mw_owner_rec_t *r = &o->recs[o->n++];
  memset(r, 0, sizeof *r);
  memcpy(r->id, id, 16);
  return r;
}

/* ---- our own records ---- */

static void on_written(mw_storage_req_t *req, int status) {
  job_t *j = req->data;
  mw_owners_t *o = j->o;
  assert(o->writes > 0);
  o->writes--;
  if (status < 0)
    mw_log_warn("owners: cannot write the owner record %s (a hint only): %s", j->key,
                mw_storage_req_error(req));
  else if (o->on_held != NULL)
    o->on_held(o->on_held_arg, j->id, j->epoch);
  mw_storage_req_cleanup(req);
  free(j);
}

void mw_owners_record(mw_owners_t *o, const uint8_t id[16], uint64_t epoch) {
  assert(o != NULL);
  assert(id != NULL);
  if (o->self == NULL || o->self->node[0] == '\0') return;
  mw_owner_rec_t *r = find(o, id, false);
  if (r != NULL) r->known = false; /* ours now: not a peer's any more */
  job_t *j = calloc(1, sizeof *j);
  if (j == NULL) return;
  j->o = o;
  memcpy(j->id, id, 16);
  j->epoch = epoch;
  mw_owner_key(id, j->key, sizeof j->key);
  int n = mw_owner_encode(o->self, epoch, j->body, sizeof j->body);
  mw_storage_req_init(&j->req);
  j->req.data = j;
  int rc = n < 0 ? n : mw_storage_put(o->st, &j->req, j->key, j->body, (size_t)n, on_written);
  if (rc < 0) {
    mw_log_warn("owners: cannot write the owner record %s: %s", j->key, mw_strerror(rc));
    free(j);
    return;
  }
  o->writes++;
}

/* ---- peers' records ---- */

static void on_fetched(mw_storage_req_t *req, int status) {
  job_t *j = req->data;
  mw_owners_t *o = j->o;
  assert(o->fetches > 0);
  o->fetches--;
  mw_owner_rec_t *r = find(o, j->id, false);
  if (r != NULL) {
    r->fetching = false;
    r->fetched_ms = uv_now(o->loop);
    mw_owner_rec_t got = *r;
    if (status == 0 && mw_owner_parse((const char *)req->buf.data, req->buf.len, &got) == 0) *r = got;
    else if (status == -ENOENT) r->known = false;
    r->fetching = false;
  }
  mw_storage_req_cleanup(req);
  free(j);
}

static void fetch(mw_owners_t *o, mw_owner_rec_t *r) {
  if (r->fetching || o->fetches >= MW_OWNERS_MAX_FETCHES) return;
  job_t *j = calloc(1, sizeof *j);
  if (j == NULL) return;
  j->o = o;
  memcpy(j->id, r->id, 16);
  mw_owner_key(r->id, j->key, sizeof j->key);
  mw_storage_req_init(&j->req);
  j->req.data = j;
  if (mw_storage_get(o->st, &j->req, j->key, 0, MW_OWNER_RECORD_BYTES, on_fetched) < 0) {
    free(j);
    return;
  }
  r->fetching = true;
  o->fetches++;
}

size_t mw_owners_describe(mw_owners_t *o, const uint8_t id[16], char *out, size_t cap) {
  assert(o != NULL);
  assert(out != NULL);
  assert(cap > 0);
  out[0] = '\0';
  mw_owner_rec_t *r = find(o, id, true);
  if (r == NULL) return 0;
  if (r->fetched_ms == 0 || uv_now(o->loop) - r->fetched_ms >= MW_OWNERS_REFRESH_MS) fetch(o, r);
  if (!r->known) return 0;
  int n = snprintf(out, cap, "held by memwald at %s (node %.12s, epoch %" PRIu64 ")", r->address,
                   r->node, r->epoch);
  return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

void mw_owners_prefetch(mw_owners_t *o, const uint8_t (*ids)[16], size_t n) {
  assert(o != NULL);
  assert(ids != NULL || n == 0);
  for (size_t i = 0; i < n && o->fetches < MW_OWNERS_MAX_FETCHES; i++) {
    mw_owner_rec_t *r = find(o, ids[i], true);
    if (r != NULL) fetch(o, r);
  }
}
