/*
 * gc_base.c — see gc_base.h.
 *
 * A run, as a chain of waves (each at most MW_GC_BASE_BATCH requests, the
 * next wave once the last one has answered):
 *
 *   LIST  _versions/            -> the versions (V2 names only)
 *   LIST  _refs/tags/, GET each -> the tagged versions (kept)
 *   GET   manifests not cached  -> per version: timestamp, referenced keys
 *   plan                        -> old versions, victim keys
 *   HEAD  victims (a wave)      -> sizes; absent ones are done already
 *   DELETE those present        (one delete_many a wave: S3 DeleteObjects)
 *   DELETE old manifests, oldest first (one delete_many a wave)
 *
 * A sample of what one old version contributes (keys relative to the table):
 *   _versions/18446744073709551549.manifest          (version 66)
 *   data/0101...e3.lance  + _memwald/keys/0101...e3.keys
 *   _deletions/12-65-8812...3.bin
 *   _transactions/65-5b1f...c2.txn
 */
#include "shard/gc_base.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "lance/base_files.h"
#include "lance/dataset_manifest.h"

#define KEY_BYTES 512

enum { B_IDLE = 0, B_LIST, B_TAGS, B_TAG_GET, B_FETCH, B_HEAD, B_DELETE, B_MANIFESTS };

typedef struct bver {
  uint64_t version;
  int64_t ts_ms;          /* -1: no timestamp (never old) */
  uint64_t bytes;         /* the manifest file */
  char *names;            /* NUL-separated referenced keys */
  char **keys;
  size_t n_keys;
  bool fetched;
} bver_t;

/* A set of borrowed strings (open addressing, FNV-1a). */
typedef struct sset {
  const char **slots;
  size_t cap, n;
} sset_t;

typedef struct bio {
  mw_gc_base_t *b;
  mw_storage_req_t req;
  size_t idx;             /* version index or victim index */
  int status;
  bool present;
} bio_t;

struct mw_gc_base {
  mw_storage_t *st;
  char *name;
  int phase;
  mw_gc_base_cb cb;
  void *cb_arg;
  uint64_t retention_ms;
  int64_t now_ms;
  mw_storage_req_t list_req;
  bio_t ios[MW_GC_BASE_BATCH];
  size_t n_ios, pending;
  /* a wave's deletions as one delete_many: keys of ios[del_io[k]] */
  mw_storage_req_t del_req;
  const char *del_keys[MW_GC_BASE_BATCH];
  int del_st[MW_GC_BASE_BATCH];
  size_t del_io[MW_GC_BASE_BATCH];
  size_t n_del;
  char mkeys[MW_GC_BASE_BATCH][KEY_BYTES]; /* manifest keys of a wave */
  bver_t **vers;          /* sorted by version, one per listed manifest */
  size_t n_vers;
  size_t cursor;
  char **tag_keys;
  size_t n_tags, tag_next;
  uint64_t tagged[MW_GC_BASE_MAX_TAGS];
  size_t n_tagged;
  size_t *old;            /* indexes into vers */
  size_t n_old;
  char **victims;         /* owned copies */
  size_t n_victims;
  uint64_t run_files, run_bytes, run_versions;
  mw_gc_base_stats_t stats;
};

/* ------------------------------------------------------------------ sets */

static uint64_t fnv(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
  return h;
}

static int sset_init(sset_t *s, size_t expect) {
  size_t cap = 64;
  while (cap < expect * 2) cap <<= 1;
  s->slots = calloc(cap, sizeof *s->slots);
  s->cap = cap;
  s->n = 0;
  return s->slots ? 0 : -ENOMEM;
}

static void sset_free(sset_t *s) {
  free(s->slots);
  memset(s, 0, sizeof *s);
}

/* 1 added, 0 already there. The table never fills: cap >= 2 * expect. */
static int sset_add(sset_t *s, const char *k) {
  assert(s->n < s->cap);
  size_t i = (size_t)fnv(k) & (s->cap - 1);
  while (s->slots[i] != NULL) {
    if (strcmp(s->slots[i], k) == 0) return 0;
    i = (i + 1) & (s->cap - 1);
  }
  s->slots[i] = k;
  s->n++;
  return 1;
}

