// types_lib.mjs — the column types memwald supports, as one catalogue shared
// by the LanceDB-side scripts (make-table.mjs, the type fixtures generator,
// the acceptance test): Arrow fields, the memwald config schema text of the
// same table, deterministic rows in the exact format of exact.mjs, an Arrow
// table builder that takes those rows bit for bit, and their JSON lines for
// memwald's line protocol.
//
// Rows are plain objects whose values are already "exact" (exact.mjs):
// 64-bit integers, temporal values and decimals as decimal strings of the raw
// integer, binaries as byte arrays, lists as arrays, structs as objects. So
// the expected read-back of a row is JSON.stringify of it in field order.
//
// large_list columns come only with opts.large: apache-arrow 18.1.0 (pinned
// by LanceDB 0.39.0) has no LargeList type, so the node client can neither
// write nor read such a column (its own error: `Unrecognized type:
// "LargeList" (21)`). The acceptance test (tests/e2e/test_daemon_types.py) has
// LanceDB add them with `arrow_cast(..., 'LargeList(...)')`, decodes
// LanceDB's own result batches (nativeExecute) with apache-arrow 21, which
// has LargeList, and writes its frames with it too.

// One entry per column: name, arrow type maker, memwald type text, and the
// value of row k (null where the row has none).
export function catalogue(arrow, opts = {}) {
  const F = (n, t, nullable = true) => new arrow.Field(n, t, nullable);
  const nested = opts.nested !== false;
  const big = (x) => BigInt.asIntN(64, BigInt(x)).toString();
  const cols = [
    ["i8", () => new arrow.Int8(), "int8", (k) => (k % 7 === 3 ? null : ((k * 37) % 256) - 128)],
    ["i16", () => new arrow.Int16(), "int16", (k) => (k % 5 === 2 ? null : ((k * 7919) % 65536) - 32768)],
    ["u8", () => new arrow.Uint8(), "uint8", (k) => (k * 13) % 256],
    ["u16", () => new arrow.Uint16(), "uint16 not null", (k) => (k * 2741) % 65536, false],
    ["f16", () => new arrow.Float16(), "float16", (k) => (k % 6 === 1 ? null : ((k % 64) - 20) / 8)],
    ["ts_s", () => new arrow.TimestampSecond(), "timestamp<s>", (k) => (k % 4 === 0 ? null : big(1700000000 + k * 86399))],
    ["ts_ms", () => new arrow.TimestampMillisecond(), "timestamp<ms>", (k) => big(1700000000000 + k * 1234567)],
    ["ts_us", () => new arrow.TimestampMicrosecond(), "timestamp<us>", (k) => big(1700000000000000n + BigInt(k) * 1000003n)],
    ["ts_ns", () => new arrow.TimestampNanosecond(), "timestamp<ns>", (k) => (k % 9 === 5 ? null : big(1700000000000000000n + BigInt(k) * 123456789011n))],
    ["ts_utc", () => new arrow.TimestampMicrosecond("UTC"), "timestamp<us, UTC>", (k) => big(-86400000000n * BigInt(k) + 17n)],
    ["ts_tz", () => new arrow.TimestampMillisecond("Asia/Kolkata"), "timestamp<ms, Asia/Kolkata>", (k) => big(1600000000000 + k)],
    ["d32", () => new arrow.DateDay(), "date32", (k) => (k % 8 === 7 ? null : String(19000 + k * 37 - 400))],
    ["d64", () => new arrow.DateMillisecond(), "date64", (k) => big((18000 + k) * 86400000)],
    ["t32", () => new arrow.TimeMillisecond(), "time32<ms>", (k) => String((k * 3600007) % 86400000)],
    ["t32s", () => new arrow.TimeSecond(), "time32<s>", (k) => String((k * 3607) % 86400)],
    ["t64", () => new arrow.TimeMicrosecond(), "time64<us>", (k) => (k % 3 === 0 ? null : big((BigInt(k) * 3600000007n) % 86400000000n))],
    ["t64n", () => new arrow.TimeNanosecond(), "time64<ns>", (k) => big((BigInt(k) * 3600000000007n) % 86400000000000n)],
    ["dec", () => new arrow.Decimal(2, 10, 128), "decimal128<10, 2>", (k) => (k % 5 === 4 ? null : big(BigInt(k) * 12345n - 99999n))],
    ["dec38", () => new arrow.Decimal(6, 38, 128), "decimal128<38, 6>", (k) => (BigInt(k) * 10n ** 30n + 7n).toString()],
    ["ls", () => new arrow.LargeUtf8(), "large_string", (k) => (k % 6 === 0 ? null : `large_${k}_\u00e9\u4e2d`)],
    ["lb", () => new arrow.LargeBinary(), "large_binary", (k) => Array.from({ length: k % 5 }, (_, i) => (k * 17 + i) & 255)],
    ["fsb", () => new arrow.FixedSizeBinary(4), "fixed_size_binary<4>", (k) => (k % 7 === 0 ? null : [1, 2, k & 255, (k >> 8) & 255])],
    ["fsb16", () => new arrow.FixedSizeBinary(16), "fixed_size_binary<16>", (k) => Array.from({ length: 16 }, (_, i) => (k * 31 + i * 7) & 255)],
    ["v16", () => new arrow.FixedSizeList(4, F("item", new arrow.Float16())), "fixed_size_list<float16, 4>",
      (k) => (k % 5 === 0 ? null : [k % 32, 0.5, -1.25, (k % 8) / 4])],
    ["v64", () => new arrow.FixedSizeList(3, F("item", new arrow.Float64())), "fixed_size_list<float64, 3>",
      (k) => [k, k / 3, -k * 1e10]],
    ["vi8", () => new arrow.FixedSizeList(8, F("item", new arrow.Int8())), "fixed_size_list<int8, 8>",
      (k) => (k % 4 === 1 ? null : Array.from({ length: 8 }, (_, i) => ((k + i * 29) % 256) - 128))],
    ["vu8", () => new arrow.FixedSizeList(16, F("item", new arrow.Uint8())), "fixed_size_list<uint8, 16>",
      (k) => Array.from({ length: 16 }, (_, i) => (k * 3 + i) & 255)],
  ];
  if (nested) {
    cols.push(
      ["li", () => new arrow.List(F("item", new arrow.Int32())), "list<int32>",
        (k) => (k % 5 === 0 ? null : k % 5 === 1 ? [] : [k, -k, k % 3 === 0 ? null : k * 1000])],
      ["ls_str", () => new arrow.List(F("item", new arrow.Utf8())), "list<string>",
        (k) => (k % 4 === 0 ? null : [`a${k}`, null, "", "\u00fc"].slice(0, 1 + (k % 4)))],
      ["l_ts", () => new arrow.List(F("item", new arrow.TimestampMillisecond())), "list<timestamp<ms>>",
        (k) => (k % 3 === 0 ? [] : [big(1700000000000 + k), null])],
      ["l_dec", () => new arrow.List(F("item", new arrow.Decimal(1, 9, 128))), "list<decimal128<9, 1>>",
        (k) => (k % 2 ? null : [big(k * 11), big(-k)])],
      ["l_fsl", () => new arrow.List(F("item", new arrow.FixedSizeList(2, F("item", new arrow.Float16())))),
        "list<fixed_size_list<float16, 2>>", (k) => (k % 4 === 3 ? null : [[k % 16, -0.5], null].slice(0, 1 + (k % 2)))],
      ["st", () => new arrow.Struct([F("a", new arrow.Int32()), F("b", new arrow.Utf8()),
        F("inner", new arrow.Struct([F("x", new arrow.Float64()), F("when", new arrow.TimestampMicrosecond("UTC")),
          F("tags", new arrow.List(F("item", new arrow.Utf8())))]))]),
      "struct<a: int32, b: string, inner: struct<x: double, when: timestamp<us, UTC>, tags: list<string>>>",
      (k) => (k % 9 === 0 ? null : {
        a: k % 2 ? null : k,
        b: `s${k}`,
        inner: k % 3 === 0 ? null : { x: k * 1.5, when: k % 4 === 0 ? null : big(1700000000000000n + BigInt(k)), tags: k % 5 === 0 ? null : [`t${k}`] },
      })],
      ["l_st", () => new arrow.List(F("item", new arrow.Struct([F("k", new arrow.Utf8()), F("v", new arrow.Int64())]))),
        "list<struct<k: string, v: int64>>",
        (k) => (k % 6 === 0 ? null : Array.from({ length: k % 3 }, (_, i) => (i === 1 && k % 2 ? null : { k: `k${i}`, v: big(k * 10 + i) })))],
      // a not-null struct of a not-null member inside a struct that is
      // null in some rows (gendiff seed 2035979854: the layers below it
      // must be nullable, docs/sstable.md)
      ["st_nn", () => new arrow.Struct([F("a", new arrow.Int32()),
        F("x2", new arrow.Struct([F("n", new arrow.Uint64(), false), F("m", new arrow.Int32())]), false)]),
      "struct<a: int32, x2: struct<n: uint64 not null, m: int32> not null>",
        (k) => (k % 4 === 1 ? null : { a: k, x2: { n: big(100 + k), m: k % 2 ? null : k } })],
    );
  }
  if (opts.large) {
    // a plain string column (dictionary-encoded frames, objects stored as
    // their JSON text) and large lists of int64 and of strings
    cols.push(
      ["s", () => new arrow.Utf8(), "string", (k) => (k % 7 === 6 ? null : k % 5 === 3 ? `{"k":${k},"tags":["a",null],"ok":true}` : `s${k}`)],
      ["ll", () => new arrow.LargeList(F("item", new arrow.Int64())), "large_list<int64>",
        (k) => (k % 6 === 5 ? null : k % 6 === 4 ? [] : [big(k), k % 2 ? null : big(-k * 1000000007), big(2n ** 62n + BigInt(k))])],
      ["ll_s", () => new arrow.LargeList(F("item", new arrow.Utf8())), "large_list<string>",
        (k) => (k % 5 === 1 ? null : [`x${k}`, null, "\u00e9"].slice(0, k % 4))],
    );
  }
  return cols.map(([name, type, text, value, nullable]) => ({ name, type, text, value, nullable: nullable ?? true }));
}

