#!/usr/bin/env node
// sindex.mjs — LanceDB 0.39.0's filtered and full-text searches over a table
// whose LSM write spec maintains scalar (BTree) and full-text (inverted)
// indexes beside a vector index (issue 27; tests/e2e/daemon_sindex.py and
// tests/interop/sindex_fts.sh run it).
//
//   node sindex.mjs make DIR --kinds btree[,bitmap][,fts]
//     A table DIR/t.lance {id int64 PK, vec fixed_size_list<float32, 8>,
//     num int64, cat utf8, text utf8, score float64} of 300 base rows (ids 0..299) with an
//     IVF_PQ index on vec and, per kind, a BTree index on num, on score
//     float64 (and on cat without bitmap), a Bitmap index on cat, an inverted
//     (FTS) index on text;
//     then the LSM write spec:
//     unsharded with maintainedIndexes omitted (LanceDB's default: every
//     index maintained), or, with bitmap, every index but the Bitmap one
//     (LanceDB 0.39.0 refuses to maintain a Bitmap index: setLsmWriteSpec
//     fails on the default). DIR/fresh.json gets the rows another writer
//     (memwald) is to write: 200 new rows (ids 100000..100199, num = id) and
//     50 updates of base rows 0..49 (num = 500000 + id, new vector and text).
//   node sindex.mjs check DIR
//     After the other writer wrote fresh.json's rows and flushed: every query
//     below must answer exactly what the model of base + fresh rows says:
//     query().where("num >= 100000") and ("num < 1000"), where("num = X") for
//     fresh values, where("num = old") for the updated rows' stale values
//     (nothing), a vector search prefiltered on num (the row's own vector
//     filtered to its num: that row alone; filtered to num >= 100000: the
//     brute-force nearest first), where on cat (BTree, or Bitmap: unmaintained),
//     and the plan of where on num (and on cat with a BTree) reads the SSTable
//     through its per-SSTable BTree (a ScalarIndexQuery in the SSTable's arm).
//     Prints "ok N checks ..." or the failures, exit 1.
//   node sindex.mjs fts-make DIR [--params JSON]
//   node sindex.mjs fts-compare DIR --other DIR2
//     Full-text: see ftsMake and ftsCompare below.
import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
if (!fs.existsSync(path.join(here, "node_modules", "@lancedb", "lancedb"))) {
  console.error(`interop: ${here}/node_modules is missing: run \`npm install --no-audit --no-fund\` in tests/interop first`);
  process.exit(2);
}
const lancedb = await import("@lancedb/lancedb");
const arrow = await import("apache-arrow");

const [cmd, dir, ...rest] = process.argv.slice(2);
const opt = { kinds: "btree" };
for (let i = 0; i < rest.length; i += 2) opt[rest[i].replace(/^--/, "")] = rest[i + 1];
const DIM = 8;
const FRUIT = ["apple", "cherry", "lemon"];
const vecOf = (id, salt) => Array.from({ length: DIM }, (_, j) => Math.fround(Math.sin(id * 1.7 + j * 0.31 + salt)));
const baseRow = (id) => ({ id, vec: vecOf(id, 0), num: id, cat: `k${id % 7}`, text: `base ${FRUIT[id % 3]} u${id}`, score: id / 4 });
const newRow = (id) => ({ id, vec: vecOf(id, 0), num: id, cat: `k${id % 7}`, text: `fresh ${FRUIT[id % 3]} u${id}`, score: id / 4 });
const updRow = (id) => ({ id, vec: vecOf(id, 9), num: 500000 + id, cat: "kupd", text: `mango updated u${id}`, score: -id - 1 });

