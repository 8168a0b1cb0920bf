#!/bin/bash
# fresh-root.sh — README's command 1 (or 2) as a newcomer meets it: on a bare Debian 12
# (`debootstrap --variant=minbase bookworm`, from the mirror apt uses on this machine), in a
# clean clone of this tree's committed HEAD, with nothing else brought in.
#
#   tools/fresh-root.sh                 command 1: install, build, start the daemon; then one
#                                       row written and its SYNC answered ("SYNC 1"), the daemon
#                                       stopped with SIGTERM. tools/run-tests.sh counts it.
#   tools/fresh-root.sh --command 2     command 2 (every suite; long: ceph, npm, two builds)
#   tools/fresh-root.sh --rev REV       a commit other than HEAD (e.g. to show an old tree fail)
#
# Run as root (debootstrap, chroot, mounts). Prints "fresh-root: ... OK" last and exits 0, or
# names what failed (with the log's tail) and exits 1. Never skips: a missing tool is a failure.
#
# The command run is read from README.md's "The two commands" section of the cloned tree, so
# the check follows the README.
#
# Cache, in $MW_FRESH_CACHE (default /var/cache/memwald-fresh):
#   - bookworm-<key>.tar: the pristine root as debootstrap left it (plus this machine's apt
#     sources and resolv.conf). <key> is the Date of the mirror's bookworm Release file (what
#     decides debootstrap's package list) and debootstrap's version, so a new Debian point
#     release makes a new root; older tarballs are removed. Each run unpacks a fresh copy.
#   - apt-archives/: bind-mounted on the root's /var/cache/apt/archives, so the .debs command 1
#     downloads are kept between runs (apt checks each against the signed index before use;
#     `apt-get autoclean` drops the ones no longer in it).
#   - logs/: the last run's logs (debootstrap.log, command.log, daemon.log).
# Runs are serialised by flock on the cache's lock file.
#
# Mounts: the chroot runs in its own mount and PID namespaces (unshare), so /proc, /sys, /dev
# and the apt cache bind are gone when it ends, on every exit path (even SIGKILL), and so is
# every process it started. The unpacked root is removed at exit, only after checking that
# nothing is mounted under it.
set -euo pipefail

command=1
rev=HEAD
while [ $# -gt 0 ]; do
  case $1 in
    --command) command=${2:?--command 1|2}; shift 2 ;;
    --rev) rev=${2:?--rev REV}; shift 2 ;;
    *) echo "usage: tools/fresh-root.sh [--command 1|2] [--rev REV]" >&2; exit 2 ;;
  esac
done
case $command in 1|2) ;; *) echo "fresh-root: --command is 1 or 2, not '$command'" >&2; exit 2 ;; esac

top=$(cd "$(dirname "$0")/.." && pwd)
cache=${MW_FRESH_CACHE:-/var/cache/memwald-fresh}
fail() { echo "fresh-root: FAILED: $*"; exit 1; }

[ "$(id -u)" = 0 ] || fail "must run as root (debootstrap, chroot)"
for b in debootstrap unshare chroot git tar flock; do
  command -v "$b" >/dev/null || fail "$b not found (tools/install-deps.sh --test installs debootstrap)"
done
sha=$(git -C "$top" rev-parse --verify "$rev^{commit}") || fail "no commit '$rev' in $top"

