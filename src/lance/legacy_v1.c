/*
 * legacy_v1.c — Lance v1 data file reader (see legacy_v1.h).
 *
 * A 2-row file LanceDB 0.39.0 wrote (table {id double, s string, f double},
 * rows (1, "a", 1.5) and (2, null, null)), 887 bytes:
 *
 *   0     00 00 00 00 00 00 f0 3f  00 .. 00 40       id: PLAIN doubles 1.0, 2.0
 *   16    61                                          s: the bytes "a"
 *   17    10 00 .. 00  11 00 .. 00  11 00 .. 00       s: offsets 16, 17, 17
 *   41    00 .. f8 3f  00 .. 00                       f: 1.5, 0.0 (null lost)
 *   57    00 00 .. | 02 00 .. | 11 00 .. | 02 ..      page table: (0,2) (17,2) (41,2)
 *   ...   statistics pages and their page table
 *   387   7a 00 00 00  0a 1b 12 02 69 64 ...          u32 122 || Manifest
 *   513   62 01 00 00  08 83 03 12 02 00 02 18 39 ... u32 354 || Metadata {
 *                                                     manifest_position 387,
 *                                                     batch_offsets [0, 2],
 *                                                     page_table_position 57,
 *                                                     statistics {...} }
 *   871   01 02 00 00 00 00 00 00  00 00  02 00  "LANC"
 *
 * Every offset and length is checked before use; the messages are walked
 * with mw_pb_next and any field number the seed does not define is counted
 * and skipped (so newer writers' additions never fail a read).
 */
#include "lance/legacy_v1.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lance/shard_manifest.h"

#define V1_MAX_MESSAGE_BYTES ((size_t)64 << 20)

typedef struct pbx {
  const uint8_t *p;
  size_t n;
  size_t base;  /* file offset of p[0] */
  mw_err_t *err;
} pbx_t;

static int bad(pbx_t *x, const mw_pb_field_t *f, const char *what) {
  assert(x != NULL);
  assert(f != NULL);
  return mw_err_set(x->err, -EBADMSG, "lance v1: byte %zu: %s (field %u, wire type %u)",
                    x->base + f->start, what, f->tag, f->wire);
}

/* The next field of message x after *pos: 1, 0 at its end, or -errno. */
static int pbx_next(pbx_t *x, size_t *pos, mw_pb_field_t *f) {
  assert(x != NULL);
  assert(*pos <= x->n);
  return mw_pb_next(x->p, x->n, pos, f, x->base, x->err);
}

static int take_str(pbx_t *x, const mw_pb_field_t *f, char **out, const char *what) {
  assert(f != NULL);
  assert(out != NULL);
  if (f->wire != 2) return bad(x, f, what);
  if (memchr(f->data, 0, f->len) != NULL) return bad(x, f, "NUL inside a string");
  char *s = malloc(f->len + 1);
  if (s == NULL) return -ENOMEM;
  memcpy(s, f->data, f->len);
  s[f->len] = 0;
  free(*out);
  *out = s;
  return 0;
}

static int take_varint(pbx_t *x, const mw_pb_field_t *f, uint64_t *v, const char *what) {
  assert(f != NULL);
  assert(v != NULL);
  if (f->wire != 0) return bad(x, f, what);
  *v = f->value;
  return 0;
}

/* A sub-message: walk its bytes with file offsets kept right. */
static pbx_t sub(const pbx_t *x, const mw_pb_field_t *f) {
  assert(x != NULL);
  assert(f != NULL);
  return (pbx_t){f->data, f->len, x->base + (size_t)(f->data - x->p), x->err};
}

