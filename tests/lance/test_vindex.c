/*
 * test_vindex.c — the per-SSTable vector index (IVF_HNSW_SQ): FullZip list
 * pages, the scalar quantizer, the HNSW builder and the two index files.
 *
 * Golden data: tests/lance/data/vindex/<case>/ (tools/gen-vindex-fixtures.mjs)
 * holds index.idx, auxiliary.idx and the SSTable manifest LanceDB 0.39.0's
 * own MemWAL writer flushed for the vectors in vectors.f32 (case.txt: rows,
 * dim, distance, index name, index uuid, null rows). Cases: l2 under a
 * createIndex() IVF_PQ base index (dim 16), the same with null vectors
 * (dim 8), cosine under hnswSq (dim 8), dot under ivfPq (dim 32).
 *
 * What must match LanceDB's files for the same vectors: the schemas, the
 * metadata (JSON values byte for byte where they do not depend on the
 * graph: lance:index, lance:ivf, lance:sq, storage_metadata, distance_type;
 * for cosine we quantize normalized vectors, so lance:sq has their bounds),
 * auxiliary.idx's pages and column metadata byte for byte (l2 and dot), the IVF buffers,
 * each column's page layout; the graphs differ (ours is seeded splitmix64,
 * LanceDB's is SmallRng and multi-threaded) but both must pass
 * mw_vindex_check (levels, neighbor counts <= 2m / m, entry point on the
 * top level) and ours must find each vector's own row first.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cases.h"

#include "encodings_v2_1.pb-c.h"
#include "file2.pb-c.h"
#include "google/protobuf/any.pb-c.h"
#include "lance/datafile.h"
#include "lance/fullzip.h"
#include "lance/hnsw.h"
#include "lance/dataset_manifest.h"
#include "lance/sq.h"
#include "lance/sstable.h"
#include "lance/vindex_file.h"
#include "testutil.h"

static const char *const CASES[] = {"l2_pq", "l2_pq_nulls", "cos_hnswsq", "dot_ivfpq"};
#define N_CASES (sizeof CASES / sizeof CASES[0])

typedef struct gcase {
  uint8_t *index_idx, *aux_idx, *manifest;
  size_t index_len, aux_len, manifest_len;
  float *vecs;
  uint8_t validity[64];
  bool has_nulls;
  uint64_t rows;
  uint32_t dim;
  mw_distance_t dist;
  char name[64], uuid[40], id[32];
} gcase_t;

static char *case_path(const char *c, const char *file) {
  const char *root = getenv("MW_SOURCE_ROOT");
  assert_non_null(root);
  return tu_strf("%s/tests/lance/data/vindex/%s/%s", root, c, file);
}

static uint8_t *load(const char *c, const char *file, size_t *len) {
  char *p = case_path(c, file);
  uint8_t *b = tu_read_file(p, len);
  if (b == NULL) fail_msg("cannot read fixture %s", p);
  free(p);
  return b;
}

static void case_load(const char *c, gcase_t *g) {
  memset(g, 0, sizeof *g);
  snprintf(g->id, sizeof g->id, "%s", c);
  size_t n;
  g->index_idx = load(c, "index.idx", &g->index_len);
  g->aux_idx = load(c, "auxiliary.idx", &g->aux_len);
  g->manifest = load(c, "sstable.manifest", &g->manifest_len);
  char *txt = (char *)load(c, "case.txt", &n), *save = NULL;
  memset(g->validity, 0xff, sizeof g->validity);
  for (char *l = strtok_r(txt, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
    if (strncmp(l, "rows ", 5) == 0) g->rows = strtoull(l + 5, NULL, 10);
    else if (strncmp(l, "dim ", 4) == 0) g->dim = (uint32_t)strtoul(l + 4, NULL, 10);
    else if (strncmp(l, "distance ", 9) == 0) assert_int_equal(mw_distance_parse(l + 9, strlen(l + 9), &g->dist), 0);
    else if (strncmp(l, "index ", 6) == 0) snprintf(g->name, sizeof g->name, "%s", l + 6);
    else if (strncmp(l, "uuid ", 5) == 0) snprintf(g->uuid, sizeof g->uuid, "%s", l + 5);
    else if (strncmp(l, "nulls", 5) == 0)
      for (char *p = l + 5; *p;) {
        char *e;
        unsigned long r = strtoul(p, &e, 10);
        if (e == p) break;
        assert_true(r < 8 * sizeof g->validity);
        g->validity[r >> 3] &= (uint8_t)~(1u << (r & 7));
        g->has_nulls = true;
        p = e;
      }
  }
  free(txt);
  assert_true(g->rows > 0 && g->rows <= 8 * sizeof g->validity * 8);
  size_t vl;
  g->vecs = (float *)(void *)load(c, "vectors.f32", &vl);
  assert_int_equal(vl, g->rows * g->dim * 4);
}

static void case_free(gcase_t *g) {
  free(g->index_idx);
  free(g->aux_idx);
  free(g->manifest);
  free(g->vecs);
}

static bool valid_row(const gcase_t *g, uint64_t r) { return !g->has_nulls || (g->validity[r >> 3] >> (r & 7) & 1); }

static void build_ours(const gcase_t *g, mw_vindex_t *v) {
  mw_vindex_input_t in = {.vecs = g->vecs, .validity = g->has_nulls ? g->validity : NULL, .rows = g->rows,
                          .dim = g->dim, .dist = g->dist};
  mw_err_t err = {0};
  int rc = mw_vindex_build(&in, v, &err);
  if (rc != 0) fail_msg("build: %s", err.msg);
  const char *dump = getenv("MW_VINDEX_DUMP"); /* a directory: keep our files for a look */
  if (dump) {
    char *a = tu_strf("%s/%s.index.idx", dump, g->id), *b = tu_strf("%s/%s.auxiliary.idx", dump, g->id);
    assert_int_equal(tu_write_file(a, v->index_idx.data, v->index_idx.len), 0);
    assert_int_equal(tu_write_file(b, v->aux_idx.data, v->aux_idx.len), 0);
    free(a);
    free(b);
  }
}

