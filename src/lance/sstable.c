/*
 * sstable.c — one MemWAL SSTable as a list of files (see sstable.h).
 *
 * Order of work, as Lance's flusher (memwal.md §6.2) but in memory:
 *   1. check the schema (trailing `_tombstone: bool not null`, a PK) and the
 *      batches, and add up the accounting fields (§6.3);
 *   2. hash every row's PK (SipHash-1-3, §6.4) in insert order;
 *   3. dedup: every row whose key appears again later is deleted (§6.2.4);
 *   4. data file (one fragment, rows in insert order, Lance 2.2);
 *   5. deletion file (roaring, fragment 0, read_version 1) if anything died;
 *   6. bloom_filter.bin: 32 KiB Sbbf, one insert per physical row (§6.5);
 *   7. _pk_index/page_data.lance + page_lookup.lance over EVERY physical row
 *      (lance-files.md §7.1: sorted by key then row; readers need it);
 *   8. dataset manifest version 1 naming the data file (and deletion file),
 *      and latest_version_hint.json.
 * With zone seeds (opts.zone_seeds), step 4 first builds one v1 seed per
 * column over the same rows and writes them as global buffers 1..C, and
 * step 8 sets FLAG_ZONE_WRITE_SEEDS in both feature flags.
 *
 * Sample: a 3-row SSTable of ids (7, 8, 7) has physical_rows 3,
 * primary_key_bytes 24, deletion offsets {0}, i.e. _deletions/0-1-<id>.bin =
 *   3a 30 00 00  01 00 00 00  00 00 00 00  10 00 00 00  00 00
 *   cookie       1 container  key 0, card-1 0  offset 16  value 0
 *
 * Names: <8 hex>_gen_<G> (4 random bytes), data/<24 binary digits of 3 UUIDv4
 * bytes><26 hex of the other 13>.lance, _deletions/0-1-<random u64>.bin.
 */
#include "lance/sstable.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "lance/bloom.h"
#include "lance/datafile.h"
#include "lance/datafile_fields.h"
#include "lance/dataset_manifest.h"
#include "lance/sindex.h"
#include "lance/vindex_file.h"
#include "lance/deletion.h"
#include "lance/lance_schema.h"
#include "lance/pk_index.h"
#include "lance/readback.h"
#include "lance/util.h"
#include "lance/zone_seed.h"

/* Bytes Lance's batch store adds per stored batch beyond the column payload
 * (fitted, memwal.md §6.3 and §13.1). */
#define SST_TOMBSTONE "_tombstone"

/* ------------------------------------------------------------ randomness */

typedef struct rng {
  uint64_t state; /* 0 = getrandom */
} rng_t;

