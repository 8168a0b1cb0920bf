#!/usr/bin/env node
// vindex-peer.mjs — the LanceDB side of bench/vindex_ingest.py (issue 27):
// a table whose LSM write spec maintains a vector index, made by LanceDB
// 0.39.0, and Lance's own MemWAL writer ingesting into it. Uses
// tests/interop/node_modules.
//
//   node bench/vindex-peer.mjs make DIR [--base 3000]
//       LanceDB makes DIR/t.lance: bench_ingest's `wide` shape (id int64 not
//       null, name utf8, v float64, vec fixed_size_list<float32,128>), --base
//       rows of random vectors (ids from 10^15, apart from bench_ingest's),
//       an IVF_PQ index on vec (createIndex's kind; 4 partitions, 16
//       sub-vectors), the primary key, and the default LSM write spec
//       (maintainedIndexes omitted: LanceDB maintains every index).
//   node bench/vindex-peer.mjs ingest DIR [--base 3000] [--rows 10000]
//       [--batch 500] [--maintain yes|no]
//       makes the same table, then Lance's writer takes --rows rows (the
//       values bench_ingest sends) through mergeInsert("id"), --batch rows a
//       call, each awaited, then closeLsmWriters() (the flush: SSTables with
//       their index). --maintain no: maintainedIndexes [] (its vector search
//       then fails; the figure shows what maintaining the index costs it).
//       One JSON line: {"rows","batch","maintain","write_s","close_s",
//       "rows_per_s_write","rows_per_s_total","lat_ms":{"p50","p99"}}.
//   node bench/vindex-peer.mjs search DIR --ids FIRST,COUNT,STEP
//       LanceDB's default vector search (LSM routing) for the rows with the
//       ids FIRST, FIRST+STEP, ... (COUNT of them), each by its own vector
//       (the values bench_ingest --spread sends), 10 nearest: prints
//       {"searched","found_first","found_in_10","missed"}.
import * as fs from "node:fs";
import * as path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const req = createRequire(path.join(here, "..", "tests", "interop", "package.json"));
let lancedb, arrow;
try {
  lancedb = await import(pathToFileURL(req.resolve("@lancedb/lancedb")).href);
  arrow = await import(pathToFileURL(req.resolve("apache-arrow")).href);
} catch (e) {
  console.error(`vindex-peer: cannot load LanceDB from tests/interop/node_modules (run npm install there): ${e.message}`);
  process.exit(2);
}

const [mode, dirArg, ...rest] = process.argv.slice(2);
const opt = {};
for (let i = 0; i < rest.length; i += 2) opt[rest[i].replace(/^--/, "")] = rest[i + 1];
if (!["make", "ingest", "search"].includes(mode) || !dirArg) {
  console.error("usage: vindex-peer.mjs make|ingest|search DIR [options]");
  process.exit(2);
}
const dir = path.resolve(dirArg);
const DIM = 128;
const BASE_ID = 1000000000000000n;

const schema = new arrow.Schema([
  new arrow.Field("id", new arrow.Int64(), false),
  new arrow.Field("name", new arrow.Utf8(), true),
  new arrow.Field("v", new arrow.Float64(), true),
  new arrow.Field("vec", new arrow.FixedSizeList(DIM, new arrow.Field("item", new arrow.Float32(), true)), true),
]);

// bench_ingest --spread's vector for id i (vec_item in bench/ingest.c;
// every product stays below 2^53).
function vecOf(i, out, off) {
  for (let d = 0; d < DIM; d++) out[off + d] = (((i % 10007) * 7919 + d * 104729 + (i % 101) * d * 31) % 10000) / 10000;
}

