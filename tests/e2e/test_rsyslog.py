#!/usr/bin/env python3
"""e2e: rsyslog from Debian forwards JSON over TCP into memwald, and LanceDB
reads every row it forwarded.

rsyslog's omfwd sends lines and never reads what comes back; against a
daemon answering OK it stalls once its receive buffer fills. memwald listens
twice here: `127.0.0.1:0 replies=none` for rsyslog and a plain listener for
this script's own connection (which must still get OK lines). rsyslogd runs
in the foreground with a private configuration: imptcp takes syslog lines
from this script, a jsonf template turns each into
{"seq":N, "host":..., "tag":..., "msg":...}, omfwd forwards it to memwald.
The script sends ROWS messages, waits (deadline) until memwald's
memwald_rows_ingested_total says every one was written, flushes, and reads
the table with LanceDB 0.39.0 through tools/read-table.mjs (the README's
reader, for any table and key): every seq, with host, tag and message
exactly as sent. rsyslogd comes from tools/install-deps.sh --test; without it the
test fails. Output is TAP.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util  # noqa: E402
from e2e_util import Client, Daemon, check, ctl, plan, poll, port_of, run_main, tidy  # noqa: E402

e2e_util.MEMWALD, e2e_util.MEMWALCTL = sys.argv[1], sys.argv[2]
HERE = os.path.dirname(os.path.abspath(__file__))
READ = os.path.join(HERE, "..", "..", "tools", "read-table.mjs")
ROWS = 20000
CHILDREN = []


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def ingested(sock):
    """memwald_rows_ingested_total{table="t"}, or -1."""
    rc, out, _ = ctl(sock, "metrics")
    for line in out.splitlines() if rc == 0 else []:
        if line.startswith('memwald_rows_ingested_total{table="t"} '):
            return int(float(line.split()[1]))
    return -1


def main():
    rsyslogd = shutil.which("rsyslogd") or ("/usr/sbin/rsyslogd" if os.path.exists("/usr/sbin/rsyslogd") else None)
    check("rsyslogd is installed (tools/install-deps.sh --test)", rsyslogd is not None)
    if not rsyslogd:
        return plan()
    tmp = tempfile.mkdtemp(prefix="memwald-e2e-rsyslog-")
    sock = os.path.join(tmp, "admin.sock")
    conf = os.path.join(tmp, "memwald.conf")
    with open(conf, "w") as f:
        f.write(f"""[daemon]
data_dir = {tmp}/db
admin_socket = {sock}
listen = 127.0.0.1:0 replies=none, 127.0.0.1:0
[table t]
uri = t.lance
create = true
schema = seq:int64 not null, host:string, tag:string, msg:string
primary_key = seq
""")
    d = Daemon(["-c", conf])
    CHILDREN.append(d.p)
    first = d.wait_line("listening on", 30)
    started = d.wait_line("started", 30)
    lines = [l for l in d.lines if "listening on" in l]
    check("memwald listens twice (replies=none for rsyslog, all for us)",
          first is not None and started is not None and len(lines) == 2, "\n".join(d.lines))
    if len(lines) != 2:
        d.stop()
        return plan()
    shipper_port, plain_port = port_of(lines[0]), port_of(lines[1])

    in_port = free_port()
    rconf = os.path.join(tmp, "rsyslog.conf")
    with open(rconf, "w") as f:
        f.write(f"""global(workDirectory="{tmp}")
module(load="imptcp")
input(type="imptcp" port="{in_port}" address="127.0.0.1")
template(name="mwjson" type="list" option.jsonf="on") {{
  property(outname="seq" name="$!seq" format="jsonf" datatype="number")
  property(outname="host" name="hostname" format="jsonf")
  property(outname="tag" name="programname" format="jsonf")
  property(outname="msg" name="msg" format="jsonf")
}}
set $!seq = re_extract($msg, "seq=([0-9]+)", 0, 1, "0");
action(type="omfwd" target="127.0.0.1" port="{shipper_port}" protocol="tcp" template="mwjson"
       TCP_Framing="traditional" queue.type="LinkedList" queue.size="200000"
       action.resumeRetryCount="-1" action.resumeInterval="1")
