/*
 * shard_manifest.c — ShardManifest codec, bit-reversed names, version hint,
 * latest-version search (memwal.md §1.2, §1.3, §3). See shard_manifest.h.
 *
 * Design: the wire work is protoc-c's. Decoding unpacks into the generated
 * Lance__Table__ShardManifest, checks every limit, then copies into our plain
 * struct (so callers never see protobuf-c allocations). Encoding builds a
 * generated struct on the stack that borrows our strings and packs it. prost
 * writes fields in ascending tag order and omits proto3 zeros; so does
 * protoc-c, which is why a decode/encode round trip of Lance's bytes is exact.
 * The SsTable size fields are proto3 `optional` in Lance's .proto, but the
 * build copy drops the keyword (proto/meson.build): Lance never writes a 0
 * there, so "0 = absent" loses nothing.
 *
 * Bytes of version 1 of the unsharded vector (28 bytes):
 *   08 01              version = 1
 *   10 01              writer_epoch = 1
 *   30 01              current_generation = 1
 *   50 01              shard_spec_id = 1
 *   5a 12 0a 10 aa48498d ac9159e2 845269f4 6010ace2   shard_id {uuid}
 *
 * Names: version 1 -> "1000…0.binpb" (bit i of n is character i).
 */
#include "lance/shard_manifest.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "table.pb-c.h"

/* ---------------------------------------------------------------- wire walker */

static int get_varint(const uint8_t *p, size_t n, size_t *pos, uint64_t *out) {
  assert(pos != NULL);
  assert(out != NULL);
  uint64_t v = 0;
  for (unsigned shift = 0, i = 0; i < 10; i++, shift += 7) {
    if (*pos >= n) return -EBADMSG;
    uint8_t b = p[(*pos)++];
    if (i == 9 && b > 1) return -EBADMSG;
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return 0;
    }
  }
  return -EBADMSG;
}

int mw_pb_next(const uint8_t *p, size_t n, size_t *pos, mw_pb_field_t *f, size_t base_off,
               mw_err_t *err) {
  assert(pos);
  assert(f);
  assert(*pos <= n);
  if (*pos == n) return 0;
  memset(f, 0, sizeof *f);
  f->start = *pos;
  uint64_t key;
  if (get_varint(p, n, pos, &key) < 0)
    return mw_err_set(err, -EBADMSG, "protobuf: truncated field key at byte %zu",
                      base_off + f->start);
  if ((key >> 3) == 0 || (key >> 3) > 0x1fffffff)
    return mw_err_set(err, -EBADMSG, "protobuf: field number %llu at byte %zu",
                      (unsigned long long)(key >> 3), base_off + f->start);
  f->tag = (uint32_t)(key >> 3);
  f->wire = (uint8_t)(key & 7);
  switch (f->wire) {
    case 0:
      if (get_varint(p, n, pos, &f->value) < 0)
        return mw_err_set(err, -EBADMSG, "protobuf: bad varint in field %u at byte %zu", f->tag,
                          base_off + f->start);
      break;
    case 1:
    case 5: {
      size_t w = f->wire == 1 ? 8 : 4;
      if (n - *pos < w)
        return mw_err_set(err, -EBADMSG, "protobuf: truncated fixed field %u at byte %zu",
                          f->tag, base_off + f->start);
      f->value = w == 8 ? mw_load_u64le(p + *pos) : mw_load_u32le(p + *pos);
      *pos += w;
      break;
    }
    case 2: {
      uint64_t len;
      if (get_varint(p, n, pos, &len) < 0 || len > n - *pos)
        return mw_err_set(err, -EBADMSG,
                          "protobuf: field %u at byte %zu: length past the end of the message",
                          f->tag, base_off + f->start);
      f->data = p + *pos;
      f->len = (size_t)len;
      *pos += (size_t)len;
      break;
    }
    default:
      return mw_err_set(err, -EBADMSG, "protobuf: field %u at byte %zu: wire type %u unsupported",
                        f->tag, base_off + f->start, f->wire);
  }
  f->end = *pos;
  return 1;
}

int mw_pb_check(const uint8_t *p, size_t n, size_t base_off, const char *what, mw_err_t *err) {
  size_t pos = 0;
  mw_pb_field_t f;
  int rc;
  while ((rc = mw_pb_next(p, n, &pos, &f, base_off, err)) > 0) {
  }
  if (rc < 0) mw_err_set(err, rc, "%s: malformed protobuf", what);
  return rc;
}

