#!/usr/bin/env bash
# mpirun -np 2 on Fashion-MNIST reaches the accuracy of 1 rank: 2 ranks x
# batch 32 see exactly the batches of 1 rank x batch 64 (the example's
# recipe), so after one epoch both must reach 0.80 and agree within 0.005
# (fp32 summation order differs, nothing else).
# usage: train_mlp_2ranks.sh DTC MODEL.dsl WORKDIR
set -euo pipefail
dtc=$1 model=$2 work=$3
mkdir -p "$work"
"$dtc" "$model" -o "$work/train"
acc() { sed -n 's/.*test_accuracy \([0-9.]*\).*/\1/p' "$1" | tail -1; }
"$work/train" --epochs 1 --quiet | tee "$work/one.log"
timeout 300 mpirun --allow-run-as-root -np 2 "$work/train" --epochs 1 --batch 32 --quiet | tee "$work/two.log"
a1=$(acc "$work/one.log") a2=$(acc "$work/two.log")
echo "1 rank x 64: $a1   2 ranks x 32: $a2"
awk -v a="$a1" -v b="$a2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a >= 0.80 && b >= 0.80 && d <= 0.005) }' \
  || { echo FAIL; exit 1; }
echo PASS
