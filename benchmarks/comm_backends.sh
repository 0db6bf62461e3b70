#!/usr/bin/env bash
# The CPU communicators side by side (A B A B ...): the seed MLP
# (examples/mlp.dsl) on real Fashion-MNIST, one epoch, batch 64 per rank, 2
# ranks x 1 thread, evaluation off, once with mpi (mpirun) and once with gloo
# (two processes with torchrun's variables, as torchrun starts them); and
# the time of the step's all-reduce, its whole gradient in one bucket
# (397,510 floats, 1.59 MB; the bucket rounds up to 397,512), from --trace spans (per step the faster rank's
# span: the slower one also waits for its peer to arrive), next to a plain
# MPI_Allreduce of the same floats.
# usage: benchmarks/comm_backends.sh [rounds=3]     (after scripts/build.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DTC_BUILD_DIR:-$root/build}
rounds=${1:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$root/benchmarks/lib.sh"
port=$((20000 + $$ % 12000))

# backend LOG ARGS...: one 2-rank job; rank 0's output in LOG.
job() {
  local backend=$1 log=$2
  shift 2
  if [ "$backend" = mpi ]; then
    $mpirun -np 2 "$work/train" "$@" >"$log"
  else
    port=$((port + 2))
    local env=(WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port)
    env "${env[@]}" RANK=1 LOCAL_RANK=1 "$work/train" "$@" >/dev/null &
    local other=$!
    env "${env[@]}" RANK=0 LOCAL_RANK=0 "$work/train" "$@" >"$log"
    wait $other
  fi
}

"$build/bin/dtc" "$root/examples/mlp.dsl" -o "$work/train"
"$work/train" --version | sed 's/^train:/dtc program:/'
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg) (the numbers mean little on a busy machine)"
opts=(--epochs 1 --eval off --threads 1 --progress off)
for b in mpi gloo; do : >"$work/$b.epoch"; done
for _ in $(seq "$rounds"); do
  for b in mpi gloo; do
    job $b "$work/log" "${opts[@]}"
    grep -q " ranks 2 backend $b" "$work/log" || { cat "$work/log"; exit 1; }
    sed -n 's/.* time \([0-9.]*\)s.*/\1/p' "$work/log" | tail -1 >>"$work/$b.epoch"
  done
done

allreduce_us() { # trace.json -> median over steps of min over ranks of bucket 0's span
  /usr/bin/python3 - "$1" "${1%.json}.rank1.json" <<'PY'
import json, sys, statistics
spans = []
for path in sys.argv[1:]:
    ev = json.load(open(path))["traceEvents"]
    spans.append([e for e in ev if e.get("name") == "allreduce bucket 0"])
assert spans[0] and 0 <= spans[0][0]["args"]["bytes"] - 397510 * 4 < 64, spans[0][:1]  # padded bucket
per_step = [min(a["dur"], b["dur"]) for a, b in zip(*spans)][5:]  # after warm-up
print(f"{statistics.median(per_step):.1f}")
PY
}
for b in mpi gloo; do
  job $b "$work/log" --max-steps 60 --eval off --threads 1 --quiet \
    --trace "$work/$b.json" --trace-steps 50
  allreduce_us "$work/$b.json" >"$work/$b.ar"
done
mpicc -O2 -o "$work/allreduce_mpi" "$root/benchmarks/allreduce_mpi.c"
plain=$($mpirun -np 2 "$work/allreduce_mpi" 397510 200)

echo "seed MLP, Fashion-MNIST, 1 epoch, 2 ranks x 1 thread on $(nproc) cores, median of $rounds:"
printf "  %-5s %9s %9s %26s\n" backend s/epoch img/s "all-reduce 1.59 MB (us)"
for b in mpi gloo; do
  e=$(median <"$work/$b.epoch")
  printf "  %-5s %9.3f %9.0f %26.1f\n" $b "$e" "$(awk -v e="$e" 'BEGIN {print 60000 / e}')" \
    "$(cat "$work/$b.ar")"
done
printf "  plain MPI_Allreduce of the same floats: %.1f us (median of 200)\n" "$plain"
awk -v em="$(median <"$work/mpi.epoch")" -v eg="$(median <"$work/gloo.epoch")" \
    -v am="$(cat "$work/mpi.ar")" -v ag="$(cat "$work/gloo.ar")" \
    'BEGIN { printf "  gloo/mpi: epoch %.2fx, all-reduce %.2fx\n", eg / em, ag / am }'
