/*
 * dataset_manifest.c — Lance dataset manifests (lance-files.md §4; memwal.md
 * §8). See dataset_manifest.h for what is owned.
 *
 * File layout, the SSTable manifest of the unsharded vector (402 bytes):
 *
 *   00000000  7e 01 00 00                 u32 len = 382
 *   00000004  0a 2d 12 02 69 64 ...       Manifest { 1: fields ..., 2: fragment,
 *             ...                         3: version 1, 7: timestamp, 11: 0,
 *             58 00                       <- max_fragment_id 0, written (optional)
 *             6a 0f 0a 05 "lance" 12 06 "12.0.0"   writer_version
 *             7a 0c 0a 05 "lance" 12 03 "2.2"      data_format }
 *   00000182  00 00 00 00 00 00 00 00     u64 pos of the manifest's u32 len = 0
 *             00 00 02 00 4c 41 4e 43     u16 0, u16 2, "LANC"
 *
 * A base manifest puts its sections first: IndexSection at 0 (so the manifest
 * says `index_section: 0`, a present zero), the Transaction after it.
 *
 * Presence: proto3 `optional` is stripped in the build copy of table.proto, so
 * protoc-c cannot tell a present 0 from an absent field. Lance writes several
 * present zeros. Decoding walks the wire (mw_pb_next) to record presence;
 * encoding packs with protoc-c and then splices `key 00` back in front of the
 * first field with a larger tag (protoc-c, like prost, writes fields in
 * ascending tag order, so the result is what prost writes).
 */
#include "lance/dataset_manifest.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lance/shard_manifest.h" /* mw_pb_* wire helpers */

static const uint8_t MAGIC[4] = {'L', 'A', 'N', 'C'};

/* ------------------------------------------------------------- wire helpers */

static int put_key(mw_buf_t *b, uint32_t tag, unsigned wire) {
  return mw_pb_put_varint(b, (uint64_t)tag << 3 | wire);
}

static int put_len_field(mw_buf_t *b, uint32_t tag, const void *p, size_t n) {
  int rc = put_key(b, tag, 2);
  if (rc == 0) rc = mw_pb_put_varint(b, n);
  if (rc == 0) rc = mw_buf_append(b, p, n);
  return rc;
}

/* Pack `msg`, then insert a zero varint field for every tag in `tags`
 * (ascending) that the packed bytes lack. */
static int pack_splice(const ProtobufCMessage *msg, const uint32_t *tags, size_t n_tags,
                       mw_buf_t *out) {
  assert(msg);
  for (size_t i = 1; i < n_tags; i++) assert(tags[i - 1] < tags[i]);
  size_t len = protobuf_c_message_get_packed_size(msg);
  if (len > MW_DMANIFEST_MAX_BYTES) return -EFBIG;
  uint8_t *tmp = malloc(len ? len : 1);
  if (tmp == NULL) return -ENOMEM;
  size_t wrote = protobuf_c_message_pack(msg, tmp);
  assert(wrote == len);
  (void)wrote;
  size_t pos = 0, copied = 0, ti = 0;
  mw_pb_field_t f;
  int rc = 0;
  while (rc == 0 && mw_pb_next(tmp, len, &pos, &f, 0, NULL) > 0) {
    while (rc == 0 && ti < n_tags && tags[ti] < f.tag) {
      rc = mw_buf_append(out, tmp + copied, f.start - copied);
      copied = f.start;
      if (rc == 0) rc = put_key(out, tags[ti], 0);
      if (rc == 0) rc = mw_buf_put_u8(out, 0);
      ti++;
    }
    if (ti < n_tags && tags[ti] == f.tag) ti++; /* non-zero value already there */
  }
  if (rc == 0) rc = mw_buf_append(out, tmp + copied, len - copied);
  for (; rc == 0 && ti < n_tags; ti++) {
    rc = put_key(out, tags[ti], 0);
    if (rc == 0) rc = mw_buf_put_u8(out, 0);
  }
  free(tmp);
  return rc;
}

/* Which of `tags` occur at the top level of p..n (bit i = tags[i]). */
static unsigned presence(const uint8_t *p, size_t n, const uint32_t *tags, size_t n_tags) {
  unsigned seen = 0;
  size_t pos = 0;
  mw_pb_field_t f;
  while (mw_pb_next(p, n, &pos, &f, 0, NULL) > 0)
    for (size_t i = 0; i < n_tags; i++)
      if (f.tag == tags[i]) seen |= 1u << i;
  return seen;
}

static size_t count_tag(const uint8_t *p, size_t n, uint32_t tag) {
  size_t pos = 0, k = 0;
  mw_pb_field_t f;
  while (mw_pb_next(p, n, &pos, &f, 0, NULL) > 0) k += f.tag == tag;
  return k;
}

/* -------------------------------------------------------------------- names */

int mw_dmanifest_name(uint64_t version, char *out, size_t out_len) {
  assert(out);
  if (version == 0 || version == UINT64_MAX) return -EINVAL;
  int k = snprintf(out, out_len, "%020" PRIu64 ".manifest", UINT64_MAX - version);
  if (k < 0 || (size_t)k >= out_len) return -ENOSPC;
  return k;
}

