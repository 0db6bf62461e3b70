//===- norm.cpp - Batch normalization kernels (CPU) -----------------------===//
//
// x is [n, channels, inner] (inner: the plane of a BatchNorm2d, 1 for a
// BatchNorm1d on [N, C]); each channel's statistics are over n * inner
// elements, in runs of `inner` contiguous floats. The channels are split
// over the --threads cores. A run's sum is accumulated in float, in 32 lanes
// (vectorized), and the runs' sums in double, so that a channel of 50,000
// elements loses no more than a run of 784 does.
//
//===----------------------------------------------------------------------===//
#include "dtc/kernels.h"
#include "parallel.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

namespace dtc::kern {
namespace {

// Sums of a run in 32 float lanes: eight vectors of 4 (GCC's vector
// extension: one SSE or NEON register each, on every target the runtime is
// built for), each a chain of its own, then pairwise. One chain is bound by
// the latency of its adds (3-4 cycles): the 8 lanes of the first version
// (two chains) left the gradient's sums at ~3 cycles an element. The order
// of the adds, and so the result, is fixed.
using v4 = float __attribute__((vector_size(16)));
using v4i = int32_t __attribute__((vector_size(16)));
constexpr int kChains = 8;
inline v4 load4(const float *p) {
  v4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
// S sums over a run of k elements at once: vec(i) gives the S terms of
// elements i..i+3, scalar(i) those of element i (the tail); the run's
// sums are added to out[0..S) in double.
template <int S, class Vec, class Scalar>
void runSums(int64_t k, const Vec &vec, const Scalar &scalar, double *out) {
  v4 acc[S][kChains] = {};
  int64_t i = 0;
  // Unrolled, so that the chains live in registers.
  for (; i + 4 * kChains <= k; i += 4 * kChains) {
#pragma GCC unroll 8
    for (int q = 0; q < kChains; ++q) {
      const std::array<v4, S> t = vec(i + 4 * q);
#pragma GCC unroll 2
      for (int s = 0; s < S; ++s)
        acc[s][q] += t[s];
    }
  }
  std::array<float, S> tail{};
  for (; i < k; ++i) {
    const std::array<float, S> t = scalar(i);
    for (int s = 0; s < S; ++s)
      tail[s] += t[s];
  }
  for (int s = 0; s < S; ++s) {
    v4 *a = acc[s];
    const v4 v = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
    out[s] += double(((v[0] + v[1]) + (v[2] + v[3])) + tail[s]);
  }
}
void runSum(const float *x, int64_t k, double &out) {
  runSums<1>(
      k, [x](int64_t i) { return std::array<v4, 1>{load4(x + i)}; },
      [x](int64_t i) { return std::array<float, 1>{x[i]}; }, &out);
}
void runCenteredSquares(const float *x, int64_t k, float mean, double &out) {
  runSums<1>(
      k,
      [x, mean](int64_t i) {
        const v4 d = load4(x + i) - mean;
        return std::array<v4, 1>{d * d};
      },
      [x, mean](int64_t i) {
        const float d = x[i] - mean;
        return std::array<float, 1>{d * d};
      },
      &out);
}
// sum g and sum g (x - mean), g = dy, or dy through a ReLU whose result is
// r (r > 0 ? dy : 0; selected, not branched on: the mask is random).
void gradSums(const float *r, const float *dy, const float *x, int64_t k, float mean,
              double *out) {
  if (r)
    runSums<2>(
        k,
        [=](int64_t i) {
          const v4i keep = load4(r + i) > 0.0f;
          const v4 g = (v4)((v4i)load4(dy + i) & keep);
          return std::array<v4, 2>{g, g * (load4(x + i) - mean)};
        },
        [=](int64_t i) {
          const float g = r[i] > 0.0f ? dy[i] : 0.0f;
          return std::array<float, 2>{g, g * (x[i] - mean)};
        },
        out);
  else
    runSums<2>(
        k,
        [=](int64_t i) {
          const v4 g = load4(dy + i);
          return std::array<v4, 2>{g, g * (load4(x + i) - mean)};
        },
        [=](int64_t i) { return std::array<float, 2>{dy[i], dy[i] * (x[i] - mean)}; }, out);
}
// y = x * scale + shift (with relu, its max with 0) over one run.
void scaleShiftRun(const float *x, float *y, int64_t k, float scale, float shift, bool relu) {
  if (relu)
    for (int64_t i = 0; i < k; ++i)
      y[i] = std::max(x[i] * scale + shift, 0.0f);
  else
    for (int64_t i = 0; i < k; ++i)
      y[i] = x[i] * scale + shift;
}
// The gradient through a ReLU: dy where its result r is positive, else 0.
// (Both loaded, then selected: no branch on the mask, which is random.)
inline float through(const float *r, const float *dy, int64_t i) {
  const float g = dy[i];
  return r[i] > 0.0f ? g : 0.0f;
}

// The kernels walk the tensor in memory order, run by run (run j = sample
// j / channels, channel j % channels), split over the --threads cores in
// contiguous blocks of runs: streams the prefetchers follow, where a
// channel's 64 runs 100 KB apart were not (the gradient ran at a third of
// the L3's bandwidth). Each run's sums go to its slot of a per-run table;
// a channel's slots are then added in sample order, in double: the same
// sums, in the same order, whatever the number of threads.
template <class F> void overRuns(int64_t runs, int64_t inner, const F &f) {
  const int64_t minRuns = std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(1, inner));
  rt::parallelFor(runs, minRuns, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j)
      f(j);
  });
}
// Per-run sums of the step's thread (the kernels are called from it only),
// kept between calls: no allocation per step.
std::vector<double> &runTable(size_t size) {
  thread_local std::vector<double> table;
  if (table.size() < size)
    table.resize(size);
  return table;
}
// Per-channel coefficients of the step's thread, kept between calls.
std::vector<float> &channelCoefficients(size_t size) {
  thread_local std::vector<float> coef;
  if (coef.size() < size)
    coef.resize(size);
  return coef;
}
// out[c] = the sum over samples, in order, of the S-wide slots of channel c.
template <int S>
void channelSums(const std::vector<double> &table, int64_t n, int64_t channels, int64_t c,
                 double *out) {
  for (int s = 0; s < S; ++s)
    out[s] = 0;
  for (int64_t k = 0; k < n; ++k)
    for (int s = 0; s < S; ++s)
      out[s] += table[size_t((k * channels + c) * S + s)];
}

} // namespace

