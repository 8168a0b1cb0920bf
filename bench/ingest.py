#!/usr/bin/env python3
"""bench/ingest.py — the ingest benchmark (issues 5 and 14): the real memwald
daemon fed by bench_ingest over TCP, beside Lance's own writer (LanceDB 0.39.0
mergeInsert, bench/ingest-peer.mjs) in the same run. Builds nothing.

    bench/ingest.py [--build build] [--seconds 5] [--peer-seconds 4]
                    [--dir SCRATCH] [--no-peer] [--perf[=KEYS]] [--daemon-env K=V ...]

0. Measures the scratch disk with `BUILD/bench/bench_storage` (an fdatasync
   loop, dd conv=fsync, one durable put_if_absent at a time): the physical
   floor of an acknowledged write, printed with the run.
1. Starts `BUILD/src/memwald` on a temporary config under SCRATCH (default
   a fresh directory under /tmp, a real disk here): tables `small` (id int64
   not null, name string, v double) and `wide` (+ vec fixed_size_list
   <float32,128>), created at start, claimed eagerly, Lance's writer
   defaults (durable_write = true: an OK means the WAL entry is fsynced;
   group commit max_wal_flush_interval_ms = 1, memwald's default).
2. Runs bench_ingest for every scenario, --seconds each (the first second is
   warm-up, not counted), and samples the daemon's CPU time
   (/proc/PID/stat) over each:
     NDJSON ~60-byte rows, 1 connection and 16 connections (pipelined);
     NDJSON ~1 KB rows with vec(128), 16 connections;
     ARROW frames of 10 000 rows: wide (5.7 MB each) on 2 connections,
     small on 16, two frames in flight per connection;
     open loop at 50% of the 16-connection NDJSON peak (p99 ack target);
     one write at a time on one connection at 1, 100 and 10 000 rows per
     write (the peer's discipline) for both shapes.
   Then the generator alone against `bench_ingest --sink` for the two
   heaviest scenarios, to show it is not the bottleneck.
3. Stops the daemon (SIGTERM; it drains and flushes) and checks it exits 0.
4. Runs bench/ingest-peer.mjs: the same rows through LanceDB's mergeInsert
   at 1, 100 and 10 000 rows per call, at its defaults and with
   max_wal_flush_interval_ms=1, --peer-seconds each (+1 s warm-up).
5. Prints one table: memwald's figures, the peer's, the ratios
   memwald/peer, and issue 14's targets (met / not met).

--daemon-env sets an environment variable for the daemon (A/B runs, e.g.
GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432).

--pairs N (N > 0): on a loaded machine, after the runs above and before the
daemon stops, each one-write-at-a-time case again N times as interleaved
pairs: memwald's run, then LanceDB's at the 1 ms interval for the same shape
and batch (ingest-peer.mjs for that case alone), so both sides of each pair
see about the same load; each pair's ratio, the load average then, and the
median ratio are printed after the targets.

--perf records the daemon with `perf record -g` during the 16-connection
NDJSON run and the small one-write-of-10 000-at-a-time run (--perf=KEYS:
during the scenarios named, e.g. --perf=arrow_wide,one_wide_10000,open100),
and prints after the table, for each, the daemon's self time by object
(the kernel's share), by symbol and by thread.

Exit status: 0 when every run completed without errors (targets missed are
reported, not failures), 1 otherwise.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLK = os.sysconf("SC_CLK_TCK")

CONFIG = """[daemon]
log_level = notice
data_dir = {dir}/data
admin_socket = {dir}/admin.sock
listen = 127.0.0.1:0
max_connections = 256
idle_timeout_ms = 0
[table small]
uri = {dir}/small.lance
create = true
schema = id:int64 not null, name:string, v:double
primary_key = id
claim = eager
[table wide]
uri = {dir}/wide.lance
create = true
schema = id:int64 not null, name:string, v:double, vec:fixed_size_list<float32,128>
primary_key = id
claim = eager
"""


def cpu_ticks(pid, tid=None):
    """utime + stime of process pid, or of its thread tid (the loop thread
    is the main one: tid == pid)."""
    with open(f"/proc/{pid}/task/{tid}/stat" if tid else f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime (fields 14, 15)


def parse_kv(line):
    out = {}
    for tok in line.split():
        if "=" in tok:
            k, v = tok.split("=", 1)
            try:
                out[k] = float(v)
            except ValueError:
                out[k] = v
    return out


class Daemon:
    def __init__(self, memwald, scratch, env=None):
        self.conf = os.path.join(scratch, "memwald.conf")
        with open(self.conf, "w") as f:
            f.write(CONFIG.format(dir=scratch))
        self.log = os.path.join(scratch, "memwald.log")
        self.logf = open(self.log, "w")
        self.p = subprocess.Popen([memwald, "-c", self.conf], stdout=subprocess.DEVNULL, stderr=self.logf,
                                  env=dict(os.environ, **(env or {})))
        self.port = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.p.poll() is None:
            text = open(self.log).read()
            m = re.search(r"listening on \S+ \(port (\d+)\)", text)
            if m and " started" in text:
                self.port = int(m.group(1))
                return
            time.sleep(0.05)  # polling the log for a condition, with a deadline
        raise RuntimeError("memwald did not start:\n" + open(self.log).read()[-3000:])

    def stop(self, timeout=120):
        self.p.send_signal(signal.SIGTERM)
        try:
            rc = self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            rc = self.p.wait()
        self.logf.close()
        return rc


def run_gen(gen, addr, args, daemon=None, perf_out=None):
    """One bench_ingest run; returns its figures plus the daemon's cores."""
    cmd = [gen] + args + [addr]
    c0, t0 = (cpu_ticks(daemon.p.pid), time.monotonic()) if daemon else (0, 0)
    l0 = cpu_ticks(daemon.p.pid, daemon.p.pid) if daemon else 0
    perf = None
    if perf_out and daemon:
        perf = subprocess.Popen(["perf", "record", "-g", "-q", "-o", perf_out, "-p", str(daemon.p.pid)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if perf:
        perf.send_signal(signal.SIGINT)
        perf.wait(timeout=60)
    res = parse_kv(r.stdout.strip().splitlines()[-1]) if r.stdout.strip() else {}
    res["ok"] = r.returncode == 0 and "rows_per_s" in res
    res["stderr"] = r.stderr.strip()
    res["cmd"] = " ".join(os.path.relpath(a, SRC) if a.startswith(SRC) else a for a in args)
    if daemon:
        dt = time.monotonic() - t0
        res["daemon_cpu"] = (cpu_ticks(daemon.p.pid) - c0) / CLK / dt
        res["loop_cpu"] = (cpu_ticks(daemon.p.pid, daemon.p.pid) - l0) / CLK / dt
    return res


def fmt_row(label, r):
    if not r.get("ok"):
        return f"  {label:<44} FAILED: {r.get('stderr', '')[:200]}"
    rps = r["rows_per_s"]
    if rps <= 0:
        return f"  {label:<44} no write acknowledged inside the measured window (too slow: raise --seconds)"
    return (f"  {label:<44} {r['rows_per_s']:>10,.0f} {r['MB_per_s']:>7.1f} {r['bytes_per_row']:>5.0f}"
            f" {r['ack_p50_ms']:>8.3f} {r['ack_p99_ms']:>8.3f} {r['ack_p999_ms']:>8.3f}"
            f" {r.get('daemon_cpu', 0):>5.2f} {r.get('daemon_cpu', 0) / rps * 1e6:>6.2f}"
            f" {r.get('loop_cpu', 0) / rps * 1e6:>6.2f}"
            f" {r['gen_cpu']:>5.2f} {r['gen_cpu'] / rps * 1e6:>6.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--peer-seconds", type=float, default=4)
    ap.add_argument("--dir")
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument("--perf", nargs="?", const="small16,one_small_10000", default="", metavar="KEYS",
                    help="perf record -g the daemon during these scenarios (comma-separated keys: small1, small16, "
                         "wide16, arrow_wide, arrow_small, open1000, open100, one_SHAPE_BATCH; default "
                         "small16,one_small_10000)")
    ap.add_argument("--pairs", type=int, default=0)
    ap.add_argument("--daemon-env", action="append", default=[], metavar="K=V")
    a = ap.parse_args()
    memwald = os.path.join(a.build, "src", "memwald")
    gen = os.path.join(a.build, "bench", "bench_ingest")
    for f in (memwald, gen):
        if not os.access(f, os.X_OK):
            sys.exit(f"ingest.py: {f} missing: build it first (ninja -C {a.build} src/memwald bench/bench_ingest)")
    scratch = a.dir or tempfile.mkdtemp(prefix="mw-bench-ingest-")
    os.makedirs(scratch, exist_ok=True)
    S = str(a.seconds)
    failed = False
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load = os.getloadavg()

    disk = []
    bst = os.path.join(a.build, "bench", "bench_storage")
    if os.access(bst, os.X_OK):
        r = subprocess.run([bst, "-d", os.path.join(scratch, "disk"), "-n", "300", "-r", "1", "-L", "256",
                            "-b", "uring"], capture_output=True, text=True, timeout=600)
        disk = [l for l in r.stdout.splitlines() if "fdatasync" in l or "dd conv" in l or "pia -j1" in l]

    denv = dict(kv.split("=", 1) for kv in a.daemon_env)
    d = Daemon(memwald, scratch, denv)
    addr = f"127.0.0.1:{d.port}"
    base = ["--seconds", S, "--warmup", "1"]
    ids = iter(range(1, 1000))

    def gen_run(table, extra, perf_out=None):
        return run_gen(gen, addr, base + ["--table", table, "--id-base", str(next(ids) * 10**13)] + extra, d,
                       perf_out)

    R = {}
    perf_keys = [k for k in a.perf.split(",") if k]

    def prof(key):  # where this scenario's perf data goes, if it is recorded
        return os.path.join(scratch, f"perf-{key}.data") if key in perf_keys else None

    R["small1"] = gen_run("small", ["-c", "1", "-b", "1000", "-p", "8"], prof("small1"))
    R["small16"] = gen_run("small", ["-c", "16", "-b", "1000", "-p", "8"], prof("small16"))
    R["wide16"] = gen_run("wide", ["--shape", "wide", "-c", "16", "-b", "100", "-p", "8"], prof("wide16"))
    R["arrow_wide"] = gen_run("wide", ["--shape", "wide", "--arrow", "-c", "2", "-b", "10000", "-p", "2"], prof("arrow_wide"))
    R["arrow_small"] = gen_run("small", ["--arrow", "-c", "16", "-b", "10000", "-p", "2"], prof("arrow_small"))
    peak = R["small16"].get("rows_per_s", 0) if R["small16"].get("ok") else 0
    half = max(1000.0, peak / 2)
    R["open1000"] = gen_run("small", ["-c", "16", "-b", "1000", "-p", "64", "--rate", f"{half:.0f}"], prof("open1000"))
    R["open100"] = gen_run("small", ["-c", "16", "-b", "100", "-p", "256", "--rate", f"{half:.0f}"], prof("open100"))
    for shape in ("small", "wide"):
        for b in (1, 100, 10000):
            R[f"one_{shape}_{b}"] = gen_run(shape, ["--shape", shape, "-c", "1", "-b", str(b), "-p", "1"],
                                            prof(f"one_{shape}_{b}"))
    pairs = []  # (shape, batch, memwald rows/s, peer rows/s, load average)
    for shape in ("small", "wide"):
        for b in (1, 100, 10000):
            for k in range(a.pairs if not a.no_peer else 0):
                m = gen_run(shape, ["--shape", shape, "-c", "1", "-b", str(b), "-p", "1"])
                pr = subprocess.run(["node", os.path.join(SRC, "bench", "ingest-peer.mjs"), "--seconds",
                                     str(a.peer_seconds), "--shapes", shape, "--batches", str(b), "--configs",
                                     "max_wal_flush_interval_ms=1",
                                     "--dir", os.path.join(scratch, f"pair-{shape}-{b}-{k}")],
                                    capture_output=True, text=True, timeout=600)
                o = next((json.loads(l) for l in pr.stdout.splitlines() if l.startswith("{")), None)
                pairs.append((shape, b, m.get("rows_per_s", 0) if m.get("ok") else 0,
                              o["rows_per_s"] if o else 0, os.getloadavg()[0]))
                failed |= not m.get("ok") or o is None
    rc = d.stop()
    if rc != 0:
        failed = True
        print(f"memwald exited {rc}:\n" + open(d.log).read()[-2000:])

    # the generator alone, against a sink that only counts and acks
    sink_res = {}
    for key, extra, sink_args in (("small16", ["-c", "16", "-b", "1000", "-p", "8"], []),
                                  ("arrow_wide", ["--shape", "wide", "--arrow", "-c", "2", "-b", "10000", "-p", "2"],
                                   ["--batch", "10000"])):
        sp = subprocess.Popen([gen, "--sink"] + sink_args + ["127.0.0.1:0"], stderr=subprocess.PIPE, text=True)
        m = re.search(r"port (\d+)", sp.stderr.readline())  # "... listening on port N": it is bound
        if not m:
            sp.kill()
            sp.wait()
            failed = True
            continue
        port = int(m.group(1))
        sink_res[key] = run_gen(gen, f"127.0.0.1:{port}", base + extra)
        sp.kill()
        sp.wait()

    peer = {}
    peer_err = ""
    if not a.no_peer:
        pr = subprocess.run(["node", os.path.join(SRC, "bench", "ingest-peer.mjs"), "--seconds", str(a.peer_seconds),
                             "--dir", os.path.join(scratch, "peer")], capture_output=True, text=True, timeout=1800)
        for line in pr.stdout.splitlines():
            if line.startswith("{"):
                o = json.loads(line)
                peer[(o["shape"], o["config"], o["batch"])] = o
        if pr.returncode != 0 or len(peer) != 12:
            failed = True
            peer_err = pr.stderr[-1500:]

    # ------------------------------------------------------------ the table
    tree = subprocess.run(["git", "-C", SRC, "describe", "--always", "--dirty"], capture_output=True,
                          text=True).stdout.strip()
    print(f"bench/ingest.py, {started}, tree {tree}, {os.cpu_count()} cores, load average at start "
          f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f} (shared machine: figures are noisy)")
    print(f"memwald: durable_write=true (fsync before OK), group commit 1 ms, scratch on "
          f"{subprocess.run(['df', '--output=source,fstype', scratch], capture_output=True, text=True).stdout.split()[-2:]}; "
          f"{a.seconds:g} s per run, first 1 s not counted" + (f"; daemon env {denv}" if denv else ""))
    for l in disk:
        print("  disk (bench_storage, same scratch, just before): " + " ".join(l.split()))
    print("  (daemon, gen: CPU cores used during the run and CPU microseconds per acknowledged row, all threads;"
          " loop: the daemon's loop thread alone, microseconds per row)")
    print(f"  {'scenario':<44} {'rows/s':>10} {'MB/s':>7} {'B/row':>5} {'ack p50':>8} {'p99':>8} {'p999 ms':>8}"
          f" {'daemn':>5} {'us/row':>6} {'loop':>6} {'gen':>5} {'us/row':>6}")
    labels = [
        ("small1", "NDJSON ~60 B, 1 conn, 1000 rows/write x8"),
        ("small16", "NDJSON ~60 B, 16 conns, 1000 rows/write x8"),
        ("wide16", "NDJSON ~1 KB vec(128), 16 conns, 100/write x8"),
        ("arrow_wide", "ARROW 10k-row frames (5.7 MB), wide, 2 conns x2"),
        ("arrow_small", "ARROW 10k-row frames, small, 16 conns x2"),
        ("open1000", f"open loop {half:,.0f} rows/s (50%), 1000/write"),
        ("open100", f"open loop {half:,.0f} rows/s (50%), 100/write"),
    ]
    for shape in ("small", "wide"):
        for b in (1, 100, 10000):
            labels.append((f"one_{shape}_{b}", f"{shape}, 1 conn, one write of {b} at a time"))
    for key, label in labels:
        r = R[key]
        failed |= not r.get("ok")
        print(fmt_row(label, r))
    for key in ("open1000", "open100"):
        if R[key].get("ok"):
            print(f"    {key}: achieved {R[key]['rows_per_s']:,.0f} rows/s; p99 from the scheduled send time "
                  f"{R[key]['sched_p99_ms']:.3f} ms")
    print("  generator alone against `bench_ingest --sink` (counts lines, answers OK):")
    for key, r in sink_res.items():
        failed |= not r.get("ok")
        print(fmt_row(dict(labels)[key], r))

    if not a.no_peer:
        print("LanceDB 0.39.0 (Lance 12) mergeInsert, one call at a time (never fsyncs); "
              f"{a.peer_seconds:g} s per run after 1 s warm-up")
        print(f"  {'shape/config/rows per call':<44} {'rows/s':>10} {'MB/s':>8} {'call p50':>8} {'p99':>8} "
              f"{'p999 ms':>8}   memwald/peer: rows/s 1 conn same batch | rows/s 16 conns | ack p99 (1 conn; <1 = memwald faster)")
        for shape in ("small", "wide"):
            for cfg in ("default", "max_wal_flush_interval_ms=1"):
                for b in (1, 100, 10000):
                    o = peer.get((shape, cfg, b))
                    label = f"{shape} {'defaults' if cfg == 'default' else 'interval 1 ms'} batch {b}"
                    if o is None:
                        print(f"  {label:<44} FAILED")
                        continue
                    one = R[f"one_{shape}_{b}"]
                    best = R["small16" if shape == "small" else "wide16"]
                    rat = lambda x: f"{x['rows_per_s'] / o['rows_per_s']:8.2f}x" if x.get("ok") else "     n/a"
                    p99r = f"{one['ack_p99_ms'] / o['lat_ms']['p99']:6.2f}" if one.get("ok") else "   n/a"
                    print(f"  {label:<44} {o['rows_per_s']:>10,} {o['mb_per_s']:>8.1f} {o['lat_ms']['p50']:>8.3f}"
                          f" {o['lat_ms']['p99']:>8.3f} {o['lat_ms']['p999']:>8.3f}   {rat(one)} | {rat(best)} |"
                          f" {p99r}")
        if peer_err:
            print("  peer stderr (tail):\n" + "\n".join("    " + l for l in peer_err.splitlines()[-10:]))

    def tgt(name, ok, got):
        print(f"  {name:<62} {got:<28} {'met' if ok else 'NOT met'}")

    print("issue 14 targets (2 cores; replay, memory and the flush effect are bench_engine's):")

    def vs_peer(shape, b):
        o, one = peer.get((shape, "max_wal_flush_interval_ms=1", b)), R[f"one_{shape}_{b}"]
        return one.get("rows_per_s", 0) / o["rows_per_s"] if o and one.get("ok") else 0.0

    for shape in ("small", "wide"):
        for b, want in ((1, 1.2), (100, 1.5), (10000, 1.5)):
            x = vs_peer(shape, b)
            tgt(f">= {want}x LanceDB (1 ms interval), {shape}, one write of {b} at a time", x >= want,
                f"{x:.2f}x" if not a.no_peer else "no peer run")
    p50 = R["one_small_1"].get("ack_p50_ms", 1e9)
    tgt("one write of 1 row at a time: ack p50 <= 0.8 ms", p50 <= 0.8, f"{p50:.3f} ms")
    s16, aw, o1, o2 = R["small16"], R["arrow_wide"], R["open1000"], R["open100"]
    tgt(">= 3M durable rows/s, ~60 B NDJSON, 16 pipelined conns", s16.get("rows_per_s", 0) >= 3e6,
        f"{s16.get('rows_per_s', 0):,.0f} rows/s")
    us = s16.get("daemon_cpu", 0) / s16["rows_per_s"] * 1e6 if s16.get("rows_per_s") else 1e9
    tgt("daemon CPU <= 0.3 us per row (all threads), same run", us <= 0.3, f"{us:.2f} us/row")
    lus = s16.get("loop_cpu", 0) / s16["rows_per_s"] * 1e6 if s16.get("rows_per_s") else 0
    if lus > 0:  # not a target: what caps the rate once the other threads have cores
        print(f"  (the loop thread alone: {lus:.2f} us/row in that run, so at most {1 / lus:.2f}M rows/s on one free core)")
    tgt(">= 400 MB/s durable of ARROW frames (10k wide rows)", aw.get("MB_per_s", 0) >= 400,
        f"{aw.get('MB_per_s', 0):.1f} MB/s")
    best_p99 = min(r.get("ack_p99_ms", 1e9) for r in (o1, o2) if r.get("ok")) if (o1.get("ok") or o2.get("ok")) else 1e9
    tgt("p99 ack <= 2 ms at 50% of peak (open loop, best batch)", best_p99 <= 2.0, f"{best_p99:.3f} ms")

    if pairs:
        print(f"one write at a time, {a.pairs} interleaved pairs per case (memwald, then LanceDB 0.39.0 at the 1 ms "
              "interval, same shape and batch):")
        for shape in ("small", "wide"):
            for b in (1, 100, 10000):
                ps = [p for p in pairs if p[0] == shape and p[1] == b]
                rats = sorted(p[2] / p[3] for p in ps if p[3] > 0)
                each = "  ".join(f"{p[2]:,.0f}/{p[3]:,.0f}={p[2] / p[3]:.2f}x (load {p[4]:.1f})" if p[3] else "failed"
                                 for p in ps)
                med = f"median {rats[len(rats) // 2]:.2f}x" if rats else "no ratio"
                print(f"  {shape} {b:>5}: {med}; rows/s memwald/LanceDB: {each}")
    for key in perf_keys:
        data = prof(key)
        if not os.path.exists(data):
            print(f"perf ({key}): no data recorded")
            continue
        r = R.get(key, {})
        print(f"perf (daemon, {key}: {r.get('rows_per_s', 0):,.0f} rows/s, daemon {r.get('daemon_cpu', 0):.2f} cores):")
        for sort in ("dso", "symbol", "pid"):  # kernel or user, where the time goes, and on which thread
            rep = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", sort,
                                  "--stdio", "-g", "none", "--percent-limit", "1.5"],
                                 capture_output=True, text=True)
            print(f"  self time by {sort}:")
            for line in rep.stdout.splitlines():
                if line.strip() and not line.startswith("#"):
                    print("    " + line.strip())
    print("commands: " + "; ".join(f"bench_ingest {R[k]['cmd']}" for k in ("small16", "arrow_wide", "open100")))
    if not a.dir:
        shutil.rmtree(scratch, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
