// lancedb_open.mjs — open the LanceDB database holding a table given as a
// folder (".../t.lance") or an S3 URI ("s3://bucket/prefix/t.lance"; the
// endpoint and keys from the AWS environment, as tests/s3/with-s3.sh sets
// them). Shared by the interop and engine scripts.
import * as path from "node:path";

export function tableLocation(arg) {
  if (arg.startsWith("s3://")) {
    const cut = arg.lastIndexOf("/");
    return { s3: true, table: arg, db: arg.slice(0, cut), name: arg.slice(cut + 1).replace(/\.lance$/, "") };
  }
  const table = path.resolve(arg);
  return { s3: false, table, db: path.dirname(table), name: path.basename(table, ".lance") };
}

export function storageOptions() {
  const e = process.env;
  return {
    aws_endpoint: e.AWS_ENDPOINT_URL || e.MW_S3_ENDPOINT, aws_access_key_id: e.AWS_ACCESS_KEY_ID,
    aws_secret_access_key: e.AWS_SECRET_ACCESS_KEY, aws_region: e.AWS_REGION || "us-east-1",
    allow_http: "true",
  };
}

// lancedb.connect for loc (from tableLocation).
export async function connect(lancedb, loc) {
  return loc.s3 ? lancedb.connect(loc.db, { storageOptions: storageOptions() }) : lancedb.connect(loc.db);
}
