/*
 * check.c — see check.h.
 *
 * Schema messages: lance/schema_text.h reports a position in the (joined)
 * value, "schema: column 35: expected ...". An operator thinks in columns
 * of the table, so the position is turned into the name of the column
 * whose text holds it: the value is split at its top-level commas (commas
 * inside <...>, (...), {...} belong to a nested type), and the entry that
 * spans the position gives the name before its ':'.
 */
#include "daemon/check.h"
#include "daemon/security.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "lance/schema_text.h"
#include "daemon/tables.h"
#include "net/server.h"
#include "shard/table.h"

#define NAME_BYTES 128

/* The name of the column whose text spans byte `pos` (0-based) of schema
 * text `text`; "" when none does. */
static void column_at(const char *text, size_t pos, char *out, size_t n) {
  assert(text != NULL);
  assert(out != NULL);
  assert(n > 0);
  out[0] = '\0';
  size_t len = strlen(text), start = 0;
  int depth = 0;
  for (size_t i = 0; i <= len; i++) {
    char ch = text[i];
    if (ch == '<' || ch == '(' || ch == '{' || ch == '[') depth++;
    if ((ch == '>' || ch == ')' || ch == '}' || ch == ']') && depth > 0) depth--;
    if (ch != '\0' && (ch != ',' || depth > 0)) continue;
    if (pos >= start && pos <= i) { /* this entry: "  name : type ..." */
      size_t a = start;
      while (a < i && isspace((unsigned char)text[a])) a++;
      size_t b = a;
      while (b < i && text[b] != ':' && !isspace((unsigned char)text[b])) b++;
      snprintf(out, n, "%.*s", (int)(b - a), text + a);
      return;
    }
    start = i + 1;
  }
}

/* "schema: column 35: reason" -> "column "v": reason". Other messages are
 * kept as they are. */
static void name_the_column(const char *text, const char *msg, char *out, size_t n) {
  const char *p = strstr(msg, "column ");
  char *end = NULL;
  unsigned long col = p ? strtoul(p + 7, &end, 10) : 0;
  char name[NAME_BYTES];
  if (p == NULL || end == p + 7 || *end != ':' || col == 0) {
    snprintf(out, n, "%s", strncmp(msg, "schema: ", 8) == 0 ? msg + 8 : msg);
    return;
  }
  column_at(text, (size_t)col - 1, name, sizeof name);
  if (name[0]) snprintf(out, n, "column \"%s\":%s", name, end + 1);
  else snprintf(out, n, "character %lu:%s", col, end + 1);
}

/* One table's text keys, parsed as table creation and opening parse them. */
static int check_table_text(const mw_config_t *cfg, const mw_table_config_t *tc, mw_err_t *err) {
  char where[1400], why[MW_ERR_MSG_BYTES];
  mw_err_t e = {0};
  mw_schema_t schema;
  mw_schema_init(&schema);
  mw_shard_spec_t spec;
  mw_shard_list_t list;
  memset(&list, 0, sizeof list);
  int rc = 0;
  if (tc->schema[0] == '\0') goto done; /* the table's own schema is checked at open */
  if ((rc = mw_schema_text_parse(tc->schema, &schema, &e)) < 0) {
    mw_config_key_where(cfg, tc, "schema", where, sizeof where);
    name_the_column(tc->schema, e.msg, why, sizeof why);
    mw_err_set(err, rc, "%s: %s", where, why);
    goto done;
  }
  if (tc->primary_key[0] && (rc = mw_schema_pk_text_apply(&schema, tc->primary_key, &e)) < 0) {
    mw_config_key_where(cfg, tc, "primary_key", where, sizeof where);
    mw_err_set(err, rc, "%s: %s", where, e.msg);
    goto done;
  }
  if (!tc->create) goto done; /* spec and shards: checked against the table's own at open */
  if ((rc = mw_shard_spec_text_parse(tc->spec, &schema, &spec, &e)) < 0) {
    mw_config_key_where(cfg, tc, "spec", where, sizeof where);
    mw_err_set(err, rc, "%s: %s", where, e.msg);
    goto done;
  }
  if ((rc = mw_shard_list_text_parse(tc->shards, &schema, &spec, &list, &e)) < 0) {
    mw_config_key_where(cfg, tc, "shards", where, sizeof where);
    mw_err_set(err, rc, "%s: %s", where, e.msg);
    goto done;
  }
done:
  mw_shard_list_free(&list);
  mw_schema_free(&schema);
  return rc;
}

