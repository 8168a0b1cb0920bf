/*
 * hnsw.c — HNSW graph builder and search (hnsw.h).
 *
 * Layout: level 0 is one array of n * 2M links (id, distance) with a count
 * per node; a node on level L >= 1 owns L consecutive blocks of M links in
 * a second array (upper[id] = its first block). Every list is kept sorted
 * by (distance, id). Levels are drawn for all nodes before any insert, so
 * the number of blocks, and with it every allocation, is known up front.
 *
 * Insert (Lance 12's MemWAL HnswGraph::insert_inner, serial): greedy
 * descent from the entry point to the node's level + 1; then, per level
 * from min(node level, top) down to 0, a beam search of width
 * ef_construction from the previous level's closest neighbor, the
 * heuristic selection of M (2M on level 0) neighbors, and after all levels
 * the reverse edges, each list pruned by the same heuristic when it
 * overflows.
 *
 * Beam search keeps two heaps: results (max-heap, at most ef) and
 * candidates (min-heap). A candidate that fell out of the results can only
 * end the search when popped, so when the candidate heap reaches 2 * ef it
 * is compacted to the entries still inside the results bound: memory stays
 * fixed however far the search walks.
 */
#include "lance/hnsw.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ distances */

const char *mw_distance_name(mw_distance_t d) {
  switch (d) {
    case MW_DIST_L2: return "l2";
    case MW_DIST_COSINE: return "cosine";
    case MW_DIST_DOT: return "dot";
  }
  return "?";
}

int mw_distance_parse(const char *name, size_t len, mw_distance_t *out) {
  assert(out != NULL);
  static const mw_distance_t all[] = {MW_DIST_L2, MW_DIST_COSINE, MW_DIST_DOT};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
    const char *s = mw_distance_name(all[i]);
    if (strlen(s) == len && memcmp(s, name, len) == 0) {
      *out = all[i];
      return 0;
    }
  }
  return -EINVAL;
}

/* Eight partial sums in a fixed order, in a GCC/Clang vector of eight
 * floats: two SSE registers on any x86-64, one AVX register where the
 * distance entry points' AVX2 clone runs (below). The lanes add in the same
 * order either way and there is no fused multiply-add, so the result, and so
 * the index's bytes, are the same on every machine. (Plain loops over an
 * eight-float array were left scalar by GCC 12 at -O2: 80 ns for one
 * 128-d distance, against 8 here.) */
#define LANES 8
typedef float lanes_t __attribute__((vector_size(LANES * sizeof(float))));

/* By pointer, not by value: a 32-byte vector passed or returned by value
 * has another ABI with AVX than without (-Wpsabi). */
static inline void lanes_load(lanes_t *v, const float *p) {
  memcpy(v, p, sizeof *v); /* unaligned: vectors sit at any float offset */
}

static inline float lanes_sum(const lanes_t *acc) {
  float s = 0;
  for (int k = 0; k < LANES; k++) s += (*acc)[k];
  return s;
}

/* One pass for both sums: sq = false gives a·b, sq = true gives |a − b|².
 * Always called with a constant sq, so each caller's copy keeps one loop. */
static inline float lanes_reduce(const float *a, const float *b, uint32_t dim, bool sq) {
  lanes_t acc = {0};
  uint32_t i = 0;
  for (; i + LANES <= dim; i += LANES) {
    lanes_t x, y;
    lanes_load(&x, a + i);
    lanes_load(&y, b + i);
    if (sq) x -= y, y = x;
    acc += x * y;
  }
  float s = lanes_sum(&acc);
  for (; i < dim; i++) {
    float x = a[i], y = b[i];
    if (sq) x -= y, y = x;
    s += x * y;
  }
  return s;
}

static inline float dot(const float *a, const float *b, uint32_t dim) { return lanes_reduce(a, b, dim, false); }

static inline float l2(const float *a, const float *b, uint32_t dim) { return lanes_reduce(a, b, dim, true); }