static uint64_t rng_u64(rng_t *r) {
  assert(r != NULL);
  if (r->state == 0) {
    uint64_t v = 0;
    while (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v) {
    }
    return v;
  }
  uint64_t z = (r->state += 0x9e3779b97f4a7c15ull); /* splitmix64 */
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Lance's generate_random_filename over two random words. */
static void data_file_name(rng_t *r, char out[64]) {
  uint8_t u[16];
  uint64_t a = rng_u64(r), b = rng_u64(r);
  memcpy(u, &a, 8);
  memcpy(u + 8, &b, 8);
  mw_data_file_name(u, out);
}

/* ------------------------------------------------------------ accounting */

/* PK payload without validity (PK columns are non-null in practice). */
static uint64_t pk_payload(const mw_batch_t *b) {
  assert(b != NULL);
  uint64_t sum = 0;
  for (size_t i = 0; i < b->schema->n_fields; i++) {
    const mw_field_t *f = &b->schema->fields[i];
    if (f->pk_position == 0) continue;
    const mw_column_t *c = &b->cols[i];
    if (mw_field_layout(f) == MW_LAYOUT_VAR) {
      const int32_t *off = (const int32_t *)(const void *)c->offsets.data;
      uint64_t ow = mw_field_info(f)->large ? 8 : 4;
      if (c->length > 0) sum += ow * (uint64_t)c->length + (uint64_t)(off[c->length] - off[0]);
    } else if (f->type == MW_T_BOOL) {
      sum += mw_bitmap_bytes(c->length);
    } else {
      sum += (uint64_t)c->length * mw_type_width(f);
    }
  }
  return sum;
}

/* ------------------------------------------------------------ validation */

int mw_sstable_check_schema(const mw_schema_t *schema, mw_err_t *err) {
  assert(schema != NULL);
  /* every type of types.h has a data-file encoding (datafile_write*.c); what is
   * left to check is each field's parameters */
  for (size_t i = 0; i < schema->n_fields; i++) {
    char why[160];
    if (mw_field_check(&schema->fields[i], why, sizeof why) < 0)
      return mw_err_set(err, -ENOTSUP, "%s", why);
  }
  return 0;
}

static int check_input(const mw_schema_t *s, const mw_batch_t *const *batches, size_t n,
                       int64_t *rows, mw_err_t *err) {
  assert(s != NULL);
  assert(rows != NULL);
  if (s->n_fields < 2)
    return mw_err_set(err, -EINVAL, "sstable: schema needs a PK column and _tombstone");
  const mw_field_t *t = &s->fields[s->n_fields - 1];
  if (strcmp(t->name, SST_TOMBSTONE) != 0 || t->type != MW_T_BOOL || t->nullable)
    return mw_err_set(err, -EINVAL, "sstable: last field must be `_tombstone: bool not null`, got `%s`",
                      t->name);
  int pk = 0;
  for (size_t i = 0; i < s->n_fields; i++) pk += s->fields[i].pk_position > 0;
  if (pk == 0) return mw_err_set(err, -EINVAL, "sstable: schema has no primary-key field");
  if (pk > 1) /* LanceDB 0.39 refuses them too ("compound primary keys are not supported") */
    return mw_err_set(err, -ENOTSUP, "sstable: composite primary keys are not supported");
  if (n == 0 || n > MW_SSTABLE_MAX_BATCHES)
    return mw_err_set(err, -EINVAL, "sstable: %zu batches (need 1..%d)", n, MW_SSTABLE_MAX_BATCHES);
  int64_t sum = 0;
  for (size_t i = 0; i < n; i++) {
    const mw_batch_t *b = batches[i];
    if (b->schema->n_fields != s->n_fields)
      return mw_err_set(err, -EINVAL, "sstable: batch %zu has %zu fields, schema %zu", i,
                        b->schema->n_fields, s->n_fields);
    for (size_t c = 0; c < s->n_fields; c++)
      if (b->cols[c].length != b->n_rows)
        return mw_err_set(err, -EINVAL, "sstable: batch %zu column %zu has %" PRId64 " rows, batch %" PRId64,
                          i, c, b->cols[c].length, b->n_rows);
    sum += b->n_rows;
    if (sum > MW_SSTABLE_MAX_ROWS || sum > MW_DEDUP_MAX_ROWS)
      return mw_err_set(err, -EFBIG, "sstable: more than %" PRId64 " rows", (int64_t)MW_DEDUP_MAX_ROWS);
  }
  if (sum == 0) return mw_err_set(err, -EINVAL, "sstable: no rows (Lance refuses empty flushes)");
  *rows = sum;
  return 0;
}

/* ------------------------------------------------------------ the files */

static int add_file(mw_sstable_t *sst, const char *rel, mw_buf_t *bytes) {
  assert(sst->n_files < MW_SSTABLE_MAX_FILES);
  size_t len = strlen(sst->dir_name) + 1 + strlen(rel) + 1;
  char *p = malloc(len);
  if (p == NULL) return -ENOMEM;
  snprintf(p, len, "%s/%s", sst->dir_name, rel);
  mw_sstable_file_t *f = &sst->files[sst->n_files++];
  f->path = p;
  f->bytes = *bytes;
  mw_buf_init(bytes);
  return 0;
}

void mw_sstable_free(mw_sstable_t *sst) {
  if (sst == NULL) return;
  for (size_t i = 0; i < sst->n_files; i++) {
    free(sst->files[i].path);
    mw_buf_free(&sst->files[i].bytes);
  }
  memset(sst, 0, sizeof *sst);
}

const mw_sstable_file_t *mw_sstable_find(const mw_sstable_t *sst, const char *suffix) {
  assert(sst != NULL);
  size_t sl = strlen(suffix);
  for (size_t i = 0; i < sst->n_files; i++) {
    size_t pl = strlen(sst->files[i].path);
    if (pl >= sl && strcmp(sst->files[i].path + pl - sl, suffix) == 0) return &sst->files[i];
  }
  return NULL;
}

/* Column `idx` of every batch, concatenated (the PK index needs all keys in
 * one column). Fixed-width columns without nulls are copied wholesale. */
static int concat_column(const mw_field_t *f, const mw_batch_t *const *batches, size_t n, size_t idx,
                         mw_column_t *out) {
  if (mw_column_init(out, f) < 0) return -ENOMEM;
  for (size_t i = 0; i < n; i++) {
    const mw_column_t *c = &batches[i]->cols[idx];
    int rc;
    if (mw_field_layout(f) == MW_LAYOUT_FIXED && c->null_count == 0 && out->null_count == 0) {
      rc = mw_buf_append(&out->values, c->values.data, (size_t)c->length * mw_type_width(f));
      out->length += c->length;
    } else {
      rc = mw_column_append_range(out, c, f, 0, c->length);
    }
    if (rc < 0) {
      mw_column_free(out);
      return rc;
    }
  }
  return 0;
}

/* Arrow writers (arrow-js, arrow-rs) mark the items of a NULL vector null
 * too. Those item bits mean nothing (the row is null) and Lance stores no
 * item validity for such pages, so the data file gets shallow views of the
 * batches with them dropped. Item nulls inside a VALID vector stay (and the
 * datafile writer refuses them with -ENOTSUP). *views is NULL when no batch
 * needs it; else free only the views' cols arrays (buffers are borrowed). */
static bool dead_items_only(const mw_field_t *f, const mw_column_t *c) {
  assert(f != NULL);
  if (c->item_null_count == 0 || c->item_validity.len == 0) return false;
  for (int64_t r = 0; r < c->length; r++) {
    if (!mw_column_valid(c, r)) continue;
    for (int64_t k = 0; k < f->fsl_dim; k++)
      if (!mw_bit_get(c->item_validity.data, r * f->fsl_dim + k)) return false;
  }
  return true;
}

static int strip_dead_items(const mw_schema_t *s, const mw_batch_t *const *batches, size_t n,
                            mw_batch_t **views) {
  assert(s != NULL);
  assert(views != NULL);
  *views = NULL;
  bool any = false;
  for (size_t i = 0; i < n && !any; i++)
    for (size_t c = 0; c < s->n_fields; c++)
      any |= s->fields[c].type == MW_T_FSL && dead_items_only(&s->fields[c], &batches[i]->cols[c]);
  if (!any) return 0;
  mw_batch_t *v = calloc(n, sizeof *v);
  if (v == NULL) return -ENOMEM;
  for (size_t i = 0; i < n; i++) {
    v[i] = *batches[i];
    v[i].cols = malloc(s->n_fields * sizeof *v[i].cols);
    if (v[i].cols == NULL) {
      for (size_t j = 0; j < i; j++) free(v[j].cols);
      free(v);
      return -ENOMEM;
    }
    memcpy(v[i].cols, batches[i]->cols, s->n_fields * sizeof *v[i].cols);
    for (size_t c = 0; c < s->n_fields; c++) {
      if (s->fields[c].type != MW_T_FSL || !dead_items_only(&s->fields[c], &v[i].cols[c])) continue;
      mw_buf_init(&v[i].cols[c].item_validity);
      v[i].cols[c].item_null_count = 0;
    }
  }
  *views = v;
  return 0;
}

/* Row hashes of every batch, concatenated in insert order. */
static int hash_rows(const mw_batch_t *const *batches, size_t n, int64_t rows, uint64_t **out,
                     mw_err_t *err) {
  uint64_t *h = malloc((size_t)rows * sizeof *h);
  if (h == NULL) return -ENOMEM;
  int64_t at = 0;
  for (size_t i = 0; i < n; i++) {
    int rc = mw_pk_hash_batch(batches[i], h + at, err);
    if (rc < 0) {
      free(h);
      return rc;
    }
    at += batches[i]->n_rows;
  }
  assert(at == rows);
  *out = h;
  return 0;
}

/* _versions/18446744073709551614.manifest: version 1, one fragment (id 0)
 * with one data file holding every leaf field as a column, plus the
 * deletion file when rows were deduplicated. */
static int manifest_file(const mw_schema_t *schema, const char *data_name, const mw_sstable_t *sst,
                         int64_t ts_ns, bool zone_seeds, const mw_buf_t *index_section, mw_buf_t *out,
                         mw_err_t *err) {
  assert(sst != NULL);
  Lance__File__Field **fields = NULL;
  size_t n_fields = 0;
  int rc = mw_lance_fields_from_schema(schema, &fields, &n_fields);
  if (rc < 0) return mw_err_set(err, rc, "sstable: schema -> Lance fields failed");
  /* the data file (2.2) has one column per leaf field; DataFile.fields and
   * column_indices as LanceDB writes them (datafile_fields.h) */
  int32_t *ids = calloc(n_fields ? n_fields : 1, sizeof *ids);
  int32_t *cols = calloc(n_fields ? n_fields : 1, sizeof *cols);
  int n_leaves = ids && cols ? mw_datafile_fields(schema, 2, 2, ids, cols, n_fields, err) : -ENOMEM;
  if (n_leaves < 0) {
    rc = n_leaves;
    goto done;
  }
  mw_sst_manifest_params_t p = {
      .fields = fields,
      .n_fields = n_fields,
      .data_file = data_name,
      .field_ids = ids,
      .column_indices = cols,
      .n_columns = (size_t)n_leaves,
      .file_size_bytes = sst->data_file_bytes,
      .physical_rows = sst->physical_rows,
      .has_deletion = sst->deleted_rows > 0,
      .deletion_id = sst->deletion_id,
      .num_deleted_rows = sst->deleted_rows,
      .timestamp_seconds = ts_ns / 1000000000,
      .timestamp_nanos = (int32_t)(ts_ns % 1000000000),
      .feature_flags = zone_seeds ? MW_FLAG_ZONE_WRITE_SEEDS : 0,
      .index_section = index_section ? index_section->data : NULL,
      .index_section_len = index_section ? index_section->len : 0,
  };
  rc = mw_sst_manifest_encode(&p, out, err);
done:
  free(ids);
  free(cols);
  mw_lance_fields_free(fields, n_fields);
  return rc;
}

void (*mw_sstable_data_hook_for_tests)(mw_buf_t *file);

int mw_sstable_data_file(const mw_schema_t *schema, const mw_batch_t *const *batches, size_t n,
                         const mw_sstable_opts_t *opts, mw_buf_t *out, mw_err_t *err) {
  assert(schema != NULL);
  assert(out != NULL);
  assert(batches != NULL || n == 0);
  static const mw_sstable_opts_t defaults = {0};
  if (opts == NULL) opts = &defaults;
  mw_batch_t *views = NULL;
  const mw_batch_t **vp = NULL;
  mw_datafile_write_opts_t dopts = {.zstd = opts->zstd, .max_page_bytes = opts->max_page_bytes};
  int rc = strip_dead_items(schema, batches, n, &views);
  if (rc == 0 && views != NULL) {
    vp = malloc(n * sizeof *vp);
    if (vp == NULL) rc = -ENOMEM;
    for (size_t i = 0; vp != NULL && i < n; i++) vp[i] = &views[i];
  }
  /* zone write seeds: one per column over the rows the data file holds,
   * global buffers 1..C, located in the file's schema metadata */
  const mw_batch_t *const *rows = vp ? vp : batches;
  mw_seed_set_t seeds;
  mw_datafile_gbuf_t *gb = NULL;
  memset(&seeds, 0, sizeof seeds);
  mw_schema_init(&seeds.schema);
  if (rc == 0 && opts->zone_seeds) {
    uint64_t rpz = opts->seed_rows_per_zone ? opts->seed_rows_per_zone : MW_SEED_DEFAULT_ROWS_PER_ZONE;
    rc = mw_seed_set_build(&seeds, schema, rows, n, rpz, 1, err);
    if (rc == 0 && (gb = calloc(seeds.n + 1, sizeof *gb)) == NULL) rc = -ENOMEM;
    for (size_t i = 0; rc == 0 && i < seeds.n; i++) gb[i] = (mw_datafile_gbuf_t){seeds.bufs[i].data, seeds.bufs[i].len};
  }
  if (rc == 0)
    rc = mw_datafile_write(opts->zone_seeds ? &seeds.schema : schema, rows, n, gb, seeds.n, &dopts, out, err);
  if (rc == 0 && mw_sstable_data_hook_for_tests != NULL) mw_sstable_data_hook_for_tests(out);
  free(gb);
  mw_seed_set_free(&seeds);
  for (size_t i = 0; views != NULL && i < n; i++) free(views[i].cols);
  free(views);
  free(vp);
  return rc;
}

/* Step 4: the data file, rows in insert order. */
static int step_data_file(const mw_schema_t *schema, const mw_batch_t *const *batches, size_t n,
                          const mw_sstable_opts_t *opts, uint64_t in_memory_bytes, mw_buf_t *b,
                          mw_err_t *err) {
  /* one allocation for the data file: payload plus ~1/8 for padding and metadata */
  int rc = mw_buf_reserve(b, in_memory_bytes + in_memory_bytes / 8 + (1u << 20));
  if (rc == 0) rc = mw_sstable_data_file(schema, batches, n, opts, b, err);
  return rc;
}

/* Step 5: _deletions/0-1-<id>.bin when some rows were superseded. */
static int step_deletions(const uint32_t *dead, size_t n_dead, mw_buf_t *b, mw_err_t *err) {
  if (n_dead == 0) return 0;
  int rc = mw_deletion_encode(dead, n_dead, b, err);
  return rc < 0 ? rc : 0;
}

/* Step 6: bloom_filter.bin, one insert per physical row of Lance 12's bloom
 * hash: the row's, or *same for every row of a large_utf8/large_binary key
 * (then *hashes points at it and *rows is 1). */
static int step_bloom(const mw_schema_t *schema, const uint64_t **hashes, int64_t *rows, uint64_t *same,
                      mw_buf_t *b) {
  assert(schema != NULL);
  assert(rows != NULL);
  mw_bloom_t bloom = {0};
  for (size_t i = 0; i < schema->n_fields; i++)
    if (schema->fields[i].pk_position == 1 && mw_pk_bloom_constant(&schema->fields[i], same)) {
      *hashes = same;
      *rows = 1;
    }
  int rc = mw_bloom_init(&bloom, MW_BLOOM_SST_BYTES);
  if (rc == 0) {
    mw_bloom_insert_many(&bloom, *hashes, (size_t)*rows);
    rc = mw_bloom_encode(&bloom, b);
  }
  mw_bloom_free(&bloom);
  return rc;
}

/* Step 7: _pk_index over every physical row (the single PK column). */
static int step_pk_index(const mw_schema_t *schema, const mw_batch_t *const *batches, size_t n,
                         mw_column_t *keys, mw_buf_t *data, mw_buf_t *lookup, mw_err_t *err) {
  size_t pk = 0;
  for (size_t i = 0; i < schema->n_fields; i++)
    if (schema->fields[i].pk_position == 1) pk = i;
  assert(schema->fields[pk].pk_position == 1);
  int rc = concat_column(&schema->fields[pk], batches, n, pk, keys);
  if (rc < 0) return rc;
  return mw_pk_index_write(&schema->fields[pk], keys, 0, data, lookup, err);
}

/* Step 8: the version hint, then the dataset manifest (last: it is what
 * makes the other files a dataset). */
static int step_manifest(const mw_schema_t *schema, const mw_sstable_opts_t *opts,
                         const char *data_name, mw_sstable_t *out, const mw_buf_t *index_section,
                         mw_err_t *err) {
  assert(opts != NULL);
  static const char hint[] = "{\"version\":1}";
  mw_buf_t b = MW_BUF_INIT;
  int rc = mw_buf_append(&b, hint, sizeof hint - 1);
  if (rc == 0) rc = add_file(out, "_versions/latest_version_hint.json", &b);
  int64_t ts = opts->timestamp_ns;
  if (ts == 0) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    ts = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
  }
  if (rc == 0) rc = manifest_file(schema, data_name, out, ts, opts->zone_seeds, index_section, &b, err);
  if (rc == 0) rc = add_file(out, "_versions/18446744073709551614.manifest", &b);
  mw_buf_free(&b);
  return rc;
}

