#!/usr/bin/env node
// gen-layout-fixtures.mjs — base tables LanceDB 0.39.0 (Lance 12) writes
// with nested columns, in Lance file versions 2.0, 2.1 and 2.2, for the
// golden test of DataFile.fields / column_indices (tests/lance/
// test_datafile_fields.c, src/lance/datafile_fields.h).
//
//   node tools/gen-layout-fixtures.mjs [OUTDIR] [--node-modules DIR]
//
// OUTDIR defaults to tests/lance/data/layout; node_modules to
// tests/interop/node_modules. The table (field ids in brackets):
//
//   id [0]        int64 not null
//   tags [1]      list<string>                       (item [2])
//   meta [3]      struct<a: int32 [4], b: string [5]>
//   ls [6]        list<struct<x: int32, y: string>>  (item [7], x [8], y [9])
//   sl [10]       struct<n: int32 [11], l: list<int64> [12]>  (item [13])
//   v [14]        fixed_size_list<float16, 4>        (a leaf: no child field)
//   lfsl [15]     list<fixed_size_list<float32, 2>>  (item [16])
//   x [17]        double
//
// 12 rows with values that differ row to row, nulls and empty lists in some
// (built by types_lib's buildTable: 64-bit integers as decimal strings).
// Per version V (2_0, 2_1, 2_2) it writes V.manifest (the table's one
// manifest, with its DataFile) and V.lance (the data file it names).
// LanceDB records for 2.1 and 2.2: fields [0, 2, 4, 5, 8, 9, 11, 13, 14, 16,
// 17], column_indices [0..10]; for 2.0 every field [0..17], columns [0..17].
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const args = process.argv.slice(2);
let outDir = path.join(repo, "tests/lance/data/layout");
let nodeModules = path.join(repo, "tests/interop/node_modules");
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--node-modules") nodeModules = args[++i];
  else if (!args[i].startsWith("--")) outDir = path.resolve(args[i]);
  else throw new Error(`unknown option ${args[i]}`);
}
const require = createRequire(path.join(nodeModules, "x.js"));
const lancedb = require("@lancedb/lancedb");
const arrow = require("apache-arrow"); // the copy LanceDB uses (instanceof checks)
const lib = await import(pathToFileURL(path.join(repo, "tests/interop/types_lib.mjs")).href);

const F = (n, t, nullable = true) => new arrow.Field(n, t, nullable);
const schema = new arrow.Schema([
  F("id", new arrow.Int64(), false),
  F("tags", new arrow.List(F("item", new arrow.Utf8()))),
  F("meta", new arrow.Struct([F("a", new arrow.Int32()), F("b", new arrow.Utf8())])),
  F("ls", new arrow.List(F("item", new arrow.Struct([F("x", new arrow.Int32()), F("y", new arrow.Utf8())])))),
  F("sl", new arrow.Struct([F("n", new arrow.Int32()), F("l", new arrow.List(F("item", new arrow.Int64())))])),
  F("v", new arrow.FixedSizeList(4, F("item", new arrow.Float16()))),
  F("lfsl", new arrow.List(F("item", new arrow.FixedSizeList(2, F("item", new arrow.Float32()))))),
  F("x", new arrow.Float64()),
]);
const rows = [];
for (let k = 0; k < 12; k++) {
  rows.push({
    id: String(k),
    tags: k % 4 === 0 ? null : Array.from({ length: k % 3 }, (_, i) => `t${k}_${i}`),
    meta: { a: k % 5 === 0 ? null : k * 7, b: `b${k}` }, // 2.0 has no struct validity
    ls: k % 3 === 0 ? [] : [{ x: k, y: `y${k}` }, { x: -k, y: null }].slice(0, 1 + (k % 2)),
    sl: { n: k % 2 ? null : k, l: k % 4 === 1 ? null : [String(k), String(-k * 1000)] },
    v: k % 6 === 0 ? null : [k % 8, 0.5, -1.25, k / 4],
    lfsl: k % 5 === 2 ? null : [[k, -k], [k / 2, 3]].slice(0, 1 + (k % 2)),
    x: k % 7 === 3 ? null : k * 1.5,
  });
}

fs.mkdirSync(outDir, { recursive: true });
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "mw-layoutfix-"));
for (const version of ["2.0", "2.1", "2.2"]) {
  const dir = path.join(scratch, version);
  const db = await lancedb.connect(dir);
  const t = await db.createTable("t", lib.buildTable(arrow, schema.fields, rows),
    { storageOptions: { new_table_data_storage_version: version } });
  if ((await t.countRows()) !== rows.length) throw new Error(`${version}: LanceDB counts other rows`);
  t.close();
  const tdir = path.join(dir, "t.lance");
  const mans = fs.readdirSync(path.join(tdir, "_versions")).filter((f) => f.endsWith(".manifest"));
  const data = fs.readdirSync(path.join(tdir, "data"));
  if (mans.length !== 1 || data.length !== 1) throw new Error(`${version}: ${mans.length} manifests, ${data.length} data files`);
  const tag = version.replace(".", "_");
  fs.copyFileSync(path.join(tdir, "_versions", mans[0]), path.join(outDir, `${tag}.manifest`));
  fs.copyFileSync(path.join(tdir, "data", data[0]), path.join(outDir, `${tag}.lance`));
  console.error(`${version}: ${data[0]}`);
}
fs.rmSync(scratch, { recursive: true, force: true });
