#!/usr/bin/env node
// check.mjs — read a LanceDB table through LanceDB 0.39.0's LSM scanner (the
// way a plain reader sees it: base table + SSTables listed in the newest shard
// manifests) and compare the rows with what they must be.
//
//   node check.mjs TABLE_DIR --expected FILE
//       FILE = JSON lines as peer/read-table.mjs prints them (a vector's
//       expected.jsonl, without the {"rows":N} line).
//   node check.mjs TABLE_DIR --prior FILE --model FILE
//       expected = prior (JSON lines, the state before our SSTables were
//       registered) overlaid by the model's final state per key, written by
//       mw_sst_tool: {"id":"7","name":..,"v":..,"vec":[..]} sets the row,
//       {"id":"7","_deleted":true} removes it. Doubles are printed with 17
//       significant digits, float32 values with 9 (both exact); 64-bit
//       integers as strings, binary as an array of byte values.
//   [--out FILE]  also write what LanceDB returned (same format); with
//       --out alone, only dump (the state before our SSTables).
//   [--compacted yes]  everything was compacted into the base table: a plain
//       query (useLsm(false): the base table only) must return the same
//       rows, and countRows() (the base's live rows) their number.
//   [--versions N]  history GC ran: LanceDB lists at least N versions, and
//       each one checks out and reads (plain query rows = countRows()), so
//       nothing a retained version references was deleted.
//
// Output: one line "ok rows=N sha256=…" (exit 0), or the first differing
// lines and the counts (exit 1). Rows print with keys in schema order, bigint
// id as a string, vec as an array of numbers (float32 widened) or null, the
// format of peer/read-table.mjs, so the sha256 equals a vector's
// expected_sha256.
import * as fs from "node:fs";
import * as path from "node:path";
import * as crypto from "node:crypto";
import { fileURLToPath } from "node:url";
import { connect, tableLocation } from "./lancedb_open.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
if (!fs.existsSync(path.join(here, "node_modules", "@lancedb", "lancedb"))) {
  console.error(`interop: ${here}/node_modules is missing: run \`npm install --no-audit --no-fund\` in tests/interop first`);
  process.exit(2);
}
const lancedb = await import("@lancedb/lancedb");
const { exactLine } = await import("./exact.mjs");

function parseArgs(argv) {
  const pos = [], opt = {};
  for (let i = 0; i < argv.length; i++) {
    if (argv[i].startsWith("--")) {
      const v = argv[i + 1];
      if (v === undefined) throw new Error(`missing value for ${argv[i]}`);
      opt[argv[i].slice(2)] = v;
      i++;
    } else pos.push(argv[i]);
  }
  return { pos, opt };
}

// One row -> the JSON line read-table.mjs prints.
export function rowLine(row, fields) {
  const o = {};
  for (const f of fields) {
    let v = row[f];
    if (v === undefined) v = null;
    if (typeof v === "bigint") v = v.toString();
    else if (v !== null && typeof v === "object") {
      if (typeof v.toArray === "function") v = Array.from(v.toArray(), Number);
      else if (ArrayBuffer.isView(v) || Array.isArray(v)) v = Array.from(v, Number);
    }
    o[f] = v;
  }
  return JSON.stringify(o);
}

const sha = (lines) => {
  const h = crypto.createHash("sha256");
  for (const l of lines) h.update(l + "\n");
  return h.digest("hex");
};
const readLines = (f) => fs.readFileSync(f, "utf8").split("\n").filter((l) => l.length > 0 && !l.startsWith('{"rows":'));

const { pos, opt } = parseArgs(process.argv.slice(2));
if (pos.length !== 1 || (!opt.expected && !(opt.prior && opt.model) && !opt.out)) {
  console.error("usage: node check.mjs TABLE_DIR (--expected FILE | --prior FILE --model FILE) [--out FILE]");
  process.exit(2);
}
const loc = tableLocation(pos[0]); // a folder or s3://…
const db = await connect(lancedb, loc);
const table = await db.openTable(loc.name);
const schema = await table.schema();
const fields = schema.fields.map((f) => f.name);
// float32 values (scalars or fixed_size_list items) are printed widened to
// double; the model prints them with 9 digits, so they are rounded back.
const isF32 = (t) => t.typeId === 3 /* Float */ && t.precision === 1 /* SINGLE */;
const f32Fields = new Set(schema.fields.filter((f) => isF32(f.type)).map((f) => f.name));
const f32Lists = new Set(schema.fields.filter((f) => f.type.typeId === 16 /* FixedSizeList */ &&
  isF32(f.type.children[0].type)).map((f) => f.name));
// Key order as read-table.mjs: JS < on the id value (bigint for 64-bit ints).
const idType = schema.fields.find((f) => f.name === "id").type;
const bigId = idType.typeId === 2 /* Int */ && idType.bitWidth === 64;
const keyOf = (id) => (bigId ? BigInt(id) : id);
const cmp = (a, b) => (a < b ? -1 : a > b ? 1 : 0);

