//===- checkpoint.h - Parameters and training state in safetensors files --===//
//
// The file layout is the safetensors format: an 8-byte little-endian header
// length N, N bytes of JSON (space-padded to a multiple of 8) mapping each
// tensor name to {"dtype":"F32","shape":[...],"data_offsets":[b,e]} plus
// "__metadata__" (string to string), then the raw little-endian data.
//
// Two kinds of file, both loadable by PyTorch (safetensors.torch.load_file):
//  - parameters (train --save): one tensor per ParamSpec, under its DSL name
//    ("fc1.weight"), then one per BufferSpec ("bn1.running_mean" F32,
//    "bn1.num_batches_tracked" I64), as torch's state_dict; metadata
//    format=pt, dtc.kind=parameters, dtc.model.
//  - training state (train --checkpoint): the parameters as above, then the
//    optimizer state of each parameter as "optimizer/<name>/<buffer>"
//    (<buffer>: momentum_buffer for SGD with momentum; exp_avg, exp_avg_sq
//    for Adam and AdamW: torch.optim's names), and in the metadata
//    dtc.kind=training-state with the step, the epoch and the position in it,
//    the options that shape the run, the program fingerprint, the training
//    data's digest and a CRC-32 of the tensor data (docs/runtime.md lists
//    every key). The shuffle order is a function of (seed, epoch), so the
//    seed and the epoch are the whole of the RNG state.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "dtc/runtime.h"
#include "options/schedule.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dtc::rt {

// Writes the parameters and buffers (the first spec.paramBytes +
// spec.bufferBytes of persistent) to path through an AtomicFile.
// Stage 3 (shards.h): the parameters from `image`, gathered.
void saveCheckpoint(const std::string &path, const ModelSpec &spec,
                    const char *persistent, const char *image = nullptr);

// Replaces the parameters and buffers with the tensors of a parameters or
// training-state file (--init; the optimizer state of the latter is not
// used). Every parameter and buffer must be present with its dtype and exact
// shape, and no other tensor may be, but optimizer state; on any error nothing is modified and an Error
// naming the file is thrown.
void loadCheckpoint(const std::string &path, const ModelSpec &spec, char *persistent,
                    char *image = nullptr);

// Where a run is and what shaped it: the metadata of a training state.
struct TrainingState {
  int64_t step = 0;         // optimizer steps done (Hyper::step)
  int64_t epoch = 1;        // the epoch to continue (1-based)
  int64_t epochSamples = 0; // samples of that epoch's order already trained on
  int64_t ranks = 1;        // data-parallel ranks that wrote it
  int64_t batch = 1;        // per rank (a micro-batch, with accumulation)
  int64_t accumulate = 1;   // micro-batches per optimizer step
  uint64_t seed = 0;
  bool shuffle = true;
  float lr = 0;
  LrSchedule schedule;      // absent from older checkpoints: constant
  int64_t epochs = 1, maxSteps = 0;
  std::string data;         // --data's description
  int64_t trainSamples = 0;
  uint64_t trainDigest = 0; // datasetDigest (data.h) of the training set
};

// The names of the optimizer state tensors of parameter p, in the order of
// its state buffers ("optimizer/fc1.weight/momentum_buffer", ...).
std::vector<std::string> stateTensorNames(const ModelSpec &spec, const ParamSpec &p);

// Writes the parameters, the optimizer state (the whole persistent block as
// the ModelSpec lays it out) and `state` to path through an AtomicFile; with
// alsoLinkAs, the file is also hard-linked under that name.
// A sharded program passes its optimizer state `gathered` (shards.h),
// which the file holds whole as a replicated program's.
void saveTrainingState(const std::string &path, const ModelSpec &spec, const char *persistent,
                       const TrainingState &state, const std::string &alsoLinkAs = std::string(),
                       const float *gathered = nullptr, const char *image = nullptr);

// A training state read and checked against spec: the persistent block it
// describes (parameters and optimizer state at the spec's offsets; bytes the
// spec does not assign are zero) and its metadata. Throws an Error saying
// what differs when the file is not a training state of this program
// (another model, other parameter names or shapes, another optimizer,
// another compiled program) or is damaged (CRC-32).
// A sharded program's `persistent` holds the parameters and buffers, then
// (after spec.persistentBytes) the optimizer state gathered, and under stage
// 3 then the parameters' image (shards.h).
struct LoadedTrainingState {
  std::vector<char> persistent;
  TrainingState state;
};
LoadedTrainingState loadTrainingState(const std::string &path, const ModelSpec &spec);

// The metadata as one string and back (to broadcast it to the other ranks).
std::string encodeTrainingState(const TrainingState &s);
TrainingState decodeTrainingState(const std::string &text);

} // namespace dtc::rt
