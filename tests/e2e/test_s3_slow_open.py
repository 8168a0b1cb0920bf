#!/usr/bin/env python3
"""e2e (issue 13): opening a table on a slow S3 holds up no other table.

Run through tests/s3/with-s3.sh. Opening a table on S3 is about ten
requests (drop marker, _versions/ list, manifest head and get, owner
records...), each up to s3_retry_deadline_ms on a bad day. memwald does that
blocking half on a thread of its own per table (daemon/tables.c), so:

  start-up   two tables, a and b, behind tests/s3/fault_proxy.py with a
             "hold" rule on both: requests of BOTH tables reach the proxy
             and are held at the same time (a start-up that opened one table
             after the other would send b's first request only once a's
             open finished). Released, both open; rows written to each are
             acknowledged and LanceDB 0.39.0 reads them.

  SIGHUP     a third table, c, added by a reload while a and b serve, with
             c's requests held: rows written to a are acknowledged while c's
             open is still held (a reload that opened c on the loop's thread
             would answer nobody until c's open ended, and then c would have
             failed on its held requests); released, c opens and serves.

  removal   a fourth table, d, added by a reload (its requests held), then
             removed by the next reload while it is still opening: the
             removal waits for the open (it is not reported done while d's
             requests are held; b keeps acknowledging), and once released
             the open is thrown away — d is never served (status does not
             list it, a producer's USE d is refused) — and the removal
             completes. d added back afterwards opens and serves: nothing
             half-registered was left under its name.

At the end memwal-inspect decodes and verifies the four tables on S3.

The hold is the proxy's: a request waits until the test releases it — no
clock stands in for the slowness. TAP output.
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "s3"))
import e2e_util  # noqa: E402
from e2e_util import Client, Daemon, check, ctl_json, plan, poll, port_of, tidy  # noqa: E402
from fault_proxy import FaultProxy  # noqa: E402

e2e_util.MEMWALD, e2e_util.MEMWALCTL = sys.argv[1], sys.argv[2]
SRC = os.environ.get("MW_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
READ_ROWS = os.path.join(SRC, "tests", "e2e", "read_rows.mjs")


from s3_util import drop_bucket, s3  # noqa: E402,F401


def table_section(name, bucket, proxy_port):
    return f"""[table {name}]
uri = s3://{bucket}/db/{name}.lance
s3_endpoint = http://127.0.0.1:{proxy_port}
s3_allow_http = true
create = true
schema = id:int64 not null, v:int64
primary_key = id
spec = unsharded
claim = eager
"""


def write_rows(port, table, ids):
    """Upsert ids into table on one connection: the number acknowledged."""
    c = Client(port, timeout=60)
    c.send(f"USE {table}\n" + "".join(json.dumps({"id": i, "v": i * 7}) + "\n" for i in ids) + "SYNC\n")
    acked = 0
    while True:
        r = c.reply()
        if r.startswith("OK "):
            acked += int(r.split()[1])
        elif r.startswith("SYNC"):
            break
        else:
            raise RuntimeError(f"{table}: unexpected reply {r}")
    c.close()
    return acked


def use_refused(port, table):
    """USE table on a new connection: the daemon's reply to it."""
    c = Client(port, timeout=60)
    c.send(f"USE {table}\n" + json.dumps({"id": 1, "v": 7}) + "\nSYNC\n")
    replies = []
    while True:
        r = c.reply()
        replies.append(r)
        if r.startswith("SYNC") or len(replies) > 4:
            break
    c.close()
    return replies


