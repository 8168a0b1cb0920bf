#!/usr/bin/env python3
"""e2e (issue 6): storage faults injected into the real memwald at run time.

memwald runs with MEMWALD_TEST_FAULTS=1 on a fresh unsharded table, with
max_fault_retry_interval_ms = 2000 (the self-recovery bound under test) and
max_memtable_age_ms = 500 (flushes happen by themselves while producers
stream). Three producer connections stream upserts of fresh ids the whole
time; every row is accounted exactly once (an `OK n` or an `ERR`, with the
time it was sent and answered). Phases, each with `memwalctl fault`:

  wal-eio     WAL puts fail (EIO at the write step): the shard parks FAILED,
              no row sent after the fault was set is acknowledged while it
              holds (each ERR counted), status shows the fault (op, errno,
              retries, next retry) and the storage health, /metrics shows
              memwald_storage_errors_total{op="put_if_absent",errno="EIO"} and
              memwald_shards{state="FAILED"} 1; memwalctl status prints the
              reason; fault cleared -> ACTIVE again (status polled with a
              deadline) within the bound, without a restart.
  wal-enospc  the same with ENOSPC.
  sstable     SSTable puts fail (rename step under the shard directory):
              the shard stays ACTIVE (rows are durable in the WAL, so they
              are acknowledged), status shows a flush fault,
              memwald_flush_failures_total grows; cleared -> a flush commits
              within the bound.
  manifest    shard manifest commits fail (link step under manifest/): the
              same for the flush's manifest commit.
  delay       every storage operation 300 ms late: nothing fails, acks wait.
  fsync-once  one failed fsync: retried, nothing refused.

At the end: a flush, and LanceDB 0.39.0 (tests/e2e/read_rows.mjs) must read
exactly the acknowledged ids, with their values. Also: the `fault` command is
refused without MEMWALD_TEST_FAULTS=1, and an identity-sharded table's
shards show `identity-<value>` in status (routed rows, an admin claim; a
long value cut and flagged). No sleeps for synchronisation: every wait polls
a condition with a deadline. TAP output.
"""
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util  # noqa: E402
from e2e_util import Client, Daemon, check, ctl, ctl_json, poll, port_of, results  # noqa: E402