static int check_address(const char *key, const char *addr, mw_err_t *err) {
  struct sockaddr_storage sa;
  mw_err_t e = {0};
  int rc = mw_server_addr_parse(addr, &sa, &e);
  if (rc < 0) return mw_err_set(err, rc, "[daemon] %s: %s", key, e.msg);
  return 0;
}

int mw_daemon_check_config(const mw_config_t *cfg, mw_err_t *err) {
  assert(cfg != NULL);
  int rc = 0;
  for (size_t i = 0; i < cfg->n_listen && rc == 0; i++) rc = check_address("listen", cfg->listen[i], err);
  if (rc == 0 && cfg->metrics_listen[0]) rc = check_address("metrics_listen", cfg->metrics_listen, err);
  for (size_t i = 0; i < cfg->n_tables && rc == 0; i++) rc = check_table_text(cfg, &cfg->tables[i], err);
  if (rc == 0) rc = mw_daemon_security_check(cfg, err); /* the files load, the credentials parse */
  return rc;
}

/* ------------------------------------------------------------ table vs config */

static const mw_field_t *field_named(const mw_schema_t *s, const char *name) {
  for (size_t i = 0; i < s->n_fields; i++)
    if (strcmp(s->fields[i].name, name) == 0) return &s->fields[i];
  return NULL;
}

static void type_text(const mw_field_t *f, char *out, size_t n) { mw_field_type_text(f, out, n); }

/* The first difference between the configured schema `want` and the
 * table's `have` (without `_tombstone`), as text; "" when they agree. */
static void first_difference(const mw_schema_t *want, const mw_schema_t *have, char *out, size_t n) {
  char a[160], b[160];
  out[0] = '\0';
  for (size_t i = 0; i < want->n_fields; i++) {
    const mw_field_t *w = &want->fields[i], *h = field_named(have, w->name);
    type_text(w, a, sizeof a);
    if (h == NULL) {
      snprintf(out, n, "column \"%s\" (%s) is not in the table", w->name, a);
      return;
    }
    type_text(h, b, sizeof b);
    if (!mw_field_type_equal(w, h)) {
      snprintf(out, n, "column \"%s\" is %s in the table, %s here", w->name, b, a);
      return;
    }
    if (w->nullable != h->nullable) {
      snprintf(out, n, "column \"%s\" is %s in the table, %s here", w->name,
               h->nullable ? "nullable" : "not null", w->nullable ? "nullable" : "not null");
      return;
    }
    if (w->pk_position != h->pk_position) {
      snprintf(out, n, "column \"%s\" is %sthe primary key in the table, %sthe primary key here",
               w->name, h->pk_position ? "" : "not ", w->pk_position ? "" : "not ");
      return;
    }
  }
  for (size_t i = 0; i < have->n_fields; i++) {
    const mw_field_t *h = &have->fields[i];
    if (strcmp(h->name, "_tombstone") == 0 || field_named(want, h->name) != NULL) continue;
    type_text(h, b, sizeof b);
    snprintf(out, n, "the table's column \"%s\" (%s) is not in the configured schema", h->name, b);
    return;
  }
}

