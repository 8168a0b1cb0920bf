/*
 * engine_table.c — server submissions as mw_table_write calls. One heap
 * wrapper per submission carries the server's completion through the
 * table's callback; see engine_table.h.
 */
#include "net/engine_table.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct fe_write {
  mw_table_write_t w;
  mw_fe_done_cb done;
  void *arg;
} fe_write_t;

int mw_fe_tables_add(mw_fe_tables_t *ts, const char *name, mw_table_t *t) {
  assert(ts && name && t);
  if (ts->n >= MW_FE_MAX_TABLES) return -ENOSPC;
  for (size_t i = 0; i < ts->n; i++)
    if (strcmp(ts->names[i], name) == 0) return -EEXIST;
  ts->names[ts->n] = name;
  ts->tables[ts->n++] = t;
  return 0;
}

static void *find(void *data, const char *name, size_t len, const mw_schema_t **schema) {
  mw_fe_tables_t *ts = data;
  for (size_t i = 0; i < ts->n; i++)
    if (strlen(ts->names[i]) == len && memcmp(ts->names[i], name, len) == 0) {
      *schema = &ts->tables[i]->schema;
      return ts->tables[i];
    }
  return NULL;
}

static void on_written(mw_table_write_t *w, int status, const char *reason) {
  fe_write_t *f = w->data;
  assert(f && &f->w == w);
  mw_fe_done_cb done = f->done;
  void *arg = f->arg;
  free(f);
  done(arg, status, reason);
}

static int submit(void *data, void *table, mw_batch_t *batch, mw_fe_done_cb done, void *arg,
                  mw_err_t *err) {
  (void)data;
  assert(table && batch && done);
  fe_write_t *f = calloc(1, sizeof *f);
  if (!f) return mw_err_set(err, -ENOMEM, "out of memory");
  f->w.data = f;
  f->done = done;
  f->arg = arg;
  int rc = mw_table_write(table, &f->w, batch, on_written, err);
  if (rc < 0) free(f);
  return rc;
}

/* Identity-sharded tables route by a column that may not be the key: a
 * delete must carry it, or it cannot be routed to its shard. */
static const char *delete_keep(void *data, void *table) {
  (void)data;
  const mw_table_t *t = table;
  if (t->kind != MW_SHARDING_IDENTITY || t->route_field < 0) return NULL;
  return t->schema.fields[t->route_field].name;
}

void mw_fe_tables_engine(mw_fe_tables_t *ts, mw_fe_engine_t *out) {
  assert(ts && out);
  memset(out, 0, sizeof *out);
  out->data = ts;
  out->table_find = find;
  out->submit = submit;
  out->sync = NULL;
  out->delete_keep = delete_keep;
}
