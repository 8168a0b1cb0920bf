/*
 * shardio.c — see shardio.h. Test-only. Paths under the table si_open
 * named go through the storage layer (mw_storage_sync_*: local disk or S3,
 * the same calls the daemon's start-up makes); any other path — and every
 * path when si_open was not called (test_sstable) — uses plain POSIX calls.
 *
 * Coverage recovery: Lance publishes one SSTable per shard manifest version
 * (memwal.md §6.2 step 7), setting replay_after to the last WAL position the
 * memtable held. Walking versions 1..latest and remembering replay_after
 * before each new generation appears gives each SSTable's WAL range.
 */
#include "shardio.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storage/storage.h"

/* ---- the table's storage (si_open) ---- */

static mw_storage_sync_t *g_ss;
static char g_root[4096];
static size_t g_root_len;

int si_open(const char *table, mw_err_t *err) {
  assert(g_ss == NULL && table != NULL);
  int n = snprintf(g_root, sizeof g_root, "%s", table);
  if (n <= 0 || (size_t)n >= sizeof g_root) return mw_err_set(err, -ENAMETOOLONG, "table URI too long");
  while (n > 1 && g_root[n - 1] == '/') g_root[--n] = '\0';
  g_root_len = (size_t)n;
  mw_storage_config_t cfg;
  mw_storage_config_init(&cfg, g_root);
  cfg.durable = false; /* test scratch tables */
  return mw_storage_sync_open(&cfg, &g_ss, err);
}

void si_close(void) {
  mw_storage_sync_close(g_ss);
  g_ss = NULL;
}

/* The key of path under the opened table; NULL when not under it. */
static const char *key_of(const char *path) {
  if (g_ss == NULL || strncmp(path, g_root, g_root_len) != 0) return NULL;
  if (path[g_root_len] == '\0') return "";
  return path[g_root_len] == '/' ? path + g_root_len + 1 : NULL;
}

static bool path_exists(const char *path) {
  const char *k = key_of(path);
  struct stat st;
  if (k == NULL) return stat(path, &st) == 0;
  return mw_storage_sync_head(g_ss, k, NULL, NULL) == 0;
}

/* The names of dir's direct children (objects or folders), sorted. */
int si_list_children(const char *dir, char ***names, size_t *n) {
  *names = NULL;
  *n = 0;
  char **out = NULL;
  size_t k = 0, cap = 0;
  const char *key = key_of(dir);
  if (key == NULL) {
    DIR *d = opendir(dir);
    if (d == NULL) return -errno;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
      if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
      if (k == cap && (out = realloc(out, (cap = cap ? cap * 2 : 16) * sizeof *out)) == NULL) break;
      out[k++] = strdup(de->d_name);
    }
    closedir(d);
  } else {
    char prefix[MW_STORAGE_KEY_MAX_BYTES + 2];
    snprintf(prefix, sizeof prefix, "%s%s", key, key[0] ? "/" : "");
    mw_storage_req_t req;
    mw_storage_req_init(&req);
    int rc = mw_storage_sync_list(g_ss, prefix, &req, NULL);
    if (rc < 0) {
      mw_storage_req_cleanup(&req);
      return rc;
    }
    size_t pl = strlen(prefix);
    for (size_t i = 0; i < req.nkeys; i++) {
      const char *rest = req.keys[i] + pl, *slash = strchr(rest, '/');
      size_t len = slash ? (size_t)(slash - rest) : strlen(rest);
      if (len == 0 || (k > 0 && strlen(out[k - 1]) == len && memcmp(out[k - 1], rest, len) == 0))
        continue; /* sorted keys: a folder's objects come together */
      if (k == cap && (out = realloc(out, (cap = cap ? cap * 2 : 16) * sizeof *out)) == NULL) break;
      out[k++] = strndup(rest, len);
    }
    mw_storage_req_cleanup(&req);
  }
  if (out == NULL && k == 0) return 0;
  if (out == NULL) return -ENOMEM;
  for (size_t i = 0; i < k; i++)
    if (out[i] == NULL) {
      si_free_strings(out, k);
      return -ENOMEM;
    }
  *names = out;
  *n = k;
  return 0;
}


