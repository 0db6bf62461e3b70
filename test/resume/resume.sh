#!/usr/bin/env bash
# Exact resume: for every optimizer (SGD plain, momentum (folded into the
# gradient buckets), Nesterov, weight decay with dampening, Adam, AdamW),
# shuffle on, at 1 and 2 ranks, a run stopped at a step (--max-steps K with
# --checkpoint) and continued with --resume ends with parameters
# bit-identical to the uninterrupted run. The momentum and AdamW models are
# also stopped at the first step, at an epoch's last step, at the next
# epoch's first and at the last step but one, and resumed twice in a row.
# Controls: the same resume with one piece of state dropped from the
# checkpoint (the optimizer state, the step count, the position in the
# epoch, the epoch) must end differently.
# A CNN with batch normalization and dropout resumes exactly too (its masks
# follow the step; the running statistics and num_batches_tracked are in the
# checkpoint), and changing the step count alone, or the batches counted,
# changes the run.
# A byte-level language model on text, its windows drawn at random (from
# the seed, the epoch and the window's place in the epoch's order), with
# AdamW and a warmup + cosine schedule, resumes exactly at 1 and 2 ranks;
# resumed in another epoch (other windows) or at another step (another
# rate), it ends differently.
# usage: resume.sh DTC WORKDIR
set -euo pipefail
dtc=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
tool="/usr/bin/python3 $here/checkpoint_tool.py"
mkdir -p "$work"
mpirun="timeout 300 mpirun --allow-run-as-root --oversubscribe --bind-to none"
# 1000 samples, batch 16: 63 steps per epoch on 1 rank (the last one of 8),
# 32 on 2 ranks (the last one of 4 + 4).
common=(--data synthetic:1000,100 --epochs 3 --batch 16 --threads 1 --quiet --eval off)

declare -A opts=(
  [sgd]="sgd(lr=0.05)"
  [momentum]="sgd(lr=0.05, momentum=0.9)"
  [nesterov]="sgd(lr=0.05, momentum=0.9, nesterov=true)"
  [decay]="sgd(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01)"
  [adam]="adam(lr=0.01)"
  [adamw]="adamw(lr=0.01, weight_decay=0.05)"
  [cnn]="sgd(lr=0.05)"
)

# The MLP, or (name cnn) a small CNN: a convolution, batch normalization
# (buffers updated every step), pooling, and dropout whose masks come from
# the step (their state is the step count).
body_mlp='input x: f32[B, 32]
h = linear(x, 24, act=tanh)
out = linear(h, 10)'
body_cnn='input x: f32[B, 2, 4, 4]
c = conv2d(x, 6, 3, padding=1)
n = batch_norm(c, act=relu)
p = max_pool2d(n, 2)
d = dropout(flatten(p), 0.3)
out = linear(d, 10)'

compile() { # name optimizer
  local body=$body_mlp
  [ "$1" = cnn ] && body=$body_cnn
  cat > "$work/$1.dsl" <<DSL
model resume_$1
$body
label y: i32[B]
loss = cross_entropy(out, y)
metric accuracy = accuracy(out, y)
train {
  data = synthetic(train=1000, test=100)
  batch = 16
  epochs = 3
  optimizer = $2
  seed = 7
}
DSL
  "$dtc" "$work/$1.dsl" -o "$work/$1"
}

# run RANKS PROGRAM ARGS...
run() {
  local ranks=$1
  shift
  if [ "$ranks" = 1 ]; then "$@"; else $mpirun -np "$ranks" "$@"; fi
}

same() { # a b what
  if cmp -s "$1" "$2"; then echo "ok    $3"; else echo "FAIL  $3: parameters differ"; exit 1; fi
}
differ() {
  if cmp -s "$1" "$2"; then echo "FAIL  control $3: the run did not change"; exit 1; fi
  echo "ok    control $3 differs"
}

# stop_resume NAME RANKS K [K2]: stop after K (then K2) steps, resume to the end.
stop_resume() {
  local name=$1 ranks=$2 k=$3 k2=${4:-}
  local prog="$work/$name" ck="$work/$name.r$ranks.k$k.ck"
  rm -f "$ck"
  run "$ranks" "$prog" "${common[@]}" --checkpoint "$ck" --max-steps "$k"
  if [ -n "$k2" ]; then
    run "$ranks" "$prog" "${common[@]}" --resume "$ck" --checkpoint "$ck" --max-steps "$k2"
  fi
  run "$ranks" "$prog" "${common[@]}" --resume "$ck" --save "$work/$name.r$ranks.k$k.st"
  same "$work/$name.r$ranks.k$k.st" "$work/$name.r$ranks.full.st" \
    "$name, $ranks rank(s), stopped after step $k${k2:+ and $k2}"
}

