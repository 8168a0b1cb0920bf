#!/usr/bin/env python3
"""e2e: `memwald --check` catches what start-up catches, and says where.

Through the real binary: schema syntax and types (naming the table, the
file and line, and the column by name), primary keys, listen addresses
(a host name is resolved, a bad port is named), metrics_listen, `--set`
keys for a table no section defines, relative table URIs resolved against
data_dir (a daemon started in / finds them), and a configured schema that
differs from the table that exists (at start-up and with --check). And
memwalctl: -c FILE finds the admin socket from the configuration, -s on a
path that is no socket says so, `drop` of an ACTIVE shard says "seal it
first".

Every check looks at the exit code and the message. Synchronisation is by
the daemon's log lines with deadlines. Output is TAP.
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))  # e2e_util
import e2e_util  # noqa: E402
from e2e_util import Daemon, check, plan, run_main, tidy  # noqa: E402

MEMWALD = e2e_util.MEMWALD = sys.argv[1]
MEMWALCTL = e2e_util.MEMWALCTL = sys.argv[2]
CHILDREN = []


def run(args, cwd=None):
    return subprocess.run([MEMWALD] + args, capture_output=True, text=True, timeout=60, cwd=cwd)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def conf(tmp, name, table="", daemon=""):
    """A config whose [table t] section starts on line 5 (without `daemon`
    lines, or with one replacing listen): uri 6, create 7, primary_key 8,
    then `table`'s keys from 9."""
    listen = "" if "listen =" in daemon else "listen = 127.0.0.1:0\n"
    return write(os.path.join(tmp, name), f"""[daemon]
data_dir = {tmp}/data
admin_socket = {tmp}/{name}.sock
{listen}{daemon}[table t]
uri = t.lance
create = true
primary_key = id
{table}""")


