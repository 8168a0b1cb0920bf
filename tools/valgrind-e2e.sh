#!/usr/bin/env bash
# tools/valgrind-e2e.sh — the optional long run of issue 6: the e2e tests that
# start the real daemon, with memwald under valgrind memcheck.
#
#   tools/valgrind-e2e.sh [BUILD_DIR]        (default: build)
#   MW_VG_TESTS="daemon_rows soak daemon_shell" selects tests (default: all three)
#   MW_VG_SOAK_MINUTES=2 (the soak's length), MW_VG_NO_BUILD=1 (skip ninja)
#
# How: the e2e scripts take the memwald binary as an argument, so this script
# hands them a wrapper instead of the binary (no test is changed). The wrapper
# execs `valgrind --tool=memcheck --error-exitcode=99 --leak-check=full`
# with one log file per process (so the tests' own parsing of memwald's
# stderr is untouched) and, for the data-path tests (daemon_rows, soak), adds
# `--set storage.io_backend=threads`: memcheck does not see what the kernel
# writes into buffers through io_uring completions, so the io_uring backend
# would give false "uninitialised" reports. daemon_shell checks the backends
# themselves (io_uring, the fallback under seccomp), so it keeps `auto`.
# Because of --error-exitcode, a memcheck error or a definite/possible leak
# turns a daemon exit status into 99, which the tests see as a failure too.
#
# Output: each test's TAP in $OUT/<test>.tap, valgrind's logs in
# $OUT/vg.<pid>.log, and a summary: per process the command, the error count,
# the leak summary and the first lines of each error. Exit 0 when every test
# passed and valgrind reported no error; 1 otherwise; 2 if it could not run.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd) || exit 2
TESTS=${MW_VG_TESTS:-"daemon_rows soak daemon_shell"}

command -v valgrind >/dev/null || { echo "valgrind is not installed (apt-get install valgrind)"; exit 2; }
[ -d "$ROOT/tests/interop/node_modules/@lancedb/lancedb" ] ||
  { echo "tests/interop/node_modules missing: (cd tests/interop && npm install --no-audit --no-fund)"; exit 2; }
if [ -z "${MW_VG_NO_BUILD:-}" ]; then   # MW_VG_NO_BUILD=1: use the binaries as they are
  ninja -C "$BUILD" src/memwald src/memwalctl tests/daemon/no_uring >/dev/null || { echo "build failed"; exit 2; }
fi

OUT=$(mktemp -d /tmp/memwald-vg.XXXXXX)
REAL=$BUILD/src/memwald
CTL=$BUILD/src/memwalctl
cat >"$OUT/memwald" <<EOF
#!/bin/sh
# memwald under memcheck (written by tools/valgrind-e2e.sh)
if [ -n "\${MW_VG_THREADS:-}" ]; then
  case " \$* " in *storage.io_backend*) ;; *) set -- "\$@" --set storage.io_backend=threads ;; esac
fi
exec valgrind --tool=memcheck --error-exitcode=99 --leak-check=full --num-callers=30 \\
  --log-file="$OUT/vg.%p.log" "$REAL" "\$@"
EOF
chmod +x "$OUT/memwald"

export MW_SOURCE_ROOT=$ROOT MW_BUILD_ROOT=$BUILD
export MW_VECTORS=${MW_VECTORS:-$ROOT/../shared/vectors}
[ -x "$BUILD/tests/daemon/no_uring" ] && export MW_NO_URING=$BUILD/tests/daemon/no_uring

fail=0
echo "valgrind e2e run: $(valgrind --version), build $BUILD, output $OUT"
for t in $TESTS; do
  start=$(date +%s)
  case $t in
    daemon_rows) MW_VG_THREADS=1 timeout 3600 python3 "$ROOT/tests/e2e/test_daemon_rows.py" "$OUT/memwald" "$CTL" ;;
    daemon_shell) timeout 3600 python3 "$ROOT/tests/daemon/test_daemon_shell.py" "$OUT/memwald" ;;
    # the soak's rate is lowered: memcheck runs memwald many times slower
    soak) MW_VG_THREADS=1 timeout 3600 python3 "$ROOT/bench/soak" --minutes "${MW_VG_SOAK_MINUTES:-2}" \
            --report-every-s 20 --rate 500 --tap --memwald "$OUT/memwald" --memwalctl "$CTL" ;;
    *) echo "unknown test $t"; fail=1; continue ;;
  esac >"$OUT/$t.tap" 2>&1
  rc=$?
  notok=$(grep -c '^not ok' "$OUT/$t.tap")
  oks=$(grep -c '^ok' "$OUT/$t.tap")
  echo "test $t: exit $rc, $oks ok, $notok not ok, $(( $(date +%s) - start )) s"
  grep '^not ok' "$OUT/$t.tap" | head -20 | sed 's/^/    /'
  [ "$rc" -eq 0 ] && [ "$notok" -eq 0 ] || fail=1
done

echo
echo "valgrind summary ($(ls "$OUT"/vg.*.log 2>/dev/null | wc -l) memwald processes):"
errs_total=0
for log in "$OUT"/vg.*.log; do
  [ -e "$log" ] || continue
  errs=$(sed -n 's/.*ERROR SUMMARY: \([0-9]*\) errors.*/\1/p' "$log" | tail -1)
  cmd=$(sed -n 's/^==[0-9]*== Command: //p' "$log" | head -1 | sed "s|$REAL|memwald|" | cut -c1-150)
  if [ -z "$errs" ]; then
    echo "  $(basename "$log"): no summary (killed, or still running): $cmd"
    continue
  fi
  errs_total=$((errs_total + errs))
  leak=$(awk '/definitely lost:|indirectly lost:|possibly lost:|still reachable:/ {
                 sub(/^==[0-9]+== +/, ""); sub(/ lost:/, ""); sub(/still reachable:/, "reachable"); sub(/ bytes in .*/, "");
                 s = s (s ? ", " : "") $0 } END { print s }' "$log")
  echo "  $(basename "$log"): $errs errors; bytes ${leak:-all freed at exit}; $cmd"
  if [ "$errs" -gt 0 ]; then
    # the first lines of each error record (a record starts after a blank ==pid== line)
    awk '/^==[0-9]+== *$/ {blank=1; next}
         blank && /^==[0-9]+== [A-Z]/ && !/HEAP SUMMARY|LEAK SUMMARY|ERROR SUMMARY|For lists|Memcheck|Copyright|Using Valgrind|Command|Reachable|To see|in use at exit|total heap/ {n=6}
         n > 0 {print "      " $0; n--} {blank=0}' "$log" | head -80
  fi
done
echo "valgrind errors in total: $errs_total"
[ "$errs_total" -eq 0 ] || fail=1
echo "result: $([ $fail -eq 0 ] && echo PASS || echo FAIL) (logs kept in $OUT)"
exit $fail
