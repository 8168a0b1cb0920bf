/*
 * engine_table.c — server submissions as mw_table_write calls. One heap
 * wrapper per submission carries the server's completion through the
 * table's callback; see engine_table.h.
 */
#include "net/engine_table.h"

#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct fe_write {
  mw_table_write_t w;
  mw_fe_write_cb done;
  void *arg;
} fe_write_t;

int mw_fe_tables_add(mw_fe_tables_t *ts, const char *name, mw_table_t *t) {
  assert(ts);
  assert(name);
  assert(t);
  if (ts->n >= MW_FE_MAX_TABLES) return -ENOSPC;
  if (strlen(name) >= MW_FE_NAME_BYTES) return -ENAMETOOLONG;
  for (size_t i = 0; i < ts->n; i++)
    if (!ts->dropped[i] && strcmp(ts->names[i], name) == 0) return -EEXIST;
  mw_schema_t *copy = malloc(sizeof *copy);
  if (copy == NULL) return -ENOMEM;
  mw_schema_init(copy);
  if (mw_schema_copy(copy, mw_table_schema(t)) < 0) {
    mw_schema_free(copy);
    free(copy);
    return -ENOMEM;
  }
  size_t i = ts->n++;
  snprintf(ts->name_buf[i], sizeof ts->name_buf[i], "%s", name);
  ts->names[i] = ts->name_buf[i];
  ts->tables[i] = t;
  ts->schemas[i] = copy;
  ts->dropped[i] = false;
  return (int)i;
}

void mw_fe_tables_remove(mw_fe_tables_t *ts, size_t i) {
  assert(ts != NULL);
  assert(i < ts->n);
  ts->dropped[i] = true;
  ts->tables[i] = NULL;
}

void mw_fe_tables_free(mw_fe_tables_t *ts) {
  assert(ts != NULL);
  for (size_t i = 0; i < ts->n; i++) {
    if (ts->schemas[i] != NULL) mw_schema_free(ts->schemas[i]);
    free(ts->schemas[i]);
    ts->schemas[i] = NULL;
  }
}

void mw_fe_tables_drop(mw_fe_tables_t *ts, const mw_table_t *t) {
  assert(ts);
  assert(t);
  for (size_t i = 0; i < ts->n; i++)
    if (ts->tables[i] == t) ts->dropped[i] = true;
}

void mw_fe_tables_drop_at(mw_fe_tables_t *ts, size_t i) {
  assert(ts != NULL);
  assert(i < ts->n);
  ts->dropped[i] = true;
}

size_t mw_fe_tables_count(const mw_fe_tables_t *ts) {
  assert(ts != NULL);
  assert(ts->n <= MW_FE_MAX_TABLES);
  return ts->n;
}

const char *mw_fe_tables_name(const mw_fe_tables_t *ts, size_t i) {
  assert(ts != NULL);
  assert(i < ts->n);
  return ts->names[i];
}

mw_table_t *mw_fe_tables_table(const mw_fe_tables_t *ts, size_t i) {
  assert(ts != NULL);
  assert(i < ts->n);
  return ts->tables[i];
}

mw_table_t *mw_fe_tables_live(const mw_fe_tables_t *ts, size_t i) {
  assert(ts != NULL);
  assert(i < ts->n);
  return ts->dropped[i] ? NULL : ts->tables[i];
}

int mw_fe_tables_index(const mw_fe_tables_t *ts, const char *name) {
  assert(ts != NULL);
  assert(name != NULL);
  for (size_t i = 0; i < ts->n; i++)
    if (!ts->dropped[i] && ts->tables[i] != NULL && strcmp(ts->names[i], name) == 0) return (int)i;
  return -ENOENT;
}

mw_table_t *mw_fe_tables_find(const mw_fe_tables_t *ts, const char *name) {
  int i = mw_fe_tables_index(ts, name);
  return i < 0 ? NULL : ts->tables[i];
}

/* The server's handle of entry i: i + 1, as a pointer (never NULL). */
static void *handle_of(size_t i) { return (void *)(uintptr_t)(i + 1); }

static size_t index_of(const mw_fe_tables_t *ts, const void *handle) {
  size_t i = (size_t)(uintptr_t)handle - 1;
  assert(handle != NULL);
  assert(i < ts->n);
  return i;
}

/* The live table behind a server handle, or NULL when it is gone. */
static mw_table_t *live(const mw_fe_tables_t *ts, const void *handle) {
  size_t i = index_of(ts, handle);
  return ts->dropped[i] ? NULL : ts->tables[i];
}

static void *find(void *data, const char *name, size_t len, const mw_schema_t **schema) {
  mw_fe_tables_t *ts = data;
  for (size_t i = 0; i < ts->n; i++)
    if (!ts->dropped[i] && strlen(ts->names[i]) == len && memcmp(ts->names[i], name, len) == 0) {
      *schema = ts->schemas[i];
      return handle_of(i);
    }
  return NULL;
}

static void on_written(mw_table_write_t *w, int status, const char *reason) {
  fe_write_t *f = w->data;
  assert(f);
  assert(&f->w == w);
  mw_fe_write_cb done = f->done;
  void *arg = f->arg;
  /* reason may point into f->w (its reason[]): free after */
  done(arg, status, status < 0 ? (uint32_t)w->rows_written : 0, reason);
  free(f);
}

static int submit(void *data, void *table, mw_batch_t *batch, mw_fe_write_cb done, void *arg,
                  mw_err_t *err) {
  assert(table);
  assert(batch);
  assert(done);
  mw_table_t *t = live(data, table);
  if (t == NULL)
    return mw_err_set(err, -ENOENT, "the table was dropped (drop-table) or removed from the "
                                    "configuration after this connection selected it");
  fe_write_t *f = calloc(1, sizeof *f);
  if (!f) return mw_err_set(err, -ENOMEM, "out of memory");
  f->w.data = f;
  f->done = done;
  f->arg = arg;
  int rc = mw_table_write(t, &f->w, batch, on_written, err);
  if (rc < 0) free(f);
  return rc;
}

/* SYNC: every live table the daemon serves (a connection may have switched
 * tables; a table with nothing pending costs nothing). */
static int sync_all(void *data, mw_fe_done_cb done, void *arg, mw_err_t *err) {
  mw_fe_tables_t *ts = data;
  assert(ts);
  assert(done);
  mw_table_t *live[MW_FE_MAX_TABLES];
  size_t n = 0;
  for (size_t i = 0; i < ts->n; i++)
    if (!ts->dropped[i]) live[n++] = ts->tables[i];
  return mw_tables_sync(live, n, done, arg, err);
}

/* Identity-sharded tables route by a column that may not be the key: a
 * delete must carry it, or it cannot be routed to its shard. */
static const char *delete_keep(void *data, void *table) {
  const mw_table_t *t = live(data, table);
  if (t == NULL || mw_table_sharding(t) != MW_SHARDING_IDENTITY) return NULL;
  const mw_field_t *f = mw_table_route_field(t);
  return f != NULL ? f->name : NULL;
}

void mw_fe_tables_engine(mw_fe_tables_t *ts, mw_fe_engine_t *out) {
  assert(ts);
  assert(out);
  memset(out, 0, sizeof *out);
  out->data = ts;
  out->table_find = find;
  out->submit = submit;
  out->sync = sync_all;
  out->delete_keep = delete_keep;
}
