/*
 * flush.c — see flush.h.
 *
 * State: CHECK (check_fenced) -> BUILD (the job's parts on the thread
 * pool, at once or one after another in one work item; each part reads its
 * files back there; assembled on the loop after the last) -> PUTS (all
 * files at once; the SSTable's own Lance manifest is among them, but
 * nobody reads the directory before the shard manifest names it) -> COMMIT.
 * The memtable is only read, never changed, so the thread-pool build may
 * share it with the loop thread. Nothing is encoded or decoded on the loop
 * but the SSTable's own manifest (a few hundred bytes).
 */
#include "shard/flush.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bgprio.h"
#include "common/log.h"
#include "common/metrics.h"

void mw_flush_init(mw_flush_t *f, uv_loop_t *loop, mw_storage_t *st, mw_mstore_t *ms, bool zstd) {
  assert(f != NULL);
  assert(loop != NULL);
  assert(st != NULL);
  assert(ms != NULL);
  memset(f, 0, sizeof *f);
  f->loop = loop;
  f->st = st;
  f->ms = ms;
  f->zstd = zstd;
  mw_mstore_op_init(&f->op);
  f->op.data = f;
  for (size_t i = 0; i < MW_SSTABLE_PARTS; i++) f->works[i].data = f;
  for (size_t i = 0; i < MW_SSTABLE_MAX_FILES; i++) {
    mw_storage_req_init(&f->reqs[i]);
    f->reqs[i].data = f;
  }
}

void mw_flush_free(mw_flush_t *f) {
  if (f == NULL) return;
  assert(!f->busy);
  mw_sstable_free(&f->sst);
  mw_mstore_op_free(&f->op);
  for (size_t i = 0; i < MW_SSTABLE_MAX_FILES; i++) mw_storage_req_cleanup(&f->reqs[i]);
}

static void finish(mw_flush_t *f, int status) {
  assert(f->busy);
  f->busy = false;
  if (status < 0 && f->err.code == 0)
    mw_err_set(&f->err, status, "shard %s: flush of generation %" PRIu64 " failed: %s",
               f->ms->shard_str, f->mt->generation, mw_strerror(status));
  if (status < 0) mw_log_debug("%s", f->err.msg); /* the shard logs it once */
  f->cb(f, status);
}

static int update_fn(void *arg, const mw_shard_manifest_t *cur, mw_shard_manifest_t *next,
                     mw_err_t *err) {
  mw_flush_t *f = arg;
  (void)err;
  assert(f->busy);
  assert(f->outstanding == 0); /* every file of the SSTable is stored before the manifest names it */
  int rc = mw_shard_manifest_add_sstable(next, f->sst.generation, f->sst.dir_name,
                                         f->sst.in_memory_bytes, f->sst.physical_rows,
                                         f->sst.primary_key_bytes);
  if (rc < 0) return rc;
  next->replay_after_wal_entry_position = f->covered;
  next->wal_entry_position_last_seen =
      cur->wal_entry_position_last_seen > f->covered ? cur->wal_entry_position_last_seen : f->covered;
  next->current_generation = f->sst.generation + 1;
  return 0;
}

static void on_commit(mw_mstore_op_t *op, int status) {
  mw_flush_t *f = op->data;
  assert(f->busy);
  assert(f->put_err == 0); /* a failed put never commits */
  if (status < 0) {
    mw_err_set(&f->err, status, "%s", op->err.msg);
    finish(f, status);
    return;
  }
  mw_log_info("shard %s: flushed generation %" PRIu64 " as %s (%" PRIu64 " rows, WAL <= %" PRIu64
              ", manifest v%" PRIu64 ")",
              f->ms->shard_str, f->sst.generation, f->sst.dir_name, f->sst.physical_rows,
              f->covered, op->m.version);
  finish(f, 0);
}

static void commit(mw_flush_t *f) {
  assert(f->outstanding == 0);
  assert(f->put_err == 0);
  int rc = mw_mstore_commit_update(f->ms, &f->op, f->epoch, update_fn, f, on_commit);
  if (rc < 0) {
    mw_err_set(&f->err, rc, "%s", f->op.err.msg[0] ? f->op.err.msg : mw_strerror(rc));
    finish(f, rc);
  }
}