/* Append the int32 values of a packed (wire 2) or single (wire 0) field. */
static int take_i32s(pbx_t *x, const mw_pb_field_t *f, int32_t **v, size_t *n, size_t max,
                     const char *what) {
  assert(x != NULL);
  assert(f != NULL);
  assert(v != NULL);
  mw_pb_field_t one = *f;
  size_t pos = 0;
  pbx_t s = *x;
  if (f->wire == 2) s = sub(x, f);
  for (;;) {
    uint64_t val;
    if (f->wire == 0) {
      val = f->value;
    } else if (f->wire == 2) {
      if (pos == s.n) break;
      uint64_t acc = 0;
      int shift = 0;
      for (;;) {
        if (pos == s.n || shift > 63) return bad(x, f, "truncated packed varint");
        uint8_t b = s.p[pos++];
        acc |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80)) break;
      }
      val = acc;
    } else {
      return bad(x, &one, what);
    }
    if (*n >= max) return mw_err_set(x->err, -EFBIG, "lance v1: %s: more than %zu values", what, max);
    int32_t *nv = realloc(*v, (*n + 1) * sizeof *nv);
    if (nv == NULL) return -ENOMEM;
    *v = nv;
    nv[(*n)++] = (int32_t)(uint32_t)val; /* int32 on the wire: sign-extended 64-bit varints */
    if (f->wire == 0) break;
  }
  return 0;
}

/* ---------------------------------------------------------------- Field */

static int parse_dictionary(pbx_t *x, mw_v1_field_t *out) {
  assert(x != NULL);
  assert(out != NULL);
  mw_pb_field_t f;
  int rc;
  for (size_t pos = 0; (rc = pbx_next(x, &pos, &f)) == 1;) {
    uint64_t v = 0;
    if (f.tag == 1 && (rc = take_varint(x, &f, &v, "Dictionary.offset")) == 0) out->dict_offset = (int64_t)v;
    else if (f.tag == 2 && (rc = take_varint(x, &f, &v, "Dictionary.length")) == 0) out->dict_length = (int64_t)v;
    if (rc < 0) return rc;
  }
  return rc;
}

static int parse_field(pbx_t *x, mw_v1_field_t *out) {
  assert(x != NULL);
  memset(out, 0, sizeof *out);
  out->parent_id = 0; /* proto3 default; Lance writes -1 for top-level fields */
  size_t pos = 0;
  mw_pb_field_t f;
  int rc;
  while ((rc = pbx_next(x, &pos, &f)) == 1) {
    uint64_t v = 0;
    switch (f.tag) {
      case 1: if ((rc = take_varint(x, &f, &v, "Field.type")) == 0) out->type = (int32_t)v; break;
      case 2: rc = take_str(x, &f, &out->name, "Field.name"); break;
      case 3: if ((rc = take_varint(x, &f, &v, "Field.id")) == 0) out->id = (int32_t)(uint32_t)v; break;
      case 4: if ((rc = take_varint(x, &f, &v, "Field.parent_id")) == 0) out->parent_id = (int32_t)(uint32_t)v; break;
      case 5: rc = take_str(x, &f, &out->logical_type, "Field.logical_type"); break;
      case 6: if ((rc = take_varint(x, &f, &v, "Field.nullable")) == 0) out->nullable = v != 0; break;
      case 7: if ((rc = take_varint(x, &f, &v, "Field.encoding")) == 0) out->encoding = (int32_t)v; break;
      case 8: {
        if (f.wire != 2) return bad(x, &f, "Field.dictionary");
        pbx_t s = sub(x, &f);
        rc = parse_dictionary(&s, out);
        break;
      }
      case 9: rc = take_str(x, &f, &out->extension_name, "Field.extension_name"); break;
      default: break; /* table.proto additions (metadata, primary key): not the seed's */
    }
    if (rc < 0) return rc;
  }
  if (rc < 0) return rc;
  if (out->name == NULL && (out->name = strdup("")) == NULL) return -ENOMEM;
  if (out->logical_type == NULL && (out->logical_type = strdup("")) == NULL) return -ENOMEM;
  if (out->id < 0 || out->id > MW_V1_MAX_FIELD_ID)
    return mw_err_set(x->err, -EBADMSG, "lance v1: byte %zu: field %s has id %d", x->base, out->name, out->id);
  return 0;
}

