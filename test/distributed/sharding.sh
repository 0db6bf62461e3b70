#!/usr/bin/env bash
# Sharded data parallelism (dtc --shard, dtc-shard-weight-update) against
# replicated data parallelism, on compiled programs, 100 optimizer steps:
#  1. At 2 ranks (mpi; stage 2 on gloo too), stages 1 (optimizer), 2
#     (gradients) and 3 (parameters) train bit-identical
#     parameters and optimizer state to replicated training: the seed MLP
#     (SGD with momentum), the CNN (batch norm, dropout) and the GPT (AdamW,
#     cosine schedule with warmup; with gradient accumulation too; stage 3
#     also gathering a layer at a time, two ahead). A sum of
#     two terms does not depend on its order, so the reduce-scatter's sums
#     are the all-reduce's, and each rank's update of its shard does each
#     element's arithmetic of the replicated update.
#     The replicated reference updates after the all-reduce as torch.optim
#     does (dtc --no-fold-momentum): the default replicated program folds
#     SGD momentum into the all-reduce (dtc-fold-momentum), which rounds
#     otherwise, and is compared within atol 1e-6 + rtol 1e-5 (measured:
#     7e-9).
#     Stages 1 and 2 leave each step's all-gathers in flight into the
#     next (dtc-shard-weight-update's carry): with an evaluation after each
#     epoch and checkpoints every 25 steps, which read the parameters
#     between steps, the test losses equal the replicated run's and the
#     parameters the runs' without them; compiled with --no-overlap (the
#     gathers waited for in their own step), the same parameters.
#  2. With clipping (the GPT's clip_grad_norm = 1.0), the global norm is
#     summed from each rank's shards, then over the ranks: another order
#     than the replicated step's sum, so the clip factor differs in its last
#     bit now and then. Within atol 3e-4 after 100 steps (measured: 1.2e-7
#     in all but the attention's key biases, 7.5e-5 there: their gradient is
#     0 but for rounding (softmax ignores a shift of the scores), and Adam
#     turns rounding noise into steps of lr); the control, a 1% larger
#     learning rate, moves the parameters by 5e-3. Without clipping
#     (--clip-grad-norm 0) bit-identical.
#  3. At 3 and 4 ranks (oversubscribed), stages 2 and 3, within atol 1e-6 + rtol 1e-5 of
#     replicated training at as many ranks (the sum of 3 or 4 terms in
#     another order; measured: 3e-8).
#  4. Controls: a 1% larger learning rate must fail check 3's tolerance; a
#     program planned for 2 ranks refuses to start at 3, naming both.
#  5. Checkpoints: a sharded run's training state equals the replicated
#     run's, tensor for tensor (the optimizer state gathered whole), and a
#     run resumed from it at the same stage and world size continues
#     bit-identical to the run that went on.
#  6. Resharding: a state written at 2 ranks under stage 2 resumed on 1
#     rank (replicated), and at 4 ranks under stage 1, whose state resumed
#     at 3 ranks under stage 2; a state written at 2 ranks under stage 3
#     resumed on 1 rank; keeping the global batch (48): within atol
#     1e-6 + rtol 1e-5 of the uninterrupted run (the batch summed in other
#     orders; distributed/equivalence.sh's tolerance). Control: the state
#     resumed at the wrong position in the epoch must fail the same check.
# Under the sanitizers (SANITIZED=ON) the same checks over 20 steps: what
# they look for there is memory errors, not rounding.
# usage: sharding.sh DTC EXAMPLES_DIR WORKDIR [SANITIZED=OFF]
set -euo pipefail
dtc=$1 examples=$2 work=$3
steps=100
[ "${4:-OFF}" = ON ] && steps=20
mkdir -p "$work"
mpirun="timeout 300 mpirun --allow-run-as-root --oversubscribe --bind-to none"
cmp="/usr/bin/python3 $(dirname "$0")/compare_safetensors.py"
tight=(--atol 1e-6 --rtol 1e-5)

