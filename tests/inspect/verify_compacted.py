#!/usr/bin/env python3
"""verify_compacted.py — `verify` on a table compaction has been through, and
the corruptions of compacted_sstables it must name (issue 16 §3:
compacted_sstables consistent with the shard manifests).

  verify_compacted.py INSPECT ENGINE_TOOL

1. engine_tool's `compact` scenario on a copy of the unsharded-small vector:
   SSTables flushed, then compacted into the base table (the latest base
   manifest's MemWAL index records the generations). verify: no problem.
2. The shard's manifests removed: compacted_sstables names a shard without
   one.
3. The base version before compaction copied as the next version:
   compacted_sstables went down (GC deletes what it records, so a version
   recording less would lose rows).
TAP output; the scratch folder is removed when every check passed.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

INSPECT, TOOL = sys.argv[1], sys.argv[2]
VECTORS = os.environ.get("MW_VECTORS", "")
results = []


def tap(name, ok, detail=""):
    results.append(ok)
    print(("ok" if ok else "not ok") + f" {len(results)} - {name}")
    if not ok and detail:
        for line in str(detail).splitlines()[:30]:
            print("#   " + line)


def verify(t):
    p = subprocess.run([INSPECT, "verify", t], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


def expect_problem(name, t, key_part, reason_part):
    rc, out = verify(t)
    tap(f"verify names {name}", rc == 1 and any(key_part in l and reason_part in l for l in out.splitlines()), out)


def compacted_table(scratch, name):
    t = os.path.join(scratch, name)
    shutil.copytree(os.path.join(VECTORS, "unsharded-small", "t.lance"), t)
    for d, _, fs in os.walk(t):
        os.chmod(d, 0o755)
        for f in fs:
            os.chmod(os.path.join(d, f), 0o644)
    p = subprocess.run([TOOL, "model", t, "--scenario", "compact", "--model-out", os.path.join(scratch, name + ".model")],
                       capture_output=True, text=True, timeout=240)
    return t, p


def main():
    scratch = tempfile.mkdtemp(prefix="mw-verify-compacted-")
    try:
        t, p = compacted_table(scratch, "a.lance")
        tap("engine_tool compacts the SSTables into the base table", p.returncode == 0, p.stderr[-2000:])
        latest = json.loads(subprocess.run([INSPECT, "-j", "show", t, "_versions/latest_version_hint.json"],
                                           capture_output=True, text=True).stdout)["version"]
        base = json.loads(subprocess.run([INSPECT, "-j", "-n", "all", "dump", t, "_versions/"],
                                         capture_output=True, text=True).stdout)
        recorded = [o for o in base if o["kind"] == "dataset_manifest" and o["version"] == latest]
        tap("the latest base manifest records compacted SSTables",
            bool(recorded) and "compacted_sstables" in json.dumps(recorded[0]), json.dumps(recorded)[:1500])
        rc, out = verify(t)
        tap("verify of the compacted table: no problem", rc == 0, out)

        t2 = os.path.join(scratch, "b.lance")
        shutil.copytree(t, t2)
        shard = os.listdir(os.path.join(t2, "_mem_wal"))[0]
        shutil.rmtree(os.path.join(t2, "_mem_wal", shard, "manifest"))
        expect_problem("a compacted shard without manifests", t2, "_versions/", f"names shard {shard}, which has no shard manifest")

        t3 = os.path.join(scratch, "c.lance")
        shutil.copytree(t, t3)
        vd = os.path.join(t3, "_versions")
        name = lambda v: f"{2**64 - 1 - v}.manifest"
        first = min(int(n.split(".")[0]) for n in os.listdir(vd) if n.endswith(".manifest"))
        older = 2**64 - 1 - first - 1  # the version before the latest
        shutil.copy(os.path.join(vd, name(older)), os.path.join(vd, name(latest + 1)))
        expect_problem("compacted_sstables going down", t3, name(latest + 1), "compacted_sstables of shard")
    finally:
        if all(results):
            shutil.rmtree(scratch, ignore_errors=True)
        else:
            print(f"# scratch kept: {scratch}")
    print(f"1..{len(results)}")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