static int push_field(pbx_t *x, const mw_pb_field_t *f, mw_v1_field_t **v, size_t *n) {
  assert(x != NULL);
  assert(f != NULL);
  assert(v != NULL);
  if (f->wire != 2) return bad(x, f, "Field");
  if (*n >= MW_V1_MAX_FIELDS) return mw_err_set(x->err, -EFBIG, "lance v1: more than %d fields", MW_V1_MAX_FIELDS);
  mw_v1_field_t *nv = realloc(*v, (*n + 1) * sizeof *nv);
  if (nv == NULL) return -ENOMEM;
  *v = nv;
  pbx_t s = sub(x, f);
  int rc = parse_field(&s, &nv[*n]);
  (*n)++; /* freed by the owner either way */
  return rc;
}

/* ------------------------------------------------------------- Manifest */

static void field_free(mw_v1_field_t *f) {
  assert(f != NULL);
  free(f->name);
  free(f->logical_type);
  free(f->extension_name);
  memset(f, 0, sizeof *f);
}

static void manifest_free(mw_v1_manifest_t *m) {
  assert(m != NULL);
  for (size_t i = 0; i < m->n_fields; i++) field_free(&m->fields[i]);
  free(m->fields);
  for (size_t i = 0; i < m->n_fragments; i++) {
    for (size_t k = 0; k < m->fragments[i].n_files; k++) free(m->fragments[i].paths[k]);
    free(m->fragments[i].paths);
  }
  free(m->fragments);
  mw_kvs_free(&m->metadata);
  free(m->tag);
  free(m->writer_library);
  free(m->writer_version);
  free(m->data_format);
  free(m->data_format_version);
  memset(m, 0, sizeof *m);
}

static int parse_fragment(pbx_t *x, mw_v1_fragment_t *fr) {
  assert(x != NULL);
  assert(fr != NULL);
  size_t pos = 0;
  mw_pb_field_t f;
  int rc;
  while ((rc = pbx_next(x, &pos, &f)) == 1) {
    if (f.tag == 1) {
      rc = take_varint(x, &f, &fr->id, "DataFragment.id");
    } else if (f.tag == 2) {
      if (f.wire != 2) return bad(x, &f, "DataFragment.files");
      if (fr->n_files >= MW_V1_MAX_FIELDS) return mw_err_set(x->err, -EFBIG, "lance v1: fragment with too many files");
      char **np = realloc(fr->paths, (fr->n_files + 1) * sizeof *np);
      if (np == NULL) return -ENOMEM;
      fr->paths = np;
      np[fr->n_files] = NULL;
      pbx_t s = sub(x, &f);
      size_t p2 = 0;
      mw_pb_field_t g;
      while ((rc = mw_pb_next(s.p, s.n, &p2, &g, s.base, x->err)) == 1)
        if (g.tag == 1 && (rc = take_str(&s, &g, &np[fr->n_files], "DataFile.path")) < 0) break;
      fr->n_files++;
      if (rc == 0 && np[fr->n_files - 1] == NULL && (np[fr->n_files - 1] = strdup("")) == NULL) rc = -ENOMEM;
    }
    if (rc < 0) return rc;
  }
  return rc;
}

static int parse_pair(pbx_t *x, const mw_pb_field_t *f, char **a, char **b, const char *what) {
  assert(x != NULL);
  assert(f != NULL);
  if (f->wire != 2) return bad(x, f, what);
  pbx_t s = sub(x, f);
  size_t pos = 0;
  mw_pb_field_t g;
  int rc;
  while ((rc = mw_pb_next(s.p, s.n, &pos, &g, s.base, x->err)) == 1) {
    if (g.tag == 1) rc = take_str(&s, &g, a, what);
    else if (g.tag == 2) rc = take_str(&s, &g, b, what);
    if (rc < 0) return rc;
  }
  return rc;
}

