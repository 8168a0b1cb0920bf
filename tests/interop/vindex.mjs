#!/usr/bin/env node
// vindex.mjs — LanceDB 0.39.0's vector search on an SSTable whose vector
// index we wrote (issue 27; tests/interop/vindex.sh runs it around
// mw_sst_tool).
//
//   node vindex.mjs make DIR --distance l2|cosine|dot --index ivfpq|hnswsq|default
//       [--dim D] [--base N] [--rows N] [--nulls K] [--spec unsharded|bucket] [--cat btree]
//     A table DIR/t.lance {id int64 PK, vec fixed_size_list<float32, D>}
//     (DIR may be s3://BUCKET/PREFIX: the endpoint and keys of the
//     environment tests/s3/with-s3.sh exports), N base rows, the base index
//     on vec (IVF_PQ or hnswSq with the distance; `default`: createIndex("vec")
//     with no config, LanceDB's choice), the default LSM write spec (every
//     index maintained; unsharded, or bucket(id, 4)), then ROWS fresh rows
//     (ids from 100000, every K-th vector
//     null) through LanceDB's own writer, flushed by closeLsmWriters (none
//     with --rows 0: another writer adds them and rewrites fresh.json). The
//     fresh rows go to DIR/fresh.json. With --cat the table has a third
//     column cat int64 (= id % 12 in the rows made here) with a BTree index,
//     maintained by the default write spec.
//   node vindex.mjs search DIR [--uuid U]
//     For every fresh row with a vector: LanceDB's default vector search
//     (LSM routing: base index + each SSTable's index + MemTable) for 10
//     neighbors must answer that row first, and so must the same search
//     filtered to the fresh ids. With limit(1) the count is printed only:
//     LanceDB then searches each SSTable's graph with k = 1 and a narrow
//     beam, which stops in a local minimum for a few rows, its own SSTable
//     index included (measured: 197/200 for LanceDB's, 199/200 for ours on
//     the same rows). With --uuid the plan must read the SSTable through
//     index U.
//     Prints "ok rows=N ..." or the misses, exit 1.
//   node vindex.mjs lsm DIR MODEL.json
//     MODEL = {rows: [{id, vec}] every live row with a vector, fresh: [id]
//     the rows written since the table was made, stale: [{id, vec}] vectors an
//     update replaced, deleted: [{id, vec}] deleted rows' last vectors}.
//     LanceDB's default vector search (l2, 10 neighbors, LSM routing):
//     each fresh row's own vector answers that row first; a stale or deleted
//     vector never answers its row; and every row any of these searches
//     answers is live, with the model's vector for it (never an old
//     version). Prints "ok ..." or the failures, exit 1.
//   node vindex.mjs lance-write DIR ROWS.json [--model MODEL.json] [--end close|kill]
//     LanceDB's own shard writer (unsharded table) writes ROWS ([{id, vec}])
//     in one mergeInsert, which takes the shard over from the writer before
//     it (claim, fence, replay of its WAL); with --model the lsm check runs
//     on the writer's handle; then closeLsmWriters (flush), or with --end
//     kill a SIGKILL of this process (the rows stay in LanceDB's WAL). With
//     a cat column the rows carry cat, and the filter check (without the
//     plan) runs on the writer's handle too.
//   node vindex.mjs filter DIR MODEL.json [--sstables N]
//     MODEL as lsm's, each row, stale and deleted entry with its cat:
//     LanceDB's searches filtered on cat must answer exactly the model's live
//     rows, and their plans read every SSTable through its BTree cat_idx
//     (filterCheck below); with --sstables N the plan of where() reads N
//     SSTables. Prints "ok ..." or the failures, exit 1.
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
const opt = { distance: "l2", index: "ivfpq", dim: "16", base: "300", rows: "200", nulls: "0" };
for (let i = 0; i < rest.length; i++) if (rest[i].startsWith("--")) opt[rest[i].slice(2)] = rest[++i];
const args = rest.filter((a, i) => !a.startsWith("--") && !(i > 0 && rest[i - 1].startsWith("--")));
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

// --cat: every row carries cat int64 = id % NCAT (base and LanceDB-made rows).
const NCAT = 12;

