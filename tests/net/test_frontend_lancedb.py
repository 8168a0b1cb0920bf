#!/usr/bin/env python3
"""e2e: bootstrap + producers' protocol + shard engine -> LanceDB 0.39.0.

For an unsharded and a bucket(id,4) table: table_create_tool creates the
table as LanceDB would (src/lance/table_create.h), frontend_real serves it
through the real engine (src/net/engine_table.h), we send upserts, an
update, deletes and a bad line over TCP, check every reply, stop (shards
released: flushed to SSTables), and read the table back with LanceDB
(tests/e2e/read_rows.mjs): exactly the model's rows must come back. Then the admin
socket over the real engine (status, flush, seal -> ERR sealed, unseal,
release, claim), and Lance's own WAL entries sent as ARROW frames, read back
equal to the golden vector's rows (check.mjs).
Needs node and tests/interop/node_modules. Output is TAP.
"""
import glob
import json
import os
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))  # e2e_util
import e2e_util  # noqa: E402
from e2e_util import check, chosen, ctl_json, plan, run_main, tidy  # noqa: E402

TOOL, REAL, e2e_util.MEMWALCTL = sys.argv[1], sys.argv[2], sys.argv[3]
HERE = os.path.dirname(os.path.abspath(__file__))


def read_lines(s, n):
    buf = b""
    while buf.count(b"\n") < n:
        c = s.recv(65536)
        if not c:
            break
        buf += c
    return buf.decode().splitlines()


