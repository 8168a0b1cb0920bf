/*
 * compact_keys.c — the compactor's output side: which base rows the merged
 * keys supersede, which small fragments are folded in, and the commit.
 *
 * Key indexes (keyindex.h) of the base's data files live in a cache keyed
 * by data-file name (open addressing, LRU eviction past
 * compaction_keyindex_cache_bytes among entries the current run does not
 * use). A missing one is read from `_memwald/keys/<stem>.keys`; a missing
 * or damaged file is rebuilt from the data file's PK column and stored
 * (only for files of compaction_keyindex_store_rows rows or more: a small
 * file's index is rebuilt once per process instead).
 *
 * Cost per run, for K merged keys (ascending per shard) and F base
 * fragments: per fragment a merge-walk of its sorted index against the
 * keys (mw_keyindex_find_sorted): about log K + log n comparisons for a
 * fragment whose key range the keys miss, K + hits·log n where they
 * interleave; on the pool (the loop only queues the job and collects it); I/O only for indexes not cached (each read once per process,
 * built once per data file ever) and for the deletion files of fragments
 * that hold superseded rows. It grows with the number of fragments, not
 * with the base table's rows; folding keeps the fragments few.
 *
 * Folding: small fragments (fewer live rows than compaction_fragment_rows,
 * one data file) are kept to MW_COMPACT_FOLD_TRIGGER: past that, the
 * smallest are read, their live rows (minus what the merge supersedes) are
 * written into the new fragment, and they are removed in the same commit.
 * A fragment with more than MW_COMPACT_DEAD_PERCENT of its rows deleted is
 * folded the same way at the next run (Lance's compaction materialises
 * deletions past 10 %; we wait for half, so each row is rewritten at most
 * about once per halving: the rewrite cost stays within ~2x the writes).
 *
 * Read-back (lance/readback.h): the new data file is decoded again on the
 * pool, right after it is written, and compared with the rows it was
 * written from; one that does not read back fails the run before the
 * commit (run.refused; the SSTables stay uncompacted, the run backs off and
 * tries again). New deletion files are read back the same way.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "common/log.h"
#include "lance/datafile.h"
#include "lance/datafile_fields.h"
#include "lance/deletion.h"
#include "lance/readback.h"
#include "lance/sstable.h"
#include "lance/util.h"
#include "shard/compact_int.h"

/* ---------------------------------------------------------------- cache */

static uint64_t name_hash(const char *s) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
  return h;
}

static void kentry_free(kentry_t *e) {
  if (e == NULL) return;
  mw_keyindex_free(&e->ki);
  free(e->data_file);
  free(e);
}

void mw_compact__cache_free(kcache_t *k) {
  for (size_t i = 0; i < k->cap; i++) kentry_free(k->slots[i]);
  free(k->slots);
  memset(k, 0, sizeof *k);
}

static kentry_t **slot_of(kcache_t *k, const char *name) {
  assert(k->cap > 0);
  assert((k->cap & (k->cap - 1)) == 0);
  size_t i = (size_t)name_hash(name) & (k->cap - 1);
  while (k->slots[i] != NULL && strcmp(k->slots[i]->data_file, name) != 0) i = (i + 1) & (k->cap - 1);
  return &k->slots[i];
}

static kentry_t *cache_find(mw_compact_t *c, const char *name) {
  if (c->cache.cap == 0) return NULL;
  kentry_t *e = *slot_of(&c->cache, name);
  if (e) e->used = c->tick;
  return e;
}

static int cache_grow(kcache_t *k) {
  size_t cap = k->cap ? k->cap * 2 : 64;
  kcache_t n = {.slots = calloc(cap, sizeof *n.slots), .cap = cap, .n = k->n, .bytes = k->bytes};
  if (n.slots == NULL) return -ENOMEM;
  for (size_t i = 0; i < k->cap; i++)
    if (k->slots[i]) *slot_of(&n, k->slots[i]->data_file) = k->slots[i];
  free(k->slots);
  *k = n;
  return 0;
}

/* Remove slot i and re-place the run after it (linear probing). */
static void cache_remove(kcache_t *k, size_t i) {
  kentry_free(k->slots[i]);
  k->slots[i] = NULL;
  k->n--;
  for (size_t j = (i + 1) & (k->cap - 1); k->slots[j] != NULL; j = (j + 1) & (k->cap - 1)) {
    kentry_t *e = k->slots[j];
    k->slots[j] = NULL;
    *slot_of(k, e->data_file) = e;
  }
}

static size_t keyindex_bytes(const mw_keyindex_t *ki) {
  size_t n = ki->bloom.n_blocks * MW_BLOOM_BLOCK_BYTES;
  for (size_t i = 0; i < ki->schema.n_fields; i++)
    n += ki->batch.cols[i].values.len + ki->batch.cols[i].offsets.len;
  return n + sizeof(kentry_t);
}

