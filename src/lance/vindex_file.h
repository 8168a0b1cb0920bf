/*
 * vindex_file.h — the per-SSTable vector index LanceDB 0.39.0's MemWAL flush
 * writes for a maintained vector index (docs/indexes.md): IVF_HNSW_SQ with
 * one zero-centroid partition, as two Lance 2.2 files in
 * `<sstable>/_indices/<uuid>/`, and the IndexMetadata entry naming them in
 * the SSTable's dataset manifest.
 *
 *   index.idx      __vector_id uint32, __neighbors list<uint32>,
 *                  _distance list<float> (lists full-zip); one row per
 *                  (graph level, node on it), level 0 first
 *   auxiliary.idx  _rowid uint64 not null, __sq_code fixed_size_list<uint8, dim>
 *
 * Owns: building both files from an SSTable's vector column (vectors, a
 * validity bitmap, dim, distance type): null vectors, and vectors with a
 * NaN or infinite item, are skipped (node ids are dense over the rest, _rowid names each node's row in the data
 * file), the scalar quantizer is trained on the rest (sq.h), the HNSW graph
 * built (hnsw.h). One deliberate difference from LanceDB 0.39.0: for cosine
 * the vectors are normalized before both (LanceDB quantizes them raw, while
 * its reader normalizes the query and compares by L2 over the codes: its own
 * cosine SSTable index then finds a fresh row first for 40 of 200 rows, ours
 * for 200; tests/interop/vindex.sh, docs/indexes.md); checking a pair of such files (ours or LanceDB's) as a
 * reader must find them (mw_vindex_check); the IndexMetadata bytes.
 *
 * Pure: bytes in, bytes out; the caller writes the files and the manifest.
 *
 * Errors: negative errno with a reason in *err: -ENODATA (no non-null,
 * finite vector: Lance skips the index then, and so must the caller), -EINVAL (bad
 * input), -EBADMSG (a checked file is malformed: which file, field, row),
 * -EFBIG (over a limit), -ENOMEM.
 */
#ifndef MW_LANCE_VINDEX_FILE_H
#define MW_LANCE_VINDEX_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"
#include "lance/hnsw.h"
#include "lance/sq.h"

#define MW_VINDEX_INDEX_FILE "index.idx"
#define MW_VINDEX_AUX_FILE "auxiliary.idx"
#define MW_VINDEX_TYPE "IVF_HNSW_SQ"
#define MW_VINDEX_DETAILS_URL "/lance.index.pb.VectorIndexDetails"
#define MW_VINDEX_MAX_DIM 4096
#define MW_VINDEX_MAX_ROWS ((uint64_t)MW_HNSW_MAX_NODES)
#define MW_VINDEX_PREFETCH_DISTANCE 2

typedef struct mw_vindex_input {
  const float *vecs;        /* rows x dim, row-major (null rows' slots ignored) */
  const uint8_t *validity;  /* LSB-first bitmap over rows, NULL = every row valid */
  uint64_t rows;
  uint32_t dim;             /* 1 .. MW_VINDEX_MAX_DIM */
  mw_distance_t dist;
  mw_hnsw_params_t hnsw;    /* zeros = Lance's MemWAL defaults (m 16, ef 100, 7 levels) */
} mw_vindex_input_t;

typedef struct mw_vindex {
  mw_buf_t index_idx;       /* the two files */
  mw_buf_t aux_idx;
  uint32_t nodes;           /* non-null vectors indexed */
  uint32_t entry_point;
  uint16_t top_level;
  mw_sq_bounds_t bounds;
  size_t build_bytes;       /* the HNSW build's memory (hnsw.h bound), vectors not counted */
} mw_vindex_t;

/* Build both files. `out` must be zeroed or freed; on failure it is left
 * empty. */
int mw_vindex_build(const mw_vindex_input_t *in, mw_vindex_t *out, mw_err_t *err);
void mw_vindex_free(mw_vindex_t *v);