static void on_put(mw_storage_req_t *req, int status) {
  mw_flush_t *f = req->data;
  assert(f->busy);
  assert(f->outstanding > 0);
  if (status < 0 && f->put_err == 0) {
    f->put_err = status;
    mw_err_set(&f->err, status, "shard %s: put %s failed: %s", f->ms->shard_str,
               f->keys[req - f->reqs], mw_strerror(status));
  }
  if (--f->outstanding > 0) return;
  if (f->put_err < 0) finish(f, f->put_err);
  else commit(f);
}

static void put_files(mw_flush_t *f) {
  assert(f->sst.n_files > 0);
  assert(f->sst.n_files <= MW_SSTABLE_MAX_FILES);
  f->put_err = 0;
  f->outstanding = f->sst.n_files;
  for (size_t i = 0; i < f->sst.n_files; i++) {
    const mw_sstable_file_t *file = &f->sst.files[i];
    int n = snprintf(f->keys[i], MW_FLUSH_KEY_BYTES, "%s%s", f->ms->shard_dir, file->path);
    int rc = (n < 0 || n >= MW_FLUSH_KEY_BYTES) ? -ENAMETOOLONG
             : mw_storage_put(f->st, &f->reqs[i], f->keys[i], file->bytes.data, file->bytes.len, on_put);
    if (rc < 0) {
      if (f->put_err == 0) {
        f->put_err = rc;
        mw_err_set(&f->err, rc, "shard %s: put %s refused", f->ms->shard_str, f->keys[i]);
      }
      if (--f->outstanding == 0) finish(f, f->put_err);
    }
  }
}

static const mw_batch_t **batch_ptrs(const mw_memtable_t *mt) {
  const mw_batch_t **ptrs = malloc((mt->n_batches ? mt->n_batches : 1) * sizeof *ptrs);
  for (size_t i = 0; ptrs != NULL && i < mt->n_batches; i++) ptrs[i] = &mt->batches[i];
  return ptrs;
}

/* One part of the job, on a pool thread: it reads the frozen MemTable
 * (nothing changes it until the flush finishes) and writes only its own
 * part's outputs in the job. A serial job runs every part in this one work
 * item, stopping at the first failure. */
static void work_cb(uv_work_t *w) {
  mw_flush_t *f = w->data;
  int part = (int)(w - f->works);
  assert(part >= 0);
  assert(part < MW_SSTABLE_PARTS);
  assert(!f->serial || part == 0);
  int last = f->serial ? MW_SSTABLE_PARTS - 1 : part;
  int nice_old = mw_bgprio_enter(); /* never ahead of the ack path (bgprio.h) */
  for (int i = part; i <= last; i++)
    if ((f->work_rc[i] = mw_sstable_job_run(f->job, i, &f->work_err[i])) < 0) break;
  mw_bgprio_leave(nice_old);
}

static void after_work_cb(uv_work_t *w, int status) {
  mw_flush_t *f = w->data;
  int part = (int)(w - f->works);
  if (status < 0) f->work_rc[part] = status;
  assert(f->parts_left > 0);
  if (--f->parts_left > 0) return;
  /* the last part: assemble on the loop (the manifest, the file list) */
  int rc = 0;
  const char *why = NULL;
  for (int i = 0; i < MW_SSTABLE_PARTS && rc == 0; i++)
    if (f->work_rc[i] < 0) {
      rc = f->work_rc[i];
      why = f->work_err[i].msg[0] ? f->work_err[i].msg : mw_strerror(rc);
    }
  mw_err_t err = {0};
  f->refused = mw_sstable_job_refused(f->job);
  if (rc < 0) mw_sstable_job_free(f->job);
  else if ((rc = mw_sstable_job_end(f->job, &f->sst, &err)) < 0) why = err.msg;
  f->job = NULL;
  free(f->ptrs);
  f->ptrs = NULL;
  if (rc < 0) {
    mw_err_set(&f->err, rc, "shard %s: SSTable build: %s", f->ms->shard_str, why);
    finish(f, rc);
    return;
  }
  put_files(f);
}

/* Begin the job on the loop (checks, accounting, names), then queue every
 * part. 0, or the error that refused the job before any part ran. */
