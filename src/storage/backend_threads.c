/*
 * backend_threads.c — the fallback backend: each request runs as one
 * uv_queue_work item on the libuv thread pool, with plain syscalls relative
 * to the root directory fd. The result travels back in priv.result and the
 * after-work callback (loop thread) reports it.
 *
 * The step sequence is the same as the io_uring backend's (docs/storage.md):
 *   put_if_absent: open(tmp, O_CREAT|O_EXCL) [mkdir parents on ENOENT, retry]
 *                  write* fsync close link(tmp,key) unlink(tmp)
 *                  {diropen dirsync dirclose}+
 *   put:           same with rename(tmp,key) and no unlink
 *   get:           open stat read* close      head: stat
 *   delete:        unlink {diropen dirsync dirclose} (of the key's directory)
 *   list:          scan
 *   delete_prefix: scan unlink* (rmdir of emptied directories) then
 *                  {diropen dirsync dirclose} per directory it changed
 *   delete_many:   per directory (keys grouped by it): unlink of each key,
 *                  then {diropen dirsync dirclose} of the directory (also
 *                  when every key was absent, as delete does)
 *   sweep_tmp:     scan, unlink of every ".tmp-*" at least min_age_s old
 *   delete_root:   scan, unlink of leftover temps and rmdir of empty folders
 *                  (depth first), rmdir of the root, fsync of its parent
 * On failure before the object is visible: close the file, unlink the temp.
 *
 * list, delete_prefix, delete_many, sweep_tmp and delete_root always run
 * here (also under io_uring, which has no getdents; delete_many is one pool
 * job for up to 1 000 unlinks and the directories' fsyncs); they walk only the directory the prefix
 * names and below it.
 */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "storage/local_int.h"

#define STEP(req, s) mw_local__step((req), (s))
/* Writes go in 1 MiB pieces: one 64 MiB write measured 3x slower than 1 MiB
 * writes before the same fsync (ext4, bench/storage.c). */
#define WRITE_CHUNK_BYTES ((size_t)1 << 20)

static int mkdirs(mw_storage_req_t *req) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_local_t *l = &req->be.local;
  unsigned depth = mw_local__depth(p->key);
  for (unsigned i = 1; i <= depth; i++) {
    bool ok = mw_local__parent_prefix(p->key, i, l->scratch, sizeof l->scratch);
    assert(ok);
    (void)ok;
    int rc = STEP(req, MW_STEP_MKDIR);
    if (rc == 0) {
      rc = mkdirat(mw_local(p->st)->rootfd, l->scratch, 0755) != 0 ? -errno : 0;
      rc = mw_local__step_end(req, MW_STEP_MKDIR, rc);
    }
    if (rc < 0 && rc != -EEXIST) return rc;
    if (rc == 0) mw_local__made_dir(l, i); /* its entry in the parent is new */
  }
  return 0;
}

static int open_tmp(mw_storage_req_t *req) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_local_t *l = &req->be.local;
  assert(l->fd < 0); /* mw_local__prepare: the put opens one file */
  for (;;) {
    mw_local__tmp_name(req);
    int rc = STEP(req, MW_STEP_OPEN);
    int fd = -1;
    if (rc == 0) {
      fd = openat(mw_local(p->st)->rootfd, l->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0) rc = -errno;
      mw_local__step_end(req, MW_STEP_OPEN, fd >= 0 ? fd : rc);
    }
    if (fd >= 0) {
      l->fd = fd;
      l->tmp_made = 1;
      return 0;
    }
    if ((rc != -ENOENT && rc != -EEXIST) || l->mkdir_tries >= MW_LOCAL_MKDIR_TRIES) return rc;
    l->mkdir_tries++;
    if (rc == -ENOENT) {
      if (!l->sync_parents) l->sync_low = 0; /* the cache had the directory: wrong */
      l->sync_parents = 1; /* new directories: their entries need fsync too */
      rc = mkdirs(req);
      if (rc < 0) return rc;
    }
  }
}

