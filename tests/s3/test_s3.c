/*
 * test_s3.c — the S3 backend against a real S3 server (radosgw; run through
 * with-s3.sh, which provides MW_S3_ENDPOINT and the AWS_* variables). Each
 * test works in its own bucket "mw-s3-<pid>-<n>" (made with the curl
 * binary), so tests and runs never see each other's objects.
 *
 * What it proves:
 *   - the storage semantics on S3: put_if_absent (412 = -EEXIST, the first
 *     writer's bytes stay), put (replace), get (whole, ranges clipped at the
 *     end, an offset at/past the end), head, list (sorted, prefix-exact,
 *     across ListObjectsV2 pages), delete (idempotent), delete_prefix
 *     (DeleteObjects batches of 1 000, an XML-escaped key, counted),
 *     delete_root (-ENOTEMPTY, then 0), the blocking calls; delete_many
 *     (one DeleteObjects; a missing key deleted; per-key test faults: a
 *     transient one retried alone, a final one failing only its key);
 *   - races: 24 concurrent put_if_absent of one key from two storages:
 *     exactly one winner, its bytes;
 *   - multipart: a 12 MiB put in 5 MiB parts reads back whole; a writer
 *     killed between parts leaves an incomplete upload, which sweep_tmp
 *     aborts;
 *   - retries and idempotency (test faults at the HTTP steps): the answer
 *     of a create lost after it landed -> the retry meets 412, reads the
 *     object back, finds its own bytes and reports success; a connection
 *     dropped mid-body -> retried, the object whole; a non-transient fault
 *     fails at once; an endpoint that refuses connections fails after the
 *     retry deadline, naming the error;
 *   - errors: a wrong secret is -EACCES naming HTTP 403 and the S3 code,
 *     never the secret; a missing bucket is -ENXIO (NoSuchBucket); a whole
 *     get over max_object_bytes is -EFBIG; plain http is refused unless
 *     allowed.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cases.h"

#include "common/metrics.h"
#include "storage/fault.h"
#include "storage/storage.h"

static char g_bucket[64];
static int g_nbucket;

/* ---- buckets (curl's own SigV4) ---- */

static int curl_bucket(const char *method, const char *bucket) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "curl -s -o /dev/null -w '%%{http_code}' --aws-sigv4 'aws:amz:us-east-1:s3' "
           "--user \"$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY\" "
           "-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -X %s \"$MW_S3_ENDPOINT/%s\"",
           method, bucket);
  FILE *p = popen(cmd, "r");
  if (p == NULL) return -1;
  int code = 0;
  if (fscanf(p, "%d", &code) != 1) code = -1;
  pclose(p);
  return code;
}

static const char *new_bucket(void) {
  snprintf(g_bucket, sizeof g_bucket, "mw-s3-%d-%d", (int)getpid(), g_nbucket++);
  int code = curl_bucket("PUT", g_bucket);
  if (code != 200) fail_msg("cannot create bucket %s: HTTP %d", g_bucket, code);
  return g_bucket;
}

/* Empty the bucket (through a storage at its root) and delete it, so the
 * shared server does not fill up. */
static void drop_bucket(const char *bucket) {
  char uri[128];
  snprintf(uri, sizeof uri, "s3://%s", bucket);
  mw_storage_config_t cfg;
  mw_storage_config_init(&cfg, uri);
  mw_storage_sync_t *ss = NULL;
  assert_int_equal(mw_storage_sync_open(&cfg, &ss, NULL), 0);
  assert_true(mw_storage_sync_delete_prefix(ss, "", NULL) >= 0);
  assert_int_equal(mw_storage_sync_delete_root(ss, NULL), 0); /* aborts leftover uploads too */
  mw_storage_sync_close(ss);
  int code = curl_bucket("DELETE", bucket);
  if (code != 204) fail_msg("cannot delete bucket %s: HTTP %d", bucket, code);
}

/* ---- loop helpers ---- */

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
  uv_loop_t loop;
  mw_storage_t *st;
  char uri[256];
} env_t;

static mw_storage_config_t cfg_for(const char *uri) {
  mw_storage_config_t cfg;
  mw_storage_config_init(&cfg, uri);
  cfg.s3.retry_deadline_ms = 3000;
  return cfg;
}

