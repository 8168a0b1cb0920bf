#!/usr/bin/env node
// make-encodings.mjs — a LanceDB 0.39.0 table whose MemWAL SSTable (written
// by LanceDB's own LSM writer) holds the page encodings Lance chooses only
// for such data, so our reader is tested against them (encodings.sh):
//   grp    int64, 5 distinct large values  -> dictionary, general(lz4) block
//   city   utf8, 6 names, some null         -> dictionary of variable values
//   konst  utf8, one value in every row     -> constant layout, value buffer
//   konst2 utf8, one value, some null       -> constant layout, def levels
//   note   utf8, 6000 distinct ~70 bytes    -> fsst with its table on (>32 KiB)
//   v      float64, 3 distinct, some null
//   w      float64, whole numbers 0..1499   -> dictionary, out_of_line_bitpacking
//   big    utf8, ~250-450 bytes, some null  -> full_zip, fsst per value
//   blob   binary, ~300 bytes, some null    -> full_zip, variable
// Every value is a function of the key k alone, so any row the SSTable holds
// can be checked: the rows go to MODEL_OUT as JSON lines, {"id": k, ...}.
//
//   node make-encodings.mjs DB_DIR MODEL_OUT [ROWS]   (default 6000; fewer
//   rows make smaller pages: fsst then keeps its table off, under 32 KiB)
import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";

const here = path.dirname(fileURLToPath(import.meta.url));
if (!fs.existsSync(path.join(here, "node_modules", "@lancedb", "lancedb"))) {
  console.error(`interop: ${here}/node_modules is missing: run \`npm install --no-audit --no-fund\` in tests/interop first`);
  process.exit(2);
}
const require = createRequire(path.join(here, "package.json"));
const lancedb = require("@lancedb/lancedb");
const arrow = require("apache-arrow");

const [dbDir, modelOut, rowsArg] = process.argv.slice(2);
if (!dbDir || !modelOut) {
  console.error("usage: node make-encodings.mjs DB_DIR MODEL_OUT");
  process.exit(2);
}
const F = (n, t, nullable = true) => new arrow.Field(n, t, nullable);
const schema = new arrow.Schema([
  F("id", new arrow.Int64(), false), F("grp", new arrow.Int64()), F("city", new arrow.Utf8()),
  F("konst", new arrow.Utf8()), F("konst2", new arrow.Utf8()), F("note", new arrow.Utf8()),
  F("v", new arrow.Float64()), F("w", new arrow.Float64()),
  F("big", new arrow.Utf8()), F("blob", new arrow.Binary()),
]);
const GRP = [1000000000000003n, -700000000000000n, 42n, 9007199254740993n, -1n];
const CITY = ["Amsterdam", "Berlin", "Cork", "Dakar", "Edinburgh", "Fès"];
const V = [1.5, -2.25, 1e300];
const WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india"];
const row = (k) => ({
  id: BigInt(k),
  grp: GRP[k % GRP.length],
  city: k % 13 === 0 ? null : CITY[(k * 7) % CITY.length],
  konst: "__constant__",
  konst2: k % 9 === 0 ? null : "same-value",
  note: `note ${k} ${WORDS[k % 9]} ${WORDS[(k >> 3) % 9]} ${WORDS[(k >> 6) % 9]} ${(k * 2654435761) % 1000003} end`,
  v: k % 11 === 0 ? null : V[k % V.length],
  w: (k * 7) % 1500,
  big: k % 17 === 0 ? null : `${k}:` + "xyzw".repeat(60 + (k % 50)) + WORDS[k % 9].repeat(k % 7),
  blob: k % 19 === 0 ? null : Uint8Array.from({ length: 300 + (k % 13) }, (_, i) => (k * 31 + i * i * 7) & 255),
});
const N = rowsArg ? Number(rowsArg) : 6000;
fs.mkdirSync(dbDir, { recursive: true });
const db = await lancedb.connect(dbDir);
const base = [];
for (let k = 0; k < 20; k++) base.push(row(k));
const t = await db.createTable("t", lancedb.makeArrowTable(base, { schema }), { mode: "overwrite" });
await t.setUnenforcedPrimaryKey("id");
await t.setLsmWriteSpec({ specType: "unsharded", maintainedIndexes: [], writerConfigDefaults: {} });
t.close();
const w = await db.openTable("t");
const upd = [];
for (let k = 0; k < N; k++) upd.push(row(k));
await w.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(lancedb.makeArrowTable(upd, { schema }));
await w.closeLsmWriters();
w.close();
const out = fs.createWriteStream(modelOut);
for (let k = 0; k < N; k++) {
  const r = row(k);
  const blob = r.blob === null ? null : Buffer.from(r.blob).toString("hex");
  out.write(JSON.stringify({ ...r, id: k, grp: String(r.grp), blob }) + "\n");
}
out.end();
await new Promise((res) => out.on("finish", res));
console.error(`made ${path.join(dbDir, "t.lance")} (${N} rows)`);
