/*
 * test_vindex.c — the per-SSTable vector index (IVF_HNSW_SQ): FullZip list
 * pages, the scalar quantizer, the HNSW builder and the two index files.
 *
 * Golden data: tests/formats/data/vindex/<case>/ (tools/gen-vindex-fixtures.mjs)
 * holds index.idx, auxiliary.idx and the SSTable manifest LanceDB 0.39.0's
 * own MemWAL writer flushed for the vectors in vectors.f32 (case.txt: rows,
 * dim, distance, index name, index uuid, null rows). Cases: l2 under a
 * createIndex() IVF_PQ base index (dim 16), the same with null vectors
 * (dim 8), cosine under hnswSq (dim 8), dot under ivfPq (dim 32).
 *
 * What must match LanceDB's files for the same vectors: the schemas, the
 * metadata (JSON values byte for byte where they do not depend on the
 * graph: lance:index, lance:ivf, lance:sq, storage_metadata, distance_type),
 * auxiliary.idx's pages and column metadata byte for byte, the IVF buffers,
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

#include "encodings_v2_1.pb-c.h"
#include "file2.pb-c.h"
#include "google/protobuf/any.pb-c.h"
#include "lance/datafile.h"
#include "lance/fullzip.h"
#include "lance/hnsw.h"
#include "lance/sq.h"
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
  return tu_strf("%s/tests/formats/data/vindex/%s/%s", root, c, file);
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
    assert_true(mine.bounds.lo == theirs.bounds.lo && mine.bounds.hi == theirs.bounds.hi);
    mw_datafile_t fi[2], fa[2];
    mw_batch_t bi[2], ba[2];
    open_read(v.index_idx.data, v.index_idx.len, &fi[0], &bi[0]);
    open_read(g.index_idx, g.index_len, &fi[1], &bi[1]);
    open_read(v.aux_idx.data, v.aux_idx.len, &fa[0], &ba[0]);
    open_read(g.aux_idx, g.aux_len, &fa[1], &ba[1]);
    schemas_equal(&fi[0].schema, &fi[1].schema, idx_keys);
    schemas_equal(&fa[0].schema, &fa[1].schema, aux_keys);
    assert_true(layouts_equal(&fi[0], &fi[1]));
    bool aux_same = layouts_equal(&fa[0], &fa[1]);
    assert_true(aux_same || strcmp(CASES[c], "l2_pq") == 0);
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_golden_check),
      cmocka_unit_test(test_ours_vs_golden),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
