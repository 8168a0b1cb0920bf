// make-legacy-v1.mjs — golden Lance v1 ("legacy") data files, written by LanceDB
// 0.39.0 itself (dataStorageVersion "legacy"), with the values LanceDB reads
// back from them. Run once from tests/interop (whose node_modules pin the
// package) and commit the output:
//
//   node tests/interop/make-legacy-v1.mjs tests/lance/data/legacy_v1
//
// (the interop test legacy-v1-fresh also runs it into a scratch folder and
// decodes what the pinned package writes today).
//
// For each table NAME it writes NAME.lance (the table's only data file) and
// NAME.expected: a header line of column names, then one line per row of
// tab-separated cells as LanceDB returned them:
//   null | decimal integer | true/false | f32:<8 hex bits> | f64:<16 hex bits>
//   | s:<hex of the UTF-8 bytes> | b:<hex bytes> | v:<f32 bits>,<f32 bits>,...
// tests/lance/test_legacy_v1.c decodes NAME.lance with our reader and must
// print the same cells.
import * as lancedb from "@lancedb/lancedb";
import { Schema, Field, Int32, Int64, Float32, Float64, Bool, Utf8, Binary, FixedSizeList } from "apache-arrow";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const out = process.argv[2];
if (!out) throw new Error("usage: node make-legacy-v1.mjs OUT_DIR");
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "mw-v1-"));
const db = await lancedb.connect(scratch);

const hex = (u8) => Buffer.from(u8).toString("hex");
const bits32 = (x) => { const d = new DataView(new ArrayBuffer(4)); d.setFloat32(0, x, true); return d.getUint32(0, true).toString(16).padStart(8, "0"); };
const bits64 = (x) => { const d = new DataView(new ArrayBuffer(8)); d.setFloat64(0, x, true); return d.getBigUint64(0, true).toString(16).padStart(16, "0"); };

function cell(type, v) {
  if (v === null || v === undefined) return "null";
  if (type instanceof Float32) return "f32:" + bits32(v);
  if (type instanceof Float64) return "f64:" + bits64(v);
  if (type instanceof Bool) return v ? "true" : "false";
  if (type instanceof Utf8) return "s:" + hex(Buffer.from(v, "utf8"));
  if (type instanceof Binary) return "b:" + hex(v);
  if (type instanceof FixedSizeList) return "v:" + Array.from(v.toArray()).map(bits32).join(",");
  return v.toString();
}

async function make(name, schema, rows) {
  const t = await db.createTable(name, rows, { schema, dataStorageVersion: "legacy" });
  const dir = path.join(scratch, name + ".lance", "data");
  const files = fs.readdirSync(dir);
  if (files.length !== 1) throw new Error(`${name}: ${files.length} data files`);
  fs.copyFileSync(path.join(dir, files[0]), path.join(out, name + ".lance"));
  const got = await t.query().toArray();
  const lines = [schema.fields.map((f) => f.name).join("\t")];
  for (const r of got) lines.push(schema.fields.map((f) => cell(f.type, r[f.name])).join("\t"));
  fs.writeFileSync(path.join(out, name + ".expected"), lines.join("\n") + "\n");
  console.log(`${name}: ${got.length} rows, ${fs.statSync(path.join(out, name + ".lance")).size} bytes`);
}

// every type v1 stores, nulls in each nullable column, "" next to null
const types = new Schema([
  new Field("i32", new Int32(), true), new Field("i64", new Int64(), false),
  new Field("f32", new Float32(), true), new Field("f64", new Float64(), true),
  new Field("b", new Bool(), true), new Field("s", new Utf8(), true), new Field("bin", new Binary(), true),
  new Field("vec", new FixedSizeList(3, new Field("item", new Float32(), true)), true),
]);
await make("types", types, [
  { i32: 1, i64: 10n, f32: 1.5, f64: -2.25, b: true, s: "alpha", bin: Uint8Array.from([1, 2, 3]), vec: [1, 2, 3] },
  { i32: null, i64: -20n, f32: null, f64: null, b: null, s: null, bin: null, vec: null },
  { i32: -3, i64: 30n, f32: 0, f64: 1e300, b: false, s: "", bin: Uint8Array.from([]), vec: [4, 5, 6] },
  { i32: 2147483647, i64: 9007199254740993n, f32: -0.5, f64: 0.125, b: true, s: "é ü", bin: Uint8Array.from([255]), vec: [7, 8, 9] },
  { i32: 5, i64: 50n, f32: 3, f64: -0, b: false, s: "zz", bin: Uint8Array.from([0, 0]), vec: [0.5, 0.25, 0.125] },
]);

// two batches (LanceDB cuts v1 batches at 1024 rows)
const batches = new Schema([new Field("k", new Int32(), false), new Field("s", new Utf8(), true)]);
const rows = [];
for (let i = 0; i < 1030; i++) rows.push({ k: i * 3 - 1000, s: i % 7 === 0 ? null : "s" + (i % 13) });
await make("batches", batches, rows);
fs.rmSync(scratch, { recursive: true, force: true });
