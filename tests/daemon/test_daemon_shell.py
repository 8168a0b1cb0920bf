#!/usr/bin/env python3
"""e2e: the memwald daemon shell, through the real binary.

Covers issue 2's daemon contract: config errors name file, line and key;
--set overrides; every key is documented in conf/memwald.conf; start-up logs
and READY=1 (sd_notify, received on a datagram socket we own); SIGHUP reloads
log_level; WATCHDOG=1 pings when WATCHDOG_USEC is set; SIGTERM stops with
STOPPING=1 and exit 0; journald prefixes under JOURNAL_STREAM. The systemd
unit is checked where it is installed (tests/daemon/test_install.py).

Synchronisation is by reading the daemon's own log lines and notify
datagrams with deadlines, never by sleeping. Output is TAP.
"""
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))  # e2e_util
import e2e_util  # noqa: E402
from e2e_util import Daemon, check, plan  # noqa: E402

MEMWALD = e2e_util.MEMWALD = sys.argv[1]
SRC = os.environ.get("MW_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
CONF = os.path.join(SRC, "conf", "memwald.conf")


def run(args, **kw):
    return subprocess.run([MEMWALD] + args, capture_output=True, text=True, timeout=30, **kw)


class Notify:
    """A NOTIFY_SOCKET we own, as systemd would."""

    def __init__(self, d):
        self.path = os.path.join(d, "notify.sock")
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.s.bind(self.path)
        self.seen = []

    def wait(self, needle, timeout=10.0):
        deadline = time.monotonic() + timeout
        if any(needle in m for m in self.seen):
            return True
        while time.monotonic() < deadline:
            r, _, _ = select.select([self.s], [], [], max(0.0, deadline - time.monotonic()))
            if not r:
                return False
            m = self.s.recv(4096).decode()
            self.seen.append(m)
            if needle in m:
                return True
        return False


def main():
    tmp = tempfile.mkdtemp(prefix="memwald-e2e-shell-")
    try:
        # --- configuration errors -------------------------------------------
        bad = os.path.join(tmp, "bad.conf")
        with open(bad, "w") as f:
            f.write("[daemon]\nlog_level = info\n\n[storage]\nmax_infligth = 3\n")
        r = run(["-c", bad])
        check("unknown key: exit 2, names file, line and key",
              r.returncode == 2 and f"{bad}:5:" in r.stderr and "max_infligth" in r.stderr, r.stderr)
        with open(bad, "w") as f:
            f.write("[deamon]\nlog_level = info\n")
        r = run(["-c", bad])
        check("unknown section: exit 2, names file and line",
              r.returncode == 2 and f"{bad}:2:" in r.stderr and "deamon" in r.stderr, r.stderr)
        with open(bad, "w") as f:
            f.write("[storage]\nmax_inflight = lots\n")
        r = run(["-c", bad])
        check("bad value: says what was expected",
              r.returncode == 2 and "expected a whole number in" in r.stderr and ":2:" in r.stderr, r.stderr)
        r = run(["-c", CONF, "--set", "table.events.max_wal_flush_interval_ms=-5"])
        check("--set with a negative number is refused with the range",
              r.returncode == 2 and "in 0.." in r.stderr and "--set" in r.stderr, r.stderr)
        r = run(["-c", CONF, "--set", "table.events.max_wal_flush_interval_ms=99999999999"])
        check("--set out of range is refused with the range",
              r.returncode == 2 and "is outside 0.." in r.stderr and "--set" in r.stderr, r.stderr)
        r = run(["-c", os.path.join(tmp, "missing.conf")])
        check("missing config file: exit 2 naming it", r.returncode == 2 and "missing.conf" in r.stderr, r.stderr)

        # --- overrides and documentation ------------------------------------
        r = run(["-c", CONF, "--set", "daemon.log_level=debug", "--set", "storage.io_backend=threads",
                 "--set", "table.events.uri=/data/ev.lance", "--print-config"])
        out = r.stdout
        check("--set overrides daemon, storage and table keys",
              r.returncode == 0 and "log_level = debug" in out and "io_backend = threads" in out
              and "uri = /data/ev.lance" in out, r.stderr + out)
        r = run(["-c", CONF, "--set", "table.other.uri=/data/o.lance", "--print-config"])
        check("--set for a table the file does not define is refused (a typo never adds a table)",
              r.returncode == 2 and "no [table other] section" in r.stderr, r.stderr)
        keys = run(["--print-keys"]).stdout.split()
        keys = [k for k in keys if k != "(reloadable)"]
        conf_text = open(CONF).read()
        missing = [k for k in keys if (k.split(".")[-1] + " =") not in conf_text]
        check(f"conf/memwald.conf documents all {len(keys)} keys", len(keys) > 20 and not missing, missing)
        r = run(["-c", CONF, "--check"])
        check("shipped conf/memwald.conf is valid", r.returncode == 0, r.stderr)

        # --- life cycle: READY, SIGHUP reload, WATCHDOG, SIGTERM -----------
        conf = os.path.join(tmp, "live.conf")
        data = os.path.join(tmp, "data", "nested")
        # private admin socket (its directory is created) and any free port
        extra = f"admin_socket = {tmp}/run/admin.sock\nlisten = 127.0.0.1:0\n"
        iso = ["--set", f"daemon.admin_socket={tmp}/run2/admin.sock", "--set", "daemon.listen=127.0.0.1:0"]
        with open(conf, "w") as f:
            f.write(f"[daemon]\nlog_level = info\ndata_dir = {data}\n{extra}")
        n = Notify(tmp)
        env = dict(os.environ, NOTIFY_SOCKET=n.path, WATCHDOG_USEC="200000")
        env.pop("JOURNAL_STREAM", None)
        env.pop("WATCHDOG_PID", None)
        d = Daemon(["-c", conf], env=env)
        started = d.wait_line("started")
        check("start-up logs one line with level and config", started is not None and " notice " in started
              and conf in started, "\n".join(d.lines))
        check("READY=1 sent to NOTIFY_SOCKET", n.wait("READY=1"), n.seen)
        check("data_dir created (with parents)", os.path.isdir(data))
        check("WATCHDOG=1 sent when WATCHDOG_USEC is set", n.wait("WATCHDOG=1"), n.seen)
        with open(conf, "w") as f:
            f.write(f"[daemon]\nlog_level = debug\ndata_dir = {data}\n{extra}")
        d.p.send_signal(signal.SIGHUP)
        check("SIGHUP reloads log_level", d.wait_line("log_level info -> debug") is not None, "\n".join(d.lines))
        with open(conf, "w") as f:
            f.write(f"[daemon]\nlog_level = debug\ndata_dir = {data}\n{extra}bogus = 1\n")
        d.p.send_signal(signal.SIGHUP)
        check("a bad reload keeps running and says why",
              d.wait_line("reload failed") is not None and d.p.poll() is None, "\n".join(d.lines))
        rc = d.stop(signal.SIGTERM)
        check("SIGTERM: exit 0 after a clean stop", rc == 0 and any("stopped cleanly" in l for l in d.lines),
              f"rc={rc}\n" + "\n".join(d.lines))
        check("STOPPING=1 sent", n.wait("STOPPING=1", timeout=2), n.seen)

        with open(conf, "w") as f:
            f.write(f"[daemon]\nlog_level = info\ndata_dir = {data}\n{extra}")
        d = Daemon(["-c", conf], env=dict(os.environ, JOURNAL_STREAM="8:1234"))
        line = d.wait_line("started")
        rc = d.stop(signal.SIGINT)
        check("journald format: <N> priority prefix, SIGINT stops with 0",
              line is not None and line.startswith("<5>") and rc == 0, "\n".join(d.lines))

        # --- unusable data_dir ----------------------------------------------
        blocker = os.path.join(tmp, "file")
        open(blocker, "w").close()
        r = run(["--set", f"daemon.data_dir={blocker}/sub"] + iso)
        check("unusable data_dir: exit 1 naming it", r.returncode == 1 and blocker in r.stderr, r.stderr)

        # --- storage backend: io_uring, the fallback, and refusing it -----------
        nouring = os.environ.get("MW_NO_URING")
        d = Daemon(["--set", f"daemon.data_dir={data}", "--set", "storage.io_backend=threads"] + iso)
        line = d.wait_line("started")
        d.stop()
        check("storage.io_backend=threads uses the thread pool", line is not None and "storage=threads" in line,
              "\n".join(d.lines))
        if nouring:
            d = Daemon(["--set", f"daemon.data_dir={data}"] + iso, wrapper=[nouring])
            line = d.wait_line("started")
            rc = d.stop()
            warns = [l for l in d.lines if "io_uring unavailable" in l]
            check("io_uring refused (seccomp): logged once, falls back to threads, stops cleanly",
                  line is not None and "storage=threads" in line and len(warns) == 1 and rc == 0, "\n".join(d.lines))
            r = subprocess.run([nouring, MEMWALD, "--set", f"daemon.data_dir={data}", "--set",
                                "storage.io_backend=uring"] + iso, capture_output=True, text=True, timeout=30)
            check("io_backend=uring where io_uring is refused: exit 1 with the reason",
                  r.returncode == 1 and "storage" in r.stderr, r.stderr)

    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    return plan()


if __name__ == "__main__":
    sys.exit(main())