int si_slurp(const char *path, uint8_t **p, size_t *n) {
  const char *key = key_of(path);
  if (key != NULL) {
    mw_buf_t b = MW_BUF_INIT;
    int rc = mw_storage_sync_get(g_ss, key, &b, NULL);
    if (rc == 0 && (*p = malloc(b.len + 1)) == NULL) rc = -ENOMEM;
    if (rc == 0) {
      if (b.len > 0) memcpy(*p, b.data, b.len);
      (*p)[b.len] = 0;
      *n = b.len;
    }
    mw_buf_free(&b);
    return rc;
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  struct stat st;
  if (fstat(fd, &st) != 0) { close(fd); return -EIO; }
  *p = malloc((size_t)st.st_size + 1);
  if (*p == NULL) { close(fd); return -ENOMEM; }
  size_t got = 0;
  while (got < (size_t)st.st_size) {
    ssize_t r = read(fd, *p + got, (size_t)st.st_size - got);
    if (r <= 0) { close(fd); free(*p); *p = NULL; return -EIO; }
    got += (size_t)r;
  }
  close(fd);
  *n = got;
  return 0;
}

static int put_excl(const char *path, const void *p, size_t n, int flags) {
  const char *key = key_of(path);
  if (key != NULL) return mw_storage_sync_put(g_ss, key, p, n, (flags & O_EXCL) != 0, NULL);
  int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0644);
  if (fd < 0) return -errno;
  const uint8_t *q = p;
  size_t done = 0;
  while (done < n) {
    ssize_t w = write(fd, q + done, n - done);
    if (w <= 0) { close(fd); return -EIO; }
    done += (size_t)w;
  }
  return close(fd) == 0 ? 0 : -EIO;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

void si_free_strings(char **s, size_t n) {
  for (size_t i = 0; i < n; i++) free(s[i]);
  free(s);
}

int si_list_shards(const char *table_dir, char ***paths, size_t *n) {
  char root[4096];
  snprintf(root, sizeof root, "%s/_mem_wal", table_dir);
  *paths = NULL;
  *n = 0;
  char **names = NULL;
  size_t nn = 0;
  int rc = si_list_children(root, &names, &nn);
  if (rc < 0) return rc;
  char **out = calloc(SI_MAX_SHARDS, sizeof *out);
  size_t k = 0;
  for (size_t i = 0; out != NULL && i < nn && k < SI_MAX_SHARDS; i++) {
    if (strlen(names[i]) != 36 || names[i][8] != '-') continue; /* UUIDs only */
    size_t len = strlen(root) + strlen(names[i]) + 2;
    if ((out[k] = malloc(len)) == NULL) break;
    snprintf(out[k], len, "%s/%s", root, names[i]);
    k++;
  }
  si_free_strings(names, nn);
  if (out == NULL) return -ENOMEM;
  qsort(out, k, sizeof *out, cmp_str);
  *paths = out;
  *n = k;
  return 0;
}

static int manifest_path(const char *shard_dir, uint64_t v, char *out, size_t len) {
  char name[MW_BITREV_NAME_BYTES];
  int rc = mw_shard_manifest_name(v, name, sizeof name);
  if (rc < 0) return rc;
  snprintf(out, len, "%s/manifest/%s", shard_dir, name);
  return 0;
}

static bool manifest_exists(const char *shard_dir, uint64_t v) {
  char p[4096];
  return manifest_path(shard_dir, v, p, sizeof p) == 0 && path_exists(p);
}

int si_latest_version(const char *shard_dir, uint64_t *version, mw_err_t *err) {
  char p[4096];
  snprintf(p, sizeof p, "%s/manifest/version_hint.json", shard_dir);
  uint64_t hint = 0;
  uint8_t *buf;
  size_t n;
  if (si_slurp(p, &buf, &n) == 0) {
    if (mw_version_hint_parse(buf, n, &hint, NULL) < 0) hint = 0;
    free(buf);
  }
  mw_latest_search_t s;
  mw_latest_search_start(&s, hint, 0);
  int guard = 0;
  while (!mw_latest_search_done(&s)) {
    uint64_t v[MW_LATEST_MAX_BATCH];
    size_t k = mw_latest_search_next(&s, v, MW_LATEST_MAX_BATCH);
    for (size_t i = 0; i < k; i++)
      if (mw_latest_search_feed(&s, v[i], manifest_exists(shard_dir, v[i])) < 0)
        return mw_err_set(err, -EINVAL, "%s: latest-version search refused a probe", shard_dir);
    if (++guard > 1000000)
      return mw_err_set(err, -ELOOP, "%s: latest-version search did not end", shard_dir);
  }
  *version = mw_latest_search_result(&s);
  return 0;
}

int si_read_manifest(const char *shard_dir, uint64_t version, mw_shard_manifest_t *m,
                     mw_err_t *err) {
  char p[4096];
  int rc = manifest_path(shard_dir, version, p, sizeof p);
  if (rc < 0) return rc;
  uint8_t *buf;
  size_t n;
  rc = si_slurp(p, &buf, &n);
  if (rc < 0) return mw_err_set(err, rc, "%s: cannot read", p);
  rc = mw_shard_manifest_decode(buf, n, m, err);
  free(buf);
  return rc;
}

int si_publish_manifest(const char *shard_dir, const mw_shard_manifest_t *m, mw_err_t *err) {
  char p[4096];
  mw_buf_t b = MW_BUF_INIT;
  int rc = manifest_path(shard_dir, m->version, p, sizeof p);
  if (rc < 0) return rc;
  rc = mw_shard_manifest_encode(m, &b);
  if (rc < 0) return mw_err_set(err, rc, "encode shard manifest v%llu", (unsigned long long)m->version);
  char d[4096];
  snprintf(d, sizeof d, "%s/manifest", shard_dir);
  if (key_of(d) == NULL) mkdir(d, 0755);
  rc = put_excl(p, b.data, b.len, O_EXCL);
  mw_buf_free(&b);
  if (rc < 0) return mw_err_set(err, rc, "%s: cannot create", p);
  char hint[64];
  int hl = mw_version_hint_encode(m->version, hint, sizeof hint);
  if (hl < 0) return hl;
  snprintf(p, sizeof p, "%s/manifest/version_hint.json", shard_dir);
  rc = put_excl(p, hint, (size_t)hl, O_TRUNC);
  return rc < 0 ? mw_err_set(err, rc, "%s: cannot write", p) : 0;
}

static int wal_path(const char *shard_dir, uint64_t pos, char *out, size_t len) {
  char name[MW_BITREV_NAME_BYTES];
  int rc = mw_wal_entry_name(pos, name, sizeof name);
  if (rc < 0) return rc;
  snprintf(out, len, "%s/wal/%s", shard_dir, name);
  return 0;
}

int si_wal_last(const char *shard_dir, uint64_t *last) {
  uint64_t pos = 0;
  for (;;) {
    char p[4096];
    if (wal_path(shard_dir, pos + 1, p, sizeof p) < 0 || !path_exists(p)) break;
    if (++pos >= SI_MAX_WAL_ENTRIES) break;
  }
  *last = pos;
  return 0;
}

int si_wal_read(const char *shard_dir, uint64_t position, si_wal_entry_t *e, mw_err_t *err) {
  char p[4096];
  memset(e, 0, sizeof *e);
  e->position = position;
  int rc = wal_path(shard_dir, position, p, sizeof p);
  if (rc < 0) return rc;
  uint8_t *buf;
  size_t n;
  rc = si_slurp(p, &buf, &n);
  if (rc < 0) return mw_err_set(err, rc, "%s: cannot read", p);
  rc = mw_ipc_decode(buf, n, NULL, &e->s, err);
  free(buf);
  if (rc < 0) mw_err_set(err, rc, "%s: IPC decode failed", p);
  return rc < 0 ? rc : 0;
}

void si_wal_entry_free(si_wal_entry_t *e) {
  mw_ipc_stream_free(&e->s);
  memset(e, 0, sizeof *e);
}

void si_coverage_free(si_coverage_t *cov, size_t n) {
  for (size_t i = 0; i < n; i++) free(cov[i].ref.path);
  free(cov);
}

int si_coverage(const char *shard_dir, si_coverage_t **cov, size_t *n, mw_err_t *err) {
  uint64_t latest;
  int rc = si_latest_version(shard_dir, &latest, err);
  if (rc < 0) return rc;
  si_coverage_t *out = NULL;
  size_t k = 0;
  uint64_t prev_replay = 0;
  for (uint64_t v = 1; v <= latest; v++) {
    mw_shard_manifest_t m;
    rc = si_read_manifest(shard_dir, v, &m, err);
    if (rc < 0) { mw_shard_manifest_free(&m); goto fail; }
    for (size_t i = 0; i < m.n_sstables; i++) {
      bool seen = false;
      for (size_t j = 0; j < k; j++) seen |= out[j].generation == m.sstables[i].generation;
      if (seen) continue;
      si_coverage_t *grown = realloc(out, (k + 1) * sizeof *out);
      if (grown == NULL) { mw_shard_manifest_free(&m); rc = -ENOMEM; goto fail; }
      out = grown;
      out[k] = (si_coverage_t){.generation = m.sstables[i].generation, .after = prev_replay,
                               .last = m.replay_after_wal_entry_position, .ref = m.sstables[i]};
      out[k].ref.path = strdup(m.sstables[i].path);
      k++;
    }
    prev_replay = m.replay_after_wal_entry_position;
    mw_shard_manifest_free(&m);
  }
  *cov = out;
  *n = k;
  return 0;
fail:
  si_coverage_free(out, k);
  return rc;
}

int si_sstable_schema(const mw_schema_t *wal, mw_schema_t *out) {
  int rc = mw_schema_copy(out, wal);
  if (rc < 0) return rc;
  mw_kvs_remove(&out->meta, "writer_epoch");
  for (size_t i = 0; i < out->n_fields; i++) {
    mw_field_t *f = &out->fields[i];
    f->id = (int32_t)i;
    const mw_kv_t *kv = mw_kvs_get(&f->meta, "lance-schema:unenforced-primary-key:position");
    if (kv != NULL && f->pk_position == 0) f->pk_position = (uint32_t)atoi((const char *)kv->value);
  }
  return 0;
}

/* ---- SSTable files (what the engine puts through storage) ---- */

static int sst_mkdirs(char *path) {
  for (char *p = path + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    int rc = mkdir(path, 0755);
    *p = '/';
    if (rc != 0 && errno != EEXIST) return -errno;
  }
  return 0;
}

static int sst_write_all(const char *path, const mw_buf_t *b) {
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return -errno;
  size_t done = 0;
  while (done < b->len) {
    ssize_t w = write(fd, b->data + done, b->len - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      close(fd);
      return -EIO;
    }
    done += (size_t)w;
  }
  return close(fd) == 0 ? 0 : -EIO;
}

int si_sstable_write_dir(const mw_sstable_t *sst, const char *shard_dir, mw_err_t *err) {
  assert(sst != NULL && shard_dir != NULL);
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", shard_dir, sst->dir_name);
  char **names = NULL;
  size_t nn = 0;
  bool taken = key_of(path) != NULL ? si_list_children(path, &names, &nn) == 0 && nn > 0 : path_exists(path);
  si_free_strings(names, nn);
  if (taken) return mw_err_set(err, -EEXIST, "%s already exists", path);
  for (size_t i = 0; i < sst->n_files; i++) {
    int n = snprintf(path, sizeof path, "%s/%s", shard_dir, sst->files[i].path);
    if (n < 0 || (size_t)n >= sizeof path) return mw_err_set(err, -ENAMETOOLONG, "path too long");
    const char *key = key_of(path);
    int rc = key != NULL ? mw_storage_sync_put(g_ss, key, sst->files[i].bytes.data, sst->files[i].bytes.len,
                                               true, NULL)
                         : sst_mkdirs(path);
    if (rc == 0 && key == NULL) rc = sst_write_all(path, &sst->files[i].bytes);
    if (rc < 0) return mw_err_set(err, rc, "%s: %s", path, strerror(-rc));
  }
  return 0;
}
