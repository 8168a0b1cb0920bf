#!/usr/bin/env node
// gen-sindex-fixtures.mjs — the per-SSTable BTree indexes LanceDB's own
// MemWAL writer flushes, for tests/lance/test_sindex.c and docs/indexes.md.
//
//   node tools/gen-sindex-fixtures.mjs [OUTDIR] [--node-modules DIR]
//
// OUTDIR defaults to tests/lance/data/sindex; node_modules to
// tests/interop/node_modules (LanceDB 0.39.0 = Lance 12.0.0).
//
// A table {id int64 not null (the unenforced primary key), vec
// fixed_size_list<float32, 4>, num int64 (nullable), name utf8 (nullable)} of
// 300 base rows with an IVF_PQ index on vec and BTree indexes on num and
// name, the default unsharded write spec (every index maintained); then 5000
// fresh rows through one mergeInsert (num: duplicates, every 97th null,
// descending runs; name: every 89th null) and closeLsmWriters, which flushes
// one SSTable. Copied into OUTDIR:
//   data.lance                  the SSTable's data file
//   sstable.manifest            its dataset manifest (the index section)
//   num_idx/page_data.lance, num_idx/page_lookup.lance    the BTree on num
//   name_idx/page_data.lance, name_idx/page_lookup.lance  the BTree on name
//   case.txt                    "rows N\nnum_idx UUID\nname_idx UUID"
// The inputs are fixed; the uuids and created_at differ per run.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const args = process.argv.slice(2);
let outDir = path.join(repo, "tests/lance/data/sindex");
let nodeModules = path.join(repo, "tests/interop/node_modules");
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--node-modules") nodeModules = args[++i];
  else if (!args[i].startsWith("--")) outDir = path.resolve(args[i]);
  else throw new Error(`unknown option ${args[i]}`);
}
const require = createRequire(path.join(nodeModules, "x.js"));
const lancedb = require("@lancedb/lancedb");
const arrow = require("apache-arrow");

const schema = new arrow.Schema([
  new arrow.Field("id", new arrow.Int64(), false),
  new arrow.Field("vec", new arrow.FixedSizeList(4, new arrow.Field("item", new arrow.Float32(), true)), true),
  new arrow.Field("num", new arrow.Int64(), true),
  new arrow.Field("name", new arrow.Utf8(), true),
]);
const row = (id, i) => ({
  id: BigInt(id),
  vec: [Math.sin(id), Math.cos(id), (id % 13) / 13, 1],
  num: i % 97 === 5 ? null : BigInt(((i * 7919) % 1500) - 700),
  name: i % 89 === 3 ? null : `n${(i * 31) % 2000}`,
});
const work = fs.mkdtempSync(path.join(os.tmpdir(), "sindexfix-"));
const db = await lancedb.connect(work);
const t = await db.createTable("t", Array.from({ length: 300 }, (_, i) => row(i, i)), { schema });
await t.createIndex("vec", { config: lancedb.Index.ivfPq({ numPartitions: 1, numSubVectors: 1 }) });
await t.createIndex("num", { config: lancedb.Index.btree() });
await t.createIndex("name", { config: lancedb.Index.btree() });
await t.setUnenforcedPrimaryKey("id");
await t.setLsmWriteSpec({ specType: "unsharded" });
const N = 5000;
await t.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll()
  .execute(Array.from({ length: N }, (_, i) => row(100000 + i, i)), { schema });
await t.closeLsmWriters();
const uuids = Object.fromEntries((await t.listIndices()).map((x) => [x.name, x.indexUuid]));
t.close();

const walDir = path.join(work, "t.lance", "_mem_wal");
const shard = fs.readdirSync(walDir)[0];
const gen = fs.readdirSync(path.join(walDir, shard)).find((d) => d.includes("_gen_"));
const sst = path.join(walDir, shard, gen);
fs.rmSync(outDir, { recursive: true, force: true });
fs.mkdirSync(outDir, { recursive: true });
const dataFile = fs.readdirSync(path.join(sst, "data"))[0];
fs.copyFileSync(path.join(sst, "data", dataFile), path.join(outDir, "data.lance"));
const man = fs.readdirSync(path.join(sst, "_versions")).find((f) => f.endsWith(".manifest"));
fs.copyFileSync(path.join(sst, "_versions", man), path.join(outDir, "sstable.manifest"));
// which _indices/<uuid> is which: page_data's values type (int64 vs utf8) is
// not enough to tell; the manifest names them, so ask the manifest via the
// fields: a BTree dir has page_data.lance; order by the manifest's entries
const dirs = fs.readdirSync(path.join(sst, "_indices")).filter((u) => fs.existsSync(path.join(sst, "_indices", u, "page_data.lance")));
const manBytes = fs.readFileSync(path.join(outDir, "sstable.manifest"));
const lines = [`rows ${N}`];
for (const name of ["num_idx", "name_idx"]) {
  // the IndexMetadata holding the name holds its uuid (16 bytes) before it
  const at = manBytes.indexOf(Buffer.from(name));
  const u = dirs.find((d) => manBytes.lastIndexOf(Buffer.from(d.replace(/-/g, ""), "hex"), at) >= 0 &&
    manBytes.lastIndexOf(Buffer.from(d.replace(/-/g, ""), "hex"), at) > at - 40);
  if (!u) throw new Error(`no _indices dir for ${name} (dirs ${dirs})`);
  fs.mkdirSync(path.join(outDir, name));
  for (const f of ["page_data.lance", "page_lookup.lance"]) fs.copyFileSync(path.join(sst, "_indices", u, f), path.join(outDir, name, f));
  lines.push(`${name} ${u}`);
}
fs.writeFileSync(path.join(outDir, "case.txt"), lines.join("\n") + "\n");
console.log(`wrote ${outDir}: ${lines.join(", ")} (base table index uuids ${JSON.stringify(uuids)})`);
fs.rmSync(work, { recursive: true, force: true });
process.exit(0);
