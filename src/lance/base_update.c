/*
 * base_update.c — see base_update.h.
 *
 * A sample: LanceDB's `update(id in [10, 14))` on a 2000-row fragment,
 * read version 3, decoded with protoc --decode_raw (ours is the same shape):
 *
 *   _transactions/3-<uuid>.txn
 *     1: 3  2: "<uuid>"
 *     108 {                                   Update
 *       2 { 2 {DataFile of fragment 0} 3 { 2: 3  3: <id>  4: 4 } 4: 2000 }
 *       3 { 2 {1: "<new>.lance" 2: "\0\1" 3: "\0\1" 4: 2 5: 2 6: 607} 4: 4 }
 *       6: "\1" }                             fields_for_preserving_frag_bitmap
 *   _versions/18446744073709551611.manifest   version 4
 *     fragments [{id 0, ..., deletion_file {ARROW, read_version 3, id, 4}},
 *                {id 1, <new>.lance, physical_rows 4}]
 *     3: 4  6: 0 (index section at 0)  9: 1  10: 1 (deletion files)
 *     11: 1 (max_fragment_id)  12: "3-<uuid>.txn"  21: <txn section offset>
 *
 * Building: the previous manifest's protobuf-c struct is copied shallowly and
 * only the fields a commit changes are pointed at arrays on the side; the
 * previous manifest stays untouched (it is the caller's), and nothing the
 * copy points to is freed here except those side arrays.
 */
#include "lance/base_update.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uuid/uuid.h>

#include "lance/shard_manifest.h" /* mw_pb_put_varint */

void mw_base_commit_init(mw_base_commit_t *c) {
  assert(c != NULL);
  memset(c, 0, sizeof *c);
  mw_buf_init(&c->txn);
  mw_buf_init(&c->manifest);
}

void mw_base_commit_free(mw_base_commit_t *c) {
  if (c == NULL) return;
  mw_buf_free(&c->txn);
  mw_buf_free(&c->manifest);
  memset(c, 0, sizeof *c);
}

uint64_t mw_memwal_compacted(const mw_memwal_index_t *x, const uint8_t shard_id[16]) {
  assert(x != NULL);
  assert(shard_id != NULL);
  for (size_t i = 0; i < x->n_compacted; i++)
    if (memcmp(x->compacted[i].shard_id, shard_id, 16) == 0) return x->compacted[i].generation;
  return 0;
}

/* ------------------------------------------------------------- wire bits */

static int put_len(mw_buf_t *b, uint32_t tag, const void *p, size_t n) {
  int rc = mw_pb_put_varint(b, (uint64_t)tag << 3 | 2);
  if (rc == 0) rc = mw_pb_put_varint(b, n);
  if (rc == 0) rc = mw_buf_append(b, p, n);
  return rc;
}

static int put_msg(mw_buf_t *b, uint32_t tag, const ProtobufCMessage *m) {
  size_t len = protobuf_c_message_get_packed_size(m);
  mw_buf_t tmp = MW_BUF_INIT;
  uint8_t *p = mw_buf_extend(&tmp, len);
  int rc = p || len == 0 ? 0 : -ENOMEM;
  if (rc == 0) {
    protobuf_c_message_pack(m, p);
    rc = put_len(b, tag, tmp.data, len);
  }
  mw_buf_free(&tmp);
  return rc;
}

static bool all_zero(const uint8_t u[16]) {
  for (int i = 0; i < 16; i++)
    if (u[i]) return false;
  return true;
}

/* ------------------------------------------------------------- the plan */

typedef struct build {
  const mw_table_meta_t *prev;
  const mw_base_update_t *u;
  Lance__Table__DeletionFile *dels;       /* one per plan deletion */
  Lance__Table__DataFragment *updated;    /* copies of the fragments that get them */
  Lance__Table__DataFragment *news;       /* the new fragments */
  Lance__Table__DataFile *news_files;
  Lance__Table__DataFile **news_file_ptrs;
  Lance__Table__DataFragment **frags;     /* the manifest's final list */
  size_t n_frags;
  bool any_deletion;
} build_t;

static void build_free(build_t *b) {
  assert(b != NULL);
  free(b->dels);
  free(b->updated);
  free(b->news);
  free(b->news_files);
  free(b->news_file_ptrs);
  free(b->frags);
}

