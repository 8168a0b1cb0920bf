/*
 * vindex_check.c — read and check a pair of per-SSTable vector index files
 * (mw_vindex_check in vindex_file.h), ours or LanceDB's.
 *
 * Design: both files are decoded whole by the data-file reader (datafile_read*.c,
 * FullZip lists included); the schema metadata values are small JSON texts
 * of a fixed shape, read by key with a few bounded scanners rather than a
 * JSON parser; the IVF global buffer by a protobuf wire walk. The graph is
 * then checked as Lance's HNSW loader and search rely on it: level_offsets
 * cut index.idx's rows into levels, level 0 holds every node in id order,
 * and every neighbor of a node on level l is itself on level l.
 * mw_vindex_check_rows then holds a checked pair against the column it
 * indexes (verify and the flush's read-back: every vector row named once).
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lance/datafile.h"
#include "lance/vindex_file.h"

#define JSON_MAX_BYTES 4096

/* ------------------------------------------------------------ JSON by key */

/* The text after `"key":` in s, or NULL. */
static const char *json_at(const char *s, const char *key) {
  assert(s != NULL);
  assert(key != NULL);
  char pat[64];
  size_t kl = strlen(key);
  if (kl + 4 > sizeof pat) return NULL;
  pat[0] = '"';
  memcpy(pat + 1, key, kl);
  memcpy(pat + 1 + kl, "\":", 3);
  const char *p = strstr(s, pat);
  return p ? p + kl + 3 : NULL;
}

static int json_double(const char *s, const char *key, double *out) {
  assert(out != NULL);
  const char *p = json_at(s, key);
  if (p == NULL) return -EBADMSG;
  char *end;
  *out = strtod(p, &end);
  return end == p ? -EBADMSG : 0;
}

static int json_u32(const char *s, const char *key, uint32_t *out) {
  assert(out != NULL);
  double d;
  if (json_double(s, key, &d) < 0 || d < 0 || d > UINT32_MAX || d != (double)(uint32_t)d) return -EBADMSG;
  *out = (uint32_t)d;
  return 0;
}

/* `"key":"text"` -> out (NUL-terminated, at most cap - 1 bytes). */
static int json_str(const char *s, const char *key, char *out, size_t cap) {
  assert(out != NULL);
  const char *p = json_at(s, key);
  if (p == NULL || *p != '"') return -EBADMSG;
  const char *e = strchr(p + 1, '"');
  if (e == NULL || (size_t)(e - p - 1) >= cap) return -EBADMSG;
  memcpy(out, p + 1, (size_t)(e - p - 1));
  out[e - p - 1] = '\0';
  return 0;
}

static int json_u32_array(const char *s, const char *key, uint32_t *out, size_t cap, size_t *n) {
  assert(out != NULL);
  assert(n != NULL);
  const char *p = json_at(s, key);
  if (p == NULL || *p != '[') return -EBADMSG;
  *n = 0;
  for (p++; *p != ']';) {
    char *end;
    unsigned long long v = strtoull(p, &end, 10);
    if (end == p || v > UINT32_MAX || *n == cap) return -EBADMSG;
    out[(*n)++] = (uint32_t)v;
    p = end;
    if (*p == ',') p++;
    else if (*p != ']') return -EBADMSG;
  }
  return 0;
}

/* `["<escaped JSON>"]` -> the JSON text, unescaped, into out[cap]. */
static int json_one_string_array(const char *v, char *out, size_t cap) {
  assert(out != NULL);
  size_t n = strlen(v);
  if (n < 4 || memcmp(v, "[\"", 2) != 0 || memcmp(v + n - 2, "\"]", 2) != 0) return -EBADMSG;
  size_t k = 0;
  for (size_t i = 2; i < n - 2; i++) {
    if (v[i] == '\\') i++;
    else if (v[i] == '"') return -EBADMSG;
    if (i >= n - 2 || k + 1 >= cap) return -EBADMSG;
    out[k++] = v[i];
  }
  out[k] = '\0';
  return 0;
}

