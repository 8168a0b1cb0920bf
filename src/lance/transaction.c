/*
 * transaction.c — Lance Transaction message decoder (see transaction.h).
 *
 * The .txn LanceDB 0.39.0 writes for a table's first version (263 bytes in
 * the vectors) starts
 *
 *   12 24 "38e9ad8b-0216-42ba-ad1a-31f7aaa78423"   2: uuid (read_version 0 omitted)
 *   b2 06 dc 01                                    102: overwrite, 220 bytes
 *      0a ..                                         1: fragments (none here: empty table)
 *      12 1f 12 02 "id" 18 00 20 ff ff ff ff ff ff ff ff ff 01 2a 05 "int64" ...
 *                                                    2: schema fields
 *
 * Top-level fields are walked with mw_pb_next; a field repeated where the
 * proto says singular keeps the last value (protobuf rules). Shared
 * sub-messages go through protobuf-c's unpack, bounded by the input size.
 */
#include "lance/transaction.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lance/shard_manifest.h"

static const char *const OP_NAMES[] = {
    "append", "delete", "overwrite", "create_index", "rewrite", "merge", "restore",
    "reserve_fragments", "update", "project", "update_config", "data_replacement",
    "update_mem_wal_state", "clone", "update_bases", "data_overlay", "append_fri_transitions"};
#define OP_FIRST 100
#define OP_COUNT (sizeof OP_NAMES / sizeof OP_NAMES[0])

const char *mw_txn_op_name(uint32_t tag) {
  if (tag < OP_FIRST || tag >= OP_FIRST + OP_COUNT) return NULL;
  return OP_NAMES[tag - OP_FIRST];
}

typedef struct ctx {
  mw_txn_t *t;
  const uint8_t *p;  /* the message being walked */
  size_t base;       /* its file offset */
  mw_err_t *err;
} ctx_t;

/* The context of the sub-message held by field f of c's message. */
static ctx_t inner(const ctx_t *c, const mw_pb_field_t *f) {
  assert(c != NULL);
  assert(f != NULL);
  return (ctx_t){c->t, f->data, c->base + (size_t)(f->data - c->p), c->err};
}

static int bad(ctx_t *c, const mw_pb_field_t *f, const char *what) {
  assert(c != NULL);
  assert(f != NULL);
  return mw_err_set(c->err, -EBADMSG, "transaction: byte %zu: %s (field %u, wire type %u)",
                    c->base + f->start, what, f->tag, f->wire);
}

static int dup_str(ctx_t *c, const mw_pb_field_t *f, char **out, const char *what) {
  assert(f != NULL);
  assert(out != NULL);
  if (f->wire != 2 || memchr(f->data, 0, f->len) != NULL) return bad(c, f, what);
  char *s = strndup((const char *)f->data, f->len);
  if (s == NULL) return -ENOMEM;
  free(*out);
  *out = s;
  return 0;
}

/* Append one unpacked message to a growing pointer array. */
static int push_ptr(ctx_t *c, void ***v, size_t *n, void *item) {
  assert(c != NULL);
  assert(v != NULL);
  assert(n != NULL);
  if (*n >= MW_TXN_MAX_LIST) return mw_err_set(c->err, -EFBIG, "transaction: more than %d list items", MW_TXN_MAX_LIST);
  void **nv = realloc(*v, (*n + 1) * sizeof *nv);
  if (nv == NULL) return -ENOMEM;
  *v = nv;
  nv[(*n)++] = item;
  return 0;
}

static int push_fragment(ctx_t *c, const mw_pb_field_t *f, Lance__Table__DataFragment ***v, size_t *n) {
  assert(f != NULL);
  if (f->wire != 2) return bad(c, f, "DataFragment");
  Lance__Table__DataFragment *m = lance__table__data_fragment__unpack(NULL, f->len, f->data);
  if (m == NULL) return bad(c, f, "DataFragment malformed");
  int rc = push_ptr(c, (void ***)v, n, m);
  if (rc < 0) lance__table__data_fragment__free_unpacked(m, NULL);
  return rc;
}

static int push_field(ctx_t *c, const mw_pb_field_t *f) {
  assert(c != NULL);
  assert(f != NULL);
  if (f->wire != 2) return bad(c, f, "Field");
  Lance__File__Field *m = lance__file__field__unpack(NULL, f->len, f->data);
  if (m == NULL) return bad(c, f, "Field malformed");
  int rc = push_ptr(c, (void ***)&c->t->schema, &c->t->n_schema, m);
  if (rc < 0) lance__file__field__free_unpacked(m, NULL);
  return rc;
}

static int push_index(ctx_t *c, const mw_pb_field_t *f, Lance__Table__IndexMetadata ***v, size_t *n) {
  assert(f != NULL);
  if (f->wire != 2) return bad(c, f, "IndexMetadata");
  Lance__Table__IndexMetadata *m = lance__table__index_metadata__unpack(NULL, f->len, f->data);
  if (m == NULL) return bad(c, f, "IndexMetadata malformed");
  int rc = push_ptr(c, (void ***)v, n, m);
  if (rc < 0) lance__table__index_metadata__free_unpacked(m, NULL);
  return rc;
}

