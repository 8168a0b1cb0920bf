#!/usr/bin/env python3
"""e2e: the admin socket (src/net/admin.h), memwalctl and HTTP /metrics.

Runs tests/net/frontend_harness with --admin and --metrics-listen (its fake
engine answers every admin command, see the harness header) and drives it
with the real memwalctl binary, raw Unix sockets and HTTP requests.
Output is TAP.
"""
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))  # e2e_util
import e2e_util  # noqa: E402
from e2e_util import check, ctl, plan, run_main  # noqa: E402

HARNESS, MEMWALCTL = sys.argv[1], sys.argv[2]
e2e_util.MEMWALCTL = MEMWALCTL
CHILDREN = []


def start(sock, *extra):
    p = subprocess.Popen([HARNESS, "--admin", sock, "--metrics-listen", "127.0.0.1:0"] + list(extra),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    CHILDREN.append(p)
    line = p.stdout.readline().decode()
    m = re.match(r"READY (\d+).* metrics=(\d+)", line)
    return p, (int(m.group(1)) if m else None), (int(m.group(2)) if m else None), line


def raw(sock, data, timeout=15, eof=False):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(sock)
    if data:
        s.sendall(data)
    if eof:
        s.shutdown(socket.SHUT_WR)
    out = b""
    while True:
        c = s.recv(65536)
        if not c:
            break
        out += c
    s.close()
    return out


def http(port, path, method="GET"):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    try:
        r = urllib.request.urlopen(req, timeout=10)
        return r.status, r.headers.get("Content-Type"), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read().decode()


def main():
    d = tempfile.mkdtemp(prefix="mw-admin.")
    sock = os.path.join(d, "admin.sock")
    # a stale socket file (nobody listening) is replaced
    st = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    st.bind(sock)
    st.close()
    p, port, mport, line = start(sock)
    check("starts over a stale socket file", port is not None, line + p.stderr.read1(4096).decode() if port is None else "")
    if port is None:
        return plan()
    mode = stat.S_IMODE(os.stat(sock).st_mode)
    check("admin socket mode is 0660", mode == 0o660, oct(mode))
    # a live socket is refused
    p2, port2, _, line2 = start(sock)
    err2 = p2.communicate(timeout=10)[1].decode()
    check("second instance on a live socket refuses to start", port2 is None and p2.returncode != 0 and
          "another process" in err2, line2 + err2)

    # produce a little traffic for the metrics
    c = socket.create_connection(("127.0.0.1", port))
    c.sendall(b'USE events\n{"id":1}\n{"id":2}\n{"id":"x"}\nSYNC\n')
    buf = b""
    while b"SYNC" not in buf:
        buf += c.recv(4096)

    rc, out, err = ctl(sock, "status")
    lines = out.splitlines()
    check("status: readable table with a header and one row per shard",
          rc == 0 and lines[0].startswith("memwald test, up ") and "1 connection(s)" in lines[0]
          and lines[1].split()[:5] == ["TABLE", "SHARD", "KEY", "STATE", "STATUS"] and len(lines) == 5
          and lines[2].split()[0] == "events" and "bucket-0" in lines[2] and "SEALED" in lines[3], out + err)
    rc, out, err = ctl(sock, "--json", "status")
    try:
        j = json.loads(out)
        shard = j["result"]["tables"][0]["shards"][0]
        good = j["ok"] is True and all(k in shard for k in (
            "id", "key", "state", "status", "epoch", "manifest_version", "wal_position", "replay_after",
            "memtable_rows", "memtable_bytes", "frozen", "sstables")) and j["result"]["connections"] == 1
    except Exception as e:  # noqa: BLE001
        good, out = False, f"{e}: {out}"
    check("--json status: the daemon's JSON with every shard field", rc == 0 and good, out + err)

    rc, out, err = ctl(sock, "seal", "events", "bucket-0")
    check("seal: ok, key=value output", rc == 0 and out.strip() == "table=events shard=bucket-0 epoch=2", out + err)
    rc, out, err = ctl(sock, "drop-table", "other")
    check("drop-table refused (shard not sealed): exit 1, daemon's message",
          rc == 1 and "shard unsharded is not sealed" in err and out == "", out + err)
    rc, out, err = ctl(sock, "drop", "events", "bucket-0")
    check("drop of a sealed shard", rc == 0, out + err)
    rc, out, err = ctl(sock, "unseal", "events", "bucket-1")
    rc2, out2, err2 = ctl(sock, "claim", "events", "bucket-1")
    rc3, out3, err3 = ctl(sock, "release", "events", "bucket-1")
    check("unseal, claim (epoch+1), release", rc == 0 and rc2 == 0 and "epoch=2" in out2 and rc3 == 0,
          out + err + out2 + err2 + out3 + err3)
    t0 = time.monotonic()
    rc, out, err = ctl(sock, "flush")
    check("flush replies once done (async engine)", rc == 0 and out.strip() == "flushed=2"
          and time.monotonic() - t0 >= 0.04, out + err)
    rc, out, err = ctl(sock, "flush", "events", "bucket-1", "extra")
    check("wrong argument count: exit 1 with the usage", rc == 1 and "usage: flush [TABLE [SHARD]]" in err, err)
    rc, out, err = ctl(sock, "seal", "nope", "x")
    check("unknown table: exit 1", rc == 1 and 'unknown table "nope"' in err, err)
    rc, out, err = ctl(sock, "frobnicate")
    check("unknown command: exit 1, list of commands", rc == 1 and "unknown command" in err and "drop-table" in err, err)
    rc, out, err = ctl(sock, "--json", "frobnicate")
    check("--json error: envelope on stdout, exit 1", rc == 1 and json.loads(out)["ok"] is False, out)
    rc, out, err = ctl(sock, "metrics")
    check("metrics: Prometheus text with rows and errors counted",
          rc == 0 and 'memwald_rows_ingested_total{table="events"} 2' in out
          and 'memwald_errors_total{table="events",code="type"} 1' in out
          and 'memwald_rows_rejected_total{table="events",code="type"} 1' in out and "memwald_connections 1" in out
          and "memwald_ack_latency_seconds_count" in out, out[-1500:] + err)
    rc, out, err = ctl(sock)
    check("no command: usage, exit 2", rc == 2 and "usage:" in err)
    rc, out, err = ctl(sock, "seal", "a b", "c")
    check("argument with whitespace: exit 2", rc == 2)
    r = subprocess.run([MEMWALCTL, "--help"], capture_output=True, text=True)
    check("--help", r.returncode == 0 and "drop-table TABLE" in r.stdout and "--json" in r.stdout)
    rc, out, err = ctl(os.path.join(d, "nope.sock"), "status")
    check("no daemon: exit 3 naming the socket", rc == 3 and "nope.sock" in err, err)

    # a socket that answers something else: exit 3, nothing trusted
    import threading
    bogus = os.path.join(d, "bogus.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(bogus)
    srv.listen(4)

    def answer(replies):
        for rep in replies:
            conn, _ = srv.accept()
            conn.recv(4096)
            conn.sendall(rep)
            conn.close()
    replies = [b"hello\n", b'{"ok":true,"result":{"tables":[{"name":"x","shards":[' + b"[" * 200 + b"]}]}}\n",
               b'{"ok":"yes"}\n']
    th = threading.Thread(target=answer, args=(replies,))
    th.start()
    outs = [ctl(bogus, "status") for _ in replies]
    th.join()
    srv.close()
    check("non-memwald replies (garbage, deep nesting, bad ok): exit 3",
          all(o[0] == 3 and "bad reply" in o[2] for o in outs), outs)

    # raw protocol edges
    out = raw(sock, b"status", eof=True)  # EOF ends the request
    check("request ended by EOF instead of newline", json.loads(out)["ok"] is True, out[:200])
    out = raw(sock, b"x" * 5000 + b"\n")
    check("request over 4096 bytes refused", b'"ok":false' in out and b"4096" in out, out[:200])
    out = raw(sock, b"\n")
    check("empty request refused", b'"ok":false' in out, out)
    out = raw(sock, b'seal events "bucket\x01"\n')
    check("reply JSON escapes control bytes", json.loads(out)["ok"] is False and "\\u0001" in out.decode(), out)

    # HTTP
    status, ctype, body = http(mport, "/metrics")
    check("GET /metrics: 200, text/plain; version=0.0.4",
          status == 200 and ctype.startswith("text/plain; version=0.0.4") and "memwald_connections 1" in body,
          f"{status} {ctype} {body[:200]}")
    status, _, _ = http(mport, "/")
    check("GET /: 404", status == 404)
    status, _, _ = http(mport, "/metrics", "POST")
    check("POST /metrics: 405", status == 405)
    hs = socket.create_connection(("127.0.0.1", mport))
    hs.sendall(b"garbage\r\n\r\n")
    check("malformed request line: 400", hs.recv(100).startswith(b"HTTP/1.1 400"))
    hs.close()
    c.close()

    p.terminate()
    out, _ = p.communicate(timeout=30)
    check("harness stops; the socket file is removed", p.returncode == 0 and not os.path.exists(sock), out.decode())
    shutil.rmtree(d, ignore_errors=True)
    return plan()


if __name__ == "__main__":
    run_main(main, CHILDREN)  # never leaves a harness behind, whatever failed
