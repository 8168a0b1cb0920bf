#!/usr/bin/env node
// split_brain_lance.mjs DB_DIR — LanceDB 0.39.0's own MemWAL writer as the
// second party of the split-brain test (tests/e2e/test_split_brain.py), driven
// over pipes: one JSON command per stdin line, one JSON reply per stdout
// line, in order.
//
//   {"op":"write","bucket":B,"rows":[[id,name,v],...]}
//       mergeInsert("id") of the rows (all of bucket B) through the table
//       handle kept for B (opened on first use). LanceDB's first write on a
//       handle opens a shard writer: claim epoch+1, fence sentinel, replay
//       (memwal.md §5). Reply {"ok":true,"ms":…} once the call returned (with
//       durable_write, the rows are in a WAL entry: acknowledged), or
//       {"ok":false,"error":"…"} (refused, e.g. "Writer fenced").
//   {"op":"close","bucket":B}
//       closeLsmWriters() (flushes the MemTable under LanceDB's epoch; fails
//       when fenced) and close the handle; the next write opens a new one.
//   {"op":"quit"}
//
// One handle holds at most one shard writer, hence one handle per bucket
// (../shared/peer/FINDINGS.md §0). No timers: the Python side decides when.
import * as path from "node:path";
import * as readline from "node:readline";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "..", "interop", "package.json"));
const lancedb = require("@lancedb/lancedb");

const dbDir = process.argv[2];
if (!dbDir) {
  console.error("usage: node split_brain_lance.mjs DB_DIR");
  process.exit(2);
}
const db = await lancedb.connect(dbDir);
const handles = new Map();
const reply = (o) => process.stdout.write(JSON.stringify(o) + "\n");
const msg = (e) => String(e && e.message ? e.message : e).replace(/\s+/g, " ").slice(0, 600);

async function handle(b) {
  if (!handles.has(b)) handles.set(b, await db.openTable("t"));
  return handles.get(b);
}

async function run(c) {
  if (c.op === "write") {
    const rows = c.rows.map(([id, name, v]) => ({ id: BigInt(id), name, v }));
    const t0 = performance.now();
    try {
      const t = await handle(c.bucket);
      await t.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(rows);
      return { ok: true, ms: Math.round(performance.now() - t0) };
    } catch (e) {
      return { ok: false, error: msg(e) };
    }
  }
  if (c.op === "close") {
    const t = handles.get(c.bucket);
    handles.delete(c.bucket);
    if (!t) return { ok: true, open: false };
    let error = null;
    try { await t.closeLsmWriters(); } catch (e) { error = msg(e); }
    try { t.close(); } catch (e) { error = error ?? msg(e); }
    return error === null ? { ok: true } : { ok: false, error };
  }
  return { ok: false, error: `unknown op ${c.op}` };
}

for await (const line of readline.createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const c = JSON.parse(line);
  if (c.op === "quit") break;
  reply(await run(c));
}
for (const t of handles.values()) {
  try { await t.closeLsmWriters(); } catch { /* fenced writers cannot close */ }
  try { t.close(); } catch { /* nothing left to do */ }
}
process.exit(0);
