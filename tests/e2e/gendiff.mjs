#!/usr/bin/env node
// gendiff.mjs — the LanceDB side of the generative differential test
// (tests/e2e/test_gendiff.py, issue 26): random cases, LanceDB 0.39.0's own writer
// on the same rows, and LanceDB's reads of both.
//
// A case is a pure function of its seed (a 32-bit integer; mulberry32): a
// schema (an `id` key of int64, int32 or string, then 1..8 columns of any
// type memwald supports, flat or nested up to 3 levels: lists, large lists,
// structs and fixed-size lists in each other), a sharding spec, zstd on or
// off, and three phases of requests:
//   p1  inserts (1 to tens of thousands of rows, a few keys twice);
//   p2  updates, new keys, deletes (of live keys, of keys never written,
//       a key deleted and written again inside the phase);
//   p3  the same again, smaller.
// Each phase draws, for every column and every nested level of it, a null
// pattern (none, all, one value, a random share) and for lists a length
// pattern (all empty, one item each, a single item in the whole phase,
// short, long), for strings and binaries a length pattern (all empty,
// short, wide values of kilobytes), weighted toward those edges. Values are
// drawn from each type's whole range with its edges (min, max, 0, subnormal
// floats, dates of year 1 and 9999, 38-digit decimals, multi-byte and
// control characters) and spelled in every JSON form memwald takes
// (types_lib.jsonValue: RFC 3339 with offsets, integers, dates as text,
// bare and quoted decimals, base64, struct members left out).
//
//   gendiff.mjs prepare DIR SEED...
//       For each seed, DIR/s<SEED>/: case.json (the schema in memwald's
//       config syntax, key, spec, zstd, row counts), p1.req p2.req p3.req
//       (the request lines for memwald: upserts and `DEL {...}`),
//       m1..m3.jsonl (the model: every live row after each phase, exact.mjs
//       lines sorted by key), then LanceDB's own writer makes the reference
//       table DIR/s<SEED>/ref/r.lance with the same rows (createTable of
//       p1's net rows; mergeInsert and delete of p2's, then p3's; arrow
//       built bit for bit, apache-arrow 21 IPC handed to the native writer
//       so large lists are LanceDB's too) and LanceDB reads it after each
//       phase: r1..r3.jsonl, and the schema it returned, rtypes.json.
//       A case LanceDB's writer refuses gets DIR/s<SEED>/ref.error.
//   gendiff.mjs read DIR STAGE SEED...
//       LanceDB reads DIR/s<SEED>/mw/t.lance (memwald's table, its LSM scan)
//       into DIR/s<SEED>/<STAGE>.jsonl and <STAGE>.types.json, or
//       <STAGE>.error with LanceDB's message.
//   gendiff.mjs serve
//       The same two commands as lines on standard input ("prepare DIR
//       SEED...", "read DIR STAGE SEED..."), one reply line each on standard
//       output ({"ok":true} or {"ok":false,"error":...}): the test keeps
//       two of these for a whole run, so node and LanceDB load once.
//   gendiff.mjs show SEED
//       The case's schema and phase sizes (to look at one seed).
import * as fs from "node:fs";
import * as path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const interop = path.join(here, "..", "interop");
if (!fs.existsSync(path.join(interop, "node_modules", "apache-arrow-21"))) {
  console.error(`gendiff: ${interop}/node_modules is missing or old: run \`npm install --no-audit --no-fund\` there`);
  process.exit(2);
}
const require = createRequire(path.join(interop, "package.json"));
const A = require("apache-arrow-21"); // has LargeList; LanceDB takes its IPC bytes
const lib = await import(path.join(interop, "types_lib.mjs"));
const { exactLine } = await import(path.join(interop, "exact.mjs"));

// ------------------------------------------------------------------ random

function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

class Rng {
  constructor(seed) { this.f = mulberry32(seed); }
  int(lo, hi) { return lo + Math.floor(this.f() * (hi - lo + 1)); }
  chance(p) { return this.f() < p; }
  pick(arr) { return arr[Math.floor(this.f() * arr.length)]; }
  // [[weight, value], ...]
  wpick(pairs) {
    let total = 0;
    for (const [w] of pairs) total += w;
    let x = this.f() * total;
    for (const [w, v] of pairs) if ((x -= w) < 0) return v;
    return pairs[pairs.length - 1][1];
  }
  u32() { return Math.floor(this.f() * 4294967296) >>> 0; }
  u64() { return (BigInt(this.u32()) << 32n) | BigInt(this.u32()); }
  // uniform-ish in [lo, hi] (BigInt)
  bigIn(lo, hi) {
    const span = hi - lo + 1n;
    let r = 0n;
    for (let bits = 0n; (1n << bits) < span * 1024n; bits += 32n) r = (r << 32n) | BigInt(this.u32());
    return lo + (r % span);
  }
  // log-uniform size in [lo, hi]
  logInt(lo, hi) { return Math.min(hi, Math.floor(Math.exp(Math.log(lo) + this.f() * (Math.log(hi + 1) - Math.log(lo))))); }
}

