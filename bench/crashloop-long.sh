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
# The power-loss run is shorter by default: its journal keeps every file of
# the table in memory at each start (MW_POWERLOSS_MAX_NODES = 65536 files and
# directories), and the table keeps every WAL entry it ever wrote (each
# cycle adds WAL entries and SSTable files), so a few hundred cycles fit.
# The SIGKILL run reads the table with LanceDB every 10th cycle (and at each
# verification, every 100): each scan opens every SSTable the table ever
# flushed (nothing compacts them; about 3.3 per cycle), so one scan per
# cycle makes the run quadratic (about 1 s per scan after 80 cycles).
# Nothing ever removes an SSTable from a shard manifest, so a committed but
# unreadable SSTable is still seen by the next scan.
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
