/*
 * table_write.c — a table's write path (table.h): the router that splits a
 * batch into one part per shard, the fan-out of the parts to the shards'
 * writes with one completion for the whole batch, and SYNC over tables.
 *
 * Routing is two passes over the rows. The first gives every row its part
 * number: bucket specs look the bucket up in a bucket -> part table (the
 * shard ids were made at open), identity specs hash the shard UUID into an
 * open-addressing map (the previous row's part is reused when its value is
 * the same: a UUID v5 is a SHA-1), unsharded and manual specs have one part.
 * The second groups the row numbers by part (a counting sort, stable) and
 * copies each part's rows as runs of consecutive rows
 * (mw_column_append_range), so the work is O(rows + parts) whatever the
 * number of shards, up to MW_TABLE_MAX_PARTS. A batch whose rows all go to
 * one shard (always, unsharded) is moved, not copied.
 */
#include "shard/table_int.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lance/route.h"

_Static_assert(MW_TABLE_MAX_PARTS <= MW_TABLE_MAX_SHARDS, "a part is a shard");
_Static_assert(MW_ROUTE_MAX_BUCKETS <= MW_TABLE_MAX_PARTS, "every bucket can be a part");

/* The identity value of row 0 of a routed part, as text (route.h's
 * mw_route_scalar_text: what memwalctl accepts back; mw_table_shard_set_key
 * cuts long ones). */
static void note_identity(mw_table_t *t, const uint8_t id[16], const mw_batch_t *part) {
  for (size_t i = 0; i < t->n_shards; i++)
    if (memcmp(t->shards[i]->id, id, 16) == 0 && t->shards[i]->key[0] != '\0') return;
  const mw_field_t *f = &t->schema.fields[t->route_field];
  uint8_t raw[MW_ROUTE_MAX_IDENTITY_BYTES];
  char text[MW_TABLE_SHARD_KEY_VALUE_BYTES + 8];
  int n = mw_route_scalar_bytes(f, &part->cols[t->route_field], 0, raw, sizeof raw, NULL);
  if (n < 0) return;
  if (mw_route_scalar_text(f->type, raw, (size_t)n, text, sizeof text) < 0) return;
  mw_table_shard_set_key(t, id, text);
}

/* ----------------------------------------------------------------- router */

/* Rows of one identity value usually come together: the previous row's
 * UUID (a SHA-1 away) is reused when its value is the same. */
static bool same_as_previous(const mw_field_t *f, const mw_column_t *c, int64_t row) {
  if (row == 0 || !mw_column_valid(c, row) || !mw_column_valid(c, row - 1)) return false;
  if (f->type == MW_T_UTF8 || f->type == MW_T_BINARY) {
    size_t na, nb;
    const uint8_t *a = mw_column_bytes(c, row - 1, &na), *b = mw_column_bytes(c, row, &nb);
    return na == nb && memcmp(a, b, na) == 0;
  }
  if (f->type == MW_T_BOOL) return mw_bit_get(c->values.data, row - 1) == mw_bit_get(c->values.data, row);
  size_t w = mw_type_width(f);
  return w > 0 && memcmp(c->values.data + (size_t)(row - 1) * w, c->values.data + (size_t)row * w, w) == 0;
}

/* The parts found so far: their shard ids, and where to find a shard id's
 * part (bucket specs: by bucket; identity: an open-addressing map whose
 * slots hold part + 1, keyed by the UUID's first 8 bytes, which are SHA-1
 * output). */
typedef struct route_parts {
  uint8_t (*ids)[16];
  size_t n, cap;
  int32_t *by_bucket;      /* num_buckets entries, -1 = no part yet */
  uint32_t *slots;         /* identity: map_cap slots */
  size_t map_cap;
} route_parts_t;

static void parts_free(route_parts_t *p) {
  free(p->ids);
  free(p->by_bucket);
  free(p->slots);
  memset(p, 0, sizeof *p);
}

/* A new part for shard `id`: refused when the daemon does not own it, or
 * past MW_TABLE_MAX_PARTS. Returns the part number or -errno. */
