"""e2e_util.py — what the e2e scripts share, so that no test script imports
another one.

  Daemon   the real memwald as a child process; its stderr (the log) is read
           as it comes: wait_line(needle, timeout) for synchronisation by log
           line, finish() to drain and reap it.
  Client   one producer connection with deadline-bounded line reads.
  rss_kb   a process's resident set (VmRSS), for the memory checks.
  port_of  the port in the daemon's "listening on ... (port N)" line.
"""
import os
import select
import socket
import subprocess
import time

MEMWALD = None  # set by the script that uses Daemon (its argv)


class Daemon:
    def __init__(self, args):
        self.p = subprocess.Popen([memwald_path()] + args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
        self.fd, self.partial, self.lines = self.p.stderr.fileno(), b"", []

    def _read(self, timeout):
        r, _, _ = select.select([self.fd], [], [], max(0.0, timeout))
        if not r:
            return False
        chunk = os.read(self.fd, 65536)
        if not chunk:
            return False
        self.partial += chunk
        *done, self.partial = self.partial.split(b"\n")
        self.lines += [l.decode(errors="replace") for l in done]
        return True

    def wait_line(self, needle, timeout=20.0):
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for line in self.lines[seen:]:
                if needle in line:
                    return line
            seen = len(self.lines)
            if time.monotonic() >= deadline or not self._read(deadline - time.monotonic()):
                return None

    def finish(self, timeout=60):
        deadline = time.monotonic() + timeout
        while self._read(deadline - time.monotonic()):
            pass
        try:
            return self.p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.p.kill()
            return self.p.wait()


def memwald_path():
    assert MEMWALD, "e2e_util.MEMWALD is not set"
    return MEMWALD


class Client:
    def __init__(self, port, host="127.0.0.1", family=socket.AF_INET):
        self.s = socket.socket(family, socket.SOCK_STREAM)
        self.s.settimeout(10)
        self.s.connect((host, port))
        self.buf = b""

    def send(self, data):
        if isinstance(data, str):
            data = data.encode()
        self.s.sendall(data)

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

    def lines(self, n, timeout=10):
        return [self.line(timeout) for _ in range(n)]

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


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def port_of(listening_line):
    return int(listening_line.rsplit("port ", 1)[1].rstrip(")"))
