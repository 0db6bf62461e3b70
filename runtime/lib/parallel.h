//===- parallel.h - Splitting kernels over the --threads cores ------------===//
//
// The oneDNN GEMM engine (gemm/onednn.cpp) splits large products over the
// --threads cores with parallelFor, and so do the optimizer updates: single
// passes over every parameter and its state, memory-bound, where one core
// alone does not saturate the memory system (the seed MLP's SGD momentum
// update runs ~1.8x faster on 2 cores of the development machine).
// parallelFor splits such a loop into contiguous ranges: the caller and
// helper threads claim them. Helpers spin for a few microseconds after each
// job (the work comes in bursts: the GEMMs of a step, one update per
// parameter) and then sleep, so that between bursts they leave the cores to
// the compute thread (and to OpenBLAS's threads, with that engine).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

namespace dtc::rt {

// Threads parallelFor uses, the caller included (1: run everything inline).
// Starts or stops helpers; call between kernels, from the thread that calls
// the kernels. With `pin`, and when the process may run on more CPUs than
// there are helpers, each helper is pinned to a CPU other than the caller's
// current one (the caller is not pinned); pin only when no other rank of
// the job runs on the node.
void setKernelThreads(int threads, bool pin);
int kernelThreads();

// Calls fn(ctx, begin, end) over [0, n), split (when n is at least
// 2 * minPerThread and there are helpers) into chunks of at least
// minPerThread elements that the threads claim, each begin a multiple of 16
// (so that chunks do not share cache lines); returns when all have run.
void parallelFor(int64_t n, int64_t minPerThread, void (*fn)(void *, int64_t, int64_t),
                 void *ctx);

template <class F> void parallelFor(int64_t n, int64_t minPerThread, const F &f) {
  parallelFor(
      n, minPerThread,
      [](void *c, int64_t begin, int64_t end) { (*static_cast<const F *>(c))(begin, end); },
      const_cast<F *>(&f));
}

// Rows [0, rows) in fixed blocks of blockRows, fn(block, firstRow, endRow)
// per block, the blocks split over the threads when there is enough work
// (rows of `width` elements, about 16K elements per thread at least): the
// blocks do not depend on the thread count, so per-block partial sums added
// in block order give the same bits at any --threads.
template <class F>
void parallelForRowBlocks(int64_t rows, int64_t blockRows, int64_t width, const F &fn) {
  const int64_t blocks = (rows + blockRows - 1) / blockRows;
  const int64_t work = blockRows * (width > 1 ? width : 1);
  const int64_t minBlocks = work >= 16384 ? 1 : 16384 / work;
  parallelFor(blocks, minBlocks, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b)
      fn(b, b * blockRows, (b + 1) * blockRows < rows ? (b + 1) * blockRows : rows);
  });
}

} // namespace dtc::rt
