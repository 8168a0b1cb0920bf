#!/bin/bash
# Build everything and run every test suite, as CI does (.ci/run):
#   0. one radosgw (S3) for the whole run, for the S3 tests
#   1. the normal build: all suites (common, storage, lance, shard, net, daemon,
#      inspect, interop, e2e)
#   2. an ASan+UBSan build: the same suites again
#   3. each libFuzzer target for FUZZ_SECONDS (default 60) from its committed
#      corpus, two targets at a time
#   4. README command 1 on a bare Debian 12 root from a clean clone of the
#      committed HEAD (tools/fresh-root.sh): one test, passed or failed
# The builds are configured with -Dtests=enabled (a missing cmocka fails here;
# README command 1's tools/build.sh leaves it at auto).
# Prints meson's summary per build and ends with one line
#   "memwald tests: N passed, M failed, K skipped"
# where K counts whole tests that skipped (exit 77: e.g. io_uring refused by
# the kernel) and TAP checks marked "# SKIP", each named on a line before
# it: a skip is never counted as a pass, nor hidden.
set -uo pipefail
cd "$(dirname "$0")/.."
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
fail=0
passed=0
failed=0
skipped=0
skips=""
fails=""

count() { # add a meson testlog.json to the totals; skipped tests and checks are named
  local log=$1/meson-logs/testlog.json
  [ -f "$log" ] || return
  local out
  local failfile
  failfile=$(mktemp)
  out=$(python3 - "$log" "$1" "$failfile" <<'PY'
import json, re, sys
p = f = k = 0
names = []
failed = []
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["result"] == "SKIP":
        k += 1
        names.append(f"{sys.argv[2]}: {r['name']} (the whole test)")
        continue
    if r["result"] in ("OK", "EXPECTEDFAIL"): p += 1
    else:
        f += 1
        # the failing TAP checks (or the last lines) so CI's tail names the cause
        out = (r.get("stdout") or "") + (r.get("stderr") or "")
        # each failing check with the first diagnostic lines under it ("# ..."), which say why
        bad = [m.group(0).rstrip() for m in re.finditer(r"^not ok .*(?:\n# .*){0,6}", out, re.M)][:5] \
            or out.strip().splitlines()[-5:]
        failed.append(f"FAILED {sys.argv[2]}: {r['name']} ({r['result']})")
        failed += ["    " + l[:300] for b in bad for l in b.splitlines()]
    for t in re.findall(r"^ok \d+ (.*?)\s*# SKIP\b.*$", r.get("stdout") or "", re.M):
        k += 1
        names.append(f"{sys.argv[2]}: {r['name']}: {t.lstrip('- ')}")
print(p, f, k)
for n in names: print(n)
with open(sys.argv[3], "a") as fh:
    for n in failed: print(n, file=fh)
PY
)
  local p f k
  read -r p f k <<<"$(head -1 <<<"$out")"
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + k))
  if [ "$k" -gt 0 ]; then skips="$skips$(tail -n +2 <<<"$out")"$'\n'; fi
  if [ -s "$failfile" ]; then fails="$fails$(cat "$failfile")"$'\n'; fi
  rm -f "$failfile"
}

step() { echo; echo "=== $*"; }

step "interop dependencies (npm, pinned @lancedb/lancedb 0.39.0)"
if [ -f tests/interop/package.json ]; then
  (cd tests/interop && npm install --no-audit --no-fund --loglevel=error) || fail=1
fi

step "S3 endpoint: one radosgw for the whole run (tools/rgw.sh)"
# Every S3 test (tests/s3/with-s3.sh) uses this endpoint, each in its own
# bucket. A running shared instance in $MW_RGW_DIR is reused (and left
# running); one started here is stopped at the end.
RGW_DIR=${MW_RGW_DIR:-/tmp/memwald-rgw}
if [ -z "${MW_S3_ENDPOINT:-}" ]; then
  rgw_started=0
  tools/rgw.sh env "$RGW_DIR" >/dev/null 2>&1 || rgw_started=1
  if tools/rgw.sh ensure "$RGW_DIR"; then
    # shellcheck disable=SC1091
    . "$RGW_DIR/env.sh"
    echo "S3 endpoint $MW_S3_ENDPOINT"
    [ "$rgw_started" = 1 ] && trap 'tools/rgw.sh down "$RGW_DIR"' EXIT
  else
    echo "radosgw did not start: every S3 test will fail"
  fi
fi

