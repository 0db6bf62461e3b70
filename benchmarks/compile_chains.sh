#!/usr/bin/env bash
# Compile time against the length of an elementwise chain: a linear layer,
# then N alternating tanh / scale ops (whose backward runs through the whole
# chain), then the classifier. Prints the time of dtc-fuse-elementwise and
# of the host compiler (dtc --mlir-timing), per op: flat when each grows
# linearly. Kernels hold at most 64 ops (dtc-fuse-elementwise max-ops).
# usage: benchmarks/compile_chains.sh [lengths="250 1000 2000"] [--no-host]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DTC_BUILD_DIR:-$root/build}
lengths=${1:-250 1000 2000}
host=1
[ "${2:-}" = "--no-host" ] && host=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf "%7s | %10s %12s | per op (us): %9s %9s\n" chain fusion host fusion host
for n in $lengths; do
  f="$work/c$n.dsl"
  {
    echo "input x: f32[B, 8]"
    echo "label y: i32[B]"
    echo "h0 = linear(x, 8)"
    for i in $(seq "$n"); do
      if [ $((i % 2)) = 1 ]; then echo "h$i = tanh(h$((i - 1)))"; else echo "h$i = h$((i - 1)) * 0.5"; fi
    done
    echo "fc = linear(h$n, 3)"
    echo "loss = cross_entropy(fc, y)"
  } > "$f"
  if [ $host = 1 ]; then
    t=$("$build/bin/dtc" "$f" -o "$work/train" --mlir-timing 2>&1)
  else
    t=$("$build/bin/dtc" "$f" --emit=cpp -o "$work/out.cpp" --mlir-timing 2>&1)
  fi
  # Seconds in MLIR's timing report for a row name (nested or not).
  get() { sed -n "s/.* \([0-9.]*\) ([ 0-9.]*%) *$1\$/\1/p" <<<"$t" | head -1; }
  fu=$(get FuseElementwise) h=$(get "host compile")
  h=${h:-0}
  awk -v n="$n" -v f="$fu" -v h="$h" 'BEGIN {
    printf "%7d | %8.1fms %10.0fms | %22.2f %9.0f\n", n, f*1000, h*1000, f*1e6/n, h*1e6/n }'
done
