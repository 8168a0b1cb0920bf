#!/usr/bin/env python3
"""e2e: ARROW frames written by the apache-arrow npm package, through the
real memwald daemon, read back by the real LanceDB 0.39.0.

tests/e2e/arrow_frames.mjs writes five IPC streams with apache-arrow 18.1.0
(all columns with nulls and vectors; a subset of the columns; the columns in
another order; a wrong column type; no primary key) and the rows LanceDB must
end up reading. Each frame is sent as `ARROW <nbytes>\\n<bytes>` on one
connection: the good ones are acknowledged with OK <rows>, the bad ones get
ERR type / ERR schema|pk naming the column and write nothing, and the
connection carries on. After `memwalctl flush` LanceDB must read exactly the
expected rows.

The WAL's pass-through (docs/protocol.md 1.5): table t is bucketed, so its
frames are split and re-encoded per shard; the unsharded table u gets the
full frame (re-encoded: apache-arrow leaves its last, null, vec slot out of
the child) and u-all (every column, no such slot: its record batch goes to
the WAL as it came). `status` must count 1 batch each way for u (and 0
passed through for t), the metrics endpoint must say the same, and after a
SIGKILL and a restart (memwald replays both WAL entries) and a flush
LanceDB must read u's rows (and t's) exactly. TAP output.
"""
import json
import os
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import e2e_util  # noqa: E402
from e2e_util import Daemon, check, ctl, ctl_json, plan, poll, port_of, tidy  # noqa: E402

e2e_util.MEMWALD, e2e_util.MEMWALCTL = sys.argv[1], sys.argv[2]
HERE = os.path.dirname(os.path.abspath(__file__))
FRAMES = os.path.join(HERE, "arrow_frames.mjs")


def replies(s, n):
    buf, out = b"", []
    while len(out) < n:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
        while b"\n" in buf and len(out) < n:
            line, buf = buf.split(b"\n", 1)
            out.append(line.decode())
    return out


