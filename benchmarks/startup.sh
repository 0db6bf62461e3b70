#!/usr/bin/env bash
# Time to the first step: the whole command `train --epochs 0 --eval off` (start,
# data loading, exit; no step) of the seed MLP on Fashion-MNIST, beside one
# epoch of it, in one run (rounds interleaved: off, store, map, epoch, ...):
#   off    the data decoded every run (--data-cache off: inflate, convert)
#   store  the first run with an empty cache (decode, then write the cache)
#   map    every later run (the decoded cache mapped)
# at 1 rank and at 2 ranks under mpirun (whose own start is printed too: an
# MPI program that only initializes, meets at a barrier and finalizes). Prints medians and each start as a fraction of the epoch.
# usage: benchmarks/startup.sh [rounds=5]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DTC_BUILD_DIR:-$root/build}
rounds=${1:-5}
data=/usr/share/datasets/fashion-mnist
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$root/benchmarks/lib.sh"
# wall FILE CMD...: appends the command's wall time to FILE.
wall() {
  local out=$1 t0 t1
  shift
  t0=$(now)
  "$@" > "$work/log"
  t1=$(now)
  awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }' >> "$out"
}

"$build/bin/dtc" "$root/examples/mlp.dsl" -o "$work/train"
printf '#include <mpi.h>\nint main(int c, char **v) { MPI_Init(&c, &v); MPI_Barrier(MPI_COMM_WORLD); MPI_Finalize(); return 0; }\n' > "$work/hello.c"
mpicc -O2 -o "$work/mpi_hello" "$work/hello.c"
"$work/train" --version | sed 's/^train:/dtc program:/'
echo "data: $data ($(du -shL "$data" | cut -f1) gzipped)"
for ranks in 1 2; do
  launch=()
  [ "$ranks" -eq 2 ] && launch=($mpirun -np 2)
  : > "$work/off"; : > "$work/store"; : > "$work/map"; : > "$work/epoch"; : > "$work/launcher"
  for r in $(seq "$rounds"); do
    wall "$work/off" "${launch[@]}" "$work/train" --epochs 0 --eval off --quiet --data-cache off
    rm -rf "$work/cache"
    wall "$work/store" "${launch[@]}" "$work/train" --epochs 0 --eval off --quiet --data-cache "$work/cache"
    wall "$work/map" "${launch[@]}" "$work/train" --epochs 0 --eval off --quiet --data-cache "$work/cache"
    "${launch[@]}" "$work/train" --epochs 1 --eval off --quiet --data-cache "$work/cache" > "$work/log"
    sed -n 's/.* time \([0-9.]*\)s.*/\1/p' "$work/log" | tail -1 >> "$work/epoch"
    [ "$ranks" -eq 2 ] && wall "$work/launcher" $mpirun -np 2 "$work/mpi_hello"
  done
  off=$(median < "$work/off") store=$(median < "$work/store") map=$(median < "$work/map")
  epoch=$(median < "$work/epoch")
  extra=""
  [ "$ranks" -eq 2 ] && extra=$(awk -v l="$(median < "$work/launcher")" 'BEGIN { printf "  (MPI alone: mpirun of an MPI_Init + MPI_Finalize program %.3f s)", l }')
  awk -v n="$ranks" -v off="$off" -v st="$store" -v m="$map" -v e="$epoch" -v x="$extra" 'BEGIN {
    printf "%d rank(s): start (--epochs 0) off %.3f s (%.0f%% of an epoch), store %.3f s, map %.3f s (%.0f%%); epoch %.3f s; map %.1fx faster than off%s\n",
           n, off, 100 * off / e, st, m, 100 * m / e, e, off / m, x }'
done