static int push_compacted(ctx_t *c, const mw_pb_field_t *f) {
  assert(c != NULL);
  assert(f != NULL);
  if (f->wire != 2) return bad(c, f, "CompactedSsTable");
  Lance__Table__CompactedSsTable *m = lance__table__compacted_ss_table__unpack(NULL, f->len, f->data);
  if (m == NULL) return bad(c, f, "CompactedSsTable malformed");
  int rc = 0;
  if (m->shard_id == NULL || m->shard_id->uuid.len != 16) rc = bad(c, f, "CompactedSsTable without a 16-byte shard id");
  mw_txn_t *t = c->t;
  if (rc == 0 && t->n_compacted >= MW_TXN_MAX_LIST) rc = mw_err_set(c->err, -EFBIG, "transaction: too many compacted sstables");
  mw_compacted_sstable_t *nv = rc == 0 ? realloc(t->compacted, (t->n_compacted + 1) * sizeof *nv) : NULL;
  if (rc == 0 && nv == NULL) rc = -ENOMEM;
  if (rc == 0) {
    t->compacted = nv;
    memcpy(nv[t->n_compacted].shard_id, m->shard_id->uuid.data, 16);
    nv[t->n_compacted++].generation = m->generation;
  }
  lance__table__compacted_ss_table__free_unpacked(m, NULL);
  return rc;
}

/* Packed (wire 2) or single (wire 0) uint64 values. */
static int push_u64s(ctx_t *c, const mw_pb_field_t *f) {
  assert(c != NULL);
  assert(f != NULL);
  mw_txn_t *t = c->t;
  uint64_t one = f->value;
  size_t pos = 0;
  for (;;) {
    uint64_t v;
    if (f->wire == 0) {
      v = one;
    } else if (f->wire == 2) {
      if (pos == f->len) break;
      v = 0;
      for (int shift = 0;; shift += 7) {
        if (pos == f->len || shift > 63) return bad(c, f, "truncated packed varint");
        uint8_t b = f->data[pos++];
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) break;
      }
    } else {
      return bad(c, f, "fragment ids");
    }
    if (t->n_removed_ids >= MW_TXN_MAX_LIST) return mw_err_set(c->err, -EFBIG, "transaction: too many fragment ids");
    uint64_t *nv = realloc(t->removed_ids, (t->n_removed_ids + 1) * sizeof *nv);
    if (nv == NULL) return -ENOMEM;
    t->removed_ids = nv;
    nv[t->n_removed_ids++] = v;
    if (f->wire == 0) break;
  }
  return 0;
}

static int rewrite_group(ctx_t *c, const mw_pb_field_t *f) {
  assert(c != NULL);
  assert(f != NULL);
  if (f->wire != 2) return bad(c, f, "RewriteGroup");
  ctx_t s = inner(c, f);
  size_t pos = 0;
  mw_pb_field_t g;
  int rc;
  while ((rc = mw_pb_next(f->data, f->len, &pos, &g, s.base, c->err)) == 1) {
    if (g.tag == 1) rc = push_fragment(&s, &g, &c->t->fragments, &c->t->n_fragments);
    else if (g.tag == 2) rc = push_fragment(&s, &g, &c->t->new_fragments, &c->t->n_new_fragments);
    if (rc < 0) return rc;
  }
  return rc;
}

/* The fields of one operation message. */
static int operation(ctx_t *c, uint32_t op, const mw_pb_field_t *of) {
  assert(c != NULL);
  assert(of != NULL);
  mw_txn_t *t = c->t;
  ctx_t s = inner(c, of);
  size_t pos = 0;
  mw_pb_field_t f;
  int rc;
  while ((rc = mw_pb_next(of->data, of->len, &pos, &f, s.base, c->err)) == 1) {
    uint32_t k = f.tag;
    rc = 0;
    switch (op) {
      case 100: case 102: case 105: /* append, overwrite, merge */
        if (k == 1) rc = push_fragment(&s, &f, &t->fragments, &t->n_fragments);
        else if (k == 2 && op != 100) rc = push_field(&s, &f);
        else t->n_unknown++;
        break;
      case 101: /* delete */
        if (k == 1) rc = push_fragment(&s, &f, &t->fragments, &t->n_fragments);
        else if (k == 2) rc = push_u64s(&s, &f);
        else if (k == 3) rc = dup_str(&s, &f, &t->predicate, "Delete.predicate");
        else t->n_unknown++;
        break;
      case 103: /* create_index */
        if (k == 1) rc = push_index(&s, &f, &t->new_indices, &t->n_new_indices);
        else if (k == 2) rc = push_index(&s, &f, &t->removed_indices, &t->n_removed_indices);
        else t->n_unknown++;
        break;
      case 104: /* rewrite */
        if (k == 1) rc = push_fragment(&s, &f, &t->fragments, &t->n_fragments);
        else if (k == 2) rc = push_fragment(&s, &f, &t->new_fragments, &t->n_new_fragments);
        else if (k == 3) rc = rewrite_group(&s, &f);
        else t->n_unknown++;
        break;
      case 106: /* restore */
        if (k == 1 && f.wire == 0) t->restore_version = f.value;
        else t->n_unknown++;
        break;
      case 107: /* reserve_fragments */
        if (k == 1 && f.wire == 0) t->reserve_fragments = (uint32_t)f.value;
        else t->n_unknown++;
        break;
      case 108: /* update */
        if (k == 1) rc = push_u64s(&s, &f);
        else if (k == 2) rc = push_fragment(&s, &f, &t->fragments, &t->n_fragments);
        else if (k == 3) rc = push_fragment(&s, &f, &t->new_fragments, &t->n_new_fragments);
        else if (k == 5) rc = push_compacted(&s, &f);
        else t->n_unknown++;
        break;
      case 109: /* project */
        if (k == 1) rc = push_field(&s, &f);
        else t->n_unknown++;
        break;
      case 112: /* update_mem_wal_state */
        if (k == 1) rc = push_compacted(&s, &f);
        else t->n_unknown++;
        break;
      default: t->n_unknown++; break;
    }
    if (rc < 0) return rc;
  }
  return rc;
}