static int write_all(mw_storage_req_t *req) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_local_t *l = &req->be.local;
  assert(l->fd >= 0); /* open_tmp made it */
  assert(p->len == 0 || p->src != NULL);
  while (l->done < p->len) {
    int rc = STEP(req, MW_STEP_WRITE);
    if (rc < 0) return rc;
    size_t n = p->len - l->done;
    if (n > WRITE_CHUNK_BYTES) n = WRITE_CHUNK_BYTES;
    ssize_t w = pwrite(l->fd, p->src + l->done, n, (off_t)l->done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return -errno;
    if (w == 0) return -EIO;
    l->done += (size_t)w;
  }
  assert(l->done == p->len); /* every byte planned was written */
  return 0;
}

static int close_fd(mw_storage_req_t *req, int *fdp, mw_local_step_t step) {
  assert(*fdp >= 0);
  int rc = STEP(req, step);
  int fd = *fdp;
  *fdp = -1;
  if (close(fd) != 0 && rc == 0 && errno != EINTR) rc = -errno;
  return rc;
}

/* diropen, dirsync, dirclose of `dir` (relative to the root). */
static int sync_dir(mw_storage_req_t *req, const char *dir) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_local_t *l = &req->be.local;
  int rc = STEP(req, MW_STEP_DIROPEN);
  if (rc == 0) {
    l->dirfd = openat(mw_local(p->st)->rootfd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (l->dirfd < 0) rc = -errno;
  }
  if (rc < 0) return rc;
  rc = STEP(req, MW_STEP_DIRSYNC);
  if (rc == 0) {
    rc = fsync(l->dirfd) != 0 ? -errno : 0;
    rc = mw_local__step_end(req, MW_STEP_DIRSYNC, rc);
  }
  int rc2 = close_fd(req, &l->dirfd, MW_STEP_DIRCLOSE);
  return rc < 0 ? rc : rc2;
}

/* fsync the key's directory, and its ancestors up to sync_low when asked. */
static int sync_dirs(mw_storage_req_t *req) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_local_t *l = &req->be.local;
  unsigned depth = mw_local__depth(p->key);
  unsigned low = l->sync_parents ? l->sync_low : depth;
  assert(low <= depth);
  char d[MW_STORAGE_LOCAL_PATH_BYTES];
  for (unsigned i = depth + 1; i-- > low;) {
    mw_local__parent_prefix(p->key, i, d, sizeof d);
    int rc = sync_dir(req, d);
    if (rc < 0) return rc;
  }
  return 0;
}

static int unlink_tmp(mw_storage_req_t *req) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_local_t *l = &req->be.local;
  int rc = STEP(req, MW_STEP_UNLINK);
  if (rc == 0 && unlinkat(mw_local(p->st)->rootfd, l->tmp, 0) != 0) rc = -errno;
  if (rc == 0) l->tmp_made = 0;
  return rc;
}

static int put_sync(mw_storage_req_t *req) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_local_t *l = &req->be.local;
  assert(p->op == MW_OP_PUT || p->op == MW_OP_PUT_IF_ABSENT);
  assert(p->len <= p->st->cfg.max_object_bytes); /* submit refused larger */
  bool pia = p->op == MW_OP_PUT_IF_ABSENT;
  bool dosync = mw_local(p->st)->durable;
  int rc = open_tmp(req);
  if (rc < 0) goto fail;
  rc = write_all(req);
  if (rc < 0) goto fail;
  if (dosync) {
    rc = STEP(req, MW_STEP_FSYNC);
    if (rc == 0) {
      rc = fsync(l->fd) != 0 ? -errno : 0;
      rc = mw_local__step_end(req, MW_STEP_FSYNC, rc);
    }
    if (rc < 0) goto fail;
  }
  rc = close_fd(req, &l->fd, MW_STEP_CLOSE);
  if (rc < 0) goto fail;
  rc = STEP(req, pia ? MW_STEP_LINK : MW_STEP_RENAME);
  if (rc == 0) {
    int r = pia ? linkat(mw_local(p->st)->rootfd, l->tmp, mw_local(p->st)->rootfd, p->key, 0)
                : renameat(mw_local(p->st)->rootfd, l->tmp, mw_local(p->st)->rootfd, p->key);
    if (r != 0) rc = -errno;
  }
  if (rc < 0) goto fail; /* -EEXIST: lost the race */
  p->maybe_written = 1;
  if (!pia) l->tmp_made = 0;
  /* put_if_absent: drop the temp name before the directory fsync, so that
   * fsync makes its removal durable too (no temp survives a power loss). */
  if (pia && (rc = unlink_tmp(req)) < 0) {
    /* The object is whole; only a hidden temp is left over (sweep_tmp). */
    mw_log_warn("storage: unlink %s/%s: %s", mw_local(p->st)->root, l->tmp, strerror(-rc));
  }
  if (dosync && (rc = sync_dirs(req)) < 0) goto fail;
  return 0;
