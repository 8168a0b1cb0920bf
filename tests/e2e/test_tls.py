#!/usr/bin/env python3
"""e2e: TLS, per-producer credentials and per-table permissions (issue 32),
with real clients against the real daemon.

Certificates are made here, at run time, with `openssl req` / `openssl x509`
(a test CA, the server's certificate for localhost and 127.0.0.1, a client
certificate the CA signed and one a stranger CA signed); nothing secret is
committed. Tokens are made with `memwalctl token` (the credentials file gets
their SHA-256). The daemon listens on a TLS address (client certificates
optional), a TLS address with replies=none (for rsyslog), a plain address
bound to 0.0.0.0 (AUTH refused there), and serves /metrics over HTTPS.

Checked, each against what a client sees and what LanceDB reads back:
  - `openssl s_client` writes rows after AUTH; Python's ssl over TLS 1.2 and
    1.3; TLS 1.1 refused at the handshake; rows followed by close_notify in
    the same write are all written and answered;
  - mutual TLS: a listed client certificate authenticates without AUTH; one
    from another CA fails the handshake; with tls_client_cert = require (a
    second daemon) no certificate fails the handshake;
  - a token without `delete` gets `forbidden` for DEL (the row stays);
    a wrong token, AUTH over the non-loopback plain listener, no AUTH within
    auth_timeout_ms and a first line over max_preauth_bytes are refused with
    `ERR ... auth ...` and closed;
  - SIGHUP: a token removed from the file is refused (its open connection
    and a new one) while another producer's connection goes on; a new
    certificate is served to new handshakes while an open connection keeps
    working;
  - rsyslog (rsyslog-openssl's ossl driver, client certificate) forwards over
    TLS into the replies=none listener; LanceDB reads every row;
  - /metrics over HTTPS;
  - a slowloris of half-open handshakes (max_handshakes = 16): honest
    producers are still served, and the daemon's memory stays bounded.
Output is TAP.
"""
import json
import os
import resource
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
import warnings

warnings.filterwarnings("ignore", category=DeprecationWarning)  # TLS 1.1 is offered on purpose

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util  # noqa: E402
from e2e_util import Client, Daemon, check, ctl, plan, poll, port_of, rss_kb, run_main, tidy  # noqa: E402

e2e_util.MEMWALD, e2e_util.MEMWALCTL = sys.argv[1], sys.argv[2]
HERE = os.path.dirname(os.path.abspath(__file__))
READ = os.path.join(HERE, "..", "..", "tools", "read-table.mjs")
CHILDREN = []
RSYSLOG_ROWS = 2000
SLOW_CONNS = 300


def sh(*args, cwd=None):
    r = subprocess.run(list(args), capture_output=True, text=True, cwd=cwd)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {r.stderr}")
    return r.stdout


def make_cert(d, name, subj, ca, ext):
    """name.key/name.pem: an EC P-256 key and a certificate for subj signed by ca."""
    sh("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
       f"{name}.key", "-out", f"{name}.csr", "-subj", subj, cwd=d)
    with open(os.path.join(d, f"{name}.ext"), "w") as f:
        f.write(ext + "\n")
    sh("openssl", "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
       "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext", cwd=d)


def make_pki(d):
    for ca in ("ca", "stranger-ca"):
        sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
           "-keyout", f"{ca}.key", "-out", f"{ca}.pem", "-days", "2", "-subj", f"/CN=memwald test {ca}", cwd=d)
    server_ext = "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth"
    make_cert(d, "server", "/CN=localhost/O=first", "ca", server_ext)
    make_cert(d, "server2", "/CN=localhost/O=second", "ca", server_ext)
    make_cert(d, "client", "/O=memwald-test/CN=producer-a", "ca", "extendedKeyUsage=clientAuth")
    make_cert(d, "stranger", "/O=memwald-test/CN=producer-a", "stranger-ca", "extendedKeyUsage=clientAuth")


