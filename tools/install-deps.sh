#!/bin/sh
# Install memwald's build (and, with --test, test) dependencies from Debian 12
# packages. Run as root. Idempotent.
#   build:  meson, ninja, gcc, pkg-config, protoc-c, and the libraries
#           libuv, protobuf-c, CRoaring, libcurl, zstd, liburing, inih,
#           libsystemd, libuuid, OpenSSL (libssl-dev: TLS listeners and token
#           hashes) (libprotobuf-dev provides Google's .proto files that
#           protoc-c compiles for Any and Timestamp)
#   --test: cmocka, python3 (test drivers), clang + libFuzzer, node + npm
#           (the interop suite installs @lancedb/lancedb 0.39.0 from npm;
#           tests/interop needs node >= 20 and LanceDB 0.39.0 declares
#           >= 22: a node older than 20 on PATH, Debian 12's 18 included,
#           gets the npm registry's `node` package, 22.x, in /usr/local,
#           and an npm older than 10 the registry's npm 11),
#           systemd (systemd-analyze verify, systemd-sysusers and
#           systemd-tmpfiles on the installed service), man-db and groff-base
#           (man: pages the unit names; the man pages render), procps
#           (ps for tools/rgw.sh, /bin/kill the unit's ExecReload names:
#           not in a minbase root), rsyslog (a real log shipper forwarding
#           JSON over TCP; rsyslog-openssl: the same over TLS; openssl: test
#           certificates made at run time), and Ceph's S3
#           gateway on a one-node cluster for the S3 tests (ceph-mon, ceph-osd,
#           radosgw, ceph-common, uuid-runtime; tools/rgw.sh starts it),
#           debootstrap and git (tools/fresh-root.sh: README command 1 on a
#           bare Debian 12 root made from Debian's packages)
set -eu
NODE_FROM_NPM=22.23.3   # when the node on PATH is older than NODE_MIN_MAJOR
NODE_MIN_MAJOR=20       # tests/interop/package.json "engines"
NPM_FROM_NPM=11.19.1    # when npm is older than NPM_MIN_MAJOR
NPM_MIN_MAJOR=10        # writes package-lock.json's "libc" fields, as the committed lock has
pkgs="meson ninja-build gcc pkg-config protobuf-c-compiler libprotobuf-dev
  libuv1-dev libprotobuf-c-dev libroaring-dev libcurl4-openssl-dev libzstd-dev
  liburing-dev libinih-dev libsystemd-dev uuid-dev libssl-dev"
if [ "${1:-}" = "--test" ]; then
  pkgs="$pkgs libcmocka-dev python3 clang libfuzzer-14-dev libclang-rt-14-dev systemd man-db
    groff-base rsyslog rsyslog-openssl openssl debootstrap git procps"
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
if [ "${1:-}" = "--test" ]; then
  major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
  if [ "$major" -lt "$NODE_MIN_MAJOR" ]; then
    echo "install-deps: node $(node --version) is older than $NODE_MIN_MAJOR: installing node@$NODE_FROM_NPM from the npm registry into /usr/local"
    npm install -g --prefix /usr/local --no-audit --no-fund --loglevel=error "node@$NODE_FROM_NPM"
    hash -r
    major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
    if [ "$major" -lt "$NODE_MIN_MAJOR" ]; then
      echo "install-deps: node on PATH is still $(node --version): put /usr/local/bin before /usr/bin" >&2
      exit 1
    fi
  fi
  # npm 9 (Debian 12's) rewrites tests/interop/package-lock.json on install (it drops the
  # lock's "libc" fields), so the README's `npm install` would leave the tree modified
  npm_major=$(npm --version 2>/dev/null | cut -d. -f1)
  if [ "${npm_major:-0}" -lt "$NPM_MIN_MAJOR" ]; then
    echo "install-deps: npm $(npm --version) is older than $NPM_MIN_MAJOR: installing npm@$NPM_FROM_NPM into /usr/local"
    npm install -g --prefix /usr/local --no-audit --no-fund --loglevel=error "npm@$NPM_FROM_NPM"
    hash -r
  fi
fi
echo "install-deps: ok"