/* ------------------------------------------------------------------- struct */

void mw_shard_manifest_init(mw_shard_manifest_t *m) {
  assert(m);
  memset(m, 0, sizeof *m);
  m->status = MW_SHARD_ACTIVE;
}

void mw_shard_manifest_free(mw_shard_manifest_t *m) {
  if (m == NULL) return;
  for (size_t i = 0; i < m->n_sstables; i++) free(m->sstables[i].path);
  free(m->sstables);
  for (size_t i = 0; i < m->n_field_entries; i++) {
    free(m->field_entries[i].field_id);
    free(m->field_entries[i].value);
  }
  free(m->field_entries);
  mw_shard_manifest_init(m);
}

static char *dup_bytes(const void *p, size_t n) {
  char *s = malloc(n + 1);
  if (s == NULL) return NULL;
  if (n) memcpy(s, p, n);
  s[n] = '\0';
  return s;
}

static int add_field_entry(mw_shard_manifest_t *m, const char *id, const uint8_t *v, size_t vn) {
  assert(m != NULL);
  mw_shard_field_entry_t *e =
      realloc(m->field_entries, (m->n_field_entries + 1) * sizeof *m->field_entries);
  if (e == NULL) return -ENOMEM;
  m->field_entries = e;
  mw_shard_field_entry_t *x = &e[m->n_field_entries];
  x->field_id = dup_bytes(id, strlen(id));
  x->value = (uint8_t *)dup_bytes(v, vn);
  x->value_len = vn;
  m->n_field_entries++; /* counted first so free() releases a half-built entry */
  if (x->field_id == NULL || x->value == NULL) return -ENOMEM;
  return 0;
}

int mw_shard_manifest_add_sstable(mw_shard_manifest_t *m, uint64_t generation, const char *path,
                                  uint64_t in_memory_bytes, uint64_t physical_rows,
                                  uint64_t primary_key_bytes) {
  assert(m);
  assert(path);
  if (m->n_sstables >= MW_SHARD_MAX_SSTABLES || strlen(path) > MW_SHARD_MAX_PATH_BYTES)
    return -EINVAL;
  mw_sstable_ref_t *t = realloc(m->sstables, (m->n_sstables + 1) * sizeof *t);
  if (t == NULL) return -ENOMEM;
  m->sstables = t;
  char *p = dup_bytes(path, strlen(path));
  if (p == NULL) return -ENOMEM;
  t[m->n_sstables++] = (mw_sstable_ref_t){generation, p, in_memory_bytes, physical_rows,
                                           primary_key_bytes};
  return 0;
}

int mw_shard_manifest_copy(mw_shard_manifest_t *dst, const mw_shard_manifest_t *src) {
  assert(dst);
  assert(src);
  assert(dst != src);
  mw_shard_manifest_free(dst);
  *dst = *src;
  dst->sstables = NULL;
  dst->n_sstables = 0;
  dst->field_entries = NULL;
  dst->n_field_entries = 0;
  int rc = 0;
  for (size_t i = 0; i < src->n_sstables && rc == 0; i++) {
    const mw_sstable_ref_t *t = &src->sstables[i];
    rc = mw_shard_manifest_add_sstable(dst, t->generation, t->path, t->in_memory_bytes,
                                       t->physical_rows, t->primary_key_bytes);
  }
  for (size_t i = 0; i < src->n_field_entries && rc == 0; i++) {
    const mw_shard_field_entry_t *e = &src->field_entries[i];
    rc = add_field_entry(dst, e->field_id, e->value, e->value_len);
  }
  if (rc < 0) mw_shard_manifest_free(dst);
  return rc;
}

/* ------------------------------------------------------------------- encode */

