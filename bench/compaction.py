#!/usr/bin/env python3
"""bench/compaction.py — thousands of flushes with and without compaction,
read by LanceDB 0.39.0 (docs/benchmarks.md "Compaction").

  bench/compaction.py [--flushes 5000] [--rows-per-flush 100] [--keys 50000]
                      [--build build] [--keep]

For each mode (compaction + GC on, then off) in a fresh directory:
  1. bench_compaction writes 10 flushes (MemTables of R rows, upserts and
     10 % deletes over K keys) into a new table; LanceDB measures a full LSM
     scan and point lookups (bench/compaction-peer.mjs measure);
  2. it continues to FLUSHES flushes; LanceDB measures again;
  3. on disk: SSTable directories and listed/uncompacted SSTables, WAL files
     and bytes, the whole table; LanceDB writes the same rows once into a
     fresh table (write-once), whose size is the reference.
Prints both modes side by side, the targets of issue 12 as ratios, and one
`result ...` line per mode. The same run measures both modes and the peer,
so the ratios hold on a noisy machine.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
PEER = os.path.join(HERE, "compaction-peer.mjs")


def run(cmd, progress=False, **kw):
    """progress: the tool's stderr (one line per 500 flushes) goes to ours as it comes."""
    if progress:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, **kw)
        if r.returncode != 0:
            sys.exit(f"compaction.py: {' '.join(cmd)} failed:\n{r.stdout[-1000:]}")
        return r.stdout
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"compaction.py: {' '.join(cmd)} failed:\n{r.stderr[-3000:]}{r.stdout[-1000:]}")
    return r.stdout


def measure(table, scans=3, lookups=20):
    out = run(["node", PEER, "measure", table, "--scans", str(scans), "--lookups", str(lookups)])
    return json.loads(out.strip().splitlines()[-1])


def du(path):
    total, files = 0, 0
    for root, _, names in os.walk(path):
        for n in names:
            total += os.path.getsize(os.path.join(root, n))
            files += 1
    return total, files


def disk(table):
    wal_bytes = wal_files = dirs = 0
    mw = os.path.join(table, "_mem_wal")
    for shard in os.listdir(mw):
        wal = os.path.join(mw, shard, "wal")
        if os.path.isdir(wal):
            b, f = du(wal)
            wal_bytes += b
            wal_files += f
        dirs += sum(1 for d in os.listdir(os.path.join(mw, shard)) if "_gen_" in d)
    table_bytes, table_files = du(table)
    parts = {}
    for top in sorted(os.listdir(table)):
        b, f = du(os.path.join(table, top)) if os.path.isdir(os.path.join(table, top)) else (0, 0)
        parts[top] = (b, f)
    return {"wal_files": wal_files, "wal_bytes": wal_bytes, "sstable_dirs": dirs, "table_bytes": table_bytes,
            "table_files": table_files, "parts": parts}


def result_line(out):
    line = [l for l in out.splitlines() if l.startswith("result ")][-1]
    return dict(kv.split("=", 1) for kv in line.split()[1:])


