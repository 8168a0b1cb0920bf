#!/usr/bin/env python3
"""e2e: split brain — two writers configured to own the same shards (issue 6).

Variant "daemons": two memwald processes (A, B) on one table (a local path,
bucket(id,4), both with `shards = 0, 1, 2, 3`, `claim = eager`,
`max_memtable_rows = 100` so that flushes run all the time and claims meet
them), each with its own admin socket and port. A starts, its producers start streaming, then B
starts and its eager claims fence A mid-stream. Four producer connections per
daemon (one per bucket, so a group of rows never spans two shards; see
"refused" below) stream upserts: ids unique to the connection, about a quarter
of the writes re-upsert one of the connection's earlier ids, and every write
carries its own value (name "<daemon><conn>-<seq>", v = seq), so each write is
recognisable in the WAL and in the table. An operator thread moves ownership
with `memwalctl claim t <bucket>`, alternately to the daemon that did not
hold the bucket last, at seeded random intervals, while both daemons'
producers are mid-stream. A claim may be refused (`Operation already in
progress` when the daemon still thinks it is ACTIVE, -EBUSY during a flush);
refusals are counted, not failures.

Variant "lancedb": one memwald (A) and LanceDB 0.39.0's own MemWAL writer
(split_brain_lance.mjs, node) as the second party. Each round LanceDB writes
to a bucket A holds (claiming it: epoch+1, fence sentinel, replay of A's
WAL), A's producer on that bucket gets `fenced`, then A claims the bucket back
(`memwalctl claim`); alternately LanceDB's next write is refused as fenced, or
LanceDB closes cleanly first (its flush commits under its epoch), and in some
rounds A's claim is issued while LanceDB's write is still in flight.

Every row sent is exactly one of:
- acked:   counted by an `OK <n>` (or LanceDB's mergeInsert returned).
- refused: named by an `ERR <line> <code> k rows (lines a-b) not written`
  (any code: fenced, internal, overloaded, …), or LanceDB's call failed.
  With one shard per group the protocol promises such rows were not written
  (docs/protocol.md §1.2: a group spanning several shards may be partly
  written, which is why every connection here writes one bucket).
- unknown: sent, but the connection closed before its OK or ERR arrived. At
  the end some connections send a last burst and close at once, so the test
  has unknown rows on purpose. An unknown write may or may not be in the
  table; it is not allowed to be anywhere else than a WAL entry of its
  daemon's epochs (checked like the others).

At the end A claims every bucket (also a shard A still believes ACTIVE at an
older epoch: the claim reads the manifest, sees the newer epoch and takes
the shard back), flushes, and both processes stop.
Then:
1. LanceDB reads the table (tests/interop/check.mjs): for every id, the row
   is the last acked write, or a later unknown write; an id with no acked
   write is absent or at an unknown write; no refused write is the final
   value; no id that was never sent.
2. The WAL and the shard manifests (split_brain_wal.mjs) of every shard:
   positions 1..N without holes; every entry carries writer_epoch; epochs are
   non-decreasing in position (memwal.md §3.5/§4.2: a writer can only land
   at a free slot above the newest sentinel, since its next put collides with
   the claimant's sentinel; with max_wal_inflight = 1 no exception applies);
   every epoch ≥ 2 with data has its sentinel below its data, at most one
   sentinel per epoch, nothing of a lower epoch above a sentinel; manifest
   versions 1..M without gaps, epochs and replay_after non-decreasing, every
   WAL epoch claimed in the history, and each version of epoch e covers only
   positions below the first entry of a later epoch; each epoch belongs to
   one writer (daemons' "Claimed shard … with epoch E" log lines; in the
   LanceDB variant every other epoch is LanceDB's), and every row of a data
   entry of epoch E was sent by E's owner.
3. Every acked write is in exactly one WAL data entry, no refused write is in
   any, an unknown write in at most one.
Counts are printed as "# counts: …" lines (bench/split-brain-long.sh reads
them). TAP output.

--gc: the same campaign with garbage collection and compaction running in
both daemons (gc_grace_ms = 100, compaction after 2 SSTables or 200 ms,
history GC: 4 shard-manifest versions kept with a 100 ms grace, base
versions older than 500 ms collected every 300 ms).
GC deletes WAL entries below min(replay_after, last_seen), so checks 2 and 3
change: positions must be without holes only from the final horizon up;
below it nothing may remain but fence sentinels (GC keeps them, and a data
entry there after GC has passed is a write into a freed slot: the failure
Lance's spec warns about); an acked write is in at most one entry; the
shard manifests left must be versions L..M without gaps (history GC deleted
those below L), and WAL epochs below the oldest version left need not appear
in them. A waits
until its GC has reached the horizon of every shard before stopping. Check 1
(LanceDB reads exactly the acked state) is unchanged and decides.

usage: test_split_brain.py MEMWALD MEMWALCTL [--seed S] [--claims N] [--rounds R]
                      [--variant daemons|lancedb|both] [--memtable-rows N] [--keep]
"""
import argparse
import json
import os
import random
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util  # noqa: E402
from e2e_util import Client, check, chosen, ctl_json, plan, poll, port_of, results  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("memwald")
ap.add_argument("memwalctl")
ap.add_argument("--seed", type=int, default=6)
ap.add_argument("--claims", type=int, default=36, help="operator claims in the daemons variant")
ap.add_argument("--rounds", type=int, default=4, help="LanceDB take-over rounds")
ap.add_argument("--variant", default="both", choices=["daemons", "lancedb", "both"])
ap.add_argument("--memtable-rows", type=int, default=100,
                help="max_memtable_rows (small: flushes run during the claims); 0 = no flush before the end")