void batchNorm(const rt::HostContext &, const float *x, const float *weight, const float *bias,
               float *y, float *mean, float *var, int64_t n, int64_t channels, int64_t inner,
               float eps, bool relu) {
  const double count = double(std::max<int64_t>(1, n * inner));
  const int64_t runs = n * channels;
  std::vector<double> &table = runTable(size_t(runs));
  overRuns(runs, inner, [&](int64_t j) {
    table[size_t(j)] = 0;
    runSum(x + j * inner, inner, table[size_t(j)]);
  });
  for (int64_t c = 0; c < channels; ++c) {
    double s;
    channelSums<1>(table, n, channels, c, &s);
    mean[c] = float(s / count);
  }
  overRuns(runs, inner, [&](int64_t j) {
    table[size_t(j)] = 0;
    runCenteredSquares(x + j * inner, inner, mean[j % channels], table[size_t(j)]);
  });
  for (int64_t c = 0; c < channels; ++c) {
    double q;
    channelSums<1>(table, n, channels, c, &q);
    var[c] = float(q / count);
  }
  // The scale and shift of each channel, in the table's room (as floats).
  float *scale = reinterpret_cast<float *>(table.data()), *shift = scale + channels;
  for (int64_t c = 0; c < channels; ++c) {
    scale[c] = weight[c] / std::sqrt(var[c] + eps);
    shift[c] = bias[c] - mean[c] * scale[c];
  }
  overRuns(runs, inner, [&](int64_t j) {
    const int64_t c = j % channels;
    scaleShiftRun(x + j * inner, y + j * inner, inner, scale[c], shift[c], relu);
  });
}