static bool sset_has(const sset_t *s, const char *k) {
  size_t i = (size_t)fnv(k) & (s->cap - 1);
  while (s->slots[i] != NULL) {
    if (strcmp(s->slots[i], k) == 0) return true;
    i = (i + 1) & (s->cap - 1);
  }
  return false;
}

void (*mw_gc_base_listed_hook_for_tests)(const char *name);

/* -------------------------------------------------------------- versions */

static void bver_free(bver_t *v) {
  if (v == NULL) return;
  free(v->names);
  free(v->keys);
  free(v);
}

static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

typedef struct collect {
  mw_buf_t names;
  size_t n;
} collect_t;

static int collect_key(void *arg, const char *key) {
  collect_t *c = arg;
  int rc = mw_buf_append(&c->names, key, strlen(key) + 1);
  if (rc < 0) return rc;
  c->n++;
  return 0;
}

/* What version v's manifest references (lance/base_files.h). */
static int bver_fill(bver_t *v, const uint8_t *p, size_t n, mw_err_t *err) {
  collect_t c = {.n = 0};
  mw_buf_init(&c.names);
  int rc = mw_base_manifest_files(p, n, v->version, &v->ts_ms, collect_key, &c, err);
  if (rc == 0 && (v->keys = calloc(c.n ? c.n : 1, sizeof *v->keys)) == NULL) rc = -ENOMEM;
  if (rc < 0) {
    mw_buf_free(&c.names);
    v->ts_ms = -1;
    return rc;
  }
  size_t len = 0;
  v->names = (char *)mw_buf_steal(&c.names, &len);
  char *q = v->names;
  for (size_t i = 0; i < c.n; i++) {
    v->keys[i] = q;
    q += strlen(q) + 1;
  }
  assert(q == v->names + len || c.n == 0);
  v->n_keys = c.n;
  v->bytes = n;
  v->fetched = true;
  return 0;
}

/* ------------------------------------------------------------------ runs */

static void victims_free(mw_gc_base_t *b) {
  for (size_t i = 0; i < b->n_victims; i++) free(b->victims[i]);
  free(b->victims);
  b->victims = NULL;
  b->n_victims = 0;
  free(b->old);
  b->old = NULL;
  b->n_old = 0;
}

static void tags_free(mw_gc_base_t *b) {
  for (size_t i = 0; i < b->n_tags; i++) free(b->tag_keys[i]);
  free(b->tag_keys);
  b->tag_keys = NULL;
  b->n_tags = b->tag_next = 0;
}

static void finish(mw_gc_base_t *b, int status, const char *what) {
  assert(b->phase != B_IDLE);
  b->phase = B_IDLE;
  for (size_t i = 0; i < b->n_ios; i++) mw_storage_req_cleanup(&b->ios[i].req);
  b->n_ios = b->pending = 0;
  mw_storage_req_cleanup(&b->list_req);
  mw_storage_req_init(&b->list_req);
  if (status == 0) {
    b->stats.runs++;
    if (b->run_versions > 0 || b->run_files > 0)
      mw_log_info("table %s: base history GC: %" PRIu64 " versions and %" PRIu64 " files deleted (%.1f MB), "
                  "%" PRIu64 " versions retained (retention %" PRIu64 " ms)", b->name, b->run_versions,
                  b->run_files, (double)b->run_bytes / 1e6, b->stats.versions_retained, b->retention_ms);
  }
  victims_free(b);
  tags_free(b);
  b->cb(b->cb_arg, status, what);
}

static void on_io(mw_storage_req_t *req, int status);

static bio_t *io_next(mw_gc_base_t *b, size_t idx) {
  assert(b->n_ios < MW_GC_BASE_BATCH);
  bio_t *io = &b->ios[b->n_ios++];
  mw_storage_req_cleanup(&io->req);
  mw_storage_req_init(&io->req);
  io->req.data = io;
  io->idx = idx;
  io->status = 0;
  io->present = false;
  return io;
}

/* A wave's submission failed at once: wait for what was submitted. */
static void io_refused(mw_gc_base_t *b, bio_t *io, int rc) {
  io->status = rc;
  (void)b;
}

static void fetch_wave(mw_gc_base_t *b);
static void del_add(mw_gc_base_t *b, size_t i, const char *key);
static void del_submit(mw_gc_base_t *b);
static void plan(mw_gc_base_t *b);
static void head_wave(mw_gc_base_t *b);
static void manifest_wave(mw_gc_base_t *b);

