#!/usr/bin/env bash
# Builds dtc and runs every test: lit/FileCheck (dialect, passes, frontend,
# codegen), runtime unit tests, gradient checks, end-to-end training, resume
# and preemption, launchers, fuzz regressions. Then builds everything again
# with clang-22 under AddressSanitizer and UndefinedBehaviorSanitizer
# (scripts/build.sh --sanitize) and runs the whole suite there too, the fuzz
# harnesses fuzzing for DTC_FUZZ_SECONDS (20) each. DTC_SANITIZE=off skips
# the second pass (the first still runs every test).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DTC_BUILD_DIR:-$root/build}
"$root/scripts/build.sh"
(cd "$build" && ctest --output-on-failure -j "${DTC_JOBS:-2}")
if [ "${DTC_SANITIZE:-on}" != off ]; then
  echo "== the suite again under ASan + UBSan"
  "$root/scripts/build.sh" --sanitize
  # Any UBSan report ends the program; leaks are checked by the fuzz
  # harnesses (their own ASAN_OPTIONS), not in MPI programs, whose library
  # keeps its allocations to the end.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=0}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  (cd "${DTC_ASAN_BUILD_DIR:-$root/build-asan}" && ctest --output-on-failure -j "${DTC_JOBS:-2}")
  # The generated programs do not depend on the compiler that built dtc
  # (GCC here, clang-22 there): the same IR and source for every example,
  # so ranks built by either agree on the program's fingerprint.
  for ex in "$root"/examples/*.dsl; do
    for target in cpu cuda; do
      if ! cmp -s <("$build/bin/dtc" "$ex" --target=$target --emit=cpp) \
                  <("${DTC_ASAN_BUILD_DIR:-$root/build-asan}/bin/dtc" "$ex" --target=$target --emit=cpp); then
        echo "test.sh: $ex (--target=$target) compiles to other source with the clang-built dtc" >&2
        exit 1
      fi
    done
  done
  echo "== the generated source is the same from the GCC and the clang-built dtc"
fi
