/*
 * shard_manifest.h — the MemWAL shard manifest and the names around it
 * (memwal.md §1.2, §1.3, §3).
 *
 * Owns:
 *   - mw_shard_manifest_t, a plain C mirror of `lance.table.ShardManifest`,
 *     encoded and decoded through protoc-c (table.pb-c.h). Re-encoding a
 *     decoded manifest gives the bytes Lance wrote (prost emits fields in tag
 *     order and omits zeros; protoc-c does the same).
 *   - bit-reversed 64-digit names (`1000…0.binpb` = version 1, `.arrow` for WAL
 *     entries), both directions;
 *   - `version_hint.json` ({"version":N}, compact) encode and lenient parse;
 *   - the latest-version search of §3.3 as an I/O-free state machine;
 *   - a tiny protobuf wire walker (mw_pb_next) that both manifest codecs use
 *     to locate errors and to see field presence protoc-c hides.
 *
 * Limits: MW_SHARD_MAX_* below; a decoder refuses anything past them.
 *
 * Errors: negative errno. -EBADMSG (with a reason in *err) for malformed
 * bytes, -EINVAL for a name that is not a bit-reversed name (callers listing a
 * directory skip such names), -ENOMEM, -ENOSPC when an output array is short.
 */
#ifndef MW_LANCE_SHARD_MANIFEST_H
#define MW_LANCE_SHARD_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "lance/pbwire.h" /* mw_pb_put_varint, for the manifest writers */
#include "common/err.h"

#define MW_SHARD_MANIFEST_MAX_BYTES ((size_t)16 << 20)
#define MW_SHARD_MAX_SSTABLES 100000
#define MW_SHARD_MAX_PATH_BYTES 4096
#define MW_SHARD_MAX_FIELD_ENTRIES 1024
#define MW_SHARD_MAX_FIELD_ID_BYTES 1024
#define MW_SHARD_MAX_FIELD_VALUE_BYTES 4096

/* 64 binary digits + ".binpb"/".arrow" + NUL fits in this. */
#define MW_BITREV_DIGITS 64
#define MW_BITREV_NAME_BYTES 96

#define MW_SHARD_MANIFEST_EXT ".binpb"
#define MW_WAL_ENTRY_EXT ".arrow"

typedef enum mw_shard_status {
  MW_SHARD_ACTIVE = 0,
  MW_SHARD_SEALED = 1,
} mw_shard_status_t;

/* One flushed SSTable (ShardManifest.sstables). The three size fields are
 * proto3 `optional`; 0 means absent (Lance never writes a 0, §3.1). */
typedef struct mw_sstable_ref {
  uint64_t generation;
  char *path;               /* directory name "<8hex>_gen_<G>", no '/' */
  uint64_t in_memory_bytes;
  uint64_t physical_rows;
  uint64_t primary_key_bytes;
} mw_sstable_ref_t;

typedef struct mw_shard_field_entry {
  char *field_id;
  uint8_t *value;
  size_t value_len;
} mw_shard_field_entry_t;

typedef struct mw_shard_manifest {
  uint64_t version;
  uint64_t writer_epoch;
  uint64_t replay_after_wal_entry_position;
  uint64_t wal_entry_position_last_seen;
  uint64_t current_generation;
  mw_sstable_ref_t *sstables;
  size_t n_sstables;
  uint32_t shard_spec_id;
  bool has_shard_id;
  uint8_t shard_id[16];     /* RFC (big-endian) byte order */
  mw_shard_field_entry_t *field_entries;
  size_t n_field_entries;
  mw_shard_status_t status;
} mw_shard_manifest_t;

void mw_shard_manifest_init(mw_shard_manifest_t *m);
void mw_shard_manifest_free(mw_shard_manifest_t *m);
/* Deep copy (dst is freed first). */
int mw_shard_manifest_copy(mw_shard_manifest_t *dst, const mw_shard_manifest_t *src);
/* Append an SSTable (path copied). */
int mw_shard_manifest_add_sstable(mw_shard_manifest_t *m, uint64_t generation, const char *path,
                                  uint64_t in_memory_bytes, uint64_t physical_rows,
                                  uint64_t primary_key_bytes);
/* Append the protobuf encoding to `out`. -EINVAL if m breaks a limit. */
int mw_shard_manifest_encode(const mw_shard_manifest_t *m, mw_buf_t *out);
/* Decode `n` bytes into *m (initialised here; free with mw_shard_manifest_free
 * even on failure). Unknown fields are skipped, an unknown status is ACTIVE. */
int mw_shard_manifest_decode(const uint8_t *p, size_t n, mw_shard_manifest_t *m, mw_err_t *err);

/* --- bit-reversed names (§1.2) --- */
/* Write bits of n LSB first as 64 '0'/'1' characters, then `ext` (may be "" or
 * NULL). Returns the name length or -ENOSPC. */