/* Evict the least recently used entries the current run does not use
 * until the cache fits its budget. */
static void cache_trim(mw_compact_t *c) {
  kcache_t *k = &c->cache;
  while (k->bytes > c->cfg.keyindex_cache_bytes) {
    size_t victim = k->cap;
    for (size_t i = 0; i < k->cap; i++)
      if (k->slots[i] && k->slots[i]->used < c->tick &&
          (victim == k->cap || k->slots[i]->used < k->slots[victim]->used))
        victim = i;
    if (victim == k->cap) return;
    k->bytes -= k->slots[victim]->bytes;
    cache_remove(k, victim);
  }
}

static kentry_t *cache_add(mw_compact_t *c, const char *name, mw_keyindex_t *ki) {
  kcache_t *k = &c->cache;
  if ((k->n + 1) * 2 > k->cap && cache_grow(k) < 0) return NULL;
  kentry_t *e = calloc(1, sizeof *e);
  if (e == NULL || (e->data_file = strdup(name)) == NULL) {
    free(e);
    return NULL;
  }
  e->ki = *ki; /* the batch borrows ki->schema: re-point it after the move */
  e->ki.batch.schema = &e->ki.schema;
  e->ki.offsets = (const uint32_t *)(const void *)e->ki.batch.cols[1].values.data;
  memset(ki, 0, sizeof *ki);
  e->bytes = keyindex_bytes(&e->ki);
  e->used = c->tick;
  kentry_t **s = slot_of(k, name);
  assert(*s == NULL);
  *s = e;
  k->n++;
  k->bytes += e->bytes;
  return e;
}

/* The run committed: its new fragment's index joins the cache (it is the
 * next run's newest fragment) and the entries of the fragments it removed
 * or folded leave it (no base names their data files any more: kept, they
 * would only push live entries out of the budget). Only a cache: an
 * allocation failure just leaves the index to be read next time. */
void mw_compact__cache_committed(mw_compact_t *c) {
  run_t *r = &c->run;
  kcache_t *k = &c->cache;
  for (size_t i = 0; i < r->n_frags && k->cap > 0; i++) {
    fwork_t *f = &r->frags[i];
    if (!f->remove && !f->fold) continue;
    kentry_t **s = slot_of(k, f->pk_file);
    if (*s == NULL) continue;
    k->bytes -= (*s)->bytes;
    cache_remove(k, (size_t)(s - k->slots));
    f->ke = NULL;
  }
  if (r->has_new_ki && r->new_rows > 0 && cache_find(c, r->data_name) == NULL) {
    if (cache_add(c, r->data_name, &r->new_ki) == NULL) mw_keyindex_free(&r->new_ki);
    r->has_new_ki = false;
  }
  assert(k->n <= k->cap);
}

/* ------------------------------------------------------------ fragments */

void mw_compact__frags_reset(run_t *r) {
  for (size_t i = 0; i < r->n_frags; i++) {
    fwork_t *f = &r->frags[i];
    mw_storage_req_cleanup(&f->req);
    mw_storage_req_cleanup(&f->del_req);
    mw_storage_req_cleanup(&f->data_req);
    if (f->has_decoded) mw_keyindex_free(&f->decoded);
    mw_buf_free(&f->built);
    mw_buf_free(&f->hits);
    mw_buf_free(&f->del_new);
  }
  free(r->frags);
  r->frags = NULL;
  r->n_frags = 0;
  if (r->has_commit) mw_base_commit_free(&r->commit);
  r->has_commit = false;
  free(r->files);
  r->files = NULL;
  r->n_files = 0;
  free(r->txn_key);
  r->txn_key = NULL;
  mw_buf_free(&r->data_file);
  mw_buf_free(&r->data_keys);
  if (r->has_new_ki) mw_keyindex_free(&r->new_ki);
  r->has_new_ki = false;
}