// Columns whose pages carry no items or no values (issue 26): lists all
// null, all empty and both, lists of structs and structs of lists without
// items, a struct all null, a fixed_size_list all null, strings and binaries
// all empty, every flat type all null; and the issue's own table (`tags`
// left out, `meta` and the vector present). `few` rows from key `few_from`
// on carry items, so a long run mixes pages with items and pages of levels
// only. No bool column: apache-arrow 18 writes an all-null bool array
// without its value buffer, which LanceDB refuses before it writes.
export function edgeCatalogue(arrow, opts = {}) {
  const F = (n, t, nullable = true) => new arrow.Field(n, t, nullable);
  const big = (x) => BigInt.asIntN(64, BigInt(x)).toString();
  const few = (k) => k >= (opts.fewFrom ?? 0) && k < (opts.fewFrom ?? 0) + (opts.few ?? 0);
  const L = (t) => new arrow.List(F("item", t));
  const cols = [
    ["ts", () => new arrow.TimestampMicrosecond("UTC"), "timestamp<us, UTC>", (k) => big(1700000000000000n + BigInt(k))],
    ["d", () => new arrow.DateDay(), "date32", (k) => String(19000 + k)],
    ["i16", () => new arrow.Int16(), "int16", (k) => (k % 7) - 3],
    ["u8", () => new arrow.Uint8(), "uint8", (k) => k & 255],
    ["tags", () => L(new arrow.Utf8()), "list<string>", (k) => (few(k) ? [`t${k}`] : null)],
    ["meta", () => new arrow.Struct([F("n", new arrow.Int32()), F("s", new arrow.Utf8())]), "struct<n: int32, s: string>",
      (k) => ({ n: k, s: `m${k}` })],
    ["vec", () => new arrow.FixedSizeList(4, F("item", new arrow.Float16())), "fixed_size_list<float16, 4>", (k) => [k % 8, 0.5, -1, 2]],
    ["l_empty", () => L(new arrow.Utf8()), "list<string>", (k) => (few(k) ? ["x", ""] : [])],
    ["l_mix", () => L(new arrow.Int32()), "list<int32>", (k) => (few(k) ? [k] : k % 3 === 0 ? null : [])],
    ["l_st", () => L(new arrow.Struct([F("k", new arrow.Utf8()), F("v", new arrow.Int64())])), "list<struct<k: string, v: int64>>",
      (k) => (few(k) ? [{ k: "a", v: big(k) }, null] : k % 2 ? [] : null)],
    ["st_l", () => new arrow.Struct([F("a", new arrow.Int32()), F("t", L(new arrow.Utf8()))]), "struct<a: int32, t: list<string>>",
      (k) => (k % 5 === 4 ? null : { a: k % 2 ? null : k, t: few(k) ? ["y"] : k % 3 ? [] : null })],
    ["st_null", () => new arrow.Struct([F("a", new arrow.Int32()), F("b", new arrow.Utf8())]), "struct<a: int32, b: string>",
      (k) => (few(k) ? { a: k, b: "b" } : null)],
    ["l_l", () => L(L(new arrow.Int32())), "list<list<int32>>", (k) => (few(k) ? [[k], []] : k % 3 === 0 ? null : k % 3 === 1 ? [] : [[], null])],
    ["v_null", () => new arrow.FixedSizeList(4, F("item", new arrow.Float16())), "fixed_size_list<float16, 4>", (k) => (few(k) ? [1, 2, 3, 4] : null)],
    ["s_empty", () => new arrow.Utf8(), "string", (k) => (few(k) ? "s" : "")],
    ["b_empty", () => new arrow.Binary(), "binary", (k) => (few(k) ? [1] : [])],
    ["ls_empty", () => new arrow.LargeUtf8(), "large_string", () => ""],
    ["s_null", () => new arrow.Utf8(), "string", () => null],
    ["ls_null", () => new arrow.LargeUtf8(), "large_string", () => null],
    ["b_null", () => new arrow.Binary(), "binary", () => null],
    ["i16_null", () => new arrow.Int16(), "int16", () => null],
    ["u8_null", () => new arrow.Uint8(), "uint8", () => null],
    ["i64_null", () => new arrow.Int64(), "int64", () => null],
    ["f16_null", () => new arrow.Float16(), "float16", () => null],
    ["f64_null", () => new arrow.Float64(), "double", () => null],
    ["ts_null", () => new arrow.TimestampMicrosecond("UTC"), "timestamp<us, UTC>", () => null],
    ["d_null", () => new arrow.DateDay(), "date32", () => null],
    ["dec_null", () => new arrow.Decimal(2, 10, 128), "decimal128<10, 2>", () => null],
    ["fsb_null", () => new arrow.FixedSizeBinary(4), "fixed_size_binary<4>", () => null],
    ["v64_null", () => new arrow.FixedSizeList(3, F("item", new arrow.Float64())), "fixed_size_list<float64, 3>", () => null],
  ];
  return cols.map(([name, type, text, value, nullable]) => ({ name, type, text, value, nullable: nullable ?? true }));
}