/* A listed version's manifest was gone when we read it: another cleanup (a
 * peer daemon's, LanceDB's) deleted it after our listing, and a cleanup
 * deletes only versions that are not the newest it sees. So a version newer
 * than our listing exists, and it references files of the versions we
 * listed that we cannot see: without the vanished manifest's keys, the plan
 * would delete files the newest version names (found by split_brain_gc: a
 * peer committed v10 and deleted v9 between our LIST {8, 9} and our GET of
 * v9, and we deleted v8's data files, which v9 and v10 still named). The
 * run deletes nothing; the next one lists again. */
static void stale_listing(mw_gc_base_t *b, uint64_t vanished) {
  assert(vanished > 0);
  assert(b->phase == B_FETCH);
  b->stats.stale_listings++;
  mw_log_info("table %s: base history GC: version %" PRIu64 " was deleted after our listing (another "
              "cleanup saw a newer version): nothing deleted, the next run lists again", b->name, vanished);
  finish(b, 0, "manifest read");
}

static void wave_done(mw_gc_base_t *b);

/* The version a tag file names ({"version": N, ...}: Lance's tag file); 0 if none. */
static uint64_t tag_version(const mw_buf_t *buf) {
  const char *s = (const char *)buf->data;
  size_t n = buf->len;
  char tmp[512];
  if (n >= sizeof tmp) n = sizeof tmp - 1;
  memcpy(tmp, s, n);
  tmp[n] = '\0';
  const char *v = strstr(tmp, "\"version\"");
  uint64_t ver = 0;
  if (v != NULL && (v = strchr(v, ':')) != NULL) ver = strtoull(v + 1, NULL, 10);
  return ver;
}

/* B_TAG_GET: one tag file read; read the next, or fetch the manifests. */
static void tag_done(mw_gc_base_t *b, int first) {
  assert(b->phase == B_TAG_GET);
  assert(b->n_ios == 1);
  bio_t *io = &b->ios[0];
  if (first < 0) {
    finish(b, first, "tag read");
    return;
  }
  if (io->status == 0) {
    uint64_t ver = tag_version(&io->req.buf);
    if (ver == 0) {
      finish(b, -EBADMSG, "tag file without a version");
      return;
    }
    if (b->n_tagged < MW_GC_BASE_MAX_TAGS) b->tagged[b->n_tagged++] = ver;
  }
  b->n_ios = 0;
  if (b->tag_next < b->n_tags) {
    bio_t *nio = io_next(b, b->tag_next);
    int rc = mw_storage_get(b->st, &nio->req, b->tag_keys[b->tag_next++], 0, 4096, on_io);
    if (rc < 0) finish(b, rc, "tag read");
    else b->pending = 1;
    return;
  }
  b->phase = B_FETCH;
  b->cursor = 0;
  fetch_wave(b);
}

/* B_FETCH: a wave of manifests read; fill their versions, or stop the run. */
static void fetch_done(mw_gc_base_t *b, int first) {
  assert(b->phase == B_FETCH);
  uint64_t vanished = 0;
  for (size_t i = 0; i < b->n_ios && first == 0; i++) {
    bio_t *io = &b->ios[i];
    assert(io->idx < b->n_vers);
    bver_t *v = b->vers[io->idx];
    if (io->status == -ENOENT) { /* deleted after our listing: see stale_listing() */
      v->ts_ms = -1;
      v->fetched = false;
      if (vanished == 0) vanished = v->version;
      continue;
    }
    mw_err_t err = {0};
    int rc = bver_fill(v, io->req.buf.data, io->req.buf.len, &err);
    if (rc < 0) {
      mw_log_warn("table %s: base history GC: version %" PRIu64 " refused: %s (nothing deleted)", b->name,
                  v->version, err.msg[0] ? err.msg : mw_strerror(rc));
      first = rc;
    }
  }
  if (first < 0) {
    finish(b, first, "manifest read");
    return;
  }
  if (vanished != 0) {
    stale_listing(b, vanished);
    return;
  }
  fetch_wave(b);
}

