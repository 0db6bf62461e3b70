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

#include "kernels/gemm/engine.h"
#include "kernels/parallel.h"
#include "kernels/windows.h"
#include "kernels/simd.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

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

// Channels last or blocked without an engine convolution (OpenBLAS, or
// oneDNN without an implementation): the NCHW kernel between conversions,
// through buffers of the calling thread (dtc-channels-last and
// dtc-blocked-layout plan these layouts only where the engine has the
// convolutions: this is the slow, correct path).
namespace {
float *transposeBuffer(int which, size_t floats) {
  thread_local std::vector<float> buffers[3];
  if (buffers[which].size() < floats)
    buffers[which].resize(floats);
  return buffers[which].data();
}
// NHWC [N, H, W, C] -> NCHW [N, C, H, W], and back.
void toNchw(const float *x, float *y, int64_t N, int64_t C, int64_t H, int64_t W) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t p = 0; p < H * W; ++p)
      for (int64_t ch = 0; ch < C; ++ch)
        y[(n * C + ch) * H * W + p] = x[(n * H * W + p) * C + ch];
}
void toNhwc(const float *x, float *y, int64_t N, int64_t C, int64_t H, int64_t W) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t p = 0; p < H * W; ++p)
        y[(n * H * W + p) * C + ch] = x[(n * C + ch) * H * W + p];
}
} // namespace

void blockedToNchw(const float *x, float *y, int64_t N, int64_t C, int64_t H, int64_t W) {
  const int64_t B = Window2d::kBlock, plane = H * W;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ch = 0; ch < C; ++ch) {
      const float *in = x + ((n * C + ch - ch % B) * plane) + ch % B;
      float *out = y + (n * C + ch) * plane;
      for (int64_t p = 0; p < plane; ++p)
        out[p] = in[p * B];
    }
}
void nchwToBlocked(const float *x, float *y, int64_t N, int64_t C, int64_t H, int64_t W) {
  const int64_t B = Window2d::kBlock, plane = H * W;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ch = 0; ch < C; ++ch) {
      const float *in = x + (n * C + ch) * plane;
      float *out = y + ((n * C + ch - ch % B) * plane) + ch % B;
      for (int64_t p = 0; p < plane; ++p)
        out[p * B] = in[p];
    }
}

namespace {
// A tensor [N, C, H, W] of the given layout as NCHW: itself, or converted
// into buffer `which`.
const float *asNchw(int which, const float *x, bool nhwc, bool blocked, int64_t N, int64_t C,
                    int64_t H, int64_t W) {
  if (!nhwc && !blocked)
    return x;
  float *t = transposeBuffer(which, size_t(N * C * H * W));
  if (nhwc)
    toNchw(x, t, N, C, H, W);
  else
    blockedToNchw(x, t, N, C, H, W);
  return t;
}
// Where an output of the given layout is computed in NCHW (itself, or
// buffer `which`), and its conversion back once computed.
float *nchwOutput(int which, float *y, bool nhwc, bool blocked, size_t floats) {
  return nhwc || blocked ? transposeBuffer(which, floats) : y;
}
void storeFromNchw(const float *t, float *y, bool nhwc, bool blocked, int64_t N, int64_t C,
                   int64_t H, int64_t W) {
  if (nhwc)
    toNhwc(t, y, N, C, H, W);
  else if (blocked)
    nchwToBlocked(t, y, N, C, H, W);
}
std::array<int64_t, Window2d::kValues> planar(const int64_t *window) {
  std::array<int64_t, Window2d::kValues> v;
  std::copy(window, window + Window2d::kValues, v.begin());
  v[15] = 0;
  return v;
}
} // namespace

