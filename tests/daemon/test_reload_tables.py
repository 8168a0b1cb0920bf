#!/usr/bin/env python3
"""e2e: SIGHUP adds and removes [table] sections without a restart.

Through the real daemon: a section added to the file is opened on SIGHUP
(created, since create = true) and takes rows at once; a section removed is
released (its MemTables flushed) and closed: a connection that had selected
it gets ERR table naming the removal, `USE` of it ERR table, status no
longer lists it, and LanceDB reads every row it had acknowledged. A rename
(one section out, one in) removes first, then adds; a changed section is
reported as needing a restart; a file that does not load changes nothing.
Synchronisation by log lines and replies with deadlines. Output is TAP.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))  # e2e_util
import e2e_util  # noqa: E402
from e2e_util import Client, Daemon, check, ctl_json, plan, port_of, run_main, tidy  # noqa: E402

e2e_util.MEMWALD, e2e_util.MEMWALCTL = sys.argv[1], sys.argv[2]
READ = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "read-table.mjs")
CHILDREN = []


def section(name, extra=""):
    return f"""[table {name}]
uri = {name}.lance
create = true
schema = id:int64 not null, v:string
primary_key = id
{extra}"""


def main():
    tmp = tempfile.mkdtemp(prefix="memwald-e2e-reload-")
    sock = os.path.join(tmp, "admin.sock")
    conf = os.path.join(tmp, "memwald.conf")
    head = f"[daemon]\ndata_dir = {tmp}/data\nadmin_socket = {sock}\nlisten = 127.0.0.1:0\n"

    def write(*sections):
        with open(conf, "w") as f:
            f.write(head + "".join(sections))

    def tables():
        rc, j, _ = ctl_json(sock, "status")
        return sorted(t["name"] for t in j["result"]["tables"]) if rc == 0 else None

    def rows(c, table, ids):
        c.send(f"USE {table}\n" + "".join('{"id":%d,"v":"%s-%d"}\n' % (i, table, i) for i in ids) + "SYNC\n")
        return c.lines_until(lambda l: l.startswith("SYNC") or l.startswith("ERR"), timeout=30)

    write(section("a"))
    d = Daemon(["-c", conf])
    CHILDREN.append(d.p)
    line = d.wait_line("listening on", 30)
    check("daemon starts with [table a]", line is not None and d.wait_line("started", 30) is not None,
          "\n".join(d.lines))
    if line is None:
        return plan()
    port = port_of(line)
    c = Client(port)
    got = rows(c, "a", range(100))
    check("a: 100 rows acknowledged", got[-1] == "SYNC 100", got[-2:])

    write(section("a"), section("b"))
    d.p.send_signal(signal.SIGHUP)
    added = d.wait_line("reload: [table b] added", 30)
    b = Client(port)
    got = rows(b, "b", range(50))
    check("SIGHUP with [table b] added: opened (created) and takes rows, status lists it",
          added is not None and got[-1] == "SYNC 50" and tables() == ["a", "b"], (added, got[-2:], tables()))

    write(section("b"))
    d.p.send_signal(signal.SIGHUP)
    gone = d.wait_line("reload: released and closed [table a]", 60)
    check("SIGHUP with [table a] removed: released and closed, status no longer lists it",
          gone is not None and tables() == ["b"], "\n".join(d.lines[-8:]))
    c.send('{"id":500,"v":"late"}\nPING\n')
    got = c.lines(2)
    check("a connection that had selected it: ERR table naming the removal, then PONG",
          got[0] is not None and got[0].startswith("ERR 103 table ") and "removed from the configuration"
          in got[0] and got[1] == "PONG", got)
    c.send("USE a\nPING\n")
    got = c.lines(2)
    check("USE a -> ERR table unknown table", got[0] is not None and 'unknown table "a"' in got[0] and got[1] == "PONG",
          got)
    r = subprocess.run(["node", READ, os.path.join(tmp, "data", "a.lance")], capture_output=True, text=True,
                       timeout=180)
    ids = sorted(json.loads(l)["id"] for l in r.stdout.splitlines() if l.startswith("{"))
    check("LanceDB reads every row [table a] acknowledged (the release flushed them)",
          r.returncode == 0 and ids == list(range(100)), r.stderr[-1000:] + f" got {len(ids)} ids")

    write(section("c"))
    n_before = len(d.lines)
    d.p.send_signal(signal.SIGHUP)
    added = d.wait_line("reload: [table c] added", 60)
    later = d.lines[n_before:]
    order = [i for i, l in enumerate(later) if "released and closed [table b]" in l or "[table c] added" in l]
    check("a rename (b out, c in in one reload): b released first, then c opened",
          added is not None and len(order) == 2 and "[table b]" in later[order[0]] and tables() == ["c"],
          "\n".join(later[-8:]))
    got = rows(b, "c", range(10))
    check("c takes rows; b's connection can switch to it", got == ["OK 10", "SYNC 60"], got)

    write(section("c", "max_memtable_rows = 5000\n"))
    d.p.send_signal(signal.SIGHUP)
    warn = d.wait_line("reload: [table c] changed", 30)
    check("a changed section: reported as taking effect after a restart", warn is not None, "\n".join(d.lines[-5:]))
    with open(conf, "a") as f:
        f.write("bogus = 1\n")
    d.p.send_signal(signal.SIGHUP)
    bad = d.wait_line("reload failed", 30)
    check("a file that does not load: reported, tables unchanged", bad is not None and tables() == ["c"],
          "\n".join(d.lines[-5:]))
    c.close()
    b.close()
    rc = d.stop()
    check("daemon stops cleanly", rc == 0, "\n".join(d.lines[-8:]))
    tidy(tmp)
    return plan()


if __name__ == "__main__":
    run_main(main, CHILDREN)
