#!/bin/sh
# split-brain-long.sh — the split-brain campaign (tests/e2e/test_split_brain.py,
# `split_brain` in the e2e suite: 36 operator claims and 4 LanceDB rounds per
# CI run) for longer: RUNS runs, each with CLAIMS operator claims between two
# memwald daemons and ROUNDS take-overs by LanceDB 0.39.0's writer, seeds
# SEED, SEED+1, … Every run checks the same things as the CI test (acked rows
# present at their acked value, refused rows absent from the table and from
# every WAL entry, each epoch's entries only at positions it held).
#
#   bench/split-brain-long.sh [RUNS [CLAIMS [ROUNDS [SEED]]]]   (default 5 200 16 1)
#
# Run from the repository root after `tools/build.sh` and `npm install` in
# tests/interop (MW_BUILD=build-xyz for another build directory). Prints each
# run's "counts[…]" lines, failed checks with their details, and at the end the
# totals over all runs and how many runs failed. Exit 1 if any run failed;
# failed runs keep their scratch directory (named in the output).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-5}
claims=${2:-200}
rounds=${3:-16}
seed=${4:-1}
build=$here/${MW_BUILD:-build}
[ -x "$build/src/memwald" ] && [ -x "$build/src/memwalctl" ] ||
  { echo "split-brain-long: build first (tools/build.sh)" >&2; exit 1; }
out=$(mktemp "${TMPDIR:-/tmp}/mw-split-long.XXXXXX")
failed=0
i=0
while [ "$i" -lt "$runs" ]; do
  s=$((seed + i))
  echo "== run $((i + 1))/$runs seed $s"
  if ! MW_SOURCE_ROOT=$here python3 "$here/tests/e2e/test_split_brain.py" "$build/src/memwald" \
      "$build/src/memwalctl" --seed "$s" --claims "$claims" --rounds "$rounds" >"$out.run" 2>&1; then
    failed=$((failed + 1))
  fi
  grep -E '^# (counts|kept|run time)' "$out.run" || true
  grep -E '^not ok|^# (id |[ABL][0-9])' "$out.run" | head -12 || true
  grep -E '^# counts' "$out.run" >>"$out" || true
  i=$((i + 1))
done
echo "== totals over $runs runs ($failed failed)"
# Sum every key=value of the counts lines, per variant.
awk '{
  v = $2; sub(/^counts\[/, "", v); sub(/\]:$/, "", v)
  for (k = 3; k <= NF; k++) {
    split($k, kv, "=")
    if (!((v, kv[1]) in sum)) order[v] = order[v] " " kv[1]
    sum[v, kv[1]] += kv[2]
  }
} END {
  for (v in order) {
    line = v ":"; n = split(order[v], keys, " ")
    for (k = 1; k <= n; k++) line = line " " keys[k] "=" sum[v, keys[k]]
    print line
  }
}' "$out" | sort
rm -f "$out" "$out.run"
[ "$failed" -eq 0 ]
