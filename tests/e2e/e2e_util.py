"""e2e_util.py — what the e2e scripts share, so that no test script imports
another one.

  check     one TAP test point, counted in results (the tail of its detail
            printed as comments when it fails).
  plan      the TAP plan line for the checks so far; the exit code.
  chosen    the named cases of a script that MW_TEST selects (all when it
            is unset); a name no case has fails the script, naming it.
  inspect_under  every table in a directory decoded and verified with
            memwal-inspect (one check per table).
  tidy      inspect_under a scratch directory, then remove it when every
            check passed, else keep it.
  run_main  sys.exit(main()), killing the child processes left running.
  Daemon    the real memwald as a child process; a thread reads its stderr
            (the log) as it comes, so the daemon never blocks on it:
            wait_line(needle, timeout) for synchronisation by log line,
            finish() to reap it, stop(sig) to signal and reap it.
  ctl       memwalctl (MEMWALCTL) on an admin socket: exit code, stdout,
            stderr; ctl_json the same with --json, the reply parsed (a
            {"ok": false, ...} one made up when memwalctl printed none).
  poll      a condition polled until it holds or a deadline passes.
  Client    one producer connection: deadline-bounded line reads (line,
            lines, lines_until, closed) or blocking ones (reply).
  fill_until_stalled  writes to a peer that never reads until it stalls.
  rss_kb    a process's resident set (VmRSS), for the memory checks.
  port_of   the port in the daemon's "listening on ... (port N)" line.

MEMWALD and MEMWALCTL are the binaries' paths; the script that uses Daemon
or ctl sets them (from its argv). Nothing here knows what a test checks.
"""
import fnmatch
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "inspect"))
import inspect_tables  # noqa: E402  (tests/inspect: one helper for every suite)

MEMWALD = None  # set by the script that uses Daemon (its argv)
MEMWALCTL = None  # set by the script that uses ctl / ctl_json (its argv)

results = []  # one bool per check, in order
DETAIL_LINES = 40  # the last lines of a failed check's detail that are printed


def check(name, ok, detail=""):
    """One TAP test point: `ok N - name` or `not ok N - name`, then on
    failure the last DETAIL_LINES lines of detail as `# ` comments."""
    results.append(bool(ok))
    print(("ok" if ok else "not ok") + f" {len(results)} - {name}")
    if not ok and detail:
        for line in str(detail).splitlines()[-DETAIL_LINES:]:
            print("# " + line)
    sys.stdout.flush()


CASE_ENV = "MW_TEST"  # a case name or an fnmatch pattern: the C binaries' tests/common/cases.h
_case_chosen = []  # set once chosen() has applied MW_TEST


def chosen(cases):
    """The cases of a script with several independent ones, as chosen by
    MW_TEST (a name or a shell pattern, as the cmocka binaries take it):
    cases is a list of (name, value) pairs, the value usually what runs the
    case; the pairs whose name matches, in order, or every pair when
    MW_TEST is unset or empty. When no name matches, the script fails at
    once (a failed check naming the value and the cases it has, the plan,
    exit 1): a typo never passes with nothing run."""
    want = os.environ.get(CASE_ENV, "")
    _case_chosen.append(want)
    if not want:
        return list(cases)
    picked = [c for c in cases if fnmatch.fnmatchcase(c[0], want)]
    if not picked:
        check(f"{CASE_ENV}={want} names a case of {os.path.basename(sys.argv[0])}", False,
              "its cases: " + " ".join(c[0] for c in cases))
        sys.exit(plan())
    return picked


def plan():
    """Print the TAP plan (1..number of checks); 0 if every check passed,
    else 1 (the script's exit code). A script that has no cases to choose
    from (it never called chosen()) fails when MW_TEST is set: MW_TEST names
    no case of it."""
    want = os.environ.get(CASE_ENV, "")
    if want and not _case_chosen:
        check(f"{CASE_ENV}={want} names a case of {os.path.basename(sys.argv[0])}", False,
              "it has no cases to choose from: run it without " + CASE_ENV)
    print(f"1..{len(results)}")
    return 0 if all(results) else 1