def token(name, *grants):
    """memwalctl token: (credentials line, token)."""
    r = subprocess.run([e2e_util.MEMWALCTL, "token", name, *grants], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip(), r.stderr.strip().rsplit(" ", 1)[1]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def client_ctx(pki, cert=None, minv=None, maxv=None):
    ctx = ssl.create_default_context(cafile=os.path.join(pki, "ca.pem"))
    if cert:
        ctx.load_cert_chain(os.path.join(pki, f"{cert}.pem"), os.path.join(pki, f"{cert}.key"))
    if minv or maxv:
        ctx.set_ciphers("DEFAULT:@SECLEVEL=0")  # let the client offer old versions; the server must refuse
        if minv:
            ctx.minimum_version = minv
        if maxv:
            ctx.maximum_version = maxv
    return ctx


class TlsClient(Client):
    """e2e_util.Client over TLS (Python's ssl): the handshake in __init__."""

    def __init__(self, port, ctx, timeout=10):
        super().__init__(port, timeout=timeout)
        self.s = ctx.wrap_socket(self.s, server_hostname="localhost")

    def closed(self, timeout=10):
        try:
            return super().closed(timeout)
        except (ssl.SSLError, OSError):
            return True


def try_handshake(port, ctx):
    """None when the handshake and a PING succeed, else what failed."""
    try:
        c = TlsClient(port, ctx)
        c.send("PING\n")
        got = c.line(5)
        c.close()
        return None if got is not None else "no reply"
    except (ssl.SSLError, OSError) as e:
        return str(e)


def lancedb_rows(tmp):
    r = subprocess.run(["node", READ, os.path.join(tmp, "db", "t.lance")], capture_output=True, text=True,
                       timeout=180)
    rows = {}
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            o = json.loads(line)
            rows[o["id"]] = o
    return r.returncode, rows, r.stderr


def write_conf(tmp, pki, creds, metrics_port):
    conf = os.path.join(tmp, "memwald.conf")
    with open(conf, "w") as f:
        f.write(f"""[daemon]
data_dir = {tmp}/db
admin_socket = {tmp}/admin.sock
listen = 127.0.0.1:0 tls, 127.0.0.1:0 tls replies=none, 0.0.0.0:0
tls_cert_file = {tmp}/live.pem
tls_key_file = {tmp}/live.key
tls_ca_file = {pki}/ca.pem
tls_client_cert = optional
credentials_file = {creds}
auth_timeout_ms = 1500
max_preauth_bytes = 1024
max_handshakes = 16
handshake_timeout_ms = 5000
metrics_listen = 127.0.0.1:{metrics_port} tls
[table t]
uri = t.lance
create = true
schema = id:int64 not null, v:string
primary_key = id
""")
    return conf


def check_clients(tls_port, pki, tok):
    """s_client, Python ssl at 1.2 and 1.3, 1.1 refused, mutual TLS."""
    r = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{tls_port}", "-CAfile",
                        os.path.join(pki, "ca.pem"), "-verify_return_error", "-quiet"],
                       input=f'AUTH {tok["admin"]}\n{{"id":1,"v":"s_client"}}\nPING\nQUIT\n', capture_output=True,
                       text=True, timeout=30)
    check("openssl s_client: AUTH, a row and PING over TLS -> OK 1, PONG",
          r.stdout.splitlines() == ["OK 1", "PONG"], r.stdout + r.stderr[-500:])
    for name, ver in (("1.2", ssl.TLSVersion.TLSv1_2), ("1.3", ssl.TLSVersion.TLSv1_3)):
        c = TlsClient(tls_port, client_ctx(pki, minv=ver, maxv=ver))
        c.send(f'AUTH {tok["writer"]}\n{{"id":{2 if name == "1.2" else 3},"v":"py{name}"}}\nPING\n')
        got = c.lines(2)
        check(f"Python ssl over TLS {name} ({c.s.version()} {c.s.cipher()[0]}): OK 1, PONG",
              got == ["OK 1", "PONG"] and c.s.version() == f"TLSv{name}", got)
        c.close()
    err = try_handshake(tls_port, client_ctx(pki, minv=ssl.TLSVersion.TLSv1_1, maxv=ssl.TLSVersion.TLSv1_1))
    check("TLS 1.1 is refused at the handshake", err is not None and "PONG" not in err, err)
    got = close_notify_after_rows(tls_port, pki, tok["writer"])
    check("rows then close_notify in one write: every row written and answered (OK 10), then closed",
          got == b"OK 10\n", got)
    c = TlsClient(tls_port, client_ctx(pki, cert="client"))
    c.send('{"id":4,"v":"mtls"}\nDEL {"id":3}\nPING\n')
    got = c.lines(2)
    check("mutual TLS: the listed client certificate authenticates without AUTH (write and delete)",
          got == ["OK 2", "PONG"], got)
    c.close()
    err = try_handshake(tls_port, client_ctx(pki, cert="stranger"))
    check("mutual TLS: a client certificate from another CA fails the handshake", err is not None, err)