def one_mode(a, mode):
    work = tempfile.mkdtemp(prefix=f"memwald-bench-compact-{mode}-")
    tool = os.path.join(a.build, "bench", "bench_compaction")
    common = ["--dir", work, "--rows-per-flush", str(a.rows_per_flush), "--keys", str(a.keys), "--compaction", mode]
    t0 = time.monotonic()
    run([tool, "--flushes", "10", "--create", "--seed", "1"] + common)
    m10 = measure(os.path.join(work, "t.lance"))
    print(f"# mode {mode}: 10 flushes done, LanceDB scan {m10['scan_ms']:.0f} ms; writing {a.flushes - 10} more",
          file=sys.stderr, flush=True)
    res = result_line(run([tool, "--flushes", str(a.flushes - 10), "--seed", "2"] + common, progress=True))
    print(f"# mode {mode}: {res}", file=sys.stderr, flush=True)
    ingest_s = time.monotonic() - t0
    # without compaction a scan reads every SSTable (minutes at 5 000): fewer repeats
    mN = measure(os.path.join(work, "t.lance"), *((3, 20) if mode == "on" else (1, 5)))
    d = disk(os.path.join(work, "t.lance"))
    once = json.loads(run(["node", PEER, "write-once", os.path.join(work, "t.lance"),
                           os.path.join(work, "once")]).strip().splitlines()[-1])
    once_bytes, _ = du(os.path.join(work, "once"))
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    return {"m10": m10, "mN": mN, "disk": d, "res": res, "once_bytes": once_bytes, "once_rows": once["rows"],
            "ingest_s": ingest_s, "work": work}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--flushes", type=int, default=5000)
    ap.add_argument("--rows-per-flush", type=int, default=100)
    ap.add_argument("--keys", type=int, default=50000)
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--modes", default="on,off",
                    help="on,off (default) or on: without the no-compaction run (its LanceDB scans take minutes)")
    a = ap.parse_args()
    modes = a.modes.split(",")
    out = {mode: one_mode(a, mode) for mode in modes}
    if "off" not in out:
        on = out["on"]
        print(f"{a.flushes} flushes of {a.rows_per_flush} rows ({a.keys} keys), compaction + GC only")
        print(f"ingest {on['ingest_s']:.1f} s; LanceDB scan after 10 / {a.flushes} flushes: {on['m10']['scan_ms']:.0f} / "
              f"{on['mN']['scan_ms']:.0f} ms ({on['mN']['scan_ms'] / on['m10']['scan_ms']:.2f}x); point lookup median / "
              f"p90 {on['mN']['lookup_ms']:.0f} / {on['mN']['lookup_p90_ms']:.0f} ms; rows / countRows() "
              f"{on['mN']['rows']} / {on['mN']['count_rows']}")
        print(f"SSTables a reader reads {on['res']['uncompacted_sstables']}; WAL files {on['disk']['wal_files']}; "
              f"table on disk {on['disk']['table_bytes'] / 1e6:.2f} MB ({on['disk']['table_files']} files), written once by "
              f"LanceDB {on['once_bytes'] / 1e6:.2f} MB: {on['disk']['table_bytes'] / on['once_bytes']:.2f}x")
        parts = ", ".join(f"{k} {b / 1e6:.2f} MB ({f})" for k, (b, f) in on["disk"]["parts"].items())
        print(f"on disk: {parts}")
        print(f"result mode=on flushes={a.flushes} scan10_ms={on['m10']['scan_ms']:.0f} scanN_ms={on['mN']['scan_ms']:.0f} "
              f"lookup_ms={on['mN']['lookup_ms']:.1f} wal_files={on['disk']['wal_files']} "
              f"table_bytes={on['disk']['table_bytes']} once_bytes={on['once_bytes']}")
        return
    mb = lambda b: f"{b / 1e6:.1f} MB"
    print(f"{a.flushes} flushes of {a.rows_per_flush} rows (upserts, 10 % deletes, {a.keys} keys), one shard")
    print(f"{'':34}{'compaction+GC':>18}{'no compaction':>18}")
    rows = [
        ("ingest (s)", lambda r: f"{r['ingest_s']:.1f}"),
        ("LanceDB scan after 10 flushes", lambda r: f"{r['m10']['scan_ms']:.0f} ms"),
        (f"LanceDB scan after {a.flushes}", lambda r: f"{r['mN']['scan_ms']:.0f} ms"),
        ("LanceDB point lookup (median)", lambda r: f"{r['mN']['lookup_ms']:.0f} ms"),
        ("LanceDB point lookup (p90)", lambda r: f"{r['mN']['lookup_p90_ms']:.0f} ms"),
        ("rows read / countRows()", lambda r: f"{r['mN']['rows']} / {r['mN']['count_rows']}"),
        ("SSTables a reader reads", lambda r: r["res"]["uncompacted_sstables"]),
        ("SSTable directories on disk", lambda r: str(r["disk"]["sstable_dirs"])),
        ("WAL files / bytes", lambda r: f"{r['disk']['wal_files']} / {mb(r['disk']['wal_bytes'])}"),
        ("table on disk", lambda r: f"{mb(r['disk']['table_bytes'])} ({r['disk']['table_files']} files)"),
        ("same rows written once by LanceDB", lambda r: mb(r["once_bytes"])),
        ("compaction runs / folded fragments", lambda r: f"{r['res']['runs']} / {r['res']['folded']}"),
    ]
    for name, f in rows:
        print(f"{name:34}{f(out['on']):>18}{f(out['off']):>18}")
    on, off = out["on"], out["off"]
    scan_ratio = on["mN"]["scan_ms"] / on["m10"]["scan_ms"]
    disk_ratio = on["disk"]["table_bytes"] / on["once_bytes"]
    print(f"target: scan after {a.flushes} flushes within 2x of after 10 (compaction on): {scan_ratio:.2f}x "
          f"[{'met' if scan_ratio <= 2 else 'MISSED'}]  (off: {off['mN']['scan_ms'] / off['m10']['scan_ms']:.1f}x)")
    print(f"target: disk within 2x of the rows written once by LanceDB: {disk_ratio:.2f}x "
          f"[{'met' if disk_ratio <= 2 else 'MISSED'}]  (off: {off['disk']['table_bytes'] / off['once_bytes']:.1f}x)")
    print(f"LanceDB after {a.flushes} flushes, no compaction / compaction: scan "
          f"{off['mN']['scan_ms'] / max(on['mN']['scan_ms'], 0.1):.0f}x, point lookup "
          f"{off['mN']['lookup_ms'] / max(on['mN']['lookup_ms'], 0.1):.0f}x, table on disk "
          f"{off['disk']['table_bytes'] / on['disk']['table_bytes']:.1f}x")
    print(f"target: WAL files bounded by a small constant per shard: {on['disk']['wal_files']} "
          f"(off: {off['disk']['wal_files']})")
    print(f"countRows() = live rows with compaction: {on['mN']['count_rows'] == on['mN']['rows']} "
          f"({on['mN']['count_rows']} of {on['mN']['rows']}; off: {off['mN']['count_rows']})")
    for mode in ("on", "off"):
        parts = ", ".join(f"{k} {mb(b)} ({f})" for k, (b, f) in out[mode]["disk"]["parts"].items())
        print(f"on disk, {mode}: {parts}")
    for mode in ("on", "off"):
        r = out[mode]
        print(f"result mode={mode} flushes={a.flushes} scan10_ms={r['m10']['scan_ms']:.0f} "
              f"scanN_ms={r['mN']['scan_ms']:.0f} lookup_ms={r['mN']['lookup_ms']:.1f} "
              f"wal_files={r['disk']['wal_files']} table_bytes={r['disk']['table_bytes']} once_bytes={r['once_bytes']}")


if __name__ == "__main__":
    main()
