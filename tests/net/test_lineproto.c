/*
 * test_lineproto.c — framing and reply ordering of the producers' protocol
 * (src/net/lineproto.h), without sockets.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cases.h"

#include "net/lineproto.h"

static void feed(mw_lineproto_t *lp, const char *s) {
  assert_int_equal(mw_lp_feed(lp, s, strlen(s)), 0);
}

static void expect(mw_lineproto_t *lp, mw_lp_kind_t kind, uint64_t line, const char *data) {
  mw_lp_request_t r;
  assert_int_equal(mw_lp_next(lp, &r), 1);
  assert_int_equal(r.kind, kind);
  assert_int_equal(r.line, line);
  if (data) {
    assert_int_equal(r.len, strlen(data));
    assert_memory_equal(r.data, data, r.len);
  }
}

static void expect_err(mw_lineproto_t *lp, uint64_t line, mw_lp_code_t code) {
  mw_lp_request_t r;
  assert_int_equal(mw_lp_next(lp, &r), 1);
  assert_int_equal(r.kind, MW_LP_ERROR);
  assert_int_equal(r.line, line);
  assert_int_equal(r.code, code);
  assert_true(strlen(r.msg) > 0);
}

static void expect_none(mw_lineproto_t *lp) {
  mw_lp_request_t r;
  assert_int_equal(mw_lp_next(lp, &r), 0);
}

static void test_framing(void **state) {
  (void)state;
  mw_lineproto_t lp;
  assert_int_equal(mw_lp_init(&lp, NULL), 0);
  feed(&lp, "USE events\n{\"id\":1}\r\nPING\n\nDEL {\"id\":2}\nSYNC\nQUIT\nAUTH s3cret\n");
  expect(&lp, MW_LP_USE, 1, "events");
  expect(&lp, MW_LP_ROW, 2, "{\"id\":1}");
  expect(&lp, MW_LP_PING, 3, NULL);
  /* line 4 is empty: counted, no request */
  expect(&lp, MW_LP_DEL, 5, "{\"id\":2}");
  expect(&lp, MW_LP_SYNC, 6, NULL);
  expect(&lp, MW_LP_QUIT, 7, NULL);
  expect(&lp, MW_LP_AUTH, 8, "s3cret");
  expect_none(&lp);
  /* a line split over many feeds */
  feed(&lp, "{\"id\"");
  expect_none(&lp);
  feed(&lp, ":3}");
  expect_none(&lp);
  feed(&lp, "\nPI");
  expect(&lp, MW_LP_ROW, 9, "{\"id\":3}");
  expect_none(&lp);
  feed(&lp, "NG\n");
  expect(&lp, MW_LP_PING, 10, NULL);
  /* unknown things and binary garbage */
  static const char junk[] = "HELLO\nping\n\x01\x02\xff\x00zz\nPINGX\nDEL\nUSE\nUSE a b\nARROW x\nARROW 0\n";
  assert_int_equal(mw_lp_feed(&lp, junk, sizeof junk - 1), 0);
  for (uint64_t l = 11; l <= 19; l++) expect_err(&lp, l, MW_LP_E_PARSE);
  expect_none(&lp);
  mw_lp_free(&lp);
}

static void test_too_long(void **state) {
  (void)state;
  mw_lineproto_t lp;
  mw_lp_limits_t lim = {.max_line_bytes = 32};
  assert_int_equal(mw_lp_init(&lp, &lim), 0);
  char big[200];
  memset(big, 'x', sizeof big);
  big[0] = '{';
  /* exactly at the limit (with \r\n) is fine */
  char ok[40];
  memset(ok, 'y', 32);
  ok[0] = '{';
  memcpy(ok + 32, "\r\n", 3);
  feed(&lp, ok);
  mw_lp_request_t r;
  assert_int_equal(mw_lp_next(&lp, &r), 1);
  assert_int_equal(r.kind, MW_LP_ROW);
  assert_int_equal(r.len, 32);
  /* too long within one feed */
  assert_int_equal(mw_lp_feed(&lp, big, 100), 0);
  feed(&lp, "\nPING\n");
  expect_err(&lp, 2, MW_LP_E_TOO_LONG);
  expect(&lp, MW_LP_PING, 3, NULL);
  /* too long, detected before its newline arrives; the rest is not buffered */
  for (int i = 0; i < 100; i++) {
    assert_int_equal(mw_lp_feed(&lp, big, sizeof big), 0);
    if (i == 0) expect_err(&lp, 4, MW_LP_E_TOO_LONG);
    else expect_none(&lp);
    assert_true(mw_lp_buffered(&lp) <= sizeof big);
  }
  feed(&lp, "tail of the long line\nSYNC\n");
  expect(&lp, MW_LP_SYNC, 5, NULL);
  expect_none(&lp);
  mw_lp_free(&lp);
}