def main():
    if not os.environ.get("MW_S3_ENDPOINT"):
        check("an S3 endpoint (run through tests/s3/with-s3.sh)", False)
        return plan()
    m = re.match(r"http://([^:/]+):(\d+)", os.environ["MW_S3_ENDPOINT"])
    proxy = FaultProxy(m.group(1), int(m.group(2)))
    work = tempfile.mkdtemp(prefix="memwald-e2e-s3slow-")
    bucket = f"mw-slowopen-{os.getpid()}"
    check("bucket created", s3("PUT", "/" + bucket) == 200)
    conf = os.path.join(work, "memwald.conf")
    sock = os.path.join(work, "admin.sock")
    with open(conf, "w") as f:
        f.write(f"""[daemon]
log_level = info
data_dir = {work}/data
admin_socket = {sock}
listen = 127.0.0.1:0
""" + table_section("a", bucket, proxy.port) + table_section("b", bucket, proxy.port))
    proxy.add("hold", path=rf"/{bucket}/", count=1_000_000)
    d = Daemon(["-c", conf], env=dict(os.environ))
    try:
        def held_tables():
            return {t for p in proxy.held() for t in ("a", "b") if f"/db/{t}.lance" in p or
                    f"prefix=db%2F{t}.lance" in p or f"prefix=db/{t}.lance" in p}
        both = poll(lambda: held_tables() == {"a", "b"}, 60)
        check("start-up: requests of both tables are held by the slow server at once (opened side by side)",
              both, f"held {proxy.held()[:6]}\n" + "\n".join(d.lines[-20:]))
        check("start-up: nothing is served while every table is still opening",
              not any("listening on" in ln for ln in d.lines), "\n".join(d.lines[-10:]))
        proxy.release()
        line = d.wait_line("listening on", 60)
        check("released: both tables open and memwald starts", line is not None and d.wait_line("started", 60)
              and all(d.wait_line(f"table {t}: open at", 1) for t in ("a", "b")), "\n".join(d.lines[-20:]))
        if line is None:
            return plan()
        port = port_of(line)
        acked = {t: write_rows(port, t, range(k * 1000, k * 1000 + 200)) for k, t in enumerate(("a", "b"))}
        check("rows written to each table are acknowledged", acked == {"a": 200, "b": 200}, str(acked))
        # SIGHUP: c added while a and b serve, c's requests held
        with open(conf, "a") as f:
            f.write(table_section("c", bucket, proxy.port))
        proxy.clear()
        proxy.rearm()
        proxy.add("hold", path=r"c\.lance", count=1_000_000)
        os.kill(d.p.pid, signal.SIGHUP)
        held_c = poll(lambda: any("c.lance" in p for p in proxy.held()), 60)
        check("SIGHUP: the reload opens [table c], whose requests the slow server holds", held_c,
              "\n".join(d.lines[-10:]))
        acked_a = write_rows(port, "a", range(5000, 5200))
        c_lines = [ln for ln in d.lines if "[table c]" in ln and ("added" in ln or "not opened" in ln)]
        check("while c's open is held, rows written to a are acknowledged (c still opening, not failed)",
              acked_a == 200 and not c_lines, f"acked {acked_a}, {c_lines}")
        proxy.release()
        added = d.wait_line("reload: [table c] added", 60)
        check("released: c opens and is added", added is not None, "\n".join(d.lines[-10:]))
        acked["c"] = write_rows(port, "c", range(2000, 2200))
        check("rows written to c are acknowledged", acked["c"] == 200, str(acked))
        # SIGHUP: d added, its open held; the next SIGHUP removes d while it opens
        without_d = open(conf).read()
        with open(conf, "a") as f:
            f.write(table_section("d", bucket, proxy.port))
        proxy.clear()
        proxy.rearm()
        proxy.add("hold", path=r"d\.lance", count=1_000_000)
        os.kill(d.p.pid, signal.SIGHUP)
        held_d = poll(lambda: any("d.lance" in p for p in proxy.held()), 60)
        check("SIGHUP: the reload opens [table d], whose requests the slow server holds", held_d,
              "\n".join(d.lines[-10:]))
        with open(conf, "w") as f:
            f.write(without_d)
        os.kill(d.p.pid, signal.SIGHUP)
        cancelled = d.wait_line("table d: removed while opening", 60)
        check("SIGHUP: [table d] removed while it opens: the open is cancelled", cancelled is not None,
              "\n".join(d.lines[-10:]))
        acked_b = write_rows(port, "b", range(6000, 6100))
        early = [ln for ln in d.lines if "released and closed [table d]" in ln or "[table d] added" in ln]
        check("the removal waits for the held open (not reported done meanwhile); b acknowledges",
              acked_b == 100 and not early, f"acked {acked_b}, {early}")
        proxy.release()
        not_served = d.wait_line("reload: [table d] not served", 60)
        closed = d.wait_line("released and closed [table d]", 60)
        check("released: d's open is thrown away ('not served'), then the removal completes",
              not_served is not None and closed is not None, "\n".join(d.lines[-10:]))
        rc, st, out = ctl_json(sock, "status")
        res = st.get("result", {}) if isinstance(st, dict) else {}
        names = [t.get("name") for t in res.get("tables", [])]
        check("status lists a, b and c, not d", rc == 0 and sorted(names) == ["a", "b", "c"], f"{names} {out}")
        replies = use_refused(port, "d")
        check("a producer's USE d is refused: unknown table", any("unknown table" in r for r in replies),
              str(replies))
        # d back: the name was left free
        with open(conf, "a") as f:
            f.write(table_section("d", bucket, proxy.port))
        proxy.clear()
        os.kill(d.p.pid, signal.SIGHUP)
        re_added = d.wait_line("reload: [table d] added", 60)
        acked["d"] = write_rows(port, "d", range(3000, 3100)) if re_added else 0
        check("d added back opens, and rows written to it are acknowledged", acked["d"] == 100,
              "\n".join(d.lines[-10:]))
        rc, _, out = ctl_json(sock, "flush", "a")
        check("flush a", rc == 0, out)
        stop_rc = d.stop()
        check("memwald stops cleanly (exit 0)", stop_rc == 0, "\n".join(d.lines[-20:]))
        got, errs = {}, ""
        for t in ("a", "b", "c", "d"):
            r = subprocess.run(["node", READ_ROWS, f"s3://{bucket}/db", t], capture_output=True, text=True,
                               timeout=180)
            errs += r.stderr[-800:] if r.returncode != 0 else ""
            got[t] = {int(o["id"]): int(o["v"]) for o in map(json.loads, r.stdout.splitlines())}
        want = {t: {i: i * 7 for i in range(k * 1000, k * 1000 + 200)} for k, t in enumerate(("a", "b", "c"))}
        want["a"].update({i: i * 7 for i in range(5000, 5200)})
        want["b"].update({i: i * 7 for i in range(6000, 6100)})
        want["d"] = {i: i * 7 for i in range(3000, 3100)}
        check("LanceDB 0.39.0 reads every acknowledged row of the four tables from S3", not errs and got == want,
              errs + f" got {[(t, len(v)) for t, v in got.items()]}")
        for t in ("a", "b", "c", "d"):  # every object decodes, verify passes, on S3
            e2e_util.inspect_under(f"s3://{bucket}/db/{t}.lance")
    finally:
        proxy.release()
        if d.p.poll() is None:
            d.p.kill()
        proxy.close()
        drop_bucket(bucket)
        tidy(work)
    return plan()


if __name__ == "__main__":
    sys.exit(main())
