#!/usr/bin/env python3
"""encodings.py — interop test lancedb-encodings-read: our data-file reader
against the page encodings LanceDB 0.39.0's own writer picks for data like
make-encodings.mjs's (dictionary pages with an LZ4 block or out-of-line
bitpacking, ConstantLayout values in a page buffer with and without def
levels, FSST strings with the symbol table on, FullZip pages of large strings
(FSST per value) and of binaries).

  encodings.py INSPECT

1. node make-encodings.mjs makes a table; LanceDB's LSM writer flushes
   6000 rows into one SSTable and writes the model (every row by key).
2. The SSTable's pages must use each of those encodings (checked by the
   inspector's page descriptions): if LanceDB stopped choosing one, this test
   says which, as it no longer proves its read.
3. `memwal-inspect -j -n all show` decodes every column and every row must
   equal the model's row of its key; all 6000 keys, once each.
4. The whole table decodes and verifies (inspect_tables.py).

The scratch folder is removed on success and kept (path printed) on failure.
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "inspect"))
import inspect_tables  # noqa: E402

# column -> the page description text its encoding must contain
WANT = {
    "grp": ["dictionary(", "general(lz4, flat(64))"],
    "city": ["dictionary(", "general(lz4, variable("],
    "konst": ["constant{value in page buffer 0, layers"],
    "konst2": ["constant{value in page buffer 0, def levels in page buffer 2"],
    "note": ["fsst(", "symbols"],
    "v": ["dictionary("],
    "w": ["dictionary(1500): out_of_line_bitpacking(64"],
    "big": ["full_zip{values: fsst(", "symbols", "bits_per_offset: 32"],
    "blob": ["full_zip{values: variable(", "bits_per_offset: 32"],
}
ROWS = 6000


def fail(msg):
    print(f"FAIL: {msg}")
    return 1


def main():
    inspect = sys.argv[1]
    if not os.path.isdir(os.path.join(HERE, "node_modules", "@lancedb", "lancedb")):
        return fail(f"{HERE}/node_modules is missing: run 'npm install --no-audit --no-fund' in tests/interop first")
    scratch = tempfile.mkdtemp(prefix="mw-encodings.")
    print(f"scratch: {scratch}")
    model_path = os.path.join(scratch, "model.jsonl")
    p = subprocess.run(["node", os.path.join(HERE, "make-encodings.mjs"), os.path.join(scratch, "db"), model_path],
                       capture_output=True, text=True, timeout=240)
    if p.returncode != 0:
        return fail(f"make-encodings.mjs exited {p.returncode}: {p.stderr[-2000:]}")
    table = os.path.join(scratch, "db", "t.lance")
    model = {}
    with open(model_path) as f:
        for line in f:
            r = json.loads(line)
            model[r["id"]] = r
    ssts = sorted(glob.glob(os.path.join(table, "_mem_wal", "*", "*", "data", "*.lance")))
    if len(ssts) != 1:
        return fail(f"expected LanceDB's one SSTable data file, found {ssts}")
    p = subprocess.run([inspect, "-j", "-n", "all", "show", ssts[0]], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        return fail(f"memwal-inspect show {ssts[0]} exited {p.returncode}: {p.stderr[-2000:]}")
    d = json.loads(p.stdout)
    cols = {c["field"]: c for c in d["columns"]}
    bad = 0
    for name, texts in WANT.items():
        encs = [pg["encoding"] for pg in cols[name]["pages"]]
        ok = any(all(t in e for t in texts) for e in encs)
        print(f"{'ok' if ok else 'not ok'}: {name} pages use {texts}: {encs}")
        bad += not ok
    if d["rows"] != ROWS:
        return fail(f"the SSTable holds {d['rows']} rows, not {ROWS}")
    ids = cols["id"]["values"]
    if sorted(ids) != list(range(ROWS)):
        return fail(f"the SSTable's keys are not 0..{ROWS - 1} once each")
    wrong = []
    for i, k in enumerate(ids):
        m = model[k]
        for name in WANT:
            got = cols[name]["values"][i]
            want = m[name]
            if name == "grp":
                got = None if got is None else str(got)
            if name == "blob" and got is not None:  # the inspector shows binary as 0x + hex
                got = got[2:] if got.startswith("0x") else got
            if got != want:
                wrong.append(f"row {i} key {k} column {name}: read {got!r}, wrote {want!r}")
    print(f"{'ok' if not wrong else 'not ok'}: {ROWS} rows x {len(WANT)} columns read as LanceDB wrote them"
          + (f": {len(wrong)} wrong, first {wrong[:5]}" if wrong else ""))
    bad += bool(wrong)
    ok, summary, detail = inspect_tables.inspect_table(inspect, table, None)
    print(f"{'ok' if ok else 'not ok'}: memwal-inspect dump + verify of the table: {summary} {detail if not ok else ''}")
    bad += not ok
    if bad:
        return fail(f"{bad} checks failed; scratch kept: {scratch}")
    shutil.rmtree(scratch)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
