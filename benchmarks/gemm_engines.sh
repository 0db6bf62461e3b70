#!/usr/bin/env bash
# dtc's two CPU GEMM engines (runtime/lib/kernels/gemm) side by side on the seed
# MLP's GEMM shapes, one thread, interleaved: why oneDNN is the default.
# usage: benchmarks/gemm_engines.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -O2 -o "$work/gemm_engines" "$root/benchmarks/gemm_engines.c" \
  -I/usr/include/x86_64-linux-gnu/openblas-pthread -lopenblas -ldnnl -lgomp
"$work/gemm_engines"
