#!/bin/sh
# crashloop-long.sh — the long crash loops of issue 6 over the whole daemon
# (tools/crashloop): 1 000 cycles of SIGKILL / MEMWALD_CRASH_AT kills, then a
# power-loss run (MEMWALD_POWER_LOSS: every write after the last completed
# fsync of each file and directory is thrown away at each cut). Each prints
# its own summary line `cycles=… rows_acked=… lost=… extra=… duplicate=…
# unknown_resolved=…`; lost, extra and duplicate must be 0.
#
#   bench/crashloop-long.sh [CYCLES [POWER_CYCLES [SEED]]]   (default 1000 300 1)
#
# The power-loss run is shorter by default: the power-loss journal counts
# every file and directory it has ever seen (MW_POWERLOSS_MAX_NODES = 65536,
# src/storage/local.h), including those GC has deleted since, and every
# cycle creates WAL entries, SSTable directories and manifests, so a few
# hundred cycles fit. The SIGKILL run reads the table with LanceDB every
# 10th cycle (--read-every 10) and verifies it against the model every
# 100th (--verify-every 100); the power-loss run verifies every 50th. Both
# run tools/crashloop's table configuration, which compacts (every 300 ms
# from 2 SSTables) and collects garbage (200 ms graces), so the crash points
# include compaction commits and GC deletes.
# Run from the repository root after `tools/build.sh` and `npm install` in
# tests/interop. MEMWALD / MEMWALCTL override the binaries.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
cycles=${1:-1000}
power=${2:-300}
seed=${3:-1}
memwald=${MEMWALD:-$here/build/src/memwald}
memwalctl=${MEMWALCTL:-$here/build/src/memwalctl}
[ -x "$memwald" ] && [ -x "$memwalctl" ] || { echo "crashloop-long: build first (tools/build.sh)" >&2; exit 1; }
rc=0
if [ "$cycles" -gt 0 ]; then
  "$here/tools/crashloop" --cycles "$cycles" --seed "$seed" --read-every 10 --verify-every 100 --progress 50 \
    --memwald "$memwald" --memwalctl "$memwalctl" || rc=1
fi
if [ "$power" -gt 0 ]; then
  "$here/tools/crashloop" --cycles "$power" --seed "$seed" --power-loss --verify-every 50 --progress 50 \
    --memwald "$memwald" --memwalctl "$memwalctl" || rc=1
fi
exit $rc
