//===- kernels.h - Non-elementwise kernels called by generated CPU code ---===//
//
// Elementwise work is generated as fused loops by dtc; everything else the
// generated step calls lives here. All tensors are dense, row-major float32
// (labels int32). An "axis view" [outer, n, inner] describes a reduction over
// the middle dimension of a tensor reshaped to three dimensions.
//
// Every kernel takes the step's context first (rt::HostContext, runtime.h);
// after it, the parameters are those of its CUDA twin in dtc/cuda.h (both
// lists are generated from the same op), so that generated code calls both
// the same way, differing in the namespace and the type of the context only.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "dtc/runtime.h"
#include <cstdint>

namespace dtc::kern {

// A generated elementwise kernel's loop: fn(ctx, lo, hi) over [lo, hi) of
// its `units` units (elements, or rows of unitElements), the range split
// over the --threads cores when it is large enough (32K elements a thread
// at least); each element is computed once, as in one pass: the same bits
// at any --threads. The template takes the call site's lambda.
void forRanges(const rt::HostContext &c, int64_t units, int64_t unitElements,
               void (*fn)(void *, int64_t, int64_t), void *ctx);
template <class F>
void forRanges(const rt::HostContext &c, int64_t units, int64_t unitElements, const F &f) {
  forRanges(
      c, units, unitElements,
      [](void *p, int64_t lo, int64_t hi) { (*static_cast<const F *>(p))(lo, hi); },
      const_cast<F *>(&f));
}

// The entry points that generated steps call, declared once: generated
// from the dtcrt ops (dialects/dtcrt/DtcrtOps.td, dtc-tblgen
// -gen-runtime-abi), with dtc/cuda.h's twins. Each op's summary and
// description say what its kernel computes.
#define DTC_ABI_CONTEXT rt::HostContext
#define DTC_ABI_CPU 1
#include "dtc/kernels_abi.inc"
#undef DTC_ABI_CPU
#undef DTC_ABI_CONTEXT

} // namespace dtc::kern
