#!/usr/bin/env node
// gen-compact-fixtures.mjs — base-table commits made by LanceDB 0.39.0
// (Lance 12.0.0) itself, for the compaction codecs' golden tests
// (tests/lance/test_base_update.c, test_deletion.c).
//
//   node tools/gen-compact-fixtures.mjs [OUTDIR] [--node-modules DIR]
//
// OUTDIR defaults to tests/lance/data/compact; node_modules defaults to
// tests/interop/node_modules (`cd tests/interop && npm install --no-audit
// --no-fund`). It writes OUTDIR/lsm_update/t.lance, a table with a MemWAL
// index whose versions are, in order:
//   1 createTable: 2000 rows {id int64 not null, name utf8}, ids 0..1999
//   2 setUnenforcedPrimaryKey("id")        3 setLsmWriteSpec(unsharded)
//   4 update(id in [10, 14): name = 'u')   (Update: 4 rows moved to a new
//                                           fragment, a .arrow deletion file)
//   5 delete(id in [500, 1100))            (Delete: the .arrow now holds 604)
//   6 add({id: 20000, name: 'appended'})   (Append)
// and OUTDIR/lsm_update/facts.txt with the numbers the tests check. UUIDs,
// file names and timestamps are random, so a re-run gives other bytes with
// the same structure; the tests read the names from the manifests.
import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const args = process.argv.slice(2);
let outDir = path.join(repo, "tests/lance/data/compact");
let nodeModules = path.join(repo, "tests/interop/node_modules");
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--node-modules") nodeModules = args[++i];
  else outDir = path.resolve(args[i]);
}
const lancedb = await import(pathToFileURL(path.join(nodeModules, "@lancedb/lancedb/dist/index.js")).href);
const arrow = await import(pathToFileURL(path.join(nodeModules, "apache-arrow/Arrow.node.js")).href);

const dir = path.join(outDir, "lsm_update");
fs.rmSync(dir, { recursive: true, force: true });
fs.mkdirSync(dir, { recursive: true });
const db = await lancedb.connect(dir);
const schema = new arrow.Schema([
  new arrow.Field("id", new arrow.Int64(), false),
  new arrow.Field("name", new arrow.Utf8(), true),
]);
const rows = [];
for (let i = 0; i < 2000; i++) rows.push({ id: BigInt(i), name: "n" + i });
const t = await db.createTable("t", lancedb.makeArrowTable(rows, { schema }), { mode: "overwrite" });
await t.setUnenforcedPrimaryKey("id");
await t.setLsmWriteSpec({ specType: "unsharded", maintainedIndexes: [], writerConfigDefaults: {} });
await t.update({ where: "id >= 10 AND id < 14", values: { name: "'u'" } });
await t.delete("id >= 500 AND id < 1100");
await t.add(lancedb.makeArrowTable([{ id: 20000n, name: "appended" }], { schema }));
const live = await t.countRows();
t.close();
fs.writeFileSync(path.join(dir, "facts.txt"),
  `versions 6\nrows 2000\nupdated 10 14\ndeleted 500 1100\nlive ${live}\n`);
console.error(`wrote ${dir} (live rows ${live})`);
