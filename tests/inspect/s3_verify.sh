#!/usr/bin/env bash
# s3_verify.sh — memwal-inspect on object storage: a golden vector uploaded
# to its own bucket on the real S3 server (radosgw, tests/s3/with-s3.sh runs
# this), then `verify s3://BUCKET/t.lance` must pass and `dump` decode every
# object; with the middle WAL entry deleted, verify must fail naming its key. The
# bucket is removed at the end.
#
#   with-s3.sh s3_verify.sh MEMWAL_INSPECT
set -uo pipefail
inspect=$1
vectors=${MW_VECTORS:?MW_VECTORS is not set}
src="$vectors/unsharded-unflushed/t.lance"  # replay point 0, WAL 1..3
bucket="mw-inspect-$$"
s3() { # METHOD PATH [FILE]: the HTTP status
  local args=(-s -o /dev/null -w '%{http_code}' --aws-sigv4 'aws:amz:us-east-1:s3'
              --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD'
              -X "$1" "$MW_S3_ENDPOINT/$2")
  [ $# -ge 3 ] && args+=(--data-binary "@$3")
  curl "${args[@]}"
}
fail() { echo "s3_verify: $*" >&2; cleanup; exit 1; }
cleanup() {
  for k in $(cd "$src" && find . -type f | sed 's|^\./||'); do s3 DELETE "$bucket/t.lance/$k" >/dev/null; done
  s3 DELETE "$bucket" >/dev/null
}
code=$(s3 PUT "$bucket"); [ "$code" = 200 ] || fail "cannot create bucket $bucket (HTTP $code)"
n=0
for k in $(cd "$src" && find . -type f | sed 's|^\./||' | sort); do
  code=$(s3 PUT "$bucket/t.lance/$k" "$src/$k"); [ "$code" = 200 ] || fail "PUT $k: HTTP $code"
  n=$((n + 1))
done
uri="s3://$bucket/t.lance"
out=$("$inspect" verify "$uri" 2>&1) || fail "verify $uri failed: $out"
echo "$out"
case $out in *" $n objects"*) ;; *) fail "verify saw another object count than the $n uploaded: $out" ;; esac
"$inspect" -j -n 2 dump "$uri" > /dev/null || fail "dump $uri failed"
wal=_mem_wal/aa48498d-ac91-59e2-8452-69f46010ace2/wal/0100000000000000000000000000000000000000000000000000000000000000.arrow
code=$(s3 DELETE "$bucket/t.lance/$wal"); [ "$code" = 204 ] || fail "DELETE $wal: HTTP $code"
wal3=_mem_wal/aa48498d-ac91-59e2-8452-69f46010ace2/wal/1100000000000000000000000000000000000000000000000000000000000000.arrow
out=$("$inspect" verify "$uri" 2>&1) && fail "verify passed with WAL position 2 deleted"
echo "$out" | grep -q "^$wal3: WAL positions 2..2 are missing" || fail "verify did not name the gap: $out"
echo "s3_verify: verify on S3 passed ($n objects) and named the deleted WAL entry"
cleanup