build() { # NAME MODEL.dsl DTC-OPTIONS...
  local name=$1 model=$2
  shift 2
  "$dtc" "$model" "$@" -o "$work/$name"
}
train() { # RANKS NAME OUT TRAIN-OPTIONS...
  local n=$1 name=$2 out=$3
  shift 3
  $mpirun -np "$n" "$work/$name" "$@" --quiet --save "$work/$out.safetensors" >/dev/null
}
same() { echo "== $1 vs $2: bit-identical"; $cmp "$work/$1.safetensors" "$work/$2.safetensors" --exact; }
near() {
  local a=$1 b=$2
  shift 2
  echo "== $a vs $b: within $*"
  $cmp "$work/$a.safetensors" "$work/$b.safetensors" "$@"
}

# 1. The seed MLP (SGD with momentum): 1001 synthetic samples, 32 a rank,
# 16 steps an epoch, 100 steps.
mlp=(--shuffle off --eval off --threads 1 --data synthetic:1001,0 --epochs 7 --max-steps $steps
     --batch 32)
build mlp-rep "$examples/mlp.dsl" --no-fold-momentum
build mlp-folded "$examples/mlp.dsl"
for stage in optimizer gradients parameters; do
  build "mlp-$stage" "$examples/mlp.dsl" --shard=$stage --ranks 2
  train 2 "mlp-$stage" "mlp-$stage" "${mlp[@]}"
done
train 2 mlp-rep mlp-rep "${mlp[@]}"
train 2 mlp-folded mlp-folded "${mlp[@]}"
same mlp-optimizer mlp-rep
same mlp-gradients mlp-rep
same mlp-parameters mlp-rep
near mlp-gradients mlp-folded "${tight[@]}"
# The same program over gloo (two processes with torchrun's variables):
# its reduce-scatter and all-gather, the same parameters.
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
gloo=(WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port)
env "${gloo[@]}" RANK=1 LOCAL_RANK=1 timeout 300 "$work/mlp-gradients" "${mlp[@]}" --quiet \
  >/dev/null &
other=$!
env "${gloo[@]}" RANK=0 LOCAL_RANK=0 timeout 300 "$work/mlp-gradients" "${mlp[@]}" --quiet \
  --save "$work/mlp-gradients-gloo.safetensors" >/dev/null
wait $other
same mlp-gradients-gloo mlp-gradients

# Stages 1 and 2 leave each step's all-gathers in flight (carried into
# the next step's forward): an evaluation after each epoch and checkpoints
# every 25 steps read the parameters between two steps. They observe the
# same parameters as the replicated run's (the same test loss and accuracy
# each epoch, at a learning rate that moves them well within a step), and
# change nothing the run trains (bit-identical to the runs without them).
# (train --overlap on: the gathers progress on the communication thread
# while the next step computes, where auto on this host's 2 cores starts
# each at its wait.)
evaluated=(--shuffle off --eval on --threads 1 --data synthetic:1001,301 --epochs 7
           --max-steps $steps --batch 32 --lr 0.1 --overlap on)
for name in mlp-rep mlp-optimizer mlp-gradients; do
  $mpirun -np 2 "$work/$name" "${evaluated[@]}" --checkpoint "$work/$name-eval.ckpt" \
    --checkpoint-every 25 --save "$work/$name-eval.safetensors" | grep test_loss \
    | sed 's/ images.*//' >"$work/$name-eval.log"
done
[ "$(wc -l <"$work/mlp-rep-eval.log")" -ge $((steps / 16)) ] || { echo "FAIL: no evaluations"; exit 1; }
for stage in optimizer gradients; do
  echo "== mlp-$stage evaluated between steps as mlp-rep"
  diff "$work/mlp-rep-eval.log" "$work/mlp-$stage-eval.log"
  same "mlp-$stage-eval" mlp-rep-eval
done
for name in mlp-rep mlp-optimizer; do
  train 2 "$name" "$name-lr" "${mlp[@]}" --lr 0.1
  same "$name-eval" "$name-lr"
done
train 2 mlp-gradients mlp-gradients-lr "${mlp[@]}" --lr 0.1 --overlap on
same mlp-gradients-eval mlp-gradients-lr
# Compiled with --no-overlap, the gathers end their step: the same.
build mlp-optimizer-ended "$examples/mlp.dsl" --shard=optimizer --ranks 2 --no-overlap
train 2 mlp-optimizer-ended mlp-optimizer-ended "${mlp[@]}"
same mlp-optimizer-ended mlp-rep