/* Step 1: the directory name and the shard manifest's accounting fields. */
static int step_accounting(const mw_batch_t *const *batches, size_t n, uint64_t generation,
                           const mw_sstable_opts_t *opts, rng_t *rng, int64_t rows,
                           mw_sstable_t *out, mw_err_t *err) {
  assert(opts != NULL);
  assert(out != NULL);
  out->generation = generation;
  int len = opts->dir_name != NULL
                ? snprintf(out->dir_name, sizeof out->dir_name, "%s", opts->dir_name)
                : snprintf(out->dir_name, sizeof out->dir_name, "%08" PRIx32 "_gen_%" PRIu64,
                           (uint32_t)rng_u64(rng), generation);
  if (len <= 0 || (size_t)len >= sizeof out->dir_name || strchr(out->dir_name, '/') != NULL ||
      strcmp(out->dir_name, "..") == 0 || strcmp(out->dir_name, ".") == 0)
    return mw_err_set(err, -EINVAL, "sstable: bad directory name");
  for (size_t i = 0; i < n; i++) {
    out->in_memory_bytes += (uint64_t)mw_batch_lance_bytes(batches[i]);
    out->primary_key_bytes += pk_payload(batches[i]);
  }
  out->physical_rows = (uint64_t)rows;
  return 0;
}

