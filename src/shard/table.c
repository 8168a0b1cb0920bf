/*
 * table.c — see table.h.
 *
 * The write path (router, writes fanned out to shards, SYNC) is in
 * table_write.c.
 *
 * drop_table is a small state machine over the shards, one operation at a
 * time: LIST (_mem_wal/) → PREPARE (claim if not ours, seal) → COMMIT_SHARDS
 * (delete each shard directory) → COMMIT_LIST → COMMIT_TOPS (other folders,
 * _versions/ last) → remove the empty folders; a failed prepare goes to
 * ROLLBACK (unseal every SEALED shard) → RELEASE (flush the shards that were
 * not ACTIVE here before). docs/engine.md has the crash argument.
 */
#include "shard/table_int.h"

/* Written (durably) when the commit starts and removed just before the
 * table directory: a table that has it is being dropped, so a crash at any
 * point of the commit leaves a state mw_table_drop_remains can finish. */
#define DROP_MARKER "_memwald_drop_in_progress"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "lance/bloom.h"
#include "lance/pk_index.h"
#include "lance/sindex.h"
#include "lance/vindex_file.h"
#include "lance/route.h"
#include "lance/sstable.h"

/* ------------------------------------------------------------------- open */

/* The table's storage configuration: the caller's template (limits,
 * backend, S3 settings, test faults) with the table's URI. */
static mw_storage_config_t storage_cfg(const char *uri, const mw_table_opts_t *opts) {
  mw_storage_config_t sc;
  if (opts != NULL && opts->storage != NULL) sc = *opts->storage;
  else mw_storage_config_init(&sc, NULL);
  sc.uri = uri;
  return sc;
}

/* A blocking storage for start-up work on the table at uri. Start-up reads
 * and writes run without the test faults, which target the data path. */
static int open_sync(const char *uri, const mw_table_opts_t *opts, mw_storage_sync_t **ss,
                     mw_err_t *err) {
  mw_storage_config_t sc = storage_cfg(uri, opts);
  sc.fault = NULL;
  int rc = mw_storage_sync_open(&sc, ss, err);
  if (rc < 0) mw_err_set(err, rc, "table %s: storage", uri);
  return rc;
}

/* The newest base manifest under _versions/ (its direct children only). */
static int latest_manifest(mw_storage_sync_t *ss, const char *path, uint64_t accept_flags,
                           mw_table_meta_t *meta, mw_err_t *err) {
  static const char dir[] = "_versions/";
  mw_storage_req_t req;
  mw_storage_req_init(&req);
  char **names = NULL;
  size_t n = 0;
  mw_buf_t bytes = MW_BUF_INIT;
  int rc = mw_storage_sync_list(ss, dir, &req, err);
  if (rc < 0) {
    mw_err_set(err, rc, "table %s: cannot list _versions/", path);
    goto out;
  }
  names = calloc(req.nkeys + 1, sizeof *names);
  if (names == NULL) {
    rc = mw_err_set(err, -ENOMEM, "out of memory");
    goto out;
  }
  for (size_t i = 0; i < req.nkeys; i++) {
    const char *name = req.keys[i] + sizeof dir - 1;
    if (strchr(name, '/') == NULL) names[n++] = (char *)name; /* points into req.buf */
  }
  uint64_t version = 0;
  size_t idx = 0;
  rc = mw_dmanifest_latest(names, n, &version, &idx, err);
  if (rc == -ENOENT) mw_err_set(err, rc, "table %s: no manifest in _versions/", path);
  if (rc < 0) goto out;
  char key[MW_STORAGE_KEY_MAX_BYTES + 1];
  snprintf(key, sizeof key, "%s%s", dir, names[idx]);
  uint64_t size = 0;
  rc = mw_storage_sync_head(ss, key, &size, err);
  if (rc == 0 && size > MW_DMANIFEST_MAX_BYTES) rc = -EFBIG;
  if (rc == 0) rc = mw_storage_sync_get(ss, key, &bytes, err);
  if (rc < 0) {
    mw_err_set(err, rc, "table %s: cannot read %s: %s", path, key, mw_strerror(rc));
    goto out;
  }
  rc = mw_table_meta_read_ex(bytes.data, bytes.len, accept_flags, meta, err);
  meta->version = version;
  if (rc < 0) mw_err_prefix(err, rc, "table %s: manifest v%" PRIu64 ": ", path, version);
out:
  mw_buf_free(&bytes);
  free(names);
  mw_storage_req_cleanup(&req);
  return rc;
}

/* Lance 12's key types (types.c `pk`, bloom.h): its writer refuses the
 * others, or cannot flush them. */
static bool pk_type_hashable(mw_type_t t) { return mw_type_info(t)->pk; }

/* Highest field id in f's tree: a nested field's children are numbered
 * after it (pre-order), so the last top-level field is not the highest. */
static int32_t tree_max_id(const mw_field_t *f, int depth) {
  assert(depth <= MW_MAX_NESTING);
  int32_t m = f->id;
  for (uint32_t i = 0; i < f->n_children; i++) {
    int32_t c = tree_max_id(&f->children[i], depth + 1);
    if (c > m) m = c;
  }
  return m;
}

static int build_schema(mw_table_t *t, mw_err_t *err) {
  const mw_schema_t *base = &t->meta.schema;
  int rc = mw_schema_copy(&t->schema, base);
  if (rc < 0) return rc;
  const Lance__Table__Manifest *pb = t->meta.manifest.pb;
  for (size_t i = 0; i < pb->n_schema_metadata; i++) {
    const Lance__Table__Manifest__SchemaMetadataEntry *e = pb->schema_metadata[i];
    if (e == NULL || e->key == NULL) continue;
    rc = mw_kvs_set(&t->schema.meta, e->key, e->value.data, e->value.len);
    if (rc < 0) return rc;
  }
  if (mw_schema_find(&t->schema, "_tombstone") >= 0)
    return mw_err_set(err, -ENOTSUP, "table %s: a column is already named _tombstone", t->path);
  int32_t max_id = -1;
  bool has_pk = false;
  for (size_t i = 0; i < t->schema.n_fields; i++) {
    const mw_field_t *f = &t->schema.fields[i];
    int32_t m = tree_max_id(f, 0);
    if (m > max_id) max_id = m;
    if (f->pk_position == 0) continue;
    has_pk = true;
    if (!pk_type_hashable(f->type))
      return mw_err_set(err, -ENOTSUP, "table %s: primary-key column '%s' has type %s, which Lance cannot hash",
                        t->path, f->name, mw_type_name(f->type));
    if (f->nullable)
      return mw_err_set(err, -ENOTSUP, "table %s: primary-key column '%s' is nullable; Lance 12 refuses nullable keys",
                        t->path, f->name);
  }
  if (!has_pk) return mw_err_set(err, -ENOTSUP, "table %s: no unenforced primary key", t->path);
  if ((rc = mw_sstable_check_schema(&t->schema, err)) < 0)
    return mw_err_prefix(err, rc, "table %s: ", t->path);
  int k = mw_schema_add(&t->schema, "_tombstone", MW_T_BOOL, false);
  if (k < 0) return k;
  t->schema.fields[k].id = max_id + 1; /* unique: after every field and child */
  assert(t->schema.fields[k].id > tree_max_id(&t->schema.fields[k - 1], 0));
  return 0;
}

