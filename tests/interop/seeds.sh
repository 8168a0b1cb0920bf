#!/bin/sh
# seeds.sh — interop test zone-seeds-refused: the same SSTables written with
# and without zone write seeds v1 into two copies of a vector's table; then
# seeds.mjs checks that LanceDB 0.39.0 reads the plain copy, refuses the
# seeded one (FLAG_ZONE_WRITE_SEEDS), and that apache-arrow reads every seed
# with exactly the statistics the rows give; memwal-inspect verifies both.
#
#   seeds.sh TOOL
#
# Needs node >= 20 and tests/interop/node_modules. The scratch folder is
# removed on success and kept (path printed) on failure.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
tool=$1
vectors=${MW_VECTORS:?MW_VECTORS is not set}
if [ ! -d "$here/node_modules/@lancedb/lancedb" ]; then
  echo "interop: $here/node_modules is missing: run 'npm install --no-audit --no-fund' in tests/interop first" >&2
  exit 1
fi
scratch=$(mktemp -d "${TMPDIR:-/tmp}/mw-seeds.XXXXXX")
echo "scratch: $scratch"
for t in seeded plain; do
  cp -r "$vectors/unsharded-small/t.lance" "$scratch/$t.lance"
done
chmod -R u+w "$scratch"
"$tool" model "$scratch/seeded.lance" --scenario nulls --seed 11 --zone-seeds --seed-rows-per-zone 100 \
  --model-out "$scratch/seeded.model" --rows-out "$scratch/rows.jsonl"
"$tool" model "$scratch/plain.lance" --scenario nulls --seed 11 --model-out "$scratch/plain.model"
cmp "$scratch/seeded.model" "$scratch/plain.model"
rc=0
node "$here/seeds.mjs" "$scratch/seeded.lance" "$scratch/plain.lance" "$scratch/rows.jsonl" > "$scratch/log" 2>&1 || rc=$?
grep -v ' WARN ' "$scratch/log" || true
[ "$rc" -eq 0 ] || exit "$rc"
# both tables decode with memwal-inspect (zone seeds checked against the
# values) and verify passes (tests/inspect/inspect_tables.py, MW_INSPECT)
python3 "$here/../inspect/inspect_tables.py" --min-tables 2 "$scratch"
rm -rf "$scratch"
