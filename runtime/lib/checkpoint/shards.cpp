//===- shards.cpp - Sharded optimizer state, gathered and scattered -------===//
#include "checkpoint/shards.h"

#include "checkpoint/params.h"
#include "dtc/comm.h"

#include <cstring>
#include <utility>

namespace dtc::rt {

int64_t gatheredStateFloats(const ModelSpec &spec) {
  if (spec.shardStage <= 0)
    return 0;
  int64_t n = 0;
  for (int32_t b = 0; b < spec.numBuckets; ++b)
    n += int64_t(spec.numStates) * spec.buckets[b].count;
  return n;
}

namespace {
// The sharded bucket that holds parameter `param`, and the parameter's
// place in it; {-1, -1} if none.
std::pair<int32_t, int32_t> holderOf(const ModelSpec &spec, int32_t param) {
  for (int32_t b = 0; b < spec.numBuckets; ++b)
    for (int32_t i = 0; i < spec.buckets[b].numParams; ++i)
      if (spec.buckets[b].params[i] == param)
        return {b, i};
  return {-1, -1};
}
} // namespace

int64_t gatheredStateOffset(const ModelSpec &spec, int32_t param, int k) {
  const auto [holder, member] = holderOf(spec, param);
  if (spec.shardStage <= 0 || holder < 0)
    return -1;
  int64_t base = 0;
  for (int32_t b = 0; b < holder; ++b)
    base += int64_t(spec.numStates) * spec.buckets[b].count;
  const BucketSpec &bucket = spec.buckets[holder];
  return base + int64_t(k) * bucket.count + bucket.within[member];
}

std::vector<float> gatherShardedState(const ModelSpec &spec, Communicator &comm,
                                      const char *persistent) {
  std::vector<float> out(size_t(gatheredStateFloats(spec)));
  float *at = out.data();
  for (int32_t b = 0; b < spec.numBuckets; ++b) {
    const BucketSpec &bucket = spec.buckets[b];
    for (int k = 0; k < spec.numStates; ++k) {
      const char *shard =
          persistent + bucket.stateOffset + int64_t(k) * bucket.shard * int64_t(sizeof(float));
      comm.allgather(shard, at, bucket.shard * int64_t(sizeof(float)));
      at += bucket.count;
    }
  }
  return out;
}

void scatterShardedState(const ModelSpec &spec, int rank, const float *gathered,
                         char *persistent) {
  const float *at = gathered;
  for (int32_t b = 0; b < spec.numBuckets; ++b) {
    const BucketSpec &bucket = spec.buckets[b];
    for (int k = 0; k < spec.numStates; ++k) {
      std::memcpy(persistent + bucket.stateOffset +
                      int64_t(k) * bucket.shard * int64_t(sizeof(float)),
                  at + int64_t(rank) * bucket.shard, size_t(bucket.shard) * sizeof(float));
      at += bucket.count;
    }
  }
}

int64_t paramImageBytes(const ModelSpec &spec) {
  int64_t n = 0;
  for (int32_t b = 0; b < spec.numBuckets; ++b)
    n += spec.buckets[b].count * int64_t(sizeof(float));
  return n;
}

int64_t paramImageOffset(const ModelSpec &spec, int32_t param) {
  const int32_t holder = holderOf(spec, param).first;
  if (holder < 0)
    return -1;
  int64_t base = 0;
  for (int32_t b = 0; b < holder; ++b)
    base += spec.buckets[b].count * int64_t(sizeof(float));
  return base;
}

void initShardedParams(const ModelSpec &spec, uint64_t seed, int rank, char *persistent) {
  std::vector<float> whole;
  for (int32_t b = 0; b < spec.numBuckets; ++b) {
    const BucketSpec &bucket = spec.buckets[b];
    whole.assign(size_t(bucket.count), 0.0f); // the gaps and the padding: 0
    for (int32_t i = 0; i < bucket.numParams; ++i)
      initParam(spec, bucket.params[i], seed, whole.data() + bucket.within[i]);
    std::memcpy(persistent + bucket.paramOffset, whole.data() + int64_t(rank) * bucket.shard,
                size_t(bucket.shard) * sizeof(float));
  }
}

std::vector<char> gatherParamImage(const ModelSpec &spec, Communicator &comm,
                                   const char *persistent) {
  std::vector<char> image(size_t(paramImageBytes(spec)));
  char *at = image.data();
  for (int32_t b = 0; b < spec.numBuckets; ++b) {
    const BucketSpec &bucket = spec.buckets[b];
    comm.allgather(persistent + bucket.paramOffset, at, bucket.shard * int64_t(sizeof(float)));
    at += bucket.count * int64_t(sizeof(float));
  }
  return image;
}

void scatterParamImage(const ModelSpec &spec, int rank, const char *image, char *persistent) {
  const char *at = image;
  for (int32_t b = 0; b < spec.numBuckets; ++b) {
    const BucketSpec &bucket = spec.buckets[b];
    const int64_t shardBytes = bucket.shard * int64_t(sizeof(float));
    std::memcpy(persistent + bucket.paramOffset, at + int64_t(rank) * shardBytes,
                size_t(shardBytes));
    at += bucket.count * int64_t(sizeof(float));
  }
}

} // namespace dtc::rt
