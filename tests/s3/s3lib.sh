# s3lib.sh — sourced by the interop and engine scripts for their S3 variants
# (MW_TEST_S3=1, under tests/s3/with-s3.sh). Needs MW_S3_ENDPOINT, AWS_* and
# MW_S3_TOOL (the s3_tool binary).
#
#   s3_table_up LOCAL_TABLE NAME   make a bucket of its own, upload the
#                                  table, print its s3:// URI
#   s3_table_down URI              delete everything under the bucket and
#                                  the bucket itself
s3_curl() { # METHOD PATH -> HTTP status
  curl -s -o /dev/null -w '%{http_code}' --aws-sigv4 "aws:amz:us-east-1:s3" \
    --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" \
    -X "$1" "$MW_S3_ENDPOINT$2"
}
s3_table_up() {
  : "${MW_S3_ENDPOINT:?MW_S3_ENDPOINT is not set (run through tests/s3/with-s3.sh)}"
  : "${MW_S3_TOOL:?MW_S3_TOOL is not set}"
  b="mw-$2-$$-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')"
  code=$(s3_curl PUT "/$b")
  [ "$code" = 200 ] || { echo "s3lib: cannot create bucket $b: HTTP $code" >&2; return 1; }
  "$MW_S3_TOOL" put-dir "$1" "s3://$b/db/t.lance" >&2 || return 1
  echo "s3://$b/db/t.lance"
}
s3_table_down() {
  b=${1#s3://}; b=${b%%/*}
  "$MW_S3_TOOL" rm "s3://$b" >&2 && [ "$(s3_curl DELETE "/$b")" = 204 ]
}