static int64_t part_add(mw_table_t *t, route_parts_t *p, const uint8_t id[16], int64_t row,
                        mw_err_t *err) {
  if (!mw_table_owns(t, id)) {
    char s[MW_UUID_STR_BYTES], owner[MW_OWNER_ADDRESS_BYTES + 64];
    mw_shard_uuid_format(id, s);
    size_t n = mw_owners_describe(&t->owners, id, owner, sizeof owner); /* the owner, if known */
    return mw_err_set(err, -EXDEV, "row %" PRId64 " belongs to shard %s, which this daemon does not own%s%s",
                      row, s, n ? "; " : "", owner);
  }
  if (p->n == MW_TABLE_MAX_PARTS)
    return mw_err_set(err, -E2BIG, "one batch spans more than %d shards", MW_TABLE_MAX_PARTS);
  if (p->n == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 16;
    uint8_t(*ids)[16] = realloc(p->ids, cap * sizeof *ids);
    if (ids == NULL) return -ENOMEM;
    p->ids = ids;
    p->cap = cap;
  }
  memcpy(p->ids[p->n], id, 16);
  assert(p->n < p->cap);
  return (int64_t)p->n++;
}

static uint64_t id_hash(const uint8_t id[16]) {
  uint64_t h;
  memcpy(&h, id, sizeof h);
  return h;
}

/* Identity specs: the part of shard `id`, added when new. */
static int64_t part_of_id(mw_table_t *t, route_parts_t *p, const uint8_t id[16], int64_t row,
                          mw_err_t *err) {
  assert(p->map_cap > 0);
  assert((p->map_cap & (p->map_cap - 1)) == 0);
  size_t mask = p->map_cap - 1, s = id_hash(id) & mask;
  for (; p->slots[s] != 0; s = (s + 1) & mask)
    if (memcmp(p->ids[p->slots[s] - 1], id, 16) == 0) return (int64_t)p->slots[s] - 1;
  int64_t j = part_add(t, p, id, row, err);
  if (j >= 0) p->slots[s] = (uint32_t)j + 1;
  assert(p->n * 2 <= p->map_cap); /* sized for every part there can be */
  return j;
}

/* First pass: which[r] = the part of row r. */
static int assign_parts(mw_table_t *t, const mw_batch_t *b, uint32_t *which, route_parts_t *p,
                        mw_err_t *err) {
  int64_t n = b->n_rows;
  uint8_t id[16];
  int64_t j = 0;
  switch (t->kind) {
    case MW_SHARDING_BUCKET: {
      assert(t->num_buckets >= 1);
      assert(t->num_buckets <= MW_ROUTE_MAX_BUCKETS);
      p->by_bucket = malloc(t->num_buckets * sizeof *p->by_bucket);
      if (p->by_bucket == NULL) return -ENOMEM;
      for (uint32_t i = 0; i < t->num_buckets; i++) p->by_bucket[i] = -1;
      int rc = mw_route_bucket_rows(&t->schema.fields[t->route_field], &b->cols[t->route_field], n,
                                    t->num_buckets, which, err);
      if (rc < 0) return rc;
      for (int64_t r = 0; r < n; r++) {
        uint32_t k = which[r];
        assert(k < t->num_buckets);
        if (p->by_bucket[k] < 0) {
          j = part_add(t, p, t->route_ids[k], r, err);
          if (j < 0) return (int)j;
          p->by_bucket[k] = (int32_t)j;
        }
        which[r] = (uint32_t)p->by_bucket[k];
      }
      return 0;
    }
    case MW_SHARDING_IDENTITY: {
      const mw_field_t *f = &t->schema.fields[t->route_field];
      const mw_column_t *c = &b->cols[t->route_field];
      size_t most = (size_t)n < MW_TABLE_MAX_PARTS ? (size_t)n : MW_TABLE_MAX_PARTS;
      for (p->map_cap = 16; p->map_cap < 2 * most; p->map_cap *= 2) {
      }
      p->slots = calloc(p->map_cap, sizeof *p->slots);
      if (p->slots == NULL) return -ENOMEM;
      for (int64_t r = 0; r < n; r++) {
        if (!same_as_previous(f, c, r)) {
          int rc = mw_shard_uuid_identity(f, c, r, id, err);
          if (rc < 0) return rc;
          j = part_of_id(t, p, id, r, err);
          if (j < 0) return (int)j;
        }
        which[r] = (uint32_t)j;
      }
      return 0;
    }
    case MW_SHARDING_UNSHARDED:
    default: {
      const uint8_t *one = t->kind == MW_SHARDING_UNSHARDED ? t->route_ids[0] : t->owned[0];
      j = part_add(t, p, one, 0, err);
      if (j < 0) return (int)j;
      for (int64_t r = 0; r < n; r++) which[r] = 0;
      return 0;
    }
  }
}

/* Second pass: copy each part's rows, grouped by a stable counting sort,
 * as runs of consecutive rows. */
