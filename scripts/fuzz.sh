#!/usr/bin/env bash
# A fuzzing campaign: builds the libFuzzer harnesses (scripts/build.sh
# --sanitize: clang-22, ASan + UBSan) and runs each for SECONDS (default
# 600) on both cores in turn, keeping the corpus in build-asan/test/fuzz/corpus.
# A crash, a sanitizer report, a timeout (10 s per input) or an input that
# needs more than 2 GB stops that harness and leaves the input in
# build-asan/test/fuzz/crashes/; copy it into test/fuzz/regressions/<harness>/
# with the fix, so that ctest runs it from then on.
# usage: fuzz.sh [SECONDS] [HARNESS...]   (harnesses: dsl safetensors idx csv options)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-600}
shift || true
harnesses=${*:-dsl safetensors idx csv options}
"$root/scripts/build.sh" --sanitize
build=${DTC_ASAN_BUILD_DIR:-$root/build-asan}
fuzz=$build/test/fuzz
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
cd "$fuzz" # libFuzzer's -jobs write fuzz-N.log here
for h in $harnesses; do
  case $h in
    dsl) seeds="$root/examples $root/test/Frontend $root/test/gradcheck $root/test/Train/Inputs" ;;
    *) seeds=$root/test/fuzz/seeds/$h ;;
  esac
  mkdir -p "$fuzz/corpus/$h" "$fuzz/crashes"
  echo "== $h: $seconds s"
  # shellcheck disable=SC2086
  if ! "$fuzz/fuzz_$h" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
      -jobs=2 -workers=2 -print_final_stats=1 -artifact_prefix="$fuzz/crashes/$h-" \
      "$fuzz/corpus/$h" $seeds > "$fuzz/$h.log" 2>&1; then
    echo "FAIL  $h: see $fuzz/$h.log and $fuzz/crashes/"
    status=1
  fi
  grep -h -E "stat::number_of_executed_units|Done [0-9]+ runs|ERROR" "$fuzz/$h.log" "$fuzz"/fuzz-*.log 2>/dev/null | tail -3 || true
  rm -f "$fuzz"/fuzz-*.log
done
ls "$fuzz/crashes" 2>/dev/null | head
exit $status
