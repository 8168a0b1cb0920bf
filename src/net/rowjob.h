/*
 * rowjob.h — a run of one connection's NDJSON row lines, parsed on any thread.
 *
 * Owns: the copy of the lines (one byte buffer plus an index), a jsonrow
 * parser kept while the table stays the same, and the parse's output in line
 * order: groups of good rows (each one batch, ready to be submitted) and
 * refused lines (line, code, reason), never merged across a refused line, so
 * the server can queue their replies exactly in request order.
 *
 *   loop:    mw_rowjob_begin -> mw_rowjob_add (per line) ...
 *   worker:  mw_rowjob_run (touches nothing but the job and the schema)
 *   loop:    read j->out[0..n_out), taking each group's batch (mw_rowjob_take)
 *            -> mw_rowjob_begin again (or mw_rowjob_free)
 *
 * Sample: lines 7..10 = {"id":1} {"id":"x"} {"id":2} {"id":3}
 *   -> out: group(lines 7-7, 1 row), error(line 8, type, "table \"t\": byte
 *      6: field \"id\": ..."), group(lines 9-10, 2 rows)
 *
 * Limits: at most MW_ROWJOB_MAX_LINES lines (the server cuts earlier, at
 * max_batch_rows) and MW_ROWJOB_MAX_BYTES of line bytes per job.
 *
 * Errors: negative errno (-ENOMEM, -E2BIG when a limit is passed); a parse
 * that ran out of memory sets j->status = -ENOMEM and its output holds the
 * rows parsed before that.
 */
#ifndef MW_NET_ROWJOB_H
#define MW_NET_ROWJOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "lance/batch.h"
#include "net/jsonrow.h"
#include "net/lineproto.h"

#define MW_ROWJOB_MAX_LINES ((uint32_t)1 << 20)
#define MW_ROWJOB_MAX_BYTES ((size_t)1 << 31)

typedef struct mw_rowjob_line {
  uint64_t line;  /* 1-based protocol line */
  uint32_t off;   /* into raw */
  uint32_t len;   /* the JSON object's bytes */
  uint32_t bytes; /* input bytes the request took (line + terminator) */
  bool del;
} mw_rowjob_line_t;

typedef struct mw_rowjob_out {
  bool is_err;
  bool taken; /* a group whose batch mw_rowjob_take moved out */
  /* a group (is_err false): rows of lines first_line..last_line */
  mw_batch_t batch;
  uint32_t rows;
  uint64_t first_line, last_line;
  size_t bytes;
  /* a refused line (is_err true): its reply and, for logs, the line */
  uint64_t line;
  mw_lp_code_t code;
  uint32_t off, len;
  char msg[MW_LP_MSG_BYTES];
} mw_rowjob_out_t;

typedef struct mw_rowjob {
  /* input, set on the loop */
  const void *table; /* the server's handle: compared only */
  const mw_schema_t *schema;
  char table_name[MW_LP_TABLE_NAME_BYTES];
  mw_buf_t raw;
  mw_rowjob_line_t *lines;
  uint32_t n_lines, cap_lines;
  size_t bytes; /* sum of lines[].bytes */
  uint32_t max_group_rows;
  /* the parser, for `parser_table` */
  mw_jsonrow_parser_t parser;
  const void *parser_table;
  bool parser_ok;
  /* output, set by mw_rowjob_run */
  mw_rowjob_out_t *out;
  size_t n_out, cap_out;
  uint32_t rows_ok, rows_refused;
  int status;
  bool ran;
} mw_rowjob_t;

void mw_rowjob_init(mw_rowjob_t *j);
/* Free everything, output batches included. */
void mw_rowjob_free(mw_rowjob_t *j);
/* Start a new run for `table`: earlier input and output are dropped
 * (capacity kept); the parser is rebuilt only when the table changed.
 * max_group_rows > 0 caps each output group. */
int mw_rowjob_begin(mw_rowjob_t *j, const void *table, const mw_schema_t *schema,
                    const char *table_name, const mw_jsonrow_opts_t *opts,
                    uint32_t max_group_rows);
/* Copy one line in (data: the JSON object without "DEL " or terminator). */
int mw_rowjob_add(mw_rowjob_t *j, const char *data, size_t len, uint64_t line, size_t bytes,
                  bool del);
/* Parse every line into j->out. Any thread; once per begin. */
void mw_rowjob_run(mw_rowjob_t *j);
/* Move group i's batch out (the caller frees it); the job forgets it. */
mw_batch_t mw_rowjob_take(mw_rowjob_t *j, size_t i);
/* The bytes of line record `o` (a refused line), for logs. */
static inline const char *mw_rowjob_err_data(const mw_rowjob_t *j, const mw_rowjob_out_t *o) {
  return (const char *)j->raw.data + o->off;
}

#endif
