#!/usr/bin/env bash
# with-s3.sh CMD ARGS... — run CMD with a real S3 endpoint in the environment.
#
# When MW_S3_ENDPOINT is set (tools/run-tests.sh starts one radosgw for the
# whole run and exports it; a developer may export a shared instance), CMD
# runs against it. Otherwise the machine's shared instance in
# ${MW_RGW_DIR:-/tmp/memwald-rgw} is started or reused (tools/rgw.sh ensure:
# one instance per machine, serialised by a lock). If no endpoint can be had,
# this FAILS (exit 1) with the reason: an S3 test never skips silently.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=${MW_SOURCE_ROOT:-$(cd "$here/../.." && pwd)}
if [ -z "${MW_S3_ENDPOINT:-}" ]; then
  dir=${MW_RGW_DIR:-/tmp/memwald-rgw}
  if ! "$root/tools/rgw.sh" ensure "$dir" >&2; then
    echo "with-s3.sh: no S3 endpoint: MW_S3_ENDPOINT is unset and radosgw could not be started" \
         "(tools/install-deps.sh --test installs it)" >&2
    exit 1
  fi
  # shellcheck disable=SC1091
  . "$dir/env.sh"
fi
for v in MW_S3_ENDPOINT AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY; do
  [ -n "${!v:-}" ] || { echo "with-s3.sh: $v is not set" >&2; exit 1; }
done
export AWS_ENDPOINT_URL=${AWS_ENDPOINT_URL:-$MW_S3_ENDPOINT} AWS_REGION=${AWS_REGION:-us-east-1}
export AWS_ALLOW_HTTP=${AWS_ALLOW_HTTP:-true}
exec "$@"