static int parse_meta_entry(pbx_t *x, const mw_pb_field_t *f, mw_kvs_t *kvs) {
  assert(x != NULL);
  assert(f != NULL);
  assert(kvs != NULL);
  if (f->wire != 2) return bad(x, f, "Manifest.metadata");
  if (kvs->n >= MW_V1_MAX_META_ENTRIES) return mw_err_set(x->err, -EFBIG, "lance v1: too many metadata entries");
  pbx_t s = sub(x, f);
  size_t pos = 0;
  mw_pb_field_t g;
  char *key = NULL;
  const uint8_t *val = (const uint8_t *)"";
  size_t vn = 0;
  int rc;
  while ((rc = mw_pb_next(s.p, s.n, &pos, &g, s.base, x->err)) == 1) {
    if (g.tag == 1 && (rc = take_str(&s, &g, &key, "metadata key")) < 0) break;
    if (g.tag == 2) {
      if (g.wire != 2) {
        rc = bad(&s, &g, "metadata value");
        break;
      }
      val = g.data, vn = g.len;
    }
  }
  if (rc == 0) rc = mw_kvs_set(kvs, key ? key : "", val, vn);
  free(key);
  return rc;
}

static int parse_manifest(pbx_t *x, mw_v1_manifest_t *m) {
  assert(x != NULL);
  assert(m != NULL);
  assert(x->n <= V1_MAX_MESSAGE_BYTES); /* framed() bounds every message */
  mw_pb_field_t f;
  int rc;
  for (size_t pos = 0; (rc = pbx_next(x, &pos, &f)) == 1;) {
    uint64_t v = 0;
    switch (f.tag) {
      case 1: rc = push_field(x, &f, &m->fields, &m->n_fields); break;
      case 2: {
        if (f.wire != 2) return bad(x, &f, "Manifest.fragments");
        if (m->n_fragments >= MW_V1_MAX_FRAGMENTS) return mw_err_set(x->err, -EFBIG, "lance v1: too many fragments");
        mw_v1_fragment_t *nf = realloc(m->fragments, (m->n_fragments + 1) * sizeof *nf);
        if (nf == NULL) return -ENOMEM;
        m->fragments = nf;
        memset(&nf[m->n_fragments], 0, sizeof *nf);
        pbx_t s = sub(x, &f);
        rc = parse_fragment(&s, &nf[m->n_fragments++]);
        break;
      }
      case 3: rc = take_varint(x, &f, &m->version, "Manifest.version"); break;
      case 4: rc = take_varint(x, &f, &m->version_aux_data, "Manifest.version_aux_data"); break;
      case 5: rc = parse_meta_entry(x, &f, &m->metadata); break;
      case 6:
        m->has_index_section = true;
        rc = take_varint(x, &f, &m->index_section, "Manifest.index_section");
        break;
      case 7: {
        if (f.wire != 2) return bad(x, &f, "Manifest.timestamp");
        pbx_t s = sub(x, &f);
        size_t p2 = 0;
        mw_pb_field_t g;
        m->has_timestamp = true;
        while ((rc = mw_pb_next(s.p, s.n, &p2, &g, s.base, x->err)) == 1) {
          if (g.tag == 1 && (rc = take_varint(&s, &g, &v, "Timestamp.seconds")) == 0) m->ts_seconds = (int64_t)v;
          else if (g.tag == 2 && (rc = take_varint(&s, &g, &v, "Timestamp.nanos")) == 0) m->ts_nanos = (int32_t)(uint32_t)v;
          if (rc < 0) break;
        }
        break;
      }
      case 8: rc = take_str(x, &f, &m->tag, "Manifest.tag"); break;
      case 13: rc = parse_pair(x, &f, &m->writer_library, &m->writer_version, "writer_version"); break;
      case 15: rc = parse_pair(x, &f, &m->data_format, &m->data_format_version, "data_format"); break;
      default: m->n_unknown++; break;
    }
    if (rc < 0) return rc;
  }
  return rc;
}

/* ------------------------------------------------------------- Metadata */

