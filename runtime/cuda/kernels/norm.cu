//===- norm.cu - Batch and layer normalization kernels (CUDA) -------------===//
//
// The CUDA twin of kernels/norm.cpp (dtc/cuda.h).
//
//===----------------------------------------------------------------------===//
#include "kernels/common.cuh"

namespace dtc::cuda {

//===--- batch normalization ------------------------------------------------===//

namespace {
// The CUDA kernels are NCHW only: dtc-channels-last and dtc-blocked-layout
// plan their layouts for the CPU's engine, never for this target (conv.cu:
// planarWindow).
void planarChannels(int64_t lanes) {
  if (lanes != 1)
    fatal("batch norm: blocked tensors on the CUDA target");
}

// Element j of channel c of x [n, channels, inner].
__device__ inline int64_t channelAt(int64_t j, int64_t c, int64_t channels, int64_t inner) {
  return ((j / inner) * channels + c) * inner + j % inner;
}

// The sum over the block of each thread's v, in double, for every thread.
__device__ double blockSumAll(float v, double *sm) {
  const double total = blockSumOfWarps(warpSum(double(v)), sm);
  __syncthreads();
  if (threadIdx.x == 0)
    sm[0] = total;
  __syncthreads();
  const double r = sm[0];
  __syncthreads(); // sm is reused
  return r;
}

// One block per channel (blockIdx.x).
__global__ void batchNormKernel(const float *x, const float *weight, const float *bias, float *y,
                                float *mean, float *var, int64_t n, int64_t channels,
                                int64_t inner, float eps, bool relu) {
  __shared__ double sm[32];
  const int64_t c = blockIdx.x, count = n * inner;
  float s = 0;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x)
    s += x[channelAt(j, c, channels, inner)];
  const float m = float(blockSumAll(s, sm) / double(count > 0 ? count : 1));
  float q = 0;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    const float d = x[channelAt(j, c, channels, inner)] - m;
    q += d * d;
  }
  const float v = float(blockSumAll(q, sm) / double(count > 0 ? count : 1));
  if (threadIdx.x == 0) {
    mean[c] = m;
    var[c] = v;
  }
  const float scale = weight[c] / sqrtf(v + eps), shift = bias[c] - m * scale;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    const int64_t at = channelAt(j, c, channels, inner);
    const float v = x[at] * scale + shift;
    y[at] = relu ? fmaxf(v, 0.0f) : v;
  }
}

// dy through the ReLU whose result is r (none: r null).
__device__ inline float throughRelu(const float *r, const float *dy, int64_t at) {
  return r == nullptr || r[at] > 0.0f ? dy[at] : 0.0f;
}

__global__ void batchNormGradKernel(const float *x, const float *dy, const float *mean,
                                    const float *var, const float *weight, const float *r,
                                    float *dx, float *dweight, float *dbias, int64_t n,
                                    int64_t channels, int64_t inner, float eps) {
  __shared__ double sm[32];
  const int64_t c = blockIdx.x, count = n * inner;
  const float m = mean[c], invstd = 1.0f / sqrtf(var[c] + eps);
  float a = 0, b = 0;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    const int64_t at = channelAt(j, c, channels, inner);
    const float g = throughRelu(r, dy, at);
    a += g;
    b += g * (x[at] - m);
  }
  const double sdy = blockSumAll(a, sm), sdyx = blockSumAll(b, sm);
  if (threadIdx.x == 0) {
    dbias[c] = float(sdy);
    dweight[c] = float(sdyx * invstd);
  }
  const double total = double(count > 0 ? count : 1);
  const float scale = weight[c] * invstd, meanDy = float(sdy / total),
              k2 = float(sdyx / total) * invstd * invstd;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    const int64_t at = channelAt(j, c, channels, inner);
    dx[at] = scale * (throughRelu(r, dy, at) - meanDy - (x[at] - m) * k2);
  }
}

__global__ void batchNormInferenceKernel(const float *x, const float *weight, const float *bias,
                                         const float *mean, const float *var, float *y,
                                         int64_t total, int64_t channels, int64_t inner,
                                         float eps, bool relu) {
  for (int64_t i = globalThread(); i < total; i += gridThreads()) {
    const int64_t c = (i / inner) % channels;
    const float scale = weight[c] / sqrtf(var[c] + eps);
    const float v = x[i] * scale + (bias[c] - mean[c] * scale);
    y[i] = relu ? fmaxf(v, 0.0f) : v;
  }
}

