/*
 * test_storage.c — the storage layer's suite, run once per backend:
 * MW_STORAGE_BACKEND=uring (meson test storage-uring) or =threads
 * (storage-threads). Every test opens its own root under $TMPDIR.
 *
 * What it proves:
 *   - semantics: put_if_absent/put/get/range/head/list/delete/delete_prefix,
 *     key validation, limits (object size, in-flight queue), callbacks never
 *     inline, close drains;
 *   - races: many put_if_absent on one key from one loop, two loops (threads)
 *     and several processes: exactly one winner per key, content = winner's;
 *   - crash: a child SIGKILLed mid-stream leaves no partial object and every
 *     reported completion intact;
 *   - faults: RLIMIT_FSIZE (EFBIG), a real full tmpfs (ENOSPC) when a mount
 *     namespace is allowed, and injected EIO/ENOSPC at every step of the
 *     documented syscall sequence, which is itself checked step by step.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include <cmocka.h>

#include "storage/storage.h"
#include "testutil.h"

static mw_storage_backend_t g_backend = MW_STORAGE_URING;

/* ---- synchronous helpers ---- */

typedef struct res {
  int status;
  int done;
} res_t;

static void on_done(mw_storage_req_t *r, int status) {
  res_t *x = r->data;
  x->status = status;
  x->done++;
}

static void on_closed(void *arg) { *(int *)arg = 1; }

typedef struct env {
  char *root;
  uv_loop_t loop;
  mw_storage_t *st;
} env_t;

static mw_storage_config_t base_cfg(const char *root) {
  mw_storage_config_t cfg;
  mw_storage_config_init(&cfg, root);
  cfg.backend = g_backend;
  return cfg;
}

static mw_storage_t *open_cfg(uv_loop_t *loop, const mw_storage_config_t *cfg) {
  mw_storage_t *st = NULL;
  mw_err_t err = {0};
  int rc = mw_storage_open(loop, cfg, &st, &err);
  if (rc != 0) fail_msg("mw_storage_open(%s): %d %s", cfg->root_dir, rc, err.msg);
  assert_string_equal(mw_storage_backend_name(st),
                      g_backend == MW_STORAGE_THREADS ? "threads" : "uring");
  return st;
}

static void close_st(uv_loop_t *loop, mw_storage_t *st) {
  int closed = 0;
  mw_storage_close(st, on_closed, &closed);
  while (!closed) uv_run(loop, UV_RUN_ONCE);
}

static env_t *env_new(const char *tag, const mw_storage_config_t *cfg_in) {
  env_t *e = calloc(1, sizeof *e);
  assert_non_null(e);
  e->root = tu_mkdtemp(tag);
  assert_int_equal(uv_loop_init(&e->loop), 0);
  mw_storage_config_t cfg = cfg_in ? *cfg_in : base_cfg(e->root);
  cfg.root_dir = e->root;
  e->st = open_cfg(&e->loop, &cfg);
  return e;
}

static void env_free(env_t *e) {
  if (e->st) close_st(&e->loop, e->st);
  assert_int_equal(uv_loop_close(&e->loop), 0);
  tu_rmtree(e->root);
  free(e->root);
  free(e);
}

static int wait_req(uv_loop_t *loop, mw_storage_req_t *req, res_t *r, int rc) {
  if (rc < 0) return rc;
  while (!r->done) uv_run(loop, UV_RUN_ONCE);
  assert_int_equal(r->done, 1);
  (void)req;
  return r->status;
}

static int s_pia(env_t *e, const char *key, const void *p, size_t n) {
  mw_storage_req_t req;
  res_t r = {0};
  mw_storage_req_init(&req);
  req.data = &r;
  int rc = wait_req(&e->loop, &req, &r, mw_storage_put_if_absent(e->st, &req, key, p, n, on_done));
  mw_storage_req_cleanup(&req);
  return rc;
}

static int s_put(env_t *e, const char *key, const void *p, size_t n) {
  mw_storage_req_t req;
  res_t r = {0};
  mw_storage_req_init(&req);
  req.data = &r;
  int rc = wait_req(&e->loop, &req, &r, mw_storage_put(e->st, &req, key, p, n, on_done));
  mw_storage_req_cleanup(&req);
  return rc;
}

/* get into *out (malloc'd, caller frees) */
static int s_get(env_t *e, const char *key, uint64_t off, uint64_t len, uint8_t **out,
                 size_t *n, uint64_t *size) {
  mw_storage_req_t req;
  res_t r = {0};
  mw_storage_req_init(&req);
  req.data = &r;
  int rc = wait_req(&e->loop, &req, &r, mw_storage_get(e->st, &req, key, off, len, on_done));
  if (out) *out = NULL;
  if (rc == 0) {
    if (out) *out = mw_buf_steal(&req.buf, n);
    if (size) *size = req.size;
  }
  mw_storage_req_cleanup(&req);
  return rc;
}

static int s_head(env_t *e, const char *key, uint64_t *size) {
  mw_storage_req_t req;
  res_t r = {0};
  mw_storage_req_init(&req);
  req.data = &r;
  int rc = wait_req(&e->loop, &req, &r, mw_storage_head(e->st, &req, key, on_done));
  if (rc == 0 && size) *size = req.size;
  return rc;
}

static int s_delete(env_t *e, const char *key) {
  mw_storage_req_t req;
  res_t r = {0};
  mw_storage_req_init(&req);
  req.data = &r;
  return wait_req(&e->loop, &req, &r, mw_storage_delete(e->st, &req, key, on_done));
}

static int s_delete_prefix(env_t *e, const char *prefix, size_t *removed) {
  mw_storage_req_t req;
  res_t r = {0};
  mw_storage_req_init(&req);
  req.data = &r;
  int rc = wait_req(&e->loop, &req, &r, mw_storage_delete_prefix(e->st, &req, prefix, on_done));
  if (removed) *removed = req.nkeys;
  mw_storage_req_cleanup(&req);
  return rc;
}

/* list as one "\n"-joined string (malloc'd) */
static char *s_list(env_t *e, const char *prefix, int *status) {
  mw_storage_req_t req;
  res_t r = {0};
  mw_storage_req_init(&req);
  req.data = &r;
  *status = wait_req(&e->loop, &req, &r, mw_storage_list(e->st, &req, prefix, on_done));
  size_t cap = 1;
  for (size_t i = 0; i < req.nkeys; i++) cap += strlen(req.keys[i]) + 1;
  char *s = calloc(1, cap), *w = s;
  for (size_t i = 0; i < req.nkeys; i++) w += sprintf(w, "%s%s", i ? "\n" : "", req.keys[i]);
  mw_storage_req_cleanup(&req);
  return s;
}

/* Count directory entries starting with ".tmp-" under dir (recursively). */
static size_t count_tmp(const char *dir) {
  char **paths = NULL;
  size_t n = tu_find_files(dir, "", &paths), t = 0;
  for (size_t i = 0; i < n; i++) {
    const char *b = strrchr(paths[i], '/');
    b = b ? b + 1 : paths[i];
    t += strncmp(b, ".tmp-", 5) == 0;
  }
  tu_free_names(paths, n);
  return t;
}

static int count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  while (d && readdir(d)) n++;
  if (d) closedir(d);
  return n;
}

/* Self-verifying payload: [u32 len][u32 seed][bytes...][u32 fnv of all before] */
static uint32_t fnv(const uint8_t *p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
  return h;
}

