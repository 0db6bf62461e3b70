//===- parallel.h - Splitting kernels over the --threads cores ------------===//
//
// The oneDNN GEMM engine (gemm/onednn.cpp) splits large products over the
// --threads cores with parallelFor, and so do the optimizer updates: single
// passes over every parameter and its state, memory-bound, where one core
// alone does not saturate the memory system (the seed MLP's SGD momentum
// update runs ~1.8x faster on 2 cores of the development machine).
// parallelFor splits such a loop into contiguous ranges: the caller and
// helper threads claim them. Helpers poll for the next job for a while
// after each one (setHelperSpin) and then sleep, so that between bursts
// (the steps) they leave the cores to other threads. A sleeping helper
// wakes late: tens to hundreds of microseconds on the development
// machine's virtual CPUs, by when the caller has claimed every chunk of a
// GEMM itself. 300 us (the default) covers the gaps between the split
// kernels of a step, the single-threaded kernels between two GEMMs (the
// GPT example on 1 rank x 2 threads: 15-20% more tokens/s than with 20 us,
// in six of seven interleaved pairs of runs); the OpenBLAS engine, whose
// own threads want the cores between dtc's jobs, sets 20 us.
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

// How long helpers poll for the next job before they sleep (the top).
constexpr int kDefaultHelperSpinMicros = 300;
void setHelperSpin(int microseconds);

// Calls fn(ctx, begin, end) over [0, n), split (when n is at least
// 2 * minPerThread and there are helpers) into chunks of at least
// minPerThread elements that the threads claim, each begin a multiple of 16
// where chunks are 16 or more (so that chunks of floats do not share cache
// lines); returns when all have run.
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
