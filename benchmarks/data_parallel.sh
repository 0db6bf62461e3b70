#!/usr/bin/env bash
# Data-parallel benchmark (one run, side by side): step time of the seed MLP
# and the deeper example on 1 and 2 ranks, with and without overlap, and with
# bucket caps from one bucket per parameter to one bucket for all; and dtc's
# all-reduce time (from --trace) against a plain MPI_Allreduce of the same
# bytes. Real Fashion-MNIST, batch 64 per rank, evaluation off.
# usage: benchmarks/data_parallel.sh [steps=300]     (after scripts/build.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DTC_BUILD_DIR:-$root/build}
steps=${1:-300}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$root/benchmarks/lib.sh"

ms_per_step() { # log -> milliseconds per step
  sed -n 's/.* time \([0-9.]*\)s.*/\1/p' "$1" | tail -1 | awk -v s="$steps" '{ printf "%.3f", $1 * 1000 / s }'
}
run() { # exe ranks -> ms/step
  local exe=$1 ranks=$2 log="$work/run.log"
  if [ "$ranks" -eq 1 ]; then
    "$exe" --max-steps "$steps" --eval off --quiet --threads 2 >"$log"
  else
    $mpirun -np "$ranks" "$exe" --max-steps "$steps" --eval off --quiet --threads 1 >"$log"
  fi
  ms_per_step "$log"
}

printf "%-9s %-26s %9s %9s %9s\n" model config "1 rank" "2 ranks" "2r/1r"
for model in mlp deep_mlp; do
  for config in "default (1 MiB, 25 MiB):" "no overlap:--no-overlap" \
                "bucket per parameter:--bucket-mb 0 --first-bucket-mb 0" \
                "one bucket:--bucket-mb 100000 --first-bucket-mb 100000"; do
    name=${config%%:*} flags=${config#*:}
    # shellcheck disable=SC2086
    "$build/bin/dtc" "$root/examples/$model.dsl" $flags -o "$work/train"
    one=$(run "$work/train" 1)
    two=$(run "$work/train" 2)
    printf "%-9s %-26s %8sms %8sms %9s\n" "$model" "$name" "$one" "$two" \
      "$(awk -v a="$one" -v b="$two" 'BEGIN { printf "%.2fx", b / a }')"
  done
done

echo
echo "all-reduce of the seed MLP's gradients (397,510 floats), 2 ranks:"
mpicc -O2 -o "$work/allreduce_mpi" "$root/benchmarks/allreduce_mpi.c"
mpi_us=$($mpirun -np 2 "$work/allreduce_mpi" 397510 200)
"$build/bin/dtc" "$root/examples/mlp.dsl" -o "$work/train"
$mpirun -np 2 "$work/train" --max-steps 60 --eval off --quiet --threads 1 \
  --trace "$work/trace.json" --trace-steps 50 >/dev/null
dtc_us=$(/usr/bin/python3 - "$work/trace.json" <<'PY'
import json, sys, statistics
ev = json.load(open(sys.argv[1]))["traceEvents"]
d = sorted(e["dur"] for e in ev if e.get("name", "").startswith("allreduce bucket"))
print(f"{statistics.median(d[5:] or d):.1f}")
PY
)
printf "  plain MPI_Allreduce   %8.1f us (median of 200)\n" "$mpi_us"
printf "  dtc bucket all-reduce %8.1f us (median over traced steps, comm thread)\n" "$dtc_us"
awk -v a="$dtc_us" -v b="$mpi_us" 'BEGIN { printf "  ratio dtc/MPI: %.2fx\n", a / b }'