e2e_util.MEMWALD, e2e_util.MEMWALCTL = sys.argv[1], sys.argv[2]
SRC = os.environ.get("MW_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
READ_ROWS = os.path.join(SRC, "tests", "e2e", "read_rows.mjs")
BOUND_MS = 2000
recovery_ms = {}
DAEMON = [None]  # the running e2e_util.Daemon, for the report if the test dies


class Producer(threading.Thread):
    """One connection: rounds of ROWS fresh ids + PING; each row ends up in
    self.acked (id -> (sent, answered)) or self.failed (id -> (sent, answered,
    message))."""

    ROWS = 20

    def __init__(self, port, base):
        super().__init__(daemon=True)
        self.c = Client(port, timeout=60)
        self.next_id = base
        self.c.send("USE t\n")  # two tables: no default table
        self.line = 1
        self.acked, self.failed = {}, {}
        self.stop = threading.Event()
        self.error = None

    def run(self):
        try:
            while not self.stop.is_set():
                rows = []  # (line, id)
                text = []
                for _ in range(self.ROWS):
                    self.line += 1
                    rows.append((self.line, self.next_id))
                    text.append(json.dumps({"id": self.next_id, "v": self.next_id * 3}))
                    self.next_id += 1
                self.line += 1  # PING
                sent = time.monotonic()
                self.c.send("\n".join(text) + "\nPING\n")
                pending = list(rows)
                while True:
                    r = self.c.reply()
                    now = time.monotonic()
                    if r == "PONG":
                        break
                    if r.startswith("OK "):
                        n = int(r.split()[1])
                        for line, rid in pending[:n]:
                            self.acked[rid] = (sent, now)
                        pending = pending[n:]
                    elif r.startswith("ERR "):
                        m = re.search(r"\(lines (\d+)-(\d+)\)", r)
                        a, b = (int(m.group(1)), int(m.group(2))) if m else (int(r.split()[1]),) * 2
                        keep = []
                        for line, rid in pending:
                            if a <= line <= b:
                                self.failed[rid] = (sent, now, r)
                            else:
                                keep.append((line, rid))
                        pending = keep
                    else:
                        raise RuntimeError("unexpected reply " + r)
                if pending:
                    raise RuntimeError(f"{len(pending)} rows neither OK nor ERR")
                if self.failed and self.failed.get(self.next_id - 1):
                    self.stop.wait(0.02)  # refused: do not spin on a FAILED shard
        except Exception as e:  # reported by the main thread
            self.error = repr(e)


def status(sock):
    rc, j, err = ctl_json(sock, "status")
    assert rc == 0, err
    return j["result"]


def shard(st):
    return st["tables"][0]["shards"][0]


def metrics(sock):
    rc, out, err = ctl(sock, "metrics")
    return out + err


def metric_value(text, name, labels):
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            if all(f'{k}="{v}"' in line for k, v in labels.items()):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def all_acked(prods):
    out = {}
    for p in prods:
        out.update(p.acked)
    return out


def all_failed(prods):
    out = {}
    for p in prods:
        out.update(p.failed)
    return out


def acks_between(prods, t0, t1):
    """Rows sent after t0 and acknowledged before t1."""
    return [rid for p in prods for rid, (sent, ans) in list(p.acked.items()) if sent > t0 and ans < t1]


def wal_phase(sock, prods, errno):
    name = f"wal-{errno.lower()}"
    fails0 = len(all_failed(prods))
    rc, _, out = ctl_json(sock, "fault", "t", "set", f"target=wal,shard=unsharded,steps=write,errno={errno}")
    check(f"[{name}] fault set accepted", rc == 0, out)
    t_set = time.monotonic()
    st = poll(lambda: (lambda s: s if shard(s)["state"] == "FAILED" else None)(status(sock)), 15)
    check(f"[{name}] the shard parks FAILED", st is not None)
    if st is None:
        return
    f = shard(st).get("fault", {})
    check(f"[{name}] status shows the fault (op wal, errno, retries, next retry, error)",
          f.get("op") == "wal" and f.get("errno") == errno and "retries" in f and
          f.get("next_retry_ms", -2) >= -1 and errno in shard(st).get("reason", ""), json.dumps(shard(st)))
    health = st.get("storage", [{}])[0]
    check(f"[{name}] status shows the storage health", health.get("ops_failed", 0) > 0 and
          health.get("last_error") == errno and "fault_injected" in health, json.dumps(health))
    # let producers hit the FAILED shard (and the engine fail a re-claim) for a while
    got_err = poll(lambda: len(all_failed(prods)) > fails0 + 3, 10)
    check(f"[{name}] writes get ERR while the fault holds", got_err,
          f"{len(all_failed(prods)) - fails0} ERRs")
    some = [v[2] for v in all_failed(prods).values()][-1:]
    check(f"[{name}] the ERR names the storage error and the retry", some and errno in some[0]
          and "retrying" in some[0], some)
    if some:
        print("# sample: " + some[0][:300])
    check(f"[{name}] status: the fault episode counts a retry",
          poll(lambda: shard(status(sock)).get("fault", {}).get("retries", 0) >= 1, 10),
          json.dumps(shard(status(sock)).get("fault")))
    print("# status fault: " + json.dumps(shard(status(sock)).get("fault"))[:300])
    m = metrics(sock)
    check(f"[{name}] /metrics: storage errors by op and errno, shards by state",
          metric_value(m, "memwald_storage_errors_total", {"op": "put_if_absent", "errno": errno}) > 0
          and metric_value(m, "memwald_shards", {"state": "FAILED"}) + metric_value(
              m, "memwald_shards", {"state": "CLAIMING"}) >= 1,
          "\n".join(l for l in m.splitlines() if "storage_errors" in l or "memwald_shards" in l))
    rc, out, err = ctl(sock, "status")
    text = out + err
    check(f"[{name}] memwalctl status prints the reason and the fault",
          rc == 0 and "fault: " in text and errno in text, text)
    rec0 = metric_value(m, "memwald_shard_recoveries_total", {"kind": "reclaim"})
    t_clearing = time.monotonic()
    ctl_json(sock, "fault", "t", "clear")
    t_clear = time.monotonic()
    # The fault surely held from the set's reply (t_set) until the clear was
    # sent (t_clearing): no row sent in that window may be acknowledged in it.
    bad = acks_between(prods, t_set, t_clearing)
    check(f"[{name}] no row sent while the fault held was acknowledged", not bad, f"{len(bad)} acked")
    active = poll(lambda: shard(status(sock))["state"] == "ACTIVE", BOUND_MS / 1000 + 10)
    took = (time.monotonic() - t_clear) * 1000
    recovery_ms[name] = took
    check(f"[{name}] ACTIVE again {took:.0f} ms after the clear (bound {BOUND_MS} ms + claim)",
          active and took < BOUND_MS + 3000, f"{took:.0f} ms")
    st = status(sock)
    m = metrics(sock)
    check(f"[{name}] fault gone from status, a recovery counted",
          "fault" not in shard(st) and shard(st)["recoveries"] >= 1 and
          metric_value(m, "memwald_shard_recoveries_total", {"kind": "reclaim"}) > rec0,
          json.dumps(shard(st)))
    states = {k: metric_value(m, "memwald_shards", {"state": k}) for k in ("ACTIVE", "FAILED", "CLAIMING")}
    check(f"[{name}] memwald_shards: 1 ACTIVE, 0 FAILED, 0 CLAIMING", states == {
        "ACTIVE": 1, "FAILED": 0, "CLAIMING": 0}, str(states))
    n0 = len(all_acked(prods))
    check(f"[{name}] writes are acknowledged again", poll(lambda: len(all_acked(prods)) > n0 + 40, 15))


def flush_phase(sock, prods, name, spec, d):
    m0 = metrics(sock)
    ff0 = metric_value(m0, "memwald_flush_failures_total", {})
    fl0 = shard(status(sock))["flushes"]
    rc, _, out = ctl_json(sock, "fault", "t", "set", spec)
    check(f"[{name}] fault set accepted", rc == 0, out)
    st = poll(lambda: (lambda s: s if shard(s).get("fault", {}).get("op") == "flush" else None)(status(sock)), 15)
    check(f"[{name}] status shows a flush fault while the shard stays ACTIVE",
          st is not None and shard(st)["state"] == "ACTIVE", json.dumps(shard(st)) if st else "")
    check(f"[{name}] status: the flush fault counts a retry",
          poll(lambda: shard(status(sock)).get("fault", {}).get("retries", 0) >= 1, 10),
          json.dumps(shard(status(sock)).get("fault")))
    m = metrics(sock)
    check(f"[{name}] memwald_flush_failures_total grows",
          metric_value(m, "memwald_flush_failures_total", {}) > ff0)
    n0 = len(all_acked(prods))
    check(f"[{name}] rows durable in the WAL are still acknowledged",
          poll(lambda: len(all_acked(prods)) > n0 + 40, 15))
    ctl_json(sock, "fault", "t", "clear")
    t_clear = time.monotonic()
    ok = poll(lambda: (lambda s: "fault" not in s and s["flushes"] > fl0)(shard(status(sock))),
              BOUND_MS / 1000 + 10)
    took = (time.monotonic() - t_clear) * 1000
    recovery_ms[name] = took
    check(f"[{name}] a flush commits {took:.0f} ms after the clear (bound {BOUND_MS} ms)",
          ok and took < BOUND_MS + 3000, f"{took:.0f} ms")


def read_lancedb(db):
    r = subprocess.run(["node", READ_ROWS, db], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        return None, r.stderr + r.stdout
    return {o["id"]: o for o in map(json.loads, r.stdout.splitlines())}, ""


def identity_keys(sock, port):
    """status names identity shards by their value once the daemon knows it."""
    c = socket.create_connection(("127.0.0.1", port), timeout=30)
    long_value = "é" * 60  # 120 bytes: cut to 64 at a UTF-8 boundary
    rows = [{"id": 1, "region": "eu"}, {"id": 2, "region": long_value}]
    c.sendall(("USE idt\n" + "".join(json.dumps(r) + "\n" for r in rows) + "PING\n").encode())
    buf = b""
    while b"PONG" not in buf:
        chunk = c.recv(4096)
        if not chunk:
            raise EOFError(f"daemon closed the connection before PONG: {buf[-200:]!r}")
        buf += chunk
    c.close()
    rc, _, out = ctl_json(sock, "claim", "idt", "identity-us")
    shards = status(sock)["tables"][1]["shards"]
    keys = {sh["key"]: sh.get("key_truncated", False) for sh in shards}
    want = {"identity-eu": False, "identity-" + "é" * 32: True, "identity-us": False}
    check("identity shards show identity-<value> (routed rows, admin claim; long values cut)",
          buf.decode().startswith("OK 2") and rc == 0 and keys == want, f"{buf!r} {out} {keys}")


def main():
    tmp = tempfile.mkdtemp(prefix="mw-faults-")
    db = os.path.join(tmp, "db")
    sock = os.path.join(tmp, "admin.sock")
    conf = os.path.join(tmp, "memwald.conf")
    with open(conf, "w") as f:
        f.write(f"""[daemon]
log_level = info
data_dir = {tmp}/data
admin_socket = {sock}
listen = 127.0.0.1:0
[storage]
max_inflight = 7
max_object_bytes = 8MiB
[table t]
uri = {db}/t.lance
create = true
schema = id:int64 not null, v:int64
primary_key = id
spec = unsharded
claim = eager
max_fault_retry_interval_ms = {BOUND_MS}
max_memtable_age_ms = 500
[table idt]
uri = {db}/idt.lance
create = true
schema = id:int64 not null, region:string not null
primary_key = id
spec = identity(region)
""")
    # refused without the environment variable
    env = dict(os.environ)
    env.pop("MEMWALD_TEST_FAULTS", None)
    d = DAEMON[0] = Daemon(["-c", conf], env=env)
    line = d.wait_line("listening on")
    ok = d.wait_line("started") is not None
    if ok:
        check("the shard is ACTIVE after start", poll(lambda: shard(status(sock))["state"] == "ACTIVE", 15))
        identity_keys(sock, port_of(line))
        rc, out, err = ctl(sock, "--json", "fault", "t", "set", "prefix=,errno=EIO")
        out += err
        check("fault is refused without MEMWALD_TEST_FAULTS=1", rc == 1 and "MEMWALD_TEST_FAULTS" in out, out)
    else:
        check("daemon starts", False, "\n".join(d.lines))
    check("daemon exits 0", d.stop() == 0, "\n".join(d.lines[-20:]))

    # a crashed writer's leftover temp file, old enough to be swept at open
    stale = os.path.join(db, "t.lance", "_versions", ".tmp-00000000000000000000000000000001")
    with open(stale, "w") as f:
        f.write("partial")
    old = time.time() - 3600
    os.utime(stale, (old, old))
    env["MEMWALD_TEST_FAULTS"] = "1"
    d = DAEMON[0] = Daemon(["-c", conf], env=env)
    line = d.wait_line("listening on")
    started = d.wait_line("started")
    check("daemon with MEMWALD_TEST_FAULTS=1 starts", line and started, "\n".join(d.lines))
    if not (line and started):
        d.p.kill()
        return
    port = port_of(line)
    check("[storage] the shard is ACTIVE after start", poll(lambda: shard(status(sock))["state"] == "ACTIVE", 15))
    st = status(sock)["storage"]
    check("[storage] max_inflight and max_object_bytes reach every table's storage",
          len(st) == 2 and all(s["max_inflight"] == 7 and s["max_object_bytes"] == 8 << 20 for s in st),
          json.dumps(st))
    check("opening the table swept the crashed writer's old temp file",
          poll(lambda: not os.path.exists(stale), 15) and
          d.wait_line("removed 1 leftovers of crashed writers") is not None, "\n".join(d.lines[-20:]))
    prods = [Producer(port, 1_000_000 * (i + 1)) for i in range(3)]
    for p in prods:
        p.start()
    check("producers get acknowledgements", poll(lambda: len(all_acked(prods)) > 100, 15))
    t0 = time.monotonic()
    try:
        wal_phase(sock, prods, "EIO")
        wal_phase(sock, prods, "ENOSPC")
        flush_phase(sock, prods, "sstable", "target=shard,shard=unsharded,steps=rename,errno=EIO", d)
        flush_phase(sock, prods, "manifest", "target=manifest,shard=unsharded,steps=link,errno=ENOSPC", d)
        # delay: every operation 300 ms late; nothing fails, acks are slower
        f0 = len(all_failed(prods))
        ctl_json(sock, "fault", "t", "set", "delay_ms=300")
        t_set = time.monotonic()
        slow = poll(lambda: any(ans - sent >= 0.3 for p in prods for sent, ans in list(p.acked.values())
                                if sent > t_set), 15)
        check("[delay] acknowledgements wait for the delayed storage", slow)
        ctl_json(sock, "fault", "t", "clear")
        check("[delay] nothing refused, shard ACTIVE", len(all_failed(prods)) == f0 and
              shard(status(sock))["state"] == "ACTIVE")
        # one failed fsync: the WAL put is retried
        m0 = metrics(sock)
        ctl_json(sock, "fault", "t", "set", "fsync_once")
        inj = poll(lambda: metric_value(metrics(sock), "memwald_storage_faults_injected_total", {"step": "fsync"})
                   > metric_value(m0, "memwald_storage_faults_injected_total", {"step": "fsync"}), 10)
        n0 = len(all_acked(prods))
        grew = poll(lambda: len(all_acked(prods)) > n0 + 40, 10)
        check("[fsync-once] one fsync failed, writes continue, nothing refused, ACTIVE",
              inj and len(all_failed(prods)) == f0 and grew and
              shard(status(sock))["state"] == "ACTIVE")
        ctl_json(sock, "fault", "t", "clear")
    finally:
        for p in prods:
            p.stop.set()
        for p in prods:
            p.join(30)
    check("producers saw only OK/ERR replies", all(p.error is None for p in prods),
          "\n".join(str(p.error) for p in prods))
    print(f"# phases took {time.monotonic() - t0:.1f} s")
    rc, _, out = ctl_json(sock, "flush", "t")
    check("final flush", rc == 0, out)
    acked, failed = all_acked(prods), all_failed(prods)
    print(f"# {len(acked)} rows acknowledged, {len(failed)} refused")
    got, err = read_lancedb(db)
    check("LanceDB 0.39.0 reads the table", got is not None, err)
    if got is not None:
        missing = sorted(set(acked) - set(got))
        extra = sorted(set(got) - set(acked))
        check("LanceDB reads exactly every acknowledged row (none refused, none lost)",
              not missing and not extra, f"missing {missing[:10]} ({len(missing)}) extra {extra[:10]} ({len(extra)})")
        wrong = [k for k in acked if k in got and got[k]["v"] != k * 3]
        check("with their values", not wrong, str(wrong[:10]))
    for k, v in recovery_ms.items():
        print(f"# recovery {k}: {v:.0f} ms after the clear")
    check("daemon exits 0", d.stop() == 0, "\n".join(d.lines[-30:]))
    e2e_util.tidy(tmp)


if __name__ == "__main__":
    try:
        main()
    except Exception:
        import traceback
        d = DAEMON[0]
        check("the test ran to its end", False, traceback.format_exc() +
              ("\n".join(d.lines[-150:]) if d else ""))
        if d and d.p.poll() is None:
            d.p.kill()
    finally:
        print(f"1..{len(results)}")
        print(f"# {sum(results)} passed, {len(results) - sum(results)} failed")
    sys.exit(0 if results and all(results) else 1)
