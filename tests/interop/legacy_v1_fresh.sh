#!/bin/sh
# legacy_v1_fresh.sh — interop test legacy-v1-fresh: the pinned LanceDB
# writes the legacy v1 golden tables again (make-legacy-v1.mjs) into a scratch
# folder, and the lance test of the v1 reader runs on those files: what
# LanceDB writes today, not only what it wrote when the goldens were made.
#
#   legacy_v1_fresh.sh TEST_LEGACY_V1_BINARY
set -eu
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -d "$here/node_modules/@lancedb/lancedb" ]; then
  echo "interop: $here/node_modules is missing: run 'npm install --no-audit --no-fund' in tests/interop first" >&2
  exit 1
fi
scratch=$(mktemp -d "${TMPDIR:-/tmp}/mw-v1.XXXXXX")
node "$here/make-legacy-v1.mjs" "$scratch" 2>&1 | grep -v ' WARN ' >&2 || true
[ -f "$scratch/types.lance" ] && [ -f "$scratch/batches.lance" ] || { echo "make-legacy-v1.mjs failed" >&2; exit 1; }
MW_LEGACY_V1_DIR=$scratch "$1"
rm -rf "$scratch"
