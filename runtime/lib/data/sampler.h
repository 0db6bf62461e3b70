//===- sampler.h - Epoch permutations, sharding and batch gathering ------===//
//
// Sampler yields, per epoch, the batches of sample indices one rank trains
// on. Epoch e's order is a Fisher-Yates permutation drawn from (seed, e)
// (identity with shuffle off), the same on every rank. With W ranks and a
// per-rank batch b, step k's global batch is positions [k*W*b, min((k+1)*W*b,
// N)) of the permutation and rank r takes the positions congruent to r mod W
// within it, so the ranks' step k together is exactly the step k of one
// process with batch W*b. Every rank runs the same ceil(N / (W*b)) steps; a
// last step with R < W samples left (some rank would get none) is dropped on
// all ranks. Rank r weighs its gradient (the mean over its n_r samples) by
// gradSeed = n_r / R, its share of the step's R samples, so that the sum over
// ranks is the mean over the R samples: 1 / W on full steps, and exact in a
// last step with W <= R < W*b samples.
// An epoch may start at a position p > 0 of its order (a resumed run): the
// steps then cover positions [p, N) exactly as above, with the ranks taking
// the positions congruent to r mod W after p; resumed with the number of
// ranks it stopped with, the steps are those the run would have taken.
// BatchBuffer copies one batch into buffers allocated once.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "support/buffer.h"
#include "data/data.h"
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

  // 1-based; reorders without allocating. start: the position in the
  // epoch's order of its first step (samples before it were trained on).
  void setEpoch(int64_t epoch, int64_t start = 0);
  // Steps per epoch, the same on every rank.
  int64_t numBatches() const { return numSteps_; }
  // Samples this rank trains on per epoch.
  int64_t numSamples() const { return static_cast<int64_t>(shard_.size()); }
  // Samples of the last step that no rank trains on (fewer than W left).
  int64_t droppedSamples() const { return size_ - used_; }
  // Indices of this rank's share of step b (0-based); *count gets its size
  // (at least 1).
  const int64_t *batch(int64_t b, int64_t *count) const;
  // Samples of step b over all ranks.
  int64_t globalBatch(int64_t b) const;
  // The position in the epoch's order after step b (the samples of the
  // epoch trained on once it is done, dropped ones excluded).
  int64_t positionAfter(int64_t b) const;
  // This rank's weight in the gradient sum of step b (the loss gradient its
  // backward starts from): count / globalBatch(b).
  float gradSeed(int64_t b) const;

private:
  int64_t size_, batch_;
  uint64_t seed_;
  bool shuffle_;
  int rank_, worldSize_;
  int64_t start_ = 0, used_ = 0, numSteps_ = 0;
  std::vector<int64_t> perm_, shard_;
};

// Copies samples idx[0..n) of ds: features to x [n, ds.features] (float;
// int32 token ids for text), labels to y (int32 [n, ds.labelWidth] for
// class labels, float [n, ds.labelWidth] for values). draw: the epoch's
// random windows of a text (TokenText::windowStart; 0: consecutive).
void gatherBatch(const Dataset &ds, const int64_t *idx, int64_t n, void *x, void *y,
                 uint64_t draw = 0);

class BatchBuffer {
public:
  BatchBuffer(int64_t capacity, const Dataset &like);

  // Copies samples idx[0..n) of ds (n <= capacity; draw: gatherBatch's).
  void gather(const Dataset &ds, const int64_t *idx, int64_t n, uint64_t draw = 0);
  // Points args.batch/x (or xIds)/yClass/yValue at the gathered batch.
  void bind(StepArgs &args) const;
  int64_t size() const { return size_; }

private:
  int64_t capacity_, features_, labelWidth_, size_ = 0;
  LabelKind labelKind_;
  bool ids_;
  AlignedBuffer x_, y_;
};

} // namespace dtc::rt