/* ------------------------------------------------------------ LanceDB's files */

/* LanceDB's files pass our check; row ids skip the null vectors; the SQ
 * bounds are the vectors' min and max and every code is ours; the stored
 * distances are ours (l2, cosine) — for dot LanceDB stores the raw dot
 * product (its graph is built on a.b ascending, not on 1 - a.b). */
static void test_golden_check(void **state) {
  (void)state;
  for (size_t c = 0; c < N_CASES; c++) {
    gcase_t g;
    case_load(CASES[c], &g);
    mw_vindex_info_t info;
    mw_err_t err = {0};
    int rc = mw_vindex_check(g.index_idx, g.index_len, g.aux_idx, g.aux_len, &info, &err);
    if (rc != 0) fail_msg("%s: %s", CASES[c], err.msg);
    assert_int_equal(info.dim, g.dim);
    assert_int_equal(info.dist, g.dist);
    assert_int_equal(info.m, 16);
    assert_int_equal(info.ef_construction, 100);
    assert_int_equal(info.max_level, 7);
    uint32_t k = 0;
    mw_sq_bounds_t b;
    mw_sq_bounds_init(&b);
    for (uint64_t r = 0; r < g.rows; r++) {
      if (!valid_row(&g, r)) continue;
      assert_int_equal(info.row_ids[k++], r);
      mw_sq_bounds_update(&b, g.vecs + r * g.dim, g.dim);
    }
    assert_int_equal(k, info.nodes);
    assert_true(b.lo == info.bounds.lo);
    assert_true(b.hi == info.bounds.hi);
    /* codes and distances, from the decoded files */
    mw_datafile_t fa, fi;
    mw_batch_t ba, bi;
    assert_int_equal(mw_datafile_open(&fa, g.aux_idx, g.aux_len, NULL, &err), 0);
    assert_int_equal(mw_datafile_read_batch(&fa, &ba, &err), 0);
    assert_int_equal(mw_datafile_open(&fi, g.index_idx, g.index_len, NULL, &err), 0);
    assert_int_equal(mw_datafile_read_batch(&fi, &bi, &err), 0);
    const uint8_t *codes = ba.cols[1].values.data;
    for (uint32_t i = 0; i < info.nodes; i++) {
      uint8_t mine[64];
      mw_sq_encode(&b, g.vecs + info.row_ids[i] * g.dim, g.dim, mine);
      assert_memory_equal(codes + (size_t)i * g.dim, mine, g.dim);
    }
    const int32_t *off = (const int32_t *)(const void *)bi.cols[1].offsets.data;
    const uint32_t *nb = (const uint32_t *)(const void *)bi.cols[1].children[0].values.data;
    const float *ds = (const float *)(const void *)bi.cols[2].children[0].values.data;
    const uint32_t *vid = (const uint32_t *)(const void *)bi.cols[0].values.data;
    for (uint32_t r = 0; r < info.graph_rows; r++)
      for (int32_t j = off[r]; j < off[r + 1]; j++) {
        const float *a = g.vecs + info.row_ids[vid[r]] * g.dim, *o = g.vecs + info.row_ids[nb[j]] * g.dim;
        float want = mw_distance(g.dist, a, o, g.dim);
        if (g.dist == MW_DIST_DOT) want = 1.0f - want; /* LanceDB: the raw dot product */
        assert_true(fabsf(ds[j] - want) <= 1e-4f * (1 + fabsf(want)));
      }
    mw_batch_free(&ba);
    mw_batch_free(&bi);
    mw_datafile_close(&fa);
    mw_datafile_close(&fi);
    mw_vindex_info_free(&info);
    case_free(&g);
  }
}


/* ------------------------------------------------------------ ours vs LanceDB's */

static void open_read(const uint8_t *p, size_t n, mw_datafile_t *f, mw_batch_t *b) {
  mw_err_t err = {0};
  if (mw_datafile_open(f, p, n, NULL, &err) != 0 || mw_datafile_read_batch(f, b, &err) != 0) fail_msg("%s", err.msg);
}

static void schemas_equal(const mw_schema_t *a, const mw_schema_t *b, const char *const *same_keys) {
  assert_int_equal(a->n_fields, b->n_fields);
  for (size_t i = 0; i < a->n_fields; i++) {
    const mw_field_t *x = &a->fields[i], *y = &b->fields[i];
    assert_string_equal(x->name, y->name);
    assert_true(mw_field_type_equal(x, y));
    assert_int_equal(x->id, y->id);
    assert_int_equal(x->nullable, y->nullable);
    assert_int_equal(x->meta.n, y->meta.n);
    for (size_t k = 0; k < x->meta.n; k++) {
      const mw_kv_t *o = mw_kvs_get(&y->meta, x->meta.items[k].key);
      assert_non_null(o);
      assert_string_equal((const char *)o->value, (const char *)x->meta.items[k].value);
    }
    for (uint32_t c = 0; c < x->n_children; c++) assert_int_equal(x->children[c].id, y->children[c].id);
  }
  assert_int_equal(a->meta.n, b->meta.n);
  for (size_t k = 0; k < a->meta.n; k++) assert_non_null(mw_kvs_get(&b->meta, a->meta.items[k].key));
  for (size_t k = 0; same_keys[k]; k++) {
    const mw_kv_t *x = mw_kvs_get(&a->meta, same_keys[k]), *y = mw_kvs_get(&b->meta, same_keys[k]);
    assert_non_null(x);
    assert_non_null(y);
    assert_string_equal((const char *)x->value, (const char *)y->value);
  }
}