static void log_kvs(const char *what, const mw_kvs_t *kv) {
  char line[1024];
  size_t at = 0;
  line[0] = '\0';
  for (size_t i = 0; i < kv->n && at < sizeof line - 1; i++)
    at += (size_t)snprintf(line + at, sizeof line - at, "%s%s=%.*s", i ? ", " : "", kv->items[i].key,
                           (int)kv->items[i].value_len, (const char *)kv->items[i].value);
  mw_log_info("%s: {%s}", what, line);
}

static int merge_config(mw_table_t *t, const mw_table_opts_t *o, mw_err_t *err) {
  mw_shard_config_defaults(&t->cfg);
  const mw_kvs_t *d = &t->meta.memwal.writer_config_defaults;
  log_kvs("table writer_config_defaults", d);
  for (size_t i = 0; i < d->n; i++) {
    char v[128];
    snprintf(v, sizeof v, "%.*s", (int)d->items[i].value_len, (const char *)d->items[i].value);
    int rc = mw_shard_config_set(&t->cfg, d->items[i].key, v, NULL);
    if (rc < 0) mw_log_warn("table %s: writer_config_defaults %s=%s ignored (%s)", t->path,
                            d->items[i].key, v, rc == -ENOENT ? "unknown key" : "bad value");
  }
  mw_compact_config_defaults(&t->compact_cfg);
  mw_gc_config_defaults(&t->gc_cfg);
  for (size_t i = 0; i < o->n_config; i++) {
    int rc = mw_shard_config_set(&t->cfg, o->config_keys[i], o->config_values[i], err);
    if (rc == -ENOENT)
      rc = mw_compact_config_set(&t->compact_cfg, o->config_keys[i], o->config_values[i], err);
    if (rc == -ENOENT) rc = mw_gc_config_set(&t->gc_cfg, o->config_keys[i], o->config_values[i], err);
    if (rc == -ENOENT) return mw_err_set(err, rc, "config: unknown writer key '%s'", o->config_keys[i]);
    if (rc < 0) return rc;
    mw_log_info("memwald config: %s=%s", o->config_keys[i], o->config_values[i]);
  }
  t->cfg.sstable_seed = o->sstable_seed;
  t->cfg.zone_write_seeds = o->zone_write_seeds;
  t->cfg.zone_seed_rows_per_zone = o->zone_seed_rows_per_zone;
  t->cfg.skip_readback = o->skip_readback;
  if (o->zone_write_seeds)
    mw_log_notice("table %s: zone write seeds v1 on (%" PRIu64 " rows per zone): its SSTables carry "
                  "FLAG_ZONE_WRITE_SEEDS, which LanceDB 0.39.0 refuses to read", t->path,
                  o->zone_seed_rows_per_zone ? o->zone_seed_rows_per_zone : (uint64_t)8192);
  mw_log_info("table %s: durable_write=%s flush_interval=%ums wal_buffer=%" PRIu64
              " memtable=%" PRIu64 "B/%" PRIu64 " rows unflushed_limit=%" PRIu64,
              t->path, t->cfg.durable_write ? "true" : "false", t->cfg.max_wal_flush_interval_ms,
              t->cfg.max_wal_buffer_size, t->cfg.max_memtable_size, t->cfg.max_memtable_rows,
              t->cfg.max_unflushed_memtable_bytes);
  return 0;
}

/* A maintained index that is a vector index on a fixed_size_list<float32>
 * column: its column (MemTable schema index) and distance type, from the
 * base manifest's IndexMetadata (vindex_file.h). -ENOENT when it is another
 * kind of index (or not in the manifest); other errors name the index. */
static int vector_index(const mw_table_t *t, const char *name, uint32_t *field, mw_distance_t *dist, mw_err_t *err) {
  const mw_index_section_t *ix = &t->meta.indexes;
  for (size_t i = 0; i < ix->n; i++) {
    const Lance__Table__IndexMetadata *pb = ix->items[i].pb;
    if (pb->name == NULL || strcmp(pb->name, name) != 0 || pb->index_details == NULL) continue;
    mw_distance_t d;
    int rc = mw_vindex_details_distance(pb->index_details->type_url, pb->index_details->value.data,
                                        pb->index_details->value.len, &d);
    if (rc == -ENOENT) return rc;
    if (rc < 0 || pb->n_fields != 1)
      return mw_err_set(err, rc < 0 ? rc : -ENOTSUP, "table %s: vector index '%s': %s", t->path, name,
                        rc == -ENOTSUP ? "a distance type other than l2, cosine, dot" : "details or fields not understood");
    for (size_t f = 0; f < t->schema.n_fields; f++) {
      const mw_field_t *fl = &t->schema.fields[f];
      if (fl->id != pb->fields[0]) continue;
      if (fl->type != MW_T_FSL || fl->item_type != MW_T_FLOAT32)
        return mw_err_set(err, -ENOTSUP, "table %s: vector index '%s' is on '%s', not a fixed_size_list<float32>",
                          t->path, name, fl->name);
      if (field) *field = (uint32_t)f;
      if (dist) *dist = d;
      return 0;
    }
    return mw_err_set(err, -EBADMSG, "table %s: vector index '%s' names field id %d, not in the schema", t->path,
                      name, pb->fields[0]);
  }
  return -ENOENT;
}

/* Every maintained vector and BTree index into the shards' config: each
 * SSTable gets its own index of it (docs/indexes.md). */
static int scalar_index(mw_table_t *t, const char *name, bool record, mw_err_t *err);

static int resolve_vindexes(mw_table_t *t, mw_err_t *err) {
  const mw_memwal_index_t *x = &t->meta.memwal;
  t->cfg.n_vindexes = 0;
  t->cfg.n_sindexes = 0;
  for (size_t i = 0; i < x->n_maintained_indexes; i++) {
    mw_sstable_vindex_t v = {.name = x->maintained_indexes[i]};
    int rc = vector_index(t, v.name, &v.field, &v.dist, err);
    if (rc == -ENOENT) { /* a BTree index (check_index passed it): into cfg.sindexes */
      rc = scalar_index(t, v.name, true, err);
      if (rc < 0) return rc;
      continue;
    }
    if (rc < 0) return rc;
    if (t->cfg.n_vindexes == MW_SSTABLE_MAX_VINDEXES)
      return mw_err_set(err, -ENOTSUP, "table %s: more than %d maintained vector indexes", t->path, MW_SSTABLE_MAX_VINDEXES);
    t->cfg.vindexes[t->cfg.n_vindexes++] = v;
    mw_log_info("table %s: maintains vector index '%s' on '%s' (%s): an IVF_HNSW_SQ index in every SSTable",
                t->path, v.name, t->schema.fields[v.field].name, mw_distance_name(v.dist));
  }
  return 0;
}

/* A maintained BTree index: on a column whose type sindex.h indexes, every
 * SSTable gets its own BTree (cfg.sindexes); on another type none, and
 * LanceDB's filtered search scans those SSTables, which gives the same rows
 * (docs/indexes.md). */
