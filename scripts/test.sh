#!/usr/bin/env bash
# Builds dtc and runs every test: lit/FileCheck (dialect, passes, frontend,
# codegen), runtime unit tests, gradient checks and end-to-end training.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DTC_BUILD_DIR:-$root/build}
"$root/scripts/build.sh"
cd "$build"
ctest --output-on-failure -j "${DTC_JOBS:-2}"