# The CNN: batch norm (its running statistics stay each rank's), dropout.
cnn=(--eval off --threads 1 --data synthetic:2000,0 --epochs 10 --max-steps $steps --batch 16)
build cnn-rep "$examples/cnn.dsl" --no-fold-momentum
build cnn-gradients "$examples/cnn.dsl" --shard=gradients --ranks 2
build cnn-parameters "$examples/cnn.dsl" --shard=parameters --ranks 2
train 2 cnn-rep cnn-rep "${cnn[@]}"
train 2 cnn-gradients cnn-gradients "${cnn[@]}"
train 2 cnn-parameters cnn-parameters "${cnn[@]}"
same cnn-gradients cnn-rep
same cnn-parameters cnn-rep

# 2. The GPT: AdamW, warmup and cosine decay, clip_grad_norm = 1.0; and
# compiled with accumulate = 2.
gpt=(--eval off --threads 1 --max-steps $steps --batch 4)
build gpt-rep "$examples/gpt.dsl"
sed 's/^  seed = 1$/  seed = 1\n  accumulate = 2/' "$examples/gpt.dsl" >"$work/gpt_accumulate.dsl"
grep -q 'accumulate = 2' "$work/gpt_accumulate.dsl"
build gpt-acc-rep "$work/gpt_accumulate.dsl"
for stage in optimizer gradients parameters; do
  build "gpt-$stage" "$examples/gpt.dsl" --shard=$stage --ranks 2
done
build gpt-blocks "$examples/gpt.dsl" --shard=parameters --ranks 2 --shard-groups=block \
  --shard-prefetch 2
build gpt-acc-gradients "$work/gpt_accumulate.dsl" --shard=gradients --ranks 2
build gpt-acc-parameters "$work/gpt_accumulate.dsl" --shard=parameters --ranks 2
train 2 gpt-rep gpt-rep-noclip "${gpt[@]}" --clip-grad-norm 0
for stage in optimizer gradients parameters; do
  train 2 "gpt-$stage" "gpt-$stage-noclip" "${gpt[@]}" --clip-grad-norm 0
  same "gpt-$stage-noclip" gpt-rep-noclip
done
train 2 gpt-blocks gpt-blocks-noclip "${gpt[@]}" --clip-grad-norm 0
same gpt-blocks-noclip gpt-rep-noclip
train 2 gpt-acc-rep gpt-acc-rep "${gpt[@]}" --clip-grad-norm 0
# (--overlap on: the carried gathers in flight across the micro-batches.)
train 2 gpt-acc-gradients gpt-acc-gradients "${gpt[@]}" --clip-grad-norm 0 --overlap on
same gpt-acc-gradients gpt-acc-rep
train 2 gpt-acc-parameters gpt-acc-parameters "${gpt[@]}" --clip-grad-norm 0
same gpt-acc-parameters gpt-acc-rep
train 2 gpt-rep gpt-rep "${gpt[@]}"
train 2 gpt-gradients gpt-gradients "${gpt[@]}"
near gpt-gradients gpt-rep --atol 3e-4
if [ "$steps" = 100 ]; then # (20 steps of warmup move too little to tell)
  train 2 gpt-rep gpt-control "${gpt[@]}" --lr 0.00101
  echo "== control: --lr 0.00101 instead of 0.001 must be told apart"
  $cmp "$work/gpt-control.safetensors" "$work/gpt-rep.safetensors" --atol 3e-4 --differ
fi

# 3. 3 and 4 ranks, each against replicated training at as many ranks.
for n in 3 4; do
  build "mlp-gradients-$n" "$examples/mlp.dsl" --shard=gradients --ranks $n
  build "mlp-parameters-$n" "$examples/mlp.dsl" --shard=parameters --ranks $n
  train $n "mlp-gradients-$n" "mlp-gradients-$n" "${mlp[@]}"
  train $n "mlp-parameters-$n" "mlp-parameters-$n" "${mlp[@]}"
  train $n mlp-rep "mlp-rep-$n" "${mlp[@]}"
  near "mlp-gradients-$n" "mlp-rep-$n" "${tight[@]}"
  near "mlp-parameters-$n" "mlp-rep-$n" "${tight[@]}"
done

