#!/usr/bin/env bash
# Long fuzzing run (issue 6): every libFuzzer target until it has executed
# FUZZ_RUNS inputs (default 10 000 000), FUZZ_JOBS targets at a time
# (default 2), each from a scratch copy of its committed seed corpus
# fuzz/corpus/<name>/ (the committed corpus is never written).
#
#   tools/fuzz-long.sh [target ...]      # default: every fuzz_* in the build
#   FUZZ_RUNS=1000000 FUZZ_JOBS=1 FUZZ_BUILD=build-fuzz FUZZ_OUT=/tmp/x tools/fuzz-long.sh ipc
#   FUZZ_MAX_SECONDS=1200 tools/fuzz-long.sh    # also stop each target after 20 min
#
# Configures FUZZ_BUILD (default build-fuzz) with
#   CC=clang meson setup build-fuzz -Dfuzz=true -Dtests=disabled
# if needed. Keeps per target in FUZZ_OUT (default $FUZZ_BUILD/long):
#   <name>.log      libFuzzer's output          <name>.corpus/  the grown corpus
#   <name>-crash-*  crash / leak / timeout / oom inputs (libFuzzer artifacts)
# and prints one table row per target:
#   target  executions  seconds  exec/s  corpus (seed -> new)  crashes
# A target that crashes stops at its first crash (libFuzzer's default); its
# row names the crash file. A target stopped by FUZZ_MAX_SECONDS before
# FUZZ_RUNS says "time cap" in its row. Exit status: 0 when every target
# reached FUZZ_RUNS without a crash, 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/.."
RUNS=${FUZZ_RUNS:-10000000}
JOBS=${FUZZ_JOBS:-2}
BUILD=${FUZZ_BUILD:-build-fuzz}
OUT=${FUZZ_OUT:-$BUILD/long}
MAX_SECONDS=${FUZZ_MAX_SECONDS:-0}

if [ ! -f "$BUILD/build.ninja" ]; then
  CC=clang meson setup "$BUILD" -Dfuzz=true -Dtests=disabled >/dev/null || { echo "fuzz configure failed"; exit 1; }
else  # a build dir from before `tests` was a feature option has it reset to auto
  meson configure "$BUILD" -Dtests=disabled >/dev/null || { echo "fuzz configure failed"; exit 1; }
fi
ninja -C "$BUILD" >/dev/null || { echo "fuzz build failed"; exit 1; }
mkdir -p "$OUT"

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for t in "$BUILD"/fuzz/fuzz_*; do
    [ -f "$t" ] && [ -x "$t" ] && targets+=("${t##*/fuzz_}")
  done
fi

# One target: run, then write its table row to $OUT/<name>.row.
run_one() {
  local name=$1 bin="$BUILD/fuzz/fuzz_$1" corpus="$OUT/$1.corpus" log="$OUT/$1.log"
  rm -rf "$corpus" "$OUT/$name".row "$OUT/$name"-crash-* "$OUT/$name"-leak-* \
    "$OUT/$name"-timeout-* "$OUT/$name"-oom-*
  mkdir -p "$corpus"
  [ -d "fuzz/corpus/$name" ] && cp -r "fuzz/corpus/$name/." "$corpus/"
  local seeds t0 t1 rc
  seeds=$(find "$corpus" -type f | wc -l)
  t0=$(date +%s.%N)
  "$bin" -runs="$RUNS" -max_total_time="$MAX_SECONDS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$OUT/$name-" "$corpus" >"$log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  local execs secs rate now crashes crashfile
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  execs=${execs:-0}
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", b - a }')
  rate=$(awk -v e="$execs" -v s="$secs" 'BEGIN { printf "%.0f", (s > 0 ? e / s : 0) }')
  now=$(find "$corpus" -type f | wc -l)
  crashfile=$(ls "$OUT/$name"-crash-* "$OUT/$name"-leak-* "$OUT/$name"-timeout-* \
    "$OUT/$name"-oom-* 2>/dev/null | head -1)
  crashes=$(ls "$OUT/$name"-crash-* "$OUT/$name"-leak-* "$OUT/$name"-timeout-* \
    "$OUT/$name"-oom-* 2>/dev/null | wc -l)
  if [ "$rc" -ne 0 ] && [ "$crashes" -eq 0 ]; then crashes="1 (exit $rc, see $log)"; fi
  [ -n "$crashfile" ] && crashes="$crashes $crashfile"
  [ "$rc" -eq 0 ] && [ "$execs" -lt "$RUNS" ] && crashes="$crashes (time cap: fewer than $RUNS runs)"
  printf '%-18s %12s %8s %9s %8s -> %-7s %s\n' "$name" "$execs" "$secs" "$rate" "$seeds" "$now" \
    "$crashes" >"$OUT/$name.row"
  echo "done: $name (exit $rc)" >&2
  [ "$rc" -eq 0 ] && [ "$execs" -ge "$RUNS" ]
}

status=0
running=0
for name in "${targets[@]}"; do
  [ -x "$BUILD/fuzz/fuzz_$name" ] || { echo "no target $BUILD/fuzz/fuzz_$name"; status=1; continue; }
  if [ "$running" -ge "$JOBS" ]; then
    wait -n || status=1
    running=$((running - 1))
  fi
  run_one "$name" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || status=1
  running=$((running - 1))
done

echo "fuzz-long: -runs=$RUNS -max_total_time=$MAX_SECONDS, $JOBS at a time, build $BUILD ($(nproc) cores)"
printf '%-18s %12s %8s %9s %8s    %-7s %s\n' target executions seconds exec/s corpus new crashes
for name in "${targets[@]}"; do
  [ -f "$OUT/$name.row" ] && cat "$OUT/$name.row"
done
exit $status
