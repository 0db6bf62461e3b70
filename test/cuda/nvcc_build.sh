#!/usr/bin/env bash
# Compiles a model for the CUDA target with nvcc for sm_90, link included,
# and runs the program on this machine: with no GPU, --device auto must fall
# back to the CPU steps and train, and --device cuda must stop with a clear
# error. Skipped (exit 77) with the reason when nvcc is missing.
# usage: nvcc_build.sh DTC MODEL.dsl WORKDIR [text]
# (text: the model reads token ids; it trains on a generated text file)
set -euo pipefail
dtc=$1 model=$2 work=$3 kind=${4:-}
if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "SKIP: nvcc not found (install the CUDA toolkit to build the CUDA target)"
  exit 77
fi
if [ "${DTC_CUDA_RUNTIME:-1}" = 0 ]; then
  echo "SKIP: this dtc was built without the CUDA runtime (e.g. the sanitizer build)"
  exit 77
fi
mkdir -p "$work"
exe="$work/$(basename "$model" .dsl)-cuda" # per model: ctest runs them in parallel
"$dtc" "$model" --target=cuda --cuda-arch=sm_90 -o "$exe"
echo "built $exe with nvcc (sm_90)"
train=synthetic:256,64 one=synthetic:64,0
if [ "$kind" = text ]; then
  for i in $(seq 2000); do echo "line $i of a text to train on"; done > "$exe.txt"
  train=text:$exe.txt one=text:$exe.txt
fi
if [ -e /proc/driver/nvidia/gpus ] && [ -n "$(ls /proc/driver/nvidia/gpus 2>/dev/null)" ]; then
  "$exe" --device cuda --data "$train" --max-steps 5 --progress off
  exit 0
fi
"$exe" --device auto --data "$train" --max-steps 5 --progress off | tee "$exe.auto.log"
grep -q "device cpu" "$exe.auto.log" || { echo "FAIL: --device auto did not report the CPU"; exit 1; }
if "$exe" --device cuda --data "$one" --max-steps 1 2>"$exe.cuda.err"; then
  echo "FAIL: --device cuda ran without a GPU"; exit 1
fi
cat "$exe.cuda.err"
grep -q "no CUDA device" "$exe.cuda.err" || { echo "FAIL: unclear error without a GPU"; exit 1; }
echo PASS
