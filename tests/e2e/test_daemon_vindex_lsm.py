#!/usr/bin/env python3
"""e2e (issue 27's interop test): LanceDB's default vector search over a
table memwald writes inserts, vector updates and deletes to.

  test_daemon_vindex_lsm.py MEMWALD MEMWALCTL [--s3 | --takeover]

For the unsharded and the bucket(id, 4) write spec: LanceDB 0.39.0 makes a
table {id int64 PK, vec fixed_size_list<float32, 32>, cat int64} of 512 base
rows with `createIndex("vec")` (its default: IVF_PQ, l2), a BTree index on
cat and the default LSM write spec (`maintainedIndexes` omitted: both
indexes are maintained), through tests/interop/vindex.mjs make --cat. Every
row memwald writes carries a cat (an update usually changes it). memwald
(claim = eager) then writes:

  phase 1  inserts, updates of base rows (same id, a new vector), deletes
           of base rows; SYNC, `memwalctl flush`
  phase 2  inserts, updates and deletes of phase 1's rows (flushed in the
           SSTables of generation 1), base rows updated twice in the same
           MemTable, rows inserted and deleted in it, phase 1's updated rows
           updated again; SYNC, flush
  phase 3  inserts, updates and deletes; SYNC (acknowledged: durable in the
           WAL), then SIGKILL before any flush; the restarted daemon claims
           every shard, replays the WAL, flushes on `memwalctl flush`, stops
           on SIGTERM

Then LanceDB's default vector search (vindex.mjs lsm) must find each row
memwald wrote by its own vector first, never answer a deleted row, and
answer every row with its current vector (never the version an update
replaced, whose vector is searched for too). memwal-inspect must decode and
verify the table (each SSTable's vector index names every vector row of its
data file). After each flush (phases 1 and 2, and after the replay),
LanceDB's searches filtered on cat (vindex.mjs filter) must answer exactly
the model's live rows: where("cat = C") for every cat any row had, vector
searches of fresh rows prefiltered on their cat (the row first, every answer
live with its current cat and vector), old versions prefiltered on their old
cat never answered; and the plans must read every SSTable through its BTree
cat_idx (memwald's per-SSTable BTree is used, not a scan). --s3 (through tests/s3/with-s3.sh): the table lives in a bucket
of its own on radosgw. Synchronisation by the daemon's replies, log lines
and status.

--takeover (unsharded, on disk): the shard changes hands both ways.
memwald writes phase 1 (flushed) and phase 2 (acknowledged, then SIGKILL:
in its WAL only). LanceDB's own writer then writes (vindex.mjs lance-write):
its first write claims the shard and replays memwald's WAL; on the writer's
handle, and after its closeLsmWriters on a new one, LanceDB's vector search
must find every row (memwald's SSTables through the indexes memwald wrote,
the replayed rows, LanceDB's own), and so must its searches filtered on cat
(with the plan check once the writer closed). Then a second LanceDB writer writes and
is SIGKILLed (its MemTable left in its WAL); memwald restarts, claims the
shard, replays LanceDB's WAL and flushes it with its indexes: LanceDB's
search, plain and filtered on cat, finds every row again. TAP.
"""
import json
import os
import random
import signal
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util  # noqa: E402
from e2e_util import Client, Daemon, check, ctl, ctl_json, plan, poll, port_of  # noqa: E402

