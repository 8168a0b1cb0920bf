#!/usr/bin/env python3
"""bench/vindex_ingest.py — ingest into a table whose write spec maintains a
vector index (issue 27's cost target), memwald beside LanceDB 0.39.0's own
writer in the same run. Builds nothing.

    bench/vindex_ingest.py [--build build] [--rows 10000] [--batch 500]
                           [--base 3000] [--repeat 1] [--dir SCRATCH]

For each repeat, in this order (so both sides see about the same load):
1. memwald: LanceDB makes the table (bench/vindex-peer.mjs make: bench_ingest's
   `wide` shape with vec fixed_size_list<float32,128>, --base random rows, an
   IVF_PQ index on vec, the default LSM write spec, which maintains it);
   the daemon opens it at its defaults (durable: an OK means the WAL entry is
   fsynced), bench_ingest --spread sends --rows rows, one write of --batch rows at a
   time (the peer's discipline), then `memwalctl flush` (returns when the
   SSTable, with its vector index, is committed) is timed. LanceDB's default
   vector search must then find sampled rows among the 10 nearest to their
   own vectors (a search that misses a row is a lost row: the run fails).
2. LanceDB's writer on the same rows (vindex-peer.mjs ingest): mergeInsert of
   --batch rows a call, then closeLsmWriters() (its flush), with the index
   maintained and, for reference, without it (maintainedIndexes []).
3. Prints rows/s of the writes alone and of writes plus the flush (the rows
   durable and searchable through the index), memwald's over LanceDB's.

Target (issue 27): memwald's durable ingest with the maintained index >= 1.5x
LanceDB's. Exit status 0 when every run completed and every sampled row was
found; targets are reported, not enforced (this machine varies 2-5x).
"""
import argparse
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEER = os.path.join(SRC, "bench", "vindex-peer.mjs")
ID_BASE = 1000000000