static int build_start(mw_flush_t *f, mw_err_t *err) {
  const mw_memtable_t *mt = f->mt;
  assert(f->job == NULL);
  assert(f->ptrs == NULL);
  if ((f->ptrs = batch_ptrs(mt)) == NULL) return -ENOMEM;
  mw_sstable_opts_t o = {.zstd = f->zstd, .seed = f->seed, .zone_seeds = f->zone_seeds,
                         .seed_rows_per_zone = f->seed_rows_per_zone, .vindexes = f->vindexes,
                         .n_vindexes = f->n_vindexes, .sindexes = f->sindexes, .n_sindexes = f->n_sindexes,
                         .skip_readback = f->skip_readback};
  int rc = mw_sstable_job_begin(mt->schema, f->ptrs, mt->n_batches, mt->generation, &o, &f->job, err);
  if (rc < 0) {
    free(f->ptrs);
    f->ptrs = NULL;
    return rc;
  }
  /* The threads storage engine runs its requests on the same pool (4
   * threads by default): parts at once there would keep WAL puts waiting
   * behind a flush, so the job runs as one work item, as a whole build;
   * so does a small MemTable, whose parts cost less than three hand-offs. */
  f->serial = strcmp(mw_storage_backend_name(f->st), "threads") == 0 || mt->n_rows <= MW_FLUSH_SERIAL_ROWS;
  int n_works = f->serial ? 1 : MW_SSTABLE_PARTS;
  f->parts_left = 0;
  for (int i = 0; i < MW_SSTABLE_PARTS; i++) {
    mw_err_clear(&f->work_err[i]);
    f->work_rc[i] = 0;
  }
  for (int i = 0; i < n_works; i++) {
    rc = uv_queue_work(f->loop, &f->works[i], work_cb, after_work_cb);
    if (rc < 0) { /* cannot happen with a valid loop; the job never ends */
      f->work_rc[i] = rc;
      mw_err_set(&f->work_err[i], rc, "uv_queue_work: %s", uv_strerror(rc));
      continue;
    }
    f->parts_left++;
  }
  if (f->parts_left > 0) return 0;
  mw_sstable_job_free(f->job);
  f->job = NULL;
  free(f->ptrs);
  f->ptrs = NULL;
  return mw_err_set(err, rc, "uv_queue_work: %s", uv_strerror(rc));
}

static void on_checked(mw_mstore_op_t *op, int status) {
  mw_flush_t *f = op->data;
  assert(f->busy); /* the fence check is the flush's first step */
  assert(f->mt != NULL);
  if (status < 0 && status != -ENOENT) {
    mw_err_set(&f->err, status, "%s", op->err.msg);
    finish(f, status);
    return;
  }
  mw_sstable_free(&f->sst);
  memset(&f->sst, 0, sizeof f->sst);
  mw_err_t err = {0};
  int rc = build_start(f, &err);
  if (rc < 0) {
    mw_err_set(&f->err, rc, "shard %s: SSTable build: %s", f->ms->shard_str, err.msg);
    finish(f, rc);
  }
}

mw_metric_t *mw_flush_refused_metric(const char *op) {
  assert(op != NULL);
  static const char *const label[] = {"op"};
  mw_metric_family_t *fam = mw_metrics_register(
      mw_metrics_default(), MW_METRIC_COUNTER, "memwald_readback_refused_total",
      "Files not published: they did not read back as the rows written (op=flush: an SSTable, "
      "op=compaction: a base fragment); retried.", label, 1, NULL, 0);
  const char *v[] = {op};
  return fam ? mw_metric_series(fam, v) : NULL;
}

int mw_flush_start(mw_flush_t *f, const mw_memtable_t *mt, uint64_t epoch, uint64_t covered,
                   mw_flush_cb cb) {
  assert(f != NULL);
  assert(mt != NULL);
  assert(cb != NULL);
  if (f->busy) return -EBUSY;
  if (mt->n_rows == 0) return -EINVAL;
  f->mt = mt;
  f->epoch = epoch;
  f->covered = covered;
  f->cb = cb;
  f->refused = false;
  mw_err_clear(&f->err);
  int rc = mw_mstore_check_fenced(f->ms, &f->op, epoch, on_checked);
  if (rc == 0) f->busy = true;
  return rc;
}
