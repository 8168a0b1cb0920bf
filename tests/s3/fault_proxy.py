"""fault_proxy.py — an HTTP/1.1 proxy between memwald and a real S3 server
that injects faults at the HTTP level, for tests/e2e/test_s3_faults.py.

memwald's libcurl talks to the proxy as if it were the endpoint; every
request is forwarded unchanged (the Host header too, so SigV4 still holds)
over a connection of its own to the upstream server, and every answer
comes back unchanged — unless a rule matches the request:

  "503"          answer 503 SlowDown without forwarding
  "drop_body"    read half of the request body, then close the connection
                 (the request never reaches the server)
  "lose_answer"  forward the whole request, read the server's answer, then
                 close the connection without sending it (the request took
                 effect; the client does not know)
  "stall"        forward, then hold the answer for `stall_s` seconds before
                 closing (the client's timeout fires first)
  "race412"      before forwarding a create (PUT If-None-Match: *), send the
                 same request to the server from a second connection (a peer
                 that got there first), then forward ours: it meets 412
  "hold"         hold the request (its body read) until release() is
                 called, then forward it as usual: a slow server under the
                 test's control, with no clock involved
  "501"          answer 501 NotImplemented without forwarding (a store
                 without that call, e.g. DeleteObjects)
  "key_errors"   DeleteObjects: forward it (the keys are deleted), then
                 answer that the first `nkeys` keys of the request failed
                 with InternalError (a partial failure the client retries)
  "key_denied"   DeleteObjects: answer, without forwarding, that every key
                 of the request failed with AccessDenied

The bodies of the DeleteObjects requests seen (POST ?delete) are kept in
order (delete_bodies()), so a test can check what a retry sent.

A rule is (action, method, path regex, count): the next `count` matching
requests get the action. Hits are counted per action.
"""
import re
import socket
import threading
import time


class Rule:
    def __init__(self, action, method=None, path=None, count=1, stall_s=5.0, nkeys=1):
        self.action, self.method, self.count, self.stall_s = action, method, count, stall_s
        self.nkeys = nkeys
        self.path = re.compile(path) if path else None

    def matches(self, method, path):
        return self.count > 0 and (self.method is None or self.method == method) and \
            (self.path is None or self.path.search(path) is not None)


def _read_until(sock, buf, marker):
    while marker not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            return None, buf
        buf += chunk
    i = buf.index(marker) + len(marker)
    return buf[:i], buf[i:]


def _read_n(sock, buf, n):
    while len(buf) < n:
        chunk = sock.recv(min(65536, n - len(buf)) if n - len(buf) > 0 else 65536)
        if not chunk:
            return None, buf
        buf += chunk
    return buf[:n], buf[n:]


def delete_keys(body):
    """The object names of a DeleteObjects request body (XML-unescaped)."""
    from xml.sax.saxutils import unescape
    return [unescape(k, {"&quot;": '"', "&apos;": "'"}) for k in re.findall(r"<Key>([^<]*)</Key>", body)]


def _delete_result(body, n, code):
    """A DeleteResult naming the first n keys of body (all: None) as failed."""
    from xml.sax.saxutils import escape
    keys = delete_keys(body)
    errs = "".join(f"<Error><Key>{escape(k)}</Key><Code>{code}</Code><Message>injected by the "
                   f"fault proxy</Message></Error>" for k in (keys if n is None else keys[:n]))
    return ('<?xml version="1.0" encoding="UTF-8"?><DeleteResult xmlns="http://s3.amazonaws.com/'
            'doc/2006-03-01/">' + errs + "</DeleteResult>").encode()


def _header(head, name):
    m = re.search(rb"\r\n" + name.encode() + rb":\s*([^\r\n]*)", head, re.I)
    return m.group(1).decode() if m else None


def _read_response(sock, method):
    """One whole HTTP response from sock: its bytes (Content-Length or
    chunked); None when the server closed first."""
    head, rest = _read_until(sock, b"", b"\r\n\r\n")
    if head is None:
        return None
    if method == "HEAD" or re.match(rb"HTTP/1\.\d (1\d\d|204|304)", head):
        return head
    cl = _header(head, "Content-Length")
    if cl is not None:
        body, _ = _read_n(sock, rest, int(cl))
        return None if body is None else head + body
    if (_header(head, "Transfer-Encoding") or "").lower() == "chunked":
        out, buf = b"", rest
        while True:
            line, buf = _read_until(sock, buf, b"\r\n")
            if line is None:
                return None
            n = int(line.split(b";")[0], 16)
            chunk, buf = _read_n(sock, buf, n + 2)
            if chunk is None:
                return None
            out += line + chunk
            if n == 0:
                return head + out
    return head  # no body