fail:
  assert(rc < 0);
  p->result = rc; /* freezes p->step at the failing step for the log */
  if (l->fd >= 0) close_fd(req, &l->fd, MW_STEP_CLOSE);
  if (l->dirfd >= 0) close_fd(req, &l->dirfd, MW_STEP_DIRCLOSE);
  if (l->tmp_made) unlink_tmp(req);
  return rc;
}

static int get_sync(mw_storage_req_t *req) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_local_t *l = &req->be.local;
  assert(p->op == MW_OP_GET);
  assert(req->buf.len == 0); /* submit emptied it */
  int rc = STEP(req, MW_STEP_OPEN);
  if (rc == 0) {
    l->fd = openat(mw_local(p->st)->rootfd, p->key, O_RDONLY | O_CLOEXEC);
    if (l->fd < 0) rc = errno == ENOTDIR ? -ENOENT : -errno;
  }
  if (rc < 0) return rc;
  struct stat sb;
  rc = STEP(req, MW_STEP_STAT);
  if (rc == 0 && fstat(l->fd, &sb) != 0) rc = -errno;
  if (rc == 0 && !S_ISREG(sb.st_mode)) rc = -ENOENT;
  uint64_t size = rc == 0 ? (uint64_t)sb.st_size : 0, n = 0;
  if (rc == 0 && p->off > size) rc = -EINVAL;
  if (rc == 0) {
    n = size - p->off < p->rlen ? size - p->off : p->rlen;
    if (n > p->st->cfg.max_object_bytes) rc = -EFBIG;
  }
  if (rc == 0) rc = mw_buf_reserve(&req->buf, (size_t)n);
  while (rc == 0 && req->buf.len < n) {
    rc = STEP(req, MW_STEP_READ);
    if (rc < 0) break;
    ssize_t r = pread(l->fd, req->buf.data + req->buf.len, (size_t)n - req->buf.len,
                      (off_t)(p->off + req->buf.len));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) rc = -errno;
    if (r <= 0) break;
    req->buf.len += (size_t)r;
  }
  p->result = rc;
  int rc2 = close_fd(req, &l->fd, MW_STEP_CLOSE);
  req->size = size;
  return rc < 0 ? rc : rc2;
}

static int head_sync(mw_storage_req_t *req) {
  mw_storage_req_front_t *p = &req->priv;
  assert(p->op == MW_OP_HEAD);
  struct stat sb;
  int rc = STEP(req, MW_STEP_STAT);
  if (rc == 0 && fstatat(mw_local(p->st)->rootfd, p->key, &sb, AT_SYMLINK_NOFOLLOW) != 0)
    rc = errno == ENOTDIR ? -ENOENT : -errno;
  if (rc == 0 && !S_ISREG(sb.st_mode)) rc = -ENOENT;
  if (rc == 0) req->size = (uint64_t)sb.st_size;
  return rc;
}

