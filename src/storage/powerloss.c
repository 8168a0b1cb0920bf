/*
 * powerloss.c — power-loss simulation: a shadow journal of what each
 * completed fsync made durable, and a "power cut" that rewrites the tree on
 * disk to exactly that durable state (tests and benchmarks only).
 *
 * Model (POSIX durability, taken literally, no more):
 *   - a file's content is durable as of its last *completed* fsync; a file
 *     never fsynced has empty durable content (the classic zero-length file
 *     after a crash);
 *   - a directory's entries are durable as of the *start* of its last
 *     completed fsync (entries added or removed while that fsync runs are
 *     not covered: the harsher reading); a directory never fsynced has no
 *     durable entries beyond those it had when the journal began;
 *   - a directory exists after the cut only if its entry is durable in its
 *     parent, all the way up to the root (the root always exists).
 * Everything else — creates, writes, links, renames, unlinks, mkdirs not
 * covered by a later completed fsync — is thrown away by the cut.
 *
 * Identity: the journal tracks inodes ("nodes"), not names, because a
 * rename or link moves an inode between names and a rename-over frees the
 * old inode whose durable content must come back if the rename is not
 * durable. A node is named by the inode's file handle (name_to_handle_at:
 * on ext4, xfs, btrfs and tmpfs the inode number *and* its generation, the
 * pair NFS relies on), so a reused inode number is a different node with no
 * durable content, and the identity is read from the file system wherever
 * an inode is seen: no hook has to announce a new inode. (An earlier model
 * bumped a per-number generation in the after-hook of each create; a
 * directory listing on another pool thread between the mkdir syscall and
 * that hook recorded the new directory under the old generation, and the
 * cut dropped it with everything acknowledged in it.)
 * A directory snapshot records, per entry, the name and the inode the name
 * pointed to; a file node keeps the bytes its last fsync saw (read back
 * from the file, not taken from the caller's buffer).
 *
 * Hooks (called by backend_fault.c with the request's fd open):
 *   before FSYNC/DIRSYNC  read the file / list the directory into a pending
 *                         record (keyed by the request);
 *   after  FSYNC/DIRSYNC  success and power still on: commit it (a directory
 *                         keeps the newest-started snapshot).
 * After mw_powerloss_trip() nothing commits any more, and the fault layer
 * fails every later step with -EIO, so no operation can be acknowledged
 * whose durability point lies after the cut.
 *
 * Not modelled: torn or reordered writes inside a file (content is all or
 * nothing per fsync), data written but not fsynced surviving anyway (real
 * filesystems often keep it — the model is the worst case POSIX allows),
 * metadata other than names and bytes (mode, times), more than one
 * filesystem under the root. See docs/storage.md "Power loss".
 *
 * Threading: one mutex; the hooks run on the loop thread (io_uring) or pool
 * threads (thread backend); trip is an atomic and may be called anywhere.
 */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storage/local_int.h"

#ifndef AT_HANDLE_FID
#define AT_HANDLE_FID 0x200 /* Linux 6.5: a unique id even without NFS export */
#endif

/* An inode's identity: its file handle, type and bytes (8 on ext4, 12 on
 * tmpfs, 20-40 on btrfs/xfs). Compared whole; a longer handle overflows. */
enum { IID_BYTES = 40 };
typedef struct iid {
  int32_t type;
  uint32_t len;
  uint8_t b[IID_BYTES];
} iid_t;

typedef struct ent {
  char *name;
  iid_t id;
  bool dir;
} ent_t;

typedef struct node {
  iid_t id;
  bool dir;
  bool has;       /* a durable snapshot was committed (or baseline) */
  uint64_t seq;   /* directories: start sequence of the committed snapshot */
  uint8_t *data;  /* files: durable bytes */
  size_t len;
  ent_t *ents;    /* directories: durable entries */
  size_t nents;
  char *made;     /* during a cut: the path it was recreated at */
} node_t;

typedef struct pend {
  const void *req;
  bool dir;
  uint64_t seq;
  iid_t id;
  uint8_t *data;
  size_t len;
  ent_t *ents;
  size_t nents;
} pend_t;

