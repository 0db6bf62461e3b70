#!/usr/bin/env bash
# Several hosts on one machine: three network namespaces joined by a Linux
# bridge stand for three hosts, and mpirun (on host a, as on a real cluster's
# first node) starts one rank on each through a launch agent, so that the
# ranks talk over TCP across the bridge, not through shared memory.
#  1. 1, 2 and 3 hosts with the same global batch (96: 1 x 96, 2 x 48, 3 x 32)
#     train to the same parameters (1001 samples, shuffle off, so the last
#     global batch of 41 is split 21/20 and 14/14/13). fp32 sums happen in
#     another order, so the tolerance of equivalence.sh (atol 1e-6, rtol 1e-5)
#     applies; its control (lr x 1.01) must be told apart.
#  2. faults end the whole job, with an error and in bounded time:
#     (a) a host cut off the network mid-training (its veth set down),
#     (b) a rank killed with SIGKILL on one host;
#     and leave no process behind.
# The job ending after a host vanishes needs the launcher to give up on that
# host's daemon: mpirun's abort message to it sits in TCP retransmission, which
# Linux keeps up for ~15 minutes by default (net.ipv4.tcp_retries2 = 15), so
# the hosts here use tcp_retries2 = 5 (~13 s), set in their own namespaces.
# Skips (exit 77) where network namespaces cannot be made (not root, no ip).
# usage: multihost.sh DTC MODEL.dsl WORKDIR
set -uo pipefail
dtc=$1 model=$2 work=$3
cmp="/usr/bin/python3 $(cd "$(dirname "$0")" && pwd)/compare_safetensors.py"
fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIP: cannot create network namespaces here: $*"; exit 77; }

