#!/usr/bin/env bash
# How dtc's compile time grows with model size: MLPs of 2 to 500 hidden
# layers (width 64, GELU), timing each stage (dtc --mlir-timing: parse,
# MLIR generation, passes, emission, host C++ compile) and the number of ops
# after the pipeline; prints microseconds per op per stage, which stays flat
# when a stage grows linearly (MLIR's report has 0.1 ms resolution: read
# the per-op columns at 50 layers and more).
# Then the same for long elementwise chains (a linear layer, N alternating
# tanh / scale ops whose backward runs through the whole chain, the
# classifier), with dtc-fuse-elementwise's time apart: fused kernels hold at
# most 64 ops, so that the host compiler stays linear too.
# usage: benchmarks/compile_scaling.sh [sizes="2 10 50 100 200 500"] [--no-host] [chains="250 1000 2000"]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DTC_BUILD_DIR:-$root/build}
sizes=${1:-2 10 50 100 200 500}
host=1
[ "${2:-}" = "--no-host" ] && host=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf "%7s %7s | %9s %9s %9s %9s %10s | per op (us): %7s %7s %7s %7s %8s\n" \
  layers ops parse mlirgen passes emit host parse gen passes emit host
for n in $sizes; do
  f="$work/m$n.dsl"
  {
    echo "input x: f32[B, 64]"
    echo "label y: i32[B]"
    prev=x
    for i in $(seq "$n"); do
      echo "h$i = linear($prev, 64, act=gelu)"
      prev=h$i
    done
    echo "out = linear($prev, 10)"
    echo "loss = cross_entropy(out, y)"
  } > "$f"
  ops=$("$build/bin/dtc" "$f" --emit=mlir-opt | grep -c " = dtc\.\| dtc\.apply\| dtc\.all_reduce" || true)
  if [ $host = 1 ]; then
    t=$("$build/bin/dtc" "$f" -o "$work/train" --mlir-timing 2>&1)
  else
    t=$("$build/bin/dtc" "$f" --emit=cpp -o "$work/out.cpp" --mlir-timing 2>&1)
  fi
  # A top-level row of MLIR's timing report, in ms: "... 0.0012 ( 0.3%)  passes".
  get() { sed -n "s/.* \([0-9.]*\) ([ 0-9.]*%)  $1\$/\1/p" <<<"$t" | awk '{ print $1 * 1000 }'; }
  p=$(get parse) g=$(get mlirgen) s=$(get passes) e=$(get emit) h=$(get "host compile")
  h=${h:-0}
  awk -v n="$n" -v o="$ops" -v p="$p" -v g="$g" -v s="$s" -v e="$e" -v h="$h" 'BEGIN {
    printf "%7d %7d | %8.1fms %8.1fms %8.1fms %8.1fms %9.0fms | %19.2f %7.2f %7.2f %7.2f %8.1f\n",
      n, o, p, g, s, e, h, p*1000/o, g*1000/o, s*1000/o, e*1000/o, h*1000/o }'
done

chains=${3:-250 1000 2000}
echo
printf "%7s %7s | %9s %9s %9s %9s %10s | per op (us): %7s %7s %7s %8s\n" \
  chain ops passes fusion emit lower host passes fusion emit host
for n in $chains; do
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
  ops=$("$build/bin/dtc" "$f" --emit=mlir-opt | grep -c " = dtc\.\| dtc\.update\| dtc\.all_reduce\| dtc\.export" || true)
  if [ $host = 1 ]; then
    t=$("$build/bin/dtc" "$f" -o "$work/train" --mlir-timing 2>&1)
  else
    t=$("$build/bin/dtc" "$f" --emit=cpp -o "$work/out.cpp" --mlir-timing 2>&1)
  fi
  # Any row of the report (nested ones too), in ms.
  row() { sed -n "s/.* \([0-9.]*\) ([ 0-9.]*%) *$1\$/\1/p" <<<"$t" | head -1 | awk '{ print $1 * 1000 }'; }
  s=$(get passes) fu=$(row FuseElementwise) e=$(get emit) lo=$(get lower) h=$(get "host compile")
  h=${h:-0}
  awk -v n="$n" -v o="$ops" -v s="$s" -v fu="$fu" -v e="$e" -v lo="$lo" -v h="$h" 'BEGIN {
    printf "%7d %7d | %8.1fms %8.1fms %8.1fms %8.1fms %9.0fms | %19.2f %7.2f %7.2f %8.1f\n",
      n, o, s, fu, e, lo, h, s*1000/o, fu*1000/o, e*1000/o, h*1000/o }'
done