struct mw_powerloss {
  pthread_mutex_t mu;
  char *root;
  iid_t root_id;
  atomic_bool tripped;
  bool overflow;
  int users;
  node_t *nodes;
  size_t nnodes, cap;
  size_t bytes;
  pend_t pend[MW_POWERLOSS_MAX_PENDING];
  size_t npend;
  uint64_t seq;
  mw_powerloss_stats_t stats;
};

#define MAX_DEPTH MW_STORAGE_KEY_MAX_SEGMENTS

static void ents_free(ent_t *e, size_t n) {
  for (size_t i = 0; i < n; i++) free(e[i].name);
  free(e);
}

static void node_clear(node_t *n) {
  free(n->data);
  ents_free(n->ents, n->nents);
  free(n->made);
  n->data = NULL;
  n->ents = NULL;
  n->made = NULL;
  n->len = n->nents = 0;
}

static bool iid_equal(const iid_t *a, const iid_t *b) {
  assert(a->len <= IID_BYTES);
  assert(b->len <= IID_BYTES);
  return a->type == b->type && a->len == b->len && memcmp(a->b, b->b, a->len) == 0;
}

/* The identity of name in dirfd ("" with AT_EMPTY_PATH: dirfd itself).
 * Never follows a symlink. -EOVERFLOW: a handle longer than IID_BYTES. */
static int iid_get(int dirfd, const char *name, int flags, iid_t *out) {
  union {
    struct file_handle fh;
    uint8_t space[sizeof(struct file_handle) + MAX_HANDLE_SZ];
  } u;
  int mnt = 0;
  memset(out, 0, sizeof *out);
  u.fh.handle_bytes = MAX_HANDLE_SZ;
  int rc = name_to_handle_at(dirfd, name, &u.fh, &mnt, flags);
  if (rc != 0 && errno == EOPNOTSUPP) { /* no export ops: ask for a plain id */
    u.fh.handle_bytes = MAX_HANDLE_SZ;
    rc = name_to_handle_at(dirfd, name, &u.fh, &mnt, flags | AT_HANDLE_FID);
  }
  if (rc != 0) return -errno;
  if (u.fh.handle_bytes > IID_BYTES) return -EOVERFLOW;
  out->type = u.fh.handle_type;
  out->len = u.fh.handle_bytes;
  memcpy(out->b, u.fh.f_handle, u.fh.handle_bytes);
  return 0;
}

static node_t *node_find(mw_powerloss_t *pl, const iid_t *id) {
  for (size_t i = pl->nnodes; i-- > 0;)
    if (iid_equal(&pl->nodes[i].id, id)) return &pl->nodes[i];
  return NULL;
}

static node_t *node_add(mw_powerloss_t *pl, const iid_t *id, bool dir) {
  assert(pl->nnodes <= pl->cap);
  if (pl->nnodes >= MW_POWERLOSS_MAX_NODES) {
    pl->overflow = true;
    return NULL;
  }
  if (pl->nnodes == pl->cap) {
    size_t cap = pl->cap ? pl->cap * 2 : 256;
    node_t *n = realloc(pl->nodes, cap * sizeof *n);
    if (n == NULL) {
      pl->overflow = true;
      return NULL;
    }
    pl->nodes = n;
    pl->cap = cap;
  }
  assert(node_find(pl, id) == NULL);
  node_t *n = &pl->nodes[pl->nnodes++];
  memset(n, 0, sizeof *n);
  n->id = *id;
  n->dir = dir;
  return n;
}

/* The node of an inode, created (never fsynced) if unknown. */
static node_t *node_get(mw_powerloss_t *pl, const iid_t *id, bool dir) {
  node_t *n = node_find(pl, id);
  return n != NULL ? n : node_add(pl, id, dir);
}

static int read_all(int fd, const struct stat *stp, uint8_t **out, size_t *len);

/* Read a whole file through fd (positioned reads; fd is not moved). The
 * storage's fds are write-only, so read through a second, read-only open of
 * the same inode (/proc/self/fd). */
