//===- preempt.cpp - Signals that end a run at a step boundary ------------===//
#include "train/preempt.h"

#include <atomic>
#include <csignal>
#include <cstring>
#include <mutex>
#include <pthread.h>
#include <thread>
#include <unistd.h>

namespace dtc::rt {
namespace {

constexpr int kSignals[] = {SIGTERM, SIGINT, SIGUSR1};
constexpr int kNumSignals = sizeof kSignals / sizeof kSignals[0];

std::atomic<int> gRequested{0};
struct sigaction gPrevious[kNumSignals];

void onSignal(int sig) {
  int none = 0;
  if (gRequested.compare_exchange_strong(none, sig))
    return;
  // A second SIGTERM or SIGINT: the default action (the process ends).
  if (sig != SIGUSR1) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
}

static_assert(std::atomic<int>::is_always_lock_free, "the handler needs a lock-free flag");

sigset_t preemptionSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kSignals)
    sigaddset(&set, sig);
  return set;
}

} // namespace

void routeSignalsToOwnThread() {
  static std::once_flag once;
  std::call_once(once, [] {
    const sigset_t set = preemptionSignals();
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    // The only thread with the signals unblocked: the kernel delivers a
    // signal sent to the process here, and the handler (onSignal, or the
    // default action) runs on this thread's stack.
    std::thread([set] {
      pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
      for (;;)
        ::pause();
    }).detach();
  });
}

PreemptionHandler::PreemptionHandler() {
  gRequested.store(0);
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int i = 0; i < kNumSignals; ++i)
    sigaction(kSignals[i], &sa, &gPrevious[i]);
}

PreemptionHandler::~PreemptionHandler() {
  // After a signal the run is ending with kExitPreempted: the handlers stay,
  // so that another SIGUSR1 does not turn that status into a kill.
  if (gRequested.load() != 0)
    return;
  for (int i = 0; i < kNumSignals; ++i)
    sigaction(kSignals[i], &gPrevious[i], nullptr);
}

int PreemptionHandler::requested() { return gRequested.load(std::memory_order_relaxed); }

const char *PreemptionHandler::name(int signal) {
  switch (signal) {
  case SIGTERM:
    return "SIGTERM";
  case SIGINT:
    return "SIGINT";
  case SIGUSR1:
    return "SIGUSR1";
  }
  return "a signal";
}

} // namespace dtc::rt
