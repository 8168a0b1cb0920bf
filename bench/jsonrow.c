/*
 * jsonrow.c — throughput of the NDJSON row parser (src/net/jsonrow.c).
 *
 * Builds N ~60-byte lines like
 *   {"id":1000123,"name":"user-00123","v":123.4,"ok":true,"n":17}
 * for the schema id:int64 not null (pk), name:string, v:double, ok:bool,
 * n:int32, _tombstone:bool not null, then parses them all into batches of 65536 rows
 * (reset between batches, as the MemTable would hand them off) on one core.
 * Prints rows/s and MB/s (best of 5 passes). Target: >= 1.5M rows/s.
 * `wide` (float32) or `wide64` (float64) parses bench/ingest.c's wide rows
 * instead: {"id":N,"vec":[0.dddd, ... 128 values]} (~900 bytes).
 *
 *   ./build/bench/bench_jsonrow [rows] [wide|wide64]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "net/jsonrow.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  size_t rows = argc > 1 ? strtoul(argv[1], NULL, 10) : 2000000;
  int wide = argc > 2 ? (strcmp(argv[2], "wide") == 0 ? 32 : strcmp(argv[2], "wide64") == 0 ? 64 : -1) : 0;
  if (rows == 0 || rows > 100000000 || wide < 0) {
    fprintf(stderr, "usage: bench_jsonrow [rows] [wide|wide64]\n");
    return 2;
  }
  mw_schema_t s;
  mw_schema_init(&s);
  int id = mw_schema_add(&s, "id", MW_T_INT64, false);
  if (wide) {
    int vc = mw_schema_add(&s, "vec", MW_T_FSL, true);
    s.fields[vc].fsl_dim = 128;
    s.fields[vc].item_type = wide == 32 ? MW_T_FLOAT32 : MW_T_FLOAT64;
    s.fields[vc].item_nullable = true;
  } else {
    mw_schema_add(&s, "name", MW_T_UTF8, true);
    mw_schema_add(&s, "v", MW_T_FLOAT64, true);
    mw_schema_add(&s, "ok", MW_T_BOOL, true);
    mw_schema_add(&s, "n", MW_T_INT32, true);
  }
  mw_schema_add(&s, "_tombstone", MW_T_BOOL, false);
  s.fields[id].pk_position = 1;

  char *text = malloc(rows * (wide ? 1000 : 96)); /* lines are < 920 / 80 bytes */
  size_t *off = malloc((rows + 1) * sizeof *off);
  if (text == NULL || off == NULL) return 1;
  size_t pos = 0;
  for (size_t i = 0; i < rows; i++) {
    off[i] = pos;
    if (wide) { /* bench/ingest.c's values: 0.dddd */
      pos += (size_t)sprintf(text + pos, "{\"id\":%zu,\"vec\":[", 1000000 + i);
      for (size_t d = 0; d < 128; d++)
        pos += (size_t)sprintf(text + pos, "%s0.%04zu", d ? "," : "", (i * 7 + d * 13) % 10000);
      pos += (size_t)sprintf(text + pos, "]}");
      continue;
    }
    pos += (size_t)sprintf(text + pos, "{\"id\":%zu,\"name\":\"user-%05zu\",\"v\":%zu.%zu,"
                           "\"ok\":%s,\"n\":%zu}", 1000000 + i, i % 100000, i % 1000, i % 10,
                           i & 1 ? "true" : "false", i % 100);
  }
  off[rows] = pos;

  mw_jsonrow_parser_t p;
  mw_batch_t b;
  mw_jsonrow_error_t err;
  if (mw_jsonrow_init(&p, &s, NULL) < 0 || mw_batch_init(&b, &s) < 0) return 1;
  double best = 1e9;
  for (int pass = 0; pass < 5; pass++) {
    double t0 = now_s();
    for (size_t i = 0; i < rows; i++) {
      if (b.n_rows == 65536) mw_batch_reset(&b);
      if (mw_jsonrow_parse(&p, text + off[i], off[i + 1] - off[i], false, &b, &err) < 0) {
        fprintf(stderr, "row %zu: %s: %s\n", i, mw_jsonrow_class_name(err.cls), err.msg);
        return 1;
      }
    }
    double t = now_s() - t0;
    if (t < best) best = t;
  }
  printf("jsonrow: %zu rows, %.1f bytes/row: %.2f M rows/s, %.1f MB/s\n", rows,
         (double)pos / (double)rows, (double)rows / best / 1e6, (double)pos / best / 1e6);
  mw_batch_free(&b);
  mw_jsonrow_free(&p);
  mw_schema_free(&s);
  free(text);
  free(off);
  return 0;
}
