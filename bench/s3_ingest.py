#!/usr/bin/env python3
"""bench/s3_ingest.py — ingest on S3: the real memwald daemon with its table
on an S3 endpoint, beside Lance's own writer (LanceDB 0.39.0 mergeInsert,
bench/ingest-peer.mjs --s3) on the SAME endpoint, in one run, with ratios.

    tools/rgw.sh ensure /tmp/memwald-rgw && . /tmp/memwald-rgw/env.sh
    bench/s3_ingest.py [--build build] [--seconds 5] [--peer-seconds 5]
                       [--rounds 2] [--bucket NAME]

(or under tests/s3/with-s3.sh). The endpoint is MW_S3_ENDPOINT with the
AWS_* keys; a bucket of its own is made and emptied afterwards.

memwald: table `small` (id int64 not null, name string, v double; Lance's
writer defaults, durable_write = true: an OK is sent only after the WAL
entry's PUT succeeded), fed by bench_ingest on one connection, ONE write at
a time (the peer's discipline: the next write is sent after the previous
one's OK), at 1, 100 and 10 000 rows per write, --seconds each after a 1 s
warm-up. The peer: mergeInsert("id") calls of the same rows and sizes, each
awaited (its call returns once its WAL entry is written), at its defaults,
--peer-seconds each after 1 s warm-up.

Fairness: the machine's load drifts, so the two sides alternate. For every
round and batch size there is one memwald phase and one LanceDB phase,
each in a process of its own (memwald is started for its phase and
stopped after it, so its flushes and compaction never run beside the
peer's phase, as the peer's background work ends with its process); the
order flips from one (round, batch) to the next (A B, B A, A B, ...).

Prints, per phase, rows/s and ack latency p50/p99, then per batch size the
mean over rounds for both and the memwald/peer ratios (rows/s: > 1 =
memwald faster; p99: < 1 = memwald faster), and each round's own rows/s
ratio. Exit status 0 when every run completed, 1 otherwise (a ratio below 1
is reported, not a failure).
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(SRC, "tests", "e2e"))
from s3_util import drop_bucket, s3  # noqa: E402  (the one signed-curl helper)


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


BATCHES = (1, 100, 10000)


def start_memwald(memwald, conf, log):
    """Start the daemon; its port once it logs 'started' (60 s deadline)."""
    with open(log, "w") as lf:
        p = subprocess.Popen([memwald, "-c", conf], stdout=subprocess.DEVNULL, stderr=lf)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and p.poll() is None:
        text = open(log).read()
        m = re.search(r"listening on \S+ \(port (\d+)\)", text)
        if m and " started" in text:
            return p, int(m.group(1))
        time.sleep(0.05)  # polling the log for a condition, with a deadline
    p.kill()
    p.wait()
    sys.exit("memwald did not start:\n" + open(log).read()[-3000:])


def memwald_phase(a, memwald, gen, conf, log, b, id_base):
    """One memwald phase: start, bench_ingest at b rows/write, stop."""
    p, port = start_memwald(memwald, conf, log)
    r = subprocess.run([gen, "--seconds", str(a.seconds), "--warmup", "1", "--table", "small",
                        "--id-base", str(id_base), "-c", "1", "-b", str(b), "-p", "1",
                        f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=600)
    res = parse_kv(r.stdout.strip().splitlines()[-1]) if r.stdout.strip() else {}
    ok = r.returncode == 0 and "rows_per_s" in res
    if not ok:
        print(f"bench_ingest batch {b} failed: {r.stderr[-500:]}")
    p.send_signal(signal.SIGTERM)
    rc = p.wait(timeout=300)
    if rc != 0:
        ok = False
        print(f"memwald exited {rc}:\n" + open(log).read()[-2000:])
    out = {"rows_per_s": res.get("rows_per_s", 0), "p50": res.get("ack_p50_ms", 0),
           "p99": res.get("ack_p99_ms", 0)}
    return ok, out


def peer_phase(a, bucket, scratch, b, tag):
    """One LanceDB phase: a fresh table under s3://bucket/peer-TAG."""
    pr = subprocess.run(["node", os.path.join(SRC, "bench", "ingest-peer.mjs"), "--seconds",
                         str(a.peer_seconds), "--shapes", "small", "--configs", "default",
                         "--batches", str(b), "--s3", f"s3://{bucket}/peer-{tag}",
                         "--dir", os.path.join(scratch, f"peer-{tag}")],
                        capture_output=True, text=True, timeout=1800)
    res = [json.loads(x) for x in pr.stdout.splitlines() if x.startswith("{")]
    ok = pr.returncode == 0 and len(res) == 1
    if not ok:
        print(f"peer batch {b} failed:\n" + pr.stderr[-1500:])
    q = res[0] if res else {}
    return ok, {"rows_per_s": q.get("rows_per_s", 0), "p50": q.get("lat_ms", {}).get("p50", 0),
                "p99": q.get("lat_ms", {}).get("p99", 0)}


