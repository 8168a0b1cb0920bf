/*
 * hnsw.h — an HNSW graph over one SSTable's vectors, built the way Lance
 * 12's MemWAL in-memory index builds it (docs/indexes.md): M neighbors per
 * node on upper levels and 2M on level 0, the neighbor-selection heuristic
 * (a candidate joins only if it is closer to the node than to every
 * neighbor already chosen), reverse edges pruned by the same heuristic,
 * levels drawn as floor(-ln(U) / ln(M)) capped at max_level - 1, node 0 on
 * level 0, and the entry point moved only to a node on a strictly higher
 * level.
 *
 * Owns: the adjacency (ids and distances, sorted by distance, ties by id)
 * and the levels. Borrows the vectors (n x dim float32, row-major), which
 * must outlive the graph.
 *
 * Deterministic: levels come from a splitmix64 stream seeded by
 * params.seed, nodes are inserted one by one in id order, and every sort
 * breaks distance ties by id, so the same vectors and seed give the same
 * graph on every machine with IEEE float32.
 *
 * Memory, fixed before the first insert (levels are drawn up front):
 * mw_hnsw_plan_bytes() = n * (16M + 14) bytes for level 0, node headers,
 * norms and the visited marks, plus (8M + 1) bytes per (node, level >= 1)
 * pair (expected n / (M - 1) pairs), plus 8 * (3 * max(ef, 2M + 1) +
 * 2M * (max_level + 1) + 1) bytes of heaps and scratch. With M = 16: about 290 bytes per vector; 100 000 vectors: 29 MB.
 * The build refuses (-EFBIG) when that exceeds params.max_bytes.
 *
 * Errors: -EINVAL (bad parameters), -EFBIG (over a limit), -ENOMEM.
 */
#ifndef MW_LANCE_HNSW_H
#define MW_LANCE_HNSW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define MW_HNSW_DEFAULT_M 16
/* Lance's MemWAL builds with ef_construction 100. Ours is 200: on 10 000
 * random 128-d vectors (bench_ingest --spread), searched as LanceDB searches
 * an SSTable (k 10, beam 15), 100 left 45 rows not found by their own
 * vector, 200 left 5 (docs/indexes.md). The build costs about 2.2x; the
 * reader takes the value from lance:hnsw and does not use it. */
#define MW_HNSW_DEFAULT_EF_CONSTRUCTION 200
#define MW_HNSW_DEFAULT_MAX_LEVEL 7
#define MW_HNSW_DEFAULT_SEED 100
#define MW_HNSW_MAX_M 64
#define MW_HNSW_MAX_LEVEL 16
#define MW_HNSW_MAX_EF 4096
#define MW_HNSW_MAX_NODES ((uint32_t)1 << 28)
#define MW_HNSW_MAX_DIM 65536
#define MW_HNSW_DEFAULT_MAX_BYTES ((size_t)4 << 30)

typedef enum mw_distance {
  MW_DIST_L2 = 0, /* squared euclidean */
  MW_DIST_COSINE, /* 1 - cos(a, b); 1 when a vector is all zeros */
  MW_DIST_DOT,    /* 1 - a.b (lance-linalg's dot_distance) */
} mw_distance_t;

/* "l2", "cosine", "dot" (the names in lance:index JSON). */
const char *mw_distance_name(mw_distance_t d);
/* 0, or -EINVAL for another name. */
int mw_distance_parse(const char *name, size_t len, mw_distance_t *out);
float mw_distance(mw_distance_t d, const float *a, const float *b, uint32_t dim);

typedef struct mw_hnsw_params {
  uint32_t m;               /* 0 = 16 */
  uint32_t ef_construction; /* 0 = 100 */
  uint16_t max_level;       /* levels 0 .. max_level - 1; 0 = 7 */
  uint64_t seed;            /* 0 = 100 */
  size_t max_bytes;         /* 0 = MW_HNSW_DEFAULT_MAX_BYTES */
} mw_hnsw_params_t;

typedef struct mw_hnsw_link {
  uint32_t id;
  float dist;
} mw_hnsw_link_t;

typedef struct mw_hnsw {
  uint32_t n, dim, m, ef_construction;
  uint16_t max_level;           /* the parameter */
  mw_distance_t dist;
  const float *vecs;            /* borrowed */
  float *norms;                 /* cosine: |v| per node */
  uint8_t *level;               /* per node: its top level */
  uint32_t *upper;              /* per node: first upper block, UINT32_MAX = none */
  mw_hnsw_link_t *links0;       /* n * 2m */
  uint8_t *count0;              /* n */
  mw_hnsw_link_t *links_up;     /* blocks of m, one per (node, level >= 1) */
  uint8_t *count_up;            /* per block */
  uint32_t n_blocks;
  uint32_t entry;               /* a node on the top level */
  uint16_t top;                 /* highest level of any node */
  uint32_t *visited;            /* per node: epoch stamp */
  uint32_t epoch;
  /* scratch: candidate heap (2 * cap), result heap (cap), each level's
   * selection (max_level * 2M), one overflowing list (2M + 1) */
  mw_hnsw_link_t *cand, *res, *sel, *tmp;
  size_t cap;                   /* max(ef_construction, 2M + 1) */
  size_t bytes;                 /* what the plan promised */
} mw_hnsw_t;

/* Bytes the build of n vectors will hold (the bound above), with the
 * levels drawn from the seed. */
size_t mw_hnsw_plan_bytes(uint32_t n, const mw_hnsw_params_t *p);

/* Build the graph of vecs[0 .. n*dim) (n >= 1). g is zeroed first; free
 * with mw_hnsw_free, also after a failure. */
int mw_hnsw_build(mw_hnsw_t *g, const float *vecs, uint32_t n, uint32_t dim, mw_distance_t dist,
                  const mw_hnsw_params_t *p, mw_err_t *err);
void mw_hnsw_free(mw_hnsw_t *g);

/* Neighbors of node id at level lv (sorted by distance). */
const mw_hnsw_link_t *mw_hnsw_links(const mw_hnsw_t *g, uint32_t id, uint16_t lv, uint32_t *count);

/* The k nearest of the graph's vectors to q (beam width ef >= k), sorted by
 * distance: out[0 .. return value). Uses the graph's scratch (not
 * thread-safe). */
int mw_hnsw_search(mw_hnsw_t *g, const float *q, uint32_t k, uint32_t ef, mw_hnsw_link_t *out);

#endif
