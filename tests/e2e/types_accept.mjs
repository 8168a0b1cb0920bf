#!/usr/bin/env node
// types_accept.mjs — the LanceDB side of issue 15's acceptance test for
// column types (tests/e2e/test_daemon_types.py): a table LanceDB creates with
// every type memwald supports, the rows memwald is sent over JSON and ARROW,
// and what LanceDB reads back, exactly (exact.mjs).
//
//   types_accept.mjs create DB_DIR [--nullable]
//       LanceDB 0.39.0 creates DB_DIR/t.lance (DB_DIR may be s3://BUCKET/PREFIX,
//       endpoint and keys from the AWS_* environment): id int64 (unenforced primary
//       key) + the whole types_lib catalogue (narrow ints, float16,
//       timestamps in every unit with and without a zone, dates, times,
//       decimals, large and fixed binaries, fixed_size_lists, lists, structs,
//       a string, large lists), base rows 0..19, unsharded LSM write spec.
//       The large lists are added by LanceDB with arrow_cast (the node client
//       cannot build LargeList data). Prints the same schema in memwald's
//       config syntax. --nullable: every column but id nullable (the one
//       not-null column, u16, too), so the table takes deletes.
//   types_accept.mjs plan OUTDIR [--compaction]
//       For each phase (p1, p2; with --compaction c1, c2, c3 instead, with
//       deletes, for a table made with --nullable): OUTDIR/<phase>.jsonl, the NDJSON requests
//       (upserts in every JSON spelling types_lib.jsonValue varies, objects
//       as their text into `s`); OUTDIR/<phase>-<n>.arrow, ARROW
//       frames (apache-arrow 21: every column including the large lists,
//       one frame with its columns in another order; apache-arrow 18's
//       tableFromArrays: a dictionary-encoded string column); and
//       OUTDIR/<phase>.model.jsonl, the state of every key the phase touched
//       (the exact line LanceDB must read, or {"id":..,"_deleted":true});
//       OUTDIR/<phase>.counts.json, {json: requests, frames: [rows each]}.
//       Requests are meant to be sent in file order: the JSON lines, then
//       the frames by number.
//   types_accept.mjs read TABLE_DIR OUT
//       What LanceDB reads through its LSM scanner: exact lines sorted by id
//       (TABLE_DIR may be s3://BUCKET/PREFIX/t.lance).
import * as fs from "node:fs";
import * as path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const interop = path.join(here, "..", "interop");
if (!fs.existsSync(path.join(interop, "node_modules", "apache-arrow-21"))) {
  console.error(`types_accept: ${interop}/node_modules is missing or old: run \`npm install --no-audit --no-fund\` there`);
  process.exit(2);
}
const require = createRequire(path.join(interop, "package.json"));
const lancedb = require("@lancedb/lancedb");
const arrow18 = require("apache-arrow"); // LanceDB's copy
const arrow21 = require("apache-arrow-21"); // has LargeList
const lib = await import(path.join(interop, "types_lib.mjs"));
const { exactLine } = await import(path.join(interop, "exact.mjs"));

const LARGE = ["ll", "ll_s"];
const [cmd, a, b] = process.argv.slice(2);
const nullable = process.argv.includes("--nullable");
const compaction = process.argv.includes("--compaction");
const allNull = (cat) => (nullable ? cat.map((c) => ({ ...c, nullable: true, text: c.text.replace(/ not null/g, "") })) : cat);
const catFull = allNull(lib.catalogue(arrow21, { large: true }));
const names = ["id", ...catFull.map((c) => c.name)];
// LanceDB adds the large lists from these columns (so base rows have values)
const LARGE_FROM = { ll: ["li", "LargeList(Int64)"], ll_s: ["ls_str", "LargeList(Utf8)"] };