def inspect_under(path, allow=None):
    """memwal-inspect on every table under path (or on the table path names
    when it is an s3:// URI), one check each: `dump --json` decodes every
    object and `verify` finds no problem (or only problems whose text
    contains allow). True when all passed. Call it when no process writes to
    path any more."""
    inspect = inspect_tables.inspector(near=MEMWALD)
    if path.startswith("s3://"):
        tables = [path]
    else:
        tables = inspect_tables.find_tables(path) if os.path.isdir(path) else []
    if tables and inspect is None:
        check(f"memwal-inspect on the {len(tables)} tables under {path}", False,
              "memwal-inspect not found: set MW_INSPECT")
        return False
    good = True
    for t in tables:
        ok, summary, detail = inspect_tables.inspect_table(inspect, t, allow)
        check(f"memwal-inspect {t if t == path else os.path.relpath(t, path)}: {summary}", ok, detail)
        good = good and ok
    return good


def tidy(path, allow=None):
    """inspect_under(path, allow), then remove path when every check so far
    passed; else keep it for a post-mortem and say so."""
    inspect_under(path, allow)
    if all(results):
        shutil.rmtree(path, ignore_errors=True)
    else:
        print(f"# kept {path}")


def run_main(main, children):
    """sys.exit(main()); whatever happens, every process in children (Popen
    objects) that still runs is killed first."""
    try:
        rc = main()
    finally:
        for child in list(children):
            if child.poll() is None:
                child.kill()
    sys.exit(rc)


class Daemon:
    """memwald (MEMWALD) as a child process, started with args (under
    wrapper, a command prefix, if given). A thread reads its stderr into
    self.lines (without newlines) as it comes, so the daemon never blocks on
    a full pipe however long the test does not look at the log."""

    def __init__(self, args, env=None, wrapper=(), cwd=None):
        self.p = subprocess.Popen(list(wrapper) + [memwald_path()] + list(args), stderr=subprocess.PIPE,
                                  stdout=subprocess.DEVNULL, env=env, cwd=cwd)
        self.lines, self.eof, self.killed = [], False, False
        self.cv = threading.Condition()
        self.t = threading.Thread(target=self._pump, daemon=True)
        self.t.start()

    def _pump(self):
        for raw in self.p.stderr:
            with self.cv:
                self.lines.append(raw.decode(errors="replace").rstrip("\n"))
                self.cv.notify_all()
        with self.cv:
            self.eof = True
            self.cv.notify_all()

    def wait_line(self, needle, timeout=20.0):
        """The first log line containing needle, waiting up to timeout
        seconds for it; None when the time is up or the log ended first."""
        deadline = time.monotonic() + timeout
        seen = 0
        with self.cv:
            while True:
                for line in self.lines[seen:]:
                    if needle in line:
                        return line
                seen = len(self.lines)
                left = deadline - time.monotonic()
                if left <= 0 or self.eof:
                    return None
                self.cv.wait(left)

    def finish(self, timeout=60):
        """Wait for the daemon to exit (killed after timeout seconds, then
        self.killed is set) and for its log to end; its exit code."""
        try:
            rc = self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.killed = True
            self.p.kill()
            rc = self.p.wait()
        self.t.join(10)
        return rc

    def stop(self, sig=signal.SIGTERM, timeout=60):
        """Send sig (if the daemon still runs), then finish(timeout)."""
        if self.p.poll() is None:
            self.p.send_signal(sig)
        return self.finish(timeout)


def memwald_path():
    assert MEMWALD, "e2e_util.MEMWALD is not set"
    return MEMWALD


