#!/usr/bin/env python3
"""bench/compaction_scale.py — how a compaction run's cost grows with the
base table's size (issue 12: finding the superseded base rows must not scan
the base; docs/engine.md "Compaction", cost).

  bench/compaction_scale.py [--sizes 250000,1000000,2000000,4000000]
                            [--flushes 40] [--rows-per-flush 100] [--build build]

One table, grown in stages: bench_compaction --sequential writes new keys
in MemTables of 50 000 rows (compaction merges them into the base) until
the base holds SIZE rows (a requested compaction after every 4). After each
stage, in a fresh process (cold key index cache), FLUSHES MemTables of R
upserts with random keys over the whole base (10 % deletes) are compacted
by a requested compaction after every 4 SSTables (--compact-every 4, as
`memwalctl compact`); each committed run's duration is printed by the tool
(--runs).
Reported per size: the first run (it loads every fragment's key index from
_memwald/keys/), the median of the others, the base's fragments.

The peer, in the same invocation: LanceDB 0.39.0 writes a plain table of
SIZE rows with the same schema and merges the same number of upserts
(mergeInsert on id: its way to apply keyed updates to a base table without
an index), median of 5 merges (bench/compaction-peer.mjs merge).
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
PEER = os.path.join(HERE, "compaction-peer.mjs")
GROW_ROWS = 50000


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"compaction_scale.py: {' '.join(cmd)} failed:\n{r.stderr[-3000:]}{r.stdout[-1000:]}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="250000,1000000,2000000,4000000")
    ap.add_argument("--flushes", type=int, default=40)
    ap.add_argument("--rows-per-flush", type=int, default=100)
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    tool = os.path.join(a.build, "bench", "bench_compaction")
    work = tempfile.mkdtemp(prefix="memwald-bench-scale-")
    base = 0
    out = []
    try:
        for size in sizes:
            grow = (size - base) // GROW_ROWS
            if grow > 0:
                run([tool, "--dir", work, "--flushes", str(grow), "--rows-per-flush", str(GROW_ROWS),
                     "--sequential", str(base), "--compact-every", "4"] + (["--create"] if base == 0 else []))
                base += grow * GROW_ROWS
            res = run([tool, "--dir", work, "--flushes", str(a.flushes), "--rows-per-flush", str(a.rows_per_flush),
                       "--keys", str(base), "--runs", "--compact-every", "4", "--seed", str(size)])
            runs = [dict(kv.split("=", 1) for kv in l.split()[1:]) for l in res.splitlines() if l.startswith("run ")]
            if len(runs) < 2:
                sys.exit(f"compaction_scale.py: only {len(runs)} runs at {base} rows:\n{res}")
            ms = [int(r["ms"]) for r in runs]
            peer = json.loads(run(["node", PEER, "merge", os.path.join(work, "peer"), "--rows", str(base),
                                   "--upserts", str(4 * a.rows_per_flush), "--merges", "5"]).strip().splitlines()[-1])
            shutil.rmtree(os.path.join(work, "peer"), ignore_errors=True)
            row = {"rows": base, "first_ms": ms[0], "median_ms": statistics.median(ms[1:]), "runs": len(ms),
                   "fragments": int(runs[-1]["base_fragments"]), "peer_merge_ms": peer["merge_ms"]}
            out.append(row)
            print(f"# {row}", file=sys.stderr, flush=True)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"compaction of {4 * a.rows_per_flush} upserted keys per run (4 SSTables of {a.rows_per_flush}) into a base of N rows")
    print(f"{'base rows':>10}{'fragments':>11}{'first run':>11}{'median run':>12}{'LanceDB merge':>15}{'ratio':>8}")
    for r in out:
        print(f"{r['rows']:>10}{r['fragments']:>11}{r['first_ms']:>9} ms{r['median_ms']:>9.0f} ms"
              f"{r['peer_merge_ms']:>12.0f} ms{r['peer_merge_ms'] / max(r['median_ms'], 1):>7.1f}x")
    for r in out:
        print(f"result rows={r['rows']} fragments={r['fragments']} first_ms={r['first_ms']} median_ms={r['median_ms']:.0f} "
              f"runs={r['runs']} peer_merge_ms={r['peer_merge_ms']:.0f}")


if __name__ == "__main__":
    main()
