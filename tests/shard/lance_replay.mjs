#!/usr/bin/env node
// lance_replay.mjs — let LanceDB 0.39.0 itself take over every shard of a
// table memwald wrote (claim from OUR manifest, fence sentinel, replay of OUR
// WAL entries, flush on close), then read the table and compare it with the
// expected state.
//
//   node lance_replay.mjs TABLE_DIR --prior FILE --model FILE [--out FILE]
//
// prior = JSON lines of the table before memwald wrote (a vector's
// expected.jsonl); model = memwald's rows per key, as engine_tool writes them
// ({"id":"7",...} or {"id":"7","_deleted":true}). A takeover needs one write
// per shard: a sentinel row (the most negative int64 id routing to the shard,
// name "__replay__") that is left out of the comparison.
// Output: "ok rows=N sha256=…" (exit 0) or the first differences (exit 1).
import * as fs from "node:fs";
import * as path from "node:path";
import * as crypto from "node:crypto";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { connect, tableLocation } from "../interop/lancedb_open.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const interop = path.resolve(here, "../interop");
if (!fs.existsSync(path.join(interop, "node_modules", "@lancedb", "lancedb"))) {
  console.error(`lance_replay: ${interop}/node_modules is missing: run 'npm install --no-audit --no-fund' there`);
  process.exit(2);
}
const require = createRequire(path.join(interop, "check.mjs"));
const lancedb = require("@lancedb/lancedb");

const args = process.argv.slice(2);
const opt = {};
const pos = [];
for (let i = 0; i < args.length; i++) {
  if (args[i].startsWith("--")) opt[args[i].slice(2)] = args[++i];
  else pos.push(args[i]);
}
if (pos.length !== 1 || !opt.prior || !opt.model) {
  console.error("usage: node lance_replay.mjs TABLE_DIR --prior FILE --model FILE [--out FILE]");
  process.exit(2);
}

// Spark/Iceberg murmur3 bucket of an int64 (memwal.md §8.3).
const mixK = (k) => Math.imul((Math.imul(k, 0xcc9e2d51) << 15) | (Math.imul(k, 0xcc9e2d51) >>> 17), 0x1b873593);
const mixH = (h, k) => { h ^= k; h = (h << 13) | (h >>> 19); return (Math.imul(h, 5) + 0xe6546b64) | 0; };
function fmix(h, n) {
  h ^= n; h ^= h >>> 16; h = Math.imul(h, 0x85ebca6b); h ^= h >>> 13; h = Math.imul(h, 0xc2b2ae35); h ^= h >>> 16;
  return h | 0;
}
function bucketOf(id, k) {
  const u = BigInt.asUintN(64, id);
  const lo = Number(u & 0xffffffffn) | 0, hi = Number(u >> 32n) | 0;
  return ((fmix(mixH(mixH(0, mixK(lo)), mixK(hi)), 8) & 0x7fffffff) >>> 0) % k;
}

function rowLine(row, fields) {
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

const loc = tableLocation(pos[0]); // a folder or s3://…
const name = loc.name;
const db = await connect(lancedb, loc);
const table = await db.openTable(name);
const schema = await table.schema();
const fields = schema.fields.map((f) => f.name);
const spec = await table.getLsmWriteSpec();
if (!spec || spec.specType === "identity") throw new Error("lance_replay supports unsharded and bucket specs");
const K = spec.specType === "bucket" ? spec.numBuckets : 1;

// One sentinel row per bucket: the takeover (claim + replay) happens on the
// first write of each shard writer; closing the writers flushes.
const sentinel = new Map();
for (let id = -(2n ** 63n); sentinel.size < K; id++) {
  const b = K === 1 ? 0 : bucketOf(id, K);
  if (!sentinel.has(b)) sentinel.set(b, id);
}
const handles = [];
for (const [, id] of [...sentinel.entries()].sort((a, b) => a[0] - b[0])) {
  const row = {};
  for (const f of schema.fields) row[f.name] = null;
  row.id = id;
  row.name = "__replay__";
  const h = await db.openTable(name);
  await h.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute([row]);
  handles.push(h);
}
for (const h of handles) { await h.closeLsmWriters(); h.close(); }
const sentinelIds = new Set(sentinel.values());

const tbl = await table.query().toArrow();
const rows = [];
for (const batch of tbl.batches) {
  const cols = fields.map((f) => batch.getChild(f));
  for (let i = 0; i < batch.numRows; i++) {
    const r = {};
    fields.forEach((f, k) => { r[f] = cols[k] ? cols[k].get(i) : null; });
    if (sentinelIds.has(r.id)) continue;
    rows.push(r);
  }
}
rows.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
const got = rows.map((r) => rowLine(r, fields));
table.close();
if (opt.out) fs.writeFileSync(opt.out, got.join("\n") + (got.length ? "\n" : ""));

const readLines = (f) => fs.readFileSync(f, "utf8").split("\n").filter((l) => l.length > 0 && !l.startsWith('{"rows":'));
const floatVec = new Set(schema.fields.filter((f) => f.type.typeId === 16).map((f) => f.name));
const state = new Map();
for (const l of readLines(opt.prior)) state.set(BigInt(JSON.parse(l).id), l);
for (const l of readLines(opt.model)) {
  const m = JSON.parse(l);
  const id = BigInt(m.id);
  if (m._deleted) { state.delete(id); continue; }
  const r = { ...m, id };
  for (const f of floatVec) if (Array.isArray(r[f])) r[f] = r[f].map((x) => Math.fround(x));
  state.set(id, rowLine(r, fields));
}
const want = [...state.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)).map((k) => state.get(k));

const sha = (lines) => { const h = crypto.createHash("sha256"); for (const l of lines) h.update(l + "\n"); return h.digest("hex"); };
const hg = sha(got), hw = sha(want);
if (hg === hw) { console.log(`ok rows=${got.length} sha256=${hg}`); process.exit(0); }
console.error(`MISMATCH: LanceDB returned ${got.length} rows (sha256 ${hg}), expected ${want.length} (sha256 ${hw})`);
const wantSet = new Set(want), gotSet = new Set(got);
let shown = 0;
for (const l of got) if (!wantSet.has(l) && shown++ < 5) console.error(`  unexpected: ${l.slice(0, 300)}`);
shown = 0;
for (const l of want) if (!gotSet.has(l) && shown++ < 5) console.error(`  missing:    ${l.slice(0, 300)}`);
process.exit(1);