static int delete_sync(mw_storage_req_t *req) {
  mw_storage_req_front_t *p = &req->priv;
  assert(p->op == MW_OP_DELETE);
  mw_storage_req_local_t *l = &req->be.local;
  int rc = STEP(req, MW_STEP_UNLINK);
  if (rc == 0 && unlinkat(mw_local(p->st)->rootfd, p->key, 0) != 0) rc = -errno;
  if (rc == -ENOTDIR || rc == -EISDIR) return 0; /* absent: idempotent */
  if (rc < 0 && rc != -ENOENT) return rc;
  /* Make the removal durable. Also when the key was already absent: a
   * retry after a failed directory fsync must not report success early. */
  if (!mw_local(p->st)->durable) return 0;
  rc = sync_dir(req, l->dir);
  return rc == -ENOENT || rc == -ENOTDIR ? 0 : rc; /* no directory: nothing to sync */
}

/* ---- directory walk (list, delete_prefix) ---- */

typedef struct walk {
  mw_storage_req_t *req;
  const char *prefix;
  size_t plen;
  size_t nkeys;
} walk_t;

/* Recurse into dirfd (whose keys start with rel, "" or "a/b/"). Closes dirfd. */
static int walk_dir(walk_t *w, int dirfd, char *rel, size_t rlen, unsigned depth) {
  DIR *d;
  int rc = mw_local__opendir(dirfd, &d);
  if (rc < 0) return rc;
  struct dirent *e;
  while (rc == 0 && (errno = 0, e = readdir(d)) != NULL) {
    const char *name = e->d_name;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) continue;
    if (strncmp(name, MW_STORAGE_RESERVED_PREFIX, 5) == 0) continue;
    size_t nlen = strlen(name);
    if (rlen + nlen + 1 > MW_STORAGE_KEY_MAX_BYTES) continue; /* not a valid key */
    memcpy(rel + rlen, name, nlen + 1);
    size_t cmp = rlen + nlen < w->plen ? rlen + nlen : w->plen;
    if (strncmp(rel, w->prefix, cmp) != 0) continue; /* cannot match the prefix */
    unsigned char type = e->d_type;
    if (type == DT_UNKNOWN) {
      struct stat sb;
      if (fstatat(dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0) continue;
      type = S_ISDIR(sb.st_mode) ? DT_DIR : S_ISREG(sb.st_mode) ? DT_REG : DT_UNKNOWN;
    }
    if (type == DT_REG && rlen + nlen >= w->plen) {
      if (w->nkeys >= MW_STORAGE_LIST_MAX_KEYS) rc = -EOVERFLOW;
      else rc = mw_buf_append(&w->req->buf, rel, rlen + nlen + 1);
      w->nkeys++;
    } else if (type == DT_DIR && depth + 1 < MW_STORAGE_KEY_MAX_SEGMENTS) {
      int sub = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
      if (sub < 0) continue; /* vanished */
      rel[rlen + nlen] = '/';
      rel[rlen + nlen + 1] = '\0';
      rc = walk_dir(w, sub, rel, rlen + nlen + 1, depth + 1);
    }
  }
  if (rc == 0 && errno != 0) rc = -errno;
  closedir(d);
  return rc;
}

