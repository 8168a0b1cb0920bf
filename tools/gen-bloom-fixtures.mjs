#!/usr/bin/env node
// gen-bloom-fixtures.mjs — bloom_filter.bin files written by Lance's own
// MemWAL writer, one per primary-key type, for tests/lance/test_bloom.c.
//
//   node tools/gen-bloom-fixtures.mjs [OUTDIR] [--scratch DIR] [--node-modules DIR]
//
// OUTDIR defaults to tests/lance/data/bloom_types; node_modules defaults to
// tests/interop/node_modules (`cd tests/interop && npm install --no-audit
// --no-fund`: LanceDB 0.39.0 = Lance 12.0.0, apache-arrow 18.1.0).
//
// For each type it creates a table {k: TYPE not null (the unenforced primary
// key), v: float64}, sets an unsharded LSM write spec (the way
// ../shared/peer/make-shard.mjs does), writes N distinct keys through one
// mergeInsert("k") call and closes the writers, which flushes the memtable
// into one SSTable. It copies that SSTable's bloom_filter.bin to
// OUTDIR/<type>.bloom and writes OUTDIR/<type>.keys:
//
//   type <name>
//   rows <n>
//   <one key per line, in insert order>
//
// Keys: integers in decimal, bool as 0/1, utf8 and binary as `x` + hex of the
// bytes (so an empty key is the line `x`). A type Lance refuses as a primary
// key (or refuses to write through the LSM writer) gets OUTDIR/<type>.rejected
// holding the error text instead. Everything is deterministic, so re-running
// gives byte-identical files. Runs in ~5 s.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const args = process.argv.slice(2);
let outDir = path.join(repo, "tests/lance/data/bloom_types");
let scratch = null;
let nodeModules = path.join(repo, "tests/interop/node_modules");
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--scratch") scratch = args[++i];
  else if (args[i] === "--node-modules") nodeModules = args[++i];
  else if (!args[i].startsWith("--")) outDir = path.resolve(args[i]);
  else throw new Error(`unknown option ${args[i]}`);
}
// LanceDB's own (CommonJS) apache-arrow: its tables pass LanceDB's instanceof
// checks, so large and fixed-size binary keys reach Lance unsanitised
const require = createRequire(path.join(nodeModules, "x.js"));
const lancedb = require("@lancedb/lancedb");
const arrow = require("apache-arrow");
const { buildData } = await import(pathToFileURL(path.join(repo, "tests/interop/types_lib.mjs")).href);

const N = 300;
const hex = (u8) => "x" + Buffer.from(u8).toString("hex");
const enc = new TextEncoder();
// Deterministic, distinct keys per type: negatives, extremes, an empty string,
// multibyte UTF-8, binary lengths 0..24 (across SipHash's 8-byte words).
// int64 is the control (verified before); uint32, uint64, bool and the narrow,
// half-float and temporal types are what Lance 12 refuses as a key
// (set_unenforced_primary_key: "Supported: Int32, Int64, Utf8, LargeUtf8,
// Binary, LargeBinary, FixedSizeBinary"); the large and fixed-size binaries
// are keys too.
const TYPES = {
  int64: {
    type: () => new arrow.Int64(),
    keys: () => Array.from({ length: N }, (_, i) => (i === 0 ? -(2n ** 63n) : BigInt(i * 1000003 - 150000000))),
    line: (k) => k.toString(),
  },
  int32: {
    type: () => new arrow.Int32(),
    keys: () => Array.from({ length: N }, (_, i) => (i === 0 ? -(2 ** 31) : i === 1 ? 2 ** 31 - 1 : i * 7919 - 1000000)),
    line: (k) => String(k),
  },
  uint32: {
    type: () => new arrow.Uint32(),
    keys: () => Array.from({ length: N }, (_, i) => (i === 0 ? 2 ** 32 - 1 : i * 14316557)),
    line: (k) => String(k),
  },
  uint64: {
    type: () => new arrow.Uint64(),
    keys: () => Array.from({ length: N }, (_, i) => (i === 0 ? 2n ** 64n - 1n : BigInt(i) * 61489146912365172n)),
    line: (k) => k.toString(),
  },
  bool: {
    type: () => new arrow.Bool(),
    keys: () => [false, true],
    line: (k) => (k ? "1" : "0"),
  },
  utf8: {
    type: () => new arrow.Utf8(),
    keys: () => Array.from({ length: N }, (_, i) => (i === 0 ? "" : `k${i}-${"é".repeat(i % 5)}${"z".repeat(i % 11)}`)),
    line: (k) => hex(enc.encode(k)),
  },
  binary: {
    type: () => new arrow.Binary(),
    keys: () =>
      Array.from({ length: N }, (_, i) => {
        const u = new Uint8Array(i === 0 ? 0 : i % 24 || 24);
        for (let j = 0; j < u.length; j++) u[j] = (i * 31 + j * 7) & 0xff;
        if (u.length > 0) u[0] = i & 0xff; // distinct keys of each length
        if (u.length > 1) u[1] = i >> 8;
        return u;
      }),
    line: (k) => hex(k),
  },
  large_utf8: {
    type: () => new arrow.LargeUtf8(),
    keys: () => Array.from({ length: N }, (_, i) => (i === 0 ? "" : `L${i}-${"\u00e9".repeat(i % 5)}${"q".repeat(i % 13)}`)),
    line: (k) => hex(enc.encode(k)),
  },
  large_binary: {
    type: () => new arrow.LargeBinary(),
    keys: () =>
      Array.from({ length: N }, (_, i) => {
        const u = new Uint8Array(i === 0 ? 0 : i % 20 || 20);
        for (let j = 0; j < u.length; j++) u[j] = (i * 17 + j * 5) & 0xff;
        if (u.length > 0) u[0] = i & 0xff;
        if (u.length > 1) u[1] = i >> 8;
        return u;
      }),
    line: (k) => hex(k),
  },
  fixed_size_binary: {
    type: () => new arrow.FixedSizeBinary(16),
    keys: () =>
      Array.from({ length: N }, (_, i) => {
        const u = new Uint8Array(16);
        for (let j = 0; j < 16; j++) u[j] = (i * 13 + j * 29) & 0xff;
        u[0] = i & 0xff;
        u[1] = i >> 8;
        return u;
      }),
    line: (k) => hex(k),
  },
  int8: { type: () => new arrow.Int8(), keys: () => Array.from({ length: 100 }, (_, i) => i - 50), line: String },
  int16: { type: () => new arrow.Int16(), keys: () => Array.from({ length: N }, (_, i) => i * 100 - 15000), line: String },
  uint8: { type: () => new arrow.Uint8(), keys: () => Array.from({ length: 200 }, (_, i) => i), line: String },
  uint16: { type: () => new arrow.Uint16(), keys: () => Array.from({ length: N }, (_, i) => i * 200), line: String },
  date32: { type: () => new arrow.DateDay(), keys: () => Array.from({ length: N }, (_, i) => String(18000 + i)), line: String },
  timestamp_us: {
    type: () => new arrow.TimestampMicrosecond(),
    keys: () => Array.from({ length: N }, (_, i) => String(1700000000000000 + i * 1000)),
    line: String,
  },
};