static int fill_parts(mw_table_t *t, const mw_batch_t *b, const uint32_t *which, size_t k,
                      mw_batch_t *out) {
  int64_t n = b->n_rows;
  size_t *start = calloc(k + 1, sizeof *start);
  uint32_t *order = malloc((size_t)n * sizeof *order);
  int rc = start && order ? 0 : -ENOMEM;
  for (int64_t r = 0; r < n && rc == 0; r++) start[which[r] + 1]++;
  for (size_t j = 0; j < k && rc == 0; j++) start[j + 1] += start[j];
  for (int64_t r = 0; r < n && rc == 0; r++) order[start[which[r]]++] = (uint32_t)r;
  /* start[j] is now the end of part j, so part j is [start[j-1], start[j]) */
  for (size_t j = 0; j < k && rc == 0; j++) {
    size_t i = j ? start[j - 1] : 0, end = start[j];
    assert(end > i); /* every part has a row */
    rc = mw_batch_init(&out[j], &t->schema);
    while (i < end && rc == 0) {
      size_t e = i + 1;
      while (e < end && order[e] == order[e - 1] + 1) e++;
      for (size_t c = 0; c < t->schema.n_fields && rc == 0; c++)
        rc = mw_column_append_range(&out[j].cols[c], &b->cols[c], &t->schema.fields[c], order[i],
                                    (int64_t)(e - i));
      out[j].n_rows += (int64_t)(e - i);
      i = e;
    }
  }
  free(start);
  free(order);
  return rc;
}

int mw_table_route(mw_table_t *t, mw_batch_t *batch, uint8_t (**part_ids)[16],
                   mw_batch_t **parts, size_t *n_parts, mw_err_t *err) {
  assert(t != NULL);
  assert(batch != NULL);
  assert(part_ids);
  assert(parts);
  assert(n_parts);
  int64_t n = batch->n_rows;
  *part_ids = NULL;
  *parts = NULL;
  *n_parts = 0;
  if (batch->schema != &t->schema && !mw_schema_equal(batch->schema, &t->schema))
    return mw_err_set(err, -EINVAL, "table %s: batch does not have the table's columns", t->path);
  if (n <= 0) return mw_err_set(err, -ENODATA, "table %s: empty batch", t->path);
  route_parts_t p = {0};
  mw_batch_t *out = NULL;
  uint32_t *which = malloc((size_t)n * sizeof *which);
  int rc = which ? assign_parts(t, batch, which, &p, err) : -ENOMEM;
  if (rc == 0) {
    assert(p.n >= 1);
    out = calloc(p.n, sizeof *out);
    if (out == NULL) rc = -ENOMEM;
  }
  if (rc == 0 && p.n == 1) { /* every row to one shard (always, unsharded): move, don't copy */
    out[0] = *batch;
    out[0].schema = &t->schema;
    memset(batch, 0, sizeof *batch);
    batch->schema = out[0].schema;
  } else if (rc == 0) {
    rc = fill_parts(t, batch, which, p.n, out);
  }
  free(which);
  if (rc < 0) {
    for (size_t j = 0; out && j < p.n; j++) mw_batch_free(&out[j]);
    free(out);
    parts_free(&p);
    if (rc == -ENOMEM && (err == NULL || err->code == 0)) mw_err_set(err, rc, "table %s: out of memory routing a batch", t->path);
    return rc;
  }
  *part_ids = p.ids;
  *parts = out;
  *n_parts = p.n;
  p.ids = NULL;
  parts_free(&p);
  return 0;
}

/* ------------------------------------------------------------------ write */

/* Each part is one shard write: the first is embedded in the table write
 * (a one-shard batch, always on an unsharded table, allocates nothing
 * here), the others live in one array freed with the last completion. */
static mw_shard_write_t *part_slot(mw_table_write_t *tw, size_t j) {
  assert(j == 0 || tw->more != NULL);
  return j == 0 ? &tw->part0 : &tw->more[j - 1];
}

static size_t part_index(const mw_table_write_t *tw, const mw_shard_write_t *w) {
  size_t j = w == &tw->part0 ? 0 : (size_t)(w - tw->more) + 1;
  assert(j < tw->n_parts);
  return j;
}

/* What became of one shard's part of a write, for the reply; kept only for
 * a batch over several shards (allocated with `more`). */
typedef struct mw_table_part_outcome {
  uint8_t id[16];
  int64_t rows;
  int status;        /* 0 written, < 0 refused, 1 still running */
} part_outcome_t;

