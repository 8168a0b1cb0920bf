#!/usr/bin/env python3
"""e2e: one large write becomes one WAL entry (issue 14, `write_gather_ms`).

A producer's write of 10 000 rows reaches the server as several read chunks,
each parsed as its own run; without the gather each run was its own
submission and the first one committed alone on the idle WAL, so a write
took two entries or more (about 4 600 rows per entry). With the gather
(docs/protocol.md §1.6.1) the parsed runs of one connection wait while more
of the write is on its way, and go to the engine as one write.

Checks, on the real daemon:
  - 10 writes of 10 000 rows, one at a time (each waits for its OKs), to an
    unsharded table: rows per WAL entry (status: rows_acked / wal_entries)
    at least 8 000, and no write took more than 2 entries;
  - the same on a bucket(id,4) table: every shard gets its ~2 500 rows of a
    write as one entry (at least 2 000 rows per entry, at most 2 entries per
    shard and write);
  - reply order with a refused line in the middle of a gathered write:
    OK for the rows before it, the ERR naming its line, OK for the rest;
  - nothing more coming means no wait: 20 one-row writes, each waiting for
    its OK, under write_gather_ms = 1000 take far less than one bound each;
  - a write that stops in the middle of a line: the complete rows before it
    are acknowledged (the gather's bound), the rest once the line ends;
  - LanceDB-independent count: every acknowledged row is in rows_acked.

The daemon runs with write_gather_ms = 1000 (the bound, never a delay), so a
parse thread that a loaded machine schedules late does not split a write.
Synchronisation by replies and status with deadlines. Output is TAP.
"""
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util  # noqa: E402
from e2e_util import Client, Daemon, check, ctl_json, plan, port_of, run_main, tidy  # noqa: E402

e2e_util.MEMWALD, e2e_util.MEMWALCTL = sys.argv[1], sys.argv[2]
# argv[3] (optional): write_gather_ms for the daemon; 0 shows the checks
# failing on the ungathered path
GATHER_MS = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
CHILDREN = []
WRITES, ROWS = 10, 10000


def shards_of(sock, table):
    rc, j, _ = ctl_json(sock, "status")
    if rc != 0 or not j.get("ok"):
        return None
    for t in j["result"].get("tables", []):
        if t.get("name") == table:
            return {s["id"]: (s.get("rows_acked", 0), s.get("wal_entries", 0)) for s in t.get("shards", [])}
    return None


def rows(first, n, bad_at=None):
    out = []
    for i in range(first, first + n):
        if i == bad_at:
            out.append('{"id":"not a number","name":"x","v":1.5}\n')
        else:
            out.append('{"id":%d,"name":"row-%d","v":%d.25}\n' % (i, i, i))
    return "".join(out)


def acked(c, n, timeout=60):
    """Read OK lines until n rows are acknowledged; (rows, other lines)."""
    got, other = 0, []
    while got < n:
        l = c.line(timeout)
        if l is None:
            break
        if l.startswith("OK "):
            got += int(l[3:])
        else:
            other.append(l)
            break
    return got, other


def big_writes(sock, port, table, first):
    """WRITES writes of ROWS rows, one at a time: (all acknowledged, entries
    per write per shard, rows per entry over the run per shard)."""
    c = Client(port, timeout=60)
    c.send(f"USE {table}\n")
    before = shards_of(sock, table) or {}
    per_write, ok = [], True
    for w in range(WRITES):
        start = shards_of(sock, table) or {}
        c.send(rows(first + w * ROWS, ROWS))
        n, other = acked(c, ROWS)
        ok = ok and n == ROWS and not other
        end = shards_of(sock, table) or {}
        per_write.append({k: end[k][1] - start.get(k, (0, 0))[1] for k in end})
    after = shards_of(sock, table) or {}
    c.close()
    ratio = {k: (after[k][0] - before.get(k, (0, 0))[0]) / max(1, after[k][1] - before.get(k, (0, 0))[1])
             for k in after}
    return ok, per_write, ratio