/* B_HEAD: a wave of victims sized; delete those present in one request. */
static void head_done(mw_gc_base_t *b, int first) {
  assert(b->phase == B_HEAD);
  if (first < 0) {
    finish(b, first, "file head");
    return;
  }
  size_t n = b->n_ios;
  b->phase = B_DELETE;
  b->pending = b->n_del = 0;
  for (size_t i = 0; i < n; i++) {
    bio_t *io = &b->ios[i];
    if (io->status == -ENOENT) continue;
    assert(io->idx < b->n_victims);
    io->present = true;
    b->run_bytes += io->req.size;
    b->stats.bytes_deleted += io->req.size;
    mw_buf_reset(&io->req.buf);
    del_add(b, i, b->victims[io->idx]);
  }
  if (b->n_del > 0) del_submit(b);
  assert(b->pending <= 1);
  if (b->pending == 0) wave_done(b);
}

/* B_DELETE: a wave of victims deleted; count them, head the next wave. */
static void delete_done(mw_gc_base_t *b, int first) {
  assert(b->phase == B_DELETE);
  if (first < 0) {
    finish(b, first, "file delete");
    return;
  }
  for (size_t i = 0; i < b->n_ios; i++)
    if (b->ios[i].present) {
      b->run_files++;
      b->stats.files_deleted++;
    }
  head_wave(b);
}

/* B_MANIFESTS: a wave of old manifests deleted; count them, delete the next. */
static void manifests_done(mw_gc_base_t *b, int first) {
  assert(b->phase == B_MANIFESTS);
  if (first < 0) {
    finish(b, first, "manifest delete");
    return;
  }
  for (size_t i = 0; i < b->n_ios; i++) {
    assert(b->ios[i].idx < b->n_old);
    bver_t *v = b->vers[b->old[b->ios[i].idx]];
    b->run_versions++;
    b->stats.versions_deleted++;
    b->run_bytes += v->bytes;
    b->stats.bytes_deleted += v->bytes;
  }
  manifest_wave(b);
}

/* Every request of the wave has answered: the first error other than
 * -ENOENT (absent: done already) ends the run, else the phase moves on. */
static void wave_done(mw_gc_base_t *b) {
  assert(b->pending == 0);
  assert(b->n_ios <= MW_GC_BASE_BATCH);
  int first = 0;
  for (size_t i = 0; i < b->n_ios && first == 0; i++)
    if (b->ios[i].status < 0 && b->ios[i].status != -ENOENT) first = b->ios[i].status;
  switch (b->phase) {
    case B_TAG_GET: tag_done(b, first); return;
    case B_FETCH: fetch_done(b, first); return;
    case B_HEAD: head_done(b, first); return;
    case B_DELETE: delete_done(b, first); return;
    case B_MANIFESTS: manifests_done(b, first); return;
    default: assert(0);
  }
}

/* Each key's own status goes to its io. */
static void on_deleted(mw_storage_req_t *req, int status) {
  mw_gc_base_t *b = req->data;
  (void)status;
  for (size_t k = 0; k < b->n_del; k++) {
    bio_t *io = &b->ios[b->del_io[k]];
    if (io->status == 0) io->status = b->del_st[k];
  }
  mw_storage_req_cleanup(&b->del_req);
  assert(b->pending == 1);
  b->pending = 0;
  wave_done(b);
}

static void del_add(mw_gc_base_t *b, size_t i, const char *key) {
  assert(b->n_del < MW_GC_BASE_BATCH);
  assert(i < b->n_ios);
  b->del_io[b->n_del] = i;
  b->del_keys[b->n_del++] = key;
}

/* The wave's queued keys in one request; on refusal each gets its status. */
static void del_submit(mw_gc_base_t *b) {
  _Static_assert(MW_GC_BASE_BATCH <= MW_STORAGE_DELETE_MANY_MAX, "one delete_many a wave");
  assert(b->n_del > 0);
  assert(b->pending == 0);
  mw_storage_req_init(&b->del_req);
  b->del_req.data = b;
  int rc = mw_storage_delete_many(b->st, &b->del_req, b->del_keys, b->n_del, b->del_st, on_deleted);
  if (rc == 0) b->pending = 1;
  for (size_t k = 0; rc < 0 && k < b->n_del; k++) io_refused(b, &b->ios[b->del_io[k]], rc);
}

static void on_io(mw_storage_req_t *req, int status) {
  bio_t *io = req->data;
  mw_gc_base_t *b = io->b;
  if (io->status == 0) io->status = status;
  assert(b->pending > 0);
  if (--b->pending == 0) wave_done(b);
}

