/*
 * show.c — one stored object as a jtree (see show.h).
 *
 * Each show_* function decodes with the src/lance codec of its format and
 * names the results; it never parses bytes itself. Lists (rows, offsets,
 * zones, pages) are cut at opts.max_rows entries, with a `…_total` count
 * beside them so a cut list is visible.
 */
#include "inspect/show.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lance/bloom.h"
#include "lance/datafile.h"
#include "lance/datafile_info.h"
#include "lance/dataset_manifest.h"
#include "lance/deletion.h"
#include "lance/ipc.h"
#include "lance/ipc_file.h"
#include "lance/lance_schema.h"
#include "lance/legacy_v1.h"
#include "lance/owners_json.h"
#include "lance/pk_index.h"
#include "lance/shard_manifest.h"
#include "lance/transaction.h"
#include "lance/zone_seed.h"
#include "storage/storage.h"

static const char *const KIND_NAMES[MW_KIND_COUNT_] = {
    "unknown", "wal_entry", "shard_manifest", "version_hint", "dataset_manifest", "transaction",
    "deletion_bitmap", "deletion_arrow", "pk_index_data", "pk_index_lookup", "bloom_filter",
    "data_file", "zone_seed", "owner_record", "staging"};

const char *mw_kind_name(mw_kind_t k) { return (unsigned)k < MW_KIND_COUNT_ ? KIND_NAMES[k] : "unknown"; }

int mw_kind_parse(const char *name, mw_kind_t *k) {
  assert(name != NULL);
  assert(k != NULL);
  for (int i = 1; i < MW_KIND_COUNT_; i++)
    if (strcmp(name, KIND_NAMES[i]) == 0) {
      *k = (mw_kind_t)i;
      return 0;
    }
  return -EINVAL;
}

static bool ends_with(const char *s, const char *suf) {
  assert(s != NULL);
  assert(suf != NULL);
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && strcmp(s + a - b, suf) == 0;
}

/* The last path segment and the one before it. */
static void segments(const char *key, const char **base, char *parent, size_t plen) {
  assert(key != NULL);
  assert(parent != NULL);
  assert(plen > 0);
  const char *slash = strrchr(key, '/');
  *base = slash ? slash + 1 : key;
  parent[0] = 0;
  if (slash == NULL) return;
  const char *p = slash;
  while (p > key && p[-1] != '/') p--;
  size_t n = (size_t)(slash - p);
  if (n >= plen) n = plen - 1;
  memcpy(parent, p, n);
  parent[n] = 0;
}

/* A temp of a put that never finished: memwald's ".tmp-<hex>" (storage.h),
 * Lance's "<key>.tmp.<id>" or object_store's staging "<key>#<n>" (left by a
 * writer that died or was fenced mid-put; never part of the table). */
static bool is_staging(const char *base) {
  assert(base != NULL);
  assert(strchr(base, '/') == NULL); /* one path segment */
  if (strncmp(base, MW_STORAGE_RESERVED_PREFIX, strlen(MW_STORAGE_RESERVED_PREFIX)) == 0) return true;
  if (strstr(base, ".tmp.") != NULL) return true;
  const char *h = strrchr(base, '#');
  if (h == NULL || h[1] == '\0') return false;
  for (h++; *h; h++)
    if (*h < '0' || *h > '9') return false;
  return true;
}

bool mw_key_is_staging(const char *key) {
  assert(key != NULL);
  const char *slash = strrchr(key, '/');
  return is_staging(slash ? slash + 1 : key);
}

mw_kind_t mw_kind_of(const char *key, const uint8_t *p, size_t n) {
  assert(key != NULL);
  assert(p != NULL || n == 0);
  const char *base;
  char parent[256];
  segments(key, &base, parent, sizeof parent);
  if (is_staging(base)) return MW_KIND_STAGING;
  if (ends_with(base, ".arrow")) return strcmp(parent, "_deletions") == 0 ? MW_KIND_DELETION_ARROW : MW_KIND_WAL;
  if (ends_with(base, ".binpb")) return MW_KIND_SHARD_MANIFEST;
  if (strcmp(base, "version_hint.json") == 0 || strcmp(base, "latest_version_hint.json") == 0) return MW_KIND_VERSION_HINT;
  if (ends_with(base, ".manifest")) return MW_KIND_DATASET_MANIFEST;
  if (ends_with(base, ".txn")) return MW_KIND_TXN;
  if (strcmp(base, "bloom_filter.bin") == 0) return MW_KIND_BLOOM;
  if (ends_with(base, ".bin") && strcmp(parent, "_deletions") == 0) return MW_KIND_DELETION_BIN;
  if (strcmp(parent, "_pk_index") == 0 && strcmp(base, "page_data.lance") == 0) return MW_KIND_PK_DATA;
  if (strcmp(parent, "_pk_index") == 0 && strcmp(base, "page_lookup.lance") == 0) return MW_KIND_PK_LOOKUP;
  if (ends_with(base, ".lance")) return MW_KIND_DATAFILE;
  if (strcmp(parent, "owners") == 0 && ends_with(base, ".json") && strstr(key, MW_OWNERS_PREFIX) != NULL)
    return MW_KIND_OWNER;
  /* by content */
  if (n >= 4 && memcmp(p + n - 4, "LANC", 4) == 0) return MW_KIND_DATAFILE;
  if (n >= 6 && memcmp(p, "ARROW1", 6) == 0) return MW_KIND_ZONE_SEED;
  if (n >= 4 && mw_load_u32le(p) == 0xFFFFFFFFu) return MW_KIND_WAL;
  if (n >= 4 && (mw_load_u32le(p) == 12346 || (mw_load_u32le(p) & 0xFFFF) == 12347)) return MW_KIND_DELETION_BIN;
  return MW_KIND_UNKNOWN;
}

void mw_uuid_text(const uint8_t id[16], char out[37]) {
  assert(id != NULL);
  assert(out != NULL);
  static const char hex[] = "0123456789abcdef";
  size_t k = 0;
  for (int i = 0; i < 16; i++) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out[k++] = '-';
    out[k++] = hex[id[i] >> 4];
    out[k++] = hex[id[i] & 15];
  }
  out[k] = 0;
}

j_t *mw_show_uuid(const uint8_t id[16]) {
  assert(id != NULL);
  char s[37];
  mw_uuid_text(id, s);
  return j_str(s);
}

static j_t *hex_bytes(const uint8_t *p, size_t n) {
  assert(p != NULL || n == 0);
  assert(n < SIZE_MAX / 2 - 2);
  j_t *v = j_strn("", 0);
  free(v->s);
  v->s = malloc(2 * n + 3);
  if (v->s == NULL) abort();
  v->s[0] = '0', v->s[1] = 'x';
  for (size_t i = 0; i < n; i++) snprintf(v->s + 2 + 2 * i, 3, "%02x", p[i]);
  v->slen = 2 + 2 * n;
  v->s[v->slen] = 0;
  return v;
}

static int64_t cap_rows(const mw_show_opts_t *o, int64_t n) {
  assert(o != NULL);
  assert(n >= 0);
  return o->max_rows < 0 || o->max_rows > n ? n : o->max_rows;
}

/* ------------------------------------------------------------- values */

static j_t *float_j(double d) {
  if (isnan(d)) return j_str(signbit(d) ? "-NaN" : "NaN");
  if (isinf(d)) return j_str(d > 0 ? "Infinity" : "-Infinity");
  return j_dbl(d);
}

static j_t *half_j(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
  return float_j((h & 0x8000) ? -v : v);
}