static int btree_index(mw_table_t *t, const Lance__Table__IndexMetadata *pb, const char *name, bool record,
                       mw_err_t *err) {
  if (!record) return 0; /* check_index; resolve_vindexes records it once the config is set */
  uint32_t f = 0;
  while (f < t->schema.n_fields && (pb->n_fields != 1 || t->schema.fields[f].id != pb->fields[0])) f++;
  if (f == t->schema.n_fields) { /* a nested field (or not one field): no top-level column to index */
    mw_log_info("table %s: maintains BTree index '%s' on a field that is not a top-level column: no per-SSTable "
                "BTree; LanceDB filters memwald's SSTables by scanning them (docs/indexes.md)", t->path, name);
    return 0;
  }
  const mw_field_t *fl = &t->schema.fields[f];
  if (!mw_btree_type_ok(fl->type)) {
    mw_log_info("table %s: maintains BTree index '%s' on '%s' (%s): no per-SSTable BTree for that type; LanceDB "
                "filters memwald's SSTables by scanning them (docs/indexes.md)", t->path, name, fl->name,
                mw_type_name(fl->type));
    return 0;
  }
  if (t->cfg.n_sindexes == MW_SSTABLE_MAX_SINDEXES)
    return mw_err_set(err, -ENOTSUP, "table %s: more than %d maintained BTree indexes", t->path, MW_SSTABLE_MAX_SINDEXES);
  t->cfg.sindexes[t->cfg.n_sindexes++] = (mw_sstable_sindex_t){.name = name, .field = f};
  mw_log_info("table %s: maintains BTree index '%s' on '%s': a BTree in every SSTable", t->path, name, fl->name);
  return 0;
}

/* A maintained index that is not a vector index. LanceDB 0.39.0's MemWAL
 * maintains BTree, inverted and vector indexes only (mem_wal/index.rs refuses
 * every other kind, Bitmap included, in a write spec).
 * - BTree: accepted (btree_index).
 * - inverted (full-text): refused. On an SSTable without the index LanceDB
 *   searches with its default tokenizer, not the index's (no lower-casing,
 *   stemming, stop words, folding): other rows and scores than its own
 *   indexed SSTables give, and memwald does not write the inverted index.
 * Anything else: refused, naming its type. */
static int scalar_index(mw_table_t *t, const char *name, bool record, mw_err_t *err) {
  const mw_index_section_t *ix = &t->meta.indexes;
  for (size_t i = 0; i < ix->n; i++) {
    const Lance__Table__IndexMetadata *pb = ix->items[i].pb;
    if (pb->name == NULL || strcmp(pb->name, name) != 0) continue;
    const char *url = pb->index_details && pb->index_details->type_url ? pb->index_details->type_url : "(none)";
    if (strcmp(url, MW_SINDEX_DETAILS_URL) == 0) return btree_index(t, pb, name, record, err);
    if (strcmp(url, "/lance.table.InvertedIndexDetails") == 0)
      return mw_err_set(err, -ENOTSUP,
                        "table %s: the MemWAL index maintains full-text index '%s'; memwald does not write the "
                        "per-SSTable inverted index, and LanceDB's fullTextSearch over an SSTable without it "
                        "tokenizes differently (other rows and scores): leave '%s' out of the write spec's "
                        "maintained indexes (docs/indexes.md)",
                        t->path, name, name);
    return mw_err_set(err, -ENOTSUP,
                      "table %s: the MemWAL index maintains index '%s' of type %s; memwald (like LanceDB 0.39.0's "
                      "MemWAL) maintains only BTree and vector indexes: leave it out of the write spec's "
                      "maintained indexes",
                      t->path, name, url);
  }
  return mw_err_set(err, -EBADMSG, "table %s: the MemWAL index maintains index '%s', which is not in the manifest",
                    t->path, name);
}

static int check_index(mw_table_t *t, const mw_table_opts_t *o, mw_err_t *err) {
  if (!t->meta.has_memwal)
    return mw_err_set(err, -ENOTSUP, "table %s has no MemWAL index (%s); initialize it with LanceDB first",
                      t->path, MW_MEMWAL_INDEX_NAME);
  const mw_memwal_index_t *x = &t->meta.memwal;
  for (size_t i = 0; i < x->n_maintained_indexes; i++) {
    int rc = vector_index(t, x->maintained_indexes[i], NULL, NULL, err); /* -ENOENT sets no reason */
    if (rc == -ENOENT) rc = scalar_index(t, x->maintained_indexes[i], false, err);
    if (rc < 0) return rc;
  }
  t->kind = x->has_spec ? x->kind : MW_SHARDING_MANUAL;
  t->route_field = -1;
  if (t->kind == MW_SHARDING_BUCKET || t->kind == MW_SHARDING_IDENTITY) {
    for (size_t i = 0; i < t->schema.n_fields; i++)
      if (t->schema.fields[i].id == x->source_field_id) t->route_field = (int)i;
    if (t->route_field < 0)
      return mw_err_set(err, -EBADMSG, "table %s: sharding source field id %d is not in the schema",
                        t->path, x->source_field_id);
    t->num_buckets = x->num_buckets;
  }
  if (t->kind == MW_SHARDING_MANUAL && (o->owned == NULL || o->n_owned != 1))
    return mw_err_set(err, -ENOTSUP, "table %s: no sharding spec (manual shards); name exactly one owned shard",
                      t->path);
  if (t->kind == MW_SHARDING_UNSHARDED || t->kind == MW_SHARDING_BUCKET) {
    size_t n = t->kind == MW_SHARDING_BUCKET ? t->num_buckets : 1;
    if (n == 0 || n > MW_ROUTE_MAX_BUCKETS)
      return mw_err_set(err, -EBADMSG, "table %s: %zu buckets", t->path, n);
    t->route_ids = malloc(n * sizeof *t->route_ids);
    if (t->route_ids == NULL) return mw_err_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
      if (t->kind == MW_SHARDING_UNSHARDED) mw_shard_uuid_unsharded(t->route_ids[i]);
      else mw_shard_uuid_bucket((uint32_t)i, t->route_ids[i]);
    }
  }
  return 0;
}

/* Leftovers of crashed writers (local temp files, S3 incomplete uploads):
 * swept once at open, in the background; the storage drains the request
 * before it closes, so the table outlives the callback. */
static void on_swept(mw_storage_req_t *req, int status) {
  mw_table_t *t = req->data;
  assert(t != NULL);
  assert(!t->sweep_done);
  t->sweep_done = true;
  t->swept = status == 0 ? req->nkeys : 0;
  if (status < 0)
    mw_log_warn("table %s: sweeping crashed writers' leftovers failed: %s", t->path,
                mw_storage_req_error(req));
  else if (req->nkeys > 0)
    mw_log_notice("table %s: removed %zu leftovers of crashed writers (older than %d s)", t->path,
                  req->nkeys, MW_TABLE_SWEEP_MIN_AGE_S);
  mw_storage_req_cleanup(req);
}

static void sweep_start(mw_table_t *t) {
  mw_storage_req_init(&t->sweep_req);
  t->sweep_req.data = t;
  int rc = mw_storage_sweep_tmp(t->st, &t->sweep_req, "", MW_TABLE_SWEEP_MIN_AGE_S, on_swept);
  if (rc < 0) {
    t->sweep_done = true;
    mw_log_warn("table %s: cannot sweep leftovers: %s", t->path, mw_strerror(rc));
  }
}

/* What a loaded table owns in any state, and the table. */
static void table_free(mw_table_t *t) {
  assert(t != NULL);
  assert(t->n_shards == 0 || t->loop != NULL);
  mw_table_meta_free(&t->meta);
  mw_schema_free(&t->schema);
  free(t->owned);
  free(t->route_ids);
  free(t->path);
  free(t);
}

