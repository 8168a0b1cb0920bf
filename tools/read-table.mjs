#!/usr/bin/env node
// read-table.mjs — print a table memwald writes as JSON lines, the way
// LanceDB 0.39.0 reads it: the LSM scan, base table plus the SSTables the
// shard manifests list, one row per primary key (the newest).
//
//   npm --prefix tests/interop ci --no-audit --no-fund    # once: LanceDB, pinned
//   node tools/read-table.mjs ./var/events.lance [--where "v > 1"] [--limit N]
//
// Any table, any key: rows come sorted by the primary key the table declares
// (when it declares one). int64 values print as numbers when exact, else as
// strings; vectors and lists as arrays; binary as base64; timestamps and
// dates in ISO 8601. The last line is {"rows": N} on standard error.
import { createRequire } from "node:module";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "..", "tests", "interop", "package.json"));
const lancedb = require("@lancedb/lancedb");

const args = process.argv.slice(2);
const opt = (name) => {
  const i = args.indexOf(name);
  return i >= 0 ? args.splice(i, 2)[1] : undefined;
};
const where = opt("--where");
const limit = opt("--limit");
if (args.length !== 1) {
  console.error('usage: node tools/read-table.mjs DIR/NAME.lance [--where "SQL"] [--limit N]');
  process.exit(2);
}
const dir = path.resolve(args[0]);
const db = await lancedb.connect(path.dirname(dir));
const table = await db.openTable(path.basename(dir).replace(/\.lance$/, ""));
const schema = await table.schema();
const key = schema.fields.find((f) => f.metadata?.get("lance-schema:unenforced-primary-key:position"))?.name;

function plain(v) {
  if (v === null || v === undefined) return null;
  if (typeof v === "bigint") return Number.isSafeInteger(Number(v)) ? Number(v) : String(v);
  if (v instanceof Date) return v.toISOString();
  if (v instanceof Uint8Array) return Buffer.from(v).toString("base64");
  if (ArrayBuffer.isView(v)) return Array.from(v, plain);
  if (Array.isArray(v)) return v.map(plain);
  if (typeof v.toArray === "function") return Array.from(v.toArray(), plain); // an Arrow vector
  if (typeof v === "object") return Object.fromEntries(Object.entries(v.toJSON?.() ?? v).map(([k, x]) => [k, plain(x)]));
  return v;
}

let q = table.query();
if (where) q = q.where(where);
if (limit) q = q.limit(Number(limit));
const rows = (await q.toArray()).map((r) => Object.fromEntries(schema.fields.map((f) => [f.name, plain(r[f.name])])));
if (key) rows.sort((a, b) => (a[key] < b[key] ? -1 : a[key] > b[key] ? 1 : 0));
for (const r of rows) console.log(JSON.stringify(r));
console.error(JSON.stringify({ rows: rows.length }));
table.close();
