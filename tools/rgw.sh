#!/usr/bin/env bash
# rgw.sh — a real S3 endpoint for memwald's tests: Ceph's radosgw (Debian 12
# package `radosgw`) over a throwaway one-node cluster (one monitor, one
# memstore OSD) on loopback. Packages: tools/install-deps.sh --test.
#
#   tools/rgw.sh up DIR      start a cluster in DIR (must not exist); writes
#                            DIR/env.sh (MW_S3_ENDPOINT, AWS_ACCESS_KEY_ID,
#                            AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT_URL,
#                            AWS_ALLOW_HTTP); ~2-5 s
#   tools/rgw.sh down DIR    stop it (by PID: rgw, osd, mon) and remove DIR
#   tools/rgw.sh ensure DIR  reuse DIR's instance when it answers, else
#                            (re)start it; serialised with flock on DIR.lock
#                            (taken here: do not wrap it in flock), so several
#                            callers share ONE instance
#   tools/rgw.sh env DIR     print DIR/env.sh when the instance answers (exit 1
#                            otherwise)
#
# Only one cluster is known to start reliably per machine, so callers share
# one and keep apart by bucket (each test makes its own). Ports: free ones
# are picked (RGW_PORT / MON_PORT override). Everything runs as the calling
# user, nothing is installed system-wide, no systemd.
set -euo pipefail

AK=${AK:-MEMWALDTESTKEY000000}
SK=${SK:-memwaldtestsecret00000000000000000000000}

