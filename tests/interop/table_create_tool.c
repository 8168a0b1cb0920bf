/*
 * table_create_tool.c — write a bootstrapped table to disk for the LanceDB
 * proof (bootstrap_lancedb.sh):
 *
 *   table_create_tool DIR/t.lance SCHEMA PK SPEC [KEY=VALUE ...]
 *
 * SCHEMA, PK, SPEC are the config texts (schema_text.h); KEY=VALUE pairs go
 * into writer_config_defaults. Creates DIR/t.lance/{_versions,_transactions}
 * and writes the five files of mw_table_create_encode in order.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lance/schema_text.h"
#include "lance/table_create.h"

static int write_all(const char *path, const mw_buf_t *b) {
  FILE *f = fopen(path, "wbx");
  if (!f) return -errno;
  size_t w = fwrite(b->data, 1, b->len, f);
  int rc = fclose(f);
  return w == b->len && rc == 0 ? 0 : -EIO;
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s TABLE_DIR SCHEMA PK SPEC [KEY=VALUE ...]\n", argv[0]);
    return 2;
  }
  mw_err_t err = {0};
  mw_schema_t s;
  mw_shard_spec_t spec;
  mw_kvs_t wcd = {0};
  if (mw_schema_text_parse(argv[2], &s, &err) < 0 || mw_schema_pk_text_apply(&s, argv[3], &err) < 0 ||
      mw_shard_spec_text_parse(argv[4], &s, &spec, &err) < 0) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
  mw_schema_ids_assign(&s);
  for (int i = 5; i < argc; i++) {
    char *eq = strchr(argv[i], '=');
    if (!eq) return 2;
    *eq = 0;
    if (mw_kvs_set(&wcd, argv[i], eq + 1, strlen(eq + 1)) < 0) return 1;
  }
  mw_table_create_params_t p = {.schema = &s, .spec = &spec, .writer_config_defaults = &wcd};
  mw_table_files_t f;
  if (mw_table_create_encode(&p, &f, &err) < 0) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
  char path[4096];
  mkdir(argv[1], 0755);
  snprintf(path, sizeof path, "%s/_versions", argv[1]);
  mkdir(path, 0755);
  snprintf(path, sizeof path, "%s/_transactions", argv[1]);
  mkdir(path, 0755);
  int rc = 0;
  for (size_t i = 0; i < f.n && rc == 0; i++) {
    snprintf(path, sizeof path, "%s/%s", argv[1], f.files[i].path);
    rc = write_all(path, &f.files[i].bytes);
    if (rc < 0) fprintf(stderr, "%s: %s\n", path, strerror(-rc));
  }
  mw_table_files_free(&f);
  mw_kvs_free(&wcd);
  mw_schema_free(&s);
  return rc < 0 ? 1 : 0;
}