def main():
    tmp = tempfile.mkdtemp(prefix="memwald-e2e-entries-")
    sock = os.path.join(tmp, "admin.sock")
    conf = os.path.join(tmp, "memwald.conf")
    with open(conf, "w") as f:
        f.write(f"""[daemon]
data_dir = {tmp}/data
admin_socket = {sock}
listen = 127.0.0.1:0
write_gather_ms = {GATHER_MS}
[table t]
uri = t.lance
create = true
schema = id:int64 not null, name:string, v:double
primary_key = id
claim = eager
[table b]
uri = b.lance
create = true
schema = id:int64 not null, name:string, v:double
primary_key = id
spec = bucket(id,4)
claim = eager
""")
    d = Daemon(["-c", conf])
    CHILDREN.append(d.p)
    line = d.wait_line("listening on", 30)
    check("daemon starts", line is not None and d.wait_line("started", 30) is not None, "\n".join(d.lines))
    if line is None:
        return plan()
    port = port_of(line)

    ok, per_write, ratio = big_writes(sock, port, "t", 0)
    check(f"{WRITES} writes of {ROWS} rows to an unsharded table acknowledged", ok, per_write)
    (r,) = ratio.values() if len(ratio) == 1 else (0,)
    worst = max((max(w.values()) for w in per_write if w), default=0)
    print(f"# unsharded: {r:.0f} rows per WAL entry, WAL entries per write {[sum(w.values()) for w in per_write]}")
    check("unsharded: at least 8 000 rows per WAL entry", r >= 8000, f"{r:.0f} rows per entry")
    check("unsharded: no write took more than 2 WAL entries", 0 < worst <= 2, per_write)

    ok, per_write, ratio = big_writes(sock, port, "b", 100000)
    check(f"{WRITES} writes of {ROWS} rows to a bucket(id,4) table acknowledged", ok, per_write)
    low = min(ratio.values()) if len(ratio) == 4 else 0
    worst = max((max(w.values()) for w in per_write if w), default=0)
    print(f"# bucket(id,4): rows per WAL entry by shard {sorted(round(v) for v in ratio.values())}")
    check("bucket(id,4): every shard at least 2 000 rows per WAL entry (~2 500 per write)",
          low >= 2000, ratio)
    check("bucket(id,4): no write took more than 2 WAL entries of any shard", 0 < worst <= 2, per_write)

    # a refused line inside a gathered write: replies keep line order
    c = Client(port, timeout=60)
    c.send("USE t\n" + rows(200000, ROWS, bad_at=200000 + 6000))
    first, other = acked(c, 6000)
    err = other[0] if other else c.line(30)
    rest, other2 = acked(c, ROWS - 6001)
    check("a refused line mid-write: OK 6 000 rows, its ERR (line 6 002), OK the 3 999 after it",
          first == 6000 and err is not None and err.startswith("ERR 6002 type") and rest == ROWS - 6001
          and not other2, f"{first} {err} {rest} {other2}")

    # nothing more coming: a one-row write is never held for the bound
    t0 = time.monotonic()
    n1 = 0
    for i in range(20):
        c.send(rows(300000 + i, 1))
        n1 += acked(c, 1, timeout=30)[0]
    took = time.monotonic() - t0
    check(f"20 one-row writes under write_gather_ms = {GATHER_MS}: each acknowledged without waiting "
          f"for the bound ({took:.2f} s for all)", n1 == 20 and took < 20 * max(GATHER_MS, 100) / 1000 / 4,
          f"{n1} acked in {took:.2f} s")

    # a write stalled in the middle of a line: the rows before it go
    half = '{"id":400500,"name":"half'
    c.send(rows(400000, 500) + half)
    n2, other = acked(c, 500, timeout=30)
    c.send('","v":0.5}\n')
    n3, other3 = acked(c, 1, timeout=30)
    check("a write stalled mid-line: its 500 complete rows acknowledged, the last one once its line ends",
          n2 == 500 and not other and n3 == 1 and not other3, f"{n2} {other} {n3} {other3}")
    c.close()

    st = shards_of(sock, "t") or {}
    total = sum(v[0] for v in st.values())
    want = WRITES * ROWS + (ROWS - 1) + 20 + 501
    check(f"status: table t's rows_acked is every acknowledged row ({want})", total == want, f"{total}")

    rc = d.stop(timeout=120)
    check("daemon stops cleanly", rc == 0, "\n".join(d.lines[-10:]))
    tidy(tmp)
    return plan()


if __name__ == "__main__":
    run_main(main, CHILDREN)
