#!/bin/sh
# meson install script: put the service configuration in place unless one is
# there already, so an operator's edits survive a re-install (the new
# default then lands beside it as memwald.conf.dist).
#   install-config.sh CONFIGURED-FILE CONFIGDIR
set -eu
src=$1
dir=${DESTDIR:-}$2
mkdir -p "$dir"
if [ -e "$dir/memwald.conf" ]; then
  install -m 0644 "$src" "$dir/memwald.conf.dist"
  echo "memwald: kept $dir/memwald.conf; the new default is $dir/memwald.conf.dist"
else
  install -m 0644 "$src" "$dir/memwald.conf"
  echo "memwald: installed $dir/memwald.conf"
fi
