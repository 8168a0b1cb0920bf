/*
 * mw_sst_tool.c — the C half of the interop suite: writes SSTables with our
 * writer (lance/sstable.h) into a COPY of a Lance table and registers them in
 * a new shard manifest version, so that LanceDB (check.mjs) can read them.
 *
 *   Common options: --zstd (compressed data files), --seed N (reproducible
 *   names), --page-bytes N (data-file page cap, to force many pages),
 *   --zone-seeds (zone write seeds v1 in every data file, FLAG_ZONE_WRITE_SEEDS
 *   in every SSTable manifest), --seed-rows-per-zone N,
 *   --compare-lance (replace mode: each rebuilt SSTable must match Lance's
 *   accounting, bloom_filter.bin and deletion file byte for byte),
 *   --vindex NAME:COLUMN:DISTANCE (every SSTable gets the per-SSTable vector
 *   index of the base index NAME on COLUMN, distance l2|cosine|dot; issue 27).
 *
 *   mw_sst_tool vector TABLE --mode append|replace|ours-only [--zstd] [--seed N]
 *     For every shard: decode every WAL entry with our IPC codec, then
 *       append     one SSTable with every WAL row, generation
 *                  current_generation, listed after Lance's own SSTables;
 *       ours-only  the same SSTable, and Lance's SSTables are unlisted, so
 *                  only our files provide the shard's rows;
 *       replace    one SSTable per Lance SSTable, rebuilt from exactly the
 *                  WAL entries it covered (same generation, listed in its
 *                  place), plus one for WAL entries no SSTable covered.
 *                  An SSTable whose manifests give it no WAL range (LanceDB
 *                  can leave replay_after behind) takes the next entries
 *                  whose rows add up to its rows.
 *     The new manifest: version+1, replay_after = last WAL position,
 *     last_seen = max(old, that), current_generation = newest gen + 1.
 *
 *   mw_sst_tool model TABLE --scenario NAME --model-out FILE [--zstd] [--seed N]
 *     Generate rows for the table's single shard (schema id int64 PK, name
 *     utf8, v float64, vec fsl<f32,8>) with a deterministic model and write
 *     them as several SSTables (newer generations after the existing ones).
 *     FILE gets the model's final state of every key it touched, one JSON
 *     line per key in id order: the row, or {"id":..,"_deleted":true}.
 *     Scenarios: nulls, dups, tombstones, large (120 000 rows, many pages).
 *     --rows-out FILE2: every physical row of every SSTable written, in
 *     order, one JSON line each ({"sst": dir, column: value, ...}).
 *
 * Exit status 0 on success, 1 with a message on stderr otherwise.
 */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lance/sstable.h"
#include "shardio.h"


#define die(...) do { fprintf(stderr, "mw_sst_tool: " __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)

typedef struct args {
  const char *cmd, *table, *mode, *scenario, *model_out, *rows_out;
  bool zstd, compare, zone_seeds;
  uint64_t seed, seed_rows_per_zone;
  size_t page_bytes;
  char vindex_name[128], vindex_column[128];
  mw_distance_t vindex_dist;
  bool vindex;
} args_t;

