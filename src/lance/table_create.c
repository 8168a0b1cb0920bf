/*
 * table_create.c — the two first versions of a LanceDB table with MemWAL.
 *
 * Design: everything is built from the generated protobuf structs on the
 * stack plus dataset_manifest.h's writers (IndexMetadata, CreateIndex
 * transaction, framed base manifest). The only message encoded by hand here
 * is the Overwrite transaction (transaction.proto is not in our build):
 *
 *   Transaction { 2: uuid text, 102: Overwrite { 2: Field, 2: Field, ... } }
 *
 * read_version 0 is omitted (proto3 default), as Lance does for version 1.
 * Version 1's manifest carries that same transaction inline as its only
 * section (transaction_section = 0, written); version 2 puts the IndexSection
 * at 0 and the CreateIndex transaction after it (see the header's sample).
 */
#include "lance/table_create.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uuid/uuid.h>

#include "lance/dataset_manifest.h"
#include "lance/lance_schema.h"
#include "lance/shard_manifest.h" /* mw_pb_put_varint */

static int put_len(mw_buf_t *b, uint32_t tag, const void *p, size_t n) {
  assert(b != NULL);
  assert(p != NULL || n == 0);
  int rc = mw_pb_put_varint(b, (uint64_t)tag << 3 | 2);
  if (rc == 0) rc = mw_pb_put_varint(b, n);
  if (rc == 0) rc = mw_buf_append(b, p, n);
  return rc;
}

static bool all_zero(const uint8_t *u) {
  for (int i = 0; i < 16; i++)
    if (u[i]) return false;
  return true;
}

static void uuid_or_random(const uint8_t in[16], uint8_t out[16]) {
  assert(in != NULL);
  assert(out != NULL);
  if (all_zero(in)) uuid_generate_random(out);
  else memcpy(out, in, 16);
}

const char *mw_table_identity_result_type(mw_type_t t) {
  switch (t) {
  case MW_T_INT32: return "int32";
  case MW_T_INT64: return "int64";
  case MW_T_UINT32: return "uint32";
  case MW_T_UINT64: return "uint64";
  case MW_T_UTF8: return "utf8";
  case MW_T_BOOL: return "boolean";
  default: return NULL;
  }
}

/* Transaction{2: uuid, 102: Overwrite{2: fields}}. */
static int overwrite_txn(Lance__File__Field *const *fields, size_t n, const char *uuid_text,
                         mw_buf_t *out) {
  assert(fields);
  assert(uuid_text);
  mw_buf_t inner = MW_BUF_INIT, one = MW_BUF_INIT;
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++) {
    size_t len = lance__file__field__get_packed_size(fields[i]);
    mw_buf_reset(&one);
    uint8_t *p = mw_buf_extend(&one, len);
    if (!p && len) rc = -ENOMEM;
    if (rc == 0) {
      lance__file__field__pack(fields[i], p);
      rc = put_len(&inner, 2, one.data, len);
    }
  }
  if (rc == 0) rc = put_len(out, 2, uuid_text, strlen(uuid_text));
  if (rc == 0) rc = put_len(out, 102, inner.data, inner.len);
  mw_buf_free(&inner);
  mw_buf_free(&one);
  return rc;
}

static void now_ts(int64_t *s, int32_t *ns) {
  assert(s != NULL);
  assert(ns != NULL);
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  *s = t.tv_sec;
  *ns = (int32_t)t.tv_nsec;
}

