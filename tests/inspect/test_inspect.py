#!/usr/bin/env python3
"""test_inspect.py — memwal-inspect shows every artifact and verify names
every corruption (suite `inspect`, TAP).

  test_inspect.py MEMWAL_INSPECT MW_SST_TOOL

1. show: every file of every golden vector (../shared/vectors: WAL entries,
   shard manifests, hints, dataset manifests, transactions, deletion files,
   _pk_index pages, bloom filters, data files), the legacy v1 goldens and a
   table of our own SSTables with zone seeds, in text and in --json: exit 0,
   valid JSON with the expected kind, and the facts the vectors' README
   states (WAL epochs and fence sentinels, manifest versions, row counts,
   seeds valid).
2. verify: every vector and our seeded table pass (exit 0).
3. corruptions, each in a fresh copy: verify exits 1 and names the object
   key with the reason, for: a missing WAL entry above the replay point, a
   WAL epoch going down, a second fence sentinel, a missing shard manifest
   version, a truncated shard manifest, an SSTable dropped from the manifest
   before compaction, a version hint ahead of the manifests, a truncated data
   file, a missing base data file, a zeroed bloom filter, a missing _pk_index
   file, a deletion file that does not match, a missing SSTable, a flipped
   byte in a zone seed, a misnamed transaction file.
4. usage and errors: exit 2 for bad usage, 3 for a missing table.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

INSPECT, SST_TOOL = sys.argv[1], sys.argv[2]
VECTORS = os.environ.get("MW_VECTORS")
SRC = os.environ.get("MW_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
results = []


def tap(name, ok, detail=""):
    results.append(ok)
    print(("ok" if ok else "not ok") + f" {len(results)} - {name}")
    if not ok and detail:
        for line in str(detail).splitlines()[:30]:
            print("#   " + line)
    sys.stdout.flush()


def run(*args):
    p = subprocess.run([INSPECT, *args], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def files_under(root):
    out = []
    for d, _, fs in os.walk(root):
        for f in fs:
            out.append(os.path.relpath(os.path.join(d, f), root))
    return sorted(out)


EXPECT_KIND = [
    ("/wal/", "wal_entry"), ("/manifest/version_hint.json", "version_hint"), (".binpb", "shard_manifest"),
    ("latest_version_hint.json", "version_hint"), (".manifest", "dataset_manifest"), (".txn", "transaction"),
    ("_deletions/", "deletion_bitmap"), ("page_data.lance", "pk_index_data"),
    ("page_lookup.lance", "pk_index_lookup"), ("bloom_filter.bin", "bloom_filter"), (".lance", "data_file"),
]


def kind_for(rel):
    for frag, k in EXPECT_KIND:
        if frag in rel:
            return k
    return None


def show_all(table, label):
    """show every object of a table, text and JSON; returns {key: json}."""
    bad, shown = [], {}
    for rel in files_under(table):
        rc, out, err = run("show", table, rel)
        if rc != 0 or not out:
            bad.append(f"{rel}: text exit {rc}: {err.strip()}")
            continue
        rc, out, err = run("--json", "--rows", "3", "show", table, rel)
        try:
            j = json.loads(out)
        except ValueError as e:
            bad.append(f"{rel}: --json is not JSON ({e}): {err.strip()}")
            continue
        if rc != 0 or j.get("kind") != kind_for(rel):
            bad.append(f"{rel}: exit {rc}, kind {j.get('kind')} (want {kind_for(rel)})")
        shown[rel] = j
    tap(f"show {label}: {len(shown)} objects decode in text and JSON", not bad, "\n".join(bad))
    return shown


def check_vector_facts(name, shown):
    """What ../shared/vectors/README.md says about the vectors."""
    bad = []
    wal = {k: v for k, v in shown.items() if v["kind"] == "wal_entry"}
    for k, v in wal.items():
        if v.get("writer_epoch") is None:
            bad.append(f"{k}: no writer_epoch")
        if v["fence_sentinel"] != (v["rows"] == 0 and v["schema"] == []):
            bad.append(f"{k}: fence_sentinel {v['fence_sentinel']} with {v['rows']} rows")
    if name == "unsharded-epochs":
        sentinels = sorted((v["position"], v["writer_epoch"]) for v in wal.values() if v["fence_sentinel"])
        if sentinels != [(3, 2), (6, 3)]:
            bad.append(f"sentinels {sentinels}, README: positions 3 (epoch 2) and 6 (epoch 3)")
    for k, v in shown.items():
        if v["kind"] == "shard_manifest" and v["version"] != v.get("version_in_name"):
            bad.append(f"{k}: version {v['version']} in a file named {v.get('version_in_name')}")
        if v["kind"] == "data_file" and "/data/" in k and "_gen_" in k:
            if v["rows"] <= 0 or not v["columns"] or not v["columns"][0]["pages"]:
                bad.append(f"{k}: no rows or pages")
        if v["kind"] == "dataset_manifest" and "_mem_wal" not in k and v["version"] == 3:
            idx = [i for i in v.get("indices", []) if i["name"] == "__lance_mem_wal"]
            if not idx or "mem_wal_details" not in idx[0]:
                bad.append(f"{k}: MemWAL index details not decoded")
        if v["kind"] == "pk_index_data" and not v.get("pk_index", {}).get("sorted_by_key_then_row"):
            bad.append(f"{k}: pk index not reported sorted")
    tap(f"show {name}: facts of the vectors README", not bad, "\n".join(bad))


def copy(src, scratch, name):
    dst = os.path.join(scratch, name)
    shutil.copytree(src, dst)
    for d, _, fs in os.walk(dst):
        os.chmod(d, 0o755)
        for f in fs:
            os.chmod(os.path.join(d, f), 0o644)
    return dst


def bitrev(n):
    return "".join("1" if n >> i & 1 else "0" for i in range(64))


def shard_dir(table):
    root = os.path.join(table, "_mem_wal")
    return os.path.join(root, sorted(os.listdir(root))[0])


def verify(table):
    return run("verify", table)


def expect_problem(name, table, key_part, reason_part):
    rc, out, err = verify(table)
    lines = [l for l in out.splitlines() if key_part in l and reason_part in l]
    tap(f"verify names {name}", rc == 1 and bool(lines), f"exit {rc}\n{out}{err}")


# --- protobuf helpers for one corruption (a shard manifest without an SSTable)
def varint(b, i):
    x = s = 0
    while True:
        c = b[i]
        i += 1
        x |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return x, i


def put_varint(x):
    out = bytearray()
    while x >= 0x80:
        out.append(x & 0x7F | 0x80)
        x >>= 7
    out.append(x)
    return bytes(out)


def drop_first_sstable(data, new_version):
    out, i, dropped = bytearray(), 0, False
    while i < len(data):
        start = i
        key, i = varint(data, i)
        tag, wire = key >> 3, key & 7
        if wire == 0:
            v, i = varint(data, i)
            if tag == 1:
                out += put_varint(1 << 3) + put_varint(new_version)
                continue
        elif wire == 2:
            n, i = varint(data, i)
            i += n
            if tag == 8 and not dropped:
                dropped = True
                continue
        else:
            raise ValueError("wire type")
        out += data[start:i]
    return bytes(out)


def main():
    if not VECTORS or not os.path.isdir(VECTORS):
        print("Bail out! MW_VECTORS is not set or missing")
        return 1
    scratch = tempfile.mkdtemp(prefix="mw-inspect-")
    try:
        names = sorted(d for d in os.listdir(VECTORS) if os.path.isdir(os.path.join(VECTORS, d, "t.lance")))
        for name in names:
            shown = show_all(os.path.join(VECTORS, name, "t.lance"), name)
            check_vector_facts(name, shown)
            rc, out, err = verify(os.path.join(VECTORS, name, "t.lance"))
            tap(f"verify {name}: no problem", rc == 0, out + err)
        # the legacy v1 goldens
        for f in ("types.lance", "batches.lance"):
            p = os.path.join(SRC, "tests", "lance", "data", "legacy_v1", f)
            rc, out, err = run("--json", "show", p)
            ok = rc == 0 and json.loads(out)["format"].startswith("lance v1 legacy")
            tap(f"show legacy v1 {f}", ok, out[:500] + err)
        # our SSTables with zone seeds on top of a vector
        ours = copy(os.path.join(VECTORS, "unsharded-epochs", "t.lance"), scratch, "ours.lance")
        p = subprocess.run([SST_TOOL, "model", ours, "--scenario", "nulls", "--seed", "3", "--zone-seeds",
                            "--seed-rows-per-zone", "64", "--model-out", os.path.join(scratch, "m.jsonl")],
                           capture_output=True, text=True)
        tap("mw_sst_tool writes seeded SSTables", p.returncode == 0, p.stderr)
        shown = show_all(ours, "seeded SSTables")
        seeds = [s for v in shown.values() if v["kind"] == "data_file" for s in v.get("zone_seeds", [])]
        tap(f"show: {len(seeds)} zone seeds of our SSTables all valid (v1, checked against the values)",
            len(seeds) >= 15 and all(s["valid"] and s["version"] == 1 for s in seeds), json.dumps(seeds)[:2000])
        rc, out, err = verify(ours)
        tap("verify our seeded table: no problem", rc == 0 and "15 zone seeds" in out, out + err)

        # owner records (shard/owners.h): decoded, and no verify problem; a
        # malformed one is named by show
        t = copy(os.path.join(VECTORS, "unsharded-small", "t.lance"), scratch, "owners.lance")
        shard = os.path.basename(shard_dir(t))
        od = os.path.join(t, "_memwald", "owners")
        os.makedirs(od)
        with open(os.path.join(od, shard + ".json"), "w") as f:
            f.write('{"node":"88a28b2c87c33c815a76ce0802881b6c","address":"127.0.0.1:7070","epoch":1,'
                    '"pid":42,"host":"db-3","at_ms":1764633600000}\n')
        rc, out, err = run("--json", "show", t, f"_memwald/owners/{shard}.json")
        j = json.loads(out) if rc == 0 else {}
        tap("show an owner record: node, address, epoch", rc == 0 and j.get("kind") == "owner_record"
            and j.get("address") == "127.0.0.1:7070" and j.get("epoch") == 1, out + err)
        rc, out, err = verify(t)
        tap("verify a table with an owner record: no problem", rc == 0, out + err)
        # a put that never finished (LanceDB fenced mid-put leaves one like it)
        stage = os.path.join(shard_dir(t), "wal", bitrev(9) + ".arrow.tmp.e992b1c0e6ed4a9dafbe45f25a181df3#1")
        with open(stage, "wb") as f:
            f.write(b"\xff\xff\xff\xffhalf")
        rel = os.path.relpath(stage, t)
        rc, out, err = run("--json", "show", t, rel)
        tap("show a staging file: kind staging", rc == 0 and json.loads(out).get("kind") == "staging", out + err)
        rc, out, err = verify(t)
        tap("verify a table with a staging file: no problem", rc == 0, out + err)
        rc, out, err = run("--json", "dump", t)
        tap("dump a table with a staging file and an owner record: every object decodes", rc == 0, err)
        with open(os.path.join(od, shard + ".json"), "w") as f:
            f.write('{"node":"x"}')
        rc, out, err = run("show", t, f"_memwald/owners/{shard}.json")
        tap("show a malformed owner record: exit 1, naming it", rc == 1 and "owner record malformed" in err, err)

        # --- corruptions
        def fresh(vector="unsharded-epochs", base=None):
            return copy(base or os.path.join(VECTORS, vector, "t.lance"), scratch, f"c{len(results)}.lance")

        t = fresh("unsharded-unflushed")  # replay point 0, WAL 1..3
        os.remove(os.path.join(shard_dir(t), "wal", bitrev(2) + ".arrow"))
        expect_problem("a missing WAL entry", t, bitrev(3) + ".arrow", "WAL positions 2..2 are missing")

        t = fresh()
        wal = os.path.join(shard_dir(t), "wal")
        shutil.copy(os.path.join(wal, bitrev(1) + ".arrow"), os.path.join(wal, bitrev(9) + ".arrow"))
        expect_problem("a WAL epoch going down", t, bitrev(9) + ".arrow", "writer epoch 1 after an entry of epoch 3")

        t = fresh()
        wal = os.path.join(shard_dir(t), "wal")
        shutil.copy(os.path.join(wal, bitrev(6) + ".arrow"), os.path.join(wal, bitrev(9) + ".arrow"))
        expect_problem("a second fence sentinel", t, bitrev(9) + ".arrow", "a second fence sentinel for epoch 3")

        t = fresh()  # epochs 1 1 2s 2 2 3s 3 3 (s = sentinel): epoch 3's data now comes before its sentinel
        wal = os.path.join(shard_dir(t), "wal")
        shutil.copy(os.path.join(wal, bitrev(7) + ".arrow"), os.path.join(wal, bitrev(5) + ".arrow"))
        expect_problem("data of an epoch before its fence sentinel", t, bitrev(5) + ".arrow",
                       "data of epoch 3 before that epoch's fence sentinel (position 6)")

        t = fresh("unsharded-unflushed")  # replay point 0, epoch 1 at 1..3; epoch 3's data at 4, no sentinel
        src = os.path.join(shard_dir(os.path.join(VECTORS, "unsharded-epochs", "t.lance")), "wal", bitrev(7) + ".arrow")
        shutil.copy(src, os.path.join(shard_dir(t), "wal", bitrev(4) + ".arrow"))
        expect_problem("an epoch taking over without a fence sentinel", t, bitrev(4) + ".arrow",
                       "epoch 3 took over the shard without a fence sentinel")
        expect_problem("a WAL entry of an epoch no manifest claimed", t, bitrev(4) + ".arrow",
                       "above every epoch claimed in the manifests (1)")

        t = fresh()  # the first base version again under the next version's name
        vd = os.path.join(t, "_versions")
        vers = sorted(2**64 - 1 - int(n.split(".")[0]) for n in os.listdir(vd) if n.endswith(".manifest"))
        bad_name = f"{2**64 - 1 - (vers[-1] + 1)}.manifest"
        shutil.copy(os.path.join(vd, f"{2**64 - 1 - vers[0]}.manifest"), os.path.join(vd, bad_name))
        expect_problem("a base manifest under another version's name", t, "_versions/" + bad_name,
                       f"holds version {vers[0]}, its name says {vers[-1] + 1}")

        t = fresh()
        os.remove(os.path.join(shard_dir(t), "manifest", bitrev(4) + ".binpb"))
        expect_problem("a missing shard manifest version", t, bitrev(5) + ".binpb", "versions jump from 3 to 5")

        t = fresh()
        m = os.path.join(shard_dir(t), "manifest", bitrev(2) + ".binpb")
        with open(m, "r+b") as f:
            f.truncate(os.path.getsize(m) - 3)
        expect_problem("a truncated shard manifest", t, bitrev(2) + ".binpb", "does not decode")

        t = fresh()
        md = os.path.join(shard_dir(t), "manifest")
        last = max(int(n[:64][::-1], 2) for n in os.listdir(md) if n.endswith(".binpb"))
        with open(os.path.join(md, bitrev(last) + ".binpb"), "rb") as f:
            data = f.read()
        with open(os.path.join(md, bitrev(last + 1) + ".binpb"), "wb") as f:
            f.write(drop_first_sstable(data, last + 1))
        expect_problem("an SSTable dropped before compaction", t, bitrev(last + 1) + ".binpb",
                       "left the manifest before compaction covered it")

        t = fresh()
        with open(os.path.join(shard_dir(t), "manifest", "version_hint.json"), "w") as f:
            f.write('{"version":99}')
        expect_problem("a version hint ahead of the manifests", t, "version_hint.json", "hints version 99")

        t = fresh()
        sst = sorted(d for d in os.listdir(shard_dir(t)) if "_gen_" in d)[0]
        ddir = os.path.join(shard_dir(t), sst, "data")
        df = os.path.join(ddir, os.listdir(ddir)[0])
        with open(df, "r+b") as f:
            f.truncate(os.path.getsize(df) - 100)
        expect_problem("a truncated SSTable data file", t, sst + "/data/", "bytes, the manifest records")

        t = fresh()
        bd = os.path.join(t, "data")
        os.remove(os.path.join(bd, os.listdir(bd)[0]))
        expect_problem("a missing base data file", t, "data/", "data file is missing")

        t = fresh()
        b = os.path.join(shard_dir(t), sst, "bloom_filter.bin")
        with open(b, "r+b") as f:
            f.write(bytes(os.path.getsize(b)))
        expect_problem("a zeroed bloom filter", t, sst + "/bloom_filter.bin", "is not in the bloom filter")

        t = fresh()
        os.remove(os.path.join(shard_dir(t), sst, "_pk_index", "page_data.lance"))
        expect_problem("a missing _pk_index file", t, sst + "/_pk_index/page_data.lance", "is missing")

        t = fresh()
        dd = os.path.join(shard_dir(t), sst, "_deletions")
        dfile = os.path.join(dd, os.listdir(dd)[0])
        with open(dfile, "wb") as f:  # a valid bitmap of one offset: {0}
            f.write(bytes.fromhex("3a3000000100000000000000100000000000"))
        expect_problem("a deletion file that does not match", t, sst + "/_deletions/", "num_deleted_rows")

        t = fresh()
        shutil.rmtree(os.path.join(shard_dir(t), sst))
        expect_problem("a missing SSTable", t, sst + "/_versions/", "SSTable manifest is missing")

        t = fresh(base=ours)
        rc, out, err = run("--json", "ls", t)
        ours_data = [o["key"] for o in json.loads(out) if o["kind"] == "data_file" and "_gen_" in o["key"]
                     and shown.get(o["key"], {}).get("zone_seeds")]
        key = ours_data[0]
        gb = [g for g in shown[key]["global_buffers"] if g["index"] == 1][0]
        p = os.path.join(t, key)
        with open(p, "r+b") as f:  # flip the last byte of the first seed's IPC file (its magic)
            f.seek(gb["offset"] + gb["size"] - 1)
            c = f.read(1)
            f.seek(gb["offset"] + gb["size"] - 1)
            f.write(bytes([c[0] ^ 0xFF]))
        expect_problem("a flipped byte in a zone seed", t, key, "zone seed of id (global buffer 1)")

        t = fresh()
        td = os.path.join(t, "_transactions")
        txn = sorted(os.listdir(td))[0]
        os.rename(os.path.join(td, txn), os.path.join(td, "7-" + txn.split("-", 1)[1]))
        expect_problem("a misnamed transaction file", t, "_transactions/7-", "its name should be 0-")

        # --- usage and errors
        rc, _, _ = run()
        tap("no command: exit 2", rc == 2)
        rc, _, _ = run("verify")
        tap("verify without a table: exit 2", rc == 2)
        rc, _, err = run("verify", os.path.join(scratch, "nope"))
        tap("verify of a missing table: exit 3, naming it", rc == 3 and "no such table" in err, err)
        rc, _, err = run("show", os.path.join(VECTORS, "unsharded-small", "t.lance"), "no/such/key")
        tap("show of a missing key: exit 3", rc == 3 and "no such object" in err, err)
        rc, _, err = run("--kind", "bloom_filter", "show",
                         os.path.join(VECTORS, "unsharded-small", "t.lance", "_versions", "latest_version_hint.json"))
        tap("show as the wrong kind: exit 1 with the codec's reason", rc == 1 and "bloom" in err, err)
    finally:
        if all(results):
            shutil.rmtree(scratch, ignore_errors=True)
        else:
            print(f"# scratch kept: {scratch}")
    print(f"1..{len(results)}")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
