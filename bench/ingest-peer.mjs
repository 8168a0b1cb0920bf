#!/usr/bin/env node
// ingest-peer.mjs — the LanceDB side of bench/ingest.py: Lance's own MemWAL
// writer (LanceDB 0.39.0, Lance 12.0.0) ingesting the rows bench_ingest sends
// memwald, through mergeInsert("id") on an unsharded LSM table, one call at
// a time (each awaited: with durable_write, the default, a call returns once
// its WAL entry is written; Lance never fsyncs, ../shared/peer/FINDINGS.md).
// Uses tests/interop/node_modules.
//
//   node bench/ingest-peer.mjs [--seconds 5] [--warmup 1] [--shapes small,wide]
//       [--batches 1,100,10000] [--configs default,max_wal_flush_interval_ms=1]
//       [--dir SCRATCH] [--s3 s3://BUCKET/PREFIX]
//
// --s3: the tables live under that S3 location instead of SCRATCH (endpoint
// and keys from the AWS environment; bench/s3_ingest.py uses it).
//
// Row shapes and values as bench/ingest.c: id int64 not null, name utf8
// "customer-%012d", v float64 (id % 1e6 + 0.25), and for `wide` vec
// fixed_size_list<float32,128> with vec[d] = ((id*7 + d*13) % 10000) / 1e4.
//
// For every (shape, config, batch): a fresh table (createEmptyTable, the
// primary key, setLsmWriteSpec with the config as writerConfigDefaults), then
// calls of `batch` rows back to back: --warmup seconds of them not counted
// (as bench_ingest's warm-up), then --seconds counted (the time of the calls
// themselves; the input Arrow tables are built between stretches of calls,
// in growing chunks of at most 200 000 rows, and not timed), then
// closeLsmWriters() timed on its own. One JSON line each:
//   {"shape","config","batch","calls","rows","write_s","rows_per_s",
//    "mb_per_s" (Arrow payload: 8+8+4+len(name) [+512] bytes per row),
//    "lat_ms":{"p50","p99","p999","max"} (one mergeInsert call), "close_s"}
import * as fs from "node:fs";
import * as os from "node:os";
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
  console.error(`ingest-peer: cannot load LanceDB from tests/interop/node_modules (run npm install there): ${e.message}`);
  process.exit(2);
}

const args = process.argv.slice(2);
const opt = {};
for (let i = 0; i < args.length; i += 2) opt[args[i].replace(/^--/, "")] = args[i + 1];
const seconds = parseFloat(opt.seconds ?? "5");
const warmup = parseFloat(opt.warmup ?? "1");
const shapes = String(opt.shapes ?? "small,wide").split(",");
const batches = String(opt.batches ?? "1,100,10000").split(",").map(Number);
const configs = String(opt.configs ?? "default,max_wal_flush_interval_ms=1").split(",");
const dir = path.resolve(opt.dir ?? fs.mkdtempSync(path.join(os.tmpdir(), "mw-ingest-peer-")));
process.on("exit", () => fs.rmSync(dir, { recursive: true, force: true })); // also after an error
if (!(seconds > 0 && seconds <= 600) || !(warmup >= 0 && warmup <= 600) || batches.some((b) => !(b >= 1 && b <= 100000))) {
  console.error("ingest-peer: --seconds 0..600, --batches 1..100000");
  process.exit(2);
}

const DIM = 128;
function schemaOf(shape) {
  const f = [
    new arrow.Field("id", new arrow.Int64(), false),
    new arrow.Field("name", new arrow.Utf8(), true),
    new arrow.Field("v", new arrow.Float64(), true),
  ];
  if (shape === "wide")
    f.push(new arrow.Field("vec", new arrow.FixedSizeList(DIM, new arrow.Field("item", new arrow.Float32(), true)), true));
  return new arrow.Schema(f);
}