static int cmp_key(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int list_sync(mw_storage_req_t *req) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_local_t *l = &req->be.local;
  int rc = STEP(req, MW_STEP_SCAN);
  if (rc < 0) return rc;
  bool root = strcmp(l->dir, ".") == 0;
  int fd = openat(mw_local(p->st)->rootfd, l->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
  char rel[MW_STORAGE_KEY_MAX_BYTES + 2];
  size_t rlen = 0;
  if (!root) {
    rlen = strlen(l->dir);
    memcpy(rel, l->dir, rlen);
    rel[rlen++] = '/';
  }
  rel[rlen] = '\0';
  walk_t w = {req, p->key, strlen(p->key), 0};
  rc = walk_dir(&w, fd, rel, rlen, mw_local__depth(rel));
  if (rc < 0) return rc;
  if (w.nkeys == 0) return 0;
  req->keys = malloc(w.nkeys * sizeof *req->keys);
  if (req->keys == NULL) return -ENOMEM;
  const char *s = (const char *)req->buf.data;
  for (size_t i = 0; i < w.nkeys; i++) {
    req->keys[i] = s;
    s += strlen(s) + 1;
  }
  assert(s == (const char *)req->buf.data + req->buf.len);
  qsort(req->keys, w.nkeys, sizeof *req->keys, cmp_key);
  req->nkeys = w.nkeys;
  return 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* fsync every directory in dirs (n paths, sorted here, duplicates once). */
static int sync_changed(mw_storage_req_t *req, char **dirs, size_t n) {
  if (n == 0) return 0; /* nothing removed (dirs is NULL): qsort must not see it */
  qsort(dirs, n, sizeof *dirs, cmp_str);
  for (size_t i = 0; i < n; i++) {
    if (i > 0 && strcmp(dirs[i], dirs[i - 1]) == 0) continue;
    int rc = sync_dir(req, dirs[i]);
    if (rc < 0 && rc != -ENOENT && rc != -ENOTDIR) return rc; /* removed: its parent counts */
  }
  return 0;
}

typedef struct strs {
  char **v;
  size_t n, cap;
} strs_t;

static int strs_add(strs_t *s, const char *str) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 16;
    char **v = realloc(s->v, cap * sizeof *v);
    if (v == NULL) return -ENOMEM;
    s->v = v;
    s->cap = cap;
  }
  if ((s->v[s->n] = strdup(str)) == NULL) return -ENOMEM;
  s->n++;
  return 0;
}

static int delete_prefix_sync(mw_storage_req_t *req) {
  mw_storage_req_front_t *p = &req->priv;
  assert(p->op == MW_OP_DELETE_PREFIX);
  int rc = list_sync(req);
  if (rc < 0) return rc;
  size_t plen = strlen(p->key), removed = 0;
  char d[MW_STORAGE_LOCAL_PATH_BYTES];
  strs_t changed = {NULL, 0, 0}; /* directories whose entries we changed */
  /* Deepest keys last in sort order is not guaranteed; walk backwards so
   * "a/b/c" is handled before "a/b", then rmdir parents under the prefix. */
  for (size_t i = req->nkeys; i-- > 0;) {
    const char *key = req->keys[i];
    rc = STEP(req, MW_STEP_UNLINK);
    if (rc == 0 && unlinkat(mw_local(p->st)->rootfd, key, 0) != 0 && errno != ENOENT) rc = -errno;
    if (rc < 0) goto out;
    removed++;
    unsigned depth = mw_local__depth(key);
    mw_local__parent_prefix(key, depth, d, sizeof d);
    if ((rc = strs_add(&changed, d)) < 0) goto out;
    for (unsigned n = depth; n > 0; n--) {
      mw_local__parent_prefix(key, n, d, sizeof d);
      size_t dl = strlen(d);
      d[dl] = '/';
      bool under = dl + 1 >= plen && strncmp(d, p->key, plen) == 0;
      d[dl] = '\0';
      if (!under || unlinkat(mw_local(p->st)->rootfd, d, AT_REMOVEDIR) != 0) break;
      mw_local__parent_prefix(key, n - 1, d, sizeof d); /* n - 1 == 0: "." */
      if ((rc = strs_add(&changed, d)) < 0) goto out;
    }
  }
  if (mw_local(p->st)->durable) rc = sync_changed(req, changed.v, changed.n);
out:
  for (size_t i = 0; i < changed.n; i++) free(changed.v[i]);
  free(changed.v);
  free(req->keys);
  req->keys = NULL;
  mw_buf_reset(&req->buf);
  req->nkeys = removed;
  return rc;
}

/* delete_many: key indexes ordered by parent directory, then name (qsort
 * has no context argument: the keys of the job this thread runs). */
static _Thread_local const char *const *tl_keys;

static size_t dir_len(const char *k) {
  const char *s = strrchr(k, '/');
  return s == NULL ? 0 : (size_t)(s - k);
}

