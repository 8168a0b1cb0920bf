#!/usr/bin/env python3
"""e2e: the README's "first hour" does what it says, run as it is written.

Takes the shell blocks of README.md's "The first hour" section and runs
them as written, with bash, in a scratch copy of the layout they assume
(the repository root: build/, conf/memwald.conf, tools/, tests/interop/):
the daemon started as the README's first command starts it, the /dev/tcp
line (its port 7070 replaced by the port the daemon bound: never assume
7070 is free), then the reader block. The outputs the README promises are
checked: OK lines counting 3 rows and `SYNC 3`, then `flushed=1` and the
one row LanceDB 0.39.0 reads back with tools/read-table.mjs (`{"rows":1}`
on stderr), and memwal-inspect verify on the table. The `npm ... install` line
is run as written from the repository root (a no-op after the test
command's install) and must leave package-lock.json as committed. A README edit that breaks a command fails this test. Output is TAP.
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util  # noqa: E402
from e2e_util import Daemon, check, plan, port_of, run_main, tidy  # noqa: E402

SRC = os.environ["MW_SOURCE_ROOT"]
BUILD = os.environ["MW_BUILD_ROOT"]
CHILDREN = []


def section_blocks(text, title):
    """The ```sh blocks of the `## title` section."""
    m = re.search(r"^## " + re.escape(title) + r"\n(.*?)(?=^## )", text, re.M | re.S)
    if not m:
        return []
    return re.findall(r"^```sh\n(.*?)^```", m.group(1), re.M | re.S)


def bash(script, cwd):
    return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def main():
    readme = open(os.path.join(SRC, "README.md")).read()
    # the daemon as the first of "the two commands" starts it
    first = section_blocks(readme, "The two commands (fresh Debian 12, as root, from the repository root)")
    start = first[0].strip().split("&&")[-1].strip() if first else ""
    check("README: the first command ends by starting ./build/src/memwald -c conf/memwald.conf",
          start == "./build/src/memwald -c conf/memwald.conf", start)
    blocks = section_blocks(readme, "The first hour")
    check("README: \"The first hour\" has its two shell blocks", len(blocks) == 2, blocks)
    if start != "./build/src/memwald -c conf/memwald.conf" or len(blocks) != 2:
        return plan()

    # the repository layout the commands assume, with this build as build/
    w = tempfile.mkdtemp(prefix="memwald-e2e-readme-")
    os.symlink(BUILD, os.path.join(w, "build"))
    os.symlink(os.path.join(SRC, "tools"), os.path.join(w, "tools"))
    os.symlink(os.path.join(SRC, "tests"), os.path.join(w, "tests"))
    os.mkdir(os.path.join(w, "conf"))
    conf = open(os.path.join(SRC, "conf", "memwald.conf")).read()
    check("conf/memwald.conf listens on 127.0.0.1:7070, as the README says",
          re.search(r"^listen = 127\.0\.0\.1:7070$", conf, re.M) is not None)
    with open(os.path.join(w, "conf", "memwald.conf"), "w") as f:
        f.write(re.sub(r"^listen = 127\.0\.0\.1:7070$", "listen = 127.0.0.1:0", conf, flags=re.M))

    e2e_util.MEMWALD = os.path.join(w, start.split()[0])  # ./build/src/memwald, as written
    d = Daemon(start.split()[1:], cwd=w)
    CHILDREN.append(d.p)
    line = d.wait_line("listening on")
    started = d.wait_line("started")
    check("the daemon starts on the embedded default", line is not None and started is not None,
          "\n".join(d.lines[-10:]))
    if line is None or started is None:
        d.p.kill()
        tidy(w)
        return plan()
    port = port_of(line)

    write = blocks[0].replace("/dev/tcp/127.0.0.1/7070", f"/dev/tcp/127.0.0.1/{port}")
    check("the write block uses /dev/tcp/127.0.0.1/7070", write != blocks[0], blocks[0])
    r = bash(write, w)
    out = r.stdout.splitlines()
    oks = [l for l in out[:-1] if re.fullmatch(r"OK [1-3]", l)]
    check("it prints OK lines counting 3 rows, then SYNC 3",
          r.returncode == 0 and out[-1:] == ["SYNC 3"] and len(oks) == len(out) - 1
          and sum(int(l.split()[1]) for l in oks) == 3, r.stdout + r.stderr)

    lines = [l for l in blocks[1].splitlines() if l.strip()]
    npm = [l for l in lines if l.startswith("npm ")]
    # `npm ci` is not used: npm 11 refuses this lock file ("Missing:
    # @lancedb/lancedb-darwin-arm64@ from lock file"): it lists the other
    # platforms' optional packages only as the dependency's optionals. `npm
    # install` takes the locked versions just the same. The line is run as
    # written (a no-op once the test command installed it), so a README line
    # that fails on this machine fails here. It runs from the repository root,
    # as the README says: from the scratch directory, through its `tests`
    # symlink, npm rewrote the lock file with paths relative to the scratch.
    check("the read block installs LanceDB from tests/interop's lock file",
          npm == ["npm --prefix tests/interop install --no-audit --no-fund"], npm)
    if npm:
        lock_path = os.path.join(SRC, "tests", "interop", "package-lock.json")
        lock = open(lock_path, "rb").read()
        r = bash(npm[0], SRC)
        check("... and that npm line succeeds as written", r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:])
        check("... and leaves tests/interop/package-lock.json as committed", open(lock_path, "rb").read() == lock)
    pj = os.path.join(SRC, "tests", "interop", "node_modules", "@lancedb", "lancedb", "package.json")
    version = json.load(open(pj)).get("version") if os.path.exists(pj) else None
    check("tests/interop/node_modules has @lancedb/lancedb 0.39.0", version == "0.39.0", version)
    r = bash("\n".join(l for l in lines if not l.startswith("npm ")), w)
    want = '{"id":2,"name":"b","v":null,"vec":null}'
    check(f"memwalctl flush prints flushed=1, then read-table.mjs {want} and {{\"rows\":1}} on stderr",
          r.returncode == 0 and r.stdout == "flushed=1\n" + want + "\n" and '{"rows":1}' in r.stderr,
          r.stdout + r.stderr)

    m = re.search(r"`(\./build/src/inspect/memwal-inspect verify \./var/events\.lance)`", readme)
    check("the README names memwal-inspect verify on the table", m is not None)
    if m:
        r = bash(m.group(1), w)
        check("... and it finds no problem", r.returncode == 0, r.stdout[-2000:] + r.stderr)

    d.p.send_signal(signal.SIGTERM)
    rc = d.finish()
    check("the daemon stops on SIGTERM, exit 0", rc == 0, "\n".join(d.lines[-5:]))
    tidy(w)
    return plan()


if __name__ == "__main__":
    run_main(main, CHILDREN)