/* ------------------------------------------------------------ the job */

struct mw_sstable_job {
  const mw_schema_t *schema;
  const mw_batch_t *const *batches; /* borrowed */
  size_t n_batches;
  mw_sstable_opts_t opts;
  int64_t rows;
  char data_name[64];
  uint64_t deletion_id;
  mw_sstable_t acc;                 /* step 1's accounting; no files */
  int part_rc[MW_SSTABLE_PARTS];    /* 1 = not run yet */
  bool refused[MW_SSTABLE_PARTS];   /* the part's read-back refused its files */
  /* PART_DATA */
  mw_buf_t data;
  /* PART_KEYS */
  uint64_t deleted_rows;
  mw_buf_t deletions, bloom;
  /* PART_INDEX */
  mw_buf_t pk_data, pk_lookup;
  /* PART_INDEX: the vector indexes */
  uint8_t vuuid[MW_SSTABLE_MAX_VINDEXES][16];
  mw_vindex_t vix[MW_SSTABLE_MAX_VINDEXES];
  bool vbuilt[MW_SSTABLE_MAX_VINDEXES];
  /* PART_INDEX: the BTree indexes */
  uint8_t suuid[MW_SSTABLE_MAX_SINDEXES][16];
  mw_buf_t sdata[MW_SSTABLE_MAX_SINDEXES], slookup[MW_SSTABLE_MAX_SINDEXES];
};