/* Frees a table that was loaded but never started (or whose start failed):
 * it owns no handle on any loop. */
static void unloaded_free(mw_table_t *t) {
  assert(t->compact == NULL);
  free(t->drop);
  table_free(t);
}

void mw_table_unload(mw_table_t *t) {
  if (t == NULL) return;
  assert(t->loop == NULL);
  assert(t->st == NULL);
  unloaded_free(t);
}

int mw_table_load(const char *path, const mw_table_opts_t *opts, mw_table_t **out, mw_err_t *err) {
  assert(path != NULL);
  assert(out != NULL);
  mw_table_opts_t none = {0};
  if (opts == NULL) opts = &none;
  *out = NULL;
  mw_table_t *t = calloc(1, sizeof *t);
  if (t == NULL) return -ENOMEM;
  mw_schema_init(&t->schema);
  mw_storage_sync_t *ss = NULL;
  int rc = (t->path = strdup(path)) ? 0 : -ENOMEM;
  if (rc == 0) rc = open_sync(path, opts, &ss, err);
  if (rc == 0 && (rc = mw_storage_sync_head(ss, DROP_MARKER, NULL, err)) != -ENOENT) {
    if (rc == 0)
      rc = mw_err_set(err, -ECANCELED,
                      "table %s: a drop_table was interrupted here (%s exists); finish it with "
                      "mw_table_drop_remains (memwald does at start-up) or remove the table",
                      path, DROP_MARKER);
  } else {
    rc = 0;
  }
  uint64_t accept = opts->zone_write_seeds ? MW_FLAG_ZONE_WRITE_SEEDS : 0;
  if (rc == 0) rc = latest_manifest(ss, path, accept, &t->meta, err);
  mw_storage_sync_close(ss);
  if (rc == 0) rc = build_schema(t, err);
  if (rc == 0) rc = check_index(t, opts, err);
  if (rc == 0) rc = merge_config(t, opts, err);
  if (rc == 0) rc = resolve_vindexes(t, err);
  if (rc == 0 && opts->owned != NULL) {
    t->owned = malloc((opts->n_owned ? opts->n_owned : 1) * 16);
    if (t->owned == NULL) rc = -ENOMEM;
    else memcpy(t->owned, opts->owned, opts->n_owned * 16);
    t->n_owned = opts->n_owned;
  }
  t->own_all = opts->owned == NULL;
  if (rc < 0) {
    unloaded_free(t);
    return rc;
  }
  assert(t->loop == NULL);
  assert(t->st == NULL);
  *out = t;
  return 0;
}

int mw_table_start(uv_loop_t *loop, mw_table_t *t, const mw_table_opts_t *opts, mw_err_t *err) {
  assert(loop != NULL);
  assert(t != NULL);
  assert(t->loop == NULL);
  assert(t->st == NULL);
  mw_table_opts_t none = {0};
  if (opts == NULL) opts = &none;
  t->loop = loop;
  mw_storage_config_t sc = storage_cfg(t->path, opts);
  int rc = mw_storage_open(loop, &sc, &t->st, err);
  if (rc == 0 && ((rc = mw_compact_new(t, &t->compact_cfg, &t->compact)) < 0 ||
                   (rc = mw_gc_new(t, &t->gc_cfg, &t->gc)) < 0)) {
    mw_err_set(err, rc, "table %s: compaction / GC: %s", t->path, mw_strerror(rc));
    mw_compact_free(t->compact);
    t->compact = NULL;
    mw_storage_close(t->st, NULL, NULL);
  }
  if (rc == 0) {
    mw_compact_start(t->compact);
    mw_gc_start(t->gc);
  }
  if (rc < 0) {
    unloaded_free(t);
    return rc;
  }
  mw_log_info("table %s: base version %" PRIu64 ", %zu columns, sharding %d", t->path,
              t->meta.version, t->schema.n_fields - 1, (int)t->kind);
  mw_owners_init(&t->owners, loop, t->st, opts->self);
  sweep_start(t);
  return 0;
}

int mw_table_open(uv_loop_t *loop, const char *path, const mw_table_opts_t *opts, mw_table_t **out,
                  mw_err_t *err) {
  assert(loop != NULL);
  assert(path != NULL);
  assert(out != NULL);
  mw_table_t *t = NULL;
  int rc = mw_table_load(path, opts, &t, err);
  if (rc == 0) rc = mw_table_start(loop, t, opts, err);
  *out = rc == 0 ? t : NULL;
  return rc;
}

static void drop_free(mw_table_t *t);

static void on_storage_closed(void *arg) {
  mw_table_t *t = arg;
  void (*cb)(mw_table_t *) = t->close_cb;
  mw_compact_free(t->compact);
  mw_gc_free(t->gc);
  mw_recover_free(t->recover);
  for (size_t i = 0; i < t->n_shards; i++) free(t->shards[i]);
  free(t->shards);
  drop_free(t);
  mw_owners_free(&t->owners);
  table_free(t);
  if (cb) cb(NULL);
}

static void on_shard_closed(mw_shard_t *s) {
  mw_table_t *t = s->data;
  if (--t->closing_left == 0) mw_storage_close(t->st, on_storage_closed, t);
}

static void housekeeping_stopped(void *arg) {
  mw_table_t *t = arg;
  assert(t->housekeeping_left > 0);
  if (--t->housekeeping_left == 0) t->housekeeping_cb(t);
}

/* Stop compaction and GC (no new base commit, no deletion), then cb(t). */
static void stop_housekeeping(mw_table_t *t, void (*cb)(void *arg)) {
  assert(!t->compact_stopped);
  t->compact_stopped = true;
  t->housekeeping_cb = cb;
  t->housekeeping_left = t->recover ? 3 : 2;
  mw_compact_stop(t->compact, housekeeping_stopped, t);
  mw_gc_stop(t->gc, housekeeping_stopped, t);
  if (t->recover) mw_recover_stop(t->recover, housekeeping_stopped, t);
}

/* After compaction stopped: the shards, then the storage. */
static void close_shards(void *arg) {
  mw_table_t *t = arg;
  t->closing_left = t->n_shards + 1;
  for (size_t i = 0; i < t->n_shards; i++) {
    int rc = mw_shard_close(&t->shards[i]->shard, on_shard_closed);
    if (rc < 0) t->closing_left--;
  }
  if (--t->closing_left == 0) mw_storage_close(t->st, on_storage_closed, t);
}

int mw_table_close(mw_table_t *t, void (*cb)(mw_table_t *t)) {
  assert(t != NULL);
  if (t->drop != NULL && t->drop->phase != 0) return -EBUSY;
  for (size_t i = 0; i < t->n_shards; i++) {
    const mw_shard_t *s = &t->shards[i]->shard;
    if ((s->state >= MW_SS_CLAIMING && s->state <= MW_SS_ACTIVE) || s->flush.busy ||
        mw_wal_busy(&s->wal) || s->op.busy)
      return -EBUSY;
  }
  t->close_cb = cb;
  if (!t->compact_stopped) stop_housekeeping(t, close_shards);
  else close_shards(t);
  return 0;
}

/* ----------------------------------------------------------------- shards */