/* A decimal128 as its text: the unscaled int128 with `scale` digits after
 * the point. */
static j_t *decimal_j(const uint8_t *p, int scale) {
  assert(p != NULL);
  __int128 v;
  memcpy(&v, p, 16);
  bool neg = v < 0;
  unsigned __int128 u = neg ? -(unsigned __int128)v : (unsigned __int128)v;
  char digits[64];
  int n = 0;
  do {
    digits[n++] = (char)('0' + (int)(u % 10));
    u /= 10;
  } while (u && n < 60);
  while (scale > 0 && n <= scale && n < 60) digits[n++] = '0';
  char out[80];
  int k = 0;
  if (neg) out[k++] = '-';
  for (int d = n - 1; d >= 0; d--) {
    out[k++] = digits[d];
    if (scale > 0 && d == scale) out[k++] = '.';
  }
  out[k] = 0;
  return j_str(out);
}

/* One fixed-width value of type t (width w) at p. */
static j_t *fixed_j(const mw_field_t *f, mw_type_t t, const uint8_t *p, size_t w) {
  assert(f != NULL);
  assert(p != NULL);
  const mw_type_info_t *ti = mw_type_info(t);
  if (t == MW_T_DECIMAL128) return decimal_j(p, f->scale);
  switch (ti->order) {
    case MW_ORDER_SIGNED: {
      uint64_t raw = 0;
      memcpy(&raw, p, w < 8 ? w : 8);
      unsigned sh = 64 - 8 * (unsigned)(w < 8 ? w : 8);
      return j_int((int64_t)(raw << sh) >> sh);
    }
    case MW_ORDER_UNSIGNED: {
      uint64_t raw = 0;
      memcpy(&raw, p, w < 8 ? w : 8);
      return j_uint(raw);
    }
    case MW_ORDER_FLOAT:
      if (w == 2) return half_j((uint16_t)(p[0] | p[1] << 8));
      if (w == 4) {
        float x;
        memcpy(&x, p, 4);
        return float_j(x);
      }
      {
        double x;
        memcpy(&x, p, 8);
        return float_j(x);
      }
    default: return hex_bytes(p, w); /* fixed_size_binary */
  }
}

/* One cell of a column of our model (every layout, recursively). */
static j_t *value_j(const mw_field_t *f, const mw_column_t *c, int64_t i) {
  assert(f != NULL);
  assert(c != NULL);
  assert(i >= 0);
  if (!mw_column_valid(c, i)) return j_null();
  const uint8_t *v = c->values.data;
  switch (mw_field_layout(f)) {
    case MW_LAYOUT_FIXED: {
      size_t w = mw_type_width(f);
      return fixed_j(f, f->type, v + (size_t)i * w, w);
    }
    case MW_LAYOUT_BOOL: return j_bool(mw_bit_get(v, i));
    case MW_LAYOUT_VAR: {
      size_t n;
      const uint8_t *p = mw_column_bytes(c, i, &n);
      return f->type == MW_T_UTF8 || f->type == MW_T_LARGE_UTF8 ? j_strn(p, n) : hex_bytes(p, n);
    }
    case MW_LAYOUT_FSL: {
      j_t *a = j_arr();
      size_t iw = mw_fsl_item_width(f);
      for (int32_t k = 0; k < f->fsl_dim; k++) {
        size_t item = (size_t)i * (size_t)f->fsl_dim + (size_t)k;
        if (c->item_validity.len && !mw_bit_get(c->item_validity.data, (int64_t)item)) j_push(a, j_null());
        else j_push(a, fixed_j(f, f->item_type, v + item * iw, iw));
      }
      return a;
    }
    case MW_LAYOUT_LIST: {
      j_t *a = j_arr();
      const int32_t *off = (const int32_t *)(const void *)c->offsets.data;
      if (f->n_children < 1 || c->n_children < 1 || off == NULL) return a;
      for (int32_t k = off[i]; k < off[i + 1]; k++) j_push(a, value_j(&f->children[0], &c->children[0], k));
      return a;
    }
    case MW_LAYOUT_STRUCT: {
      j_t *o = j_obj();
      for (uint32_t k = 0; k < f->n_children && k < c->n_children; k++)
        j_set(o, f->children[k].name, value_j(&f->children[k], &c->children[k], i));
      return o;
    }
  }
  return j_null();
}

static j_t *kvs_j(const mw_kvs_t *kv) {
  assert(kv != NULL);
  assert(kv->items != NULL || kv->n == 0);
  j_t *o = j_obj();
  for (size_t i = 0; i < kv->n; i++) j_set(o, kv->items[i].key, j_strn(kv->items[i].value, kv->items[i].value_len));
  return o;
}

static j_t *type_j(const mw_field_t *f) {
  assert(f != NULL);
  char text[MW_FIELD_TEXT_BYTES];
  return j_str(mw_field_type_text(f, text, sizeof text));
}

static j_t *schema_j(const mw_schema_t *s) {
  assert(s != NULL);
  assert(s->fields != NULL || s->n_fields == 0);
  j_t *a = j_arr();
  for (size_t i = 0; i < s->n_fields; i++) {
    const mw_field_t *f = &s->fields[i];
    j_t *o = j_push(a, j_obj());
    j_set(o, "name", j_str(f->name));
    j_set(o, "type", type_j(f));
    j_set(o, "nullable", j_bool(f->nullable));
    if (f->id >= 0) j_set(o, "id", j_int(f->id));
    if (f->pk_position) j_set(o, "primary_key_position", j_uint(f->pk_position));
    if (f->meta.n) j_set(o, "metadata", kvs_j(&f->meta));
  }
  return a;
}

/* Rows [0, cap) of batches as objects {column: value}. */
static j_t *rows_j(const mw_schema_t *s, const mw_batch_t *b, size_t nb, int64_t cap) {
  assert(s != NULL);
  assert(b != NULL || nb == 0);
  j_t *a = j_arr();
  for (size_t k = 0; k < nb && cap > 0; k++) {
    for (int64_t r = 0; r < b[k].n_rows && cap > 0; r++, cap--) {
      j_t *o = j_push(a, j_obj());
      for (size_t c = 0; c < s->n_fields; c++) j_set(o, s->fields[c].name, value_j(&s->fields[c], &b[k].cols[c], r));
    }
  }
  return a;
}

static j_t *column_rows_j(const mw_field_t *f, const mw_column_t *c, int64_t cap) {
  assert(f != NULL);
  assert(c != NULL);
  j_t *a = j_arr();
  for (int64_t r = 0; r < c->length && r < cap; r++) j_push(a, value_j(f, c, r));
  return a;
}

/* ----------------------------------------------------------- WAL entry */

static int show_wal(const char *key, const uint8_t *p, size_t n, const mw_show_opts_t *o, j_t *out,
                    mw_err_t *err) {
  assert(key != NULL);
  assert(out != NULL);
  assert(out->t == J_OBJ);
  const char *base = strrchr(key, '/') ? strrchr(key, '/') + 1 : key;
  uint64_t pos;
  if (mw_bitrev_parse(base, &pos) == 0) j_set(out, "position", j_uint(pos));
  mw_ipc_stream_t s;
  int rc = mw_ipc_decode(p, n, NULL, &s, err);
  if (rc < 0) return rc;
  uint64_t epoch;
  mw_err_t e2 = {0};
  if (mw_ipc_writer_epoch(&s.schema, &epoch, &e2) == 0) j_set(out, "writer_epoch", j_uint(epoch));
  else j_set(out, "writer_epoch_error", j_str(e2.msg));
  j_set(out, "fence_sentinel", j_bool(mw_ipc_is_fence_sentinel(&s.schema)));
  j_set(out, "schema", schema_j(&s.schema));
  j_set(out, "schema_metadata", kvs_j(&s.schema.meta));
  int64_t rows = 0;
  for (size_t i = 0; i < s.n_batches; i++) rows += s.batches[i].n_rows;
  j_set(out, "batches", j_uint(s.n_batches));
  j_set(out, "rows", j_int(rows));
  j_set(out, "values", rows_j(&s.schema, s.batches, s.n_batches, cap_rows(o, rows)));
  mw_ipc_stream_free(&s);
  return 0;
}

