#!/usr/bin/env node
// proofs.mjs — memwald's engine (proof_tool) and LanceDB 0.39.0's LSM writer
// on one table, coordinated through pipes (proof_tool prints one line per
// event; it waits for a stdin line where the proof needs LanceDB to act
// first). No sleeps.
//
//   node proofs.mjs fence3 TOOL TABLE --prior FILE
//       we hold the shard and keep writing; LanceDB opens it (mergeInsert:
//       claims epoch+1, writes its sentinel). Our next write is refused
//       (-ESTALE naming the new epoch), nothing after the fence is acked;
//       after LanceDB closes, every LanceDB row and every row we acked is
//       there, and no row we were refused.
//   node proofs.mjs fence4 TOOL TABLE --prior FILE
//       LanceDB holds the shard (open writer, rows written); we claim it;
//       LanceDB's next mergeInsert fails as fenced; our flush + a fresh
//       LanceDB read show every acknowledged row (theirs and ours).
//   node proofs.mjs drop TOOL TABLE --prior FILE
//       LanceDB holds every bucket shard; we drop the table; LanceDB can no
//       longer open it.
//   node proofs.mjs gone TOOL TABLE        LanceDB cannot open TABLE
//   node proofs.mjs refusals TOOL DIR/x.lance
//       LanceDB makes tables in DIR: without a MemWAL index, with one that
//       maintains an index; mw_table_open must refuse each with its reason.
//   node proofs.mjs crash TOOL TABLE --prior FILE [--iterations N] [--seed S]
//       20 times: a writer (proof_tool crashw) is SIGKILLed at a random
//       point; a fresh process recovers (claim, replay, flush). Then
//       LanceDB's read must match the model of acknowledged writes.
import * as fs from "node:fs";
import * as path from "node:path";
import { spawn } from "node:child_process";
import * as readline from "node:readline";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { connect, tableLocation } from "../interop/lancedb_open.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const interop = path.resolve(here, "../interop");
if (!fs.existsSync(path.join(interop, "node_modules", "@lancedb", "lancedb"))) {
  console.error(`proofs: ${interop}/node_modules is missing: run 'npm install --no-audit --no-fund' there`);
  process.exit(2);
}
const require = createRequire(path.join(interop, "check.mjs"));
const lancedb = require("@lancedb/lancedb");

const args = process.argv.slice(2);
const opt = {};
const pos = [];
for (let i = 0; i < args.length; i++) {
  if (args[i].startsWith("--")) opt[args[i].slice(2)] = args[++i];
  else pos.push(args[i]);
}
const [cmd, tool, tableArg] = pos;
if (!cmd || !tool || !tableArg) {
  console.error("usage: node proofs.mjs fence3|fence4|drop|gone|crash TOOL TABLE [--prior FILE]");
  process.exit(2);
}
const loc = tableLocation(tableArg); // a folder or s3://… (MW_TEST_S3)
const tableDir = loc.table;
const dbDir = loc.db;
const tname = loc.name;

let failed = false;
function check(ok, what) {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failed = true;
}

// A child whose stdout lines can be awaited one by one.
function child(argv) {
  const p = spawn(tool, argv, { stdio: ["pipe", "pipe", "inherit"] });
  const lines = [];
  let waiter = null;
  let exitCode = null, exitSignal = null;
  const exited = new Promise((res) => p.on("exit", (code, sig) => { exitCode = code; exitSignal = sig; res(); if (waiter) waiter(); }));
  readline.createInterface({ input: p.stdout }).on("line", (l) => { lines.push(l); if (waiter) waiter(); });
  let at = 0;
  return {
    p, lines, exited,
    get code() { return exitCode; },
    get signal() { return exitSignal; },
    // next line (or null at exit)
    async next() {
      for (;;) {
        if (at < lines.length) return lines[at++];
        if (exitCode !== null || exitSignal !== null) { await new Promise((r) => setImmediate(r)); if (at < lines.length) continue; return null; }
        await new Promise((r) => { waiter = r; });
        waiter = null;
      }
    },
    async until(re) {
      for (;;) {
        const l = await this.next();
        if (l === null) throw new Error(`proof_tool ${argv[0]} exited (${exitCode ?? exitSignal}) before /${re.source}/`);
        if (re.test(l)) return l;
      }
    },
  };
}

async function fields() {
  const db = await connect(lancedb, loc);
  const t = await db.openTable(tname);
  const s = await t.schema();
  t.close();
  return s.fields;
}

