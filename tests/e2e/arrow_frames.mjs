#!/usr/bin/env node
// arrow_frames.mjs — ARROW frames written by the apache-arrow npm package
// (18.1.0, pinned in tests/interop/package.json), for tests/e2e/test_arrow_npm.py.
//
//   arrow_frames.mjs make OUTDIR   write OUTDIR/<name>.arrow (IPC streams) and
//                                  OUTDIR/expected.json (the rows LanceDB must
//                                  read once every good frame is written)
//   arrow_frames.mjs read DB_DIR [TABLE]
//                                  print DB_DIR/TABLE.lance (default t) as
//                                  LanceDB 0.39.0 reads it: one JSON object
//                                  per line, sorted by id, vectors as
//                                  arrays, int64 as numbers
//
// The table: id:int64 not null, name:string, v:double,
// vec:fixed_size_list<float32,8>. Frames (in send order):
//   full      ids 1..300, every column, nulls in name, v and vec
//   subset    ids 250..350, only (id, v): an upsert replaces the whole row,
//             so name and vec of 250..300 become null
//   reordered ids 400..409, columns (v, name, id) in another order
//   wrongtype ids 500..501 with v as utf8 -> ERR type, nothing written
//   nokey     (name, v) only -> ERR (no primary key), nothing written
// and, for the unsharded table u (same columns), u-all.arrow: ids
// 1000..1099, every column in table order, nulls in name, v and vec but
// never in the last vec slot, so its record batch can go to the WAL as it
// came (docs/protocol.md 1.5); expected_u.json = full's rows and u-all's.
import * as fs from "node:fs";
import * as path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "..", "interop", "package.json"));
const arrow = require("apache-arrow");

const VEC = new arrow.FixedSizeList(8, new arrow.Field("item", new arrow.Float32(), true));

function frame(fields, cols) {
  const schema = new arrow.Schema(fields);
  const n = cols[0].length;
  const data = fields.map((f, i) => arrow.vectorFromArray(cols[i], f.type));
  const batch = new arrow.RecordBatch(schema, arrow.makeData({
    type: new arrow.Struct(fields), length: n, nullCount: 0,
    children: data.map((v) => v.data[0]),
  }));
  return arrow.tableToIPC(new arrow.Table([batch]), "stream");
}

const F = {
  id: new arrow.Field("id", new arrow.Int64(), false),
  name: new arrow.Field("name", new arrow.Utf8(), true),
  v: new arrow.Field("v", new arrow.Float64(), true),
  vec: new arrow.Field("vec", VEC, true),
  vs: new arrow.Field("v", new arrow.Utf8(), true),
};
const vecOf = (i) => Array.from({ length: 8 }, (_, d) => Math.fround(i + d / 8));

function make(out) {
  fs.mkdirSync(out, { recursive: true });
  const rows = new Map();
  const put = (r) => rows.set(r.id, { id: r.id, name: r.name ?? null, v: r.v ?? null, vec: r.vec ?? null });
  // full
  const full = [];
  for (let i = 1; i <= 300; i++) {
    full.push({ id: i, name: i % 7 === 0 ? null : `n${i}`, v: i % 11 === 0 ? null : i + 0.25,
                vec: i % 5 === 0 ? null : vecOf(i) });
  }
  full.forEach(put);
  fs.writeFileSync(path.join(out, "1-full.arrow"), frame([F.id, F.name, F.v, F.vec],
    [full.map((r) => BigInt(r.id)), full.map((r) => r.name), full.map((r) => r.v), full.map((r) => r.vec)]));
  // subset
  const sub = [];
  for (let i = 250; i <= 350; i++) sub.push({ id: i, v: i % 2 ? -i : null });
  sub.forEach(put);
  fs.writeFileSync(path.join(out, "2-subset.arrow"), frame([F.id, F.v],
    [sub.map((r) => BigInt(r.id)), sub.map((r) => r.v)]));
  // reordered
  const re = [];
  for (let i = 400; i < 410; i++) re.push({ id: i, name: `re${i}`, v: i / 4 });
  re.forEach(put);
  fs.writeFileSync(path.join(out, "3-reordered.arrow"), frame([F.v, F.name, F.id],
    [re.map((r) => r.v), re.map((r) => r.name), re.map((r) => BigInt(r.id))]));
  // bad frames
  fs.writeFileSync(path.join(out, "4-wrongtype.arrow"), frame([F.id, F.vs], [[500n, 501n], ["x", "y"]]));
  fs.writeFileSync(path.join(out, "5-nokey.arrow"), frame([F.name, F.v], [["a"], [1.5]]));
  const expected = [...rows.values()].sort((a, b) => a.id - b.id);
  fs.writeFileSync(path.join(out, "expected.json"), JSON.stringify(expected));
  // u: full (re-encoded: its last vec slot is null) and u-all (passed through)
  const all = [];
  for (let i = 1000; i < 1100; i++) {
    all.push({ id: i, name: i % 3 === 0 ? null : `u${i}`, v: i % 4 === 0 ? null : i / 8,
               vec: i % 5 === 1 ? null : vecOf(i) });
  }
  fs.writeFileSync(path.join(out, "u-all.arrow"), frame([F.id, F.name, F.v, F.vec],
    [all.map((r) => BigInt(r.id)), all.map((r) => r.name), all.map((r) => r.v), all.map((r) => r.vec)]));
  const u = full.map((r) => ({ id: r.id, name: r.name ?? null, v: r.v ?? null, vec: r.vec ?? null }))
    .concat(all);
  fs.writeFileSync(path.join(out, "expected_u.json"), JSON.stringify(u));
}

async function read(dbdir, table) {
  const lancedb = require("@lancedb/lancedb");
  const db = await lancedb.connect(dbdir);
  const t = await db.openTable(table || "t");
  const rows = (await t.query().toArray()).map((r) => ({
    id: Number(r.id), name: r.name ?? null, v: r.v ?? null,
    vec: r.vec == null ? null : Array.from(r.vec.toArray ? r.vec.toArray() : r.vec),
  }));
  rows.sort((a, b) => a.id - b.id);
  for (const r of rows) console.log(JSON.stringify(r));
  t.close();
}

if (process.argv[2] === "make") make(process.argv[3]);
else if (process.argv[2] === "read") await read(process.argv[3], process.argv[4]);
else {
  console.error("usage: arrow_frames.mjs make OUTDIR | read DB_DIR [TABLE]");
  process.exit(2);
}
