#!/usr/bin/env bash
# Writes runtime/include/dtc/kernels_abi.inc anew from the dtcrt ops
# (dtc-tblgen -gen-runtime-abi): run it after changing a Dtcrt_Call op in
# dialects/dtcrt/DtcrtOps.td; ctest abi.up_to_date fails until then.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DTC_BUILD_DIR:-$root/build}
cmake --build "$build" --target dtc-runtime-abi
cp "$build/test/abi/kernels_abi.inc" "$root/runtime/include/dtc/kernels_abi.inc"
echo "gen-runtime-abi.sh: runtime/include/dtc/kernels_abi.inc written"