ap.add_argument("--keep", action="store_true", help="keep the scratch directories")
ap.add_argument("--gc", action="store_true", help="run with WAL/SSTable GC and compaction active")
ARGS = ap.parse_args()
e2e_util.MEMWALD, e2e_util.MEMWALCTL = ARGS.memwald, ARGS.memwalctl
SRC = os.environ.get("MW_SOURCE_ROOT", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
HERE = os.path.join(SRC, "tests", "e2e")
CHECK = os.path.join(SRC, "tests", "interop", "check.mjs")
NBUCKETS = 4
CHILDREN = []  # processes to kill if a scenario dies half-way
DAEMONS = []  # the Daemon objects of the running scenario (their logs on failure)


def note(text):
    print("# " + text)
    sys.stdout.flush()


# ------------------------------------------------------------------ routing
bucket_of = e2e_util.bucket_of


class Ids:
    """Ids of one bucket from a private range."""

    def __init__(self, base, bucket):
        self.next, self.bucket = base, bucket

    def take(self):
        while bucket_of(self.next) != self.bucket:
            self.next += 1
        self.next += 1
        return self.next - 1


# --------------------------------------------------------------- the model
class Write:
    __slots__ = ("id", "name", "v", "state", "code", "writer", "why")

    def __init__(self, id_, name, v, writer):
        self.id, self.name, self.v, self.writer = id_, name, v, writer
        self.why = None
        self.state, self.code = None, None  # None (in flight) | acked | refused | unknown


class Model:
    def __init__(self):
        self.lock = threading.Lock()
        self.writes = []  # in send order per id (each producer owns its ids)
        self.violations = []

    def add(self, w):
        with self.lock:
            self.writes.append(w)

    def violation(self, text):
        with self.lock:
            self.violations.append(text)


# ---------------------------------------------------------------- processes
class Daemon(e2e_util.Daemon):
    """memwald -c conf (its log read by a thread, see e2e_util.Daemon), with
    a name for its log file; the claims it logged."""

    def __init__(self, name, conf):
        super().__init__(["-c", conf])
        self.name, self.conf = name, conf
        CHILDREN.append(self.p)
        DAEMONS.append(self)

    def claimed_epochs(self):
        """(shard uuid, epoch) of every claim this process won."""
        out = []
        with self.cv:
            for l in self.lines:
                m = l and re.search(r"Claimed shard ([0-9a-f-]{36}) with epoch (\d+)", l)
                if m:
                    out.append((m.group(1), int(m.group(2))))
        return out

    def stop(self, sig=signal.SIGTERM, timeout=60):
        """SIGTERM, reap, keep the log next to the config; the exit code."""
        rc = super().stop(sig, timeout)
        if self.killed:
            rc = "killed after %ss" % timeout
        with open(os.path.join(os.path.dirname(self.conf), f"{self.name}.log"), "w") as f:
            f.write("\n".join(self.lines) + "\n")
        return rc


def sanitizer_lines(*daemons):
    """AddressSanitizer / UBSan reports in the daemons' stderr (sanitizer builds)."""
    return [l for d in daemons for l in d.lines if l and ("Sanitizer" in l or "runtime error:" in l)]


def history_gc(sock):
    """The base-history counters of the daemon's status (runs that found a
    listed version gone meanwhile are stale_listings: the other daemon's
    cleanup raced this one; they delete nothing)."""
    _, r, _ = ctl_json(sock, "status")
    out = {"versions_deleted": 0, "files_deleted": 0, "stale_listings": 0}
    for t in (r.get("result") or {}).get("tables", []):
        g = t.get("gc") or {}
        for k in out:
            out[k] += g.get("base_" + k, 0)
    return out


def shard_status(sock):
    """bucket -> shard status dict."""
    _, r, _ = ctl_json(sock, "status")
    if not r.get("ok"):
        return {}
    out = {}
    for t in r["result"]["tables"]:
        for s in t["shards"]:
            if s["key"].startswith("bucket-"):
                out[int(s["key"][7:])] = s
    return out


# ---------------------------------------------------------------- producers
class Producer:
    """One TCP connection writing upserts of one bucket. Chunks of rows are
    each followed by PING; at most two chunks are outstanding. Replies are
    matched to rows by count (OK n) and line numbers (ERR)."""

    def __init__(self, model, port, tag, bucket, seed, base):
        self.model, self.tag, self.bucket = model, tag, bucket
        self.rng = random.Random(seed)
        self.ids = Ids(base, bucket)
        self.mine = []  # ids written so far
        self.c = Client(port, timeout=60)
        self.line = 0
        self.rows = []  # Write objects with their line, in send order
        self.lines = []
        self.next = 0  # first row not yet accounted
        self.pings = []  # number of rows sent before each outstanding PING
        self.seq = 0
        self.codes = {}
        self.closed = False
        self._send_lines(["USE t"])

    def _send_lines(self, lines):
        self.line += len(lines)
        self.c.send_lines(lines)

    def make_rows(self, n):
        out, used = [], set()
        for _ in range(n):
            if self.mine and self.rng.random() < 0.25:
                i = self.rng.choice(self.mine)
                if i in used:
                    i = self.ids.take()
                    self.mine.append(i)
            else:
                i = self.ids.take()
                self.mine.append(i)
            used.add(i)
            self.seq += 1
            w = Write(i, f"{self.tag}-{self.seq}", self.seq, self.tag[0])
            out.append(w)
        return out

    def send_chunk(self, n, ping=True):
        ws = self.make_rows(n)
        text = []
        for w in ws:
            self.model.add(w)
            self.rows.append(w)
            self.lines.append(self.line + len(text) + 1)
            text.append(json.dumps({"id": w.id, "name": w.name, "v": w.v}, separators=(",", ":")))
        if ping:
            text.append("PING")
            self.pings.append(len(self.rows))
        self._send_lines(text)

    def _account(self, rep):
        if rep.startswith("OK "):
            n = int(rep.split()[1])
            if self.next + n > len(self.rows):
                self.model.violation(f"{self.tag}: {rep} acks more rows than were sent")
                n = len(self.rows) - self.next
            for w in self.rows[self.next:self.next + n]:
                w.state = "acked"
            self.next += n
        elif rep.startswith("ERR "):
            parts = rep.split(" ", 3)
            code = parts[2]
            m = re.search(r"(\d+) rows \(lines (\d+)-(\d+)\) not written", rep)
            a, b = (int(m.group(2)), int(m.group(3))) if m else (int(parts[1]), int(parts[1]))
            if self.next >= len(self.rows) or self.lines[self.next] != a:
                self.model.violation(f"{self.tag}: {rep!r} but the first unaccounted row is on line "
                                     f"{self.lines[self.next] if self.next < len(self.rows) else None}")
            k = 0
            while self.next < len(self.rows) and self.lines[self.next] <= b:
                self.rows[self.next].state, self.rows[self.next].code = "refused", code
                self.rows[self.next].why = rep[:300]
                self.next += 1
                k += 1
            if m and int(m.group(1)) != k:
                self.model.violation(f"{self.tag}: {rep!r} names {m.group(1)} rows, {k} were on those lines")
            self.codes[code] = self.codes.get(code, 0) + k
        elif rep == "PONG":
            want = self.pings.pop(0)
            if self.next != want:
                self.model.violation(f"{self.tag}: PONG with {want - self.next} earlier rows unaccounted")
        else:
            self.model.violation(f"{self.tag}: unexpected reply {rep!r}")

    def drain(self, keep=0):
        """Read replies until at most `keep` PINGs are outstanding."""
        while len(self.pings) > keep:
            self._account(self.c.reply())

    def abandon(self, n):
        """Send n more rows and close without reading: they become unknown."""
        self.send_chunk(n, ping=False)
        self.close()

    def close(self):
        if not self.closed:
            self.closed = True
            self.c.close()
            for w in self.rows[self.next:]:
                w.state = "unknown"

    def stream(self, stop):
        """Producer thread body: chunks until stop is set."""
        try:
            while not stop.is_set():
                self.send_chunk(self.rng.randint(1, 12))
                self.drain(keep=1)
                stop.wait(self.rng.uniform(0.002, 0.012))  # pacing, not synchronisation
            self.drain(keep=0)
        except (EOFError, OSError) as e:
            self.model.violation(f"{self.tag}: connection failed: {e!r}")


def start_producers(model, port, letter, seed, stop):
    prods, threads = [], []
    for b in range(NBUCKETS):
        p = Producer(model, port, f"{letter}{b}", b, seed * 1000 + ord(letter) * 10 + b,
                     base=(ord(letter) - ord("A") + 1) * 10_000_000 + b * 1_000_000)
        t = threading.Thread(target=p.stream, args=(stop,), daemon=True)
        prods.append(p)
        threads.append(t)
        t.start()
    return prods, threads


# -------------------------------------------------------------- setup/teardown
def write_conf(tmp, name, create):
    conf = os.path.join(tmp, f"{name}.conf")
    with open(conf, "w") as f:
        f.write(f"""[daemon]
log_level = info
data_dir = {tmp}/data-{name}
admin_socket = {tmp}/{name}.sock
listen = 127.0.0.1:0
[table t]
uri = {tmp}/t.lance
create = {"true" if create else "false"}
schema = id:int64 not null, name:string, v:double
primary_key = id
spec = bucket(id,4)
shards = 0, 1, 2, 3
claim = eager
{memtable_keys()}
{gc_keys()}
""")
    return conf, f"{tmp}/{name}.sock"


def gc_keys():
    if ARGS.gc:
        # history GC too: shard manifests below the newest 4 (hint checked), base
        # versions older than 500 ms with the files only they reference
        return ("gc = true\ngc_grace_ms = 100\ncompaction = true\ncompaction_min_sstables = 2\n"
                "compaction_max_age_ms = 200\ngc_manifest_keep_versions = 4\ngc_manifest_grace_ms = 100\n"
                "gc_history_retention_ms = 500\ngc_history_interval_ms = 300")
    return "gc = false\ncompaction = false"


def memtable_keys():
    if ARGS.memtable_rows > 0:
        return f"max_memtable_rows = {ARGS.memtable_rows}"
    return "max_memtable_rows = 10000000\nmax_memtable_age_ms = 0"


def start_daemon(tmp, name, create):
    conf, sock = write_conf(tmp, name, create)
    d = Daemon(name, conf)
    line = d.wait_line("listening on", 30)
    if line is None:
        return d, sock, None
    port = port_of(line)
    ok = poll(lambda: len(shard_status(sock)) == NBUCKETS and all(
        s["state"] == "ACTIVE" for s in shard_status(sock).values()), 30)  # eager claims
    return d, sock, port if ok else None


def disk_epoch(tmp, uuid):
    """Epoch of the newest shard manifest on disk (memwal.md §3.1, tag 2)."""
    d = os.path.join(tmp, "t.lance", "_mem_wal", uuid, "manifest")
    best, best_v = None, -1
    for f in os.listdir(d):
        if f.endswith(".binpb"):
            v = int(f[:64][::-1], 2)
            if v > best_v:
                best, best_v = f, v
    buf, at, epoch = open(os.path.join(d, best), "rb").read(), 0, 0

    def varint():
        nonlocal at
        v, shift = 0, 0
        while True:
            b = buf[at]
            at += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return v

    while at < len(buf):
        key = varint()
        if key & 7 == 0:
            v = varint()
            if key >> 3 == 2:
                epoch = v
        elif key & 7 == 2:
            n = varint()  # (not `at += varint()`: that reads `at` before the call moves it)
            at += n
        else:
            break
    return epoch


def take_all(tmp, model, sock, port, letter, stats):
    """The final take-over: this daemon holds every bucket at the newest
    epoch. A shard ACTIVE at an older epoch has not noticed it was fenced
    yet; `claim` checks the manifest and takes it back all the same."""
    problems = []
    for b in range(NBUCKETS):
        deadline = time.monotonic() + 60
        last_refusal = None
        while True:
            st = shard_status(sock).get(b)
            if st is None:
                problems.append(f"bucket {b}: not in status")
                break
            if st["state"] == "ACTIVE" and st["epoch"] == disk_epoch(tmp, st["id"]):
                break
            if time.monotonic() > deadline:
                problems.append(f"bucket {b}: still {st['state']} at epoch {st['epoch']}"
                                f" (last claim refused: {last_refusal})")
                break
            if st["state"] in ("CLAIMING", "REPLAYING"):
                if not poll(lambda: shard_status(sock).get(b, {}).get("state") not in ("CLAIMING", "REPLAYING"), 30):
                    problems.append(f"bucket {b}: {st['state']} for over 30 s")
                    break
                continue
            _, r, _ = ctl_json(sock, "claim", "t", str(b))
            stats["final_claims"] += 1
            stats["stale_active_claims"] += st["state"] == "ACTIVE"
            if not r.get("ok"):
                # refused (a control operation running, or not fenced yet):
                # ask again once the shard's status moves, or after 1 s
                last_refusal = r
                moved = poll(lambda: shard_status(sock).get(b) != st, 1.0)
                stats["refusals_unchanged"] = stats.get("refusals_unchanged", 0) + (not moved)
    _, r, _ = ctl_json(sock, "flush", "t")
    if not r.get("ok"):
        problems.append(f"flush: {r}")
    if ARGS.gc:  # let GC reach every shard's horizon: then only sentinels are left below it
        def caught_up():
            st = shard_status(sock)
            return len(st) == NBUCKETS and all(x.get("wal_first", 0) >= x.get("wal_gc_horizon", 1 << 62)
                                               for x in st.values())
        if not poll(caught_up, 60):
            problems.append(f"GC did not reach the horizon within 60 s: "
                            f"{[(x.get('wal_first'), x.get('wal_gc_horizon')) for x in shard_status(sock).values()]}")
    return problems


# ------------------------------------------------------------------- checks
def read_table(tmp):
    out = os.path.join(tmp, "got.jsonl")
    r = subprocess.run(["node", CHECK, os.path.join(tmp, "t.lance"), "--out", out], capture_output=True,
                       text=True, timeout=300)
    if r.returncode != 0:
        return None, r.stderr + r.stdout
    rows = {}
    for line in open(out):
        o = json.loads(line)
        rows[int(o["id"])] = (o["name"], o["v"])
    return rows, ""


def inspect_wal(tmp):
    r = subprocess.run(["node", os.path.join(HERE, "split_brain_wal.mjs"), os.path.join(tmp, "t.lance")],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        return None, r.stderr
    return json.loads(r.stdout)["shards"], ""


def check_table(label, model, rows):
    by_id = {}
    for w in model.writes:
        by_id.setdefault(w.id, []).append(w)
    missing, stale, ghosts, extra, present_unknown = [], [], [], [], 0
    for i, ws in by_id.items():
        last = max((k for k, w in enumerate(ws) if w.state == "acked"), default=-1)
        allowed = {ws[last].name} if last >= 0 else set()
        allowed |= {w.name for w in ws[last + 1:] if w.state == "unknown"}
        got = rows.get(i)
        if got is None:
            if last >= 0:
                missing.append(f"id {i}: acked {ws[last].name} absent")
            continue
        name, v = got
        if name not in allowed:
            if any(w.name == name and w.state == "refused" for w in ws):
                ghosts.append(f"id {i}: refused write {name} is the final value")
            else:
                stale.append(f"id {i}: {name} (allowed {sorted(allowed)})")
        elif v != float(name.rsplit("-", 1)[1]):
            stale.append(f"id {i}: {name} with v {v}")
        elif last < 0 or name != ws[last].name:
            present_unknown += 1
    extra = [i for i in rows if i not in by_id]
    n_ids_acked = sum(1 for ws in by_id.values() if any(w.state == "acked" for w in ws))
    check(f"[{label}] every acked id is present with its last acked value ({n_ids_acked} ids)",
          not missing and not stale, "\n".join((missing + stale)[:20]))
    check(f"[{label}] no refused write is in the table, no id that was never sent",
          not ghosts and not extra, "\n".join(ghosts[:20] + [f"extra id {i}" for i in extra[:10]]))
    return {"ids": len(by_id), "rows_read": len(rows), "unknown_final": present_unknown,
            "acked_missing_or_stale": len(missing) + len(stale), "refused_final": len(ghosts), "extra_ids": len(extra)}


def check_wal(label, model, shards, owners, uuids, third_party):
    """owners: uuid -> {epoch: writer letter}; third_party: letter for
    epochs no daemon logged (LanceDB), or None (then they are an error)."""
    problems = []
    counts = {"entries": 0, "data_entries": 0, "sentinels": 0, "epochs": 0, "manifest_versions": 0}
    where = {}  # (id, name) -> number of WAL data entries holding it
    for uuid, s in shards.items():
        b = uuids.get(uuid, uuid)
        P = lambda t: problems.append(f"bucket {b}: {t}")
        for x in s["bad"]:
            P(x)
        wal, man = s["wal"], s["manifests"]
        counts["entries"] += len(wal)
        if not ARGS.gc and [e["pos"] for e in wal] != list(range(1, len(wal) + 1)):
            P(f"WAL positions are not 1..{len(wal)}: holes at "
              f"{sorted(set(range(1, wal[-1]['pos'] + 1)) - {e['pos'] for e in wal})[:10] if wal else []}")
        if ARGS.gc and man:
            last = max(man, key=lambda m: m["version"])
            horizon = min(last["replay_after"], last["last_seen"])
            counts["gc_horizon_sum"] = counts.get("gc_horizon_sum", 0) + horizon
            above = [e["pos"] for e in wal if e["pos"] >= horizon]
            if wal and above != list(range(horizon, wal[-1]["pos"] + 1)) and above:
                P(f"WAL positions from the horizon {horizon} up are not contiguous: {above[:10]}...")
            for e in wal:
                if e["pos"] < horizon and not e["sentinel"]:
                    P(f"entry {e['pos']} (epoch {e['epoch']}) with rows sits below the GC horizon {horizon} "
                      f"after GC passed it: a write into a freed slot")
                if e["pos"] < horizon and e["sentinel"]:
                    counts["sentinels_below_horizon"] = counts.get("sentinels_below_horizon", 0) + 1
        epochs_m = [m["epoch"] for m in man]
        counts["manifest_versions"] += len(man)
        counts["epochs"] += len(set(epochs_m))
        # with --gc, history GC deletes the oldest shard-manifest versions: what is
        # left must be one run without holes up to the newest
        lo = min((m["version"] for m in man), default=1) if ARGS.gc else 1
        if [m["version"] for m in man] != list(range(lo, lo + len(man))):
            P(f"manifest versions are not {lo}..{lo + len(man) - 1}")
        if epochs_m != sorted(epochs_m):
            P(f"manifest epochs decrease over versions: {epochs_m}")
        ra = [m["replay_after"] for m in man]
        if ra != sorted(ra):
            P(f"replay_after decreases over versions: {ra}")
        sentinel_at = {}
        prev = None
        for e in wal:
            if e["epoch"] is None:
                P(f"entry {e['pos']} has no writer_epoch")
                continue
            if e["sentinel"]:
                counts["sentinels"] += 1
                if e["rows"]:
                    P(f"sentinel at {e['pos']} holds rows")
                if e["epoch"] in sentinel_at:
                    P(f"epoch {e['epoch']} has two sentinels ({sentinel_at[e['epoch']]}, {e['pos']})")
                sentinel_at.setdefault(e["epoch"], e["pos"])
            elif e["rows"]:
                counts["data_entries"] += 1
            if prev is not None and e["epoch"] < prev["epoch"]:
                P(f"entry {e['pos']} epoch {e['epoch']} sits above entry {prev['pos']} of epoch {prev['epoch']}")
            prev = e
            # (--gc: the manifests of epochs below the oldest version left are collected)
            if e["epoch"] not in epochs_m and not (ARGS.gc and epochs_m and e["epoch"] < min(epochs_m)):
                P(f"entry {e['pos']}: epoch {e['epoch']} was never claimed in the manifest history")
        for ep, p in sentinel_at.items():
            if any(e["epoch"] is not None and e["epoch"] < ep for e in wal if e["pos"] > p):
                P(f"an entry of an epoch below {ep} sits above {ep}'s sentinel at {p}")
            if any(e["epoch"] is not None and e["epoch"] >= ep for e in wal if e["pos"] < p):
                P(f"an entry of epoch >= {ep} sits below {ep}'s sentinel at {p}")
        own = owners.get(uuid, {})
        for e in wal:
            if e["epoch"] is None or e["sentinel"] or not e["rows"]:
                continue
            if e["epoch"] >= 2 and e["epoch"] not in sentinel_at:
                P(f"entry {e['pos']}: epoch {e['epoch']} wrote data without a fence sentinel")
            who = own.get(e["epoch"], third_party)
            if who is None:
                P(f"entry {e['pos']}: epoch {e['epoch']} was claimed by no writer we know")
            for id_, name, tomb in e["rows"]:
                where.setdefault((int(id_), name), []).append(f"bucket {b} pos {e['pos']} epoch {e['epoch']}")
                if who is not None and (name is None or name[0] != who):
                    P(f"entry {e['pos']} (epoch {e['epoch']}, owner {who}) holds {name} of writer {name and name[0]}")
        for m in man:
            later = [e["pos"] for e in wal if e["epoch"] is not None and e["epoch"] > m["epoch"]]
            if later and m["replay_after"] >= min(later):
                P(f"manifest v{m['version']} (epoch {m['epoch']}) covers position {m['replay_after']}, "
                  f"past the first entry of a later epoch ({min(later)})")
        if third_party is None:
            for ep in sorted(set(epochs_m) - set(own)):
                P(f"epoch {ep} is in the manifest history but neither daemon logged claiming it")
    check(f"[{label}] WAL and manifests: every entry readable, positions and versions without holes, "
          f"epochs monotone in position and version, nothing below a later sentinel's epoch above it, "
          f"replay_after only over positions its epoch held, each data entry's rows from its epoch's owner",
          not problems, "\n".join(problems[:30]))
    lost, resurrected, twice = [], [], []
    for w in model.writes:
        at = where.get((w.id, w.name), [])
        n = len(at)
        if w.state == "acked" and (n > 1 or (n == 0 and not ARGS.gc)):
            (lost if n == 0 else twice).append(f"{w.name} (id {w.id}) acked, in {n} entries {at}")
        elif w.state == "refused" and n != 0:
            resurrected.append(f"{w.name} (id {w.id}) refused ({w.why}), in {at}")
        elif w.state == "unknown" and n > 1:
            twice.append(f"{w.name} (id {w.id}) unknown, in {at}")
    check(f"[{label}] every acked write is in " + ("at most one WAL entry (GC deleted the others' entries)"
          if ARGS.gc else "exactly one WAL entry") + ", no refused write in any",
          not lost and not resurrected and not twice, "\n".join((lost + resurrected + twice)[:30]))
    bad_entries = {a for w in model.writes if w.state == "refused" for a in where.get((w.id, w.name), [])}
    counts.update(wal_problems=len(problems), acked_not_in_wal=len(lost), refused_in_wal=len(resurrected),
                  entries_with_refused=len(bad_entries),
                  in_wal_twice=len(twice))
    counts["_details"] = lost + resurrected + twice
    return counts


def summarize(label, model, extra):
    st = {"acked": 0, "refused": 0, "unknown": 0, None: 0}
    codes = {}
    for w in model.writes:
        st[w.state] += 1
        if w.state == "refused":
            codes[w.code] = codes.get(w.code, 0) + 1
    check(f"[{label}] replies account for every row exactly once, in order ({len(model.writes)} rows)",
          st[None] == 0 and not model.violations, "\n".join(model.violations[:20]) + f"\nin flight: {st[None]}")
    parts = [f"acked={st['acked']}", f"refused={st['refused']}", f"unknown={st['unknown']}"]
    parts += [f"{k}={v}" for k, v in extra.items()]
    parts += [f"refused_{k}={v}" for k, v in sorted(codes.items())]
    note(f"counts[{label}]: " + " ".join(parts))
    return st


# ---------------------------------------------------------------- variant 1
def variant_daemons(tmp, seed):
    label = "daemons"
    rng = random.Random(seed)
    model = Model()
    stats = {"claims": 0, "claims_ok": 0, "stale_active_claims": 0, "final_claims": 0}
    a, sock_a, port_a = start_daemon(tmp, "a", True)
    check(f"[{label}] memwald A creates the table and holds the 4 buckets", port_a is not None, "\n".join(
        l for l in a.lines if l))
    if port_a is None:
        a.stop()
        return
    stop = threading.Event()
    prods_a, threads = start_producers(model, port_a, "A", seed, stop)
    check(f"[{label}] A acknowledges its first 200 rows", poll(lambda: sum(p.next for p in prods_a) >= 200, 30))
    b, sock_b, port_b = start_daemon(tmp, "b", False)  # B's eager claims fence A mid-stream
    check(f"[{label}] memwald B starts on the same table and claims the 4 buckets", port_b is not None,
          "\n".join(l for l in b.lines if l))
    if port_b is None:
        stop.set()
        a.stop(), b.stop()
        return
    prods_b, tb = start_producers(model, port_b, "B", seed, stop)
    threads += tb
    socks = {"A": sock_a, "B": sock_b}
    holder = {k: "B" for k in range(NBUCKETS)}
    ev = threading.Event()
    claim_log = []
    for _ in range(ARGS.claims):
        ev.wait(rng.uniform(0.08, 0.35))  # the operator's pace
        k = rng.randrange(NBUCKETS)
        to = "A" if holder[k] == "B" else "B"
        _, r, _ = ctl_json(socks[to], "claim", "t", str(k))
        stats["claims"] += 1
        if r.get("ok"):
            stats["claims_ok"] += 1
            holder[k] = to
        claim_log.append((to, k, r.get("ok"), r.get("result", {}).get("epoch") if r.get("ok") else r.get("error")))
    stop.set()
    for t in threads:
        t.join(60)
    # some connections leave with rows in flight: those rows are "unknown"
    for p in prods_a + prods_b:
        if rng.random() < 0.5:
            p.abandon(rng.randint(1, 20))
        else:
            p.close()
    problems = take_all(tmp, model, sock_a, port_a, "A", stats)
    check(f"[{label}] A finally claims every bucket and flushes", not problems, "\n".join(problems))
    if ARGS.gc:
        for who, sock in (("A", sock_a), ("B", sock_b)):
            note(f"{who}'s base history GC: " + " ".join(f"{k}={v}" for k, v in history_gc(sock).items()))
    rc_b, rc_a = b.stop(), a.stop()
    san = sanitizer_lines(a, b)
    check(f"[{label}] both daemons stop on SIGTERM (A exit {rc_a}, B exit {rc_b}), no sanitizer report",
          rc_a == 0 and rc_b == 0 and not san,
          "\n".join(san[:10] + [l for l in (a.lines + b.lines)[-30:] if l]))
    owners = {}
    for who, d in (("A", a), ("B", b)):
        for uuid, ep in d.claimed_epochs():
            owners.setdefault(uuid, {})
            if ep in owners[uuid] and owners[uuid][ep] != who:
                model.violation(f"epoch {ep} of {uuid} logged as claimed by both daemons")
            owners[uuid][ep] = who
    finish(label, tmp, model, stats, owners, sock_a, None, claim_log)


def finish(label, tmp, model, stats, owners, sock, third_party, claim_log):
    uuids = {}
    for uuid in os.listdir(os.path.join(tmp, "t.lance", "_mem_wal")):
        uuids[uuid] = uuid[:8]
    st = summarize(label, model, stats)
    for to, k, ok, what in claim_log[:60]:
        note(f"claim {to} bucket {k}: {'epoch ' + str(what) if ok else 'refused: ' + str(what)}")
    check(f"[{label}] the campaign exercised fencing: rows acked and refused, claims won",
          st["acked"] > 0 and st["refused"] > 0 and stats["claims_ok"] > 0,
          f"acked {st['acked']} refused {st['refused']} claims won {stats['claims_ok']}")
    shards, why = inspect_wal(tmp)
    if shards is None:
        check(f"[{label}] split_brain_wal.mjs reads the WAL", False, why)
        return
    counts = check_wal(label, model, shards, owners, uuids, third_party)
    details = counts.pop("_details")
    if details:  # kept with the scratch directory for a post-mortem
        with open(os.path.join(tmp, "wal_findings.txt"), "w") as f:
            f.write("\n".join(details) + "\n")
    rows, why = read_table(tmp)
    if rows is None:
        check(f"[{label}] LanceDB 0.39.0 reads the table", False, why)
        return
    tc = check_table(label, model, rows)
    note(f"counts[{label}]: " + " ".join(f"{k}={v}" for k, v in {**counts, **tc}.items()))


# ---------------------------------------------------------------- variant 2
class Lance:
    def __init__(self, db_dir):
        self.err = open(os.path.join(db_dir, "lancedb.log"), "w")  # Lance's own warnings when fenced
        self.p = subprocess.Popen(["node", os.path.join(HERE, "split_brain_lance.mjs"), db_dir],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, text=True)
        CHILDREN.append(self.p)

    def send(self, cmd):
        self.p.stdin.write(json.dumps(cmd) + "\n")
        self.p.stdin.flush()

    def recv(self, timeout=120):
        r, _, _ = select.select([self.p.stdout], [], [], timeout)
        line = self.p.stdout.readline() if r else ""
        return json.loads(line) if line else {"ok": False, "error": "no reply from split_brain_lance.mjs"}

    def quit(self):
        try:
            self.send({"op": "quit"})
            return self.p.wait(60)
        except (OSError, subprocess.TimeoutExpired):
            self.p.kill()
            return "killed"


def stale_active_take_back(tmp, label, sock, L, lance_write, lance_result):
    """Nothing writes to A any more and its bucket 0 is flushed empty (so no
    age-bound flush can touch the manifest): LanceDB takes bucket 0, and A
    still believes it ACTIVE at its old epoch (an idle shard notices a fence
    only at its next put). A's `claim` must read the manifest, see LanceDB's
    epoch and take the shard back (replaying LanceDB's rows, which the final
    table check then requires)."""
    k = 0
    seen = {}

    def drained():  # no rows left that a max_memtable_age flush would commit
        _, seen["flush"], _ = ctl_json(sock, "flush", "t", str(k))
        seen["status"] = b = shard_status(sock).get(k, {})
        return b.get("state") == "ACTIVE" and b.get("memtable_rows") == 0 and b.get("frozen") == 0
    check("bucket 0 is flushed empty before LanceDB takes it", poll(drained, 30, interval=0.2),
          f"last flush reply {seen.get('flush')}; bucket 0 {seen.get('status')}")
    r = lance_result(lance_write(k), L.recv())
    st = shard_status(sock).get(k, {})
    lance_epoch = disk_epoch(tmp, st["id"]) if st.get("id") else None
    stale = bool(r.get("ok")) and st.get("state") == "ACTIVE" and lance_epoch is not None \
        and st.get("epoch", 0) < lance_epoch
    _, rc, _ = ctl_json(sock, "claim", "t", str(k))
    after = shard_status(sock).get(k, {})
    took = bool(rc.get("ok")) and after.get("state") == "ACTIVE" and lance_epoch is not None \
        and after.get("epoch", 0) > lance_epoch and after.get("epoch") == disk_epoch(tmp, after["id"])
    check(f"[{label}] claim of a shard A still believes ACTIVE (LanceDB took it while idle) takes it back",
          stale and took, f"LanceDB write {r}; A before the claim {st}; LanceDB's epoch {lance_epoch}; "
          f"claim {rc}; A after {after}")
    L.send({"op": "close", "bucket": k})  # LanceDB's close-time flush now meets A's fence
    L.recv()


def variant_lancedb(tmp, seed):
    label = "lancedb"
    rng = random.Random(seed + 1)
    model = Model()
    stats = {"claims": 0, "claims_ok": 0, "lance_writes": 0, "lance_acked_calls": 0, "lance_refused_calls": 0,
             "stale_active_claims": 0, "final_claims": 0}
    a, sock, port = start_daemon(tmp, "a", True)
    check(f"[{label}] memwald A creates the table and holds the 4 buckets", port is not None,
          "\n".join(l for l in a.lines if l))
    if port is None:
        a.stop()
        return
    stop = threading.Event()
    prods, threads = start_producers(model, port, "A", seed, stop)
    check(f"[{label}] A acknowledges its first 200 rows", poll(lambda: sum(p.next for p in prods) >= 200, 30))
    L = Lance(tmp)
    lids = {k: Ids(50_000_000 + k * 1_000_000, k) for k in range(NBUCKETS)}
    lseq = [0]
    claim_log = []
    events = []

    def lance_write(k):
        ws = []
        for _ in range(rng.randint(5, 30)):
            lseq[0] += 1
            ws.append(Write(lids[k].take(), f"L{k}-{lseq[0]}", lseq[0], "L"))
        for w in ws:
            model.add(w)
        L.send({"op": "write", "bucket": k, "rows": [[w.id, w.name, w.v] for w in ws]})
        stats["lance_writes"] += 1
        return ws

    def lance_result(ws, r):
        for w in ws:
            w.state, w.code = ("acked", None) if r.get("ok") else ("refused", "lancedb")
        stats["lance_acked_calls" if r.get("ok") else "lance_refused_calls"] += 1
        return r

    def our_claim(k):
        # A usually notices the fence through its producer on bucket k first;
        # if not within 2 s, the claim of the shard A still believes ACTIVE
        # reads the manifest, sees LanceDB's epoch and takes the shard back.
        if not poll(lambda: shard_status(sock).get(k, {}).get("state") != "ACTIVE", 2):
            stats["stale_active_claims"] += 1
        _, r, _ = ctl_json(sock, "claim", "t", str(k))
        stats["claims"] += 1
        stats["claims_ok"] += bool(r.get("ok"))
        claim_log.append(("A", k, r.get("ok"), r.get("result", {}).get("epoch") if r.get("ok") else r.get("error")))
        return r

    for rnd in range(ARGS.rounds):
        k = rnd % NBUCKETS
        r = lance_result(lance_write(k), L.recv())
        events.append(f"round {rnd} bucket {k}: LanceDB takes it: {'ok' if r.get('ok') else r.get('error')[:160]}")
        for _ in range(2):
            lance_result(lance_write(k), L.recv())
        mode = rnd % 3
        if mode == 1:  # LanceDB closes cleanly (flush under its epoch), then we take the shard
            L.send({"op": "close", "bucket": k})
            r = L.recv()
            events.append(f"round {rnd}: LanceDB closes: {'ok' if r.get('ok') else r.get('error')[:160]}")
            our_claim(k)
        elif mode == 2:  # we claim while LanceDB's write is in flight
            ws = lance_write(k)
            our_claim(k)
            r = lance_result(ws, L.recv())
            events.append(f"round {rnd}: LanceDB write racing our claim: "
                          f"{'acked' if r.get('ok') else 'refused: ' + r.get('error')[:120]}")
        else:  # we claim; LanceDB's next write must be refused as fenced
            our_claim(k)
            r = lance_result(lance_write(k), L.recv())
            events.append(f"round {rnd}: LanceDB writes after our claim: "
                          f"{'acked' if r.get('ok') else 'refused: ' + r.get('error')[:120]}")
            if r.get("ok") or "fenced" not in r.get("error", ""):
                model.violation(f"round {rnd}: LanceDB's write after our claim was not refused as fenced: {r}")
        if mode != 1:
            L.send({"op": "close", "bucket": k})
            L.recv()
    stop.set()
    for t in threads:
        t.join(60)
    for p in prods:
        if rng.random() < 0.5:
            p.abandon(rng.randint(1, 20))
        else:
            p.close()
    for e in events:
        note(e)
    # the claims above come right after a fence, often while A's old-epoch
    # flush is still in flight: the claim waits for it, never refuses
    check(f"[{label}] every claim of A's during the rounds won", stats["claims_ok"] == stats["claims"],
          f"claims {claim_log}")
    stale_active_take_back(tmp, label, sock, L, lance_write, lance_result)
    problems = take_all(tmp, model, sock, port, "A", stats)
    check(f"[{label}] A finally claims every bucket and flushes", not problems, "\n".join(problems))
    rc_l = L.quit()
    rc_a = a.stop()
    san = sanitizer_lines(a)
    check(f"[{label}] memwald stops on SIGTERM (exit {rc_a}), LanceDB's party exits ({rc_l}), no sanitizer report",
          rc_a == 0 and rc_l == 0 and not san, "\n".join(san[:10] + [l for l in a.lines[-30:] if l]))
    owners = {}
    for uuid, ep in a.claimed_epochs():
        owners.setdefault(uuid, {})[ep] = "A"
    finish(label, tmp, model, stats, owners, sock, "L", claim_log)


def main():
    # MW_TEST=lancedb runs that variant alone (as --variant lancedb does)
    todo = chosen([("daemons", variant_daemons), ("lancedb", variant_lancedb)])
    if not os.path.isdir(os.path.join(SRC, "tests", "interop", "node_modules", "@lancedb", "lancedb")):
        print("not ok 1 - tests/interop/node_modules is missing: run npm install --no-audit --no-fund there")
        print("1..1")
        return 1
    note(f"seed {ARGS.seed}, claims {ARGS.claims}, rounds {ARGS.rounds}, gc {'on' if ARGS.gc else 'off'}")
    t0 = time.monotonic()
    for name, fn in todo:
        if ARGS.variant not in (name, "both"):
            continue
        tmp = tempfile.mkdtemp(prefix=f"memwald-split-{name}{'-gc' if ARGS.gc else ''}-")
        before = len(results)
        try:
            fn(tmp, ARGS.seed)
        except Exception as e:  # a broken scenario fails, never skips
            import traceback
            check(f"[{name}] scenario ran to the end", False, traceback.format_exc() + repr(e))
            for d in DAEMONS:  # a daemon that died or closed connections says why
                note(f"{d.name}: exit code {d.p.poll()}; last log lines:")
                for l in d.lines[-25:]:
                    note(f"  {l}")
        finally:
            for p in CHILDREN:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            CHILDREN.clear()
            DAEMONS.clear()
            e2e_util.inspect_under(tmp)
            if all(results[before:]) and not ARGS.keep:
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                note(f"kept {tmp}")
    note(f"run time {time.monotonic() - t0:.1f} s")
    return plan()


if __name__ == "__main__":
    sys.exit(main())
