/*
 * types.c — the type property table (see types.h).
 *
 * One row per mw_type_t, indexed by the enum. The `pk` column is what Lance
 * 12 can both declare and flush as a primary key: set_unenforced_primary_key
 * takes "Int32, Int64, Utf8, LargeUtf8, Binary, LargeBinary,
 * FixedSizeBinary" (its error text), but its flush then refuses a
 * FixedSizeBinary key ("unsupported type FixedSizeBinary(16) for hashing",
 * tests/lance/data/bloom_types/fixed_size_binary.rejected), so that one is
 * not a key here;
 * `bucket`/`identity` are the types whose Iceberg hash and identity bytes
 * route.c implements and tests against LanceDB; the narrow and temporal
 * types are not routable yet (LanceDB's shard UUIDs for them are untested).
 */
#include "lance/types.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

#define ROW(t, name, layout, width, order, large, pk, item, bucket, identity) \
  [t] = {name, layout, width, order, large, pk, item, bucket, identity}

static const mw_type_info_t table[MW_T_LAST + 1] = {
    [0] = {"?", 0, 0, MW_ORDER_NONE, false, false, false, false, false},
    /*   type              name                 layout             w   order               large  pk     item   bucket identity */
    ROW(MW_T_INT32,        "int32",             MW_LAYOUT_FIXED,  4,  MW_ORDER_SIGNED,    false, true,  true,  true,  true),
    ROW(MW_T_INT64,        "int64",             MW_LAYOUT_FIXED,  8,  MW_ORDER_SIGNED,    false, true,  true,  true,  true),
    ROW(MW_T_UINT32,       "uint32",            MW_LAYOUT_FIXED,  4,  MW_ORDER_UNSIGNED,  false, false, true,  true,  true),
    ROW(MW_T_UINT64,       "uint64",            MW_LAYOUT_FIXED,  8,  MW_ORDER_UNSIGNED,  false, false, true,  true,  true),
    ROW(MW_T_FLOAT32,      "float32",           MW_LAYOUT_FIXED,  4,  MW_ORDER_FLOAT,     false, false, true,  true,  false),
    ROW(MW_T_FLOAT64,      "float64",           MW_LAYOUT_FIXED,  8,  MW_ORDER_FLOAT,     false, false, true,  true,  false),
    ROW(MW_T_BOOL,         "bool",              MW_LAYOUT_BOOL,   0,  MW_ORDER_BOOL,      false, false, false, true,  true),
    ROW(MW_T_UTF8,         "utf8",              MW_LAYOUT_VAR,    0,  MW_ORDER_BYTES,     false, true,  false, true,  true),
    ROW(MW_T_BINARY,       "binary",            MW_LAYOUT_VAR,    0,  MW_ORDER_BYTES,     false, true,  false, false, false),
    ROW(MW_T_FSL,          "fixed_size_list",   MW_LAYOUT_FSL,    0,  MW_ORDER_NONE,      false, false, false, false, false),
    ROW(MW_T_INT8,         "int8",              MW_LAYOUT_FIXED,  1,  MW_ORDER_SIGNED,    false, false, true,  false, false),
    ROW(MW_T_INT16,        "int16",             MW_LAYOUT_FIXED,  2,  MW_ORDER_SIGNED,    false, false, true,  false, false),
    ROW(MW_T_UINT8,        "uint8",             MW_LAYOUT_FIXED,  1,  MW_ORDER_UNSIGNED,  false, false, true,  false, false),
    ROW(MW_T_UINT16,       "uint16",            MW_LAYOUT_FIXED,  2,  MW_ORDER_UNSIGNED,  false, false, true,  false, false),
    ROW(MW_T_FLOAT16,      "float16",           MW_LAYOUT_FIXED,  2,  MW_ORDER_FLOAT,     false, false, true,  false, false),
    ROW(MW_T_TIMESTAMP,    "timestamp",         MW_LAYOUT_FIXED,  8,  MW_ORDER_SIGNED,    false, false, false, false, false),
    ROW(MW_T_DATE32,       "date32",            MW_LAYOUT_FIXED,  4,  MW_ORDER_SIGNED,    false, false, false, false, false),
    ROW(MW_T_DATE64,       "date64",            MW_LAYOUT_FIXED,  8,  MW_ORDER_SIGNED,    false, false, false, false, false),
    ROW(MW_T_TIME32,       "time32",            MW_LAYOUT_FIXED,  4,  MW_ORDER_SIGNED,    false, false, false, false, false),
    ROW(MW_T_TIME64,       "time64",            MW_LAYOUT_FIXED,  8,  MW_ORDER_SIGNED,    false, false, false, false, false),
    ROW(MW_T_DECIMAL128,   "decimal128",        MW_LAYOUT_FIXED,  16, MW_ORDER_SIGNED,    false, false, false, false, false),
    ROW(MW_T_LARGE_UTF8,   "large_utf8",        MW_LAYOUT_VAR,    0,  MW_ORDER_BYTES,     true,  true,  false, false, false),
    ROW(MW_T_LARGE_BINARY, "large_binary",      MW_LAYOUT_VAR,    0,  MW_ORDER_BYTES,     true,  true,  false, false, false),
    ROW(MW_T_FIXED_BINARY, "fixed_size_binary", MW_LAYOUT_FIXED,  0,  MW_ORDER_BYTES,     false, false, false, false, false),
    ROW(MW_T_LIST,         "list",              MW_LAYOUT_LIST,   0,  MW_ORDER_NONE,      false, false, false, false, false),
    ROW(MW_T_LARGE_LIST,   "large_list",        MW_LAYOUT_LIST,   0,  MW_ORDER_NONE,      true,  false, false, false, false),
    ROW(MW_T_STRUCT,       "struct",            MW_LAYOUT_STRUCT, 0,  MW_ORDER_NONE,      false, false, false, false, false),
};
_Static_assert(sizeof table / sizeof table[0] == MW_T_LAST + 1, "one row per type");

const mw_type_info_t *mw_type_info(mw_type_t t) {
  if (!mw_type_valid(t)) return &table[0];
  const mw_type_info_t *i = &table[t];
  assert(i->name != NULL);
  assert(i->layout != 0);
  assert(i->layout != MW_LAYOUT_FIXED || t == MW_T_FIXED_BINARY || i->width > 0);
  return i;
}

const char *mw_type_name(mw_type_t t) { return mw_type_info(t)->name; }

static const char *const units[] = {"s", "ms", "us", "ns"};

const char *mw_unit_name(uint8_t unit) { return unit <= MW_UNIT_NS ? units[unit] : NULL; }

int mw_unit_parse(const char *s, size_t n) {
  assert(s != NULL || n == 0);
  for (int u = 0; u <= MW_UNIT_NS; u++)
    if (strlen(units[u]) == n && memcmp(units[u], s, n) == 0) return u;
  return -EINVAL;
}