static void test_arrow(void **state) {
  (void)state;
  mw_lineproto_t lp;
  mw_lp_limits_t lim = {.max_line_bytes = 64, .max_frame_bytes = 100};
  assert_int_equal(mw_lp_init(&lp, &lim), 0);
  feed(&lp, "ARROW 10\n0123\n");
  expect_none(&lp);
  feed(&lp, "56789PING\n");
  mw_lp_request_t r;
  assert_int_equal(mw_lp_next(&lp, &r), 1);
  assert_int_equal(r.kind, MW_LP_ARROW);
  assert_int_equal(r.line, 1);
  assert_int_equal(r.len, 10);
  assert_memory_equal(r.data, "0123\n56789", 10);
  assert_int_equal(r.bytes, 9 + 10);
  expect(&lp, MW_LP_PING, 2, NULL);
  /* oversized frame: ERR too_long, its bytes skipped, framing continues */
  feed(&lp, "ARROW 150\n");
  expect_err(&lp, 3, MW_LP_E_TOO_LONG);
  char junk[150];
  memset(junk, '\n', sizeof junk);
  assert_int_equal(mw_lp_feed(&lp, junk, 100), 0);
  expect_none(&lp);
  assert_int_equal(mw_lp_feed(&lp, junk, 50), 0);
  feed(&lp, "QUIT\n");
  expect(&lp, MW_LP_QUIT, 4, NULL);
  mw_lp_free(&lp);
}

static char *drain(mw_lineproto_t *lp) {
  static mw_buf_t out;
  mw_buf_reset(&out);
  assert_true(mw_lp_drain(lp, &out) >= 0);
  assert_int_equal(mw_buf_append(&out, "", 1), 0);
  return (char *)out.data;
}

static void test_replies(void **state) {
  (void)state;
  mw_lineproto_t lp;
  assert_int_equal(mw_lp_init(&lp, NULL), 0);
  uint64_t t1, t2, t3, ts;
  assert_int_equal(mw_lp_push_rows(&lp, 3, 1, 3, 30, &t1), 0);
  assert_int_equal(mw_lp_push_err(&lp, 4, MW_LP_E_TYPE, "field \"v\": bad\nnews", 10), 0);
  assert_int_equal(mw_lp_push_rows(&lp, 2, 5, 6, 20, &t2), 0);
  assert_int_equal(mw_lp_push_pong(&lp, 5), 0);
  assert_int_equal(mw_lp_push_rows(&lp, 1, 8, 8, 10, &t3), 0);
  assert_int_equal(mw_lp_push_sync(&lp, 5, &ts), 0);
  assert_int_equal(lp.unacked_bytes, 80);
  /* nothing leaves before the first submission completes */
  assert_string_equal(drain(&lp), "");
  mw_lp_rows_done(&lp, t2, MW_LP_OK, NULL);
  mw_lp_rows_done(&lp, t3, MW_LP_E_FENCED, "shard x: epoch 7 > 6");
  assert_string_equal(drain(&lp), "");
  mw_lp_rows_done(&lp, t1, MW_LP_OK, NULL);
  assert_string_equal(drain(&lp),
                      "OK 3\nERR 4 type field \"v\": bad news\nOK 2\nPONG\n"
                      "ERR 8 fenced 1 rows (lines 8-8) not written: shard x: epoch 7 > 6\n");
  assert_int_equal(lp.unacked_bytes, 5);
  mw_lp_sync_done(&lp, ts);
  assert_string_equal(drain(&lp), "SYNC 5\n");
  assert_int_equal(lp.unacked_bytes, 0);
  /* consecutive submissions merge into one OK; many items grow the ring */
  uint64_t t[100];
  for (int i = 0; i < 100; i++) assert_int_equal(mw_lp_push_rows(&lp, 2, 10 + i, 10 + i, 1, &t[i]), 0);
  for (int i = 99; i >= 0; i--) mw_lp_rows_done(&lp, t[i], MW_LP_OK, NULL);
  assert_string_equal(drain(&lp), "OK 200\n");
  assert_int_equal(mw_lp_push_sync(&lp, 5, &ts), 0);
  mw_lp_sync_done(&lp, ts);
  assert_int_equal(mw_lp_push_quit(&lp, 5), 0);
  assert_int_equal(mw_lp_push_pong(&lp, 5), 0);
  assert_string_equal(drain(&lp), "SYNC 205\n");
  assert_true(lp.quit);
  mw_lp_free(&lp);
}

