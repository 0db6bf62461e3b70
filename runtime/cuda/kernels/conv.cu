//===- conv.cu - Convolution and pooling kernels (CUDA) -------------------===//
//
// The CUDA twin of kernels/conv.cpp (dtc/cuda.h).
//
//===----------------------------------------------------------------------===//
#include "kernels/common.cuh"

namespace dtc::cuda {

//===--- convolution and pooling ------------------------------------------===//
//
// im2col + cuBLAS per sample (the columns of one sample are the op's
// scratch); col2im and the pooling gradients gather (each input element
// sums what reaches it), so no atomics and the same result on every run.

namespace {

using rt::Window2d;

__global__ void im2colKernel(const float *x, float *cols, Window2d w) {
  const int64_t plane = w.Ho * w.Wo, total = w.C * w.kH * w.kW * plane;
  for (int64_t e = globalThread(); e < total; e += gridThreads()) {
    const int64_t ow = e % w.Wo, oh = e / w.Wo % w.Ho, r = e / plane;
    const int64_t j = r % w.kW, i = r / w.kW % w.kH, ch = r / (w.kW * w.kH);
    const int64_t h = oh * w.sH - w.pH + i * w.dH, v = ow * w.sW - w.pW + j * w.dW;
    cols[e] = h >= 0 && h < w.H && v >= 0 && v < w.W ? x[(ch * w.H + h) * w.W + v] : 0.0f;
  }
}

__global__ void col2imKernel(const float *cols, float *dx, Window2d w) {
  const int64_t plane = w.Ho * w.Wo, total = w.C * w.H * w.W;
  for (int64_t e = globalThread(); e < total; e += gridThreads()) {
    const int64_t v = e % w.W, h = e / w.W % w.H, ch = e / (w.W * w.H);
    float sum = 0.0f;
    for (int64_t i = 0; i < w.kH; ++i) {
      const int64_t th = h + w.pH - i * w.dH;
      if (th < 0 || th % w.sH)
        continue;
      const int64_t oh = th / w.sH;
      if (oh >= w.Ho)
        continue;
      for (int64_t j = 0; j < w.kW; ++j) {
        const int64_t tw = v + w.pW - j * w.dW;
        if (tw < 0 || tw % w.sW)
          continue;
        const int64_t ow = tw / w.sW;
        if (ow < w.Wo)
          sum += cols[((ch * w.kH + i) * w.kW + j) * plane + oh * w.Wo + ow];
      }
    }
    dx[e] = sum;
  }
}

// As kern's forEachArgmax: the first maximum of a window by > (a NaN is kept
// only where it comes first), or -1 for a window without input.
__device__ int64_t windowArgmax(const Window2d &w, const float *x, int64_t oh, int64_t ow) {
  const int64_t h0 = oh * w.sH - w.pH, w0 = ow * w.sW - w.pW;
  float best = 0.0f;
  int64_t at = -1;
  for (int64_t h = h0 < 0 ? 0 : h0; h < h0 + w.kH && h < w.H; ++h)
    for (int64_t v = w0 < 0 ? 0 : w0; v < w0 + w.kW && v < w.W; ++v) {
      const float value = x[h * w.W + v];
      if (at < 0 || value > best) {
        best = value;
        at = h * w.W + v;
      }
    }
  return at;
}

// The windows that contain input row h (or column): [first, last] outputs.
__device__ void windowsOver(int64_t h, int64_t k, int64_t s, int64_t p, int64_t out,
                            int64_t &first, int64_t &last) {
  const int64_t hp = h + p; // in the padded input
  first = hp < k ? 0 : (hp - k) / s + 1;
  last = hp / s;
  if (last > out - 1)
    last = out - 1;
}

__global__ void maxPoolKernel(const float *x, float *y, int64_t planes, Window2d w) {
  const int64_t total = planes * w.Ho * w.Wo;
  for (int64_t e = globalThread(); e < total; e += gridThreads()) {
    const int64_t ow = e % w.Wo, oh = e / w.Wo % w.Ho, p = e / (w.Wo * w.Ho);
    const float *xp = x + p * w.H * w.W;
    const int64_t at = windowArgmax(w, xp, oh, ow);
    y[e] = at < 0 ? -INFINITY : xp[at];
  }
}

__global__ void maxPoolGradKernel(const float *x, const float *dy, float *dx, int64_t planes,
                                  Window2d w) {
  const int64_t total = planes * w.H * w.W;
  for (int64_t e = globalThread(); e < total; e += gridThreads()) {
    const int64_t v = e % w.W, h = e / w.W % w.H, p = e / (w.W * w.H);
    const float *xp = x + p * w.H * w.W;
    int64_t oh0, oh1, ow0, ow1;
    windowsOver(h, w.kH, w.sH, w.pH, w.Ho, oh0, oh1);
    windowsOver(v, w.kW, w.sW, w.pW, w.Wo, ow0, ow1);
    float sum = 0.0f;
    for (int64_t oh = oh0; oh <= oh1; ++oh)
      for (int64_t ow = ow0; ow <= ow1; ++ow)
        if (windowArgmax(w, xp, oh, ow) == h * w.W + v)
          sum += dy[(p * w.Ho + oh) * w.Wo + ow];
    dx[e] = sum;
  }
}

// As kern's spanOf: the divisor of window (oh, ow).
__device__ int64_t avgDivisor(const Window2d &w, int64_t oh, int64_t ow, bool countIncludePad,
                              int64_t &h0, int64_t &h1, int64_t &w0, int64_t &w1) {
  h0 = oh * w.sH - w.pH;
  w0 = ow * w.sW - w.pW;
  h1 = h0 + w.kH < w.H + w.pH ? h0 + w.kH : w.H + w.pH;
  w1 = w0 + w.kW < w.W + w.pW ? w0 + w.kW : w.W + w.pW;
  const int64_t padded = (h1 - h0) * (w1 - w0);
  h0 = h0 < 0 ? 0 : h0;
  w0 = w0 < 0 ? 0 : w0;
  h1 = h1 < w.H ? h1 : w.H;
  w1 = w1 < w.W ? w1 : w.W;
  return countIncludePad ? padded : (h1 - h0) * (w1 - w0);
}

__global__ void avgPoolKernel(const float *x, float *y, int64_t planes, Window2d w,
                              bool countIncludePad) {
  const int64_t total = planes * w.Ho * w.Wo;
  for (int64_t e = globalThread(); e < total; e += gridThreads()) {
    const int64_t ow = e % w.Wo, oh = e / w.Wo % w.Ho, p = e / (w.Wo * w.Ho);
    const float *xp = x + p * w.H * w.W;
    int64_t h0, h1, w0, w1;
    const int64_t d = avgDivisor(w, oh, ow, countIncludePad, h0, h1, w0, w1);
    float sum = 0.0f;
    for (int64_t h = h0; h < h1; ++h)
      for (int64_t v = w0; v < w1; ++v)
        sum += xp[h * w.W + v];
    y[e] = d > 0 ? sum / float(d) : 0.0f;
  }
}

__global__ void avgPoolGradKernel(const float *dy, float *dx, int64_t planes, Window2d w,
                                  bool countIncludePad) {
  const int64_t total = planes * w.H * w.W;
  for (int64_t e = globalThread(); e < total; e += gridThreads()) {
    const int64_t v = e % w.W, h = e / w.W % w.H, p = e / (w.W * w.H);
    int64_t oh0, oh1, ow0, ow1;
    windowsOver(h, w.kH, w.sH, w.pH, w.Ho, oh0, oh1);
    windowsOver(v, w.kW, w.sW, w.pW, w.Wo, ow0, ow1);
    float sum = 0.0f;
    for (int64_t oh = oh0; oh <= oh1; ++oh)
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        int64_t h0, h1, w0, w1;
        const int64_t d = avgDivisor(w, oh, ow, countIncludePad, h0, h1, w0, w1);
        if (d > 0 && h >= h0 && h < h1 && v >= w0 && v < w1)
          sum += dy[(p * w.Ho + oh) * w.Wo + ow] / float(d);
      }
    dx[e] = sum;
  }
}

bool columnsAreInput(const Window2d &w) {
  return w.kH == 1 && w.kW == 1 && w.sH == 1 && w.sW == 1 && w.pH == 0 && w.pW == 0;
}

// y [N, O, plane] += bias[o].
__global__ void biasAddKernel(float *y, const float *bias, int64_t total, int64_t O,
                              int64_t plane) {
  for (int64_t i = globalThread(); i < total; i += gridThreads())
    y[i] += bias[(i / plane) % O];
}

// One block per channel o: db[o] = sum of dy [N, O, plane] over n and the plane.
__global__ void biasGradKernel(const float *dy, float *db, int64_t N, int64_t O, int64_t plane) {
  __shared__ double sm[32];
  const int64_t o = blockIdx.x, count = N * plane;
  float s = 0;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x)
    s += dy[((j / plane) * O + o) * plane + j % plane];
  const double total = blockSumOfWarps(warpSum(double(s)), sm);
  if (threadIdx.x == 0)
    db[o] = float(total);
}