/* One fwork per base fragment: its PK data file and cache entry. */
static int frags_prepare(mw_compact_t *c) {
  run_t *r = &c->run;
  const Lance__Table__Manifest *pb = r->bop.meta.manifest.pb;
  int32_t pk_id = c->t->meta.schema.fields[c->pk_base].id;
  r->frags = calloc(pb->n_fragments + 1, sizeof *r->frags);
  if (r->frags == NULL) return -ENOMEM;
  r->n_frags = pb->n_fragments;
  for (size_t i = 0; i < pb->n_fragments; i++) {
    fwork_t *f = &r->frags[i];
    f->f = pb->fragments[i];
    mw_storage_req_init(&f->req);
    mw_storage_req_init(&f->del_req);
    mw_storage_req_init(&f->data_req);
    for (size_t d = 0; d < f->f->n_files && f->pk_file == NULL; d++)
      for (size_t k = 0; k < f->f->files[d]->n_fields; k++)
        if (f->f->files[d]->fields[k] == pk_id) f->pk_file = f->f->files[d]->path;
    if (f->pk_file == NULL || strchr(f->pk_file, '/') != NULL)
      return mw_err_set(&r->err, -ENOTSUP, "base fragment %" PRIu64 " has no data file holding the "
                        "primary key (or one outside data/)", f->f->id);
    f->ke = cache_find(c, f->pk_file);
  }
  return 0;
}

void mw_compact__keys_get(mw_compact_t *c) {
  run_t *r = &c->run;
  mw_compact__frags_reset(r);
  int rc = frags_prepare(c);
  if (rc < 0) {
    mw_compact__fail(c, rc);
    return;
  }
  assert(mw_compact__may_follow(r->phase, R_KEYS_GET));
  r->phase = R_KEYS_GET;
  for (size_t i = 0; i < r->n_frags; i++) {
    fwork_t *f = &r->frags[i];
    if (f->ke != NULL) continue;
    if (mw_keyindex_name(f->pk_file, f->key, sizeof f->key) < 0) {
      mw_err_set(&r->err, -ENAMETOOLONG, "data file name %s", f->pk_file);
      mw_compact__fail(c, -ENAMETOOLONG);
      return;
    }
    c->stats.keyindex_read++;
    mw_compact__get(c, &f->req, &f->io, f->key);
  }
  if (r->pending == 0) mw_compact__next(c);
}

void mw_compact__keys_data(mw_compact_t *c) {
  run_t *r = &c->run;
  assert(mw_compact__may_follow(r->phase, R_KEYS_DATA));
  r->phase = R_KEYS_DATA;
  for (size_t i = 0; i < r->n_frags; i++) {
    fwork_t *f = &r->frags[i];
    if (f->ke != NULL || f->io.status == 0) continue;
    if (f->io.status != -ENOENT) {
      mw_err_set(&r->err, f->io.status, "GET %s: %s", f->key, mw_strerror(f->io.status));
      mw_compact__fail(c, f->io.status);
      return;
    }
    f->io.status = 0;
    f->need_data = true;
    snprintf(f->key, sizeof f->key, "data/%s", f->pk_file);
    mw_compact__get(c, &f->req, &f->io, f->key);
  }
  if (r->pending == 0) mw_compact__next(c);
}

/* pool: decode the indexes read, build the missing ones */
void mw_compact__work_keys(mw_compact_t *c) {
  run_t *r = &c->run;
  const mw_field_t *pk = &c->t->meta.schema.fields[c->pk_base];
  /* one zstd context for every file read here, not one per file: each read
   * decodes one key column, usually one zstd buffer (datafile.h) */
  mw_datafile_read_opts_t ro = {.zstd_dctx = NULL};
  for (size_t i = 0; i < r->n_frags; i++) {
    fwork_t *f = &r->frags[i];
    if (f->ke != NULL || f->has_decoded) continue;
    f->work_rc = 0;
    if (!f->need_data) {
      f->work_rc = mw_keyindex_decode(f->req.buf.data, f->req.buf.len, pk, &f->decoded, &f->work_err);
      f->has_decoded = true;
      if (f->work_rc == 0 && strcmp(f->decoded.data_file, f->pk_file) != 0)
        f->work_rc = mw_err_set(&f->work_err, -EBADMSG, "key index of %s names %s", f->pk_file,
                                f->decoded.data_file);
      mw_buf_free(&f->req.buf);
      continue;
    }
    mw_datafile_t df;
    mw_column_t col;
    if (ro.zstd_dctx == NULL) ro.zstd_dctx = ZSTD_createDCtx();
    int rc = ro.zstd_dctx != NULL ? mw_column_init(&col, pk) : -ENOMEM;
    if (rc == 0) rc = mw_datafile_open(&df, f->req.buf.data, f->req.buf.len, &ro, &f->work_err);
    else memset(&col, 0, sizeof col);
    if (rc == 0) {
      size_t j = 0;
      while (j < df.schema.n_fields && df.schema.fields[j].id != pk->id) j++;
      if (j == df.schema.n_fields)
        rc = mw_err_set(&f->work_err, -EBADMSG, "data file %s has no field id %d", f->pk_file, pk->id);
      else if ((uint64_t)df.n_rows != f->f->physical_rows)
        rc = mw_err_set(&f->work_err, -EBADMSG, "data file %s has %" PRIu64 " rows, fragment %" PRIu64
                        " says %" PRIu64, f->pk_file, df.n_rows, f->f->id, f->f->physical_rows);
      else
        rc = mw_datafile_read_column(&df, j, &col, &f->work_err);
      if (rc == 0) rc = mw_keyindex_build(pk, &col, f->pk_file, &f->built, &f->work_err);
      if (rc == 0) rc = mw_keyindex_decode(f->built.data, f->built.len, pk, &f->decoded, &f->work_err);
      f->has_decoded = true;
      mw_datafile_close(&df);
    }
    mw_column_free(&col);
    mw_buf_free(&f->req.buf);
    f->work_rc = rc;
  }
  ZSTD_freeDCtx(ro.zstd_dctx); /* after every file that borrowed it is closed */
}