static int property(ctx_t *c, const mw_pb_field_t *f) {
  assert(c != NULL);
  assert(f != NULL);
  if (f->wire != 2) return bad(c, f, "transaction_properties");
  size_t pos = 0;
  mw_pb_field_t g;
  char *key = NULL, *val = NULL;
  ctx_t s = inner(c, f);
  int rc;
  while ((rc = mw_pb_next(f->data, f->len, &pos, &g, s.base, c->err)) == 1) {
    if (g.tag == 1) rc = dup_str(&s, &g, &key, "property key");
    else if (g.tag == 2) rc = dup_str(&s, &g, &val, "property value");
    if (rc < 0) break;
  }
  if (rc == 0) rc = mw_kvs_set(&c->t->properties, key ? key : "", val ? val : "", val ? strlen(val) : 0);
  free(key);
  free(val);
  return rc;
}

void mw_txn_free(mw_txn_t *t) {
  if (t == NULL) return;
  free(t->uuid);
  free(t->tag);
  free(t->predicate);
  mw_kvs_free(&t->properties);
  for (size_t i = 0; i < t->n_fragments; i++) lance__table__data_fragment__free_unpacked(t->fragments[i], NULL);
  for (size_t i = 0; i < t->n_new_fragments; i++) lance__table__data_fragment__free_unpacked(t->new_fragments[i], NULL);
  for (size_t i = 0; i < t->n_schema; i++) lance__file__field__free_unpacked(t->schema[i], NULL);
  for (size_t i = 0; i < t->n_new_indices; i++) lance__table__index_metadata__free_unpacked(t->new_indices[i], NULL);
  for (size_t i = 0; i < t->n_removed_indices; i++) lance__table__index_metadata__free_unpacked(t->removed_indices[i], NULL);
  free(t->fragments);
  free(t->new_fragments);
  free(t->schema);
  free(t->new_indices);
  free(t->removed_indices);
  free(t->removed_ids);
  free(t->compacted);
  memset(t, 0, sizeof *t);
}

int mw_txn_decode(const uint8_t *p, size_t n, mw_txn_t *t, mw_err_t *err) {
  assert(t != NULL);
  assert(p != NULL || n == 0);
  memset(t, 0, sizeof *t);
  if (n > MW_TXN_MAX_BYTES) return mw_err_set(err, -EFBIG, "transaction of %zu bytes (limit %zu)", n, MW_TXN_MAX_BYTES);
  ctx_t c = {t, p, 0, err};
  size_t pos = 0;
  mw_pb_field_t f;
  int rc;
  while ((rc = mw_pb_next(p, n, &pos, &f, 0, err)) == 1) {
    rc = 0;
    if (f.tag == 1) {
      if (f.wire != 0) return bad(&c, &f, "read_version");
      t->read_version = f.value;
    } else if (f.tag == 2) {
      rc = dup_str(&c, &f, &t->uuid, "uuid");
    } else if (f.tag == 3) {
      rc = dup_str(&c, &f, &t->tag, "tag");
    } else if (f.tag == 4) {
      rc = property(&c, &f);
    } else if (mw_txn_op_name(f.tag) != NULL) {
      if (f.wire != 2) return bad(&c, &f, "operation");
      if (t->op_tag != 0 && t->op_tag != f.tag)
        return mw_err_set(err, -EBADMSG, "transaction: byte %zu: a second operation (%s after %s)", f.start,
                          mw_txn_op_name(f.tag), t->op_name);
      t->op_tag = f.tag;
      t->op_name = mw_txn_op_name(f.tag);
      t->op_bytes = f.len;
      rc = operation(&c, f.tag, &f);
    } else {
      t->n_unknown++;
    }
    if (rc < 0) return rc == -ENOMEM ? mw_err_set(err, rc, "transaction: out of memory") : rc;
  }
  if (rc < 0) return rc;
  if (t->op_name == NULL) t->op_name = "none";
  return 0;
}