def close_notify_after_rows(port, pki, tok):
    """Rows, then TLS's close_notify, in one write (Python's SSLObject over
    memory BIOs): the replies read after it, as bytes."""
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    o = client_ctx(pki).wrap_bio(inc, out, server_hostname="localhost")
    s = socket.create_connection(("127.0.0.1", port), timeout=10)

    def pump():
        data = out.read()
        if data:
            s.sendall(data)
    while True:
        try:
            o.do_handshake()
            break
        except ssl.SSLWantReadError:
            pump()
            inc.write(s.recv(65536))
    o.write((f"AUTH {tok}\n" + "".join('{"id":%d,"v":"cn"}\n' % i for i in range(500, 510))).encode())
    try:
        o.unwrap()  # close_notify, not waiting for the server's
    except ssl.SSLWantReadError:
        pass
    pump()
    got = b""
    while True:
        try:
            data = s.recv(65536)
        except socket.timeout:
            break
        if not data:
            break
        inc.write(data)
        try:
            got += o.read(65536)
        except (ssl.SSLWantReadError, ssl.SSLZeroReturnError):
            pass
    s.close()
    return got


def check_refusals(d, tls_port, plain_port, pki, tok):
    c = TlsClient(tls_port, client_ctx(pki))
    c.send(f'AUTH {tok["writer"]}\n{{"id":5,"v":"w"}}\nDEL {{"id":1}}\n{{"id":6,"v":"w"}}\nPING\n')
    got = c.lines(4)
    check("a token without delete: DEL -> ERR 3 forbidden naming the principal; rows around it OK",
          len(got) == 4 and got[0] == "OK 1" and got[1] is not None and got[1].startswith("ERR 3 forbidden ")
          and '"writer" may not delete' in got[1] and got[2] == "OK 1" and got[3] == "PONG", got)
    c.close()
    c = TlsClient(tls_port, client_ctx(pki))
    c.send("AUTH mwt_not-a-token\nPING\n")
    got = c.line()
    check("a wrong token -> ERR 1 auth wrong token, closed", got == "ERR 1 auth wrong token" and c.closed(), got)
    c = Client(plain_port)
    c.send(f'AUTH {tok["writer"]}\n{{"id":7}}\n')
    got = c.line()
    check("AUTH over the plain listener bound to 0.0.0.0 -> ERR 1 auth (use tls), closed",
          got is not None and got.startswith("ERR 1 auth AUTH refused over plain TCP") and c.closed(), got)
    t0 = time.monotonic()
    c = TlsClient(tls_port, client_ctx(pki))
    got = c.line(10)
    waited = time.monotonic() - t0
    check("no AUTH within auth_timeout_ms (1.5 s) -> ERR 0 auth, closed",
          got is not None and got.startswith("ERR 0 auth no AUTH within 1500 ms") and 1.0 < waited < 6
          and c.closed(), f"{got} after {waited:.2f}s")
    c = TlsClient(tls_port, client_ctx(pki))
    c.send("A" * 3000)
    got = c.line(10)
    check("a first line over max_preauth_bytes (1024) -> ERR 0 auth, closed",
          got is not None and got.startswith("ERR 0 auth more than 1024 bytes before AUTH") and c.closed(), got)
    logged = d.wait_line('rejected: peer 127.0.0.1', 5)
    check("refusals are logged with their reason (no token in the log)",
          logged is not None and not any(tok["writer"] in l for l in d.lines), logged)