static const Lance__Table__DataFragment *prev_fragment(const build_t *b, uint64_t id) {
  assert(b != NULL);
  const Lance__Table__Manifest *pb = b->prev->manifest.pb;
  for (size_t i = 0; i < pb->n_fragments; i++)
    if (pb->fragments[i]->id == id) return pb->fragments[i];
  return NULL;
}

static bool removed(const mw_base_update_t *u, uint64_t id) {
  assert(u != NULL);
  for (size_t i = 0; i < u->n_removed; i++)
    if (u->removed[i] == id) return true;
  return false;
}

/* Every id named once, known, and a deletion never covers a whole
 * fragment. */
static int check_plan(const build_t *b, mw_err_t *err) {
  const mw_base_update_t *u = b->u;
  if (u->n_deletions > MW_BASE_UPDATE_MAX_FRAGMENTS || u->n_removed > MW_BASE_UPDATE_MAX_FRAGMENTS ||
      u->n_fragments > MW_BASE_UPDATE_MAX_FRAGMENTS || u->n_compacted > MW_MEMWAL_MAX_LIST)
    return mw_err_set(err, -EFBIG, "base update: more than %d entries in a list",
                      MW_BASE_UPDATE_MAX_FRAGMENTS);
  for (size_t i = 0; i < u->n_removed; i++) {
    if (prev_fragment(b, u->removed[i]) == NULL)
      return mw_err_set(err, -EINVAL, "base update: removed fragment %" PRIu64 " is not in version %" PRIu64,
                        u->removed[i], b->prev->version);
    for (size_t j = 0; j < i; j++)
      if (u->removed[j] == u->removed[i])
        return mw_err_set(err, -EINVAL, "base update: fragment %" PRIu64 " removed twice", u->removed[i]);
  }
  for (size_t i = 0; i < u->n_deletions; i++) {
    const mw_bu_deletion_t *d = &u->deletions[i];
    const Lance__Table__DataFragment *f = prev_fragment(b, d->fragment_id);
    if (f == NULL || removed(u, d->fragment_id))
      return mw_err_set(err, -EINVAL, "base update: deletion for fragment %" PRIu64
                        " that is not in version %" PRIu64 " or is removed", d->fragment_id, b->prev->version);
    if (d->num_deleted_rows == 0 || d->num_deleted_rows >= f->physical_rows)
      return mw_err_set(err, -EINVAL, "base update: fragment %" PRIu64 ": %" PRIu64 " of %" PRIu64
                        " rows deleted (remove the fragment instead)", d->fragment_id,
                        d->num_deleted_rows, f->physical_rows);
    for (size_t j = 0; j < i; j++)
      if (u->deletions[j].fragment_id == d->fragment_id)
        return mw_err_set(err, -EINVAL, "base update: two deletion files for fragment %" PRIu64,
                          d->fragment_id);
  }
  for (size_t i = 0; i < u->n_fragments; i++) {
    const mw_bu_fragment_t *f = &u->fragments[i];
    if (f->data_file == NULL || f->data_file[0] == '\0' || f->physical_rows == 0 ||
        f->n_columns == 0 || f->n_columns > MW_DMANIFEST_MAX_FIELDS)
      return mw_err_set(err, -EINVAL, "base update: new fragment %zu needs a data file, rows and columns", i);
  }
  for (size_t i = 0; i < u->n_compacted; i++) {
    const mw_compacted_sstable_t *c = &u->compacted[i];
    for (size_t j = 0; j < i; j++)
      if (memcmp(u->compacted[j].shard_id, c->shard_id, 16) == 0)
        return mw_err_set(err, -EINVAL, "base update: a shard advances twice in one commit");
    uint64_t cur = mw_memwal_compacted(&b->prev->memwal, c->shard_id);
    if (c->generation <= cur) {
      char id[37];
      uuid_unparse_lower(c->shard_id, id);
      return mw_err_set(err, -ESTALE, "base update: shard %s is compacted up to generation %" PRIu64
                        " in version %" PRIu64 ", not below %" PRIu64, id, cur, b->prev->version,
                        c->generation);
    }
  }
  if (u->n_compacted > 0 && !b->prev->has_memwal)
    return mw_err_set(err, -ENOTSUP, "base update: version %" PRIu64 " has no %s index",
                      b->prev->version, MW_MEMWAL_INDEX_NAME);
  return 0;
}

