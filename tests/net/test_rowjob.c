/*
 * test_rowjob.c — a run of row lines parsed off the loop (src/net/rowjob.c)
 * and the worker pool that runs it (src/net/workpool.c): groups split at
 * every refused line, in line order, with the line's code and message;
 * max_group_rows; a job reused for the next run and for another table;
 * the pool runs every item on a worker and hands each back on the loop.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cases.h"
#include <uv.h>

#include "net/rowjob.h"
#include "net/workpool.h"

static void schema_make(mw_schema_t *s) {
  mw_schema_init(s);
  assert_int_equal(mw_schema_add(s, "id", MW_T_INT64, false), 0);
  assert_int_equal(mw_schema_add(s, "v", MW_T_FLOAT64, true), 1);
  assert_int_equal(mw_schema_add(s, "_tombstone", MW_T_BOOL, false), 2);
  s->fields[0].pk_position = 1;
}

static int add(mw_rowjob_t *j, const char *line, uint64_t no, bool del) {
  return mw_rowjob_add(j, line, strlen(line), no, strlen(line) + 1 + (del ? 4 : 0), del);
}

static int64_t id_at(const mw_batch_t *b, int64_t row) {
  int64_t v;
  memcpy(&v, b->cols[0].values.data + 8 * row, 8);
  return v;
}

static void test_groups_split_at_refusals(void **state) {
  (void)state;
  mw_schema_t s;
  schema_make(&s);
  mw_jsonrow_opts_t o = {0};
  mw_rowjob_t j;
  mw_rowjob_init(&j);
  int table = 1;
  assert_int_equal(mw_rowjob_begin(&j, &table, &s, "t", &o, 0), 0);
  assert_int_equal(add(&j, "{\"id\":1,\"v\":1.5}", 7, false), 0);
  assert_int_equal(add(&j, "{\"id\":2,\"v\":\"x\"}", 8, false), 0); /* type */
  assert_int_equal(add(&j, "{\"id\":3}", 9, false), 0);
  assert_int_equal(add(&j, "{\"id\":4", 10, false), 0);             /* parse */
  assert_int_equal(add(&j, "{\"v\":2}", 11, false), 0);             /* pk */
  assert_int_equal(add(&j, "{\"id\":5}", 12, true), 0);             /* a delete */
  assert_int_equal(add(&j, "{\"id\":6}", 13, false), 0);
  mw_rowjob_run(&j);
  assert_int_equal(j.status, 0);
  assert_int_equal(j.rows_ok, 4);
  assert_int_equal(j.rows_refused, 3);
  assert_int_equal(j.n_out, 6); /* group(7) err(8) group(9) err(10) err(11) group(12-13) */
  const mw_rowjob_out_t *o0 = &j.out[0], *o1 = &j.out[1], *o2 = &j.out[2];
  assert_false(o0->is_err);
  assert_int_equal(o0->rows, 1);
  assert_int_equal(o0->first_line, 7);
  assert_int_equal(o0->last_line, 7);
  assert_true(o1->is_err);
  assert_int_equal(o1->line, 8);
  assert_int_equal(o1->code, MW_LP_E_TYPE);
  assert_non_null(strstr(o1->msg, "table \"t\": byte "));
  assert_non_null(strstr(o1->msg, "field \"v\""));
  assert_memory_equal(mw_rowjob_err_data(&j, o1), "{\"id\":2,\"v\":\"x\"}", o1->len);
  assert_false(o2->is_err);
  assert_int_equal(o2->first_line, 9);
  assert_int_equal(o2->rows, 1);
  assert_true(j.out[3].is_err);
  assert_int_equal(j.out[3].line, 10);
  assert_int_equal(j.out[3].code, MW_LP_E_PARSE);
  assert_true(j.out[4].is_err);
  assert_int_equal(j.out[4].line, 11);
  assert_int_equal(j.out[4].code, MW_LP_E_PK);
  assert_false(j.out[5].is_err);
  assert_int_equal(j.out[5].rows, 2);
  assert_int_equal(j.out[5].first_line, 12);
  assert_int_equal(j.out[5].last_line, 13);
  assert_true((j.out[5].batch.cols[2].values.data[0] & 1) == 1);
  assert_true((j.out[5].batch.cols[2].values.data[0] & 2) == 0);
  mw_rowjob_free(&j);
  mw_schema_free(&s);
}

