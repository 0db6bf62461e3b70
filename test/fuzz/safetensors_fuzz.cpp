//===- safetensors_fuzz.cpp - The checkpoint reader -----------------------===//
//
// Input: a file given to --init or --resume. Both readers must accept it or
// throw dtc::rt::Error, and a failed --init must leave the parameters alone.
//
//===----------------------------------------------------------------------===//
#include "checkpoint/checkpoint.h"
#include "support/error.h"
#include "fuzz_input.h"

#include <cstdlib>
#include <cstring>
#include <vector>

using namespace dtc::rt;

namespace {
// fc.weight [3,4], fc.bias [3], scale []; Adam state after the parameters.
const ParamSpec kParams[] = {
    {"fc.weight", 2, {3, 4}, 12, 0, InitKind::Zeros, 0, 0, 4, 3, 192},
    {"fc.bias", 1, {3}, 3, 64, InitKind::Zeros, 0, 0, 4, 3, 320},
    {"scale", 0, {}, 1, 128, InitKind::Zeros, 0, 0, 1, 1, 352},
};
ModelSpec spec() {
  ModelSpec s{};
  s.name = "ckpt";
  s.numParams = 3;
  s.params = kParams;
  s.paramBytes = 192;
  s.persistentBytes = 384;
  s.numStates = 2;
  s.recipe.optimizer = OptimizerKind::Adam;
  s.fingerprint = 0x1234abcd5678ef00ULL;
  return s;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const ModelSpec s = spec();
  dtc::fuzz::MemFile file(data, size);
  std::vector<char> persistent(384, 7), before = persistent;
  try {
    loadCheckpoint(file.path(), s, persistent.data());
  } catch (const Error &) {
    if (persistent != before)
      std::abort(); // a failed load modified the parameters
  }
  try {
    LoadedTrainingState st = loadTrainingState(file.path(), s);
    if (st.persistent.size() != 384)
      std::abort();
  } catch (const Error &) {
  }
  return 0;
}