/* The reason of a write that failed on some of its shards: the first
 * failure's reason alone when there was one shard, else each shard with
 * its rows: "bucket-3 (4 rows) not written: <reason>; bucket-5 (2 rows)
 * not written: EIO; written: bucket-1 (6 rows)". */
static void outcome_reason(mw_table_write_t *tw) {
  assert(tw->status < 0);
  if (tw->n_parts <= 1 || tw->parts == NULL) return;
  char first[MW_TABLE_REASON_BYTES], out[MW_TABLE_REASON_BYTES];
  snprintf(first, sizeof first, "%s", tw->reason);
  size_t w = 0;
  bool any_failed = false, any_written = false;
  for (int pass = 0; pass < 2; pass++)
    for (size_t j = 0; j < tw->n_parts && w < sizeof out; j++) {
      const part_outcome_t *o = &tw->parts[j];
      if ((pass == 0) != (o->status < 0)) continue;
      char name[MW_TABLE_SHARD_KEY_BYTES];
      mw_table_shard_name(tw->t, o->id, name, sizeof name);
      if (pass == 0) {
        w += (size_t)snprintf(out + w, sizeof out - w, "%s%s (%" PRId64 " rows) not written: %s",
                              any_failed ? "; " : "", name, o->rows,
                              any_failed ? mw_errno_name(o->status) : first);
        any_failed = true;
      } else {
        w += (size_t)snprintf(out + w, sizeof out - w, "%s%s (%" PRId64 " rows)",
                              any_written ? ", " : any_failed ? "; written: " : "written: ", name,
                              o->rows);
        any_written = true;
      }
    }
  snprintf(tw->reason, sizeof tw->reason, "%s", out);
}

/* Part j finished (j == n_parts: the hold mw_table_write keeps while it
 * submits); the last one completes the write. */
static void part_done(mw_table_write_t *tw, size_t j, int status, const char *reason) {
  assert(tw->left > 0);
  assert(j <= tw->n_parts);
  if (j < tw->n_parts && tw->parts != NULL) {
    part_outcome_t *o = &tw->parts[j];
    assert(o->status == 1);
    o->status = status < 0 ? status : 0;
    if (status == 0) tw->rows_written += o->rows;
  }
  if (status < 0 && tw->status == 0) {
    tw->status = status;
    snprintf(tw->reason, sizeof tw->reason, "%s", reason ? reason : mw_strerror(status));
  }
  if (--tw->left > 0) return;
  if (tw->status < 0) outcome_reason(tw);
  free(tw->more);
  tw->more = NULL;
  free(tw->parts);
  tw->parts = NULL;
  tw->cb(tw, tw->status, tw->status ? tw->reason : NULL);
}

static void on_part(mw_shard_write_t *w, int status, const char *reason) {
  mw_table_write_t *tw = w->data;
  assert(tw != NULL);
  assert(tw->left > 0);
  part_done(tw, part_index(tw, w), status, reason);
}

