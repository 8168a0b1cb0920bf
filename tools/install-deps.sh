#!/bin/sh
# Install memwald's build (and, with --test, test) dependencies from Debian 12
# packages. Run as root. Idempotent.
#   build:  meson, ninja, gcc, pkg-config, protoc-c, and the libraries
#           libuv, protobuf-c, CRoaring, libcurl, zstd, liburing, inih,
#           libsystemd, libuuid, OpenSSL (libssl-dev: TLS listeners and token
#           hashes) (libprotobuf-dev provides Google's .proto files that
#           protoc-c compiles for Any and Timestamp)
#   --test: cmocka, python3 (test drivers), clang + libFuzzer, node + npm
#           (the interop suite installs @lancedb/lancedb 0.39.0 from npm),
#           systemd (systemd-analyze verify, systemd-sysusers and
#           systemd-tmpfiles on the installed service), man-db and groff-base
#           (man: pages the unit names; the man pages render), rsyslog (a
#           real log shipper forwarding JSON over TCP; rsyslog-openssl: the
#           same over TLS; openssl: test certificates made at run time), and Ceph's S3
#           gateway on a one-node cluster for the S3 tests (ceph-mon, ceph-osd,
#           radosgw, ceph-common, uuid-runtime; tools/rgw.sh starts it)
set -eu
pkgs="meson ninja-build gcc pkg-config protobuf-c-compiler libprotobuf-dev
  libuv1-dev libprotobuf-c-dev libroaring-dev libcurl4-openssl-dev libzstd-dev
  liburing-dev libinih-dev libsystemd-dev uuid-dev libssl-dev"
if [ "${1:-}" = "--test" ]; then
  pkgs="$pkgs libcmocka-dev python3 clang libfuzzer-14-dev libclang-rt-14-dev systemd man-db
    groff-base rsyslog rsyslog-openssl openssl"
  pkgs="$pkgs ceph-mon ceph-osd radosgw ceph-common uuid-runtime curl"
  command -v node >/dev/null 2>&1 || pkgs="$pkgs nodejs npm"
  command -v npm >/dev/null 2>&1 || pkgs="$pkgs npm"
fi
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "install-deps: installing:$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
echo "install-deps: ok"
