/*
 * exact_json.h — test helper: one value or row of a batch as the exact JSON
 * that tests/interop/exact.mjs prints for what LanceDB returns (so C tests can
 * compare decoded values with LanceDB's own read-back, line for line):
 *
 *   null | int8..int32, uint8..uint32 -> number | int64, uint64 -> "decimal"
 *   float16/32/64 -> shortest round-trip number | bool | utf8 -> JSON string
 *   binary, fixed_size_binary -> [byte, ...] | timestamp, date, time ->
 *   "raw integer" | decimal128 -> "unscaled integer" | fixed_size_list, list
 *   -> [items] | struct -> {"member": value, ...}
 *
 * Appends to an mw_buf_t; returns 0 or -ENOMEM.
 */
#ifndef MW_TEST_EXACT_JSON_H
#define MW_TEST_EXACT_JSON_H

#include "common/buf.h"
#include "lance/batch.h"

int tu_exact_cell(const mw_field_t *f, const mw_column_t *c, int64_t row, mw_buf_t *out);
/* {"name": value, ...} for the fields [0, n_fields) of the batch's row. */
int tu_exact_row(const mw_batch_t *b, size_t n_fields, int64_t row, mw_buf_t *out);

#endif
