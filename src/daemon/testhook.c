/*
 * testhook.c — see testhook.h.
 *
 * Design: one process-wide hook state (the environment is process-wide too).
 * The crash hook is the storage's on_step callback, which runs on the loop
 * thread (io_uring) or a pool thread (thread backend), so its counter and
 * "fired" flag are atomics and it does nothing but count, log one line (a
 * single write(2)) and either raise(SIGKILL) or, with power loss, trip the
 * journals and wake the loop with uv_async_send (async-signal and thread
 * safe). The power cut itself runs on the loop thread:
 *
 *   trip every journal            no step succeeds, no fsync counts any more
 *   wait (1 ms timer) until no    so that every storage closes in the same
 *   storage has work in flight    loop iterations: the engine never runs
 *   (at most IDLE_WAIT_MS)        against a storage already freed
 *   mw_storage_close on each      detaches it from its journal
 *   last close callback:          mw_storage_power_cut per journal, then
 *                                 _exit(137) without any other cleanup
 *
 * A failed cut is _exit(3), so a driver that expects 137 notices.
 */
#include "daemon/testhook.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"

enum { CLASS_ANY = 0, CLASS_WAL, CLASS_MANIFEST, CLASS_FLUSH, CLASS_DATASET, CLASS_COMPACT, CLASS_COUNT_ };
#define SPEC_BYTES 96
#define EXIT_CUT 137
#define EXIT_CUT_FAILED 3

static const char *const class_names[CLASS_COUNT_] = {"any", "wal", "manifest", "flush",
                                                       "dataset", "compact"};

typedef struct hooked {
  char *root;
  mw_powerloss_t *pl;
  mw_storage_fault_t fault;
  mw_storage_t *st;
} hooked_t;

static struct {
  bool crash, power;
  int cls;
  char step[32]; /* a backend's step name, or "any" */
  uint64_t nth;
  char spec[SPEC_BYTES];
  atomic_uint_fast64_t seen;
  atomic_bool fired;
  /* power loss (loop thread, except `async`) */
  uv_loop_t *loop;
  uv_signal_t sig;
  uv_async_t async;
  uv_timer_t wait;
  uint64_t wait_start_ms;
  bool cutting;
  size_t closing_left;
  hooked_t hooks[MW_TESTHOOK_MAX_STORAGES];
  atomic_size_t n; /* published after hooks[n-1] is filled: on_step reads it */
} H;

static bool class_match(int cls, const char *key) {
  assert(key != NULL);
  assert(cls >= 0);
  assert(cls < CLASS_COUNT_);
  switch (cls) {
    case CLASS_WAL: return strstr(key, "/wal/") != NULL;
    case CLASS_MANIFEST: return strstr(key, "/manifest/") != NULL;
    case CLASS_DATASET: return strncmp(key, "_versions/", 10) == 0; /* not an SSTable's own */
    case CLASS_COMPACT: /* the base-table files compaction writes and reads (besides _versions/) */
      return strncmp(key, "data/", 5) == 0 || strncmp(key, "_deletions/", 11) == 0 ||
             strncmp(key, "_transactions/", 14) == 0 || strncmp(key, "_memwald/keys/", 14) == 0;
    case CLASS_FLUSH: {
      if (strncmp(key, "_mem_wal/", 9) != 0) return false;
      const char *shard_end = strchr(key + 9, '/');
      if (shard_end == NULL) return false;
      const char *dir_end = strchr(shard_end + 1, '/');
      size_t len = dir_end ? (size_t)(dir_end - shard_end - 1) : strlen(shard_end + 1);
      const char *gen = strstr(shard_end + 1, "_gen_");
      return gen != NULL && (size_t)(gen - shard_end - 1) < len;
    }
    default: return true;
  }
}