// ------------------------------------------------------------------ types

const MAX_DEPTH = 3; // nested levels below a column (issue 26)
const INTS = {
  int8: [-128n, 127n], int16: [-32768n, 32767n], int32: [-2147483648n, 2147483647n],
  int64: [-(2n ** 63n), 2n ** 63n - 1n], uint8: [0n, 255n], uint16: [0n, 65535n],
  uint32: [0n, 4294967295n], uint64: [0n, 2n ** 64n - 1n],
};
const NUMBER_LEAVES = [...Object.keys(INTS), "float16", "float", "double"];
const UNIT_PER_S = { s: 1n, ms: 1000n, us: 1000000n, ns: 1000000000n };
// years 0002..9998: every RFC 3339 spelling, with any offset, stays in 0001..9999
const MIN_S = -62104060800n, MAX_S = 253370764800n;
const ZONES = ["UTC", "Asia/Kolkata", "America/New_York", "Europe/Berlin", "Etc/GMT+3"];
const ALIAS = { float16: ["float16", "halffloat"], float: ["float", "float32"], double: ["double", "float64"],
  string: ["string", "utf8"], large_string: ["large_string", "large_utf8"] };

function randLeaf(r, numberOnly) {
  if (numberOnly) return { k: r.pick(NUMBER_LEAVES) };
  const k = r.wpick([
    [10, "int"], [4, "float16"], [4, "float"], [5, "double"], [3, "bool"], [7, "string"],
    [3, "large_string"], [3, "binary"], [2, "large_binary"], [2, "fsb"], [3, "date32"], [2, "date64"],
    [2, "time32"], [2, "time64"], [5, "timestamp"], [4, "decimal"],
  ]);
  if (k === "int") return { k: r.pick(Object.keys(INTS)) };
  if (k === "fsb") return { k, n: r.wpick([[3, r.int(1, 8)], [1, 16], [1, r.int(17, 64)]]) };
  if (k === "time32") return { k, unit: r.pick(["s", "ms"]) };
  if (k === "time64") return { k, unit: r.pick(["us", "ns"]) };
  if (k === "timestamp") return { k, unit: r.pick(["s", "ms", "us", "ns"]), tz: r.chance(0.4) ? r.pick(ZONES) : null, bare: r.chance(0.1) };
  if (k === "decimal") {
    const p = r.wpick([[2, r.int(1, 18)], [1, 38], [1, r.int(19, 38)]]);
    return { k, p, s: r.wpick([[1, 0], [2, r.int(0, p)], [1, p]]) };
  }
  return { k, alias: ALIAS[k] ? r.pick(ALIAS[k]) : undefined };
}

// A type with at most `depth` more nested levels.
function randType(r, depth, names) {
  if (depth > 0 && r.chance(depth === MAX_DEPTH ? 0.45 : 0.35)) {
    const k = r.wpick([[3, "list"], [2, "large_list"], [3, "struct"], [2, "fsl"]]);
    if (k === "fsl") return { k, item: randLeaf(r, true), dim: r.wpick([[3, r.int(1, 4)], [1, r.int(5, 64)]]) };
    if (k === "list" || k === "large_list") return { k, item: randType(r, depth - 1, names), itemNotNull: r.chance(0.1) };
    const n = r.wpick([[3, r.int(1, 3)], [1, r.int(4, 6)]]);
    const children = [];
    for (let i = 0; i < n; i++) children.push({ name: `${names()}`, t: randType(r, depth - 1, names), nullable: !r.chance(0.08) });
    return { k, children };
  }
  return randLeaf(r, false);
}