def serve(table, start_check, *extra):
    """frontend_real serving table as "events" (extra: its admin socket):
    (the process, its port); the port is None, and start_check a failed
    check, when it does not say READY."""
    p = subprocess.Popen([REAL, table, "events", *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    line = p.stdout.readline().decode()
    if not line.startswith("READY"):
        check(start_check, False, line + p.stderr.read().decode())
        return p, None
    return p, int(line.split()[1])


def bootstrapped(name, schema, spec):
    """A scratch directory holding t.lance (key id) as table_create_tool
    creates it: (the directory, the table's path)."""
    d = tempfile.mkdtemp(prefix=f"mw-fe-{name}.")
    table = os.path.join(d, "t.lance")
    subprocess.run([TOOL, table, schema, "id", spec], check=True)
    return d, table


def stop(p):
    """SIGTERM to a frontend_real: (exit code, stdout, stderr)."""
    p.terminate()
    out, err = p.communicate(timeout=120)
    return p.returncode, out.decode(), err.decode()


def scenario(name, spec):
    d = tempfile.mkdtemp(prefix=f"mw-fe-{name}.")
    table = os.path.join(d, "t.lance")
    r = subprocess.run([TOOL, table, "id:int64 not null, region:string, v:double", "id", spec],
                       capture_output=True, text=True)
    check(f"{name}: table bootstrapped", r.returncode == 0, r.stderr)
    p, port = serve(table, f"{name}: server over the real engine starts")
    if port is None:
        return
    model = {}
    s = socket.create_connection(("127.0.0.1", port))
    req = ["USE events"]
    for i in range(1, 41):
        row = {"id": i, "region": ["eu", "us", None][i % 3], "v": i * 0.5}
        model[i] = row
        req.append(json.dumps(row))
    req.append('{"id":5,"region":"changed","v":-1}')
    model[5] = {"id": 5, "region": "changed", "v": -1}
    req.append('{"id":6,"v":"not a number"}')  # line 43: type error, not written
    for i in (7, 8):
        req.append(json.dumps({"id": i}).replace("{", "DEL {", 1))
        del model[i]
    req.append("SYNC")
    s.sendall(("\n".join(req) + "\n").encode())
    got = read_lines(s, 4)
    oks = sum(int(l.split()[1]) for l in got if l.startswith("OK "))
    check(f"{name}: replies OK 41, ERR 43 type, OK 2, SYNC 43",
          len(got) == 4 and got[0] == "OK 41" and got[1].startswith("ERR 43 type ") and got[2] == "OK 2"
          and got[3] == "SYNC 43" and oks == 43, got)
    s.close()
    rc, out, err = stop(p)
    check(f"{name}: shards released and table closed", rc == 0 and "BYE" in out, out + err)
    r = subprocess.run(["node", os.path.join(HERE, "..", "e2e", "read_rows.mjs"), d], capture_output=True, text=True, timeout=120)
    rows = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    want = [model[k] for k in sorted(model)]
    check(f"{name}: LanceDB reads exactly the acknowledged rows ({len(want)})", r.returncode == 0 and rows == want,
          r.stderr + "\n" + "\n".join(map(json.dumps, rows[:5])))
    tidy(d)


def send(s, lines, n):
    s.sendall(("\n".join(lines) + "\n").encode())
    return read_lines(s, n)


def admin_scenario():
    """bucket(id,4) with the admin socket over the real engine (admin_engine.h)."""
    d, table = bootstrapped("admin", "id:int64 not null, region:string, v:double", "bucket(id,4)")
    sock = os.path.join(d, "admin.sock")
    p, port = serve(table, "admin: server starts", sock)
    if port is None:
        return
    s = socket.create_connection(("127.0.0.1", port))
    model = {i: {"id": i, "region": "r%d" % i, "v": float(i)} for i in range(1, 41)}
    got = send(s, ["USE events"] + [json.dumps(model[i]) for i in range(1, 41)] + ["SYNC"], 2)
    check("admin: 40 rows acknowledged", got == ["OK 40", "SYNC 40"], got)
    rc, j, err = ctl_json(sock, "status")
    shards = j["result"]["tables"][0]["shards"] if rc == 0 else []
    check("admin: status lists the 4 bucket shards, ACTIVE, 40 MemTable rows",
          rc == 0 and sorted(x["key"] for x in shards) == ["bucket-0", "bucket-1", "bucket-2", "bucket-3"]
          and all(x["state"] == "ACTIVE" and x["status"] == "ACTIVE" for x in shards)
          and sum(x["memtable_rows"] for x in shards) == 40, j or err)
    rc, j, err = ctl_json(sock, "flush")
    rc2, j2, _ = ctl_json(sock, "status")
    shards = j2["result"]["tables"][0]["shards"] if rc2 == 0 else []
    check("admin: flush -> flushed 4, every shard has an SSTable and an empty MemTable",
          rc == 0 and j["result"] == {"flushed": 4} and all(x["sstables"] >= 1 and x["memtable_rows"] == 0
                                                            for x in shards), (j, j2, err))
    rc, j, err = ctl_json(sock, "seal", "events", "bucket-0")
    check("admin: seal bucket-0", rc == 0 and j["result"]["status"] == "SEALED", (j, err))
    got = send(s, ['{"id":1,"region":"sealed?","v":0}', "PING"], 2)
    check("admin: a row for the sealed shard -> ERR sealed", got[0].startswith("ERR 43 sealed ") and got[1] == "PONG",
          got)
    rc, j, err = ctl_json(sock, "unseal", "events", "0")
    check("admin: unseal bucket-0 (by number)", rc == 0 and j["result"]["status"] == "ACTIVE"
          and j["result"]["state"] == "ACTIVE", (j, err))
    model[1] = {"id": 1, "region": "after-unseal", "v": 1.0}
    got = send(s, [json.dumps(model[1]), "SYNC"], 2)
    check("admin: writes flow again after unseal", got == ["OK 1", "SYNC 41"], got)
    rc, j, err = ctl_json(sock, "status")
    b1 = [x for x in j["result"]["tables"][0]["shards"] if x["key"] == "bucket-1"][0] if rc == 0 else {}
    rc, j, err = ctl_json(sock, "release", "events", "bucket-1")
    rc2, j2, err2 = ctl_json(sock, "claim", "events", "bucket-1")
    check("admin: release then claim bucket-1 takes a new epoch",
          rc == 0 and j["result"]["state"] == "CLOSED" and rc2 == 0 and j2["result"]["epoch"] == b1.get("epoch", 0) + 1,
          (b1, j, j2, err, err2))
    rc, j, err = ctl_json(sock, "seal", "events", "bucket-9")
    check("admin: a bad shard name -> exit 1 with the reason", rc == 1 and "bucket-<b>" in err, err)
    s.close()
    rc, out, err = stop(p)
    check("admin: shards released and table closed", rc == 0, out + err)
    r = subprocess.run(["node", os.path.join(HERE, "..", "e2e", "read_rows.mjs"), d], capture_output=True, text=True, timeout=120)
    rows = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    check("admin: LanceDB reads the model's rows", rows == [model[k] for k in sorted(model)],
          r.stderr + "\n" + "\n".join(map(json.dumps, rows[:3])))
    tidy(d)


def drop_scenario():
    """drop-table over the real engine: the table leaves the daemon's registry
    (status, USE, rows from a connection that had selected it) and the disk."""
    d, table = bootstrapped("drop", "id:int64 not null, v:double", "unsharded")
    sock = os.path.join(d, "admin.sock")
    p, port = serve(table, "drop: server starts", sock)
    if port is None:
        return
    s = socket.create_connection(("127.0.0.1", port))
    got = send(s, ["USE events", '{"id":1,"v":1}', '{"id":2,"v":2}', "SYNC"], 2)
    check("drop: 2 rows acknowledged", got == ["OK 2", "SYNC 2"], got)
    rc, j, err = ctl_json(sock, "seal", "events", "unsharded")
    rc2, j2, err2 = ctl_json(sock, "drop-table", "events")
    check("drop: seal then drop-table", rc == 0 and rc2 == 0 and j2["result"] == {"table": "events", "dropped": True},
          (j, err, j2, err2))
    rc, j, err = ctl_json(sock, "status")
    check("drop: status no longer lists the table", rc == 0 and j["result"]["tables"] == [], (j, err))
    got = send(s, ['{"id":3,"v":3}', "PING"], 2)
    check("drop: a row from a connection that had selected it -> ERR table naming the drop",
          got[0].startswith("ERR 5 table ") and "dropped" in got[0] and got[1] == "PONG", got)
    s2 = socket.create_connection(("127.0.0.1", port))
    got = send(s2, ["USE events", "PING"], 2)
    check("drop: USE of the dropped table -> ERR 1 table", got[0].startswith("ERR 1 table ") and got[1] == "PONG", got)
    rc, j, err = ctl_json(sock, "flush", "events")
    check("drop: admin commands answer unknown table", rc == 1 and "unknown table" in json.dumps(j) + str(err), (j, err))
    check("drop: the table directory is gone", not os.path.exists(os.path.join(table, "_versions")),
          os.listdir(table) if os.path.isdir(table) else "")
    s.close()
    s2.close()
    rc, out, err = stop(p)
    check("drop: daemon side exits 0", rc == 0, out + err)
    tidy(d)


def arrow_scenario():
    """Lance's own WAL entries (unsharded-small) sent as ARROW frames into a
    fresh table with the vectors' schema (vec fixed_size_list<float32,8>):
    LanceDB must read exactly the vector's final rows for those ids
    (tests/interop/check.mjs against the vector's expected.jsonl)."""
    vectors = os.environ.get("MW_VECTORS", "")
    wal = glob.glob(os.path.join(vectors, "unsharded-small/t.lance/_mem_wal/*/wal/*.arrow"))
    if not wal:
        check(f"arrow: Lance's WAL entries found under MW_VECTORS={vectors!r}", False)
        return
    # position order: file names are the position's bits, least significant first
    wal.sort(key=lambda f: int(os.path.basename(f)[:64][::-1], 2))
    d, table = bootstrapped("arrow", "id:int64 not null, name:string, v:double, vec:fixed_size_list<float32,8>",
                            "unsharded")
    p, port = serve(table, "arrow: server starts")
    if port is None:
        return
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"USE events\n" + b"".join(b"ARROW %d\n" % os.path.getsize(f) + open(f, "rb").read() for f in wal)
              + b"SYNC\n")
    got = read_lines(s, len(wal) + 1)
    check("arrow: every WAL entry acknowledged as one frame",
          got == ["OK 100"] * len(wal) + [f"SYNC {100 * len(wal)}"] or
          (sum(int(l.split()[1]) for l in got[:-1] if l.startswith("OK ")) == 100 * len(wal)
           and got[-1] == f"SYNC {100 * len(wal)}"), got)
    s.close()
    rc, out, err = stop(p)
    check("arrow: released and closed", rc == 0, out + err)
    r = subprocess.run(["node", os.path.join(HERE, "wal_ids.mjs")] + wal, capture_output=True, text=True, timeout=60)
    ids = set(json.loads(r.stdout)) if r.returncode == 0 else set()
    expected = [l for l in open(os.path.join(vectors, "unsharded-small/expected.jsonl")).read().splitlines()
                if l.startswith("{") and json.loads(l)["id"] in ids]
    exp_file = os.path.join(d, "expected.jsonl")
    with open(exp_file, "w") as f:
        f.write("\n".join(expected) + "\n")
    r2 = subprocess.run(["node", os.path.join(HERE, "..", "interop", "check.mjs"), table, "--expected", exp_file],
                        capture_output=True, text=True, timeout=120)
    check(f"arrow: LanceDB reads the vector's {len(expected)} rows for those ids, byte-exact values",
          len(ids) > 0 and r2.returncode == 0 and r2.stdout.startswith(f"ok rows={len(expected)}"),
          r.stderr + r2.stdout + r2.stderr)
    tidy(d)


def main():
    # MW_TEST=drop runs that scenario alone
    todo = chosen([("unsharded", lambda: scenario("unsharded", "unsharded")),
                   ("bucket4", lambda: scenario("bucket4", "bucket(id,4)")),
                   ("admin", admin_scenario), ("drop", drop_scenario), ("arrow", arrow_scenario)])
    if not os.path.isdir(os.path.join(HERE, "..", "interop", "node_modules", "@lancedb", "lancedb")):
        print("Bail out! tests/interop/node_modules is missing (npm install in tests/interop)")
        return 1
    for _, run in todo:
        run()
    return plan()


if __name__ == "__main__":
    _popen = subprocess.Popen
    CHILDREN = []

    def _track(*a, **k):
        c = _popen(*a, **k)
        CHILDREN.append(c)
        return c
    subprocess.Popen = _track
    run_main(main, CHILDREN)  # never leaves a server behind, whatever failed