/* ------------------------------------------------------- shard manifest */

static int show_shard_manifest(const char *key, const uint8_t *p, size_t n, j_t *out, mw_err_t *err) {
  assert(key != NULL);
  assert(out != NULL);
  assert(out->t == J_OBJ);
  const char *base = strrchr(key, '/') ? strrchr(key, '/') + 1 : key;
  uint64_t ver;
  if (mw_shard_manifest_name_parse(base, &ver) == 0) j_set(out, "version_in_name", j_uint(ver));
  mw_shard_manifest_t m;
  int rc = mw_shard_manifest_decode(p, n, &m, err);
  if (rc < 0) {
    mw_shard_manifest_free(&m);
    return rc;
  }
  j_set(out, "version", j_uint(m.version));
  j_set(out, "writer_epoch", j_uint(m.writer_epoch));
  j_set(out, "replay_after_wal_entry_position", j_uint(m.replay_after_wal_entry_position));
  j_set(out, "wal_entry_position_last_seen", j_uint(m.wal_entry_position_last_seen));
  j_set(out, "current_generation", j_uint(m.current_generation));
  j_t *a = j_set(out, "sstables", j_arr());
  for (size_t i = 0; i < m.n_sstables; i++) {
    j_t *s = j_push(a, j_obj());
    j_set(s, "generation", j_uint(m.sstables[i].generation));
    j_set(s, "path", j_str(m.sstables[i].path));
    j_set(s, "in_memory_bytes", j_uint(m.sstables[i].in_memory_bytes));
    j_set(s, "physical_rows", j_uint(m.sstables[i].physical_rows));
    j_set(s, "primary_key_bytes", j_uint(m.sstables[i].primary_key_bytes));
  }
  j_set(out, "shard_spec_id", j_uint(m.shard_spec_id));
  j_set(out, "shard_id", m.has_shard_id ? mw_show_uuid(m.shard_id) : j_null());
  j_t *fe = j_set(out, "field_entries", j_arr());
  for (size_t i = 0; i < m.n_field_entries; i++) {
    j_t *e = j_push(fe, j_obj());
    j_set(e, "field_id", j_str(m.field_entries[i].field_id));
    j_set(e, "value", hex_bytes(m.field_entries[i].value, m.field_entries[i].value_len));
  }
  j_set(out, "status", j_str(m.status == MW_SHARD_SEALED ? "SEALED" : "ACTIVE"));
  mw_shard_manifest_free(&m);
  return 0;
}

/* ------------------------------------------------------ dataset manifest */

static j_t *flags_j(uint64_t flags) {
  j_t *o = j_obj();
  j_set(o, "value", j_uint(flags));
  j_t *a = j_set(o, "bits", j_arr());
  for (int b = 0; b < 64; b++)
    if (flags >> b & 1) j_push(a, j_fmt("1<<%d %s", b, mw_feature_flag_name(b)));
  return o;
}

static j_t *lance_fields_j(Lance__File__Field *const *f, size_t n) {
  assert(f != NULL || n == 0);
  j_t *a = j_arr();
  for (size_t i = 0; i < n; i++) {
    j_t *o = j_push(a, j_obj());
    j_set(o, "name", j_str(f[i]->name));
    j_set(o, "id", j_int(f[i]->id));
    j_set(o, "parent_id", j_int(f[i]->parent_id));
    j_set(o, "logical_type", j_str(f[i]->logical_type));
    j_set(o, "nullable", j_bool(f[i]->nullable));
    if (f[i]->unenforced_primary_key) j_set(o, "primary_key_position", j_uint(f[i]->unenforced_primary_key_position));
  }
  return a;
}

static j_t *fragment_j(const Lance__Table__DataFragment *fr) {
  assert(fr != NULL);
  j_t *o = j_obj();
  j_set(o, "id", j_uint(fr->id));
  j_set(o, "physical_rows", j_uint(fr->physical_rows));
  j_t *files = j_set(o, "files", j_arr());
  for (size_t k = 0; k < fr->n_files; k++) {
    const Lance__Table__DataFile *df = fr->files[k];
    j_t *f = j_push(files, j_obj());
    j_set(f, "path", j_str(df->path));
    j_t *ids = j_set(f, "fields", j_arr());
    for (size_t i = 0; i < df->n_fields; i++) j_push(ids, j_int(df->fields[i]));
    j_t *ci = j_set(f, "column_indices", j_arr());
    for (size_t i = 0; i < df->n_column_indices; i++) j_push(ci, j_int(df->column_indices[i]));
    j_set(f, "file_version", j_fmt("%u.%u", df->file_major_version, df->file_minor_version));
    j_set(f, "file_size_bytes", j_uint(df->file_size_bytes));
  }
  if (fr->deletion_file) {
    const Lance__Table__DeletionFile *d = fr->deletion_file;
    j_t *del = j_set(o, "deletion_file", j_obj());
    bool bitmap = d->file_type == LANCE__TABLE__DELETION_FILE__DELETION_FILE_TYPE__BITMAP;
    j_set(del, "type", j_str(bitmap ? "bitmap" : "arrow_array"));
    j_set(del, "read_version", j_uint(d->read_version));
    j_set(del, "id", j_uint(d->id));
    j_set(del, "num_deleted_rows", j_uint(d->num_deleted_rows));
    j_set(del, "path", j_fmt("_deletions/%" PRIu64 "-%" PRIu64 "-%" PRIu64 ".%s", fr->id, d->read_version, d->id,
                             bitmap ? "bin" : "arrow"));
  }
  return o;
}

static j_t *memwal_j(const mw_memwal_index_t *x) {
  assert(x != NULL);
  static const char *const kinds[] = {"manual", "unsharded", "bucket", "identity"};
  j_t *o = j_obj();
  j_set(o, "num_shards", j_uint(x->num_shards));
  j_set(o, "snapshot_ts_millis", j_int(x->snapshot_ts_millis));
  j_set(o, "sharding", j_str(kinds[x->kind <= MW_SHARDING_IDENTITY ? x->kind : 0]));
  if (x->has_spec) {
    j_set(o, "spec_id", j_uint(x->spec_id));
    j_set(o, "sharding_field_id", j_str(x->sharding_field_id));
    j_t *src = j_set(o, "source_ids", j_arr());
    for (size_t i = 0; i < x->n_source_ids; i++) j_push(src, j_int(x->source_ids[i]));
    j_set(o, "result_type", j_str(x->result_type));
    j_set(o, "parameters", kvs_j(&x->parameters));
    if (x->kind == MW_SHARDING_BUCKET) j_set(o, "num_buckets", j_uint(x->num_buckets));
  }
  j_t *mi = j_set(o, "maintained_indexes", j_arr());
  for (size_t i = 0; i < x->n_maintained_indexes; i++) j_push(mi, j_str(x->maintained_indexes[i]));
  j_t *cs = j_set(o, "compacted_sstables", j_arr());
  for (size_t i = 0; i < x->n_compacted; i++) {
    j_t *c = j_push(cs, j_obj());
    j_set(c, "shard_id", mw_show_uuid(x->compacted[i].shard_id));
    j_set(c, "generation", j_uint(x->compacted[i].generation));
  }
  j_set(o, "writer_config_defaults", kvs_j(&x->writer_config_defaults));
  return o;
}