function text(t) {
  switch (t.k) {
    case "fsb": return `fixed_size_binary<${t.n}>`;
    case "time32": case "time64": return `${t.k}<${t.unit}>`;
    case "timestamp":
      if (t.tz) return `timestamp<${t.unit}, ${t.tz}>`;
      return t.bare && t.unit === "us" ? "timestamp" : `timestamp<${t.unit}>`;
    case "decimal": return `decimal128<${t.p}, ${t.s}>`;
    case "fsl": return `fixed_size_list<${text(t.item)}, ${t.dim}>`;
    case "list": case "large_list": return `${t.k}<${text(t.item)}${t.itemNotNull ? " not null" : ""}>`;
    case "struct": return `struct<${t.children.map((c) => `${c.name}: ${text(c.t)}${c.nullable ? "" : " not null"}`).join(", ")}>`;
    default: return t.alias ?? t.k;
  }
}

// The same type in types_lib's canonical spelling (for lib.jsonValue).
function canon(t) {
  return t.k === "timestamp" ? (t.tz ? `timestamp<${t.unit}, ${t.tz}>` : `timestamp<${t.unit}>`) : t.alias ? t.k : text(t);
}

function arrowType(t) {
  const F = (n, x, nullable = true) => new A.Field(n, x, nullable);
  const tsUnit = { s: A.TimeUnit.SECOND, ms: A.TimeUnit.MILLISECOND, us: A.TimeUnit.MICROSECOND, ns: A.TimeUnit.NANOSECOND };
  switch (t.k) {
    case "int8": return new A.Int8();
    case "int16": return new A.Int16();
    case "int32": return new A.Int32();
    case "int64": return new A.Int64();
    case "uint8": return new A.Uint8();
    case "uint16": return new A.Uint16();
    case "uint32": return new A.Uint32();
    case "uint64": return new A.Uint64();
    case "float16": return new A.Float16();
    case "float": return new A.Float32();
    case "double": return new A.Float64();
    case "bool": return new A.Bool();
    case "string": return new A.Utf8();
    case "large_string": return new A.LargeUtf8();
    case "binary": return new A.Binary();
    case "large_binary": return new A.LargeBinary();
    case "fsb": return new A.FixedSizeBinary(t.n);
    case "date32": return new A.DateDay();
    case "date64": return new A.DateMillisecond();
    case "time32": case "time64": return new A.Time(tsUnit[t.unit], t.k === "time32" ? 32 : 64);
    case "timestamp": return new A.Timestamp(tsUnit[t.unit], t.tz ?? undefined);
    case "decimal": return new A.Decimal(t.s, t.p, 128);
    case "fsl": return new A.FixedSizeList(t.dim, F("item", arrowType(t.item)));
    case "list": return new A.List(F("item", arrowType(t.item), !t.itemNotNull));
    case "large_list": return new A.LargeList(F("item", arrowType(t.item), !t.itemNotNull));
    case "struct": return new A.Struct(t.children.map((c) => F(c.name, arrowType(c.t), c.nullable)));
    default: throw new Error(`arrowType: ${t.k}`);
  }
}

const isList = (t) => t.k === "list" || t.k === "large_list";
const isVar = (t) => ["string", "large_string", "binary", "large_binary"].includes(t.k);

// ------------------------------------------------------------------ patterns

// One phase's shape of one column path: nulls, list lengths, value lengths.
function drawPattern(r, t, top) {
  const nulls = r.wpick([[25, "none"], [20, "all"], [15, "one"], [25, "mixed"], [5, "mostly"]]);
  const p = nulls === "mixed" ? r.f() : nulls === "mostly" ? 0.97 : 0;
  const lens = isList(t) ? r.wpick([[20, "empty"], [12, "single"], [12, "oneitem"], [40, "short"], [8, "long"]]) : null;
  const vlen = isVar(t) ? r.wpick([[15, "empty"], [50, "short"], [25, "mixed"], [top ? 6 : 2, "wide"]]) : null;
  const edge = r.wpick([[2, 0], [2, 0.3], [1, 1]]); // share of values taken from the type's edges
  return { nulls, p, lens, vlen, edge, left: 1, oneRow: -1 };
}

// ------------------------------------------------------------------ values

const CHARS = [..."abcdefghijklmnopqrstuvwxyz0123456789 ABC_-./", "\u00e9", "\u00df", "\u4e2d", "\u6587",
  "\u{1F600}", "\u{1D11E}", "\"", "\\", "\n", "\t", "\r", "\u0000", "\u0001", "\u001f", "\u007f",
  "\u2028", "\u00a0", "{", "}", "[", ",", ":", "\ufeff"];

function strLen(r, pat) {
  switch (pat.vlen) {
    case "empty": return 0;
    case "short": return r.int(0, 12);
    case "wide": return r.int(500, 4000);
    default: return r.logInt(1, 300) - 1;
  }
}

