//===- cuda_util.h - libdtcrt_cuda's internal helpers ---------------------===//
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace dtc::rt {

// "what: <CUDA's message>" as an Error unless e is cudaSuccess.
void cudaCheck(cudaError_t e, const char *what);
std::string cudaMessage(cudaError_t e);

} // namespace dtc::rt