/* ------------------------------------------------------------ vector indexes */

static void uuid_v4(rng_t *r, uint8_t u[16]) {
  uint64_t a = rng_u64(r), b = rng_u64(r);
  for (int i = 0; i < 8; i++) u[i] = (uint8_t)(a >> (56 - 8 * i)), u[8 + i] = (uint8_t)(b >> (56 - 8 * i));
  u[6] = (uint8_t)((u[6] & 0x0f) | 0x40);
  u[8] = (uint8_t)((u[8] & 0x3f) | 0x80);
}

static void uuid_text(const uint8_t u[16], char out[37]) {
  static const char hex[] = "0123456789abcdef";
  for (int i = 0, k = 0; i < 16; i++) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out[k++] = '-';
    out[k++] = hex[u[i] >> 4];
    out[k++] = hex[u[i] & 15];
  }
  out[36] = '\0';
}

static int check_vindexes(const mw_schema_t *s, const mw_sstable_opts_t *o, mw_err_t *err) {
  assert(s != NULL);
  if (o->n_vindexes > MW_SSTABLE_MAX_VINDEXES || (o->n_vindexes && o->vindexes == NULL))
    return mw_err_set(err, -EINVAL, "sstable: %zu vector indexes (limit %d)", o->n_vindexes, MW_SSTABLE_MAX_VINDEXES);
  for (size_t i = 0; i < o->n_vindexes; i++) {
    const mw_sstable_vindex_t *v = &o->vindexes[i];
    if (v->name == NULL || v->name[0] == '\0' || strlen(v->name) >= MW_SSTABLE_INDEX_NAME_BYTES || v->field >= s->n_fields)
      return mw_err_set(err, -EINVAL, "sstable: vector index %zu has no name or no column", i);
    const mw_field_t *f = &s->fields[v->field];
    if (f->type != MW_T_FSL || f->item_type != MW_T_FLOAT32 || f->fsl_dim > MW_VINDEX_MAX_DIM)
      return mw_err_set(err, -ENOTSUP, "sstable: vector index '%s' on '%s': the column must be fixed_size_list<float32, 1..%d>",
                        v->name, f->name, MW_VINDEX_MAX_DIM);
  }
  return 0;
}

/* The column's vectors and validity over every batch: borrowed from a
 * single batch, else concatenated into *vecs_own / *valid_own. */
static int gather_vectors(const mw_sstable_job_t *j, uint32_t field, int64_t rows, const float **vecs,
                          const uint8_t **valid, float **vecs_own, uint8_t **valid_own) {
  assert(j != NULL);
  size_t dim = (size_t)j->schema->fields[field].fsl_dim;
  if (j->n_batches == 1) {
    const mw_column_t *c = &j->batches[0]->cols[field];
    *vecs = (const float *)(const void *)c->values.data;
    *valid = c->validity.len ? c->validity.data : NULL;
    return 0;
  }
  *vecs_own = malloc(((size_t)rows * dim + 1) * sizeof **vecs_own);
  *valid_own = calloc((size_t)rows / 8 + 1, 1);
  if (*vecs_own == NULL || *valid_own == NULL) return -ENOMEM;
  int64_t at = 0;
  for (size_t b = 0; b < j->n_batches; b++) {
    const mw_column_t *c = &j->batches[b]->cols[field];
    memcpy(*vecs_own + (size_t)at * dim, c->values.data, (size_t)c->length * dim * sizeof(float));
    for (int64_t r = 0; r < c->length; r++, at++)
      if (mw_column_valid(c, r)) (*valid_own)[at >> 3] |= (uint8_t)(1u << (at & 7));
  }
  *vecs = *vecs_own, *valid = *valid_own;
  return 0;
}

void (*mw_sstable_vindex_hook_for_tests)(mw_vindex_t *built);

/* A read-back's status: -EBADMSG marks the part refused (readback.h). */
static int checked(mw_sstable_job_t *j, int part, int rc) {
  assert(j != NULL);
  if (rc == -EBADMSG) j->refused[part] = true;
  return rc;
}

/* Each maintained vector index built over its column and read back; a
 * column without a vector gets none (as Lance). */
static int part_vindex(mw_sstable_job_t *j, mw_err_t *err) {
  assert(j != NULL);
  int rc = 0;
  for (size_t i = 0; i < j->opts.n_vindexes && rc == 0; i++) {
    const mw_sstable_vindex_t *v = &j->opts.vindexes[i];
    const float *vecs = NULL;
    const uint8_t *valid = NULL;
    float *vo = NULL;
    uint8_t *bo = NULL;
    rc = gather_vectors(j, v->field, j->rows, &vecs, &valid, &vo, &bo);
    mw_vindex_input_t in = {.vecs = vecs, .validity = valid, .rows = (uint64_t)j->rows,
                            .dim = (uint32_t)j->schema->fields[v->field].fsl_dim, .dist = v->dist, .hnsw = v->hnsw};
    if (rc == 0) rc = mw_vindex_build(&in, &j->vix[i], err);
    j->vbuilt[i] = rc == 0;
    if (rc == -ENODATA) rc = 0, mw_err_clear(err); /* no vector: no index, as Lance */
    else if (rc == 0 && mw_sstable_vindex_hook_for_tests != NULL) mw_sstable_vindex_hook_for_tests(&j->vix[i]);
    if (rc == 0 && j->vbuilt[i] && !j->opts.skip_readback)
      rc = checked(j, MW_SSTABLE_PART_INDEX, mw_readback_vindex(&in, &j->vix[i], j->acc.dir_name, err));
    if (rc < 0) mw_err_prefix(err, rc, "sstable: vector index '%s'", v->name);
    free(vo);
    free(bo);
  }
  return rc;
}