static int parse_stats(pbx_t *x, mw_v1_file_t *v) {
  assert(v != NULL);
  size_t pos = 0;
  mw_pb_field_t f;
  int rc;
  v->has_stats = true;
  while ((rc = pbx_next(x, &pos, &f)) == 1) {
    if (f.tag == 1) rc = push_field(x, &f, &v->stats_fields, &v->n_stats_fields);
    else if (f.tag == 2) rc = take_i32s(x, &f, &v->stats_field_ids, &v->n_stats_field_ids, MW_V1_MAX_FIELDS, "statistics fields");
    else if (f.tag == 3) rc = take_varint(x, &f, &v->stats_pages.position, "statistics page_table_position");
    if (rc < 0) return rc;
  }
  return rc;
}

static int parse_metadata(pbx_t *x, mw_v1_file_t *v) {
  assert(x != NULL);
  assert(v != NULL);
  size_t pos = 0;
  mw_pb_field_t f;
  int32_t *offs = NULL;
  size_t n_offs = 0;
  int rc;
  while ((rc = pbx_next(x, &pos, &f)) == 1) {
    switch (f.tag) {
      case 1: rc = take_varint(x, &f, &v->manifest_position, "Metadata.manifest_position"); break;
      case 2: rc = take_i32s(x, &f, &offs, &n_offs, MW_V1_MAX_BATCHES + 1, "Metadata.batch_offsets"); break;
      case 3: rc = take_varint(x, &f, &v->pages.position, "Metadata.page_table_position"); break;
      case 5: {
        if (f.wire != 2) {
          rc = bad(x, &f, "Metadata.statistics");
          break;
        }
        pbx_t s = sub(x, &f);
        rc = parse_stats(&s, v);
        break;
      }
      default: v->n_unknown++; break;
    }
    if (rc < 0) break;
  }
  if (rc == 0 && n_offs > 0) {
    v->batch_offsets = malloc(n_offs * sizeof *v->batch_offsets);
    if (v->batch_offsets == NULL) rc = -ENOMEM;
    for (size_t i = 0; rc == 0 && i < n_offs; i++) {
      if (offs[i] < 0 || (i == 0 && offs[i] != 0) || (i > 0 && offs[i] < offs[i - 1]) ||
          (uint64_t)offs[i] > MW_V1_MAX_ROWS)
        rc = mw_err_set(x->err, -EBADMSG, "lance v1: byte %zu: batch_offsets[%zu] = %d is not a running row count",
                        x->base, i, offs[i]);
      else
        v->batch_offsets[i] = (uint64_t)offs[i];
    }
    v->n_batch_offsets = n_offs;
  }
  free(offs);
  return rc;
}

/* ---------------------------------------------------------------- open */

bool mw_v1_is_v1(const uint8_t *p, size_t n) {
  if (n < MW_V1_FOOTER_BYTES || memcmp(p + n - 4, "LANC", 4) != 0) return false;
  uint16_t major = mw_load_u16le(p + n - 8), minor = mw_load_u16le(p + n - 6);
  return major == 0 && (minor == 1 || minor == 2);
}

void mw_v1_close(mw_v1_file_t *f) {
  if (f == NULL) return;
  manifest_free(&f->manifest);
  free(f->batch_offsets);
  for (size_t i = 0; i < f->n_stats_fields; i++) field_free(&f->stats_fields[i]);
  free(f->stats_fields);
  free(f->stats_field_ids);
  memset(f, 0, sizeof *f);
}

/* u32 len || message at `at`, ending at or before `limit`. */
static int framed(const mw_v1_file_t *f, uint64_t at, uint64_t limit, const char *what, pbx_t *out,
                  mw_err_t *err) {
  assert(f != NULL);
  assert(out != NULL);
  if (at > limit || limit - at < 4)
    return mw_err_set(err, -EBADMSG, "lance v1: %s position %" PRIu64 " outside the file's %zu bytes", what, at, f->len);
  uint32_t len = mw_load_u32le(f->data + at);
  if (len > limit - at - 4 || len > V1_MAX_MESSAGE_BYTES)
    return mw_err_set(err, -EBADMSG, "lance v1: byte %" PRIu64 ": %s of %u bytes overruns byte %" PRIu64, at, what, len, limit);
  *out = (pbx_t){f->data + at + 4, len, (size_t)at + 4, err};
  return 0;
}

