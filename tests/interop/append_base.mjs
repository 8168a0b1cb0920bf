#!/usr/bin/env node
// append_base.mjs — a LanceDB 0.39.0 writer appending to a base table while
// memwald compacts into it and collects its history (run.sh's
// compact-history-lancedb scenario).
//
//   node append_base.mjs TABLE --rows-out FILE [--appends N] [--first-id K]
//
// Each append is one table.add() of one row with a key no memwald writer
// uses (K, K+1, ...: the model's keys are below 1 000), committed on the
// newest version (readConsistencyInterval 0). The rows go to FILE as model
// lines ({"id":"K","name":..,"v":..,"vec":[..]}), which run.sh adds to the
// model before check.mjs reads the table. Any failed append exits 1: our
// cleanup must never break a concurrent LanceDB commit.
import * as fs from "node:fs";
import { connect, tableLocation } from "./lancedb_open.mjs";

const lancedb = await import("@lancedb/lancedb");
const argv = process.argv.slice(2);
const opt = {};
for (let i = 1; i + 1 < argv.length; i += 2) opt[argv[i].replace(/^--/, "")] = argv[i + 1];
const loc = tableLocation(argv[0]);
const appends = Number(opt.appends || 40), first = BigInt(opt["first-id"] || 1000000);
const db = await connect(lancedb, loc);
const table = await db.openTable(loc.name);
const schema = await table.schema();
const vecField = schema.fields.find((f) => f.name === "vec");
const dim = vecField ? vecField.type.listSize : 0;
const out = fs.openSync(opt["rows-out"], "w");
let done = 0;
for (let i = 0; i < appends; i++) {
  const id = first + BigInt(i);
  const vec = Array.from({ length: dim }, (_, k) => Math.fround((i + 1) / (k + 2)));
  const row = { id, name: `lancedb_${i}`, v: i * 1.5, vec };
  try {
    await table.add([row]);
  } catch (e) {
    console.error(`append_base: append ${i} (id ${id}) failed: ${e.message}`);
    process.exit(1);
  }
  fs.writeSync(out, JSON.stringify({ id: id.toString(), name: row.name, v: row.v, vec }) + "\n");
  done++;
  await new Promise((r) => setTimeout(r, 50)); // pacing, so the appends span the engine's run
}
fs.closeSync(out);
table.close();
console.log(`append_base: ${done} appends committed`);