/* Where the CPU has AVX2 the eight lanes run in one register: the distance
 * entry points are cloned and glibc's ifunc picks the clone at load time
 * (dot() and l2() are inlined into each clone). No FMA clone: a fused
 * multiply-add rounds once where the baseline rounds twice. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define MW_DIST_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define MW_DIST_CLONES
#endif

static float finite_or_inf(float d) { return isnan(d) ? INFINITY : d; }

static float cosine_norms(float ab, float na, float nb) {
  return na == 0 || nb == 0 ? 1.0f : 1.0f - ab / (na * nb);
}

MW_DIST_CLONES float mw_distance(mw_distance_t d, const float *a, const float *b, uint32_t dim) {
  switch (d) {
    case MW_DIST_L2: return finite_or_inf(l2(a, b, dim));
    case MW_DIST_COSINE:
      return finite_or_inf(cosine_norms(dot(a, b, dim), sqrtf(dot(a, a, dim)), sqrtf(dot(b, b, dim))));
    case MW_DIST_DOT: return finite_or_inf(1.0f - dot(a, b, dim));
  }
  return INFINITY;
}

/* Distance from query q (norm qn, for cosine) to node id. */
MW_DIST_CLONES static float dq(const mw_hnsw_t *g, const float *q, float qn, uint32_t id) {
  const float *v = g->vecs + (size_t)id * g->dim;
  if (g->dist == MW_DIST_COSINE) return finite_or_inf(cosine_norms(dot(q, v, g->dim), qn, g->norms[id]));
  return mw_distance(g->dist, q, v, g->dim);
}

static float dnodes(const mw_hnsw_t *g, uint32_t a, uint32_t b) {
  assert(g != NULL);
  return dq(g, g->vecs + (size_t)a * g->dim, g->norms[a], b);
}

/* ------------------------------------------------------------ levels */

