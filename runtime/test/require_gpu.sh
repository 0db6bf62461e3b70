#!/usr/bin/env bash
# DTC_REQUIRE_GPU=1 turns the skip of a CUDA test that finds no GPU into a
# failure (runtime/test/cuda_test_util.h; the GPU check runs the CUDA tests
# so). With a GPU the tests must pass with the variable and skip nothing;
# without one they must fail with the reason, and skip (exit 0) without it.
# usage: require_gpu.sh CUDA_TEST_BINARY
set -uo pipefail
bin=$1 out=$(mktemp)
trap 'rm -f "$out"' EXIT
filter=--gtest_filter=DeviceComms.*
if DTC_REQUIRE_GPU=1 "$bin" "$filter" > "$out" 2>&1; then
  if grep -q "^\[  SKIPPED \]" "$out"; then cat "$out"; echo "FAIL: skipped under DTC_REQUIRE_GPU=1"; exit 1; fi
  echo "PASS: a GPU is present and no test skipped"; exit 0
fi
grep -q "needs 1 CUDA device(s), found 0 .*(DTC_REQUIRE_GPU=1: a skip is a failure)" "$out" ||
  { cat "$out"; echo "FAIL: the failure does not give the reason"; exit 1; }
grep -m1 "a skip is a failure" "$out"
DTC_REQUIRE_GPU= "$bin" "$filter" > "$out" 2>&1 || { cat "$out"; echo "FAIL: without the variable the tests must skip"; exit 1; }
grep -q "^\[  SKIPPED \] 3 tests" "$out" || { cat "$out"; echo "FAIL: expected 3 skipped tests"; exit 1; }
echo "PASS: without a GPU, a failure under DTC_REQUIRE_GPU=1 and a skip without it"