static j_t *index_j(const Lance__Table__IndexMetadata *im) {
  assert(im != NULL);
  j_t *o = j_obj();
  j_set(o, "name", j_str(im->name));
  if (im->uuid && im->uuid->uuid.len == 16) j_set(o, "uuid", mw_show_uuid(im->uuid->uuid.data));
  j_t *f = j_set(o, "fields", j_arr());
  for (size_t i = 0; i < im->n_fields; i++) j_push(f, j_int(im->fields[i]));
  j_set(o, "dataset_version", j_uint(im->dataset_version));
  if (im->index_details) {
    j_set(o, "details_type", j_str(im->index_details->type_url));
    if (im->name && strcmp(im->name, MW_MEMWAL_INDEX_NAME) == 0) {
      mw_memwal_index_t x;
      mw_err_t e = {0};
      mw_memwal_index_init(&x);
      if (mw_memwal_index_decode(im, &x, &e) == 0) j_set(o, "mem_wal_details", memwal_j(&x));
      else j_set(o, "mem_wal_details_error", j_str(e.msg));
      mw_memwal_index_free(&x);
    }
  }
  return o;
}

static j_t *txn_j(const mw_txn_t *t) {
  assert(t != NULL);
  j_t *o = j_obj();
  j_set(o, "read_version", j_uint(t->read_version));
  j_set(o, "uuid", j_str(t->uuid));
  if (t->tag) j_set(o, "tag", j_str(t->tag));
  if (t->properties.n) j_set(o, "properties", kvs_j(&t->properties));
  j_set(o, "operation", j_str(t->op_name));
  if (t->n_fragments) {
    j_t *a = j_set(o, t->op_tag == 101 || t->op_tag == 108 ? "updated_fragments" : t->op_tag == 104 ? "old_fragments" : "fragments", j_arr());
    for (size_t i = 0; i < t->n_fragments; i++) j_push(a, fragment_j(t->fragments[i]));
  }
  if (t->n_new_fragments) {
    j_t *a = j_set(o, "new_fragments", j_arr());
    for (size_t i = 0; i < t->n_new_fragments; i++) j_push(a, fragment_j(t->new_fragments[i]));
  }
  if (t->n_removed_ids) {
    j_t *a = j_set(o, t->op_tag == 101 ? "deleted_fragment_ids" : "removed_fragment_ids", j_arr());
    for (size_t i = 0; i < t->n_removed_ids; i++) j_push(a, j_uint(t->removed_ids[i]));
  }
  if (t->n_schema) j_set(o, "schema", lance_fields_j(t->schema, t->n_schema));
  if (t->n_new_indices) {
    j_t *a = j_set(o, "new_indices", j_arr());
    for (size_t i = 0; i < t->n_new_indices; i++) j_push(a, index_j(t->new_indices[i]));
  }
  if (t->n_removed_indices) {
    j_t *a = j_set(o, "removed_indices", j_arr());
    for (size_t i = 0; i < t->n_removed_indices; i++) j_push(a, index_j(t->removed_indices[i]));
  }
  if (t->n_compacted) {
    j_t *a = j_set(o, "compacted_sstables", j_arr());
    for (size_t i = 0; i < t->n_compacted; i++) {
      j_t *c = j_push(a, j_obj());
      j_set(c, "shard_id", mw_show_uuid(t->compacted[i].shard_id));
      j_set(c, "generation", j_uint(t->compacted[i].generation));
    }
  }
  if (t->predicate) j_set(o, "predicate", j_str(t->predicate));
  if (t->op_tag == 106) j_set(o, "restore_version", j_uint(t->restore_version));
  if (t->op_tag == 107) j_set(o, "reserve_fragments", j_uint(t->reserve_fragments));
  if (t->n_unknown) j_set(o, "fields_not_decoded", j_uint(t->n_unknown));
  return o;
}

static int show_txn(const uint8_t *p, size_t n, j_t *out, mw_err_t *err) {
  assert(p != NULL || n == 0);
  assert(out != NULL);
  mw_txn_t t;
  int rc = mw_txn_decode(p, n, &t, err);
  if (rc == 0) j_set(out, "transaction", txn_j(&t));
  mw_txn_free(&t);
  return rc;
}

static int show_dataset_manifest(const char *key, const uint8_t *p, size_t n, j_t *out, mw_err_t *err) {
  assert(key != NULL);
  assert(out != NULL);
  assert(out->t == J_OBJ);
  const char *base = strrchr(key, '/') ? strrchr(key, '/') + 1 : key;
  uint64_t ver;
  bool v2;
  if (mw_dmanifest_name_parse(base, &ver, &v2) == 0) {
    j_set(out, "version_in_name", j_uint(ver));
    j_set(out, "naming", j_str(v2 ? "V2" : "V1"));
  }
  mw_section_t msg;
  uint64_t mpos;
  int rc = mw_dmanifest_unframe(p, n, &msg, &mpos, err);
  if (rc < 0) return rc;
  mw_dmanifest_t m = {0};
  if ((rc = mw_dmanifest_decode(msg.data, msg.len, &m, err)) < 0) {
    mw_dmanifest_free(&m);
    return rc;
  }
  const Lance__Table__Manifest *pb = m.pb;
  j_set(out, "manifest_position", j_uint(mpos));
  j_set(out, "version", j_uint(pb->version));
  if (pb->timestamp) j_set(out, "timestamp", j_fmt("%" PRId64 ".%09d", pb->timestamp->seconds, pb->timestamp->nanos));
  if (pb->writer_version) j_set(out, "writer", j_fmt("%s %s", pb->writer_version->library, pb->writer_version->version));
  if (pb->data_format) j_set(out, "data_format", j_fmt("%s %s", pb->data_format->file_format, pb->data_format->version));
  j_set(out, "reader_feature_flags", flags_j(pb->reader_feature_flags));
  j_set(out, "writer_feature_flags", flags_j(pb->writer_feature_flags));
  j_set(out, "fields", lance_fields_j(pb->fields, pb->n_fields));
  if (pb->n_schema_metadata) {
    j_t *sm = j_set(out, "schema_metadata", j_obj());
    for (size_t i = 0; i < pb->n_schema_metadata; i++)
      j_set(sm, pb->schema_metadata[i]->key ? pb->schema_metadata[i]->key : "",
            j_strn(pb->schema_metadata[i]->value.data, pb->schema_metadata[i]->value.len));
  }
  j_t *fr = j_set(out, "fragments", j_arr());
  for (size_t i = 0; i < pb->n_fragments; i++) j_push(fr, fragment_j(pb->fragments[i]));
  j_set(out, "max_fragment_id", m.has_max_fragment_id ? j_uint(pb->max_fragment_id) : j_null());
  j_set(out, "next_row_id", j_uint(pb->next_row_id));
  if (pb->transaction_file && pb->transaction_file[0]) j_set(out, "transaction_file", j_str(pb->transaction_file));
  if (m.has_index_section) {
    j_set(out, "index_section", j_uint(pb->index_section));
    mw_section_t sec;
    mw_index_section_t is = {0};
    rc = mw_dmanifest_section_at(p, n, pb->index_section, mpos, &sec, err);
    if (rc == 0) rc = mw_index_section_decode(sec.data, sec.len, &is, err);
    if (rc == 0) {
      j_t *a = j_set(out, "indices", j_arr());
      for (size_t i = 0; i < is.n; i++) j_push(a, index_j(is.items[i].pb));
    }
    mw_index_section_free(&is);
  }
  if (rc == 0 && m.has_transaction_section) {
    mw_section_t sec;
    mw_txn_t t;
    rc = mw_dmanifest_section_at(p, n, pb->transaction_section, mpos, &sec, err);
    if (rc == 0 && (rc = mw_txn_decode(sec.data, sec.len, &t, err)) == 0) j_set(out, "transaction_section", txn_j(&t));
    if (rc == 0 || rc != -EBADMSG) mw_txn_free(&t);
  }
  mw_dmanifest_free(&m);
  return rc;
}