function rowsFor(ids, tag, fs_) {
  return ids.map((id) => {
    const r = {};
    for (const f of fs_) r[f.name] = null;
    r.id = BigInt(id);
    r.name = `${tag}_${id}`;
    r.v = Number(id);
    return r;
  });
}
const merge = (t, rows) => t.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(rows);
const range = (lo, n) => Array.from({ length: n }, (_, i) => lo + i);

async function readAll() {
  const db = await connect(lancedb, loc);
  const t = await db.openTable(tname);
  const rows = await t.query().toArray();
  t.close();
  const m = new Map();
  for (const r of rows) m.set(BigInt(r.id), r.name);
  return { rows, byId: m };
}

const priorIds = () => {
  if (!opt.prior) return new Map();
  const m = new Map();
  for (const l of fs.readFileSync(opt.prior, "utf8").split("\n")) {
    if (!l || l.startsWith('{"rows":')) continue;
    const o = JSON.parse(l);
    m.set(BigInt(o.id), o.name);
  }
  return m;
};

function checkPrior(byId, prior) {
  let bad = 0;
  for (const [id, name] of prior) if (byId.get(id) !== name) bad++;
  check(bad === 0, `all ${prior.size} prior rows unchanged (${bad} differ)`);
}

// Spark/Iceberg murmur3 bucket of an int64 (memwal.md §8.3), as lance_replay.mjs.
const mixK = (k) => Math.imul((Math.imul(k, 0xcc9e2d51) << 15) | (Math.imul(k, 0xcc9e2d51) >>> 17), 0x1b873593);
const mixH = (h, k) => { h ^= k; h = (h << 13) | (h >>> 19); return (Math.imul(h, 5) + 0xe6546b64) | 0; };
function fmix(h, n) {
  h ^= n; h ^= h >>> 16; h = Math.imul(h, 0x85ebca6b); h ^= h >>> 13; h = Math.imul(h, 0xc2b2ae35); h ^= h >>> 16;
  return h | 0;
}
function bucketOf(id, k) {
  const u = BigInt.asUintN(64, id);
  const lo = Number(u & 0xffffffffn) | 0, hi = Number(u >> 32n) | 0;
  return ((fmix(mixH(mixH(0, mixK(lo)), mixK(hi)), 8) & 0x7fffffff) >>> 0) % k;
}

const LO = 2000000; // our ids: LO + 10*j + r, name m<j> / c<j>
const LL = 3000000; // LanceDB's ids

async function fence3() {
  const fs_ = await fields();
  const prior = priorIds();
  const c = child(["hold", tableDir, "--lo", String(LO)]);
  await c.until(/^ready$/);
  // LanceDB opens the shard while we keep writing.
  const db = await connect(lancedb, loc);
  const A = await db.openTable(tname);
  let err1 = null, err2 = null;
  try { await merge(A, rowsFor(range(LL, 20), "L1", fs_)); } catch (e) { err1 = e.message; }
  check(err1 === null, `LanceDB's mergeInsert while we hold the shard succeeds${err1 ? ": " + err1 : ""}`);
  // LanceDB has fenced us: a hold that paused (proof_tool's 1 000 writes)
  // writes on and must be refused. One already refused has left stdin.
  c.p.stdin.on("error", () => {});
  c.p.stdin.end("go\n");
  const acked = new Set(), refused = new Set();
  let after = null, done = null;
  await c.until(/^done /);
  await c.exited;
  for (const l of c.lines) {
    let m;
    if ((m = /^ack (\d+)$/.exec(l))) acked.add(Number(m[1]));
    else if ((m = /^refused (\d+) (-?\d+) (.*)$/.exec(l))) { refused.add(Number(m[1])); if (refused.size === 1) console.log(`first refusal: ${l}`); }
    else if (l.startsWith("after ")) after = l;
    else if (l.startsWith("done ")) done = l;
  }
  check(c.code === 0 && done === `done acked=${acked.size} refused=${refused.size} late_acks=0`, `proof_tool hold exit ${c.code} (${done})`);
  const firstRef = Math.min(...refused);
  check(refused.size > 0 && [...acked].every((j) => j < firstRef), `no write after the fence was acked (acked ${acked.size}, refused ${refused.size}, first refused ${firstRef})`);
  const mm = after && /^after (-?\d+) .*local epoch (\d+) < stored epoch (\d+)/.exec(after);
  check(mm && Number(mm[1]) === -116 && Number(mm[3]) > Number(mm[2]), `a write after the fence fails at once with -ESTALE naming the new epoch: ${after}`);
  try { await merge(A, rowsFor(range(LL + 20, 20), "L2", fs_)); } catch (e) { err2 = e.message; }
  check(err2 === null, `LanceDB keeps writing after fencing us${err2 ? ": " + err2 : ""}`);
  await A.closeLsmWriters();
  A.close();
  const { rows, byId } = await readAll();
  checkPrior(byId, prior);
  let missL = 0, missOurs = 0, ghosts = 0;
  for (const id of range(LL, 40)) if (byId.get(BigInt(id)) !== `${id < LL + 20 ? "L1" : "L2"}_${id}`) missL++;
  for (const j of acked) for (let r = 0; r < 10; r++) if (byId.get(BigInt(LO + 10 * j + r)) !== `m${j}`) missOurs++;
  for (const j of refused) for (let r = 0; r < 10; r++) if (byId.has(BigInt(LO + 10 * j + r))) ghosts++;
  check(missL === 0, `every LanceDB row is there (${missL} missing)`);
  check(missOurs === 0, `every row we acknowledged before the fence is there (${acked.size * 10} rows, ${missOurs} missing)`);
  check(ghosts === 0, `no row we refused is there (${ghosts} present)`);
  check(rows.length === prior.size + 40 + 10 * acked.size, `row count ${rows.length} = prior ${prior.size} + 40 + ${10 * acked.size}`);
}

