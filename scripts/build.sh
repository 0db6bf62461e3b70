#!/usr/bin/env bash
# Installs the Debian packages dtc needs (once), then configures and builds
# dtc, dtc-opt and the runtime in build/ (or $DTC_BUILD_DIR).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DTC_BUILD_DIR:-$root/build}
"$root/scripts/install-deps.sh"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$build" -j "${DTC_JOBS:-2}"
