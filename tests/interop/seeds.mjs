#!/usr/bin/env node
// seeds.mjs — zone write seeds v1 against the real LanceDB 0.39.0 and an
// independent reader (apache-arrow 18.1.0), for the interop test
// zone-seeds-refused (seeds.sh).
//
//   node seeds.mjs SEEDED_TABLE PLAIN_TABLE ROWS.jsonl
//
// SEEDED_TABLE and PLAIN_TABLE hold the same SSTables (mw_sst_tool model with
// the same --seed), written with and without --zone-seeds; ROWS.jsonl lists
// every physical row of every SSTable in order ({"sst": dir, column: value}).
// Checks, each one a failure when it does not hold:
//   1. LanceDB reads PLAIN_TABLE, and refuses SEEDED_TABLE with its
//      "cannot be read by this version of Lance ... Flags: 65536" error
//      (FLAG_ZONE_WRITE_SEEDS, as the seed proposal requires);
//   2. LanceDB refuses each seeded SSTable opened as a dataset on its own;
//   3. each seeded data file's schema metadata locates a seed for every
//      column, apache-arrow reads that global buffer as an Arrow IPC file
//      with the v1 seed schema (version "1"), and every zone record equals
//      what this script computes from ROWS.jsonl by itself: bounds over
//      non-null non-NaN values (BigInt, UTF-8 bytes, numbers), null and NaN
//      counts, zone lengths, null bounds for the vector column, and the
//      seed_null_bitmap (roaring, decoded here) equal to the null rows.
// Prints one "ok ..." line (exit 0) or the first mismatch (exit 1).
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
if (!fs.existsSync(path.join(here, "node_modules", "@lancedb", "lancedb"))) {
  console.error(`interop: ${here}/node_modules is missing: run \`npm install --no-audit --no-fund\` in tests/interop first`);
  process.exit(2);
}
const lancedb = await import("@lancedb/lancedb");
const arrow = await import("apache-arrow");

const [seeded, plain, rowsFile] = process.argv.slice(2);
if (!rowsFile) {
  console.error("usage: node seeds.mjs SEEDED_TABLE PLAIN_TABLE ROWS.jsonl");
  process.exit(2);
}
function fail(msg) {
  console.error("seeds: " + msg);
  process.exit(1);
}

async function scan(dir) {
  const db = await lancedb.connect(path.dirname(dir));
  const t = await db.openTable(path.basename(dir).replace(/\.lance$/, ""));
  return (await t.query().toArray()).length;
}

async function refused(dir, what) {
  try {
    const n = await scan(dir);
    fail(`${what}: LanceDB read ${n} rows from a dataset flagged FLAG_ZONE_WRITE_SEEDS`);
  } catch (e) {
    if (!/cannot be read by this version of Lance/.test(e.message) || !/Flags: 65536/.test(e.message))
      fail(`${what}: LanceDB failed, but not on the feature flag: ${e.message.slice(0, 300)}`);
  }
}

// 1. the whole table
const plainRows = await scan(plain);
await refused(seeded, "seeded table");

// rows per SSTable, in order
const bySst = new Map();
for (const line of fs.readFileSync(rowsFile, "utf8").split("\n")) {
  if (!line) continue;
  const r = JSON.parse(line);
  if (!bySst.has(r.sst)) bySst.set(r.sst, []);
  bySst.get(r.sst).push(r);
}
const walRoot = path.join(seeded, "_mem_wal");
const shard = fs.readdirSync(walRoot)[0];

// ---- a minimal protobuf reader for the FileDescriptor
function varint(b, pos) {
  let x = 0n, s = 0n;
  for (;;) {
    const c = b[pos.i++];
    x |= BigInt(c & 0x7f) << s;
    s += 7n;
    if (c < 0x80) return x;
  }
}
function fieldsOf(b) {
  const out = [];
  const pos = { i: 0 };
  while (pos.i < b.length) {
    const key = Number(varint(b, pos)), tag = key >> 3, wire = key & 7;
    if (wire === 0) out.push({ tag, v: varint(b, pos) });
    else if (wire === 2) {
      const n = Number(varint(b, pos));
      out.push({ tag, b: b.subarray(pos.i, pos.i + n) });
      pos.i += n;
    } else if (wire === 1) pos.i += 8;
    else if (wire === 5) pos.i += 4;
    else throw new Error("wire " + wire);
  }
  return out;
}
function descriptor(file) {
  const n = file.length, ft = file.subarray(n - 40);
  const dv = new DataView(ft.buffer, ft.byteOffset, 40);
  if (Buffer.from(ft.subarray(36)).toString() !== "LANC") fail("no LANC footer");
  const gbo = Number(dv.getBigUint64(16, true)), g = dv.getUint32(24, true);
  const gb = [];
  const fdv = new DataView(file.buffer, file.byteOffset, n);
  for (let i = 0; i < g; i++) gb.push([Number(fdv.getBigUint64(gbo + 16 * i, true)), Number(fdv.getBigUint64(gbo + 16 * i + 8, true))]);
  const fd = fieldsOf(file.subarray(gb[0][0], gb[0][0] + gb[0][1]));
  const schema = fieldsOf(fd.find((f) => f.tag === 1).b);
  const names = [], meta = {};
  for (const f of schema) {
    if (f.tag === 1) names.push(Buffer.from(fieldsOf(f.b).find((x) => x.tag === 2).b).toString());
    if (f.tag === 5) {
      const e = fieldsOf(f.b);
      meta[Buffer.from(e.find((x) => x.tag === 1).b).toString()] = Buffer.from(e.find((x) => x.tag === 2)?.b ?? []).toString();
    }
  }
  return { gb, names, meta };
}