function half(bits) {
  const sign = bits & 0x8000 ? -1 : 1, exp = (bits >> 10) & 0x1f, frac = bits & 0x3ff;
  return sign * (exp === 0 ? frac * 2 ** -24 : (1024 + frac) * 2 ** (exp - 25));
}

function floatBits(r, width) {
  const dv = new DataView(new ArrayBuffer(8));
  for (;;) {
    if (width === 32) {
      dv.setUint32(0, r.u32());
      const v = dv.getFloat32(0);
      if (Number.isFinite(v)) return v;
    } else {
      dv.setUint32(0, r.u32());
      dv.setUint32(4, r.u32());
      const v = dv.getFloat64(0);
      if (Number.isFinite(v)) return v;
    }
  }
}

function leafValue(r, t, pat) {
  const edge = r.chance(pat.edge);
  const big = (x) => BigInt.asIntN(64, BigInt(x)).toString();
  if (INTS[t.k]) {
    const [lo, hi] = INTS[t.k];
    const small = BigInt(r.int(lo < 0n ? -1000 : 0, 1000));
    const v = edge ? r.pick([lo, hi, 0n, lo < 0n ? -1n : 1n, hi - 1n]) : r.chance(0.5) ? r.bigIn(lo, hi) : small > hi ? hi : small < lo ? lo : small;
    return t.k === "int64" || t.k === "uint64" ? v.toString() : Number(v);
  }
  switch (t.k) {
    case "float16": {
      if (edge) return r.pick([0, 65504, -65504, 2 ** -24, -(2 ** -24), 2 ** -14, 1, -1, 0.333251953125]);
      for (;;) {
        const bits = r.int(0, 0xffff);
        if (((bits >> 10) & 0x1f) !== 0x1f) return half(bits);
      }
    }
    case "float":
      if (edge) return r.pick([0, 3.4028234663852886e38, -3.4028234663852886e38, 1.401298464324817e-45, 1.1754943508222875e-38, Math.fround(0.1)]);
      return r.chance(0.5) ? floatBits(r, 32) : Math.fround(r.int(-100000, 100000) / 64);
    case "double":
      if (edge) return r.pick([0, Number.MAX_VALUE, -Number.MAX_VALUE, 5e-324, 2.2250738585072014e-308, 0.1, 1e21, 9007199254740993]);
      return r.chance(0.5) ? floatBits(r, 64) : r.int(-1000000, 1000000) / 1024;
    case "bool": return r.chance(0.5);
    case "string": case "large_string": {
      const n = strLen(r, pat);
      let s = "";
      for (let i = 0; i < n; i++) s += r.chance(0.8) ? CHARS[r.int(0, 43)] : r.pick(CHARS);
      return s;
    }
    case "binary": case "large_binary": {
      const n = strLen(r, pat);
      return Array.from({ length: n }, () => r.int(0, 255));
    }
    case "fsb": return Array.from({ length: t.n }, () => (edge ? r.pick([0, 255]) : r.int(0, 255)));
    case "date32": {
      const lo = MIN_S / 86400n, hi = MAX_S / 86400n;
      return (edge ? r.pick([lo, hi, 0n, -1n]) : r.bigIn(lo, hi)).toString();
    }
    case "date64": {
      const lo = MIN_S / 86400n, hi = MAX_S / 86400n;
      return ((edge ? r.pick([lo, hi, 0n, -1n]) : r.bigIn(lo, hi)) * 86400000n).toString();
    }
    case "time32": case "time64": {
      const n = 86400n * UNIT_PER_S[t.unit];
      return (edge ? r.pick([0n, n - 1n, 1n]) : r.bigIn(0n, n - 1n)).toString();
    }
    case "timestamp": {
      const u = UNIT_PER_S[t.unit];
      let lo = MIN_S * u, hi = MAX_S * u;
      if (t.unit === "ns") { lo = -(2n ** 63n) + 86400n * u; hi = 2n ** 63n - 1n - 86400n * u; }
      return big(edge ? r.pick([lo, hi, 0n, -1n, 1n]) : r.bigIn(lo, hi));
    }
    case "decimal": {
      const max = 10n ** BigInt(t.p) - 1n;
      const v = edge ? r.pick([max, -max, 0n, 1n, -1n]) : r.chance(0.5) ? r.bigIn(-max, max) : BigInt(r.int(-999, 999)) % (max + 1n);
      return v.toString();
    }
    default: throw new Error(`leafValue: ${t.k}`);
  }
}

