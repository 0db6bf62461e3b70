//===- shards.h - Sharded optimizer state, gathered and scattered ---------===//
//
// A sharded program (dtc --shard, ModelSpec::shardStage > 0) holds on each
// rank only its shard of every bucket's optimizer state (BucketSpec). A
// training state file holds each parameter's state whole, whatever the
// stage and world size that wrote it (as a replicated run's), so that any
// program can read it: the state is gathered whole to write it, and each
// rank takes its shards of it when it resumes.
//
// The gathered layout: for each bucket in spec order, ModelSpec::numStates
// runs of its `count` floats (the bucket's state laid out like the
// bucket).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "dtc/runtime.h"

#include <cstdint>
#include <vector>

namespace dtc::rt {

class Communicator;

// The floats of the gathered state (0 for a replicated program).
int64_t gatheredStateFloats(const ModelSpec &spec);

// Where parameter `param`'s state buffer `k` starts in the gathered state,
// in floats; -1 if no sharded bucket holds the parameter.
int64_t gatheredStateOffset(const ModelSpec &spec, int32_t param, int k);

// Every rank's shards, gathered a bucket at a time (collective: every rank
// calls it). Rank 0 gets the whole state; the others an empty vector: they
// hold no more than one bucket's state at a time, so that writing a
// checkpoint does not undo what sharding saves (FSDP's rank0_only).
std::vector<float> gatherShardedState(const ModelSpec &spec, Communicator &comm,
                                      const char *persistent);

// Each rank's shards of rank 0's gathered state (the others pass null),
// into its persistent block: broadcast a bucket at a time (collective).
void scatterShardedState(const ModelSpec &spec, Communicator &comm, const float *gathered,
                         char *persistent);

// Stage 3 (ModelSpec::shardStage 3): the persistent block holds each
// bucket's shard of the parameters (BucketSpec::paramOffset). Their whole
// values, where the runtime needs them (to initialize, save, load), are
// the gathered image: every bucket's `count` floats, one bucket after the
// other; ParamSpec::offset is a parameter's byte offset in it.
int64_t paramImageBytes(const ModelSpec &spec);
// The byte offset in the image of the bucket that holds parameter i (-1:
// none).
int64_t paramImageOffset(const ModelSpec &spec, int32_t param);
// Initializes this rank's shards of the parameters as initParams would the
// whole (one bucket at a time: no more than a bucket is ever whole).
void initShardedParams(const ModelSpec &spec, uint64_t seed, int rank, char *persistent);
// Every rank's shards of the parameters gathered into a whole image, a
// bucket at a time (collective): rank 0 gets it, the others an empty
// vector (as gatherShardedState).
std::vector<char> gatherParamImage(const ModelSpec &spec, Communicator &comm,
                                   const char *persistent);
// Each rank's shards of rank 0's whole image (the others pass null) into
// its persistent block, broadcast a bucket at a time (collective).
void scatterParamImage(const ModelSpec &spec, Communicator &comm, const char *image,
                       char *persistent);

} // namespace dtc::rt
