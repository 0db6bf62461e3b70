//===- parallel.h - Splitting memory-bound kernels over the --threads cores ===//
//
// OpenBLAS spreads the GEMMs over --threads cores, but the optimizer updates
// are single passes over every parameter and its state: memory-bound, and
// one core alone does not saturate the memory system (the seed MLP's SGD
// momentum update runs ~1.8x faster on 2 cores of the development machine).
// parallelFor splits such a loop into contiguous ranges, one per thread: the
// caller takes the first, helper threads the others. Helpers spin for a few
// microseconds after each job (the updates come in bursts, one per parameter)
// and then sleep, so that between bursts they leave the cores to OpenBLAS.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

namespace dtc::rt {

// Threads parallelFor uses, the caller included (1: run everything inline).
// Starts or stops helpers; call between kernels, from the thread that calls
// the kernels. With `pin`, and when the process may run on that many CPUs,
// the caller stays on its current CPU and each helper gets another one; pin
// only when no other process shares these CPUs (one rank per node, or a
// launcher that bound each rank to cores of its own).
void setKernelThreads(int threads, bool pin);
int kernelThreads();

// Calls fn(ctx, begin, end) over [0, n) split into at most kernelThreads()
// ranges of at least minPerThread elements, each begin a multiple of 16 (so
// that ranges do not share cache lines); returns when all have run.
void parallelFor(int64_t n, int64_t minPerThread, void (*fn)(void *, int64_t, int64_t),
                 void *ctx);

template <class F> void parallelFor(int64_t n, int64_t minPerThread, const F &f) {
  parallelFor(
      n, minPerThread,
      [](void *c, int64_t begin, int64_t end) { (*static_cast<const F *>(c))(begin, end); },
      const_cast<F *>(&f));
}

} // namespace dtc::rt
