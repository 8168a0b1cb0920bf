#!/bin/sh
# inspect_all.sh — every object of a table decodes with memwal-inspect (text
# and JSON), and `verify` finds no problem. The interop scenarios run it on
# the tables they leave behind (run.sh), so the inspector sees every artifact
# the suite produces.
#
#   inspect_all.sh MEMWAL_INSPECT TABLE [--allow TEXT]
# With --allow, every problem verify finds must contain TEXT (a scenario that
# breaks that one invariant on purpose); any other problem fails.
set -eu
inspect=$1; table=$2; allow=${4:-}
"$inspect" -n 2 dump "$table" >/dev/null || { echo "inspect: dump (text) of $table failed" >&2; exit 1; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$inspect" -j -n 2 dump "$table" > "$out" || { echo "inspect: dump --json of $table failed" >&2; exit 1; }
n=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$out") \
  || { echo "inspect: dump --json of $table is not JSON" >&2; exit 1; }
echo "inspect: $n objects shown" >&2
if [ -z "$allow" ]; then
  "$inspect" verify "$table" || { echo "inspect: verify $table found problems" >&2; exit 1; }
else
  "$inspect" -j verify "$table" > "$out" || true
  python3 -c '
import json, sys
r = json.load(open(sys.argv[2]))
other = [p for p in r["problems"] if sys.argv[1] not in p["problem"]]
print("inspect: verify found %d problems, all allowed" % r["problems_total"] if not other
      else "inspect: verify: %s" % other, file=sys.stderr)
sys.exit(0 if not other else 1)' "$allow" "$out"
fi