const schema = new arrow.Schema([
  new arrow.Field("id", new arrow.Int64(), false),
  new arrow.Field("vec", new arrow.FixedSizeList(DIM, new arrow.Field("item", new arrow.Float32(), true)), true),
  new arrow.Field("num", new arrow.Int64(), true),
  new arrow.Field("cat", new arrow.Utf8(), true),
  new arrow.Field("text", new arrow.Utf8(), true),
  new arrow.Field("score", new arrow.Float64(), true),
]);
const toArrow = (rows) =>
  new arrow.Table(schema, [
    new arrow.RecordBatch(schema, arrow.makeData({
      type: new arrow.Struct(schema.fields), length: rows.length, nullCount: 0,
      children: [
        arrow.vectorFromArray(rows.map((r) => BigInt(r.id)), new arrow.Int64()).data[0],
        arrow.makeData({
          type: schema.fields[1].type, length: rows.length, nullCount: 0,
          child: arrow.makeData({ type: new arrow.Float32(), length: rows.length * DIM, data: Float32Array.from(rows.flatMap((r) => r.vec)) }),
        }),
        arrow.vectorFromArray(rows.map((r) => BigInt(r.num)), new arrow.Int64()).data[0],
        arrow.vectorFromArray(rows.map((r) => r.cat), new arrow.Utf8()).data[0],
        arrow.vectorFromArray(rows.map((r) => r.text), new arrow.Utf8()).data[0],
        arrow.vectorFromArray(rows.map((r) => r.score), new arrow.Float64()).data[0],
      ],
    })),
  ]);

async function makeOne(d, kinds) {
  const db = await lancedb.connect(d);
  const base = Array.from({ length: 300 }, (_, i) => baseRow(i));
  const t = await db.createTable("t", toArrow(base));
  await t.createIndex("vec", { config: lancedb.Index.ivfPq({ numPartitions: 1, numSubVectors: 1 }) });
  if (kinds.includes("btree")) await t.createIndex("num", { config: lancedb.Index.btree() });
  if (kinds.includes("bitmap")) await t.createIndex("cat", { config: lancedb.Index.bitmap() });
  else if (kinds.includes("btree")) await t.createIndex("cat", { config: lancedb.Index.btree() });
  /* float64: no per-SSTable BTree from memwald (LanceDB scans those SSTables) */
  if (kinds.includes("btree")) await t.createIndex("score", { config: lancedb.Index.btree() });
  if (kinds.includes("fts")) await t.createIndex("text", { config: lancedb.Index.fts() });
  await t.setUnenforcedPrimaryKey("id");
  let refused = null;
  try {
    await t.setLsmWriteSpec({ specType: "unsharded" });
  } catch (e) {
    if (!kinds.includes("bitmap")) throw e;
    refused = e.message.split("\n")[0];
    const names = (await t.listIndices()).map((x) => x.name).filter((n) => n !== "cat_idx");
    await t.setLsmWriteSpec({ specType: "unsharded", maintainedIndexes: names });
  }
  const spec = await t.getLsmWriteSpec();
  t.close();
  return { spec, refused };
}

function model() {
  const rows = new Map();
  for (let i = 0; i < 300; i++) rows.set(i, baseRow(i));
  const fresh = [];
  for (let i = 0; i < 200; i++) fresh.push(newRow(100000 + i));
  for (let i = 0; i < 50; i++) fresh.push(updRow(i));
  for (const r of fresh) rows.set(r.id, r);
  return { rows, fresh };
}

async function make() {
  const kinds = opt.kinds.split(",");
  const { fresh } = model();
  const { spec, refused } = await makeOne(dir, kinds);
  fs.writeFileSync(path.join(dir, "fresh.json"), JSON.stringify({ kinds, rows: fresh }));
  console.log(`made ${dir}/t.lance: 300 base rows, indexes ${kinds.join(",")}+vec, maintained ${JSON.stringify(spec.maintainedIndexes)}` +
    (refused ? `; the default write spec was refused by LanceDB: ${refused}` : ""));
}

const sameSet = (got, want) => got.length === want.length && [...got].sort().join() === [...want].sort().join();

