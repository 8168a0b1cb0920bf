#!/usr/bin/env python3
"""e2e: compaction of a table with every column type memwald supports
(issue 26, bug 2). The types test's table (tests/e2e/types_accept.mjs:
narrow ints, float16, timestamps, dates, times, decimals, binaries,
fixed_size_lists, lists of those, structs with a struct and a list inside,
large lists), every column nullable so that it takes deletes, written by the
real daemon over JSON and ARROW in three phases. Each phase has upserts and
deletes (of LanceDB's base rows, of rows an earlier compaction wrote, of new
ones), then `memwalctl flush` and `memwalctl compact t`: LanceDB 0.39.0 reads
every value back exactly (exact.mjs) after each compaction, and the table
passes `memwal-inspect verify` at the end (which checks every DataFile's
fields and column_indices against the file, as LanceDB does).

Before the fix, compaction recorded a list or struct column as column i of
its base fragment, and LanceDB refused the table ("Non-leaf field 'li' ...
has column_index=..., but non-leaf fields should have column_index=-1 in
file format 2.1+").

  test_daemon_types_compact.py MEMWALD MEMWALCTL [--s3]

Local disk: a table LanceDB makes (defaults: plain SSTables, zstd base
fragments), and one memwald bootstraps from the same schema (create = true;
zstd SSTables and WAL, plain base fragments). --s3 (run through tests/s3/with-s3.sh): the same
two, in a bucket of their own. TAP output.
"""
import json
import os
import signal
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import e2e_util  # noqa: E402
from test_daemon_types import merged, node, send_phase, start, top_level_fields  # noqa: E402
from e2e_util import check, chosen, ctl, plan  # noqa: E402

e2e_util.MEMWALD, e2e_util.MEMWALCTL = sys.argv[1], sys.argv[2]
HERE = os.path.dirname(os.path.abspath(__file__))
S3 = "--s3" in sys.argv[3:]
PHASES = ("c1", "c2", "c3")


def lancedb_reads(table_dir, out, state, what):
    """LanceDB's rows (types_accept.mjs read, into the local file out) are
    exactly the model's."""
    r = node("read", table_dir, out)
    got = open(out).read().splitlines() if r.returncode == 0 else []
    want = [state[k] for k in sorted(state, key=int)]
    diff = [(a, b) for a, b in zip(got, want) if a != b][:2]
    check(f"{what}: LanceDB reads exactly the {len(want)} rows", r.returncode == 0 and got == want,
          r.stderr[-2000:] + f"\ngot {len(got)} rows, want {len(want)}; first differences {diff}")


def compact_phase(sock, table_dir, pdir, phase, port, state, tag):
    got, rows = send_phase(port, pdir, phase)
    check(f"[{tag}] {phase}: every request is taken (no ERR), SYNC {rows}", got == [f"SYNC {rows}"], got[:5])
    rc, out, err = ctl(sock, "flush", timeout=120)
    check(f"[{tag}] {phase}: memwalctl flush", rc == 0, out + err)
    rc, out, err = ctl(sock, "compact", "t", timeout=180)
    check(f"[{tag}] {phase}: memwalctl compact t", rc == 0 and "compacted" in out, out + err)
    merged(state, os.path.join(pdir, f"{phase}.model.jsonl"))
    out = os.path.join(os.path.dirname(sock), f"{phase}.read.jsonl")
    lancedb_reads(table_dir, out, state, f"[{tag}] after {phase}'s compaction")


def run(top, tag, table_dir, table_keys, pdir, state):
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
    for phase in PHASES:
        compact_phase(sock, table_dir, pdir, phase, port, state, tag)
    rc = d.stop()
    check(f"[{tag}] daemon exits 0 on SIGTERM", rc == 0, "\n".join(d.lines[-20:]))


def main():
    # MW_TEST=memwald-made runs the bootstrapped table alone
    todo = dict(chosen([("lancedb-made", True), ("memwald-made", True)]))
    if not os.path.isdir(os.path.join(HERE, "..", "interop", "node_modules", "apache-arrow-21")):
        print("Bail out! tests/interop/node_modules is missing or old (npm install in tests/interop)")
        return 1
    tmp = tempfile.mkdtemp(prefix="memwald-e2e-types-compact-")
    bucket = None
    if S3:
        from s3_util import s3
        if not os.environ.get("MW_S3_ENDPOINT"):
            check("an S3 endpoint (run through tests/s3/with-s3.sh)", False)
            return plan()
        bucket = f"mw-e2e-tc-{os.getpid()}"
        check("bucket created", s3("PUT", "/" + bucket) == 200)
        root = f"s3://{bucket}"
    else:
        root = tmp
    lance_dir = f"{root}/db/t.lance"
    r = node("create", os.path.dirname(lance_dir), "--nullable")
    check("LanceDB creates the table with every type, every column nullable", r.returncode == 0, r.stderr[-2000:])
    if r.returncode != 0:
        return plan()
    schema = r.stdout.strip()
    fields = "\n  ".join(top_level_fields(schema))
    pdir = os.path.join(tmp, "plan")
    r = node("plan", pdir, "--compaction")
    check("the requests and the model are written", r.returncode == 0, r.stderr[-2000:])
    base = os.path.join(tmp, "base.jsonl")
    r = node("read", lance_dir, base)
    check("LanceDB reads its 20 base rows", r.returncode == 0 and len(open(base).read().splitlines()) == 20,
          r.stderr[-2000:])
    state = {json.loads(l)["id"]: l.rstrip("\n") for l in open(base)}
    if "lancedb-made" in todo:
        run(os.path.join(tmp, "lancedb-made"), "lancedb-made", lance_dir, f"schema = {fields}\n", pdir, state)
    # compression the other way round: zstd SSTables and WAL, plain base fragments
    if "memwald-made" in todo:
        run(os.path.join(tmp, "memwald-made"), "memwald-made", f"{root}/boot/t.lance",
            f"create = true\nspec = unsharded\nschema = {fields}\n"
            "sstable_zstd = true\ncompaction_zstd = false\nwal_compression = zstd\n", pdir, {})
    if S3:
        from s3_util import drop_bucket
        e2e_util.inspect_under(lance_dir)
        if "memwald-made" in todo:
            e2e_util.inspect_under(f"{root}/boot/t.lance")
        if all(e2e_util.results):
            drop_bucket(bucket)
        else:
            print(f"# kept bucket {bucket}")
    e2e_util.tidy(tmp)
    return plan()


if __name__ == "__main__":
    sys.exit(main())