int mw_bitrev_name(uint64_t n, const char *ext, char *out, size_t out_len);
/* Parse the text before the first '.': exactly 64 '0'/'1' characters.
 * Returns 0, or -EINVAL for any other name (the caller ignores it). */
int mw_bitrev_parse(const char *name, uint64_t *out);
/* Shorthands: manifest names need the ".binpb" suffix (listing rule of §3.3),
 * WAL names take whatever follows the digits (Lance's scan does the same). */
int mw_shard_manifest_name(uint64_t version, char *out, size_t out_len);
int mw_shard_manifest_name_parse(const char *name, uint64_t *version);
int mw_wal_entry_name(uint64_t position, char *out, size_t out_len);

/* --- version_hint.json (§1.3) --- */
#define MW_VERSION_HINT_MAX_BYTES 4096
/* Write `{"version":N}` (no spaces, no newline, NUL-terminated). Returns the
 * length (without NUL) or -ENOSPC. */
int mw_version_hint_encode(uint64_t version, char *out, size_t out_len);
/* Accept `{"version":N}` with optional JSON whitespace around tokens; anything
 * else (other keys, signs, fractions, overflow, trailing bytes) -> -EBADMSG,
 * and the caller falls back to hint 1. */
int mw_version_hint_parse(const uint8_t *p, size_t n, uint64_t *version, mw_err_t *err);

/* --- latest-version search (§3.3), no I/O ---
 *
 *   mw_latest_search_t s;
 *   mw_latest_search_start(&s, hint_or_0, batch);
 *   while (!mw_latest_search_done(&s)) {
 *     uint64_t v[MW_LATEST_MAX_BATCH];
 *     size_t k = mw_latest_search_next(&s, v, MW_LATEST_MAX_BATCH);
 *     for (i < k) mw_latest_search_feed(&s, v[i], exists(v[i]));   // any order
 *   }
 *   latest = mw_latest_search_result(&s);   // 0 = no manifest
 *
 * Steps: probe the hint (0/unreadable counts as 1); if missing and hint > 1,
 * probe 1; then probe latest+1..latest+B until a whole batch is missing.
 * mw_latest_search_hint_missed() says the hinted version was absent: Lance's
 * reader then trusts version 1 and the probes after it, which is wrong once
 * old versions are collected (docs/engine.md "Shard manifest history"), so
 * memwald's own readers LIST the folder in that case. */
#define MW_LATEST_DEFAULT_BATCH 2
#define MW_LATEST_MAX_BATCH 64

typedef struct mw_latest_search {
  int state;
  uint64_t hint;
  uint32_t batch;
  uint64_t latest;
  uint64_t base;        /* current step probes base+1 .. base+count */
  uint32_t count;
  uint64_t fed_mask;    /* bit i: probe base+1+i answered */
  uint64_t found_max;   /* largest existing version seen in this step */
  bool found;
  bool hint_missed;     /* the hinted version (or 1) did not exist */
} mw_latest_search_t;

/* batch 0 -> MW_LATEST_DEFAULT_BATCH; clamped to MW_LATEST_MAX_BATCH. */
void mw_latest_search_start(mw_latest_search_t *s, uint64_t hint, uint32_t batch);
/* The versions to probe now (the same list until each one is fed). Returns
 * how many were written (<= max), 0 when done. */
size_t mw_latest_search_next(const mw_latest_search_t *s, uint64_t *versions, size_t max);
/* Report one probe. -EINVAL if `version` is not outstanding in this step. */
int mw_latest_search_feed(mw_latest_search_t *s, uint64_t version, bool exists);
bool mw_latest_search_done(const mw_latest_search_t *s);
uint64_t mw_latest_search_result(const mw_latest_search_t *s);
bool mw_latest_search_hint_missed(const mw_latest_search_t *s);

/* --- protobuf wire walker (shared by both manifest codecs) --- */
typedef struct mw_pb_field {
  uint32_t tag;
  uint8_t wire;          /* 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32 */
  uint64_t value;        /* varint / fixed value */
  const uint8_t *data;   /* wire 2: payload */
  size_t len;            /* wire 2: payload length */
  size_t start;          /* offset of the key */
  size_t end;            /* offset just past the field */
} mw_pb_field_t;

/* Read the field at *pos (advancing it). Returns 1, 0 at the end, or
 * -EBADMSG naming the offset (base_off is added to offsets in messages). */
int mw_pb_next(const uint8_t *p, size_t n, size_t *pos, mw_pb_field_t *f, size_t base_off,
               mw_err_t *err);
/* Check that p..n is a well-formed sequence of fields (top level only). */
int mw_pb_check(const uint8_t *p, size_t n, size_t base_off, const char *what, mw_err_t *err);
/* Append a varint. */

#endif