def main():
    tmp = tempfile.mkdtemp(prefix="memwald-e2e-check-")
    # --- schema text: table, file, line and column name -------------------
    c = conf(tmp, "bad-type.conf", "schema = id:int64 not null, name:string, v:int65\n")
    r = run(["-c", c, "--check"])
    check("--check: a bad type -> exit 2 naming file:line, table and column by name",
          r.returncode == 2 and f"{c}:9: [table t] schema: column \"v\": expected a type" in r.stderr
          and "int65" in r.stderr, r.stderr)
    r2 = run(["-c", c])
    check("start-up refuses it with the same message", r2.returncode == 2 and r2.stderr == r.stderr,
          r2.stderr)
    c = conf(tmp, "cont.conf", "schema = id:int64 not null, name:string\n  vec:fixed_size_list<float32,0>\n")
    r = run(["-c", c, "--check"])
    check("--check: an error on a continuation line names the key's line and the column",
          r.returncode == 2 and f"{c}:9: [table t] schema: column \"vec\":" in r.stderr, r.stderr)
    c = conf(tmp, "pk.conf", "schema = id:int64 not null, name:string\n")
    write(c, open(c).read().replace("primary_key = id", "primary_key = nope"))
    r = run(["-c", c, "--check"])
    check("--check: a primary key that is no column -> names primary_key's line",
          r.returncode == 2 and f"{c}:8: [table t] primary_key:" in r.stderr and "nope" in r.stderr, r.stderr)
    c = conf(tmp, "set.conf", "schema = id:int64 not null\n")
    r = run(["-c", c, "--check", "--set", "table.t.schema=id:int64 not null, x:float128"])
    check("--check: a bad schema from --set says --set table.t.schema",
          r.returncode == 2 and "--set table.t.schema: column \"x\":" in r.stderr, r.stderr)

    # --- listen addresses --------------------------------------------------
    c = conf(tmp, "port.conf", "schema = id:int64 not null\n", daemon="listen = 127.0.0.1:99999\n")
    r = run(["-c", c, "--check"])
    check("--check: port 99999 -> exit 2, the port named",
          r.returncode == 2 and "[daemon] listen:" in r.stderr and "port must be a number in 0..65535"
          in r.stderr and "99999" in r.stderr, r.stderr)
    c = conf(tmp, "name.conf", "schema = id:int64 not null\n", daemon="listen = no-such-host.invalid:7075\n")
    r = run(["-c", c, "--check"])
    check("--check: a host name that does not resolve -> exit 2 saying so",
          r.returncode == 2 and "cannot resolve \"no-such-host.invalid\"" in r.stderr, r.stderr)
    c = conf(tmp, "metrics.conf", "schema = id:int64 not null\n", daemon="metrics_listen = 127.0.0.1:70000\n")
    r = run(["-c", c, "--check"])
    check("--check: a bad metrics_listen -> exit 2",
          r.returncode == 2 and "[daemon] metrics_listen:" in r.stderr, r.stderr)
    c = conf(tmp, "localhost.conf", "schema = id:int64 not null\n", daemon="listen = localhost:0\n")
    r = run(["-c", c, "--check"])
    check("--check: localhost:0 passes", r.returncode == 0, r.stderr)
    d = Daemon(["-c", c])
    CHILDREN.append(d.p)
    line = d.wait_line("listening on", 30)
    check("... and start-up listens on it", line is not None and "localhost:0 (port " in line, "\n".join(d.lines))
    d.stop()

    # --- --set for a table no section defines -----------------------------
    c = conf(tmp, "ok.conf", "schema = id:int64 not null\n")
    r = run(["-c", c, "--check", "--set", "table.evnts.uri=/x"])
    check("--set table.evnts.* with no [table evnts] section -> exit 2 naming the tables there are",
          r.returncode == 2 and "no [table evnts] section in " + c in r.stderr and "tables: t" in r.stderr,
          r.stderr)

    # --- relative URIs: against data_dir, whatever the working directory --
    r = run(["-c", c, "--print-config"])
    check("a relative uri is resolved against data_dir", r.returncode == 0
          and f"uri = {tmp}/data/t.lance" in r.stdout, r.stdout + r.stderr)
    d = Daemon(["-c", c], cwd="/")
    CHILDREN.append(d.p)
    started = d.wait_line("started", 60)
    rc = d.stop()
    check("a daemon started in / creates the table under data_dir",
          started is not None and rc == 0 and os.path.isdir(f"{tmp}/data/t.lance/_versions"),
          "\n".join(d.lines))

    # --- a configured schema that differs from the table ------------------
    c2 = conf(tmp, "ok.conf", "schema = id:int64 not null, extra:string\n")
    for args, what in ((["-c", c2, "--check"], "--check"), (["-c", c2], "start-up")):
        r = run(args)
        check(f"{what}: a column the table lacks -> refused, naming file:line, the table and the column",
              r.returncode != 0 and f"{c2}:9: [table t] schema: differs from the table at {tmp}/data/t.lance"
              in r.stderr and "column \"extra\" (utf8) is not in the table" in r.stderr, r.stderr)
    c3 = conf(tmp, "ok.conf", "schema = id:int32 not null\n")
    r = run(["-c", c3, "--check"])
    check("--check: a column of another type -> both types named",
          r.returncode != 0 and "column \"id\" is int64 in the table, int32 here" in r.stderr, r.stderr)
    c4 = conf(tmp, "ok.conf", "")
    write(c4, open(c4).read().replace("create = true", "create = false"))
    r = run(["-c", c4, "--check"])
    check("--check: no schema configured for an existing table -> ok (the table's is used)",
          r.returncode == 0, r.stderr)
    c5 = conf(tmp, "missing.conf", "")
    write(c5, open(c5).read().replace("create = true", "create = false").replace("uri = t.lance", "uri = none.lance"))
    r = run(["-c", c5, "--check"])
    check("--check: a table that does not exist, create = false -> refused as start-up refuses it",
          r.returncode == 2 and f"no Lance table at {tmp}/data/none.lance" in r.stderr, r.stderr)
    c6 = conf(tmp, "ok.conf", "shards = 3\n")
    write(c6, open(c6).read().replace("create = true", "create = false"))
    r = run(["-c", c6, "--check"])
    check("--check: `shards` a list for an unsharded table -> refused, naming its line",
          r.returncode == 2 and f"{c6}:9: [table t] shards:" in r.stderr and "only `shards = all`" in r.stderr,
          r.stderr)
    c6b = conf(tmp, "removed.conf", "allow_unmaintained_indexes = true\n")
    r = run(["-c", c6b, "--check"])
    check("--check: the removed allow_unmaintained_indexes -> refused, naming its line and why",
          r.returncode == 2 and f"{c6b}:9: [table t] allow_unmaintained_indexes:" in r.stderr
          and "was removed" in r.stderr, r.stderr)

    # --- memwalctl ----------------------------------------------------------
    c7 = conf(tmp, "ctl.conf", "schema = id:int64 not null\n")
    d = Daemon(["-c", c7])
    CHILDREN.append(d.p)
    started = d.wait_line("started", 60)
    ctl = lambda *a: subprocess.run([MEMWALCTL] + list(a), capture_output=True, text=True, timeout=60)
    r = ctl("-c", c7, "status")
    check("memwalctl -c FILE: the admin socket from the configuration", started is not None and
          r.returncode == 0 and "memwald " in r.stdout, r.stdout + r.stderr)
    r = ctl("-s", c7, "status")
    check("memwalctl -s on a regular file: says it is not a socket",
          r.returncode == 3 and f"{c7} is not a socket (it is a regular file)" in r.stderr, r.stderr)
    r = ctl("-c", os.path.join(tmp, "absent.conf"), "status")
    check("memwalctl -c on a missing file: exit 2 naming it", r.returncode == 2 and "absent.conf" in r.stderr,
          r.stderr)
    r1 = ctl("-c", c7, "claim", "t", "unsharded")
    r = ctl("-c", c7, "drop", "t", "unsharded")
    check("drop of an ACTIVE shard: exit 1, \"seal it first\"", r1.returncode == 0 and r.returncode == 1
          and "shard unsharded is ACTIVE" in r.stderr and "seal it first (memwalctl seal t unsharded)" in r.stderr,
          r1.stdout + r1.stderr + r.stderr)
    r1 = ctl("-c", c7, "seal", "t", "unsharded")
    r = ctl("-c", c7, "drop", "t", "unsharded")
    check("... sealed first, the drop goes through", r1.returncode == 0 and r.returncode == 0, r1.stderr + r.stderr)
    check("the daemon stops cleanly", d.stop() == 0, "\n".join(d.lines[-5:]))
    tidy(tmp)
    return plan()


if __name__ == "__main__":
    run_main(main, CHILDREN)
