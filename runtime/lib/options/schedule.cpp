//===- schedule.cpp - Learning-rate schedules ----------------------------===//
#include "options/schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace dtc::rt {

const char *scheduleKindName(LrSchedule::Kind k) {
  switch (k) {
  case LrSchedule::Kind::Constant:
    return "constant";
  case LrSchedule::Kind::Cosine:
    return "cosine";
  case LrSchedule::Kind::Linear:
    return "linear";
  case LrSchedule::Kind::Step:
    return "step";
  }
  return "constant";
}

std::optional<LrSchedule::Kind> scheduleKindNamed(const std::string &name) {
  for (auto k : {LrSchedule::Kind::Constant, LrSchedule::Kind::Cosine, LrSchedule::Kind::Linear,
                 LrSchedule::Kind::Step})
    if (name == scheduleKindName(k))
      return k;
  return std::nullopt;
}

float scheduledLr(float lr, const LrSchedule &s, int64_t step) {
  const double base = lr;
  if (s.warmup > 0 && step <= s.warmup)
    return float(base * double(step) / double(s.warmup));
  switch (s.kind) {
  case LrSchedule::Kind::Constant:
    return lr;
  case LrSchedule::Kind::Step: {
    const int64_t k = std::max<int64_t>(0, step - s.warmup - 1);
    return float(base * std::pow(s.gamma, double(k / std::max<int64_t>(1, s.stepSize))));
  }
  case LrSchedule::Kind::Cosine:
  case LrSchedule::Kind::Linear: {
    const int64_t span = s.decaySteps - s.warmup;
    const double p =
        span <= 0 ? 1.0 : std::clamp(double(step - 1 - s.warmup) / double(span), 0.0, 1.0);
    const double f = s.kind == LrSchedule::Kind::Cosine ? 0.5 * (1.0 + std::cos(M_PI * p))
                                                        : 1.0 - p;
    return float(s.minLr + (base - s.minLr) * f);
  }
  }
  return lr;
}

std::string describeSchedule(const LrSchedule &s) {
  if (s.kind == LrSchedule::Kind::Constant && s.warmup == 0)
    return "";
  std::string d = fmt::format("{}(warmup={}", scheduleKindName(s.kind), s.warmup);
  if (s.kind == LrSchedule::Kind::Cosine || s.kind == LrSchedule::Kind::Linear)
    d += (s.decaySteps > 0 ? fmt::format(", decay_steps={}", s.decaySteps) : "") +
         fmt::format(", min_lr={:g}", s.minLr); // no decay_steps: the run's steps
  if (s.kind == LrSchedule::Kind::Step)
    d += fmt::format(", step_size={}, gamma={:g}", s.stepSize, s.gamma);
  return d + ")";
}

} // namespace dtc::rt
