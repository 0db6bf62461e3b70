#!/usr/bin/env bash
# Startup safety and failures, on compiled programs under mpirun:
#  1. ranks running different compiled steps (here: another bucket plan) stop
#     with a clear error instead of hanging;
#  2. a rank killed in the middle of training ends the job with an error
#     within a bounded time.
# usage: faults.sh DTC MODEL.dsl WORKDIR
set -uo pipefail
dtc=$1 model=$2 work=$3
mkdir -p "$work"
mpirun="mpirun --allow-run-as-root --oversubscribe --bind-to none"
fail() { echo "FAIL: $*"; exit 1; }

"$dtc" "$model" -o "$work/train-a" || fail "compile"
"$dtc" "$model" --bucket-mb 0 --first-bucket-mb 0 -o "$work/train-b" || fail "compile"

echo "== 1. mismatched programs"
start=$SECONDS
timeout 120 $mpirun -np 1 "$work/train-a" --data synthetic:256,0 --threads 1 : \
  -np 1 "$work/train-b" --data synthetic:256,0 --threads 1 >"$work/mismatch.log" 2>&1
rc=$?
cat "$work/mismatch.log"
[ $rc -ne 0 ] || fail "mismatched ranks exited 0"
[ $rc -ne 124 ] || fail "mismatched ranks hung (killed by timeout)"
grep -q "runs a different compiled program" "$work/mismatch.log" || fail "no clear message"
echo "ended with exit $rc after $((SECONDS - start)) s"

echo "== 2. a rank killed mid-training"
start=$SECONDS
timeout 120 $mpirun -np 2 "$work/train-a" --data synthetic:200000,0 --epochs 20 --threads 1 \
  --comm-timeout 10 --progress off >"$work/killed.log" 2>&1 &
job=$!
# Wait until both ranks train, then kill one of them.
for _ in $(seq 100); do
  sleep 0.2
  pids=$(pgrep -f "$work/train-a" | tr '\n' ' ')
  [ "$(wc -w <<<"$pids")" -ge 2 ] && break
done
sleep 2
victim=$(pgrep -f "$work/train-a" | tail -1)
[ -n "$victim" ] || fail "no rank to kill"
kill -9 "$victim"
wait $job
rc=$?
cat "$work/killed.log" | tail -5
[ $rc -ne 0 ] || fail "the job exited 0 after a rank was killed"
[ $rc -ne 124 ] || fail "the job hung after a rank was killed"
elapsed=$((SECONDS - start))
echo "ended with exit $rc after $elapsed s"
pgrep -f "$work/train-a" && fail "ranks left running"
echo PASS
