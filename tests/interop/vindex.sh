#!/bin/sh
# vindex.sh — LanceDB 0.39.0's vector search finds rows of an SSTable whose
# vector index we wrote (issue 27).
#
#   vindex.sh TOOL DISTANCE INDEX [MAKE_ARGS...]
#
# vindex.mjs make: a LanceDB table with a base vector index (INDEX: ivfpq or
# hnswsq, DISTANCE: l2, cosine, dot), the default LSM write spec (the index
# maintained) and fresh rows written and flushed by LanceDB's own writer.
# Control: mw_sst_tool rewrites the shard with our SSTable WITHOUT an index
# (ours-only: LanceDB's SSTable unlisted): LanceDB's vector search must then
# miss the fresh rows (issue 27's silent miss). Then the same with
# --vindex: every fresh row must be found first (vindex.mjs search), through
# the index our SSTable's manifest names, memwal-inspect must decode both
# index files, and its verify must check the index (and report it missing
# when auxiliary.idx is removed). The scratch folder is removed on success.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
tool=$1; dist=$2; index=$3; shift 3
[ -d "$here/node_modules/@lancedb/lancedb" ] || { echo "interop: $here/node_modules is missing: run 'npm install --no-audit --no-fund' in tests/interop first" >&2; exit 1; }
scratch=$(mktemp -d "${TMPDIR:-/tmp}/mw-vindex.XXXXXX")
echo "scratch: $scratch"
quiet() { grep -v ' WARN \|EBADENGINE\|npm warn' || true; }
node "$here/vindex.mjs" make "$scratch/made" --distance "$dist" --index "$index" "$@" 2>&1 | quiet
[ -f "$scratch/made/fresh.json" ] || { echo "vindex: make failed" >&2; exit 1; }
cp -r "$scratch/made" "$scratch/noidx"
"$tool" vector "$scratch/noidx/t.lance" --mode ours-only --seed 7 2>&1 | tail -2
if node "$here/vindex.mjs" search "$scratch/noidx" 2>"$scratch/noidx.err" >/dev/null; then
  echo "vindex: control failed: LanceDB found the fresh rows in an SSTable without an index" >&2; exit 1
fi
echo "control (no index): $(grep -v ' WARN ' "$scratch/noidx.err" | head -1)"
cp -r "$scratch/made" "$scratch/ours"
"$tool" vector "$scratch/ours/t.lance" --mode ours-only --seed 7 --vindex "vec_idx:vec:$dist" 2>"$scratch/tool.err"
cat "$scratch/tool.err"
dir=$(sed -n 's|^wrote .*/\([0-9a-f]*_gen_[0-9]*\): .*|\1|p' "$scratch/tool.err" | head -1)
idx=$(ls -d "$scratch"/ours/t.lance/_mem_wal/*/"$dir"/_indices/*)
uuid=$(basename "$idx")
[ -n "$uuid" ] || { echo "vindex: our SSTable has no _indices" >&2; exit 1; }
for f in index.idx auxiliary.idx; do
  "${MW_INSPECT:?MW_INSPECT is not set}" show "$idx/$f" >/dev/null || { echo "vindex: memwal-inspect cannot decode $f" >&2; exit 1; }
done
# verify checks the index against the data file (ours-only leaves one
# unrelated problem: LanceDB's SSTable left the manifest uncompacted)
"$MW_INSPECT" verify "$scratch/ours/t.lance" >"$scratch/verify.txt" || true
grep -q ': 1 SSTable vector index checked' "$scratch/verify.txt" && ! grep -q '_indices' "$scratch/verify.txt" ||
  { cat "$scratch/verify.txt" >&2; echo "vindex: memwal-inspect verify does not pass our index" >&2; exit 1; }
cp -r "$scratch/ours" "$scratch/broken"
rm "$(ls -d "$scratch"/broken/t.lance/_mem_wal/*/"$dir"/_indices/*)/auxiliary.idx"
"$MW_INSPECT" verify "$scratch/broken/t.lance" >"$scratch/verify-broken.txt" || true
grep -q '_indices/.*auxiliary.idx: vector index storage is missing' "$scratch/verify-broken.txt" ||
  { cat "$scratch/verify-broken.txt" >&2; echo "vindex: verify misses a missing auxiliary.idx" >&2; exit 1; }
echo "memwal-inspect verify: our index checked; a missing auxiliary.idx reported"
rm -rf "$scratch/broken"
node "$here/vindex.mjs" search "$scratch/ours" --uuid "$uuid" 2>"$scratch/search.err" || { grep -v ' WARN ' "$scratch/search.err" >&2; echo "kept $scratch" >&2; exit 1; }
rm -rf "$scratch"
