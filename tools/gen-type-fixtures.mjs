#!/usr/bin/env node
// gen-type-fixtures.mjs — WAL entries, SSTables and manifests written by
// LanceDB 0.39.0 (Lance 12) for tables with every column type memwald
// supports, for the golden tests in tests/lance (test_types.c).
//
//   node tools/gen-type-fixtures.mjs [OUTDIR] [--node-modules DIR]
//
// OUTDIR defaults to tests/lance/data/types; node_modules to
// tests/interop/node_modules (`cd tests/interop && npm install --no-audit
// --no-fund`). Like ../shared/peer/make-shard.mjs, for each table kind it
// creates the table with 8 base rows (ids 0..7), sets the primary key `id`
// and an unsharded LSM write spec, then writes ids 4..15 and 12..23 through
// mergeInsert("id") (two WAL entries; 4..7 and 12..15 are updates) and closes
// the writers (one SSTable with a deletion file). Kinds:
//
//   flat    id + every non-nested type of tests/interop/types_lib.mjs
//   nested  id + lists and structs (nulls at every level) of the same
//
// Per kind K it writes into OUTDIR:
//   K.wal.1.arrow, K.wal.2.arrow   the shard's WAL entries, in order
//   K.sst.lance                    the SSTable's data file
//   K.bloom                        its bloom_filter.bin
//   K.manifest                     the base table's newest manifest (the
//                                  schema LanceDB made, as memwald opens it)
//   K.schema.txt                   memwald's config schema text for the table
//   K.rows.jsonl                   the rows LanceDB reads back at the end
//                                  (exact.mjs format), sorted by id
// Everything but timestamps inside the files is deterministic.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const args = process.argv.slice(2);
let outDir = path.join(repo, "tests/lance/data/types");
let nodeModules = path.join(repo, "tests/interop/node_modules");
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--node-modules") nodeModules = args[++i];
  else if (!args[i].startsWith("--")) outDir = path.resolve(args[i]);
  else throw new Error(`unknown option ${args[i]}`);
}
const require = createRequire(path.join(nodeModules, "x.js"));
const lancedb = require("@lancedb/lancedb");
const arrow = require("apache-arrow"); // the copy LanceDB uses (instanceof checks)
const lib = await import(pathToFileURL(path.join(repo, "tests/interop/types_lib.mjs")).href);
const { exactLine } = await import(pathToFileURL(path.join(repo, "tests/interop/exact.mjs")).href);

fs.mkdirSync(outDir, { recursive: true });
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "mw-typefix-"));
for (const kind of ["flat", "nested"]) {
  const all = lib.catalogue(arrow, { nested: true });
  const cat = kind === "flat" ? lib.catalogue(arrow, { nested: false })
                              : all.filter((c) => !lib.catalogue(arrow, { nested: false }).some((d) => d.name === c.name));
  const fields = lib.tableFields(arrow, cat);
  const rows = (a, b) => Array.from({ length: b - a }, (_, i) => lib.makeRow(cat, a + i));
  const dir = path.join(scratch, kind);
  const db = await lancedb.connect(dir);
  const t = await db.createTable("t", lib.buildTable(arrow, fields, rows(0, 8)), { mode: "overwrite" });
  await t.setUnenforcedPrimaryKey("id");
  await t.setLsmWriteSpec({ specType: "unsharded", maintainedIndexes: [], writerConfigDefaults: {} });
  t.close();
  const w = await db.openTable("t");
  for (const [a, b] of [[4, 16], [12, 24]])
    await w.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(lib.buildTable(arrow, fields, rows(a, b)));
  await w.closeLsmWriters();
  w.close();

  const tdir = path.join(dir, "t.lance"), shard = path.join(tdir, "_mem_wal", fs.readdirSync(path.join(tdir, "_mem_wal"))[0]);
  const wal = fs.readdirSync(path.join(shard, "wal")).filter((f) => f.endsWith(".arrow"))
    .sort((x, y) => Number(BigInt("0b" + [...x.slice(0, 64)].reverse().join("")) - BigInt("0b" + [...y.slice(0, 64)].reverse().join(""))));
  if (wal.length !== 2) throw new Error(`${kind}: ${wal.length} WAL entries, expected 2`);
  wal.forEach((f, i) => fs.copyFileSync(path.join(shard, "wal", f), path.join(outDir, `${kind}.wal.${i + 1}.arrow`)));
  const gen = fs.readdirSync(shard).find((f) => /_gen_1$/.test(f));
  const data = fs.readdirSync(path.join(shard, gen, "data"))[0];
  fs.copyFileSync(path.join(shard, gen, "data", data), path.join(outDir, `${kind}.sst.lance`));
  fs.copyFileSync(path.join(shard, gen, "bloom_filter.bin"), path.join(outDir, `${kind}.bloom`));
  const man = fs.readdirSync(path.join(tdir, "_versions")).filter((f) => f.endsWith(".manifest")).sort()[0];
  fs.copyFileSync(path.join(tdir, "_versions", man), path.join(outDir, `${kind}.manifest`));
  fs.writeFileSync(path.join(outDir, `${kind}.schema.txt`), lib.schemaText(cat) + "\n");

  const r = await (await lancedb.connect(dir)).openTable("t");
  const tbl = await r.query().toArrow();
  const names = fields.map((f) => f.name);
  const got = Array.from({ length: tbl.numRows }, (_, i) => exactLine(tbl, names, i));
  got.sort((x, y) => Number(JSON.parse(x).id) - Number(JSON.parse(y).id));
  const want = rows(0, 24).map((row) => lib.expectedLine(fields, row));
  if (got.join("\n") !== want.join("\n")) {
    for (let i = 0; i < Math.max(got.length, want.length); i++)
      if (got[i] !== want[i]) { console.error(`${kind} row ${i}:\n  got  ${got[i]}\n  want ${want[i]}`); break; }
    throw new Error(`${kind}: LanceDB does not read back the rows it was given`);
  }
  fs.writeFileSync(path.join(outDir, `${kind}.rows.jsonl`), got.join("\n") + "\n");
  r.close();
  console.error(`${kind}: ${cat.length + 1} columns, ${got.length} rows, WAL ${wal.length}, SSTable ${data}`);
}
fs.rmSync(scratch, { recursive: true, force: true });
