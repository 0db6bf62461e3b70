//===- cuda_util.h - libdtcrt_cuda's internal helpers ---------------------===//
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace dtc::cuda::detail {

// x[0..n) *= factor on `stream` (the communicators' gradient scaling).
void scale(cudaStream_t stream, float *x, int64_t n, float factor);

} // namespace dtc::cuda::detail

namespace dtc::rt {

// "what: <CUDA's message>" as an Error unless e is cudaSuccess.
void cudaCheck(cudaError_t e, const char *what);
std::string cudaMessage(cudaError_t e);

} // namespace dtc::rt
