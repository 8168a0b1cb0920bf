/*
 * memtable.c — see memtable.h.
 *
 * An append is a move: the batch's struct joins the array, its buffers are
 * trimmed of builder slack, and the accounting sums grow. Nothing is hashed
 * or indexed (memtable.h says why); the flush hashes the keys once.
 */
#include "shard/memtable.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lance/bloom.h"

int mw_memtable_schema_check(const mw_schema_t *schema, mw_err_t *err) {
  assert(schema != NULL);
  /* hashing zero rows checks everything but the values: PK positions, types */
  mw_batch_t b;
  int rc = mw_batch_init(&b, schema);
  if (rc < 0) return mw_err_set(err, rc, "memtable: out of memory");
  rc = mw_pk_hash_batch(&b, NULL, err);
  mw_batch_free(&b);
  return rc;
}

int mw_memtable_init(mw_memtable_t *m, const mw_schema_t *schema, uint64_t generation) {
  assert(m != NULL);
  assert(schema != NULL);
  memset(m, 0, sizeof *m);
  int rc = mw_memtable_schema_check(schema, NULL);
  if (rc < 0) return rc;
  m->schema = schema;
  m->generation = generation;
  return 0;
}

void mw_memtable_free(mw_memtable_t *m) {
  if (m == NULL) return;
  for (size_t i = 0; i < m->n_batches; i++) mw_batch_free(&m->batches[i]);
  free(m->batches);
  memset(m, 0, sizeof *m);
}

static int reserve(mw_memtable_t *m) {
  if (m->n_batches < m->cap_batches) return 0;
  size_t cap = m->cap_batches ? m->cap_batches * 2 : 16;
  mw_batch_t *b = realloc(m->batches, cap * sizeof *b);
  if (b == NULL) return -ENOMEM;
  m->batches = b;
  m->cap_batches = cap;
  return 0;
}

static int64_t pk_bytes(const mw_batch_t *b) {
  int64_t n = 0;
  for (size_t i = 0; i < b->schema->n_fields; i++) {
    const mw_field_t *f = &b->schema->fields[i];
    if (f->pk_position == 0) continue;
    const mw_column_t *c = &b->cols[i];
    n += mw_field_layout(f) == MW_LAYOUT_VAR ? (int64_t)c->values.len
         : f->type == MW_T_BOOL ? (c->length + 7) / 8
                                 : (int64_t)mw_type_width(f) * c->length;
  }
  return n;
}

static int64_t count_tombstones(const mw_batch_t *b) {
  int t = mw_schema_find(b->schema, "_tombstone");
  if (t < 0 || b->schema->fields[t].type != MW_T_BOOL) return 0;
  const mw_column_t *c = &b->cols[t];
  assert(c->values.len * 8 >= (size_t)c->length);
  /* whole bytes, then the last one masked: bits past the length may be set
   * in bitmaps decoded from Arrow IPC (batch.h) */
  int64_t n = 0, whole = c->length / 8;
  for (int64_t i = 0; i < whole; i++) n += __builtin_popcount(c->values.data[i]);
  if (c->length % 8) n += __builtin_popcount(c->values.data[whole] & ((1u << (c->length % 8)) - 1));
  return n;
}

/* A stored batch never grows again: give back its builders' slack (buffers
 * double as they grow, so up to half of each can be unused), which would
 * otherwise cost up to 2x the rows' size for as long as the MemTable
 * lives (memory bound: MemTable bytes close to the Arrow size). */
static void shrink_column(mw_column_t *c) {
  mw_buf_shrink(&c->validity);
  mw_buf_shrink(&c->values);
  mw_buf_shrink(&c->offsets);
  mw_buf_shrink(&c->item_validity);
  for (uint32_t i = 0; i < c->n_children; i++) shrink_column(&c->children[i]);
}

static void shrink_batch(mw_batch_t *b) {
  for (size_t i = 0; i < b->schema->n_fields; i++) shrink_column(&b->cols[i]);
}

int mw_memtable_append(mw_memtable_t *m, mw_batch_t *batch, uint64_t wal_position, mw_err_t *err) {
  assert(m != NULL);
  assert(batch != NULL);
  assert(!m->frozen);
  if (batch->schema != m->schema && !mw_schema_equal(batch->schema, m->schema))
    return mw_err_set(err, -EINVAL, "memtable: batch schema does not match the table schema");
  if (batch->n_rows == 0) return 0;
  if (m->n_batches >= MW_MEMTABLE_MAX_BATCHES || m->n_rows + batch->n_rows > MW_MEMTABLE_MAX_ROWS)
    return mw_err_set(err, -EFBIG, "memtable: hard limit reached (%zu batches, %lld rows)",
                      m->n_batches, (long long)m->n_rows);
  if (reserve(m) < 0) return mw_err_set(err, -ENOMEM, "memtable: out of memory");
  batch->schema = m->schema;
  m->n_rows += batch->n_rows;
  m->in_memory_bytes += mw_batch_lance_bytes(batch);
  m->primary_key_bytes += pk_bytes(batch);
  m->n_tombstones += count_tombstones(batch);
  shrink_batch(batch);
  m->batches[m->n_batches++] = *batch;
  memset(batch, 0, sizeof *batch);
  if (wal_position) mw_memtable_cover(m, wal_position);
  assert(m->n_tombstones <= m->n_rows);
  assert(m->n_batches <= m->cap_batches);
  return 0;
}

void mw_memtable_cover(mw_memtable_t *m, uint64_t wal_position) {
  assert(wal_position > 0);
  assert(wal_position >= m->last_wal_position);
  if (m->first_wal_position == 0) m->first_wal_position = wal_position;
  m->last_wal_position = wal_position;
}

bool mw_memtable_full(const mw_memtable_t *m, const mw_memtable_limits_t *lim) {
  if (m->n_rows == 0) return false;
  return (lim->max_rows > 0 && m->n_rows >= lim->max_rows) ||
         (lim->max_bytes > 0 && m->in_memory_bytes >= lim->max_bytes) ||
         (lim->max_batches > 0 && (int64_t)m->n_batches >= lim->max_batches);
}

static size_t column_heap_bytes(const mw_column_t *c) {
  size_t n = c->validity.cap + c->values.cap + c->offsets.cap + c->item_validity.cap +
             c->n_children * sizeof *c->children;
  for (uint32_t i = 0; i < c->n_children; i++) n += column_heap_bytes(&c->children[i]);
  return n;
}

/* A view's bytes belong to its batch's backing blob (cap 0 here), counted
 * once per blob: the batches of one WAL entry share it and sit next to each
 * other (replay appends an entry's batches in a row), so a blob is counted
 * when it differs from the previous batch's. */
int64_t mw_memtable_heap_bytes(const mw_memtable_t *m) {
  assert(m != NULL);
  size_t n = m->cap_batches * sizeof *m->batches;
  const mw_blob_t *prev = NULL;
  for (size_t i = 0; i < m->n_batches; i++) {
    const mw_batch_t *b = &m->batches[i];
    n += b->schema->n_fields * sizeof *b->cols;
    for (size_t j = 0; j < b->schema->n_fields; j++) n += column_heap_bytes(&b->cols[j]);
    if (b->backing != NULL && b->backing != prev) n += mw_blob_len(b->backing);
    prev = b->backing;
  }
  return (int64_t)n;
}