/* NAME:COLUMN:DISTANCE */
static void parse_vindex(const char *v, args_t *a) {
  const char *c1 = strchr(v, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
  if (c2 == NULL || c1 == v || c2 == c1 + 1 || (size_t)(c1 - v) >= sizeof a->vindex_name ||
      (size_t)(c2 - c1 - 1) >= sizeof a->vindex_column || mw_distance_parse(c2 + 1, strlen(c2 + 1), &a->vindex_dist) < 0)
    die("--vindex wants NAME:COLUMN:l2|cosine|dot, not '%s'", v);
  memcpy(a->vindex_name, v, (size_t)(c1 - v));
  memcpy(a->vindex_column, c1 + 1, (size_t)(c2 - c1 - 1));
  a->vindex = true;
}

static void parse(int argc, char **argv, args_t *a) {
  memset(a, 0, sizeof *a);
  if (argc < 3) die("usage: mw_sst_tool vector|model TABLE [options]");
  a->cmd = argv[1];
  a->table = argv[2];
  for (int i = 3; i < argc; i++) {
    const char *k = argv[i];
    if (strcmp(k, "--zstd") == 0) { a->zstd = true; continue; }
    if (strcmp(k, "--compare-lance") == 0) { a->compare = true; continue; }
    if (strcmp(k, "--zone-seeds") == 0) { a->zone_seeds = true; continue; }
    if (i + 1 >= argc) die("missing value for %s", k);
    const char *v = argv[++i];
    if (strcmp(k, "--mode") == 0) a->mode = v;
    else if (strcmp(k, "--scenario") == 0) a->scenario = v;
    else if (strcmp(k, "--model-out") == 0) a->model_out = v;
    else if (strcmp(k, "--seed") == 0) a->seed = strtoull(v, NULL, 10);
    else if (strcmp(k, "--page-bytes") == 0) a->page_bytes = strtoull(v, NULL, 10);
    else if (strcmp(k, "--seed-rows-per-zone") == 0) a->seed_rows_per_zone = strtoull(v, NULL, 10);
    else if (strcmp(k, "--rows-out") == 0) a->rows_out = v;
    else if (strcmp(k, "--vindex") == 0) parse_vindex(v, a);
    else die("unknown option %s", k);
  }
}

/* With --compare-lance: our rebuild of one of Lance's SSTables must have
 * the same accounting, a byte-identical bloom_filter.bin and deletion file. */
static void compare_lance(const char *shard_dir, const mw_sstable_ref_t *ref, const mw_sstable_t *sst) {
  if (sst->physical_rows != ref->physical_rows || sst->primary_key_bytes != ref->primary_key_bytes ||
      sst->in_memory_bytes != ref->in_memory_bytes)
    die("%s: accounting (rows %" PRIu64 ", pk %" PRIu64 ", mem %" PRIu64 ") differs from Lance's "
        "(%" PRIu64 ", %" PRIu64 ", %" PRIu64 ")", ref->path, sst->physical_rows, sst->primary_key_bytes,
        sst->in_memory_bytes, ref->physical_rows, ref->primary_key_bytes, ref->in_memory_bytes);
  char p[4096];
  snprintf(p, sizeof p, "%s/%s/bloom_filter.bin", shard_dir, ref->path);
  uint8_t *d;
  size_t n;
  const mw_sstable_file_t *f = mw_sstable_find(sst, "bloom_filter.bin");
  if (si_slurp(p, &d, &n) < 0 || n != f->bytes.len || memcmp(d, f->bytes.data, n) != 0)
    die("%s: bloom_filter.bin is not byte-identical to Lance's", ref->path);
  free(d);
  snprintf(p, sizeof p, "%s/%s/_deletions", shard_dir, ref->path);
  char **names = NULL;
  size_t nn = 0;
  int found = 0;
  if (si_list_children(p, &names, &nn) < 0) nn = 0; /* no _deletions folder */
  for (size_t k = 0; k < nn; k++) {
    if (strstr(names[k], ".bin") == NULL) continue;
    char q[4400];
    snprintf(q, sizeof q, "%s/%s", p, names[k]);
    const mw_sstable_file_t *ours = NULL;
    for (size_t i = 0; i < sst->n_files; i++)
      if (strstr(sst->files[i].path, "/_deletions/")) ours = &sst->files[i];
    if (ours == NULL || si_slurp(q, &d, &n) < 0 || n != ours->bytes.len || memcmp(d, ours->bytes.data, n) != 0)
      die("%s: deletion file is not byte-identical to Lance's", ref->path);
    free(d);
    found++;
  }
  si_free_strings(names, nn);
  if (found != (sst->deleted_rows > 0)) die("%s: Lance has %d deletion files, we %" PRIu64 " deleted rows",
                                            ref->path, found, sst->deleted_rows);
  fprintf(stderr, "%s: bloom_filter.bin and deletions byte-identical, accounting equal\n", ref->path);
}

/* Build one SSTable from batches, write it into the shard folder, add it to m. */
static void emit(const char *shard_dir, const mw_schema_t *schema, const mw_batch_t *const *batches,
                 size_t n, uint64_t gen, const args_t *a, mw_shard_manifest_t *m,
                 const mw_sstable_ref_t *lance, char dir_out[MW_SSTABLE_DIR_NAME_BYTES]) {
  mw_sstable_opts_t o = {.zstd = a->zstd, .seed = a->seed ? a->seed + gen : 0, .max_page_bytes = a->page_bytes,
                         .zone_seeds = a->zone_seeds, .seed_rows_per_zone = a->seed_rows_per_zone};
  mw_sstable_vindex_t vx = {.name = a->vindex_name, .dist = a->vindex_dist};
  if (a->vindex) {
    int f = mw_schema_find(schema, a->vindex_column);
    if (f < 0) die("--vindex: no column '%s'", a->vindex_column);
    vx.field = (uint32_t)f;
    o.vindexes = &vx, o.n_vindexes = 1;
  }
  mw_sstable_t sst = {0};
  mw_err_t err = {0};
  if (mw_sstable_build(schema, batches, n, gen, &o, &sst, &err) < 0) die("build gen %" PRIu64 ": %s", gen, err.msg);
  if (lance != NULL && a->compare) compare_lance(shard_dir, lance, &sst);
  if (si_sstable_write_dir(&sst, shard_dir, &err) < 0) die("write: %s", err.msg);
  if (mw_shard_manifest_add_sstable(m, gen, sst.dir_name, sst.in_memory_bytes, sst.physical_rows,
                                    sst.primary_key_bytes) < 0)
    die("manifest add");
  fprintf(stderr, "wrote %s/%s: %" PRIu64 " rows, %" PRIu64 " deleted, %" PRIu64 " data bytes%s%s, %zu vector indexes\n",
          shard_dir, sst.dir_name, sst.physical_rows, sst.deleted_rows, sst.data_file_bytes,
          a->zstd ? " (zstd)" : "", a->zone_seeds ? " (zone seeds)" : "", sst.n_vindexes_built);
  if (dir_out != NULL) snprintf(dir_out, MW_SSTABLE_DIR_NAME_BYTES, "%s", sst.dir_name);
  mw_sstable_free(&sst);
}

static void publish(const char *shard_dir, mw_shard_manifest_t *m) {
  mw_err_t err = {0};
  if (si_publish_manifest(shard_dir, m, &err) < 0) die("publish: %s", err.msg);
  fprintf(stderr, "published %s manifest v%" PRIu64 " (%zu sstables, replay_after %" PRIu64 ")\n",
          shard_dir, m->version, m->n_sstables, m->replay_after_wal_entry_position);
}

/* ------------------------------------------------------------------ vector */

typedef struct walset {
  si_wal_entry_t *e;
  uint64_t n;          /* positions 1..n */
  mw_schema_t schema;  /* SSTable schema (from the first data entry) */
  bool have_schema;
} walset_t;

static void gather(const walset_t *w, uint64_t after, uint64_t last, const mw_batch_t ***out,
                   size_t *n) {
  size_t k = 0;
  for (uint64_t p = after + 1; p <= last; p++) k += w->e[p - 1].s.n_batches;
  const mw_batch_t **b = calloc(k ? k : 1, sizeof *b);
  if (b == NULL) die("oom");
  k = 0;
  for (uint64_t p = after + 1; p <= last; p++)
    for (size_t i = 0; i < w->e[p - 1].s.n_batches; i++) {
      mw_batch_t *bb = &w->e[p - 1].s.batches[i];
      bb->schema = &w->schema; /* same fields; ids and PK markers from the SSTable schema */
      b[k++] = bb;
    }
  *out = b;
  *n = k;
}

/* LanceDB 0.39.0 can publish an SSTable without advancing replay_after:
 * bench/vindex-recall.mjs's one 100 000-row mergeInsert + closeLsmWriters
 * leaves manifest v2 with generation 1 and replay_after still 0 (1 with
 * max_memtable_rows 200 000, or at 10 000 / 40 000 rows: reaching the
 * default cap of 100 000 is involved), so the range (after, last] from the
 * manifests is empty. Its WAL entries then are the ones after the previous SSTable's (`covered`) whose rows add up to
 * its physical_rows; anything else is an error naming the SSTable. */
static void cover_by_rows(const walset_t *w, uint64_t covered, si_coverage_t *c) {
  assert(covered <= w->n);
  uint64_t want = c->ref.physical_rows, got = 0, p = covered;
  if (want == 0) return; /* nothing to find: left as the manifests say */
  while (got < want && p < w->n) {
    p++;
    for (size_t i = 0; i < w->e[p - 1].s.n_batches; i++) got += (uint64_t)w->e[p - 1].s.batches[i].n_rows;
  }
  if (got != want || p == covered)
    die("SSTable %s (gen %" PRIu64 "): the manifests give it no WAL entries and the entries after %" PRIu64
        " hold %" PRIu64 " rows, not its %" PRIu64,
        c->ref.path, c->generation, covered, got, want);
  fprintf(stderr, "SSTable %s (gen %" PRIu64 "): manifest replay_after %" PRIu64
          " covers nothing; WAL entries %" PRIu64 "..%" PRIu64 " by its %" PRIu64 " rows\n",
          c->ref.path, c->generation, c->last, covered + 1, p, want);
  c->after = covered;
  c->last = p;
  assert(c->last > c->after);
}

static void vector_shard(const char *shard_dir, const args_t *a) {
  mw_err_t err = {0};
  walset_t w = {0};
  si_wal_last(shard_dir, &w.n);
  w.e = calloc(w.n ? w.n : 1, sizeof *w.e);
  for (uint64_t p = 1; p <= w.n; p++) {
    if (si_wal_read(shard_dir, p, &w.e[p - 1], &err) < 0) die("%s", err.msg);
    if (!w.have_schema && w.e[p - 1].s.n_batches > 0) {
      if (si_sstable_schema(&w.e[p - 1].s.schema, &w.schema) < 0) die("schema");
      w.have_schema = true;
    }
  }
  uint64_t latest;
  if (si_latest_version(shard_dir, &latest, &err) < 0 || latest == 0) die("%s: no shard manifest", shard_dir);
  mw_shard_manifest_t m;
  if (si_read_manifest(shard_dir, latest, &m, &err) < 0) die("%s", err.msg);
  if (!w.have_schema) die("%s: no WAL entry with rows", shard_dir);
  fprintf(stderr, "%s: %" PRIu64 " WAL entries, manifest v%" PRIu64 "\n", shard_dir, w.n, latest);

  mw_shard_manifest_t nm;
  mw_shard_manifest_init(&nm);
  if (mw_shard_manifest_copy(&nm, &m) < 0) die("copy");
  nm.version = latest + 1;
  uint64_t next_gen = m.current_generation ? m.current_generation : 1;
  const mw_batch_t **b;
  size_t nb;
  if (strcmp(a->mode, "append") == 0 || strcmp(a->mode, "ours-only") == 0) {
    if (strcmp(a->mode, "ours-only") == 0) {
      mw_shard_manifest_t empty;
      mw_shard_manifest_init(&empty);
      empty = nm;
      empty.sstables = NULL;
      empty.n_sstables = 0;
      for (size_t i = 0; i < nm.n_sstables; i++) free(nm.sstables[i].path);
      free(nm.sstables);
      nm = empty;
    }
    gather(&w, 0, w.n, &b, &nb);
    emit(shard_dir, &w.schema, b, nb, next_gen, a, &nm, NULL, NULL);
    free(b);
    next_gen++;
  } else if (strcmp(a->mode, "replace") == 0) {
    si_coverage_t *cov;
    size_t nc;
    if (si_coverage(shard_dir, &cov, &nc, &err) < 0) die("%s", err.msg);
    for (size_t i = 0; i < nm.n_sstables; i++) free(nm.sstables[i].path);
    free(nm.sstables);
    nm.sstables = NULL;
    nm.n_sstables = 0;
    uint64_t covered = 0;
    for (size_t i = 0; i < nc; i++) {
      if (cov[i].last <= cov[i].after) cover_by_rows(&w, covered, &cov[i]);
      gather(&w, cov[i].after, cov[i].last, &b, &nb);
      emit(shard_dir, &w.schema, b, nb, cov[i].generation, a, &nm, &cov[i].ref, NULL);
      free(b);
      covered = cov[i].last;
    }
    si_coverage_free(cov, nc);
    if (covered < w.n) {
      gather(&w, covered, w.n, &b, &nb);
      emit(shard_dir, &w.schema, b, nb, next_gen, a, &nm, NULL, NULL);
      free(b);
      next_gen++;
    }
  } else {
    die("unknown --mode %s", a->mode);
  }
  nm.replay_after_wal_entry_position = w.n;
  if (nm.wal_entry_position_last_seen < w.n) nm.wal_entry_position_last_seen = w.n;
  nm.current_generation = next_gen;
  publish(shard_dir, &nm);
  mw_shard_manifest_free(&nm);
  mw_shard_manifest_free(&m);
  for (uint64_t p = 0; p < w.n; p++) si_wal_entry_free(&w.e[p]);
  free(w.e);
  mw_schema_free(&w.schema);
}

/* ------------------------------------------------------------------- model */

/* splitmix64: deterministic, seedable. */
static uint64_t rnd_state;
static uint64_t rnd(void) {
  uint64_t z = (rnd_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static double frand(void) { return (double)(rnd() >> 11) / 9007199254740992.0; }

/* Null fractions apply to the nullable non-PK columns in turn: column j
 * (counting those from 0) of SSTable s uses null_frac[s][j % 3]. */
typedef struct scen {
  const char *name;
  int n_sst;
  int64_t rows[4];        /* rows per SSTable */
  int batch_rows;         /* rows per mw_batch_t */
  double null_frac[4][3];
  double old_frac;        /* prob. a key is taken from 0..299 (base + Lance's rows) */
  int64_t key_space;      /* other keys: uniform in [0, key_space) */
  double tomb_frac;
} scen_t;

static const scen_t scenarios[] = {
  /* every nullable column: some nulls, all nulls, no nulls, in turn */
  {"nulls", 3, {700, 500, 600}, 128, {{0.3, 0.3, 0.3}, {1.0, 0.0, 0.5}, {0.0, 1.0, 0.0}}, 0.3, 2000, 0.0},
  /* many duplicates inside each SSTable and across them, over base keys too */
  {"dups", 3, {1500, 1500, 900}, 100, {{0.05, 0.05, 0.05}, {0.05, 0.05, 0.05}, {0.05, 0.05, 0.05}},
   0.4, 600, 0.0},
  /* deletes of base keys, Lance SSTable keys, our earlier keys; re-inserts */
  {"tombstones", 3, {800, 800, 800}, 64, {{0.1, 0.1, 0.1}, {0.1, 0.1, 0.1}, {0.1, 0.1, 0.1}},
   0.5, 900, 0.25},
  /* 120 000 rows, several pages per column and 15 _pk_index pages */
  {"large", 2, {100000, 20000}, 8192, {{0.02, 0.02, 0.02}, {0.02, 0.02, 0.02}}, 0.01, 1000000, 0.01},
};

/* One generated value; the column's field gives its type. */
#define CELL_BYTES 40
typedef struct cell {
  bool null;
  uint8_t len;                /* utf8/binary length */
  union {
    int64_t i;
    uint64_t u;
    double d;
    float f;
    bool b;
    float vec[CELL_BYTES / 4];
    uint8_t bytes[CELL_BYTES];
  } v;
} cell_t;

static void key_value(const mw_field_t *f, int64_t k, cell_t *c) {
  memset(c, 0, sizeof *c);
  if (f->type == MW_T_UTF8 || f->type == MW_T_BINARY)
    c->len = (uint8_t)snprintf((char *)c->v.bytes, CELL_BYTES, "k%06" PRId64, k);
  else
    c->v.i = k;
}

static void gen_value(const mw_field_t *f, int sst, int64_t k, double null_frac, cell_t *c) {
  memset(c, 0, sizeof *c);
  c->null = f->nullable && frand() < null_frac;
  if (c->null) return;
  uint64_t x = rnd();
  switch (f->type) {
    case MW_T_INT32: c->v.i = (int32_t)(uint32_t)x; break;
    case MW_T_UINT32: c->v.u = (uint32_t)x; break;
    case MW_T_INT64: c->v.i = (int64_t)x; break;
    case MW_T_UINT64: c->v.u = x; break;
    case MW_T_FLOAT32: c->v.f = (float)((frand() * 2 - 1) * 1e4); break;
    case MW_T_FLOAT64: c->v.d = (frand() * 2e6 - 1e6) / 7.0; break;
    case MW_T_BOOL: c->v.b = x & 1; break;
    case MW_T_UTF8:
      if (x % 5 == 0) break; /* empty string, not null */
      c->len = (uint8_t)snprintf((char *)c->v.bytes, CELL_BYTES, x % 5 == 1 ? "g%d_%" PRId64 "_\xc3\xa9t\xc3\xa9"
                                                                        : "g%d_%" PRId64 "_%" PRIx64,
                                 sst, k, x >> 44);
      break;
    case MW_T_BINARY:
      c->len = (uint8_t)(x % 9);
      for (int i = 0; i < c->len; i++) c->v.bytes[i] = (uint8_t)(x >> (8 * (i % 8)) ^ (uint8_t)i);
      break;
    case MW_T_FSL:
      for (int i = 0; i < f->fsl_dim; i++) c->v.vec[i] = (float)(frand() * 2 - 1);
      break;
    default: die("model: no generator for %s", mw_type_name(f->type));
  }
}

static int append_cell(mw_column_t *col, const mw_field_t *f, const cell_t *c) {
  if (c->null) return mw_column_append_null(col, f);
  switch (f->type) {
    case MW_T_BOOL: return mw_column_append_bool(col, c->v.b);
    case MW_T_UTF8:
    case MW_T_BINARY: return mw_column_append_bytes(col, c->v.bytes, c->len);
    case MW_T_INT32:
    case MW_T_UINT32: {
      uint32_t v = (uint32_t)c->v.u;
      return mw_column_append_fixed(col, &v, 4);
    }
    case MW_T_FLOAT32: return mw_column_append_fixed(col, &c->v.f, 4);
    default: return mw_column_append_fixed(col, &c->v, mw_type_width(f));
  }
}

static void print_cell(FILE *out, const mw_field_t *f, const cell_t *c) {
  if (c->null) {
    fputs("null", out);
    return;
  }
  switch (f->type) {
    case MW_T_INT32: fprintf(out, "%" PRId32, (int32_t)c->v.i); break;
    case MW_T_UINT32: fprintf(out, "%" PRIu32, (uint32_t)c->v.u); break;
    case MW_T_INT64: fprintf(out, "\"%" PRId64 "\"", c->v.i); break;
    case MW_T_UINT64: fprintf(out, "\"%" PRIu64 "\"", c->v.u); break;
    case MW_T_FLOAT32: fprintf(out, "%.9g", (double)c->v.f); break;
    case MW_T_FLOAT64: fprintf(out, "%.17g", c->v.d); break;
    case MW_T_BOOL: fputs(c->v.b ? "true" : "false", out); break;
    case MW_T_UTF8: fprintf(out, "\"%.*s\"", (int)c->len, (const char *)c->v.bytes); break;
    case MW_T_BINARY:
      fputc('[', out);
      for (int i = 0; i < c->len; i++) fprintf(out, "%s%u", i ? "," : "", c->v.bytes[i]);
      fputc(']', out);
      break;
    case MW_T_FSL:
      for (int i = 0; i < f->fsl_dim; i++) fprintf(out, "%c%.9g", i ? ',' : '[', (double)c->v.vec[i]);
      fputc(']', out);
      break;
    default: die("model: cannot print %s", mw_type_name(f->type));
  }
}

/* --rows-out: the physical rows of one SSTable, in order. */
static void print_rows(FILE *out, const mw_schema_t *s, const char *dir, const cell_t *rows, int64_t n) {
  for (int64_t r = 0; r < n; r++) {
    fprintf(out, "{\"sst\":\"%s\"", dir);
    for (size_t c = 0; c < s->n_fields; c++) {
      fprintf(out, ",\"%s\":", s->fields[c].name);
      print_cell(out, &s->fields[c], &rows[r * (int64_t)s->n_fields + (int64_t)c]);
    }
    fputs("}\n", out);
  }
}

/* The table's memtable schema, from its first WAL entry with rows. */
static void table_schema(const char *shard_dir, mw_schema_t *s) {
  uint64_t last;
  si_wal_last(shard_dir, &last);
  for (uint64_t p = 1; p <= last; p++) {
    si_wal_entry_t e;
    mw_err_t err = {0};
    if (si_wal_read(shard_dir, p, &e, &err) < 0) die("%s", err.msg);
    bool have = e.s.n_batches > 0;
    if (have && si_sstable_schema(&e.s.schema, s) < 0) die("schema");
    si_wal_entry_free(&e);
    if (have) break;
    if (p == last) die("%s: no WAL entry with rows", shard_dir);
  }
  const mw_field_t *pk = &s->fields[0];
  if (strcmp(pk->name, "id") != 0 || pk->pk_position != 1 || s->n_fields > 16)
    die("model: the first field must be the PK `id`");
  for (size_t i = 0; i < s->n_fields; i++)
    if (s->fields[i].type == MW_T_FSL && s->fields[i].fsl_dim > CELL_BYTES / 4)
      die("model: vector dimension %d > %d", s->fields[i].fsl_dim, CELL_BYTES / 4);
}

static void model(const args_t *a) {
  const scen_t *s = NULL;
  for (size_t i = 0; i < sizeof scenarios / sizeof *scenarios; i++)
    if (strcmp(scenarios[i].name, a->scenario) == 0) s = &scenarios[i];
  if (s == NULL) die("unknown --scenario %s", a->scenario ? a->scenario : "(none)");
  if (a->model_out == NULL) die("--model-out is required");
  rnd_state = a->seed ? a->seed : 42;

  char **shards;
  size_t ns;
  if (si_list_shards(a->table, &shards, &ns) < 0 || ns != 1) die("%s: need exactly one shard", a->table);
  const char *shard_dir = shards[0];
  mw_err_t err = {0};
  uint64_t latest, wal_last;
  if (si_latest_version(shard_dir, &latest, &err) < 0 || latest == 0) die("%s: no manifest", shard_dir);
  mw_shard_manifest_t m, nm;
  if (si_read_manifest(shard_dir, latest, &m, &err) < 0) die("%s", err.msg);
  mw_shard_manifest_init(&nm);
  if (mw_shard_manifest_copy(&nm, &m) < 0) die("copy");
  nm.version = latest + 1;
  si_wal_last(shard_dir, &wal_last);

  mw_schema_t schema;
  table_schema(shard_dir, &schema);
  size_t nf = schema.n_fields, tomb = nf - 1;
  int64_t max_key = s->key_space > 300 ? s->key_space : 300;
  int64_t *last = malloc((size_t)max_key * sizeof *last); /* key -> row log index, -1 */
  int64_t total = 0;
  for (int i = 0; i < s->n_sst; i++) total += s->rows[i];
  cell_t *log = malloc((size_t)total * nf * sizeof *log);
  if (last == NULL || log == NULL) die("oom");
  for (int64_t k = 0; k < max_key; k++) last[k] = -1;

  uint64_t gen = m.current_generation ? m.current_generation : 1;
  int64_t at = 0;
  FILE *rows_out = NULL;
  if (a->rows_out != NULL && (rows_out = fopen(a->rows_out, "w")) == NULL)
    die("%s: %s", a->rows_out, strerror(errno));
  for (int sst = 0; sst < s->n_sst; sst++, gen++) {
    size_t nb = (size_t)((s->rows[sst] + s->batch_rows - 1) / s->batch_rows);
    mw_batch_t *batches = calloc(nb, sizeof *batches);
    const mw_batch_t **bp = calloc(nb, sizeof *bp);
    if (batches == NULL || bp == NULL) die("oom");
    for (size_t bi = 0; bi < nb; bi++) {
      if (mw_batch_init(&batches[bi], &schema) < 0) die("oom");
      bp[bi] = &batches[bi];
      int64_t rows = s->rows[sst] - (int64_t)bi * s->batch_rows;
      if (rows > s->batch_rows) rows = s->batch_rows;
      for (int64_t r = 0; r < rows; r++, at++) {
        int64_t k = frand() < s->old_frac ? (int64_t)(rnd() % 300) : (int64_t)(rnd() % (uint64_t)s->key_space);
        cell_t *row = &log[at * (int64_t)nf];
        bool is_tomb = frand() < s->tomb_frac;
        key_value(&schema.fields[0], k, &row[0]);
        for (size_t c = 1, j = 0; c < tomb; c++) {
          const mw_field_t *f = &schema.fields[c];
          if (is_tomb) { memset(&row[c], 0, sizeof row[c]); row[c].null = true; }
          else gen_value(f, sst, k, s->null_frac[sst][j % 3], &row[c]);
          if (f->nullable) j++;
          else if (is_tomb) die("model: tombstones need every non-PK column nullable (%s)", f->name);
        }
        memset(&row[tomb], 0, sizeof row[tomb]);
        row[tomb].v.b = is_tomb;
        for (size_t c = 0; c < nf; c++)
          if (append_cell(&batches[bi].cols[c], &schema.fields[c], &row[c]) < 0) die("append");
        batches[bi].n_rows++;
        last[k] = at;
      }
    }
    char dir[MW_SSTABLE_DIR_NAME_BYTES];
    emit(shard_dir, &schema, bp, nb, gen, a, &nm, NULL, dir);
    if (rows_out != NULL) print_rows(rows_out, &schema, dir, &log[(at - s->rows[sst]) * (int64_t)nf], s->rows[sst]);
    for (size_t bi = 0; bi < nb; bi++) mw_batch_free(&batches[bi]);
    free(batches);
    free(bp);
  }
  if (rows_out != NULL && fclose(rows_out) != 0) die("%s: write failed", a->rows_out);
  nm.current_generation = gen;
  if (nm.replay_after_wal_entry_position < wal_last) nm.replay_after_wal_entry_position = wal_last;
  if (nm.wal_entry_position_last_seen < wal_last) nm.wal_entry_position_last_seen = wal_last;
  publish(shard_dir, &nm);

  FILE *f = fopen(a->model_out, "w");
  if (f == NULL) die("%s: %s", a->model_out, strerror(errno));
  int64_t live = 0, dead = 0;
  for (int64_t k = 0; k < max_key; k++) {
    if (last[k] < 0) continue;
    const cell_t *row = &log[last[k] * (int64_t)nf];
    fputs("{\"id\":", f);
    if (schema.fields[0].type == MW_T_INT64 || schema.fields[0].type == MW_T_UINT64)
      fprintf(f, "\"%" PRId64 "\"", k);
    else
      print_cell(f, &schema.fields[0], &row[0]);
    if (row[tomb].v.b) {
      fputs(",\"_deleted\":true}\n", f);
      dead++;
      continue;
    }
    live++;
    for (size_t c = 1; c < tomb; c++) {
      fprintf(f, ",\"%s\":", schema.fields[c].name);
      print_cell(f, &schema.fields[c], &row[c]);
    }
    fputs("}\n", f);
  }
  if (fclose(f) != 0) die("%s: write failed", a->model_out);
  fprintf(stderr, "model %s: %" PRId64 " rows written, final state %" PRId64 " live, %" PRId64 " deleted keys\n",
          s->name, total, live, dead);
  free(last);
  free(log);
  mw_schema_free(&schema);
  mw_shard_manifest_free(&m);
  mw_shard_manifest_free(&nm);
  si_free_strings(shards, ns);
}

int main(int argc, char **argv) {
  args_t a;
  parse(argc, argv, &a);
  mw_err_t err = {0};
  if (si_open(a.table, &err) < 0) die("%s: %s", a.table, err.msg); /* through the storage layer */
  if (strcmp(a.cmd, "vector") == 0) {
    if (a.mode == NULL) die("--mode is required");
    char **shards;
    size_t n;
    if (si_list_shards(a.table, &shards, &n) < 0 || n == 0) die("%s: no shards under _mem_wal", a.table);
    for (size_t i = 0; i < n; i++) vector_shard(shards[i], &a);
    si_free_strings(shards, n);
  } else if (strcmp(a.cmd, "model") == 0) {
    model(&a);
  } else {
    die("unknown command %s", a.cmd);
  }
  si_close();
  return 0;
}
