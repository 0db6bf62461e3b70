//===- shards.cpp - Sharded optimizer state, gathered and scattered -------===//
#include "checkpoint/shards.h"

#include "dtc/comm.h"

#include <cstring>

namespace dtc::rt {

int64_t gatheredStateFloats(const ModelSpec &spec) {
  if (spec.shardStage <= 0)
    return 0;
  int64_t n = 0;
  for (int32_t b = 0; b < spec.numBuckets; ++b)
    n += int64_t(spec.numStates) * spec.buckets[b].count;
  return n;
}

int64_t gatheredStateOffset(const ModelSpec &spec, int32_t param, int k) {
  if (spec.shardStage <= 0)
    return -1;
  int64_t base = 0;
  for (int32_t b = 0; b < spec.numBuckets; ++b) {
    const BucketSpec &bucket = spec.buckets[b];
    for (int32_t i = 0; i < bucket.numParams; ++i)
      if (bucket.params[i] == param)
        return base + int64_t(k) * bucket.count + bucket.within[i];
    base += int64_t(spec.numStates) * bucket.count;
  }
  return -1;
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

} // namespace dtc::rt
