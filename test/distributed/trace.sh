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
