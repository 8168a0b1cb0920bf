#!/usr/bin/env node
// split_brain_wal.mjs TABLE_DIR — everything the split-brain test needs to
// know about a table's MemWAL, as one JSON object on stdout:
//
//   {"shards": {"<uuid>": {
//      "wal":       [{"pos", "epoch", "sentinel", "batches", "rows": [[id, name], ...]}, ...],
//      "manifests": [{"version", "epoch", "replay_after", "last_seen", "generation",
//                     "sstables", "status"}, ...],
//      "bad":       ["<file>: <why>", ...]}}}
//
// WAL entries (memwal.md §4) are Arrow IPC streams read with apache-arrow
// (tests/interop/node_modules); the writer's epoch is the schema metadata
// `writer_epoch`, a fence sentinel is a stream with no batches and
// `fence_sentinel = "true"` (§4.2). Shard manifests (§3.1) are decoded here by
// hand: only the scalar fields named above are needed (tags 1, 2, 3, 4, 6,
// 15; tag 8 is counted). File names are 64 bits, least significant first
// (§1.2). Every file of wal/ and manifest/ is listed (no probing), so holes
// and stray names show; what cannot be read goes to "bad" rather than
// stopping the report. Ids are printed as strings (int64).
import * as fs from "node:fs";
import * as path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "..", "interop", "package.json"));
const arrow = require("apache-arrow");

function bitName(f) {
  const bits = f.replace(/\.[a-z]+$/, "");
  if (!/^[01]{64}$/.test(bits)) return null;
  let v = 0n;
  for (let i = 63; i >= 0; i--) v = (v << 1n) | (bits[i] === "1" ? 1n : 0n);
  return Number(v);
}

// Minimal protobuf reader: varints and length-delimited fields only (the
// shard manifest has no fixed32/64 fields).
function decodeManifest(buf) {
  const m = { version: 0, epoch: 0, replay_after: 0, last_seen: 0, generation: 0, sstables: 0, status: 0 };
  let at = 0;
  const varint = () => {
    let v = 0n, shift = 0n;
    for (;;) {
      if (at >= buf.length || shift > 63n) throw new Error(`varint runs past byte ${at}`);
      const b = buf[at++];
      v |= BigInt(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
      shift += 7n;
    }
  };
  const names = { 1: "version", 2: "epoch", 3: "replay_after", 4: "last_seen", 6: "generation", 15: "status" };
  while (at < buf.length) {
    const key = Number(varint());
    const tag = key >>> 3, wt = key & 7;
    if (wt === 0) {
      const v = Number(varint());
      if (names[tag]) m[names[tag]] = v;
    } else if (wt === 2) {
      const n = Number(varint());
      if (at + n > buf.length) throw new Error(`field ${tag} length ${n} past the end`);
      if (tag === 8) m.sstables++;
      at += n;
    } else throw new Error(`field ${tag}: wire type ${wt} unexpected at byte ${at}`);
  }
  return m;
}

function walEntry(file) {
  const buf = fs.readFileSync(file);
  const reader = arrow.RecordBatchReader.from(buf);
  const rows = [];
  let batches = 0, schema = null;
  for (const b of reader) {
    schema = b.schema;
    if (b.numRows === 0) continue; // apache-arrow yields one empty batch for a batch-less stream
    batches++;
    const ids = b.getChild("id"), names = b.getChild("name"), tomb = b.getChild("_tombstone");
    for (let i = 0; i < b.numRows; i++) {
      rows.push([String(ids.get(i)), names ? names.get(i) : null, tomb ? tomb.get(i) : false]);
    }
  }
  schema = schema ?? reader.schema;
  const md = schema ? schema.metadata : new Map();
  const e = md.get("writer_epoch");
  return {
    epoch: e === undefined || !/^\d+$/.test(e) ? null : Number(e),
    sentinel: md.get("fence_sentinel") === "true",
    batches, rows,
  };
}

const tableDir = process.argv[2];
if (!tableDir) {
  console.error("usage: node split_brain_wal.mjs TABLE_DIR");
  process.exit(2);
}
const root = path.join(tableDir, "_mem_wal");
const out = { shards: {} };
for (const uuid of fs.existsSync(root) ? fs.readdirSync(root).sort() : []) {
  const s = { wal: [], manifests: [], bad: [] };
  const walDir = path.join(root, uuid, "wal"), manDir = path.join(root, uuid, "manifest");
  for (const f of fs.existsSync(walDir) ? fs.readdirSync(walDir) : []) {
    const pos = f.endsWith(".arrow") ? bitName(f) : null;
    if (pos === null) { s.bad.push(`wal/${f}: not a WAL entry name`); continue; }
    try { s.wal.push({ pos, ...walEntry(path.join(walDir, f)) }); } catch (e) { s.bad.push(`wal/${f}: ${e.message}`); }
  }
  for (const f of fs.existsSync(manDir) ? fs.readdirSync(manDir) : []) {
    if (f === "version_hint.json") continue;
    const v = f.endsWith(".binpb") ? bitName(f) : null;
    if (v === null) { s.bad.push(`manifest/${f}: not a manifest name`); continue; }
    try {
      const m = decodeManifest(fs.readFileSync(path.join(manDir, f)));
      if (m.version !== v) s.bad.push(`manifest/${f}: holds version ${m.version}, named ${v}`);
      s.manifests.push(m);
    } catch (e) { s.bad.push(`manifest/${f}: ${e.message}`); }
  }
  s.wal.sort((a, b) => a.pos - b.pos);
  s.manifests.sort((a, b) => a.version - b.version);
  out.shards[uuid] = s;
}
process.stdout.write(JSON.stringify(out) + "\n");