/* The PageLayout of column c's first page. */
static Lance__Encodings21__PageLayout *layout_of(const mw_datafile_t *f, uint32_t c) {
  const uint8_t *p;
  size_t n;
  assert_int_equal(mw_datafile_column_metadata(f, c, &p, &n, NULL), 0);
  Lance__File__V2__ColumnMetadata *cm = lance__file__v2__column_metadata__unpack(NULL, n, p);
  assert_non_null(cm);
  assert_int_equal(cm->n_pages, 1);
  ProtobufCBinaryData *e = &cm->pages[0]->encoding->direct->encoding;
  Google__Protobuf__Any *any = google__protobuf__any__unpack(NULL, e->len, e->data);
  assert_non_null(any);
  Lance__Encodings21__PageLayout *pl = lance__encodings21__page_layout__unpack(NULL, any->value.len, any->value.data);
  assert_non_null(pl);
  google__protobuf__any__free_unpacked(any, NULL);
  lance__file__v2__column_metadata__free_unpacked(cm, NULL);
  return pl;
}

/* Returns whether every page has the same value compression; a flat
 * integer page of ours where LanceDB bitpacks (it does for _rowid from
 * about 120 rows on) is allowed and answered false. */
static bool layouts_equal(const mw_datafile_t *a, const mw_datafile_t *b) {
  bool same = true;
  for (uint32_t c = 0; c < a->n_columns; c++) {
    Lance__Encodings21__PageLayout *x = layout_of(a, c), *y = layout_of(b, c);
    assert_int_equal(x->layout_case, y->layout_case);
    if (x->layout_case == LANCE__ENCODINGS21__PAGE_LAYOUT__LAYOUT_FULL_ZIP_LAYOUT) {
      const Lance__Encodings21__FullZipLayout *p = x->full_zip_layout, *q = y->full_zip_layout;
      assert_int_equal(p->bits_rep, q->bits_rep);
      assert_int_equal(p->bits_per_value, q->bits_per_value);
      assert_int_equal(p->n_layers, 2);
      assert_int_equal(q->n_layers, 2);
      /* a def bit exactly when some list is empty (a graph's lone node on
       * its top level): that depends on the graph, so each file on its own */
      for (int k = 0; k < 2; k++) {
        const Lance__Encodings21__FullZipLayout *z = k ? q : p;
        assert_int_equal(z->layers[0], LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_ALL_VALID_ITEM);
        assert_int_equal(z->layers[1], z->bits_def ? LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_EMPTYABLE_LIST
                                                    : LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_ALL_VALID_LIST);
        assert_true(z->bits_def <= 1);
      }
      assert_int_equal(p->value_compression->compression_case, q->value_compression->compression_case);
    } else {
      const Lance__Encodings21__MiniBlockLayout *p = x->mini_block_layout, *q = y->mini_block_layout;
      int pc = p->value_compression->compression_case, qc = q->value_compression->compression_case;
      if (pc == LANCE__ENCODINGS21__COMPRESSIVE_ENCODING__COMPRESSION_FLAT &&
          qc == LANCE__ENCODINGS21__COMPRESSIVE_ENCODING__COMPRESSION_INLINE_BITPACKING)
        same = false;
      else
        assert_int_equal(pc, qc);
      assert_int_equal(p->has_large_chunk, q->has_large_chunk);
      assert_int_equal(p->num_buffers, q->num_buffers);
    }
    lance__encodings21__page_layout__free_unpacked(x, NULL);
    lance__encodings21__page_layout__free_unpacked(y, NULL);
  }
  return same;
}

/* Our files for LanceDB's vectors: both pass the check, schemas and the
 * graph-independent metadata are equal, auxiliary.idx is byte-identical
 * up to its FileDescriptor (pages, IVF buffer) with equal column metadata,
 * and index.idx's pages have LanceDB's layouts. */
static void test_ours_vs_golden(void **state) {
  (void)state;
  static const char *const idx_keys[] = {"lance:index", "lance:ivf", NULL};
  static const char *const aux_keys[] = {"lance:ivf", "lance:sq", "storage_metadata", "distance_type", NULL};
  static const char *const aux_keys_cos[] = {"lance:ivf", "distance_type", NULL};
  for (size_t c = 0; c < N_CASES; c++) {
    gcase_t g;
    case_load(CASES[c], &g);
    mw_vindex_t v;
    build_ours(&g, &v);
    mw_vindex_info_t mine, theirs;
    mw_err_t err = {0};
    if (mw_vindex_check(v.index_idx.data, v.index_idx.len, v.aux_idx.data, v.aux_idx.len, &mine, &err) != 0)
      fail_msg("%s: ours: %s", CASES[c], err.msg);
    assert_int_equal(mw_vindex_check(g.index_idx, g.index_len, g.aux_idx, g.aux_len, &theirs, &err), 0);
    assert_int_equal(mine.nodes, theirs.nodes);
    assert_memory_equal(mine.row_ids, theirs.row_ids, mine.nodes * sizeof *mine.row_ids);
    bool cos = g.dist == MW_DIST_COSINE; /* we quantize normalized vectors (vindex_file.h) */
    if (!cos) assert_true(mine.bounds.lo == theirs.bounds.lo && mine.bounds.hi == theirs.bounds.hi);
    if (cos) { /* the bounds of the normalized vectors */
      mw_sq_bounds_t b;
      mw_sq_bounds_init(&b);
      for (uint64_t r = 0; r < g.rows; r++) {
        float u[64], nn = 0;
        for (uint32_t i = 0; i < g.dim; i++) nn += g.vecs[r * g.dim + i] * g.vecs[r * g.dim + i];
        for (uint32_t i = 0; i < g.dim; i++) u[i] = (float)(g.vecs[r * g.dim + i] * (1.0 / sqrt(nn)));
        mw_sq_bounds_update(&b, u, g.dim);
      }
      assert_true(fabs(mine.bounds.lo - b.lo) < 1e-6 && fabs(mine.bounds.hi - b.hi) < 1e-6);
    }
    mw_datafile_t fi[2], fa[2];
    mw_batch_t bi[2], ba[2];
    open_read(v.index_idx.data, v.index_idx.len, &fi[0], &bi[0]);
    open_read(g.index_idx, g.index_len, &fi[1], &bi[1]);
    open_read(v.aux_idx.data, v.aux_idx.len, &fa[0], &ba[0]);
    open_read(g.aux_idx, g.aux_len, &fa[1], &ba[1]);
    schemas_equal(&fi[0].schema, &fi[1].schema, idx_keys);
    schemas_equal(&fa[0].schema, &fa[1].schema, cos ? aux_keys_cos : aux_keys);
    assert_true(layouts_equal(&fi[0], &fi[1]));
    bool aux_same = layouts_equal(&fa[0], &fa[1]);
    assert_true(aux_same || strcmp(CASES[c], "l2_pq") == 0);
    aux_same = aux_same && !cos; /* other codes */
    const uint8_t *p0, *p1;
    size_t n0, n1;
    assert_int_equal(mw_datafile_global_buffer(&fa[0], 0, &p0, &n0, NULL), 0);
    assert_int_equal(mw_datafile_global_buffer(&fa[1], 0, &p1, &n1, NULL), 0);
    if (aux_same) assert_int_equal(p0 - v.aux_idx.data, p1 - g.aux_idx);
    if (aux_same) assert_memory_equal(v.aux_idx.data, g.aux_idx, (size_t)(p0 - v.aux_idx.data));
    for (uint32_t col = 0; aux_same && col < 2; col++) {
      assert_int_equal(mw_datafile_column_metadata(&fa[0], col, &p0, &n0, NULL), 0);
      assert_int_equal(mw_datafile_column_metadata(&fa[1], col, &p1, &n1, NULL), 0);
      assert_int_equal(n0, n1);
      assert_memory_equal(p0, p1, n0);
    }
    for (int k = 0; k < 2; k++) {
      mw_batch_free(&bi[k]);
      mw_batch_free(&ba[k]);
      mw_datafile_close(&fi[k]);
      mw_datafile_close(&fa[k]);
    }
    mw_vindex_info_free(&mine);
    mw_vindex_info_free(&theirs);
    mw_vindex_free(&v);
    case_free(&g);
  }
}