static int parse_crash(const char *v, mw_err_t *err) {
  assert(v != NULL);
  char buf[SPEC_BYTES];
  if (strlen(v) >= sizeof buf) goto bad;
  memcpy(buf, v, strlen(v) + 1);
  char *c1 = strchr(buf, ':');
  char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
  if (c2 == NULL) goto bad;
  *c1 = *c2 = '\0';
  H.cls = -1;
  for (int i = 0; i < CLASS_COUNT_; i++)
    if (strcmp(buf, class_names[i]) == 0) H.cls = i;
  bool step_ok = strcmp(c1 + 1, "any") == 0 || mw_storage_step_known(c1 + 1);
  snprintf(H.step, sizeof H.step, "%s", c1 + 1);
  char *end = NULL;
  errno = 0;
  unsigned long long n = strtoull(c2 + 1, &end, 10);
  if (H.cls < 0 || !step_ok || errno != 0 || end == c2 + 1 || *end != '\0' || n == 0 ||
      n > 1000000000ull)
    goto bad;
  H.nth = n;
  H.crash = true;
  snprintf(H.spec, sizeof H.spec, "%s", v);
  assert(H.nth > 0);
  return 0;
bad:
  return mw_err_set(err, -EINVAL,
                    "MEMWALD_CRASH_AT=%.*s: expected <class>:<step>:<n> with class "
                    "wal|manifest|flush|dataset|compact|any, a storage step name or any, n >= 1",
                    SPEC_BYTES, v);
}

/* ---- the power cut (loop thread) ---- */

static void trip_all(void) {
  for (size_t i = 0; i < H.n; i++) mw_powerloss_trip(H.hooks[i].pl);
}

static void do_cut(void) {
  assert(H.power);
  assert(H.cutting);
  for (size_t i = 0; i < H.n; i++) {
    mw_err_t err = {0};
    int rc = mw_storage_power_cut(H.hooks[i].pl, &err);
    if (rc < 0) {
      mw_log_err("testhook: power cut of %s failed: %s", H.hooks[i].root,
                 err.msg[0] ? err.msg : strerror(-rc));
      _exit(EXIT_CUT_FAILED);
    }
    mw_powerloss_stats_t s;
    mw_powerloss_stats(H.hooks[i].pl, &s);
    mw_log_notice("testhook: power cut: %s rewritten to its durable state (%" PRIu64
                  " files, %" PRIu64 " dirs, %" PRIu64 " bytes)",
                  H.hooks[i].root, s.files, s.dirs, s.bytes);
  }
  mw_log_notice("testhook: power cut done, exit %d", EXIT_CUT);
  _exit(EXIT_CUT);
}

static void on_closed(void *arg) {
  hooked_t *h = arg;
  assert(H.closing_left > 0);
  h->st = NULL;
  if (--H.closing_left == 0) do_cut();
}

static bool all_idle(void) {
  for (size_t i = 0; i < H.n; i++) {
    mw_storage_t *st = H.hooks[i].st;
    if (st != NULL && (mw_storage_inflight(st) != 0 || mw_storage_queued(st) != 0)) return false;
  }
  return true;
}

static void close_all(uv_timer_t *t) {
  assert(t == &H.wait);
  assert(H.cutting);
  if (!all_idle() && uv_now(H.loop) - H.wait_start_ms < MW_TESTHOOK_IDLE_WAIT_MS) return;
  uv_timer_stop(t);
  size_t open = 0;
  for (size_t i = 0; i < H.n; i++) open += H.hooks[i].st != NULL;
  H.closing_left = open;
  if (open == 0) do_cut();
  for (size_t i = 0; i < H.n; i++)
    if (H.hooks[i].st != NULL) mw_storage_close(H.hooks[i].st, on_closed, &H.hooks[i]);
}

static void begin_cut(const char *why) {
  assert(H.power);
  assert(H.loop != NULL);
  if (H.cutting) return;
  H.cutting = true;
  trip_all();
  mw_log_warn("testhook: MEMWALD_POWER_LOSS: power fails now (%s); closing %zu storage(s), "
              "then cutting to the durable state", why, H.n);
  H.wait_start_ms = uv_now(H.loop);
  int rc = uv_timer_init(H.loop, &H.wait);
  if (rc == 0) rc = uv_timer_start(&H.wait, close_all, 1, 1);
  if (rc < 0) {
    mw_log_err("testhook: cannot start the power cut: %s", uv_strerror(rc));
    _exit(EXIT_CUT_FAILED);
  }
}

static void on_sigusr2(uv_signal_t *s, int signum) {
  (void)s;
  assert(signum == SIGUSR2);
  begin_cut("SIGUSR2");
}

static void on_async(uv_async_t *a) {
  (void)a;
  begin_cut(H.spec);
}

/* ---- the crash hook (any thread) ---- */