def check_reload(d, tmp, tls_port, pki, tok, creds_lines):
    keep = TlsClient(tls_port, client_ctx(pki))
    keep.send(f'AUTH {tok["writer"]}\n{{"id":10,"v":"before"}}\n')
    gone = TlsClient(tls_port, client_ctx(pki))
    gone.send(f'AUTH {tok["revokee"]}\n{{"id":11,"v":"before"}}\n')
    ok = keep.line() == "OK 1" and gone.line() == "OK 1"
    serial1 = ssl.DER_cert_to_PEM_cert(keep.s.getpeercert(binary_form=True))
    with open(os.path.join(tmp, "creds"), "w") as f:
        f.write("\n".join(l for l in creds_lines if " revokee " not in l) + "\n")
    for ext in ("pem", "key"):
        shutil.copy(os.path.join(pki, f"server2.{ext}"), os.path.join(tmp, f"live.{ext}.new"))
        os.replace(os.path.join(tmp, f"live.{ext}.new"), os.path.join(tmp, f"live.{ext}"))
    d.p.send_signal(signal.SIGHUP)
    reloaded = d.wait_line("reload: credentials re-read", 20)
    certs = d.wait_line("reload: TLS certificate and key re-read", 5)
    check("SIGHUP re-reads the credentials and the certificate", ok and reloaded and certs,
          "\n".join(d.lines[-8:]))
    got = gone.line()
    check("the revoked token's open connection -> ERR 0 auth credential revoked, closed",
          got == 'ERR 0 auth credential "revokee" revoked' and gone.closed(), got)
    c = TlsClient(tls_port, client_ctx(pki))
    c.send(f'AUTH {tok["revokee"]}\n{{"id":12}}\n')
    got = c.line()
    check("the revoked token on a new connection -> ERR 1 auth", got is not None and got.startswith("ERR 1 auth "), got)
    keep.send('{"id":13,"v":"after"}\nPING\n')
    got = keep.lines(2)
    check("another producer's connection goes on through the reload (old certificate, same session)",
          got == ["OK 1", "PONG"]
          and ssl.DER_cert_to_PEM_cert(keep.s.getpeercert(binary_form=True)) == serial1, got)
    n = TlsClient(tls_port, client_ctx(pki))
    subj = dict(x[0] for x in n.s.getpeercert()["subject"])
    n.send(f'AUTH {tok["writer"]}\nPING\n')
    check("a new handshake gets the new certificate (O=second)", subj.get("organizationName") == "second"
          and n.line() == "PONG", subj)
    n.close()
    keep.close()


def check_rsyslog(d, tmp, shipper_port, pki, sock):
    rsyslogd = shutil.which("rsyslogd") or ("/usr/sbin/rsyslogd" if os.path.exists("/usr/sbin/rsyslogd") else None)
    have_ossl = any(os.path.exists(os.path.join(p, "lmnsd_ossl.so"))
                    for p in ("/usr/lib/x86_64-linux-gnu/rsyslog", "/usr/lib/aarch64-linux-gnu/rsyslog",
                              "/usr/lib/rsyslog"))
    check("rsyslogd and its ossl driver are installed (tools/install-deps.sh --test: rsyslog-openssl)",
          rsyslogd is not None and have_ossl)
    if not (rsyslogd and have_ossl):
        return
    in_port = free_port()
    rconf = os.path.join(tmp, "rsyslog.conf")
    with open(rconf, "w") as f:
        f.write(f"""global(workDirectory="{tmp}"
       DefaultNetstreamDriverCAFile="{pki}/ca.pem"
       DefaultNetstreamDriverCertFile="{pki}/client.pem"
       DefaultNetstreamDriverKeyFile="{pki}/client.key")
module(load="imptcp")
input(type="imptcp" port="{in_port}" address="127.0.0.1")
template(name="mwjson" type="list" option.jsonf="on") {{
  property(outname="id" name="$!seq" format="jsonf" datatype="number")
  property(outname="v" name="msg" format="jsonf")
}}
set $!seq = re_extract($msg, "seq=([0-9]+)", 0, 1, "0");
action(type="omfwd" target="127.0.0.1" port="{shipper_port}" protocol="tcp" template="mwjson"
       StreamDriver="ossl" StreamDriverMode="1" StreamDriverAuthMode="x509/name"
       StreamDriverPermittedPeers="localhost"
       TCP_Framing="traditional" queue.type="LinkedList" queue.size="200000"
       action.resumeRetryCount="-1" action.resumeInterval="1")
""")
    rlog = open(os.path.join(tmp, "rsyslogd.log"), "w")
    r = subprocess.Popen([rsyslogd, "-n", "-f", rconf, "-i", os.path.join(tmp, "rsyslogd.pid")],
                         stdout=rlog, stderr=subprocess.STDOUT)
    CHILDREN.append(r)

    def connect_in():
        try:
            return socket.create_connection(("127.0.0.1", in_port), timeout=5)
        except OSError:
            return None
    s = poll(connect_in, 30, interval=0.05)
    check("rsyslogd (foreground, private config) accepts syslog lines", s is not None)
    if s is None:
        return
    base = ingested(sock)
    sent = {}
    for i in range(100000, 100000 + RSYSLOG_ROWS):
        sent[i] = f"seq={i} forwarded over TLS"
    s.sendall("".join(f"<13>Dec  1 12:00:00 host app: {m}\n" for m in sent.values()).encode())
    s.close()
    got = poll(lambda: ingested(sock) >= base + RSYSLOG_ROWS, 120, interval=0.2)
    r.send_signal(signal.SIGTERM)
    try:
        r.wait(30)
    except subprocess.TimeoutExpired:
        r.kill()
        r.wait()
    rlog.close()
    check("rsyslog forwarded every row over TLS (client certificate, replies=none)", got,
          f"ingested {ingested(sock)} - {base}\n" + open(os.path.join(tmp, "rsyslogd.log")).read()[-1500:])
    return sent