// A value of type t at column path `p` (its pattern in pats), or null.
// `row` is the row's index in the phase (the top level's "one" target).
function value(r, t, nullable, p, pats, row) {
  const pat = pats.get(p);
  if (nullable) {
    let isNull;
    switch (pat.nulls) {
      case "none": isNull = false; break;
      case "all": isNull = true; break;
      case "one":
        isNull = !(pat.left > 0 && (pat.oneRow < 0 || pat.oneRow === row));
        if (!isNull) pat.left--;
        break;
      default: isNull = r.chance(pat.p);
    }
    if (isNull) return null;
  }
  switch (t.k) {
    case "fsl": return Array.from({ length: t.dim }, () => leafValue(r, t.item, pat));
    case "list": case "large_list": {
      let n;
      switch (pat.lens) {
        case "empty": n = 0; break;
        case "single": n = 1; break;
        case "oneitem": n = pat.itemLeft-- > 0 ? 1 : 0; break;
        case "long": n = r.int(0, 60); break;
        default: n = r.int(0, 4);
      }
      const out = [];
      for (let i = 0; i < n; i++) out.push(value(r, t.item, !t.itemNotNull, p + "[]", pats, row));
      return out;
    }
    case "struct": {
      const o = {};
      for (const c of t.children) o[c.name] = value(r, c.t, c.nullable, `${p}.${c.name}`, pats, row);
      return o;
    }
    default: return leafValue(r, t, pat);
  }
}

function eachPath(t, p, fn) {
  fn(p, t);
  if (isList(t)) eachPath(t.item, p + "[]", fn);
  if (t.k === "struct") for (const c of t.children) eachPath(c.t, `${p}.${c.name}`, fn);
}

// ------------------------------------------------------------------ JSON

// The JSON value memwald is sent for exact value v of type t (k varies the
// spelling); {__raw} = a bare number (lib.toJson).
function jsonOf(r, t, v, k) {
  if (v === null) return null;
  switch (t.k) {
    case "fsl": return v.map((x) => ({ __raw: typeof x === "string" ? x : numText(x) }));
    case "list": case "large_list": return v.map((x, i) => jsonOf(r, t.item, x, k + i));
    case "struct": {
      const o = {};
      const order = r.chance(0.3) ? [...t.children].reverse() : t.children;
      for (const c of order) {
        if (v[c.name] === null && c.nullable && r.chance(0.5)) continue; // left out = null
        o[c.name] = jsonOf(r, c.t, v[c.name], k);
      }
      return o;
    }
    case "float16": case "float": case "double": return { __raw: numText(v) };
    case "int8": case "int16": case "int32": case "uint8": case "uint16": case "uint32":
      return r.chance(0.1) ? String(v) : v;
    default: return lib.jsonValue(canon(t), v, k);
  }
}

// JSON text of a number; -0 as "-0" (JSON.stringify says "0")
function numText(x) { return Object.is(x, -0) ? "-0" : JSON.stringify(x); }

// ------------------------------------------------------------------ a case

function rowCount(r, long) {
  return r.wpick([[28, r.int(1, 5)], [27, r.int(6, 300)], [25, r.int(300, 3000)], [12, r.int(3000, 12000)],
    [long ? 8 : 5, r.int(12000, 40000)]]);
}

function makeCase(seed, opts = {}) {
  const r = new Rng(seed);
  let nameNo = 0;
  const names = () => r.pick(["m", "x", "val", "Tag", "n_"]) + nameNo++;
  const pkType = r.wpick([[6, "int64"], [2, "int32"], [2, "string"]]);
  const ncols = r.wpick([[3, r.int(1, 2)], [4, r.int(3, 5)], [2, r.int(6, 8)]]);
  const cols = [];
  for (let i = 0; i < ncols; i++) cols.push({ name: `c${i}_${names()}`, t: randType(r, MAX_DEPTH, names), nullable: true });
  const notNull = r.chance(0.1); // one not-null column: no deletes then (MemWAL's rule)
  if (notNull) cols[r.int(0, ncols - 1)].nullable = false;
  const spec = r.chance(0.2) && pkType !== "string" ? `bucket(id, ${r.int(2, 4)})` : r.chance(0.1) && pkType === "string" ? "bucket(id, 3)" : "unsharded";
  const c = {
    seed, pkType, cols, spec, deletes: !notNull,
    sstable_zstd: r.chance(0.5), compaction_zstd: r.chance(0.6),
    schema: [`id:${pkType} not null`, ...cols.map((x) => `${x.name}:${text(x.t)}${x.nullable ? "" : " not null"}`)].join(", "),
  };
  // the rows: weighted small, wide schemas fewer rows
  let n1 = rowCount(r, opts.long);
  const weight = cols.reduce((s, x) => s + (x.t.k === "struct" || isList(x.t) ? 3 : 1), 0);
  if (weight > 8 && n1 > 6000) n1 = r.int(1000, 6000);
  c.sizes = [n1];
  c.r = r;
  c.names = cols.map((x) => x.name);
  return c;
}

