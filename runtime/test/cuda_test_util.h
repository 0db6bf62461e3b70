//===- cuda_test_util.h - When a CUDA test may skip -----------------------===//
//
// The runtime.cuda tests need GPUs; without them they skip, with the reason,
// so that the suite passes on machines without one. On a machine that is
// meant to have them (the GPU check, scripts/gpu-check.sh) a skip would
// read as a pass where the driver or the device is broken: there
// DTC_REQUIRE_GPU=N (N >= 1, the GPUs the machine should have) turns the
// skip of every test that needs at most N GPUs into a failure that gives
// the same reason. Tests that need more than N GPUs still skip.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace dtc::test {

/// The CUDA devices cudaGetDeviceCount finds (0 on an error, with the
/// error's text in *why; "0 devices" in *why when it finds none).
inline int cudaDeviceCount(std::string *why = nullptr) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (why)
      *why = cudaGetErrorString(e);
    return 0;
  }
  if (why && n == 0)
    *why = "0 devices";
  return n;
}

/// DTC_REQUIRE_GPU as a count (0 when unset, empty or not a positive
/// integer).
inline int requiredGpus() {
  const char *v = std::getenv("DTC_REQUIRE_GPU");
  if (!v || !*v)
    return 0;
  char *end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return *end == '\0' && n > 0 ? int(n) : 0;
}

/// Empty when at least `need` devices are there, else why not.
inline std::string gpuShortfall(int need) {
  std::string why;
  const int have = cudaDeviceCount(&why);
  if (have >= need)
    return "";
  return "needs " + std::to_string(need) + " CUDA device(s), found " + std::to_string(have) +
         (why.empty() ? "" : " (" + why + ")");
}

} // namespace dtc::test

/// Skips the current test (or fixture SetUp) without `n` GPUs; fails it
/// instead where DTC_REQUIRE_GPU says the machine has at least `n`.
#define DTC_NEED_GPUS(n)                                                       \
  do {                                                                         \
    const std::string dtcWhy_ = ::dtc::test::gpuShortfall(n);                  \
    if (!dtcWhy_.empty()) {                                                    \
      if (::dtc::test::requiredGpus() >= (n))                                  \
        GTEST_FAIL() << dtcWhy_ << " (DTC_REQUIRE_GPU="                        \
                     << ::dtc::test::requiredGpus() << ": a skip is a failure)"; \
      GTEST_SKIP() << dtcWhy_;                                                 \
    }                                                                          \
  } while (0)