static void fetch_wave(mw_gc_base_t *b) {
  b->n_ios = b->pending = 0;
  while (b->cursor < b->n_vers && b->n_ios < MW_GC_BASE_BATCH) {
    size_t i = b->cursor++;
    if (b->vers[i]->fetched) continue;
    char key[KEY_BYTES];
    int rc = mw_dmanifest_name(b->vers[i]->version, key + 10, sizeof key - 10);
    memcpy(key, "_versions/", 10);
    bio_t *io = io_next(b, i);
    if (rc >= 0) rc = mw_storage_get(b->st, &io->req, key, 0, UINT64_MAX, on_io);
    if (rc < 0) {
      io_refused(b, io, rc);
      break;
    }
    b->pending++;
  }
  if (b->pending > 0) return;
  if (b->n_ios > 0) { /* refused at once */
    finish(b, b->ios[b->n_ios - 1].status, "manifest read");
    return;
  }
  plan(b);
}

static bool is_tagged(const mw_gc_base_t *b, uint64_t v) {
  for (size_t i = 0; i < b->n_tagged; i++)
    if (b->tagged[i] == v) return true;
  return false;
}

static void plan(mw_gc_base_t *b) {
  assert(b->n_vers > 0);
  int64_t cutoff = b->now_ms - (int64_t)b->retention_ms;
  uint64_t newest = b->vers[b->n_vers - 1]->version;
  size_t n_keys = 0;
  b->old = calloc(b->n_vers, sizeof *b->old);
  if (b->old == NULL) {
    finish(b, -ENOMEM, "plan");
    return;
  }
  for (size_t i = 0; i < b->n_vers; i++) {
    bver_t *v = b->vers[i];
    n_keys += v->n_keys;
    bool old = v->fetched && v->ts_ms >= 0 && v->ts_ms < cutoff && v->version != newest && !is_tagged(b, v->version);
    if (old) b->old[b->n_old++] = i;
  }
  b->stats.versions_retained = b->n_vers - b->n_old;
  if (b->n_old == 0) {
    finish(b, 0, "plan");
    return;
  }
  sset_t keep, gone;
  if (sset_init(&keep, n_keys) < 0 || sset_init(&gone, n_keys) < 0) {
    sset_free(&keep);
    finish(b, -ENOMEM, "plan");
    return;
  }
  size_t oi = 0;
  for (size_t i = 0; i < b->n_vers; i++) {
    if (oi < b->n_old && b->old[oi] == i) {
      oi++;
      continue;
    }
    bver_t *v = b->vers[i];
    for (size_t k = 0; k < v->n_keys; k++) sset_add(&keep, v->keys[k]);
  }
  int rc = 0;
  b->victims = calloc(n_keys ? n_keys : 1, sizeof *b->victims);
  if (b->victims == NULL) rc = -ENOMEM;
  for (size_t o = 0; rc == 0 && o < b->n_old; o++) {
    bver_t *v = b->vers[b->old[o]];
    for (size_t k = 0; rc == 0 && k < v->n_keys; k++) {
      const char *key = v->keys[k];
      if (sset_has(&keep, key) || sset_add(&gone, key) == 0) continue;
      if (b->n_victims >= MW_GC_BASE_MAX_VICTIMS) break; /* the rest next run */
      if ((b->victims[b->n_victims] = strdup(key)) == NULL) rc = -ENOMEM;
      else b->n_victims++;
    }
  }
  sset_free(&keep);
  sset_free(&gone);
  if (rc < 0) {
    finish(b, rc, "plan");
    return;
  }
  assert(b->n_victims <= n_keys);
  mw_log_info("table %s: base history GC: %zu of %zu versions older than %" PRIu64 " ms, %zu files only "
              "they reference", b->name, b->n_old, b->n_vers, b->retention_ms, b->n_victims);
  b->cursor = 0;
  head_wave(b);
}

static void head_wave(mw_gc_base_t *b) {
  b->phase = B_HEAD;
  b->n_ios = b->pending = 0;
  while (b->cursor < b->n_victims && b->n_ios < MW_GC_BASE_BATCH) {
    size_t i = b->cursor++;
    bio_t *io = io_next(b, i);
    int rc = mw_storage_head(b->st, &io->req, b->victims[i], on_io);
    if (rc < 0) {
      io_refused(b, io, rc);
      break;
    }
    b->pending++;
  }
  if (b->pending > 0) return;
  if (b->n_ios > 0) {
    finish(b, b->ios[b->n_ios - 1].status, "file head");
    return;
  }
  b->phase = B_MANIFESTS;
  b->cursor = 0;
  manifest_wave(b);
}