// Layer normalization: one block per row (blockIdx.x) of x [rows, d].
__global__ void layerNormKernel(const float *x, const float *weight, const float *bias, float *y,
                                float *mean, float *rstd, int64_t d, float eps) {
  __shared__ double sm[32];
  const float *xr = x + int64_t(blockIdx.x) * d;
  float s = 0;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
    s += xr[i];
  const float m = float(blockSumAll(s, sm) / double(d));
  float q = 0;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    const float v = xr[i] - m;
    q += v * v;
  }
  const float is = rsqrtf(float(blockSumAll(q, sm) / double(d)) + eps);
  if (threadIdx.x == 0) {
    mean[blockIdx.x] = m;
    rstd[blockIdx.x] = is;
  }
  float *yr = y + int64_t(blockIdx.x) * d;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
    yr[i] = (xr[i] - m) * is * weight[i] + bias[i];
}

// dx of one row per block.
__global__ void layerNormGradKernel(const float *x, const float *dy, const float *mean,
                                    const float *rstd, const float *weight, float *dx,
                                    int64_t d) {
  __shared__ double sm[32];
  const int64_t at = int64_t(blockIdx.x) * d;
  const float m = mean[blockIdx.x], is = rstd[blockIdx.x];
  float a = 0, b = 0;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    const float g = dy[at + i] * weight[i];
    a += g;
    b += g * ((x[at + i] - m) * is);
  }
  const float mg = float(blockSumAll(a, sm) / double(d)),
              mgx = float(blockSumAll(b, sm) / double(d));
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    const float xh = (x[at + i] - m) * rstd[blockIdx.x];
    dx[at + i] = is * (dy[at + i] * weight[i] - mg - xh * mgx);
  }
}

// dweight and dbias of one column per block (blockIdx.x), over every row.
__global__ void layerNormParamGradKernel(const float *x, const float *dy, const float *mean,
                                         const float *rstd, float *dweight, float *dbias,
                                         int64_t rows, int64_t d) {
  __shared__ double sm[32];
  const int64_t i = blockIdx.x;
  float a = 0, b = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    const float g = dy[r * d + i];
    a += g;
    b += g * ((x[r * d + i] - mean[r]) * rstd[r]);
  }
  const double db = blockSumAll(a, sm), dw = blockSumAll(b, sm);
  if (threadIdx.x == 0) {
    dbias[i] = float(db);
    dweight[i] = float(dw);
  }
}

// RMS normalization: one block per row (blockIdx.x) of x [rows, d].
__global__ void rmsNormKernel(const float *x, const float *weight, float *y, float *rstd,
                              int64_t d, float eps) {
  __shared__ double sm[32];
  const float *xr = x + int64_t(blockIdx.x) * d;
  float q = 0;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
    q += xr[i] * xr[i];
  const float is = rsqrtf(float(blockSumAll(q, sm) / double(d)) + eps);
  if (threadIdx.x == 0)
    rstd[blockIdx.x] = is;
  float *yr = y + int64_t(blockIdx.x) * d;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
    yr[i] = xr[i] * is * weight[i];
}

// dx of one row per block.
__global__ void rmsNormGradKernel(const float *x, const float *dy, const float *rstd,
                                  const float *weight, float *dx, int64_t d) {
  __shared__ double sm[32];
  const int64_t at = int64_t(blockIdx.x) * d;
  const float is = rstd[blockIdx.x];
  float a = 0;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
    a += dy[at + i] * weight[i] * (x[at + i] * is);
  const float mgx = float(blockSumAll(a, sm) / double(d));
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
    dx[at + i] = is * (dy[at + i] * weight[i] - x[at + i] * is * mgx);
}

// dweight of one column per block (blockIdx.x), over every row.
__global__ void rmsNormWeightGradKernel(const float *x, const float *dy, const float *rstd,
                                        float *dweight, int64_t rows, int64_t d) {
  __shared__ double sm[32];
  const int64_t i = blockIdx.x;
  float a = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    a += dy[r * d + i] * (x[r * d + i] * rstd[r]);
  const double dw = blockSumAll(a, sm);
  if (threadIdx.x == 0)
    dweight[i] = float(dw);
}

__global__ void updateRunningStatsKernel(const float *mean, const float *var, float *runningMean,
                                         float *runningVar, int64_t *numBatchesTracked,
                                         int64_t channels, float unbias, float momentum) {
  for (int64_t c = globalThread(); c < channels; c += gridThreads()) {
    runningMean[c] = (1.0f - momentum) * runningMean[c] + momentum * mean[c];
    runningVar[c] = (1.0f - momentum) * runningVar[c] + momentum * (var[c] * unbias);
  }
  if (globalThread() == 0)
    ++*numBatchesTracked;
}
} // namespace

