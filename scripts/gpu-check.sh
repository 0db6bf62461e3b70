#!/usr/bin/env bash
# The GPU check, on a machine with a GPU and nothing but CUDA (and perhaps
# PyTorch), given the folder scripts/gpu-bundle.sh made (gpu-bundle/):
#  0. the runtime's CUDA kernel unit tests (cuda_test: every kernel against
#     the CPU kernels, the device communicators);
#  1. for the seed MLP (one epoch) and the deeper example (AdamW, GELU, two
#     gradient buckets; 300 steps): trains on CUDA and on the CPU from the
#     same initialization and batch order (--init, --shuffle off) and
#     compares the loss of every step and the final test loss and accuracy.
#     Tolerances (fp32; cuBLAS and the reductions sum in other orders, and
#     the difference grows as training goes on): step 1, from identical
#     parameters, 1e-4 relative; every step 1e-3 relative; test accuracy
#     0.005, test loss 0.5%. (CPU runs with 1 and 16 threads differ by 2e-6
#     over the epoch; the parity tests hold dtc to PyTorch within 2e-5.) A
#     control run on CUDA with the learning rate 1% higher must fail the
#     comparison: the check can tell a wrong gradient scale or a missed term;
#  2. times dtc on CUDA (the last of 3 epochs, after start-up) against
#     PyTorch eager and torch.compile on the same model and batch size, when
#     PyTorch is there.
# Every command runs under a timeout; the whole check takes a few minutes.
# usage: scripts/gpu-check.sh [bundle-dir]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=${1:-$here/../gpu-bundle}
[ -x "$bundle/train-mlp" ] || bundle=$here
cd "$bundle"

# cuBLAS from the toolkit; NCCL from the toolkit or from PyTorch's wheel.
libs=/usr/local/cuda/lib64:/usr/local/cuda/lib
nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)
[ -n "$nccl" ] || nccl=$(dirname "$(find / -name 'libnccl.so.2*' -print -quit 2>/dev/null)" 2>/dev/null || true)
export LD_LIBRARY_PATH=$libs${nccl:+:$nccl}:${LD_LIBRARY_PATH:-}
missing=$(ldd ./train-mlp ./cuda_test | grep "not found" || true)
if [ -n "$missing" ]; then
  echo "FAIL: shared libraries not found (LD_LIBRARY_PATH=$LD_LIBRARY_PATH):"
  echo "$missing"
  exit 1
fi
nvidia-smi -L || { echo "FAIL: no GPU visible (nvidia-smi)"; exit 1; }
status=0

echo "== 0. CUDA kernel unit tests"
timeout 300 ./cuda_test --gtest_brief=1 || { echo "FAIL: cuda_test"; status=1; }

compare() { # model cuda-prefix: compares <cuda-prefix>-<model>.{csv,log} with cpu-<model>.*
  python3 - "$1" "$2" <<'PY'
import csv, re, sys
m, run = sys.argv[1], sys.argv[2]
def losses(p):
    with open(p) as f:
        return [float(r["loss"]) for r in csv.DictReader(f)]
def final(p):
    line = [l for l in open(p) if l.startswith("epoch ")][-1]
    return {k: float(v) for k, v in re.findall(r"(test_loss|test_accuracy) ([0-9.]+)", line)}
a, b = losses(f"{run}-{m}.csv"), losses(f"cpu-{m}.csv")
assert len(a) == len(b) > 0, (len(a), len(b))
rel = [abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b)]
bad = [i for i, r in enumerate(rel) if r > (1e-4 if i == 0 else 1e-3)]
fa, fb = final(f"{run}-{m}.log"), final(f"cpu-{m}.log")
if abs(fa["test_accuracy"] - fb["test_accuracy"]) > 0.005 or \
   abs(fa["test_loss"] - fb["test_loss"]) > 0.005 * fb["test_loss"]:
    bad.append(-1)
print(f"{m} ({run}): steps {len(a)}; step 1 rel diff {rel[0]:.1e}, worst {max(rel):.1e} at step "
      f"{rel.index(max(rel)) + 1}; loss first {a[0]:.5f}/{b[0]:.5f} last {a[-1]:.5f}/{b[-1]:.5f}; "
      f"test accuracy {fa['test_accuracy']:.4f}/{fb['test_accuracy']:.4f}, "
      f"test loss {fa['test_loss']:.4f}/{fb['test_loss']:.4f} ({run}/cpu)")
if bad:
    where = "the test metrics" if bad[0] < 0 else f"step {bad[0] + 1}"
    print(f"{m} ({run}): differs from the CPU beyond the tolerance ({len(bad)} checks, first at {where})")
else:
    print(f"{m} ({run}): agrees with the CPU")
sys.exit(1 if bad else 0)
PY
}

echo "== 1. CUDA against the CPU, same initialization and batch order"
for model in mlp deep_mlp; do
  steps=()
  [ "$model" = deep_mlp ] && steps=(--max-steps 300)
  common=(--init "init-$model.safetensors" --shuffle off --epochs 1 --data data --progress off "${steps[@]}")
  timeout 300 "./train-$model" --device cuda "${common[@]}" --metrics "cuda-$model.csv" | tee "cuda-$model.log" || status=1
  timeout 300 "./train-$model" --device cpu "${common[@]}" --threads "$(nproc)" --metrics "cpu-$model.csv" | tee "cpu-$model.log" || status=1
  if compare "$model" cuda; then echo "PASS: $model"; else echo "FAIL: $model"; status=1; fi
done
echo "-- control: CUDA with --lr 0.0101 instead of 0.01 must differ"
common=(--init init-mlp.safetensors --shuffle off --epochs 1 --data data --progress off)
timeout 300 ./train-mlp --device cuda "${common[@]}" --lr 0.0101 --metrics control-mlp.csv > control-mlp.log || status=1
if compare mlp control; then echo "FAIL: the comparison did not notice a 1% learning-rate change"; status=1
else echo "PASS: the comparison notices a 1% learning-rate change"; fi

echo "== 2. speed (seed MLP, batch 64)"
timeout 300 ./train-mlp --device cuda --data data --epochs 3 --eval off --progress off | tee speed.log || status=1
dtc_sps=$(sed -n 's/.*images\/s \([0-9]*\).*/\1/p' speed.log | tail -1 | awk '{ printf "%.0f", $1 / 64 }')
echo "dtc (CUDA) steps/s, third epoch: $dtc_sps"
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  ref=$(timeout 300 python3 torch_gpu.py data 2000) || { echo "torch_gpu.py failed"; ref=""; }
  if [ -n "$ref" ]; then
    echo "$ref"
    eager=$(awk '{print $2}' <<<"$ref") comp=$(awk '{print $4}' <<<"$ref")
    awk -v d="$dtc_sps" -v e="$eager" -v c="$comp" 'BEGIN {
      printf "dtc / PyTorch eager: %.2fx\n", d / e
      if (c > 0) printf "dtc / torch.compile: %.2fx\n", d / c }'
  fi
else
  echo "PyTorch with CUDA not available here: no reference timing"
fi
[ "$status" -eq 0 ] && echo "GPU CHECK PASSED" || echo "GPU CHECK FAILED"
exit "$status"
