#!/usr/bin/env python3
"""e2e: recovery at start (issue 12) — acknowledged rows become visible to
LanceDB after a crash with no producer writing again, and a peer that is
writing a shard is not fenced.

Table t: id int64 pk, name string; bucket(id,4); claim = lazy (the default);
max_memtable_age_ms = 4000; compaction off (so the rows reach LanceDB by the
recovery's flush alone).

1. Daemon A acknowledges rows in every bucket, then dies by SIGKILL: the rows
   are only in the WAL (no flush ran: MemTables are large, the age bound is
   longer than the writes took).
2. Daemon B starts on the same table and nobody writes. Within
   max_memtable_age_ms of its start every bucket is ACTIVE with an empty
   MemTable (claimed, replayed, flushed by recovery), and LanceDB 0.39.0 reads
   exactly the acknowledged rows. B exits 0 on SIGTERM.
3. The peer rule: daemon C (shards = 0) streams rows into bucket 0 without
   pause while daemon D (shards = 0, 1, 2, 3, lazy) starts after bucket 1 got
   unflushed rows from a killed daemon. D recovers bucket 1 (claims it) but
   does not claim bucket 0: C is never fenced, D logs that a peer holds it.
   Then C stops; LanceDB reads every acknowledged row of both.
4. The shortcut: daemon E acknowledges rows in every bucket and dies by
   SIGKILL; E restarts on the same data_dir (the same node): each bucket's
   owner record names this node at the manifest's epoch, so recovery claims
   at once ("without the quiet period", 4 log lines) and LanceDB reads the
   rows.
Synchronisation is by replies, status and log lines (poll with deadlines).
TAP output.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util  # noqa: E402
from e2e_util import Client, Daemon, check, chosen, ctl_json, plan, poll, port_of, tidy  # noqa: E402

e2e_util.MEMWALD, e2e_util.MEMWALCTL = sys.argv[1], sys.argv[2]
SRC = os.environ.get("MW_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
CHECK = os.path.join(SRC, "tests", "interop", "check.mjs")
AGE_MS = 4000


def conf(tmp, name, shards="all", create=True):
    path = os.path.join(tmp, f"{name}.conf")
    with open(path, "w") as f:
        f.write(f"""[daemon]