def main():
    if not os.path.isdir(os.path.join(HERE, "..", "interop", "node_modules", "apache-arrow")):
        print("Bail out! tests/interop/node_modules is missing (npm install in tests/interop)")
        return 1
    tmp = tempfile.mkdtemp(prefix="memwald-e2e-arrow-")
    frames = os.path.join(tmp, "frames")
    r = subprocess.run(["node", FRAMES, "make", frames], capture_output=True, text=True, timeout=120)
    check("apache-arrow writes the frames", r.returncode == 0, r.stderr)
    if r.returncode != 0:
        return 1
    conf, sock = os.path.join(tmp, "memwald.conf"), os.path.join(tmp, "admin.sock")
    with open(conf, "w") as f:
        f.write(f"""[daemon]
data_dir = {tmp}/data
admin_socket = {sock}
listen = 127.0.0.1:0
[table t]
uri = {tmp}/t.lance
create = true
schema = id:int64 not null, name:string, v:double, vec:fixed_size_list<float32,8>
primary_key = id
spec = bucket(id,4)
[table u]
uri = {tmp}/u.lance
create = true
schema = id:int64 not null, name:string, v:double, vec:fixed_size_list<float32,8>
primary_key = id
""")
    d = Daemon(["-c", conf])
    line = d.wait_line("listening on")
    check("daemon starts", line is not None and d.wait_line("started") is not None, "\n".join(d.lines))
    if line is None:
        d.p.kill()
        return 1
    port = port_of(line)
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    names = sorted(n for n in os.listdir(frames) if n.endswith(".arrow") and n[0].isdigit())
    payload = b"USE t\n"
    for n in names:
        data = open(os.path.join(frames, n), "rb").read()
        payload += b"ARROW %d\n" % len(data) + data
    s.sendall(payload + b"SYNC\n")
    got = replies(s, 6)
    check("full frame (300 rows, nulls, vectors) -> OK 300", got[0:1] == ["OK 300"], got)
    check("subset frame (id, v) -> OK 101", got[1:2] == ["OK 101"], got)
    check("reordered columns -> OK 10", got[2:3] == ["OK 10"], got)
    check("v as utf8 (line 5, after USE t) -> ERR 5 type naming the column",
          len(got) > 3 and got[3].startswith("ERR 5 type ") and 'column "v"' in got[3], got)
    check("no primary key column -> ERR 6 schema or pk",
          len(got) > 4 and (got[4].startswith("ERR 6 schema ") or got[4].startswith("ERR 6 pk ")), got)
    check("the connection carries on: SYNC 411", got[5:6] == ["SYNC 411"], got)
    u = b"USE u\n"
    for n in ("1-full.arrow", "u-all.arrow"):
        data = open(os.path.join(frames, n), "rb").read()
        u += b"ARROW %d\n" % len(data) + data
    s.sendall(u + b"SYNC\n")
    got = replies(s, 3)
    check("table u: full -> OK 300, u-all -> OK 100, SYNC 811 (the connection's rows)",
          got == ["OK 300", "OK 100", "SYNC 811"], got)
    rc, st, err = ctl_json(sock, "status")
    shards = {t["name"]: t["shards"] for t in st.get("result", {}).get("tables", [])}
    us = shards.get("u", [{}])[0]
    check("u: 1 batch passed through, 1 encoded (status)",
          us.get("wal_batches_passed_through") == 1 and us.get("wal_batches_encoded") == 1
          and us.get("wal_bytes_passed_through", 0) > 100 * 8 * 4 and us.get("wal_bytes_encoded", 0) > 0, us)
    tp = [x.get("wal_batches_passed_through") for x in shards.get("t", [])]
    check("t (bucketed): every batch re-encoded, none passed through", tp and all(v == 0 for v in tp), tp)
    rc, m, err = ctl_json(sock, "metrics")
    text = m.get("result", {}).get("text", "")
    check("metrics: memwald_wal_batches_total by path",
          'memwald_wal_batches_total{path="passed_through"} 1' in text
          and 'memwald_wal_batch_bytes_total{path="passed_through"}' in text
          and f'memwald_wal_batches_total{{path="encoded"}} {1 + sum(x.get("wal_batches_encoded", 0) for x in shards.get("t", []))}' in text,
          [l for l in text.splitlines() if "wal_batch" in l])
    s.close()
    # u's rows only in its WAL: killed, restarted (our replay reads both
    # entries), then flushed
    d.p.kill()
    d.p.wait()
    d = Daemon(["-c", conf])
    check("daemon restarts after SIGKILL", d.wait_line("started") is not None, "\n".join(d.lines))

    def replayed():  # the restart's claims replay the WAL; a flush before that is refused (EBUSY)
        rc, st, err = ctl_json(sock, "status")
        shards = [x for t in st.get("result", {}).get("tables", []) for x in t["shards"]]
        return shards and all(x.get("state") == "ACTIVE" for x in shards)

    check("every shard ACTIVE again (u's two entries replayed)", poll(replayed, 60), "")
    rc, out, err = ctl(sock, "flush", timeout=120)
    check("memwalctl flush", rc == 0, out + err)
    r = subprocess.run(["node", FRAMES, "read", tmp], capture_output=True, text=True, timeout=120)
    rows = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    want = json.load(open(os.path.join(frames, "expected.json")))
    diff = [(a, b) for a, b in zip(rows, want) if a != b][:3]
    check(f"LanceDB reads exactly the {len(want)} expected rows (subset nulls, vectors, reordered)",
          r.returncode == 0 and len(rows) == len(want) and not diff,
          r.stderr + f"\ngot {len(rows)} rows, want {len(want)}; first differences {diff}")
    r = subprocess.run(["node", FRAMES, "read", tmp, "u"], capture_output=True, text=True, timeout=120)
    rows = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    want = json.load(open(os.path.join(frames, "expected_u.json")))
    diff = [(a, b) for a, b in zip(rows, want) if a != b][:3]
    check(f"LanceDB reads exactly u's {len(want)} rows (one frame passed through, one re-encoded)",
          r.returncode == 0 and len(rows) == len(want) and not diff,
          r.stderr + f"\ngot {len(rows)} rows, want {len(want)}; first differences {diff}")
    rc = d.stop()
    check("daemon exits 0 on SIGTERM", rc == 0, "\n".join(d.lines[-20:]))
    tidy(tmp)
    return plan()


if __name__ == "__main__":
    sys.exit(main())
