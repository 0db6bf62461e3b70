#!/usr/bin/env bash
# Benchmark of the seed MLP (examples/mlp.dsl): the time of each compile
# stage, and training steps per second of dtc's program against PyTorch eager
# on the same model, recipe and thread budget, run interleaved (A B A B ...)
# so that drift of the shared machine hits both alike. Prints medians and the
# dtc/PyTorch ratio.
# usage: benchmarks/seed_mlp.sh [rounds=3]    (after scripts/build.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DTC_BUILD_DIR:-$root/build}
rounds=${1:-3}
threads=${BENCH_THREADS:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== compile stages (dtc --mlir-timing, examples/mlp.dsl)"
"$build/bin/dtc" "$root/examples/mlp.dsl" -o "$work/train" --mlir-timing 2>&1 | sed -n 's/^ *//; /Wall Time/,$p'

. "$root/benchmarks/lib.sh"
: > "$work/dtc.txt"; : > "$work/torch.txt"
have_torch=1
/usr/bin/python3 -c "import torch" 2>/dev/null || have_torch=0
echo "== one epoch of Fashion-MNIST, batch 64, $threads threads, $rounds rounds (interleaved)"
for r in $(seq "$rounds"); do
  line=$("$work/train" --epochs 1 --eval off --threads "$threads" --quiet)
  t=$(sed -n 's/.* time \([0-9.]*\)s.*/\1/p' <<<"$line")
  echo "$t" >> "$work/dtc.txt"
  echo "  round $r dtc     ${t}s/epoch"
  if [ $have_torch = 1 ]; then
    out=$(OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=$threads BENCH_THREADS=$threads /usr/bin/python3 "$root/benchmarks/torch_mlp.py")
    t=$(awk '{print $2}' <<<"$out")
    echo "$t" >> "$work/torch.txt"
    echo "  round $r pytorch ${t}s/epoch"
  fi
done
steps=938
d=$(median < "$work/dtc.txt")
awk -v t="$d" -v s=$steps 'BEGIN { printf "dtc      median %.3f s/epoch  %7.0f steps/s  %7.0f images/s\n", t, s/t, 60000/t }'
if [ $have_torch = 1 ]; then
  p=$(median < "$work/torch.txt")
  awk -v t="$p" -v s=$steps 'BEGIN { printf "pytorch  median %.3f s/epoch  %7.0f steps/s  %7.0f images/s\n", t, s/t, 60000/t }'
  awk -v p="$p" -v d="$d" 'BEGIN { printf "speed-up dtc/pytorch: %.2fx\n", p/d }'
else
  echo "pytorch: not installed (python3-torch), no ratio"
fi