log_level = info
data_dir = {tmp}/data-{name}
admin_socket = {tmp}/{name}.sock
listen = 127.0.0.1:0
[table t]
uri = {tmp}/t.lance
create = {"true" if create else "false"}
schema = id:int64 not null, name:string
primary_key = id
spec = bucket(id,4)
shards = {shards}
max_memtable_age_ms = {AGE_MS}
compaction = false
""")
    return path, os.path.join(tmp, f"{name}.sock")


def start(tmp, name, **kw):
    path, sock = conf(tmp, name, **kw)
    d = Daemon(["-c", path])
    line = d.wait_line("listening on", 30)
    return d, sock, (port_of(line) if line else None)


def send(port, rows):
    """rows: list of (id, name); returns how many were acknowledged."""
    c = Client(port, timeout=30)
    c.send_lines([json.dumps({"id": i, "name": n}) for i, n in rows] + ["SYNC"])
    acked = 0
    while True:
        rep = c.reply()
        if rep.startswith("OK "):
            acked += int(rep.split()[1])
        elif rep.startswith("SYNC "):
            break
        else:
            raise AssertionError(f"unexpected reply {rep!r}")
    c.close()
    return acked


def lancedb_rows(table):
    out = os.path.join(os.path.dirname(table), "got.jsonl")
    r = subprocess.run(["node", CHECK, table, "--out", out], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        return None, r.stderr + r.stdout
    return {int(json.loads(l)["id"]): json.loads(l)["name"] for l in open(out)}, ""


def status(sock):
    _, r, _ = ctl_json(sock, "status")
    if not r.get("ok"):
        return {}
    return {s["key"]: s for s in r["result"]["tables"][0]["shards"]}


def test_dead_writer(tmp):
    a, sock_a, port_a = start(tmp, "a")
    check("a daemon creates the table and listens", port_a is not None, "\n".join(a.lines))
    if port_a is None:
        return
    rows = [(i, f"a{i}") for i in range(400)]
    acked = send(port_a, rows)
    check("400 rows acknowledged in every bucket", acked == 400, f"acked {acked}")
    st = status(sock_a)
    check("nothing flushed before the crash (rows only in the WAL)",
          len(st) == 4 and all(s["flushes"] == 0 and s["memtable_rows"] > 0 for s in st.values()), str(st))
    a.p.send_signal(signal.SIGKILL)
    a.p.wait()
    rows_read, why = lancedb_rows(os.path.join(tmp, "t.lance"))
    check("after the crash LanceDB sees none of them (they are in the WAL only)",
          rows_read is not None and len(rows_read) == 0, why or f"{len(rows_read)} rows")
    t0 = time.monotonic()
    b, sock_b, port_b = start(tmp, "b", create=False)
    check("b restarts on the table (claim = lazy) and listens", port_b is not None, "\n".join(b.lines))
    if port_b is None:
        return

    def recovered():
        st = status(sock_b)
        return len(st) == 4 and all(s["state"] == "ACTIVE" and s["memtable_rows"] == 0 and s["flushes"] >= 1
                                    for s in st.values())
    ok = poll(recovered, AGE_MS / 1000 + 10)
    took = time.monotonic() - t0
    check(f"without any write every bucket is claimed, replayed and flushed within max_memtable_age_ms "
          f"({took:.1f} s <= {AGE_MS / 1000:.0f} s after the start)", ok and took <= AGE_MS / 1000,
          str(status(sock_b)))
    got, why = lancedb_rows(os.path.join(tmp, "t.lance"))
    check("LanceDB reads exactly the 400 acknowledged rows", got == {i: n for i, n in rows},
          why or f"{len(got or {})} rows")
    check("the log names each recovery", sum("recovery: shard" in l and "claiming it" in l for l in b.lines) == 4,
          "\n".join(l for l in b.lines if "recovery" in l))
    rc = b.stop()
    check("b exits 0 on SIGTERM", rc == 0, f"rc {rc}")


def test_busy_peer(tmp):
    bucket_of = e2e_util.bucket_of  # the Iceberg bucket hash (memwal.md §8.3)
    ids = {k: [i for i in range(100000, 104000) if bucket_of(i) == k] for k in range(4)}
    # bucket 1: unflushed rows of a daemon that died
    e, sock_e, port_e = start(tmp, "e")
    check("[peer] a first daemon starts", port_e is not None, "\n".join(e.lines))
    if port_e is None:
        return
    dead_rows = [(i, f"e{i}") for i in ids[1][:100]]
    check("[peer] 100 rows of bucket 1 acknowledged", send(port_e, dead_rows) == 100)
    e.p.send_signal(signal.SIGKILL)
    e.p.wait()
    # C owns bucket 0 and keeps writing it
    c, sock_c, port_c = start(tmp, "c", shards="0", create=False)
    check("[peer] daemon C (bucket 0) starts", port_c is not None, "\n".join(c.lines))
    if port_c is None:
        return
    stop = threading.Event()
    c_rows, c_bad = [], []

    def stream():
        k = 0
        src = ids[0]
        while not stop.is_set() and k + 5 <= len(src):
            batch = [(i, f"c{i}") for i in src[k:k + 5]]
            try:
                n = send(port_c, batch)
            except AssertionError as ex:
                c_bad.append(str(ex))
                return
            if n != len(batch):
                c_bad.append(f"acked {n} of {len(batch)}")
            c_rows.extend(batch[:n])
            k += 5
            time.sleep(0.05)  # a producer's pace, not synchronisation
    th = threading.Thread(target=stream)
    th.start()
    check("[peer] C acknowledges its first rows", poll(lambda: len(c_rows) >= 20, 30))
    d, sock_d, port_d = start(tmp, "d", create=False)
    check("[peer] daemon D (all buckets, lazy) starts", port_d is not None, "\n".join(d.lines))
    if port_d is None:
        stop.set()
        th.join()
        return
    def b1_recovered():
        s = status(sock_d).get("bucket-1", {})
        return s.get("state") == "ACTIVE" and s.get("memtable_rows", 1) == 0 and s.get("sstables", 0) >= 1
    ok = poll(b1_recovered, AGE_MS / 1000 + 10)
    b1 = status(sock_d).get("bucket-1", {}).get("id", "?")
    ok = ok and any(b1 in l and "100 rows replayed" in l for l in d.lines)
    check("[peer] D recovers bucket 1 (claimed, its 100 rows replayed, flushed)", ok,
          str(status(sock_d).get("bucket-1")) + "\n" + "\n".join(l for l in d.lines if "8e131bde" in l))
    ok = poll(lambda: any("a peer holds it" in l for l in d.lines), 20)
    check("[peer] D leaves bucket 0 alone: its WAL grows, a peer holds it", ok,
          "\n".join(l for l in d.lines if "recovery" in l))
    time.sleep(2 * AGE_MS / 4000)  # two quiet periods of D's probe while C writes (a pace, not a sync)
    stop.set()
    th.join()
    st_d = status(sock_d)
    check("[peer] C was never fenced while it wrote, and D never claimed bucket 0",
          not c_bad and st_d.get("bucket-0", {}).get("state", "NEW") == "NEW",
          f"C errors {c_bad[:3]}, D bucket 0: {st_d.get('bucket-0')}")
    rc_c = c.stop()
    check("[peer] C exits 0 (flushing bucket 0)", rc_c == 0, f"rc {rc_c}")
    rc_d = d.stop()
    check("[peer] D exits 0", rc_d == 0, f"rc {rc_d}")
    got, why = lancedb_rows(os.path.join(tmp, "t.lance"))
    want = {i: n for i, n in dead_rows + c_rows}
    check(f"[peer] LanceDB reads every acknowledged row of both ({len(want)})", got == want,
          why or f"{len(got or {})} rows, missing {sorted(set(want) - set(got or {}))[:5]}")


def test_same_node(tmp):
    e, sock_e, port_e = start(tmp, "e")
    check("[same node] a daemon creates the table and listens", port_e is not None, "\n".join(e.lines))
    if port_e is None:
        return
    rows = [(i, f"e{i}") for i in range(200)]
    acked = send(port_e, rows)
    check("[same node] 200 rows acknowledged", acked == 200, f"acked {acked}")
    # An owner record is a hint the daemon writes after a claim, off the
    # write path (src/shard/owners.c): an acknowledgement does not wait for
    # it. Kill only once each bucket's record is on disk, or a slow machine
    # (the ASan build under load) kills before the last one lands and that
    # shard rightly waits out the quiet period.
    node = open(os.path.join(tmp, "data-e", "node_id")).read().strip()

    def owner_records_written():
        st = status(sock_e)
        if len(st) != 4:
            return False
        for s in st.values():
            try:
                rec = json.load(open(os.path.join(tmp, "t.lance", "_memwald", "owners", s["id"] + ".json")))
            except (OSError, ValueError):
                return False
            if rec.get("node") != node or rec.get("epoch") != s["epoch"]:
                return False
        return True
    check("[same node] each bucket's owner record names this node at its epoch before the crash",
          poll(owner_records_written, 30), str(status(sock_e)))
    e.p.send_signal(signal.SIGKILL)
    e.p.wait()
    e2, sock_e2, port_e2 = start(tmp, "e", create=False)
    check("[same node] the same daemon restarts and listens", port_e2 is not None, "\n".join(e2.lines))
    if port_e2 is None:
        return

    def recovered():
        st = status(sock_e2)
        return len(st) == 4 and all(s["state"] == "ACTIVE" and s["memtable_rows"] == 0 and s["flushes"] >= 1
                                    for s in st.values())
    check("[same node] every bucket is recovered", poll(recovered, AGE_MS / 1000 + 10), str(status(sock_e2)))
    n = sum("without the quiet period" in l for l in e2.lines)
    check("[same node] each bucket is claimed at once: its owner record names this node at the manifest's epoch",
          n == 4, "\n".join(l for l in e2.lines if "recovery" in l))
    got, why = lancedb_rows(os.path.join(tmp, "t.lance"))
    check("[same node] LanceDB reads exactly the 200 acknowledged rows", got == {i: n for i, n in rows},
          why or f"{len(got or {})} rows")
    rc = e2.stop()
    check("[same node] the restarted daemon exits 0 on SIGTERM", rc == 0, f"rc {rc}")


def main():
    # MW_TEST=test_busy_peer runs that scenario alone
    for _, fn in chosen([(f.__name__, f) for f in (test_dead_writer, test_busy_peer, test_same_node)]):
        tmp = tempfile.mkdtemp(prefix="memwald-e2e-recovery-")
        try:
            fn(tmp)
        except Exception as ex:  # a broken scenario fails, never skips
            import traceback
            check(f"{fn.__name__} ran to the end", False, traceback.format_exc() + repr(ex))
        finally:
            tidy(tmp)
    return plan()


if __name__ == "__main__":
    sys.exit(main())