static int make_structs(build_t *b) {
  const mw_base_update_t *u = b->u;
  size_t nd = u->n_deletions, nn = u->n_fragments;
  b->dels = calloc(nd + 1, sizeof *b->dels);
  b->updated = calloc(nd + 1, sizeof *b->updated);
  b->news = calloc(nn + 1, sizeof *b->news);
  b->news_files = calloc(nn + 1, sizeof *b->news_files);
  b->news_file_ptrs = calloc(nn + 1, sizeof *b->news_file_ptrs);
  b->frags = calloc(b->prev->manifest.pb->n_fragments + nn + 1, sizeof *b->frags);
  if (!b->dels || !b->updated || !b->news || !b->news_files || !b->news_file_ptrs || !b->frags)
    return -ENOMEM;
  for (size_t i = 0; i < nd; i++) {
    const mw_bu_deletion_t *d = &u->deletions[i];
    lance__table__deletion_file__init(&b->dels[i]);
    b->dels[i].file_type = d->kind == MW_DELETION_BITMAP
                               ? LANCE__TABLE__DELETION_FILE__DELETION_FILE_TYPE__BITMAP
                               : LANCE__TABLE__DELETION_FILE__DELETION_FILE_TYPE__ARROW_ARRAY;
    b->dels[i].read_version = b->prev->version;
    b->dels[i].id = d->id;
    b->dels[i].num_deleted_rows = d->num_deleted_rows;
    b->updated[i] = *prev_fragment(b, d->fragment_id); /* shallow: only deletion_file differs */
    b->updated[i].deletion_file = &b->dels[i];
  }
  for (size_t i = 0; i < nn; i++) {
    const mw_bu_fragment_t *f = &u->fragments[i];
    Lance__Table__DataFile *df = &b->news_files[i];
    lance__table__data_file__init(df);
    df->path = (char *)f->data_file;
    df->n_fields = f->n_columns;
    df->fields = (int32_t *)f->field_ids;
    df->n_column_indices = f->n_columns;
    df->column_indices = (int32_t *)f->column_indices;
    df->file_major_version = 2;
    df->file_minor_version = 2;
    df->file_size_bytes = f->file_size_bytes;
    b->news_file_ptrs[i] = df;
    lance__table__data_fragment__init(&b->news[i]);
    b->news[i].n_files = 1;
    b->news[i].files = &b->news_file_ptrs[i];
    b->news[i].physical_rows = f->physical_rows;
  }
  return 0;
}

/* ------------------------------------------------------------ transaction */

static int encode_txn(const build_t *b, const char *uuid_text, mw_buf_t *out) {
  const mw_base_update_t *u = b->u;
  mw_buf_t up = MW_BUF_INIT, packed = MW_BUF_INIT;
  int rc = 0;
  if (u->n_removed > 0) {
    for (size_t i = 0; i < u->n_removed && rc == 0; i++) rc = mw_pb_put_varint(&packed, u->removed[i]);
    if (rc == 0) rc = put_len(&up, 1, packed.data, packed.len);
  }
  for (size_t i = 0; i < u->n_deletions && rc == 0; i++) rc = put_msg(&up, 2, &b->updated[i].base);
  for (size_t i = 0; i < u->n_fragments && rc == 0; i++) {
    assert(b->news[i].id == 0); /* unassigned, as Lance writes them */
    rc = put_msg(&up, 3, &b->news[i].base);
  }
  for (size_t i = 0; i < u->n_compacted && rc == 0; i++) {
    Lance__Table__UUID id = LANCE__TABLE__UUID__INIT;
    id.uuid.data = (uint8_t *)u->compacted[i].shard_id;
    id.uuid.len = 16;
    Lance__Table__CompactedSsTable c = LANCE__TABLE__COMPACTED_SS_TABLE__INIT;
    c.shard_id = &id;
    c.generation = u->compacted[i].generation;
    rc = put_msg(&up, 5, &c.base);
  }
  if (rc == 0 && u->n_preserve_fields > 0) {
    mw_buf_reset(&packed);
    for (size_t i = 0; i < u->n_preserve_fields && rc == 0; i++)
      rc = mw_pb_put_varint(&packed, u->preserve_fields[i]);
    if (rc == 0) rc = put_len(&up, 6, packed.data, packed.len);
  }
  if (rc == 0 && b->prev->version > 0) {
    rc = mw_pb_put_varint(out, 1 << 3 | 0);
    if (rc == 0) rc = mw_pb_put_varint(out, b->prev->version);
  }
  if (rc == 0) rc = put_len(out, 2, uuid_text, strlen(uuid_text));
  if (rc == 0) rc = put_len(out, 108, up.data, up.len);
  mw_buf_free(&up);
  mw_buf_free(&packed);
  return rc;
}

