/*
 * fault.h — fault injection into the storage layer, for tests and the
 * daemon's test hooks (daemon/testhook.h, the admin `fault` command).
 *
 * Owns: nothing beyond the settings it is given. Each backend runs every
 * operation as a sequence of named *steps* (a syscall on the local disk, a
 * phase of an HTTP exchange on S3); docs/storage.md lists them per backend.
 * Step numbers belong to a backend: turn names into numbers with
 * mw_storage_step_parse(st, ...) on the storage concerned. Faults are
 * injected inside the real backends at the step where a real failure would
 * happen, so the backends' own cleanup paths are what tests exercise.
 *
 * Local disk only: the power-loss model (a journal of what completed fsyncs
 * made durable, and a cut that rewrites the tree to exactly that) —
 * storage/local.h.
 *
 * Errors: negative errno (-EINVAL for bad settings).
 */
#ifndef MW_STORAGE_FAULT_H
#define MW_STORAGE_FAULT_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"

#include "storage/storage.h"

/* Steps a backend may name (a mask is 32 bits). */
#define MW_STORAGE_MAX_STEPS 32
#define MW_STEP_BIT(s) (1u << (s))

typedef struct mw_powerloss mw_powerloss_t; /* storage/local.h */

/* All zero = no faults. An operation is "armed" when it is the fail_nth-th
 * operation submitted (1-based, counting every accepted submission) or its
 * key starts with fail_prefix. An armed operation fails with -fail_errno at
 * the first step whose bit is in fail_steps (0 = any step, i.e. the first
 * one), once; its cleanup steps then run normally. delete_many arms each
 * key instead (the fail_nth-th submission arms its first key): an armed key
 * fails alone, with -fail_errno in its status — locally at its unlink or
 * its directory's fsync steps, on S3 as if the answer had reported that
 * key failed (ECONNRESET, ETIMEDOUT and EAGAIN as a transient error, retried). */
struct mw_storage_fault {
  uint64_t fail_nth;
  const char *fail_prefix;   /* copied */
  int fail_errno;            /* positive errno, e.g. EIO or ENOSPC */
  uint32_t fail_steps;       /* MW_STEP_BIT() mask of the backend's steps, 0 = any */
  /* The next durability step of any operation fails with EIO (local: a
   * file fsync; a backend without one ignores it). */
  bool fail_sync_once;
  uint32_t delay_ms;         /* every operation starts this much later */
  /* Called before every step (on the loop or a pool thread). A test can
   * record the sequence, or _exit() to model a crash at an exact step. */
  void (*on_step)(void *ctx, const mw_storage_req_t *req, unsigned step);
  void *on_step_ctx;
  /* Local disk: a power-loss journal made for the same root with
   * mw_powerloss_new() (storage/local.h). Fixed for the life of the
   * storage (mw_storage_fault_set cannot change it). */
  mw_powerloss_t *power_loss;
  /* Local disk, io_uring: pretend its setup failed with this -errno; make
   * the next uring_submit_failures submissions fail with
   * uring_submit_errno (without submitting). Read at open only. */
  int uring_refuse;
  int uring_submit_errno;
  uint32_t uring_submit_failures;
};

/* Change fault injection on an open storage (loop thread): f = NULL disarms
 * everything. Requests already submitted keep the faults they were armed
 * with; later submissions see the new ones. f->power_loss must be NULL or
 * the journal given at open (which stays attached either way): -EINVAL
 * otherwise, and for a bad fail_errno. fail_prefix is copied. */
int mw_storage_fault_set(mw_storage_t *st, const mw_storage_fault_t *f);
/* memwald_storage_faults_injected_total{step} is a test series: it exists
 * only when this is called before the first storage opens (the daemon does
 * when a test hook or MEMWALD_TEST_FAULTS=1 is on), so a production scrape
 * never shows fault-injection counters. */
void mw_storage_fault_metrics_enable(void);
/* The fault settings in force (loop thread): *out gets a copy whose
 * fail_prefix points into the storage (valid until the next set). */
void mw_storage_fault_get(const mw_storage_t *st, mw_storage_fault_t *out);
/* No fault, but what was installed at open: *out gets the on_step hook and
 * its context, the power-loss journal and the io_uring test settings in
 * force, every other field zero. A run-time control (the admin `fault`
 * command) starts from this, adds its faults and sets it, so a `set`
 * replaces the faults before it and keeps the hooks. */
void mw_storage_fault_get_hooks(const mw_storage_t *st, mw_storage_fault_t *out);

/* One KEY[=VALUE] of a fault in words (storage/fault_parse.c: nth, errno,
 * steps, delay_ms, fsync_once/sync_once) applied to *f; value NULL when the
 * key came without '='. -ENOENT (err untouched) for any other key, so a
 * caller can take its own keys; -EINVAL with the key named for a bad value. */
int mw_storage_fault_parse(const mw_storage_t *st, mw_storage_fault_t *f, const char *key, const char *value,
                           mw_err_t *err);

/* The backend's name for its step `step` ("?" when out of range), and the
 * step called `name` (-EINVAL when this backend has none by that name). */
const char *mw_storage_step_name(const mw_storage_t *st, unsigned step);
int mw_storage_step_parse(const mw_storage_t *st, const char *name);
/* Number of steps st's backend names. */
unsigned mw_storage_step_count(const mw_storage_t *st);
/* True when some backend has a step called name (for settings read before
 * the storage is open). */
bool mw_storage_step_known(const char *name);
/* Inside on_step: the name of `step` for the request's backend. */
const char *mw_storage_req_step_name(const mw_storage_req_t *req, unsigned step);

#endif
