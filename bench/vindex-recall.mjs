#!/usr/bin/env node
// vindex-recall.mjs — the LanceDB 0.39.0 side of bench/vindex_recall.py.
//
//   node vindex-recall.mjs make DIR --rows N --dim D
//     DIR/t.lance {id int64 PK, vec fixed_size_list<float32, D>}: 300 base
//     rows, an IVF_PQ index on vec (l2, one partition), the default LSM write
//     spec (the index maintained), then N fresh rows (ids from 100000, uniform
//     in [-1, 1]) through LanceDB's own writer in one mergeInsert, flushed by
//     closeLsmWriters: its SSTable(s) with LanceDB's own index. The fresh
//     vectors go to DIR/fresh.f32 (row-major float32). Prints one JSON line:
//     {"cpu_s": CPU of the write and its flush, "wall_s": ...}.
//   node vindex-recall.mjs recall DIR --queries Q
//     Q random query vectors (another seed); for each, LanceDB's default
//     vector search (LSM routing) for 10 neighbors, filtered to the fresh
//     ids (every SSTable row passes: the filter only drops base rows),
//     against the exact 10 nearest fresh rows (brute force, l2). Prints
//     {"recall_at_10": ..., "queries": Q, "found_self": ...}: found_self
//     counts fresh rows (the first Q) found first by their own vector.
import * as fs from "node:fs";
import * as path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "..", "tests", "interop", "package.json"));
const lancedb = require("@lancedb/lancedb");
const arrow = require("apache-arrow");

const [cmd, dir, ...rest] = process.argv.slice(2);
const opt = { rows: "10000", dim: "128", queries: "100" };
for (let i = 0; i < rest.length; i += 2) opt[rest[i].replace(/^--/, "")] = rest[i + 1];
const dim = Number(opt.dim);

function rng(seed) {
  let s = BigInt(seed) | 1n;
  const M = (1n << 64n) - 1n;
  return () => {
    s ^= (s << 13n) & M;
    s ^= s >> 7n;
    s ^= (s << 17n) & M;
    return Number(s >> 40n) / 2 ** 24;
  };
}

function schemaOf(d) {
  return new arrow.Schema([
    new arrow.Field("id", new arrow.Int64(), false),
    new arrow.Field("vec", new arrow.FixedSizeList(d, new arrow.Field("item", new arrow.Float32(), true)), true),
  ]);
}

function table(schema, first, flat, n) {
  const vec = arrow.makeData({ type: schema.fields[1].type, length: n, nullCount: 0,
    child: arrow.makeData({ type: new arrow.Float32(), length: n * dim, data: flat }) });
  const ids = Array.from({ length: n }, (_, i) => BigInt(first + i));
  const id = arrow.vectorFromArray(ids, new arrow.Int64()).data[0];
  const data = arrow.makeData({ type: new arrow.Struct(schema.fields), length: n, nullCount: 0, children: [id, vec] });
  return new arrow.Table(schema, [new arrow.RecordBatch(schema, data)]);
}

function randomFlat(n, next) {
  const flat = new Float32Array(n * dim);
  for (let i = 0; i < flat.length; i++) flat[i] = Math.fround(next() * 2 - 1);
  return flat;
}

async function make() {
  const schema = schemaOf(dim);
  const next = rng(0x5eed + dim);
  const db = await lancedb.connect(dir);
  const t = await db.createTable("t", table(schema, 0, randomFlat(300, next), 300));
  const config = lancedb.Index.ivfPq({ distanceType: "l2", numPartitions: 1, numSubVectors: Math.max(1, dim / 8) });
  await t.createIndex("vec", { config });
  await t.setUnenforcedPrimaryKey("id");
  await t.setLsmWriteSpec({ specType: "unsharded" });
  const n = Number(opt.rows);
  const flat = randomFlat(n, next);
  fs.writeFileSync(path.join(dir, "fresh.f32"), Buffer.from(flat.buffer));
  const c0 = process.cpuUsage(), w0 = performance.now();
  await t.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(table(schema, 100000, flat, n));
  await t.closeLsmWriters();
  const c = process.cpuUsage(c0);
  t.close();
  console.log(JSON.stringify({ cpu_s: (c.user + c.system) / 1e6, wall_s: (performance.now() - w0) / 1e3 }));
}

async function recall() {
  const buf = fs.readFileSync(path.join(dir, "fresh.f32"));
  const fresh = new Float32Array(buf.buffer, buf.byteOffset, buf.length / 4);
  const n = fresh.length / dim, nq = Number(opt.queries);
  const qs = randomFlat(nq, rng(0x9e3779b9 + dim));
  const db = await lancedb.connect(dir);
  const t = await db.openTable("t");
  let hits = 0, self = 0;
  for (let q = 0; q < nq; q++) {
    const query = Array.from(qs.subarray(q * dim, (q + 1) * dim));
    const d = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      let s = 0;
      for (let j = 0; j < dim; j++) { const x = fresh[i * dim + j] - query[j]; s += x * x; }
      d[i] = s;
    }
    const truth = new Set(Array.from(d.keys()).sort((a, b) => d[a] - d[b]).slice(0, 10).map((i) => String(100000 + i)));
    const got = await t.search(query).distanceType("l2").where("id >= 100000").limit(10).toArray();
    hits += got.filter((r) => truth.has(String(r.id))).length;
    const own = Array.from(fresh.subarray(q * dim, (q + 1) * dim));
    const first = await t.search(own).distanceType("l2").where("id >= 100000").limit(10).toArray();
    self += first.length > 0 && String(first[0].id) === String(100000 + q);
  }
  t.close();
  console.log(JSON.stringify({ recall_at_10: hits / (nq * 10), queries: nq, found_self: self }));
}

if (cmd === "make") await make();
else if (cmd === "recall") await recall();
else throw new Error("usage: vindex-recall.mjs make|recall DIR [options]");
process.exit(0);
