#!/bin/sh
# bootstrap_lancedb.sh TOOL — LanceDB 0.39.0 opens tables memwald created
# (unsharded, bucket(id,4), identity(region)), reports the same write spec,
# writes rows through its LSM writer (mergeInsert) and reads them back; then
# memwal-inspect decodes and verifies the three tables
# (tests/inspect/inspect_tables.py, MW_INSPECT).
# Needs node >= 20 and tests/interop/node_modules.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
tool=$1
if [ ! -d "$here/node_modules/@lancedb/lancedb" ]; then
  echo "bootstrap: tests/interop/node_modules is missing: run 'npm install --no-audit --no-fund' in tests/interop" >&2
  exit 1
fi
scratch=$(mktemp -d "${TMPDIR:-/tmp}/mw-bootstrap.XXXXXX")
schema='id:int64 not null, region:string, v:double'
run() { # NAME SPEC SPEC_JSON ROWS_JSON [KEY=VALUE...]
  name=$1; spec=$2; sj=$3; rows=$4; shift 4
  mkdir -p "$scratch/$name"
  "$tool" "$scratch/$name/t.lance" "$schema" id "$spec" "$@"
  node "$here/bootstrap_lancedb.mjs" "$scratch/$name" "$sj" "$rows"
}
# One mergeInsert call must route to a single shard: ids 1 and 2 are both in
# bucket 0 of 4 (memwal.md §8.3: hashLong 1392991556 and -971005196).
run unsharded unsharded \
  '{"specType":"unsharded","maintainedIndexes":[],"writerConfigDefaults":{}}' \
  '[{"id":1,"region":"eu","v":1.5},{"id":2,"region":null,"v":null},{"id":3,"region":"us","v":-2}]'
run bucket 'bucket(id,4)' \
  '{"specType":"bucket","column":"id","numBuckets":4,"maintainedIndexes":[],"writerConfigDefaults":{}}' \
  '[{"id":1,"region":"eu","v":1.5},{"id":2,"region":"us","v":2.5}]'
run identity 'identity(region)' \
  '{"specType":"identity","column":"region","maintainedIndexes":[],"writerConfigDefaults":{"max_wal_flush_interval_ms":"50"}}' \
  '[{"id":10,"region":"eu","v":1},{"id":11,"region":"eu","v":2}]' \
  max_wal_flush_interval_ms=50
python3 "$here/../inspect/inspect_tables.py" --min-tables 3 "$scratch"
rm -rf "$scratch"