static int read_fd(int wfd, uint8_t **out, size_t *len) {
  struct stat sb;
  *out = NULL;
  *len = 0;
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/self/fd/%d", wfd);
  int fd = open(proc, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  int rc = fstat(fd, &sb) != 0 ? -errno : 0;
  if (rc == 0) rc = read_all(fd, &sb, out, len);
  close(fd);
  return rc;
}

static int read_all(int fd, const struct stat *stp, uint8_t **out, size_t *len) {
  const struct stat sb = *stp;
  if (sb.st_size < 0 || (uint64_t)sb.st_size > MW_POWERLOSS_MAX_BYTES) return -E2BIG;
  size_t n = (size_t)sb.st_size, done = 0;
  uint8_t *b = malloc(n ? n : 1);
  if (b == NULL) return -ENOMEM;
  while (done < n) {
    ssize_t r = pread(fd, b + done, n - done, (off_t)done);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int rc = -errno;
      free(b);
      return rc; /* cannot know the content: the journal refuses to cut */
    }
    if (r == 0) break; /* shrank meanwhile: keep what is there */
    done += (size_t)r;
  }
  *out = b;
  *len = done;
  return 0;
}

/* List the directory open as dirfd: regular files and directories with
 * their inodes' identities (file handles, looked up by name; the type from
 * fstatat). A name replaced between the two calls is recorded with the
 * inode it names at the second: a listing is not atomic, and either inode
 * is one the name held while the snapshot was taken. */
typedef struct listing {
  mw_powerloss_t *pl;
  ent_t *v;
  size_t n, cap;
} listing_t;

/* One entry of list_dir: a file or directory joins the listing. */
static int list_entry(void *ctx, int dirfd, const char *name, const struct stat *sb) {
  listing_t *ls = ctx;
  assert(ls->n <= ls->cap);
  if (!S_ISREG(sb->st_mode) && !S_ISDIR(sb->st_mode)) return 0;
  iid_t id;
  int r = iid_get(dirfd, name, 0, &id);
  if (r == -ENOENT) return 0; /* vanished */
  if (r < 0) return r;
  if (ls->n >= MW_POWERLOSS_MAX_ENTRIES) {
    ls->pl->overflow = true;
    return 1; /* stop here: the journal knows it is incomplete */
  }
  if (ls->n == ls->cap) {
    size_t cap = ls->cap ? ls->cap * 2 : 16;
    ent_t *nv = realloc(ls->v, cap * sizeof *nv);
    if (nv == NULL) return -ENOMEM;
    ls->v = nv;
    ls->cap = cap;
  }
  node_t *nd = node_get(ls->pl, &id, S_ISDIR(sb->st_mode));
  char *copy = strdup(name);
  if (nd == NULL || copy == NULL) {
    free(copy);
    return -ENOMEM;
  }
  ls->v[ls->n++] = (ent_t){copy, id, S_ISDIR(sb->st_mode)};
  return 0;
}

static int list_dir(mw_powerloss_t *pl, int dirfd, ent_t **out, size_t *nout) {
  *out = NULL;
  *nout = 0;
  int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -errno;
  listing_t ls = {.pl = pl};
  int rc = mw_local__each_entry(fd, list_entry, &ls);
  if (rc < 0) {
    ents_free(ls.v, ls.n);
    return rc;
  }
  *out = ls.v;
  *nout = ls.n;
  return 0;
}

/* Baseline: everything under dirfd (closed here) is durable as it is. The
 * node is passed by index: adding nodes may move the array. */
static int scan(mw_powerloss_t *pl, int dirfd, size_t si, unsigned depth) {
  assert(si < pl->nnodes);
  assert(pl->nodes[si].dir);
  ent_t *ents;
  size_t nents;
  int rc = list_dir(pl, dirfd, &ents, &nents);
  if (rc == 0) {
    pl->nodes[si].ents = ents;
    pl->nodes[si].nents = nents;
    pl->nodes[si].has = true;
  }
  for (size_t i = 0; rc == 0 && i < nents; i++) {
    node_t *c = node_find(pl, &ents[i].id);
    if (c == NULL || c->has) continue; /* hard link seen before */
    int fd = openat(dirfd, ents[i].name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW |
                                             (ents[i].dir ? O_DIRECTORY : 0));
    if (fd < 0) continue; /* vanished */
    if (ents[i].dir) {
      if (depth + 1 >= MAX_DEPTH) {
        close(fd);
        continue;
      }
      rc = scan(pl, fd, (size_t)(c - pl->nodes), depth + 1);
      continue;
    }
    struct stat sb;
    rc = fstat(fd, &sb) != 0 ? -errno : read_all(fd, &sb, &c->data, &c->len);
    close(fd);
    c->has = true;
    pl->bytes += c->len;
    if (pl->bytes > MW_POWERLOSS_MAX_BYTES) pl->overflow = true;
  }
  close(dirfd);
  return rc;
}

