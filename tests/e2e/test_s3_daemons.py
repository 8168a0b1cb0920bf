#!/usr/bin/env python3
"""e2e (issue 13): several memwald daemons on one table on S3, and failover.

Run through tests/s3/with-s3.sh (MW_S3_ENDPOINT, AWS_*). One table
s3://<bucket of its own>/db/t.lance, bucket(id,4). Two daemons, A and B,
each a separate process with its own port, data_dir and admin socket
(standing in for two hosts): A owns buckets 0,1, B owns 2,3, both
`create = true` and started at the same moment (one creates the table, the
other opens it), both `claim = eager`.

 1. Each daemon serves its buckets: every id is sent to A first; A
    acknowledges the ids of its buckets and answers `not_owner` for the
    others, naming B's address once B's owner record is known; those ids
    go to B and are acknowledged there.
 2. Failover: B is SIGKILLed mid-life (its last rows acknowledged, in its
    WAL only). `memwalctl claim t bucket-2` and `bucket-3` on A take the
    shards over (replaying B's WAL); A then acknowledges B's ids.
 3. B restarts with the same configuration: it notices the takeover (its
    memory says it held the shards, their owner records now name A at a
    newer epoch), does not claim them back, says so in its log, and answers
    `not_owner` naming A for them.
 4. After a flush on A, LanceDB 0.39.0 reads from S3 exactly the
    acknowledged rows (A's, B's before the kill, A's after the takeover),
    with their values; both daemons stop cleanly.
No sleeps for synchronisation: waits poll a condition or a log line with a
deadline. TAP output.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util  # noqa: E402
from e2e_util import Client, Daemon, check, ctl, ctl_json, plan, poll, port_of  # noqa: E402

e2e_util.MEMWALD, e2e_util.MEMWALCTL = sys.argv[1], sys.argv[2]
SRC = os.environ.get("MW_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
READ_ROWS = os.path.join(SRC, "tests", "e2e", "read_rows.mjs")
IDS = 200


from s3_util import drop_bucket, s3  # noqa: E402,F401


def conf(work, name, shards, table):
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "memwald.conf")
    with open(path, "w") as f:
        f.write(f"""[daemon]
