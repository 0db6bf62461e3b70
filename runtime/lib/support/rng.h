//===- rng.h - Portable, seedable random numbers -------------------------===//
//
// std::mt19937_64 is specified bit-exactly by the standard, but the std
// distributions are not; the conversions here are our own so that data,
// shuffles and initial weights are identical on every platform.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "dtc/runtime.h"

#include <cmath>
#include <cstdint>
#include <random>

namespace dtc::rt {

// mixSeed (SplitMix64 over (seed, index)) is dtc/runtime.h's.

class Rng {
public:
  explicit Rng(uint64_t seed) : gen_(seed) {}

  uint64_t next() { return gen_(); }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return double(gen_() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Standard normal (Box-Muller, both values used).
  double normal() {
    if (haveSpare_) {
      haveSpare_ = false;
      return spare_;
    }
    double u1 = 1.0 - uniform(); // (0, 1]
    double u2 = uniform();
    double r = std::sqrt(-2.0 * std::log(u1));
    constexpr double kTwoPi = 6.283185307179586476925;
    spare_ = r * std::sin(kTwoPi * u2);
    haveSpare_ = true;
    return r * std::cos(kTwoPi * u2);
  }
  // Uniform integer in [0, n), unbiased (rejection sampling); n > 0.
  uint64_t below(uint64_t n) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t r;
    do
      r = gen_();
    while (r >= limit);
    return r % n;
  }

private:
  std::mt19937_64 gen_;
  double spare_ = 0;
  bool haveSpare_ = false;
};

} // namespace dtc::rt
