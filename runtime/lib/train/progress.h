//===- progress.h - Training progress display ----------------------------===//
//
// Bar mode redraws one line with '\r' (at most 10 times a second) and erases
// it at the end of the epoch; line mode (stdout is not a terminal, or
// several ranks) prints a "progress ..." line at most every 5 seconds; off
// prints nothing.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "options/options.h"

#include <chrono>
#include <cstdint>

namespace dtc::rt {

class Progress {
public:
  // Auto: bar iff stdout is a tty and the process was not started by a
  // multi-rank launcher (mpirun gives every rank a pty even when its own
  // output goes to a log file).
  // tokensPerSample > 0: a language model, whose rate is shown in tokens/s.
  Progress(ProgressMode mode, int64_t epochs, bool launched = false,
           int64_t tokensPerSample = 0);

  void beginEpoch(int64_t epoch, int64_t steps);
  // step: 1-based step within the epoch; loss: running mean of the epoch.
  void update(int64_t step, double loss, double samplesPerSec);
  void endEpoch(); // erases the bar
  // Prints a line of its own (the bar, erased, comes back at the next update).
  void line(const std::string &text);

private:
  enum class Kind { Off, Bar, Lines } kind_;
  int64_t epochs_, epoch_ = 0, steps_ = 0, tokensPerSample_ = 0;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_;
};

} // namespace dtc::rt
