#!/usr/bin/env node
// gen-badutf8-seeds.mjs — ARROW frames with one invalid UTF-8 value where
// the frame reader must find it, as seeds for fuzz_arrowframe (its tables
// `flat`, `nested` and `vectors`: see fuzz/fuzz_arrowframe.c).
//
//   node tools/gen-badutf8-seeds.mjs [OUTDIR] [--node-modules DIR]
//
// OUTDIR defaults to fuzz/corpus/arrowframe, node_modules to
// tests/interop/node_modules (apache-arrow 18.1.0). Writes own-bad-utf8-*:
//   large.arrow      id, u16, ls large_utf8 (row 2 is ed a0 80, a surrogate)
//   list.arrow       id, ls_str list<utf8> (row 1's second item is ff)
//   list-struct.arrow id, l_st list<struct<k: utf8, v: int64>> (a bad k)
//   dict.arrow       id, name Dictionary<Int32, Utf8> (row 1's dictionary
//                    value is invalid; for the `vectors` table)
// Each must be refused ("invalid UTF-8"; tests/net/test_arrowframe.c
// test_bad_utf8_seeds); before 2026-12-02 the first three were accepted (the first was
// fuzz_arrowframe's crash in CI). The files are deterministic.
import * as fs from "node:fs";
import * as path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const args = process.argv.slice(2);
let outDir = path.join(repo, "fuzz/corpus/arrowframe");
let nodeModules = path.join(repo, "tests/interop/node_modules");
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--node-modules") nodeModules = args[++i];
  else if (!args[i].startsWith("--")) outDir = path.resolve(args[i]);
  else throw new Error(`unknown option ${args[i]}`);
}
const arrow = createRequire(path.join(nodeModules, "x.js"))("apache-arrow");
fs.mkdirSync(outDir, { recursive: true });

const enc = new TextEncoder();
// utf8-like data from byte strings (arrays of numbers or JS strings)
function strings(type, vals, large = false) {
  const parts = vals.map((v) => (typeof v === "string" ? enc.encode(v) : Uint8Array.from(v)));
  const offs = [0];
  for (const p of parts) offs.push(offs[offs.length - 1] + p.length);
  const data = new Uint8Array(offs[offs.length - 1]);
  parts.forEach((p, i) => data.set(p, offs[i]));
  const valueOffsets = large ? BigInt64Array.from(offs.map(BigInt)) : Int32Array.from(offs);
  return arrow.makeData({ type, length: vals.length, nullCount: 0, valueOffsets, data });
}
const ids = (n) => arrow.makeVector(BigInt64Array.from({ length: n }, (_, i) => BigInt(i)));
const field = (name, type) => new arrow.Field(name, type, true);
function list(itemType, child, offs) {
  const type = new arrow.List(field("item", itemType));
  return arrow.makeData({ type, length: offs.length - 1, nullCount: 0,
                          valueOffsets: Int32Array.from(offs), child });
}
function write(name, cols) {
  const t = new arrow.Table(Object.fromEntries(Object.entries(cols).map(([k, d]) =>
    [k, d instanceof arrow.Vector ? d : arrow.makeVector(d)])));
  fs.writeFileSync(path.join(outDir, `own-bad-utf8-${name}.arrow`), arrow.tableToIPC(t, "stream"));
}

const SURROGATE = [0x78, 0xed, 0xa0, 0x80];
write("large", {
  id: ids(3),
  u16: arrow.makeVector(Uint16Array.from([1, 2, 3])),
  ls: strings(new arrow.LargeUtf8(), ["a", "b", SURROGATE], true),
});
write("list", {
  id: ids(3),
  ls_str: list(new arrow.Utf8(), strings(new arrow.Utf8(), ["a", "b", [0xff], "c"]), [0, 1, 3, 4]),
});
const stType = new arrow.Struct([field("k", new arrow.Utf8()), field("v", new arrow.Int64())]);
const st = arrow.makeData({ type: stType, length: 3, nullCount: 0, children: [
  strings(new arrow.Utf8(), ["k0", [0xc3, 0x28], "k2"]),
  arrow.makeData({ type: new arrow.Int64(), length: 3, nullCount: 0, data: BigInt64Array.from([1n, 2n, 3n]) }),
] });
write("list-struct", { id: ids(2), l_st: list(stType, st, [0, 1, 3]) });
const dictType = new arrow.Dictionary(new arrow.Utf8(), new arrow.Int32());
const dict = arrow.makeVector(strings(new arrow.Utf8(), ["ok", SURROGATE]));
write("dict", {
  id: ids(3),
  name: arrow.makeData({ type: dictType, length: 3, nullCount: 0, data: Int32Array.from([0, 1, 0]), dictionary: dict }),
});
