#!/usr/bin/env node
// read_rows.mjs DB_DIR — print every row of DB_DIR/t.lance as LanceDB 0.39.0
// reads it (LSM scan: base table + the SSTables of every shard manifest),
// one JSON object per line, sorted by id; bigint values as numbers.
import * as path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "..", "interop", "package.json"));
const lancedb = require("@lancedb/lancedb");
const db = await lancedb.connect(process.argv[2]);
const t = await db.openTable("t");
const schema = await t.schema();
const rows = (await t.query().toArray()).map((r) => {
  const o = {};
  for (const f of schema.fields) o[f.name] = typeof r[f.name] === "bigint" ? Number(r[f.name]) : r[f.name];
  return o;
});
rows.sort((a, b) => a.id - b.id);
for (const r of rows) console.log(JSON.stringify(r));
t.close();