// The CUDA kernels are NCHW only: dtc-channels-last and dtc-blocked-layout
// plan their layouts for the CPU's engine, never for this target (norm.cu:
// planarChannels).
Window2d planarWindow(const int64_t *window) {
  const Window2d w = Window2d::from(window);
  if (w.layout)
    fatal("convolution or pooling: channels-last or blocked tensors on the CUDA target");
  return w;
}

} // namespace

void conv2d(const rt::DeviceContext &c, const float *x, const float *weight, const float *bias,
            float *y, float *cols, int64_t N, const int64_t *window) {
  const Window2d w = planarWindow(window);
  const int64_t og = w.O / w.groups, k = w.C / w.groups * w.kH * w.kW, plane = w.Ho * w.Wo;
  for (int64_t n = 0; n < N; ++n) {
    const float *xn = x + n * w.C * w.H * w.W;
    const float *col = xn;
    if (!columnsAreInput(w)) {
      im2colKernel<<<gridFor(w.C * w.kH * w.kW * plane), kThreads, 0, c.stream>>>(xn, cols, w);
      checkLaunch("conv2d (im2col)");
      col = cols;
    }
    for (int64_t g = 0; g < w.groups; ++g)
      gemm(c, false, false, og, plane, k, 1.0f, weight + g * og * k, col + g * k * plane, 0.0f,
           y + (n * w.O + g * og) * plane);
  }
  if (bias && N > 0) {
    const int64_t total = N * w.O * plane;
    biasAddKernel<<<gridFor(total), kThreads, 0, c.stream>>>(y, bias, total, w.O, plane);
    checkLaunch("conv2d (bias)");
  }
}

