#!/usr/bin/env node
// wal_ids.mjs FILE... — the `id` values of Arrow IPC streams (e.g. WAL
// entries), read by apache-arrow (tests/interop/node_modules), as one JSON
// array of strings.
import * as fs from "node:fs";
import * as path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "..", "interop", "package.json"));
const arrow = require("apache-arrow");
const ids = [];
for (const f of process.argv.slice(2)) {
  const t = arrow.tableFromIPC(fs.readFileSync(f));
  for (const v of t.getChild("id") ?? []) ids.push(String(v));
}
console.log(JSON.stringify(ids));