def ingested(sock):
    rc, out, _ = ctl(sock, "metrics")
    for line in out.splitlines() if rc == 0 else []:
        if line.startswith('memwald_rows_ingested_total{table="t"} '):
            return int(float(line.split()[1]))
    return -1


def check_slowloris(d, tls_port, pki, tok, sock):
    """SLOW_CONNS connections each holding a half-sent ClientHello, with
    max_handshakes = 16: honest producers (one connected before, one
    connecting during) are served; memory stays bounded."""
    before = TlsClient(tls_port, client_ctx(pki))
    before.send(f'AUTH {tok["writer"]}\nPING\n')
    ok_before = before.line() == "PONG"
    hello = bytes.fromhex("160301") + (512).to_bytes(2, "big") + bytes.fromhex("010001fc0303") + b"\x11" * 40
    rss0 = rss_kb(d.p.pid)
    slow = []
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    for _ in range(SLOW_CONNS):
        s = socket.create_connection(("127.0.0.1", tls_port), timeout=5)
        s.sendall(hello)  # a record header promising 512 bytes, then silence
        slow.append(s)
    t0 = time.monotonic()
    c = poll(lambda: try_handshake(tls_port, client_ctx(pki)) is None, 10, interval=0.05)
    honest_s = time.monotonic() - t0
    before.send('{"id":20,"v":"during"}\nPING\n')
    got = before.lines(2)
    rss1 = rss_kb(d.p.pid)
    evicted = d.wait_line("TLS handshake evicted", 5)
    check(f"slowloris ({SLOW_CONNS} half-open handshakes, max_handshakes 16): a new producer's handshake "
          f"succeeds ({honest_s:.2f} s), an open one is served", ok_before and c and got == ["OK 1", "PONG"]
          and evicted is not None, f"{got} {evicted}")
    check(f"memory bounded under the slowloris: RSS {rss0} -> {rss1} kB (< +64 MiB)",
          rss1 - rss0 < 64 * 1024, f"{rss0} -> {rss1}")
    rc, out, _ = ctl(sock, "metrics")
    hs = {l.split('"')[1]: float(l.split()[-1]) for l in out.splitlines()
          if l.startswith("memwald_tls_handshakes_total{")}
    check(f"memwald_tls_handshakes_total counts them: {hs}", hs.get("evicted", 0) >= SLOW_CONNS - 16
          and hs.get("ok", 0) >= 10 and hs.get("failed", 0) >= 2, out[-500:])
    for s in slow:
        s.close()
    before.close()


def check_require(tmp, pki):
    """A second daemon with tls_client_cert = require and no credentials:
    no certificate, no connection; the CA's client certificate writes."""
    conf = os.path.join(tmp, "require.conf")
    with open(conf, "w") as f:
        f.write(f"""[daemon]
data_dir = {tmp}/db2
admin_socket = {tmp}/admin2.sock
listen = 127.0.0.1:0 tls
tls_cert_file = {tmp}/live.pem
tls_key_file = {tmp}/live.key
tls_ca_file = {pki}/ca.pem
tls_client_cert = require
[table t]
uri = t.lance
create = true
schema = id:int64 not null, v:string
primary_key = id
""")
    d = Daemon(["-c", conf])
    CHILDREN.append(d.p)
    line = d.wait_line("listening on", 30)
    started = d.wait_line("started", 30)
    if not (line and started):
        check("tls_client_cert = require: the daemon starts", False, "\n".join(d.lines))
        d.stop()
        return
    port = port_of(line)
    err = try_handshake(port, client_ctx(pki))
    logged = d.wait_line("peer did not return a certificate", 10)
    check("tls_client_cert = require: a client without a certificate is refused, the log says why",
          err is not None and logged is not None, f"{err}\n" + "\n".join(d.lines[-5:]))
    c = TlsClient(port, client_ctx(pki, cert="client"))
    c.send('{"id":1,"v":"required"}\nPING\n')
    got = c.lines(2)
    check("tls_client_cert = require: the CA's client certificate writes (no credentials: every table)",
          got == ["OK 1", "PONG"], got)
    c.close()
    check("the second daemon stops cleanly", d.stop() == 0, "\n".join(d.lines[-5:]))


