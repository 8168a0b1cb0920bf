#!/usr/bin/env python3
"""e2e (issue 13): HTTP-level faults between memwald and S3, never
acknowledged, recovered from.

Run through tests/s3/with-s3.sh. memwald's table lives on the real S3
server, but its endpoint is tests/s3/fault_proxy.py, which forwards every
request and answer unchanged except those its rules pick. Three producer
connections stream upserts of fresh ids (one row per group, a PING after
each), so every row is exactly one of: acknowledged (OK), refused (an ERR
that says the rows were not written), unknown (an ERR saying the outcome is
unknown, or no answer before the connection ended). Phases, each injecting
into WAL puts (PUT .../wal/...) while producers stream, and waiting (with a
deadline) until the rules were used and acknowledgements flow again:

  503          five WAL PUTs answered 503 SlowDown: retried with backoff
  drop_body    three WAL PUTs cut off after half their body: retried
  lose_answer  three WAL PUTs applied but their answer lost: the retry meets
               412, reads the entry back, finds its own bytes: created
  stall        two WAL PUTs held past the request timeout: retried
  race412      a "peer" creates the WAL slot first (here with the same
               bytes): the create meets 412 at its first attempt (not
               ambiguous: -EEXIST), the WAL writer finds the slot taken
               and moves on to the next free position (memwal.md §2), and
               the rows are acknowledged only once their entry landed there
  sstable-503  SSTable and manifest PUTs answered 503 during flushes

At the end the shard must be ACTIVE, a flush commits, and LanceDB 0.39.0,
reading straight from the server (not through the proxy), has every
acknowledged row with its value, no refused row, and nothing that was never
sent. TAP output.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "s3"))
import e2e_util  # noqa: E402
from e2e_util import Client, Daemon, check, ctl_json, plan, poll, port_of  # noqa: E402
from fault_proxy import FaultProxy  # noqa: E402

e2e_util.MEMWALD, e2e_util.MEMWALCTL = sys.argv[1], sys.argv[2]
SRC = os.environ.get("MW_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
READ_ROWS = os.path.join(SRC, "tests", "e2e", "read_rows.mjs")


from s3_util import drop_bucket, s3  # noqa: E402,F401


class Producer(threading.Thread):
    def __init__(self, port, base):
        super().__init__(daemon=True)
        self.port, self.next_id = port, base
        self.acked, self.refused, self.unknown = {}, set(), set()
        self.stop = threading.Event()
        self.error = None

    def run(self):
        try:
            c = Client(self.port, timeout=120)
            c.send("USE t\n")
            while not self.stop.is_set():
                i = self.next_id
                self.next_id += 1
                c.send(json.dumps({"id": i, "v": i * 3}) + "\nPING\n")
                self.unknown.add(i)
                r = c.reply()
                while r != "PONG":
                    if r.startswith("OK 1"):
                        self.acked[i] = i * 3
                        self.unknown.discard(i)
                    elif r.startswith("ERR "):
                        if "unknown" not in r:
                            self.refused.add(i)
                            self.unknown.discard(i)
                    else:
                        raise RuntimeError("unexpected reply " + r)
                    r = c.reply()
                if i in self.refused:
                    self.stop.wait(0.05)  # do not spin on a shard recovering
            c.close()
        except Exception as e:  # reported by the main thread
            self.error = repr(e)


def main():
    if not os.environ.get("MW_S3_ENDPOINT"):
        check("an S3 endpoint (run through tests/s3/with-s3.sh)", False)
        return plan()
    m = re.match(r"http://([^:/]+):(\d+)", os.environ["MW_S3_ENDPOINT"])
    proxy = FaultProxy(m.group(1), int(m.group(2)))
    work = tempfile.mkdtemp(prefix="memwald-e2e-s3f-")
    bucket = f"mw-faults-{os.getpid()}"
    check("bucket created", s3("PUT", "/" + bucket) == 200)
    conf = os.path.join(work, "memwald.conf")
    sock = os.path.join(work, "admin.sock")
    with open(conf, "w") as f:
        f.write(f"""[daemon]