/* -------------------------------------------------------- small formats */

static int show_hint(const uint8_t *p, size_t n, j_t *out, mw_err_t *err) {
  assert(p != NULL || n == 0);
  assert(out != NULL);
  uint64_t v;
  int rc = mw_version_hint_parse(p, n, &v, err);
  if (rc == 0) j_set(out, "version", j_uint(v));
  j_set(out, "text", j_strn(p, n));
  return rc;
}

static void show_staging(const char *key, size_t n, j_t *out) {
  assert(out != NULL);
  assert(out->t == J_OBJ);
  (void)key;
  j_set(out, "what", j_str("the temp of a put that never finished (a writer died or was fenced mid-put); "
                           "not part of the table: readers never open it, memwald sweeps its own after 600 s"));
  j_set(out, "bytes_written", j_uint(n));
}

/* An owner record: a hint of which daemon holds the shard (never a lock). */
static int show_owner(const char *key, const uint8_t *p, size_t n, j_t *out, mw_err_t *err) {
  assert(key != NULL);
  assert(p != NULL || n == 0);
  assert(out != NULL);
  mw_owner_json_t r;
  int rc = mw_owner_json_parse((const char *)p, n, &r, NULL);
  if (rc < 0) return mw_err_set(err, rc, "%s: owner record malformed (want node, address and epoch in %d bytes)", key,
                                MW_OWNER_RECORD_BYTES);
  j_set(out, "node", j_str(r.node));
  j_set(out, "address", j_str(r.address));
  j_set(out, "epoch", j_uint(r.epoch));
  j_set(out, "text", j_strn(p, n));
  return 0;
}

static j_t *offsets_j(const uint32_t *offs, size_t n, const mw_show_opts_t *o) {
  assert(offs != NULL || n == 0);
  assert(o != NULL);
  j_t *a = j_arr();
  for (size_t i = 0; i < n && (int64_t)i < cap_rows(o, (int64_t)n); i++) j_push(a, j_uint(offs[i]));
  return a;
}

static int show_deletion(const char *key, bool arrow, const uint8_t *p, size_t n, const mw_show_opts_t *o, j_t *out,
                         mw_err_t *err) {
  assert(key != NULL);
  assert(o != NULL);
  assert(out != NULL);
  const char *base = strrchr(key, '/') ? strrchr(key, '/') + 1 : key;
  uint64_t frag, rv, id;
  int nrc = mw_deletion_name_parse(base, &frag, &rv, &id);
  if (nrc == 0 || nrc == -ENOTSUP) {
    char tmp[MW_DELETION_NAME_BYTES + 8];
    snprintf(tmp, sizeof tmp, "%s", base);
    if (nrc == -ENOTSUP) { /* .arrow: parse the same digits */
      char *dot = strrchr(tmp, '.');
      if (dot) strcpy(dot, ".bin");
      nrc = mw_deletion_name_parse(tmp, &frag, &rv, &id);
    }
    if (nrc == 0) {
      j_set(out, "fragment_id", j_uint(frag));
      j_set(out, "read_version", j_uint(rv));
      j_set(out, "id", j_uint(id));
    }
  }
  uint32_t *offs = NULL;
  size_t cnt = 0;
  int rc = arrow ? mw_deletion_arrow_decode(p, n, UINT32_MAX + (uint64_t)1, &offs, &cnt, err)
                 : mw_deletion_decode(p, n, UINT32_MAX + (uint64_t)1, &offs, &cnt, err);
  if (rc < 0) return rc;
  j_set(out, "format", j_str(arrow ? "arrow_array (IPC file, row_id uint32)" : "roaring bitmap (portable)"));
  j_set(out, "deleted_rows", j_uint(cnt));
  if (cnt) {
    j_set(out, "min_offset", j_uint(offs[0]));
    j_set(out, "max_offset", j_uint(offs[cnt - 1]));
  }
  j_set(out, "offsets", offsets_j(offs, cnt, o));
  free(offs);
  return 0;
}

static int show_bloom(const uint8_t *p, size_t n, j_t *out, mw_err_t *err) {
  assert(p != NULL || n == 0);
  assert(out != NULL);
  mw_bloom_t b = {0};
  int rc = mw_bloom_decode(&b, p, n, err);
  if (rc < 0) return rc;
  uint64_t set = 0;
  for (size_t i = 0; i < b.n_blocks * 8; i++) set += (uint64_t)__builtin_popcount(b.words[i]);
  j_set(out, "blocks", j_uint(b.n_blocks));
  j_set(out, "bits", j_uint((uint64_t)b.n_blocks * 256));
  j_set(out, "bits_set", j_uint(set));
  j_set(out, "fill", j_dbl(b.n_blocks ? (double)set / ((double)b.n_blocks * 256) : 0));
  j_set(out, "lance_sstable_size", j_bool(n == MW_BLOOM_SST_BYTES));
  mw_bloom_free(&b);
  return 0;
}

/* ----------------------------------------------------------- zone seeds */

static j_t *seed_zones_j(const mw_seed_t *s, const mw_show_opts_t *o) {
  assert(s != NULL);
  assert(s->value_field != NULL);
  assert(o != NULL);
  j_t *a = j_arr();
  mw_field_t vf = *s->value_field;
  for (size_t z = 0; z < s->n_zones && (int64_t)z < cap_rows(o, (int64_t)s->n_zones); z++) {
    j_t *e = j_push(a, j_obj());
    j_set(e, "min", value_j(&vf, s->min, (int64_t)z));
    j_set(e, "max", value_j(&vf, s->max, (int64_t)z));
    j_set(e, "null_count", j_uint(s->null_count[z]));
    j_set(e, "nan_count", j_uint(s->nan_count[z]));
    if (s->negative_nan_count) j_set(e, "negative_nan_count", j_uint(s->negative_nan_count[z]));
    j_set(e, "zone_length", j_uint(s->zone_length[z]));
  }
  return a;
}

/* One seed: decoded, validated, and (when the column is given) checked
 * against the column's values. */
static void seed_fill(j_t *e, const uint8_t *p, size_t n, const mw_field_t *f, const mw_column_t *col,
                      uint64_t rpz, uint64_t rows, const mw_show_opts_t *o) {
  assert(e != NULL);
  assert(o != NULL);
  assert(col == NULL || f != NULL); /* a column only with its field */
  mw_seed_t s;
  mw_err_t err = {0};
  int rc = mw_seed_decode(p, n, f, rpz, rows, &s, &err);
  if (rc == 0 && col != NULL) rc = mw_seed_check_column(&s, f, col, &err);
  j_set(e, "valid", j_bool(rc == 0));
  if (rc < 0) j_set(e, "problem", j_str(err.msg));
  if (s.ipc.schema.n_fields > 0 || rc == 0) {
    j_set(e, "version", j_int(s.version));
    j_set(e, "zones", j_uint(s.n_zones));
    j_set(e, "rows", j_uint(s.total_rows));
    j_set(e, "null_bitmap", s.has_null_bitmap ? j_uint(s.n_null_offsets) : j_str("absent"));
    if (rc == 0) j_set(e, "zone_records", seed_zones_j(&s, o));
  }
  mw_seed_free(&s);
}