/* REPLIES: the mode is queued in order, so it applies to exactly the
 * requests after it, whatever order the engine completes in. */
static void test_reply_modes(void **state) {
  (void)state;
  mw_lineproto_t lp;
  assert_int_equal(mw_lp_init(&lp, NULL), 0);
  feed(&lp, "REPLIES ERRORS\nREPLIES NONE\nREPLIES ALL\nREPLIES all\nREPLIES\n");
  mw_lp_request_t r;
  for (int m = MW_LP_REPLIES_ERRORS; m <= MW_LP_REPLIES_NONE + 1; m++) { /* ERRORS NONE ALL */
    assert_int_equal(mw_lp_next(&lp, &r), 1);
    assert_int_equal(r.kind, MW_LP_REPLIES);
    assert_int_equal(r.replies, m % MW_LP_N_REPLIES);
  }
  assert_int_equal(mw_lp_next(&lp, &r), 1); /* modes are upper case */
  assert_int_equal(r.kind, MW_LP_ERROR);
  assert_int_equal(r.line, 4);
  assert_int_equal(r.len, 11);
  assert_memory_equal(r.data, "REPLIES all", 11); /* an ERROR carries its line */
  expect_err(&lp, 5, MW_LP_E_PARSE);
  uint64_t t1, t2, t3, ts;
  mw_lp_replies_default(&lp, MW_LP_REPLIES_ERRORS);
  assert_int_equal(mw_lp_push_rows(&lp, 3, 1, 3, 30, &t1), 0);
  assert_int_equal(mw_lp_push_err(&lp, 4, MW_LP_E_TYPE, "bad", 10), 0);
  assert_int_equal(mw_lp_push_replies(&lp, MW_LP_REPLIES_NONE, 10), 0);
  assert_int_equal(mw_lp_push_rows(&lp, 2, 6, 7, 20, &t2), 0);
  assert_int_equal(mw_lp_push_err(&lp, 8, MW_LP_E_TYPE, "bad", 10), 0);
  assert_int_equal(mw_lp_push_pong(&lp, 5), 0);
  assert_int_equal(mw_lp_push_replies(&lp, MW_LP_REPLIES_ALL, 10), 0);
  assert_int_equal(mw_lp_push_rows(&lp, 1, 11, 11, 10, &t3), 0);
  assert_int_equal(mw_lp_push_sync(&lp, 5, &ts), 0);
  mw_lp_rows_done(&lp, t3, MW_LP_OK, NULL);
  mw_lp_rows_done(&lp, t2, MW_LP_OK, NULL);
  mw_lp_sync_done(&lp, ts);
  assert_string_equal(drain(&lp), ""); /* t1 first, as always */
  mw_lp_rows_done(&lp, t1, MW_LP_OK, NULL);
  /* errors: ERR only; none: PONG only; all again: OK counts from the change */
  assert_string_equal(drain(&lp), "ERR 4 type bad\nPONG\nOK 1\nSYNC 6\n");
  assert_int_equal(lp.unacked_bytes, 0);
  /* SYNC failures are answered in every mode: they were asked for */
  assert_int_equal(mw_lp_push_replies(&lp, MW_LP_REPLIES_NONE, 1), 0);
  assert_int_equal(mw_lp_push_sync(&lp, 5, &ts), 0);
  mw_lp_sync_failed(&lp, ts, 13, MW_LP_E_FENCED, "epoch 9");
  assert_string_equal(drain(&lp), "ERR 13 fenced SYNC failed, rows acknowledged earlier may be lost: epoch 9\n");
  assert_string_equal(mw_lp_replies_name(MW_LP_REPLIES_NONE), "none");
  mw_lp_free(&lp);
}

