#!/usr/bin/env node
// compaction-peer.mjs — LanceDB 0.39.0's view of a memwald table, for
// bench/compaction.py:
//
//   node compaction-peer.mjs measure TABLE_DIR [--lookups N] [--scans N]
//       full scans through the LSM scanner (table.query()), their median
//       time; N point lookups `id = k` of random live ids, median and p90;
//       countRows() (the base table's live rows). One JSON line.
//   node compaction-peer.mjs write-once TABLE_DIR OUT_DIR
//       read the table's rows (LSM scan) and write them once into a fresh
//       LanceDB table at OUT_DIR (createTable): the disk a single write of
//       the same rows takes. One JSON line with the row count.
//   node compaction-peer.mjs merge OUT_DIR --rows N --upserts U [--merges M]
//       a plain LanceDB table of N rows {id int64, name, v} (ids 0..N-1),
//       then M times mergeInsert("id") of U rows with random existing ids
//       (update all, insert the rest): median ms. bench/compaction_scale.py.
import * as path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "..", "tests", "interop", "package.json"));
const lancedb = require("@lancedb/lancedb");

const [mode, dir, ...rest] = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = rest.indexOf(name);
  return i >= 0 ? Number(rest[i + 1]) : dflt;
};
const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
const p90 = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length * 0.9)]; };

async function open(tableDir) {
  tableDir = path.resolve(tableDir);
  const db = await lancedb.connect(path.dirname(tableDir));
  return db.openTable(path.basename(tableDir, ".lance"));
}

if (mode === "measure") {
  const t = await open(dir);
  const scans = [];
  let rows = 0, ids = [];
  for (let i = 0; i < opt("--scans", 3); i++) {
    const t0 = performance.now();
    const tbl = await t.query().toArrow();
    scans.push(performance.now() - t0);
    rows = tbl.numRows;
    if (i === 0) {
      const col = tbl.getChild("id");
      for (let k = 0; k < col.length; k += Math.max(1, Math.floor(col.length / 200))) ids.push(col.get(k));
    }
  }
  const looks = [];
  for (let i = 0; i < opt("--lookups", 20) && ids.length; i++) {
    const id = ids[(i * 7919) % ids.length];
    const t0 = performance.now();
    const r = await t.query().where(`id = ${id}`).toArray();
    looks.push(performance.now() - t0);
    if (r.length !== 1) throw new Error(`lookup id=${id}: ${r.length} rows`);
  }
  const counted = await t.countRows();
  t.close();
  console.log(JSON.stringify({ rows, count_rows: counted, scan_ms: median(scans),
                               lookup_ms: looks.length ? median(looks) : null,
                               lookup_p90_ms: looks.length ? p90(looks) : null }));
} else if (mode === "write-once") {
  const t = await open(dir);
  const tbl = await t.query().toArrow();
  t.close();
  const out = path.resolve(rest[0]);
  const db = await lancedb.connect(out);
  const w = await db.createTable("once", tbl, { mode: "overwrite" });
  const n = await w.countRows();
  w.close();
  console.log(JSON.stringify({ rows: n }));
} else if (mode === "merge") {
  const arrow = require("apache-arrow");
  const n = opt("--rows", 100000), u = opt("--upserts", 400), m = opt("--merges", 5);
  const out = path.resolve(dir);
  const db = await lancedb.connect(out);
  const schema = new arrow.Schema([new arrow.Field("id", new arrow.Int64(), false),
                                   new arrow.Field("name", new arrow.Utf8(), true),
                                   new arrow.Field("v", new arrow.Float64(), true)]);
  const batch = (ids) => arrow.tableFromArrays({
    id: BigInt64Array.from(ids, (x) => BigInt(x)), name: ids.map((x) => `n${x}`),
    v: Float64Array.from(ids, (x) => x * 0.5)});
  let t = null;
  for (let lo = 0; lo < n; lo += 500000) { // written in parts: Arrow builds of millions stay small
    const ids = Array.from({ length: Math.min(500000, n - lo) }, (_, k) => lo + k);
    const part = batch(ids);
    if (t === null) t = await db.createTable("base", part, { mode: "overwrite", schema });
    else await t.add(part);
  }
  const times = [];
  let seed = 12345;
  const rnd = () => (seed = (seed * 1103515245 + 12345) % 2147483648);
  for (let i = 0; i < m; i++) {
    const ids = [...new Set(Array.from({ length: u }, () => rnd() % n))]; // distinct: mergeInsert refuses repeats
    const t0 = performance.now();
    await t.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(batch(ids));
    times.push(performance.now() - t0);
  }
  t.close();
  console.log(JSON.stringify({ rows: n, merge_ms: median(times), merges: times }));
} else {
  console.error("usage: compaction-peer.mjs measure TABLE_DIR | write-once TABLE_DIR OUT_DIR | merge OUT_DIR ...");
  process.exit(2);
}
