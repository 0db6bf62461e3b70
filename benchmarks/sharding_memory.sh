#!/usr/bin/env bash
# Per-rank memory of examples/gpt_large.dsl (302 M parameters) under each
# sharding stage at 1, 2 and 4 ranks, measured and reported side by side
# (issue 34's table in the README): for each (stage, ranks) the program is
# compiled (--shard=STAGE --ranks N; replicated once), trained for `steps`
# steps (default 2: the first step touches every buffer, the second the
# optimizer state as written), and each rank's peak resident set measured by
# the OS (/usr/bin/time's maximum RSS); beside it, what `dtc --report`
# plans for a rank (persistent block + arena, the line the program prints at
# start). The measured figure also holds the process (about 31 MB: the
# runtime, MPI, the data) and MPI's temporaries (up to a bucket). Replicated
# at 4 ranks needs about 19 GiB of this machine's 24.
# usage: benchmarks/sharding_memory.sh [steps=2] [ranks="1 2 4"]   (after scripts/build.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DTC_BUILD_DIR:-$root/build}
steps=${1:-2}
rank_counts=${2:-1 2 4}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$root/benchmarks/lib.sh"
model=$root/examples/gpt_large.dsl
mib() { echo $(( $1 / 1048576 )); }
alloc() { sed -n 's/^per-rank allocation (batch [0-9]*): .* = \([0-9]*\) bytes$/\1/p' "$1"; }

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; $(free -g | awk '/^Mem/ {print $2}') GiB"
declare -A measured reported
for stage in none optimizer gradients parameters; do
  for n in $rank_counts; do
    exe=$work/$stage-$n
    if [ $stage = none ]; then # (one program for every world size)
      exe=$work/none
      [ -e "$exe" ] || "$build/bin/dtc" "$model" --shard=none --report -o "$exe" >"$exe.report"
    else
      "$build/bin/dtc" "$model" --shard=$stage --ranks "$n" --report -o "$exe" >"$exe.report"
    fi
    reported[$stage,$n]=$(alloc "$exe.report")
    rm -f "$exe".rss.*
    if $mpirun -np "$n" sh -c 'exec /usr/bin/time -f "maxrss %M" -o "$0.rss.$OMPI_COMM_WORLD_RANK" "$0" "$@"' \
      "$exe" --max-steps "$steps" --eval off --threads 1 --progress off --quiet >"$exe.log" 2>&1; then
      peak=0
      for f in "$exe".rss.*; do
        kb=$(sed -n 's/^maxrss \([0-9]*\)$/\1/p' "$f")
        [ "$kb" -gt "$peak" ] && peak=$kb
      done
      measured[$stage,$n]=$((peak * 1024))
    else
      measured[$stage,$n]=failed
      tail -3 "$exe.log"
    fi
    echo "  $stage at $n ranks: measured ${measured[$stage,$n]}, reported ${reported[$stage,$n]} bytes"
  done
done

echo
echo "per-rank memory, MiB: the largest rank's peak RSS measured / dtc --report's allocation ($steps steps, batch of the recipe)"
printf '| stage |'; for n in $rank_counts; do printf ' %s rank%s |' "$n" "$([ "$n" = 1 ] || echo s)"; done; echo
printf '| --- |'; for n in $rank_counts; do printf ' --- |'; done; echo
for stage in none optimizer gradients parameters; do
  case $stage in none) label=replicated ;; optimizer) label="1 (optimizer)" ;;
    gradients) label="2 (gradients)" ;; parameters) label="3 (parameters)" ;; esac
  printf '| %s |' "$label"
  for n in $rank_counts; do
    m=${measured[$stage,$n]}
    [ "$m" = failed ] && m=failed || m=$(mib "$m")
    printf ' %s / %s |' "$m" "$(mib "${reported[$stage,$n]}")"
  done
  echo
done