/* ------------------------------------------------------------ HNSW */

static float *random_vectors(uint32_t n, uint32_t dim, uint64_t seed) {
  float *v = malloc((size_t)n * dim * sizeof *v);
  assert_non_null(v);
  uint64_t s = seed;
  for (size_t i = 0; i < (size_t)n * dim; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    v[i] = (float)((double)(s >> 40) / 16777216.0 * 2 - 1);
  }
  return v;
}

/* Recall@10 of the graph against brute force, 2 000 random vectors of dim
 * 32, 200 queries (random, not in the set), beam 100; every distance type.
 * Also: every vector finds itself first. */
static void test_recall(void **state) {
  (void)state;
  const uint32_t n = 2000, dim = 32, nq = 200, k = 10;
  float *vecs = random_vectors(n, dim, 0x1234567), *qs = random_vectors(nq, dim, 0x7654321);
  static const mw_distance_t all[] = {MW_DIST_L2, MW_DIST_COSINE, MW_DIST_DOT};
  for (size_t d = 0; d < 3; d++) {
    mw_hnsw_t g;
    mw_err_t err = {0};
    assert_int_equal(mw_hnsw_build(&g, vecs, n, dim, all[d], NULL, &err), 0);
    uint32_t hits = 0, hits_k = 0, self = 0;
    for (uint32_t q = 0; q < nq; q++) {
      mw_hnsw_link_t got[10], best[10], narrow[10];
      int m = mw_hnsw_search(&g, qs + (size_t)q * dim, k, 100, got);
      assert_int_equal(m, (int)k);
      assert_int_equal(mw_hnsw_search(&g, qs + (size_t)q * dim, k, k, narrow), (int)k);
      for (uint32_t i = 0; i < k; i++) best[i] = (mw_hnsw_link_t){UINT32_MAX, INFINITY};
      for (uint32_t i = 0; i < n; i++) { /* brute force top k */
        float x = mw_distance(all[d], qs + (size_t)q * dim, vecs + (size_t)i * dim, dim);
        if (x >= best[k - 1].dist) continue;
        uint32_t j = k - 1;
        for (; j > 0 && best[j - 1].dist > x; j--) best[j] = best[j - 1];
        best[j] = (mw_hnsw_link_t){i, x};
      }
      for (uint32_t i = 0; i < k; i++)
        for (uint32_t j = 0; j < k; j++) hits += got[i].id == best[j].id, hits_k += narrow[i].id == best[j].id;
    }
    for (uint32_t i = 0; i < n; i++) {
      mw_hnsw_link_t got[1];
      assert_int_equal(mw_hnsw_search(&g, vecs + (size_t)i * dim, 1, 64, got), 1);
      self += got[0].id == i || (all[d] != MW_DIST_L2 && got[0].dist <= mw_distance(all[d], vecs + (size_t)i * dim, vecs + (size_t)i * dim, dim));
    }
    double recall = (double)hits / (nq * k);
    print_message("# hnsw %s: recall@10 %.4f (ef 100), %.4f (ef 10), self found first %u/%u, build memory %zu bytes\n",
                  mw_distance_name(all[d]), recall, (double)hits_k / (nq * k), self, n, g.bytes);
    assert_true(recall >= 0.95);
    if (all[d] != MW_DIST_DOT) assert_int_equal(self, n); /* dot: a longer vector can beat a vector's own */
    mw_hnsw_free(&g);
  }
  free(vecs);
  free(qs);
}

/* Our files decode to exactly our graph; the same input and seed give the
 * same bytes; another seed another graph. Memory stays within the plan. */
/* The graph's bytes are pinned: the same vectors give the same links and
 * distances on every machine. mw_distance runs as an AVX2 clone where the
 * CPU has AVX2 and as SSE elsewhere (hnsw.c); both must give these hashes,
 * which an SSE-only build and the AVX2 clone gave on 2026-12-07 (an -mfma
 * build gives others). 3 000 vectors of dim 131 (not a multiple of 8: the
 * scalar tail counts too), xorshift values in [-1, 1), default parameters. */