static int cmp_by_dir(const void *a, const void *b) {
  const char *x = tl_keys[*(const uint32_t *)a], *y = tl_keys[*(const uint32_t *)b];
  size_t dx = dir_len(x), dy = dir_len(y), m = dx < dy ? dx : dy;
  int c = memcmp(x, y, m);
  if (c != 0) return c;
  if (dx != dy) return dx < dy ? -1 : 1;
  return strcmp(x, y);
}

/* Keys [lo, hi) of order share one directory: unlink each (its own
 * status), then make the directory's new state durable; a failed fsync is
 * the status of every key there that had none. */
static void delete_group(mw_storage_req_t *req, const uint32_t *order, size_t lo, size_t hi,
                         uint8_t *steps) {
  mw_storage_req_front_t *p = &req->priv;
  mw_local_t *lo_ = mw_local(p->st);
  char dir[MW_STORAGE_KEY_MAX_BYTES + 1];
  const char *first = p->many[order[lo]];
  size_t dl = dir_len(first);
  memcpy(dir, first, dl);
  dir[dl] = '\0';
  if (dl == 0) strcpy(dir, ".");
  int fault_dir = 0;
  for (size_t k = lo; k < hi; k++) {
    uint32_t i = order[k];
    snprintf(p->key, sizeof p->key, "%s", p->many[i]); /* the hook and errors see this key */
    int rc = mw_storage__key_fault(req, i, MW_STEP_UNLINK);
    if (rc == 0) rc = STEP(req, MW_STEP_UNLINK);
    if (rc == 0 && unlinkat(lo_->rootfd, p->many[i], 0) != 0) rc = -errno;
    if (rc == -ENOENT || rc == -ENOTDIR || rc == -EISDIR) rc = 0; /* absent: idempotent */
    p->statuses[i] = rc;
    steps[i] = MW_STEP_UNLINK;
    /* a key armed for the directory's steps fails the fsync below */
    for (unsigned s = MW_STEP_DIROPEN; fault_dir == 0 && s <= MW_STEP_DIRSYNC; s++)
      fault_dir = mw_storage__key_fault(req, i, s);
  }
  if (!lo_->durable) return;
  int rc = fault_dir != 0 ? fault_dir : sync_dir(req, dir);
  uint8_t step = fault_dir != 0 ? MW_STEP_DIRSYNC : p->step; /* sync_dir's failing step */
  if (rc == -ENOENT || rc == -ENOTDIR) rc = 0; /* no directory: nothing to sync */
  for (size_t k = lo; rc < 0 && k < hi; k++)
    if (p->statuses[order[k]] == 0) {
      p->statuses[order[k]] = rc;
      steps[order[k]] = step;
    }
}

static int delete_many_sync(mw_storage_req_t *req) {
  mw_storage_req_front_t *p = &req->priv;
  assert(p->nmany > 0);
  assert(p->nmany <= MW_STORAGE_DELETE_MANY_MAX);
  uint32_t order[MW_STORAGE_DELETE_MANY_MAX];
  uint8_t steps[MW_STORAGE_DELETE_MANY_MAX]; /* where each key failed */
  for (uint32_t i = 0; i < p->nmany; i++) order[i] = i;
  tl_keys = p->many;
  qsort(order, p->nmany, sizeof *order, cmp_by_dir);
  for (size_t lo = 0, hi; lo < p->nmany; lo = hi) {
    size_t dl = dir_len(p->many[order[lo]]);
    for (hi = lo + 1; hi < p->nmany; hi++) {
      const char *k = p->many[order[hi]];
      if (dir_len(k) != dl || memcmp(k, p->many[order[lo]], dl) != 0) break;
    }
    delete_group(req, order, lo, hi, steps);
  }
  int first = 0;
  req->nkeys = 0;
  for (uint32_t i = 0; i < p->nmany; i++) {
    if (p->statuses[i] == 0) req->nkeys++;
    else if (first == 0) {
      first = p->statuses[i];
      snprintf(p->key, sizeof p->key, "%s", p->many[i]); /* the error names it ... */
      p->step = steps[i];                                 /* ... and its step */
    }
  }
  if (first == 0) snprintf(p->key, sizeof p->key, "%s", p->many[0]);
  return first;
}

