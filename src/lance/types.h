/*
 * types.h — memwald's column types and the one table of their properties.
 *
 * Owns: the type enum, the per-type property table (name, memory layout,
 * value width, ordering class, whether Lance accepts it as a primary key or
 * memwald can route by it), time units, and the Lance logical-type strings
 * (lance-files.md §2.3). Every module that needs "is this type fixed width",
 * "can it be a key", "how do two values compare" asks mw_type_info() instead
 * of switching on the enum, so adding a type is one row here plus its codecs.
 *
 * Layouts (how batch.h stores a column of the type; Arrow's layout, except
 * that every offset buffer in memory is int32 — large_* types get 64-bit
 * offsets only on the wire, see ipc_encode.c, ipc_decode.c):
 *
 *   FIXED   values = length * width bytes LE (ints, floats, temporal,
 *           decimal128, fixed_size_binary)
 *   BOOL    values = bitmap, LSB first
 *   VAR     offsets = (length + 1) int32, values = bytes (utf8, binary,
 *           large_utf8, large_binary)
 *   FSL     values = length * dim items of a FIXED item type, item_validity
 *   LIST    offsets = (length + 1) int32 into children[0] (list, large_list)
 *   STRUCT  children[i], each of the column's length
 *
 * Ordering classes (for min/max statistics and sorted keys): SIGNED and
 * UNSIGNED little-endian integers of the type's width (decimal128 is SIGNED
 * over 16 bytes), FLOAT IEEE binary16/32/64 (total order is the caller's
 * choice for NaN), BYTES memcmp then length (utf8, binary, fixed_size_binary),
 * BOOL false < true, NONE for nested types.
 *
 * Lance logical types (lance_schema.c formats and parses them), as Lance 12
 * writes them (lance-core datatypes.rs; seen in LanceDB-made files):
 *   int8 uint8 int16 uint16 int32 uint32 int64 uint64 halffloat float double
 *   bool string large_string binary large_binary fixed_size_binary:16
 *   date32:day date64:ms time32:s|ms time64:us|ns timestamp:us:-
 *   timestamp:ns:UTC decimal:128:10:2 fixed_size_list:halffloat:4 list
 *   list.struct large_list large_list.struct struct
 *
 * Errors: mw_unit_parse returns -EINVAL for an unknown unit name.
 */
#ifndef MW_LANCE_TYPES_H
#define MW_LANCE_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum mw_type {
  MW_T_INT32 = 1,
  MW_T_INT64,
  MW_T_UINT32,
  MW_T_UINT64,
  MW_T_FLOAT32,
  MW_T_FLOAT64,
  MW_T_BOOL,
  MW_T_UTF8,
  MW_T_BINARY,
  MW_T_FSL,          /* fixed_size_list<item_type, fsl_dim> */
  MW_T_INT8,
  MW_T_INT16,
  MW_T_UINT8,
  MW_T_UINT16,
  MW_T_FLOAT16,
  MW_T_TIMESTAMP,    /* int64 in `unit` since the epoch, optional `tz` */
  MW_T_DATE32,       /* int32 days since the epoch */
  MW_T_DATE64,       /* int64 milliseconds since the epoch */
  MW_T_TIME32,       /* int32 s or ms since midnight */
  MW_T_TIME64,       /* int64 us or ns since midnight */
  MW_T_DECIMAL128,   /* int128 LE, `precision`, `scale` */
  MW_T_LARGE_UTF8,
  MW_T_LARGE_BINARY,
  MW_T_FIXED_BINARY, /* fixed_size_binary<byte_width> */
  MW_T_LIST,
  MW_T_LARGE_LIST,
  MW_T_STRUCT,
} mw_type_t;
#define MW_T_FIRST MW_T_INT32
#define MW_T_LAST MW_T_STRUCT

typedef enum mw_layout {
  MW_LAYOUT_FIXED = 1,
  MW_LAYOUT_BOOL,
  MW_LAYOUT_VAR,
  MW_LAYOUT_FSL,
  MW_LAYOUT_LIST,
  MW_LAYOUT_STRUCT,
} mw_layout_t;

typedef enum mw_order {
  MW_ORDER_NONE = 0,
  MW_ORDER_SIGNED,
  MW_ORDER_UNSIGNED,
  MW_ORDER_FLOAT,
  MW_ORDER_BYTES,
  MW_ORDER_BOOL,
} mw_order_t;

/* Arrow's TimeUnit numbering. */
typedef enum mw_unit {
  MW_UNIT_S = 0,
  MW_UNIT_MS = 1,
  MW_UNIT_US = 2,
  MW_UNIT_NS = 3,
} mw_unit_t;

typedef struct mw_type_info {
  const char *name;     /* config text and messages: "int8", "timestamp", ... */
  mw_layout_t layout;
  uint8_t width;        /* bytes per value of a FIXED type; 0 = from the field */
  mw_order_t order;
  bool large;           /* 64-bit offsets in Arrow (large_utf8/binary/list) */
  bool pk;              /* Lance 12 accepts it as an unenforced primary key */
  bool fsl_item;        /* may be the item of a fixed_size_list */
  bool bucket;          /* bucket(col, N) may route by it (Iceberg's hash) */
  bool identity;        /* identity(col) may route by it */
} mw_type_info_t;

/* Properties of t; a placeholder row (name "?", layout 0) for a value that
 * is not a mw_type_t. */
const mw_type_info_t *mw_type_info(mw_type_t t);
static inline bool mw_type_valid(mw_type_t t) { return t >= MW_T_FIRST && t <= MW_T_LAST; }
const char *mw_type_name(mw_type_t t);
/* "s", "ms", "us", "ns"; NULL for a bad unit. */
const char *mw_unit_name(uint8_t unit);
/* The unit named by s[0..n) or -EINVAL. */
int mw_unit_parse(const char *s, size_t n);

/* Limits of type parameters. */
#define MW_MAX_FSL_DIM 65536
#define MW_MAX_FIXED_BINARY_BYTES 65536
#define MW_MAX_TZ_BYTES 64
#define MW_MAX_DECIMAL_PRECISION 38
#define MW_MAX_NESTING 8 /* struct/list levels below a top-level field */
#define MW_MAX_STRUCT_FIELDS 256

#endif
