//===- schedule.h - Learning-rate schedules (train --lr-schedule) --------===//
//
// The learning rate of each optimizer step t (1-based, the one about to
// run), from the base rate (--lr): a linear warmup over the first `warmup`
// steps (lr t / warmup: lr at step warmup), then, with k = t - 1 - warmup
// the steps since the warmup,
//   constant  lr
//   cosine    minLr + (lr - minLr) (1 + cos(pi p)) / 2
//   linear    minLr + (lr - minLr) (1 - p)
//   step      lr gamma^floor(k / stepSize)
// where p = k / (decaySteps - warmup), clamped to [0, 1]. These are torch's
// schedulers chained as a PyTorch user would: SequentialLR of LinearLR
// (start_factor 1 / warmup) and CosineAnnealingLR (T_max decaySteps -
// warmup, eta_min minLr), LinearLR to minLr, or StepLR, stepped after each
// optimizer step (test/parity/schedule.py compares them step by step). A
// function of the step alone, so a resumed run continues it exactly.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace dtc::rt {

struct LrSchedule {
  enum class Kind { Constant, Cosine, Linear, Step };
  Kind kind = Kind::Constant;
  int64_t warmup = 0;     // steps of linear warmup
  int64_t decaySteps = 0; // cosine, linear: minLr after this many steps (0: the run's steps)
  double minLr = 0;       // cosine, linear
  int64_t stepSize = 1;   // step: steps between decays
  double gamma = 0.1;     // step: the factor of each decay
};

const char *scheduleKindName(LrSchedule::Kind k);
std::optional<LrSchedule::Kind> scheduleKindNamed(const std::string &name);

// The rate of step `step` (1-based); decaySteps resolved (>= 1) for cosine
// and linear.
float scheduledLr(float lr, const LrSchedule &s, int64_t step);

// "cosine(warmup=100, decay_steps=2000, min_lr=0.0001)" (no decay_steps:
// the run's steps); "" for a constant rate without warmup.
std::string describeSchedule(const LrSchedule &s);

} // namespace dtc::rt