static int show_zone_seed(const uint8_t *p, size_t n, const mw_show_opts_t *o, j_t *out, mw_err_t *err) {
  assert(o != NULL);
  assert(out != NULL);
  mw_ipc_stream_t st;
  int rc = mw_ipc_file_decode(p, n, NULL, &st, err);
  if (rc < 0) return rc;
  uint64_t rows = 0;
  bool first = true;
  for (size_t i = 0; i < st.n_batches; i++) {
    const mw_column_t *zl = st.schema.n_fields ? &st.batches[i].cols[st.schema.n_fields - 1] : NULL;
    for (int64_t r = 0; zl && r < zl->length && zl->values.len >= 8 * (size_t)zl->length; r++) {
      uint64_t v;
      memcpy(&v, zl->values.data + 8 * r, 8);
      if (first) rows = v, first = false;
      else if (v > rows) rows = v;
    }
  }
  mw_ipc_stream_free(&st);
  /* alone, rows_per_zone is not known: the first zone's length stands in */
  seed_fill(j_set(out, "seed", j_obj()), p, n, NULL, NULL, rows ? rows : 1, UINT64_MAX, o);
  return 0;
}

/* ------------------------------------------------------------ data file */

static j_t *buffers_j(const mw_page_info_t *pi) {
  assert(pi != NULL);
  j_t *a = j_arr();
  for (size_t i = 0; i < pi->n_buffers; i++) {
    j_t *b = j_push(a, j_arr());
    j_push(b, j_uint(pi->buf_offset[i]));
    j_push(b, j_uint(pi->buf_size[i]));
  }
  return a;
}

/* One data file being shown: the open file and the values read so far. */
typedef struct {
  mw_datafile_t f;
  const uint8_t *p;
  const mw_show_opts_t *o;
  mw_column_t *data;         /* per top-level field, read with its first column */
  bool *have;                /* data[i] was read */
  size_t *first;             /* the first Lance column of each top-level field */
  const mw_field_t **leaves; /* the leaf field of each Lance column */
  size_t n_leaves;
  size_t top; /* the next top-level field whose values are to be read */
} df_show_t;

static void df_header_j(const mw_datafile_t *f, j_t *out) {
  assert(f != NULL);
  assert(out != NULL);
  bool v20 = f->major == 0 || (f->major == 2 && f->minor == 0);
  j_set(out, "format", j_fmt("lance %s (footer %u.%u)", v20 ? "2.0" : f->minor == 1 ? "2.1" : "2.2", f->major, f->minor));
  j_t *ft = j_set(out, "footer", j_obj());
  j_set(ft, "column_meta_start", j_uint(f->column_meta_start));
  j_set(ft, "cmo_table", j_uint(f->cmo_start));
  j_set(ft, "gbo_table", j_uint(f->gbo_start));
  j_set(ft, "global_buffers", j_uint(f->n_global_buffers));
  j_set(ft, "columns", j_uint(f->n_columns));
  j_set(out, "rows", j_uint(f->n_rows));
  j_set(out, "schema", schema_j(&f->schema));
  j_set(out, "schema_metadata", kvs_j(&f->schema.meta));
}

/* global buffers and what refers to them */
static j_t *df_global_buffers_j(const mw_datafile_t *f, const uint8_t *p, j_t *out) {
  j_t *gb = j_set(out, "global_buffers", j_arr());
  for (uint32_t i = 0; i < f->n_global_buffers; i++) {
    const uint8_t *bp;
    size_t bn;
    j_t *e = j_push(gb, j_obj());
    j_set(e, "index", j_uint(i));
    if (mw_datafile_global_buffer(f, i, &bp, &bn, NULL) == 0) {
      j_set(e, "offset", j_uint((uint64_t)(bp - p)));
      j_set(e, "size", j_uint(bn));
    }
    if (i == 0) j_set(e, "holds", j_str("FileDescriptor (schema, rows)"));
  }
  assert(gb->n == f->n_global_buffers);
  return gb;
}

/* Lance columns are the leaves in pre-order (a list or struct field has one
 * per leaf below it); a field's values go with its first column. */
static void df_leaves_init(df_show_t *d) {
  assert(d->data == NULL);
  assert(d->leaves == NULL);
  const mw_schema_t *s = &d->f.schema;
  d->data = calloc(s->n_fields + 1, sizeof *d->data);
  d->have = calloc(s->n_fields + 1, sizeof *d->have);
  d->first = calloc(s->n_fields + 1, sizeof *d->first);
  if (d->data == NULL || d->have == NULL || d->first == NULL) abort();
  size_t n_leaves = 0;
  for (size_t i = 0; i < s->n_fields; i++) {
    mw_schema_t one = {.fields = &s->fields[i], .n_fields = 1};
    d->first[i] = n_leaves;
    int nl = mw_lance_leaves(&one, NULL, NULL, 4 * MW_MAX_FIELDS);
    n_leaves += nl > 0 ? (size_t)nl : 0;
  }
  d->leaves = calloc(n_leaves + 1, sizeof *d->leaves);
  if (d->leaves == NULL) abort();
  if (mw_lance_leaves(s, d->leaves, NULL, n_leaves) != (int)n_leaves) n_leaves = 0;
  d->n_leaves = n_leaves;
  d->top = 0;
}

static j_t *df_pages_j(const mw_page_info_t *pages, size_t np, const mw_show_opts_t *o) {
  assert(pages != NULL || np == 0);
  assert(o != NULL);
  j_t *pa = j_arr();
  for (size_t k = 0; k < np && (int64_t)k < cap_rows(o, (int64_t)np); k++) {
    j_t *pg = j_push(pa, j_obj());
    j_set(pg, "rows", j_uint(pages[k].rows));
    j_set(pg, "first_row", j_uint(pages[k].priority));
    j_set(pg, "layout", j_str(pages[k].layout));
    j_set(pg, "encoding", j_str(pages[k].encoding));
    j_set(pg, "buffers", buffers_j(&pages[k]));
  }
  return pa;
}

/* Reads the values of top-level field d->top, whose first column is c. */
static int df_field_values(df_show_t *d, uint32_t c, j_t *e, mw_err_t *err) {
  assert(d->top < d->f.schema.n_fields);
  assert(c == d->first[d->top]);
  size_t top = d->top++;
  mw_err_t e2 = {0};
  const mw_field_t *fld = &d->f.schema.fields[top];
  if (c < d->n_leaves && fld != d->leaves[c]) j_set(e, "of_field", j_str(fld->name));
  int vrc = mw_column_init(&d->data[top], fld);
  if (vrc == 0) vrc = mw_datafile_read_column(&d->f, top, &d->data[top], &e2);
  if (vrc != 0) return mw_err_set(err, vrc, "%s", e2.msg);
  d->have[top] = true;
  if (d->o->max_rows != 0) j_set(e, "values", column_rows_j(fld, &d->data[top], cap_rows(d->o, d->data[top].length)));
  return 0;
}

