//===- test_train_cuda.cu - A `train` with CUDA steps, as dtc generates it -===//
//
// Built by nvcc with the command line generated programs are linked with
// (runtime/test/CMakeLists.txt): it checks that the CUDA runtime compiles,
// links and registers itself (including dtc/cuda.h is enough), and the
// runtime.cuda.* launch tests run it. Test hooks, from the environment:
//   DTCRT_TEST_MODEL=softmax (default) | linreg | wide (4096 features, 64
//       classes, two gradient buckets)
//   DTCRT_TEST_SIGNAL=KILL|STOP, DTCRT_TEST_SIGNAL_RANK=R,
//   DTCRT_TEST_SIGNAL_STEP=K: rank R raises the signal at the start of
//       optimizer step K (on the host, while queuing it).
//
//===----------------------------------------------------------------------===//
#include "test_models_cuda.cuh"

#include <csignal>
#include <cstdlib>
#include <string>

namespace {

dtc::rt::StepFn gInner = nullptr;
int gSignal = 0, gSignalRank = -1;
int64_t gSignalStep = -1;

void hookedStep(const dtc::rt::StepArgs &a) {
  if (gSignal && a.comm->rank() == gSignalRank && a.hyper->step == gSignalStep)
    std::raise(gSignal);
  gInner(a);
}

const char *env(const char *name, const char *fallback) {
  const char *v = std::getenv(name);
  return v && *v ? v : fallback;
}

} // namespace

int main(int argc, char **argv) {
  const std::string model = env("DTCRT_TEST_MODEL", "softmax");
  dtc::rt::ModelSpec spec;
  if (model == "wide")
    spec = dtc::test::LinearCuda<4096, 64, false, /*SplitBuckets=*/true>::spec();
  else if (model == "linreg")
    spec = dtc::test::LinearCuda<4, 2, true>::spec();
  else
    spec = dtc::test::LinearCuda<4, 3, false>::spec();

  const std::string sig = env("DTCRT_TEST_SIGNAL", "");
  gSignal = sig == "KILL" ? SIGKILL : sig == "STOP" ? SIGSTOP : 0;
  gSignalRank = std::atoi(env("DTCRT_TEST_SIGNAL_RANK", "-1"));
  gSignalStep = std::atoll(env("DTCRT_TEST_SIGNAL_STEP", "-1"));
  if (gSignal) {
    gInner = spec.trainStepCuda;
    spec.trainStepCuda = hookedStep;
  }
  return dtc::rt::runMain(argc, argv, spec);
}