function keyOf(c, i) {
  const r = c.r;
  if (c.pkType === "string") return `k${(i * 7919 + (c.seed % 1000)).toString(36)}${r.chance(0.05) ? "\u00e9" : ""}`;
  const span = c.pkType === "int32" ? 2000000000 : Number.MAX_SAFE_INTEGER;
  // mostly a dense range (keys near each other), sometimes anywhere
  if (r.chance(0.9)) return String(i - 50);
  return c.pkType === "int32" ? String(r.int(-span, span)) : r.bigIn(-(2n ** 63n), 2n ** 63n - 1n).toString();
}

// The three phases' ops: [{op: "put", key, row} | {op: "del", key}].
function phases(c) {
  const r = c.r;
  const used = new Set(), live = new Set();
  let next = 0;
  const fresh = () => {
    for (;;) {
      const k = keyOf(c, next++);
      if (!used.has(k)) { used.add(k); return k; }
    }
  };
  const out = [];
  for (let ph = 0; ph < 3; ph++) {
    const ops = [];
    if (ph === 0) {
      for (let i = 0; i < c.sizes[0]; i++) ops.push({ op: "put", key: fresh() });
    } else {
      const liveArr = [...live];
      const share = r.wpick([[2, 0], [3, r.f() * 0.3], [2, r.f()], [1, 1]]);
      const nUpd = Math.round(liveArr.length * share * (ph === 2 ? 0.5 : 1));
      for (let i = 0; i < nUpd; i++) ops.push({ op: "put", key: liveArr[r.int(0, liveArr.length - 1)] });
      const nNew = r.wpick([[2, 0], [3, r.int(1, 20)], [2, r.int(1, Math.max(1, Math.floor(c.sizes[0] / 2)))]]);
      for (let i = 0; i < nNew; i++) ops.push({ op: "put", key: fresh() });
      if (c.deletes) {
        const dshare = r.wpick([[2, 0], [3, r.f() * 0.2], [1, r.f()], [1, 1]]);
        const nDel = Math.round(liveArr.length * dshare);
        for (let i = 0; i < nDel; i++) ops.push({ op: "del", key: liveArr[r.int(0, liveArr.length - 1)] });
        for (let i = r.int(0, 2); i > 0; i--) ops.push({ op: "del", key: fresh() }); // never written
      }
      // shuffle
      for (let i = ops.length - 1; i > 0; i--) {
        const j = r.int(0, i);
        [ops[i], ops[j]] = [ops[j], ops[i]];
      }
    }
    // a few keys touched twice in the phase: the later request wins
    const twice = ops.length ? r.wpick([[3, 0], [2, r.int(1, 5)]]) : 0;
    for (let i = 0; i < twice; i++) {
      const k = ops[r.int(0, ops.length - 1)].key;
      ops.push({ op: c.deletes && r.chance(0.4) ? "del" : "put", key: k });
    }
    if (ops.length === 0) ops.push({ op: "put", key: fresh() }); // a phase writes something
    for (const o of ops) {
      if (o.op === "put") live.add(o.key);
      else live.delete(o.key);
    }
    out.push(ops);
  }
  return out;
}

// Values for every put of a phase, drawn with the phase's patterns.
function fillPhase(c, ops) {
  const r = c.r;
  const pats = new Map();
  const puts = ops.filter((o) => o.op === "put");
  for (const col of c.cols) {
    eachPath(col.t, col.name, (p, t) => pats.set(p, drawPattern(r, t, p === col.name)));
    const top = pats.get(col.name);
    if (top.nulls === "one") top.oneRow = r.int(0, Math.max(0, puts.length - 1));
    for (const pat of pats.values()) pat.itemLeft = 1;
  }
  puts.forEach((o, i) => {
    o.row = {};
    for (const col of c.cols) o.row[col.name] = value(r, col.t, col.nullable, col.name, pats, i);
  });
  const shapes = {};
  for (const [p, pat] of pats) shapes[p] = [pat.nulls, pat.lens, pat.vlen].filter(Boolean).join("/");
  return shapes;
}

