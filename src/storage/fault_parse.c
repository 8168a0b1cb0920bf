/*
 * fault_parse.c — a storage fault in words: one KEY=VALUE of the admin
 * socket's `fault TABLE set ...` (tests only) applied to a
 * mw_storage_fault_t. The storage owns what its fields mean, so it reads
 * their text too; the caller (net/admin_engine.c) keeps the keys that name
 * a table's places (prefix, target, shard) and starts from
 * mw_storage_fault_get_hooks.
 *
 *   nth=3            the 3rd storage operation submitted from now on fails
 *   errno=ENOSPC     with this errno (a name below or a number 1..4095)
 *   steps=fsync+put  only at these steps of the backend (its own names)
 *   delay_ms=200     each operation waits first (at most 600 000)
 *   fsync_once       the next durability step fails (alias sync_once; =0 off)
 */
#include "storage/fault.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/storage.h"

#define FAULT_MAX_DELAY_MS 600000
#define FAULT_STEPS_TEXT_BYTES 256

static int errno_of(const char *v) {
  static const struct {
    const char *name;
    int e;
  } names[] = {{"EIO", EIO},       {"ENOSPC", ENOSPC}, {"EDQUOT", EDQUOT}, {"EROFS", EROFS},
               {"EACCES", EACCES}, {"EPERM", EPERM},   {"ENOMEM", ENOMEM}, {"EAGAIN", EAGAIN}};
  assert(v != NULL);
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (strcmp(v, names[i].name) == 0) return names[i].e;
  char *end;
  long x = strtol(v, &end, 10);
  return (*v && !*end && x > 0 && x < 4096) ? (int)x : -EINVAL;
}

static int steps_of(const mw_storage_t *st, const char *v, uint32_t *mask) {
  assert(st != NULL);
  assert(mask != NULL);
  char tmp[FAULT_STEPS_TEXT_BYTES];
  if (strlen(v) >= sizeof tmp) return -EINVAL;
  snprintf(tmp, sizeof tmp, "%s", v);
  *mask = 0;
  char *save = NULL;
  for (char *w = strtok_r(tmp, "+|", &save); w; w = strtok_r(NULL, "+|", &save)) {
    int k = mw_storage_step_parse(st, w);
    if (k < 0) return -EINVAL;
    *mask |= MW_STEP_BIT(k);
  }
  return 0; /* no step named: any step, as before */
}

/* nth=N counts from now: past every operation done, in flight or queued. */
static int nth_of(const mw_storage_t *st, const char *v, uint64_t *out) {
  char *end = NULL;
  unsigned long long n = strtoull(v, &end, 10);
  if (!*v || *end || n == 0) return -EINVAL;
  mw_storage_health_t h;
  mw_storage_health(st, &h);
  *out = h.ops_ok + h.ops_failed + mw_storage_inflight(st) + mw_storage_queued(st) + n;
  assert(*out > n - 1);
  return 0;
}

int mw_storage_fault_parse(const mw_storage_t *st, mw_storage_fault_t *f, const char *key, const char *value,
                           mw_err_t *err) {
  assert(st != NULL);
  assert(f != NULL);
  assert(key != NULL);
  int bad = 0;
  if (strcmp(key, "fsync_once") == 0 || strcmp(key, "sync_once") == 0) {
    f->fail_sync_once = value == NULL || strcmp(value, "0") != 0;
  } else if (strcmp(key, "nth") != 0 && strcmp(key, "errno") != 0 && strcmp(key, "steps") != 0 &&
             strcmp(key, "delay_ms") != 0) {
    return -ENOENT; /* not a storage key: the caller's, or unknown */
  } else if (value == NULL) {
    bad = 1;
  } else if (strcmp(key, "nth") == 0) {
    bad = nth_of(st, value, &f->fail_nth) < 0;
  } else if (strcmp(key, "errno") == 0) {
    f->fail_errno = errno_of(value);
    bad = f->fail_errno < 0;
  } else if (strcmp(key, "steps") == 0) {
    bad = steps_of(st, value, &f->fail_steps) < 0;
  } else {
    char *end = NULL;
    unsigned long d = strtoul(value, &end, 10);
    bad = !*value || *end || d > FAULT_MAX_DELAY_MS;
    if (!bad) f->delay_ms = (uint32_t)d;
  }
  if (bad) return mw_err_set(err, -EINVAL, "fault set: bad value for %.100s", key);
  return 0;
}