/* ----------------------------------------------------------- index section */

static int encode_index_section(const build_t *b, uint64_t version, mw_buf_t *out) {
  assert(b != NULL);
  const mw_table_meta_t *prev = b->prev;
  const mw_base_update_t *u = b->u;
  size_t n = prev->indexes.n;
  mw_buf_t *entries = calloc(n + 1, sizeof *entries);
  mw_section_t *secs = calloc(n + 1, sizeof *secs);
  mw_compacted_sstable_t *merged = calloc(prev->memwal.n_compacted + u->n_compacted + 1, sizeof *merged);
  int rc = entries && secs && merged ? 0 : -ENOMEM;
  for (size_t i = 0; i < n && rc == 0; i++) {
    const mw_index_entry_t *e = &prev->indexes.items[i];
    bool memwal = e->pb->name != NULL && strcmp(e->pb->name, MW_MEMWAL_INDEX_NAME) == 0;
    if (!memwal || u->n_compacted == 0) {
      rc = mw_index_entry_encode(e, &entries[i]);
    } else {
      /* Lance's update_mem_wal_index_compacted_sstables: same details with
       * the generations advanced, a fresh uuid, this version, now. */
      mw_memwal_index_t x = prev->memwal;
      size_t k = prev->memwal.n_compacted;
      memcpy(merged, prev->memwal.compacted, k * sizeof *merged);
      for (size_t c = 0; c < u->n_compacted; c++) {
        size_t j = 0;
        while (j < k && memcmp(merged[j].shard_id, u->compacted[c].shard_id, 16) != 0) j++;
        if (j == k) k++;
        merged[j] = u->compacted[c];
      }
      x.compacted = merged;
      x.n_compacted = k;
      if (all_zero(u->index_uuid)) uuid_generate_random(x.uuid);
      else memcpy(x.uuid, u->index_uuid, 16);
      x.dataset_version = version;
      x.created_at_ms = u->created_at_ms;
      if (x.created_at_ms == 0) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        x.created_at_ms = (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
      }
      rc = mw_memwal_index_entry_encode(&x, &entries[i]);
    }
    if (rc == 0) secs[i] = (mw_section_t){entries[i].data, entries[i].len};
  }
  if (rc == 0) rc = mw_index_section_encode(secs, n, out);
  for (size_t i = 0; entries && i < n; i++) mw_buf_free(&entries[i]);
  free(entries);
  free(secs);
  free(merged);
  return rc;
}

/* --------------------------------------------------------------- manifest */

/* The final fragment list: the previous ones in order (removed ones left
 * out, updated ones swapped for their copies), then the new ones. */
static uint64_t list_fragments(build_t *b, uint64_t first_id) {
  assert(b != NULL);
  const Lance__Table__Manifest *pb = b->prev->manifest.pb;
  uint64_t live = 0;
  b->n_frags = 0;
  for (size_t i = 0; i < pb->n_fragments; i++) {
    Lance__Table__DataFragment *f = pb->fragments[i];
    if (removed(b->u, f->id)) continue;
    for (size_t d = 0; d < b->u->n_deletions; d++)
      if (b->u->deletions[d].fragment_id == f->id) f = &b->updated[d];
    b->frags[b->n_frags++] = f;
  }
  for (size_t i = 0; i < b->u->n_fragments; i++) {
    b->news[i].id = first_id + i;
    b->frags[b->n_frags++] = &b->news[i];
  }
  for (size_t i = 0; i < b->n_frags; i++) {
    const Lance__Table__DataFragment *f = b->frags[i];
    uint64_t dead = f->deletion_file ? f->deletion_file->num_deleted_rows : 0;
    b->any_deletion |= f->deletion_file != NULL;
    live += f->physical_rows > dead ? f->physical_rows - dead : 0;
  }
  return live;
}

static uint64_t next_fragment_id(const mw_table_meta_t *prev) {
  assert(prev != NULL);
  const Lance__Table__Manifest *pb = prev->manifest.pb;
  if (prev->manifest.has_max_fragment_id) return (uint64_t)pb->max_fragment_id + 1;
  uint64_t next = 0;
  for (size_t i = 0; i < pb->n_fragments; i++)
    if (pb->fragments[i]->id + 1 > next) next = pb->fragments[i]->id + 1;
  return next;
}

