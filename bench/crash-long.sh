#!/bin/sh
# crash-long.sh — the engine's crash proof (tests/shard, `proof-crash`, 20
# kills per CI run) for as many kills as you like: a writer is SIGKILLed at
# a seeded random point, a fresh process claims, replays and flushes, and at
# the end LanceDB 0.39.0 must read every acknowledged row.
#
#   bench/crash-long.sh [ITERATIONS [SEED]]      (default 200, seed 1)
#
# Run from the repository root after `tools/build.sh` and `npm install` in
# tests/interop. Prints the proof's own summary line (kills, rows, losses).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
iters=${1:-200}
seed=${2:-1}
vectors=${MW_VECTORS:-$here/../shared/vectors}
tool=$here/build/tests/shard/proof_tool
[ -x "$tool" ] || { echo "crash-long: build first (tools/build.sh)" >&2; exit 1; }
scratch=$(mktemp -d "${TMPDIR:-/tmp}/mw-crash-long.XXXXXX")
cp -r "$vectors/unsharded-small/t.lance" "$scratch/t.lance"
chmod -R u+w "$scratch"
node "$here/tests/shard/proofs.mjs" crash "$tool" "$scratch/t.lance" \
  --prior "$vectors/unsharded-small/expected.jsonl" --iterations "$iters" --seed "$seed"
rm -rf "$scratch"