static uint8_t *make_payload(uint32_t seed, size_t len) {
  if (len < 12) len = 12;
  uint8_t *b = malloc(len);
  uint32_t x = seed * 2654435761u + 1;
  mw_store_u32le(b, (uint32_t)len);
  mw_store_u32le(b + 4, seed);
  for (size_t i = 8; i < len - 4; i++) {
    x ^= x << 13; x ^= x >> 17; x ^= x << 5;
    b[i] = (uint8_t)x;
  }
  mw_store_u32le(b + len - 4, fnv(b, len - 4));
  return b;
}

static bool payload_ok(const uint8_t *b, size_t n, uint32_t *seed) {
  if (n < 12 || mw_load_u32le(b) != n) return false;
  if (seed) *seed = mw_load_u32le(b + 4);
  return mw_load_u32le(b + n - 4) == fnv(b, n - 4);
}

/* ---- semantics ---- */

static void test_roundtrip(void **state) {
  (void)state;
  env_t *e = env_new("rt", NULL);
  const char *msg = "hello, object store";
  size_t n = strlen(msg);
  assert_int_equal(s_pia(e, "a/b/c.bin", msg, n), 0);
  assert_int_equal(s_pia(e, "a/b/c.bin", "other", 5), -EEXIST);
  uint8_t *got;
  size_t gl;
  uint64_t size;
  assert_int_equal(s_get(e, "a/b/c.bin", 0, UINT64_MAX, &got, &gl, &size), 0);
  assert_int_equal(gl, n);
  assert_int_equal(size, n);
  assert_memory_equal(got, msg, n);
  free(got);
  assert_int_equal(s_get(e, "a/b/c.bin", 7, 5, &got, &gl, &size), 0);
  assert_int_equal(gl, 5);
  assert_memory_equal(got, "objec", 5);
  free(got);
  assert_int_equal(s_get(e, "a/b/c.bin", 15, 100, &got, &gl, NULL), 0); /* clipped */
  assert_int_equal(gl, n - 15);
  free(got);
  assert_int_equal(s_get(e, "a/b/c.bin", n, 10, &got, &gl, NULL), 0);
  assert_int_equal(gl, 0);
  free(got);
  assert_int_equal(s_get(e, "a/b/c.bin", n + 1, 10, NULL, NULL, NULL), -EINVAL);
  assert_int_equal(s_head(e, "a/b/c.bin", &size), 0);
  assert_int_equal(size, n);
  assert_int_equal(s_head(e, "a/b/none", &size), -ENOENT);
  assert_int_equal(s_head(e, "a/b", &size), -ENOENT); /* a directory is no object */
  assert_int_equal(s_head(e, "a/b/c.bin/x", &size), -ENOENT);
  assert_int_equal(s_get(e, "nope/x", 0, UINT64_MAX, NULL, NULL, NULL), -ENOENT);
  assert_int_equal(s_get(e, "a/b", 0, UINT64_MAX, NULL, NULL, NULL), -ENOENT);
  /* put replaces */
  assert_int_equal(s_put(e, "a/b/c.bin", "v2", 2), 0);
  assert_int_equal(s_get(e, "a/b/c.bin", 0, UINT64_MAX, &got, &gl, NULL), 0);
  assert_int_equal(gl, 2);
  assert_memory_equal(got, "v2", 2);
  free(got);
  /* put creates, zero-length objects exist */
  assert_int_equal(s_put(e, "x/y/new", "", 0), 0);
  assert_int_equal(s_pia(e, "empty", NULL, 0), 0);
  assert_int_equal(s_head(e, "empty", &size), 0);
  assert_int_equal(size, 0);
  /* a large object: 12 MiB with a verifiable pattern */
  size_t big = (size_t)12 << 20;
  uint8_t *p = make_payload(7, big);
  assert_int_equal(s_pia(e, "big/obj", p, big), 0);
  assert_int_equal(s_get(e, "big/obj", 0, UINT64_MAX, &got, &gl, NULL), 0);
  assert_int_equal(gl, big);
  assert_true(payload_ok(got, gl, NULL));
  assert_memory_equal(got, p, big);
  free(got);
  free(p);
  /* the on-disk file is where the key says, and no temp is left */
  char *path = tu_strf("%s/a/b/c.bin", e->root);
  struct stat sb;
  assert_int_equal(stat(path, &sb), 0);
  assert_int_equal(sb.st_size, 2);
  free(path);
  assert_int_equal(count_tmp(e->root), 0);
  env_free(e);
}

static void test_list_delete(void **state) {
  (void)state;
  env_t *e = env_new("ls", NULL);
  const char *keys[] = {"wal/2", "wal/10", "wal/1", "man/x", "top", "walrus"};
  for (size_t i = 0; i < 6; i++) assert_int_equal(s_pia(e, keys[i], keys[i], strlen(keys[i])), 0);
  /* a stray temp file (as a crash leaves) is hidden from listing */
  char *stray = tu_strf("%s/wal/.tmp-0123456789abcdef0123456789abcdef", e->root);
  assert_int_equal(tu_write_file(stray, "x", 1), 0);
  int st;
  char *l = s_list(e, "wal/", &st);
  assert_int_equal(st, 0);
  assert_string_equal(l, "wal/1\nwal/10\nwal/2");
  free(l);
  l = s_list(e, "wal/1", &st);
  assert_string_equal(l, "wal/1\nwal/10");
  free(l);
  l = s_list(e, "wal", &st);
  assert_string_equal(l, "wal/1\nwal/10\nwal/2\nwalrus");
  free(l);
  l = s_list(e, "", &st);
  assert_string_equal(l, "man/x\ntop\nwal/1\nwal/10\nwal/2\nwalrus");
  free(l);
  l = s_list(e, "nothing/here/", &st);
  assert_int_equal(st, 0);
  assert_string_equal(l, "");
  free(l);
  assert_int_equal(s_delete(e, "wal/2"), 0);
  assert_int_equal(s_head(e, "wal/2", NULL), -ENOENT);
  assert_int_equal(s_delete(e, "wal/2"), 0); /* idempotent */
  size_t removed = 0;
  assert_int_equal(s_delete_prefix(e, "wal/", &removed), 0);
  assert_int_equal(removed, 2);
  l = s_list(e, "", &st);
  assert_string_equal(l, "man/x\ntop\nwalrus");
  free(l);
  assert_int_equal(access(stray, F_OK), 0); /* not ours to delete: dir stays */
  assert_int_equal(s_delete_prefix(e, "man/", &removed), 0);
  assert_int_equal(removed, 1);
  char *man = tu_strf("%s/man", e->root);
  assert_int_equal(access(man, F_OK), -1); /* empty directory removed */
  /* and a put into a removed directory recreates it */
  assert_int_equal(s_pia(e, "man/y", "y", 1), 0);
  assert_int_equal(access(man, F_OK), 0);
  free(man);
  free(stray);
  env_free(e);
}