void mw_compact__keys_put(mw_compact_t *c) {
  run_t *r = &c->run;
  bool again = false;
  for (size_t i = 0; i < r->n_frags; i++) {
    fwork_t *f = &r->frags[i];
    if (f->ke != NULL) continue;
    if (f->io.status < 0) {
      mw_err_set(&r->err, f->io.status, "GET %s: %s", f->key, mw_strerror(f->io.status));
      mw_compact__fail(c, f->io.status);
      return;
    }
    if (f->work_rc < 0 && f->need_data) {
      mw_err_set(&r->err, f->work_rc, "key index of %s: %s", f->pk_file, f->work_err.msg);
      mw_compact__fail(c, f->work_rc);
      return;
    }
    if (f->work_rc < 0) { /* a damaged index is only a cache: rebuild it from its data file */
      mw_log_warn("table %s: key index %s refused (%s); rebuilding it", c->t->path, f->key, f->work_err.msg);
      if (f->has_decoded) mw_keyindex_free(&f->decoded);
      f->has_decoded = false;
      f->io.status = -ENOENT;
      again = true;
    }
  }
  if (again) {
    mw_compact__keys_data(c);
    return;
  }
  assert(mw_compact__may_follow(r->phase, R_KEYS_PUT));
  r->phase = R_KEYS_PUT;
  for (size_t i = 0; i < r->n_frags; i++) {
    fwork_t *f = &r->frags[i];
    if (f->ke != NULL) continue;
    f->ke = cache_add(c, f->pk_file, &f->decoded);
    f->has_decoded = false;
    if (f->ke == NULL) {
      mw_compact__fail(c, -ENOMEM);
      return;
    }
    if (f->built.len == 0) continue;
    c->stats.keyindex_built++;
    mw_compact__count("keyindex_built", 1);
    if (f->f->physical_rows < c->cfg.keyindex_store_rows) { /* cached only */
      mw_buf_free(&f->built);
      continue;
    }
    mw_keyindex_name(f->pk_file, f->built_key, sizeof f->built_key);
    mw_compact__put(c, &f->req, &f->io, f->built_key, &f->built);
  }
  if (r->pending == 0) mw_compact__next(c);
}

/* ----------------------------------------------------- lookups and folds */

static uint64_t live_rows(const Lance__Table__DataFragment *f) {
  uint64_t dead = f->deletion_file ? f->deletion_file->num_deleted_rows : 0;
  return f->physical_rows > dead ? f->physical_rows - dead : 0;
}

static int cmp_live(const void *a, const void *b) {
  const fwork_t *x = *(const fwork_t *const *)a, *y = *(const fwork_t *const *)b;
  uint64_t lx = live_rows(x->f), ly = live_rows(y->f);
  return lx < ly ? -1 : lx > ly;
}

/* Mostly dead: more than MW_COMPACT_DEAD_PERCENT of its rows deleted. */
static bool mostly_dead(const Lance__Table__DataFragment *f) {
  uint64_t dead = f->physical_rows - live_rows(f);
  return f->n_files == 1 && dead * 100 > f->physical_rows * MW_COMPACT_DEAD_PERCENT;
}

/* Fold (rewrite into the new fragment) every mostly-dead fragment, so that
 * superseded rows never take more than about as much room as live ones,
 * and the smallest small fragments when a commit would leave too many;
 * both within compaction_max_rows of physical rows read. */