static void test_graph_bytes_pinned(void **state) {
  (void)state;
  static const uint64_t want[3] = {0x5dc6ef2bdb0fa25cull, 0xeecee9d74fd88403ull, 0x7a33d9e907bbfc70ull};
  const uint32_t n = 3000, dim = 131;
  float *v = malloc((size_t)n * dim * sizeof *v);
  assert_non_null(v);
  uint64_t x = 7;
  for (size_t i = 0; i < (size_t)n * dim; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    v[i] = (float)((double)(x >> 40) / 16777216.0 * 2 - 1);
  }
  for (int d = 0; d < 3; d++) {
    mw_hnsw_t g;
    mw_hnsw_params_t p = {0};
    assert_int_equal(mw_hnsw_build(&g, v, n, dim, (mw_distance_t)d, &p, NULL), 0);
    uint64_t h = 1469598103934665603ull; /* FNV-1a over every level's links */
    for (uint32_t i = 0; i < n; i++)
      for (uint16_t lv = 0; lv < 7; lv++) {
        uint32_t c = 0;
        const mw_hnsw_link_t *l = mw_hnsw_links(&g, i, lv, &c);
        for (uint32_t k = 0; l != NULL && k < c; k++) {
          unsigned char b[8];
          memcpy(b, &l[k], 8);
          for (int j = 0; j < 8; j++) h = (h ^ b[j]) * 1099511628211ull;
        }
      }
    mw_hnsw_free(&g);
    if (h != want[d]) fail_msg("distance %s: graph hash %016llx, pinned %016llx", mw_distance_name((mw_distance_t)d),
                               (unsigned long long)h, (unsigned long long)want[d]);
  }
  free(v);
}

static void test_roundtrip_determinism(void **state) {
  (void)state;
  const uint32_t n = 700, dim = 24;
  float *vecs = random_vectors(n, dim, 99);
  mw_vindex_input_t in = {.vecs = vecs, .rows = n, .dim = dim, .dist = MW_DIST_L2};
  mw_vindex_t a, b, c;
  mw_err_t err = {0};
  assert_int_equal(mw_vindex_build(&in, &a, &err), 0);
  assert_int_equal(mw_vindex_build(&in, &b, &err), 0);
  in.hnsw.seed = 7;
  assert_int_equal(mw_vindex_build(&in, &c, &err), 0);
  assert_int_equal(a.index_idx.len, b.index_idx.len);
  assert_memory_equal(a.index_idx.data, b.index_idx.data, a.index_idx.len);
  assert_memory_equal(a.aux_idx.data, b.aux_idx.data, a.aux_idx.len);
  assert_true(a.index_idx.len != c.index_idx.len || memcmp(a.index_idx.data, c.index_idx.data, a.index_idx.len) != 0);
  assert_true(a.build_bytes == mw_hnsw_plan_bytes(n, NULL));
  assert_true(a.build_bytes <= (size_t)n * (16 * 16 + 14) + (size_t)n * (8 * 16 + 1) / 4 + 64 * 1024);
  mw_hnsw_t g;
  assert_int_equal(mw_hnsw_build(&g, vecs, n, dim, MW_DIST_L2, NULL, &err), 0);
  mw_datafile_t f;
  mw_batch_t bt;
  open_read(a.index_idx.data, a.index_idx.len, &f, &bt);
  const uint32_t *vid = (const uint32_t *)(const void *)bt.cols[0].values.data;
  const int32_t *off = (const int32_t *)(const void *)bt.cols[1].offsets.data;
  const uint32_t *nb = (const uint32_t *)(const void *)bt.cols[1].children[0].values.data;
  const float *ds = (const float *)(const void *)bt.cols[2].children[0].values.data;
  uint64_t row = 0;
  for (uint16_t l = 0; l < g.max_level; l++)
    for (uint32_t id = 0; id < n; id++) {
      uint32_t cnt;
      const mw_hnsw_link_t *lk = mw_hnsw_links(&g, id, l, &cnt);
      if (lk == NULL) continue;
      assert_int_equal(vid[row], id);
      assert_int_equal(off[row + 1] - off[row], cnt);
      for (uint32_t j = 0; j < cnt; j++) {
        assert_int_equal(nb[off[row] + (int32_t)j], lk[j].id);
        assert_true(ds[off[row] + (int32_t)j] == lk[j].dist);
      }
      row++;
    }
  assert_int_equal(row, (uint64_t)bt.n_rows);
  assert_int_equal(a.entry_point, g.entry);
  mw_batch_free(&bt);
  mw_datafile_close(&f);
  mw_hnsw_free(&g);
  mw_vindex_free(&a);
  mw_vindex_free(&b);
  mw_vindex_free(&c);
  free(vecs);
}

/* No non-null vector: -ENODATA (Lance skips the index). One vector: a
 * one-node graph with an empty list. Non-finite vectors skipped. Bad
 * parameters: -EINVAL. */
static void test_edges(void **state) {
  (void)state;
  float v[4] = {1, 2, 3, 4};
  uint8_t none = 0;
  mw_vindex_t x;
  mw_err_t err = {0};
  mw_vindex_input_t in = {.vecs = v, .validity = &none, .rows = 2, .dim = 2, .dist = MW_DIST_COSINE};
  assert_int_equal(mw_vindex_build(&in, &x, &err), -ENODATA);
  uint8_t second = 2;
  in.validity = &second;
  assert_int_equal(mw_vindex_build(&in, &x, &err), 0);
  mw_vindex_info_t info;
  assert_int_equal(mw_vindex_check(x.index_idx.data, x.index_idx.len, x.aux_idx.data, x.aux_idx.len, &info, &err), 0);
  assert_int_equal(info.nodes, 1);
  assert_int_equal(info.row_ids[0], 1);
  assert_int_equal(info.graph_rows, 1);
  mw_vindex_info_free(&info);
  mw_vindex_free(&x);
  /* a NaN or infinite item: the row gets no node (found by fuzz_vindex) */
  float odd[6] = {NAN, 1, 2, 3, INFINITY, 5};
  mw_vindex_input_t in3 = {.vecs = odd, .rows = 3, .dim = 2, .dist = MW_DIST_L2};
  assert_int_equal(mw_vindex_build(&in3, &x, &err), 0);
  assert_int_equal(mw_vindex_check(x.index_idx.data, x.index_idx.len, x.aux_idx.data, x.aux_idx.len, &info, &err), 0);
  assert_int_equal(info.nodes, 1);
  assert_int_equal(info.row_ids[0], 1);
  assert_true(info.bounds.lo == 2 && info.bounds.hi == 3);
  mw_vindex_info_free(&info);
  mw_vindex_free(&x);
  in.dim = 0;
  assert_int_equal(mw_vindex_build(&in, &x, &err), -EINVAL);
  in.dim = 2, in.hnsw.m = 1;
  assert_int_equal(mw_vindex_build(&in, &x, &err), -EINVAL);
  in.hnsw.m = 16, in.hnsw.max_bytes = 100;
  assert_int_equal(mw_vindex_build(&in, &x, &err), -EFBIG);
}

