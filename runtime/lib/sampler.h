//===- sampler.h - Epoch permutations, sharding and batch gathering ------===//
//
// Sampler yields, per epoch, the batches of sample indices one rank trains
// on. Epoch e's order is a Fisher-Yates permutation drawn from (seed, e)
// (identity with shuffle off). With worldSize W > 1, rank r takes positions
// r, r+W, r+2W, ... of that same permutation (N/W samples each, the N % W
// tail dropped so all ranks run the same number of steps); the union of the
// ranks' batch b is then what a single process with batch B*W sees.
// BatchBuffer copies one batch into buffers allocated once.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "buffer.h"
#include "data.h"
#include "dtc/runtime.h"

#include <cstdint>
#include <vector>

namespace dtc::rt {

// out[0..n) = the permutation of 0..n-1 for (seed, epoch).
void epochPermutation(uint64_t seed, int64_t epoch, int64_t n, int64_t *out);

class Sampler {
public:
  Sampler(int64_t datasetSize, int64_t batch, uint64_t seed, bool shuffle,
          int rank = 0, int worldSize = 1);

  void setEpoch(int64_t epoch); // 1-based; reorders without allocating
  int64_t numSamples() const { return static_cast<int64_t>(shard_.size()); }
  int64_t numBatches() const { return (numSamples() + batch_ - 1) / batch_; }
  // Indices of batch b (0-based) of this rank; *count gets its size.
  const int64_t *batch(int64_t b, int64_t *count) const;

private:
  int64_t batch_;
  uint64_t seed_;
  bool shuffle_;
  int rank_, worldSize_;
  std::vector<int64_t> perm_, shard_;
};

class BatchBuffer {
public:
  BatchBuffer(int64_t capacity, const Dataset &like);

  // Copies samples idx[0..n) of ds (n <= capacity).
  void gather(const Dataset &ds, const int64_t *idx, int64_t n);
  // Points args.batch/x/yClass/yValue at the gathered batch.
  void bind(StepArgs &args) const;
  int64_t size() const { return size_; }

private:
  int64_t capacity_, features_, labelWidth_, size_ = 0;
  LabelKind labelKind_;
  AlignedBuffer x_, y_;
};

} // namespace dtc::rt
