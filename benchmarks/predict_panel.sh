#!/usr/bin/env bash
# The cost model on a fixed panel of eight GPT plans (issue 35), across the
# three hosts of predict_hosts.sh (network namespaces, links shaped to
# 1 Gbit/s, then 10 Gbit/s): each link calibrated, each plan compiled for
# that link's machine file and trained on it `rounds` times; the median
# measured step against the prediction. A second prediction from the same
# machine file without its "communication_beside" (the single factor
# `communication` for every collective, the model before issue 35's seventh
# session) shows what the by-length slowdown changes. Needs root; skips
# otherwise. About 7 minutes at the defaults on a 2-core host.
# usage: benchmarks/predict_panel.sh [rounds=3] [steps=40]   (after scripts/build.sh)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DTC_BUILD_DIR:-$root/build}
rounds=${1:-3} steps=${2:-40}
dtc=$build/bin/dtc
python=/usr/bin/python3
fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIP: $*"; exit 0; }
[ "$(id -u)" = 0 ] || skip "not root: network namespaces cannot be made"
command -v tc >/dev/null 2>&1 || skip "no tc (iproute2)"
work=$(mktemp -d)
. "$root/test/distributed/netns_hosts.sh"
trap 'cleanup; rm -rf "$work"' EXIT
# name, dtc options, micro-batches (the recipe's batch of 12 split so)
plans=("r12|--shard none --remat none|1" "r3x4|--shard none --remat selective|4"
  "s1n6|--shard optimizer --remat none|2" "s2b12|--shard gradients --remat blocks|1"
  "s2s6|--shard gradients --remat selective|2" "s2n3|--shard gradients --remat none|4"
  "s3b12|--shard parameters --remat blocks|1" "s3n6|--shard parameters --remat none|2")
model=$root/examples/gpt.dsl
batch=$(sed -n 's/^  batch = \([0-9]*\)$/\1/p' "$model")
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; 3 hosts x 1 rank x 1 thread; gpt, $rounds x $steps steps a plan"
"$dtc" "$model" -o "$work/probe" || fail "compile"
rates=(1gbit 10gbit)
# The predicted step of `dtc --report` for model $1, machine $2, options $3...
predicted() {
  local m=$1 machine=$2
  shift 2
  "$dtc" "$m" --ranks 3 --machine "$machine" "$@" --report -o "$work/unused" |
    sed -n 's/^predicted step ([^)]*): \([0-9.]*\) ms.*/\1/p'
}
for rate in "${rates[@]}"; do
  shape_links "$rate"
  hosts_run 3 300 "$work/probe" --calibrate "$work/machine-$rate.json" --threads 1 >"$work/cal-$rate.log" 2>&1 ||
    { cat "$work/cal-$rate.log"; fail "calibrating at $rate"; }
  echo "== $rate: $(grep '^calibrated' "$work/cal-$rate.log" | sed 's/; wrote.*//')"
  "$python" -c "import json, sys; d = json.load(open(sys.argv[1])); d['contention'].pop('communication_beside', None); json.dump(d, open(sys.argv[2], 'w'))" \
    "$work/machine-$rate.json" "$work/single-$rate.json" || fail "machine file at $rate"
  for spec in "${plans[@]}"; do
    IFS='|' read -r name opts micro <<<"$spec"
    sed "s/^  batch = .*/  batch = $((batch / micro))\n  accumulate = $micro/" "$model" >"$work/$name.dsl"
    # shellcheck disable=SC2086
    "$dtc" "$work/$name.dsl" --ranks 3 --machine "$work/machine-$rate.json" $opts -o "$work/$name-$rate" ||
      fail "compiling $name for $rate"
    # shellcheck disable=SC2086
    echo "$name $rate $(predicted "$work/$name.dsl" "$work/machine-$rate.json" $opts) $(predicted "$work/$name.dsl" "$work/single-$rate.json" $opts)" >>"$work/predicted"
    for round in $(seq "$rounds"); do
      hosts_run 3 300 "$work/$name-$rate" --max-steps "$steps" --eval off --threads 1 >"$work/run.log" 2>&1 ||
        { tail -5 "$work/run.log"; fail "$name on $rate"; }
      sed -n "s/^predicted vs measured: step [0-9.]* ms vs \([0-9.]*\) ms.*/$name $rate \1/p" "$work/run.log" >>"$work/measured"
    done
  done
done
"$python" - "$work/predicted" "$work/measured" <<'PY'
import statistics, sys
pred = {tuple(l.split()[:2]): [float(x) for x in l.split()[2:]] for l in open(sys.argv[1])}
meas = {}
for l in open(sys.argv[2]):
    n, r, t = l.split()
    meas.setdefault((n, r), []).append(float(t))
print(f"{'plan':6s} {'link':7s} {'measured':>9s} {'predicted':>10s} {'off':>7s} {'one factor':>11s} {'off':>7s}")
errs = ([], [])
for key, (kept, single) in pred.items():
    m = statistics.median(meas[key])
    offs = (100 * (kept / m - 1), 100 * (single / m - 1))
    for e, o in zip(errs, offs):
        e.append(abs(o))
    print(f"{key[0]:6s} {key[1]:7s} {m:7.1f} ms {kept:7.1f} ms {offs[0]:+6.1f}% {single:8.1f} ms {offs[1]:+6.1f}%")
print(f"mean |off| {statistics.mean(errs[0]):.1f}% (max {max(errs[0]):.1f}%); "
      f"one factor {statistics.mean(errs[1]):.1f}% (max {max(errs[1]):.1f}%)")
PY
