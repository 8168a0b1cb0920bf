"""S3 requests for the e2e tests: one signed curl call, and a bucket's removal.

Credentials and endpoint come from the environment tests/s3/with-s3.sh exports
(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, MW_S3_ENDPOINT).
"""
import os
import re
import subprocess
import tempfile

def s3(method, path, out=None):
    e = os.environ
    cmd = ["curl", "-s", "-o", out or "/dev/null", "-w", "%{http_code}", "--aws-sigv4", "aws:amz:us-east-1:s3",
           "--user", f"{e['AWS_ACCESS_KEY_ID']}:{e['AWS_SECRET_ACCESS_KEY']}",
           "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-X", method, e["MW_S3_ENDPOINT"] + path]
    return int(subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout or 0)


def drop_bucket(name):
    e = os.environ
    while True:
        tmp = tempfile.mktemp()
        s3("GET", f"/{name}?list-type=2", tmp)
        keys = re.findall(r"<Key>([^<]*)</Key>", open(tmp).read())
        os.unlink(tmp)
        if not keys:
            break
        subprocess.run(["curl", "-s", "-o", "/dev/null", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
                        f"{e['AWS_ACCESS_KEY_ID']}:{e['AWS_SECRET_ACCESS_KEY']}", "-H",
                        "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-X", "DELETE"]
                       + [f"{e['MW_S3_ENDPOINT']}/{name}/{k}" for k in keys], capture_output=True, timeout=300)
    s3("DELETE", "/" + name)
