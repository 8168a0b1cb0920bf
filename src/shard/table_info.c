/*
 * table_info.c — what the rest of the daemon reads of a table (table.h),
 * so that mw_table_t's fields stay private to shard/ (table_int.h): the
 * table's path, storage, schema, configuration and sharding; its shard
 * records one at a time (status, the stats log, the release at a stop);
 * shard names read back into ids (the inverse of mw_table_shard_name); and
 * the shards a config `shards` list names, which become the owned set.
 *
 * Status on 1 024 buckets stays O(1) per shard: a record's key is set when
 * the shard is made (bucket-N, unsharded), so mw_table_shard_at copies it
 * and never looks a bucket up.
 */
#include "shard/table_int.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lance/route.h"
#include "lance/schema_text.h"

const char *mw_table_path(const mw_table_t *t) {
  assert(t != NULL);
  return t->path != NULL ? t->path : "";
}

mw_storage_t *mw_table_storage(const mw_table_t *t) {
  assert(t != NULL);
  return t->st;
}

const mw_schema_t *mw_table_schema(const mw_table_t *t) {
  assert(t != NULL);
  return &t->schema;
}

const mw_shard_config_t *mw_table_config(const mw_table_t *t) {
  assert(t != NULL);
  return &t->cfg;
}

mw_sharding_kind_t mw_table_sharding(const mw_table_t *t) {
  assert(t != NULL);
  return t->kind;
}

mw_owners_t *mw_table_owners(mw_table_t *t) {
  assert(t != NULL);
  assert(t->st != NULL); /* started: the records live on the loop */
  return &t->owners;
}

void mw_table_housekeeping(const mw_table_t *t, mw_table_housekeeping_t *out) {
  assert(t != NULL);
  assert(out != NULL);
  out->compact = t->compact;
  out->gc = t->gc;
  out->compact_enabled = t->compact_cfg.enabled;
  out->gc_enabled = t->gc_cfg.enabled;
  out->gc_grace_ms = t->gc_cfg.grace_ms;
  out->gc_history_retention_ms = t->gc_cfg.history_retention_ms;
}

const mw_field_t *mw_table_route_field(const mw_table_t *t) {
  assert(t != NULL);
  if (t->route_field < 0) return NULL;
  assert((size_t)t->route_field < t->schema.n_fields);
  return &t->schema.fields[t->route_field];
}

/* ------------------------------------------------------------ shard records */

size_t mw_table_shard_count(const mw_table_t *t) {
  assert(t != NULL);
  assert(t->n_shards <= t->cap_shards);
  return t->n_shards;
}

void mw_table_shard_at(const mw_table_t *t, size_t i, mw_table_shard_info_t *out) {
  assert(t != NULL);
  assert(out != NULL);
  assert(i < t->n_shards);
  const mw_table_shard_t *ts = t->shards[i];
  memcpy(out->id, ts->id, 16);
  if (ts->key[0] != '\0') snprintf(out->key, sizeof out->key, "%s", ts->key); /* O(1): 1 024 shards */
  else mw_table_shard_name(t, ts->id, out->key, sizeof out->key);
  out->key_truncated = ts->key_truncated;
  out->shard = (mw_shard_t *)&ts->shard; /* the record is the table's; the shard is the caller's to drive */
}

/* ------------------------------------------------------------ names -> ids */

int mw_table_shard_parse(const mw_table_t *t, const char *text, uint8_t id[16], mw_err_t *err) {
  assert(t != NULL);
  assert(text != NULL);
  assert(id != NULL);
  if (mw_shard_uuid_parse(text, id) == 0) return 0;
  if (strcmp(text, "unsharded") == 0 && t->kind == MW_SHARDING_UNSHARDED) {
    mw_shard_uuid_unsharded(id);
    return 0;
  }
  if (t->kind == MW_SHARDING_BUCKET) {
    const char *num = strncmp(text, "bucket-", 7) == 0 ? text + 7 : text;
    char *end;
    unsigned long b = strtoul(num, &end, 10);
    if (*num && !*end && *num != '-' && b < t->num_buckets) {
      mw_shard_uuid_bucket((uint32_t)b, id);
      return 0;
    }
  }
  if (t->kind == MW_SHARDING_IDENTITY && strncmp(text, "identity-", 9) == 0 && t->route_field >= 0) {
    uint8_t raw[MW_ROUTE_MAX_IDENTITY_BYTES];
    int n = mw_route_scalar_parse(t->schema.fields[t->route_field].type, text + 9, raw, sizeof raw);
    if (n >= 0 && mw_shard_uuid_identity_raw(raw, (size_t)n, id) == 0) return 0;
  }
  return mw_err_set(err, -EINVAL,
                    "shard \"%.200s\": expected a shard UUID, unsharded, bucket-<b> or identity-<value> "
                    "matching the table's spec",
                    text);
}

