//===- sampler.cpp - Epoch permutations, sharding and batch gathering ----===//
#include "data/sampler.h"

#include "support/error.h"
#include "support/rng.h"

#include <algorithm>
#include <cstring>
#include <numeric>

namespace dtc::rt {

void epochPermutation(uint64_t seed, int64_t epoch, int64_t n, int64_t *out) {
  std::iota(out, out + n, int64_t(0));
  Rng rng(mixSeed(mixSeed(seed, 0x5eed5f1eULL), static_cast<uint64_t>(epoch)));
  for (int64_t i = n - 1; i > 0; --i) // Fisher-Yates
    std::swap(out[i], out[rng.below(static_cast<uint64_t>(i + 1))]);
}

Sampler::Sampler(int64_t datasetSize, int64_t batch, uint64_t seed, bool shuffle,
                 int rank, int worldSize)
    : size_(datasetSize), batch_(batch), seed_(seed), shuffle_(shuffle), rank_(rank),
      worldSize_(worldSize) {
  if (batch < 1 || worldSize < 1 || rank < 0 || rank >= worldSize || datasetSize < 0)
    throw Error("invalid sampler configuration");
  perm_.resize(static_cast<size_t>(datasetSize));
  shard_.reserve(static_cast<size_t>(datasetSize / worldSize + 1));
  setEpoch(1);
}

void Sampler::setEpoch(int64_t epoch, int64_t start) {
  if (start < 0 || start > size_)
    throw Error("internal error: the epoch's start lies outside the data set");
  start_ = start;
  const int64_t W = worldSize_, step = W * batch_, left = size_ - start;
  const int64_t full = left / step, rest = left - full * step;
  const bool lastStep = rest >= W; // else every rank would not get a sample
  numSteps_ = full + (lastStep ? 1 : 0);
  used_ = start + (lastStep ? left : full * step);
  const int64_t mine = used_ - start > rank_ ? (used_ - start - rank_ + W - 1) / W : 0;
  shard_.resize(static_cast<size_t>(mine)); // within the reserved capacity
  if (shuffle_)
    epochPermutation(seed_, epoch, size_, perm_.data());
  else
    std::iota(perm_.begin(), perm_.end(), int64_t(0));
  for (size_t k = 0; k < shard_.size(); ++k)
    shard_[k] = perm_[size_t(start + rank_) + k * size_t(worldSize_)];
}

const int64_t *Sampler::batch(int64_t b, int64_t *count) const {
  // Every full step gives each rank exactly batch_ samples, so this rank's
  // share of step b starts at b * batch_ in its shard.
  const int64_t begin = b * batch_;
  *count = std::min(batch_, numSamples() - begin);
  return shard_.data() + begin;
}

int64_t Sampler::globalBatch(int64_t b) const {
  const int64_t step = int64_t(worldSize_) * batch_;
  return std::min(step, used_ - start_ - b * step);
}

int64_t Sampler::positionAfter(int64_t b) const {
  const int64_t step = int64_t(worldSize_) * batch_;
  return std::min(used_, start_ + (b + 1) * step);
}

float Sampler::gradSeed(int64_t b) const {
  int64_t n;
  batch(b, &n);
  return static_cast<float>(double(n) / double(globalBatch(b)));
}

BatchBuffer::BatchBuffer(int64_t capacity, const Dataset &like)
    : capacity_(capacity), features_(like.features), labelWidth_(like.labelWidth),
      labelKind_(like.labelKind), ids_(like.isText()),
      x_(static_cast<size_t>(capacity * like.features) * sizeof(float)),
      y_(static_cast<size_t>(capacity * like.labelWidth) *
         (like.labelKind == LabelKind::Class ? sizeof(int32_t) : sizeof(float))) {}

void gatherBatch(const Dataset &ds, const int64_t *idx, int64_t n, void *xOut, void *y,
                 uint64_t draw) {
  const int64_t features = ds.features, labelWidth = ds.labelWidth;
  if (ds.isText()) {
    const TokenText &t = ds.text;
    const auto *bytes = reinterpret_cast<const unsigned char *>(t.bytes->data());
    int32_t *ids = static_cast<int32_t *>(xOut), *next = static_cast<int32_t *>(y);
    for (int64_t i = 0; i < n; ++i) {
      const unsigned char *w = bytes + t.windowStart(idx[i], draw);
      for (int64_t k = 0; k < features; ++k) {
        ids[i * features + k] = w[k];
        next[i * features + k] = w[k + 1];
      }
    }
    return;
  }
  float *x = static_cast<float *>(xOut);
  const size_t rowBytes = static_cast<size_t>(features) * sizeof(float);
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(x + i * features, ds.x.data() + idx[i] * features, rowBytes);
  if (ds.labelKind == LabelKind::Class) {
    int32_t *yc = static_cast<int32_t *>(y);
    for (int64_t i = 0; i < n; ++i)
      yc[i] = ds.yClass[static_cast<size_t>(idx[i])];
  } else {
    float *yv = static_cast<float *>(y);
    const size_t labelBytes = static_cast<size_t>(labelWidth) * sizeof(float);
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(yv + i * labelWidth, ds.yValue.data() + idx[i] * labelWidth, labelBytes);
  }
}

void BatchBuffer::gather(const Dataset &ds, const int64_t *idx, int64_t n, uint64_t draw) {
  if (n > capacity_ || ds.features != features_ || ds.labelKind != labelKind_ ||
      ds.labelWidth != labelWidth_ || ds.isText() != ids_)
    throw Error("internal error: batch does not fit its buffer");
  gatherBatch(ds, idx, n, x_.data(), y_.data(), draw);
  size_ = n;
}

void BatchBuffer::bind(StepArgs &args) const {
  args.batch = size_;
  args.x = ids_ ? nullptr : x_.as<float>();
  args.xIds = ids_ ? x_.as<int32_t>() : nullptr;
  args.yClass = labelKind_ == LabelKind::Class ? y_.as<int32_t>() : nullptr;
  args.yValue = labelKind_ == LabelKind::Value ? y_.as<float>() : nullptr;
}

} // namespace dtc::rt