/* A group refused in part says how many of its rows were written. */
static void test_partial(void **state) {
  (void)state;
  mw_lineproto_t lp;
  assert_int_equal(mw_lp_init(&lp, NULL), 0);
  uint64_t t1, t2;
  assert_int_equal(mw_lp_push_rows(&lp, 10, 1, 10, 100, &t1), 0);
  assert_int_equal(mw_lp_push_rows(&lp, 4, 11, 14, 40, &t2), 0);
  mw_lp_rows_done_partial(&lp, t1, MW_LP_E_SEALED, 6, "bucket-3 (4 rows) not written: sealed");
  mw_lp_rows_done_partial(&lp, t2, MW_LP_E_SEALED, 0, "sealed");
  assert_string_equal(drain(&lp),
                      "ERR 1 sealed 10 rows (lines 1-10): 6 written, 4 not written: bucket-3 (4 rows) "
                      "not written: sealed\nERR 11 sealed 4 rows (lines 11-14) not written: sealed\n");
  assert_int_equal(lp.acked_rows, 0);
  mw_lp_free(&lp);
}

static void test_codes(void **state) {
  (void)state;
  assert_string_equal(mw_lp_code_name(mw_lp_code_from_errno(-EXDEV)), "not_owner");
  assert_string_equal(mw_lp_code_name(mw_lp_code_from_errno(-ESTALE)), "fenced");
  assert_string_equal(mw_lp_code_name(mw_lp_code_from_errno(-EROFS)), "sealed");
  assert_string_equal(mw_lp_code_name(mw_lp_code_from_errno(-EAGAIN)), "overloaded");
  assert_string_equal(mw_lp_code_name(mw_lp_code_from_errno(-EIO)), "internal");
  assert_string_equal(mw_lp_code_name(MW_LP_E_TOO_LONG), "too_long");
  mw_lineproto_t lp;
  mw_lp_limits_t bad = {.max_line_bytes = 4};
  assert_int_equal(mw_lp_init(&lp, &bad), -EINVAL);
}

/* Random bytes in random chunks (a deterministic generator): no crash, line
 * numbers never go back, the buffer stays within one line plus one chunk,
 * and a valid tail always comes through. */
static void test_random(void **state) {
  (void)state;
  uint64_t x = 88172645463325252ull;
  for (int round = 0; round < 200; round++) {
    mw_lineproto_t lp;
    mw_lp_limits_t lim = {.max_line_bytes = 64, .max_frame_bytes = 256};
    assert_int_equal(mw_lp_init(&lp, &lim), 0);
    uint64_t last = 0;
    for (int k = 0; k < 50; k++) {
      uint8_t chunk[300];
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      size_t n = x % sizeof chunk;
      for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        static const char alpha[] = "{}\n\n\r ARROW 12PINGDEL USE x\x00\xff";
        chunk[i] = (x >> 8) % 4 == 0 ? (uint8_t)x : (uint8_t)alpha[(x >> 16) % (sizeof alpha - 1)];
      }
      assert_int_equal(mw_lp_feed(&lp, chunk, n), 0);
      mw_lp_request_t r;
      while (mw_lp_next(&lp, &r) == 1) {
        assert_true(r.line >= last);
        last = r.line;
        if (r.kind != MW_LP_ERROR && r.kind != MW_LP_SYNC && r.kind != MW_LP_PING && r.kind != MW_LP_QUIT)
          assert_true(r.len <= (r.kind == MW_LP_ARROW ? 256u : 64u));
      }
      assert_true(mw_lp_buffered(&lp) <= 64 + 1 + 256 + sizeof chunk);
    }
    /* resynchronise: finish any frame, then a newline, then a clean request */
    uint8_t fill[300];
    memset(fill, '\n', sizeof fill);
    assert_int_equal(mw_lp_feed(&lp, fill, sizeof fill), 0);
    feed(&lp, "PING\n");
    mw_lp_request_t r;
    bool pong = false;
    while (mw_lp_next(&lp, &r) == 1) pong = r.kind == MW_LP_PING;
    assert_true(pong);
    mw_lp_free(&lp);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_framing), cmocka_unit_test(test_too_long),
      cmocka_unit_test(test_arrow),   cmocka_unit_test(test_replies),
      cmocka_unit_test(test_codes),   cmocka_unit_test(test_random),
      cmocka_unit_test(test_reply_modes), cmocka_unit_test(test_partial),
  };
  return tu_run_group(tests, NULL, NULL);
}