static int check_params(const mw_table_create_params_t *p, mw_err_t *err) {
  assert(p != NULL);
  const mw_schema_t *s = p->schema;
  if (!s || s->n_fields == 0 || s->n_fields > MW_DMANIFEST_MAX_FIELDS)
    return mw_err_set(err, -EINVAL, "table create: empty schema");
  bool has_pk = false;
  for (size_t i = 0; i < s->n_fields; i++) has_pk |= s->fields[i].pk_position != 0;
  if (!has_pk) return mw_err_set(err, -EINVAL, "table create: the schema has no primary key");
  if (!p->spec) return mw_err_set(err, -EINVAL, "table create: no spec");
  if (p->spec->kind != MW_SHARD_UNSHARDED &&
      (p->spec->column < 0 || (size_t)p->spec->column >= s->n_fields))
    return mw_err_set(err, -EINVAL, "table create: spec column %d out of range", p->spec->column);
  if (p->spec->kind == MW_SHARD_BUCKET &&
      (p->spec->num_buckets < 1 || p->spec->num_buckets > MW_SHARD_SPEC_MAX_BUCKETS))
    return mw_err_set(err, -EINVAL, "table create: num_buckets %" PRIu32 " not in 1..1024",
                      p->spec->num_buckets);
  if (p->spec->kind == MW_SHARD_IDENTITY &&
      !mw_table_identity_result_type(s->fields[p->spec->column].type))
    return mw_err_set(err, -ENOTSUP, "table create: identity(%s): LanceDB refuses type %s",
                      s->fields[p->spec->column].name,
                      mw_type_name(s->fields[p->spec->column].type));
  if (p->writer_config_defaults && p->writer_config_defaults->n > MW_TABLE_CREATE_MAX_WRITER_DEFAULTS)
    return mw_err_set(err, -EINVAL, "table create: too many writer_config_defaults");
  return 0;
}

/* The MemWAL index description for the spec (memwal.md §8.2). */
static int memwal_fill(const mw_table_create_params_t *p, const uint8_t uuid[16],
                       mw_memwal_index_t *x) {
  assert(p != NULL);
  const mw_shard_spec_t *sp = p->spec;
  memcpy(x->uuid, uuid, 16);
  x->dataset_version = 1;
  x->created_at_ms = p->created_at_ms;
  x->has_spec = true;
  x->spec_id = 1;
  x->sharding_field_id = strdup("bucket");
  const char *rt = "int32";
  if (sp->kind == MW_SHARD_UNSHARDED) {
    x->kind = MW_SHARDING_UNSHARDED;
    x->num_shards = 1;
    x->source_field_id = -1;
  } else {
    const mw_field_t *f = &p->schema->fields[sp->column];
    x->source_ids[0] = f->id >= 0 ? f->id : sp->column;
    x->n_source_ids = 1;
    x->source_field_id = x->source_ids[0];
    if (sp->kind == MW_SHARD_BUCKET) {
      char nb[16];
      snprintf(nb, sizeof nb, "%" PRIu32, sp->num_buckets);
      x->kind = MW_SHARDING_BUCKET;
      x->num_shards = sp->num_buckets;
      x->num_buckets = sp->num_buckets;
      if (mw_kvs_set(&x->parameters, "num_buckets", nb, strlen(nb)) < 0) return -ENOMEM;
    } else {
      x->kind = MW_SHARDING_IDENTITY;
      x->num_shards = 0;
      rt = mw_table_identity_result_type(f->type);
    }
  }
  x->result_type = strdup(rt);
  if (!x->sharding_field_id || !x->result_type) return -ENOMEM;
  if (p->writer_config_defaults && mw_kvs_copy(&x->writer_config_defaults, p->writer_config_defaults) < 0)
    return -ENOMEM;
  return 0;
}

static mw_table_file_t *file_add(mw_table_files_t *f, const char *fmt, const char *arg) {
  assert(f->n < MW_TABLE_CREATE_FILES);
  mw_table_file_t *x = &f->files[f->n++];
  snprintf(x->path, sizeof x->path, fmt, arg);
  return x;
}

static int manifest_file(Lance__File__Field **fields, size_t n, uint64_t version, int64_t s,
                         int32_t ns, const char *txn_name, const mw_buf_t *index_section,
                         const mw_buf_t *txn, mw_buf_t *out) {
  assert(txn != NULL);
  Google__Protobuf__Timestamp ts = GOOGLE__PROTOBUF__TIMESTAMP__INIT;
  ts.seconds = s;
  ts.nanos = ns;
  Lance__Table__Manifest__WriterVersion wv;
  Lance__Table__Manifest__DataStorageFormat fmt;
  Lance__Table__Manifest m = LANCE__TABLE__MANIFEST__INIT;
  m.n_fields = n;
  m.fields = fields;
  m.version = version;
  m.timestamp = &ts;
  mw_dmanifest_stamp(&m, &wv, &fmt);
  m.transaction_file = (char *)txn_name;
  mw_dmanifest_t dm = {.pb = &m};
  return mw_base_manifest_file_encode(&dm, index_section ? index_section->data : NULL,
                                      index_section ? index_section->len : 0, txn->data, txn->len,
                                      out);
}