/* ------------------------------------------------------------ pieces */

/* The sample of fullzip.h both ways; every truncation and a wrong
 * repetition index are refused. */
static void test_fullzip(void **state) {
  (void)state;
  const int32_t off[] = {0, 2, 2};
  const uint32_t vals[] = {20, 47};
  static const uint8_t want0[] = {0x02, 20, 0, 0, 0, 0x00, 47, 0, 0, 0, 0x03}, want1[] = {0, 10, 11};
  mw_buf_t z = MW_BUF_INIT, ri = MW_BUF_INIT, out = MW_BUF_INIT;
  mw_fullzip_shape_t s;
  assert_int_equal(mw_fullzip_zip_list(off, 2, (const uint8_t *)vals, 4, &z, &ri, &s), 0);
  assert_int_equal(z.len, sizeof want0);
  assert_memory_equal(z.data, want0, sizeof want0);
  assert_memory_equal(ri.data, want1, sizeof want1);
  assert_int_equal(s.num_items, 3);
  assert_int_equal(s.num_visible_items, 2);
  assert_int_equal(s.bits_def, 1);
  uint16_t rep[3], def[3];
  mw_err_t err = {0};
  assert_int_equal(mw_fullzip_unzip(&s, z.data, z.len, ri.data, ri.len, rep, def, &out, &err), 0);
  assert_memory_equal(out.data, vals, sizeof vals);
  assert_int_equal(rep[0], 1);
  assert_int_equal(rep[1], 0);
  assert_int_equal(def[2], 1);
  for (size_t cut = 0; cut < z.len; cut++) {
    mw_buf_reset(&out);
    assert_int_equal(mw_fullzip_unzip(&s, z.data, cut, ri.data, ri.len, rep, def, &out, &err), -EBADMSG);
  }
  ri.data[1] = 9;
  mw_buf_reset(&out);
  assert_int_equal(mw_fullzip_unzip(&s, z.data, z.len, ri.data, ri.len, rep, def, &out, &err), -EBADMSG);
  mw_buf_free(&z);
  mw_buf_free(&ri);
  mw_buf_free(&out);
}

