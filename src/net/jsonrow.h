/*
 * jsonrow.h — schema-directed NDJSON row parser (producers' line protocol,
 * issue 5).
 *
 * Owns: the mapping from one JSON object (one protocol line, without its
 * line terminator) to one row of an mw_batch_t for the table's schema. Values
 * go straight into the batch's column builders: no DOM, no per-field malloc;
 * the parser's scratch buffers are reused across rows.
 *
 * Mapping (JSON -> Arrow; every nested value goes straight into its child
 * builder too):
 *   integer            -> int8..int64, uint8..uint64 (range-checked)
 *   "123" (decimal)    -> the same integer columns (JavaScript producers send
 *                         64-bit values as strings)
 *   number             -> float16, float32, float64 (integers accepted; a
 *                         fraction or exponent into an int column is a type
 *                         error; float16 rounds to nearest even)
 *   string             -> utf8, large_utf8 (escapes incl. \uXXXX and pairs)
 *   base64 string      -> binary, large_binary, fixed_size_binary (which must
 *                         decode to exactly its width; standard alphabet,
 *                         padding required)
 *   true / false       -> bool
 *   "2024-05-01T12:00:00.5Z" (RFC 3339; 'T', 't' or ' ' between date and
 *   time; offset Z or +hh:mm, none = UTC) or an integer in the column's unit
 *                      -> timestamp (a fraction finer than the unit is a
 *                         type error, not a silent truncation)
 *   "2024-05-01" or an integer (days / ms)  -> date32 / date64
 *   "12:30:05.25" or an integer in the unit -> time32 / time64 (< 24 h)
 *   number or "-12.345" -> decimal128<P,S> (exact: at most S fraction digits
 *                         and P digits in all)
 *   [n1, ..., nD]      -> fixed_size_list<T, D> (numbers of the item type)
 *   [v1, ...]          -> list<T>, large_list<T> (each element by T's rules)
 *   {"a": v, ...}      -> struct<a: T, ...> (members by name; missing ones
 *                         null)
 *   {...} or [...]     -> utf8/large_utf8 stored as its JSON text, when
 *                         opts.objects_as_text is set
 *   null, or a missing nullable field -> null
 * Fields inside structs and lists are named in messages by their path:
 * field "meta.host", field "tags[3]".
 *
 * Error classes (the protocol prints `ERR <line> <class> <message>`):
 *   parse   malformed JSON, trailing garbage, duplicate key, invalid UTF-8,
 *           any byte that is not JSON whitespace where whitespace may go
 *           (only space and tab are accepted: a stray \r or \n is parse)
 *   schema  a missing non-null field, an unknown field or struct member
 *           (unless ignore_unknown_fields), the reserved `_tombstone` given by the
 *           producer, a delete on a table that cannot take deletes
 *   type    wrong JSON type, out of range, wrong vector length, bad base64,
 *           a malformed date, time or timestamp, a decimal that does not fit,
 *           null into a non-null (non-key) field
 *   pk      the primary-key field missing or null
 * The first error in line order wins. A failed row leaves the batch exactly as
 * it was (every column is truncated back).
 *
 * Deletes (`DEL {...}`): is_delete = true. The object must hold the primary
 * key; every other member is skipped (checked for JSON syntax only). The row
 * gets the key, every other column null and `_tombstone = true`. Upserts get
 * `_tombstone = false`. The `_tombstone` column is recognised as the schema's
 * last field when it is named `_tombstone`, bool, not null.
 *
 * Return values: 0 = one row appended; -EBADMSG = the row was refused (err
 * says why); -ENOMEM / -EFBIG = out of memory or batch full (class
 * MW_JSONROW_E_INTERNAL); -EINVAL from init for an unusable schema.
 */
#ifndef MW_NET_JSONROW_H
#define MW_NET_JSONROW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "lance/batch.h"

