#!/usr/bin/env bash
# dtc against PyTorch DDP, side by side in one run (A B A B ...): one epoch of
# Fashion-MNIST, batch 64 per rank, at 1 and 2 ranks, for the seed MLP, the
# deeper example and the CNN (examples/cnn.dsl). Beside each epoch's time (in the training loop) it
# prints the wall time of the whole command (start, data loading, the epoch,
# exit: what a user waits for; for PyTorch the interpreter and its imports;
# dtc maps its decoded-data cache, stored once before the rounds, as every run
# after a user's first does; benchmarks/startup.sh times the start alone).
# Both get the whole machine: threads x ranks = cores;
# PyTorch with OMP_WAIT_POLICY=PASSIVE (busy-waiting OpenMP threads would
# otherwise steal the cores). Prints median epoch times, images/s, the
# dtc/PyTorch speed-up of each pair, and the floor computed on the spot:
# the step's GEMM and convolution FLOPs (dtc --report) over the sgemm peak
# measured now (the better of OpenBLAS's and oneDNN's, each the best of 3
# runs; per rank: its share of the cores), plus at 2 ranks the all-reduce
# of the gradients at the MPI_Allreduce time measured now.
# The GPT: tokens/s of GPT_STEPS (300) steps against benchmarks/torch_gpt.py,
# and each round's speed-up (dtc's run over the PyTorch run right after it).
# usage: benchmarks/vs_pytorch.sh [rounds=5] [models="mlp deep_mlp cnn gpt"]
# (DTC_FLAGS: more dtc options, e.g. DTC_FLAGS=--layout=nchw)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DTC_BUILD_DIR:-$root/build}
rounds=${1:-5}
models=${2:-mlp deep_mlp cnn gpt}
cores=$(nproc)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$root/benchmarks/lib.sh"

gcc -O2 -o "$work/sgemm_peak" "$root/benchmarks/sgemm_peak.c" -I/usr/include/x86_64-linux-gnu/openblas-pthread -lopenblas
mpicc -O2 -o "$work/allreduce_mpi" "$root/benchmarks/allreduce_mpi.c"
# A peak is the best the machine does: the best of 3 measurements (each a
# median of 5), since a 2-thread run now and then comes out at one core's
# speed (218 and 212 GFLOP/s against 393-423 in other runs).
best3() { for _ in 1 2 3; do "$@"; done | sort -g | tail -1; }
peak1=$(OPENBLAS_NUM_THREADS=1 best3 "$work/sgemm_peak")
peakN=$(OPENBLAS_NUM_THREADS=$cores best3 "$work/sgemm_peak")
echo "sgemm peak (2048^3), OpenBLAS: $peak1 GFLOP/s on 1 core, $peakN on $cores"
if [ -e /usr/include/dnnl.h ] && gcc -O2 -DWITH_ONEDNN -o "$work/sgemm_peak_dnnl" "$root/benchmarks/sgemm_peak.c" \
     -I/usr/include/x86_64-linux-gnu/openblas-pthread -lopenblas -ldnnl 2>/dev/null; then
  d1=$(OMP_NUM_THREADS=1 best3 "$work/sgemm_peak_dnnl" 2048 onednn)
  dN=$(OMP_NUM_THREADS=$cores best3 "$work/sgemm_peak_dnnl" 2048 onednn)
  echo "sgemm peak (2048^3), oneDNN: $d1 GFLOP/s on 1 core, $dN on $cores"
  peak1=$(awk -v a="$peak1" -v b="$d1" 'BEGIN { print (a > b) ? a : b }')
  peakN=$(awk -v a="$peakN" -v b="$dN" 'BEGIN { print (a > b) ? a : b }')
fi

# Compiles examples/$1.dsl to $work/train-$1 and reads its plan: flops (the
# step's GEMM, convolution and attention FLOPs) and ar_us (the MPI
# all-reduce of its gradients at 2 ranks, measured now).
plan() {
  "$build/bin/dtc" "$root/examples/$1.dsl" ${DTC_FLAGS:-} -o "$work/train-$1"
  "$work/train-$1" --version | sed 's/^train:/dtc program:/'
  report=$("$build/bin/dtc" "$root/examples/$1.dsl" --report --emit=mlir-opt -o /dev/null)
  flops=$(sed -n 's/^\(GEMM\|convolution\|attention\) FLOPs per training step (batch [0-9]*): \([0-9]*\)/\2/p' <<<"$report" |
          awk '{ s += $1 } END { print s + 0 }')
  floats=$(sed -n 's/^all-reduce per step: \([0-9]*\) bytes.*/\1/p' <<<"$report" | awk '{print int($1/4)}')
  ar_us=$($mpirun -np 2 "$work/allreduce_mpi" "$floats" 100)
}