int mw_dmanifest_name_parse(const char *name, uint64_t *version, bool *v2) {
  assert(name);
  assert(version);
  static const char ext[] = ".manifest";
  size_t len = strlen(name), elen = sizeof ext - 1;
  if (len <= elen || strcmp(name + len - elen, ext) != 0) return -EINVAL;
  size_t digits = len - elen;
  if (digits > 20) return -EINVAL;
  uint64_t n = 0;
  for (size_t i = 0; i < digits; i++) {
    if (name[i] < '0' || name[i] > '9') return -EINVAL;
    unsigned d = (unsigned)(name[i] - '0');
    if (n > (UINT64_MAX - d) / 10) return -EINVAL;
    n = n * 10 + d;
  }
  bool is_v2 = digits == 20;
  uint64_t v = is_v2 ? UINT64_MAX - n : n;
  if (v == 0 || v == UINT64_MAX) return -EINVAL;
  *version = v;
  if (v2) *v2 = is_v2;
  return 0;
}

int mw_dmanifest_latest(char *const *names, size_t n, uint64_t *version, size_t *index,
                        mw_err_t *err) {
  assert(version);
  assert(names || n == 0);
  bool seen_v1 = false, seen_v2 = false, any = false;
  uint64_t best = 0;
  size_t best_i = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t v;
    bool v2;
    if (mw_dmanifest_name_parse(names[i], &v, &v2) < 0) continue;
    if (v2) seen_v2 = true;
    else seen_v1 = true;
    if (!any || v > best) {
      best = v;
      best_i = i;
      any = true;
    }
  }
  if (!any) return mw_err_set(err, -ENOENT, "_versions: no manifest file");
  if (seen_v1 && seen_v2)
    return mw_err_set(err, -EBADMSG, "_versions: V1 and V2 manifest names are mixed");
  *version = best;
  if (index) *index = best_i;
  return 0;
}

void mw_data_file_name(const uint8_t uuid[16], char out[MW_DATA_FILE_NAME_BYTES]) {
  assert(uuid != NULL);
  assert(out != NULL);
  uint8_t u[16];
  memcpy(u, uuid, 16);
  u[6] = (uint8_t)((u[6] & 0x0f) | 0x40);
  u[8] = (uint8_t)((u[8] & 0x3f) | 0x80);
  size_t k = 0;
  for (int i = 0; i < 3; i++)
    for (int bit = 7; bit >= 0; bit--) out[k++] = (char)('0' + ((u[i] >> bit) & 1));
  for (int i = 3; i < 16; i++) k += (size_t)snprintf(out + k, 3, "%02x", u[i]);
  memcpy(out + k, ".lance", 7);
  assert(k == 50);
}

/* ------------------------------------------------------------------ framing */

int mw_dmanifest_unframe(const uint8_t *p, size_t n, mw_section_t *manifest, uint64_t *pos,
                         mw_err_t *err) {
  assert(manifest);
  assert(p || n == 0);
  if (n > MW_DMANIFEST_MAX_BYTES)
    return mw_err_set(err, -EBADMSG, "manifest file: %zu bytes, limit %zu", n,
                      MW_DMANIFEST_MAX_BYTES);
  if (n < MW_DMANIFEST_FOOTER_BYTES + 4)
    return mw_err_set(err, -EBADMSG, "manifest file: %zu bytes, too short for a footer", n);
  if (memcmp(p + n - 4, MAGIC, 4) != 0)
    return mw_err_set(err, -EBADMSG, "manifest file: no LANC magic at byte %zu", n - 4);
  uint64_t at = mw_load_u64le(p + n - MW_DMANIFEST_FOOTER_BYTES);
  if (at > n - MW_DMANIFEST_FOOTER_BYTES - 4)
    return mw_err_set(err, -EBADMSG, "manifest file: manifest position %" PRIu64
                      " past the footer (file %zu bytes)", at, n);
  uint32_t len = mw_load_u32le(p + at);
  if ((uint64_t)len != n - at - 4 - MW_DMANIFEST_FOOTER_BYTES)
    return mw_err_set(err, -EBADMSG,
                      "manifest file: manifest at byte %" PRIu64 " is %u bytes but %" PRIu64
                      " bytes lie before the footer",
                      at, len, (uint64_t)(n - at - 4 - MW_DMANIFEST_FOOTER_BYTES));
  manifest->data = p + at + 4;
  manifest->len = len;
  if (pos) *pos = at;
  return 0;
}

int mw_dmanifest_section_at(const uint8_t *p, size_t n, uint64_t off, uint64_t limit,
                            mw_section_t *out, mw_err_t *err) {
  assert(out);
  assert(limit <= n);
  if (off > limit || limit - off < 4)
    return mw_err_set(err, -EBADMSG, "manifest file: section at byte %" PRIu64
                      " lies past the manifest (byte %" PRIu64 ")", off, limit);
  uint32_t len = mw_load_u32le(p + off);
  if (len > limit - off - 4)
    return mw_err_set(err, -EBADMSG, "manifest file: section at byte %" PRIu64
                      " (%u bytes) runs into the manifest at byte %" PRIu64, off, len, limit);
  out->data = p + off + 4;
  out->len = len;
  return 0;
}

int mw_dmanifest_file_encode(const mw_section_t *sections, size_t n_sections,
                             const uint8_t *manifest, size_t manifest_len, mw_buf_t *out) {
  assert(out);
  assert(manifest || manifest_len == 0);
  if (n_sections > MW_DMANIFEST_MAX_SECTIONS || manifest_len > UINT32_MAX) return -EINVAL;
  size_t start = out->len;
  int rc = 0;
  for (size_t i = 0; i < n_sections && rc == 0; i++) {
    if (sections[i].len > UINT32_MAX) return -EINVAL;
    rc = mw_buf_put_u32le(out, (uint32_t)sections[i].len);
    if (rc == 0) rc = mw_buf_append(out, sections[i].data, sections[i].len);
  }
  uint64_t pos = out->len - start;
  if (rc == 0) rc = mw_buf_put_u32le(out, (uint32_t)manifest_len);
  if (rc == 0) rc = mw_buf_append(out, manifest, manifest_len);
  if (rc == 0) rc = mw_buf_put_u64le(out, pos);
  if (rc == 0) rc = mw_buf_put_u16le(out, 0);
  if (rc == 0) rc = mw_buf_put_u16le(out, 2);
  if (rc == 0) rc = mw_buf_append(out, MAGIC, 4);
  if (rc < 0) out->len = start;
  return rc;
}

