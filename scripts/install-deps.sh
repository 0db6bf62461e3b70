#!/usr/bin/env bash
# Installs every Debian package dtc needs (build, runtime, tests, reference).
# Idempotent: on a machine that already has them it prints nothing and exits 0.
set -euo pipefail

PKGS=(
  cmake ninja-build g++ ccache pkg-config
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  openmpi-bin libopenmpi-dev libgloo-dev
  libopenblas-dev libgfortran-12-dev libdnnl-dev
  zlib1g-dev libdeflate-dev libcli11-dev nlohmann-json3-dev libfmt-dev libgtest-dev
  dataset-fashion-mnist fortunes
  python3-torch python3-numpy
  clang-22 libclang-rt-22-dev clang-format-22
  iproute2 time
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "dtc: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