static void test_key_validation(void **state) {
  (void)state;
  env_t *e = env_new("keys", NULL);
  mw_storage_req_t req;
  mw_storage_req_init(&req);
  res_t r = {0};
  req.data = &r;
  char longkey[MW_STORAGE_KEY_MAX_BYTES + 2];
  memset(longkey, 'k', sizeof longkey - 1);
  longkey[sizeof longkey - 1] = '\0';
  char deep[200] = "";
  for (int i = 0; i <= MW_STORAGE_KEY_MAX_SEGMENTS; i++) strcat(deep, i ? "/d" : "d");
  const char *bad[] = {"", "/a", "a/", "a//b", "..", "../x", "a/../b", "a/./b", ".", ".tmp-x",
                       "a/.tmp-1/b", "a\nb", longkey, deep};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    assert_false(mw_storage_key_valid(bad[i]));
    assert_int_equal(mw_storage_put_if_absent(e->st, &req, bad[i], "x", 1, on_done), -EINVAL);
    assert_int_equal(mw_storage_get(e->st, &req, bad[i], 0, 1, on_done), -EINVAL);
    assert_int_equal(mw_storage_head(e->st, &req, bad[i], on_done), -EINVAL);
    assert_int_equal(mw_storage_delete(e->st, &req, bad[i], on_done), -EINVAL);
  }
  assert_int_equal(mw_storage_list(e->st, &req, "a/..", on_done), -EINVAL);
  assert_int_equal(mw_storage_list(e->st, &req, "/", on_done), -EINVAL);
  assert_int_equal(mw_storage_delete_prefix(e->st, &req, "../", on_done), -EINVAL);
  assert_int_equal(r.done, 0); /* rejected submissions never call back */
  /* longest legal key: 8 segments of 127 bytes = 1023 bytes, 7 nested dirs */
  char ok[MW_STORAGE_KEY_MAX_BYTES + 1] = "";
  for (int i = 0; i < 8; i++) {
    if (i) strcat(ok, "/");
    size_t l = strlen(ok);
    memset(ok + l, 'a' + i, 127);
    ok[l + 127] = '\0';
  }
  assert_true(mw_storage_key_valid(ok));
  assert_true(mw_storage_key_valid(".hidden/x.y"));
  assert_int_equal(s_pia(e, ok, "deep", 4), 0);
  assert_int_equal(s_head(e, ok, NULL), 0);
  env_free(e);
}

typedef struct lim {
  uv_loop_t *loop;
  mw_storage_t *st;
  uint32_t max_seen;
  int done;
  int fails;
} lim_t;

static void lim_cb(mw_storage_req_t *req, int status) {
  lim_t *l = req->data;
  uint32_t in = mw_storage_inflight(l->st);
  if (in > l->max_seen) l->max_seen = in;
  if (status != 0) l->fails++;
  l->done++;
}

static void test_limits(void **state) {
  (void)state;
  char *root = tu_mkdtemp("lim");
  mw_storage_config_t cfg = base_cfg(root);
  cfg.max_object_bytes = 1000;
  cfg.max_inflight = 2;
  env_t *e = env_new("lim", &cfg);
  static uint8_t buf[2000];
  mw_storage_req_t req;
  mw_storage_req_init(&req);
  assert_int_equal(mw_storage_put_if_absent(e->st, &req, "k", buf, 1001, on_done), -EFBIG);
  assert_int_equal(mw_storage_put(e->st, &req, "k", buf, 1001, on_done), -EFBIG);
  assert_int_equal(s_pia(e, "k", buf, 1000), 0);
  /* a bigger object placed by someone else cannot be read whole, only by range */
  char *path = tu_strf("%s/big", e->root);
  assert_int_equal(tu_write_file(path, buf, 2000), 0);
  free(path);
  assert_int_equal(s_get(e, "big", 0, UINT64_MAX, NULL, NULL, NULL), -EFBIG);
  uint8_t *got;
  size_t gl;
  assert_int_equal(s_get(e, "big", 500, 1000, &got, &gl, NULL), 0);
  assert_int_equal(gl, 1000);
  free(got);
  /* 40 submissions with max_inflight 2: 2 run, 38 queue, all finish */
  enum { N = 40 };
  mw_storage_req_t reqs[N];
  lim_t l = {&e->loop, e->st, 0, 0, 0};
  for (int i = 0; i < N; i++) {
    mw_storage_req_init(&reqs[i]);
    reqs[i].data = &l;
    char key[32];
    snprintf(key, sizeof key, "q/%d", i);
    assert_int_equal(mw_storage_put_if_absent(e->st, &reqs[i], key, buf, 100, lim_cb), 0);
  }
  assert_int_equal(mw_storage_inflight(e->st), 2);
  assert_int_equal(mw_storage_queued(e->st), N - 2);
  assert_int_equal(l.done, 0);
  while (l.done < N) uv_run(&e->loop, UV_RUN_ONCE);
  assert_int_equal(l.fails, 0);
  assert_true(l.max_seen <= 2);
  assert_int_equal(mw_storage_inflight(e->st), 0);
  assert_int_equal(mw_storage_queued(e->st), 0);
  env_free(e);
  tu_rmtree(root);
  free(root);
}

typedef struct order {
  int submitted;
  int cbs;
  int bad;
} order_t;

static void order_cb(mw_storage_req_t *req, int status) {
  order_t *o = req->data;
  if (!o->submitted || status != 0) o->bad++;
  o->cbs++;
}

static void test_async_and_close(void **state) {
  (void)state;
  env_t *e = env_new("close", NULL);
  enum { N = 10 };
  mw_storage_req_t reqs[N];
  order_t o = {0, 0, 0};
  for (int i = 0; i < N; i++) {
    mw_storage_req_init(&reqs[i]);
    reqs[i].data = &o;
    char key[32];
    snprintf(key, sizeof key, "c/%d", i);
    o.submitted = 0;
    assert_int_equal(mw_storage_put_if_absent(e->st, &reqs[i], key, "x", 1, order_cb), 0);
    o.submitted = 1; /* a callback inside the call would see 0 */
  }
  int closed = 0;
  mw_storage_close(e->st, on_closed, &closed);
  mw_storage_req_t late;
  mw_storage_req_init(&late);
  assert_int_equal(mw_storage_head(e->st, &late, "c/1", on_done), -ESHUTDOWN);
  while (!closed) {
    uv_run(&e->loop, UV_RUN_ONCE);
    if (!closed) assert_true(o.cbs <= N);
  }
  assert_int_equal(o.cbs, N); /* drained before the close callback */
  assert_int_equal(o.bad, 0);
  e->st = NULL;
  char **names;
  char *dir = tu_strf("%s/c", e->root);
  assert_int_equal(tu_list_dir(dir, NULL, &names), N);
  tu_free_names(names, N);
  free(dir);
  env_free(e);
}

/* ---- races ---- */

typedef struct racer {
  int status;
  uint8_t *payload;
  size_t len;
} racer_t;

static void race_cb(mw_storage_req_t *req, int status) {
  racer_t *r = req->data;
  r->status = status;
}

static void check_winner(env_t *e, const char *key, racer_t *rs, int n) {
  int wins = 0, winner = -1;
  for (int i = 0; i < n; i++) {
    if (rs[i].status == 0) wins++, winner = i;
    else assert_int_equal(rs[i].status, -EEXIST);
  }
  assert_int_equal(wins, 1);
  uint8_t *got;
  size_t gl;
  assert_int_equal(s_get(e, key, 0, UINT64_MAX, &got, &gl, NULL), 0);
  assert_int_equal(gl, rs[winner].len);
  assert_memory_equal(got, rs[winner].payload, gl);
  free(got);
}

