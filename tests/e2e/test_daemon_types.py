#!/usr/bin/env python3
"""e2e: issue 15's acceptance test for column types. A table LanceDB 0.39.0
creates with every column type memwald supports (tests/e2e/types_accept.mjs:
narrow ints, float16, timestamps in every unit with and without a zone,
date32/64, time32/64, decimal128, large_string, large_binary,
fixed_size_binary, fixed_size_lists of float16/float64/int8/uint8, lists of
those and of strings, large_lists, structs two levels deep, nulls at every
level) is written by the real daemon over JSON (every JSON spelling: RFC 3339
and integer timestamps, dates, decimal strings, base64, objects kept as
their text in a string column) and over ARROW (apache-arrow 21 frames with
every column, one in another column order; apache-arrow 18's
tableFromArrays, whose strings are dictionary-encoded), and read back by
LanceDB exactly (exact.mjs: every value at full precision). The same runs
on a second table, bootstrapped by memwald from the configured schema
(create = true), which LanceDB must read the same way.

  phase 1  JSON + ARROW upserts and deletes of LanceDB's own rows, SYNC,
           `memwalctl flush` (SSTables): LanceDB reads base + phase 1.
  phase 2  more of both, SYNC (durable in the WAL only), then SIGKILL: the
           restarted daemon claims the shard (claim = eager) and replays
           the WAL (every type decoded from our WAL entries), flushes:
           LanceDB reads base + phase 1 + phase 2.
TAP output.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import e2e_util  # noqa: E402
from e2e_util import Client, Daemon, check, chosen, ctl, ctl_json, plan, poll, port_of, tidy  # noqa: E402

e2e_util.MEMWALD, e2e_util.MEMWALCTL = sys.argv[1], sys.argv[2]
HERE = os.path.dirname(os.path.abspath(__file__))
NODE = os.path.join(HERE, "types_accept.mjs")


def node(*args, timeout=180):
    return subprocess.run(["node", NODE, *args], capture_output=True, text=True, timeout=timeout)


def top_level_fields(schema):
    """The schema's fields, split at commas outside <...>."""
    out, depth, cur = [], 0, ""
    for ch in schema:
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return out + [cur.strip()]


def start(conf):
    d = Daemon(["-c", conf])
    line = d.wait_line("listening on", timeout=60)
    ok = line is not None and d.wait_line("started", timeout=60) is not None
    return d, (port_of(line) if ok else None)


def send_phase(port, pdir, phase):
    """Send the phase's JSON lines then its frames on one connection with
    REPLIES ERRORS; the replies up to SYNC, and the rows the phase sent."""
    counts = json.load(open(os.path.join(pdir, f"{phase}.counts.json")))
    payload = b"USE t\nREPLIES ERRORS\n" + open(os.path.join(pdir, f"{phase}.jsonl"), "rb").read()
    for n in range(len(counts["frames"])):
        data = open(os.path.join(pdir, f"{phase}-{n}.arrow"), "rb").read()
        payload += b"ARROW %d\n" % len(data) + data
    c = Client(port, timeout=120)
    c.send(payload + b"SYNC\n")
    got = c.lines_until(lambda l: l.startswith("SYNC"), timeout=120)
    c.close()
    return got, counts["json"] + sum(counts["frames"])


def active(sock):
    """The shard is claimed (and, after a restart, its WAL replayed)."""
    rc, j, _ = ctl_json(sock, "status")
    return rc == 0 and any(s["state"] == "ACTIVE" for s in j["result"]["tables"][0]["shards"])


def merged(state, model_file):
    for l in open(model_file):
        r = json.loads(l)
        if r.get("_deleted"):
            state.pop(r["id"], None)
        else:
            state[r["id"]] = l.rstrip("\n")


def lancedb_reads(table_dir, state, what):
    out = table_dir + ".read.jsonl"
    r = node("read", table_dir, out)
    got = open(out).read().splitlines() if r.returncode == 0 else []
    want = [state[k] for k in sorted(state, key=int)]
    diff = [(a, b) for a, b in zip(got, want) if a != b][:2]
    check(f"{what}: LanceDB reads exactly the {len(want)} rows", r.returncode == 0 and got == want,
          r.stderr[-2000:] + f"\ngot {len(got)} rows, want {len(want)}; first differences {diff}")