def ctl(sock, *args, timeout=60):
    """memwalctl -s sock args...: (exit code, stdout, stderr)."""
    assert MEMWALCTL, "e2e_util.MEMWALCTL is not set"
    r = subprocess.run([MEMWALCTL, "-s", sock] + list(args), capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr


def ctl_json(sock, *args, timeout=60):
    """memwalctl -s sock --json args...: (exit code, the daemon's JSON reply
    parsed, stderr). When stdout holds no JSON reply (no daemon, a usage
    error): (exit code, {"ok": False, "error": what memwalctl said}, stdout
    and stderr)."""
    rc, out, err = ctl(sock, "--json", *args, timeout=timeout)
    try:
        return rc, json.loads(out.strip().splitlines()[-1]), err
    except (ValueError, IndexError):
        return rc, {"ok": False, "error": f"memwalctl rc={rc}: {out} {err}".strip()}, out + err


def poll(cond, timeout, interval=0.02):
    """Call cond() until it returns something true or timeout seconds have
    passed; its last value. A condition polled with a deadline, not a sleep
    standing in for synchronisation."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(interval)


class Client:
    """One producer connection. line()/lines()/lines_until()/closed() wait
    with a deadline (None or False when it passes); reply() blocks for up
    to the socket's timeout and raises EOFError when the server closes."""

    def __init__(self, port, host="127.0.0.1", family=socket.AF_INET, timeout=10, bufs=None):
        self.s = socket.socket(family, socket.SOCK_STREAM)
        if bufs:  # before connect: small kernel buffers either way
            self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, bufs)
            self.s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, bufs)
        self.timeout = timeout
        self.s.settimeout(timeout)
        self.s.connect((host, port))
        self.buf = b""

    def send(self, data):
        if isinstance(data, str):
            data = data.encode()
        self.s.sendall(data)

    def send_lines(self, lines):
        """Send each of lines (str) with a newline."""
        self.send("".join(l + "\n" for l in lines))

    def line(self, timeout=10):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.s.settimeout(left)
            try:
                chunk = self.s.recv(65536)
            except socket.timeout:
                return None
            if not chunk:
                return None
            self.buf += chunk
        l, self.buf = self.buf.split(b"\n", 1)
        return l.decode(errors="replace")

    def read_bytes(self, n, timeout=10):
        """The next n bytes (fewer when EOF or the deadline comes first)."""
        deadline = time.monotonic() + timeout
        buf = bytearray(self.buf)  # appended in place: megabytes stay linear
        while len(buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self.s.settimeout(left)
            try:
                chunk = self.s.recv(1 << 20)
            except socket.timeout:
                break
            if not chunk:
                break
            buf += chunk
        got, self.buf = bytes(buf[:n]), bytes(buf[n:])
        return got

    def lines(self, n, timeout=10):
        return [self.line(timeout) for _ in range(n)]

    def lines_until(self, last, timeout=10):
        """Reply lines up to the first for which last(line) is true, or up
        to a None (no line within timeout, or EOF); that line included."""
        got = []
        while True:
            l = self.line(timeout)
            got.append(l)
            if l is None or last(l):
                return got

    def reply(self):
        """The next reply line, waiting up to the connection's timeout
        (socket.timeout after it); EOFError when the server closes."""
        self.s.settimeout(self.timeout)
        while b"\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                raise EOFError("connection closed")
            self.buf += chunk
        l, self.buf = self.buf.split(b"\n", 1)
        return l.decode()

    def closed(self, timeout=10):
        """True when the server closes (EOF) within timeout, replies ignored."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.s.settimeout(left)
            try:
                c = self.s.recv(65536)
            except socket.timeout:
                return False
            except ConnectionResetError:
                return True
            if not c:
                return True
            self.buf += c

    def close(self):
        self.s.close()


def fill_until_stalled(s, chunk, limit_s, stall_s=1.0):
    """Send chunk over socket s (made non-blocking) again and again for at
    most limit_s seconds, until s has taken nothing for stall_s seconds (the
    peer stopped reading): (bytes sent, whether s was stalled at the end).
    What went out is always a prefix of chunk repeated: a send the kernel
    took in part goes on from where it stopped (starting the chunk over
    would cut a line in two)."""
    s.setblocking(False)
    sent, stalled_since = 0, None
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        _, w, _ = select.select([], [s], [], 0.2)
        if not w:
            if stalled_since is None:
                stalled_since = time.monotonic()
            elif time.monotonic() - stalled_since > stall_s:
                break
            continue
        stalled_since = None
        try:
            sent += s.send(chunk[sent % len(chunk):])
        except BlockingIOError:
            pass
    return sent, stalled_since is not None


def rss_kb(pid):
    """VmRSS of process pid in kB (-1 if /proc does not say)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def port_of(listening_line):
    """The port N of a "listening on ... (port N)" log line."""
    return int(listening_line.rsplit("port ", 1)[1].rstrip(")"))


# ------------------------------------------------------------------ routing
def _rotl(x, r):
    return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF


def bucket_of(i, k=4):
    """Iceberg bucket of an int64: murmur3_x86_32(LE bytes, seed 0) (memwal.md §8.3)."""
    u, h = i & 0xFFFFFFFFFFFFFFFF, 0
    for w in (u & 0xFFFFFFFF, u >> 32):
        w = _rotl((w * 0xCC9E2D51) & 0xFFFFFFFF, 15)
        h ^= (w * 0x1B873593) & 0xFFFFFFFF
        h = (_rotl(h, 13) * 5 + 0xE6546B64) & 0xFFFFFFFF
    h ^= 8
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    h ^= h >> 16
    return (h & 0x7FFFFFFF) % k