async function check() {
  const { kinds } = JSON.parse(fs.readFileSync(path.join(dir, "fresh.json"), "utf8"));
  const { rows, fresh } = model();
  const all = [...rows.values()];
  const db = await lancedb.connect(dir);
  const t = await db.openTable("t");
  const fails = [];
  let n = 0;
  const ids = async (q) => (await q.toArray()).map((r) => Number(r.id));
  // first: compare only the first `first` answers (a vector search's top 1
  // of 10: with limit(1) LanceDB searches each SSTable's graph with k = 1
  // and a narrow beam, which misses a few rows in its own index too)
  const expect = async (what, q, want, first) => {
    n++;
    let got;
    try { got = await ids(q); } catch (e) { got = [`error: ${e.message.split("\n")[0]}`]; }
    if (first) got = got.slice(0, first);
    if (!sameSet(got, want) && fails.length < 20) fails.push(`${what}: got [${got.slice(0, 8)}${got.length > 8 ? ",…" : ""}] (${got.length}), want ${want.length} [${want.slice(0, 8)}]`);
  };
  const where = (f) => all.filter(f).map((r) => r.id);
  const l2 = (a, b) => a.reduce((s, x, i) => s + (x - b[i]) ** 2, 0);
  const nearest = (v, f) => all.filter(f).reduce((best, o) => (best === null || l2(v, o.vec) < l2(v, best.vec) ? o : best), null).id;
  await expect("where num >= 100000", t.query().where("num >= 100000").select(["id"]).limit(10000), where((r) => r.num >= 100000));
  await expect("where num < 1000", t.query().where("num < 1000").select(["id"]).limit(10000), where((r) => r.num < 1000));
  for (const r of fresh.filter((_, i) => i % 5 === 0)) {
    await expect(`where num = ${r.num}`, t.query().where(`num = ${r.num}`).select(["id"]), [r.id]);
    await expect(`vector search of ${r.id}'s vector prefiltered num = ${r.num}`,
      t.vectorSearch(r.vec).where(`num = ${r.num}`).select(["id"]).limit(5), [r.id]);
    await expect(`vector search of ${r.id}'s vector prefiltered num >= 100000, first`,
      t.vectorSearch(r.vec).where("num >= 100000").select(["id"]).limit(10), [nearest(r.vec, (o) => o.num >= 100000)], 1);
  }
  for (let i = 0; i < 50; i += 7) /* stale: the base row's old num is gone */
    await expect(`stale where num = ${i}`, t.query().where(`num = ${i}`).select(["id"]), []);
  if (kinds.includes("bitmap") || kinds.includes("btree")) {
    await expect("where cat = 'k3'", t.query().where("cat = 'k3'").select(["id"]).limit(10000), where((r) => r.cat === "k3"));
    await expect("where cat = 'kupd'", t.query().where("cat = 'kupd'").select(["id"]).limit(10000), where((r) => r.cat === "kupd"));
    await expect("where score >= 25000.25", t.query().where("score >= 25000.25").select(["id"]).limit(10000), where((r) => r.score >= 25000.25));
    await expect("where score < 0", t.query().where("score < 0").select(["id"]).limit(10000), where((r) => r.score < 0));
    await expect("where score = 3", t.query().where("score = 3").select(["id"]), where((r) => r.score === 3));
  }
  // LanceDB reads the SSTable through its BTree (memwald's, sindex.h): the
  // SSTable arm of the plan (the LanceRead of a _mem_wal data file) holds a
  // ScalarIndexQuery on the index
  const planned = async (expr, index) => {
    n++;
    const plan = await t.query().where(expr).explainPlan(true);
    const arm = plan.slice(plan.indexOf("_mem_wal"), plan.indexOf("PkBlockFilterExec") > plan.indexOf("_mem_wal") ? plan.indexOf("PkBlockFilterExec") : undefined);
    if (!arm.includes(`@${index}(BTree)`)) fails.push(`where ${expr}: the SSTable arm reads no BTree ${index}:\n${plan}`);
  };
  const sst = fresh[3];
  if (kinds.includes("btree")) await planned(`num = ${sst.num}`, "num_idx");
  if (kinds.includes("btree") && !kinds.includes("bitmap")) await planned(`cat = '${sst.cat}'`, "cat_idx");
  t.close();
  if (fails.length) {
    console.error(`FAIL: ${fails.length} of ${n} checks\n  ${fails.join("\n  ")}`);
    process.exit(1);
  }
  console.log(`ok ${n} checks (${kinds.join(",")}): every fresh row found, no stale one`);
}