static const char *meta_text(const mw_datafile_t *f, const char *key) {
  assert(f != NULL);
  const mw_kv_t *kv = mw_kvs_get(&f->schema.meta, key);
  if (kv == NULL || kv->value_len > JSON_MAX_BYTES || memchr(kv->value, 0, kv->value_len)) return NULL;
  return (const char *)kv->value;
}

/* ------------------------------------------------------------ IVF protobuf */

typedef struct wire {
  const uint8_t *p;
  size_t n, at;
} wire_t;

static int wire_varint(wire_t *w, uint64_t *v) {
  assert(w != NULL);
  assert(v != NULL);
  *v = 0;
  for (unsigned s = 0; s < 64; s += 7) {
    if (w->at >= w->n) return -EBADMSG;
    uint8_t b = w->p[w->at++];
    *v |= (uint64_t)(b & 0x7f) << s;
    if (!(b & 0x80)) return 0;
  }
  return -EBADMSG;
}

/* Next field: number, and for length-delimited fields a sub-wire; any other
 * field leaves *sub empty, so a caller that expects bytes where the file has
 * a varint sees no bytes (before, *sub kept the previous field's, or was
 * never set). */
static int wire_field(wire_t *w, uint32_t *num, uint64_t *v, wire_t *sub) {
  *sub = (wire_t){NULL, 0, 0};
  uint64_t key;
  int rc = wire_varint(w, &key);
  if (rc < 0) return rc;
  *num = (uint32_t)(key >> 3);
  switch (key & 7) {
    case 0: return wire_varint(w, v);
    case 2:
      if ((rc = wire_varint(w, v)) < 0 || *v > w->n - w->at) return -EBADMSG;
      *sub = (wire_t){w->p + w->at, (size_t)*v, 0};
      w->at += (size_t)*v;
      return 0;
    default: return -EBADMSG;
  }
}

/* A packed varint list of exactly `want` values: out[]. */
static int wire_packed(wire_t w, uint64_t *out, size_t want) {
  size_t k = 0;
  while (w.at < w.n) {
    uint64_t v;
    if (wire_varint(&w, &v) < 0 || k == want) return -EBADMSG;
    out[k++] = v;
  }
  return k == want ? 0 : -EBADMSG;
}

static int ivf_tensor(wire_t t, uint32_t dim) {
  uint32_t num;
  uint64_t v, shape[2];
  wire_t sub;
  bool type = false, shp = false, data = false;
  while (t.at < t.n) {
    if (wire_field(&t, &num, &v, &sub) < 0) return -EBADMSG;
    if (num == 1) type = v == 2; /* FLOAT32 */
    if (num == 2) shp = wire_packed(sub, shape, 2) == 0 && shape[0] == 1 && shape[1] == dim;
    if (num == 3) {
      data = sub.n == (size_t)dim * 4;
      for (size_t i = 0; data && i < sub.n; i++) data = sub.p[i] == 0;
    }
  }
  return type && shp && data ? 0 : -EBADMSG;
}

/* pb.Ivf: offsets [0], lengths [rows], a [1, dim] zero FLOAT32 centroid. */
static int ivf_check(const uint8_t *p, size_t n, uint64_t rows, uint32_t dim) {
  assert(p != NULL || n == 0);
  wire_t w = {p, n, 0}, sub;
  uint32_t num;
  uint64_t v, one;
  bool off = false, len = false, cen = false;
  while (w.at < w.n) {
    if (wire_field(&w, &num, &v, &sub) < 0) return -EBADMSG;
    if (num == 2) off = wire_packed(sub, &one, 1) == 0 && one == 0;
    if (num == 3) len = wire_packed(sub, &one, 1) == 0 && one == rows;
    if (num == 4) cen = ivf_tensor(sub, dim) == 0;
  }
  return off && len && cen ? 0 : -EBADMSG;
}

/* ------------------------------------------------------------ the files */