/* ----------------------------------------------------------------- manifest */

static const uint32_t MANIFEST_ZERO_TAGS[3] = {6, 11, 21};

int mw_dmanifest_decode(const uint8_t *p, size_t n, mw_dmanifest_t *m, mw_err_t *err) {
  assert(m);
  assert(p || n == 0);
  memset(m, 0, sizeof *m);
  if (n > MW_DMANIFEST_MAX_BYTES)
    return mw_err_set(err, -EBADMSG, "manifest: %zu bytes, limit %zu", n, MW_DMANIFEST_MAX_BYTES);
  int rc = mw_pb_check(p, n, 0, "manifest", err);
  if (rc < 0) return rc;
  if (count_tag(p, n, 1) > MW_DMANIFEST_MAX_FIELDS)
    return mw_err_set(err, -EBADMSG, "manifest: more than %d fields", MW_DMANIFEST_MAX_FIELDS);
  if (count_tag(p, n, 2) > MW_DMANIFEST_MAX_FRAGMENTS)
    return mw_err_set(err, -EBADMSG, "manifest: more than %d fragments",
                      MW_DMANIFEST_MAX_FRAGMENTS);
  unsigned seen = presence(p, n, MANIFEST_ZERO_TAGS, 3);
  m->pb = lance__table__manifest__unpack(NULL, n, p);
  if (m->pb == NULL)
    return mw_err_set(err, -EBADMSG,
                      "manifest: protobuf-c rejected the message (a nested message or a field's "
                      "wire type is malformed)");
  m->has_index_section = seen & 1;
  m->has_max_fragment_id = seen & 2;
  m->has_transaction_section = seen & 4;
  /* protobuf-c accepts some non-canonical nested fields (a tag varint with
   * field number 0, e.g. `80 00`) and keeps them as unknown fields that it
   * then re-encodes as bytes it refuses itself. Packing once and unpacking
   * the result proves the message survives our own encoder (found by
   * fuzz_dataset_manifest). Manifests are small; the cost is one copy. */
  size_t len = protobuf_c_message_get_packed_size(&m->pb->base);
  uint8_t *tmp = malloc(len ? len : 1);
  if (tmp == NULL) {
    mw_dmanifest_free(m);
    return mw_err_set(err, -ENOMEM, "manifest: out of memory");
  }
  protobuf_c_message_pack(&m->pb->base, tmp);
  Lance__Table__Manifest *again = lance__table__manifest__unpack(NULL, len, tmp);
  free(tmp);
  if (again == NULL) {
    mw_dmanifest_free(m);
    return mw_err_set(err, -EBADMSG,
                      "manifest: a nested message holds a malformed field (a tag with field "
                      "number 0 or a non-canonical encoding)");
  }
  lance__table__manifest__free_unpacked(again, NULL);
  return 0;
}

void mw_dmanifest_free(mw_dmanifest_t *m) {
  if (m == NULL) return;
  if (m->pb) lance__table__manifest__free_unpacked(m->pb, NULL);
  memset(m, 0, sizeof *m);
}

void mw_dmanifest_stamp(Lance__Table__Manifest *m, Lance__Table__Manifest__WriterVersion *wv,
                        Lance__Table__Manifest__DataStorageFormat *fmt) {
  assert(m != NULL);
  assert(wv != NULL);
  assert(fmt != NULL);
  lance__table__manifest__writer_version__init(wv);
  wv->library = (char *)"lance";
  wv->version = (char *)"12.0.0";
  lance__table__manifest__data_storage_format__init(fmt);
  fmt->file_format = (char *)"lance";
  fmt->version = (char *)"2.2";
  m->writer_version = wv;
  m->data_format = fmt;
}

int mw_dmanifest_pack(const Lance__Table__Manifest *pb, bool has_index_section,
                      bool has_max_fragment_id, bool has_transaction_section, mw_buf_t *out) {
  assert(pb);
  assert(out);
  uint32_t tags[3];
  size_t k = 0;
  if (has_index_section) tags[k++] = 6;
  if (has_max_fragment_id) tags[k++] = 11;
  if (has_transaction_section) tags[k++] = 21;
  return pack_splice(&pb->base, tags, k, out);
}

int mw_dmanifest_encode(const mw_dmanifest_t *m, mw_buf_t *out) {
  assert(m);
  assert(m->pb);
  return mw_dmanifest_pack(m->pb, m->has_index_section, m->has_max_fragment_id,
                           m->has_transaction_section, out);
}

/* --------------------------------------------------------- SSTable manifest */