// ---- roaring portable (no-run) decoder, for seed_null_bitmap
function roaring(hex) {
  const b = Buffer.from(hex, "hex");
  if (b.length === 0) return [];
  if (b.readUInt32LE(0) !== 12346) fail("seed_null_bitmap: not a no-run roaring bitmap");
  const n = b.readUInt32LE(4), out = [];
  for (let c = 0; c < n; c++) {
    const key = b.readUInt16LE(8 + 4 * c), card = b.readUInt16LE(10 + 4 * c) + 1;
    const off = b.readUInt32LE(8 + 4 * n + 4 * c);
    if (card <= 4096) for (let i = 0; i < card; i++) out.push(key * 65536 + b.readUInt16LE(off + 2 * i));
    else for (let i = 0; i < 65536; i++) if (b[off + (i >> 3)] & (1 << (i & 7))) out.push(key * 65536 + i);
  }
  return out;
}

// ---- expected zone statistics, computed here from the rows
function cmp(kind, a, b) {
  if (kind === "int") return a < b ? -1 : a > b ? 1 : 0;
  if (kind === "str") return Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"));
  if (kind === "bool") return (a ? 1 : 0) - (b ? 1 : 0);
  if (a < b) return -1;
  if (a > b) return 1;
  return Object.is(a, -0) && Object.is(b, 0) ? -1 : Object.is(a, 0) && Object.is(b, -0) ? 1 : 0;
}
const KIND = { id: "int", name: "str", v: "num", vec: "none", _tombstone: "bool" };
function expectZones(rows, col, rpz) {
  const zones = [];
  for (let z = 0; z * rpz < rows.length; z++) {
    const part = rows.slice(z * rpz, (z + 1) * rpz);
    let min = null, max = null, nulls = 0, nans = 0, neg = 0;
    for (const r of part) {
      let v = r[col];
      if (v === null) { nulls++; continue; }
      if (KIND[col] === "none") continue;
      if (KIND[col] === "int") v = BigInt(v);
      if (typeof v === "number" && Number.isNaN(v)) { nans++; continue; }
      if (min === null || cmp(KIND[col], v, min) < 0) min = v;
      if (max === null || cmp(KIND[col], v, max) > 0) max = v;
    }
    zones.push({ min, max, nulls, nans, neg, len: part.length });
  }
  return zones;
}

let seedsChecked = 0, zonesChecked = 0;
for (const [sst, rows] of bySst) {
  const dir = path.join(walRoot, shard, sst);
  // 2. the SSTable on its own
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "mw-seeds-"));
  fs.symlinkSync(dir, path.join(tmp, "s.lance"));
  await refused(path.join(tmp, "s.lance"), `SSTable ${sst}`);
  fs.rmSync(tmp, { recursive: true, force: true });
  // 3. its seeds
  const dataDir = path.join(dir, "data");
  const file = fs.readFileSync(path.join(dataDir, fs.readdirSync(dataDir)[0]));
  const { gb, names, meta } = descriptor(file);
  for (const col of names) {
    const loc = meta["lance.seed." + col];
    if (!loc) fail(`${sst}: no lance.seed.${col} in the schema metadata`);
    const [idx, rpz] = loc.split(":").map(Number);
    const [at, size] = gb[idx];
    const t = arrow.tableFromIPC(file.subarray(at, at + size));
    const want = ["min", "max", "null_count", "nan_count", "negative_nan_count", "zone_length"];
    if (t.schema.fields.map((f) => f.name).join() !== want.join()) fail(`${sst} ${col}: seed fields ${t.schema.fields.map((f) => f.name)}`);
    if (t.schema.metadata.get("version") !== "1") fail(`${sst} ${col}: seed version ${t.schema.metadata.get("version")}`);
    const zones = expectZones(rows, col, rpz);
    if (t.numRows !== zones.length) fail(`${sst} ${col}: ${t.numRows} zones, expected ${zones.length}`);
    for (let z = 0; z < zones.length; z++) {
      const e = zones[z], g = t.get(z);
      const same = (a, b) => (a === null || a === undefined ? b === null : b !== null && cmp(KIND[col], a, b) === 0 && (typeof a !== "number" || Object.is(a, b)));
      let gmin = g.min, gmax = g.max;
      if (KIND[col] === "none") {
        if (gmin !== null || gmax !== null) fail(`${sst} ${col} zone ${z}: a vector column must have null bounds`);
        gmin = gmax = undefined;
      }
      if (KIND[col] !== "none" && (!same(gmin, e.min) || !same(gmax, e.max)))
        fail(`${sst} ${col} zone ${z}: bounds [${gmin}, ${gmax}], expected [${e.min}, ${e.max}]`);
      if (g.null_count !== e.nulls || g.nan_count !== e.nans || g.negative_nan_count !== e.neg || g.zone_length !== BigInt(e.len))
        fail(`${sst} ${col} zone ${z}: counts ${g.null_count}/${g.nan_count}/${g.negative_nan_count}/${g.zone_length}, expected ${e.nulls}/${e.nans}/${e.neg}/${e.len}`);
      zonesChecked++;
    }
    const bm = t.schema.metadata.get("seed_null_bitmap");
    if (bm !== undefined) {
      const got = roaring(bm).join(), exp = rows.map((r, i) => (r[col] === null ? i : -1)).filter((i) => i >= 0).join();
      if (got !== exp) fail(`${sst} ${col}: seed_null_bitmap names other rows than the null ones`);
    }
    seedsChecked++;
  }
}
console.log(`ok plain_rows=${plainRows} sstables=${bySst.size} seeds=${seedsChecked} zones=${zonesChecked} refused=${bySst.size + 1}`);
