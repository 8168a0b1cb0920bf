#!/usr/bin/env node
// make-table.mjs — create a fresh LanceDB 0.39.0 table with a schema the
// golden vectors do not cover, and let LanceDB's own MemWAL writer put one
// shard (manifest, WAL entry, one SSTable) into it, so mw_sst_tool can add
// generations on top.
//
//   node make-table.mjs DB_DIR --kind wide|strpk|types|nested|empty1|empty|emptybig|bigstr
//
// wide : id int64 PK, i32 int32, u32 uint32, u64 uint64, f32 float32,
//        flag bool, bin binary, s utf8, vec fixed_size_list<float32, 4>
// strpk: id utf8 PK, v float64, n int32
// types: id int64 PK + every non-nested type of types_lib.mjs (narrow ints,
//        float16, timestamps in every unit with and without a zone, dates,
//        times, decimals, large and fixed binaries, fixed_size_lists of
//        float16, float64, int8, uint8), nulls in most columns
// nested: id int64 PK + every type of types_lib.mjs, with its lists and
//        structs (nulls at every level, empty lists; no large_list: the node
//        client has none, see types_lib.mjs)
// empty1, empty, emptybig: id int64 PK + types_lib.edgeCatalogue (columns
//        whose pages carry no items or no values, issue 26); the SSTable
//        holds 1, 300 (no list item at all: the flush) or 34 000
//        rows (items only in keys 0..99: a nested column's first page holds
//        32 767 levels with items, its second levels only)
// bigstr: id int64 PK + types_lib.bigCatalogue (strings and binaries of
//        1.5-40 KB among small ones and nulls, flat and nested; 300 rows)
// Base rows: keys 0..19; then mergeInserts of keys 10..39 and 30..49
// (updates and inserts; 30..39 twice, so Lance's SSTable gets a deletion
// file) through the LSM writer, closed (flushed to generation 1).
// Integer keys are k, string keys "k" + k zero-padded to 6 digits.
import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
if (!fs.existsSync(path.join(here, "node_modules", "@lancedb", "lancedb"))) {
  console.error(`interop: ${here}/node_modules is missing: run \`npm install --no-audit --no-fund\` in tests/interop first`);
  process.exit(2);
}
const { createRequire } = await import("node:module");
const require = createRequire(path.join(here, "package.json"));
const lancedb = require("@lancedb/lancedb");
const arrow = require("apache-arrow"); // LanceDB's copy: its tables pass instanceof checks
const lib = await import("./types_lib.mjs");

const [dbDir, flag, kind] = process.argv.slice(2);
const EDGE = { empty1: [1, 0, 0], empty: [300, 0, 0], emptybig: [34000, 0, 100], bigstr: [300, 0, 0] }; // rows, fewFrom, few
if (!dbDir || flag !== "--kind" || !["wide", "strpk", "types", "nested", ...Object.keys(EDGE)].includes(kind)) {
  console.error("usage: node make-table.mjs DB_DIR --kind wide|strpk|types|nested|empty1|empty|emptybig|bigstr");
  process.exit(2);
}
const F = (n, t, nullable = true) => new arrow.Field(n, t, nullable);
let schema, row;
if (kind === "wide") {
  schema = new arrow.Schema([
    F("id", new arrow.Int64(), false), F("i32", new arrow.Int32()), F("u32", new arrow.Uint32()),
    F("u64", new arrow.Uint64()), F("f32", new arrow.Float32()), F("flag", new arrow.Bool()),
    F("bin", new arrow.Binary()), F("s", new arrow.Utf8()),
    F("vec", new arrow.FixedSizeList(4, F("item", new arrow.Float32()))),
  ]);
  row = (k, tag) => ({
    id: BigInt(k), i32: k % 3 === 0 ? null : -k * 1000, u32: k * 7, u64: BigInt(k) * 1000000007n,
    f32: Math.fround(k / 3), flag: k % 4 === 0 ? null : k % 2 === 0, bin: Uint8Array.from([k & 255, 1, 2]),
    s: `${tag}_${k}`, vec: k % 5 === 0 ? null : [k, -k, 0.5, Math.fround(1 / (k + 1))],
  });
} else if (kind === "strpk") {
  schema = new arrow.Schema([F("id", new arrow.Utf8(), false), F("v", new arrow.Float64()), F("n", new arrow.Int32())]);
  row = (k, tag) => ({ id: `k${String(k).padStart(6, "0")}`, v: k * 1.25, n: tag === "base" ? k : -k });
}
// types: rows in exact form, built bit for bit (types_lib.buildTable); an
// update changes every value (the row of key k + 1000 under key k)
const edge = EDGE[kind];
const cat = kind === "types" || kind === "nested" ? lib.catalogue(arrow, { nested: kind === "nested" })
  : kind === "bigstr" ? lib.bigCatalogue(arrow)
  : edge ? lib.edgeCatalogue(arrow, { fewFrom: edge[1], few: edge[2] }) : null;
const table = (rows) => {
  if (!cat) return lancedb.makeArrowTable(rows, { schema });
  const fields = lib.tableFields(arrow, cat);
  // the row of key k: types/nested updates carry key k + 1000's values; the
  // edge kinds' base rows key k + 100 000's (outside their item range)
  const from = (k, tag) => (edge ? (tag === "base" ? k + 100000 : k) : tag === "base" ? k : k + 1000);
  return lib.buildTable(arrow, fields, rows.map(([k, tag]) => ({ ...lib.makeRow(cat, from(k, tag)), id: String(k) })));
};
if (cat) row = (k, tag) => [k, tag];
fs.mkdirSync(dbDir, { recursive: true });
const db = await lancedb.connect(dbDir);
const base = [];
for (let k = 0; k < 20; k++) base.push(row(k, "base"));
const t = await db.createTable("t", table(base), { mode: "overwrite" });
await t.setUnenforcedPrimaryKey("id");
await t.setLsmWriteSpec({ specType: "unsharded", maintainedIndexes: [], writerConfigDefaults: {} });
t.close();
const w = await db.openTable("t");
for (const [from, to, tag] of edge ? [[0, edge[0], "lance"]] : [[10, 40, "lance"], [30, 50, "lance2"]]) {
  const upd = [];
  for (let k = from; k < to; k++) upd.push(row(k, tag));
  await w.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(table(upd));
}
await w.closeLsmWriters();
w.close();
console.error(`made ${path.join(dbDir, "t.lance")} (${kind})`);
