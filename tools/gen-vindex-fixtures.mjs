#!/usr/bin/env node
// gen-vindex-fixtures.mjs — the per-SSTable vector index LanceDB's own MemWAL
// writer flushes (IVF_HNSW_SQ, one zero-centroid partition), for
// tests/lance/test_vindex.c and docs/indexes.md.
//
//   node tools/gen-vindex-fixtures.mjs [OUTDIR] [--scratch DIR] [--node-modules DIR]
//
// OUTDIR defaults to tests/lance/data/vindex; node_modules defaults to
// tests/interop/node_modules (`npm --prefix tests/interop install --no-audit
// --no-fund`: LanceDB 0.39.0 = Lance 12.0.0, apache-arrow 18.1.0).
//
// For each case it creates a table {id int64 not null (the unenforced primary
// key), vec fixed_size_list<float32, DIM> (nullable)} holding BASE rows, builds
// the case's base index on vec (createIndex default = IVF_PQ, ivfPq or hnswSq
// with a distance type), sets an unsharded LSM write spec with
// maintainedIndexes omitted (so every index is maintained, FINDINGS f), writes
// ROWS fresh rows through one mergeInsert("id") call and closes the writers,
// which flushes one SSTable. It copies from that SSTable into OUTDIR/<case>/:
//
//   index.idx, auxiliary.idx   the two files of _indices/<uuid>/
//   sstable.manifest           the SSTable's dataset manifest (_versions/*.manifest)
//   vectors.f32                the fresh rows' vectors, row-major float32 LE,
//                              zeros in the rows whose vector is null
//   case.txt                   "rows R\ndim D\ndistance X\nindex NAME\nuuid U\nnulls i j ..."
//
// Vectors come from a fixed xorshift generator, so the inputs are the same on
// every run; the index files are not byte-identical across runs (LanceDB picks
// a random uuid and its graph build runs on several threads). Runs in ~10 s.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const args = process.argv.slice(2);
let outDir = path.join(repo, "tests/lance/data/vindex");
let scratch = null;
let nodeModules = path.join(repo, "tests/interop/node_modules");
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--scratch") scratch = args[++i];
  else if (args[i] === "--node-modules") nodeModules = args[++i];
  else if (!args[i].startsWith("--")) outDir = path.resolve(args[i]);
  else throw new Error(`unknown option ${args[i]}`);
}
const require = createRequire(path.join(nodeModules, "x.js"));
const lancedb = require("@lancedb/lancedb");
const arrow = require("apache-arrow");

// base: rows in the base table (IVF_PQ trains 256 PQ centroids: >= 256 rows)
const CASES = {
  l2_pq: { dim: 16, base: 300, rows: 120, nulls: [], index: () => undefined, distance: "l2" },
  l2_pq_nulls: { dim: 8, base: 300, rows: 64, nulls: [0, 5, 63], index: () => undefined, distance: "l2" },
  cos_hnswsq: {
    dim: 8,
    base: 300,
    rows: 80,
    nulls: [],
    index: () => ({ config: lancedb.Index.hnswSq({ distanceType: "cosine" }) }),
    distance: "cosine",
  },
  dot_ivfpq: {
    dim: 32,
    base: 300,
    rows: 100,
    nulls: [],
    index: () => ({ config: lancedb.Index.ivfPq({ distanceType: "dot", numPartitions: 1, numSubVectors: 4 }) }),
    distance: "dot",
  },
};

function rng(seed) {
  let s = BigInt(seed) | 1n;
  const M = (1n << 64n) - 1n;
  return () => {
    s ^= (s << 13n) & M;
    s ^= s >> 7n;
    s ^= (s << 17n) & M;
    return Number(s >> 40n) / 2 ** 24; // [0, 1) with 24 bits: exact in float32
  };
}

