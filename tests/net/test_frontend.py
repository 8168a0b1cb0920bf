#!/usr/bin/env python3
"""e2e: the producers' protocol over real sockets (src/net/server.h).

Runs tests/net/frontend_harness (the real server over a fake in-memory engine,
see its header for the fake tables) and talks to it with plain sockets:
every ERR code provoked by real bad input, other connections unharmed,
SYNC/PING/QUIT semantics, IPv6, max_connections, AUTH, idle timeout, ARROW
frames (WAL entries from the golden vectors), 1 000 concurrent connections,
a client that never reads (the harness's RSS must stay bounded), reply modes
(REPLIES and the listener default), the idle timer held while the server
paused a connection, a partly written group, rejected lines logged and
counted, and the drain on SIGTERM (every stored row's OK reaches its client).

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
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))  # e2e_util
from e2e_util import Client, check, chosen, fill_until_stalled, plan, poll, rss_kb, run_main  # noqa: E402

HARNESS = sys.argv[1]
VECTORS = os.environ.get("MW_VECTORS", os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "vectors"))
CHILDREN = []


class Harness:
    """The harness as a child; a thread reads its stderr (the server's log)
    into self.log as it comes, so the harness never blocks on the pipe."""

    def __init__(self, *args):
        env = dict(os.environ)
        # Under ASan, freed memory waits in a quarantine (256 MiB by default),
        # which would hide what the RSS check measures.
        env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=1").lstrip(":")
        self.p = subprocess.Popen([HARNESS] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        CHILDREN.append(self.p)
        self.log = []
        self.pump = threading.Thread(target=self._pump, daemon=True)
        self.pump.start()
        line = self.p.stdout.readline().decode()
        m = re.match(r"READY((?: \d+)+)(?: metrics=(\d+))?", line)
        if not m:
            self.p.wait(10)
            self.pump.join(10)
            raise RuntimeError("harness did not start: " + line + "\n".join(self.log))
        self.ports = [int(x) for x in m.group(1).split()]
        self.metrics_port = int(m.group(2)) if m.group(2) else None

    def _pump(self):
        for raw in self.p.stderr:
            self.log.append(raw.decode(errors="replace").rstrip("\n"))

    def metrics(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as r:
            return r.read().decode()

    def stop(self, signalled=False):
        """SIGTERM (unless the caller sent it already: a second one could
        arrive after the harness has closed its signal handles, and kill
        it), then its exit status, rows and output."""
        if not signalled:
            self.p.send_signal(signal.SIGTERM)
        self.p.wait(timeout=30)  # stdout holds two short lines: it cannot fill
        out = self.p.stdout.read()
        self.pump.join(10)
        rows = {}
        for line in out.decode().splitlines():
            if line.startswith("ROWS"):
                for kv in line.split()[1:]:
                    k, v = kv.split("=")
                    rows[k] = int(v)
        return self.p.returncode, rows, out.decode() + "\n".join(self.log)


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
    check(f"golden WAL entries found under {VECTORS} (frames to send)", data and sentinel, wal)
    if not data:
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
          got[0] and got[0].startswith("ERR ") and " parse table " in got[0] and "ARROW frame" in got[0] and got[1] == "PONG", got)
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
    closed = c.closed(timeout=10)
    dt = time.monotonic() - t0
    check("idle connection closed after idle_timeout_ms", first == "PONG" and closed and 1.0 < dt < 8, dt)
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


def test_replies(h):
    """REPLIES changes the replies of the requests after it; 12 rows stored."""
    c = Client(h.ports[0])
    c.send("USE events\nREPLIES ERRORS\n" + ROW % (1, 1) + ROW % (2, 2) + '{"id":3,"v":"x"}\n' + ROW % (4, 4)
           + "PING\n")
    got = c.lines(2)
    check("REPLIES ERRORS: no OK; the ERR and PONG as usual",
          got[0] and got[0].startswith("ERR 5 type ") and got[1] == "PONG", got)
    c.send("REPLIES NONE\n" + ROW % (5, 5) + '{"id":6,"v":"x"}\n' + "SYNC\n")
    l = c.line()
    check("REPLIES NONE: no OK and no ERR; SYNC counts every row acknowledged", l == "SYNC 4", l)
    c.send("REPLIES ALL\n" + ROW % (7, 7) + ROW % (8, 8) + "PING\n")
    got = c.lines(2)
    check("REPLIES ALL again: OK counts the rows after the change only", got == ["OK 2", "PONG"], got)
    c.send("REPLIES SOME\nPING\n")
    got = c.lines(2)
    check("REPLIES with a bad mode -> ERR parse",
          got[0] and got[0].startswith("ERR 16 parse REPLIES needs ALL, ERRORS or NONE") and got[1] == "PONG", got)
    c.close()


def test_partial(h):
    """A group the engine wrote in part (fake table `partial`: half the rows)."""
    c = Client(h.ports[0])
    c.send("USE partial\n" + "".join(ROW % (i, i) for i in range(4)) + "PING\n")
    got = c.lines(2)
    want = "ERR 2 sealed 4 rows (lines 2-5): 2 written, 2 not written: bucket-1 "
    check("a group written in part says how many rows were written and which shard refused",
          got[0] and got[0].startswith(want) and "written: bucket-0" in got[0] and got[1] == "PONG", got)
    c.close()


def test_gather_writes(h, n=10000):
    """One write of 10 000 rows (many reads, so many parse jobs, under a long
    write_gather_ms): the gather answers it with one reply per submission,
    and hands each parsed group to the engine as its own write instead of
    concatenating them, so the engine sees more writes than the client
    gets replies (with the concatenation every submission was one write)."""
    c = Client(h.ports[0], timeout=60)
    c.send("USE events\n" + "".join(ROW % (i, i) for i in range(n)))
    got = []
    while acked(got) < n:
        line = c.lines(1)[0]
        if not line or not line.startswith("OK "):
            got.append(line)
            break
        got.append(line)
    c.close()
    rc, rows, out = h.stop()
    m = re.search(r"^WRITES .*\bevents=(\d+)", out, re.M)
    writes = int(m.group(1)) if m else -1
    check(f"a write of {n} rows: every row acknowledged, the engine holds them",
          acked(got) == n and rc == 0 and rows.get("events") == n, (got[-3:], rc, rows))
    check("the gather's groups go to the engine as separate writes: more writes than replies",
          writes > len(got), f"{writes} engine writes, {len(got)} replies")
    print(f"# gather: {len(got)} replies, {writes} engine writes for {n} rows")


def test_listener_none(port):
    """--replies none: a producer that never reads. 2 000 rows in 2 000 writes
    (each its own submission, one OK line each under `all`), then SYNC: the
    first reply it ever reads is SYNC 2000."""
    c = Client(port, timeout=30)
    c.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    n = 2000
    c.send("USE events\n")
    for i in range(n):
        c.send(ROW % (i, i))
    c.send('{"id":"bad"}\nSYNC\n')
    l = c.line(timeout=30)
    check("listener replies=none: no OK or ERR queued; SYNC 2000 is the first reply", l == f"SYNC {n}", l)
    c.close()


def test_idle_paused(h):
    """A client that stops reading is paused by the server (max_reply 4096);
    for 4 s (2.7 x idle_timeout_ms) it must not be closed as idle, and
    every reply it had asked for must still be there. (idle_timeout_ms is
    1.5 s, not less: between its last reply leaving the server and its
    next PING, a client descheduled on a loaded machine is idle.)"""
    c = Client(h.ports[0], bufs=4096)
    c.send("PING\n")
    first = c.line()
    local = "127.0.0.1:%d" % c.s.getsockname()[1]
    sent, stalled = fill_until_stalled(c.s, b"PING\n" * 2000, 40)  # slow when the machine is busy
    check("a client that does not read is paused", first == "PONG" and stalled, f"sent {sent}")
    closed_line = lambda: [l for l in h.log if f"connection {local} closed" in l]
    early = poll(closed_line, 4.0)  # the absence of an event, for a bounded time
    check("no idle close while the server paused the connection", not early, early)
    # The rest of the cut PING and one more go out while the replies are
    # read (a thread: the send may wait until the server reads again, which
    # it does once its replies drain), not after the read: a client that has
    # read every reply is idle whenever it stops, so a PING sent after the
    # read would race the idle timer on a loaded machine.
    pings = -(-sent // 5) + 1
    c.s.setblocking(True)
    tail = threading.Thread(target=c.s.sendall, args=((b"PING\n"[sent % 5:] if sent % 5 else b"") + b"PING\n",),
                            daemon=True)
    tail.start()
    got = c.read_bytes(5 * pings, timeout=20)
    tail.join(20)
    check(f"every one of the {pings} PONGs delivered (the last after the pause), the connection still open",
          got == b"PONG\n" * pings, (len(got), pings, got[-20:]))
    check("then, idle and read, it is closed as idle",
          c.closed(timeout=10) and poll(lambda: [l for l in closed_line() if "(idle)" in l], 10), h.log[-3:])
    c.close()


def test_rejects_logged(h):
    """60 rejected lines: each counted by table and code, 20 logged (the
    rate limit) with peer, table, line, code and the line's prefix; the
    close logged with the counts."""
    c = Client(h.ports[0])
    c.send("USE events\n" + '{"id":1,"v":"x"}\n' * 60 + "PING\n")
    got = c.lines(61)
    check("60 ERR type, then PONG", sum(1 for l in got if l and " type " in l) == 60 and got[-1] == "PONG", got[-2:])
    m = h.metrics()
    check("rows_rejected_total and errors_total by table and code",
          'memwald_rows_rejected_total{table="events",code="type"} 60' in m
          and 'memwald_errors_total{table="events",code="type"} 60' in m, m[-1500:])
    local = "127.0.0.1:%d" % c.s.getsockname()[1]
    c.close()
    # the close is logged after every reject line of the connection: once it
    # is in the log (read from the harness's pipe by a thread), they all are
    closed = poll(lambda: [l for l in h.log if f"connection {local} closed (eof)" in l], 10)
    rejected = [l for l in h.log if "rejected: peer " + local in l]
    check("20 of 60 rejected lines logged (rate limit), naming table, line, code and the line",
          len(rejected) == 20 and 'table "events" line 2 type: ' in rejected[0]
          and rejected[0].endswith(': "{\\"id\\":1,\\"v\\":\\"x\\"}"'.replace('\\"', '"')),
          (len(rejected), rejected[:2]))
    check("the close is logged: why, rows acknowledged and rejected",
          closed and "0 rows acknowledged, 60 rejected" in closed[0], closed or h.log[-3:])


def test_drain(h):
    """SIGTERM while rows are in flight (table `slow`, 300 ms) and while a
    client streams rows without pause: every row the engine stored has its
    OK delivered before the connection ends (FIN, not a reset)."""
    c = Client(h.ports[0], timeout=30)
    c.send("USE slow\n" + "".join(ROW % (i, i) for i in range(50)))
    s = Client(h.ports[0], timeout=30)
    s.send("USE events\n")
    done = threading.Event()

    def stream():
        batch = "".join(ROW % (i, i) for i in range(20)).encode()
        try:
            while not done.is_set():
                s.s.sendall(batch)
        except OSError:
            pass

    t = threading.Thread(target=stream, daemon=True)
    t.start()
    first = s.line()
    h.p.send_signal(signal.SIGTERM)
    got_s = s.lines_until(lambda l: False, timeout=20)  # to EOF (a None)
    done.set()
    got_c = c.lines_until(lambda l: False, timeout=20)
    s.s.shutdown(socket.SHUT_WR)
    c.s.shutdown(socket.SHUT_WR)
    t.join(10)
    rc, rows, out = h.stop(signalled=True)
    acked_s = acked([first] + got_s)
    check("rows in flight at SIGTERM: their OK arrives, then EOF",
          acked(got_c) == 50 and rows.get("slow") == 50 and got_c[-1] is None, (got_c, rows))
    check("a streaming client gets the OK of every row stored, then EOF",
          first and first.startswith("OK ") and acked_s == rows.get("events") and got_s[-1] is None
          and not [l for l in got_s if l and not l.startswith("OK ")], (acked_s, rows, got_s[-3:]))
    check("the drained connections are logged as closed (stop), nothing lost",
          len([l for l in out.splitlines() if " closed (stop): " in l and "0 replies not sent" in l]) == 2,
          out[-2000:])
    s.close()
    c.close()
    return rc


def test_drain_timeout(h):
    """drain_timeout_ms (100 ms here) bounds the drain: a connection whose
    rows the engine has not finished when it runs out (table `stuck`, 5 s)
    is closed then, logged as a warning with what it lost, and the
    completion that arrives after the server is gone is absorbed: the
    harness exits 0 (ASan: no use after free)."""
    c = Client(h.ports[0], timeout=30)
    c.send("USE stuck\n" + "".join(ROW % (i, i) for i in range(20)))
    submitted = poll(lambda: [l for l in h.log if "submitted 20 rows to stuck" in l], 10)
    check("20 rows in flight on table stuck", submitted, h.log[-3:])
    local = "127.0.0.1:%d" % c.s.getsockname()[1]
    h.p.send_signal(signal.SIGTERM)
    t0 = time.monotonic()
    try:
        got = c.lines_until(lambda l: False, timeout=20)  # to EOF (a None)
    except ConnectionResetError:
        got = ["(reset)"]
    ended_s = time.monotonic() - t0
    c.close()
    rc, _, out = h.stop(signalled=True)
    check("no OK for rows the engine had not finished; the connection ends at the drain timeout, not the rows' 5 s",
          not [l for l in got if l and l.startswith("OK ")] and got[-1:] in ([None], ["(reset)"]) and ended_s < 4,
          (got, ended_s))
    check("the drain timeout is logged, and the close with the submission left unanswered",
          "connections not drained after 100 ms" in out
          and [l for l in out.splitlines() if f"connection {local} closed (stop: drain timeout)" in l
               and " warn " in l and "1 submissions unanswered" in l], out[-2000:])
    check("the harness exits 0 after the late completion", rc == 0, f"exit status {rc}")


def test_parse_order(h):
    """Rows parsed on the server's worker threads (runs over 64 lines go
    there): 60 groups of 500 rows sent at once, each with a bad line
    somewhere in the middle, a DEL after it and a PING after the group, and
    a USE switch half-way. Replies must come in request order: the OKs
    between two other replies count exactly the good rows between them, and
    each bad line's ERR names its line, the table and the field."""
    c = Client(h.ports[0], timeout=60)
    parts, expect = ["USE events\n"], []  # ("rows", table) | ("err", line, table) | ("pong",)
    line, nid, table = 1, 10_000_000, "events"
    for g in range(60):
        if g == 30:
            parts.append("USE other\n")
            line += 1
            table = "other"
        k = 37 + (g * 53) % 400  # where the bad line goes in this group
        for i in range(500):
            line += 1
            if i == k:
                parts.append('{"id":%d,"v":"x"}\n' % nid)
                expect.append(("err", line, table))
            elif i == k + 1:
                parts.append('DEL {"id":%d}\n' % (nid - 1))
                expect.append(("rows", table))
            else:
                parts.append(ROW % (nid, nid))
                expect.append(("rows", table))
            nid += 1
        parts.append("PING\n")
        line += 1
        expect.append(("pong",))
    parts.append("SYNC\n")
    data = "".join(parts).encode()
    sender = threading.Thread(target=lambda: c.s.sendall(data), daemon=True)  # the server pauses reads
    sender.start()
    got = c.lines_until(lambda l: l.startswith("SYNC") or l.startswith("ERR 0"), timeout=60)
    sender.join(30)
    # walk the replies against the requests
    want_rows = {"events": 0, "other": 0}
    problems, e, pending, n_ok = [], 0, 0, 0
    for l in got:
        if l is None or l.startswith("SYNC"):
            break
        if l.startswith("OK "):
            pending -= int(l.split()[1])
            n_ok += 1
            continue
        while e < len(expect) and expect[e][0] == "rows":  # the good rows before this reply
            pending += 1
            want_rows[expect[e][1]] += 1
            e += 1
        if pending != 0:
            problems.append(f"{-pending if pending < 0 else pending} rows {'too many' if pending < 0 else 'missing'} before {l!r}")
            pending = 0
        x = expect[e] if e < len(expect) else ("none",)
        e += 1
        if x[0] == "pong" and l != "PONG":
            problems.append(f"wanted PONG, got {l!r}")
        elif x[0] == "err" and not (l.startswith(f"ERR {x[1]} type table \"{x[2]}\": byte ")
                                    and 'field "v"' in l):
            problems.append(f"wanted ERR {x[1]} type naming table {x[2]} and field v, got {l!r}")
        if len(problems) > 5:
            break
    total = 60 * 499
    check("60 pipelined groups parsed off the loop: replies in request order, every OK count right, "
          "each bad line's ERR names its line, table and field",
          not problems and e == len(expect) and got[-1] == f"SYNC {total}" and n_ok >= 60,
          (problems, e, len(expect), got[-1:]))
    print(f"# parse order: {len(got)} replies ({n_ok} OK lines) for {len(expect)} requests")
    c.close()
    return want_rows