# 4. Controls.
train 4 mlp-gradients-4 mlp-control "${mlp[@]}" --lr 0.0101
echo "== control: --lr 0.0101 instead of 0.01 must be told apart"
$cmp "$work/mlp-control.safetensors" "$work/mlp-rep-4.safetensors" "${tight[@]}" --differ
echo "== a program planned for 2 ranks, started on 3, refuses"
if $mpirun -np 3 "$work/mlp-gradients" "${mlp[@]}" --quiet >"$work/refused.log" 2>&1; then
  echo "FAIL: it started"
  exit 1
fi
grep -q 'shards its optimizer state and gradients over 2 ranks (dtc --shard --ranks 2), and was started on 3' \
  "$work/refused.log" || { cat "$work/refused.log"; exit 1; }

# 5. Checkpoints: 60 steps, then 40 more resumed; the state at step 60
# against the replicated run's.
half=(--shuffle off --eval off --threads 1 --data synthetic:1001,0 --epochs 7 --batch 32)
for name in mlp-gradients mlp-rep; do
  rm -f "$work/$name-60.ckpt"
  $mpirun -np 2 "$work/$name" "${half[@]}" --max-steps $((steps * 3 / 5)) --checkpoint "$work/$name-60.ckpt" \
    --quiet >/dev/null
done
echo "== the training state at step $((steps * 3 / 5)), sharded vs replicated: bit-identical, optimizer state too"
$cmp "$work/mlp-gradients-60.ckpt" "$work/mlp-rep-60.ckpt" --exact
$mpirun -np 2 "$work/mlp-gradients" "${half[@]}" --max-steps $steps --resume "$work/mlp-gradients-60.ckpt" \
  --quiet --save "$work/mlp-resumed.safetensors" >/dev/null
same mlp-resumed mlp-gradients

# 6. Resharding across stages and world sizes.
tool="/usr/bin/python3 $(dirname "$0")/../resume/checkpoint_tool.py"
shuffled=(--data synthetic:1000,0 --epochs 2 --threads 1 --quiet)
build mlp-optimizer-4 "$examples/mlp.dsl" --shard=optimizer --ranks 4
"$work/mlp-folded" "${shuffled[@]}" --batch 48 --save "$work/full.safetensors" >/dev/null
rm -f "$work"/reshard-*.ckpt
$mpirun -np 2 "$work/mlp-gradients" "${shuffled[@]}" --batch 24 --max-steps 10 \
  --checkpoint "$work/reshard-2.ckpt" >/dev/null
"$work/mlp-folded" "${shuffled[@]}" --batch 48 --resume "$work/reshard-2.ckpt" \
  --save "$work/reshard-2-1.safetensors" >/dev/null
near reshard-2-1 full "${tight[@]}"
$mpirun -np 4 "$work/mlp-optimizer-4" "${shuffled[@]}" --batch 12 --max-steps 20 \
  --resume "$work/reshard-2.ckpt" --checkpoint "$work/reshard-4.ckpt" >/dev/null
$mpirun -np 3 "$work/mlp-gradients-3" "${shuffled[@]}" --batch 16 --resume "$work/reshard-4.ckpt" \
  --save "$work/reshard-4-3.safetensors" >/dev/null
near reshard-4-3 full "${tight[@]}"
# Stage 3 at 2 ranks, resumed on 1 rank replicated.
rm -f "$work/reshard-3.ckpt"
$mpirun -np 2 "$work/mlp-parameters" "${shuffled[@]}" --batch 24 --max-steps 10 \
  --checkpoint "$work/reshard-3.ckpt" >/dev/null
"$work/mlp-folded" "${shuffled[@]}" --batch 48 --resume "$work/reshard-3.ckpt" \
  --save "$work/reshard-3-1.safetensors" >/dev/null
near reshard-3-1 full "${tight[@]}"
echo "== control: resumed at the wrong position, the same check must fail"
$tool edit "$work/reshard-4.ckpt" "$work/reshard-bad.ckpt" --set dtc.epoch_samples=480
$mpirun -np 3 "$work/mlp-gradients-3" "${shuffled[@]}" --batch 16 --resume "$work/reshard-bad.ckpt" \
  --save "$work/reshard-bad.safetensors" >/dev/null
$cmp "$work/reshard-bad.safetensors" "$work/full.safetensors" "${tight[@]}" --differ
echo PASS