/* A tree walk's place: the request, its depth, a sweep's cutoff. */
typedef struct tree {
  mw_storage_req_t *req;
  unsigned depth;
  time_t cutoff;
} tree_t;

static int sweep_dir(mw_storage_req_t *req, int dirfd, time_t cutoff, unsigned depth);

/* One entry of a sweep: a directory is swept in turn, an old temp removed. */
static int sweep_entry(void *ctx, int dirfd, const char *name, const struct stat *sb) {
  const tree_t *w = ctx;
  assert(w->depth < MW_STORAGE_KEY_MAX_SEGMENTS);
  int rc = 0;
  if (S_ISDIR(sb->st_mode) && w->depth + 1 < MW_STORAGE_KEY_MAX_SEGMENTS) {
    int sub = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (sub >= 0) rc = sweep_dir(w->req, sub, w->cutoff, w->depth + 1);
  } else if (S_ISREG(sb->st_mode) && strncmp(name, MW_STORAGE_RESERVED_PREFIX, 5) == 0 &&
             sb->st_mtime <= w->cutoff) {
    rc = STEP(w->req, MW_STEP_UNLINK);
    if (rc == 0 && unlinkat(dirfd, name, 0) != 0 && errno != ENOENT) rc = -errno;
    if (rc == 0) w->req->nkeys++;
  }
  return rc;
}

/* Remove ".tmp-*" files older than cutoff under dirfd (closes dirfd). */
static int sweep_dir(mw_storage_req_t *req, int dirfd, time_t cutoff, unsigned depth) {
  tree_t w = {.req = req, .depth = depth, .cutoff = cutoff};
  return mw_local__each_entry(dirfd, sweep_entry, &w);
}