typedef struct pair {
  mw_datafile_t fi, fa;
  mw_batch_t bi, ba;
  bool oi, oa, bio, bao;
  char json[JSON_MAX_BYTES + 1];
} pair_t;

static bool field_is(const mw_schema_t *s, size_t i, const char *name, mw_type_t t) {
  assert(s != NULL);
  assert(name != NULL);
  return i < s->n_fields && strcmp(s->fields[i].name, name) == 0 && s->fields[i].type == t;
}

static int schemas_check(const pair_t *p, mw_vindex_info_t *info, mw_err_t *err) {
  assert(info != NULL);
  const mw_schema_t *si = &p->fi.schema, *sa = &p->fa.schema;
  if (si->n_fields != 3 || !field_is(si, 0, "__vector_id", MW_T_UINT32) || !field_is(si, 1, "__neighbors", MW_T_LIST) ||
      !field_is(si, 2, "_distance", MW_T_LIST) || si->fields[1].children[0].type != MW_T_UINT32 ||
      si->fields[2].children[0].type != MW_T_FLOAT32)
    return mw_err_set(err, -EBADMSG, "index.idx: schema is not (__vector_id uint32, __neighbors list<uint32>, _distance list<float>)");
  if (sa->n_fields != 2 || !field_is(sa, 0, "_rowid", MW_T_UINT64) || !field_is(sa, 1, "__sq_code", MW_T_FSL) ||
      sa->fields[1].item_type != MW_T_UINT8)
    return mw_err_set(err, -EBADMSG, "auxiliary.idx: schema is not (_rowid uint64, __sq_code fixed_size_list<uint8, dim>)");
  info->dim = (uint32_t)sa->fields[1].fsl_dim;
  if (p->fi.n_rows > MW_VINDEX_MAX_ROWS * MW_HNSW_MAX_LEVEL || p->fa.n_rows > MW_VINDEX_MAX_ROWS)
    return mw_err_set(err, -EFBIG, "index files: %llu and %llu rows", (unsigned long long)p->fi.n_rows, (unsigned long long)p->fa.n_rows);
  info->graph_rows = (uint32_t)p->fi.n_rows, info->nodes = (uint32_t)p->fa.n_rows;
  return 0;
}

static int index_meta_check(pair_t *p, mw_vindex_info_t *info, mw_err_t *err) {
  assert(p != NULL);
  assert(info != NULL);
  const char *idx = meta_text(&p->fi, "lance:index"), *ivf = meta_text(&p->fi, "lance:ivf"), *h = meta_text(&p->fi, "lance:hnsw");
  char type[32], dist[16];
  if (idx == NULL || json_str(idx, "type", type, sizeof type) < 0 || strcmp(type, MW_VINDEX_TYPE) != 0 ||
      json_str(idx, "distance_type", dist, sizeof dist) < 0 || mw_distance_parse(dist, strlen(dist), &info->dist) < 0)
    return mw_err_set(err, -EBADMSG, "index.idx: lance:index is not {\"type\":\"%s\",\"distance_type\":<l2|cosine|dot>}", MW_VINDEX_TYPE);
  if (ivf == NULL || strcmp(ivf, "1") != 0 || p->fi.n_global_buffers < 2)
    return mw_err_set(err, -EBADMSG, "index.idx: lance:ivf does not name global buffer 1");
  uint32_t ml = 0;
  size_t n = 0;
  if (h == NULL || json_one_string_array(h, p->json, sizeof p->json) < 0 || json_u32(p->json, "entry_point", &info->entry_point) < 0 ||
      json_u32(p->json, "max_level", &ml) < 0 || json_u32(p->json, "m", &info->m) < 0 ||
      json_u32(p->json, "ef_construction", &info->ef_construction) < 0 ||
      json_u32_array(p->json, "level_offsets", info->level_offsets, MW_HNSW_MAX_LEVEL + 1, &n) < 0)
    return mw_err_set(err, -EBADMSG, "index.idx: lance:hnsw is not [\"{entry_point, params{max_level, m, ef_construction}, level_offsets}\"]");
  if (ml == 0 || ml > MW_HNSW_MAX_LEVEL || n != ml + 1 || info->m == 0 || info->m > MW_HNSW_MAX_M)
    return mw_err_set(err, -EBADMSG, "index.idx: lance:hnsw max_level %u with %zu level offsets, m %u", ml, n, info->m);
  info->max_level = (uint16_t)ml;
  for (size_t l = 0; l < ml; l++)
    if (info->level_offsets[l] > info->level_offsets[l + 1])
      return mw_err_set(err, -EBADMSG, "index.idx: level_offsets decrease at level %zu", l);
  if (info->level_offsets[0] != 0 || info->level_offsets[ml] != info->graph_rows || info->level_offsets[1] != info->nodes)
    return mw_err_set(err, -EBADMSG, "index.idx: level_offsets [0, %u, .., %u] for %u rows and %u nodes", info->level_offsets[1],
                      info->level_offsets[ml], info->graph_rows, info->nodes);
  return 0;
}

