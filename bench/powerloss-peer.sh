#!/bin/sh
# powerloss-peer.sh — power loss side by side: Lance's own MemWAL writer
# (../shared/peer/make-shard.mjs, LanceDB 0.39.0 = Lance 12) against memwald,
# under the same model of a power cut: after the cut a file keeps only what
# its last completed fsync covered and a directory only the entries its last
# completed fsync covered (src/storage/powerloss.c, POSIX taken literally).
#
#   bench/powerloss-peer.sh [ROWS [CYCLES]]       (default 2000 rows, 5 memwald cycles)
#
# memwald: tools/crashloop --power-loss, where memwald's storage keeps the
# journal of every completed fsync and the cut rewrites the table to it.
# Lance: its writer is not built on our storage layer, so the journal cannot
# watch it; instead strace counts every sync system call of the writer's
# process tree (fsync, fdatasync, sync_file_range, syncfs, sync, msync). With
# zero, the model needs no journal: nothing the run created is durable, so the
# state a reboot finds is the state before the run, which this script then
# builds (an empty directory) and lets LanceDB read. With any sync it stops:
# modelling that would take a per-file journal of a process we do not control.
# Needs strace (Debian package strace), node, tests/interop/node_modules.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
rows=${1:-2000}
cycles=${2:-5}
peer=${MW_PEER:-$here/../shared/peer}
memwald=${MEMWALD:-$here/build/src/memwald}
memwalctl=${MEMWALCTL:-$here/build/src/memwalctl}
command -v strace >/dev/null || { echo "powerloss-peer: needs strace (apt-get install strace)" >&2; exit 2; }
[ -d "$here/tests/interop/node_modules/@lancedb/lancedb" ] || { echo "powerloss-peer: npm install in tests/interop first" >&2; exit 2; }
scratch=$(mktemp -d "${TMPDIR:-/tmp}/mw-powerloss-peer.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
# The peer directory is read-only and has no node_modules: run a copy of its
# scripts against tests/interop's (same pins: lancedb 0.39.0, apache-arrow 18.1.0).
mkdir "$scratch/peer" "$scratch/out"
cp "$peer"/*.mjs "$peer/package.json" "$scratch/peer/"
ln -s "$here/tests/interop/node_modules" "$scratch/peer/node_modules"

echo "== Lance's writer: $rows rows through mergeInsert, durable_write=true, bucket:4"
strace -f -qq -c -o "$scratch/strace.txt" \
  -e trace=fsync,fdatasync,sync_file_range,syncfs,sync,msync,linkat,rename,renameat,renameat2 \
  node "$scratch/peer/make-shard.mjs" "$scratch/out/lance" --rows "$rows" --batch 100 --spec bucket:4 \
  --seed 1 --config durable_write=true --config max_wal_flush_interval_ms=10 >"$scratch/summary.json" 2>"$scratch/make.err"
acked=$(sed -n 's/.*"rows_written":\([0-9]*\).*/\1/p' "$scratch/summary.json")
visible=$(sed -n 's/.*"expected_rows":\([0-9]*\).*/\1/p' "$scratch/summary.json")
count() { awk -v s="$1" '$NF == s { print $4; f = 1 } END { if (!f) print 0 }' "$scratch/strace.txt"; }
syncs=0
for s in fsync fdatasync sync_file_range syncfs sync msync; do syncs=$((syncs + $(count $s))); done
echo "lance: rows acknowledged (mergeInsert returned) = $acked, distinct rows visible before the cut = $visible"
echo "lance: sync system calls = $syncs (linkat $(count linkat), rename $(count rename), renameat $(count renameat))"
node "$scratch/peer/read-table.mjs" "$scratch/out/lance/t.lance" >"$scratch/before.jsonl" 2>/dev/null || true
echo "lance: LanceDB reads $(grep -c '"id"' "$scratch/before.jsonl" || true) rows before the cut"
if [ "$syncs" -ne 0 ]; then
  echo "lance: the writer synced $syncs times; this script cannot model which writes those covered" >&2
  exit 1
fi
# Zero syncs: the durable state is the state before the run, an empty directory.
rm -rf "$scratch/out/lance"
mkdir "$scratch/out/lance"
if node "$scratch/peer/read-table.mjs" "$scratch/out/lance/t.lance" >"$scratch/after.jsonl" 2>"$scratch/after.err"; then
  after=$(grep -c '"id"' "$scratch/after.jsonl" || true)
else
  after=0
  echo "lance: after the cut LanceDB cannot open the table: $(grep -m1 -o 'Table .* was not found\|not found[^"]*' "$scratch/after.err" || head -c 200 "$scratch/after.err")"
fi
echo "lance: rows after the cut = $after of $visible distinct rows ($acked acknowledged writes)"

echo "== memwald: tools/crashloop --power-loss --cycles $cycles"
"$here/tools/crashloop" --power-loss --cycles "$cycles" --seed 1 --memwald "$memwald" --memwalctl "$memwalctl" \
  | tee "$scratch/memwald.txt" | tail -1
line=$(tail -1 "$scratch/memwald.txt")
# the pipe through tee hides crashloop's exit status: judge its summary line
case "$line" in
  *" lost=0 extra=0 duplicate=0"*) ;;
  *) echo "powerloss-peer: memwald's crash loop did not end clean: $line" >&2; exit 1 ;;
esac
echo
echo "| writer | rows acknowledged | sync calls | acknowledged rows lost at the power cut |"
echo "|---|---|---|---|"
if [ "$after" = 0 ]; then lance_lost="all: 0 of $visible rows readable (no table left)"
else lance_lost="$after of $visible rows still readable"; fi
echo "| Lance 12 (LanceDB 0.39.0 mergeInsert, durable_write=true) | $acked | $syncs | $lance_lost |"
echo "| memwald (crashloop, $cycles cuts) | $(echo "$line" | sed -n 's/.*rows_acked=\([0-9]*\).*/\1/p') | fsync per WAL entry | $(echo "$line" | sed -n 's/.*lost=\([0-9]*\).*/\1/p') (extra $(echo "$line" | sed -n 's/.*extra=\([0-9]*\).*/\1/p')) |"