static int encode_manifest(build_t *b, mw_base_commit_t *out, const mw_buf_t *index_section,
                           mw_err_t *err) {
  const mw_table_meta_t *prev = b->prev;
  Lance__Table__Manifest m = *prev->manifest.pb; /* shallow; see the top comment */
  int64_t ts = b->u->timestamp_ns;
  if (ts == 0) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    ts = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
  }
  Google__Protobuf__Timestamp t = GOOGLE__PROTOBUF__TIMESTAMP__INIT;
  t.seconds = ts / 1000000000;
  t.nanos = (int32_t)(ts % 1000000000);
  Lance__Table__Manifest__WriterVersion wv = LANCE__TABLE__MANIFEST__WRITER_VERSION__INIT;
  wv.library = (char *)"lance";
  wv.version = (char *)"12.0.0";
  uint64_t first = out->first_fragment_id;
  bool has_max = prev->manifest.has_max_fragment_id || b->u->n_fragments > 0;
  if (b->u->n_fragments > 0 && first + b->u->n_fragments - 1 > UINT32_MAX)
    return mw_err_set(err, -EFBIG, "base update: fragment ids past u32");
  m.fragments = b->frags;
  m.n_fragments = b->n_frags;
  m.version = out->version;
  m.timestamp = &t;
  m.writer_version = &wv;
  if (b->u->n_fragments > 0) m.max_fragment_id = (uint32_t)(first + b->u->n_fragments - 1);
  uint64_t flag = b->any_deletion ? MW_FLAG_DELETION_FILES : 0;
  assert((b->u->add_feature_flags & ~MW_FLAG_ZONE_WRITE_SEEDS) == 0);
  m.reader_feature_flags = (m.reader_feature_flags & ~MW_FLAG_DELETION_FILES) | flag | b->u->add_feature_flags;
  m.writer_feature_flags = (m.writer_feature_flags & ~MW_FLAG_DELETION_FILES) | flag | b->u->add_feature_flags;
  m.transaction_file = out->txn_name;
  mw_dmanifest_t tmp = {.pb = &m, .has_max_fragment_id = has_max};
  int rc = mw_base_manifest_file_encode(&tmp, index_section ? index_section->data : NULL,
                                        index_section ? index_section->len : 0, out->txn.data,
                                        out->txn.len, &out->manifest);
  if (rc < 0) return mw_err_set(err, rc, "base update: manifest encode failed");
  return 0;
}

int mw_base_update_build(const mw_table_meta_t *prev, const mw_base_update_t *u,
                         mw_base_commit_t *out, mw_err_t *err) {
  assert(prev != NULL);
  assert(prev->manifest.pb != NULL);
  assert(u != NULL);
  assert(out != NULL);
  mw_base_commit_init(out);
  build_t b = {.prev = prev, .u = u};
  mw_buf_t index_section = MW_BUF_INIT;
  int rc = check_plan(&b, err);
  if (rc == 0 && (rc = make_structs(&b)) < 0) mw_err_set(err, rc, "base update: out of memory");
  if (rc < 0) goto fail;
  out->read_version = prev->version;
  out->version = prev->version + 1;
  out->first_fragment_id = next_fragment_id(prev);
  uint8_t txn_uuid[16];
  char uuid_text[37];
  if (all_zero(u->txn_uuid)) uuid_generate_random(txn_uuid);
  else memcpy(txn_uuid, u->txn_uuid, 16);
  uuid_unparse_lower(txn_uuid, uuid_text);
  int k = snprintf(out->txn_name, sizeof out->txn_name, "%" PRIu64 "-%s.txn", prev->version, uuid_text);
  assert(k > 0);
  assert((size_t)k < sizeof out->txn_name);
  if ((rc = encode_txn(&b, uuid_text, &out->txn)) < 0) {
    mw_err_set(err, rc, "base update: transaction encode failed");
    goto fail;
  }
  out->live_rows = list_fragments(&b, out->first_fragment_id);
  if (prev->manifest.has_index_section) {
    rc = encode_index_section(&b, out->version, &index_section);
    if (rc < 0) {
      mw_err_set(err, rc, "base update: index section encode failed");
      goto fail;
    }
  }
  rc = encode_manifest(&b, out, prev->manifest.has_index_section ? &index_section : NULL, err);
  if (rc < 0) goto fail;
  assert(out->txn.len > 0);
  assert(out->manifest.len > MW_DMANIFEST_FOOTER_BYTES);
  mw_buf_free(&index_section);
  build_free(&b);
  return 0;
fail:
  mw_buf_free(&index_section);
  build_free(&b);
  mw_base_commit_free(out);
  return rc;
}