// utf8/binary values of 256 bytes and more (issue 26, gendiff seed 116):
// Lance writes their pages FullZip; ours once made MiniBlock chunks of one
// value that LanceDB refuses. Row k mixes small values, 1.5-3.5 KB values,
// a 40 KB one now and then (Lance: per-value zstd), and nulls, in every
// string and binary type; inside a list and a struct, up to 255 bytes.
export function bigCatalogue(arrow) {
  const F = (n, t, nullable = true) => new arrow.Field(n, t, nullable);
  const len = (k, col) => {
    const h = ((k * 2654435761) >>> 0) ^ (col * 40503);
    if (h % 11 === 0) return null;
    if (h % 5 === 0) return h % 17 === 0 ? 40000 : 1500 + (h % 2000);
    return 1 + (h % 40);
  };
  const text = (k, col) => {
    const n = len(k, col);
    return n === null ? null : Array.from({ length: n }, (_, i) => String.fromCharCode(97 + ((k + i) % 26))).join("");
  };
  const bytes = (k, col) => {
    const n = len(k, col);
    return n === null ? null : Array.from({ length: n }, (_, i) => (k * 7 + i) & 255);
  };
  const cols = [
    ["s", () => new arrow.Utf8(), "string", (k) => text(k, 1)],
    ["ls", () => new arrow.LargeUtf8(), "large_string", (k) => text(k, 2)],
    ["b", () => new arrow.Binary(), "binary", (k) => bytes(k, 3)],
    ["lb", () => new arrow.LargeBinary(), "large_binary", (k) => bytes(k, 4)],
    // nested leaves: distinct values under 256 bytes (Lance writes longer
    // ones as a nested FullZip and repeated ones as a dictionary, which our
    // reader, and so memwal-inspect, cannot read yet)
    ["l", () => new arrow.List(F("item", new arrow.Utf8())), "list<string>",
      (k) => (text(k, 5) === null ? null : [`${k}:${text(k, 5)}`.slice(0, 255), null, `x${k}`])],
    ["st", () => new arrow.Struct([F("a", new arrow.Int32()), F("t", new arrow.Utf8())]), "struct<a: int32, t: string>",
      (k) => ({ a: k, t: text(k, 6) === null ? null : `${k}:${text(k, 6)}`.slice(0, 255) })],
  ];
  return cols.map(([name, type, text, value]) => ({ name, type, text, value, nullable: true }));
}