void batchNorm(const rt::DeviceContext &c, const float *x, const float *weight, const float *bias,
               float *y, float *mean, float *var, int64_t n, int64_t channels, int64_t inner,
               float eps, bool relu, int64_t lanes) {
  planarChannels(lanes);
  if (channels <= 0)
    return;
  batchNormKernel<<<unsigned(channels), kThreads, 0, c.stream>>>(x, weight, bias, y, mean, var,
                                                                 n, channels, inner, eps, relu);
  checkLaunch("batchNorm");
}

void batchNormGrad(const rt::DeviceContext &c, const float *x, const float *dy, const float *mean,
                   const float *var, const float *weight, const float *reluResult, float *dx,
                   float *dweight, float *dbias, int64_t n, int64_t channels, int64_t inner,
                   float eps, int64_t lanes) {
  planarChannels(lanes);
  if (channels <= 0)
    return;
  batchNormGradKernel<<<unsigned(channels), kThreads, 0, c.stream>>>(
      x, dy, mean, var, weight, reluResult, dx, dweight, dbias, n, channels, inner, eps);
  checkLaunch("batchNormGrad");
}

void layerNorm(const rt::DeviceContext &c, const float *x, const float *weight, const float *bias,
               float *y, float *mean, float *rstd, int64_t rows, int64_t d, float eps) {
  if (rows <= 0 || d <= 0)
    return;
  layerNormKernel<<<unsigned(rows), kThreads, 0, c.stream>>>(x, weight, bias, y, mean, rstd, d,
                                                             eps);
  checkLaunch("layerNorm");
}

void layerNormGrad(const rt::DeviceContext &c, const float *x, const float *dy, const float *mean,
                   const float *rstd, const float *weight, float *dx, float *dweight,
                   float *dbias, int64_t rows, int64_t d) {
  if (d <= 0)
    return;
  if (rows > 0) {
    layerNormGradKernel<<<unsigned(rows), kThreads, 0, c.stream>>>(x, dy, mean, rstd, weight,
                                                                   dx, d);
    checkLaunch("layerNormGrad");
  }
  layerNormParamGradKernel<<<unsigned(d), kThreads, 0, c.stream>>>(x, dy, mean, rstd, dweight,
                                                                   dbias, rows, d);
  checkLaunch("layerNormGrad (weight, bias)");
}

void rmsNorm(const rt::DeviceContext &c, const float *x, const float *weight, float *y,
             float *rstd, int64_t rows, int64_t d, float eps) {
  if (rows <= 0 || d <= 0)
    return;
  rmsNormKernel<<<unsigned(rows), kThreads, 0, c.stream>>>(x, weight, y, rstd, d, eps);
  checkLaunch("rmsNorm");
}

void rmsNormGrad(const rt::DeviceContext &c, const float *x, const float *dy, const float *rstd,
                 const float *weight, float *dx, float *dweight, int64_t rows, int64_t d) {
  if (d <= 0)
    return;
  if (rows > 0) {
    rmsNormGradKernel<<<unsigned(rows), kThreads, 0, c.stream>>>(x, dy, rstd, weight, dx, d);
    checkLaunch("rmsNormGrad");
  }
  rmsNormWeightGradKernel<<<unsigned(d), kThreads, 0, c.stream>>>(x, dy, rstd, dweight, rows, d);
  checkLaunch("rmsNormGrad (weight)");
}

void batchNormInference(const rt::DeviceContext &c, const float *x, const float *weight,
                        const float *bias, const float *mean, const float *var, float *y,
                        int64_t n, int64_t channels, int64_t inner, float eps, bool relu,
                        int64_t lanes) {
  planarChannels(lanes);
  const int64_t total = n * channels * inner;
  if (total <= 0)
    return;
  batchNormInferenceKernel<<<gridFor(total), kThreads, 0, c.stream>>>(x, weight, bias, mean, var,
                                                                      y, total, channels, inner,
                                                                      eps, relu);
  checkLaunch("batchNormInference");
}

void updateRunningStats(const rt::DeviceContext &c, const float *mean, const float *var,
                        float *runningMean, float *runningVar, int64_t *numBatchesTracked,
                        int64_t channels, int64_t count, float momentum) {
  const float unbias = count > 1 ? float(double(count) / double(count - 1)) : 1.0f;
  updateRunningStatsKernel<<<gridFor(channels), kThreads, 0, c.stream>>>(
      mean, var, runningMean, runningVar, numBatchesTracked, channels, unbias, momentum);
  checkLaunch("updateRunningStats");
}

} // namespace dtc::cuda