/* columns: pages and encodings, and the values when asked */
static int df_columns_j(df_show_t *d, j_t *out, mw_err_t *err) {
  assert(d->leaves != NULL);
  assert(d->top == 0);
  j_t *cols = j_set(out, "columns", j_arr());
  int rc = 0;
  for (uint32_t c = 0; c < d->f.n_columns && rc == 0; c++) {
    j_t *e = j_push(cols, j_obj());
    j_set(e, "index", j_uint(c));
    if (c < d->n_leaves) j_set(e, "field", j_str(d->leaves[c]->name));
    mw_page_info_t *pages = NULL;
    size_t np = 0;
    if ((rc = mw_datafile_column_info(&d->f, c, &pages, &np, err)) < 0) break;
    j_set(e, "pages_total", j_uint(np));
    j_set(e, "pages", df_pages_j(pages, np, d->o));
    free(pages);
    if (d->top < d->f.schema.n_fields && c == d->first[d->top]) rc = df_field_values(d, c, e, err);
  }
  assert(d->top <= d->f.schema.n_fields);
  return rc;
}

/* One zone write seed named in the schema metadata, validated against the values. */
static void df_seed_j(const df_show_t *d, const mw_kv_t *kv, j_t *gb, j_t *e) {
  assert(strncmp(kv->key, MW_SEED_META_PREFIX, strlen(MW_SEED_META_PREFIX)) == 0);
  const char *colname = kv->key + strlen(MW_SEED_META_PREFIX);
  j_set(e, "column", j_str(colname));
  mw_seed_locator_t loc;
  mw_err_t e2 = {0};
  if (mw_seed_locator_parse(kv->value, kv->value_len, &loc, &e2) < 0) {
    j_set(e, "valid", j_bool(false));
    j_set(e, "problem", j_str(e2.msg));
    return;
  }
  j_set(e, "buffer", j_uint(loc.buffer_index));
  j_set(e, "rows_per_zone", j_uint(loc.rows_per_zone));
  int fi = mw_schema_find(&d->f.schema, colname);
  const uint8_t *bp;
  size_t bn;
  if (fi < 0) {
    j_set(e, "valid", j_bool(false));
    j_set(e, "problem", j_fmt("no column named %s", colname));
  } else if (mw_datafile_global_buffer(&d->f, loc.buffer_index, &bp, &bn, &e2) < 0) {
    j_set(e, "valid", j_bool(false));
    j_set(e, "problem", j_str(e2.msg));
  } else {
    seed_fill(e, bp, bn, &d->f.schema.fields[fi], d->have[fi] ? &d->data[fi] : NULL, loc.rows_per_zone, d->f.n_rows, d->o);
    if (loc.buffer_index < gb->n) j_set(gb->items[loc.buffer_index], "holds", j_fmt("zone write seed of %s", colname));
  }
}

/* zone write seeds, validated against the values */
static void df_seeds_j(const df_show_t *d, j_t *gb, j_t *out) {
  assert(d->data != NULL);
  assert(gb != NULL);
  assert(gb->t == J_ARR);
  j_t *seeds = j_set(out, "zone_seeds", j_arr());
  size_t pl = strlen(MW_SEED_META_PREFIX);
  for (size_t i = 0; i < d->f.schema.meta.n; i++) {
    const mw_kv_t *kv = &d->f.schema.meta.items[i];
    if (strncmp(kv->key, MW_SEED_META_PREFIX, pl) != 0) continue;
    df_seed_j(d, kv, gb, j_push(seeds, j_obj()));
  }
}

/* pk index views: page_data entries must be sorted by (key, row address) */
static void df_pk_j(const df_show_t *d, j_t *out) {
  assert(d->f.schema.n_fields == 2);
  assert(d->have[0]);
  assert(d->have[1]);
  const mw_column_t *data = d->data;
  const uint64_t *ids = (const uint64_t *)(const void *)data[1].values.data;
  int64_t bad = -1;
  for (int64_t r = 1; r < data[0].length && bad < 0; r++) {
    int c = mw_pk_key_cmp(&d->f.schema.fields[0], &data[0], r - 1, &data[0], r);
    if (c > 0 || (c == 0 && ids[r - 1] >= ids[r])) bad = r;
  }
  j_t *pk = j_set(out, "pk_index", j_obj());
  j_set(pk, "entries", j_int(data[0].length));
  j_set(pk, "sorted_by_key_then_row", j_bool(bad < 0));
  if (bad >= 0) j_set(pk, "first_unsorted_entry", j_int(bad));
}

static int show_datafile_v2(const uint8_t *p, size_t n, mw_kind_t kind, const mw_show_opts_t *o, j_t *out,
                            mw_err_t *err) {
  assert(p != NULL);
  assert(o != NULL);
  assert(out != NULL);
  df_show_t d = {.p = p, .o = o};
  int rc = mw_datafile_open(&d.f, p, n, NULL, err);
  if (rc < 0) return rc;
  df_header_j(&d.f, out);
  j_t *gb = df_global_buffers_j(&d.f, p, out);
  df_leaves_init(&d);
  rc = df_columns_j(&d, out, err);
  free(d.leaves);
  free(d.first);
  if (rc == 0) df_seeds_j(&d, gb, out);
  if (rc == 0 && kind == MW_KIND_PK_DATA && d.f.schema.n_fields == 2 && d.have[0] && d.have[1]) df_pk_j(&d, out);
  for (size_t i = 0; i < d.f.schema.n_fields; i++) mw_column_free(&d.data[i]);
  free(d.data);
  free(d.have);
  mw_datafile_close(&d.f);
  return rc;
}

static j_t *v1_field_j(const mw_v1_field_t *fl) {
  assert(fl != NULL);
  static const char *const types[] = {"PARENT", "REPEATED", "LEAF"};
  static const char *const encs[] = {"NONE", "PLAIN", "VAR_BINARY", "DICTIONARY", "RLE"};
  j_t *o = j_obj();
  j_set(o, "type", j_str((unsigned)fl->type < 3 ? types[fl->type] : "?"));
  j_set(o, "name", j_str(fl->name));
  j_set(o, "id", j_int(fl->id));
  j_set(o, "parent_id", j_int(fl->parent_id));
  j_set(o, "logical_type", j_str(fl->logical_type));
  j_set(o, "nullable", j_bool(fl->nullable));
  j_set(o, "encoding", j_str((unsigned)fl->encoding < 5 ? encs[fl->encoding] : "?"));
  if (fl->encoding == MW_V1_ENC_DICTIONARY) {
    j_set(o, "dictionary_offset", j_int(fl->dict_offset));
    j_set(o, "dictionary_length", j_int(fl->dict_length));
  }
  if (fl->extension_name) j_set(o, "extension_name", j_str(fl->extension_name));
  return o;
}

static j_t *v1_manifest_j(const mw_v1_manifest_t *m) {
  assert(m != NULL);
  assert(m->fields != NULL || m->n_fields == 0);
  j_t *mj = j_obj();
  j_t *fa = j_set(mj, "fields", j_arr());
  for (size_t i = 0; i < m->n_fields; i++) j_push(fa, v1_field_j(&m->fields[i]));
  j_t *fr = j_set(mj, "fragments", j_arr());
  for (size_t i = 0; i < m->n_fragments; i++) {
    j_t *e = j_push(fr, j_obj());
    j_set(e, "id", j_uint(m->fragments[i].id));
    j_t *pa = j_set(e, "files", j_arr());
    for (size_t k = 0; k < m->fragments[i].n_files; k++) j_push(pa, j_str(m->fragments[i].paths[k]));
  }
  j_set(mj, "version", j_uint(m->version));
  j_set(mj, "version_aux_data", j_uint(m->version_aux_data));
  if (m->metadata.n) j_set(mj, "metadata", kvs_j(&m->metadata));
  if (m->has_index_section) j_set(mj, "index_section", j_uint(m->index_section));
  if (m->has_timestamp) j_set(mj, "timestamp", j_fmt("%" PRId64 ".%09d", m->ts_seconds, m->ts_nanos));
  if (m->tag) j_set(mj, "tag", j_str(m->tag));
  if (m->writer_library) j_set(mj, "writer", j_fmt("%s %s", m->writer_library, m->writer_version ? m->writer_version : ""));
  if (m->data_format) j_set(mj, "data_format", j_fmt("%s %s", m->data_format, m->data_format_version ? m->data_format_version : ""));
  if (m->n_unknown) j_set(mj, "fields_not_in_format_proto", j_uint(m->n_unknown));
  return mj;
}