void conv2dGradInput(const rt::DeviceContext &c, const float *dy, const float *weight, float *dx,
                     float *cols, int64_t N, const int64_t *window) {
  const Window2d w = planarWindow(window);
  const int64_t og = w.O / w.groups, k = w.C / w.groups * w.kH * w.kW, plane = w.Ho * w.Wo;
  const bool direct = columnsAreInput(w);
  for (int64_t n = 0; n < N; ++n) {
    float *dxn = dx + n * w.C * w.H * w.W;
    float *col = direct ? dxn : cols;
    for (int64_t g = 0; g < w.groups; ++g)
      gemm(c, true, false, k, plane, og, 1.0f, weight + g * og * k,
           dy + (n * w.O + g * og) * plane, 0.0f, col + g * k * plane);
    if (!direct) {
      col2imKernel<<<gridFor(w.C * w.H * w.W), kThreads, 0, c.stream>>>(cols, dxn, w);
      checkLaunch("conv2dGradInput (col2im)");
    }
  }
}

void conv2dGradWeight(const rt::DeviceContext &c, const float *x, const float *dy, float *dw,
                      float *dbias, float *cols, int64_t N, const int64_t *window) {
  const Window2d w = planarWindow(window);
  const int64_t og = w.O / w.groups, k = w.C / w.groups * w.kH * w.kW, plane = w.Ho * w.Wo;
  if (N <= 0) {
    fill(c, dw, w.O * k, 0.0f);
    if (dbias)
      fill(c, dbias, w.O, 0.0f);
    return;
  }
  if (dbias && w.O > 0) {
    biasGradKernel<<<unsigned(w.O), kThreads, 0, c.stream>>>(dy, dbias, N, w.O, plane);
    checkLaunch("conv2dGradWeight (bias)");
  }
  for (int64_t n = 0; n < N; ++n) {
    const float *xn = x + n * w.C * w.H * w.W;
    const float *col = xn;
    if (!columnsAreInput(w)) {
      im2colKernel<<<gridFor(w.C * w.kH * w.kW * plane), kThreads, 0, c.stream>>>(xn, cols, w);
      checkLaunch("conv2dGradWeight (im2col)");
      col = cols;
    }
    for (int64_t g = 0; g < w.groups; ++g)
      gemm(c, false, true, og, k, plane, 1.0f, dy + (n * w.O + g * og) * plane,
           col + g * k * plane, n == 0 ? 0.0f : 1.0f, dw + g * og * k);
  }
}

void maxPool2d(const rt::DeviceContext &c, const float *x, float *y, int64_t N,
               const int64_t *window) {
  const Window2d w = planarWindow(window);
  const int64_t total = N * w.C * w.Ho * w.Wo;
  if (total <= 0)
    return;
  maxPoolKernel<<<gridFor(total), kThreads, 0, c.stream>>>(x, y, N * w.C, w);
  checkLaunch("maxPool2d");
}

void maxPool2dGrad(const rt::DeviceContext &c, const float *x, const float *dy, float *dx,
                   int64_t N, const int64_t *window) {
  const Window2d w = planarWindow(window);
  const int64_t total = N * w.C * w.H * w.W;
  if (total <= 0)
    return;
  maxPoolGradKernel<<<gridFor(total), kThreads, 0, c.stream>>>(x, dy, dx, N * w.C, w);
  checkLaunch("maxPool2dGrad");
}

void avgPool2d(const rt::DeviceContext &c, const float *x, float *y, int64_t N,
               const int64_t *window, bool countIncludePad) {
  const Window2d w = planarWindow(window);
  const int64_t total = N * w.C * w.Ho * w.Wo;
  if (total <= 0)
    return;
  avgPoolKernel<<<gridFor(total), kThreads, 0, c.stream>>>(x, y, N * w.C, w, countIncludePad);
  checkLaunch("avgPool2d");
}

void avgPool2dGrad(const rt::DeviceContext &c, const float *dy, float *dx, int64_t N,
                   const int64_t *window, bool countIncludePad) {
  const Window2d w = planarWindow(window);
  const int64_t total = N * w.C * w.H * w.W;
  if (total <= 0)
    return;
  avgPoolGradKernel<<<gridFor(total), kThreads, 0, c.stream>>>(dy, dx, N * w.C, w,
                                                               countIncludePad);
  checkLaunch("avgPool2dGrad");
}

} // namespace dtc::cuda