def run(tmp, tag, table_dir, table_keys, pdir, state):
    """Both phases against one table (config [table t] = table_keys)."""
    top = os.path.join(tmp, tag)
    os.makedirs(top)
    conf, sock = os.path.join(top, "memwald.conf"), os.path.join(top, "admin.sock")
    with open(conf, "w") as f:
        f.write(f"""[daemon]
data_dir = {top}/data
admin_socket = {sock}
listen = 127.0.0.1:0
json_objects_as_text = true
[table t]
uri = {table_dir}
{table_keys}primary_key = id
claim = eager
""")
    d, port = start(conf)
    check(f"[{tag}] the daemon opens the table", port is not None, "\n".join(d.lines[-20:]))
    if port is None:
        d.stop(signal.SIGKILL)
        return

    got, rows = send_phase(port, pdir, "p1")
    check(f"[{tag}] phase 1: every request is taken (no ERR), SYNC {rows}", got == [f"SYNC {rows}"], got[:5])
    rc, out, err = ctl(sock, "flush", timeout=120)
    check(f"[{tag}] phase 1: memwalctl flush", rc == 0, out + err)
    merged(state, os.path.join(pdir, "p1.model.jsonl"))
    lancedb_reads(table_dir, state, f"[{tag}] after phase 1 (flushed: SSTables)")

    got, rows = send_phase(port, pdir, "p2")
    check(f"[{tag}] phase 2: every request is taken (no ERR), SYNC {rows}", got == [f"SYNC {rows}"], got[:5])
    d.stop(signal.SIGKILL)
    check(f"[{tag}] phase 2: the daemon is killed before any flush",
          d.killed or d.p.returncode == -signal.SIGKILL, str(d.p.returncode))
    d, port = start(conf)
    ok = port is not None and poll(lambda: active(sock), 60, interval=0.05)
    check(f"[{tag}] the daemon restarts, claims the shard and replays the WAL", ok, "\n".join(d.lines[-20:]))
    if not ok:
        d.stop(signal.SIGKILL)
        return
    rc, out, err = ctl(sock, "flush", timeout=120)
    check(f"[{tag}] phase 2: memwalctl flush after the replay", rc == 0, out + err)
    merged(state, os.path.join(pdir, "p2.model.jsonl"))
    lancedb_reads(table_dir, state, f"[{tag}] after phase 2 (unflushed, then replayed from the WAL)")
    rc = d.stop()
    check(f"[{tag}] daemon exits 0 on SIGTERM", rc == 0, "\n".join(d.lines[-20:]))


def main():
    # MW_TEST=memwald-made runs the bootstrapped table alone
    todo = dict(chosen([("lancedb-made", True), ("memwald-made", True)]))
    if not os.path.isdir(os.path.join(HERE, "..", "interop", "node_modules", "apache-arrow-21")):
        print("Bail out! tests/interop/node_modules is missing or old (npm install in tests/interop)")
        return 1
    tmp = tempfile.mkdtemp(prefix="memwald-e2e-types-")
    lance_dir = os.path.join(tmp, "db", "t.lance")
    r = node("create", os.path.dirname(lance_dir))
    check("LanceDB creates the table with every type", r.returncode == 0, r.stderr[-2000:])
    if r.returncode != 0:
        return plan()
    schema = r.stdout.strip()
    fields = "\n  ".join(top_level_fields(schema))  # one per line: the key continues
    pdir = os.path.join(tmp, "plan")
    r = node("plan", pdir)
    check("the requests and the model are written", r.returncode == 0, r.stderr[-2000:])
    base = os.path.join(tmp, "base.jsonl")
    r = node("read", lance_dir, base)
    check("LanceDB reads its 20 base rows", r.returncode == 0 and len(open(base).read().splitlines()) == 20,
          r.stderr[-2000:])
    state = {json.loads(l)["id"]: l.rstrip("\n") for l in open(base)}
    # LanceDB's table, with the configured schema that must match it
    if "lancedb-made" in todo:
        run(tmp, "lancedb-made", lance_dir, f"schema = {fields}\n", pdir, state)
    # a table memwald bootstraps from the same schema
    if "memwald-made" in todo:
        run(tmp, "memwald-made", os.path.join(tmp, "boot", "t.lance"),
            f"create = true\nspec = unsharded\nschema = {fields}\n", pdir, {})
    tidy(tmp)
    return plan()


if __name__ == "__main__":
    sys.exit(main())