int mw_table_write(mw_table_t *t, mw_table_write_t *tw, mw_batch_t *batch, mw_table_write_cb cb,
                   mw_err_t *err) {
  assert(t != NULL);
  assert(tw != NULL);
  assert(batch != NULL);
  assert(cb != NULL);
  uint8_t(*ids)[16];
  mw_batch_t *parts;
  size_t n;
  if (batch->n_rows == 0) return mw_err_set(err, -ENODATA, "table %s: empty batch", t->path);
  int rc = mw_table_route(t, batch, &ids, &parts, &n, err);
  if (rc < 0) return rc;
  assert(n >= 1);
  assert(n <= MW_TABLE_MAX_PARTS);
  tw->t = t;
  tw->cb = cb;
  tw->status = 0;
  tw->rows_written = 0;
  tw->reason[0] = '\0';
  tw->n_parts = n;
  tw->more = n > 1 ? calloc(n - 1, sizeof *tw->more) : NULL;
  tw->parts = n > 1 ? calloc(n, sizeof *tw->parts) : NULL; /* what each shard's rows became */
  if (n > 1 && (tw->more == NULL || tw->parts == NULL)) {
    for (size_t j = 0; j < n; j++) mw_batch_free(&parts[j]);
    free(parts);
    free(ids);
    free(tw->more);
    free(tw->parts);
    tw->more = NULL;
    tw->parts = NULL;
    return mw_err_set(err, -ENOMEM, "table %s: out of memory", t->path);
  }
  for (size_t j = 0; j < n && tw->parts != NULL; j++) {
    memcpy(tw->parts[j].id, ids[j], 16);
    tw->parts[j].rows = parts[j].n_rows;
    tw->parts[j].status = 1;
  }
  tw->left = n + 1; /* +1 held until every part is submitted */
  size_t submitted = 0;
  for (size_t j = 0; j < n; j++) {
    mw_shard_t *s = mw_table_shard(t, ids[j], true);
    if (s != NULL && t->kind == MW_SHARDING_IDENTITY && t->route_field >= 0)
      note_identity(t, ids[j], &parts[j]);
    mw_shard_write_t *w = part_slot(tw, j);
    w->data = tw;
    rc = s ? mw_shard_write(s, w, &parts[j], on_part) : -ENOMEM;
    if (rc < 0) {
      mw_batch_free(&parts[j]);
      char sid[MW_UUID_STR_BYTES], why[MW_TABLE_REASON_BYTES];
      mw_shard_uuid_format(ids[j], sid);
      snprintf(why, sizeof why, "shard %s: %.400s", sid,
               s && mw_shard_reason(s)[0] ? mw_shard_reason(s) : mw_strerror(rc));
      part_done(tw, j, rc, why); /* never the last: the hold is still on */
    } else {
      submitted++;
    }
  }
  free(parts);
  free(ids);
  if (submitted == 0) {
    free(tw->more);
    tw->more = NULL;
    free(tw->parts);
    tw->parts = NULL;
    return mw_err_set(err, tw->status, "%s", tw->reason);
  }
  mw_batch_free(batch);
  part_done(tw, n, 0, NULL); /* the hold; shard callbacks never run inside mw_shard_write */
  return 0;
}

/* ------------------------------------------------------------------- sync */

typedef struct tsync {
  mw_table_sync_cb cb;
  void *arg;
  size_t left;
  int status;
  char reason[MW_TABLE_REASON_BYTES];
  mw_shard_write_t w[];
} tsync_t;

static void sync_note(tsync_t *ts, int status, const char *sid, const char *reason) {
  if (status == 0 || ts->status != 0) return;
  ts->status = status;
  snprintf(ts->reason, sizeof ts->reason, "shard %s: %.400s", sid, reason ? reason : mw_strerror(status));
}

static void sync_release(tsync_t *ts) {
  assert(ts->left > 0);
  if (--ts->left > 0) return;
  ts->cb(ts->arg, ts->status, ts->status ? ts->reason : NULL);
  free(ts);
}

static void on_shard_synced(mw_shard_write_t *w, int status, const char *reason) {
  tsync_t *ts = w->data;
  assert(ts != NULL);
  assert(ts->left > 0);
  sync_note(ts, status, w->shard->id_str, reason);
  sync_release(ts);
}

int mw_tables_sync(mw_table_t *const *tables, size_t n, mw_table_sync_cb cb, void *arg,
                   mw_err_t *err) {
  assert(tables != NULL || n == 0);
  assert(cb != NULL);
  /* durable_write acknowledges only durable rows, and the protocol sends
   * SYNC's reply after every earlier row's: those tables have nothing to
   * wait for */
  size_t shards = 0;
  for (size_t i = 0; i < n; i++)
    if (!tables[i]->cfg.durable_write) shards += tables[i]->n_shards;
  if (shards == 0) return 1;
  tsync_t *ts = calloc(1, sizeof *ts + shards * sizeof ts->w[0]);
  if (!ts) return mw_err_set(err, -ENOMEM, "out of memory");
  ts->cb = cb;
  ts->arg = arg;
  ts->left = 1; /* held until every shard is asked; callbacks never run inline */
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    mw_table_t *t = tables[i];
    for (size_t j = 0; j < t->n_shards && !t->cfg.durable_write; j++, k++) {
      mw_shard_t *s = &t->shards[j]->shard;
      ts->w[k].data = ts;
      int rc = mw_shard_sync(s, &ts->w[k], on_shard_synced);
      if (rc < 0) sync_note(ts, rc, s->id_str, mw_shard_reason(s)[0] ? mw_shard_reason(s) : NULL);
      else ts->left++;
    }
  }
  assert(k == shards);
  if (ts->left == 1) { /* no shard to wait for: answer now, no callback */
    int rc = ts->status < 0 ? mw_err_set(err, ts->status, "%s", ts->reason) : 1;
    free(ts);
    return rc;
  }
  sync_release(ts);
  return 0;
}