static void env_open_cfg(env_t *e, const mw_storage_config_t *cfg) {
  memset(e, 0, sizeof *e);
  assert_int_equal(uv_loop_init(&e->loop), 0);
  snprintf(e->uri, sizeof e->uri, "%s", cfg->uri);
  mw_storage_config_t c = *cfg;
  c.uri = e->uri;
  mw_err_t err = {0};
  int rc = mw_storage_open(&e->loop, &c, &e->st, &err);
  if (rc != 0) fail_msg("open %s: %d %s", e->uri, rc, err.msg);
  assert_string_equal(mw_storage_backend_name(e->st), "s3");
}

static void env_open(env_t *e, const char *prefix) {
  char uri[256];
  snprintf(uri, sizeof uri, "s3://%s%s%s", new_bucket(), prefix[0] ? "/" : "", prefix);
  mw_storage_config_t cfg = cfg_for(uri);
  env_open_cfg(e, &cfg);
}

static void env_close(env_t *e) {
  int closed = 0;
  mw_storage_close(e->st, on_closed, &closed);
  while (!closed) uv_run(&e->loop, UV_RUN_ONCE);
  uv_run(&e->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&e->loop), 0);
}

static int wait_req(uv_loop_t *loop, res_t *r, int rc) {
  if (rc < 0) return rc;
  while (!r->done) uv_run(loop, UV_RUN_ONCE);
  assert_int_equal(r->done, 1);
  return r->status;
}

#define OP(e, req, r, call) \
  (mw_storage_req_init(&(req)), (r) = (res_t){0}, (req).data = &(r), wait_req(&(e)->loop, &(r), (call)))

static int s_put(env_t *e, const char *key, const void *p, size_t n, bool pia) {
  mw_storage_req_t req;
  res_t r;
  int rc = OP(e, req, r,
              pia ? mw_storage_put_if_absent(e->st, &req, key, p, n, on_done)
                  : mw_storage_put(e->st, &req, key, p, n, on_done));
  mw_storage_req_cleanup(&req);
  return rc;
}

/* get into *out (malloc'd, caller frees); returns status. */
static int s_get(env_t *e, const char *key, uint64_t off, uint64_t len, uint8_t **out, size_t *n,
                 uint64_t *size) {
  mw_storage_req_t req;
  res_t r;
  int rc = OP(e, req, r, mw_storage_get(e->st, &req, key, off, len, on_done));
  if (rc == 0) {
    *n = req.buf.len;
    *out = malloc(req.buf.len + 1);
    if (req.buf.len > 0) memcpy(*out, req.buf.data, req.buf.len);
    if (size) *size = req.size;
  }
  mw_storage_req_cleanup(&req);
  return rc;
}

static int s_head(env_t *e, const char *key, uint64_t *size) {
  mw_storage_req_t req;
  res_t r;
  int rc = OP(e, req, r, mw_storage_head(e->st, &req, key, on_done));
  if (rc == 0 && size) *size = req.size;
  mw_storage_req_cleanup(&req);
  return rc;
}

static int s_delete(env_t *e, const char *key) {
  mw_storage_req_t req;
  res_t r;
  int rc = OP(e, req, r, mw_storage_delete(e->st, &req, key, on_done));
  mw_storage_req_cleanup(&req);
  return rc;
}

/* list: "k1,k2,..." into out */
static int s_list(env_t *e, const char *prefix, char *out, size_t cap, size_t *nkeys) {
  mw_storage_req_t req;
  res_t r;
  int rc = OP(e, req, r, mw_storage_list(e->st, &req, prefix, on_done));
  out[0] = '\0';
  if (rc == 0) {
    size_t at = 0;
    for (size_t i = 0; i < req.nkeys && at < cap; i++)
      at += (size_t)snprintf(out + at, cap - at, "%s%s", i ? "," : "", req.keys[i]);
    if (nkeys) *nkeys = req.nkeys;
  }
  mw_storage_req_cleanup(&req);
  return rc;
}

static void expect_body(env_t *e, const char *key, const char *want) {
  uint8_t *b = NULL;
  size_t n = 0;
  assert_int_equal(s_get(e, key, 0, UINT64_MAX, &b, &n, NULL), 0);
  assert_int_equal(n, strlen(want));
  assert_memory_equal(b, want, n);
  free(b);
}

/* The value of one series in the default registry ("name{labels}" exactly
 * as rendered), 0 when absent. */
