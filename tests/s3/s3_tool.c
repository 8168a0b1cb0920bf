/*
 * s3_tool.c — what the S3 variants of the interop and engine scripts need,
 * through memwald's own storage layer (blocking calls; endpoint and keys
 * from the AWS environment):
 *
 *   s3_tool put-dir DIR URI   upload every file under DIR as URI/<relative path>
 *   s3_tool count URI         print how many objects are under URI
 *   s3_tool rm URI            delete every object under URI, and its leftovers
 *
 * Exit status 0, or 1 with the reason on stderr.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "storage/storage.h"

static int die(const char *what, const mw_err_t *err, int rc) {
  fprintf(stderr, "s3_tool: %s: %s (%d)\n", what, err && err->msg[0] ? err->msg : strerror(-rc), rc);
  return 1;
}

static int slurp(const char *path, mw_buf_t *out) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return -errno;
  char tmp[65536];
  size_t n;
  int rc = 0;
  while (rc == 0 && (n = fread(tmp, 1, sizeof tmp, f)) > 0) rc = mw_buf_append(out, tmp, n);
  if (rc == 0 && ferror(f)) rc = -EIO;
  fclose(f);
  return rc;
}

/* Upload dir/rel recursively; *n counts the objects. */
static int put_tree(mw_storage_sync_t *ss, const char *dir, const char *rel, size_t *n) {
  char path[4096];
  snprintf(path, sizeof path, "%s%s%s", dir, rel[0] ? "/" : "", rel);
  DIR *d = opendir(path);
  if (d == NULL) return -errno;
  int rc = 0;
  struct dirent *e;
  while (rc == 0 && (e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char key[2048], full[6144];
    snprintf(key, sizeof key, "%s%s%s", rel, rel[0] ? "/" : "", e->d_name);
    snprintf(full, sizeof full, "%s/%s", dir, key);
    struct stat sb;
    if (stat(full, &sb) != 0) {
      rc = -errno;
      break;
    }
    if (S_ISDIR(sb.st_mode)) {
      rc = put_tree(ss, dir, key, n);
      continue;
    }
    mw_buf_t b = MW_BUF_INIT;
    mw_err_t err = {0};
    rc = slurp(full, &b);
    if (rc == 0) rc = mw_storage_sync_put(ss, key, b.data, b.len, false, &err);
    if (rc < 0) fprintf(stderr, "s3_tool: %s: %s\n", key, err.msg[0] ? err.msg : strerror(-rc));
    mw_buf_free(&b);
    (*n)++;
  }
  closedir(d);
  return rc;
}

/* rm-keys: the keys on stdin (one a line) by delete_many, 1 000 a call;
 * each key that failed is named with its error on stderr; prints how many
 * were deleted. 1 when any failed. */
static int rm_keys(mw_storage_sync_t *ss) {
  static char *keys[MW_STORAGE_DELETE_MANY_MAX];
  static int st[MW_STORAGE_DELETE_MANY_MAX];
  char line[MW_STORAGE_KEY_MAX_BYTES + 2];
  size_t n = 0, deleted = 0, failed = 0;
  bool eof = false;
  while (!eof) {
    eof = fgets(line, sizeof line, stdin) == NULL;
    if (!eof) {
      line[strcspn(line, "\n")] = '\0';
      if (line[0] == '\0') continue;
      keys[n++] = strdup(line);
    }
    if (n == 0 || (n < MW_STORAGE_DELETE_MANY_MAX && !eof)) continue;
    mw_err_t err = {0};
    int rc = mw_storage_sync_delete_many(ss, (const char *const *)keys, n, st, &err);
    if (rc < 0) fprintf(stderr, "s3_tool: rm-keys: %s\n", err.msg[0] ? err.msg : strerror(-rc));
    for (size_t i = 0; i < n; i++) {
      if (st[i] == 0) deleted++;
      else {
        failed++;
        fprintf(stderr, "s3_tool: %s: %s\n", keys[i], strerror(-st[i]));
      }
      free(keys[i]);
    }
    n = 0;
  }
  printf("%zu\n", deleted);
  return failed > 0 ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: s3_tool put-dir DIR URI | count URI | rm URI | rm-keys URI < KEYS\n");
    return 2;
  }
  const char *cmd = argv[1], *uri = argv[argc - 1];
  mw_storage_config_t cfg;
  mw_storage_config_init(&cfg, uri);
  mw_storage_sync_t *ss = NULL;
  mw_err_t err = {0};
  int rc = mw_storage_sync_open(&cfg, &ss, &err);
  if (rc < 0) return die("open", &err, rc);
  int status = 0;
  if (strcmp(cmd, "put-dir") == 0 && argc == 4) {
    size_t n = 0;
    rc = put_tree(ss, argv[2], "", &n);
    if (rc < 0) status = die(argv[2], NULL, rc);
    else fprintf(stderr, "s3_tool: %zu objects uploaded to %s\n", n, uri);
  } else if (strcmp(cmd, "count") == 0) {
    mw_storage_req_t req;
    mw_storage_req_init(&req);
    rc = mw_storage_sync_list(ss, "", &req, &err);
    if (rc < 0) status = die("list", &err, rc);
    else printf("%zu\n", req.nkeys);
    mw_storage_req_cleanup(&req);
  } else if (strcmp(cmd, "rm") == 0) {
    rc = mw_storage_sync_delete_prefix(ss, "", &err);
    if (rc >= 0) rc = mw_storage_sync_delete_root(ss, &err);
    if (rc < 0) status = die("rm", &err, rc);
  } else if (strcmp(cmd, "rm-keys") == 0) {
    status = rm_keys(ss);
  } else {
    fprintf(stderr, "s3_tool: unknown command %s\n", cmd);
    status = 2;
  }
  mw_storage_sync_close(ss);
  return status;
}
