//===- options_fuzz.cpp - train's command line ----------------------------===//
//
// Input: arguments separated by newlines (at most 32). parseOptions must
// accept them, print help/version, or refuse them with exit code 2; the
// options it accepts must be in their documented ranges.
//
//===----------------------------------------------------------------------===//
#include "support/error.h"
#include "options/options.h"

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

using namespace dtc::rt;

namespace {
const ParamSpec kParams[] = {
    {"fc.weight", 2, {3, 4}, 12, 0, InitKind::Zeros, 0, 0, 4, 3, 64},
};
const char *const kOutputs[] = {"loss"};
void step(const StepArgs &) {}
ModelSpec spec() {
  ModelSpec s{};
  s.name = "fuzz";
  s.source = "fuzz.dsl";
  s.inputRank = 1;
  s.inputShape[0] = 4;
  s.inputNumel = 4;
  s.labelNumel = 1;
  s.numClasses = 3;
  s.numParams = 1;
  s.params = kParams;
  s.paramBytes = 64;
  s.persistentBytes = 128;
  s.numStates = 1;
  s.numOutputs = 1;
  s.outputNames = kOutputs;
  s.trainStep = s.evalStep = s.gradStep = step;
  s.recipe.data.kind = DatasetKind::Synthetic;
  s.recipe.data.trainSize = 100;
  s.recipe.batch = 8;
  s.recipe.epochs = 1;
  return s;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const ModelSpec s = spec();
  std::vector<std::string> args{"train"};
  std::string cur;
  for (size_t i = 0; i < size && args.size() < 32; ++i) {
    if (data[i] == '\n') {
      args.push_back(cur);
      cur.clear();
    } else if (data[i] != 0) {
      cur += char(data[i]);
    }
  }
  if (!cur.empty() && args.size() < 32)
    args.push_back(cur);
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  Options o;
  try {
    std::optional<int> rc = parseOptions(int(args.size()), argv.data(), s, o);
    if (rc)
      return 0; // help, version or a refused command line
  } catch (const Error &) {
    return 0;
  }
  if (o.batch < 1 || o.batch > (int64_t(1) << 40) || o.epochs < 0 || !std::isfinite(o.lr) ||
      o.lr < 0 || !(o.commTimeout > 0) || o.commTimeout > 30 * 86400.0 || o.threads < 1 ||
      o.threads > 1024 || !std::isfinite(o.gradcheckEps) || !(o.gradcheckEps > 0))
    std::abort(); // accepted out of range
  return 0;
}
