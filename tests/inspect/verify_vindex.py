#!/usr/bin/env python3
"""verify_vindex.py — memwal-inspect decodes the per-SSTable vector index
files and `verify` checks each SSTable's index against its data file
(issue 27, suite `inspect`, TAP).

  verify_vindex.py MEMWAL_INSPECT MW_SST_TOOL

1. show: the eight index files LanceDB 0.39.0's writer flushed
   (tests/lance/data/vindex/*/{index,auxiliary}.idx: l2 with and without
   null vectors, cosine, dot), in text and in JSON with every row: the
   columns LanceDB's reader needs, index.idx's rows cut by lance:hnsw's
   level_offsets, level 0 naming nodes 0..n-1 in order, every neighbor a
   node with a distance beside it, auxiliary.idx one ascending _rowid per
   node.
2. Our SSTables with indexes (mw_sst_tool model --vindex on a copy of the
   unsharded-small vector): verify passes and checks every index; `show
   TABLE KEY` decodes each index file the same way as in 1.
3. Corruptions, each in a fresh copy, verify exits 1 naming the object and
   the reason: one SSTable's index files replaced by another SSTable's (it
   names rows that have no vector and misses others), a truncated
   index.idx, a missing auxiliary.idx.
4. data/vindex_maintained/t.lance, made by LanceDB 0.39.0 (`node
   tests/interop/vindex.mjs make DIR --index hnswsq --base 40 --rows 60
   --dim 8 --nulls 9`: its write spec maintains vec_idx, its own writer
   flushed 60 rows, every 9th vector null, with its index): verify passes
   and checks LanceDB's index; the SSTable replaced by ours without an
   index (mw_sst_tool vector --mode replace) is named: LanceDB's vector
   search would miss its 54 vector rows; replaced by ours with the index
   (--vindex), verify passes again.
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

INSPECT, SST_TOOL = sys.argv[1], sys.argv[2]
VECTORS = os.environ.get("MW_VECTORS")
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
LANCE_FILES = os.path.join(ROOT, "tests", "lance", "data", "vindex")
MAINTAINED = os.path.join(HERE, "data", "vindex_maintained", "t.lance")
results = []


def tap(name, ok, detail=""):
    results.append(bool(ok))
    print(("ok" if ok else "not ok") + f" {len(results)} - {name}")
    if not ok and detail:
        for line in str(detail).splitlines()[:30]:
            print("#   " + line)
    sys.stdout.flush()


def run(*args):
    p = subprocess.run([INSPECT, *args], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def graph_facts(shown):
    """What is wrong with a shown index.idx (JSON), or ''."""
    names = [f["name"] for f in shown["schema"]]
    if names != ["__vector_id", "__neighbors", "_distance"]:
        return f"columns {names}"
    hnsw = json.loads(json.loads(shown["schema_metadata"]["lance:hnsw"])[0])
    offs = hnsw["level_offsets"]
    n = offs[1]
    if shown["rows"] != offs[-1] or len(offs) != hnsw["params"]["max_level"] + 1:
        return f"{shown['rows']} rows, level_offsets {offs}"
    vid, nbr, dist = (c["values"] for c in shown["columns"])
    if len(vid) != shown["rows"] or vid[:n] != list(range(n)):
        return "level 0 does not name nodes 0..n-1 in order"
    for r in range(shown["rows"]):
        if len(nbr[r]) != len(dist[r]) or any(not 0 <= x < n or x == vid[r] for x in nbr[r]):
            return f"row {r}: neighbors {nbr[r]}, distances {dist[r]}"
    return ""


def aux_facts(shown, nodes=None):
    names = [f["name"] for f in shown["schema"]]
    if names != ["_rowid", "__sq_code"]:
        return f"columns {names}"
    rowid = shown["columns"][0]["values"]
    if len(rowid) != shown["rows"] or any(b <= a for a, b in zip(rowid, rowid[1:])):
        return "_rowid is not one ascending row id per node"
    if nodes is not None and shown["rows"] != nodes:
        return f"{shown['rows']} nodes, index.idx has {nodes}"
    return ""


def show_pair(label, *where):
    """show (text, then JSON with every row) of index.idx and auxiliary.idx
    at where + file name; one TAP point for the pair."""
    bad, nodes = [], None
    for name, facts in (("index.idx", graph_facts), ("auxiliary.idx", aux_facts)):
        args = list(where[:-1]) + [where[-1] + name]
        rc, out, err = run("show", *args)
        if rc != 0:
            bad.append(f"show {name}: exit {rc} {err}")
            continue
        rc, out, err = run("-j", "-n", "all", "show", *args)
        try:
            shown = json.loads(out)
        except ValueError:
            bad.append(f"show -j {name}: exit {rc}, not JSON: {err}")
            continue
        why = facts(shown) if name == "index.idx" else facts(shown, nodes)
        if shown.get("kind") != "data_file" or why:
            bad.append(f"{name}: kind {shown.get('kind')}; {why}")
        if name == "index.idx" and not why:
            nodes = json.loads(json.loads(shown["schema_metadata"]["lance:hnsw"])[0])["level_offsets"][1]
    tap(f"show {label}: index.idx and auxiliary.idx decoded, graph and rows as LanceDB reads them", not bad,
        "\n".join(bad))


def verify(table):
    p = subprocess.run([INSPECT, "verify", table], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


def expect_problem(name, table, key_part, reason_part):
    rc, out = verify(table)
    hit = [ln for ln in out.splitlines() if key_part in ln and reason_part in ln]
    tap(f"verify names {name}", rc == 1 and hit, out)


def sstable_indices(table):
    """{sstable dir: its _indices/<uuid>/ folder} for every SSTable with one."""
    out = {}
    for d in glob.glob(os.path.join(table, "_mem_wal", "*", "*_gen_*", "_indices", "*")):
        out[d.split(os.sep)[-3]] = d
    return out


def ours(scratch):
    """A copy of the unsharded-small vector with three SSTables of ours, each
    with its vector index."""
    t = os.path.join(scratch, f"ours{len(results)}", "t.lance")
    shutil.copytree(os.path.join(VECTORS, "unsharded-small", "t.lance"), t)
    p = subprocess.run([SST_TOOL, "model", t, "--scenario", "nulls", "--seed", "3", "--model-out",
                        os.path.join(os.path.dirname(t), "model.jsonl"), "--vindex", "vec_idx:vec:l2"],
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError(p.stderr)
    return t


def main():
    if not VECTORS or not os.path.isdir(VECTORS):
        print("Bail out! MW_VECTORS is not set or missing (../shared/vectors)")
        return 1
    for case in sorted(os.listdir(LANCE_FILES)):
        show_pair(f"LanceDB's {case}", os.path.join(LANCE_FILES, case) + os.sep)
    scratch = tempfile.mkdtemp(prefix="memwald-verify-vindex-")
    t = ours(scratch)
    rc, out = verify(t)
    tap("verify passes on our SSTables and checks their 3 vector indexes",
        rc == 0 and "3 SSTable vector indexes checked" in out, out)
    idx = sstable_indices(t)
    for sst in sorted(idx):
        key = os.path.relpath(idx[sst], t) + os.sep
        show_pair(f"TABLE KEY, our {sst}", t, key)

    t = ours(scratch)
    idx = sstable_indices(t)
    a, b = sorted(idx)[:2]
    for f in ("index.idx", "auxiliary.idx"):
        shutil.copy(os.path.join(idx[a], f), os.path.join(idx[b], f))
    expect_problem("an SSTable index that is another SSTable's (rows named wrongly, rows missed)", t,
                   f"{b}/_indices/", "vector index 'vec_idx': ")
    t = ours(scratch)
    idx = sstable_indices(t)
    g = os.path.join(idx[sorted(idx)[0]], "index.idx")
    with open(g, "r+b") as f:
        f.truncate(os.path.getsize(g) // 2)
    expect_problem("a truncated index.idx", t, "/index.idx", "vector index 'vec_idx': index.idx")
    t = ours(scratch)
    idx = sstable_indices(t)
    os.unlink(os.path.join(idx[sorted(idx)[-1]], "auxiliary.idx"))
    expect_problem("a missing auxiliary.idx", t, "/auxiliary.idx", "vector index storage is missing")

    rc, out = verify(MAINTAINED)
    tap("verify passes on LanceDB's table whose writer flushed an SSTable with its index, and checks that index",
        rc == 0 and "1 SSTable vector index checked" in out, out)
    for vindex in (False, True):
        t = os.path.join(scratch, f"maintained{int(vindex)}", "t.lance")
        shutil.copytree(MAINTAINED, t)
        p = subprocess.run([SST_TOOL, "vector", t, "--mode", "replace", "--seed", "7"]
                           + (["--vindex", "vec_idx:vec:l2"] if vindex else []), capture_output=True, text=True,
                           timeout=120)
        rc, out = verify(t)
        if vindex:
            tap("LanceDB's SSTable replaced by ours with the index: verify passes and checks it",
                p.returncode == 0 and rc == 0 and "1 SSTable vector index checked" in out, p.stderr + out)
        else:
            hit = [ln for ln in out.splitlines() if "_gen_1/: no index of the maintained vector index 'vec_idx': "
                   "LanceDB's vector search misses its 54 vector rows" in ln]
            tap("LanceDB's SSTable replaced by ours without an index: verify names the SSTable and the rows a "
                "search would miss", p.returncode == 0 and rc == 1 and hit, p.stderr + out)
    if all(results):
        shutil.rmtree(scratch, ignore_errors=True)
    else:
        print(f"# kept {scratch}")
    print(f"1..{len(results)}")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
