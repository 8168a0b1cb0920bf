/*
 * schema_text.h — the config's table description, parsed into our model.
 *
 * Owns the text forms of four config keys (memwal.md §8.2 for the spec):
 *
 *   schema      = id:int64 not null, name:string, v:double, vec:fixed_size_list<float32,8>
 *   primary_key = id
 *   spec        = unsharded | bucket(id,16) | identity(region)
 *   shards      = all | 0,3,5 | us,eu
 *
 * Types (types.h has their properties):
 *   int8 int16 int32 int64 uint8 uint16 uint32 uint64
 *   float16 (= halffloat)  float (= float32)  double (= float64)  bool
 *   string (= utf8)  large_string (= large_utf8)  binary  large_binary
 *   fixed_size_binary<N>                         N in 1..65536 bytes
 *   date32  date64  time32<s|ms>  time64<us|ns>
 *   timestamp  timestamp<unit>  timestamp<unit, TZ>  unit s|ms|us|ns (bare:
 *                                                us); TZ e.g. UTC, Etc/GMT+5,
 *                                                Europe/Paris (raw text)
 *   decimal128<P, S>                             P in 1..38, S in 0..P
 *   fixed_size_list<T, D>   T a number type, D in 1..MW_MAX_FSL_DIM
 *   list<T [not null]>  large_list<T [not null]>   any T
 *   struct<name: T [not null], ...>              any T, 1..256 fields
 * e.g. `ts:timestamp<us, UTC> not null, tags:list<string>,
 * meta:struct<host: string, pid: int32, at: struct<x: double>>`. Fields are
 * nullable unless followed by `not null`. Names match [A-Za-z_][A-Za-z0-9_]*,
 * are unique (per struct), and `_tombstone` is reserved (the MemWAL column,
 * appended by mw_schema_tombstone_append). Spaces and tabs may go between
 * tokens. Nesting is limited to MW_MAX_NESTING levels.
 *
 * Errors: negative errno with mw_err_t naming the 1-based column, the token
 * and what was expected, e.g.
 *   schema: column 12: expected a type (int32, int64, ...), got "int65"
 * -EINVAL for bad text, -ENOTSUP for a valid request we (or LanceDB 0.39)
 * refuse (compound primary keys), -ENOMEM.
 */
#ifndef MW_LANCE_SCHEMA_TEXT_H
#define MW_LANCE_SCHEMA_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "lance/batch.h"

#define MW_SCHEMA_TEXT_MAX_BYTES 65536
#define MW_SCHEMA_NAME_MAX_BYTES 256
#define MW_SHARD_SPEC_MAX_BUCKETS 1024
#define MW_SHARD_LIST_MAX 1024
#define MW_SHARD_VALUE_MAX_BYTES 4096
#define MW_PK_POSITION_KEY "lance-schema:unenforced-primary-key:position"

typedef enum mw_shard_kind {
  MW_SHARD_UNSHARDED = 0,
  MW_SHARD_BUCKET,
  MW_SHARD_IDENTITY,
} mw_shard_kind_t;

typedef struct mw_shard_spec {
  mw_shard_kind_t kind;
  int column;           /* field index in the schema, -1 for unsharded */
  uint32_t num_buckets; /* bucket: 1..1024; otherwise 0 */
} mw_shard_spec_t;

typedef struct mw_shard_list {
  bool all;             /* `all`: every shard (n = 0) */
  size_t n;
  uint32_t *buckets;    /* bucket spec: n bucket numbers, in text order */
  char **values;        /* identity spec: n values as text, in text order */
} mw_shard_list_t;

/* `schema = ...` -> *out (initialised here; ids -1, no primary key). */
int mw_schema_text_parse(const char *text, mw_schema_t *out, mw_err_t *err);
/* `primary_key = col`: sets pk_position = 1 and the field metadata
 * MW_PK_POSITION_KEY = "1". The column must exist, be not null and be of a
 * key type Lance 12 accepts (types.h `pk`). `a,b` -> -ENOTSUP. */
int mw_schema_pk_text_apply(mw_schema_t *s, const char *text, mw_err_t *err);
/* `spec = ...` against the schema. */
int mw_shard_spec_text_parse(const char *text, const mw_schema_t *s, mw_shard_spec_t *out,
                             mw_err_t *err);
/* `shards = ...` for a spec: bucket numbers < num_buckets; identity values
 * checked against the column type (ints in range, bool true/false) and kept
 * as text; unsharded takes only `all`. No duplicates. */
int mw_shard_list_text_parse(const char *text, const mw_schema_t *s, const mw_shard_spec_t *spec,
                             mw_shard_list_t *out, mw_err_t *err);
void mw_shard_list_free(mw_shard_list_t *l);
const char *mw_shard_kind_name(mw_shard_kind_t k);

/* Append `_tombstone: bool not null` with the next field id (max id + 1, or
 * n_fields when no ids are set). Returns its index, -EEXIST if present. */
int mw_schema_tombstone_append(mw_schema_t *s);
/* Lance field ids 0..n-1 in pre-order (a field, then its children). */
void mw_schema_ids_assign(mw_schema_t *s);

#endif