// The table: id int64 primary key, the catalogue, nothing else.
export function tableFields(arrow, cat) {
  return [new arrow.Field("id", new arrow.Int64(), false),
    ...cat.map((c) => new arrow.Field(c.name, c.type(), c.nullable))];
}

export function schemaText(cat) {
  return ["id:int64 not null", ...cat.map((c) => `${c.name}:${c.text}`)].join(", ");
}

export function makeRow(cat, k) {
  const r = { id: String(k) };
  for (const c of cat) r[c.name] = c.value(k);
  return r;
}

// ---------------------------------------------------------------- builder

function validity(n, vals) {
  const bits = new Uint8Array((n + 7) >> 3);
  let nulls = 0;
  vals.forEach((v, i) => { if (v === null || v === undefined) nulls++; else bits[i >> 3] |= 1 << (i & 7); });
  return { bits, nulls };
}

// Arrow Data of exact values for `type` (recursive for lists and structs).
export function buildData(arrow, type, vals) {
  const n = vals.length;
  const { bits, nulls } = validity(n, vals);
  const base = { type, length: n, nullCount: nulls, nullBitmap: bits };
  const T = arrow.Type;
  const id = type.typeId;
  const bigs = (x) => BigInt(x ?? 0);
  if (id === T.Int && type.bitWidth === 64) {
    const d = type.isSigned ? new BigInt64Array(n) : new BigUint64Array(n);
    vals.forEach((v, i) => { d[i] = type.isSigned ? BigInt.asIntN(64, bigs(v)) : BigInt.asUintN(64, bigs(v)); });
    return arrow.makeData({ ...base, data: d });
  }
  if (id === T.Timestamp || (id === T.Date && type.unit === arrow.DateUnit.MILLISECOND) ||
      (id === T.Time && type.bitWidth === 64)) {
    const d = new BigInt64Array(n);
    vals.forEach((v, i) => { d[i] = bigs(v); });
    return arrow.makeData({ ...base, data: d });
  }
  if (id === T.Date || id === T.Time) {
    const d = new Int32Array(n);
    vals.forEach((v, i) => { d[i] = Number(v ?? 0); });
    return arrow.makeData({ ...base, data: d });
  }
  if (id === T.Decimal) {
    const d = new Uint32Array(4 * n);
    vals.forEach((v, i) => {
      const b = BigInt.asUintN(128, bigs(v));
      for (let w = 0; w < 4; w++) d[4 * i + w] = Number((b >> BigInt(32 * w)) & 0xffffffffn);
    });
    return arrow.makeData({ ...base, data: d });
  }
  if (id === T.Utf8 || id === T.LargeUtf8 || id === T.Binary || id === T.LargeBinary) {
    const enc = new TextEncoder();
    const parts = vals.map((v) => (v === null ? new Uint8Array(0) : typeof v === "string" ? enc.encode(v) : Uint8Array.from(v)));
    const large = id === T.LargeUtf8 || id === T.LargeBinary;
    const off = large ? new BigInt64Array(n + 1) : new Int32Array(n + 1);
    let t = 0;
    parts.forEach((p, i) => { t += p.length; off[i + 1] = large ? BigInt(t) : t; });
    const data = new Uint8Array(t);
    let o = 0;
    for (const p of parts) { data.set(p, o); o += p.length; }
    return arrow.makeData({ ...base, valueOffsets: off, data });
  }
  if (id === T.FixedSizeBinary) {
    const data = new Uint8Array(n * type.byteWidth);
    vals.forEach((v, i) => { if (v !== null) data.set(v, i * type.byteWidth); });
    return arrow.makeData({ ...base, data });
  }
  if (id === T.FixedSizeList) {
    const dim = type.listSize, items = [];
    // null rows keep a full slot of null items (as arrow-rs builds them)
    vals.forEach((v) => { for (let k = 0; k < dim; k++) items.push(v === null ? null : v[k]); });
    const child = buildData(arrow, type.children[0].type, items);
    return arrow.makeData({ ...base, child });
  }
  if (id === T.List || (T.LargeList !== undefined && id === T.LargeList)) {
    const large = id !== T.List;
    const off = large ? new BigInt64Array(n + 1) : new Int32Array(n + 1), items = [];
    vals.forEach((v, i) => { if (v !== null) items.push(...v); off[i + 1] = large ? BigInt(items.length) : items.length; });
    const child = buildData(arrow, type.children[0].type, items);
    return arrow.makeData({ ...base, valueOffsets: off, child });
  }
  if (id === T.Struct) {
    // a null struct's members are null (or zero when not nullable) in its slot
    const children = type.children.map((f) => buildData(arrow, f.type, vals.map((v) => (v === null ? null : v[f.name] ?? null))));
    return arrow.makeData({ ...base, children });
  }
  // int8..int32, uint*, floats, bool: the plain builder is exact
  return arrow.vectorFromArray(vals, type).data[0];
}