class FaultProxy:
    def __init__(self, upstream_host, upstream_port):
        self.up = (upstream_host, upstream_port)
        self.lock = threading.Lock()
        self.rules = []
        self.hits = {}
        self.requests = 0
        self.srv = socket.socket()
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(128)
        self.port = self.srv.getsockname()[1]
        self.stop = threading.Event()
        self.released = threading.Event()
        self.held_paths = []
        self.bodies = []
        self.methods = {}
        threading.Thread(target=self._accept, daemon=True).start()

    def add(self, action, method=None, path=None, count=1, stall_s=5.0, nkeys=1):
        with self.lock:
            self.rules.append(Rule(action, method, path, count, stall_s, nkeys))

    def delete_bodies(self):
        """The bodies of the DeleteObjects requests seen so far, in order."""
        with self.lock:
            return list(self.bodies)

    def release(self):
        """Let every held request (and every later "hold") through."""
        self.released.set()

    def rearm(self):
        """Hold again: later "hold" requests wait for the next release()."""
        self.released.clear()

    def held(self):
        """The paths of the requests a "hold" rule has caught so far."""
        with self.lock:
            return list(self.held_paths)

    def clear(self):
        with self.lock:
            self.rules = []

    def pending(self):
        with self.lock:
            return sum(r.count for r in self.rules)

    def close(self):
        self.stop.set()
        self.srv.close()

    def _take(self, method, path):
        with self.lock:
            self.requests += 1
            self.methods[method] = self.methods.get(method, 0) + 1
            for r in self.rules:
                if r.matches(method, path):
                    r.count -= 1
                    self.hits[r.action] = self.hits.get(r.action, 0) + 1
                    return r
        return None

    def _accept(self):
        while not self.stop.is_set():
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        up = None
        buf = b""
        try:
            while True:
                head, buf = _read_until(c, buf, b"\r\n\r\n")
                if head is None:
                    return
                line = head.split(b"\r\n", 1)[0].decode()
                method, path = line.split(" ")[0], line.split(" ")[1]
                n = int(_header(head, "Content-Length") or 0)
                rule = self._take(method, path)
                act = rule.action if rule else "pass"
                if act == "drop_body":
                    _read_n(c, buf, n // 2)
                    return
                if _header(head, "Expect") and n > 0:
                    c.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                body, buf = _read_n(c, buf, n)
                if body is None:
                    return
                if method == "POST" and "?delete" in path:
                    with self.lock:
                        self.bodies.append(body.decode())
                if act in ("501", "key_denied"):
                    if act == "501":
                        code, x = b"501 Not Implemented", (
                            b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>NotImplemented</Code>'
                            b'<Message>not here (fault proxy)</Message></Error>')
                    else:
                        code, x = b"200 OK", _delete_result(body.decode(), None, "AccessDenied")
                    c.sendall(b"HTTP/1.1 " + code + b"\r\nContent-Type: application/xml\r\n"
                              b"Content-Length: " + str(len(x)).encode() + b"\r\n\r\n" + x)
                    continue
                if act == "503":
                    x = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
                         b'<Message>Please reduce your request rate (fault proxy).</Message></Error>')
                    c.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/xml\r\n"
                              b"Content-Length: " + str(len(x)).encode() + b"\r\n\r\n" + x)
                    continue
                if act == "hold":
                    with self.lock:
                        self.held_paths.append(path)
                    self.released.wait()
                req = re.sub(rb"\r\nExpect:[^\r\n]*", b"", head) + body
                if act == "race412" and method == "PUT":
                    peer = socket.create_connection(self.up)
                    peer.sendall(req)
                    _read_response(peer, method)
                    peer.close()
                if up is None:
                    up = socket.create_connection(self.up)
                up.sendall(req)
                resp = _read_response(up, method)
                if resp is None:
                    return
                if act == "lose_answer":
                    return
                if act == "stall":
                    time.sleep(rule.stall_s)
                    return
                if act == "key_errors":
                    x = _delete_result(body.decode(), rule.nkeys, "InternalError")
                    resp = (b"HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\nContent-Length: "
                            + str(len(x)).encode() + b"\r\n\r\n" + x)
                c.sendall(resp)
        except (OSError, ValueError, IndexError):
            return
        finally:
            c.close()
            if up is not None:
                up.close()