def main():
    tmp = tempfile.mkdtemp(prefix="memwald-e2e-tls-")
    pki = os.path.join(tmp, "pki")
    os.mkdir(pki)
    make_pki(pki)
    shutil.copy(os.path.join(pki, "server.pem"), os.path.join(tmp, "live.pem"))
    shutil.copy(os.path.join(pki, "server.key"), os.path.join(tmp, "live.key"))
    tok, lines = {}, []
    for name, grants in (("writer", ["t=write"]), ("admin", ["t=write,delete"]), ("revokee", ["*=write"])):
        line, tok[name] = token(name, *grants)
        lines.append(line)
    lines.append('cert shipper "CN=producer-a,O=memwald-test" t=write,delete')
    creds = os.path.join(tmp, "creds")
    with open(creds, "w") as f:
        f.write("# made by tests/e2e/test_tls.py\n" + "\n".join(lines) + "\n")
    check("the credentials file holds hashes, never a token",
          not any(t in open(creds).read() for t in tok.values()) and "sha256:" in open(creds).read())
    metrics_port = free_port()
    conf = write_conf(tmp, pki, creds, metrics_port)
    sock = os.path.join(tmp, "admin.sock")
    d = Daemon(["-c", conf])
    CHILDREN.append(d.p)
    started = d.wait_line("started", 30)
    ls = [l for l in d.lines if "listening on" in l]
    check("memwald starts with tls listeners, credentials and https metrics", started and len(ls) == 3,
          "\n".join(d.lines))
    if len(ls) != 3:
        d.stop()
        return plan()
    tls_port, shipper_port, plain_port = (port_of(l) for l in ls)
    check_clients(tls_port, pki, tok)
    check_refusals(d, tls_port, plain_port, pki, tok)
    check_reload(d, tmp, tls_port, pki, tok, lines)
    ctx = client_ctx(pki)
    body = urllib.request.urlopen(f"https://localhost:{metrics_port}/metrics", context=ctx, timeout=10).read().decode()
    check("GET /metrics over HTTPS", "memwald_rows_ingested_total" in body, body[:300])
    sent = check_rsyslog(d, tmp, shipper_port, pki, sock) or {}
    check_slowloris(d, tls_port, pki, tok, sock)
    rc, out, err = ctl(sock, "flush")
    check("memwalctl flush", rc == 0, out + err)
    rrc, rows, rerr = lancedb_rows(tmp)
    want = {1: "s_client", 2: "py1.2", 4: "mtls", 5: "w", 6: "w", 10: "before", 11: "before", 13: "after",
            20: "during", 500: "cn", 509: "cn"}
    bad = [i for i, v in want.items() if rows.get(i, {}).get("v") != v]
    check("LanceDB reads the rows written over TLS; the forbidden DEL deleted nothing (id 1 is there), "
          "the certificate's DEL did (id 3 is gone), refused rows are absent (7, 12)",
          rrc == 0 and not bad and 3 not in rows and 7 not in rows and 12 not in rows,
          f"bad {bad} {rerr[-500:]}")
    bad = [i for i, m in sent.items() if rows.get(i, {}).get("v") != " " + m]
    check(f"LanceDB reads every row rsyslog forwarded over TLS ({len(sent)})", sent and not bad,
          f"bad {bad[:5]}")
    rc = d.stop()
    check("memwald stops cleanly", rc == 0, "\n".join(d.lines[-5:]))
    check_require(tmp, pki)
    tidy(tmp)
    return plan()


if __name__ == "__main__":
    run_main(main, CHILDREN)