int mw_sst_manifest_encode(const mw_sst_manifest_params_t *p, mw_buf_t *out, mw_err_t *err) {
  assert(p);
  assert(out);
  if (p->n_fields == 0 || p->n_fields > MW_DMANIFEST_MAX_FIELDS || p->data_file == NULL ||
      p->data_file[0] == '\0' || p->n_columns == 0 || p->n_columns > MW_DMANIFEST_MAX_FIELDS)
    return mw_err_set(err, -EINVAL, "sstable manifest: needs fields, a data file and columns");
  Lance__Table__DataFile df = LANCE__TABLE__DATA_FILE__INIT;
  df.path = (char *)p->data_file;
  df.n_fields = p->n_columns;
  df.fields = (int32_t *)p->field_ids;
  df.n_column_indices = p->n_columns;
  df.column_indices = (int32_t *)p->column_indices;
  df.file_major_version = 2;
  df.file_minor_version = 2;
  df.file_size_bytes = p->file_size_bytes;
  Lance__Table__DataFile *dfp = &df;
  Lance__Table__DeletionFile del = LANCE__TABLE__DELETION_FILE__INIT;
  del.file_type = LANCE__TABLE__DELETION_FILE__DELETION_FILE_TYPE__BITMAP;
  del.read_version = 1;
  del.id = p->deletion_id;
  del.num_deleted_rows = p->num_deleted_rows;
  Lance__Table__DataFragment frag = LANCE__TABLE__DATA_FRAGMENT__INIT;
  frag.id = 0;
  frag.n_files = 1;
  frag.files = &dfp;
  frag.deletion_file = p->has_deletion ? &del : NULL;
  frag.physical_rows = p->physical_rows;
  Lance__Table__DataFragment *fragp = &frag;
  Google__Protobuf__Timestamp ts = GOOGLE__PROTOBUF__TIMESTAMP__INIT;
  ts.seconds = p->timestamp_seconds;
  ts.nanos = p->timestamp_nanos;
  Lance__Table__Manifest__WriterVersion wv;
  Lance__Table__Manifest__DataStorageFormat fmt;
  Lance__Table__Manifest m = LANCE__TABLE__MANIFEST__INIT;
  m.n_fields = p->n_fields;
  m.fields = (Lance__File__Field **)p->fields;
  m.n_fragments = 1;
  m.fragments = &fragp;
  m.version = 1;
  m.timestamp = &ts;
  m.max_fragment_id = 0;
  mw_dmanifest_stamp(&m, &wv, &fmt);
  m.reader_feature_flags = p->feature_flags;
  m.writer_feature_flags = p->feature_flags;
  bool has_index = p->index_section != NULL;
  m.index_section = 0; /* the section goes first, at offset 0 */
  mw_section_t sec = {.data = p->index_section, .len = p->index_section_len};
  mw_buf_t msg = MW_BUF_INIT;
  int rc = mw_dmanifest_pack(&m, has_index, true, false, &msg);
  if (rc == 0) rc = mw_dmanifest_file_encode(has_index ? &sec : NULL, has_index, msg.data, msg.len, out);
  mw_buf_free(&msg);
  return rc;
}

/* ------------------------------------------------------------ index section */

static const uint32_t INDEX_ZERO_TAGS[3] = {7, 8, 9};

void mw_index_section_free(mw_index_section_t *s) {
  if (s == NULL) return;
  for (size_t i = 0; i < s->n; i++) lance__table__index_metadata__free_unpacked(s->items[i].pb, NULL);
  free(s->items);
  s->items = NULL;
  s->n = 0;
}

int mw_index_section_decode(const uint8_t *p, size_t n, mw_index_section_t *s, mw_err_t *err) {
  assert(s);
  assert(p || n == 0);
  memset(s, 0, sizeof *s);
  int rc = mw_pb_check(p, n, 0, "index section", err);
  if (rc < 0) return rc;
  size_t count = count_tag(p, n, 1);
  if (count > MW_DMANIFEST_MAX_INDEXES)
    return mw_err_set(err, -EBADMSG, "index section: %zu indexes, limit %d", count,
                      MW_DMANIFEST_MAX_INDEXES);
  s->items = calloc(count + 1, sizeof *s->items);
  if (s->items == NULL) return -ENOMEM;
  size_t pos = 0;
  mw_pb_field_t f;
  while (mw_pb_next(p, n, &pos, &f, 0, NULL) > 0) {
    if (f.tag != 1) continue;
    if (f.wire != 2)
      return mw_err_set(err, -EBADMSG, "index section: field 1 at byte %zu is not a message",
                        f.start);
    rc = mw_pb_check(f.data, f.len, (size_t)(f.data - p), "index metadata", err);
    if (rc < 0) return rc;
    mw_index_entry_t *e = &s->items[s->n];
    e->pb = lance__table__index_metadata__unpack(NULL, f.len, f.data);
    if (e->pb == NULL)
      return mw_err_set(err, -EBADMSG, "index section: IndexMetadata at byte %zu is malformed",
                        f.start);
    s->n++;
    unsigned seen = presence(f.data, f.len, INDEX_ZERO_TAGS, 3);
    e->has_index_version = seen & 1;
    e->has_created_at = seen & 2;
    e->has_base_id = seen & 4;
  }
  return 0;
}

int mw_index_entry_encode(const mw_index_entry_t *e, mw_buf_t *out) {
  assert(e);
  assert(e->pb);
  uint32_t tags[3];
  size_t k = 0;
  if (e->has_index_version) tags[k++] = 7;
  if (e->has_created_at) tags[k++] = 8;
  if (e->has_base_id) tags[k++] = 9;
  return pack_splice(&e->pb->base, tags, k, out);
}

int mw_index_section_encode(const mw_section_t *entries, size_t n, mw_buf_t *out) {
  assert(out);
  assert(entries || n == 0);
  if (n > MW_DMANIFEST_MAX_INDEXES) return -EINVAL;
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++)
    rc = put_len_field(out, 1, entries[i].data, entries[i].len);
  return rc;
}

/* ------------------------------------------------------------ MemWAL index */

void mw_memwal_index_init(mw_memwal_index_t *x) {
  assert(x);
  memset(x, 0, sizeof *x);
  x->source_field_id = -1;
}