def cpu_s(pid):
    """utime + stime of process pid, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_s():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def node(args, timeout=1800):
    r = subprocess.run(["node", PEER] + args, capture_output=True, text=True, timeout=timeout)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        raise RuntimeError(f"vindex-peer {args[0]} failed ({r.returncode}):\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return json.loads(lines[-1])


def sample(rows):
    step = max(1, rows // 200)
    return f"{ID_BASE},{rows // step},{step}"


def memwald_run(build, scratch, rows, batch, base):
    tdir = os.path.join(scratch, "mw")
    node(["make", tdir, "--base", str(base)])
    conf, sock, log = (os.path.join(tdir, n) for n in ("memwald.conf", "admin.sock", "memwald.log"))
    with open(conf, "w") as f:
        f.write(f"[daemon]\nlog_level = notice\ndata_dir = {tdir}/data\nadmin_socket = {sock}\n"
                f"listen = 127.0.0.1:0\nidle_timeout_ms = 0\n[table t]\nuri = {tdir}/t.lance\nclaim = eager\n")
    logf = open(log, "w")
    p = subprocess.Popen([os.path.join(build, "src", "memwald"), "-c", conf], stdout=subprocess.DEVNULL, stderr=logf)
    try:
        port, deadline = None, time.monotonic() + 120
        while time.monotonic() < deadline and p.poll() is None:
            text = open(log).read()
            m = re.search(r"listening on \S+ \(port (\d+)\)", text)
            if m and " started" in text:
                port = int(m.group(1))
                break
            time.sleep(0.05)  # polling the log for a condition, with a deadline
        if port is None:
            raise RuntimeError("memwald did not start:\n" + open(log).read()[-3000:])
        gen = [os.path.join(build, "bench", "bench_ingest"), "--connections", "1", "--pipeline", "1",
               "--batch", str(batch), "--rows", str(rows), "--seconds", "3600", "--warmup", "0",
               "--shape", "wide", "--spread", "--table", "t", "--id-base", str(ID_BASE), f"127.0.0.1:{port}"]
        t0 = time.monotonic()
        r = subprocess.run(gen, capture_output=True, text=True, timeout=3600)
        write_s = time.monotonic() - t0
        kv = dict(tok.split("=", 1) for tok in (r.stdout.strip().splitlines() or [""])[-1].split() if "=" in tok)
        if r.returncode != 0 or kv.get("errors") != "0":
            raise RuntimeError(f"bench_ingest failed ({r.returncode}): {r.stdout[-500:]} {r.stderr[-1000:]}")
        c1, t1 = cpu_s(p.pid), time.monotonic()
        f = subprocess.run([os.path.join(build, "src", "memwalctl"), "-s", sock, "flush"], capture_output=True,
                           text=True, timeout=1800)
        flush_s, flush_cpu_s = time.monotonic() - t1, cpu_s(p.pid) - c1
        if f.returncode != 0:
            raise RuntimeError(f"memwalctl flush failed: {f.stdout} {f.stderr}")
    finally:
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=300)
        logf.close()
    if rc != 0:
        raise RuntimeError(f"memwald exited {rc}:\n" + open(log).read()[-3000:])
    found = node(["search", tdir, "--ids", sample(rows)])
    return {"write_s": write_s, "flush_s": flush_s, "flush_cpu_s": flush_cpu_s, "ack_p50_ms": float(kv.get("ack_p50_ms", "0")),
            "ack_p99_ms": float(kv.get("ack_p99_ms", "0")), "search": found}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--rows", type=int, default=10000)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--base", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--dir")
    a = ap.parse_args()
    if not 1 <= a.rows <= 1000000:
        sys.exit("vindex_ingest: --rows 1..1000000 (bench_ingest --spread's vectors repeat every 1 010 707 ids)")
    build = os.path.abspath(a.build)
    ok = True
    for k in range(a.repeat):
        scratch = tempfile.mkdtemp(prefix="mw-vindex-ingest-", dir=a.dir)
        try:
            load0 = os.getloadavg()[0]
            mw = memwald_run(build, scratch, a.rows, a.batch, a.base)
            cc = children_cpu_s()
            peer = node(["ingest", os.path.join(scratch, "peer"), "--base", str(a.base), "--rows", str(a.rows),
                         "--batch", str(a.batch), "--id-base", str(ID_BASE), "--maintain", "yes"])
            peer["cpu_s"] = children_cpu_s() - cc
            peer_found = node(["search", os.path.join(scratch, "peer"), "--ids", sample(a.rows)])
            bare = node(["ingest", os.path.join(scratch, "peer0"), "--base", str(a.base), "--rows", str(a.rows),
                         "--batch", str(a.batch), "--id-base", str(ID_BASE), "--maintain", "no"])
            load1 = os.getloadavg()[0]
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        mw_w, mw_t = a.rows / mw["write_s"], a.rows / (mw["write_s"] + mw["flush_s"])
        s = mw["search"]
        print(f"run {k + 1}: {a.rows} rows x dim 128, {a.batch} rows a write, base {a.base} rows (IVF_PQ), "
              f"load {load0:.1f} -> {load1:.1f}")
        print(f"  memwald                     writes {mw['write_s']:7.2f} s ({mw_w:8.0f} rows/s, ack p50 "
              f"{mw['ack_p50_ms']:.1f} ms p99 {mw['ack_p99_ms']:.1f} ms)  flush {mw['flush_s']:6.2f} s  "
              f"total {mw_t:8.0f} rows/s")
        for name, r in (("LanceDB, index maintained", peer), ("LanceDB, no index", bare)):
            print(f"  {name:27s} writes {r['write_s']:7.2f} s ({r['rows_per_s_write']:8.0f} rows/s, call p50 "
                  f"{r['lat_ms']['p50']:.1f} ms p99 {r['lat_ms']['p99']:.1f} ms)  flush {r['close_s']:6.2f} s  "
                  f"total {r['rows_per_s_total']:8.0f} rows/s")
        print(f"  memwald / LanceDB (index maintained): writes {mw_w / peer['rows_per_s_write']:.2f}x, "
              f"writes + flush {mw_t / peer['rows_per_s_total']:.2f}x   (target >= 1.5x: "
              f"{'met' if mw_t / peer['rows_per_s_total'] >= 1.5 else 'NOT met'})")
        print(f"  LanceDB's writer, the whole ingest (its HNSW builds as rows arrive): {peer['cpu_s']:.2f} s CPU; "
              f"memwald's flush (its HNSW builds then): {mw['flush_cpu_s']:.2f} s CPU")
        pf = peer_found
        print(f"  LanceDB's vector search over LanceDB's own SSTable index: {pf['found_in_10']}/{pf['searched']} "
              f"sampled rows in the 10 nearest to their own vector, {pf['found_first']} first")
        print(f"  LanceDB's vector search over memwald's SSTable index: {s['found_in_10']}/{s['searched']} "
              f"sampled rows in the 10 nearest to their own vector, {s['found_first']} first" + (f"; MISSED ids {s['missed']}" if s["missed"] else ""))
        ok = ok and s["found_in_10"] == s["searched"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