const keyJson = (c, k) => (c.pkType === "string" ? JSON.stringify(k) : c.r.chance(0.2) ? JSON.stringify(k) : k);

function requestLine(c, o, n) {
  if (o.op === "del") return `DEL {"id":${keyJson(c, o.key)}}`;
  const parts = [`"id":${keyJson(c, o.key)}`];
  for (const col of c.cols) {
    const v = o.row[col.name];
    if (v === null && c.r.chance(0.3)) continue; // a column left out is null
    parts.push(`${JSON.stringify(col.name)}:${lib.toJson(jsonOf(c.r, col.t, v, n))}`);
  }
  if (c.r.chance(0.3)) parts.reverse();
  return `{${parts.join(",")}}`;
}

const exactOf = (c, key, row) => {
  const o = { id: c.pkType === "int32" ? Number(key) : key };
  for (const col of c.cols) o[col.name] = row[col.name];
  return JSON.stringify(o);
};

function cmpKey(c) {
  if (c.pkType === "string") return (a, b) => (a < b ? -1 : a > b ? 1 : 0);
  return (a, b) => { const x = BigInt(a), y = BigInt(b); return x < y ? -1 : x > y ? 1 : 0; };
}

// ------------------------------------------------------------------ prepare

function ipcOf(c, rows) {
  const fields = [new A.Field("id", c.pkType === "string" ? new A.Utf8() : c.pkType === "int32" ? new A.Int32() : new A.Int64(), false),
    ...c.cols.map((x) => new A.Field(x.name, arrowType(x.t), x.nullable))];
  const objs = rows.map(([k, row]) => ({ id: c.pkType === "int32" ? Number(k) : k, ...row }));
  return Buffer.from(A.tableToIPC(lib.buildTable(A, fields, objs), "file"));
}

function sqlKeys(c, keys) {
  return keys.map((k) => (c.pkType === "string" ? `'${k.replace(/'/g, "''")}'` : k)).join(",");
}

function typesOf(schema) {
  return schema.fields.map((f) => `${f.name}:${f.type}${f.nullable ? "" : " not null"}`);
}

async function readTable(lancedb, tableDir, names, cmp) {
  const db = await lancedb.connect(path.dirname(path.resolve(tableDir)));
  const t = await db.openTable(path.basename(tableDir, ".lance"));
  try {
    const it = await t.query().nativeExecute();
    const rows = [];
    let types = null;
    for (let buf = await it.next(); buf; buf = await it.next()) {
      for (const b of A.tableFromIPC(buf).batches) {
        types ??= typesOf(b.schema);
        const got = b.schema.fields.map((f) => f.name).join(",");
        if (got !== names.join(",")) throw new Error(`LanceDB returned columns ${got}, the table has ${names.join(",")}`);
        for (let i = 0; i < b.numRows; i++) rows.push(exactLine(b, names, i));
      }
    }
    const keyed = rows.map((l) => [JSON.parse(l).id, l]);
    keyed.sort((a, b) => cmp(String(a[0]), String(b[0])));
    return { lines: keyed.map((x) => x[1]), types };
  } finally {
    t.close();
  }
}

function writeLines(file, lines) {
  fs.writeFileSync(file, lines.join("\n") + (lines.length ? "\n" : ""));
}

async function prepare(dir, seeds, long) {
  const lancedb = require("@lancedb/lancedb");
  for (const seed of seeds) {
    const cdir = path.join(dir, `s${seed}`);
    fs.mkdirSync(cdir, { recursive: true });
    try {
      await prepareOne(lancedb, cdir, seed, long);
    } catch (e) { // the generator's own fault: that case reports it
      fs.writeFileSync(path.join(cdir, "case.error"), String(e.stack ?? e));
    }
  }
}