static int32_t max_id(const mw_v1_field_t *v, size_t n) {
  int32_t m = -1;
  for (size_t i = 0; i < n; i++)
    if (v[i].id > m) m = v[i].id;
  return m;
}

static int check_table(const mw_v1_file_t *f, const mw_v1_pages_t *t, const char *what, mw_err_t *err) {
  assert(f != NULL);
  if (t->n_fields == 0 || t->n_batches == 0) return 0;
  if (t->n_fields > MW_V1_MAX_PAGE_ENTRIES / t->n_batches)
    return mw_err_set(err, -EFBIG, "lance v1: %s page table of %zu x %zu entries", what, t->n_fields, t->n_batches);
  uint64_t bytes = 16 * (uint64_t)t->n_fields * t->n_batches;
  if (t->position > f->metadata_position || bytes > f->metadata_position - t->position)
    return mw_err_set(err, -EBADMSG, "lance v1: %s page table at %" PRIu64 " (%" PRIu64 " bytes) overruns the metadata at %" PRIu64,
                      what, t->position, bytes, f->metadata_position);
  return 0;
}

int mw_v1_open(mw_v1_file_t *f, const uint8_t *p, size_t n, mw_err_t *err) {
  assert(f != NULL);
  assert(p != NULL || n == 0);
  memset(f, 0, sizeof *f);
  f->data = p;
  f->len = n;
  if (!mw_v1_is_v1(p, n))
    return mw_err_set(err, -EBADMSG, "lance v1: no v1 footer (LANC, version 0.1 or 0.2) in the last %d bytes", MW_V1_FOOTER_BYTES);
  const uint8_t *ft = p + n - MW_V1_FOOTER_BYTES;
  f->metadata_position = mw_load_u64le(ft);
  f->major = mw_load_u16le(ft + 8);
  f->minor = mw_load_u16le(ft + 10);
  uint64_t end = n - MW_V1_FOOTER_BYTES;
  pbx_t x;
  int rc = framed(f, f->metadata_position, end, "metadata", &x, err);
  if (rc < 0) return rc;
  if (f->metadata_position + 4 + x.n != end)
    return mw_err_set(err, -EBADMSG, "lance v1: metadata at %" PRIu64 " ends at %" PRIu64 ", not at the footer (%" PRIu64 ")",
                      f->metadata_position, f->metadata_position + 4 + x.n, end);
  f->metadata_len = x.n;
  if ((rc = parse_metadata(&x, f)) < 0) return rc;
  if (f->manifest_position != 0) {
    if ((rc = framed(f, f->manifest_position, f->metadata_position, "manifest", &x, err)) < 0) return rc;
    f->has_manifest = true;
    if ((rc = parse_manifest(&x, &f->manifest)) < 0) return rc;
    f->pages.n_fields = (size_t)(max_id(f->manifest.fields, f->manifest.n_fields) + 1);
  }
  f->pages.n_batches = f->n_batch_offsets ? f->n_batch_offsets - 1 : 0;
  if ((rc = check_table(f, &f->pages, "data", err)) < 0) return rc;
  if (f->has_stats) {
    f->stats_pages.n_fields = (size_t)(max_id(f->stats_fields, f->n_stats_fields) + 1);
    f->stats_pages.n_batches = 1; /* one page per statistics field, a row per data batch */
    if ((rc = check_table(f, &f->stats_pages, "statistics", err)) < 0) return rc;
  }
  return 0;
}

uint64_t mw_v1_rows(const mw_v1_file_t *f) {
  assert(f != NULL);
  return f->n_batch_offsets ? f->batch_offsets[f->n_batch_offsets - 1] : 0;
}