static void test_race_one_loop(void **state) {
  (void)state;
  env_t *e = env_new("race1", NULL);
  enum { ROUNDS = 200, W = 8 };
  for (int round = 0; round < ROUNDS; round++) {
    mw_storage_req_t reqs[W];
    racer_t rs[W];
    char key[64];
    snprintf(key, sizeof key, "race/%d/obj", round);
    for (int i = 0; i < W; i++) {
      rs[i].status = 1;
      rs[i].len = 100 + (size_t)(i * 997 + round * 31) % 5000;
      rs[i].payload = make_payload((uint32_t)(round * W + i), rs[i].len);
      mw_storage_req_init(&reqs[i]);
      reqs[i].data = &rs[i];
      assert_int_equal(
          mw_storage_put_if_absent(e->st, &reqs[i], key, rs[i].payload, rs[i].len, race_cb), 0);
    }
    while (mw_storage_inflight(e->st) || mw_storage_queued(e->st)) uv_run(&e->loop, UV_RUN_ONCE);
    check_winner(e, key, rs, W);
    for (int i = 0; i < W; i++) free(rs[i].payload);
  }
  assert_int_equal(count_tmp(e->root), 0);
  env_free(e);
}

enum { T_ROUNDS = 200, T_PER = 4 };

typedef struct tracer {
  const char *root;
  pthread_barrier_t *bar;
  int id;
  racer_t rs[T_ROUNDS][T_PER];
} tracer_t;

static void *race_thread(void *arg) {
  tracer_t *t = arg;
  uv_loop_t loop;
  uv_loop_init(&loop);
  mw_storage_config_t cfg = base_cfg(t->root);
  mw_storage_t *st = NULL;
  if (mw_storage_open(&loop, &cfg, &st, NULL) != 0) abort();
  for (int round = 0; round < T_ROUNDS; round++) {
    char key[64];
    snprintf(key, sizeof key, "race/%d", round);
    mw_storage_req_t reqs[T_PER];
    pthread_barrier_wait(t->bar);
    for (int i = 0; i < T_PER; i++) {
      racer_t *r = &t->rs[round][i];
      r->status = 1;
      r->len = 64 + (size_t)((t->id * 7 + i) * 131 + round) % 3000;
      r->payload = make_payload((uint32_t)(t->id << 24 | round << 8 | i), r->len);
      mw_storage_req_init(&reqs[i]);
      reqs[i].data = r;
      if (mw_storage_put_if_absent(st, &reqs[i], key, r->payload, r->len, race_cb) != 0) abort();
    }
    while (mw_storage_inflight(st) || mw_storage_queued(st)) uv_run(&loop, UV_RUN_ONCE);
  }
  int closed = 0;
  mw_storage_close(st, on_closed, &closed);
  while (!closed) uv_run(&loop, UV_RUN_ONCE);
  uv_loop_close(&loop);
  return NULL;
}

static void test_race_two_loops(void **state) {
  (void)state;
  env_t *e = env_new("race2", NULL);
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, 2);
  tracer_t *t = calloc(2, sizeof *t);
  pthread_t th[2];
  for (int i = 0; i < 2; i++) {
    t[i].root = e->root;
    t[i].bar = &bar;
    t[i].id = i + 1;
    assert_int_equal(pthread_create(&th[i], NULL, race_thread, &t[i]), 0);
  }
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  int cross = 0; /* rounds where the second loop won: both loops really race */
  for (int round = 0; round < T_ROUNDS; round++) {
    racer_t rs[2 * T_PER];
    for (int i = 0; i < T_PER; i++) rs[i] = t[0].rs[round][i], rs[T_PER + i] = t[1].rs[round][i];
    char key[64];
    snprintf(key, sizeof key, "race/%d", round);
    check_winner(e, key, rs, 2 * T_PER);
    for (int i = T_PER; i < 2 * T_PER; i++) cross += rs[i].status == 0;
    for (int i = 0; i < 2 * T_PER; i++) free(rs[i].payload);
  }
  printf("# two loops: second loop won %d of %d rounds\n", cross, T_ROUNDS);
  free(t);
  pthread_barrier_destroy(&bar);
  env_free(e);
}

enum { P_KIDS = 3, P_ROUNDS = 400, P_BATCH = 16 };

static uint32_t proc_seed(int kid, int round) { return (uint32_t)(kid << 20 | round); }
static size_t proc_len(int kid, int round) { return 40 + (size_t)(kid * 1009 + round * 37) % 4000; }

static void proc_child(const char *root, int go_fd, int out_fd, int kid) {
  char c;
  if (read(go_fd, &c, 1) != 1) _exit(2);
  uv_loop_t loop;
  uv_loop_init(&loop);
  mw_storage_config_t cfg = base_cfg(root);
  mw_storage_t *st = NULL;
  if (mw_storage_open(&loop, &cfg, &st, NULL) != 0) _exit(3);
  int8_t results[P_ROUNDS];
  for (int base = 0; base < P_ROUNDS; base += P_BATCH) {
    mw_storage_req_t reqs[P_BATCH];
    racer_t rs[P_BATCH];
    int n = P_ROUNDS - base < P_BATCH ? P_ROUNDS - base : P_BATCH;
    for (int i = 0; i < n; i++) {
      char key[64];
      snprintf(key, sizeof key, "proc/%d", base + i);
      rs[i].status = 1;
      rs[i].len = proc_len(kid, base + i);
      rs[i].payload = make_payload(proc_seed(kid, base + i), rs[i].len);
      mw_storage_req_init(&reqs[i]);
      reqs[i].data = &rs[i];
      if (mw_storage_put_if_absent(st, &reqs[i], key, rs[i].payload, rs[i].len, race_cb)) _exit(4);
    }
    while (mw_storage_inflight(st) || mw_storage_queued(st)) uv_run(&loop, UV_RUN_ONCE);
    for (int i = 0; i < n; i++) {
      results[base + i] = (int8_t)rs[i].status;
      free(rs[i].payload);
    }
  }
  if (write(out_fd, results, sizeof results) != (ssize_t)sizeof results) _exit(5);
  int closed = 0;
  mw_storage_close(st, on_closed, &closed);
  while (!closed) uv_run(&loop, UV_RUN_ONCE);
  _exit(0);
}

static void test_race_processes(void **state) {
  (void)state;
  env_t *e = env_new("racep", NULL);
  int go[2], out[P_KIDS][2];
  pid_t pids[P_KIDS];
  assert_int_equal(pipe(go), 0);
  for (int k = 0; k < P_KIDS; k++) {
    assert_int_equal(pipe(out[k]), 0);
    pids[k] = fork();
    assert_true(pids[k] >= 0);
    if (pids[k] == 0) proc_child(e->root, go[0], out[k][1], k + 1);
    close(out[k][1]);
  }
  char go_bytes[P_KIDS] = {0};
  assert_int_equal(write(go[1], go_bytes, P_KIDS), P_KIDS); /* start together */
  int8_t res[P_KIDS][P_ROUNDS];
  for (int k = 0; k < P_KIDS; k++) {
    size_t got = 0;
    while (got < P_ROUNDS) {
      ssize_t r = read(out[k][0], (char *)res[k] + got, P_ROUNDS - got);
      assert_true(r > 0);
      got += (size_t)r;
    }
    int ws;
    assert_int_equal(waitpid(pids[k], &ws, 0), pids[k]);
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    close(out[k][0]);
  }
  int wins[P_KIDS] = {0};
  for (int round = 0; round < P_ROUNDS; round++) {
    int winner = -1, nwin = 0;
    for (int k = 0; k < P_KIDS; k++) {
      if (res[k][round] == 0) winner = k, nwin++;
      else assert_int_equal(res[k][round], -EEXIST);
    }
    assert_int_equal(nwin, 1);
    wins[winner]++;
    char key[64];
    snprintf(key, sizeof key, "proc/%d", round);
    uint8_t *got;
    size_t gl;
    assert_int_equal(s_get(e, key, 0, UINT64_MAX, &got, &gl, NULL), 0);
    uint32_t seed;
    assert_true(payload_ok(got, gl, &seed));
    assert_int_equal(seed, proc_seed(winner + 1, round));
    assert_int_equal(gl, proc_len(winner + 1, round));
    free(got);
  }
  printf("# processes: wins %d/%d/%d\n", wins[0], wins[1], wins[2]);
  close(go[0]);
  close(go[1]);
  assert_int_equal(count_tmp(e->root), 0);
  env_free(e);
}

