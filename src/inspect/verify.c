/*
 * verify.c — the whole-table verifier (see verify.h for the invariants).
 *
 * Order: list every key once; read the base table's manifests (the MemWAL
 * index's compacted_sstables is needed by the shard checks); check each
 * shard (manifest chain, WAL, SSTables); then the base table's latest
 * fragments and transaction files. A problem never stops the walk: every
 * object that can be checked is, so one run names everything that is wrong.
 *
 * Problem lines (text output) are `KEY: what is wrong`, e.g.
 *   _mem_wal/aa48…e2/wal/0010…0.arrow: WAL position 4 is missing (positions
 *       above the replay point 1 must be contiguous up to 6)
 */
#include "inspect/verify.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inspect/show.h"
#include "lance/bloom.h"
#include "lance/datafile.h"
#include "lance/datafile_fields.h"
#include "lance/dataset_manifest.h"
#include "lance/deletion.h"
#include "lance/ipc.h"
#include "lance/legacy_v1.h"
#include "lance/pk_index.h"
#include "lance/vindex_file.h"
#include "lance/shard_manifest.h"
#include "lance/transaction.h"
#include "lance/zone_seed.h"

/* Keys are composed into MW_STORAGE_KEY_MAX_BYTES buffers; a key that would
 * not fit is longer than any key the storage layer accepts, so a cut one is
 * simply reported missing. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif

#define MEM_WAL "_mem_wal/"
#define SST_MANIFEST "_versions/18446744073709551614.manifest"
#define MAX_SHARDS 4096

typedef struct shard_info {
  uint8_t id[16];
  char uuid[37];
  uint64_t current_generation; /* latest manifest; 0 = none */
  bool has_manifest;
} shard_info_t;

typedef struct vctx {
  mw_sio_t *s;
  char **keys;
  size_t n;
  mw_verify_report_t *r;
  /* base table */
  mw_compacted_sstable_t *compacted;
  size_t n_compacted;
  shard_info_t *shards;
  size_t n_shards;
  char base_key[96];             /* the latest dataset manifest, for problems */
  const mw_table_meta_t *base;   /* its metadata when it has a MemWAL index, else NULL */
} vctx_t;