/* What mw_vindex_check found. */
typedef struct mw_vindex_info {
  uint32_t dim;
  mw_distance_t dist;
  uint32_t nodes;           /* rows of auxiliary.idx = level-0 rows of index.idx */
  uint32_t graph_rows;      /* rows of index.idx */
  uint16_t max_level;       /* lance:hnsw params */
  uint32_t m, ef_construction;
  uint32_t entry_point;
  uint16_t top_level;       /* highest level with a node */
  uint32_t level_offsets[MW_HNSW_MAX_LEVEL + 1];
  uint32_t max_links0, max_links_up; /* largest neighbor lists seen */
  mw_sq_bounds_t bounds;
  uint64_t *row_ids;        /* nodes entries, _rowid of each node (owned) */
} mw_vindex_info_t;

/* Whether row r < in->rows gets a node: its vector is not null and every
 * item is finite. */
bool mw_vindex_row_indexed(const mw_vindex_input_t *in, uint64_t r);

/* Check a pair of files as Lance's IVF_HNSW_SQ reader needs them: both
 * schemas and schema metadata (lance:index type and distance, lance:ivf
 * naming global buffer 1, lance:hnsw, lance:sq = storage_metadata[0]), the
 * IVF protobuf (one partition of the file's rows, a zero centroid of dim
 * floats), the graph (level 0 names nodes 0..n-1 in order; each level's
 * nodes ascending and on the level below; no neighbor outside the level
 * or equal to the node; at most 2m neighbors on level 0 and m above; the
 * entry point on the top level), _rowid ascending, and every SQ code row
 * present. Free info with mw_vindex_info_free, also after a failure. */
int mw_vindex_check(const uint8_t *index_idx, size_t index_len, const uint8_t *aux_idx,
                    size_t aux_len, mw_vindex_info_t *info, mw_err_t *err);
void mw_vindex_info_free(mw_vindex_info_t *info);

/* A checked index against the column it indexes (in: vectors, validity,
 * rows, dim; in->dist and in->hnsw unused): its dimension is in->dim and
 * its nodes' _rowid name exactly the rows that get a node
 * (mw_vindex_row_indexed), each once, in row order. -EBADMSG naming the
 * first row the index misses or names wrongly: a vector search would miss
 * that row, or answer a row that has no vector. */
int mw_vindex_check_rows(const mw_vindex_info_t *info, const mw_vindex_input_t *in, mw_err_t *err);

/* The SSTable manifest's IndexMetadata for the index in _indices/<uuid>:
 * uuid, name (the base index's), fields = [field_id], dataset_version,
 * fragment_bitmap {0}, index_details = Any{VectorIndexDetails, empty},
 * index_version 1, created_at (ms since the epoch; 0 = absent) — the
 * message bytes, appended to out. */
int mw_vindex_entry_encode(const uint8_t uuid[16], const char *name, int32_t field_id,
                           uint64_t dataset_version, uint64_t created_at_ms, mw_buf_t *out,
                           mw_err_t *err);

/* The distance type of a base table's vector index, from its
 * IndexMetadata.index_details: Any{MW_VINDEX_DETAILS_URL, value} whose
 * field 1 is the metric (absent or 0 = l2, 1 = cosine, 2 = dot; measured on
 * LanceDB 0.39.0's IVF_PQ and HNSW_SQ indexes). -ENOENT for another details
 * type (a scalar or full-text index), -ENOTSUP for another metric
 * (hamming), -EBADMSG for malformed bytes. */
int mw_vindex_details_distance(const char *type_url, const uint8_t *value, size_t len,
                               mw_distance_t *out);

/* JSON text of a double as serde_json (ryu) prints it: the shortest digits
 * that read back to the same double, "1.0" for integral values, "1e-7"
 * style exponents. Returns the length written (out holds 32 bytes). */
size_t mw_vindex_json_double(double v, char out[32]);

#endif