def test_parse_backpressure(h):
    """A connection whose rows wait on the engine (table `stuck`, 5 s) with
    max_unacked 64 KiB: reading stops instead of the server parsing and
    submitting everything the socket holds. The rows in parse jobs count as
    unacknowledged, so what reached the engine stays within about two such
    budgets (the budget plus the last chunk read), however much was sent."""
    c = Client(h.ports[0], timeout=60)
    c.send("USE stuck\n")
    one = ('{"id":7,"name":"nnnn","v":1.5,"vec":[1,2,3,4,5,6,7,8]}\n').encode()
    sent, stalled = fill_until_stalled(c.s, one * 2000, 8)
    submitted = sum(int(m.group(1)) for l in list(h.log) for m in [re.search(r"submitted (\d+) rows to stuck", l)] if m)
    bound = 2 * (65536 + 65536) // len(one)
    check("rows waiting on the engine: the server stops reading the connection", stalled, f"sent {sent}")
    check(f"rows submitted while stalled stay within the unacknowledged budget (<= {bound})",
          0 < submitted <= bound, f"{submitted} rows submitted of {sent // len(one)} sent")
    print(f"# parse backpressure: stalled after {sent} bytes ({sent // len(one)} rows), {submitted} rows submitted")
    c.close()
    return submitted


