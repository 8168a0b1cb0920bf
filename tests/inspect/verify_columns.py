#!/usr/bin/env python3
"""verify_columns.py — `verify` checks every DataFile's fields and
column_indices as LanceDB does before it reads a fragment (issue 26, item 2).

  verify_columns.py INSPECT

data/compacted_nested_before_fix/t.lance is a table memwald compacted
before the fix of issue 26: `id int64, tags list<string>, meta struct<a:
int32, b: string>, v fixed_size_list<float16, 4>`, 300 rows (half with
tags ["x"], half without), flushed, then `memwalctl compact t`; its base
fragment lists the top-level fields as columns 0..3. LanceDB 0.39.0 refuses
to read it ("Non-leaf field 'tags' (id=1) ... has column_index=1, but
non-leaf fields should have column_index=-1 in file format 2.1+"); before
this check verify said `ok: 0 problems` on it.

1. verify exits 1 and names the base data file and the reason.
2. LanceDB itself refuses the same table for the same reason (when
   tests/interop/node_modules is installed; a TAP skip otherwise).
TAP output.
"""
import os
import shutil
import subprocess
import sys
import tempfile

INSPECT = sys.argv[1]
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
TABLE = os.path.join(HERE, "data", "compacted_nested_before_fix", "t.lance")
results = []


def tap(name, ok, detail="", skip=None):
    results.append(ok)
    print(("ok" if ok else "not ok") + f" {len(results)} - {name}" + (f" # SKIP {skip}" if skip else ""))
    if not ok and detail:
        for line in str(detail).splitlines()[:30]:
            print("#   " + line)


def main():
    p = subprocess.run([INSPECT, "verify", TABLE], capture_output=True, text=True, timeout=120)
    out = p.stdout + p.stderr
    want = ("fragment 0's DataFile does not map this file as LanceDB reads it: non-leaf field 'tags' (id=1) "
            "has column_index=1, but non-leaf fields should have column_index=-1 in file format 2.1+")
    tap("verify fails on a nested table compacted before the fix, naming the data file and the reason",
        p.returncode == 1 and any(l.startswith("data/") and want in l for l in out.splitlines())
        and "FAILED: 1 problem;" in out, out)

    modules = os.path.join(ROOT, "tests", "interop", "node_modules", "@lancedb", "lancedb")
    if not os.path.isdir(modules) or shutil.which("node") is None:
        tap("LanceDB refuses the same table", True, skip="tests/interop/node_modules or node missing")
    else:
        scratch = tempfile.mkdtemp(prefix="memwald-verify-columns-")
        t = os.path.join(scratch, "t.lance")
        shutil.copytree(TABLE, t)  # LanceDB may write beside what it opens
        r = subprocess.run(["node", os.path.join(ROOT, "tools", "read-table.mjs"), t], capture_output=True,
                           text=True, timeout=180)
        tap("LanceDB refuses the same table for the same reason",
            r.returncode != 0 and "Non-leaf field 'tags' (id=1)" in r.stderr
            and "non-leaf fields should have column_index=-1" in r.stderr, r.stdout[-500:] + r.stderr[-2000:])
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"1..{len(results)}")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
