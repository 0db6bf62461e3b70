//===- conv.cpp - Convolution and pooling kernels (kernels.h) -------------===//
//
// conv2d and its gradients by im2col + GEMM, one sample at a time (the
// columns of one sample are the scratch the memory plan gives the op): for
// each group g, y_g [O/g, Ho Wo] = W_g [O/g, C/g kH kW] x cols_g [C/g kH kW,
// Ho Wo]; dx through cols = W^T dy and col2im; dW_g += dy_g cols_g^T. A 1x1
// convolution of stride 1 without padding reads x itself as its columns.
// The GEMMs are kern::gemm's (the program's engine, its threads). Pooling
// loops over each (sample, channel) plane, the planes split over the
// --threads cores.
//
//===----------------------------------------------------------------------===//
#include "dtc/kernels.h"

#include "parallel.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace dtc::kern {
namespace {

using rt::Window2d;

bool columnsAreInput(const Window2d &w) {
  return w.kH == 1 && w.kW == 1 && w.sH == 1 && w.sW == 1 && w.pH == 0 && w.pW == 0;
}

// cols[(c kH + i) kW + j][oh Wo + ow] = x[c][oh sH - pH + i dH][ow sW - pW + j dW]
// (0 outside the input), for one sample x [C, H, W].
void im2col(const Window2d &w, const float *x, float *cols) {
  const int64_t plane = w.Ho * w.Wo;
  for (int64_t c = 0; c < w.C; ++c)
    for (int64_t i = 0; i < w.kH; ++i)
      for (int64_t j = 0; j < w.kW; ++j) {
        float *row = cols + ((c * w.kH + i) * w.kW + j) * plane;
        const float *xc = x + c * w.H * w.W;
        for (int64_t oh = 0; oh < w.Ho; ++oh) {
          const int64_t h = oh * w.sH - w.pH + i * w.dH;
          float *out = row + oh * w.Wo;
          if (h < 0 || h >= w.H) {
            std::memset(out, 0, size_t(w.Wo) * sizeof(float));
            continue;
          }
          const float *xr = xc + h * w.W;
          for (int64_t ow = 0; ow < w.Wo; ++ow) {
            const int64_t v = ow * w.sW - w.pW + j * w.dW;
            out[ow] = v >= 0 && v < w.W ? xr[v] : 0.0f;
          }
        }
      }
}

// The adjoint of im2col: dx (zeroed here) += each column entry at its place.
void col2im(const Window2d &w, const float *cols, float *dx) {
  std::memset(dx, 0, size_t(w.C * w.H * w.W) * sizeof(float));
  const int64_t plane = w.Ho * w.Wo;
  for (int64_t c = 0; c < w.C; ++c)
    for (int64_t i = 0; i < w.kH; ++i)
      for (int64_t j = 0; j < w.kW; ++j) {
        const float *row = cols + ((c * w.kH + i) * w.kW + j) * plane;
        float *xc = dx + c * w.H * w.W;
        for (int64_t oh = 0; oh < w.Ho; ++oh) {
          const int64_t h = oh * w.sH - w.pH + i * w.dH;
          if (h < 0 || h >= w.H)
            continue;
          const float *in = row + oh * w.Wo;
          float *xr = xc + h * w.W;
          for (int64_t ow = 0; ow < w.Wo; ++ow) {
            const int64_t v = ow * w.sW - w.pW + j * w.dW;
            if (v >= 0 && v < w.W)
              xr[v] += in[ow];
          }
        }
      }
}

// Sizes of one group's GEMMs.
struct Groups {
  int64_t og, k, plane, wGroup, colGroup;
  explicit Groups(const Window2d &w)
      : og(w.O / w.groups), k(w.C / w.groups * w.kH * w.kW), plane(w.Ho * w.Wo),
        wGroup(og * k), colGroup(k * plane) {}
};

// The window of output (oh, ow) clipped to the input: [h0, h1) x [w0, w1),
// and the divisor of average pooling.
struct Span {
  int64_t h0, h1, w0, w1, divisor;
};
Span spanOf(const Window2d &w, int64_t oh, int64_t ow, bool countIncludePad) {
  int64_t h0 = oh * w.sH - w.pH, w0 = ow * w.sW - w.pW;
  int64_t h1 = std::min(h0 + w.kH, w.H + w.pH), w1 = std::min(w0 + w.kW, w.W + w.pW);
  const int64_t padded = (h1 - h0) * (w1 - w0);
  h0 = std::max<int64_t>(h0, 0);
  w0 = std::max<int64_t>(w0, 0);
  h1 = std::min(h1, w.H);
  w1 = std::min(w1, w.W);
  return {h0, h1, w0, w1, countIncludePad ? padded : (h1 - h0) * (w1 - w0)};
}

// fn(plane) for each of the N C (sample, channel) planes, over the cores.
template <class F> void forEachPlane(int64_t planes, int64_t perPlane, const F &fn) {
  const int64_t minPlanes = std::max<int64_t>(1, 16384 / std::max<int64_t>(perPlane, 1));
  rt::parallelFor(planes, minPlanes, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p)
      fn(p);
  });
}

