#!/usr/bin/env bash
# The main job: build dtc, compile the example model (the PyTorch DDP
# example's MLP) and train it on Fashion-MNIST with 2 ranks under mpirun
# (gradients averaged by the compiled all-reduce plan). Extra arguments go to
# train, e.g. `scripts/train-example.sh --epochs 10`; DTC_RANKS=1 for one.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DTC_BUILD_DIR:-$root/build}
ranks=${DTC_RANKS:-2}
"$root/scripts/build.sh"
"$build/bin/dtc" "$root/examples/mlp.dsl" -o "$build/train"
if [ "$ranks" -eq 1 ]; then
  exec "$build/train" "$@"
fi
root_flag=()
[ "$(id -u)" -eq 0 ] && root_flag=(--allow-run-as-root)
exec mpirun "${root_flag[@]}" -np "$ranks" "$build/train" "$@"