""")
    rlog = open(os.path.join(tmp, "rsyslogd.log"), "w")
    r = subprocess.Popen([rsyslogd, "-n", "-f", rconf, "-i", os.path.join(tmp, "rsyslogd.pid")],
                         stdout=rlog, stderr=subprocess.STDOUT)
    CHILDREN.append(r)

    def connect_in():
        try:
            return socket.create_connection(("127.0.0.1", in_port), timeout=5)
        except OSError:
            return None
    s = poll(connect_in, 30, interval=0.05)
    check("rsyslogd (foreground, private config) accepts syslog lines", s is not None,
          open(os.path.join(tmp, "rsyslogd.log")).read())
    if s is None:
        d.stop()
        return plan()
    sent = {}
    batch = []
    for i in range(1, ROWS + 1):
        msg = f"seq={i} user \"u{i % 97}\" logged in from 10.0.{i % 256}.{i % 7}"
        sent[i] = msg
        batch.append(f"<13>Dec  1 12:00:00 host{i % 3} app{i % 5}: {msg}\n")
        if len(batch) == 500:
            s.sendall("".join(batch).encode())
            batch = []
    s.sendall("".join(batch).encode())
    s.close()

    got = poll(lambda: ingested(sock) >= ROWS, 120, interval=0.2)
    n = ingested(sock)
    check(f"memwald wrote every one of the {ROWS} rows rsyslog forwarded", got and n == ROWS, f"ingested {n}")
    status_rc, status_out, _ = ctl(sock, "status")
    check("the shipper's connection is still open (never reset for the replies it does not read)",
          status_rc == 0 and "2 connection(s)" not in status_out and "1 connection(s)" in status_out,
          status_out[:300])

    c = Client(plain_port)
    c.send('{"seq":0,"host":"me","tag":"test","msg":"direct"}\nPING\n')
    got_plain = c.lines(2)
    check("the plain listener still answers OK (replies=all there)", got_plain == ["OK 1", "PONG"], got_plain)
    c.close()

    rc, out, err = ctl(sock, "flush")
    check("memwalctl flush", rc == 0, out + err)
    rr = subprocess.run(["node", READ, os.path.join(tmp, "db", "t.lance")], capture_output=True, text=True,
                        timeout=180)
    rows, order = {}, []
    for line in rr.stdout.splitlines():
        if line.startswith("{"):
            o = json.loads(line)
            rows[o["seq"]] = o
            order.append(o["seq"])
    bad = [i for i in range(1, ROWS + 1)
           if i not in rows or rows[i]["msg"] != " " + sent[i] or rows[i]["host"] != f"host{i % 3}"
           or rows[i]["tag"] != f"app{i % 5}"]
    check(f"LanceDB reads every forwarded row ({ROWS}), host, tag and message exactly as sent, "
          "sorted by the key", rr.returncode == 0 and not bad and len(rows) == ROWS + 1
          and order == sorted(order) and f'{{"rows": {ROWS + 1}}}'.replace(" ", "") in rr.stderr, rr.stderr[-2000:] + f"\nbad {bad[:5]}"
          + (f" e.g. {rows.get(bad[0])}" if bad else ""))

    r.send_signal(signal.SIGTERM)
    try:
        r.wait(30)
    except subprocess.TimeoutExpired:
        r.kill()
        r.wait()
    rc = d.stop()
    closed = [l for l in d.lines if " closed (" in l]
    check("memwald stops cleanly; the shipper's close is logged with its rows",
          rc == 0 and any(f"{ROWS} rows acknowledged" in l for l in closed), "\n".join(closed[-5:] or d.lines[-5:]))
    rlog.close()
    tidy(tmp)
    return plan()


if __name__ == "__main__":
    run_main(main, CHILDREN)
