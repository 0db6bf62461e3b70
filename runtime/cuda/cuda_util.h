//===- cuda_util.h - libdtcrt_cuda's internal helpers ---------------------===//
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace dtc::rt {

// "what: <CUDA's message>" as an Error unless e is cudaSuccess.
void cudaCheck(cudaError_t e, const char *what);
std::string cudaMessage(cudaError_t e);

// Whether e is a kernel's fault while running (sticky: every later call of
// the context returns it), not an error of the call that returned it.
bool isKernelFault(cudaError_t e);
// The message of error e returned right after launching `kernel` (blocking:
// CUDA_LAUNCH_BLOCKING=1, so that a fault is that kernel's own).
std::string launchFailure(const char *kernel, cudaError_t e, bool blocking);

// A class label or embedding id outside its range that a kernel met since
// the last call (kernels/kernels.cu): the CPU kernel's message for it
// (support/error.h), or "" if none. Reads (and resets) the record on
// `stream`, the kernels' stream, and waits for it: call it after the steps
// are done.
std::string takeRangeFault(cudaStream_t stream);

} // namespace dtc::rt