function makeTable(schema, dim, firstId, n, nulls, next) {
  const ids = [];
  const vecs = [];
  for (let i = 0; i < n; i++) {
    ids.push(BigInt(firstId + i));
    if (nulls.includes(i)) vecs.push(null);
    else vecs.push(Array.from({ length: dim }, () => Math.fround(next() * 2 - 1)));
  }
  const idv = arrow.vectorFromArray(ids, new arrow.Int64());
  // arrow's vectorFromArray leaves no values for a null list: build the
  // fixed-size list by hand (zeros under a null, validity bitmap)
  const flat = new Float32Array(n * dim);
  const valid = new Uint8Array(Math.ceil(n / 8));
  vecs.forEach((v, i) => {
    if (v) {
      flat.set(v, i * dim);
      valid[i >> 3] |= 1 << (i & 7);
    }
  });
  const values = arrow.makeData({ type: new arrow.Float32(), length: n * dim, data: flat });
  const vecv = {
    data: [
      arrow.makeData({
        type: schema.fields[1].type,
        length: n,
        nullCount: vecs.filter((v) => !v).length,
        nullBitmap: vecs.some((v) => !v) ? valid : undefined,
        child: values,
      }),
    ],
  };
  const data = arrow.makeData({
    type: new arrow.Struct(schema.fields),
    length: n,
    nullCount: 0,
    children: [idv.data[0], vecv.data[0]],
  });
  return { table: new arrow.Table(schema, [new arrow.RecordBatch(schema, data)]), vecs };
}

function findOne(dir, pred) {
  const found = [];
  const walk = (d) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (pred(p)) found.push(p);
    }
  };
  walk(dir);
  if (found.length !== 1) throw new Error(`expected one match under ${dir}, found ${found.length}: ${found}`);
  return found[0];
}

const work = scratch ? path.resolve(scratch) : fs.mkdtempSync(path.join(os.tmpdir(), "vindexfix-"));
const only = process.env.VINDEX_CASES ? process.env.VINDEX_CASES.split(",") : Object.keys(CASES);
for (const name of only) {
  const c = CASES[name];
  const dir = path.join(work, name);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  const item = new arrow.Field("item", new arrow.Float32(), true);
  const schema = new arrow.Schema([
    new arrow.Field("id", new arrow.Int64(), false),
    new arrow.Field("vec", new arrow.FixedSizeList(c.dim, item), true),
  ]);
  const next = rng(0x9e3779b97f4a7c15n ^ BigInt(name.length * 7919 + c.dim));
  const db = await lancedb.connect(dir);
  const base = makeTable(schema, c.dim, 0, c.base, [], next);
  const tbl = await db.createTable("t", base.table, { mode: "overwrite" });
  await tbl.createIndex("vec", c.index());
  await tbl.setUnenforcedPrimaryKey("id");
  await tbl.setLsmWriteSpec({ specType: "unsharded" });
  const spec = await tbl.getLsmWriteSpec();
  const fresh = makeTable(schema, c.dim, 100000, c.rows, c.nulls, next);
  await tbl.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(fresh.table);
  await tbl.closeLsmWriters();
  tbl.close();
  const mw = path.join(dir, "t.lance", "_mem_wal");
  const idx = findOne(mw, (p) => p.endsWith("/index.idx"));
  const aux = findOne(mw, (p) => p.endsWith("/auxiliary.idx"));
  const sst = path.resolve(idx, "../../..");
  const man = findOne(path.join(sst, "_versions"), (p) => p.endsWith(".manifest"));
  const out = path.join(outDir, name);
  fs.rmSync(out, { recursive: true, force: true });
  fs.mkdirSync(out, { recursive: true });
  fs.copyFileSync(idx, path.join(out, "index.idx"));
  fs.copyFileSync(aux, path.join(out, "auxiliary.idx"));
  fs.copyFileSync(man, path.join(out, "sstable.manifest"));
  const f32 = new Float32Array(c.rows * c.dim);
  fresh.vecs.forEach((v, i) => v && f32.set(v, i * c.dim));
  fs.writeFileSync(path.join(out, "vectors.f32"), Buffer.from(f32.buffer));
  const uuid = path.basename(path.dirname(idx));
  const lines = [
    `rows ${c.rows}`,
    `dim ${c.dim}`,
    `distance ${c.distance}`,
    `index ${spec.maintainedIndexes.join(",")}`,
    `uuid ${uuid}`,
    `nulls ${c.nulls.join(" ")}`.trimEnd(),
  ];
  fs.writeFileSync(path.join(out, "case.txt"), lines.join("\n") + "\n");
  console.log(
    JSON.stringify({
      case: name,
      maintained: spec.maintainedIndexes,
      index_bytes: fs.statSync(idx).size,
      aux_bytes: fs.statSync(aux).size,
      manifest_bytes: fs.statSync(man).size,
    }),
  );
}
if (!scratch) fs.rmSync(work, { recursive: true, force: true });