static uint64_t metric(const char *series) {
  mw_buf_t b = MW_BUF_INIT;
  assert_int_equal(mw_metrics_render(mw_metrics_default(), &b), 0);
  assert_int_equal(mw_buf_append(&b, "", 1), 0);
  uint64_t v = 0;
  size_t n = strlen(series);
  for (const char *l = (const char *)b.data; l != NULL && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
    if (strncmp(l, series, n) == 0 && l[n] == ' ') v = strtoull(l + n + 1, NULL, 10);
  mw_buf_free(&b);
  return v;
}
#define M_BATCH "memwald_storage_s3_deleted_objects_total{via=\"batch\"}"
#define M_SINGLE "memwald_storage_s3_deleted_objects_total{via=\"single\"}"
#define M_BATCHES "memwald_storage_s3_delete_batches_total"

/* ---- semantics ---- */

static void test_semantics(void **state) {
  (void)state;
  env_t e;
  env_open(&e, "db/t.lance");
  assert_int_equal(s_put(&e, "a/one", "first", 5, true), 0);
  assert_int_equal(s_put(&e, "a/one", "second", 6, true), -EEXIST);
  expect_body(&e, "a/one", "first");
  assert_int_equal(s_put(&e, "a/one", "replaced", 8, false), 0);
  expect_body(&e, "a/one", "replaced");
  assert_int_equal(s_put(&e, "a/empty", "", 0, true), 0);
  expect_body(&e, "a/empty", "");
  /* ranges: inside, clipped at the end, at the end (0 bytes), past it */
  uint8_t *b = NULL;
  size_t n = 0;
  uint64_t size = 0;
  assert_int_equal(s_get(&e, "a/one", 2, 3, &b, &n, &size), 0);
  assert_int_equal(n, 3);
  assert_memory_equal(b, "pla", 3);
  assert_int_equal(size, 8);
  free(b);
  assert_int_equal(s_get(&e, "a/one", 6, 100, &b, &n, &size), 0);
  assert_int_equal(n, 2);
  assert_memory_equal(b, "ed", 2);
  free(b);
  assert_int_equal(s_get(&e, "a/one", 8, 10, &b, &n, &size), 0);
  assert_int_equal(n, 0);
  assert_int_equal(size, 8);
  free(b);
  assert_int_equal(s_get(&e, "a/one", 3, 0, &b, &n, &size), 0); /* 0 bytes */
  assert_int_equal(n, 0);
  free(b);
  assert_int_equal(s_get(&e, "a/one", 9, 1, &b, &n, &size), -EINVAL);
  assert_int_equal(s_get(&e, "a/nope", 0, UINT64_MAX, &b, &n, &size), -ENOENT);
  assert_int_equal(s_head(&e, "a/one", &size), 0);
  assert_int_equal(size, 8);
  assert_int_equal(s_head(&e, "a/nope", &size), -ENOENT);
  /* list: sorted, prefix-exact, not crossing into other prefixes */
  assert_int_equal(s_put(&e, "a/two", "2", 1, true), 0);
  assert_int_equal(s_put(&e, "ab/x", "x", 1, true), 0);
  assert_int_equal(s_put(&e, "b/y", "y", 1, true), 0);
  char keys[512];
  size_t nk = 0;
  assert_int_equal(s_list(&e, "a/", keys, sizeof keys, &nk), 0);
  assert_string_equal(keys, "a/empty,a/one,a/two");
  assert_int_equal(s_list(&e, "a", keys, sizeof keys, &nk), 0);
  assert_string_equal(keys, "a/empty,a/one,a/two,ab/x");
  assert_int_equal(s_list(&e, "", keys, sizeof keys, &nk), 0);
  assert_int_equal(nk, 5);
  assert_int_equal(s_list(&e, "zz", keys, sizeof keys, &nk), 0);
  assert_int_equal(nk, 0);
  /* delete: idempotent */
  assert_int_equal(s_delete(&e, "b/y"), 0);
  assert_int_equal(s_delete(&e, "b/y"), 0);
  assert_int_equal(s_head(&e, "b/y", NULL), -ENOENT);
  /* delete_prefix, then delete_root */
  mw_storage_req_t req;
  res_t r;
  assert_int_equal(OP(&e, req, r, mw_storage_delete_root(e.st, &req, on_done)), -ENOTEMPTY);
  assert_non_null(strstr(mw_storage_req_error(&req), "not empty"));
  mw_storage_req_cleanup(&req);
  /* a key that must be escaped in DeleteObjects' XML body */
  assert_int_equal(s_put(&e, "a/x&y<'z>\"", "q", 1, true), 0);
  uint64_t b0 = metric(M_BATCH), n0 = metric(M_BATCHES), s0 = metric(M_SINGLE);
  assert_int_equal(OP(&e, req, r, mw_storage_delete_prefix(e.st, &req, "a", on_done)), 0);
  assert_int_equal(req.nkeys, 5);
  assert_int_equal(metric(M_BATCH) - b0, 5); /* one DeleteObjects, no single DELETE */
  assert_int_equal(metric(M_BATCHES) - n0, 1);
  assert_int_equal(metric(M_SINGLE) - s0, 0);
  mw_storage_req_cleanup(&req);
  assert_int_equal(s_list(&e, "", keys, sizeof keys, &nk), 0);
  assert_int_equal(nk, 0);
  assert_int_equal(OP(&e, req, r, mw_storage_delete_root(e.st, &req, on_done)), 0);
  mw_storage_req_cleanup(&req);
  /* keys are checked as on disk */
  assert_int_equal(s_put(&e, "../x", "x", 1, true), -EINVAL);
  assert_int_equal(s_put(&e, "a/.tmp-x", "x", 1, true), -EINVAL);
  env_close(&e);
  drop_bucket(g_bucket);
}

static int s_delete_many(env_t *e, const char *const *keys, size_t n, int *st, size_t *deleted) {
  mw_storage_req_t req;
  res_t r;
  int rc = OP(e, req, r, mw_storage_delete_many(e->st, &req, keys, n, st, on_done));
  if (deleted) *deleted = req.nkeys;
  mw_storage_req_cleanup(&req);
  return rc;
}

static void test_delete_many(void **state) {
  (void)state;
  env_t e;
  env_open(&e, "dm");
  const char *keys[] = {"a/1", "a/2", "b/c/1", "top", "missing/k"};
  for (size_t i = 0; i < 4; i++) assert_int_equal(s_put(&e, keys[i], "v", 1, true), 0);
  int st[5] = {7, 7, 7, 7, 7};
  size_t deleted = 0;
  uint64_t n0 = metric(M_BATCHES), s0 = metric(M_SINGLE);
  assert_int_equal(s_delete_many(&e, keys, 5, st, &deleted), 0);
  assert_int_equal(deleted, 5);
  for (int i = 0; i < 5; i++) assert_int_equal(st[i], 0);
  for (size_t i = 0; i < 4; i++) assert_int_equal(s_head(&e, keys[i], NULL), -ENOENT);
  assert_int_equal(metric(M_BATCHES) - n0, 1); /* one DeleteObjects */
  assert_int_equal(metric(M_SINGLE) - s0, 0);
  /* per-key faults: "t/" keys answer a transient error once (retried
   * alone), "f/1" a final one: only it is reported failed */
  const char *k2[] = {"t/1", "f/1", "ok/1", "t/2"};
  for (size_t i = 0; i < 4; i++) assert_int_equal(s_put(&e, k2[i], "v", 1, true), 0);
  mw_storage_fault_t f = {.fail_prefix = "t/", .fail_errno = ECONNRESET, .fail_steps = MW_STEP_BIT(2)};
  assert_int_equal(mw_storage_step_parse(e.st, "response"), 2);
  assert_int_equal(mw_storage_fault_set(e.st, &f), 0);
  n0 = metric(M_BATCHES);
  assert_int_equal(s_delete_many(&e, k2, 4, st, &deleted), 0);
  assert_int_equal(deleted, 4);
  assert_int_equal(metric(M_BATCHES) - n0, 2); /* the two t/ keys went again */
  for (size_t i = 0; i < 4; i++) assert_int_equal(s_head(&e, k2[i], NULL), -ENOENT);
  for (size_t i = 0; i < 4; i++) assert_int_equal(s_put(&e, k2[i], "v", 1, true), 0);
  mw_storage_fault_t g = {.fail_prefix = "f/1", .fail_errno = EACCES, .fail_steps = MW_STEP_BIT(2)};
  assert_int_equal(mw_storage_fault_set(e.st, &g), 0);
  mw_storage_req_t req;
  res_t r;
  assert_int_equal(OP(&e, req, r, mw_storage_delete_many(e.st, &req, k2, 4, st, on_done)), -EACCES);
  assert_int_equal(req.nkeys, 3);
  assert_non_null(strstr(mw_storage_req_error(&req), "f/1"));
  mw_storage_req_cleanup(&req);
  assert_int_equal(st[0], 0);
  assert_int_equal(st[1], -EACCES);
  assert_int_equal(st[2], 0);
  assert_int_equal(st[3], 0);
  assert_int_equal(mw_storage_fault_set(e.st, NULL), 0);
  /* (the fault only stood for the server's answer: f/1 is gone too, and a
   * second call reports it deleted) */
  assert_int_equal(s_delete_many(&e, k2, 4, st, &deleted), 0);
  assert_int_equal(deleted, 4);
  const char *bad[] = {"../x"};
  assert_int_equal(mw_storage_delete_many(e.st, &req, bad, 1, st, on_done), -EINVAL);
  env_close(&e);
  drop_bucket(g_bucket);
}

/* More keys than one ListObjectsV2 page (1000) under a prefix; delete_prefix
 * follows the pages too. */
static void test_list_pages(void **state) {
  (void)state;
  env_t e;
  env_open(&e, "p");
  enum { N = 1105, PAR = 32 };
  static mw_storage_req_t reqs[PAR];
  static res_t rs[PAR];
  static char keys[PAR][32];
  int next = 0, done = 0;
  for (int i = 0; i < PAR; i++) rs[i].done = 1;
  while (done < N) {
    for (int i = 0; i < PAR; i++) {
      if (!rs[i].done) continue;
      if (rs[i].status != 0) fail_msg("put failed: %d", rs[i].status);
      if (next < N) {
        mw_storage_req_init(&reqs[i]);
        rs[i] = (res_t){0};
        reqs[i].data = &rs[i];
        snprintf(keys[i], sizeof keys[i], "k/%05d", next++);
        assert_int_equal(mw_storage_put_if_absent(e.st, &reqs[i], keys[i], "v", 1, on_done), 0);
      } else {
        rs[i].done = 2; /* idle */
      }
    }
    uv_run(&e.loop, UV_RUN_ONCE);
    done = 0;
    for (int i = 0; i < PAR; i++) done += rs[i].done == 2;
    done = next == N && done == PAR ? N : 0;
  }
  assert_true(mw_storage_inflight(e.st) <= mw_storage_max_inflight(e.st));
  mw_storage_req_t req;
  res_t r;
  assert_int_equal(OP(&e, req, r, mw_storage_list(e.st, &req, "k/", on_done)), 0);
  assert_int_equal(req.nkeys, N);
  for (size_t i = 0; i < req.nkeys; i++) {
    char want[32];
    snprintf(want, sizeof want, "k/%05zu", i);
    assert_string_equal(req.keys[i], want);
  }
  mw_storage_req_cleanup(&req);
  uint64_t b0 = metric(M_BATCH), n0 = metric(M_BATCHES);
  assert_int_equal(OP(&e, req, r, mw_storage_delete_prefix(e.st, &req, "k/", on_done)), 0);
  assert_int_equal(req.nkeys, N);
  assert_int_equal(metric(M_BATCH) - b0, N);
  assert_int_equal(metric(M_BATCHES) - n0, 2); /* 1 000 keys, then 105 */
  mw_storage_req_cleanup(&req);
  char out[64];
  size_t nk = 9;
  assert_int_equal(s_list(&e, "", out, sizeof out, &nk), 0);
  assert_int_equal(nk, 0);
  env_close(&e);
  drop_bucket(g_bucket);
}

/* 24 creates of one key, 12 from each of two storages (two connections
 * pools, as two processes would): exactly one wins and its bytes stay. */
static void test_race(void **state) {
  (void)state;
  env_t a, b;
  env_open(&a, "race");
  mw_storage_config_t cfg = cfg_for(a.uri);
  env_open_cfg(&b, &cfg);
  (void)b.loop;
  for (int round = 0; round < 3; round++) {
    enum { N = 24 };
    mw_storage_req_t reqs[N];
    res_t rs[N];
    char bodies[N][16], key[32];
    snprintf(key, sizeof key, "r/%d", round);
    for (int i = 0; i < N; i++) {
      mw_storage_req_init(&reqs[i]);
      rs[i] = (res_t){0};
      reqs[i].data = &rs[i];
      snprintf(bodies[i], sizeof bodies[i], "writer-%02d", i);
      env_t *e = i % 2 ? &b : &a;
      assert_int_equal(mw_storage_put_if_absent(e->st, &reqs[i], key, bodies[i], strlen(bodies[i]),
                                                on_done), 0);
    }
    int left = N;
    while (left > 0) {
      uv_run(&a.loop, UV_RUN_NOWAIT);
      uv_run(&b.loop, UV_RUN_NOWAIT);
      left = 0;
      for (int i = 0; i < N; i++) left += !rs[i].done;
    }
    int winners = 0, winner = -1;
    for (int i = 0; i < N; i++) {
      if (rs[i].status == 0) winners++, winner = i;
      else assert_int_equal(rs[i].status, -EEXIST);
      mw_storage_req_cleanup(&reqs[i]);
    }
    assert_int_equal(winners, 1);
    expect_body(&a, key, bodies[winner]);
  }
  env_close(&b);
  env_close(&a);
  drop_bucket(g_bucket);
}

/* ---- multipart and the sweep of incomplete uploads ---- */

static uint8_t *pattern(size_t n, uint32_t seed) {
  uint8_t *p = malloc(n);
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)((i * 2654435761u + seed) >> 13);
  return p;
}