// n rows from id `start`, the values bench_ingest sends.
function chunk(schema, wide, start, n) {
  const ids = new BigInt64Array(n), v = new Float64Array(n), names = new Array(n);
  const vec = wide ? new Float32Array(n * DIM) : null;
  for (let j = 0; j < n; j++) {
    const i = start + j;
    ids[j] = BigInt(i);
    v[j] = (i % 1000000) + 0.25;
    names[j] = "customer-" + String(i % 1e12).padStart(12, "0");
    if (wide) for (let d = 0; d < DIM; d++) vec[j * DIM + d] = ((i * 7 + d * 13) % 10000) / 10000;
  }
  const children = [
    arrow.makeData({ type: new arrow.Int64(), length: n, data: ids }),
    arrow.vectorFromArray(names, new arrow.Utf8()).data[0],
    arrow.makeData({ type: new arrow.Float64(), length: n, data: v }),
  ];
  if (wide)
    children.push(arrow.makeData({
      type: schema.fields[3].type, length: n, nullCount: 0,
      child: arrow.makeData({ type: new arrow.Float32(), length: n * DIM, data: vec }),
    }));
  const payload = n * (8 + 8 + 4 + 21 + (wide ? 4 * DIM : 0));
  return { n, payload, tbl: new arrow.Table(schema, arrow.makeData({ type: new arrow.Struct(schema.fields), length: n, nullCount: 0, children })) };
}

const pct = (a, p) => (a.length ? a[Math.min(a.length - 1, Math.floor((a.length * p) / 100))] : 0);
const r3 = (x) => Number(x.toFixed(3));

async function one(shape, config, B, k) {
  const wide = shape === "wide";
  const schema = schemaOf(shape);
  const d = path.join(dir, `${shape}_${k}_${B}`);
  fs.mkdirSync(d, { recursive: true });
  const writerConfigDefaults = {};
  if (config !== "default") {
    const i = config.indexOf("=");
    writerConfigDefaults[config.slice(0, i)] = config.slice(i + 1);
  }
  const db = opt.s3
    ? await lancedb.connect(`${opt.s3}/${shape}_${k}_${B}`, { storageOptions: {
        aws_endpoint: process.env.AWS_ENDPOINT_URL || process.env.MW_S3_ENDPOINT,
        aws_access_key_id: process.env.AWS_ACCESS_KEY_ID, aws_secret_access_key: process.env.AWS_SECRET_ACCESS_KEY,
        aws_region: process.env.AWS_REGION || "us-east-1", allow_http: "true" } })
    : await lancedb.connect(d);
  const t = await db.createEmptyTable("t", schema, { mode: "overwrite" });
  await t.setUnenforcedPrimaryKey("id");
  await t.setLsmWriteSpec({ specType: "unsharded", maintainedIndexes: [], writerConfigDefaults });
  const lat = [];
  let rows = 0, payload = 0, writeMs = 0, nextId = 0, elapsedMs = 0;
  // the first --warmup seconds of calls run but are not counted
  let chunkRows = Math.max(B, Math.min(20000, B * 20));
  while (elapsedMs < (warmup + seconds) * 1000) {
    const todo = [];
    for (let done = 0; done < chunkRows; done += B) {
      todo.push(chunk(schema, wide, nextId, B));
      nextId += B;
    }
    chunkRows = Math.min(200000, Math.max(B, chunkRows * 2));
    for (const c of todo) {
      const c0 = performance.now();
      await t.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(c.tbl);
      const c1 = performance.now();
      elapsedMs += c1 - c0;
      if (elapsedMs <= warmup * 1000) continue;
      lat.push(c1 - c0);
      writeMs += c1 - c0;
      rows += c.n;
      payload += c.payload;
      if (elapsedMs >= (warmup + seconds) * 1000) break;
    }
  }
  const c0 = performance.now();
  await t.closeLsmWriters();
  const closeS = (performance.now() - c0) / 1000;
  t.close();
  fs.rmSync(d, { recursive: true, force: true });
  lat.sort((a, b) => a - b);
  const s = writeMs / 1000;
  return {
    shape, config, batch: B, calls: lat.length, rows, write_s: r3(s),
    rows_per_s: Math.round(rows / s), mb_per_s: r3(payload / 1e6 / s),
    lat_ms: { p50: r3(pct(lat, 50)), p99: r3(pct(lat, 99)), p999: r3(pct(lat, 99.9)), max: r3(lat[lat.length - 1]) },
    close_s: r3(closeS),
  };
}

let k = 0;
for (const shape of shapes)
  for (const config of configs)
    for (const B of batches) console.log(JSON.stringify(await one(shape, config, B, k++)));
