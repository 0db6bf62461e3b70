#!/usr/bin/env bash
# Compiles a model with dtc and runs its finite-difference gradient check.
# usage: run.sh DTC MODEL.dsl WORKDIR [extra train options...]
# DTC_FLAGS in the environment: extra dtc options (--layout=channels-last).
set -euo pipefail
dtc=$1 model=$2 work=$3
shift 3
mkdir -p "$work"
exe="$work/$(basename "$model" .dsl)-gradcheck"
# shellcheck disable=SC2086 # DTC_FLAGS is a list of options
"$dtc" ${DTC_FLAGS:-} "$model" -o "$exe"
"$exe" --gradcheck --threads 1 "$@"