static uint64_t splitmix64(uint64_t *s) {
  assert(s != NULL);
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static void params_resolve(const mw_hnsw_params_t *in, mw_hnsw_params_t *p) {
  assert(p != NULL);
  *p = in ? *in : (mw_hnsw_params_t){0};
  if (p->m == 0) p->m = MW_HNSW_DEFAULT_M;
  if (p->ef_construction == 0) p->ef_construction = MW_HNSW_DEFAULT_EF_CONSTRUCTION;
  if (p->max_level == 0) p->max_level = MW_HNSW_DEFAULT_MAX_LEVEL;
  if (p->seed == 0) p->seed = MW_HNSW_DEFAULT_SEED;
  if (p->max_bytes == 0) p->max_bytes = MW_HNSW_DEFAULT_MAX_BYTES;
}

/* Node levels from the seed: node 0 on level 0, then floor(-ln U / ln M). */
static uint8_t draw_level(uint64_t *s, uint32_t id, const mw_hnsw_params_t *p) {
  assert(p != NULL);
  uint64_t x = splitmix64(s);
  if (id == 0) return 0;
  double u = ((double)(x >> 11) + 1.0) * (1.0 / 9007199254740992.0); /* (0, 1] */
  double l = floor(-log(u) / log((double)p->m));
  return (uint8_t)(l < (double)(p->max_level - 1) ? l : (double)(p->max_level - 1));
}

static size_t heap_cap(const mw_hnsw_params_t *p) {
  assert(p != NULL);
  size_t cap = p->ef_construction;
  return cap > 2 * (size_t)p->m + 1 ? cap : 2 * (size_t)p->m + 1;
}

static size_t plan(uint32_t n, const mw_hnsw_params_t *p, uint64_t *blocks) {
  assert(p != NULL);
  assert(blocks != NULL);
  uint64_t s = p->seed, b = 0;
  for (uint32_t i = 0; i < n; i++) b += draw_level(&s, i, p);
  *blocks = b;
  size_t per_node = 16 * (size_t)p->m + 14;
  size_t scratch = (3 * heap_cap(p) + (size_t)(p->max_level + 1) * 2 * p->m + 1) * sizeof(mw_hnsw_link_t);
  return (size_t)n * per_node + (size_t)b * (8 * (size_t)p->m + 1) + scratch;
}

size_t mw_hnsw_plan_bytes(uint32_t n, const mw_hnsw_params_t *in) {
  mw_hnsw_params_t p;
  params_resolve(in, &p);
  uint64_t blocks;
  return plan(n, &p, &blocks);
}

/* ------------------------------------------------------------ adjacency */

static uint32_t limit_of(const mw_hnsw_t *g, uint16_t lv) { return lv == 0 ? 2 * g->m : g->m; }

static mw_hnsw_link_t *links_at(const mw_hnsw_t *g, uint32_t id, uint16_t lv, uint8_t **count) {
  assert(id < g->n);
  assert(lv <= g->level[id]);
  if (lv == 0) {
    *count = &g->count0[id];
    return g->links0 + (size_t)id * 2 * g->m;
  }
  uint32_t b = g->upper[id] + (uint32_t)(lv - 1);
  *count = &g->count_up[b];
  return g->links_up + (size_t)b * g->m;
}

const mw_hnsw_link_t *mw_hnsw_links(const mw_hnsw_t *g, uint32_t id, uint16_t lv, uint32_t *count) {
  assert(g != NULL);
  assert(count != NULL);
  if (id >= g->n || lv > g->level[id]) {
    *count = 0;
    return NULL;
  }
  uint8_t *c;
  const mw_hnsw_link_t *l = links_at(g, id, lv, &c);
  *count = *c;
  return l;
}

static bool less(mw_hnsw_link_t a, mw_hnsw_link_t b) {
  return a.dist < b.dist || (a.dist == b.dist && a.id < b.id);
}

static int cmp_link(const void *pa, const void *pb) {
  const mw_hnsw_link_t *a = pa, *b = pb;
  return less(*a, *b) ? -1 : less(*b, *a) ? 1 : 0;
}

/* Heuristic selection from sorted cand[0..nc): at most `limit`, each closer
 * to the node than to every one chosen before it. */
static uint32_t select_links(const mw_hnsw_t *g, const mw_hnsw_link_t *cand, uint32_t nc, uint32_t limit,
                             mw_hnsw_link_t *out) {
  if (nc <= limit) {
    memmove(out, cand, nc * sizeof *out);
    return nc;
  }
  uint32_t sel = 0;
  for (uint32_t i = 0; i < nc && sel < limit; i++) {
    bool keep = true;
    for (uint32_t j = 0; j < sel && keep; j++) keep = cand[i].dist < dnodes(g, cand[i].id, out[j].id);
    if (keep) out[sel++] = cand[i];
  }
  assert(sel >= 1);
  return sel;
}

/* Reverse edge target -> nb at level lv, pruning an overflowing list. As
 * Lance's builder (its `cutoff`): a full list takes the edge only when it is
 * nearer than the list's farthest neighbor; otherwise the heuristic would
 * run over the list and the edge for nothing but, at most, to drop the edge
 * itself. Lists stay sorted nearest first, so the farthest is the last. */
static void add_reverse(mw_hnsw_t *g, uint32_t target, uint32_t nb, float d, uint16_t lv) {
  uint8_t *cnt;
  mw_hnsw_link_t *l = links_at(g, target, lv, &cnt);
  assert(*cnt <= limit_of(g, lv));
  if (*cnt == limit_of(g, lv) && !less((mw_hnsw_link_t){nb, d}, l[*cnt - 1])) return;
  for (uint32_t i = 0; i < *cnt; i++)
    if (l[i].id == nb) return;
  mw_hnsw_link_t *tmp = g->tmp;
  memcpy(tmp, l, *cnt * sizeof *tmp);
  tmp[*cnt] = (mw_hnsw_link_t){nb, d};
  uint32_t n = *cnt + 1u;
  qsort(tmp, n, sizeof *tmp, cmp_link);
  *cnt = (uint8_t)select_links(g, tmp, n, limit_of(g, lv), l);
  assert(*cnt <= limit_of(g, lv));
}

/* ------------------------------------------------------------ heaps */

/* Binary heap of links; max = true keeps the worst on top. */
typedef struct heap {
  mw_hnsw_link_t *a;
  size_t n, cap;
  bool max;
} heap_t;

static bool above(const heap_t *h, size_t i, size_t j) {
  assert(h != NULL);
  return h->max ? less(h->a[j], h->a[i]) : less(h->a[i], h->a[j]);
}

static void heap_swap(heap_t *h, size_t i, size_t j) {
  assert(h != NULL);
  mw_hnsw_link_t t = h->a[i];
  h->a[i] = h->a[j], h->a[j] = t;
}

static void sift_down(heap_t *h, size_t i) {
  assert(h != NULL);
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, b = i;
    if (l < h->n && above(h, l, b)) b = l;
    if (r < h->n && above(h, r, b)) b = r;
    if (b == i) return;
    heap_swap(h, i, b);
    i = b;
  }
}

