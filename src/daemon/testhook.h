/*
 * testhook.h — crash and power-loss hooks for the crash loop (tools/crashloop),
 * configured only from the environment so that no configuration key for them
 * can leak into a production config. Without the variables below nothing is
 * installed and every function here is a no-op.
 *
 *   MEMWALD_CRASH_AT=<class>:<step>:<n>
 *       raise(SIGKILL) (no cleanup) just before the n-th (1-based) storage
 *       step <step> of an operation whose key is of <class>, counted over the
 *       whole process (every table's storage):
 *         wal       the key contains "/wal/"            (WAL entries, fence sentinels)
 *         manifest  the key contains "/manifest/"       (shard manifest commits, hints)
 *         flush     "_mem_wal/<shard>/<x>_gen_<g>/..."  (SSTable files of a flush)
 *         dataset   the key starts with "_versions/" (the table's own versions;
                   an SSTable's "<x>_gen_<g>/_versions/" is flush): compaction's
                   base-table reads and commits
 *         compact   the key starts with "data/", "_deletions/", "_transactions/"
                   or "_memwald/keys/" (compaction's new fragments, deletion files,
                   transaction files, key indexes)
 *         any       every key
 *       <step> is a step name of the table's storage backend
 *       (docs/storage.md; local disk: open mkdir write fsync close link
 *       rename diropen dirsync dirclose unlink stat read scan rmdir) or
 *       "any".
 *   MEMWALD_POWER_LOSS=1
 *       every table's storage is opened with a power-loss journal
 *       (storage/local.h; local tables only). On SIGUSR2, or when MEMWALD_CRASH_AT fires, the journals
 *       trip (the power fails: no later step succeeds, no later fsync counts),
 *       the storages are closed, each table directory is rewritten to its
 *       durable state with mw_storage_power_cut, and the process _exit(137)s.
 *
 * One log line names each hook when it fires ("testhook: ..."), before the
 * process dies.
 *
 * Errors: negative errno with the reason in *err (a malformed variable makes
 * the daemon refuse to start).
 */
#ifndef MW_DAEMON_TESTHOOK_H
#define MW_DAEMON_TESTHOOK_H

#include <stdbool.h>
#include <uv.h>

#include "common/err.h"
#include "storage/local.h"

/* Storages a power-loss run can track (one per table). */
#define MW_TESTHOOK_MAX_STORAGES 64
/* Longest wait for the storages to go idle after a trip before closing them
 * anyway. */
#define MW_TESTHOOK_IDLE_WAIT_MS 2000

/* Read the environment; with MEMWALD_POWER_LOSS, watch SIGUSR2 on loop.
 * Call once, before any storage is opened. */
int mw_testhook_init(uv_loop_t *loop, mw_err_t *err);
/* True when a hook is configured. */
bool mw_testhook_active(void);
/* The fault settings for a storage about to be opened at root_dir (NULL when
 * no hook is configured). With power loss this makes the journal, so the
 * tree under root_dir must be in its durable state now (it is at start-up:
 * either never cut, or rewritten by the previous run's cut). */
int mw_testhook_fault(const char *root_dir, const mw_storage_fault_t **out, mw_err_t *err);
/* The storage opened with the fault settings of the last mw_testhook_fault
 * for root_dir; a power cut closes it before rewriting the tree. */
void mw_testhook_attach(const char *root_dir, mw_storage_t *st);

#endif