static int g_kill_at;
static void kill_step(void *ctx, const mw_storage_req_t *req, unsigned step) {
  (void)ctx;
  if (strcmp(mw_storage_req_step_name(req, step), "request") == 0 && --g_kill_at == 0) _exit(0);
}

static void test_multipart_and_sweep(void **state) {
  (void)state;
  const size_t n = (size_t)12 << 20;
  uint8_t *big = pattern(n, 7);
  char uri[256];
  snprintf(uri, sizeof uri, "s3://%s/mp", new_bucket());
  mw_storage_config_t cfg = cfg_for(uri);
  cfg.s3.part_bytes = (size_t)5 << 20; /* 3 parts */
  cfg.max_object_bytes = (size_t)64 << 20;
  env_t e;
  env_open_cfg(&e, &cfg);
  assert_int_equal(s_put(&e, "big", big, n, false), 0);
  uint8_t *got = NULL;
  size_t gn = 0;
  assert_int_equal(s_get(&e, "big", 0, UINT64_MAX, &got, &gn, NULL), 0);
  assert_int_equal(gn, n);
  assert_memory_equal(got, big, n);
  free(got);
  /* a writer killed before its second part: the upload stays, incomplete */
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    mw_storage_fault_t f = {.on_step = kill_step};
    mw_storage_config_t c = cfg;
    c.fault = &f;
    g_kill_at = 3; /* initiate, part 1, then die before part 2 */
    mw_storage_t *st = NULL;
    if (mw_storage_open(&loop, &c, &st, NULL) != 0) _exit(3);
    mw_storage_req_t req;
    mw_storage_req_init(&req);
    if (mw_storage_put(st, &req, "crashed", big, n, on_done) != 0) _exit(4);
    uv_run(&loop, UV_RUN_DEFAULT);
    _exit(5); /* the put must not finish */
  }
  int wst = 0;
  assert_int_equal(waitpid(pid, &wst, 0), pid);
  assert_true(WIFEXITED(wst));
  assert_int_equal(WEXITSTATUS(wst), 0);
  assert_int_equal(s_head(&e, "crashed", NULL), -ENOENT); /* never visible */
  mw_storage_req_t req;
  res_t r;
  /* young: left alone; then swept */
  assert_int_equal(OP(&e, req, r, mw_storage_sweep_tmp(e.st, &req, "", 3600, on_done)), 0);
  assert_int_equal(req.nkeys, 0);
  mw_storage_req_cleanup(&req);
  assert_int_equal(OP(&e, req, r, mw_storage_sweep_tmp(e.st, &req, "", 0, on_done)), 0);
  assert_int_equal(req.nkeys, 1);
  mw_storage_req_cleanup(&req);
  assert_int_equal(OP(&e, req, r, mw_storage_sweep_tmp(e.st, &req, "", 0, on_done)), 0);
  assert_int_equal(req.nkeys, 0);
  mw_storage_req_cleanup(&req);
  free(big);
  env_close(&e);
  drop_bucket(g_bucket);
}