void conv2d(const rt::HostContext &c, const float *x, const float *weight, const float *bias,
            float *y, float *cols, int64_t N, const int64_t *window) {
  const Window2d w = Window2d::from(window);
  if (N > 0 && rt::gemm_engine::conv2d(w, N, x, weight, bias, y))
    return;
  if (w.layout) {
    const bool last = w.channelsLast();
    const float *xt = asNchw(0, x, last, w.inBlocked(), N, w.C, w.H, w.W);
    float *yt = nchwOutput(1, y, last, w.outBlocked(), size_t(N * w.O * w.Ho * w.Wo));
    conv2d(c, xt, weight, bias, yt, cols, N, planar(window).data());
    storeFromNchw(yt, y, last, w.outBlocked(), N, w.O, w.Ho, w.Wo);
    return;
  }
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
  if (w.layout) {
    const bool last = w.channelsLast();
    const float *dyt = asNchw(0, dy, last, w.outBlocked(), N, w.O, w.Ho, w.Wo);
    float *dxt = nchwOutput(1, dx, last, w.inBlocked(), size_t(N * w.C * w.H * w.W));
    conv2dGradInput(c, dyt, weight, dxt, cols, N, planar(window).data());
    storeFromNchw(dxt, dx, last, w.inBlocked(), N, w.C, w.H, w.W);
    return;
  }
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
  if (w.layout) {
    const bool last = w.channelsLast();
    const float *xt = asNchw(0, x, last, w.inBlocked(), N, w.C, w.H, w.W);
    const float *dyt = asNchw(1, dy, last, w.outBlocked(), N, w.O, w.Ho, w.Wo);
    conv2dGradWeight(c, xt, dyt, dw, dbias, cols, N, planar(window).data());
    return;
  }
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

//===--- pooling, channels last ---------------------------------------------===//
//
// x [N, H, W, C]: each window position is a vector of C channels, and the
// loops over a window run over whole vectors (vectorized over the
// channels). The same comparisons and sums, in the same order, as the NCHW
// kernels below: the results are equal.

namespace {
// fn(n, oh) for each output row of each sample, over the cores; for kernels
// whose rows write disjoint parts of the output.
template <class F> void forEachOutputRow(const Window2d &w, int64_t N, const F &fn) {
  const int64_t perRow = std::max<int64_t>(1, w.Wo * w.kH * w.kW * w.C);
  const int64_t minRows = std::max<int64_t>(1, 16384 / perRow);
  rt::parallelFor(N * w.Ho, minRows, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      fn(r / w.Ho, r % w.Ho);
  });
}
// fn(n) for each sample, over the cores (overlapping windows add into the
// same input positions: a sample is one thread's).
template <class F> void forEachSample(const Window2d &w, int64_t N, const F &fn) {
  const int64_t perSample = std::max<int64_t>(1, w.Ho * w.Wo * w.kH * w.kW * w.C);
  rt::parallelFor(N, std::max<int64_t>(1, 16384 / perSample), [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n)
      fn(n);
  });
}
struct Clip {
  int64_t h0, h1, v0, v1;
};
Clip clipped(const Window2d &w, int64_t oh, int64_t ow) {
  return {std::max<int64_t>(oh * w.sH - w.pH, 0), std::min(oh * w.sH - w.pH + w.kH, w.H),
          std::max<int64_t>(ow * w.sW - w.pW, 0), std::min(ow * w.sW - w.pW + w.kW, w.W)};
}

// out = the elementwise max (by >, the earlier kept on ties and NaNs) of
// out and in, over C channels.
inline void maxInto(float *__restrict out, const float *__restrict in, int64_t C) {
  using namespace simd;
  int64_t ch = 0;
  for (; ch + 4 <= C; ch += 4) {
    const v4 a = load4(out + ch), b = load4(in + ch);
    store4(out + ch, select4(b > a, b, a));
  }
  for (; ch < C; ++ch)
    out[ch] = in[ch] > out[ch] ? in[ch] : out[ch];
}

// One output row of 2x2 windows (stride 2, no padding), channels last:
// the window's four vectors compared in registers (by >, the earlier kept
// on ties). (Fixed: a channel count known at compile time, Window2d::kBlock
// for the blocked layout's 16-channel blocks: the loop unrolled.)
template <int64_t Fixed = 0>
void maxPool2x2RowNhwc(const float *__restrict x0, const float *__restrict x1,
                       float *__restrict y, int64_t Wo, int64_t channels) {
  using namespace simd;
  const int64_t C = Fixed ? Fixed : channels;
  for (int64_t ow = 0; ow < Wo; ++ow) {
    const float *a = x0 + 2 * ow * C, *b = a + C, *c = x1 + 2 * ow * C, *d = c + C;
    float *out = y + ow * C;
    int64_t ch = 0;
    for (; ch + 4 <= C; ch += 4) {
      v4 m = load4(a + ch), t = load4(b + ch);
      m = select4(t > m, t, m);
      t = load4(c + ch);
      m = select4(t > m, t, m);
      t = load4(d + ch);
      store4(out + ch, select4(t > m, t, m));
    }
    for (; ch < C; ++ch) {
      float m = a[ch];
      m = b[ch] > m ? b[ch] : m;
      m = c[ch] > m ? c[ch] : m;
      out[ch] = d[ch] > m ? d[ch] : m;
    }
  }
}