mkdir -p "$cache/apt-archives/partial" "$cache/logs"
exec 9>"$cache/lock"
flock 9
logs=$cache/logs
rm -f "$logs"/*.log

work=""
ns=""
cleanup() { # end the chroot's namespace, copy the logs out, remove the root if nothing is mounted under it
  if [ -n "$ns" ] && kill -0 "$ns" 2>/dev/null; then
    # unshare --fork ignores SIGTERM while it waits for its child: KILL it, and --kill-child
    # ends the namespace's first process, and with it every process in the root
    kill -KILL "$ns"
    wait "$ns" 2>/dev/null || true
  fi
  [ -n "$work" ] || return 0
  cp "$work"/root/root/logs/*.log "$logs/" 2>/dev/null || true
  if grep -q " $work/" /proc/self/mountinfo; then
    echo "fresh-root: something is still mounted under $work: left in place"
    return 0
  fi
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
work=$(mktemp -d /var/tmp/memwald-fresh.XXXXXX)
t0=$SECONDS

# The mirror and the Debian sources this machine's apt uses (deb822 or one-line format).
host_sources=/etc/apt/sources.list.d/debian.sources
mirror=$(awk '/^URIs:/{print $2; exit}' "$host_sources" 2>/dev/null || true)
[ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $3 ~ /^bookworm/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
[ -n "$mirror" ] || mirror=http://deb.debian.org/debian
release_date=""
command -v curl >/dev/null && release_date=$(curl -fsS -m 60 "$mirror/dists/bookworm/Release" | sed -n 's/^Date: //p') || true
stamp=$(date -u -d "${release_date:-now}" +%Y%m%d)
key=$stamp-$(printf '%s|%s|%s' "$mirror" "$release_date" "$(dpkg-query -W -f='${Version}' debootstrap)" | sha256sum | cut -c1-8)
pristine=$cache/bookworm-$key.tar

if [ ! -f "$pristine" ]; then
  echo "fresh-root: debootstrap --variant=minbase bookworm from $mirror (cache key $key)"
  mkdir "$work/boot"
  # in a mount namespace of its own: debootstrap's /proc and /sys mounts cannot outlive it
  unshare --mount --propagation private -- \
    debootstrap --variant=minbase bookworm "$work/boot" "$mirror" > "$logs/debootstrap.log" 2>&1 \
    || { tail -5 "$logs/debootstrap.log"; fail "debootstrap (log $logs/debootstrap.log)"; }
  if [ -f "$host_sources" ]; then
    cp "$host_sources" "$work/boot/etc/apt/sources.list.d/debian.sources"
    rm -f "$work/boot/etc/apt/sources.list"
  fi
  tar -C "$work/boot" -cf "$pristine.part" . && mv "$pristine.part" "$pristine"
  rm -rf --one-file-system "$work/boot"
  find "$cache" -maxdepth 1 -name 'bookworm-*.tar' ! -name "${pristine##*/}" -delete
  echo "fresh-root: pristine root cached in $pristine ($((SECONDS - t0)) s)"
fi

root=$work/root
mkdir "$root"
tar -C "$root" -xf "$pristine"
# This machine's network as it is: its resolver and hosts file, and the certificate authorities its
# administrator added (/usr/local/share/ca-certificates, which Debian's ca-certificates adds
# to the system store when command 2 installs it), so the root reaches the npm registry as
# the machine does. Nothing of the project's comes from outside the clone.
cp /etc/resolv.conf "$root/etc/resolv.conf"
cp /etc/hosts "$root/etc/hosts"  # debootstrap writes none (Debian's installer does): no localhost
if [ -d /usr/local/share/ca-certificates ]; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp -r /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/"
fi
git clone -q --no-checkout "$top" "$root/root/memwald"
git -C "$root/root/memwald" checkout -q --detach "$sha"
# CI lays shared/ (golden vectors, specs) beside the clone; command 2's tests read it.
if [ "$command" = 2 ] && [ -d "$top/../shared" ]; then cp -r "$top/../shared" "$root/root/shared"; fi
mkdir "$root/root/logs"
echo "fresh-root: bare root and clone of ${sha:0:12} ready ($((SECONDS - t0)) s)"