// Tables with types beyond the vectors' (int32/64, uint32/64, float32/64,
// bool, utf8, binary, fixed_size_list<float32>) print every value exactly
// (exact.mjs: raw temporal and decimal integers, nested values); the classic
// format stays what peer/read-table.mjs prints, so vector sha256s hold.
const classic = (t) => (t.typeId === 2 && (t.bitWidth === 32 || t.bitWidth === 64)) ||
  (t.typeId === 3 && t.precision > 0) || [4, 5, 6].includes(t.typeId) ||
  (t.typeId === 16 && isF32(t.children[0].type));
const exact = !schema.fields.every((f) => classic(f.type));

// What LanceDB returns.
async function readRows(query) {
  const tbl = await query.toArrow();
  const rows = [];
  for (const batch of tbl.batches) {
    const cols = fields.map((f) => batch.getChild(f));
    for (let i = 0; i < batch.numRows; i++) {
      const r = {};
      fields.forEach((f, k) => { r[f] = cols[k] ? cols[k].get(i) : null; });
      if (exact) r.line = exactLine(batch, fields, i);
      rows.push(r);
    }
  }
  rows.sort((a, b) => cmp(a.id, b.id));
  return rows.map((r) => (exact ? r.line : rowLine(r, fields)));
}
const got = await readRows(table.query());
const plain = opt.compacted ? await readRows(table.query().useLsm(false)) : null;
const counted = opt.compacted ? await table.countRows() : null;
let versionsNote = "";
if (opt.versions) {
  const vs = await table.listVersions();
  if (vs.length < Number(opt.versions)) {
    console.error(`MISMATCH: ${vs.length} versions retained, expected at least ${opt.versions}`);
    process.exit(1);
  }
  for (const v of vs) {
    await table.checkout(v.version);
    const n = await table.countRows();
    const rows = await readRows(table.query().useLsm(false));
    if (rows.length !== n) {
      console.error(`MISMATCH: version ${v.version}: plain query ${rows.length} rows, countRows() ${n}`);
      process.exit(1);
    }
  }
  await table.checkoutLatest();
  versionsNote = `, ${vs.length} retained versions checked out and read (${vs.map((v) => v.version).join(" ")})`;
}
table.close();
if (opt.out) fs.writeFileSync(opt.out, got.join("\n") + (got.length ? "\n" : ""));
if (!opt.expected && !opt.model) {
  console.log(`dumped rows=${got.length} sha256=${sha(got)}`);
  process.exit(0);
}

// What it must return.
let want;
if (opt.expected) {
  want = readLines(opt.expected);
} else {
  const state = new Map(); // key -> line
  for (const l of readLines(opt.prior)) state.set(keyOf(JSON.parse(l).id), l);
  for (const l of readLines(opt.model)) {
    const m = JSON.parse(l);
    const id = keyOf(m.id);
    if (m._deleted) { state.delete(id); continue; }
    const r = { ...m, id };
    for (const f of f32Fields) if (typeof r[f] === "number") r[f] = Math.fround(r[f]);
    for (const f of f32Lists) if (Array.isArray(r[f])) r[f] = r[f].map((x) => Math.fround(x));
    state.set(id, rowLine(r, fields));
  }
  want = [...state.keys()].sort(cmp).map((k) => state.get(k));
}

const hg = sha(got), hw = sha(want);
if (opt.compacted && hg === hw) {
  const hp = sha(plain);
  if (hp !== hw || plain.length !== want.length) {
    console.error(`MISMATCH: the plain (base-only) query returned ${plain.length} rows (sha256 ${hp}), expected ${want.length}`);
    const wantSet = new Set(want), plainSet = new Set(plain);
    let shown = 0;
    for (const l of plain) if (!wantSet.has(l) && shown++ < 5) console.error(`  unexpected: ${l.slice(0, 300)}`);
    shown = 0;
    for (const l of want) if (!plainSet.has(l) && shown++ < 5) console.error(`  missing:    ${l.slice(0, 300)}`);
    process.exit(1);
  }
  if (counted !== want.length) {
    console.error(`MISMATCH: countRows() = ${counted}, expected ${want.length}`);
    process.exit(1);
  }
  console.log(`ok rows=${got.length} sha256=${hg} (plain query and countRows() agree: all compacted${versionsNote})`);
  process.exit(0);
}
if (hg === hw && got.length === want.length) {
  console.log(`ok rows=${got.length} sha256=${hg}`);
  process.exit(0);
}
console.error(`MISMATCH: LanceDB returned ${got.length} rows (sha256 ${hg}), expected ${want.length} (sha256 ${hw})`);
const wantSet = new Set(want), gotSet = new Set(got);
let shown = 0;
for (const l of got) if (!wantSet.has(l) && shown++ < 5) console.error(`  unexpected: ${l.slice(0, 300)}`);
shown = 0;
for (const l of want) if (!gotSet.has(l) && shown++ < 5) console.error(`  missing:    ${l.slice(0, 300)}`);
process.exit(1);