/* The built indexes' files, and their IndexSection for the manifest. */
static int vindex_files(mw_sstable_job_t *j, mw_sstable_t *out, mw_buf_t *section, mw_err_t *err) {
  assert(out != NULL);
  int rc = 0;
  mw_buf_t entry = MW_BUF_INIT;
  int64_t ts_ms = j->opts.timestamp_ns / 1000000;
  if (ts_ms == 0) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    ts_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
  }
  for (size_t i = 0; i < j->opts.n_vindexes && rc == 0; i++) {
    if (!j->vbuilt[i]) continue;
    const mw_sstable_vindex_t *v = &j->opts.vindexes[i];
    char u[37], rel[128];
    uuid_text(j->vuuid[i], u);
    mw_buf_reset(&entry);
    rc = mw_vindex_entry_encode(j->vuuid[i], v->name, j->schema->fields[v->field].id, 1, (uint64_t)ts_ms, &entry, err);
    mw_section_t e = {.data = entry.data, .len = entry.len};
    if (rc == 0) rc = mw_index_section_encode(&e, 1, section) < 0 ? -ENOMEM : 0; /* appends one entry */
    snprintf(rel, sizeof rel, "_indices/%s/" MW_VINDEX_AUX_FILE, u);
    if (rc == 0) rc = add_file(out, rel, &j->vix[i].aux_idx);
    snprintf(rel, sizeof rel, "_indices/%s/" MW_VINDEX_INDEX_FILE, u);
    if (rc == 0) rc = add_file(out, rel, &j->vix[i].index_idx);
    if (rc == 0) out->n_vindexes_built++;
    if (j->vix[i].build_bytes > out->vindex_build_bytes) out->vindex_build_bytes = j->vix[i].build_bytes;
  }
  mw_buf_free(&entry);
  return rc;
}

/* ------------------------------------------------------------ BTree indexes */

static int check_sindexes(const mw_schema_t *s, const mw_sstable_opts_t *o, mw_err_t *err) {
  if (o->n_sindexes > MW_SSTABLE_MAX_SINDEXES || (o->n_sindexes && o->sindexes == NULL))
    return mw_err_set(err, -EINVAL, "sstable: %zu BTree indexes (limit %d)", o->n_sindexes, MW_SSTABLE_MAX_SINDEXES);
  for (size_t i = 0; i < o->n_sindexes; i++) {
    const mw_sstable_sindex_t *x = &o->sindexes[i];
    if (x->name == NULL || x->name[0] == '\0' || strlen(x->name) >= MW_SSTABLE_INDEX_NAME_BYTES || x->field >= s->n_fields)
      return mw_err_set(err, -EINVAL, "sstable: BTree index %zu has no name or no column", i);
    if (!mw_btree_type_ok(s->fields[x->field].type))
      return mw_err_set(err, -ENOTSUP, "sstable: BTree index '%s' on '%s': type %s is not indexed here", x->name,
                        s->fields[x->field].name, mw_type_name(s->fields[x->field].type));
  }
  return 0;
}

static int checked(mw_sstable_job_t *j, int part, int rc);

/* Each maintained BTree over every physical row, read back against the
 * column (sindex.h). */
static int part_sindex(mw_sstable_job_t *j, mw_err_t *err) {
  int rc = 0;
  for (size_t i = 0; i < j->opts.n_sindexes && rc == 0; i++) {
    const mw_sstable_sindex_t *x = &j->opts.sindexes[i];
    const mw_field_t *f = &j->schema->fields[x->field];
    mw_column_t col;
    rc = concat_column(f, j->batches, j->n_batches, x->field, &col);
    if (rc < 0) return rc;
    rc = mw_sindex_build(f, &col, &j->sdata[i], &j->slookup[i], err);
    if (rc == 0 && !j->opts.skip_readback)
      rc = checked(j, MW_SSTABLE_PART_INDEX,
                   mw_sindex_check(j->sdata[i].data, j->sdata[i].len, j->slookup[i].data, j->slookup[i].len, f, &col,
                                   NULL, err));
    if (rc < 0) mw_err_prefix(err, rc, "sstable: BTree index '%s'", x->name);
    mw_column_free(&col);
  }
  return rc;
}

static int64_t now_ms(const mw_sstable_opts_t *o) {
  int64_t ts_ms = o->timestamp_ns / 1000000;
  if (ts_ms == 0) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    ts_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
  }
  return ts_ms;
}

/* The BTree indexes' files, and their entries in the IndexSection (first,
 * as LanceDB's flush lists them). */