# README's command N: the Nth ```sh block of its "The two commands" section.
readme_cmd=$(awk -v n="$command" '/^## The two commands/ {s = 1; next} s && /^## / {exit}
  s && /^```sh/ {k++; if (k == n) {g = 1}; next} g && /^```/ {exit} g {print}' "$root/root/memwald/README.md")
[ -n "$readme_cmd" ] || fail "README.md has no command $command under '## The two commands'"
echo "fresh-root: README command $command: $readme_cmd"
printf '%s\n' "$readme_cmd" > "$root/root/command.sh"

cat > "$root/root/check.sh" <<'INNER'
# Runs inside the bare root as root, in /root/memwald. $1 = 1 or 2.
set -u
cd /root/memwald
logs=/root/logs
fail() { echo "fresh-root: FAILED: $*"; exit 1; }
if [ "$1" = 2 ]; then
  bash /root/command.sh > "$logs/command.log" 2>&1
  rc=$?
  tail -30 "$logs/command.log"
  [ "$rc" = 0 ] || fail "README command 2 exited $rc"
  exit 0
fi
port=$(sed -n 's/^listen *= *[0-9.]*:\([0-9]*\).*/\1/p' conf/memwald.conf | head -1)
[ -n "$port" ] || fail "no 'listen = ADDR:PORT' in conf/memwald.conf"
if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
  fail "port $port already answers on this machine: cannot tell our daemon from that one"
fi
deadline=$((SECONDS + ${MW_FRESH_TIMEOUT_S:-1800}))
bash /root/command.sh > "$logs/command.log" 2>&1 &
pid=$!
# Ready when the daemon accepts on its port: until then install-deps and the build run.
installed=""
until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
  if [ -z "$installed" ] && grep -q '^install-deps: ok' "$logs/command.log"; then
    installed=$SECONDS
    echo "fresh-root: install-deps done after $installed s"
  fi
  if ! kill -0 "$pid" 2>/dev/null; then
    wait "$pid"; rc=$?
    tail -15 "$logs/command.log"
    fail "README command 1 exited $rc before the daemon listened on port $port"
  fi
  [ "$SECONDS" -lt "$deadline" ] || { tail -15 "$logs/command.log"; fail "nothing listening on port $port after ${MW_FRESH_TIMEOUT_S:-1800} s"; }
  sleep 1
done
echo "fresh-root: built and listening on port $port after $SECONDS s"
exec 3<>"/dev/tcp/127.0.0.1/$port"
printf '{"id":1,"name":"a"}\nSYNC\nQUIT\n' >&3
reply=$(timeout 60 cat <&3)
exec 3<&-
echo "fresh-root: the daemon answered: $(echo $reply)"
# Only this PID namespace's processes are visible: the daemon is the one running our binary.
daemon=""
for p in /proc/[0-9]*; do
  [ "$(readlink "$p/exe" 2>/dev/null)" = /root/memwald/build/src/memwald ] && daemon=${p#/proc/}
done
[ -n "$daemon" ] || fail "the daemon is gone after answering"
kill -TERM "$daemon"
wait "$pid"; rc=$?
tail -5 "$logs/command.log" | sed 's/^/  daemon: /'
printf '%s\n' "$reply" | grep -qx 'SYNC 1' || fail "no 'SYNC 1' for the row written (reply: $reply)"
[ -d var/events.lance ] || fail "the daemon answered but wrote no ./var/events.lance in the clone"
[ "$rc" = 0 ] || fail "the daemon exited $rc on SIGTERM"
apt-get -qq autoclean >/dev/null 2>&1 || true
INNER

# Own mount and PID namespaces: every mount below and every process in the root end with it
# (--kill-child: also when unshare itself is killed). In the background, so that a signal to
# this script runs its cleanup at once.
set +e
unshare --mount --pid --fork --kill-child --propagation private -- /bin/bash -c '
  set -e; r=$1
  mount --bind "$r" "$r"  # the root a mount point, as on a machine: tests make / rprivate
  mount -t proc proc "$r/proc"
  mount --rbind /sys "$r/sys"
  mount --rbind /dev "$r/dev"
  mount --bind "$2" "$r/var/cache/apt/archives"
  exec chroot "$r" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    MW_FRESH_TIMEOUT_S="${MW_FRESH_TIMEOUT_S:-1800}" ${NODE_EXTRA_CA_CERTS:+NODE_EXTRA_CA_CERTS="$NODE_EXTRA_CA_CERTS"} \
    /bin/bash /root/check.sh "$3"
' _ "$root" "$cache/apt-archives" "$command" &
ns=$!
wait "$ns"
rc=$?
ns=""
set -e
[ "$rc" = 0 ] || fail "README command $command in the bare root (logs in $logs, $((SECONDS - t0)) s)"
echo "fresh-root: README command $command OK on a bare Debian 12 root ($((SECONDS - t0)) s)"