/* ---- retries and idempotency ---- */

static void test_lost_answer_of_a_create(void **state) {
  (void)state;
  env_t e;
  env_open(&e, "idem");
  mw_storage_fault_t f = {.fail_prefix = "wal/", .fail_errno = ECONNRESET, .fail_steps = 0};
  f.fail_steps = MW_STEP_BIT(mw_storage_step_parse(e.st, "response"));
  assert_int_equal(mw_storage_fault_set(e.st, &f), 0);
  mw_storage_health_t h0, h1;
  mw_storage_health(e.st, &h0);
  /* it landed, the answer was lost; the retry meets our own bytes: created */
  assert_int_equal(s_put(&e, "wal/1", "entry-1", 7, true), 0);
  mw_storage_health(e.st, &h1);
  assert_true(h1.retries > h0.retries);
  expect_body(&e, "wal/1", "entry-1");
  /* a peer's bytes at the key: lost, even after a lost answer */
  assert_int_equal(s_put(&e, "other/2", "peer", 4, true), 0);
  f.fail_prefix = "other/";
  assert_int_equal(mw_storage_fault_set(e.st, &f), 0);
  assert_int_equal(s_put(&e, "other/2", "ours", 4, true), -EEXIST);
  expect_body(&e, "other/2", "peer");
  /* a connection dropped mid-body: retried, the object whole */
  f.fail_prefix = "body/";
  f.fail_steps = MW_STEP_BIT(mw_storage_step_parse(e.st, "body"));
  assert_int_equal(mw_storage_fault_set(e.st, &f), 0);
  uint8_t *p = pattern(300000, 3);
  assert_int_equal(s_put(&e, "body/x", p, 300000, true), 0);
  uint8_t *got = NULL;
  size_t gn = 0;
  assert_int_equal(s_get(&e, "body/x", 0, UINT64_MAX, &got, &gn, NULL), 0);
  assert_int_equal(gn, 300000);
  assert_memory_equal(got, p, gn);
  free(got);
  free(p);
  /* a non-transient fault fails at once, and says so */
  f.fail_prefix = "eio/";
  f.fail_errno = EIO;
  f.fail_steps = MW_STEP_BIT(mw_storage_step_parse(e.st, "request"));
  assert_int_equal(mw_storage_fault_set(e.st, &f), 0);
  mw_storage_req_t req;
  res_t r;
  assert_int_equal(OP(&e, req, r, mw_storage_put_if_absent(e.st, &req, "eio/k", "x", 1, on_done)), -EIO);
  assert_non_null(strstr(mw_storage_req_error(&req), "eio/k"));
  assert_false(mw_storage_req_maybe_written(&req)); /* never sent */
  mw_storage_req_cleanup(&req);
  assert_int_equal(mw_storage_fault_set(e.st, NULL), 0);
  assert_int_equal(s_head(&e, "eio/k", NULL), -ENOENT);
  env_close(&e);
  drop_bucket(g_bucket);
}