async function create(dbDir) {
  const cat = allNull(lib.catalogue(arrow18, { large: false }).concat(
    lib.catalogue(arrow21, { large: true }).filter((c) => c.name === "s").map((c) => ({ ...c, type: () => new arrow18.Utf8() }))));
  const fields = lib.tableFields(arrow18, cat);
  const rows = [];
  for (let k = 0; k < 20; k++) rows.push(lib.makeRow(catFull, k));
  if (!dbDir.startsWith("s3://")) fs.mkdirSync(dbDir, { recursive: true });
  const db = await connect(dbDir);
  const t = await db.createTable("t", lib.buildTable(arrow18, fields, rows), { mode: "overwrite" });
  const before = await t.version();
  try {
    await t.addColumns(LARGE.map((n) => ({ name: n, valueSql: `arrow_cast(${LARGE_FROM[n][0]}, '${LARGE_FROM[n][1]}')` })));
  } catch (e) {
    // the columns are added; only the node client's schema decode fails
    if (!/LargeList/.test(e.message)) throw e;
  }
  if ((await t.version()) !== before + 1) throw new Error("addColumns of the large lists made no version");
  await t.setUnenforcedPrimaryKey("id");
  await t.setLsmWriteSpec({ specType: "unsharded", maintainedIndexes: [], writerConfigDefaults: {} });
  t.close();
  process.stdout.write(lib.schemaText(catFull) + "\n");
}

// A folder, or s3://BUCKET/PREFIX with the endpoint and keys of the
// environment tests/s3/with-s3.sh exports.
function connect(uri) {
  const env = process.env;
  const storageOptions = uri.startsWith("s3://") ? {
    aws_endpoint: env.AWS_ENDPOINT_URL || env.MW_S3_ENDPOINT, aws_access_key_id: env.AWS_ACCESS_KEY_ID,
    aws_secret_access_key: env.AWS_SECRET_ACCESS_KEY, aws_region: env.AWS_REGION || "us-east-1", allow_http: "true",
  } : undefined;
  return lancedb.connect(uri, storageOptions ? { storageOptions } : {});
}

// ------------------------------------------------------------------ plan

// Row k's exact values under key `id` (an update takes another k's values).
const rowOf = (k, id = k) => ({ ...lib.makeRow(catFull, k), id: String(id) });
const line = (r) => lib.expectedLine([{ name: "id" }, ...catFull], r);

function jsonRequest(r) {
  let text = lib.jsonLine(catFull, r);
  // objects stored as their JSON text (json_objects_as_text): sent raw
  if (r.s !== null && r.s.startsWith("{")) text = text.replace(JSON.stringify(r.s), r.s);
  return text;
}

function frame21(rows, order) {
  const byName = Object.fromEntries(lib.tableFields(arrow21, catFull).map((f) => [f.name, f]));
  const fields = order.map((n) => byName[n]);
  return arrow21.tableToIPC(lib.buildTable(arrow21, fields, rows), "stream");
}

// apache-arrow 18's default: tableFromArrays dictionary-encodes strings.
function dictFrame(keys) {
  const t = arrow18.tableFromArrays({
    id: BigInt64Array.from(keys, BigInt),
    u16: Uint16Array.from(keys, (k) => k * 3),
    s: keys.map((k) => ["red", "green", "red", "blue"][k % 4]),
  });
  if (t.schema.fields[2].type.typeId !== arrow18.Type.Dictionary) throw new Error("tableFromArrays made no dictionary");
  return { bytes: arrow18.tableToIPC(t, "stream"), rows: keys.map((k) => ({ id: String(k), u16: k * 3, s: ["red", "green", "red", "blue"][k % 4] })) };
}