void maxPool2dNhwc(const Window2d &w, const float *x, float *y, int64_t N) {
  const int64_t C = w.C;
  if (isPool2x2(w)) {
    forEachOutputRow(w, N, [&](int64_t n, int64_t oh) {
      const int64_t r0 = ((n * w.H + 2 * oh) * w.W) * C;
      float *out = y + ((n * w.Ho + oh) * w.Wo) * C;
      if (C == Window2d::kBlock)
        maxPool2x2RowNhwc<Window2d::kBlock>(x + r0, x + r0 + w.W * C, out, w.Wo, C);
      else
        maxPool2x2RowNhwc(x + r0, x + r0 + w.W * C, out, w.Wo, C);
    });
    return;
  }
  forEachOutputRow(w, N, [&](int64_t n, int64_t oh) {
    const float *xn = x + n * w.H * w.W * C;
    for (int64_t ow = 0; ow < w.Wo; ++ow) {
      float *out = y + ((n * w.Ho + oh) * w.Wo + ow) * C;
      const Clip k = clipped(w, oh, ow);
      std::memcpy(out, xn + (k.h0 * w.W + k.v0) * C, size_t(C) * sizeof(float));
      for (int64_t h = k.h0; h < k.h1; ++h)
        for (int64_t v = k.v0; v < k.v1; ++v)
          maxInto(out, xn + (h * w.W + v) * C, C);
    }
  });
}

// One output row of 2x2 windows (stride 2, no padding), channels last:
// the forward's select chain as masks, dy kept where each input won.
template <int64_t Fixed = 0>
void maxPool2x2GradRowNhwc(const float *__restrict x0, const float *__restrict x1,
                           const float *__restrict dy, float *__restrict d0,
                           float *__restrict d1, int64_t Wo, int64_t channels) {
  using namespace simd;
  const int64_t C = Fixed ? Fixed : channels;
  for (int64_t ow = 0; ow < Wo; ++ow) {
    const int64_t in = 2 * ow * C, out = ow * C;
    int64_t ch = 0;
    for (; ch + 4 <= C; ch += 4) {
      const v4 a = load4(x0 + in + ch), b = load4(x0 + in + C + ch), c = load4(x1 + in + ch),
               d = load4(x1 + in + C + ch), g = load4(dy + out + ch);
      const v4i gb = b > a;
      const v4 mab = select4(gb, b, a);
      const v4i gc = c > mab;
      const v4 mabc = select4(gc, c, mab);
      const v4i gd = d > mabc;
      store4(d0 + in + ch, keep4(~gb & ~gc & ~gd, g));
      store4(d0 + in + C + ch, keep4(gb & ~gc & ~gd, g));
      store4(d1 + in + ch, keep4(gc & ~gd, g));
      store4(d1 + in + C + ch, keep4(gd, g));
    }
    for (; ch < C; ++ch) {
      const float a = x0[in + ch], b = x0[in + C + ch], c = x1[in + ch], d = x1[in + C + ch];
      const float g = dy[out + ch];
      const bool gb = b > a;
      const float mab = gb ? b : a;
      const bool gc = c > mab;
      const float mabc = gc ? c : mab;
      const bool gd = d > mabc;
      d0[in + ch] = !gb && !gc && !gd ? g : 0.0f;
      d0[in + C + ch] = gb && !gc && !gd ? g : 0.0f;
      d1[in + ch] = gc && !gd ? g : 0.0f;
      d1[in + C + ch] = gd ? g : 0.0f;
    }
  }
}