static int check_path(const char *s, size_t len) {
  if (len == 0 || len > MW_SHARD_MAX_PATH_BYTES) return -1;
  if (memchr(s, '/', len) || memchr(s, '\0', len)) return -1;
  if ((len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.')) return -1;
  return 0;
}

int mw_shard_manifest_encode(const mw_shard_manifest_t *m, mw_buf_t *out) {
  assert(m);
  assert(out);
  if (m->n_sstables > MW_SHARD_MAX_SSTABLES || m->n_field_entries > MW_SHARD_MAX_FIELD_ENTRIES)
    return -EINVAL;
  int rc = -ENOMEM;
  Lance__Table__ShardManifest pb = LANCE__TABLE__SHARD_MANIFEST__INIT;
  Lance__Table__UUID uuid = LANCE__TABLE__UUID__INIT;
  Lance__Table__SsTable *tabs = calloc(m->n_sstables + 1, sizeof *tabs);
  Lance__Table__SsTable **tabp = calloc(m->n_sstables + 1, sizeof *tabp);
  Lance__Table__ShardFieldEntry *ents = calloc(m->n_field_entries + 1, sizeof *ents);
  Lance__Table__ShardFieldEntry **entp = calloc(m->n_field_entries + 1, sizeof *entp);
  if (!tabs || !tabp || !ents || !entp) goto fail;
  pb.version = m->version;
  pb.writer_epoch = m->writer_epoch;
  pb.replay_after_wal_entry_position = m->replay_after_wal_entry_position;
  pb.wal_entry_position_last_seen = m->wal_entry_position_last_seen;
  pb.current_generation = m->current_generation;
  pb.shard_spec_id = m->shard_spec_id;
  pb.status = m->status == MW_SHARD_SEALED ? LANCE__TABLE__SHARD_STATUS__SEALED
                                           : LANCE__TABLE__SHARD_STATUS__ACTIVE;
  for (size_t i = 0; i < m->n_sstables; i++) {
    const mw_sstable_ref_t *t = &m->sstables[i];
    lance__table__ss_table__init(&tabs[i]);
    tabs[i].generation = t->generation;
    tabs[i].path = t->path ? t->path : (char *)"";
    tabs[i].in_memory_bytes = t->in_memory_bytes;
    tabs[i].physical_rows = t->physical_rows;
    tabs[i].primary_key_bytes = t->primary_key_bytes;
    tabp[i] = &tabs[i];
  }
  pb.n_sstables = m->n_sstables;
  pb.sstables = tabp;
  for (size_t i = 0; i < m->n_field_entries; i++) {
    lance__table__shard_field_entry__init(&ents[i]);
    ents[i].field_id = m->field_entries[i].field_id;
    ents[i].value.data = m->field_entries[i].value;
    ents[i].value.len = m->field_entries[i].value_len;
    entp[i] = &ents[i];
  }
  pb.n_shard_field_entries = m->n_field_entries;
  pb.shard_field_entries = entp;
  if (m->has_shard_id) {
    uuid.uuid.data = (uint8_t *)m->shard_id;
    uuid.uuid.len = 16;
    pb.shard_id = &uuid;
  }
  size_t len = lance__table__shard_manifest__get_packed_size(&pb);
  rc = 0;
  if (len == 0) goto fail; /* all defaults: nothing to write */
  rc = -ENOMEM;
  uint8_t *dst = mw_buf_extend(out, len);
  if (dst == NULL) goto fail;
  size_t wrote = lance__table__shard_manifest__pack(&pb, dst);
  assert(wrote == len);
  (void)wrote;
  rc = 0;
fail:
  free(tabs);
  free(tabp);
  free(ents);
  free(entp);
  return rc;
}

/* ------------------------------------------------------------------- decode */

static int copy_in(const Lance__Table__ShardManifest *pb, mw_shard_manifest_t *m, mw_err_t *err) {
  assert(pb != NULL);
  assert(m != NULL);
  m->version = pb->version;
  m->writer_epoch = pb->writer_epoch;
  m->replay_after_wal_entry_position = pb->replay_after_wal_entry_position;
  m->wal_entry_position_last_seen = pb->wal_entry_position_last_seen;
  m->current_generation = pb->current_generation;
  m->shard_spec_id = pb->shard_spec_id;
  /* Open proto3 enum: anything but SEALED reads as ACTIVE ([I]). */
  m->status = pb->status == LANCE__TABLE__SHARD_STATUS__SEALED ? MW_SHARD_SEALED : MW_SHARD_ACTIVE;
  if (pb->shard_id) {
    if (pb->shard_id->uuid.len != 16)
      return mw_err_set(err, -EBADMSG, "shard manifest: shard_id is %zu bytes, want 16",
                        pb->shard_id->uuid.len);
    memcpy(m->shard_id, pb->shard_id->uuid.data, 16);
    m->has_shard_id = true;
  }
  if (pb->n_sstables > MW_SHARD_MAX_SSTABLES)
    return mw_err_set(err, -EBADMSG, "shard manifest: %zu sstables, limit %d", pb->n_sstables,
                      MW_SHARD_MAX_SSTABLES);
  if (pb->n_shard_field_entries > MW_SHARD_MAX_FIELD_ENTRIES)
    return mw_err_set(err, -EBADMSG, "shard manifest: %zu shard_field_entries, limit %d",
                      pb->n_shard_field_entries, MW_SHARD_MAX_FIELD_ENTRIES);
  if (pb->n_sstables) {
    m->sstables = calloc(pb->n_sstables, sizeof *m->sstables);
    if (m->sstables == NULL) return -ENOMEM;
  }
  for (size_t i = 0; i < pb->n_sstables; i++) {
    const Lance__Table__SsTable *t = pb->sstables[i];
    const char *path = t->path ? t->path : "";
    size_t plen = strnlen(path, MW_SHARD_MAX_PATH_BYTES + 1);
    if (check_path(path, plen) < 0)
      return mw_err_set(err, -EBADMSG,
                        "shard manifest: sstables[%zu].path is empty, too long (limit %d), "
                        "or not a plain directory name",
                        i, MW_SHARD_MAX_PATH_BYTES);
    mw_sstable_ref_t *r = &m->sstables[m->n_sstables];
    r->path = dup_bytes(path, plen);
    if (r->path == NULL) return -ENOMEM;
    m->n_sstables++;
    r->generation = t->generation;
    r->in_memory_bytes = t->in_memory_bytes;
    r->physical_rows = t->physical_rows;
    r->primary_key_bytes = t->primary_key_bytes;
  }
  for (size_t i = 0; i < pb->n_shard_field_entries; i++) {
    const Lance__Table__ShardFieldEntry *e = pb->shard_field_entries[i];
    const char *id = e->field_id ? e->field_id : "";
    if (strnlen(id, MW_SHARD_MAX_FIELD_ID_BYTES + 1) > MW_SHARD_MAX_FIELD_ID_BYTES ||
        e->value.len > MW_SHARD_MAX_FIELD_VALUE_BYTES)
      return mw_err_set(err, -EBADMSG, "shard manifest: shard_field_entries[%zu] too long", i);
    int rc = add_field_entry(m, id, e->value.data, e->value.len);
    if (rc < 0) return rc;
  }
  return 0;
}

/* Lance's strings are UTF-8 without NULs; protobuf-c would silently cut a
 * string at an embedded NUL, which would break the round trip. Refuse it. */
static int check_nul_strings(const uint8_t *p, size_t n, mw_err_t *err) {
  size_t pos = 0;
  mw_pb_field_t f;
  int rc;
  while ((rc = mw_pb_next(p, n, &pos, &f, 0, err)) > 0) {
    if ((f.tag != 8 && f.tag != 14) || f.wire != 2) continue;
    uint32_t str_tag = f.tag == 8 ? 2 : 1; /* SsTable.path, ShardFieldEntry.field_id */
    size_t q = 0;
    mw_pb_field_t g;
    while ((rc = mw_pb_next(f.data, f.len, &q, &g, (size_t)(f.data - p), err)) > 0)
      if (g.tag == str_tag && g.wire == 2 && memchr(g.data, '\0', g.len))
        return mw_err_set(err, -EBADMSG, "shard manifest: NUL inside a string at byte %zu",
                          (size_t)(g.data - p));
    if (rc < 0) return rc;
  }
  return rc;
}

static int check_counts(const uint8_t *p, size_t n, mw_err_t *err) {
  size_t pos = 0, tables = 0, entries = 0;
  mw_pb_field_t f;
  while (mw_pb_next(p, n, &pos, &f, 0, NULL) > 0) {
    tables += f.tag == 8;
    entries += f.tag == 14;
  }
  if (tables > MW_SHARD_MAX_SSTABLES)
    return mw_err_set(err, -EBADMSG, "shard manifest: %zu sstables, limit %d", tables,
                      MW_SHARD_MAX_SSTABLES);
  if (entries > MW_SHARD_MAX_FIELD_ENTRIES)
    return mw_err_set(err, -EBADMSG, "shard manifest: %zu shard_field_entries, limit %d",
                      entries, MW_SHARD_MAX_FIELD_ENTRIES);
  return 0;
}

int mw_shard_manifest_decode(const uint8_t *p, size_t n, mw_shard_manifest_t *m, mw_err_t *err) {
  assert(m);
  assert(p || n == 0);
  mw_shard_manifest_init(m);
  if (n > MW_SHARD_MANIFEST_MAX_BYTES)
    return mw_err_set(err, -EBADMSG, "shard manifest: %zu bytes, limit %zu", n,
                      MW_SHARD_MANIFEST_MAX_BYTES);
  int rc = mw_pb_check(p, n, 0, "shard manifest", err);
  if (rc < 0) return rc;
  rc = check_counts(p, n, err); /* before protobuf-c allocates one struct per entry */
  if (rc < 0) return rc;
  rc = check_nul_strings(p, n, err);
  if (rc < 0) return rc;
  Lance__Table__ShardManifest *pb = lance__table__shard_manifest__unpack(NULL, n, p);
  if (pb == NULL)
    return mw_err_set(err, -EBADMSG,
                      "shard manifest: protobuf-c rejected the message (a nested field or a "
                      "field's wire type is malformed)");
  rc = copy_in(pb, m, err);
  lance__table__shard_manifest__free_unpacked(pb, NULL);
  if (rc < 0) mw_shard_manifest_free(m);
  return rc;
}

/* -------------------------------------------------------------------- names */

int mw_bitrev_name(uint64_t n, const char *ext, char *out, size_t out_len) {
  assert(out);
  size_t elen = ext ? strlen(ext) : 0;
  if (out_len < MW_BITREV_DIGITS + elen + 1) return -ENOSPC;
  for (int i = 0; i < MW_BITREV_DIGITS; i++) out[i] = (char)('0' + ((n >> i) & 1));
  if (elen) memcpy(out + MW_BITREV_DIGITS, ext, elen);
  out[MW_BITREV_DIGITS + elen] = '\0';
  return (int)(MW_BITREV_DIGITS + elen);
}

int mw_bitrev_parse(const char *name, uint64_t *out) {
  assert(name);
  assert(out);
  const char *dot = strchr(name, '.');
  size_t len = dot ? (size_t)(dot - name) : strlen(name);
  if (len != MW_BITREV_DIGITS) return -EINVAL;
  uint64_t v = 0;
  for (int i = 0; i < MW_BITREV_DIGITS; i++) {
    if (name[i] != '0' && name[i] != '1') return -EINVAL;
    v |= (uint64_t)(name[i] - '0') << i;
  }
  *out = v;
  return 0;
}

int mw_shard_manifest_name(uint64_t version, char *out, size_t out_len) {
  return mw_bitrev_name(version, MW_SHARD_MANIFEST_EXT, out, out_len);
}

int mw_shard_manifest_name_parse(const char *name, uint64_t *version) {
  size_t len = strlen(name), elen = strlen(MW_SHARD_MANIFEST_EXT);
  if (len < elen || strcmp(name + len - elen, MW_SHARD_MANIFEST_EXT) != 0) return -EINVAL;
  return mw_bitrev_parse(name, version);
}

int mw_wal_entry_name(uint64_t position, char *out, size_t out_len) {
  return mw_bitrev_name(position, MW_WAL_ENTRY_EXT, out, out_len);
}

/* -------------------------------------------------------------------- hint */

int mw_version_hint_encode(uint64_t version, char *out, size_t out_len) {
  assert(out);
  int k = snprintf(out, out_len, "{\"version\":%llu}", (unsigned long long)version);
  if (k < 0 || (size_t)k >= out_len) return -ENOSPC;
  return k;
}

static void skip_ws(const uint8_t *p, size_t n, size_t *i) {
  assert(i != NULL);
  while (*i < n && (p[*i] == ' ' || p[*i] == '\t' || p[*i] == '\n' || p[*i] == '\r')) (*i)++;
}

static bool expect(const uint8_t *p, size_t n, size_t *i, const char *lit) {
  assert(i != NULL);
  size_t k = strlen(lit);
  if (n - *i < k || memcmp(p + *i, lit, k) != 0) return false;
  *i += k;
  return true;
}

int mw_version_hint_parse(const uint8_t *p, size_t n, uint64_t *version, mw_err_t *err) {
  assert(version);
  assert(p || n == 0);
  if (n > MW_VERSION_HINT_MAX_BYTES)
    return mw_err_set(err, -EBADMSG, "version hint: %zu bytes, limit %d", n,
                      MW_VERSION_HINT_MAX_BYTES);
  size_t i = 0;
  skip_ws(p, n, &i);
  if (!expect(p, n, &i, "{")) goto bad;
  skip_ws(p, n, &i);
  if (!expect(p, n, &i, "\"version\"")) goto bad;
  skip_ws(p, n, &i);
  if (!expect(p, n, &i, ":")) goto bad;
  skip_ws(p, n, &i);
  if (i >= n || p[i] < '0' || p[i] > '9') goto bad;
  if (p[i] == '0' && i + 1 < n && p[i + 1] >= '0' && p[i + 1] <= '9') goto bad; /* JSON: no 01 */
  uint64_t v = 0;
  for (; i < n && p[i] >= '0' && p[i] <= '9'; i++) {
    unsigned d = (unsigned)(p[i] - '0');
    if (v > (UINT64_MAX - d) / 10)
      return mw_err_set(err, -EBADMSG, "version hint: number overflows u64 at byte %zu", i);
    v = v * 10 + d;
  }
  skip_ws(p, n, &i);
  if (!expect(p, n, &i, "}")) goto bad;
  skip_ws(p, n, &i);
  if (i != n) goto bad;
  *version = v;
  return 0;
bad:
  return mw_err_set(err, -EBADMSG, "version hint: expected {\"version\":N}, unexpected byte at %zu",
                    i);
}

/* ------------------------------------------------------------ latest search */

enum { LS_HINT = 1, LS_ONE, LS_SCAN, LS_DONE };

static void set_step(mw_latest_search_t *s, int state, uint64_t base, uint32_t count) {
  assert(s != NULL);
  s->state = state;
  s->base = base;
  s->count = count;
  s->fed_mask = 0;
  s->found = false;
  s->found_max = 0;
  if (count == 0) s->state = LS_DONE;
}

static void start_scan(mw_latest_search_t *s) {
  assert(s != NULL);
  uint64_t room = UINT64_MAX - s->latest;
  uint32_t count = room < s->batch ? (uint32_t)room : s->batch;
  set_step(s, LS_SCAN, s->latest, count);
}

void mw_latest_search_start(mw_latest_search_t *s, uint64_t hint, uint32_t batch) {
  assert(s);
  memset(s, 0, sizeof *s);
  s->hint = hint ? hint : 1;
  s->batch = batch == 0 ? MW_LATEST_DEFAULT_BATCH : batch;
  if (s->batch > MW_LATEST_MAX_BATCH) s->batch = MW_LATEST_MAX_BATCH;
  set_step(s, LS_HINT, s->hint - 1, 1);
}

size_t mw_latest_search_next(const mw_latest_search_t *s, uint64_t *versions, size_t max) {
  assert(s);
  assert(versions || max == 0);
  if (s->state == LS_DONE) return 0;
  size_t k = 0;
  for (uint32_t i = 0; i < s->count && k < max; i++)
    if (!(s->fed_mask >> i & 1)) versions[k++] = s->base + 1 + i;
  return k;
}

int mw_latest_search_feed(mw_latest_search_t *s, uint64_t version, bool exists) {
  assert(s);
  if (s->state == LS_DONE || version <= s->base || version - s->base > s->count) return -EINVAL;
  uint32_t i = (uint32_t)(version - s->base - 1);
  if (s->fed_mask >> i & 1) return -EINVAL;
  s->fed_mask |= (uint64_t)1 << i;
  if (exists && (!s->found || version > s->found_max)) {
    s->found = true;
    s->found_max = version;
  }
  uint64_t all = s->count == 64 ? UINT64_MAX : (((uint64_t)1 << s->count) - 1);
  if (s->fed_mask != all) return 0;
  switch (s->state) {
    case LS_HINT:
      s->hint_missed = !s->found;
      if (s->found) {
        s->latest = s->hint;
        start_scan(s);
      } else if (s->hint > 1) {
        set_step(s, LS_ONE, 0, 1);
      } else {
        s->latest = 0;
        start_scan(s);
      }
      break;
    case LS_ONE:
      s->latest = s->found ? 1 : 0;
      start_scan(s);
      break;
    case LS_SCAN:
      if (s->found) {
        s->latest = s->found_max;
        start_scan(s);
      } else {
        s->state = LS_DONE;
      }
      break;
    default:
      assert(0);
  }
  return 0;
}

bool mw_latest_search_done(const mw_latest_search_t *s) { return s->state == LS_DONE; }

bool mw_latest_search_hint_missed(const mw_latest_search_t *s) {
  assert(s != NULL);
  return s->hint_missed;
}

uint64_t mw_latest_search_result(const mw_latest_search_t *s) {
  assert(s->state == LS_DONE);
  return s->latest;
}
