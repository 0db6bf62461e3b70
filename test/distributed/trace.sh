#!/usr/bin/env bash
# Chrome traces of 2 ranks training a model with two gradient buckets
# (examples/deep_mlp.dsl), --threads 1 each:
#   --overlap on   the all-reduce of bucket 0 starts before backward ends
#                  (in most traced steps)
#   --overlap off  it starts only at its wait, after backward, in every step
#   default (auto) on when each rank has a core for its communication thread
#                  besides its compute thread, else off: the trace records
#                  the choice (otherData.overlap) and the steps must follow it
# usage: trace.sh DTC MODEL.dsl WORKDIR
set -euo pipefail
dtc=$1 model=$2 work=$3
check=$(dirname "$0")/trace_overlap.py
mkdir -p "$work"
"$dtc" "$model" -o "$work/train"
run() { # run OVERLAP-OPTION... ; traces in $work/trace.json and trace.rank1.json
  rm -f "$work"/trace*.json
  timeout 300 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 "$work/train" \
    --data synthetic:2048,0 --threads 1 --epochs 3 --max-steps 42 --trace "$work/trace.json" \
    --trace-steps 40 --quiet "$@"
}
both() { # both EXPECTATION: checks the traces of both ranks
  /usr/bin/python3 "$check" "$work/trace.json" 2 "$1"
  /usr/bin/python3 "$check" "$work/trace.rank1.json" 2 "$1"
}
run --overlap on && both overlapped
run --overlap off && both deferred
run && both auto
# Stage 2 carries each step's all-gathers into the next: when the trace ends
# before the run does, those of its last step are still to run on the
# communication thread when the tracer is written and destroyed. They must
# not record into it: that was a use after free (this run, the GPT in
# micro-batches with a gather per block, crashed with SIGSEGV every time
# once the trace was large) until the communicator's setTracer shut them
# out (a span goes only into the tracer still current). 3 ranks, 30 steps,
# the first 29 traced.
gpt=$(dirname "$0")/../../examples/gpt.dsl
sed 's/^  batch = 12$/  batch = 3\n  accumulate = 4/' "$gpt" >"$work/gpt_acc.dsl"
grep -q 'accumulate = 4' "$work/gpt_acc.dsl"
"$dtc" "$work/gpt_acc.dsl" --ranks 3 --shard gradients --shard-groups block -o "$work/train-stage2"
rm -f "$work"/trace*.json
timeout 300 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 3 "$work/train-stage2" \
  --threads 1 --max-steps 30 --eval off --trace "$work/trace.json" --trace-steps 29 --quiet
for f in "$work/trace.json" "$work/trace.rank1.json" "$work/trace.rank2.json"; do
  /usr/bin/python3 -c '
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
steps = sum(e.get("name", "").startswith("step ") for e in ev)
gathers = sum(e.get("name", "").startswith("allgather bucket") for e in ev)
assert steps == 29 and gathers > 0, (steps, gathers)' "$f"
done
echo "PASS: stage 2 traced for 29 of 30 steps"