/* Oldest first, one wave at a time: the versions left are always the newest
 * ones, whatever a crash interrupts. */
static void manifest_wave(mw_gc_base_t *b) {
  b->n_ios = b->pending = b->n_del = 0;
  while (b->cursor < b->n_old && b->n_ios < MW_GC_BASE_BATCH) {
    size_t o = b->cursor++;
    char *key = b->mkeys[b->n_ios];
    memcpy(key, "_versions/", 10);
    int rc = mw_dmanifest_name(b->vers[b->old[o]]->version, key + 10, KEY_BYTES - 10);
    bio_t *io = io_next(b, o);
    if (rc < 0) {
      io_refused(b, io, rc);
      break;
    }
    del_add(b, b->n_ios - 1, key);
  }
  if (b->n_del > 0) del_submit(b);
  if (b->pending > 0) return;
  if (b->n_ios > 0) {
    finish(b, b->ios[b->n_ios - 1].status, "manifest delete");
    return;
  }
  /* drop the deleted versions from the cache */
  size_t k = 0, oi = 0;
  for (size_t i = 0; i < b->n_vers; i++) {
    if (oi < b->n_old && b->old[oi] == i) {
      oi++;
      bver_free(b->vers[i]);
      continue;
    }
    b->vers[k++] = b->vers[i];
  }
  b->n_vers = k;
  finish(b, 0, "manifest delete");
}

/* ------------------------------------------------------------- listings */

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static void on_tags(mw_storage_req_t *req, int status) {
  mw_gc_base_t *b = req->data;
  if (status < 0 && status != -ENOENT) {
    finish(b, status, "tag list");
    return;
  }
  size_t n = status == 0 ? req->nkeys : 0;
  if (n > MW_GC_BASE_MAX_TAGS) {
    mw_log_warn("table %s: base history GC: %zu tags (more than %d): nothing deleted", b->name, n,
                MW_GC_BASE_MAX_TAGS);
    finish(b, -E2BIG, "tag list");
    return;
  }
  b->tag_keys = calloc(n ? n : 1, sizeof *b->tag_keys);
  if (b->tag_keys == NULL) {
    finish(b, -ENOMEM, "tag list");
    return;
  }
  for (size_t i = 0; i < n; i++) {
    if ((b->tag_keys[i] = strdup(req->keys[i])) == NULL) {
      finish(b, -ENOMEM, "tag list");
      return;
    }
    b->n_tags++;
  }
  b->phase = B_TAG_GET;
  b->n_ios = 0;
  b->pending = 0;
  if (b->n_tags == 0) {
    b->phase = B_FETCH;
    b->cursor = 0;
    fetch_wave(b);
    return;
  }
  bio_t *io = io_next(b, 0);
  int rc = mw_storage_get(b->st, &io->req, b->tag_keys[b->tag_next++], 0, 4096, on_io);
  if (rc < 0) finish(b, rc, "tag read");
  else b->pending = 1;
}

/* The cache becomes exactly the listed versions (known ones kept). */
static int merge_listing(mw_gc_base_t *b, uint64_t *vs, size_t n) {
  bver_t **nv = calloc(n ? n : 1, sizeof *nv);
  if (nv == NULL) return -ENOMEM;
  size_t j = 0;
  for (size_t i = 0; i < n; i++) {
    while (j < b->n_vers && b->vers[j]->version < vs[i]) bver_free(b->vers[j++]);
    if (j < b->n_vers && b->vers[j]->version == vs[i]) {
      nv[i] = b->vers[j++];
      continue;
    }
    nv[i] = calloc(1, sizeof *nv[i]);
    if (nv[i] == NULL) {
      for (size_t k = 0; k < i; k++) bver_free(nv[k]);
      free(nv);
      return -ENOMEM; /* the old cache is partly freed: drop it all */
    }
    nv[i]->version = vs[i];
    nv[i]->ts_ms = -1;
  }
  while (j < b->n_vers) bver_free(b->vers[j++]);
  free(b->vers);
  b->vers = nv;
  b->n_vers = n;
  return 0;
}