static void test_errors(void **state) {
  (void)state;
  char uri[256];
  snprintf(uri, sizeof uri, "s3://%s/e", new_bucket());
  /* a wrong secret: 403, named, the secret never shown */
  mw_storage_config_t cfg = cfg_for(uri);
  cfg.s3.secret_access_key = "not-the-secret-SENTINEL";
  env_t e;
  env_open_cfg(&e, &cfg);
  mw_storage_req_t req;
  res_t r;
  assert_int_equal(OP(&e, req, r, mw_storage_put_if_absent(e.st, &req, "k", "x", 1, on_done)), -EACCES);
  const char *why = mw_storage_req_error(&req);
  assert_non_null(strstr(why, "HTTP 403"));
  assert_non_null(strstr(why, "SignatureDoesNotMatch"));
  assert_non_null(strstr(why, g_bucket));
  assert_non_null(strstr(why, "/e/k"));
  assert_null(strstr(why, "SENTINEL"));
  mw_storage_req_cleanup(&req);
  env_close(&e);
  /* a bucket that does not exist */
  cfg = cfg_for("s3://mw-no-such-bucket-here/x");
  env_open_cfg(&e, &cfg);
  assert_int_equal(OP(&e, req, r, mw_storage_head(e.st, &req, "k", on_done)), -ENOENT);
  mw_storage_req_cleanup(&req);
  assert_int_equal(OP(&e, req, r, mw_storage_list(e.st, &req, "", on_done)), -ENXIO);
  assert_non_null(strstr(mw_storage_req_error(&req), "NoSuchBucket"));
  mw_storage_req_cleanup(&req);
  env_close(&e);
  /* a whole get over max_object_bytes */
  cfg = cfg_for(uri);
  cfg.max_object_bytes = 4096;
  env_open_cfg(&e, &cfg);
  uint8_t *p = pattern(4096, 1);
  assert_int_equal(s_put(&e, "4k", p, 4096, true), 0);
  free(p);
  char *big = calloc(1, 5000);
  mw_storage_t *st = e.st;
  assert_int_equal(mw_storage_put(st, &req, "5k", big, 5000, on_done), -EFBIG);
  free(big);
  uint8_t *got = NULL;
  size_t gn = 0;
  assert_int_equal(s_get(&e, "4k", 0, UINT64_MAX, &got, &gn, NULL), 0);
  free(got);
  env_close(&e);
  cfg = cfg_for(uri);
  env_open_cfg(&e, &cfg);
  char *five = calloc(1, 5000);
  assert_int_equal(s_put(&e, "5k", five, 5000, true), 0);
  free(five);
  env_close(&e);
  cfg = cfg_for(uri);
  cfg.max_object_bytes = 4096;
  env_open_cfg(&e, &cfg);
  assert_int_equal(s_get(&e, "5k", 0, UINT64_MAX, &got, &gn, NULL), -EFBIG);
  assert_int_equal(s_get(&e, "5k", 1000, 100, &got, &gn, NULL), 0); /* ranges still work */
  free(got);
  env_close(&e);
  /* plain http only when allowed */
  cfg = cfg_for(uri);
  cfg.s3.allow_http = 0;
  mw_storage_t *st2 = NULL;
  uv_loop_t loop;
  uv_loop_init(&loop);
  mw_err_t err = {0};
  assert_int_equal(mw_storage_open(&loop, &cfg, &st2, &err), -EPERM);
  assert_non_null(strstr(err.msg, "allow"));
  /* an endpoint that refuses connections: retried until the deadline */
  cfg = cfg_for(uri);
  cfg.s3.endpoint = "http://127.0.0.1:1";
  cfg.s3.retry_deadline_ms = 300;
  env_open_cfg(&e, &cfg);
  assert_int_equal(OP(&e, req, r, mw_storage_head(e.st, &req, "k", on_done)), -ECONNREFUSED);
  assert_non_null(strstr(mw_storage_req_error(&req), "attempts"));
  mw_storage_req_cleanup(&req);
  mw_storage_health_t h;
  mw_storage_health(e.st, &h);
  assert_true(h.retries >= 2);
  env_close(&e);
  uv_loop_close(&loop);
  /* bad URIs */
  cfg = cfg_for("s3://A_B/x");
  assert_int_equal(mw_storage_open(&loop, &cfg, &st2, NULL), -EINVAL);
  cfg = cfg_for("s3://bucket/../x");
  assert_int_equal(mw_storage_open(&loop, &cfg, &st2, NULL), -EINVAL);
  drop_bucket(g_bucket);
}

