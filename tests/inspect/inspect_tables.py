#!/usr/bin/env python3
"""inspect_tables.py — memwal-inspect on every table a test leaves behind.

Every suite that writes tables runs this on them before it removes them
(issue 16: the inspector decodes every artifact the suites produce, and
`verify` passes on every table they leave):

  - the e2e scripts through e2e_util.tidy (it imports this module);
  - the shard tests through tests/common/testutil.c tu_inspect_tables,
    which runs this file as a program;
  - the interop scenarios through tests/interop/run.sh.

For each table found under ROOT (a directory holding `_versions/`; the
SSTable directories inside a table are part of it, not tables of their own):

  1. `memwal-inspect -j -n 2 dump TABLE` exits 0 (every object decoded), its
     output is one JSON array, and it holds as many entries as `verify`
     counted objects: nothing was skipped;
  2. `memwal-inspect -j verify TABLE` reports no problem, or, with --allow
     TEXT, only problems whose text contains TEXT (a test that breaks that
     one invariant on purpose says so).

As a program:

  inspect_tables.py [--inspect PATH] [--allow TEXT] [--min-tables N] ROOT
  inspect_tables.py [--inspect PATH] [--allow TEXT] --table URI [--table URI...]

prints one line per table and exits 0 when every table passed and at least N
were found under ROOT (default 0), else 1; 2 when memwal-inspect cannot be
found. --table names a table itself, a path or an s3:// URI (a table on
object storage, endpoint and credentials from the environment as for
memwal-inspect). The binary is --inspect, else $MW_INSPECT.
"""
import argparse
import json
import os
import subprocess
import sys

TIMEOUT_S = 300  # one dump or verify; a suite's tables are small


def find_tables(root):
    """Every table directory under root (root itself included), sorted. A
    table is a directory holding `_versions/`; the walk does not descend into
    one (its SSTables hold `_versions/` too)."""
    found = []
    for d, dirs, _ in os.walk(root):
        if "_versions" in dirs:
            found.append(d)
            dirs[:] = []
        else:
            dirs.sort()
    return sorted(found)


def _run(inspect, *args):
    p = subprocess.run([inspect, *args], capture_output=True, text=True, timeout=TIMEOUT_S)
    return p.returncode, p.stdout, p.stderr


def inspect_table(inspect, table, allow=None):
    """(ok, summary, detail) for one table: dump --json decodes every object
    and verify finds no problem (or only ones containing allow)."""
    rc, out, err = _run(inspect, "-j", "-n", "2", "dump", table)
    if rc != 0:
        return False, f"dump --json exited {rc}", err
    try:
        shown = len(json.loads(out))
    except ValueError as e:
        return False, "dump --json is not one JSON document", f"{e}\n{out[-2000:]}"
    rc, out, err = _run(inspect, "-j", "verify", table)
    try:
        r = json.loads(out)
    except ValueError:
        return False, f"verify --json exited {rc} without a report", out + err
    objects = r["checked"]["objects"]
    if shown != objects:
        return False, f"dump --json showed {shown} of {objects} objects", err
    problems = r["problems"]
    other = [p for p in problems if allow is None or allow not in p["problem"]]
    listed = "\n".join(f'{p["key"]}: {p["problem"]}' for p in (other or problems))
    if other or r["problems_total"] > len(problems):  # a cut list: the rest is unknown
        return False, f'verify found {r["problems_total"]} problems', listed
    if rc not in (0, 1) or (rc == 1) != bool(problems):
        return False, f"verify exited {rc} with {len(problems)} problems", err
    c = r["checked"]
    allowed = f', {len(problems)} allowed ("{allow}")' if problems else ""
    return True, (f'{objects} objects decoded; verify ok: {c["shards"]} shards, {c["wal_entries"]} WAL '
                  f'entries, {c["sstables"]} SSTables, {c["data_files"]} data files{allowed}'), ""


def inspector(explicit=None, near=None):
    """The memwal-inspect binary: explicit, else $MW_INSPECT, else the one
    a build tree puts beside `near` (<build>/src/memwald ->
    <build>/src/inspect/memwal-inspect); None when none is executable."""
    for cand in (explicit, os.environ.get("MW_INSPECT"),
                 near and os.path.join(os.path.dirname(os.path.abspath(near)), "inspect", "memwal-inspect")):
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", nargs="?")
    ap.add_argument("--table", action="append", default=[])
    ap.add_argument("--inspect")
    ap.add_argument("--allow")
    ap.add_argument("--min-tables", type=int, default=0)
    a = ap.parse_args()
    inspect = inspector(a.inspect)
    if inspect is None:
        print("inspect_tables: memwal-inspect not found (--inspect or MW_INSPECT)", file=sys.stderr)
        return 2
    if a.root is None and not a.table:
        ap.error("a ROOT or --table is required")
    tables = find_tables(a.root) if a.root is not None else []
    ok = len(tables) >= a.min_tables
    tables += a.table
    if not ok:
        print(f"inspect_tables: {len(tables)} tables under {a.root}, expected at least {a.min_tables}",
              file=sys.stderr)
    for t in tables:
        good, summary, detail = inspect_table(inspect, t, a.allow)
        print(f"inspect {'ok' if good else 'FAILED'}: {t}: {summary}", file=sys.stderr)
        if not good:
            print(detail.rstrip(), file=sys.stderr)
        ok = ok and good
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