static void on_versions(mw_storage_req_t *req, int status) {
  mw_gc_base_t *b = req->data;
  if (status < 0) {
    finish(b, status, "version list");
    return;
  }
  if (req->nkeys > MW_GC_BASE_MAX_VERSIONS) {
    mw_log_warn("table %s: base history GC: %zu versions (more than %d): nothing deleted", b->name,
                req->nkeys, MW_GC_BASE_MAX_VERSIONS);
    finish(b, -E2BIG, "version list");
    return;
  }
  uint64_t *vs = calloc(req->nkeys ? req->nkeys : 1, sizeof *vs);
  if (vs == NULL) {
    finish(b, -ENOMEM, "version list");
    return;
  }
  size_t n = 0;
  size_t pl = strlen("_versions/");
  for (size_t i = 0; i < req->nkeys; i++) {
    const char *name = req->keys[i] + pl;
    if (strchr(name, '/') != NULL) continue;
    uint64_t v;
    bool v2 = false;
    if (mw_dmanifest_name_parse(name, &v, &v2) < 0) continue;
    if (!v2) {
      free(vs);
      mw_log_warn("table %s: base history GC: V1 manifest names are not collected", b->name);
      finish(b, -ENOTSUP, "version list");
      return;
    }
    vs[n++] = v;
  }
  qsort(vs, n, sizeof *vs, cmp_u64);
  int rc = n == 0 ? -ENOENT : merge_listing(b, vs, n);
  free(vs);
  if (rc == -ENOMEM) {
    for (size_t i = 0; i < b->n_vers; i++) bver_free(b->vers[i]);
    free(b->vers);
    b->vers = NULL;
    b->n_vers = 0;
  }
  if (rc < 0) {
    finish(b, rc, "version list");
    return;
  }
  mw_storage_req_cleanup(&b->list_req);
  mw_storage_req_init(&b->list_req);
  if (mw_gc_base_listed_hook_for_tests != NULL) mw_gc_base_listed_hook_for_tests(b->name);
  b->list_req.data = b;
  b->phase = B_TAGS;
  rc = mw_storage_list(b->st, &b->list_req, "_refs/tags/", on_tags);
  if (rc < 0) finish(b, rc, "tag list");
}

/* ------------------------------------------------------------- lifecycle */

int mw_gc_base_new(mw_storage_t *st, const char *name, mw_gc_base_t **out) {
  assert(st != NULL);
  assert(out != NULL);
  mw_gc_base_t *b = calloc(1, sizeof *b);
  if (b == NULL) return -ENOMEM;
  b->st = st;
  b->name = strdup(name ? name : "?");
  if (b->name == NULL) {
    free(b);
    return -ENOMEM;
  }
  mw_storage_req_init(&b->list_req);
  mw_storage_req_init(&b->del_req);
  for (size_t i = 0; i < MW_GC_BASE_BATCH; i++) {
    mw_storage_req_init(&b->ios[i].req);
    b->ios[i].b = b;
  }
  *out = b;
  return 0;
}

void mw_gc_base_free(mw_gc_base_t *b) {
  if (b == NULL) return;
  assert(b->phase == B_IDLE);
  for (size_t i = 0; i < b->n_vers; i++) bver_free(b->vers[i]);
  free(b->vers);
  for (size_t i = 0; i < MW_GC_BASE_BATCH; i++) mw_storage_req_cleanup(&b->ios[i].req);
  mw_storage_req_cleanup(&b->list_req);
  mw_storage_req_cleanup(&b->del_req);
  free(b->name);
  free(b);
}

int mw_gc_base_run(mw_gc_base_t *b, uint64_t retention_ms, mw_gc_base_cb cb, void *arg) {
  assert(b != NULL);
  assert(cb != NULL);
  assert(b->phase == B_IDLE);
  b->cb = cb;
  b->cb_arg = arg;
  b->retention_ms = retention_ms;
  b->now_ms = wall_ms();
  b->n_tagged = 0;
  b->run_files = b->run_bytes = b->run_versions = 0;
  b->list_req.data = b;
  b->phase = B_LIST;
  int rc = mw_storage_list(b->st, &b->list_req, "_versions/", on_versions);
  if (rc < 0) b->phase = B_IDLE;
  return rc;
}

void mw_gc_base_stats(const mw_gc_base_t *b, mw_gc_base_stats_t *out) {
  assert(b != NULL);
  assert(out != NULL);
  *out = b->stats;
}