bool mw_table_owns(const mw_table_t *t, const uint8_t id[16]) {
  assert(t != NULL);
  assert(id != NULL);
  if (t->own_all) return true;
  for (size_t i = 0; i < t->n_owned; i++)
    if (memcmp(t->owned[i], id, 16) == 0) return true;
  return false;
}

/* A shard became ACTIVE here: say so in its owner record. */
static mw_shard_t *shard_get(mw_table_t *t, const uint8_t id[16], bool create, bool any_owner);

mw_shard_t *mw_table_adopt(mw_table_t *t, const uint8_t id[16]) {
  assert(t != NULL);
  assert(id != NULL);
  if (!mw_table_owns(t, id)) {
    if (t->n_owned >= MW_TABLE_MAX_SHARDS) return NULL;
    uint8_t(*p)[16] = realloc(t->owned, (t->n_owned + 1) * 16);
    if (p == NULL) return NULL;
    t->owned = p;
    memcpy(t->owned[t->n_owned++], id, 16);
    char s[MW_UUID_STR_BYTES];
    mw_shard_uuid_format(id, s);
    mw_log_notice("table %s: taking over shard %s (not among this daemon's configured shards)",
                  t->path, s);
  }
  return shard_get(t, id, true, false);
}

int mw_table_disown(mw_table_t *t, const uint8_t id[16]) {
  assert(t != NULL);
  assert(id != NULL);
  mw_shard_t *s = shard_get(t, id, false, true);
  if (s != NULL && mw_shard_state(s) != MW_SS_NEW) return -EBUSY;
  if (t->own_all) { /* "all": spell the shards out, then take one away */
    size_t n = t->kind == MW_SHARDING_BUCKET ? t->num_buckets : t->kind == MW_SHARDING_UNSHARDED ? 1 : 0;
    if (n == 0) return -EINVAL; /* identity: the shards cannot be listed */
    uint8_t(*ids)[16] = malloc(n * 16);
    if (ids == NULL) return -ENOMEM;
    memcpy(ids, t->route_ids, n * 16);
    free(t->owned);
    t->owned = ids;
    t->n_owned = n;
    t->own_all = false;
  }
  for (size_t i = 0; i < t->n_owned; i++)
    if (memcmp(t->owned[i], id, 16) == 0) {
      memmove(t->owned[i], t->owned[i + 1], (t->n_owned - i - 1) * 16);
      t->n_owned--;
      return 0;
    }
  return 0;
}

static void on_shard_active(mw_shard_t *s) {
  mw_table_t *t = s->data;
  assert(t != NULL);
  assert(s->epoch > 0);
  for (size_t i = 0; i < t->n_shards; i++)
    if (&t->shards[i]->shard == s) mw_owners_record(&t->owners, t->shards[i]->id, s->epoch);
}

/* The key status shows for a new shard, known from its id alone for
 * unsharded and bucket tables ("unsharded", "bucket-N": N found among the
 * route ids made at open, no SHA-1 here); identity shards get theirs from
 * mw_table_shard_set_key. Made once, so status answers in O(shards). */
static void shard_key_init(const mw_table_t *t, mw_table_shard_t *ts) {
  assert(ts->key[0] == '\0');
  if (t->kind == MW_SHARDING_UNSHARDED) {
    snprintf(ts->key, sizeof ts->key, "unsharded");
    return;
  }
  if (t->kind != MW_SHARDING_BUCKET || t->route_ids == NULL) return;
  for (uint32_t b = 0; b < t->num_buckets; b++)
    if (memcmp(t->route_ids[b], ts->id, 16) == 0) {
      snprintf(ts->key, sizeof ts->key, "bucket-%" PRIu32, b);
      return;
    }
}

static mw_shard_t *shard_get(mw_table_t *t, const uint8_t id[16], bool create, bool any_owner) {
  for (size_t i = 0; i < t->n_shards; i++)
    if (memcmp(t->shards[i]->id, id, 16) == 0) return &t->shards[i]->shard;
  if (!create || (!any_owner && !mw_table_owns(t, id)) || t->n_shards >= MW_TABLE_MAX_SHARDS) return NULL;
  if (t->n_shards == t->cap_shards) {
    size_t cap = t->cap_shards ? t->cap_shards * 2 : 8;
    mw_table_shard_t **p = realloc(t->shards, cap * sizeof *p);
    if (p == NULL) return NULL;
    t->shards = p;
    t->cap_shards = cap;
  }
  mw_table_shard_t *ts = calloc(1, sizeof *ts);
  if (ts == NULL) return NULL;
  memcpy(ts->id, id, 16);
  shard_key_init(t, ts);
  mw_err_t err = {0};
  if (mw_shard_init(&ts->shard, t->loop, t->st, &t->schema, id, &t->cfg, &err) < 0) {
    mw_log_err("table %s: shard init: %s", t->path, err.msg);
    free(ts);
    return NULL;
  }
  ts->shard.data = t;
  ts->shard.on_backpressure = t->on_backpressure;
  ts->shard.on_active = on_shard_active;
  t->shards[t->n_shards++] = ts;
  return &ts->shard;
}

mw_shard_t *mw_table_shard(mw_table_t *t, const uint8_t id[16], bool create) {
  return shard_get(t, id, create, false);
}

void mw_table_shard_name(const mw_table_t *t, const uint8_t id[16], char *out, size_t n) {
  assert(t);
  assert(id);
  assert(out);
  assert(n > 0);
  for (size_t k = 0; k < t->n_shards; k++)
    if (memcmp(t->shards[k]->id, id, 16) == 0 && t->shards[k]->key[0]) {
      snprintf(out, n, "%s", t->shards[k]->key); /* identity-<value>, known */
      return;
    }
  if (t->kind == MW_SHARDING_UNSHARDED) {
    snprintf(out, n, "unsharded");
    return;
  }
  if (t->kind == MW_SHARDING_BUCKET && t->route_ids != NULL)
    for (uint32_t b = 0; b < t->num_buckets; b++)
      if (memcmp(t->route_ids[b], id, 16) == 0) {
        snprintf(out, n, "bucket-%" PRIu32, b);
        return;
      }
  snprintf(out, n, t->kind == MW_SHARDING_IDENTITY ? "identity" : "manual");
}

void mw_table_shard_set_key(mw_table_t *t, const uint8_t id[16], const char *value) {
  assert(t != NULL);
  assert(id != NULL);
  assert(value != NULL);
  mw_table_shard_t *ts = NULL;
  for (size_t i = 0; i < t->n_shards && ts == NULL; i++)
    if (memcmp(t->shards[i]->id, id, 16) == 0) ts = t->shards[i];
  if (ts == NULL || ts->key[0] != '\0') return;
  size_t n = strlen(value);
  bool cut = n > MW_TABLE_SHARD_KEY_VALUE_BYTES;
  if (cut) {
    n = MW_TABLE_SHARD_KEY_VALUE_BYTES;
    while (n > 0 && ((unsigned char)value[n] & 0xC0) == 0x80) n--; /* UTF-8 boundary */
  }
  snprintf(ts->key, sizeof ts->key, "identity-%.*s", (int)n, value);
  ts->key_truncated = cut;
  assert(strlen(ts->key) < sizeof ts->key);
}

int mw_table_recover_owned(mw_table_t *t) {
  assert(t != NULL);
  assert(t->recover == NULL);
  if (t->compact_stopped) return -ESHUTDOWN;
  return mw_recover_start(t, 0, &t->recover);
}

