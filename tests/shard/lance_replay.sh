#!/bin/sh
# lance_replay.sh — memwald writes rows through the engine into a copy of a
# golden vector and ABORTS its shards (the last rows live in the WAL only);
# then LanceDB 0.39.0 takes every shard over from our manifests (claim,
# sentinel, replay of our WAL entries, flush) and the table must read back
# as the vector's expected.jsonl overlaid by our model.
#
#   lance_replay.sh TOOL VECTOR SCENARIO
#
# Needs node >= 20 and tests/interop/node_modules. The scratch folder is
# removed on success and kept (path printed) on failure.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
tool=$1; name=$2; scen=$3
vectors=${MW_VECTORS:?MW_VECTORS is not set}
command -v node >/dev/null || { echo "lance_replay: node is not installed" >&2; exit 1; }
scratch=$(mktemp -d "${TMPDIR:-/tmp}/mw-lance-replay.XXXXXX")
cp -r "$vectors/$name/t.lance" "$scratch/t.lance"
chmod -R u+w "$scratch"
echo "scratch: $scratch"
t=$scratch/t.lance
if [ "${MW_TEST_S3:-0}" = 1 ]; then # on S3 (tests/s3/with-s3.sh; MW_S3_TOOL)
  . "$here/../s3/s3lib.sh"
  t=$(s3_table_up "$t" "replay") || exit 1
  echo "table: $t"
fi
"$tool" model "$t" --scenario "$scen" --model-out "$scratch/model.jsonl"
node "$here/lance_replay.mjs" "$t" --prior "$vectors/$name/expected.jsonl" \
  --model "$scratch/model.jsonl" --out "$scratch/got.jsonl"
# what memwald and then LanceDB's writer left: every object decodes, verify
# passes (on S3 before the bucket goes)
case $t in
  s3://*) python3 "$here/../inspect/inspect_tables.py" --table "$t"; s3_table_down "$t" ;;
  *) python3 "$here/../inspect/inspect_tables.py" --min-tables 1 "$scratch" ;;
esac
rm -rf "$scratch"
