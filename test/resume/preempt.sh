#!/usr/bin/env bash
# Preemption and crashes: a run that gets SIGTERM, SIGINT or SIGUSR1 writes a
# checkpoint at the next step boundary, every rank stopping after the same
# step (the signal reaches only rank 1 in the 2-rank SIGTERM case), and
# exits with status 75; a run killed by SIGKILL after a checkpoint is
# resumed from it. Each resumed run ends with parameters bit-identical to
# the uninterrupted run's.
# usage: preempt.sh DTC MODEL.dsl WORKDIR
set -euo pipefail
dtc=$1 model=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
tool="/usr/bin/python3 $here/checkpoint_tool.py"
mkdir -p "$work"
mpirun="timeout 300 mpirun --allow-run-as-root --oversubscribe --bind-to none"
# 20000 samples, batch 32, 2 epochs: 1250 steps on 1 rank, 625 on 2 (about
# a second or two), a checkpoint every 50 steps.
common=(--data synthetic:20000,0 --epochs 2 --batch 32 --threads 1 --quiet)
"$dtc" "$model" -o "$work/train"
"$work/train" "${common[@]}" --save "$work/full1.st"
$mpirun -np 2 "$work/train" "${common[@]}" --save "$work/full2.st"

wait_for() { # file: until it exists (20 s at most)
  for _ in $(seq 2000); do [ -e "$1" ] && return 0; sleep 0.01; done
  echo "FAIL  $1 never appeared"; exit 1
}
rank_pid() { # rank: the pid of that rank of the running job
  for p in $(pgrep -f "^$work/train "); do
    if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then
      echo "$p"; return 0
    fi
  done
  echo "FAIL  no rank $1 is running" >&2; exit 1
}

# interrupt NAME RANKS SIGNAL WHO EXPECTED-RC: start, wait for the first
# checkpoint, send SIGNAL to WHO (the job: the process or mpirun; rank1),
# check the exit status and that the run really stopped early, then resume.
interrupt() {
  local name=$1 ranks=$2 sig=$3 who=$4 want=$5
  local ck="$work/$name.ck" log="$work/$name.log"
  rm -f "$ck"
  if [ "$ranks" = 1 ]; then
    "$work/train" "${common[@]}" --checkpoint "$ck" --checkpoint-every 50 > "$log" 2>&1 &
  else
    $mpirun -np 2 "$work/train" "${common[@]}" --checkpoint "$ck" --checkpoint-every 50 \
      > "$log" 2>&1 &
  fi
  local pid=$!
  wait_for "$ck"
  local target=$pid
  if [ "$who" = rank1 ]; then target=$(rank_pid 1); fi
  if [ "$who" = job ] && [ "$ranks" = 2 ]; then target=$(pgrep -P "$pid" -x mpirun); fi # not timeout
  kill -s "$sig" "$target"
  local rc=0
  wait "$pid" || rc=$?
  cat "$log"
  if [ "$rc" != "$want" ]; then echo "FAIL  $name: exit status $rc, expected $want"; exit 1; fi
  local step
  step=$($tool meta "$ck" dtc.step)
  local total=$((ranks == 1 ? 1250 : 626))
  if [ "$step" -ge "$total" ]; then echo "FAIL  $name: the run ended before the signal"; exit 1; fi
  if [ "$want" = 75 ]; then
    grep -q "stopped by .* after step $step: the training state is in $ck" "$log" || {
      echo "FAIL  $name: no message naming step $step"; exit 1; }
  fi
  if [ "$ranks" = 1 ]; then
    "$work/train" "${common[@]}" --resume "$ck" --save "$work/$name.st"
  else
    $mpirun -np 2 "$work/train" "${common[@]}" --resume "$ck" --save "$work/$name.st"
  fi
  if cmp -s "$work/$name.st" "$work/full$ranks.st"; then
    echo "ok    $name: stopped after step $step, resumed, bit-identical"
  else
    echo "FAIL  $name: the resumed run differs from the uninterrupted one"; exit 1
  fi
}

# storm N: N runs that get SIGUSR1 as fast as a shell sends it, from the
# first checkpoint until they end. Each must stop with status 75 and resume
# bit-identical. The signals are taken on the runtime's own signal thread
# (preempt.h): when they landed on the computing thread, oneDNN's GEMM
# kernels (rsp in a heap buffer while they run) had the signal frame
# written into the heap, and 6 runs in 10 aborted in free().
storm() {
  for i in $(seq "$1"); do
    local ck="$work/storm.ck" log="$work/storm.log"
    rm -f "$ck"
    "$work/train" "${common[@]}" --checkpoint "$ck" --checkpoint-every 50 > "$log" 2>&1 &
    local pid=$!
    wait_for "$ck"
    (while kill -s USR1 "$pid" 2> /dev/null; do :; done) &
    local rc=0
    wait "$pid" || rc=$?
    wait
    if [ "$rc" != 75 ]; then cat "$log"; echo "FAIL  storm $i: exit status $rc, expected 75"; exit 1; fi
    "$work/train" "${common[@]}" --resume "$ck" --save "$work/storm.st"
    cmp -s "$work/storm.st" "$work/full1.st" || {
      echo "FAIL  storm $i: the resumed run differs from the uninterrupted one"; exit 1; }
  done
  echo "ok    storm: $1 runs under a storm of SIGUSR1 stopped with 75, resumed, bit-identical"
}

interrupt sigterm1 1 TERM job 75
interrupt sigint1 1 INT job 75
interrupt kill1 1 KILL job 137
# Only rank 1 is signalled: rank 0 must stop after the same step.
interrupt sigterm2-rank1 2 TERM rank1 75
# OpenMPI's mpirun forwards SIGUSR1 to every rank (SIGTERM to mpirun makes
# it kill the ranks itself: send that to the ranks, as Slurm does).
interrupt sigusr1-mpirun 2 USR1 job 75
# SIGKILL of one rank: mpirun ends the job; resume from the last checkpoint.
interrupt kill2-rank1 2 KILL rank1 137
storm 5
echo PASS