int mw_table_claim_owned(mw_table_t *t) {
  uint8_t id[16];
  int started = 0;
  size_t n = t->kind == MW_SHARDING_BUCKET ? t->num_buckets : 1;
  for (size_t i = 0; i < n || (t->kind == MW_SHARDING_IDENTITY && i < t->n_owned); i++) {
    if (t->kind == MW_SHARDING_UNSHARDED) mw_shard_uuid_unsharded(id);
    else if (t->kind == MW_SHARDING_BUCKET) mw_shard_uuid_bucket((uint32_t)i, id);
    else if (i < t->n_owned) memcpy(id, t->owned[i], 16);
    else break;
    if (!mw_table_owns(t, id)) continue;
    mw_shard_t *s = mw_table_shard(t, id, true);
    if (s && mw_shard_state(s) == MW_SS_NEW && mw_shard_claim(s, NULL, NULL) == 0) started++;
  }
  return started;
}

/* ------------------------------------------------------------- drop_table */

enum { DP_NONE = 0, DP_LIST, DP_PREPARE, DP_ROLLBACK, DP_RELEASE, DP_COMMIT_MARK, DP_COMMIT_SHARDS,
       DP_COMMIT_LIST, DP_COMMIT_TOPS, DP_COMMIT_UNMARK, DP_COMMIT_ROOT };

static const char drop_marker_text[] =
    "memwald drop_table: every shard was sealed and the table is being deleted.\n";
enum { DS_NONE = 0, DS_CLAIM, DS_SEAL };

static void drop_step(mw_table_t *t);

static void drop_free(mw_table_t *t) {
  mw_table_drop_t *d = t->drop;
  if (d == NULL) return;
  free(d->ids);
  free(d->was_active);
  for (size_t i = 0; i < d->n_tops; i++) free(d->tops[i]);
  free(d->tops);
  mw_storage_req_cleanup(&d->req);
  free(d);
  t->drop = NULL;
}

static void drop_finish(mw_table_t *t, int status, const char *reason) {
  mw_table_drop_t *d = t->drop;
  d->phase = DP_NONE;
  if (status == 0) mw_log_notice("table %s: dropped", t->path);
  else mw_log_err("table %s: drop_table: %s", t->path, reason);
  d->cb(t, status, status ? reason : NULL, d->arg);
}

static mw_shard_t *drop_shard(mw_table_t *t) {
  return shard_get(t, t->drop->ids[t->drop->i], true, true);
}

/* Prepare failed: remember why, then roll back. */
static void drop_fail(mw_table_t *t, int status, const char *reason) {
  mw_table_drop_t *d = t->drop;
  char sid[MW_UUID_STR_BYTES];
  mw_shard_uuid_format(d->ids[d->i], sid);
  d->status = status;
  snprintf(d->reason, sizeof d->reason, "prepare failed on shard %s (%.300s); rolled back", sid,
           reason && reason[0] ? reason : mw_strerror(status));
  mw_log_warn("table %s: drop_table: %s", t->path, d->reason);
  d->phase = DP_ROLLBACK;
  d->i = 0;
}

static void on_drop_ctl(mw_shard_t *s, int status, const char *reason, void *arg) {
  mw_table_t *t = arg;
  mw_table_drop_t *d = t->drop;
  assert(d != NULL);
  assert(d->phase != DP_NONE);
  switch (d->phase) {
    case DP_PREPARE:
      if (status == 0 && d->sub == DS_CLAIM) {
        d->sub = DS_SEAL;
        int rc = mw_shard_seal(s, on_drop_ctl, t);
        if (rc == 0) return; /* wait for the seal */
        drop_fail(t, rc, "seal refused");
        break;
      }
      if (status == 0 && d->sub == DS_SEAL && mw_shard_state(s) == MW_SS_SEALED) {
        d->i++;
      } else if (status == -EROFS && mw_shard_state(s) == MW_SS_SEALED) {
        d->i++; /* sealed before (an interrupted drop): already prepared */
      } else {
        drop_fail(t, status ? status : -EIO, reason);
      }
      break;
    case DP_ROLLBACK:
    case DP_RELEASE:
      if (status < 0) {
        size_t at = strlen(d->reason);
        snprintf(d->reason + at, sizeof d->reason - at, "; %s of shard %s failed: %.120s",
                 d->phase == DP_ROLLBACK ? "unseal" : "release", s->id_str, reason ? reason : "?");
      }
      d->i++;
      break;
    case DP_COMMIT_SHARDS:
      if (status < 0) {
        char msg[MW_TABLE_REASON_BYTES];
        snprintf(msg, sizeof msg, "commit: deleting shard %s failed (%.200s); run drop_table again",
                 s->id_str, reason ? reason : mw_strerror(status));
        drop_finish(t, status, msg);
        return;
      }
      d->i++;
      break;
    default: assert(0);
  }
  d->sub = DS_NONE;
  drop_step(t);
}

static mw_storage_req_t *drop_req(mw_table_t *t);

static int add_top(mw_table_drop_t *d, const char *key) {
  const char *slash = strchr(key, '/');
  size_t n = slash ? (size_t)(slash - key) + 1 : strlen(key);
  if (n == 10 && memcmp(key, "_versions/", 10) == 0) return 0; /* deleted last */
  if (strcmp(key, DROP_MARKER) == 0) return 0;                 /* after _versions/ */
  if (d->n_tops > 0 && strlen(d->tops[d->n_tops - 1]) == n && memcmp(d->tops[d->n_tops - 1], key, n) == 0)
    return 0;
  char **p = realloc(d->tops, (d->n_tops + 2) * sizeof *p);
  if (p == NULL) return -ENOMEM;
  d->tops = p;
  if ((d->tops[d->n_tops] = strndup(key, n)) == NULL) return -ENOMEM;
  d->n_tops++;
  return 0;
}

/* A storage step of the drop failed (a missing key is no failure). */
static void drop_storage_failed(mw_table_t *t, mw_storage_req_t *req, int status) {
  mw_table_drop_t *d = t->drop;
  char msg[MW_TABLE_REASON_BYTES];
  assert(status < 0);
  assert(d->phase != DP_NONE);
  snprintf(msg, sizeof msg, "%s failed: %.300s", d->phase == DP_LIST ? "listing _mem_wal/" : "commit: delete",
           mw_storage_req_error(req)[0] ? mw_storage_req_error(req) : mw_strerror(status));
  if (d->phase != DP_LIST) {
    size_t at = strlen(msg);
    snprintf(msg + at, sizeof msg - at, "; every shard is sealed: run drop_table again");
  }
  drop_finish(t, status, msg);
}

/* _mem_wal/<uuid>/...: one id per shard directory, plus our active shards;
 * then the drop prepares them (a missing _mem_wal/: only our shards). */