// Full-text: a table {id PK, vec, text} with an IVF_PQ index and an inverted
// index on text with the FTS params given as JSON, the default write spec,
// 300 base rows and 60 fresh rows written and flushed by LanceDB's writer
// (words with capitals, plurals, stop words and accents).
const WORDS = ["cherry", "cherries", "running", "run", "the", "and", "Apple", "café", "cafe"];
const TERMS = ["cherries", "run", "the", "apple", "cafe", "x1"];
const ftsRows = (a, n) => Array.from({ length: n }, (_, i) => ({
  id: BigInt(a + i), vec: [Math.sin(a + i), Math.cos(a + i), 1, 0],
  text: `${WORDS[(a + i) % WORDS.length]} ${WORDS[(a + 3 * i) % WORDS.length]} x${(a + i) % 4}` }));

async function ftsMake() {
  const fschema = new arrow.Schema([
    new arrow.Field("id", new arrow.Int64(), false),
    new arrow.Field("vec", new arrow.FixedSizeList(4, new arrow.Field("item", new arrow.Float32(), true)), true),
    new arrow.Field("text", new arrow.Utf8(), true)]);
  const db = await lancedb.connect(dir);
  const t = await db.createTable("t", ftsRows(0, 300), { schema: fschema });
  await t.createIndex("vec", { config: lancedb.Index.ivfPq({ numPartitions: 1, numSubVectors: 1 }) });
  await t.createIndex("text", { config: lancedb.Index.fts(JSON.parse(opt.params || "{}")) });
  await t.setUnenforcedPrimaryKey("id");
  await t.setLsmWriteSpec({ specType: "unsharded" });
  await t.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(ftsRows(100000, 60));
  await t.closeLsmWriters();
  t.close();
  console.log(`made ${dir}/t.lance: FTS params ${opt.params || "{}"}, 60 fresh rows flushed by LanceDB`);
}

// fullTextSearch of each term on DIR and on opt.other: prints "same" or
// "differ" per term (ids and scores of the fresh rows), then one summary
// line "fts: N of M terms differ".
async function ftsCompare() {
  const open = async (d) => (await lancedb.connect(d)).openTable("t");
  const [a, b] = [await open(dir), await open(opt.other)];
  const answer = async (t, term) => (await t.query().fullTextSearch(term, { columns: ["text"] }).select(["id"]).limit(1000).toArray())
    .filter((r) => r.id >= 100000n).map((r) => `${r.id}:${r._score.toFixed(4)}`).sort();
  let differ = 0;
  for (const term of TERMS) {
    const [x, y] = [await answer(a, term), await answer(b, term)];
    const same = x.join() === y.join();
    differ += !same;
    console.log(`${term}: ${same ? "same" : "differ"} (fresh hits ${x.length} vs ${y.length}${x.length && y.length ? `, e.g. ${x[0]} vs ${y[0]}` : ""})`);
  }
  console.log(`fts: ${differ} of ${TERMS.length} terms differ`);
}

if (cmd === "make") await make();
else if (cmd === "check") await check();
else if (cmd === "fts-make") await ftsMake();
else if (cmd === "fts-compare") await ftsCompare();
else throw new Error("usage: sindex.mjs make|check|fts-make|fts-compare DIR [options]");
process.exit(0);
