#!/usr/bin/env python3
"""bench/tls_ingest.py — TLS beside plain TCP in the same run (issue 32).

    bench/tls_ingest.py [--build build] [--seconds 5] [--rounds 2] [--dir SCRATCH]

Starts `BUILD/src/memwald` with one table `small` (id int64 not null, name
string, v double; Lance's writer defaults, durable_write = true) and two
listeners on loopback, one plain and one `tls` (an EC P-256 certificate made
here with `openssl req`), a credentials file with one token (made by
`memwalctl token`) that every connection sends in `AUTH`. Then, with
BUILD/bench/bench_ingest (--tls for the TLS runs), alternating plain and TLS
`--rounds` times so both see the same machine, plain first in odd rounds and
TLS first in even ones (a run pays for the flushes and compression of the
MemTables the run before it filled: in a perf profile of a TLS run right
after a plain one, zstd was 18 % of the daemon and OpenSSL 1.4 %):

  many   16 connections of small rows (~66 B), 1000-row writes, 8 in flight
         per connection: rows/s; target TLS >= 80 % of plain;
  one    one connection, one row at a time (batch 1, pipeline 1): the ack
         latency p50; target TLS within 0.1 ms of plain;
  onemem the same into a table with durable_write = false (acknowledged
         in the MemTable, no fsync wait): the network path's latency alone;
  paired one plain and one TLS connection from this script, one row at a
         time on each in turn (--pairs of them, into each table):
         both see the same disk at the same moment, so the p50 of the
         paired differences measures TLS where two separate runs measure
         the disk's mood (fsync times here move by milliseconds between
         runs). Python's client costs the same on both sides but for its
         own TLS (a few us).

For every run the daemon's CPU time (/proc/PID/stat, user + system) over the
run is divided by the rows acknowledged: the CPU a row costs, which a loaded
machine disturbs far less than rows/s or latency.

Prints each run's line, then per scenario the medians of plain and TLS and
their ratio (many) or difference (one, onemem), whether the target is met,
and the daemon's CPU per row for both.
Exit status 0 when every run completed without errors (a target missed is
reported, not a failure).
"""
import argparse
import os
import re
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sh(*args, cwd=None):
    r = subprocess.run(list(args), capture_output=True, text=True, cwd=cwd)
    if r.returncode != 0:
        sys.exit(f"{' '.join(args)}: {r.stderr}")
    return r


def kv(line):
    return dict(p.split("=", 1) for p in line.split() if "=" in p)


