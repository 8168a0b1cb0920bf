#!/usr/bin/env python3
"""bench/vindex_recall.py — recall@10 of LanceDB 0.39.0's vector search over
memwald's per-SSTable index against over LanceDB's own, on the same rows
(issue 27's recall target: ours >= LanceDB's - 0.01). Builds nothing.

    bench/vindex_recall.py [--build build] [--queries 100] [--dir SCRATCH]
                           ROWSxDIM...          (default: 10000x128 10000x768)

For each ROWSxDIM:
1. LanceDB's writer (bench/vindex-recall.mjs make): a table with an IVF_PQ
   index maintained by the default write spec; ROWS random rows in [-1, 1]
   through LanceDB's own writer, flushed: its SSTable with its own
   IVF_HNSW_SQ index. The CPU time of that write and flush is printed.
2. A copy whose SSTable is rebuilt by memwald's SSTable writer from exactly
   the WAL entries LanceDB's covered (build/tests/interop/mw_sst_tool vector
   --mode replace --vindex vec_idx:vec:l2): the same rows, memwald's index.
   Its CPU time (WAL decode, data file, keys, _pk_index, the index and its
   read-back) is printed.
3. For both tables the same queries (vindex-recall.mjs recall): recall@10
   of LanceDB's default search filtered to the fresh ids against brute
   force, and how many rows LanceDB finds first by their own vector.
Prints one JSON line per table and a summary line. Exit 1 when a step
failed; the target is reported, not enforced.
"""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEER = os.path.join(SRC, "bench", "vindex-recall.mjs")


def children_cpu_s():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(cmd, what):
    c0, w0 = children_cpu_s(), time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=7200)
    cpu, wall = children_cpu_s() - c0, time.monotonic() - w0
    if r.returncode != 0:
        sys.exit(f"{what} failed (exit {r.returncode}):\n{r.stderr[-3000:]}")
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    return (json.loads(lines[-1]) if lines else {}), cpu, wall


def one(scratch, build, rows, dim, queries):
    top = os.path.join(scratch, f"{rows}x{dim}")
    lance = os.path.join(top, "lance")
    os.makedirs(lance)
    made, _, _ = run(["node", PEER, "make", lance, "--rows", str(rows), "--dim", str(dim)], "make")
    ours = os.path.join(top, "ours")
    shutil.copytree(lance, ours)
    tool = os.path.join(build, "tests", "interop", "mw_sst_tool")
    _, tool_cpu, tool_wall = run([tool, "vector", os.path.join(ours, "t.lance"), "--mode", "replace", "--seed", "7",
                                  "--vindex", "vec_idx:vec:l2"], "mw_sst_tool")
    out = {}
    for name, d in (("lancedb", lance), ("memwald", ours)):
        r, _, wall = run(["node", PEER, "recall", d, "--queries", str(queries), "--dim", str(dim)], f"recall {name}")
        out[name] = r
        print(json.dumps({"rows": rows, "dim": dim, "index": name, **r, "search_wall_s": round(wall, 1)}))
    print(json.dumps({"rows": rows, "dim": dim, "lancedb_write_flush_cpu_s": round(made["cpu_s"], 2),
                      "lancedb_write_flush_wall_s": round(made["wall_s"], 2),
                      "memwald_sstable_build_cpu_s": round(tool_cpu, 2), "memwald_sstable_build_wall_s": round(tool_wall, 2),
                      "recall_lancedb": out["lancedb"]["recall_at_10"], "recall_memwald": out["memwald"]["recall_at_10"],
                      "target_met": out["memwald"]["recall_at_10"] >= out["lancedb"]["recall_at_10"] - 0.01}))
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--dir")
    ap.add_argument("sizes", nargs="*", default=["10000x128", "10000x768"])
    a = ap.parse_args()
    scratch = tempfile.mkdtemp(prefix="memwald-vindex-recall-", dir=a.dir)
    print(f"# load {os.getloadavg()[0]:.1f}, scratch {scratch}")
    try:
        for s in a.sizes:
            rows, dim = (int(x) for x in s.split("x"))
            one(scratch, a.build, rows, dim, a.queries)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