static int aux_meta_check(pair_t *p, mw_vindex_info_t *info, mw_err_t *err) {
  assert(info != NULL);
  const char *dt = meta_text(&p->fa, "distance_type"), *ivf = meta_text(&p->fa, "lance:ivf");
  const char *sq = meta_text(&p->fa, "lance:sq"), *st = meta_text(&p->fa, "storage_metadata");
  mw_distance_t d;
  if (dt == NULL || mw_distance_parse(dt, strlen(dt), &d) < 0 || d != info->dist)
    return mw_err_set(err, -EBADMSG, "auxiliary.idx: distance_type is not index.idx's '%s'", mw_distance_name(info->dist));
  if (ivf == NULL || strcmp(ivf, "1") != 0 || p->fa.n_global_buffers < 2)
    return mw_err_set(err, -EBADMSG, "auxiliary.idx: lance:ivf does not name global buffer 1");
  uint32_t dim = 0, bits = 0;
  if (sq == NULL || json_u32(sq, "dim", &dim) < 0 || json_u32(sq, "num_bits", &bits) < 0 || dim != info->dim || bits != 8 ||
      json_double(sq, "start", &info->bounds.lo) < 0 || json_double(sq, "end", &info->bounds.hi) < 0 ||
      !(info->bounds.lo <= info->bounds.hi))
    return mw_err_set(err, -EBADMSG, "auxiliary.idx: lance:sq is not {\"dim\":%u,\"num_bits\":8,\"bounds\":{start <= end}}", info->dim);
  if (st == NULL || json_one_string_array(st, p->json, sizeof p->json) < 0 || strcmp(p->json, sq) != 0)
    return mw_err_set(err, -EBADMSG, "auxiliary.idx: storage_metadata is not [lance:sq as a string]");
  return 0;
}

static int ivf_buffers_check(const pair_t *p, const mw_vindex_info_t *info, mw_err_t *err) {
  assert(p != NULL);
  assert(info != NULL);
  const uint8_t *b;
  size_t n;
  int rc = mw_datafile_global_buffer(&p->fi, 1, &b, &n, err);
  if (rc < 0) return rc;
  if (ivf_check(b, n, info->graph_rows, info->dim) < 0)
    return mw_err_set(err, -EBADMSG, "index.idx: global buffer 1 is not an IVF of one partition of %u rows, zero centroid", info->graph_rows);
  if ((rc = mw_datafile_global_buffer(&p->fa, 1, &b, &n, err)) < 0) return rc;
  if (ivf_check(b, n, info->nodes, info->dim) < 0)
    return mw_err_set(err, -EBADMSG, "auxiliary.idx: global buffer 1 is not an IVF of one partition of %u rows, zero centroid", info->nodes);
  return 0;
}

/* ------------------------------------------------------------ the graph */