static int choose_folds(mw_compact_t *c) {
  run_t *r = &c->run;
  fwork_t **small = calloc(r->n_frags + 1, sizeof *small);
  if (small == NULL) return -ENOMEM;
  uint64_t budget = c->cfg.max_rows;
  for (size_t i = 0; i < r->n_frags; i++) {
    fwork_t *f = &r->frags[i];
    if (!mostly_dead(f->f) || f->f->physical_rows > budget) continue;
    budget -= f->f->physical_rows;
    f->fold = true;
  }
  size_t n = 0;
  for (size_t i = 0; i < r->n_frags; i++)
    if (!r->frags[i].fold && r->frags[i].f->n_files == 1 && live_rows(r->frags[i].f) < c->cfg.fragment_rows)
      small[n++] = &r->frags[i];
  if (n + 1 > MW_COMPACT_FOLD_TRIGGER) {
    qsort(small, n, sizeof *small, cmp_live);
    for (size_t k = 0; k + MW_COMPACT_FOLD_KEEP < n + 1 && k < n; k++) {
      if (small[k]->f->physical_rows > budget) break;
      budget -= small[k]->f->physical_rows;
      small[k]->fold = true;
    }
  }
  free(small);
  return 0;
}

/* Loop: the key indexes PUT, the cache trimmed (this run's entries stay:
 * the lookups read them on the pool), the folds chosen; then the lookups
 * go to the pool. Nothing touches the cache until the job is back: the
 * run is the cache's only writer and it waits for its job. */
void mw_compact__dels_find(mw_compact_t *c) {
  run_t *r = &c->run;
  for (size_t i = 0; i < r->n_frags; i++) {
    fwork_t *f = &r->frags[i];
    if (f->built.len > 0 && f->io.status < 0)
      mw_log_warn("table %s: key index %s not stored (%s); it is rebuilt next time", c->t->path,
                  f->built_key, mw_strerror(f->io.status));
    mw_buf_free(&f->built);
    f->io.status = 0;
    assert(f->ke != NULL); /* KEYS_PUT cached every index */
  }
  cache_trim(c);
  int rc = choose_folds(c);
  if (rc < 0) {
    mw_compact__fail(c, rc);
    return;
  }
  mw_compact__queue_work(c, R_DELS_FIND);
}

/* The probes: each group's merged keys, one column per shard, each
 * ascending: lsm_merge.h promises it and test_lsm_merge holds it to that
 * (the merge-walk would miss superseded rows on unsorted keys), so it is
 * not checked again here, a pass over every key of every run. */
static int key_runs(mw_compact_t *c, const mw_column_t ***runs, mw_err_t *err) {
  run_t *r = &c->run;
  const mw_column_t **v = calloc(r->n_groups + 1, sizeof *v);
  if (v == NULL) return -ENOMEM;
  *runs = v;
  for (size_t k = 0; k < r->n_groups; k++) {
    const mw_merge_t *m = &r->groups[k].merge;
    if (m->keys.length != m->n_keys)
      return mw_err_set(err, -EINVAL, "shard %s: %" PRId64 " merged keys, the merge counted %" PRId64,
                        r->groups[k].shard->id_str, m->keys.length, m->n_keys);
    v[k] = &m->keys;
  }
  return 0;
}

/* pool: which rows of each base fragment hold a key the merge supersedes
 * (F fragments, K keys: a merge-walk of each fragment's sorted index
 * against the sorted keys; the run's largest CPU cost after the merge, so
 * never on the loop). Stops at the first failure. */
void mw_compact__work_find(mw_compact_t *c) {
  run_t *r = &c->run;
  const mw_field_t *pk = &c->t->meta.schema.fields[c->pk_base];
  assert(r->phase == R_DELS_FIND);
  const mw_column_t **runs = NULL;
  r->work_rc = key_runs(c, &runs, &r->work_err);
  for (size_t i = 0; i < r->n_frags && r->work_rc == 0; i++) {
    fwork_t *f = &r->frags[i];
    mw_buf_reset(&f->hits);
    f->n_hits = mw_keyindex_find_sorted(&f->ke->ki, pk, runs, r->n_groups, &f->hits);
    if (mw_compact_find_hook_for_tests != NULL && f->n_hits >= 0) {
      int hook = mw_compact_find_hook_for_tests();
      if (hook < 0) f->n_hits = hook;
    }
    if (f->n_hits < 0)
      r->work_rc = mw_err_set(&r->work_err, (int)f->n_hits, "key lookup in fragment %" PRIu64 " (%s): %s",
                              f->f->id, f->pk_file, mw_strerror((int)f->n_hits));
  }
  free(runs);
}

/* Loop: GET the deletion files of fragments with hits, and the data of the
 * fragments to fold. */
