//===- pooling.h - Pooling pieces shared by the CPU kernels ---------------===//
//
// The gradient of max pooling on one (sample, channel) plane, which
// conv.cpp's maxPool2dGrad runs over every plane and norm.cpp's
// batchNormGradMaxPool runs on each plane as it reaches it (the pooled
// gradient routed in L1, never stored as a full tensor).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "dtc/runtime.h"

namespace dtc::kern {

/// dxp [H, W] = the gradient of max pooling (window w, NCHW) of the plane
/// xp [H, W] for the pooled gradient dyp [Ho, Wo]: each window's dy at its
/// first maximum in row-major order (by >), 0 elsewhere.
void maxPool2dGradPlane(const rt::Window2d &w, const float *xp, const float *dyp, float *dxp);

} // namespace dtc::kern
