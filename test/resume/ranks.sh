#!/usr/bin/env bash
# Resuming on another number of ranks (docs/runtime.md): the epoch goes on
# from the first sample not yet trained on, in the same order; the per-rank
# --batch is the checkpoint's unless given, so 2 ranks x 16 resumed on 1
# rank with --batch 32 keeps the global batch and ends where an
# uninterrupted run does, up to the summation order of the batch (the
# tolerance of distributed/equivalence.sh). Without --batch the global
# batch changes (a note says so) and the step count follows from the
# samples left.
# usage: ranks.sh DTC MODEL.dsl WORKDIR   (MODEL: the seed MLP, momentum folded)
set -euo pipefail
dtc=$1 model=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
tool="/usr/bin/python3 $here/checkpoint_tool.py"
cmp="/usr/bin/python3 $here/../distributed/compare_safetensors.py"
mkdir -p "$work"
mpirun="timeout 300 mpirun --allow-run-as-root --oversubscribe --bind-to none"
common=(--data synthetic:1000,0 --epochs 2 --threads 1 --quiet --overlap on)
"$dtc" "$model" -o "$work/train"
"$work/train" "${common[@]}" --batch 32 --save "$work/full.st"

echo "== 2 ranks x 16, stopped after step 20, resumed on 1 rank x 32"
$mpirun -np 2 "$work/train" "${common[@]}" --batch 16 --checkpoint "$work/two.ck" --max-steps 20
"$work/train" "${common[@]}" --batch 32 --resume "$work/two.ck" --save "$work/two-one.st" \
  | tee "$work/two-one.log"
$cmp "$work/two-one.st" "$work/full.st" --atol 1e-6 --rtol 1e-5
if grep -q "global batch changes" "$work/two-one.log"; then
  echo "FAIL: the global batch did not change"; exit 1
fi

echo "== 1 rank x 32, stopped after step 20, resumed on 2 ranks x 16"
"$work/train" "${common[@]}" --batch 32 --checkpoint "$work/one.ck" --max-steps 20
$mpirun -np 2 "$work/train" "${common[@]}" --batch 16 --resume "$work/one.ck" \
  --save "$work/one-two.st"
$cmp "$work/one-two.st" "$work/full.st" --atol 1e-6 --rtol 1e-5

echo "== control: resumed at the wrong position, the same check must fail"
$tool edit "$work/two.ck" "$work/bad.ck" --set dtc.epoch_samples=320
"$work/train" "${common[@]}" --batch 32 --resume "$work/bad.ck" --save "$work/bad.st"
$cmp "$work/bad.st" "$work/full.st" --atol 1e-6 --rtol 1e-5 --differ

echo "== 2 ranks x 16 resumed on 1 rank without --batch: global batch 32 -> 16"
loud=(--data synthetic:1000,0 --epochs 2 --threads 1 --progress off)
"$work/train" "${loud[@]}" --resume "$work/two.ck" --checkpoint "$work/two-one16.ck" \
  | tee "$work/two-one16.log"
grep -q "note: the global batch changes from 32 (2 ranks x 16) to 16 (1 x 16)" \
  "$work/two-one16.log"
# Step 20 of 2 x 16 is position 640: 360 samples of epoch 1 left (23 steps
# of 16), then 63 steps in epoch 2.
step=$($tool meta "$work/two-one16.ck" dtc.step)
epoch=$($tool meta "$work/two-one16.ck" dtc.epoch)
if [ "$step" != 106 ] || [ "$epoch" != 3 ]; then
  echo "FAIL: ended at step $step, epoch $epoch; expected step 106 (20 + 23 + 63), epoch 3"
  exit 1
fi
echo PASS
