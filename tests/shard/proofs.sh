#!/bin/sh
# proofs.sh — one takeover / drop / crash proof (docs/engine.md "Proofs"):
# copy a golden vector to a scratch folder, then let proof_tool (the engine)
# and LanceDB 0.39.0 (proofs.mjs, check.mjs, lance_replay.mjs) work on it.
#
#   proofs.sh TOOL PROOF VECTOR
#
# Needs node >= 20 and tests/interop/node_modules. The scratch folder is
# removed on success and kept (path printed) on failure.
#
# MW_TEST_S3=1 (under tests/s3/with-s3.sh, MW_S3_TOOL set): the table is
# uploaded to a bucket of its own and the proof runs on S3 (every proof; the
# refusals' tables are made in the same bucket); the bucket goes on success.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
tool=$1; proof=$2; name=$3
vectors=${MW_VECTORS:?MW_VECTORS is not set}
command -v node >/dev/null || { echo "proofs: node is not installed" >&2; exit 1; }
scratch=$(mktemp -d "${TMPDIR:-/tmp}/mw-proof.XXXXXX")
cp -r "$vectors/$name/t.lance" "$scratch/t.lance"
chmod -R u+w "$scratch"
echo "scratch: $scratch"
t=$scratch/t.lance
prior=$vectors/$name/expected.jsonl
if [ "${MW_TEST_S3:-0}" = 1 ]; then
  . "$here/../s3/s3lib.sh"
  t=$(s3_table_up "$t" "proof") || exit 1
  echo "table: $t"
fi
case $proof in
  fence-lancedb-opens) node "$here/proofs.mjs" fence3 "$tool" "$t" --prior "$prior" ;;
  fence-we-take) node "$here/proofs.mjs" fence4 "$tool" "$t" --prior "$prior" ;;
  seal-cycle)
    "$tool" seal-cycle "$t" --model-out "$scratch/model.jsonl"
    node "$here/../interop/check.mjs" "$t" --prior "$prior" --model "$scratch/model.jsonl" --out "$scratch/got.jsonl" ;;
  drop) node "$here/proofs.mjs" drop "$tool" "$t" --prior "$prior" ;;
  drop-rerun)
    "$tool" drop "$t" --preseal 2
    node "$here/proofs.mjs" gone "$tool" "$t" ;;
  drop-rollback)
    "$tool" drop-fail "$t" --fail-bucket 2 --model-out "$scratch/model.jsonl"
    node "$here/lance_replay.mjs" "$t" --prior "$prior" --model "$scratch/model.jsonl" --out "$scratch/got.jsonl" ;;
  refusals) # LanceDB makes the refused tables beside the table (on S3: in its bucket)
    case $t in s3://*) node "$here/proofs.mjs" refusals "$tool" "$t" ;;
      *) node "$here/proofs.mjs" refusals "$tool" "$scratch/x.lance" ;; esac ;;
  crash) node "$here/proofs.mjs" crash "$tool" "$t" --prior "$prior" \
           ${MW_PROOF_CRASH_ITERATIONS:+--iterations "$MW_PROOF_CRASH_ITERATIONS"} ;;
  *) echo "proofs: unknown proof $proof" >&2; exit 2 ;;
esac
# the table the proof left (none after a drop): every object decodes, verify
# passes (on S3 before the bucket goes)
case $proof in drop|drop-rerun) min=0 ;; *) min=1 ;; esac
case $t in
  s3://*) # after a drop nothing is left to inspect (proof_tool checked that no object is)
    [ "$min" = 0 ] || python3 "$here/../inspect/inspect_tables.py" --table "$t"
    s3_table_down "$t" ;;
  *) python3 "$here/../inspect/inspect_tables.py" --min-tables "$min" "$scratch" ;;
esac
rm -rf "$scratch"
