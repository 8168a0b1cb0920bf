/*
 * compact_sst.c — the compactor's input: the picked SSTables of each shard
 * of a run, read back and merged (compact_int.h has the map of the files).
 *
 * For each SSTable `<8hex>_gen_<G>` (memwal.md §1.4): GET its own dataset
 * manifest, then its data file and deletion file (.bin or LanceDB's .arrow).
 * On the pool: decode the data file, move its columns into a batch of the
 * table schema (by field id; `_tombstone` by name, since other writers may
 * number it differently), apply the deletion file, and merge each shard's
 * SSTables with lsm_merge.h. Shards are merged apart: LanceDB's reader does
 * not deduplicate across shards, and neither does compaction. Each group's
 * winning keys (sorted) are the base lookups' probes, read in place.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "lance/datafile.h"
#include "lance/deletion.h"
#include "shard/compact_int.h"

void mw_compact__group_free(group_t *g) {
  for (size_t i = 0; i < g->n_ssts; i++) {
    sst_in_t *s = &g->ssts[i];
    mw_storage_req_cleanup(&s->req);
    mw_storage_req_cleanup(&s->del_req);
    if (s->batch.cols) mw_batch_free(&s->batch);
    free(s->deleted);
    free(s->dir);
  }
  free(g->ssts);
  if (g->has_merge) mw_merge_free(&g->merge);
  memset(g, 0, sizeof *g);
}

static int cmp_gen(const void *a, const void *b) {
  const mw_sstable_ref_t *x = *(const mw_sstable_ref_t *const *)a, *y = *(const mw_sstable_ref_t *const *)b;
  return x->generation < y->generation ? -1 : x->generation > y->generation;
}

int mw_compact__pick(mw_compact_t *c, group_t *g, const mw_shard_manifest_t *m, uint64_t *budget_ssts,
                     uint64_t *budget_rows) {
  (void)c;
  const mw_sstable_ref_t **v = malloc((m->n_sstables + 1) * sizeof *v);
  if (v == NULL) return -ENOMEM;
  size_t n = 0;
  for (size_t i = 0; i < m->n_sstables; i++)
    if (m->sstables[i].generation > g->compacted_before) v[n++] = &m->sstables[i];
  qsort(v, n, sizeof *v, cmp_gen);
  size_t k = 0;
  while (k < n && *budget_ssts > 0 && (k == 0 || v[k]->physical_rows <= *budget_rows)) {
    *budget_rows -= v[k]->physical_rows < *budget_rows ? v[k]->physical_rows : *budget_rows;
    (*budget_ssts)--;
    k++;
  }
  g->ssts = calloc(k + 1, sizeof *g->ssts);
  if (g->ssts == NULL) {
    free(v);
    return -ENOMEM;
  }
  for (size_t i = 0; i < k; i++) {
    sst_in_t *s = &g->ssts[i];
    s->generation = v[i]->generation;
    s->in_memory_bytes = v[i]->in_memory_bytes;
    mw_storage_req_init(&s->req);
    mw_storage_req_init(&s->del_req);
    if ((s->dir = strdup(v[i]->path)) == NULL) {
      free(v);
      return -ENOMEM;
    }
    g->n_ssts++;
  }
  g->last_gen = k ? v[k - 1]->generation : 0;
  free(v);
  return (int)k;
}

void mw_compact__sst_manifests(mw_compact_t *c) {
  run_t *r = &c->run;
  assert(mw_compact__may_follow(r->phase, R_SST_MANIFEST));
  r->phase = R_SST_MANIFEST;
  for (size_t k = 0; k < r->n_groups; k++) {
    group_t *g = &r->groups[k];
    for (size_t i = 0; i < g->n_ssts; i++) {
      sst_in_t *s = &g->ssts[i];
      snprintf(s->key, sizeof s->key, "%s%s/%s", g->shard->ms.shard_dir, s->dir, MW_COMPACT_SST_MANIFEST);
      mw_compact__get(c, &s->req, &s->io, s->key);
    }
  }
  if (r->pending == 0) mw_compact__next(c);
}

/* From an SSTable's own manifest: its data file and deletion file. */
static int parse_manifest(const group_t *g, sst_in_t *s, mw_err_t *err) {
  mw_section_t msg;
  mw_dmanifest_t m = {0};
  int rc = mw_dmanifest_unframe(s->req.buf.data, s->req.buf.len, &msg, NULL, err);
  if (rc == 0) rc = mw_dmanifest_decode(msg.data, msg.len, &m, err);
  if (rc == 0 && (m.pb->n_fragments != 1 || m.pb->fragments[0]->n_files != 1))
    rc = mw_err_set(err, -ENOTSUP, "SSTable %s: %zu fragments (one with one data file expected)", s->dir,
                    m.pb->n_fragments);
  if (rc == 0) {
    const Lance__Table__DataFragment *f = m.pb->fragments[0];
    const char *sdir = g->shard->ms.shard_dir;
    s->physical_rows = f->physical_rows;
    snprintf(s->key, sizeof s->key, "%s%s/data/%s", sdir, s->dir, f->files[0]->path);
    s->has_del = f->deletion_file != NULL;
    if (s->has_del) {
      const Lance__Table__DeletionFile *d = f->deletion_file;
      s->del_kind = d->file_type == LANCE__TABLE__DELETION_FILE__DELETION_FILE_TYPE__BITMAP;
      snprintf(s->del_key, sizeof s->del_key, "%s%s/%s/%" PRIu64 "-%" PRIu64 "-%" PRIu64 ".%s", sdir,
               s->dir, MW_DELETION_DIR, f->id, d->read_version, d->id, s->del_kind ? "bin" : "arrow");
    }
  }
  if (rc < 0) mw_err_set(err, rc, "SSTable %s: manifest refused", s->dir);
  mw_dmanifest_free(&m);
  return rc;
}