// The first maximum of window (oh, ow) of plane x [H, W] (a NaN wins), as an
// index into the plane; -1 when the window holds no input (never, for the
// windows shape inference admits).
int64_t argmaxOf(const Window2d &w, const float *x, int64_t oh, int64_t ow) {
  const int64_t h0 = oh * w.sH - w.pH, w0 = ow * w.sW - w.pW;
  float best = -std::numeric_limits<float>::infinity();
  int64_t at = -1;
  for (int64_t h = std::max<int64_t>(h0, 0); h < std::min(h0 + w.kH, w.H); ++h)
    for (int64_t v = std::max<int64_t>(w0, 0); v < std::min(w0 + w.kW, w.W); ++v) {
      const float value = x[h * w.W + v];
      if (at < 0 || value > best || std::isnan(value)) {
        best = value;
        at = h * w.W + v;
        if (std::isnan(value))
          return at;
      }
    }
  return at;
}

} // namespace

void conv2d(const rt::HostContext &c, const float *x, const float *weight, float *y,
            float *cols, int64_t N, const int64_t *window) {
  const Window2d w = Window2d::from(window);
  const Groups g(w);
  for (int64_t n = 0; n < N; ++n) {
    const float *xn = x + n * w.C * w.H * w.W;
    const float *col = xn;
    if (!columnsAreInput(w)) {
      im2col(w, xn, cols);
      col = cols;
    }
    float *yn = y + n * w.O * g.plane;
    for (int64_t gi = 0; gi < w.groups; ++gi)
      gemm(c, false, false, g.og, g.plane, g.k, 1.0f, weight + gi * g.wGroup,
           col + gi * g.colGroup, 0.0f, yn + gi * g.og * g.plane);
  }
}

void conv2dGradInput(const rt::HostContext &c, const float *dy, const float *weight,
                     float *dx, float *cols, int64_t N, const int64_t *window) {
  const Window2d w = Window2d::from(window);
  const Groups g(w);
  const bool direct = columnsAreInput(w);
  for (int64_t n = 0; n < N; ++n) {
    const float *dyn = dy + n * w.O * g.plane;
    float *dxn = dx + n * w.C * w.H * w.W;
    float *col = direct ? dxn : cols;
    for (int64_t gi = 0; gi < w.groups; ++gi)
      gemm(c, true, false, g.k, g.plane, g.og, 1.0f, weight + gi * g.wGroup,
           dyn + gi * g.og * g.plane, 0.0f, col + gi * g.colGroup);
    if (!direct)
      col2im(w, cols, dxn);
  }
}

void conv2dGradWeight(const rt::HostContext &c, const float *x, const float *dy, float *dw,
                      float *cols, int64_t N, const int64_t *window) {
  const Window2d w = Window2d::from(window);
  const Groups g(w);
  if (N <= 0) {
    fill(c, dw, w.O * g.k, 0.0f);
    return;
  }
  for (int64_t n = 0; n < N; ++n) {
    const float *xn = x + n * w.C * w.H * w.W;
    const float *col = xn;
    if (!columnsAreInput(w)) {
      im2col(w, xn, cols);
      col = cols;
    }
    const float *dyn = dy + n * w.O * g.plane;
    for (int64_t gi = 0; gi < w.groups; ++gi)
      gemm(c, false, true, g.og, g.k, g.plane, 1.0f, dyn + gi * g.og * g.plane,
           col + gi * g.colGroup, n == 0 ? 0.0f : 1.0f, dw + gi * g.wGroup);
  }
}