/* Level of each node: the highest level whose rows name it. */
static int graph_check(const pair_t *p, mw_vindex_info_t *info, mw_err_t *err) {
  assert(p != NULL);
  assert(info != NULL);
  const mw_batch_t *b = &p->bi;
  const uint32_t *vid = (const uint32_t *)(const void *)b->cols[0].values.data;
  const mw_column_t *nc = &b->cols[1], *dc = &b->cols[2];
  const int32_t *no = (const int32_t *)(const void *)nc->offsets.data, *dof = (const int32_t *)(const void *)dc->offsets.data;
  const uint32_t *nbr = (const uint32_t *)(const void *)nc->children[0].values.data;
  if (b->cols[0].null_count || nc->null_count || dc->null_count || nc->children[0].null_count)
    return mw_err_set(err, -EBADMSG, "index.idx: nulls in the graph");
  uint8_t *lvl = calloc(info->nodes ? info->nodes : 1, 1);
  if (lvl == NULL) return -ENOMEM;
  int rc = 0;
  for (uint16_t l = 0; l < info->max_level && rc == 0; l++) {
    uint32_t limit = l == 0 ? 2 * info->m : info->m;
    for (uint32_t r = info->level_offsets[l]; r < info->level_offsets[l + 1] && rc == 0; r++) {
      uint32_t id = vid[r], cnt = (uint32_t)(no[r + 1] - no[r]);
      if (id >= info->nodes || (l == 0 && id != r) || (l > 0 && (lvl[id] != l - 1 || (r > info->level_offsets[l] && vid[r - 1] >= id)))) {
        rc = mw_err_set(err, -EBADMSG, "index.idx: row %u (level %u) names node %u out of order or not on level %u", r, l, id, l ? l - 1 : 0);
        break; /* id may be past lvl[] (found by fuzz_vindex) */
      }
      if (cnt != (uint32_t)(dof[r + 1] - dof[r]) || cnt > limit)
        rc = mw_err_set(err, -EBADMSG, "index.idx: row %u (node %u, level %u) has %u neighbors, %d distances (limit %u)", r, id, l, cnt,
                        dof[r + 1] - dof[r], limit);
      lvl[id] = (uint8_t)l;
      uint32_t *mx = l == 0 ? &info->max_links0 : &info->max_links_up;
      if (cnt > *mx) *mx = cnt;
      if (info->top_level < l) info->top_level = l;
    }
  }
  for (uint16_t l = 0; l < info->max_level && rc == 0; l++) /* neighbors are on the level */
    for (uint32_t r = info->level_offsets[l]; r < info->level_offsets[l + 1] && rc == 0; r++)
      for (int32_t k = no[r]; k < no[r + 1] && rc == 0; k++)
        if (nbr[k] >= info->nodes || lvl[nbr[k]] < l || nbr[k] == vid[r])
          rc = mw_err_set(err, -EBADMSG, "index.idx: node %u links to %u on level %u, which is not a node there", vid[r], nbr[k], l);
  if (rc == 0 && (info->entry_point >= info->nodes || lvl[info->entry_point] != info->top_level))
    rc = mw_err_set(err, -EBADMSG, "index.idx: entry point %u is not on the top level %u", info->entry_point, info->top_level);
  free(lvl);
  return rc;
}

static int rows_check(const pair_t *p, mw_vindex_info_t *info, mw_err_t *err) {
  assert(p != NULL);
  assert(info != NULL);
  const mw_column_t *rc0 = &p->ba.cols[0], *sq = &p->ba.cols[1];
  if (rc0->null_count || sq->null_count) return mw_err_set(err, -EBADMSG, "auxiliary.idx: null row ids or codes");
  info->row_ids = malloc((info->nodes ? info->nodes : 1) * sizeof *info->row_ids);
  if (info->row_ids == NULL) return -ENOMEM;
  memcpy(info->row_ids, rc0->values.data, (size_t)info->nodes * 8);
  for (uint32_t i = 1; i < info->nodes; i++)
    if (info->row_ids[i] <= info->row_ids[i - 1])
      return mw_err_set(err, -EBADMSG, "auxiliary.idx: _rowid %llu after %llu (not ascending)", (unsigned long long)info->row_ids[i],
                        (unsigned long long)info->row_ids[i - 1]);
  return 0;
}