[ "$(id -u)" = 0 ] || skip "not root (uid $(id -u))"
command -v ip >/dev/null 2>&1 || skip "no ip command (iproute2)"
command -v mpirun >/dev/null 2>&1 || fail "no mpirun"
mkdir -p "$work" && work=$(cd "$work" && pwd -P) || fail "cannot make $work"
rm -rf "$work/tmp" "$work"/*.safetensors "$work"/*.log "$work"/*.ckpt "$work"/*.out "$work"/*.err "$work"/trace*.json

# The hosts, their launch agent and hosts_run (netns_hosts.sh).
. "$(cd "$(dirname "$0")" && pwd)/netns_hosts.sh"

# check_placement N LOG: rank i ran in host i's namespace, with its address.
check_placement() {
  local n=$1 log=$2 i
  for ((i = 0; i < n; i++)); do
    grep -qx "rank $i netns ${hosts[i]} addr ${ips[i]}/24" "$log" ||
      { cat "$log"; fail "rank $i did not run on host ${hosts[i]} (${ips[i]})"; }
  done
  [ "$(wc -l <"$log")" -eq "$n" ] || { cat "$log"; fail "expected $n ranks in $log"; }
}
# no_leftovers: no process of this test is left in its namespaces.
no_leftovers() {
  local pids
  for _ in $(seq 40); do
    pids=$(for h in "${hosts[@]}"; do ip netns pids "$h"; done)
    [ -z "$pids" ] && return 0
    sleep 0.25
  done
  ps -o pid,ppid,stat,etime,args -p "$(tr '\n' , <<<"$pids" | sed 's/,$//')"
  fail "processes left behind 10 s after the job ended"
}
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

"$dtc" "$model" -o "$work/train" || fail "compile"

echo "== 1. the same global batch on 1, 2 and 3 hosts: the same parameters"
common=(--data synthetic:1001,0 --shuffle off --eval off --threads 1 --epochs 1 --quiet --overlap on)
"$work/train" "${common[@]}" --batch 96 --save "$work/hosts1.safetensors" || fail "1 host"
for n in 2 3; do
  b=$((96 / n))
  echo "-- $n hosts x batch $b"
  hosts_run $n 120 "$work/rank.sh" "$work/ranks$n.log" "$work/train" "${common[@]}" --batch $b \
    --save "$work/hosts$n.safetensors" || fail "$n hosts x batch $b (exit $?)"
  check_placement $n "$work/ranks$n.log"
  $cmp "$work/hosts$n.safetensors" "$work/hosts1.safetensors" --atol 1e-6 --rtol 1e-5 ||
    fail "$n hosts x batch $b differ from 1 host x batch 96"
done
echo "-- control: lr 0.0101 instead of 0.01 must be told apart"
"$work/train" "${common[@]}" --batch 96 --lr 0.0101 --save "$work/control.safetensors" || fail "control"
$cmp "$work/control.safetensors" "$work/hosts1.safetensors" --atol 1e-6 --rtol 1e-5 --differ ||
  fail "the check cannot tell a 1% larger step apart"
echo "-- the launch agent started daemons on:"
cat "$work/agent.log"

echo "== timing: 3 hosts, 30 steps of batch 3 x 32 (trace of 20 steps)"
hosts_run 3 120 "$work/train" --data synthetic:4096,0 --threads 1 --batch 32 --eval off \
  --overlap on --max-steps 30 --trace-steps 20 --trace "$work/trace.json" --quiet ||
  fail "3 hosts traced (exit $?)"
/usr/bin/python3 - "$work/trace.json" <<'EOF' || fail "reading the trace"
import json, statistics, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
def median_ms(pred):
    d = [e["dur"] for e in ev if e.get("ph") == "X" and pred(e.get("name", ""))]
    return f"{statistics.median(d) / 1e3:.1f} ms (median of {len(d)})" if d else "none traced"
print("rank 0: step", median_ms(lambda n: n.startswith("step ")),
      "| all-reduce", median_ms(lambda n: n.startswith("allreduce bucket")),
      "| wait", median_ms(lambda n: n.startswith("wait")))
EOF

# fault NAME N: starts a long N-host run in the background ($job, output in
# $work/NAME.out/.err) and waits until it trains (its first checkpoint exists).
fault_start() {
  local name=$1 n=$2
  rm -f "$work/$name.ckpt"
  job_start=$EPOCHREALTIME
  # (20,000 samples, generated by each rank: 200,000 took over a minute
  # under ASan with 3 ranks on 2 cores, before the first step)
  hosts_run "$n" 120 "$work/train" --data synthetic:20000,0 --epochs 200 --threads 1 --batch 32 \
    --eval off --comm-timeout 10 --progress off --checkpoint "$work/$name.ckpt" \
    --checkpoint-every 20 >"$work/$name.out" 2>"$work/$name.err" &
  job=$!
  for _ in $(seq 450); do
    [ -f "$work/$name.ckpt" ] && break
    kill -0 $job 2>/dev/null || { cat "$work/$name.out" "$work/$name.err"; fail "$name: the job ended before training"; }
    sleep 0.2
  done
  [ -f "$work/$name.ckpt" ] ||
    { tail -5 "$work/$name.out" "$work/$name.err"; fail "$name: no checkpoint after $(secs "$job_start" "$EPOCHREALTIME") s"; }
  grep -q "ranks $n backend mpi" "$work/$name.out" || { cat "$work/$name.out"; fail "$name: not $n ranks over MPI"; }
  sleep 2
}
# fault_end NAME FAULT_TIME BOUND REGEX: the job must end, non-zero, within
# BOUND s of the fault, with an error that matches REGEX (names the rank, the
# bucket or the peer) on stderr.
fault_end() {
  local name=$1 t0=$2 bound=$3 regex=$4 rc
  for _ in $(seq $((bound * 10))); do
    kill -0 $job 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 $job 2>/dev/null; then
    echo "-- the job is still running $(secs "$t0" "$EPOCHREALTIME") s after the fault:"
    tail -5 "$work/$name.err"
    stop_processes
    fail "$name: the job did not end within $bound s"
  fi
  wait $job
  rc=$?
  job=
  echo "-- ended with exit $rc, $(secs "$t0" "$EPOCHREALTIME") s after the fault; stderr:"
  grep -v 'plm:rsh: Warning: setpgid' "$work/$name.err" | head -12
  [ $rc -ne 0 ] || fail "$name: the job exited 0"
  # (mpirun itself exits 137 when a rank was killed: only the time tells a timeout)
  [ $rc -ne 124 ] && [ "$(secs "$job_start" "$EPOCHREALTIME" | cut -d. -f1)" -lt 120 ] ||
    fail "$name: the job hung (ended by timeout)"
  echo "-- the error lines that name a rank, the bucket or the peer:"
  grep -E "$regex" "$work/$name.err" || fail "$name: no error matching '$regex' on stderr"
  no_leftovers
}

echo "== 2a. host ${hosts[2]} cut off the network mid-training (3 hosts)"
fault_start cut 3
ip link set "${hosts[2]}" down || fail "ip link set down"
t0=$EPOCHREALTIME
# (rank 2 times out too, but its message cannot reach mpirun across the cut;
# the cut finds the ranks in a gradient bucket's all-reduce, or, on a slow
# (sanitizer) build, as often in the small all-reduce of the step's outputs:
# either names what did not complete)
fault_end cut "$t0" 60 "train: error: rank [01]: all-reduce of (bucket [0-9]+|[0-9]+ values) .*did not complete within 10 s"
ip link set "${hosts[2]}" up || fail "ip link set up"
# The address resolutions that failed while cut off would fail new connections
# from that host for a while (its neighbour entries stay INCOMPLETE/FAILED).
for h in "${hosts[@]}"; do ip -n "$h" neigh flush all; done
for i in $(seq 5); do
  hosts_run 3 30 true >/dev/null 2>&1 && break
  [ "$i" -lt 5 ] || fail "the 3 hosts cannot run a job after ${hosts[2]}'s link came back"
  sleep 1
done

echo "== 2b. the rank on host ${hosts[1]} killed with SIGKILL mid-training (3 hosts)"
fault_start killed 3
victim=
for p in $(ip netns pids "${hosts[1]}"); do
  [ "$(readlink "/proc/$p/exe" 2>/dev/null)" = "$work/train" ] && victim=$p
done
[ -n "$victim" ] || fail "no rank found on host ${hosts[1]}"
kill -9 "$victim"
t0=$EPOCHREALTIME
# this one comes from Open MPI: mpirun's report or a rank's lost TCP peer
fault_end killed "$t0" 60 "process rank 1 with PID [0-9]+ on node ${ips[1]}|Peer host: +${ips[1]}\$|train: error: rank [0-9]+:"
echo PASS
