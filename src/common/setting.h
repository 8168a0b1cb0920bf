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

#include <stdint.h>

#include "common/err.h"

#define MW_SETTING_TEXT_SHOWN 64 /* bytes of a bad value quoted in the reason */

enum { MW_SETTING_SIZES = 1 }; /* flags: accept KiB, MiB, GiB after the digits */

/* Parses text (may be NULL: no value) as the setting `key` and stores the
 * number in *out; *out is untouched on failure. */
int mw_setting_parse_u64(const char *key, const char *text, uint64_t lo, uint64_t hi, unsigned flags,
                         uint64_t *out, mw_err_t *err);

#endif
