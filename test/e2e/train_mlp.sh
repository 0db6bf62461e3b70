#!/usr/bin/env bash
# End to end: compile the seed MLP and train it for one epoch on the real
# Fashion-MNIST data with the example's recipe (SGD lr 0.01, momentum 0.9,
# batch 64, seed 1); the test accuracy must reach 0.80 (PyTorch: 0.80-0.84).
# Also checks the files it writes: the metrics CSV (one row per step) and a
# safetensors checkpoint that --init reads back to the same test accuracy,
# with the data decoded afresh (--data-cache off), stored in a new decoded
# cache, and mapped from it.
set -euo pipefail
dtc=$1 model=$2 work=$3
mkdir -p "$work"
exe="$work/train-mlp"
"$dtc" "$model" -o "$exe"
log="$work/train.log"
"$exe" --epochs 1 --data-cache off --save "$work/mlp.safetensors" --metrics "$work/metrics.csv" | tee "$log"
acc=$(sed -n 's/.*test_accuracy \([0-9.]*\).*/\1/p' "$log" | tail -1)
echo "test accuracy after 1 epoch: $acc"
awk -v a="$acc" 'BEGIN { exit !(a >= 0.80) }' || { echo "FAIL: accuracy $acc < 0.80"; exit 1; }
steps=$(($(wc -l < "$work/metrics.csv") - 1))
[ "$steps" -eq 938 ] || { echo "FAIL: metrics.csv has $steps steps, expected 938"; exit 1; }
# Evaluating the saved parameters (no training step) gives the same accuracy,
# whether the data come from the files or the cache.
rm -rf "$work/cache"
for pass in store map; do
  "$exe" --init "$work/mlp.safetensors" --epochs 0 --data-cache "$work/cache" | tee "$work/eval.log"
  acc2=$(sed -n 's/.*test_accuracy \([0-9.]*\).*/\1/p' "$work/eval.log" | tail -1)
  [ "$acc2" = "$acc" ] || { echo "FAIL: reloaded accuracy ($pass) $acc2 != $acc"; exit 1; }
  n=$(ls "$work/cache" | grep -c '\.dtcdata$' || true)
  [ "$n" -eq 2 ] || { echo "FAIL: $n decoded data files in the cache after '$pass', expected 2"; exit 1; }
done
echo "PASS"