def test_parse_stop(h):
    """SIGTERM while a client streams large runs of rows (parsed on the
    workers): every row the engine stored has its OK delivered, then EOF;
    the harness exits 0 (ASan: no job outlives the server)."""
    c = Client(h.ports[0], timeout=30)
    c.send("USE events\n")
    batch = "".join(ROW % (i, i) for i in range(5000)).encode()
    done = threading.Event()

    def stream():
        try:
            while not done.is_set():
                c.s.sendall(batch)
        except OSError:
            pass

    t = threading.Thread(target=stream, daemon=True)
    t.start()
    first = c.line(timeout=30)
    h.p.send_signal(signal.SIGTERM)
    got = c.lines_until(lambda l: False, timeout=20)  # to EOF (a None)
    done.set()
    c.s.shutdown(socket.SHUT_WR)
    t.join(10)
    rc, rows, out = h.stop(signalled=True)
    inflight = re.search(r"stop: draining \d+ connections? \((\d+) row parses in flight\)", out)
    check("stop while rows are parsed: every stored row's OK arrives, then EOF; clean exit",
          rc == 0 and first and first.startswith("OK ") and acked([first] + got) == rows.get("events")
          and got[-1] is None and not [l for l in got if l and not l.startswith("OK ")],
          (rc, acked([first] + got), rows, got[-3:]))
    print(f"# parse stop: {rows.get('events')} rows stored and acknowledged; "
          f"{inflight.group(1) if inflight else '?'} parses in flight at SIGTERM")
    c.close()