static int drop_listed(mw_table_t *t, const mw_storage_req_t *req, int status) {
  mw_table_drop_t *d = t->drop;
  assert(d->phase == DP_LIST);
  assert(d->n == 0);
  size_t cap = req->nkeys + t->n_shards + 1;
  d->ids = calloc(cap, 16);
  d->was_active = calloc(cap, sizeof *d->was_active);
  if (d->ids == NULL || d->was_active == NULL) return -ENOMEM;
  for (size_t k = 0; status == 0 && k < req->nkeys; k++) {
    const char *key = req->keys[k] + strlen("_mem_wal/");
    char sid[MW_UUID_STR_BYTES];
    uint8_t id[16];
    if (strlen(key) < MW_UUID_STR_BYTES || key[MW_UUID_STR_BYTES - 1] != '/') continue;
    memcpy(sid, key, MW_UUID_STR_BYTES - 1);
    sid[MW_UUID_STR_BYTES - 1] = '\0';
    if (mw_shard_uuid_parse(sid, id) < 0) continue;
    if (d->n > 0 && memcmp(d->ids[d->n - 1], id, 16) == 0) continue;
    memcpy(d->ids[d->n++], id, 16);
  }
  for (size_t j = 0; j < t->n_shards; j++) {
    if (mw_shard_state(&t->shards[j]->shard) == MW_SS_NEW) continue;
    size_t k = 0;
    while (k < d->n && memcmp(d->ids[k], t->shards[j]->id, 16) != 0) k++;
    if (k == d->n) memcpy(d->ids[d->n++], t->shards[j]->id, 16);
  }
  assert(d->n < cap);
  for (size_t k = 0; k < d->n; k++) {
    mw_shard_t *s = shard_get(t, d->ids[k], false, true);
    d->was_active[k] = s != NULL && mw_shard_state(s) == MW_SS_ACTIVE;
  }
  mw_log_notice("table %s: drop_table: prepare %zu shards", t->path, d->n);
  d->phase = DP_PREPARE;
  d->i = 0;
  return 0;
}

/* The table's top-level folders, _versions/ last: the commit deletes them. */
static int drop_tops_listed(mw_table_t *t, const mw_storage_req_t *req) {
  mw_table_drop_t *d = t->drop;
  assert(d->phase == DP_COMMIT_LIST);
  assert(d->n_tops == 0);
  for (size_t k = 0; k < req->nkeys; k++)
    if (add_top(d, req->keys[k]) < 0) return -ENOMEM;
  /* add_top leaves room for one more */
  if ((d->tops[d->n_tops] = strdup("_versions/")) == NULL) return -ENOMEM;
  d->n_tops++;
  d->phase = DP_COMMIT_TOPS;
  d->i = 0;
  return 0;
}

static void on_drop_storage(mw_storage_req_t *req, int status) {
  mw_table_t *t = req->data;
  mw_table_drop_t *d = t->drop;
  assert(d != NULL);
  if (status < 0 && status != -ENOENT) {
    drop_storage_failed(t, req, status);
    return;
  }
  switch (d->phase) {
    case DP_LIST:
      if (drop_listed(t, req, status) < 0) { drop_finish(t, -ENOMEM, "out of memory"); return; }
      break;
    case DP_COMMIT_MARK:
      d->phase = DP_COMMIT_SHARDS;
      d->i = 0;
      break;
    case DP_COMMIT_LIST:
      if (drop_tops_listed(t, req) < 0) { drop_finish(t, -ENOMEM, "out of memory"); return; }
      break;
    case DP_COMMIT_TOPS:
      d->i++;
      break;
    case DP_COMMIT_UNMARK: {
      /* what is left of the root (local: leftover temps, empty folders, the
       * table directory); the table stays busy (close: -EBUSY) meanwhile */
      d->phase = DP_COMMIT_ROOT;
      int rc = mw_storage_delete_root(t->st, drop_req(t), on_drop_storage);
      if (rc < 0) drop_finish(t, rc, "commit: cannot remove the emptied table");
      return;
    }
    case DP_COMMIT_ROOT:
      drop_finish(t, 0, NULL);
      return;
    default: assert(!"drop_table: a storage answer in a shard phase"); return;
  }
  drop_step(t);
}

/* A fresh request: storage's list appends to req->buf and replaces
 * req->keys, so a reused request must be cleaned first. */
static mw_storage_req_t *drop_req(mw_table_t *t) {
  mw_storage_req_cleanup(&t->drop->req);
  mw_storage_req_init(&t->drop->req);
  t->drop->req.data = t;
  return &t->drop->req;
}

/* Each step_* below starts the next operation of its phase and returns
 * false (a callback follows, or the drop finished), or true when the phase
 * moved on or the shard needed nothing (step again). */

/* Claim and seal each shard; every one sealed: write the drop marker. */
static bool step_prepare(mw_table_t *t) {
  mw_table_drop_t *d = t->drop;
  assert(d->phase == DP_PREPARE);
  assert(d->i <= d->n);
  if (d->i == d->n) {
    d->phase = DP_COMMIT_MARK;
    int rc = mw_storage_put(t->st, drop_req(t), DROP_MARKER, drop_marker_text, sizeof drop_marker_text - 1,
                            on_drop_storage);
    if (rc < 0) drop_finish(t, rc, "commit: cannot write the drop marker; run drop_table again");
    return false;
  }
  mw_shard_t *s = drop_shard(t);
  if (s == NULL) { drop_fail(t, -ENOMEM, "no shard handle"); return true; }
  mw_shard_state_t st = mw_shard_state(s);
  if (st == MW_SS_SEALED) { d->i++; return true; }
  d->sub = st == MW_SS_ACTIVE ? DS_SEAL : DS_CLAIM;
  int rc = st == MW_SS_ACTIVE ? mw_shard_seal(s, on_drop_ctl, t) : mw_shard_claim(s, on_drop_ctl, t);
  if (rc == -EROFS) { d->i++; return true; }
  if (rc < 0) { drop_fail(t, rc, d->sub == DS_SEAL ? "seal refused" : "claim refused"); return true; }
  return false;
}

/* Prepare failed: unseal what it sealed, then release. */
static bool step_rollback(mw_table_t *t) {
  mw_table_drop_t *d = t->drop;
  assert(d->phase == DP_ROLLBACK);
  assert(d->status < 0);
  if (d->i == d->n) {
    d->phase = DP_RELEASE;
    d->i = 0;
    return true;
  }
  mw_shard_t *s = drop_shard(t);
  if (s == NULL || mw_shard_state(s) != MW_SS_SEALED) { d->i++; return true; }
  if (mw_shard_unseal(s, on_drop_ctl, t) < 0) { d->i++; return true; }
  return false;
}

/* Release the shards the drop claimed (those not active before it). */
static bool step_release(mw_table_t *t) {
  mw_table_drop_t *d = t->drop;
  assert(d->phase == DP_RELEASE);
  assert(d->status < 0);
  if (d->i == d->n) {
    drop_finish(t, d->status, d->reason);
    return false;
  }
  mw_shard_t *s = drop_shard(t);
  if (s == NULL || d->was_active[d->i] || mw_shard_state(s) != MW_SS_ACTIVE) { d->i++; return true; }
  if (mw_shard_release(s, on_drop_ctl, t) < 0) { d->i++; return true; }
  return false;
}

/* The marker is written: delete each sealed shard, then list the table. */
static bool step_commit_shards(mw_table_t *t) {
  mw_table_drop_t *d = t->drop;
  assert(d->phase == DP_COMMIT_SHARDS);
  assert(d->i <= d->n);
  int rc;
  if (d->i == d->n) {
    mw_log_notice("table %s: drop_table: %zu shards sealed; deleting", t->path, d->n);
    d->phase = DP_COMMIT_LIST;
    rc = mw_storage_list(t->st, drop_req(t), "", on_drop_storage);
    if (rc < 0) drop_finish(t, rc, "commit: listing the table failed");
    return false;
  }
  mw_shard_t *s = drop_shard(t);
  assert(s != NULL);
  assert(mw_shard_state(s) == MW_SS_SEALED);
  rc = mw_shard_drop(s, on_drop_ctl, t);
  if (rc < 0) drop_finish(t, rc, "commit: shard drop refused; run drop_table again");
  return false;
}