/* The blocking calls on S3, from inside a running loop's callback. */
static void test_sync(void **state) {
  (void)state;
  char uri[256];
  snprintf(uri, sizeof uri, "s3://%s/sync/t.lance", new_bucket());
  mw_storage_config_t cfg = cfg_for(uri);
  mw_storage_sync_t *ss = NULL;
  mw_err_t err = {0};
  assert_int_equal(mw_storage_sync_open(&cfg, &ss, &err), 0);
  assert_int_equal(mw_storage_sync_put(ss, "_versions/1.manifest", "m1", 2, true, &err), 0);
  assert_int_equal(mw_storage_sync_put(ss, "_versions/1.manifest", "m2", 2, true, &err), -EEXIST);
  mw_buf_t b = MW_BUF_INIT;
  assert_int_equal(mw_storage_sync_get(ss, "_versions/1.manifest", &b, &err), 0);
  assert_int_equal(b.len, 2);
  assert_memory_equal(b.data, "m1", 2);
  mw_buf_free(&b);
  mw_storage_req_t req;
  mw_storage_req_init(&req);
  assert_int_equal(mw_storage_sync_list(ss, "_versions/", &req, &err), 0);
  assert_int_equal(req.nkeys, 1);
  mw_storage_req_cleanup(&req);
  assert_int_equal(mw_storage_sync_delete_prefix(ss, "", &err), 1);
  assert_int_equal(mw_storage_sync_delete_root(ss, &err), 0);
  mw_storage_sync_close(ss);
  drop_bucket(g_bucket);
}

int main(void) {
  if (getenv("MW_S3_ENDPOINT") == NULL) {
    fprintf(stderr, "test_s3: MW_S3_ENDPOINT is not set (run through tests/s3/with-s3.sh)\n");
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_semantics),
      cmocka_unit_test(test_delete_many),
      cmocka_unit_test(test_list_pages),
      cmocka_unit_test(test_race),
      cmocka_unit_test(test_multipart_and_sweep),
      cmocka_unit_test(test_lost_answer_of_a_create),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_sync),
  };
  return tu_run_group_name("storage-s3", tests, NULL, NULL);
}