void batchNormInference(const rt::HostContext &, const float *x, const float *weight,
                        const float *bias, const float *mean, const float *var, float *y,
                        int64_t n, int64_t channels, int64_t inner, float eps, bool relu) {
  std::vector<double> &table = runTable(size_t(channels));
  float *scale = reinterpret_cast<float *>(table.data()), *shift = scale + channels;
  for (int64_t c = 0; c < channels; ++c) {
    scale[c] = weight[c] / std::sqrt(var[c] + eps);
    shift[c] = bias[c] - mean[c] * scale[c];
  }
  overRuns(n * channels, inner, [&](int64_t j) {
    const int64_t c = j % channels;
    scaleShiftRun(x + j * inner, y + j * inner, inner, scale[c], shift[c], relu);
  });
}

// With xhat = (x - mean) invstd: dbias = sum dy, dweight = sum dy xhat, and
// dx = weight invstd (dy - dbias / count - xhat dweight / count); dy through
// the ReLU when its result r is given.
void batchNormGrad(const rt::HostContext &, const float *x, const float *dy, const float *mean,
                   const float *var, const float *weight, const float *r, float *dx,
                   float *dweight, float *dbias, int64_t n, int64_t channels, int64_t inner,
                   float eps) {
  const double count = double(std::max<int64_t>(1, n * inner));
  const int64_t runs = n * channels;
  std::vector<double> &table = runTable(size_t(2 * runs));
  // Pass 1: sum dy and sum dy (x - mean) of each run, through the ReLU.
  overRuns(runs, inner, [&](int64_t j) {
    double *sums = &table[size_t(2 * j)];
    sums[0] = sums[1] = 0;
    const int64_t at = j * inner;
    gradSums(r ? r + at : nullptr, dy + at, x + at, inner, mean[j % channels], sums);
  });
  // Per channel: dx = scale (g - meanDy - (x - m) k2), g = dy through the ReLU.
  std::vector<float> &coef = channelCoefficients(size_t(4 * channels));
  for (int64_t c = 0; c < channels; ++c) {
    double sums[2];
    channelSums<2>(table, n, channels, c, sums);
    const double sdy = sums[0], sdyx = sums[1];
    const float invstd = 1.0f / std::sqrt(var[c] + eps);
    dbias[c] = float(sdy);
    dweight[c] = float(sdyx * invstd);
    coef[size_t(4 * c)] = weight[c] * invstd;
    coef[size_t(4 * c + 1)] = float(sdy / count);
    coef[size_t(4 * c + 2)] = float(sdyx / count) * invstd * invstd;
    coef[size_t(4 * c + 3)] = mean[c];
  }
  // Pass 2.
  overRuns(runs, inner, [&](int64_t j) {
    const float *cf = &coef[size_t(4 * (j % channels))];
    const float scale = cf[0], meanDy = cf[1], k2 = cf[2], m = cf[3];
    const int64_t at = j * inner;
    const float *xr = x + at, *dyr = dy + at;
    float *dxr = dx + at;
    if (r) {
      const float *rr = r + at;
      int64_t i = 0;
      for (; i + 4 <= inner; i += 4) { // the mask selected in vectors
        const v4i keep = load4(rr + i) > 0.0f;
        const v4 g = (v4)((v4i)load4(dyr + i) & keep);
        const v4 d = scale * (g - meanDy - (load4(xr + i) - m) * k2);
        std::memcpy(dxr + i, &d, sizeof d);
      }
      for (; i < inner; ++i)
        dxr[i] = scale * (through(rr, dyr, i) - meanDy - (xr[i] - m) * k2);
    } else {
      for (int64_t i = 0; i < inner; ++i)
        dxr[i] = scale * (dyr[i] - meanDy - (xr[i] - m) * k2);
    }
  });
}

void updateRunningStats(const rt::HostContext &, const float *mean, const float *var,
                        float *runningMean, float *runningVar, int64_t *numBatchesTracked,
                        int64_t channels, int64_t count, float momentum) {
  // torch: the unbiased variance, var * count / (count - 1).
  const float unbias = count > 1 ? float(double(count) / double(count - 1)) : 1.0f;
  for (int64_t c = 0; c < channels; ++c) {
    runningMean[c] = (1.0f - momentum) * runningMean[c] + momentum * mean[c];
    runningVar[c] = (1.0f - momentum) * runningVar[c] + momentum * (var[c] * unbias);
  }
  ++*numBatchesTracked;
}

} // namespace dtc::kern