void mw_compact__sst_files(mw_compact_t *c) {
  run_t *r = &c->run;
  for (size_t k = 0; k < r->n_groups; k++) {
    group_t *g = &r->groups[k];
    for (size_t i = 0; i < g->n_ssts; i++) {
      sst_in_t *s = &g->ssts[i];
      int rc = s->io.status;
      if (rc < 0) {
        mw_err_set(&r->err, rc, "shard %s: SSTable %s (generation %" PRIu64 "): GET %s: %s", g->shard->id_str,
                   s->dir, s->generation, s->key, mw_strerror(rc));
      } else {
        rc = parse_manifest(g, s, &r->err);
      }
      if (rc < 0) {
        mw_compact__fail(c, rc);
        return;
      }
    }
  }
  assert(mw_compact__may_follow(r->phase, R_SST_FILES));
  r->phase = R_SST_FILES;
  for (size_t k = 0; k < r->n_groups; k++) {
    group_t *g = &r->groups[k];
    for (size_t i = 0; i < g->n_ssts; i++) {
      sst_in_t *s = &g->ssts[i];
      mw_compact__get(c, &s->req, &s->io, s->key);
      if (s->has_del) mw_compact__get(c, &s->del_req, &s->io, s->del_key);
    }
  }
  if (r->pending == 0) mw_compact__next(c);
}

/* ---------------------------------------------------------------- pool */