/* ---- crash consistency ---- */

enum { C_MAX = 4000, C_PUTKEYS = 8 };

typedef struct crasher {
  int fd;
  uint32_t next;
  uint8_t *bufs[32];
} crasher_t;

static void crash_submit(mw_storage_t *st, mw_storage_req_t *req, uint32_t i, crasher_t *c);

static void crash_cb(mw_storage_req_t *req, int status) {
  crasher_t *c = req->data;
  uint32_t i = (uint32_t)req->size; /* the object index, stashed at submit */
  if (status != 0) _exit(10);
  if (write(c->fd, &i, sizeof i) != sizeof i) _exit(11);
  free(c->bufs[i % 32]);
  c->bufs[i % 32] = NULL;
  if (c->next < C_MAX) crash_submit(req->priv.st, req, c->next++, c);
}

static void crash_submit(mw_storage_t *st, mw_storage_req_t *req, uint32_t i, crasher_t *c) {
  size_t len = 12 + (size_t)(i * 2654435761u) % (96 << 10);
  uint8_t *p = make_payload(i, len);
  c->bufs[i % 32] = p;
  char key[64];
  int rc;
  mw_storage_req_init(req);
  req->data = c;
  if (i % 3 == 2) {
    snprintf(key, sizeof key, "crash/p/%u", i % C_PUTKEYS);
    rc = mw_storage_put(st, req, key, p, len, crash_cb);
  } else {
    snprintf(key, sizeof key, "crash/o/%u", i);
    rc = mw_storage_put_if_absent(st, req, key, p, len, crash_cb);
  }
  if (rc != 0) _exit(12);
  req->size = i; /* overwritten only by get/head */
}

static void crash_child(const char *root, int fd) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  mw_storage_config_t cfg = base_cfg(root);
  cfg.max_inflight = 32;
  mw_storage_t *st = NULL;
  if (mw_storage_open(&loop, &cfg, &st, NULL) != 0) _exit(3);
  static mw_storage_req_t reqs[16];
  static crasher_t c;
  c.fd = fd;
  for (c.next = 0; c.next < 16; c.next++) crash_submit(st, &reqs[c.next], c.next, &c);
  uv_run(&loop, UV_RUN_DEFAULT);
  _exit(0);
}

static void test_crash_sigkill(void **state) {
  (void)state;
  env_t *e = env_new("crash", NULL);
  srand((unsigned)getpid());
  uint32_t total_reported = 0;
  for (int iter = 0; iter < 4; iter++) {
    char *root = tu_strf("%s/run%d", e->root, iter);
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      close(pfd[0]);
      crash_child(root, pfd[1]);
    }
    close(pfd[1]);
    static uint8_t reported[C_MAX];
    memset(reported, 0, sizeof reported);
    uint32_t idx, nrep = 0;
    /* handshake: the first completion proves it is writing; then wait for a
     * random number more before the kill */
    int more = 1 + rand() % 60;
    while (more-- > 0 && read(pfd[0], &idx, sizeof idx) == sizeof idx) {
      assert_true(idx < C_MAX);
      reported[idx] = 1;
      nrep++;
    }
    kill(pid, SIGKILL);
    int ws;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    assert_true(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
    while (read(pfd[0], &idx, sizeof idx) == sizeof idx) {
      reported[idx] = 1;
      nrep++;
    }
    close(pfd[0]);
    total_reported += nrep;
    /* every visible object verifies */
    env_t v = {root, {0}, NULL};
    uv_loop_init(&v.loop);
    mw_storage_config_t cfg = base_cfg(root);
    v.st = open_cfg(&v.loop, &cfg);
    int st;
    char *all = s_list(&v, "crash/", &st);
    assert_int_equal(st, 0);
    size_t nobj = 0;
    for (char *k = strtok(all, "\n"); k; k = strtok(NULL, "\n")) {
      uint8_t *got;
      size_t gl;
      assert_int_equal(s_get(&v, k, 0, UINT64_MAX, &got, &gl, NULL), 0);
      if (!payload_ok(got, gl, NULL)) fail_msg("partial or corrupt object %s (%zu bytes)", k, gl);
      free(got);
      nobj++;
    }
    free(all);
    /* every reported completion is there, intact, with its own content */
    for (uint32_t i = 0; i < C_MAX; i++) {
      if (!reported[i] || i % 3 == 2) continue;
      char key[64];
      snprintf(key, sizeof key, "crash/o/%u", i);
      uint8_t *got;
      size_t gl;
      uint32_t seed;
      assert_int_equal(s_get(&v, key, 0, UINT64_MAX, &got, &gl, NULL), 0);
      assert_true(payload_ok(got, gl, &seed));
      assert_int_equal(seed, i);
      free(got);
    }
    for (uint32_t k = 0; k < C_PUTKEYS; k++) { /* a reported put's key exists */
      bool any = false;
      for (uint32_t i = 0; i < C_MAX; i++) any |= reported[i] && i % 3 == 2 && i % C_PUTKEYS == k;
      char key[64];
      snprintf(key, sizeof key, "crash/p/%u", k);
      if (any) assert_int_equal(s_head(&v, key, NULL), 0);
    }
    close_st(&v.loop, v.st);
    uv_loop_close(&v.loop);
    printf("# crash %d: %u completions reported, %zu objects verified, %zu temps left\n",
                  iter, nrep, nobj, count_tmp(root));
    free(root);
  }
  assert_true(total_reported >= 4);
  env_free(e);
}

/* ---- faults ---- */

static void test_rlimit_fsize(void **state) {
  (void)state;
  env_t *e = env_new("fsize", NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {64 << 10, 64 << 10};
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(20);
    env_t c = {e->root, {0}, NULL};
    uv_loop_init(&c.loop);
    mw_storage_config_t cfg = base_cfg(e->root);
    if (mw_storage_open(&c.loop, &cfg, &c.st, NULL) != 0) _exit(21);
    size_t n = 1 << 20;
    uint8_t *p = make_payload(1, n);
    int rc = s_pia(&c, "big/x", p, n);
    if (rc != -EFBIG) {
      fprintf(stderr, "pia under RLIMIT_FSIZE: %d\n", rc);
      _exit(22);
    }
    rc = s_put(&c, "big/y", p, n);
    if (rc != -EFBIG) _exit(23);
    if (s_pia(&c, "big/small", p, 1000) != 0) _exit(24);
    _exit(0);
  }
  int ws;
  assert_int_equal(waitpid(pid, &ws, 0), pid);
  assert_true(WIFEXITED(ws));
  assert_int_equal(WEXITSTATUS(ws), 0);
  assert_int_equal(s_head(e, "big/x", NULL), -ENOENT);
  assert_int_equal(s_head(e, "big/y", NULL), -ENOENT);
  assert_int_equal(s_head(e, "big/small", NULL), 0);
  assert_int_equal(count_tmp(e->root), 0);
  env_free(e);
}

