//===- params.h - Model spec checks and parameter initialization ---------===//
#pragma once

#include "dtc/runtime.h"

#include <cstdint>

namespace dtc::rt {

// Throws Error if the generated ModelSpec is internally inconsistent
// (shapes vs numel, offsets outside paramBytes, missing step functions...).
void validateSpec(const ModelSpec &spec);

// "sgd", "adam", "adamw" (the recipe's and checkpoints' names).
const char *optimizerName(OptimizerKind k);

// Total number of parameter elements.
int64_t countParams(const ModelSpec &spec);

// Initializes every parameter of the persistent block from its InitKind,
// deterministically from (seed, parameter index), and every buffer to its
// value. See params.cpp.
void initParams(const ModelSpec &spec, uint64_t seed, char *persistent);
// The buffers alone (initParams does them too).
void initBuffers(const ModelSpec &spec, char *persistent);
// Parameter i alone, at w (the same values as initParams gives it).
void initParam(const ModelSpec &spec, int32_t i, uint64_t seed, float *w);

// Bytes of one element of a buffer.
inline int64_t elementBytes(ElementType t) { return t == ElementType::I64 ? 8 : 4; }

} // namespace dtc::rt
