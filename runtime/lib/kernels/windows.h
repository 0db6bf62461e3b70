//===- windows.h - Pieces of the window kernels shared by the CPU kernels -===//
//
// conv.cpp's per-plane max-pool gradient, which norm.cpp's
// batchNormGradMaxPool runs on each plane as it reaches it (the pooled
// gradient routed in L1, never stored as a full tensor), and the
// conversions between NCHW and the blocked layout nChw16c
// (rt::Window2d::kBlock channels a block) that both files' fallbacks use.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "dtc/runtime.h"

namespace dtc::kern {

/// The 2x2, stride-2 window without padding: each input element in at most
/// one window (the kernels' fast path).
inline bool isPool2x2(const rt::Window2d &w) {
  return w.kH == 2 && w.kW == 2 && w.sH == 2 && w.sW == 2 && w.pH == 0 && w.pW == 0;
}

/// dxp [H, W] = the gradient of max pooling (window w, NCHW) of the plane
/// xp [H, W] for the pooled gradient dyp [Ho, Wo]: each window's dy at its
/// first maximum in row-major order (by >), 0 elsewhere.
void maxPool2dGradPlane(const rt::Window2d &w, const float *xp, const float *dyp, float *dxp);
/// The same for one 16-channel block of a blocked pooling (w: its window,
/// x and the result blocked): xp [H, W, 16], dyp [Ho, Wo, 16], dxp [H, W,
/// 16].
void maxPool2dGradBlockPlane(const rt::Window2d &w, const float *xp, const float *dyp,
                             float *dxp);

/// x [N, C / 16, H, W, 16] (nChw16c) -> y [N, C, H, W], and back; C a
/// multiple of 16.
void blockedToNchw(const float *x, float *y, int64_t N, int64_t C, int64_t H, int64_t W);
void nchwToBlocked(const float *x, float *y, int64_t N, int64_t C, int64_t H, int64_t W);

} // namespace dtc::kern
