#!/usr/bin/env python3
"""storage (issue 13): S3 prefix deletion by DeleteObjects, under faults.

Run through tests/s3/with-s3.sh with the s3_tool binary as argument. Objects
are uploaded straight to the server; `s3_tool rm` (mw_storage delete_prefix,
then delete_root) runs with tests/s3/fault_proxy.py as its endpoint, which
forwards everything unchanged except what a phase's rule picks:

  503          the first batch answered 503 twice: retried, then whole;
               1 100 keys go as 1 000 + 100
  drop_body    a batch cut off mid-body, then its retry's answer lost after
               the server applied it: retried (deleting is idempotent)
  key_errors   the server deletes the batch, the answer says 5 keys failed
               with InternalError: exactly those 5 go out again, alone
  key_denied   every key answered AccessDenied: rm fails naming the bucket,
               a key and the code; nothing is claimed deleted; a later rm
               removes everything
  501          the store has no DeleteObjects: one DELETE per key instead

and the same exchange for mw_storage_delete_many (`s3_tool rm-keys`, the
keys given, one missing among them), where each key has its own result:

  many_503        a 503, then the batch whole; the missing key counts as
                  deleted
  many_key_errors 5 keys InternalError: those 5 again, alone; all deleted
  many_key_denied every key AccessDenied: each key named failed, nothing
                  deleted, the others of a later call fine
  many_501        no DeleteObjects: one DELETE per key, the missing one too

After each phase the prefix must hold exactly what it should (listed
straight from the server). TAP output.
"""
import os
import subprocess
import sys
import tempfile
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from fault_proxy import FaultProxy, delete_keys  # noqa: E402
from s3_util import drop_bucket, s3  # noqa: E402

TOOL = sys.argv[1]
BUCKET = f"mw-delf-{os.getpid()}"
n_test = 0
failed = 0


def check(ok, what, detail=""):
    global n_test, failed
    n_test += 1
    print(f"{'ok' if ok else 'not ok'} {n_test} - {what}")
    if not ok:
        failed += 1
        print("# " + str(detail).replace("\n", "\n# "))


def tool(args, endpoint=None):
    env = dict(os.environ)
    if endpoint:
        env["AWS_ENDPOINT_URL"] = endpoint
    return subprocess.run([TOOL] + args, capture_output=True, text=True, timeout=180, env=env)


def upload(prefix, n):
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "sub"))
        for i in range(n):
            with open(os.path.join(d, "sub" if i % 2 else "", f"o{i:05d}"), "w") as f:
                f.write(str(i))
        r = tool(["put-dir", d, f"s3://{BUCKET}/{prefix}"])
        assert r.returncode == 0, r.stderr


def keys_of(n):
    return [("sub/" if i % 2 else "") + f"o{i:05d}" for i in range(n)]


def rm_keys(prefix, keys, endpoint):
    env = dict(os.environ)
    env["AWS_ENDPOINT_URL"] = endpoint
    return subprocess.run([TOOL, "rm-keys", f"s3://{BUCKET}/{prefix}"], input="\n".join(keys) + "\n",
                          capture_output=True, text=True, timeout=180, env=env)


def count(prefix):
    r = tool(["count", f"s3://{BUCKET}/{prefix}"])
    return int(r.stdout) if r.returncode == 0 else -1