def case_server():
    """The main server (two listeners, IPv6, a line limit) and a second one
    with a token: the protocol, then exactly the acknowledged rows stored."""
    h = Harness("--listen", "127.0.0.1:0", "--listen", "[::1]:0", "--max-line-bytes", "4096")
    t = Harness("--token", "s3cret")
    try:
        test_basics(h)
        test_error_codes(h, t.ports[0])
        test_isolation(h)
        test_ipv6(h)
        test_arrow(h)
        test_replies(h)
        test_partial(h)
        test_many(h)
        test_slow_reader(h)
    finally:
        rc, rows, out = h.stop()
        t.stop()
    check("harness stops cleanly on SIGTERM", rc == 0 and "BYE" in out, out[-2000:])
    check("fake engine stored exactly the acknowledged rows",
          rows.get("events") == 12 + 3 + 1 + 100 + 6 + 1000 and rows.get("other") == 1
          and rows.get("fenced") == 0 and rows.get("partial") == 2, rows)


def case_max_connections():
    m = Harness("--max-connections", "2")
    test_max_connections(m.ports[0])
    m.stop()


def case_idle():
    i = Harness("--idle-ms", "1500", "--max-reply", "4096")
    test_idle(i.ports[0])
    test_idle_paused(i)
    i.stop()