async function fence4() {
  const fs_ = await fields();
  const prior = priorIds();
  const db = await connect(lancedb, loc);
  const A = await db.openTable(tname);
  await merge(A, rowsFor(range(LL, 20), "L1", fs_));
  console.log("LanceDB holds the shard (20 rows written)");
  const c = child(["take", tableDir, "--lo", String(LO), "--n", "100"]);
  console.log(await c.until(/^claimed epoch/));
  await c.until(/^ready$/);
  let err = null;
  try { await merge(A, rowsFor(range(LL + 100, 10), "L2", fs_)); } catch (e) { err = e.message; }
  console.log(`LanceDB's mergeInsert after our claim: ${err ?? "succeeded"}`);
  check(err !== null && /Writer fenced \(peer claimed epoch\)/.test(err) && /local epoch \d+ < stored epoch \d+/.test(err),
    "LanceDB's next mergeInsert fails as fenced");
  c.p.stdin.write("go\n");
  const rel = await c.until(/^released/);
  await c.exited;
  check(c.code === 0 && rel === "released failed=0", `we wrote 200 more rows and flushed (${rel})`);
  const acked = c.lines.filter((l) => l.startsWith("acked ")).map((l) => Number(l.slice(6)));
  const { rows, byId } = await readAll();
  checkPrior(byId, prior);
  let missL = 0, missOurs = 0, ghosts = 0;
  for (const id of range(LL, 20)) if (byId.get(BigInt(id)) !== `L1_${id}`) missL++;
  for (const j of acked) for (let r = 0; r < 10; r++) if (byId.get(BigInt(LO + 10 * j + r)) !== `c${j}`) missOurs++;
  for (const id of range(LL + 100, 10)) if (byId.has(BigInt(id))) ghosts++;
  check(missL === 0, `every row LanceDB acknowledged before our claim is there (${missL} missing)`);
  check(acked.length === 20 && missOurs === 0, `every row we acknowledged is there (${acked.length * 10}, ${missOurs} missing)`);
  check(ghosts === 0, `no row of LanceDB's failed write is there (${ghosts})`);
  check(rows.length === prior.size + 20 + 200, `row count ${rows.length} = prior ${prior.size} + 20 + 200`);
}

async function gone() {
  let err = null;
  try {
    const db = await connect(lancedb, loc);
    const t = await db.openTable(tname);
    await t.countRows();
  } catch (e) { err = e.message; }
  check(err !== null, `LanceDB can no longer open the table: ${(err ?? "it opened").slice(0, 160)}`);
  // on S3 there is no directory: proof_tool's drop listed the table and
  // found no object left (it fails otherwise)
  if (!tableDir.startsWith("s3://")) check(!fs.existsSync(tableDir), "the table directory is gone");
}