// n rows: ids from `start` with bench_ingest's values, or (random = true)
// random vectors for the base rows.
function rows(start, n, random) {
  const ids = new BigInt64Array(n), v = new Float64Array(n), names = new Array(n);
  const vec = new Float32Array(n * DIM);
  for (let j = 0; j < n; j++) {
    const i = start + j;
    ids[j] = random ? BASE_ID + BigInt(j) : BigInt(i);
    v[j] = (i % 1000000) + 0.25;
    names[j] = "customer-" + String(i % 1e12).padStart(12, "0");
    if (random) for (let d = 0; d < DIM; d++) vec[j * DIM + d] = Math.random();
    else vecOf(i, vec, j * DIM);
  }
  const children = [
    arrow.makeData({ type: new arrow.Int64(), length: n, data: ids }),
    arrow.vectorFromArray(names, new arrow.Utf8()).data[0],
    arrow.makeData({ type: new arrow.Float64(), length: n, data: v }),
    arrow.makeData({ type: schema.fields[3].type, length: n, nullCount: 0,
      child: arrow.makeData({ type: new arrow.Float32(), length: n * DIM, data: vec }) }),
  ];
  return new arrow.Table(schema, arrow.makeData({ type: new arrow.Struct(schema.fields), length: n, nullCount: 0, children }));
}

async function make(maintain) {
  fs.mkdirSync(dir, { recursive: true });
  const db = await lancedb.connect(dir);
  const t = await db.createTable("t", rows(0, Number(opt.base ?? "3000"), true), { mode: "overwrite" });
  await t.createIndex("vec", { config: lancedb.Index.ivfPq({ numPartitions: 4, numSubVectors: 16 }) });
  await t.setUnenforcedPrimaryKey("id");
  await t.setLsmWriteSpec(maintain ? { specType: "unsharded" } : { specType: "unsharded", maintainedIndexes: [] });
  return t;
}

const pct = (a, p) => (a.length ? a[Math.min(a.length - 1, Math.floor((a.length * p) / 100))] : 0);
const r3 = (x) => Number(x.toFixed(3));

if (mode === "make") {
  const t = await make(true);
  console.log(JSON.stringify({ made: path.join(dir, "t.lance"), spec: await t.getLsmWriteSpec() }));
  t.close();
} else if (mode === "ingest") {
  const R = Number(opt.rows ?? "10000"), B = Number(opt.batch ?? "500"), maintain = (opt.maintain ?? "yes") === "yes";
  const first = Number(opt["id-base"] ?? "1000000000");
  const t = await make(maintain);
  const lat = [];
  let writeMs = 0;
  for (let done = 0; done < R; done += B) {
    const tbl = rows(first + done, Math.min(B, R - done), false); // built outside the clock
    const c0 = performance.now();
    await t.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(tbl);
    const ms = performance.now() - c0;
    lat.push(ms);
    writeMs += ms;
  }
  const c0 = performance.now();
  await t.closeLsmWriters();
  const closeS = (performance.now() - c0) / 1000;
  t.close();
  lat.sort((a, b) => a - b);
  console.log(JSON.stringify({ rows: R, batch: B, maintain, write_s: r3(writeMs / 1000), close_s: r3(closeS),
    rows_per_s_write: Math.round(R / (writeMs / 1000)), rows_per_s_total: Math.round(R / (writeMs / 1000 + closeS)),
    lat_ms: { p50: r3(pct(lat, 50)), p99: r3(pct(lat, 99)) } }));
} else {
  const [firstS, countS, stepS] = String(opt.ids ?? "").split(",");
  const first = Number(firstS), count = Number(countS), step = Number(stepS);
  const db = await lancedb.connect(dir);
  const t = await db.openTable("t");
  let found = 0, in10 = 0;
  const missed = [];
  for (let k = 0; k < count; k++) {
    const id = first + k * step, q = new Float32Array(DIM);
    vecOf(id, q, 0);
    const got = await t.search(Array.from(q)).limit(10).select(["id"]).toArray();
    const at = got.findIndex((r) => BigInt(r.id) === BigInt(id));
    if (at === 0) found++;
    if (at >= 0) in10++;
    else missed.push(id);
  }
  console.log(JSON.stringify({ searched: count, found_first: found, found_in_10: in10, missed: missed.slice(0, 10) }));
  t.close();
}