log_level = info
data_dir = {d}/data
admin_socket = {d}/admin.sock
listen = 127.0.0.1:0
[table t]
uri = {table}
create = true
schema = id:int64 not null, v:int64
primary_key = id
spec = bucket(id,4)
shards = {shards}
claim = eager
""")
    return path, os.path.join(d, "admin.sock")


def send_one(port, i, v):
    """One row and a PING on a fresh connection: 'OK 1' or the ERR line."""
    c = Client(port, timeout=30)
    c.send("USE t\n" + json.dumps({"id": i, "v": v}) + "\nPING\n")
    r = c.reply()
    while r.startswith("OK") and r != "OK 1":
        r = c.reply()
    if r == "OK 1":
        c.reply()  # PONG
    c.close()
    return r


def send_many(port, ids, v_of):
    """Each row its own group (a PING after it: a group spanning shards is
    refused whole), pipelined on one connection: {id: "OK" | the ERR line}."""
    c = Client(port, timeout=60)
    c.send("USE t\n" + "".join(json.dumps({"id": i, "v": v_of(i)}) + "\nPING\n" for i in ids))
    out = {}
    for i in ids:
        r = c.reply()
        while r != "PONG":
            if r.startswith("OK 1") or r.startswith("ERR "):
                out[i] = "OK" if r.startswith("OK") else r
            else:
                raise RuntimeError("unexpected reply " + r)
            r = c.reply()
    c.close()
    return out


def status(sock):
    rc, j, err = ctl_json(sock, "status")
    return j.get("result", {}) if rc == 0 else {}


def active_buckets(sock):
    st = status(sock)
    return sorted(sh["key"] for t in st.get("tables", []) for sh in t["shards"] if sh["state"] == "ACTIVE")


def main():
    if not os.environ.get("MW_S3_ENDPOINT"):
        check("an S3 endpoint (run through tests/s3/with-s3.sh)", False)
        return plan()
    work = tempfile.mkdtemp(prefix="memwald-e2e-s3-")
    bucket = f"mw-e2e-{os.getpid()}"
    check("bucket created", s3("PUT", "/" + bucket) == 200)
    table = f"s3://{bucket}/db/t.lance"
    conf_a, sock_a = conf(work, "a", "0, 1", table)
    conf_b, sock_b = conf(work, "b", "2, 3", table)
    env = dict(os.environ)
    a = Daemon(["-c", conf_a], env=env)
    b = Daemon(["-c", conf_b], env=env)
    daemons = [a, b]
    try:
        la, lb = a.wait_line("listening on", 60), b.wait_line("listening on", 60)
        ok = la is not None and lb is not None and a.wait_line("started", 60) and b.wait_line("started", 60)
        check("two daemons on one S3 table start together (one creates it, the other opens it)", ok,
              "\n".join(a.lines[-20:] + b.lines[-20:]))
        if not ok:
            return plan()
        created = [d for d in daemons if d.wait_line("table t: created s3://", 1)]
        opened = [d for d in daemons if d.wait_line("another process created", 1)]
        check("exactly one created the table; the other lost the race cleanly or found it there",
              len(created) == 1, f"created by {len(created)}, lost race {len(opened)}")
        pa, pb = port_of(la), port_of(lb)
        addr_b = f"127.0.0.1:{pb}"
        addr_a = f"127.0.0.1:{pa}"
        check("A holds buckets 0,1 and B holds 2,3, each ACTIVE",
              poll(lambda: active_buckets(sock_a) == ["bucket-0", "bucket-1"] and
                   active_buckets(sock_b) == ["bucket-2", "bucket-3"], 60),
              f"{active_buckets(sock_a)} {active_buckets(sock_b)}")

        # 1. every id to A; the refused ones to B
        acked = {}
        first = send_many(pa, list(range(IDS)), lambda i: i * 3)
        mine_a = [i for i, r in first.items() if r == "OK"]
        refused = [i for i, r in first.items() if r != "OK"]
        for i in mine_a:
            acked[i] = i * 3
        check("A acknowledges the ids of its buckets and refuses the others with not_owner",
              mine_a and refused and all(" not_owner " in first[i] for i in refused),
              json.dumps({str(i): first[i] for i in refused[:3]}))
        probe = refused[0]
        named = {}

        def names_b():
            named["r"] = send_one(pa, probe, probe * 3)
            return addr_b in named["r"]
        check("not_owner names the owner: B's address, node and epoch (from B's owner record)",
              poll(names_b, 20, interval=0.2) and "node" in named["r"] and "epoch" in named["r"], named.get("r"))
        second = send_many(pb, refused, lambda i: i * 3)
        check("B acknowledges every id A refused", all(second.get(i) == "OK" for i in refused),
              json.dumps({str(i): second.get(i) for i in refused[:3]}))
        for i in refused:
            acked[i] = i * 3
        # rows B acknowledged last, still only in its WAL when it dies
        late = send_many(pb, refused[:20], lambda i: i * 7)
        for i in refused[:20]:
            if late.get(i) == "OK":
                acked[i] = i * 7

        # 2. failover
        b.stop(signal.SIGKILL)
        check("B killed (SIGKILL)", b.p.returncode == -signal.SIGKILL)
        r = send_one(pa, probe, probe * 3)
        check("A still refuses B's ids while nobody took them over", " not_owner " in r, r)
        claims = [ctl_json(sock_a, "claim", "t", f"bucket-{k}") for k in (2, 3)]
        check("memwalctl claim on A takes buckets 2 and 3 over (replaying B's WAL)",
              all(c[0] == 0 for c in claims) and
              poll(lambda: active_buckets(sock_a) == [f"bucket-{k}" for k in range(4)], 60),
              json.dumps([c[1] for c in claims]) + "\n" + "\n".join(a.lines[-15:]))
        third = send_many(pa, refused, lambda i: i * 11)
        check("A now acknowledges B's ids", all(third.get(i) == "OK" for i in refused),
              json.dumps({str(i): third.get(i) for i in refused[:3]}))
        for i in refused:
            acked[i] = i * 11

        # 3. B restarts: fenced, and says so
        b = Daemon(["-c", conf_b], env=env)
        daemons.append(b)
        lb = b.wait_line("listening on", 60)
        ok = lb is not None and b.wait_line("started", 60) is not None
        lines = [ln for ln in b.lines if "is FENCED here" in ln]
        check("restarted B notices the takeover of both its shards, says so, and names A",
              ok and len(lines) == 2 and all(addr_a in ln for ln in lines), "\n".join(b.lines[-20:]))
        pb = port_of(lb) if lb else pb
        check("restarted B claims neither shard back (A keeps all four ACTIVE)",
              active_buckets(sock_b) == [] and active_buckets(sock_a) == [f"bucket-{k}" for k in range(4)],
              f"{active_buckets(sock_b)} {active_buckets(sock_a)}")
        named = {}

        def names_a():
            named["r"] = send_one(pb, probe, probe * 11)
            return " not_owner " in named["r"] and addr_a in named["r"]
        check("restarted B answers not_owner for its old shards, naming A", poll(names_a, 20, interval=0.2),
              named.get("r"))

        # 4. LanceDB reads exactly the acknowledged rows from S3
        rc, _, out = ctl_json(sock_a, "flush", "t")
        check("flush on A", rc == 0, out)
        r = subprocess.run(["node", READ_ROWS, f"s3://{bucket}/db"], capture_output=True, text=True, timeout=180)
        got = {}
        for line in r.stdout.splitlines():
            o = json.loads(line)
            got[o["id"]] = o["v"]
        check("LanceDB 0.39.0 reads exactly the acknowledged rows from S3, with their last values",
              r.returncode == 0 and got == acked,
              r.stderr[-2000:] + f" missing={sorted(set(acked) - set(got))[:10]} "
              f"extra={sorted(set(got) - set(acked))[:10]} "
              f"wrong={[i for i in acked if i in got and got[i] != acked[i]][:10]}")
        gc = next((t.get("gc") for t in status(sock_a).get("tables", []) if t.get("name") == "t"), None) or {}
        check("status shows GC's WAL reads and listings (wal_reads, wal_reads_absent, wal_lists)",
              all(isinstance(gc.get(k), int) for k in ("wal_reads", "wal_reads_absent", "wal_lists")), gc)
        check("both daemons stop cleanly (exit 0)", a.stop() == 0 and b.stop() == 0,
              "\n".join(a.lines[-10:] + b.lines[-10:]))
        e2e_util.inspect_under(table)  # every object decodes, verify passes, on S3
    finally:
        for d in daemons:
            if d.p.poll() is None:
                d.p.kill()
    rc = plan()
    if rc == 0:
        shutil.rmtree(work, ignore_errors=True)
        drop_bucket(bucket)
    else:
        print(f"# kept {work} and bucket {bucket}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
