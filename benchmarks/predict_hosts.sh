#!/usr/bin/env bash
# The cost model across hosts whose links are slow (issue 35): three network
# namespaces joined by a bridge stand for three hosts (test/distributed/
# netns_hosts.sh, one rank each, TCP between them), their links shaped by tc
# (tbf) to 1 Gbit/s, then 10 Gbit/s. For each: train --calibrate measures
# the 3 ranks over that link; dtc plans the GPT for 3 ranks within a budget
# a rank that replicated training does not fit (--memory-per-rank) on that
# machine file and prints the plan it chose; the chosen program trains on
# that link and prints its measurement next to the prediction. Then each
# link's plan is also run on the other link, to show what choosing for the
# wrong link costs (measured). Needs root (network namespaces); skips
# otherwise. A third argument plans another model (the held-out check:
# examples/cnn.dsl, llama.dsl, mlp.dsl, with a budget that every plan fits,
# 4G, to plan for speed alone).
# usage: benchmarks/predict_hosts.sh [steps=60] [budget=60M] [model=examples/gpt.dsl]   (after scripts/build.sh)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DTC_BUILD_DIR:-$root/build}
steps=${1:-60} budget=${2:-60M} model=${3:-$root/examples/gpt.dsl}
dtc=$build/bin/dtc
fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIP: $*"; exit 0; }
[ "$(id -u)" = 0 ] || skip "not root: network namespaces cannot be made"
command -v tc >/dev/null 2>&1 || skip "no tc (iproute2)"
work=$(mktemp -d)
. "$root/test/distributed/netns_hosts.sh"
trap 'cleanup; rm -rf "$work"' EXIT
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; 3 hosts x 1 rank x 1 thread; $(basename "$model" .dsl), $steps steps; budget $budget a rank"
"$dtc" "$root/examples/gpt.dsl" -o "$work/probe" || fail "compile"
rates=(1gbit 10gbit)
for rate in "${rates[@]}"; do
  shape_links "$rate"
  hosts_run 3 300 "$work/probe" --calibrate "$work/machine-$rate.json" --threads 1 >"$work/cal-$rate.log" 2>&1 ||
    { cat "$work/cal-$rate.log"; fail "calibrating at $rate"; }
  echo "== $rate: $(grep '^calibrated' "$work/cal-$rate.log" | sed 's/; wrote.*//')"
  "$dtc" "$model" --ranks 3 --machine "$work/machine-$rate.json" \
    --memory-per-rank "$budget" --report -o "$work/train-$rate" >"$work/report-$rate" ||
    fail "planning for $rate"
  sed -n '/^plans for/,/^chosen/p' "$work/report-$rate" | grep -E '^plans|<- chosen|^chosen' | sed 's/(machine: [^;]*; /(/'
done
echo "== each plan trained on each link (predicted for its own link; measured; the largest rank's peak)"
printf '%-8s %-8s  %s\n' plan link "the program's line"
for link in "${rates[@]}"; do
  shape_links "$link"
  for plan in "${rates[@]}"; do
    hosts_run 3 300 "$work/train-$plan" --max-steps "$steps" --eval off --threads 1 >"$work/run.log" 2>&1 ||
      { tail -5 "$work/run.log"; fail "plan $plan on $link"; }
    printf '%-8s %-8s  %s\n' "$plan" "$link" "$(grep -E '^(predicted vs measured|measured)' "$work/run.log")"
  done
done