static void heap_push(heap_t *h, mw_hnsw_link_t x) {
  assert(h->n < h->cap);
  size_t i = h->n++;
  h->a[i] = x;
  while (i > 0 && above(h, i, (i - 1) / 2)) {
    heap_swap(h, i, (i - 1) / 2);
    i = (i - 1) / 2;
  }
}

static mw_hnsw_link_t heap_pop(heap_t *h) {
  assert(h->n > 0);
  mw_hnsw_link_t top = h->a[0];
  h->a[0] = h->a[--h->n];
  sift_down(h, 0);
  return top;
}

/* Keep only the candidates not worse than `bound`, then re-heapify. */
static void heap_compact(heap_t *h, mw_hnsw_link_t bound) {
  assert(h != NULL);
  size_t k = 0;
  for (size_t i = 0; i < h->n; i++)
    if (!less(bound, h->a[i])) h->a[k++] = h->a[i];
  h->n = k;
  for (size_t i = k / 2; i-- > 0;) sift_down(h, i);
}

/* ------------------------------------------------------------ search */

static void visit_reset(mw_hnsw_t *g) {
  assert(g != NULL);
  if (++g->epoch == 0) {
    memset(g->visited, 0, (size_t)g->n * sizeof *g->visited);
    g->epoch = 1;
  }
}

/* Beam search of width ef at level lv from ep; the results, sorted, in
 * g->res[0 .. return value). */
static uint32_t beam(mw_hnsw_t *g, const float *q, float qn, mw_hnsw_link_t ep, uint16_t lv, size_t ef) {
  assert(ef >= 1);
  assert(ef <= g->cap);
  heap_t cand = {g->cand, 0, 2 * g->cap, false}, res = {g->res, 0, ef, true};
  visit_reset(g);
  g->visited[ep.id] = g->epoch;
  heap_push(&cand, ep);
  heap_push(&res, ep);
  while (cand.n > 0) {
    mw_hnsw_link_t c = heap_pop(&cand);
    if (res.n == ef && less(res.a[0], c)) break;
    uint8_t *cnt;
    const mw_hnsw_link_t *l = links_at(g, c.id, lv, &cnt);
    for (uint32_t i = 0; i < *cnt; i++) {
      uint32_t nb = l[i].id;
      if (g->visited[nb] == g->epoch) continue;
      g->visited[nb] = g->epoch;
      mw_hnsw_link_t x = {nb, dq(g, q, qn, nb)};
      if (res.n == ef && !less(x, res.a[0])) continue;
      if (res.n == ef) heap_pop(&res);
      heap_push(&res, x);
      if (cand.n == cand.cap) heap_compact(&cand, res.a[0]);
      heap_push(&cand, x);
    }
  }
  qsort(res.a, res.n, sizeof *res.a, cmp_link);
  return (uint32_t)res.n;
}