e2e_util.MEMWALD, e2e_util.MEMWALCTL = sys.argv[1], sys.argv[2]
S3 = "--s3" in sys.argv[3:]
TAKEOVER = "--takeover" in sys.argv[3:]
SRC = os.environ.get("MW_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
VINDEX = os.path.join(SRC, "tests", "interop", "vindex.mjs")
DIM = 32
BASE_ROWS = 512
NCAT = 12  # base rows: cat = id % NCAT (vindex.mjs make --cat); writes: cat in 0..NCAT+3


def node(*args, timeout=600):
    r = subprocess.run(["node", VINDEX] + list(args), capture_output=True, text=True, timeout=timeout)
    out = [ln for ln in (r.stdout + r.stderr).splitlines() if " WARN " not in ln]
    return r.returncode, out


class Model:
    """What the table holds after each write: live[id] = vector, the ids
    memwald wrote last (fresh), the vectors updates replaced (stale) and
    the deleted rows' last vectors."""

    def __init__(self, base, seed):
        self.live = {int(r["id"]): r["vec"] for r in base}
        self.cat = {int(r["id"]): int(r["cat"]) for r in base}
        self.fresh, self.stale, self.deleted = set(), [], []
        self.rnd = random.Random(seed)
        self.next_id = 100000

    def vec(self):
        return [struct.unpack("<f", struct.pack("<f", self.rnd.randint(-1024, 1024) / 1024.0))[0]
                for _ in range(DIM)]

    def upsert(self, i, lines):
        v, c = self.vec(), self.rnd.randrange(NCAT + 4)
        if i in self.live:
            self.stale.append({"id": i, "vec": self.live[i], "cat": self.cat[i]})
        self.live[i], self.cat[i] = v, c
        self.fresh.add(i)
        lines.append(json.dumps({"id": i, "vec": v, "cat": c}))

    def insert(self, lines):
        self.next_id += 1
        self.upsert(self.next_id, lines)
        return self.next_id

    def delete(self, i, lines):
        self.deleted.append({"id": i, "vec": self.live.pop(i), "cat": self.cat.pop(i)})
        self.fresh.discard(i)
        lines.append("DEL " + json.dumps({"id": i}))

    def pick(self, ids, n):
        return self.rnd.sample(sorted(i for i in ids if i in self.live), n)

    def dump(self, path):
        # a stale vector that is some live row's current one (never, with
        # random vectors) would make "never answers the old version" moot
        with open(path, "w") as f:
            json.dump({"rows": [{"id": str(i), "vec": v, "cat": self.cat[i]} for i, v in self.live.items()],
                       "fresh": [str(i) for i in sorted(self.fresh)],
                       "stale": [{"id": str(r["id"]), "vec": r["vec"], "cat": r["cat"]} for r in self.stale],
                       "deleted": [{"id": str(r["id"]), "vec": r["vec"], "cat": r["cat"]} for r in self.deleted]}, f)


def phase_lines(m, phase, base_ids, p1_ids):
    lines = []
    if phase == 1:
        new = [m.insert(lines) for _ in range(200)]
        for i in m.pick(base_ids, 40):
            m.upsert(i, lines)
        for i in m.pick(set(base_ids) - m.fresh, 20):
            m.delete(i, lines)
        p1_ids.extend(new)
    elif phase == 2:
        for _ in range(100):
            m.insert(lines)
        for i in m.pick(p1_ids[:100], 40):
            m.upsert(i, lines)
        for i in m.pick(p1_ids[100:], 20):
            m.delete(i, lines)
        for i in m.pick(set(base_ids) - m.fresh, 20):  # twice in one MemTable
            m.upsert(i, lines)
            m.upsert(i, lines)
        for _ in range(10):  # inserted and deleted in one MemTable
            m.delete(m.insert(lines), lines)
        for i in m.pick([i for i in base_ids if i in m.fresh], 10):
            m.upsert(i, lines)
    else:
        for _ in range(100):
            m.insert(lines)
        for i in m.pick(m.fresh, 30):
            m.upsert(i, lines)
        for i in m.pick(m.fresh, 15):
            m.delete(i, lines)
    return lines


def send(port, lines, tag):
    c = Client(port, timeout=120)
    c.send_lines(["USE t"] + lines + ["SYNC"])
    acked, bad = 0, None
    while True:
        rep = c.reply()
        if rep.startswith("OK "):
            acked += int(rep.split()[1])
        elif rep.startswith("SYNC "):
            break
        else:
            bad = rep
            break
    c.close()
    check(f"{tag}: {len(lines)} rows and deletes acknowledged", bad is None and acked == len(lines),
          f"acked {acked}, {bad}")


def start(conf):
    d = Daemon(["-c", conf])
    line = d.wait_line("listening on", timeout=60)
    ok = line is not None and d.wait_line("started", timeout=60) is not None
    return d, (port_of(line) if ok else None)


def all_active(sock, shards):
    rc, j, _ = ctl_json(sock, "status")
    got = [s["state"] for s in j["result"]["tables"][0]["shards"]] if rc == 0 else []
    return len(got) == shards and all(s == "ACTIVE" for s in got)


def filtered(tag, db, top, m, when, sstables):
    """LanceDB's filtered searches on cat (vindex.mjs filter) against the
    model as it is now: where("cat = C") exact, prefiltered vector searches,
    every SSTable read through its BTree cat_idx in the plans."""
    model = os.path.join(top, f"model-{when}.json")
    m.dump(model)
    rc, out = node("filter", db, model, "--sstables", str(sstables))
    check(f"{tag} {when}: LanceDB's where('cat = C') and vector searches prefiltered on cat find every live row, "
          f"no stale or deleted one, and read each of the {sstables} SSTables through its BTree cat_idx", rc == 0,
          "\n".join(out[:40]))
    if rc == 0:
        print("# " + out[-1])
    return model


def scenario(tmp, root, spec):
    tag = f"[{spec}{' on S3' if S3 else ''}]"
    top = os.path.join(tmp, spec)
    os.makedirs(top)
    db = f"{root}/{spec}"
    made = os.path.join(top, "made.json")
    rc, out = node("make", db, "--index", "default", "--spec", spec, "--dim", str(DIM), "--base", str(BASE_ROWS),
                   "--rows", "0", "--cat", "btree", "--out", made, timeout=300)
    check(f"{tag} LanceDB makes the table: createIndex('vec') (IVF_PQ) and a BTree on cat, the default write spec "
          "maintains both", rc == 0 and '"vec_idx"' in "".join(out) and "IvfPq" in "".join(out)
          and '["cat_idx","BTree"]' in "".join(out), "\n".join(out[-30:]))
    if rc != 0:
        return
    shards = 4 if spec == "bucket" else 1
    conf, sock = os.path.join(top, "memwald.conf"), os.path.join(top, "admin.sock")
    with open(conf, "w") as f:
        f.write(f"[daemon]\nlog_level = info\ndata_dir = {top}/data\nadmin_socket = {sock}\n"
                f"listen = 127.0.0.1:0\n[table t]\nuri = {db}/t.lance\nclaim = eager\n")
    d, port = start(conf)
    ok = port is not None and poll(lambda: all_active(sock, shards), 60, interval=0.05)
    check(f"{tag} memwald opens the table and claims its {shards} shard(s)", ok, "\n".join(d.lines[-20:]))
    if not ok:
        d.stop(signal.SIGKILL)
        return
    check(f"{tag} memwald logs the maintained vector index",
          any("maintains vector index 'vec_idx' on 'vec' (l2)" in ln for ln in d.lines), "\n".join(d.lines[-20:]))
    check(f"{tag} memwald logs the maintained BTree index",
          any("maintains BTree index 'cat_idx' on 'cat': a BTree in every SSTable" in ln for ln in d.lines),
          "\n".join(d.lines[-20:]))
    base = json.load(open(made))["base"]
    m = Model(base, 27 + shards)
    base_ids, p1_ids = [int(r["id"]) for r in base], []
    for phase in (1, 2):
        send(port, phase_lines(m, phase, base_ids, p1_ids), f"{tag} phase {phase}")
        rc, o, e = ctl(sock, "flush", timeout=120)
        check(f"{tag} phase {phase}: memwalctl flush", rc == 0, o + e)
        filtered(tag, db, top, m, f"after phase {phase}'s flush", phase * shards)
    send(port, phase_lines(m, 3, base_ids, p1_ids), f"{tag} phase 3")
    d.stop(signal.SIGKILL)
    check(f"{tag} phase 3: the daemon is killed before any flush", d.p.returncode == -signal.SIGKILL,
          str(d.p.returncode))
    d, port = start(conf)
    ok = port is not None and poll(lambda: all_active(sock, shards), 120, interval=0.05)
    check(f"{tag} the daemon restarts, claims every shard and replays the WAL", ok, "\n".join(d.lines[-20:]))
    if not ok:
        d.stop(signal.SIGKILL)
        return
    rc, o, e = ctl(sock, "flush", timeout=120)
    check(f"{tag} phase 3: memwalctl flush after the replay", rc == 0, o + e)
    rc = d.stop()
    check(f"{tag} the daemon exits 0 on SIGTERM", rc == 0, "\n".join(d.lines[-20:]))
    model = filtered(tag, db, top, m, "after the SIGKILL, replay and flush", 3 * shards)
    rc, out = node("lsm", db, model)
    check(f"{tag} LanceDB's vector search finds every row memwald wrote first, never a deleted row or an old "
          f"version ({len(m.fresh)} fresh, {len(m.stale)} stale vectors, {len(m.deleted)} deleted)",
          rc == 0, "\n".join(out[:40]))
    if rc == 0:
        print("# " + out[-1])
    if S3:
        e2e_util.inspect_under(f"{db}/t.lance")


def lance_write(tag, db, top, m, n_new, n_upd, end):
    """LanceDB's writer writes n_new new rows and n_upd updates of fresh rows
    (vindex.mjs lance-write), the lsm check on its handle, then `end`."""
    lines = []
    for _ in range(n_new):
        m.insert(lines)
    for i in m.pick(m.fresh, n_upd):
        m.upsert(i, lines)
    rows, model = os.path.join(top, f"lance-{end}.json"), os.path.join(top, f"model-{end}.json")
    with open(rows, "w") as f:
        json.dump([json.loads(ln) for ln in lines], f)
    m.dump(model)
    rc, out = node("lance-write", db, rows, "--model", model, "--end", end)
    text = "\n".join(out)
    if end == "close":
        check(f"{tag} LanceDB's writer takes the shard over from memwald (claim, replay of memwald's WAL), writes "
              f"{len(lines)} rows; on its handle its vector search finds every row first ({len(m.fresh)})",
              rc == 0 and "ok on the writer's handle" in text, text[-3000:])
    else:
        check(f"{tag} LanceDB's writer writes {len(lines)} rows, finds every row on its handle, and is SIGKILLed "
              "before any flush", rc == -signal.SIGKILL and "ok on the writer's handle" in text,
              f"exit status {rc}\n" + text[-3000:])
    for ln in out:
        if ln.startswith("ok ") and "on the writer's handle" in ln:
            print("# " + ln)
    return model


def takeover(tmp):
    tag = "[takeover]"
    top = os.path.join(tmp, "takeover")
    os.makedirs(top)
    db, made = top, os.path.join(top, "made.json")
    rc, out = node("make", db, "--index", "default", "--dim", str(DIM), "--base", str(BASE_ROWS), "--rows", "0",
                   "--cat", "btree", "--out", made, timeout=300)
    check(f"{tag} LanceDB makes the table (createIndex('vec'), a BTree on cat, the default write spec)",
          rc == 0 and '["cat_idx","BTree"]' in "".join(out), "\n".join(out[-30:]))
    if rc != 0:
        return
    conf, sock = os.path.join(top, "memwald.conf"), os.path.join(top, "admin.sock")
    with open(conf, "w") as f:
        f.write(f"[daemon]\nlog_level = info\ndata_dir = {top}/data\nadmin_socket = {sock}\n"
                f"listen = 127.0.0.1:0\n[table t]\nuri = {db}/t.lance\nclaim = eager\n")
    d, port = start(conf)
    ok = port is not None and poll(lambda: all_active(sock, 1), 60, interval=0.05)
    check(f"{tag} memwald opens the table and claims the shard", ok, "\n".join(d.lines[-20:]))
    if not ok:
        d.stop(signal.SIGKILL)
        return
    base = json.load(open(made))["base"]
    m = Model(base, 270)
    base_ids, p1_ids = [int(r["id"]) for r in base], []
    send(port, phase_lines(m, 1, base_ids, p1_ids), f"{tag} phase 1")
    rc, o, e = ctl(sock, "flush", timeout=120)
    check(f"{tag} phase 1: memwalctl flush", rc == 0, o + e)
    send(port, phase_lines(m, 2, base_ids, p1_ids), f"{tag} phase 2")
    d.stop(signal.SIGKILL)
    check(f"{tag} phase 2: memwald is killed before any flush (its rows in its WAL only)",
          d.p.returncode == -signal.SIGKILL, str(d.p.returncode))
    model = lance_write(tag, db, top, m, 50, 20, "close")
    rc, out = node("lsm", db, model)
    check(f"{tag} after LanceDB's writer closed: LanceDB's vector search finds every row first, no deleted row, "
          "no old version", rc == 0, "\n".join(out[:40]))
    if rc == 0:
        print("# " + out[-1])
    rc, out = node("filter", db, model, "--sstables", "2")  # memwald's phase 1, LanceDB's flush
    check(f"{tag} after LanceDB's writer closed: LanceDB's searches filtered on cat find every live row, no stale or "
          "deleted one, each SSTable read through its BTree", rc == 0, "\n".join(out[:40]))
    if rc == 0:
        print("# " + out[-1])
    lance_write(tag, db, top, m, 50, 20, "kill")
    d, port = start(conf)
    ok = port is not None and poll(lambda: all_active(sock, 1), 120, interval=0.05)
    check(f"{tag} memwald restarts and takes the shard over from LanceDB's writer (claim, replay of its WAL)", ok,
          "\n".join(d.lines[-20:]))
    if not ok:
        d.stop(signal.SIGKILL)
        return
    rc, o, e = ctl(sock, "flush", timeout=120)
    check(f"{tag} memwald flushes the MemTable LanceDB left", rc == 0, o + e)
    rc = d.stop()
    check(f"{tag} the daemon exits 0 on SIGTERM", rc == 0, "\n".join(d.lines[-20:]))
    model = filtered(tag, db, top, m, "end", 3)  # and memwald's flush of LanceDB's MemTable
    rc, out = node("lsm", db, model)
    check(f"{tag} LanceDB's vector search finds every row first (LanceDB's replayed rows through memwald's "
          f"SSTable index), no deleted row, no old version ({len(m.fresh)} fresh)", rc == 0, "\n".join(out[:40]))
    if rc == 0:
        print("# " + out[-1])


def main():
    if not os.path.isdir(os.path.join(SRC, "tests", "interop", "node_modules", "@lancedb", "lancedb")):
        print("not ok 1 - tests/interop/node_modules is missing: run npm install --no-audit --no-fund there")
        print("1..1")
        return 1
    tmp = tempfile.mkdtemp(prefix="memwald-e2e-vindex-lsm-")
    if TAKEOVER:
        try:
            takeover(tmp)
        except Exception as e:  # a broken scenario fails, never skips
            check("[takeover] scenario ran to the end", False, repr(e))
        e2e_util.tidy(tmp)
        return plan()
    root, bucket = tmp, None
    if S3:
        from s3_util import s3
        if not os.environ.get("MW_S3_ENDPOINT"):
            check("an S3 endpoint (run through tests/s3/with-s3.sh)", False)
            return plan()
        bucket = f"mw-e2e-vlsm-{os.getpid()}"
        check("bucket created", s3("PUT", "/" + bucket) == 200)
        root = f"s3://{bucket}"
    for spec in ("unsharded", "bucket"):
        try:
            scenario(tmp, root, spec)
        except Exception as e:  # a broken scenario fails, never skips
            check(f"[{spec}] scenario ran to the end", False, repr(e))
    if S3:
        from s3_util import drop_bucket
        if all(e2e_util.results):
            drop_bucket(bucket)
        else:
            print(f"# kept bucket {bucket}")
    e2e_util.tidy(tmp)
    return plan()


if __name__ == "__main__":
    sys.exit(main())
