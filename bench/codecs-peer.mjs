#!/usr/bin/env node
// codecs-peer.mjs — the LanceDB side of bench/codecs: LanceDB 0.39.0 (Lance
// 12.0.0) writing the same rows bench/codecs encodes (id int64 PK, name utf8
// "row_<id>", v float64, vec fixed_size_list<float32, 8>; no nulls), timed the
// way peer/bench-ingest.mjs times it. Uses tests/interop/node_modules.
//
//   node bench/codecs-peer.mjs [--rows 1000000] [--batch 10000] [--dir SCRATCH]
//
// Prints one JSON line:
//   dataset_write_s   createTable(rows) of a fresh plain Lance dataset (the
//                     closest thing to one SSTable's data file + manifest)
//   lsm_put_s         every row through mergeInsert("id") in calls of --batch
//                     rows on an unsharded LSM table (WAL entries, durable)
//   lsm_flush_s       closeLsmWriters(): the memtable (all rows: memtable
//                     limits raised) flushed to one SSTable
//   payload_bytes     sum over rows of 8+8+32+4+len(name), as bench-ingest
//   wal_bytes, sstable_bytes  on-disk sizes
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const nm = path.join(here, "..", "tests", "interop", "package.json");
const req = createRequire(nm);
let lancedb, arrow;
try {
  lancedb = await import(pathToFileURL(req.resolve("@lancedb/lancedb")).href);
  arrow = await import(pathToFileURL(req.resolve("apache-arrow")).href);
} catch (e) {
  console.error(`codecs-peer: cannot load LanceDB from tests/interop/node_modules (run npm install there): ${e.message}`);
  process.exit(2);
}

const args = process.argv.slice(2);
const opt = {};
for (let i = 0; i < args.length; i += 2) opt[args[i].replace(/^--/, "")] = args[i + 1];
const N = parseInt(opt.rows ?? "1000000", 10);
const B = parseInt(opt.batch ?? "10000", 10);
const dir = path.resolve(opt.dir ?? fs.mkdtempSync(path.join(os.tmpdir(), "mw-codecs-peer-")));
process.on("exit", () => fs.rmSync(dir, { recursive: true, force: true })); // also after an error

const DIM = 8;
const schema = new arrow.Schema([
  new arrow.Field("id", new arrow.Int64(), false),
  new arrow.Field("name", new arrow.Utf8(), true),
  new arrow.Field("v", new arrow.Float64(), true),
  new arrow.Field("vec", new arrow.FixedSizeList(DIM, new arrow.Field("item", new arrow.Float32(), true)), true),
]);

// Same values as bench/codecs.c: id i, name "row_<i>", v i*0.5, vec[k] = (i+k) % 1000 / 1000.
function chunk(start, n) {
  const ids = new BigInt64Array(n), v = new Float64Array(n), vec = new Float32Array(n * DIM);
  const names = new Array(n);
  for (let j = 0; j < n; j++) {
    const i = start + j;
    ids[j] = BigInt(i); v[j] = i * 0.5; names[j] = `row_${i}`;
    for (let k = 0; k < DIM; k++) vec[j * DIM + k] = ((i + k) % 1000) / 1000;
  }
  const vecData = arrow.makeData({
    type: schema.fields[3].type, length: n, nullCount: 0,
    child: arrow.makeData({ type: new arrow.Float32(), length: n * DIM, data: vec }),
  });
  return new arrow.Table(schema, arrow.makeData({
    type: new arrow.Struct(schema.fields), length: n, nullCount: 0,
    children: [
      arrow.makeData({ type: new arrow.Int64(), length: n, data: ids }),
      arrow.vectorFromArray(names, new arrow.Utf8()).data[0],
      arrow.makeData({ type: new arrow.Float64(), length: n, data: v }),
      vecData,
    ],
  }));
}

const du = (p) => {
  const st = fs.statSync(p);
  if (!st.isDirectory()) return st.size;
  let s = 0;
  for (const f of fs.readdirSync(p)) s += du(path.join(p, f));
  return s;
};

let payload = 0;
for (let i = 0; i < N; i++) payload += 8 + 8 + 4 * DIM + 4 + `row_${i}`.length;
const tables = [];
for (let s = 0; s < N; s += B) tables.push(chunk(s, Math.min(B, N - s)));

// 1. plain dataset write of every row
fs.mkdirSync(dir, { recursive: true });
let db = await lancedb.connect(dir);
const all = new arrow.Table(tables.flatMap((t) => t.batches));
let t0 = performance.now();
const plain = await db.createTable("plain", all, { mode: "overwrite" });
const datasetWriteS = (performance.now() - t0) / 1000;
plain.close();

// 2. LSM: mergeInsert calls, then the flush on close
const t = await db.createEmptyTable("t", schema, { mode: "overwrite" });
await t.setUnenforcedPrimaryKey("id");
await t.setLsmWriteSpec({
  specType: "unsharded", maintainedIndexes: [],
  writerConfigDefaults: { max_memtable_rows: String(N * 2), max_memtable_size: String(2 ** 30), max_unflushed_memtable_bytes: String(4 * 2 ** 30), max_memtable_batches: "100000" },
});
t0 = performance.now();
for (const tbl of tables) await t.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(tbl);
const putS = (performance.now() - t0) / 1000;
t0 = performance.now();
await t.closeLsmWriters();
const flushS = (performance.now() - t0) / 1000;
t.close();
const shardRoot = path.join(dir, "t.lance", "_mem_wal");
let walBytes = 0, sstBytes = 0;
for (const shard of fs.readdirSync(shardRoot)) {
  const sd = path.join(shardRoot, shard);
  walBytes += du(path.join(sd, "wal"));
  for (const g of fs.readdirSync(sd).filter((x) => /_gen_\d+$/.test(x))) sstBytes += du(path.join(sd, g));
}
fs.rmSync(dir, { recursive: true, force: true });
console.log(JSON.stringify({
  rows: N, batch: B, payload_bytes: payload,
  dataset_write_s: +datasetWriteS.toFixed(3), lsm_put_s: +putS.toFixed(3), lsm_flush_s: +flushS.toFixed(3),
  wal_bytes: walBytes, sstable_bytes: sstBytes,
}));
