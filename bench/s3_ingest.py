#!/usr/bin/env python3
"""bench/s3_ingest.py — ingest on S3: the real memwald daemon with its table
on an S3 endpoint, beside Lance's own writer (LanceDB 0.39.0 mergeInsert,
bench/ingest-peer.mjs --s3) on the SAME endpoint, in one run, with ratios.

    tools/rgw.sh ensure /tmp/memwald-rgw && . /tmp/memwald-rgw/env.sh
    bench/s3_ingest.py [--build build] [--seconds 5] [--peer-seconds 5] [--bucket NAME]

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

Prints rows/s and ack latency p50/p99 per batch size for both, and
memwald/peer ratios (rows/s: > 1 = memwald faster; p99: < 1 = memwald
faster). Exit status 0 when every run completed, 1 otherwise (a ratio
below 1 is reported, not a failure).
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


def s3(method, path, out=None):
    e = os.environ
    cmd = ["curl", "-s", "-o", out or "/dev/null", "-w", "%{http_code}", "--aws-sigv4", "aws:amz:us-east-1:s3",
           "--user", f"{e['AWS_ACCESS_KEY_ID']}:{e['AWS_SECRET_ACCESS_KEY']}",
           "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-X", method, e["MW_S3_ENDPOINT"] + path]
    return int(subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout or 0)


def drop_bucket(name):
    e = os.environ
    for _ in range(10000):
        tmp = tempfile.mktemp()
        s3("GET", f"/{name}?list-type=2", tmp)
        keys = re.findall(r"<Key>([^<]*)</Key>", open(tmp).read())
        os.unlink(tmp)
        if not keys:
            break
        subprocess.run(["curl", "-s", "-o", "/dev/null", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
                        f"{e['AWS_ACCESS_KEY_ID']}:{e['AWS_SECRET_ACCESS_KEY']}", "-H",
                        "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-X", "DELETE"]
                       + [f"{e['MW_S3_ENDPOINT']}/{name}/{k}" for k in keys], capture_output=True, timeout=600)
    s3("DELETE", "/" + name)


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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--peer-seconds", type=float, default=5)
    ap.add_argument("--bucket")
    a = ap.parse_args()
    if not os.environ.get("MW_S3_ENDPOINT"):
        sys.exit("s3_ingest.py: MW_S3_ENDPOINT is not set (tools/rgw.sh ensure DIR; . DIR/env.sh)")
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
log_level = notice
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
    load = os.getloadavg()
    with open(log, "w") as lf:
        p = subprocess.Popen([memwald, "-c", conf], stdout=subprocess.DEVNULL, stderr=lf)
    port = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and p.poll() is None and port is None:
        m = re.search(r"listening on \S+ \(port (\d+)\)", open(log).read())
        if m and " started" in open(log).read():
            port = int(m.group(1))
        else:
            time.sleep(0.05)  # polling the log for a condition, with a deadline
    if port is None:
        sys.exit("memwald did not start:\n" + open(log).read()[-3000:])
    ours = {}
    for k, b in enumerate((1, 100, 10000)):
        r = subprocess.run([gen, "--seconds", str(a.seconds), "--warmup", "1", "--table", "small",
                            "--id-base", str((k + 1) * 10**13), "-c", "1", "-b", str(b), "-p", "1",
                            f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=600)
        res = parse_kv(r.stdout.strip().splitlines()[-1]) if r.stdout.strip() else {}
        if r.returncode != 0 or "rows_per_s" not in res:
            failed = True
            print(f"bench_ingest batch {b} failed: {r.stderr[-500:]}")
        ours[b] = res
    p.send_signal(signal.SIGTERM)
    rc = p.wait(timeout=120)
    if rc != 0:
        failed = True
        print(f"memwald exited {rc}:\n" + open(log).read()[-2000:])
    peer = {}
    pr = subprocess.run(["node", os.path.join(SRC, "bench", "ingest-peer.mjs"), "--seconds", str(a.peer_seconds),
                         "--shapes", "small", "--configs", "default", "--batches", "1,100,10000",
                         "--s3", f"s3://{bucket}/peer", "--dir", os.path.join(scratch, "peer")],
                        capture_output=True, text=True, timeout=1800)
    for line in pr.stdout.splitlines():
        if line.startswith("{"):
            o = json.loads(line)
            peer[o["batch"]] = o
    if pr.returncode != 0 or len(peer) != 3:
        failed = True
        print("peer failed:\n" + pr.stderr[-1500:])
    print(f"S3 ingest, {started}, endpoint {os.environ['MW_S3_ENDPOINT']}, load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print("one write at a time, one connection; memwald acknowledges after the WAL PUT succeeded")
    print(f"  {'batch':>6} | {'memwald rows/s':>14} {'p50 ms':>8} {'p99 ms':>8} | {'LanceDB rows/s':>14} "
          f"{'p50 ms':>8} {'p99 ms':>8} | {'rows/s ratio':>12} {'p99 ratio':>9}")
    for b in (1, 100, 10000):
        o, q = ours.get(b, {}), peer.get(b, {})
        orps, prps = o.get("rows_per_s", 0), q.get("rows_per_s", 0)
        op99, pp99 = o.get("ack_p99_ms", 0), q.get("lat_ms", {}).get("p99", 0)
        print(f"  {b:>6} | {orps:>14,.0f} {o.get('ack_p50_ms', 0):>8.2f} {op99:>8.2f} | {prps:>14,.0f} "
              f"{q.get('lat_ms', {}).get('p50', 0):>8.2f} {pp99:>8.2f} | "
              f"{(orps / prps if prps else 0):>12.2f} {(op99 / pp99 if pp99 else 0):>9.2f}")
    drop_bucket(bucket)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
