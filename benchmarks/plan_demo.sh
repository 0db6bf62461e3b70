#!/usr/bin/env bash
# The demonstration of issue 35: a GPT (examples/gpt.dsl at a batch of 48
# sequences a rank, where activations dominate) whose replicated training
# does not fit a budget a rank (default 100 MiB) at 2 ranks. train
# --calibrate measures the 2 ranks; dtc plans within the budget and prints
# the plans it considered (--report); then the best plan of each sharding
# stage and recomputation policy (dtc with that --shard and --remat fixed,
# the micro-batch and buckets chosen) is compiled, and each trains for a
# few steps, side by side with replicated training without a budget:
# predicted and measured step time and the largest rank's peak memory (the
# OS's), against the budget.
# usage: benchmarks/plan_demo.sh [budget=100M] [steps=30] [batch=48]   (after scripts/build.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DTC_BUILD_DIR:-$root/build}
budget=${1:-100M} steps=${2:-30} batch=${3:-48}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$root/benchmarks/lib.sh"
export DTC_CACHE_DIR=$work/cache
dtc=$build/bin/dtc
sed "s/^  batch = 12$/  batch = $batch/" "$root/examples/gpt.dsl" >"$work/gpt.dsl"
grep -q "batch = $batch" "$work/gpt.dsl"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; gpt at batch $batch a rank, 2 ranks x 1 thread; budget $budget a rank; $steps steps a run"
"$dtc" "$work/gpt.dsl" -o "$work/probe"
$mpirun -np 2 "$work/probe" --calibrate --threads 1
"$dtc" "$work/gpt.dsl" --ranks 2 --memory-per-rank "$budget" --report --emit=mlir-opt -o /dev/null |
  sed -n '/^plans for/,/^chosen/p' | sed 's/(machine: [^;]*; /(/'
echo
printf '%-34s %10s %10s %10s %10s  %s\n' "plan (stage, remat, batch)" "step pred" "measured" "peak pred" "measured" "within $budget"
run() { # NAME DTC-OPTIONS...
  local name=$1
  shift
  if ! "$dtc" "$work/gpt.dsl" --ranks 2 "$@" -o "$work/$name" 2>"$work/err"; then
    printf '%-34s %s\n' "$name" "$(sed 's/^dtc: error: //' "$work/err" | cut -c1-100)"
    return
  fi
  $mpirun -np 2 "$work/$name" --max-steps "$steps" --eval off --threads 1 >"$work/log" 2>&1
  /usr/bin/python3 - "$name" "$budget" "$(grep '^predicted vs measured' "$work/log")" \
    "$(grep '^model ' "$work/log")" <<'PY'
import re, sys
name, budget, line, header = sys.argv[1:]
m = re.search(r"step ([\d.]+) ms vs ([\d.]+) ms .*peak memory ([\d.]+) MiB vs ([\d.]+) MiB", line)
tp, tm, mp, mm = (float(g) for g in m.groups())
b = float(budget[:-1]) * {"K": 1 / 1024, "M": 1, "G": 1024}[budget[-1]]
micro = re.search(r"batch (\d+)( accumulate (\d+))?", header)
plan = f"{name} {micro.group(1)}" + (f" x {micro.group(3)}" if micro.group(3) else "")
print(f"{plan:34s} {tp:7.1f} ms {tm:7.1f} ms {mp:6.1f} MiB {mm:6.1f} MiB  {'yes' if mm <= b else 'NO'}")
PY
}
run "replicated, none (no budget)" --shard none --remat none
run "chosen by dtc" --memory-per-rank "$budget"
for shard in none optimizer gradients parameters; do
  for remat in none selective blocks; do
    run "$shard, $remat" --shard "$shard" --remat "$remat" --memory-per-rank "$budget"
  done
done
