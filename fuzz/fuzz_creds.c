/*
 * fuzz_creds.c — libFuzzer target for the credentials file parser
 * (src/net/creds.c, the file credentials_file names).
 *
 * Input: the file's bytes. Invariants: parse returns 0 or -EINVAL / -EFBIG
 * with a message; a parsed set has unique names, every token entry a
 * 32-byte hash, every grant a table and a permission in {write, delete};
 * lookups by every entry's name and subject find that entry; a token
 * lookup of the input itself never crashes; mw_cred_perms is within
 * MW_PERM_ALL.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/creds.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mw_creds_t *cs = NULL;
  mw_err_t err = {0};
  int rc = mw_creds_parse((const char *)data, size, "fuzz", &cs, &err);
  if (rc < 0) {
    if (cs != NULL || err.msg[0] == '\0') abort();
    if (rc != -EINVAL && rc != -EFBIG && rc != -ENOMEM) abort();
    return 0;
  }
  for (size_t i = 0; i < cs->n; i++) {
    const mw_cred_t *c = &cs->v[i];
    if (mw_creds_by_name(cs, c->name) != c) abort();
    if (c->kind == MW_CRED_CERT && mw_creds_by_subject(cs, c->subject) != c) abort();
    if (c->n_grants == 0 || c->n_grants > MW_CREDS_MAX_GRANTS) abort();
    for (size_t g = 0; g < c->n_grants; g++)
      if (c->grants[g].perms == 0 || c->grants[g].perms > MW_PERM_ALL || !c->grants[g].table[0]) abort();
    if (mw_cred_perms(c, "events") > MW_PERM_ALL) abort();
  }
  (void)mw_creds_by_token(cs, (const char *)data, size < 64 ? size : 64);
  mw_creds_free(cs);
  return 0;
}
