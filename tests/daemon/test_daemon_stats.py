#!/usr/bin/env python3
"""e2e: the daemon's periodic reports (src/daemon/stats.h).

stats_log_interval_ms = 1000 gives one line per table a second (shards by
state, rows acknowledged and since the last line); a table with
stats_log_interval_ms = 0 gives none; memwald_table_disk_bytes{table} is the
table's size on disk (compared with du's count of the same blocks); with
storage delayed by fault injection and a 1 MiB unflushed limit, writes wait
on backpressure and backpressure_log_interval_ms = 300 repeats a warning
naming the shard while that lasts. Synchronisation by log lines and metrics
with deadlines. Output is TAP.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))  # e2e_util
import e2e_util  # noqa: E402
from e2e_util import Client, Daemon, check, ctl, plan, poll, port_of, run_main, tidy  # noqa: E402

e2e_util.MEMWALD, e2e_util.MEMWALCTL = sys.argv[1], sys.argv[2]
CHILDREN = []


def metric(sock, name, table):
    rc, out, _ = ctl(sock, "metrics")
    m = re.search(r'^%s\{table="%s"\} (\S+)$' % (name, table), out, re.M) if rc == 0 else None
    return float(m.group(1)) if m else None


def main():
    tmp = tempfile.mkdtemp(prefix="memwald-e2e-stats-")
    sock = os.path.join(tmp, "admin.sock")
    conf = os.path.join(tmp, "memwald.conf")
    with open(conf, "w") as f:
        f.write(f"""[daemon]
data_dir = {tmp}/data
admin_socket = {sock}
listen = 127.0.0.1:0
[table t]
uri = t.lance
create = true
schema = id:int64 not null, pad:string
primary_key = id
stats_log_interval_ms = 1000
backpressure_log_interval_ms = 300
max_memtable_size = 64KiB
max_unflushed_memtable_bytes = 1MiB
[table quiet]
uri = quiet.lance
create = true
schema = id:int64 not null
primary_key = id
stats_log_interval_ms = 0
""")
    d = Daemon(["-c", conf], env=dict(os.environ, MEMWALD_TEST_FAULTS="1"))
    CHILDREN.append(d.p)
    line = d.wait_line("listening on", 30)
    check("daemon starts", line is not None and d.wait_line("started", 30) is not None, "\n".join(d.lines))
    if line is None:
        return plan()
    c = Client(port_of(line), timeout=60)
    c.send("USE t\n" + "".join('{"id":%d,"pad":"%s"}\n' % (i, "x" * 100) for i in range(200)) + "SYNC\n")
    got = c.lines_until(lambda l: l.startswith("SYNC"), timeout=60)
    check("200 rows acknowledged", got and got[-1] == "SYNC 200", got[-3:])
    stat = d.wait_line("table t: 1 shards (1 ACTIVE)", 10)
    check("stats_log_interval_ms = 1000: a line with shards by state and rows acknowledged",
          stat is not None and "200 rows acked" in stat, "\n".join(d.lines[-10:]))
    check("stats_log_interval_ms = 0: no line for that table",
          not [l for l in d.lines if re.search(r"table quiet: \d+ shards \(", l)], "\n".join(d.lines[-10:]))

    rc, out, err = ctl(sock, "flush")

    def du():
        r = subprocess.run(["du", "-s", "-B1", os.path.join(tmp, "data", "t.lance")], capture_output=True, text=True)
        return int(r.stdout.split()[0]) if r.returncode == 0 else -1
    # nothing writes now: within a few walks (one per second here) the
    # gauge equals du's count of the same blocks
    same = poll(lambda: metric(sock, "memwald_table_disk_bytes", "t") == du() > 0, 20, interval=0.25)
    check("memwald_table_disk_bytes{table=\"t\"}: the table's blocks on disk, as du counts them",
          rc == 0 and same, f"gauge {metric(sock, 'memwald_table_disk_bytes', 't')} du {du()}")

    # backpressure: every storage operation 1.5 s late, rows until writes wait
    rc, out, err = ctl(sock, "fault", "t", "set", "delay_ms=1500")
    check("fault set delay_ms=1500 (MEMWALD_TEST_FAULTS=1)", rc == 0, out + err)
    stop = threading.Event()

    def stream():
        i = 1000
        try:
            while not stop.is_set():
                c.s.sendall("".join('{"id":%d,"pad":"%s"}\n' % (i + k, "y" * 1000) for k in range(100)).encode())
                i += 100
        except OSError:
            pass
    t = threading.Thread(target=stream, daemon=True)
    t.start()
    first = d.wait_line("table t: writes of 1 shard(s) wait on backpressure", 60)
    seen = poll(lambda: len([l for l in d.lines if "wait on backpressure" in l and "table t:" in l]) >= 2, 10)
    stop.set()
    check("backpressure_log_interval_ms: a warning naming the shard, repeated while it lasts",
          first is not None and "unsharded" in first and seen, "\n".join(d.lines[-10:]))
    ctl(sock, "fault", "t", "clear")
    c.s.shutdown(1)
    t.join(30)
    c.close()
    rc = d.stop(timeout=120)
    check("daemon stops cleanly", rc == 0, "\n".join(d.lines[-10:]))
    tidy(tmp)
    return plan()


if __name__ == "__main__":
    run_main(main, CHILDREN)