def main():
    ep = os.environ["MW_S3_ENDPOINT"]
    if s3("PUT", "/" + BUCKET) != 200:
        print("1..1\nnot ok 1 - cannot create bucket " + BUCKET)
        return 1
    u = urllib.parse.urlparse(ep)
    proxy = FaultProxy(u.hostname, u.port)
    via = f"http://127.0.0.1:{proxy.port}"
    print("1..32")
    try:
        batch = r"\?delete="
        # 503 twice on the first batch
        upload("a", 1100)
        proxy.add("503", "POST", batch, count=2)
        nb = len(proxy.delete_bodies())
        r = tool(["rm", f"s3://{BUCKET}/a"], via)
        check(r.returncode == 0, "503: rm succeeds after the retries", r.stderr)
        check(count("a") == 0, "503: nothing left under the prefix", count("a"))
        sizes = [len(delete_keys(b)) for b in proxy.delete_bodies()[nb:]]
        check(proxy.hits.get("503") == 2 and sizes == [1000, 1000, 1000, 100],
              "503: 1 000 keys sent three times (two 503s), then the last 100", sizes)
        # a body cut mid-way, then an answer lost after it was applied
        upload("b", 40)
        proxy.add("drop_body", "POST", batch, count=1)
        proxy.add("lose_answer", "POST", batch, count=1)
        r = tool(["rm", f"s3://{BUCKET}/b"], via)
        check(r.returncode == 0, "drop_body + lose_answer: rm succeeds", r.stderr)
        check(count("b") == 0, "drop_body + lose_answer: nothing left", count("b"))
        check(proxy.hits.get("drop_body") == 1 and proxy.hits.get("lose_answer") == 1,
              "drop_body + lose_answer: both faults were used", proxy.hits)
        # per-key InternalError for 5 keys (that the server did delete)
        upload("c", 40)
        proxy.add("key_errors", "POST", batch, count=1, nkeys=5)
        nb = len(proxy.delete_bodies())
        r = tool(["rm", f"s3://{BUCKET}/c"], via)
        bodies = [delete_keys(b) for b in proxy.delete_bodies()[nb:]]
        check(r.returncode == 0, "key_errors: rm succeeds", r.stderr)
        check(count("c") == 0, "key_errors: nothing left", count("c"))
        check(len(bodies) == 2 and len(bodies[0]) == 40 and bodies[1] == bodies[0][:5],
              "key_errors: exactly the 5 failed keys are sent again",
              [len(b) for b in bodies])
        # AccessDenied for every key: a final failure, named
        upload("d", 10)
        proxy.add("key_denied", "POST", batch, count=1)
        r = tool(["rm", f"s3://{BUCKET}/d"], via)
        check(r.returncode == 1, "key_denied: rm fails", r.returncode)
        check("AccessDenied" in r.stderr and f"s3://{BUCKET}/d/" in r.stderr,
              "key_denied: the reason names the bucket, the key and the code", r.stderr)
        check(count("d") == 10, "key_denied: every object is still there", count("d"))
        r = tool(["rm", f"s3://{BUCKET}/d"], via)
        check(r.returncode == 0 and count("d") == 0, "key_denied: a later rm removes them", r.stderr)
        # no DeleteObjects at all: one DELETE per key
        upload("e", 12)
        proxy.add("501", "POST", batch, count=1)
        deletes = proxy.methods.get("DELETE", 0)
        r = tool(["rm", f"s3://{BUCKET}/e"], via)
        check(r.returncode == 0, "501: rm succeeds", r.stderr)
        check(count("e") == 0, "501: nothing left", count("e"))
        check(proxy.methods.get("DELETE", 0) - deletes == 12,
              "501: one DELETE per key instead", proxy.methods.get("DELETE", 0) - deletes)
        check("one key per request" in r.stderr or "refused DeleteObjects" in r.stderr,
              "501: the switch is logged", r.stderr)
        # delete_many: a 503, then whole; a missing key is a deletion
        upload("f", 40)
        proxy.add("503", "POST", batch, count=1)
        nb = len(proxy.delete_bodies())
        r = rm_keys("f", keys_of(40) + ["nothing/here"], via)
        sizes = [len(delete_keys(b)) for b in proxy.delete_bodies()[nb:]]
        check(r.returncode == 0 and r.stdout.strip() == "41", "many_503: all 41 keys deleted (one missing)",
              r.stdout + r.stderr)
        check(count("f") == 0, "many_503: nothing left", count("f"))
        check(sizes == [41, 41], "many_503: one DeleteObjects of 41 keys, sent twice", sizes)
        # delete_many: 5 keys InternalError, retried alone
        upload("g", 40)
        proxy.add("key_errors", "POST", batch, count=1, nkeys=5)
        nb = len(proxy.delete_bodies())
        r = rm_keys("g", keys_of(40), via)
        bodies = [delete_keys(b) for b in proxy.delete_bodies()[nb:]]
        check(r.returncode == 0 and r.stdout.strip() == "40", "many_key_errors: all 40 deleted",
              r.stdout + r.stderr)
        check(count("g") == 0, "many_key_errors: nothing left", count("g"))
        check(len(bodies) == 2 and bodies[1] == bodies[0][:5],
              "many_key_errors: exactly the 5 failed keys are sent again", [len(b) for b in bodies])
        # delete_many: every key AccessDenied, each named; nothing deleted
        upload("h", 10)
        proxy.add("key_denied", "POST", batch, count=1)
        r = rm_keys("h", keys_of(10), via)
        named = sum(1 for k in keys_of(10) if f"s3_tool: {k}: Permission denied" in r.stderr)
        check(r.returncode == 1 and r.stdout.strip() == "0", "many_key_denied: fails, 0 deleted",
              r.stdout + r.stderr)
        check(named == 10, "many_key_denied: each of the 10 keys is named failed", r.stderr)
        check("AccessDenied" in r.stderr, "many_key_denied: the reason has the S3 code", r.stderr)
        check(count("h") == 10, "many_key_denied: every object is still there", count("h"))
        r = rm_keys("h", keys_of(10), via)
        check(r.returncode == 0 and count("h") == 0, "many_key_denied: a later call removes them", r.stderr)
        # delete_many without DeleteObjects: one DELETE per key (the missing one too)
        upload("i", 12)
        proxy.add("501", "POST", batch, count=1)
        deletes = proxy.methods.get("DELETE", 0)
        r = rm_keys("i", keys_of(12) + ["nothing/here"], via)
        check(r.returncode == 0 and r.stdout.strip() == "13", "many_501: all 13 keys deleted",
              r.stdout + r.stderr)
        check(count("i") == 0, "many_501: nothing left", count("i"))
        check(proxy.methods.get("DELETE", 0) - deletes == 13, "many_501: one DELETE per key",
              proxy.methods.get("DELETE", 0) - deletes)
        check(proxy.pending() == 0, "every rule was used", proxy.pending())
    finally:
        proxy.close()
        drop_bucket(BUCKET)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