log_level = info
data_dir = {work}/data
admin_socket = {sock}
listen = 127.0.0.1:0
[storage]
s3_request_timeout_ms = 1500
s3_retry_deadline_ms = 6000
[table t]
uri = s3://{bucket}/db/t.lance
s3_endpoint = http://127.0.0.1:{proxy.port}
s3_allow_http = true
create = true
schema = id:int64 not null, v:int64
primary_key = id
spec = unsharded
claim = eager
max_memtable_age_ms = 700
max_fault_retry_interval_ms = 2000
""")
    d = Daemon(["-c", conf], env=dict(os.environ))
    prods = []
    rc = 1
    try:
        line = d.wait_line("listening on", 60)
        check("memwald starts on S3 through the fault proxy", line and d.wait_line("started", 60),
              "\n".join(d.lines[-20:]))
        if not line:
            return plan()
        st = lambda: ctl_json(sock, "status")[1].get("result", {})  # noqa: E731
        shard = lambda: st()["tables"][0]["shards"][0]  # noqa: E731
        check("shard ACTIVE", poll(lambda: shard()["state"] == "ACTIVE", 30))
        prods = [Producer(port_of(line), 1_000_000 * (k + 1)) for k in range(3)]
        for p in prods:
            p.start()
        acked = lambda: sum(len(p.acked) for p in prods)  # noqa: E731
        check("rows are acknowledged", poll(lambda: acked() > 50, 30))
        phases = [("503", dict(method="PUT", path=r"/wal/", count=5)),
                  ("drop_body", dict(method="PUT", path=r"/wal/", count=3)),
                  ("lose_answer", dict(method="PUT", path=r"/wal/", count=3)),
                  ("stall", dict(method="PUT", path=r"/wal/", count=2, stall_s=3.0)),
                  ("race412", dict(method="PUT", path=r"/wal/", count=1)),
                  ("503", dict(method="PUT", path=r"(_gen_|/manifest/)", count=6))]
        for name, rule in phases:
            before = dict(proxy.hits)
            proxy.add(name, **rule)
            used = poll(lambda: proxy.pending() == 0, 60)
            n0 = acked()
            flowing = poll(lambda: acked() > n0 + 30 and shard()["state"] == "ACTIVE", 60)
            check(f"[{name}{' sstable/manifest' if '_gen_' in rule.get('path', '') else ''}] "
                  f"{rule['count']} injected ({proxy.hits.get(name, 0) - before.get(name, 0)} hit), "
                  f"shard ACTIVE and acknowledging again", used and flowing,
                  json.dumps(shard()) + "\n" + "\n".join(d.lines[-25:]))
            proxy.clear()
        for p in prods:
            p.stop.set()
        for p in prods:
            p.join(60)
        check("producers saw only OK/ERR/PONG", all(p.error is None for p in prods),
              "\n".join(str(p.error) for p in prods))
        check("the retried create whose answer was lost was recognised as ours",
              d.wait_line("a retried create had landed", 1) is not None, "\n".join(d.lines[-40:]))
        rcf, _, out = ctl_json(sock, "flush", "t")
        check("final flush", rcf == 0, out)
        stop_rc = d.stop()
        check("memwald stops cleanly (exit 0)", stop_rc == 0, "\n".join(d.lines[-20:]))
        all_acked, refused, unknown = {}, set(), set()
        for p in prods:
            all_acked.update(p.acked)
            refused |= p.refused
            unknown |= p.unknown
        r = subprocess.run(["node", READ_ROWS, f"s3://{bucket}/db"], capture_output=True, text=True,
                           timeout=180)
        got = {}
        for ln in r.stdout.splitlines():
            o = json.loads(ln)
            got[o["id"]] = o["v"]
        missing = sorted(set(all_acked) - set(got))
        wrong = [i for i in all_acked if i in got and got[i] != all_acked[i]]
        back = sorted(refused & set(got))
        extra = sorted(set(got) - set(all_acked) - unknown)
        print(f"# {len(all_acked)} acknowledged, {len(refused)} refused, {len(unknown)} unknown; "
              f"LanceDB reads {len(got)}; proxy hits {proxy.hits}, {proxy.requests} requests")
        check("LanceDB reads every acknowledged row (values too), no refused row, nothing unsent",
              r.returncode == 0 and not missing and not wrong and not back and not extra,
              r.stderr[-1500:] + f" missing={missing[:10]} wrong={wrong[:10]} refused-present={back[:10]} "
              f"extra={extra[:10]}")
        e2e_util.inspect_under(f"s3://{bucket}/db/t.lance")  # every object decodes, verify passes, on S3
        rc = plan()
    finally:
        for p in prods:
            p.stop.set()
        if d.p.poll() is None:
            d.p.kill()
        proxy.close()
    if rc == 0:
        shutil.rmtree(work, ignore_errors=True)
        drop_bucket(bucket)
    else:
        print(f"# kept {work} and bucket {bucket}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
