//===- conv.cpp - Convolution and pooling kernels (kernels.h) -------------===//
//
// conv2d and its gradients by im2col + GEMM, one sample at a time (the
// columns of one sample are the scratch the memory plan gives the op): for
// each group g, y_g [O/g, Ho Wo] = W_g [O/g, C/g kH kW] x cols_g [C/g kH kW,
// Ho Wo]; dx through cols = W^T dy and col2im; dW_g += dy_g cols_g^T. A 1x1
// convolution of stride 1 without padding reads x itself as its columns.
// The GEMMs are kern::gemm's (the program's engine, its threads). An engine
// with convolutions of its own (oneDNN's primitives, gemm/onednn.cpp) runs
// them instead, and the columns go unused. Pooling
// loops over each (sample, channel) plane, the planes split over the
// --threads cores.
//
//===----------------------------------------------------------------------===//
#include "dtc/kernels.h"

#include "gemm/engine.h"
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

// The first maximum (by >: a NaN is kept only where it comes first, as
// std::max and dtc's reduceMax) of each window of a plane x [H, W], as an
// index into the plane, to fn(output index, input index); windows are
// clipped to the input (padding never wins; the windows shape inference
// admits always hold an input element).
template <class F> void forEachArgmax(const Window2d &w, const float *x, const F &fn) {
  for (int64_t oh = 0; oh < w.Ho; ++oh) {
    const int64_t h0 = std::max<int64_t>(oh * w.sH - w.pH, 0);
    const int64_t h1 = std::min(oh * w.sH - w.pH + w.kH, w.H);
    for (int64_t ow = 0; ow < w.Wo; ++ow) {
      const int64_t v0 = std::max<int64_t>(ow * w.sW - w.pW, 0);
      const int64_t v1 = std::min(ow * w.sW - w.pW + w.kW, w.W);
      int64_t at = h0 * w.W + v0;
      float best = x[at];
      for (int64_t h = h0; h < h1; ++h) {
        const float *row = x + h * w.W;
        for (int64_t v = v0; v < v1; ++v)
          if (row[v] > best) {
            best = row[v];
            at = h * w.W + v;
          }
      }
      fn(oh * w.Wo + ow, at);
    }
  }
}

// 2x2 windows of stride 2 without padding, the common case, one output row
// at a time in select form (no branches: which element wins is as good as
// random on real activations, and a mispredicted branch per comparison made
// the general loop 8x slower); the same first maximum as forEachArgmax.
bool isPool2x2(const Window2d &w) {
  return w.kH == 2 && w.kW == 2 && w.sH == 2 && w.sW == 2 && w.pH == 0 && w.pW == 0;
}
void maxPool2x2Row(const float *__restrict r0, const float *__restrict r1, float *__restrict y,
                   int64_t Wo) {
  for (int64_t ow = 0; ow < Wo; ++ow) {
    const float a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];
    float m = a;
    m = b > m ? b : m;
    m = c > m ? c : m;
    m = d > m ? d : m;
    y[ow] = m;
  }
}
void maxPool2x2GradRow(const float *__restrict r0, const float *__restrict r1,
                       const float *__restrict dy, float *__restrict d0, float *__restrict d1,
                       int64_t Wo) {
  for (int64_t ow = 0; ow < Wo; ++ow) {
    const float a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];
    // Where the forward's select chain ends, as all-ones bit masks (the
    // vectorizer turns them into compares and ands; float selects stayed
    // scalar branches).
    const uint32_t gb = -uint32_t(b > a);
    const float mab = b > a ? b : a;
    const uint32_t gc = -uint32_t(c > mab);
    const float mabc = c > mab ? c : mab;
    const uint32_t gd = -uint32_t(d > mabc);
    const uint32_t mD = gd, mC = gc & ~gd, mB = gb & ~gc & ~gd, mA = ~gb & ~gc & ~gd;
    uint32_t g, v;
    std::memcpy(&g, &dy[ow], 4);
    v = g & mA;
    std::memcpy(&d0[2 * ow], &v, 4);
    v = g & mB;
    std::memcpy(&d0[2 * ow + 1], &v, 4);
    v = g & mC;
    std::memcpy(&d1[2 * ow], &v, 4);
    v = g & mD;
    std::memcpy(&d1[2 * ow + 1], &v, 4);
  }
}

} // namespace