function plan(out) {
  fs.mkdirSync(out, { recursive: true });
  const phases = compaction ? {
    // each phase is flushed and compacted (tests/e2e/test_daemon_types_compact.py):
    // c1 new keys, updates and deletes of LanceDB's base rows;
    c1: { json: [[100, 140, 0], [0, 10, 2000]], del: [12, 13], frames: [[140, 170, 0], [170, 200, 0, true], [5, 8, 3000]], dict: [300, 301, 302, 303, 304, 6] },
    // c2 updates and deletes of rows c1's compaction wrote, new keys;
    c2: { json: [[100, 110, 5000], [500, 520, 0]], del: [150, 151, 152, 14, 300], frames: [[120, 130, 6000, true]], dict: [520, 521, 160] },
    // c3 the same again over c2's compaction, and deletes of base rows
    c3: { json: [[520, 530, 0], [140, 145, 7000]], del: [100, 101, 0, 1, 501], frames: [[530, 560, 0]], dict: [560, 502] },
  } : {
    // new keys, updates of LanceDB's base rows, frames. No deletes: the
    // catalogue has a not-null column (u16), and a MemWAL table takes
    // deletes only when every column but the key is nullable (memwald
    // refuses DEL on it with that reason)
    p1: { json: [[100, 140, 0], [0, 10, 2000]], del: [], frames: [[140, 170, 0], [170, 200, 0, true], [5, 8, 3000]], dict: [300, 301, 302, 303, 304, 6] },
    // what replay must bring back: the daemon is killed before any flush
    p2: { json: [[400, 430, 0], [120, 125, 4000]], del: [], frames: [[430, 460, 0, true]], dict: [460, 461, 462] },
  };
  const state = new Map();
  for (const [name, ph] of Object.entries(phases)) {
    const touched = new Set();
    const put = (id, l) => { state.set(id, l); touched.add(id); };
    const reqs = [];
    for (const [from, to, shift] of ph.json) {
      for (let id = from; id < to; id++) {
        const r = rowOf(id + shift, id);
        reqs.push(jsonRequest(r));
        put(id, line(r));
      }
    }
    for (const id of ph.del) {
      reqs.push(`DEL {"id":${id}}`);
      put(id, JSON.stringify({ id: String(id), _deleted: true }));
    }
    fs.writeFileSync(path.join(out, `${name}.jsonl`), reqs.join("\n") + "\n");
    let n = 0;
    const frameRows = [];
    for (const [from, to, shift, reorder] of ph.frames) {
      const rows = [];
      for (let id = from; id < to; id++) rows.push(rowOf(id + shift, id));
      const order = reorder ? [...names].reverse() : names;
      fs.writeFileSync(path.join(out, `${name}-${n++}.arrow`), frame21(rows, order));
      frameRows.push(rows.length);
      for (const r of rows) put(Number(r.id), line(r));
    }
    const d = dictFrame(ph.dict);
    fs.writeFileSync(path.join(out, `${name}-${n++}.arrow`), d.bytes);
    frameRows.push(d.rows.length);
    for (const r of d.rows) put(Number(r.id), line(r));
    fs.writeFileSync(path.join(out, `${name}.counts.json`), JSON.stringify({ json: reqs.length, frames: frameRows }) + "\n");
    const model = [...touched].sort((a, b) => a - b).map((id) => state.get(id));
    fs.writeFileSync(path.join(out, `${name}.model.jsonl`), model.join("\n") + "\n");
  }
}

// ------------------------------------------------------------------ read

async function read(tableDir, out) {
  const s3 = tableDir.startsWith("s3://");
  const db = await connect(s3 ? tableDir.slice(0, tableDir.lastIndexOf("/")) : path.dirname(path.resolve(tableDir)));
  const t = await db.openTable(path.basename(tableDir, ".lance"));
  // LanceDB's own result batches (Arrow IPC from its LSM scanner), decoded
  // by apache-arrow 21: 18.1.0, which LanceDB's toArrow() uses, cannot
  // decode a LargeList, and the LSM scanner takes no cast projection
  const it = await t.query().nativeExecute();
  const rows = [];
  for (let buf = await it.next(); buf; buf = await it.next()) {
    for (const b of arrow21.tableFromIPC(buf).batches) {
      const got = b.schema.fields.map((f) => f.name).join(",");
      if (got !== names.join(",")) throw new Error(`LanceDB returned columns ${got}`);
      for (let i = 0; i < b.numRows; i++) rows.push(exactLine(b, names, i));
    }
  }
  t.close();
  rows.sort((a, b) => Number(JSON.parse(a).id) - Number(JSON.parse(b).id));
  fs.writeFileSync(out, rows.join("\n") + (rows.length ? "\n" : ""));
  console.log(`read rows=${rows.length}`);
}

if (cmd === "create" && a) await create(a);
else if (cmd === "plan" && a) plan(a);
else if (cmd === "read" && a && b) await read(a, b);
else {
  console.error("usage: types_accept.mjs create DB_DIR [--nullable] | plan OUTDIR [--compaction] | read TABLE_DIR OUT");
  process.exit(2);
}