/* the page table */
static j_t *v1_pages_j(const mw_v1_file_t *f) {
  assert(f != NULL);
  j_t *pt = j_arr();
  for (size_t fi = 0; fi < f->pages.n_fields; fi++)
    for (size_t b = 0; b < f->pages.n_batches; b++) {
      uint64_t pos, items;
      if (mw_v1_page(f, false, (int32_t)fi, b, &pos, &items, NULL) < 0) continue;
      j_t *e = j_push(pt, j_obj());
      j_set(e, "field_id", j_uint(fi));
      j_set(e, "batch", j_uint(b));
      j_set(e, "position", j_uint(pos));
      j_set(e, "items", j_uint(items));
    }
  return pt;
}

/* the values of every decodable top-level field */
static int v1_values_j(mw_v1_file_t *f, const mw_show_opts_t *o, j_t *vals, mw_err_t *err) {
  assert(f != NULL);
  assert(o != NULL);
  assert(vals != NULL);
  int rc = 0;
  for (size_t i = 0; f->has_manifest && i < f->manifest.n_fields && rc == 0; i++) {
    const mw_v1_field_t *fl = &f->manifest.fields[i];
    mw_field_t mf;
    mw_column_t c = {0};
    mw_err_t e2 = {0};
    if (fl->parent_id != -1 || mw_v1_field_type(fl, &mf, &e2) < 0) {
      j_set(vals, fl->name, j_fmt("(not decoded: %s)", e2.msg[0] ? e2.msg : "nested field"));
      continue;
    }
    rc = mw_v1_read_column(f, false, fl, &mf, &c, err);
    if (rc == 0) j_set(vals, fl->name, column_rows_j(&mf, &c, cap_rows(o, c.length)));
    mw_column_free(&c);
  }
  return rc;
}

/* the statistics: their fields, and their values named parent.field */
static int v1_stats_j(mw_v1_file_t *f, const mw_show_opts_t *o, j_t *st, mw_err_t *err) {
  assert(f->has_stats);
  j_set(st, "page_table_position", j_uint(f->stats_pages.position));
  j_t *sf = j_set(st, "fields", j_arr());
  for (size_t i = 0; i < f->n_stats_fields; i++) j_push(sf, v1_field_j(&f->stats_fields[i]));
  j_t *sv = j_set(st, "values", j_obj());
  int rc = 0;
  for (size_t i = 0; i < f->n_stats_fields && rc == 0; i++) {
    const mw_v1_field_t *fl = &f->stats_fields[i];
    mw_field_t mf;
    mw_column_t c = {0};
    if (mw_v1_field_type(fl, &mf, NULL) < 0) continue; /* struct parents */
    const char *parent = "?";
    for (size_t k = 0; k < f->n_stats_fields; k++)
      if (f->stats_fields[k].id == fl->parent_id) parent = f->stats_fields[k].name;
    char name[256];
    snprintf(name, sizeof name, "%s.%s", parent, fl->name);
    rc = mw_v1_read_column(f, true, fl, &mf, &c, err);
    if (rc == 0) j_set(sv, name, column_rows_j(&mf, &c, cap_rows(o, c.length)));
    mw_column_free(&c);
  }
  return rc;
}

static int show_v1(const uint8_t *p, size_t n, const mw_show_opts_t *o, j_t *out, mw_err_t *err) {
  assert(o != NULL);
  assert(out != NULL);
  mw_v1_file_t f;
  int rc = mw_v1_open(&f, p, n, err);
  if (rc < 0) {
    mw_v1_close(&f);
    return rc;
  }
  j_set(out, "format", j_fmt("lance v1 legacy (footer %u.%u)", f.major, f.minor));
  j_set(out, "metadata_position", j_uint(f.metadata_position));
  j_set(out, "manifest_position", j_uint(f.manifest_position));
  j_set(out, "page_table_position", j_uint(f.pages.position));
  j_t *bo = j_set(out, "batch_offsets", j_arr());
  for (size_t i = 0; i < f.n_batch_offsets; i++) j_push(bo, j_uint(f.batch_offsets[i]));
  j_set(out, "rows", j_uint(mw_v1_rows(&f)));
  if (f.has_manifest) j_set(out, "manifest", v1_manifest_j(&f.manifest));
  j_set(out, "pages", v1_pages_j(&f));
  rc = v1_values_j(&f, o, j_set(out, "values", j_obj()), err);
  if (rc == 0 && f.has_stats) rc = v1_stats_j(&f, o, j_set(out, "statistics", j_obj()), err);
  mw_v1_close(&f);
  return rc;
}

/* ----------------------------------------------------------------- show */

int mw_show(const char *key, mw_kind_t kind, const uint8_t *p, size_t n, const mw_show_opts_t *o,
            j_t **out, mw_err_t *err) {
  assert(key != NULL);
  assert(out != NULL);
  assert(o != NULL);
  j_t *t = j_obj();
  j_set(t, "key", j_str(key));
  j_set(t, "kind", j_str(mw_kind_name(kind)));
  j_set(t, "bytes", j_uint(n));
  int rc;
  switch (kind) {
    case MW_KIND_WAL: rc = show_wal(key, p, n, o, t, err); break;
    case MW_KIND_SHARD_MANIFEST: rc = show_shard_manifest(key, p, n, t, err); break;
    case MW_KIND_VERSION_HINT: rc = show_hint(p, n, t, err); break;
    case MW_KIND_DATASET_MANIFEST: rc = show_dataset_manifest(key, p, n, t, err); break;
    case MW_KIND_TXN: rc = show_txn(p, n, t, err); break;
    case MW_KIND_DELETION_BIN: rc = show_deletion(key, false, p, n, o, t, err); break;
    case MW_KIND_DELETION_ARROW: rc = show_deletion(key, true, p, n, o, t, err); break;
    case MW_KIND_BLOOM: rc = show_bloom(p, n, t, err); break;
    case MW_KIND_ZONE_SEED: rc = show_zone_seed(p, n, o, t, err); break;
    case MW_KIND_OWNER: rc = show_owner(key, p, n, t, err); break;
    case MW_KIND_STAGING:
      show_staging(key, n, t);
      rc = 0;
      break;
    case MW_KIND_PK_DATA:
    case MW_KIND_PK_LOOKUP:
    case MW_KIND_DATAFILE:
      rc = mw_v1_is_v1(p, n) ? show_v1(p, n, o, t, err) : show_datafile_v2(p, n, kind, o, t, err);
      break;
    default: rc = mw_err_set(err, -ENOTSUP, "%s: cannot tell what this object is (use --kind)", key); break;
  }
  if (rc < 0) {
    j_free(t);
    *out = NULL;
    return rc;
  }
  *out = t;
  return 0;
}