static void reset(mw_powerloss_t *pl) {
  for (size_t i = 0; i < pl->nnodes; i++) node_clear(&pl->nodes[i]);
  for (size_t i = 0; i < pl->npend; i++) {
    free(pl->pend[i].data);
    ents_free(pl->pend[i].ents, pl->pend[i].nents);
  }
  pl->nnodes = pl->npend = 0;
  pl->bytes = 0;
  pl->overflow = false;
}

static int baseline(mw_powerloss_t *pl) {
  int fd = open(pl->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -errno;
  int rc = iid_get(fd, "", AT_EMPTY_PATH, &pl->root_id);
  if (rc < 0) {
    close(fd);
    return rc;
  }
  if (node_add(pl, &pl->root_id, true) == NULL) {
    close(fd);
    return -ENOMEM;
  }
  return scan(pl, fd, pl->nnodes - 1, 0);
}

int mw_powerloss_new(const char *root_dir, mw_powerloss_t **out, mw_err_t *err) {
  assert(root_dir != NULL);
  assert(out != NULL);
  *out = NULL;
  mw_powerloss_t *pl = calloc(1, sizeof *pl);
  if (pl == NULL) return mw_err_set(err, -ENOMEM, "powerloss: out of memory");
  pthread_mutex_init(&pl->mu, NULL);
  pl->root = strdup(root_dir);
  int rc = pl->root ? baseline(pl) : -ENOMEM;
  if (rc == 0 && pl->overflow) rc = -E2BIG;
  if (rc < 0) {
    mw_err_set(err, rc, "powerloss: snapshot of %s: %s", root_dir, strerror(-rc));
    mw_powerloss_free(pl);
    return rc;
  }
  *out = pl;
  return 0;
}

void mw_powerloss_free(mw_powerloss_t *pl) {
  if (pl == NULL) return;
  assert(pl->users == 0);
  reset(pl);
  free(pl->nodes);
  free(pl->root);
  pthread_mutex_destroy(&pl->mu);
  free(pl);
}

void mw_powerloss_trip(mw_powerloss_t *pl) {
  assert(pl != NULL);
  atomic_store(&pl->tripped, true);
}

bool mw_powerloss_tripped(const mw_powerloss_t *pl) {
  return atomic_load(&((mw_powerloss_t *)pl)->tripped);
}

void mw_powerloss_stats(const mw_powerloss_t *pl, mw_powerloss_stats_t *out) {
  assert(pl != NULL);
  assert(out != NULL);
  pthread_mutex_lock((pthread_mutex_t *)&pl->mu);
  *out = pl->stats;
  pthread_mutex_unlock((pthread_mutex_t *)&pl->mu);
}

/* ---- hooks from the storage ---- */

int mw_powerloss__attach(mw_powerloss_t *pl, int rootfd) {
  iid_t id;
  int rc = iid_get(rootfd, "", AT_EMPTY_PATH, &id);
  if (rc < 0) return rc;
  pthread_mutex_lock(&pl->mu);
  rc = iid_equal(&id, &pl->root_id) ? 0 : -EINVAL;
  if (rc == 0) pl->users++;
  pthread_mutex_unlock(&pl->mu);
  return rc;
}

void mw_powerloss__detach(mw_powerloss_t *pl) {
  pthread_mutex_lock(&pl->mu);
  assert(pl->users > 0);
  pl->users--;
  pthread_mutex_unlock(&pl->mu);
}

static pend_t *pend_take(mw_powerloss_t *pl, const void *req) {
  for (size_t i = 0; i < pl->npend; i++)
    if (pl->pend[i].req == req) return &pl->pend[i];
  return NULL;
}

static void pend_drop(mw_powerloss_t *pl, pend_t *p) {
  assert(pl->npend > 0);
  assert(p >= pl->pend);
  assert(p < pl->pend + pl->npend);
  free(p->data);
  ents_free(p->ents, p->nents);
  *p = pl->pend[--pl->npend];
}

void mw_powerloss__before(mw_powerloss_t *pl, mw_storage_req_t *req, mw_local_step_t step) {
  mw_storage_req_local_t *l = &req->be.local;
  int fd = step == MW_STEP_FSYNC ? l->fd : l->dirfd;
  assert(step == MW_STEP_FSYNC || step == MW_STEP_DIRSYNC);
  iid_t id;
  if (fd < 0) return;
  int irc = iid_get(fd, "", AT_EMPTY_PATH, &id);
  pthread_mutex_lock(&pl->mu);
  if (irc < 0) {
    pl->overflow = true; /* cannot name the inode: refuse to cut later */
    goto out;
  }
  pend_t *old = pend_take(pl, req);
  if (old != NULL) pend_drop(pl, old);
  if (pl->npend >= MW_POWERLOSS_MAX_PENDING) {
    pl->overflow = true;
    goto out;
  }
  pend_t pe = {.req = req, .dir = step == MW_STEP_DIRSYNC, .seq = ++pl->seq, .id = id};
  int rc = pe.dir ? list_dir(pl, fd, &pe.ents, &pe.nents) : read_fd(fd, &pe.data, &pe.len);
  if (rc < 0) pl->overflow = true; /* cannot model it: refuse to cut later */
  else pl->pend[pl->npend++] = pe;
out:
  pthread_mutex_unlock(&pl->mu);
}

static void commit(mw_powerloss_t *pl, pend_t *pe) {
  assert(pe != NULL);
  assert(pe->req != NULL);
  node_t *n = node_get(pl, &pe->id, pe->dir);
  if (n == NULL) return;
  if (pe->dir) {
    if (n->has && n->seq > pe->seq) return; /* a newer snapshot already counts */
    ents_free(n->ents, n->nents);
    n->ents = pe->ents;
    n->nents = pe->nents;
    n->seq = pe->seq;
    pe->ents = NULL;
    pe->nents = 0;
    pl->stats.dir_fsyncs++;
  } else {
    pl->bytes -= n->len;
    free(n->data);
    n->data = pe->data;
    n->len = pe->len;
    pl->bytes += n->len;
    if (pl->bytes > MW_POWERLOSS_MAX_BYTES) pl->overflow = true;
    pe->data = NULL;
    pl->stats.file_fsyncs++;
  }
  n->has = true;
}

int mw_powerloss__after(mw_powerloss_t *pl, mw_storage_req_t *req, mw_local_step_t step,
                        int rc) {
  if (step != MW_STEP_FSYNC && step != MW_STEP_DIRSYNC) return rc; /* creates: nothing */
  bool tripped = atomic_load(&pl->tripped);
  pthread_mutex_lock(&pl->mu);
  pend_t *pe = pend_take(pl, req);
  if (tripped && rc == 0) rc = -EIO; /* completed after the cut: not durable */
  if (pe != NULL && rc == 0) commit(pl, pe);
  if (pe != NULL) pend_drop(pl, pe);
  pthread_mutex_unlock(&pl->mu);
  return rc;
}

/* ---- the cut ---- */

static int rm_contents(int dirfd, unsigned depth);

/* One entry of the cut's removal: a directory emptied and removed, anything
 * else unlinked. */
static int rm_entry(void *ctx, int dirfd, const char *name, const struct stat *sb) {
  unsigned depth = *(const unsigned *)ctx;
  assert(depth < MAX_DEPTH);
  if (!S_ISDIR(sb->st_mode)) return unlinkat(dirfd, name, 0) != 0 ? -errno : 0;
  int sub = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (sub < 0) return -errno;
  int rc = depth + 1 < MAX_DEPTH ? rm_contents(sub, depth + 1) : -ELOOP;
  close(sub);
  if (rc == 0 && unlinkat(dirfd, name, AT_REMOVEDIR) != 0) rc = -errno;
  return rc;
}

static int rm_contents(int dirfd, unsigned depth) {
  int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -errno;
  return mw_local__each_entry(fd, rm_entry, &depth);
}

static int write_file(int dirfd, const char *name, const node_t *n) {
  int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return -errno;
  size_t done = 0;
  int rc = 0;
  while (n != NULL && done < n->len) {
    ssize_t w = write(fd, n->data + done, n->len - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      rc = w < 0 ? -errno : -EIO;
      break;
    }
    done += (size_t)w;
  }
  if (close(fd) != 0 && rc == 0) rc = -errno;
  return rc;
}

/* Recreate directory node `dn` (open as dirfd, at `path` from the root). */
static int build(mw_powerloss_t *pl, int dirfd, const char *path, size_t dn, unsigned depth) {
  assert(dn < pl->nnodes);
  assert(pl->nodes[dn].dir);
  char sub[MW_STORAGE_LOCAL_PATH_BYTES + 256];
  for (size_t i = 0; i < pl->nodes[dn].nents; i++) {
    const ent_t *e = &pl->nodes[dn].ents[i];
    node_t *c = node_find(pl, &e->id);
    size_t ci = c ? (size_t)(c - pl->nodes) : SIZE_MAX;
    int n = snprintf(sub, sizeof sub, "%s%s%s", path, path[0] ? "/" : "", e->name);
    if (n < 0 || (size_t)n >= sizeof sub) return -ENAMETOOLONG;
    if (e->dir) {
      if (depth + 1 >= MAX_DEPTH) return -ELOOP;
      if (mkdirat(dirfd, e->name, 0755) != 0) return -errno;
      pl->stats.dirs++;
      if (c == NULL || !c->has) continue; /* never fsynced: empty */
      int fd = openat(dirfd, e->name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0) return -errno;
      int rc = build(pl, fd, sub, ci, depth + 1);
      close(fd);
      if (rc < 0) return rc;
      continue;
    }
    int rc;
    if (c != NULL && c->made != NULL) { /* a second name of the same inode */
      int rootfd = open(pl->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (rootfd < 0) return -errno;
      rc = linkat(rootfd, c->made, dirfd, e->name, 0) != 0 ? -errno : 0;
      close(rootfd);
    } else {
      rc = write_file(dirfd, e->name, c != NULL && c->has ? c : NULL);
      if (c != NULL) c->made = strdup(sub);
      if (c != NULL && c->made == NULL) rc = -ENOMEM;
    }
    if (rc < 0) return rc;
    pl->stats.files++;
    pl->stats.bytes += c != NULL && c->has ? c->len : 0;
  }
  return 0;
}

int mw_storage_power_cut(mw_powerloss_t *pl, mw_err_t *err) {
  assert(pl != NULL);
  pthread_mutex_lock(&pl->mu);
  int rc = 0, fd = -1;
  if (pl->users != 0) {
    rc = mw_err_set(err, -EBUSY, "powerloss: %d storage(s) still open on %s", pl->users,
                    pl->root);
    goto out;
  }
  if (pl->overflow) {
    rc = mw_err_set(err, -E2BIG, "powerloss: journal limits exceeded; cannot model %s",
                    pl->root);
    goto out;
  }
  node_t *root = node_find(pl, &pl->root_id);
  assert(root != NULL);
  assert(root->has);
  size_t ri = (size_t)(root - pl->nodes);
  fd = open(pl->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    rc = mw_err_set(err, -errno, "powerloss: open %s: %s", pl->root, strerror(errno));
    goto out;
  }
  pl->stats.files = pl->stats.dirs = pl->stats.bytes = 0;
  if ((rc = rm_contents(fd, 0)) < 0 || (rc = build(pl, fd, "", ri, 0)) < 0) {
    mw_err_set(err, rc, "powerloss: rewriting %s: %s", pl->root, strerror(-rc));
    goto out;
  }
  /* What a reboot finds is the new baseline; the power is back. */
  reset(pl);
  atomic_store(&pl->tripped, false);
  rc = baseline(pl);
  if (rc < 0) mw_err_set(err, rc, "powerloss: snapshot of %s: %s", pl->root, strerror(-rc));
out:
  if (fd >= 0) close(fd);
  pthread_mutex_unlock(&pl->mu);
  return rc;
}