static void test_tmpfs_enospc(void **state) {
  (void)state;
  char *mnt = tu_mkdtemp("tmpfs");
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    if (unshare(CLONE_NEWNS) != 0) _exit(77);
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) _exit(77);
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=1m") != 0) _exit(77);
    env_t c = {mnt, {0}, NULL};
    uv_loop_init(&c.loop);
    mw_storage_config_t cfg = base_cfg(mnt);
    if (mw_storage_open(&c.loop, &cfg, &c.st, NULL) != 0) _exit(30);
    size_t n = 150 << 10;
    int i, rc = 0;
    for (i = 0; i < 20 && rc == 0; i++) {
      uint8_t *p = make_payload((uint32_t)i, n);
      char key[32];
      snprintf(key, sizeof key, "fill/%d", i);
      rc = i % 2 ? s_put(&c, key, p, n) : s_pia(&c, key, p, n);
      free(p);
    }
    if (rc != -ENOSPC) _exit(31);
    char key[32];
    snprintf(key, sizeof key, "fill/%d", i - 1);
    if (s_head(&c, key, NULL) != -ENOENT) _exit(32); /* nothing visible */
    if (count_tmp(mnt) != 0) _exit(33);              /* no temp left */
    for (int j = 0; j < i - 1; j++) {                 /* the earlier ones intact */
      snprintf(key, sizeof key, "fill/%d", j);
      uint8_t *got;
      size_t gl;
      uint32_t seed;
      if (s_get(&c, key, 0, UINT64_MAX, &got, &gl, NULL) != 0) _exit(34);
      if (!payload_ok(got, gl, &seed) || seed != (uint32_t)j) _exit(35);
      free(got);
    }
    /* space freed by a delete is usable again */
    snprintf(key, sizeof key, "fill/%d", 0);
    if (s_delete(&c, key) != 0) _exit(36);
    if (s_pia(&c, "after", "ok", 2) != 0) _exit(37);
    _exit(0);
  }
  int ws;
  assert_int_equal(waitpid(pid, &ws, 0), pid);
  tu_rmtree(mnt);
  free(mnt);
  assert_true(WIFEXITED(ws));
  if (WEXITSTATUS(ws) == 77) skip(); /* no mount namespace here: fault tests cover ENOSPC */
  assert_int_equal(WEXITSTATUS(ws), 0);
}

static env_t *env_fault(const char *tag, const mw_storage_fault_t *f) {
  char *root = tu_mkdtemp(tag);
  mw_storage_config_t cfg = base_cfg(root);
  cfg.fault = f;
  env_t *e = env_new(tag, &cfg);
  tu_rmtree(root);
  free(root);
  return e;
}

static void test_fault_nth(void **state) {
  (void)state;
  mw_storage_fault_t f = {.fail_nth = 3, .fail_errno = EIO};
  env_t *e = env_fault("nth", &f);
  assert_int_equal(s_pia(e, "n/1", "a", 1), 0);
  assert_int_equal(s_pia(e, "n/2", "b", 1), 0);
  assert_int_equal(s_pia(e, "n/3", "c", 1), -EIO);
  assert_int_equal(s_pia(e, "n/4", "d", 1), 0);
  assert_int_equal(s_head(e, "n/3", NULL), -ENOENT);
  assert_int_equal(s_pia(e, "n/3", "c", 1), 0); /* a retry works */
  assert_int_equal(count_tmp(e->root), 0);
  env_free(e);
}

static void test_fault_enospc_write(void **state) {
  (void)state;
  mw_storage_fault_t f = {.fail_prefix = "full/", .fail_errno = ENOSPC,
                          .fail_steps = MW_STEP_BIT(MW_STEP_WRITE)};
  env_t *e = env_fault("nospc", &f);
  uint8_t *p = make_payload(3, 50000);
  assert_int_equal(s_pia(e, "full/a", p, 50000), -ENOSPC);
  assert_int_equal(s_put(e, "full/b", p, 50000), -ENOSPC);
  assert_int_equal(s_head(e, "full/a", NULL), -ENOENT);
  assert_int_equal(s_head(e, "full/b", NULL), -ENOENT);
  assert_int_equal(s_pia(e, "ok/a", p, 50000), 0);
  assert_int_equal(count_tmp(e->root), 0);
  /* EIO on read */
  free(p);
  env_free(e);
  mw_storage_fault_t g = {.fail_prefix = "r", .fail_errno = EIO,
                          .fail_steps = MW_STEP_BIT(MW_STEP_READ)};
  e = env_fault("rdeio", &g);
  assert_int_equal(s_pia(e, "rk", "abc", 3), 0);
  int fds = count_fds();
  assert_int_equal(s_get(e, "rk", 0, UINT64_MAX, NULL, NULL, NULL), -EIO);
  assert_int_equal(count_fds(), fds);
  env_free(e);
}

static void test_fault_fsync_once(void **state) {
  (void)state;
  mw_storage_fault_t f = {.fail_fsync_once = true};
  env_t *e = env_fault("fsync", &f);
  assert_int_equal(s_pia(e, "f/a", "abc", 3), -EIO);
  assert_int_equal(s_head(e, "f/a", NULL), -ENOENT);
  assert_int_equal(count_tmp(e->root), 0);
  assert_int_equal(s_pia(e, "f/a", "abc", 3), 0);
  env_free(e);
}

/* Fail each step of put_if_absent and put in turn; check what stays visible. */
static void test_fault_each_step(void **state) {
  (void)state;
  const mw_storage_step_t steps[] = {MW_STEP_OPEN, MW_STEP_MKDIR, MW_STEP_WRITE,
                                     MW_STEP_FSYNC, MW_STEP_CLOSE, MW_STEP_LINK,
                                     MW_STEP_RENAME, MW_STEP_DIROPEN, MW_STEP_DIRSYNC,
                                     MW_STEP_DIRCLOSE, MW_STEP_UNLINK};
  for (size_t i = 0; i < sizeof steps / sizeof *steps; i++) {
    for (int put = 0; put < 2; put++) {
      mw_storage_step_t s = steps[i];
      mw_storage_fault_t f = {.fail_prefix = "s/", .fail_errno = EIO,
                              .fail_steps = MW_STEP_BIT(s)};
      env_t *e = env_fault("step", &f);
      int fds = count_fds();
      int rc = put ? s_put(e, "s/d/k", "data", 4) : s_pia(e, "s/d/k", "data", 4);
      bool applies = !(put && (s == MW_STEP_LINK || s == MW_STEP_UNLINK)) &&
                     !(!put && s == MW_STEP_RENAME);
      bool visible = s == MW_STEP_DIROPEN || s == MW_STEP_DIRSYNC || s == MW_STEP_DIRCLOSE ||
                     (!put && s == MW_STEP_UNLINK) || !applies;
      int want = !applies || (!put && s == MW_STEP_UNLINK) ? 0 : -EIO;
      if (rc != want)
        fail_msg("%s failing step %d: status %d, want %d", put ? "put" : "pia", s, rc, want);
      assert_int_equal(s_head(e, "s/d/k", NULL), visible ? 0 : -ENOENT);
      if (visible) {
        uint8_t *got;
        size_t gl;
        assert_int_equal(s_get(e, "s/d/k", 0, UINT64_MAX, &got, &gl, NULL), 0);
        assert_int_equal(gl, 4);
        assert_memory_equal(got, "data", 4);
        free(got);
      }
      /* only a failed temp unlink after success may leave a (hidden) temp */
      assert_int_equal(count_tmp(e->root), !put && s == MW_STEP_UNLINK ? 1 : 0);
      assert_int_equal(count_fds(), fds);
      env_free(e);
    }
  }
}