/* Delete each top-level folder, then the marker. */
static bool step_commit_tops(mw_table_t *t) {
  mw_table_drop_t *d = t->drop;
  assert(d->phase == DP_COMMIT_TOPS);
  assert(d->i <= d->n_tops);
  int rc;
  if (d->i == d->n_tops) {
    d->phase = DP_COMMIT_UNMARK;
    rc = mw_storage_delete(t->st, drop_req(t), DROP_MARKER, on_drop_storage);
    if (rc < 0) drop_finish(t, rc, "commit: cannot remove the drop marker; run drop_table again");
    return false;
  }
  rc = mw_storage_delete_prefix(t->st, drop_req(t), d->tops[d->i], on_drop_storage);
  if (rc < 0) drop_finish(t, rc, "commit: delete refused; run drop_table again");
  return false;
}

/* Start the next operation of the current phase, or move on. */
static void drop_step(mw_table_t *t) {
  mw_table_drop_t *d = t->drop;
  assert(d != NULL);
  bool again = true;
  while (again) {
    switch (d->phase) {
      case DP_PREPARE: again = step_prepare(t); break;
      case DP_ROLLBACK: again = step_rollback(t); break;
      case DP_RELEASE: again = step_release(t); break;
      case DP_COMMIT_SHARDS: again = step_commit_shards(t); break;
      case DP_COMMIT_TOPS: again = step_commit_tops(t); break;
      default: assert(!"drop_step: a phase that waits on storage"); return;
    }
  }
}

/* Compaction has stopped: list the shards. */
static void drop_begin(void *arg) {
  mw_table_t *t = arg;
  int rc = mw_storage_list(t->st, &t->drop->req, "_mem_wal/", on_drop_storage);
  if (rc < 0) drop_finish(t, rc, "drop_table: cannot list _mem_wal/");
}

int mw_table_compact(mw_table_t *t, mw_compact_cb cb, void *arg) {
  assert(t != NULL);
  assert(cb != NULL);
  if (t->compact_stopped) return -ESHUTDOWN;
  return mw_compact_request(t->compact, cb, arg);
}

int mw_table_drop(mw_table_t *t, mw_table_drop_cb cb, void *arg) {
  assert(t != NULL);
  assert(cb != NULL);
  if (t->drop != NULL && t->drop->phase != DP_NONE) return -EBUSY;
  for (size_t i = 0; i < t->n_shards; i++) {
    const mw_shard_t *s = &t->shards[i]->shard;
    if (s->ctl != 0 || s->state == MW_SS_CLAIMING || s->state == MW_SS_REPLAYING) return -EBUSY;
  }
  drop_free(t);
  mw_table_drop_t *d = calloc(1, sizeof *d);
  if (d == NULL) return -ENOMEM;
  t->drop = d;
  d->cb = cb;
  d->arg = arg;
  mw_storage_req_init(&d->req);
  d->req.data = t;
  d->phase = DP_LIST;
  if (!t->compact_stopped) { /* no base commit nor GC may land while the table goes */
    stop_housekeeping(t, drop_begin);
    return 0;
  }
  int rc = mw_storage_list(t->st, &d->req, "_mem_wal/", on_drop_storage);
  if (rc < 0) drop_free(t);
  return rc;
}

/* ------------------------------------------------- interrupted drop_table */

int mw_table_drop_interrupted(const char *uri, const mw_table_opts_t *opts, mw_err_t *err) {
  assert(uri != NULL);
  mw_storage_sync_t *ss = NULL;
  int rc = open_sync(uri, opts, &ss, err);
  if (rc == 0) rc = mw_storage_sync_head(ss, DROP_MARKER, NULL, err);
  mw_storage_sync_close(ss);
  return rc == 0 ? 1 : rc == -ENOENT ? 0 : rc;
}

/* The commit's deletes, in the commit's order: every top-level folder but
 * _versions/, then _versions/, then the marker, then the root. A crash in
 * here leaves the marker, so this can run again. */
static int drop_rest(mw_storage_sync_t *ss, const char *uri, mw_err_t *err) {
  mw_storage_req_t req;
  mw_storage_req_init(&req);
  mw_table_drop_t d = {0};
  int rc = mw_storage_sync_list(ss, "", &req, err);
  for (size_t k = 0; rc == 0 && k < req.nkeys; k++) rc = add_top(&d, req.keys[k]);
  mw_storage_req_cleanup(&req);
  for (size_t i = 0; rc >= 0 && i <= d.n_tops; i++)
    rc = mw_storage_sync_delete_prefix(ss, i < d.n_tops ? d.tops[i] : "_versions/", err);
  if (rc >= 0) rc = mw_storage_sync_delete(ss, DROP_MARKER, err);
  if (rc >= 0) rc = mw_storage_sync_delete_root(ss, err);
  for (size_t i = 0; i < d.n_tops; i++) free(d.tops[i]);
  free(d.tops);
  if (rc < 0) return mw_err_set(err, rc, "table %s: finishing the interrupted drop", uri);
  return 0;
}

int mw_table_drop_remains(const char *uri, const mw_table_opts_t *opts, mw_err_t *err) {
  assert(uri != NULL);
  mw_storage_sync_t *ss = NULL;
  int rc = open_sync(uri, opts, &ss, err);
  if (rc == 0 && (rc = mw_storage_sync_head(ss, DROP_MARKER, NULL, err)) == -ENOENT)
    rc = mw_err_set(err, -ENOENT, "table %s: no interrupted drop_table here", uri);
  if (rc == 0) rc = drop_rest(ss, uri, err);
  mw_storage_sync_close(ss);
  return rc;
}

/* ---------------------------------------------------------------- bootstrap */

int mw_table_exists(const char *uri, const mw_table_opts_t *opts, mw_err_t *err) {
  assert(uri != NULL);
  mw_storage_sync_t *ss = NULL;
  mw_storage_req_t req;
  mw_storage_req_init(&req);
  int rc = open_sync(uri, opts, &ss, err);
  if (rc == 0) rc = mw_storage_sync_list(ss, "_versions/", &req, err);
  if (rc == 0) rc = req.nkeys > 0;
  mw_storage_req_cleanup(&req);
  mw_storage_sync_close(ss);
  return rc;
}

int mw_table_bootstrap(const char *uri, const mw_table_opts_t *opts, const mw_table_new_file_t *files,
                       size_t n, mw_err_t *err) {
  assert(uri != NULL);
  assert(files != NULL || n == 0);
  mw_storage_sync_t *ss = NULL;
  int rc = open_sync(uri, opts, &ss, err);
  for (size_t i = 0; rc == 0 && i < n; i++) {
    rc = mw_storage_sync_put(ss, files[i].key, files[i].bytes, files[i].len, !files[i].replace, err);
    if (rc == -EEXIST) mw_err_set(err, rc, "table %s: %s exists already", uri, files[i].key);
  }
  mw_storage_sync_close(ss);
  return rc;
}