void maxPool2d(const rt::HostContext &, const float *x, float *y, int64_t N,
               const int64_t *window) {
  const Window2d w = Window2d::from(window);
  forEachPlane(N * w.C, w.Ho * w.Wo * w.kH * w.kW, [&](int64_t p) {
    const float *xp = x + p * w.H * w.W;
    float *yp = y + p * w.Ho * w.Wo;
    for (int64_t oh = 0; oh < w.Ho; ++oh)
      for (int64_t ow = 0; ow < w.Wo; ++ow) {
        const int64_t at = argmaxOf(w, xp, oh, ow);
        yp[oh * w.Wo + ow] = at < 0 ? -std::numeric_limits<float>::infinity() : xp[at];
      }
  });
}

void maxPool2dGrad(const rt::HostContext &, const float *x, const float *dy, float *dx,
                   int64_t N, const int64_t *window) {
  const Window2d w = Window2d::from(window);
  forEachPlane(N * w.C, w.Ho * w.Wo * w.kH * w.kW, [&](int64_t p) {
    const float *xp = x + p * w.H * w.W;
    const float *dyp = dy + p * w.Ho * w.Wo;
    float *dxp = dx + p * w.H * w.W;
    std::memset(dxp, 0, size_t(w.H * w.W) * sizeof(float));
    for (int64_t oh = 0; oh < w.Ho; ++oh)
      for (int64_t ow = 0; ow < w.Wo; ++ow)
        if (const int64_t at = argmaxOf(w, xp, oh, ow); at >= 0)
          dxp[at] += dyp[oh * w.Wo + ow];
  });
}

void avgPool2d(const rt::HostContext &, const float *x, float *y, int64_t N,
               const int64_t *window, bool countIncludePad) {
  const Window2d w = Window2d::from(window);
  forEachPlane(N * w.C, w.Ho * w.Wo * w.kH * w.kW, [&](int64_t p) {
    const float *xp = x + p * w.H * w.W;
    float *yp = y + p * w.Ho * w.Wo;
    for (int64_t oh = 0; oh < w.Ho; ++oh)
      for (int64_t ow = 0; ow < w.Wo; ++ow) {
        const Span s = spanOf(w, oh, ow, countIncludePad);
        float sum = 0.0f;
        for (int64_t h = s.h0; h < s.h1; ++h)
          for (int64_t v = s.w0; v < s.w1; ++v)
            sum += xp[h * w.W + v];
        yp[oh * w.Wo + ow] = s.divisor > 0 ? sum / float(s.divisor) : 0.0f;
      }
  });
}

void avgPool2dGrad(const rt::HostContext &, const float *dy, float *dx, int64_t N,
                   const int64_t *window, bool countIncludePad) {
  const Window2d w = Window2d::from(window);
  forEachPlane(N * w.C, w.Ho * w.Wo * w.kH * w.kW, [&](int64_t p) {
    const float *dyp = dy + p * w.Ho * w.Wo;
    float *dxp = dx + p * w.H * w.W;
    std::memset(dxp, 0, size_t(w.H * w.W) * sizeof(float));
    for (int64_t oh = 0; oh < w.Ho; ++oh)
      for (int64_t ow = 0; ow < w.Wo; ++ow) {
        const Span s = spanOf(w, oh, ow, countIncludePad);
        if (s.divisor <= 0)
          continue;
        const float share = dyp[oh * w.Wo + ow] / float(s.divisor);
        for (int64_t h = s.h0; h < s.h1; ++h)
          for (int64_t v = s.w0; v < s.w1; ++v)
            dxp[h * w.W + v] += share;
      }
  });
}

} // namespace dtc::kern
