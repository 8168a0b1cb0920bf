#!/usr/bin/env python3
"""e2e: the generative differential test (issue 26). Random cases (schemas
over every type memwald supports, flat and nested three levels deep; 1 to
tens of thousands of rows; null, empty and one-item patterns weighted toward
the edges; updates and deletes) are written by memwald and by LanceDB
0.39.0's own writer; LanceDB reads both, and they must be equal, row for row
and value for value (exact.mjs), with the same Arrow types.

A case is a pure function of its seed (tests/e2e/gendiff.mjs says what it
draws). Cases run in batches: one daemon serves a batch's tables, one table
per case, each with its own schema, spec and zstd settings
(compaction and GC off: the test decides when SSTables are made and
compacted). For each batch:

  prepare   gendiff.mjs makes each case's requests, its model (the live
            rows after each phase) and LanceDB's reference table (its own
            writer: createTable, mergeInsert, delete), read by LanceDB after
            each phase; the reference must equal the model. The next
            batch's preparation runs while this batch is at the daemon.
  flush1    phase 1 (inserts) over one connection, SYNC, `memwalctl flush`;
            LanceDB reads memwald's table: equal to the reference after p1
  flush2    phase 2 (updates, inserts, deletes), SYNC, flush: a second
            SSTable; equal to the reference after p2
  compact1  `memwalctl compact`: both SSTables into the base table; equal to
            the reference after p2
  compact2  phase 3, `memwalctl compact` (a flush, then a compaction into a
            base that already holds rows, with deletes); equal to the
            reference after p3
  verify    SIGTERM (exit 0), then memwal-inspect dump and verify on every
            table (tests/inspect/inspect_tables.py).

One TAP point per case; a failure prints the seed, the schema, each stage
that differed and how (LanceDB's error, or the first differing row and
column), and the command that reruns that one seed.

  test_gendiff.py MEMWALD MEMWALCTL [--cases N] [--seconds S] [--seed BASE]
             [--batch B] [--long] [--keep]

Case i of a run has seed BASE + i. Defaults come from the environment, so
`meson test gendiff` takes them too: MW_GENDIFF_CASES (default 200; meson
says 50 in a sanitizer build through MW_GENDIFF_DEFAULT_CASES),
MW_GENDIFF_SECONDS (stop starting batches after this long; with it and no
case count, cases are unlimited), MW_GENDIFF_SEED (default: a random base,
printed), MW_GENDIFF_BATCH (cases per daemon, default 25), MW_GENDIFF_LONG=1
(more of the largest row counts). Rerun one seed:
`test_gendiff.py MEMWALD MEMWALCTL --seed S --cases 1` (or MW_GENDIFF_SEED=S
MW_GENDIFF_CASES=1 meson test -C build gendiff). The night's run:
`MW_GENDIFF_LONG=1 MW_GENDIFF_SECONDS=28800 MW_GENDIFF_CASES=0 meson test
-C build gendiff -t 0` (docs/reliability.md).
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
from e2e_util import Client, Daemon, check, ctl, plan, port_of, run_main  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
NODE = os.path.join(HERE, "gendiff.mjs")
# stage -> the phase whose reference it must equal
STAGES = [("flush1", 1), ("flush2", 2), ("compact1", 2), ("compact2", 3)]
NODE_TIMEOUT_S = 1800  # one node run over a batch
SHOWN_ROWS = 2  # differing rows printed per stage
FIRST_BATCH = 5  # the first batch is small: the next one's preparation starts sooner
CHILDREN = []  # processes killed if the script ends early (run_main)


def env_int(name, default):
    v = os.environ.get(name, "")
    return int(v) if v.strip() else default


def read_lines(path):
    """The file's lines, split at \\n only (str.splitlines also splits at
    U+2028, U+0085 and others, which JSON.stringify leaves raw in strings)."""
    with open(path, encoding="utf-8", newline="") as f:
        text = f.read()
    return text[:-1].split("\n") if text else []


def wrap_schema(schema, width=150):
    """The schema as config lines: pieces cut at commas (at any depth: the
    config joins continuation lines with ", "), each under width."""
    pieces, cur = [], ""
    for part in schema.split(", "):
        if cur and len(cur) + 2 + len(part) > width:
            pieces.append(cur)
            cur = part
        else:
            cur = f"{cur}, {part}" if cur else part
    pieces.append(cur)
    return "\n  ".join(pieces)


class Worker:
    """One `gendiff.mjs serve` process: node and LanceDB load once per run.
    submit() sends a command line, wait() returns its reply's error (None
    when it succeeded); one command at a time. Node's stderr goes to log."""

    def __init__(self, log, env):
        self.logpath, self.env = log, env
        self.log = open(log, "w")
        self.start()

    def start(self):
        self.p = subprocess.Popen(["node", NODE, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.log, env=self.env, text=True)
        self.busy = False
        CHILDREN.append(self.p)

    def died(self):
        """When the process has died (LanceDB aborts the whole process on
        some files): its exit and the tail of its log, and a new process
        started; else None."""
        if self.p.poll() is None:
            return None
        self.log.flush()
        with open(self.logpath, errors="replace") as f:
            tail = [l for l in f.read().splitlines() if " WARN " not in l and not re.match(r"\s+(\d+:|at) ", l)][-6:]
        why = f"exit {self.p.returncode}: " + " | ".join(tail)
        self.start()
        return why

    def submit(self, *words):
        assert not self.busy, "one command at a time"
        self.p.stdin.write(" ".join(map(str, words)) + "\n")
        self.p.stdin.flush()
        self.busy = True

    def wait(self, timeout=NODE_TIMEOUT_S):
        assert self.busy, "no command submitted"
        self.busy = False
        r, _, _ = select.select([self.p.stdout], [], [], timeout)
        line = self.p.stdout.readline() if r else ""
        if not line and self.p.poll() is None:
            self.p.kill()  # hung: a new process takes the next command
            self.p.wait()
            return f"gendiff.mjs serve gave no reply within {timeout} s: {self.died()}"
        if not line:
            return f"gendiff.mjs serve died: {self.died()}"
        reply = json.loads(line)
        return None if reply["ok"] else reply["error"][-1500:]

    def run(self, *words):
        self.submit(*words)
        return self.wait()

    def close(self):
        if self.p.poll() is None:
            self.p.stdin.close()
            try:
                self.p.wait(60)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.log.close()


def write_config(bdir, cases):
    conf = os.path.join(bdir, "memwald.conf")
    out = [f"""[daemon]
data_dir = {bdir}/data
admin_socket = {bdir}/admin.sock
listen = 127.0.0.1:0
log_level = info
"""]
    for c in cases:
        s = c["seed"]
        out.append(f"""[table s{s}]
uri = {bdir}/s{s}/mw/t.lance
create = true
spec = {c['spec']}
primary_key = id
schema = {wrap_schema(c['schema'])}
sstable_zstd = {str(c['sstable_zstd']).lower()}
compaction_zstd = {str(c['compaction_zstd']).lower()}
compaction = false
gc = false
max_memtable_age_ms = 0
""")
    with open(conf, "w") as f:
        f.write("\n".join(out))
    return conf


def send_phase(port, bdir, cases, phase):
    """Every case's phase requests over one connection (REPLIES ERRORS),
    then SYNC. {seed: [problems]} for the cases that got an ERR, and the
    SYNC line (None when none came)."""
    payload, owner, line = [b"REPLIES ERRORS\n"], [], 1
    total = 0
    for c in cases:
        s = c["seed"]
        data = open(os.path.join(bdir, f"s{s}", f"p{phase}.req"), "rb").read()
        n = data.count(b"\n")
        payload += [f"USE s{s}\n".encode(), data]
        owner.append((line + 2, line + 1 + n, s))  # lines of this case's requests
        line += 1 + n
        total += n
    payload.append(b"SYNC\n")
    cl = Client(port, timeout=600)
    sender = threading.Thread(target=cl.send, args=(b"".join(payload),), daemon=True)
    sender.start()  # replies are read meanwhile, so neither side can stall
    got = cl.lines_until(lambda l: l.startswith("SYNC"), timeout=600)
    sender.join(60)
    cl.close()
    errs = {}
    for l in got:
        if l is None or not l.startswith("ERR "):
            continue
        no = int(l.split()[1])
        who = next((s for a, b, s in owner if a <= no <= b), None)
        errs.setdefault(who, []).append(f"phase {phase}: memwald refused a request: {l[:400]}")
    return errs, got[-1], total


def first_diff(got, want):
    """Where two sorted lists of exact rows differ: a few lines of text."""
    out = [f"memwald's table read {len(got)} rows, LanceDB's {len(want)}"]
    gk = {json.dumps(json.loads(l)["id"]): l for l in got}
    wk = {json.dumps(json.loads(l)["id"]): l for l in want}
    missing = [k for k in wk if k not in gk]
    extra = [k for k in gk if k not in wk]
    if missing:
        out.append(f"{len(missing)} keys missing from memwald's table, first {missing[:3]}")
    if extra:
        out.append(f"{len(extra)} keys only in memwald's table, first {extra[:3]}")
    shown = 0
    for k, w in wk.items():
        g = gk.get(k)
        if g is None or g == w:
            continue
        if shown == SHOWN_ROWS:
            out.append("...")
            break
        shown += 1
        go, wo = json.loads(g), json.loads(w)
        for col in wo:
            if go.get(col) != wo[col]:
                out.append(f"id {k}: column {col}: memwald {json.dumps(go.get(col))[:300]} "
                           f"LanceDB {json.dumps(wo[col])[:300]}")
    return out


def reference(cdir, phase):
    """The rows a stage after `phase` must read back as: LanceDB's read of
    its own table, or the generator's model where LanceDB's own writer
    failed (ref.error) or its table differs from the model. LanceDB 0.39.0
    does both on some nested shapes: it cannot read back a not-null list in
    a nullable struct it wrote ("Structural validity has 15 entries for an
    array with 17 values", seed 548673347), and its mergeInsert loses
    large_binary items of a list in a struct (`[[]]` for 60 rows, seed
    52611718), where memwald's table equals the model. A test bug in the
    model would show as memwald differing from it, so nothing is excused.
    Returns (path, why the model stands in, or None)."""
    ref, model = os.path.join(cdir, f"r{phase}.jsonl"), os.path.join(cdir, f"m{phase}.jsonl")
    if not os.path.exists(ref):
        err = os.path.join(cdir, "ref.error")
        why = open(err).read().strip().splitlines()[0][:200] if os.path.exists(err) else "no reference"
        return model, f"LanceDB's own writer failed: {why}"
    want, model_rows = read_lines(ref), read_lines(model)
    if want != model_rows:
        diff = first_diff(want, model_rows)
        return model, (f"LanceDB's own table after phase {phase} differs from the model: "
                       + (diff[1] if len(diff) > 1 else diff[0]).replace("memwald", "LanceDB's").replace(
                           " LanceDB {", " model {")[:300])
    return ref, None


def judge_stage(cdir, stage, phase):
    """Problems of one stage: LanceDB's read of memwald's table against the
    reference (LanceDB's read of its own table, or the model)."""
    err = os.path.join(cdir, f"{stage}.error")
    if os.path.exists(err):
        return [f"{stage}: LanceDB cannot read memwald's table: {open(err).read().strip()[:600]}"]
    ref, why = reference(cdir, phase)
    got, want = read_lines(os.path.join(cdir, f"{stage}.jsonl")), read_lines(ref)
    against = " (against the model)" if why else ""
    probs = [f"{stage}{against}: " + l for l in first_diff(got, want)] if got != want else []
    rtypes = os.path.join(cdir, "rtypes.json")
    if not os.path.exists(rtypes):
        return probs
    gt, rt = json.load(open(os.path.join(cdir, f"{stage}.types.json"))), json.load(open(rtypes))
    if gt and rt and gt != rt:
        d = [f"{a} vs {b}" for a, b in zip(gt, rt) if a != b]
        probs.append(f"{stage}: LanceDB returns other Arrow types (memwald's vs LanceDB's): {'; '.join(d)[:600]}")
    return probs


def model_notes(cdir):
    """Why the model stood in for LanceDB's table, phase by phase (none
    when LanceDB's own writer gave the model's rows throughout)."""
    return sorted({why for p in (1, 2, 3) for _, why in [reference(cdir, p)] if why})


class Run:
    def __init__(self, a):
        self.a = a
        self.tmp = tempfile.mkdtemp(prefix="memwald-gendiff-")
        self.failed_seeds = []
        self.cases_done = 0
        self.rows = 0
        env = dict(os.environ, MW_GENDIFF_LONG="1" if a.long else "0")
        self.prep = Worker(os.path.join(self.tmp, "prepare.log"), env)
        self.reader = Worker(os.path.join(self.tmp, "read.log"), env)
        self.inspect = e2e_util.inspect_tables.inspector(near=a.memwald)
        self.took_s = {}  # seconds spent per step, over the run

    def timed(self, what, t0):
        self.took_s[what] = self.took_s.get(what, 0.0) + time.monotonic() - t0

    def ctl_step(self, sock, what, *args):
        rc, out, err = ctl(sock, *args, timeout=1800)
        return None if rc == 0 else f"memwalctl {' '.join(args)} ({what}) failed: rc={rc} {out} {err}".strip()

    def read(self, bdir, stage, seeds, probs):
        """LanceDB reads each case's table, one table a command: a reader
        that dies on a table (LanceDB aborts the process on some files) is
        that case's problem, and a new reader goes on with the next."""
        for s in seeds:
            e = self.reader.run("read", bdir, stage, s)
            if e:
                probs[s].append(f"{stage}: LanceDB's reader failed on memwald's table: {e[-800:]}")

    def batch(self, bdir, seeds):
        """One batch at the daemon, its cases judged; prepare already ran."""
        cases, probs = [], {s: [] for s in seeds}
        for s in seeds:
            cdir = os.path.join(bdir, f"s{s}")
            try:
                cases.append(json.load(open(os.path.join(cdir, "case.json"))))
            except (OSError, ValueError) as e:
                why = os.path.join(cdir, "case.error")
                probs[s].append("gendiff.mjs prepare made no case: "
                                + (open(why).read()[-1500:] if os.path.exists(why) else str(e)))
                continue
        conf = write_config(bdir, cases)
        sock = os.path.join(bdir, "admin.sock")
        d = Daemon(["-c", conf])
        CHILDREN.append(d.p)
        line = d.wait_line("listening on", timeout=120)
        broken = None if line else "the daemon did not start: " + "\n".join(d.lines[-20:])
        port = port_of(line) if line else None
        steps = [("flush1", 1, "flush"), ("flush2", 2, "flush"), ("compact1", None, "compact"),
                 ("compact2", 3, "compact")]
        for stage, phase, cmd in steps:
            if broken:
                for c in cases:  # nothing stands in for a stage that did not run
                    probs[c["seed"]].append(f"{stage}: not run, the batch broke before it")
                break
            if phase:
                t0 = time.monotonic()
                errs, sync, total = send_phase(port, bdir, cases, phase)
                self.timed("send", t0)
                for s, e in errs.items():
                    if s is None:
                        broken = "; ".join(e)
                    else:
                        probs[s] += e
                if sync is None or not sync.startswith("SYNC"):
                    broken = f"phase {phase}: no SYNC reply ({sync}): " + "\n".join(d.lines[-20:])
                    break
                self.rows += total
            t0 = time.monotonic()
            # every table at once; when that fails, table by table, so that
            # one table's failure is that case's
            if not broken and self.ctl_step(sock, stage, cmd):
                for c in cases:
                    e = self.ctl_step(sock, stage, cmd, f"s{c['seed']}")
                    if e:
                        probs[c["seed"]].append(e)
            self.timed(cmd, t0)
            t0 = time.monotonic()
            if not broken:
                self.read(bdir, stage, [c["seed"] for c in cases], probs)
            self.timed("read", t0)
            if broken:
                for c in cases:
                    probs[c["seed"]].append(f"{stage}: not judged, the batch broke: {broken[:300]}")
                break
            ph = dict(STAGES)[stage]
            for c in cases:
                cdir = os.path.join(bdir, f"s{c['seed']}")
                if os.path.exists(os.path.join(cdir, f"{stage}.jsonl")) or os.path.exists(
                        os.path.join(cdir, f"{stage}.error")):
                    probs[c["seed"]] += judge_stage(cdir, stage, ph)
        t0 = time.monotonic()
        rc = d.stop(timeout=300)
        with open(os.path.join(bdir, "memwald.log"), "w") as f:
            f.write("\n".join(d.lines) + "\n")
        if rc != 0 and not broken:  # a sanitizer's report: its first lines and its summary
            report = [l for l in d.lines if "ERROR: " in l or "SUMMARY: " in l or "runtime error" in l]
            first = next((i for i, l in enumerate(d.lines) if "ERROR: " in l or "leak of" in l), len(d.lines))
            broken = (f"the daemon exited {rc} on SIGTERM (its log: {bdir}/memwald.log): "
                      + "\n".join(report[:3] + d.lines[first:first + 12] + d.lines[-3:]))
        for c in cases:
            t = os.path.join(bdir, f"s{c['seed']}", "mw", "t.lance")
            if self.inspect is None:
                probs[c["seed"]].append("memwal-inspect not found (MW_INSPECT)")
            elif os.path.isdir(t):
                ok, summary, detail = e2e_util.inspect_tables.inspect_table(self.inspect, t)
                if not ok:
                    lines = detail.strip().splitlines()
                    more = [f"... {len(lines) - 6} more"] if len(lines) > 6 else []
                    probs[c["seed"]].append(f"memwal-inspect: {summary}: " + "\n".join(lines[:6] + more))
        self.timed("stop+inspect", t0)
        if broken:
            check(f"batch of seeds {seeds[0]}..{seeds[-1]}: the daemon runs every step", False, broken)
        for c in cases:
            self.report(bdir, c, probs[c["seed"]])
        for s in seeds:
            if s not in {c["seed"] for c in cases}:
                self.report(bdir, {"seed": s}, probs[s])
        return not broken and all(not p for p in probs.values())

    def report(self, bdir, c, probs):
        s = c["seed"]
        self.cases_done += 1
        what = (f"{c.get('columns', '?')} columns, {'/'.join(map(str, c.get('requests', [])))} "
                f"requests, {c.get('spec', '?')}")
        if probs:
            self.failed_seeds.append(s)
            shown = "\n".join(probs).splitlines()
            if len(shown) > e2e_util.DETAIL_LINES - 4:
                shown = shown[:e2e_util.DETAIL_LINES - 5] + [f"... {len(shown) - e2e_util.DETAIL_LINES + 5} more lines"]
            detail = [f"schema: {c.get('schema')}",
                      f"spec {c.get('spec')}, sstable_zstd {c.get('sstable_zstd')}, compaction_zstd "
                      f"{c.get('compaction_zstd')}, requests per phase {c.get('requests')}, live rows "
                      f"{c.get('live')}"] + shown + [
                      f"seed {s}: rerun with: {sys.argv[0]} MEMWALD MEMWALCTL --seed {s} --cases 1"
                      f"{' --long' if self.a.long else ''} --keep"]
            check(f"seed {s}: {what}", False, "\n".join(detail))
        else:
            notes = model_notes(os.path.join(bdir, f"s{s}"))
            against = f"the model ({'; '.join(notes)})" if notes else "LanceDB's table"
            check(f"seed {s}: {what}: equal to {against} after flush, flush, compaction, compaction; verify ok", True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("memwald")
    ap.add_argument("memwalctl")
    ap.add_argument("--cases", type=int, default=env_int("MW_GENDIFF_CASES", -1))
    ap.add_argument("--seconds", type=float, default=env_int("MW_GENDIFF_SECONDS", 0))
    ap.add_argument("--seed", type=int, default=env_int("MW_GENDIFF_SEED", -1))
    ap.add_argument("--batch", type=int, default=env_int("MW_GENDIFF_BATCH", 25))
    ap.add_argument("--long", action="store_true", default=os.environ.get("MW_GENDIFF_LONG") == "1")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    a = ap.parse_args()
    e2e_util.MEMWALD, e2e_util.MEMWALCTL = a.memwald, a.memwalctl
    if a.cases < 0:  # meson sets the default: 200, or 50 in a sanitizer build
        a.cases = 0 if a.seconds > 0 else env_int("MW_GENDIFF_DEFAULT_CASES", 200)
    if a.cases == 0 and a.seconds <= 0:
        ap.error("--cases 0 (unlimited) needs --seconds")
    if not os.path.isdir(os.path.join(HERE, "..", "interop", "node_modules", "apache-arrow-21")):
        print("Bail out! tests/interop/node_modules is missing or old (npm install in tests/interop)")
        return 1
    base = a.seed if a.seed >= 0 else random.SystemRandom().randrange(1 << 31)
    print(f"# gendiff: base seed {base}, {a.cases or 'unlimited'} cases, "
          f"{f'{a.seconds:.0f} s, ' if a.seconds else ''}batches of {a.batch}{', long' if a.long else ''}")
    sys.stdout.flush()
    run = Run(a)
    t0 = time.monotonic()
    n = a.cases or (1 << 31)
    seeds = [(base + i) % (1 << 32) for i in range(min(n, a.batch, FIRST_BATCH))]
    next_i = len(seeds)
    bno = 0
    run.prep.submit("prepare", os.path.join(run.tmp, f"b{bno}"), *seeds)
    ok = True
    while seeds:
        bdir = os.path.join(run.tmp, f"b{bno}")
        t1 = time.monotonic()
        e = run.prep.wait()
        if e:  # the cases it made are judged; the others report no case
            print(f"# gendiff.mjs prepare: {e.splitlines()[-1] if e.strip() else e}")
        run.timed("waiting for prepare", t1)
        # the next batch is prepared while this one is at the daemon
        more = (not a.seconds or time.monotonic() - t0 < a.seconds) and next_i < n
        nseeds = [(base + i) % (1 << 32) for i in range(next_i, min(n, next_i + a.batch))] if more else []
        next_i += len(nseeds)
        if nseeds:
            run.prep.submit("prepare", os.path.join(run.tmp, f"b{bno + 1}"), *nseeds)
        good = run.batch(bdir, seeds)
        ok = ok and good
        if good and not a.keep:
            shutil.rmtree(bdir, ignore_errors=True)
        seeds, bno = nseeds, bno + 1
    run.prep.close()
    run.reader.close()
    took = time.monotonic() - t0
    print(f"# gendiff: {run.cases_done} cases (seeds {base}..{(base + run.cases_done - 1) % (1 << 32)}), "
          f"{run.rows} requests to memwald, {len(run.failed_seeds)} failed, {took:.0f} s")
    print("# seconds per step: " + ", ".join(f"{k} {v:.1f}" for k, v in run.took_s.items()))
    if run.failed_seeds:
        print(f"# failed seeds: {' '.join(map(str, run.failed_seeds))}")
    if ok and not a.keep:
        shutil.rmtree(run.tmp, ignore_errors=True)
    else:
        print(f"# kept {run.tmp}")
    return plan()


if __name__ == "__main__":
    run_main(main, CHILDREN)