/* serde_json's f64 text. */
static void test_json_double(void **state) {
  (void)state;
  static const struct { double v; const char *t; } cases[] = {
      {-0.9942885637283325, "-0.9942885637283325"}, {0.9995336532592773, "0.9995336532592773"},
      {1.0, "1.0"}, {0.0, "0.0"}, {-2.5, "-2.5"}, {100.0, "100.0"}, {0.001, "0.001"},
      {1e-7, "1e-7"}, {1.5e-7, "1.5e-7"}, {1e20, "1e20"}, {123456.0, "123456.0"}, {(double)0.1f, "0.10000000149011612"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char out[32];
    mw_vindex_json_double(cases[i].v, out);
    assert_string_equal(out, cases[i].t);
  }
}

/* The IndexMetadata entry equals the one in LanceDB's SSTable manifest
 * (index section at offset 0) up to created_at, which we then set to
 * LanceDB's value to compare the whole message. */
static void test_entry_vs_golden(void **state) {
  (void)state;
  for (size_t c = 0; c < N_CASES; c++) {
    gcase_t g;
    case_load(CASES[c], &g);
    uint8_t uuid[16];
    for (int i = 0, j = 0; i < 16; j++) {
      if (g.uuid[j] == '-') continue;
      unsigned x;
      assert_int_equal(sscanf(g.uuid + j, "%2x", &x), 1);
      uuid[i++] = (uint8_t)x;
      j++;
    }
    /* section = u32 len | IndexSection{1: IndexMetadata} */
    const uint8_t *sec = g.manifest + 4;
    assert_int_equal(sec[0], 0x0a);
    size_t len = sec[1], at = 2; /* one-byte length in these fixtures */
    assert_true(len < 128);
    const uint8_t *ent = sec + at;
    /* created_at: the last field, 0x40 then a varint (all but its last
     * byte have the high bit set) */
    size_t tail = len - 1;
    while (tail > 0 && (ent[tail - 1] & 0x80)) tail--;
    assert_true(tail > 0);
    tail--;
    assert_int_equal(ent[tail], 0x40);
    uint64_t created = 0;
    for (size_t i = tail + 1, sh = 0; i < len; i++, sh += 7) created |= (uint64_t)(ent[i] & 0x7f) << sh;
    assert_true(created > 1700000000000ull); /* ms since the epoch, 2023 on */
    mw_buf_t mine = MW_BUF_INIT;
    mw_err_t err = {0};
    assert_int_equal(mw_vindex_entry_encode(uuid, g.name, 1, 1, created, &mine, &err), 0);
    assert_int_equal(mine.len, len);
    assert_memory_equal(mine.data, ent, len);
    mw_buf_free(&mine);
    case_free(&g);
  }
}

/* ------------------------------------------------------------ in an SSTable */

static void sst_schema(mw_schema_t *s, uint32_t dim) {
  mw_schema_init(s);
  assert_true(mw_schema_add(s, "id", MW_T_INT64, false) >= 0);
  int i = mw_schema_add(s, "vec", MW_T_FSL, true);
  assert_true(i >= 0);
  s->fields[i].fsl_dim = (int32_t)dim;
  s->fields[i].item_nullable = true;
  assert_true(mw_schema_add(s, "_tombstone", MW_T_BOOL, false) >= 0);
  for (size_t k = 0; k < s->n_fields; k++) s->fields[k].id = (int32_t)k;
  s->fields[0].pk_position = 1;
  assert_int_equal(mw_kvs_set(&s->fields[0].meta, "lance-schema:unenforced-primary-key:position", "1", 1), 0);
}

/* The IndexSection of a whole manifest file, decoded; the manifest must
 * name it at offset 0. */
static void manifest_indexes(const uint8_t *p, size_t n, mw_index_section_t *out) {
  mw_section_t msg, sec;
  uint64_t pos;
  mw_err_t err = {0};
  assert_int_equal(mw_dmanifest_unframe(p, n, &msg, &pos, &err), 0);
  mw_dmanifest_t m;
  assert_int_equal(mw_dmanifest_decode(msg.data, msg.len, &m, &err), 0);
  assert_true(m.has_index_section);
  assert_int_equal(m.pb->index_section, 0);
  assert_int_equal(mw_dmanifest_section_at(p, n, 0, pos, &sec, &err), 0);
  assert_int_equal(mw_index_section_decode(sec.data, sec.len, out, &err), 0);
  mw_dmanifest_free(&m);
}

/* An SSTable of LanceDB's l2_pq_nulls rows (two batches) with the vector
 * index maintained: _indices/<uuid>/{index,auxiliary}.idx pass the check,
 * name every non-null row, and the manifest's index section (at 0, as in
 * LanceDB's) holds the entry LanceDB writes: name, fields [1], version 1,
 * fragments {0}, VectorIndexDetails, index_version 1, the directory's uuid.
 * An SSTable whose vectors are all null gets no index and no section. */
static void test_sstable_with_index(void **state) {
  (void)state;
  gcase_t g;
  case_load("l2_pq_nulls", &g);
  mw_schema_t s;
  sst_schema(&s, g.dim);
  mw_batch_t b[2];
  for (int k = 0; k < 2; k++) assert_int_equal(mw_batch_init(&b[k], &s), 0);
  for (uint64_t r = 0; r < g.rows; r++) {
    mw_batch_t *t = &b[r < g.rows / 2 ? 0 : 1];
    int64_t id = (int64_t)(100000 + r);
    bool f = false;
    assert_int_equal(mw_column_append_fixed(&t->cols[0], &id, 8), 0);
    if (valid_row(&g, r)) assert_int_equal(mw_column_append_fixed(&t->cols[1], g.vecs + r * g.dim, 4 * g.dim), 0);
    else assert_int_equal(mw_column_append_null(&t->cols[1], &s.fields[1]), 0);
    assert_int_equal(mw_column_append_bool(&t->cols[2], f), 0);
    t->n_rows++;
  }
  const mw_batch_t *bp[2] = {&b[0], &b[1]};
  mw_sstable_vindex_t vx = {.name = "vec_idx", .field = 1, .dist = MW_DIST_L2};
  mw_sstable_opts_t o = {.seed = 42, .timestamp_ns = 1796661269139182145, .vindexes = &vx, .n_vindexes = 1};
  mw_sstable_t sst;
  mw_err_t err = {0};
  if (mw_sstable_build(&s, bp, 2, 1, &o, &sst, &err) != 0) fail_msg("%s", err.msg);
  assert_int_equal(sst.n_vindexes_built, 1);
  const mw_sstable_file_t *ii = mw_sstable_find(&sst, "/index.idx"), *aa = mw_sstable_find(&sst, "/auxiliary.idx");
  const mw_sstable_file_t *mf = mw_sstable_find(&sst, ".manifest");
  assert_non_null(ii);
  assert_non_null(aa);
  assert_non_null(mf);
  const char *under = strstr(ii->path, "/_indices/"); /* <dir>/_indices/<uuid>/index.idx */
  assert_non_null(under);
  mw_vindex_info_t info;
  if (mw_vindex_check(ii->bytes.data, ii->bytes.len, aa->bytes.data, aa->bytes.len, &info, &err) != 0) fail_msg("%s", err.msg);
  assert_int_equal(info.nodes, g.rows - 3);
  for (uint32_t k = 0, r = 0; r < g.rows; r++)
    if (valid_row(&g, r)) assert_int_equal(info.row_ids[k++], r);
  mw_index_section_t mine, theirs;
  manifest_indexes(mf->bytes.data, mf->bytes.len, &mine);
  manifest_indexes(g.manifest, g.manifest_len, &theirs);
  assert_int_equal(mine.n, 1);
  assert_int_equal(theirs.n, 1);
  const Lance__Table__IndexMetadata *x = mine.items[0].pb, *y = theirs.items[0].pb;
  assert_string_equal(x->name, y->name);
  assert_int_equal(x->n_fields, 1);
  assert_int_equal(x->fields[0], y->fields[0]);
  assert_int_equal(x->dataset_version, y->dataset_version);
  assert_int_equal(x->fragment_bitmap.len, y->fragment_bitmap.len);
  assert_memory_equal(x->fragment_bitmap.data, y->fragment_bitmap.data, x->fragment_bitmap.len);
  assert_string_equal(x->index_details->type_url, y->index_details->type_url);
  assert_int_equal(x->index_version, y->index_version);
  char u[37];
  snprintf(u, sizeof u, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", x->uuid->uuid.data[0],
           x->uuid->uuid.data[1], x->uuid->uuid.data[2], x->uuid->uuid.data[3], x->uuid->uuid.data[4], x->uuid->uuid.data[5],
           x->uuid->uuid.data[6], x->uuid->uuid.data[7], x->uuid->uuid.data[8], x->uuid->uuid.data[9], x->uuid->uuid.data[10],
           x->uuid->uuid.data[11], x->uuid->uuid.data[12], x->uuid->uuid.data[13], x->uuid->uuid.data[14], x->uuid->uuid.data[15]);
  assert_memory_equal(under + 10, u, 36);
  mw_index_section_free(&mine);
  mw_index_section_free(&theirs);
  mw_vindex_info_free(&info);
  mw_sstable_free(&sst);
  /* all null: no index, no section */
  for (int k = 0; k < 2; k++) mw_batch_reset(&b[k]);
  for (int64_t id = 0; id < 5; id++) {
    assert_int_equal(mw_column_append_fixed(&b[0].cols[0], &id, 8), 0);
    assert_int_equal(mw_column_append_null(&b[0].cols[1], &s.fields[1]), 0);
    assert_int_equal(mw_column_append_bool(&b[0].cols[2], false), 0);
    b[0].n_rows++;
  }
  assert_int_equal(mw_sstable_build(&s, bp, 1, 1, &o, &sst, &err), 0);
  assert_int_equal(sst.n_vindexes_built, 0);
  assert_null(mw_sstable_find(&sst, "/index.idx"));
  mf = mw_sstable_find(&sst, ".manifest");
  mw_section_t msg;
  uint64_t pos;
  mw_dmanifest_t m;
  assert_int_equal(mw_dmanifest_unframe(mf->bytes.data, mf->bytes.len, &msg, &pos, &err), 0);
  assert_int_equal(mw_dmanifest_decode(msg.data, msg.len, &m, &err), 0);
  assert_false(m.has_index_section);
  mw_dmanifest_free(&m);
  mw_sstable_free(&sst);
  /* a vector index on a column that is not fixed_size_list<float32> */
  vx.field = 0;
  assert_int_equal(mw_sstable_build(&s, bp, 1, 1, &o, &sst, &err), -ENOTSUP);
  for (int k = 0; k < 2; k++) mw_batch_free(&b[k]);
  mw_schema_free(&s);
  case_free(&g);
}

/* The base index's distance from its VectorIndexDetails, bytes as LanceDB
 * 0.39.0 wrote them into base manifests (IVF_PQ l2 and dot, HNSW_SQ
 * cosine; prefixes of the measured values). */
static void test_details_distance(void **state) {
  (void)state;
  static const uint8_t l2[] = {0x22, 0x04, 0x08, 0x08, 0x10, 0x02};
  static const uint8_t cos[] = {0x08, 0x01, 0x1a, 0x07, 0x08, 0x14, 0x10, 0xac, 0x02, 0x18, 0x07, 0x2a, 0x02, 0x08, 0x08};
  static const uint8_t dot[] = {0x08, 0x02, 0x22, 0x04, 0x08, 0x08, 0x10, 0x04};
  static const uint8_t ham[] = {0x08, 0x03}, bad[] = {0x0a, 0x09, 0x00};
  mw_distance_t d = MW_DIST_DOT;
  assert_int_equal(mw_vindex_details_distance(MW_VINDEX_DETAILS_URL, l2, sizeof l2, &d), 0);
  assert_int_equal(d, MW_DIST_L2);
  assert_int_equal(mw_vindex_details_distance(MW_VINDEX_DETAILS_URL, cos, sizeof cos, &d), 0);
  assert_int_equal(d, MW_DIST_COSINE);
  assert_int_equal(mw_vindex_details_distance(MW_VINDEX_DETAILS_URL, dot, sizeof dot, &d), 0);
  assert_int_equal(d, MW_DIST_DOT);
  assert_int_equal(mw_vindex_details_distance(MW_VINDEX_DETAILS_URL, NULL, 0, &d), 0);
  assert_int_equal(d, MW_DIST_L2);
  assert_int_equal(mw_vindex_details_distance(MW_VINDEX_DETAILS_URL, ham, sizeof ham, &d), -ENOTSUP);
  assert_int_equal(mw_vindex_details_distance(MW_VINDEX_DETAILS_URL, bad, sizeof bad, &d), -EBADMSG);
  assert_int_equal(mw_vindex_details_distance("/lance.index.pb.BTreeIndexDetails", NULL, 0, &d), -ENOENT);
}

/* mw_vindex_check refuses mismatched or damaged pairs, naming the file:
 * LanceDB's index.idx of 61 nodes with an auxiliary.idx of 80 (same dim),
 * a pair of another dimension, every truncation of index.idx (a sample). */
static void test_check_refuses(void **state) {
  (void)state;
  gcase_t a, b, c;
  case_load("l2_pq_nulls", &a);
  case_load("cos_hnswsq", &b);
  case_load("dot_ivfpq", &c);
  mw_vindex_info_t info;
  mw_err_t err = {0};
  assert_int_equal(mw_vindex_check(a.index_idx, a.index_len, b.aux_idx, b.aux_len, &info, &err), -EBADMSG);
  assert_non_null(strstr(err.msg, "index.idx"));
  mw_vindex_info_free(&info);
  memset(&err, 0, sizeof err);
  assert_int_equal(mw_vindex_check(a.index_idx, a.index_len, c.aux_idx, c.aux_len, &info, &err), -EBADMSG);
  mw_vindex_info_free(&info);
  for (size_t cut = 0; cut < a.index_len; cut += 97) {
    memset(&err, 0, sizeof err);
    assert_true(mw_vindex_check(a.index_idx, cut, a.aux_idx, a.aux_len, &info, &err) < 0);
    assert_true(err.msg[0] != 0);
    mw_vindex_info_free(&info);
  }
  case_free(&a);
  case_free(&b);
  case_free(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_golden_check),
      cmocka_unit_test(test_ours_vs_golden),
      cmocka_unit_test(test_recall),
      cmocka_unit_test(test_roundtrip_determinism),
      cmocka_unit_test(test_graph_bytes_pinned),
      cmocka_unit_test(test_edges),
      cmocka_unit_test(test_fullzip),
      cmocka_unit_test(test_json_double),
      cmocka_unit_test(test_entry_vs_golden),
      cmocka_unit_test(test_sstable_with_index),
      cmocka_unit_test(test_details_distance),
      cmocka_unit_test(test_check_refuses),
  };
  return tu_run_group(tests, NULL, NULL);
}
