#!/usr/bin/env python3
"""e2e (issue 27): memwald maintains a LanceDB table's vector index.

For each distance type: LanceDB 0.39.0 makes a table {id int64 PK,
vec fixed_size_list<float32, D>} with a base vector index (IVF_PQ or
hnswSq) and the default LSM write spec, which maintains every index
(tests/interop/vindex.mjs make --rows 0). memwald opens it (it refused such
tables before: "maintains only the primary key"), logs the maintained
vector index, takes 300 rows over TCP (every 13th vector null), flushes on
`memwalctl flush` and stops on SIGTERM. Then LanceDB's default vector
search must find every fresh row first through the index in memwald's
SSTable (vindex.mjs search), and memwal-inspect must decode and verify the
table. Synchronisation is by the daemon's replies and log lines. TAP.
"""
import json
import os
import random
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util  # noqa: E402
from e2e_util import Client, Daemon, check, ctl, plan, port_of, tidy  # noqa: E402

e2e_util.MEMWALD, e2e_util.MEMWALCTL = sys.argv[1], sys.argv[2]
SRC = os.environ.get("MW_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
VINDEX = os.path.join(SRC, "tests", "interop", "vindex.mjs")


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def scenario(tmp, dist, index, dim):
    tag = f"[{dist} under {index}, dim {dim}]"
    r = subprocess.run(["node", VINDEX, "make", tmp, "--distance", dist, "--index", index, "--dim", str(dim),
                        "--rows", "0"], capture_output=True, text=True, timeout=180)
    check(f"{tag} LanceDB makes the table with a maintained vector index", r.returncode == 0
          and '"vec_idx"' in r.stdout, f"exit status {r.returncode}\n" + r.stdout + r.stderr[-2000:])
    if r.returncode != 0:
        return
    conf, sock = os.path.join(tmp, "memwald.conf"), os.path.join(tmp, "admin.sock")
    with open(conf, "w") as f:
        f.write(f"""[daemon]
log_level = info
data_dir = {tmp}/data
admin_socket = {sock}
listen = 127.0.0.1:0
[table t]
uri = {tmp}/t.lance
""")
    d = Daemon(["-c", conf])
    line = d.wait_line("listening on")
    started = d.wait_line("started")
    check(f"{tag} memwald opens the table", line is not None and started is not None, "\n".join(d.lines))
    if line is None or started is None:
        d.p.kill()
        return
    check(f"{tag} memwald logs the maintained vector index",
          any("maintains vector index 'vec_idx' on 'vec' (" + dist + ")" in ln for ln in d.lines), "\n".join(d.lines))
    rnd = random.Random(dim)
    rows = []
    for i in range(300):
        vec = None if i % 13 == 12 else [f32(rnd.randint(-1024, 1024) / 1024.0) for _ in range(dim)]
        rows.append({"id": 100000 + i, "vec": vec})
    c = Client(port_of(line), timeout=30)
    c.send_lines(["USE t"] + [json.dumps(r) for r in rows] + ["SYNC"])
    acked = 0
    while True:
        rep = c.reply()
        if rep.startswith("OK "):
            acked += int(rep.split()[1])
        elif rep.startswith("SYNC "):
            break
        else:
            check(f"{tag} rows acknowledged", False, rep)
            break
    check(f"{tag} 300 rows acknowledged", acked == 300, f"acked {acked}")
    rc, out, err = ctl(sock, "flush")
    check(f"{tag} memwalctl flush", rc == 0, out + err)
    code = d.stop()
    check(f"{tag} the daemon exits 0 on SIGTERM", code == 0, "\n".join(d.lines[-20:]))
    with open(os.path.join(tmp, "fresh.json"), "w") as f:
        json.dump({"distance": dist, "rows": [{"id": str(r["id"]), "vec": r["vec"]} for r in rows]}, f)
    r = subprocess.run(["node", VINDEX, "search", tmp], capture_output=True, text=True, timeout=300)
    out = [ln for ln in (r.stdout + r.stderr).splitlines() if " WARN " not in ln]
    check(f"{tag} LanceDB's vector search finds every fresh row first through memwald's SSTable index",
          r.returncode == 0, "\n".join(out[:40]))
    if r.returncode == 0:
        print("# " + out[0])


def main():
    if not os.path.isdir(os.path.join(SRC, "tests", "interop", "node_modules", "@lancedb", "lancedb")):
        print("not ok 1 - tests/interop/node_modules is missing: run npm install --no-audit --no-fund there")
        print("1..1")
        return 1
    for dist, index, dim in [("l2", "ivfpq", 16), ("cosine", "hnswsq", 8), ("dot", "ivfpq", 32)]:
        tmp = tempfile.mkdtemp(prefix="memwald-e2e-vindex-")
        try:
            scenario(tmp, dist, index, dim)
        except Exception as e:  # a broken scenario fails, never skips
            check(f"[{dist}] scenario ran to the end", False, repr(e))
        finally:
            tidy(tmp)
    return plan()


if __name__ == "__main__":
    sys.exit(main())