void mw_memwal_index_free(mw_memwal_index_t *x) {
  if (x == NULL) return;
  free(x->sharding_field_id);
  free(x->result_type);
  mw_kvs_free(&x->parameters);
  for (size_t i = 0; i < x->n_maintained_indexes; i++) free(x->maintained_indexes[i]);
  free(x->maintained_indexes);
  free(x->compacted);
  mw_kvs_free(&x->writer_config_defaults);
  mw_memwal_index_init(x);
}

static int parse_u32_dec(const char *s, uint32_t lo, uint32_t hi, uint32_t *out) {
  if (s == NULL || *s == '\0' || strlen(s) > 10) return -1;
  uint64_t v = 0;
  for (const char *c = s; *c; c++) {
    if (*c < '0' || *c > '9') return -1;
    v = v * 10 + (uint64_t)(*c - '0');
  }
  if (v < lo || v > hi) return -1;
  *out = (uint32_t)v;
  return 0;
}

static char *xstrdup(const char *s) { return strdup(s ? s : ""); }

static int decode_spec(const Lance__Table__ShardingSpec *spec, mw_memwal_index_t *x,
                       mw_err_t *err) {
  x->has_spec = true;
  x->spec_id = spec->spec_id;
  if (spec->n_fields != 1)
    return mw_err_set(err, -ENOTSUP, "memwal index: sharding spec %u has %zu fields, want 1",
                      spec->spec_id, spec->n_fields);
  const Lance__Table__ShardingField *sf = spec->fields[0];
  if (sf->expression && sf->expression[0])
    return mw_err_set(err, -ENOTSUP, "memwal index: sharding expressions are not supported");
  const char *t = sf->transform ? sf->transform : "";
  if (strcmp(t, "unsharded") == 0) x->kind = MW_SHARDING_UNSHARDED;
  else if (strcmp(t, "bucket") == 0) x->kind = MW_SHARDING_BUCKET;
  else if (strcmp(t, "identity") == 0) x->kind = MW_SHARDING_IDENTITY;
  else return mw_err_set(err, -ENOTSUP, "memwal index: sharding transform '%.64s'", t);
  size_t want_src = x->kind == MW_SHARDING_UNSHARDED ? 0 : 1;
  if (sf->n_source_ids != want_src)
    return mw_err_set(err, -ENOTSUP, "memwal index: transform %s with %zu source fields", t,
                      sf->n_source_ids);
  x->n_source_ids = sf->n_source_ids;
  for (size_t i = 0; i < sf->n_source_ids; i++) x->source_ids[i] = sf->source_ids[i];
  x->source_field_id = x->n_source_ids ? x->source_ids[0] : -1;
  x->sharding_field_id = xstrdup(sf->field_id);
  x->result_type = xstrdup(sf->result_type);
  if (!x->sharding_field_id || !x->result_type) return -ENOMEM;
  if (sf->n_parameters > MW_MEMWAL_MAX_LIST)
    return mw_err_set(err, -EBADMSG, "memwal index: %zu sharding parameters", sf->n_parameters);
  for (size_t i = 0; i < sf->n_parameters; i++) {
    const char *k = sf->parameters[i]->key ? sf->parameters[i]->key : "";
    const char *v = sf->parameters[i]->value ? sf->parameters[i]->value : "";
    int rc = mw_kvs_set(&x->parameters, k, v, strlen(v));
    if (rc < 0) return rc;
  }
  if (x->kind == MW_SHARDING_BUCKET) {
    const mw_kv_t *nb = mw_kvs_get(&x->parameters, "num_buckets");
    if (nb == NULL ||
        parse_u32_dec((const char *)nb->value, 1, MW_MEMWAL_MAX_BUCKETS, &x->num_buckets) < 0)
      return mw_err_set(err, -EBADMSG, "memwal index: bucket spec needs num_buckets in 1..%d",
                        MW_MEMWAL_MAX_BUCKETS);
  }
  return 0;
}

static int decode_details(const Lance__Table__MemWalIndexDetails *d, mw_memwal_index_t *x,
                          mw_err_t *err) {
  x->snapshot_ts_millis = d->snapshot_ts_millis;
  x->num_shards = d->num_shards;
  if (d->n_sharding_specs > 1)
    return mw_err_set(err, -ENOTSUP, "memwal index: %zu sharding specs, only one supported",
                      d->n_sharding_specs);
  if (d->n_sharding_specs == 1) {
    int rc = decode_spec(d->sharding_specs[0], x, err);
    if (rc < 0) return rc;
  }
  if (d->n_maintained_indexes > MW_MEMWAL_MAX_LIST || d->n_compacted_sstables > MW_MEMWAL_MAX_LIST ||
      d->n_writer_config_defaults > MW_MEMWAL_MAX_LIST)
    return mw_err_set(err, -EBADMSG, "memwal index: a list is longer than %d",
                      MW_MEMWAL_MAX_LIST);
  x->maintained_indexes = calloc(d->n_maintained_indexes + 1, sizeof(char *));
  x->compacted = calloc(d->n_compacted_sstables + 1, sizeof *x->compacted);
  if (!x->maintained_indexes || !x->compacted) return -ENOMEM;
  for (size_t i = 0; i < d->n_maintained_indexes; i++) {
    x->maintained_indexes[i] = xstrdup(d->maintained_indexes[i]);
    if (x->maintained_indexes[i] == NULL) return -ENOMEM;
    x->n_maintained_indexes++;
  }
  for (size_t i = 0; i < d->n_compacted_sstables; i++) {
    const Lance__Table__CompactedSsTable *c = d->compacted_sstables[i];
    if (c->shard_id == NULL || c->shard_id->uuid.len != 16)
      return mw_err_set(err, -EBADMSG, "memwal index: compacted_sstables[%zu] shard id", i);
    memcpy(x->compacted[i].shard_id, c->shard_id->uuid.data, 16);
    x->compacted[i].generation = c->generation;
    x->n_compacted++;
  }
  for (size_t i = 0; i < d->n_writer_config_defaults; i++) {
    const char *k = d->writer_config_defaults[i]->key ? d->writer_config_defaults[i]->key : "";
    const char *v = d->writer_config_defaults[i]->value ? d->writer_config_defaults[i]->value : "";
    int rc = mw_kvs_set(&x->writer_config_defaults, k, v, strlen(v));
    if (rc < 0) return rc;
  }
  return 0;
}