int mw_v1_page(const mw_v1_file_t *f, bool stats, int32_t field_id, size_t batch, uint64_t *pos,
               uint64_t *items, mw_err_t *err) {
  assert(f != NULL);
  assert(pos != NULL);
  assert(items != NULL);
  const mw_v1_pages_t *t = stats ? &f->stats_pages : &f->pages;
  if (field_id < 0 || (size_t)field_id >= t->n_fields || batch >= t->n_batches)
    return mw_err_set(err, -EINVAL, "lance v1: no page for field %d batch %zu (%zu fields x %zu batches)", field_id,
                      batch, t->n_fields, t->n_batches);
  const uint8_t *e = f->data + t->position + 16 * ((uint64_t)field_id * t->n_batches + batch);
  *pos = mw_load_u64le(e);
  *items = mw_load_u64le(e + 8);
  if (*pos > f->len || *items > MW_V1_MAX_ROWS)
    return mw_err_set(err, -EBADMSG, "lance v1: page of field %d batch %zu at %" PRIu64 " with %" PRIu64 " items is outside the file",
                      field_id, batch, *pos, *items);
  return 0;
}

/* -------------------------------------------------------------- columns */

int mw_v1_field_type(const mw_v1_field_t *fl, mw_field_t *out, mw_err_t *err) {
  static const struct { const char *name; mw_type_t t; } map[] = {
      {"int32", MW_T_INT32},   {"int64", MW_T_INT64},   {"uint32", MW_T_UINT32},
      {"uint64", MW_T_UINT64}, {"float", MW_T_FLOAT32}, {"double", MW_T_FLOAT64},
      {"bool", MW_T_BOOL},     {"string", MW_T_UTF8},   {"large_string", MW_T_UTF8},
      {"binary", MW_T_BINARY}, {"large_binary", MW_T_BINARY}};
  assert(fl != NULL);
  assert(out != NULL);
  memset(out, 0, sizeof *out);
  out->name = fl->name;
  out->nullable = fl->nullable;
  out->id = fl->id;
  out->item_nullable = true;
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    if (strcmp(fl->logical_type, map[i].name) == 0) {
      out->type = map[i].t;
      return 0;
    }
  const char *pfx = "fixed_size_list:float:";
  if (strncmp(fl->logical_type, pfx, strlen(pfx)) == 0) {
    const char *d = fl->logical_type + strlen(pfx);
    char *endp;
    long dim = strtol(d, &endp, 10);
    if (*d >= '1' && *d <= '9' && *endp == 0 && dim >= 1 && dim <= MW_MAX_FSL_DIM) {
      out->type = MW_T_FSL;
      out->item_type = MW_T_FLOAT32;
      out->fsl_dim = (int32_t)dim;
      return 0;
    }
  }
  return mw_err_set(err, -ENOTSUP, "lance v1: field %s: logical type \"%s\" is not decoded", fl->name, fl->logical_type);
}

/* Bytes a column may still copy: a real file's pages never overlap, so a
 * column holds at most the file's size; overlapping pages of a hostile file
 * cannot make us allocate more. */
static int charge(uint64_t *budget, uint64_t n, const char *where, mw_err_t *err) {
  assert(budget != NULL);
  if (n > *budget) return mw_err_set(err, -EBADMSG, "lance v1: %s: pages overlap (more bytes than the file holds)", where);
  *budget -= n;
  return 0;
}

static int read_var(const mw_v1_file_t *f, const mw_field_t *mf, uint64_t pos, uint64_t items,
                    mw_column_t *out, uint64_t *budget, const char *where, mw_err_t *err) {
  assert(f != NULL);
  if ((items + 1) > (f->len - pos) / 8)
    return mw_err_set(err, -EBADMSG, "lance v1: %s: %" PRIu64 " offsets at %" PRIu64 " overrun the file", where, items + 1, pos);
  const uint8_t *o = f->data + pos;
  for (uint64_t i = 0; i < items; i++) {
    uint64_t a = mw_load_u64le(o + 8 * i), b = mw_load_u64le(o + 8 * (i + 1));
    if (a > b || b > f->len)
      return mw_err_set(err, -EBADMSG, "lance v1: %s: offsets %" PRIu64 "..%" PRIu64 " of item %" PRIu64 " outside the file",
                        where, a, b, i);
    int rc = charge(budget, b - a + 8, where, err);
    if (rc < 0) return rc;
    rc = (a == b && mf->nullable) ? mw_column_append_null(out, mf)
                                  : mw_column_append_bytes(out, f->data + a, (size_t)(b - a));
    if (rc < 0) return rc;
  }
  return 0;
}

