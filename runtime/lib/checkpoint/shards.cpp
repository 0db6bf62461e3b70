//===- shards.cpp - Sharded optimizer state, gathered and scattered -------===//
#include "checkpoint/shards.h"

#include "checkpoint/params.h"
#include "dtc/comm.h"

#include <algorithm>
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

namespace {
// The largest bucket's floats: the scratch of a rank that gathers or
// receives a bucket at a time.
int64_t largestBucket(const ModelSpec &spec) {
  int64_t n = 0;
  for (int32_t b = 0; b < spec.numBuckets; ++b)
    n = std::max(n, spec.buckets[b].count);
  return n;
}

// Calls f(bucket, run) for each run of a bucket's `count` floats in a
// gathered layout (`runs` a bucket: its state buffers, or its parameters),
// `whole` pointing at rank 0's copy of that run and `scratch` elsewhere.
// Rank 0 (root) moves the runs through `whole`; the others through one
// bucket's scratch.
template <typename F>
void eachRun(const ModelSpec &spec, int runs, bool root, float *whole, F f) {
  std::vector<float> scratch(root ? 0 : size_t(largestBucket(spec)));
  float *at = whole;
  for (int32_t b = 0; b < spec.numBuckets; ++b)
    for (int k = 0; k < runs; ++k) {
      const BucketSpec &bucket = spec.buckets[b];
      f(bucket, k, root ? at : scratch.data());
      if (root)
        at += bucket.count;
    }
}

// This rank's shard of the bucket's state buffer k.
template <typename Bytes> Bytes stateShard(const BucketSpec &bucket, int k, Bytes persistent) {
  return persistent + bucket.stateOffset + int64_t(k) * bucket.shard * int64_t(sizeof(float));
}
} // namespace

std::vector<float> gatherShardedState(const ModelSpec &spec, Communicator &comm,
                                      const char *persistent) {
  const bool root = comm.rank() == 0;
  std::vector<float> out(root ? size_t(gatheredStateFloats(spec)) : 0);
  eachRun(spec, spec.numStates, root, out.data(),
          [&](const BucketSpec &bucket, int k, float *run) {
            comm.allgather(stateShard(bucket, k, persistent), run,
                           bucket.shard * int64_t(sizeof(float)));
          });
  return out;
}

void scatterShardedState(const ModelSpec &spec, Communicator &comm, const float *gathered,
                         char *persistent) {
  const bool root = comm.rank() == 0;
  eachRun(spec, spec.numStates, root, const_cast<float *>(gathered),
          [&](const BucketSpec &bucket, int k, float *run) {
            if (comm.size() > 1)
              comm.broadcast(run, bucket.count * int64_t(sizeof(float)), 0);
            std::memcpy(stateShard(bucket, k, persistent),
                        run + int64_t(comm.rank()) * bucket.shard,
                        size_t(bucket.shard) * sizeof(float));
          });
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
  const bool root = comm.rank() == 0;
  std::vector<char> image(root ? size_t(paramImageBytes(spec)) : 0);
  eachRun(spec, 1, root, reinterpret_cast<float *>(image.data()),
          [&](const BucketSpec &bucket, int, float *run) {
            comm.allgather(persistent + bucket.paramOffset, run,
                           bucket.shard * int64_t(sizeof(float)));
          });
  return image;
}

void scatterParamImage(const ModelSpec &spec, Communicator &comm, const char *image,
                       char *persistent) {
  const bool root = comm.rank() == 0;
  eachRun(spec, 1, root, reinterpret_cast<float *>(const_cast<char *>(image)),
          [&](const BucketSpec &bucket, int, float *run) {
            if (comm.size() > 1)
              comm.broadcast(run, bucket.count * int64_t(sizeof(float)), 0);
            std::memcpy(persistent + bucket.paramOffset,
                        run + int64_t(comm.rank()) * bucket.shard,
                        size_t(bucket.shard) * sizeof(float));
          });
}

} // namespace dtc::rt