static void problem(vctx_t *v, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void problem(vctx_t *v, const char *key, const char *fmt, ...) {
  assert(v->r != NULL);
  assert(v->r->problems != NULL);
  assert(key != NULL);
  v->r->n_problems++;
  if (v->r->problems->n >= MW_VERIFY_MAX_PROBLEMS) return;
  va_list ap;
  va_start(ap, fmt);
  char *msg = NULL;
  if (vasprintf(&msg, fmt, ap) < 0) abort();
  va_end(ap);
  j_t *o = j_push(v->r->problems, j_obj());
  j_set(o, "key", j_str(key));
  j_set(o, "problem", j_str(msg));
  free(msg);
}

static int key_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static bool has_key(const vctx_t *v, const char *key) {
  assert(key != NULL);
  assert(v->keys != NULL || v->n == 0);
  return bsearch(&key, v->keys, v->n, sizeof *v->keys, key_cmp) != NULL;
}

/* Index of the first key >= prefix; keys with the prefix follow it. */
static size_t first_with(const vctx_t *v, const char *prefix) {
  assert(prefix != NULL);
  assert(v->keys != NULL || v->n == 0);
  size_t lo = 0, hi = v->n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (strcmp(v->keys[mid], prefix) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static bool starts(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

/* Read an object; a missing or unreadable one is a problem. */
static int fetch(vctx_t *v, const char *key, mw_buf_t *out, const char *what) {
  assert(v->s != NULL);
  assert(key != NULL);
  assert(out != NULL);
  mw_err_t err = {0};
  int rc = mw_sio_get(v->s, key, out, &err);
  if (rc == -ENOENT) problem(v, key, "%s is missing", what);
  else if (rc < 0) problem(v, key, "%s cannot be read: %s", what, err.msg);
  else v->r->decoded++;
  return rc;
}

/* ------------------------------------------------------------ data files */

typedef struct dfile {
  mw_buf_t bytes;
  mw_datafile_t f;
  bool open;
  mw_batch_t batch;
  bool have_batch;
  size_t v1_seeds;
} dfile_t;

static void dfile_free(dfile_t *d) {
  assert(d != NULL);
  assert(d->open || !d->have_batch); /* a batch is read from an open file */
  if (d->have_batch) mw_batch_free(&d->batch);
  if (d->open) mw_datafile_close(&d->f);
  mw_buf_free(&d->bytes);
  memset(d, 0, sizeof *d);
}

/* Every zone seed of an open data file, checked against its values. */
static void check_seeds(vctx_t *v, const char *key, dfile_t *d) {
  assert(key != NULL);
  assert(d->open);
  size_t pl = strlen(MW_SEED_META_PREFIX);
  const mw_datafile_t *f = &d->f;
  for (size_t i = 0; i < f->schema.meta.n; i++) {
    const mw_kv_t *kv = &f->schema.meta.items[i];
    if (strncmp(kv->key, MW_SEED_META_PREFIX, pl) != 0) continue;
    const char *col = kv->key + pl;
    mw_seed_locator_t loc;
    mw_err_t err = {0};
    int fi = mw_schema_find(&f->schema, col);
    const uint8_t *p;
    size_t n;
    if (mw_seed_locator_parse(kv->value, kv->value_len, &loc, &err) < 0) {
      problem(v, key, "zone seed of %s: %s", col, err.msg);
      continue;
    }
    if (fi < 0) {
      problem(v, key, "zone seed names column %s, which the file does not have", col);
      continue;
    }
    if (mw_datafile_global_buffer(f, loc.buffer_index, &p, &n, &err) < 0) {
      problem(v, key, "zone seed of %s: %s", col, err.msg);
      continue;
    }
    mw_seed_t s;
    int rc = mw_seed_decode(p, n, &f->schema.fields[fi], loc.rows_per_zone, f->n_rows, &s, &err);
    if (rc == 0 && d->have_batch) rc = mw_seed_check_column(&s, &f->schema.fields[fi], &d->batch.cols[fi], &err);
    if (rc < 0) problem(v, key, "zone seed of %s (global buffer %u): %s", col, loc.buffer_index, err.msg);
    else if (s.version == 1) d->v1_seeds++;
    v->r->seeds++;
    mw_seed_free(&s);
  }
}

/* Every decoded column holds the file's rows (LanceDB refuses to read
 * columns of differing lengths together). */
static void check_lengths(vctx_t *v, const char *key, const dfile_t *d) {
  assert(key != NULL);
  assert(d->open);
  for (size_t i = 0; d->have_batch && i < d->f.schema.n_fields; i++)
    if (d->batch.cols[i].length != (int64_t)d->f.n_rows) {
      problem(v, key, "column '%s' holds %" PRId64 " rows, the data file %" PRIu64, d->f.schema.fields[i].name,
              d->batch.cols[i].length, d->f.n_rows);
      return;
    }
}

/* Read and decode a data file holding `rows` rows (UINT64_MAX: any). */
static int check_datafile(vctx_t *v, const char *key, uint64_t rows, uint64_t size, dfile_t *d) {
  assert(v->s != NULL);
  assert(key != NULL);
  assert(d != NULL);
  memset(d, 0, sizeof *d);
  if (fetch(v, key, &d->bytes, "data file") < 0) return -ENOENT;
  v->r->data_files++;
  if (size != 0 && d->bytes.len != size)
    problem(v, key, "data file is %zu bytes, the manifest records %" PRIu64, d->bytes.len, size);
  mw_err_t err = {0};
  if (mw_v1_is_v1(d->bytes.data, d->bytes.len)) { /* a legacy file: decode every column it can */
    mw_v1_file_t f;
    int rc = mw_v1_open(&f, d->bytes.data, d->bytes.len, &err);
    if (rc == 0 && rows != UINT64_MAX && mw_v1_rows(&f) != rows)
      problem(v, key, "legacy v1 data file holds %" PRIu64 " rows, the manifest says %" PRIu64, mw_v1_rows(&f), rows);
    for (size_t i = 0; rc == 0 && i < f.manifest.n_fields; i++) {
      mw_field_t mf;
      mw_column_t c = {0};
      if (mw_v1_field_type(&f.manifest.fields[i], &mf, NULL) == 0 &&
          mw_v1_read_column(&f, false, &f.manifest.fields[i], &mf, &c, &err) < 0)
        rc = -EBADMSG;
      mw_column_free(&c);
    }
    if (rc < 0) problem(v, key, "legacy v1 data file does not decode: %s", err.msg);
    mw_v1_close(&f);
    return rc;
  }
  int rc = mw_datafile_open(&d->f, d->bytes.data, d->bytes.len, NULL, &err);
  if (rc < 0) {
    problem(v, key, "data file does not decode: %s", err.msg);
    return rc;
  }
  d->open = true;
  if (rows != UINT64_MAX && d->f.n_rows != rows)
    problem(v, key, "data file holds %" PRIu64 " rows, the manifest says %" PRIu64, d->f.n_rows, rows);
  if ((rc = mw_datafile_read_batch(&d->f, &d->batch, &err)) < 0) {
    problem(v, key, "data file columns do not decode: %s", err.msg);
    return rc;
  }
  d->have_batch = true;
  check_lengths(v, key, d);
  check_seeds(v, key, d);
  return 0;
}

/* One data file of a fragment: the file itself (check_datafile), then its
 * DataFile entry as LanceDB checks it before reading the fragment
 * (lance/datafile_fields.h): as many column indices as field ids, -1 for
 * lists and structs in 2.1+ files, an index for every leaf, within the
 * file's columns, and each the column the file's own schema gives that
 * field. `table` is the schema of the manifest that lists the fragment. */
static int check_fragment_file(vctx_t *v, const char *key, const mw_schema_t *table,
                               const Lance__Table__DataFragment *fr, size_t k, dfile_t *d) {
  assert(table != NULL);
  assert(fr != NULL);
  assert(k < fr->n_files);
  const Lance__Table__DataFile *df = fr->files[k];
  int rc = check_datafile(v, key, fr->physical_rows, df->file_size_bytes, d);
  if (!d->open) return rc;
  mw_df_ref_t ref = {.ids = df->fields, .n_ids = df->n_fields, .cols = df->column_indices,
                     .n_cols = df->n_column_indices, .major = df->file_major_version,
                     .minor = df->file_minor_version};
  mw_df_file_t file = {.schema = &d->f.schema, .n_columns = d->f.n_columns, .major = d->f.major,
                       .minor = d->f.minor};
  mw_err_t err = {0};
  int mrc = mw_datafile_fields_check(table, &ref, &file, &err);
  /* -ENOTSUP: a layout memwald does not write (packed structs, blobs) */
  if (mrc < 0 && mrc != -ENOTSUP)
    problem(v, key, "fragment %" PRIu64 "'s DataFile does not map this file as LanceDB reads it: %s", fr->id, err.msg);
  return rc; /* a mapping problem is reported; the file's own checks go on */
}

static void check_flags(vctx_t *v, const char *key, uint64_t rf, uint64_t wf, size_t v1_seeds) {
  assert(key != NULL);
  assert(v->r != NULL);
  bool r = rf & MW_FLAG_ZONE_WRITE_SEEDS, w = wf & MW_FLAG_ZONE_WRITE_SEEDS;
  if (r != w)
    problem(v, key, "FLAG_ZONE_WRITE_SEEDS is set in the %s feature flags only (the proposal sets both at once)",
            r ? "reader" : "writer");
  if (v1_seeds > 0 && !(r && w))
    problem(v, key, "a data file it references carries zone write seeds v1 but FLAG_ZONE_WRITE_SEEDS is not set");
}

/* ---------------------------------------------------------- deletion files */

/* Offsets of a deletion file (malloc'd), or -errno after naming the problem. */
static int read_deletion(vctx_t *v, const char *dir, uint64_t frag, const Lance__Table__DeletionFile *del,
                         uint64_t rows, uint32_t **offs, size_t *n) {
  assert(dir != NULL);
  assert(del != NULL);
  assert(offs != NULL);
  assert(n != NULL);
  bool bitmap = del->file_type == LANCE__TABLE__DELETION_FILE__DELETION_FILE_TYPE__BITMAP;
  char key[MW_STORAGE_KEY_MAX_BYTES + 1];
  snprintf(key, sizeof key, "%s_deletions/%" PRIu64 "-%" PRIu64 "-%" PRIu64 ".%s", dir, frag, del->read_version,
           del->id, bitmap ? "bin" : "arrow");
  mw_buf_t b = MW_BUF_INIT;
  *offs = NULL;
  *n = 0;
  int rc = fetch(v, key, &b, "deletion file");
  mw_err_t err = {0};
  if (rc == 0) {
    rc = bitmap ? mw_deletion_decode(b.data, b.len, rows, offs, n, &err)
                : mw_deletion_arrow_decode(b.data, b.len, rows, offs, n, &err);
    if (rc < 0) problem(v, key, "deletion file of fragment %" PRIu64 " (%" PRIu64 " rows): %s", frag, rows, err.msg);
    else if (*n != del->num_deleted_rows)
      problem(v, key, "deletion file holds %zu offsets, the manifest records num_deleted_rows %" PRIu64, *n,
              del->num_deleted_rows);
  }
  mw_buf_free(&b);
  return rc;
}

/* ------------------------------------------------------------------ SSTable */

static int pk_index_of(const mw_schema_t *s) {
  assert(s != NULL);
  assert(s->fields != NULL || s->n_fields == 0);
  for (size_t i = 0; i < s->n_fields; i++)
    if (s->fields[i].pk_position == 1) return (int)i;
  return -1;
}

/* _pk_index/page_data.lance and page_lookup.lance against the data file. */
static void check_pk_index(vctx_t *v, const char *dir, const dfile_t *d, int pk, const uint8_t *dead, int64_t rows) {
  assert(dir != NULL);
  assert(d->have_batch);
  assert(pk >= 0);
  assert(rows >= 0);
  char key[MW_STORAGE_KEY_MAX_BYTES + 1], lkey[MW_STORAGE_KEY_MAX_BYTES + 1];
  snprintf(key, sizeof key, "%s_pk_index/page_data.lance", dir);
  snprintf(lkey, sizeof lkey, "%s_pk_index/page_lookup.lance", dir);
  dfile_t pd, pl;
  if (check_datafile(v, key, UINT64_MAX, 0, &pd) < 0) {
    dfile_free(&pd);
    return;
  }
  const mw_field_t *kf = &d->f.schema.fields[pk];
  if (pd.f.schema.n_fields != 2 || pd.f.schema.fields[0].type != kf->type || pd.f.schema.fields[1].type != MW_T_UINT64) {
    problem(v, key, "page_data.lance must hold (values: %s, ids: uint64)", mw_type_name(kf->type));
    dfile_free(&pd);
    return;
  }
  const mw_column_t *vals = &pd.batch.cols[0], *kc = &d->batch.cols[pk];
  const uint64_t *ids = (const uint64_t *)(const void *)pd.batch.cols[1].values.data;
  int64_t n = pd.batch.n_rows;
  uint8_t *seen = calloc((size_t)rows + 1, 1);
  if (seen == NULL) abort();
  bool reported = false;
  for (int64_t i = 0; i < n && !reported; i++) {
    if (ids[i] >= (uint64_t)rows) {
      problem(v, key, "entry %" PRId64 " names row %" PRIu64 " of a %" PRId64 "-row SSTable", i, ids[i], rows);
      reported = true;
    } else if (seen[ids[i]]++) {
      problem(v, key, "row %" PRIu64 " is listed twice", ids[i]);
      reported = true;
    } else if (mw_pk_key_cmp(kf, vals, i, kc, (int64_t)ids[i]) != 0) {
      problem(v, key, "entry %" PRId64 ": its key differs from the key of row %" PRIu64 " in the data file", i, ids[i]);
      reported = true;
    } else if (i > 0) {
      int c = mw_pk_key_cmp(kf, vals, i - 1, vals, i);
      if (c > 0 || (c == 0 && ids[i - 1] >= ids[i])) {
        problem(v, key, "entries %" PRId64 " and %" PRId64 " are not sorted by (key, row)", i - 1, i);
        reported = true;
      }
    }
  }
  for (int64_t r = 0; r < rows && !reported; r++)
    if (!seen[r] && !(dead && dead[r])) {
      problem(v, key, "live row %" PRId64 " is missing from the primary-key index (readers would see stale rows)", r);
      reported = true;
    }
  free(seen);
  /* page_lookup: one row per batch_size entries, bounds = the page's first and last key */
  if (!reported && check_datafile(v, lkey, UINT64_MAX, 0, &pl) == 0) {
    const mw_kv_t *bs = mw_kvs_get(&pl.f.schema.meta, "batch_size");
    uint64_t per = bs ? strtoull((const char *)bs->value, NULL, 10) : 8192;
    int mi = mw_schema_find(&pl.f.schema, "min"), ma = mw_schema_find(&pl.f.schema, "max");
    uint64_t want = per ? ((uint64_t)n + per - 1) / per : 0;
    if (per == 0 || mi < 0 || ma < 0) problem(v, lkey, "page_lookup.lance lacks min/max or batch_size");
    else if ((uint64_t)pl.batch.n_rows != want)
      problem(v, lkey, "%" PRId64 " lookup rows for %" PRId64 " entries in pages of %" PRIu64, pl.batch.n_rows, n, per);
    else
      for (int64_t p = 0; p < pl.batch.n_rows; p++) {
        int64_t lo = p * (int64_t)per, hi = (p + 1) * (int64_t)per < n ? (p + 1) * (int64_t)per - 1 : n - 1;
        if (mw_pk_key_cmp(kf, &pl.batch.cols[mi], p, vals, lo) != 0 || mw_pk_key_cmp(kf, &pl.batch.cols[ma], p, vals, hi) != 0) {
          problem(v, lkey, "page %" PRId64 ": min/max differ from the keys of entries %" PRId64 " and %" PRId64, p, lo, hi);
          break;
        }
      }
  }
  dfile_free(&pl);
  dfile_free(&pd);
}

/* Each vector index the SSTable's manifest names: both files in
 * _indices/<uuid>/ pass mw_vindex_check (the layout LanceDB's reader
 * needs), on a fixed_size_list<float32> column of the data file, and name
 * exactly the rows whose vector is not null and finite (docs/indexes.md). */
static void check_vindexes(vctx_t *v, const char *dir, const mw_table_meta_t *t, const dfile_t *d) {
  assert(dir != NULL);
  assert(t != NULL);
  assert(d->have_batch);
  for (size_t i = 0; i < t->indexes.n; i++) {
    const Lance__Table__IndexMetadata *im = t->indexes.items[i].pb;
    mw_distance_t dist; /* an SSTable's details are empty: the distance is in the files */
    if (im->index_details == NULL ||
        mw_vindex_details_distance(im->index_details->type_url, NULL, 0, &dist) == -ENOENT)
      continue; /* not a vector index */
    char u[40] = "?", ik[MW_STORAGE_KEY_MAX_BYTES + 1], ak[MW_STORAGE_KEY_MAX_BYTES + 1];
    if (im->uuid && im->uuid->uuid.len == 16) {
      const uint8_t *b = im->uuid->uuid.data;
      snprintf(u, sizeof u, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
               b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    }
    snprintf(ik, sizeof ik, "%s_indices/%s/" MW_VINDEX_INDEX_FILE, dir, u);
    snprintf(ak, sizeof ak, "%s_indices/%s/" MW_VINDEX_AUX_FILE, dir, u);
    int col = -1;
    for (size_t f = 0; im->n_fields == 1 && f < d->f.schema.n_fields; f++)
      if (d->f.schema.fields[f].id == im->fields[0]) col = (int)f;
    if (col < 0 || d->f.schema.fields[col].type != MW_T_FSL || d->f.schema.fields[col].item_type != MW_T_FLOAT32) {
      problem(v, ik, "vector index '%s' is not on a fixed_size_list<float32> column of the data file", im->name);
      continue;
    }
    mw_buf_t ib = MW_BUF_INIT, ab = MW_BUF_INIT;
    mw_vindex_info_t info = {0};
    mw_err_t err = {0};
    if (fetch(v, ik, &ib, "vector index graph") == 0 && fetch(v, ak, &ab, "vector index storage") == 0) {
      if (mw_vindex_check(ib.data, ib.len, ab.data, ab.len, &info, &err) < 0) {
        problem(v, ik, "vector index '%s': %s", im->name, err.msg);
      } else {
        const mw_column_t *c = &d->batch.cols[col];
        mw_vindex_input_t in = {.vecs = (const float *)(const void *)c->values.data,
                                .validity = c->validity.len ? c->validity.data : NULL,
                                .rows = (uint64_t)d->batch.n_rows, .dim = (uint32_t)d->f.schema.fields[col].fsl_dim};
        if (mw_vindex_check_rows(&info, &in, &err) < 0) problem(v, ak, "vector index '%s': %s", im->name, err.msg);
        v->r->vector_indexes++;
      }
    }
    mw_vindex_info_free(&info);
    mw_buf_free(&ib);
    mw_buf_free(&ab);
  }
}

/* The base table's vector index named `name` (an IndexMetadata with
 * vector details on one field), or NULL. */
static const Lance__Table__IndexMetadata *base_vindex(const mw_table_meta_t *base, const char *name) {
  for (size_t i = 0; i < base->indexes.n; i++) {
    const Lance__Table__IndexMetadata *b = base->indexes.items[i].pb;
    mw_distance_t dist;
    if (b->name != NULL && strcmp(b->name, name) == 0 && b->index_details != NULL && b->n_fields == 1 &&
        mw_vindex_details_distance(b->index_details->type_url, NULL, 0, &dist) != -ENOENT)
      return b;
  }
  return NULL;
}

/* Each vector index the base table's MemWAL index maintains must be in
 * every SSTable that has a vector to index: LanceDB's vector search reads
 * an SSTable without it as empty, silently (docs/indexes.md). */
static void check_maintained(vctx_t *v, const char *dir, const mw_table_meta_t *t, const dfile_t *d) {
  assert(dir != NULL);
  for (size_t m = 0; v->base != NULL && m < v->base->memwal.n_maintained_indexes; m++) {
    const char *name = v->base->memwal.maintained_indexes[m];
    const Lance__Table__IndexMetadata *b = base_vindex(v->base, name);
    bool have = false;
    for (size_t i = 0; b != NULL && i < t->indexes.n; i++)
      have |= t->indexes.items[i].pb->name != NULL && strcmp(t->indexes.items[i].pb->name, name) == 0;
    int col = -1;
    for (size_t f = 0; b != NULL && !have && f < d->f.schema.n_fields; f++)
      if (d->f.schema.fields[f].id == b->fields[0] && d->f.schema.fields[f].type == MW_T_FSL &&
          d->f.schema.fields[f].item_type == MW_T_FLOAT32)
        col = (int)f;
    if (col < 0) continue; /* not a vector index, in the SSTable, or no such column */
    const mw_column_t *c = &d->batch.cols[col];
    mw_vindex_input_t in = {.vecs = (const float *)(const void *)c->values.data,
                            .validity = c->validity.len ? c->validity.data : NULL,
                            .rows = (uint64_t)d->batch.n_rows, .dim = (uint32_t)d->f.schema.fields[col].fsl_dim};
    uint64_t vectors = 0;
    for (uint64_t r = 0; r < in.rows; r++) vectors += mw_vindex_row_indexed(&in, r);
    if (vectors > 0)
      problem(v, dir, "no index of the maintained vector index '%s': LanceDB's vector search misses its %" PRIu64
              " vector rows", name, vectors);
  }
}

/* Fetches and decodes an SSTable manifest into *t; a negative return means
 * there is none to check (the problem is named, *t freed). */
static int load_sstable_meta(vctx_t *v, const char *key, mw_table_meta_t *t) {
  assert(key != NULL);
  assert(t != NULL);
  mw_buf_t b = MW_BUF_INIT;
  if (fetch(v, key, &b, "SSTable manifest") < 0) {
    mw_buf_free(&b);
    return -ENOENT;
  }
  mw_err_t err = {0};
  int rc = mw_table_meta_read_ex(b.data, b.len, MW_FLAG_ZONE_WRITE_SEEDS, t, &err);
  mw_buf_free(&b);
  if (rc < 0) {
    problem(v, key, "SSTable manifest does not decode: %s", err.msg);
    mw_table_meta_free(t);
  }
  return rc;
}

/* deletions = the rows a later copy of the same key supersedes */
static void check_dedup(vctx_t *v, const char *where, const uint64_t *hashes, int64_t rows, const uint32_t *offs,
                        size_t n_offs) {
  assert(rows >= 0);
  uint32_t *want = malloc(((size_t)rows + 1) * sizeof *want);
  if (want == NULL) abort();
  int64_t nw = mw_dedup_deletions(hashes, rows, want);
  if (nw >= 0 && ((size_t)nw != n_offs || (nw > 0 && memcmp(want, offs, (size_t)nw * 4) != 0)))
    problem(v, where, "the deletion file masks %zu rows, but %" PRId64 " rows are superseded by a later row with the same key",
            n_offs, nw);
  free(want);
}

/* the bloom filter knows every key */
static void check_bloom(vctx_t *v, const char *dir, const uint64_t *hashes, int64_t rows) {
  assert(dir != NULL);
  assert(hashes != NULL || rows == 0);
  assert(rows >= 0);
  char bkey[MW_STORAGE_KEY_MAX_BYTES + 1];
  snprintf(bkey, sizeof bkey, "%sbloom_filter.bin", dir);
  mw_buf_t bb = MW_BUF_INIT;
  mw_err_t err = {0};
  if (has_key(v, bkey) && fetch(v, bkey, &bb, "bloom filter") == 0) {
    mw_bloom_t bf = {0};
    if (mw_bloom_decode(&bf, bb.data, bb.len, &err) < 0) {
      problem(v, bkey, "bloom filter does not decode: %s", err.msg);
    } else {
      for (int64_t r = 0; r < rows; r++)
        if (!mw_bloom_check(&bf, hashes[r])) {
          problem(v, bkey, "row %" PRId64 "'s key is not in the bloom filter (a point lookup would miss it)", r);
          break;
        }
    }
    mw_bloom_free(&bf);
  }
  mw_buf_free(&bb);
}

/* The keys of an SSTable's data file (key: its manifest, dkey: the file):
 * its deletions, its bloom filter and its primary-key index. */
static void check_sstable_keys(vctx_t *v, const char *dir, const char *key, const char *dkey,
                               const Lance__Table__DataFragment *fr, const dfile_t *d) {
  assert(d->have_batch);
  int pk = pk_index_of(&d->f.schema);
  int64_t rows = d->batch.n_rows;
  uint32_t *offs = NULL;
  size_t n_offs = 0;
  uint8_t *dead = calloc((size_t)rows + 1, 1);
  if (dead == NULL) abort();
  if (fr->deletion_file && read_deletion(v, dir, fr->id, fr->deletion_file, fr->physical_rows, &offs, &n_offs) == 0)
    for (size_t i = 0; i < n_offs; i++) dead[offs[i]] = 1;
  uint64_t *hashes = malloc(((size_t)rows + 1) * sizeof *hashes);
  if (hashes == NULL) abort();
  mw_err_t err = {0};
  if (pk < 0) {
    problem(v, dkey, "SSTable data file has no primary-key field");
  } else if (mw_pk_hash_batch(&d->batch, hashes, &err) < 0) {
    problem(v, dkey, "primary key cannot be hashed: %s", err.msg);
  } else {
    check_dedup(v, fr->deletion_file ? key : dkey, hashes, rows, offs, n_offs);
    check_bloom(v, dir, hashes, rows);
    check_pk_index(v, dir, d, pk, dead, rows);
  }
  free(hashes);
  free(offs);
  free(dead);
}

static void check_sstable(vctx_t *v, const char *shard_dir, const mw_sstable_ref_t *ref) {
  assert(shard_dir != NULL);
  assert(ref != NULL);
  char dir[MW_STORAGE_KEY_MAX_BYTES + 1], key[MW_STORAGE_KEY_MAX_BYTES + 1];
  snprintf(dir, sizeof dir, "%s%s/", shard_dir, ref->path);
  snprintf(key, sizeof key, "%s%s", dir, SST_MANIFEST);
  v->r->sstables++;
  mw_table_meta_t t;
  if (load_sstable_meta(v, key, &t) < 0) return;
  const Lance__Table__Manifest *pb = t.manifest.pb;
  if (pb->n_fragments != 1 || pb->fragments[0]->n_files != 1) {
    problem(v, key, "an SSTable has one fragment of one data file; this manifest has %zu fragments", pb->n_fragments);
    mw_table_meta_free(&t);
    return;
  }
  const Lance__Table__DataFragment *fr = pb->fragments[0];
  if (ref->physical_rows && fr->physical_rows != ref->physical_rows)
    problem(v, key, "fragment has %" PRIu64 " rows, the shard manifest records %" PRIu64, fr->physical_rows, ref->physical_rows);
  char dkey[MW_STORAGE_KEY_MAX_BYTES + 1];
  snprintf(dkey, sizeof dkey, "%sdata/%s", dir, fr->files[0]->path);
  dfile_t d;
  if (check_fragment_file(v, dkey, &t.schema, fr, 0, &d) == 0 && d.have_batch) {
    check_flags(v, key, pb->reader_feature_flags, pb->writer_feature_flags, d.v1_seeds);
    check_sstable_keys(v, dir, key, dkey, fr, &d);
    check_vindexes(v, dir, &t, &d);
    check_maintained(v, dir, &t, &d);
  }
  dfile_free(&d);
  mw_table_meta_free(&t);
}

/* -------------------------------------------------------------------- shard */

typedef struct walent {
  uint64_t pos;
  uint64_t epoch;
  bool sentinel;
  bool ok;
  char key[MW_STORAGE_KEY_MAX_BYTES + 1];
} walent_t;

static uint64_t compacted_gen(const vctx_t *v, const uint8_t id[16]) {
  assert(id != NULL);
  assert(v->compacted != NULL || v->n_compacted == 0);
  uint64_t g = 0;
  for (size_t i = 0; i < v->n_compacted; i++)
    if (memcmp(v->compacted[i].shard_id, id, 16) == 0 && v->compacted[i].generation > g) g = v->compacted[i].generation;
  return g;
}

/* The WAL entries under prefix, sorted by position (names are bit-reversed:
 * key order is not position order); *n_out of them. */
static walent_t *wal_entries(vctx_t *v, const char *prefix, size_t *n_out) {
  size_t at = first_with(v, prefix), cap = 0, n = 0;
  walent_t *e = NULL;
  for (size_t i = at; i < v->n && starts(v->keys[i], prefix); i++) {
    uint64_t pos;
    const char *base = v->keys[i] + strlen(prefix);
    if (strchr(base, '/') != NULL || mw_bitrev_parse(base, &pos) < 0) {
      problem(v, v->keys[i], "not a WAL entry name (64 bit-reversed binary digits)");
      continue;
    }
    if (n == cap) {
      cap = cap ? 2 * cap : 64;
      e = realloc(e, cap * sizeof *e);
      if (e == NULL) abort();
    }
    memset(&e[n], 0, sizeof e[n]);
    e[n].pos = pos;
    snprintf(e[n].key, sizeof e[n].key, "%s", v->keys[i]);
    n++;
  }
  for (size_t i = 1; i < n; i++)
    for (size_t j = i; j > 0 && e[j - 1].pos > e[j].pos; j--) {
      walent_t t = e[j];
      e[j] = e[j - 1];
      e[j - 1] = t;
    }
  for (size_t i = 1; i < n; i++) assert(e[i - 1].pos <= e[i].pos);
  *n_out = n;
  return e;
}

/* Positions above the replay point are contiguous; each entry decodes and
 * names its writer epoch (filled into e[i], with ok and sentinel). */
static void read_wal_entries(vctx_t *v, walent_t *e, size_t n, uint64_t replay, uint64_t max_epoch) {
  uint64_t expect = replay + 1;
  mw_ipc_reader_t rd;
  mw_ipc_reader_init(&rd);
  for (size_t i = 0; i < n; i++) {
    assert(i == 0 || e[i - 1].pos <= e[i].pos);
    if (e[i].pos > replay) {
      if (e[i].pos != expect)
        problem(v, e[i].key, "WAL positions %" PRIu64 "..%" PRIu64 " are missing (entries above the replay point %" PRIu64
                " must be contiguous)", expect, e[i].pos - 1, replay);
      expect = e[i].pos + 1;
    }
    mw_buf_t b = MW_BUF_INIT;
    mw_err_t err = {0};
    if (fetch(v, e[i].key, &b, "WAL entry") == 0) {
      v->r->wal_entries++;
      if (mw_ipc_reader_decode(&rd, b.data, b.len, NULL, &err) < 0) {
        problem(v, e[i].key, "WAL entry does not decode: %s", err.msg);
      } else if (mw_ipc_writer_epoch(&rd.stream.schema, &e[i].epoch, &err) < 0) {
        problem(v, e[i].key, "%s", err.msg);
      } else {
        e[i].ok = true;
        e[i].sentinel = mw_ipc_is_fence_sentinel(&rd.stream.schema);
        if (e[i].epoch > max_epoch)
          problem(v, e[i].key, "written with epoch %" PRIu64 ", above every epoch claimed in the manifests (%" PRIu64 ")",
                  e[i].epoch, max_epoch);
      }
    }
    mw_buf_free(&b);
  }
  mw_ipc_reader_free(&rd);
}

/* The epoch of e[i], its first entry: one sentinel, before its data; an epoch
 * above the lowest that has data above the replay point starts with one. */
static void check_epoch_sentinel(vctx_t *v, const walent_t *e, size_t n, size_t i, uint64_t lowest, uint64_t replay) {
  assert(i < n);
  assert(e[i].ok);
  size_t sentinels = 0, first_data = SIZE_MAX, first_sentinel = SIZE_MAX;
  for (size_t k = i; k < n; k++) {
    if (!e[k].ok || e[k].epoch != e[i].epoch) continue;
    if (e[k].sentinel) {
      sentinels++;
      if (first_sentinel == SIZE_MAX) first_sentinel = k;
      else problem(v, e[k].key, "a second fence sentinel for epoch %" PRIu64 " (first at position %" PRIu64 ")", e[k].epoch,
                   e[first_sentinel].pos);
    } else if (first_data == SIZE_MAX) {
      first_data = k;
    }
  }
  if (first_sentinel != SIZE_MAX && first_data != SIZE_MAX && first_data < first_sentinel)
    problem(v, e[first_data].key, "data of epoch %" PRIu64 " before that epoch's fence sentinel (position %" PRIu64 ")",
            e[i].epoch, e[first_sentinel].pos);
  if (sentinels == 0 && e[i].epoch > lowest && first_data != SIZE_MAX && e[first_data].pos > replay)
    problem(v, e[first_data].key, "epoch %" PRIu64 " took over the shard without a fence sentinel", e[i].epoch);
}

/* epochs never go down; one sentinel per epoch, before its data; an epoch
 * that follows another writer's entries starts with its sentinel */
static void check_wal_epochs(vctx_t *v, const walent_t *e, size_t n, uint64_t replay) {
  assert(e != NULL || n == 0);
  assert(v->r != NULL);
  uint64_t prev = 0, lowest = UINT64_MAX;
  for (size_t i = 0; i < n; i++)
    if (e[i].ok && e[i].epoch < lowest) lowest = e[i].epoch;
  uint64_t fenced_by = 0; /* the highest epoch whose sentinel came so far */
  for (size_t i = 0; i < n; i++) {
    if (!e[i].ok) continue;
    if (e[i].epoch < prev)
      problem(v, e[i].key, "writer epoch %" PRIu64 " after an entry of epoch %" PRIu64 " (epochs never decrease)%s",
              e[i].epoch, prev,
              fenced_by > e[i].epoch ? ": a fenced writer's entry above a newer claim's fence sentinel, never "
                                       "acknowledged; memwald's replay skips it, Lance's would replay its rows"
                                     : "");
    prev = e[i].epoch > prev ? e[i].epoch : prev;
    if (e[i].sentinel && e[i].epoch > fenced_by) fenced_by = e[i].epoch;
    bool first_of_epoch = true;
    for (size_t k = 0; k < i; k++)
      if (e[k].ok && e[k].epoch == e[i].epoch) first_of_epoch = false;
    if (first_of_epoch) check_epoch_sentinel(v, e, n, i, lowest, replay);
  }
}

static void check_wal(vctx_t *v, const char *dir, const mw_shard_manifest_t *latest, uint64_t max_epoch) {
  assert(dir != NULL);
  assert(v->s != NULL);
  char prefix[MW_STORAGE_KEY_MAX_BYTES + 1];
  snprintf(prefix, sizeof prefix, "%swal/", dir);
  size_t n = 0;
  walent_t *e = wal_entries(v, prefix, &n);
  uint64_t replay = latest ? latest->replay_after_wal_entry_position : 0;
  /* below the replay point entries may be gone: GC collects them (keeping
   * fence sentinels), and nothing reads them any more; counted, not a problem */
  uint64_t below = 0;
  for (size_t i = 0; i < n; i++) below += e[i].pos >= 1 && e[i].pos <= replay;
  v->r->wal_collected += replay - (below < replay ? below : replay);
  read_wal_entries(v, e, n, replay, max_epoch);
  check_wal_epochs(v, e, n, replay);
  free(e);
}

/* The versions of the shard manifests under prefix, ascending; *n_out of them. */
static uint64_t *shard_versions(vctx_t *v, const char *prefix, size_t *n_out) {
  assert(prefix != NULL);
  assert(n_out != NULL);
  size_t at = first_with(v, prefix), n = 0;
  uint64_t *vers = NULL;
  for (size_t i = at; i < v->n && starts(v->keys[i], prefix); i++) {
    uint64_t ver;
    const char *base = v->keys[i] + strlen(prefix);
    if (strcmp(base, "version_hint.json") == 0) continue;
    if (mw_shard_manifest_name_parse(base, &ver) < 0) {
      problem(v, v->keys[i], "not a shard manifest name");
      continue;
    }
    vers = realloc(vers, (n + 1) * sizeof *vers);
    if (vers == NULL) abort();
    vers[n++] = ver;
  }
  for (size_t i = 1; i < n; i++)
    for (size_t j = i; j > 0 && vers[j - 1] > vers[j]; j--) {
      uint64_t t = vers[j];
      vers[j] = vers[j - 1];
      vers[j - 1] = t;
    }
  *n_out = n;
  return vers;
}

/* Fetches and decodes manifest vers[i] into *cur (its key into key);
 * a negative return means there is none to check (the problem is named). */
static int load_shard_manifest(vctx_t *v, const char *prefix, const uint64_t *vers, size_t i, char *key,
                               mw_shard_manifest_t *cur) {
  assert(vers != NULL);
  assert(key != NULL);
  assert(cur != NULL);
  char name[MW_BITREV_NAME_BYTES];
  mw_shard_manifest_name(vers[i], name, sizeof name);
  snprintf(key, MW_STORAGE_KEY_MAX_BYTES + 1, "%s%s", prefix, name);
  if (i > 0 && vers[i] != vers[i - 1] + 1)
    problem(v, key, "shard manifest versions jump from %" PRIu64 " to %" PRIu64, vers[i - 1], vers[i]);
  mw_buf_t b = MW_BUF_INIT;
  mw_err_t err = {0};
  v->r->manifests++;
  if (fetch(v, key, &b, "shard manifest") < 0) {
    mw_buf_free(&b);
    return -ENOENT;
  }
  int rc = mw_shard_manifest_decode(b.data, b.len, cur, &err);
  mw_buf_free(&b);
  if (rc < 0) {
    problem(v, key, "shard manifest does not decode: %s", err.msg);
    mw_shard_manifest_free(cur);
  }
  return rc;
}

/* One manifest alone: its version, its shard id, its SSTable generations. */
static void check_shard_manifest(vctx_t *v, const char *key, const mw_shard_manifest_t *cur, uint64_t ver,
                                 const uint8_t id[16]) {
  assert(key != NULL);
  assert(cur != NULL);
  assert(id != NULL);
  if (cur->version != ver) problem(v, key, "holds version %" PRIu64 ", its name says %" PRIu64, cur->version, ver);
  if (cur->has_shard_id && memcmp(cur->shard_id, id, 16) != 0) problem(v, key, "names another shard id than its directory");
  for (size_t k = 0; k < cur->n_sstables; k++) {
    if (cur->sstables[k].generation >= cur->current_generation)
      problem(v, key, "SSTable generation %" PRIu64 " is not below current_generation %" PRIu64, cur->sstables[k].generation,
              cur->current_generation);
    for (size_t j = 0; j < k; j++)
      if (cur->sstables[j].generation == cur->sstables[k].generation)
        problem(v, key, "SSTable generation %" PRIu64 " is listed twice", cur->sstables[k].generation);
  }
}

/* From one manifest to the next: nothing goes down, no SSTable leaves
 * before compaction (generation comp) covers it. */
static void check_manifest_step(vctx_t *v, const char *key, const mw_shard_manifest_t *prev,
                                const mw_shard_manifest_t *cur, uint64_t comp) {
  assert(prev != NULL);
  assert(cur != NULL);
  if (cur->writer_epoch < prev->writer_epoch)
    problem(v, key, "writer_epoch went down from %" PRIu64 " to %" PRIu64, prev->writer_epoch, cur->writer_epoch);
  if (cur->replay_after_wal_entry_position < prev->replay_after_wal_entry_position)
    problem(v, key, "replay_after_wal_entry_position went down from %" PRIu64 " to %" PRIu64,
            prev->replay_after_wal_entry_position, cur->replay_after_wal_entry_position);
  if (cur->current_generation < prev->current_generation)
    problem(v, key, "current_generation went down from %" PRIu64 " to %" PRIu64, prev->current_generation, cur->current_generation);
  for (size_t j = 0; j < prev->n_sstables; j++) {
    bool kept = false;
    for (size_t k = 0; k < cur->n_sstables && !kept; k++) kept = cur->sstables[k].generation == prev->sstables[j].generation;
    if (!kept && prev->sstables[j].generation > comp)
      problem(v, key, "SSTable generation %" PRIu64 " (%s) left the manifest before compaction covered it "
              "(compacted_sstables reaches generation %" PRIu64 ")", prev->sstables[j].generation, prev->sstables[j].path, comp);
  }
}

/* The manifest chain, in version order. Returns whether one decoded (then
 * the last is copied to *latest); *max_epoch is raised to every epoch seen. */
static bool check_manifest_chain(vctx_t *v, shard_info_t *si, const char *prefix, mw_shard_manifest_t *latest,
                                 uint64_t *max_epoch) {
  assert(si != NULL);
  assert(latest != NULL);
  assert(max_epoch != NULL);
  size_t n = 0;
  uint64_t *vers = shard_versions(v, prefix, &n);
  mw_shard_manifest_t prev, cur;
  mw_shard_manifest_init(&prev);
  bool have_prev = false;
  uint64_t comp = compacted_gen(v, si->id);
  for (size_t i = 0; i < n; i++) {
    char key[MW_STORAGE_KEY_MAX_BYTES + 1];
    if (load_shard_manifest(v, prefix, vers, i, key, &cur) < 0) continue;
    check_shard_manifest(v, key, &cur, vers[i], si->id);
    if (cur.writer_epoch > *max_epoch) *max_epoch = cur.writer_epoch;
    if (have_prev) check_manifest_step(v, key, &prev, &cur, comp);
    mw_shard_manifest_free(&prev);
    prev = cur;
    have_prev = true;
    mw_shard_manifest_init(&cur);
  }
  if (have_prev) {
    mw_shard_manifest_copy(latest, &prev);
    si->current_generation = latest->current_generation;
    si->has_manifest = true;
  }
  mw_shard_manifest_free(&prev);
  free(vers);
  return have_prev;
}

/* the hint is never ahead of the manifests */
static void check_version_hint(vctx_t *v, const char *prefix, const mw_shard_manifest_t *latest) {
  assert(prefix != NULL);
  assert(v->s != NULL);
  char hkey[MW_STORAGE_KEY_MAX_BYTES + 1];
  snprintf(hkey, sizeof hkey, "%sversion_hint.json", prefix);
  if (!has_key(v, hkey)) return;
  mw_buf_t b = MW_BUF_INIT;
  uint64_t hv;
  mw_err_t err = {0};
  if (fetch(v, hkey, &b, "version hint") == 0) {
    if (mw_version_hint_parse(b.data, b.len, &hv, &err) < 0) problem(v, hkey, "%s", err.msg);
    else if (latest != NULL && hv > latest->version)
      problem(v, hkey, "hints version %" PRIu64 ", the latest manifest is %" PRIu64, hv, latest->version);
  }
  mw_buf_free(&b);
}

/* directories the manifest does not list: crash leftovers, ignored by readers */
static void count_orphans(vctx_t *v, const char *dir, const mw_shard_manifest_t *latest) {
  assert(dir != NULL);
  assert(latest != NULL);
  size_t at = first_with(v, dir);
  char last[256] = "";
  for (size_t i = at; i < v->n && starts(v->keys[i], dir); i++) {
    const char *rest = v->keys[i] + strlen(dir);
    const char *slash = strchr(rest, '/');
    if (slash == NULL || (size_t)(slash - rest) >= sizeof last) continue;
    char sub[256];
    memcpy(sub, rest, (size_t)(slash - rest));
    sub[slash - rest] = 0;
    if (strcmp(sub, last) == 0 || strcmp(sub, "wal") == 0 || strcmp(sub, "manifest") == 0) continue;
    snprintf(last, sizeof last, "%s", sub);
    bool listed = false;
    for (size_t k = 0; k < latest->n_sstables && !listed; k++) listed = strcmp(latest->sstables[k].path, sub) == 0;
    if (!listed) v->r->orphans++;
  }
}

static void check_shard(vctx_t *v, shard_info_t *si) {
  assert(v != NULL);
  assert(si != NULL);
  char dir[MW_STORAGE_KEY_MAX_BYTES + 1], prefix[MW_STORAGE_KEY_MAX_BYTES + 1];
  snprintf(dir, sizeof dir, MEM_WAL "%s/", si->uuid);
  snprintf(prefix, sizeof prefix, "%smanifest/", dir);
  v->r->shards++;
  mw_shard_manifest_t latest;
  mw_shard_manifest_init(&latest);
  uint64_t max_epoch = 0;
  bool have_latest = check_manifest_chain(v, si, prefix, &latest, &max_epoch);
  assert(!have_latest || si->has_manifest);
  check_version_hint(v, prefix, have_latest ? &latest : NULL);
  check_wal(v, dir, have_latest ? &latest : NULL, max_epoch);
  if (have_latest) {
    if (latest.wal_entry_position_last_seen < latest.replay_after_wal_entry_position)
      problem(v, dir, "wal_entry_position_last_seen %" PRIu64 " is below replay_after %" PRIu64,
              latest.wal_entry_position_last_seen, latest.replay_after_wal_entry_position);
    for (size_t k = 0; k < latest.n_sstables; k++) check_sstable(v, dir, &latest.sstables[k]);
    count_orphans(v, dir, &latest);
  }
  mw_shard_manifest_free(&latest);
}

/* --------------------------------------------------------------- base table */

static bool top_level(const char *key, const char *prefix) { return starts(key, prefix); }

/* compacted_sstables only grows: GC deletes what it records, so a version
 * that records less for a shard than the one before would make a reader
 * miss rows (or GC delete rows no version holds). */
static void check_compacted_grows(vctx_t *v, const char *key, const mw_compacted_sstable_t *pc, size_t npc,
                                  uint64_t pc_version, const mw_table_meta_t *t) {
  assert(pc != NULL || npc == 0);
  assert(t != NULL);
  for (size_t i = 0; i < npc; i++) {
    uint64_t g = 0;
    for (size_t k = 0; t->has_memwal && k < t->memwal.n_compacted; k++)
      if (memcmp(t->memwal.compacted[k].shard_id, pc[i].shard_id, 16) == 0 && t->memwal.compacted[k].generation > g)
        g = t->memwal.compacted[k].generation;
    if (g < pc[i].generation) {
      char u[37];
      mw_uuid_text(pc[i].shard_id, u);
      problem(v, key, "compacted_sstables of shard %s went down from generation %" PRIu64 " (version %" PRIu64 ") to %" PRIu64,
              u, pc[i].generation, pc_version, g);
    }
  }
}

/* Every generation compacted_sstables records was flushed by its shard:
 * the shard has manifests and its current_generation is above it. */
static void check_compacted_shards(vctx_t *v) {
  assert(v->compacted != NULL || v->n_compacted == 0);
  assert(v->shards != NULL || v->n_shards == 0);
  for (size_t i = 0; i < v->n_compacted; i++) {
    const mw_compacted_sstable_t *c = &v->compacted[i];
    char u[37];
    mw_uuid_text(c->shard_id, u);
    const shard_info_t *si = NULL;
    for (size_t k = 0; k < v->n_shards && si == NULL; k++)
      if (memcmp(v->shards[k].id, c->shard_id, 16) == 0) si = &v->shards[k];
    if (si == NULL || !si->has_manifest)
      problem(v, v->base_key, "compacted_sstables names shard %s, which has no shard manifest", u);
    else if (c->generation >= si->current_generation)
      problem(v, v->base_key, "compacted_sstables records generation %" PRIu64 " of shard %s, which never flushed it "
              "(its current_generation is %" PRIu64 ")", c->generation, u, si->current_generation);
  }
}

/* The names of the table's manifests under _versions/ (borrowed from v->keys); *n_out of them. */
static char **base_manifest_names(vctx_t *v, size_t *n_out) {
  assert(n_out != NULL);
  assert(v->keys != NULL || v->n == 0);
  char **names = NULL;
  size_t n = 0;
  size_t at = first_with(v, "_versions/");
  for (size_t i = at; i < v->n && top_level(v->keys[i], "_versions/"); i++) {
    const char *base = v->keys[i] + strlen("_versions/");
    if (!strchr(base, '/') && strstr(base, ".manifest") != NULL) {
      names = realloc(names, (n + 1) * sizeof *names);
      if (names == NULL) abort();
      names[n++] = (char *)base;
    }
  }
  *n_out = n;
  return names;
}

/* What the walk over the base table's versions carries from one to the next. */
typedef struct {
  bool flagged; /* FLAG_ZONE_WRITE_SEEDS was set, first at flagged_at */
  uint64_t flagged_at;
  mw_compacted_sstable_t *pc; /* the previous version's compacted_sstables */
  size_t npc;
  uint64_t pc_version;
} base_walk_t;

/* One decoded version want: version = name, the seeds flag kept,
 * compacted_sstables grown; then it becomes the previous version. */
static void check_base_version(vctx_t *v, base_walk_t *w, const char *key, uint64_t want, const mw_table_meta_t *t) {
  assert(want > w->pc_version);
  if (t->manifest.pb->version != want)
    problem(v, key, "holds version %" PRIu64 ", its name says %" PRIu64, t->manifest.pb->version, want);
  check_flags(v, key, t->reader_feature_flags, t->writer_feature_flags, 0);
  bool f = t->reader_feature_flags & MW_FLAG_ZONE_WRITE_SEEDS;
  if (w->flagged && !f)
    problem(v, key, "FLAG_ZONE_WRITE_SEEDS was set at version %" PRIu64 " and is gone (derived versions keep it)", w->flagged_at);
  if (f && !w->flagged) w->flagged = true, w->flagged_at = want;
  check_compacted_grows(v, key, w->pc, w->npc, w->pc_version, t);
  free(w->pc);
  w->pc = NULL, w->npc = 0, w->pc_version = want;
  if (t->has_memwal && t->memwal.n_compacted) {
    w->npc = t->memwal.n_compacted;
    w->pc = malloc(w->npc * sizeof *w->pc);
    if (w->pc == NULL) abort();
    memcpy(w->pc, t->memwal.compacted, w->npc * sizeof *w->pc);
  }
}

/* Fetches, decodes and checks version want (its manifest name); the latest
 * version's metadata moves to *latest_meta. Returns whether it did. */
static bool read_base_version(vctx_t *v, base_walk_t *w, const char *name, uint64_t want, uint64_t latest,
                              mw_table_meta_t *latest_meta) {
  assert(want > 0);
  char key[MW_STORAGE_KEY_MAX_BYTES + 1];
  snprintf(key, sizeof key, "_versions/%s", name);
  mw_buf_t b = MW_BUF_INIT;
  bool moved = false;
  v->r->manifests++;
  if (fetch(v, key, &b, "manifest") == 0) {
    mw_table_meta_t t;
    mw_err_t err = {0};
    int rc = mw_table_meta_read_ex(b.data, b.len, MW_FLAG_ZONE_WRITE_SEEDS, &t, &err);
    if (rc < 0 && rc != -ENOTSUP) {
      problem(v, key, "manifest does not decode: %s", err.msg);
    } else if (rc == 0) {
      check_base_version(v, w, key, want, &t);
      if (want == latest) {
        *latest_meta = t;
        moved = true;
        memset(&t, 0, sizeof t);
      }
    }
    /* -ENOTSUP: a column type or feature memwald does not write: still a readable table */
    mw_table_meta_free(&t);
  }
  mw_buf_free(&b);
  return moved;
}

static void check_base(vctx_t *v, mw_table_meta_t *latest_meta, bool *have_latest) {
  assert(latest_meta != NULL);
  assert(have_latest != NULL);
  size_t n = 0;
  char **names = base_manifest_names(v, &n);
  *have_latest = false;
  if (n == 0) {
    problem(v, "_versions/", "the table has no manifest");
    free(names);
    return;
  }
  uint64_t latest;
  size_t li;
  mw_err_t err = {0};
  if (mw_dmanifest_latest(names, n, &latest, &li, &err) < 0) problem(v, "_versions/", "%s", err.msg);
  /* every version in order: decode, version = name, the seeds flag kept */
  uint64_t *vv = calloc(n, sizeof *vv);
  if (vv == NULL) abort();
  for (size_t i = 0; i < n; i++) mw_dmanifest_name_parse(names[i], &vv[i], NULL);
  base_walk_t w = {0};
  for (uint64_t want = 0;;) { /* ascending versions */
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < n; i++)
      if (vv[i] > want && (best == SIZE_MAX || vv[i] < vv[best])) best = i;
    if (best == SIZE_MAX) break;
    want = vv[best];
    if (read_base_version(v, &w, names[best], want, latest, latest_meta)) *have_latest = true;
  }
  free(w.pc);
  free(vv);
  free(names);
  if (*have_latest) {
    char nm[64];
    if (mw_dmanifest_name(latest, nm, sizeof nm) < 0) snprintf(nm, sizeof nm, "(version %" PRIu64 ")", latest);
    snprintf(v->base_key, sizeof v->base_key, "_versions/%s", nm);
  }
  if (*have_latest && latest_meta->has_memwal) {
    v->compacted = latest_meta->memwal.compacted;
    v->n_compacted = latest_meta->memwal.n_compacted;
    v->base = latest_meta;
  }
}

static void check_base_fragments(vctx_t *v, const mw_table_meta_t *t) {
  assert(t != NULL);
  assert(v->r != NULL);
  const Lance__Table__Manifest *pb = t->manifest.pb;
  char mkey[64];
  snprintf(mkey, sizeof mkey, "_versions/ (version %" PRIu64 ")", pb->version);
  size_t v1 = 0;
  for (size_t i = 0; i < pb->n_fragments; i++) {
    const Lance__Table__DataFragment *fr = pb->fragments[i];
    for (size_t k = 0; k < fr->n_files; k++) {
      char key[MW_STORAGE_KEY_MAX_BYTES + 1];
      snprintf(key, sizeof key, "data/%s", fr->files[k]->path);
      dfile_t d;
      check_fragment_file(v, key, &t->schema, fr, k, &d);
      v1 += d.v1_seeds;
      dfile_free(&d);
    }
    if (fr->deletion_file) {
      uint32_t *offs;
      size_t no;
      if (read_deletion(v, "", fr->id, fr->deletion_file, fr->physical_rows, &offs, &no) == 0) free(offs);
    }
  }
  check_flags(v, mkey, pb->reader_feature_flags, pb->writer_feature_flags, v1);
  /* compacted_sstables: a shard that exists, a generation it flushed */
  for (size_t i = 0; i < v->n_compacted; i++) {
    char u[37];
    mw_uuid_text(v->compacted[i].shard_id, u);
    const shard_info_t *si = NULL;
    for (size_t k = 0; k < v->n_shards; k++)
      if (memcmp(v->shards[k].id, v->compacted[i].shard_id, 16) == 0) si = &v->shards[k];
    if (si == NULL)
      problem(v, mkey, "MemWAL compacted_sstables names shard %s, which has no _mem_wal directory", u);
    else if (si->has_manifest && v->compacted[i].generation >= si->current_generation)
      problem(v, mkey, "MemWAL compacted_sstables reaches generation %" PRIu64 " of shard %s, which has only flushed up to %" PRIu64,
              v->compacted[i].generation, u, si->current_generation ? si->current_generation - 1 : 0);
  }
  /* transaction files */
  size_t at = first_with(v, "_transactions/");
  for (size_t i = at; i < v->n && starts(v->keys[i], "_transactions/"); i++) {
    mw_buf_t b = MW_BUF_INIT;
    if (fetch(v, v->keys[i], &b, "transaction file") == 0) {
      mw_txn_t tx;
      mw_err_t err = {0};
      if (mw_txn_decode(b.data, b.len, &tx, &err) < 0) {
        problem(v, v->keys[i], "transaction does not decode: %s", err.msg);
      } else {
        char want[96];
        snprintf(want, sizeof want, "%" PRIu64 "-%s.txn", tx.read_version, tx.uuid ? tx.uuid : "");
        if (strcmp(v->keys[i] + strlen("_transactions/"), want) != 0)
          problem(v, v->keys[i], "holds read_version %" PRIu64 " and uuid %s: its name should be %s", tx.read_version,
                  tx.uuid ? tx.uuid : "(none)", want);
      }
      mw_txn_free(&tx);
    }
    mw_buf_free(&b);
  }
}

/* ---------------------------------------------------------------------- run */

static int uuid_parse(const char *s, uint8_t out[16]) {
  assert(s != NULL);
  assert(out != NULL);
  if (strlen(s) != 36) return -EINVAL;
  size_t k = 0;
  for (size_t i = 0; i < 36; i++) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (s[i] != '-') return -EINVAL;
      continue;
    }
    char c = s[i];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return -EINVAL;
    if (k % 2 == 0) out[k / 2] = (uint8_t)(d << 4);
    else out[k / 2] |= (uint8_t)d;
    k++;
  }
  return 0;
}

void mw_verify_report_free(mw_verify_report_t *r) {
  if (r == NULL) return;
  j_free(r->problems);
  memset(r, 0, sizeof *r);
}

int mw_verify_table(mw_sio_t *s, mw_verify_report_t *r, mw_err_t *err) {
  assert(s != NULL);
  assert(r != NULL);
  memset(r, 0, sizeof *r);
  r->problems = j_arr();
  vctx_t v = {.s = s, .r = r};
  int rc = mw_sio_list(s, "", &v.keys, &v.n, err);
  if (rc < 0) return rc;
  r->objects = v.n;
  /* a put that never finished is not part of the table (a writer died or was
   * fenced mid-put): counted, then left out of every check */
  size_t kept = 0;
  for (size_t i = 0; i < v.n; i++) {
    if (mw_key_is_staging(v.keys[i])) {
      r->staging++;
      free(v.keys[i]);
      continue;
    }
    v.keys[kept++] = v.keys[i];
  }
  v.n = kept;
  assert(r->staging + v.n == r->objects);
  mw_table_meta_t meta;
  memset(&meta, 0, sizeof meta);
  bool have_meta = false;
  check_base(&v, &meta, &have_meta);
  /* shards: every _mem_wal/<uuid>/ directory */
  v.shards = calloc(MAX_SHARDS, sizeof *v.shards);
  if (v.shards == NULL) abort();
  size_t at = first_with(&v, MEM_WAL);
  for (size_t i = at; i < v.n && starts(v.keys[i], MEM_WAL); i++) {
    const char *rest = v.keys[i] + strlen(MEM_WAL), *slash = strchr(rest, '/');
    if (slash == NULL || slash - rest != 36) {
      problem(&v, v.keys[i], "not under a _mem_wal/<shard uuid>/ directory");
      continue;
    }
    char u[37];
    memcpy(u, rest, 36);
    u[36] = 0;
    if (v.n_shards > 0 && strcmp(v.shards[v.n_shards - 1].uuid, u) == 0) continue;
    if (v.n_shards == MAX_SHARDS) break;
    shard_info_t *si = &v.shards[v.n_shards];
    if (uuid_parse(u, si->id) < 0) {
      problem(&v, v.keys[i], "shard directory %s is not a UUID", u);
      continue;
    }
    memcpy(si->uuid, u, 37);
    v.n_shards++;
  }
  for (size_t i = 0; i < v.n_shards; i++) check_shard(&v, &v.shards[i]);
  check_compacted_shards(&v);
  if (have_meta) check_base_fragments(&v, &meta);
  mw_table_meta_free(&meta);
  free(v.shards);
  mw_sio_free_keys(v.keys, v.n);
  return 0;
}

int mw_verify_main(const char *table, const mw_verify_opts_t *o) {
  assert(table != NULL);
  assert(o != NULL);
  mw_sio_t s;
  mw_err_t err = {0};
  if (mw_sio_open(&s, table, &err) < 0) {
    fprintf(stderr, "memwal-inspect: %s\n", err.msg);
    return 3;
  }
  mw_verify_report_t r;
  int rc = mw_verify_table(&s, &r, &err);
  mw_sio_close(&s);
  if (rc < 0) {
    fprintf(stderr, "memwal-inspect: verify %s: %s\n", table, err.msg);
    mw_verify_report_free(&r);
    return 3;
  }
  if (o->json) {
    j_t *out = j_obj();
    j_set(out, "table", j_str(table));
    j_set(out, "ok", j_bool(r.n_problems == 0));
    j_set(out, "problems_total", j_uint(r.n_problems));
    j_set(out, "problems", r.problems);
    r.problems = NULL;
    j_t *c = j_set(out, "checked", j_obj());
    j_set(c, "objects", j_uint(r.objects));
    j_set(c, "decoded", j_uint(r.decoded));
    j_set(c, "shards", j_uint(r.shards));
    j_set(c, "shard_manifests_and_manifests", j_uint(r.manifests));
    j_set(c, "wal_entries", j_uint(r.wal_entries));
    j_set(c, "sstables", j_uint(r.sstables));
    j_set(c, "data_files", j_uint(r.data_files));
    j_set(c, "zone_seeds", j_uint(r.seeds));
    j_set(c, "orphan_sstable_dirs", j_uint(r.orphans));
    j_set(c, "staging", j_uint(r.staging));
    j_set(c, "wal_collected", j_uint(r.wal_collected));
    j_set(c, "vector_indexes", j_uint(r.vector_indexes));
    j_print_json(stdout, out);
    j_free(out);
  } else {
    for (size_t i = 0; i < r.problems->n; i++)
      printf("%s: %s\n", r.problems->items[i]->items[0]->s, r.problems->items[i]->items[1]->s);
    if (r.n_problems > r.problems->n) printf("... and %" PRIu64 " more problems\n", r.n_problems - r.problems->n);
    printf("verify %s: %s: %" PRIu64 " problem%s; %" PRIu64 " objects, %" PRIu64 " shards, %" PRIu64 " WAL entries, %" PRIu64
           " SSTables, %" PRIu64 " data files, %" PRIu64 " zone seeds checked; %" PRIu64 " unlisted SSTable directories\n",
           table, r.n_problems ? "FAILED" : "ok", r.n_problems, r.n_problems == 1 ? "" : "s", r.objects, r.shards,
           r.wal_entries, r.sstables, r.data_files, r.seeds, r.orphans);
    if (r.vector_indexes)
      printf("verify %s: %" PRIu64 " SSTable vector index%s checked (layout, graph, rows)\n", table, r.vector_indexes,
             r.vector_indexes == 1 ? "" : "es");
    if (r.wal_collected)
      printf("verify %s: %" PRIu64 " WAL position%s at or below the replay points collected (GC), as allowed\n", table,
             r.wal_collected, r.wal_collected == 1 ? "" : "s");
    if (r.staging)
      printf("verify %s: %" PRIu64 " unfinished put%s (staging files) not checked\n", table, r.staging,
             r.staging == 1 ? "" : "s");
  }
  (void)o->quiet;
  int code = r.n_problems ? 1 : 0;
  mw_verify_report_free(&r);
  return code;
}