die() { echo "rgw.sh: $*" >&2; exit 1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
answers() { # DIR -> 0 when its endpoint answers HTTP 200
  [ -s "$1/env.sh" ] || return 1
  local ep; ep=$(sed -n 's/^export MW_S3_ENDPOINT=//p' "$1/env.sh")
  [ -n "$ep" ] && [ "$(curl -s -m 2 -o /dev/null -w '%{http_code}' "$ep/" || true)" = 200 ]
}

up() {
  local DIR=$1 T0; T0=$(date +%s.%N)
  [ -e "$DIR" ] && die "refusing: $DIR exists (tools/rgw.sh down $DIR first)"
  for b in ceph-mon ceph-osd radosgw radosgw-admin monmaptool ceph uuidgen curl; do
    command -v "$b" >/dev/null || die "$b not found: run tools/install-deps.sh --test"
  done
  local RGW_PORT=${RGW_PORT:-$(free_port)} MON_PORT=${MON_PORT:-$(free_port)} FSID
  mkdir -p "$DIR"/{run,log,mon/ceph-a,osd/ceph-0,rgw}
  DIR=$(cd "$DIR" && pwd)
  FSID=$(uuidgen)
  export CEPH_CONF="$DIR/ceph.conf"
  trap 'rc=$?; echo "rgw.sh: start failed (rc=$rc, line $LINENO); log tails:" >&2; tail -n 5 "$DIR"/log/*.log >&2 || true; exit $rc' ERR
  cat > "$CEPH_CONF" <<CONF
[global]
fsid = $FSID
mon host = v1:127.0.0.1:$MON_PORT
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind ipv6 = false
ms bind msgr2 = false
auth cluster required = none
auth service required = none
auth client required = none
auth supported = none
run dir = $DIR/run
admin socket = $DIR/run/\$name.asok
pid file = $DIR/run/\$name.pid
log file = $DIR/log/\$name.log
keyring = /dev/null
mon data = $DIR/mon/\$cluster-\$id
osd data = $DIR/osd/\$cluster-\$id
osd pool default size = 1
osd pool default min size = 1
mon allow pool size one = true
mon warn on pool no redundancy = false
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
mon max pg per osd = 1000
osd crush chooseleaf type = 0
; the OSD must not send mon commands before it has the monmap (fsid-0 race
; in Pacific): this script adds it to CRUSH itself
osd class update on start = false
osd crush update on start = false
mon osd auto mark new in = true
osd objectstore = memstore
memstore device bytes = 4294967296
osd op num shards = 1
osd op num threads per shard = 2
osd max object name len = 460
osd max object namespace len = 64
mon data avail warn = 1
mon data avail crit = 0
mon cluster log file = $DIR/log/cluster.log
log to stderr = false
err to stderr = true
debug ms = 0
mon warn on insecure global id reclaim allowed = false
mon warn on insecure global id reclaim = false
; paxos defaults make each rgw pool creation take ~2 s
paxos propose interval = 0.05
paxos min wait = 0.01
[client.rgw.a]
rgw frontends = beast endpoint=127.0.0.1:$RGW_PORT tcp_nodelay=1
rgw data = $DIR/rgw
rgw thread pool size = 64
rgw enable usage log = false
rgw dns name = localhost
rgw lc debug interval = -1
CONF
  # the ceph CLI sometimes races a fresh monitor (EPERM "wrong fsid"): retry
  retry() { local i; for i in $(seq 1 25); do "$@" && return 0; sleep 0.2; done; echo "FAILED: $*" >&2; return 1; }
  # --addv with an explicit v1 address: --add would make a non-6789 port msgr2
  monmaptool --create --fsid "$FSID" --addv a "[v1:127.0.0.1:$MON_PORT]" "$DIR/monmap" >/dev/null
  ceph-mon --mkfs -i a --monmap "$DIR/monmap"
  ceph-mon -i a 9>&- # the daemons must not inherit ensure's lock
  retry ceph --connect-timeout 5 mon stat >/dev/null 2>&1
  local OSD_UUID OSD_ID; OSD_UUID=$(uuidgen)
  OSD_ID=$(retry ceph --connect-timeout 5 osd new "$OSD_UUID" 2>/dev/null)
  retry ceph --connect-timeout 5 osd crush add "osd.$OSD_ID" 1.0 root=default >/dev/null 2>&1
  ceph-osd -i "$OSD_ID" --mkfs --osd-uuid "$OSD_UUID" 2>"$DIR/log/osd-mkfs.err"
  retry ceph-osd -i "$OSD_ID" 2>>"$DIR/log/osd-start.err" 9>&-
  local i ok=0
  for i in $(seq 1 300); do  # up to 60 s for the OSD to be up and in
    if ceph --connect-timeout 5 osd stat 2>/dev/null | grep -q ' 1 up.* 1 in'; then ok=1; break; fi
    sleep 0.2
  done
  [ $ok = 1 ] || { echo "rgw.sh: the OSD never came up" >&2; false; }
  radosgw -n client.rgw.a 9>&-
  local code=000 pf="$DIR/run/client.rgw.a.pid"
  for i in $(seq 1 600); do  # up to 60 s for the first HTTP 200
    code=$(curl -s -m 2 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$RGW_PORT/" || true)
    [ "$code" = 200 ] && break
    # the same race can make radosgw's first pool creation fail and exit
    if [ -s "$pf" ] && ! kill -0 "$(cat "$pf")" 2>/dev/null; then
      echo "rgw.sh: radosgw exited, starting it again" >&2; rm -f "$pf"; radosgw -n client.rgw.a 9>&-
    fi
    sleep 0.1
  done
  [ "$code" = 200 ] || { echo "rgw.sh: radosgw did not answer (last HTTP $code)" >&2; false; }
  mkuser() { radosgw-admin user info --uid=memwald >/dev/null 2>&1 ||
             radosgw-admin user create --uid=memwald --display-name=memwald \
               --access-key="$AK" --secret-key="$SK" >/dev/null; }
  retry mkuser
  cat > "$DIR/env.sh" <<ENV
export CEPH_CONF=$CEPH_CONF
export MW_S3_ENDPOINT=http://127.0.0.1:$RGW_PORT
export AWS_ENDPOINT_URL=http://127.0.0.1:$RGW_PORT
export AWS_ACCESS_KEY_ID=$AK
export AWS_SECRET_ACCESS_KEY=$SK
export AWS_REGION=us-east-1
export AWS_ALLOW_HTTP=true
ENV
  trap - ERR
  awk -v t0="$T0" -v t="$(date +%s.%N)" -v p="$RGW_PORT" \
    'BEGIN{printf "rgw.sh: radosgw up on 127.0.0.1:%s in %.1f s\n", p, t-t0}' >&2
}

down() {
  local DIR=$1 SIG=${SIG:-TERM} name f p i
  [ -d "$DIR" ] || return 0
  alive() { local st; st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1; [[ $st != Z* ]]; }
  for name in client.rgw.a osd.0 mon.a; do  # rgw first: an OSD without its mon waits 5 s
    f="$DIR/run/$name.pid"; [ -f "$f" ] || continue
    p=$(cat "$f"); kill -"$SIG" "$p" 2>/dev/null || continue
    for i in $(seq 1 100); do alive "$p" || break; sleep 0.05; done
    alive "$p" && { echo "rgw.sh: $name ($p) still alive after 5 s: SIGKILL" >&2; kill -KILL "$p"; }
  done
  rm -rf "$DIR"
}

cmd=${1:-}; DIR=${2:-}
[ -n "$DIR" ] || die "usage: rgw.sh up|down|ensure|env DIR"
case "$cmd" in
  up) up "$DIR" ;;
  down) down "$DIR" ;;
  env) answers "$DIR" && cat "$DIR/env.sh" ;;
  ensure)
    mkdir -p "$(dirname "$DIR")"
    DIR=$(readlink -f "$DIR") # a symlink to a shared instance locks the shared lock
    exec 9>"$DIR.lock"
    flock 9
    if ! answers "$DIR"; then
      [ -e "$DIR" ] && { echo "rgw.sh: $DIR does not answer: restarting it" >&2; SIG=KILL down "$DIR"; }
      up "$DIR"
    fi ;;
  *) die "usage: rgw.sh up|down|ensure|env DIR" ;;
esac