export function buildTable(arrow, fields, rows) {
  const children = fields.map((f) => buildData(arrow, f.type, rows.map((r) => r[f.name] ?? null)));
  const data = arrow.makeData({ type: new arrow.Struct(fields), length: rows.length, nullCount: 0, children });
  return new arrow.Table([new arrow.RecordBatch(new arrow.Schema(fields), data)]);
}

export function expectedLine(fields, row) {
  const o = {};
  for (const f of fields) o[f.name] = row[f.name] ?? null;
  return JSON.stringify(o);
}

// ------------------------------------------------------------ JSON lines

const UNIT_PER_S = { s: 1n, ms: 1000n, us: 1000000n, ns: 1000000000n };

// days since the epoch -> YYYY-MM-DD (Hinnant's civil_from_days).
function civil(days) {
  const z = days + 719468n, era = (z >= 0n ? z : z - 146096n) / 146097n;
  const doe = z - era * 146097n, yoe = (doe - doe / 1460n + doe / 36524n - doe / 146096n) / 365n;
  const doy = doe - (365n * yoe + yoe / 4n - yoe / 100n), mp = (5n * doy + 2n) / 153n;
  const d = doy - (153n * mp + 2n) / 5n + 1n, m = mp < 10n ? mp + 3n : mp - 9n, y = yoe + era * 400n + (m <= 2n ? 1n : 0n);
  const p = (x, w) => String(x).padStart(w, "0");
  return `${p(y, 4)}-${p(m, 2)}-${p(d, 2)}`;
}