def mean(xs):
    return sum(xs) / len(xs) if xs else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--peer-seconds", type=float, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--bucket")
    a = ap.parse_args()
    if not os.environ.get("MW_S3_ENDPOINT"):
        sys.exit("s3_ingest.py: MW_S3_ENDPOINT is not set (tools/rgw.sh ensure DIR; . DIR/env.sh)")
    if not 1 <= a.rounds <= 20:
        sys.exit("s3_ingest.py: --rounds 1..20")
    memwald = os.path.join(a.build, "src", "memwald")
    gen = os.path.join(a.build, "bench", "bench_ingest")
    for f in (memwald, gen):
        if not os.access(f, os.X_OK):
            sys.exit(f"s3_ingest.py: {f} missing: build it first")
    bucket = a.bucket or f"mw-bench-{os.getpid()}"
    if s3("PUT", "/" + bucket) != 200:
        sys.exit(f"s3_ingest.py: cannot create bucket {bucket}")
    scratch = tempfile.mkdtemp(prefix="mw-bench-s3-")
    conf = os.path.join(scratch, "memwald.conf")
    with open(conf, "w") as f:
        f.write(f"""[daemon]
log_level = info
data_dir = {scratch}/data
admin_socket = {scratch}/admin.sock
listen = 127.0.0.1:0
idle_timeout_ms = 0
[table small]
uri = s3://{bucket}/mw/small.lance
create = true
schema = id:int64 not null, name:string, v:double
primary_key = id
claim = eager
""")
    log = os.path.join(scratch, "memwald.log")
    failed = False
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load0 = os.getloadavg()
    ours = {b: [] for b in BATCHES}
    peer = {b: [] for b in BATCHES}
    print(f"S3 ingest, {started}, endpoint {os.environ['MW_S3_ENDPOINT']}, {a.rounds} rounds, "
          f"phases alternating")
    n = 0
    for rnd in range(a.rounds):
        for k, b in enumerate(BATCHES):
            first_ours = n % 2 == 0
            n += 1
            for side in (("ours", "peer") if first_ours else ("peer", "ours")):
                load = os.getloadavg()[0]
                if side == "ours":
                    ok, res = memwald_phase(a, memwald, gen, conf, f"{log}.{rnd + 1}-{b}", b,
                                            (rnd * len(BATCHES) + k + 1) * 10**13)
                    ours[b].append(res)
                else:
                    ok, res = peer_phase(a, bucket, scratch, b, f"{rnd}-{b}")
                    peer[b].append(res)
                failed |= not ok
                print(f"  round {rnd + 1} batch {b:>5} {'memwald' if side == 'ours' else 'LanceDB':>7}: "
                      f"{res['rows_per_s']:>10,.0f} rows/s  p50 {res['p50']:8.2f} ms  "
                      f"p99 {res['p99']:8.2f} ms  (load {load:.1f})", flush=True)
    load1 = os.getloadavg()
    print(f"memwald's logs: {log}.ROUND-BATCH")
    print(f"load average {load0[0]:.1f} {load0[1]:.1f} {load0[2]:.1f} at the start, "
          f"{load1[0]:.1f} {load1[1]:.1f} {load1[2]:.1f} at the end")
    print("one write at a time, one connection; memwald acknowledges after the WAL PUT succeeded;")
    print(f"mean of {a.rounds} alternating rounds")
    print(f"  {'batch':>6} | {'memwald rows/s':>14} {'p50 ms':>8} {'p99 ms':>8} | {'LanceDB rows/s':>14} "
          f"{'p50 ms':>8} {'p99 ms':>8} | {'rows/s ratio':>12} {'p99 ratio':>9} | per round")
    for b in BATCHES:
        o, q = ours[b], peer[b]
        orps, prps = mean([x["rows_per_s"] for x in o]), mean([x["rows_per_s"] for x in q])
        op99, pp99 = mean([x["p99"] for x in o]), mean([x["p99"] for x in q])
        rounds = " ".join(f"{x['rows_per_s'] / y['rows_per_s']:.2f}" if y["rows_per_s"] else "-"
                          for x, y in zip(o, q))
        print(f"  {b:>6} | {orps:>14,.0f} {mean([x['p50'] for x in o]):>8.2f} {op99:>8.2f} | {prps:>14,.0f} "
              f"{mean([x['p50'] for x in q]):>8.2f} {pp99:>8.2f} | "
              f"{(orps / prps if prps else 0):>12.2f} {(op99 / pp99 if pp99 else 0):>9.2f} | {rounds}")
    drop_bucket(bucket)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