def run_pairs(ports, token, n, table):
    """(p50 plain, p50 tls, p50 of tls - plain) in ms over n alternating
    one-row writes on a plain and a TLS connection (ids of their own)."""
    plain = socket.create_connection(("127.0.0.1", ports[0]))
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    tls = ctx.wrap_socket(socket.create_connection(("127.0.0.1", ports[1])))
    lat = {"plain": [], "tls": []}
    for s in (plain, tls):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(f"AUTH {token}\nUSE {table}\nPING\n".encode())
        if s.recv(64) != b"PONG\n":
            return None
    for i in range(n):
        for name, s in (("plain", plain), ("tls", tls)) if i % 2 == 0 else (("tls", tls), ("plain", plain)):
            row = ('{"id":%d,"name":"paired","v":1.5}\n' % (9 * 10 ** 15 + 2 * i + (name == "tls"))).encode()
            # (the same ids in both tables: each table has its own)
            t0 = time.perf_counter()
            s.sendall(row)
            got = s.recv(64)
            lat[name].append((time.perf_counter() - t0) * 1000)
            if got != b"OK 1\n":
                return None
    diffs = [t - p for p, t in zip(lat["plain"], lat["tls"])]
    return statistics.median(lat["plain"]), statistics.median(lat["tls"]), statistics.median(diffs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--pairs", type=int, default=2000)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="memwald-bench-tls-", dir=a.dir)
    sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
       "key.pem", "-out", "cert.pem", "-days", "1", "-subj", "/CN=localhost", cwd=tmp)
    r = sh(os.path.join(a.build, "src", "memwalctl"), "token", "bench", "small=write", "mem=write")
    token = r.stderr.strip().rsplit(" ", 1)[1]
    with open(os.path.join(tmp, "creds"), "w") as f:
        f.write(r.stdout)
    conf = os.path.join(tmp, "memwald.conf")
    with open(conf, "w") as f:
        f.write(f"""[daemon]
log_level = notice
data_dir = {tmp}/data
admin_socket = {tmp}/admin.sock
listen = 127.0.0.1:0, 127.0.0.1:0 tls
tls_cert_file = {tmp}/cert.pem
tls_key_file = {tmp}/key.pem
credentials_file = {tmp}/creds
max_connections = 256
idle_timeout_ms = 0
[table small]
uri = {tmp}/small.lance
create = true
schema = id:int64 not null, name:string, v:double
primary_key = id
claim = eager
[table mem]
uri = {tmp}/mem.lance
create = true
schema = id:int64 not null, name:string, v:double
primary_key = id
claim = eager
durable_write = false
""")
    d = subprocess.Popen([os.path.join(a.build, "src", "memwald"), "-c", conf], stderr=subprocess.PIPE, text=True)
    ports = []
    deadline = time.monotonic() + 60
    while len(ports) < 2 and time.monotonic() < deadline:
        line = d.stderr.readline()
        m = re.search(r"listening on \S+( tls)? \(port (\d+)\)", line)
        if m:
            ports.append(int(m.group(2)))
        if "started" in line or not line:
            break
    if len(ports) != 2:
        d.kill()
        sys.exit("memwald did not start")
    # keep reading its log so it never blocks on the pipe
    import threading
    threading.Thread(target=lambda: [None for _ in d.stderr], daemon=True).start()
    gen = os.path.join(a.build, "bench", "bench_ingest")
    runs = {k: {"plain": [], "tls": []} for k in ("many", "one", "onemem")}
    clk = os.sysconf("SC_CLK_TCK")

    def cpu_s():
        with open(f"/proc/{d.pid}/stat") as f:
            v = f.read().rsplit(")", 1)[1].split()
        return (int(v[11]) + int(v[12])) / clk
    failed = False
    id_base = 0
    for rnd in range(a.rounds):
        one = ["--connections", "1", "--batch", "1", "--pipeline", "1"]
        for scen, extra in (("many", []), ("one", one), ("onemem", one + ["--table", "mem"])):
            order = (("plain", ports[0]), ("tls", ports[1]))
            for mode, port in order if rnd % 2 == 0 else order[::-1]:
                id_base += 10 ** 12
                cmd = [gen, "--seconds", str(a.seconds), "--warmup", "1", "--table", "small", "--auth", token,
                       "--id-base", str(id_base)] + extra + (["--tls"] if mode == "tls" else []) + [
                    f"127.0.0.1:{port}"]
                c0 = cpu_s()
                r = subprocess.run(cmd, capture_output=True, text=True)
                c1 = cpu_s()
                line = r.stdout.strip()
                print(f"round {rnd + 1} {scen:4s} {mode:5s} {line}", flush=True)
                if r.returncode != 0:
                    failed = True
                    print(r.stderr, file=sys.stderr)
                    continue
                got = kv(line)
                # the whole run's rows: the measured window's over its share of the run
                rows_all = float(got["rows"]) * a.seconds / float(got["secs"])
                got["cpu_us_per_row"] = (c1 - c0) * 1e6 / rows_all if rows_all else 0
                runs[scen][mode].append(got)
    paired = {t: run_pairs(ports, token, a.pairs, t) for t in ("small", "mem")}
    d.send_signal(signal.SIGTERM)
    rc = d.wait(120)
    if rc != 0:
        failed = True
    print()

    def med(scen, mode, key):
        v = [float(x[key]) for x in runs[scen][mode]]
        return statistics.median(v) if v else 0

    many_p, many_t = med("many", "plain", "rows_per_s"), med("many", "tls", "rows_per_s")
    ratio = many_t / many_p if many_p else 0
    print(f"16 connections, small rows: plain {many_p:,.0f} rows/s, tls {many_t:,.0f} rows/s, "
          f"ratio {ratio:.3f} (target >= 0.80: {'met' if ratio >= 0.8 else 'NOT met'}); daemon CPU a row: "
          f"plain {med('many', 'plain', 'cpu_us_per_row'):.2f} us, tls {med('many', 'tls', 'cpu_us_per_row'):.2f} us")
    for scen, what in (("one", "durable_write = true"), ("onemem", "durable_write = false")):
        p, t = med(scen, "plain", "ack_p50_ms"), med(scen, "tls", "ack_p50_ms")
        diff = t - p
        print(f"one row at a time ({what}), ack p50: plain {p:.3f} ms, tls {t:.3f} ms, difference "
              f"{diff * 1000:+.0f} us (target <= +100 us: {'met' if diff <= 0.1 else 'NOT met'}); daemon CPU a "
              f"row: plain {med(scen, 'plain', 'cpu_us_per_row'):.1f} us, tls {med(scen, 'tls', 'cpu_us_per_row'):.1f} us")
    for t, what in (("small", "durable_write = true"), ("mem", "durable_write = false")):
        if not paired[t]:
            failed = True
            continue
        p50p, p50t, p50d = paired[t]
        print(f"paired one row at a time ({what}, {a.pairs} pairs): ack p50 plain {p50p:.3f} ms, "
              f"tls {p50t:.3f} ms; p50 of the paired differences {p50d * 1000:+.0f} us "
              f"(target <= +100 us: {'met' if p50d <= 0.1 else 'NOT met'})")
    print(f"load average {open('/proc/loadavg').read().split()[0:3]}, daemon exit {rc}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