static bool type_url_ok(const char *url) {
  if (url == NULL) return false;
  size_t n = strlen(url), k = strlen(MW_MEMWAL_DETAILS_TYPE_URL);
  return n >= k && strcmp(url + n - k, MW_MEMWAL_DETAILS_TYPE_URL) == 0;
}

int mw_memwal_index_decode(const Lance__Table__IndexMetadata *pb, mw_memwal_index_t *x,
                           mw_err_t *err) {
  assert(pb);
  assert(x);
  mw_memwal_index_init(x);
  if (pb->uuid == NULL || pb->uuid->uuid.len != 16)
    return mw_err_set(err, -EBADMSG, "memwal index: uuid missing or not 16 bytes");
  memcpy(x->uuid, pb->uuid->uuid.data, 16);
  x->dataset_version = pb->dataset_version;
  x->created_at_ms = pb->created_at;
  if (pb->index_details == NULL || !type_url_ok(pb->index_details->type_url))
    return mw_err_set(err, -EBADMSG, "memwal index: details are not a %s",
                      MW_MEMWAL_DETAILS_TYPE_URL);
  const ProtobufCBinaryData *v = &pb->index_details->value;
  int rc = mw_pb_check(v->data, v->len, 0, "memwal index details", err);
  if (rc < 0) return rc;
  Lance__Table__MemWalIndexDetails *d =
      lance__table__mem_wal_index_details__unpack(NULL, v->len, v->data);
  if (d == NULL) return mw_err_set(err, -EBADMSG, "memwal index: details are malformed");
  rc = decode_details(d, x, err);
  lance__table__mem_wal_index_details__free_unpacked(d, NULL);
  return rc;
}

/* The repeated members of MemWalIndexDetails as the generated structs
 * want them (an array of entries and an array of pointers to them, one
 * spare slot each so none is calloc(0)), borrowing x's bytes. */
typedef struct details_arrays {
  Lance__Table__ShardingField__ParametersEntry *pe, **pep;
  Lance__Table__MemWalIndexDetails__WriterConfigDefaultsEntry *we, **wep;
  Lance__Table__CompactedSsTable *ce, **cep;
  Lance__Table__UUID *cu;
} details_arrays_t;

static void details_arrays_free(details_arrays_t *a) {
  assert(a != NULL);
  free(a->pe);
  free(a->pep);
  free(a->we);
  free(a->wep);
  free(a->ce);
  free(a->cep);
  free(a->cu);
}

static int details_arrays_fill(const mw_memwal_index_t *x, details_arrays_t *a) {
  assert(x != NULL);
  assert(a != NULL);
  size_t np = x->parameters.n, nw = x->writer_config_defaults.n, nc = x->n_compacted;
  a->pe = calloc(np + 1, sizeof *a->pe);
  a->pep = calloc(np + 1, sizeof *a->pep);
  a->we = calloc(nw + 1, sizeof *a->we);
  a->wep = calloc(nw + 1, sizeof *a->wep);
  a->ce = calloc(nc + 1, sizeof *a->ce);
  a->cep = calloc(nc + 1, sizeof *a->cep);
  a->cu = calloc(nc + 1, sizeof *a->cu);
  if (!a->pe || !a->pep || !a->we || !a->wep || !a->ce || !a->cep || !a->cu) return -ENOMEM;
  for (size_t i = 0; i < np; i++) {
    lance__table__sharding_field__parameters_entry__init(&a->pe[i]);
    a->pe[i].key = x->parameters.items[i].key;
    a->pe[i].value = (char *)x->parameters.items[i].value;
    a->pep[i] = &a->pe[i];
  }
  for (size_t i = 0; i < nw; i++) {
    lance__table__mem_wal_index_details__writer_config_defaults_entry__init(&a->we[i]);
    a->we[i].key = x->writer_config_defaults.items[i].key;
    a->we[i].value = (char *)x->writer_config_defaults.items[i].value;
    a->wep[i] = &a->we[i];
  }
  for (size_t i = 0; i < nc; i++) {
    lance__table__uuid__init(&a->cu[i]);
    a->cu[i].uuid.data = (uint8_t *)x->compacted[i].shard_id;
    a->cu[i].uuid.len = 16;
    lance__table__compacted_ss_table__init(&a->ce[i]);
    a->ce[i].shard_id = &a->cu[i];
    a->ce[i].generation = x->compacted[i].generation;
    a->cep[i] = &a->ce[i];
  }
  return 0;
}