typedef struct seq {
  pthread_mutex_t mu;
  int n;
  int steps[64];
} seq_t;

static void on_step(void *ctx, const mw_storage_req_t *req, mw_storage_step_t step) {
  seq_t *s = ctx;
  (void)req;
  pthread_mutex_lock(&s->mu);
  if (s->n < 64) s->steps[s->n++] = step;
  pthread_mutex_unlock(&s->mu);
}

static void expect_seq(seq_t *s, const char *what, const int *want, int n) {
  bool same = s->n == n && memcmp(s->steps, want, (size_t)n * sizeof *want) == 0;
  if (!same) {
    char got[512] = "", exp[512] = "";
    for (int i = 0; i < s->n; i++) sprintf(got + strlen(got), "%d ", s->steps[i]);
    for (int i = 0; i < n; i++) sprintf(exp + strlen(exp), "%d ", want[i]);
    fail_msg("%s: steps [%s], want [%s]", what, got, exp);
  }
  s->n = 0;
}

static void test_step_sequence(void **state) {
  (void)state;
  static seq_t s = {PTHREAD_MUTEX_INITIALIZER, 0, {0}};
  mw_storage_fault_t f = {.on_step = on_step, .on_step_ctx = &s};
  env_t *e = env_fault("seq", &f);
  enum { O = MW_STEP_OPEN, M = MW_STEP_MKDIR, W = MW_STEP_WRITE, F = MW_STEP_FSYNC,
         C = MW_STEP_CLOSE, L = MW_STEP_LINK, R = MW_STEP_RENAME, DO = MW_STEP_DIROPEN,
         DS = MW_STEP_DIRSYNC, DC = MW_STEP_DIRCLOSE, U = MW_STEP_UNLINK, ST = MW_STEP_STAT,
         RD = MW_STEP_READ };
  /* first write into a new directory: mkdir its parents, fsync all ancestors */
  assert_int_equal(s_pia(e, "a/b/k1", "x", 1), 0);
  const int first[] = {O, M, M, O, W, F, C, L, DO, DS, DC, DO, DS, DC, DO, DS, DC, U};
  expect_seq(&s, "first put_if_absent", first, sizeof first / sizeof *first);
  /* later writes into the same directory: only that directory is fsynced */
  assert_int_equal(s_pia(e, "a/b/k2", "x", 1), 0);
  const int next[] = {O, W, F, C, L, DO, DS, DC, U};
  expect_seq(&s, "put_if_absent", next, sizeof next / sizeof *next);
  assert_int_equal(s_pia(e, "a/b/k2", "y", 1), -EEXIST);
  const int lost[] = {O, W, F, C, L, U};
  expect_seq(&s, "lost put_if_absent", lost, sizeof lost / sizeof *lost);
  assert_int_equal(s_put(e, "a/b/k2", "z", 1), 0);
  const int put[] = {O, W, F, C, R, DO, DS, DC};
  expect_seq(&s, "put", put, sizeof put / sizeof *put);
  assert_int_equal(s_pia(e, "a/b/e", "", 0), 0);
  const int empty[] = {O, F, C, L, DO, DS, DC, U};
  expect_seq(&s, "empty put_if_absent", empty, sizeof empty / sizeof *empty);
  assert_int_equal(s_get(e, "a/b/k2", 0, UINT64_MAX, NULL, NULL, NULL), 0);
  const int get[] = {O, ST, RD, C};
  expect_seq(&s, "get", get, sizeof get / sizeof *get);
  assert_int_equal(s_head(e, "a/b/k2", NULL), 0);
  const int head[] = {ST};
  expect_seq(&s, "head", head, 1);
  assert_int_equal(s_delete(e, "a/b/k2"), 0);
  const int del[] = {U};
  expect_seq(&s, "delete", del, 1);
  env_free(e);
  /* without fsync (tests, benchmarks) the fsync steps disappear */
  char *root = tu_mkdtemp("seq2");
  mw_storage_config_t cfg = base_cfg(root);
  cfg.fault = &f;
  cfg.fsync = false;
  e = env_new("seq2", &cfg);
  assert_int_equal(s_pia(e, "k", "x", 1), 0);
  const int nosync[] = {O, W, C, L, U};
  expect_seq(&s, "put_if_absent without fsync", nosync, sizeof nosync / sizeof *nosync);
  env_free(e);
  tu_rmtree(root);
  free(root);
}

static void test_fault_delay(void **state) {
  (void)state;
  mw_storage_fault_t f = {.delay_ms = 40};
  env_t *e = env_fault("delay", &f);
  uv_update_time(&e->loop);
  uint64_t t0 = uv_now(&e->loop);
  assert_int_equal(s_pia(e, "d", "x", 1), 0);
  uv_update_time(&e->loop);
  assert_true(uv_now(&e->loop) - t0 >= 40);
  env_free(e);
}


static void test_sweep_tmp(void **state) {
  (void)state;
  env_t *e = env_new("sweep", NULL);
  assert_int_equal(s_pia(e, "w/a/obj", "x", 1), 0);
  const char *names[] = {"w/a/.tmp-00000000000000000000000000000001",
                         "w/.tmp-00000000000000000000000000000002",
                         "w/a/.tmp-00000000000000000000000000000003", "other/.tmp-4"};
  for (int i = 0; i < 4; i++) {
    char *path = tu_strf("%s/%s", e->root, names[i]);
    char *dir = strdup(path);
    *strrchr(dir, '/') = '\0';
    mkdir(dir, 0755);
    assert_int_equal(tu_write_file(path, "t", 1), 0);
    if (i != 2) { /* all but one are two hours old */
      struct timespec ts[2];
      clock_gettime(CLOCK_REALTIME, &ts[0]);
      ts[0].tv_sec -= 7200;
      ts[1] = ts[0];
      assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
    }
    free(dir);
    free(path);
  }
  mw_storage_req_t req;
  mw_storage_req_init(&req);
  res_t r = {0};
  req.data = &r;
  assert_int_equal(wait_req(&e->loop, &req, &r, mw_storage_sweep_tmp(e->st, &req, "w/", 3600, on_done)), 0);
  assert_int_equal(req.nkeys, 2); /* the old two under w/, not the fresh one, not other/ */
  assert_int_equal(count_tmp(e->root), 2);
  assert_int_equal(s_head(e, "w/a/obj", NULL), 0);
  mw_storage_req_cleanup(&req);
  env_free(e);
}

/* A crash (here: _exit) right before each step of put_if_absent / put
 * leaves the key absent, or with its old content, or with the whole new
 * content — never partial. */
typedef struct killat {
  int countdown;
} killat_t;

static void kill_step(void *ctx, const mw_storage_req_t *req, mw_storage_step_t step) {
  killat_t *k = ctx;
  (void)req;
  (void)step;
  if (--k->countdown == 0) _exit(0);
}

