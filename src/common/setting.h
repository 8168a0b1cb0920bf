/*
 * setting.h — a setting's number read from its text (`key = value` in a
 * config file, a table's writer_config_defaults, --set).
 *
 * Owns: nothing; one parser every setter calls, so each layer's settings
 * accept the same spellings and refuse bad ones with the same kind of
 * message. A setter keeps its own table of keys and limits.
 *
 * Accepted: decimal digits only (no sign, no spaces, no 0x), at most 64
 * bits; with MW_SETTING_SIZES also a unit after optional spaces: KiB, MiB
 * or GiB (binary multiples). The result must lie in [lo, hi]: every
 * setting states its limit.
 *
 * Errors: -EINVAL for every refusal, with a reason in *err that names the
 * key, the text (cut at MW_SETTING_TEXT_SHOWN bytes) and what was wrong:
 *   config compaction_interval_ms: '5' is outside 10..86400000
 *   config gc_grace_ms: expected a whole number in 0..2592000000, got '-1'
 */
#ifndef MW_COMMON_SETTING_H
#define MW_COMMON_SETTING_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define MW_SETTING_TEXT_SHOWN 64 /* bytes of a bad value quoted in the reason */

enum { MW_SETTING_SIZES = 1 }; /* flags: accept KiB, MiB, GiB after the digits */

/* Parses text (may be NULL: no value) as the setting `key` and stores the
 * number in *out; *out is untouched on failure. key NULL: the reason leaves
 * out its "config <key>: " (a caller that names the place itself, as the
 * daemon's config loader does with "[section] key:"). */
int mw_setting_parse_u64(const char *key, const char *text, uint64_t lo, uint64_t hi, unsigned flags,
                         uint64_t *out, mw_err_t *err);

/* A numeric setting of a config struct: its key, its limit, and where it
 * goes (a uint32_t or uint64_t field). A setter keeps a table of them and
 * hands it to mw_setting_set_num. */
typedef struct mw_setting_num {
  const char *key;
  uint64_t lo, hi;
  size_t offset, size;
} mw_setting_num_t;

#define MW_SETTING_NUM(type, field, key, lo, hi) \
  { key, lo, hi, offsetof(type, field), sizeof(((type *)0)->field) }

/* Finds key in table[0..n) and stores the parsed value in that field of
 * *config. -ENOENT when no entry names key (nothing set, err untouched);
 * otherwise as mw_setting_parse_u64. */
int mw_setting_set_num(void *config, const mw_setting_num_t *table, size_t n, const char *key,
                       const char *value, mw_err_t *err);

#endif