// One sample's gradient of a general window, channels last.
void maxPool2dGradNhwcWindows(const Window2d &w, const float *xn, const float *dyn, float *dxn) {
  const int64_t C = w.C;
  std::memset(dxn, 0, size_t(w.H * w.W * C) * sizeof(float));
  thread_local std::vector<float> best;
  thread_local std::vector<int64_t> at;
  best.resize(size_t(C));
  at.resize(size_t(C));
  for (int64_t oh = 0; oh < w.Ho; ++oh)
    for (int64_t ow = 0; ow < w.Wo; ++ow) {
      const Clip k = clipped(w, oh, ow);
      const int64_t first = k.h0 * w.W + k.v0;
      for (int64_t ch = 0; ch < C; ++ch) {
        best[size_t(ch)] = xn[first * C + ch];
        at[size_t(ch)] = first;
      }
      for (int64_t h = k.h0; h < k.h1; ++h)
        for (int64_t v = k.v0; v < k.v1; ++v) {
          const int64_t p = h * w.W + v;
          const float *in = xn + p * C;
          for (int64_t ch = 0; ch < C; ++ch)
            if (in[ch] > best[size_t(ch)]) {
              best[size_t(ch)] = in[ch];
              at[size_t(ch)] = p;
            }
        }
      const float *g = dyn + (oh * w.Wo + ow) * C;
      for (int64_t ch = 0; ch < C; ++ch)
        dxn[at[size_t(ch)] * C + ch] += g[ch];
    }
}
// Output row oh of one sample's 2x2 gradient, channels last: its two input
// rows.
void maxPool2x2GradNhwcRow(const Window2d &w, const float *xn, const float *dyn, float *dxn,
                           int64_t oh) {
  const int64_t C = w.C, r0 = 2 * oh * w.W * C, r1 = r0 + w.W * C;
  const float *g = dyn + oh * w.Wo * C;
  if (C == Window2d::kBlock)
    maxPool2x2GradRowNhwc<Window2d::kBlock>(xn + r0, xn + r1, g, dxn + r0, dxn + r1, w.Wo, C);
  else
    maxPool2x2GradRowNhwc(xn + r0, xn + r1, g, dxn + r0, dxn + r1, w.Wo, C);
}

void maxPool2dGradNhwc(const Window2d &w, const float *x, const float *dy, float *dx, int64_t N) {
  const int64_t in = w.H * w.W * w.C, out = w.Ho * w.Wo * w.C;
  if (isPool2x2(w)) {
    // Every input position is in at most one window: each output row
    // writes its two input rows (an odd last row or column, in none, is 0).
    if (w.H != 2 * w.Ho || w.W != 2 * w.Wo)
      std::memset(dx, 0, size_t(N * in) * sizeof(float));
    forEachOutputRow(w, N, [&](int64_t n, int64_t oh) {
      maxPool2x2GradNhwcRow(w, x + n * in, dy + n * out, dx + n * in, oh);
    });
    return;
  }
  forEachSample(w, N, [&](int64_t n) {
    maxPool2dGradNhwcWindows(w, x + n * in, dy + n * out, dx + n * in);
  });
}

void avgPool2dNhwc(const Window2d &w, const float *x, float *y, int64_t N, bool countIncludePad) {
  const int64_t C = w.C;
  forEachOutputRow(w, N, [&](int64_t n, int64_t oh) {
    const float *xn = x + n * w.H * w.W * C;
    for (int64_t ow = 0; ow < w.Wo; ++ow) {
      float *__restrict out = y + ((n * w.Ho + oh) * w.Wo + ow) * C;
      const Span s = spanOf(w, oh, ow, countIncludePad);
      std::memset(out, 0, size_t(C) * sizeof(float));
      for (int64_t h = s.h0; h < s.h1; ++h)
        for (int64_t v = s.w0; v < s.w1; ++v) {
          const float *__restrict in = xn + (h * w.W + v) * C;
          for (int64_t ch = 0; ch < C; ++ch)
            out[ch] += in[ch];
        }
      for (int64_t ch = 0; ch < C; ++ch)
        out[ch] = s.divisor > 0 ? out[ch] / float(s.divisor) : 0.0f;
    }
  });
}