async function drop() {
  const fs_ = await fields();
  const db = await connect(lancedb, loc);
  // one mergeInsert per bucket (LanceDB wants each call to target one shard)
  const byBucket = new Map();
  for (const id of range(LL, 40)) {
    const b = bucketOf(BigInt(id), 4);
    if (!byBucket.has(b)) byBucket.set(b, []);
    byBucket.get(b).push(id);
  }
  const handles = [];
  for (const ids of byBucket.values()) {
    const h = await db.openTable(tname); // one shard writer per handle
    await merge(h, rowsFor(ids, "L1", fs_));
    handles.push(h);
  }
  check(byBucket.size === 4, `LanceDB holds all ${byBucket.size} bucket shards (open writers, rows written)`);
  const c = child(["drop", tableDir, "--write"]);
  await c.until(/^dropped$/);
  await c.exited;
  check(c.code === 0, "drop_table completed while LanceDB held shards");
  await gone();
  // A writer that stays open across a drop: report what LanceDB does.
  let err = null;
  const b0 = [...byBucket.keys()][0];
  const ids0 = range(LL + 1000, 100).filter((id) => bucketOf(BigInt(id), 4) === b0).slice(0, 5);
  try { await merge(handles[0], rowsFor(ids0, "L2", fs_)); } catch (e) { err = e.message; }
  console.log(`note: LanceDB's open writer after the drop: ${err ? "failed: " + err.slice(0, 200) : "succeeded (into the dropped shard directory)"}`);
  const db2 = await connect(lancedb, loc);
  let err2 = null;
  try { const t = await db2.openTable(tname); await t.countRows(); } catch (e) { err2 = e.message; }
  check(err2 !== null, "the table still cannot be opened afterwards");
}

