#!/bin/bash
# run-tests-busy.sh — tools/run-tests.sh on a busy machine (issue 29): the
# whole suite with N CPU hogs (default 2, one per core of the 2-core machines
# this project runs CI on) spinning at the same priority as the tests for the
# whole run. A suite that passes only on a quiet machine hides races: timing
# assumptions, waits without a condition, deadlines tighter than a loaded
# scheduler gives. Run it before stopping; fix what fails at its root.
#
#   tools/run-tests-busy.sh [HOGS]        (arguments after HOGS go to nothing;
#                                          FUZZ_SECONDS etc. as run-tests.sh)
#
# The hogs are this script's children, stopped by PID on every exit path
# (never by name: other work may share the machine). Prints the hogs' PIDs and
# the load average at the start and the end, then run-tests.sh's own summary;
# exits with run-tests.sh's status.
set -uo pipefail
cd "$(dirname "$0")/.."
hogs=${1:-2}
case $hogs in ''|*[!0-9]*) echo "usage: tools/run-tests-busy.sh [HOGS]" >&2; exit 2 ;; esac
[ "$hogs" -le 64 ] || { echo "run-tests-busy: at most 64 hogs" >&2; exit 2; }

pids=()
stop_hogs() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  pids=()
}
trap stop_hogs EXIT
trap 'exit 130' INT TERM

for _ in $(seq 1 "$hogs"); do
  # a pure CPU spin: no I/O, no memory growth, the tests' own priority
  python3 -c 'while True: pass' &
  pids+=($!)
done
echo "run-tests-busy: $hogs CPU hog(s), PIDs ${pids[*]}; load average $(cut -d' ' -f1-3 /proc/loadavg)"
tools/run-tests.sh
rc=$?
echo "run-tests-busy: load average at the end $(cut -d' ' -f1-3 /proc/loadavg); run-tests.sh exited $rc"
exit $rc