void avgPool2dGradNhwc(const Window2d &w, const float *dy, float *dx, int64_t N,
                       bool countIncludePad) {
  const int64_t C = w.C;
  forEachSample(w, N, [&](int64_t n) {
    float *dxn = dx + n * w.H * w.W * C;
    std::memset(dxn, 0, size_t(w.H * w.W * C) * sizeof(float));
    for (int64_t oh = 0; oh < w.Ho; ++oh)
      for (int64_t ow = 0; ow < w.Wo; ++ow) {
        const Span s = spanOf(w, oh, ow, countIncludePad);
        if (s.divisor <= 0)
          continue;
        const float *__restrict g = dy + ((n * w.Ho + oh) * w.Wo + ow) * C;
        for (int64_t h = s.h0; h < s.h1; ++h)
          for (int64_t v = s.w0; v < s.w1; ++v) {
            float *__restrict d = dxn + (h * w.W + v) * C;
            for (int64_t ch = 0; ch < C; ++ch)
              d[ch] += g[ch] / float(s.divisor);
          }
      }
  });
}
} // namespace

namespace {
// Blocked pooling (nChw16c in and out): each block [H, W, 16] of a sample
// is a channels-last image of 16 channels, pooled by the NHWC kernels as
// one of N C / 16 samples (blocks(w, N)).
Window2d blocksAsNhwc(const Window2d &w) {
  if (!w.inBlocked() || !w.outBlocked() || w.C % Window2d::kBlock || w.channelsLast()) {
    std::fprintf(stderr, "train: error: internal error in runtime kernel: pooling between "
                         "layouts (both blocked, or neither)\n");
    std::exit(1);
  }
  Window2d b = w;
  b.C = b.O = Window2d::kBlock;
  b.layout = Window2d::kChannelsLast;
  return b;
}
bool blocked(const Window2d &w) { return w.inBlocked() || w.outBlocked(); }
int64_t blocks(const Window2d &w, int64_t N) { return N * (w.C / Window2d::kBlock); }
} // namespace

void maxPool2dGradBlockPlane(const Window2d &w, const float *xp, const float *dyp, float *dxp) {
  const Window2d b = blocksAsNhwc(w);
  if (!isPool2x2(b)) {
    maxPool2dGradNhwcWindows(b, xp, dyp, dxp);
    return;
  }
  if (b.H != 2 * b.Ho || b.W != 2 * b.Wo)
    std::memset(dxp, 0, size_t(b.H * b.W * b.C) * sizeof(float));
  for (int64_t oh = 0; oh < b.Ho; ++oh)
    maxPool2x2GradNhwcRow(b, xp, dyp, dxp, oh);
}

void maxPool2d(const rt::HostContext &, const float *x, float *y, int64_t N,
               const int64_t *window) {
  const Window2d w = Window2d::from(window);
  if (blocked(w))
    return maxPool2dNhwc(blocksAsNhwc(w), x, y, blocks(w, N));
  if (w.channelsLast())
    return maxPool2dNhwc(w, x, y, N);
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

void maxPool2dGradPlane(const Window2d &w, const float *xp, const float *dyp, float *dxp) {
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
}

void maxPool2dGrad(const rt::HostContext &, const float *x, const float *dy, float *dx,
                   int64_t N, const int64_t *window) {
  const Window2d w = Window2d::from(window);
  if (blocked(w))
    return maxPool2dGradNhwc(blocksAsNhwc(w), x, dy, dx, blocks(w, N));
  if (w.channelsLast())
    return maxPool2dGradNhwc(w, x, dy, dx, N);
  forEachPlane(N * w.C, w.Ho * w.Wo * w.kH * w.kW, [&](int64_t p) {
    maxPool2dGradPlane(w, x + p * w.H * w.W, dy + p * w.Ho * w.Wo, dx + p * w.H * w.W);
  });
}

void avgPool2d(const rt::HostContext &, const float *x, float *y, int64_t N,
               const int64_t *window, bool countIncludePad) {
  const Window2d w = Window2d::from(window);
  if (blocked(w))
    return avgPool2dNhwc(blocksAsNhwc(w), x, y, blocks(w, N), countIncludePad);
  if (w.channelsLast())
    return avgPool2dNhwc(w, x, y, N, countIncludePad);
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
  if (blocked(w))
    return avgPool2dGradNhwc(blocksAsNhwc(w), dy, dx, blocks(w, N), countIncludePad);
  if (w.channelsLast())
    return avgPool2dGradNhwc(w, dy, dx, N, countIncludePad);
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
