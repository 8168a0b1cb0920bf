#!/usr/bin/env node
// read_rows.mjs DB [TABLE] — print every row of DB/TABLE.lance (TABLE: t) as LanceDB 0.39.0 reads
// it (LSM scan: base table + the SSTables of every shard manifest), one JSON
// object per line, sorted by id; bigint values as numbers. DB is a folder
// or s3://BUCKET/PREFIX (endpoint and keys from the AWS_* environment).
import * as path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "..", "interop", "package.json"));
const lancedb = require("@lancedb/lancedb");
const uri = process.argv[2];
const env = process.env;
const storageOptions = uri.startsWith("s3://") ? {
  aws_endpoint: env.AWS_ENDPOINT_URL || env.MW_S3_ENDPOINT, aws_access_key_id: env.AWS_ACCESS_KEY_ID,
  aws_secret_access_key: env.AWS_SECRET_ACCESS_KEY, aws_region: env.AWS_REGION || "us-east-1",
  allow_http: "true",
} : undefined;
const db = await lancedb.connect(uri, storageOptions ? { storageOptions } : {});
const t = await db.openTable(process.argv[3] || "t");
const schema = await t.schema();
const rows = (await t.query().toArray()).map((r) => {
  const o = {};
  for (const f of schema.fields) o[f.name] = typeof r[f.name] === "bigint" ? Number(r[f.name]) : r[f.name];
  return o;
});
rows.sort((a, b) => a.id - b.id);
for (const r of rows) console.log(JSON.stringify(r));
t.close();