/* Greedy descent at level lv: move to the closest better neighbor. */
static mw_hnsw_link_t greedy(const mw_hnsw_t *g, const float *q, float qn, mw_hnsw_link_t cur, uint16_t lv) {
  assert(q != NULL);
  assert(cur.id < g->n);
  for (bool moved = true; moved;) {
    moved = false;
    uint8_t *cnt;
    const mw_hnsw_link_t *l = links_at(g, cur.id, lv, &cnt);
    mw_hnsw_link_t best = cur;
    for (uint32_t i = 0; i < *cnt; i++) {
      mw_hnsw_link_t x = {l[i].id, dq(g, q, qn, l[i].id)};
      if (less(x, best)) best = x;
    }
    if (best.id != cur.id) cur = best, moved = true;
  }
  return cur;
}

int mw_hnsw_search(mw_hnsw_t *g, const float *q, uint32_t k, uint32_t ef, mw_hnsw_link_t *out) {
  assert(g != NULL);
  assert(q != NULL);
  assert(out != NULL);
  if (g->n == 0 || k == 0) return 0;
  size_t width = ef > k ? ef : k;
  if (width > g->cap) width = g->cap;
  float qn = g->dist == MW_DIST_COSINE ? sqrtf(dot(q, q, g->dim)) : 0;
  mw_hnsw_link_t ep = {g->entry, dq(g, q, qn, g->entry)};
  for (uint16_t lv = g->top; lv >= 1; lv--) ep = greedy(g, q, qn, ep, lv);
  uint32_t got = beam(g, q, qn, ep, 0, width);
  if (got > k) got = k;
  memcpy(out, g->res, got * sizeof *out);
  return (int)got;
}

/* ------------------------------------------------------------ build */

static void insert(mw_hnsw_t *g, uint32_t id) {
  assert(g != NULL);
  uint16_t lvl = g->level[id];
  if (id == 0) {
    g->entry = 0, g->top = lvl;
    return;
  }
  const float *q = g->vecs + (size_t)id * g->dim;
  float qn = g->norms[id];
  mw_hnsw_link_t ep = {g->entry, dq(g, q, qn, g->entry)};
  for (uint16_t lv = g->top; lv > lvl; lv--) ep = greedy(g, q, qn, ep, lv);
  uint16_t from = lvl < g->top ? lvl : g->top;
  for (int lv = from; lv >= 0; lv--) {
    uint32_t got = beam(g, q, qn, ep, (uint16_t)lv, g->ef_construction), k = 0;
    for (uint32_t i = 0; i < got; i++) /* drop the node itself */
      if (g->res[i].id != id) g->res[k++] = g->res[i];
    uint8_t *cnt;
    mw_hnsw_link_t *mine = links_at(g, id, (uint16_t)lv, &cnt);
    *cnt = (uint8_t)select_links(g, g->res, k, limit_of(g, (uint16_t)lv), mine);
    if (*cnt > 0) ep = mine[0];
  }
  for (int lv = 0; lv <= from; lv++) {
    uint8_t *cnt;
    const mw_hnsw_link_t *mine = links_at(g, id, (uint16_t)lv, &cnt);
    memcpy(g->sel, mine, *cnt * sizeof *mine); /* add_reverse may not touch mine, but copy anyway */
    uint32_t n = *cnt;
    for (uint32_t i = 0; i < n; i++) add_reverse(g, g->sel[i].id, id, g->sel[i].dist, (uint16_t)lv);
  }
  if (lvl > g->top) g->entry = id, g->top = lvl;
}

