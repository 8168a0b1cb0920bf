/*
 * recover.h — recovery at start: every shard this daemon owns whose WAL
 * holds entries past its manifest's replay_after is claimed, replayed and
 * flushed, whatever `claim` says, so acknowledged rows become visible to
 * LanceDB readers without any producer writing again (docs/engine.md
 * "Recovery at start").
 *
 * Owns, per table: one probe per owned shard the spec can name (unsharded:
 * the one; bucket: every owned bucket; identity/manual: the configured
 * ones), run once after open, and a timer. A probe, with operations of its
 * own:
 *
 *   look     read the newest shard manifest; HEAD the WAL from
 *            replay_after + 1 up to the first missing position (the tip).
 *            No manifest, or nothing past replay_after: done, nothing to do.
 *   wait     quiet_ms (a quarter of max_memtable_age_ms, 250..2500 ms)
 *   look     again
 *   decide   the manifest version and the tip did not move: nobody is
 *            writing the shard, so its rows would stay invisible: claim it
 *            (epoch + 1, fence sentinel, replay) and flush. Either moved: a
 *            peer holds the shard and is writing; it will flush its rows
 *            itself, so it is not fenced; look again after quiet_ms (until
 *            it goes quiet, or a write or an operator claims it here).
 *
 * Shortcut: after the first look, the owner record (owners.h) is read; if it
 * names this node at exactly the manifest's writer epoch, the last claim was
 * this node's own (a process now gone) and nobody claimed since, so nobody
 * can be writing: claim at once, without the quiet period and second look.
 *
 * A shard that stops being NEW meanwhile (a producer's lazy claim, an
 * operator's claim, `claim = eager`) ends its probe: the claim replays.
 * Total time for a dead writer's shard: two looks, quiet_ms, a claim, a
 * replay and a flush — inside max_memtable_age_ms for the default 10 s.
 *
 * Errors: a failed look or claim is logged and retried after quiet_ms.
 */
#ifndef MW_SHARD_RECOVER_H
#define MW_SHARD_RECOVER_H

#include <stdbool.h>
#include <stdint.h>

#define MW_RECOVER_MAX_PROBES 16      /* HEADs at once while finding the tip */
#define MW_RECOVER_MAX_STEPS 4096     /* batches of HEADs before giving up on the tip */
#define MW_RECOVER_QUIET_MIN_MS 250
#define MW_RECOVER_QUIET_MAX_MS 2500

struct mw_table;
typedef struct mw_recover mw_recover_t;

typedef struct mw_recover_stats {
  uint32_t probes;           /* shards looked at */
  uint32_t clean;            /* nothing past replay_after */
  uint32_t recovered;        /* claimed, replayed and flushed here */
  uint32_t busy_peers;       /* left alone: someone was writing them */
  uint32_t shortcuts;        /* claimed without the quiet period (owner record: us, no claim since) */
  uint32_t pending;          /* still looking */
  uint64_t rows;             /* rows replayed by recoveries */
} mw_recover_stats_t;

/* Start the probes (NEW shards only); quiet_ms 0 = from max_memtable_age_ms. */
int mw_recover_start(struct mw_table *t, uint64_t quiet_ms, mw_recover_t **out);
/* Stop (no new step), cb(arg) once nothing is in flight. */
void mw_recover_stop(mw_recover_t *r, void (*cb)(void *arg), void *arg);
void mw_recover_free(mw_recover_t *r);
void mw_recover_stats(const mw_recover_t *r, mw_recover_stats_t *out);

#endif
