#!/bin/sh
# Configure (once) and build memwald into ./build.
set -eu
cd "$(dirname "$0")/.."
[ -f build/build.ninja ] || meson setup build
ninja -C build