static int open_both(pair_t *p, const uint8_t *ii, size_t in, const uint8_t *ai, size_t an, mw_err_t *err) {
  assert(p != NULL);
  mw_datafile_read_opts_t o = {.max_rows = MW_VINDEX_MAX_ROWS * MW_HNSW_MAX_LEVEL};
  int rc = mw_datafile_open(&p->fi, ii, in, &o, err);
  if (rc < 0) return mw_err_prefix(err, rc, "index.idx");
  p->oi = true;
  if ((rc = mw_datafile_open(&p->fa, ai, an, &o, err)) < 0) return mw_err_prefix(err, rc, "auxiliary.idx");
  p->oa = true;
  return 0;
}

static int read_both(pair_t *p, mw_err_t *err) {
  assert(p != NULL);
  int rc = mw_datafile_read_batch(&p->fi, &p->bi, err);
  p->bio = true;
  if (rc < 0) return mw_err_prefix(err, rc, "index.idx");
  rc = mw_datafile_read_batch(&p->fa, &p->ba, err);
  p->bao = true;
  return rc < 0 ? mw_err_prefix(err, rc, "auxiliary.idx") : 0;
}

int mw_vindex_check(const uint8_t *index_idx, size_t index_len, const uint8_t *aux_idx,
                    size_t aux_len, mw_vindex_info_t *info, mw_err_t *err) {
  assert(info != NULL);
  assert(index_idx != NULL || index_len == 0);
  memset(info, 0, sizeof *info);
  pair_t *p = calloc(1, sizeof *p);
  if (p == NULL) return -ENOMEM;
  int rc = open_both(p, index_idx, index_len, aux_idx, aux_len, err);
  if (rc == 0) rc = schemas_check(p, info, err);
  if (rc == 0) rc = index_meta_check(p, info, err);
  if (rc == 0) rc = aux_meta_check(p, info, err);
  if (rc == 0) rc = ivf_buffers_check(p, info, err);
  if (rc == 0) rc = read_both(p, err);
  if (rc == 0) rc = rows_check(p, info, err);
  if (rc == 0) rc = graph_check(p, info, err);
  if (p->bio) mw_batch_free(&p->bi);
  if (p->bao) mw_batch_free(&p->ba);
  if (p->oi) mw_datafile_close(&p->fi);
  if (p->oa) mw_datafile_close(&p->fa);
  free(p);
  return rc;
}

void mw_vindex_info_free(mw_vindex_info_t *info) {
  if (info == NULL) return;
  free(info->row_ids);
  info->row_ids = NULL;
}

int mw_vindex_check_rows(const mw_vindex_info_t *info, const mw_vindex_input_t *in, mw_err_t *err) {
  assert(info != NULL);
  assert(in != NULL);
  assert(info->row_ids != NULL || info->nodes == 0);
  if (info->dim != in->dim)
    return mw_err_set(err, -EBADMSG, "the index has dimension %u, its column %u", info->dim, in->dim);
  uint32_t k = 0; /* node ids ascend with _rowid (rows_check): one pass */
  for (uint64_t r = 0; r < in->rows; r++) {
    bool named = k < info->nodes && info->row_ids[k] == r;
    bool node = in->vecs != NULL && mw_vindex_row_indexed(in, r);
    if (named && !node)
      return mw_err_set(err, -EBADMSG, "node %u names row %llu, which has no vector", k, (unsigned long long)r);
    if (node && !named)
      return mw_err_set(err, -EBADMSG, "row %llu is not named by any node (a vector search would miss it)",
                        (unsigned long long)r);
    k += named;
  }
  if (k < info->nodes)
    return mw_err_set(err, -EBADMSG, "node %u names row %llu, past the %llu rows of the data file", k,
                      (unsigned long long)info->row_ids[k], (unsigned long long)in->rows);
  return 0;
}