function makeBatch(schema, keys) {
  const k = arrow.makeVector(buildData(arrow, schema.fields[0].type, keys.map((x) => (x instanceof Uint8Array ? Array.from(x) : x))));
  const v = arrow.vectorFromArray(keys.map((_, i) => i * 0.5), new arrow.Float64());
  const data = arrow.makeData({
    type: new arrow.Struct(schema.fields),
    length: keys.length,
    nullCount: 0,
    children: [k.data[0], v.data[0]],
  });
  return new arrow.Table(schema, [new arrow.RecordBatch(schema, data)]);
}

function findBlooms(tableDir) {
  const found = [];
  const walk = (d) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name === "bloom_filter.bin") found.push(p);
    }
  };
  const mw = path.join(tableDir, "_mem_wal");
  if (fs.existsSync(mw)) walk(mw);
  return found.sort();
}

const work = scratch ? path.resolve(scratch) : fs.mkdtempSync(path.join(os.tmpdir(), "bloomfix-"));
fs.mkdirSync(outDir, { recursive: true });
const only = process.env.BLOOM_TYPES ? process.env.BLOOM_TYPES.split(",") : Object.keys(TYPES);
const summary = {};
for (const name of only) {
  const t = TYPES[name];
  const dir = path.join(work, name);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  const schema = new arrow.Schema([
    new arrow.Field("k", t.type(), false),
    new arrow.Field("v", new arrow.Float64(), true),
  ]);
  const keys = t.keys();
  for (const f of [".bloom", ".keys", ".rejected"]) fs.rmSync(path.join(outDir, name + f), { force: true });
  let stage = "createEmptyTable";
  try {
    const db = await lancedb.connect(dir);
    const tbl = await db.createEmptyTable("t", schema, { mode: "overwrite" });
    stage = "setUnenforcedPrimaryKey";
    await tbl.setUnenforcedPrimaryKey("k");
    stage = "setLsmWriteSpec";
    await tbl.setLsmWriteSpec({ specType: "unsharded", maintainedIndexes: [], writerConfigDefaults: {} });
    stage = "mergeInsert";
    await tbl.mergeInsert("k").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(makeBatch(schema, keys));
    stage = "closeLsmWriters";
    await tbl.closeLsmWriters();
    tbl.close();
    stage = "find bloom_filter.bin";
    const blooms = findBlooms(path.join(dir, "t.lance"));
    if (blooms.length !== 1) throw new Error(`expected 1 flushed SSTable, found ${blooms.length}`);
    fs.copyFileSync(blooms[0], path.join(outDir, `${name}.bloom`));
    const lines = [`type ${name}`, `rows ${keys.length}`, ...keys.map(t.line)];
    fs.writeFileSync(path.join(outDir, `${name}.keys`), lines.join("\n") + "\n");
    summary[name] = { accepted: true, rows: keys.length, bloom_bytes: fs.statSync(blooms[0]).size };
  } catch (e) {
    const msg = `${stage}: ${String(e.message ?? e).split("\n")[0]}`;
    fs.writeFileSync(path.join(outDir, `${name}.rejected`), msg + "\n");
    summary[name] = { accepted: false, error: msg };
  }
  console.log(JSON.stringify({ type: name, ...summary[name] }));
}
if (!scratch) fs.rmSync(work, { recursive: true, force: true });
