//===- test_train.cpp - A `train` program as dtc generates it, for tests --===//
//
// main() calls runMain with a model of test_models.h, like a generated
// program. Test hooks, from the environment:
//   DTCRT_TEST_MODEL=softmax (default) | softmax_other (same model, another
//       fingerprint: "a different compiled program") | wide (4096 features,
//       64 classes, two gradient buckets)
//   DTCRT_TEST_SIGNAL=KILL|STOP, DTCRT_TEST_SIGNAL_RANK=R,
//   DTCRT_TEST_SIGNAL_STEP=K: rank R raises the signal at the start of
//       optimizer step K.
//   DTCRT_TEST_REPORT_LIBMPI=1: after runMain, print "libmpi loaded: yes|no"
//       (whether any libmpi is mapped into the process).
//
//===----------------------------------------------------------------------===//
#include "test_models.h"

#include <link.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

bool libmpiLoaded() {
  bool found = false;
  dl_iterate_phdr(
      [](struct dl_phdr_info *info, size_t, void *data) {
        if (info->dlpi_name && std::strstr(info->dlpi_name, "libmpi"))
          *static_cast<bool *>(data) = true;
        return 0;
      },
      &found);
  return found;
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
    spec = dtc::test::Linear<4096, 64, false, 0, /*SplitBuckets=*/true>::spec();
  else
    spec = dtc::test::SoftmaxReg::spec();
  if (model == "softmax_other")
    spec.fingerprint = 0x9c1e000000000001ULL;

  const std::string sig = env("DTCRT_TEST_SIGNAL", "");
  gSignal = sig == "KILL" ? SIGKILL : sig == "STOP" ? SIGSTOP : 0;
  gSignalRank = std::atoi(env("DTCRT_TEST_SIGNAL_RANK", "-1"));
  gSignalStep = std::atoll(env("DTCRT_TEST_SIGNAL_STEP", "-1"));
  gInner = spec.trainStep;
  spec.trainStep = hookedStep;

  const int rc = dtc::rt::runMain(argc, argv, spec);
  if (std::getenv("DTCRT_TEST_REPORT_LIBMPI"))
    std::printf("libmpi loaded: %s\n", libmpiLoaded() ? "yes" : "no");
  return rc;
}