static void test_consecutive_refusals_and_bytes(void **state) {
  (void)state;
  mw_schema_t s;
  schema_make(&s);
  mw_jsonrow_opts_t o = {0};
  mw_rowjob_t j;
  mw_rowjob_init(&j);
  int table = 1;
  assert_int_equal(mw_rowjob_begin(&j, &table, &s, "t", &o, 0), 0);
  assert_int_equal(add(&j, "{\"id\":1}", 1, false), 0);
  assert_int_equal(add(&j, "nope", 2, false), 0);
  assert_int_equal(add(&j, "{\"v\":2}", 3, false), 0);
  assert_int_equal(add(&j, "{\"id\":5}", 4, true), 0);
  assert_int_equal(add(&j, "{\"id\":6}", 5, false), 0);
  mw_rowjob_run(&j);
  assert_int_equal(j.n_out, 4); /* group(1) err(2) err(3) group(4-5) */
  assert_true(j.out[1].is_err && j.out[2].is_err);
  assert_int_equal(j.out[2].code, MW_LP_E_PK);
  assert_int_equal(j.out[2].line, 3);
  const mw_rowjob_out_t *g = &j.out[3];
  assert_false(g->is_err);
  assert_int_equal(g->rows, 2);
  assert_int_equal(g->first_line, 4);
  assert_int_equal(g->last_line, 5);
  assert_int_equal(g->bytes, strlen("{\"id\":5}") + 5 + strlen("{\"id\":6}") + 1);
  size_t sum = j.out[0].bytes + g->bytes;
  for (int i = 1; i <= 2; i++) sum += j.out[i].bytes;
  assert_int_equal(sum, j.bytes); /* every input byte answered by one item */
  mw_batch_t b = mw_rowjob_take(&j, 3);
  assert_int_equal(b.n_rows, 2);
  assert_int_equal(id_at(&b, 0), 5);
  assert_int_equal(id_at(&b, 1), 6);
  mw_batch_free(&b);
  mw_rowjob_free(&j); /* the taken group is not freed twice (ASan) */
  mw_schema_free(&s);
}

static void test_max_group_rows_and_reuse(void **state) {
  (void)state;
  mw_schema_t s, s2;
  schema_make(&s);
  schema_make(&s2);
  mw_jsonrow_opts_t o = {0};
  mw_rowjob_t j;
  mw_rowjob_init(&j);
  int t1 = 1, t2 = 2;
  char line[64];
  for (int run = 0; run < 3; run++) { /* begin again: earlier output dropped */
    assert_int_equal(mw_rowjob_begin(&j, run == 2 ? &t2 : &t1, run == 2 ? &s2 : &s, "t", &o, 100), 0);
    assert_ptr_equal(j.parser.schema, run == 2 ? &s2 : &s);
    for (int i = 0; i < 250; i++) {
      snprintf(line, sizeof line, "{\"id\":%d}", i);
      assert_int_equal(add(&j, line, (uint64_t)i + 1, false), 0);
    }
    mw_rowjob_run(&j);
    assert_int_equal(j.n_out, 3);
    assert_int_equal(j.out[0].rows, 100);
    assert_int_equal(j.out[1].rows, 100);
    assert_int_equal(j.out[2].rows, 50);
    assert_int_equal(j.out[1].first_line, 101);
    assert_int_equal(id_at(&j.out[2].batch, 49), 249);
    if (run == 0) {
      mw_batch_t b = mw_rowjob_take(&j, 0);
      mw_batch_free(&b);
    }
  }
  mw_rowjob_free(&j);
  mw_schema_free(&s);
  mw_schema_free(&s2);
}

/* ---- the pool ---- */

typedef struct item {
  mw_work_t w;
  pthread_t ran_on;
  int after_calls;
  int value, result;
} item_t;

typedef struct pool_fx {
  uv_loop_t loop;
  mw_workpool_t *p;
  item_t items[1000];
  int afters;
  pthread_t loop_thread;
  bool closed;
} pool_fx_t;

static pool_fx_t PF;

static void item_work(mw_work_t *w) {
  item_t *it = (item_t *)w;
  it->ran_on = pthread_self();
  it->result = it->value * 3;
}

static void on_closed(void *arg) { ((pool_fx_t *)arg)->closed = true; }

static void item_after(mw_work_t *w) {
  item_t *it = (item_t *)w;
  assert_true(pthread_equal(pthread_self(), PF.loop_thread));
  it->after_calls++;
  if (++PF.afters == 1000) {
    assert_int_equal(mw_workpool_in_flight(PF.p), 0);
    mw_workpool_close(PF.p, on_closed, &PF);
  }
}

static void test_pool_runs_on_workers(void **state) {
  (void)state;
  memset(&PF, 0, sizeof PF);
  assert_int_equal(uv_loop_init(&PF.loop), 0);
  PF.loop_thread = pthread_self();
  assert_int_equal(mw_workpool_start(&PF.loop, 2, &PF.p), 0);
  assert_int_equal(mw_workpool_threads(PF.p), 2);
  for (int i = 0; i < 1000; i++) {
    PF.items[i] = (item_t){.w = {.work = item_work, .after = item_after}, .value = i};
    mw_workpool_submit(PF.p, &PF.items[i].w);
  }
  assert_int_equal(mw_workpool_in_flight(PF.p), 1000);
  assert_int_equal(uv_run(&PF.loop, UV_RUN_DEFAULT), 0); /* ends once the pool closed */
  assert_true(PF.closed);
  for (int i = 0; i < 1000; i++) {
    assert_int_equal(PF.items[i].after_calls, 1);
    assert_int_equal(PF.items[i].result, 3 * i);
    assert_false(pthread_equal(PF.items[i].ran_on, PF.loop_thread));
  }
  assert_int_equal(uv_loop_close(&PF.loop), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_groups_split_at_refusals),
      cmocka_unit_test(test_consecutive_refusals_and_bytes),
      cmocka_unit_test(test_max_group_rows_and_reuse),
      cmocka_unit_test(test_pool_runs_on_workers),
  };
  return tu_run_group(tests, NULL, NULL);
}
