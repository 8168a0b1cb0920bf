#!/usr/bin/env node
// gen-dict-fixtures.mjs — ARROW frames with dictionary-encoded columns, as
// apache-arrow 18.1.0 (the copy LanceDB 0.39.0 pins) writes them, for
// tests/lance/test_types.c (test_dictionary_frames).
//
//   node tools/gen-dict-fixtures.mjs [OUTDIR] [--node-modules DIR]
//
// OUTDIR defaults to tests/lance/data/types, node_modules to
// tests/interop/node_modules. Writes:
//   dict_table.arrow   tableFromArrays({id, s, n}): what a client gets by
//                      default; s is Dictionary<Int32, Utf8> (nulls)
//   dict_stream.arrow  id int64, s Dictionary<Uint16, Utf8>, b Dictionary<
//                      Int8, Binary> in three batches: initial dictionaries,
//                      then deltas (builders flushed twice), then
//                      replacements (fresh builders on the same ids)
//   dict_bad.arrow     one batch whose index 7 points past a 2-entry
//                      dictionary
//   dict_table.rows.jsonl, dict_stream.rows.jsonl  the rows in exact.mjs's
//                      form (int64 as "decimal", binary as [bytes])
// The files are deterministic.
import * as fs from "node:fs";
import * as path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const args = process.argv.slice(2);
let outDir = path.join(repo, "tests/lance/data/types");
let nodeModules = path.join(repo, "tests/interop/node_modules");
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--node-modules") nodeModules = args[++i];
  else if (!args[i].startsWith("--")) outDir = path.resolve(args[i]);
  else throw new Error(`unknown option ${args[i]}`);
}
const arrow = createRequire(path.join(nodeModules, "x.js"))("apache-arrow");
fs.mkdirSync(outDir, { recursive: true });
const bytes_ = (u) => (u == null ? null : Array.from(u));
const lines = (t, cols) => Array.from({ length: t.numRows }, (_, i) => {
  const r = {};
  for (const [c, f] of cols) r[c] = f(t.getChild(c).get(i));
  return JSON.stringify(r);
}).join("\n") + "\n";
const dec = (v) => String(v), same = (v) => v;

// 1. the default: tableFromArrays dictionary-encodes string arrays
const t1 = arrow.tableFromArrays({
  id: BigInt64Array.from([0n, 1n, 2n, 3n, 4n]),
  s: ["a", "bé", null, "a", ""],
  n: Int32Array.from([1, 2, 3, 4, 5]),
});
if (!arrow.DataType.isDictionary(t1.schema.fields[1].type)) throw new Error("tableFromArrays no longer makes dictionaries");
fs.writeFileSync(path.join(outDir, "dict_table.arrow"), arrow.tableToIPC(t1, "stream"));
fs.writeFileSync(path.join(outDir, "dict_table.rows.jsonl"), lines(t1, [["id", dec], ["s", same], ["n", same]]));

// 2. deltas and a replacement
const sType = new arrow.Dictionary(new arrow.Utf8(), new arrow.Uint16());
const bType = new arrow.Dictionary(new arrow.Binary(), new arrow.Int8());
const sb = arrow.makeBuilder({ type: sType, nullValues: [null] });
const bb = arrow.makeBuilder({ type: bType, nullValues: [null] });
const enc = (s) => Uint8Array.from(Buffer.from(s));
const batches = [];
let id = 0n;
const batch = (ss, bs, sbuild, bbuild) => {
  for (const v of ss) sbuild.append(v);
  for (const v of bs) bbuild.append(v == null ? null : enc(v));
  const ids = arrow.makeVector(BigInt64Array.from(ss.map(() => id++)));
  const t = new arrow.Table({ id: ids, s: new arrow.Vector([sbuild.flush()]), b: new arrow.Vector([bbuild.flush()]) });
  batches.push(...t.batches);
};
batch(["x", "y", "x", null], ["\x00\x01", null, "\x00\x01", "zz"], sb, bb);
batch(["z", null, "y", "w"], ["zz", "q", null, "\xff"], sb, bb);              // deltas
batch(["y", "v"], ["r", "r"], arrow.makeBuilder({ type: sType, nullValues: [null] }),
      arrow.makeBuilder({ type: bType, nullValues: [null] }));                 // replacements
const t2 = new arrow.Table(batches);
const w = new arrow.RecordBatchStreamWriter();
w.writeAll(t2);
const bytes = w.toUint8Array(true);
fs.writeFileSync(path.join(outDir, "dict_stream.arrow"), bytes);
const back = arrow.tableFromIPC(bytes);
fs.writeFileSync(path.join(outDir, "dict_stream.rows.jsonl"), lines(back, [["id", dec], ["s", same], ["b", bytes_]]));

// 3. an index past the end of its dictionary
const dict = arrow.vectorFromArray(["p", "q"], new arrow.Utf8());
const bad = arrow.makeData({ type: new arrow.Dictionary(new arrow.Utf8(), new arrow.Int32()), length: 2,
  data: Int32Array.from([1, 7]), dictionary: dict });
const t3 = new arrow.Table({ id: arrow.makeVector(BigInt64Array.from([0n, 1n])), s: new arrow.Vector([bad]) });
fs.writeFileSync(path.join(outDir, "dict_bad.arrow"), arrow.tableToIPC(t3, "stream"));
console.error(`wrote ${outDir}: dict_table.arrow (${t1.numRows} rows), dict_stream.arrow (${t2.numRows} rows, ${batches.length} batches), dict_bad.arrow`);
