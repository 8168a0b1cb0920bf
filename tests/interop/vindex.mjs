#!/usr/bin/env node
// vindex.mjs — LanceDB 0.39.0's vector search on an SSTable whose vector
// index we wrote (issue 27; tests/interop/vindex.sh runs it around
// mw_sst_tool).
//
//   node vindex.mjs make DIR --distance l2|cosine|dot --index ivfpq|hnswsq
//       [--dim D] [--base N] [--rows N] [--nulls K]
//     A table DIR/t.lance {id int64 PK, vec fixed_size_list<float32, D>},
//     N base rows, the base index on vec (createIndex's IVF_PQ or hnswSq with
//     the distance), the default unsharded LSM write spec (every index
//     maintained), then ROWS fresh rows (ids from 100000, every K-th vector
//     null) through LanceDB's own writer, flushed by closeLsmWriters (none
//     with --rows 0: another writer adds them and rewrites fresh.json). The
//     fresh rows go to DIR/fresh.json.
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
  const data = arrow.makeData({ type: new arrow.Struct(schema.fields), length: n, nullCount: 0, children: [id, vec] });
  return { table: new arrow.Table(schema, [new arrow.RecordBatch(schema, data)]), ids, vecs };
}

async function make() {
  const schema = new arrow.Schema([
    new arrow.Field("id", new arrow.Int64(), false),
    new arrow.Field("vec", new arrow.FixedSizeList(dim, new arrow.Field("item", new arrow.Float32(), true)), true),
  ]);
  const next = rng(0x5eed + dim);
  const db = await lancedb.connect(dir);
  const t = await db.createTable("t", batch(schema, 0, Number(opt.base), 0, next).table);
  const config =
    opt.index === "hnswsq" ? lancedb.Index.hnswSq({ distanceType: opt.distance })
      : lancedb.Index.ivfPq({ distanceType: opt.distance, numPartitions: 1, numSubVectors: Math.max(1, dim / 8) });
  await t.createIndex("vec", { config });
  await t.setUnenforcedPrimaryKey("id");
  await t.setLsmWriteSpec({ specType: "unsharded" });
  const spec = await t.getLsmWriteSpec();
  const fresh = Number(opt.rows) > 0 ? batch(schema, 100000, Number(opt.rows), Number(opt.nulls), next) : { ids: [], vecs: [] };
  if (fresh.table) { /* --rows 0: the table only, for another writer (memwald) */
    await t.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(fresh.table);
    await t.closeLsmWriters();
  }
  t.close();
  const rows = fresh.ids.map((id, i) => ({ id: id.toString(), vec: fresh.vecs[i] }));
  fs.writeFileSync(path.join(dir, "fresh.json"), JSON.stringify({ distance: opt.distance, maintained: spec.maintainedIndexes, rows }));
  console.log(`made ${dir}/t.lance: ${opt.base} base rows, ${rows.length} fresh, maintained ${JSON.stringify(spec.maintainedIndexes)}`);
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

if (cmd === "make") await make();
else if (cmd === "search") await search();
else throw new Error("usage: vindex.mjs make|search DIR [options]");
// Exit at once, as check.mjs does, rather than wait for LanceDB's native
// threads to wind down: a CI run on a loaded machine saw `make` print its
// result and still exit non-zero with nothing on stderr.
process.exit(0);
