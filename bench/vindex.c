/*
 * vindex.c — bench_vindex: the per-SSTable vector index build (issue 27,
 * docs/indexes.md) on random vectors in [-1, 1]: wall and CPU time of
 * mw_vindex_build (quantizer, HNSW graph, both files), the memory bound it
 * states, the files' size, and recall@10 of mw_hnsw_search against brute
 * force for 100 random queries at ef 10, 40 and 100 (over the float graph;
 * LanceDB searches the SQ codes).
 *
 *   bench_vindex [ROWS DIM [DISTANCE]]...     default: 10000 128 l2
 *
 * One line per (rows, dim, distance). Single-threaded, as the flush runs it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lance/hnsw.h"
#include "lance/vindex_file.h"

static double now_s(int clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static float *randv(size_t n, uint64_t s) {
  float *v = malloc(n * sizeof *v);
  if (v == NULL) exit(1);
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    v[i] = (float)((double)(s >> 40) / 16777216.0 * 2 - 1);
  }
  return v;
}

static double recall(mw_hnsw_t *g, const float *vecs, uint32_t n, uint32_t dim, const float *qs, uint32_t nq,
                     uint32_t ef) {
  uint32_t hits = 0;
  for (uint32_t q = 0; q < nq; q++) {
    mw_hnsw_link_t got[10], best[10];
    int m = mw_hnsw_search(g, qs + (size_t)q * dim, 10, ef, got);
    for (int i = 0; i < 10; i++) best[i] = (mw_hnsw_link_t){UINT32_MAX, INFINITY};
    for (uint32_t i = 0; i < n; i++) {
      float x = mw_distance(g->dist, qs + (size_t)q * dim, vecs + (size_t)i * dim, dim);
      if (x >= best[9].dist) continue;
      int j = 9;
      for (; j > 0 && best[j - 1].dist > x; j--) best[j] = best[j - 1];
      best[j] = (mw_hnsw_link_t){i, x};
    }
    for (int i = 0; i < m; i++)
      for (int j = 0; j < 10; j++) hits += got[i].id == best[j].id;
  }
  return (double)hits / (nq * 10.0);
}

static void one(uint32_t n, uint32_t dim, mw_distance_t dist) {
  float *vecs = randv((size_t)n * dim, 0x1234567 + n), *qs = randv((size_t)100 * dim, 0x7654321);
  mw_vindex_input_t in = {.vecs = vecs, .rows = n, .dim = dim, .dist = dist};
  mw_vindex_t v;
  mw_err_t err = {0};
  double t0 = now_s(CLOCK_MONOTONIC), c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
  if (mw_vindex_build(&in, &v, &err) < 0) {
    fprintf(stderr, "build: %s\n", err.msg);
    exit(1);
  }
  double wall = now_s(CLOCK_MONOTONIC) - t0, cpu = now_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
  mw_hnsw_t g;
  if (mw_hnsw_build(&g, vecs, n, dim, dist, NULL, &err) < 0) exit(1);
  printf("%7u x %4u %-6s build %7.2f s (CPU %7.2f s, %6.0f vectors per CPU-s)  memory bound %7.1f MB  files %7.1f MB"
         "  recall@10 ef10 %.3f ef40 %.3f ef100 %.3f\n",
         n, dim, mw_distance_name(dist), wall, cpu, n / cpu, (double)v.build_bytes / 1e6,
         (double)(v.index_idx.len + v.aux_idx.len) / 1e6, recall(&g, vecs, n, dim, qs, 100, 10),
         recall(&g, vecs, n, dim, qs, 100, 40), recall(&g, vecs, n, dim, qs, 100, 100));
  fflush(stdout);
  mw_hnsw_free(&g);
  mw_vindex_free(&v);
  free(vecs);
  free(qs);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    one(10000, 128, MW_DIST_L2);
    return 0;
  }
  for (int i = 1; i + 1 < argc; i += 3) {
    mw_distance_t d = MW_DIST_L2;
    if (i + 2 < argc && mw_distance_parse(argv[i + 2], strlen(argv[i + 2]), &d) < 0) {
      fprintf(stderr, "distance: l2, cosine or dot\n");
      return 2;
    }
    one((uint32_t)strtoul(argv[i], NULL, 10), (uint32_t)strtoul(argv[i + 1], NULL, 10), d);
  }
  return 0;
}