async function prepareOne(lancedb, cdir, seed, long) {
  const c = makeCase(seed, { long });
  const ph = phases(c);
  const shapes = ph.map((ops) => fillPhase(c, ops));
  const state = new Map();
  const cmp = cmpKey(c);
  let n = 0;
  ph.forEach((ops, i) => {
    const lines = ops.map((o) => requestLine(c, o, n++));
    fs.writeFileSync(path.join(cdir, `p${i + 1}.req`), lines.join("\n") + "\n");
    for (const o of ops) if (o.op === "put") state.set(o.key, o.row); else state.delete(o.key);
    const keys = [...state.keys()].sort(cmp);
    writeLines(path.join(cdir, `m${i + 1}.jsonl`), keys.map((k) => exactOf(c, k, state.get(k))));
  });
  const info = {
    seed, schema: c.schema, columns: c.cols.length, pk: c.pkType, spec: c.spec, sstable_zstd: c.sstable_zstd, compaction_zstd: c.compaction_zstd,
    deletes: c.deletes, requests: ph.map((o) => o.length), live: [], shapes,
  };
  // LanceDB's own writer: the net effect of each phase (the later request
  // of a key wins), as createTable / mergeInsert / delete
  const names = ["id", ...c.names];
  try {
    const db = await lancedb.connect(path.join(cdir, "ref"));
    let nt = null;
    for (let i = 0; i < 3; i++) {
      const last = new Map();
      for (const o of ph[i]) last.set(o.key, o);
      const puts = [...last.values()].filter((o) => o.op === "put").map((o) => [o.key, o.row]);
      const dels = [...last.values()].filter((o) => o.op === "del").map((o) => o.key);
      if (i === 0) {
        nt = await db.inner.createTable("r", ipcOf(c, puts), "overwrite", [], {});
        if (dels.length) await nt.delete(`id IN (${sqlKeys(c, dels)})`);
      } else {
        for (let j = 0; j < dels.length; j += 5000) await nt.delete(`id IN (${sqlKeys(c, dels.slice(j, j + 5000))})`);
        if (puts.length) await nt.mergeInsert(["id"]).whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(ipcOf(c, puts));
      }
      const got = await readTable(lancedb, path.join(cdir, "ref", "r.lance"), names, cmp);
      writeLines(path.join(cdir, `r${i + 1}.jsonl`), got.lines);
      if (i === 0) fs.writeFileSync(path.join(cdir, "rtypes.json"), JSON.stringify(got.types ?? []));
      info.live.push(got.lines.length);
    }
  } catch (e) {
    fs.writeFileSync(path.join(cdir, "ref.error"), String(e.stack ?? e));
  }
  fs.writeFileSync(path.join(cdir, "case.json"), JSON.stringify(info, null, 1));
}

async function read(dir, stage, seeds) {
  const lancedb = require("@lancedb/lancedb");
  for (const seed of seeds) {
    const cdir = path.join(dir, `s${seed}`);
    const info = JSON.parse(fs.readFileSync(path.join(cdir, "case.json"), "utf8"));
    const cols = lib.structMembers(`struct<${info.schema}>`).map(([n]) => n);
    const cmp = cmpKey({ pkType: info.pk });
    try {
      const got = await readTable(lancedb, path.join(cdir, "mw", "t.lance"), cols, cmp);
      writeLines(path.join(cdir, `${stage}.jsonl`), got.lines);
      fs.writeFileSync(path.join(cdir, `${stage}.types.json`), JSON.stringify(got.types ?? []));
    } catch (e) {
      fs.writeFileSync(path.join(cdir, `${stage}.error`), String(e.message ?? e));
    }
  }
}

// One command line ("prepare DIR SEED..." or "read DIR STAGE SEED...") at a
// time from standard input, each answered by one line, {"ok":true} or
// {"ok":false,"error":...}: node and LanceDB start once per run.
async function serve(long) {
  const readline = await import("node:readline");
  for await (const line of readline.createInterface({ input: process.stdin })) {
    const [c, ...a] = line.trim().split(/\s+/);
    try {
      if (c === "prepare") await prepare(a[0], a.slice(1).map(Number), long);
      else if (c === "read") await read(a[0], a[1], a.slice(2).map(Number));
      else throw new Error(`unknown command ${c}`);
      process.stdout.write(JSON.stringify({ ok: true }) + "\n");
    } catch (e) {
      process.stdout.write(JSON.stringify({ ok: false, error: String(e.stack ?? e) }) + "\n");
    }
  }
}

const [cmd, ...rest] = process.argv.slice(2);
const long = process.env.MW_GENDIFF_LONG === "1";
if (cmd === "prepare" && rest.length >= 2) await prepare(rest[0], rest.slice(1).map(Number), long);
else if (cmd === "read" && rest.length >= 3) await read(rest[0], rest[1], rest.slice(2).map(Number));
else if (cmd === "serve" && rest.length === 0) await serve(long);
else if (cmd === "show" && rest.length === 1) {
  const c = makeCase(Number(rest[0]), { long });
  const ph = phases(c);
  console.log(JSON.stringify({ schema: c.schema, spec: c.spec, requests: ph.map((o) => o.length) }));
} else {
  console.error("usage: gendiff.mjs prepare DIR SEED... | read DIR STAGE SEED... | serve | show SEED");
  process.exit(2);
}