void mw_compact__dels_get(mw_compact_t *c) {
  run_t *r = &c->run;
  assert(r->work_rc == 0);
  assert(mw_compact__may_follow(r->phase, R_DELS_GET));
  r->phase = R_DELS_GET;
  for (size_t i = 0; i < r->n_frags; i++) {
    fwork_t *f = &r->frags[i];
    assert(f->n_hits >= 0);
    assert((size_t)f->n_hits == f->hits.len / 4);
    const Lance__Table__DeletionFile *d = f->f->deletion_file;
    f->data_io.status = 0;
    if (f->fold) {
      snprintf(f->key, sizeof f->key, "data/%s", f->f->files[0]->path);
      mw_compact__get(c, &f->data_req, &f->data_io, f->key);
    }
    if ((f->n_hits == 0 && !f->fold) || d == NULL) continue;
    bool bitmap = d->file_type == LANCE__TABLE__DELETION_FILE__DELETION_FILE_TYPE__BITMAP;
    snprintf(f->del_key, sizeof f->del_key, "%s/%" PRIu64 "-%" PRIu64 "-%" PRIu64 ".%s", MW_DELETION_DIR,
             f->f->id, d->read_version, d->id, bitmap ? "bin" : "arrow");
    mw_compact__get(c, &f->del_req, &f->io, f->del_key);
  }
  if (r->pending == 0) mw_compact__next(c);
}

/* --------------------------------------------------- pool: the commit */

/* The fragment's existing deletion offsets (ascending). */
static int old_deletions(fwork_t *f, uint32_t **old, size_t *n_old, mw_err_t *err) {
  const Lance__Table__DeletionFile *d = f->f->deletion_file;
  *old = NULL;
  *n_old = 0;
  if (d == NULL) return 0;
  bool bitmap = d->file_type == LANCE__TABLE__DELETION_FILE__DELETION_FILE_TYPE__BITMAP;
  int rc = bitmap ? mw_deletion_decode(f->del_req.buf.data, f->del_req.buf.len, f->f->physical_rows, old,
                                       n_old, err)
                  : mw_deletion_arrow_decode(f->del_req.buf.data, f->del_req.buf.len, f->f->physical_rows,
                                             old, n_old, err);
  if (rc < 0) return mw_err_set(err, rc, "fragment %" PRIu64 ": deletion file %s", f->f->id, f->del_key);
  return 0;
}

/* A fragment that stays: its new deletion file (or its removal). */
static int frag_deletions(mw_compact_t *c, fwork_t *f, uint64_t read_version, const uint32_t *u, int64_t k,
                          size_t n_old, mw_err_t *err) {
  if ((size_t)k == n_old) return 0; /* every hit was deleted already */
  f->change = true;
  c->run.rows_masked += (uint64_t)k - n_old;
  f->num_deleted = (uint64_t)k;
  if ((uint64_t)k >= f->f->physical_rows) {
    f->remove = true;
    return 0;
  }
  mw_compact__random(&f->del_id, sizeof f->del_id);
  char name[MW_DELETION_NAME_BYTES];
  mw_deletion_name_format(f->f->id, read_version, f->del_id, name, sizeof name);
  snprintf(f->del_put_key, sizeof f->del_put_key, "%s/%s", MW_DELETION_DIR, name);
  int rc = mw_deletion_encode(u, (size_t)k, &f->del_new, err);
  if (rc < 0 || c->t->cfg.skip_readback) return rc < 0 ? rc : 0;
  rc = mw_readback_deletions(f->del_new.data, f->del_new.len, f->f->physical_rows, u, (size_t)k, f->del_put_key,
                             err);
  c->run.refused |= rc == -EBADMSG;
  return rc;
}

/* A folded fragment: its live rows, minus the superseded ones, into `out`
 * (the base schema, columns matched by field id). */
static int fold_rows(const mw_table_t *t, fwork_t *f, const uint32_t *dead, int64_t n_dead, mw_batch_t *out,
                     mw_err_t *err) {
  mw_datafile_t df;
  mw_batch_t fb = {0};
  int rc = mw_datafile_open(&df, f->data_req.buf.data, f->data_req.buf.len, NULL, err);
  if (rc < 0) return rc;
  rc = mw_datafile_read_batch(&df, &fb, err);
  if (rc == 0 && (uint64_t)fb.n_rows != f->f->physical_rows)
    rc = mw_err_set(err, -EBADMSG, "fragment %" PRIu64 ": %" PRId64 " rows, the manifest says %" PRIu64,
                    f->f->id, fb.n_rows, f->f->physical_rows);
  const mw_schema_t *bs = &t->meta.schema;
  size_t *map = calloc(bs->n_fields + 1, sizeof *map);
  if (rc == 0 && map == NULL) rc = -ENOMEM;
  for (size_t i = 0; rc == 0 && i < bs->n_fields; i++) {
    size_t j = 0;
    while (j < df.schema.n_fields && df.schema.fields[j].id != bs->fields[i].id) j++;
    if (j == df.schema.n_fields || df.schema.fields[j].type != bs->fields[i].type)
      rc = mw_err_set(err, -ENOTSUP, "fragment %" PRIu64 ": no column '%s' to fold", f->f->id,
                      bs->fields[i].name);
    map[i] = j;
  }
  int64_t d = 0;
  for (int64_t row = 0; rc == 0 && row < fb.n_rows; row++) {
    if (d < n_dead && dead[d] == (uint32_t)row) {
      d++;
      continue;
    }
    for (size_t i = 0; rc == 0 && i < bs->n_fields; i++)
      rc = mw_column_append_range(&out->cols[i], &fb.cols[map[i]], &bs->fields[i], row, 1);
    out->n_rows++;
  }
  free(map);
  if (fb.cols) mw_batch_free(&fb);
  mw_datafile_close(&df);
  mw_buf_free(&f->data_req.buf);
  return rc;
}