#define MW_JSONROW_DEFAULT_MAX_LINE_BYTES ((size_t)1 << 20)
#define MW_JSONROW_MAX_LINE_BYTES ((size_t)64 << 20)
#define MW_JSONROW_DEFAULT_MAX_DEPTH 32
#define MW_JSONROW_MAX_DEPTH 256
#define MW_JSONROW_MSG_BYTES 256
#define MW_JSONROW_PATH_BYTES 128

typedef enum mw_jsonrow_class {
  MW_JSONROW_OK = 0,
  MW_JSONROW_E_PARSE,
  MW_JSONROW_E_SCHEMA,
  MW_JSONROW_E_TYPE,
  MW_JSONROW_E_PK,
  MW_JSONROW_E_INTERNAL, /* out of memory, batch full */
} mw_jsonrow_class_t;

typedef struct mw_jsonrow_error {
  mw_jsonrow_class_t cls;
  size_t offset;                    /* byte offset in the line where it was seen */
  char msg[MW_JSONROW_MSG_BYTES];   /* e.g. field "v": expected a number (float64), got a string */
} mw_jsonrow_error_t;

typedef struct mw_jsonrow_opts {
  bool ignore_unknown_fields;
  size_t max_line_bytes; /* 0 = MW_JSONROW_DEFAULT_MAX_LINE_BYTES */
  uint32_t max_depth;    /* nesting levels, the row object being level 1 (a
                          * value of a list or struct column, or a skipped
                          * member, nests deeper); 0 = default */
  /* A field a DEL must carry besides the primary key, because rows are
   * routed by it (identity sharding on a non-key column); NULL = none. */
  const char *delete_keep;
  /* A JSON object or array given for a string column is stored as its JSON
   * text (exactly the bytes sent) instead of being refused. */
  bool objects_as_text;
} mw_jsonrow_opts_t;

/* Name lookup slot (open addressing over field names). */
typedef struct mw_jsonrow_slot {
  uint32_t hash;
  int32_t field; /* -1 = empty */
} mw_jsonrow_slot_t;

typedef struct mw_jsonrow_parser {
  const mw_schema_t *schema; /* borrowed; must outlive the parser */
  mw_jsonrow_opts_t opts;
  int pk;                    /* field index of the primary key, -1 = none */
  int tombstone;             /* field index of _tombstone, -1 = none */
  int keep;                  /* opts.delete_keep's field index, -1 = none */
  bool deletes_ok;           /* every non-key column but _tombstone is nullable */
  size_t *name_lens;
  mw_jsonrow_slot_t *slots;
  uint32_t n_slots;          /* power of two, >= 2 * n_fields */
  uint32_t *seen;            /* per field: the row stamp when last set */
  uint32_t stamp;
  mw_buf_t scratch;          /* decoded strings, base64, number text */
  mw_buf_t keybuf;           /* decoded keys with escapes */
  char path[MW_JSONROW_PATH_BYTES]; /* the field being parsed, for messages */
  void *c_locale;            /* locale_t for strtod_l */
} mw_jsonrow_parser_t;

/* Prepare a parser for `table_schema` (borrowed). opts may be NULL. */
int mw_jsonrow_init(mw_jsonrow_parser_t *p, const mw_schema_t *table_schema,
                    const mw_jsonrow_opts_t *opts);
void mw_jsonrow_free(mw_jsonrow_parser_t *p);
/* Parse one line (no terminator) into one new row of `out` (whose schema must
 * be the parser's). Returns 0, or -errno with *err filled (err may be NULL). */
int mw_jsonrow_parse(mw_jsonrow_parser_t *p, const char *line, size_t len, bool is_delete,
                     mw_batch_t *out, mw_jsonrow_error_t *err);
/* "parse", "schema", "type", "pk", "internal" ("ok" for MW_JSONROW_OK). */
const char *mw_jsonrow_class_name(mw_jsonrow_class_t cls);

#endif