static int sweep_sync(mw_storage_req_t *req) {
  mw_storage_req_front_t *p = &req->priv;
  mw_storage_req_local_t *l = &req->be.local;
  assert(p->op == MW_OP_SWEEP_TMP);
  int rc = STEP(req, MW_STEP_SCAN);
  if (rc < 0) return rc;
  int fd = openat(mw_local(p->st)->rootfd, l->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
  time_t now = time(NULL);
  time_t cutoff = p->min_age_s > (uint64_t)now ? 0 : now - (time_t)p->min_age_s;
  return sweep_dir(req, fd, cutoff, mw_local__depth(p->key));
}

/* ---- delete_root ---- */

static int clear_dir(mw_storage_req_t *req, int dirfd, unsigned depth);

/* One entry of delete_root's walk: a directory is cleared and removed, a
 * temp removed; anything else is an object (-ENOTEMPTY, named). */
static int clear_entry(void *ctx, int dirfd, const char *name, const struct stat *sb) {
  const tree_t *w = ctx;
  mw_storage_req_t *req = w->req;
  assert(w->depth < MW_STORAGE_KEY_MAX_SEGMENTS);
  int rc = 0;
  if (S_ISDIR(sb->st_mode)) {
    if (w->depth + 1 >= MW_STORAGE_KEY_MAX_SEGMENTS) return -ENOTEMPTY;
    int sub = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (sub < 0) return 0;
    rc = clear_dir(req, sub, w->depth + 1);
    if (rc == 0) rc = STEP(req, MW_STEP_RMDIR);
    if (rc == 0 && unlinkat(dirfd, name, AT_REMOVEDIR) != 0 && errno != ENOENT) rc = -errno;
  } else if (strncmp(name, MW_STORAGE_RESERVED_PREFIX, 5) == 0) {
    rc = STEP(req, MW_STEP_UNLINK);
    if (rc == 0 && unlinkat(dirfd, name, 0) != 0 && errno != ENOENT) rc = -errno;
  } else {
    rc = -ENOTEMPTY; /* an object is still there: name it */
    mw_storage__set_error(req, "%s: not empty: %s (depth %u) is an object",
                          mw_local(req->priv.st)->root, name, w->depth);
  }
  return rc;
}

/* Remove leftover temps and empty directories below dirfd, depth first
 * (closes dirfd). Anything else left is -ENOTEMPTY. */
static int clear_dir(mw_storage_req_t *req, int dirfd, unsigned depth) {
  tree_t w = {.req = req, .depth = depth};
  return mw_local__each_entry(dirfd, clear_entry, &w);
}

/* Everything under the root is gone but temps and empty folders: remove
 * them, then the root directory, then (durable) fsync its parent so the
 * removal survives a power loss. */
static int delete_root_sync(mw_storage_req_t *req) {
  mw_local_t *lo = mw_local(req->priv.st);
  assert(req->priv.op == MW_OP_DELETE_ROOT);
  int rc = STEP(req, MW_STEP_SCAN);
  if (rc < 0) return rc;
  int fd = openat(lo->rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? 0 : -errno;
  if ((rc = clear_dir(req, fd, 0)) < 0) return rc;
  if ((rc = STEP(req, MW_STEP_RMDIR)) < 0) return rc;
  if (rmdir(lo->root) != 0 && errno != ENOENT) return -errno;
  if (!lo->durable) return 0;
  char parent[MW_STORAGE_URI_MAX_BYTES];
  snprintf(parent, sizeof parent, "%s", lo->root);
  char *slash = strrchr(parent, '/');
  if (slash == parent) slash[1] = '\0';        /* "/t.lance": the parent is "/" */
  else if (slash != NULL) *slash = '\0';
  else strcpy(parent, ".");
  int pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (pfd < 0) return -errno;
  rc = fsync(pfd) != 0 ? -errno : 0;
  close(pfd);
  return rc;
}

int mw_local__sync_run(mw_storage_req_t *req) {
  assert(req != NULL);
  assert(req->priv.st != NULL);
  switch ((mw_storage_op_t)req->priv.op) {
    case MW_OP_PUT_IF_ABSENT:
    case MW_OP_PUT: return put_sync(req);
    case MW_OP_GET: return get_sync(req);
    case MW_OP_HEAD: return head_sync(req);
    case MW_OP_LIST: return list_sync(req);
    case MW_OP_DELETE: return delete_sync(req);
    case MW_OP_DELETE_PREFIX: return delete_prefix_sync(req);
    case MW_OP_SWEEP_TMP: return sweep_sync(req);
    case MW_OP_DELETE_ROOT: return delete_root_sync(req);
    case MW_OP_DELETE_MANY: return delete_many_sync(req);
    case MW_OP_COUNT_: break;
  }
  return -EINVAL;
}

static void work_cb(uv_work_t *w) {
  mw_storage_req_t *req = w->data;
  req->priv.result = mw_local__sync_run(req);
  assert(req->be.local.fd < 0);
  assert(req->be.local.dirfd < 0);
}

static void after_work_cb(uv_work_t *w, int status) {
  mw_storage_req_t *req = w->data;
  assert(status == 0); /* we never cancel */
  (void)status;
  mw_local__done(req, req->priv.result);
}

void mw_local__queue_work(mw_storage_t *st, mw_storage_req_t *req) {
  assert(st != NULL);
  assert(req->priv.st == st);
  req->be.local.work.data = req;
  int rc = uv_queue_work(st->loop, &req->be.local.work, work_cb, after_work_cb);
  assert(rc == 0);
  (void)rc;
}

static void threads_submit(mw_storage_t *st, mw_storage_req_t *req) {
  mw_local__prepare(st, req);
  mw_local__queue_work(st, req);
}

static void threads_close(mw_storage_t *st, void (*done)(mw_storage_t *st)) {
  assert(st->inflight == 0);
  mw_local__close_done(st, done);
}

const mw_storage_backend_ops_t mw_storage__threads_ops = {
    .name = "threads",
    .step_names = mw_local_step_names,
    .n_steps = MW_STEP_COUNT_,
    .sync_step = MW_STEP_FSYNC,
    .family = MW_STORAGE_FAMILY_LOCAL,
    .submit = threads_submit,
    .close = threads_close,
};
