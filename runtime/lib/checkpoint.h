//===- checkpoint.h - Parameters to and from safetensors files -----------===//
//
// The file layout is the safetensors format: an 8-byte little-endian header
// length N, N bytes of JSON (space-padded to a multiple of 8) mapping each
// ParamSpec name to {"dtype":"F32","shape":[...],"data_offsets":[b,e]} plus
// "__metadata__":{"format":"pt"}, then the raw little-endian data. PyTorch
// can load it into a module whose attributes carry the same names.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "dtc/runtime.h"

#include <string>

namespace dtc::rt {

// Writes the parameters (in the first spec.paramBytes of persistent) to path,
// atomically: path.tmp is written, fsync'ed and renamed over path.
void saveCheckpoint(const std::string &path, const ModelSpec &spec,
                    const char *persistent);

// Replaces the parameters with the tensors of a checkpoint. Every parameter
// must be present as F32 with the exact shape and no other tensor may be; on
// any error nothing is modified and an Error naming the file is thrown.
void loadCheckpoint(const std::string &path, const ModelSpec &spec, char *persistent);

} // namespace dtc::rt
