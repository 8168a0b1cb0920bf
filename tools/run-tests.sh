#!/bin/bash
# Build everything and run every test suite, as CI does (.ci/run):
#   1. the normal build: all suites (storage, formats, interop, engine, e2e)
#   2. an ASan+UBSan build: the same suites again
#   3. each libFuzzer target for a bounded time from its committed corpus
# Prints meson's summary per build and ends with one line
#   "memwald tests: N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/.."
FUZZ_SECONDS=${FUZZ_SECONDS:-20}
fail=0
passed=0
failed=0

count() { # add a meson testlog.json to the totals
  local log=$1/meson-logs/testlog.json
  [ -f "$log" ] || return
  read -r p f < <(python3 - "$log" <<'PY'
import json, sys
p = f = 0
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["result"] in ("OK", "EXPECTEDFAIL"): p += 1
    elif r["result"] != "SKIP": f += 1
print(p, f)
PY
)
  passed=$((passed + p)); failed=$((failed + f))
}

step() { echo; echo "=== $*"; }

step "interop dependencies (npm, pinned @lancedb/lancedb 0.39.0)"
if [ -f tests/interop/package.json ]; then
  (cd tests/interop && npm install --no-audit --no-fund --loglevel=error) || fail=1
fi

step "build (debugoptimized)"
{ [ -f build/build.ninja ] || meson setup build; } && ninja -C build || { echo "build failed"; exit 1; }
step "tests (build)"
meson test -C build --print-errorlogs --num-processes 2 || fail=1
count build

step "build (address,undefined sanitizers)"
{ [ -f build-asan/build.ninja ] || meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false; } \
  && ninja -C build-asan || { echo "sanitizer build failed"; exit 1; }
step "tests (build-asan)"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 meson test -C build-asan --print-errorlogs --num-processes 2 || fail=1
count build-asan

step "fuzz smoke: each target ${FUZZ_SECONDS}s from fuzz/corpus/<name>"
if [ -f build-fuzz/build.ninja ] || CC=clang meson setup build-fuzz -Dfuzz=true -Dtests=false >/dev/null; then
  if ninja -C build-fuzz; then
    for t in build-fuzz/fuzz/fuzz_*; do
      [ -f "$t" ] && [ -x "$t" ] || continue  # skip the .p object dirs
      name=${t##*/fuzz_}
      corpus=$(mktemp -d)
      [ -d "fuzz/corpus/$name" ] && cp -r "fuzz/corpus/$name/." "$corpus/"
      if "$t" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
          "$corpus" > "build-fuzz/$name.log" 2>&1; then
        echo "fuzz $name: ok ($(grep -o 'stat::number_of_executed_units: *[0-9]*' "build-fuzz/$name.log" | grep -o '[0-9]*$') runs)"
        passed=$((passed + 1))
      else
        echo "fuzz $name: FAILED"; tail -40 "build-fuzz/$name.log"; failed=$((failed + 1)); fail=1
      fi
      rm -rf "$corpus"
    done
  else
    echo "fuzz build failed"; failed=$((failed + 1)); fail=1
  fi
else
  echo "fuzz configure failed"; failed=$((failed + 1)); fail=1
fi

echo
echo "memwald tests: $passed passed, $failed failed"
exit $fail
