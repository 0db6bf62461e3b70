#!/usr/bin/env bash
# The GPU check, on a machine with a GPU and nothing but the project, its
# build products (scripts/gpu-bundle.sh made gpu-bundle/) and CUDA:
#  1. trains the seed MLP for one epoch on CUDA and on the CPU from the same
#     initialization and batch order (--init, --shuffle off) and compares the
#     loss of every step (tolerance: 2% relative or 0.02 absolute per step —
#     fp32 with other summation orders in cuBLAS and the reductions; a wrong
#     kernel diverges within a few steps by far more);
#  2. times steps per second of dtc on CUDA against PyTorch eager and
#     torch.compile on the same model and batch size, when PyTorch is there.
# Finishes in a few minutes. usage: scripts/gpu-check.sh [bundle-dir]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=${1:-$here/../gpu-bundle}
[ -x "$bundle/train" ] || bundle=$here
cd "$bundle"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi -L || { echo "no GPU visible (nvidia-smi)"; exit 1; }
common=(--init init.safetensors --shuffle off --epochs 1 --data data --progress off)

echo "== 1. loss trajectory, CUDA vs CPU"
./train --device cuda "${common[@]}" --metrics cuda.csv | tee cuda.log
./train --device cpu "${common[@]}" --threads "$(nproc)" --metrics cpu.csv | tee cpu.log
python3 - <<'PY'
import csv
def losses(p):
    with open(p) as f:
        return [float(r["loss"]) for r in csv.DictReader(f)]
a, b = losses("cuda.csv"), losses("cpu.csv")
assert len(a) == len(b) > 0, (len(a), len(b))
worst = max(abs(x - y) / max(abs(y), 1.0) for x, y in zip(a, b))
bad = [i for i, (x, y) in enumerate(zip(a, b)) if abs(x - y) > max(0.02, 0.02 * abs(y))]
print(f"steps {len(a)}  first loss cuda {a[0]:.5f} cpu {b[0]:.5f}  last cuda {a[-1]:.5f} cpu {b[-1]:.5f}  worst rel diff {worst:.2e}")
print("PASS: loss trajectories agree" if not bad else f"FAIL: {len(bad)} steps differ, first at step {bad[0] + 1}")
raise SystemExit(1 if bad else 0)
PY

echo "== 2. speed"
./train --device cuda --data data --epochs 1 --eval off --progress off | tee speed.log
dtc_sps=$(sed -n 's/.*images\/s \([0-9]*\).*/\1/p' speed.log | tail -1 | awk '{ printf "%.0f", $1 / 64 }')
echo "dtc (CUDA) steps/s: $dtc_sps"
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  ref=$(python3 torch_gpu.py data 2000)
  echo "$ref"
  eager=$(awk '{print $2}' <<<"$ref") comp=$(awk '{print $4}' <<<"$ref")
  awk -v d="$dtc_sps" -v e="$eager" -v c="$comp" 'BEGIN {
    printf "dtc / PyTorch eager: %.2fx\n", d / e
    if (c > 0) printf "dtc / torch.compile: %.2fx\n", d / c }'
else
  echo "PyTorch with CUDA not available here: no reference timing"
fi
