/*
 * creds.h — producers' credentials: who may write or delete in which table.
 *
 * Owns: the parsed credentials file (credentials_file), one principal a
 * line, and the lookups the server makes: by the token a producer sends in
 * `AUTH <token>`, by the verified client certificate's subject, and a
 * principal's permissions on a table.
 *
 *   # comments and blank lines are ignored
 *   token ingest-a  sha256:9f86d081...(64 hex)  events=write  logs=write,delete
 *   cert  shipper   "CN=rsyslog.example,O=Acme"  *=write
 *
 * `token NAME sha256:HEX GRANTS...`: the SHA-256 of the token, never the
 * token itself (`memwalctl token NAME GRANTS...` makes one). `cert NAME
 * SUBJECT GRANTS...`: a client certificate whose subject (RFC 2253, as
 * `openssl x509 -noout -subject -nameopt RFC2253` prints it, quoted when it
 * holds spaces) is this, verified against tls_ca_file. A grant is
 * `TABLE=write`, `TABLE=delete` or `TABLE=write,delete`; TABLE `*` is every
 * table, and a table's own grant wins over `*`. Names are unique.
 *
 * Tokens are high-entropy secrets, so one SHA-256 (no salt, no stretching)
 * is enough to keep the file from being a list of passwords; the lookup
 * hashes what the producer sent and compares against every entry in
 * constant time.
 *
 * Errors: negative errno; -EINVAL names FILE:LINE and the reason in *err.
 */
#ifndef MW_NET_CREDS_H
#define MW_NET_CREDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define MW_CREDS_MAX_FILE_BYTES ((size_t)4 << 20)
#define MW_CREDS_MAX_ENTRIES 10000
#define MW_CREDS_MAX_GRANTS 32 /* per principal */
#define MW_CREDS_NAME_BYTES 64
#define MW_CREDS_TABLE_BYTES 128
#define MW_CREDS_SUBJECT_BYTES 256
#define MW_CREDS_MAX_TOKEN_BYTES 512

enum { MW_PERM_WRITE = 1u, MW_PERM_DELETE = 2u, MW_PERM_ALL = 3u };
typedef enum { MW_CRED_TOKEN = 0, MW_CRED_CERT } mw_cred_kind_t;

typedef struct mw_cred_grant {
  char table[MW_CREDS_TABLE_BYTES]; /* "*" = every table */
  unsigned perms;
} mw_cred_grant_t;

typedef struct mw_cred {
  char name[MW_CREDS_NAME_BYTES];
  mw_cred_kind_t kind;
  unsigned char hash[32];                  /* token: SHA-256 of the token */
  char subject[MW_CREDS_SUBJECT_BYTES];    /* cert */
  mw_cred_grant_t grants[MW_CREDS_MAX_GRANTS];
  size_t n_grants;
} mw_cred_t;

typedef struct mw_creds {
  mw_cred_t *v;
  size_t n;
} mw_creds_t;

/* Parse a file's text (`name` for messages). *out is allocated. */
int mw_creds_parse(const char *text, size_t len, const char *name, mw_creds_t **out, mw_err_t *err);
int mw_creds_load(const char *path, mw_creds_t **out, mw_err_t *err);
/* Add a principal for the legacy `auth_token` (every table, write and
 * delete), named "auth_token". *cs may be NULL: created. */
int mw_creds_add_token(mw_creds_t **cs, const char *name, const char *token, unsigned perms);
void mw_creds_free(mw_creds_t *cs);

/* The principal whose token is tok (n bytes), or NULL. Time independent of
 * which entry (or whether one) matches. */
const mw_cred_t *mw_creds_by_token(const mw_creds_t *cs, const char *tok, size_t n);
const mw_cred_t *mw_creds_by_subject(const mw_creds_t *cs, const char *subject);
const mw_cred_t *mw_creds_by_name(const mw_creds_t *cs, const char *name);
/* MW_PERM_* bits of cred on table (its own grant, else `*`, else 0). */
unsigned mw_cred_perms(const mw_cred_t *cred, const char *table);
/* "write", "delete", "write,delete" or "none". */
const char *mw_perms_name(unsigned perms);

#endif