static void test_crash_at_each_step(void **state) {
  (void)state;
  uint8_t *oldp = make_payload(1, 30000), *newp = make_payload(2, 70000);
  int absent = 0, whole = 0;
  for (int put = 0; put < 2; put++) {
    for (int k = 1; k <= 20; k++) {
      env_t *e = env_new("killat", NULL);
      if (put) assert_int_equal(s_pia(e, "k/d/obj", oldp, 30000), 0);
      pid_t pid = fork();
      assert_true(pid >= 0);
      if (pid == 0) {
        static killat_t ka;
        ka.countdown = k;
        mw_storage_fault_t f = {.on_step = kill_step, .on_step_ctx = &ka};
        mw_storage_config_t cfg = base_cfg(e->root);
        cfg.fault = &f;
        env_t c = {e->root, {0}, NULL};
        uv_loop_init(&c.loop);
        if (mw_storage_open(&c.loop, &cfg, &c.st, NULL) != 0) _exit(3);
        int rc = put ? s_put(&c, "k/d/obj", newp, 70000) : s_pia(&c, "k/d/obj", newp, 70000);
        _exit(rc == 0 ? 1 : 2); /* ran to the end without being killed */
      }
      int ws;
      assert_int_equal(waitpid(pid, &ws, 0), pid);
      assert_true(WIFEXITED(ws));
      uint8_t *got;
      size_t gl;
      int rc = s_get(e, "k/d/obj", 0, UINT64_MAX, &got, &gl, NULL);
      if (rc == -ENOENT) {
        assert_false(put); /* put never removes the old object */
        absent++;
      } else {
        assert_int_equal(rc, 0);
        uint32_t seed;
        assert_true(payload_ok(got, gl, &seed));
        assert_true(seed == 2 || (put && seed == 1));
        whole++;
        free(got);
      }
      bool finished = WEXITSTATUS(ws) == 1;
      env_free(e);
      if (finished) break; /* k is past the last step */
    }
  }
  assert_true(absent > 0 && whole > 0);
  free(oldp);
  free(newp);
}

/* Readers racing replacing writers only ever see whole objects. */
typedef struct rr {
  int gets_ok;
  int gets_bad;
  int puts_done;
} rr_t;

static void rr_get_cb(mw_storage_req_t *req, int status) {
  rr_t *x = req->data;
  if (status == 0 && payload_ok(req->buf.data, req->buf.len, NULL)) x->gets_ok++;
  else x->gets_bad++;
  mw_storage_req_cleanup(req);
}

static void rr_put_cb(mw_storage_req_t *req, int status) {
  rr_t *x = req->data;
  if (status != 0) x->gets_bad++;
  x->puts_done++;
}

static void test_put_replace_readers(void **state) {
  (void)state;
  env_t *e = env_new("replace", NULL);
  uint8_t *first = make_payload(100, 1000);
  assert_int_equal(s_pia(e, "r/obj", first, 1000), 0);
  free(first);
  enum { ROUNDS = 30, K = 6 };
  rr_t x = {0, 0, 0};
  for (int round = 0; round < ROUNDS; round++) {
    mw_storage_req_t puts[K], gets[K];
    uint8_t *pay[K];
    for (int i = 0; i < K; i++) {
      size_t len = 1000 + (size_t)((round * K + i) * 7919) % 200000;
      pay[i] = make_payload((uint32_t)(round * K + i), len);
      mw_storage_req_init(&puts[i]);
      mw_storage_req_init(&gets[i]);
      puts[i].data = gets[i].data = &x;
      assert_int_equal(mw_storage_put(e->st, &puts[i], "r/obj", pay[i], len, rr_put_cb), 0);
      assert_int_equal(mw_storage_get(e->st, &gets[i], "r/obj", 0, UINT64_MAX, rr_get_cb), 0);
    }
    while (mw_storage_inflight(e->st) || mw_storage_queued(e->st)) uv_run(&e->loop, UV_RUN_ONCE);
    for (int i = 0; i < K; i++) free(pay[i]);
  }
  assert_int_equal(x.gets_bad, 0);
  assert_int_equal(x.gets_ok, ROUNDS * K);
  assert_int_equal(x.puts_done, ROUNDS * K);
  assert_int_equal(count_tmp(e->root), 0);
  env_free(e);
}

static void test_fallback_and_config(void **state) {
  (void)state;
  char *root = tu_mkdtemp("fb");
  uv_loop_t loop;
  uv_loop_init(&loop);
  mw_storage_config_t cfg;
  mw_storage_config_init(&cfg, root);
  cfg.test_uring_refuse = -ENOSYS; /* as seccomp or an old kernel would */
  mw_storage_t *st = NULL;
  assert_int_equal(mw_storage_open(&loop, &cfg, &st, NULL), 0);
  assert_string_equal(mw_storage_backend_name(st), "threads");
  close_st(&loop, st);
  cfg.backend = MW_STORAGE_URING; /* explicit: refusal is an error */
  assert_int_equal(mw_storage_open(&loop, &cfg, &st, NULL), -ENOSYS);
  cfg.test_uring_refuse = 0;
  mw_storage_fault_t pl = {.power_loss = true};
  cfg.fault = &pl;
  cfg.backend = MW_STORAGE_THREADS;
  assert_int_equal(mw_storage_open(&loop, &cfg, &st, NULL), -ENOTSUP);
  mw_storage_backend_t b;
  assert_int_equal(mw_storage_backend_parse("threads", &b), 0);
  assert_int_equal(b, MW_STORAGE_THREADS);
  assert_int_equal(mw_storage_backend_parse("uring", &b), 0);
  assert_int_equal(b, MW_STORAGE_URING);
  assert_int_equal(mw_storage_backend_parse("nope", &b), -EINVAL);
  assert_int_equal(uv_loop_close(&loop), 0);
  tu_rmtree(root);
  free(root);
}

int main(void) {
  const char *b = getenv("MW_STORAGE_BACKEND");
  if (b != NULL && mw_storage_backend_parse(b, &g_backend) != 0) {
    fprintf(stderr, "MW_STORAGE_BACKEND=%s: want uring or threads\n", b);
    return 1;
  }
  if (g_backend == MW_STORAGE_AUTO) g_backend = MW_STORAGE_URING;
  if (g_backend == MW_STORAGE_URING) { /* io_uring refused here: skip honestly */
    char *root = tu_mkdtemp("probe");
    uv_loop_t loop;
    uv_loop_init(&loop);
    mw_storage_config_t cfg;
    mw_storage_config_init(&cfg, root);
    cfg.backend = MW_STORAGE_URING;
    mw_storage_t *st = NULL;
    int rc = mw_storage_open(&loop, &cfg, &st, NULL);
    if (rc != 0) {
      fprintf(stderr, "io_uring unavailable (%d): skipping the io_uring run\n", rc);
      return 77;
    }
    close_st(&loop, st);
    uv_loop_close(&loop);
    tu_rmtree(root);
    free(root);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_roundtrip),
      cmocka_unit_test(test_list_delete),
      cmocka_unit_test(test_key_validation),
      cmocka_unit_test(test_limits),
      cmocka_unit_test(test_async_and_close),
      cmocka_unit_test(test_race_one_loop),
      cmocka_unit_test(test_race_two_loops),
      cmocka_unit_test(test_race_processes),
      cmocka_unit_test(test_crash_sigkill),
      cmocka_unit_test(test_rlimit_fsize),
      cmocka_unit_test(test_tmpfs_enospc),
      cmocka_unit_test(test_fault_nth),
      cmocka_unit_test(test_fault_enospc_write),
      cmocka_unit_test(test_fault_fsync_once),
      cmocka_unit_test(test_fault_each_step),
      cmocka_unit_test(test_step_sequence),
      cmocka_unit_test(test_fault_delay),
      cmocka_unit_test(test_sweep_tmp),
      cmocka_unit_test(test_crash_at_each_step),
      cmocka_unit_test(test_put_replace_readers),
      cmocka_unit_test(test_fallback_and_config),
  };
  return cmocka_run_group_tests_name(g_backend == MW_STORAGE_THREADS ? "storage-threads"
                                                                     : "storage-uring",
                                     tests, NULL, NULL);
}
