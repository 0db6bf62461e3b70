//===- progress.cpp - Training progress display --------------------------===//
#include "train/progress.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <unistd.h>

namespace dtc::rt {
namespace {
constexpr auto kBarInterval = std::chrono::milliseconds(100);
constexpr auto kLineInterval = std::chrono::seconds(5);
constexpr int kBarWidth = 30;
} // namespace

Progress::Progress(ProgressMode mode, int64_t epochs, bool launched, int64_t tokensPerSample)
    : epochs_(epochs), tokensPerSample_(tokensPerSample) {
  switch (mode) {
  case ProgressMode::Off:
    kind_ = Kind::Off;
    break;
  case ProgressMode::On:
    kind_ = Kind::Bar;
    break;
  case ProgressMode::Auto:
    kind_ = ::isatty(STDOUT_FILENO) && !launched ? Kind::Bar : Kind::Lines;
    break;
  }
}

void Progress::beginEpoch(int64_t epoch, int64_t steps) {
  epoch_ = epoch;
  steps_ = steps;
  last_ = std::chrono::steady_clock::now();
}

void Progress::update(int64_t step, double loss, double samplesPerSec) {
  const auto now = std::chrono::steady_clock::now();
  const char *unit = tokensPerSample_ > 0 ? "tokens/s" : "images/s";
  const double rate = samplesPerSec * double(tokensPerSample_ > 0 ? tokensPerSample_ : 1);
  const bool final = step == steps_;
  switch (kind_) {
  case Kind::Off:
    return;
  case Kind::Lines:
    if (final || now - last_ < kLineInterval) // the epoch line follows the final step
      return;
    fmt::print("progress epoch {}/{} step {}/{} loss {:.4f} {} {:.0f}\n", epoch_, epochs_, step,
               steps_, loss, unit, rate);
    break;
  case Kind::Bar: {
    if (!final && now - last_ < kBarInterval)
      return;
    const int filled = static_cast<int>(kBarWidth * step / std::max<int64_t>(steps_, 1));
    std::string bar(static_cast<size_t>(filled), '=');
    if (filled < kBarWidth)
      bar += '>';
    bar.resize(kBarWidth, ' ');
    fmt::print("\repoch {}/{} [{}] {}/{} loss {:.4f} {:.0f} {}\x1b[K", epoch_, epochs_, bar,
               step, steps_, loss, rate, unit);
    drawn_ = true;
    break;
  }
  }
  last_ = now;
  std::fflush(stdout);
}

void Progress::line(const std::string &text) {
  if (drawn_)
    fmt::print("\r\x1b[K");
  drawn_ = false;
  fmt::print("{}\n", text);
  std::fflush(stdout);
}

void Progress::endEpoch() {
  if (drawn_) {
    fmt::print("\r\x1b[K");
    std::fflush(stdout);
  }
  drawn_ = false;
}

} // namespace dtc::rt