int mw_table_create_encode(const mw_table_create_params_t *p, mw_table_files_t *out,
                           mw_err_t *err) {
  assert(p);
  assert(out);
  memset(out, 0, sizeof *out);
  Lance__File__Field **fields = NULL;
  size_t n_fields = 0;
  mw_memwal_index_t x;
  mw_memwal_index_init(&x);
  mw_buf_t entry = MW_BUF_INIT, section = MW_BUF_INIT;
  int rc = check_params(p, err);
  if (rc < 0) goto fail;
  uint8_t u1[16], u2[16], ui[16];
  uuid_or_random(p->txn1_uuid, u1);
  uuid_or_random(p->txn2_uuid, u2);
  uuid_or_random(p->index_uuid, ui);
  char t1[37], t2[37], name[MW_TABLE_CREATE_PATH_BYTES];
  uuid_unparse_lower(u1, t1);
  uuid_unparse_lower(u2, t2);
  int64_t s1 = p->v1_seconds, s2 = p->v2_seconds;
  int32_t n1 = p->v1_nanos, n2 = p->v2_nanos;
  if (s1 == 0 && n1 == 0) now_ts(&s1, &n1);
  if (s2 == 0 && n2 == 0) now_ts(&s2, &n2);
  mw_table_create_params_t q = *p;
  if (q.created_at_ms == 0) q.created_at_ms = (uint64_t)s2 * 1000 + (uint64_t)n2 / 1000000;

  rc = mw_lance_fields_from_schema(p->schema, &fields, &n_fields);
  if (rc < 0) {
    mw_err_set(err, rc, "table create: schema -> Lance fields failed");
    goto fail;
  }
  /* version 1 */
  mw_table_file_t *txn1 = file_add(out, "_transactions/0-%s.txn", t1);
  rc = overwrite_txn(fields, n_fields, t1, &txn1->bytes);
  if (rc < 0) goto fail;
  snprintf(name, sizeof name, "0-%s.txn", t1);
  mw_table_file_t *man1 = file_add(out, "_versions/%s", "18446744073709551614.manifest");
  rc = manifest_file(fields, n_fields, 1, s1, n1, name, NULL, &txn1->bytes, &man1->bytes);
  if (rc < 0) goto fail;
  /* version 2: the MemWAL index */
  rc = memwal_fill(&q, ui, &x);
  if (rc == 0) rc = mw_memwal_index_entry_encode(&x, &entry);
  mw_table_file_t *txn2 = file_add(out, "_transactions/1-%s.txn", t2);
  if (rc == 0) rc = mw_create_index_txn_encode(1, t2, entry.data, entry.len, &txn2->bytes);
  mw_section_t es = {entry.data, entry.len};
  if (rc == 0) rc = mw_index_section_encode(&es, 1, &section);
  if (rc < 0) goto fail;
  snprintf(name, sizeof name, "1-%s.txn", t2);
  mw_table_file_t *man2 = file_add(out, "_versions/%s", "18446744073709551613.manifest");
  rc = manifest_file(fields, n_fields, 2, s2, n2, name, &section, &txn2->bytes, &man2->bytes);
  if (rc < 0) goto fail;
  mw_table_file_t *hint = file_add(out, "_versions/%s", "latest_version_hint.json");
  rc = mw_buf_append(&hint->bytes, "{\"version\":2}", 13);
  assert(rc < 0 || out->n == MW_TABLE_CREATE_FILES);
fail:
  if (rc < 0 && err && err->code == 0) mw_err_set(err, rc, "table create: %s", mw_strerror(rc));
  if (fields) mw_lance_fields_free(fields, n_fields);
  mw_memwal_index_free(&x);
  mw_buf_free(&entry);
  mw_buf_free(&section);
  return rc;
}

void mw_table_files_free(mw_table_files_t *f) {
  if (!f) return;
  assert(f->n <= MW_TABLE_CREATE_FILES);
  for (size_t i = 0; i < f->n; i++) mw_buf_free(&f->files[i].bytes);
  f->n = 0;
}