int mw_memwal_details_encode(const mw_memwal_index_t *x, mw_buf_t *out) {
  assert(x);
  assert(out);
  if (x->n_source_ids > MW_MEMWAL_MAX_SOURCE_IDS) return -EINVAL;
  size_t np = x->parameters.n, nw = x->writer_config_defaults.n, nc = x->n_compacted;
  details_arrays_t a = {0};
  int rc = details_arrays_fill(x, &a);
  if (rc < 0) goto fail;
  static const char *const transforms[] = {"", "unsharded", "bucket", "identity"};
  Lance__Table__ShardingField sf = LANCE__TABLE__SHARDING_FIELD__INIT;
  sf.field_id = x->sharding_field_id ? x->sharding_field_id : (char *)"";
  sf.n_source_ids = x->n_source_ids;
  sf.source_ids = (int32_t *)x->source_ids;
  sf.transform = (char *)transforms[x->kind <= MW_SHARDING_IDENTITY ? x->kind : 0];
  sf.result_type = x->result_type ? x->result_type : (char *)"";
  sf.n_parameters = np;
  sf.parameters = a.pep;
  Lance__Table__ShardingField *sfp = &sf;
  Lance__Table__ShardingSpec spec = LANCE__TABLE__SHARDING_SPEC__INIT;
  spec.spec_id = x->spec_id;
  spec.n_fields = 1;
  spec.fields = &sfp;
  Lance__Table__ShardingSpec *specp = &spec;
  Lance__Table__MemWalIndexDetails d = LANCE__TABLE__MEM_WAL_INDEX_DETAILS__INIT;
  d.snapshot_ts_millis = x->snapshot_ts_millis;
  d.num_shards = x->num_shards;
  d.n_sharding_specs = x->has_spec ? 1 : 0;
  d.sharding_specs = &specp;
  d.n_maintained_indexes = x->n_maintained_indexes;
  d.maintained_indexes = x->maintained_indexes;
  d.n_compacted_sstables = nc;
  d.compacted_sstables = a.cep;
  d.n_writer_config_defaults = nw;
  d.writer_config_defaults = a.wep;
  rc = pack_splice(&d.base, NULL, 0, out);
fail:
  details_arrays_free(&a);
  return rc;
}

int mw_memwal_index_entry_encode(const mw_memwal_index_t *x, mw_buf_t *out) {
  assert(x);
  assert(out);
  mw_buf_t details = MW_BUF_INIT;
  int rc = mw_memwal_details_encode(x, &details);
  if (rc < 0) goto fail;
  Lance__Table__UUID uuid = LANCE__TABLE__UUID__INIT;
  uuid.uuid.data = (uint8_t *)x->uuid;
  uuid.uuid.len = 16;
  Google__Protobuf__Any any = GOOGLE__PROTOBUF__ANY__INIT;
  any.type_url = (char *)MW_MEMWAL_DETAILS_TYPE_URL;
  any.value.data = details.data;
  any.value.len = details.len;
  Lance__Table__IndexMetadata im = LANCE__TABLE__INDEX_METADATA__INIT;
  im.uuid = &uuid;
  im.name = (char *)MW_MEMWAL_INDEX_NAME;
  im.dataset_version = x->dataset_version;
  im.index_details = &any;
  im.index_version = 0;
  im.created_at = x->created_at_ms;
  static const uint32_t tags[1] = {7}; /* index_version 0 is written */
  rc = pack_splice(&im.base, tags, 1, out);
fail:
  mw_buf_free(&details);
  return rc;
}

int mw_create_index_txn_encode(uint64_t read_version, const char *uuid_text,
                               const uint8_t *entry, size_t entry_len, mw_buf_t *out) {
  assert(out);
  assert(entry || entry_len == 0);
  size_t start = out->len;
  mw_buf_t inner = MW_BUF_INIT;
  int rc = 0;
  if (read_version) {
    rc = put_key(out, 1, 0);
    if (rc == 0) rc = mw_pb_put_varint(out, read_version);
  }
  if (rc == 0 && uuid_text && uuid_text[0])
    rc = put_len_field(out, 2, uuid_text, strlen(uuid_text));
  if (rc == 0) rc = put_len_field(&inner, 1, entry, entry_len); /* CreateIndex.new_indices */
  if (rc == 0) rc = put_len_field(out, 103, inner.data, inner.len); /* Transaction.create_index */
  mw_buf_free(&inner);
  if (rc < 0) out->len = start;
  return rc;
}

int mw_base_manifest_file_encode(mw_dmanifest_t *m, const uint8_t *index_section,
                                 size_t index_len, const uint8_t *txn, size_t txn_len,
                                 mw_buf_t *out) {
  assert(m);
  assert(m->pb);
  assert(out);
  mw_section_t secs[2];
  size_t k = 0;
  uint64_t off = 0;
  m->has_index_section = index_section != NULL;
  m->pb->index_section = 0;
  if (index_section) {
    m->pb->index_section = off;
    secs[k++] = (mw_section_t){index_section, index_len};
    off += 4 + index_len;
  }
  m->has_transaction_section = txn != NULL;
  m->pb->transaction_section = txn ? off : 0;
  if (txn) secs[k++] = (mw_section_t){txn, txn_len};
  mw_buf_t msg = MW_BUF_INIT;
  int rc = mw_dmanifest_encode(m, &msg);
  if (rc == 0) rc = mw_dmanifest_file_encode(secs, k, msg.data, msg.len, out);
  mw_buf_free(&msg);
  return rc;
}

/* ------------------------------------------------------------- table meta */

static const char *const FLAG_NAMES[] = {
    "deletion files", "stable row ids", "v2 format (deprecated)", "table config",
    "multiple base paths", "transaction files disabled", "data overlay files",
    "covering index fields", "mixed data file versions"};