static int decode(const mw_table_t *t, sst_in_t *s, mw_err_t *err) {
  mw_datafile_t f;
  mw_batch_t fb = {0};
  int rc = mw_datafile_open(&f, s->req.buf.data, s->req.buf.len, NULL, err);
  if (rc < 0) return rc;
  if ((rc = mw_datafile_read_batch(&f, &fb, err)) < 0) goto done;
  if ((uint64_t)fb.n_rows != s->physical_rows) {
    rc = mw_err_set(err, -EBADMSG, "%" PRId64 " rows, the manifest says %" PRIu64, fb.n_rows, s->physical_rows);
    goto done;
  }
  if ((rc = mw_batch_init(&s->batch, &t->schema)) < 0) goto done;
  s->batch.n_rows = fb.n_rows;
  for (size_t i = 0; i < t->schema.n_fields && rc == 0; i++) {
    const mw_field_t *want = &t->schema.fields[i];
    bool tomb = i == t->schema.n_fields - 1;
    size_t j = 0;
    while (j < f.schema.n_fields && (tomb ? strcmp(f.schema.fields[j].name, want->name) != 0
                                          : f.schema.fields[j].id != want->id))
      j++;
    if (j == f.schema.n_fields || f.schema.fields[j].type != want->type) {
      rc = mw_err_set(err, -ENOTSUP, "no column '%s' of type %s (schema changed?)", want->name,
                      mw_type_name(want->type));
      break;
    }
    mw_column_free(&s->batch.cols[i]); /* mw_batch_init's empty column, children and all */
    s->batch.cols[i] = fb.cols[j];
    memset(&fb.cols[j], 0, sizeof fb.cols[j]);
  }
  if (rc == 0 && mw_batch_validate(&s->batch) < 0)
    rc = mw_err_set(err, -EBADMSG, "the decoded rows are not a valid batch");
done:
  if (fb.cols) mw_batch_free(&fb);
  mw_datafile_close(&f);
  mw_buf_free(&s->req.buf); /* the decoded rows own their buffers now */
  return rc;
}

static int deletions(sst_in_t *s, mw_err_t *err) {
  if (!s->has_del) return 0;
  int rc = s->del_kind ? mw_deletion_decode(s->del_req.buf.data, s->del_req.buf.len, s->physical_rows,
                                            &s->deleted, &s->n_deleted, err)
                       : mw_deletion_arrow_decode(s->del_req.buf.data, s->del_req.buf.len,
                                                  s->physical_rows, &s->deleted, &s->n_deleted, err);
  mw_buf_free(&s->del_req.buf);
  return rc;
}

static int merge_group(const mw_table_t *t, group_t *g, mw_err_t *err) {
  int rc = 0;
  for (size_t i = 0; i < g->n_ssts && rc == 0; i++) {
    sst_in_t *s = &g->ssts[i];
    rc = decode(t, s, err);
    if (rc == 0) rc = deletions(s, err);
    if (rc < 0)
      mw_err_set(err, rc, "shard %s: SSTable %s (generation %" PRIu64 ")", g->shard->id_str, s->dir, s->generation);
  }
  mw_merge_run_t *runs = calloc(g->n_ssts + 1, sizeof *runs);
  if (rc == 0 && runs == NULL) rc = -ENOMEM;
  for (size_t i = 0; rc == 0 && i < g->n_ssts; i++)
    runs[i] = (mw_merge_run_t){.batch = &g->ssts[i].batch, .movable = &g->ssts[i].batch, /* freed below */
                               .deleted = g->ssts[i].deleted,
                               .n_deleted = g->ssts[i].n_deleted, .generation = g->ssts[i].generation};
  if (rc == 0) {
    rc = mw_merge_runs(&t->schema, &t->meta.schema, runs, g->n_ssts, &g->merge, err);
    g->has_merge = true;
  }
  free(runs);
  /* the merge copied (or moved) every winner: the SSTables are not needed any more */
  for (size_t i = 0; i < g->n_ssts; i++) {
    if (g->ssts[i].batch.cols) mw_batch_free(&g->ssts[i].batch);
    free(g->ssts[i].deleted);
    g->ssts[i].deleted = NULL;
  }
  return rc;
}

void mw_compact__work_merge(mw_compact_t *c) {
  run_t *r = &c->run;
  const mw_table_t *t = c->t;
  mw_err_t *err = &r->work_err;
  int rc = 0;
  r->n_keys = 0;
  for (size_t k = 0; k < r->n_groups && rc == 0; k++) {
    rc = merge_group(t, &r->groups[k], err);
    if (rc == 0) r->n_keys += r->groups[k].merge.n_keys;
  }
  assert(rc < 0 || r->n_keys >= 0);
  r->work_rc = rc;
}
