#!/usr/bin/env python3
"""e2e: the producers' protocol over real sockets (src/net/server.h).

Runs tests/e2e/frontend_harness (the real server over a fake in-memory engine,
see its header for the fake tables) and talks to it with plain sockets:
every ERR code provoked by real bad input, other connections unharmed,
SYNC/PING/QUIT semantics, IPv6, max_connections, AUTH, idle timeout, ARROW
frames (WAL entries from the golden vectors), 1 000 concurrent connections and
a client that never reads (the harness's RSS must stay bounded).

Synchronisation is by reading replies with deadlines, never by sleeping.
Output is TAP.
"""
import glob
import os
import re
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_util import Client, check, fill_until_stalled, plan, rss_kb, run_main  # noqa: E402

HARNESS = sys.argv[1]
VECTORS = os.environ.get("MW_VECTORS", os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "vectors"))
CHILDREN = []


class Harness:
    def __init__(self, *args):
        env = dict(os.environ)
        # Under ASan, freed memory waits in a quarantine (256 MiB by default),
        # which would hide what the RSS check measures.
        env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=1").lstrip(":")
        self.p = subprocess.Popen([HARNESS] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        CHILDREN.append(self.p)
        line = self.p.stdout.readline().decode()
        m = re.match(r"READY((?: \d+)+)(?: metrics=(\d+))?", line)
        if not m:
            raise RuntimeError("harness did not start: " + line + self.p.stderr.read().decode())
        self.ports = [int(x) for x in m.group(1).split()]
        self.metrics_port = int(m.group(2)) if m.group(2) else None

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        out, err = self.p.communicate(timeout=30)
        rows = {}
        for line in out.decode().splitlines():
            if line.startswith("ROWS"):
                for kv in line.split()[1:]:
                    k, v = kv.split("=")
                    rows[k] = int(v)
        return self.p.returncode, rows, out.decode() + err.decode()


ROW = '{"id":%d,"name":"n%d","v":1.5,"vec":[1,2,3,4,5,6,7,8]}\n'


def acked(lines):
    """Sum of OK <n> replies."""
    return sum(int(l.split()[1]) for l in lines if l and l.startswith("OK "))


def test_basics(h):
    c = Client(h.ports[0])
    c.send("PING\n")
    check("PING -> PONG", c.line() == "PONG")
    c.send("USE events\n" + "".join(ROW % (i, i) for i in range(10)) + "SYNC\n")
    got = c.lines_until(lambda l: l.startswith("SYNC"))
    check("10 rows acknowledged, then SYNC 10", acked(got) == 10 and got[-1] == "SYNC 10", got)
    c.send('{"id":100}\r\nDEL {"id":3}\nSYNC\nPING\n')
    got = c.lines(3)
    check("CRLF row + DEL acked, SYNC counts all rows, PONG after", got == ["OK 2", "SYNC 12", "PONG"], got)
    c.send("QUIT\nPING\n")
    check("QUIT closes without answering later requests", c.closed() and c.buf == b"", c.buf)
    c.close()


def test_error_codes(h, wrong_token_port):
    c = Client(h.ports[0])
    c.send('{"id":1}\n')  # line 1: no table selected
    l = c.line()
    check("row before USE -> ERR 1 table", l and l.startswith("ERR 1 table "), l)
    c.send("USE nope\n")
    l = c.line()
    check("unknown table -> ERR 2 table", l and l.startswith('ERR 2 table unknown table "nope"'), l)
    c.send("USE events\n")  # line 3
    cases = [
        ('{"id":1,"name":"a"', "parse", "malformed JSON"),
        ('{"id":1,"bogus":2}', "schema", "unknown field"),
        ('{"id":1,"v":"x"}', "type", "wrong type"),
        ('{"id":1,"vec":[1,2]}', "type", "wrong vector length"),
        ('{"name":"no key"}', "pk", "missing primary key"),
        ('{"id":null}', "pk", "null primary key"),
        ('\x00\x01\x02\xfe\xff binary', "parse", "binary garbage"),
        ("HELLO", "parse", "unknown request"),
    ]
    line = 3
    for text, code, what in cases:
        line += 1
        c.send(text.encode("latin-1") + b"\n")
        l = c.line()
        check(f"{what} -> ERR {line} {code}", l and l.startswith(f"ERR {line} {code} "), l)
    # rows before an error are acknowledged first, in one OK
    c.send(ROW % (1, 1) + ROW % (2, 2) + '{"id":3,"v":"x"}\n' + ROW % (4, 4))
    got = c.lines(3)
    check("OK for earlier rows precedes the ERR, later rows after",
          got[0] == "OK 2" and got[1] and got[1].startswith(f"ERR {line + 3} type ") and got[2] == "OK 1", got)
    line += 4
    # too long (limit is 4096 in this harness), connection continues
    c.send('{"id":5,"name":"' + "x" * 10000 + '"}\nPING\n')
    got = c.lines(2)
    check("too long -> ERR too_long, resync at the next newline",
          got[0] and got[0].startswith(f"ERR {line + 1} too_long ") and got[1] == "PONG", got)
    line += 2
    # engine failures
    for table, code in [("fenced", "fenced"), ("sealed", "sealed"), ("notmine", "not_owner"),
                        ("busy", "overloaded"), ("broken", "internal")]:
        c.send(f"USE {table}\n" + ROW % (1, 1) + ROW % (2, 2))
        l = c.line()
        want = f"ERR {line + 2} {code} 2 rows (lines {line + 2}-{line + 3}) not written: "
        check(f"engine {table} -> ERR {code} naming the rows", l and l.startswith(want), l)
        line += 3
    c.send("PING\n")
    check("connection still serves after every error", c.line() == "PONG")
    c.close()
    # auth
    a = Client(wrong_token_port)
    a.send("PING\n")
    l = a.line()
    check("request before AUTH -> ERR 1 auth, then close", l and l.startswith("ERR 1 auth ") and a.closed(), l)
    a.close()
    a = Client(wrong_token_port)
    a.send("AUTH wrong\nPING\n")
    l = a.line()
    check("wrong token -> ERR 1 auth, then close", l and l.startswith("ERR 1 auth wrong token") and a.closed(), l)
    a.close()
    a = Client(wrong_token_port)
    a.send("AUTH s3cret\nUSE events\n" + ROW % (1, 1) + "PING\n")
    got = a.lines(2)
    check("right token: rows accepted", got == ["OK 1", "PONG"], got)
    a.close()


def test_isolation(h):
    good = Client(h.ports[0])
    good.send("USE other\n")
    # a half line, then disconnect; garbage; a too-long line without newline
    bad = Client(h.ports[0])
    bad.send('USE other\n{"id":77,"name":"half')
    bad.close()
    bad = Client(h.ports[0])
    bad.send(os.urandom(200000))
    bad.close()
    good.send(ROW % (1, 1) + "SYNC\n")
    got = good.lines(2)
    check("other connections unharmed by half lines and garbage", got == ["OK 1", "SYNC 1"], got)
    good.close()


def test_ipv6(h):
    if len(h.ports) < 2:
        check("IPv6 listener # SKIP no IPv6", True)
        return
    c = Client(h.ports[1], "::1", socket.AF_INET6)
    c.send("USE events\n" + ROW % (1, 1) + "PING\n")
    got = c.lines(2)
    check("IPv6 listener serves", got == ["OK 1", "PONG"], got)
    c.close()


def test_arrow(h):
    wal = sorted(glob.glob(os.path.join(VECTORS, "unsharded-small/t.lance/_mem_wal/*/wal/*.arrow")))
    frames = [open(p, "rb").read() for p in wal]
    data = [f for f in frames if len(f) > 1000]
    sentinel = [open(p, "rb").read() for p in sorted(glob.glob(os.path.join(
        VECTORS, "unsharded-epochs/t.lance/_mem_wal/*/wal/*.arrow"))) if os.path.getsize(p) <= 1000]
    if not data:
        check("ARROW frames # SKIP no vectors", True)
        return
    c = Client(h.ports[0])
    c.send("USE events\n")
    c.send(b"ARROW %d\n" % len(data[0]) + data[0] + b"PING\n")
    got = c.lines(2)
    check("ARROW frame of a Lance WAL entry -> OK 100, PONG", got == ["OK 100", "PONG"], got)
    if sentinel:
        c.send(b"ARROW %d\n" % len(sentinel[0]) + sentinel[0])
        l = c.line()
        check("ARROW fence sentinel (no columns) -> ERR 4 schema", l and l.startswith("ERR 4 schema "), l)
    else:
        c.send(b"PING\n")
        c.line()
    c.send(b"ARROW 20\n" + b"\xff" * 20 + b"PING\n")
    got = c.lines(2)
    check("ARROW frame of garbage -> ERR parse, framing continues",
          got[0] and got[0].startswith("ERR ") and " parse ARROW frame" in got[0] and got[1] == "PONG", got)
    c.close()


def test_many(h, n=1000):
    t0 = time.monotonic()
    cs = []
    try:
        for i in range(n):
            cs.append(Client(h.ports[0]))
        for i, c in enumerate(cs):
            c.send("USE events\n" + ROW % (i, i) + "SYNC\n")
        ok = 0
        for c in cs:
            if c.lines(2) == ["OK 1", "SYNC 1"]:
                ok += 1
        check(f"{n} concurrent connections each get OK 1 + SYNC 1", ok == n, f"{ok} of {n}")
    finally:
        for c in cs:
            c.close()
    print(f"# {n} connections in {time.monotonic() - t0:.2f}s")


def test_max_connections(port):
    a = Client(port)
    b = Client(port)
    a.send("PING\n")
    b.send("PING\n")
    check("two connections under max_connections=2", a.line() == "PONG" and b.line() == "PONG")
    c = Client(port)
    l = c.line()
    check("third connection -> ERR 0 overloaded, closed", l and l.startswith("ERR 0 overloaded") and c.closed(), l)
    a.close()
    b.close()
    c.close()


def test_idle(port):
    c = Client(port)
    c.send("PING\n")
    t0 = time.monotonic()
    first = c.line()
    closed = c.closed(timeout=5)
    dt = time.monotonic() - t0
    check("idle connection closed after idle_timeout_ms", first == "PONG" and closed and 0.15 < dt < 4, dt)
    c.close()


def test_slow_reader(h):
    """A client that sends PINGs forever and never reads: the server must stop
    reading it once its replies back up, so RSS stays bounded."""
    c = Client(h.ports[0])
    rss0 = rss_kb(h.p.pid)
    # 100 kB of requests, 100 kB of replies at a time
    sent, stalled = fill_until_stalled(c.s, b"PING\n" * 20000, 4)
    rss1 = rss_kb(h.p.pid)
    grew = rss1 - rss0
    check("never-reading client is stalled (server stopped reading)", stalled, f"sent {sent} bytes")
    check("RSS growth bounded (< 16 MiB) for a never-reading client", grew < 16384,
          f"rss {rss0} -> {rss1} kB after {sent} bytes sent")
    print(f"# slow reader: sent {sent} bytes before stalling; RSS {rss0} -> {rss1} kB")
    # others still served meanwhile
    o = Client(h.ports[0])
    o.send("PING\n")
    check("others served while a slow reader is stalled", o.line() == "PONG")
    o.close()
    c.close()


def test_unacked_backpressure(port):
    """max_unacked=4096 with a 300 ms engine: every row still gets acknowledged
    (reading pauses and resumes), in order."""
    c = Client(port)
    n = 3000
    c.send("USE slow\n" + "".join(ROW % (i, i) for i in range(n)) + "SYNC\n")
    got = c.lines_until(lambda l: l.startswith("SYNC") or l.startswith("ERR"), timeout=60)
    check("rows under max_unacked backpressure all acknowledged",
          acked(got) == n and got[-1] == f"SYNC {n}" and len(got) > 2, got[-3:])
    c.close()


def main():
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4096 and hard > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    h = Harness("--listen", "127.0.0.1:0", "--listen", "[::1]:0", "--max-line-bytes", "4096")
    t = Harness("--token", "s3cret")
    try:
        test_basics(h)
        test_error_codes(h, t.ports[0])
        test_isolation(h)
        test_ipv6(h)
        test_arrow(h)
        test_many(h)
        test_slow_reader(h)
    finally:
        rc, rows, out = h.stop()
        t.stop()
    check("harness stops cleanly on SIGTERM", rc == 0 and "BYE" in out, out[-2000:])
    check("fake engine stored exactly the acknowledged rows",
          rows.get("events") == 12 + 3 + 1 + 100 + 1000 and rows.get("other") == 1 and rows.get("fenced") == 0, rows)
    m = Harness("--max-connections", "2")
    test_max_connections(m.ports[0])
    m.stop()
    i = Harness("--idle-ms", "300")
    test_idle(i.ports[0])
    i.stop()
    u = Harness("--max-unacked", "4096")
    test_unacked_backpressure(u.ports[0])
    rc, rows, _ = u.stop()
    check("slow table stored all rows", rows.get("slow") == 3000, rows)
    return plan()


if __name__ == "__main__":
    run_main(main, CHILDREN)  # never leaves a harness behind, whatever failed