static int read_fixed(const mw_v1_file_t *f, const mw_field_t *mf, uint64_t pos, uint64_t items,
                      mw_column_t *out, uint64_t *budget, const char *where, mw_err_t *err) {
  if (mf->type == MW_T_BOOL) {
    uint64_t bytes = (items + 7) / 8;
    if (bytes > f->len - pos) return mw_err_set(err, -EBADMSG, "lance v1: %s: bitmap at %" PRIu64 " overruns the file", where, pos);
    int rc = charge(budget, bytes, where, err);
    if (rc < 0) return rc;
    for (uint64_t i = 0; i < items && rc == 0; i++) rc = mw_column_append_bool(out, mw_bit_get(f->data + pos, (int64_t)i));
    return rc;
  }
  size_t w = mw_type_width(mf);
  assert(w > 0);
  if (items > (f->len - pos) / w)
    return mw_err_set(err, -EBADMSG, "lance v1: %s: %" PRIu64 " values of %zu bytes at %" PRIu64 " overrun the file", where,
                      items, w, pos);
  int rc = charge(budget, items * w, where, err);
  if (rc == 0) rc = mw_buf_append(&out->values, f->data + pos, (size_t)items * w);
  if (rc < 0) return rc;
  out->length += (int64_t)items;
  return 0;
}

int mw_v1_read_column(const mw_v1_file_t *f, bool stats, const mw_v1_field_t *fl,
                      const mw_field_t *mf, mw_column_t *out, mw_err_t *err) {
  assert(f != NULL);
  assert(fl != NULL);
  assert(mf != NULL);
  assert(out != NULL);
  assert(out->length == 0);
  bool var = mf->type == MW_T_UTF8 || mf->type == MW_T_BINARY;
  int want = var ? MW_V1_ENC_VAR_BINARY : MW_V1_ENC_PLAIN;
  if (fl->encoding != want)
    return mw_err_set(err, fl->encoding == MW_V1_ENC_DICTIONARY || fl->encoding == MW_V1_ENC_RLE ? -ENOTSUP : -EBADMSG,
                      "lance v1: field %s: encoding %d for %s", fl->name, fl->encoding, fl->logical_type);
  if (var && out->offsets.len == 0 && mw_buf_put_u32le(&out->offsets, 0) < 0) return -ENOMEM;
  const mw_v1_pages_t *t = stats ? &f->stats_pages : &f->pages;
  uint64_t total = stats ? (uint64_t)f->pages.n_batches : mw_v1_rows(f), budget = f->len;
  for (size_t b = 0; b < t->n_batches; b++) {
    uint64_t pos, items;
    int rc = mw_v1_page(f, stats, fl->id, b, &pos, &items, err);
    if (rc < 0) return rc;
    uint64_t want_items = stats ? total : f->batch_offsets[b + 1] - f->batch_offsets[b];
    char where[128];
    snprintf(where, sizeof where, "%sfield %s (id %d) batch %zu", stats ? "statistics " : "", fl->name, fl->id, b);
    if (items != want_items)
      return mw_err_set(err, -EBADMSG, "lance v1: %s: page holds %" PRIu64 " items, the batch %" PRIu64, where, items, want_items);
    rc = var ? read_var(f, mf, pos, items, out, &budget, where, err)
             : read_fixed(f, mf, pos, items, out, &budget, where, err);
    if (rc < 0) return rc == -ENOMEM ? mw_err_set(err, rc, "lance v1: out of memory") : rc;
  }
  assert((uint64_t)out->length == total);
  return 0;
}