/* One identity value of a `shards` list (as written in the config) as its
 * shard id: the raw scalar bytes at the column's width (route.h), a binary
 * column's value as its bytes. */
static int identity_id(const mw_field_t *f, const char *v, uint8_t id[16]) {
  uint8_t raw[MW_ROUTE_MAX_IDENTITY_BYTES];
  int n = mw_route_scalar_parse(f->type, v, raw, sizeof raw);
  if (n == -ENOTSUP && f->type == MW_T_BINARY) return mw_shard_uuid_identity_raw(v, strlen(v), id);
  if (n < 0) return n;
  return mw_shard_uuid_identity_raw(raw, (size_t)n, id);
}

int mw_table_own_list(mw_table_t *t, const char *list_text, mw_err_t *err) {
  assert(t != NULL);
  assert(list_text != NULL);
  if (strcmp(list_text, "all") == 0) return 0;
  if (t->kind != MW_SHARDING_BUCKET && t->kind != MW_SHARDING_IDENTITY)
    return mw_err_set(err, -EINVAL, "the table is %s: only `shards = all` fits it (a shard list "
                      "needs a table sharded by bucket or identity)",
                      t->kind == MW_SHARDING_UNSHARDED ? "unsharded" : "sharded by hand");
  mw_shard_spec_t spec = {.kind = t->kind == MW_SHARDING_BUCKET ? MW_SHARD_BUCKET : MW_SHARD_IDENTITY,
                          .column = t->route_field, .num_buckets = t->num_buckets};
  mw_shard_list_t list;
  memset(&list, 0, sizeof list);
  int rc = mw_shard_list_text_parse(list_text, &t->schema, &spec, &list, err);
  if (rc < 0) return rc;
  uint8_t(*ids)[16] = calloc(list.n ? list.n : 1, 16);
  if (ids == NULL) rc = mw_err_set(err, -ENOMEM, "out of memory");
  for (size_t i = 0; rc == 0 && i < list.n; i++) {
    if (spec.kind == MW_SHARD_BUCKET) mw_shard_uuid_bucket(list.buckets[i], ids[i]);
    else if ((rc = identity_id(&t->schema.fields[t->route_field], list.values[i], ids[i])) < 0)
      mw_err_set(err, rc, "shard value \"%.100s\": cannot derive its shard id", list.values[i]);
  }
  if (rc == 0) {
    free(t->owned);
    t->owned = ids;
    t->n_owned = list.n;
    t->own_all = false;
  } else {
    free(ids);
  }
  mw_shard_list_free(&list);
  return rc;
}

size_t mw_table_spec_ids(const mw_table_t *t, bool owned, uint8_t (*ids)[16], size_t cap) {
  assert(t != NULL);
  assert(ids != NULL);
  size_t n = 0;
  if (t->kind == MW_SHARDING_UNSHARDED) {
    if (owned && cap > 0) mw_shard_uuid_unsharded(ids[n++]);
  } else if (t->kind == MW_SHARDING_BUCKET) {
    for (uint32_t b = 0; b < t->num_buckets && n < cap; b++) {
      if (t->route_ids != NULL) memcpy(ids[n], t->route_ids[b], 16); /* made at open */
      else mw_shard_uuid_bucket(b, ids[n]);
      if (mw_table_owns(t, ids[n]) == owned) n++;
    }
  } else if (owned) {
    for (size_t i = 0; i < t->n_owned && n < cap; i++) memcpy(ids[n++], t->owned[i], 16);
  }
  assert(n <= cap);
  return n;
}
