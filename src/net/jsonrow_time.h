/*
 * jsonrow_time.h — dates, times of day and instants as JSON strings, for
 * jsonrow.c's temporal columns (date32/64, time32/64, timestamp).
 *
 * Owns: the text forms only: "YYYY-MM-DD" (proleptic Gregorian),
 * "HH:MM:SS[.fraction]" (up to 9 fraction digits) and RFC 3339 instants
 * ("YYYY-MM-DDTHH:MM:SS[.f][Z|+hh:mm|-hh:mm]", T, t or a space; no offset =
 * UTC), each to the column's integer in its unit (lance/types.h MW_UNIT_*).
 * No allocation, no locale, no time zone database.
 *
 * Errors: false, or a static reason a person reads ("has a fraction finer
 * than the column's unit"); jsonrow.c names the field and the text.
 */
#ifndef MW_NET_JSONROW_TIME_H
#define MW_NET_JSONROW_TIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Units per second of unit (MW_UNIT_S .. MW_UNIT_NS). */
int64_t mw_jsonrow_per_second(uint8_t unit);
/* "YYYY-MM-DD" at p (10 bytes readable): days since 1970-01-01. */
bool mw_jsonrow_date(const uint8_t *p, int64_t *days);
/* "HH:MM:SS[.fraction]" at p[0..n): *ns = nanoseconds since midnight, *len
 * = bytes used, *frac_digits = digits after the point (at most 9). */
bool mw_jsonrow_clock(const uint8_t *p, size_t n, int64_t *ns, size_t *len, int *frac_digits);
/* Nanoseconds `ns` in `unit`; false if that loses digits. */
bool mw_jsonrow_ns_to_unit(int64_t ns, uint8_t unit, int64_t *out);
/* An RFC 3339 instant p[0..n) in `unit` since the epoch: NULL, or a static
 * reason. */
const char *mw_jsonrow_rfc3339(const uint8_t *p, size_t n, uint8_t unit, int64_t *out);

#endif
