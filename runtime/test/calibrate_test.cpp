// train --calibrate's choice of the passes over the kernels it keeps
// (train/calibrate.h, steadyPasses): a pass measured while the host ran
// slower than its fastest reference GEMM by more than kPassDrift is left
// out (a slow period of several seconds otherwise spans two passes of
// three, and the median takes it).
#include "train/calibrate.h"

#include <gtest/gtest.h>

namespace dtc::rt {
namespace {

TEST(CalibratePasses, PassesUnderASlowerHostAreLeftOut) {
  // Two passes under busy loops (the reference GEMM twice as slow), three
  // after them.
  EXPECT_EQ(steadyPasses({2.0, 1.9, 1.0, 1.05, 1.1}, 1.0), (std::vector<size_t>{2, 3, 4}));
  // Every pass as slow as the host now is: all kept (a slow host is
  // measured as it is).
  EXPECT_EQ(steadyPasses({2.0, 2.1, 2.05}, 2.0), (std::vector<size_t>{0, 1, 2}));
  // None kept yet: the calibration makes more passes.
  EXPECT_TRUE(steadyPasses({2.0, 1.9}, 1.0).empty());
}

TEST(CalibratePasses, TheDriftIsInclusive) {
  EXPECT_EQ(steadyPasses({kPassDrift, kPassDrift * 1.01}, 1.0), (std::vector<size_t>{0}));
}

} // namespace
} // namespace dtc::rt
