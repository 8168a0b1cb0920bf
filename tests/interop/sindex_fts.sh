#!/bin/sh
# sindex_fts.sh — why memwald refuses a maintained full-text index (issue 27).
#
#   sindex_fts.sh TOOL
#
# For each FTS parameter set: LanceDB makes a table with an inverted index on
# text and the default write spec, and its own writer flushes 60 fresh rows
# (sindex.mjs fts-make): that SSTable carries LanceDB's per-SSTable inverted
# index. A copy gets our SSTable of the same WAL rows instead (mw_sst_tool
# ours-only: the vector index, no inverted index, as memwald would write).
# LanceDB's fullTextSearch then answers the fresh rows from our SSTable with
# its default tokenizer (FlatMatchQuery), not the index's:
#   - default params (lower-case, English stemming, stop words, ASCII
#     folding): the answers must DIFFER for some terms. If they ever agree,
#     this test fails: memwald's refusal can then be reconsidered.
#   - every normalization off: printed only (measured equal here).
# The scratch folder is removed on success.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
tool=$1
[ -d "$here/node_modules/@lancedb/lancedb" ] || { echo "interop: $here/node_modules is missing: run 'npm install --no-audit --no-fund' in tests/interop first" >&2; exit 1; }
scratch=$(mktemp -d "${TMPDIR:-/tmp}/mw-sindex-fts.XXXXXX")
echo "scratch: $scratch"
quiet() { grep -v ' WARN \|EBADENGINE\|npm warn\|ERROR lance::index' || true; }
run() { # NAME PARAMS -> prints the comparison, leaves $scratch/NAME.txt
  node "$here/sindex.mjs" fts-make "$scratch/$1" --params "$2" 2>&1 | quiet
  cp -r "$scratch/$1" "$scratch/$1-ours"
  "$tool" vector "$scratch/$1-ours/t.lance" --mode ours-only --seed 7 --vindex vec_idx:vec:l2 >/dev/null 2>&1 ||
    { echo "sindex_fts: mw_sst_tool failed on $1" >&2; exit 1; }
  node "$here/sindex.mjs" fts-compare "$scratch/$1" --other "$scratch/$1-ours" 2>&1 | quiet >"$scratch/$1.txt"
  sed "s/^/$1: /" "$scratch/$1.txt"
}
run default '{}'
grep -q '^fts: [1-9][0-9]* of' "$scratch/default.txt" ||
  { echo "sindex_fts: LanceDB's full-text answers over an SSTable without its inverted index now equal its own: revisit memwald's refusal" >&2; exit 1; }
run plain '{"stem":false,"removeStopWords":false,"asciiFolding":false,"lowercase":false}'
echo "ok: with the default FTS params LanceDB answers other rows from an SSTable without the inverted index (memwald refuses such tables)"
rm -rf "$scratch"