/* The new fragment's data file from parts[0..n) (keys kp), read back
 * before anything else (a refusal sets r->refused), and its key index. */
static int write_fragment(mw_compact_t *c, const mw_batch_t *const *parts, size_t n, const mw_column_t *kp,
                          mw_err_t *err) {
  run_t *r = &c->run;
  const mw_table_t *t = c->t;
  const mw_field_t *pk = &t->meta.schema.fields[c->pk_base];
  uint8_t u[16];
  mw_compact__random(u, sizeof u);
  mw_data_file_name(u, r->data_name);
  /* base fragments live long and are read often: zstd by default (compaction_zstd) */
  mw_sstable_opts_t o = {.zstd = c->cfg.zstd, .zone_seeds = t->cfg.zone_write_seeds,
                         .seed_rows_per_zone = t->cfg.zone_seed_rows_per_zone};
  int rc = mw_sstable_data_file(&t->meta.schema, parts, n, &o, &r->data_file, err);
  if (rc == 0 && !t->cfg.skip_readback) {
    char name[MW_COMPACT_KEY_BYTES];
    snprintf(name, sizeof name, "data/%s", r->data_name);
    rc = mw_readback_data_file(&t->meta.schema, parts, n, r->data_file.data, r->data_file.len, name, err);
    r->refused |= rc == -EBADMSG;
  }
  if (rc == 0) rc = mw_keyindex_build(pk, kp, r->data_name, &r->data_keys, err);
  /* the next run's lookups read it from the cache: no GET, and no
   * whole-index check of bytes that never left this process */
  if (rc == 0) {
    rc = mw_keyindex_decode_built(r->data_keys.data, r->data_keys.len, pk, &r->new_ki, err);
    r->has_new_ki = true;
  }
  return rc;
}

/* The new fragment: every group's rows and the folded rows, one data file
 * and its key index. */
static int new_fragment(mw_compact_t *c, mw_batch_t *folded, mw_err_t *err) {
  run_t *r = &c->run;
  const mw_table_t *t = c->t;
  const mw_schema_t *bs = &t->meta.schema;
  const mw_field_t *pk = &bs->fields[c->pk_base];
  size_t max_parts = 1;
  for (size_t k = 0; k < r->n_groups; k++) max_parts += r->groups[k].merge.n_parts;
  const mw_batch_t **parts = calloc(max_parts + 1, sizeof *parts);
  mw_column_t keys;
  int rc = parts ? mw_column_init(&keys, pk) : -ENOMEM;
  size_t n = 0;
  r->new_rows = 0;
  for (size_t k = 0; parts && k < r->n_groups; k++)
    for (size_t i = 0; i < r->groups[k].merge.n_parts; i++)
      if (r->groups[k].merge.parts[i].n_rows > 0) parts[n++] = &r->groups[k].merge.parts[i];
  if (parts && folded->n_rows > 0) parts[n++] = folded;
  /* the keys of the rows, in order: one shard's merge with no winning
   * tombstone and nothing folded (the usual run) has them already, its
   * merged keys; one part has them as its PK column; else concatenated */
  const mw_merge_t *m0 = r->n_groups == 1 ? &r->groups[0].merge : NULL;
  const mw_column_t *kp = &keys;
  if (m0 != NULL && folded->n_rows == 0 && m0->tombstones == 0) kp = &m0->keys;
  else if (n == 1) kp = &parts[0]->cols[c->pk_base];
  for (size_t i = 0; rc == 0 && i < n; i++) {
    if (kp == &keys) rc = mw_column_append_range(&keys, &parts[i]->cols[c->pk_base], pk, 0, parts[i]->n_rows);
    r->new_rows += (uint64_t)parts[i]->n_rows;
  }
  assert(rc < 0 || n == 0 || (uint64_t)kp->length == r->new_rows);
  if (rc == 0 && n > 0) rc = write_fragment(c, parts, n, kp, err);
  if (parts) mw_column_free(&keys);
  free(parts);
  return rc;
}