static int sindex_files(mw_sstable_job_t *j, mw_sstable_t *out, mw_buf_t *section, mw_err_t *err) {
  int rc = 0;
  mw_buf_t entry = MW_BUF_INIT;
  for (size_t i = 0; i < j->opts.n_sindexes && rc == 0; i++) {
    const mw_sstable_sindex_t *x = &j->opts.sindexes[i];
    char u[37], rel[128];
    uuid_text(j->suuid[i], u);
    mw_buf_reset(&entry);
    rc = mw_sindex_entry_encode(j->suuid[i], x->name, j->schema->fields[x->field].id, (uint64_t)now_ms(&j->opts),
                                j->sdata[i].len, j->slookup[i].len, &entry, err);
    mw_section_t e = {.data = entry.data, .len = entry.len};
    if (rc == 0) rc = mw_index_section_encode(&e, 1, section) < 0 ? -ENOMEM : 0; /* appends one entry */
    snprintf(rel, sizeof rel, "_indices/%s/" MW_SINDEX_DATA_FILE, u);
    if (rc == 0) rc = add_file(out, rel, &j->sdata[i]);
    snprintf(rel, sizeof rel, "_indices/%s/" MW_SINDEX_LOOKUP_FILE, u);
    if (rc == 0) rc = add_file(out, rel, &j->slookup[i]);
    if (rc == 0) out->n_sindexes_built++;
  }
  mw_buf_free(&entry);
  return rc;
}

void mw_sstable_job_free(mw_sstable_job_t *job) {
  if (job == NULL) return;
  mw_buf_free(&job->data);
  mw_buf_free(&job->deletions);
  mw_buf_free(&job->bloom);
  mw_buf_free(&job->pk_data);
  mw_buf_free(&job->pk_lookup);
  for (size_t i = 0; i < MW_SSTABLE_MAX_VINDEXES; i++) mw_vindex_free(&job->vix[i]);
  for (size_t i = 0; i < MW_SSTABLE_MAX_SINDEXES; i++) mw_buf_free(&job->sdata[i]), mw_buf_free(&job->slookup[i]);
  free(job);
}

int mw_sstable_job_begin(const mw_schema_t *schema, const mw_batch_t *const *batches,
                         size_t n_batches, uint64_t generation, const mw_sstable_opts_t *opts,
                         mw_sstable_job_t **job, mw_err_t *err) {
  assert(schema != NULL);
  assert(job != NULL);
  static const mw_sstable_opts_t defaults = {0};
  *job = NULL;
  mw_sstable_job_t *j = calloc(1, sizeof *j);
  if (j == NULL) return mw_err_set(err, -ENOMEM, "sstable: out of memory");
  j->schema = schema;
  j->batches = batches;
  j->n_batches = n_batches;
  j->opts = opts ? *opts : defaults;
  j->opts.dir_name = NULL; /* copied into acc.dir_name below; the caller's may go */
  for (int i = 0; i < MW_SSTABLE_PARTS; i++) j->part_rc[i] = 1;
  int rc = check_input(schema, batches, n_batches, &j->rows, err);
  if (rc == 0) rc = check_vindexes(schema, &j->opts, err);
  if (rc == 0) rc = check_sindexes(schema, &j->opts, err);
  rng_t rng = {j->opts.seed};
  mw_sstable_opts_t names = j->opts;
  names.dir_name = opts ? opts->dir_name : NULL;
  if (rc == 0) rc = step_accounting(batches, n_batches, generation, &names, &rng, j->rows, &j->acc, err);
  if (rc < 0) {
    mw_sstable_job_free(j);
    return rc;
  }
  /* every name now, in mw_sstable_build's order: data file, deletion id,
   * the vector indexes' uuids */
  data_file_name(&rng, j->data_name);
  j->deletion_id = rng_u64(&rng);
  for (size_t i = 0; i < j->opts.n_vindexes; i++) uuid_v4(&rng, j->vuuid[i]);
  for (size_t i = 0; i < j->opts.n_sindexes; i++) uuid_v4(&rng, j->suuid[i]);
  *job = j;
  return 0;
}

static int part_data(mw_sstable_job_t *j, mw_err_t *err) {
  int rc = step_data_file(j->schema, j->batches, j->n_batches, &j->opts, j->acc.in_memory_bytes, &j->data, err);
  if (rc < 0 || j->opts.skip_readback) return rc;
  char name[160];
  snprintf(name, sizeof name, "%s/data/%s", j->acc.dir_name, j->data_name);
  return checked(j, MW_SSTABLE_PART_DATA,
                 mw_readback_data_file(j->schema, j->batches, j->n_batches, j->data.data, j->data.len, name, err));
}

/* The deletion file and the bloom filter, read back. */
static int keys_readback(mw_sstable_job_t *j, const uint32_t *dead, size_t n_dead, const uint64_t *hashes,
                         int64_t n_hashes, mw_err_t *err) {
  assert(j != NULL);
  char name[160], del[MW_DELETION_NAME_BYTES];
  int rc = 0;
  if (n_dead > 0 && mw_deletion_name_format(0, 1, j->deletion_id, del, sizeof del) >= 0) {
    snprintf(name, sizeof name, "%s/%s/%s", j->acc.dir_name, MW_DELETION_DIR, del);
    rc = mw_readback_deletions(j->deletions.data, j->deletions.len, (uint64_t)j->rows, dead, n_dead, name, err);
  }
  snprintf(name, sizeof name, "%s/bloom_filter.bin", j->acc.dir_name);
  if (rc == 0) rc = mw_readback_bloom(j->bloom.data, j->bloom.len, hashes, n_hashes, name, err);
  return checked(j, MW_SSTABLE_PART_KEYS, rc);
}