// ------------------------------------------------------------------ crash
// Model: write J sets keys 100000 + (J*7919 + r*131) % K (r < R) to name wJ.
// For each key, let A = the last acknowledged write touching it. The final
// name must be wJ for some write J >= A that touched the key and was
// submitted ("s J" printed before the submit) and not refused; a key no
// acknowledged write touched may also be absent.
async function crash() {
  const K = 5000, R = 100;
  const iters = Number(opt.iterations ?? 20);
  let seed = BigInt(opt.seed ?? 1234567);
  const rnd = () => { seed = (seed * 6364136223846793005n + 1442695040888963407n) & ((1n << 64n) - 1n); return Number(seed >> 33n); };
  const keysOf = (j) => range(0, R).map((r) => 100000 + ((j * 7919 + r * 131) % K));
  const sent = new Map(); // J -> "sent" | "acked" | "failed"
  const t0 = Date.now();
  for (let it = 0; it < iters; it++) {
    const killAfter = rnd() % 400; // lines of output before the kill (0: during open/claim)
    const c = child(["crashw", tableDir, "--start", String(it * 1000000), "--keys", String(K), "--rows", String(R)]);
    let seen = 0;
    for (;;) {
      if (seen >= killAfter) { c.p.kill("SIGKILL"); break; }
      const l = await c.next();
      if (l === null) break;
      seen++;
      const m = /^([saf]) (\d+)/.exec(l);
      if (!m) continue;
      const j = Number(m[2]);
      if (m[1] === "s") sent.set(j, "sent");
      else if (m[1] === "a") sent.set(j, "acked");
      else sent.set(j, "failed");
    }
    await c.exited;
    // lines already in the pipe when it died
    for (let l; (l = await c.next()) !== null;) {
      const m = /^([saf]) (\d+)/.exec(l);
      if (m) sent.set(Number(m[2]), m[1] === "s" ? (sent.get(Number(m[2])) ?? "sent") : m[1] === "a" ? "acked" : "failed");
    }
    if (c.signal !== "SIGKILL") check(false, `iteration ${it}: the writer ended on its own (${c.code})`);
    const r = child(["recover", tableDir]);
    await r.exited;
    const ok = r.code === 0 && r.lines.includes("recovered");
    if (!ok) check(false, `iteration ${it}: recovery failed (exit ${r.code})`);
    let readable = true;
    try { await readAll(); } catch (e) { readable = false; check(false, `iteration ${it}: LanceDB cannot read the table: ${e.message}`); }
    const acks = [...sent.values()].filter((v) => v === "acked").length;
    console.log(`iteration ${it}: killed after ${killAfter} lines; ${acks} writes acked so far; recovered ${ok ? "ok" : "FAILED"}; LanceDB reads it: ${readable}`);
  }
  // the model
  const lastAck = new Map(), allowed = new Map();
  const js = [...sent.keys()].sort((a, b) => a - b);
  for (const j of js) for (const k of keysOf(j)) if (sent.get(j) === "acked") lastAck.set(k, j);
  for (const j of js) {
    if (sent.get(j) === "failed") continue;
    for (const k of keysOf(j)) {
      const a = lastAck.get(k);
      if (a !== undefined && j < a) continue;
      if (!allowed.has(k)) allowed.set(k, new Set());
      allowed.get(k).add(`w${j}`);
    }
  }
  const prior = priorIds();
  const { rows, byId } = await readAll();
  checkPrior(byId, prior);
  let bad = 0, lost = 0, extra = 0, atAck = 0;
  for (let k = 100000; k < 100000 + K; k++) {
    const got = byId.get(BigInt(k));
    const ok = allowed.get(k);
    if (got === undefined) { if (lastAck.has(k)) { lost++; if (lost <= 3) console.log(`  lost key ${k}: last acked w${lastAck.get(k)}`); } continue; }
    if (!ok || !ok.has(got)) { bad++; if (bad <= 3) console.log(`  key ${k}: ${got} not in {${[...(ok ?? [])].slice(0, 5)}} (last ack w${lastAck.get(k)})`); }
    else if (got === `w${lastAck.get(k)}`) atAck++;
  }
  for (const r of rows) { const id = BigInt(r.id); if (!prior.has(id) && (id < 100000n || id >= BigInt(100000 + K))) extra++; }
  const nAck = [...sent.values()].filter((v) => v === "acked").length;
  check(nAck > 0, `${nAck} writes acknowledged across ${iters} kills`);
  check(lost === 0, `every key with an acknowledged write is present (${lastAck.size} keys, ${lost} lost)`);
  check(bad === 0, `every key holds its last acknowledged value or a later submitted one (${atAck} exactly at the last ack, ${bad} wrong)`);
  check(extra === 0, `no rows outside the model (${extra})`);
  console.log(`crash proof took ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}

// Tables LanceDB makes that memwald must refuse at open, with the reason
// (and one it used to refuse: a maintained BTree index).
async function refusals() {
  const db = await connect(lancedb, loc);
  const base = range(0, 10).map((i) => ({ id: BigInt(i), name: `n${i}`, v: i }));
  const arrow = require("apache-arrow");
  const schema = new arrow.Schema([new arrow.Field("id", new arrow.Int64(), false),
    new arrow.Field("name", new arrow.Utf8(), true), new arrow.Field("v", new arrow.Float64(), true)]);
  const mk = async (name) => {
    const t = await db.createTable(name, lancedb.makeArrowTable(base, { schema }), { mode: "overwrite" });
    await t.setUnenforcedPrimaryKey("id");
    return t;
  };
  const open = async (name) => {
    const c = child(["open", `${dbDir}/${name}.lance`]); // a folder or s3://… (path.join would eat the //)
    const l = await c.until(/^open /);
    await c.exited;
    return l;
  };
  const t1 = await mk("nomemwal"); // primary key, no setLsmWriteSpec
  t1.close();
  let l = await open("nomemwal");
  check(/^open -95 .*has no MemWAL index \(__lance_mem_wal\)/.test(l), `no MemWAL index: ${l}`);
  const t2 = await mk("maintained");
  await t2.createIndex("v", { name: "v_idx" });
  let err = null;
  try { await t2.setLsmWriteSpec({ specType: "unsharded", maintainedIndexes: ["v_idx"], writerConfigDefaults: {} }); }
  catch (e) { err = e.message; }
  t2.close();
  check(err === null, `LanceDB made a MemWAL index maintaining v_idx${err ? ": " + err : ""}`);
  l = await open("maintained");
  // a maintained BTree index (v is float64) needs nothing per SSTable:
  // LanceDB's filtered search scans the SSTables (docs/indexes.md)
  check(l === "open ok", `a table maintaining a BTree index opens: ${l}`);
  const t3 = await mk("plain");
  await t3.setLsmWriteSpec({ specType: "unsharded", maintainedIndexes: [], writerConfigDefaults: {} });
  t3.close();
  l = await open("plain");
  check(l === "open ok", `the same table without maintained indexes opens: ${l}`);
}

const cmds = { fence3, fence4, drop, gone, crash, refusals };
if (!cmds[cmd]) { console.error(`proofs: unknown command ${cmd}`); process.exit(2); }
await cmds[cmd]();
process.exit(failed ? 1 : 0);