configure() { # DIR OPTION...: set up DIR once; the options are applied on every run
  local dir=$1; shift
  if [ -f "$dir/build.ninja" ]; then meson configure "$dir" "$@" >/dev/null; else meson setup "$dir" "$@"; fi
}

step "build (debugoptimized)"
configure build -Dtests=enabled && ninja -C build || { echo "build failed"; exit 1; }
step "tests (build)"
meson test -C build --print-errorlogs --num-processes 2 || fail=1
count build

step "build (address,undefined sanitizers)"
configure build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dtests=enabled \
  && ninja -C build-asan || { echo "sanitizer build failed"; exit 1; }
step "tests (build-asan)"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 meson test -C build-asan --print-errorlogs --num-processes 2 || fail=1
count build-asan

step "fuzz smoke: each target ${FUZZ_SECONDS}s from fuzz/corpus/<name>, two at a time"
fuzz_one() { # one target from a scratch copy of its corpus; log and crash files in build-fuzz/
  local t=$1 name=${1##*/fuzz_} corpus rc
  corpus=$(mktemp -d)
  [ -d "fuzz/corpus/$name" ] && cp -r "fuzz/corpus/$name/." "$corpus/"
  rm -f "build-fuzz/$name"-crash-* "build-fuzz/$name"-leak-* "build-fuzz/$name"-timeout-* "build-fuzz/$name"-oom-*
  "$t" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="build-fuzz/$name-" "$corpus" > "build-fuzz/$name.log" 2>&1
  rc=$?
  rm -rf "$corpus"
  return $rc
}
fuzz_result() { # $1 = target name, $2 = its exit status: print and count
  local name=$1 artifact
  if [ "$2" -eq 0 ]; then
    echo "fuzz $name: ok ($(grep -o 'stat::number_of_executed_units: *[0-9]*' "build-fuzz/$name.log" | grep -o '[0-9]*$') runs)"
    passed=$((passed + 1))
  else
    echo "fuzz $name: FAILED (exit $2, log build-fuzz/$name.log)"; tail -40 "build-fuzz/$name.log"
    for artifact in "build-fuzz/$name"-crash-* "build-fuzz/$name"-leak-* "build-fuzz/$name"-timeout-* "build-fuzz/$name"-oom-*; do
      [ -f "$artifact" ] && echo "fuzz $name: crash file $artifact"
    done
    failed=$((failed + 1)); fail=1
  fi
}
if CC=clang configure build-fuzz -Dfuzz=true -Dtests=disabled >/dev/null; then
  if ninja -C build-fuzz; then
    fuzz_targets=()
    for t in build-fuzz/fuzz/fuzz_*; do
      [ -f "$t" ] && [ -x "$t" ] && fuzz_targets+=("$t")  # skip the .p object dirs
    done
    # two at a time (2 cores): every target runs for the same time, so pairs finish together
    for ((i = 0; i < ${#fuzz_targets[@]}; i += 2)); do
      fuzz_one "${fuzz_targets[i]}" & pid1=$!
      pid2=
      if [ $((i + 1)) -lt ${#fuzz_targets[@]} ]; then fuzz_one "${fuzz_targets[i + 1]}" & pid2=$!; fi
      wait "$pid1"; fuzz_result "${fuzz_targets[i]##*/fuzz_}" $?
      if [ -n "$pid2" ]; then wait "$pid2"; fuzz_result "${fuzz_targets[i + 1]##*/fuzz_}" $?; fi
    done
  else
    echo "fuzz build failed"; failed=$((failed + 1)); fail=1
  fi
else
  echo "fuzz configure failed"; failed=$((failed + 1)); fail=1
fi

step "fresh Debian 12 root: README command 1 from a clean clone (tools/fresh-root.sh)"
# One test: debootstrap's bare root (cached), the committed HEAD cloned inside,
# README command 1 run there, one row written and its SYNC answered.
if tools/fresh-root.sh; then
  passed=$((passed + 1))
else
  failed=$((failed + 1)); fail=1
  fails="${fails}FAILED fresh-root: README command 1 on a bare Debian 12 root (logs in ${MW_FRESH_CACHE:-/var/cache/memwald-fresh}/logs)"$'\n'
fi

echo
if [ "$skipped" -gt 0 ]; then
  echo "skipped:"
  printf '%s' "$skips" | sed 's/^/  /'
fi
if [ -n "$fails" ]; then
  echo "failed:"
  printf '%s' "$fails"
fi
echo "memwald tests: $passed passed, $failed failed, $skipped skipped"
exit $fail