// y[o, :] += bias[o] over the plane of each output channel of one sample
// (just written by the GEMM, so in cache).
void addBias(const Window2d &w, int64_t plane, const float *bias, float *yn) {
  for (int64_t o = 0; o < w.O; ++o) {
    const float b = bias[o];
    float *row = yn + o * plane;
    for (int64_t i = 0; i < plane; ++i)
      row[i] += b;
  }
}

void conv2d(const rt::HostContext &c, const float *x, const float *weight, const float *bias,
            float *y, float *cols, int64_t N, const int64_t *window) {
  const Window2d w = Window2d::from(window);
  if (N > 0 && rt::gemm_engine::conv2d(w, N, x, weight, bias, y))
    return;
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
    if (bias)
      addBias(w, g.plane, bias, yn);
  }
}

void conv2dGradInput(const rt::HostContext &c, const float *dy, const float *weight,
                     float *dx, float *cols, int64_t N, const int64_t *window) {
  const Window2d w = Window2d::from(window);
  if (N > 0 && rt::gemm_engine::conv2dGradInput(w, N, dy, weight, dx))
    return;
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
                      float *dbias, float *cols, int64_t N, const int64_t *window) {
  const Window2d w = Window2d::from(window);
  const Groups g(w);
  if (N <= 0) {
    fill(c, dw, w.O * g.k, 0.0f);
    if (dbias)
      fill(c, dbias, w.O, 0.0f);
    return;
  }
  if (rt::gemm_engine::conv2dGradWeight(w, N, x, dy, dw, dbias))
    return;
  if (dbias)
    fill(c, dbias, w.O, 0.0f);
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
    if (dbias) // sum of dy per channel, in the order of the samples
      for (int64_t o = 0; o < w.O; ++o) {
        float s = 0.0f;
        for (int64_t i = 0; i < g.plane; ++i)
          s += dyn[o * g.plane + i];
        dbias[o] += s;
      }
  }
}

void maxPool2d(const rt::HostContext &, const float *x, float *y, int64_t N,
               const int64_t *window) {
  const Window2d w = Window2d::from(window);
  forEachPlane(N * w.C, w.Ho * w.Wo * w.kH * w.kW, [&](int64_t p) {
    const float *xp = x + p * w.H * w.W;
    float *yp = y + p * w.Ho * w.Wo;
    if (isPool2x2(w)) {
      for (int64_t oh = 0; oh < w.Ho; ++oh)
        maxPool2x2Row(xp + 2 * oh * w.W, xp + (2 * oh + 1) * w.W, yp + oh * w.Wo, w.Wo);
      return;
    }
    forEachArgmax(w, xp, [&](int64_t out, int64_t at) { yp[out] = xp[at]; });
  });
}

void maxPool2dGrad(const rt::HostContext &, const float *x, const float *dy, float *dx,
                   int64_t N, const int64_t *window) {
  const Window2d w = Window2d::from(window);
  forEachPlane(N * w.C, w.Ho * w.Wo * w.kH * w.kW, [&](int64_t p) {
    const float *xp = x + p * w.H * w.W;
    const float *dyp = dy + p * w.Ho * w.Wo;
    float *dxp = dx + p * w.H * w.W;
    if (isPool2x2(w)) {
      // Every element of the first 2 Ho rows and 2 Wo columns is in one
      // window; an odd last row or column is in none.
      if (w.H != 2 * w.Ho || w.W != 2 * w.Wo)
        std::memset(dxp, 0, size_t(w.H * w.W) * sizeof(float));
      for (int64_t oh = 0; oh < w.Ho; ++oh)
        maxPool2x2GradRow(xp + 2 * oh * w.W, xp + (2 * oh + 1) * w.W, dyp + oh * w.Wo,
                          dxp + 2 * oh * w.W, dxp + (2 * oh + 1) * w.W, w.Wo);
      return;
    }
    std::memset(dxp, 0, size_t(w.H * w.W) * sizeof(float));
    forEachArgmax(w, xp, [&](int64_t out, int64_t at) { dxp[at] += dyp[out]; });
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