function batch(schema, first, n, nullEvery, next) {
  const ids = [], vecs = [];
  const flat = new Float32Array(n * dim), valid = new Uint8Array(Math.ceil(n / 8));
  for (let i = 0; i < n; i++) {
    ids.push(BigInt(first + i));
    if (nullEvery > 0 && i % nullEvery === nullEvery - 1) {
      vecs.push(null);
      continue;
    }
    const v = Array.from({ length: dim }, () => Math.fround(next() * 2 - 1));
    vecs.push(v);
    flat.set(v, i * dim);
    valid[i >> 3] |= 1 << (i & 7);
  }
  const nulls = vecs.filter((v) => v === null).length;
  const vec = arrow.makeData({
    type: schema.fields[1].type, length: n, nullCount: nulls, nullBitmap: nulls ? valid : undefined,
    child: arrow.makeData({ type: new arrow.Float32(), length: n * dim, data: flat }),
  });
  const id = arrow.vectorFromArray(ids, new arrow.Int64()).data[0];
  const children = [id, vec];
  if (schema.fields.length > 2) children.push(arrow.vectorFromArray(ids.map((i) => i % BigInt(NCAT)), new arrow.Int64()).data[0]);
  const data = arrow.makeData({ type: new arrow.Struct(schema.fields), length: n, nullCount: 0, children });
  return { table: new arrow.Table(schema, [new arrow.RecordBatch(schema, data)]), ids, vecs };
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

async function make() {
  const schema = new arrow.Schema([
    new arrow.Field("id", new arrow.Int64(), false),
    new arrow.Field("vec", new arrow.FixedSizeList(dim, new arrow.Field("item", new arrow.Float32(), true)), true),
    ...(opt.cat ? [new arrow.Field("cat", new arrow.Int64(), true)] : []),
  ]);
  const next = rng(0x5eed + dim);
  const db = await connect(dir);
  const base = batch(schema, 0, Number(opt.base), 0, next);
  const t = await db.createTable("t", base.table);
  const config =
    opt.index === "hnswsq" ? lancedb.Index.hnswSq({ distanceType: opt.distance })
      : opt.index === "default" ? undefined
        : lancedb.Index.ivfPq({ distanceType: opt.distance, numPartitions: 1, numSubVectors: Math.max(1, dim / 8) });
  await t.createIndex("vec", config ? { config } : undefined);
  if (opt.cat) await t.createIndex("cat", { config: lancedb.Index.btree() });
  await t.setUnenforcedPrimaryKey("id");
  await t.setLsmWriteSpec(opt.spec === "bucket" ? { specType: "bucket", column: "id", numBuckets: 4 } : { specType: "unsharded" });
  const spec = await t.getLsmWriteSpec();
  const fresh = Number(opt.rows) > 0 ? batch(schema, 100000, Number(opt.rows), Number(opt.nulls), next) : { ids: [], vecs: [] };
  if (fresh.table) { /* --rows 0: the table only, for another writer (memwald) */
    await t.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(fresh.table);
    await t.closeLsmWriters();
  }
  const indices = await t.listIndices();
  t.close();
  const rows = fresh.ids.map((id, i) => ({ id: id.toString(), vec: fresh.vecs[i] }));
  const baseRows = base.ids.map((id, i) => ({ id: id.toString(), vec: base.vecs[i], ...(opt.cat ? { cat: Number(id) % NCAT } : {}) }));
  const out = opt.out || (dir.startsWith("s3://") ? null : path.join(dir, "fresh.json"));
  if (out) fs.writeFileSync(out, JSON.stringify({ distance: opt.distance, maintained: spec.maintainedIndexes, rows, base: baseRows }));
  console.log(`made ${dir}/t.lance: ${opt.base} base rows, ${rows.length} fresh, maintained ${JSON.stringify(spec.maintainedIndexes)}, ` +
    `spec ${spec.specType}, indices ${JSON.stringify(indices.map((i) => [i.name, i.indexType]))}`);
}

async function search() {
  const fresh = JSON.parse(fs.readFileSync(path.join(dir, "fresh.json"), "utf8"));
  const db = await lancedb.connect(dir);
  const t = await db.openTable("t");
  const n = { k1: 0, k10: 0, filtered: 0, checked: 0 };
  const misses = [];
  const first = async (q, k) => {
    const r = await q.limit(k).toArray();
    return r.length ? String(r[0].id) : "none";
  };
  // dot: a row's own vector need not be its best match (a longer vector
  // scores higher); the expected first row is the brute-force best among
  // the fresh rows, checked in the search filtered to them
  const dot = (a, b) => a.reduce((s, x, i) => s + x * b[i], 0);
  const best = (q) => {
    let id = null, d = -Infinity;
    for (const o of fresh.rows) if (o.vec && dot(q, o.vec) > d) (d = dot(q, o.vec)), (id = o.id);
    return id;
  };
  const isDot = fresh.distance === "dot";
  for (const r of fresh.rows) {
    if (r.vec === null) continue;
    n.checked++;
    const want = isDot ? best(r.vec) : r.id;
    const k1 = await first(t.search(r.vec).distanceType(fresh.distance), 1);
    const k10 = await first(t.search(r.vec).distanceType(fresh.distance), 10);
    const filtered = await first(t.vectorSearch(r.vec).distanceType(fresh.distance).where("id >= 100000"), 10);
    n.k1 += k1 === r.id;
    n.k10 += isDot || k10 === r.id; /* dot: the base rows compete; counted by the filtered search */
    n.filtered += filtered === want;
    if ((n.k10 !== n.checked || filtered !== want) && misses.length < 10) misses.push(`${r.id}: first of 10 ${k10}, filtered ${filtered} (want ${want})`);
  }
  const plan = await t.search(fresh.rows.find((r) => r.vec).vec).distanceType(fresh.distance).limit(1).explainPlan(true);
  t.close();
  const uuid = opt.uuid;
  const planOk = uuid === undefined || plan.includes(`uuid=${uuid}`);
  const line = `rows=${n.checked} found first: limit(10) ${n.k10}, filtered to fresh ids ${n.filtered}; limit(1) ${n.k1}`;
  if (n.k10 !== n.checked || n.filtered !== n.checked || n.checked === 0 || !planOk) {
    console.error(`FAIL: ${line}${planOk ? "" : `; the plan does not read index ${uuid}`}\n  ${misses.join("\n  ")}\nplan:\n${plan}`);
    process.exit(1);
  }
  console.log(`ok ${line}${uuid ? `; the plan reads the SSTable through index ${uuid}` : ""}`);
}

// The lsm check on table handle t; the failures (empty: passed) and the
// summary line.
async function lsmCheck(t, model) {
  const live = new Map(model.rows.map((r) => [String(r.id), r.vec]));
  const same = (a, b) => a !== null && b !== null && a.length === b.length && a.every((x, i) => Math.fround(x) === Math.fround(b[i]));
  const fails = [];
  const n = { fresh: 0, first: 0, k1: 0, stale: 0, deleted: 0, answered: 0 };
  const fail = (s) => { if (fails.length < 20) fails.push(s); };
  const answers = async (q, k, what) => {
    const got = await t.search(q).distanceType("l2").select(["id", "vec"]).limit(k).toArray();
    for (const r of got) {
      n.answered++;
      const id = String(r.id), v = r.vec ? Array.from(r.vec) : null;
      if (!live.has(id)) fail(`${what}: answered row ${id}, which is deleted`);
      else if (!same(live.get(id), v)) fail(`${what}: answered row ${id} with a vector that is not its current one (a stale version)`);
    }
    return got.map((r) => String(r.id));
  };
  for (const id of model.fresh) {
    const v = live.get(String(id));
    if (!v) continue;
    n.fresh++;
    const got = await answers(v, 10, `fresh row ${id}`);
    if (got[0] === String(id)) n.first++;
    else fail(`fresh row ${id}: first of 10 is ${got[0] ?? "none"}`);
    const one = await t.search(v).distanceType("l2").limit(1).toArray();
    n.k1 += one.length > 0 && String(one[0].id) === String(id);
  }
  for (const [kind, list] of [["stale", model.stale], ["deleted", model.deleted]]) {
    for (const r of list) {
      n[kind]++;
      const got = await answers(r.vec, 10, `${kind} vector of row ${r.id}`);
      /* a stale vector may still answer its row, but only with its new vector (checked above) */
      if (kind === "deleted" && got.includes(String(r.id))) fail(`deleted row ${r.id} answered`);
    }
  }
  if (n.fresh === 0) fails.push("no fresh row to search for");
  return { fails, line: `fresh rows ${n.fresh}, found first ${n.first} (limit(1): ${n.k1}); stale vectors ${n.stale}, deleted rows ${n.deleted}; ${n.answered} answers checked` };
}

function report(what, r) {
  if (r.fails.length) {
    console.error(`FAIL: ${what}${r.line}\n  ${r.fails.join("\n  ")}`);
    process.exit(1);
  }
  console.log(`ok ${what}${r.line}`);
}

async function lsm() {
  const model = JSON.parse(fs.readFileSync(args[0], "utf8"));
  const db = await connect(dir);
  const t = await db.openTable("t");
  const r = await lsmCheck(t, model);
  t.close();
  report("", r);
}

// LanceDB's own shard writer on the unsharded table: one mergeInsert of
// ROWS (its first write claims the shard: epoch + 1, fence sentinel, replay
// of the WAL the previous writer left), then --model's lsm check on the
// writer's own handle (base index + SSTables + its MemTable), then `close`
// (closeLsmWriters: its MemTable flushed under its epoch) or `kill` (SIGKILL
// of this process: its rows stay in its WAL only, for the next writer).
async function lanceWrite() {
  const rows = JSON.parse(fs.readFileSync(args[0], "utf8"));
  const db = await connect(dir);
  const t = await db.openTable("t");
  const theirs = (await t.schema()).fields; /* its arrow module is not ours: the schema anew */
  const d = theirs[1].type.listSize;
  const schema = new arrow.Schema([
    new arrow.Field("id", new arrow.Int64(), false),
    new arrow.Field("vec", new arrow.FixedSizeList(d, new arrow.Field("item", new arrow.Float32(), true)), true),
    ...(theirs.length > 2 ? [new arrow.Field("cat", new arrow.Int64(), true)] : []),
  ]);
  const table = batchOf(schema, d, rows);
  await t.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(table);
  console.log(`ok LanceDB's writer wrote ${rows.length} rows`);
  if (opt.model) {
    const model = JSON.parse(fs.readFileSync(opt.model, "utf8"));
    report("on the writer's handle: ", await lsmCheck(t, model));
    if (theirs.length > 2) report("filtered, on the writer's handle: ", await filterCheck(t, model, false));
  }
  if (opt.end === "kill") process.kill(process.pid, "SIGKILL");
  await t.closeLsmWriters();
  t.close();
  console.log("ok LanceDB's writer closed (flushed)");
}

// An Arrow table of rows [{id, vec[, cat]}] (no null vector) in schema's layout.
function batchOf(schema, d, rows) {
  const flat = new Float32Array(rows.length * d);
  rows.forEach((r, i) => flat.set(r.vec, i * d));
  const vec = arrow.makeData({ type: schema.fields[1].type, length: rows.length, nullCount: 0,
    child: arrow.makeData({ type: new arrow.Float32(), length: rows.length * d, data: flat }) });
  const id = arrow.vectorFromArray(rows.map((r) => BigInt(r.id)), new arrow.Int64()).data[0];
  const children = [id, vec];
  if (schema.fields.length > 2) children.push(arrow.vectorFromArray(rows.map((r) => BigInt(r.cat)), new arrow.Int64()).data[0]);
  const data = arrow.makeData({ type: new arrow.Struct(schema.fields), length: rows.length, nullCount: 0, children });
  return new arrow.Table(schema, [new arrow.RecordBatch(schema, data)]);
}

// The SSTable arms of a plan: each line that reads a _mem_wal data file
// with the lines indented below it (its inputs), as one text.
function sstableArms(plan) {
  const lines = plan.split("\n"), indent = (l) => l.length - l.trimStart().length;
  const arms = [];
  lines.forEach((l, i) => {
    if (!l.includes("_mem_wal")) return;
    let j = i + 1;
    while (j < lines.length && lines[j].trim() !== "" && indent(lines[j]) > indent(l)) j++;
    arms.push(lines.slice(i, j).join("\n"));
  });
  return arms;
}

// LanceDB's filtered searches on cat (a BTree maintained by the write spec)
// on table handle t, against MODEL (rows carry cat; stale and deleted
// entries carry the cat they had): query().where("cat = C") answers exactly
// the live rows whose cat is C, for every C any row ever had; a vector
// search of a fresh row's vector prefiltered on its cat answers that row
// first, and each answer is live, with the model's cat and vector; a stale
// or deleted vector prefiltered on its old cat never answers its row with
// that cat or vector. With plan, the plan of where("cat = C") and of the
// prefiltered vector search reads every SSTable (each _mem_wal data file
// of the plan) through a BTree cat_idx: the index is used, not a scan;
// with want, the plan of where() reads that many distinct SSTables.
async function filterCheck(t, model, plan, want) {
  const live = new Map(model.rows.map((r) => [String(r.id), r]));
  const same = (a, b) => a !== null && b !== null && a.length === b.length && a.every((x, i) => Math.fround(x) === Math.fround(b[i]));
  const fails = [];
  const fail = (s) => { if (fails.length < 20) fails.push(s); };
  const n = { cats: 0, matched: 0, vsearch: 0, first: 0, old: 0, answered: 0, arms: 0, ssts: [] };
  const cats = new Set([...model.rows, ...model.stale, ...model.deleted].map((r) => Number(r.cat)));
  for (const c of [...cats].sort((a, b) => a - b)) {
    n.cats++;
    const want = model.rows.filter((r) => Number(r.cat) === c).map((r) => String(r.id)).sort();
    const got = (await t.query().where(`cat = ${c}`).select(["id"]).limit(100000).toArray()).map((r) => String(r.id)).sort();
    n.matched += got.length;
    if (got.join() !== want.join()) {
      const extra = got.filter((i) => !want.includes(i)), missing = want.filter((i) => !got.includes(i));
      fail(`where cat = ${c}: ${got.length} rows, want ${want.length}; missing [${missing.slice(0, 8)}], extra (stale or deleted) [${extra.slice(0, 8)}]`);
    }
  }
  const answers = async (v, c, what) => {
    const got = await t.vectorSearch(v).distanceType("l2").where(`cat = ${c}`).select(["id", "vec", "cat"]).limit(10).toArray();
    for (const r of got) {
      n.answered++;
      const id = String(r.id), m = live.get(id);
      if (!m) fail(`${what}: answered row ${id}, which is deleted`);
      else if (Number(r.cat) !== c || Number(m.cat) !== c) fail(`${what}: answered row ${id} with cat ${r.cat}, whose cat is ${m.cat}`);
      else if (!same(m.vec, r.vec ? Array.from(r.vec) : null)) fail(`${what}: answered row ${id} with a stale vector`);
    }
    return got.map((r) => String(r.id));
  };
  const fresh = model.fresh.map(String).filter((id) => live.has(id));
  for (const id of fresh.filter((_, i) => i % Math.max(1, Math.floor(fresh.length / 40)) === 0)) {
    const r = live.get(id);
    n.vsearch++;
    const got = await answers(r.vec, Number(r.cat), `fresh row ${id} prefiltered cat = ${r.cat}`);
    if (got[0] === id) n.first++;
    else fail(`fresh row ${id} prefiltered cat = ${r.cat}: first of 10 is ${got[0] ?? "none"}`);
  }
  for (const r of [...model.stale.slice(-20), ...model.deleted.slice(-20)]) {
    n.old++;
    await answers(r.vec, Number(r.cat), `old version of row ${r.id} prefiltered cat = ${r.cat}`); /* checked per answer */
  }
  if (plan) {
    const c = Number(live.get(fresh[0]).cat);
    for (const [what, q] of [[`where cat = ${c}`, t.query().where(`cat = ${c}`)],
      [`vector search prefiltered cat = ${c}`, t.vectorSearch(live.get(fresh[0]).vec).where(`cat = ${c}`).limit(10)]]) {
      const p = await q.explainPlan(true);
      const arms = sstableArms(p);
      const ssts = new Set(arms.map((arm) => arm.match(/_mem_wal\/[^/]+\/[^/]+/)?.[0]));
      n.arms += arms.length;
      n.ssts.push(ssts.size);
      const bad = arms.filter((arm) => !arm.includes("@cat_idx(BTree)"));
      if (arms.length === 0 || bad.length) fail(`${what}: ${arms.length} SSTable reads, ${bad.length} not through BTree cat_idx:\n${p}`);
      /* where() reads every SSTable (a vector search may leave some out) */
      if (what.startsWith("where") && want !== undefined && ssts.size !== want) fail(`${what}: the plan reads ${ssts.size} SSTables, want ${want}:\n${p}`);
    }
  }
  if (fresh.length === 0) fails.push("no fresh row to search for");
  return { fails, line: `${n.cats} cats: where cat = C answered ${n.matched} rows (model: ${model.rows.length}); ${n.vsearch} ` +
    `prefiltered vector searches found their row first ${n.first}; ${n.old} old versions searched; ${n.answered} answers checked` +
    (plan ? `; the plans read ${n.ssts.join(" and ")} SSTables (where, vector search) in ${n.arms} reads` : "") };
}

async function filter() {
  const model = JSON.parse(fs.readFileSync(args[0], "utf8"));
  const db = await connect(dir);
  const t = await db.openTable("t");
  const r = await filterCheck(t, model, true, opt.sstables === undefined ? undefined : Number(opt.sstables));
  t.close();
  report("", r);
}

if (cmd === "make") await make();
else if (cmd === "filter") await filter();
else if (cmd === "search") await search();
else if (cmd === "lsm") await lsm();
else if (cmd === "lance-write") await lanceWrite();
else throw new Error("usage: vindex.mjs make|search DIR [options]");
// Exit at once, as check.mjs does, rather than wait for LanceDB's native
// threads to wind down: a CI run on a loaded machine saw `make` print its
// result and still exit non-zero with nothing on stderr.
process.exit(0);
