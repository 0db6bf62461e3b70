#!/usr/bin/env bash
# The main job: build dtc, compile the example model (the PyTorch DDP
# example's MLP) and train it on Fashion-MNIST. Extra arguments go to train,
# e.g. `scripts/train-example.sh --epochs 10`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DTC_BUILD_DIR:-$root/build}
"$root/scripts/build.sh"
"$build/bin/dtc" "$root/examples/mlp.dsl" -o "$build/train"
"$build/train" "$@"
