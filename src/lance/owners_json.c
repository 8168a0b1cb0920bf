/*
 * owners_json.c — see owners_json.h.
 *
 * Design: a record is written by one function (shard/owners.c
 * mw_owner_encode) with a fixed member order and no escapes, so the parse is
 * a search for each member's `"name":` within the record's n bytes rather
 * than a JSON parser: every search is bounded by n, every copy by the
 * destination's size. An epoch is at most 20 digits (a uint64_t); more is
 * malformed.
 */
#include "lance/owners_json.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#define MAX_EPOCH_DIGITS 20

/* The string value of member `name` (no escapes) into out[cap]. */
static int member_str(const char *j, size_t n, const char *name, char *out, size_t cap,
                      mw_err_t *err) {
  assert(j != NULL);
  assert(cap > 0);
  char pat[48];
  size_t plen = (size_t)snprintf(pat, sizeof pat, "\"%s\":\"", name);
  assert(plen < sizeof pat);
  const char *a = memmem(j, n, pat, plen);
  if (a == NULL) return mw_err_set(err, -EBADMSG, "owner record: no \"%s\" string", name);
  a += plen;
  const char *z = memchr(a, '"', (size_t)(j + n - a));
  if (z == NULL) return mw_err_set(err, -EBADMSG, "owner record: \"%s\" not closed", name);
  size_t len = (size_t)(z - a);
  if (len >= cap)
    return mw_err_set(err, -EBADMSG, "owner record: \"%s\" longer than %zu bytes", name, cap - 1);
  if (memchr(a, '\\', len) != NULL)
    return mw_err_set(err, -EBADMSG, "owner record: \"%s\" holds an escape", name);
  memcpy(out, a, len);
  out[len] = '\0';
  return 0;
}

/* The decimal value of "epoch". */
static int member_epoch(const char *j, size_t n, uint64_t *out, mw_err_t *err) {
  assert(j != NULL);
  assert(out != NULL);
  const char *e = memmem(j, n, "\"epoch\":", 8);
  if (e == NULL) return mw_err_set(err, -EBADMSG, "owner record: no \"epoch\" number");
  uint64_t v = 0;
  size_t k = 0;
  for (e += 8; e < j + n && *e >= '0' && *e <= '9'; e++, k++) {
    if (k == MAX_EPOCH_DIGITS || v > (UINT64_MAX - (uint64_t)(*e - '0')) / 10)
      return mw_err_set(err, -EBADMSG, "owner record: \"epoch\" beyond 64 bits");
    v = v * 10 + (uint64_t)(*e - '0');
  }
  if (k == 0) return mw_err_set(err, -EBADMSG, "owner record: \"epoch\" is not a number");
  *out = v;
  return 0;
}

int mw_owner_json_parse(const char *json, size_t n, mw_owner_json_t *out, mw_err_t *err) {
  assert(json != NULL);
  assert(out != NULL);
  if (n == 0 || n > MW_OWNER_RECORD_BYTES)
    return mw_err_set(err, -EBADMSG, "owner record: %zu bytes (want 1 to %d)", n, MW_OWNER_RECORD_BYTES);
  int rc = member_str(json, n, "node", out->node, sizeof out->node, err);
  if (rc == 0) rc = member_str(json, n, "address", out->address, sizeof out->address, err);
  if (rc == 0) rc = member_epoch(json, n, &out->epoch, err);
  assert(rc < 0 || memchr(out->node, '\0', sizeof out->node) != NULL); /* terminated */
  return rc;
}
