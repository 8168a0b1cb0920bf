/*
 * test_owners_json.c — the owner record's parse (lance/owners_json.h).
 *
 * Proves: a record as shard/owners.c writes it (every member, in the
 * writer's order) gives its node, address and epoch; the parse reads only
 * the n bytes it is given (the record is not NUL-terminated in storage);
 * each missing or malformed member is -EBADMSG with a reason naming it;
 * the size limits hold (empty, over MW_OWNER_RECORD_BYTES, a node or
 * address longer than its field); an epoch beyond 64 bits is refused, the
 * largest one is read exactly.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cases.h"
#include "lance/owners_json.h"

#define RECORD                                                                              \
  "{\"node\":\"9f1c2b3a4d5e6f708192a3b4c5d6e7f8\",\"address\":\"127.0.0.1:7070\",\"epoch\":5," \
  "\"pid\":4242,\"host\":\"db-3\",\"at_ms\":1764633600000}\n"

static int parse(const char *s, mw_owner_json_t *o, mw_err_t *err) {
  return mw_owner_json_parse(s, strlen(s), o, err);
}

static void test_record(void **state) {
  (void)state;
  mw_owner_json_t o;
  mw_err_t err = {0};
  assert_int_equal(parse(RECORD, &o, &err), 0);
  assert_string_equal(o.node, "9f1c2b3a4d5e6f708192a3b4c5d6e7f8");
  assert_string_equal(o.address, "127.0.0.1:7070");
  assert_int_equal(o.epoch, 5);
  /* only n bytes are read: a record cut before its epoch has none */
  const char *cut = strstr(RECORD, "\"epoch\"");
  assert_int_equal(mw_owner_json_parse(RECORD, (size_t)(cut - RECORD), &o, &err), -EBADMSG);
  assert_non_null(strstr(err.msg, "epoch"));
}

static void expect_bad(const char *rec, const char *named) {
  mw_owner_json_t o;
  mw_err_t err = {0};
  assert_int_equal(parse(rec, &o, &err), -EBADMSG);
  if (strstr(err.msg, named) == NULL) fail_msg("'%s' does not name %s", err.msg, named);
}

static void test_members(void **state) {
  (void)state;
  expect_bad("{\"address\":\"a:1\",\"epoch\":1}", "node");
  expect_bad("{\"node\":\"n\",\"epoch\":1}", "address");
  expect_bad("{\"node\":\"n\",\"address\":\"a:1\"}", "epoch");
  expect_bad("{\"node\":\"n\",\"address\":\"a:1\",\"epoch\":x}", "epoch");
  expect_bad("{\"node\":\"n\",\"address\":\"a:1", "address");
  expect_bad("{\"node\":\"n\\\"x\",\"address\":\"a:1\",\"epoch\":1}", "node");
  expect_bad("{\"node\":\"n\",\"address\":\"a:1\",\"epoch\":18446744073709551616}", "epoch");
  expect_bad("{\"node\":\"n\",\"address\":\"a:1\",\"epoch\":000000000000000000001}", "epoch");
  mw_owner_json_t o;
  assert_int_equal(parse("{\"node\":\"n\",\"address\":\"a:1\",\"epoch\":18446744073709551615}", &o, NULL), 0);
  assert_true(o.epoch == UINT64_MAX);
}

static void test_limits(void **state) {
  (void)state;
  mw_owner_json_t o;
  assert_int_equal(mw_owner_json_parse("", 0, &o, NULL), -EBADMSG);
  char big[MW_OWNER_RECORD_BYTES + 64];
  memset(big, ' ', sizeof big);
  memcpy(big, RECORD, strlen(RECORD));
  assert_int_equal(mw_owner_json_parse(big, MW_OWNER_RECORD_BYTES, &o, NULL), 0);
  assert_int_equal(mw_owner_json_parse(big, MW_OWNER_RECORD_BYTES + 1, &o, NULL), -EBADMSG);
  char rec[512], node[MW_OWNER_NODE_BYTES + 1];
  memset(node, 'a', sizeof node - 1);
  node[sizeof node - 1] = '\0';
  snprintf(rec, sizeof rec, "{\"node\":\"%s\",\"address\":\"a:1\",\"epoch\":1}", node);
  expect_bad(rec, "node");
  node[MW_OWNER_NODE_BYTES - 1] = '\0'; /* the longest that fits */
  snprintf(rec, sizeof rec, "{\"node\":\"%s\",\"address\":\"a:1\",\"epoch\":1}", node);
  assert_int_equal(parse(rec, &o, NULL), 0);
  assert_int_equal(strlen(o.node), MW_OWNER_NODE_BYTES - 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_record),
      cmocka_unit_test(test_members),
      cmocka_unit_test(test_limits),
  };
  return tu_run_group_name("owners_json", tests, NULL, NULL);
}