static int part_keys(mw_sstable_job_t *j, mw_err_t *err) {
  uint64_t *hashes = NULL;
  uint32_t *dead = NULL;
  int rc = hash_rows(j->batches, j->n_batches, j->rows, &hashes, err);
  if (rc == 0 && (dead = malloc((size_t)j->rows * sizeof *dead)) == NULL) rc = -ENOMEM;
  int64_t n_dead = 0;
  if (rc == 0 && (n_dead = mw_dedup_deletions(hashes, j->rows, dead)) < 0)
    rc = mw_err_set(err, (int)n_dead, "sstable: dedup failed");
  if (rc == 0) {
    j->deleted_rows = (uint64_t)n_dead;
    rc = step_deletions(dead, (size_t)n_dead, &j->deletions, err);
  }
  const uint64_t *inserted = hashes;
  int64_t n_inserted = j->rows;
  uint64_t same;
  if (rc == 0) rc = step_bloom(j->schema, &inserted, &n_inserted, &same, &j->bloom);
  if (rc == 0 && !j->opts.skip_readback) rc = keys_readback(j, dead, (size_t)n_dead, inserted, n_inserted, err);
  free(hashes);
  free(dead);
  return rc;
}

static int part_index(mw_sstable_job_t *j, mw_err_t *err) {
  mw_column_t keys;
  int rc = step_pk_index(j->schema, j->batches, j->n_batches, &keys, &j->pk_data, &j->pk_lookup, err);
  if (rc < 0) return rc;
  if (!j->opts.skip_readback) {
    const mw_field_t *pk = NULL;
    for (size_t i = 0; i < j->schema->n_fields; i++)
      if (j->schema->fields[i].pk_position == 1) pk = &j->schema->fields[i];
    assert(pk != NULL);
    rc = checked(j, MW_SSTABLE_PART_INDEX,
                 mw_readback_pk_index(pk, &keys, &j->pk_data, &j->pk_lookup, j->acc.dir_name, err));
  }
  mw_column_free(&keys);
  return rc;
}

int mw_sstable_job_run(mw_sstable_job_t *j, int part, mw_err_t *err) {
  assert(j != NULL);
  assert(part >= 0);
  assert(part < MW_SSTABLE_PARTS);
  assert(j->part_rc[part] == 1);
  int rc;
  switch (part) {
    case MW_SSTABLE_PART_DATA: rc = part_data(j, err); break;
    case MW_SSTABLE_PART_KEYS: rc = part_keys(j, err); break;
    default:
      rc = part_index(j, err);
      if (rc == 0) rc = part_sindex(j, err);
      if (rc == 0) rc = part_vindex(j, err);
      break;
  }
  if (rc == -ENOMEM && err != NULL && err->code == 0) mw_err_set(err, rc, "sstable: out of memory");
  j->part_rc[part] = rc < 0 ? rc : 0;
  return j->part_rc[part];
}

bool mw_sstable_job_refused(const mw_sstable_job_t *j) {
  assert(j != NULL);
  for (int i = 0; i < MW_SSTABLE_PARTS; i++)
    if (j->refused[i]) return true;
  return false;
}

int mw_sstable_job_end(mw_sstable_job_t *j, mw_sstable_t *out, mw_err_t *err) {
  assert(j != NULL);
  assert(out != NULL);
  memset(out, 0, sizeof *out);
  int rc = 0;
  for (int i = 0; i < MW_SSTABLE_PARTS && rc == 0; i++)
    if (j->part_rc[i] != 0)
      rc = mw_err_set(err, -ECANCELED, "sstable: part %d of the build %s", i,
                      j->part_rc[i] == 1 ? "did not run" : "failed");
  if (rc == 0) {
    *out = j->acc;
    out->data_file_bytes = j->data.len;
    out->deleted_rows = j->deleted_rows;
    char rel[128];
    snprintf(rel, sizeof rel, "data/%s", j->data_name);
    rc = add_file(out, rel, &j->data);
  }
  if (rc == 0 && j->deleted_rows > 0) {
    char dname[MW_DELETION_NAME_BYTES], rel[128];
    out->deletion_id = j->deletion_id;
    rc = mw_deletion_name_format(0, 1, out->deletion_id, dname, sizeof dname);
    if (rc >= 0) {
      snprintf(rel, sizeof rel, "%s/%s", MW_DELETION_DIR, dname);
      rc = add_file(out, rel, &j->deletions);
    }
    if (rc > 0) rc = 0;
  }
  if (rc == 0) rc = add_file(out, "bloom_filter.bin", &j->bloom);
  if (rc == 0) rc = add_file(out, "_pk_index/" MW_PK_INDEX_DATA_FILE, &j->pk_data);
  if (rc == 0) rc = add_file(out, "_pk_index/" MW_PK_INDEX_LOOKUP_FILE, &j->pk_lookup);
  mw_buf_t section = MW_BUF_INIT;
  if (rc == 0) rc = sindex_files(j, out, &section, err);
  if (rc == 0) rc = vindex_files(j, out, &section, err);
  bool indexed = out->n_vindexes_built + out->n_sindexes_built > 0;
  if (rc == 0) rc = step_manifest(j->schema, &j->opts, j->data_name, out, indexed ? &section : NULL, err);
  mw_buf_free(&section);
  assert(rc != 0 || out->n_files >= 6);
  assert(rc != 0 || out->n_files <= MW_SSTABLE_MAX_FILES);
  if (rc < 0) mw_sstable_free(out);
  mw_sstable_job_free(j);
  return rc;
}

int mw_sstable_build(const mw_schema_t *schema, const mw_batch_t *const *batches,
                     size_t n_batches, uint64_t generation, const mw_sstable_opts_t *opts,
                     mw_sstable_t *out, mw_err_t *err) {
  assert(schema != NULL);
  assert(out != NULL);
  memset(out, 0, sizeof *out);
  mw_sstable_job_t *j;
  int rc = mw_sstable_job_begin(schema, batches, n_batches, generation, opts, &j, err);
  if (rc < 0) return rc;
  for (int i = 0; i < MW_SSTABLE_PARTS && rc == 0; i++) rc = mw_sstable_job_run(j, i, err);
  if (rc < 0) {
    mw_sstable_job_free(j);
    return rc;
  }
  return mw_sstable_job_end(j, out, err);
}
