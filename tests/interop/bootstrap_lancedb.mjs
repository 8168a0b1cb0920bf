#!/usr/bin/env node
// bootstrap_lancedb.mjs — LanceDB 0.39.0 accepts a table memwald bootstrapped
// (src/lance/table_create.h):
//
//   node bootstrap_lancedb.mjs DB_DIR SPEC_JSON ROWS_JSON
//
// Opens DB_DIR/t.lance, checks getLsmWriteSpec() deep-equals SPEC_JSON, writes
// ROWS_JSON (one array of rows, all routed to one shard; id given as a
// number, stored as int64) through mergeInsert("id") — the LSM writer, since
// the table has a write spec — closes the writer, then reads the table (LSM
// scan) and checks exactly those rows come back. Prints "ok ..." or fails.
import * as fs from "node:fs";
import * as path from "node:path";
import * as assert from "node:assert/strict";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "..", "interop", "package.json"));
const lancedb = require("@lancedb/lancedb");
const [dbDir, specJson, rowsJson] = process.argv.slice(2);
const wantSpec = JSON.parse(specJson);
const rows = JSON.parse(rowsJson).map((r) => ({ ...r, id: BigInt(r.id) }));

const db = await lancedb.connect(dbDir);
const t = await db.openTable("t");
assert.equal(await t.version(), 2, "table version");
const schema = await t.schema();
const idf = schema.fields.find((f) => f.name === "id");
assert.equal(idf.metadata.get("lance-schema:unenforced-primary-key:position"), "1");
assert.deepEqual(await t.getLsmWriteSpec(), wantSpec, "getLsmWriteSpec");
await t.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(rows);
await t.closeLsmWriters();
t.close();
// The LSM writer (not a plain merge into the base table) took the rows.
assert.ok(fs.readdirSync(path.join(dbDir, "t.lance", "_mem_wal")).length === 1, "one MemWAL shard");
assert.equal(fs.readdirSync(path.join(dbDir, "t.lance", "_versions")).filter((n) => n.endsWith(".manifest")).length, 2, "base table untouched");

const t2 = await (await lancedb.connect(dbDir)).openTable("t");
const got = (await t2.query().toArray()).map((r) => {
  const o = {};
  for (const f of schema.fields) o[f.name] = typeof r[f.name] === "bigint" ? Number(r[f.name]) : r[f.name];
  return o;
});
got.sort((a, b) => a.id - b.id);
const want = rows.map((r) => ({ ...r, id: Number(r.id) })).sort((a, b) => a.id - b.id);
assert.deepEqual(got, want, "rows read back");
console.log(`ok spec=${wantSpec.specType} rows=${got.length}`);
t2.close();
