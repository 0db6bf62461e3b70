#!/usr/bin/env bash
# Installs the Debian packages dtc needs (once), then configures and builds
# dtc, dtc-opt and the runtime in build/ (or $DTC_BUILD_DIR).
#   build.sh --sanitize   the same with clang-22 under AddressSanitizer and
#                         UndefinedBehaviorSanitizer, with the libFuzzer
#                         harnesses, in build-asan/ (or $DTC_ASAN_BUILD_DIR)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
if [ "${1:-}" = "--sanitize" ]; then
  build=${DTC_ASAN_BUILD_DIR:-$root/build-asan}
  if [ ! -f "$build/build.ninja" ]; then
    CC=clang-22 CXX=clang++-22 cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DDTC_SANITIZE=ON -DDTC_FUZZ=ON -DDTCRT_CUDA=OFF >/dev/null
  fi
else
  build=${DTC_BUILD_DIR:-$root/build}
  if [ ! -f "$build/build.ninja" ]; then
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  fi
fi
cmake --build "$build" -j "${DTC_JOBS:-2}"
