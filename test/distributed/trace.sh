#!/usr/bin/env bash
# A Chrome trace of 2 ranks training a model with two gradient buckets
# (examples/deep_mlp.dsl): the all-reduce of bucket 0 must start in every
# traced step before backward ends.
# usage: trace.sh DTC MODEL.dsl WORKDIR
set -euo pipefail
dtc=$1 model=$2 work=$3
mkdir -p "$work"
"$dtc" "$model" -o "$work/train"
rm -f "$work"/trace*.json
timeout 300 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 "$work/train" \
  --data synthetic:2048,0 --threads 1 --epochs 3 --max-steps 42 --trace "$work/trace.json" --trace-steps 40 --quiet
/usr/bin/python3 "$(dirname "$0")/trace_overlap.py" "$work/trace.json" 2
/usr/bin/python3 "$(dirname "$0")/trace_overlap.py" "$work/trace.rank1.json" 2