int mw_daemon_check_table_schema(const mw_config_t *cfg, const mw_table_config_t *tc,
                                 const mw_schema_t *table, mw_err_t *err) {
  assert(cfg != NULL);
  assert(tc != NULL);
  assert(table != NULL);
  if (tc->schema[0] == '\0') return 0; /* nothing configured: the table's schema is the truth */
  mw_schema_t want;
  mw_err_t e = {0};
  char where[1400], diff[400];
  int rc = mw_schema_text_parse(tc->schema, &want, &e);
  if (rc == 0 && tc->primary_key[0]) rc = mw_schema_pk_text_apply(&want, tc->primary_key, &e);
  if (rc < 0) {
    mw_schema_free(&want);
    return mw_daemon_check_config(cfg, err) < 0 ? -EINVAL : mw_err_set(err, rc, "%s", e.msg);
  }
  if (!tc->primary_key[0]) /* no key configured: take the table's, compare the rest */
    for (size_t i = 0; i < want.n_fields; i++) {
      const mw_field_t *h = field_named(table, want.fields[i].name);
      if (h != NULL) want.fields[i].pk_position = h->pk_position;
    }
  first_difference(&want, table, diff, sizeof diff);
  mw_schema_free(&want);
  if (diff[0] == '\0') return 0;
  mw_config_key_where(cfg, tc, "schema", where, sizeof where);
  return mw_err_set(err, -EINVAL,
                    "%s: differs from the table at %s: %s (memwald never changes a table's schema: "
                    "make `schema` match the table, or remove it to use the table's)",
                    where, tc->uri, diff);
}

/* ------------------------------------------------------------ existing tables */

/* `shards` against the table's own spec, as start-up derives shard ids
 * (on the table --check opened for this, which it closes after). */
static int check_shards(const mw_config_t *cfg, const mw_table_config_t *tc, mw_table_t *t,
                        mw_err_t *err) {
  mw_err_t e = {0};
  int rc = mw_table_own_list(t, tc->shards, &e);
  if (rc == 0) return 0;
  char where[1400];
  mw_config_key_where(cfg, tc, "shards", where, sizeof where);
  return mw_err_set(err, rc, "%s: %s (the table at %s)", where, e.msg, tc->uri);
}

static void table_closed(mw_table_t *t) { (void)t; }

int mw_daemon_check_tables(const mw_config_t *cfg, mw_err_t *err) {
  assert(cfg != NULL);
  uv_loop_t loop;
  int rc = uv_loop_init(&loop);
  if (rc < 0) return mw_err_set(err, rc, "--check: %s", uv_strerror(rc));
  for (size_t i = 0; i < cfg->n_tables && rc == 0; i++) {
    const mw_table_config_t *tc = &cfg->tables[i];
    mw_storage_config_t sc;
    mw_daemon_storage_config(cfg, tc, tc->uri, &sc);
    mw_table_opts_t o = {.storage = &sc};
    mw_err_t e = {0};
    int orc = mw_table_drop_interrupted(tc->uri, &o, &e);
    if (orc == 1) continue; /* start-up finishes that drop */
    if (orc == 0) orc = mw_table_exists(tc->uri, &o, &e);
    if (orc < 0) {
      rc = mw_err_set(err, orc, "[table %s] cannot look at %s: %s", tc->name, tc->uri, e.msg);
      break;
    }
    if (orc == 0) { /* no table yet: created at start, or refused there */
      if (!tc->create)
        rc = mw_err_set(err, -ENOENT, "[table %s] no Lance table at %s (set create = true to "
                        "create it)", tc->name, tc->uri);
      continue;
    }
    mw_table_t *t = NULL;
    if ((orc = mw_table_open(&loop, tc->uri, &o, &t, &e)) < 0) {
      rc = mw_err_set(err, orc, "[table %s] %s", tc->name, e.msg);
      break;
    }
    rc = mw_daemon_check_table_schema(cfg, tc, mw_table_schema(t), err);
    if (rc == 0) rc = check_shards(cfg, tc, t, err);
    if (mw_table_close(t, table_closed) == 0) uv_run(&loop, UV_RUN_DEFAULT);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  if (uv_loop_close(&loop) != 0 && rc == 0) rc = mw_err_set(err, -EBUSY, "--check: tables did not close");
  return rc;
}