static void on_step(void *ctx, const mw_storage_req_t *req, unsigned step) {
  (void)ctx;
  if (!H.crash || atomic_load(&H.fired)) return;
  const char *name = mw_storage_req_step_name(req, step);
  const char *key = mw_storage_req_key(req);
  if (strcmp(H.step, "any") != 0 && strcmp(name, H.step) != 0) return;
  if (!class_match(H.cls, key)) return;
  if (atomic_fetch_add(&H.seen, 1) + 1 != H.nth) return;
  if (atomic_exchange(&H.fired, true)) return;
  if (!H.power) {
    mw_log_warn("testhook: MEMWALD_CRASH_AT=%s fired before %s of %s: SIGKILL", H.spec, name,
                key);
    raise(SIGKILL);
    _exit(EXIT_CUT); /* not reached */
  }
  mw_log_warn("testhook: MEMWALD_CRASH_AT=%s fired before %s of %s: power loss", H.spec, name,
              key);
  /* Trip here, so this very step already fails; the loop does the rest. */
  size_t n = atomic_load(&H.n);
  for (size_t i = 0; i < n; i++) mw_powerloss_trip(H.hooks[i].pl);
  uv_async_send(&H.async);
}

/* ---- public ---- */

int mw_testhook_init(uv_loop_t *loop, mw_err_t *err) {
  assert(loop != NULL);
  assert(!H.crash);
  assert(!H.power);
  assert(H.loop == NULL);
  const char *crash = getenv("MEMWALD_CRASH_AT");
  const char *power = getenv("MEMWALD_POWER_LOSS");
  int rc;
  if (crash != NULL && crash[0] != '\0' && (rc = parse_crash(crash, err)) < 0) return rc;
  if (power != NULL && power[0] != '\0' && strcmp(power, "0") != 0) {
    if (strcmp(power, "1") != 0)
      return mw_err_set(err, -EINVAL, "MEMWALD_POWER_LOSS=%.32s: expected 1 or 0", power);
    H.power = true;
    H.loop = loop;
    if ((rc = uv_async_init(loop, &H.async, on_async)) < 0 ||
        (rc = uv_signal_init(loop, &H.sig)) < 0 ||
        (rc = uv_signal_start(&H.sig, on_sigusr2, SIGUSR2)) < 0)
      return mw_err_set(err, rc, "testhook: %s", uv_strerror(rc));
    /* Neither may keep the loop alive on a normal stop. */
    uv_unref((uv_handle_t *)&H.async);
    uv_unref((uv_handle_t *)&H.sig);
  }
  if (H.crash || H.power)
    mw_log_warn("testhook: armed%s%s%s (test hooks from the environment; never in production)",
                H.crash ? " MEMWALD_CRASH_AT=" : "", H.crash ? H.spec : "",
                H.power ? " MEMWALD_POWER_LOSS=1" : "");
  return 0;
}

bool mw_testhook_active(void) { return H.crash || H.power; }

int mw_testhook_fault(const char *root_dir, const mw_storage_fault_t **out, mw_err_t *err) {
  assert(root_dir != NULL);
  assert(out != NULL);
  *out = NULL;
  if (!H.crash && !H.power) return 0;
  if (H.n >= MW_TESTHOOK_MAX_STORAGES)
    return mw_err_set(err, -E2BIG, "testhook: more than %d storages", MW_TESTHOOK_MAX_STORAGES);
  if (H.power && mw_storage_uri_is_s3(root_dir))
    return mw_err_set(err, -ENOTSUP, "testhook: MEMWALD_POWER_LOSS models a local disk, not %s",
                      root_dir);
  hooked_t *h = &H.hooks[H.n];
  memset(h, 0, sizeof *h);
  if ((h->root = strdup(root_dir)) == NULL) return mw_err_set(err, -ENOMEM, "out of memory");
  int rc;
  if (H.power && (rc = mw_powerloss_new(root_dir, &h->pl, err)) < 0) {
    free(h->root);
    h->root = NULL;
    return rc;
  }
  h->fault.on_step = H.crash ? on_step : NULL;
  h->fault.power_loss = h->pl;
  atomic_fetch_add(&H.n, 1);
  *out = &h->fault;
  assert(H.n <= MW_TESTHOOK_MAX_STORAGES);
  return 0;
}

void mw_testhook_attach(const char *root_dir, mw_storage_t *st) {
  assert(root_dir != NULL);
  assert(st != NULL);
  for (size_t i = H.n; i-- > 0;)
    if (H.hooks[i].st == NULL && strcmp(H.hooks[i].root, root_dir) == 0) {
      H.hooks[i].st = st;
      return;
    }
}