function clock(ns) {
  const p = (x, w) => String(x).padStart(w, "0");
  const s = ns / 1000000000n, f = ns % 1000000000n;
  let t = `${p(s / 3600n, 2)}:${p((s / 60n) % 60n, 2)}:${p(s % 60n, 2)}`;
  if (f) t += "." + p(f, 9).replace(/0+$/, "");
  return t;
}

// RFC 3339 text of `v` units since the epoch, with offset `off` ("Z", "+05:30").
export function rfc3339(v, unit, off = "Z") {
  const ns = BigInt(v) * (1000000000n / UNIT_PER_S[unit]);
  const sign = off === "Z" ? 0n : (off[0] === "-" ? -1n : 1n) * (BigInt(off.slice(1, 3)) * 3600n + BigInt(off.slice(4, 6)) * 60n) * 1000000000n;
  const local = ns + sign, day = 86400n * 1000000000n;
  let days = local / day, rem = local % day;
  if (rem < 0n) { rem += day; days -= 1n; }
  return `${civil(days)}T${clock(rem)}${off}`;
}

const unitOf = (text) => (text.match(/<(s|ms|us|ns)/) ?? [null, "us"])[1];

// The JSON value memwald's line protocol takes for an exact value, varying
// the accepted spellings with `k` (numbers and strings for 64-bit integers,
// RFC 3339 and integers for timestamps, dates as text or days, ...).
export function jsonValue(text, v, k) {
  if (v === null) return null;
  const t = text.replace(/ not null$/, "");
  if (t.startsWith("timestamp")) {
    const unit = unitOf(t);
    if (k % 2) return v; // an integer in the unit, as a string
    const off = k % 4 === 0 ? "+05:30" : k % 4 === 2 ? "-08:00" : "Z";
    return rfc3339(v, unit, off);
  }
  if (t === "date32") return k % 2 ? v : civil(BigInt(v));
  if (t === "date64") return k % 2 ? Number(v) : civil(BigInt(v) / 86400000n);
  if (t.startsWith("time")) {
    const unit = unitOf(t);
    return k % 2 ? Number(v) : clock(BigInt(v) * (1000000000n / UNIT_PER_S[unit]));
  }
  if (t.startsWith("decimal128")) {
    const scale = Number(t.match(/, *(\d+)>/)[1]);
    const s = BigInt(v), neg = s < 0n, a = (neg ? -s : s).toString().padStart(scale + 1, "0");
    const txt = (neg ? "-" : "") + a.slice(0, a.length - scale) + (scale ? "." + a.slice(a.length - scale) : "");
    return k % 3 === 0 && a.length <= 15 ? { __raw: txt } : txt; // a bare JSON number, or a string
  }
  if (t === "binary" || t === "large_binary" || t.startsWith("fixed_size_binary")) return Buffer.from(v).toString("base64");
  if (t.startsWith("list<") || t.startsWith("large_list<")) {
    const inner = t.slice(t.indexOf("<") + 1, -1).replace(/ not null$/, "");
    return v.map((x, i) => jsonValue(inner, x, k + i));
  }
  if (t.startsWith("struct<")) {
    const o = {};
    for (const [name, sub] of structMembers(t)) if (v[name] !== undefined) o[name] = jsonValue(sub, v[name], k);
    return o;
  }
  if (t === "int64" || t === "uint64") return k % 2 ? v : Number(v) <= Number.MAX_SAFE_INTEGER && Number(v) >= -Number.MAX_SAFE_INTEGER ? { __raw: v } : v;
  return v;
}