for name in sgd momentum nesterov decay adam adamw cnn; do
  compile "$name" "${opts[$name]}"
  for ranks in 1 2; do
    run "$ranks" "$work/$name" "${common[@]}" --save "$work/$name.r$ranks.full.st"
    stop_resume "$name" "$ranks" 40
  done
done

# More stop points: the first step, an epoch's last, the next epoch's first,
# the last but one (1 rank: 189 steps; 2 ranks: 96), and a double resume.
for name in momentum adamw; do
  for k in 1 63 64 188; do stop_resume "$name" 1 "$k"; done
  stop_resume "$name" 1 30 100
  for k in 1 32 33 95; do stop_resume "$name" 2 "$k"; done
  stop_resume "$name" 2 20 50
done

# A checkpoint holds the optimizer state PyTorch would (torch.optim's names).
$tool torch-load "$work/adamw.r1.k40.ck" | tee "$work/keys.txt"
grep -q "optimizer/h.weight/exp_avg optimizer/h.weight/exp_avg_sq" "$work/keys.txt"

# Controls: drop one piece of state, resume, and the run must change.
control() { # name ranks what edit-args...
  local name=$1 ranks=$2 what=$3
  shift 3
  local ck="$work/$name.r$ranks.k40.ck" bad="$work/$name.r$ranks.bad.ck"
  rm -f "$ck"
  run "$ranks" "$work/$name" "${common[@]}" --checkpoint "$ck" --max-steps 40
  $tool edit "$ck" "$bad" "$@"
  run "$ranks" "$work/$name" "${common[@]}" --resume "$bad" --save "$work/$name.bad.st"
  differ "$work/$name.bad.st" "$work/$name.r$ranks.full.st" "$what ($name, $ranks rank(s))"
}
control momentum 1 "momentum buffers zeroed" --zero optimizer/
control momentum 2 "momentum buffers zeroed" --zero optimizer/
control adam 1 "exp_avg zeroed" --zero optimizer/out.weight/exp_avg
control adam 1 "step count reset (bias correction)" --set dtc.step=0
control adamw 2 "step count reset (bias correction)" --set dtc.step=1
control sgd 1 "position in the epoch reset" --set dtc.epoch_samples=0
control sgd 2 "epoch changed (another shuffle order)" --set dtc.epoch=1
# Plain SGD: the step count is dropout's random state alone.
control cnn 1 "step count changed (other dropout masks)" --set dtc.step=5
control cnn 2 "step count changed (other dropout masks)" --set dtc.step=5
control cnn 1 "num_batches_tracked zeroed" --zero n.num_batches_tracked
control cnn 2 "running statistics zeroed" --zero n.running_

# The language model: 19 KB of text, 10% held out; 8 windows of 16 tokens
# per step: 133 steps per epoch on 1 rank, 67 on 2.
seq 1 4000 > "$work/corpus.txt"
cat > "$work/lm.dsl" <<DSL
model resume_lm
input ids: i32[B, 16]
label y: i32[B, 16]
wte = embedding(ids, 256, 16)
h = layer_norm(wte)
logits = h @ transpose(wte.weight)
loss = cross_entropy(logits, y)
train {
  data = text("$work/corpus.txt", block=16)
  batch = 8
  epochs = 2
  optimizer = adamw(lr=0.01)
  schedule = cosine(warmup=10, min_lr=0.001)
  seed = 7
}
DSL
"$dtc" "$work/lm.dsl" -o "$work/lm"
common=(--epochs 2 --threads 1 --quiet --eval off)
for ranks in 1 2; do
  run "$ranks" "$work/lm" "${common[@]}" --save "$work/lm.r$ranks.full.st"
  stop_resume lm "$ranks" 40
done
stop_resume lm 1 133
stop_resume lm 2 67 100
run 1 "$work/lm" "${common[@]}" --shuffle off --save "$work/lm.off.st"
differ "$work/lm.off.st" "$work/lm.r1.full.st" "consecutive windows (--shuffle off)"
control lm 1 "epoch changed (other random windows)" --set dtc.epoch=2
control lm 2 "step count changed (another learning rate)" --set dtc.step=30
echo PASS