# The GPT (examples/gpt.dsl, a language model on Debian's fortunes):
# GPT_STEPS steps per rank at batch 12, tokens/s of the training loop
# against benchmarks/torch_gpt.py (DDP over gloo), and the floor from the
# step's GEMM and attention FLOPs.
gpt() {
  local steps=${GPT_STEPS:-300}
  plan gpt
  for ranks in 1 2; do
    : > "$work/d" ; : > "$work/p"
    for r in $(seq "$rounds"); do
      if [ "$ranks" -eq 1 ]; then
        "$work/train-gpt" --max-steps "$steps" --eval off --quiet --threads "$cores" > "$work/log"
      else
        $mpirun -np 2 "$work/train-gpt" --max-steps "$steps" --eval off --quiet --threads $((cores / 2)) > "$work/log"
      fi
      sed -n 's/.* tokens\/s \([0-9.]*\) time.*/\1/p' "$work/log" | tail -1 >> "$work/d"
      OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 "$root/benchmarks/torch_gpt.py" "$steps" "$ranks" |
        sed -n 's/.*tokens\/s \([0-9.]*\).*/\1/p' >> "$work/p"
    done
    d=$(median < "$work/d") p=$(median < "$work/p")
    awk -v n="$ranks" -v d="$d" -v p="$p" -v f="$flops" -v p1="$peak1" -v pn="$peakN" -v c="$cores" \
        -v ar="$ar_us" 'BEGIN {
      peak = (n == 1) ? pn : p1 * c / n          # GFLOP/s available to one rank
      step = f / (peak * 1e9) + (n > 1 ? ar * 1e-6 : 0)
      floor = n * 12 * 64 / step                 # tokens/s over all ranks
      printf "gpt      %d rank(s): dtc %6.0f tokens/s  PyTorch DDP %6.0f tokens/s  dtc %.2fx faster; floor %6.0f tokens/s, dtc at %.2fx of it\n",
             n, d, p, d / p, floor, floor / d }'
    # Each round's pair (dtc, then PyTorch right after it), in run order:
    # the spread of the speed-up the medians above summarize.
    paste "$work/d" "$work/p" | awk '{ r = r sprintf(" %.2f", $1 / $2) } END { print "           pairs, dtc/PyTorch in run order:" r }'
  done
}

for model in $models; do
  if [ "$model" = gpt ]; then
    gpt
    continue
  fi
  plan "$model"
  "$work/train-$model" --epochs 0 --eval off --quiet --data-cache "$work/cache" > /dev/null
  for ranks in 1 2; do
    : > "$work/d" ; : > "$work/p" ; : > "$work/dw" ; : > "$work/pw"
    for r in $(seq "$rounds"); do
      t0=$(now)
      if [ "$ranks" -eq 1 ]; then
        "$work/train-$model" --epochs 1 --eval off --quiet --threads "$cores" --data-cache "$work/cache" > "$work/log"
      else
        $mpirun -np 2 "$work/train-$model" --epochs 1 --eval off --quiet --threads $((cores / 2)) --data-cache "$work/cache" > "$work/log"
      fi
      t1=$(now)
      sed -n 's/.* time \([0-9.]*\)s.*/\1/p' "$work/log" | tail -1 >> "$work/d"
      awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }' >> "$work/dw"
      t0=$(now)
      OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 "$root/benchmarks/torch_ddp.py" "$model" "$ranks" | awk '{print $2}' >> "$work/p"
      t1=$(now)
      awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }' >> "$work/pw"
    done
    d=$(median < "$work/d") p=$(median < "$work/p")
    dw=$(median < "$work/dw") pw=$(median < "$work/pw")
    steps=$(( (60000 / ranks + 63) / 64 ))
    awk -v m="$model" -v n="$ranks" -v d="$d" -v p="$p" -v f="$flops" -v s="$steps" -v dw="$dw" -v pw="$pw" \
        -v p1="$peak1" -v pn="$peakN" -v c="$cores" -v ar="$ar_us" 'BEGIN {
      peak = (n == 1) ? pn : p1 * c / n          # GFLOP/s available to one rank
      floor = s * (f / (peak * 1e9) + (n > 1 ? ar * 1e-6 : 0))
      printf "%-8s %d rank(s): dtc %.3f s/epoch (%6.0f img/s, command %.2f s)  PyTorch DDP %.3f s (%6.0f img/s, command %.2f s)  dtc %.2fx faster (%.2fx the command); floor %.3f s, dtc at %.2fx of it\n",
             m, n, d, 60000 / d, dw, p, 60000 / p, pw, p / d, pw / dw, floor, d / floor }'
  done
done
