#!/usr/bin/env python3
"""e2e (issue 27): memwald maintains a LanceDB table's scalar and full-text indexes.

LanceDB 0.39.0 makes a table {id int64 PK, vec fixed_size_list<float32, 8>,
num int64, cat utf8, text utf8, score float64} of 300 rows with an IVF_PQ index on vec and,
per scenario, BTree indexes on num (int64), score (float64: memwald writes
no per-SSTable BTree for that type, LanceDB scans) and cat (utf8) or a Bitmap
index on cat, an inverted (FTS) index on text, and the default LSM write spec (every index maintained; with a
Bitmap index LanceDB refuses that default, so the spec lists every other
index) (tests/interop/sindex.mjs make). memwald opens it (before this it
refused: "memwald maintains only the primary key and vector indexes"),
takes 200 new rows and 50 updates of base rows over TCP, flushes on
`memwalctl flush` and stops on SIGTERM. Then LanceDB's filtered searches
(query().where on num and cat, vector searches prefiltered on num) must find
every fresh row and no stale value, and read memwald's SSTable through its
BTrees (sindex.mjs check). A table that also
maintains a full-text index must be refused at open, naming the index and
why (tests/interop/sindex_fts.sh measures the why).
Synchronisation is by the daemon's replies and log lines. TAP.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util  # noqa: E402
from e2e_util import Client, Daemon, check, ctl, plan, port_of, tidy  # noqa: E402

e2e_util.MEMWALD, e2e_util.MEMWALCTL = sys.argv[1], sys.argv[2]
SRC = os.environ.get("MW_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
SINDEX = os.path.join(SRC, "tests", "interop", "sindex.mjs")


def quiet(text):
    return "\n".join(ln for ln in text.splitlines() if " WARN " not in ln and "ERROR lance::index" not in ln)


def write_rows(tag, line, rows):
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
    check(f"{tag} {len(rows)} rows acknowledged", acked == len(rows), f"acked {acked}")


def scenario(tmp, kinds):
    tag = f"[{kinds}]"
    args = ["node", SINDEX, "make", tmp, "--kinds", kinds]
    r = subprocess.run(args, capture_output=True, text=True, timeout=300)
    check(f"{tag} LanceDB makes the table with maintained indexes", r.returncode == 0 and '"num_idx"' in r.stdout,
          f"exit status {r.returncode}\n" + r.stdout + quiet(r.stderr)[-2000:])
    if r.returncode != 0:
        return
    print("# " + r.stdout.strip().splitlines()[-1][:300])
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
    if "fts" in kinds:
        refused = d.wait_line("maintains full-text index 'text_idx'")
        code = d.p.wait(timeout=60)
        check(f"{tag} memwald refuses the maintained full-text index at open, naming it", refused is not None
              and code != 0 and "tokenizes differently" in refused, f"exit status {code}\n" + "\n".join(d.lines))
        return
    line = d.wait_line("listening on")
    started = d.wait_line("started")
    check(f"{tag} memwald opens the table", line is not None and started is not None, "\n".join(d.lines))
    if line is None or started is None:
        d.p.kill()
        return
    with open(os.path.join(tmp, "fresh.json")) as f:
        rows = json.load(f)["rows"]
    write_rows(tag, line, rows)
    rc, out, err = ctl(sock, "flush")
    check(f"{tag} memwalctl flush", rc == 0, out + err)
    code = d.stop()
    check(f"{tag} the daemon exits 0 on SIGTERM", code == 0, "\n".join(d.lines[-20:]))
    r = subprocess.run(["node", SINDEX, "check", tmp], capture_output=True, text=True, timeout=300)
    out = quiet(r.stdout + r.stderr)
    check(f"{tag} LanceDB's filtered searches see every fresh row and no stale one",
          r.returncode == 0, out[:4000])
    if r.returncode == 0:
        print("# " + out.splitlines()[0])



def main():
    if not os.path.isdir(os.path.join(SRC, "tests", "interop", "node_modules", "@lancedb", "lancedb")):
        print("not ok 1 - tests/interop/node_modules is missing: run npm install --no-audit --no-fund there")
        print("1..1")
        return 1
    for kinds in ["btree", "btree,bitmap", "btree,fts"]:
        tmp = tempfile.mkdtemp(prefix="memwald-e2e-sindex-")
        try:
            scenario(tmp, kinds)
        except Exception as e:  # a broken scenario fails, never skips
            check(f"[{kinds}] scenario ran to the end", False, repr(e))
        finally:
            tidy(tmp)
    return plan()


if __name__ == "__main__":
    sys.exit(main())