def case_listener_none():
    n = Harness("--replies", "none")
    test_listener_none(n.ports[0])
    rc, rows, _ = n.stop()
    check("replies=none: every row sent stored", rc == 0 and rows.get("events") == 2000, rows)


def case_rejects_logged():
    r = Harness("--metrics-listen", "127.0.0.1:0")
    test_rejects_logged(r)
    r.stop()


def case_drain():
    rc = test_drain(Harness())
    check("harness stops cleanly after the drain", rc == 0, f"exit status {rc}")


def case_drain_timeout():
    test_drain_timeout(Harness("--drain-ms", "100"))


def case_parse_order():
    p = Harness()
    want = test_parse_order(p)
    rc, rows, _ = p.stop()
    check("after the pipelined groups the engine holds exactly their good rows",
          rc == 0 and rows.get("events") == want["events"] and rows.get("other") == want["other"], (rows, want))


def case_parse_backpressure():
    b = Harness("--max-unacked", "65536")
    n = test_parse_backpressure(b)
    rc, rows, _ = b.stop()
    check("the stuck table stored exactly the rows submitted (the drain waits for them)",
          rc == 0 and rows.get("stuck") == n, (rc, rows, n))


def case_parse_stop():
    test_parse_stop(Harness())


def case_gather_writes():
    test_gather_writes(Harness("--gather-ms", "60000"))


def case_unacked_backpressure():
    u = Harness("--max-unacked", "4096")
    test_unacked_backpressure(u.ports[0])
    rc, rows, _ = u.stop()
    check("slow table stored all rows", rows.get("slow") == 3000, rows)


# Each case starts harnesses of its own; MW_TEST=idle runs one alone.
CASES = [("server", case_server), ("max_connections", case_max_connections), ("idle", case_idle),
         ("listener_none", case_listener_none), ("rejects_logged", case_rejects_logged),
         ("drain", case_drain), ("drain_timeout", case_drain_timeout), ("parse_order", case_parse_order),
         ("parse_backpressure", case_parse_backpressure), ("parse_stop", case_parse_stop),
         ("gather_writes", case_gather_writes), ("unacked_backpressure", case_unacked_backpressure)]


def main():
    todo = chosen(CASES)
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4096 and hard > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    for _, case in todo:
        case()
    return plan()

if __name__ == "__main__":
    run_main(main, CHILDREN)  # never leaves a harness behind, whatever failed