// "struct<a: int32, b: list<string>>" -> [["a","int32"], ["b","list<string>"]]
export function structMembers(t) {
  const body = t.slice(t.indexOf("<") + 1, -1), out = [];
  let depth = 0, start = 0;
  for (let i = 0; i <= body.length; i++) {
    const ch = body[i];
    if (ch === "<") depth++;
    else if (ch === ">") depth--;
    if (i === body.length || (ch === "," && depth === 0)) {
      const part = body.slice(start, i).trim(), c = part.indexOf(":");
      out.push([part.slice(0, c).trim(), part.slice(c + 1).trim()]);
      start = i + 1;
    }
  }
  return out;
}

// JSON text where {__raw: "12.34"} is written as the bare number 12.34.
export function toJson(v) {
  if (v === null) return "null";
  if (Array.isArray(v)) return "[" + v.map(toJson).join(",") + "]";
  if (typeof v === "object") {
    if (v.__raw !== undefined) return String(v.__raw);
    return "{" + Object.entries(v).map(([k, x]) => JSON.stringify(k) + ":" + toJson(x)).join(",") + "}";
  }
  return JSON.stringify(v);
}

export function jsonLine(cat, row) {
  const o = { id: { __raw: row.id } };
  const k = Number(row.id);
  for (const c of cat) o[c.name] = jsonValue(c.text, row[c.name], k);
  return toJson(o);
}