static int alloc_graph(mw_hnsw_t *g, const mw_hnsw_params_t *p, uint64_t blocks) {
  assert(p != NULL);
  size_t n = g->n;
  g->norms = calloc(n, sizeof *g->norms);
  g->level = calloc(n, 1);
  g->upper = malloc(n * sizeof *g->upper);
  g->links0 = malloc(n * 2 * p->m * sizeof *g->links0);
  g->count0 = calloc(n, 1);
  g->links_up = malloc((blocks ? blocks : 1) * p->m * sizeof *g->links_up);
  g->count_up = calloc(blocks ? blocks : 1, 1);
  g->visited = calloc(n, sizeof *g->visited);
  g->cap = heap_cap(p);
  g->cand = malloc((3 * g->cap + (size_t)(p->max_level + 1) * 2 * p->m + 1) * sizeof *g->cand);
  if (!g->norms || !g->level || !g->upper || !g->links0 || !g->count0 || !g->links_up || !g->count_up ||
      !g->visited || !g->cand)
    return -ENOMEM;
  g->res = g->cand + 2 * g->cap;
  g->sel = g->res + g->cap;
  g->tmp = g->sel + (size_t)p->max_level * 2 * p->m;
  return 0;
}

int mw_hnsw_build(mw_hnsw_t *g, const float *vecs, uint32_t n, uint32_t dim, mw_distance_t dist,
                  const mw_hnsw_params_t *in, mw_err_t *err) {
  assert(g != NULL);
  assert(vecs != NULL);
  memset(g, 0, sizeof *g);
  mw_hnsw_params_t p;
  params_resolve(in, &p);
  if (n == 0 || n > MW_HNSW_MAX_NODES || dim == 0 || dim > MW_HNSW_MAX_DIM)
    return mw_err_set(err, -EINVAL, "hnsw: %u vectors of dimension %u (limits %u, %d)", n, dim,
                      MW_HNSW_MAX_NODES, MW_HNSW_MAX_DIM);
  if (p.m < 2 || p.m > MW_HNSW_MAX_M || p.ef_construction < p.m || p.ef_construction > MW_HNSW_MAX_EF ||
      p.max_level > MW_HNSW_MAX_LEVEL)
    return mw_err_set(err, -EINVAL, "hnsw: m %u, ef_construction %u, max_level %u out of range", p.m,
                      p.ef_construction, p.max_level);
  uint64_t blocks;
  size_t bytes = plan(n, &p, &blocks);
  if (bytes > p.max_bytes || blocks >= UINT32_MAX)
    return mw_err_set(err, -EFBIG, "hnsw: %u vectors need %zu bytes (limit %zu)", n, bytes, p.max_bytes);
  *g = (mw_hnsw_t){.n = n, .dim = dim, .m = p.m, .ef_construction = p.ef_construction,
                   .max_level = p.max_level, .dist = dist, .vecs = vecs, .bytes = bytes};
  if (alloc_graph(g, &p, blocks) < 0) return mw_err_set(err, -ENOMEM, "hnsw: %zu bytes", bytes);
  uint64_t s = p.seed;
  for (uint32_t i = 0; i < n; i++) {
    g->level[i] = draw_level(&s, i, &p);
    g->upper[i] = g->level[i] ? g->n_blocks : UINT32_MAX;
    g->n_blocks += g->level[i];
    if (dist == MW_DIST_COSINE) g->norms[i] = sqrtf(dot(vecs + (size_t)i * dim, vecs + (size_t)i * dim, dim));
  }
  assert(g->n_blocks == blocks);
  for (uint32_t i = 0; i < n; i++) insert(g, i);
  return 0;
}

void mw_hnsw_free(mw_hnsw_t *g) {
  if (g == NULL) return;
  free(g->norms);
  free(g->level);
  free(g->upper);
  free(g->links0);
  free(g->count0);
  free(g->links_up);
  free(g->count_up);
  free(g->visited);
  free(g->cand);
  memset(g, 0, sizeof *g);
}