const char *mw_feature_flag_name(int bit) {
  if (bit == 16) return "zone write seeds (FLAG_ZONE_WRITE_SEEDS)";
  if (bit >= 0 && bit < (int)(sizeof FLAG_NAMES / sizeof FLAG_NAMES[0])) return FLAG_NAMES[bit];
  return "unknown";
}

static int check_flags(uint64_t flags, uint64_t accept, const char *which, mw_err_t *err) {
  uint64_t bad = flags & ~(MW_TABLE_FLAGS_SUPPORTED | accept);
  if (bad == 0) return 0;
  int bit = __builtin_ctzll(bad);
  if ((UINT64_C(1) << bit) == MW_FLAG_ZONE_WRITE_SEEDS)
    return mw_err_set(err, -ENOTSUP,
                      "table: %s feature flag bit 16 (1<<16, FLAG_ZONE_WRITE_SEEDS) is set: its data "
                      "files carry zone write seeds v1; memwald writes to such a table only with "
                      "zone_write_seeds = true", which);
  return mw_err_set(err, -ENOTSUP, "table: %s feature flag bit %d (1<<%d, %s) is not supported",
                    which, bit, bit, mw_feature_flag_name(bit));
}

static int find_pk(mw_table_meta_t *t, mw_err_t *err) {
  const Lance__Table__Manifest *pb = t->manifest.pb;
  uint32_t pos[MW_TABLE_MAX_PK_FIELDS];
  for (size_t i = 0; i < pb->n_fields; i++) {
    const Lance__File__Field *f = pb->fields[i];
    if (f->name == NULL || f->name[0] == '\0')
      return mw_err_set(err, -EBADMSG, "table: field %zu has no name", i);
    if (!f->unenforced_primary_key) continue;
    if (t->n_pk == MW_TABLE_MAX_PK_FIELDS)
      return mw_err_set(err, -ENOTSUP, "table: more than %d primary-key fields",
                        MW_TABLE_MAX_PK_FIELDS);
    /* insertion sort by (position, field order) */
    size_t j = t->n_pk++;
    uint32_t p = f->unenforced_primary_key_position;
    while (j > 0 && pos[j - 1] > p) {
      pos[j] = pos[j - 1];
      t->pk_field_ids[j] = t->pk_field_ids[j - 1];
      j--;
    }
    pos[j] = p;
    t->pk_field_ids[j] = f->id;
  }
  return 0;
}

int mw_table_meta_read(const uint8_t *file, size_t n, mw_table_meta_t *t, mw_err_t *err) {
  return mw_table_meta_read_ex(file, n, 0, t, err);
}

int mw_table_meta_read_ex(const uint8_t *file, size_t n, uint64_t accept_flags,
                          mw_table_meta_t *t, mw_err_t *err) {
  assert(t);
  assert(file || n == 0);
  assert((accept_flags & ~MW_FLAG_ZONE_WRITE_SEEDS) == 0);
  memset(t, 0, sizeof *t);
  mw_schema_init(&t->schema);
  mw_memwal_index_init(&t->memwal);
  mw_section_t msg;
  uint64_t mpos;
  int rc = mw_dmanifest_unframe(file, n, &msg, &mpos, err);
  if (rc < 0) return rc;
  rc = mw_dmanifest_decode(msg.data, msg.len, &t->manifest, err);
  if (rc < 0) return rc;
  const Lance__Table__Manifest *pb = t->manifest.pb;
  t->version = pb->version;
  t->reader_feature_flags = pb->reader_feature_flags;
  t->writer_feature_flags = pb->writer_feature_flags;
  rc = check_flags(pb->reader_feature_flags, accept_flags, "reader", err);
  if (rc == 0) rc = check_flags(pb->writer_feature_flags, accept_flags, "writer", err);
  if (rc < 0) return rc;
  if (pb->data_format && pb->data_format->version) {
    if (strlen(pb->data_format->version) >= sizeof t->data_storage_version)
      return mw_err_set(err, -EBADMSG, "table: data storage version too long");
    strcpy(t->data_storage_version, pb->data_format->version);
  }
  rc = find_pk(t, err);
  if (rc == 0) rc = mw_lance_schema_from_fields(pb->fields, pb->n_fields, &t->schema, err);
  if (rc < 0 || !t->manifest.has_index_section) return rc;
  mw_section_t sec;
  rc = mw_dmanifest_section_at(file, n, pb->index_section, mpos, &sec, err);
  if (rc == 0) rc = mw_index_section_decode(sec.data, sec.len, &t->indexes, err);
  for (size_t i = 0; rc == 0 && i < t->indexes.n; i++) {
    const Lance__Table__IndexMetadata *im = t->indexes.items[i].pb;
    if (im->name == NULL || strcmp(im->name, MW_MEMWAL_INDEX_NAME) != 0) continue;
    if (t->has_memwal)
      return mw_err_set(err, -EBADMSG, "table: more than one %s index", MW_MEMWAL_INDEX_NAME);
    t->has_memwal = true;
    rc = mw_memwal_index_decode(im, &t->memwal, err);
  }
  return rc;
}

void mw_table_meta_free(mw_table_meta_t *t) {
  if (t == NULL) return;
  mw_dmanifest_free(&t->manifest);
  mw_schema_free(&t->schema);
  mw_memwal_index_free(&t->memwal);
  mw_index_section_free(&t->indexes);
  memset(t, 0, sizeof *t);
}

int mw_table_meta_field(const mw_table_meta_t *t, int32_t id) {
  assert(t);
  assert(t->manifest.pb);
  for (size_t i = 0; i < t->manifest.pb->n_fields; i++)
    if (t->manifest.pb->fields[i]->id == id) return (int)i;
  return -ENOENT;
}
