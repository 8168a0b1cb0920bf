/*
 * test_creds.c — the credentials file (src/net/creds.h): a golden file and
 * its lookups, every refusal with FILE:LINE, and the legacy auth_token
 * principal. The hashes below are SHA-256 of "secret-a" and "secret-b"
 * (python3 -c 'import hashlib; print(hashlib.sha256(b"secret-a").hexdigest())').
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cases.h"

#include "net/creds.h"

#define HASH_A "sha256:8766b9cb08e6040b704f1e3ee1e186efccf2635b1d2634d6525333007e6aeae1"
#define HASH_B "sha256:ff492ef788c89b555e6f738b33d2422f57dbb6656af2402155672c5f123a90af"

static const char GOLDEN[] =
    "# producers\n"
    "token ingest-a " HASH_A " events=write  logs=write,delete\r\n"
    "\n"
    "   token ops " HASH_B " *=write,delete events=delete   # ops may not write events\n"
    "cert shipper \"CN=rsyslog example,O=Acme\" *=write\n";

static mw_creds_t *parse(const char *text) {
  mw_creds_t *cs = NULL;
  mw_err_t err = {0};
  assert_int_equal(mw_creds_parse(text, strlen(text), "creds", &cs, &err), 0);
  assert_non_null(cs);
  return cs;
}

static void test_golden(void **state) {
  (void)state;
  mw_creds_t *cs = parse(GOLDEN);
  assert_int_equal(cs->n, 3);
  const mw_cred_t *a = mw_creds_by_token(cs, "secret-a", 8), *b = mw_creds_by_token(cs, "secret-b", 8);
  assert_non_null(a);
  assert_non_null(b);
  assert_string_equal(a->name, "ingest-a");
  assert_string_equal(b->name, "ops");
  assert_null(mw_creds_by_token(cs, "secret-c", 8));
  assert_null(mw_creds_by_token(cs, "secret-", 7));
  assert_null(mw_creds_by_token(cs, HASH_A, strlen(HASH_A))); /* the hash is not the token */
  assert_int_equal(mw_cred_perms(a, "events"), MW_PERM_WRITE);
  assert_int_equal(mw_cred_perms(a, "logs"), MW_PERM_ALL);
  assert_int_equal(mw_cred_perms(a, "other"), 0);
  assert_int_equal(mw_cred_perms(b, "events"), MW_PERM_DELETE); /* its own grant wins over * */
  assert_int_equal(mw_cred_perms(b, "other"), MW_PERM_ALL);
  const mw_cred_t *s = mw_creds_by_subject(cs, "CN=rsyslog example,O=Acme");
  assert_non_null(s);
  assert_string_equal(s->name, "shipper");
  assert_null(mw_creds_by_subject(cs, "CN=rsyslog example"));
  assert_null(mw_creds_by_token(cs, "CN=rsyslog example,O=Acme", 25)); /* a cert is no token */
  assert_ptr_equal(mw_creds_by_name(cs, "ops"), b);
  assert_string_equal(mw_perms_name(mw_cred_perms(s, "x")), "write");
  mw_creds_free(cs);
}

static void refused(const char *text, const char *where, const char *why) {
  mw_creds_t *cs = NULL;
  mw_err_t err = {0};
  assert_int_equal(mw_creds_parse(text, strlen(text), "creds", &cs, &err), -EINVAL);
  assert_null(cs);
  if (strstr(err.msg, where) == NULL || strstr(err.msg, why) == NULL) fail_msg("message: %s", err.msg);
}

static void test_refusals(void **state) {
  (void)state;
  refused("token a sha256:abc events=write\n", "creds:1:", "64 hex digits");
  refused("# x\ntoken a " HASH_A " events=read\n", "creds:2:", "unknown permission 'read'");
  refused("token a " HASH_A "\n", "creds:1:", "expected token NAME sha256:HEX GRANT");
  refused("token a " HASH_A " events\n", "creds:1:", "a grant is TABLE=write");
  refused("token a " HASH_A " events=\n", "creds:1:", "no permission named");
  refused("token a " HASH_A " e=write e=delete\n", "creds:1:", "granted twice");
  refused("token a " HASH_A " e=write\ntoken a " HASH_B " e=write\n", "creds:2:", "used twice");
  refused("cert a \"CN=x e=write\n", "creds:1:", "unterminated quote");
  refused("cert a \"CN=x\" e=write\ncert b \"CN=x\" e=write\n", "creds:2:", "listed twice");
  refused("user a " HASH_A " e=write\n", "creds:1:", "expected token or cert");
  refused("token a/b " HASH_A " e=write\n", "creds:1:", "a name is");
  refused("token a " HASH_A " bad/table=write\n", "creds:1:", "bad table name");
}

static void test_auth_token(void **state) {
  (void)state;
  mw_creds_t *cs = NULL;
  assert_int_equal(mw_creds_add_token(&cs, "auth_token", "s3cret", MW_PERM_ALL), 0);
  const mw_cred_t *c = mw_creds_by_token(cs, "s3cret", 6);
  assert_non_null(c);
  assert_int_equal(mw_cred_perms(c, "anything"), MW_PERM_ALL);
  assert_null(mw_creds_by_token(cs, "s3cre", 5));
  assert_null(mw_creds_by_token(cs, "", 0));
  mw_creds_free(cs);
  cs = parse("");
  assert_int_equal(cs->n, 0);
  mw_creds_free(cs);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_golden), cmocka_unit_test(test_refusals),
                                     cmocka_unit_test(test_auth_token)};
  return tu_run_group(tests, NULL, NULL);
}