static int build_commit(mw_compact_t *c, mw_err_t *err) {
  run_t *r = &c->run;
  const mw_table_t *t = c->t;
  size_t nd = 0, nr = 0;
  mw_bu_deletion_t *dels = calloc(r->n_frags + 1, sizeof *dels);
  uint64_t *removed = calloc(r->n_frags + 1, sizeof *removed);
  mw_compacted_sstable_t *cs = calloc(r->n_groups + 1, sizeof *cs);
  int32_t *ids = calloc(MW_DF_FIELDS_MAX, sizeof *ids), *cols = calloc(MW_DF_FIELDS_MAX, sizeof *cols);
  int rc = dels && removed && cs && ids && cols ? 0 : -ENOMEM;
  /* the new data file (2.2): one column per leaf; lists and structs are
   * not listed (datafile_fields.h: LanceDB refuses any other mapping) */
  int ncols = rc == 0 ? mw_datafile_fields(&t->meta.schema, 2, 2, ids, cols, MW_DF_FIELDS_MAX, err) : 0;
  if (ncols < 0) rc = ncols;
  for (size_t i = 0; rc == 0 && i < r->n_frags; i++) {
    fwork_t *f = &r->frags[i];
    if (f->remove || f->fold) removed[nr++] = f->f->id;
    else if (f->change)
      dels[nd++] = (mw_bu_deletion_t){.fragment_id = f->f->id, .kind = MW_DELETION_BITMAP, .id = f->del_id,
                                      .num_deleted_rows = f->num_deleted};
  }
  for (size_t k = 0; rc == 0 && k < r->n_groups; k++) {
    cs[k].generation = r->groups[k].last_gen;
    memcpy(cs[k].shard_id, r->groups[k].shard->ms.shard_id, 16);
  }
  mw_bu_fragment_t frag = {.data_file = r->data_name, .file_size_bytes = r->data_file.len,
                           .physical_rows = r->new_rows, .field_ids = ids, .column_indices = cols,
                           .n_columns = rc == 0 ? (size_t)ncols : 0};
  mw_base_update_t u = {.deletions = dels, .n_deletions = nd, .removed = removed, .n_removed = nr,
                        .fragments = &frag, .n_fragments = r->new_rows > 0 ? 1 : 0,
                        .compacted = cs, .n_compacted = r->n_groups,
                        /* seeded fragments: the commit carries FLAG_ZONE_WRITE_SEEDS (docs/sstable.md) */
                        .add_feature_flags = t->cfg.zone_write_seeds && r->new_rows > 0
                                                 ? MW_FLAG_ZONE_WRITE_SEEDS : 0};
  if (rc == 0) {
    rc = mw_base_update_build(&r->bop.meta, &u, &r->commit, err);
    r->has_commit = rc == 0;
  }
  r->removed = nr;
  free(dels);
  free(removed);
  free(cs);
  free(ids);
  free(cols);
  return rc;
}

void mw_compact__work_build(mw_compact_t *c) {
  run_t *r = &c->run;
  const mw_table_t *t = c->t;
  mw_err_t *err = &r->work_err;
  uint64_t read_version = r->bop.meta.version;
  mw_batch_t folded;
  int rc = mw_batch_init(&folded, &t->meta.schema);
  r->rows_masked = r->folded = r->folded_rows = 0;
  for (size_t i = 0; rc == 0 && i < r->n_frags; i++) {
    fwork_t *f = &r->frags[i];
    if (f->hits.len == 0 && !f->fold) continue;
    uint32_t *hits = (uint32_t *)(void *)f->hits.data, *old = NULL, *u = NULL;
    size_t n_hits = f->hits.len / 4, n_old = 0;
    if (n_hits > 1) qsort(hits, n_hits, 4, mw_u32_cmp); /* one fragment's hits are sorted already */
    rc = old_deletions(f, &old, &n_old, err);
    int64_t k = rc == 0 ? mw_deletion_union(old, n_old, hits, n_hits, &u) : 0;
    if (k < 0) rc = (int)k;
    if (rc == 0 && f->fold) {
      int64_t before = folded.n_rows;
      rc = fold_rows(t, f, u, k, &folded, err);
      r->rows_masked += (uint64_t)k - n_old;
      r->folded++;
      r->folded_rows += (uint64_t)(folded.n_rows - before);
    } else if (rc == 0) {
      rc = frag_deletions(c, f, read_version, u, k, n_old, err);
    }
    free(old);
    free(u);
  }
  if (rc == 0) rc = new_fragment(c, &folded, err);
  if (rc == 0) rc = build_commit(c, err);
  mw_batch_free(&folded);
  r->work_rc = rc;
}
